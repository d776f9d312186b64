/* tests/test_activation2.c - selu, celu, hardshrink, softshrink, threshold,
 * softsign, tanhshrink, glu, softmin and rrelu: against PyTorch's values
 * and gradients (f32, f64, bf16; +-0, +-inf, NaN, +-100, the kinks and
 * their neighbours), f16 and bf16 as the f32 op rounded once, derivatives
 * to second order by finite differences, integer inputs and the refusals.
 * Goldens: scripts/make_activation2_goldens.py. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

/* The op of a golden case on x, its parameters p0 and p1. */
static int run_op(const char *op, tg_tensor **y, tg_tensor *x, double p0, double p1)
{
    if (!strcmp(op, "selu")) return tg_selu(y, x);
    if (!strcmp(op, "celu")) return tg_celu(y, x, p0);
    if (!strcmp(op, "hardshrink")) return tg_hardshrink(y, x, p0);
    if (!strcmp(op, "softshrink")) return tg_softshrink(y, x, p0);
    if (!strcmp(op, "threshold")) return tg_threshold(y, x, p0, p1);
    if (!strcmp(op, "softsign")) return tg_softsign(y, x);
    if (!strcmp(op, "tanhshrink")) return tg_tanhshrink(y, x);
    if (!strcmp(op, "glu")) return tg_glu(y, x, (int)p0);
    if (!strcmp(op, "softmin")) return tg_softmin(y, x, (int)p0);
    if (!strcmp(op, "rrelu")) return tg_rrelu(y, x, p0, p1, false);
    cr_fatal("unknown op %s", op);
    return TG_EINVAL;
}

/* Ops whose values and gradients are torch's bits in every dtype: selects,
 * one subtraction, products by an f32 constant, and torch's own
 * composition of correctly rounded ops (softsign's value). */
static bool exact_y(const char *op)
{
    return !strcmp(op, "hardshrink") || !strcmp(op, "softshrink") ||
           !strcmp(op, "threshold") || !strcmp(op, "rrelu") || !strcmp(op, "softsign");
}

static bool exact_dx(const char *op)
{
    return !strcmp(op, "hardshrink") || !strcmp(op, "softshrink") ||
           !strcmp(op, "threshold") || !strcmp(op, "rrelu");
}

/* Element k of got within torch's: |got - want| <= rtol (|want| + |x| + |g|) +
 * atol, NaN matching NaN and an infinity itself (|x| and |g| scale the
 * differences that cancel: x - tanh(x), e^x - 1 near 0, glu's products).
 * Exact (and the sign of a zero) where exact. */
static void expect_elems(const char *c, const char *what, const tg_tensor *got,
                         const tg_tensor *want, const tg_tensor *x, const tg_tensor *g,
                         bool exact, double rtol, double atol)
{
    cr_assert(eq(int, tg_tensor_dtype(got), tg_tensor_dtype(want)), "%s.%s dtype", c, what);
    cr_assert(eq(i64, tg_tensor_numel(got), tg_tensor_numel(want)), "%s.%s numel", c, what);
    if (exact) {
        th_expect_same_bits(c, x, got, want);
        return;
    }
    const bool same_n = tg_tensor_numel(x) == tg_tensor_numel(got);
    for (int64_t k = 0; k < tg_tensor_numel(got); k++) {
        const double gk = th_at(got, k), wk = th_at(want, k);
        const double xk = same_n && isfinite(th_at(x, k)) ? fabs(th_at(x, k)) : 0.0;
        const double sk = fabs(th_at(g, k < tg_tensor_numel(g) ? k : 0));
        const bool ok = (isnan(gk) && isnan(wk)) || gk == wk ||
                        (isfinite(wk) && fabs(gk - wk) <= rtol * (fabs(wk) + xk + sk) + atol);
        cr_assert(ok, "%s.%s[%lld]: %.17g, torch %.17g (x %.9g)", c, what, (long long)k, gk, wk,
                  same_n ? th_at(x, k) : NAN);
    }
}

/* selu and celu: the positive side, NaN, the infinities, 0 and (a positive
 * alpha: saturated) -100 are torch's bits in value and gradient. */
static void expect_elu_exact_points(const char *c, const tg_tensor *x, const tg_tensor *y,
                                    const tg_tensor *wy, const tg_tensor *dx,
                                    const tg_tensor *wdx, bool saturates)
{
    for (int64_t k = 0; k < tg_tensor_numel(x); k++) {
        const double xk = th_at(x, k);
        if (!(xk > 0 || isnan(xk) || isinf(xk) || xk == 0 || (saturates && xk == -100)))
            continue;
        const double a = th_at(y, k), b = th_at(wy, k), da = th_at(dx, k), db = th_at(wdx, k);
        const bool same_y = (a == b && signbit(a) == signbit(b)) || (isnan(a) && isnan(b));
        const bool same_dx = da == db || (isnan(da) && isnan(db));
        cr_assert(same_y, "%s: y at x = %g is %.17g, torch %.17g", c, xk, a, b);
        cr_assert(same_dx, "%s: dx at x = %g is %.17g, torch %.17g", c, xk, da, db);
    }
}

Test(activation2, every_case_matches_torch)
{
    tg_st_file *f = th_golden_load("activation2.safetensors");
    const int n = atoi(tg_st_meta_get(f, "cases"));
    int per_dtype[3] = {0};
    for (int i = 0; i < n; i++) {
        char c[16];
        snprintf(c, sizeof c, "case%d", i);
        const char *op = th_golden_meta(f, c, "op"), *dt = th_golden_meta(f, c, "dtype");
        const double p0 = atof(th_golden_meta(f, c, "p0")), p1 = atof(th_golden_meta(f, c, "p1"));
        tg_tensor *x = th_leaf_clone(th_golden_get(f, c, "x")), *y = NULL;
        const tg_tensor *g = th_golden_get(f, c, "g");
        OK(run_op(op, &y, x, p0, p1));
        OK(tg_backward(y, (tg_tensor *)g, NULL));
        const int d = !strcmp(dt, "f64") ? 0 : !strcmp(dt, "f32") ? 1 : 2;
        /* f32: torch's Sleef exp and tanh are within an ulp; bf16: one unit
         * of its 8 bits from the f32 difference rounding the other way */
        const double rtol = d == 0 ? 1e-14 : d == 1 ? 4e-7 : 1.0 / 128;
        const double atol = d == 0 ? 1e-300 : d == 1 ? 4e-7 : 1e-2;
        char what[48];
        snprintf(what, sizeof what, "%s %s", op, dt);
        const tg_tensor *wy = th_golden_get(f, c, "y"), *wdx = th_golden_get(f, c, "dx");
        expect_elems(c, "y", y, wy, x, g, exact_y(op), rtol, atol);
        if (!strcmp(op, "glu"))   /* 1 - s cancels near s = 1: an ulp of 1 times a g */
            th_expect_close_scaled(c, tg_tensor_grad(x), wdx, rtol);
        else
            expect_elems(c, "dx", tg_tensor_grad(x), wdx, x, g, exact_dx(op), rtol, atol);
        if (!strcmp(op, "selu") || !strcmp(op, "celu"))
            expect_elu_exact_points(c, x, y, wy, tg_tensor_grad(x), wdx, p0 >= 0);
        per_dtype[d]++;
        th_release_all(2, (tg_tensor *[]){x, y});
    }
    for (int d = 0; d < 3; d++)
        cr_assert(per_dtype[d] >= 17, "dtype %d: %d cases", d, per_dtype[d]);
    tg_st_free(f);
}

/* The gradients at the kinks, as torch's: hardshrink and softshrink 0 at
 * +-lambd, threshold 0 at the threshold, selu alpha * scale (f32) and celu
 * 1 at 0; small negative x keep their value in selu and celu. */
Test(activation2, kinks_and_small_inputs)
{
    tg_tensor *x = th_vec(TG_F32, 4, (double[]){0.5, -0.5, 0.0, -1e-10}, "x", true);
    tg_tensor *y[5] = {NULL}, *l = NULL;
    OK(tg_hardshrink(&y[0], x, 0.5));
    OK(tg_softshrink(&y[1], x, 0.5));
    OK(tg_threshold(&y[2], x, 0.5, 9.0));
    OK(tg_selu(&y[3], x));
    OK(tg_celu(&y[4], x, 0.3));
    cr_assert(eq(dbl, th_at(y[0], 0), 0.0));
    cr_assert(eq(dbl, th_at(y[2], 0), 9.0));
    cr_assert(th_close(th_at(y[3], 3), -1e-10 * 1.6732632 * 1.0507010, 1e-6, 0));
    cr_assert(th_close(th_at(y[4], 3), -1e-10, 1e-6, 0));
    const double want[5][4] = {{0, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0},
                               {1.0507010221481323, 1.0663411617279053, 1.7580993175506592,
                                1.7580993175506592},
                               {1, 0.18887560283756183, 1, 1}};
    for (int o = 0; o < 5; o++) {
        tg_tensor_zero_grad(x);
        tg_tensor_release(l);
        l = NULL;
        OK(tg_sum(&l, y[o]));
        OK(tg_backward(l, NULL, NULL));
        for (int k = 0; k < 4; k++) {
            const double got = th_at(tg_tensor_grad(x), k);
            const bool ok = o >= 3 && k == 1 ? th_close(got, want[o][k], 1e-6, 0)
                                             : got == (double)(float)want[o][k];
            cr_assert(ok, "op %d x[%d]: %.17g, want %.17g", o, k, got, want[o][k]);
        }
    }
    th_release_all(5, y);
    th_release_all(2, (tg_tensor *[]){x, l});
}

typedef int (*op1)(tg_tensor **, tg_tensor *);
static int f_selu(tg_tensor **y, tg_tensor *x) { return tg_selu(y, x); }
static int f_celu(tg_tensor **y, tg_tensor *x) { return tg_celu(y, x, 0.7); }
static int f_hardshrink(tg_tensor **y, tg_tensor *x) { return tg_hardshrink(y, x, 0.375); }
static int f_softshrink(tg_tensor **y, tg_tensor *x) { return tg_softshrink(y, x, 0.375); }
static int f_threshold(tg_tensor **y, tg_tensor *x) { return tg_threshold(y, x, 0.375, -3.0); }
static int f_glu(tg_tensor **y, tg_tensor *x) { return tg_glu(y, x, 1); }
static int f_glu0(tg_tensor **y, tg_tensor *x) { return tg_glu(y, x, -2); }
static int f_softmin(tg_tensor **y, tg_tensor *x) { return tg_softmin(y, x, 1); }
static int f_softsign(tg_tensor **y, tg_tensor *x) { return tg_softsign(y, x); }
static int f_tanhshrink(tg_tensor **y, tg_tensor *x) { return tg_tanhshrink(y, x); }
static int f_rrelu(tg_tensor **y, tg_tensor *x) { return tg_rrelu(y, x, 0.1, 0.3, false); }

typedef struct named_op {
    const char *name;
    op1 f;
} named_op;
static const named_op OPS[] = {
    {"selu", f_selu},           {"celu", f_celu},           {"hardshrink", f_hardshrink},
    {"softshrink", f_softshrink}, {"threshold", f_threshold}, {"glu", f_glu},
    {"glu0", f_glu0},           {"softmin", f_softmin},     {"softsign", f_softsign},
    {"tanhshrink", f_tanhshrink}, {"rrelu", f_rrelu}};
enum { N_OPS = sizeof OPS / sizeof OPS[0] };

static int gc_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    return ((const named_op *)user)->f(out, in[0]);
}

/* Inputs away from the kinks (|x| in [0.1, 2], +-0.375 and 0 not hit). */
Test(activation2, gradcheck_and_gradgradcheck)
{
    for (int o = 0; o < N_OPS; o++) {
        uint64_t s = 71 + (uint64_t)o;
        tg_tensor *x = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){4, 6}, 0.1, 2);
        for (int64_t i = 0; i < tg_tensor_numel(x); i += 2)
            OK(tg_tensor_set_flat(x, i, -th_at(x, i)));
        for (int64_t i = 0; i < tg_tensor_numel(x); i++)
            if (fabs(fabs(th_at(x, i)) - 0.375) < 0.05) OK(tg_tensor_set_flat(x, i, 1.5));
        OK(tg_tensor_set_requires_grad(x, true));
        tg_gradcheck_opts opt = TG_GRADCHECK_OPTS_INIT;
        cr_assert(eq(int, tg_gradcheck(gc_fn, (void *)&OPS[o], 1, &x, &opt), TG_OK), "%s: %s",
                  OPS[o].name, tg_error_message());
        cr_assert(eq(int, tg_gradgradcheck(gc_fn, (void *)&OPS[o], 1, &x, &opt), TG_OK),
                  "%s: %s", OPS[o].name, tg_error_message());
        tg_tensor_release(x);
    }
}

/* The registered ops on f16 and bf16: the f32 op's value and gradient
 * rounded once (torch's bf16 kernels compute in f32 and round the result);
 * the parameters (0.375, -3) are exact in both, as the shrink ops convert
 * them to x's dtype. */
Test(activation2, half_dtypes_are_the_f32_op_rounded_once)
{
    const tg_dtype hs[2] = {TG_BF16, TG_F16};
    for (int h = 0; h < 2; h++)
        for (int o = 0; o < 7; o++) {   /* the registered ops: selu ... glu0 */
            uint64_t s = 91 + (uint64_t)o;
            tg_tensor *xr = th_rand_tensor(&s, TG_F32, 2, (int64_t[]){8, 64}, -6, 6);
            tg_tensor *xh = NULL, *x32 = NULL, *y = NULL, *y32 = NULL, *want = NULL;
            OK(tg_tensor_to_dtype(&xh, xr, hs[h]));
            OK(tg_tensor_to_dtype(&x32, xh, TG_F32));
            OK(tg_tensor_set_requires_grad(xh, true));
            OK(tg_tensor_set_requires_grad(x32, true));
            OK(OPS[o].f(&y, xh));
            OK(OPS[o].f(&y32, x32));
            OK(tg_tensor_to_dtype(&want, y32, hs[h]));
            th_expect_same_bits(OPS[o].name, xh, y, want);
            if (o < 5) {   /* the glu gradient rounds after each product, as torch's */
                tg_tensor *gh = NULL, *g32 = NULL, *wdx = NULL;
                uint64_t s2 = 7;
                tg_tensor *gr = th_rand_tensor(&s2, TG_F32, 2, (int64_t[]){8, 64}, -2, 2);
                OK(tg_tensor_to_dtype(&gh, gr, hs[h]));
                OK(tg_tensor_to_dtype(&g32, gh, TG_F32));
                OK(tg_backward(y, gh, NULL));
                OK(tg_backward(y32, g32, NULL));
                OK(tg_tensor_to_dtype(&wdx, tg_tensor_grad(x32), hs[h]));
                th_expect_same_bits(OPS[o].name, xh, tg_tensor_grad(xh), wdx);
                th_release_all(4, (tg_tensor *[]){gh, g32, wdx, gr});
            }
            th_release_all(6, (tg_tensor *[]){xr, xh, x32, y, y32, want});
        }
}

/* Every bf16 value through selu and celu (subnormals, the largest values
 * and the specials included): the f32 op's result rounded once to bf16, as
 * torch's bf16 kernel rounds its f32 result. */
Test(activation2, every_bf16_value_rounds_through_f32)
{
    tg_tensor *x = NULL, *x32 = NULL;
    double *v = malloc(65536 * sizeof *v);
    for (int i = 0; i < 65536; i++) {
        const uint32_t u = (uint32_t)i << 16;
        float f;
        memcpy(&f, &u, sizeof f);
        v[i] = f;
    }
    x32 = th_tensor_from(TG_F32, 1, (int64_t[]){65536}, v);
    OK(tg_tensor_to_dtype(&x, x32, TG_BF16));
    for (int o = 0; o < 2; o++) {
        tg_tensor *y = NULL, *y32 = NULL, *want = NULL;
        OK(OPS[o].f(&y, x));
        OK(OPS[o].f(&y32, x32));
        OK(tg_tensor_to_dtype(&want, y32, TG_BF16));
        th_expect_same_bits(OPS[o].name, x, y, want);
        th_release_all(3, (tg_tensor *[]){y, y32, want});
    }
    free(v);
    th_release_all(2, (tg_tensor *[]){x, x32});
}

/* softsign and tanhshrink of integers are f32 and threshold's keep their
 * dtype, as torch's (values from torch 1.13); the other ops refuse integers
 * naming themselves. */
Test(activation2, integer_inputs)
{
    tg_tensor *xf = th_vec(TG_F32, 4, (double[]){1, 2, 3, 0}, "x", false), *xi = NULL;
    OK(tg_tensor_to_dtype(&xi, xf, TG_I32));
    tg_tensor *y = NULL;
    OK(tg_softsign(&y, xi));
    cr_assert(eq(int, tg_tensor_dtype(y), TG_F32));
    const double ss[4] = {0.5, 0.6666666865348816, 0.75, 0.0};
    for (int k = 0; k < 4; k++) cr_assert(eq(dbl, th_at(y, k), ss[k]));
    tg_tensor_release(y);
    y = NULL;
    OK(tg_tanhshrink(&y, xi));
    cr_assert(eq(int, tg_tensor_dtype(y), TG_F32));
    const double ts[4] = {0.23840582370758057, 1.0359723567962646, 2.0049452781677246, 0.0};
    for (int k = 0; k < 4; k++) cr_assert(eq(dbl, th_at(y, k), ts[k]), "%d: %.17g", k, th_at(y, k));
    tg_tensor_release(y);
    /* threshold keeps the integer dtype, as torch's: the threshold and
     * value truncated (torch 1.13's values) */
    tg_tensor *ti = th_vec(TG_F64, 5, (double[]){-2, -1, 0, 1, 2}, "ti", false), *t64 = NULL;
    const double want[3][5] = {{7, 7, 0, 1, 2}, {7, 7, 7, 7, 2}, {1e10, 1e10, 1e10, 1e10, 2}};
    const double args[3][2] = {{-1.5, 7.0}, {1.5, 7.7}, {1.5, 1e10}};
    OK(tg_tensor_to_dtype(&t64, ti, TG_I64));
    for (int c = 0; c < 3; c++) {
        OK(tg_threshold(&y, t64, args[c][0], args[c][1]));
        cr_assert(eq(int, tg_tensor_dtype(y), TG_I64));
        for (int k = 0; k < 5; k++) cr_assert(eq(dbl, th_at(y, k), want[c][k]), "%d %d", c, k);
        tg_tensor_release(y);
    }
    y = NULL;
    OK(tg_threshold(&y, xi, -1e30, 5.0));   /* below the range: nothing replaced */
    th_expect_same_bits("threshold i32", xi, y, xi);
    tg_tensor_release(y);
    y = NULL;
    OK(tg_threshold(&y, xi, 1e30, -5.0));   /* above: everything */
    for (int k = 0; k < 4; k++) cr_assert(eq(dbl, th_at(y, k), -5.0));
    tg_tensor_release(y);
    y = NULL;
    th_expect_refused(tg_threshold(&y, xi, 0.5, 1e10), TG_EINVAL,
                      "threshold: value=1e+10 must fit in x's dtype i32", y);
    th_expect_refused(tg_threshold(&y, xi, NAN, 1.0), TG_EINVAL, "threshold must not be NaN", y);
    th_release_all(2, (tg_tensor *[]){ti, t64});
    for (int o = 0; o < N_OPS; o++) {
        if (o == 4 || o == 8 || o == 9) continue;   /* threshold, softsign, tanhshrink */
        tg_tensor *z = NULL;
        const char *name = strcmp(OPS[o].name, "glu0") ? OPS[o].name : "glu";
        th_expect_refused(OPS[o].f(&z, xi), TG_EDTYPE, name, z);
    }
    th_release_all(2, (tg_tensor *[]){xf, xi});
}

Test(activation2, refusals_name_the_argument_and_rule)
{
    uint64_t s = 5;
    tg_tensor *x = th_rand_tensor(&s, TG_F32, 2, (int64_t[]){2, 3}, -1, 1), *z = NULL;
    for (int o = 0; o < N_OPS; o++) {
        const char *name = strcmp(OPS[o].name, "glu0") ? OPS[o].name : "glu";
        th_expect_refused(OPS[o].f(NULL, x), TG_EINVAL, name, NULL);
        th_expect_refused(OPS[o].f(&z, NULL), TG_EINVAL, name, z);
    }
    th_expect_refused(tg_celu(&z, x, 0.0), TG_EINVAL, "celu: alpha=0 must be finite and not 0", z);
    th_expect_refused(tg_celu(&z, x, INFINITY), TG_EINVAL, "alpha=inf", z);
    th_expect_refused(tg_celu(&z, x, NAN), TG_EINVAL, "alpha=nan", z);
    th_expect_refused(tg_softshrink(&z, x, -1.0), TG_EINVAL, "softshrink: lambd=-1 must be >= 0",
                      z);
    th_expect_refused(tg_softshrink(&z, x, NAN), TG_EINVAL, "lambd=nan", z);
    th_expect_refused(tg_hardshrink(&z, x, NAN), TG_EINVAL, "hardshrink: lambd must not be NaN",
                      z);
    th_expect_refused(tg_glu(&z, x, 1), TG_ESHAPE, "glu: x's extent along dim 1 is 3", z);
    th_expect_refused(tg_glu(&z, x, 2), TG_EINVAL, "glu: dim=2 must be in [-2, 2)", z);
    th_expect_refused(tg_glu(&z, x, -3), TG_EINVAL, "dim=-3", z);
    th_expect_refused(tg_softmin(&z, x, 2), TG_EINVAL, "dim=2", z);
    th_expect_refused(tg_rrelu(&z, x, 0.3, 0.1, false), TG_EINVAL,
                      "rrelu: lower=0.3 must be <= upper=0.1", z);
    th_expect_refused(tg_rrelu(&z, x, NAN, 0.1, false), TG_EINVAL, "lower=nan", z);
    th_expect_refused(tg_rrelu(&z, x, 0.1, 0.3, true), TG_EINVAL, "training=true", z);
    tg_tensor *x0 = th_vec(TG_F32, 1, (double[]){2.0}, "x0", false), *sc = NULL;
    OK(tg_reshape(&sc, x0, 0, NULL));
    th_expect_refused(tg_glu(&z, sc, 0), TG_EINVAL, "glu: x must have at least 1 dim", z);
    /* allowed, as torch: a negative hardshrink lambd (nothing zeroed), an
     * infinite one (everything), any threshold and value */
    OK(tg_hardshrink(&z, x, -1.0));
    th_expect_same_bits("hardshrink(-1)", x, z, x);
    tg_tensor_release(z);
    z = NULL;
    OK(tg_softmin(&z, sc, 0));
    cr_assert(eq(dbl, th_at(z, 0), 1.0));
    th_release_all(4, (tg_tensor *[]){x, z, x0, sc});
}
