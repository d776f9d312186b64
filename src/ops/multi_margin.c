/* src/ops/multi_margin.c - the multi-class and multi-label margin losses of
 * PyTorch 1.13, composed of differentiable public ops (derivatives of any
 * order follow), for input (N, C), (C) or a 0-d input (C = 1):
 *
 *   multi_margin_loss        sum over i != y of w[y] max(0, margin - x[y]
 *                            + x[i])^p, / C
 *   multilabel_margin_loss   sum over the listed targets j and the classes
 *                            i not listed of max(0, 1 - x[j] + x[i]), / C
 *   multilabel_soft_margin   -sum over classes of w (t logsigmoid(x) +
 *                            (1 - t) logsigmoid(-x)), / C
 *
 * max(0, .) is tg_relu, whose gradient is 0 where its argument is 0, as
 * torch's kernels (they add a term only where z > 0).  The multi-label
 * loss's pairs are an (N, C, C) grid: x[j] gathered along dim 1, against
 * every x[i], with a mask of the pairs that count (built from target, which
 * gets no gradient). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "ops/loss.h"
#include "tapegrad/loss.h"
#include "tapegrad/ops.h"
#include "tapegrad/scope.h"

/* tg__loss_check_common, then an input of (N, C), (C) or 0-d and i64
 * class indices. */
static int check_classes(const char *op, tg_tensor **out, const tg_tensor *x, const tg_tensor *t,
                         tg_reduction red)
{
    TG_TRY(tg__loss_check_common(op, out, x, t, red));
    TG_CHECK(x->ndim <= 2 && (x->ndim == 0 || x->shape[x->ndim - 1] > 0), TG_ESHAPE,
             "%s: input must be (N, C), (C) or 0-d with C > 0, got %d dims", op, x->ndim);
    TG_CHECK(t->dtype == TG_I64, TG_EDTYPE, "%s: target has dtype %s; must be i64 class indices",
             op, tg_dtype_name(t->dtype));
    return TG_OK;
}

/* target's elements as int64 (a new buffer, n of them). */
static int64_t *target_values(const tg_tensor *t, int64_t n)
{
    int64_t *v = tg__malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    if (v) tg__gather(t, TG_I64, v);
    return v;
}

/* *out = reduce(l) with l of (N) frames; NONE reshapes l to (nd, shape). */
static int reduce_frames(tg_tensor **out, tg_tensor *l, tg_reduction red, int nd,
                         const int64_t *shape)
{
    if (red != TG_REDUCTION_NONE) return tg__loss_reduce(out, l, red);
    return tg_reshape(out, l, nd, shape);
}

static int multi_margin_check(tg_tensor **out, const tg_tensor *x, const tg_tensor *t, int p,
                              const tg_tensor *w, tg_reduction red, int64_t *n, int64_t *c)
{
    const char *op = "multi_margin_loss";
    TG_TRY(check_classes(op, out, x, t, red));
    TG_CHECK(p == 1 || p == 2, TG_EINVAL, "%s: p=%d must be 1 or 2", op, p);
    *n = x->ndim == 2 ? x->shape[0] : 1;
    *c = x->ndim == 0 ? 1 : x->shape[x->ndim - 1];
    TG_CHECK(t->ndim <= 1 && tg_tensor_numel(t) == *n, TG_ESHAPE,
             "%s: target must hold one class index per sample, %lld, got %lld", op,
             (long long)*n, (long long)tg_tensor_numel(t));
    if (w) {
        TG_CHECK(tg_dtype_is_float(w->dtype), TG_EDTYPE,
                 "%s: weight has dtype %s; float dtypes only", op, tg_dtype_name(w->dtype));
        TG_CHECK(w->ndim == 1 && w->shape[0] == *c, TG_ESHAPE,
                 "%s: weight must be 1-d of C = %lld elements", op, (long long)*c);
    }
    int64_t *v = target_values(t, *n);
    if (!v) return TG_ENOMEM;
    int rc = TG_OK;
    for (int64_t i = 0; i < *n && rc == TG_OK; i++)
        if (v[i] < 0 || v[i] >= *c)
            rc = tg__error(TG_EINVAL, "%s: target[%lld]=%lld is out of range [0, %lld)", op,
                           (long long)i, (long long)v[i], (long long)*c);
    free(v);
    return rc;
}

static int multi_margin_loss(tg_tensor **out, tg_tensor *x, tg_tensor *t, int p, double margin,
                             tg_tensor *w, tg_reduction red)
{
    int64_t n = 0, c = 0;
    TG_TRY(multi_margin_check(out, x, t, p, w, red, &n, &c));
    TG_CHECK(!isnan(margin), TG_EINVAL, "multi_margin_loss: margin must not be NaN");
    tg_tensor *v[14] = {0};
    int rc;
    const int64_t nc[2] = {n, c}, n1[2] = {n, 1};
    const int one = 1;
    TG_TRY_GOTO(tg_reshape(&v[0], x, 2, nc));                    /* (N, C) */
    TG_TRY_GOTO(tg_reshape(&v[1], t, 2, n1));                    /* (N, 1) */
    TG_TRY_GOTO(tg_gather(&v[2], v[0], 1, v[1]));                /* x[y], (N, 1) */
    TG_TRY_GOTO(tg_rsub_scalar(&v[3], v[2], margin));
    TG_TRY_GOTO(tg_add(&v[4], v[3], v[0]));                      /* z, (N, C) */
    TG_TRY_GOTO(tg_relu(&v[5], v[4]));
    if (p == 2) TG_TRY_GOTO(tg_mul(&v[6], v[5], v[5]));
    else v[6] = tg_tensor_retain(v[5]);
    TG_TRY_GOTO(tg_reshape(&v[7], t, 1, &n));                    /* y, (N) */
    if (w) {
        TG_TRY_GOTO(tg_index_select(&v[8], w, 0, v[7]));         /* w[y], (N) */
        TG_TRY_GOTO(tg_reshape(&v[9], v[8], 2, n1));
        TG_TRY_GOTO(tg_mul(&v[10], v[6], v[9]));
    } else {
        v[10] = tg_tensor_retain(v[6]);
    }
    TG_TRY_GOTO(tg_one_hot(&v[11], v[7], c, TG_U8));             /* i == y, (N, C) */
    TG_TRY_GOTO(tg_masked_fill(&v[12], v[10], v[11], 0.0));
    TG_TRY_GOTO(tg_sum_dims(&v[13], v[12], 1, &one, false));
    tg_tensor_release(v[0]);
    TG_TRY_GOTO(tg_div_scalar(&v[0], v[13], (double)c));
    /* NONE: (N) for an (N, C) input, else target's shape, () or (1), as torch */
    rc = x->ndim == 2 ? reduce_frames(out, v[0], red, 1, &n)
                      : reduce_frames(out, v[0], red, t->ndim, t->shape);
done:
    tg__loss_release_all(v, 14);
    return rc;
}

/* The pairs of the multi-label loss from target (N, C): idx[n, j] the
 * target class of slot j (0 past the list), and drop[n, j, i] 0 where slot
 * j is listed (before the first -1) and class i is not, 1 elsewhere. */
static int multilabel_pairs(const char *op, const tg_tensor *t, int64_t n, int64_t c,
                            tg_tensor **idx, tg_tensor **drop)
{
    int64_t *v = target_values(t, n * c);
    unsigned char *k = tg__malloc((size_t)(n * c * c > 0 ? n * c * c : 1));
    unsigned char *is_t = tg__calloc((size_t)(c > 0 ? c : 1), 1);
    int rc = v && k && is_t ? TG_OK : TG_ENOMEM;
    for (int64_t i = 0; i < n * c && rc == TG_OK; i++)
        if (v[i] < -1 || v[i] >= c)
            rc = tg__error(TG_EINVAL, "%s: target element %lld = %lld must be in [0, %lld) or "
                           "-1 (the end of the list)", op, (long long)i, (long long)v[i],
                           (long long)c);
    for (int64_t r = 0; r < n && rc == TG_OK; r++) {
        int64_t *row = v + r * c, len = 0;
        memset(is_t, 0, (size_t)c);
        while (len < c && row[len] >= 0) is_t[row[len++]] = 1;
        for (int64_t j = 0; j < c; j++) {
            if (j >= len) row[j] = 0;
            for (int64_t i = 0; i < c; i++) k[(r * c + j) * c + i] = j >= len || is_t[i];
        }
    }
    const int64_t nc[2] = {n, c}, ncc[3] = {n, c, c};
    if (rc == TG_OK) rc = tg_tensor_from_data(idx, TG_I64, 2, nc, v);
    if (rc == TG_OK) rc = tg_tensor_from_data(drop, TG_U8, 3, ncc, k);
    free(v);
    free(k);
    free(is_t);
    return rc;
}

static int multilabel_margin_loss(tg_tensor **out, tg_tensor *x, tg_tensor *t, tg_reduction red)
{
    const char *op = "multilabel_margin_loss";
    TG_TRY(check_classes(op, out, x, t, red));
    TG_CHECK(tg_tensor_same_shape(x, t), TG_ESHAPE,
             "%s: target must have input's shape (one list of classes per sample)", op);
    const int64_t n = x->ndim == 2 ? x->shape[0] : 1, c = x->ndim == 0 ? 1 : x->shape[x->ndim - 1];
    const int64_t nc[2] = {n, c}, n1c[3] = {n, 1, c}, nc1[3] = {n, c, 1};
    const int dims[2] = {1, 2};
    tg_tensor *v[12] = {0};
    int rc;
    TG_TRY_GOTO(multilabel_pairs(op, t, n, c, &v[0], &v[1]));
    TG_TRY_GOTO(tg_reshape(&v[2], x, 2, nc));
    TG_TRY_GOTO(tg_gather(&v[3], v[2], 1, v[0]));                /* x[target[j]], (N, C) */
    TG_TRY_GOTO(tg_rsub_scalar(&v[4], v[3], 1.0));
    TG_TRY_GOTO(tg_reshape(&v[5], v[4], 3, nc1));
    TG_TRY_GOTO(tg_reshape(&v[6], v[2], 3, n1c));
    TG_TRY_GOTO(tg_add(&v[7], v[5], v[6]));                      /* z[n, j, i], (N, C, C) */
    TG_TRY_GOTO(tg_relu(&v[8], v[7]));
    TG_TRY_GOTO(tg_masked_fill(&v[10], v[8], v[1], 0.0));
    TG_TRY_GOTO(tg_sum_dims(&v[11], v[10], 2, dims, false));
    tg_tensor_release(v[0]);
    TG_TRY_GOTO(tg_div_scalar(&v[0], v[11], (double)c));
    rc = reduce_frames(out, v[0], red, x->ndim == 2 ? 1 : 0, &n);
done:
    tg__loss_release_all(v, 12);
    return rc;
}

static int multilabel_soft_margin_loss(tg_tensor **out, tg_tensor *x, tg_tensor *t,
                                       tg_tensor *w, tg_reduction red)
{
    const char *op = "multilabel_soft_margin_loss";
    TG_TRY(tg__loss_check_pair_broadcast(op, out, x, t, red));
    TG_CHECK(x->ndim >= 1, TG_ESHAPE, "%s: input must have a class dim, got a 0-d input", op);
    TG_CHECK(w == NULL || tg_dtype_is_float(w->dtype), TG_EDTYPE,
             "%s: weight has dtype %s; float dtypes only", op, w ? tg_dtype_name(w->dtype) : "");
    const int cd = x->ndim - 1;
    const double c = (double)x->shape[cd];
    tg_tensor *v[11] = {0};
    int rc;
    TG_TRY_GOTO(tg_logsigmoid(&v[0], x));
    TG_TRY_GOTO(tg_mul(&v[1], t, v[0]));
    TG_TRY_GOTO(tg_rsub_scalar(&v[2], t, 1.0));
    TG_TRY_GOTO(tg_neg(&v[3], x));
    TG_TRY_GOTO(tg_logsigmoid(&v[4], v[3]));
    TG_TRY_GOTO(tg_mul(&v[5], v[2], v[4]));
    TG_TRY_GOTO(tg_add(&v[6], v[1], v[5]));
    TG_TRY_GOTO(tg_neg(&v[7], v[6]));
    if (w) TG_TRY_GOTO(tg_mul(&v[8], v[7], w));
    else v[8] = tg_tensor_retain(v[7]);
    /* the class dim of input: of the loss too, which may have more dims */
    const int ld = tg_tensor_ndim(v[8]) - 1;
    TG_TRY_GOTO(tg_sum_dims(&v[9], v[8], 1, &ld, false));
    TG_TRY_GOTO(tg_div_scalar(&v[10], v[9], c));
    rc = tg__loss_reduce(out, v[10], red);
done:
    tg__loss_release_all(v, 11);
    return rc;
}

int tg_multi_margin_loss(tg_tensor **out, tg_tensor *input, tg_tensor *target, int p,
                         double margin, tg_tensor *weight, tg_reduction red)
{
    TG_TRY(tg__loss_check_constant("multi_margin_loss", "weight", weight));
    tg__lib_enter();
    tg_tensor *c[2];
    int rc = tg__loss_amp_f32(c, (tg_tensor *[]){input, weight}, 2);
    if (rc == TG_OK) rc = multi_margin_loss(out, c[0], target, p, margin, c[1], red);
    tg__lib_leave();
    for (int i = 0; i < 2; i++) tg_tensor_release(c[i]);
    return tg__scope_capture(out, rc);
}

int tg_multilabel_margin_loss(tg_tensor **out, tg_tensor *input, tg_tensor *target,
                              tg_reduction red)
{
    tg__lib_enter();
    tg_tensor *c[1];
    int rc = tg__loss_amp_f32(c, (tg_tensor *[]){input}, 1);
    if (rc == TG_OK) rc = multilabel_margin_loss(out, c[0], target, red);
    tg__lib_leave();
    for (int i = 0; i < 1; i++) tg_tensor_release(c[i]);
    return tg__scope_capture(out, rc);
}

int tg_multilabel_soft_margin_loss(tg_tensor **out, tg_tensor *input, tg_tensor *target,
                                   tg_tensor *weight, tg_reduction red)
{
    tg__lib_enter();
    tg_tensor *c[3];
    int rc = tg__loss_amp_f32(c, (tg_tensor *[]){input, target, weight}, 3);
    if (rc == TG_OK) rc = multilabel_soft_margin_loss(out, c[0], c[1], c[2], red);
    tg__lib_leave();
    for (int i = 0; i < 3; i++) tg_tensor_release(c[i]);
    return tg__scope_capture(out, rc);
}
