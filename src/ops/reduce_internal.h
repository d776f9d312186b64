/* src/ops/reduce_internal.h - the reduction kernels reduce.c shares with
 * reduce_float.c and reduce_int.c, and the argument checks of the
 * reductions over dims (reduce.c, amax.c, var.c). */
#ifndef TAPEGRAD_OPS_REDUCE_INTERNAL_H
#define TAPEGRAD_OPS_REDUCE_INTERNAL_H

#include "core/core.h"

/* Sum of an integer tensor a into a new int64 tensor (ndim, shape), exact
 * and wrapping as torch's; ostride as in reduce.c (0 for a reduced dim,
 * else the output's contiguous stride).  src/ops/reduce_int.c. */
int tg__reduce_int(tg_tensor **out, const tg_tensor *a, int ndim, const int64_t *shape,
                   const int64_t *ostride);
/* Sum of a float tensor a into a new tensor (ndim, shape) of a's dtype,
 * times scale; ostride as for tg__reduce_int.  src/ops/reduce_float.c. */
int tg__reduce_float(tg_tensor **out, const tg_tensor *a, int ndim, const int64_t *shape,
                     const int64_t *ostride, double scale);
/* The sum in double of the n contiguous f32 values of x in 32 interleaved
 * lanes that meet pairwise (reduce_float.c's order for runs of 64 or
 * more), at this thread's width of the double-lane kernels
 * (softmax_rows_internal.h's tg__exp_width_get; tests force it with
 * tg__exp_width_force): plain, AVX2 and AVX-512 give the same bits. */
double tg__reduce_lanes_f32(const float *x, int64_t n);
/* The arguments of a reduction over dims (op's name; its input x, named
 * xname in the messages), checked before the call's params are made:
 * TG_EINVAL naming op for a NULL out or x, ndims outside [0, TG_MAX_DIMS],
 * or NULL dims when ndims > 0.  Then sets *pndims = ndims and copies
 * dims[0..ndims) to pdims (the params' fields).  src/ops/reduce.c. */
int tg__dims_args(const char *op, const char *xname, tg_tensor **out, const tg_tensor *x,
                  int ndims, const int *dims, int *pndims, int *pdims);
/* One step of the reductions' row-major walk over a: advances the counter
 * idx (a->ndim entries, all 0 at the start) and returns the output index o
 * moved with it, ostride[d] being o's step along dim d (reduce_float.c,
 * reduce_int.c). */
static inline int64_t tg__reduce_next(const tg_tensor *a, const int64_t *ostride, int64_t *idx,
                                      int64_t o)
{
    for (int d = a->ndim - 1; d >= 0; d--) {
        o += ostride[d];
        if (++idx[d] < a->shape[d]) break;
        o -= ostride[d] * a->shape[d];
        idx[d] = 0;
    }
    return o;
}

#endif
