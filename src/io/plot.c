/* src/io/plot.c - tg_plot_lines_png and tg_plot_losses_png: a line chart of
 * curves drawn with cairo (axes, "nice" ticks, an x-axis label, a legend, a
 * title) and written as a PNG. */
#include <cairo.h>
#include <fontconfig/fontconfig.h>
#include <math.h>
#include <string.h>

#include "core/core.h"
#include "io/atomic.h"
#include "tapegrad/image.h"

#define PLOT_MAX_SERIES 10

/* The plot area inside the image, in pixels. */
enum { LEFT = 80, RIGHT = 24, TOP = 48, BOTTOM = 56 };

/* Matplotlib's "tab10" colours, so curves look as in the PyTorch notebooks. */
static const double palette[PLOT_MAX_SERIES][3] = {
    {0.122, 0.467, 0.706}, {1.000, 0.498, 0.055}, {0.173, 0.627, 0.173},
    {0.839, 0.153, 0.157}, {0.580, 0.404, 0.741}, {0.549, 0.337, 0.294},
    {0.890, 0.467, 0.761}, {0.498, 0.498, 0.498}, {0.737, 0.741, 0.133},
    {0.090, 0.745, 0.812},
};

typedef struct axis {
    double lo, hi;      /* data range shown */
    double step;        /* tick spacing: 1, 2 or 5 times a power of ten */
} axis;

/* Widens [lo, hi] to multiples of a step of the form {1, 2, 5} * 10^k chosen
 * so that about `target` ticks fit (Heckbert's "nice numbers"). */
static axis nice_axis(double lo, double hi, int target)
{
    if (!(hi > lo)) {
        double d = fabs(lo) > 0 ? fabs(lo) * 0.5 : 1.0;
        lo -= d;
        hi += d;
    }
    double raw = (hi - lo) / target, mag = pow(10.0, floor(log10(raw))), f = raw / mag;
    double step = (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * mag;
    return (axis){floor(lo / step) * step, ceil(hi / step) * step, step};
}

static double map(double v, const axis *a, double p0, double p1)
{
    return p0 + (v - a->lo) / (a->hi - a->lo) * (p1 - p0);
}

static void text_at(cairo_t *cr, const char *s, double x, double y, double ax, double ay)
{
    cairo_text_extents_t e;
    cairo_text_extents(cr, s, &e);
    /* (ax, ay) in [0, 1] anchor the text box: 0.5, 0.5 centres it on (x, y). */
    cairo_move_to(cr, x - e.x_bearing - ax * e.width, y - e.y_bearing - ay * e.height);
    cairo_show_text(cr, s);
}

static void draw_axes(cairo_t *cr, const axis *ax, const axis *ay, const char *x_label)
{
    const double x0 = LEFT, x1 = TG_PLOT_WIDTH - RIGHT, y0 = TG_PLOT_HEIGHT - BOTTOM, y1 = TOP;
    char buf[32];
    cairo_set_font_size(cr, 12);
    cairo_set_line_width(cr, 1);
    for (double v = ay->lo; v <= ay->hi + ay->step * 1e-6; v += ay->step) {
        double y = round(map(v, ay, y0, y1)) + 0.5;
        cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);   /* grid line */
        cairo_move_to(cr, x0, y);
        cairo_line_to(cr, x1, y);
        cairo_stroke(cr);
        cairo_set_source_rgb(cr, 0, 0, 0);
        snprintf(buf, sizeof buf, "%g", fabs(v) < ay->step * 1e-9 ? 0.0 : v);
        text_at(cr, buf, x0 - 6, y, 1.0, 0.5);
    }
    for (double v = ax->lo; v <= ax->hi + ax->step * 1e-6; v += ax->step) {
        double x = round(map(v, ax, x0, x1)) + 0.5;
        cairo_set_source_rgb(cr, 0, 0, 0);
        cairo_move_to(cr, x, y0);
        cairo_line_to(cr, x, y0 + 5);
        cairo_stroke(cr);
        snprintf(buf, sizeof buf, "%g", v);
        text_at(cr, buf, x, y0 + 8, 0.5, 0.0);
    }
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_rectangle(cr, x0 + 0.5, y1 + 0.5, x1 - x0, y0 - y1);
    cairo_stroke(cr);
    if (x_label) text_at(cr, x_label, (x0 + x1) / 2, TG_PLOT_HEIGHT - 8, 0.5, 1.0);
}

static void draw_series(cairo_t *cr, const double *v, int n, const axis *ax, const axis *ay)
{
    const double x0 = LEFT, x1 = TG_PLOT_WIDTH - RIGHT, y0 = TG_PLOT_HEIGHT - BOTTOM, y1 = TOP;
    bool pen_down = false;
    cairo_set_line_width(cr, 1.5);
    for (int i = 0; i < n; i++) {
        if (!isfinite(v[i])) {
            pen_down = false;   /* a gap in the curve */
            continue;
        }
        double x = map(i, ax, x0, x1), y = map(v[i], ay, y0, y1);
        if (pen_down) cairo_line_to(cr, x, y);
        else cairo_move_to(cr, x, y);
        /* A lone point still shows as a dot. */
        if (!pen_down) cairo_rel_line_to(cr, 0.01, 0);
        pen_down = true;
    }
    cairo_stroke(cr);
}

static void draw_legend(cairo_t *cr, int n, const char *const *names)
{
    double wmax = 0;
    cairo_text_extents_t e;
    cairo_set_font_size(cr, 12);
    for (int i = 0; i < n; i++) {
        cairo_text_extents(cr, names[i], &e);
        if (e.x_advance > wmax) wmax = e.x_advance;
    }
    double bw = wmax + 44, bh = 18.0 * n + 8, bx = TG_PLOT_WIDTH - RIGHT - bw - 10, by = TOP + 10;
    cairo_rectangle(cr, bx, by, bw, bh);
    cairo_set_source_rgba(cr, 1, 1, 1, 0.85);
    cairo_fill_preserve(cr);
    cairo_set_source_rgb(cr, 0.6, 0.6, 0.6);
    cairo_set_line_width(cr, 1);
    cairo_stroke(cr);
    for (int i = 0; i < n; i++) {
        double y = by + 13 + 18.0 * i;
        cairo_set_source_rgb(cr, palette[i][0], palette[i][1], palette[i][2]);
        cairo_set_line_width(cr, 2);
        cairo_move_to(cr, bx + 8, y);
        cairo_line_to(cr, bx + 30, y);
        cairo_stroke(cr);
        cairo_set_source_rgb(cr, 0, 0, 0);
        text_at(cr, names[i], bx + 36, y, 0.0, 0.5);
    }
}

/* fn: the public function's name, for the messages. */
static int check_plot(const char *fn, const char *path, int n_series, const char *const *names,
                      const double *const *values, int n_points)
{
    TG_CHECK(path != NULL && names != NULL && values != NULL, TG_EINVAL,
             "%s: path, names and values must not be NULL", fn);
    TG_CHECK(n_series >= 1 && n_series <= PLOT_MAX_SERIES, TG_EINVAL,
             "%s: n_series=%d must be in 1..%d", fn, n_series, PLOT_MAX_SERIES);
    TG_CHECK(n_points >= 1, TG_EINVAL, "%s: n_points=%d must be >= 1", fn, n_points);
    for (int i = 0; i < n_series; i++)
        TG_CHECK(names[i] != NULL && values[i] != NULL, TG_EINVAL,
                 "%s: names[%d] and values[%d] must not be NULL", fn, i, i);
    return 0;
}

static void draw_plot(cairo_t *cr, const char *title, const char *x_label, int n_series,
                      const char *const *names, const double *const *values, int n_points)
{
    double lo = INFINITY, hi = -INFINITY;
    for (int s = 0; s < n_series; s++)
        for (int i = 0; i < n_points; i++)
            if (isfinite(values[s][i])) {
                lo = fmin(lo, values[s][i]);
                hi = fmax(hi, values[s][i]);
            }
    if (lo > hi) lo = 0, hi = 1;   /* no finite value at all */
    axis ay = nice_axis(lo, hi, 6), ax = nice_axis(0, n_points > 1 ? n_points - 1 : 1, 8);
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_paint(cr);
    cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    draw_axes(cr, &ax, &ay, x_label);
    cairo_save(cr);
    cairo_rectangle(cr, LEFT, TOP, TG_PLOT_WIDTH - LEFT - RIGHT, TG_PLOT_HEIGHT - TOP - BOTTOM);
    cairo_clip(cr);
    for (int s = 0; s < n_series; s++) {
        cairo_set_source_rgb(cr, palette[s][0], palette[s][1], palette[s][2]);
        draw_series(cr, values[s], n_points, &ax, &ay);
    }
    cairo_restore(cr);
    draw_legend(cr, n_series, names);
    if (title) {
        cairo_set_source_rgb(cr, 0, 0, 0);
        cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_BOLD);
        cairo_set_font_size(cr, 16);
        text_at(cr, title, TG_PLOT_WIDTH / 2.0, TOP / 2.0, 0.5, 0.5);
    }
}

static cairo_status_t write_stream(void *closure, const unsigned char *data, unsigned int len)
{
    return fwrite(data, 1, len, closure) == len ? CAIRO_STATUS_SUCCESS : CAIRO_STATUS_WRITE_ERROR;
}

bool tg_plot_available(void)
{
    return true;
}

/* Draws and writes the chart; fn names the public function in messages. */
static int plot_png(const char *fn, const char *path, const char *title, const char *x_label,
                    int n_series, const char *const *names, const double *const *values,
                    int n_points)
{
    TG_TRY(check_plot(fn, path, n_series, names, values, n_points));
    cairo_surface_t *surf =
        cairo_image_surface_create(CAIRO_FORMAT_ARGB32, TG_PLOT_WIDTH, TG_PLOT_HEIGHT);
    cairo_t *cr = cairo_create(surf);
    draw_plot(cr, title, x_label, n_series, names, values, n_points);
    cairo_status_t st = cairo_status(cr);
    cairo_destroy(cr);
    FILE *f = NULL;
    char *tmp = NULL;
    int rc = st == CAIRO_STATUS_SUCCESS
                 ? tg__atomic_open(&f, &tmp, fn, path)
                 : tg__error(TG_ENOMEM, "%s: cairo: %s", fn, cairo_status_to_string(st));
    if (rc == 0) {
        st = cairo_surface_write_to_png_stream(surf, write_stream, f);
        if (st != CAIRO_STATUS_SUCCESS)
            rc = tg__error(TG_EIO, "%s: writing '%s': %s", fn, path,
                           cairo_status_to_string(st));
        int frc = tg__atomic_finish(f, &tmp, rc == 0, fn, path);
        if (rc == 0) rc = frc;
    }
    cairo_surface_destroy(surf);
    return rc;
}

int tg_plot_lines_png(const char *path, const char *title, const char *x_label, int n_series,
                      const char *const *names, const double *const *values, int n_points)
{
    return plot_png("plot_lines_png", path, title, x_label, n_series, names, values, n_points);
}

int tg_plot_losses_png(const char *path, const char *title, int n_series,
                       const char *const *names, const double *const *values, int n_points)
{
    return plot_png("plot_losses_png", path, title, "iteration", n_series, names, values,
                    n_points);
}

void tg_plot_release_caches(void)
{
    /* Cairo's font-face caches hold fontconfig patterns, so they go first. */
    cairo_debug_reset_static_data();
    FcFini();
}
