/* src/ops/cum_internal.h - the running ops along one dim that walk whole
 * lines (cumprod.c: cumprod; cummax.c: cummax, cummin, logcumsumexp). */
#ifndef TAPEGRAD_OPS_CUM_INTERNAL_H
#define TAPEGRAD_OPS_CUM_INTERNAL_H

#include "core/core.h"
#include "tapegrad/op.h"

/* What a running op does with one line of n elements of dtype as (TG_F64
 * or TG_I64, x's values converted): replaces it in place by the line's
 * results (in as; a TG_F64 line may hold indices as whole doubles). */
typedef void (*tg__line_fn)(void *line, tg_dtype as, int64_t n, const void *arg);

/* A new contiguous tensor *out of x's shape and dtype ydt: x's lines along
 * dim d (0 for a 0-d x) read as as, fn run over each (the lines in parallel
 * when there are many elements), each result stored into *out (rounded
 * once to a float ydt; copied when ydt is as).  TG_ENOMEM; on error *out
 * is not set. */
int tg__cum_lines(tg_tensor **out, const tg_tensor *x, int d, tg_dtype as, tg_dtype ydt,
                  tg__line_fn fn, const void *arg);

/* A forward's end for an op whose backward reads both x and its result y:
 * saves them in ctx (NULL: not recorded) and hands y to *out, or releases
 * y on error. */
int tg__cum_save_and_return(tg_op_ctx *ctx, tg_tensor **out, tg_tensor *x, tg_tensor *y);

#endif
