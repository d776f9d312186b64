/* tests/test_augment_rotate.c - the loader's T.RandomRotation: F.rotate
 * with fixed angles and fills against torchvision 0.14
 * (scripts/make_augment_goldens.py), the documented draw of the angle
 * beside the crop and flip draws, the fill in each pixel range, a fill per
 * channel (padding and rotation), and the refusals. */
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

/* Each golden rotation, bit for bit: the grid, the sampling and the fill's
 * blend (one fill for all channels, or one each) are torch's f32
 * operations in torch's order. */
Test(augment, rotations_are_torchvision_rotate)
{
    tg_st_file *g = th_golden_load("augment.safetensors");
    const int n = atoi(meta(g, "rot.cases", 0));
    cr_assert(n > 0);
    for (int k = 0; k < n; k++) {
        const golden_case gc = golden_case_at(g, "rot", k);
        const double *p = gc.params;
        const float *want = tg_tensor_cdata(gc.y);
        const int64_t c = gc.c, h = gc.h, w = gc.w;
        const bool nearest = gc.mode == TG_RESIZE_NEAREST;
        float *v = malloc((size_t)(c * h * w) * sizeof *v);
        tg__rotate(v, tg_tensor_cdata(gc.x), c, h, w, p[0], gc.mode, gc.fill);
        cr_assert(same_bits(v, want, c * h * w), "case %d (%g degrees, %s): max diff %g", k,
                  p[0], nearest ? "nearest" : "bilinear", max_diff(v, want, c * h * w));
        free(v);
    }
    tg_st_free(g);
}

/* With a crop and flips: each sample is the rotation, by its documented
 * angle (slot 47), of the sample the loader gives without rotation (so the
 * windows and flips are as they were); the angles vary in their range. */
Test(augment, rotation_follows_the_documented_draw)
{
    enum { N = 12, C = 3, H = 7, W = 8, CH = 6, CW = 6 };
    tg_dataset *ds = pattern_dataset(N, C, H, W, 4);
    tg_augment_options base = TG_AUGMENT_OPTIONS_INIT;
    base.crop[0] = CH;
    base.crop[1] = CW;
    base.hflip_p = base.vflip_p = 0.5;
    for (int m = 0; m < 2; m++) {
        tg_augment_options rot = base;
        rot.rotation[0] = -40;
        rot.rotation[1] = 25;
        rot.rotation_interpolation = m ? TG_RESIZE_BILINEAR : TG_RESIZE_NEAREST;
        rot.rotation_fill = 0.75;
        run r[2] = {{0}, {0}};
        for (int k = 0; k < 2; k++) {
            tg_loader *ld;
            tg_loader_options lo = {5, true, 31, false};
            OK(tg_loader_new(&ld, ds, &lo));
            OK(tg_loader_set_augment(ld, k ? &rot : &base));
            OK(tg_loader_reset(ld, 1));
            drain(&r[k], ld);
            tg_loader_free(ld);
        }
        const int64_t per = C * CH * CW;
        cr_assert(eq(i64, r[1].n, N * per));
        double lo = 1e9, hi = -1e9;
        float want[C * CH * CW];
        for (int64_t i = 0; i < N; i++) {
            const double angle = -40 + doc_uniform(31, 1, r[0].labels[i], 47) * 65;
            lo = fmin(lo, angle);
            hi = fmax(hi, angle);
            tg__rotate(want, r[0].x + i * per, C, CH, CW, angle, rot.rotation_interpolation,
                       (const float[]){0.75f, 0.75f, 0.75f});
            cr_assert(same_bits(want, r[1].x + i * per, per), "mode %d sample %lld (%g "
                      "degrees): max diff %g", m, (long long)r[0].labels[i], angle,
                      max_diff(want, r[1].x + i * per, per));
        }
        cr_assert(lo < -20 && hi > 5, "angles only in [%g, %g]", lo, hi);
        run_free(&r[0]);
        run_free(&r[1]);
    }
    tg_dataset_release(ds);
}

/* The corners of a half turn's neighbour hold rotation_fill in the
 * dataset's range: 0.25 (unit) and (0.25 - 0.5) / 0.5 (symmetric). */
Test(augment, rotation_fill_in_each_range)
{
    tg_dataset *ds = pattern_dataset(2, 1, 6, 6, 2);
    for (int r = 0; r < 2; r++) {
        OK(tg_dataset_set_pixel_range(ds, r ? TG_PIXELS_SYMMETRIC : TG_PIXELS_UNIT));
        tg_loader *ld;
        OK(tg_loader_new(&ld, ds, NULL));
        tg_augment_options o = TG_AUGMENT_OPTIONS_INIT;
        o.rotation[0] = o.rotation[1] = 45;   /* a fixed angle */
        o.rotation_fill = 0.25;
        OK(tg_loader_set_augment(ld, &o));
        tg_tensor *x, *y;
        cr_assert(eq(int, tg_loader_next(ld, &x, &y), 1));
        const float *d = tg_tensor_cdata(x), want = r ? (0.25f - 0.5f) / 0.5f : 0.25f;
        for (int i = 0; i < 2; i++) {
            const float *s = d + 36 * i;
            cr_assert(s[0] == want && s[5] == want && s[30] == want && s[35] == want,
                      "range %d sample %d corners %g %g %g %g, want %g", r, i, s[0], s[5], s[30],
                      s[35], want);
            cr_assert(s[14] != want, "the middle is the picture");
        }
        tg_tensor_release(x);
        tg_tensor_release(y);
        tg_loader_free(ld);
    }
    tg_dataset_release(ds);
}

/* A fill per channel: the constant padding's pixels of channel p hold
 * fills[p] in the dataset's range (the picture as it was), the rotation
 * blends in fills[p]; one value in fills is fill / rotation_fill for every
 * channel. */
Test(augment, fills_per_channel)
{
    enum { C = 3, H = 4, W = 5 };
    tg_dataset *ds = pattern_dataset(2, C, H, W, 8);
    OK(tg_dataset_set_pixel_range(ds, TG_PIXELS_SYMMETRIC));
    const double fills[C] = {0.1, 0.5, 0.9}, one[1] = {0.3};
    float image[C * H * W];
    for (int64_t k = 0; k < C * H * W; k++) image[k] = (float)(pattern(8, k) / 127.5 - 1.0);
    for (int k = 0; k < 3; k++) {
        tg_augment_options o = TG_AUGMENT_OPTIONS_INIT;
        o.crop[0] = H + 2;   /* one row above and below, as large as the padded image */
        o.crop[1] = W + 3;
        o.padding[0] = o.padding[1] = o.padding[3] = 1;
        o.padding[2] = 2;
        o.fill = 0.3;
        o.fill_channels = k == 0 ? C : k == 1 ? 1 : 0;
        o.fills = k == 0 ? fills : one;
        tg_loader *ld;
        OK(tg_loader_new(&ld, ds, NULL));
        OK(tg_loader_set_augment(ld, &o));
        tg_tensor *x, *y;
        cr_assert(eq(int, tg_loader_next(ld, &x, &y), 1));
        const float *d = tg_tensor_cdata(x);
        for (int64_t p = 0; p < C; p++) {
            const float f = ((float)(k == 0 ? fills[p] : 0.3) - 0.5f) / 0.5f;
            for (int64_t r = 0; r < H + 2; r++)
                for (int64_t q = 0; q < W + 3; q++) {
                    const bool pad = r == 0 || r == H + 1 || q == 0 || q > W;
                    const float got = d[(p * (H + 2) + r) * (W + 3) + q];
                    const float want = pad ? f : image[(p * H + r - 1) * W + q - 1];
                    cr_assert(got == want, "case %d (%lld, %lld, %lld): %g, want %g", k,
                              (long long)p, (long long)r, (long long)q, got, want);
                }
        }
        tg_tensor_release(x);
        tg_tensor_release(y);
        tg_loader_free(ld);
    }
    /* the rotation by a fixed angle with a fill each */
    tg_augment_options o = TG_AUGMENT_OPTIONS_INIT;
    o.rotation[0] = o.rotation[1] = 50;
    o.rotation_interpolation = TG_RESIZE_BILINEAR;
    o.fill_channels = C;
    o.fills = fills;
    tg_loader *ld;
    OK(tg_loader_new(&ld, ds, NULL));
    OK(tg_loader_set_augment(ld, &o));
    tg_tensor *x, *y;
    cr_assert(eq(int, tg_loader_next(ld, &x, &y), 1));
    float want[C * H * W], f[C];
    for (int p = 0; p < C; p++) f[p] = ((float)fills[p] - 0.5f) / 0.5f;
    tg__rotate(want, image, C, H, W, 50, TG_RESIZE_BILINEAR, f);
    cr_assert(same_bits(tg_tensor_cdata(x), want, C * H * W), "max diff %g",
              max_diff(tg_tensor_cdata(x), want, C * H * W));
    tg_tensor_release(x);
    tg_tensor_release(y);
    tg_loader_free(ld);
    tg_dataset_release(ds);
}

Test(augment, rotation_refusals)
{
    tg_augment_options good = TG_AUGMENT_OPTIONS_INIT;
    good.vflip_p = 1;
    refusals r;
    refusals_begin(&r, &good);
    struct {
        double deg[2];
        int mode;
        double fill;
        const char *name;
    } bad[] = {
        {{NAN, 0}, TG_RESIZE_NEAREST, 0, "rotation"},
        {{0, INFINITY}, TG_RESIZE_NEAREST, 0, "rotation"},
        {{5, -5}, TG_RESIZE_NEAREST, 0, "rotation"},
        {{-5, 5}, TG_RESIZE_BICUBIC, 0, "rotation_interpolation"},
        {{-5, 5}, 9, 0, "rotation_interpolation"},
        {{-5, 5}, TG_RESIZE_BILINEAR, NAN, "rotation_fill"},
        {{0, 0}, 2, 0, "fill_channels"},
        {{0, 0}, 3, 0, "fills must not be NULL"},
        {{0, 0}, 4, 0, "fills[1]=nan"},
    };
    const double nan3[3] = {0, NAN, 0};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tg_augment_options o = TG_AUGMENT_OPTIONS_INIT;
        o.rotation[0] = bad[i].deg[0];
        o.rotation[1] = bad[i].deg[1];
        o.rotation_interpolation = (tg_resize_mode)bad[i].mode;
        o.rotation_fill = bad[i].fill;
        if (bad[i].deg[1] == 0) {   /* the fills' cases: mode is fill_channels + 1 */
            o.rotation_interpolation = TG_RESIZE_NEAREST;
            o.fill_channels = bad[i].mode == 4 ? 3 : bad[i].mode;
            o.fills = bad[i].mode == 4 ? nan3 : bad[i].mode == 2 ? nan3 : NULL;
        }
        char what[32];
        snprintf(what, sizeof what, "case %zu", i);
        expect_refusal(&r, &o, bad[i].name, what);
    }
    refusals_end(&r);
}
