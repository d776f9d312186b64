/* tests/test_layer_norm_grad.c - the derivatives of the layer_norm and
 * group_norm ops (src/ops/layer_norm.c): gradcheck and gradgradcheck in f64
 * with and without weight and bias, and the fused backward against the
 * recorded one.  Values against PyTorch and the other properties of the
 * ops: test_layer_norm.c. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdio.h>

#include "helpers.h"
#include "core/core.h"
#include "layer_norm_fixtures.h"
#include "tapegrad/tapegrad.h"

static int case_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    const ln_case *c = user;
    return run_case(out, c, in[0], c->w ? in[1] : NULL, c->b ? in[2] : NULL);
}

/* First and second derivatives by central differences (f64): layer norm
 * over 1 and 2 dims and unbatched, group norm with 1, some and C groups,
 * each with weight and bias, one of them, or neither. */
Test(layer_norm_grad, gradcheck_and_gradgradcheck_f64)
{
    static const struct {
        bool group;
        int nd, n_norm;
        int64_t xs[4], groups;
        bool w, b;
    } cs[] = {
        {false, 3, 1, {2, 3, 4}, 0, true, true},   {false, 3, 2, {2, 3, 4}, 0, false, false},
        {false, 1, 1, {5}, 0, true, false},        {false, 2, 1, {3, 4}, 0, false, true},
        {true, 3, 0, {2, 4, 3}, 2, true, true},    {true, 4, 0, {2, 6, 2, 2}, 3, false, false},
        {true, 3, 0, {2, 3, 2}, 1, true, false},   {true, 2, 0, {3, 4}, 4, false, true},
    };
    for (size_t k = 0; k < sizeof cs / sizeof *cs; k++) {
        ln_case c = make_case(cs[k].group, cs[k].nd, cs[k].xs, cs[k].n_norm, cs[k].groups,
                              cs[k].w, cs[k].b);
        tg_tensor *in[3] = {th_rand_uniform(TG_F64, cs[k].nd, cs[k].xs, 100 + k),
                            affine_tensor(&c, cs[k].nd, cs[k].xs, 200 + k, 0.5, 2, TG_F64),
                            affine_tensor(&c, cs[k].nd, cs[k].xs, 300 + k, -1, 1, TG_F64)};
        for (int i = 0; i < 3; i++) OK(tg_tensor_set_requires_grad(in[i], true));
        th_expect_gradchecks(case_fn, &c, 3, in, "case %zu", k);
        th_release_all(3, in);
    }
}

/* The fused backward (no graph; dx written over the engine's own gradient
 * buffer after dw and db are taken from it) and the recorded one
 * (create_graph) agree, for layer norm over 2 dims and over the last of
 * 300 rows (dw and db in two chunks of samples), and group norm with S = 1,
 * S = 3 on 300 samples and S = 20, in f64 and f32. */
Test(layer_norm_grad, fused_backward_matches_recorded_backward)
{
    static const struct {
        bool group;
        int nd, n_norm;
        int64_t xs[4], groups;
    } cs[] = {{false, 3, 2, {3, 5, 7}, 0}, {false, 2, 1, {300, 5}, 0}, {true, 2, 0, {6, 12}, 2},
              {true, 3, 0, {300, 4, 3}, 2}, {true, 4, 0, {3, 6, 4, 5}, 2}};
    for (size_t k = 0; k < sizeof cs / sizeof *cs; k++)
        for (int d = 0; d < 2; d++) {
            const tg_dtype dt = d ? TG_F32 : TG_F64;
            ln_case c = make_case(cs[k].group, cs[k].nd, cs[k].xs, cs[k].n_norm, cs[k].groups,
                                  true, true);
            tg_tensor *g[2][3];
            for (int r = 0; r < 2; r++) {
                tg_tensor *x = th_rand_uniform(dt, cs[k].nd, cs[k].xs, 400 + k);
                tg_tensor *m = th_rand_uniform(dt, cs[k].nd, cs[k].xs, 500 + k);
                tg_tensor *w = affine_tensor(&c, cs[k].nd, cs[k].xs, 600 + k, 0.5, 2, dt);
                tg_tensor *b = affine_tensor(&c, cs[k].nd, cs[k].xs, 700 + k, -1, 1, dt);
                tg_tensor *y = NULL, *z = NULL, *s = NULL;
                tg_tensor *leaves[3] = {x, w, b};
                for (int i = 0; i < 3; i++) OK(tg_tensor_set_requires_grad(leaves[i], true));
                OK(run_case(&y, &c, x, w, b));
                OK(tg_mul(&z, y, m));   /* d s / d y = m, in a buffer of the engine's own */
                OK(tg_sum(&s, z));
                tg_backward_opts o = TG_BACKWARD_OPTS_INIT;
                o.create_graph = r == 1;
                OK(tg_backward(s, NULL, &o));
                for (int i = 0; i < 3; i++) {
                    g[r][i] = tg_tensor_retain(tg_tensor_grad(leaves[i]));
                    /* recorded dx and dw are on the tape (db = sum m is not)
                     * and refer back to their leaves */
                    if (i < 2) cr_assert(eq(int, r == 1, tg_tensor_requires_grad(g[r][i])));
                    tg_tensor_zero_grad(leaves[i]);
                }
                th_release_all(7, (tg_tensor *[]){x, m, w, b, y, z, s});
            }
            for (int i = 0; i < 3; i++) {
                char what[64];
                snprintf(what, sizeof what, "case %zu %s d%s", k, tg_dtype_name(dt),
                         i == 0 ? "x" : i == 1 ? "w" : "b");
                th_expect_close(what, g[1][i], g[0][i], d ? 1e-5 : 1e-12);
                th_release_all(2, (tg_tensor *[]){g[0][i], g[1][i]});
            }
        }
}

/* The one-pass backward in each vector width this CPU runs (TG_CAST_KERNEL's,
 * forced here): the same bits for x, w and b, for layer norm over a row of
 * 1027 values (spans of four and a tail) and group norm with S = 1 (the
 * affine tiles) and S = 21, in f32 and f64. */
Test(layer_norm_grad, every_vector_width_gives_the_same_bits)
{
    static const struct {
        bool group;
        int nd, n_norm;
        int64_t xs[4], groups;
    } cs[] = {{false, 2, 1, {7, 1027}, 0}, {true, 2, 0, {300, 12}, 3}, {true, 3, 0, {5, 4, 21}, 2}};
    static const tg__cast widths[] = {TG__CAST_PORTABLE, TG__CAST_AVX2, TG__CAST_AVX512};
    for (size_t k = 0; k < sizeof cs / sizeof *cs; k++)
        for (int d = 0; d < 2; d++) {
            const tg_dtype dt = d ? TG_F32 : TG_F64;
            ln_case c = make_case(cs[k].group, cs[k].nd, cs[k].xs, cs[k].n_norm, cs[k].groups,
                                  true, true);
            tg_tensor *x = th_rand_uniform(dt, cs[k].nd, cs[k].xs, 800 + k);
            tg_tensor *m = th_rand_uniform(dt, cs[k].nd, cs[k].xs, 810 + k);
            tg_tensor *w = affine_tensor(&c, cs[k].nd, cs[k].xs, 820 + k, 0.5, 2, dt);
            tg_tensor *b = affine_tensor(&c, cs[k].nd, cs[k].xs, 830 + k, -1, 1, dt);
            tg_tensor *leaves[3] = {x, w, b}, *first[3] = {NULL, NULL, NULL};
            for (int i = 0; i < 3; i++) OK(tg_tensor_set_requires_grad(leaves[i], true));
            for (size_t v = 0; v < 3; v++) {
                tg__set_cast_kernel(widths[v]);
                if (tg__cast_kernel() != widths[v]) {
                    th_not_run("layer norm's backward in width %zu is not run: this CPU lacks "
                               "it", v);
                    continue;
                }
                tg_tensor *y = NULL, *z = NULL, *s = NULL;
                OK(run_case(&y, &c, x, w, b));
                OK(tg_mul(&z, y, m));
                OK(tg_sum(&s, z));
                OK(tg_backward(s, NULL, NULL));
                for (int i = 0; i < 3; i++) {
                    tg_tensor *gi = tg_tensor_grad(leaves[i]);
                    if (first[i]) th_expect_same_bits("width", leaves[i], gi, first[i]);
                    else first[i] = tg_tensor_retain(gi);
                    tg_tensor_zero_grad(leaves[i]);
                }
                th_release_all(3, (tg_tensor *[]){y, z, s});
            }
            tg__set_cast_kernel(TG__CAST_AUTO);
            th_release_all(4, (tg_tensor *[]){x, m, w, b});
            for (int i = 0; i < 3; i++) tg_tensor_release(first[i]);
        }
}
