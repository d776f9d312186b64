/* src/onnx_export.c - tg_onnx_export: walk the module tree with the
 * example input, run each leaf module once (eval, no grad) to learn the
 * shapes, and append its nodes (onnx_nodes.c, onnx_qdq.c) to the graph
 * (onnx_graph.c), which is then written atomically.
 *
 * A leaf is recognised by its type name and read through the public
 * introspection calls, which also check that it is the library's module of
 * that name.  Containers: a Sequential runs its children in order; a module
 * whose whole content is one child (PyTorch's `self.net = Sequential(...)`
 * with `forward = self.net`) is exported as that child.  Every container's
 * own forward is checked to give the children's output on the example
 * input. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/core.h"
#include "nn/module_internal.h"
#include "onnx/onnx_graph.h"
#include "tapegrad/autograd.h"

static bool tg__onnx_same(const tg_tensor *a, const tg_tensor *b);

/* The identity in eval (Dropout, Dropout1d/2d/3d, Identity): no node.
 * The forward must have given its input back (a custom module may share
 * the name). */
static int tg__onnx_emit_pass(const tg__onnx_site *s, const char **y)
{
    TG_CHECK(s->yt == s->xt || tg__onnx_same(s->yt, s->xt), TG_EUNSUPPORTED,
             "onnx_export: module '%s' (%s) is not supported: its eval forward is not the "
             "identity", s->path[0] ? s->path : "<top>", tg_module_type_name(s->m));
    *y = s->x;
    return TG_OK;
}

/* refuse, where set, runs before the leaf's forward: it refuses a module
 * whose forward would change its state (the export changes none), or one
 * that has no ONNX form at all (emit NULL: refuse always refuses). */
/* inputs, where set, is the module's rule for the graph inputs of
 * tg_onnx_export_n (onnx_graph.h); without it a module takes one.  extra,
 * where set, gives the outputs beyond the first of extra_outputs. */
typedef struct tg__onnx_leaf {
    const char *type;
    int (*emit)(const tg__onnx_site *s, const char **y);
    int (*refuse)(const tg_module *m, const char *path);
    int (*inputs)(const tg_module *m, const char *path, int n, tg_tensor *const *xs,
                  int *axes);
    int (*extra)(tg_module *m, const tg_onnx_options *opt, int n, tg_tensor *const *xs,
                 tg_tensor **ys, const char **names, int *axes);
} tg__onnx_leaf;

static const tg__onnx_leaf tg__onnx_leaves[] = {
    {"Linear", tg__onnx_emit_linear, NULL, NULL, NULL},
    {"Embedding", tg__onnx_emit_embedding, tg__onnx_refuse_embedding, NULL, NULL},
    {"Conv", tg__onnx_emit_conv, NULL, NULL, NULL},
    {"ConvTranspose", tg__onnx_emit_conv, NULL, NULL, NULL},
    {"BatchNorm", tg__onnx_emit_batchnorm, NULL, NULL, NULL},
    {"LayerNorm", tg__onnx_emit_layer_norm, NULL, NULL, NULL},
    {"TransformerEncoderLayer", tg__onnx_emit_transformer_encoder_layer, NULL,
     tg__onnx_inputs_transformer_encoder_layer, NULL},
    {"TransformerEncoder", tg__onnx_emit_transformer_encoder, NULL,
     tg__onnx_inputs_transformer_encoder, NULL},
    {"TransformerDecoderLayer", tg__onnx_emit_transformer_decoder_layer, NULL,
     tg__onnx_inputs_transformer_decoder, NULL},
    {"TransformerDecoder", tg__onnx_emit_transformer_decoder, NULL,
     tg__onnx_inputs_transformer_decoder, NULL},
    {"Transformer", tg__onnx_emit_transformer, NULL, tg__onnx_inputs_transformer_model, NULL},
    {"MultiheadAttention", tg__onnx_emit_multihead_attention, NULL,
     tg__onnx_inputs_multihead_attention, tg__onnx_extra_multihead_attention},
    {"GroupNorm", tg__onnx_emit_group_norm, NULL, NULL, NULL},
    {"InstanceNorm1d", tg__onnx_emit_instance_norm, NULL, NULL, NULL},
    {"InstanceNorm2d", tg__onnx_emit_instance_norm, NULL, NULL, NULL},
    {"InstanceNorm3d", tg__onnx_emit_instance_norm, NULL, NULL, NULL},
    {"PReLU", tg__onnx_emit_prelu, NULL, NULL, NULL},
    {"ELU", tg__onnx_emit_elu, NULL, NULL, NULL},
    {"Hardtanh", tg__onnx_emit_hardtanh, NULL, NULL, NULL},
    {"ReLU6", tg__onnx_emit_hardtanh, NULL, NULL, NULL},
    {"Hardsigmoid", tg__onnx_emit_hardsigmoid, NULL, NULL, NULL},
    {"Hardswish", tg__onnx_emit_hardswish, NULL, NULL, NULL},
    {"Mish", tg__onnx_emit_mish, NULL, NULL, NULL},
    {"Softplus", tg__onnx_emit_softplus, NULL, NULL, NULL},
    {"LogSigmoid", tg__onnx_emit_logsigmoid, NULL, NULL, NULL},
    {"Softmax", tg__onnx_emit_softmax, NULL, NULL, NULL},
    {"LogSoftmax", tg__onnx_emit_softmax, NULL, NULL, NULL},
    {"Softmax2d", tg__onnx_emit_softmax, NULL, NULL, NULL},
    {"SELU", tg__onnx_emit_selu, NULL, NULL, NULL},
    {"CELU", tg__onnx_emit_celu, NULL, NULL, NULL},
    {"Hardshrink", tg__onnx_emit_shrink, NULL, NULL, NULL},
    {"Softshrink", tg__onnx_emit_shrink, NULL, NULL, NULL},
    {"Threshold", tg__onnx_emit_threshold, NULL, NULL, NULL},
    {"GLU", tg__onnx_emit_glu, NULL, NULL, NULL},
    {"Softsign", tg__onnx_emit_softsign, NULL, NULL, NULL},
    {"Tanhshrink", tg__onnx_emit_tanhshrink, NULL, NULL, NULL},
    {"Softmin", tg__onnx_emit_softmin, NULL, NULL, NULL},
    {"Flatten", tg__onnx_emit_reshape, NULL, NULL, NULL},
    {"Unflatten", tg__onnx_emit_reshape, NULL, NULL, NULL},
    {"PixelShuffle", tg__onnx_emit_pixel_shuffle, NULL, NULL, NULL},
    {"PixelUnshuffle", tg__onnx_emit_pixel_shuffle, NULL, NULL, NULL},
    {"Unfold", tg__onnx_emit_unfold, NULL, NULL, NULL},
    {"Fold", tg__onnx_emit_fold, NULL, NULL, NULL},
    {"Upsample", tg__onnx_emit_upsample, NULL, NULL, NULL},
    {"AvgPool1d", tg__onnx_emit_pool, NULL, NULL, NULL},
    {"AvgPool2d", tg__onnx_emit_pool, NULL, NULL, NULL},
    {"AvgPool3d", tg__onnx_emit_pool, NULL, NULL, NULL},
    {"MaxPool1d", tg__onnx_emit_pool, NULL, NULL, tg__onnx_extra_max_pool},
    {"MaxPool2d", tg__onnx_emit_pool, NULL, NULL, tg__onnx_extra_max_pool},
    {"MaxPool3d", tg__onnx_emit_pool, NULL, NULL, tg__onnx_extra_max_pool},
    {"MaxUnpool1d", tg__onnx_emit_max_unpool, NULL, tg__onnx_inputs_max_unpool, NULL},
    {"MaxUnpool2d", tg__onnx_emit_max_unpool, NULL, tg__onnx_inputs_max_unpool, NULL},
    {"MaxUnpool3d", tg__onnx_emit_max_unpool, NULL, tg__onnx_inputs_max_unpool, NULL},
    {"AdaptiveAvgPool1d", tg__onnx_emit_adaptive_pool, NULL, NULL, NULL},
    {"AdaptiveAvgPool2d", tg__onnx_emit_adaptive_pool, NULL, NULL, NULL},
    {"AdaptiveAvgPool3d", tg__onnx_emit_adaptive_pool, NULL, NULL, NULL},
    {"AdaptiveMaxPool1d", tg__onnx_emit_adaptive_pool, NULL, NULL, NULL},
    {"AdaptiveMaxPool2d", tg__onnx_emit_adaptive_pool, NULL, NULL, NULL},
    {"AdaptiveMaxPool3d", tg__onnx_emit_adaptive_pool, NULL, NULL, NULL},
    {"ConstantPad1d", tg__onnx_emit_pad, NULL, NULL, NULL},
    {"ConstantPad2d", tg__onnx_emit_pad, NULL, NULL, NULL},
    {"ConstantPad3d", tg__onnx_emit_pad, NULL, NULL, NULL},
    {"ZeroPad2d", tg__onnx_emit_pad, NULL, NULL, NULL},
    {"ReflectionPad1d", tg__onnx_emit_pad, NULL, NULL, NULL},
    {"ReflectionPad2d", tg__onnx_emit_pad, NULL, NULL, NULL},
    {"ReflectionPad3d", tg__onnx_emit_pad, NULL, NULL, NULL},
    {"ReplicationPad1d", tg__onnx_emit_pad, NULL, NULL, NULL},
    {"ReplicationPad2d", tg__onnx_emit_pad, NULL, NULL, NULL},
    {"ReplicationPad3d", tg__onnx_emit_pad, NULL, NULL, NULL},
    {"CircularPad1d", tg__onnx_emit_pad, NULL, NULL, NULL},
    {"CircularPad2d", tg__onnx_emit_pad, NULL, NULL, NULL},
    {"CircularPad3d", tg__onnx_emit_pad, NULL, NULL, NULL},
    {"RNN", tg__onnx_emit_rnn, tg__onnx_refuse_rnn, tg__onnx_inputs_rnn, tg__onnx_extra_rnn},
    {"LSTM", tg__onnx_emit_rnn, tg__onnx_refuse_rnn, tg__onnx_inputs_rnn, tg__onnx_extra_rnn},
    {"GRU", tg__onnx_emit_rnn, tg__onnx_refuse_rnn, tg__onnx_inputs_rnn, tg__onnx_extra_rnn},
    {"RNNCell", tg__onnx_emit_rnn_cell, NULL, tg__onnx_inputs_rnn_cell, tg__onnx_extra_rnn},
    {"LSTMCell", tg__onnx_emit_rnn_cell, NULL, tg__onnx_inputs_rnn_cell, tg__onnx_extra_rnn},
    {"GRUCell", tg__onnx_emit_rnn_cell, NULL, tg__onnx_inputs_rnn_cell, tg__onnx_extra_rnn},
    {"Dropout", tg__onnx_emit_pass, NULL, NULL, NULL},
    {"Dropout1d", tg__onnx_emit_pass, NULL, NULL, NULL},
    {"Dropout2d", tg__onnx_emit_pass, NULL, NULL, NULL},
    {"Dropout3d", tg__onnx_emit_pass, NULL, NULL, NULL},
    {"Identity", tg__onnx_emit_pass, NULL, NULL, NULL},
    {"QuantizedLinear", tg__onnx_emit_qdq, NULL, NULL, NULL},
    {"QuantizedConv", tg__onnx_emit_qdq, NULL, NULL, NULL},
    {"QuantizedConvTranspose", tg__onnx_emit_qdq, NULL, NULL, NULL},
    {"LPPool1d", tg__onnx_emit_lp_pool, NULL, NULL, NULL},
    {"LPPool2d", tg__onnx_emit_lp_pool, NULL, NULL, NULL},
    {"AlphaDropout", tg__onnx_emit_pass, NULL, NULL, NULL},
    {"FeatureAlphaDropout", tg__onnx_emit_pass, NULL, NULL, NULL},
    {"ChannelShuffle", tg__onnx_emit_channel_shuffle, NULL, NULL, NULL},
    {"LocalResponseNorm", tg__onnx_emit_local_response_norm, NULL, NULL, NULL},
    {"Bilinear", tg__onnx_emit_bilinear, NULL, tg__onnx_inputs_pair, NULL},
    {"CosineSimilarity", tg__onnx_emit_cosine_similarity, NULL, tg__onnx_inputs_pair, NULL},
    {"PairwiseDistance", tg__onnx_emit_pairwise_distance, NULL, tg__onnx_inputs_pair, NULL},
    {"SyncBatchNorm", tg__onnx_emit_sync_batchnorm, NULL, NULL, NULL},
    {"CrossEntropyLoss", tg__onnx_emit_loss_classes, tg__onnx_refuse_loss, tg__onnx_inputs_loss,
     NULL},
    {"NLLLoss", tg__onnx_emit_loss_classes, NULL, tg__onnx_inputs_loss, NULL},
    {"BCEWithLogitsLoss", tg__onnx_emit_bce_with_logits, NULL, tg__onnx_inputs_loss, NULL},
    {"KLDivLoss", tg__onnx_emit_kl_div, NULL, tg__onnx_inputs_loss, NULL},
};

/* A value of the graph: its name and tapegrad's tensor for it (owned);
 * with n > 0, n more (owned) that a module hands with it to the next one
 * taking them all (a MaxPool's indices to a MaxUnpool). */
typedef struct tg__onnx_val {
    const char *name;
    tg_tensor *t;
    int n;
    const char *more[TG__ONNX_MAX_EXTRA];
    tg_tensor *more_t[TG__ONNX_MAX_EXTRA];
} tg__onnx_val;

static void tg__onnx_val_release(tg__onnx_val *v)
{
    tg_tensor_release(v->t);
    for (int i = 0; i < v->n; i++) tg_tensor_release(v->more_t[i]);
    *v = (tg__onnx_val){0};
}

/* With extra_outputs on one graph input below a container: the last
 * module of the export (path: its state-dict path), whose outputs beyond
 * its first the walk collects there (ys owned, ne of them; vals their
 * values in the graph), as torch's Sequential returns its last module's
 * tuple. */
typedef struct tg__onnx_tail {
    const char *path;
    const tg_onnx_options *o;
    int ne;
    bool found;
    tg_tensor *ys[TG__ONNX_MAX_EXTRA];
    const char *vals[TG__ONNX_MAX_EXTRA], *dflt[TG__ONNX_MAX_EXTRA];
    int axes[TG__ONNX_MAX_EXTRA];
} tg__onnx_tail;

/* want: how many of m's outputs the next module takes (1, or all of a
 * module of several outputs). */
static int tg__onnx_walk(tg__onnx *g, tg_module *m, const char *path, const char *scope,
                         tg__onnx_val x, tg__onnx_val *y, tg__onnx_tail *tail, int want);

/* x.n > 0: the leaf takes x and x's more values as its inputs; want > 1:
 * it gives all its outputs to the next module. */
static int tg__onnx_leaf_export(tg__onnx *g, tg_module *m, const tg__onnx_leaf *leaf,
                                const char *path, const char *scope, tg__onnx_val x,
                                tg__onnx_val *y, tg__onnx_tail *tail, int want)
{
    if (leaf->refuse) TG_TRY(leaf->refuse(m, path));
    const int n = 1 + x.n;
    tg_tensor *xts[1 + TG__ONNX_MAX_EXTRA] = {x.t};
    const char *xs[1 + TG__ONNX_MAX_EXTRA] = {x.name};
    for (int i = 0; i < x.n; i++) {
        xts[1 + i] = x.more_t[i];
        xs[1 + i] = x.more[i];
    }
    int axes[2 + TG__ONNX_MAX_EXTRA];
    TG_CHECK(n == 1 || leaf->inputs, TG_EUNSUPPORTED,
             "onnx_export: module '%s' (%s) is not supported: it takes the %d outputs of the "
             "module before it, its export one input", path[0] ? path : "<top>",
             tg_module_type_name(m), n);
    if (leaf->inputs) TG_TRY(leaf->inputs(m, path, n, xts, axes));
    TG_ASSERT(leaf->emit != NULL);
    const bool last = tail && !strcmp(path, tail->path);
    TG_ASSERT(!last || leaf->extra != NULL);
    tg__onnx_val out = {.n = want - 1};
    tg_tensor *yts[1 + TG__ONNX_MAX_EXTRA] = {NULL};
    TG_TRY(want > 1 ? tg_module_forward_outputs(m, yts, n, xts)
           : n > 1  ? tg_module_forward_n(m, yts, n, xts)
                    : tg_module_forward(m, yts, x.t));
    tg__onnx_site s = {.g = g, .m = m, .path = path, .scope = scope, .x = x.name, .xt = x.t,
                       .yt = yts[0], .n = n > 1 ? n : 0, .xs = n > 1 ? xs : NULL,
                       .xts = n > 1 ? xts : NULL,
                       .extra = last ? tail->vals : want > 1 ? out.more : NULL};
    const char *yname = NULL;
    int rc = last ? leaf->extra(m, tail->o, n, xts, tail->ys, tail->dflt, tail->axes) : 0;
    if (rc >= 0 && last) {
        tail->ne = rc;
        tail->found = true;
    }
    if (rc >= 0) rc = leaf->emit(&s, &yname);
    for (int i = 1; rc >= 0 && i < want; i++)   /* a custom module under a leaf's name */
        if (!out.more[i - 1])
            rc = tg__error(TG_EUNSUPPORTED, "onnx_export: module '%s' (%s) is not supported: "
                           "it gives %d outputs to the next module, its export only the first",
                           path[0] ? path : "<top>", tg_module_type_name(m), want);
    if (rc < 0) {
        for (int i = 0; i < want; i++) tg_tensor_release(yts[i]);
        return rc;
    }
    out.name = yname;
    out.t = yts[0];
    for (int i = 1; i < want; i++) out.more_t[i - 1] = yts[i];
    *y = out;
    return TG_OK;
}

/* max |a - b| <= 1e-6 max(1, max |a|): a container computes what its
 * exported children do. */
static bool tg__onnx_same(const tg_tensor *a, const tg_tensor *b)
{
    if (!tg_tensor_same_shape(a, b) || tg_tensor_dtype(a) != tg_tensor_dtype(b)) return false;
    double diff = 0, mag = 1;
    for (int64_t i = 0, n = tg_tensor_numel(a); i < n; i++) {
        double u = 0, v = 0;
        tg_tensor_get_flat(a, i, &u);
        tg_tensor_get_flat(b, i, &v);
        diff = fmax(diff, fabs(u - v));
        mag = fmax(mag, fabs(u));
    }
    return diff <= 1e-6 * mag;
}

/* A Sequential's children in order, or a one-child wrapper's child; either
 * way the container's forward must give the same output on x (a custom
 * module may share the name "Sequential"). */
static int tg__onnx_container(tg__onnx *g, tg_module *m, bool seq, const char *path,
                              const char *scope, tg__onnx_val x, tg__onnx_val *y,
                              tg__onnx_tail *tail)
{
    TG_ASSERT(x.n == 0);   /* a container's forward takes one input */
    tg__onnx_val cur = {.name = x.name, .t = tg_tensor_retain(x.t)};
    int rc = TG_OK;
    const int nc = tg_module_child_count(m);
    for (int i = 0; i < nc && rc >= 0; i++) {
        const char *name = tg_module_child_name_at(m, i);
        const char *cpath = path[0] ? tg__onnx_str(g, "%s.%s", path, name)
                                    : tg__onnx_str(g, "%s", name);
        const char *cscope = tg__onnx_str(g, "%s/%s", scope, name);
        /* all of a child's outputs to a next child taking them, as the
         * Sequential's forward hands them (tg_nn_sequential_new) */
        tg_module *c = tg_module_child_at(m, i);
        const int k = tg_module_output_count(c);
        const bool all = seq && k > 1 && i + 1 < nc &&
                         tg_module_child_at(m, i + 1)->vt->n_inputs == k;
        tg__onnx_val next = {0};
        rc = !cpath || !cscope ? TG_ENOMEM
             : all && k > 1 + TG__ONNX_MAX_EXTRA
                 ? tg__error(TG_EUNSUPPORTED, "onnx_export: module '%s' (%s) is not "
                             "supported: it gives %d outputs to the next module, above %d",
                             cpath, tg_module_type_name(c), k, 1 + TG__ONNX_MAX_EXTRA)
                 : tg__onnx_walk(g, c, cpath, cscope, cur, &next, tail, all ? k : 1);
        tg__onnx_val_release(&cur);
        cur = next;
    }
    if (rc >= 0) {   /* the container's own forward computes what the graph does */
        tg_tensor *own = NULL;
        rc = tg_module_forward(m, &own, x.t);
        if (rc >= 0 && !tg__onnx_same(own, cur.t))
            rc = tg__error(TG_EUNSUPPORTED,
                           "onnx_export: module '%s' (%s) is not supported: its forward is not "
                           "%s", path[0] ? path : "<top>", tg_module_type_name(m),
                           seq ? "its children in order" : "its one child's");
        tg_tensor_release(own);
    }
    if (rc < 0) {
        tg__onnx_val_release(&cur);
        return rc;
    }
    *y = cur;
    return TG_OK;
}

/* A Sequential, or a module whose whole content is one child (an
 * AveragedModel's one child is its copy; n_averaged is not used). */
static bool tg__onnx_is_container(tg_module *m)
{
    const char *type = tg_module_type_name(m);
    const int n_children = tg_module_child_count(m);
    return !strcmp(type, "Sequential") || (n_children == 1 && !strcmp(type, "AveragedModel")) ||
           (n_children == 1 && tg_module_state(m) == NULL &&
            tg_module_state_count(m) == tg_module_state_count(tg_module_child_at(m, 0)));
}

/* m's row of tg__onnx_leaves, or NULL. */
static const tg__onnx_leaf *tg__onnx_find_leaf(const tg_module *m)
{
    for (size_t i = 0; i < sizeof tg__onnx_leaves / sizeof *tg__onnx_leaves; i++)
        if (!strcmp(tg_module_type_name(m), tg__onnx_leaves[i].type)) return &tg__onnx_leaves[i];
    return NULL;
}

static int tg__onnx_walk(tg__onnx *g, tg_module *m, const char *path, const char *scope,
                         tg__onnx_val x, tg__onnx_val *y, tg__onnx_tail *tail, int want)
{
    const char *type = tg_module_type_name(m);
    if (tg__onnx_is_container(m))
        return tg__onnx_container(g, m, !strcmp(type, "Sequential"), path, scope, x, y, tail);
    /* the activations of tg_nn_activation_new by what they are: their type
     * names (ReLU, GELU, Identity, ...) are torch's, shared by other modules */
    static const tg__onnx_leaf act = {"Activation", tg__onnx_emit_activation, NULL, NULL,
                                      NULL};
    if (tg__nn_is_basic_activation(m))
        return tg__onnx_leaf_export(g, m, &act, path, scope, x, y, tail, want);
    const tg__onnx_leaf *leaf = tg__onnx_find_leaf(m);
    if (leaf) return tg__onnx_leaf_export(g, m, leaf, path, scope, x, y, tail, want);
    return tg__error(TG_EUNSUPPORTED,
                     "onnx_export: module '%s' (%s) is not supported (docs/onnx.md lists the "
                     "modules that export)", path[0] ? path : "<top>", type);
}

int tg__onnx_emit_module(const tg__onnx_site *s, const char **y)
{
    tg__onnx_val out = {0};
    TG_TRY(tg__onnx_walk(s->g, s->m, s->path, s->scope,
                         (tg__onnx_val){.name = s->x, .t = (tg_tensor *)s->xt}, &out, NULL, 1));
    tg_tensor_release(out.t);
    *y = out.name;
    return TG_OK;
}

/* ---- training flags ---- */

typedef struct tg__onnx_flags {
    int n, cap;
    tg_module **m;
    bool *training;
} tg__onnx_flags;

/* Records the flags of m and its descendants, pre-order. */
static int tg__onnx_flags_save(tg__onnx_flags *f, tg_module *m)
{
    if (f->n == f->cap) {
        int cap = f->cap ? 2 * f->cap : 32;
        tg_module **mm = realloc(f->m, (size_t)cap * sizeof *mm);
        if (mm) f->m = mm;
        bool *tt = mm ? realloc(f->training, (size_t)cap * sizeof *tt) : NULL;
        if (!tt) return tg__error(TG_ENOMEM, "onnx_export: out of memory");
        f->training = tt;
        f->cap = cap;
    }
    f->m[f->n] = m;
    f->training[f->n++] = tg_module_is_training(m);
    for (int i = 0; i < tg_module_child_count(m); i++)
        TG_TRY(tg__onnx_flags_save(f, tg_module_child_at(m, i)));
    return TG_OK;
}

/* Sets them back: pre-order, so each module's own flag is set last. */
static void tg__onnx_flags_restore(tg__onnx_flags *f)
{
    for (int i = 0; i < f->n; i++) tg_module_train(f->m[i], f->training[i]);
    free(f->m);
    free(f->training);
}

/* ---- the public call ---- */

static int tg__onnx_check_args(const tg_module *m, int n, tg_tensor *const *xs,
                               const char *const *names, const char *path,
                               const tg_onnx_options *o)
{
    const char *op = "onnx_export";
    TG_CHECK(n >= 1 && n <= TG__ONNX_MAX_INPUTS, TG_EINVAL,
             "%s: n_inputs=%d must be in [1, %d]", op, n, TG__ONNX_MAX_INPUTS);
    TG_CHECK(m && xs && path, TG_EINVAL, "%s: m, example_input and path must not be NULL", op);
    TG_CHECK(o->opset == 17, TG_EINVAL, "%s: opt->opset=%d; only opset 17 is written", op,
             o->opset);
    TG_CHECK(o->input_name && o->input_name[0] && o->output_name && o->output_name[0] &&
                 strcmp(o->input_name, o->output_name) != 0 && o->graph_name,
             TG_EINVAL, "%s: opt->input_name and opt->output_name must be distinct, non-empty "
             "names (and graph_name set)", op);
    TG_CHECK(xs[0] != NULL, TG_EINVAL, "%s: example_inputs[0] must not be NULL", op);
    for (int i = 0; i < n; i++) {
        if (!xs[i]) continue;   /* an optional input left out: tg__onnx_build_n */
        TG_CHECK(!names || (names[i] && names[i][0] && strcmp(names[i], o->output_name)),
                 TG_EINVAL, "%s: input_names[%d] must be a non-empty name other than the "
                 "output's ('%s')", op, i, o->output_name);
        for (int j = 0; names && j < i; j++)
            TG_CHECK(!xs[j] || strcmp(names[i], names[j]) != 0, TG_EINVAL,
                     "%s: input_names[%d] and input_names[%d] are both '%s'", op, j, i,
                     names[i]);
        const tg_dtype dt = tg_tensor_dtype(xs[i]);
        char what[32] = "example_input";
        if (n > 1) snprintf(what, sizeof what, "example_inputs[%d]", i);
        TG_CHECK(dt == TG_F32 || dt == TG_I64 || dt == TG_I32 || (i > 0 && dt == TG_U8),
                 TG_EDTYPE, "%s: %s has dtype %s; the exported graph takes f32, or i64 / i32 "
                 "indices (an Embedding first)%s", op, what, tg_dtype_name(dt),
                 i > 0 ? ", or a u8 mask" : "");
    }
    TG_CHECK(tg_tensor_ndim(xs[0]) >= 1, TG_EINVAL,
             "%s: example_input must have a batch dim (it is 0-d)", op);
    return TG_OK;
}

static int tg__onnx_dt(const tg_tensor *t)
{
    const tg_dtype dt = tg_tensor_dtype(t);
    return dt == TG_I64 ? TG__ONNX_INT64 : dt == TG_I32 ? TG__ONNX_INT32
                                        : dt == TG_U8 ? TG__ONNX_UINT8 : TG__ONNX_FLOAT;
}

/* The graph's output: y renamed to the output name (after an Identity
 * when y is an input), its batch axis out_axis (-1: none). */
static int tg__onnx_finish(tg__onnx *g, tg__onnx_val y, int n, const char *const *names,
                           const tg_onnx_options *o, int out_axis)
{
    if (tg_tensor_dtype(y.t) != TG_F32)
        return tg__error(TG_EDTYPE, "onnx_export: the model's output has dtype %s, not f32",
                         tg_dtype_name(tg_tensor_dtype(y.t)));
    bool input = false;
    for (int i = 0; i < n; i++) input = input || (names[i] && !strcmp(y.name, names[i]));
    if (input)   /* the identity model */
        TG_TRY(tg__onnx_add(g, NULL, &y.name, "", "Identity", 1, (const char *const[]){y.name}));
    TG_TRY(tg__onnx_rename(g, y.name, o->output_name));
    return tg__onnx_io_axis(g, true, o->output_name, TG__ONNX_FLOAT, tg_tensor_ndim(y.t),
                            tg_tensor_shape(y.t), out_axis);
}

/* extra_outputs refused for m at path (type ok: at the top, else below). */
static int tg__onnx_refuse_extra(const tg_module *m, const char *path)
{
    return tg__error(TG_EUNSUPPORTED,
                     "onnx_export: extra_outputs: module '%s' (%s) is not supported: only an "
                     "RNN, LSTM, GRU, RNNCell, LSTMCell, GRUCell, MaxPoolNd or "
                     "MultiheadAttention at the top of the export, or an RNN, LSTM, GRU, cell "
                     "or MaxPoolNd last in a Sequential there, gives outputs beyond its first",
                     path[0] ? path : "<top>",
                     tg_module_type_name(m));
}

/* The last module of a container m, through nested containers: its path
 * in t->path; it must have an extra rule. */
static int tg__onnx_tail_find(tg__onnx *g, tg_module *m, tg__onnx_tail *t)
{
    const char *path = "";
    while (tg__onnx_is_container(m) && tg_module_child_count(m) > 0) {
        const int i = tg_module_child_count(m) - 1;
        const char *name = tg_module_child_name_at(m, i);
        path = path[0] ? tg__onnx_str(g, "%s.%s", path, name) : tg__onnx_str(g, "%s", name);
        if (!path) return TG_ENOMEM;
        m = tg_module_child_at(m, i);
    }
    const tg__onnx_leaf *leaf = tg__nn_is_basic_activation(m) ? NULL : tg__onnx_find_leaf(m);
    if (!leaf || !leaf->extra) return tg__onnx_refuse_extra(m, path);
    t->path = path;
    return TG_OK;
}

/* The top module's outputs beyond its first (extra_outputs): tapegrad's
 * ne of them in ys, which the emitter put in vals, become the graph outputs
 * of opt's extra_output_names or the extra rule's names. */
static int tg__onnx_finish_extra(tg__onnx *g, int ne, tg_tensor *const *ys,
                                 const char *const *vals, const char *const *dflt,
                                 const int *axes, int n, const char *const *names,
                                 const tg_onnx_options *o)
{
    const char *const *want = o->extra_output_names ? o->extra_output_names : dflt;
    for (int i = 0; i < ne; i++) {
        TG_ASSERT(vals[i] != NULL);   /* f32, or a MaxPool's i64 indices */
        TG_CHECK(want[i] && want[i][0] && strcmp(want[i], o->output_name), TG_EINVAL,
                 "onnx_export: extra output %d must have a non-empty name other than the "
                 "output's ('%s')", i, o->output_name);
        for (int j = 0; j < n; j++)
            TG_CHECK(!names[j] || strcmp(want[i], names[j]), TG_EINVAL,
                     "onnx_export: extra output %d and input %d are both named '%s'", i, j,
                     want[i]);
        for (int j = 0; j < i; j++)
            TG_CHECK(strcmp(want[i], want[j]), TG_EINVAL,
                     "onnx_export: extra outputs %d and %d are both named '%s'", j, i, want[i]);
        TG_TRY(tg__onnx_rename(g, vals[i], want[i]));
        TG_TRY(tg__onnx_io_axis(g, true, want[i], tg__onnx_dt(ys[i]), tg_tensor_ndim(ys[i]),
                                tg_tensor_shape(ys[i]), o->dynamic_batch ? axes[i] : -1));
    }
    return TG_OK;
}

/* Builds the graph of m on x in g; with extra_outputs (m a container) the
 * last module's outputs beyond its first are graph outputs too. */
static int tg__onnx_build(tg__onnx *g, tg_module *m, tg_tensor *x, const tg_onnx_options *o)
{
    tg__onnx_tail tail = {.o = o}, *tp = o->extra_outputs ? &tail : NULL;
    if (tp) TG_TRY(tg__onnx_tail_find(g, m, tp));
    TG_TRY(tg__onnx_io(g, false, o->input_name, tg__onnx_dt(x), tg_tensor_ndim(x),
                       tg_tensor_shape(x), o->dynamic_batch));
    tg__onnx_val y = {0};
    const tg__onnx_val in = {.name = o->input_name, .t = x};
    int rc = tg__onnx_walk(g, m, "", "", in, &y, tp, 1);
    if (rc >= 0) rc = tg__onnx_finish(g, y, 1, &o->input_name, o, o->dynamic_batch ? 0 : -1);
    if (rc >= 0 && tp) {
        TG_ASSERT(tail.found);
        rc = tg__onnx_finish_extra(g, tail.ne, tail.ys, tail.vals, tail.dflt, tail.axes, 1,
                                   &o->input_name, o);
    }
    tg_tensor_release(y.t);
    for (int i = 0; i < tail.ne; i++) tg_tensor_release(tail.ys[i]);
    return rc;
}

/* Builds the graph of m, a leaf taking n > 1 inputs (or any n with
 * extra_outputs; a container on one input: tg__onnx_build), on xs in g. */
static int tg__onnx_build_n(tg__onnx *g, tg_module *m, int n, tg_tensor *const *xs,
                            const char *const *names, const tg_onnx_options *o)
{
    const char *type = tg_module_type_name(m);
    if (n == 1 && tg__onnx_is_container(m)) return tg__onnx_build(g, m, xs[0], o);
    const tg__onnx_leaf *leaf = tg__onnx_find_leaf(m);
    if (o->extra_outputs && !(leaf && leaf->extra)) return tg__onnx_refuse_extra(m, "");
    /* a module of several inputs without an export (MSELoss) */
    TG_CHECK(leaf || tg__onnx_is_container(m) || tg__nn_is_basic_activation(m),
             TG_EUNSUPPORTED, "onnx_export: module '<top>' (%s) is not supported (docs/onnx.md "
             "lists the modules that export)", type);
    TG_CHECK(n == 1 || (leaf && leaf->inputs && !tg__nn_is_basic_activation(m)), TG_EINVAL,
             "onnx_export: module '<top>' (%s) takes one graph input, not %d (a "
             "MultiheadAttention, a module of the Transformer family, RNN, LSTM, GRU, "
             "Bilinear, CosineSimilarity, PairwiseDistance, MaxUnpoolNd, CrossEntropyLoss, "
             "NLLLoss, BCEWithLogitsLoss or KLDivLoss at the top takes several: docs/onnx.md)",
             type, n);
    /* the Transformer family's optional inputs may be left out (NULL), and
     * its forward takes the masks, which tg_module_forward_n does not; so
     * do a MultiheadAttention's masks after query, key and value */
    const bool family = !strncmp(type, "Transformer", strlen("Transformer"));
    const bool mha = !strcmp(type, "MultiheadAttention");
    for (int i = 1; i < n && !family; i++)
        TG_CHECK(xs[i] != NULL || (mha && i >= 3), TG_EINVAL,
                 "onnx_export: example_inputs[%d] must not be NULL", i);
    if (leaf->refuse) TG_TRY(leaf->refuse(m, ""));
    int axes[TG__ONNX_MAX_INPUTS + 1] = {0, 0};   /* a leaf of one input: batch axis 0 */
    if (leaf->inputs) TG_TRY(leaf->inputs(m, "", n, xs, axes));
    for (int i = 0; i < n; i++)
        if (xs[i])
            TG_TRY(tg__onnx_io_axis(g, false, names[i], tg__onnx_dt(xs[i]),
                                    tg_tensor_ndim(xs[i]), tg_tensor_shape(xs[i]),
                                    o->dynamic_batch ? axes[i] : -1));
    tg_tensor *yt = NULL, *ys[TG__ONNX_MAX_EXTRA] = {NULL};
    const char *vals[TG__ONNX_MAX_EXTRA] = {NULL}, *dflt[TG__ONNX_MAX_EXTRA] = {NULL};
    int ne = 0, eaxes[TG__ONNX_MAX_EXTRA];
    TG_TRY(family ? tg__onnx_run_transformer(m, &yt, n, xs)
           : mha  ? tg__onnx_run_multihead_attention(m, &yt, NULL, false, n, xs)
                  : tg_module_forward_n(m, &yt, n, xs));
    int rc = o->extra_outputs ? leaf->extra(m, o, n, xs, ys, dflt, eaxes) : 0;
    if (rc >= 0) ne = rc;
    tg__onnx_site s = {.g = g, .m = m, .path = "", .scope = "", .x = names[0], .xt = xs[0],
                       .yt = yt, .n = n, .xs = names, .xts = xs,
                       .extra = o->extra_outputs ? vals : NULL};
    tg__onnx_val y = {.t = yt};
    if (rc >= 0) rc = leaf->emit(&s, &y.name);
    if (rc >= 0) rc = tg__onnx_finish(g, y, n, names, o, o->dynamic_batch ? axes[n] : -1);
    if (rc >= 0) rc = tg__onnx_finish_extra(g, ne, ys, vals, dflt, eaxes, n, names, o);
    tg_tensor_release(yt);
    for (int i = 0; i < ne; i++) tg_tensor_release(ys[i]);
    return rc;
}

int tg_onnx_export_n(tg_module *m, int n_inputs, tg_tensor *const *example_inputs,
                     const char *const *input_names, const char *path,
                     const tg_onnx_options *opt)
{
    tg_onnx_options o = TG_ONNX_OPTIONS_INIT;
    if (opt) o = *opt;
    TG_TRY(tg__onnx_check_args(m, n_inputs, example_inputs, input_names, path, &o));
    const char *names[TG__ONNX_MAX_INPUTS];
    char dflt[TG__ONNX_MAX_INPUTS][24];
    for (int i = 0; i < n_inputs; i++) {
        snprintf(dflt[i], sizeof dflt[i], "input_%d", i);
        names[i] = !example_inputs[i] ? NULL
                   : input_names ? input_names[i] : n_inputs == 1 ? o.input_name : dflt[i];
    }
    o.input_name = names[0];
    tg__onnx_flags flags = {0};
    tg__onnx *g = NULL;
    int rc = tg__onnx_flags_save(&flags, m);
    if (rc >= 0) rc = tg__onnx_new(&g, &o);
    if (rc >= 0) {
        tg_module_train(m, false);
        tg_no_grad_begin();
        /* the forwards' tensors are the export's own, never a caller's scope's */
        tg__lib_enter();
        rc = n_inputs == 1 && !o.extra_outputs ? tg__onnx_build(g, m, example_inputs[0], &o)
                           : tg__onnx_build_n(g, m, n_inputs, example_inputs, names, &o);
        tg__lib_leave();
        tg_no_grad_end();
    }
    if (rc >= 0) rc = tg__onnx_write(g, path);
    tg__onnx_free(g);
    tg__onnx_flags_restore(&flags);
    return rc;
}

int tg_onnx_export(tg_module *m, tg_tensor *example_input, const char *path,
                   const tg_onnx_options *opt)
{
    return tg_onnx_export_n(m, 1, example_input ? &example_input : NULL, NULL, path, opt);
}

bool tg_onnx_available(void) { return true; }
