/* tapegrad/image.h - PNG image grids and loss plots (libpng and cairo).
 *
 * Both parts are optional at build time (meson -Dpng=..., -Dplot=...).  In a
 * build without one, its functions return TG_EUNSUPPORTED with a message
 * saying so, and tg_png_available() / tg_plot_available() return false.
 *
 * Every writer replaces its destination atomically: it writes a temporary
 * file next to it, fsyncs it and renames it over path, so a reader never sees
 * a half-written image.  On error the destination is left as it was. */
#ifndef TAPEGRAD_IMAGE_H
#define TAPEGRAD_IMAGE_H

#include <stdbool.h>
#include <stdint.h>

#include "tapegrad/export.h"
#include "tapegrad/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Whether this build reads and writes PNGs (libpng); whether it draws plots
 * (cairo). */
TG_API bool tg_png_available(void);
TG_API bool tg_plot_available(void);

/* Tiles images (N, C, H, W), C = 1 (gray) or 3 (RGB), any dtype, into a grid
 * of nrow images per row (as torchvision's make_grid) and ceil(N / nrow)
 * rows, with `padding` black pixels around and between the tiles:
 *   width  = min(nrow, N) * (W + padding) + padding,
 *   height = ceil(N / nrow) * (H + padding) + padding.
 * Value v becomes round(255 * (v - lo) / (hi - lo)) clamped to 0..255 (NaN: 0).
 * TG_EINVAL for a NULL argument, nrow < 1, padding < 0, lo >= hi or
 * non-finite; TG_ESHAPE for a rank other than 4, C not 1 or 3, or N, H or W
 * of 0; TG_EIO when the file cannot be written. */
TG_API int tg_png_write_grid(const char *path, const tg_tensor *images, int nrow, double lo,
                             double hi, int padding);

/* An 8-bit image read back from a PNG. */
typedef struct tg_image {
    int width, height;
    int channels;        /* 1 gray, 2 gray+alpha, 3 RGB, 4 RGBA */
    uint8_t *pixels;     /* height rows of width * channels bytes, owned */
} tg_image;

/* Reads a PNG, converted to 8 bits per channel (palette images become RGB).
 * Free with tg_image_free.  TG_EINVAL for NULL, TG_EIO / TG_EFORMAT. */
TG_API int tg_png_read(tg_image *out, const char *path);
/* Frees img->pixels and zeroes *img; NULL does nothing. */
TG_API void tg_image_free(tg_image *img);

/* Size of the images tg_plot_lines_png and tg_plot_losses_png write. */
#define TG_PLOT_WIDTH 800
#define TG_PLOT_HEIGHT 500

/* A line chart of n_series series of n_points values each (names[i],
 * values[i][0..n_points)) against the index 0..n_points-1, with axes, tick
 * labels, the x axis labelled "iteration", a legend and a title (may be
 * NULL), written as an RGB PNG of
 * TG_PLOT_WIDTH x TG_PLOT_HEIGHT.  Non-finite values are skipped (the line
 * breaks).  TG_EINVAL for NULL arguments, n_series not in 1..10 or
 * n_points < 1; TG_EIO when the file cannot be written. */
TG_API int tg_plot_losses_png(const char *path, const char *title, int n_series,
                              const char *const *names, const double *const *values,
                              int n_points);
/* The same chart with x_label under the x axis instead of "iteration" (NULL:
 * no label), for curves over another x: value i is drawn at x = i (seconds
 * of training, say).  Same errors, named "plot_lines_png". */
TG_API int tg_plot_lines_png(const char *path, const char *title, const char *x_label,
                             int n_series, const char *const *names,
                             const double *const *values, int n_points);

/* Cairo and fontconfig keep font caches for the life of the process, which
 * LeakSanitizer reports as leaks.  A program (or test) that drew plots may call
 * this once at exit, when no cairo object of its own is alive, to free them. */
TG_API void tg_plot_release_caches(void);

#ifdef __cplusplus
}
#endif
#endif
