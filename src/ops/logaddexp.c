/* src/ops/logaddexp.c - logaddexp and logaddexp2 (torch.logaddexp,
 * torch.logaddexp2), each one op with broadcasting.
 *
 * logaddexp(a, b) = log(e^a + e^b) in torch 1.13's stable form:
 *   a where a is infinite and a == b (so -inf with -inf is -inf),
 *   else max(a, b) + log1p(e^-|a - b|),
 * and logaddexp2(a, b) = log2(2^a + 2^b) as
 *   max(a, b) + log1p(2^-|a - b|) / ln 2.
 * A NaN operand gives NaN.  torch's steps, each rounded in the dtype (exp,
 * exp2 and log1p computed in double and rounded once: torch's f32 and f64
 * kernels take them from Sleef, within an ulp); f16 and bf16 computed in
 * f32 and rounded once (torch 1.13's CPU kernel refuses f16).
 * Integer operands are refused (TG_EDTYPE), as torch's "not implemented for
 * 'Int'"; two float dtypes promote, as tg_add's (PROMOTE).
 *
 * Gradients, torch's formulas, summed back to each input's shape and
 * written with differentiable ops (so every order is differentiable):
 *   logaddexp:  da = g / (1 + e^(b - a)),  db = g / (1 + e^(a - b))
 *   logaddexp2: da = g / (1 + 2^(b - a)),  db = g / (1 + 2^(a - b))
 * the softmax weights of the two operands; NaN where both are the same
 * infinity (e^(inf - inf)), as torch's.
 */
#include <assert.h>
#include <math.h>

#include "core/core.h"
#include "ops/elementwise.h"
#include "autograd/tape.h"
#include "ops/families.h"
#include "ops/special_internal.h"
#include "tapegrad/ops.h"

/* log(e^a + e^b) in torch's steps, each rounded in the dtype:
 * m + log1p(exp(-|a - b|)), m = max(a, b) (NaN when either is). */
static inline double lae_d(double a, double b)
{
    if (isinf(a) && a == b) return a;
    const double m = isnan(a) || isnan(b) ? NAN : fmax(a, b);
    return m + log1p(exp(-fabs(a - b)));
}

static inline float lae_f(float a, float b)
{
    if (isinf(a) && a == b) return a;
    const float m = isnan(a) || isnan(b) ? NAN : fmaxf(a, b);
    const float e = (float)exp(-(double)fabsf(a - b));
    return m + (float)log1p((double)e);
}

/* log2(2^a + 2^b): m + log1p(exp2(-|a - b|)) * (1 / ln 2). */
static inline double lae2_d(double a, double b)
{
    if (isinf(a) && a == b) return a;
    const double m = isnan(a) || isnan(b) ? NAN : fmax(a, b);
    return m + log1p(exp2(-fabs(a - b))) * (1.0 / M_LN2);
}

static inline float lae2_f(float a, float b)
{
    if (isinf(a) && a == b) return a;
    const float m = isnan(a) || isnan(b) ? NAN : fmaxf(a, b);
    const float e = (float)exp2(-(double)fabsf(a - b));
    return m + (float)log1p((double)e) * (float)(1.0 / M_LN2);
}

TG__SP_BINARY_KERNEL(k_logaddexp, lae_f, lae_d)
TG__SP_BINARY_KERNEL(k_logaddexp2, lae2_f, lae2_d)

static int lae_forward(tg_ctx *ctx, const char *name, tg_tensor **out, tg_tensor *const *in,
                       tg_ew_kernel_fn k)
{
    TG_TRY(tg__ew_binary(name, out, in[0], in[1], k, 0.0));
    if (ctx) {
        tg__ctx_save(ctx, in[0]);
        tg__ctx_save(ctx, in[1]);
    }
    return TG_OK;
}

static int logaddexp_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                             const void *params)
{
    return lae_forward(ctx, "logaddexp", out, in, k_logaddexp);
}

static int logaddexp2_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                              const void *params)
{
    return lae_forward(ctx, "logaddexp2", out, in, k_logaddexp2);
}

/* gi[i] = g / (1 + p(x[1-i] - x[i])), p = exp or exp2, each summed to its
 * input's shape. */
static int lae_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi,
                        int (*p)(tg_tensor **, tg_tensor *))
{
    tg_tensor *x[2], *t[4] = {NULL, NULL, NULL, NULL};
    int rc;
    TG_TRY_GOTO(tg__ctx_saved(ctx, 0, &x[0]));
    TG_TRY_GOTO(tg__ctx_saved(ctx, 1, &x[1]));
    for (int i = 0; i < 2; i++) {
        if (!tg__ctx_needs_grad(ctx, i)) continue;
        TG_TRY_GOTO(tg_sub(&t[0], x[1 - i], x[i]));
        TG_TRY_GOTO(p(&t[1], t[0]));
        TG_TRY_GOTO(tg_add_scalar(&t[2], t[1], 1.0));
        TG_TRY_GOTO(tg_div(&t[3], g, t[2]));
        TG_TRY_GOTO(tg__ew_grad_to_input(ctx, i, &t[3], &gi[i]));
        for (int k = 0; k < 3; k++) {
            tg_tensor_release(t[k]);
            t[k] = NULL;
        }
    }
done:
    for (int k = 0; k < 4; k++) tg_tensor_release(t[k]);
    return tg__ew_grads_finish(rc, gi);
}

static int logaddexp_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    return lae_backward(ctx, g, gi, tg_exp);
}

static int logaddexp2_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    return lae_backward(ctx, g, gi, tg_exp2);
}

/* PROMOTE: torch's autocast lists neither; two float dtypes promote as
 * torch's type promotion does. */
static const tg_op_schema logaddexp_op = {
    .name = "logaddexp", .arity = 2, .amp = TG_AMP_PROMOTE, .forward = logaddexp_forward,
    .backward = logaddexp_backward, .double_backward = true,
    .vjp = "da = g / (1 + exp(b - a)), db = g / (1 + exp(a - b))", .scalar = NULL};
static const tg_op_schema logaddexp2_op = {
    .name = "logaddexp2", .arity = 2, .amp = TG_AMP_PROMOTE, .forward = logaddexp2_forward,
    .backward = logaddexp2_backward, .double_backward = true,
    .vjp = "da = g / (1 + 2^(b - a)), db = g / (1 + 2^(a - b))", .scalar = NULL};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__logaddexp_ops[] = {&logaddexp_op, &logaddexp2_op};
static_assert(sizeof tg__logaddexp_ops / sizeof tg__logaddexp_ops[0] == TG__logaddexp_N,
              "src/ops/families.h must count the logaddexp ops");

int tg_logaddexp(tg_tensor **out, tg_tensor *a, tg_tensor *b)
{
    return tg_op_call(&logaddexp_op, out, 2, (tg_tensor *[]){a, b}, NULL, 0);
}

int tg_logaddexp2(tg_tensor **out, tg_tensor *a, tg_tensor *b)
{
    return tg_op_call(&logaddexp2_op, out, 2, (tg_tensor *[]){a, b}, NULL, 0);
}
