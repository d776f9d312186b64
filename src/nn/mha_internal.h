/* src/nn/mha_internal.h - MultiheadAttention's inference path
 * (multihead_attention_fast.c), which multihead_attention.c takes for
 * self-attention when no gradient, no weights and no dropout draws. */
#ifndef TAPEGRAD_NN_MHA_INTERNAL_H
#define TAPEGRAD_NN_MHA_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "tapegrad/attention.h"
#include "tapegrad/nn.h"
#include "tapegrad/tensor.h"

/* *out (new) = MultiheadAttention m's forward of query = key = value = x
 * (x's layout: (N, L, E) with batch_first, (L, N, E), or (L, E)
 * unbatched), as torch's step by step path computes it, with the packed
 * in_proj_weight (3E, E) and in_proj_bias:
 *   P = x (T, E) @ in_proj_weight^T + in_proj_bias    (T, 3E), one GEMM
 *   q, k, v = strided (N, H, L, d) views of P's thirds (no copies)
 *   O = attention(q, k, v, mask), written as (T, E) in x's row order
 *   out = out_proj(O)                                  (T, E), x's shape
 * where T = N L rows in x's order.  mask: make_mask's (1 or N*H, L or 1,
 * S) or NULL.  Only when tg__attention_fast_applies holds for x and no
 * parameter needs a gradient (the caller's check). */
int tg__nn_mha_self_fast(tg_tensor **out, tg_module *m, tg_tensor *x, tg_tensor *mask,
                         int64_t heads, bool batch_first);

/* The same up to out_proj: *out (new) = O (T, E), contiguous, the heads'
 * outputs in x's row order (x's contiguous copy when x is strided), which
 * out_proj takes as its input. */
int tg__nn_mha_self_heads(tg_tensor **out, tg_module *m, tg_tensor *x, tg_tensor *mask,
                          int64_t heads, bool batch_first);

/* The number of fused self-attentions (tg__nn_mha_self_fast and
 * tg__nn_mha_self_heads calls) that this thread has made. */
uint64_t tg__nn_mha_self_fast_calls(void);

/* For a module that runs MultiheadAttention m's self-attention of x itself
 * (src/nn/transformer_fast.c): the forward's checks of x as query, key and
 * value and of fo's masks (its errors), then *fused: whether the fused
 * self-attention applies (the forward's own rule, no weights wanted). */
int tg__nn_mha_self_check(tg_module *m, tg_tensor *x, const tg_nn_mha_forward_opts *fo,
                          bool *fused);
/* *out (new) = tg__nn_mha_self_heads of x with fo's masks merged as the
 * forward merges them; only after tg__nn_mha_self_check said fused. */
int tg__nn_mha_self_attend(tg_tensor **out, tg_module *m, tg_tensor *x,
                           const tg_nn_mha_forward_opts *fo);

#endif
