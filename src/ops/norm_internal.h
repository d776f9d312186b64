/* src/ops/norm_internal.h - what the batch_norm files share (prefix tg__bn):
 * the op's parameters, its create_graph backward (norm_backward_ops.c), its
 * statistics kernel (which layer_norm.c's rows use too) and a switch for
 * tests. */
#ifndef TAPEGRAD_OPS_NORM_INTERNAL_H
#define TAPEGRAD_OPS_NORM_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "autograd/tape.h"

/* x as (N, C, S): C channels of N rows of S contiguous values. */
typedef struct tg__bn_geom {
    int64_t n, c, s;
} tg__bn_geom;

/* The mean and biased variance of each channel c of x (contiguous, of
 * dtype cdt: f32 or f64) into mean[c] and var[c]: sums in double with four
 * interleaved accumulators in a fixed order, channels shared out among the
 * threads, so the results do not depend on the thread count.  Every channel
 * must hold at least one value (N * S > 0). */
void tg__bn_stats(tg_dtype cdt, const void *x, tg__bn_geom g, double *mean, double *var);

typedef struct tg__bn_params {
    double momentum, eps;
    bool training;
    /* forward only: the running buffers read (eval) or updated (training) */
    tg_tensor *running_mean, *running_var;
} tg__bn_params;

/* batch_norm's gradients as differentiable ops (create_graph): g = dL/dy,
 * x, w (or NULL), mean and invstd (C,) are the node's saved tensors
 * (borrowed).  Sets gin[0] (dx), gin[1] (dweight) and gin[2] (dbias), each
 * a new reference, for the inputs whose gradient the node needs; on error
 * returns a negative status, and the caller releases what was set. */
int tg__bn_backward_ops(tg_ctx *ctx, const tg__bn_params *p, tg_tensor *g, tg_tensor *x,
                        tg_tensor *w, tg_tensor *mean, tg_tensor *invstd, tg_tensor **gin);

/* Tests: false makes batch_norm on this thread take its per-channel loops
 * for rows shorter than 16 values too, instead of blocks of channels (true,
 * the default, restores). */
void tg__bn_set_blocks(bool on);

#endif
