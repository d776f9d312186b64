/* src/ops/linalg_extra.c - torch.linalg's cond, tensorinv, tensorsolve,
 * vander and vecdot of tapegrad/linalg.h, each made of other public
 * functions (svdvals, matrix_norm, inv, solve, reshape, cumprod, mul, sum),
 * so their gradients, and the gradients' gradients, follow from those.
 *
 *   cond(A, 2) = s_max / s_min and cond(A, -2) = s_min / s_max from
 *   svdvals (any m x n A); for the other orders |A| |A^-1| in that matrix
 *   norm (square A), inf where A is singular, as torch's.
 *   tensorinv(A, ind): inv of A as a (prod(shape[:ind]), prod(shape[ind:]))
 *   matrix, reshaped to shape[ind:] + shape[:ind].
 *   tensorsolve(A, B, dims): solve of A (its dims `dims` moved last) as a
 *   (numel(B), prod(rest)) matrix against B flattened, shaped as rest.
 *   vander(x, N): the powers x^0 .. x^(N-1) along a new last dim, from
 *   cumprod as torch's (so the gradient at x = 0 is finite).
 *   vecdot(x, y, dim): sum(x y) over dim, x and y broadcast. */
#include <math.h>
#include <string.h>

#include "ops/linalg_la.h"
#include "tapegrad/linalg.h"
#include "tapegrad/ops.h"

/* cond(A, +-2): the ratio of the extreme singular values (..., k) of s. */
static int cond_two(tg_tensor *A, bool inverse, tg_tensor **out)
{
    tg_tensor *s = NULL, *hi = NULL, *lo = NULL, *r = NULL;
    int rc = TG_OK;
    TG_TRY_GOTO(tg_linalg_svdvals(&s, A));
    const int64_t k = tg_tensor_dim(s, -1);
    TG_TRY_GOTO(tg_narrow(&hi, s, -1, 0, 1));
    TG_TRY_GOTO(tg_narrow(&lo, s, -1, k - 1, 1));
    TG_TRY_GOTO(inverse ? tg_div(&r, lo, hi) : tg_div(&r, hi, lo));
    TG_TRY_GOTO(tg_squeeze(out, r, -1));
done:
    tg__la_release((tg_tensor *[]){s, hi, lo, r}, 4);
    return rc;
}

/* cond(A, ord) = |A| |A^-1|, inf where A^-1 is not finite (singular A). */
static int cond_norm(tg_tensor *A, const char *ord, tg_tensor **out)
{
    tg_tensor *inv = NULL, *na = NULL, *ni = NULL, *p = NULL, *fin = NULL, *f1 = NULL,
              *f2 = NULL, *inf = NULL;
    int rc = TG_OK;
    TG_TRY_GOTO(tg__linalg_inv_unchecked(&inv, A));
    TG_TRY_GOTO(tg_linalg_matrix_norm(&na, A, ord, NULL, false));
    TG_TRY_GOTO(tg_linalg_matrix_norm(&ni, inv, ord, NULL, false));
    TG_TRY_GOTO(tg_mul(&p, na, ni));
    TG_TRY_GOTO(tg_isfinite(&fin, inv));
    TG_TRY_GOTO(tg_all_dim(&f1, fin, -1, false));
    TG_TRY_GOTO(tg_all_dim(&f2, f1, -1, false));
    TG_TRY_GOTO(tg_tensor_full(&inf, tg_tensor_dtype(p), 0, NULL, INFINITY));
    TG_TRY_GOTO(tg_where(out, f2, p, inf));
done:
    tg__la_release((tg_tensor *[]){inv, na, ni, p, fin, f1, f2, inf}, 8);
    return rc;
}

int tg_linalg_cond(tg_tensor **out, tg_tensor *A, const char *p)
{
    static const char *const ords[] = {"fro", "nuc", "inf", "-inf", "1", "-1"};
    TG_CHECK(out != NULL, TG_EINVAL, "linalg.cond: out is NULL");
    const bool two = !p || !strcmp(p, "2"), mtwo = p && !strcmp(p, "-2");
    bool known = two || mtwo;
    for (size_t i = 0; !known && i < sizeof ords / sizeof *ords; i++) known = !strcmp(p, ords[i]);
    TG_CHECK(known, TG_EINVAL, "linalg.cond got an invalid norm type: %s", p);
    char fn[40];
    snprintf(fn, sizeof fn, "linalg.cond(ord=%s)", p ? p : "None");
    TG_TRY(tg__la_check(fn, "A", A, !(two || mtwo)));
    tg_tensor *r = NULL;
    int rc;
    tg__lib_enter();
    if (tg_tensor_numel(A) == 0)   /* torch: zeros for empty matrices */
        rc = tg_tensor_zeros(&r, A->dtype, A->ndim - 2, A->shape);
    else if (two || mtwo)
        rc = cond_two(A, mtwo, &r);
    else
        rc = cond_norm(A, p, &r);
    tg__lib_leave();
    if (rc < 0) return rc;
    *out = r;
    return tg__scope_capture(out, rc);
}

/* The product of extents shape[lo..hi). */
static int64_t prod(const int64_t *shape, int lo, int hi)
{
    int64_t p = 1;
    for (int i = lo; i < hi; i++) p *= shape[i];
    return p;
}

int tg_linalg_tensorinv(tg_tensor **out, tg_tensor *A, int ind)
{
    static const char fn[] = "linalg.tensorinv";
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out is NULL", fn);
    TG_CHECK(A != NULL, TG_EINVAL, "%s: A is NULL", fn);
    TG_CHECK(ind > 0, TG_EINVAL, "%s: Expected a strictly positive integer for 'ind', but got "
             "%d", fn, ind);
    TG_CHECK(ind <= A->ndim, TG_ESHAPE, "%s: ind=%d is more than A's %d dims", fn, ind, A->ndim);
    const int64_t front = prod(A->shape, 0, ind), back = prod(A->shape, ind, A->ndim);
    TG_CHECK(front == back, TG_ESHAPE, "%s: Expected self to satisfy the requirement "
             "prod(self.shape[ind:]) == prod(self.shape[:ind]), but got %lld != %lld", fn,
             (long long)back, (long long)front);
    int64_t shape[TG_MAX_DIMS];
    memcpy(shape, A->shape + ind, (size_t)(A->ndim - ind) * sizeof *shape);
    memcpy(shape + (A->ndim - ind), A->shape, (size_t)ind * sizeof *shape);
    tg_tensor *a = NULL, *y = NULL, *r = NULL;
    int rc = TG_OK;
    tg__lib_enter();
    TG_TRY_GOTO(tg_reshape(&a, A, 2, (int64_t[]){front, back}));
    TG_TRY_GOTO(tg_linalg_inv(&y, a));
    TG_TRY_GOTO(tg_reshape(&r, y, A->ndim, shape));
done:
    tg__la_release((tg_tensor *[]){a, y}, 2);
    tg__lib_leave();
    if (rc < 0) return rc;
    *out = r;
    return tg__scope_capture(out, rc);
}

int tg_linalg_tensorsolve(tg_tensor **out, tg_tensor *A, tg_tensor *B, int ndims,
                          const int *dims)
{
    static const char fn[] = "linalg.tensorsolve";
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out is NULL", fn);
    TG_CHECK(A != NULL, TG_EINVAL, "%s: A is NULL", fn);
    TG_CHECK(B != NULL, TG_EINVAL, "%s: B is NULL", fn);
    TG_CHECK(ndims >= 0 && ndims <= A->ndim && (ndims == 0 || dims), TG_EINVAL,
             "%s: dims: %d dims given for A's %d", fn, ndims, A->ndim);
    TG_CHECK(B->ndim <= A->ndim, TG_ESHAPE, "%s: B has %d dims, more than A's %d", fn, B->ndim,
             A->ndim);
    tg_tensor *am = NULL, *a = NULL, *b = NULL, *x = NULL, *r = NULL;
    int rc = TG_OK;
    tg__lib_enter();
    if (ndims > 0) {   /* A's dims `dims` to the end, in their order */
        int dest[TG_MAX_DIMS];
        for (int i = 0; i < ndims; i++) dest[i] = A->ndim - ndims + i;
        TG_TRY_GOTO(tg_movedim(&am, A, ndims, dims, dest));
    }
    const tg_tensor *as = am ? am : A;
    const int64_t *shape = tg_tensor_shape(as);
    const int64_t rp = prod(shape, B->ndim, A->ndim), op = prod(shape, 0, B->ndim);
    if (rp != op) {
        rc = tg__error(TG_ESHAPE, "%s: Expected self to satisfy the requirement "
                       "prod(self.shape[other.ndim:]) == prod(self.shape[:other.ndim]), but got "
                       "%lld != %lld", fn, (long long)rp, (long long)op);
        goto done;
    }
    TG_TRY_GOTO(tg_reshape(&a, am ? am : A, 2, (int64_t[]){rp, rp}));
    TG_TRY_GOTO(tg_reshape(&b, B, 1, (int64_t[]){rp}));
    TG_TRY_GOTO(tg_linalg_solve(&x, a, b));
    TG_TRY_GOTO(tg_reshape(&r, x, A->ndim - B->ndim, shape + B->ndim));
done:
    tg__la_release((tg_tensor *[]){am, a, b, x}, 4);
    tg__lib_leave();
    if (rc < 0) return rc;
    *out = r;
    return tg__scope_capture(out, rc);
}

int tg_linalg_vander(tg_tensor **out, tg_tensor *x, int64_t N)
{
    static const char fn[] = "linalg.vander";
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out is NULL", fn);
    TG_CHECK(x != NULL, TG_EINVAL, "%s: x is NULL", fn);
    TG_CHECK(x->ndim >= 1 && x->ndim < TG_MAX_DIMS, TG_ESHAPE,
             "%s: x must have at least one dimension (and fewer than %d), got %d", fn,
             TG_MAX_DIMS, x->ndim);
    const int64_t n = N < 0 ? x->shape[x->ndim - 1] : N;
    TG_CHECK(n > 1, TG_EINVAL, "%s: N must be greater than 1 (N=%lld).", fn, (long long)n);
    int64_t shape[TG_MAX_DIMS];
    memcpy(shape, x->shape, (size_t)x->ndim * sizeof *shape);
    shape[x->ndim] = n - 1;
    tg_tensor *u = NULL, *e = NULL, *c = NULL, *ones = NULL, *r = NULL;
    int rc = TG_OK;
    tg__lib_enter();
    TG_TRY_GOTO(tg_unsqueeze(&u, x, -1));
    TG_TRY_GOTO(tg_expand(&e, u, x->ndim + 1, shape));
    TG_TRY_GOTO(tg_cumprod(&c, e, -1));                  /* x, x^2, .., x^(n-1) */
    shape[x->ndim] = 1;
    TG_TRY_GOTO(tg_tensor_full(&ones, tg_tensor_dtype(c), x->ndim + 1, shape, 1));
    TG_TRY_GOTO(tg_cat(&r, 2, (tg_tensor *[]){ones, c}, -1));
done:
    tg__la_release((tg_tensor *[]){u, e, c, ones}, 4);
    tg__lib_leave();
    if (rc < 0) return rc;
    *out = r;
    return tg__scope_capture(out, rc);
}

int tg_linalg_vecdot(tg_tensor **out, tg_tensor *x, tg_tensor *y, int dim)
{
    static const char fn[] = "linalg.vecdot";
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out is NULL", fn);
    TG_CHECK(x != NULL && y != NULL, TG_EINVAL, "%s: %s is NULL", fn, x ? "y" : "x");
    TG_CHECK(x->dtype == y->dtype, TG_EDTYPE, "%s: Expected x and y to have the same dtype, but "
             "found x of type %s and y of type %s instead", fn, tg_dtype_name(x->dtype),
             tg_dtype_name(y->dtype));
    tg_tensor *p = NULL, *r = NULL;
    tg__lib_enter();
    int rc = tg_mul(&p, x, y);
    if (rc >= 0) rc = tg_sum_dims(&r, p, 1, &dim, false);
    tg_tensor_release(p);
    tg__lib_leave();
    if (rc < 0) return rc;
    *out = r;
    return tg__scope_capture(out, rc);
}
