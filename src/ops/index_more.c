/* src/ops/index_more.c - torch.take_along_dim, torch.index_fill and
 * torch.index_copy, out of place, made of recorded ops:
 *
 *   take_along_dim(x, idx, dim) = gather(expand(x, B_x), dim, expand(idx, B_i))
 *     with B the broadcast of x's and idx's shapes outside dim (B_x keeps
 *     x's extent at dim, B_i idx's); without dim, gather of both flattened.
 *   index_fill(x, dim, index, v) = scatter_value(x, dim, E, v)
 *   index_copy(x, dim, index, src) = scatter(x, dim, E, src)
 *     with E the index (negative values counted from the end for
 *     index_fill, as torch's) along dim, expanded to src's shape: x's
 *     with the index's length at dim.
 *
 * So the gradients are those of gather, expand and scatter, which are
 * torch's formulas (take_along_dim: scatter_add of g into zeros, summed
 * over the broadcast dims; index_fill: dx = index_fill(g, 0); index_copy:
 * dx = index_fill(g, 0), dsrc = index_select(g)), and differentiable to
 * any order.  Any dtype of x, as gather and scatter take: an integer
 * result is not recorded. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "ops/scatter_internal.h"
#include "tapegrad/ops.h"

/* ---- take_along_dim ---- */

static int take_along(tg_tensor **out, tg_tensor *x, tg_tensor *idx, int dim)
{
    const char *op = "take_along_dim";
    TG_CHECK(x != NULL, TG_EINVAL, "%s: x must not be NULL", op);
    TG_CHECK(idx != NULL, TG_EINVAL, "%s: indices must not be NULL", op);
    TG_CHECK(idx->dtype == TG_I64, TG_EDTYPE, "%s: indices has dtype %s; it must be i64", op,
             tg_dtype_name(idx->dtype));
    TG_CHECK(idx->ndim == x->ndim, TG_ESHAPE,
             "%s: x has %d dims and indices %d; they must have the same number", op, x->ndim,
             idx->ndim);
    const int span = x->ndim > 0 ? x->ndim : 1;
    TG_CHECK(dim >= -span && dim < span, TG_EINVAL,
             "%s: dim=%d is out of range for x with %d dims (expected [%d, %d])", op, dim,
             x->ndim, -span, span - 1);
    const int d0 = dim < 0 ? dim + span : dim;
    int64_t xs[TG_MAX_DIMS], is[TG_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) {
        const int64_t a = x->shape[d], b = idx->shape[d];
        TG_CHECK(d == d0 || a == b || a == 1 || b == 1, TG_ESHAPE,
                 "%s: x.size(%d)=%lld and indices.size(%d)=%lld do not broadcast", op, d,
                 (long long)a, d, (long long)b);
        const int64_t m = a == 1 ? b : a;
        xs[d] = d == d0 ? a : m;
        is[d] = d == d0 ? b : m;
    }
    tg_tensor *xe = NULL, *ie = NULL;
    int rc = tg_expand(&xe, x, x->ndim, xs);
    if (rc >= 0) rc = tg_expand(&ie, idx, idx->ndim, is);
    if (rc >= 0) rc = tg_gather(out, xe, d0, ie);
    if (rc < 0 && strncmp(tg_error_message(), "gather:", 7) == 0) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", tg_error_message() + 7);
        rc = tg__error(rc, "%s:%s", op, msg);
    }
    tg_tensor_release(xe);
    tg_tensor_release(ie);
    return rc;
}

static int take_along_flat(tg_tensor **out, tg_tensor *x, tg_tensor *idx)
{
    TG_CHECK(x != NULL, TG_EINVAL, "take_along_dim: x must not be NULL");
    TG_CHECK(idx != NULL, TG_EINVAL, "take_along_dim: indices must not be NULL");
    tg_tensor *xf = NULL, *iff = NULL;
    int rc = tg_reshape(&xf, x, 1, (int64_t[]){-1});
    if (rc >= 0) rc = tg_reshape(&iff, idx, 1, (int64_t[]){-1});
    if (rc >= 0) rc = take_along(out, xf, iff, 0);
    tg_tensor_release(xf);
    tg_tensor_release(iff);
    return rc;
}

int tg_take_along_dim(tg_tensor **out, tg_tensor *x, tg_tensor *indices, int dim)
{
    TG_CHECK(out != NULL, TG_EINVAL, "take_along_dim: out must not be NULL");
    tg__lib_enter();
    const int rc = take_along(out, x, indices, dim);
    tg__lib_leave();
    return tg__scope_capture(out, rc);
}

int tg_take_along_dim_flat(tg_tensor **out, tg_tensor *x, tg_tensor *indices)
{
    TG_CHECK(out != NULL, TG_EINVAL, "take_along_dim: out must not be NULL");
    tg__lib_enter();
    const int rc = take_along_flat(out, x, indices);
    tg__lib_leave();
    return tg__scope_capture(out, rc);
}

/* ---- index_fill, index_copy ---- */

/* *e = the index's values (negative ones wrapped when `wrap`) in the
 * shape x's with L at dim (L the index's length), each value checked to
 * be in [0, n) (n = x.size(dim)): TG_EINVAL naming the first bad one.
 * A 0-d x takes one value, and gives a 0-d e. */
static int expanded_index(const char *op, tg_tensor **e, const tg_tensor *x, int dim,
                          tg_tensor *idx, bool wrap)
{
    TG_CHECK(idx->dtype == TG_I64, TG_EDTYPE, "%s: index has dtype %s; it must be i64", op,
             tg_dtype_name(idx->dtype));
    TG_CHECK(idx->ndim <= 1, TG_ESHAPE, "%s: index has %d dims; it must be 1-d", op, idx->ndim);
    const int64_t L = tg_tensor_numel(idx), n = x->ndim > 0 ? x->shape[dim] : 1;
    TG_CHECK(x->ndim > 0 || L == 1, TG_ESHAPE,
             "%s: x is 0-d, so index must hold one value, not %lld", op, (long long)L);
    int64_t *v = tg__malloc((size_t)(L > 0 ? L : 1) * sizeof *v);
    if (!v) return TG_ENOMEM;
    tg__gather(idx, TG_I64, v);
    for (int64_t j = 0; j < L; j++) {
        const int64_t w = wrap && v[j] < 0 ? v[j] + n : v[j];
        if (w < 0 || w >= n) {
            const long long lo = wrap ? -(long long)n : 0;
            const int rc = tg__error(TG_EINVAL,
                                     "%s: index[%lld]=%lld is out of range for dim %d of "
                                     "extent %lld (expected [%lld, %lld))",
                                     op, (long long)j, (long long)v[j], dim, (long long)n, lo,
                                     (long long)n);
            free(v);
            return rc;
        }
        v[j] = w;
    }
    int64_t vs[TG_MAX_DIMS], es[TG_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) {
        vs[d] = d == dim ? L : 1;
        es[d] = d == dim ? L : x->shape[d];
    }
    tg_tensor *flat = NULL, *shaped = NULL;
    int rc = tg_tensor_from_data(&flat, TG_I64, 1, (int64_t[]){L}, v);
    free(v);
    if (rc >= 0) rc = tg_reshape(&shaped, flat, x->ndim, vs);
    if (rc >= 0) rc = tg_expand(e, shaped, x->ndim, es);
    tg_tensor_release(flat);
    tg_tensor_release(shaped);
    return rc;
}

static int norm_dim(const char *op, const tg_tensor *x, int dim, int *d)
{
    const int span = x->ndim > 0 ? x->ndim : 1;
    TG_CHECK(dim >= -span && dim < span, TG_EINVAL,
             "%s: dim=%d is out of range for x with %d dims (expected [%d, %d])", op, dim,
             x->ndim, -span, span - 1);
    *d = dim < 0 ? dim + span : dim;
    return TG_OK;
}

static int index_fill(tg_tensor **out, tg_tensor *x, int dim, tg_tensor *idx, double value)
{
    const char *op = "index_fill";
    TG_CHECK(x != NULL, TG_EINVAL, "%s: x must not be NULL", op);
    TG_CHECK(idx != NULL, TG_EINVAL, "%s: index must not be NULL", op);
    int d = 0;
    TG_TRY(norm_dim(op, x, dim, &d));
    const int vrc = tg__check_value("index_fill: value", x->dtype, value);
    if (vrc < 0) return vrc;
    tg_tensor *e = NULL;
    TG_TRY(expanded_index(op, &e, x, d, idx, true));
    const int rc = tg_scatter_value(out, x, d, e, value);
    tg_tensor_release(e);
    return rc;
}

static int index_copy(tg_tensor **out, tg_tensor *x, int dim, tg_tensor *idx, tg_tensor *src)
{
    const char *op = "index_copy";
    TG_CHECK(x != NULL, TG_EINVAL, "%s: x must not be NULL", op);
    TG_CHECK(idx != NULL, TG_EINVAL, "%s: index must not be NULL", op);
    TG_CHECK(src != NULL, TG_EINVAL, "%s: src must not be NULL", op);
    TG_CHECK(src->dtype == x->dtype, TG_EDTYPE,
             "%s: src has dtype %s but x has %s; they must match", op,
             tg_dtype_name(src->dtype), tg_dtype_name(x->dtype));
    int d = 0;
    TG_TRY(norm_dim(op, x, dim, &d));
    tg_tensor *e = NULL;
    TG_TRY(expanded_index(op, &e, x, d, idx, false));
    if (!tg_tensor_same_shape(src, e)) {
        char want[TG_MAX_DIMS * 22 + 2], got[TG_MAX_DIMS * 22 + 2];
        tg_shape_str(want, sizeof want, e->ndim, e->shape);
        tg_shape_str(got, sizeof got, src->ndim, src->shape);
        tg_tensor_release(e);
        return tg__error(TG_ESHAPE,
                         "%s: src has shape %s; it must be x's with the index's length at "
                         "dim %d: %s", op, got, d, want);
    }
    const int rc = tg_scatter(out, x, d, e, src);
    tg_tensor_release(e);
    return rc;
}

int tg_index_fill(tg_tensor **out, tg_tensor *x, int dim, tg_tensor *index, double value)
{
    TG_CHECK(out != NULL, TG_EINVAL, "index_fill: out must not be NULL");
    tg__lib_enter();
    const int rc = index_fill(out, x, dim, index, value);
    tg__lib_leave();
    return tg__scope_capture(out, rc);
}

int tg_index_copy(tg_tensor **out, tg_tensor *x, int dim, tg_tensor *index, tg_tensor *src)
{
    TG_CHECK(out != NULL, TG_EINVAL, "index_copy: out must not be NULL");
    tg__lib_enter();
    const int rc = index_copy(out, x, dim, index, src);
    tg__lib_leave();
    return tg__scope_capture(out, rc);
}
