/* tests/test_layer_norm_grad.c - the derivatives of the layer_norm and
 * group_norm ops (src/ops/layer_norm.c): gradcheck and gradgradcheck in f64
 * with and without weight and bias, and the fused backward against the
 * recorded one.  Values against PyTorch and the other properties of the
 * ops: test_layer_norm.c. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdio.h>

#include "helpers.h"
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
