/* tests/test_softmax.c - softmax, log_softmax and nll_loss: values and
 * gradients against PyTorch 1.13 (tests/golden/softmax.safetensors,
 * scripts/make_softmax_goldens.py) in f64, f32 and bf16, gradcheck and
 * gradgradcheck in f64, the one-pass backward against the recorded one,
 * 0-d and empty inputs, f16 and bf16 against the f64 result rounded once,
 * autocast, and the errors that name the argument. */
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
            expect_close(l ? "log_softmax" : "softmax", g[0], g[1], tol_of(dts[k]));
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

/* ---- nll_loss ------------------------------------------------------------------ */

static const char *const RED_NAMES[3] = {"mean", "sum", "none"};
static const tg_reduction REDS[3] = {TG_REDUCTION_MEAN, TG_REDUCTION_SUM, TG_REDUCTION_NONE};

Test(nll_loss, values_and_gradients_match_pytorch)
{
    tg_st_file *f = th_golden_load("softmax.safetensors");
    char cases[512];
    snprintf(cases, sizeof cases, "%s", tg_st_meta_get(f, "nll_cases"));
    int checked = 0;
    for (char *save, *name = strtok_r(cases, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
        char key[96];
        snprintf(key, sizeof key, "%s.ignore_index", name);
        const int64_t ii = atoll(tg_st_meta_get(f, key));
        snprintf(key, sizeof key, "%s.weight", name);
        const bool weighted = strcmp(tg_st_meta_get(f, key), "1") == 0;
        tg_tensor *lp0 = golden(f, "nll.%s.logp", name, "", ""),
                  *t = golden(f, "nll.%s.target", name, "", ""),
                  *w = weighted ? golden(f, "nll.%s.weight", name, "", "") : NULL;
        const double tol = tol_of(tg_tensor_dtype(lp0));
        for (int r = 0; r < 3; r++) {
            tg_tensor *lp = leaf_clone(lp0), *v = NULL;
            OK(tg_nll_loss(&v, lp, t, w, REDS[r], ii));
            char what[96];
            snprintf(what, sizeof what, "%s %s value", name, RED_NAMES[r]);
            expect_close(what, v, golden(f, "nll.%s.%s.value", name, RED_NAMES[r], ""), tol);
            OK(tg_backward(v, golden(f, "nll.%s.%s.gout", name, RED_NAMES[r], ""), NULL));
            snprintf(what, sizeof what, "%s %s grad", name, RED_NAMES[r]);
            expect_close(what, tg_tensor_grad(lp), golden(f, "nll.%s.%s.grad", name, RED_NAMES[r], ""),
                         tol);
            th_release_all(2, (tg_tensor *[]){v, lp});
            checked++;
        }
    }
    cr_assert(checked >= 39, "only %d cases", checked);
    tg_st_free(f);
}

/* As torch 1.13: an empty batch is NaN for mean, 0 for sum, empty for
 * none; so is a batch without classes whose targets are all ignored. */
Test(nll_loss, empty_batch_as_torch)
{
    const int64_t lshapes[2][2] = {{0, 4}, {2, 0}}, tshapes[2] = {0, 2};
    for (int k = 0; k < 2; k++) {
        tg_tensor *lp = NULL, *t = NULL;
        OK(tg_tensor_zeros(&lp, TG_F32, 2, lshapes[k]));
        OK(tg_tensor_full(&t, TG_I64, 1, &tshapes[k], -100));
        OK(tg_tensor_set_requires_grad(lp, true));
        for (int r = 0; r < 3; r++) {
            tg_tensor *v = NULL, *s = NULL;
            OK(tg_nll_loss(&v, lp, t, NULL, REDS[r], TG_IGNORE_INDEX_DEFAULT));
            if (r == 0) cr_assert(isnan(th_at(v, 0)), "mean %g", th_at(v, 0));
            if (r == 1) cr_assert(eq(dbl, th_at(v, 0), 0.0));
            if (r == 2) th_expect_shape(v, 1, &tshapes[k]);
            OK(tg_sum(&s, v));
            OK(tg_backward(s, NULL, NULL));
            th_expect_shape(tg_tensor_grad(lp), 2, lshapes[k]);
            th_release_all(2, (tg_tensor *[]){v, s});
        }
        th_release_all(2, (tg_tensor *[]){lp, t});
    }
}

typedef struct {
    tg_tensor *target, *weight;
    tg_reduction red;
    int64_t ignore_index;
} nll_user;

/* nll_loss(log_softmax(x)): nonlinear in x, so that gradgradcheck sees the
 * backward of nll_loss_backward (its output's gradient through the
 * log_softmax) as well as its own. */
static int g_nll(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    const nll_user *u = user;
    tg_tensor *lp;
    TG_TRY(tg_log_softmax(&lp, in[0], 1));
    int rc = tg_nll_loss(out, lp, u->target, u->weight, u->red, u->ignore_index);
    tg_tensor_release(lp);
    return rc;
}

static int g_nll_direct(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    const nll_user *u = user;
    return tg_nll_loss(out, in[0], u->target, u->weight, u->red, u->ignore_index);
}

Test(nll_loss, gradcheck_and_gradgradcheck_in_f64)
{
    tg_tensor *x2 = th_rand_uniform(TG_F64, 2, (int64_t[]){4, 3}, 21);
    tg_tensor *x4 = th_rand_uniform(TG_F64, 4, (int64_t[]){2, 3, 2, 2}, 22);
    tg_tensor *t2 = th_tensor_from(TG_I64, 1, (int64_t[]){4}, (double[]){2, -100, 0, 2});
    tg_tensor *t4 = th_tensor_from(TG_I64, 3, (int64_t[]){2, 2, 2},
                                   (double[]){0, 1, 2, 1, 1, 1, 0, 2});
    tg_tensor *w = th_tensor_from(TG_F64, 1, (int64_t[]){3}, (double[]){0.5, 2, 1.5});
    OK(tg_tensor_set_requires_grad(x2, true));
    OK(tg_tensor_set_requires_grad(x4, true));
    for (int r = 0; r < 3; r++)
        for (int k = 0; k < 4; k++) {
            /* 2-d with -100 ignored; 4-d with class 1 ignored; each with and without weights */
            nll_user u = {k < 2 ? t2 : t4, k % 2 ? w : NULL, REDS[r], k < 2 ? -100 : 1};
            tg_tensor **x = k < 2 ? &x2 : &x4;
            OK(tg_gradcheck(g_nll, &u, 1, x, NULL));
            OK(tg_gradgradcheck(g_nll, &u, 1, x, NULL));
            OK(tg_gradcheck(g_nll_direct, &u, 1, x, NULL));
            OK(tg_gradgradcheck(g_nll_direct, &u, 1, x, NULL));
        }
    th_release_all(5, (tg_tensor *[]){x2, x4, t2, t4, w});
}

/* cross_entropy is log_softmax followed by nll_loss. */
Test(nll_loss, after_log_softmax_is_cross_entropy)
{
    tg_tensor *x = th_rand_uniform(TG_F64, 2, (int64_t[]){5, 4}, 31);
    tg_tensor *t = th_tensor_from(TG_I64, 1, (int64_t[]){5}, (double[]){3, 0, 1, 1, 2});
    OK(tg_tensor_set_requires_grad(x, true));
    for (int r = 0; r < 3; r++) {
        tg_tensor *lp, *a, *b, *ga, *gb;
        OK(tg_log_softmax(&lp, x, -1));
        OK(tg_nll_loss(&a, lp, t, NULL, REDS[r], TG_IGNORE_INDEX_DEFAULT));
        OK(tg_cross_entropy(&b, x, t, REDS[r]));
        expect_close(RED_NAMES[r], a, b, 1e-15);
        tg_tensor *ones = NULL;
        OK(tg_tensor_full(&ones, TG_F64, tg_tensor_ndim(a), tg_tensor_shape(a), 1.0));
        OK(tg_grad(&ga, 1, &a, &ones, 1, &x, NULL));
        OK(tg_grad(&gb, 1, &b, &ones, 1, &x, NULL));
        expect_close(RED_NAMES[r], ga, gb, 1e-15);
        th_release_all(6, (tg_tensor *[]){lp, a, b, ga, gb, ones});
    }
    th_release_all(2, (tg_tensor *[]){x, t});
}

/* FP32, as torch's autocast: a bf16 logp gives an f32 loss, its gradient
 * comes back in bf16. */
Test(nll_loss, autocast_computes_in_f32)
{
    tg_tensor *lp = th_rand_uniform(TG_BF16, 2, (int64_t[]){3, 4}, 41), *v;
    tg_tensor *t = th_tensor_from(TG_I64, 1, (int64_t[]){3}, (double[]){0, 3, 1});
    tg_tensor *w = th_tensor_from(TG_BF16, 1, (int64_t[]){4}, (double[]){1, 2, 3, 4});
    OK(tg_tensor_set_requires_grad(lp, true));
    OK(tg_autocast_begin(TG_BF16));
    OK(tg_nll_loss(&v, lp, t, w, TG_REDUCTION_MEAN, TG_IGNORE_INDEX_DEFAULT));
    OK(tg_autocast_end());
    cr_assert(eq(int, tg_tensor_dtype(v), TG_F32));
    OK(tg_backward(v, NULL, NULL));
    cr_assert(eq(int, tg_tensor_dtype(tg_tensor_grad(lp)), TG_BF16));
    th_release_all(4, (tg_tensor *[]){lp, t, w, v});
}

Test(nll_loss, bad_arguments_name_the_rule)
{
    tg_tensor *lp = th_rand_uniform(TG_F32, 2, (int64_t[]){3, 4}, 1), *v = NULL;
    tg_tensor *lp4 = th_rand_uniform(TG_F32, 4, (int64_t[]){2, 4, 2, 2}, 2);
    tg_tensor *t = th_tensor_from(TG_I64, 1, (int64_t[]){3}, (double[]){0, 4, 1});
    tg_tensor *tn = th_tensor_from(TG_I64, 1, (int64_t[]){3}, (double[]){0, 1, -1});
    tg_tensor *tf = th_tensor_from(TG_F32, 1, (int64_t[]){3}, (double[]){0, 1, 1});
    tg_tensor *t2 = th_tensor_from(TG_I64, 1, (int64_t[]){2}, (double[]){0, 1});
    tg_tensor *t4 = th_tensor_from(TG_I64, 3, (int64_t[]){2, 2, 2},
                                   (double[]){0, 1, 2, 3, 3, 2, 1, 7});
    tg_tensor *w3 = th_tensor_from(TG_F32, 1, (int64_t[]){3}, (double[]){1, 1, 1});
    tg_tensor *wi = th_tensor_from(TG_I64, 1, (int64_t[]){4}, (double[]){1, 1, 1, 1});
    tg_tensor *s = NULL;
    OK(tg_tensor_scalar(&s, TG_F32, 1.0));
    const tg_reduction M = TG_REDUCTION_MEAN;
    const int64_t II = TG_IGNORE_INDEX_DEFAULT;
    OK(tg_tensor_set_requires_grad(lp, true));
    cr_assert(eq(int, tg_nll_loss(&v, lp, t, NULL, M, II), TG_EINVAL));
    th_expect_in(tg_error_message(), "nll_loss: target[1]=4 must be a class in [0, 4) or "
                                     "ignore_index=-100");
    cr_assert(eq(int, tg_nll_loss(&v, lp, tn, NULL, M, II), TG_EINVAL));
    th_expect_in(tg_error_message(), "target[2]=-1 must be a class");
    OK(tg_nll_loss(&v, lp, tn, NULL, M, -1));   /* -1 is then the ignored index */
    tg_tensor_release(v);
    v = NULL;
    cr_assert(eq(int, tg_nll_loss(&v, lp4, t4, NULL, M, II), TG_EINVAL));
    th_expect_in(tg_error_message(), "nll_loss: target[1, 1, 1]=7 must be a class in [0, 4)");
    cr_assert(eq(int, tg_nll_loss(&v, lp, tf, NULL, M, II), TG_EDTYPE));
    th_expect_in(tg_error_message(), "nll_loss: target has dtype f32; it must be i64");
    cr_assert(eq(int, tg_nll_loss(&v, lp, t2, NULL, M, II), TG_ESHAPE));
    th_expect_in(tg_error_message(), "nll_loss: target has shape (2); for logp (3, 4) it must "
                                     "be (3)");
    cr_assert(eq(int, tg_nll_loss(&v, lp4, t, NULL, M, II), TG_ESHAPE));
    th_expect_in(tg_error_message(), "for logp (2, 4, 2, 2) it must be (2, 2, 2)");
    cr_assert(eq(int, tg_nll_loss(&v, lp, t2, w3, M, II), TG_ESHAPE));
    cr_assert(eq(int, tg_nll_loss(&v, lp, t, w3, M, II), TG_ESHAPE));
    th_expect_in(tg_error_message(), "nll_loss: weight has shape (3); it must be (C) = (4)");
    cr_assert(eq(int, tg_nll_loss(&v, lp, t, wi, M, II), TG_EDTYPE));
    th_expect_in(tg_error_message(), "nll_loss: weight has dtype i64; float dtypes only");
    cr_assert(eq(int, tg_nll_loss(&v, t, t, NULL, M, II), TG_EDTYPE));
    th_expect_in(tg_error_message(), "nll_loss: logp has dtype i64; float dtypes only");
    cr_assert(eq(int, tg_nll_loss(&v, s, t, NULL, M, II), TG_ESHAPE));
    th_expect_in(tg_error_message(), "nll_loss: logp is 0-d");
    cr_assert(eq(int, tg_nll_loss(&v, lp, t, NULL, (tg_reduction)7, II), TG_EINVAL));
    th_expect_in(tg_error_message(), "nll_loss: reduction=7 must be MEAN, SUM or NONE");
    cr_assert(eq(int, tg_nll_loss(&v, NULL, t, NULL, M, II), TG_EINVAL));
    th_expect_in(tg_error_message(), "nll_loss: logp must not be NULL");
    cr_assert(eq(int, tg_nll_loss(&v, lp, NULL, NULL, M, II), TG_EINVAL));
    th_expect_in(tg_error_message(), "nll_loss: target must not be NULL");
    cr_assert(eq(int, tg_nll_loss(NULL, lp, t2, NULL, M, II), TG_EINVAL));
    /* the class weights get no gradient: a weight that requires one is refused */
    tg_tensor *wg = th_tensor_from(TG_F32, 1, (int64_t[]){4}, (double[]){1, 2, 3, 4});
    tg_tensor *t3 = th_tensor_from(TG_I64, 1, (int64_t[]){3}, (double[]){0, 3, 1});
    OK(tg_tensor_set_requires_grad(wg, true));
    cr_assert(eq(int, tg_nll_loss(&v, lp, t3, wg, M, II), TG_EINVAL));
    th_expect_in(tg_error_message(), "nll_loss: weight requires grad");
    cr_assert(v == NULL, "an error left a result");
    cr_assert(tg_tensor_grad(lp) == NULL);
    th_release_all(13, (tg_tensor *[]){lp, lp4, t, tn, tf, t2, t4, w3, wi, s, wg, t3, NULL});
}
