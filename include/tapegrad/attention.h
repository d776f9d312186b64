/* tapegrad/attention.h - scaled dot-product attention, nn.MultiheadAttention
 * and the Transformer family (nn.TransformerEncoderLayer,
 * TransformerEncoder, TransformerDecoderLayer, TransformerDecoder,
 * Transformer) as PyTorch 1.13 has them
 * (torch.nn.functional.multi_head_attention_forward, torch.nn.*).
 *
 *   tg_module *mha;
 *   tg_nn_multihead_attention_opts o = TG_NN_MULTIHEAD_ATTENTION_OPTS_INIT;
 *   o.batch_first = true;
 *   tg_nn_multihead_attention_new(&mha, 16, 4, &o, &rng);  // E = 16, 4 heads
 *   tg_nn_multihead_attention_forward(mha, &y, &w, x, x, x, NULL);
 *   // x (N, L, 16) -> y (N, L, 16), w (N, L, L): self-attention
 *
 * Both are made of differentiable ops (linear, matmul, softmax, masked_fill,
 * dropout, reshapes), so their gradients are differentiable to any order.
 * For inference (no gradient recorded, no weights wanted, no dropout drawn)
 * the attention itself runs as one fused kernel, blocks of query rows on
 * the thread pool, with the same results to a few ulps; TG_ATTENTION_FAST=0
 * in the environment turns it off.
 * Masks: tapegrad has no bool dtype; a u8 mask is torch's bool mask, nonzero
 * meaning "may not attend" (-inf added to the score); a float mask (of the
 * inputs' dtype) is added to the scores as it is.
 *
 * Outputs are new references; inputs and masks are borrowed.  On error a
 * negative tg_status and a message naming the argument and the rule; the
 * outputs are left untouched.
 */
#ifndef TAPEGRAD_ATTENTION_H
#define TAPEGRAD_ATTENTION_H

#include <stdbool.h>
#include <stdint.h>

#include "tapegrad/export.h"
#include "tapegrad/nn.h"
#include "tapegrad/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The optional parts of tg_scaled_dot_product_attention. */
typedef struct tg_attention_opts {
    tg_tensor *attn_mask;   /* borrowed; NULL: none.  u8 (nonzero: -inf) or a
                             * float of q's dtype (added), broadcast to the
                             * scores' shape (..., L, S) */
    double dropout_p;       /* in [0, 1]: applied to the weights in training */
    bool training;          /* false: no dropout (rng may be NULL) */
    tg_rng *rng;            /* draws the dropout mask (tg_dropout) */
} tg_attention_opts;
#define TG_ATTENTION_OPTS_INIT {NULL, 0.0, false, NULL}

/* Scaled dot-product attention, as torch 1.13's
 * F._scaled_dot_product_attention inside multi_head_attention_forward:
 *   a = softmax(q / sqrt(E) @ k^T + mask, dim=-1), a = dropout(a),
 *   out = a @ v
 * q (..., L, E), k (..., S, E), v (..., S, Ev), with the same 0, 1 or 2
 * leading dims ((L, E), (B*heads, L, E) or (B, heads, L, E)) and the same
 * float dtype; out is (..., L, Ev).  weights (may be NULL: not wanted)
 * receives a, (..., L, S), after dropout, as torch returns it.  A row whose
 * every score is -inf gives NaN, as in torch.  opts NULL: no mask, no
 * dropout.  TG_EINVAL for a NULL out, q, k or v, dropout_p outside [0, 1]
 * or a NULL rng where dropout draws; TG_ESHAPE for shapes that do not fit
 * (a mask that does not broadcast to (..., L, S) included); TG_EDTYPE for
 * integer or mixed dtypes, or a mask neither u8 nor of q's dtype.  Inside
 * an autocast scope any float dtypes are taken and the products run in
 * the autocast dtype (tg_matmul's LOWER_PRECISION policy).  With weights
 * NULL, no dropout drawn (not training, or dropout_p 0), operands of one
 * float dtype (outside autocast any; inside autocast of bf16 or f16 that
 * dtype, or f32, cast as the products cast them), and grad mode off or
 * none of q, k, v and the mask requiring grad, one fused kernel computes
 * out without recording anything or making the (..., L, S) weights, with
 * the ops' roundings (docs/autograd.md; TG_ATTENTION_FAST=0 in the
 * environment: the ops above). */
TG_API int tg_scaled_dot_product_attention(tg_tensor **out, tg_tensor **weights, tg_tensor *q,
                                           tg_tensor *k, tg_tensor *v,
                                           const tg_attention_opts *opts);

/* nn.MultiheadAttention's options beside embed_dim and num_heads, torch's
 * defaults in the _INIT macro. */
typedef struct tg_nn_multihead_attention_opts {
    double dropout;         /* on the attention weights, in training */
    bool bias;              /* in_proj_bias and out_proj.bias */
    bool add_bias_kv;       /* bias_k, bias_v (1, 1, E) appended to k, v */
    bool add_zero_attn;     /* a zero key and value appended per head */
    int64_t kdim, vdim;     /* key's and value's features (0: embed_dim) */
    bool batch_first;       /* inputs (N, L, E) instead of (L, N, E) */
    uint64_t seed;          /* the dropout masks' generator, as Dropout's */
} tg_nn_multihead_attention_opts;
#define TG_NN_MULTIHEAD_ATTENTION_OPTS_INIT {0.0, true, false, false, 0, 0, false, 0}

/* nn.MultiheadAttention(embed_dim, num_heads, ...) (type name
 * "MultiheadAttention"; opts NULL: torch's defaults).  Parameters, with
 * torch's names, shapes and state-dict order (E = embed_dim):
 *   in_proj_weight (3E, E) when kdim = vdim = E, else q_proj_weight (E, E),
 *     k_proj_weight (E, kdim), v_proj_weight (E, vdim);
 *   in_proj_bias (3E) with bias;  bias_k, bias_v (1, 1, E) with add_bias_kv;
 *   out_proj.weight (E, E), out_proj.bias (E) (bias only): a Linear child.
 * Initialised as torch's _reset_parameters, drawn from rng: xavier_uniform_
 * for the projection weights, 0 for in_proj_bias and out_proj.bias,
 * xavier_normal_ for bias_k and bias_v, and Linear's default for
 * out_proj.weight (the same laws as torch, not its numbers: load a state
 * dict for those).  Parameters are f32 (tg_module_to_dtype converts).
 * The attention dropout of the k-th training forward depends only on
 * (seed, k), as Dropout's masks; eval (tg_module_train(m, false)) has none.
 * tg_module_forward_n(m, &y, 3, (tg_tensor *[]){q, k, v}) gives the output
 * of the forward below without masks.  TG_EINVAL for a NULL out or rng,
 * embed_dim or num_heads < 1, embed_dim not divisible by num_heads, a
 * negative kdim or vdim, dropout outside [0, 1]. */
TG_API int tg_nn_multihead_attention_new(tg_module **out, int64_t embed_dim, int64_t num_heads,
                                         const tg_nn_multihead_attention_opts *opts,
                                         tg_rng *rng);

/* The optional inputs of MultiheadAttention.forward. */
typedef struct tg_nn_mha_forward_opts {
    tg_tensor *key_padding_mask;   /* borrowed; NULL: none.  (N, S), or (S)
                                    * unbatched: u8, nonzero keys ignored, or
                                    * a float of query's dtype, added */
    tg_tensor *attn_mask;          /* borrowed; NULL: none.  u8 or float of
                                    * query's dtype, (L, S) or (N*heads, L, S) */
    bool average_attn_weights;     /* weights averaged over heads */
} tg_nn_mha_forward_opts;
#define TG_NN_MHA_FORWARD_OPTS_INIT {NULL, NULL, true}

/* MultiheadAttention.forward(query, key, value, key_padding_mask,
 * need_weights, attn_mask, average_attn_weights): query (L, N, E),
 * key (S, N, kdim), value (S, N, vdim) ((N, L, E) ... with batch_first), or
 * unbatched (L, E), (S, kdim), (S, vdim); all of the parameters' float
 * dtype.  *out is (L, N, E) ((N, L, E) with batch_first; (L, E)
 * unbatched).  weights NULL is torch's need_weights=False; otherwise it
 * receives the attention weights after dropout, (N, L, S') averaged over
 * the heads or (N, heads, L, S') (without N unbatched), S' = S plus 1 for
 * add_bias_kv and 1 for add_zero_attn.  opts NULL: no masks, averaged
 * weights.  A float attn_mask is added to the scores; a u8 one puts -inf
 * where nonzero.  The key_padding_mask is merged in as torch 1.13 does: a
 * u8 one puts -inf where nonzero; a float one is added (its gradient flows
 * back to it), except beside a u8 attn_mask, where torch or-s the two as
 * bools, so it puts -inf where nonzero.  A float key_padding_mask beside a
 * float attn_mask (torch 1.13 fails on it, reading the float mask as bool)
 * is added to it, as torch 2 merges them.  Errors as torch's checks:
 * TG_EINVAL for a NULL argument or m not a MultiheadAttention; TG_ESHAPE
 * for ranks and extents that do not fit (named); TG_EDTYPE for inputs not
 * of the parameters' dtype or masks of other dtypes.  Inside an autocast
 * scope the inputs and a float attn_mask may have any float dtype, and the
 * projections and products run in the autocast dtype, as torch's CPU
 * autocast (the output is of that dtype; the parameters' gradients come
 * back in theirs).  On error *out and *weights are untouched. */
TG_API int tg_nn_multihead_attention_forward(tg_module *m, tg_tensor **out, tg_tensor **weights,
                                             tg_tensor *query, tg_tensor *key, tg_tensor *value,
                                             const tg_nn_mha_forward_opts *opts);
/* What a MultiheadAttention was made with.  Out-pointers may be NULL;
 * TG_EINVAL for a NULL m or, naming its type, another module. */
TG_API int tg_nn_multihead_attention_params(const tg_module *m, int64_t *embed_dim,
                                            int64_t *num_heads,
                                            tg_nn_multihead_attention_opts *opts);

/* nn.TransformerEncoderLayer's options beside d_model and nhead, torch's
 * defaults in the _INIT macro. */
typedef struct tg_nn_transformer_encoder_layer_opts {
    int64_t dim_feedforward;   /* linear1's outputs */
    double dropout;            /* self_attn's, dropout's, dropout1's, dropout2's p */
    tg_activation activation;  /* TG_ACT_RELU or TG_ACT_GELU (torch's "relu", "gelu") */
    double layer_norm_eps;
    bool batch_first;          /* src (N, S, E) instead of (S, N, E) */
    bool norm_first;           /* pre-norm: x + block(norm(x)) */
    uint64_t seed;             /* self_attn's dropout seed; the Dropout children
                                * "dropout", "dropout1", "dropout2" take seed + 1,
                                * + 2, + 3 */
} tg_nn_transformer_encoder_layer_opts;
#define TG_NN_TRANSFORMER_ENCODER_LAYER_OPTS_INIT {2048, 0.1, TG_ACT_RELU, 1e-5, false, false, 0}

/* nn.TransformerEncoderLayer(d_model, nhead, ...) (type name
 * "TransformerEncoderLayer"; opts NULL: torch's defaults), with torch's
 * children and state-dict keys: self_attn (a MultiheadAttention),
 * linear1 (d_model -> dim_feedforward), dropout, linear2, norm1, norm2 (a
 * LayerNorm(d_model) each), dropout1, dropout2, and the activation (a
 * parameter-free child "activation"), initialised in torch's order from
 * rng.  Its forward (torch's; in eval with no gradient recorded the layer
 * runs fused, as torch's fast path, with the same results to a few ulps;
 * TG_ENCODER_FAST=0 in the environment turns that off):
 *   norm_first:  x = x + sa(norm1(x));  x = x + ff(norm2(x))
 *   otherwise:   x = norm1(x + sa(x));  x = norm2(x + ff(x))
 * with sa(x) = dropout1(self_attn(x, x, x, src_mask, src_key_padding_mask))
 * and ff(x) = dropout2(linear2(dropout(activation(linear1(x))))).
 * tg_module_forward(m, &y, src) runs it without masks, and
 * tg_module_forward_n takes (src), (src, src_mask) or (src, src_mask,
 * src_key_padding_mask), as tg_nn_transformer_encoder_layer_forward.
 * TG_EINVAL for a NULL out or rng, d_model or nhead < 1, d_model not
 * divisible by nhead, dim_feedforward < 1, dropout outside [0, 1], an
 * activation other than ReLU and GELU, layer_norm_eps not > 0. */
TG_API int tg_nn_transformer_encoder_layer_new(tg_module **out, int64_t d_model, int64_t nhead,
                                               const tg_nn_transformer_encoder_layer_opts *opts,
                                               tg_rng *rng);
/* What a TransformerEncoderLayer was made with (opts as given, or torch's
 * defaults).  Out-pointers may be NULL; TG_EINVAL for a NULL m or, naming
 * its type, another module. */
TG_API int tg_nn_transformer_encoder_layer_params(const tg_module *m, int64_t *d_model,
                                                  int64_t *nhead,
                                                  tg_nn_transformer_encoder_layer_opts *opts);
/* TransformerEncoderLayer.forward(src, src_mask, src_key_padding_mask):
 * src (S, N, E) ((N, S, E) with batch_first, (S, E) unbatched); the masks
 * (NULL: none) as MultiheadAttention's attn_mask and key_padding_mask.
 * *out has src's shape.  Errors as tg_nn_multihead_attention_forward's
 * (the messages name the layer's src); on error *out is untouched. */
TG_API int tg_nn_transformer_encoder_layer_forward(tg_module *m, tg_tensor **out, tg_tensor *src,
                                                   tg_tensor *src_mask,
                                                   tg_tensor *src_key_padding_mask);

/* ---- the rest of torch's Transformer family ----
 *
 * The masks of the decoder and Transformer forwards (all borrowed; NULL:
 * none), each as MultiheadAttention's attn_mask (u8, nonzero: may not
 * attend; or a float of the inputs' dtype, added) or key_padding_mask (u8
 * or float, (N, len) or (len) unbatched): src_mask (S, S) or
 * (N*nhead, S, S), tgt_mask (T, T) or (N*nhead, T, T), memory_mask (T, S)
 * or (N*nhead, T, S).  A decoder (layer) takes the tgt_ and memory_ ones
 * and refuses src_ ones (TG_EINVAL). */
typedef struct tg_nn_transformer_masks {
    tg_tensor *src_mask, *tgt_mask, *memory_mask;
    tg_tensor *src_key_padding_mask, *tgt_key_padding_mask, *memory_key_padding_mask;
} tg_nn_transformer_masks;
#define TG_NN_TRANSFORMER_MASKS_INIT {NULL, NULL, NULL, NULL, NULL, NULL}

/* nn.TransformerDecoderLayer's options beside d_model and nhead, torch's
 * defaults in the _INIT macro (the encoder layer's fields). */
typedef struct tg_nn_transformer_decoder_layer_opts {
    int64_t dim_feedforward;   /* linear1's outputs */
    double dropout;            /* every attention's and Dropout child's p */
    tg_activation activation;  /* TG_ACT_RELU or TG_ACT_GELU */
    double layer_norm_eps;
    bool batch_first;          /* tgt (N, T, E), memory (N, S, E) */
    bool norm_first;           /* pre-norm: x + block(norm(x)) */
    uint64_t seed;             /* self_attn's dropout seed; multihead_attn
                                * takes seed + 1, the Dropout children
                                * "dropout", "dropout1", "dropout2",
                                * "dropout3" seed + 2, ..., + 5 */
} tg_nn_transformer_decoder_layer_opts;
#define TG_NN_TRANSFORMER_DECODER_LAYER_OPTS_INIT {2048, 0.1, TG_ACT_RELU, 1e-5, false, false, 0}

/* nn.TransformerDecoderLayer(d_model, nhead, ...) (type name
 * "TransformerDecoderLayer"; opts NULL: torch's defaults), with torch's
 * children and state-dict keys: self_attn, multihead_attn (a
 * MultiheadAttention each), linear1 (d_model -> dim_feedforward), dropout,
 * linear2, norm1, norm2, norm3 (a LayerNorm(d_model) each), dropout1,
 * dropout2, dropout3 and the parameter-free child "activation",
 * initialised in torch's order from rng.  Its forward (torch's; in eval
 * with no gradient recorded the layer runs fused as the encoder layer, its
 * attention over the memory too, with the same results to a few ulps;
 * TG_DECODER_FAST=0 in the environment turns that off):
 *   norm_first:  x = x + sa(norm1(x));  x = x + mha(norm2(x), mem);
 *                x = x + ff(norm3(x))
 *   otherwise:   x = norm1(x + sa(x));  x = norm2(x + mha(x, mem));
 *                x = norm3(x + ff(x))
 * with sa(x) = dropout1(self_attn(x, x, x, tgt_mask, tgt_key_padding_mask)),
 * mha(x, mem) = dropout2(multihead_attn(x, mem, mem, memory_mask,
 * memory_key_padding_mask)) and
 * ff(x) = dropout3(linear2(dropout(activation(linear1(x))))).
 * tg_module_forward_n(m, &y, 2, (tg_tensor *[]){tgt, memory}) runs it
 * without masks.  Errors as tg_nn_transformer_encoder_layer_new's. */
TG_API int tg_nn_transformer_decoder_layer_new(tg_module **out, int64_t d_model, int64_t nhead,
                                               const tg_nn_transformer_decoder_layer_opts *opts,
                                               tg_rng *rng);
/* What a TransformerDecoderLayer was made with.  Out-pointers may be NULL;
 * TG_EINVAL for a NULL m or, naming its type, another module. */
TG_API int tg_nn_transformer_decoder_layer_params(const tg_module *m, int64_t *d_model,
                                                  int64_t *nhead,
                                                  tg_nn_transformer_decoder_layer_opts *opts);
/* TransformerDecoderLayer.forward(tgt, memory, tgt_mask, memory_mask,
 * tgt_key_padding_mask, memory_key_padding_mask): tgt (T, N, E), memory
 * (S, N, E) ((N, T, E), (N, S, E) with batch_first; (T, E), (S, E)
 * unbatched), E = d_model; masks NULL: none.  *out has tgt's shape.
 * TG_EINVAL for a NULL m, out, tgt or memory, m of another type or a src_
 * mask given; TG_ESHAPE for tgt or memory of another rank or width (named)
 * and the attentions' errors (tg_nn_multihead_attention_forward: its query
 * is tgt, its key memory).  On error *out is untouched. */
TG_API int tg_nn_transformer_decoder_layer_forward(tg_module *m, tg_tensor **out, tg_tensor *tgt,
                                                   tg_tensor *memory,
                                                   const tg_nn_transformer_masks *masks);

/* nn.TransformerEncoder(encoder_layer, num_layers, norm) (type name
 * "TransformerEncoder"): a child "layers" (type name "ModuleList", no
 * forward) holding num_layers deep copies of encoder_layer (a
 * TransformerEncoderLayer, borrowed) named "0", "1", ..., as torch's
 * _get_clones, so every layer starts with encoder_layer's values (keys
 * layers.0.self_attn.in_proj_weight, ...); then, when norm is not NULL,
 * the child "norm" (norm itself, retained: the caller keeps its
 * reference; torch too takes the module as it is; any module with a
 * forward).  Copy i takes encoder_layer's seed + i * 2^32 (its children's
 * seeds follow from it as the layer's do, and the layer's params report
 * it), so each layer draws its own dropout masks, as torch's layers draw
 * fresh ones; layer 0 draws encoder_layer's masks.  tg_module_forward(m,
 * &y, src) runs the forward below without masks.  TG_EINVAL for a NULL out
 * or encoder_layer, encoder_layer not a TransformerEncoderLayer,
 * num_layers outside [1, 100000]; the errors of tg_module_copy.  On error
 * *out is untouched and norm keeps its count. */
TG_API int tg_nn_transformer_encoder_new(tg_module **out, const tg_module *encoder_layer,
                                         int64_t num_layers, tg_module *norm);
/* TransformerEncoder.forward(src, mask, src_key_padding_mask): each layer
 * in turn (tg_nn_transformer_encoder_layer_forward with the masks), then
 * norm.  Errors as that function's; TG_EINVAL for a NULL m, out or src or m
 * of another type.  On error *out is untouched. */
TG_API int tg_nn_transformer_encoder_forward(tg_module *m, tg_tensor **out, tg_tensor *src,
                                             tg_tensor *mask, tg_tensor *src_key_padding_mask);
/* nn.TransformerDecoder(decoder_layer, num_layers, norm) (type name
 * "TransformerDecoder"), as tg_nn_transformer_encoder_new with a
 * TransformerDecoderLayer.  tg_module_forward_n(m, &y, 2,
 * (tg_tensor *[]){tgt, memory}) runs its forward without masks. */
TG_API int tg_nn_transformer_decoder_new(tg_module **out, const tg_module *decoder_layer,
                                         int64_t num_layers, tg_module *norm);
/* TransformerDecoder.forward(tgt, memory, masks): each layer in turn
 * (tg_nn_transformer_decoder_layer_forward), then norm; errors as that
 * function's.  On error *out is untouched. */
TG_API int tg_nn_transformer_decoder_forward(tg_module *m, tg_tensor **out, tg_tensor *tgt,
                                             tg_tensor *memory,
                                             const tg_nn_transformer_masks *masks);
/* What a TransformerEncoder or TransformerDecoder holds: its number of
 * layers and whether it has a norm (out-pointers may be NULL).  TG_EINVAL
 * for a NULL m or, naming its type, another module. */
TG_API int tg_nn_transformer_stack_params(const tg_module *m, int64_t *num_layers,
                                          bool *has_norm);

/* nn.Transformer's options beside d_model and nhead, torch's defaults in
 * the _INIT macro (d_model 512, nhead 8 are tg_nn_transformer_new's
 * arguments). */
typedef struct tg_nn_transformer_opts {
    int64_t num_encoder_layers, num_decoder_layers;   /* each >= 1 */
    int64_t dim_feedforward;
    double dropout;
    tg_activation activation;  /* TG_ACT_RELU or TG_ACT_GELU */
    double layer_norm_eps;
    bool batch_first, norm_first;
    uint64_t seed;             /* the encoder layers' seed (as
                                * tg_nn_transformer_encoder_layer_opts'); the
                                * decoder layers take seed + 4; layer i of
                                * each stack + i * 2^32 */
} tg_nn_transformer_opts;
#define TG_NN_TRANSFORMER_OPTS_INIT {6, 6, 2048, 0.1, TG_ACT_RELU, 1e-5, false, false, 0}

/* nn.Transformer(d_model, nhead, ...) (type name "Transformer"; opts NULL:
 * torch's defaults): children encoder (a TransformerEncoder of
 * num_encoder_layers layers with a final LayerNorm "norm") and decoder (a
 * TransformerDecoder likewise), keys as torch's (encoder.layers.0...,
 * encoder.norm.weight, decoder.layers.0..., decoder.norm.bias).  Then
 * torch's _reset_parameters: every parameter of rank > 1, in state-dict
 * order, drawn afresh from rng by xavier_uniform_ (gain 1), so the layers
 * no longer share values; biases and norms keep their values (the same
 * laws as torch, not its numbers).  TG_EINVAL for a NULL out or rng,
 * num_encoder_layers or num_decoder_layers < 1 and the layers' errors
 * (tg_nn_transformer_encoder_layer_new's).  On error *out is untouched. */
TG_API int tg_nn_transformer_new(tg_module **out, int64_t d_model, int64_t nhead,
                                 const tg_nn_transformer_opts *opts, tg_rng *rng);
/* What a Transformer was made with.  Out-pointers may be NULL; TG_EINVAL
 * for a NULL m or, naming its type, another module. */
TG_API int tg_nn_transformer_params(const tg_module *m, int64_t *d_model, int64_t *nhead,
                                    tg_nn_transformer_opts *opts);
/* Transformer.forward(src, tgt, masks): memory = encoder(src, src_mask,
 * src_key_padding_mask), *out = decoder(tgt, memory, tgt_mask,
 * memory_mask, tgt_key_padding_mask, memory_key_padding_mask).  src
 * (S, N, E), tgt (T, N, E) ((N, S, E), (N, T, E) with batch_first; (S, E),
 * (T, E) unbatched).  masks NULL: none.  tg_module_forward_n(m, &y, 2,
 * (tg_tensor *[]){src, tgt}) runs it without masks.  TG_EINVAL for a NULL
 * m, out, src or tgt, or m of another type; TG_ESHAPE, as torch's checks,
 * for src or tgt not of d_model features, of different ranks, or (batched)
 * of different batch sizes; the layers' errors.  On error *out is
 * untouched. */
TG_API int tg_nn_transformer_forward(tg_module *m, tg_tensor **out, tg_tensor *src,
                                     tg_tensor *tgt, const tg_nn_transformer_masks *masks);
/* Transformer.generate_square_subsequent_mask(sz): a new (sz, sz) tensor
 * of dtype dt (a float dtype; torch's is its default f32) with -inf above
 * the diagonal and 0 elsewhere: the causal tgt_mask.  TG_EINVAL for a
 * NULL out or sz < 0; TG_EDTYPE for dt not a float dtype. */
TG_API int tg_nn_transformer_square_subsequent_mask(tg_tensor **out, int64_t sz, tg_dtype dt);

#ifdef __cplusplus
}
#endif
#endif
