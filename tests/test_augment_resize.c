/* tests/test_augment_resize.c - the loader's T.RandomResizedCrop:
 * F.resized_crop with fixed boxes and get_params' central fallback against
 * torchvision 0.14 (scripts/make_augment_goldens.py), the documented draws
 * of the boxes beside the flips', resumption, and the refusals. */
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

static tg_resize_mode mode_of(const char *s)
{
    return !strcmp(s, "nearest") ? TG_RESIZE_NEAREST
           : !strcmp(s, "bicubic") ? TG_RESIZE_BICUBIC
                                   : TG_RESIZE_BILINEAR;
}

/* Each golden box resized as torchvision's F.resized_crop: nearest bit for
 * bit, the interpolations within a few roundings. */
Test(augment, resized_crops_are_torchvision_resized_crop)
{
    tg_st_file *g = th_golden_load("augment.safetensors");
    const int n = atoi(meta(g, "rrc.cases", 0));
    cr_assert(n > 0);
    char key[32];
    for (int k = 0; k < n; k++) {
        snprintf(key, sizeof key, "rrc%d.x", k);
        const tg_tensor *x = tg_st_get(g, key);
        snprintf(key, sizeof key, "rrc%d.box", k);
        const int64_t *b = tg_tensor_cdata(tg_st_get(g, key));
        snprintf(key, sizeof key, "rrc%d.y", k);
        const float *want = tg_tensor_cdata(tg_st_get(g, key));
        const int64_t c = tg_tensor_dim(x, 0), size[2] = {b[4], b[5]};
        float *v = malloc((size_t)(c * size[0] * size[1]) * sizeof *v);
        OK(tg__resized_crop(v, tg_tensor_cdata(x), c, tg_tensor_dim(x, 1), tg_tensor_dim(x, 2), b,
                            size, mode_of(meta(g, "rrc%d.interpolation", k))));
        /* nearest copies values; the interpolations round otherwise than
         * torch's AVX2 kernels (tests/test_interpolate.c's 4e-7), bicubic
         * over 16 taps with weights adding up to more than 1 */
        const tg_resize_mode m = mode_of(meta(g, "rrc%d.interpolation", k));
        const double tol = m == TG_RESIZE_NEAREST ? 0 : m == TG_RESIZE_BILINEAR ? 4e-7 : 1e-6;
        const double d = max_diff(v, want, c * size[0] * size[1]);
        cr_assert(d <= tol, "case %d (%s): differs from torchvision by %g (tolerance %g)", k,
                  meta(g, "rrc%d.interpolation", k), d, tol);
        free(v);
    }
    tg_st_free(g);
}

/* Scales no attempt can meet give torchvision's central boxes. */
Test(augment, resized_crop_fallback_is_torchvision_fallback)
{
    tg_st_file *g = th_golden_load("augment.safetensors");
    const tg_tensor *in = tg_st_get(g, "fallback.in");
    const double *p = tg_tensor_cdata(in);
    const int64_t *want = tg_tensor_cdata(tg_st_get(g, "fallback.out"));
    double u[40];
    for (int k = 0; k < 40; k++) u[k] = (k % 7) / 7.0;
    for (int64_t i = 0; i < tg_tensor_dim(in, 0); i++, p += 6) {
        int64_t box[4];
        tg__rrc_box(box, (int64_t)p[0], (int64_t)p[1], p + 2, p + 4, u);
        for (int d = 0; d < 4; d++)
            cr_assert(eq(i64, box[d], want[4 * i + d]), "case %lld box[%d]", (long long)i, d);
    }
    tg_st_free(g);
}

/* Sample index's documented box: attempt a from slots 4a .. 4a + 3. */
static void doc_box(int64_t box[4], const tg_augment_options *o, uint64_t seed, int64_t epoch,
                    int64_t index, int64_t hh, int64_t ww)
{
    double u[40], scale[2], ratio[2];
    for (int k = 0; k < 40; k++) u[k] = doc_uniform(seed, epoch, index, k);
    tg__rrc_ranges(o, scale, ratio);
    tg__rrc_box(box, hh, ww, scale, ratio, u);
}

/* Every sample is the resized crop of its documented box, mirrored when
 * the flip's own draw (counter 2^63 + 4 index + 2) says so; boxes vary. */
Test(augment, resized_crop_follows_the_documented_draw)
{
    enum { N = 16, C = 3, H = 9, W = 11, OH = 4, OW = 6 };
    tg_dataset *ds = pattern_dataset(N, C, H, W, 3);
    float image[C * H * W], want[C * OH * OW], flipped[C * OH * OW];
    pattern_image(image, C, H, W, 3);
    for (int m = 0; m < 3; m++) {
        tg_augment_options o = TG_AUGMENT_OPTIONS_INIT;
        o.rrc_size[0] = OH;
        o.rrc_size[1] = OW;
        o.rrc_interpolation = (tg_resize_mode)m;
        o.hflip_p = 0.5;
        if (m == 1) {
            o.rrc_scale[0] = 0.3;
            o.rrc_scale[1] = 0.6;
            o.rrc_ratio[0] = 0.5;
            o.rrc_ratio[1] = 2;
        }
        tg_loader *ld;
        tg_loader_options lo = {5, true, 12, false};
        OK(tg_loader_new(&ld, ds, &lo));
        OK(tg_loader_set_augment(ld, &o));
        int flips = 0, partial = 0, seen = 0;
        for (int64_t epoch = 0; epoch < 2; epoch++) {
            OK(tg_loader_reset(ld, epoch));
            tg_tensor *x, *y;
            while (tg_loader_next(ld, &x, &y) == 1) {
                cr_assert(tg_tensor_dim(x, 2) == OH && tg_tensor_dim(x, 3) == OW);
                const int64_t *index = tg_tensor_cdata(y);
                for (int64_t i = 0; i < tg_tensor_dim(x, 0); i++, seen++) {
                    int64_t box[4];
                    doc_box(box, &o, 12, epoch, index[i], H, W);
                    partial += box[2] < H || box[3] < W;
                    OK(tg__resized_crop(want, image, C, H, W, box, o.rrc_size,
                                        o.rrc_interpolation));
                    double u[4];
                    draw_uniforms(12, epoch, index[i], u);
                    const bool flip = u[2] < 0.5;
                    flips += flip;
                    for (int64_t k = 0; k < C * OH * OW; k++)
                        flipped[k] = want[flip ? k - k % OW + OW - 1 - k % OW : k];
                    const float *got = (const float *)tg_tensor_cdata(x) + i * C * OH * OW;
                    cr_assert(same_bits(got, flipped, C * OH * OW), "mode %d epoch %lld sample "
                              "%lld: not the box (%lld, %lld, %lld, %lld) flip %d", m,
                              (long long)epoch, (long long)index[i], (long long)box[0],
                              (long long)box[1], (long long)box[2], (long long)box[3], flip);
                }
                tg_tensor_release(x);
                tg_tensor_release(y);
            }
        }
        cr_assert(flips > 0 && flips < seen, "flips %d of %d", flips, seen);
        cr_assert(partial > seen / 2, "only %d of %d boxes are partial", partial, seen);
        tg_loader_free(ld);
    }
    tg_dataset_release(ds);
}

/* All of the new ones together (resized crop, flips, rotation, jitter): a
 * loader resumed mid-epoch hands out the batches of one that ran through,
 * and a second run the same. */
Test(augment, resumed_loader_gives_the_same_batches)
{
    enum { N = 13 };
    tg_dataset *ds = pattern_dataset(N, 3, 8, 10, 6);
    tg_augment_options o = TG_AUGMENT_OPTIONS_INIT;
    o.rrc_size[0] = o.rrc_size[1] = 5;
    o.hflip_p = o.vflip_p = 0.5;
    o.brightness = o.contrast = o.saturation = 0.4;
    o.hue = 0.3;
    o.rotation[0] = -30;
    o.rotation[1] = 30;
    o.rotation_interpolation = TG_RESIZE_BILINEAR;
    run r[3] = {{0}, {0}, {0}};
    for (int k = 0; k < 3; k++) {
        tg_loader *ld;
        tg_loader_options lo = {3, true, 99, false};
        OK(tg_loader_new(&ld, ds, &lo));
        OK(tg_loader_set_augment(ld, &o));
        OK(tg_loader_reset(ld, 2));
        if (k == 2) OK(tg_loader_set_position(ld, 2, 7));
        drain(&r[k], ld);
        tg_loader_free(ld);
    }
    const int64_t per = 3 * 5 * 5;
    cr_assert(eq(i64, r[0].n, N * per));
    cr_assert(same_bits(r[0].x, r[1].x, N * per));
    cr_assert(eq(i64, r[2].n, (N - 7) * per));
    cr_assert(same_bits(r[0].x + 7 * per, r[2].x, (N - 7) * per));
    for (int k = 0; k < 3; k++) run_free(&r[k]);
    tg_dataset_release(ds);
}

Test(augment, resized_crop_refusals)
{
    tg_augment_options good = TG_AUGMENT_OPTIONS_INIT;
    good.hflip_p = 1;
    refusals r;
    refusals_begin(&r, &good);
    struct {
        int64_t size[2], crop;
        double scale[2], ratio[2];
        int mode;
        const char *name;
    } bad[] = {
        {{3, 0}, 0, {0, 0}, {0, 0}, 0, "rrc_size"},
        {{-1, -1}, 0, {0, 0}, {0, 0}, 0, "rrc_size"},
        {{3, 3}, 2, {0, 0}, {0, 0}, 0, "crop"},
        {{3, 3}, 0, {0.5, 0.2}, {0, 0}, 0, "rrc_scale"},
        {{3, 3}, 0, {-0.1, 1}, {0, 0}, 0, "rrc_scale"},
        {{3, 3}, 0, {NAN, 1}, {0, 0}, 0, "rrc_scale"},
        {{3, 3}, 0, {0.1, INFINITY}, {0, 0}, 0, "rrc_scale"},
        {{3, 3}, 0, {0, 0}, {0, 1}, 0, "rrc_ratio"},
        {{3, 3}, 0, {0, 0}, {2, 1}, 0, "rrc_ratio"},
        {{3, 3}, 0, {0, 0}, {1, NAN}, 0, "rrc_ratio"},
        {{3, 3}, 0, {0, 0}, {0, 0}, 7, "rrc_interpolation"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tg_augment_options o = TG_AUGMENT_OPTIONS_INIT;
        memcpy(o.rrc_size, bad[i].size, sizeof o.rrc_size);
        o.crop[0] = o.crop[1] = bad[i].crop;
        memcpy(o.rrc_scale, bad[i].scale, sizeof o.rrc_scale);
        memcpy(o.rrc_ratio, bad[i].ratio, sizeof o.rrc_ratio);
        o.rrc_interpolation = (tg_resize_mode)bad[i].mode;
        char what[32];
        snprintf(what, sizeof what, "case %zu", i);
        expect_refusal(&r, &o, bad[i].name, what);
    }
    refusals_end(&r);
}

/* RandomCrop with negative paddings (which crop) in each mode: a crop of
 * the padded size is torchvision's F.pad of the picture, bit for bit
 * (reflection reading past a cropped side as torch's does).  Symmetric
 * padding is measured against the cropped side, as torchvision's index
 * lists; an axis cropped away is refused. */
Test(augment, negative_padding_is_torchvision_pad)
{
    tg_st_file *g = th_golden_load("augment.safetensors");
    const int n = atoi(meta(g, "negpad.cases", 0));
    const tg_tensor *x0 = tg_st_get(g, "negpad.x");
    enum { C = 3, H = 6, W = 7 };
    tg_dataset *ds = pattern_dataset(2, C, H, W, 47);
    float image[C * H * W];
    pattern_image(image, C, H, W, 47);
    cr_assert(same_bits(image, tg_tensor_cdata(x0), C * H * W), "the dataset's picture");
    const char *modes[4] = {"constant", "reflect", "edge", "symmetric"};
    const tg_pad_mode pm[4] = {TG_PAD_CONSTANT, TG_PAD_REFLECT, TG_PAD_REPLICATE,
                               TG_PAD_SYMMETRIC};
    char key[40];
    for (int k = 0; k < n; k++) {
        snprintf(key, sizeof key, "negpad%d.padding", k);
        const int64_t *pad = tg_tensor_cdata(tg_st_get(g, key));
        for (int m = 0; m < 4; m++) {
            snprintf(key, sizeof key, "negpad%d.%s", k, modes[m]);
            const tg_tensor *want = tg_st_get(g, key);
            const int64_t h = tg_tensor_dim(want, 1), w = tg_tensor_dim(want, 2);
            tg_augment_options o = TG_AUGMENT_OPTIONS_INIT;
            o.crop[0] = h;
            o.crop[1] = w;
            memcpy(o.padding, pad, sizeof o.padding);
            o.padding_mode = pm[m];
            o.fill = 0.25;
            tg_loader *ld;
            OK(tg_loader_new(&ld, ds, NULL));
            OK(tg_loader_set_augment(ld, &o));
            tg_tensor *x, *y;
            cr_assert(eq(int, tg_loader_next(ld, &x, &y), 1));
            cr_assert(tg_tensor_dim(x, 2) == h && tg_tensor_dim(x, 3) == w);
            cr_assert(same_bits(tg_tensor_cdata(x), tg_tensor_cdata(want), C * h * w),
                      "padding %lld %lld %lld %lld %s: max diff %g", (long long)pad[0],
                      (long long)pad[1], (long long)pad[2], (long long)pad[3], modes[m],
                      max_diff(tg_tensor_cdata(x), tg_tensor_cdata(want), C * h * w));
            tg_tensor_release(x);
            tg_tensor_release(y);
            tg_loader_free(ld);
        }
    }
    tg_loader *ld;
    OK(tg_loader_new(&ld, ds, NULL));
    tg_augment_options o = TG_AUGMENT_OPTIONS_INIT;
    o.crop[0] = o.crop[1] = 2;
    o.padding[0] = -5;   /* width 7 cropped to 2 */
    o.padding[2] = 3;
    o.padding_mode = TG_PAD_SYMMETRIC;
    cr_assert(eq(int, tg_loader_set_augment(ld, &o), TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "padding[2]=3 must be <=") != NULL, "%s",
              tg_error_message());
    o.padding[2] = 2;
    OK(tg_loader_set_augment(ld, &o));
    o.padding_mode = TG_PAD_REFLECT;   /* torch measures the whole width */
    o.padding[2] = 6;
    OK(tg_loader_set_augment(ld, &o));
    o.padding[0] = -7;
    o.padding[2] = 0;
    cr_assert(eq(int, tg_loader_set_augment(ld, &o), TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "no pixel") != NULL, "%s", tg_error_message());
    tg_loader_free(ld);
    tg_dataset_release(ds);
    tg_st_free(g);
}
