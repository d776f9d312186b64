/* src/ops/split.c - torch.split, torch.chunk and torch.unbind: a tensor cut
 * along one dim into pieces that are views of it (tg_slice, tg_squeeze), so
 * each piece's gradient flows back into its part of x, to any order.
 *
 * Piece sizes along dim, of extent D:
 *   split(sizes)        sizes[0..n), which must sum to D
 *   split_size(s)       s, s, ..., and the rest (< s) last:
 *                       max(ceil(D / s), 1) pieces; s = 0 only for D = 0
 *   chunk(c)            split_size(ceil(D / c)), so fewer than c pieces
 *                       when c does not fit D evenly (D = 0: c empty pieces)
 *   unbind              D pieces of size 1, with dim removed */
#include <string.h>

#include "autograd/tape.h"
#include "tapegrad/ops.h"
#include "tapegrad/scope.h"

/* dim of x, counted from the end when negative; x must have a dim. */
static int split_dim(const char *op, const tg_tensor *x, int dim, int *d)
{
    TG_CHECK(x->ndim > 0, TG_ESHAPE, "%s: x is 0-d; it needs at least 1 dim to be cut", op);
    TG_CHECK(dim >= -x->ndim && dim < x->ndim, TG_EINVAL,
             "%s: dim=%d is out of range for x of %d dims", op, dim, x->ndim);
    *d = dim < 0 ? dim + x->ndim : dim;
    return TG_OK;
}

/* Hands the n pieces to the caller's scope (tapegrad/scope.h), all or
 * none: on an error each piece is released and outs[] is left untouched. */
static int capture_pieces(tg_tensor **outs, tg_tensor **pieces, int n)
{
    int i = 0, rc = TG_OK;
    for (; i < n && rc >= 0; i++) rc = tg__scope_capture(&pieces[i], TG_OK);
    if (rc < 0) {   /* pieces[i - 1] was released by the capture */
        for (int k = 0; k < i - 1; k++)
            if (tg_scope_keep(pieces[k])) tg_tensor_release(pieces[k]);
        for (int k = i; k < n; k++) tg_tensor_release(pieces[k]);
        return rc;
    }
    memcpy(outs, pieces, sizeof *outs * (size_t)n);
    return TG_OK;
}

/* The n pieces of x along dim d, sizes[i] (summing to x's extent) each,
 * squeezed to drop d when squeeze is set (unbind's pieces have size 1). */
static int cut(const char *op, tg_tensor **outs, int n, tg_tensor *x, int d,
               const int64_t *sizes, bool squeeze)
{
    tg_tensor **pieces = tg__calloc((size_t)(n > 0 ? n : 1), sizeof *pieces);
    if (!pieces) return tg__error(TG_ENOMEM, "%s: no memory for %d pieces", op, n);
    int rc = TG_OK;
    tg__lib_enter();
    int64_t start = 0;
    for (int i = 0; i < n && rc >= 0; start += sizes[i], i++) {
        tg_tensor *s = NULL;
        rc = tg_slice(&s, x, d, start, start + sizes[i], 1);
        if (rc >= 0 && squeeze) {
            rc = tg_squeeze(&pieces[i], s, d);
            tg_tensor_release(s);
        } else if (rc >= 0) {
            pieces[i] = s;
        }
    }
    tg__lib_leave();
    if (rc >= 0) rc = capture_pieces(outs, pieces, n);
    else
        for (int i = 0; i < n; i++) tg_tensor_release(pieces[i]);
    free(pieces);
    return rc;
}

int tg_split(tg_tensor **outs, int n, tg_tensor *x, const int64_t *sizes, int dim)
{
    TG_CHECK(x != NULL, TG_EINVAL, "split: x must not be NULL");
    TG_CHECK(n >= 1, TG_EINVAL, "split: n=%d must be >= 1", n);
    TG_CHECK(outs != NULL, TG_EINVAL, "split: outs must not be NULL");
    TG_CHECK(sizes != NULL, TG_EINVAL, "split: sizes must not be NULL");
    int d = 0;   /* set by split_dim on success */
    TG_TRY(split_dim("split", x, dim, &d));
    int64_t total = 0;
    for (int i = 0; i < n; i++) {
        TG_CHECK(sizes[i] >= 0, TG_EINVAL, "split: sizes[%d]=%lld must be >= 0", i,
                 (long long)sizes[i]);
        TG_CHECK(sizes[i] <= x->shape[d] - total, TG_EINVAL,
                 "split: sizes[0..%d] sum beyond dim %d's extent %lld", i, d,
                 (long long)x->shape[d]);
        total += sizes[i];
    }
    TG_CHECK(total == x->shape[d], TG_EINVAL,
             "split: sizes sum to %lld; they must sum to dim %d's extent %lld",
             (long long)total, d, (long long)x->shape[d]);
    return cut("split", outs, n, x, d, sizes, false);
}

/* The pieces of size s (the last one smaller) of an extent D: count and
 * sizes, for split_size and chunk.  sizes has room for the count. */
static int64_t size_pieces(int64_t D, int64_t s, int64_t *sizes)
{
    if (s == 0) return 1;   /* D = 0: one empty piece */
    int64_t n = D == 0 ? 1 : (D + s - 1) / s;
    for (int64_t i = 0; sizes && i < n; i++) sizes[i] = D - i * s < s ? D - i * s : s;
    return n;
}

/* outs (of room for cap pieces) or the count alone when outs is NULL. */
static int cut_sizes(const char *op, tg_tensor **outs, int cap, int *n_out, tg_tensor *x,
                     int d, int64_t n, int64_t s)
{
    TG_CHECK(n <= 1 << 30, TG_EINVAL, "%s: %lld pieces are too many", op, (long long)n);
    if (!outs) {
        *n_out = (int)n;
        return TG_OK;
    }
    TG_CHECK(cap >= n, TG_EINVAL, "%s: cap=%d is less than the %lld pieces of dim %d's "
             "extent %lld", op, cap, (long long)n, d, (long long)x->shape[d]);
    int64_t *sizes = tg__calloc((size_t)n, sizeof *sizes);
    if (!sizes) return tg__error(TG_ENOMEM, "%s: no memory for %lld sizes", op, (long long)n);
    if (s > 0) size_pieces(x->shape[d], s, sizes);   /* s = 0: n empty pieces (calloc's 0s) */
    int rc = cut(op, outs, (int)n, x, d, sizes, false);
    free(sizes);
    if (rc >= 0) *n_out = (int)n;
    return rc;
}

int tg_split_size(tg_tensor **outs, int cap, int *n_out, tg_tensor *x, int64_t split_size,
                  int dim)
{
    TG_CHECK(n_out != NULL, TG_EINVAL, "split_size: n_out must not be NULL");
    TG_CHECK(x != NULL, TG_EINVAL, "split_size: x must not be NULL");
    int d = 0;   /* set by split_dim on success */
    TG_TRY(split_dim("split_size", x, dim, &d));
    const int64_t D = x->shape[d];
    TG_CHECK(split_size > 0 || (split_size == 0 && D == 0), TG_EINVAL,
             "split_size: split_size=%lld must be > 0 (0 only for an extent of 0; dim %d's "
             "is %lld)", (long long)split_size, d, (long long)D);
    return cut_sizes("split_size", outs, cap, n_out, x, d, size_pieces(D, split_size, NULL),
                     split_size);
}

int tg_chunk(tg_tensor **outs, int cap, int *n_out, tg_tensor *x, int chunks, int dim)
{
    TG_CHECK(n_out != NULL, TG_EINVAL, "chunk: n_out must not be NULL");
    TG_CHECK(x != NULL, TG_EINVAL, "chunk: x must not be NULL");
    TG_CHECK(chunks >= 1, TG_EINVAL, "chunk: chunks=%d must be >= 1", chunks);
    int d = 0;   /* set by split_dim on success */
    TG_TRY(split_dim("chunk", x, dim, &d));
    const int64_t D = x->shape[d];
    if (D == 0) return cut_sizes("chunk", outs, cap, n_out, x, d, chunks, 0);
    const int64_t s = (D + chunks - 1) / chunks;
    return cut_sizes("chunk", outs, cap, n_out, x, d, size_pieces(D, s, NULL), s);
}

int tg_unbind(tg_tensor **outs, int cap, int *n_out, tg_tensor *x, int dim)
{
    TG_CHECK(n_out != NULL, TG_EINVAL, "unbind: n_out must not be NULL");
    TG_CHECK(x != NULL, TG_EINVAL, "unbind: x must not be NULL");
    int d = 0;   /* set by split_dim on success */
    TG_TRY(split_dim("unbind", x, dim, &d));
    const int64_t D = x->shape[d];
    TG_CHECK(D <= 1 << 30, TG_EINVAL, "unbind: %lld pieces are too many", (long long)D);
    if (!outs) {
        *n_out = (int)D;
        return TG_OK;
    }
    TG_CHECK(cap >= D, TG_EINVAL, "unbind: cap=%d is less than dim %d's extent %lld", cap, d,
             (long long)D);
    if (D == 0) {
        *n_out = 0;
        return TG_OK;
    }
    int64_t *ones = tg__calloc((size_t)D, sizeof *ones);
    if (!ones) return tg__error(TG_ENOMEM, "unbind: no memory for %lld sizes", (long long)D);
    for (int64_t i = 0; i < D; i++) ones[i] = 1;
    int rc = cut("unbind", outs, (int)D, x, d, ones, true);
    free(ones);
    if (rc >= 0) *n_out = (int)D;
    return rc;
}
