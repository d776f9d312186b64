/* src/ops/pixel_shuffle.c - pixel_shuffle and pixel_unshuffle
 * (F.pixel_shuffle, F.pixel_unshuffle): a reshape, a permute and a
 * reshape, so their gradients, of any order, are those of the shape ops.
 *
 * With the leading dims as one batch dim B, x (B, C*r*r, H, W) is read as
 * (B, C, r, r, H, W), permuted to (B, C, H, r, W, r) and read as
 * (B, C, H*r, W*r): output channel c at (h*r + i, w*r + j) is input channel
 * c*r*r + i*r + j at (h, w).  pixel_unshuffle runs the same steps
 * backwards. */
#include "core/core.h"
#include "tapegrad/ops.h"

/* The checks both share: x's rank and r; *b the product of the leading
 * dims, e the last three (C, H, W). */
static int check_call(const char *op, tg_tensor **out, const tg_tensor *x, int64_t r, int64_t *b,
                      int64_t e[3])
{
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", op);
    TG_CHECK(x != NULL, TG_EINVAL, "%s: x must not be NULL", op);
    TG_CHECK(r >= 1 && r <= ((int64_t)1 << 31), TG_EINVAL, "%s: r=%lld must be in [1, 2^31]",
             op, (long long)r);
    const int nd = tg_tensor_ndim(x);
    TG_CHECK(nd >= 3, TG_ESHAPE, "%s: x has %d dims; it must have at least 3 (*, C, H, W)", op,
             nd);
    *b = 1;
    for (int d = 0; d < nd - 3; d++) *b *= tg_tensor_dim(x, d);
    for (int i = 0; i < 3; i++) e[i] = tg_tensor_dim(x, nd - 3 + i);
    return TG_OK;
}

/* x read as `from` (6 dims), permuted by perm, read as x's leading dims
 * then c, h, w.  The three ops run on the library's behalf: only the
 * result goes to the caller's scope (tapegrad/scope.h). */
static int shuffle(tg_tensor **out, tg_tensor *x, const int64_t *from, const int *perm,
                   int64_t c, int64_t h, int64_t w)
{
    const int nd = tg_tensor_ndim(x);
    int64_t to[TG_MAX_DIMS];
    for (int d = 0; d < nd - 3; d++) to[d] = tg_tensor_dim(x, d);
    to[nd - 3] = c, to[nd - 2] = h, to[nd - 1] = w;
    tg_tensor *v = NULL, *p = NULL;
    tg__lib_enter();
    int rc = tg_reshape(&v, x, 6, from);
    if (rc >= 0) rc = tg_permute(&p, v, perm);
    tg_tensor *y = NULL;
    if (rc >= 0) rc = tg_reshape(&y, p, nd, to);
    tg_tensor_release(v);
    tg_tensor_release(p);
    tg__lib_leave();
    if (rc >= 0) *out = y;
    return tg__scope_capture(out, rc);
}

int tg_pixel_shuffle(tg_tensor **out, tg_tensor *x, int64_t r)
{
    const char *op = "pixel_shuffle";
    int64_t b, e[3];
    TG_TRY(check_call(op, out, x, r, &b, e));
    const int64_t ch = e[0], h = e[1], w = e[2];
    TG_CHECK(ch % (r * r) == 0, TG_ESHAPE,
             "%s: x has %lld channels (dim %d); they must be a multiple of r*r = %lld", op,
             (long long)ch, tg_tensor_ndim(x) - 3, (long long)(r * r));
    TG_CHECK(h <= INT64_MAX / r && w <= INT64_MAX / r, TG_EINVAL,
             "%s: H=%lld, W=%lld times r=%lld is too large", op, (long long)h, (long long)w,
             (long long)r);
    const int64_t c = ch / (r * r);
    return shuffle(out, x, (const int64_t[]){b, c, r, r, h, w}, (const int[]){0, 1, 4, 2, 5, 3},
                   c, h * r, w * r);
}

int tg_pixel_unshuffle(tg_tensor **out, tg_tensor *x, int64_t r)
{
    const char *op = "pixel_unshuffle";
    int64_t b, e[3];
    TG_TRY(check_call(op, out, x, r, &b, e));
    const int64_t c = e[0], hr = e[1], wr = e[2];
    TG_CHECK(hr % r == 0 && wr % r == 0, TG_ESHAPE,
             "%s: x's H=%lld and W=%lld must be multiples of r=%lld", op, (long long)hr,
             (long long)wr, (long long)r);
    TG_CHECK(c <= INT64_MAX / (r * r), TG_EINVAL, "%s: C=%lld times r*r is too large", op,
             (long long)c);
    return shuffle(out, x, (const int64_t[]){b, c, hr / r, r, wr / r, r},
                   (const int[]){0, 1, 3, 5, 2, 4}, c * r * r, hr / r, wr / r);
}
