/* tests/test_augment_jitter_ranges.c - the loader's T.ColorJitter with a
 * (lo, hi) range per factor: the documented draws in those ranges, the
 * ranges torchvision reads as off, and the refusals. */
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

enum { N = 10, C = 3, H = 5, W = 6 };

/* The batches of a loader (batch 4, seed 17, epoch 1) over the pattern
 * dataset with options o. */
static run batches(const tg_augment_options *o)
{
    tg_dataset *ds = pattern_dataset(N, C, H, W, 12);
    tg_loader *ld;
    tg_loader_options lo = {4, true, 17, false};
    OK(tg_loader_new(&ld, ds, &lo));
    OK(tg_loader_set_augment(ld, o));
    OK(tg_loader_reset(ld, 1));
    run r = {0};
    drain(&r, ld);
    tg_loader_free(ld);
    tg_dataset_release(ds);
    return r;
}

/* Each sample is the pattern image through the documented order (slots 40
 * .. 42) and factors lo + u (hi - lo) (slots 43 .. 46) of its ranges; the
 * ops whose range is torchvision's None ((1, 1), hue (0, 0)) skipped. */
Test(augment, jitter_ranges_follow_the_documented_draw)
{
    const double ranges[3][4][2] = {
        {{0.2, 0.5}, {1.5, 2.0}, {0.0, 0.3}, {-0.4, -0.1}},
        {{1.2, 1.2}, {1, 1}, {0, 0}, {0.1, 0.45}},   /* a fixed factor, off, unset */
        {{0, 0}, {0.5, 3}, {1, 1}, {-0.5, 0.5}},
    };
    for (int k = 0; k < 3; k++) {
        tg_augment_options o = TG_AUGMENT_OPTIONS_INIT;
        double *g[4] = {o.brightness_range, o.contrast_range, o.saturation_range,
                        o.hue_range};
        for (int op = 0; op < 4; op++) memcpy(g[op], ranges[k][op], 2 * sizeof(double));
        if (k == 1) o.saturation = 0.25;   /* unset range: the number's */
        run r = batches(&o);
        cr_assert(eq(i64, r.n, N * C * H * W));
        float want[C * H * W];
        for (int64_t i = 0; i < N; i++) {
            const int64_t id = r.labels[i];
            int order[4] = {0, 1, 2, 3};
            for (int q = 3; q >= 1; q--) {
                int j = (int)(doc_uniform(17, 1, id, 40 + 3 - q) * (q + 1));
                int t = order[q];
                order[q] = order[j];
                order[j] = t;
            }
            double f[4];
            bool on[4];
            for (int op = 0; op < 4; op++) {
                double lo = ranges[k][op][0], hi = ranges[k][op][1];
                if (k == 1 && op == 2) lo = 0.75, hi = 1.25;
                on[op] = !(lo == (op == 3 ? 0 : 1) && hi == lo) && !(lo == 0 && hi == 0);
                f[op] = lo + doc_uniform(17, 1, id, 43 + op) * (hi - lo);
            }
            pattern_image(want, C, H, W, 12);
            for (int q = 0; q < 4; q++)
                if (on[order[q]]) tg__color_adjust(want, C, H * W, order[q], f[order[q]]);
            cr_assert(same_bits(want, r.x + i * C * H * W, C * H * W), "case %d sample %lld: "
                      "max diff %g", k, (long long)id,
                      max_diff(want, r.x + i * C * H * W, C * H * W));
        }
        run_free(&r);
    }
}

/* Ranges that are torchvision's None leave the batches as they are, and
 * ColorJitter off: pictures of 2 channels, which it refuses, are let
 * through. */
Test(augment, jitter_ranges_at_the_centre_are_off)
{
    tg_augment_options plain = TG_AUGMENT_OPTIONS_INIT, o = plain;
    plain.hflip_p = o.hflip_p = 0.5;
    o.brightness_range[0] = o.brightness_range[1] = 1;
    o.contrast_range[0] = o.contrast_range[1] = 1;
    o.saturation_range[0] = o.saturation_range[1] = 1;
    run a = batches(&plain), b = batches(&o);
    cr_assert(eq(i64, a.n, b.n));
    cr_assert(same_bits(a.x, b.x, a.n), "a range of (1, 1) changed the images");
    run_free(&a);
    run_free(&b);
    o.hue_range[0] = o.hue_range[1] = 0;
    tg_dataset *ds = pattern_dataset(2, 2, 4, 5, 1);
    tg_loader *ld;
    OK(tg_loader_new(&ld, ds, NULL));
    OK(tg_loader_set_augment(ld, &o));
    o.contrast_range[0] = 0.9;
    cr_assert(eq(int, tg_loader_set_augment(ld, &o), TG_EINVAL), "2 channels with contrast");
    tg_loader_free(ld);
    tg_dataset_release(ds);
}

Test(augment, jitter_range_refusals)
{
    tg_augment_options good = TG_AUGMENT_OPTIONS_INIT;
    good.hflip_p = 1;
    refusals r;
    refusals_begin(&r, &good);
    const char *names[4] = {"brightness", "contrast", "saturation", "hue"};
    const double bad[6][2] = {{0.5, 0.2}, {-0.1, 0.5}, {NAN, 1}, {0.5, INFINITY},
                              {0.2, 0.6}, {-0.6, 0.1}};
    for (int op = 0; op < 4; op++)
        for (int b = 0; b < 7; b++) {
            if ((op < 3 && b == 4) || (op == 3 && b == 1)) continue;   /* valid ranges */
            tg_augment_options o = TG_AUGMENT_OPTIONS_INIT;
            double *g[4] = {o.brightness_range, o.contrast_range, o.saturation_range,
                            o.hue_range};
            double *m[4] = {&o.brightness, &o.contrast, &o.saturation, &o.hue};
            char want[64];
            if (b < 6) {
                memcpy(g[op], bad[b], sizeof bad[b]);
                snprintf(want, sizeof want, "%s_range=", names[op]);
            } else {   /* both forms */
                g[op][0] = op == 3 ? -0.1 : 0.5;
                g[op][1] = op == 3 ? 0.3 : 0.9;
                *m[op] = 0.2;
                snprintf(want, sizeof want, "both given");
            }
            char what[32];
            snprintf(what, sizeof what, "op %d case %d", op, b);
            expect_refusal(&r, &o, want, what);
        }
    refusals_end(&r);
}
