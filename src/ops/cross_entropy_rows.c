/* src/ops/cross_entropy_rows.c - cross_entropy of f32 logits x (N, C) and
 * class indices (N), weight f32 (C) or none, any ignore_index and
 * reduction, as one recorded op: the value and gradients of
 * nll_loss(log_softmax(x, 1), target, weight), bit for bit, without the
 * (N, C) log-probabilities, the (N, C) gradient of nll_loss that is zero
 * but at the targets, nor the second pass over each row for the maximum
 * and the sum of exps.
 *
 * The forward keeps each row's maximum m and s = sum_c exp(x_c - m) in
 * double (src/ops/softmax_rows.c, the rows of log_softmax), and the loss
 * of row n is -logp[n, t_n] w_n with logp[n, t_n] = (x - m) - log(s)
 * rounded to f32, as log_softmax stores it; nll_loss's sums and division
 * follow (tg__nll_read_targets).  The backward is, per row, log_softmax's
 * dx = g' - exp(x - m) sum(g') / s of nll_loss's gradient g', zero but at
 * t_n, where it is -w_n g (over sum_n w_n for mean) rounded to f32
 * (tg__log_softmax_pick_backward_rows_f32): one exp and one store per
 * element.  A create_graph backward builds the composition's own recorded
 * ops (nll_loss_backward, softmax, sum_dims, mul, sub), so higher
 * derivatives are the composition's. */
#include <assert.h>
#include <math.h>

#include "core/core.h"
#include "autograd/tape.h"
#include "ops/families.h"
#include "ops/gather_internal.h"
#include "ops/loss.h"
#include "ops/softmax_rows_internal.h"
#include "tapegrad/ops.h"

typedef struct ce_params {
    tg_reduction red;
    int64_t ignore_index;
} ce_params;

/* The saved slots: x, target, the rows' stats (N, 2) f64, weight. */
enum { SAVED_X, SAVED_TARGET, SAVED_STATS, SAVED_WEIGHT };

/* The rows [t per, (t + 1) per) of x (N, C) contiguous: in the forward
 * their stats st[n] = {m, s} and loss l[n] (0 for an ignored target); in
 * the backward dx from st and the picked gradient gt[n]. */
typedef struct ce_job {
    bool backward;
    const float *x;
    float *dx;
    double *st, *l;
    const int64_t *cls;
    const double *wk;
    const float *gt;
    int64_t N, C, per;
    tg__exp_width w;   /* the calling thread's (tg__exp_width_get) */
} ce_job;

static int ce_task(void *p, int64_t t)
{
    const ce_job *j = p;
    const int64_t ne = j->C > TG__ROWS_BLOCK ? j->C : TG__ROWS_BLOCK;
    double *e = tg__work_alloc((size_t)(ne + TG__EXP_PAD) * sizeof *e);
    if (!e)
        return tg__error(TG_ENOMEM, "cross_entropy: out of memory for a row of %lld classes",
                         (long long)j->C);
    const int64_t n0 = t * j->per, end = (t + 1) * j->per < j->N ? (t + 1) * j->per : j->N;
    const float *x = j->x + n0 * j->C;
    if (j->backward) {
        tg__log_softmax_pick_backward_rows_f32(x, j->dx + n0 * j->C, end - n0, j->C,
                                               j->st + 2 * n0, j->cls + n0, j->gt + n0, e, j->w);
        tg__work_free(e);
        return TG_OK;
    }
    tg__log_softmax_stats_rows_f32(x, end - n0, j->C, j->st + 2 * n0, e, j->w);
    for (int64_t n = n0; n < end; n++) {
        const double *st = j->st + 2 * n;
        j->l[n] = 0.0;   /* an ignored target's loss is +0, as nll_loss's */
        if (j->cls[n] >= 0) {
            const float logp = (float)(((double)j->x[n * j->C + j->cls[n]] - st[0]) - log(st[1]));
            j->l[n] = -(double)logp * j->wk[n];
        }
    }
    tg__work_free(e);
    return TG_OK;
}

static int ce_run(ce_job *j)
{
    j->per = j->C >= 32768 ? 1 : 32768 / j->C;   /* tasks of about 32k elements */
    j->w = tg__exp_width_get();
    return tg__run_tasks((j->N + j->per - 1) / j->per, j->N * j->C > 32768, ce_task, j);
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
    const int64_t N = target->shape[0];
    t->cls = tg__malloc((size_t)N * sizeof *t->cls);
    t->wk = tg__malloc((size_t)N * sizeof *t->wk);
    if (!t->cls || !t->wk) return TG_ENOMEM;
    /* the messages name nll_loss, as the composition's */
    return tg__nll_read_targets("nll_loss", target, weight, C, ignore, t->cls, t->wk, &t->total);
}

/* ---- the op ---------------------------------------------------------------------- */

/* tg__cross_entropy_rows has checked the inputs: a (N) loss or a 0-d one. */
static int ce_shape(int n, tg_tensor *const *in, const void *params, tg_dtype *dtype,
                    int *ndim, int64_t *shape)
{
    const ce_params *p = params;
    *dtype = TG_F32;
    *ndim = p->red == TG_REDUCTION_NONE ? 1 : 0;
    shape[0] = in[0]->shape[0];
    return TG_OK;
}

static int ce_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                      const void *params)
{
    const ce_params *p = params;
    tg_tensor *x = in[0], *target = in[1], *weight = in[2];
    const int64_t N = x->shape[0], C = x->shape[1];
    const bool none = p->red == TG_REDUCTION_NONE;
    ce_targets tt = {0};
    tg_tensor *xc = NULL, *st = NULL, *r = NULL;
    double *l = tg__malloc((size_t)N * sizeof *l);
    int rc = l ? TG_OK : TG_ENOMEM;
    if (rc < 0) goto done;
    TG_TRY_GOTO(targets_read(&tt, target, weight, C, p->ignore_index));
    TG_TRY_GOTO(tg_contiguous(&xc, x));   /* grad mode is off: not recorded */
    st = tg__tensor_uninit(TG_F64, 2, (int64_t[]){N, 2});
    r = tg__tensor_uninit(TG_F32, none ? 1 : 0, &N);
    if (!st || !r) {
        rc = TG_ENOMEM;
        goto done;
    }
    ce_job j = {.x = tg_tensor_cdata(xc), .st = tg_tensor_data(st), .l = l, .cls = tt.cls,
                .wk = tt.wk, .N = N, .C = C};
    TG_TRY_GOTO(ce_run(&j));
    float *y = tg_tensor_data(r);
    if (none) {
        for (int64_t k = 0; k < N; k++) y[k] = (float)l[k];
    } else {
        double sum = 0.0;   /* nll_loss's order */
        for (int64_t k = 0; k < N; k++) sum += l[k];
        y[0] = (float)(p->red == TG_REDUCTION_MEAN ? sum / tt.total : sum);
    }
    if (ctx) {   /* the slots SAVED_X ... SAVED_WEIGHT */
        int slot = tg__ctx_save(ctx, x);
        if (slot >= 0) slot = tg__ctx_save(ctx, target);
        if (slot >= 0) slot = tg__ctx_save(ctx, st);
        if (slot >= 0 && weight) slot = tg__ctx_save(ctx, weight);
        if (slot < 0) {
            rc = slot;
            goto done;
        }
    }
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

/* nll_loss's gradient at each row's target as the composition's engine
 * holds it: -w g (g / sum w for mean) rounded to f32, added to the zeros
 * of a new gradient (tg__sum_term). */
static int picked_grads(const ce_params *p, const ce_targets *tt, const tg_tensor *g,
                        int64_t N, float *gt)
{
    double *gv = tg__malloc((size_t)(p->red == TG_REDUCTION_NONE ? N : 1) * sizeof *gv);
    if (!gv) return TG_ENOMEM;
    tg__gather(g, TG_F64, gv);
    const double scale = p->red == TG_REDUCTION_MEAN ? -(gv[0] / tt->total) : -gv[0];
    for (int64_t k = 0; k < N; k++) {
        if (tt->cls[k] < 0) {
            gt[k] = 0.0f;
            continue;
        }
        const double term = p->red == TG_REDUCTION_NONE ? -tt->wk[k] * gv[k] : tt->wk[k] * scale;
        gt[k] = (float)tg__sum_term(TG_F32, 0.0, tg__round_to(TG_F32, term));
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
    if (tg_grad_enabled() || g->dtype != TG_F32)
        return backward_composed(p, g, x, target, weight, &gi[0]);
    const int64_t N = x->shape[0], C = x->shape[1];
    ce_targets tt = {0};
    float *gt = tg__malloc((size_t)N * sizeof *gt);
    int rc = gt ? TG_OK : TG_ENOMEM;
    if (rc < 0) goto done;
    TG_TRY_GOTO(targets_read(&tt, target, weight, C, p->ignore_index));
    TG_TRY_GOTO(tg_contiguous(&xc, x));
    dx = tg__tensor_uninit(TG_F32, 2, x->shape);
    if (!dx) {
        rc = TG_ENOMEM;
        goto done;
    }
    TG_TRY_GOTO(picked_grads(p, &tt, g, N, gt));
    ce_job j = {.backward = true, .x = tg_tensor_cdata(xc), .dx = tg_tensor_data(dx),
                .st = (double *)tg_tensor_cdata(st), .cls = tt.cls, .gt = gt, .N = N, .C = C};
    TG_TRY_GOTO(ce_run(&j));
    gi[0] = dx;
    dx = NULL;
done:
    free(gt);
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

int tg__cross_entropy_rows(tg_tensor **out, tg_tensor *x, tg_tensor *target, tg_tensor *weight,
                           tg_reduction red, int64_t ignore_index)
{
    if (!out || !x || !target || x->dtype != TG_F32 || x->ndim != 2 || x->shape[0] < 1 ||
        x->shape[1] < 1 || target->dtype != TG_I64 || target->ndim != 1 ||
        target->shape[0] != x->shape[0])
        return TG__CE_ROWS_NOT_TAKEN;
    if (weight && (weight->dtype != TG_F32 || weight->ndim != 1 ||
                   weight->shape[0] != x->shape[1] || tg_tensor_requires_grad(weight)))
        return TG__CE_ROWS_NOT_TAKEN;
    if (red != TG_REDUCTION_MEAN && red != TG_REDUCTION_SUM && red != TG_REDUCTION_NONE)
        return TG__CE_ROWS_NOT_TAKEN;
    ce_params p = {.red = red, .ignore_index = ignore_index};
    tg_tensor *in[3] = {x, target, weight};
    return tg_op_call(&ce_op, out, 3, in, &p, sizeof p);
}
