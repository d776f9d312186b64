/* src/onnx/onnx_graph.h - an ONNX graph under construction (src/onnx/onnx_graph.c
 * keeps it as protobuf-c structs of onnx.proto and serializes it), used by the
 * module exporter (onnx_export.c, onnx_qdq.c).
 *
 * Every string and array the builder hands out lives until tg__onnx_free;
 * functions that fail return a negative tg_status with a message. */
#ifndef TAPEGRAD_IO_ONNX_GRAPH_H
#define TAPEGRAD_IO_ONNX_GRAPH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tapegrad/conv.h"
#include "tapegrad/onnx.h"
#include "tapegrad/tensor.h"

/* TensorProto.DataType values (onnx.proto). */
enum {
    TG__ONNX_FLOAT = 1,
    TG__ONNX_UINT8 = 2,
    TG__ONNX_INT8 = 3,
    TG__ONNX_BOOL = 9,
    TG__ONNX_INT32 = 6,
    TG__ONNX_INT64 = 7,
};

typedef struct tg__onnx tg__onnx;
typedef struct tg__onnx_node tg__onnx_node;

/* A new graph for the export options o (copied; its strings are borrowed
 * until tg__onnx_free): opset o->opset, named o->graph_name. */
int tg__onnx_new(tg__onnx **out, const tg_onnx_options *o);
/* The options g was made with. */
const tg_onnx_options *tg__onnx_options(const tg__onnx *g);
/* Frees g and everything it handed out; NULL does nothing. */
void tg__onnx_free(tg__onnx *g);

/* A printf-formatted string owned by g, or NULL (TG_ENOMEM set). */
const char *tg__onnx_str(tg__onnx *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Adds the node op_type(inputs) -> one output named *out, a new value name
 * "<scope>/<op_type>_output_<k>" (scope "" for the top level).  An input
 * "" is an omitted optional input.  *node receives the node for its
 * attributes (may be NULL). */
int tg__onnx_add(tg__onnx *g, tg__onnx_node **node, const char **out, const char *scope,
                  const char *op_type, int n_in, const char *const *inputs);
/* Adds another output to node n (Split's second half), a new value name
 * "<scope>/<op_type>_output_<k>" in *out. */
int tg__onnx_add_output(tg__onnx *g, tg__onnx_node *n, const char *scope, const char **out);
int tg__onnx_attr_int(tg__onnx *g, tg__onnx_node *n, const char *name, int64_t v);
int tg__onnx_attr_float(tg__onnx *g, tg__onnx_node *n, const char *name, float v);
int tg__onnx_attr_ints(tg__onnx *g, tg__onnx_node *n, const char *name, int count,
                       const int64_t *v);
/* A string attribute (copied; ONNX stores its bytes, without the NUL). */
int tg__onnx_attr_str(tg__onnx *g, tg__onnx_node *n, const char *name, const char *v);
/* A list-of-strings attribute (RNN's activations; each copied). */
int tg__onnx_attr_strs(tg__onnx *g, tg__onnx_node *n, const char *name, int count,
                       const char *const *v);

/* An initializer `name` of ONNX data type dt and the given shape, from
 * numel(shape) values of elem_size bytes (little-endian raw data, copied). */
int tg__onnx_init_raw(tg__onnx *g, const char *name, int dt, int ndim, const int64_t *shape,
                      const void *data, size_t elem_size);
/* An initializer from tensor t (f32, u8, i8, i32 or i64; any strides). */
int tg__onnx_init_tensor(tg__onnx *g, const char *name, const tg_tensor *t);

/* Declares a graph input or output of element type dt; dim 0 is the
 * symbolic "batch" when dynamic_batch. */
int tg__onnx_io(tg__onnx *g, bool output, const char *name, int dt, int ndim,
                const int64_t *shape, bool dynamic_batch);
/* The same with the symbolic "batch" at axis batch_axis (-1: none).  A
 * graph has up to TG__ONNX_MAX_INPUTS inputs and 1 + TG__ONNX_MAX_EXTRA
 * outputs, each in the order declared. */
#define TG__ONNX_MAX_INPUTS 8
/* The most outputs beyond the first a module gives (an LSTM's h_n, c_n). */
#define TG__ONNX_MAX_EXTRA 2
int tg__onnx_io_axis(tg__onnx *g, bool output, const char *name, int dt, int ndim,
                     const int64_t *shape, int batch_axis);
/* Renames value `from` to `to` in every node's inputs and outputs. */
int tg__onnx_rename(tg__onnx *g, const char *from, const char *to);

/* Serializes the model to path through the atomic writer: on error no file
 * is left behind (and an existing one is unchanged). */
int tg__onnx_write(tg__onnx *g, const char *path);

#endif

/* ---- the module exporter (onnx_export.c, onnx_qdq.c) ---- */

/* Where one leaf module is exported: its state-dict prefix, the node scope,
 * the graph value it reads and what tapegrad computes for it and from it. */
typedef struct tg__onnx_site {
    tg__onnx *g;
    tg_module *m;              /* borrowed */
    const char *path;          /* dotted state-dict prefix, "" at the top */
    const char *scope;         /* node-name scope: "/net/4" */
    const char *x;             /* the input value's name */
    const tg_tensor *xt, *yt;  /* tapegrad's input and output (borrowed) */
    /* A leaf at the top of tg_onnx_export_n (and the layers of a
     * Transformer stack there), or one in a Sequential given all outputs
     * of the module before it (a MaxUnpool after a MaxPool with
     * return_indices): its n inputs' names (xs[0] == x) and tapegrad's
     * tensors for them (xts[0] == xt), both NULL at an optional input left
     * out; n 0 and both NULL elsewhere. */
    int n;
    const char *const *xs;
    tg_tensor *const *xts;
    /* The top module of an export with extra_outputs, or a module in a
     * Sequential whose next takes all its outputs: the emitter puts the
     * values of its outputs beyond the first here, in the order of its
     * extra rule; NULL elsewhere. */
    const char **extra;
} tg__onnx_site;


/* "<path>.<name>", or name at the top level; NULL with TG_ENOMEM set. */
const char *tg__onnx_param_name(const tg__onnx_site *s, const char *name);
/* Adds parameter `name` of the site's module as an initializer named
 * tg__onnx_param_name(s, name): *out gets that name, or "" when the module
 * has no such parameter. */
int tg__onnx_param(const tg__onnx_site *s, const char *name, const char **out);
/* A Conv's padding_mode other than zeros as nodes after s->x (onnx_pad.c):
 * *x is the padded value, and p is left with zero padding (mode
 * TG_PAD_CONSTANT, padding 0) for the Conv; with TG_PAD_CONSTANT *x = s->x
 * and p is unchanged.  ns is the number of spatial axes. */
int tg__onnx_conv_pad(const tg__onnx_site *s, tg_conv_params *p, int ns, const char **x);
/* A padding module (ConstantPadNd, ZeroPad2d, ReflectionPadNd,
 * ReplicationPadNd, CircularPadNd) as a Pad node, or Slice + Concat for
 * circular padding (onnx_pad.c). */
int tg__onnx_emit_pad(const tg__onnx_site *s, const char **y);
/* The attributes of a Conv / ConvTranspose node for weight w and p (zero
 * padding: tg__onnx_conv_pad first). */
int tg__onnx_conv_attrs(tg__onnx *g, tg__onnx_node *n, const tg_conv_params *p,
                        const tg_tensor *w, bool transpose);
/* One-input node op(x) -> *y (*n: the node, for its attributes; may be
 * NULL). */
int tg__onnx_unary(tg__onnx *g, const char *scope, const char *op, const char *x,
                   tg__onnx_node **n, const char **y);
/* A 0-d f32 initializer "<scope>/<what>" holding v: its name, or NULL
 * (TG_ENOMEM set). */
const char *tg__onnx_const(tg__onnx *g, const char *scope, const char *what, float v);
/* The node(s) of activation act applied to x; *y = x for TG_ACT_NONE. */
int tg__onnx_activation(tg__onnx *g, const char *scope, const char *x, tg_activation act,
                        double slope, const char **y);
/* x @ w^T + b for a Linear weight w (N, K) named wname (b "" for none): Gemm
 * for a 2-d x, Transpose + MatMul (+ Add) otherwise. */
int tg__onnx_linear(tg__onnx *g, const char *scope, const char *x, int x_ndim,
                    const char *wname, const char *bname, const char **y);

/* The emitters of the leaf modules: append the module's nodes after s->x,
 * its output value's name in *y (onnx_nodes.c; onnx_qdq.c for the
 * QuantizedLinear/Conv/ConvTranspose modules of tg_quantize_model). */
int tg__onnx_emit_linear(const tg__onnx_site *s, const char **y);
int tg__onnx_emit_embedding(const tg__onnx_site *s, const char **y);
/* TG_EUNSUPPORTED for an Embedding with max_norm, before its forward runs. */
int tg__onnx_refuse_embedding(const tg_module *m, const char *path);
int tg__onnx_emit_conv(const tg__onnx_site *s, const char **y);
int tg__onnx_emit_batchnorm(const tg__onnx_site *s, const char **y);
/* SyncBatchNorm (tapegrad/dist.h) in eval: BatchNorm's node. */
int tg__onnx_emit_sync_batchnorm(const tg__onnx_site *s, const char **y);
int tg__onnx_emit_activation(const tg__onnx_site *s, const char **y);
int tg__onnx_emit_prelu(const tg__onnx_site *s, const char **y);
int tg__onnx_emit_elu(const tg__onnx_site *s, const char **y);
int tg__onnx_emit_hardtanh(const tg__onnx_site *s, const char **y);
int tg__onnx_emit_hardsigmoid(const tg__onnx_site *s, const char **y);
int tg__onnx_emit_hardswish(const tg__onnx_site *s, const char **y);
int tg__onnx_emit_mish(const tg__onnx_site *s, const char **y);
/* Softplus, LogSigmoid, Softmax, LogSoftmax and Softmax2d (onnx_act.c). */
int tg__onnx_emit_softplus(const tg__onnx_site *s, const char **y);
int tg__onnx_emit_logsigmoid(const tg__onnx_site *s, const char **y);
int tg__onnx_emit_softmax(const tg__onnx_site *s, const char **y);
/* SELU, CELU, Hardshrink, Softshrink, Threshold, GLU, Softsign, Tanhshrink
 * and Softmin (onnx_act.c). */
int tg__onnx_emit_selu(const tg__onnx_site *s, const char **y);
int tg__onnx_emit_celu(const tg__onnx_site *s, const char **y);
int tg__onnx_emit_shrink(const tg__onnx_site *s, const char **y);
int tg__onnx_emit_threshold(const tg__onnx_site *s, const char **y);
int tg__onnx_emit_glu(const tg__onnx_site *s, const char **y);
int tg__onnx_emit_softsign(const tg__onnx_site *s, const char **y);
int tg__onnx_emit_tanhshrink(const tg__onnx_site *s, const char **y);
int tg__onnx_emit_softmin(const tg__onnx_site *s, const char **y);
int tg__onnx_emit_reshape(const tg__onnx_site *s, const char **y);
int tg__onnx_emit_pixel_shuffle(const tg__onnx_site *s, const char **y);
/* Unfold as Pad, Gather, Gather, Transpose and Reshape; Fold as Reshape,
 * ConvTranspose (a 0/1 weight per tap) and, unbatched, Reshape
 * (onnx_fold.c). */
int tg__onnx_emit_unfold(const tg__onnx_site *s, const char **y);
int tg__onnx_emit_fold(const tg__onnx_site *s, const char **y);
/* Upsample, AvgPoolNd, MaxPoolNd and AdaptiveAvgPoolNd (onnx_pool.c). */
int tg__onnx_emit_upsample(const tg__onnx_site *s, const char **y);
int tg__onnx_emit_pool(const tg__onnx_site *s, const char **y);
int tg__onnx_emit_adaptive_pool(const tg__onnx_site *s, const char **y);
/* LPPoolNd as LpPool (an even integer norm_type, no ceil_mode window cut
 * short), otherwise as torch's avg_pool composition (onnx_pool.c). */
int tg__onnx_emit_lp_pool(const tg__onnx_site *s, const char **y);
/* A MaxPool's torch indices (onnx_unpool.c): node n (the MaxPool, NULL
 * after a -inf Pad: refused) gets its Indices output, and *idx their value
 * within each (n, c) plane, as torch's; a window of no element of x
 * (torch's -1) refused.  p: the MaxPool's parameters. */
int tg__onnx_pool_indices(const tg__onnx_site *s, int ns, const tg_pool_params *p,
                          tg__onnx_node *n, const char **idx);
/* MaxUnpoolNd on s's two inputs (x, indices) as MaxUnpool after torch's
 * indices are made ONNX's; its inputs rule (n 2, f32 and i64); the extra
 * rule of a MaxPoolNd with return_indices (its indices, i64, "indices";
 * none without) (onnx_unpool.c). */
int tg__onnx_emit_max_unpool(const tg__onnx_site *s, const char **y);
int tg__onnx_inputs_max_unpool(const tg_module *m, const char *path, int n, tg_tensor *const *xs,
                               int *axes);
int tg__onnx_extra_max_pool(tg_module *m, const tg_onnx_options *opt, int n, tg_tensor *const *xs,
                            tg_tensor **ys, const char **names, int *axes);
/* TG_EUNSUPPORTED naming the module and onnx_op unless s's input is (N, C,
 * S...) with ns spatial dims (onnx_pool.c). */
int tg__onnx_need_batched(const tg__onnx_site *s, int ns, const char *onnx_op);
/* LayerNorm, GroupNorm and InstanceNormNd (onnx_norm.c). */
int tg__onnx_emit_layer_norm(const tg__onnx_site *s, const char **y);
int tg__onnx_emit_group_norm(const tg__onnx_site *s, const char **y);
int tg__onnx_emit_instance_norm(const tg__onnx_site *s, const char **y);
/* TransformerEncoderLayer, its self-attention written out, with the masks
 * of tg_onnx_export_n's inputs (onnx_attention.c). */
int tg__onnx_emit_transformer_encoder_layer(const tg__onnx_site *s, const char **y);
/* MultiheadAttention on (query, key, value[, key_padding_mask[,
 * attn_mask]]), the graph inputs of tg_onnx_export_n, with its attention
 * weights as the extra output; the inputs rules of it, of TransformerEncoderLayer
 * ((src), (src, src_mask), (src, src_mask, src_key_padding_mask)) and of
 * RNN, LSTM and GRU ((input), (input, h_0), LSTM (input, h_0, c_0)): each
 * checks n and the inputs' dtypes (TG_EINVAL / TG_EDTYPE naming the module)
 * and gives axes[i] the batch axis of input i and axes[n] the output's (-1:
 * none). */
int tg__onnx_emit_multihead_attention(const tg__onnx_site *s, const char **y);
/* A MultiheadAttention's forward on its n graph inputs (query, key, value[,
 * key_padding_mask[, attn_mask]], a NULL mask left out): its output in *y
 * and, where w is not NULL, its weights, per head or averaged. */
int tg__onnx_run_multihead_attention(tg_module *m, tg_tensor **y, tg_tensor **w,
                                     bool per_head, int n, tg_tensor *const *xs);
int tg__onnx_inputs_multihead_attention(const tg_module *m, const char *path, int n,
                                        tg_tensor *const *xs, int *axes);
int tg__onnx_inputs_transformer_encoder_layer(const tg_module *m, const char *path, int n,
                                              tg_tensor *const *xs, int *axes);
/* The site of s's child `name`: its path and scope under s's, its xt s's
 * (the emitters read only its rank, which the layers keep); no yt, no
 * graph inputs.  TG_EUNSUPPORTED when s's module has no such child. */
int tg__onnx_child_site(const tg__onnx_site *s, const char *name, tg__onnx_site *c);
/* Any module that exports, s->m at s->path and s->scope, on s->x: its
 * nodes as the walk writes them (a container's children in turn), its
 * output value in *y; the module runs on s->xt (onnx_export.c). */
int tg__onnx_emit_module(const tg__onnx_site *s, const char **y);
/* TransformerDecoderLayer on the graph inputs (tgt, memory, tgt_mask,
 * memory_mask, tgt_key_padding_mask, memory_key_padding_mask), the masks
 * optional (onnx_attention.c). */
int tg__onnx_emit_transformer_decoder_layer(const tg__onnx_site *s, const char **y);
/* The inputs rules of an encoder (layer or stack: (src[, src_mask[,
 * src_key_padding_mask]])), a decoder ((tgt, memory[, tgt_mask[,
 * memory_mask[, tgt_key_padding_mask[, memory_key_padding_mask]]]])) and
 * a Transformer ((src, tgt[, src_mask, tgt_mask, memory_mask,
 * src_key_padding_mask, tgt_key_padding_mask, memory_key_padding_mask])),
 * for a module of the given batch_first; an input after the first two
 * (the first for an encoder) may be NULL, left out (onnx_attention.c). */
int tg__onnx_inputs_encoder(const tg_module *m, const char *path, int n, tg_tensor *const *xs,
                            int *axes, bool batch_first);
int tg__onnx_inputs_decoder(const tg_module *m, const char *path, int n, tg_tensor *const *xs,
                            int *axes, bool batch_first);
int tg__onnx_inputs_transformer(const tg_module *m, const char *path, int n,
                                tg_tensor *const *xs, int *axes, bool batch_first);
/* TransformerEncoder, TransformerDecoder and Transformer: the emitters,
 * the inputs rules (the
 * decoder's for a TransformerDecoderLayer too) and the forward on the
 * graph inputs of any of the four (onnx_transformer.c). */
int tg__onnx_emit_transformer_encoder(const tg__onnx_site *s, const char **y);
int tg__onnx_emit_transformer_decoder(const tg__onnx_site *s, const char **y);
int tg__onnx_emit_transformer(const tg__onnx_site *s, const char **y);
int tg__onnx_inputs_transformer_encoder(const tg_module *m, const char *path, int n,
                                        tg_tensor *const *xs, int *axes);
int tg__onnx_inputs_transformer_decoder(const tg_module *m, const char *path, int n,
                                        tg_tensor *const *xs, int *axes);
int tg__onnx_inputs_transformer_model(const tg_module *m, const char *path, int n,
                                      tg_tensor *const *xs, int *axes);
int tg__onnx_run_transformer(tg_module *m, tg_tensor **y, int n, tg_tensor *const *xs);
int tg__onnx_inputs_rnn(const tg_module *m, const char *path, int n, tg_tensor *const *xs,
                        int *axes);
int tg__onnx_emit_qdq(const tg__onnx_site *s, const char **y);
/* RNN, LSTM and GRU as one ONNX RNN / LSTM / GRU node per layer; an LSTM
 * with proj_size > 0 refused before its forward runs (onnx_rnn.c). */
int tg__onnx_emit_rnn(const tg__onnx_site *s, const char **y);
int tg__onnx_refuse_rnn(const tg_module *m, const char *path);
/* RNNCell, LSTMCell and GRUCell as one step of an ONNX RNN / LSTM / GRU
 * node (onnx_rnn.c), and their inputs rule: (x), (x, hx), LSTMCell (x,
 * hx, cx). */
int tg__onnx_emit_rnn_cell(const tg__onnx_site *s, const char **y);
int tg__onnx_inputs_rnn_cell(const tg_module *m, const char *path, int n, tg_tensor *const *xs,
                             int *axes);
/* The extra rules of tg_onnx_options.extra_outputs: run m on its n graph
 * inputs xs through its forward of all outputs, and give its outputs
 * beyond the first (new references) in ys, their default names in names
 * and their batch axes (-1: none) in axes; the count is returned (0 to
 * TG__ONNX_MAX_EXTRA).  The recurrent layers and cells (onnx_rnn.c) and
 * MultiheadAttention (onnx_attention.c, with opt's mha_per_head_weights). */
int tg__onnx_extra_rnn(tg_module *m, const tg_onnx_options *opt, int n, tg_tensor *const *xs,
                       tg_tensor **ys, const char **names, int *axes);
int tg__onnx_extra_multihead_attention(tg_module *m, const tg_onnx_options *opt, int n,
                                       tg_tensor *const *xs, tg_tensor **ys, const char **names,
                                       int *axes);
/* ChannelShuffle as Reshape, Transpose, Reshape; LocalResponseNorm as
 * LRN (odd size) or its pooled form (even size) (onnx_channel.c). */
int tg__onnx_emit_channel_shuffle(const tg__onnx_site *s, const char **y);
int tg__onnx_emit_local_response_norm(const tg__onnx_site *s, const char **y);
/* Bilinear, CosineSimilarity and PairwiseDistance on the two graph inputs
 * (x1, x2) of tg_onnx_export_n, and their inputs rule: n must be 2, both
 * f32 (onnx_pair.c). */
int tg__onnx_inputs_pair(const tg_module *m, const char *path, int n, tg_tensor *const *xs,
                         int *axes);
int tg__onnx_emit_bilinear(const tg__onnx_site *s, const char **y);
int tg__onnx_emit_cosine_similarity(const tg__onnx_site *s, const char **y);
int tg__onnx_emit_pairwise_distance(const tg__onnx_site *s, const char **y);
/* CrossEntropyLoss and NLLLoss (one emitter), BCEWithLogitsLoss and
 * KLDivLoss on the graph inputs (input, target), their inputs rule (n 2,
 * input f32, target i64 class indices or f32) and the refusal of a
 * CrossEntropyLoss with label smoothing (onnx_loss.c). */
int tg__onnx_emit_loss_classes(const tg__onnx_site *s, const char **y);
int tg__onnx_emit_bce_with_logits(const tg__onnx_site *s, const char **y);
int tg__onnx_emit_kl_div(const tg__onnx_site *s, const char **y);
int tg__onnx_inputs_loss(const tg_module *m, const char *path, int n, tg_tensor *const *xs,
                         int *axes);
int tg__onnx_refuse_loss(const tg_module *m, const char *path);
