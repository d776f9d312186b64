/* src/nn/embedding.c - nn.Embedding(V, D): weight (V, D) drawn from N(0, 1)
 * as torch initialises it; forward picks the rows of integer indices. */
#include "core/core.h"
#include "tapegrad/nn.h"
#include "tapegrad/ops.h"

static int embedding_forward(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    return tg_embedding(y, tg_module_find(m, "weight"), x);
}

static const tg_module_vtable embedding_vt = {.type_name = "Embedding",
                                              .forward = embedding_forward};

int tg_nn_embedding_new(tg_module **out, int64_t num_embeddings, int64_t dim, tg_rng *rng)
{
    TG_CHECK(out != NULL && rng != NULL, TG_EINVAL, "nn_embedding_new: out and rng must not be NULL");
    TG_CHECK(num_embeddings >= 1 && dim >= 1, TG_EINVAL,
             "nn_embedding_new: num_embeddings=%lld and dim=%lld must be >= 1",
             (long long)num_embeddings, (long long)dim);
    tg_module *m = NULL;
    tg_tensor *w = NULL;
    TG_TRY(tg_tensor_zeros(&w, TG_F32, 2, (int64_t[]){num_embeddings, dim}));
    int rc = tg_tensor_rand_normal(w, rng, 0.0, 1.0);
    if (rc >= 0) rc = tg_module_new(&m, &embedding_vt, NULL);
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
