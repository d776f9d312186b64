/* src/nn/transformer_internal.h - what the Transformer layers and stacks
 * share (transformer.c, transformer_decoder.c, transformer_stack.c,
 * transformer_fast.c). */
#ifndef TAPEGRAD_NN_TRANSFORMER_INTERNAL_H
#define TAPEGRAD_NN_TRANSFORMER_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "tapegrad/attention.h"
#include "tapegrad/nn.h"

/* t (named tname) of rank 3 or 2 with d features, and mem (mname) of t's
 * rank with d features; TG_ESHAPE naming them and fn otherwise. */
int tg__nn_check_tgt_memory(const char *fn, int64_t d, const tg_tensor *t, const char *tname,
                            const tg_tensor *mem, const char *mname);
/* TG_EINVAL (naming fn) when mk gives a src mask, which a decoder has no
 * use for. */
int tg__nn_check_masks_unused(const char *fn, const tg_nn_transformer_masks *mk);

/* A layer's options: TG_EINVAL naming fn for d_model or nhead < 1, d_model
 * not divisible by nhead, dim_feedforward < 1, dropout outside [0, 1], an
 * activation other than ReLU and GELU, layer_norm_eps not > 0. */
int tg__transformer_check(const char *fn, int64_t d_model, int64_t nhead, int64_t dim_feedforward,
                          double dropout, tg_activation activation, double layer_norm_eps);
/* Adds a layer's children to m in torch's registration order (its state-dict
 * order and order of initialisation from rng): n_attn MultiheadAttentions
 * (self_attn, and multihead_attn for a decoder's 2) of seeds seed + k,
 * linear1, dropout (seed + n_attn), linear2, n_attn + 1 LayerNorms norm1...,
 * n_attn + 1 Dropouts dropout1... (seeds from seed + n_attn + 1), and the
 * activation.  fn names the caller in messages. */
int tg__transformer_children(const char *fn, tg_module *m, int64_t d, int64_t nhead, int n_attn,
                             const tg_nn_transformer_encoder_layer_opts *o, tg_rng *rng);
/* A TransformerDecoderLayer's seed (borrowed from m's state), or NULL for
 * another module (transformer_decoder.c). */
uint64_t *tg__transformer_decoder_layer_seed(tg_module *m);
/* Adds delta to the seed of layer m (a TransformerEncoderLayer or
 * TransformerDecoderLayer), as if made with that seed: its children's
 * dropout seeds follow from it as tg__transformer_children derives them. */
void tg__transformer_add_seed(tg_module *m, uint64_t delta);
/* *y = drop(attn(x, kv, kv, mask, kpm)) with layer m's children named attn
 * (a MultiheadAttention) and drop. */
int tg__transformer_attn_block(tg_module *m, const char *attn, const char *drop, tg_tensor **y,
                               tg_tensor *x, tg_tensor *kv, tg_tensor *mask, tg_tensor *kpm);
/* *y = drop(linear2(dropout(activation(linear1(x))))) with layer m's
 * children of those names. */
int tg__transformer_ff_block(tg_module *m, const char *drop, tg_tensor **y, tg_tensor *x);

/* TransformerEncoderLayer m's forward on the fused inference path
 * (transformer_fast.c) when it applies, with *taken true; otherwise
 * nothing done, TG_OK and *taken false, and the caller runs the modules.
 * It applies when TG_ENCODER_FAST is not "0" in the environment, x is f32
 * or f64 outside autocast, no gradient is recorded (grad mode off, or
 * neither x, the masks nor a parameter requires one), the layer and every
 * module in it are in eval with no computed weights (weight_norm,
 * spectral_norm), its children are the modules it was made with (Linear,
 * LayerNorm over E, Dropout, ReLU or GELU) with contiguous parameters of
 * x's dtype, and MultiheadAttention's fused self-attention applies
 * (tg__nn_mha_fast_check; its mask checks' errors are returned).  x
 * checked by the caller (rank 2 or 3, E features). */
int tg__transformer_encoder_fast(tg_module *m, bool norm_first, tg_tensor **y, tg_tensor *x,
                                 tg_tensor *mask, tg_tensor *kpm, bool *taken);
/* The number of forwards that path has run on this thread (tests). */
uint64_t tg__transformer_encoder_fast_calls(void);

/* TransformerDecoderLayer m's forward of tgt x over memory mem with mk's
 * tgt_ and memory_ masks on the same fused path (transformer_fast.c), on
 * the same terms: it applies when TG_DECODER_FAST is not "0" in the
 * environment and the encoder's conditions above hold with the memory and
 * the four masks beside x, the children the decoder layer was made with,
 * and MultiheadAttention's fused attention applies to self_attn (x over x)
 * and to multihead_attn (x over mem).  x and mem checked by the caller. */
int tg__transformer_decoder_fast(tg_module *m, bool norm_first, tg_tensor **y, tg_tensor *x,
                                 tg_tensor *mem, const tg_nn_transformer_masks *mk, bool *taken);
/* The number of forwards the decoder's path has run on this thread. */
uint64_t tg__transformer_decoder_fast_calls(void);

#endif
