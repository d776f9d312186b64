/* src/nn/transformer.c - nn.TransformerEncoderLayer (tapegrad/attention.h):
 * torch 1.13's children and forward, the post-norm
 *   x = norm1(x + sa(x)),  x = norm2(x + ff(x))
 * or with norm_first the pre-norm
 *   x = x + sa(norm1(x)),  x = x + ff(norm2(x))
 * where sa is self-attention followed by dropout1 and ff is linear1,
 * activation, dropout, linear2, dropout2.  Every part is a module whose
 * forward is differentiable to any order. */
#include <string.h>

#include "nn/module_internal.h"
#include "nn/transformer_internal.h"
#include "tapegrad/attention.h"

#define FWD "transformer_encoder_layer"

typedef struct tel_state {
    int64_t d_model, nhead;
    tg_nn_transformer_encoder_layer_opts o;   /* what it was made with */
} tel_state;

static int tel_forward_n(tg_module *m, tg_tensor **y, int n, tg_tensor *const *xs);

static const tg_module_vtable tel_vt = {
    .type_name = "TransformerEncoderLayer", .forward_n = tel_forward_n,
    .release = free, .state_size = sizeof(tel_state)};

static const char *const attns[2] = {"self_attn", "multihead_attn"};
static const char *const drops[3] = {"dropout1", "dropout2", "dropout3"};

void tg__transformer_add_seed(tg_module *m, uint64_t delta)
{
    const bool enc = m->vt == &tel_vt;
    uint64_t *own = enc ? &((tel_state *)m->state)->o.seed : tg__transformer_decoder_layer_seed(m);
    TG_ASSERT(own != NULL);
    const uint64_t seed = *own += delta;
    const int n_attn = enc ? 1 : 2;   /* the offsets of tg__transformer_children */
    for (int k = 0; k < n_attn; k++)
        tg__nn_dropout_set_seed(tg_module_child(m, attns[k]), seed + (uint64_t)k);
    tg__nn_dropout_set_seed(tg_module_child(m, "dropout"), seed + (uint64_t)n_attn);
    for (int i = 0; i <= n_attn; i++)
        tg__nn_dropout_set_seed(tg_module_child(m, drops[i]), seed + (uint64_t)(n_attn + 1 + i));
}

int tg__transformer_children(const char *fn, tg_module *m, int64_t d, int64_t nhead, int n_attn,
                             const tg_nn_transformer_encoder_layer_opts *o, tg_rng *rng)
{
    static const char *const norms[3] = {"norm1", "norm2", "norm3"};
    tg_nn_multihead_attention_opts ao = TG_NN_MULTIHEAD_ATTENTION_OPTS_INIT;
    ao.dropout = o->dropout;
    ao.batch_first = o->batch_first;
    tg_module *c = NULL;
    for (int k = 0; k < n_attn; k++) {
        ao.seed = o->seed + (uint64_t)k;
        TG_TRY(tg_nn_multihead_attention_new(&c, d, nhead, &ao, rng));
        TG_TRY(tg__module_add_child_as(fn, m, attns[k], c));
    }
    TG_TRY(tg_nn_linear_new(&c, d, o->dim_feedforward, true, rng));
    TG_TRY(tg__module_add_child_as(fn, m, "linear1", c));
    TG_TRY(tg_nn_dropout_new(&c, o->dropout, o->seed + (uint64_t)n_attn));
    TG_TRY(tg__module_add_child_as(fn, m, "dropout", c));
    TG_TRY(tg_nn_linear_new(&c, o->dim_feedforward, d, true, rng));
    TG_TRY(tg__module_add_child_as(fn, m, "linear2", c));
    for (int i = 0; i <= n_attn; i++) {
        TG_TRY(tg_nn_layer_norm_new(&c, 1, &d, o->layer_norm_eps, true));
        TG_TRY(tg__module_add_child_as(fn, m, norms[i], c));
    }
    for (int i = 0; i <= n_attn; i++) {
        TG_TRY(tg_nn_dropout_new(&c, o->dropout, o->seed + (uint64_t)(n_attn + 1 + i)));
        TG_TRY(tg__module_add_child_as(fn, m, drops[i], c));
    }
    TG_TRY(tg_nn_activation_new(&c, o->activation, 0.0));
    return tg__module_add_child_as(fn, m, "activation", c);
}

int tg_nn_transformer_encoder_layer_new(tg_module **out, int64_t d_model, int64_t nhead,
                                        const tg_nn_transformer_encoder_layer_opts *opts,
                                        tg_rng *rng)
{
    static const char fn[] = "nn_transformer_encoder_layer_new";
    TG_CHECK(out != NULL && rng != NULL, TG_EINVAL, "%s: out and rng must not be NULL", fn);
    tg_nn_transformer_encoder_layer_opts o = TG_NN_TRANSFORMER_ENCODER_LAYER_OPTS_INIT;
    if (opts) o = *opts;
    TG_TRY(tg__transformer_check(fn, d_model, nhead, o.dim_feedforward, o.dropout, o.activation,
                                 o.layer_norm_eps));
    const tel_state s = {.d_model = d_model, .nhead = nhead, .o = o};
    tg_module *m = NULL;
    TG_TRY(tg__module_new_state(&m, &tel_vt, &s));
    int rc = tg__transformer_children(fn, m, d_model, nhead, 1, &o, rng);
    if (rc < 0) {
        tg_module_release(m);
        return rc;
    }
    *out = m;
    return TG_OK;
}

int tg_nn_transformer_encoder_layer_params(const tg_module *m, int64_t *d_model, int64_t *nhead,
                                           tg_nn_transformer_encoder_layer_opts *opts)
{
    TG_CHECK(m != NULL, TG_EINVAL, "nn_transformer_encoder_layer_params: m must not be NULL");
    TG_CHECK(m->vt == &tel_vt, TG_EINVAL,
             "nn_transformer_encoder_layer_params: m is a %s module, not TransformerEncoderLayer",
             tg_module_type_name(m));
    const tel_state *s = m->state;
    if (d_model) *d_model = s->d_model;
    if (nhead) *nhead = s->nhead;
    if (opts) *opts = s->o;
    return TG_OK;
}

int tg__transformer_check(const char *fn, int64_t d_model, int64_t nhead, int64_t dim_feedforward,
                          double dropout, tg_activation activation, double layer_norm_eps)
{
    TG_CHECK(d_model >= 1 && nhead >= 1 && d_model % nhead == 0, TG_EINVAL,
             "%s: d_model=%lld must be >= 1 and divisible by nhead=%lld (>= 1)", fn,
             (long long)d_model, (long long)nhead);
    TG_CHECK(dim_feedforward >= 1, TG_EINVAL, "%s: dim_feedforward=%lld must be >= 1", fn,
             (long long)dim_feedforward);
    TG_CHECK(dropout >= 0.0 && dropout <= 1.0, TG_EINVAL, "%s: dropout=%g must be in [0, 1]",
             fn, dropout);
    TG_CHECK(activation == TG_ACT_RELU || activation == TG_ACT_GELU, TG_EINVAL,
             "%s: activation=%d must be TG_ACT_RELU or TG_ACT_GELU (torch's \"relu\", \"gelu\")",
             fn, (int)activation);
    TG_CHECK(layer_norm_eps > 0.0, TG_EINVAL, "%s: layer_norm_eps=%g must be > 0", fn,
             layer_norm_eps);
    return TG_OK;
}

/* y = child(x) for the named child of m. */
static int child(tg_module *m, const char *name, tg_tensor **y, tg_tensor *x)
{
    return tg_module_forward(tg_module_child(m, name), y, x);
}

int tg__transformer_attn_block(tg_module *m, const char *attn, const char *drop, tg_tensor **y,
                               tg_tensor *x, tg_tensor *kv, tg_tensor *mask, tg_tensor *kpm)
{
    const tg_nn_mha_forward_opts fo = {.key_padding_mask = kpm, .attn_mask = mask,
                                       .average_attn_weights = true};
    tg_tensor *a = NULL;
    TG_TRY(tg_nn_multihead_attention_forward(tg_module_child(m, attn), &a, NULL, x, kv, kv,
                                             &fo));
    int rc = child(m, drop, y, a);
    tg_tensor_release(a);
    return rc;
}

int tg__transformer_ff_block(tg_module *m, const char *drop, tg_tensor **y, tg_tensor *x)
{
    const char *const chain[5] = {"linear1", "activation", "dropout", "linear2", drop};
    tg_tensor *cur = tg_tensor_retain(x);
    for (int i = 0; i < 5; i++) {
        tg_tensor *next = NULL;
        int rc = child(m, chain[i], &next, cur);
        tg_tensor_release(cur);
        if (rc < 0) return rc;
        cur = next;
    }
    *y = cur;
    return TG_OK;
}

/* The forward at library depth, src checked. */
static int run(tg_module *m, tg_tensor **y, tg_tensor *x, tg_tensor *mask, tg_tensor *kpm)
{
    const bool pre = ((const tel_state *)m->state)->o.norm_first;
    bool fused = false;   /* the inference path (transformer_fast.c) */
    TG_TRY(tg__transformer_encoder_fast(m, pre, y, x, mask, kpm, &fused));
    if (fused) return TG_OK;
    enum { N1, SA, X1, N2, FF, X2, N_TMP };
    tg_tensor *t[N_TMP] = {NULL};
    int rc;
    if (pre) {
        TG_TRY_GOTO(child(m, "norm1", &t[N1], x));
        TG_TRY_GOTO(tg__transformer_attn_block(m, "self_attn", "dropout1", &t[SA], t[N1], t[N1],
                                               mask, kpm));
        TG_TRY_GOTO(tg_add(&t[X1], x, t[SA]));
        TG_TRY_GOTO(child(m, "norm2", &t[N2], t[X1]));
        TG_TRY_GOTO(tg__transformer_ff_block(m, "dropout2", &t[FF], t[N2]));
        TG_TRY_GOTO(tg_add(y, t[X1], t[FF]));
    } else {
        TG_TRY_GOTO(tg__transformer_attn_block(m, "self_attn", "dropout1", &t[SA], x, x, mask,
                                               kpm));
        TG_TRY_GOTO(tg_add(&t[N1], x, t[SA]));
        TG_TRY_GOTO(child(m, "norm1", &t[X1], t[N1]));
        TG_TRY_GOTO(tg__transformer_ff_block(m, "dropout2", &t[FF], t[X1]));
        TG_TRY_GOTO(tg_add(&t[X2], t[X1], t[FF]));
        TG_TRY_GOTO(child(m, "norm2", y, t[X2]));
    }
done:
    for (int i = 0; i < N_TMP; i++) tg_tensor_release(t[i]);
    return rc;
}

static int check_src(const tg_module *m, const tg_tensor *x)
{
    const int64_t d = ((const tel_state *)m->state)->d_model;
    char sx[96];
    tg_shape_str(sx, sizeof sx, x->ndim, x->shape);
    TG_CHECK((x->ndim == 2 || x->ndim == 3) && x->shape[x->ndim - 1] == d, TG_ESHAPE,
             FWD ": src is %s; it must be (S, N, d_model=%lld), (N, S, d_model) with "
             "batch_first, or (S, d_model)", sx, (long long)d);
    return TG_OK;
}

/* tg_module_forward_n: (src), (src, src_mask) or (src, src_mask,
 * src_key_padding_mask). */
static int tel_forward_n(tg_module *m, tg_tensor **y, int n, tg_tensor *const *xs)
{
    TG_CHECK(n <= 3, TG_EINVAL, FWD ": forward takes (src), (src, src_mask) or (src, src_mask, "
             "src_key_padding_mask); got %d inputs", n);
    TG_TRY(check_src(m, xs[0]));
    return run(m, y, xs[0], n > 1 ? xs[1] : NULL, n > 2 ? xs[2] : NULL);
}

int tg_nn_transformer_encoder_layer_forward(tg_module *m, tg_tensor **out, tg_tensor *src,
                                            tg_tensor *src_mask, tg_tensor *src_key_padding_mask)
{
    TG_CHECK(m != NULL && out != NULL && src != NULL, TG_EINVAL,
             FWD ": m, out and src must not be NULL");
    TG_CHECK(m->vt == &tel_vt, TG_EINVAL, FWD ": m is a %s module, not TransformerEncoderLayer",
             tg_module_type_name(m));
    TG_TRY(check_src(m, src));
    tg_tensor *y = NULL;
    tg__lib_enter();
    int rc = tg__module_compute(m);
    if (rc >= 0) rc = run(m, &y, src, src_mask, src_key_padding_mask);
    tg__lib_leave();
    if (rc < 0) return rc;
    *out = y;
    return tg__scope_capture(out, TG_OK);
}
