/* tests/test_transforms_augment.c - the values of the loader's
 * augmentation (T.RandomCrop with padding in each mode and pad_if_needed,
 * T.RandomHorizontalFlip, T.RandomVerticalFlip, T.Normalize) against
 * torchvision 0.14 (scripts/make_transforms_goldens.py): each sample is
 * the window of torchvision's padded image at the documented draw,
 * mirrored as it says.  Resumption, shards and refusals are
 * test_transforms_options.c's. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"
#include "transforms_fixtures.h"

TestSuite(transforms);

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
                                 m == 1 ? fill : 0, 0, NULL, NULL, 0, false, AUG_NEW_OFF};
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
                                 NULL, NULL, 0, false, AUG_NEW_OFF};
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

/* Every sample of two epochs of ld is the window of padded (C, H, W) at
 * the documented draw, mirrored as u2 < hflip_p and u3 < vflip_p say; each
 * flip happens to some samples and not to others. */
static void expect_drawn_windows(tg_loader *ld, const tg_tensor *padded, const char *what,
                                 const tg_augment_options *ao, int64_t n)
{
    const int64_t c = tg_tensor_dim(padded, 0), hh = tg_tensor_dim(padded, 1);
    const int64_t ww = tg_tensor_dim(padded, 2), h = ao->crop[0], w = ao->crop[1];
    int flips[2] = {0, 0}, seen = 0;
    for (int64_t epoch = 0; epoch < 2; epoch++) {
        OK(tg_loader_reset(ld, epoch));
        tg_tensor *x, *y;
        while (tg_loader_next(ld, &x, &y) == 1) {
            cr_assert(tg_tensor_dim(x, 1) == c && tg_tensor_dim(x, 2) == h &&
                      tg_tensor_dim(x, 3) == w, "%s: the batch's shape", what);
            const int64_t *index = tg_tensor_cdata(y);   /* label i is sample i */
            for (int64_t i = 0; i < tg_tensor_dim(x, 0); i++, seen++) {
                double u[4];
                draw_uniforms(77, epoch, index[i], u);
                int64_t top = (int64_t)(u[0] * (double)(hh - h + 1));
                int64_t left = (int64_t)(u[1] * (double)(ww - w + 1));
                bool hf = u[2] < ao->hflip_p, vf = u[3] < ao->vflip_p;
                const float *s = (const float *)tg_tensor_cdata(x) + i * c * h * w;
                cr_assert(is_window_flipped(s, tg_tensor_cdata(padded), c, hh, ww, h, w, top,
                                            left, hf, vf),
                          "%s: epoch %lld sample %lld is not the drawn window (%lld, %lld, "
                          "flips %d %d)", what, (long long)epoch, (long long)index[i],
                          (long long)top, (long long)left, hf, vf);
                flips[0] += hf;
                flips[1] += vf;
            }
            tg_tensor_release(x);
            tg_tensor_release(y);
        }
    }
    cr_assert(eq(int, seen, 2 * (int)n));
    for (int f = 0; f < 2; f++)
        cr_assert(flips[f] > 0 && flips[f] < seen, "%s: %s flips %d of %d", what,
                  f ? "vertical" : "horizontal", flips[f], seen);
}

/* Symmetric padding, and pad_if_needed in each mode, give windows of the
 * image torchvision's RandomCrop crops (F.pad's 'symmetric'; padded, then
 * padded if needed on both sides), flipped both ways at the draw. */
Test(transforms, symmetric_padding_and_pad_if_needed_are_torchvision_windows)
{
    tg_st_file *g = th_golden_load("transforms.safetensors");
    int64_t im[4];
    enum { N = 24 };
    tg_dataset *ds = aug_dataset(g, N, im);
    const double fill = strtod(meta(g, "aug.fill", 0), NULL);
    const char *name[4] = {"constant", "reflect", "edge", "symmetric"};
    const tg_pad_mode pm[4] = {TG_PAD_CONSTANT, TG_PAD_REFLECT, TG_PAD_REPLICATE,
                               TG_PAD_SYMMETRIC};
    const int cases = atoi(meta(g, "ifneeded.cases", 0));
    cr_assert(cases >= 2);
    /* k = -1: aug.pad.symmetric with aug.padding and crop (5, 6), no pad_if_needed */
    for (int k = -1; k < cases; k++)
        for (int m = k < 0 ? 3 : 0; m < 4; m++) {
            char key[64];
            int64_t pad[4], crop[2] = {5, 6};
            cr_assert(eq(int, ints(k < 0 ? meta(g, "aug.padding", 0)
                                         : meta(g, "ifneeded%d.padding", k), pad, 4), 4));
            if (k >= 0) cr_assert(eq(int, ints(meta(g, "ifneeded%d.crop", k), crop, 2), 2));
            snprintf(key, sizeof key, k < 0 ? "aug.pad.symmetric" : "ifneeded%d.%s", k,
                     name[m]);
            const tg_tensor *padded = tg_st_get(g, key);
            cr_assert(padded != NULL, "%s", key);
            tg_augment_options ao = {.hflip_p = 0.5, .vflip_p = 0.5, .crop = {crop[0], crop[1]},
                                     .padding = {pad[0], pad[1], pad[2], pad[3]},
                                     .padding_mode = pm[m], .pad_if_needed = k >= 0,
                                     .fill = pm[m] == TG_PAD_CONSTANT ? fill : 0};
            tg_loader_options lo = {8, true, 77, false};
            tg_loader *ld;
            OK(tg_loader_new(&ld, ds, &lo));
            OK(tg_loader_set_augment(ld, &ao));
            expect_drawn_windows(ld, padded, key, &ao, N);
            tg_loader_free(ld);
        }
    tg_dataset_release(ds);
    tg_st_free(g);
}

/* vflip_p 1 alone is torchvision's F.vflip of every sample; added to crop,
 * padding, hflip and normalize, it flips each sample those give upside down
 * and changes none of their draws. */
Test(transforms, vertical_flips_are_vflip_and_leave_the_other_draws)
{
    tg_st_file *g = th_golden_load("transforms.safetensors");
    int64_t im[4];
    tg_dataset *ds = aug_dataset(g, 10, im);
    const tg_tensor *want = tg_st_get(g, "aug.vflip");
    const int64_t per = im[0] * im[1] * im[2];
    tg_loader_options lo = {5, true, 21, false};
    tg_loader *a, *b;
    OK(tg_loader_new(&a, ds, &lo));
    tg_augment_options ao = TG_AUGMENT_OPTIONS_INIT;
    ao.vflip_p = 1;
    OK(tg_loader_set_augment(a, &ao));
    run r = {0};
    drain(&r, a);
    cr_assert(eq(i64, r.n, 10 * per));
    for (int64_t k = 0; k < r.n; k++)
        cr_assert(r.x[k] == ((const float *)tg_tensor_cdata(want))[k % per], "element %lld",
                  (long long)k);
    run_free(&r);
    tg_augment_options on = all_of_them(), onv = all_of_them();
    onv.vflip_p = 1;
    OK(tg_loader_set_augment(a, &on));
    OK(tg_loader_new(&b, ds, &lo));
    OK(tg_loader_set_augment(b, &onv));
    run ra = {0}, rb = {0};
    OK(tg_loader_reset(a, 1));
    OK(tg_loader_reset(b, 1));
    drain(&ra, a);
    drain(&rb, b);
    cr_assert(eq(i64, ra.n, rb.n));
    cr_assert(eq(i64, ra.n, 10 * im[0] * 5 * 6));
    for (int64_t k = 0; k < ra.n; k++) {
        int64_t col = k % 6, row = k / 6 % 5, plane = k / 30;
        cr_assert(rb.x[k] == ra.x[(plane * 5 + 4 - row) * 6 + col], "element %lld",
                  (long long)k);
    }
    run_free(&ra);
    run_free(&rb);
    tg_loader_free(a);
    tg_loader_free(b);
    tg_dataset_release(ds);
    tg_st_free(g);
}
