/* Tests of the PNG grid writer, the PNG reader and the loss plot. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include <dirent.h>
#include <math.h>
#include <png.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helpers.h"
#include "core/core.h"
#include "tapegrad/tapegrad.h"
#include "tapegrad/image.h"

static void make_dir(void) { th_tmp_dir_make("tg_image_"); }

static void remove_dir(void)
{
    th_tmp_dir_remove();
    tg_plot_release_caches();   /* so LeakSanitizer sees no font caches */
}

TestSuite(image, .init = make_dir, .fini = remove_dir);

static const char *in_dir(char *buf, const char *name)
{
    return th_tmp_path(buf, 256, name);
}

/* Reads path with libpng's own low-level reader (independent of tg_png_read):
 * returns the IHDR width, height and colour type. */
static void png_header(const char *path, png_uint_32 *w, png_uint_32 *h, int *color_type)
{
    FILE *f = fopen(path, "rb");
    cr_assert(f != NULL);
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png_create_info_struct(png);
    if (setjmp(png_jmpbuf(png))) cr_assert(0, "libpng error reading %s", path);
    png_init_io(png, f);
    png_read_info(png, info);
    int depth;
    png_get_IHDR(png, info, w, h, &depth, color_type, NULL, NULL, NULL);
    cr_assert(eq(int, depth, 8));
    png_destroy_read_struct(&png, &info, NULL);
    fclose(f);
}

/* The expected byte of value v mapped from [lo, hi]: computed here by
 * rounding half up on 255 (v - lo) / (hi - lo), then clamping. */
static int expect_byte(double v, double lo, double hi)
{
    double x = floor(255.0 * (v - lo) / (hi - lo) + 0.5);
    return x < 0 ? 0 : x > 255 ? 255 : (int)x;
}

/* Checks every pixel of a grid of N images (C, H, W) with value(n, c, y, x)
 * = vals[...], nrow per row, padding pad. */
static void check_grid(const tg_image *im, const double *vals, int N, int C, int H, int W,
                       int nrow, int pad)
{
    int cols = N < nrow ? N : nrow, rows = (N + nrow - 1) / nrow;
    cr_assert(eq(int, im->width, cols * (W + pad) + pad));
    cr_assert(eq(int, im->height, rows * (H + pad) + pad));
    cr_assert(eq(int, im->channels, C));
    for (int gy = 0; gy < im->height; gy++)
        for (int gx = 0; gx < im->width; gx++) {
            /* Tile (ty, tx) covers [pad + t (S + pad), pad + t (S + pad) + S). */
            int ty = (gy - pad) / (H + pad), tx = (gx - pad) / (W + pad);
            int y = (gy - pad) % (H + pad), x = (gx - pad) % (W + pad);
            int n = ty * cols + tx;
            bool inside = gy >= pad && gx >= pad && y < H && x < W && tx < cols && n < N;
            for (int c = 0; c < C; c++) {
                int got = im->pixels[(gy * im->width + gx) * C + c];
                int want = inside ? expect_byte(vals[((n * C + c) * H + y) * W + x], 0, 1) : 0;
                cr_assert(eq(int, got, want), "pixel (%d, %d) channel %d", gx, gy, c);
            }
        }
}

static void grid_case(int N, int C, int H, int W, int nrow, int pad)
{
    int64_t shape[4] = {N, C, H, W};
    int64_t n = (int64_t)N * C * H * W;
    double *vals = malloc((size_t)n * sizeof *vals);
    for (int64_t i = 0; i < n; i++) vals[i] = (double)((i * 7919) % 256) / 255.0;
    tg_tensor *t;
    cr_assert(eq(int, tg_tensor_from_data(&t, TG_F64, 4, shape, vals), 0));
    char p[256];
    cr_assert(eq(int, tg_png_write_grid(in_dir(p, "grid.png"), t, nrow, 0, 1, pad), 0), "%s",
              tg_error_message());
    png_uint_32 w, h;
    int ct;
    png_header(p, &w, &h, &ct);
    cr_assert(eq(int, ct, C == 1 ? PNG_COLOR_TYPE_GRAY : PNG_COLOR_TYPE_RGB));
    tg_image im;
    cr_assert(eq(int, tg_png_read(&im, p), 0));
    cr_assert(eq(u32, (uint32_t)im.width, w));
    cr_assert(eq(u32, (uint32_t)im.height, h));
    check_grid(&im, vals, N, C, H, W, nrow, pad);
    tg_image_free(&im);
    cr_assert(im.pixels == NULL);
    tg_tensor_release(t);
    free(vals);
    cr_assert(eq(int, th_tmp_dir_count(), 1));   /* no temporary file left */
}

Test(image, grid_gray_pixels)
{
    grid_case(5, 1, 2, 3, 3, 1);   /* a partly filled second row */
    grid_case(4, 1, 5, 4, 2, 2);
    grid_case(3, 1, 4, 4, 8, 0);   /* nrow > N: one row of N tiles */
}

Test(image, grid_rgb_pixels)
{
    grid_case(3, 3, 4, 5, 2, 2);
}

Test(image, grid_maps_lo_hi_and_clamps)
{
    float v[8] = {-2, -1, -0.5f, 0, 0.5f, 1, 3, NAN};
    int64_t shape[4] = {1, 1, 1, 8};
    tg_tensor *t;
    cr_assert(eq(int, tg_tensor_from_data(&t, TG_F32, 4, shape, v), 0));
    char p[256];
    cr_assert(eq(int, tg_png_write_grid(in_dir(p, "m.png"), t, 1, -1, 1, 0), 0));
    tg_image im;
    cr_assert(eq(int, tg_png_read(&im, p), 0));
    cr_assert(eq(int, im.width, 8));
    cr_assert(eq(int, im.height, 1));
    /* -1 -> 0, -0.5 -> 63.75 -> 64, 0 -> 127.5 -> 128, 0.5 -> 191.25 -> 191. */
    int want[8] = {0, 0, 64, 128, 191, 255, 255, 0};
    for (int i = 0; i < 8; i++) cr_assert(eq(int, im.pixels[i], want[i]), "value %g", v[i]);
    tg_image_free(&im);
    tg_tensor_release(t);
}

Test(image, grid_replaces_existing_file)
{
    char p[256];
    FILE *f = fopen(in_dir(p, "old.png"), "w");
    fputs("not a png", f);
    fclose(f);
    int64_t shape[4] = {2, 1, 3, 3};
    tg_tensor *t;
    tg_tensor_full(&t, TG_F32, 4, shape, 1.0);
    cr_assert(eq(int, tg_png_write_grid(p, t, 2, 0, 1, 1), 0));
    tg_image im;
    cr_assert(eq(int, tg_png_read(&im, p), 0));
    cr_assert(eq(int, im.width, 9));
    cr_assert(eq(int, im.pixels[1 * 9 + 1], 255));
    tg_image_free(&im);
    tg_tensor_release(t);
}

Test(image, grid_bad_arguments)
{
    char p[256];
    in_dir(p, "bad.png");
    int64_t s4[4] = {2, 1, 3, 3}, s3[3] = {2, 3, 3}, sc2[4] = {2, 2, 3, 3}, s0[4] = {0, 1, 3, 3};
    tg_tensor *t, *t3, *tc2, *t0;
    tg_tensor_zeros(&t, TG_F32, 4, s4);
    tg_tensor_zeros(&t3, TG_F32, 3, s3);
    tg_tensor_zeros(&tc2, TG_F32, 4, sc2);
    tg_tensor_zeros(&t0, TG_F32, 4, s0);
    cr_assert(eq(int, tg_png_write_grid(p, t3, 2, 0, 1, 1), TG_ESHAPE));
    cr_assert(eq(int, tg_png_write_grid(p, tc2, 2, 0, 1, 1), TG_ESHAPE));
    cr_assert(eq(int, tg_png_write_grid(p, t0, 2, 0, 1, 1), TG_ESHAPE));
    cr_assert(eq(int, tg_png_write_grid(NULL, t, 2, 0, 1, 1), TG_EINVAL));
    cr_assert(eq(int, tg_png_write_grid(p, NULL, 2, 0, 1, 1), TG_EINVAL));
    cr_assert(eq(int, tg_png_write_grid(p, t, 0, 0, 1, 1), TG_EINVAL));
    cr_assert(eq(int, tg_png_write_grid(p, t, 2, 1, 1, 1), TG_EINVAL));
    cr_assert(eq(int, tg_png_write_grid(p, t, 2, 0, NAN, 1), TG_EINVAL));
    cr_assert(eq(int, tg_png_write_grid(p, t, 2, 0, 1, -1), TG_EINVAL));
    cr_assert(eq(int, tg_png_write_grid("/nonexistent-dir/x/grid.png", t, 2, 0, 1, 1), TG_EIO));
    cr_assert(strstr(tg_error_message(), "nonexistent-dir") != NULL);
    cr_assert(eq(int, th_tmp_dir_count(), 0));   /* nothing was written */
    tg_tensor_release(t);
    tg_tensor_release(t3);
    tg_tensor_release(tc2);
    tg_tensor_release(t0);
}

Test(image, png_read_errors)
{
    char p[256];
    tg_image im = {7, 7, 7, NULL};
    cr_assert(eq(int, tg_png_read(&im, in_dir(p, "missing.png")), TG_EIO));
    FILE *f = fopen(p, "w");
    fputs("definitely not a png file", f);
    fclose(f);
    cr_assert(eq(int, tg_png_read(&im, p), TG_EFORMAT));
    cr_assert(eq(int, im.width, 7));
    cr_assert(im.pixels == NULL);
    cr_assert(eq(int, tg_png_read(NULL, p), TG_EINVAL));
}

/* ---- plot ---------------------------------------------------------------------- */

Test(image, plot_writes_png)
{
    enum { N = 200 };
    double d[N], g[N];
    for (int i = 0; i < N; i++) {
        d[i] = 1.4 * exp(-i / 60.0) + 0.05 * sin(i * 0.7);
        g[i] = 0.7 + 2.0 * (1 - exp(-i / 50.0)) + 0.1 * cos(i * 0.9);
    }
    g[100] = NAN;   /* a gap, not a failure */
    const char *names[2] = {"loss_D", "loss_G"};
    const double *vals[2] = {d, g};
    char p[256];
    cr_assert(eq(int, tg_plot_losses_png(in_dir(p, "loss.png"), "DCGAN losses", 2, names, vals, N),
                 0), "%s", tg_error_message());
    png_uint_32 w, h;
    int ct;
    png_header(p, &w, &h, &ct);
    cr_assert(eq(u32, w, TG_PLOT_WIDTH));
    cr_assert(eq(u32, h, TG_PLOT_HEIGHT));
    tg_image im;
    cr_assert(eq(int, tg_png_read(&im, p), 0));
    /* Cairo drops the alpha channel of a fully opaque image. */
    int ch = im.channels;
    cr_assert(ch == 3 || ch == 4);
    /* The background is white; the two curves are tab10 blue and orange. */
    int64_t non_white = 0, blue = 0, orange = 0;
    for (int64_t i = 0; i < (int64_t)im.width * im.height; i++) {
        const uint8_t *q = im.pixels + ch * i;
        non_white += !(q[0] == 255 && q[1] == 255 && q[2] == 255);
        blue += abs(q[0] - 31) < 12 && abs(q[1] - 119) < 12 && abs(q[2] - 180) < 12;
        orange += abs(q[0] - 255) < 12 && abs(q[1] - 127) < 12 && abs(q[2] - 14) < 12;
    }
    cr_assert(non_white > 2000, "%lld non-white pixels", (long long)non_white);
    cr_assert(blue > 300, "%lld blue pixels", (long long)blue);
    cr_assert(orange > 300, "%lld orange pixels", (long long)orange);
    /* Corner pixel: background, opaque white. */
    for (int c = 0; c < ch; c++) cr_assert(eq(int, im.pixels[c], 255));
    tg_image_free(&im);
    cr_assert(eq(int, th_tmp_dir_count(), 1));
}

/* The x-axis label is the only difference between tg_plot_lines_png and
 * tg_plot_losses_png ("iteration"), and it is drawn below the tick labels. */
Test(image, plot_lines_png_labels_the_x_axis)
{
    double v[50];
    for (int i = 0; i < 50; i++) v[i] = 400.0 - 1.5 * i;
    const char *names[1] = {"FID"};
    const double *vals[1] = {v};
    const char *labels[4] = {NULL, "iteration", "seconds of training", NULL};
    tg_image im[4];
    char p[256];
    for (int k = 0; k < 4; k++) {
        char name[32];
        snprintf(name, sizeof name, "plot%d.png", k);
        int rc = k == 0 ? tg_plot_losses_png(in_dir(p, name), "t", 1, names, vals, 50)
                        : tg_plot_lines_png(in_dir(p, name), "t", labels[k], 1, names, vals, 50);
        cr_assert(eq(int, rc, 0), "%s", tg_error_message());
        cr_assert(eq(int, tg_png_read(&im[k], p), 0));
    }
    const size_t row = (size_t)im[0].width * (size_t)im[0].channels;
    const size_t strip = (size_t)(TG_PLOT_HEIGHT - 30) * row, all = (size_t)TG_PLOT_HEIGHT * row;
    cr_assert(memcmp(im[0].pixels, im[1].pixels, all) == 0, "\"iteration\" differs");
    cr_assert(memcmp(im[0].pixels, im[2].pixels, strip) == 0, "a change above the label");
    cr_assert(memcmp(im[0].pixels + strip, im[2].pixels + strip, all - strip) != 0,
              "the label did not change");
    size_t inked = 0;   /* NULL: no label at all */
    for (size_t i = strip; i < all; i++) inked += im[3].pixels[i] != 255;
    cr_assert(eq(sz, inked, 0));
    for (int k = 0; k < 4; k++) tg_image_free(&im[k]);
    cr_assert(eq(int, tg_plot_lines_png(NULL, "t", "x", 1, names, vals, 3), TG_EINVAL));
    th_expect_in(tg_error_message(), "plot_lines_png: path, names and values");
}

Test(image, plot_bad_arguments)
{
    double v[3] = {1, 2, 3};
    const char *names[1] = {"a"}, *null_name[1] = {NULL};
    const double *vals[1] = {v}, *null_vals[1] = {NULL};
    char p[256];
    in_dir(p, "plot.png");
    cr_assert(eq(int, tg_plot_losses_png(NULL, "t", 1, names, vals, 3), TG_EINVAL));
    cr_assert(eq(int, tg_plot_losses_png(p, "t", 0, names, vals, 3), TG_EINVAL));
    cr_assert(eq(int, tg_plot_losses_png(p, "t", 11, names, vals, 3), TG_EINVAL));
    cr_assert(eq(int, tg_plot_losses_png(p, "t", 1, names, vals, 0), TG_EINVAL));
    cr_assert(eq(int, tg_plot_losses_png(p, "t", 1, null_name, vals, 3), TG_EINVAL));
    cr_assert(eq(int, tg_plot_losses_png(p, "t", 1, names, null_vals, 3), TG_EINVAL));
    cr_assert(eq(int, tg_plot_losses_png("/nonexistent-dir/p.png", "t", 1, names, vals, 3),
                 TG_EIO));
    cr_assert(eq(int, th_tmp_dir_count(), 0));
    /* Degenerate but valid: one point, a constant series, no title. */
    cr_assert(eq(int, tg_plot_losses_png(p, NULL, 1, names, vals, 1), 0));
    cr_assert(eq(int, th_tmp_dir_count(), 1));
}
