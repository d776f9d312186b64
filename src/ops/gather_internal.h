/* src/ops/gather_internal.h - the kernels of the indexing ops
 * (src/ops/gather_run.c) that src/ops/gather.c calls: the picks (gather,
 * index_select) and the adds (scatter_add, index_add), read through x's
 * strides and shared among threads over disjoint elements of the result. */
#ifndef TAPEGRAD_OPS_GATHER_INTERNAL_H
#define TAPEGRAD_OPS_GATHER_INTERNAL_H

#include <stdbool.h>

#include "core/core.h"

/* The gather-shaped work of every op: the positions p of ishape (the
 * index's shape, or x's with the index's length at dim for index_select
 * and index_add), each naming x's element with p's coordinates and the
 * index value at dim: v[p] (per_pos) or v[p's coordinate at dim].  A 0-d
 * x counts as shape (1,) with stride 0. */
typedef struct tg__pick {
    const tg_tensor *x;
    int nd, dim;
    bool per_pos;
    bool checks;   /* the kernels check v as they read it (per_pos only) */
    int64_t xshape[TG_MAX_DIMS], xstrides[TG_MAX_DIMS], ishape[TG_MAX_DIMS];
    int64_t m;     /* numel of ishape */
    const int64_t *v;   /* the index values, each in [0, xshape[dim]); the caller's */
} tg__pick;

/* k's x, dim, per_pos, x's shape and strides and the positions' shape
 * ishape (ndim as x's; 1 for a 0-d x) and count; k->v is left NULL. */
void tg__pick_init(tg__pick *k, const tg_tensor *x, int dim, bool per_pos,
                   const int64_t *ishape);
/* *out (oshape, ond dims: numel k->m; x's dtype) = x's elements at k's
 * positions, their bits copied.  TG_ENOMEM; with k->checks, TG_EINVAL
 * with no message and no result when a value of k->v is out of range. */
int tg__pick_gather(const tg__pick *k, int ond, const int64_t *oshape, tg_tensor **out);
/* *out (x's shape and dtype) = x with src's element p (src has the shape
 * k->ishape and x's dtype, any strides) added at position p, each
 * element's terms in p's order, rounded to x's dtype at each term (f16
 * and bf16: added in f32, then rounded).  TG_ENOMEM; with k->checks,
 * TG_EINVAL with no message and no result when a value of k->v is out of
 * range. */
int tg__pick_scatter_add(const tg__pick *k, const tg_tensor *src, tg_tensor **out);

#endif
