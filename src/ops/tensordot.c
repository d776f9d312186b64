/* src/ops/tensordot.c - torch.tensordot, torch.kron and torch.linalg.cross,
 * composed of differentiable public ops (derivatives of any order follow):
 *
 *   tensordot(a, b, dims_a, dims_b)  a permuted to (free, contracted) and
 *       b to (contracted, free), each folded to a matrix, one tg_mm, the
 *       result unfolded to a's free dims then b's
 *   kron(a, b)   a as (a0, 1, a1, 1, ..) times b as (1, b0, 1, b1, ..),
 *       folded pairwise to (a0 b0, a1 b1, ..), ranks first padded with
 *       leading 1s to the larger one
 *   cross(a, b, dim)   along dim of extent 3,
 *       roll(a, -1) roll(b, -2) - roll(a, -2) roll(b, -1)
 *     whose entry k is a[k+1] b[k+2] - a[k+2] b[k+1] (indices mod 3). */
#include <stdint.h>

#include "core/core.h"
#include "ops/shape_internal.h"
#include "ops/elementwise.h"
#include "tapegrad/ops.h"

/* Checks tensordot's dims and fills the permutation that puts t's free dims
 * first (front) or last, with the contracted dims cd[0..n) in their listed
 * order at the other end. */
static int contraction_perm(const tg_tensor *t, const char *name, int n, const int *dims,
                            int *cd, int *perm, bool free_first)
{
    const int nd = t->ndim;
    bool used[TG_MAX_DIMS] = {false};
    for (int i = 0; i < n; i++) {
        const int d = tg__dim_index(dims[i], nd);
        TG_CHECK(d >= 0, TG_EINVAL, "tensordot: %s[%d]=%d is out of range for a %d-d operand",
                 name, i, dims[i], nd);
        TG_CHECK(!used[d], TG_EINVAL, "tensordot: %s names dim %d twice", name, d);
        used[d] = true;
        cd[i] = d;
    }
    int k = 0;
    if (!free_first)
        for (int i = 0; i < n; i++) perm[k++] = cd[i];
    for (int d = 0; d < nd; d++)
        if (!used[d]) perm[k++] = d;
    if (free_first)
        for (int i = 0; i < n; i++) perm[k++] = cd[i];
    return TG_OK;
}

int tg_tensordot(tg_tensor **out, tg_tensor *a, tg_tensor *b, int n, const int *dims_a,
                 const int *dims_b)
{
    TG_CHECK(out != NULL, TG_EINVAL, "tensordot: out must not be NULL");
    TG_CHECK(a != NULL && b != NULL, TG_EINVAL, "tensordot: the operands must not be NULL");
    TG_CHECK((dims_a == NULL) == (dims_b == NULL), TG_EINVAL,
             "tensordot: dims_a and dims_b must both be given or both be NULL");
    const int limit = a->ndim < b->ndim ? a->ndim : b->ndim;
    TG_CHECK(n >= 0 && n <= limit, TG_EINVAL,
             "tensordot: n=%d contracted dims must be in [0, %d] (the operands have %d and %d "
             "dims)", n, limit, a->ndim, b->ndim);
    TG_CHECK(a->dtype == b->dtype, TG_EDTYPE,
             "tensordot: the operands have dtypes %s and %s; they must be the same",
             tg_dtype_name(a->dtype), tg_dtype_name(b->dtype));
    TG_CHECK(tg_dtype_is_float(a->dtype), TG_EDTYPE,
             "tensordot: the operands have dtype %s; float dtypes only (the product is a GEMM)",
             tg_dtype_name(a->dtype));
    /* dims NULL: a's last n against b's first n, as tensordot(a, b, n) */
    int da[TG_MAX_DIMS], db[TG_MAX_DIMS], ca[TG_MAX_DIMS], cb[TG_MAX_DIMS];
    int pa[TG_MAX_DIMS], pb[TG_MAX_DIMS];
    for (int i = 0; i < n; i++) {
        da[i] = dims_a ? dims_a[i] : a->ndim - n + i;
        db[i] = dims_b ? dims_b[i] : i;
    }
    TG_TRY(contraction_perm(a, "dims_a", n, da, ca, pa, true));
    TG_TRY(contraction_perm(b, "dims_b", n, db, cb, pb, false));
    int64_t k = 1, m = 1, p = 1, shape[TG_MAX_DIMS];
    int nd = 0;
    for (int i = 0; i < n; i++) {
        TG_CHECK(a->shape[ca[i]] == b->shape[cb[i]], TG_ESHAPE,
                 "tensordot: contracted dims must match, but dim %d of a has extent %lld and "
                 "dim %d of b %lld", ca[i], (long long)a->shape[ca[i]], cb[i],
                 (long long)b->shape[cb[i]]);
        k *= a->shape[ca[i]];
    }
    TG_CHECK(a->ndim + b->ndim - 2 * n <= TG_MAX_DIMS, TG_ESHAPE,
             "tensordot: the result would have %d dims, more than %d", a->ndim + b->ndim - 2 * n,
             TG_MAX_DIMS);
    for (int i = 0; i < a->ndim - n; i++) m *= (shape[nd++] = a->shape[pa[i]]);
    for (int i = n; i < b->ndim; i++) p *= (shape[nd++] = b->shape[pb[i]]);
    tg_tensor *ta = NULL, *tb = NULL, *ma = NULL, *mb = NULL, *y = NULL;
    tg__lib_enter();
    int rc = tg_permute(&ta, a, pa);
    if (rc >= 0) rc = tg_permute(&tb, b, pb);
    if (rc >= 0) rc = tg_reshape(&ma, ta, 2, (int64_t[]){m, k});
    if (rc >= 0) rc = tg_reshape(&mb, tb, 2, (int64_t[]){k, p});
    if (rc >= 0) rc = tg_mm(&y, ma, mb);
    if (rc >= 0) rc = tg_reshape(out, y, nd, shape);
    tg_tensor_release(ta);
    tg_tensor_release(tb);
    tg_tensor_release(ma);
    tg_tensor_release(mb);
    tg_tensor_release(y);
    tg__lib_leave();
    return tg__scope_capture(out, rc);
}

int tg_kron(tg_tensor **out, tg_tensor *a, tg_tensor *b)
{
    TG_CHECK(out != NULL, TG_EINVAL, "kron: out must not be NULL");
    TG_CHECK(a != NULL && b != NULL, TG_EINVAL, "kron: the operands must not be NULL");
    const int nd = a->ndim > b->ndim ? a->ndim : b->ndim;
    TG_CHECK(2 * nd <= TG_MAX_DIMS || nd == 0, TG_ESHAPE,
             "kron: operands of %d dims need %d interleaved dims, more than %d", nd, 2 * nd,
             TG_MAX_DIMS);
    int64_t sa[TG_MAX_DIMS], sb[TG_MAX_DIMS], shape[TG_MAX_DIMS];
    for (int i = 0; i < nd; i++) {
        const int ia = i - (nd - a->ndim), ib = i - (nd - b->ndim);
        const int64_t ea = ia >= 0 ? a->shape[ia] : 1, eb = ib >= 0 ? b->shape[ib] : 1;
        sa[2 * i] = ea, sa[2 * i + 1] = 1;
        sb[2 * i] = 1, sb[2 * i + 1] = eb;
        shape[i] = ea * eb;
    }
    tg_tensor *ra = NULL, *rb = NULL, *y = NULL;
    tg__lib_enter();
    int rc = tg_reshape(&ra, a, 2 * nd, sa);
    if (rc >= 0) rc = tg_reshape(&rb, b, 2 * nd, sb);
    if (rc >= 0) rc = tg_mul(&y, ra, rb);
    if (rc >= 0) rc = tg_reshape(out, y, nd, shape);
    tg_tensor_release(ra);
    tg_tensor_release(rb);
    tg_tensor_release(y);
    tg__lib_leave();
    return tg__scope_capture(out, rc);
}

/* *y = roll(a, -sa) * roll(b, -sb) along dim. */
static int rolled_product(tg_tensor **y, tg_tensor *a, tg_tensor *b, int dim, int64_t sa,
                          int64_t sb)
{
    tg_tensor *ra = NULL, *rb = NULL;
    int rc = tg_roll(&ra, a, 1, (int64_t[]){-sa}, &dim);
    if (rc >= 0) rc = tg_roll(&rb, b, 1, (int64_t[]){-sb}, &dim);
    if (rc >= 0) rc = tg_mul(y, ra, rb);
    tg_tensor_release(ra);
    tg_tensor_release(rb);
    return rc;
}

int tg_cross(tg_tensor **out, tg_tensor *a, tg_tensor *b, int dim)
{
    TG_CHECK(out != NULL, TG_EINVAL, "cross: out must not be NULL");
    TG_CHECK(a != NULL && b != NULL, TG_EINVAL, "cross: the operands must not be NULL");
    TG_CHECK(a->ndim == b->ndim, TG_ESHAPE,
             "cross: the operands have %d and %d dims; they must have the same number",
             a->ndim, b->ndim);
    TG_CHECK(a->dtype == b->dtype, TG_EDTYPE,
             "cross: the operands have dtypes %s and %s; they must be the same",
             tg_dtype_name(a->dtype), tg_dtype_name(b->dtype));
    const int nd = a->ndim, d = tg__dim_index(dim, nd);
    TG_CHECK(d >= 0, TG_EINVAL, "cross: dim=%d is out of range for %d-d operands (in [%d, %d])",
             dim, nd, -nd, nd - 1);
    TG_CHECK(a->shape[d] == 3 && b->shape[d] == 3, TG_ESHAPE,
             "cross: dim %d has extents %lld and %lld; it must be 3 in both operands", dim,
             (long long)a->shape[d], (long long)b->shape[d]);
    int nb = 0;
    int64_t sh[TG_MAX_DIMS];
    TG_TRY(tg__broadcast_shapes("cross", a->ndim, a->shape, b->ndim, b->shape, &nb, sh));
    tg_tensor *p = NULL, *q = NULL;
    tg__lib_enter();
    int rc = rolled_product(&p, a, b, d, 1, 2);
    if (rc >= 0) rc = rolled_product(&q, a, b, d, 2, 1);
    if (rc >= 0) rc = tg_sub(out, p, q);
    tg_tensor_release(p);
    tg_tensor_release(q);
    tg__lib_leave();
    return tg__scope_capture(out, rc);
}
