/* tests/test_augment_rotate_expand.c - the loader's T.RandomRotation with
 * a given centre and expand: F.rotate against torchvision 0.14
 * (scripts/make_augment_goldens.py), the expanded batches of one angle,
 * and the refusals (expand with a range of angles). */
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

/* Each golden F.rotate(x, angle, mode, expand, center, fills), bit for bit,
 * its size the expanded one with expand. */
Test(augment, rotations_about_a_center_and_expanded)
{
    tg_st_file *g = th_golden_load("augment.safetensors");
    const int n = atoi(meta(g, "rotx.cases", 0));
    cr_assert(n > 0);
    for (int k = 0; k < n; k++) {
        const golden_case gc = golden_case_at(g, "rotx", k);
        const double *p = gc.params;
        const tg_tensor *y = gc.y;
        const int64_t c = gc.c, h = gc.h, w = gc.w;
        tg_augment_options o = TG_AUGMENT_OPTIONS_INIT;
        o.rotation_has_center = p[1] != 0;
        o.rotation_center[0] = p[2];
        o.rotation_center[1] = p[3];
        double m[6];
        int64_t size[2] = {h, w};
        tg__rotate_matrix(m, &o, h, w, p[0]);
        if (p[4] != 0) tg__rotate_size(size, m, h, w);
        cr_assert(eq(i64, size[0], tg_tensor_dim(y, 1)), "case %d height", k);
        cr_assert(eq(i64, size[1], tg_tensor_dim(y, 2)), "case %d width", k);
        const int64_t len = c * size[0] * size[1];
        float *v = malloc((size_t)len * sizeof *v);
        tg__grid_transform(v, tg_tensor_cdata(gc.x), c, h, w, size[0], size[1], m, gc.mode,
                           gc.fill);
        cr_assert(same_bits(v, tg_tensor_cdata(y), len), "case %d (%g degrees): max diff %g",
                  k, p[0], max_diff(v, tg_tensor_cdata(y), len));
        free(v);
    }
    tg_st_free(g);
}

/* One angle with expand and a centre: the batches take the expanded size,
 * each sample the rotation of the cropped sample; a centre alone keeps the
 * size. */
Test(augment, expanded_rotation_batches)
{
    enum { N = 5, C = 3, H = 7, W = 8, CH = 5, CW = 6 };
    tg_dataset *ds = pattern_dataset(N, C, H, W, 9);
    tg_augment_options base = TG_AUGMENT_OPTIONS_INIT;
    base.crop[0] = CH;
    base.crop[1] = CW;
    base.hflip_p = 0.5;
    for (int k = 0; k < 2; k++) {
        tg_augment_options rot = base;
        rot.rotation[0] = rot.rotation[1] = 35;
        rot.rotation_expand = k == 0;
        rot.rotation_has_center = true;
        rot.rotation_center[0] = 1.5;
        rot.rotation_center[1] = 2;
        rot.rotation_interpolation = TG_RESIZE_BILINEAR;
        double m[6];
        int64_t size[2] = {CH, CW};
        tg__rotate_matrix(m, &rot, CH, CW, 35);
        if (k == 0) tg__rotate_size(size, m, CH, CW);
        cr_assert(k == 1 || size[0] > CH || size[1] > CW, "expand grew nothing");
        run r[2] = {{0}, {0}};
        for (int j = 0; j < 2; j++) {
            tg_loader *ld;
            tg_loader_options lo = {2, true, 13, false};
            OK(tg_loader_new(&ld, ds, &lo));
            OK(tg_loader_set_augment(ld, j ? &rot : &base));
            tg_tensor *x, *y;
            cr_assert(eq(int, tg_loader_next(ld, &x, &y), 1));
            cr_assert(eq(i64, tg_tensor_dim(x, 2), j ? size[0] : CH));
            cr_assert(eq(i64, tg_tensor_dim(x, 3), j ? size[1] : CW));
            tg_tensor_release(x);
            tg_tensor_release(y);
            OK(tg_loader_reset(ld, 0));
            drain(&r[j], ld);
            tg_loader_free(ld);
        }
        const int64_t per = C * CH * CW, out = C * size[0] * size[1];
        cr_assert(eq(i64, r[1].n, N * out));
        float *want = malloc((size_t)out * sizeof *want);
        for (int64_t i = 0; i < N; i++) {
            tg__grid_transform(want, r[0].x + i * per, C, CH, CW, size[0], size[1], m,
                               TG_RESIZE_BILINEAR, (const float[]){0, 0, 0});
            cr_assert(same_bits(want, r[1].x + i * out, out), "case %d sample %lld: max diff "
                      "%g", k, (long long)i, max_diff(want, r[1].x + i * out, out));
        }
        free(want);
        run_free(&r[0]);
        run_free(&r[1]);
    }
    tg_dataset_release(ds);
}

Test(augment, expand_and_center_refusals)
{
    tg_augment_options good = TG_AUGMENT_OPTIONS_INIT;
    good.vflip_p = 1;
    refusals r;
    refusals_begin(&r, &good);
    const char *names[] = {"rotation_expand needs one angle", "rotation_center={nan",
                           "rotation_center={0, inf", "rotation must be given",
                           "rotation must be given"};
    for (int i = 0; i < 5; i++) {
        tg_augment_options o = TG_AUGMENT_OPTIONS_INIT;
        o.rotation[0] = -10;
        o.rotation[1] = 10;
        o.rotation_expand = i == 0 || i == 3;
        o.rotation_has_center = i != 0;
        o.rotation_center[0] = i == 1 ? NAN : 0;
        o.rotation_center[1] = i == 2 ? INFINITY : 0;
        if (i >= 3) o.rotation[0] = o.rotation[1] = 0;
        if (i == 4) o.rotation_expand = false;
        char what[32];
        snprintf(what, sizeof what, "case %d", i);
        expect_refusal(&r, &o, names[i], what);
    }
    refusals_end(&r);
}
