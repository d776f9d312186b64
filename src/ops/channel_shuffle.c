/* src/ops/channel_shuffle.c - F.channel_shuffle(x, groups) of PyTorch
 * 1.13 (nn.ChannelShuffle): a reshape, a transpose and a reshape, so its
 * gradients, of any order, are those of the shape ops.
 *
 * x (N, C, *) is read as (N, g, C/g, L), L the product of the trailing
 * dims, transposed to (N, C/g, g, L) and read as x's shape: output channel
 * i * g + j is input channel j * (C/g) + i. */
#include "core/core.h"
#include "tapegrad/ops.h"

int tg_channel_shuffle(tg_tensor **out, tg_tensor *x, int64_t groups)
{
    const char *op = "channel_shuffle";
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", op);
    TG_CHECK(x != NULL, TG_EINVAL, "%s: x must not be NULL", op);
    TG_CHECK(groups >= 1, TG_EINVAL, "%s: groups=%lld must be positive", op, (long long)groups);
    TG_CHECK(x->ndim >= 3, TG_ESHAPE,
             "%s: x has %d dims; it must have at least 3 (N, C, *), as torch's", op, x->ndim);
    const int64_t n = x->shape[0], c = x->shape[1];
    TG_CHECK(c % groups == 0, TG_ESHAPE,
             "%s: x has %lld channels (dim 1); they must be divisible by groups=%lld", op,
             (long long)c, (long long)groups);
    int64_t l = 1;
    for (int d = 2; d < x->ndim; d++) l *= x->shape[d];
    tg_tensor *v = NULL, *t = NULL, *y = NULL;
    tg__lib_enter();
    int rc = tg_reshape(&v, x, 4, (const int64_t[]){n, groups, c / groups, l});
    if (rc >= 0) rc = tg_transpose(&t, v, 1, 2);
    if (rc >= 0) rc = tg_reshape(&y, t, x->ndim, x->shape);
    tg_tensor_release(v);
    tg_tensor_release(t);
    tg__lib_leave();
    if (rc >= 0) *out = y;
    return tg__scope_capture(out, rc);
}
