/* tests/test_half.c - f16 and bf16 through the kernels: conversions at the
 * edges (overflow, subnormals, NaN, ties), reductions, batch norm and
 * elementwise chunks rounded once, casts kept off the tape, matmul operands in
 * every layout and conv_transpose in half with f32 master weights. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "core/core.h"
#include "tapegrad/tapegrad.h"
#include "tapegrad/amp.h"
#include "tapegrad/autograd.h"
#include "tapegrad/conv.h"
#include "tapegrad/nn.h"
#include "tapegrad/ops.h"
#include "tapegrad/tensor.h"

/* ---- half conversions at the edges, through ops ------------------------------------ */

Test(half, half_edges_overflow_subnormal_nan_and_ties)
{
    /* f16: 65504 + 65504 = 131008 in f32 overflows f16 to inf; 2^-24 (smallest
     * subnormal) * 0.5 is a tie between 0 and 2^-24 and rounds to even (0);
     * 2^-24 * 0.75 rounds up to 2^-24. */
    tg_tensor *a =
        th_tensor_from(TG_F16, 1, (int64_t[]){4}, (double[]){65504, 0x1p-24, 0x1p-24, NAN});
    tg_tensor *b = th_tensor_from(TG_F16, 1, (int64_t[]){4}, (double[]){65504, 0.5, 0.75, 1.0}),
              *y = NULL;
    cr_assert(eq(dbl, th_at(a, 1), 0x1p-24));   /* the subnormal survives storage */
    cr_assert(eq(int, tg_add(&y, a, b), TG_OK));
    cr_assert(isinf(th_at(y, 0)) && th_at(y, 0) > 0);
    cr_assert(isnan(th_at(y, 3)));
    tg_tensor_release(y);
    cr_assert(eq(int, tg_mul(&y, a, b), TG_OK));
    cr_assert(isinf(th_at(y, 0)));
    cr_assert(eq(dbl, th_at(y, 1), 0.0));
    cr_assert(eq(dbl, th_at(y, 2), 0x1p-24));
    cr_assert(isnan(th_at(y, 3)));
    tg_tensor_release(y);
    /* bf16 ties through a reduction and a matmul: 1 + 2^-8 lies halfway
     * between 1 and 1 + 2^-7 and rounds to even (1); summed in f32,
     * 1 + 2^-8 + 2^-8 = 1 + 2^-7 exactly (a bf16 accumulator would stay at 1). */
    tg_tensor *c = th_tensor_from(TG_BF16, 2, (int64_t[]){1, 3}, (double[]){1.0, 0x1p-8, 0x1p-8});
    tg_tensor *ones = th_tensor_from(TG_BF16, 2, (int64_t[]){3, 1}, (double[]){1.0, 1.0, 1.0});
    tg_tensor *two = th_tensor_from(TG_BF16, 2, (int64_t[]){3, 1}, (double[]){1.0, 1.0, 0.0});
    cr_assert(eq(int, tg_sum(&y, c), TG_OK));
    cr_assert(eq(dbl, th_at(y, 0), 1.0 + 0x1p-7));
    tg_tensor_release(y);
    cr_assert(eq(int, tg_matmul(&y, c, ones), TG_OK));
    cr_assert(eq(dbl, th_at(y, 0), 1.0 + 0x1p-7));
    tg_tensor_release(y);
    cr_assert(eq(int, tg_matmul(&y, c, two), TG_OK));
    cr_assert(eq(dbl, th_at(y, 0), 1.0));
    tg_tensor_release(y);
    /* bf16 keeps f32's range: 3e38 * 2 overflows to inf, NaN goes through exp. */
    tg_tensor *d = th_tensor_from(TG_BF16, 1, (int64_t[]){2}, (double[]){3e38, NAN});
    cr_assert(eq(int, tg_mul_scalar(&y, d, 2.0), TG_OK));
    cr_assert(isinf(th_at(y, 0)));
    tg_tensor_release(y);
    cr_assert(eq(int, tg_exp(&y, d), TG_OK));
    cr_assert(isinf(th_at(y, 0)) && isnan(th_at(y, 1)));
    tg_tensor_release(y);
    tg_tensor *ts[6] = {a, b, c, ones, two, d};
    th_release_all(6, ts);
}

/* f16/bf16 reductions (bulk-converted to f32, summed in double) equal the
 * naive double sum of the stored values rounded once, for the patterns of a
 * training step: the bias gradient (dims 0, 2, 3 of a 4-d tensor), a batch sum
 * (dim 0), a mean over the last dim and a sum of a transposed view. */
Test(half, half_reductions_sum_in_double_and_round_once)
{
    const int64_t shape[4] = {5, 6, 7, 9};   /* 1890 elements */
    for (int h = 2; h < 4; h++) {
        tg_dtype dt = th_floats[h];
        tg_tensor *x = th_rand_uniform(dt, 4, shape, 41 + (uint64_t)h), *xt = NULL;
        cr_assert(eq(int, tg_transpose(&xt, x, 1, 3), TG_OK));   /* (5, 9, 7, 6) */
        struct { tg_tensor *a; int nd; int dims[3]; bool mean; } cs[] = {
            {x, 3, {0, 2, 3}, false}, {x, 1, {0}, false}, {x, 1, {3}, true}, {xt, 2, {0, 1}, false},
        };
        for (int c = 0; c < 4; c++) {
            tg_tensor *a = cs[c].a, *y = NULL;
            int rc = cs[c].mean ? tg_mean_dims(&y, a, cs[c].nd, cs[c].dims, false)
                                : tg_sum_dims(&y, a, cs[c].nd, cs[c].dims, false);
            cr_assert(eq(int, rc, TG_OK), "%s", tg_error_message());
            cr_assert(eq(int, tg_tensor_dtype(y), dt));
            /* out element o of the kept dims: naive sum by walking every
             * multi-index of a and matching the kept coordinates. */
            const int64_t *as = tg_tensor_shape(a);
            int64_t on = tg_tensor_numel(y), count = tg_tensor_numel(a) / on;
            double *want = calloc((size_t)on, sizeof *want);
            cr_assert(want != NULL);
            for (int64_t i = 0; i < tg_tensor_numel(a); i++) {
                int64_t rest = i, o = 0, ostr = 1;
                for (int d = 3; d >= 0; d--) {
                    int64_t id = rest % as[d];
                    rest /= as[d];
                    bool red = false;
                    for (int k = 0; k < cs[c].nd; k++) red |= cs[c].dims[k] == d;
                    if (!red) o += id * ostr, ostr *= as[d];
                }
                want[o] += th_at(a, i);
            }
            for (int64_t o = 0; o < on; o++) {
                uint16_t r;
                tg_dtype_store(dt, &r, 0, cs[c].mean ? want[o] * (1.0 / (double)count) : want[o]);
                cr_assert(eq(dbl, th_at(y, o), tg_dtype_load(dt, &r, 0)), "%s case %d [%lld]",
                          tg_dtype_name(dt), c, (long long)o);
            }
            free(want);
            tg_tensor_release(y);
        }
        tg_tensor_release(xt);
        tg_tensor_release(x);
    }
}

/* Batch norm under autocast keeps a half input half: statistics and the
 * normalisation in f32, y rounded once to x's dtype (as PyTorch), so it
 * equals the f32 module's output on the same values rounded once; x's
 * gradient is half, the parameters' f32 and equal to the f32 run's. */
Test(half, batchnorm_keeps_half_activations_under_autocast)
{
    const int64_t shape[4] = {4, 3, 5, 5};
    for (int h = 2; h < 4; h++) {
        tg_dtype dt = th_floats[h];
        tg_module *bn[2] = {NULL, NULL};
        for (int k = 0; k < 2; k++)
            cr_assert(eq(int, tg_nn_batchnorm_new(&bn[k], 2, 3, 1e-5, 0.1, true, true), TG_OK));
        tg_tensor *x0 = th_rand_uniform(TG_F32, 4, shape, 7), *xh = NULL, *x32 = NULL;
        cr_assert(eq(int, tg_to_dtype(&xh, x0, dt), TG_OK));
        cr_assert(eq(int, tg_to_dtype(&x32, xh, TG_F32), TG_OK));   /* the same values in f32 */
        tg_tensor_set_requires_grad(xh, true);
        tg_tensor_set_requires_grad(x32, true);
        tg_tensor *y32 = NULL, *yh = NULL, *s = NULL;
        cr_assert(eq(int, tg_module_forward(bn[0], &y32, x32), TG_OK));
        cr_assert(eq(int, tg_autocast_begin(dt), TG_OK));
        int rc = tg_module_forward(bn[1], &yh, xh);
        tg_autocast_end();
        cr_assert(eq(int, rc, TG_OK), "%s", tg_error_message());
        cr_assert(eq(int, tg_tensor_dtype(yh), dt));
        for (int64_t i = 0; i < tg_tensor_numel(yh); i++)
            cr_assert(eq(dbl, th_at(yh, i), th_round_to(dt, th_at(y32, i))), "%s [%lld]",
                      tg_dtype_name(dt), (long long)i);
        tg_tensor *ys[2] = {y32, yh};
        for (int k = 0; k < 2; k++) {
            cr_assert(eq(int, tg_sum(&s, ys[k]), TG_OK));
            cr_assert(eq(int, tg_backward(s, NULL, NULL), TG_OK), "%s", tg_error_message());
            tg_tensor_release(s);
        }
        cr_assert(eq(int, tg_tensor_dtype(tg_tensor_grad(xh)), dt));
        tg_tensor **p[2];
        int np[2];
        for (int k = 0; k < 2; k++) cr_assert(eq(int, tg_module_parameters(bn[k], &p[k], &np[k]), TG_OK));
        for (int j = 0; j < np[0]; j++) {
            tg_tensor *g0 = tg_tensor_grad(p[0][j]), *g1 = tg_tensor_grad(p[1][j]);
            cr_assert(eq(int, tg_tensor_dtype(g1), TG_F32));
            for (int64_t i = 0; i < tg_tensor_numel(g0); i++)
                cr_assert(epsilon_eq(dbl, th_at(g1, i), th_at(g0, i), 1e-5), "param %d [%lld]", j,
                          (long long)i);
        }
        for (int k = 0; k < 2; k++) free(p[k]);
        tg_tensor *all[] = {x0, xh, x32, y32, yh};
        for (size_t i = 0; i < sizeof all / sizeof *all; i++) tg_tensor_release(all[i]);
        for (int k = 0; k < 2; k++) tg_module_release(bn[k]);
    }
}

/* Half elementwise ops run in chunks (inputs converted piecewise, parallel
 * above 32k elements): long, broadcast and transposed operands give the f32
 * op's values on the same inputs rounded once, chunk boundaries included. */
Test(half, half_elementwise_chunks_match_f32_rounded_once)
{
    const int64_t shape[2] = {7, 7151}, row[2] = {1, 7151}, tshape[2] = {7151, 7};
    for (int h = 2; h < 4; h++) {
        tg_dtype dt = th_floats[h];
        tg_tensor *src[3] = {th_rand_uniform(TG_F32, 2, shape, 3), th_rand_uniform(TG_F32, 2, row, 4),
                             th_rand_uniform(TG_F32, 2, tshape, 5)};
        tg_tensor *hx[3], *fx[3], *tt[2] = {NULL, NULL};
        for (int i = 0; i < 3; i++) {   /* half inputs and their exact f32 copies */
            cr_assert(eq(int, tg_to_dtype(&hx[i], src[i], dt), TG_OK));
            cr_assert(eq(int, tg_to_dtype(&fx[i], hx[i], TG_F32), TG_OK));
        }
        cr_assert(eq(int, tg_transpose(&tt[0], hx[2], 0, 1), TG_OK));   /* (7, 7151), strided */
        cr_assert(eq(int, tg_transpose(&tt[1], fx[2], 0, 1), TG_OK));
        for (int c = 0; c < 4; c++) {
            tg_tensor *yh = NULL, *yf = NULL;
            if (c == 0) {
                cr_assert(eq(int, tg_mul(&yh, hx[0], hx[0]), TG_OK));
                cr_assert(eq(int, tg_mul(&yf, fx[0], fx[0]), TG_OK));
            } else if (c == 1) {
                cr_assert(eq(int, tg_add(&yh, hx[0], hx[1]), TG_OK));   /* broadcast row */
                cr_assert(eq(int, tg_add(&yf, fx[0], fx[1]), TG_OK));
            } else if (c == 2) {
                cr_assert(eq(int, tg_sub(&yh, tt[0], hx[0]), TG_OK));
                cr_assert(eq(int, tg_sub(&yf, tt[1], fx[0]), TG_OK));
            } else {
                cr_assert(eq(int, tg_leaky_relu(&yh, hx[0], 0.2), TG_OK));
                cr_assert(eq(int, tg_leaky_relu(&yf, fx[0], 0.2), TG_OK));
            }
            cr_assert(eq(int, tg_tensor_dtype(yh), dt));
            for (int64_t i = 0; i < tg_tensor_numel(yf); i++)
                if (th_at(yh, i) != th_round_to(dt, th_at(yf, i)))
                    cr_fatal("%s case %d [%lld]: %g vs %g", tg_dtype_name(dt), c, (long long)i,
                             th_at(yh, i), th_round_to(dt, th_at(yf, i)));
            tg_tensor_release(yh);
            tg_tensor_release(yf);
        }
        for (int i = 0; i < 3; i++) {
            tg_tensor_release(src[i]);
            tg_tensor_release(hx[i]);
            tg_tensor_release(fx[i]);
        }
        tg_tensor_release(tt[0]);
        tg_tensor_release(tt[1]);
    }
}

/* A cast made by the AMP dispatch and saved by the op is kept on the tape as
 * the input itself and cast again in backward: conv_transpose of a bf16 x
 * with an f32 weight under autocast (PROMOTE: x cast to f32; outside
 * autocast the mix is refused, as torch) keeps the bf16 x, not an f32
 * copy, and its first and second derivatives are bit for bit those of the
 * same computation with an explicit, user-made cast (which is saved as is). */
Test(half, dispatch_casts_are_not_kept_on_the_tape)
{
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    p.stride[0] = p.stride[1] = 2;
    p.padding[0][0] = p.padding[0][1] = p.padding[1][0] = p.padding[1][1] = 1;
    const int64_t xs[4] = {4, 8, 16, 16}, ws[4] = {8, 3, 4, 4};
    const int64_t xbytes32 = 4 * 8 * 16 * 16 * 4;
    tg_tensor *w[2], *gw[2], *gx[2];
    for (int r = 0; r < 2; r++) {   /* r = 0: dispatch cast; r = 1: explicit cast */
        tg_tensor *x = NULL, *a = NULL, *y = NULL, *s = NULL, *sq = NULL, *l = NULL;
        x = th_rand_uniform(TG_BF16, 4, xs, 3);   /* the same values both times */
        w[r] = th_rand_uniform(TG_F32, 4, ws, 4);
        tg_tensor_set_requires_grad(x, true);
        tg_tensor_set_requires_grad(w[r], true);
        int64_t before, after;
        tg_memory_stats(&before, NULL);
        cr_assert(eq(int, tg_mul_scalar(&a, x, 1.0), TG_OK));   /* bf16, dropped below */
        if (r == 1) {
            tg_tensor *c = NULL;
            cr_assert(eq(int, tg_to_dtype(&c, a, TG_F32), TG_OK));
            tg_tensor_release(a);
            a = c;
        }
        cr_assert(eq(int, tg_autocast_begin(TG_BF16), TG_OK));
        const int rc = tg_conv_transpose(&y, a, w[r], NULL, &p);
        cr_assert(eq(int, tg_autocast_end(), TG_OK));
        cr_assert(eq(int, rc, TG_OK), "%s", tg_error_message());
        cr_assert(eq(int, tg_tensor_dtype(y), TG_F32));
        tg_tensor_release(a);
        tg_memory_stats(&after, NULL);
        const int64_t ybytes = tg_tensor_numel(y) * 4;
        /* the tape: y and the bf16 a (dispatch cast), or y and the f32 copy (explicit) */
        if (r == 0) cr_assert(le(i64, after - before, ybytes + xbytes32 / 2 + 1024),
                              "tape holds %lld bytes beyond y", (long long)(after - before - ybytes));
        else cr_assert(ge(i64, after - before, ybytes + xbytes32));
        /* l = sum(y^2); dl/dw with create_graph, then d(sum dl/dw)/dx */
        cr_assert(eq(int, tg_mul(&sq, y, y), TG_OK));
        cr_assert(eq(int, tg_sum(&l, sq), TG_OK));
        tg_backward_opts o = TG_BACKWARD_OPTS_INIT;
        o.create_graph = true;
        tg_tensor *inputs[1] = {w[r]};
        cr_assert(eq(int, tg_grad(&gw[r], 1, &l, NULL, 1, inputs, &o), TG_OK), "%s", tg_error_message());
        cr_assert(eq(int, tg_sum(&s, gw[r]), TG_OK));
        cr_assert(eq(int, tg_backward(s, NULL, NULL), TG_OK), "%s", tg_error_message());
        gx[r] = tg_tensor_retain(tg_tensor_grad(x));
        cr_assert(eq(int, tg_tensor_dtype(gx[r]), TG_BF16));
        tg_tensor *all[] = {x, y, sq, l, s};
        for (size_t i = 0; i < sizeof all / sizeof *all; i++) tg_tensor_release(all[i]);
    }
    cr_assert(eq(int, memcmp(tg_tensor_data(gw[0]), tg_tensor_data(gw[1]), (size_t)(8 * 3 * 16 * 4)), 0));
    cr_assert(eq(int, memcmp(tg_tensor_data(gx[0]), tg_tensor_data(gx[1]), (size_t)(xbytes32 / 2)), 0));
    for (int r = 0; r < 2; r++) tg_tensor_release(w[r]), tg_tensor_release(gw[r]), tg_tensor_release(gx[r]);
}

/* A half reduction makes no full-size f32 copy of its input: the tensor
 * peak while summing a bf16 (64, 64, 14, 14) over dims 0, 2, 3 (the bias
 * gradient of a half conv) and over dim 0 stays within a few KiB of the
 * inputs already alive, and the sums still equal f32 sums of the same values. */
Test(half, half_reductions_make_no_full_size_copy)
{
    const int64_t shape[4] = {64, 64, 14, 14};
    tg_tensor *xh = th_rand_uniform(TG_BF16, 4, shape, 9), *xf = NULL;
    cr_assert(eq(int, tg_to_dtype(&xf, xh, TG_F32), TG_OK));
    const int dims[2][3] = {{0, 2, 3}, {0}};
    const int nd[2] = {3, 1};
    for (int c = 0; c < 2; c++) {
        tg_tensor *yh = NULL, *yf = NULL, *yr = NULL;
        int64_t before, peak;
        tg_memory_reset_peak();
        tg_memory_stats(&before, NULL);
        cr_assert(eq(int, tg_sum_dims(&yh, xh, nd[c], dims[c], false), TG_OK));
        tg_memory_stats(NULL, &peak);
        cr_assert(le(i64, peak - before, 2 * 3 * tg_tensor_numel(yh) * 8 + 4096),
                  "case %d: %lld bytes above the input", c, (long long)(peak - before));
        cr_assert(eq(int, tg_sum_dims(&yf, xf, nd[c], dims[c], false), TG_OK));
        cr_assert(eq(int, tg_to_dtype(&yr, yf, TG_BF16), TG_OK));
        cr_assert(eq(int, memcmp(tg_tensor_data(yh), tg_tensor_data(yr),
                                 (size_t)tg_tensor_numel(yh) * 2), 0), "case %d", c);
        tg_tensor_release(yh), tg_tensor_release(yf), tg_tensor_release(yr);
    }
    tg_tensor_release(xh), tg_tensor_release(xf);
}

/* lhs @ rhs (both of half dtype dt) is the f32 product lf @ rf of the same
 * values rounded once to dt, bit for bit.  lf and rf are given in the
 * layouts that the half path hands to OpenBLAS (whose kernels may sum in
 * another order for another layout, e.g. its small-matrix AVX-512 ones);
 * NULL: tg_to_dtype of lhs or rhs. */
static void expect_half_matmul_rounds_once(tg_dtype dt, tg_tensor *lhs, tg_tensor *rhs,
                                           tg_tensor *lf, tg_tensor *rf, const char *what, int i)
{
    tg_tensor *y = NULL, *yf = NULL, *yr = NULL;
    cr_assert(eq(int, tg_matmul(&y, lhs, rhs), TG_OK), "%s", tg_error_message());
    if (lf) tg_tensor_retain(lf);
    else cr_assert(eq(int, tg_to_dtype(&lf, lhs, TG_F32), TG_OK));
    if (rf) tg_tensor_retain(rf);
    else cr_assert(eq(int, tg_to_dtype(&rf, rhs, TG_F32), TG_OK));
    cr_assert(eq(int, tg_matmul(&yf, lf, rf), TG_OK));
    cr_assert(eq(int, tg_to_dtype(&yr, yf, dt), TG_OK));
    cr_assert(eq(i64, tg_tensor_numel(y), tg_tensor_numel(yr)));
    const size_t bytes = (size_t)tg_tensor_numel(y) * 2;
    cr_assert(eq(int, memcmp(tg_tensor_data(y), tg_tensor_data(yr), bytes), 0), "%s %s case %d",
              tg_dtype_name(dt), what, i);
    tg_tensor *all[] = {y, lf, rf, yf, yr};
    for (size_t k = 0; k < 5; k++) tg_tensor_release(all[k]);
}

/* t0 converted to f32, then viewed transposed as t0's transposed view is. */
static tg_tensor *f32_transposed(tg_tensor *t0)
{
    tg_tensor *f = NULL, *ft = NULL;
    cr_assert(eq(int, tg_to_dtype(&f, t0, TG_F32), TG_OK));
    cr_assert(eq(int, tg_transpose(&ft, f, 0, 1), TG_OK));
    tg_tensor_release(f);
    return ft;
}

/* Half matmul operands in every layout (plain, transposed views, and a
 * sliced one that must be packed) give the f32 product of the same values
 * rounded once: the dense blocks are converted in bulk with their layout
 * kept, the others packed element by element. */
Test(half, half_matmul_operands_in_every_layout)
{
    const int64_t sa[2] = {37, 53}, sb[2] = {53, 29}, sat[2] = {53, 37}, sbt[2] = {29, 53}, sw[2] = {37, 106};
    for (int h = 2; h < 4; h++) {
        const tg_dtype dt = th_floats[h];
        tg_tensor *a = th_rand_uniform(dt, 2, sa, 81), *b = th_rand_uniform(dt, 2, sb, 82);
        tg_tensor *at0 = th_rand_uniform(dt, 2, sat, 83), *bt0 = th_rand_uniform(dt, 2, sbt, 84);
        tg_tensor *wide = th_rand_uniform(dt, 2, sw, 85);
        tg_tensor *at = NULL, *bt = NULL, *sl = NULL;
        cr_assert(eq(int, tg_transpose(&at, at0, 0, 1), TG_OK));   /* (37, 53), column-major */
        cr_assert(eq(int, tg_transpose(&bt, bt0, 0, 1), TG_OK));   /* (53, 29), column-major */
        cr_assert(eq(int, tg_slice(&sl, wide, 1, 0, 106, 2), TG_OK));   /* (37, 53), stride 2 */
        tg_tensor *atf = f32_transposed(at0), *btf = f32_transposed(bt0);
        tg_tensor *lhs[3] = {a, at, sl}, *rhs[2] = {b, bt};
        tg_tensor *lhsf[3] = {NULL, atf, NULL}, *rhsf[2] = {NULL, btf};
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 2; j++)
                expect_half_matmul_rounds_once(dt, lhs[i], rhs[j], lhsf[i], rhsf[j], "layouts",
                                               2 * i + j);
        tg_tensor *all[] = {a, b, at0, bt0, wide, at, bt, sl, atf, btf};
        for (size_t k = 0; k < 10; k++) tg_tensor_release(all[k]);
    }
}

/* Half row and column operands (a Linear layer with one output has the
 * weight column W^T): dense ones convert in one call, strided ones are
 * packed; both give the f32 product of the same values rounded once. */
Test(half, half_matmul_row_and_column_operands)
{
    const int64_t sa[2] = {37, 53}, srow[2] = {1, 53}, s2[2] = {53, 2};
    for (int h = 2; h < 4; h++) {
        const tg_dtype dt = th_floats[h];
        tg_tensor *a = th_rand_uniform(dt, 2, sa, 91), *row = th_rand_uniform(dt, 2, srow, 92);
        tg_tensor *two = th_rand_uniform(dt, 2, s2, 93);
        tg_tensor *col = NULL, *scol = NULL;
        cr_assert(eq(int, tg_transpose(&col, row, 0, 1), TG_OK));     /* (53, 1), dense */
        cr_assert(eq(int, tg_slice(&scol, two, 1, 0, 1, 1), TG_OK));  /* (53, 1), row stride 2 */
        tg_tensor *lhs[3] = {a, row, a}, *rhs[3] = {col, scol, scol};
        for (int i = 0; i < 3; i++)
            expect_half_matmul_rounds_once(dt, lhs[i], rhs[i], NULL, NULL, "vectors", i);
        tg_tensor *all[] = {a, row, two, col, scol};
        for (size_t k = 0; k < 5; k++) tg_tensor_release(all[k]);
    }
}

/* tg_module_autocast_weights: f32 master weights, half compute.  Under
 * autocast the ConvTranspose op promotes (bf16 x with an f32 weight gives
 * f32); outside autocast it refuses the mix, as torch, flag or not; with
 * the flag and inside autocast the layer casts
 * its weight and bias to the scope's dtype first, so it computes, returns and
 * saves half, exactly as the op on hand-cast weights does, while the
 * gradients arrive at the f32 parameters in f32. */
Test(half, autocast_weights_run_conv_transpose_in_half_with_f32_masters)
{
    const int64_t xs[4] = {2, 3, 4, 4}, k[2] = {3, 3};
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    p.stride[0] = p.stride[1] = 2;
    p.padding[0][0] = p.padding[0][1] = p.padding[1][0] = p.padding[1][1] = 1;
    for (int h = 2; h < 4; h++) {
        const tg_dtype dt = th_floats[h];
        tg_rng rng;
        tg_rng_init(&rng, 5);
        tg_module *seq = NULL, *ct = NULL;
        cr_assert(eq(int, tg_nn_sequential_new(&seq), TG_OK));
        cr_assert(eq(int, tg_nn_conv_transpose_new(&ct, 2, 3, 2, k, &p, true, &rng), TG_OK));
        cr_assert(eq(int, tg_nn_sequential_append(seq, ct), TG_OK));   /* steals ct */
        tg_tensor *w = tg_module_find(seq, "0.weight"), *b = tg_module_find(seq, "0.bias");
        tg_tensor *x0 = th_rand_uniform(TG_F32, 4, xs, 3), *xh = NULL, *wh = NULL, *bh = NULL;
        cr_assert(eq(int, tg_to_dtype(&xh, x0, dt), TG_OK));
        cr_assert(eq(int, tg_to_dtype(&wh, w, dt), TG_OK));
        cr_assert(eq(int, tg_to_dtype(&bh, b, dt), TG_OK));
        tg_tensor *whl = NULL, *bhl = NULL;   /* the hand casts as leaves */
        cr_assert(eq(int, tg_tensor_detach(&whl, wh), TG_OK));
        cr_assert(eq(int, tg_tensor_detach(&bhl, bh), TG_OK));
        tg_tensor_set_requires_grad(whl, true);
        tg_tensor_set_requires_grad(bhl, true);

        /* off (the default): the op's PROMOTE rule, in and out of autocast */
        cr_assert(not(tg_module_is_autocast_weights(ct)));
        tg_tensor *y_off = NULL, *y_ref = NULL, *y_on = NULL, *y_out = NULL, *s = NULL;
        cr_assert(eq(int, tg_autocast_begin(dt), TG_OK));
        int rc = tg_module_forward(seq, &y_off, xh);
        tg_autocast_end();
        cr_assert(eq(int, rc, TG_OK), "%s", tg_error_message());
        cr_assert(eq(int, tg_tensor_dtype(y_off), TG_F32));

        /* on, set on the container: reaches the child */
        tg_module_autocast_weights(seq, true);
        cr_assert(tg_module_is_autocast_weights(ct));
        /* no scope: no effect, so the half input meets the f32 weight */
        th_expect_refused(tg_module_forward(seq, &y_out, xh), TG_EDTYPE,
                          "weight is f32 but x is", y_out);
        cr_assert(eq(int, tg_autocast_begin(dt), TG_OK));
        rc = tg_module_forward(seq, &y_on, xh);
        tg_autocast_end();
        cr_assert(eq(int, rc, TG_OK), "%s", tg_error_message());
        cr_assert(eq(int, tg_tensor_dtype(y_on), dt), "%s", tg_dtype_name(dt));
        cr_assert(eq(int, tg_conv_transpose(&y_ref, xh, whl, bhl, &p), TG_OK));
        cr_assert(eq(int, tg_tensor_numel(y_on), tg_tensor_numel(y_ref)));
        for (int64_t i = 0; i < tg_tensor_numel(y_on); i++)
            cr_assert(eq(dbl, th_at(y_on, i), th_at(y_ref, i)), "%s y[%lld]", tg_dtype_name(dt),
                      (long long)i);

        /* an f32 input still promotes to f32 (the weight rounded to half) */
        tg_tensor *y_f32in = NULL;
        cr_assert(eq(int, tg_autocast_begin(dt), TG_OK));
        rc = tg_module_forward(seq, &y_f32in, x0);
        tg_autocast_end();
        cr_assert(eq(int, rc, TG_OK), "%s", tg_error_message());
        cr_assert(eq(int, tg_tensor_dtype(y_f32in), TG_F32));
        tg_tensor_release(y_f32in);

        /* gradients: f32 at the masters, the half gradients converted */
        tg_tensor *ys[2] = {y_on, y_ref};
        for (int j = 0; j < 2; j++) {
            cr_assert(eq(int, tg_sum(&s, ys[j]), TG_OK));
            cr_assert(eq(int, tg_backward(s, NULL, NULL), TG_OK), "%s", tg_error_message());
            tg_tensor_release(s);
        }
        tg_tensor *masters[2] = {w, b}, *hands[2] = {whl, bhl};
        for (int j = 0; j < 2; j++) {
            tg_tensor *gm = tg_tensor_grad(masters[j]), *gh = tg_tensor_grad(hands[j]);
            cr_assert(gm != NULL && gh != NULL);
            cr_assert(eq(int, tg_tensor_dtype(gm), TG_F32));
            cr_assert(eq(int, tg_tensor_dtype(gh), dt));
            for (int64_t i = 0; i < tg_tensor_numel(gm); i++)
                cr_assert(eq(dbl, th_at(gm, i), th_at(gh, i)), "grad %d [%lld]", j, (long long)i);
        }

        /* f64 is never lowered */
        tg_tensor *x64 = NULL, *y64 = NULL;
        cr_assert(eq(int, tg_module_to_dtype(seq, TG_F64), TG_OK));
        cr_assert(eq(int, tg_to_dtype(&x64, x0, TG_F64), TG_OK));
        cr_assert(eq(int, tg_autocast_begin(dt), TG_OK));
        rc = tg_module_forward(seq, &y64, x64);
        tg_autocast_end();
        cr_assert(eq(int, rc, TG_OK), "%s", tg_error_message());
        cr_assert(eq(int, tg_tensor_dtype(y64), TG_F64));

        tg_module_autocast_weights(seq, false);
        cr_assert(not(tg_module_is_autocast_weights(ct)));
        tg_tensor *all[] = {x0, xh, wh, bh, whl, bhl, y_off, y_ref, y_on, y_out, x64, y64};
        for (size_t i = 0; i < sizeof all / sizeof *all; i++) tg_tensor_release(all[i]);
        tg_module_release(seq);
    }
}
