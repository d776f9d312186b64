/* src/ops/embedding_internal.h - the check of F.embedding's options
 * (embedding.c), shared by tg_embedding_ex and the Embedding module's
 * constructors (src/nn/embedding.c). */
#ifndef TAPEGRAD_OPS_EMBEDDING_INTERNAL_H
#define TAPEGRAD_OPS_EMBEDDING_INTERNAL_H

#include <stdint.h>

#include "autograd/tape.h"
#include "tapegrad/ops.h"

/* The params of the embedding ops (embedding.c, embedding_sparse.c). */
typedef struct emb_params {
    int64_t num_rows;      /* V: embedding_backward's result has V rows */
    int64_t padding_idx;   /* in [0, V), or -1 for none */
    bool scale_by_freq;    /* gradient rows divided by their index's count */
    bool adjoint;          /* embedding as embedding_backward's adjoint */
} emb_params;

/* The indices idx as int64 (*out malloc'd), each checked to be in [0, V):
 * TG_EINVAL naming op and the first index outside. */
int tg__embedding_read_indices(const char *op, const tg_tensor *idx, int64_t V, int64_t **out);
/* embedding's forward (in[0] weight (V, D), in[1] indices; params an
 * emb_params): the picked rows; saves the indices when ctx is given. */
int tg__embedding_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                          const void *params);
/* The embedding with a sparse weight gradient (embedding_sparse.c), called
 * by tg_embedding_ex for opts.sparse: prm's padding_idx only (scale_by_freq
 * is refused before). */
int tg__embedding_sparse_call(tg_tensor **out, tg_tensor *weight, tg_tensor *indices,
                              const emb_params *prm);

/* *o = opts (NULL: TG_EMBEDDING_OPTS_INIT) for a weight of V rows, its
 * padding_idx counted from the start; TG_EINVAL naming fn and the option
 * for a padding_idx outside [-V, V), a max_norm below 0 (or NaN), with
 * max_norm a norm_type not above 0, or sparse with scale_grad_by_freq. */
int tg__embedding_opts(tg_embedding_opts *o, const tg_embedding_opts *opts, int64_t V,
                       const char *fn);

#endif
