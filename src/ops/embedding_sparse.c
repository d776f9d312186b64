/* src/ops/embedding_sparse.c - embedding(weight, indices) with sparse=true:
 * the forward of embedding.c, and a backward that gives weight's gradient as
 * a sparse COO tensor (tapegrad/sparse.h), as torch's
 * embedding_sparse_backward: one row per looked-up index, in the order of
 * the indices (a repeated index keeps each of its rows), the row of the
 * output's gradient g; indices equal to padding_idx are left out.
 *
 * The gradient is not made of recorded ops: with create_graph it is the
 * same sparse tensor, which requires no grad, as torch's (whose sparse
 * backward is not differentiable either).  double_backward is set so that a
 * create_graph backward through the op gives that tensor instead of being
 * refused. */
#include <string.h>

#include "ops/embedding_internal.h"
#include "ops/families.h"

/* dW as a sparse (V, D) tensor of g's rows, padding_idx's left out. */
static int embedding_sparse_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    tg_tensor *idx;
    TG_TRY(tg__ctx_saved(ctx, 0, &idx));
    const emb_params *p = tg__ctx_params(ctx);
    const tg_meta *wm = tg__ctx_input_meta(ctx, 0);
    const int64_t V = wm->shape[0], D = wm->shape[1], m = tg_tensor_numel(idx);
    int64_t *iv = NULL;
    TG_TRY(tg__embedding_read_indices("embedding", idx, V, &iv));
    int64_t nnz = 0;
    for (int64_t k = 0; k < m; k++) nnz += iv[k] != p->padding_idx;
    const size_t es = tg_dtype_size(g->dtype);
    tg_tensor *ix = tg__tensor_uninit(TG_I64, 2, (int64_t[]){1, nnz});
    tg_tensor *v = ix ? tg__tensor_uninit(g->dtype, 2, (int64_t[]){nnz, D}) : NULL;
    void *gv = v ? tg__malloc((size_t)(m * D > 0 ? m * D : 1) * es) : NULL;
    if (!gv) {
        free(iv);
        tg_tensor_release(ix);
        tg_tensor_release(v);
        return TG_ENOMEM;
    }
    tg__gather(g, g->dtype, gv);   /* g's rows, contiguous, bits unchanged */
    int64_t *io = tg_tensor_data(ix);
    char *vo = tg_tensor_data(v);
    for (int64_t k = 0, q = 0; k < m; k++) {
        if (iv[k] == p->padding_idx) continue;
        io[q] = iv[k];
        memcpy(vo + (size_t)(q * D) * es, (char *)gv + (size_t)(k * D) * es, (size_t)D * es);
        q++;
    }
    free(iv);
    free(gv);
    tg_tensor *w = tg__sparse_new(g->dtype, 2, (int64_t[]){V, D}, ix, v, false);
    if (!w) return TG_ENOMEM;
    gi[0] = w;
    return TG_OK;
}

static const tg_op_schema embedding_sparse_op = {
    .name = "embedding_sparse", .arity = 2, .amp = TG_AMP_KEEP,
    .forward = tg__embedding_forward, .backward = embedding_sparse_backward,
    .double_backward = true,
    .vjp = "dweight = sparse COO: one row of g per index (none for padding_idx); "
           "the indices get none"};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__emb_sparse_ops[] = {&embedding_sparse_op};
_Static_assert(sizeof tg__emb_sparse_ops / sizeof tg__emb_sparse_ops[0] == TG__emb_sparse_N,
               "src/ops/families.h must count the sparse embedding op");

int tg__embedding_sparse_call(tg_tensor **out, tg_tensor *weight, tg_tensor *indices,
                              const emb_params *prm)
{
    tg_tensor *in[2] = {weight, indices};
    return tg_op_call(&embedding_sparse_op, out, 2, in, prm, sizeof *prm);
}
