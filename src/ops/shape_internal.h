/* src/ops/shape_internal.h - helpers shared by shape.c and shape_cat.c. */
#ifndef TAPEGRAD_SHAPE_INTERNAL_H
#define TAPEGRAD_SHAPE_INTERNAL_H

#include "core/core.h"

/* d wrapped into [0, n) (negative counts from the end), or -1 when it is
 * outside [-n, n): for callers that word their own message. */
static inline int tg__dim_index(int d, int n)
{
    if (d < -n || d >= n) return -1;
    return d < 0 ? d + n : d;
}
/* Normalises dim (negative counts from the end) into *out; TG_EINVAL with a
 * message naming op and arg when it is not in [-ndim, ndim). */
int tg__shape_wrap_dim(const char *op, const char *arg, int dim, int ndim, int *out);
/* A new view of a's storage (new reference in *out); TG_ENOMEM on failure. */
int tg__shape_view(tg_tensor **out, const tg_tensor *a, int ndim, const int64_t *shape,
                   const int64_t *strides, int64_t offset);
/* Copies src's elements into dst (same shape, any strides), converting them
 * to dst's dtype; TG_ENOMEM on failure. */
int tg__shape_copy_into(tg_tensor *dst, const tg_tensor *src);
/* The view of acc that tg__shape_view makes of (ndim, shape, strides,
 * offset) += g, element by element in acc's storage, with tg_add's
 * rounding: the backward_into of an op whose input gradient is g placed in
 * a view of zeros (slice, diagonal).  TG_ENOMEM on failure. */
int tg__shape_add_into(tg_tensor *acc, int ndim, const int64_t *shape, const int64_t *strides,
                       int64_t offset, tg_tensor *g);
/* True when t's elements are row-major contiguous (unit dims ignored). */
bool tg__shape_is_contiguous(const tg_tensor *t);
/* Registers slice, slice_backward and cat (shape_cat.c). */

#endif
