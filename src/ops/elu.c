/* src/ops/elu.c - elu(x, alpha): x where x > 0, alpha * (e^x - 1)
 * elsewhere (F.elu).
 *
 * Values: e^x - 1 as expm1 in double, rounded once, so small negative x
 * keep their value (torch's f32 kernel takes exp(x) - 1 in f32, which
 * cancels to 0 near 0); elu(-0.0) is +0.0 as torch's.
 *
 * Gradient, as torch's elu_backward: g * alpha * e^x where x <= 0 (alpha
 * at x = 0), g elsewhere (NaN too), with the mask x <= 0 a constant and the rest
 * exp, mul_scalar, mul and where, so differentiable again. */
#include <assert.h>
#include <math.h>

#include "core/core.h"
#include "autograd/tape.h"
#include "ops/elementwise.h"
#include "ops/families.h"
#include "tapegrad/ops.h"

typedef struct elu_params {
    double alpha;
} elu_params;

TG_EW_UNARY_KERNEL(k_elu, a > 0 ? (double)a : s * (a == 0 ? 0.0 : expm1((double)a)))

static int elu_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                       const void *params)
{
    (void)n;
    TG_TRY(tg__ew_unary("elu", out, in[0], k_elu, ((const elu_params *)params)->alpha));
    const int rc = ctx ? tg__ctx_save(ctx, in[0]) : TG_OK;
    if (rc < 0) {
        tg_tensor_release(*out);
        *out = NULL;
    }
    return rc;
}

static int elu_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    const double alpha = ((const elu_params *)tg__ctx_params(ctx))->alpha;
    tg_tensor *x, *m = NULL, *e = NULL, *ae = NULL, *t = NULL;
    int rc;
    TG_TRY_GOTO(tg__ctx_saved(ctx, 0, &x));
    TG_TRY_GOTO(tg_le_scalar(&m, x, 0.0));   /* a constant mask; NaN is not in it */
    TG_TRY_GOTO(tg_exp(&e, x));
    TG_TRY_GOTO(tg_mul_scalar(&ae, e, alpha));
    TG_TRY_GOTO(tg_mul(&t, g, ae));
    TG_TRY_GOTO(tg_where(&gi[0], m, t, g));
done:
    tg_tensor_release(m);
    tg_tensor_release(e);
    tg_tensor_release(ae);
    tg_tensor_release(t);
    return rc;
}

static const tg_op_schema elu_op = {.name = "elu", .arity = 1, .amp = TG_AMP_KEEP,
                                    .forward = elu_forward, .backward = elu_backward,
                                    .double_backward = true,
                                    .vjp = "da = g * alpha * exp(a) where a <= 0, g elsewhere",
                                    .scalar = "alpha"};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__elu_ops[] = {&elu_op};
static_assert(sizeof tg__elu_ops / sizeof tg__elu_ops[0] == TG__elu_N,
              "src/ops/families.h must count the elu ops");

int tg_elu(tg_tensor **out, tg_tensor *x, double alpha)
{
    TG_CHECK(out != NULL, TG_EINVAL, "elu: out must not be NULL");
    TG_CHECK(isfinite(alpha), TG_EINVAL, "elu: alpha=%g must be finite", alpha);
    /* alpha in the dtype the kernel computes in, as torch's: f64 for f64, f32
     * for f32 and the half types */
    elu_params p = {.alpha = x && x->dtype == TG_F64 ? alpha : (double)(float)alpha};
    return tg_op_call(&elu_op, out, 1, (tg_tensor *[]){x}, &p, sizeof p);
}
