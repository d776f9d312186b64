/* src/io/png.c - image grids written with libpng's simplified API, PNGs read
 * back; files are replaced atomically (src/io/atomic.c). */
#include <errno.h>
#include <math.h>
#include <png.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"
#include "io/atomic.h"
#include "tapegrad/image.h"

/* ---- grids ------------------------------------------------------------------ */

static int check_grid(const char *path, const tg_tensor *images, int nrow, double lo, double hi,
                      int padding)
{
    TG_CHECK(path != NULL && images != NULL, TG_EINVAL,
             "png_write_grid: path and images must not be NULL");
    TG_CHECK(nrow >= 1, TG_EINVAL, "png_write_grid: nrow=%d must be >= 1", nrow);
    TG_CHECK(padding >= 0 && padding <= 1024, TG_EINVAL,
             "png_write_grid: padding=%d must be in 0..1024", padding);
    TG_CHECK(isfinite(lo) && isfinite(hi) && lo < hi, TG_EINVAL,
             "png_write_grid: lo=%g, hi=%g must be finite with lo < hi", lo, hi);
    TG_CHECK(tg_tensor_ndim(images) == 4, TG_ESHAPE,
             "png_write_grid: images have %d dims; must be (N, C, H, W)", tg_tensor_ndim(images));
    const int64_t *s = tg_tensor_shape(images);
    TG_CHECK(s[1] == 1 || s[1] == 3, TG_ESHAPE, "png_write_grid: C=%lld must be 1 or 3",
             (long long)s[1]);
    TG_CHECK(s[0] >= 1 && s[2] >= 1 && s[3] >= 1, TG_ESHAPE,
             "png_write_grid: N, H and W must be >= 1 (got %lld, %lld, %lld)", (long long)s[0],
             (long long)s[2], (long long)s[3]);
    /* Keeps width * height * 3 far below INT_MAX (libpng's limit is 2^31). */
    int64_t cols = s[0] < nrow ? s[0] : nrow, rows = (s[0] + nrow - 1) / nrow;
    int64_t w = cols * (s[3] + padding) + padding, h = rows * (s[2] + padding) + padding;
    TG_CHECK(w <= 65535 && h <= 65535, TG_ESHAPE,
             "png_write_grid: the grid would be %lld x %lld pixels; at most 65535 each",
             (long long)w, (long long)h);
    return 0;
}

static uint8_t to_byte(double v, double lo, double hi)
{
    double x = 255.0 * (v - lo) / (hi - lo);
    if (!(x > 0)) return 0;   /* also NaN */
    if (x >= 255) return 255;
    return (uint8_t)lround(x);
}

/* Fills the (h, w, C) interleaved grid from vals, the images (N, C, H, W) as
 * doubles: image n goes to tile (n / cols, n % cols), whose top-left pixel is
 * (pad + row * (H + pad), pad + col * (W + pad)). */
static void fill_grid(uint8_t *px, int64_t w, const double *vals, const int64_t *s, int64_t cols,
                      int pad, double lo, double hi)
{
    int64_t C = s[1], H = s[2], W = s[3];
    for (int64_t n = 0; n < s[0]; n++) {
        int64_t y0 = pad + (n / cols) * (H + pad), x0 = pad + (n % cols) * (W + pad);
        for (int64_t c = 0; c < C; c++)
            for (int64_t y = 0; y < H; y++)
                for (int64_t x = 0; x < W; x++) {
                    double v = vals[((n * C + c) * H + y) * W + x];
                    px[((y0 + y) * w + x0 + x) * C + c] = to_byte(v, lo, hi);
                }
    }
}

static int write_png(const char *path, const uint8_t *px, int w, int h, int channels)
{
    FILE *f;
    char *tmp;
    TG_TRY(tg__atomic_open(&f, &tmp, "png_write_grid", path));
    png_image img;
    memset(&img, 0, sizeof img);
    img.version = PNG_IMAGE_VERSION;
    img.width = (png_uint_32)w;
    img.height = (png_uint_32)h;
    img.format = channels == 3 ? PNG_FORMAT_RGB : PNG_FORMAT_GRAY;
    int ok = png_image_write_to_stdio(&img, f, 0, px, 0, NULL);
    int rc = 0;
    if (!ok) rc = tg__error(TG_EIO, "png_write_grid: libpng: %s", img.message);
    png_image_free(&img);
    int frc = tg__atomic_finish(f, &tmp, ok != 0, "png_write_grid", path);
    return rc < 0 ? rc : frc;
}

int tg_png_write_grid(const char *path, const tg_tensor *images, int nrow, double lo, double hi,
                      int padding)
{
    TG_TRY(check_grid(path, images, nrow, lo, hi, padding));
    const int64_t *s = tg_tensor_shape(images);
    int64_t cols = s[0] < nrow ? s[0] : nrow, rows = (s[0] + nrow - 1) / nrow;
    int64_t w = cols * (s[3] + padding) + padding, h = rows * (s[2] + padding) + padding;
    double *vals = tg__malloc((size_t)tg_tensor_numel(images) * sizeof *vals);
    uint8_t *px = tg__calloc((size_t)(w * h * s[1]), 1);   /* padding stays 0 (black) */
    int rc = TG_ENOMEM;
    if (vals && px) {
        tg__gather(images, TG_F64, vals);
        fill_grid(px, w, vals, s, cols, padding, lo, hi);
        rc = write_png(path, px, (int)w, (int)h, (int)s[1]);
    }
    free(vals);
    free(px);
    return rc;
}

/* ---- reading ---------------------------------------------------------------- */

int tg_png_read(tg_image *out, const char *path)
{
    TG_CHECK(out != NULL && path != NULL, TG_EINVAL, "png_read: out and path must not be NULL");
    FILE *f = fopen(path, "rb");
    if (!f) return tg__error(TG_EIO, "png_read: cannot open '%s': %s", path, strerror(errno));
    png_image img;
    memset(&img, 0, sizeof img);
    img.version = PNG_IMAGE_VERSION;
    uint8_t *px = NULL;
    int rc = 0;
    if (!png_image_begin_read_from_stdio(&img, f)) {
        rc = tg__error(TG_EFORMAT, "png_read: '%s': %s", path, img.message);
    } else {
        /* Keep gray/colour and alpha; drop linear and colour-map flags. */
        img.format &= PNG_FORMAT_FLAG_COLOR | PNG_FORMAT_FLAG_ALPHA;
        px = tg__malloc(PNG_IMAGE_SIZE(img));
        if (!px) rc = TG_ENOMEM;
        else if (!png_image_finish_read(&img, NULL, px, 0, NULL))
            rc = tg__error(TG_EFORMAT, "png_read: '%s': %s", path, img.message);
    }
    png_image_free(&img);
    fclose(f);
    if (rc < 0) {
        free(px);
        return rc;
    }
    out->width = (int)img.width;
    out->height = (int)img.height;
    out->channels = (int)PNG_IMAGE_PIXEL_CHANNELS(img.format);
    out->pixels = px;
    return 0;
}

void tg_image_free(tg_image *img)
{
    if (!img) return;
    free(img->pixels);
    memset(img, 0, sizeof *img);
}
