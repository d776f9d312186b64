/* src/ops/unary_math.c - reciprocal, rsqrt, tan, atan, asin, acos, sinh,
 * cosh, asinh, acosh, atanh, log2, log10, exp2, logsigmoid.
 *
 * Forwards compute in double with C's function and round once to the
 * input's dtype.  Backwards save the input (never the output: a refcount
 * cycle through the node) and write torch's derivative formula with
 * differentiable ops, so every order is differentiable:
 *   reciprocal  -g * (r * r),  r = 1/a        rsqrt  g * r^3 * -0.5, r = a^(-1/2)
 *   tan         g * (1 + t * t), t = tan a   atan   g / (a * a + 1)
 *   asin        g * rsqrt(1 - a * a)          acos   g * -rsqrt(1 - a * a)
 *   sinh        g * cosh a                    cosh   g * sinh a
 *   asinh       g * rsqrt(a * a + 1)          acosh  g * rsqrt(a * a - 1)
 *   atanh       g / (1 - a * a)               exp2   g * 2^a * ln 2
 *   log2        g / (a * ln 2)                log10  g / (a * ln 10)
 *   logsigmoid  g * sigmoid(-a)
 * Outside a domain the forward is NaN, at a pole +-inf, as C and torch.
 * An integer a (i8, u8, i32, i64) gives f32, as torch's: its values
 * converted to f32, then as for an f32 a (tg__ew_unary_float); except for
 * logsigmoid, which torch refuses for integers (TG_EDTYPE).
 */
#include <assert.h>
#include <math.h>

#include "core/core.h"
#include "ops/elementwise.h"
#include "autograd/tape.h"
#include "ops/families.h"
#include "tapegrad/ops.h"

TG_EW_UNARY_KERNEL(k_reciprocal, 1.0 / (double)a)
TG_EW_UNARY_KERNEL(k_rsqrt, 1.0 / sqrt((double)a))
TG_EW_UNARY_KERNEL(k_tan, tan((double)a))
TG_EW_UNARY_KERNEL(k_atan, atan((double)a))
TG_EW_UNARY_KERNEL(k_asin, asin((double)a))
TG_EW_UNARY_KERNEL(k_acos, acos((double)a))
TG_EW_UNARY_KERNEL(k_sinh, sinh((double)a))
TG_EW_UNARY_KERNEL(k_cosh, cosh((double)a))
TG_EW_UNARY_KERNEL(k_asinh, asinh((double)a))
TG_EW_UNARY_KERNEL(k_acosh, acosh((double)a))
TG_EW_UNARY_KERNEL(k_atanh, atanh((double)a))
TG_EW_UNARY_KERNEL(k_log2, log2((double)a))
TG_EW_UNARY_KERNEL(k_log10, log10((double)a))
TG_EW_UNARY_KERNEL(k_exp2, exp2((double)a))
/* log(sigmoid(a)) = min(a, 0) - log1p(e^-|a|): e^-|a| <= 1 never overflows,
 * and log1p keeps the tail -e^-a of a large a. */
TG_EW_UNARY_KERNEL(k_logsigmoid, fmin((double)a, 0.0) - log1p(exp(-fabs((double)a))))

/* drive: tg__ew_unary_float, or tg__ew_unary for an op refusing integers */
#define MATH_FORWARD_WITH(op, drive)                                          \
    static int op##_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in, \
                            const void *params)                               \
    {                                                                         \
        TG_TRY(drive(#op, out, in[0], k_##op, 0.0));                          \
        if (ctx) tg__ctx_save(ctx, in[0]);                                    \
        return TG_OK;                                                         \
    }
#define MATH_FORWARD(op) MATH_FORWARD_WITH(op, tg__ew_unary_float)
MATH_FORWARD(reciprocal)
MATH_FORWARD(rsqrt)
MATH_FORWARD(tan)
MATH_FORWARD(atan)
MATH_FORWARD(asin)
MATH_FORWARD(acos)
MATH_FORWARD(sinh)
MATH_FORWARD(cosh)
MATH_FORWARD(asinh)
MATH_FORWARD(acosh)
MATH_FORWARD(atanh)
MATH_FORWARD(log2)
MATH_FORWARD(log10)
MATH_FORWARD(exp2)
MATH_FORWARD_WITH(logsigmoid, tg__ew_unary)

/* The temporaries of a backward, released together. */
#define NTMP 4
static void release_tmp(tg_tensor **t)
{
    for (int i = 0; i < NTMP; i++) tg_tensor_release(t[i]);
}

/* d(1/a) = -g * (r * r), r = 1/a. */
static int reciprocal_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    tg_tensor *a, *t[NTMP] = {NULL};
    int rc;
    TG_TRY_GOTO(tg__ctx_saved(ctx, 0, &a));
    TG_TRY_GOTO(tg_reciprocal(&t[0], a));
    TG_TRY_GOTO(tg_mul(&t[1], t[0], t[0]));
    TG_TRY_GOTO(tg_neg(&t[2], t[1]));
    TG_TRY_GOTO(tg_mul(&gi[0], g, t[2]));
done:
    release_tmp(t);
    return rc;
}

/* d a^(-1/2) = g * r^3 * -0.5, r = a^(-1/2). */
static int rsqrt_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    tg_tensor *a, *t[NTMP] = {NULL};
    int rc;
    TG_TRY_GOTO(tg__ctx_saved(ctx, 0, &a));
    TG_TRY_GOTO(tg_rsqrt(&t[0], a));
    TG_TRY_GOTO(tg_pow_scalar(&t[1], t[0], 3.0));
    TG_TRY_GOTO(tg_mul_scalar(&t[2], t[1], -0.5));
    TG_TRY_GOTO(tg_mul(&gi[0], g, t[2]));
done:
    release_tmp(t);
    return rc;
}

/* d tan a = g * (1 + t * t), t = tan a. */
static int tan_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    tg_tensor *a, *t[NTMP] = {NULL};
    int rc;
    TG_TRY_GOTO(tg__ctx_saved(ctx, 0, &a));
    TG_TRY_GOTO(tg_tan(&t[0], a));
    TG_TRY_GOTO(tg_mul(&t[1], t[0], t[0]));
    TG_TRY_GOTO(tg_add_scalar(&t[2], t[1], 1.0));
    TG_TRY_GOTO(tg_mul(&gi[0], g, t[2]));
done:
    release_tmp(t);
    return rc;
}

/* g / (a * a + s): atan (s = 1) and atanh (s = -1 with the sign taken by
 * rsub: g / (1 - a * a)). */
static int g_over_square(tg_ctx *ctx, tg_tensor *g, bool one_minus, tg_tensor **gi)
{
    tg_tensor *a, *t[NTMP] = {NULL};
    int rc;
    TG_TRY_GOTO(tg__ctx_saved(ctx, 0, &a));
    TG_TRY_GOTO(tg_mul(&t[0], a, a));
    if (one_minus) TG_TRY_GOTO(tg_rsub_scalar(&t[1], t[0], 1.0));
    else TG_TRY_GOTO(tg_add_scalar(&t[1], t[0], 1.0));
    TG_TRY_GOTO(tg_div(&gi[0], g, t[1]));
done:
    release_tmp(t);
    return rc;
}

static int atan_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    return g_over_square(ctx, g, false, gi);
}

static int atanh_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    return g_over_square(ctx, g, true, gi);
}

/* g * sgn * rsqrt(q), q = 1 - a * a (kind 0), a * a + 1 (kind 1) or
 * a * a - 1 (kind 2): asin, acos (sgn -1), asinh, acosh. */
static int g_rsqrt_square(tg_ctx *ctx, tg_tensor *g, int kind, bool negate, tg_tensor **gi)
{
    tg_tensor *a, *t[NTMP] = {NULL};
    int rc;
    TG_TRY_GOTO(tg__ctx_saved(ctx, 0, &a));
    TG_TRY_GOTO(tg_mul(&t[0], a, a));
    if (kind == 0) TG_TRY_GOTO(tg_rsub_scalar(&t[1], t[0], 1.0));
    else TG_TRY_GOTO(tg_add_scalar(&t[1], t[0], kind == 1 ? 1.0 : -1.0));
    TG_TRY_GOTO(tg_rsqrt(&t[2], t[1]));
    if (negate) TG_TRY_GOTO(tg_neg(&t[3], t[2]));
    TG_TRY_GOTO(tg_mul(&gi[0], g, negate ? t[3] : t[2]));
done:
    release_tmp(t);
    return rc;
}

static int asin_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    return g_rsqrt_square(ctx, g, 0, false, gi);
}

static int acos_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    return g_rsqrt_square(ctx, g, 0, true, gi);
}

static int asinh_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    return g_rsqrt_square(ctx, g, 1, false, gi);
}

static int acosh_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    return g_rsqrt_square(ctx, g, 2, false, gi);
}

static int sinh_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    return tg__unary_g_times(ctx, g, tg_cosh, 1.0, gi);
}

static int cosh_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    return tg__unary_g_times(ctx, g, tg_sinh, 1.0, gi);
}

static int exp2_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    return tg__unary_g_times(ctx, g, tg_exp2, M_LN2, gi);
}

/* g / (a * c): log2 (c = ln 2) and log10 (c = ln 10). */
static int g_over_scaled(tg_ctx *ctx, tg_tensor *g, double c, tg_tensor **gi)
{
    tg_tensor *a, *t[NTMP] = {NULL};
    int rc;
    TG_TRY_GOTO(tg__ctx_saved(ctx, 0, &a));
    TG_TRY_GOTO(tg_mul_scalar(&t[0], a, c));
    TG_TRY_GOTO(tg_div(&gi[0], g, t[0]));
done:
    release_tmp(t);
    return rc;
}

static int log2_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    return g_over_scaled(ctx, g, M_LN2, gi);
}

static int log10_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    return g_over_scaled(ctx, g, M_LN10, gi);
}

/* d logsigmoid(a) = g * sigmoid(-a). */
static int logsigmoid_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    tg_tensor *a, *t[NTMP] = {NULL};
    int rc;
    TG_TRY_GOTO(tg__ctx_saved(ctx, 0, &a));
    TG_TRY_GOTO(tg_neg(&t[0], a));
    TG_TRY_GOTO(tg_sigmoid(&t[1], t[0]));
    TG_TRY_GOTO(tg_mul(&gi[0], g, t[1]));
done:
    release_tmp(t);
    return rc;
}

#define SCHEMA(op, policy, formula)                                           \
    static const tg_op_schema op##_op = {.name = #op, .arity = 1, .amp = policy,    \
                                   .forward = op##_forward, .backward = op##_backward, \
                                   .double_backward = true, .vjp = formula}
/* FP32 where torch's autocast lists the op as fp32 (and exp2 as exp). */
SCHEMA(reciprocal, TG_AMP_FP32, "da = -g / a^2");
SCHEMA(rsqrt, TG_AMP_FP32, "da = -g / (2 a^(3/2))");
SCHEMA(tan, TG_AMP_FP32, "da = g * (1 + tan(a)^2)");
SCHEMA(atan, TG_AMP_KEEP, "da = g / (1 + a^2)");
SCHEMA(asin, TG_AMP_FP32, "da = g / sqrt(1 - a^2)");
SCHEMA(acos, TG_AMP_FP32, "da = -g / sqrt(1 - a^2)");
SCHEMA(sinh, TG_AMP_FP32, "da = g * cosh(a)");
SCHEMA(cosh, TG_AMP_FP32, "da = g * sinh(a)");
SCHEMA(asinh, TG_AMP_KEEP, "da = g / sqrt(a^2 + 1)");
SCHEMA(acosh, TG_AMP_KEEP, "da = g / sqrt(a^2 - 1)");
SCHEMA(atanh, TG_AMP_KEEP, "da = g / (1 - a^2)");
SCHEMA(log2, TG_AMP_FP32, "da = g / (a ln 2)");
SCHEMA(log10, TG_AMP_FP32, "da = g / (a ln 10)");
SCHEMA(exp2, TG_AMP_FP32, "da = g * 2^a * ln 2");
/* KEEP, as the activations (torch's autocast does not list log_sigmoid). */
SCHEMA(logsigmoid, TG_AMP_KEEP, "da = g * sigmoid(-a)");

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__unary_math_ops[] = {
    &reciprocal_op, &rsqrt_op, &tan_op,  &atan_op,  &asin_op, &acos_op,  &sinh_op,
    &cosh_op,       &asinh_op, &acosh_op, &atanh_op, &log2_op, &log10_op, &exp2_op,
    &logsigmoid_op};
static_assert(sizeof tg__unary_math_ops / sizeof tg__unary_math_ops[0] == TG__unary_math_N,
              "src/ops/families.h must count the unary_math ops");

#define MATH_CALL(op)                                                         \
    int tg_##op(tg_tensor **out, tg_tensor *a)                                \
    {                                                                         \
        tg_tensor *in[1] = {a};                                               \
        return tg_op_call(&op##_op, out, 1, in, NULL, 0);                     \
    }
/* tg_reciprocal ... tg_exp2, tg_logsigmoid. */
MATH_CALL(reciprocal)
MATH_CALL(rsqrt)
MATH_CALL(tan)
MATH_CALL(atan)
MATH_CALL(asin)
MATH_CALL(acos)
MATH_CALL(sinh)
MATH_CALL(cosh)
MATH_CALL(asinh)
MATH_CALL(acosh)
MATH_CALL(atanh)
MATH_CALL(log2)
MATH_CALL(log10)
MATH_CALL(exp2)
MATH_CALL(logsigmoid)
