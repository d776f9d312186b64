/* src/ops/cross_entropy.c - tg_cross_entropy_ex, torch.nn.functional.
 * cross_entropy with all its arguments (tg_cross_entropy is the (N, C)
 * case without them), as torch's composition: log_softmax over the class
 * dim, nll_loss, and for label smoothing e, with logp (N, C, d...) and
 * s[n, d...] = -sum_c w[c] logp[n, c, d...] (0 where target is
 * ignore_index),
 *   loss = (1 - e) nll + e / C * reduce(s),
 * MEAN dividing sum(s) by sum(w[target]) over the targets not ignored.  A
 * float target holds class probabilities p instead, as torch's (see
 * prob_target).  Every step is a differentiable op, so the loss is
 * differentiable to any order; nn's CrossEntropyLoss module calls it.
 * f32 or f64 logits (N, C) or (N, C, d1, ...) with class indices and no
 * label smoothing take the one op of src/ops/cross_entropy_rows.c
 * instead, with the same bits; with label smoothing, or with probability
 * targets of their dtype, the one op of src/ops/cross_entropy_soft.c
 * (tg__cross_entropy_composed keeps the composition, for its tests). */
#include "core/core.h"
#include "ops/loss.h"
#include "tapegrad/loss.h"
#include "tapegrad/ops.h"

/* The options of one call. */
typedef struct ce_opts {
    int64_t ignore_index;
    tg_reduction red;
    double label_smoothing;
    bool composed;   /* the composition even where a one op takes the call */
} ce_opts;

/* t times the class weights w (C), viewed as (1, C, 1, ...) along t's class
 * dim cdim; t itself (a new reference) when w is NULL. */
static int times_class_weight(tg_tensor **out, tg_tensor *t, tg_tensor *w, int cdim)
{
    if (!w) {
        *out = tg_tensor_retain(t);
        return TG_OK;
    }
    int64_t shape[TG_MAX_DIMS];
    for (int i = 0; i < t->ndim; i++) shape[i] = i == cdim ? w->shape[0] : 1;
    tg_tensor *wv = NULL;
    int rc = tg_reshape(&wv, w, t->ndim, shape);
    if (rc >= 0) rc = tg_mul(out, t, wv);
    tg_tensor_release(wv);
    return rc;
}

/* The label-smoothing term reduce(s) of the opening comment, logp (N, C,
 * d...) or (C) with the class dim cdim, target (N, d...) or 0-d. */
static int smooth_term(tg_tensor **out, tg_tensor *logp, tg_tensor *target, tg_tensor *w,
                       int cdim, const ce_opts *s)
{
    tg_tensor *prod = NULL, *neg = NULL, *ign = NULL, *sm = NULL, *tot = NULL;
    tg_tensor *den = NULL, *safe = NULL, *flat = NULL, *wt = NULL, *mflat = NULL, *wm = NULL;
    int rc = TG_OK;
    TG_TRY_GOTO(times_class_weight(&prod, logp, w, cdim));
    TG_TRY_GOTO(tg_sum_dims(&sm, prod, 1, &cdim, false));
    TG_TRY_GOTO(tg_neg(&neg, sm));   /* -sum_c w[c] logp[c] */
    tg_tensor_release(sm);
    sm = NULL;
    TG_TRY_GOTO(tg_eq_scalar(&ign, target, (double)s->ignore_index));
    TG_TRY_GOTO(tg_masked_fill(&sm, neg, ign, 0.0));   /* s */
    if (s->red == TG_REDUCTION_NONE) {
        *out = sm;
        sm = NULL;
        goto done;
    }
    TG_TRY_GOTO(tg_sum(&tot, sm));
    if (s->red == TG_REDUCTION_SUM) {
        *out = tot;
        tot = NULL;
        goto done;
    }
    const int64_t nt = tg_tensor_numel(target);
    if (w) {   /* sum(w[target]) over the targets not ignored */
        TG_TRY_GOTO(tg_masked_fill(&safe, target, ign, 0.0));
        TG_TRY_GOTO(tg_reshape(&flat, safe, 1, &nt));
        TG_TRY_GOTO(tg_index_select(&wt, w, 0, flat));
        TG_TRY_GOTO(tg_reshape(&mflat, ign, 1, &nt));
        TG_TRY_GOTO(tg_masked_fill(&wm, wt, mflat, 0.0));
        TG_TRY_GOTO(tg_sum(&den, wm));
    } else {   /* the count of targets not ignored */
        TG_TRY_GOTO(tg_ne_scalar(&safe, target, (double)s->ignore_index));
        TG_TRY_GOTO(tg_to_dtype(&wt, safe, tot->dtype));
        TG_TRY_GOTO(tg_sum(&den, wt));
    }
    rc = tg_div(out, tot, den);
done:
    tg_tensor_release(prod);
    tg_tensor_release(neg);
    tg_tensor_release(ign);
    tg_tensor_release(sm);
    tg_tensor_release(tot);
    tg_tensor_release(den);
    tg_tensor_release(safe);
    tg_tensor_release(flat);
    tg_tensor_release(wt);
    tg_tensor_release(mflat);
    tg_tensor_release(wm);
    return rc;
}

/* Probability targets p of logp's shape, as torch's:
 * -sum(logp * p' * w) over the class dim (NONE) or over everything (SUM;
 * MEAN divides that by numel / C), p' = p (1 - e) + e / C. */
static int prob_target(tg_tensor **y, const ce_opts *s, tg_tensor *w, tg_tensor *logp,
                       tg_tensor *p, int cdim)
{
    tg_tensor *ps = NULL, *pt = NULL, *prod = NULL, *pw = NULL, *sum = NULL;
    const double c = (double)logp->shape[cdim], e = s->label_smoothing;
    int rc = TG_OK;
    if (e > 0) {
        TG_TRY_GOTO(tg_mul_scalar(&ps, p, 1.0 - e));
        TG_TRY_GOTO(tg_add_scalar(&pt, ps, e / c));
    } else {
        pt = tg_tensor_retain(p);
    }
    TG_TRY_GOTO(tg_mul(&prod, logp, pt));
    TG_TRY_GOTO(times_class_weight(&pw, prod, w, cdim));
    if (s->red == TG_REDUCTION_NONE) {
        TG_TRY_GOTO(tg_sum_dims(&sum, pw, 1, &cdim, false));
        rc = tg_neg(y, sum);
        goto done;
    }
    TG_TRY_GOTO(tg_sum(&sum, pw));
    tg_tensor_release(ps);
    ps = NULL;
    TG_TRY_GOTO(tg_neg(s->red == TG_REDUCTION_SUM ? y : &ps, sum));
    if (s->red == TG_REDUCTION_MEAN)   /* torch divides by the integer numel / C */
        rc = tg_div_scalar(y, ps, (double)(tg_tensor_numel(logp) / logp->shape[cdim]));
done:
    tg_tensor_release(ps);
    tg_tensor_release(pt);
    tg_tensor_release(prod);
    tg_tensor_release(pw);
    tg_tensor_release(sum);
    return rc;
}

static int cross_entropy(tg_tensor **y, const ce_opts *s, tg_tensor *w, tg_tensor *x,
                         tg_tensor *target)
{
    TG_CHECK(y != NULL && x != NULL && target != NULL, TG_EINVAL,
             "cross_entropy_ex: out, input and target must not be NULL");
    TG_CHECK(s->label_smoothing >= 0.0 && s->label_smoothing <= 1.0, TG_EINVAL,
             "cross_entropy_ex: label_smoothing=%g must be in [0, 1]", s->label_smoothing);
    TG_CHECK(x->ndim >= 1, TG_ESHAPE,
             "cross_entropy_ex: input is 0-d; must be (C), (N, C) or (N, C, d1, ...)");
    const int cdim = x->ndim == 1 ? 0 : 1;
    const bool prob = tg_dtype_is_float(target->dtype);
    if (prob) {
        bool same = target->ndim == x->ndim;
        for (int i = 0; same && i < x->ndim; i++) same = target->shape[i] == x->shape[i];
        TG_CHECK(same, TG_ESHAPE, "cross_entropy_ex: a float target (class probabilities) "
                                  "must have input's shape");
        TG_CHECK(!w || w->shape[0] == x->shape[cdim], TG_ESHAPE,
                 "cross_entropy_ex: weight has %lld elements; input has %lld classes",
                 (long long)w->shape[0], (long long)x->shape[cdim]);
    }
    if (!s->composed) {   /* f32 or f64: one op of their own */
        const int fused = !prob && s->label_smoothing == 0.0
                              ? tg__cross_entropy_rows(y, x, target, w, s->red, s->ignore_index)
                              : tg__cross_entropy_soft(y, x, target, w, s->red, s->ignore_index,
                                                       s->label_smoothing);
        if (fused != TG__CE_ROWS_NOT_TAKEN) return fused;
    }
    tg_tensor *logp = NULL, *nll = NULL, *sm = NULL, *a = NULL, *b = NULL;
    int rc = TG_OK;
    TG_TRY_GOTO(tg_log_softmax(&logp, x, cdim));   /* FP32 policy, as the losses' */
    if (prob) {
        rc = prob_target(y, s, w, logp, target, cdim);
        goto done;
    }
    TG_TRY_GOTO(tg_nll_loss(&nll, logp, target, w, s->red, s->ignore_index));
    if (s->label_smoothing == 0.0) {
        *y = nll;
        nll = NULL;
        goto done;
    }
    TG_TRY_GOTO(smooth_term(&sm, logp, target, w, cdim, s));
    TG_TRY_GOTO(tg_mul_scalar(&a, nll, 1.0 - s->label_smoothing));
    TG_TRY_GOTO(tg_mul_scalar(&b, sm, s->label_smoothing / (double)x->shape[cdim]));
    rc = tg_add(y, a, b);
done:
    tg_tensor_release(logp);
    tg_tensor_release(nll);
    tg_tensor_release(sm);
    tg_tensor_release(a);
    tg_tensor_release(b);
    return rc;
}

int tg_cross_entropy_ex(tg_tensor **out, tg_tensor *input, tg_tensor *target,
                        tg_tensor *weight, int64_t ignore_index, tg_reduction red,
                        double label_smoothing)
{
    const ce_opts s = {.ignore_index = ignore_index, .red = red,
                       .label_smoothing = label_smoothing};
    tg__lib_enter();
    int rc = cross_entropy(out, &s, weight, input, target);
    tg__lib_leave();
    return tg__scope_capture(out, rc);
}

int tg__cross_entropy_composed(tg_tensor **out, tg_tensor *input, tg_tensor *target,
                               tg_tensor *weight, int64_t ignore_index, tg_reduction red,
                               double label_smoothing)
{
    const ce_opts s = {.ignore_index = ignore_index, .red = red,
                       .label_smoothing = label_smoothing, .composed = true};
    tg__lib_enter();
    int rc = cross_entropy(out, &s, weight, input, target);
    tg__lib_leave();
    return tg__scope_capture(out, rc);
}
