/* tests/test_init_trunc_orthogonal.c - torch.nn.init's trunc_normal_ and
 * orthogonal_ (tapegrad/init.h): trunc_normal_ against the truncated
 * normal's moments and cdf, in every float dtype and seeded; orthogonal_'s
 * orthogonality and torch's sign convention, in every float dtype, on views
 * and leaves; and the errors of both that name the argument. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "init_fixtures.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

/* ---- trunc_normal_ ------------------------------------------------------------ */

static double phi(double x) { return exp(-0.5 * x * x) / sqrt(2 * M_PI); }
static double Phi(double x) { return 0.5 * erfc(-x / sqrt(2.0)); }

/* The mean and standard deviation of N(mu, s^2) truncated to [a, b]: with
 * alpha = (a - mu) / s, beta likewise and Z = Phi(beta) - Phi(alpha),
 *   mean = mu + s (phi(alpha) - phi(beta)) / Z,
 *   var  = s^2 (1 + (alpha phi(alpha) - beta phi(beta)) / Z
 *               - ((phi(alpha) - phi(beta)) / Z)^2).
 * For an interval in the upper tail Z is taken by symmetry as
 * Phi(-alpha) - Phi(-beta), where it keeps its digits. */
static void trunc_moments(double mu, double s, double a, double b, double *mean, double *sd)
{
    const double al = (a - mu) / s, be = (b - mu) / s;
    const double Z = al > 0 ? Phi(-al) - Phi(-be) : Phi(be) - Phi(al);
    const double d = (phi(al) - phi(be)) / Z;
    *mean = mu + s * d;
    *sd = s * sqrt(1 + (al * phi(al) - be * phi(be)) / Z - d * d);
}

/* 200k draws of each (mean, std, a, b), in f64: every value within [a, b];
 * the sample mean and standard deviation within 5 standard errors of the
 * truncated normal's, the errors sd / sqrt(n) for the mean and
 * sqrt((m4 - sd^4) / (4 n sd^2)) for the sd, m4 the sample's fourth central
 * moment (a truncated normal far in one tail is nearly exponential, with
 * three times a normal's kurtosis).  The cases: torch's defaults, an
 * asymmetric interval, [2 std, 4 std], the lower side of a far interval and
 * [10 std, 11 std] above the mean, where the mean is 10.098. */
Test(init_trunc_orthogonal, trunc_normal_has_the_truncated_moments)
{
    const double cases[][4] = {{0, 1, -2, 2}, {0.5, 2, -1, 3}, {1, 0.5, 2, 3},
                               {-3, 1, -10, -2.5}, {0, 1, 10, 11}, {2, 1e-3, -5, 5}};
    tg_rng rng;
    tg_rng_init(&rng, 21);
    const int64_t n = 200000;
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        const double mu = cases[c][0], s = cases[c][1], a = cases[c][2], b = cases[c][3];
        tg_tensor *t = NULL;
        OK(tg_tensor_zeros(&t, TG_F64, 2, (int64_t[]){400, n / 400}));
        OK(tg_init_trunc_normal_(t, mu, s, a, b, &rng));
        double *v = th_doubles(t), sum = 0, m2 = 0, m4 = 0, want_mean, want_sd;
        for (int64_t i = 0; i < n; i++) {
            cr_assert(v[i] >= a && v[i] <= b, "case %zu: [%lld] = %.17g outside [%g, %g]", c,
                      (long long)i, v[i], a, b);
            sum += v[i];
        }
        const double mean = sum / (double)n;
        for (int64_t i = 0; i < n; i++) {
            const double d2 = (v[i] - mean) * (v[i] - mean);
            m2 += d2;
            m4 += d2 * d2;
        }
        const double sd = sqrt(m2 / (double)(n - 1));
        m4 /= (double)n;
        trunc_moments(mu, s, a, b, &want_mean, &want_sd);
        const double se_mean = want_sd / sqrt((double)n);
        const double se_sd = sqrt((m4 - pow(sd, 4)) / (4.0 * (double)n * sd * sd));
        cr_assert(fabs(mean - want_mean) < 5 * se_mean, "case %zu: mean %.9g, want %.9g "
                  "(5 se %.3g)", c, mean, want_mean, 5 * se_mean);
        cr_assert(fabs(sd - want_sd) < 5 * se_sd, "case %zu: sd %.9g, want %.9g (5 se %.3g)", c,
                  sd, want_sd, 5 * se_sd);
        free(v);
        tg_tensor_release(t);
    }
}

/* In f32, f16 and bf16 (a and b representable) the values stay in [a, b];
 * the same seed gives the same bits, and the rng moves on as a uniform_
 * fill of t's size does. */
Test(init_trunc_orthogonal, trunc_normal_in_every_float_dtype_and_seeded)
{
    const tg_dtype dts[] = {TG_F32, TG_F16, TG_BF16, TG_F64};
    for (size_t k = 0; k < sizeof dts / sizeof *dts; k++) {
        tg_rng r1, r2, r3;
        tg_rng_init(&r1, 5);
        tg_rng_init(&r2, 5);
        tg_rng_init(&r3, 5);
        tg_tensor *x = NULL, *y = NULL, *u = NULL;
        OK(tg_tensor_zeros(&x, dts[k], 3, (int64_t[]){7, 5, 9}));
        OK(tg_tensor_zeros(&y, dts[k], 3, (int64_t[]){7, 5, 9}));
        OK(tg_tensor_zeros(&u, dts[k], 3, (int64_t[]){7, 5, 9}));
        OK(tg_init_trunc_normal_(x, 0.25, 1.5, -0.5, 2.0, &r1));
        OK(tg_init_trunc_normal_(y, 0.25, 1.5, -0.5, 2.0, &r2));
        OK(tg_init_uniform_(u, 0, 1, &r3));
        th_expect_same_bits("same seed", x, x, y);
        cr_assert(r1.counter == r3.counter, "%s: counter %llu, a uniform_ %llu",
                  tg_dtype_name(dts[k]), (unsigned long long)r1.counter,
                  (unsigned long long)r3.counter);
        bool spread = false;
        for (int64_t i = 0; i < tg_tensor_numel(x); i++) {
            const double v = th_at(x, i);
            cr_assert(v >= -0.5 && v <= 2.0, "%s [%lld] = %g", tg_dtype_name(dts[k]),
                      (long long)i, v);
            spread = spread || v != th_at(x, 0);
        }
        cr_assert(spread);
        OK(tg_init_trunc_normal_(y, 0.25, 1.5, -0.5, 2.0, &r2));
        cr_assert(th_at(x, 0) != th_at(y, 0) || th_at(x, 1) != th_at(y, 1));
        th_release_all(3, (tg_tensor *[]){x, y, u});
    }
}

/* Each value is the inverse normal cdf of the uniform u that a uniform_
 * fill with the same seed draws, to 1e-12 relative in probability: with
 * alpha = (a - mean) / std and beta likewise, Phi(z) = Phi(alpha) + (Phi(beta)
 * - Phi(alpha)) u for z = (x - mean) / std; for an interval above the mean
 * (alpha + beta > 0) the draw is mirrored, Phi(-z) = Phi(-beta) +
 * (Phi(-alpha) - Phi(-beta)) u, which keeps the upper tail's digits. */
Test(init_trunc_orthogonal, trunc_normal_is_the_inverse_cdf_of_a_uniform)
{
    const double cases[][4] = {{0.25, 1.5, -2, 1}, {0.25, 1.5, -0.5, 2}, {0, 1, 6, 9},
                               {0, 1, -30, -29.5}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        const double mu = cases[c][0], s = cases[c][1];
        const double al = (cases[c][2] - mu) / s, be = (cases[c][3] - mu) / s;
        const bool mirror = al + be > 0;
        tg_rng r1, r2;
        tg_rng_init(&r1, 77);
        tg_rng_init(&r2, 77);
        tg_tensor *x = NULL, *u = NULL;
        OK(tg_tensor_zeros(&x, TG_F64, 1, (int64_t[]){1001}));
        OK(tg_tensor_zeros(&u, TG_F64, 1, (int64_t[]){1001}));
        OK(tg_init_trunc_normal_(x, mu, s, cases[c][2], cases[c][3], &r1));
        OK(tg_init_uniform_(u, 0, 1, &r2));
        for (int64_t i = 0; i < 1001; i++) {
            const double z = (th_at(x, i) - mu) / s, ui = th_at(u, i);
            const double got = mirror ? Phi(-z) : Phi(z);
            const double want = mirror ? Phi(-be) + (Phi(-al) - Phi(-be)) * ui
                                       : Phi(al) + (Phi(be) - Phi(al)) * ui;
            cr_assert(fabs(got - want) <= 1e-12 * want, "case %zu [%lld]: Phi %.17g, want "
                      "%.17g", c, (long long)i, got, want);
        }
        th_release_all(2, (tg_tensor *[]){x, u});
    }
}

/* ---- orthogonal_ --------------------------------------------------------------- */

/* The largest |(M M^T)_ij / gain^2 - delta_ij| for M the (rows, cols)
 * matrix of v, taken over the shorter side: M^T M for tall, M M^T for wide. */
static double orthogonality_error(const double *v, int64_t rows, int64_t cols, double gain)
{
    const bool wide = rows < cols;
    const int64_t n = wide ? rows : cols, len = wide ? cols : rows;
    double worst = 0;
    for (int64_t p = 0; p < n; p++)
        for (int64_t q = 0; q < n; q++) {
            double dot = 0;
            for (int64_t k = 0; k < len; k++)
                dot += wide ? v[p * cols + k] * v[q * cols + k]
                            : v[k * cols + p] * v[k * cols + q];
            worst = fmax(worst, fabs(dot / (gain * gain) - (p == q)));
        }
    return worst;
}

/* For shapes tall, square, wide and with flattened trailing dims, in f64:
 * t^T t (t t^T when wide) is gain^2 I to 1e-13; and with A the normal
 * matrix the same seed draws, R = t^T A / gain (t A^T / gain when wide) is
 * upper triangular with a positive diagonal: t spans A's leading columns
 * with torch's signs. */
Test(init_trunc_orthogonal, orthogonal_is_orthogonal_with_torchs_signs)
{
    const struct {
        int nd;
        int64_t shape[4];
        double gain;
    } cases[] = {{2, {6, 4}, 1.0}, {2, {4, 6}, 2.0}, {2, {5, 5}, 0.5}, {4, {8, 2, 3, 3}, 1.0},
                 {3, {20, 3, 2}, sqrt(2.0)}, {2, {64, 64}, 1.0}, {2, {1, 7}, 1.0},
                 {2, {7, 1}, 3.0}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        const int64_t rows = cases[c].shape[0];
        int64_t numel = 1;
        for (int d = 0; d < cases[c].nd; d++) numel *= cases[c].shape[d];
        const int64_t cols = numel / rows;
        tg_rng rng, again;
        tg_rng_init(&rng, 100 + c);
        again = rng;
        tg_tensor *t = NULL, *a = NULL;
        OK(tg_tensor_zeros(&t, TG_F64, cases[c].nd, cases[c].shape));
        OK(tg_init_orthogonal_(t, cases[c].gain, &rng));
        OK(tg_tensor_zeros(&a, TG_F64, 2, (int64_t[]){rows, cols}));
        OK(tg_tensor_rand_normal(a, &again, 0, 1));
        cr_assert(rng.counter == again.counter);
        double *w = th_doubles(t), *m = th_doubles(a);
        const double err = orthogonality_error(w, rows, cols, cases[c].gain);
        cr_assert(err < 1e-13, "case %zu: |Q^T Q - I| = %g", c, err);
        const bool wide = rows < cols;
        const int64_t n = wide ? rows : cols, len = wide ? cols : rows;
        for (int64_t p = 0; p < n; p++)
            for (int64_t q = 0; q < n; q++) {
                double r = 0;   /* R_pq = sum_k Q_kp A_kq over the long side */
                for (int64_t k = 0; k < len; k++)
                    r += wide ? w[p * cols + k] * m[q * cols + k]
                              : w[k * cols + p] * m[k * cols + q];
                r /= cases[c].gain;
                if (p > q) cr_assert(fabs(r) < 1e-12, "case %zu: R[%lld][%lld] = %g", c,
                                     (long long)p, (long long)q, r);
                if (p == q) cr_assert(r > 0, "case %zu: R[%lld][%lld] = %g", c, (long long)p,
                                      (long long)q, r);
            }
        free(w);
        free(m);
        th_release_all(2, (tg_tensor *[]){t, a});
    }
}

/* In f32, f16 and bf16 the rounded matrix is orthogonal to the dtype's
 * precision; a strided view is filled in its logical order; the same seed
 * gives the same bits; a leaf that requires grad stays a leaf, nothing
 * recorded; an empty t is left alone. */
Test(init_trunc_orthogonal, orthogonal_in_every_float_dtype_views_and_leaves)
{
    const struct {
        tg_dtype dt;
        double tol;
    } dts[] = {{TG_F32, 1e-5}, {TG_F16, 4e-3}, {TG_BF16, 3e-2}};
    for (size_t k = 0; k < sizeof dts / sizeof *dts; k++) {
        tg_rng r1, r2;
        tg_rng_init(&r1, 9);
        tg_rng_init(&r2, 9);
        tg_tensor *x = NULL, *y = NULL;
        OK(tg_tensor_zeros(&x, dts[k].dt, 2, (int64_t[]){12, 30}));
        OK(tg_tensor_zeros(&y, dts[k].dt, 2, (int64_t[]){12, 30}));
        OK(tg_tensor_set_requires_grad(x, true));
        OK(tg_init_orthogonal_(x, 1.0, &r1));
        OK(tg_init_orthogonal_(y, 1.0, &r2));
        th_expect_same_bits("same seed", x, x, y);
        cr_assert(tg_tensor_is_leaf(x) && tg_tensor_requires_grad(x));
        double *v = th_doubles(x);
        const double err = orthogonality_error(v, 12, 30, 1.0);
        cr_assert(err < dts[k].tol, "%s: |Q Q^T - I| = %g", tg_dtype_name(dts[k].dt), err);
        free(v);
        th_release_all(2, (tg_tensor *[]){x, y});
    }
    tg_rng r1, r2;
    tg_rng_init(&r1, 4);
    tg_rng_init(&r2, 4);
    tg_tensor *base = NULL, *view = NULL, *plain = NULL, *e = NULL;
    OK(tg_tensor_zeros(&base, TG_F64, 2, (int64_t[]){5, 8}));
    OK(tg_transpose(&view, base, 0, 1));   /* (8, 5), strided */
    OK(tg_tensor_zeros(&plain, TG_F64, 2, (int64_t[]){8, 5}));
    OK(tg_init_orthogonal_(view, 1.0, &r1));
    OK(tg_init_orthogonal_(plain, 1.0, &r2));
    th_expect_same_bits("view", view, view, plain);
    OK(tg_tensor_zeros(&e, TG_F32, 3, (int64_t[]){4, 0, 3}));
    const tg_rng before = r1;
    OK(tg_init_orthogonal_(e, 1.0, &r1));
    OK(tg_init_trunc_normal_(e, 0, 1, -2, 2, &r1));
    cr_assert(r1.counter == before.counter);
    th_release_all(4, (tg_tensor *[]){base, view, plain, e});
}

Test(init_trunc_orthogonal, trunc_normal_and_orthogonal_refuse_bad_arguments)
{
    tg_rng rng;
    tg_rng_init(&rng, 0);
    tg_tensor *v = NULL, *w = NULL, *i = NULL;
    refusal_tensors(&v, &w, &i);
    const tg_rng before = rng;
    const struct {
        double mean, std, a, b;
        const char *words;
    } bad[] = {
        {0, 0, -2, 2, "init_trunc_normal_: std=0 must be finite and > 0"},
        {0, -1, -2, 2, "init_trunc_normal_: std=-1 must be finite and > 0"},
        {0, INFINITY, -2, 2, "init_trunc_normal_: std=inf must be finite and > 0"},
        {NAN, 1, -2, 2, "init_trunc_normal_: mean=nan must be finite"},
        {0, 1, 2, 2, "init_trunc_normal_: a=2, b=2 must be finite with a < b"},
        {0, 1, 3, -3, "init_trunc_normal_: a=3, b=-3 must be finite with a < b"},
        {0, 1, -INFINITY, 2, "init_trunc_normal_: a=-inf, b=2 must be finite with a < b"},
        {0, 1, NAN, 2, "init_trunc_normal_: a=nan, b=2"},
        {0, 1, 40, 41, "init_trunc_normal_: [a, b] = [40, 41] is [40, 41] std from mean=0; "
                       "its probability under N(mean, std^2) is 0 in double"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        cr_assert(eq(int, tg_init_trunc_normal_(w, bad[k].mean, bad[k].std, bad[k].a, bad[k].b,
                                                &rng), TG_EINVAL), "case %zu", k);
        th_expect_in(tg_error_message(), bad[k].words);
    }
    cr_assert(eq(int, tg_init_trunc_normal_(i, 0, 1, -2, 2, &rng), TG_EINVAL));
    th_expect_in(tg_error_message(), "init_trunc_normal_: t is i64; only float dtypes");
    cr_assert(eq(int, tg_init_trunc_normal_(NULL, 0, 1, -2, 2, &rng), TG_EINVAL));
    th_expect_in(tg_error_message(), "init_trunc_normal_: t must not be NULL");
    cr_assert(eq(int, tg_init_trunc_normal_(w, 0, 1, -2, 2, NULL), TG_EINVAL));
    th_expect_in(tg_error_message(), "init_trunc_normal_: rng must not be NULL");
    cr_assert(eq(int, tg_init_orthogonal_(v, 1, &rng), TG_ESHAPE));
    th_expect_in(tg_error_message(), "init_orthogonal_: t is (5); orthogonal_ needs a tensor "
                 "of at least 2 dims");
    cr_assert(eq(int, tg_init_orthogonal_(w, -1, &rng), TG_EINVAL));
    th_expect_in(tg_error_message(), "init_orthogonal_: gain=-1 must be finite and >= 0");
    cr_assert(eq(int, tg_init_orthogonal_(w, NAN, &rng), TG_EINVAL));
    th_expect_in(tg_error_message(), "init_orthogonal_: gain=nan must be finite");
    cr_assert(eq(int, tg_init_orthogonal_(i, 1, &rng), TG_EINVAL));
    th_expect_in(tg_error_message(), "init_orthogonal_: t is i64; only float dtypes");
    cr_assert(eq(int, tg_init_orthogonal_(w, 1, NULL), TG_EINVAL));
    th_expect_in(tg_error_message(), "init_orthogonal_: rng must not be NULL");
    cr_assert(eq(int, tg_init_orthogonal_(NULL, 1, &rng), TG_EINVAL));
    /* nothing was written or drawn by the refused calls */
    for (int k = 0; k < 12; k++) cr_assert(eq(dbl, th_at(w, k), 0.0));
    cr_assert(rng.counter == before.counter);
    th_release_all(3, (tg_tensor *[]){v, w, i});
}
