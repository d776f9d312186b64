/* tests/test_transforms_augment.c - the loader's augmentation
 * (T.RandomCrop with padding in each mode and pad_if_needed,
 * T.RandomHorizontalFlip, T.RandomVerticalFlip, T.Normalize) against
 * torchvision 0.14 (scripts/make_transforms_goldens.py): the draws against
 * the documented rule, their invariants (windows of torchvision's padded
 * image, mirrors), resumption and shards, and the refusals. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"
#include "transforms_fixtures.h"

TestSuite(transforms);

/* ---- augmentation -------------------------------------------------------- */

/* The documented draw of sample `index` in epoch `epoch` of a loader seeded
 * with seed, for nh x nw window positions and flip probability p. */
static void expected_draw(uint64_t seed, int64_t epoch, int64_t index, int64_t nh, int64_t nw,
                          double p, int64_t *top, int64_t *left, bool *flip)
{
    double u[4];
    draw_uniforms(seed, epoch, index, u);
    *top = (int64_t)(u[0] * (double)nh);
    *left = (int64_t)(u[1] * (double)nw);
    *flip = u[2] < p;
}

/* Whether sample s (C, h, w) is padded (C, H, W)'s window at (top, left),
 * mirrored when flip, bit for bit. */
static bool is_window(const float *s, const float *padded, int64_t c, int64_t hh, int64_t ww,
                      int64_t h, int64_t w, int64_t top, int64_t left, bool flip)
{
    return is_window_flipped(s, padded, c, hh, ww, h, w, top, left, flip, false);
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
                                 m == 1 ? fill : 0, 0, NULL, NULL, 0, false};
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
    tg_augment_options o = {0.5, {5, 6}, {2, 1, 3, 2}, TG_PAD_REFLECT, 0, 3, MEAN3, STD3, 0, false};
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
                                 NULL, NULL, 0, false};
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
        {{-0.1, {0, 0}, {0}, 0, 0, 0, NULL, NULL, 0, false}, TG_EINVAL,
         "hflip_p=-0.1 must be in [0, 1]"},
        {{1.5, {0, 0}, {0}, 0, 0, 0, NULL, NULL, 0, false}, TG_EINVAL,
         "hflip_p=1.5 must be in [0, 1]"},
        {{NAN, {0, 0}, {0}, 0, 0, 0, NULL, NULL, 0, false}, TG_EINVAL,
         "hflip_p=nan must be in [0, 1]"},
        {{0, {-1, 2}, {0}, 0, 0, 0, NULL, NULL, 0, false}, TG_EINVAL, "crop[0]=-1 must be >= 0"},
        {{0, {0, 3}, {0}, 0, 0, 0, NULL, NULL, 0, false}, TG_EINVAL,
         "crop={0, 3} must be {0, 0} (none) or two extents >= 1"},
        {{0, {2, 2}, {0, -1, 0, 0}, 0, 0, 0, NULL, NULL, 0, false}, TG_EINVAL,
         "padding[1]=-1 must be in [0, 2147483647]"},
        {{0, {0, 0}, {1, 0, 0, 0}, 0, 0, 0, NULL, NULL, 0, false}, TG_EINVAL,
         "padding is for the crop; crop must be given with it"},
        {{0, {2, 2}, {0}, TG_PAD_CIRCULAR, 0, 0, NULL, NULL, 0, false}, TG_EINVAL,
         "padding_mode=3 must be TG_PAD_CONSTANT, TG_PAD_REFLECT or TG_PAD_REPLICATE"},
        {{0, {2, 2}, {0, 0, 7, 0}, TG_PAD_REFLECT, 0, 0, NULL, NULL, 0, false}, TG_EINVAL,
         "padding[2]=7 must be < the images' width 7 with TG_PAD_REFLECT"},
        {{0, {2, 2}, {0, 6, 0, 0}, TG_PAD_REFLECT, 0, 0, NULL, NULL, 0, false}, TG_EINVAL,
         "padding[1]=6 must be < the images' height 6 with TG_PAD_REFLECT"},
        {{0, {2, 2}, {0}, 0, INFINITY, 0, NULL, NULL, 0, false}, TG_EINVAL,
         "fill=inf must be finite"},
        {{0, {0, 0}, {0}, 0, 0, 2, two, two, 0, false}, TG_EINVAL,
         "norm_channels=2 must be 0 (none), 1 or 3 (the images' channels)"},
        {{0, {0, 0}, {0}, 0, 0, 3, NULL, zero, 0, false}, TG_EINVAL,
         "mean and std must not be NULL with norm_channels=3"},
        {{0, {0, 0}, {0}, 0, 0, 3, zero, nan3, 0, false}, TG_EINVAL, "std[1]=nan must be finite"},
        {{0, {0, 0}, {0}, 0, 0, 3, two, zero, 0, false}, TG_EINVAL,
         "std[1]=1e-50 is 0 in f32 (a division by zero)"},
        /* torchvision: "Required crop size (7, 7) is larger than input image size (6, 7)" */
        {{0, {7, 7}, {0}, 0, 0, 0, NULL, NULL, 0, false}, TG_ESHAPE,
         "crop=(7, 7) is larger than the padded images, (6, 7) (height, width)"},
        {{0, {9, 8}, {1, 1, 1, 1}, 0, 0, 0, NULL, NULL, 0, false}, TG_ESHAPE,
         "crop=(9, 8) is larger than the padded images, (8, 9)"},
    };
    tg_loader *ld;
    OK(tg_loader_new(&ld, ds, NULL));
    /* a crop + flip set before stays in force after each refusal */
    tg_augment_options keep = {1, {4, 4}, {0}, TG_PAD_CONSTANT, 0, 0, NULL, NULL, 0, false};
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

