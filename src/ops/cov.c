/* src/ops/cov.c - torch.cov and torch.corrcoef of tapegrad/ops.h, made of
 * differentiable ops (sum, mul, mm, div, sqrt, clamp), so gradients of any
 * order follow, with respect to the input and the aweights.
 *
 * x (V, N): V variables, N observations (1-d or 0-d: one variable).  With
 * w = fweights * aweights (either alone, or none), w_sum = sum(w) (N
 * without weights), the weighted mean m = sum(x w, 1) / w_sum and D = x -
 * m:
 *   cov = D (D w)^T / f,  f = w_sum - c sum(w aweights) / w_sum (with
 *   aweights and c != 0), else w_sum - c; f <= 0 counts as 0 (inf or NaN,
 *   as torch, which also warns).
 * The result's dims of extent 1 are dropped (torch's squeeze): one
 * variable gives a 0-d tensor.  corrcoef = cov / (s s^T), s = sqrt(diag(cov))
 * clamped to [-1, 1], cov / cov for a single variable, as torch's. */
#include <math.h>

#include "core/core.h"
#include "ops/linalg_la.h"
#include "tapegrad/ops.h"

/* Checks weights `what` (fweights: integral; aweights: float) against N
 * observations; non-negative, as torch's (reads their values). */
static int check_weights(const char *what, const tg_tensor *w, int64_t N, bool integral)
{
    TG_CHECK(w->ndim <= 1, TG_ESHAPE, "cov(): expected %s to have one or fewer dimensions but "
             "got %s with %d dimensions", what, what, w->ndim);
    if (integral)
        TG_CHECK(!tg_dtype_is_float(w->dtype), TG_EDTYPE,
                 "cov(): expected %s to have integral dtype but got %s with %s dtype", what,
                 what, tg_dtype_name(w->dtype));
    else
        TG_CHECK(tg_dtype_is_float(w->dtype), TG_EDTYPE, "cov(): expected %s to have floating "
                 "point dtype but got %s with %s dtype", what, what, tg_dtype_name(w->dtype));
    const int64_t n = tg_tensor_numel(w);
    TG_CHECK(n == N, TG_ESHAPE, "cov(): expected %s to have the same numel as there are "
             "observations in the input but got %lld != %lld", what, (long long)n,
             (long long)N);
    for (int64_t i = 0; i < n; i++) {
        double v = 0;
        TG_TRY(tg_tensor_get_flat(w, i, &v));
        TG_CHECK(v >= 0, TG_EINVAL, "cov(): %s cannot be negative", what);
    }
    return TG_OK;
}

/* The weights w (NULL: none) and aw in dt, both (N). */
static int weights(tg_tensor *fw, tg_tensor *aw, tg_dtype dt, tg_tensor **w, tg_tensor **awd)
{
    tg_tensor *f = NULL;
    int rc = TG_OK;
    if (fw) TG_TRY_GOTO(tg_to_dtype(&f, fw, dt));
    if (aw) TG_TRY_GOTO(tg_to_dtype(awd, aw, dt));
    if (f && aw) TG_TRY_GOTO(tg_mul(w, f, *awd));
    else if (f || aw) *w = tg_tensor_retain(f ? f : *awd);
done:
    tg_tensor_release(f);
    return rc;
}

static int cov_impl(tg_tensor **out, tg_tensor *x, int64_t correction, tg_tensor *fw,
                    tg_tensor *aw)
{
    const tg_dtype dt = tg_dtype_is_float(x->dtype) ? x->dtype : TG_F32;
    tg_tensor *xf = NULL, *in = NULL, *w = NULL, *awd = NULL, *ws = NULL, *xw = NULL, *s = NULL,
              *avg = NULL, *au = NULL, *d = NULL, *dw = NULL, *dt_ = NULL, *c = NULL,
              *nf = NULL, *t = NULL, *r = NULL;
    int rc = TG_OK;
    if (dt != x->dtype) TG_TRY_GOTO(tg_to_dtype(&xf, x, dt));   /* integers, as torch's mean */
    TG_TRY_GOTO(tg_reshape(&in, xf ? xf : x, 2,
                           x->ndim < 2 ? (int64_t[]){1, -1} : x->shape));
    const int64_t V = tg_tensor_dim(in, 0), N = tg_tensor_dim(in, 1);
    if (fw) TG_TRY_GOTO(check_weights("fweights", fw, N, true));
    if (aw) TG_TRY_GOTO(check_weights("aweights", aw, N, false));
    TG_TRY_GOTO(weights(fw, aw, dt, &w, &awd));
    if (w) {
        TG_TRY_GOTO(tg_sum(&ws, w));
        if (tg_tensor_item(ws) == 0) {
            rc = tg__error(TG_EINVAL, "cov(): weights sum to zero, can't be normalized");
            goto done;
        }
        TG_TRY_GOTO(tg_mul(&xw, in, w));
    } else {
        TG_TRY_GOTO(tg_tensor_scalar(&ws, dt, (double)N));
    }
    TG_TRY_GOTO(tg_sum_dims(&s, xw ? xw : in, 1, (int[]){1}, false));
    TG_TRY_GOTO(tg_div(&avg, s, ws));                    /* the weighted mean (V) */
    TG_TRY_GOTO(tg_unsqueeze(&au, avg, 1));
    TG_TRY_GOTO(tg_sub(&d, in, au));
    if (w) TG_TRY_GOTO(tg_mul(&dw, d, w));
    TG_TRY_GOTO(tg_transpose(&dt_, dw ? dw : d, 0, 1));
    TG_TRY_GOTO(tg_mm(&c, d, dt_));                      /* D (D w)^T (V, V) */
    if (w && aw && correction != 0) {   /* f = w_sum - c sum(w aw) / w_sum */
        tg_tensor *p = NULL, *q = NULL, *e = NULL, *f = NULL;
        rc = tg_mul(&p, w, awd);
        if (rc >= 0) rc = tg_sum(&q, p);
        if (rc >= 0) rc = tg_div(&e, q, ws);
        if (rc >= 0) rc = tg_mul_scalar(&f, e, (double)correction);
        if (rc >= 0) rc = tg_sub(&nf, ws, f);
        tg_tensor_release(p);
        tg_tensor_release(q);
        tg_tensor_release(e);
        tg_tensor_release(f);
        if (rc < 0) goto done;
    } else {
        TG_TRY_GOTO(tg_sub_scalar(&nf, ws, (double)correction));
    }
    if (tg_tensor_item(nf) <= 0) {   /* torch: "degrees of freedom is <= 0", f = 0 */
        tg_tensor_release(nf);
        nf = NULL;
        TG_TRY_GOTO(tg_tensor_scalar(&nf, dt, 0));
    }
    TG_TRY_GOTO(tg_div(&t, c, nf));
    TG_TRY_GOTO(V == 1 ? tg_reshape(&r, t, 0, NULL) : tg_reshape(&r, t, 2, (int64_t[]){V, V}));
done:
    tg__la_release((tg_tensor *[]){xf, in, w, awd, ws, xw, s, avg, au, d, dw, dt_, c, nf, t}, 15);
    if (rc < 0) {
        tg_tensor_release(r);
        return rc;
    }
    *out = r;
    return TG_OK;
}

int tg_cov(tg_tensor **out, tg_tensor *x, int64_t correction, tg_tensor *fweights,
           tg_tensor *aweights)
{
    TG_CHECK(out != NULL, TG_EINVAL, "cov(): out is NULL");
    TG_CHECK(x != NULL, TG_EINVAL, "cov(): input is NULL");
    TG_CHECK(x->ndim <= 2, TG_ESHAPE, "cov(): expected input to have two or fewer dimensions "
             "but got an input with %d dimensions", x->ndim);
    tg__lib_enter();
    tg_tensor *r = NULL;
    const int rc = cov_impl(&r, x, correction, fweights, aweights);
    tg__lib_leave();
    if (rc < 0) return rc;
    *out = r;
    return tg__scope_capture(out, rc);
}

/* cov / (s s^T), s = sqrt(diag(cov)), clamped to [-1, 1]. */
static int corrcoef_impl(tg_tensor **out, tg_tensor *x)
{
    tg_tensor *c = NULL, *dg = NULL, *sd = NULL, *a = NULL, *b = NULL, *q = NULL, *p = NULL;
    int rc = TG_OK;
    TG_TRY_GOTO(cov_impl(&c, x, 1, NULL, NULL));
    if (tg_tensor_ndim(c) == 0) {
        TG_TRY_GOTO(tg_div(out, c, c));
        goto done;
    }
    TG_TRY_GOTO(tg_diagonal(&dg, c, 0, 0, 1));
    TG_TRY_GOTO(tg_sqrt(&sd, dg));
    TG_TRY_GOTO(tg_unsqueeze(&a, sd, 1));
    TG_TRY_GOTO(tg_unsqueeze(&b, sd, 0));
    TG_TRY_GOTO(tg_div(&q, c, a));
    TG_TRY_GOTO(tg_div(&p, q, b));
    TG_TRY_GOTO(tg_clamp(out, p, -1, 1));
done:
    tg__la_release((tg_tensor *[]){c, dg, sd, a, b, q, p}, 7);
    return rc;
}

int tg_corrcoef(tg_tensor **out, tg_tensor *x)
{
    TG_CHECK(out != NULL, TG_EINVAL, "corrcoef(): out is NULL");
    TG_CHECK(x != NULL, TG_EINVAL, "corrcoef(): input is NULL");
    TG_CHECK(x->ndim <= 2, TG_ESHAPE, "corrcoef(): expected input to have two or fewer "
             "dimensions but got an input with %d dimensions", x->ndim);
    tg__lib_enter();
    tg_tensor *r = NULL;
    const int rc = corrcoef_impl(&r, x);
    tg__lib_leave();
    if (rc < 0) return rc;
    *out = r;
    return tg__scope_capture(out, rc);
}
