/* src/onnx/onnx_transformer.c - the ONNX nodes of nn.TransformerEncoder,
 * nn.TransformerDecoder and nn.Transformer (opset 17): the layers' graphs
 * (onnx_attention.c) chained, layers.0 first, each reading the one
 * before's output and the stack's masks, then the optional final norm
 * (any module that exports: a LayerNorm is LayerNormalization).  A Transformer is its encoder on
 * (src, src_mask, src_key_padding_mask), whose output is the memory of
 * its decoder on (tgt, memory, tgt_mask, memory_mask,
 * tgt_key_padding_mask, memory_key_padding_mask).  Initializers keep the
 * state-dict names ("layers.1.self_attn.in_proj_weight",
 * "encoder.norm.weight"), the node scopes the module paths
 * ("/decoder/layers/0/multihead_attn").
 *
 * The graph inputs are the forward's arguments in torch's order; an
 * optional one left out (a NULL example input of tg_onnx_export_n) is no
 * graph input, and the layers read nothing there. */
#include <string.h>

#include "core/core.h"
#include "onnx/onnx_graph.h"
#include "tapegrad/attention.h"

/* The layers of stack s in turn, each a site of its own under
 * "layers.<i>" with s's graph inputs (the masks at the layer's places),
 * then the norm. */
static int stack(const tg__onnx_site *s, int (*emit)(const tg__onnx_site *, const char **),
                 const char **y)
{
    int64_t n = 0;
    TG_TRY(tg_nn_transformer_stack_params(s->m, &n, NULL));
    tg__onnx_site list;
    TG_TRY(tg__onnx_child_site(s, "layers", &list));
    const char *x = s->x;
    for (int64_t i = 0; i < n; i++) {
        char name[24];
        snprintf(name, sizeof name, "%lld", (long long)i);
        tg__onnx_site c;
        TG_TRY(tg__onnx_child_site(&list, name, &c));
        c.x = x;
        c.n = s->n;
        c.xs = s->xs;
        c.xts = s->xts;
        TG_TRY(emit(&c, &x));
    }
    if (!tg_module_child(s->m, "norm")) {
        *y = x;
        return TG_OK;
    }
    /* the norm's input is the last layer's output, which has the shape of
     * the stack's input s->xt: the walk runs the norm on s->xt in its
     * place (the emitters read shapes and the module's state, not values) */
    tg__onnx_site norm;
    TG_TRY(tg__onnx_child_site(s, "norm", &norm));
    norm.x = x;
    return tg__onnx_emit_module(&norm, y);
}

int tg__onnx_emit_transformer_encoder(const tg__onnx_site *s, const char **y)
{
    return stack(s, tg__onnx_emit_transformer_encoder_layer, y);
}

int tg__onnx_emit_transformer_decoder(const tg__onnx_site *s, const char **y)
{
    TG_ASSERT(s->n >= 2 && s->xs[1] != NULL);   /* tg__onnx_inputs_transformer_decoder */
    return stack(s, tg__onnx_emit_transformer_decoder_layer, y);
}

/* Graph input i of s, or none (NULL) past its inputs. */
static const char *name_at(const tg__onnx_site *s, int i)
{
    return i < s->n ? s->xs[i] : NULL;
}

static tg_tensor *tensor_at(const tg__onnx_site *s, int i)
{
    return i < s->n ? s->xts[i] : NULL;
}

/* The encoder on (src, src_mask, src_key_padding_mask), graph inputs 0,
 * 2 and 5; the decoder on (tgt, memory, tgt_mask, memory_mask,
 * tgt_key_padding_mask, memory_key_padding_mask), 1, the encoder's
 * output, 3, 4, 6 and 7. */
int tg__onnx_emit_transformer(const tg__onnx_site *s, const char **y)
{
    TG_ASSERT(s->n >= 2 && s->xs[1] != NULL);   /* tg__onnx_inputs_transformer */
    tg__onnx_site e, d;
    const char *mem = NULL;
    TG_TRY(tg__onnx_child_site(s, "encoder", &e));
    const char *exs[3] = {s->xs[0], name_at(s, 2), name_at(s, 5)};
    tg_tensor *exts[3] = {s->xts[0], tensor_at(s, 2), tensor_at(s, 5)};
    e.x = s->xs[0];
    e.xt = s->xts[0];
    e.n = 3;
    e.xs = exs;
    e.xts = exts;
    TG_TRY(tg__onnx_emit_transformer_encoder(&e, &mem));
    TG_TRY(tg__onnx_child_site(s, "decoder", &d));
    const char *dxs[6] = {s->xs[1], mem, name_at(s, 3), name_at(s, 4), name_at(s, 6),
                          name_at(s, 7)};
    tg_tensor *dxts[6] = {s->xts[1], s->xts[0], tensor_at(s, 3), tensor_at(s, 4),
                          tensor_at(s, 6), tensor_at(s, 7)};
    d.x = s->xs[1];
    d.xt = s->xts[1];
    d.n = 6;
    d.xs = dxs;
    d.xts = dxts;
    return tg__onnx_emit_transformer_decoder(&d, y);
}

/* ---- the graph inputs and the forward on them ---- */

/* batch_first of the stack m's layers. */
static int stack_batch_first(const tg_module *m, bool *bf)
{
    const tg_module *l = tg_module_child(tg_module_child(m, "layers"), "0");
    if (!strcmp(tg_module_type_name(m), "TransformerEncoder")) {
        tg_nn_transformer_encoder_layer_opts o;
        TG_TRY(tg_nn_transformer_encoder_layer_params(l, NULL, NULL, &o));
        *bf = o.batch_first;
        return TG_OK;
    }
    tg_nn_transformer_decoder_layer_opts o;
    TG_TRY(tg_nn_transformer_decoder_layer_params(l, NULL, NULL, &o));
    *bf = o.batch_first;
    return TG_OK;
}

int tg__onnx_inputs_transformer_encoder(const tg_module *m, const char *path, int n,
                                        tg_tensor *const *xs, int *axes)
{
    bool bf = false;
    TG_TRY(stack_batch_first(m, &bf));
    return tg__onnx_inputs_encoder(m, path, n, xs, axes, bf);
}

int tg__onnx_inputs_transformer_decoder(const tg_module *m, const char *path, int n,
                                        tg_tensor *const *xs, int *axes)
{
    bool bf = false;
    if (!strcmp(tg_module_type_name(m), "TransformerDecoderLayer")) {
        tg_nn_transformer_decoder_layer_opts o;
        TG_TRY(tg_nn_transformer_decoder_layer_params(m, NULL, NULL, &o));
        bf = o.batch_first;
    } else {
        TG_TRY(stack_batch_first(m, &bf));
    }
    return tg__onnx_inputs_decoder(m, path, n, xs, axes, bf);
}

int tg__onnx_inputs_transformer_model(const tg_module *m, const char *path, int n,
                                      tg_tensor *const *xs, int *axes)
{
    tg_nn_transformer_opts o;
    TG_TRY(tg_nn_transformer_params(m, NULL, NULL, &o));
    return tg__onnx_inputs_transformer(m, path, n, xs, axes, o.batch_first);
}

/* xs[i], or NULL past n. */
static tg_tensor *at(int n, tg_tensor *const *xs, int i)
{
    return i < n ? xs[i] : NULL;
}

int tg__onnx_run_transformer(tg_module *m, tg_tensor **y, int n, tg_tensor *const *xs)
{
    const char *type = tg_module_type_name(m);
    if (!strcmp(type, "TransformerEncoderLayer"))
        return tg_nn_transformer_encoder_layer_forward(m, y, xs[0], at(n, xs, 1), at(n, xs, 2));
    if (!strcmp(type, "TransformerEncoder"))
        return tg_nn_transformer_encoder_forward(m, y, xs[0], at(n, xs, 1), at(n, xs, 2));
    tg_nn_transformer_masks mk = TG_NN_TRANSFORMER_MASKS_INIT;
    if (!strcmp(type, "Transformer")) {
        mk.src_mask = at(n, xs, 2);
        mk.tgt_mask = at(n, xs, 3);
        mk.memory_mask = at(n, xs, 4);
        mk.src_key_padding_mask = at(n, xs, 5);
        mk.tgt_key_padding_mask = at(n, xs, 6);
        mk.memory_key_padding_mask = at(n, xs, 7);
        return tg_nn_transformer_forward(m, y, xs[0], xs[1], &mk);
    }
    mk.tgt_mask = at(n, xs, 2);
    mk.memory_mask = at(n, xs, 3);
    mk.tgt_key_padding_mask = at(n, xs, 4);
    mk.memory_key_padding_mask = at(n, xs, 5);
    if (!strcmp(type, "TransformerDecoder"))
        return tg_nn_transformer_decoder_forward(m, y, xs[0], xs[1], &mk);
    return tg_nn_transformer_decoder_layer_forward(m, y, xs[0], xs[1], &mk);
}
