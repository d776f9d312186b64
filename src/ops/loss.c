/* src/ops/loss.c - mse, l1 and bce_with_logits as compositions of
 * differentiable ops, plus one small op of their own, bce_logits; and
 * cross_entropy as log_softmax followed by nll_loss (softmax.c, nll_loss.c).
 *
 * Composition gives first and second derivatives from autograd.  bce_logits
 * is the elementwise loss softplus(x) - x t in one op: written with relu and
 * abs, softplus(x) = max(x, 0) + log1p(exp(-|x|)) has the wrong derivative at
 * x = 0 (relu'(0) = sign(0) = 0 give 0 instead of sigmoid(0) = 1/2), and zero
 * logits are common (zero-initialised heads); and as a difference of two ops
 * it would give inf - inf = NaN at x = +inf.  Its backward, g (sigmoid(x) - t)
 * and -g x, is itself differentiable.
 */
#include <assert.h>
#include <math.h>
#include <string.h>

#include "core/core.h"
#include "ops/elementwise.h"
#include "autograd/tape.h"
#include "ops/families.h"
#include "ops/loss.h"
#include "ops/unary_simd_internal.h"
#include "tapegrad/loss.h"
#include "tapegrad/ops.h"

/* ---- the bce_logits op ------------------------------------------------- */

/* softplus(x) - x t for finite x, with softplus(x) = log(1 + e^x) computed
 * without overflow: for x > 0, log(1 + e^x) = x + log(1 + e^-x); exp(-|x|)
 * <= 1 always, and log1p keeps precision when it is tiny.  softplus is
 * rounded to T before the subtraction, as the two ops this replaces did.
 * Infinite x gives PyTorch 1.13's values: its kernel evaluates
 * (1 - t) x + m + log(e^-m + e^(-x-m)) with m = max(-x, 0), which is
 * (1 - t) x at x = +inf (inf for t < 1, NaN for t = 1) and inf - inf = NaN at
 * x = -inf for every t. */
static double softplus(double x)
{
    return (x > 0 ? x : 0.0) + log1p(exp(-fabs(x)));
}

/* log1p(e) for e in [0, 1] as log(1 + e) e / ((1 + e) - 1) (Goldberg's
 * correction of the rounded 1 + e): within 3.7e-16 relative of libm's
 * log1p, which costs four times libm's log.  For the f32 kernel, whose
 * softplus is rounded to f32: over every 61st f32 bit pattern (70 million
 * finite x) the rounded softplus equals the one through libm's log1p. */
static double log1p_unit(double e)
{
    const double u = 1.0 + e;
    return u == 1.0 ? e : log(u) * e / (u - 1.0);
}

static double softplus_f32(double x)
{
    return (x > 0 ? x : 0.0) + log1p_unit(exp(-fabs(x)));
}

/* a = x, b = t.  _Generic rounds softplus to the kernel's type T. */
TG_EW_BINARY_KERNEL(k_bce, isinf(a) ? (a > 0 ? (1 - b) * a : NAN)
                                    : _Generic(a, float: (float)softplus_f32(a),
                                                  default: softplus(a)) - a * b)

/* f32 x and t of one shape in contiguous memory: softplus by the vector
 * kernel (src/ops/unary_simd.c, the value through libm's exp and log1p
 * rounded once), then k_bce's steps in f32.  NULL when they are not. */
static tg_tensor *bce_f32_rows(const tg_tensor *x, const tg_tensor *t)
{
    if (x->dtype != TG_F32 || t->dtype != TG_F32 || x->ndim != t->ndim ||
        !tg_tensor_is_contiguous(x) || !tg_tensor_is_contiguous(t))
        return NULL;
    for (int d = 0; d < x->ndim; d++)
        if (x->shape[d] != t->shape[d]) return NULL;
    tg_tensor *r = tg__tensor_uninit(TG_F32, x->ndim, x->shape);
    if (!r) return NULL;
    const int64_t n = tg_tensor_numel(x);
    const float *a = tg_tensor_cdata(x), *b = tg_tensor_cdata(t);
    float *o = tg_tensor_data(r);
    tg__unary_simd_f32(TG__USIMD_SOFTPLUS, o, a, NULL, n, tg__exp_width_get());
    for (int64_t i = 0; i < n; i++)
        o[i] = isinf(a[i]) ? (a[i] > 0 ? (1 - b[i]) * a[i] : NAN) : o[i] - a[i] * b[i];
    return r;
}

static int bce_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                       const void *params)
{
    *out = bce_f32_rows(in[0], in[1]);
    if (!*out) TG_TRY(tg__ew_binary("bce_with_logits", out, in[0], in[1], k_bce, 0.0));
    if (ctx) {
        tg__ctx_save(ctx, in[0]);
        tg__ctx_save(ctx, in[1]);
    }
    return TG_OK;
}

/* d/dx = g (sigmoid(x) - t);  d/dt = -g x. */
static int bce_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    tg_tensor *x, *t, *a = NULL, *b = NULL;
    int rc;
    TG_TRY_GOTO(tg__ctx_saved(ctx, 0, &x));
    TG_TRY_GOTO(tg__ctx_saved(ctx, 1, &t));
    if (tg__ctx_needs_grad(ctx, 0)) {
        TG_TRY_GOTO(tg_sigmoid(&a, x));
        TG_TRY_GOTO(tg_sub(&b, a, t));
        TG_TRY_GOTO(tg_mul(&gi[0], g, b));
        tg_tensor_release(a);
        tg_tensor_release(b);
        a = b = NULL;
    }
    if (tg__ctx_needs_grad(ctx, 1)) {
        TG_TRY_GOTO(tg_mul(&a, g, x));
        TG_TRY_GOTO(tg_neg(&gi[1], a));
    }
done:
    tg_tensor_release(a);
    tg_tensor_release(b);
    if (rc < 0) {
        tg_tensor_release(gi[0]);
        gi[0] = NULL;
    }
    return rc;
}

/* FP32: inside an autocast scope the inputs are cast to f32; outside, mixed
 * float dtypes are promoted (recorded casts either way). */
static const tg_op_schema bce_op = {.name = "bce_logits", .arity = 2, .amp = TG_AMP_FP32,
                              .forward = bce_forward, .backward = bce_backward,
                              .double_backward = true,
                              .vjp = "dz = g * (sigmoid(z) - t), scaled as the reduction"};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__loss_ops[] = {&bce_op};
static_assert(sizeof tg__loss_ops / sizeof tg__loss_ops[0] == TG__loss_N,
              "src/ops/families.h must count the loss ops");

/* ---- shared checks and steps -------------------------------------------- */

int tg__loss_check_reduction(const char *op, tg_reduction red)
{
    TG_CHECK(red == TG_REDUCTION_MEAN || red == TG_REDUCTION_SUM || red == TG_REDUCTION_NONE,
             TG_EINVAL, "%s: reduction=%d must be MEAN, SUM or NONE", op, (int)red);
    return TG_OK;
}

int tg__loss_check_common(const char *op, tg_tensor **out, const tg_tensor *input,
                          const tg_tensor *target, tg_reduction red)
{
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", op);
    TG_CHECK(input != NULL, TG_EINVAL, "%s: input must not be NULL", op);
    TG_CHECK(target != NULL, TG_EINVAL, "%s: target must not be NULL", op);
    TG_TRY(tg__loss_check_reduction(op, red));
    TG_CHECK(tg_dtype_is_float(input->dtype), TG_EDTYPE,
             "%s: input has dtype %s; float dtypes only", op, tg_dtype_name(input->dtype));
    return TG_OK;
}

/* The checks of tg__loss_check_pair, with target's shape equal to input's
 * or (broadcast) broadcasting with it. */
static int check_pair(const char *op, tg_tensor **out, const tg_tensor *input,
                      const tg_tensor *target, tg_reduction red, bool broadcast)
{
    TG_TRY(tg__loss_check_common(op, out, input, target, red));
    TG_CHECK(tg_dtype_is_float(target->dtype), TG_EDTYPE,
             "%s: target has dtype %s; float dtypes only", op, tg_dtype_name(target->dtype));
    int nd = 0;
    int64_t sh[TG_MAX_DIMS];
    if (broadcast ? tg__broadcast_shapes(op, input->ndim, input->shape, target->ndim,
                                         target->shape, &nd, sh) < 0
                  : !tg_tensor_same_shape(input, target)) {
        char a[96], b[96];
        tg_shape_str(a, sizeof a, input->ndim, input->shape);
        tg_shape_str(b, sizeof b, target->ndim, target->shape);
        return tg__error(TG_ESHAPE, "%s: target shape %s must %s input shape %s%s", op, b,
                         broadcast ? "broadcast with" : "equal", a,
                         broadcast ? "" : " (no broadcasting)");
    }
    return TG_OK;
}

int tg__loss_check_pair(const char *op, tg_tensor **out, const tg_tensor *input,
                        const tg_tensor *target, tg_reduction red)
{
    return check_pair(op, out, input, target, red, false);
}

int tg__loss_check_pair_broadcast(const char *op, tg_tensor **out, const tg_tensor *input,
                                  const tg_tensor *target, tg_reduction red)
{
    return check_pair(op, out, input, target, red, true);
}

int tg__loss_check_constant(const char *op, const char *name, const tg_tensor *t)
{
    TG_CHECK(!t || !t->requires_grad || !tg_grad_enabled(), TG_EGRAD,
             "%s: %s requires grad, but the loss is not differentiable with respect to %s "
             "(as torch's); pass it detached (tg_tensor_detach)",
             op, name, name);
    return TG_OK;
}

int tg__loss_same_shape(const char *op, int n, tg_tensor *const *in, tg_dtype *dtype,
                        int *ndim, int64_t *shape)
{
    for (int i = 0; i < n; i++) TG_TRY(tg__ew_check_float(op, i, in[i]));
    for (int i = 1; i < n; i++)
        if (!tg_tensor_same_shape(in[0], in[i])) {
            char a[96], b[96];
            tg_shape_str(a, sizeof a, in[0]->ndim, in[0]->shape);
            tg_shape_str(b, sizeof b, in[i]->ndim, in[i]->shape);
            return tg__error(TG_ESHAPE, "%s: input %d shape %s must equal input 0 shape %s "
                             "(no broadcasting)", op, i, b, a);
        }
    *dtype = in[0]->dtype;
    *ndim = in[0]->ndim;
    memcpy(shape, in[0]->shape, (size_t)in[0]->ndim * sizeof *shape);
    return TG_OK;
}

int tg__loss_check_weight(const char *op, const char *name, const tg_tensor *w,
                          const tg_tensor *input)
{
    if (!w) return TG_OK;
    TG_CHECK(tg_dtype_is_float(w->dtype), TG_EDTYPE, "%s: %s has dtype %s; float dtypes only",
             op, name, tg_dtype_name(w->dtype));
    int nd = 0;
    int64_t sh[TG_MAX_DIMS];
    int rc = tg__broadcast_shapes(op, w->ndim, w->shape, input->ndim, input->shape, &nd, sh);
    if (rc == TG_OK && (nd != input->ndim || memcmp(sh, input->shape, (size_t)nd * sizeof *sh)))
        rc = TG_ESHAPE;
    if (rc < 0) {
        char a[96], b[96];
        tg_shape_str(a, sizeof a, w->ndim, w->shape);
        tg_shape_str(b, sizeof b, input->ndim, input->shape);
        return tg__error(TG_ESHAPE, "%s: %s shape %s must broadcast to input shape %s", op,
                         name, a, b);
    }
    return TG_OK;
}

int tg__loss_amp_f32(tg_tensor **dst, tg_tensor *const *src, int n)
{
    tg_dtype scope;
    const bool on = tg_autocast_active(&scope);
    int rc = TG_OK;
    for (int i = 0; i < n; i++) dst[i] = NULL;
    for (int i = 0; i < n && rc == TG_OK; i++) {
        if (src[i] && on && tg__dtype_is_half(src[i]->dtype))
            rc = tg_to_dtype(&dst[i], src[i], TG_F32);
        else
            dst[i] = src[i] ? tg_tensor_retain(src[i]) : NULL;
    }
    if (rc < 0)
        for (int i = 0; i < n; i++) {
            tg_tensor_release(dst[i]);
            dst[i] = NULL;
        }
    return rc;
}

int tg__loss_ints_to_float(tg_tensor **t, int n)
{
    tg_dtype dt = TG_F32;
    bool any = false;
    for (int i = 0; i < n; i++)
        if (t[i] && tg_dtype_is_float(t[i]->dtype)) {
            dt = any ? tg_promote_dtypes(dt, t[i]->dtype) : t[i]->dtype;
            any = true;
        }
    int rc = TG_OK;
    for (int i = 0; i < n && rc == TG_OK; i++) {
        if (!t[i] || tg_dtype_is_float(t[i]->dtype)) continue;
        tg_tensor *f = NULL;
        rc = tg_to_dtype(&f, t[i], dt);
        tg_tensor_release(t[i]);
        t[i] = f;
    }
    if (rc < 0)
        for (int i = 0; i < n; i++) {
            tg_tensor_release(t[i]);
            t[i] = NULL;
        }
    return rc;
}

int tg__loss_reduce(tg_tensor **out, tg_tensor *t, tg_reduction red)
{
    if (red == TG_REDUCTION_MEAN) return tg_mean(out, t);
    if (red == TG_REDUCTION_SUM) return tg_sum(out, t);
    *out = tg_tensor_retain(t);
    return TG_OK;
}

void tg__loss_release_all(tg_tensor **t, int n)
{
    for (int i = 0; i < n; i++) tg_tensor_release(t[i]);
}

/* ---- elementwise losses ------------------------------------------------ */

/* reduce(|input - target|^2) or reduce(|input - target|): MSE and L1 differ
 * only in the elementwise step (square or abs).  Of one f32 or f64 dtype
 * each takes its own op (src/ops/diff_loss.c), the same bits, its gradient
 * in one pass. */
static int diff_loss(const char *op, tg_tensor **out, tg_tensor *input, tg_tensor *target,
                     tg_reduction red, bool square)
{
    TG_TRY(tg__loss_check_pair(op, out, input, target, red));
    tg_tensor *t[4] = {0};
    int rc;
    TG_TRY_GOTO(tg__loss_amp_f32(t, (tg_tensor *[]){input, target}, 2));
    if (t[0]->dtype == t[1]->dtype && (t[0]->dtype == TG_F32 || t[0]->dtype == TG_F64)) {
        TG_TRY_GOTO(tg__diff_elementwise(&t[3], t[0], t[1], square));
    } else {
        TG_TRY_GOTO(tg_sub(&t[2], t[0], t[1]));
        TG_TRY_GOTO(square ? tg_mul(&t[3], t[2], t[2]) : tg_abs(&t[3], t[2]));
    }
    TG_TRY_GOTO(tg__loss_reduce(out, t[3], red));
done:
    tg__loss_release_all(t, 4);
    return rc;
}

static int mse_loss(tg_tensor **out, tg_tensor *input, tg_tensor *target, tg_reduction red)
{
    return diff_loss("mse_loss", out, input, target, red, true);
}

static int l1_loss(tg_tensor **out, tg_tensor *input, tg_tensor *target, tg_reduction red)
{
    return diff_loss("l1_loss", out, input, target, red, false);
}

/* -log(sigmoid(x))*t - log(1 - sigmoid(x))*(1 - t) = softplus(x) - x*t, since
 * -log(sigmoid(x)) = softplus(-x) = softplus(x) - x. */
static int bce_with_logits(tg_tensor **out, tg_tensor *logits, tg_tensor *target, tg_reduction red)
{
    TG_TRY(tg__loss_check_pair("bce_with_logits", out, logits, target, red));
    tg_tensor *in[2] = {logits, target}, *l = NULL;
    int rc = tg_op_call(&bce_op, &l, 2, in, NULL, 0);
    if (rc == TG_OK) rc = tg__loss_reduce(out, l, red);
    tg_tensor_release(l);
    return rc;
}

/* ---- cross entropy ------------------------------------------------------ */

static int check_ce(tg_tensor **out, const tg_tensor *logits, const tg_tensor *target,
                    tg_reduction red)
{
    TG_TRY(tg__loss_check_common("cross_entropy", out, logits, target, red));
    TG_CHECK(logits->ndim == 2, TG_ESHAPE,
             "cross_entropy: logits must be 2-D (N, C), got %d dims", logits->ndim);
    TG_CHECK(target->dtype == TG_I64, TG_EDTYPE,
             "cross_entropy: target has dtype %s; must be i64 class indices",
             tg_dtype_name(target->dtype));
    TG_CHECK(target->ndim == 1 && target->shape[0] == logits->shape[0], TG_ESHAPE,
             "cross_entropy: target must have shape (N) = (%lld) to match logits (N, C)",
             (long long)logits->shape[0]);
    return TG_OK;
}

/* Checks that each class index is in [0, C) or is TG_IGNORE_INDEX_DEFAULT,
 * so that the message names cross_entropy. */
static int check_targets(const tg_tensor *target, int64_t C)
{
    const int64_t N = target->shape[0];
    int64_t *idx = tg__malloc((size_t)(N > 0 ? N : 1) * sizeof *idx);
    if (!idx) return TG_ENOMEM;
    tg__gather(target, TG_I64, idx);
    int rc = TG_OK;
    for (int64_t n = 0; n < N && rc == TG_OK; n++)
        if (idx[n] != TG_IGNORE_INDEX_DEFAULT && (idx[n] < 0 || idx[n] >= C))
            rc = tg__error(TG_EINVAL, "cross_entropy: target[%lld]=%lld must be in [0, %lld) "
                           "(a class index) or be -100 (ignored)", (long long)n,
                           (long long)idx[n], (long long)C);
    free(idx);
    return rc;
}

/* loss[n] = -log_softmax(x)[n, target[n]]: nll_loss of the log-probabilities
 * (f32 and f64 logits: the one op of src/ops/cross_entropy_rows.c, the same bits).
 * log_softmax subtracts each row's maximum, so a row holding +inf is NaN
 * throughout, value and gradient, as PyTorch's; a -inf logit is a class of
 * probability 0, whose gradient is 0 (nll_loss picks rather than multiplies
 * by a one-hot matrix, which would turn -inf into 0 * -inf = NaN). */
static int cross_entropy(tg_tensor **out, tg_tensor *logits, tg_tensor *target, tg_reduction red)
{
    TG_TRY(check_ce(out, logits, target, red));
    TG_TRY(check_targets(target, logits->shape[1]));
    const int fused = tg__cross_entropy_rows(out, logits, target, NULL, red,
                                             TG_IGNORE_INDEX_DEFAULT);
    if (fused != TG__CE_ROWS_NOT_TAKEN) return fused;
    tg_tensor *logp = NULL;
    int rc = tg_log_softmax(&logp, logits, 1);   /* FP32 policy, as the losses' */
    if (rc == TG_OK)
        rc = tg_nll_loss(out, logp, target, NULL, red, TG_IGNORE_INDEX_DEFAULT);
    tg_tensor_release(logp);
    return rc;
}

/* A loss runs its ops on the library's behalf; only the result goes to the
 * caller's scope (tapegrad/scope.h).  Defines tg_mse_loss, tg_l1_loss,
 * tg_bce_with_logits and tg_cross_entropy. */
#define SCOPED_LOSS(name)                                                         \
    int tg_##name(tg_tensor **out, tg_tensor *input, tg_tensor *target, tg_reduction red) \
    {                                                                             \
        tg__lib_enter();                                                          \
        int rc = name(out, input, target, red);                                   \
        tg__lib_leave();                                                          \
        return tg__scope_capture(out, rc);                                        \
    }
SCOPED_LOSS(mse_loss)
SCOPED_LOSS(l1_loss)
SCOPED_LOSS(bce_with_logits)
SCOPED_LOSS(cross_entropy)
