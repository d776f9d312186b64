/* src/ops/shape_dims.c - torch's dim-shuffling conveniences, each one call
 * of a shape op after its arguments are checked, so each is a view where
 * that op gives one and differentiable to any order as that op is:
 *
 *   narrow(x, dim, start, length)   slice(x, dim, start, start + length)
 *   movedim(x, source, destination) permute(x, perm), perm placing each
 *                                   source dim at its destination and the
 *                                   other dims, in order, in the gaps
 *   flatten(x, start, end)          reshape, dims start..end as one
 *   unflatten(x, dim, sizes)        reshape, dim as sizes (one may be -1) */
#include <stdint.h>

#include "core/core.h"
#include "ops/shape_internal.h"
#include "tapegrad/ops.h"

/* out and x not NULL, x at least 1-d, dim in [-ndim, ndim): wrapped in *d. */
static int check_dim(const char *op, tg_tensor **out, const tg_tensor *x, int dim, int *d)
{
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", op);
    TG_CHECK(x != NULL, TG_EINVAL, "%s: x must not be NULL", op);
    const int nd = tg_tensor_ndim(x);
    TG_CHECK(nd > 0, TG_EINVAL, "%s: x is 0-d; it must have at least one dim", op);
    *d = tg__dim_index(dim, nd);
    TG_CHECK(*d >= 0, TG_EINVAL, "%s: dim=%d is out of range for a %d-d x (in [%d, %d])", op,
             dim, nd, -nd, nd - 1);
    return TG_OK;
}

int tg_narrow(tg_tensor **out, tg_tensor *x, int dim, int64_t start, int64_t length)
{
    int d = 0;
    TG_TRY(check_dim("narrow", out, x, dim, &d));
    const int64_t n = tg_tensor_shape(x)[d];
    TG_CHECK(start >= -n && start <= n, TG_EINVAL,
             "narrow: start=%lld is out of range for dim %d of extent %lld (in [%lld, %lld])",
             (long long)start, dim, (long long)n, (long long)-n, (long long)n);
    if (start < 0) start += n;
    TG_CHECK(length >= 0 && length <= n - start, TG_EINVAL,
             "narrow: length=%lld must be in [0, %lld]: start %lld + length must not pass "
             "dim %d's extent %lld", (long long)length, (long long)(n - start),
             (long long)start, dim, (long long)n);
    return tg_slice(out, x, d, start, start + length, 1);
}

int tg_movedim(tg_tensor **out, tg_tensor *x, int n, const int *source, const int *destination)
{
    TG_CHECK(out != NULL, TG_EINVAL, "movedim: out must not be NULL");
    TG_CHECK(x != NULL, TG_EINVAL, "movedim: x must not be NULL");
    const int nd = tg_tensor_ndim(x), span = nd ? nd : 1;
    TG_CHECK(n >= 0 && n <= span, TG_EINVAL,
             "movedim: n=%d must be in [0, %d] (one entry per dim moved)", n, span);
    TG_CHECK(n == 0 || (source != NULL && destination != NULL), TG_EINVAL,
             "movedim: source and destination must not be NULL when n > 0");
    /* perm[to] = from; -1 while free.  A 0-d x takes dims -1 and 0 and is
     * returned as it is (a view), as torch's. */
    int perm[TG_MAX_DIMS], used[TG_MAX_DIMS] = {0};
    for (int i = 0; i < span; i++) perm[i] = -1;
    for (int i = 0; i < n; i++) {
        const int s = tg__dim_index(source[i], span), t = tg__dim_index(destination[i], span);
        TG_CHECK(s >= 0, TG_EINVAL, "movedim: source[%d]=%d is out of range for a %d-d x", i,
                 source[i], nd);
        TG_CHECK(t >= 0, TG_EINVAL, "movedim: destination[%d]=%d is out of range for a %d-d x",
                 i, destination[i], nd);
        TG_CHECK(!used[s], TG_EINVAL, "movedim: source names dim %d twice", s);
        TG_CHECK(perm[t] < 0, TG_EINVAL, "movedim: destination names dim %d twice", t);
        used[s] = 1;
        perm[t] = s;
    }
    if (nd == 0) return tg_reshape(out, x, 0, NULL);
    for (int t = 0, s = 0; t < nd; t++) {
        if (perm[t] >= 0) continue;
        while (used[s]) s++;
        perm[t] = s;
        used[s] = 1;
    }
    return tg_permute(out, x, perm);
}

int tg_flatten(tg_tensor **out, tg_tensor *x, int start_dim, int end_dim)
{
    TG_CHECK(out != NULL, TG_EINVAL, "flatten: out must not be NULL");
    TG_CHECK(x != NULL, TG_EINVAL, "flatten: x must not be NULL");
    /* A 0-d x counts as one dim (dims -1 and 0) and flattens into (1), as
     * torch's. */
    const int nd = tg_tensor_ndim(x), span = nd ? nd : 1;
    const int lo = tg__dim_index(start_dim, span), hi = tg__dim_index(end_dim, span);
    TG_CHECK(lo >= 0 && hi >= 0, TG_EINVAL,
             "flatten: start_dim=%d, end_dim=%d do not fit a %d-d x (dims in [%d, %d])",
             start_dim, end_dim, nd, -span, span - 1);
    TG_CHECK(lo <= hi, TG_EINVAL,
             "flatten: start_dim=%d comes after end_dim=%d (dims %d and %d of a %d-d x)",
             start_dim, end_dim, lo, hi, nd);
    const int64_t *xs = tg_tensor_shape(x);
    int64_t shape[TG_MAX_DIMS], prod = 1;
    int k = 0;
    for (int d = 0; d < lo; d++) shape[k++] = xs[d];
    for (int d = lo; d <= hi && nd; d++) prod *= xs[d];
    shape[k++] = prod;
    for (int d = hi + 1; d < nd; d++) shape[k++] = xs[d];
    return tg_reshape(out, x, k, shape);
}

int tg_unflatten(tg_tensor **out, tg_tensor *x, int dim, int n, const int64_t *sizes)
{
    int d = 0;
    TG_TRY(check_dim("unflatten", out, x, dim, &d));
    const int nd = tg_tensor_ndim(x);
    TG_CHECK(n >= 1 && n <= TG_MAX_DIMS + 1 - nd, TG_EINVAL,
             "unflatten: n=%d sizes must be in [1, %d] (the result has at most %d dims)", n,
             TG_MAX_DIMS + 1 - nd, TG_MAX_DIMS);
    TG_CHECK(sizes != NULL, TG_EINVAL, "unflatten: sizes must not be NULL");
    const int64_t *xs = tg_tensor_shape(x);
    int64_t shape[TG_MAX_DIMS], known = 1;
    int k = 0, infer = -1;
    for (int i = 0; i < d; i++) shape[k++] = xs[i];
    for (int i = 0; i < n; i++) {
        TG_CHECK(sizes[i] >= -1, TG_EINVAL, "unflatten: sizes[%d]=%lld must be >= 0 or -1", i,
                 (long long)sizes[i]);
        if (sizes[i] == -1) {
            TG_CHECK(infer < 0, TG_EINVAL, "unflatten: sizes[%d] and sizes[%d] are both -1; "
                     "only one size can be inferred", infer, i);
            infer = i;
        } else if (__builtin_mul_overflow(known, sizes[i], &known)) {
            known = INT64_MAX;   /* saturated: matches no extent, and a later 0 gives 0 */
        }
        shape[k++] = sizes[i];
    }
    for (int i = d + 1; i < nd; i++) shape[k++] = xs[i];
    if (infer >= 0) {
        TG_CHECK(known != 0 && xs[d] % known == 0, TG_ESHAPE,
                 "unflatten: dim %d of extent %lld is not a multiple of %lld, the product of "
                 "the other sizes, so sizes[%d]=-1 cannot be inferred", dim, (long long)xs[d],
                 (long long)known, infer);
        shape[d + infer] = xs[d] / known;
    } else {
        TG_CHECK(known == xs[d], TG_ESHAPE,
                 "unflatten: dim %d has extent %lld, not the product of the sizes", dim,
                 (long long)xs[d]);
    }
    return tg_reshape(out, x, k, shape);
}
