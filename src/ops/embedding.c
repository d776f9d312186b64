/* src/ops/embedding.c - embedding(weight, indices): the rows of weight
 * (V, D) picked by integer indices of any shape, giving (..., D)
 * (torch.nn.functional.embedding without padding_idx or max_norm).
 *
 * Its gradient with respect to weight adds each row of g into the row its
 * index picked: dW[idx[k], :] += g[k, :] (rows picked twice get both).  That
 * is the op embedding_backward, linear in g, whose own gradient picks the
 * rows again: d/dg <embedding_backward(g), h> = embedding(h, idx).  Each is
 * the other's backward, so gradients of any order come from the pair. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "ops/families.h"
#include "ops/pointwise_internal.h"
#include "tapegrad/ops.h"

typedef struct emb_params {
    int64_t num_rows;   /* V: embedding_backward's result has V rows */
} emb_params;

static const tg_op_schema embedding_op, embedding_backward_op;

/* The indices as int64 (malloc'd), each checked to be in [0, V). */
static int read_indices(const char *op, const tg_tensor *idx, int64_t V, int64_t **out)
{
    int64_t m = tg_tensor_numel(idx);
    int64_t *v = tg__malloc((size_t)(m > 0 ? m : 1) * sizeof *v);
    if (!v) return TG_ENOMEM;
    tg__gather(idx, TG_I64, v);
    for (int64_t i = 0; i < m; i++) {
        if (v[i] < 0 || v[i] >= V) {
            int64_t bad = v[i];
            free(v);
            return tg__error(TG_EINVAL, "%s: indices[%lld]=%lld must be in [0, %lld)", op,
                             (long long)i, (long long)bad, (long long)V);
        }
    }
    *out = v;
    return TG_OK;
}

/* in[0] weight (V, D), in[1] indices (...). */
static int embedding_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                             const void *params)
{
    tg_tensor *w = in[0], *idx = in[1];
    TG_TRY(tg__ew_check_float("embedding", 0, w));
    TG_CHECK(idx != NULL, TG_EINVAL, "embedding: indices must not be NULL");
    TG_CHECK(!tg_dtype_is_float(idx->dtype), TG_EDTYPE,
             "embedding: indices have dtype %s; an integer dtype is needed",
             tg_dtype_name(idx->dtype));
    TG_CHECK(w->ndim == 2, TG_ESHAPE, "embedding: weight has %d dims; must be (V, D)", w->ndim);
    TG_CHECK(idx->ndim < TG_MAX_DIMS, TG_ESHAPE, "embedding: indices have %d dims; at most %d",
             idx->ndim, TG_MAX_DIMS - 1);
    const int64_t V = w->shape[0], D = w->shape[1], m = tg_tensor_numel(idx);
    int64_t *iv = NULL;
    TG_TRY(read_indices("embedding", idx, V, &iv));
    int64_t shape[TG_MAX_DIMS];
    memcpy(shape, idx->shape, sizeof(int64_t) * (size_t)idx->ndim);
    shape[idx->ndim] = D;
    tg_tensor *wc = NULL, *r = tg__tensor_uninit(w->dtype, idx->ndim + 1, shape);
    int rc = r ? tg_tensor_contiguous(&wc, w) : TG_ENOMEM;
    if (rc >= 0) {
        size_t row = (size_t)D * tg_dtype_size(w->dtype);
        const char *src = tg_tensor_cdata(wc);
        char *dst = tg_tensor_data(r);
        for (int64_t k = 0; k < m; k++) memcpy(dst + (size_t)k * row, src + (size_t)iv[k] * row, row);
        if (ctx) tg__ctx_save(ctx, idx);
        *out = r;
        r = NULL;
    }
    free(iv);
    tg_tensor_release(wc);
    tg_tensor_release(r);
    return rc;
}

/* in[0] g (..., D), in[1] indices (...): (V, D) with the rows of g added in. */
static int embedding_backward_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                                      const void *params)
{
    const emb_params *p = params;
    tg_tensor *g = in[0], *idx = in[1];
    const int64_t m = tg_tensor_numel(idx), D = g->shape[g->ndim - 1];
    int64_t *iv = NULL;
    TG_TRY(read_indices("embedding_backward", idx, p->num_rows, &iv));
    double *gv = tg__malloc((size_t)(m * D > 0 ? m * D : 1) * sizeof *gv);
    double *acc = tg__calloc((size_t)(p->num_rows * D > 0 ? p->num_rows * D : 1), sizeof *acc);
    tg_tensor *r = tg__tensor_uninit(g->dtype, 2, (int64_t[]){p->num_rows, D});
    int rc = gv && acc && r ? TG_OK : TG_ENOMEM;
    if (rc >= 0) {
        tg__gather(g, TG_F64, gv);
        for (int64_t k = 0; k < m; k++)
            for (int64_t j = 0; j < D; j++) acc[iv[k] * D + j] += gv[k * D + j];
        tg__scatter(r, TG_F64, acc);
        if (ctx) tg__ctx_save(ctx, idx);
        *out = r;
        r = NULL;
    }
    free(iv);
    free(gv);
    free(acc);
    tg_tensor_release(r);
    return rc;
}

static int call(const tg_op_schema *op, tg_tensor **out, tg_tensor *a, tg_tensor *idx, int64_t V)
{
    emb_params prm = {.num_rows = V};
    tg_tensor *in[2] = {a, idx};
    return tg_op_call(op, out, 2, in, &prm, sizeof prm);
}

/* dW = embedding_backward(g, indices). */
static int embedding_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    tg_tensor *idx;
    TG_TRY(tg__ctx_saved(ctx, 0, &idx));
    return call(&embedding_backward_op, &gi[0], g, idx, tg__ctx_input_meta(ctx, 0)->shape[0]);
}

/* dg = embedding(h, indices). */
static int embedding_backward_backward(tg_ctx *ctx, tg_tensor *h, tg_tensor **gi)
{
    tg_tensor *idx;
    TG_TRY(tg__ctx_saved(ctx, 0, &idx));
    return call(&embedding_op, &gi[0], h, idx, 0);
}

static const tg_op_schema embedding_op = {.name = "embedding", .arity = 2, .amp = TG_AMP_KEEP,
                                    .forward = embedding_forward,
                                    .backward = embedding_backward, .double_backward = true,
                                    .vjp = "dweight = g's rows added into the rows they were "
                                           "picked from (embedding_backward); "
                                           "the indices get none"};
static const tg_op_schema embedding_backward_op = {
    .name = "embedding_backward", .arity = 2, .amp = TG_AMP_KEEP,
    .forward = embedding_backward_forward, .backward = embedding_backward_backward,
    .double_backward = true,
    .vjp = "dg = the rows of its gradient at the indices (embedding)"};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__embedding_ops[] = {&embedding_op, &embedding_backward_op};
static_assert(sizeof tg__embedding_ops / sizeof tg__embedding_ops[0] == TG__embedding_N,
              "src/ops/families.h must count the embedding ops");

int tg_embedding(tg_tensor **out, tg_tensor *weight, tg_tensor *indices)
{
    return call(&embedding_op, out, weight, indices, 0);
}
