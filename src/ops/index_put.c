/* src/ops/index_put.c - torch.index_put (x[i0, i1, ...] = v and += v with
 * integer index tensors) and torch.masked_scatter, out of place, made of
 * recorded ops.
 *
 * index_put with k index tensors (broadcast together to B) addresses the
 * first k dims of x: the element (i0[b], ..., ik-1[b], rest...) for each
 * b of B.  With P the product of x's first k extents and R x's other
 * extents, x viewed as (P, R...) takes row r(b) = row-major position of
 * (i0[b], ..., ik-1[b]) in those k dims (negative values counted from the
 * end, as torch's), and v, broadcast to B + R and flattened to (|B|, R...),
 * gives the rows:
 *   accumulate:  y = index_add(x as (P, R...), 0, r, v)
 *   otherwise:   y = index_copy(x as (P, R...), 0, r, v)  (a scatter)
 * so dx is g (accumulate) or g with the written rows 0, and dv is g's rows
 * r summed over the dims v was broadcast along: torch's formulas.
 *
 * masked_scatter(x, mask, source): x and mask broadcast to S; the
 * positions of S where mask is nonzero, in row-major order, take
 * source's elements in row-major order, the first count of them:
 *   y = scatter(flatten(expand(x, S)), 0, positions, source.flatten()[:count])
 * so dx is g where mask is 0 (summed over x's broadcast dims) and dsource
 * is g at the masked positions, in order, then zeros: torch's.  Any dtype
 * of x, as the ops made of: integer data is not recorded, and its
 * accumulated sums wrap modulo 2^bits (index_add's). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "ops/elementwise.h"
#include "tapegrad/ops.h"

/* *r (i64, |B| values, row-major over B) = the rows of x's (P, R...) view
 * that the k index tensors address; TG_EINVAL naming the first value out
 * of range. */
static int rows_of(const char *op, tg_tensor **r, const tg_tensor *x, int k,
                   tg_tensor *const *idx, int nb, const int64_t *bshape)
{
    int64_t m = 1;
    for (int d = 0; d < nb; d++) m *= bshape[d];
    tg_tensor *rows = tg__tensor_empty(TG_I64, 1, (int64_t[]){m});
    if (!rows) return TG_ENOMEM;
    int64_t *out = tg_tensor_data(rows);
    int rc = TG_OK;
    int64_t stride = 1;
    for (int j = k - 1; j >= 0 && rc >= 0; j--) {
        tg_tensor *e = NULL, *c = NULL;
        rc = tg_expand(&e, idx[j], nb, bshape);
        if (rc >= 0) rc = tg_tensor_contiguous(&c, e);
        const int64_t n = x->shape[j];
        const int64_t *v = rc >= 0 ? tg_tensor_cdata(c) : NULL;
        for (int64_t b = 0; rc >= 0 && b < m; b++) {
            const int64_t w = v[b] < 0 ? v[b] + n : v[b];
            if (w < 0 || w >= n)
                rc = tg__error(TG_EINVAL,
                               "%s: indices[%d] holds %lld, out of range for dim %d of extent "
                               "%lld (expected [%lld, %lld))",
                               op, j, (long long)v[b], j, (long long)n, -(long long)n,
                               (long long)n);
            else out[b] += w * stride;
        }
        stride *= n;
        tg_tensor_release(e);
        tg_tensor_release(c);
    }
    if (rc >= 0) *r = rows;
    else tg_tensor_release(rows);
    return rc;
}

/* The broadcast shape of the k index tensors into bshape (*nb dims). */
static int index_shape(const char *op, int k, tg_tensor *const *idx, int *nb, int64_t *bshape)
{
    *nb = 0;
    for (int j = 0; j < k; j++) {
        int64_t s[TG_MAX_DIMS];
        int ns = 0;
        const int rc = tg__broadcast_shapes(op, *nb, bshape, idx[j]->ndim, idx[j]->shape, &ns, s);
        TG_CHECK(rc >= 0, TG_ESHAPE, "%s: indices[%d] does not broadcast with the ones before it",
                 op, j);
        *nb = ns;
        memcpy(bshape, s, sizeof(int64_t) * (size_t)ns);
    }
    return TG_OK;
}

/* index_put with k i64 index tensors, checked but for their values. */
static int put_rows(tg_tensor **out, tg_tensor *x, int k, tg_tensor *const *idx,
                    tg_tensor *values, bool accumulate)
{
    const char *op = "index_put";
    TG_CHECK(k <= x->ndim, TG_EINVAL, "%s: the indices address %d dims of x, which has %d", op,
             k, x->ndim);
    TG_CHECK(values->dtype == x->dtype, TG_EDTYPE,
             "%s: values has dtype %s but x has %s; they must match", op,
             tg_dtype_name(values->dtype), tg_dtype_name(x->dtype));
    int nb = 0;
    int64_t bshape[TG_MAX_DIMS];
    TG_TRY(index_shape(op, k, idx, &nb, bshape));
    const int nr = x->ndim - k;
    TG_CHECK(nb + nr <= TG_MAX_DIMS, TG_ESHAPE, "%s: the indexed result would have %d dims",
             op, nb + nr);
    int64_t tshape[TG_MAX_DIMS], m = 1, p = 1, vshape[TG_MAX_DIMS], xshape[TG_MAX_DIMS];
    for (int d = 0; d < nb; d++) m *= bshape[d];
    for (int d = 0; d < k; d++) p *= x->shape[d];
    memcpy(tshape, bshape, sizeof(int64_t) * (size_t)nb);
    vshape[0] = m;
    xshape[0] = p;
    for (int d = 0; d < nr; d++) {
        tshape[nb + d] = x->shape[k + d];
        vshape[1 + d] = xshape[1 + d] = x->shape[k + d];
    }
    int64_t s[TG_MAX_DIMS];
    int ns = 0;
    TG_CHECK(tg__broadcast_shapes(op, values->ndim, values->shape, nb + nr, tshape, &ns, s) >= 0 &&
                 ns == nb + nr && memcmp(s, tshape, sizeof(int64_t) * (size_t)ns) == 0,
             TG_ESHAPE, "%s: values must broadcast to the indexed shape", op);
    tg_tensor *rows = NULL, *ve = NULL, *vf = NULL, *xf = NULL, *yf = NULL;
    int rc;
    TG_TRY_GOTO(rows_of(op, &rows, x, k, idx, nb, bshape));
    TG_TRY_GOTO(tg_expand(&ve, values, nb + nr, tshape));
    TG_TRY_GOTO(tg_reshape(&vf, ve, 1 + nr, vshape));
    TG_TRY_GOTO(tg_reshape(&xf, x, 1 + nr, xshape));
    if (accumulate) TG_TRY_GOTO(tg_index_add(&yf, xf, 0, rows, vf));
    else TG_TRY_GOTO(tg_index_copy(&yf, xf, 0, rows, vf));
    rc = tg_reshape(out, yf, x->ndim, x->shape);
done:
    tg_tensor_release(rows);
    tg_tensor_release(ve);
    tg_tensor_release(vf);
    tg_tensor_release(xf);
    tg_tensor_release(yf);
    return rc;
}

/* A u8 mask at position d of the indices stands for the index tensors
 * of its nonzero elements, one per dim it covers (x's dims d, d + 1,
 * ...), as torch reads a bool (or uint8) index; *cols gets them. */
static int mask_columns(const char *op, const tg_tensor *x, int j, int d, tg_tensor *mask,
                        tg_tensor **cols, int *ncols)
{
    TG_CHECK(mask->ndim >= 1 && d + mask->ndim <= x->ndim, TG_ESHAPE,
             "%s: indices[%d] is a mask of %d dims at x's dim %d, beyond x's %d dims", op, j,
             mask->ndim, d, x->ndim);
    for (int i = 0; i < mask->ndim; i++)
        TG_CHECK(mask->shape[i] == x->shape[d + i], TG_ESHAPE,
                 "%s: indices[%d] is a mask whose size %lld at its dim %d does not match x's "
                 "%lld at dim %d", op, j, (long long)mask->shape[i], i,
                 (long long)x->shape[d + i], d + i);
    tg_tensor *nz = NULL;
    TG_TRY(tg_nonzero(&nz, mask));   /* (count, mask's ndim) */
    int rc = TG_OK, c = 0;
    for (; c < mask->ndim && rc >= 0; c++) {
        tg_tensor *col = NULL;
        rc = tg_narrow(&col, nz, 1, c, 1);
        if (rc >= 0) rc = tg_reshape(&cols[c], col, 1, (int64_t[]){-1});
        tg_tensor_release(col);
    }
    tg_tensor_release(nz);
    *ncols = c;
    return rc;
}

static int index_put(tg_tensor **out, tg_tensor *x, int n, tg_tensor *const *idx,
                     tg_tensor *values, bool accumulate)
{
    const char *op = "index_put";
    TG_CHECK(x != NULL, TG_EINVAL, "%s: x must not be NULL", op);
    TG_CHECK(values != NULL, TG_EINVAL, "%s: values must not be NULL", op);
    TG_CHECK(n >= 1 && n <= x->ndim, TG_EINVAL,
             "%s: %d index tensors for x with %d dims; expected 1 to %d", op, n, x->ndim,
             x->ndim);
    TG_CHECK(idx != NULL, TG_EINVAL, "%s: indices must not be NULL", op);
    for (int j = 0; j < n; j++) {
        TG_CHECK(idx[j] != NULL, TG_EINVAL, "%s: indices[%d] must not be NULL", op, j);
        TG_CHECK(idx[j]->dtype == TG_I64 || idx[j]->dtype == TG_U8, TG_EDTYPE,
                 "%s: indices[%d] has dtype %s; it must be i64 (or u8, a mask)", op, j,
                 tg_dtype_name(idx[j]->dtype));
    }
    tg_tensor *ix[TG_MAX_DIMS] = {NULL};
    int k = 0, rc = TG_OK;
    for (int j = 0; j < n && rc >= 0; j++) {
        if (idx[j]->dtype == TG_I64) {
            if (k < x->ndim) ix[k] = tg_tensor_retain(idx[j]);
            k++;
            continue;
        }
        int got = 0;
        rc = k + idx[j]->ndim <= x->ndim
                 ? mask_columns(op, x, j, k, idx[j], &ix[k], &got)
                 : tg__error(TG_ESHAPE, "%s: indices[%d] is a mask of %d dims at x's dim %d, "
                                        "beyond x's %d dims", op, j, idx[j]->ndim, k, x->ndim);
        k += idx[j]->ndim;
    }
    if (rc >= 0) rc = put_rows(out, x, k, ix, values, accumulate);
    for (int j = 0; j < TG_MAX_DIMS; j++) tg_tensor_release(ix[j]);
    return rc;
}

int tg_index_put(tg_tensor **out, tg_tensor *x, int n, tg_tensor *const *indices,
                 tg_tensor *values, bool accumulate)
{
    TG_CHECK(out != NULL, TG_EINVAL, "index_put: out must not be NULL");
    tg__lib_enter();
    const int rc = index_put(out, x, n, indices, values, accumulate);
    tg__lib_leave();
    return tg__scope_capture(out, rc);
}

/* ---- masked_scatter ---- */

static int masked_scatter(tg_tensor **out, tg_tensor *x, tg_tensor *mask, tg_tensor *source)
{
    const char *op = "masked_scatter";
    TG_CHECK(x != NULL, TG_EINVAL, "%s: x must not be NULL", op);
    TG_CHECK(mask != NULL, TG_EINVAL, "%s: mask must not be NULL", op);
    TG_CHECK(source != NULL, TG_EINVAL, "%s: source must not be NULL", op);
    TG_CHECK(mask->dtype == TG_U8, TG_EDTYPE, "%s: mask has dtype %s; it must be u8 (bool)", op,
             tg_dtype_name(mask->dtype));
    TG_CHECK(source->dtype == x->dtype, TG_EDTYPE,
             "%s: source has dtype %s but x has %s; they must match", op,
             tg_dtype_name(source->dtype), tg_dtype_name(x->dtype));
    int64_t s[TG_MAX_DIMS];
    int ns = 0;
    TG_TRY(tg__broadcast_shapes(op, x->ndim, x->shape, mask->ndim, mask->shape, &ns, s));
    tg_tensor *me = NULL, *mc = NULL, *xe = NULL, *xf = NULL, *sf = NULL, *sn = NULL;
    tg_tensor *pos = NULL, *yf = NULL;
    int rc;
    TG_TRY_GOTO(tg_expand(&me, mask, ns, s));
    TG_TRY_GOTO(tg_tensor_contiguous(&mc, me));
    const int64_t n = tg_tensor_numel(mc);
    const uint8_t *mv = tg_tensor_cdata(mc);
    int64_t count = 0;
    for (int64_t i = 0; i < n; i++) count += mv[i] != 0;
    if (count > tg_tensor_numel(source)) {
        rc = tg__error(TG_ESHAPE,
                       "%s: mask selects %lld elements but source has only %lld", op,
                       (long long)count, (long long)tg_tensor_numel(source));
        goto done;
    }
    pos = tg__tensor_empty(TG_I64, 1, (int64_t[]){count});
    if (!pos) {
        rc = TG_ENOMEM;
        goto done;
    }
    int64_t *pv = tg_tensor_data(pos);
    for (int64_t i = 0, c = 0; i < n; i++)
        if (mv[i]) pv[c++] = i;
    TG_TRY_GOTO(tg_expand(&xe, x, ns, s));
    TG_TRY_GOTO(tg_reshape(&xf, xe, 1, (int64_t[]){n}));
    TG_TRY_GOTO(tg_reshape(&sf, source, 1, (int64_t[]){-1}));
    TG_TRY_GOTO(tg_narrow(&sn, sf, 0, 0, count));
    TG_TRY_GOTO(tg_scatter(&yf, xf, 0, pos, sn));
    rc = tg_reshape(out, yf, ns, s);
done:
    tg_tensor_release(me);
    tg_tensor_release(mc);
    tg_tensor_release(xe);
    tg_tensor_release(xf);
    tg_tensor_release(sf);
    tg_tensor_release(sn);
    tg_tensor_release(pos);
    tg_tensor_release(yf);
    return rc;
}

int tg_masked_scatter(tg_tensor **out, tg_tensor *x, tg_tensor *mask, tg_tensor *source)
{
    TG_CHECK(out != NULL, TG_EINVAL, "masked_scatter: out must not be NULL");
    tg__lib_enter();
    const int rc = masked_scatter(out, x, mask, source);
    tg__lib_leave();
    return tg__scope_capture(out, rc);
}
