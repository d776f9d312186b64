/* src/ops/xlogy_hypot.c - xlogy, xlog1py and hypot (torch.xlogy,
 * torch.special.xlog1py, torch.hypot), each one op with broadcasting.
 *
 * xlogy(x, y) = x log(y) and xlog1py(x, y) = x log1p(y), as torch 1.13's
 * kernels: NaN where y is NaN, else 0 where x == 0 (also for y = 0, where
 * x log y would be 0 * -inf), else the product, the log rounded to the
 * dtype first as torch's (computed in double: torch's within an ulp).
 * Two integer operands give f32 and an integer with a float the float's
 * dtype, as torch's promotion (the integer converted first).
 * Gradients, torch's:
 *   xlogy:   dx = xlogy(g, y), 0 where x == 0 and y <= 0;  dy = g x / y
 *   xlog1py: dx = xlog1py(g, y), 0 where x == 0 and y <= -1;
 *            dy = g x / (y + 1)
 * written with differentiable ops (the mask a constant of the inputs).
 *
 * hypot(a, b) = sqrt(a^2 + b^2) without overflow or underflow, C's hypot
 * (f64) and hypot in double rounded once for f32 (torch's f32 kernel is
 * within 0.5 ulp too); hypot(+-inf, NaN) = inf.  torch refuses integers
 * (TG_EDTYPE here) and f16 (computed in f32 here).  Gradients
 * da = g a / hypot(a, b), db = g b / hypot(a, b), torch's; NaN at the
 * origin.
 *
 * All three are PROMOTE: torch's autocast lists none, and two float dtypes
 * promote as torch's type promotion does.
 */
#include <assert.h>
#include <math.h>

#include "core/core.h"
#include "ops/elementwise.h"
#include "autograd/tape.h"
#include "ops/families.h"
#include "ops/special_internal.h"
#include "tapegrad/ops.h"

static inline double xlogy_d(double x, double y)
{
    if (isnan(y)) return NAN;
    return x == 0 ? 0.0 : x * log(y);
}

static inline float xlogy_f(float x, float y)
{
    if (isnan(y)) return NAN;
    return x == 0 ? 0.0f : x * (float)log((double)y);
}

static inline double xlog1py_d(double x, double y)
{
    if (isnan(y)) return NAN;
    return x == 0 ? 0.0 : x * log1p(y);
}

static inline float xlog1py_f(float x, float y)
{
    if (isnan(y)) return NAN;
    return x == 0 ? 0.0f : x * (float)log1p((double)y);
}

TG__SP_BINARY_KERNEL(k_xlogy, xlogy_f, xlogy_d)
TG__SP_BINARY_KERNEL(k_xlog1py, xlog1py_f, xlog1py_d)
TG_EW_BINARY_KERNEL(k_hypot, hypot((double)a, (double)b))
/* The masks of the x gradients: 1 where x == 0 and y <= s (s = 0 for xlogy,
 * -1 for xlog1py). */
TG_EW_BINARY_KERNEL(k_zero_mask, a == 0 && b <= s ? 1.0 : 0.0)

/* An integer operand with a float one is converted to the float's dtype
 * first (tg__ew_mixed_to_float), two integers give f32
 * (tg__ew_binary_float); the operands the kernel saw are what the backward
 * reads. */
static int xlogy_like_forward(tg_ctx *ctx, const char *name, tg_tensor **out,
                              tg_tensor *const *in, tg_ew_kernel_fn k)
{
    tg_tensor *eff[2], *conv[2];
    TG_TRY(tg__ew_mixed_to_float(name, in, eff, conv));
    const int rc = tg__ew_binary_float(name, out, eff[0], eff[1], k, 0.0);
    if (rc == TG_OK && ctx) {
        tg__ctx_save(ctx, eff[0]);
        tg__ctx_save(ctx, eff[1]);
    }
    tg_tensor_release(conv[0]);
    tg_tensor_release(conv[1]);
    return rc;
}

static int xlogy_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                         const void *params)
{
    return xlogy_like_forward(ctx, "xlogy", out, in, k_xlogy);
}

static int xlog1py_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                           const void *params)
{
    return xlogy_like_forward(ctx, "xlog1py", out, in, k_xlog1py);
}

/* dx = f(g, y) with 0 where x == 0 and y <= lim; dy = g x / (y + shift).
 * f is tg_xlogy (lim 0, shift 0) or tg_xlog1py (lim -1, shift 1). */
static int xlogy_like_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi,
                               int (*f)(tg_tensor **, tg_tensor *, tg_tensor *), double lim)
{
    tg_tensor *x, *y, *t[4] = {NULL, NULL, NULL, NULL};
    int rc;
    TG_TRY_GOTO(tg__ctx_saved(ctx, 0, &x));
    TG_TRY_GOTO(tg__ctx_saved(ctx, 1, &y));
    if (tg__ctx_needs_grad(ctx, 0)) {
        TG_TRY_GOTO(f(&t[0], g, y));
        TG_TRY_GOTO(tg__ew_binary("xlogy", &t[1], x, y, k_zero_mask, lim));
        TG_TRY_GOTO(tg_masked_fill(&t[2], t[0], t[1], 0.0));
        TG_TRY_GOTO(tg__ew_grad_to_input(ctx, 0, &t[2], &gi[0]));
        tg_tensor_release(t[0]);
        tg_tensor_release(t[1]);
        t[0] = t[1] = NULL;
    }
    if (tg__ctx_needs_grad(ctx, 1)) {
        TG_TRY_GOTO(tg_mul(&t[0], g, x));
        if (lim != 0) TG_TRY_GOTO(tg_add_scalar(&t[1], y, 1.0));
        TG_TRY_GOTO(tg_div(&t[3], t[0], lim != 0 ? t[1] : y));
        TG_TRY_GOTO(tg__ew_grad_to_input(ctx, 1, &t[3], &gi[1]));
    }
done:
    for (int i = 0; i < 4; i++) tg_tensor_release(t[i]);
    return tg__ew_grads_finish(rc, gi);
}

static int xlogy_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    return xlogy_like_backward(ctx, g, gi, tg_xlogy, 0.0);
}

static int xlog1py_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    return xlogy_like_backward(ctx, g, gi, tg_xlog1py, -1.0);
}

static int hypot_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                         const void *params)
{
    TG_TRY(tg__ew_binary("hypot", out, in[0], in[1], k_hypot, 0.0));
    if (ctx) {
        tg__ctx_save(ctx, in[0]);
        tg__ctx_save(ctx, in[1]);
    }
    return TG_OK;
}

/* da = (g * a) / h, db = (g * b) / h, h = hypot(a, b) recomputed (recorded,
 * so differentiable again). */
static int hypot_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    tg_tensor *x[2], *h = NULL, *t[2] = {NULL, NULL};
    int rc;
    TG_TRY_GOTO(tg__ctx_saved(ctx, 0, &x[0]));
    TG_TRY_GOTO(tg__ctx_saved(ctx, 1, &x[1]));
    TG_TRY_GOTO(tg_hypot(&h, x[0], x[1]));
    for (int i = 0; i < 2; i++) {
        if (!tg__ctx_needs_grad(ctx, i)) continue;
        TG_TRY_GOTO(tg_mul(&t[0], g, x[i]));
        TG_TRY_GOTO(tg_div(&t[1], t[0], h));
        TG_TRY_GOTO(tg__ew_grad_to_input(ctx, i, &t[1], &gi[i]));
        tg_tensor_release(t[0]);
        t[0] = NULL;
    }
done:
    tg_tensor_release(h);
    tg_tensor_release(t[0]);
    tg_tensor_release(t[1]);
    return tg__ew_grads_finish(rc, gi);
}

static const tg_op_schema xlogy_op = {
    .name = "xlogy", .arity = 2, .amp = TG_AMP_PROMOTE, .forward = xlogy_forward,
    .backward = xlogy_backward, .double_backward = true,
    .vjp = "dx = xlogy(g, y) (0 where x == 0, y <= 0), dy = g * x / y", .scalar = NULL};
static const tg_op_schema xlog1py_op = {
    .name = "xlog1py", .arity = 2, .amp = TG_AMP_PROMOTE, .forward = xlog1py_forward,
    .backward = xlog1py_backward, .double_backward = true,
    .vjp = "dx = xlog1py(g, y) (0 where x == 0, y <= -1), dy = g * x / (y + 1)",
    .scalar = NULL};
static const tg_op_schema hypot_op = {
    .name = "hypot", .arity = 2, .amp = TG_AMP_PROMOTE, .forward = hypot_forward,
    .backward = hypot_backward, .double_backward = true,
    .vjp = "da = g * a / hypot(a, b), db = g * b / hypot(a, b)", .scalar = NULL};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__xlogy_ops[] = {&xlogy_op, &xlog1py_op, &hypot_op};
static_assert(sizeof tg__xlogy_ops / sizeof tg__xlogy_ops[0] == TG__xlogy_N,
              "src/ops/families.h must count the xlogy ops");

int tg_xlogy(tg_tensor **out, tg_tensor *x, tg_tensor *y)
{
    return tg_op_call(&xlogy_op, out, 2, (tg_tensor *[]){x, y}, NULL, 0);
}

int tg_xlog1py(tg_tensor **out, tg_tensor *x, tg_tensor *y)
{
    return tg_op_call(&xlog1py_op, out, 2, (tg_tensor *[]){x, y}, NULL, 0);
}

int tg_hypot(tg_tensor **out, tg_tensor *a, tg_tensor *b)
{
    return tg_op_call(&hypot_op, out, 2, (tg_tensor *[]){a, b}, NULL, 0);
}
