/* src/ops/shrink.c - hardshrink, softshrink and threshold (F.hardshrink,
 * F.softshrink, F.threshold), their parameters first converted to x's dtype
 * as torch's kernels do, but for softshrink's value, whose lambd torch's
 * bf16 kernel takes in f32 (a bf16 x between bf16(lambd) and lambd is
 * shrunk by the f32 lambd, and its gradient is 0 there):
 *   hardshrink(x, l)   = 0 where -l <= x <= l, x elsewhere (NaN stays),
 *   softshrink(x, l)   = x - l where x > l, x + l where x < -l, 0 elsewhere
 *                        (NaN too, as torch's),
 *   threshold(x, t, v) = v where x <= t, x elsewhere (NaN stays).
 * Computed in double and rounded once (through f32 for bf16 and f16, as
 * torch's bf16 kernels round their f32 result).
 *
 * Gradients, as torch's vectorized CPU kernels (the path nearly every
 * element takes), each g kept where a constant mask holds and 0 elsewhere,
 * so differentiable again:
 *   hardshrink, softshrink: g where x < -l or x > l (0 at +-l and at NaN;
 *                           torch 1.13's scalar tail loop passes g at NaN);
 *   threshold:              g where x > t or x is NaN, 0 where x <= t. */
#include <assert.h>
#include <math.h>
#include <stdint.h>

#include "core/core.h"
#include "autograd/tape.h"
#include "ops/families.h"
#include "ops/pointwise_internal.h"
#include "tapegrad/ops.h"

typedef struct shrink_params {
    double a, b;   /* lambd (a) or threshold and value (a, b), in x's dtype */
    double af;     /* lambd in f32 unless x is f64: softshrink's value */
    bool f32;      /* round the result through f32 (x not f64) */
} shrink_params;

static double out_round(const shrink_params *p, double y)
{
    return p->f32 ? (double)(float)y : y;
}

static double hardshrink1(double x, const void *user)
{
    const shrink_params *p = user;
    return x >= -p->a && x <= p->a ? 0.0 : x;
}

static double softshrink1(double x, const void *user)
{
    const shrink_params *p = user;
    return out_round(p, x > p->af ? x - p->af : x < -p->af ? x + p->af : 0.0);
}

static double threshold1(double x, const void *user)
{
    const shrink_params *p = user;
    return x <= p->a ? p->b : x;
}

/* 1 where x < -l or x > l, else 0 (NaN too). */
static double outside(double x, const void *user)
{
    const shrink_params *p = user;
    return x < -p->a || x > p->a ? 1.0 : 0.0;
}

/* 1 where x > t or x is NaN, else 0. */
static double above(double x, const void *user)
{
    const shrink_params *p = user;
    return x <= p->a ? 0.0 : 1.0;
}

TG_MAP_FORWARD(hardshrink)
TG_MAP_FORWARD(softshrink)
TG_MAP_FORWARD(threshold)

/* gi = where(keep(x), g, 0), keep a constant mask. */
static int mask_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi,
                         double (*keep)(double, const void *))
{
    tg_tensor *x, *m = NULL;
    int rc;
    TG_TRY(tg__ctx_saved(ctx, 0, &x));
    TG_TRY_GOTO(tg__map_f64(&m, x, x->dtype, keep, tg__ctx_params(ctx)));
    TG_TRY_GOTO(tg__where_or_zero(&gi[0], m, g));
done:
    tg_tensor_release(m);
    return rc;
}

static int hardshrink_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    return mask_backward(ctx, g, gi, outside);
}

static int softshrink_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    return mask_backward(ctx, g, gi, outside);
}

static int threshold_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    return mask_backward(ctx, g, gi, above);
}

/* scalar: the schema's scalar parameter (lambd or threshold), first in params. */
#define SCHEMA(op, formula, sym)                                              \
    static const tg_op_schema op##_op = {.name = #op, .arity = 1, .amp = TG_AMP_KEEP, \
                                         .forward = op##_forward, .backward = op##_backward, \
                                         .double_backward = true, .vjp = formula, .scalar = sym}
SCHEMA(hardshrink, "da = g where a < -lambd or a > lambd, 0 elsewhere", "lambd");
SCHEMA(softshrink, "da = g where a < -lambd or a > lambd, 0 elsewhere", "lambd");
SCHEMA(threshold, "da = 0 where a <= threshold, g elsewhere", "threshold");

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__shrink_ops[] = {&hardshrink_op, &softshrink_op, &threshold_op};
static_assert(sizeof tg__shrink_ops / sizeof tg__shrink_ops[0] == TG__shrink_N,
              "src/ops/families.h must count the shrink ops");

static int call(const tg_op_schema *op, tg_tensor **out, tg_tensor *x, double a, double b)
{
    shrink_params p = {.a = a, .b = b, .af = a, .f32 = true};
    if (x) {
        p.a = tg__scalar_in_dtype(x->dtype, a);
        p.b = tg__scalar_in_dtype(x->dtype, b);
        p.f32 = x->dtype != TG_F64;
        if (p.f32) p.af = (float)a;
    }
    return tg_op_call(op, out, 1, (tg_tensor *[]){x}, &p, sizeof p);
}

int tg_hardshrink(tg_tensor **out, tg_tensor *x, double lambd)
{
    TG_CHECK(out != NULL, TG_EINVAL, "hardshrink: out must not be NULL");
    TG_CHECK(!isnan(lambd), TG_EINVAL, "hardshrink: lambd must not be NaN");
    return call(&hardshrink_op, out, x, lambd, 0.0);
}

int tg_softshrink(tg_tensor **out, tg_tensor *x, double lambd)
{
    TG_CHECK(out != NULL, TG_EINVAL, "softshrink: out must not be NULL");
    TG_CHECK(lambd >= 0, TG_EINVAL, "softshrink: lambd=%g must be >= 0", lambd);
    return call(&softshrink_op, out, x, lambd, 0.0);
}

/* y = x <= t ? v : x over n integers of type T (none replaced when the
 * threshold lies below the dtype's range). */
#define THRESHOLD_INT(T)                                                      \
    {                                                                         \
        const T *px = tg_tensor_cdata(c);                                     \
        T *py = tg_tensor_data(r);                                            \
        for (int64_t i = 0; i < n; i++)                                       \
            py[i] = !below && (int64_t)px[i] <= t ? (T)v : px[i];            \
    }

/* threshold of an integer x, as torch's: the threshold and value converted
 * to x's dtype (truncated toward zero; a threshold beyond the dtype's range
 * saturates), the result a new tensor of x's dtype, computed on the
 * integers and not recorded (an integer never requires grad). */
static int threshold_int(tg_tensor **out, tg_tensor *x, double threshold, double value)
{
    const tg_dtype dt = x->dtype;
    const double lo = dt == TG_I8 ? -128.0 : dt == TG_U8 ? 0.0 : dt == TG_I32 ? -0x1p31 : -0x1p63;
    const double hi = dt == TG_I8    ? 127.0
                      : dt == TG_U8  ? 255.0
                      : dt == TG_I32 ? 0x1p31 - 1
                                     : 0x1p63 - 1024;   /* the largest double below 2^63 */
    TG_CHECK(!isnan(threshold), TG_EINVAL, "threshold: threshold must not be NaN for an "
             "integer x");
    TG_CHECK(trunc(value) >= lo && trunc(value) <= hi, TG_EINVAL,
             "threshold: value=%g must fit in x's dtype %s", value, tg_dtype_name(dt));
    const double tt = trunc(threshold);
    const bool below = tt < lo;
    const int64_t t = below ? 0 : tt > hi ? INT64_MAX : (int64_t)tt;
    const int64_t v = (int64_t)trunc(value);
    tg_tensor *c = NULL, *r = NULL;
    TG_TRY(tg_tensor_contiguous(&c, x));
    r = tg__tensor_uninit(dt, x->ndim, x->shape);
    if (!r) {
        tg_tensor_release(c);
        return TG_ENOMEM;
    }
    const int64_t n = tg_tensor_numel(x);
    if (dt == TG_I8) THRESHOLD_INT(int8_t)
    else if (dt == TG_U8) THRESHOLD_INT(uint8_t)
    else if (dt == TG_I32) THRESHOLD_INT(int32_t)
    else THRESHOLD_INT(int64_t)
    tg_tensor_release(c);
    *out = r;
    return TG_OK;
}

int tg_threshold(tg_tensor **out, tg_tensor *x, double threshold, double value)
{
    TG_CHECK(out != NULL, TG_EINVAL, "threshold: out must not be NULL");
    if (x && !tg_dtype_is_float(x->dtype)) return threshold_int(out, x, threshold, value);
    return call(&threshold_op, out, x, threshold, value);
}
