/* tests/test_augment_affine.c - the loader's T.RandomAffine: F.affine with
 * fixed parameters against torchvision 0.14
 * (scripts/make_augment_goldens.py), about the middle and about a given
 * centre, the documented draws beside the others, resumption and shards,
 * and the refusals. */
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

/* Each golden F.affine, bit for bit, as the rotations: the matrix in
 * double, the grid and the sampling in torch's f32 order. */
Test(augment, affines_are_torchvision_affine)
{
    tg_st_file *g = th_golden_load("augment.safetensors");
    const int n = atoi(meta(g, "aff.cases", 0));
    cr_assert(n > 0);
    for (int k = 0; k < n; k++) {
        const golden_case gc = golden_case_at(g, "aff", k);
        const double *p = gc.params;
        const float *want = tg_tensor_cdata(gc.y);
        const int64_t c = gc.c, h = gc.h, w = gc.w;
        float *v = malloc((size_t)(c * h * w) * sizeof *v);
        double m[6];
        tg__affine_inverse(m, (const double[2]){0, 0}, p[0], p + 1, p[3], p + 4);
        tg__grid_transform(v, tg_tensor_cdata(gc.x), c, h, w, h, w, m, gc.mode, gc.fill);
        cr_assert(same_bits(v, want, c * h * w), "case %d: max diff %g", k,
                  max_diff(v, want, c * h * w));
        free(v);
    }
    tg_st_free(g);
}

/* Each golden F.affine about a given centre, bit for bit: the matrix of
 * the loader's options (tg__affine_matrix) with that centre. */
Test(augment, affines_about_a_centre_are_torchvision_affine)
{
    tg_st_file *g = th_golden_load("augment.safetensors");
    const int n = atoi(meta(g, "affc.cases", 0));
    cr_assert(n > 0);
    for (int k = 0; k < n; k++) {
        const golden_case gc = golden_case_at(g, "affc", k);
        const double *p = gc.params;
        const float *want = tg_tensor_cdata(gc.y);
        const int64_t c = gc.c, h = gc.h, w = gc.w;
        tg_augment_options o = TG_AUGMENT_OPTIONS_INIT;
        o.affine = o.affine_has_center = true;
        o.affine_center[0] = p[6];
        o.affine_center[1] = p[7];
        float *v = malloc((size_t)(c * h * w) * sizeof *v);
        double m[6];
        tg__affine_matrix(m, &o, h, w, p[0], p + 1, p[3], p + 4);
        tg__grid_transform(v, tg_tensor_cdata(gc.x), c, h, w, h, w, m, gc.mode, gc.fill);
        cr_assert(same_bits(v, want, c * h * w), "case %d: max diff %g", k,
                  max_diff(v, want, c * h * w));
        free(v);
    }
    tg_st_free(g);
}

/* Python's round: half to even. */
static double round_even(double v)
{
    double r = floor(v), f = v - r;
    if (f > 0.5 || (f == 0.5 && fmod(r, 2.0) != 0)) r += 1;
    return r;
}

static tg_augment_options affine_options(int shear_values)
{
    tg_augment_options o = TG_AUGMENT_OPTIONS_INIT;
    o.affine = true;
    o.affine_degrees[0] = -30;
    o.affine_degrees[1] = 20;
    o.affine_translate[0] = 0.3;
    o.affine_translate[1] = 0.2;
    o.affine_scale[0] = 0.8;
    o.affine_scale[1] = 1.25;
    o.affine_shear_values = shear_values;
    const double s[4] = {-10, 25, 5, 15};
    memcpy(o.affine_shear, s, sizeof s);
    if (shear_values == 1) o.affine_shear[0] = 10;   /* x in [-10, 10] */
    o.affine_fill = 0.4;
    return o;
}

/* The loader's RandomAffine with affine_center: each sample is F.affine of
 * its draw (tg__affine_draw, the documented draw above) about that point,
 * (x - W/2, y - H/2) from the middle, and not the map about the middle. */
Test(augment, affine_about_a_centre_in_the_loader)
{
    enum { N = 6, C = 3, H = 7, W = 9 };
    tg_dataset *ds = pattern_dataset(N, C, H, W, 8);
    tg_augment_options o = affine_options(4);
    o.affine_has_center = true;
    o.affine_center[0] = 1.5;
    o.affine_center[1] = 6;
    run r[2] = {{0}, {0}};
    for (int k = 0; k < 2; k++) {
        tg_loader *ld;
        tg_loader_options lo = {N, false, 9, false};
        OK(tg_loader_new(&ld, ds, &lo));
        OK(tg_loader_set_augment(ld, k ? &o : NULL));
        OK(tg_loader_reset(ld, 1));
        drain(&r[k], ld);
        tg_loader_free(ld);
    }
    const int64_t per = C * H * W;
    cr_assert(eq(i64, r[1].n, N * per));
    float want[C * H * W], middle[C * H * W];
    const float fill[C] = {0.4f, 0.4f, 0.4f};
    int moved = 0;
    for (int64_t i = 0; i < N; i++) {
        double angle, t[2], scale, shear[2], m[6];
        tg__affine_draw(&o, 9, 1, r[0].labels[i], H, W, &angle, t, &scale, shear);
        tg__affine_inverse(m, (const double[2]){1.5 - W * 0.5, 6 - H * 0.5}, angle, t, scale,
                           shear);
        tg__grid_transform(want, r[0].x + i * per, C, H, W, H, W, m, o.affine_interpolation,
                           fill);
        cr_assert(same_bits(want, r[1].x + i * per, per), "sample %lld: max diff %g",
                  (long long)i, max_diff(want, r[1].x + i * per, per));
        tg__affine_inverse(m, (const double[2]){0, 0}, angle, t, scale, shear);
        tg__grid_transform(middle, r[0].x + i * per, C, H, W, H, W, m, o.affine_interpolation,
                           fill);
        moved += !same_bits(middle, want, per);
    }
    cr_assert(eq(int, moved, N), "the centre changed %d of %d samples", moved, N);
    run_free(&r[0]);
    run_free(&r[1]);
    tg_dataset_release(ds);
}

/* With a crop, flips and a rotation: each sample is F.affine, with its
 * documented draw (slots 48 .. 53), of the sample the loader gives without
 * RandomAffine (so the other draws are as they were); the translations are
 * whole pixels, rounded half to even, and each shear form draws its
 * ranges. */
Test(augment, affine_follows_the_documented_draw)
{
    enum { N = 12, C = 3, H = 8, W = 9, CH = 7, CW = 8 };
    tg_dataset *ds = pattern_dataset(N, C, H, W, 5);
    tg_augment_options base = TG_AUGMENT_OPTIONS_INIT;
    base.crop[0] = CH;
    base.crop[1] = CW;
    base.hflip_p = base.vflip_p = 0.5;
    base.rotation[0] = -10;
    base.rotation[1] = 10;
    const int forms[4] = {1, 2, 4, 0};
    for (int m = 0; m < 4; m++) {
        tg_augment_options aff = affine_options(forms[m]);
        memcpy(aff.rotation, base.rotation, sizeof base.rotation);
        memcpy(aff.crop, base.crop, sizeof base.crop);
        aff.hflip_p = aff.vflip_p = 0.5;
        aff.affine_interpolation = m % 2 ? TG_RESIZE_BILINEAR : TG_RESIZE_NEAREST;
        run r[2] = {{0}, {0}};
        for (int k = 0; k < 2; k++) {
            tg_loader *ld;
            tg_loader_options lo = {5, true, 77, false};
            OK(tg_loader_new(&ld, ds, &lo));
            OK(tg_loader_set_augment(ld, k ? &aff : &base));
            OK(tg_loader_reset(ld, 2));
            drain(&r[k], ld);
            tg_loader_free(ld);
        }
        const int64_t per = C * CH * CW;
        cr_assert(eq(i64, r[1].n, N * per));
        float want[C * CH * CW];
        double tx_lo = 1e9, tx_hi = -1e9, shy_hi = 0;
        for (int64_t i = 0; i < N; i++) {
            const int64_t id = r[0].labels[i];
            double u[6];
            for (int s = 0; s < 6; s++) u[s] = doc_uniform(77, 2, id, 48 + s);
            const double angle = -30 + u[0] * 50;
            const double mx = 0.3 * CW, my = 0.2 * CH;
            const double t[2] = {round_even(-mx + u[1] * 2 * mx),
                                 round_even(-my + u[2] * 2 * my)};
            const double scale = 0.8 + u[3] * 0.45;
            double shear[2] = {0, 0};
            if (forms[m] == 1) shear[0] = -10 + u[4] * 20;
            if (forms[m] >= 2) shear[0] = -10 + u[4] * 35;
            if (forms[m] == 4) shear[1] = 5 + u[5] * 10;
            tx_lo = fmin(tx_lo, t[0]);
            tx_hi = fmax(tx_hi, t[0]);
            shy_hi = fmax(shy_hi, shear[1]);
            double mat[6];
            tg__affine_inverse(mat, (const double[2]){0, 0}, angle, t, scale, shear);
            tg__grid_transform(want, r[0].x + i * per, C, CH, CW, CH, CW, mat,
                               aff.affine_interpolation, (const float[]){0.4f, 0.4f, 0.4f});
            cr_assert(same_bits(want, r[1].x + i * per, per), "form %d sample %lld: max diff "
                      "%g", forms[m], (long long)id, max_diff(want, r[1].x + i * per, per));
        }
        cr_assert(tx_lo < 0 && tx_hi > 0, "translations only in [%g, %g]", tx_lo, tx_hi);
        cr_assert(forms[m] != 4 || shy_hi > 5, "no y shear drawn");
        run_free(&r[0]);
        run_free(&r[1]);
    }
    tg_dataset_release(ds);
}

/* A loader resumed at a position, and the ranks of a shard, hand out the
 * batches (and draws) of a single uninterrupted loader. */
Test(augment, affine_resume_and_shard)
{
    enum { N = 10, C = 3, H = 6, W = 7 };
    tg_dataset *ds = pattern_dataset(N, C, H, W, 6);
    tg_augment_options o = affine_options(4);
    o.affine_interpolation = TG_RESIZE_BILINEAR;
    tg_loader_options lo = {4, true, 5, false};
    run all = {0}, rest = {0}, rank[2] = {{0}, {0}};
    tg_loader *ld;
    OK(tg_loader_new(&ld, ds, &lo));
    OK(tg_loader_set_augment(ld, &o));
    OK(tg_loader_reset(ld, 3));
    drain(&all, ld);
    OK(tg_loader_set_position(ld, 3, 4));
    drain(&rest, ld);
    tg_loader_free(ld);
    const int64_t per = C * H * W;
    cr_assert(eq(i64, rest.n, all.n - 4 * per));
    cr_assert(same_bits(rest.x, all.x + 4 * per, rest.n), "the resumed batches differ");
    tg_loader_options half = {2, true, 5, false};
    for (int r = 0; r < 2; r++) {
        OK(tg_loader_new(&ld, ds, &half));
        OK(tg_loader_set_augment(ld, &o));
        OK(tg_loader_set_shard(ld, r, 2));
        OK(tg_loader_reset(ld, 3));
        drain(&rank[r], ld);
        tg_loader_free(ld);
    }
    /* batch k of rank r is positions [4 k + 2 r, 4 k + 2 r + 2) of the epoch */
    cr_assert(eq(i64, rank[0].n_labels, 5));
    cr_assert(eq(i64, rank[1].n_labels, 5));
    for (int r = 0; r < 2; r++)
        for (int64_t j = 0; j < rank[r].n_labels; j++) {
            /* the last run, positions 8 and 9, splits one each */
            const int64_t pos = j < 4 ? 4 * (j / 2) + 2 * r + j % 2 : 8 + r;
            cr_assert(eq(i64, rank[r].labels[j], all.labels[pos]));
            cr_assert(same_bits(rank[r].x + j * per, all.x + pos * per, per),
                      "rank %d sample %lld differs", r, (long long)j);
        }
    run_free(&all);
    run_free(&rest);
    run_free(&rank[0]);
    run_free(&rank[1]);
    tg_dataset_release(ds);
}

/* The fill of a pure translation in each range, and fills per channel:
 * the uncovered columns hold affine_fill (fills[p]) in the pixel range. */
Test(augment, affine_fill_in_each_range)
{
    enum { C = 3, H = 4, W = 6 };
    tg_dataset *ds = pattern_dataset(1, C, H, W, 3);
    const double fills[C] = {0.1, 0.5, 0.9};
    for (int k = 0; k < 4; k++) {
        OK(tg_dataset_set_pixel_range(ds, k % 2 ? TG_PIXELS_SYMMETRIC : TG_PIXELS_UNIT));
        tg_augment_options o = TG_AUGMENT_OPTIONS_INIT;
        o.affine = true;
        o.affine_translate[0] = 1;   /* tx in [-6, 6]: its draw decides the side */
        o.affine_fill = 0.25;
        o.fill_channels = k < 2 ? 0 : C;
        o.fills = fills;
        tg_loader *ld;
        OK(tg_loader_new(&ld, ds, NULL));
        OK(tg_loader_set_augment(ld, &o));
        tg_tensor *x, *y;
        cr_assert(eq(int, tg_loader_next(ld, &x, &y), 1));
        const double tx = round_even(-6 + doc_uniform(0, 0, 0, 49) * 12);
        const float *d = tg_tensor_cdata(x);
        int filled = 0;
        for (int64_t p = 0; p < C; p++) {
            float f = (float)(k < 2 ? 0.25 : fills[p]);
            if (k % 2) f = (f - 0.5f) / 0.5f;
            for (int64_t q = 0; q < W; q++) {
                const bool out = q - tx < 0 || q - tx >= W;
                for (int64_t r = 0; r < H && out; r++, filled++)
                    cr_assert(d[(p * H + r) * W + q] == f, "case %d (%lld, %lld, %lld): %g, "
                              "want %g", k, (long long)p, (long long)r, (long long)q,
                              d[(p * H + r) * W + q], f);
            }
        }
        cr_assert(filled > 0, "tx %g moves nothing out", tx);
        tg_tensor_release(x);
        tg_tensor_release(y);
        tg_loader_free(ld);
    }
    tg_dataset_release(ds);
}

Test(augment, affine_refusals)
{
    tg_augment_options good = TG_AUGMENT_OPTIONS_INIT;
    good.hflip_p = 1;
    refusals r;
    refusals_begin(&r, &good);
    const char *names[] = {
        "affine_degrees", "affine_degrees", "affine_degrees", "affine_translate[0]",
        "affine_translate[1]", "affine_translate[0]", "affine_scale", "affine_scale",
        "affine_scale", "affine_scale", "affine_shear_values", "affine_shear_values",
        "affine_shear[0]", "affine_shear[0]", "affine_shear[0..1]", "affine_shear[2..3]",
        "affine_shear[2..3]", "affine_interpolation", "affine_fill", "affine_center",
        "affine_center", "affine must be true",
    };
    const int cases = (int)(sizeof names / sizeof names[0]);
    for (int i = 0; i < cases; i++) {
        tg_augment_options o = affine_options(2);
        switch (i) {
        case 0: o.affine_degrees[0] = NAN; break;
        case 1: o.affine_degrees[1] = INFINITY; break;
        case 2: o.affine_degrees[0] = 40; break;   /* 40 > 20 */
        case 3: o.affine_translate[0] = -0.1; break;
        case 4: o.affine_translate[1] = 1.5; break;
        case 5: o.affine_translate[0] = NAN; break;
        case 6: o.affine_scale[0] = 0; break;
        case 7: o.affine_scale[0] = -1; break;
        case 8: o.affine_scale[0] = 2; break;   /* 2 > 1.25 */
        case 9: o.affine_scale[1] = NAN; break;
        case 10: o.affine_shear_values = 3; break;
        case 11: o.affine_shear_values = -1; break;
        case 12: o.affine_shear_values = 1; o.affine_shear[0] = -5; break;
        case 13: o.affine_shear_values = 1; o.affine_shear[0] = NAN; break;
        case 14: o.affine_shear[1] = -20; break;   /* -10 > -20 */
        case 15: o.affine_shear_values = 4; o.affine_shear[3] = 0; break;
        case 16: o.affine_shear_values = 4; o.affine_shear[2] = INFINITY; break;
        case 17: o.affine_interpolation = TG_RESIZE_BICUBIC; break;
        case 18: o.affine_fill = NAN; break;
        case 19: o.affine_has_center = true; o.affine_center[0] = NAN; break;
        case 20: o.affine_has_center = true; o.affine_center[1] = -INFINITY; break;
        default: o.affine = false; o.affine_has_center = true; break;
        }
        char what[32];
        snprintf(what, sizeof what, "case %d", i);
        expect_refusal(&r, &o, names[i], what);
    }
    refusals_end(&r);
}
