/* src/ops/selu.c - selu and celu (F.selu, F.celu), torch's elu kernel with
 * a scale and an input scale:
 *   y = x * pos                      where x > 0 (NaN too),
 *   y = neg * (e^(x * in) - 1)       where x <= 0,
 * selu: pos = scale, neg = alpha * scale, in = 1 (torch's SELU_ALPHA and
 * SELU_SCALE); celu(alpha): pos = 1, neg = alpha, in = 1 / alpha.
 *
 * The coefficients are those torch's kernel uses: each converted to f32
 * unless x is f64, neg the f32 product of the converted alpha and scale,
 * and x * in rounded as torch's f32 product.  The positive side is then
 * torch's bits (x * pos is exact in double and rounds once).  e^t - 1 is
 * expm1 in double, as tg_elu's (so celu(x, 1) is elu(x, 1) bit for bit), and
 * small negative x keep their value where torch's f32 kernel cancels; the
 * result passes through f32 before a bf16 or f16 rounding, as torch's bf16
 * kernel rounds its f32 result.
 *
 * The gradient is torch's elu_backward: g * pos where x > 0, g * in * neg *
 * e^(x * in) elsewhere (so neg * in at 0, and NaN at NaN, as torch's
 * vectorized kernel; its scalar tail loop gives g * pos there), built from a
 * constant mask, mul_scalar, exp, mul and where, so it is differentiable
 * again.  A bf16 or f16 x takes it in f32, rounded once at the end, as
 * torch's bf16 kernel. */
#include <assert.h>
#include <math.h>

#include "core/core.h"
#include "autograd/tape.h"
#include "ops/families.h"
#include "ops/pointwise_internal.h"
#include "tapegrad/ops.h"

/* torch's SELU_ALPHA and SELU_SCALE (aten/src/ATen/native/Activation.cpp) */
#define SELU_ALPHA 1.6732632423543772848170429916717
#define SELU_SCALE 1.0507009873554804934193349852946

typedef struct eluk_params {
    double neg, pos, in;   /* in x's compute dtype (f32 unless x is f64) */
    bool f32;              /* round x * in and the result through f32 */
} eluk_params;

static double eluk1(double x, const void *user)
{
    const eluk_params *p = user;
    double y;
    if (x > 0 || x != x) {
        y = x * p->pos;
    } else {
        double t = x * p->in;
        if (p->f32) t = (float)t;
        y = p->neg * (t == 0 ? 0.0 : expm1(t));   /* -0.0 gives neg * +0.0 */
    }
    return p->f32 ? (double)(float)y : y;
}

static int eluk_forward(tg_ctx *ctx, const char *name, tg_tensor **out, tg_tensor *x,
                        const void *params)
{
    TG_TRY(tg__ew_check_float(name, 0, x));
    TG_TRY(tg__map_f64(out, x, x->dtype, eluk1, params));
    if (ctx) tg__ctx_save(ctx, x);
    return TG_OK;
}

static int selu_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                        const void *params)
{
    (void)n;
    return eluk_forward(ctx, "selu", out, in[0], params);
}

static int celu_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                        const void *params)
{
    (void)n;
    return eluk_forward(ctx, "celu", out, in[0], params);
}

/* gi = where(x > 0, g * pos, ((g * in) * neg) * e^(x * in)), torch's order
 * of products, in x's dtype (f32 for a half x); NaN takes the second form,
 * so NaN, as torch's vectorized kernel. */
static int eluk_grad(tg_tensor *x, tg_tensor *g, const void *params, tg_tensor **gi)
{
    const eluk_params *p = params;
    enum { N = 6 };
    tg_tensor *t[N] = {NULL};
    int rc;
    TG_TRY_GOTO(tg_gt_scalar(&t[0], x, 0.0));   /* a constant mask; NaN is not in it */
    TG_TRY_GOTO(p->in == 1.0 ? tg_exp(&t[1], x) : tg_mul_scalar(&t[5], x, p->in));
    if (t[5]) TG_TRY_GOTO(tg_exp(&t[1], t[5]));
    TG_TRY_GOTO(p->in == 1.0 ? tg_mul_scalar(&t[2], g, p->neg) : tg_mul_scalar(&t[4], g, p->in));
    if (t[4]) TG_TRY_GOTO(tg_mul_scalar(&t[2], t[4], p->neg));
    TG_TRY_GOTO(tg_mul(&t[3], t[2], t[1]));
    tg_tensor_release(t[4]);
    t[4] = NULL;
    if (p->pos != 1.0) TG_TRY_GOTO(tg_mul_scalar(&t[4], g, p->pos));
    TG_TRY_GOTO(tg_where(gi, t[0], t[4] ? t[4] : g, t[3]));
done:
    for (int i = 0; i < N; i++) tg_tensor_release(t[i]);
    return rc;
}

static int eluk_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    tg_tensor *x;
    TG_TRY(tg__ctx_saved(ctx, 0, &x));
    return tg__grad_in_f32(eluk_grad, tg__ctx_params(ctx), x, g, &gi[0]);
}

#define selu_backward eluk_backward
#define celu_backward eluk_backward

#define SCHEMA(op, formula)                                                   \
    static const tg_op_schema op##_op = {.name = #op, .arity = 1, .amp = TG_AMP_KEEP, \
                                         .forward = op##_forward, .backward = op##_backward, \
                                         .double_backward = true, .vjp = formula}
SCHEMA(selu, "da = g * alpha * scale * exp(a) where a <= 0, g * scale elsewhere");
SCHEMA(celu, "da = g * exp(a / alpha) where a <= 0, g elsewhere");

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__selu_ops[] = {&selu_op, &celu_op};
static_assert(sizeof tg__selu_ops / sizeof tg__selu_ops[0] == TG__selu_N,
              "src/ops/families.h must count the selu ops");

/* The coefficients as torch's kernel has them for x's dtype. */
static eluk_params eluk_coefs(const tg_tensor *x, double alpha, double scale, double in)
{
    if (x && x->dtype == TG_F64)
        return (eluk_params){.neg = alpha * scale, .pos = scale, .in = in, .f32 = false};
    return (eluk_params){.neg = (float)alpha * (float)scale, .pos = (float)scale,
                         .in = (float)in, .f32 = true};
}

int tg_selu(tg_tensor **out, tg_tensor *x)
{
    TG_CHECK(out != NULL, TG_EINVAL, "selu: out must not be NULL");
    eluk_params p = eluk_coefs(x, SELU_ALPHA, SELU_SCALE, 1.0);
    return tg_op_call(&selu_op, out, 1, (tg_tensor *[]){x}, &p, sizeof p);
}

int tg_celu(tg_tensor **out, tg_tensor *x, double alpha)
{
    TG_CHECK(out != NULL, TG_EINVAL, "celu: out must not be NULL");
    TG_CHECK(isfinite(alpha) && alpha != 0, TG_EINVAL,
             "celu: alpha=%g must be finite and not 0", alpha);
    eluk_params p = eluk_coefs(x, alpha, 1.0, 1.0 / alpha);
    return tg_op_call(&celu_op, out, 1, (tg_tensor *[]){x}, &p, sizeof p);
}
