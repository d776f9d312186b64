/* src/ops/grids.c - torch.meshgrid, torch.cartesian_prod,
 * torch.block_diag, torch.triu_indices and torch.tril_indices.
 *
 *   meshgrid(t0, ..., tn-1): output i = expand(view(ti, 1.. si ..1), S),
 *       S = (s0, ..., sn-1) ('ij'; 'xy' swaps the first two extents and
 *       the dims t0 and t1 lie along): views of the inputs, as torch's
 *   cartesian_prod = stack([flatten(m) for m in meshgrid(ij)], 1)
 *   block_diag: each block (a 0-d one as 1x1, a 1-d one as a row) padded
 *       with zeros to the total width at its column offset, then cat along
 *       the rows (tg_cat's dtype promotion)
 * so the gradients are those of the views, pad and cat, to any order.
 * triu_indices / tril_indices are integer results, never recorded. */
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "tapegrad/ops.h"
#include "tapegrad/scope.h"

/* ---- meshgrid ---- */

static int meshgrid(tg_tensor **outs, int n, tg_tensor *const *ts,
                    tg_meshgrid_indexing indexing)
{
    const char *op = "meshgrid";
    TG_CHECK(n >= 1 && n <= TG_MAX_DIMS, TG_EINVAL, "%s: n=%d must be in [1, %d]", op, n,
             TG_MAX_DIMS);
    TG_CHECK(ts != NULL, TG_EINVAL, "%s: tensors must not be NULL", op);
    TG_CHECK(indexing == TG_MESHGRID_IJ || indexing == TG_MESHGRID_XY, TG_EINVAL,
             "%s: indexing=%d must be TG_MESHGRID_IJ or TG_MESHGRID_XY", op, (int)indexing);
    int64_t shape[TG_MAX_DIMS];
    int at[TG_MAX_DIMS];   /* the dim tensor i lies along */
    for (int i = 0; i < n; i++) {
        TG_CHECK(ts[i] != NULL, TG_EINVAL, "%s: tensors[%d] must not be NULL", op, i);
        TG_CHECK(ts[i]->ndim <= 1, TG_ESHAPE, "%s: tensors[%d] has %d dims; it must be 0-d or 1-d",
                 op, i, ts[i]->ndim);
        TG_CHECK(ts[i]->dtype == ts[0]->dtype, TG_EDTYPE,
                 "%s: tensors[%d] has dtype %s but tensors[0] has %s; they must match", op, i,
                 tg_dtype_name(ts[i]->dtype), tg_dtype_name(ts[0]->dtype));
        at[i] = indexing == TG_MESHGRID_XY && n > 1 && i < 2 ? 1 - i : i;
        shape[at[i]] = tg_tensor_numel(ts[i]);
    }
    tg_tensor *res[TG_MAX_DIMS] = {NULL};
    int rc = TG_OK;
    for (int i = 0; i < n && rc >= 0; i++) {
        int64_t vs[TG_MAX_DIMS];
        for (int d = 0; d < n; d++) vs[d] = d == at[i] ? shape[d] : 1;
        tg_tensor *v = NULL;
        rc = tg_reshape(&v, ts[i], n, vs);
        if (rc >= 0) rc = tg_expand(&res[i], v, n, shape);
        tg_tensor_release(v);
    }
    if (rc < 0) {
        for (int i = 0; i < n; i++) tg_tensor_release(res[i]);
        return rc;
    }
    memcpy(outs, res, sizeof *outs * (size_t)n);
    return TG_OK;
}

int tg_meshgrid(tg_tensor **outs, int n, tg_tensor *const *tensors,
                tg_meshgrid_indexing indexing)
{
    TG_CHECK(outs != NULL, TG_EINVAL, "meshgrid: outs must not be NULL");
    tg_tensor *res[TG_MAX_DIMS] = {NULL};
    tg__lib_enter();
    int rc = meshgrid(res, n, tensors, indexing);
    tg__lib_leave();
    if (rc < 0) return rc;
    /* to the caller's scope, all or none (as tg_split's pieces) */
    int i = 0;
    for (; i < n && rc >= 0; i++) rc = tg__scope_capture(&res[i], TG_OK);
    if (rc < 0) {   /* res[i - 1] was released by the capture */
        for (int k = 0; k < i - 1; k++)
            if (tg_scope_keep(res[k])) tg_tensor_release(res[k]);
        for (int k = i; k < n; k++) tg_tensor_release(res[k]);
        return rc;
    }
    memcpy(outs, res, sizeof *outs * (size_t)n);
    return TG_OK;
}

/* ---- cartesian_prod ---- */

static int cartesian_prod(tg_tensor **out, int n, tg_tensor *const *ts)
{
    const char *op = "cartesian_prod";
    TG_CHECK(n >= 1 && n <= TG_MAX_DIMS, TG_EINVAL, "%s: n=%d must be in [1, %d]", op, n,
             TG_MAX_DIMS);
    TG_CHECK(ts != NULL, TG_EINVAL, "%s: tensors must not be NULL", op);
    for (int i = 0; i < n; i++) {
        TG_CHECK(ts[i] != NULL, TG_EINVAL, "%s: tensors[%d] must not be NULL", op, i);
        TG_CHECK(ts[i]->ndim == 1, TG_ESHAPE, "%s: tensors[%d] has %d dims; it must be 1-d", op,
                 i, ts[i]->ndim);
    }
    if (n == 1) {   /* torch returns the tensor itself */
        *out = tg_tensor_retain(ts[0]);
        return TG_OK;
    }
    tg_tensor *grid[TG_MAX_DIMS] = {NULL}, *flat[TG_MAX_DIMS] = {NULL};
    int rc = meshgrid(grid, n, ts, TG_MESHGRID_IJ);
    for (int i = 0; i < n && rc >= 0; i++) rc = tg_reshape(&flat[i], grid[i], 1, (int64_t[]){-1});
    if (rc >= 0) rc = tg_stack(out, n, flat, 1);
    for (int i = 0; i < n; i++) {
        tg_tensor_release(grid[i]);
        tg_tensor_release(flat[i]);
    }
    return rc;
}

int tg_cartesian_prod(tg_tensor **out, int n, tg_tensor *const *tensors)
{
    TG_CHECK(out != NULL, TG_EINVAL, "cartesian_prod: out must not be NULL");
    tg__lib_enter();
    const int rc = cartesian_prod(out, n, tensors);
    tg__lib_leave();
    return tg__scope_capture(out, rc);
}

/* ---- block_diag ---- */

static int block_diag(tg_tensor **out, int n, tg_tensor *const *ts)
{
    const char *op = "block_diag";
    TG_CHECK(n >= 0, TG_EINVAL, "%s: n=%d must be >= 0", op, n);
    TG_CHECK(n == 0 || ts != NULL, TG_EINVAL, "%s: tensors must not be NULL", op);
    if (n == 0) return tg_tensor_zeros(out, TG_F32, 2, (int64_t[]){1, 0});   /* torch's */
    int64_t width = 0;
    for (int i = 0; i < n; i++) {
        TG_CHECK(ts[i] != NULL, TG_EINVAL, "%s: tensors[%d] must not be NULL", op, i);
        TG_CHECK(ts[i]->ndim <= 2, TG_ESHAPE,
                 "%s: tensors[%d] has %d dims; it must have 2 or fewer", op, i, ts[i]->ndim);
        width += ts[i]->ndim == 0 ? 1 : ts[i]->shape[ts[i]->ndim - 1];
    }
    tg_tensor **rows = tg__calloc((size_t)n, sizeof *rows);
    if (!rows) return TG_ENOMEM;
    int rc = TG_OK;
    int64_t col = 0;
    for (int i = 0; i < n && rc >= 0; i++) {
        const tg_tensor *t = ts[i];
        const int64_t c = t->ndim == 0 ? 1 : t->shape[t->ndim - 1];
        const int64_t r = t->ndim == 2 ? t->shape[0] : 1;
        tg_tensor *m = NULL;
        rc = tg_reshape(&m, ts[i], 2, (int64_t[]){r, c});
        if (rc >= 0) rc = tg_pad(&rows[i], m, 2, (int64_t[]){col, width - col - c},
                                 TG_PAD_CONSTANT, 0);
        tg_tensor_release(m);
        col += c;
    }
    if (rc >= 0) rc = tg_cat(out, n, rows, 0);
    for (int i = 0; i < n; i++) tg_tensor_release(rows[i]);
    free(rows);
    return rc;
}

int tg_block_diag(tg_tensor **out, int n, tg_tensor *const *tensors)
{
    TG_CHECK(out != NULL, TG_EINVAL, "block_diag: out must not be NULL");
    tg__lib_enter();
    const int rc = block_diag(out, n, tensors);
    tg__lib_leave();
    return tg__scope_capture(out, rc);
}

/* ---- triu_indices, tril_indices ---- */

/* The (i, j) with i < row, j < col and j - i >= offset (upper) or
 * <= offset (lower), row-major, as an i64 (2, count) tensor. */
static int tri_indices(tg_tensor **out, const char *op, int64_t row, int64_t col,
                       int64_t offset, bool upper)
{
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", op);
    TG_CHECK(row >= 0, TG_EINVAL, "%s: row=%lld must be >= 0", op, (long long)row);
    TG_CHECK(col >= 0, TG_EINVAL, "%s: col=%lld must be >= 0", op, (long long)col);
    TG_CHECK(row <= (1LL << 31) && col <= (1LL << 31), TG_EINVAL,
             "%s: row and col must be <= 2^31", op);
    /* beyond these offsets nothing changes: keeps i + offset in range */
    offset = offset > col + 1 ? col + 1 : offset < -row - 1 ? -row - 1 : offset;
    int64_t count = 0;
    for (int64_t i = 0; i < row; i++) {
        /* j in [max(0, i + offset), col) (upper) or [0, min(col, i + offset + 1)) */
        int64_t lo = upper ? i + offset : 0, hi = upper ? col : i + offset + 1;
        lo = lo < 0 ? 0 : lo;
        hi = hi > col ? col : hi;
        count += hi > lo ? hi - lo : 0;
    }
    TG_CHECK(tg__shape_bytes_fit(2, (int64_t[]){2, count}, 8), TG_EINVAL,
             "%s: %lld indices do not fit in memory", op, (long long)count);
    tg_tensor *t = tg__tensor_empty(TG_I64, 2, (int64_t[]){2, count});
    if (!t) return TG_ENOMEM;
    int64_t *v = tg_tensor_data(t), k = 0;
    for (int64_t i = 0; i < row; i++) {
        int64_t lo = upper ? i + offset : 0, hi = upper ? col : i + offset + 1;
        lo = lo < 0 ? 0 : lo;
        hi = hi > col ? col : hi;
        for (int64_t j = lo; j < hi; j++, k++) {
            v[k] = i;
            v[count + k] = j;
        }
    }
    *out = t;
    return tg__scope_capture(out, TG_OK);
}

int tg_triu_indices(tg_tensor **out, int64_t row, int64_t col, int64_t offset)
{
    return tri_indices(out, "triu_indices", row, col, offset, true);
}

int tg_tril_indices(tg_tensor **out, int64_t row, int64_t col, int64_t offset)
{
    return tri_indices(out, "tril_indices", row, col, offset, false);
}
