/* tapegrad/onnx.h - export a module to an ONNX model file (opset 17), float
 * or the int8 models of tg_quantize_model in QDQ form.
 *
 *   tg_onnx_options o = TG_ONNX_OPTIONS_INIT;
 *   o.dynamic_batch = true;                       // dim 0 becomes "batch"
 *   if (tg_onnx_export(generator, z, "generator.onnx", &o) < 0)
 *       fprintf(stderr, "%s\n", tg_error_message());
 *
 * The module runs once on example_input (borrowed) in eval mode without
 * grad, which fixes every shape of the graph; the training flags of the
 * module and its descendants are restored afterwards, and no parameter or
 * buffer changes.  The graph has one input and one output, both f32, or an
 * input of i64 or i32 indices for a model that begins with an Embedding
 * (several inputs: tg_onnx_export_n; several outputs: extra_outputs).
 * Initializers carry the module's state-dict names ("0.weight",
 * "1.running_mean"); docs/onnx.md lists the nodes each module becomes.
 *
 * Supported: Sequential, Linear, Embedding, Conv1d/2d/3d and ConvTranspose1d/2d/3d with
 * every tg_conv_params option (a fused activation becomes its own node),
 * BatchNorm with running statistics (inference form; SyncBatchNorm too),
 * the activations,
 * Flatten, Unflatten, Dropout, AlphaDropout and FeatureAlphaDropout (the
 * identity in eval), Identity, Upsample, ChannelShuffle, LocalResponseNorm,
 * AvgPool1d/2d/3d and MaxPool1d/2d/3d on batched inputs (a MaxPool's
 * return_indices as torch's indices: to a MaxUnpool after it in a
 * Sequential, or with extra_outputs), MaxUnpool1d/2d/3d (after such a
 * MaxPool, or on (x, indices) through tg_onnx_export_n), LPPool1d/2d
 * (every norm type), RNN, LSTM (no
 * proj_size) and GRU as ONNX RNN / LSTM / GRU nodes, RNNCell, LSTMCell and
 * GRUCell as one step of such a node,
 * TransformerEncoderLayer and TransformerEncoder (the attention written
 * out; with masks through tg_onnx_export_n), TransformerDecoderLayer,
 * TransformerDecoder and Transformer through tg_onnx_export_n,
 * MultiheadAttention on (query, key, value[, key_padding_mask[,
 * attn_mask]]) through tg_onnx_export_n (its weights with extra_outputs),
 * Bilinear, CosineSimilarity and PairwiseDistance on (x1, x2) and
 * CrossEntropyLoss, NLLLoss, BCEWithLogitsLoss and KLDivLoss on (input,
 * target) through tg_onnx_export_n, and
 * the QuantizedLinear/Conv/ConvTranspose modules of tg_quantize_model.  Anything
 * else is TG_EUNSUPPORTED with a message naming the module's path and type
 * ("onnx_export: module '2' (MyBlock) is not supported"); parameters that
 * are not f32 are TG_EDTYPE.  On any error no file is written (an existing
 * file at path is left unchanged): the file is written to a temporary name
 * and renamed over path.  A library built without protobuf-c returns
 * TG_EUNSUPPORTED ("built without ONNX support"). */
#ifndef TAPEGRAD_ONNX_H
#define TAPEGRAD_ONNX_H

#include <stdbool.h>

#include "tapegrad/export.h"
#include "tapegrad/nn.h"
#include "tapegrad/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tg_onnx_options {
    int opset;                  /* 17, the only opset written */
    bool dynamic_batch;         /* dim 0 of the input and output is "batch" */
    const char *input_name;     /* "input" */
    const char *output_name;    /* "output" */
    const char *graph_name;     /* "tapegrad" */
    /* The int8 layers' weights as u8 with zero point 128 instead of i8 with
     * zero point 0: the same values, which ONNX Runtime multiplies exactly
     * on every CPU.  With i8 weights its x86 kernels on CPUs without VNNI
     * use an instruction that saturates pairs of u8 x i8 products
     * (docs/onnx.md).  false */
    bool u8_weights;
    /* The outputs of the top module beyond its first as further graph
     * outputs, as torch.onnx.export writes a module returning a tuple: an
     * RNN's or GRU's h_n, an LSTM's h_n and c_n (torch's layout (D
     * num_layers, N, H), or (D num_layers, H) unbatched), an LSTMCell's c'
     * (an RNNCell and a GRUCell have none) and a MultiheadAttention's
     * attention weights (averaged over the heads, as torch's default
     * need_weights=True; per head with mha_per_head_weights) and a
     * MaxPoolNd's indices with return_indices (i64).  The top
     * module runs through its own forward of all outputs; it must be one
     * of those, or a Sequential on one input whose last module is a
     * recurrent layer, cell or MaxPoolNd (its outputs beyond the first, as torch's
     * Sequential returns its last module's tuple); anything else is
     * TG_EUNSUPPORTED naming the module.  false */
    bool extra_outputs;
    /* Their names, one per extra output; NULL gives "h_n", "c_n" (the
     * layers), "c_n" (LSTMCell), "attn_weights" and "indices".  Non-empty and
     * distinct from the inputs' and the output's (TG_EINVAL). */
    const char *const *extra_output_names;
    /* A MultiheadAttention's weights per head, (N, heads, L, S), as
     * torch's average_attn_weights=False.  false */
    bool mha_per_head_weights;
} tg_onnx_options;

#define TG_ONNX_OPTIONS_INIT                                                  \
    {.opset = 17, .dynamic_batch = false, .input_name = "input",              \
     .output_name = "output", .graph_name = "tapegrad", .u8_weights = false, \
     .extra_outputs = false, .extra_output_names = NULL,                     \
     .mha_per_head_weights = false}

/* Writes m as an ONNX model to path.  m and example_input (f32, or i64 /
 * i32 indices; its dim 0 the batch) are borrowed; opt NULL gives the
 * defaults. */
TG_API int tg_onnx_export(tg_module *m, tg_tensor *example_input, const char *path,
                          const tg_onnx_options *opt);
/* Writes m as an ONNX model whose graph has n_inputs inputs (1 to 8): m
 * runs once through tg_module_forward_n on example_inputs (borrowed; the
 * Transformer family and a MultiheadAttention through their forwards with
 * the masks), and input i is
 * named input_names[i] (NULL: opt->input_name for one input, "input_0",
 * "input_1", ... for several; the names non-empty, distinct and not the
 * output's).  With one input this is tg_onnx_export.  Several are taken by
 * a MultiheadAttention (query, key, value[, key_padding_mask[,
 * attn_mask]]), a TransformerEncoderLayer or
 * TransformerEncoder (src[, src_mask[, src_key_padding_mask]]), a
 * TransformerDecoderLayer or TransformerDecoder (tgt, memory[, tgt_mask[,
 * memory_mask[, tgt_key_padding_mask[, memory_key_padding_mask]]]]), a
 * Transformer (src, tgt[, src_mask[, tgt_mask[, memory_mask[,
 * src_key_padding_mask[, tgt_key_padding_mask[,
 * memory_key_padding_mask]]]]]]), an RNN or GRU (input, h_0), an LSTM
 * (input, h_0, c_0), an RNNCell or GRUCell (x, hx), an LSTMCell (x,
 * hx, cx), a Bilinear, CosineSimilarity or PairwiseDistance (x1, x2,
 * both f32), a MaxUnpoolNd (x, i64 indices) and a CrossEntropyLoss or
 * NLLLoss (input, i64 target) or
 * BCEWithLogitsLoss or KLDivLoss (input, target) at the top of the export; the masks f32 (added; a
 * float key padding mask beside a u8 attention mask is -inf where
 * nonzero, as the module's forward) or u8 (-inf where nonzero).  An
 * optional input of the Transformer family or a MultiheadAttention's mask
 * may be left out by a NULL example input (its input_names entry
 * unused): the graph has no input there, and the module runs without it;
 * a NULL example input elsewhere is TG_EINVAL.  With dynamic_batch each
 * input and the output get "batch" at their batch axis, where they have
 * one (none for unbatched inputs or attention masks).  Any other module,
 * or another number of inputs, is TG_EINVAL naming the module and what it
 * takes, and nothing is written. */
TG_API int tg_onnx_export_n(tg_module *m, int n_inputs, tg_tensor *const *example_inputs,
                            const char *const *input_names, const char *path,
                            const tg_onnx_options *opt);
/* True when the library was built with ONNX export (protobuf-c). */
TG_API bool tg_onnx_available(void);

#ifdef __cplusplus
}
#endif
#endif
