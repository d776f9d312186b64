/* tests/test_transforms.c - tg_image_folder_load_ex (T.ToTensor, T.Resize
 * with antialias and T.CenterCrop) and the loader's augmentation
 * (T.RandomCrop with padding, T.RandomHorizontalFlip, T.Normalize) against
 * torchvision 0.14 (scripts/make_transforms_goldens.py), with folders of
 * PNGs written here; the draws against the documented rule, their
 * invariants (windows of torch's padded image, mirrors), resumption and
 * shards, and the refusals. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

static void make_dir(void) { th_tmp_dir_make("tg_tfm_"); }

TestSuite(transforms, .init = make_dir, .fini = th_tmp_dir_remove);

/* ---- helpers ------------------------------------------------------------- */

static void mkdir_in(const char *rel)
{
    char p[256];
    cr_assert(eq(int, mkdir(th_tmp_path(p, sizeof p, rel), 0755), 0), "mkdir %s", p);
}

/* Byte k of image (c, h, w, seed) in (C, H, W) order, as the script's
 * image_bytes. */
static uint8_t pattern(int64_t seed, int64_t k)
{
    return (uint8_t)((seed + 7 * k + k * k / 3) % 256);
}

/* Writes th_tmp_dir/rel, the PNG of image (c, h, w, seed). */
static void write_png(const char *rel, const int64_t im[4])
{
    int64_t n = im[0] * im[1] * im[2];
    double *v = malloc((size_t)n * sizeof *v);
    for (int64_t k = 0; k < n; k++) v[k] = pattern(im[3], k);
    tg_tensor *t = th_tensor_from(TG_F64, 4, (int64_t[]){1, im[0], im[1], im[2]}, v);
    char p[256];
    /* lo 0, hi 255: value v becomes byte v. */
    OK(tg_png_write_grid(th_tmp_path(p, sizeof p, rel), t, 1, 0, 255, 0));
    tg_tensor_release(t);
    free(v);
}

/* The integers of "a,b,c" into v (up to n); "-" gives 0 of them.  Returns
 * the count. */
static int ints(const char *s, int64_t *v, int n)
{
    int k = 0;
    if (!s || !strcmp(s, "-")) return 0;
    for (const char *p = s; k < n && *p;) {
        v[k++] = strtoll(p, (char **)&p, 10);
        if (*p == ',' || *p == ';') p++;
    }
    return k;
}

static const char *meta(const tg_st_file *g, const char *fmt, int i)
{
    char key[64];
    snprintf(key, sizeof key, fmt, i);
    const char *v = tg_st_meta_get(g, key);
    cr_assert(v != NULL, "metadata %s", key);
    return v;
}

/* ULPs between two finite floats of one sign or zero. */
static int64_t ulps(float a, float b)
{
    int32_t ia, ib;
    memcpy(&ia, &a, 4);
    memcpy(&ib, &b, 4);
    if (ia < 0) ia = INT32_MIN - ia;
    if (ib < 0) ib = INT32_MIN - ib;
    return ia > ib ? (int64_t)ia - ib : (int64_t)ib - ia;
}

/* Fails unless f32 got[0..n) lies within max_ulps of want[0..n) (values in
 * [-1, 1]; below 2^-20 in magnitude an absolute 2^-44 counts as close).
 * Returns the largest distance in ULPs. */
static int64_t expect_ulps(const char *what, const float *got, const float *want, int64_t n,
                           int64_t max_ulps)
{
    int64_t worst = 0;
    for (int64_t k = 0; k < n; k++) {
        int64_t u = ulps(got[k], want[k]);
        if (fabsf(want[k]) < 0x1p-20f && fabsf(got[k] - want[k]) <= 0x1p-44f) u = 0;
        cr_assert(u <= max_ulps, "%s: element %lld is %.9g, torchvision's %.9g (%lld ulps)",
                  what, (long long)k, got[k], want[k], (long long)u);
        if (u > worst) worst = u;
    }
    return worst;
}

/* Batch of every sample of ds in the unit range (or range). */
static void whole_batch(tg_tensor **x, tg_dataset *ds, tg_pixel_range range)
{
    int64_t n = tg_dataset_size(ds), idx[64];
    cr_assert(n >= 1 && n <= 64);
    for (int64_t i = 0; i < n; i++) idx[i] = i;
    tg_tensor *y;
    OK(tg_dataset_set_pixel_range(ds, range));
    OK(tg_dataset_batch(x, &y, ds, idx, n));
    tg_tensor_release(y);
}

/* Folders of PNGs need libpng: a build without it leaves those tests out
 * (the augmentation tests use tensors and run everywhere). */
#define NEEDS_PNG()                                                                \
    do {                                                                           \
        if (!tg_png_available()) {                                                 \
            th_not_run("this build has no PNG support (meson -Dpng=disabled)");    \
            return;                                                                \
        }                                                                          \
    } while (0)

/* The resize tolerance: the same op as PyTorch's, within a few roundings. */
enum { RESIZE_ULPS = 4 };

/* ---- T.Resize and T.CenterCrop ---------------------------------------- */

Test(transforms, resize_and_center_crop_match_torchvision)
{
    NEEDS_PNG();
    tg_st_file *g = th_golden_load("transforms.safetensors");
    int cases = atoi(meta(g, "cases", 0));
    cr_assert(cases >= 10);
    int64_t worst = 0;
    for (int i = 0; i < cases; i++) {
        int64_t im[4], rs[2] = {0, 0}, ms[1] = {0}, cp[2] = {0, 0};
        cr_assert(eq(int, ints(meta(g, "case%d.image", i), im, 4), 4));
        tg_image_folder_options o = TG_IMAGE_FOLDER_OPTIONS_INIT;
        o.channels = atoi(meta(g, "case%d.channels", i));
        ints(meta(g, "case%d.resize", i), rs, 2);
        ints(meta(g, "case%d.max_size", i), ms, 1);
        ints(meta(g, "case%d.crop", i), cp, 2);
        memcpy(o.resize, rs, sizeof rs);
        o.max_size = ms[0];
        memcpy(o.center_crop, cp, sizeof cp);
        char dir[64], file[64];
        snprintf(dir, sizeof dir, "c%d", i);
        mkdir_in(dir);
        snprintf(dir, sizeof dir, "c%d/a", i);
        mkdir_in(dir);
        snprintf(file, sizeof file, "c%d/a/0.png", i);
        write_png(file, im);
        char root[256];
        snprintf(dir, sizeof dir, "c%d", i);
        tg_dataset *ds = NULL;
        OK(tg_image_folder_load_ex(&ds, th_tmp_path(root, sizeof root, dir), &o));
        tg_tensor *x;
        whole_batch(&x, ds, TG_PIXELS_UNIT);
        char key[32];
        snprintf(key, sizeof key, "case%d.y", i);
        const tg_tensor *want = tg_st_get(g, key);
        cr_assert(want != NULL);
        for (int d = 0; d < 3; d++)
            cr_assert(eq(i64, tg_tensor_dim(x, d + 1), tg_tensor_dim(want, d)), "%s dim %d", key,
                      d);
        /* Cropping alone copies bytes: exact.  Resizing: within a few ULPs. */
        int64_t u = expect_ulps(key, tg_tensor_cdata(x), tg_tensor_cdata(want),
                                tg_tensor_numel(want), rs[0] ? RESIZE_ULPS : 0);
        if (u > worst) worst = u;
        tg_tensor_release(x);
        tg_dataset_release(ds);
    }
    cr_log_info("transforms: resize within %lld ulps of torchvision", (long long)worst);
    tg_st_free(g);
}

/* Writes the golden folder: a/0.png, a/1.png, b/0.png of three sizes. */
static void write_folder(const tg_st_file *g)
{
    int64_t v[12];
    cr_assert(eq(int, ints(meta(g, "folder.images", 0), v, 12), 12));
    mkdir_in("a");
    mkdir_in("b");
    write_png("a/0.png", v);
    write_png("a/1.png", v + 4);
    write_png("b/0.png", v + 8);
}

/* Images of three sizes and two colour types load as one dataset; RGB read
 * as grey is PIL's convert("L") before the resize; the symmetric range is
 * T.Normalize(0.5, 0.5) of the resized images. */
Test(transforms, a_folder_of_mixed_sizes_loads)
{
    NEEDS_PNG();
    tg_st_file *g = th_golden_load("transforms.safetensors");
    write_folder(g);
    int64_t rs[1] = {0}, cp[2] = {0};
    cr_assert(eq(int, ints(meta(g, "folder.resize", 0), rs, 1), 1));
    cr_assert(eq(int, ints(meta(g, "folder.crop", 0), cp, 2), 2));
    for (int grey = 0; grey < 2; grey++) {
        tg_image_folder_options o = {grey ? 1 : 3, {rs[0], 0}, 0, {cp[0], cp[1]}};
        tg_dataset *ds = NULL;
        OK(tg_image_folder_load_ex(&ds, th_tmp_dir, &o));
        cr_assert(eq(i64, tg_dataset_size(ds), 3));
        cr_assert(eq(int, tg_dataset_num_classes(ds), 2));
        cr_assert(eq(str, (char *)tg_dataset_class_name(ds, 1), "b"));
        int64_t shape[3];
        tg_dataset_image_shape(ds, shape);
        cr_assert(shape[0] == (grey ? 1 : 3) && shape[1] == cp[0] && shape[2] == cp[1]);
        tg_tensor *x;
        const tg_tensor *want = tg_st_get(g, grey ? "folder.grey" : "folder.rgb");
        whole_batch(&x, ds, TG_PIXELS_UNIT);
        expect_ulps(grey ? "grey" : "rgb", tg_tensor_cdata(x), tg_tensor_cdata(want),
                    tg_tensor_numel(want), RESIZE_ULPS);
        tg_tensor_release(x);
        if (!grey) {
            /* The default range is the symmetric one: x's (x - 0.5) / 0.5. */
            OK(tg_dataset_set_pixel_range(ds, TG_PIXELS_SYMMETRIC));
            int64_t idx[3] = {0, 1, 2};
            tg_tensor *y;
            OK(tg_dataset_batch(&x, &y, ds, idx, 3));
            /* bit for bit what Normalize makes of this loader's unit values,
             * and so within a few of their ULPs (scaled by 2) of torchvision's */
            tg_tensor *u;
            whole_batch(&u, ds, TG_PIXELS_UNIT);
            const float *d = tg_tensor_cdata(x), *du = tg_tensor_cdata(u);
            const float *ds_want = tg_tensor_cdata(tg_st_get(g, "folder.sym"));
            for (int64_t k = 0; k < tg_tensor_numel(x); k++) {
                cr_assert(d[k] == (du[k] - 0.5f) / 0.5f, "sym element %lld", (long long)k);
                cr_assert(fabsf(d[k] - ds_want[k]) <= RESIZE_ULPS * 0x1p-23f,
                          "sym element %lld: %.9g, torchvision's %.9g", (long long)k, d[k],
                          ds_want[k]);
            }
            tg_tensor_release(u);
            tg_tensor_release(x);
            tg_tensor_release(y);
        }
        tg_dataset_release(ds);
    }
    tg_st_free(g);
}

/* The same images without any option are refused as before; resize {s, 0}
 * alone keeps aspect ratios, so it cannot make them one size either. */
Test(transforms, sizes_that_stay_different_are_refused)
{
    NEEDS_PNG();
    tg_st_file *g = th_golden_load("transforms.safetensors");
    write_folder(g);
    tg_dataset *ds = (tg_dataset *)&ds;
    cr_assert(eq(int, tg_image_folder_load(&ds, th_tmp_dir, 3), TG_ESHAPE));
    th_expect_in(tg_error_message(), "a/1.png' is 9x20 (width x height); every image must have "
                                     "the size of '");
    th_expect_in(tg_error_message(), "a/0.png', 17x12 (or set resize or center_crop)");
    tg_image_folder_options o = {3, {8, 0}, 0, {0, 0}};
    cr_assert(eq(int, tg_image_folder_load_ex(&ds, th_tmp_dir, &o), TG_ESHAPE));
    th_expect_in(tg_error_message(), "a/1.png' is 9x20 (width x height), resized to 8x17; every "
                                     "image must end with the size of '");
    th_expect_in(tg_error_message(), "a/0.png', 11x8 (another aspect ratio: set center_crop)");
    cr_assert(ds == (tg_dataset *)&ds, "out was changed on error");
    /* resize (h, w) makes them one size. */
    o.resize[1] = 5;
    OK(tg_image_folder_load_ex(&ds, th_tmp_dir, &o));
    int64_t shape[3];
    tg_dataset_image_shape(ds, shape);
    cr_assert(shape[0] == 3 && shape[1] == 8 && shape[2] == 5);
    tg_dataset_release(ds);
    tg_st_free(g);
}

/* tg_image_folder_load is tg_image_folder_load_ex without resize or crop:
 * the same u8 images and batches, bit for bit; and opt NULL is 3 channels. */
Test(transforms, the_old_loader_is_the_plain_options)
{
    NEEDS_PNG();
    const int64_t im0[4] = {3, 5, 6, 40}, im1[4] = {1, 5, 6, 41};
    mkdir_in("x");
    mkdir_in("y");
    write_png("x/0.png", im0);
    write_png("y/0.png", im1);
    for (int ch = 1; ch <= 3; ch += 2) {
        tg_dataset *a = NULL, *b = NULL;
        OK(tg_image_folder_load(&a, th_tmp_dir, ch));
        tg_image_folder_options o = TG_IMAGE_FOLDER_OPTIONS_INIT;
        o.channels = ch;
        OK(ch == 3 ? tg_image_folder_load_ex(&b, th_tmp_dir, NULL)
                   : tg_image_folder_load_ex(&b, th_tmp_dir, &o));
        for (int r = 0; r < 2; r++) {
            tg_tensor *xa, *xb;
            whole_batch(&xa, a, r ? TG_PIXELS_SYMMETRIC : TG_PIXELS_UNIT);
            whole_batch(&xb, b, r ? TG_PIXELS_SYMMETRIC : TG_PIXELS_UNIT);
            cr_assert(eq(i64, tg_tensor_numel(xa), 2 * ch * 30));
            cr_assert(memcmp(tg_tensor_cdata(xa), tg_tensor_cdata(xb), 4 * 2 * 30 * (size_t)ch)
                      == 0);
            /* and the bytes of the files: p / 255 or p / 127.5 - 1, rounded once
             * (grey: y/0.png, the second sample; RGB: x/0.png, the first) */
            const float *d = (const float *)tg_tensor_cdata(xa) + (ch == 1 ? 30 : 0);
            for (int64_t k = 0; k < ch * 30; k++) {
                uint8_t p = pattern(ch == 1 ? 41 : 40, k);
                float want = r ? (float)(p / 127.5 - 1.0) : (float)(p / 255.0);
                cr_assert(d[k] == want, "element %lld", (long long)k);
            }
            tg_tensor_release(xa);
            tg_tensor_release(xb);
        }
        tg_dataset_release(a);
        tg_dataset_release(b);
    }
}

/* A crop of its own size, and resize {s, 0} where s is the shorter side,
 * leave the image as it is (torchvision returns it unchanged). */
Test(transforms, crop_and_resize_to_the_same_size_change_nothing)
{
    NEEDS_PNG();
    const int64_t im[4] = {3, 7, 9, 50};
    mkdir_in("a");
    write_png("a/0.png", im);
    tg_image_folder_options o = {3, {7, 0}, 0, {7, 9}};
    tg_dataset *ds = NULL;
    OK(tg_image_folder_load_ex(&ds, th_tmp_dir, &o));
    tg_tensor *x;
    whole_batch(&x, ds, TG_PIXELS_UNIT);
    const float *d = tg_tensor_cdata(x);
    cr_assert(eq(i64, tg_tensor_numel(x), 3 * 63));
    for (int64_t k = 0; k < 3 * 63; k++)
        cr_assert(d[k] == (float)pattern(50, k) / 255.0f, "element %lld", (long long)k);
    tg_tensor_release(x);
    tg_dataset_release(ds);
}

Test(transforms, bad_folder_options_are_refused)
{
    NEEDS_PNG();
    const int64_t im[4] = {1, 4, 4, 1};
    mkdir_in("a");
    write_png("a/0.png", im);
    struct {
        tg_image_folder_options o;
        const char *msg;
    } bad[] = {
        {{2, {0, 0}, 0, {0, 0}}, "image_folder_load: channels=2 must be 1 (grey) or 3 (RGB)"},
        {{3, {-1, 0}, 0, {0, 0}}, "image_folder_load_ex: resize[0]=-1 must be in [0, 2147483647]"},
        {{3, {4, -2}, 0, {0, 0}}, "image_folder_load_ex: resize[1]=-2 must be in [0, "},
        {{3, {(int64_t)1 << 31, 0}, 0, {0, 0}}, "resize[0]=2147483648 must be in [0, "},
        {{3, {0, 5}, 0, {0, 0}}, "resize={0, 5}: resize[0] must be > 0 when resize[1] is given"},
        {{3, {0, 0}, 0, {-3, 2}}, "image_folder_load_ex: center_crop[0]=-3 must be in [0, "},
        {{3, {0, 0}, 0, {3, 0}}, "center_crop={3, 0} must be {0, 0} (none) or two extents >= 1"},
        {{3, {0, 0}, 0, {0, 3}}, "center_crop={0, 3} must be {0, 0} (none) or two extents"},
        {{3, {4, 0}, -1, {0, 0}}, "image_folder_load_ex: max_size=-1 must be >= 0"},
        {{3, {4, 0}, 4, {0, 0}}, "max_size=4 must be greater than the shorter side's size "
                                 "resize[0]=4"},
        {{3, {4, 5}, 9, {0, 0}}, "max_size=9 needs resize {s, 0} (the shorter side); resize is "
                                 "{4, 5}"},
        {{3, {0, 0}, 9, {0, 0}}, "max_size=9 needs resize {s, 0}"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tg_dataset *ds = (tg_dataset *)&ds;
        cr_assert(eq(int, tg_image_folder_load_ex(&ds, th_tmp_dir, &bad[i].o), TG_EINVAL),
                  "case %zu", i);
        th_expect_in(tg_error_message(), bad[i].msg);
        cr_assert(ds == (tg_dataset *)&ds, "out was changed on error");
    }
    tg_dataset *ds = NULL;
    cr_assert(eq(int, tg_image_folder_load_ex(NULL, th_tmp_dir, NULL), TG_EINVAL));
    th_expect_in(tg_error_message(), "out and root must not be NULL");
    cr_assert(eq(int, tg_image_folder_load_ex(&ds, NULL, NULL), TG_EINVAL));
    cr_assert(ds == NULL);
    /* max_size squeezing the short side to nothing: 1 x 40, s 1, max 2 */
    const int64_t thin[4] = {1, 1, 40, 2};
    mkdir_in("t");
    mkdir_in("t/a");
    write_png("t/a/0.png", thin);
    tg_image_folder_options o = {1, {1, 0}, 2, {0, 0}};
    char root[256];
    cr_assert(eq(int, tg_image_folder_load_ex(&ds, th_tmp_path(root, sizeof root, "t"), &o),
                 TG_ESHAPE));
    th_expect_in(tg_error_message(), "a/0.png' (40x1, width x height) resized to 1 on its shorter "
                                     "side (max_size 2) would be 2x0");
    cr_assert(ds == NULL);
}

/* ---- augmentation -------------------------------------------------------- */

/* n copies of the golden augmentation image as a u8 dataset in the unit
 * range, sample i labelled i (the samples differ only by their index, hence
 * their draws). */
static tg_dataset *aug_dataset(const tg_st_file *g, int64_t n, int64_t im[4])
{
    cr_assert(eq(int, ints(meta(g, "aug.image", 0), im, 4), 4));
    int64_t per = im[0] * im[1] * im[2];
    double *v = malloc((size_t)(n * per) * sizeof *v), *l = malloc((size_t)n * sizeof *l);
    for (int64_t i = 0; i < n; i++) {
        l[i] = (double)i;   /* label i: the test reads the sample's index off it */
        for (int64_t k = 0; k < per; k++) v[i * per + k] = pattern(im[3], k);
    }
    tg_tensor *x = th_tensor_from(TG_U8, 4, (int64_t[]){n, im[0], im[1], im[2]}, v);
    tg_tensor *y = th_tensor_from(TG_I64, 1, &n, l);
    tg_dataset *ds;
    OK(tg_dataset_from_tensors(&ds, x, y));
    OK(tg_dataset_set_pixel_range(ds, TG_PIXELS_UNIT));
    tg_tensor_release(x);
    tg_tensor_release(y);
    free(v);
    free(l);
    return ds;
}

/* The documented draw of sample `index` in epoch `epoch` of a loader seeded
 * with seed, for nh x nw window positions and flip probability p. */
static void expected_draw(uint64_t seed, int64_t epoch, int64_t index, int64_t nh, int64_t nw,
                          double p, int64_t *top, int64_t *left, bool *flip)
{
    tg_rng r = {seed + (uint64_t)epoch, ((uint64_t)1 << 63) + 4 * (uint64_t)index};
    double u[3];
    for (int i = 0; i < 3; i++) u[i] = tg_rng_uniform(&r);
    *top = (int64_t)(u[0] * (double)nh);
    *left = (int64_t)(u[1] * (double)nw);
    *flip = u[2] < p;
}

/* Whether sample s (C, h, w) is padded (C, H, W)'s window at (top, left),
 * mirrored when flip, bit for bit. */
static bool is_window(const float *s, const float *padded, int64_t c, int64_t hh, int64_t ww,
                      int64_t h, int64_t w, int64_t top, int64_t left, bool flip)
{
    for (int64_t p = 0; p < c; p++)
        for (int64_t y = 0; y < h; y++)
            for (int64_t x = 0; x < w; x++) {
                float want = padded[(p * hh + top + y) * ww + left + (flip ? w - 1 - x : x)];
                if (memcmp(&s[(p * h + y) * w + x], &want, 4) != 0) return false;
            }
    return true;
}

/* How many windows of padded (C, H, W), mirrored or not, sample s is. */
static int count_windows(const float *s, const float *padded, int64_t c, int64_t hh, int64_t ww,
                         int64_t h, int64_t w)
{
    int found = 0;
    for (int f = 0; f < 2; f++)
        for (int64_t t = 0; t + h <= hh; t++)
            for (int64_t l = 0; l + w <= ww; l++)
                found += is_window(s, padded, c, hh, ww, h, w, t, l, f);
    return found;
}

/* With each padding mode, every sample of two epochs is the window of
 * torchvision's F.pad(x, padding, fill, mode) the documented draw picks,
 * mirrored when it says so, and no other window. */
Test(transforms, random_crops_are_windows_of_torchvision_padding)
{
    tg_st_file *g = th_golden_load("transforms.safetensors");
    int64_t im[4], pad[4];
    enum { N = 24 };
    tg_dataset *ds = aug_dataset(g, N, im);
    cr_assert(eq(int, ints(meta(g, "aug.padding", 0), pad, 4), 4));
    const double fill = strtod(meta(g, "aug.fill", 0), NULL);
    const char *modes[4] = {"aug.pad.constant0", "aug.pad.constant", "aug.pad.reflect",
                            "aug.pad.edge"};
    const tg_pad_mode pm[4] = {TG_PAD_CONSTANT, TG_PAD_CONSTANT, TG_PAD_REFLECT,
                               TG_PAD_REPLICATE};
    const int64_t h = 5, w = 6;
    for (int m = 0; m < 4; m++) {
        const tg_tensor *padded = tg_st_get(g, modes[m]);
        const int64_t hh = tg_tensor_dim(padded, 1), ww = tg_tensor_dim(padded, 2);
        cr_assert(hh == im[1] + pad[1] + pad[3] && ww == im[2] + pad[0] + pad[2]);
        tg_loader_options lo = {8, true, 77, false};
        tg_loader *ld;
        OK(tg_loader_new(&ld, ds, &lo));
        tg_augment_options ao = {0.5, {h, w}, {pad[0], pad[1], pad[2], pad[3]}, pm[m],
                                 m == 1 ? fill : 0, 0, NULL, NULL};
        OK(tg_loader_set_augment(ld, &ao));
        int flips = 0, seen = 0;
        for (int64_t epoch = 0; epoch < 2; epoch++) {
            OK(tg_loader_reset(ld, epoch));
            tg_tensor *x, *y;
            while (tg_loader_next(ld, &x, &y) == 1) {
                cr_assert(tg_tensor_dim(x, 1) == im[0] && tg_tensor_dim(x, 2) == h &&
                          tg_tensor_dim(x, 3) == w);
                const int64_t *index = tg_tensor_cdata(y);   /* label i is sample i */
                for (int64_t i = 0; i < tg_tensor_dim(x, 0); i++, seen++) {
                    const float *sample = (const float *)tg_tensor_cdata(x) + i * im[0] * h * w;
                    int64_t top, left;
                    bool flip;
                    expected_draw(77, epoch, index[i], hh - h + 1, ww - w + 1, 0.5, &top, &left,
                                  &flip);
                    cr_assert(is_window(sample, tg_tensor_cdata(padded), im[0], hh, ww, h, w,
                                        top, left, flip),
                              "%s epoch %lld sample %lld is not the drawn window (%lld, %lld, "
                              "flip %d)", modes[m], (long long)epoch, (long long)index[i],
                              (long long)top, (long long)left, flip);
                    /* Zero padding leaves one window of those values; reflection
                     * makes windows around its axis mirrors of others. */
                    if (pm[m] == TG_PAD_CONSTANT)
                        cr_assert(eq(int, count_windows(sample, tg_tensor_cdata(padded), im[0],
                                                        hh, ww, h, w), 1));
                    flips += flip;
                }
                tg_tensor_release(x);
                tg_tensor_release(y);
            }
        }
        cr_assert(eq(int, seen, 2 * N));
        cr_assert(flips > 0 && flips < seen, "flips %d of %d", flips, seen);
        tg_loader_free(ld);
    }
    tg_dataset_release(ds);
    tg_st_free(g);
}

/* Every batch of a loader, concatenated: the images into *x (a new array
 * of *n floats) and the labels into *labels. */
typedef struct run {
    float *x;
    int64_t n, *labels, n_labels;
} run;

static void run_free(run *r)
{
    free(r->x);
    free(r->labels);
    memset(r, 0, sizeof *r);
}

/* Appends ld's batches up to the end of its epoch to r. */
static void drain(run *r, tg_loader *ld)
{
    tg_tensor *x, *y;
    while (tg_loader_next(ld, &x, &y) == 1) {
        int64_t nx = tg_tensor_numel(x), ny = tg_tensor_numel(y);
        r->x = realloc(r->x, (size_t)(r->n + nx) * sizeof *r->x);
        r->labels = realloc(r->labels, (size_t)(r->n_labels + ny) * sizeof *r->labels);
        memcpy(r->x + r->n, tg_tensor_cdata(x), (size_t)nx * sizeof *r->x);
        memcpy(r->labels + r->n_labels, tg_tensor_cdata(y), (size_t)ny * sizeof *r->labels);
        r->n += nx;
        r->n_labels += ny;
        tg_tensor_release(x);
        tg_tensor_release(y);
    }
}

static const double MEAN3[3] = {0.485, 0.456, 0.406}, STD3[3] = {0.229, 0.224, 0.225};

/* Crop, padding, flip and normalize at once. */
static tg_augment_options all_of_them(void)
{
    tg_augment_options o = {0.5, {5, 6}, {2, 1, 3, 2}, TG_PAD_REFLECT, 0, 3, MEAN3, STD3};
    return o;
}

/* Saving the position mid-epoch and resuming on a new loader (as a
 * checkpoint does) gives the same batches, bit for bit. */
Test(transforms, a_resumed_loader_hands_out_the_same_batches)
{
    tg_st_file *g = th_golden_load("transforms.safetensors");
    int64_t im[4];
    tg_dataset *ds = aug_dataset(g, 20, im);
    tg_loader_options lo = {3, true, 5, false};
    tg_augment_options ao = all_of_them();
    tg_loader *a, *b;
    OK(tg_loader_new(&a, ds, &lo));
    OK(tg_loader_set_augment(a, &ao));
    OK(tg_loader_reset(a, 2));
    tg_tensor *x, *y;
    for (int k = 0; k < 3; k++) {
        cr_assert(eq(int, tg_loader_next(a, &x, &y), 1));
        tg_tensor_release(x);
        tg_tensor_release(y);
    }
    int64_t epoch, index;
    tg_loader_position(a, &epoch, &index);
    cr_assert(epoch == 2 && index == 9);
    OK(tg_loader_new(&b, ds, &lo));
    OK(tg_loader_set_augment(b, &ao));
    OK(tg_loader_set_position(b, epoch, index));
    run ra = {0}, rb = {0};
    drain(&ra, a);
    drain(&rb, b);
    cr_assert(ra.n > 0);
    cr_assert(eq(i64, ra.n, rb.n));
    cr_assert(eq(i64, ra.n_labels, 11));
    cr_assert(memcmp(ra.x, rb.x, (size_t)ra.n * 4) == 0);
    cr_assert(memcmp(ra.labels, rb.labels, (size_t)ra.n_labels * 8) == 0);
    /* Another epoch draws otherwise. */
    run rc = {0};
    OK(tg_loader_set_position(b, 3, index));
    drain(&rc, b);
    cr_assert(memcmp(ra.x, rc.x, (size_t)ra.n * 4) != 0);
    run_free(&ra);
    run_free(&rb);
    run_free(&rc);
    tg_loader_free(a);
    tg_loader_free(b);
    tg_dataset_release(ds);
    tg_st_free(g);
}

/* Three ranks with batch 2: batch k of the ranks, side by side, is batch k
 * of one process with batch 6, augmentation included; the padded last run
 * repeats the epoch's first samples with their own draws. */
Test(transforms, shards_together_are_the_single_process_batches)
{
    tg_st_file *g = th_golden_load("transforms.safetensors");
    int64_t im[4];
    enum { N = 16, W = 3, B = 2 };
    tg_dataset *ds = aug_dataset(g, N, im);
    tg_augment_options ao = all_of_them();
    tg_loader_options one = {W * B, true, 11, false}, each = {B, true, 11, false};
    tg_loader *single, *rank[W];
    OK(tg_loader_new(&single, ds, &one));
    OK(tg_loader_set_augment(single, &ao));
    for (int r = 0; r < W; r++) {
        OK(tg_loader_new(&rank[r], ds, &each));
        OK(tg_loader_set_shard(rank[r], r, W));
        OK(tg_loader_set_augment(rank[r], &ao));
    }
    const int64_t per = im[0] * 5 * 6;
    for (int64_t epoch = 0; epoch < 2; epoch++) {
        OK(tg_loader_reset(single, epoch));
        for (int r = 0; r < W; r++) OK(tg_loader_reset(rank[r], epoch));
        run s = {0};
        drain(&s, single);
        cr_assert(eq(i64, s.n_labels, N));
        int64_t pos = 0;   /* the position in the single process's epoch */
        for (int k = 0; k < 3; k++)
            for (int r = 0; r < W; r++) {
                tg_tensor *x, *y;
                cr_assert(eq(int, tg_loader_next(rank[r], &x, &y), 1));
                cr_assert(eq(i64, tg_tensor_dim(x, 0), B));
                for (int64_t i = 0; i < B; i++, pos++) {
                    /* past the end: the epoch's first samples again */
                    int64_t p = pos < N ? pos : pos - N;
                    cr_assert(eq(i64, ((const int64_t *)tg_tensor_cdata(y))[i], s.labels[p]));
                    cr_assert(memcmp((const float *)tg_tensor_cdata(x) + i * per,
                                     s.x + p * per, (size_t)per * 4) == 0,
                              "epoch %lld rank %d batch %d sample %lld", (long long)epoch, r, k,
                              (long long)i);
                }
                tg_tensor_release(x);
                tg_tensor_release(y);
            }
        cr_assert(eq(i64, pos, 18));
        run_free(&s);
    }
    for (int r = 0; r < W; r++) tg_loader_free(rank[r]);
    tg_loader_free(single);
    tg_dataset_release(ds);
    tg_st_free(g);
}

/* Normalize alone is torchvision's T.Normalize bit for bit, per channel
 * (norm_channels 3) and with one mean and std for every channel. */
Test(transforms, normalize_is_torchvision_normalize)
{
    tg_st_file *g = th_golden_load("transforms.safetensors");
    int64_t im[4], per = 0;
    tg_dataset *ds = aug_dataset(g, 2, im);
    per = im[1] * im[2];
    const float *x0 = tg_tensor_cdata(tg_st_get(g, "aug.x"));
    double mean1[1], std1[1];
    mean1[0] = strtod(meta(g, "aug.mean1", 0), NULL);
    std1[0] = strtod(meta(g, "aug.std1", 0), NULL);
    for (int k = 0; k < 2; k++) {
        tg_loader *ld;
        tg_loader_options lo = {2, false, 0, false};
        OK(tg_loader_new(&ld, ds, &lo));
        tg_augment_options ao = TG_AUGMENT_OPTIONS_INIT;
        ao.norm_channels = k == 0 ? 3 : 1;
        ao.mean = k == 0 ? MEAN3 : mean1;
        ao.std = k == 0 ? STD3 : std1;
        OK(tg_loader_set_augment(ld, &ao));
        tg_tensor *x, *y;
        cr_assert(eq(int, tg_loader_next(ld, &x, &y), 1));
        const float *d = tg_tensor_cdata(x);
        const float *want = tg_tensor_cdata(tg_st_get(g, k == 0 ? "aug.norm3" : "aug.norm1"));
        for (int64_t i = 0; i < 2; i++)
            for (int64_t j = 0; j < (k == 0 ? 3 : 1) * per; j++)
                cr_assert(d[i * 3 * per + j] == want[j], "norm%d sample %lld element %lld: %.9g, "
                          "torchvision's %.9g", k == 0 ? 3 : 1, (long long)i, (long long)j,
                          d[i * 3 * per + j], want[j]);
        /* one mean and std apply to every channel */
        for (int64_t j = per; k == 1 && j < 3 * per; j++)
            cr_assert(d[j] == (x0[j] - 0.5f) / 0.3f, "element %lld", (long long)j);
        tg_tensor_release(x);
        tg_tensor_release(y);
        tg_loader_free(ld);
    }
    tg_dataset_release(ds);
    tg_st_free(g);
}

/* Flips alone: p 1 mirrors every sample, p 0 none; the padded pixels of a
 * crop as large as the padded image hold fill in the dataset's range, and
 * (without flip) the image sits at (top, left) = (padding[1], padding[0]). */
Test(transforms, flips_and_fill_in_each_range)
{
    tg_st_file *g = th_golden_load("transforms.safetensors");
    int64_t im[4];
    tg_dataset *ds = aug_dataset(g, 4, im);
    const int64_t c = im[0], h = im[1], w = im[2];
    for (int p = 0; p <= 1; p++) {
        tg_loader *ld;
        tg_loader_options lo = {4, true, 3, false};
        OK(tg_loader_new(&ld, ds, &lo));
        tg_augment_options ao = TG_AUGMENT_OPTIONS_INIT;
        ao.hflip_p = p;
        OK(tg_loader_set_augment(ld, &ao));
        tg_tensor *x, *y;
        cr_assert(eq(int, tg_loader_next(ld, &x, &y), 1));
        const float *d = tg_tensor_cdata(x);
        for (int64_t i = 0; i < 4; i++)
            for (int64_t k = 0; k < c * h * w; k++) {
                int64_t col = k % w, src = p ? k - col + (w - 1 - col) : k;
                cr_assert(d[i * c * h * w + k] == (float)(pattern(im[3], src) / 255.0),
                          "p %d sample %lld element %lld", p, (long long)i, (long long)k);
            }
        tg_tensor_release(x);
        tg_tensor_release(y);
        tg_loader_free(ld);
    }
    for (int r = 0; r < 2; r++) {
        OK(tg_dataset_set_pixel_range(ds, r ? TG_PIXELS_SYMMETRIC : TG_PIXELS_UNIT));
        tg_loader *ld;
        OK(tg_loader_new(&ld, ds, NULL));
        tg_augment_options ao = {0, {h + 3, w + 1}, {1, 2, 0, 1}, TG_PAD_CONSTANT, 0.25, 0,
                                 NULL, NULL};
        OK(tg_loader_set_augment(ld, &ao));
        tg_tensor *x, *y;
        cr_assert(eq(int, tg_loader_next(ld, &x, &y), 1));
        const float *d = tg_tensor_cdata(x);
        const float fill = r ? (0.25f - 0.5f) / 0.5f : 0.25f;
        for (int64_t q = 0; q < c; q++)
            for (int64_t yy = 0; yy < h + 3; yy++)
                for (int64_t xx = 0; xx < w + 1; xx++) {
                    float got = d[(q * (h + 3) + yy) * (w + 1) + xx];
                    bool inside = yy >= 2 && yy < 2 + h && xx >= 1;
                    uint8_t b = inside ? pattern(im[3], (q * h + yy - 2) * w + xx - 1) : 0;
                    float want = !inside ? fill
                                 : r     ? (float)(b / 127.5 - 1.0)
                                         : (float)(b / 255.0);
                    cr_assert(got == want, "range %d (%lld, %lld, %lld): %g, want %g", r,
                              (long long)q, (long long)yy, (long long)xx, got, want);
                }
        tg_tensor_release(x);
        tg_tensor_release(y);
        tg_loader_free(ld);
    }
    tg_dataset_release(ds);
    tg_st_free(g);
}

/* Options left at their defaults (or NULL) change nothing: the batches are
 * a plain loader's, bit for bit. */
Test(transforms, default_options_change_nothing)
{
    tg_st_file *g = th_golden_load("transforms.safetensors");
    int64_t im[4];
    tg_dataset *ds = aug_dataset(g, 7, im);
    tg_loader_options lo = {3, true, 9, false};
    run want = {0};
    tg_loader *plain;
    OK(tg_loader_new(&plain, ds, &lo));
    drain(&want, plain);
    tg_loader_free(plain);
    tg_augment_options init = TG_AUGMENT_OPTIONS_INIT, on = all_of_them();
    for (int k = 0; k < 2; k++) {
        tg_loader *ld;
        OK(tg_loader_new(&ld, ds, &lo));
        OK(tg_loader_set_augment(ld, &on));
        OK(tg_loader_set_augment(ld, k ? NULL : &init));
        run got = {0};
        drain(&got, ld);
        cr_assert(eq(i64, got.n, want.n));
        cr_assert(memcmp(got.x, want.x, (size_t)got.n * 4) == 0);
        run_free(&got);
        tg_loader_free(ld);
    }
    run_free(&want);
    tg_dataset_release(ds);
    tg_st_free(g);
}

Test(transforms, bad_augment_options_are_refused)
{
    tg_st_file *g = th_golden_load("transforms.safetensors");
    int64_t im[4];   /* images (3, 6, 7) */
    tg_dataset *ds = aug_dataset(g, 4, im);
    cr_assert(im[0] == 3 && im[1] == 6 && im[2] == 7);
    const double two[2] = {0.5, 0.5}, zero[3] = {0.5, 1e-50, 0.5}, nan3[3] = {1, NAN, 1};
    struct {
        tg_augment_options o;
        int rc;
        const char *msg;
    } bad[] = {
        {{-0.1, {0, 0}, {0}, 0, 0, 0, NULL, NULL}, TG_EINVAL, "hflip_p=-0.1 must be in [0, 1]"},
        {{1.5, {0, 0}, {0}, 0, 0, 0, NULL, NULL}, TG_EINVAL, "hflip_p=1.5 must be in [0, 1]"},
        {{NAN, {0, 0}, {0}, 0, 0, 0, NULL, NULL}, TG_EINVAL, "hflip_p=nan must be in [0, 1]"},
        {{0, {-1, 2}, {0}, 0, 0, 0, NULL, NULL}, TG_EINVAL, "crop[0]=-1 must be >= 0"},
        {{0, {0, 3}, {0}, 0, 0, 0, NULL, NULL}, TG_EINVAL,
         "crop={0, 3} must be {0, 0} (none) or two extents >= 1"},
        {{0, {2, 2}, {0, -1, 0, 0}, 0, 0, 0, NULL, NULL}, TG_EINVAL,
         "padding[1]=-1 must be in [0, 2147483647]"},
        {{0, {0, 0}, {1, 0, 0, 0}, 0, 0, 0, NULL, NULL}, TG_EINVAL,
         "padding is for the crop; crop must be given with it"},
        {{0, {2, 2}, {0}, TG_PAD_CIRCULAR, 0, 0, NULL, NULL}, TG_EINVAL,
         "padding_mode=3 must be TG_PAD_CONSTANT, TG_PAD_REFLECT or TG_PAD_REPLICATE"},
        {{0, {2, 2}, {0, 0, 7, 0}, TG_PAD_REFLECT, 0, 0, NULL, NULL}, TG_EINVAL,
         "padding[2]=7 must be < the images' width 7 with TG_PAD_REFLECT"},
        {{0, {2, 2}, {0, 6, 0, 0}, TG_PAD_REFLECT, 0, 0, NULL, NULL}, TG_EINVAL,
         "padding[1]=6 must be < the images' height 6 with TG_PAD_REFLECT"},
        {{0, {2, 2}, {0}, 0, INFINITY, 0, NULL, NULL}, TG_EINVAL, "fill=inf must be finite"},
        {{0, {0, 0}, {0}, 0, 0, 2, two, two}, TG_EINVAL,
         "norm_channels=2 must be 0 (none), 1 or 3 (the images' channels)"},
        {{0, {0, 0}, {0}, 0, 0, 3, NULL, zero}, TG_EINVAL,
         "mean and std must not be NULL with norm_channels=3"},
        {{0, {0, 0}, {0}, 0, 0, 3, zero, nan3}, TG_EINVAL, "std[1]=nan must be finite"},
        {{0, {0, 0}, {0}, 0, 0, 3, two, zero}, TG_EINVAL,
         "std[1]=1e-50 is 0 in f32 (a division by zero)"},
        /* torchvision: "Required crop size (7, 7) is larger than input image size (6, 7)" */
        {{0, {7, 7}, {0}, 0, 0, 0, NULL, NULL}, TG_ESHAPE,
         "crop=(7, 7) is larger than the padded images, (6, 7) (height, width)"},
        {{0, {9, 8}, {1, 1, 1, 1}, 0, 0, 0, NULL, NULL}, TG_ESHAPE,
         "crop=(9, 8) is larger than the padded images, (8, 9)"},
    };
    tg_loader *ld;
    OK(tg_loader_new(&ld, ds, NULL));
    /* a crop + flip set before stays in force after each refusal */
    tg_augment_options keep = {1, {4, 4}, {0}, TG_PAD_CONSTANT, 0, 0, NULL, NULL};
    OK(tg_loader_set_augment(ld, &keep));
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert(eq(int, tg_loader_set_augment(ld, &bad[i].o), bad[i].rc), "case %zu", i);
        th_expect_in(tg_error_message(), "loader_set_augment: ");
        th_expect_in(tg_error_message(), bad[i].msg);
    }
    tg_tensor *x, *y;
    cr_assert(eq(int, tg_loader_next(ld, &x, &y), 1));
    cr_assert(tg_tensor_dim(x, 2) == 4 && tg_tensor_dim(x, 3) == 4);
    tg_tensor_release(x);
    tg_tensor_release(y);
    cr_assert(eq(int, tg_loader_set_augment(NULL, &keep), TG_EINVAL));
    th_expect_in(tg_error_message(), "loader_set_augment: ld must not be NULL");
    tg_loader_free(ld);
    tg_dataset_release(ds);
    tg_st_free(g);
}

/* Inside a caller's scope, the resize and the padding keep their own
 * intermediate tensors: the scope captures none of them. */
Test(transforms, an_open_scope_captures_no_intermediate)
{
    NEEDS_PNG();
    const int64_t im[4] = {3, 9, 6, 60};
    mkdir_in("a");
    write_png("a/0.png", im);
    OK(tg_scope_begin());
    tg_image_folder_options o = {3, {4, 0}, 0, {4, 4}};
    tg_dataset *ds = NULL;
    OK(tg_image_folder_load_ex(&ds, th_tmp_dir, &o));
    cr_assert(eq(int, tg_scope_size(), 0));
    tg_loader *ld;
    OK(tg_loader_new(&ld, ds, NULL));
    tg_augment_options ao = {0.5, {4, 4}, {1, 1, 1, 1}, TG_PAD_REFLECT, 0, 0, NULL, NULL};
    OK(tg_loader_set_augment(ld, &ao));
    tg_tensor *x, *y;
    cr_assert(eq(int, tg_loader_next(ld, &x, &y), 1));
    cr_assert(eq(int, tg_scope_size(), 0));
    OK(tg_scope_end());
    cr_assert(tg_tensor_dim(x, 2) == 4 && tg_tensor_dim(x, 3) == 4);
    tg_tensor_release(x);
    tg_tensor_release(y);
    tg_loader_free(ld);
    tg_dataset_release(ds);
}
