/* src/nn/optim_sparse.c - optimizer steps with sparse gradients (an
 * Embedding with sparse=true, tapegrad/sparse.h), as torch 1.13 takes them:
 * which kinds take them (and torch's words for those that refuse), and the
 * updates of SGD (without weight decay or momentum), Adagrad (without weight
 * decay) and SparseAdam, each at the gradient's rows only.
 *
 * The arithmetic follows torch's tensor ops one by one, each rounded to the
 * parameter's dtype (f32 or f64; f16/bf16 parameters are refused): R(x)
 * below is that rounding. */
#include <math.h>
#include <stdlib.h>

#include "optim_internal.h"

/* torch 1.13's message when kind k refuses a sparse gradient. */
static const char *refusal(tg__opt_kind k)
{
    switch (k) {
    case TG__OPT_ADAM: return "Adam does not support sparse gradients, please consider "
                              "SparseAdam instead";
    case TG__OPT_ADAMW: return "AdamW does not support sparse gradients";
    case TG__OPT_RMSPROP: return "RMSprop does not support sparse gradients";
    case TG__OPT_ADAMAX: return "Adamax does not support sparse gradients";
    case TG__OPT_NADAM: return "NAdam does not support sparse gradients";
    case TG__OPT_RADAM: return "RAdam does not support sparse gradients";
    case TG__OPT_ADADELTA: return "Adadelta does not support sparse gradients";
    case TG__OPT_RPROP: return "Rprop does not support sparse gradients";
    case TG__OPT_ASGD: return "ASGD does not support sparse gradients";
    default: return NULL;
    }
}

int tg__opt_check_sparse(tg__opt_kind k, const tg__opt_hparams *h, int i, const tg_tensor *p,
                         const tg_tensor *g)
{
    const char *fn = "optimizer_step";
    if (k == TG__OPT_SPARSE_ADAM)
        TG_CHECK(g->sparse, TG_EUNSUPPORTED, "%s: params[%d].grad is dense: SparseAdam does not "
                 "support dense gradients, please consider Adam instead", fn, i);
    if (!g->sparse || k == TG__OPT_LBFGS) return TG_OK;   /* L-BFGS: its dense sum */
    const char *no = refusal(k);
    TG_CHECK(no == NULL, TG_EUNSUPPORTED, "%s: params[%d].grad is sparse: %s", fn, i, no);
    TG_CHECK(p->dtype == TG_F32 || p->dtype == TG_F64, TG_EUNSUPPORTED,
             "%s: params[%d] is %s; a sparse gradient updates f32 and f64 parameters only", fn,
             i, tg_dtype_name(p->dtype));
    if (k == TG__OPT_SGD) {
        TG_CHECK(h->weight_decay == 0, TG_EUNSUPPORTED,
                 "%s: params[%d].grad is sparse and weight_decay=%g: SGD's weight decay adds "
                 "the dense parameter to it (torch: add(sparse, dense) is not supported)", fn,
                 i, h->weight_decay);
        TG_CHECK(h->momentum == 0, TG_EUNSUPPORTED,
                 "%s: params[%d].grad is sparse and momentum=%g: SGD takes sparse gradients "
                 "without momentum only (torch keeps a sparse momentum buffer; tapegrad does "
                 "not)", fn, i, h->momentum);
    }
    if (k == TG__OPT_ADAGRAD)
        TG_CHECK(h->weight_decay == 0, TG_EUNSUPPORTED,
                 "%s: params[%d].grad is sparse and weight_decay=%g: weight_decay option is "
                 "not compatible with sparse gradients", fn, i, h->weight_decay);
    return TG_OK;
}

/* x rounded to dt (f32 or f64): one tensor op's result in torch. */
static inline double R(tg_dtype dt, double x) { return dt == TG_F64 ? x : (double)(float)x; }

/* y + a * x as torch's dense += alpha * sparse computes it (BLAS axpy: one
 * fused multiply-add, one rounding). */
static inline double axpy(tg_dtype dt, double a, double x, double y)
{
    return dt == TG_F64 ? fma(a, x, y) : (double)fmaf((float)a, (float)x, (float)y);
}

/* Element e (row-major) of p, read and written in its dtype. */
static inline double p_get(const tg_tensor *p, int64_t e)
{
    return tg_dtype_load(p->dtype, p->storage->data, tg__flat_pos(p, e));
}
static inline void p_set(tg_tensor *p, int64_t e, double v)
{
    tg_dtype_store(p->dtype, p->storage->data, tg__flat_pos(p, e), v);
}

/* A state buffer's (contiguous) elements. */
static inline void *buf_data(tg_tensor *b)
{
    return (char *)b->storage->data + b->offset * (int64_t)tg_dtype_size(b->dtype);
}

/* SGD: param.add_(g, alpha=-lr), each stored row in turn (repeats too). */
static void sgd_sparse(tg_tensor *p, const tg_tensor *g, const tg__opt_hparams *h)
{
    const tg_dtype dt = p->dtype;
    const tg__sparse *sp = g->sparse;
    const int64_t nnz = sp->indices->shape[1], rn = tg__sparse_row_numel(g);
    const int64_t *ix = sp->indices->storage->data;
    const void *v = sp->values->storage->data;
    const double alpha = R(dt, -h->lr), sign = h->maximize ? -1.0 : 1.0;
    for (int64_t k = 0; k < nnz; k++)
        for (int64_t j = 0; j < rn; j++) {
            const int64_t e = ix[k] * rn + j;
            const double d = sign * tg_dtype_load(dt, v, k * rn + j);
            p_set(p, e, axpy(dt, alpha, d, p_get(p, e)));
        }
}

/* Adagrad's sparse path (torch's _single_tensor_adagrad). */
static void adagrad_sparse(tg_tensor *p, const tg__opt_hparams *h, tg__opt_state *st,
                           const int64_t *rows, const double *vals, int64_t n, int64_t rn)
{
    const tg_dtype dt = p->dtype;
    st->step++;
    const double clr = h->lr / (1 + (double)(st->step - 1) * h->lr_decay);
    const double alpha = R(dt, -clr), eps = R(dt, h->eps);
    void *sum = buf_data(st->buf[0]);
    for (int64_t q = 0; q < n; q++)
        for (int64_t j = 0; j < rn; j++) {
            const int64_t e = rows[q] * rn + j;
            const double gv = h->maximize ? -vals[q * rn + j] : vals[q * rn + j];
            const double s = R(dt, tg_dtype_load(dt, sum, e) + R(dt, gv * gv));
            tg_dtype_store(dt, sum, e, s);
            const double std = R(dt, R(dt, sqrt(s)) + eps);
            p_set(p, e, axpy(dt, alpha, R(dt, gv / std), p_get(p, e)));
        }
}

/* torch 1.13's sparse_adam (torch/optim/_functional.py), line by line. */
static void sparse_adam(tg_tensor *p, const tg__opt_hparams *h, tg__opt_state *st,
                        const int64_t *rows, const double *vals, int64_t n, int64_t rn)
{
    const tg_dtype dt = p->dtype;
    st->step++;
    const double b1 = h->beta1, b2 = h->beta2;
    const double bc1 = 1 - pow(b1, (double)st->step), bc2 = 1 - pow(b2, (double)st->step);
    const double step_size = h->lr * sqrt(bc2) / bc1;
    const double c1 = R(dt, 1 - b1), c2 = R(dt, 1 - b2), eps = R(dt, h->eps);
    const double ns = R(dt, -step_size);
    void *m = buf_data(st->buf[0]), *v = buf_data(st->buf[1]);
    for (int64_t q = 0; q < n; q++)
        for (int64_t j = 0; j < rn; j++) {
            const int64_t e = rows[q] * rn + j;
            const double g = h->maximize ? -vals[q * rn + j] : vals[q * rn + j];
            const double old_m = tg_dtype_load(dt, m, e), old_v = tg_dtype_load(dt, v, e);
            const double upd_m = R(dt, R(dt, g - old_m) * c1);   /* grad.sub(old).mul_(1-b1) */
            tg_dtype_store(dt, m, e, R(dt, old_m + upd_m));      /* exp_avg.add_(sparse) */
            const double upd_v = R(dt, R(dt, R(dt, g * g) - old_v) * c2);
            tg_dtype_store(dt, v, e, R(dt, old_v + upd_v));
            const double numer = R(dt, upd_m + old_m);
            const double denom = R(dt, R(dt, sqrt(R(dt, upd_v + old_v))) + eps);
            const double d = R(dt, ns * R(dt, numer / denom));   /* -step_size * numer/denom */
            p_set(p, e, R(dt, p_get(p, e) + d));
        }
}

int tg__opt_sparse_update(tg_optimizer *o, const tg__opt_hparams *h, int i)
{
    tg_tensor *p = o->params[i];
    const tg_tensor *g = p->grad;
    tg__opt_state *st = &o->state[i];
    if (o->kind == TG__OPT_SGD) {
        sgd_sparse(p, g, h);
    } else {
        int64_t *rows, n;
        double *vals;
        TG_TRY(tg__sparse_coalesced_rows(g, &rows, &vals, &n));   /* grad.coalesce() */
        const int64_t rn = tg__sparse_row_numel(g);
        if (o->kind == TG__OPT_ADAGRAD) adagrad_sparse(p, h, st, rows, vals, n, rn);
        else sparse_adam(p, h, st, rows, vals, n, rn);
        free(rows);
        free(vals);
        for (int j = 0; j < TG__OPT_MAX_BUFS; j++)
            if (st->buf[j]) tg__bump_version(st->buf[j]);
    }
    tg__bump_version(p);
    return TG_OK;
}
