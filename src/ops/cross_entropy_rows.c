/* src/ops/cross_entropy_rows.c - cross_entropy of f32 or f64 logits x
 * (N, C) or (N, C, d1, ...) and class indices (N) or (N, d1, ...), weight
 * of x's dtype (C) or none, any ignore_index and reduction, as one
 * recorded op: the value and gradients of nll_loss(log_softmax(x, 1),
 * target, weight), bit for bit, without the log-probabilities, the
 * gradient of nll_loss that is zero but at the targets, nor the second
 * pass over each row for the maximum and the sum of exps.
 *
 * x is walked as (N, C, S), S = d1 d2 ... (1 without spatial dims): row
 * (n, i) is its C elements of stride S.  The forward keeps each row's
 * maximum m and s = sum_c exp(x_c - m) in double, and the loss of target
 * k = n S + i is -logp[n, t_k, i] w_k with logp = (x - m) - log(s)
 * rounded to x's dtype, as log_softmax stores it; nll_loss's sums and
 * division follow (tg__nll_read_targets).  The backward is, per row,
 * log_softmax's dx = g' - exp(x - m) sum(g') / s of nll_loss's gradient
 * g', zero but at t_k, where it is -w_k g (over sum_k w_k for mean)
 * rounded to x's dtype: one exp and one store per element.  The rows and
 * their exp are log_softmax's (src/ops/softmax.c): f32 with S = 1 take
 * src/ops/softmax_rows.c's vectorized exp
 * (tg__log_softmax_pick_backward_rows_f32), f32 with S > 1
 * src/ops/softmax_strided.c's (tg__log_softmax_pick_backward_strided_f32,
 * sums in class order), f64 libm's exp and sums in class order, the
 * slabs below.  A create_graph
 * backward builds the composition's own recorded ops (nll_loss_backward,
 * softmax, sum_dims, mul, sub), so higher derivatives are the
 * composition's. */
#include <assert.h>
#include <math.h>

#include "core/core.h"
#include "autograd/tape.h"
#include "ops/families.h"
#include "ops/gather_internal.h"
#include "ops/loss.h"
#include "ops/softmax_rows_internal.h"
#include "ops/softmax_strided_internal.h"
#include "tapegrad/ops.h"

typedef struct ce_params {
    tg_reduction red;
    int64_t ignore_index;
} ce_params;

/* The saved slots: x, target, the rows' stats (N, 2) f64, weight. */
enum { SAVED_X, SAVED_TARGET, SAVED_STATS, SAVED_WEIGHT };

/* The slabs (C, S) [t per, (t + 1) per) of x (N, C, S) contiguous: in the
 * forward their rows' stats st[k] = {m, s} and losses l[k] (0 for an
 * ignored target), k = n S + i; in the backward dx from st and the picked
 * gradients gt[k] (gf: gt as floats, for the f32 rows). */
typedef struct ce_job {
    bool backward, f64;
    const void *x;
    void *dx;
    double *st, *l;
    const int64_t *cls;
    const double *wk, *gt;
    const float *gf;
    int64_t N, C, S, per;
    /* slabs of S > 1 that are large: tasks of `pos` rows (positions) of a
     * slab, `chunks` tasks a slab (0: whole slabs; tg__slab_tasks) */
    int64_t pos, chunks;
    tg__exp_width w;   /* the calling thread's (tg__exp_width_get) */
} ce_job;

/* log_softmax's f64 slabs of libm's exp (src/ops/softmax.c's forward_slab
 * and log_softmax_backward_slab, which take inner = 1 the same way), rows
 * [i0, i1) of one slab x (C, S): slab_fwd_f64 their stats, each m the
 * first largest in class order, each s summed in class order; slab_bwd_f64
 * dx = 0 - exp(x - m) f, f = (0 + g_t) / s, and at the target g_t - exp(x
 * - m) f, the composition's g - exp(x - m) (sum(g) / s) of a g zero but at
 * the target.  st, t and gt: the slab's (row i at st[2 i], t[i], gt[i]);
 * f: i1 - i0 doubles of scratch.  The f32 slabs are
 * src/ops/softmax_strided.c's, the same steps with its exp. */
static void slab_fwd_f64(const double *x, int64_t C, int64_t S, int64_t i0, int64_t i1,
                         double *st)
{
    for (int64_t i = i0; i < i1; i++) {
        st[2 * i] = -INFINITY;
        st[2 * i + 1] = 0.0;
    }
    for (int64_t c = 0; c < C; c++)
        for (int64_t i = i0; i < i1; i++)
            if (x[c * S + i] > st[2 * i]) st[2 * i] = x[c * S + i];
    for (int64_t c = 0; c < C; c++)
        for (int64_t i = i0; i < i1; i++) st[2 * i + 1] += exp(x[c * S + i] - st[2 * i]);
}

static void slab_bwd_f64(const double *x, double *dx, int64_t C, int64_t S, int64_t i0,
                         int64_t i1, const double *st, const int64_t *t, const double *gt,
                         double *f)
{
    for (int64_t i = i0; i < i1; i++) f[i - i0] = (0.0 + gt[i]) / st[2 * i + 1];
    for (int64_t c = 0; c < C; c++)
        for (int64_t i = i0; i < i1; i++)
            dx[c * S + i] = 0.0 - exp(x[c * S + i] - st[2 * i]) * f[i - i0];
    for (int64_t i = i0; i < i1; i++)
        if (t[i] >= 0) dx[t[i] * S + i] = gt[i] - exp(x[t[i] * S + i] - st[2 * i]) * f[i - i0];
}

/* pick_losses of the f32 slabs' targets [k0, k1): from logp, which their
 * stats kernel (tg__log_softmax_stats_strided_f32) left in l. */
static void pick_losses_strided(const ce_job *j, int64_t k0, int64_t k1)
{
    for (int64_t k = k0; k < k1; k++) j->l[k] = j->cls[k] < 0 ? 0.0 : -j->l[k] * j->wk[k];
}

/* l[k] = -logp[n, t_k, i] w_k for the targets k = n S + i, i in [i0,
 * i1), of f64 slab n, from their rows' stats; +0 for an ignored target, as
 * nll_loss's. */
static void pick_losses_f64(const ce_job *j, int64_t n, int64_t i0, int64_t i1)
{
    const int64_t C = j->C, S = j->S;
    for (int64_t i = i0, k = n * S + i0; i < i1; i++, k++) {
        j->l[k] = 0.0;
        if (j->cls[k] < 0) continue;
        const int64_t at = n * C * S + j->cls[k] * S + i;
        const double *st = j->st + 2 * k;
        j->l[k] = -((((const double *)j->x)[at] - st[0]) - log(st[1])) * j->wk[k];
    }
}

/* pick_losses_f64's losses of the targets of slabs [n0, end), logp rounded
 * to x's dtype as log_softmax stores it (the f32 slabs': from logp, which
 * their stats kernel left in l). */
static void pick_losses(const ce_job *j, int64_t n0, int64_t end)
{
    const int64_t C = j->C, S = j->S;
    if (!j->f64 && S == 1) {   /* the f32 rows */
        const float *x = j->x;
        for (int64_t n = n0; n < end; n++) {
            const double *st = j->st + 2 * n;
            j->l[n] = 0.0;
            if (j->cls[n] >= 0) {
                const float logp = (float)(((double)x[n * C + j->cls[n]] - st[0]) - log(st[1]));
                j->l[n] = -(double)logp * j->wk[n];
            }
        }
        return;
    }
    if (!j->f64) {   /* the f32 slabs */
        pick_losses_strided(j, n0 * S, end * S);
        return;
    }
    for (int64_t n = n0; n < end; n++) pick_losses_f64(j, n, 0, S);
}

/* Rows [i0, i1) of slab n (the task's share of a large slab). */
static int chunk_task(const ce_job *j, int64_t n, int64_t i0, int64_t i1)
{
    const int64_t slab = j->C * j->S, k = n * j->S;
    if (j->f64) {
        const double *x = (const double *)j->x + n * slab;
        if (!j->backward) {
            slab_fwd_f64(x, j->C, j->S, i0, i1, j->st + 2 * k);
            pick_losses_f64(j, n, i0, i1);
            return TG_OK;
        }
        double *f = tg__work_alloc((size_t)(i1 - i0) * sizeof *f);
        if (!f)
            return tg__error(TG_ENOMEM, "cross_entropy: out of memory for %lld rows",
                             (long long)(i1 - i0));
        slab_bwd_f64(x, (double *)j->dx + n * slab, j->C, j->S, i0, i1, j->st + 2 * k,
                     j->cls + k, j->gt + k, f);
        tg__work_free(f);
        return TG_OK;
    }
    const float *x = (const float *)j->x + n * slab;
    if (j->backward) {
        tg__log_softmax_pick_backward_strided_f32(x, (float *)j->dx + n * slab, j->C, j->S, i0,
                                                  i1, j->st + 2 * k, j->cls + k, j->gt + k, j->w);
        return TG_OK;
    }
    tg__log_softmax_stats_strided_f32(x, j->C, j->S, i0, i1, j->cls + k, j->st + 2 * k,
                                      j->l + k, j->w);
    pick_losses_strided(j, k + i0, k + i1);
    return TG_OK;
}

static int ce_task(void *p, int64_t t)
{
    const ce_job *j = p;
    if (j->chunks > 0) {   /* rows [i0, i1) of slab t / chunks */
        const int64_t n = t / j->chunks, i0 = t % j->chunks * j->pos;
        return chunk_task(j, n, i0, i0 + j->pos < j->S ? i0 + j->pos : j->S);
    }
    const bool rows = !j->f64 && j->S == 1;   /* softmax_rows.c's vectorized rows */
    /* scratch: the rows' exps, or slab_bwd_f64's f (the f32 slabs take none) */
    const int64_t ne = rows ? (j->C > TG__ROWS_BLOCK ? j->C : TG__ROWS_BLOCK) : j->f64 ? j->S : 0;
    double *e = tg__work_alloc((size_t)(ne + TG__EXP_PAD) * sizeof *e);
    if (!e)
        return tg__error(TG_ENOMEM, "cross_entropy: out of memory for a row of %lld classes",
                         (long long)j->C);
    const int64_t n0 = t * j->per, end = (t + 1) * j->per < j->N ? (t + 1) * j->per : j->N;
    const int64_t slab = j->C * j->S;
    const size_t esz = j->f64 ? sizeof(double) : sizeof(float);
    const char *x = (const char *)j->x + (size_t)(n0 * slab) * esz;
    char *dx = j->backward ? (char *)j->dx + (size_t)(n0 * slab) * esz : NULL;
    if (rows && j->backward) {
        tg__log_softmax_pick_backward_rows_f32((const float *)x, (float *)dx, end - n0, j->C,
                                               j->st + 2 * n0, j->cls + n0, j->gf + n0, e, j->w);
    } else if (rows) {
        tg__log_softmax_stats_rows_f32((const float *)x, end - n0, j->C, j->st + 2 * n0, e,
                                       j->w);
    } else {
        for (int64_t n = n0; n < end; n++) {
            const int64_t o = (n - n0) * slab, k = n * j->S;
            if (j->backward && j->f64)
                slab_bwd_f64((const double *)x + o, (double *)dx + o, j->C, j->S, 0, j->S,
                             j->st + 2 * k, j->cls + k, j->gt + k, e);
            else if (j->backward)
                tg__log_softmax_pick_backward_strided_f32((const float *)x + o, (float *)dx + o,
                                                          j->C, j->S, 0, j->S, j->st + 2 * k,
                                                          j->cls + k, j->gt + k, j->w);
            else if (j->f64)
                slab_fwd_f64((const double *)x + o, j->C, j->S, 0, j->S, j->st + 2 * k);
            else
                tg__log_softmax_stats_strided_f32((const float *)x + o, j->C, j->S, 0, j->S,
                                                  j->cls + k, j->st + 2 * k, j->l + k, j->w);
        }
    }
    if (!j->backward) pick_losses(j, n0, end);
    tg__work_free(e);
    return TG_OK;
}

static int ce_run(ce_job *j)
{
    j->w = tg__exp_width_get();
    const int64_t tasks = tg__slab_tasks(j->N, j->C, j->S, j->S > 1, &j->per, &j->pos,
                                         &j->chunks);
    return tg__run_tasks(tasks, j->N * j->C * j->S > TG__SLAB_TASK, ce_task, j);
}

/* The targets' classes and weights (tg__nll_read_targets), with their
 * arrays; freed by targets_free. */
typedef struct ce_targets {
    int64_t *cls;
    double *wk, total;
} ce_targets;

static void targets_free(ce_targets *t)
{
    free(t->cls);
    free(t->wk);
}

static int targets_read(ce_targets *t, const tg_tensor *target, const tg_tensor *weight,
                        int64_t C, int64_t ignore)
{
    const int64_t K = tg_tensor_numel(target);
    t->cls = tg__malloc((size_t)K * sizeof *t->cls);
    t->wk = tg__malloc((size_t)K * sizeof *t->wk);
    if (!t->cls || !t->wk) return TG_ENOMEM;
    /* the messages name nll_loss, as the composition's */
    return tg__nll_read_targets("nll_loss", target, weight, C, ignore, t->cls, t->wk, &t->total);
}

/* S of x (N, C, d1, ...): d1 d2 ... */
static int64_t spatial_of(const tg_tensor *x)
{
    int64_t S = 1;
    for (int d = 2; d < x->ndim; d++) S *= x->shape[d];
    return S;
}

/* ---- the op ---------------------------------------------------------------------- */

/* tg__cross_entropy_rows has checked the inputs: a loss of target's shape
 * or a 0-d one, of x's dtype. */
static int ce_shape(int n, tg_tensor *const *in, const void *params, tg_dtype *dtype,
                    int *ndim, int64_t *shape)
{
    const ce_params *p = params;
    *dtype = in[0]->dtype;
    *ndim = p->red == TG_REDUCTION_NONE ? in[1]->ndim : 0;
    for (int d = 0; d < *ndim; d++) shape[d] = in[1]->shape[d];
    return TG_OK;
}

int tg__ce_rows_finish(tg_op_ctx *ctx, tg_tensor *r, double *l, int64_t K, tg_reduction red,
                       double total, tg_tensor *x, tg_tensor *target, tg_tensor *st,
                       tg_tensor *weight)
{
    if (red != TG_REDUCTION_NONE) {
        double sum = 0.0;   /* nll_loss's order */
        for (int64_t k = 0; k < K; k++) sum += l[k];
        l[0] = red == TG_REDUCTION_MEAN ? sum / total : sum;
    }
    tg__scatter(r, TG_F64, l);   /* rounded to x's dtype, as nll_loss's */
    if (!ctx) return TG_OK;
    int slot = tg__ctx_save(ctx, x);   /* the slots SAVED_X ... SAVED_WEIGHT */
    if (slot >= 0) slot = tg__ctx_save(ctx, target);
    if (slot >= 0) slot = tg__ctx_save(ctx, st);
    if (slot >= 0 && weight) slot = tg__ctx_save(ctx, weight);
    return slot < 0 ? slot : TG_OK;
}

static int ce_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                      const void *params)
{
    const ce_params *p = params;
    tg_tensor *x = in[0], *target = in[1], *weight = in[2];
    const int64_t N = x->shape[0], C = x->shape[1], S = spatial_of(x), K = N * S;
    const bool none = p->red == TG_REDUCTION_NONE, f64 = x->dtype == TG_F64;
    ce_targets tt = {0};
    tg_tensor *xc = NULL, *st = NULL, *r = NULL;
    double *l = tg__malloc((size_t)K * sizeof *l);
    int rc = l ? TG_OK : TG_ENOMEM;
    if (rc < 0) goto done;
    TG_TRY_GOTO(targets_read(&tt, target, weight, C, p->ignore_index));
    TG_TRY_GOTO(tg_contiguous(&xc, x));   /* grad mode is off: not recorded */
    st = tg__tensor_uninit(TG_F64, 2, (int64_t[]){K, 2});
    r = tg__tensor_uninit(x->dtype, none ? target->ndim : 0, target->shape);
    if (!st || !r) {
        rc = TG_ENOMEM;
        goto done;
    }
    ce_job j = {.f64 = f64, .x = tg_tensor_cdata(xc), .st = tg_tensor_data(st), .l = l,
                .cls = tt.cls, .wk = tt.wk, .N = N, .C = C, .S = S};
    TG_TRY_GOTO(ce_run(&j));
    TG_TRY_GOTO(tg__ce_rows_finish(ctx, r, l, K, p->red, tt.total, x, target, st, weight));
    *out = r;
    r = NULL;
done:
    free(l);
    targets_free(&tt);
    tg_tensor_release(xc);
    tg_tensor_release(st);
    tg_tensor_release(r);
    return rc;
}

/* The composition's gradient as recorded ops (a create_graph backward, or
 * a g of another dtype): g' = nll_loss_backward(g), then log_softmax's
 * dx = g' - softmax(x) sum(g', dim 1). */
static int backward_composed(const ce_params *p, tg_tensor *g, tg_tensor *x, tg_tensor *target,
                             tg_tensor *weight, tg_tensor **dx)
{
    tg_tensor *t[4] = {NULL, NULL, NULL, NULL};
    int rc;
    TG_TRY_GOTO(tg__nll_loss_backward(&t[0], g, target, weight, p->red, p->ignore_index,
                                      x->shape[1]));
    TG_TRY_GOTO(tg_softmax(&t[1], x, 1));
    TG_TRY_GOTO(tg_sum_dims(&t[2], t[0], 1, (int[]){1}, true));
    TG_TRY_GOTO(tg_mul(&t[3], t[1], t[2]));
    rc = tg_sub(dx, t[0], t[3]);
done:
    tg__loss_release_all(t, 4);
    return rc;
}

/* nll_loss's gradient at each target as the composition's engine holds
 * it: -w g (g / sum w for mean) rounded to dt, added to the zeros of a new
 * gradient (tg__sum_term), into gt, or into gf (floats, for the f32 rows)
 * when gt is NULL.  dt: f32 or f64. */
static int picked_grads(const ce_params *p, const ce_targets *tt, const tg_tensor *g,
                        tg_dtype dt, int64_t K, double *gt, float *gf)
{
    double *gv = tg__malloc((size_t)(p->red == TG_REDUCTION_NONE ? K : 1) * sizeof *gv);
    if (!gv) return TG_ENOMEM;
    tg__gather(g, TG_F64, gv);
    const double scale = p->red == TG_REDUCTION_MEAN ? -(gv[0] / tt->total) : -gv[0];
    for (int64_t k = 0; k < K; k++) {
        double v = 0.0;
        if (tt->cls[k] >= 0) {
            const double term =
                p->red == TG_REDUCTION_NONE ? -tt->wk[k] * gv[k] : tt->wk[k] * scale;
            v = dt == TG_F64 ? tg__sum_term(TG_F64, 0.0, term)   /* constants: inlined */
                             : tg__sum_term(TG_F32, 0.0, tg__round_to(TG_F32, term));
        }
        if (gt) gt[k] = v;
        else gf[k] = (float)v;
    }
    free(gv);
    return TG_OK;
}

static int ce_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    if (!tg__ctx_needs_grad(ctx, 0)) return TG_OK;
    const ce_params *p = tg__ctx_params(ctx);
    tg_tensor *x, *target, *st, *weight = NULL, *xc = NULL, *dx = NULL;
    TG_TRY(tg__ctx_saved(ctx, SAVED_X, &x));
    TG_TRY(tg__ctx_saved(ctx, SAVED_TARGET, &target));
    TG_TRY(tg__ctx_saved(ctx, SAVED_STATS, &st));
    if (tg__ctx_input_meta(ctx, 2)->ndim >= 0) TG_TRY(tg__ctx_saved(ctx, SAVED_WEIGHT, &weight));
    if (tg_grad_enabled() || g->dtype != x->dtype)
        return backward_composed(p, g, x, target, weight, &gi[0]);
    const int64_t N = x->shape[0], C = x->shape[1], S = spatial_of(x), K = N * S;
    const bool f64 = x->dtype == TG_F64;
    ce_targets tt = {0};
    const bool rows = !f64 && S == 1;   /* the f32 rows take floats */
    double *gt = rows ? NULL : tg__malloc((size_t)K * sizeof *gt);
    float *gf = rows ? tg__malloc((size_t)K * sizeof *gf) : NULL;
    int rc = gt || gf ? TG_OK : TG_ENOMEM;
    if (rc < 0) goto done;
    TG_TRY_GOTO(targets_read(&tt, target, weight, C, p->ignore_index));
    TG_TRY_GOTO(tg_contiguous(&xc, x));
    dx = tg__tensor_uninit(x->dtype, x->ndim, x->shape);
    if (!dx) {
        rc = TG_ENOMEM;
        goto done;
    }
    TG_TRY_GOTO(picked_grads(p, &tt, g, x->dtype, K, gt, gf));
    ce_job j = {.backward = true, .f64 = f64, .x = tg_tensor_cdata(xc),
                .dx = tg_tensor_data(dx), .st = (double *)tg_tensor_cdata(st), .cls = tt.cls,
                .gt = gt, .gf = gf, .N = N, .C = C, .S = S};
    TG_TRY_GOTO(ce_run(&j));
    gi[0] = dx;
    dx = NULL;
done:
    free(gt);
    free(gf);
    targets_free(&tt);
    tg_tensor_release(xc);
    tg_tensor_release(dx);
    return rc;
}

static const tg_op_schema ce_op = {.name = "cross_entropy", .arity = 3, .amp = TG_AMP_FP32,
                                   .forward = ce_forward, .backward = ce_backward,
                                   .shape = ce_shape, .double_backward = true,
                                   .vjp = "dx = g' - softmax(x) * sum(g'), g' = "
                                          "nll_loss_backward(g); target and weight get none"};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__ce_rows_ops[] = {&ce_op};
static_assert(sizeof tg__ce_rows_ops / sizeof tg__ce_rows_ops[0] == TG__ce_rows_N,
              "src/ops/families.h must count the ce_rows ops");

bool tg__ce_rows_fit(const tg_tensor *x, const tg_tensor *classes, const tg_tensor *weight,
                     tg_reduction red)
{
    if ((x->dtype != TG_F32 && x->dtype != TG_F64) || x->ndim < 2 || tg_tensor_numel(x) < 1)
        return false;
    if (classes) {
        if (classes->dtype != TG_I64 || classes->ndim != x->ndim - 1) return false;
        for (int d = 0; d < classes->ndim; d++)   /* x's shape without the class dim */
            if (classes->shape[d] != x->shape[d == 0 ? 0 : d + 1]) return false;
    }
    if (weight && (weight->dtype != x->dtype || weight->ndim != 1 ||
                   weight->shape[0] != x->shape[1] || tg_tensor_requires_grad(weight)))
        return false;
    return red == TG_REDUCTION_MEAN || red == TG_REDUCTION_SUM || red == TG_REDUCTION_NONE;
}

int tg__cross_entropy_rows(tg_tensor **out, tg_tensor *x, tg_tensor *target, tg_tensor *weight,
                           tg_reduction red, int64_t ignore_index)
{
    if (!out || !x || !target || !tg__ce_rows_fit(x, target, weight, red))
        return TG__CE_ROWS_NOT_TAKEN;
    ce_params p = {.red = red, .ignore_index = ignore_index};
    tg_tensor *in[3] = {x, target, weight};
    return tg_op_call(&ce_op, out, 3, in, &p, sizeof p);
}
