/* src/nn/mha_internal.h - MultiheadAttention's inference path
 * (multihead_attention_fast.c), which multihead_attention.c takes for
 * self-attention and attention over a memory (key = value) when no
 * gradient, no weights and no dropout draws. */
#ifndef TAPEGRAD_NN_MHA_INTERNAL_H
#define TAPEGRAD_NN_MHA_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "tapegrad/attention.h"
#include "tapegrad/nn.h"
#include "tapegrad/tensor.h"

/* *out (new) = MultiheadAttention m's forward of query q and key = value
 * = kv (kv == q: self-attention; q's layout: (N, L, E) with batch_first,
 * (L, N, E), or (L, E) unbatched; kv's the same with S positions), as
 * torch's step by step path computes it, with the packed in_proj_weight
 * (3E, E) and in_proj_bias:
 *   self:  P = q (T, E) @ in_proj_weight^T + in_proj_bias     (T, 3E), one GEMM
 *   cross: Pq = q's rows with in_proj_weight's first E rows    (T, E)
 *          Pkv = kv's rows with its last 2E rows               (N S, 2E)
 *   q, k, v = strided (N, H, ., d) views of their columns (no copies)
 *   O = attention(q, k, v, mask), written as (T, E) in q's row order
 *   out = out_proj(O)                                  (T, E), q's shape
 * where T = N L rows in q's order.  mask: make_mask's (1 or N*H, L or 1,
 * S) or NULL.  Inside autocast of a half dtype, f32 q and kv are
 * projected to it (the linears cast them) and the rest runs in it.  Only
 * when tg__attention_fast_applies_as holds for (q, kv, kv) in that dtype
 * and no parameter needs a gradient (the caller's check). */
int tg__nn_mha_fast(tg_tensor **out, tg_module *m, tg_tensor *q, tg_tensor *kv, tg_tensor *mask,
                    int64_t heads, bool batch_first);

/* The same up to out_proj: *out (new) = O (T, E), contiguous, the heads'
 * outputs in q's row order, which out_proj takes as its input. */
int tg__nn_mha_heads(tg_tensor **out, tg_module *m, tg_tensor *q, tg_tensor *kv,
                     tg_tensor *mask, int64_t heads, bool batch_first);

/* The number of fused self-attentions (kv == q) and of fused attentions
 * over another tensor (tg__nn_mha_fast and tg__nn_mha_heads calls) that
 * this thread has made. */
uint64_t tg__nn_mha_self_fast_calls(void);
uint64_t tg__nn_mha_cross_fast_calls(void);

/* For a module that runs MultiheadAttention m's attention of query q over
 * key = value = kv itself (src/nn/transformer_fast.c; kv == q for
 * self-attention): the forward's checks of q, kv, kv and of fo's masks
 * (its errors), then *fused: whether the fused attention applies (the
 * forward's own rule, no weights wanted). */
int tg__nn_mha_fast_check(tg_module *m, tg_tensor *q, tg_tensor *kv,
                          const tg_nn_mha_forward_opts *fo, bool *fused);
/* *out (new) = tg__nn_mha_heads of q and kv with fo's masks merged as the
 * forward merges them; only after tg__nn_mha_fast_check said fused. */
int tg__nn_mha_attend(tg_tensor **out, tg_module *m, tg_tensor *q, tg_tensor *kv,
                      const tg_nn_mha_forward_opts *fo);

#endif
