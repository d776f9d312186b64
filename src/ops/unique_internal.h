/* src/ops/unique_internal.h - torch 1.13's CPU order of unique values
 * when the input holds a NaN (src/ops/unique_order.c), for tg_unique. */
#ifndef TAPEGRAD_OPS_UNIQUE_INTERNAL_H
#define TAPEGRAD_OPS_UNIQUE_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

/* tg__unique_torch_order's answer for an input with more distinct values
 * than the model's table sizes reach: nothing is written. */
#define TG__UNIQUE_UNMODELLED 1

/* perm (n entries) = v's element indices in the order torch.unique(x)
 * lists them: the values in torch's order (its hash set's, then
 * std::sort's), each value's elements together in x's order, each NaN
 * alone.  f32: the values are an f32 tensor's (hashed as floats).
 * TG_OK, TG__UNIQUE_UNMODELLED or TG_ENOMEM. */
int tg__unique_torch_order(const double *v, int64_t n, bool f32, int64_t *perm);

#endif
