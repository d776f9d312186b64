/* tests/test_special.c - logaddexp, logaddexp2, xlogy, xlog1py, hypot,
 * erfc, erfinv, logit, sinc, lgamma, digamma and polygamma: values and
 * gradients against PyTorch in f32, f64 and bf16 (every pair of special
 * values for the binary ops, broadcasting, each op's edges), erfinv and
 * polygamma against their true values (mpmath), integer inputs, f16,
 * derivatives to second order by finite differences, the AMP policies and
 * the refusals (nansum, nanmean, count_nonzero: tests/test_nan_reduce.c).  Goldens: scripts/make_special_goldens.py. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

typedef int (*binary_fn)(tg_tensor **, tg_tensor *, tg_tensor *);
typedef int (*unary_fn)(tg_tensor **, tg_tensor *);

static const struct {
    const char *name;
    binary_fn f;
    double lo, hi;   /* gradcheck inputs */
} bins[] = {
    {"logaddexp", tg_logaddexp, -2, 2}, {"logaddexp2", tg_logaddexp2, -2, 2},
    {"xlogy", tg_xlogy, 0.5, 3},        {"xlog1py", tg_xlog1py, 0.5, 3},
    {"hypot", tg_hypot, 0.5, 3},        {"copysign", tg_copysign, 0.5, 3},
};
#define NBIN ((int)(sizeof bins / sizeof bins[0]))

static int logit_none(tg_tensor **out, tg_tensor *x) { return tg_logit(out, x, NAN); }
static int logit_eps0(tg_tensor **out, tg_tensor *x) { return tg_logit(out, x, 0.0); }
static int logit_eps01(tg_tensor **out, tg_tensor *x) { return tg_logit(out, x, 0.1); }
static int logit_epsm01(tg_tensor **out, tg_tensor *x) { return tg_logit(out, x, -0.1); }
static int polygamma1(tg_tensor **out, tg_tensor *x) { return tg_polygamma(out, 1, x); }
static int polygamma2(tg_tensor **out, tg_tensor *x) { return tg_polygamma(out, 2, x); }
static int polygamma3(tg_tensor **out, tg_tensor *x) { return tg_polygamma(out, 3, x); }

static const struct {
    const char *name, *op;
    unary_fn f;
    double lo, hi;
} uns[] = {
    {"erfc", "erfc", tg_erfc, -2, 2},           {"erfinv", "erfinv", tg_erfinv, -0.9, 0.9},
    {"logit", "logit", logit_none, 0.2, 0.8},   {"logit_eps0", "logit", logit_eps0, 0.2, 0.8},
    {"logit_eps01", "logit", logit_eps01, 0.2, 0.8},
    {"logit_epsm01", "logit", logit_epsm01, 0.2, 0.8}, {"sinc", "sinc", tg_sinc, 0.3, 2},
    {"lgamma", "lgamma", tg_lgamma, 0.5, 4},    {"digamma", "digamma", tg_digamma, 0.5, 4},
    {"polygamma1", "polygamma", polygamma1, 0.5, 4},
    {"polygamma2", "polygamma", polygamma2, 0.5, 4},
    {"polygamma3", "polygamma", polygamma3, 0.5, 4},
    {"frac", "frac", tg_frac, 0.1, 0.9},
};
#define NUN ((int)(sizeof uns / sizeof uns[0]))

/* The spacing of dt's values at v (at least at the smallest normal). */
static double ulp_of(tg_dtype dt, double v)
{
    const int bits = dt == TG_F64 ? 52 : dt == TG_F32 ? 23 : 7;
    const double tiny = dt == TG_F64 ? 0x1p-1022 : 0x1p-126;
    int e;
    frexp(fmax(fabs(v), tiny), &e);
    return ldexp(1.0, e - 1 - bits);
}

/* The element of the last max_ulps' largest difference, for messages. */
static int64_t worst;
static double worst_got, worst_want;
#define AT " at [%lld]: %.17g, torch %.17g"
#define AT_ARGS (long long)worst, worst_got, worst_want

/* The largest |got - want| over got's elements in ulps of
 * max(|want|, scale, |sc[k]|) (sc: NULL, or a tensor of got's shape),
 * skipping the elements where x[k] < xlo or x[k] > xhi (x: NULL or of
 * got's shape).
 * NaN must match NaN and an infinity itself (else INFINITY). */
static double max_ulps_by(const tg_tensor *got, const tg_tensor *want, double scale,
                          const tg_tensor *sc, const tg_tensor *x, double xlo, double xhi)
{
    worst = -1;
    cr_assert(eq(int, tg_tensor_dtype(got), tg_tensor_dtype(want)));
    cr_assert(tg_tensor_same_shape(got, want));
    const tg_dtype dt = tg_tensor_dtype(want);
    double m = 0;
    for (int64_t k = 0; k < tg_tensor_numel(want); k++) {
        const double g = th_at(got, k), w = th_at(want, k);
        if (x && (th_at(x, k) < xlo || th_at(x, k) > xhi)) continue;
        if (isnan(w) || isnan(g) || isinf(w) || isinf(g)) {
            if (!(isnan(w) && isnan(g)) && g != w) {
                worst = k, worst_got = g, worst_want = w;
                return INFINITY;
            }
            continue;
        }
        double v = fmax(fabs(w), scale);
        if (sc && isfinite(th_at(sc, k))) v = fmax(v, fabs(th_at(sc, k)));
        const double u = fabs(g - w) / ulp_of(dt, v);
        if (u > m) m = u, worst = k, worst_got = g, worst_want = w;
    }
    return m;
}

static double max_ulps(const tg_tensor *got, const tg_tensor *want, double scale)
{
    return max_ulps_by(got, want, scale, NULL, NULL, 0, 0);
}

/* The largest finite |t[k]| where x[k] lies in [xlo, xhi] (x NULL: all). */
static double max_abs_in(const tg_tensor *t, const tg_tensor *x, double xlo, double xhi)
{
    double m = 0;
    for (int64_t k = 0; k < tg_tensor_numel(t); k++)
        if (isfinite(th_at(t, k)) && !(x && (th_at(x, k) < xlo || th_at(x, k) > xhi)))
            m = fmax(m, fabs(th_at(t, k)));
    return m;
}

static double max_abs(const tg_tensor *t)
{
    return max_abs_in(t, NULL, 0, 0);
}

static const char *const dts[] = {"f64", "f32", "bf16"};

/* The bounds, in ulps: values relative to each value, gradients relative
 * to the largest gradient of the case (sums over broadcast dims and the
 * cancelling terms of sinc's gradient). */
static const double val_ulps[3] = {2, 2, 1}, grad_ulps[3] = {4, 4, 2};

/* Each binary op's golden cases (every pair of specials plus random, and
 * broadcast (3, 1) with (4)) in f64, f32 and bf16. */
Test(special, binary_ops_match_torch)
{
    tg_st_file *f = th_golden_load("special.safetensors");
    for (int i = 0; i < NBIN; i++)
        for (int bc = 0; bc < 2; bc++)
            for (int d = 0; d < 3; d++) {
                char p[64];
                snprintf(p, sizeof p, "%s%s.%s", bins[i].name, bc ? "_bc" : "", dts[d]);
                tg_tensor *a = th_leaf_clone(th_golden_get(f, p, "a"));
                tg_tensor *b = th_leaf_clone(th_golden_get(f, p, "b")), *y = NULL;
                OK(bins[i].f(&y, a, b));
                th_backward_with(y, th_golden_get(f, p, "g"));
                /* logaddexp's max(a, b) + log1p(...) cancels where the
                 * result is near 0: ulps of max(|a|, |b|) there */
                tg_tensor *sc = NULL, *aa = NULL, *ab = NULL;
                if (i < 2) {
                    OK(tg_abs(&aa, (tg_tensor *)th_golden_get(f, p, "a")));
                    OK(tg_abs(&ab, (tg_tensor *)th_golden_get(f, p, "b")));
                    OK(tg_maximum(&sc, aa, ab));
                }
                const double u = max_ulps_by(y, th_golden_get(f, p, "out"), 0, sc, NULL, 0, 0);
                cr_assert(u <= val_ulps[d], "%s out: %g ulps" AT, p, u, AT_ARGS);
                const char *dn[2] = {"da", "db"};
                tg_tensor *x[2] = {a, b};
                for (int k = 0; k < 2; k++) {
                    const tg_tensor *w = th_golden_get(f, p, dn[k]);
                    const double ug = max_ulps(tg_tensor_grad(x[k]), w, max_abs(w));
                    cr_assert(ug <= grad_ulps[d], "%s %s: %g ulps" AT, p, dn[k], ug, AT_ARGS);
                }
                th_release_all(6, (tg_tensor *[]){a, b, y, sc, aa, ab});
            }
    tg_st_free(f);
}

/* Each unary op (logit also with eps 0, 0.1 and -0.1, torch's None) on
 * +-0, +-inf, NaN, its edges and random values. */
Test(special, unary_ops_match_torch)
{
    tg_st_file *f = th_golden_load("special.safetensors");
    for (int i = 0; i < NUN; i++)
        for (int d = 0; d < 3; d++) {
            char p[64];
            snprintf(p, sizeof p, "%s.%s", uns[i].name, dts[d]);
            tg_tensor *x = th_leaf_clone(th_golden_get(f, p, "x")), *y = NULL;
            OK(uns[i].f(&y, x));
            th_backward_with(y, th_golden_get(f, p, "g"));
            /* erfinv: torch's is 3 (f32) and 4 (f64) ulps off the true
             * value at 0.99, 127 ulps (f32) and 6e-5 relative (f64) near 1,
             * tapegrad's within an ulp (erfinv_within_an_ulp_of_the_truth);
             * so torch's up to |x| = 0.9.  polygamma: torch's values for
             * x > 0 only (its f32 reflection loses digits, its trigamma is
             * finite at the negative integers: polygamma_near_the_truth
             * checks there), and not at +inf, where its zeta gives NaN
             * for n >= 2 (tapegrad: the limit, 0) */
            const bool inv = !strcmp(uns[i].op, "erfinv") && d < 2;
            const bool pg = !strcmp(uns[i].op, "polygamma") || !strcmp(uns[i].op, "digamma");
            /* bf16: torch rounds logit's x / (1 - x) to bf16 before the
             * log, and sinc's pi, pi x, sine and quotient, where tapegrad
             * computes in f32 and rounds once: ulps of 1 near their zeros
             * (logit at 0.5, sinc at integers), and sinc only up to
             * |x| = 10 (at 1e10 the two have nothing in common) */
            const bool sb = d == 2 && !strcmp(uns[i].op, "sinc");
            const double sc = d == 2 && (sb || !strcmp(uns[i].op, "logit")) ? 1 : 0;
            const double xlo = inv ? -0.9 : sb ? -10 : pg ? 0 : -INFINITY;
            const double xhi = inv ? 0.9 : sb ? 10 : pg ? DBL_MAX : INFINITY;
            const bool filter = inv || sb || pg;
            /* torch's trigamma (polygamma 1, and digamma's gradient) is a
             * short series, 5e-10 relative off in f64 */
            const bool tri = d == 0 && (!strcmp(uns[i].name, "polygamma1") ||
                                        !strcmp(uns[i].op, "digamma"));
            /* torch's lgamma (Sleef's) and glibc's part by up to 3 ulps;
             * torch's zeta (polygamma n >= 2) is up to 7 ulps off the true
             * value in f64, tapegrad's 5 */
            const double vb = !strcmp(uns[i].name, "polygamma1") && d == 0 ? 0x1p23
                            : !strcmp(uns[i].op, "lgamma") && d < 2 ? 4
                            : !strcmp(uns[i].op, "polygamma") && d == 0 ? 8 : val_ulps[d];
            /* digamma's values are torch's at every x, only its gradient
             * (trigamma) is filtered */
            const bool dg = !strcmp(uns[i].op, "digamma");
            const double u = max_ulps_by(y, th_golden_get(f, p, "y"), sc, NULL,
                                         filter && !dg ? x : NULL, xlo, xhi);
            cr_assert(u <= vb, "%s y: %g ulps" AT, p, u, AT_ARGS);
            const tg_tensor *w = th_golden_get(f, p, "dx");
            const tg_tensor *fx = filter ? x : NULL;
            /* sinc's gradient is (px cos px - sin px) g / (pi x^2), whose
             * terms (each rounded) cancel near 0: ulps of |g / x| there */
            tg_tensor *gx = NULL, *sgx = NULL;
            if (!strcmp(uns[i].op, "sinc")) {
                OK(tg_div(&gx, (tg_tensor *)th_golden_get(f, p, "g"), x));
                OK(tg_abs(&sgx, gx));
            }
            const double ug = max_ulps_by(tg_tensor_grad(x), w, max_abs_in(w, fx, xlo, xhi), sgx,
                                          fx, xlo, xhi);
            th_release_all(2, (tg_tensor *[]){gx, sgx});
            cr_assert(ug <= (tri ? 0x1p23 : grad_ulps[d]), "%s dx: %g ulps" AT, p, ug, AT_ARGS);
            th_release_all(2, (tg_tensor *[]){x, y});
        }
    tg_st_free(f);
}

/* erfinv within an ulp of the true value (mpmath at 60 digits) in f64,
 * also at 1 - 2^-k for k up to 53 and at tiny values, and in f32 (the true
 * value rounded to f32) up to 1 - 2^-24. */
Test(special, erfinv_within_an_ulp_of_the_truth)
{
    tg_st_file *f = th_golden_load("special.safetensors");
    const char *const cases[2] = {"erfinv_ref", "erfinv_ref32"};
    for (int c = 0; c < 2; c++) {
        const tg_tensor *x = th_golden_get(f, cases[c], "x");
        tg_tensor *y = NULL;
        OK(tg_erfinv(&y, (tg_tensor *)x));
        const double u = max_ulps(y, th_golden_get(f, cases[c], "y"), 0);
        cr_assert(u <= 1, "%s: %g ulps off the true values" AT, cases[c], u, AT_ARGS);
        tg_tensor_release(y);
    }
    tg_st_free(f);
}

/* heaviside at every pair of +-0, +-inf, NaN, +-1, 2.5 and -3 and at
 * integers, in f32, f64, bf16 and f16: torch's values exactly (NaN gives
 * 0); broadcast (3, 1) with (4); the result is not recorded. */
Test(special, heaviside_matches_torch)
{
    tg_st_file *f = th_golden_load("special.safetensors");
    static const char *const hd[4] = {"f64", "f32", "bf16", "f16"};
    for (int d = 0; d < 4; d++) {
        char p[32];
        snprintf(p, sizeof p, "heaviside.%s", hd[d]);
        tg_tensor *x = th_leaf_clone(th_golden_get(f, p, "x")), *y = NULL;
        OK(tg_heaviside(&y, x, (tg_tensor *)th_golden_get(f, p, "values")));
        th_expect_close(p, y, th_golden_get(f, p, "out"), 0);
        cr_assert(tg_tensor_is_leaf(y) && !tg_tensor_requires_grad(y), "%s is recorded", p);
        th_release_all(2, (tg_tensor *[]){x, y});
    }
    tg_tensor *a = th_tensor_from(TG_F32, 2, (int64_t[]){3, 1}, (double[]){-1, 0, 2});
    tg_tensor *v = th_tensor_from(TG_F32, 1, (int64_t[]){4}, (double[]){0.5, 7, -1, 0});
    tg_tensor *y = NULL;
    OK(tg_heaviside(&y, a, v));
    th_expect_shape(y, 2, (int64_t[]){3, 4});
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++)
            cr_assert(eq(dbl, th_at(y, i * 4 + j), i == 0 ? 0 : i == 2 ? 1 : th_at(v, j)));
    th_release_all(3, (tg_tensor *[]){a, v, y});
    tg_st_free(f);
}

/* polygamma(n, x) for n = 1, 2, 3, 5, 10 against the true values
 * (mpmath at 50 digits) for x in (0.01, 40), at 1e-8 and 1e8 and at
 * negative non-integers down to -1000.75 (the reflection): within 6 ulps
 * for n <= 5 and 16 for n = 10.  (torch's trigamma is 3.8e6 ulps off at
 * 1.5, its polygamma(10, x) 29 ulps for x > 0.) */
Test(special, polygamma_near_the_truth)
{
    tg_st_file *f = th_golden_load("special.safetensors");
    tg_tensor *x = (tg_tensor *)th_golden_get(f, "gamma_ref", "x");
    static const int ns[5] = {1, 2, 3, 5, 10};
    for (int i = 0; i < 5; i++) {
        char c[16];
        snprintf(c, sizeof c, "pg%d", ns[i]);
        tg_tensor *y = NULL;
        OK(tg_polygamma(&y, ns[i], x));
        const double u = max_ulps(y, th_golden_get(f, "gamma_ref", c), 0);
        cr_assert(u <= (ns[i] <= 5 ? 6 : 16), "polygamma(%d): %g ulps" AT, ns[i], u, AT_ARGS);
        tg_tensor_release(y);
    }
    tg_st_free(f);
}

/* Integer operands, as torch's: f32 results of the integers converted to
 * f32, not recorded; logaddexp, logaddexp2 and hypot refuse them. */
Test(special, integer_inputs)
{
    tg_st_file *f = th_golden_load("special.safetensors");
    tg_tensor *x = (tg_tensor *)th_golden_get(f, "int", "x");
    tg_tensor *yi = (tg_tensor *)th_golden_get(f, "int", "y"), *y = NULL;
    const struct {
        const char *name;
        binary_fn b;
        unary_fn u;
    } cases[] = {{"xlogy", tg_xlogy, NULL}, {"xlog1py", tg_xlog1py, NULL},
                 {"erfc", NULL, tg_erfc},   {"erfinv", NULL, tg_erfinv},
                 {"logit", NULL, logit_none}, {"sinc", NULL, tg_sinc},
                 {"lgamma", NULL, tg_lgamma}, {"digamma", NULL, tg_digamma},
                 {"polygamma2", NULL, polygamma2}, {"copysign", tg_copysign, NULL}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        OK(cases[i].b ? cases[i].b(&y, x, yi) : cases[i].u(&y, x));
        const double u = max_ulps(y, th_golden_get(f, "int", cases[i].name), 0);
        cr_assert(u <= 1, "%s of integers: %g ulps", cases[i].name, u);
        cr_assert(tg_tensor_is_leaf(y) && !tg_tensor_requires_grad(y), "%s", cases[i].name);
        tg_tensor_release(y);
        y = NULL;
    }
    /* an integer with a float: the float's dtype, the float's gradient */
    tg_tensor *xd = NULL, *l = NULL;
    OK(tg_to_dtype(&xd, x, TG_F64));
    OK(tg_tensor_set_requires_grad(xd, true));
    OK(tg_xlogy(&y, xd, yi));
    cr_assert(eq(int, tg_tensor_dtype(y), TG_F64));
    OK(tg_sum(&l, y));
    OK(tg_backward(l, NULL, NULL));
    cr_assert(tg_tensor_grad(xd) != NULL);
    th_release_all(3, (tg_tensor *[]){xd, y, l});
    const binary_fn refusing[3] = {tg_logaddexp, tg_logaddexp2, tg_hypot};
    const char *const names[3] = {"logaddexp: input 0 has dtype i32",
                                  "logaddexp2: input 0 has dtype i32",
                                  "hypot: input 0 has dtype i32"};
    for (int i = 0; i < 3; i++) {
        y = NULL;
        th_expect_refused(refusing[i](&y, x, yi), TG_EDTYPE, names[i], y);
    }
    th_expect_refused(tg_frac(&y, x), TG_EDTYPE, "frac: input 0 has dtype i32", y);
    /* heaviside of two i32 tensors: i32, torch's integers */
    OK(tg_heaviside(&y, x, yi));
    th_expect_same_tensor_bytes("heaviside(i32)", y, th_golden_get(f, "int", "heaviside"));
    tg_tensor_release(y);
    tg_st_free(f);
}

static int apply_bin(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    return bins[*(const int *)user].f(out, in[0], in[1]);
}

static int apply_un(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    return uns[*(const int *)user].f(out, in[0]);
}

/* f64 first and second derivatives by finite differences: the binary ops
 * with a (3, 1) and b (4) broadcast, the unary ones on (3, 4). */
Test(special, gradcheck_and_gradgradcheck)
{
    uint64_t s = 97;
    for (int i = 0; i < NBIN; i++) {
        tg_tensor *in[2] = {
            th_rand_tensor(&s, TG_F64, 2, (int64_t[]){3, 1}, bins[i].lo, bins[i].hi),
            th_rand_tensor(&s, TG_F64, 1, (int64_t[]){4}, bins[i].lo, bins[i].hi)};
        for (int k = 0; k < 2; k++) OK(tg_tensor_set_requires_grad(in[k], true));
        th_expect_gradchecks(apply_bin, &i, 2, in, "%s", bins[i].name);
        th_release_all(2, in);
    }
    for (int i = 0; i < NUN; i++) {
        tg_tensor *x = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){3, 4}, uns[i].lo, uns[i].hi);
        OK(tg_tensor_set_requires_grad(x, true));
        th_expect_gradchecks(apply_un, &i, 1, &x, "%s", uns[i].name);
        tg_tensor_release(x);
    }
}

/* f16 (which torch 1.13's CPU kernels of these ops refuse) is the f32
 * kernel on the f16 values, rounded once. */
Test(special, f16_is_the_f32_kernel_rounded_once)
{
    tg_tensor *a = th_seq(TG_F16, 1, (int64_t[]){64}, 0.01, 0.99);
    tg_tensor *b = th_seq(TG_F16, 1, (int64_t[]){64}, -3, 3), *a32 = NULL, *b32 = NULL;
    OK(tg_to_dtype(&a32, a, TG_F32));
    OK(tg_to_dtype(&b32, b, TG_F32));
    for (int i = 0; i < NBIN + NUN; i++) {
        tg_tensor *y = NULL, *y32 = NULL, *want = NULL;
        if (i < NBIN) {
            OK(bins[i].f(&y, b, a));
            OK(bins[i].f(&y32, b32, a32));
        } else {
            OK(uns[i - NBIN].f(&y, a));
            OK(uns[i - NBIN].f(&y32, a32));
        }
        OK(tg_to_dtype(&want, y32, TG_F16));
        th_expect_close(i < NBIN ? bins[i].name : uns[i - NBIN].name, y, want, 0);
        th_release_all(3, (tg_tensor *[]){y, y32, want});
    }
    th_release_all(4, (tg_tensor *[]){a, b, a32, b32});
}

/* PROMOTE for the binary ops (two float dtypes promote, as torch's), FP32
 * for erfinv (on PyTorch's CUDA autocast fp32 list), KEEP for the rest
 * (no autocast list of torch has them);
 * each with a double backward. */
Test(special, amp_policies)
{
    const char *const names[] = {"logaddexp", "logaddexp2", "xlogy",    "xlog1py",
                                 "hypot",     "erfc",       "erfinv",   "logit",
                                 "sinc",      "lgamma",     "digamma",  "polygamma",
                                 "frac",      "copysign"};
    const tg_amp_policy want[] = {TG_AMP_PROMOTE, TG_AMP_PROMOTE, TG_AMP_PROMOTE,
                                  TG_AMP_PROMOTE, TG_AMP_PROMOTE, TG_AMP_KEEP,
                                  TG_AMP_FP32,    TG_AMP_KEEP,    TG_AMP_KEEP,
                                  TG_AMP_KEEP,    TG_AMP_KEEP,    TG_AMP_KEEP,
                                  TG_AMP_KEEP,    TG_AMP_PROMOTE};
    for (int i = 0; i < 14; i++) {
        tg_op_info info;
        OK(tg_op_info_find(names[i], &info));
        cr_assert(eq(int, info.amp, want[i]), "%s", names[i]);
        cr_assert(info.has_backward && info.has_double_backward, "%s", names[i]);
    }
    tg_tensor *a = th_seq(TG_F32, 1, (int64_t[]){3}, 0.1, 0.9);
    tg_tensor *b = th_seq(TG_F64, 1, (int64_t[]){3}, 0.1, 0.9), *y = NULL;
    for (int i = 0; i < NBIN; i++) {
        OK(bins[i].f(&y, a, b));
        cr_assert(eq(int, tg_tensor_dtype(y), TG_F64), "%s", bins[i].name);
        tg_tensor_release(y);
        y = NULL;
    }
    th_release_all(2, (tg_tensor *[]){a, b});
}

/* NULL operands (named), shapes that do not broadcast, polygamma's n
 * outside [0, 160]; *out stays NULL. */
Test(special, refusals)
{
    tg_tensor *a = th_seq(TG_F32, 1, (int64_t[]){3}, 0.1, 0.9);
    tg_tensor *b = th_seq(TG_F32, 1, (int64_t[]){4}, 0.1, 0.9), *y = NULL;
    for (int i = 0; i < NBIN; i++) {
        char want[64];
        snprintf(want, sizeof want, "%s: input 0 is NULL", bins[i].name);
        th_expect_refused(bins[i].f(&y, NULL, a), TG_EINVAL, want, y);
        snprintf(want, sizeof want, "%s: input 1 is NULL", bins[i].name);
        th_expect_refused(bins[i].f(&y, a, NULL), TG_EINVAL, want, y);
        th_expect_refused(bins[i].f(&y, a, b), TG_ESHAPE, bins[i].name, y);
        th_expect_refused(bins[i].f(NULL, a, a), TG_EINVAL, "out", y);
    }
    for (int i = 0; i < NUN; i++) {
        char want[64];
        snprintf(want, sizeof want, "%s: input 0 is NULL", uns[i].op);
        th_expect_refused(uns[i].f(&y, NULL), TG_EINVAL, want, y);
        th_expect_refused(uns[i].f(NULL, a), TG_EINVAL, "out", y);
    }
    th_expect_refused(tg_polygamma(&y, -1, a), TG_EINVAL, "polygamma: n=-1", y);
    tg_tensor *d = th_seq(TG_F64, 1, (int64_t[]){3}, 0.1, 0.9);
    th_expect_refused(tg_heaviside(&y, a, d), TG_EDTYPE, "heaviside: input has dtype f32", y);
    th_expect_refused(tg_heaviside(&y, NULL, a), TG_EINVAL, "heaviside", y);
    th_expect_refused(tg_heaviside(&y, a, b), TG_ESHAPE, "heaviside", y);
    tg_tensor_release(d);
    th_expect_refused(tg_polygamma(&y, 161, a), TG_EINVAL, "polygamma: n=161", y);
    th_release_all(2, (tg_tensor *[]){a, b});
}
