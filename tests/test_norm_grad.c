/* tests/test_norm_grad.c - the backward of the batch_norm op (src/ops/norm.c):
 * the fused backward against the recorded one, and its reuse of a
 * gradient buffer that the engine alone holds; first and second
 * derivatives by finite differences in f64.  Values and the other
 * properties of the op: test_norm.c. */
#include <stdlib.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "helpers.h"
#include "norm_fixtures.h"
#include "tapegrad/tapegrad.h"
#include "tapegrad/autograd.h"
#include "tapegrad/ops.h"

/* The fused backward (no graph) and the recorded one (create_graph) agree,
 * on a 3-D (N, C, L) input and a 2-D (N, C) one. */
Test(norm_grad, fused_backward_matches_recorded_backward)
{
    const int64_t s3[3] = {4, 3, 9}, s2[2] = {6, 5};
    for (int k = 0; k < 2; k++)
        for (int training = 0; training < 2; training++) {
            const int nd = k ? 2 : 3;
            const int64_t *sh = k ? s2 : s3, c = sh[1];
            tg_tensor *gy = th_rand_uniform(TG_F64, nd, sh, 21), *g[2][3];
            tg_tensor *rm = vec(TG_F64, c, 22, -1, 1), *rv = vec(TG_F64, c, 23, 0.5, 2);
            for (int r = 0; r < 2; r++) {
                tg_tensor *x = th_rand_uniform(TG_F64, nd, sh, 24), *w = vec(TG_F64, c, 25, 0.5, 2);
                tg_tensor *b = vec(TG_F64, c, 26, -1, 1), *y = NULL;
                tg_tensor_set_requires_grad(x, true);
                tg_tensor_set_requires_grad(w, true);
                tg_tensor_set_requires_grad(b, true);
                cr_assert(eq(int, tg_batch_norm(&y, x, NULL, NULL, w, b, true, 0.1, 1e-5), TG_OK));
                if (!training) {   /* eval on the running buffers */
                    tg_tensor_release(y);
                    cr_assert(eq(int, tg_batch_norm(&y, x, rm, rv, w, b, false, 0.1, 1e-5), TG_OK));
                }
                tg_backward_opts o = TG_BACKWARD_OPTS_INIT;
                o.create_graph = r == 1;
                cr_assert(eq(int, tg_backward(y, gy, &o), TG_OK), "%s", tg_error_message());
                g[r][0] = tg_tensor_retain(tg_tensor_grad(x));
                g[r][1] = tg_tensor_retain(tg_tensor_grad(w));
                g[r][2] = tg_tensor_retain(tg_tensor_grad(b));
                /* the recorded gradients are themselves on the tape */
                cr_assert(eq(int, r == 1, tg_tensor_requires_grad(g[r][0])));
                /* a recorded gradient refers back to its leaf: clear the .grad
                 * fields so that the cycle leaf -> grad -> graph -> leaf breaks */
                tg_tensor_zero_grad(x), tg_tensor_zero_grad(w), tg_tensor_zero_grad(b);
                tg_tensor_release(x), tg_tensor_release(w), tg_tensor_release(b), tg_tensor_release(y);
            }
            for (int i = 0; i < 3; i++) {
                double *a = th_doubles(g[0][i]);
                expect_close(g[1][i], a, 1e-12, i == 0 ? "dx" : i == 1 ? "dw" : "db");
                free(a);
                tg_tensor_release(g[0][i]), tg_tensor_release(g[1][i]);
            }
            tg_tensor_release(gy), tg_tensor_release(rm), tg_tensor_release(rv);
        }
}

typedef struct bn_case {
    bool training, weight, bias;
} bn_case;

static tg_tensor *g_rm, *g_rv;

static int bn_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    const bn_case *c = user;
    return tg_batch_norm(out, in[0], c->training ? NULL : g_rm, c->training ? NULL : g_rv,
                         c->weight ? in[1] : NULL, c->bias ? in[2] : NULL, c->training, 0.1, 1e-5);
}

/* First and second derivatives by central differences (f64), on a 5-D
 * input, in every mode. */
Test(norm_grad, batch_norm_gradcheck_and_gradgradcheck_f64)
{
    const int64_t xs[5] = {2, 3, 2, 1, 2};
    const bn_case cases[] = {{true, true, true}, {true, false, false}, {true, true, false},
                             {false, true, true}, {false, false, true}};
    g_rm = vec(TG_F64, 3, 31, -0.5, 0.5);
    g_rv = vec(TG_F64, 3, 32, 0.5, 2);
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        tg_tensor *in[3] = {th_rand_uniform(TG_F64, 5, xs, 33), vec(TG_F64, 3, 34, 0.5, 2),
                            vec(TG_F64, 3, 35, -1, 1)};
        for (int i = 0; i < 3; i++) tg_tensor_set_requires_grad(in[i], true);
        tg_gradcheck_opts o = TG_GRADCHECK_OPTS_INIT;
        bn_case c = cases[k];
        cr_assert(eq(int, tg_gradcheck(bn_fn, &c, 3, in, &o), TG_OK), "case %zu: %s", k,
                  tg_error_message());
        cr_assert(eq(int, tg_gradgradcheck(bn_fn, &c, 3, in, &o), TG_OK), "case %zu: %s", k,
                  tg_error_message());
        for (int i = 0; i < 3; i++) tg_tensor_release(in[i]);
    }
    tg_tensor_release(g_rm), tg_tensor_release(g_rv);
}

/* When the incoming gradient is the engine's alone, the fused backward writes
 * dx over it: the backward's tensor peak stays at one activation-sized
 * buffer above the graph, and the gradients equal the recorded backward's. */
Test(norm_grad, fused_backward_reuses_a_sole_gradient_buffer)
{
    const int64_t xs[4] = {8, 4, 32, 32};   /* 32768 values, 256 KiB in f64 */
    const int64_t bytes = 8 * 4 * 32 * 32 * 8;
    tg_tensor *g[2] = {NULL, NULL};
    for (int r = 0; r < 2; r++) {
        tg_tensor *x = th_rand_uniform(TG_F64, 4, xs, 71), *c = th_rand_uniform(TG_F64, 4, xs, 72);
        tg_tensor *w = vec(TG_F64, 4, 73, 0.5, 2), *y = NULL, *z = NULL, *s = NULL;
        tg_tensor_set_requires_grad(x, true);
        cr_assert(eq(int, tg_batch_norm(&y, x, NULL, NULL, w, NULL, true, 0.1, 1e-5), TG_OK));
        cr_assert(eq(int, tg_mul(&z, y, c), TG_OK));
        cr_assert(eq(int, tg_sum(&s, z), TG_OK));
        tg_tensor_release(z);   /* y stays, so that freeing it cannot hide a new buffer */
        int64_t before, peak;
        tg_memory_reset_peak();
        tg_memory_stats(&before, NULL);
        tg_backward_opts o = TG_BACKWARD_OPTS_INIT;
        o.create_graph = r == 1;
        cr_assert(eq(int, tg_backward(s, NULL, &o), TG_OK), "%s", tg_error_message());
        tg_memory_stats(NULL, &peak);
        if (r == 0) cr_assert(le(i64, peak - before, bytes + 4096), "%lld bytes above the graph",
                              (long long)(peak - before));
        g[r] = tg_tensor_retain(tg_tensor_grad(x));
        tg_tensor_zero_grad(x);   /* the recorded gradient refers back to x */
        tg_tensor_release(x), tg_tensor_release(c), tg_tensor_release(w), tg_tensor_release(s);
        tg_tensor_release(y);
    }
    double *a = th_doubles(g[0]);
    expect_close(g[1], a, 1e-12, "dx");
    free(a);
    tg_tensor_release(g[0]), tg_tensor_release(g[1]);
}
