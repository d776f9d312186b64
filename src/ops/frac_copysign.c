/* src/ops/frac_copysign.c - frac, copysign and heaviside (torch.frac,
 * torch.copysign, torch.heaviside).
 *
 * frac(a) = a - trunc(a), exact, with a's sign (frac(-2.25) = -0.25);
 * NaN at +-inf, as torch's; frac(-0.0) = +0.0 (-0 - -0).  Gradient g, as
 * torch's.  Integers are refused (TG_EDTYPE), as torch's.
 *
 * copysign(a, b) = |a| with b's sign (also b's -0.0 and a NaN's sign),
 * a and b broadcast; two integers give f32 and an integer with a float the
 * float's dtype, as torch's promotion; two float dtypes promote (PROMOTE).
 * Gradients, torch's: da = g * copysign(a, b) / a, 0 where a == 0 (NaN at
 * +-inf and NaN), the ratio a constant (+-1); db = 0.
 *
 * heaviside(x, values) = values where x == 0, else 1 where x > 0 and 0
 * elsewhere (NaN gives 0), broadcast; x and values must have one dtype
 * (TG_EDTYPE otherwise, as torch's), integers too (an integer result).
 * torch has no derivative for it: the result is not recorded.
 */
#include <assert.h>
#include <math.h>

#include "core/core.h"
#include "ops/elementwise.h"
#include "autograd/tape.h"
#include "ops/families.h"
#include "tapegrad/ops.h"

TG_EW_UNARY_KERNEL(k_frac, a - trunc(a))
TG_EW_BINARY_KERNEL(k_copysign, copysign(a, b))
/* copysign(a, b) / a, 0 where a == 0: the factor of copysign's a gradient. */
TG_EW_BINARY_KERNEL(k_copysign_ratio, a == 0 ? 0.0 : copysign(a, b) / a)
TG_EW_BINARY_KERNEL(k_heaviside, a == 0 ? b : a > 0 ? 1.0 : 0.0)

static int frac_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                        const void *params)
{
    return tg__ew_unary("frac", out, in[0], k_frac, 0.0);
}

/* d frac(a) = g. */
static int frac_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    gi[0] = tg_tensor_retain(g);
    return TG_OK;
}

/* Integer operands promoted as torch's (tg__ew_mixed_to_float, then two
 * integers give f32); the operands the kernel saw are saved. */
static int copysign_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                            const void *params)
{
    tg_tensor *eff[2], *conv[2];
    TG_TRY(tg__ew_mixed_to_float("copysign", in, eff, conv));
    const int rc = tg__ew_binary_float("copysign", out, eff[0], eff[1], k_copysign, 0.0);
    if (rc == TG_OK && ctx) {
        tg__ctx_save(ctx, eff[0]);
        tg__ctx_save(ctx, eff[1]);
    }
    tg_tensor_release(conv[0]);
    tg_tensor_release(conv[1]);
    return rc;
}

/* da = g * r, r = copysign(a, b) / a (0 where a == 0) a constant; db = 0. */
static int copysign_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    tg_tensor *a, *b, *r = NULL, *t = NULL;
    int rc;
    TG_TRY_GOTO(tg__ctx_saved(ctx, 0, &a));
    TG_TRY_GOTO(tg__ctx_saved(ctx, 1, &b));
    if (tg__ctx_needs_grad(ctx, 0)) {
        TG_TRY_GOTO(tg__ew_binary("copysign", &r, a, b, k_copysign_ratio, 0.0));
        TG_TRY_GOTO(tg_mul(&t, g, r));
        TG_TRY_GOTO(tg__ew_grad_to_input(ctx, 0, &t, &gi[0]));
    }
    if (tg__ctx_needs_grad(ctx, 1)) TG_TRY_GOTO(tg_tensor_zeros_like(&gi[1], b));
done:
    tg_tensor_release(r);
    tg_tensor_release(t);
    return tg__ew_grads_finish(rc, gi);
}

/* Two integer tensors of one dtype: where(x == 0, values, x > 0), in
 * their dtype. */
static int heaviside_int(tg_tensor **out, tg_tensor *x, tg_tensor *v)
{
    tg_tensor *eq = NULL, *gt = NULL, *gtc = NULL;
    int rc;
    TG_TRY_GOTO(tg_eq_scalar(&eq, x, 0.0));
    TG_TRY_GOTO(tg_gt_scalar(&gt, x, 0.0));
    TG_TRY_GOTO(tg_to_dtype(&gtc, gt, x->dtype));
    TG_TRY_GOTO(tg_where(out, eq, v, gtc));
done:
    tg_tensor_release(eq);
    tg_tensor_release(gt);
    tg_tensor_release(gtc);
    return rc;
}

static int heaviside_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                             const void *params)
{
    static const char *const names[2] = {"input", "values"};
    for (int i = 0; i < 2; i++)
        TG_CHECK(in[i] != NULL, TG_EINVAL, "heaviside: %s is NULL", names[i]);
    TG_CHECK(in[0]->dtype == in[1]->dtype, TG_EDTYPE,
             "heaviside: input has dtype %s, values %s; one dtype for both (as torch)",
             tg_dtype_name(in[0]->dtype), tg_dtype_name(in[1]->dtype));
    if (!tg_dtype_is_float(in[0]->dtype)) {
        int64_t shape[TG_MAX_DIMS];
        int nd = 0;
        TG_TRY(tg__broadcast_shapes("heaviside", in[0]->ndim, in[0]->shape, in[1]->ndim,
                                    in[1]->shape, &nd, shape));
        return heaviside_int(out, in[0], in[1]);
    }
    return tg__ew_binary("heaviside", out, in[0], in[1], k_heaviside, 0.0);
}

static const tg_op_schema frac_op = {
    .name = "frac", .arity = 1, .amp = TG_AMP_KEEP, .forward = frac_forward,
    .backward = frac_backward, .double_backward = true, .vjp = "da = g", .scalar = NULL};
/* PROMOTE: torch's autocast lists none; float dtypes promote as torch's
 * type promotion. */
static const tg_op_schema copysign_op = {
    .name = "copysign", .arity = 2, .amp = TG_AMP_PROMOTE, .forward = copysign_forward,
    .backward = copysign_backward, .double_backward = true,
    .vjp = "da = g * copysign(a, b) / a (0 at a = 0), db = 0", .scalar = NULL};
/* KEEP: one dtype for both, as torch's; no derivative in torch. */
static const tg_op_schema heaviside_op = {
    .name = "heaviside", .arity = 2, .amp = TG_AMP_KEEP, .forward = heaviside_forward,
    .vjp = "no gradient (torch has no derivative for heaviside)", .scalar = NULL};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__frac_ops[] = {&frac_op, &copysign_op, &heaviside_op};
static_assert(sizeof tg__frac_ops / sizeof tg__frac_ops[0] == TG__frac_N,
              "src/ops/families.h must count the frac ops");

int tg_frac(tg_tensor **out, tg_tensor *a)
{
    return tg_op_call(&frac_op, out, 1, (tg_tensor *[]){a}, NULL, 0);
}

int tg_copysign(tg_tensor **out, tg_tensor *a, tg_tensor *b)
{
    return tg_op_call(&copysign_op, out, 2, (tg_tensor *[]){a, b}, NULL, 0);
}

int tg_heaviside(tg_tensor **out, tg_tensor *x, tg_tensor *values)
{
    TG_CHECK(out != NULL, TG_EINVAL, "heaviside: out is NULL");
    return tg_op_call(&heaviside_op, out, 2, (tg_tensor *[]){x, values}, NULL, 0);
}
