/* src/ops/shape_more.c - torch.repeat_interleave, torch.tile, torch.rot90
 * and torch.diff, each made of recorded ops as torch's own composites are:
 *
 *   repeat_interleave(x, r, dim) = index_select(x, dim, [0 r0 times, 1 r1
 *       times, ...]), so the gradient adds each copy's g back (index_add)
 *   tile(x, reps) = repeat(x, reps with leading 1s up to x's ndim)
 *   rot90(x, k, (a, b)): k mod 4 = 1: transpose(flip(x, b), a, b);
 *       2: flip(x, (a, b)); 3: transpose(flip(x, a), a, b); 0: a copy
 *   diff(x, n, dim, prepend, append) = n times d(t) = narrow(t, dim, 1,
 *       L - 1) - narrow(t, dim, 0, L - 1), t = cat(prepend, x, append)
 * so all are differentiable to any order where their dtype is float. */
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "tapegrad/ops.h"

static int norm_dim(const char *op, const tg_tensor *x, int dim, int *d)
{
    TG_CHECK(x->ndim > 0, TG_ESHAPE, "%s: x is 0-d; it needs a dim", op);
    TG_CHECK(dim >= -x->ndim && dim < x->ndim, TG_EINVAL,
             "%s: dim=%d is out of range for x with %d dims (expected [%d, %d])", op, dim,
             x->ndim, -x->ndim, x->ndim - 1);
    *d = dim < 0 ? dim + x->ndim : dim;
    return TG_OK;
}

/* ---- repeat_interleave ---- */

/* index_select(x, d, idx) with idx holding j r[j] times, j < n (r[j] >= 0;
 * rstep 0: one count for every j). */
static int interleave(tg_tensor **out, tg_tensor *x, int d, const int64_t *r, int64_t rstep)
{
    const int64_t n = x->shape[d];
    int64_t total = 0;
    for (int64_t j = 0; j < n; j++) {
        TG_CHECK(r[j * rstep] <= INT64_MAX / 8 - total, TG_EINVAL,
                 "repeat_interleave: the repeats sum beyond int64");
        total += r[j * rstep];
    }
    tg_tensor *idx = tg__tensor_empty(TG_I64, 1, (int64_t[]){total});
    if (!idx) return TG_ENOMEM;
    int64_t *v = tg_tensor_data(idx);
    for (int64_t j = 0, p = 0; j < n; j++)
        for (int64_t k = 0; k < r[j * rstep]; k++) v[p++] = j;
    const int rc = tg_index_select(out, x, d, idx);
    tg_tensor_release(idx);
    return rc;
}

static int repeat_interleave(tg_tensor **out, tg_tensor *x, const tg_tensor *reps, int64_t r,
                             int dim)
{
    const char *op = "repeat_interleave";
    TG_CHECK(x != NULL, TG_EINVAL, "%s: x must not be NULL", op);
    int d = 0;
    TG_TRY(norm_dim(op, x, dim, &d));
    if (!reps) {
        TG_CHECK(r >= 0, TG_EINVAL, "%s: repeats=%lld must be >= 0", op, (long long)r);
        return interleave(out, x, d, &r, 0);
    }
    TG_CHECK(reps->dtype == TG_I64 || reps->dtype == TG_I32, TG_EDTYPE,
             "%s: repeats has dtype %s; it must be i64 or i32", op, tg_dtype_name(reps->dtype));
    TG_CHECK(reps->ndim <= 1, TG_ESHAPE, "%s: repeats has %d dims; it must be 0-d or 1-d", op,
             reps->ndim);
    const int64_t m = tg_tensor_numel(reps);
    TG_CHECK(m == 1 || m == x->shape[d], TG_ESHAPE,
             "%s: repeats has %lld values; it must have 1 or x.size(%d)=%lld", op, (long long)m,
             d, (long long)x->shape[d]);
    int64_t *v = tg__malloc((size_t)(m > 0 ? m : 1) * sizeof *v);
    if (!v) return TG_ENOMEM;
    tg__gather(reps, TG_I64, v);
    int rc = TG_OK;
    for (int64_t j = 0; j < m && rc >= 0; j++)
        if (v[j] < 0)
            rc = tg__error(TG_EINVAL, "%s: repeats[%lld]=%lld must be >= 0", op, (long long)j,
                           (long long)v[j]);
    if (rc >= 0) rc = interleave(out, x, d, v, m == 1 ? 0 : 1);
    free(v);
    return rc;
}

int tg_repeat_interleave(tg_tensor **out, tg_tensor *x, int64_t repeats, int dim)
{
    TG_CHECK(out != NULL, TG_EINVAL, "repeat_interleave: out must not be NULL");
    tg__lib_enter();
    const int rc = repeat_interleave(out, x, NULL, repeats, dim);
    tg__lib_leave();
    return tg__scope_capture(out, rc);
}

int tg_repeat_interleave_tensor(tg_tensor **out, tg_tensor *x, tg_tensor *repeats, int dim)
{
    TG_CHECK(out != NULL, TG_EINVAL, "repeat_interleave: out must not be NULL");
    TG_CHECK(repeats != NULL, TG_EINVAL, "repeat_interleave: repeats must not be NULL");
    tg__lib_enter();
    const int rc = repeat_interleave(out, x, repeats, 0, dim);
    tg__lib_leave();
    return tg__scope_capture(out, rc);
}

/* ---- tile ---- */

int tg_tile(tg_tensor **out, tg_tensor *x, int n, const int64_t *reps)
{
    TG_CHECK(out != NULL, TG_EINVAL, "tile: out must not be NULL");
    TG_CHECK(x != NULL, TG_EINVAL, "tile: x must not be NULL");
    TG_CHECK(n >= 0 && n <= TG_MAX_DIMS, TG_EINVAL, "tile: n=%d must be in [0, %d]", n,
             TG_MAX_DIMS);
    TG_CHECK(n == 0 || reps != NULL, TG_EINVAL, "tile: reps must not be NULL");
    const int k = n > x->ndim ? n : x->ndim;
    int64_t r[TG_MAX_DIMS];
    for (int i = 0; i < k; i++) r[i] = i < k - n ? 1 : reps[i - (k - n)];
    return tg_repeat(out, x, k, r);
}

/* ---- rot90 ---- */

static int rot90(tg_tensor **out, tg_tensor *x, int64_t k, const int *dims)
{
    const char *op = "rot90";
    TG_CHECK(x != NULL, TG_EINVAL, "%s: x must not be NULL", op);
    TG_CHECK(dims != NULL, TG_EINVAL, "%s: dims must not be NULL", op);
    TG_CHECK(x->ndim >= 2, TG_ESHAPE, "%s: x has %d dims; it needs at least 2", op, x->ndim);
    int a = 0, b = 0;
    TG_TRY(norm_dim(op, x, dims[0], &a));
    TG_TRY(norm_dim(op, x, dims[1], &b));
    TG_CHECK(a != b, TG_EINVAL, "%s: dims (%d, %d) must name two different dims", op, dims[0],
             dims[1]);
    const int64_t q = ((k % 4) + 4) % 4;
    if (q == 0) return tg_flip(out, x, 0, NULL);   /* a copy, as torch's clone */
    if (q == 2) return tg_flip(out, x, 2, (int[]){a, b});
    tg_tensor *f = NULL;
    TG_TRY(tg_flip(&f, x, 1, q == 1 ? &b : &a));
    const int rc = tg_transpose(out, f, a, b);
    tg_tensor_release(f);
    return rc;
}

int tg_rot90(tg_tensor **out, tg_tensor *x, int64_t k, const int *dims)
{
    TG_CHECK(out != NULL, TG_EINVAL, "rot90: out must not be NULL");
    tg__lib_enter();
    const int rc = rot90(out, x, k, dims);
    tg__lib_leave();
    return tg__scope_capture(out, rc);
}

/* ---- diff ---- */

/* prepend or append (which, may be NULL) fits x: x's ndim and extents but
 * at d. */
static int check_side(const char *which, const tg_tensor *x, const tg_tensor *t, int d)
{
    if (!t) return TG_OK;
    TG_CHECK(t->ndim == x->ndim, TG_ESHAPE, "diff: %s has %d dims but x has %d; they must match",
             which, t->ndim, x->ndim);
    for (int i = 0; i < x->ndim; i++)
        TG_CHECK(i == d || t->shape[i] == x->shape[i], TG_ESHAPE,
                 "diff: %s.size(%d)=%lld must match x.size(%d)=%lld (all but dim %d)", which, i,
                 (long long)t->shape[i], i, (long long)x->shape[i], d);
    return TG_OK;
}

static int diff(tg_tensor **out, tg_tensor *x, int64_t n, int dim, tg_tensor *prepend,
                tg_tensor *append)
{
    TG_CHECK(x != NULL, TG_EINVAL, "diff: x must not be NULL");
    TG_CHECK(n >= 0, TG_EINVAL, "diff: n=%lld must be >= 0", (long long)n);
    int d = 0;
    TG_TRY(norm_dim("diff", x, dim, &d));
    TG_TRY(check_side("prepend", x, prepend, d));
    TG_TRY(check_side("append", x, append, d));
    tg_tensor *cur = NULL;
    if (n == 0) {   /* x itself, prepend and append left out, as torch 1.13 */
        *out = tg_tensor_retain(x);
        return TG_OK;
    }
    if (prepend || append) {
        tg_tensor *parts[3];
        int k = 0;
        if (prepend) parts[k++] = prepend;
        parts[k++] = x;
        if (append) parts[k++] = append;
        TG_TRY(tg_cat(&cur, k, parts, d));
    } else {
        cur = tg_tensor_retain(x);
    }
    int rc = TG_OK;
    for (int64_t i = 0; i < n && rc >= 0 && cur->shape[d] > 0; i++) {
        const int64_t L = cur->shape[d] - 1;
        tg_tensor *hi = NULL, *lo = NULL, *next = NULL;
        rc = tg_narrow(&hi, cur, d, 1, L);
        if (rc >= 0) rc = tg_narrow(&lo, cur, d, 0, L);
        if (rc >= 0) rc = tg_sub(&next, hi, lo);
        tg_tensor_release(hi);
        tg_tensor_release(lo);
        tg_tensor_release(cur);
        cur = next;
    }
    if (rc >= 0) *out = cur;
    else tg_tensor_release(cur);
    return rc;
}

int tg_diff(tg_tensor **out, tg_tensor *x, int64_t n, int dim, tg_tensor *prepend,
            tg_tensor *append)
{
    TG_CHECK(out != NULL, TG_EINVAL, "diff: out must not be NULL");
    tg__lib_enter();
    const int rc = diff(out, x, n, dim, prepend, append);
    tg__lib_leave();
    return tg__scope_capture(out, rc);
}
