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

/* The kernels (sort_first.c): TG_FIRST_KERNEL=portable|avx2|avx512 forces
 * one, else the best this CPU runs; every kernel gives the same indices. */
typedef enum tg__first_kernel_id {
    TG__FIRST_KERNEL_AUTO,
    TG__FIRST_KERNEL_PORTABLE,
    TG__FIRST_KERNEL_AVX2,
    TG__FIRST_KERNEL_AVX512,
} tg__first_kernel_id;
bool tg__first_kernel_available(tg__first_kernel_id k);
const char *tg__first_kernel_name(tg__first_kernel_id k);
/* The kernel in use: the environment's choice when this CPU runs it (a
 * name it cannot is reported once on stderr), else the best available. */
tg__first_kernel_id tg__first_kernel_get(void);

/* Whether tg__first_along takes x with n elements along the dim: f32, f64,
 * f16 or bf16, contiguous, 1 <= n <= INT32_MAX. */
bool tg__first_applies(const tg_tensor *x, int64_t n);

/* x, contiguous, seen as (outer, n, inner): out (outer, inner) gets the
 * index along n of each row's first element in order.  x must pass
 * tg__first_applies.  TG_ENOMEM (out unset) when a half x cannot be
 * widened for want of memory. */
int tg__first_along(const tg_tensor *x, enum tg__first_order order, int64_t n, int64_t inner,
                    int64_t *out);

/* Whether tg__extreme_rows takes x with rows of n: tg__first_applies and
 * f32 or f64. */
bool tg__extreme_applies(const tg_tensor *x, int64_t n);

/* x, contiguous, seen as (rows, n): out (rows, in x's dtype) gets each
 * row's largest element (smallest with min), NaN first: the element at
 * tg__first_along's index (TG__FIRST_MAX_NAN_FIRST or _MIN_NAN_FIRST), the
 * same bits, by a pass over values alone (a row whose extreme is a zero or
 * a NaN takes the index pass, for which one).  x must pass
 * tg__extreme_applies. */
void tg__extreme_rows(const tg_tensor *x, bool min, int64_t n, void *out);

/* Whether tg__topk_rows takes x with rows of n (dims after them of total
 * extent inner) and the first m positions kept: f32, bf16 or f16 (each row
 * widened to f32, exactly), contiguous, inner 1, 2 <= m, 4 m <= n <=
 * INT32_MAX (src/ops/sort_topk.c). */
bool tg__topk_applies(const tg_tensor *x, int64_t n, int64_t inner, int64_t m);

/* x (passing tg__topk_applies with m = start + count), seen as (rows, n):
 * out (rows, count) gets the indices of positions [start, start + count)
 * of each row's order, TG__FIRST_MAX_NAN_FIRST's with desc, else
 * TG__FIRST_MIN_NAN_LAST's, equal elements by index: the sort's.  The
 * first-position kernel in use (tg__first_kernel_get) reads the rows.
 * TG_ENOMEM (out partly written). */
int tg__topk_rows(const tg_tensor *x, bool desc, int64_t n, int64_t start, int64_t count,
                  int64_t *out);

#endif
