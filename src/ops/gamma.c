/* src/ops/gamma.c - lgamma, digamma and polygamma (torch.lgamma,
 * torch.digamma / torch.special.psi, torch.polygamma).
 *
 * lgamma(x) = log|Gamma(x)|: C's lgamma_r (f64) and lgammaf_r (f32), the
 * functions torch's CPU kernel calls, so torch's values; +inf at 0 and the
 * negative integers and at +-inf.
 *
 * digamma(x) = Gamma'(x) / Gamma(x), the Cephes algorithm torch 1.13 uses,
 * in the dtype's arithmetic: x moved up past 10 by psi(x) = psi(x + 1) -
 * 1/x, then the asymptotic series log x - 1/(2x) - sum B_2k / (2k x^2k);
 * below 0 the reflection psi(x) = psi(1 - x) - pi / tan(pi r), r the
 * fractional part of x (in double for f32, as torch).  As torch:
 * digamma(+0) = -inf, digamma(-0) = +inf, NaN at the negative integers and
 * -inf, +inf at +inf.
 *
 * polygamma(n, x), n >= 1, the n-th derivative of digamma (n = 0 is
 * digamma): (-1)^(n+1) n! zeta(n + 1, x), the Hurwitz zeta sum
 * sum_k (x + k)^-(n+1) taken term by term until x + k >= 20 + n, then
 * Euler-Maclaurin's tail x^-n / n + x^-(n+1) / 2 +
 * sum_j B_2j / (2j)! (n+1)...(n+2j-1) x^-(n+2j) (ten terms), summed from
 * the smallest term up, in double (f32 rounds that once); below 0 by the
 * reflection psi_n(x) = (-1)^n psi_n(1 - x) - pi^(n+1) cot^(n)(pi x), the
 * derivatives of cot from their polynomials in cot (whose terms share one
 * sign), cot(pi x) from the fractional part of x.  Within a few ulps of
 * the true value in f64 (torch's trigamma, n = 1, is a shorter series,
 * about 1e-8 relative off).  At 0 and the negative integers +-inf,
 * (-1)^(n+1) inf (torch's trigamma is finite and huge at the negative
 * integers there); polygamma(n, +inf) = 0 with the sign (-1)^(n+1),
 * polygamma(n, -inf) NaN.
 *
 * Gradients, torch's, each the next function of the family, so every order
 * is differentiable: lgamma' = digamma, digamma' = polygamma(1, x),
 * polygamma(n, x)' = polygamma(n + 1, x).  Integer inputs give f32, as
 * torch's; f16 and bf16 are computed in f32 and rounded once.
 */
#include <assert.h>
#include <math.h>

#include "core/core.h"
#include "ops/elementwise.h"
#include "autograd/tape.h"
#include "ops/families.h"
#include "ops/special_internal.h"
#include "tapegrad/ops.h"

/* The largest n polygamma takes: n! must stay finite in double. */
#define PG_MAX_N 160

typedef struct polygamma_params {
    int n;
} polygamma_params;

static inline double lgamma_d(double x, double s)
{
    (void)s;
    int sg;
    return lgamma_r(x, &sg);
}

static inline float lgamma_f(float x, double s)
{
    (void)s;
    int sg;
    return lgammaf_r(x, &sg);
}

/* Cephes' coefficients of the asymptotic series, highest power first. */
static const double PSI_A[7] = {8.33333333333333333333E-2,  -2.10927960927960927961E-2,
                                7.57575757575757575758E-3,  -4.16666666666666666667E-3,
                                3.96825396825396825397E-3,  -8.33333333333333333333E-3,
                                8.33333333333333333333E-2};
#define PSI_10 2.25175258906672110764

static double digamma_d(double x, double s)
{
    (void)s;
    if (x == 0) return copysign(INFINITY, -x);
    if (x < 0) {
        if (x == trunc(x)) return NAN;
        double q;
        const double r = modf(x, &q);
        return digamma_d(1 - x, 0) - M_PI / tan(M_PI * r);
    }
    double acc = 0;
    while (x < 10) {
        acc -= 1 / x;
        x += 1;
    }
    if (x == 10) return acc + PSI_10;
    double y = 0;
    if (x < 1.0e17) {
        const double z = 1.0 / (x * x);
        double p = 0;
        for (int i = 0; i < 7; i++) p = p * z + PSI_A[i];
        y = z * p;
    }
    return acc + log(x) - 0.5 / x - y;
}

/* The same steps in f32 (the reflection's pi / tan(pi r) in double). */
static float digamma_f(float x, double s)
{
    (void)s;
    if (x == 0) return copysignf(INFINITY, -x);
    if (x < 0) {
        if (x == truncf(x)) return NAN;
        double q;
        const double r = modf((double)x, &q);
        const float pt = (float)(M_PI / tan(M_PI * r));
        return digamma_f(1 - x, 0) - pt;
    }
    float acc = 0;
    while (x < 10) {
        acc -= 1 / x;
        x += 1;
    }
    if (x == 10) return acc + (float)PSI_10;
    float y = 0;
    if (x < 1.0e17f) {
        const float z = 1 / (x * x);
        float p = 0;
        for (int i = 0; i < 7; i++) p = p * z + (float)PSI_A[i];
        y = z * p;
    }
    return acc + logf(x) - 0.5f / x - y;
}

/* B_2, B_4, ..., B_20. */
static const double BERN[10] = {1.0 / 6,         -1.0 / 30,     1.0 / 42,       -1.0 / 30,
                                5.0 / 66,        -691.0 / 2730, 7.0 / 6,        -3617.0 / 510,
                                43867.0 / 798.0, -174611.0 / 330};

/* sum_{k >= 0} (x + k)^-(n+1) for x > 0 (n >= 1). */
static double hurwitz(int n, double x)
{
    const double xmin = 20.0 + n;
    int64_t m = 0;
    while (x + (double)m < xmin) m++;
    const double t = x + (double)m, t2 = t * t;
    /* Euler-Maclaurin's tail at t, its smallest terms first: term j
     * B_2j / (2j)! (n+1)...(n+2j-1) t^-(n+2j), j = 1..10 */
    double c[10], pw = pow(t, -(double)n), f = n + 1.0, fact = 2.0;
    for (int j = 0; j < 10; j++) {
        pw /= t2;
        c[j] = BERN[j] / fact * f * pw;
        f *= (n + 2.0 * j + 2) * (n + 2.0 * j + 3);
        fact *= (2.0 * j + 3) * (2.0 * j + 4);
    }
    double sum = 0;
    for (int j = 9; j >= 0; j--) sum += c[j];
    sum += pow(t, -(double)n - 1) / 2;
    sum += pow(t, -(double)n) / n;
    for (int64_t k = m - 1; k >= 0; k--) sum += pow(x + (double)k, -(double)n - 1);
    return sum;
}

/* cot(pi r) for r in (-1, 1), its cosine as sin(pi (1/2 - |r|)): exactly
 * 0 at r = +-1/2, where 1 / tan(pi r) would leave 6e-17. */
static double cot_pi(double r)
{
    const double a = fabs(r);
    const double c = sin(M_PI * (0.5 - a)) / sin(M_PI * a);
    return r < 0 ? -c : c;
}

/* The n-th derivative of cot at pi r, from P_0(c) = c,
 * P_{k+1}(c) = -(1 + c^2) P_k'(c), c = cot(pi r). */
static double cot_deriv(int n, double r)
{
    double p[PG_MAX_N + 2] = {0}, q[PG_MAX_N + 2];
    p[1] = 1;   /* P_0 = c */
    for (int k = 0; k < n; k++) {
        for (int i = 0; i <= k + 2; i++) q[i] = 0;
        for (int i = 1; i <= k + 1; i++) {   /* d/dc of p[i] c^i, times -(1 + c^2) */
            q[i - 1] -= i * p[i];
            q[i + 1] -= i * p[i];
        }
        for (int i = 0; i <= k + 2; i++) p[i] = q[i];
    }
    const double c = cot_pi(r);
    double v = 0;
    for (int i = n + 1; i >= 0; i--) v = v * c + p[i];
    return v;
}

static double polygamma_d(double x, double s)
{
    const int n = (int)s;
    if (n == 0) return digamma_d(x, 0);
    const double sg = n % 2 ? 1.0 : -1.0;   /* (-1)^(n+1) */
    if (isnan(x) || x == -INFINITY) return NAN;
    if (x == INFINITY) return sg * 0.0;
    if (x <= 0 && x == floor(x)) return sg * INFINITY;
    if (x < 0) {
        double q;
        const double r = modf(x, &q);   /* cot(pi x) = cot(pi r) */
        const double refl = polygamma_d(1 - x, s);
        return (n % 2 ? -refl : refl) - pow(M_PI, n + 1.0) * cot_deriv(n, r);
    }
    return sg * tgamma(n + 1.0) * hurwitz(n, x);
}

static inline float polygamma_f(float x, double s)
{
    return (float)polygamma_d((double)x, s);
}

TG__SP_UNARY_KERNEL(k_lgamma, lgamma_f, lgamma_d)
TG__SP_UNARY_KERNEL(k_digamma, digamma_f, digamma_d)
TG__SP_UNARY_KERNEL(k_polygamma, polygamma_f, polygamma_d)

static int lgamma_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                          const void *params)
{
    TG_TRY(tg__ew_unary_float("lgamma", out, in[0], k_lgamma, 0.0));
    if (ctx) tg__ctx_save(ctx, in[0]);
    return TG_OK;
}

static int digamma_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                           const void *params)
{
    TG_TRY(tg__ew_unary_float("digamma", out, in[0], k_digamma, 0.0));
    if (ctx) tg__ctx_save(ctx, in[0]);
    return TG_OK;
}

static int polygamma_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                             const void *params)
{
    const int k = ((const polygamma_params *)params)->n;
    TG_TRY(tg__ew_unary_float("polygamma", out, in[0], k == 0 ? k_digamma : k_polygamma, k));
    if (ctx) tg__ctx_save(ctx, in[0]);
    return TG_OK;
}

/* gi[0] = g * f(x), f the next function of the family. */
static int lgamma_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    return tg__unary_g_times(ctx, g, tg_digamma, 1.0, gi);
}

static int polygamma_next(tg_ctx *ctx, tg_tensor *g, int n, tg_tensor **gi)
{
    tg_tensor *x, *d = NULL;
    int rc;
    TG_TRY_GOTO(tg__ctx_saved(ctx, 0, &x));
    TG_TRY_GOTO(tg_polygamma(&d, n, x));
    TG_TRY_GOTO(tg_mul(&gi[0], g, d));
done:
    tg_tensor_release(d);
    return rc;
}

static int digamma_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    return polygamma_next(ctx, g, 1, gi);
}

static int polygamma_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    const int n = ((const polygamma_params *)tg__ctx_params(ctx))->n;
    return polygamma_next(ctx, g, n + 1, gi);
}

/* KEEP: no autocast list of torch has these. */
static const tg_op_schema lgamma_op = {
    .name = "lgamma", .arity = 1, .amp = TG_AMP_KEEP, .forward = lgamma_forward,
    .backward = lgamma_backward, .double_backward = true, .vjp = "da = g * digamma(a)",
    .scalar = NULL};
static const tg_op_schema digamma_op = {
    .name = "digamma", .arity = 1, .amp = TG_AMP_KEEP, .forward = digamma_forward,
    .backward = digamma_backward, .double_backward = true,
    .vjp = "da = g * polygamma(1, a)", .scalar = NULL};
static const tg_op_schema polygamma_op = {
    .name = "polygamma", .arity = 1, .amp = TG_AMP_KEEP, .forward = polygamma_forward,
    .backward = polygamma_backward, .double_backward = true,
    .vjp = "da = g * polygamma(n + 1, a)", .scalar = "n"};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__gamma_ops[] = {&lgamma_op, &digamma_op, &polygamma_op};
static_assert(sizeof tg__gamma_ops / sizeof tg__gamma_ops[0] == TG__gamma_N,
              "src/ops/families.h must count the gamma ops");

int tg_lgamma(tg_tensor **out, tg_tensor *x)
{
    return tg_op_call(&lgamma_op, out, 1, (tg_tensor *[]){x}, NULL, 0);
}

int tg_digamma(tg_tensor **out, tg_tensor *x)
{
    return tg_op_call(&digamma_op, out, 1, (tg_tensor *[]){x}, NULL, 0);
}

int tg_polygamma(tg_tensor **out, int n, tg_tensor *x)
{
    TG_CHECK(out != NULL, TG_EINVAL, "polygamma: out is NULL");
    TG_CHECK(n >= 0 && n <= PG_MAX_N, TG_EINVAL,
             "polygamma: n=%d; it must lie in [0, %d] (torch refuses a negative n)", n,
             PG_MAX_N);
    polygamma_params prm = {.n = n};
    return tg_op_call(&polygamma_op, out, 1, (tg_tensor *[]){x}, &prm, sizeof prm);
}
