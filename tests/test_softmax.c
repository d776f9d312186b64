/* tests/test_softmax.c - softmax and log_softmax: values and gradients
 * against PyTorch 1.13 (tests/golden/softmax.safetensors,
 * scripts/make_softmax_goldens.py) in f64, f32 and bf16, gradcheck and
 * gradgradcheck in f64, the one-pass backward against the recorded one,
 * 0-d and empty inputs, f16 and bf16 against the f64 result rounded once,
 * autocast, and the errors that name the argument (nll_loss:
 * test_nll_loss.c). */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "softmax_fixtures.h"
#include "tapegrad/tapegrad.h"

typedef int (*softmax_fn)(tg_tensor **, tg_tensor *, int);

/* ---- softmax and log_softmax ------------------------------------------------ */

Test(softmax, values_and_gradients_match_pytorch)
{
    tg_st_file *f = th_golden_load("softmax.safetensors");
    char cases[512];
    snprintf(cases, sizeof cases, "%s", tg_st_meta_get(f, "softmax_cases"));
    int checked = 0;
    for (char *save, *name = strtok_r(cases, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
        char key[96], dims[64];
        snprintf(key, sizeof key, "%s.dims", name);
        snprintf(dims, sizeof dims, "%s", tg_st_meta_get(f, key));
        tg_tensor *x0 = golden(f, "sm.%s.x", name, "", ""), *w = golden(f, "sm.%s.w", name, "", "");
        const double tol = tol_of(tg_tensor_dtype(x0));
        for (char *s2, *d = strtok_r(dims, ",", &s2); d; d = strtok_r(NULL, ",", &s2)) {
            for (int l = 0; l < 2; l++) {
                const char *fn = l ? "log_softmax" : "softmax";
                tg_tensor *x = leaf_clone(x0), *y = NULL;
                OK((l ? tg_log_softmax : tg_softmax)(&y, x, atoi(d)));
                char what[128];
                snprintf(what, sizeof what, "%s dim %s %s y", name, d, fn);
                th_expect_close(what, y, golden(f, "sm.%s.%s.%s.y", name, d, fn), tol);
                OK(tg_backward(y, w, NULL));
                snprintf(what, sizeof what, "%s dim %s %s gx", name, d, fn);
                th_expect_close(what, tg_tensor_grad(x), golden(f, "sm.%s.%s.%s.gx", name, d, fn),
                                tol);
                th_release_all(2, (tg_tensor *[]){y, x});
                checked++;
            }
        }
    }
    cr_assert(checked >= 40, "only %d cases", checked);
    tg_st_free(f);
}

/* A transposed (strided) x gives the transposed result of the contiguous one. */
Test(softmax, strided_input_matches_contiguous)
{
    tg_tensor *x = th_rand_uniform(TG_F32, 2, (int64_t[]){5, 3}, 11), *xt, *xc, *a, *b, *at;
    OK(tg_transpose(&xt, x, 0, 1));
    OK(tg_contiguous(&xc, xt));
    for (int l = 0; l < 2; l++) {
        softmax_fn fn = l ? tg_log_softmax : tg_softmax;
        OK(fn(&a, xt, 0));
        OK(fn(&b, xc, 0));
        OK(tg_contiguous(&at, a));
        th_expect_same_bits(l ? "log_softmax" : "softmax", xc, at, b);
        th_release_all(3, (tg_tensor *[]){a, b, at});
    }
    th_release_all(3, (tg_tensor *[]){x, xt, xc});
}

/* As torch: a 0-d x is one row of one (softmax 1, log_softmax 0, gradient
 * 0), and empty rows or batches give empty results and gradients. */
Test(softmax, zero_d_and_empty_inputs)
{
    tg_tensor *x = NULL, *y = NULL;
    OK(tg_tensor_scalar(&x, TG_F64, 2.5));
    OK(tg_tensor_set_requires_grad(x, true));
    for (int l = 0; l < 2; l++) {
        OK((l ? tg_log_softmax : tg_softmax)(&y, x, -1));
        cr_assert(eq(int, tg_tensor_ndim(y), 0));
        cr_assert(eq(dbl, th_at(y, 0), l ? 0.0 : 1.0));
        OK(tg_backward(y, NULL, NULL));
        cr_assert(eq(dbl, th_at(tg_tensor_grad(x), 0), 0.0));
        tg_tensor_zero_grad(x);
        tg_tensor_release(y);
    }
    cr_assert(eq(int, tg_softmax(&y, x, 1), TG_EINVAL));
    tg_tensor_release(x);
    const int64_t shapes[2][2] = {{3, 0}, {0, 4}};
    for (int s = 0; s < 2; s++)
        for (int d = 0; d < 2; d++) {
            OK(tg_tensor_zeros(&x, TG_F32, 2, shapes[s]));
            OK(tg_tensor_set_requires_grad(x, true));
            OK(tg_log_softmax(&y, x, d));
            th_expect_shape(y, 2, shapes[s]);
            tg_tensor *t = NULL;
            OK(tg_sum(&t, y));
            OK(tg_backward(t, NULL, NULL));
            th_expect_shape(tg_tensor_grad(x), 2, shapes[s]);
            th_release_all(3, (tg_tensor *[]){t, y, x});
        }
}

/* f16 (which torch 1.13 lacks on the CPU) is the f64 result rounded once. */
Test(softmax, f16_is_the_double_result_rounded_once)
{
    const int64_t shape[2] = {3, 6};
    tg_tensor *x = th_seq(TG_F16, 2, shape, -12, 12), *ys, *yl;
    OK(tg_softmax(&ys, x, 1));
    OK(tg_log_softmax(&yl, x, 1));
    for (int r = 0; r < 3; r++) {
        double m = -INFINITY, s = 0;
        for (int c = 0; c < 6; c++) m = fmax(m, th_at(x, r * 6 + c));
        for (int c = 0; c < 6; c++) s += exp(th_at(x, r * 6 + c) - m);
        for (int c = 0; c < 6; c++) {
            const double z = th_at(x, r * 6 + c) - m;
            cr_assert(eq(dbl, th_at(ys, r * 6 + c), th_round_to(TG_F16, exp(z) / s)));
            cr_assert(eq(dbl, th_at(yl, r * 6 + c), th_round_to(TG_F16, z - log(s))));
        }
    }
    th_release_all(3, (tg_tensor *[]){x, ys, yl});
}

/* f16 and bf16, converted in bulk: each result is the f64 computation on
 * the widened input rounded once, bit for bit: softmax and log_softmax
 * along each dim of (3, 300, 2) (slabs longer than a conversion block, and
 * strided rows), with -inf entries and a NaN, and log_softmax's one-pass
 * backward. */
Test(softmax, half_is_the_f64_result_of_the_widened_input_rounded_once)
{
    const int64_t shape[3] = {3, 300, 2};
    const tg_dtype dts[2] = {TG_F16, TG_BF16};
    tg_tensor *u = th_rand_uniform(TG_F64, 3, shape, 31), *x64 = NULL;
    OK(tg_mul_scalar(&x64, u, 12.0));
    const int64_t ninf[3] = {5, 6, 1201}, nan_at = 1500;
    for (int i = 0; i < 3; i++) OK(tg_tensor_set_flat(x64, ninf[i], -INFINITY));
    OK(tg_tensor_set_flat(x64, nan_at, NAN));
    tg_tensor *w64 = th_rand_uniform(TG_F64, 3, shape, 32);
    for (int k = 0; k < 2; k++) {
        tg_tensor *xh = NULL, *xw = NULL, *wh = NULL, *ww = NULL;
        OK(tg_tensor_to_dtype(&xh, x64, dts[k]));
        OK(tg_tensor_to_dtype(&xw, xh, TG_F64));   /* exact */
        OK(tg_tensor_to_dtype(&wh, w64, dts[k]));
        OK(tg_tensor_to_dtype(&ww, wh, TG_F64));
        OK(tg_tensor_set_requires_grad(xh, true));
        OK(tg_tensor_set_requires_grad(xw, true));
        for (int d = 0; d < 3; d++)
            for (int l = 0; l < 2; l++) {
                softmax_fn fn = l ? tg_log_softmax : tg_softmax;
                tg_tensor *yh = NULL, *yw = NULL, *want = NULL;
                OK(fn(&yh, xh, d));
                OK(fn(&yw, xw, d));
                OK(tg_tensor_to_dtype(&want, yw, dts[k]));
                th_expect_same_bits(l ? "log_softmax" : "softmax", xh, yh, want);
                if (l) {   /* the backward from x, in one pass */
                    tg_tensor *gh = NULL, *gw = NULL, *gwant = NULL;
                    OK(tg_grad(&gh, 1, &yh, &wh, 1, &xh, NULL));
                    OK(tg_grad(&gw, 1, &yw, &ww, 1, &xw, NULL));
                    OK(tg_tensor_to_dtype(&gwant, gw, dts[k]));
                    th_expect_same_bits("log_softmax backward", xh, gh, gwant);
                    th_release_all(3, (tg_tensor *[]){gh, gw, gwant});
                }
                th_release_all(3, (tg_tensor *[]){yh, yw, want});
            }
        th_release_all(4, (tg_tensor *[]){xh, xw, wh, ww});
    }
    th_release_all(3, (tg_tensor *[]){u, x64, w64});
}

typedef struct {
    softmax_fn fn;
    int dim;
} sm_user;

/* sum(softmax(x) * x): nonlinear in x beyond the op, so that gradgradcheck
 * also sees the op's second derivative against a varying factor. */
static int g_softmax(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    const sm_user *u = user;
    tg_tensor *y;
    TG_TRY(u->fn(&y, in[0], u->dim));
    int rc = tg_mul(out, y, in[0]);
    tg_tensor_release(y);
    return rc;
}

Test(softmax, gradcheck_and_gradgradcheck_in_f64)
{
    tg_tensor *x = th_rand_uniform(TG_F64, 3, (int64_t[]){3, 4, 2}, 3);
    OK(tg_tensor_set_requires_grad(x, true));
    const int dims[] = {0, 1, -1};
    for (int l = 0; l < 2; l++)
        for (int d = 0; d < 3; d++) {
            sm_user u = {l ? tg_log_softmax : tg_softmax, dims[d]};
            OK(tg_gradcheck(g_softmax, &u, 1, &x, NULL));
            OK(tg_gradgradcheck(g_softmax, &u, 1, &x, NULL));
        }
    tg_tensor_release(x);
}

/* The one-pass backward (no graph) and the recorded one (create_graph)
 * compute the same formula: within rounding in f32 and bf16, and in f64. */
Test(softmax, one_pass_backward_matches_recorded_backward)
{
    const tg_dtype dts[3] = {TG_F64, TG_F32, TG_BF16};
    const int64_t shape[3] = {2, 5, 3};
    for (int k = 0; k < 3; k++)
        for (int l = 0; l < 2; l++) {
            tg_tensor *x = th_rand_uniform(dts[k], 3, shape, 7 + k), *y, *g[2];
            tg_tensor *w = th_rand_uniform(dts[k], 3, shape, 17 + k);
            OK(tg_tensor_set_requires_grad(x, true));
            OK((l ? tg_log_softmax : tg_softmax)(&y, x, 1));
            for (int cg = 0; cg < 2; cg++) {
                tg_backward_opts o = {.retain_graph = true, .create_graph = cg == 1};
                OK(tg_grad(&g[cg], 1, &y, &w, 1, &x, &o));
            }
            cr_assert(tg_tensor_requires_grad(g[1]) && !tg_tensor_requires_grad(g[0]));
            th_expect_close(l ? "log_softmax" : "softmax", g[0], g[1], tol_of(dts[k]));
            th_release_all(5, (tg_tensor *[]){x, y, w, g[0], g[1]});
        }
}

/* log_softmax's gradient takes softmax(x) from x, not exp(y) from the
 * rounded output: against a one-hot g, dx = -p for the other classes, and
 * p = e^-80 / s keeps the accuracy of the forward, where exp(y) would carry
 * the rounding of y = -80 - log(s), up to 40 epsilons, into it. */
Test(softmax, log_softmax_gradient_keeps_small_probabilities_accurate)
{
    const double xs[4] = {0, 0.5, -40, -80};
    tg_tensor *x = th_tensor_from(TG_F64, 1, (int64_t[]){4}, xs), *y, *gx;
    tg_tensor *g = th_tensor_from(TG_F64, 1, (int64_t[]){4}, (double[]){1, 0, 0, 0});
    OK(tg_tensor_set_requires_grad(x, true));
    OK(tg_log_softmax(&y, x, 0));
    OK(tg_grad(&gx, 1, &y, &g, 1, &x, NULL));
    long double s = 0;
    for (int c = 0; c < 4; c++) s += expl(xs[c]);
    for (int c = 1; c < 4; c++) {
        const long double want = -expl(xs[c]) / s;
        cr_assert(fabsl(th_at(gx, c) - want) <= 4e-16L * fabsl(want), "dx[%d] = %.17g, want %.17Lg",
                  c, th_at(gx, c), want);
    }
    th_release_all(4, (tg_tensor *[]){x, y, g, gx});
}

/* log_softmax saves its input: changing x in place before backward is
 * refused, changing the output is harmless (torch: the other way round). */
Test(softmax, log_softmax_saves_its_input)
{
    for (int k = 0; k < 2; k++) {
        tg_tensor *x = th_rand_uniform(TG_F64, 2, (int64_t[]){2, 3}, 9), *y, *s;
        OK(tg_tensor_set_requires_grad(x, true));
        OK(tg_log_softmax(&y, x, 1));
        OK(tg_sum(&s, y));
        tg_tensor_bump_version(k ? y : x);
        cr_assert(eq(int, tg_backward(s, NULL, NULL), k ? TG_OK : TG_EINPLACE), "%s",
                  tg_error_message());
        th_release_all(3, (tg_tensor *[]){x, y, s});
    }
}

/* FP32 policy: inside autocast a bf16 x gives f32, its gradient comes back
 * in bf16; outside, bf16 stays bf16. */
Test(softmax, autocast_computes_in_f32)
{
    tg_tensor *x = th_rand_uniform(TG_BF16, 2, (int64_t[]){2, 3}, 5), *y, *s;
    OK(tg_tensor_set_requires_grad(x, true));
    for (int l = 0; l < 2; l++) {
        softmax_fn fn = l ? tg_log_softmax : tg_softmax;
        OK(fn(&y, x, 1));
        cr_assert(eq(int, tg_tensor_dtype(y), TG_BF16));
        tg_tensor_release(y);
        OK(tg_autocast_begin(TG_BF16));
        OK(fn(&y, x, 1));
        OK(tg_autocast_end());
        cr_assert(eq(int, tg_tensor_dtype(y), TG_F32), "%s", l ? "log_softmax" : "softmax");
        OK(tg_sum(&s, y));
        OK(tg_backward(s, NULL, NULL));
        cr_assert(eq(int, tg_tensor_dtype(tg_tensor_grad(x)), TG_BF16));
        tg_tensor_zero_grad(x);
        th_release_all(2, (tg_tensor *[]){y, s});
    }
    tg_tensor_release(x);
}

Test(softmax, bad_arguments_name_the_rule)
{
    tg_tensor *x = th_rand_uniform(TG_F32, 2, (int64_t[]){2, 3}, 1), *y = NULL;
    tg_tensor *xi = th_tensor_from(TG_I64, 1, (int64_t[]){3}, (double[]){0, 1, 2});
    cr_assert(eq(int, tg_softmax(&y, x, 2), TG_EINVAL));
    th_expect_in(tg_error_message(), "softmax: dim=2 must be in [-2, 2) for a 2-d tensor");
    cr_assert(eq(int, tg_log_softmax(&y, x, -3), TG_EINVAL));
    th_expect_in(tg_error_message(), "log_softmax: dim=-3 must be in [-2, 2)");
    cr_assert(eq(int, tg_softmax(&y, xi, 0), TG_EDTYPE));
    th_expect_in(tg_error_message(), "softmax: x has dtype i64; float dtypes only");
    cr_assert(eq(int, tg_log_softmax(&y, NULL, 0), TG_EINVAL));
    th_expect_in(tg_error_message(), "log_softmax: x must not be NULL");
    cr_assert(eq(int, tg_softmax(NULL, x, 0), TG_EINVAL));
    cr_assert(y == NULL, "an error left a result");
    th_release_all(2, (tg_tensor *[]){x, xi});
}
