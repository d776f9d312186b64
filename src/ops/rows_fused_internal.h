/* src/ops/rows_fused_internal.h - row kernels for inference paths that fuse
 * a Linear's bias, an activation, a residual add and a LayerNorm into the
 * passes around a GEMM (src/ops/rows_fused.c; src/nn/transformer_fast.c
 * runs TransformerEncoderLayer on them).  Nothing is recorded: every tensor
 * here is f32 or f64, contiguous, of one dtype, and written in place
 * without a version bump (tensors the caller has just made). */
#ifndef TAPEGRAD_OPS_ROWS_FUSED_INTERNAL_H
#define TAPEGRAD_OPS_ROWS_FUSED_INTERNAL_H

#include <stdint.h>

#include "tapegrad/conv.h"   /* tg_activation */
#include "tapegrad/tensor.h"

/* y (rows, out) = act(x (rows, in) @ w (out, in)^T + b): one GEMM of the
 * library's BLAS glue (beta 0), then one pass over y adding b (NULL: none)
 * and applying act (TG_ACT_NONE, TG_ACT_RELU or TG_ACT_GELU, as tg_relu and
 * tg_gelu compute them) to each row in place.  y is a tensor the caller
 * made; TG_EUNSUPPORTED for an extent above INT_MAX. */
int tg__linear_act_into(tg_tensor *y, const tg_tensor *x, const tg_tensor *w,
                        const tg_tensor *b, tg_activation act);

/* One pass over the rows of h (rows, n), each row at once:
 *   s = res + (h + bias)       each sum rounded to the dtype, as tg_add's;
 *                              without bias or res that term is left out
 *   sum = s                    when sum is not NULL (it may be h)
 *   ln = layer_norm(s, weight, ln_bias, eps)   when ln is not NULL (it may
 *                              be h or sum): the statistics in double as
 *                              tg_layer_norm's (its sums' order), so the
 *                              bits of its kernel.
 * weight and ln_bias (n) may be NULL (no affine).  Every tensor (rows, n)
 * or (n), contiguous, of h's dtype. */
typedef struct tg__add_norm_rows {
    tg_tensor *h;
    const tg_tensor *bias, *res;
    tg_tensor *sum;
    const tg_tensor *weight, *ln_bias;
    double eps;
    tg_tensor *ln;
} tg__add_norm_rows;
void tg__add_norm_rows_run(const tg__add_norm_rows *a);

#endif
