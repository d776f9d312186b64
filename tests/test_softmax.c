/* tests/test_softmax.c - softmax, log_softmax and nll_loss: values and
 * gradients against PyTorch 1.13 (tests/golden/softmax.safetensors,
 * scripts/make_softmax_goldens.py) in f64, f32 and bf16, gradcheck and
 * gradgradcheck in f64, the one-pass backward against the recorded one,
 * 0-d and empty inputs, f16, autocast, and the errors that name the
 * argument. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

typedef int (*softmax_fn)(tg_tensor **, tg_tensor *, int);

/* The tolerance of a dtype against torch, relative to the largest value:
 * torch computes f32 and bf16 in their own precision, tapegrad in double
 * rounded once (measured: 5e-16, 4.2e-7 = 3.5 ulps of f32, 6.6e-3 = one ulp
 * of bf16). */
static double tol_of(tg_dtype dt)
{
    return dt == TG_F64 ? 2e-15 : dt == TG_F32 ? 1e-6 : 1e-2;
}

/* Each element of got within rtol of want, relative to the element or to
 * the largest finite |want| (for sums that cancel); NaN matches NaN only and
 * an infinity itself. */
static void expect_close(const char *what, const tg_tensor *got, const tg_tensor *want,
                         double rtol)
{
    cr_assert(got != NULL && want != NULL, "%s: missing", what);
    cr_assert(tg_tensor_same_shape(got, want), "%s: shape", what);
    cr_assert(eq(int, tg_tensor_dtype(got), tg_tensor_dtype(want)), "%s: dtype", what);
    double scale = 0;
    for (int64_t i = 0; i < tg_tensor_numel(want); i++)
        if (isfinite(th_at(want, i))) scale = fmax(scale, fabs(th_at(want, i)));
    for (int64_t i = 0; i < tg_tensor_numel(want); i++)
        cr_assert(th_close(th_at(got, i), th_at(want, i), rtol, rtol * scale),
                  "%s[%lld]: %.17g, torch %.17g", what, (long long)i, th_at(got, i),
                  th_at(want, i));
}

static tg_tensor *leaf_clone(const tg_tensor *t)
{
    tg_tensor *c = NULL;
    OK(tg_tensor_clone(&c, t));
    OK(tg_tensor_set_requires_grad(c, true));
    return c;
}

static tg_tensor *golden(const tg_st_file *f, const char *fmt, const char *a, const char *b,
                         const char *c)
{
    char key[160];
    snprintf(key, sizeof key, fmt, a, b, c);
    tg_tensor *t = tg_st_get(f, key);
    cr_assert(t != NULL, "golden key %s missing", key);
    return t;
}

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
                expect_close(what, y, golden(f, "sm.%s.%s.%s.y", name, d, fn), tol);
                OK(tg_backward(y, w, NULL));
                snprintf(what, sizeof what, "%s dim %s %s gx", name, d, fn);
                expect_close(what, tg_tensor_grad(x), golden(f, "sm.%s.%s.%s.gx", name, d, fn), tol);
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
            expect_close(l ? "log_softmax" : "softmax", g[0], g[1], tol_of(dts[k]));
            th_release_all(5, (tg_tensor *[]){x, y, w, g[0], g[1]});
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

