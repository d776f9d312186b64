/* src/ops/prelu.c - prelu(x, weight): x where x > 0, weight * x elsewhere,
 * with one weight per channel (dim 1 of x) or one for all
 * (torch.nn.functional.prelu).
 *
 * weight is 1-d, of 1 or C elements (C = x's dim 1; an x of fewer than two
 * dims has one channel).  It is read through a view of shape (C, 1, ...)
 * that broadcasts over x's spatial dims, or (1) for a single weight (() for
 * a 0-d x).
 *
 * Values: x > 0 ? x : w * x, the product taken in double and rounded once,
 * so -0.0 stays -0.0 (w > 0) and NaN stays NaN, as torch's.  The result has
 * x's dtype, also under autocast (KEEP): a weight of another float dtype is
 * cast to x's first, by a recorded cast, so its gradient comes back in its
 * own dtype (torch rounds an f32 weight to a bf16 x's dtype the same way).
 *
 * Gradients, as torch's prelu_backward, with m the constant mask x > 0:
 *   dx = where(m, g, g * w)
 *   dw = sum of where(m, 0, g * x) over every dim but the channel's
 * written with where, mul and sum_to_shape, so differentiable again. */
#include <assert.h>

#include "autograd/tape.h"
#include "ops/elementwise.h"
#include "ops/families.h"
#include "ops/prelu_internal.h"
#include "tapegrad/ops.h"

TG_EW_BINARY_KERNEL(k_prelu, a > 0 ? a : (double)b * a)

int tg__prelu_weight_shape(const tg_tensor *x, const tg_tensor *w, int *nd, int64_t *shape)
{
    char sx[96], sw[96];
    tg_shape_str(sx, sizeof sx, x->ndim, x->shape);
    tg_shape_str(sw, sizeof sw, w->ndim, w->shape);
    TG_CHECK(w->ndim == 1, TG_ESHAPE, "prelu: weight is %s but must be 1-d (x is %s)", sw, sx);
    const int64_t c = x->ndim >= 2 ? x->shape[1] : 1;
    TG_CHECK(w->shape[0] == 1 || w->shape[0] == c, TG_ESHAPE,
             "prelu: weight is %s: it must have 1 element or one per channel (%lld, dim 1 "
             "of x %s)",
             sw, (long long)c, sx);
    if (w->shape[0] == 1 || x->ndim < 2) {   /* (1), or () for a 0-d x */
        *nd = x->ndim > 0;
        shape[0] = 1;
        return TG_OK;
    }
    *nd = x->ndim - 1;
    shape[0] = c;
    for (int d = 1; d < *nd; d++) shape[d] = 1;
    return TG_OK;
}

/* w as a view that broadcasts over x (a recorded reshape when grad is on). */
static int weight_view(tg_tensor **wv, const tg_tensor *x, tg_tensor *w)
{
    int nd = 0;
    int64_t shape[TG_MAX_DIMS];
    TG_TRY(tg__prelu_weight_shape(x, w, &nd, shape));
    return tg_reshape(wv, w, nd, shape);
}

static int prelu_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                         const void *params)
{
    (void)n;
    (void)params;
    tg_tensor *x = in[0], *w = in[1], *wv = NULL;
    TG_CHECK(w->dtype == x->dtype || !tg_dtype_is_float(x->dtype), TG_EDTYPE,
             "prelu: weight is %s but x is %s (tg_prelu casts the weight to x's dtype)",
             tg_dtype_name(w->dtype), tg_dtype_name(x->dtype));
    TG_TRY(weight_view(&wv, x, w));
    int rc = tg__ew_binary("prelu", out, x, wv, k_prelu, 0.0);
    tg_tensor_release(wv);
    TG_TRY(rc);
    if (!ctx) return TG_OK;
    rc = tg_op_ctx_save(ctx, x);
    if (rc >= 0) rc = tg_op_ctx_save(ctx, w);
    if (rc < 0) {
        tg_tensor_release(*out);
        *out = NULL;
    }
    return rc;
}

static int prelu_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    tg_tensor *x, *w, *wv = NULL, *m = NULL, *t = NULL, *u = NULL, *s = NULL;
    int rc;
    TG_TRY(tg_op_ctx_saved(ctx, 0, &x));
    TG_TRY(tg_op_ctx_saved(ctx, 1, &w));
    TG_TRY_GOTO(weight_view(&wv, x, w));
    TG_TRY_GOTO(tg_gt_scalar(&m, x, 0.0));   /* a constant mask */
    if (tg_op_ctx_needs_grad(ctx, 0)) {
        TG_TRY_GOTO(tg_mul(&t, g, wv));
        TG_TRY_GOTO(tg_where(&gi[0], m, g, t));
    }
    if (tg_op_ctx_needs_grad(ctx, 1)) {
        TG_TRY_GOTO(tg_mul(&u, g, x));
        TG_TRY_GOTO(tg_masked_fill(&s, u, m, 0.0));
        tg_tensor *sw = NULL;
        TG_TRY_GOTO(tg_sum_to_shape(&sw, s, wv->ndim, wv->shape));
        rc = tg_reshape(&gi[1], sw, 1, w->shape);
        tg_tensor_release(sw);
        TG_TRY_GOTO(rc);
    }
done:
    if (rc < 0) {
        tg_tensor_release(gi[0]);
        gi[0] = NULL;
    }
    tg_tensor_release(wv);
    tg_tensor_release(m);
    tg_tensor_release(t);
    tg_tensor_release(u);
    tg_tensor_release(s);
    return rc;
}

static const tg_op_schema prelu_op = {.name = "prelu", .arity = 2, .amp = TG_AMP_KEEP,
                                      .forward = prelu_forward, .backward = prelu_backward,
                                      .double_backward = true,
                                      .vjp = "dx = g where x > 0, g * w elsewhere; dw = the sum "
                                             "of g * x where x <= 0 over all but the channel dim"};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__prelu_ops[] = {&prelu_op};
static_assert(sizeof tg__prelu_ops / sizeof tg__prelu_ops[0] == TG__prelu_N,
              "src/ops/families.h must count the prelu ops");

int tg_prelu(tg_tensor **out, tg_tensor *x, tg_tensor *weight)
{
    TG_CHECK(out != NULL, TG_EINVAL, "prelu: out must not be NULL");
    TG_CHECK(x != NULL && weight != NULL, TG_EINVAL, "prelu: x and weight must not be NULL");
    if (weight->dtype == x->dtype || !tg_dtype_is_float(x->dtype) ||
        !tg_dtype_is_float(weight->dtype))
        return tg_op_call(&prelu_op, out, 2, (tg_tensor *[]){x, weight}, NULL, 0);
    /* the cast and the op run on the library's behalf; only the result goes
     * to the caller's scope */
    tg_tensor *w = NULL;
    tg__lib_enter();
    int rc = tg_to_dtype(&w, weight, x->dtype);
    if (rc >= 0) rc = tg_op_call(&prelu_op, out, 2, (tg_tensor *[]){x, w}, NULL, 0);
    tg_tensor_release(w);
    tg__lib_leave();
    return tg__scope_capture(out, rc);
}
