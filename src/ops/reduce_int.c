/* src/ops/reduce_int.c - sums of integer tensors, as torch's: exact, into
 * int64, wrapping modulo 2^64 on overflow (torch's int64 adds wrap the same
 * way).  Not differentiable (an integer tensor never requires grad), so
 * sum and sum_dims call it from their forward and record nothing.
 *
 * The walk is reduce_float.c's reduce_kernel (tg__reduce_next): every input
 * element, in row-major order, is added into the output whose flat index is
 * sum_d idx[d] * ostride[d] (ostride[d] = 0 for a reduced dim). */
#include <string.h>

#include "core/core.h"
#include "ops/reduce_internal.h"

int tg__reduce_int(tg_tensor **out, const tg_tensor *a, int ndim, const int64_t *shape,
                   const int64_t *ostride)
{
    TG_ASSERT(!tg_dtype_is_float(a->dtype));
    int64_t n = tg__numel(a->ndim, a->shape);
    tg_tensor *r = tg__tensor_empty(TG_I64, ndim, shape);   /* zeros: an empty sum is 0 */
    /* a's elements as int64: i8/u8/i32 convert exactly (through double, which
     * holds them), i64 is moved as it is. */
    int64_t *x = tg__malloc((size_t)(n > 0 ? n : 1) * sizeof *x);
    if (!r || !x) {
        tg_tensor_release(r);
        free(x);
        return TG_ENOMEM;
    }
    if (n > 0) tg__gather(a, TG_I64, x);
    uint64_t *acc = (uint64_t *)r->storage->data;   /* unsigned: wraps, no UB */
    int64_t idx[TG_MAX_DIMS] = {0}, o = 0;
    for (int64_t i = 0; i < n; i++) {
        acc[o] += (uint64_t)x[i];
        o = tg__reduce_next(a, ostride, idx, o);
    }
    free(x);
    *out = r;
    return TG_OK;
}
