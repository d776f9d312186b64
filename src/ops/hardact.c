/* src/ops/hardact.c - hardtanh, hardsigmoid, hardswish and mish (F.hardtanh,
 * F.hardsigmoid, F.hardswish, F.mish); relu6 is hardtanh(0, 6).
 *
 * Values: computed in double from the input and rounded once to its dtype,
 *   hardtanh(x)    = min(max(x, lo), hi)        NaN and -0.0 stay,
 *   hardsigmoid(x) = min(max(x + 3, 0), 6) / 6   NaN stays,
 *   hardswish(x)   = x * min(max(x + 3, 0), 6) / 6,
 *   mish(x)        = x * tanh(log1p(e^x)),
 * the formulas of torch's kernels (hardswish(-inf) and mish(-inf) are
 * -inf * 0 = NaN there too).
 *
 * Gradients, as torch's vectorized CPU kernels (the path nearly every element
 * of a tensor takes), each from a constant mask and differentiable ops, so
 * they can be differentiated again:
 *   hardtanh:    g where lo < x < hi, 0 elsewhere (the bounds and NaN too);
 *   hardsigmoid: g / 6 where -3 < x < 3, 0 elsewhere;
 *   hardswish:   0 where x <= -3, g where x >= 3, g (x / 3 + 1/2) between
 *                (NaN: NaN);
 *   mish:        g (t + x sigmoid(x) (1 - t^2)), t = tanh(softplus(x))
 *                (NaN at +-inf, as torch's).
 * torch 1.13's scalar tail loop differs at the edges (hardtanh passes g at
 * NaN, hardswish gives 1.5 g at 3 and g at NaN), and its hardswish gives
 * -g/2 at x = -3 where later torch gives 0, as here: the derivative of the
 * flat side, as at 3 it is that of the identity side.  torch's f64
 * hardsigmoid gradient multiplies by 1/6 rounded to f32; here by 1/6.
 *
 * hardtanh (and relu6) of an integer x stays an integer, as torch's: the
 * bounds truncated toward zero, then clamp in x's dtype (int_arith.c), not
 * recorded.  hardsigmoid, hardswish and mish refuse integers, as torch. */
#include <assert.h>
#include <math.h>

#include "core/core.h"
#include "autograd/tape.h"
#include "ops/families.h"
#include "ops/pointwise_internal.h"
#include "tapegrad/ops.h"

typedef struct hardtanh_params {
    double lo, hi;   /* in x's dtype */
} hardtanh_params;

/* min(max(x + 3, 0), 6) with NaN kept (fmin/fmax would drop it). */
static double relu6_shifted(double x)
{
    const double t = x + 3.0;
    return t < 0.0 ? 0.0 : t > 6.0 ? 6.0 : t;
}

static double hardtanh1(double x, const void *user)
{
    const hardtanh_params *p = user;
    return x < p->lo ? p->lo : x > p->hi ? p->hi : x;
}

static double hardsigmoid1(double x, const void *user)
{
    (void)user;
    return relu6_shifted(x) / 6.0;
}

static double hardswish1(double x, const void *user)
{
    (void)user;
    return x * relu6_shifted(x) / 6.0;
}

static double mish1(double x, const void *user)
{
    (void)user;
    return x * tanh(log1p(exp(x)));
}

/* 1 where lo < x < hi, else 0 (NaN too). */
static double inside(double x, const void *user)
{
    const hardtanh_params *p = user;
    return x > p->lo && x < p->hi ? 1.0 : 0.0;
}

/* hardtanh of an integer x is clamp(x, lo, hi) in x's dtype, as torch's:
 * the bounds are already integers (tg_hardtanh). */
static int hardtanh_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                            const void *params)
{
    const hardtanh_params *p = params;
    if (in[0] && !tg_dtype_is_float(in[0]->dtype))
        return tg__int_clamp(out, in[0], true, (int64_t)p->lo, true, (int64_t)p->hi);
    return tg__map_forward(ctx, "hardtanh", out, in[0], hardtanh1, params);
}
TG_MAP_FORWARD(hardsigmoid)
TG_MAP_FORWARD(hardswish)
TG_MAP_FORWARD(mish)

/* gi = where(lo < x < hi, g * s, 0): s = 1 is hardtanh's gradient, s = 1/6
 * with (lo, hi) = (-3, 3) hardsigmoid's. */
static int band_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi, const hardtanh_params *p,
                         double s)
{
    tg_tensor *x, *m = NULL, *t = NULL;
    int rc;
    TG_TRY(tg__ctx_saved(ctx, 0, &x));
    TG_TRY_GOTO(tg__map_f64(&m, x, x->dtype, inside, p));   /* a constant mask */
    if (s != 1.0) TG_TRY_GOTO(tg_mul_scalar(&t, g, s));
    TG_TRY_GOTO(tg__where_or_zero(&gi[0], m, t ? t : g));
done:
    tg_tensor_release(m);
    tg_tensor_release(t);
    return rc;
}

static int hardtanh_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    return band_backward(ctx, g, gi, tg__ctx_params(ctx), 1.0);
}

static int hardsigmoid_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    const hardtanh_params p = {.lo = -3.0, .hi = 3.0};
    return band_backward(ctx, g, gi, &p, 1.0 / 6.0);
}

/* gi = where(x <= -3, 0, where(x >= 3, g, g * (x / 3 + 1/2))), the masks
 * constant, x / 3 + 1/2 differentiable (its derivative g / 3 between). */
static int hardswish_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    enum { N = 6 };
    tg_tensor *x, *t[N] = {NULL};
    int rc;
    TG_TRY(tg__ctx_saved(ctx, 0, &x));
    TG_TRY_GOTO(tg_le_scalar(&t[0], x, -3.0));
    TG_TRY_GOTO(tg_ge_scalar(&t[1], x, 3.0));
    TG_TRY_GOTO(tg_div_scalar(&t[2], x, 3.0));
    TG_TRY_GOTO(tg_add_scalar(&t[3], t[2], 0.5));
    TG_TRY_GOTO(tg_mul(&t[4], g, t[3]));
    TG_TRY_GOTO(tg_where(&t[5], t[1], g, t[4]));
    TG_TRY_GOTO(tg_masked_fill(&gi[0], t[5], t[0], 0.0));
done:
    for (int i = 0; i < N; i++) tg_tensor_release(t[i]);
    return rc;
}

/* d mish = g (t + x s (1 - t^2)), t = tanh(softplus(x)), s = sigmoid(x) =
 * softplus'(x): torch's mish_backward in the same order, from tanh,
 * softplus (no threshold: log1p(e^x) throughout), sigmoid, mul and add. */
static int mish_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    enum { N = 8 };
    tg_tensor *x, *t[N] = {NULL};
    int rc;
    TG_TRY(tg__ctx_saved(ctx, 0, &x));
    TG_TRY_GOTO(tg_softplus(&t[0], x, 1.0, INFINITY));
    TG_TRY_GOTO(tg_tanh(&t[1], t[0]));                  /* t */
    TG_TRY_GOTO(tg_sigmoid(&t[2], x));                  /* s */
    TG_TRY_GOTO(tg_mul(&t[3], t[1], t[1]));
    TG_TRY_GOTO(tg_rsub_scalar(&t[4], t[3], 1.0));      /* 1 - t^2 */
    TG_TRY_GOTO(tg_mul(&t[5], x, t[2]));
    TG_TRY_GOTO(tg_mul(&t[6], t[5], t[4]));
    TG_TRY_GOTO(tg_add(&t[7], t[1], t[6]));
    TG_TRY_GOTO(tg_mul(&gi[0], g, t[7]));
done:
    for (int i = 0; i < N; i++) tg_tensor_release(t[i]);
    return rc;
}

#define SCHEMA(op, formula)                                                   \
    static const tg_op_schema op##_op = {.name = #op, .arity = 1, .amp = TG_AMP_KEEP, \
                                         .forward = op##_forward, .backward = op##_backward, \
                                         .double_backward = true, .vjp = formula}
SCHEMA(hardtanh, "da = g where lo < a < hi, 0 elsewhere");
SCHEMA(hardsigmoid, "da = g / 6 where -3 < a < 3, 0 elsewhere");
SCHEMA(hardswish, "da = 0 where a <= -3, g where a >= 3, g * (a / 3 + 1/2) between");
SCHEMA(mish, "da = g * (t + a sigmoid(a) (1 - t^2)), t = tanh(softplus(a))");

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__hardact_ops[] = {&hardtanh_op, &hardsigmoid_op, &hardswish_op,
                                               &mish_op};
static_assert(sizeof tg__hardact_ops / sizeof tg__hardact_ops[0] == TG__hardact_N,
              "src/ops/families.h must count the hardact ops");

/* The bounds for an integer x, as torch's hardtanh takes them: truncated
 * toward zero to an i64 (TG_EINVAL past its range: inf, 1e30), not negative
 * for u8 (torch: "cannot do hardtanh on an unsigned type with negative
 * limits"), then converted to x's dtype without overflow (i8: 1000 is
 * refused) as torch's clamp. */
static int int_bounds(tg_dtype dt, hardtanh_params *p)
{
    double *b[2] = {&p->lo, &p->hi};
    const char *name[2] = {"min_val", "max_val"};
    for (int i = 0; i < 2; i++) {
        const double t = trunc(*b[i]);
        TG_CHECK(t >= -0x1p63 && t < 0x1p63, TG_EINVAL,
                 "hardtanh: %s=%g cannot be converted to i64 without overflow, as torch's "
                 "bound for an integer x", name[i], *b[i]);
        TG_CHECK(dt != TG_U8 || t >= 0, TG_EINVAL,
                 "hardtanh: %s=%g with x of dtype u8: cannot do hardtanh on an unsigned type "
                 "with negative limits, as torch", name[i], *b[i]);
        TG_TRY(tg__int_in_dtype("hardtanh", name[i], dt, (int64_t)t));
        *b[i] = t;
    }
    return TG_OK;
}

int tg_hardtanh(tg_tensor **out, tg_tensor *x, double min_val, double max_val)
{
    TG_CHECK(out != NULL, TG_EINVAL, "hardtanh: out must not be NULL");
    TG_CHECK(!isnan(min_val) && !isnan(max_val), TG_EINVAL,
             "hardtanh: min_val=%g and max_val=%g must not be NaN", min_val, max_val);
    TG_CHECK(min_val <= max_val, TG_EINVAL,
             "hardtanh: min_val=%g must be <= max_val=%g", min_val, max_val);
    /* the bounds in x's dtype, as torch converts them */
    hardtanh_params p = {.lo = min_val, .hi = max_val};
    if (x && !tg_dtype_is_float(x->dtype)) {
        TG_TRY(int_bounds(x->dtype, &p));
    } else if (x) {
        p.lo = tg__scalar_in_dtype(x->dtype, min_val);
        p.hi = tg__scalar_in_dtype(x->dtype, max_val);
    }
    return tg_op_call(&hardtanh_op, out, 1, (tg_tensor *[]){x}, &p, sizeof p);
}

int tg_relu6(tg_tensor **out, tg_tensor *x) { return tg_hardtanh(out, x, 0.0, 6.0); }

static int call1(const tg_op_schema *op, tg_tensor **out, tg_tensor *x)
{
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", op->name);
    return tg_op_call(op, out, 1, (tg_tensor *[]){x}, NULL, 0);
}

int tg_hardsigmoid(tg_tensor **out, tg_tensor *x) { return call1(&hardsigmoid_op, out, x); }
int tg_hardswish(tg_tensor **out, tg_tensor *x) { return call1(&hardswish_op, out, x); }
int tg_mish(tg_tensor **out, tg_tensor *x) { return call1(&mish_op, out, x); }
