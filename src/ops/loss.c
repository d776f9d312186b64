/* src/ops/loss.c - mse, l1, bce_with_logits and cross_entropy as compositions
 * of differentiable ops, plus two small ops of their own: bce_logits and
 * ce_pick.
 *
 * Composition gives first and second derivatives from autograd.  bce_logits
 * is the elementwise loss softplus(x) - x t in one op: written with relu and
 * abs, softplus(x) = max(x, 0) + log1p(exp(-|x|)) has the wrong derivative at
 * x = 0 (relu'(0) = sign(0) = 0 give 0 instead of sigmoid(0) = 1/2), and zero
 * logits are common (zero-initialised heads); and as a difference of two ops
 * it would give inf - inf = NaN at x = +inf.  Its backward, g (sigmoid(x) - t)
 * and -g x, is itself differentiable.  ce_pick takes each row's target entry
 * of the log-probabilities; multiplying by a one-hot matrix instead would turn
 * the -inf of a masked class into 0 * -inf = NaN.  Its backward, onehot * g,
 * is differentiable too.
 */
#include <assert.h>
#include <math.h>
#include <string.h>

#include "core/core.h"
#include "ops/elementwise.h"
#include "autograd/tape.h"
#include "ops/families.h"
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

/* a = x, b = t.  _Generic rounds softplus to the kernel's type T. */
TG_EW_BINARY_KERNEL(k_bce, isinf(a) ? (a > 0 ? (1 - b) * a : NAN)
                                    : _Generic(a, float: (float)softplus(a),
                                                  default: softplus(a)) - a * b)

static int bce_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                       const void *params)
{
    TG_TRY(tg__ew_binary("bce_with_logits", out, in[0], in[1], k_bce, 0.0));
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
                              .double_backward = true};

/* ---- the ce_pick op ------------------------------------------------------- */

/* out (N) = a[n, c] where onehot[n, c] != 0, for a and onehot (N, C) of one
 * dtype; a row without a one gives 0. */
static int pick_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                        const void *params)
{
    const tg_tensor *a = in[0], *onehot = in[1];
    const int64_t N = a->shape[0], C = a->shape[1];
    double *va = tg__malloc((size_t)(N * C > 0 ? N * C : 1) * sizeof *va),
           *vo = tg__malloc((size_t)(N * C > 0 ? N * C : 1) * sizeof *vo),
           *picked = tg__malloc((size_t)(N > 0 ? N : 1) * sizeof *picked);
    tg_tensor *y = tg__tensor_empty(a->dtype, 1, &N);
    int rc = TG_OK;
    if (!va || !vo || !picked || !y) {
        rc = tg__error(TG_ENOMEM, "ce_pick: out of memory for (%lld, %lld) values",
                       (long long)N, (long long)C);
        goto done;
    }
    tg__gather(a, TG_F64, va);
    tg__gather(onehot, TG_F64, vo);
    for (int64_t i = 0; i < N; i++) {
        picked[i] = 0.0;
        for (int64_t c = 0; c < C; c++)
            if (vo[i * C + c] != 0.0) picked[i] = va[i * C + c];
    }
    tg__scatter(y, TG_F64, picked);
    if (ctx) rc = tg__ctx_save(ctx, in[1]);
done:
    free(va);
    free(vo);
    free(picked);
    if (rc < 0) tg_tensor_release(y);
    else *out = y;
    return rc;
}

/* d ce_pick(a) = onehot * g[:, None]; the one-hot is a constant. */
static int pick_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    tg_tensor *onehot, *g1 = NULL;
    int rc;
    TG_TRY_GOTO(tg__ctx_saved(ctx, 0, &onehot));
    TG_TRY_GOTO(tg_unsqueeze(&g1, g, 1));
    TG_TRY_GOTO(tg_mul(&gi[0], onehot, g1));
done:
    tg_tensor_release(g1);
    return rc;
}

static const tg_op_schema pick_op = {.name = "ce_pick", .arity = 2, .amp = TG_AMP_FP32,
                               .forward = pick_forward, .backward = pick_backward,
                               .double_backward = true};

static int pick(tg_tensor **out, tg_tensor *a, tg_tensor *onehot)
{
    tg_tensor *in[2] = {a, onehot};
    return tg_op_call(&pick_op, out, 2, in, NULL, 0);
}

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__loss_ops[] = {&bce_op, &pick_op};
static_assert(sizeof tg__loss_ops / sizeof tg__loss_ops[0] == TG__loss_N,
              "src/ops/families.h must count the loss ops");

/* ---- shared checks and steps -------------------------------------------- */

static int check_common(const char *op, tg_tensor **out, const tg_tensor *input,
                        const tg_tensor *target, tg_reduction red)
{
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", op);
    TG_CHECK(input != NULL, TG_EINVAL, "%s: input must not be NULL", op);
    TG_CHECK(target != NULL, TG_EINVAL, "%s: target must not be NULL", op);
    TG_CHECK(red == TG_REDUCTION_MEAN || red == TG_REDUCTION_SUM || red == TG_REDUCTION_NONE,
             TG_EINVAL, "%s: reduction=%d must be MEAN, SUM or NONE", op, (int)red);
    TG_CHECK(tg_dtype_is_float(input->dtype), TG_EDTYPE,
             "%s: input has dtype %s; float dtypes only", op, tg_dtype_name(input->dtype));
    return TG_OK;
}

/* Checks for the elementwise losses: float target of exactly input's shape. */
static int check_pair(const char *op, tg_tensor **out, const tg_tensor *input,
                      const tg_tensor *target, tg_reduction red)
{
    TG_TRY(check_common(op, out, input, target, red));
    TG_CHECK(tg_dtype_is_float(target->dtype), TG_EDTYPE,
             "%s: target has dtype %s; float dtypes only", op, tg_dtype_name(target->dtype));
    if (!tg_tensor_same_shape(input, target)) {
        char a[96], b[96];
        tg_shape_str(a, sizeof a, input->ndim, input->shape);
        tg_shape_str(b, sizeof b, target->ndim, target->shape);
        return tg__error(TG_ESHAPE, "%s: target shape %s must equal input shape %s "
                         "(no broadcasting)", op, b, a);
    }
    return TG_OK;
}

/* The FP32 policy: inside an autocast scope, f16/bf16 inputs are cast to f32
 * (a recorded cast, so their gradients come back in their own dtype). */
static int amp_f32(tg_tensor **dst, tg_tensor *t)
{
    tg_dtype scope;
    if (tg_autocast_active(&scope) && tg__dtype_is_half(t->dtype))
        return tg_to_dtype(dst, t, TG_F32);
    *dst = tg_tensor_retain(t);
    return TG_OK;
}

static int reduce(tg_tensor **out, tg_tensor *t, tg_reduction red)
{
    if (red == TG_REDUCTION_MEAN) return tg_mean(out, t);
    if (red == TG_REDUCTION_SUM) return tg_sum(out, t);
    *out = tg_tensor_retain(t);
    return TG_OK;
}

static void release_all(tg_tensor **t, int n)
{
    for (int i = 0; i < n; i++) tg_tensor_release(t[i]);
}

/* ---- elementwise losses ------------------------------------------------ */

/* reduce(|input - target|^2) or reduce(|input - target|): MSE and L1 differ
 * only in the elementwise step (square or abs). */
static int diff_loss(const char *op, tg_tensor **out, tg_tensor *input, tg_tensor *target,
                     tg_reduction red, bool square)
{
    TG_TRY(check_pair(op, out, input, target, red));
    tg_tensor *t[4] = {0};
    int rc;
    TG_TRY_GOTO(amp_f32(&t[0], input));
    TG_TRY_GOTO(amp_f32(&t[1], target));
    TG_TRY_GOTO(tg_sub(&t[2], t[0], t[1]));
    TG_TRY_GOTO(square ? tg_mul(&t[3], t[2], t[2]) : tg_abs(&t[3], t[2]));
    TG_TRY_GOTO(reduce(out, t[3], red));
done:
    release_all(t, 4);
    return rc;
}

int tg_mse_loss(tg_tensor **out, tg_tensor *input, tg_tensor *target, tg_reduction red)
{
    return diff_loss("mse_loss", out, input, target, red, true);
}

int tg_l1_loss(tg_tensor **out, tg_tensor *input, tg_tensor *target, tg_reduction red)
{
    return diff_loss("l1_loss", out, input, target, red, false);
}

/* -log(sigmoid(x))*t - log(1 - sigmoid(x))*(1 - t) = softplus(x) - x*t, since
 * -log(sigmoid(x)) = softplus(-x) = softplus(x) - x. */
int tg_bce_with_logits(tg_tensor **out, tg_tensor *logits, tg_tensor *target, tg_reduction red)
{
    TG_TRY(check_pair("bce_with_logits", out, logits, target, red));
    tg_tensor *in[2] = {logits, target}, *l = NULL;
    int rc = tg_op_call(&bce_op, &l, 2, in, NULL, 0);
    if (rc == TG_OK) rc = reduce(out, l, red);
    tg_tensor_release(l);
    return rc;
}

/* ---- cross entropy ------------------------------------------------------ */

static int check_ce(tg_tensor **out, const tg_tensor *logits, const tg_tensor *target,
                    tg_reduction red)
{
    TG_TRY(check_common("cross_entropy", out, logits, target, red));
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

/* Reads the class indices into idx (N entries), checking each is in [0, C). */
static int read_targets(const tg_tensor *target, int64_t C, int64_t *idx)
{
    int64_t N = target->shape[0];
    tg__gather(target, TG_I64, idx);
    for (int64_t n = 0; n < N; n++)
        TG_CHECK(idx[n] >= 0 && idx[n] < C, TG_EINVAL,
                 "cross_entropy: target[%lld]=%lld must be in [0, %lld) (a class index)",
                 (long long)n, (long long)idx[n], (long long)C);
    return TG_OK;
}

/* The constants of the log-softmax: m (N, 1), each row's maximum, and the
 * one-hot matrix (N, C) of the targets, both in x's dtype.  Neither needs a
 * gradient: log_softmax(x) = (x - m) - log(sum(exp(x - m))) for any constant m.
 * A row whose maximum is +inf then has x - m = inf - inf = NaN and is NaN
 * throughout, value and gradient, as PyTorch's log_softmax (which subtracts
 * the maximum too; only torch.logsumexp treats an infinite maximum as 0).  A
 * row of -inf only takes m = 0: NaN either way. */
static int ce_constants(const tg_tensor *x, const int64_t *idx, tg_tensor **m, tg_tensor **onehot)
{
    int64_t N = x->shape[0], C = x->shape[1];
    int64_t ms[2] = {N, 1};
    double *buf = tg__malloc((size_t)(N * C > 0 ? N * C : 1) * sizeof *buf);
    double *mx = tg__malloc((size_t)(N > 0 ? N : 1) * sizeof *mx);
    *m = tg__tensor_empty(x->dtype, 2, ms);
    *onehot = tg__tensor_empty(x->dtype, 2, x->shape);
    int rc = TG_OK;
    if (!buf || !mx || !*m || !*onehot) {
        rc = tg__error(TG_ENOMEM, "cross_entropy: out of memory for (%lld, %lld) logits",
                       (long long)N, (long long)C);
        goto done;
    }
    tg__gather(x, TG_F64, buf);
    for (int64_t n = 0; n < N; n++) {
        double best = -INFINITY;
        for (int64_t c = 0; c < C; c++)
            if (buf[n * C + c] > best) best = buf[n * C + c];
        mx[n] = best == -INFINITY ? 0.0 : best;
        tg_dtype_store(x->dtype, tg_tensor_data(*onehot), n * C + idx[n], 1.0);
    }
    tg__scatter(*m, TG_F64, mx);
done:
    free(buf);
    free(mx);
    if (rc < 0) {
        tg_tensor_release(*m);
        tg_tensor_release(*onehot);
        *m = *onehot = NULL;
    }
    return rc;
}

/* loss[n] = -log_softmax(x)[n, target[n]]: logp picked at the target. */
int tg_cross_entropy(tg_tensor **out, tg_tensor *logits, tg_tensor *target, tg_reduction red)
{
    TG_TRY(check_ce(out, logits, target, red));
    int64_t N = logits->shape[0], C = logits->shape[1];
    int64_t *idx = tg__malloc((size_t)(N > 0 ? N : 1) * sizeof *idx);
    if (!idx) return TG_ENOMEM;
    tg_tensor *t[10] = {0};   /* x, m, onehot, z, e, s, log s, logp, picked, nll */
    const int dim1[1] = {1};
    int rc;
    TG_TRY_GOTO(read_targets(target, C, idx));
    TG_TRY_GOTO(amp_f32(&t[0], logits));
    TG_TRY_GOTO(ce_constants(t[0], idx, &t[1], &t[2]));
    TG_TRY_GOTO(tg_sub(&t[3], t[0], t[1]));                 /* z = x - m, (N, C) */
    TG_TRY_GOTO(tg_exp(&t[4], t[3]));
    TG_TRY_GOTO(tg_sum_dims(&t[5], t[4], 1, dim1, true));   /* (N, 1) */
    TG_TRY_GOTO(tg_log(&t[6], t[5]));
    TG_TRY_GOTO(tg_sub(&t[7], t[3], t[6]));                 /* logp, (N, C) */
    TG_TRY_GOTO(pick(&t[8], t[7], t[2]));                   /* (N) */
    TG_TRY_GOTO(tg_neg(&t[9], t[8]));
    TG_TRY_GOTO(reduce(out, t[9], red));
done:
    release_all(t, 10);
    free(idx);
    return rc;
}
