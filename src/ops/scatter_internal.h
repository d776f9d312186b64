/* src/ops/scatter_internal.h - what src/ops/scatter.c (scatter, the
 * writes by index) shares with src/ops/scatter_reduce.c (scatter_reduce,
 * its reductions and their gradients): the argument checks and the walk
 * over the index's positions. */
#ifndef TAPEGRAD_OPS_SCATTER_INTERNAL_H
#define TAPEGRAD_OPS_SCATTER_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "core/core.h"

/* The params block of the three ops: value first, scatter_value's scalar
 * operand (tg_op_schema.scalar). */
typedef struct tg__scatter_params {
    double value;       /* scatter_value's, converted to x's dtype */
    int dim;            /* in [0, max(ndim, 1)) */
    int reduce;         /* a tg_scatter_reduce_op (scatter_reduce) */
    bool include_self;  /* scatter_reduce */
} tg__scatter_params;

/* The positions of an index (shape ishape, nd dims, a 0-d index read as
 * (1,)) in row-major order, each naming the element of the contiguous
 * result (x's shape) with the position's coordinates and the index value
 * v[p] at dim.  Positions that differ outside dim name different
 * elements, so the lines along dim can go to different threads. */
typedef struct tg__scatter_walk {
    int nd, dim;
    int64_t ishape[TG_MAX_DIMS];
    int64_t ostrides[TG_MAX_DIMS];   /* the result's, contiguous in x's shape */
    int64_t m;                       /* positions: numel of the index */
    const int64_t *v;                /* index values, contiguous, in range */
} tg__scatter_walk;

/* op's checks of (x, dim, index, src) as torch's scatter: x and src float
 * of one dtype (src may be NULL: the value form), index i64 with x's
 * ndim, index.size(d) <= x.size(d) for d != dim, src of index's shape.
 * dim is already normalised.  TG_EDTYPE / TG_ESHAPE naming the argument. */
int tg__scatter_check(const char *op, const tg_tensor *x, int dim, const tg_tensor *idx,
                      const tg_tensor *src);
/* Reads the index into w (v a copy when it is not contiguous: *owned,
 * which the caller frees; NULL otherwise) for x and dim, and checks each
 * value is in [0, x.size(dim)): TG_EINVAL naming the first bad position,
 * its value and the extent.  TG_ENOMEM. */
int tg__scatter_walk_init(const char *op, tg__scatter_walk *w, const tg_tensor *x, int dim,
                          const tg_tensor *idx, int64_t **owned);
/* body(ctx, lo, hi) over the lines [lo, hi) of w, on the thread pool when
 * w has many positions.  Line l holds the positions p = base(l) + j *
 * step, j < len, each writing element out(p) = obase(l) + v[p] *
 * ostrides[dim]; tg__scatter_line gives base, step, len and obase. */
int64_t tg__scatter_lines(const tg__scatter_walk *w);
void tg__scatter_line(const tg__scatter_walk *w, int64_t l, int64_t *base, int64_t *step,
                      int64_t *len, int64_t *obase);
void tg__scatter_run(const tg__scatter_walk *w, void (*body)(void *ctx, int64_t lo, int64_t hi),
                     void *ctx);
/* The element of the result that position p = base + j * step writes. */
static inline int64_t tg__scatter_target(const tg__scatter_walk *w, int64_t obase, int64_t p)
{
    return obase + w->v[p] * w->ostrides[w->dim];
}

/* tg_scatter_value through its schema (differentiable in x), dim already
 * normalised and the arguments checked: the backwards' masking of g. */
int tg__scatter_value_call(tg_tensor **out, tg_tensor *x, int dim, tg_tensor *idx, double v);

#endif
