/* src/ops/nll_loss.c - nll_loss(logp, target, weight) as
 * torch.nn.functional.nll_loss, and nll_loss_backward, its gradient.
 *
 * logp is (N, C, d1, ...) or (C,), target (N, d1, ...) or 0-d, walked as
 * logp (N, C, S) and target (N, S) with S = d1 d2 ... (1 for no spatial
 * dims; N = 1 for logp (C,)).  Target k = n S + s picks logp element
 * n C S + target_k S + s.  With w_k = weight[target_k] (1 without a weight)
 * and w_k = 0 where target_k is ignore_index:
 *   none:  l_k = -logp[pick_k] w_k   (0 where ignored)
 *   sum:   sum_k l_k
 *   mean:  sum_k l_k / sum_k w_k     (0/0 = NaN when every target is ignored)
 * The loss is linear in logp.  Its gradient is the scatter
 *   dlogp[pick_k] = -g_k w_k,  zero elsewhere,
 * with g_k the gradient of l_k for none, g for sum and g / sum_k w_k for
 * mean: the op nll_loss_backward.
 * That op is linear in g, and its own gradient, the adjoint of the scatter,
 * picks the same entries of its output's gradient: nll_loss again, with the
 * same target, weight and reduction.  The two ops are each other's backward,
 * so derivatives of every order come from them, as PyTorch pairs nll_loss
 * and nll_loss_backward.  Values are computed in double and rounded once.
 * nll_loss's backward_into adds the picks straight into the engine's
 * pending sum of dlogp, N S elements instead of N C S.
 */
#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/core.h"
#include "autograd/tape.h"
#include "ops/families.h"
#include "ops/gather_internal.h"
#include "ops/loss.h"
#include "tapegrad/loss.h"

typedef struct nll_params {
    tg_reduction red;
    int64_t ignore_index;
    int64_t C;   /* nll_loss_backward: the classes of its result */
} nll_params;

/* ---- checks ------------------------------------------------------------------ */

static int check_target(const char *op, const tg_tensor *target)
{
    TG_CHECK(target != NULL, TG_EINVAL, "%s: target must not be NULL", op);
    TG_CHECK(target->dtype == TG_I64, TG_EDTYPE,
             "%s: target has dtype %s; it must be i64 class indices", op,
             tg_dtype_name(target->dtype));
    return TG_OK;
}

/* weight: NULL, or (C) of a float dtype. */
static int check_weight(const char *op, const tg_tensor *weight, int64_t C)
{
    if (!weight) return TG_OK;
    TG_CHECK(tg_dtype_is_float(weight->dtype), TG_EDTYPE,
             "%s: weight has dtype %s; float dtypes only", op, tg_dtype_name(weight->dtype));
    if (weight->ndim != 1 || weight->shape[0] != C) {
        char ws[96];
        tg_shape_str(ws, sizeof ws, weight->ndim, weight->shape);
        return tg__error(TG_ESHAPE, "%s: weight has shape %s; it must be (C) = (%lld), one "
                         "weight per class", op, ws, (long long)C);
    }
    return TG_OK;
}

/* logp (C) with a 0-d target, or (N, C, d1, ...) with target (N, d1, ...). */
static int check_nll(const tg_tensor *logp, const tg_tensor *target, const tg_tensor *weight,
                     const nll_params *p)
{
    TG_TRY(tg__loss_check_reduction("nll_loss", p->red));
    TG_CHECK(logp != NULL, TG_EINVAL, "nll_loss: logp must not be NULL");
    TG_CHECK(tg_dtype_is_float(logp->dtype), TG_EDTYPE,
             "nll_loss: logp has dtype %s; float dtypes only", tg_dtype_name(logp->dtype));
    TG_CHECK(logp->ndim >= 1, TG_ESHAPE,
             "nll_loss: logp is 0-d; it must be (C), (N, C) or (N, C, d1, ...)");
    TG_TRY(check_target("nll_loss", target));
    const int cdim = logp->ndim == 1 ? 0 : 1;
    int64_t want[TG_MAX_DIMS];
    for (int d = 0, k = 0; d < logp->ndim; d++)
        if (d != cdim) want[k++] = logp->shape[d];
    bool same = target->ndim == logp->ndim - 1;
    for (int d = 0; same && d < target->ndim; d++) same = target->shape[d] == want[d];
    if (!same) {
        char ts[96], ls[96], ws[96];
        tg_shape_str(ts, sizeof ts, target->ndim, target->shape);
        tg_shape_str(ls, sizeof ls, logp->ndim, logp->shape);
        tg_shape_str(ws, sizeof ws, logp->ndim - 1, want);
        return tg__error(TG_ESHAPE, "nll_loss: target has shape %s; for logp %s it must be %s "
                         "(logp's shape without the class dim)", ts, ls, ws);
    }
    return check_weight("nll_loss", weight, logp->shape[cdim]);
}

/* ---- targets and weights --------------------------------------------------- */

/* "[1, 0, 2]": the multi-index of target element k, for messages. */
static const char *index_str(char *buf, size_t n, const tg_tensor *t, int64_t k)
{
    int64_t idx[TG_MAX_DIMS];
    for (int d = t->ndim - 1; d >= 0; d--) {
        idx[d] = k % t->shape[d];
        k /= t->shape[d];
    }
    size_t len = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < t->ndim && len < n; d++)
        len += (size_t)snprintf(buf + len, n - len, "%s%lld", d ? ", " : "", (long long)idx[d]);
    if (len < n) snprintf(buf + len, n - len, "]");
    return buf;
}

/* The K = numel(target) classes in cls (-1 where ignored) and weights w_k in
 * wk (0 where ignored), and sum_k w_k in *total; TG_EINVAL naming the first
 * target that is neither in [0, C) nor ignore_index. */
static int read_targets(const char *op, const tg_tensor *target, const tg_tensor *weight,
                        int64_t C, int64_t ignore, int64_t *cls, double *wk, double *total)
{
    const int64_t K = tg_tensor_numel(target);
    double *wc = NULL;
    if (weight) {
        wc = tg__malloc((size_t)(C > 0 ? C : 1) * sizeof *wc);
        if (!wc) return TG_ENOMEM;
        tg__gather(weight, TG_F64, wc);
    }
    tg__gather(target, TG_I64, cls);
    /* the sum in a register (not through *total, which may alias); without
     * weights a count, which is the sum of the ones exactly */
    double sum = 0.0;
    int64_t count = 0;
    for (int64_t k = 0; k < K; k++) {
        if (cls[k] == ignore) {
            cls[k] = -1;
            wk[k] = 0.0;
            continue;
        }
        if (cls[k] < 0 || cls[k] >= C) {
            char at[160];
            int64_t bad = cls[k];
            free(wc);
            return tg__error(TG_EINVAL, "%s: target%s=%lld must be a class in [0, %lld) or "
                             "ignore_index=%lld", op, index_str(at, sizeof at, target, k),
                             (long long)bad, (long long)C, (long long)ignore);
        }
        wk[k] = wc ? wc[cls[k]] : 1.0;
        if (wc) sum += wk[k];
        else count++;
    }
    *total = wc ? sum : (double)count;
    free(wc);
    return TG_OK;
}

/* Target k's element of a tensor walked as (N, C, S): n C S + c S + s. */
static inline int64_t pick(int64_t k, int64_t c, int64_t C, int64_t S)
{
    return (k / S) * C * S + c * S + k % S;
}

/* S of a target of shape (N, d1, ...) (1 for a 0-d or 1-d target). */
static int64_t spatial(const tg_tensor *target)
{
    int64_t S = 1;
    for (int d = 1; d < target->ndim; d++) S *= target->shape[d];
    return S;
}

/* Allocations of a forward: cls and wk of K entries, vals of nv. */
typedef struct nll_bufs {
    int64_t *cls;
    double *wk, *vals;
} nll_bufs;

static int bufs_alloc(nll_bufs *b, const char *op, int64_t K, int64_t nv)
{
    b->cls = tg__malloc((size_t)(K > 0 ? K : 1) * sizeof *b->cls);
    b->wk = tg__malloc((size_t)(K > 0 ? K : 1) * sizeof *b->wk);
    b->vals = tg__malloc((size_t)(nv > 0 ? nv : 1) * sizeof *b->vals);
    if (b->cls && b->wk && b->vals) return TG_OK;
    return tg__error(TG_ENOMEM, "%s: out of memory for %lld targets", op, (long long)K);
}

static void bufs_free(nll_bufs *b)
{
    free(b->cls);
    free(b->wk);
    free(b->vals);
}

/* The end of both forwards, whose inputs are (x, target, weight or NULL): on
 * success target and weight are saved (when recorded) for the backward,
 * which calls the other op on them, and r goes to *out; on error r is
 * released.  b is freed either way.  Returns rc. */
static int forward_end(tg_ctx *ctx, tg_tensor *const *in, nll_bufs *b, tg_tensor *r,
                       tg_tensor **out, int rc)
{
    if (rc >= 0) {
        if (ctx) {
            tg__ctx_save(ctx, in[1]);
            if (in[2]) tg__ctx_save(ctx, in[2]);
        }
        *out = r;
    } else {
        tg_tensor_release(r);
    }
    bufs_free(b);
    return rc;
}

/* ---- nll_loss ------------------------------------------------------------------ */

static int nll_shape(int n, tg_tensor *const *in, const void *params, tg_dtype *dtype,
                     int *ndim, int64_t *shape)
{
    const nll_params *p = params;
    TG_TRY(check_nll(in[0], in[1], in[2], p));
    *dtype = in[0]->dtype;
    *ndim = p->red == TG_REDUCTION_NONE ? in[1]->ndim : 0;
    memcpy(shape, in[1]->shape, sizeof *shape * (size_t)*ndim);
    return TG_OK;
}

static int nll_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                       const void *params)
{
    const nll_params *p = params;
    tg_tensor *logp = in[0], *target = in[1], *weight = in[2];
    TG_CHECK(!ctx || !tg__ctx_needs_grad(ctx, 2), TG_EINVAL,
             "nll_loss: weight requires grad, but the loss has no gradient for it (nor has "
             "PyTorch's): pass a tensor that does not");
    const int64_t C = logp->shape[logp->ndim == 1 ? 0 : 1], K = tg_tensor_numel(target),
                  S = spatial(target);
    const bool none = p->red == TG_REDUCTION_NONE;
    nll_bufs b = {0};
    tg_tensor *r = NULL;
    double total;
    int rc;
    TG_TRY_GOTO(bufs_alloc(&b, "nll_loss", K, none ? K : 1));
    TG_TRY_GOTO(read_targets("nll_loss", target, weight, C, p->ignore_index, b.cls, b.wk, &total));
    const void *lp = logp->storage->data;
    double sum = 0.0;
    for (int64_t k = 0; k < K; k++) {
        double l = 0.0;   /* an ignored target's loss is +0, as torch's */
        if (b.cls[k] >= 0)
            l = -tg_dtype_load(logp->dtype, lp, tg__flat_pos(logp, pick(k, b.cls[k], C, S))) *
                b.wk[k];
        if (none) b.vals[k] = l;
        else sum += l;
    }
    if (!none) b.vals[0] = p->red == TG_REDUCTION_MEAN ? sum / total : sum;
    r = tg__tensor_uninit(logp->dtype, none ? target->ndim : 0, target->shape);
    if (!r) {
        rc = TG_ENOMEM;
        goto done;
    }
    tg__scatter(r, TG_F64, b.vals);
done:
    return forward_end(ctx, in, &b, r, out, rc);
}

/* ---- nll_loss_backward ------------------------------------------------------- */

/* nll_loss_backward's result, logp's shape: (C) for a 0-d target, else
 * target's with C at dim 1. */
static void result_shape(const tg_tensor *target, int64_t C, int *ndim, int64_t *shape)
{
    *ndim = target->ndim + 1;
    const int cdim = target->ndim == 0 ? 0 : 1;
    for (int d = 0, k = 0; d < *ndim; d++) shape[d] = d == cdim ? C : target->shape[k++];
}

/* in: g (the shape of nll_loss's result), target, weight or NULL. */
static int nllb_shape(int n, tg_tensor *const *in, const void *params, tg_dtype *dtype,
                      int *ndim, int64_t *shape)
{
    const nll_params *p = params;
    const char *op = "nll_loss_backward";
    const tg_tensor *g = in[0], *target = in[1];
    TG_TRY(tg__loss_check_reduction(op, p->red));
    TG_CHECK(g != NULL, TG_EINVAL, "%s: g must not be NULL", op);
    TG_CHECK(tg_dtype_is_float(g->dtype), TG_EDTYPE, "%s: g has dtype %s; float dtypes only",
             op, tg_dtype_name(g->dtype));
    TG_TRY(check_target(op, target));
    TG_CHECK(target->ndim < TG_MAX_DIMS, TG_ESHAPE, "%s: target has %d dims; at most %d", op,
             target->ndim, TG_MAX_DIMS - 1);
    TG_CHECK(p->C >= 0, TG_EINVAL, "%s: C=%lld must be >= 0", op, (long long)p->C);
    bool g_ok = p->red == TG_REDUCTION_NONE ? tg_tensor_same_shape(g, target) : g->ndim == 0;
    TG_CHECK(g_ok, TG_ESHAPE, "%s: g must have %s's shape", op,
             p->red == TG_REDUCTION_NONE ? "target" : "a 0-d loss");
    TG_TRY(check_weight(op, in[2], p->C));
    *dtype = g->dtype;
    result_shape(target, p->C, ndim, shape);
    TG_CHECK(tg__shape_bytes_fit(*ndim, shape, (int64_t)tg_dtype_size(g->dtype)), TG_EINVAL,
             "%s: C=%lld makes the result too large", op, (long long)p->C);
    return TG_OK;
}

/* The picks of nll_loss_backward(g) into b (allocated here; the caller
 * frees it): each target's class and weight, g's values, and *scale, the
 * factor of a reduced g (torch's order: -(g / total) for mean). */
static int read_picks(const char *op, const nll_params *p, int64_t C, tg_tensor *g,
                      tg_tensor *target, tg_tensor *weight, nll_bufs *b, double *scale)
{
    const int64_t K = tg_tensor_numel(target);
    double total;
    TG_TRY(bufs_alloc(b, op, K, p->red == TG_REDUCTION_NONE ? K : 1));
    TG_TRY(read_targets(op, target, weight, C, p->ignore_index, b->cls, b->wk, &total));
    tg__gather(g, TG_F64, b->vals);
    *scale = p->red == TG_REDUCTION_MEAN ? -(b->vals[0] / total) : -b->vals[0];
    return TG_OK;
}

/* -g_k w_k, pick k's term (then times w_k for a reduced g). */
static inline double pick_term(const nll_params *p, const nll_bufs *b, int64_t k, double scale)
{
    return p->red == TG_REDUCTION_NONE ? -b->wk[k] * b->vals[k] : b->wk[k] * scale;
}

/* dlogp: zeros, and -g_k w_k at each target's pick (see the top). */
static int nllb_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                        const void *params)
{
    const nll_params *p = params;
    tg_tensor *g = in[0], *target = in[1], *weight = in[2];
    const tg_dtype dt = g->dtype;   /* dispatch ran nllb_shape on these inputs */
    int nd;
    int64_t shape[TG_MAX_DIMS];
    result_shape(target, p->C, &nd, shape);
    const int64_t K = tg_tensor_numel(target), S = spatial(target);
    nll_bufs b = {0};
    tg_tensor *r = NULL;
    double scale;
    int rc;
    TG_TRY_GOTO(read_picks("nll_loss_backward", p, p->C, g, target, weight, &b, &scale));
    r = tg__tensor_empty(dt, nd, shape);   /* zeros */
    if (!r) {
        rc = TG_ENOMEM;
        goto done;
    }
    void *data = tg_tensor_data(r);
    for (int64_t k = 0; k < K; k++)
        if (b.cls[k] >= 0)
            tg_dtype_store(dt, data, pick(k, b.cls[k], p->C, S), pick_term(p, &b, k, scale));
done:
    return forward_end(ctx, in, &b, r, out, rc);
}

static const tg_op_schema nll_op, nllb_op;

/* Calls op on (g, the saved target, the saved weight or NULL) with params p. */
static int call_saved(const tg_op_schema *op, tg_ctx *ctx, tg_tensor *g, const nll_params *p,
                      tg_tensor **out)
{
    tg_tensor *in[3] = {g, NULL, NULL};
    TG_TRY(tg__ctx_saved(ctx, 0, &in[1]));
    if (tg__ctx_input_meta(ctx, 2)->ndim >= 0) TG_TRY(tg__ctx_saved(ctx, 1, &in[2]));
    return tg_op_call(op, out, 3, in, p, sizeof *p);
}

/* d nll_loss / d logp = nll_loss_backward(g); target and weight get none. */
static int nll_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    if (!tg__ctx_needs_grad(ctx, 0)) return TG_OK;
    const tg_meta *lp = tg__ctx_input_meta(ctx, 0);
    nll_params p = *(const nll_params *)tg__ctx_params(ctx);
    p.C = lp->shape[lp->ndim == 1 ? 0 : 1];
    return call_saved(&nllb_op, ctx, g, &p, &gi[0]);
}

/* acc[pick_k] += -g_k w_k, the picked elements only, not a zero-filled
 * logp-sized tensor (tg_op_backward_into_fn): each term rounded to the
 * dtype as nll_loss_backward stores it, then added as the engine adds
 * (tg__sum_term).  The picks of distinct k are distinct elements. */
static int nll_backward_into(tg_ctx *ctx, tg_tensor *g, tg_tensor *acc)
{
    const nll_params *p = tg__ctx_params(ctx);
    tg_tensor *target = NULL, *weight = NULL;
    TG_TRY(tg__ctx_saved(ctx, 0, &target));
    if (tg__ctx_input_meta(ctx, 2)->ndim >= 0) TG_TRY(tg__ctx_saved(ctx, 1, &weight));
    const tg_dtype dt = acc->dtype;
    const int64_t C = acc->shape[acc->ndim == 1 ? 0 : 1], K = tg_tensor_numel(target),
                  S = spatial(target);
    nll_bufs b = {0};
    double scale;
    int rc;
    TG_TRY_GOTO(read_picks("nll_loss", p, C, g, target, weight, &b, &scale));
    void *data = tg_tensor_data(acc);
    for (int64_t k = 0; k < K; k++) {
        if (b.cls[k] < 0) continue;
        const int64_t at = pick(k, b.cls[k], C, S);
        const double e = tg__round_to(dt, pick_term(p, &b, k, scale));
        tg_dtype_store(dt, data, at, tg__sum_term(dt, tg_dtype_load(dt, data, at), e));
    }
done:
    bufs_free(&b);
    return rc;
}

/* d nll_loss_backward / d g = nll_loss of its output's gradient. */
static int nllb_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    if (!tg__ctx_needs_grad(ctx, 0)) return TG_OK;
    return call_saved(&nll_op, ctx, g, tg__ctx_params(ctx), &gi[0]);
}

/* FP32, as PyTorch's autocast lists nll_loss: inside an autocast scope an
 * f16/bf16 logp and weight are cast to f32; outside, mixed float dtypes
 * promote. */
static const tg_op_schema nll_op = {.name = "nll_loss", .arity = 3, .amp = TG_AMP_FP32,
                                    .forward = nll_forward, .backward = nll_backward,
                                    .shape = nll_shape, .double_backward = true,
                                    .vjp = "dlogp = nll_loss_backward(g): "
                                           "-w[t] * g at each target's class (divided by the sum "
                                           "of the weights for mean), 0 elsewhere; "
                                           "target and weight get none",
                                    .backward_into = nll_backward_into};
static const tg_op_schema nllb_op = {.name = "nll_loss_backward", .arity = 3,
                                     .amp = TG_AMP_FP32, .forward = nllb_forward,
                                     .backward = nllb_backward, .shape = nllb_shape,
                                     .double_backward = true,
                                     .vjp = "dg = nll_loss(g') with the same target, "
                                            "weight and reduction"};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__nll_loss_ops[] = {&nll_op, &nllb_op};
static_assert(sizeof tg__nll_loss_ops / sizeof tg__nll_loss_ops[0] == TG__nll_loss_N,
              "src/ops/families.h must count the nll_loss ops");

int tg_nll_loss(tg_tensor **out, tg_tensor *logp, tg_tensor *target, tg_tensor *weight,
                tg_reduction red, int64_t ignore_index)
{
    nll_params p = {.red = red, .ignore_index = ignore_index};
    tg_tensor *in[3] = {logp, target, weight};
    return tg_op_call(&nll_op, out, 3, in, &p, sizeof p);
}

int tg__nll_read_targets(const char *op, const tg_tensor *target, const tg_tensor *weight,
                         int64_t C, int64_t ignore, int64_t *cls, double *wk, double *total)
{
    return read_targets(op, target, weight, C, ignore, cls, wk, total);
}

int tg__nll_loss_backward(tg_tensor **out, tg_tensor *g, tg_tensor *target, tg_tensor *weight,
                          tg_reduction red, int64_t ignore_index, int64_t C)
{
    nll_params p = {.red = red, .ignore_index = ignore_index, .C = C};
    tg_tensor *in[3] = {g, target, weight};
    return tg_op_call(&nllb_op, out, 3, in, &p, sizeof p);
}
