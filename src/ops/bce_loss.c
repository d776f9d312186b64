/* src/ops/bce_loss.c - binary cross entropy of probabilities, as
 * torch.nn.functional.binary_cross_entropy: the op bce_loss and tg_bce_loss.
 *
 * For a probability x in [0, 1] and a target y,
 *   l = -(y max(log x, -100) + (1 - y) max(log(1 - x), -100)),
 * the clamp at -100 keeping l finite at x = 0 and x = 1 (PyTorch's rule).
 * The gradients are PyTorch's formulas, written with differentiable ops so
 * that they can be differentiated again:
 *   dl/dx = g (x - y) / max((1 - x) x, eps)
 *   dl/dy = g (log(1 - x) - log x)              (= -g logit(x))
 * eps = 1e-12 (as a float) is PyTorch's EPSILON: it bounds the gradient at
 * x = 0 and x = 1 by 1e12 instead of dividing by 0.  The clamp at -100 is
 * not in the gradients, as it is not in PyTorch's.  A weight multiplies l
 * after the op (a recorded product), so its gradient follows from the
 * product rule.
 */
#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/core.h"
#include "autograd/tape.h"
#include "ops/elementwise.h"
#include "ops/families.h"
#include "ops/loss.h"
#include "tapegrad/ops.h"

/* PyTorch's EPSILON in binary_cross_entropy_backward, 1e-12 rounded to
 * float as its kernel has it (so the gradient at x = 0 is -1.000000004e12
 * in f64 too). */
#define BCE_EPS ((double)1e-12f)

/* One element, x already checked to be in [0, 1]: log(0) = -inf meets the
 * clamp, so l is at most 100 times max(y, 1 - y). */
static double bce1(double x, double y)
{
    return (y - 1) * fmax(log1p(-x), -100.0) - y * fmax(log(x), -100.0);
}

/* a = x, b = y, computed in double and rounded to the kernel's type. */
TG_EW_BINARY_KERNEL(k_bce, bce1(a, b))

/* Refuses an input outside [0, 1] or NaN, as PyTorch's kernel does: its
 * smallest and largest elements (two read-only passes, no copy; a NaN makes
 * both NaN) are compared with the bounds, and only when they fail is the
 * first element at fault looked for, to name it. */
static int check_probabilities(const tg_tensor *x)
{
    const int64_t n = tg_tensor_numel(x);
    if (n == 0) return TG_OK;
    tg_tensor *lo = NULL, *hi = NULL;
    int rc = tg_min(&lo, (tg_tensor *)x);
    if (rc == TG_OK) rc = tg_max(&hi, (tg_tensor *)x);
    double vlo = 0, vhi = 0;
    if (rc == TG_OK) {
        tg_tensor_get_flat(lo, 0, &vlo);
        tg_tensor_get_flat(hi, 0, &vhi);
        if (!(vlo >= 0 && vhi <= 1))
            for (int64_t i = 0; i < n; i++) {
                double v;
                tg_tensor_get_flat(x, i, &v);
                if (!(v >= 0 && v <= 1)) {
                    rc = tg__error(TG_EINVAL, "bce_loss: input element %lld is %g; every "
                                   "element must be a probability in [0, 1] (for logits, "
                                   "use bce_with_logits)", (long long)i, v);
                    break;
                }
            }
    }
    tg_tensor_release(lo);
    tg_tensor_release(hi);
    return rc;
}

/* Input and target of one float dtype (dispatch has promoted them) and one
 * shape; the loss has both. */
static int bce_shape(int n, tg_tensor *const *in, const void *params, tg_dtype *dtype,
                     int *ndim, int64_t *shape)
{
    (void)n;
    (void)params;
    TG_TRY(tg__ew_check_float("bce_loss", 0, in[0]));
    TG_TRY(tg__ew_check_float("bce_loss", 1, in[1]));
    if (!tg_tensor_same_shape(in[0], in[1])) {
        char a[96], b[96];
        tg_shape_str(a, sizeof a, in[0]->ndim, in[0]->shape);
        tg_shape_str(b, sizeof b, in[1]->ndim, in[1]->shape);
        return tg__error(TG_ESHAPE, "bce_loss: target shape %s must equal input shape %s "
                         "(no broadcasting)", b, a);
    }
    *dtype = in[0]->dtype;
    *ndim = in[0]->ndim;
    memcpy(shape, in[0]->shape, (size_t)in[0]->ndim * sizeof *shape);
    return TG_OK;
}

static int bce_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                       const void *params)
{
    (void)n;
    (void)params;
    TG_TRY(check_probabilities(in[0]));
    TG_TRY(tg__ew_binary("bce_loss", out, in[0], in[1], k_bce, 0.0));
    if (ctx) {
        tg__ctx_save(ctx, in[0]);
        tg__ctx_save(ctx, in[1]);
    }
    return TG_OK;
}

/* g (x - y) / max((1 - x) x, eps), left to right as PyTorch's kernel. */
static int grad_input(tg_tensor **gi, tg_tensor *g, tg_tensor *x, tg_tensor *y)
{
    tg_tensor *t[5] = {0};
    int rc;
    TG_TRY_GOTO(tg_sub(&t[0], x, y));
    TG_TRY_GOTO(tg_mul(&t[1], g, t[0]));
    TG_TRY_GOTO(tg_rsub_scalar(&t[2], x, 1.0));
    TG_TRY_GOTO(tg_mul(&t[3], t[2], x));
    TG_TRY_GOTO(tg_clamp(&t[4], t[3], BCE_EPS, NAN));
    TG_TRY_GOTO(tg_div(gi, t[1], t[4]));
done:
    for (int i = 0; i < 5; i++) tg_tensor_release(t[i]);
    return rc;
}

/* g (log(1 - x) - log x). */
static int grad_target(tg_tensor **gt, tg_tensor *g, tg_tensor *x)
{
    tg_tensor *t[4] = {0};
    int rc;
    TG_TRY_GOTO(tg_rsub_scalar(&t[0], x, 1.0));
    TG_TRY_GOTO(tg_log(&t[1], t[0]));
    TG_TRY_GOTO(tg_log(&t[2], x));
    TG_TRY_GOTO(tg_sub(&t[3], t[1], t[2]));
    TG_TRY_GOTO(tg_mul(gt, g, t[3]));
done:
    for (int i = 0; i < 4; i++) tg_tensor_release(t[i]);
    return rc;
}

static int bce_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    tg_tensor *x, *y;
    TG_TRY(tg__ctx_saved(ctx, 0, &x));
    TG_TRY(tg__ctx_saved(ctx, 1, &y));
    if (tg__ctx_needs_grad(ctx, 0)) TG_TRY(grad_input(&gi[0], g, x, y));
    if (tg__ctx_needs_grad(ctx, 1)) {
        int rc = grad_target(&gi[1], g, x);
        if (rc < 0) {
            tg_tensor_release(gi[0]);
            gi[0] = NULL;
            return rc;
        }
    }
    return TG_OK;
}

/* FP32, as the other losses: inside an autocast scope f16/bf16 inputs are
 * cast to f32; outside, mixed float dtypes are promoted. */
static const tg_op_schema bce_loss_op = {.name = "bce_loss", .arity = 2, .amp = TG_AMP_FP32,
                                         .forward = bce_forward, .backward = bce_backward,
                                         .shape = bce_shape, .double_backward = true,
                                         .vjp = "dx = g * (x - t) / max((1 - x) * x, 1e-12), "
                                                "dt = g * (log(1 - x) - log(x))"};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__bce_loss_ops[] = {&bce_loss_op};
static_assert(sizeof tg__bce_loss_ops / sizeof tg__bce_loss_ops[0] == TG__bce_loss_N,
              "src/ops/families.h must count the bce_loss ops");

/* ---- tg_bce_loss ------------------------------------------------------- */

static int bce_loss(tg_tensor **out, tg_tensor *input, tg_tensor *target, tg_tensor *weight,
                    tg_reduction red)
{
    TG_TRY(tg__loss_check_pair("bce_loss", out, input, target, red));
    TG_TRY(tg__loss_check_weight("bce_loss", "weight", weight, input));
    tg_tensor *in[2] = {input, target}, *l = NULL, *lw = NULL;
    int rc;
    TG_TRY_GOTO(tg_op_call(&bce_loss_op, &l, 2, in, NULL, 0));
    /* PROMOTE: an f16/bf16 weight meets an f32 loss in f32 */
    if (weight) TG_TRY_GOTO(tg_mul(&lw, l, weight));
    TG_TRY_GOTO(tg__loss_reduce(out, lw ? lw : l, red));
done:
    tg_tensor_release(l);
    tg_tensor_release(lw);
    return rc;
}

/* The ops run on the library's behalf; only the result goes to the
 * caller's scope (tapegrad/scope.h). */
int tg_bce_loss(tg_tensor **out, tg_tensor *input, tg_tensor *target, tg_tensor *weight,
                tg_reduction red)
{
    tg__lib_enter();
    int rc = bce_loss(out, input, target, weight, red);
    tg__lib_leave();
    return tg__scope_capture(out, rc);
}
