/* src/ops/smooth_l1.c - smooth L1 and Huber losses, as
 * torch.nn.functional.smooth_l1_loss and huber_loss: the ops
 * smooth_l1_loss, huber_loss and their gradient smooth_l1_backward.
 *
 * With d = x - t and b = beta (smooth L1) or delta (Huber):
 *   smooth_l1: l = d^2 / (2 b)   if |d| < b,   |d| - b / 2       otherwise
 *   huber:     l = d^2 / 2       if |d| < b,   b (|d| - b / 2)   otherwise
 * so huber = b smooth_l1, and smooth L1 with b = 0 is |d|.  The gradient is
 *   dl/dx = g s(d),  dl/dt = g s(-d)  (= -g s(d) but at b = 0, d = 0),
 *   s(d) = -1 if d <= -b,  1 if d >= b,  d / b otherwise     (smooth L1)
 *   s(d) = -b if d <= -b,  b if d >= b,  d otherwise         (Huber)
 * tested in that order, as PyTorch's kernels do: at b = 0, s(0) = -1, and
 * both gradients are -g at d = 0 (PyTorch's).
 * smooth_l1_backward(g, d) = g s(d) is an op; it is linear in g, so its
 * gradient for g is smooth_l1_backward again, and its gradient for d is
 * g gg s'(d) with s'(d) = [|d| < b] / b (smooth L1) or [|d| < b] (Huber), a
 * constant mask (0 at |d| = b, as PyTorch's double backward).  So
 * derivatives of every order come from these ops and products.
 */
#include <assert.h>
#include <math.h>
#include <stdbool.h>

#include "core/core.h"
#include "autograd/tape.h"
#include "ops/elementwise.h"
#include "ops/families.h"
#include "ops/loss.h"
#include "ops/pointwise_internal.h"
#include "tapegrad/ops.h"

typedef struct sl1_params {
    double b;    /* beta or delta */
    bool huber;
} sl1_params;

/* a = x, b = t, s = beta or delta; the kernels' T is float or double. */
TG_EW_BINARY_KERNEL(k_smooth_l1, fabs(a - b) < s ? 0.5 * (a - b) * (a - b) / s
                                                 : fabs(a - b) - 0.5 * s)
TG_EW_BINARY_KERNEL(k_huber, fabs(a - b) < s ? 0.5 * (a - b) * (a - b)
                                             : s * (fabs(a - b) - 0.5 * s))
/* a = g, b = d: g s(d). */
TG_EW_BINARY_KERNEL(k_smooth_l1_grad, b <= -s ? -a : b >= s ? a : b / s * a)
TG_EW_BINARY_KERNEL(k_huber_grad, b <= -s ? -s * a : b >= s ? s * a : b * a)

/* s'(d), a constant of the backward's backward. */
static double slope(double d, const void *user)
{
    const sl1_params *p = user;
    if (!(fabs(d) < p->b)) return 0.0;
    return p->huber ? 1.0 : 1.0 / p->b;
}

static const char *op_name(const sl1_params *p)
{
    return p->huber ? "huber_loss" : "smooth_l1_loss";
}

/* Two float inputs of one dtype (dispatch has promoted them) and one shape;
 * the result has both. */
static int sl1_shape(int n, tg_tensor *const *in, const void *params, tg_dtype *dtype,
                     int *ndim, int64_t *shape)
{
    const char *op = params ? op_name(params) : "smooth_l1";
    TG_CHECK(params != NULL, TG_EINVAL, "%s: params must not be NULL", op);
    return tg__loss_same_shape(op, n, in, dtype, ndim, shape);
}

/* beta >= 0 (0: L1), delta > 0; NaN neither. */
static int check_params(const sl1_params *p)
{
    if (p->huber)
        TG_CHECK(p->b > 0, TG_EINVAL, "huber_loss: delta=%g must be > 0", p->b);
    else
        TG_CHECK(p->b >= 0, TG_EINVAL, "smooth_l1_loss: beta=%g must be >= 0", p->b);
    return TG_OK;
}

static int sl1_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                       const void *params)
{
    (void)n;
    const sl1_params *p = params;
    TG_TRY(check_params(p));
    TG_TRY(tg__ew_binary(op_name(p), out, in[0], in[1], p->huber ? k_huber : k_smooth_l1,
                         p->b));
    if (ctx) {
        tg__ctx_save(ctx, in[0]);
        tg__ctx_save(ctx, in[1]);
    }
    return TG_OK;
}

static const tg_op_schema sl1b_op;

/* Input i's gradient: smooth_l1_backward(g, in[i] - in[1 - i]). */
static int grad_of(tg_ctx *ctx, tg_tensor *g, int i, tg_tensor **gi)
{
    tg_tensor *a, *b, *d = NULL;
    TG_TRY(tg__ctx_saved(ctx, i, &a));
    TG_TRY(tg__ctx_saved(ctx, 1 - i, &b));
    int rc = tg_sub(&d, a, b);
    if (rc == TG_OK)
        rc = tg_op_call(&sl1b_op, gi, 2, (tg_tensor *[]){g, d}, tg__ctx_params(ctx),
                        sizeof(sl1_params));
    tg_tensor_release(d);
    return rc;
}

/* dl/dx = g s(x - t) and dl/dt = g s(t - x), as PyTorch's derivatives
 * (which swap the operands rather than negate): -g s(x - t) but at b = 0
 * and x = t, where both are -g. */
static int sl1_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    if (tg__ctx_needs_grad(ctx, 0)) TG_TRY(grad_of(ctx, g, 0, &gi[0]));
    if (tg__ctx_needs_grad(ctx, 1)) {
        int rc = grad_of(ctx, g, 1, &gi[1]);
        if (rc < 0) {
            tg_tensor_release(gi[0]);
            gi[0] = NULL;
            return rc;
        }
    }
    return TG_OK;
}

/* g s(d), in g and d's dtype. */
static int sl1b_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                        const void *params)
{
    (void)n;
    const sl1_params *p = params;
    TG_TRY(check_params(p));
    TG_TRY(tg__ew_binary("smooth_l1_backward", out, in[0], in[1],
                         p->huber ? k_huber_grad : k_smooth_l1_grad, p->b));
    if (ctx) {
        tg__ctx_save(ctx, in[0]);
        tg__ctx_save(ctx, in[1]);
    }
    return TG_OK;
}

/* For g: smooth_l1_backward(gg, d).  For d: gg g s'(d). */
static int sl1b_backward(tg_ctx *ctx, tg_tensor *gg, tg_tensor **gi)
{
    const sl1_params *p = tg__ctx_params(ctx);
    tg_tensor *g, *d, *m = NULL, *ggg = NULL;
    int rc;
    TG_TRY_GOTO(tg__ctx_saved(ctx, 0, &g));
    TG_TRY_GOTO(tg__ctx_saved(ctx, 1, &d));
    if (tg__ctx_needs_grad(ctx, 0))
        TG_TRY_GOTO(tg_op_call(&sl1b_op, &gi[0], 2, (tg_tensor *[]){gg, d}, p, sizeof *p));
    if (tg__ctx_needs_grad(ctx, 1)) {
        TG_TRY_GOTO(tg__map_f64(&m, d, d->dtype, slope, p));
        TG_TRY_GOTO(tg_mul(&ggg, gg, g));
        TG_TRY_GOTO(tg_mul(&gi[1], ggg, m));
    }
done:
    tg_tensor_release(m);
    tg_tensor_release(ggg);
    if (rc < 0) {
        tg_tensor_release(gi[0]);
        gi[0] = NULL;
    }
    return rc;
}

/* FP32, as the other losses: inside an autocast scope f16/bf16 inputs are
 * cast to f32; outside, mixed float dtypes are promoted. */
static const tg_op_schema smooth_l1_op = {.name = "smooth_l1_loss", .arity = 2,
                                          .amp = TG_AMP_FP32, .forward = sl1_forward,
                                          .backward = sl1_backward, .shape = sl1_shape,
                                          .double_backward = true,
                                          .scalar = "beta",
                                          .vjp = "dx = smooth_l1_backward(g, x - t): "
                                                 "g * clamp((x - t) / beta, -1, 1); "
                                                 "dt = smooth_l1_backward(g, t - x)"};
static const tg_op_schema huber_op = {.name = "huber_loss", .arity = 2, .amp = TG_AMP_FP32,
                                      .forward = sl1_forward, .backward = sl1_backward,
                                      .shape = sl1_shape, .double_backward = true,
                                      .scalar = "delta",
                                      .vjp = "dx = smooth_l1_backward(g, x - t): g * clamp(x - t, "
                                             "-delta, delta); dt = smooth_l1_backward(g, t - x)"};
static const tg_op_schema sl1b_op = {.name = "smooth_l1_backward", .arity = 2,
                                     .amp = TG_AMP_FP32, .forward = sl1b_forward,
                                     .backward = sl1b_backward, .shape = sl1_shape,
                                     .double_backward = true,
                                     .vjp = "dg = smooth_l1_backward(g', d), "
                                            "dd = g' * g * [|d| < beta] (divided by beta for "
                                            "smooth_l1_loss)"};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__smooth_l1_ops[] = {&smooth_l1_op, &huber_op, &sl1b_op};
static_assert(sizeof tg__smooth_l1_ops / sizeof tg__smooth_l1_ops[0] == TG__smooth_l1_N,
              "src/ops/families.h must count the smooth_l1 ops");

/* ---- tg_smooth_l1_loss, tg_huber_loss ---------------------------------- */

static int sl1_loss(tg_tensor **out, tg_tensor *input, tg_tensor *target, tg_reduction red,
                    sl1_params p)
{
    const tg_op_schema *op = p.huber ? &huber_op : &smooth_l1_op;
    TG_TRY(tg__loss_check_pair(op->name, out, input, target, red));
    TG_TRY(check_params(&p));
    tg_tensor *l = NULL;
    int rc = tg_op_call(op, &l, 2, (tg_tensor *[]){input, target}, &p, sizeof p);
    if (rc == TG_OK) rc = tg__loss_reduce(out, l, red);
    tg_tensor_release(l);
    return rc;
}

/* The ops run on the library's behalf; only the result goes to the
 * caller's scope (tapegrad/scope.h). */
int tg_smooth_l1_loss(tg_tensor **out, tg_tensor *input, tg_tensor *target, tg_reduction red,
                      double beta)
{
    tg__lib_enter();
    int rc = sl1_loss(out, input, target, red, (sl1_params){.b = beta, .huber = false});
    tg__lib_leave();
    return tg__scope_capture(out, rc);
}

int tg_huber_loss(tg_tensor **out, tg_tensor *input, tg_tensor *target, tg_reduction red,
                  double delta)
{
    tg__lib_enter();
    int rc = sl1_loss(out, input, target, red, (sl1_params){.b = delta, .huber = true});
    tg__lib_leave();
    return tg__scope_capture(out, rc);
}
