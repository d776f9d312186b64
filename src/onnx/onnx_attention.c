/* src/onnx/onnx_attention.c - the ONNX nodes of nn.TransformerEncoderLayer
 * (opset 17), with the self-attention of its MultiheadAttention written out
 * as torch 1.13's F.multi_head_attention_forward computes it (E = d_model,
 * H heads of d = E / H features, L the sequence, N the batch):
 *   batch_first: Transpose (1, 0, 2) to (L, N, E); unbatched (L, E):
 *     Unsqueeze axis 1 to (L, 1, E)
 *   MatMul by Transpose(self_attn.in_proj_weight), Add self_attn.in_proj_bias
 *     -> (L, N, 3E), Split on the last axis into q, k, v (E each)
 *   each Reshape (0, -1, d) to (L, N*H, d), head h of batch n at n*H + h;
 *     q and v Transpose (1, 0, 2) to (N*H, L, d), k Transpose (1, 2, 0) to
 *     (N*H, d, L)
 *   Div q by sqrt(d); MatMul q k; Softmax axis -1; MatMul by v (N*H, L, d)
 *   Transpose (1, 0, 2), Reshape (0, -1, E) to (L, N, E)
 *   out_proj as a Linear on 3-d input (Transpose + MatMul + Add)
 *   then batch_first's Transpose back, or unbatched Squeeze axis 1
 * and the layer around it (dropouts are the identity in eval):
 *   post-norm:  x = norm1(x + sa(x));  y = norm2(x + ff(x))
 *   norm_first: x = x + sa(norm1(x));  y = x + ff(norm2(x))
 * ff = linear2(activation(linear1(x))), the Linears as Linear modules
 * export, relu Relu and gelu the Erf form (opset 17 has no Gelu); the
 * norms LayerNormalization; the residuals Add.  The reshapes use 0 and -1,
 * so the sequence and the batch stay free (a dynamic batch exports).
 * Initializers keep the state-dict names ("self_attn.in_proj_weight",
 * "linear1.bias", "norm2.weight"); the shapes and the scale are named by
 * the node scope ("/self_attn/head_shape", "/self_attn/scale").
 *
 * A MultiheadAttention on its own takes query, key and value, three inputs,
 * and the exported graph has one: it is refused. */
#include <math.h>
#include <string.h>

#include "core/core.h"
#include "onnx/onnx_graph.h"
#include "tapegrad/attention.h"

/* An int64 initializer "<scope>/<what>" of n values: its name, or NULL
 * (TG_ENOMEM set). */
static const char *ints(tg__onnx *g, const char *scope, const char *what, int64_t n,
                        const int64_t *v)
{
    const char *name = tg__onnx_str(g, "%s/%s", scope, what);
    if (!name || tg__onnx_init_raw(g, name, TG__ONNX_INT64, 1, &n, v, sizeof *v) < 0)
        return NULL;
    return name;
}

/* Transpose(x, perm) of a 3-d x. */
static int transpose3(tg__onnx *g, const char *scope, const char *x, int64_t p0, int64_t p1,
                      int64_t p2, const char **y)
{
    tg__onnx_node *n = NULL;
    TG_TRY(tg__onnx_unary(g, scope, "Transpose", x, &n, y));
    return tg__onnx_attr_ints(g, n, "perm", 3, (const int64_t[]){p0, p1, p2});
}

/* The site of s's child `name`: its path and scope under s's.  Its xt is
 * s's (the emitters read only its rank, which the layer keeps); no yt. */
static int child_site(const tg__onnx_site *s, const char *name, tg__onnx_site *c)
{
    *c = (tg__onnx_site){.g = s->g, .m = tg_module_child(s->m, name), .xt = s->xt};
    c->path = tg__onnx_param_name(s, name);
    c->scope = tg__onnx_str(s->g, "%s/%s", s->scope, name);
    TG_CHECK(c->m != NULL, TG_EUNSUPPORTED,
             "onnx_export: module '%s' (%s) has no child '%s'", s->path[0] ? s->path : "<top>",
             tg_module_type_name(s->m), name);
    return c->path && c->scope ? TG_OK : TG_ENOMEM;
}

/* Runs emit for s's child `name` on x: its output value in *y. */
static int child_emit(const tg__onnx_site *s, const char *name, const char *x,
                      int (*emit)(const tg__onnx_site *, const char **), const char **y)
{
    tg__onnx_site c;
    TG_TRY(child_site(s, name, &c));
    c.x = x;
    return emit(&c, y);
}

/* The self-attention of site a (the MultiheadAttention child, a->x its
 * input, the layout of the layer's src) as at the top of the file. */
static int self_attention(const tg__onnx_site *a, bool batch_first, const char **y)
{
    int64_t e, h;
    tg_nn_multihead_attention_opts o;
    TG_TRY(tg_nn_multihead_attention_params(a->m, &e, &h, &o));
    /* (a TransformerEncoderLayer's never has them) */
    TG_CHECK(o.kdim == e && o.vdim == e && !o.add_bias_kv && !o.add_zero_attn, TG_EUNSUPPORTED,
             "onnx_export: module '%s' (MultiheadAttention) with kdim, vdim, add_bias_kv or "
             "add_zero_attn is not supported", a->path);
    tg__onnx *g = a->g;
    const char *sc = a->scope;
    const bool batched = tg_tensor_ndim(a->xt) == 3;
    const int64_t d = e / h;
    const char *w = NULL, *b = NULL, *x = a->x, *t = NULL;
    TG_TRY(tg__onnx_param(a, "in_proj_weight", &w));
    TG_TRY(tg__onnx_param(a, "in_proj_bias", &b));
    TG_ASSERT(w[0] != '\0');
    const char *split = ints(g, sc, "qkv_split", 3, (const int64_t[]){e, e, e});
    const char *heads = ints(g, sc, "head_shape", 3, (const int64_t[]){0, -1, d});
    const char *merged = ints(g, sc, "merged_shape", 3, (const int64_t[]){0, -1, e});
    const char *axis1 = batched ? "" : ints(g, sc, "batch_axis", 1, (const int64_t[]){1});
    const char *scale = tg__onnx_const(g, sc, "scale", (float)sqrt((double)d));
    if (!split || !heads || !merged || !axis1 || !scale) return TG_ENOMEM;
    /* (L, N, E) */
    if (!batched)
        TG_TRY(tg__onnx_add(g, NULL, &x, sc, "Unsqueeze", 2, (const char *const[]){x, axis1}));
    else if (batch_first)
        TG_TRY(transpose3(g, sc, x, 1, 0, 2, &x));
    /* the packed in-projection, split into q, k, v */
    TG_TRY(tg__onnx_linear(g, sc, x, 3, w, b, &t));
    tg__onnx_node *n = NULL;
    const char *qkv[3] = {NULL};
    TG_TRY(tg__onnx_add(g, &n, &qkv[0], sc, "Split", 2, (const char *const[]){t, split}));
    TG_TRY(tg__onnx_add_output(g, n, sc, &qkv[1]));
    TG_TRY(tg__onnx_add_output(g, n, sc, &qkv[2]));
    TG_TRY(tg__onnx_attr_int(g, n, "axis", -1));
    /* (N*H, L, d); k as (N*H, d, L) */
    for (int i = 0; i < 3; i++) {
        TG_TRY(tg__onnx_add(g, NULL, &t, sc, "Reshape", 2, (const char *const[]){qkv[i], heads}));
        TG_TRY(transpose3(g, sc, t, 1, i == 1 ? 2 : 0, i == 1 ? 0 : 2, &qkv[i]));
    }
    const char *q = NULL, *s = NULL, *p = NULL, *o2 = NULL;
    TG_TRY(tg__onnx_add(g, NULL, &q, sc, "Div", 2, (const char *const[]){qkv[0], scale}));
    TG_TRY(tg__onnx_add(g, NULL, &s, sc, "MatMul", 2, (const char *const[]){q, qkv[1]}));
    TG_TRY(tg__onnx_unary(g, sc, "Softmax", s, &n, &p));
    TG_TRY(tg__onnx_attr_int(g, n, "axis", -1));
    TG_TRY(tg__onnx_add(g, NULL, &t, sc, "MatMul", 2, (const char *const[]){p, qkv[2]}));
    /* (L, N*H, d) -> (L, N, E) -> out_proj */
    TG_TRY(transpose3(g, sc, t, 1, 0, 2, &t));
    TG_TRY(tg__onnx_add(g, NULL, &o2, sc, "Reshape", 2, (const char *const[]){t, merged}));
    tg__onnx_site op;
    TG_TRY(child_site(a, "out_proj", &op));
    op.x = o2;
    TG_TRY(tg__onnx_param(&op, "weight", &w));
    TG_TRY(tg__onnx_param(&op, "bias", &b));
    TG_ASSERT(w[0] != '\0');
    TG_TRY(tg__onnx_linear(g, op.scope, o2, 3, w, b, batched && !batch_first ? y : &t));
    if (!batched)
        return tg__onnx_add(g, NULL, y, sc, "Squeeze", 2, (const char *const[]){t, axis1});
    return batch_first ? transpose3(g, sc, t, 1, 0, 2, y) : TG_OK;
}

/* ff(x) = linear2(activation(linear1(x))): dropout and dropout2 are the
 * identity in eval. */
static int feed_forward(const tg__onnx_site *s, const char *x, const char **y)
{
    const char *t = NULL;
    TG_TRY(child_emit(s, "linear1", x, tg__onnx_emit_linear, &t));
    TG_TRY(child_emit(s, "activation", t, tg__onnx_emit_activation, &t));
    return child_emit(s, "linear2", t, tg__onnx_emit_linear, y);
}

/* sa(x), the self-attention (dropout1 the identity in eval). */
static int sa_block(const tg__onnx_site *s, bool batch_first, const char *x, const char **y)
{
    tg__onnx_site a;
    TG_TRY(child_site(s, "self_attn", &a));
    a.x = x;
    return self_attention(&a, batch_first, y);
}

int tg__onnx_emit_transformer_encoder_layer(const tg__onnx_site *s, const char **y)
{
    tg_nn_transformer_encoder_layer_opts o;
    TG_TRY(tg_nn_transformer_encoder_layer_params(s->m, NULL, NULL, &o));
    const char *t = NULL, *x1 = NULL, *r = NULL;
    if (o.norm_first) {   /* x1 = x + sa(norm1(x)); y = x1 + ff(norm2(x1)) */
        TG_TRY(child_emit(s, "norm1", s->x, tg__onnx_emit_layer_norm, &t));
        TG_TRY(sa_block(s, o.batch_first, t, &t));
        TG_TRY(tg__onnx_add(s->g, NULL, &x1, s->scope, "Add", 2, (const char *const[]){s->x, t}));
        TG_TRY(child_emit(s, "norm2", x1, tg__onnx_emit_layer_norm, &t));
        TG_TRY(feed_forward(s, t, &t));
        return tg__onnx_add(s->g, NULL, y, s->scope, "Add", 2, (const char *const[]){x1, t});
    }
    /* x1 = norm1(x + sa(x)); y = norm2(x1 + ff(x1)) */
    TG_TRY(sa_block(s, o.batch_first, s->x, &t));
    TG_TRY(tg__onnx_add(s->g, NULL, &r, s->scope, "Add", 2, (const char *const[]){s->x, t}));
    TG_TRY(child_emit(s, "norm1", r, tg__onnx_emit_layer_norm, &x1));
    TG_TRY(feed_forward(s, x1, &t));
    TG_TRY(tg__onnx_add(s->g, NULL, &r, s->scope, "Add", 2, (const char *const[]){x1, t}));
    return child_emit(s, "norm2", r, tg__onnx_emit_layer_norm, y);
}

int tg__onnx_refuse_multihead_attention(const tg_module *m, const char *path)
{
    return tg__error(TG_EUNSUPPORTED,
                     "onnx_export: module '%s' (%s) is not supported on its own: its forward "
                     "takes query, key and value, and the exported graph has one input (the "
                     "self-attention inside a TransformerEncoderLayer exports)",
                     path[0] ? path : "<top>", tg_module_type_name(m));
}
