/* src/ops/unique.c - results whose shape depends on the data:
 * torch.unique and torch.unique_consecutive of the flattened input,
 * torch.nonzero / torch.argwhere and torch.masked_select.
 *
 * unique orders x's elements with tg_argsort (stable, NaN last) and cuts
 * the order into runs of equal elements: each run is one value (the bits
 * of its first element in x's order, so of -0.0 and 0.0 the one that comes
 * first, as torch's), its position in the runs is the inverse of each of
 * its elements, its length the count.  A NaN equals nothing, so each NaN
 * is a value of its own with count 0 and inverse 0, as torch 1.13's CPU
 * unique (its hash map's lookups of a NaN miss and read a new entry's 0).
 * For an f32 or f64 x with a NaN the order is torch's instead, that of
 * its hash set and std::sort (unique_order.c); the runs are cut the same
 * way.  unique_consecutive cuts x's
 * own order the same way (torch's x[i] != x[i - 1]).  Neither is recorded
 * (torch has no derivative for them).
 *
 * masked_select(x, mask) = index_select(reshape(expand(x, s), [n]), 0, k)
 * for the broadcast shape s of n elements and k the positions where the
 * broadcast mask is nonzero, so its gradient puts g back at the selected
 * places (index_add into zeros, then summed over the broadcast dims), to
 * any order.  An integer x's elements are copied (no gradient). */
#include <math.h>
#include <string.h>

#include "core/core.h"
#include "ops/elementwise.h"
#include "ops/unique_internal.h"
#include "tapegrad/ops.h"
#include "tapegrad/scope.h"

/* ---- unique, unique_consecutive ---------------------------------------------------- */

typedef struct unique_out {
    tg_tensor *values, *inverse, *counts;
} unique_out;

/* Cuts the order perm (NULL: x's own) of x's n elements into runs of equal
 * keys, filling the three results; with a perm (unique), a NaN's inverse
 * and count are 0. */
static int unique_runs(unique_out *u, const tg_tensor *x, const int64_t *perm, bool want_counts)
{
    const int64_t n = tg_tensor_numel(x);
    const bool is_float = tg_dtype_is_float(x->dtype);
    const size_t esz = tg_dtype_size(x->dtype), cells = (size_t)(n > 0 ? n : 1);
    void *key = tg__work_alloc(cells * 8);
    char *raw = tg__work_alloc(cells * esz);
    int64_t *first = tg__work_alloc(cells * sizeof *first);   /* of each run */
    u->inverse = tg__tensor_uninit(TG_I64, x->ndim, x->shape);
    int rc = key && raw && first && u->inverse ? TG_OK : TG_ENOMEM;
    int64_t k = 0;
    const double *kf = key;
    const bool nan_zero = perm && is_float;   /* unique: a NaN's inverse and count are 0 */
    if (rc >= 0) {
        tg__gather(x, is_float ? TG_F64 : TG_I64, key);
        tg__gather(x, x->dtype, raw);
        const int64_t *ki = key;
        int64_t *inv = tg_tensor_data(u->inverse);
        for (int64_t j = 0, prev = -1; j < n; j++) {
            const int64_t p = perm ? perm[j] : j;
            const bool same = prev >= 0 && (is_float ? kf[p] == kf[prev] : ki[p] == ki[prev]);
            if (!same) first[k++] = j;
            inv[p] = nan_zero && isnan(kf[p]) ? 0 : k - 1;
            prev = p;
        }
        u->values = tg__tensor_uninit(x->dtype, 1, &k);
        u->counts = want_counts ? tg__tensor_uninit(TG_I64, 1, &k) : NULL;
        if (!u->values || (want_counts && !u->counts)) rc = TG_ENOMEM;
    }
    if (rc >= 0) {
        char *v = tg_tensor_data(u->values);
        int64_t *c = u->counts ? tg_tensor_data(u->counts) : NULL;
        for (int64_t r = 0; r < k; r++) {
            const int64_t p = perm ? perm[first[r]] : first[r];
            memcpy(v + (size_t)r * esz, raw + (size_t)p * esz, esz);
            if (c) c[r] = nan_zero && isnan(kf[p]) ? 0 : (r + 1 < k ? first[r + 1] : n) - first[r];
        }
    }
    tg__work_free(key);
    tg__work_free(raw);
    tg__work_free(first);
    return rc;
}

/* unique of an f32 or f64 x (n >= 1 elements) that holds a NaN: its runs
 * cut in torch's order (tg__unique_torch_order); TG__UNIQUE_UNMODELLED
 * when that order is not modelled for x, nothing done then. */
static int unique_torch_order(unique_out *u, const tg_tensor *x, bool want_counts)
{
    const int64_t n = tg_tensor_numel(x);
    double *v = tg__work_alloc((size_t)n * sizeof *v);
    int64_t *perm = tg__work_alloc((size_t)n * sizeof *perm);
    int rc = v && perm ? TG_OK : TG_ENOMEM;
    if (rc == TG_OK) {
        tg__gather(x, TG_F64, v);
        rc = tg__unique_torch_order(v, n, x->dtype == TG_F32, perm);
    }
    if (rc == TG_OK) rc = unique_runs(u, x, perm, want_counts);
    tg__work_free(v);
    tg__work_free(perm);
    return rc;
}

/* Whether the f32 or f64 flat x, sorted ascending by perm, holds a NaN:
 * then its last element in that order is one (NaN sorts last). */
static int holds_nan(const tg_tensor *flat, const tg_tensor *perm, bool *nan)
{
    const int64_t n = tg_tensor_numel(flat);
    double last = 0;
    *nan = false;
    if (n == 0 || (flat->dtype != TG_F32 && flat->dtype != TG_F64)) return TG_OK;
    TG_TRY(tg_tensor_get(flat, (const int64_t *)tg_tensor_cdata(perm) + n - 1, &last));
    *nan = isnan(last);
    return TG_OK;
}

static int unique_run(unique_out *u, tg_tensor *x, bool consecutive, bool want_counts)
{
    const int64_t n = tg_tensor_numel(x);
    tg_tensor *flat = NULL, *perm = NULL;
    int rc = TG_OK;
    bool nan = false;
    if (!consecutive) {
        rc = tg_reshape(&flat, x, 1, &n);
        if (rc >= 0) rc = tg_argsort(&perm, flat, 0, false);
        if (rc >= 0) rc = holds_nan(flat, perm, &nan);
    }
    bool done = false;   /* by torch's order where it is modelled, else the sorted one */
    if (nan) {
        rc = unique_torch_order(u, x, want_counts);
        done = rc != TG__UNIQUE_UNMODELLED;
        if (!done) rc = TG_OK;
    }
    if (rc >= 0 && !done)
        rc = unique_runs(u, x, perm ? tg_tensor_cdata(perm) : NULL, want_counts);
    tg_tensor_release(flat);
    tg_tensor_release(perm);
    return rc;
}

/* Hands the three results to the caller (its scope): all or none, the
 * out-pointers as they were on failure. */
static int capture_three(tg_tensor **values, tg_tensor **inverse, tg_tensor **counts,
                         unique_out *u, int rc)
{
    if (!inverse) {
        tg_tensor_release(u->inverse);
        u->inverse = NULL;
    }
    tg_tensor *const old_v = *values, *const old_i = inverse ? *inverse : NULL;
    rc = tg__scope_capture_pair(values, u->values, inverse, u->inverse, rc);
    if (rc < 0 || !u->counts) {
        tg_tensor_release(u->counts);
        return rc;
    }
    tg_tensor *const old_c = *counts;
    *counts = u->counts;
    rc = tg__scope_capture(counts, TG_OK);
    if (rc < 0) {   /* a scope is open, and holds values and inverse */
        *counts = old_c;
        if (tg_scope_keep(*values)) tg_tensor_release(*values);
        *values = old_v;
        if (inverse && tg_scope_keep(*inverse)) tg_tensor_release(*inverse);
        if (inverse) *inverse = old_i;
    }
    return rc;
}

static int unique_call(const char *op, tg_tensor **values, tg_tensor **inverse,
                       tg_tensor **counts, tg_tensor *x, bool consecutive)
{
    TG_CHECK(values != NULL, TG_EINVAL, "%s: values must not be NULL", op);
    TG_CHECK(values != inverse && values != counts && (!inverse || inverse != counts),
             TG_EINVAL, "%s: values, inverse and counts must be different places", op);
    TG_CHECK(x != NULL, TG_EINVAL, "%s: x must not be NULL", op);
    unique_out u = {0};
    tg__lib_enter();
    int rc = unique_run(&u, x, consecutive, counts != NULL);
    tg__lib_leave();
    if (rc < 0) {
        tg_tensor_release(u.values);
        tg_tensor_release(u.inverse);
        tg_tensor_release(u.counts);
        return rc;
    }
    return capture_three(values, inverse, counts, &u, rc);
}

int tg_unique(tg_tensor **values, tg_tensor **inverse, tg_tensor **counts, tg_tensor *x,
              bool sorted)
{
    (void)sorted;   /* the values are always in order */
    return unique_call("unique", values, inverse, counts, x, false);
}

int tg_unique_consecutive(tg_tensor **values, tg_tensor **inverse, tg_tensor **counts,
                          tg_tensor *x)
{
    return unique_call("unique_consecutive", values, inverse, counts, x, true);
}

/* ---- nonzero, argwhere ------------------------------------------------------------- */

static int nonzero(tg_tensor **out, const tg_tensor *x)
{
    const int64_t n = tg_tensor_numel(x);
    const bool is_float = tg_dtype_is_float(x->dtype);
    void *v = tg__work_alloc((size_t)(n > 0 ? n : 1) * 8);
    if (!v) return TG_ENOMEM;
    tg__gather(x, is_float ? TG_F64 : TG_I64, v);
    const double *vf = v;
    const int64_t *vi = v;
    int64_t count = 0;
    for (int64_t i = 0; i < n; i++) count += is_float ? vf[i] != 0 : vi[i] != 0;
    tg_tensor *r = tg__tensor_uninit(TG_I64, 2, (int64_t[]){count, x->ndim});
    if (!r) {
        tg__work_free(v);
        return TG_ENOMEM;
    }
    int64_t *o = tg_tensor_data(r);
    for (int64_t i = 0; i < n; i++) {
        if (is_float ? vf[i] == 0 : vi[i] == 0) continue;
        /* the row-major multi-index of element i */
        for (int64_t d = x->ndim - 1, rest = i; d >= 0; d--) {
            o[d] = rest % x->shape[d];
            rest /= x->shape[d];
        }
        o += x->ndim;
    }
    tg__work_free(v);
    *out = r;
    return TG_OK;
}

int tg_nonzero(tg_tensor **out, tg_tensor *x)
{
    TG_CHECK(out != NULL, TG_EINVAL, "nonzero: out must not be NULL");
    TG_CHECK(x != NULL, TG_EINVAL, "nonzero: x must not be NULL");
    tg_tensor *r = NULL;
    const int rc = nonzero(&r, x);
    if (rc >= 0) *out = r;
    return tg__scope_capture(out, rc);
}

int tg_argwhere(tg_tensor **out, tg_tensor *x)
{
    TG_CHECK(out != NULL, TG_EINVAL, "argwhere: out must not be NULL");
    TG_CHECK(x != NULL, TG_EINVAL, "argwhere: x must not be NULL");
    return tg_nonzero(out, x);
}

/* ---- masked_select ----------------------------------------------------------------- */

/* The positions (of the n elements of the broadcast shape) where mask,
 * broadcast to (nd, shape), is nonzero: a new 1-d i64 tensor. */
static int selected(tg_tensor **idx, const tg_tensor *mask, int nd, const int64_t *shape,
                    int64_t n)
{
    const void *p = NULL;
    void *owned = NULL;
    TG_TRY(tg__ew_input(mask, TG_U8, nd, shape, n, &p, &owned));
    const uint8_t *m = p;
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++) k += m[i] != 0;
    tg_tensor *r = tg__tensor_uninit(TG_I64, 1, &k);
    if (r) {
        int64_t *o = tg_tensor_data(r);
        for (int64_t i = 0; i < n; i++)
            if (m[i]) *o++ = i;
    }
    tg__work_free(owned);
    if (!r) return TG_ENOMEM;
    *idx = r;
    return TG_OK;
}

/* An integer x's selected elements, copied. */
static int take_ints(tg_tensor **out, const tg_tensor *x, const tg_tensor *idx, int nd,
                     const int64_t *shape, int64_t n)
{
    const void *p = NULL;
    void *owned = NULL;
    TG_TRY(tg__ew_input(x, x->dtype, nd, shape, n, &p, &owned));
    tg_tensor *r = tg__tensor_uninit(x->dtype, 1, idx->shape);
    if (r) {
        const size_t esz = tg_dtype_size(x->dtype);
        const int64_t *k = tg_tensor_cdata(idx);
        char *o = tg_tensor_data(r);
        for (int64_t j = 0; j < idx->shape[0]; j++)
            memcpy(o + (size_t)j * esz, (const char *)p + (size_t)k[j] * esz, esz);
    }
    tg__work_free(owned);
    if (!r) return TG_ENOMEM;
    *out = r;
    return TG_OK;
}

static int masked_select(tg_tensor **out, tg_tensor *x, const tg_tensor *mask)
{
    int nd = 0;
    int64_t shape[TG_MAX_DIMS];
    TG_TRY(tg__broadcast_shapes("masked_select", x->ndim, x->shape, mask->ndim, mask->shape,
                                &nd, shape));
    const int64_t n = tg__numel(nd, shape);
    tg_tensor *idx = NULL, *xe = NULL, *flat = NULL;
    int rc = selected(&idx, mask, nd, shape, n);
    if (rc >= 0 && !tg_dtype_is_float(x->dtype)) {
        rc = take_ints(out, x, idx, nd, shape, n);
    } else if (rc >= 0) {
        rc = tg_expand(&xe, x, nd, shape);
        if (rc >= 0) rc = tg_reshape(&flat, xe, 1, &n);
        if (rc >= 0) rc = tg_index_select(out, flat, 0, idx);
    }
    tg_tensor_release(idx);
    tg_tensor_release(xe);
    tg_tensor_release(flat);
    return rc;
}

int tg_masked_select(tg_tensor **out, tg_tensor *x, tg_tensor *mask)
{
    const char *op = "masked_select";
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", op);
    TG_CHECK(x != NULL, TG_EINVAL, "%s: x must not be NULL", op);
    TG_CHECK(mask != NULL, TG_EINVAL, "%s: mask must not be NULL", op);
    TG_CHECK(mask->dtype == TG_U8, TG_EDTYPE, "%s: mask has dtype %s; it must be u8 (torch's "
             "bool)", op, tg_dtype_name(mask->dtype));
    tg_tensor *r = NULL;
    tg__lib_enter();
    const int rc = masked_select(&r, x, mask);
    tg__lib_leave();
    if (rc >= 0) *out = r;
    return tg__scope_capture(out, rc);
}
