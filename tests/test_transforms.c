/* tests/test_transforms.c - tg_image_folder_load_ex (T.ToTensor, T.Resize
 * bilinear and bicubic with antialias or nearest, T.CenterCrop) against
 * torchvision 0.14 (scripts/make_transforms_goldens.py), with folders of
 * PNGs written here, and the refusals.  The loader's augmentation is
 * test_transforms_augment.c's. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"
#include "transforms_fixtures.h"

static void make_dir(void) { th_tmp_dir_make("tg_tfm_"); }

TestSuite(transforms, .init = make_dir, .fini = th_tmp_dir_remove);

/* ---- helpers ------------------------------------------------------------- */

static void mkdir_in(const char *rel)
{
    char p[256];
    cr_assert(eq(int, mkdir(th_tmp_path(p, sizeof p, rel), 0755), 0), "mkdir %s", p);
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
/* The bicubic tolerance, in units of 2^-24 (the images' scale is 1). */
enum { BICUBIC_ABS = 16 };

/* ---- T.Resize and T.CenterCrop ---------------------------------------- */

/* Fails unless f32 got[0..n) lies within tol of want[0..n).  Returns the
 * largest difference in units of 2^-24. */
static int64_t expect_abs(const char *what, const float *got, const float *want, int64_t n,
                          double tol)
{
    double worst = 0;
    for (int64_t k = 0; k < n; k++) {
        double d = fabs((double)got[k] - (double)want[k]);
        cr_assert(d <= tol, "%s: element %lld is %.9g, torchvision's %.9g", what, (long long)k,
                  got[k], want[k]);
        if (d > worst) worst = d;
    }
    return (int64_t)ceil(worst * 0x1p24);
}

/* Golden case <prefix><i> (T.Resize, T.CenterCrop) loaded from its PNG in
 * the folder d<prefix><i>: fails unless it lies within max_ulps of
 * torchvision's when it resizes (exact when it only crops), or with
 * max_ulps < 0, within an absolute -max_ulps * 2^-24.  Returns the largest
 * distance in ULPs (units of 2^-24). */
static int64_t expect_case(const tg_st_file *g, const char *prefix, int i, int64_t max_ulps)
{
    char fmt[64], dir[64], file[80], root[256], key[64];
#define META(what) (snprintf(fmt, sizeof fmt, "%s%%d." what, prefix), meta(g, fmt, i))
    int64_t im[4], rs[2] = {0, 0}, ms[1] = {0}, cp[2] = {0, 0};
    cr_assert(eq(int, ints(META("image"), im, 4), 4));
    tg_image_folder_options o = TG_IMAGE_FOLDER_OPTIONS_INIT;
    o.channels = atoi(META("channels"));
    ints(META("resize"), rs, 2);
    ints(META("max_size"), ms, 1);
    ints(META("crop"), cp, 2);
#undef META
    snprintf(key, sizeof key, "%s%d.interpolation", prefix, i);
    const char *mode = tg_st_meta_get(g, key);
    if (mode)
        o.interpolation = !strcmp(mode, "nearest")   ? TG_RESIZE_NEAREST
                          : !strcmp(mode, "bicubic") ? TG_RESIZE_BICUBIC
                                                     : (tg_resize_mode)-1;
    memcpy(o.resize, rs, sizeof rs);
    o.max_size = ms[0];
    memcpy(o.center_crop, cp, sizeof cp);
    snprintf(dir, sizeof dir, "d%s%d", prefix, i);
    mkdir_in(dir);
    snprintf(file, sizeof file, "%s/a", dir);
    mkdir_in(file);
    snprintf(file, sizeof file, "%s/a/0.png", dir);
    write_png(file, im);
    tg_dataset *ds = NULL;
    OK(tg_image_folder_load_ex(&ds, th_tmp_path(root, sizeof root, dir), &o));
    tg_tensor *x;
    whole_batch(&x, ds, TG_PIXELS_UNIT);
    snprintf(key, sizeof key, "%s%d.y", prefix, i);
    const tg_tensor *want = tg_st_get(g, key);
    cr_assert(want != NULL);
    for (int d = 0; d < 3; d++)
        cr_assert(eq(i64, tg_tensor_dim(x, d + 1), tg_tensor_dim(want, d)), "%s dim %d", key, d);
    /* Cropping alone copies bytes: exact.  Resizing: within max_ulps. */
    int64_t u = max_ulps < 0 && rs[0]
                    ? expect_abs(key, tg_tensor_cdata(x), tg_tensor_cdata(want),
                                 tg_tensor_numel(want), (double)-max_ulps * 0x1p-24)
                    : expect_ulps(key, tg_tensor_cdata(x), tg_tensor_cdata(want),
                                  tg_tensor_numel(want), rs[0] ? max_ulps : 0);
    tg_tensor_release(x);
    tg_dataset_release(ds);
    return u;
}

Test(transforms, resize_and_center_crop_match_torchvision)
{
    NEEDS_PNG();
    tg_st_file *g = th_golden_load("transforms.safetensors");
    int cases = atoi(meta(g, "cases", 0));
    cr_assert(cases >= 10);
    int64_t worst = 0;
    for (int i = 0; i < cases; i++) {
        int64_t u = expect_case(g, "case", i, RESIZE_ULPS);
        if (u > worst) worst = u;
    }
    cr_log_info("transforms: resize within %lld ulps of torchvision", (long long)worst);
    tg_st_free(g);
}

/* T.Resize with InterpolationMode.NEAREST, torch's 'nearest' (a copy of
 * the pixels it picks: exact), and BICUBIC with antialias: within 16
 * roundings of the images' scale 1 (2^-20), values outside [0, 1]
 * included; the cubic's negative lobes and the two passes' sums in
 * another order than torch's leave more than the bilinear's few ULPs. */
Test(transforms, nearest_and_bicubic_resize_match_torchvision)
{
    NEEDS_PNG();
    tg_st_file *g = th_golden_load("transforms.safetensors");
    int cases = atoi(meta(g, "interp.cases", 0));
    cr_assert(cases >= 10);
    int64_t worst = 0;
    int seen[2] = {0, 0};
    for (int i = 0; i < cases; i++) {
        bool nearest = !strcmp(meta(g, "interp%d.interpolation", i), "nearest");
        int64_t u = expect_case(g, "interp", i, nearest ? 0 : -BICUBIC_ABS);
        if (u > worst) worst = u;
        seen[nearest]++;
    }
    cr_assert(seen[0] >= 5 && seen[1] >= 5, "bicubic %d, nearest %d cases", seen[0], seen[1]);
    cr_log_info("transforms: bicubic within %lld * 2^-24 of torchvision", (long long)worst);
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
        tg_image_folder_options o = {grey ? 1 : 3, {rs[0], 0}, 0, {cp[0], cp[1]}, 0};
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
    tg_image_folder_options o = {3, {8, 0}, 0, {0, 0}, 0};
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
    tg_image_folder_options o = {3, {7, 0}, 0, {7, 9}, 0};
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
        {{2, {0, 0}, 0, {0, 0}, 0}, "image_folder_load: channels=2 must be 1 (grey) or 3 (RGB)"},
        {{3, {-1, 0}, 0, {0, 0}, 0},
         "image_folder_load_ex: resize[0]=-1 must be in [0, 2147483647]"},
        {{3, {4, -2}, 0, {0, 0}, 0}, "image_folder_load_ex: resize[1]=-2 must be in [0, "},
        {{3, {(int64_t)1 << 31, 0}, 0, {0, 0}, 0}, "resize[0]=2147483648 must be in [0, "},
        {{3, {0, 5}, 0, {0, 0}, 0}, "resize={0, 5}: resize[0] must be > 0 when resize[1] is given"},
        {{3, {0, 0}, 0, {-3, 2}, 0}, "image_folder_load_ex: center_crop[0]=-3 must be in [0, "},
        {{3, {0, 0}, 0, {3, 0}, 0}, "center_crop={3, 0} must be {0, 0} (none) or two extents >= 1"},
        {{3, {0, 0}, 0, {0, 3}, 0}, "center_crop={0, 3} must be {0, 0} (none) or two extents"},
        {{3, {4, 0}, -1, {0, 0}, 0}, "image_folder_load_ex: max_size=-1 must be >= 0"},
        {{3, {4, 0}, 4, {0, 0}, 0}, "max_size=4 must be greater than the shorter side's size "
                                 "resize[0]=4"},
        {{3, {4, 5}, 9, {0, 0}, 0}, "max_size=9 needs resize {s, 0} (the shorter side); resize is "
                                 "{4, 5}"},
        {{3, {0, 0}, 9, {0, 0}, 0}, "max_size=9 needs resize {s, 0}"},
        {{3, {4, 0}, 0, {0, 0}, (tg_resize_mode)3},
         "image_folder_load_ex: interpolation=3 must be TG_RESIZE_BILINEAR, TG_RESIZE_NEAREST or "
         "TG_RESIZE_BICUBIC"},
        {{3, {4, 0}, 0, {0, 0}, (tg_resize_mode)-1}, "interpolation=-1 must be TG_RESIZE_"},
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
    tg_image_folder_options o = {1, {1, 0}, 2, {0, 0}, 0};
    char root[256];
    cr_assert(eq(int, tg_image_folder_load_ex(&ds, th_tmp_path(root, sizeof root, "t"), &o),
                 TG_ESHAPE));
    th_expect_in(tg_error_message(), "a/0.png' (40x1, width x height) resized to 1 on its shorter "
                                     "side (max_size 2) would be 2x0");
    cr_assert(ds == NULL);
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
    tg_image_folder_options o = {3, {4, 0}, 0, {4, 4}, 0};
    tg_dataset *ds = NULL;
    OK(tg_image_folder_load_ex(&ds, th_tmp_dir, &o));
    cr_assert(eq(int, tg_scope_size(), 0));
    tg_loader *ld;
    OK(tg_loader_new(&ld, ds, NULL));
    tg_augment_options ao = {0.5, {4, 4}, {1, 1, 1, 1}, TG_PAD_REFLECT, 0, 0, NULL, NULL,
                              0, false, AUG_NEW_OFF};
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
