/* src/ops/sort_internal.h - the index of each row's first element in an
 * order, in one pass over x (src/ops/sort_first.c): what topk and kthvalue
 * with k = 1 (sort.c) and argmax / argmin (argmax.c) keep. */
#ifndef TAPEGRAD_OPS_SORT_INTERNAL_H
#define TAPEGRAD_OPS_SORT_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "core/core.h"

/* The orders (see sort_first.c): the largest first with NaN before every
 * number (topk largest, argmax), the smallest first with NaN after every
 * number (topk smallest, kthvalue), the smallest first with NaN before
 * every number (argmin). */
enum tg__first_order { TG__FIRST_MAX_NAN_FIRST, TG__FIRST_MIN_NAN_LAST,
                       TG__FIRST_MIN_NAN_FIRST, TG__FIRST_N };

/* Whether tg__first_along takes x with n elements along the dim: f32 or
 * f64, contiguous, 1 <= n <= INT32_MAX. */
bool tg__first_applies(const tg_tensor *x, int64_t n);

/* x, contiguous, seen as (outer, n, inner): out (outer, inner) gets the
 * index along n of each row's first element in order.  x must pass
 * tg__first_applies. */
void tg__first_along(const tg_tensor *x, enum tg__first_order order, int64_t n, int64_t inner,
                     int64_t *out);

#endif
