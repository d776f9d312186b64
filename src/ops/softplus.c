/* src/ops/softplus.c - softplus(x) = log(1 + e^(beta x)) / beta, and x itself
 * where beta x > threshold (torch.nn.functional.softplus, defaults beta 1,
 * threshold 20).
 *
 * d softplus / dx = sigmoid(beta x) below the threshold and 1 above it.  The
 * backward builds that from differentiable ops (sigmoid, mul, add) with the
 * above-threshold mask as a constant, so it can be differentiated again. */
#include <assert.h>
#include <math.h>

#include "ops/families.h"
#include "ops/pointwise_internal.h"
#include "tapegrad/ops.h"

typedef struct softplus_params {
    double beta, threshold;
} softplus_params;

static double softplus1(double x, const void *user)
{
    const softplus_params *p = user;
    double bx = p->beta * x;
    if (bx > p->threshold) return x;
    /* log1p(e^bx) without overflow: max(bx, 0) + log1p(e^-|bx|). */
    return ((bx > 0 ? bx : 0.0) + log1p(exp(-fabs(bx)))) / p->beta;
}

static double above(double x, const void *user)
{
    const softplus_params *p = user;
    return p->beta * x > p->threshold ? 1.0 : 0.0;
}

static int softplus_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                            const void *params)
{
    TG_TRY(tg__ew_check_float("softplus", 0, in[0]));
    TG_TRY(tg__map_f64(out, in[0], in[0]->dtype, softplus1, params));
    if (ctx) tg__ctx_save(ctx, in[0]);
    return TG_OK;
}

/* dx = g * (s + m (1 - s)), s = sigmoid(beta x), m = [beta x > threshold]. */
static int softplus_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    const softplus_params *p = tg__ctx_params(ctx);
    tg_tensor *x, *t[6] = {NULL};
    int rc;
    if ((rc = tg__ctx_saved(ctx, 0, &x)) < 0) return rc;
    if ((rc = tg_mul_scalar(&t[0], x, p->beta)) < 0) goto done;
    if ((rc = tg_sigmoid(&t[1], t[0])) < 0) goto done;
    if ((rc = tg__map_f64(&t[2], x, x->dtype, above, p)) < 0) goto done;
    if ((rc = tg_rsub_scalar(&t[3], t[1], 1.0)) < 0) goto done;
    if ((rc = tg_mul(&t[4], t[3], t[2])) < 0) goto done;
    if ((rc = tg_add(&t[5], t[1], t[4])) < 0) goto done;
    rc = tg_mul(&gi[0], g, t[5]);
done:
    for (int i = 0; i < 6; i++) tg_tensor_release(t[i]);
    return rc;
}

static const tg_op_schema softplus_op = {.name = "softplus", .arity = 1, .amp = TG_AMP_FP32,
                                   .forward = softplus_forward,
                                   .backward = softplus_backward, .double_backward = true,
                                   .vjp = "da = g * sigmoid(beta a), = g above the threshold"};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__softplus_ops[] = {&softplus_op};
static_assert(sizeof tg__softplus_ops / sizeof tg__softplus_ops[0] == TG__softplus_N,
              "src/ops/families.h must count the softplus ops");

int tg_softplus(tg_tensor **out, tg_tensor *a, double beta, double threshold)
{
    TG_CHECK(isfinite(beta) && beta > 0, TG_EINVAL, "softplus: beta=%g must be finite and > 0",
             beta);
    TG_CHECK(!isnan(threshold), TG_EINVAL, "softplus: threshold must not be NaN");
    softplus_params prm = {.beta = beta, .threshold = threshold};
    tg_tensor *in[1] = {a};
    return tg_op_call(&softplus_op, out, 1, in, &prm, sizeof prm);
}
