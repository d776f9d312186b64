/* src/ops/special_math.c - erfc, erfinv, logit and sinc (torch.erfc,
 * torch.erfinv, torch.logit, torch.sinc).
 *
 * erfc(a) = 1 - erf(a) without the cancellation, C's erfc (f32: in double,
 * rounded once).  erfinv(y), the x with erf(x) = y: Giles' single-precision
 * approximation ("Approximating the erfinv function", GPU Computing Gems,
 * 2011) refined by two Halley steps on erf(x) - y (|y| < 0.5) or on
 * (1 - |y|) - erfc(|x|) (|y| >= 0.5, where 1 - |y| is exact; Newton steps
 * on the log of it first in the far tail), in double: within an ulp of
 * the true value in f64 (torch's f64 erfinv is 4 ulps off at 0.99 and
 * 6e-5 relative at 1 - 2^-53); f32 rounds that once.
 * erfinv(+-1) = +-inf, NaN outside [-1, 1], erfinv(-0) = -0.
 *
 * logit(x, eps) = log(x / (1 - x)), x first clamped to [eps, 1 - eps] when
 * eps >= 0 is given (a NaN or negative eps is torch's None: no clamp); as
 * torch's kernel, x / (1 - x) is rounded in the dtype before the log.
 *
 * sinc(x) = sin(pi x) / (pi x), 1 at 0, in torch's steps: p = pi x rounded
 * in the dtype, then sin(p) / p (sinc(1) in f32 is sin(pi_f) / pi_f =
 * -2.78e-8, as torch's).
 *
 * Gradients, torch's formulas written with differentiable ops:
 *   erfc    -g * 2/sqrt(pi) * exp(-a^2)
 *   erfinv  g * sqrt(pi)/2 * exp(erfinv(a)^2)
 *   logit   g / (x (1 - x)); without eps NaN where x < 0 or x > 1, with
 *           eps 0 where x < eps or x > 1 - eps (also at NaN)
 *   sinc    g (pi x cos(pi x) - sin(pi x)) / (pi x^2), 0 where pi x^2 == 0
 * Integer inputs give f32, as torch's (their values converted to f32).
 * Each transcendental step is computed in double and rounded once (torch's
 * f32 kernels take them from f32 libm or Sleef: within an ulp or two).
 */
#include <assert.h>
#include <math.h>

#include "core/core.h"
#include "ops/elementwise.h"
#include "autograd/tape.h"
#include "ops/families.h"
#include "ops/special_internal.h"
#include "tapegrad/ops.h"

typedef struct logit_params {
    double eps;   /* NaN: none */
} logit_params;

static inline double erfc_d(double a, double s)
{
    (void)s;
    return erfc(a);
}

static inline float erfc_f(float a, double s)
{
    (void)s;
    return (float)erfc((double)a);
}

/* Giles' single-precision erfinv of y (|y| < 1), relative error ~4e-7. */
static double erfinv_giles(double y)
{
    double w = -log((1.0 - y) * (1.0 + y)), p;
    if (w < 5.0) {
        w -= 2.5;
        p = 2.81022636e-08;
        p = 3.43273939e-07 + p * w;
        p = -3.5233877e-06 + p * w;
        p = -4.39150654e-06 + p * w;
        p = 0.00021858087 + p * w;
        p = -0.00125372503 + p * w;
        p = -0.00417768164 + p * w;
        p = 0.246640727 + p * w;
        p = 1.50140941 + p * w;
    } else {
        w = sqrt(w) - 3.0;
        p = -0.000200214257;
        p = 0.000100950558 + p * w;
        p = 0.00134934322 + p * w;
        p = -0.00367342844 + p * w;
        p = 0.00573950773 + p * w;
        p = -0.0076224613 + p * w;
        p = 0.00943887047 + p * w;
        p = 1.00167406 + p * w;
        p = 2.83297682 + p * w;
    }
    return p * y;
}

/* erfinv(y) in double: Giles' start, then Halley steps x -= r / (d + x r)
 * with r = erf(x) - y and d = erf'(x) = 2/sqrt(pi) e^(-x^2).  For
 * |y| >= 0.5 on x = erfinv(|y|) with r = (1 - |y|) - erfc(x), exact in its
 * first term and free of erf's cancellation near 1; there Newton steps on
 * log(erfc(x)) = log(1 - |y|) first, as Giles' start (made for f32) is a
 * few percent off where 1 - |y| < 1e-8. */
static double erfinv_d(double y, double s)
{
    (void)s;
    const double ay = fabs(y);
    if (isnan(y) || ay > 1) return NAN;
    if (ay == 1) return copysign(INFINITY, y);
    if (y == 0) return y;
    const double c = 2.0 / sqrt(M_PI);
    if (ay < 0.5) {
        double x = erfinv_giles(y);
        for (int i = 0; i < 2; i++) {
            const double r = erf(x) - y, d = c * exp(-x * x);
            x -= r / (d + x * r);
        }
        return x;
    }
    const double q = 1.0 - ay, lq = log(q);
    double x = erfinv_giles(ay);
    for (int i = 0; i < 20; i++) {
        const double e = erfc(x), step = (log(e) - lq) * e / (c * exp(-x * x));
        x += step;
        if (fabs(step) < 1e-6 * x) break;
    }
    for (int i = 0; i < 2; i++) {
        const double r = q - erfc(x), d = c * exp(-x * x);
        x -= r / (d + x * r);
    }
    return copysign(x, y);
}

static inline float erfinv_f(float y, double s)
{
    return (float)erfinv_d((double)y, s);
}

/* torch's logit kernel: x clamped to [eps, 1 - eps] (the bounds in the
 * dtype, NaN kept) unless eps is NaN, then log(x / (1 - x)) with the
 * quotient rounded in the dtype. */
static inline double logit_d(double x, double eps)
{
    if (!isnan(eps) && !isnan(x)) x = fmin(fmax(x, eps), 1.0 - eps);
    return log(x / (1.0 - x));
}

static inline float logit_f(float x, double eps)
{
    const float lo = (float)eps, hi = 1.0f - lo;
    if (!isnan(eps) && !isnan(x)) x = fminf(fmaxf(x, lo), hi);
    return (float)log((double)(x / (1.0f - x)));
}

/* torch's sinc: 1 at 0, else sin(p) / p with p = pi x rounded in the dtype. */
static inline double sinc_d(double x, double s)
{
    (void)s;
    if (x == 0) return 1.0;
    const double p = M_PI * x;
    return sin(p) / p;
}

static inline float sinc_f(float x, double s)
{
    (void)s;
    if (x == 0) return 1.0f;
    const float p = (float)M_PI * x;
    return (float)sin((double)p) / p;
}

TG__SP_UNARY_KERNEL(k_erfc, erfc_f, erfc_d)
TG__SP_UNARY_KERNEL(k_erfinv, erfinv_f, erfinv_d)
TG__SP_UNARY_KERNEL(k_logit, logit_f, logit_d)
TG__SP_UNARY_KERNEL(k_sinc, sinc_f, sinc_d)

/* The keep masks of logit's gradient, 1 where it is kept: x in [lo, hi]
 * (s = eps, hi = 1 - eps in the dtype; NaN x not kept), or, without eps,
 * not outside [0, 1] (NaN x kept: its NaN propagates). */
static inline double keep_eps_d(double x, double eps)
{
    return x >= eps && x <= 1.0 - eps ? 1.0 : 0.0;
}

static inline float keep_eps_f(float x, double eps)
{
    const float lo = (float)eps, hi = 1.0f - lo;
    return x >= lo && x <= hi ? 1.0f : 0.0f;
}

static inline double keep_unit_d(double x, double s)
{
    (void)s;
    return x < 0 || x > 1 ? 0.0 : 1.0;
}

static inline float keep_unit_f(float x, double s)
{
    (void)s;
    return x < 0 || x > 1 ? 0.0f : 1.0f;
}

TG__SP_UNARY_KERNEL(k_keep_eps, keep_eps_f, keep_eps_d)
TG__SP_UNARY_KERNEL(k_keep_unit, keep_unit_f, keep_unit_d)

#define SP_FORWARD(op)                                                        \
    static int op##_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in, \
                            const void *params)                               \
    {                                                                         \
        TG_TRY(tg__ew_unary_float(#op, out, in[0], k_##op, 0.0));             \
        if (ctx) tg__ctx_save(ctx, in[0]);                                    \
        return TG_OK;                                                         \
    }
SP_FORWARD(erfc)
SP_FORWARD(erfinv)
SP_FORWARD(sinc)

static int logit_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                         const void *params)
{
    const double eps = ((const logit_params *)params)->eps;
    TG_TRY(tg__ew_unary_float("logit", out, in[0], k_logit, eps));
    if (ctx) tg__ctx_save(ctx, in[0]);
    return TG_OK;
}

#define NTMP 6
static void release_tmp(tg_tensor **t)
{
    for (int i = 0; i < NTMP; i++) tg_tensor_release(t[i]);
}

/* d erfc(a) = g * (-2/sqrt(pi) * exp(-a^2)). */
static int erfc_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    tg_tensor *a, *t[NTMP] = {NULL};
    int rc;
    TG_TRY_GOTO(tg__ctx_saved(ctx, 0, &a));
    TG_TRY_GOTO(tg_mul(&t[0], a, a));
    TG_TRY_GOTO(tg_neg(&t[1], t[0]));
    TG_TRY_GOTO(tg_exp(&t[2], t[1]));
    TG_TRY_GOTO(tg_mul_scalar(&t[3], t[2], -2.0 / sqrt(M_PI)));
    TG_TRY_GOTO(tg_mul(&gi[0], t[3], g));
done:
    release_tmp(t);
    return rc;
}

/* d erfinv(a) = g * (sqrt(pi)/2 * exp(erfinv(a)^2)). */
static int erfinv_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    tg_tensor *a, *t[NTMP] = {NULL};
    int rc;
    TG_TRY_GOTO(tg__ctx_saved(ctx, 0, &a));
    TG_TRY_GOTO(tg_erfinv(&t[0], a));
    TG_TRY_GOTO(tg_mul(&t[1], t[0], t[0]));
    TG_TRY_GOTO(tg_exp(&t[2], t[1]));
    TG_TRY_GOTO(tg_mul_scalar(&t[3], t[2], 0.5 * sqrt(M_PI)));
    TG_TRY_GOTO(tg_mul(&gi[0], t[3], g));
done:
    release_tmp(t);
    return rc;
}

/* d logit(x) = g / (x (1 - x)) where kept, else 0 (eps given) or NaN. */
static int logit_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    const double eps = ((const logit_params *)tg__ctx_params(ctx))->eps;
    tg_tensor *x, *t[NTMP] = {NULL};
    int rc;
    TG_TRY_GOTO(tg__ctx_saved(ctx, 0, &x));
    TG_TRY_GOTO(tg_rsub_scalar(&t[0], x, 1.0));
    TG_TRY_GOTO(tg_mul(&t[1], x, t[0]));
    TG_TRY_GOTO(tg_div(&t[2], g, t[1]));
    TG_TRY_GOTO(tg__ew_unary("logit", &t[3], x, isnan(eps) ? k_keep_unit : k_keep_eps, eps));
    TG_TRY_GOTO(tg_eq_scalar(&t[4], t[3], 0.0));
    TG_TRY_GOTO(tg_masked_fill(&gi[0], t[2], t[4], isnan(eps) ? NAN : 0.0));
done:
    release_tmp(t);
    return rc;
}

/* d sinc(x) = g (px cos(px) - sin(px)) / (pi x^2), px = pi x; 0 where
 * pi x^2 is 0 (torch's where). */
static int sinc_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    tg_tensor *x, *t[NTMP] = {NULL}, *u = NULL;
    int rc;
    TG_TRY_GOTO(tg__ctx_saved(ctx, 0, &x));
    TG_TRY_GOTO(tg_mul_scalar(&t[0], x, M_PI));        /* px */
    TG_TRY_GOTO(tg_cos(&t[1], t[0]));
    TG_TRY_GOTO(tg_mul(&t[2], t[0], t[1]));            /* px cos(px) */
    TG_TRY_GOTO(tg_sin(&t[3], t[0]));
    TG_TRY_GOTO(tg_sub(&t[4], t[2], t[3]));
    for (int i = 0; i < 4; i++) {
        tg_tensor_release(t[i]);
        t[i] = NULL;
    }
    TG_TRY_GOTO(tg_mul(&t[0], g, t[4]));
    TG_TRY_GOTO(tg_mul(&t[1], x, x));
    TG_TRY_GOTO(tg_mul_scalar(&t[2], t[1], M_PI));     /* pi x^2 */
    TG_TRY_GOTO(tg_div(&t[3], t[0], t[2]));
    TG_TRY_GOTO(tg_eq_scalar(&u, t[2], 0.0));
    TG_TRY_GOTO(tg_masked_fill(&gi[0], t[3], u, 0.0));
done:
    release_tmp(t);
    tg_tensor_release(u);
    return rc;
}

#define SCHEMA(op, policy, formula, sym)                                      \
    static const tg_op_schema op##_op = {.name = #op, .arity = 1, .amp = policy,    \
                                   .forward = op##_forward, .backward = op##_backward, \
                                   .double_backward = true, .vjp = formula, .scalar = sym}
SCHEMA(erfc, TG_AMP_KEEP, "da = -g * 2/sqrt(pi) * exp(-a^2)", NULL);
/* FP32: PyTorch's CUDA autocast has erfinv on its fp32 list (the CPU one
 * lists none of these). */
SCHEMA(erfinv, TG_AMP_FP32, "da = g * sqrt(pi)/2 * exp(erfinv(a)^2)", NULL);
SCHEMA(logit, TG_AMP_KEEP, "da = g / (a (1 - a)), 0 outside [eps, 1 - eps]", "eps");
SCHEMA(sinc, TG_AMP_KEEP, "da = g * (pi a cos(pi a) - sin(pi a)) / (pi a^2), 0 at 0", NULL);

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__special_math_ops[] = {&erfc_op, &erfinv_op, &logit_op, &sinc_op};
static_assert(sizeof tg__special_math_ops / sizeof tg__special_math_ops[0] ==
                  TG__special_math_N,
              "src/ops/families.h must count the special_math ops");

int tg_erfc(tg_tensor **out, tg_tensor *a)
{
    return tg_op_call(&erfc_op, out, 1, (tg_tensor *[]){a}, NULL, 0);
}

int tg_erfinv(tg_tensor **out, tg_tensor *a)
{
    return tg_op_call(&erfinv_op, out, 1, (tg_tensor *[]){a}, NULL, 0);
}

int tg_sinc(tg_tensor **out, tg_tensor *a)
{
    return tg_op_call(&sinc_op, out, 1, (tg_tensor *[]){a}, NULL, 0);
}

/* eps NaN or negative: torch's None (a negative eps clamps nothing that
 * would not be NaN anyway, and torch's gradient treats it as None). */
int tg_logit(tg_tensor **out, tg_tensor *x, double eps)
{
    logit_params prm = {.eps = eps < 0 ? NAN : eps};
    return tg_op_call(&logit_op, out, 1, (tg_tensor *[]){x}, &prm, sizeof prm);
}
