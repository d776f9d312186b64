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
 * A MultiheadAttention on its own (tg_onnx_export_n's query, key and value)
 * is the same attention with q, k and v projected apart: in_proj_weight and
 * in_proj_bias Split in three on axis 0 (or q_proj_weight, k_proj_weight,
 * v_proj_weight with kdim, vdim), each input laid out as (S, N, X) and
 * projected as a Linear.  Its output is attn_output only (need_weights'
 * weights are not a graph output).  The masks, graph inputs of a
 * TransformerEncoderLayer, act on the scores (N*H, L, S) after the MatMul
 * of q and k: a float src_mask is Added, a u8 one becomes
 * Where(Cast(mask, bool), -inf, scores); a src_key_padding_mask (N, S) is
 * Unsqueezed to (N, 1, S), Tiled over the heads and Reshaped to
 * (N*H, 1, S), then taken as a u8 src_mask is. */
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

/* What one attention reads: query, key and value (one value for the
 * self-attention) and the masks (NULL: none); attn_bool for a u8 attn_mask. */
typedef struct attn_inputs {
    const char *q, *k, *v;
    const char *attn_mask, *key_padding_mask;
    bool attn_bool;
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
 * Tile over the heads, Reshape), or (S) unbatched, -inf where nonzero. */
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
        TG_TRY(mask_where(g, sc, s, m, &ninf, &s));
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

/* The attention of site a (a MultiheadAttention, a->xt its query, in the
 * given layout) on in, as at the top of the file: one packed projection
 * for the self-attention, three otherwise. */
static int attention(const tg__onnx_site *a, bool batch_first, const attn_inputs *in,
                     const char **y)
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

/* sa(x), the self-attention (dropout1 the identity in eval), with the
 * masks of s's graph inputs 1 and 2 when there are. */
static int sa_block(const tg__onnx_site *s, bool batch_first, const char *x, const char **y)
{
    tg__onnx_site a;
    TG_TRY(child_site(s, "self_attn", &a));
    a.x = x;
    attn_inputs in = {x, x, x, NULL, NULL, false};
    if (s->n > 1) {
        in.attn_mask = s->xs[1];
        in.attn_bool = tg_tensor_dtype(s->xts[1]) == TG_U8;
    }
    if (s->n > 2) in.key_padding_mask = s->xs[2];
    return attention(&a, batch_first, &in, y);
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

int tg__onnx_emit_multihead_attention(const tg__onnx_site *s, const char **y)
{
    TG_ASSERT(s->n == 3);   /* tg__onnx_inputs_multihead_attention */
    tg_nn_multihead_attention_opts o;
    TG_TRY(tg_nn_multihead_attention_params(s->m, NULL, NULL, &o));
    const attn_inputs in = {s->xs[0], s->xs[1], s->xs[2], NULL, NULL, false};
    return attention(s, o.batch_first, &in, y);
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

int tg__onnx_inputs_multihead_attention(const tg_module *m, const char *path, int n,
                                        tg_tensor *const *xs, int *axes)
{
    const char *p = path[0] ? path : "<top>";
    TG_CHECK(n != 1, TG_EUNSUPPORTED,
             "onnx_export: module '%s' (%s) is not supported on its own: its forward takes "
             "query, key and value, and the exported graph has one input (tg_onnx_export_n of "
             "the module takes the three)", p, tg_module_type_name(m));
    TG_CHECK(n == 3, TG_EINVAL,
             "onnx_export: module '%s' (%s) takes three graph inputs, query, key and value, "
             "not %d", p, tg_module_type_name(m), n);
    tg_nn_multihead_attention_opts o;
    TG_TRY(tg_nn_multihead_attention_params(m, NULL, NULL, &o));
    static const char *const what[3] = {"query", "key", "value"};
    for (int i = 0; i < 3; i++) {
        TG_TRY(need_dtype(m, path, xs, i, what[i], TG_F32, TG_F32));
        axes[i] = batch_axis(xs[i], o.batch_first);
    }
    axes[3] = axes[0];
    return TG_OK;
}

int tg__onnx_inputs_transformer_encoder_layer(const tg_module *m, const char *path, int n,
                                              tg_tensor *const *xs, int *axes)
{
    TG_CHECK(n >= 1 && n <= 3, TG_EINVAL,
             "onnx_export: module '%s' (%s) takes the graph inputs (src), (src, src_mask) or "
             "(src, src_mask, src_key_padding_mask), not %d", path[0] ? path : "<top>",
             tg_module_type_name(m), n);
    tg_nn_transformer_encoder_layer_opts o;
    TG_TRY(tg_nn_transformer_encoder_layer_params(m, NULL, NULL, &o));
    axes[0] = axes[n] = batch_axis(xs[0], o.batch_first);
    if (n > 1) {
        TG_TRY(need_dtype(m, path, xs, 1, "src_mask", TG_F32, TG_U8));
        axes[1] = -1;
    }
    if (n > 2) {
        TG_TRY(need_dtype(m, path, xs, 2, "src_key_padding_mask", TG_U8, TG_U8));
        axes[2] = tg_tensor_ndim(xs[2]) == 2 ? 0 : -1;
    }
    return TG_OK;
}
