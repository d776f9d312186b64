/* tests/test_augment_color.c - the loader's T.ColorJitter: the four
 * adjustments with fixed factors against torchvision 0.14
 * (scripts/make_augment_goldens.py), the documented draws of their order
 * and factors, the pixel ranges, and the refusals. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "augment_fixtures.h"
#include "data/augment_parts.h"
#include "helpers.h"
#include "tapegrad/tapegrad.h"
#include "transforms_fixtures.h"

TestSuite(augment);

/* Each golden case: the ops in its order with its factors, as
 * tg__color_adjust computes them, against torchvision's.  Brightness,
 * saturation and hue are bit for bit; contrast's mean is summed in double
 * here, in f32 by torch, which may move it by an f32 ulp (of ~0.5) and
 * each output by that ulp times (1 - factor): 2^-22 bounds that. */
Test(augment, color_ops_are_torchvision_ops)
{
    tg_st_file *g = th_golden_load("augment.safetensors");
    const int n = atoi(meta(g, "jit.cases", 0));
    cr_assert(n > 0);
    char key[32];
    for (int k = 0; k < n; k++) {
        snprintf(key, sizeof key, "jit%d.x", k);
        const tg_tensor *x = tg_st_get(g, key);
        snprintf(key, sizeof key, "jit%d.y", k);
        const float *want = tg_tensor_cdata(tg_st_get(g, key));
        snprintf(key, sizeof key, "jit%d.ops", k);
        const tg_tensor *ops = tg_st_get(g, key);
        snprintf(key, sizeof key, "jit%d.factors", k);
        const double *f = tg_tensor_cdata(tg_st_get(g, key));
        const int64_t c = tg_tensor_dim(x, 0), hw = tg_tensor_dim(x, 1) * tg_tensor_dim(x, 2);
        float *v = malloc((size_t)(c * hw) * sizeof *v);
        memcpy(v, tg_tensor_cdata(x), (size_t)(c * hw) * sizeof *v);
        bool contrast = false;
        for (int64_t i = 0; i < tg_tensor_numel(ops); i++) {
            const int op = (int)((const int64_t *)tg_tensor_cdata(ops))[i];
            tg__color_adjust(v, c, hw, op, f[op]);
            contrast = contrast || op == TG__CONTRAST;
        }
        const double d = max_diff(v, want, c * hw), tol = contrast ? ldexp(1, -22) : 0;
        cr_assert(d <= tol, "case %d: differs from torchvision by %g (tolerance %g)", k, d, tol);
        free(v);
    }
    tg_st_free(g);
}

/* The documented draw of sample index: the order from slots 40..42 (Fisher-
 * Yates), the factors from slots 43..46. */
static void doc_draw(const double mag[4], uint64_t seed, int64_t epoch, int64_t index,
                     int order[4], double f[4])
{
    for (int i = 0; i < 4; i++) order[i] = i;
    for (int i = 3; i >= 1; i--) {
        int j = (int)(doc_uniform(seed, epoch, index, 40 + 3 - i) * (i + 1));
        int t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (int op = 0; op < 4; op++) {
        double u = doc_uniform(seed, epoch, index, 43 + op), m = mag[op];
        double lo = op == 3 ? -m : fmax(0, 1 - m), hi = op == 3 ? m : 1 + m;
        f[op] = lo + u * (hi - lo);
    }
}

/* Every sample of two epochs is the pattern image through the documented
 * draw's ops (skipping those left at 0), in the unit range and, mapped
 * there and back, in the symmetric one; the draws vary between samples. */
static void check_jitter(int64_t c, const double mag[4], bool symmetric)
{
    enum { N = 12, H = 5, W = 7 };
    tg_dataset *ds = pattern_dataset(N, c, H, W, 9);
    if (symmetric) OK(tg_dataset_set_pixel_range(ds, TG_PIXELS_SYMMETRIC));
    tg_loader *ld;
    tg_loader_options lo = {5, true, 21, false};
    OK(tg_loader_new(&ld, ds, &lo));
    tg_augment_options ao = TG_AUGMENT_OPTIONS_INIT;
    ao.brightness = mag[0];
    ao.contrast = mag[1];
    ao.saturation = mag[2];
    ao.hue = mag[3];
    OK(tg_loader_set_augment(ld, &ao));
    const int64_t per = c * H * W;
    float *want = malloc((size_t)per * sizeof *want);
    int orders_seen = 0, first_order = -1;
    for (int64_t epoch = 0; epoch < 2; epoch++) {
        OK(tg_loader_reset(ld, epoch));
        tg_tensor *x, *y;
        while (tg_loader_next(ld, &x, &y) == 1) {
            const int64_t *index = tg_tensor_cdata(y);
            for (int64_t i = 0; i < tg_tensor_dim(x, 0); i++) {
                int order[4];
                double f[4];
                doc_draw(mag, 21, epoch, index[i], order, f);
                int code = order[0] * 64 + order[1] * 16 + order[2] * 4 + order[3];
                if (first_order < 0) first_order = code;
                orders_seen += code != first_order;
                pattern_image(want, c, H, W, 9);
                for (int64_t j = 0; symmetric && j < per; j++)
                    want[j] = (float)(pattern(9, j) / 127.5 - 1.0) * 0.5f + 0.5f;
                for (int k = 0; k < 4; k++)
                    if (mag[order[k]] > 0) tg__color_adjust(want, c, H * W, order[k],
                                                            f[order[k]]);
                for (int64_t j = 0; symmetric && j < per; j++)
                    want[j] = (want[j] - 0.5f) / 0.5f;
                const float *got = (const float *)tg_tensor_cdata(x) + i * per;
                cr_assert(same_bits(got, want, per), "c %lld epoch %lld sample %lld: not the "
                          "documented draw (max diff %g)", (long long)c, (long long)epoch,
                          (long long)index[i], max_diff(got, want, per));
            }
            tg_tensor_release(x);
            tg_tensor_release(y);
        }
    }
    cr_assert(orders_seen > 0, "every sample drew the same order");
    free(want);
    tg_loader_free(ld);
    tg_dataset_release(ds);
}

Test(augment, jitter_follows_the_documented_draw)
{
    const double all[4] = {0.4, 0.5, 0.6, 0.2}, bright[4] = {0.8, 0, 0, 0};
    const double hue[4] = {0, 0, 0, 0.5};
    check_jitter(3, all, false);
    check_jitter(3, all, true);
    check_jitter(3, bright, false);
    check_jitter(3, hue, false);
    check_jitter(1, all, false);   /* saturation and hue leave one channel alone */
}

/* ColorJitter leaves RandomCrop's windows and the flips as they were: each
 * sample is the jitter of the sample the loader gives without it. */
Test(augment, jitter_leaves_crop_and_flip_draws)
{
    enum { N = 10, C = 3, H = 6, W = 8 };
    tg_dataset *ds = pattern_dataset(N, C, H, W, 5);
    tg_augment_options base = TG_AUGMENT_OPTIONS_INIT;
    base.crop[0] = 4;
    base.crop[1] = 5;
    base.padding[0] = base.padding[3] = 1;
    base.hflip_p = base.vflip_p = 0.5;
    tg_augment_options jit = base;
    jit.brightness = jit.contrast = jit.saturation = 0.3;
    jit.hue = 0.1;
    run r[2] = {{0}, {0}};
    for (int k = 0; k < 2; k++) {
        tg_loader *ld;
        tg_loader_options lo = {4, true, 8, false};
        OK(tg_loader_new(&ld, ds, &lo));
        OK(tg_loader_set_augment(ld, k ? &jit : &base));
        OK(tg_loader_reset(ld, 3));
        drain(&r[k], ld);
        tg_loader_free(ld);
    }
    const double mag[4] = {0.3, 0.3, 0.3, 0.1};
    const int64_t per = C * 4 * 5;
    cr_assert(eq(i64, r[0].n, N * per));
    cr_assert(eq(i64, r[1].n, N * per));
    for (int64_t i = 0; i < N; i++) {
        int order[4];
        double f[4];
        doc_draw(mag, 8, 3, r[0].labels[i], order, f);
        float *v = r[0].x + i * per;
        for (int k = 0; k < 4; k++) tg__color_adjust(v, C, 20, order[k], f[order[k]]);
        cr_assert(same_bits(v, r[1].x + i * per, per), "sample %lld", (long long)i);
    }
    run_free(&r[0]);
    run_free(&r[1]);
    tg_dataset_release(ds);
}

/* One refused option set: TG_EINVAL naming `name`, and the loader's
 * augmentation (none) left as it was. */
static void refuse(tg_loader *ld, const tg_augment_options *o, const char *name,
                   const float *plain, int64_t n)
{
    cr_assert(eq(int, tg_loader_set_augment(ld, o), TG_EINVAL), "%s", name);
    cr_assert(strstr(tg_error_message(), name) != NULL, "'%s' does not name %s",
              tg_error_message(), name);
    OK(tg_loader_reset(ld, 0));
    tg_tensor *x, *y;
    cr_assert(eq(int, tg_loader_next(ld, &x, &y), 1));
    cr_assert(eq(i64, tg_tensor_numel(x), n));
    cr_assert(same_bits(tg_tensor_cdata(x), plain, n), "%s changed the augmentation", name);
    tg_tensor_release(x);
    tg_tensor_release(y);
}

Test(augment, jitter_refusals)
{
    tg_dataset *ds = pattern_dataset(2, 3, 4, 5, 1);
    tg_loader *ld;
    tg_loader_options lo = {2, false, 0, false};
    OK(tg_loader_new(&ld, ds, &lo));
    float plain[2 * 60];
    pattern_image(plain, 3, 4, 5, 1);
    memcpy(plain + 60, plain, 60 * sizeof *plain);
    const double bad[] = {-0.1, NAN, INFINITY};
    for (int op = 0; op < 4; op++)
        for (int b = 0; b < 3; b++) {
            tg_augment_options o = TG_AUGMENT_OPTIONS_INIT;
            double *m[4] = {&o.brightness, &o.contrast, &o.saturation, &o.hue};
            *m[op] = bad[b];
            refuse(ld, &o, (const char *[]){"brightness", "contrast", "saturation", "hue"}[op],
                   plain, 120);
        }
    tg_augment_options o = TG_AUGMENT_OPTIONS_INIT;
    o.hue = 0.5000001;
    refuse(ld, &o, "hue", plain, 120);
    o.hue = 0.5;   /* the edge is allowed */
    OK(tg_loader_set_augment(ld, &o));
    OK(tg_loader_set_augment(ld, NULL));
    tg_loader_free(ld);
    tg_dataset_release(ds);
    /* two channels: neither grey nor RGB, as torchvision's TypeError */
    ds = pattern_dataset(2, 2, 4, 5, 1);
    OK(tg_loader_new(&ld, ds, &lo));
    pattern_image(plain, 2, 4, 5, 1);
    memcpy(plain + 40, plain, 40 * sizeof *plain);
    o = (tg_augment_options)TG_AUGMENT_OPTIONS_INIT;
    o.contrast = 0.2;
    refuse(ld, &o, "channels", plain, 80);
    tg_loader_free(ld);
    tg_dataset_release(ds);
}
