/* src/ops/pointwise_internal.h - what the ops softplus, clamp, where,
 * one_hot and embedding share: an elementwise map computed in double, and
 * their families' register functions (called from registry.c). */
#ifndef TG_OPS_POINTWISE_INTERNAL_H
#define TG_OPS_POINTWISE_INTERNAL_H

#include "internal.h"

/* *out: a new contiguous tensor with a's shape and dtype dt whose element i
 * is f(a[i], user), computed in double and rounded once.  TG_ENOMEM. */
int tg__map_f64(tg_tensor **out, const tg_tensor *a, tg_dtype dt,
                double (*f)(double v, const void *user), const void *user);

void tg__register_softplus(void);   /* softplus.c: softplus */
void tg__register_clamp(void);      /* clamp.c: clamp */
void tg__register_where(void);      /* where.c: where */
void tg__register_one_hot(void);    /* one_hot.c: one_hot */
void tg__register_embedding(void);  /* embedding.c: embedding, embedding_backward */

#endif
