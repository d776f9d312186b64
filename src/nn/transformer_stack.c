/* src/nn/transformer_stack.c - nn.TransformerEncoder, nn.TransformerDecoder
 * and nn.Transformer (tapegrad/attention.h): torch 1.13's stacks of layers
 * (a "layers" ModuleList of deep copies, as _get_clones, and an optional
 * final "norm"), the encoder-decoder model with its _reset_parameters, and
 * generate_square_subsequent_mask.  The forwards run the layers' own
 * forwards, so they are differentiable to any order. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nn/module_internal.h"
#include "nn/transformer_internal.h"
#include "tapegrad/attention.h"
#include "tapegrad/init.h"

typedef struct stack_state {
    int64_t num_layers;
    bool has_norm;
} stack_state;

typedef struct tf_state {
    int64_t d_model, nhead;
    tg_nn_transformer_opts o;   /* what it was made with */
} tf_state;

static int enc_forward(tg_module *m, tg_tensor **y, tg_tensor *x);
static int dec_forward_n(tg_module *m, tg_tensor **y, int n, tg_tensor *const *xs);
static int tf_forward_n(tg_module *m, tg_tensor **y, int n, tg_tensor *const *xs);

/* torch's ModuleList: a container of numbered children, no forward. */
static const tg_module_vtable list_vt = {.type_name = "ModuleList"};
static const tg_module_vtable enc_vt = {
    .type_name = "TransformerEncoder", .forward = enc_forward, .release = free,
    .state_size = sizeof(stack_state)};
static const tg_module_vtable dec_vt = {
    .type_name = "TransformerDecoder", .forward_n = dec_forward_n, .n_inputs = 2,
    .release = free, .state_size = sizeof(stack_state)};
static const tg_module_vtable tf_vt = {
    .type_name = "Transformer", .forward_n = tf_forward_n, .n_inputs = 2, .release = free,
    .state_size = sizeof(tf_state)};

/* The stack m (made with vt): layers (num_layers copies of layer) and norm
 * (retained) when not NULL.  Copy i takes layer's seed + i * 2^32, so each
 * layer draws its own dropout masks, as torch's layers draw fresh ones
 * from one generator; the offsets within a layer (< 6) and the
 * Transformer's decoder offset (4) never reach another layer's seeds. */
static int stack_new(const char *fn, const tg_module_vtable *vt, tg_module **out,
                     const tg_module *layer, int64_t num_layers, tg_module *norm)
{
    TG_CHECK(num_layers >= 1 && num_layers <= 100000, TG_EINVAL,
             "%s: num_layers=%lld must be in [1, 100000]", fn, (long long)num_layers);
    const stack_state s = {.num_layers = num_layers, .has_norm = norm != NULL};
    tg_module *m = NULL, *list = NULL;
    TG_TRY(tg__module_new_state(&m, vt, &s));
    int rc = tg_module_new(&list, &list_vt, NULL);
    if (rc >= 0) rc = tg__module_add_child_as(fn, m, "layers", list);
    for (int64_t i = 0; i < num_layers && rc >= 0; i++) {
        tg_module *c = NULL;
        char name[24];
        snprintf(name, sizeof name, "%lld", (long long)i);
        rc = tg_module_copy(&c, layer);
        if (rc < 0) break;
        tg__transformer_add_seed(c, (uint64_t)i << 32);
        rc = tg__module_add_child_as(fn, list, name, c);
    }
    if (rc >= 0 && norm) rc = tg__module_add_child_as(fn, m, "norm", tg_module_retain(norm));
    if (rc < 0) {
        tg_module_release(m);
        return rc;
    }
    *out = m;
    return TG_OK;
}

int tg_nn_transformer_encoder_new(tg_module **out, const tg_module *encoder_layer,
                                  int64_t num_layers, tg_module *norm)
{
    static const char fn[] = "nn_transformer_encoder_new";
    TG_CHECK(out != NULL && encoder_layer != NULL, TG_EINVAL,
             "%s: out and encoder_layer must not be NULL", fn);
    TG_CHECK(tg_nn_transformer_encoder_layer_params(encoder_layer, NULL, NULL, NULL) == TG_OK,
             TG_EINVAL, "%s: encoder_layer is a %s module, not TransformerEncoderLayer", fn,
             tg_module_type_name(encoder_layer));
    return stack_new(fn, &enc_vt, out, encoder_layer, num_layers, norm);
}

int tg_nn_transformer_decoder_new(tg_module **out, const tg_module *decoder_layer,
                                  int64_t num_layers, tg_module *norm)
{
    static const char fn[] = "nn_transformer_decoder_new";
    TG_CHECK(out != NULL && decoder_layer != NULL, TG_EINVAL,
             "%s: out and decoder_layer must not be NULL", fn);
    TG_CHECK(tg_nn_transformer_decoder_layer_params(decoder_layer, NULL, NULL, NULL) == TG_OK,
             TG_EINVAL, "%s: decoder_layer is a %s module, not TransformerDecoderLayer", fn,
             tg_module_type_name(decoder_layer));
    return stack_new(fn, &dec_vt, out, decoder_layer, num_layers, norm);
}

int tg_nn_transformer_stack_params(const tg_module *m, int64_t *num_layers, bool *has_norm)
{
    TG_CHECK(m != NULL, TG_EINVAL, "nn_transformer_stack_params: m must not be NULL");
    TG_CHECK(m->vt == &enc_vt || m->vt == &dec_vt, TG_EINVAL,
             "nn_transformer_stack_params: m is a %s module, not TransformerEncoder or "
             "TransformerDecoder", tg_module_type_name(m));
    const stack_state *s = m->state;
    if (num_layers) *num_layers = s->num_layers;
    if (has_norm) *has_norm = s->has_norm;
    return TG_OK;
}

/* y = norm(x), or x itself (a new reference) without a norm. */
static int final_norm(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    tg_module *norm = tg_module_child(m, "norm");
    if (!norm) {
        *y = tg_tensor_retain(x);
        return TG_OK;
    }
    return tg_module_forward(norm, y, x);
}

/* The encoder's forward at library depth. */
static int enc_run(tg_module *m, tg_tensor **y, tg_tensor *src, tg_tensor *mask,
                   tg_tensor *kpm)
{
    tg_module *list = tg_module_child(m, "layers");
    tg_tensor *x = tg_tensor_retain(src);
    int rc = TG_OK;
    for (int i = 0; i < tg_module_child_count(list) && rc >= 0; i++) {
        tg_tensor *next = NULL;
        rc = tg_nn_transformer_encoder_layer_forward(tg_module_child_at(list, i), &next, x,
                                                     mask, kpm);
        tg_tensor_release(x);
        x = next;
    }
    if (rc >= 0) rc = final_norm(m, y, x);
    tg_tensor_release(x);
    return rc;
}

/* The decoder's forward at library depth. */
static int dec_run(tg_module *m, tg_tensor **y, tg_tensor *tgt, tg_tensor *mem,
                   const tg_nn_transformer_masks *mk)
{
    tg_module *list = tg_module_child(m, "layers");
    tg_tensor *x = tg_tensor_retain(tgt);
    int rc = TG_OK;
    for (int i = 0; i < tg_module_child_count(list) && rc >= 0; i++) {
        tg_tensor *next = NULL;
        rc = tg_nn_transformer_decoder_layer_forward(tg_module_child_at(list, i), &next, x,
                                                     mem, mk);
        tg_tensor_release(x);
        x = next;
    }
    if (rc >= 0) rc = final_norm(m, y, x);
    tg_tensor_release(x);
    return rc;
}

static int enc_forward(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    return enc_run(m, y, x, NULL, NULL);
}

static int dec_forward_n(tg_module *m, tg_tensor **y, int n, tg_tensor *const *xs)
{
    (void)n;
    const tg_nn_transformer_masks none = TG_NN_TRANSFORMER_MASKS_INIT;
    return dec_run(m, y, xs[0], xs[1], &none);
}

/* Leaves library depth after a public forward's body; *out = y on
 * success. */
static int finish(tg_tensor **out, int rc, tg_tensor *y)
{
    tg__lib_leave();
    if (rc < 0) {
        tg_tensor_release(y);
        return rc;
    }
    *out = y;
    return tg__scope_capture(out, TG_OK);
}

int tg_nn_transformer_encoder_forward(tg_module *m, tg_tensor **out, tg_tensor *src,
                                      tg_tensor *mask, tg_tensor *src_key_padding_mask)
{
    TG_CHECK(m != NULL && out != NULL && src != NULL, TG_EINVAL,
             "transformer_encoder: m, out and src must not be NULL");
    TG_CHECK(m->vt == &enc_vt, TG_EINVAL,
             "transformer_encoder: m is a %s module, not TransformerEncoder",
             tg_module_type_name(m));
    tg_tensor *y = NULL;
    tg__lib_enter();
    int rc = tg__module_compute(m);
    if (rc >= 0) rc = enc_run(m, &y, src, mask, src_key_padding_mask);
    return finish(out, rc, y);
}

int tg_nn_transformer_decoder_forward(tg_module *m, tg_tensor **out, tg_tensor *tgt,
                                      tg_tensor *memory, const tg_nn_transformer_masks *masks)
{
    static const char fn[] = "transformer_decoder";
    TG_CHECK(m != NULL && out != NULL && tgt != NULL && memory != NULL, TG_EINVAL,
             "%s: m, out, tgt and memory must not be NULL", fn);
    TG_CHECK(m->vt == &dec_vt, TG_EINVAL, "%s: m is a %s module, not TransformerDecoder", fn,
             tg_module_type_name(m));
    const tg_nn_transformer_masks none = TG_NN_TRANSFORMER_MASKS_INIT;
    if (!masks) masks = &none;
    TG_TRY(tg__nn_check_masks_unused(fn, masks));
    tg_tensor *y = NULL;
    tg__lib_enter();
    int rc = tg__module_compute(m);
    if (rc >= 0) rc = dec_run(m, &y, tgt, memory, masks);
    return finish(out, rc, y);
}

/* ---- nn.Transformer ---- */

/* torch's _reset_parameters: xavier_uniform_ on every parameter of rank
 * > 1, in parameter order. */
static int reset_parameters(tg_module *m, tg_rng *rng)
{
    tg_tensor **ps = NULL;
    int n = 0;
    TG_TRY(tg_module_parameters(m, &ps, &n));
    int rc = TG_OK;
    for (int i = 0; i < n && rc >= 0; i++)
        if (tg_tensor_ndim(ps[i]) > 1) rc = tg_init_xavier_uniform_(ps[i], 1.0, rng);
    free(ps);
    return rc;
}

/* The encoder (dec false) or decoder stack of a Transformer as child. */
static int tf_stack(tg_module *m, bool dec, int64_t d, int64_t nhead,
                    const tg_nn_transformer_opts *o, tg_rng *rng)
{
    static const char fn[] = "nn_transformer_new";
    tg_module *layer = NULL, *norm = NULL, *stack = NULL;
    if (dec) {
        const tg_nn_transformer_decoder_layer_opts lo = {
            o->dim_feedforward, o->dropout, o->activation, o->layer_norm_eps, o->batch_first,
            o->norm_first, o->seed + 4};
        TG_TRY(tg_nn_transformer_decoder_layer_new(&layer, d, nhead, &lo, rng));
    } else {
        const tg_nn_transformer_encoder_layer_opts lo = {
            o->dim_feedforward, o->dropout, o->activation, o->layer_norm_eps, o->batch_first,
            o->norm_first, o->seed};
        TG_TRY(tg_nn_transformer_encoder_layer_new(&layer, d, nhead, &lo, rng));
    }
    int rc = tg_nn_layer_norm_new(&norm, 1, &d, o->layer_norm_eps, true);
    if (rc >= 0)
        rc = dec ? tg_nn_transformer_decoder_new(&stack, layer, o->num_decoder_layers, norm)
                 : tg_nn_transformer_encoder_new(&stack, layer, o->num_encoder_layers, norm);
    tg_module_release(layer);
    tg_module_release(norm);
    if (rc < 0) return rc;
    return tg__module_add_child_as(fn, m, dec ? "decoder" : "encoder", stack);
}

int tg_nn_transformer_new(tg_module **out, int64_t d_model, int64_t nhead,
                          const tg_nn_transformer_opts *opts, tg_rng *rng)
{
    static const char fn[] = "nn_transformer_new";
    TG_CHECK(out != NULL && rng != NULL, TG_EINVAL, "%s: out and rng must not be NULL", fn);
    tg_nn_transformer_opts o = TG_NN_TRANSFORMER_OPTS_INIT;
    if (opts) o = *opts;
    TG_CHECK(o.num_encoder_layers >= 1 && o.num_decoder_layers >= 1, TG_EINVAL,
             "%s: num_encoder_layers=%lld and num_decoder_layers=%lld must be >= 1", fn,
             (long long)o.num_encoder_layers, (long long)o.num_decoder_layers);
    const tf_state s = {.d_model = d_model, .nhead = nhead, .o = o};
    tg_module *m = NULL;
    TG_TRY(tg__module_new_state(&m, &tf_vt, &s));
    int rc = tf_stack(m, false, d_model, nhead, &o, rng);
    if (rc >= 0) rc = tf_stack(m, true, d_model, nhead, &o, rng);
    if (rc >= 0) rc = reset_parameters(m, rng);
    if (rc < 0) {
        tg_module_release(m);
        return rc;
    }
    *out = m;
    return TG_OK;
}

int tg_nn_transformer_params(const tg_module *m, int64_t *d_model, int64_t *nhead,
                             tg_nn_transformer_opts *opts)
{
    TG_CHECK(m != NULL, TG_EINVAL, "nn_transformer_params: m must not be NULL");
    TG_CHECK(m->vt == &tf_vt, TG_EINVAL,
             "nn_transformer_params: m is a %s module, not Transformer", tg_module_type_name(m));
    const tf_state *s = m->state;
    if (d_model) *d_model = s->d_model;
    if (nhead) *nhead = s->nhead;
    if (opts) *opts = s->o;
    return TG_OK;
}

/* torch's checks of src and tgt. */
static int tf_check(const tg_module *m, const tg_tensor *src, const tg_tensor *tgt)
{
    const tf_state *s = m->state;
    TG_TRY(tg__nn_check_tgt_memory("transformer", s->d_model, tgt, "tgt", src, "src"));
    if (src->ndim == 3) {
        const int b = s->o.batch_first ? 0 : 1;
        TG_CHECK(src->shape[b] == tgt->shape[b], TG_ESHAPE,
                 "transformer: the batch sizes of src (%lld) and tgt (%lld) must be equal",
                 (long long)src->shape[b], (long long)tgt->shape[b]);
    }
    return TG_OK;
}

/* The Transformer's forward at library depth. */
static int tf_run(tg_module *m, tg_tensor **y, tg_tensor *src, tg_tensor *tgt,
                  const tg_nn_transformer_masks *mk)
{
    tg_tensor *mem = NULL;
    TG_TRY(enc_run(tg_module_child(m, "encoder"), &mem, src, mk->src_mask,
                   mk->src_key_padding_mask));
    tg_nn_transformer_masks dm = *mk;
    dm.src_mask = dm.src_key_padding_mask = NULL;
    int rc = dec_run(tg_module_child(m, "decoder"), y, tgt, mem, &dm);
    tg_tensor_release(mem);
    return rc;
}

static int tf_forward_n(tg_module *m, tg_tensor **y, int n, tg_tensor *const *xs)
{
    (void)n;
    TG_TRY(tf_check(m, xs[0], xs[1]));
    const tg_nn_transformer_masks none = TG_NN_TRANSFORMER_MASKS_INIT;
    return tf_run(m, y, xs[0], xs[1], &none);
}

int tg_nn_transformer_forward(tg_module *m, tg_tensor **out, tg_tensor *src, tg_tensor *tgt,
                              const tg_nn_transformer_masks *masks)
{
    TG_CHECK(m != NULL && out != NULL && src != NULL && tgt != NULL, TG_EINVAL,
             "transformer: m, out, src and tgt must not be NULL");
    TG_CHECK(m->vt == &tf_vt, TG_EINVAL, "transformer: m is a %s module, not Transformer",
             tg_module_type_name(m));
    TG_TRY(tf_check(m, src, tgt));
    const tg_nn_transformer_masks none = TG_NN_TRANSFORMER_MASKS_INIT;
    tg_tensor *y = NULL;
    tg__lib_enter();
    int rc = tg__module_compute(m);
    if (rc >= 0) rc = tf_run(m, &y, src, tgt, masks ? masks : &none);
    return finish(out, rc, y);
}

int tg_nn_transformer_square_subsequent_mask(tg_tensor **out, int64_t sz, tg_dtype dt)
{
    static const char fn[] = "nn_transformer_square_subsequent_mask";
    TG_CHECK(out != NULL && sz >= 0, TG_EINVAL, "%s: out must not be NULL and sz=%lld >= 0",
             fn, (long long)sz);
    TG_CHECK(tg_dtype_is_float(dt), TG_EDTYPE, "%s: dt=%s must be a float dtype", fn,
             tg_dtype_name(dt));
    tg_tensor *t = NULL;
    TG_TRY(tg_tensor_zeros(&t, dt, 2, (const int64_t[]){sz, sz}));
    for (int64_t i = 0; i < sz; i++)
        for (int64_t j = i + 1; j < sz; j++) {
            int rc = tg_tensor_set(t, (const int64_t[]){i, j}, -INFINITY);
            if (rc < 0) {
                tg_tensor_release(t);
                return rc;
            }
        }
    *out = t;
    return tg__scope_capture(out, TG_OK);
}
