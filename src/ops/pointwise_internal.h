/* src/ops/pointwise_internal.h - what the ops softplus, clamp, where,
 * one_hot and embedding share: an elementwise map computed in double. */
#ifndef TG_OPS_POINTWISE_INTERNAL_H
#define TG_OPS_POINTWISE_INTERNAL_H

#include "ops/elementwise.h"

/* *out: a new contiguous tensor with a's shape and dtype dt whose element i
 * is f(a[i], user), computed in double and rounded once.  TG_ENOMEM. */
int tg__map_f64(tg_tensor **out, const tg_tensor *a, tg_dtype dt,
                double (*f)(double v, const void *user), const void *user);


#endif
