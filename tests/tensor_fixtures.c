/* tests/tensor_fixtures.c - the transposed view shared by the tensor tests
 * (tensor_fixtures.h). */
#include "tensor_fixtures.h"

#include "core/core.h"

/* A transposed (last two dims swapped) view of a contiguous 2-d tensor. */
tg_tensor *transposed(tg_tensor *t)
{
    int64_t shape[2] = {t->shape[1], t->shape[0]};
    int64_t strides[2] = {t->strides[1], t->strides[0]};
    return tg__tensor_view_of(t->storage, t->dtype, 2, shape, strides, t->offset);
}
