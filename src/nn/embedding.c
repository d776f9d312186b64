/* src/nn/embedding.c - nn.Embedding(V, D): weight (V, D) drawn from N(0, 1)
 * as torch initialises it, padding_idx's row then zeroed; forward picks the
 * rows of integer indices with the module's F.embedding options.  And
 * nn.Embedding.from_pretrained. */
#include <stdlib.h>

#include "core/core.h"
#include "nn/module_internal.h"
#include "ops/embedding_internal.h"
#include "tapegrad/nn.h"
#include "tapegrad/ops.h"

static int embedding_forward(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    return tg_embedding_ex(y, tg_module_find(m, "weight"), x, tg_module_state(m));
}

static const tg_module_vtable embedding_vt = {.type_name = "Embedding",
                                              .forward = embedding_forward,
                                              .release = free,
                                              .state_size = sizeof(tg_embedding_opts)};

int tg__nn_weight_module(tg_module **out, const tg_module_vtable *vt, const void *init,
                         tg_tensor *w)
{
    tg_module *m = NULL;
    int rc = tg__module_new_state(&m, vt, init);
    if (rc < 0) {
        tg_tensor_release(w);
        return rc;
    }
    rc = tg_module_add_parameter(m, "weight", w);   /* steals w */
    if (rc < 0) {
        tg_module_release(m);
        return rc;
    }
    *out = m;
    return TG_OK;
}

int tg__nn_embedding_check(tg_module **out, int64_t V, int64_t D, const tg_rng *rng,
                           const char *fn)
{
    TG_CHECK(out != NULL && rng != NULL, TG_EINVAL, "%s: out and rng must not be NULL", fn);
    TG_CHECK(V >= 1 && D >= 1, TG_EINVAL, "%s: num_embeddings=%lld and dim=%lld must be >= 1",
             fn, (long long)V, (long long)D);
    return TG_OK;
}

int tg__nn_embedding_weight(tg_tensor **w, int64_t V, int64_t D, int64_t padding_idx,
                            tg_rng *rng)
{
    TG_TRY(tg_tensor_zeros(w, TG_F32, 2, (int64_t[]){V, D}));
    int rc = tg_tensor_rand_normal(*w, rng, 0.0, 1.0);
    for (int64_t j = 0; j < D && rc >= 0 && padding_idx != TG_EMBEDDING_NO_PADDING; j++)
        rc = tg_tensor_set_flat(*w, padding_idx * D + j, 0.0);
    if (rc < 0) {
        tg_tensor_release(*w);
        *w = NULL;
    }
    return rc;
}

int tg__nn_pretrained_check(tg_module **out, const tg_tensor *embeddings, const char *fn)
{
    TG_CHECK(out != NULL && embeddings != NULL, TG_EINVAL,
             "%s: out and embeddings must not be NULL", fn);
    TG_CHECK(tg_tensor_ndim(embeddings) == 2, TG_ESHAPE,
             "%s: embeddings has %d dims; must be (num_embeddings, dim)", fn,
             tg_tensor_ndim(embeddings));
    TG_CHECK(tg_dtype_is_float(tg_tensor_dtype(embeddings)), TG_EDTYPE,
             "%s: embeddings has dtype %s; a float dtype is needed", fn,
             tg_dtype_name(tg_tensor_dtype(embeddings)));
    TG_CHECK(tg_tensor_dim(embeddings, 0) >= 1 && tg_tensor_dim(embeddings, 1) >= 1, TG_ESHAPE,
             "%s: embeddings is (%lld, %lld); both extents must be >= 1", fn,
             (long long)tg_tensor_dim(embeddings, 0), (long long)tg_tensor_dim(embeddings, 1));
    return TG_OK;
}

int tg_nn_embedding_new_ex(tg_module **out, int64_t num_embeddings, int64_t dim,
                           const tg_embedding_opts *opts, tg_rng *rng)
{
    const char *fn = "nn_embedding_new";
    TG_TRY(tg__nn_embedding_check(out, num_embeddings, dim, rng, fn));
    tg_embedding_opts o;
    TG_TRY(tg__embedding_opts(&o, opts, num_embeddings, fn));
    tg_tensor *w = NULL;
    TG_TRY(tg__nn_embedding_weight(&w, num_embeddings, dim, o.padding_idx, rng));
    return tg__nn_weight_module(out, &embedding_vt, &o, w);
}

int tg_nn_embedding_new(tg_module **out, int64_t num_embeddings, int64_t dim, tg_rng *rng)
{
    return tg_nn_embedding_new_ex(out, num_embeddings, dim, NULL, rng);
}

int tg_nn_embedding_from_pretrained(tg_module **out, tg_tensor *embeddings, bool freeze,
                                    const tg_embedding_opts *opts)
{
    const char *fn = "nn_embedding_from_pretrained";
    TG_TRY(tg__nn_pretrained_check(out, embeddings, fn));
    tg_embedding_opts o;
    TG_TRY(tg__embedding_opts(&o, opts, tg_tensor_dim(embeddings, 0), fn));
    tg_tensor *w = NULL;
    tg_module *m = NULL;
    TG_TRY(tg_tensor_clone(&w, embeddings));
    TG_TRY(tg__nn_weight_module(&m, &embedding_vt, &o, w));   /* a parameter requires grad */
    if (freeze) tg_tensor_set_requires_grad(tg_module_find(m, "weight"), false);
    *out = m;
    return TG_OK;
}

int tg_nn_embedding_options(const tg_module *m, tg_embedding_opts *opts)
{
    TG_CHECK(m != NULL && opts != NULL, TG_EINVAL,
             "nn_embedding_options: m and opts must not be NULL");
    TG_CHECK(m->vt == &embedding_vt, TG_EINVAL,
             "nn_embedding_options: m is a %s module, not an Embedding",
             tg_module_type_name(m));
    *opts = *(const tg_embedding_opts *)tg_module_state(m);
    return TG_OK;
}
