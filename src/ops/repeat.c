/* src/ops/repeat.c - repeat(x, repeats) (Tensor.repeat): x tiled repeats[i]
 * times along dim i, x's shape first padded with leading 1s to as many
 * dims as repeats has.
 *
 * A composite of recorded shape ops, so its gradient (the sum of g's
 * tiles) and every higher derivative come from theirs.  With s the padded
 * shape and r the repeats, y of shape (r0 s0, r1 s1, ...) is
 *   y = reshape(expand(view(x, (1, s0, 1, s1, ...)), (r0, s0, r1, s1, ...)))
 * since the row-major index of (t, k) in (r, s) is t s + k: tile t, place
 * k.  The interleaved 1 is left out where r is 1 (nothing to tile) or s is
 * 1 (the extent itself stretches), so a single expand serves whenever the
 * interleaved shape fits TG_MAX_DIMS; otherwise the dims are tiled one at a
 * time, each as (B, 1, s, A) expanded to (B, r, s, A), B and A being the
 * products of the extents before and after.  The last reshape copies the
 * expanded view (one strided gather); its backward reshapes g to
 * (r0, s0, ...), and expand's sums over the stretched extents in double,
 * rounded once (once per tiled dim when they are tiled one at a time, which
 * a half x's gradient shows). */
#include <stdint.h>
#include <stdlib.h>

#include "core/core.h"
#include "tapegrad/ops.h"

/* One expand over the interleaved shape; TG_ENOTFOUND when it has more
 * than TG_MAX_DIMS dims. */
static int repeat_at_once(tg_tensor **out, tg_tensor *x, int n, const int64_t *s,
                          const int64_t *r, const int64_t *oshape)
{
    int64_t view[2 * TG_MAX_DIMS], big[2 * TG_MAX_DIMS];
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (r[i] != 1 && s[i] != 1) {
            view[k] = 1;
            big[k++] = r[i];
        }
        view[k] = s[i];
        big[k++] = s[i] == 1 ? r[i] : s[i];
    }
    if (k > TG_MAX_DIMS) return TG_ENOTFOUND;
    tg_tensor *v = NULL, *e = NULL;
    int rc = tg_reshape(&v, x, k, view);
    if (rc >= 0) rc = tg_expand(&e, v, k, big);
    if (rc >= 0) rc = tg_reshape(out, e, n, oshape);
    tg_tensor_release(v);
    tg_tensor_release(e);
    return rc;
}

/* Dim after dim: cur (shape cs, n dims) becomes (.., r[i] s[i], ..). */
static int repeat_by_dim(tg_tensor **out, tg_tensor *x, int n, const int64_t *s,
                         const int64_t *r)
{
    int64_t cs[TG_MAX_DIMS];
    tg_tensor *cur = NULL;
    int rc = tg_reshape(&cur, x, n, s);
    for (int i = 0; i < n; i++) cs[i] = s[i];
    for (int i = 0; i < n && rc >= 0; i++) {
        if (r[i] == 1) continue;
        int64_t b = 1, a = 1;
        for (int d = 0; d < i; d++) b *= cs[d];
        for (int d = i + 1; d < n; d++) a *= cs[d];
        tg_tensor *v = NULL, *e = NULL, *next = NULL;
        rc = tg_reshape(&v, cur, 4, (int64_t[]){b, 1, s[i], a});
        if (rc >= 0) rc = tg_expand(&e, v, 4, (int64_t[]){b, r[i], s[i], a});
        cs[i] = r[i] * s[i];
        if (rc >= 0) rc = tg_reshape(&next, e, n, cs);
        tg_tensor_release(v);
        tg_tensor_release(e);
        tg_tensor_release(cur);
        cur = next;
    }
    if (rc >= 0) *out = cur;
    else tg_tensor_release(cur);
    return rc;
}

static int repeat(tg_tensor **out, tg_tensor *x, int n, const int64_t *repeats)
{
    TG_CHECK(x != NULL, TG_EINVAL, "repeat: x must not be NULL");
    TG_CHECK(n >= x->ndim && n <= TG_MAX_DIMS, TG_EINVAL, "repeat: n=%d repeats for x with %d "
             "dims; n must be in [%d, %d] (one per dim of x, and leading ones for new dims)",
             n, x->ndim, x->ndim, TG_MAX_DIMS);
    TG_CHECK(n == 0 || repeats != NULL, TG_EINVAL, "repeat: repeats is NULL with n=%d", n);
    int64_t s[TG_MAX_DIMS], oshape[TG_MAX_DIMS];
    for (int i = 0; i < n; i++) {
        TG_CHECK(repeats[i] >= 0, TG_EINVAL, "repeat: repeats[%d]=%lld must be >= 0", i,
                 (long long)repeats[i]);
        s[i] = i < n - x->ndim ? 1 : x->shape[i - (n - x->ndim)];
        TG_CHECK(s[i] == 0 || repeats[i] <= INT64_MAX / s[i], TG_EINVAL, "repeat: repeats[%d]"
                 "=%lld times extent %lld overflows int64", i, (long long)repeats[i],
                 (long long)s[i]);
        oshape[i] = repeats[i] * s[i];
    }
    TG_TRY(tg__check_shape("repeat", n, oshape));
    TG_CHECK(tg__shape_bytes_fit(n, oshape, (int64_t)tg_dtype_size(x->dtype)), TG_EINVAL,
             "repeat: the result of %d dims would not fit in memory addresses", n);
    tg_tensor *y = NULL;
    int rc = repeat_at_once(&y, x, n, s, repeats, oshape);
    if (rc == TG_ENOTFOUND) rc = repeat_by_dim(&y, x, n, s, repeats);
    if (rc < 0) return rc;
    if (y->storage != x->storage) {   /* a copy, as torch's repeat always is */
        *out = y;
        return TG_OK;
    }
    rc = tg_flip(out, y, 0, NULL);   /* nothing was tiled: flip of no dims copies */
    tg_tensor_release(y);
    return rc;
}

/* The ops run on the library's behalf; only the result goes to the
 * caller's scope. */
int tg_repeat(tg_tensor **out, tg_tensor *x, int n, const int64_t *repeats)
{
    TG_CHECK(out != NULL, TG_EINVAL, "repeat: out must not be NULL");
    tg__lib_enter();
    const int rc = repeat(out, x, n, repeats);
    tg__lib_leave();
    return tg__scope_capture(out, rc);
}
