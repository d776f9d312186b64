/* src/ops/tensordot.c - torch.tensordot, torch.kron and torch.linalg.cross,
 * composed of differentiable public ops (derivatives of any order follow):
 *
 *   tensordot(a, b, dims_a, dims_b)  a permuted to (free, contracted) and
 *       b to (contracted, free), each folded to a matrix A (m, k) and
 *       B (k, p), one tg_mm (for integers, which tg_mm does not take, a
 *       product of the matrices in uint64_t, wrapped to their dtype), the
 *       result unfolded to a's free dims then b's
 *   kron(a, b)   a as (a0, 1, a1, 1, ..) times b as (1, b0, 1, b1, ..),
 *       folded pairwise to (a0 b0, a1 b1, ..), ranks first padded with
 *       leading 1s to the larger one; past 4 dims (2 per dim would exceed
 *       TG_MAX_DIMS) a with each dim's elements repeated b_i times times b
 *       tiled a_i times, grown one dim at a time through 4-d views
 *   cross(a, b, dim)   along dim of extent 3,
 *       roll(a, -1) roll(b, -2) - roll(a, -2) roll(b, -1)
 *     whose entry k is a[k+1] b[k+2] - a[k+2] b[k+1] (indices mod 3). */
#include <stdint.h>
#include <string.h>

#include "core/core.h"
#include "autograd/tape.h"
#include "ops/elementwise.h"
#include "ops/linalg_internal.h"
#include "ops/shape_internal.h"
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

/* torch's tensordot dtypes: float operands as tg_mm's (one dtype outside
 * autocast; inside, any float dtypes, f64 only beside f64), integer
 * operands of one dtype ("expected scalar type Int but found Long"). */
static int check_dtypes(const tg_tensor *a, const tg_tensor *b)
{
    if (tg_dtype_is_float(a->dtype) && tg_dtype_is_float(b->dtype))
        return tg__check_amp_dtypes("tensordot", "a", a, "b", b);
    TG_CHECK(a->dtype == b->dtype, TG_EDTYPE,
             "tensordot: b is %s but a is %s: integer operands must have one dtype, as torch's "
             "(cast one with tg_to_dtype)", tg_dtype_name(b->dtype), tg_dtype_name(a->dtype));
    return TG_OK;
}

/* *y (new reference) = s's int64 values modulo 2^bits in integer dtype dt
 * (tg_to_dtype would saturate them). */
static int wrap_int(tg_tensor **y, tg_tensor *s, tg_dtype dt)
{
    tg_tensor *c = NULL, *r = NULL;
    int rc = tg_tensor_contiguous(&c, s);
    if (rc >= 0) rc = tg_tensor_zeros(&r, dt, s->ndim, s->shape);
    if (rc >= 0) {
        const int64_t *v = tg_tensor_cdata(c), n = tg_tensor_numel(c);
        void *buf = tg_tensor_data(r);
        for (int64_t i = 0; i < n; i++) tg__int_store(dt, buf, i, v[i]);
        *y = r;
        r = NULL;
    }
    tg_tensor_release(c);
    tg_tensor_release(r);
    return rc;
}

/* *y (m, p) = A (m, k) B (k, p) for integer matrices, in their dtype and
 * wrapping as torch's integer mm: the products wrap in the dtype and so
 * does their sum over k.  Sums of products taken modulo 2^64 (unsigned
 * arithmetic, which wraps without overflow) and then modulo 2^bits give
 * the same result, so each row of y is summed in uint64_t, row i of A
 * against the rows of B in memory order: no (m, k, p) products are made.
 * Not recorded (integers have no gradient); autocast does not touch it. */
static int int_mm(tg_tensor **y, tg_tensor *ma, tg_tensor *mb, int64_t m, int64_t k, int64_t p)
{
    tg_tensor *a64 = NULL, *b64 = NULL, *ac = NULL, *bc = NULL, *s = NULL;
    const bool suspended = tg__autocast_suspend(true);
    int rc = tg_to_dtype(&a64, ma, TG_I64);
    if (rc >= 0) rc = tg_to_dtype(&b64, mb, TG_I64);
    if (rc >= 0) rc = tg_tensor_contiguous(&ac, a64);
    if (rc >= 0) rc = tg_tensor_contiguous(&bc, b64);
    if (rc >= 0) rc = tg_tensor_zeros(&s, TG_I64, 2, (int64_t[]){m, p});
    if (rc >= 0) {
        const int64_t *av = tg_tensor_cdata(ac), *bv = tg_tensor_cdata(bc);
        int64_t *sv = tg_tensor_data(s);
        for (int64_t i = 0; i < m; i++) {
            uint64_t *row = (uint64_t *)(sv + i * p);   /* zeros; int64_t's bits */
            for (int64_t q = 0; q < k; q++) {
                const uint64_t aq = (uint64_t)av[i * k + q];
                const int64_t *brow = bv + q * p;
                for (int64_t j = 0; j < p; j++) row[j] += aq * (uint64_t)brow[j];
            }
        }
        rc = wrap_int(y, s, ma->dtype);
    }
    tg__autocast_suspend(suspended);
    tg_tensor_release(a64);
    tg_tensor_release(b64);
    tg_tensor_release(ac);
    tg_tensor_release(bc);
    tg_tensor_release(s);
    return rc;
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
    TG_TRY(check_dtypes(a, b));
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
    if (rc >= 0)
        rc = tg_dtype_is_float(a->dtype) ? tg_mm(&y, ma, mb) : int_mm(&y, ma, mb, m, k, p);
    if (rc >= 0) rc = tg_reshape(out, y, nd, shape);
    tg_tensor_release(ta);
    tg_tensor_release(tb);
    tg_tensor_release(ma);
    tg_tensor_release(mb);
    tg_tensor_release(y);
    tg__lib_leave();
    return tg__scope_capture(out, rc);
}

/* Grows dim i of *t (nd dims of extents sh, updated) r times through the
 * 4-d view (before, e, r, after), each element repeated r times (a's side
 * of kron), or (before, r, e, after), the dim tiled r times (b's side). */
static int grow_dim(tg_tensor **t, int nd, int64_t *sh, int i, int64_t r, bool tile)
{
    int64_t before = 1, after = 1;
    for (int d = 0; d < i; d++) before *= sh[d];
    for (int d = i + 1; d < nd; d++) after *= sh[d];
    const int64_t vs[4] = {before, tile ? 1 : sh[i], tile ? sh[i] : 1, after};
    const int64_t es[4] = {before, tile ? r : sh[i], tile ? sh[i] : r, after};
    tg_tensor *v = NULL, *e = NULL, *g = NULL;
    int rc = tg_reshape(&v, *t, 4, vs);
    if (rc >= 0) rc = tg_expand(&e, v, 4, es);
    sh[i] *= r;
    if (rc >= 0) rc = tg_reshape(&g, e, nd, sh);
    tg_tensor_release(v);
    tg_tensor_release(e);
    if (rc >= 0) {
        tg_tensor_release(*t);
        *t = g;
    }
    return rc;
}

/* kron of operands padded to nd dims (extents ea, eb) whose 2 nd
 * interleaved dims exceed TG_MAX_DIMS: a with each dim's elements repeated
 * eb_i times times b tiled ea_i times, grown one dim at a time. */
static int kron_grown(tg_tensor **out, tg_tensor *a, tg_tensor *b, int nd, const int64_t *ea,
                      const int64_t *eb)
{
    int64_t sa[TG_MAX_DIMS], sb[TG_MAX_DIMS];
    memcpy(sa, ea, (size_t)nd * sizeof *sa);
    memcpy(sb, eb, (size_t)nd * sizeof *sb);
    tg_tensor *ta = NULL, *tb = NULL;
    int rc = tg_reshape(&ta, a, nd, sa);
    if (rc >= 0) rc = tg_reshape(&tb, b, nd, sb);
    for (int i = 0; i < nd && rc >= 0; i++) {
        rc = grow_dim(&ta, nd, sa, i, eb[i], false);
        if (rc >= 0) rc = grow_dim(&tb, nd, sb, i, ea[i], true);
    }
    if (rc >= 0) rc = tg_mul(out, ta, tb);
    tg_tensor_release(ta);
    tg_tensor_release(tb);
    return rc;
}

int tg_kron(tg_tensor **out, tg_tensor *a, tg_tensor *b)
{
    TG_CHECK(out != NULL, TG_EINVAL, "kron: out must not be NULL");
    TG_CHECK(a != NULL && b != NULL, TG_EINVAL, "kron: the operands must not be NULL");
    const int nd = a->ndim > b->ndim ? a->ndim : b->ndim;
    int64_t ea[TG_MAX_DIMS], eb[TG_MAX_DIMS], sa[TG_MAX_DIMS], sb[TG_MAX_DIMS];
    int64_t shape[TG_MAX_DIMS];
    for (int i = 0; i < nd; i++) {
        const int ia = i - (nd - a->ndim), ib = i - (nd - b->ndim);
        ea[i] = ia >= 0 ? a->shape[ia] : 1, eb[i] = ib >= 0 ? b->shape[ib] : 1;
        shape[i] = ea[i] * eb[i];
    }
    tg_tensor *ra = NULL, *rb = NULL, *y = NULL;
    tg__lib_enter();
    int rc;
    if (2 * nd > TG_MAX_DIMS) {
        rc = kron_grown(out, a, b, nd, ea, eb);
    } else {
        for (int i = 0; i < nd; i++) {
            sa[2 * i] = ea[i], sa[2 * i + 1] = 1;
            sb[2 * i] = 1, sb[2 * i + 1] = eb[i];
        }
        rc = tg_reshape(&ra, a, 2 * nd, sa);
        if (rc >= 0) rc = tg_reshape(&rb, b, 2 * nd, sb);
        if (rc >= 0) rc = tg_mul(&y, ra, rb);
        if (rc >= 0) rc = tg_reshape(out, y, nd, shape);
    }
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
