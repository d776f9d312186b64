/* src/nn/embedding_bag.c - nn.EmbeddingBag(V, D): weight (V, D) drawn from
 * N(0, 1) as torch initialises it, padding_idx's row then zeroed; forward
 * is tg_embedding_bag with the module's options.  And
 * nn.EmbeddingBag.from_pretrained. */
#include <stdlib.h>

#include "core/core.h"
#include "nn/module_internal.h"
#include "tapegrad/nn.h"
#include "tapegrad/ops.h"

/* (input), (input, per_sample_weights) for a 2-d input; (input, offsets),
 * (input, offsets, per_sample_weights) for a 1-d one. */
static int bag_forward(tg_module *m, tg_tensor **y, int n, tg_tensor *const *xs)
{
    TG_CHECK(n >= 1 && n <= 3, TG_EINVAL, "EmbeddingBag: forward takes 1 to 3 inputs (input, "
             "offsets, per_sample_weights), not %d", n);
    const bool two_d = tg_tensor_ndim(xs[0]) == 2;
    TG_CHECK(!two_d || n <= 2, TG_EINVAL, "EmbeddingBag: a 2-d input takes no offsets: "
             "(input) or (input, per_sample_weights)");
    tg_tensor *offsets = two_d ? NULL : n >= 2 ? xs[1] : NULL;
    tg_tensor *psw = two_d ? (n == 2 ? xs[1] : NULL) : n == 3 ? xs[2] : NULL;
    return tg_embedding_bag(y, tg_module_find(m, "weight"), xs[0], offsets, psw,
                            tg_module_state(m));
}

static const tg_module_vtable bag_vt = {.type_name = "EmbeddingBag",
                                        .forward_n = bag_forward,
                                        .release = free,
                                        .state_size = sizeof(tg_embedding_bag_opts)};

/* *o = opts (NULL: the defaults) for V rows, its padding_idx counted from
 * the start, checked as tg_embedding_bag checks them (messages name fn). */
static int bag_opts(tg_embedding_bag_opts *o, const tg_embedding_bag_opts *opts, int64_t V,
                    const char *fn)
{
    *o = opts ? *opts : (tg_embedding_bag_opts)TG_EMBEDDING_BAG_OPTS_INIT;
    TG_CHECK(o->mode == TG_EMBEDDING_BAG_SUM || o->mode == TG_EMBEDDING_BAG_MEAN ||
                 o->mode == TG_EMBEDDING_BAG_MAX, TG_EINVAL,
             "%s: mode=%d must be sum, mean or max", fn, (int)o->mode);
    TG_CHECK(o->mode != TG_EMBEDDING_BAG_MAX || (!o->sparse && !o->scale_grad_by_freq),
             TG_EINVAL, "%s: max mode does not support sparse weights or scaling the gradient "
             "by the frequency", fn);
    const int64_t pad = o->padding_idx;
    TG_CHECK(pad == TG_EMBEDDING_NO_PADDING || (pad >= -V && pad < V), TG_EINVAL,
             "%s: padding_idx=%lld must be within num_embeddings %lld", fn, (long long)pad,
             (long long)V);
    if (pad != TG_EMBEDDING_NO_PADDING && pad < 0) o->padding_idx = pad + V;
    return TG_OK;
}

int tg_nn_embedding_bag_new(tg_module **out, int64_t num_embeddings, int64_t dim,
                            const tg_embedding_bag_opts *opts, tg_rng *rng)
{
    const char *fn = "nn_embedding_bag_new";
    TG_TRY(tg__nn_embedding_check(out, num_embeddings, dim, rng, fn));
    tg_embedding_bag_opts o;
    TG_TRY(bag_opts(&o, opts, num_embeddings, fn));
    tg_tensor *w = NULL;
    TG_TRY(tg__nn_embedding_weight(&w, num_embeddings, dim, o.padding_idx, rng));
    return tg__nn_weight_module(out, &bag_vt, &o, w);
}

int tg_nn_embedding_bag_from_pretrained(tg_module **out, tg_tensor *embeddings, bool freeze,
                                        const tg_embedding_bag_opts *opts)
{
    const char *fn = "nn_embedding_bag_from_pretrained";
    TG_TRY(tg__nn_pretrained_check(out, embeddings, fn));
    tg_embedding_bag_opts o;
    TG_TRY(bag_opts(&o, opts, tg_tensor_dim(embeddings, 0), fn));
    tg_tensor *w = NULL;
    tg_module *m = NULL;
    TG_TRY(tg_tensor_clone(&w, embeddings));
    TG_TRY(tg__nn_weight_module(&m, &bag_vt, &o, w));   /* a parameter requires grad */
    if (freeze) tg_tensor_set_requires_grad(tg_module_find(m, "weight"), false);
    *out = m;
    return TG_OK;
}

int tg_nn_embedding_bag_options(const tg_module *m, tg_embedding_bag_opts *opts)
{
    TG_CHECK(m != NULL && opts != NULL, TG_EINVAL,
             "nn_embedding_bag_options: m and opts must not be NULL");
    TG_CHECK(m->vt == &bag_vt, TG_EINVAL,
             "nn_embedding_bag_options: m is a %s module, not an EmbeddingBag",
             tg_module_type_name(m));
    *opts = *(const tg_embedding_bag_opts *)tg_module_state(m);
    return TG_OK;
}
