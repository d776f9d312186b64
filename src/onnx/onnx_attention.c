/* src/onnx/onnx_attention.c - the ONNX nodes of nn.TransformerEncoderLayer
 * and nn.TransformerDecoderLayer (opset 17), with the attentions of their
 * MultiheadAttentions written out
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
 * and for a decoder layer the cross-attention mha(x, memory), the query x
 * and the key and value the memory (graph input 1), between the two:
 *   post-norm:  x = norm2(x + mha(x, memory)), then ff with norm3
 *   norm_first: x = x + mha(norm2(x), memory), then ff with norm3
 * ff = linear2(activation(linear1(x))), the Linears as Linear modules
 * export, relu Relu and gelu the Erf form (opset 17 has no Gelu); the
 * norms LayerNormalization; the residuals Add.  The reshapes use 0 and -1,
 * so the sequence and the batch stay free (a dynamic batch exports).
 * Initializers keep the state-dict names ("self_attn.in_proj_weight",
 * "linear1.bias", "norm2.weight"); the shapes and the scale are named by
 * the node scope ("/self_attn/head_shape", "/self_attn/scale").
 *
 * A MultiheadAttention on its own (tg_onnx_export_n's query, key and value)
 * is the same attention with q, k and v projected apart: in_proj_weight and
 * in_proj_bias Split in three on axis 0 (or q_proj_weight, k_proj_weight,
 * v_proj_weight with kdim, vdim), each input laid out as (S, N, X) and
 * projected as a Linear; the cross-attention is the same.  Its masks are
 * graph inputs 3 (key_padding_mask) and 4 (attn_mask), and with
 * extra_outputs its weights, the Softmax's (N*H, L, S), are a second
 * output (attn_weights: as (N, H, L, S), averaged over the heads unless
 * per head).  The masks, graph inputs of a layer in torch's argument
 * order (encoder:
 * src_mask 1, src_key_padding_mask 2; decoder: tgt_mask 2, memory_mask 3,
 * tgt_key_padding_mask 4, memory_key_padding_mask 5; NULL where left out),
 * act on the scores (N*H, L, S) after the MatMul of q and k: a float
 * attention mask is Added, a u8 one becomes Where(Cast(mask, bool), -inf,
 * scores); a key padding mask (N, S) is Unsqueezed to (N, 1, S), Tiled
 * over the heads and Reshaped to (N*H, 1, S), then taken as a u8
 * attention mask is. */
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

int tg__onnx_child_site(const tg__onnx_site *s, const char *name, tg__onnx_site *c)
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
    TG_TRY(tg__onnx_child_site(s, name, &c));
    c.x = x;
    return emit(&c, y);
}

/* What one attention reads: query, key and value (one value for the
 * self-attention) and the masks (NULL: none); attn_bool and kpm_bool for
 * u8 ones. */
typedef struct attn_inputs {
    const char *q, *k, *v;
    const char *attn_mask, *key_padding_mask;
    bool attn_bool, kpm_bool;
} attn_inputs;

/* Where(Cast(mask, bool), -inf, s): the scores s with -inf where mask is
 * nonzero; *ninf the -inf initializer, made on the first call (NULL). */
static int mask_where(tg__onnx *g, const char *sc, const char *s, const char *mask,
                      const char **ninf, const char **y)
{
    const char *c = NULL;
    tg__onnx_node *n = NULL;
    if (!*ninf && !(*ninf = tg__onnx_const(g, sc, "ninf", -INFINITY))) return TG_ENOMEM;
    TG_TRY(tg__onnx_unary(g, sc, "Cast", mask, &n, &c));
    TG_TRY(tg__onnx_attr_int(g, n, "to", TG__ONNX_BOOL));
    return tg__onnx_add(g, NULL, y, sc, "Where", 3, (const char *const[]){c, *ninf, s});
}

/* The masks on the scores s (N*H, L, S): a float attn_mask added, a u8 one
 * -inf where nonzero; the key_padding_mask (N, S) as (N*H, 1, S) (Unsqueeze,
 * Tile over the heads, Reshape), or (S) unbatched: -inf where nonzero when
 * it or the attn_mask is u8 (torch 1.13 or-s the two as bools), else
 * added (MultiheadAttention's merge, nn/multihead_attention.c). */
static int masks(tg__onnx *g, const char *sc, const attn_inputs *in, bool batched, int64_t h,
                 const char *axis1, const char *s, const char **y)
{
    const char *ninf = NULL;   /* the -inf, made once */
    if (in->attn_mask && in->attn_bool) TG_TRY(mask_where(g, sc, s, in->attn_mask, &ninf, &s));
    else if (in->attn_mask)
        TG_TRY(tg__onnx_add(g, NULL, &s, sc, "Add", 2, (const char *const[]){s, in->attn_mask}));
    if (in->key_padding_mask) {
        const char *m = in->key_padding_mask;
        if (batched) {
            const char *reps = ints(g, sc, "kpm_repeats", 3, (const int64_t[]){1, h, 1});
            const char *shape = ints(g, sc, "kpm_shape", 3, (const int64_t[]){-1, 1, 0});
            if (!reps || !shape) return TG_ENOMEM;
            TG_TRY(tg__onnx_add(g, NULL, &m, sc, "Unsqueeze", 2, (const char *const[]){m, axis1}));
            TG_TRY(tg__onnx_add(g, NULL, &m, sc, "Tile", 2, (const char *const[]){m, reps}));
            TG_TRY(tg__onnx_add(g, NULL, &m, sc, "Reshape", 2, (const char *const[]){m, shape}));
        }
        if (in->kpm_bool || (in->attn_mask && in->attn_bool))
            TG_TRY(mask_where(g, sc, s, m, &ninf, &s));
        else
            TG_TRY(tg__onnx_add(g, NULL, &s, sc, "Add", 2, (const char *const[]){s, m}));
    }
    *y = s;
    return TG_OK;
}

/* x as (L, N, X): batch_first's Transpose (1, 0, 2), or unbatched
 * Unsqueeze axis 1. */
static int seq_first(tg__onnx *g, const char *sc, const char *x, bool batched, bool batch_first,
                     const char *axis1, const char **y)
{
    *y = x;
    if (!batched)
        return tg__onnx_add(g, NULL, y, sc, "Unsqueeze", 2, (const char *const[]){x, axis1});
    return batch_first ? transpose3(g, sc, x, 1, 0, 2, y) : TG_OK;
}

/* The projections of q, k, v apart: in_proj_weight and in_proj_bias Split
 * in three on axis 0 (or q/k/v_proj_weight with kdim, vdim), each input
 * laid out as (L, N, X) and multiplied by its weight. */
static int projections(const tg__onnx_site *a, const attn_inputs *in, bool packed,
                       bool batched, bool batch_first, const char *split, const char *axis1,
                       const char **qkv)
{
    tg__onnx *g = a->g;
    const char *sc = a->scope, *w[3] = {NULL}, *b[3] = {"", "", ""}, *p = NULL;
    const char *const x[3] = {in->q, in->k, in->v};
    tg__onnx_node *n = NULL;
    if (packed) {
        TG_TRY(tg__onnx_param(a, "in_proj_weight", &p));
        TG_TRY(tg__onnx_add(g, &n, &w[0], sc, "Split", 2, (const char *const[]){p, split}));
        TG_TRY(tg__onnx_add_output(g, n, sc, &w[1]));
        TG_TRY(tg__onnx_add_output(g, n, sc, &w[2]));
        TG_TRY(tg__onnx_attr_int(g, n, "axis", 0));
    } else {
        static const char *const names[3] = {"q_proj_weight", "k_proj_weight", "v_proj_weight"};
        for (int i = 0; i < 3; i++) TG_TRY(tg__onnx_param(a, names[i], &w[i]));
    }
    TG_TRY(tg__onnx_param(a, "in_proj_bias", &p));
    if (p[0]) {
        TG_TRY(tg__onnx_add(g, &n, &b[0], sc, "Split", 2, (const char *const[]){p, split}));
        TG_TRY(tg__onnx_add_output(g, n, sc, &b[1]));
        TG_TRY(tg__onnx_add_output(g, n, sc, &b[2]));
        TG_TRY(tg__onnx_attr_int(g, n, "axis", 0));
    }
    for (int i = 0; i < 3; i++) {
        const char *t = NULL;
        TG_ASSERT(w[i][0] != '\0');
        TG_TRY(seq_first(g, sc, x[i], batched, batch_first, axis1, &t));
        TG_TRY(tg__onnx_linear(g, sc, t, 3, w[i], b[i], &qkv[i]));
    }
    return TG_OK;
}

/* The attention weights p (N*H, L, S) as torch's: Transpose (1, 2, 0) to
 * (L, S, N*H), Reshape (0, 0, -1, H) to (L, S, N, H), Transpose (2, 3, 0,
 * 1) to (N, H, L, S) (the reshape keeps N, L and S free), then ReduceMean
 * over the heads unless per_head; unbatched, Squeeze axis 0. */
static int attn_weights(tg__onnx *g, const char *sc, const char *p, int64_t h, bool batched,
                        bool per_head, const char **y)
{
    const char *t = NULL;
    tg__onnx_node *n = NULL;
    const char *shape = ints(g, sc, "weights_shape", 4, (const int64_t[]){0, 0, -1, h});
    const char *axis0 = batched ? "" : ints(g, sc, "weights_axis", 1, (const int64_t[]){0});
    if (!shape || !axis0) return TG_ENOMEM;
    TG_TRY(transpose3(g, sc, p, 1, 2, 0, &t));
    TG_TRY(tg__onnx_add(g, NULL, &t, sc, "Reshape", 2, (const char *const[]){t, shape}));
    TG_TRY(tg__onnx_unary(g, sc, "Transpose", t, &n, &t));
    TG_TRY(tg__onnx_attr_ints(g, n, "perm", 4, (const int64_t[]){2, 3, 0, 1}));
    if (!per_head) {
        TG_TRY(tg__onnx_unary(g, sc, "ReduceMean", t, &n, &t));
        TG_TRY(tg__onnx_attr_ints(g, n, "axes", 1, (const int64_t[]){1}));
        TG_TRY(tg__onnx_attr_int(g, n, "keepdims", 0));
    }
    if (batched) {
        *y = t;
        return TG_OK;
    }
    return tg__onnx_add(g, NULL, y, sc, "Squeeze", 2, (const char *const[]){t, axis0});
}

/* The attention of site a (a MultiheadAttention, a->xt its query, in the
 * given layout) on in, as at the top of the file: one packed projection
 * for the self-attention, three otherwise.  weights, where not NULL,
 * receives the attention weights (attn_weights). */
static int attention_w(const tg__onnx_site *a, bool batch_first, const attn_inputs *in,
                       const char **y, const char **weights)
{
    int64_t e, h;
    tg_nn_multihead_attention_opts o;
    TG_TRY(tg_nn_multihead_attention_params(a->m, &e, &h, &o));
    TG_CHECK(!o.add_bias_kv && !o.add_zero_attn, TG_EUNSUPPORTED,
             "onnx_export: module '%s' (MultiheadAttention) with add_bias_kv or add_zero_attn "
             "is not supported", a->path[0] ? a->path : "<top>");
    const bool packed = o.kdim == e && o.vdim == e;
    const bool self = packed && !strcmp(in->q, in->k) && !strcmp(in->k, in->v);
    tg__onnx *g = a->g;
    const char *sc = a->scope;
    const bool batched = tg_tensor_ndim(a->xt) == 3;
    const int64_t d = e / h;
    const char *w = NULL, *b = NULL, *x = in->q, *t = NULL;
    const char *split = ints(g, sc, "qkv_split", 3, (const int64_t[]){e, e, e});
    const char *heads = ints(g, sc, "head_shape", 3, (const int64_t[]){0, -1, d});
    const char *merged = ints(g, sc, "merged_shape", 3, (const int64_t[]){0, -1, e});
    const char *axis1 = batched && !in->key_padding_mask
                            ? "" : ints(g, sc, "batch_axis", 1, (const int64_t[]){1});
    const char *scale = tg__onnx_const(g, sc, "scale", (float)sqrt((double)d));
    if (!split || !heads || !merged || !axis1 || !scale) return TG_ENOMEM;
    tg__onnx_node *n = NULL;
    const char *qkv[3] = {NULL};
    if (self) {
        TG_TRY(tg__onnx_param(a, "in_proj_weight", &w));
        TG_TRY(tg__onnx_param(a, "in_proj_bias", &b));
        TG_ASSERT(w[0] != '\0');
        /* (L, N, E), the packed in-projection, split into q, k, v */
        TG_TRY(seq_first(g, sc, x, batched, batch_first, axis1, &x));
        TG_TRY(tg__onnx_linear(g, sc, x, 3, w, b, &t));
        TG_TRY(tg__onnx_add(g, &n, &qkv[0], sc, "Split", 2, (const char *const[]){t, split}));
        TG_TRY(tg__onnx_add_output(g, n, sc, &qkv[1]));
        TG_TRY(tg__onnx_add_output(g, n, sc, &qkv[2]));
        TG_TRY(tg__onnx_attr_int(g, n, "axis", -1));
    } else {
        TG_TRY(projections(a, in, packed, batched, batch_first, split, axis1, qkv));
    }
    /* (N*H, L, d); k as (N*H, d, S) */
    for (int i = 0; i < 3; i++) {
        TG_TRY(tg__onnx_add(g, NULL, &t, sc, "Reshape", 2, (const char *const[]){qkv[i], heads}));
        TG_TRY(transpose3(g, sc, t, 1, i == 1 ? 2 : 0, i == 1 ? 0 : 2, &qkv[i]));
    }
    const char *q = NULL, *s = NULL, *p = NULL, *o2 = NULL;
    TG_TRY(tg__onnx_add(g, NULL, &q, sc, "Div", 2, (const char *const[]){qkv[0], scale}));
    TG_TRY(tg__onnx_add(g, NULL, &s, sc, "MatMul", 2, (const char *const[]){q, qkv[1]}));
    TG_TRY(masks(g, sc, in, batched, h, axis1, s, &s));
    TG_TRY(tg__onnx_unary(g, sc, "Softmax", s, &n, &p));
    TG_TRY(tg__onnx_attr_int(g, n, "axis", -1));
    if (weights)
        TG_TRY(attn_weights(g, sc, p, h, batched, tg__onnx_options(g)->mha_per_head_weights,
                            weights));
    TG_TRY(tg__onnx_add(g, NULL, &t, sc, "MatMul", 2, (const char *const[]){p, qkv[2]}));
    /* (L, N*H, d) -> (L, N, E) -> out_proj */
    TG_TRY(transpose3(g, sc, t, 1, 0, 2, &t));
    TG_TRY(tg__onnx_add(g, NULL, &o2, sc, "Reshape", 2, (const char *const[]){t, merged}));
    tg__onnx_site op;
    TG_TRY(tg__onnx_child_site(a, "out_proj", &op));
    op.x = o2;
    TG_TRY(tg__onnx_param(&op, "weight", &w));
    TG_TRY(tg__onnx_param(&op, "bias", &b));
    TG_ASSERT(w[0] != '\0');
    TG_TRY(tg__onnx_linear(g, op.scope, o2, 3, w, b, batched && !batch_first ? y : &t));
    if (!batched)
        return tg__onnx_add(g, NULL, y, sc, "Squeeze", 2, (const char *const[]){t, axis1});
    return batch_first ? transpose3(g, sc, t, 1, 0, 2, y) : TG_OK;
}

static int attention(const tg__onnx_site *a, bool batch_first, const attn_inputs *in,
                     const char **y)
{
    return attention_w(a, batch_first, in, y, NULL);
}

/* ff(x) = linear2(activation(linear1(x))): the dropouts are the identity
 * in eval. */
static int feed_forward(const tg__onnx_site *s, const char *x, const char **y)
{
    const char *t = NULL;
    TG_TRY(child_emit(s, "linear1", x, tg__onnx_emit_linear, &t));
    TG_TRY(child_emit(s, "activation", t, tg__onnx_emit_activation, &t));
    return child_emit(s, "linear2", t, tg__onnx_emit_linear, y);
}

/* Graph input i of s, or NULL when s has none there (an optional input
 * left out); *u8 (may be NULL) tells a u8 one. */
static const char *input_at(const tg__onnx_site *s, int i, bool *u8)
{
    if (i >= s->n || !s->xs[i]) return NULL;
    if (u8) *u8 = tg_tensor_dtype(s->xts[i]) == TG_U8;
    return s->xs[i];
}

/* The attention child `name` of layer s with query x and key and value
 * kv, its attn_mask graph input i_mask and key_padding_mask i_kpm. */
static int attn_block(const tg__onnx_site *s, const char *name, bool batch_first, const char *x,
                      const char *kv, int i_mask, int i_kpm, const char **y)
{
    tg__onnx_site a;
    TG_TRY(tg__onnx_child_site(s, name, &a));
    a.x = x;
    attn_inputs in = {x, kv, kv, NULL, NULL, false, false};
    in.attn_mask = input_at(s, i_mask, &in.attn_bool);
    in.key_padding_mask = input_at(s, i_kpm, &in.kpm_bool);
    return attention(&a, batch_first, &in, y);
}

/* Block k of layer s on x: the encoder layer's sa (graph inputs 1 and 2
 * its masks) and ff; the decoder layer's sa (masks 2 and 4), mha on the
 * memory, graph input 1 (masks 3 and 5), and ff. */
static int block(const tg__onnx_site *s, bool dec, bool batch_first, int k, const char *x,
                 const char **y)
{
    if (k == 0)
        return attn_block(s, "self_attn", batch_first, x, x, dec ? 2 : 1, dec ? 4 : 2, y);
    if (k == 1 && dec)
        return attn_block(s, "multihead_attn", batch_first, x, s->xs[1], 3, 5, y);
    return feed_forward(s, x, y);
}

/* An encoder (two blocks) or decoder (three) layer, block k with the
 * norm "norm<k+1>":
 *   post-norm:  x = norm(x + block(x))
 *   norm_first: x = x + block(norm(x)) */
static int layer(const tg__onnx_site *s, bool dec, bool norm_first, bool batch_first,
                 const char **y)
{
    const char *x = s->x;
    for (int k = 0; k < (dec ? 3 : 2); k++) {
        const char *norm = k == 0 ? "norm1" : k == 1 ? "norm2" : "norm3", *t = NULL, *r = NULL;
        if (norm_first) {
            TG_TRY(child_emit(s, norm, x, tg__onnx_emit_layer_norm, &t));
            TG_TRY(block(s, dec, batch_first, k, t, &t));
            TG_TRY(tg__onnx_add(s->g, NULL, &x, s->scope, "Add", 2, (const char *const[]){x, t}));
        } else {
            TG_TRY(block(s, dec, batch_first, k, x, &t));
            TG_TRY(tg__onnx_add(s->g, NULL, &r, s->scope, "Add", 2, (const char *const[]){x, t}));
            TG_TRY(child_emit(s, norm, r, tg__onnx_emit_layer_norm, &x));
        }
    }
    *y = x;
    return TG_OK;
}

int tg__onnx_emit_transformer_encoder_layer(const tg__onnx_site *s, const char **y)
{
    tg_nn_transformer_encoder_layer_opts o;
    TG_TRY(tg_nn_transformer_encoder_layer_params(s->m, NULL, NULL, &o));
    return layer(s, false, o.norm_first, o.batch_first, y);
}

int tg__onnx_emit_transformer_decoder_layer(const tg__onnx_site *s, const char **y)
{
    TG_ASSERT(s->n >= 2 && s->xs[1] != NULL);   /* tg__onnx_inputs_transformer_decoder */
    tg_nn_transformer_decoder_layer_opts o;
    TG_TRY(tg_nn_transformer_decoder_layer_params(s->m, NULL, NULL, &o));
    return layer(s, true, o.norm_first, o.batch_first, y);
}

int tg__onnx_emit_multihead_attention(const tg__onnx_site *s, const char **y)
{
    TG_ASSERT(s->n >= 3 && s->n <= 5);   /* tg__onnx_inputs_multihead_attention */
    tg_nn_multihead_attention_opts o;
    TG_TRY(tg_nn_multihead_attention_params(s->m, NULL, NULL, &o));
    attn_inputs in = {s->xs[0], s->xs[1], s->xs[2], NULL, NULL, false, false};
    in.key_padding_mask = input_at(s, 3, &in.kpm_bool);
    in.attn_mask = input_at(s, 4, &in.attn_bool);
    return attention_w(s, o.batch_first, &in, y, s->extra ? &s->extra[0] : NULL);
}

/* Graph input i of xs, NULL where left out. */
static tg_tensor *mha_at(int n, tg_tensor *const *xs, int i)
{
    return i < n ? xs[i] : NULL;
}

int tg__onnx_run_multihead_attention(tg_module *m, tg_tensor **y, tg_tensor **w,
                                     bool per_head, int n, tg_tensor *const *xs)
{
    tg_nn_mha_forward_opts fo = TG_NN_MHA_FORWARD_OPTS_INIT;
    fo.key_padding_mask = mha_at(n, xs, 3);
    fo.attn_mask = mha_at(n, xs, 4);
    fo.average_attn_weights = !per_head;
    return tg_nn_multihead_attention_forward(m, y, w, xs[0], xs[1], xs[2], &fo);
}

int tg__onnx_extra_multihead_attention(tg_module *m, const tg_onnx_options *opt, int n,
                                       tg_tensor *const *xs, tg_tensor **ys, const char **names,
                                       int *axes)
{
    tg_tensor *y = NULL;
    TG_TRY(tg__onnx_run_multihead_attention(m, &y, &ys[0], opt->mha_per_head_weights, n, xs));
    tg_tensor_release(y);
    names[0] = "attn_weights";
    axes[0] = tg_tensor_ndim(xs[0]) == 3 ? 0 : -1;   /* (N, L, S) or (N, H, L, S) */
    return 1;
}

/* TG_EDTYPE unless input i of module path is of one of the dtypes a, b. */
static int need_dtype(const tg_module *m, const char *path, tg_tensor *const *xs, int i,
                      const char *what, tg_dtype a, tg_dtype b)
{
    const tg_dtype dt = tg_tensor_dtype(xs[i]);
    TG_CHECK(dt == a || dt == b, TG_EDTYPE,
             "onnx_export: module '%s' (%s): graph input %d (%s) has dtype %s; it must be %s%s%s",
             path[0] ? path : "<top>", tg_module_type_name(m), i, what, tg_dtype_name(dt),
             tg_dtype_name(a), a == b ? "" : " or ", a == b ? "" : tg_dtype_name(b));
    return TG_OK;
}

/* The batch axis of a (.., N, ..) input laid out as the module's: 0
 * batch_first, 1 otherwise, -1 unbatched. */
static int batch_axis(const tg_tensor *x, bool batch_first)
{
    return tg_tensor_ndim(x) == 3 ? (batch_first ? 0 : 1) : -1;
}

/* TG_EDTYPE unless graph input i, where given, is an attention mask of
 * module path (f32, added, or u8) named what; axes[i] -1 (a mask has no
 * batch axis). */
static int attn_mask_input(const tg_module *m, const char *path, int n, tg_tensor *const *xs,
                           int i, const char *what, int *axes)
{
    if (i >= n) return TG_OK;
    axes[i] = -1;
    return xs[i] ? need_dtype(m, path, xs, i, what, TG_F32, TG_U8) : TG_OK;
}

/* TG_EDTYPE unless graph input i, where given, is a key padding mask (u8
 * or f32, (N, S) or (S) unbatched, its batch axis 0 or none). */
static int kpm_input(const tg_module *m, const char *path, int n, tg_tensor *const *xs, int i,
                     const char *what, int *axes)
{
    if (i >= n) return TG_OK;
    axes[i] = xs[i] && tg_tensor_ndim(xs[i]) == 2 ? 0 : -1;
    return xs[i] ? need_dtype(m, path, xs, i, what, TG_U8, TG_F32) : TG_OK;
}

int tg__onnx_inputs_multihead_attention(const tg_module *m, const char *path, int n,
                                        tg_tensor *const *xs, int *axes)
{
    const char *p = path[0] ? path : "<top>";
    TG_CHECK(n != 1, TG_EUNSUPPORTED,
             "onnx_export: module '%s' (%s) is not supported on its own: its forward takes "
             "query, key and value, and the exported graph has one input (tg_onnx_export_n of "
             "the module takes the three)", p, tg_module_type_name(m));
    TG_CHECK(n >= 3 && n <= 5, TG_EINVAL,
             "onnx_export: module '%s' (%s) takes the graph inputs (query, key, value[, "
             "key_padding_mask[, attn_mask]]), not %d", p, tg_module_type_name(m), n);
    tg_nn_multihead_attention_opts o;
    TG_TRY(tg_nn_multihead_attention_params(m, NULL, NULL, &o));
    static const char *const what[3] = {"query", "key", "value"};
    for (int i = 0; i < 3; i++) {
        TG_CHECK(xs[i] != NULL, TG_EINVAL, "onnx_export: module '%s' (%s): example_inputs[%d] "
                 "(%s) must not be NULL", p, tg_module_type_name(m), i, what[i]);
        TG_TRY(need_dtype(m, path, xs, i, what[i], TG_F32, TG_F32));
        axes[i] = batch_axis(xs[i], o.batch_first);
    }
    TG_TRY(kpm_input(m, path, n, xs, 3, "key_padding_mask", axes));
    TG_TRY(attn_mask_input(m, path, n, xs, 4, "attn_mask", axes));
    axes[n] = axes[0];
    return TG_OK;
}

int tg__onnx_inputs_encoder(const tg_module *m, const char *path, int n, tg_tensor *const *xs,
                            int *axes, bool batch_first)
{
    TG_CHECK(n >= 1 && n <= 3, TG_EINVAL,
             "onnx_export: module '%s' (%s) takes the graph inputs (src), (src, src_mask) or "
             "(src, src_mask, src_key_padding_mask), not %d", path[0] ? path : "<top>",
             tg_module_type_name(m), n);
    axes[0] = axes[n] = batch_axis(xs[0], batch_first);
    TG_TRY(attn_mask_input(m, path, n, xs, 1, "src_mask", axes));
    return kpm_input(m, path, n, xs, 2, "src_key_padding_mask", axes);
}

int tg__onnx_inputs_transformer_encoder_layer(const tg_module *m, const char *path, int n,
                                              tg_tensor *const *xs, int *axes)
{
    tg_nn_transformer_encoder_layer_opts o;
    TG_TRY(tg_nn_transformer_encoder_layer_params(m, NULL, NULL, &o));
    return tg__onnx_inputs_encoder(m, path, n, xs, axes, o.batch_first);
}

/* The two inputs a decoder or a Transformer cannot do without (first and
 * second, the graph's inputs as `sig` lists them, at most max of them):
 * checked, and their batch axes and the output's set. */
static int two_inputs(const tg_module *m, const char *path, int n, tg_tensor *const *xs,
                      int *axes, bool batch_first, const char *first, const char *second,
                      int max, const char *sig)
{
    const char *p = path[0] ? path : "<top>";
    TG_CHECK(n != 1, TG_EUNSUPPORTED,
             "onnx_export: module '%s' (%s) is not supported on its own: its forward takes "
             "%s and %s, and the exported graph has one input (tg_onnx_export_n of the "
             "module takes them)", p, tg_module_type_name(m), first, second);
    TG_CHECK(n >= 2 && n <= max && xs[1] != NULL, TG_EINVAL,
             "onnx_export: module '%s' (%s) takes the graph inputs %s, %s given, not %d", p,
             tg_module_type_name(m), sig, second, n);
    TG_TRY(need_dtype(m, path, xs, 1, second, TG_F32, TG_F32));
    axes[0] = axes[1] = axes[n] = batch_axis(xs[0], batch_first);
    return TG_OK;
}

int tg__onnx_inputs_decoder(const tg_module *m, const char *path, int n, tg_tensor *const *xs,
                            int *axes, bool batch_first)
{
    TG_TRY(two_inputs(m, path, n, xs, axes, batch_first, "tgt", "memory", 6,
                      "(tgt, memory[, tgt_mask[, memory_mask[, tgt_key_padding_mask[, "
                      "memory_key_padding_mask]]]])"));
    TG_TRY(attn_mask_input(m, path, n, xs, 2, "tgt_mask", axes));
    TG_TRY(attn_mask_input(m, path, n, xs, 3, "memory_mask", axes));
    TG_TRY(kpm_input(m, path, n, xs, 4, "tgt_key_padding_mask", axes));
    return kpm_input(m, path, n, xs, 5, "memory_key_padding_mask", axes);
}

int tg__onnx_inputs_transformer(const tg_module *m, const char *path, int n,
                                tg_tensor *const *xs, int *axes, bool batch_first)
{
    TG_TRY(two_inputs(m, path, n, xs, axes, batch_first, "src", "tgt", 8,
                      "(src, tgt[, src_mask[, tgt_mask[, memory_mask[, src_key_padding_mask[, "
                      "tgt_key_padding_mask[, memory_key_padding_mask]]]]]])"));
    static const char *const what[6] = {"src_mask", "tgt_mask", "memory_mask",
                                        "src_key_padding_mask", "tgt_key_padding_mask",
                                        "memory_key_padding_mask"};
    for (int i = 2; i < 5; i++) TG_TRY(attn_mask_input(m, path, n, xs, i, what[i - 2], axes));
    for (int i = 5; i < 8; i++) TG_TRY(kpm_input(m, path, n, xs, i, what[i - 2], axes));
    return TG_OK;
}

