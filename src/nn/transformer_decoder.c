/* src/nn/transformer_decoder.c - nn.TransformerDecoderLayer
 * (tapegrad/attention.h): torch 1.13's children and forward, the post-norm
 *   x = norm1(x + sa(x)),  x = norm2(x + mha(x, mem)),  x = norm3(x + ff(x))
 * or with norm_first the pre-norm
 *   x = x + sa(norm1(x)),  x = x + mha(norm2(x), mem),  x = x + ff(norm3(x))
 * where sa is self-attention followed by dropout1, mha the attention over
 * the memory followed by dropout2, and ff is linear1, activation, dropout,
 * linear2, dropout3.  Every part is a module whose forward is
 * differentiable to any order.  In eval without gradients the layer runs
 * fused instead (tg__transformer_decoder_fast, transformer_fast.c). */
#include <string.h>

#include "nn/module_internal.h"
#include "nn/transformer_internal.h"
#include "tapegrad/attention.h"

#define FWD "transformer_decoder_layer"

typedef struct tdl_state {
    int64_t d_model, nhead;
    tg_nn_transformer_decoder_layer_opts o;   /* what it was made with */
} tdl_state;

static int tdl_forward_n(tg_module *m, tg_tensor **y, int n, tg_tensor *const *xs);

static const tg_module_vtable tdl_vt = {
    .type_name = "TransformerDecoderLayer", .forward_n = tdl_forward_n, .n_inputs = 2,
    .release = free, .state_size = sizeof(tdl_state)};

uint64_t *tg__transformer_decoder_layer_seed(tg_module *m)
{
    return m->vt == &tdl_vt ? &((tdl_state *)m->state)->o.seed : NULL;
}

int tg_nn_transformer_decoder_layer_new(tg_module **out, int64_t d_model, int64_t nhead,
                                        const tg_nn_transformer_decoder_layer_opts *opts,
                                        tg_rng *rng)
{
    static const char fn[] = "nn_transformer_decoder_layer_new";
    TG_CHECK(out != NULL && rng != NULL, TG_EINVAL, "%s: out and rng must not be NULL", fn);
    tg_nn_transformer_decoder_layer_opts o = TG_NN_TRANSFORMER_DECODER_LAYER_OPTS_INIT;
    if (opts) o = *opts;
    TG_TRY(tg__transformer_check(fn, d_model, nhead, o.dim_feedforward, o.dropout, o.activation,
                                 o.layer_norm_eps));
    const tdl_state s = {.d_model = d_model, .nhead = nhead, .o = o};
    tg_module *m = NULL;
    TG_TRY(tg__module_new_state(&m, &tdl_vt, &s));
    const tg_nn_transformer_encoder_layer_opts eo = {
        .dim_feedforward = o.dim_feedforward, .dropout = o.dropout, .activation = o.activation,
        .layer_norm_eps = o.layer_norm_eps, .batch_first = o.batch_first,
        .norm_first = o.norm_first, .seed = o.seed};
    int rc = tg__transformer_children(fn, m, d_model, nhead, 2, &eo, rng);
    if (rc < 0) {
        tg_module_release(m);
        return rc;
    }
    *out = m;
    return TG_OK;
}

int tg_nn_transformer_decoder_layer_params(const tg_module *m, int64_t *d_model, int64_t *nhead,
                                           tg_nn_transformer_decoder_layer_opts *opts)
{
    TG_CHECK(m != NULL, TG_EINVAL, "nn_transformer_decoder_layer_params: m must not be NULL");
    TG_CHECK(m->vt == &tdl_vt, TG_EINVAL,
             "nn_transformer_decoder_layer_params: m is a %s module, not TransformerDecoderLayer",
             tg_module_type_name(m));
    const tdl_state *s = m->state;
    if (d_model) *d_model = s->d_model;
    if (nhead) *nhead = s->nhead;
    if (opts) *opts = s->o;
    return TG_OK;
}

/* block k (0: sa, 1: mha, 2: ff) of x. */
static int block(tg_module *m, int k, tg_tensor **y, tg_tensor *x, tg_tensor *mem,
                 const tg_nn_transformer_masks *mk)
{
    if (k == 0)
        return tg__transformer_attn_block(m, "self_attn", "dropout1", y, x, x, mk->tgt_mask,
                                          mk->tgt_key_padding_mask);
    if (k == 1)
        return tg__transformer_attn_block(m, "multihead_attn", "dropout2", y, x, mem,
                                          mk->memory_mask, mk->memory_key_padding_mask);
    return tg__transformer_ff_block(m, "dropout3", y, x);
}

/* The forward at library depth, tgt and memory checked. */
static int run(tg_module *m, tg_tensor **y, tg_tensor *tgt, tg_tensor *mem,
               const tg_nn_transformer_masks *mk)
{
    static const char *const norms[3] = {"norm1", "norm2", "norm3"};
    const bool pre = ((const tdl_state *)m->state)->o.norm_first;
    bool fused = false;   /* the inference path (transformer_fast.c) */
    TG_TRY(tg__transformer_decoder_fast(m, pre, y, tgt, mem, mk, &fused));
    if (fused) return TG_OK;
    tg_tensor *x = tg_tensor_retain(tgt);
    int rc = TG_OK;
    for (int k = 0; k < 3 && rc >= 0; k++) {
        tg_tensor *n = NULL, *b = NULL, *s = NULL;
        if (pre) {   /* x = x + block(norm(x)) */
            rc = tg_module_forward(tg_module_child(m, norms[k]), &n, x);
            if (rc >= 0) rc = block(m, k, &b, n, mem, mk);
            if (rc >= 0) rc = tg_add(&s, x, b);
        } else {     /* x = norm(x + block(x)) */
            rc = block(m, k, &b, x, mem, mk);
            if (rc >= 0) rc = tg_add(&n, x, b);
            if (rc >= 0) rc = tg_module_forward(tg_module_child(m, norms[k]), &s, n);
        }
        tg_tensor_release(n);
        tg_tensor_release(b);
        tg_tensor_release(x);
        x = s;
    }
    if (rc < 0) {
        tg_tensor_release(x);
        return rc;
    }
    *y = x;
    return TG_OK;
}

/* tgt and memory: rank 3 (or 2 unbatched, both), d_model features. */
int tg__nn_check_tgt_memory(const char *fn, int64_t d, const tg_tensor *t, const char *tname,
                            const tg_tensor *mem, const char *mname)
{
    char st[96], sm[96];
    tg_shape_str(st, sizeof st, t->ndim, t->shape);
    tg_shape_str(sm, sizeof sm, mem->ndim, mem->shape);
    TG_CHECK((t->ndim == 2 || t->ndim == 3) && t->shape[t->ndim - 1] == d, TG_ESHAPE,
             "%s: %s is %s; it must be (T, N, d_model=%lld), (N, T, d_model) with "
             "batch_first, or (T, d_model)", fn, tname, st, (long long)d);
    TG_CHECK(mem->ndim == t->ndim && mem->shape[mem->ndim - 1] == d, TG_ESHAPE,
             "%s: %s is %s; with %s %s it must be of rank %d with d_model=%lld features",
             fn, mname, sm, tname, st, t->ndim, (long long)d);
    return TG_OK;
}

static int check(const tg_module *m, const tg_tensor *tgt, const tg_tensor *mem)
{
    const int64_t d = ((const tdl_state *)m->state)->d_model;
    return tg__nn_check_tgt_memory(FWD, d, tgt, "tgt", mem, "memory");
}

static int tdl_forward_n(tg_module *m, tg_tensor **y, int n, tg_tensor *const *xs)
{
    (void)n;
    TG_TRY(check(m, xs[0], xs[1]));
    const tg_nn_transformer_masks none = TG_NN_TRANSFORMER_MASKS_INIT;
    return run(m, y, xs[0], xs[1], &none);
}

int tg__nn_check_masks_unused(const char *fn, const tg_nn_transformer_masks *mk)
{
    TG_CHECK(mk->src_mask == NULL && mk->src_key_padding_mask == NULL, TG_EINVAL,
             "%s: masks->src_mask and masks->src_key_padding_mask must be NULL (a decoder "
             "has no src; they are the encoder's)", fn);
    return TG_OK;
}

int tg_nn_transformer_decoder_layer_forward(tg_module *m, tg_tensor **out, tg_tensor *tgt,
                                            tg_tensor *memory,
                                            const tg_nn_transformer_masks *masks)
{
    TG_CHECK(m != NULL && out != NULL && tgt != NULL && memory != NULL, TG_EINVAL,
             FWD ": m, out, tgt and memory must not be NULL");
    TG_CHECK(m->vt == &tdl_vt, TG_EINVAL, FWD ": m is a %s module, not TransformerDecoderLayer",
             tg_module_type_name(m));
    const tg_nn_transformer_masks none = TG_NN_TRANSFORMER_MASKS_INIT;
    if (!masks) masks = &none;
    TG_TRY(tg__nn_check_masks_unused(FWD, masks));
    TG_TRY(check(m, tgt, memory));
    tg_tensor *y = NULL;
    tg__lib_enter();
    int rc = tg__module_compute(m);
    if (rc >= 0) rc = run(m, &y, tgt, memory, masks);
    tg__lib_leave();
    if (rc < 0) return rc;
    *out = y;
    return tg__scope_capture(out, TG_OK);
}
