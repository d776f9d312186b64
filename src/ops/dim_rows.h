/* src/ops/dim_rows.h - the reductions over chosen dims that look at whole
 * rows (argmax, amax, var in argmax.c, amax.c, var.c): the dims to reduce
 * as a bit mask, the shapes of the result, x's elements laid out so that
 * each result element owns one contiguous row, and the forward that makes
 * a result from them. */
#ifndef TAPEGRAD_OPS_DIM_ROWS_H
#define TAPEGRAD_OPS_DIM_ROWS_H

#include <stdbool.h>

#include "core/core.h"
#include "tapegrad/op.h"

/* The dims dims[0..ndims) of an ndim tensor as a bit mask (bit d: dim d),
 * each wrapped as a shape op's dim (negative from the end; a 0-d tensor
 * takes -1 and 0 and has nothing to reduce: mask 0).  TG_EINVAL naming
 * op and dims[i] for a dim out of range or named twice. */
int tg__dims_mask(const char *op, int ndims, const int *dims, int ndim, unsigned *mask);
/* Every dim of an ndim tensor as a mask (0 for a 0-d tensor): what a
 * reduction over the whole tensor, or over an empty dims list, reduces. */
static inline unsigned tg__dims_all(int ndim)
{
    return ndim > 0 ? (1u << ndim) - 1 : 0;
}
/* Whether mask is one run of consecutive dims (mask 0: only for a 0-d x):
 * then x is (outer, n, inner) with n the run's elements and inner those
 * of the dims after it. */
bool tg__dims_run(const tg_tensor *x, unsigned mask, int64_t *n, int64_t *inner);
/* TG_ESHAPE naming op when a dim in mask has extent 0 (a maximum or an
 * index of one needs an element). */
int tg__dims_nonempty(const char *op, const tg_tensor *x, unsigned mask);
/* The shape of a reduction of (ndim, shape) over mask: the reduced dims
 * become 1 (keepdim) or go. */
void tg__dims_out_shape(int ndim, const int64_t *shape, unsigned mask, bool keepdim, int *ond,
                        int64_t *oshape);
/* x's elements as *rows rows of *n elements each (tg__work_alloc'd, room
 * for *rows elements and one at least, so that a result per row fits even
 * when n is 0; the caller frees it with tg__work_free): the dims in
 * mask moved last, in order, so row r holds the elements that reduce to
 * result element r (row-major over the other dims, as the result).
 * as is TG_F64 or TG_I64 (x's values converted, as tg__gather).
 * TG_ENOMEM. */
int tg__dim_rows(const tg_tensor *x, unsigned mask, tg_dtype as, void **buf, int64_t *rows,
                 int64_t *n);

/* What a row reduction does with x's rows: buf holds rows rows of n
 * elements of dtype as (tg__dim_rows); it leaves row r's result at element
 * r of buf (which has room for them even when n is 0). */
typedef void (*tg__rows_fn)(void *arg, tg_dtype as, void *buf, int64_t rows, int64_t n);

/* The forward of a row reduction: a new tensor *out of x's dtype, the dims
 * in mask reduced (1 when keepdim, else gone), each element fn's result for
 * its row of x (as: TG_F64 or TG_I64, as tg__dim_rows).  With ctx, saves x
 * (slot 0) and, when save_out, the result as saved output (slot 1).  On
 * error (TG_ENOMEM, or a save's) *out is not set. */
int tg__dim_rows_reduce(tg_op_ctx *ctx, tg_tensor **out, tg_tensor *x, unsigned mask,
                        bool keepdim, tg_dtype as, tg__rows_fn fn, void *arg, bool save_out);

/* A row reduction in double, for tg__dim_rows_reduce with as TG_F64: fn
 * of each row of n elements and arg, called with (NULL, 0, arg) for rows
 * of no elements; the rows run in parallel when there are many elements.
 * Pass tg__rows_f64 as the fn and a tg__rows_f64_job as its arg. */
typedef double (*tg__row_f64_fn)(const double *row, int64_t n, const void *arg);
typedef struct tg__rows_f64_job {
    tg__row_f64_fn fn;
    const void *arg;
    double *v;   /* set by tg__rows_f64: the rows, each result in its row's first slot */
    int64_t n;
} tg__rows_f64_job;
void tg__rows_f64(void *job, tg_dtype as, void *buf, int64_t rows, int64_t n);

/* The elements of x that equal their row's result in y (y has the shape
 * of x reduced over mask, the reduced dims kept or not), as new tensors of
 * dtype dt: the 0/1 mask *m of x's shape and the count of hits in each row
 * *c (the kept shape).  With abs, |x| is compared; with nan_ties a NaN
 * element hits a NaN result.  amax's and the inf-norms' gradients share
 * the row's among these.  TG_ENOMEM. */
int tg__tie_mask(const tg_tensor *x, const tg_tensor *y, unsigned mask, bool nan_ties, bool abs,
                 tg_dtype dt, tg_tensor **m, tg_tensor **c);

#endif
