/* src/ops/embedding.c - embedding(weight, indices): the rows of weight
 * (V, D) picked by integer indices of any shape, giving (..., D), as
 * torch.nn.functional.embedding with its padding_idx, scale_grad_by_freq and
 * max_norm (tg_embedding_ex).
 *
 * Its gradient with respect to weight adds each row of g into the row its
 * index picked: dW[idx[k], :] += g[k, :] (rows picked twice get both), where
 * no row goes into padding_idx's and, with scale_grad_by_freq, each row is
 * divided by the number of times its index occurs.  That is the op
 * embedding_backward, linear in g.  Its adjoint picks the rows again, the
 * same masks and divisions applied to them (embedding with `adjoint` set):
 * d/dg <embedding_backward(g), h> = embedding(h, idx, adjoint).  Each is the
 * other's backward, so gradients of any order come from the pair.
 *
 * max_norm is no part of the op: tg_embedding_ex first rescales the picked
 * rows of weight in place, outside the tape (torch's embedding_renorm_). */
#include <assert.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ops/embedding_internal.h"
#include "ops/families.h"
#include "ops/gather_internal.h"
#include "ops/pointwise_internal.h"
#include "tapegrad/ops.h"

static const tg_op_schema embedding_op, embedding_backward_op;

int tg__embedding_read_indices(const char *op, const tg_tensor *idx, int64_t V, int64_t **out)
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

/* The factor of picked row k in embedding_backward and its adjoint: 0 at
 * padding_idx, 1 / (the count of idx[k]) with scale_by_freq, else 1; NULL
 * in *out when every factor is 1.  The counts cover every index, the
 * padding index's too, as torch's. */
static int row_factors(const emb_params *p, const int64_t *iv, int64_t m, int64_t V,
                       double **out)
{
    *out = NULL;
    if (p->padding_idx < 0 && !p->scale_by_freq) return TG_OK;
    double *f = tg__malloc((size_t)(m > 0 ? m : 1) * sizeof *f);
    int64_t *count = p->scale_by_freq ? tg__calloc((size_t)V, sizeof *count) : NULL;
    if (!f || (p->scale_by_freq && !count)) {
        free(f);
        free(count);
        return TG_ENOMEM;
    }
    if (count)
        for (int64_t k = 0; k < m; k++) count[iv[k]]++;
    for (int64_t k = 0; k < m; k++)
        f[k] = iv[k] == p->padding_idx ? 0.0 : count ? 1.0 / (double)count[iv[k]] : 1.0;
    free(count);
    *out = f;
    return TG_OK;
}

/* The adjoint's rows of r (m, D) times their factors (row_factors), in
 * double, each rounded once to r's dtype. */
static int scale_rows(tg_tensor *r, const emb_params *p, const int64_t *iv, int64_t m, int64_t V,
                      int64_t D)
{
    double *f = NULL;
    TG_TRY(row_factors(p, iv, m, V, &f));
    if (!f) return TG_OK;
    double *v = tg__malloc((size_t)(m * D > 0 ? m * D : 1) * sizeof *v);
    if (!v) {
        free(f);
        return TG_ENOMEM;
    }
    tg__gather(r, TG_F64, v);
    for (int64_t k = 0; k < m; k++)
        for (int64_t j = 0; j < D; j++) v[k * D + j] = f[k] == 0.0 ? 0.0 : v[k * D + j] * f[k];
    tg__scatter(r, TG_F64, v);
    free(v);
    free(f);
    return TG_OK;
}

/* The forward's rules for its inputs; tg_embedding_ex checks them before max_norm writes to
 * the weight, so that a refused call changes nothing. */
static int check_inputs(const char *op, const tg_tensor *w, const tg_tensor *idx)
{
    TG_CHECK(w != NULL && idx != NULL, TG_EINVAL, "%s: weight and indices must not be NULL",
             op);
    TG_CHECK(w->ndim == 2, TG_ESHAPE, "%s: weight has %d dims; must be (V, D)", op, w->ndim);
    TG_TRY(tg__ew_check_float(op, 0, w));
    TG_CHECK(!tg_dtype_is_float(idx->dtype), TG_EDTYPE,
             "%s: indices have dtype %s; an integer dtype is needed", op,
             tg_dtype_name(idx->dtype));
    TG_CHECK(idx->ndim < TG_MAX_DIMS, TG_ESHAPE, "%s: indices have %d dims; at most %d", op,
             idx->ndim, TG_MAX_DIMS - 1);
    return TG_OK;
}

/* in[0] weight (V, D), in[1] indices (...). */
int tg__embedding_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                          const void *params)
{
    tg_tensor *w = in[0], *idx = in[1];
    TG_TRY(check_inputs("embedding", w, idx));
    const int64_t V = w->shape[0], D = w->shape[1], m = tg_tensor_numel(idx);
    const emb_params *p = params;
    TG_CHECK(p->padding_idx < V, TG_EINVAL, "embedding: padding_idx=%lld must be below V=%lld",
             (long long)p->padding_idx, (long long)V);
    int64_t *iv = NULL;
    TG_TRY(tg__embedding_read_indices("embedding", idx, V, &iv));
    int64_t shape[TG_MAX_DIMS];
    memcpy(shape, idx->shape, sizeof(int64_t) * (size_t)idx->ndim);
    shape[idx->ndim] = D;
    tg_tensor *wc = NULL, *r = tg__tensor_uninit(w->dtype, idx->ndim + 1, shape);
    int rc = r ? tg_tensor_contiguous(&wc, w) : TG_ENOMEM;
    if (rc >= 0) {
        size_t row = (size_t)D * tg_dtype_size(w->dtype);
        const char *src = tg_tensor_cdata(wc);
        char *dst = tg_tensor_data(r);
        for (int64_t k = 0; k < m; k++)
            memcpy(dst + (size_t)k * row, src + (size_t)iv[k] * row, row);
        if (p->adjoint) rc = scale_rows(r, p, iv, m, V, D);
        if (ctx && rc >= 0) tg__ctx_save(ctx, idx);
    }
    if (rc >= 0) {
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
    TG_TRY(tg__embedding_read_indices("embedding_backward", idx, p->num_rows, &iv));
    double *gv = tg__malloc((size_t)(m * D > 0 ? m * D : 1) * sizeof *gv), *f = NULL;
    double *acc = tg__calloc((size_t)(p->num_rows * D > 0 ? p->num_rows * D : 1), sizeof *acc);
    tg_tensor *r = tg__tensor_uninit(g->dtype, 2, (int64_t[]){p->num_rows, D});
    int rc = gv && acc && r ? row_factors(p, iv, m, p->num_rows, &f) : TG_ENOMEM;
    if (rc >= 0) {
        tg__gather(g, TG_F64, gv);
        for (int64_t k = 0; k < m; k++) {
            const double fk = f ? f[k] : 1.0;
            if (fk == 0.0) continue;   /* padding_idx's row gets nothing, NaN included */
            for (int64_t j = 0; j < D; j++) acc[iv[k] * D + j] += fk * gv[k * D + j];
        }
        tg__scatter(r, TG_F64, acc);
        if (ctx) tg__ctx_save(ctx, idx);
        *out = r;
        r = NULL;
    }
    free(iv);
    free(gv);
    free(f);
    free(acc);
    tg_tensor_release(r);
    return rc;
}

static int call(const tg_op_schema *op, tg_tensor **out, tg_tensor *a, tg_tensor *idx,
                const emb_params *prm)
{
    tg_tensor *in[2] = {a, idx};
    return tg_op_call(op, out, 2, in, prm, sizeof *prm);
}

/* dW = embedding_backward(g, indices) (of the adjoint: embedding_backward,
 * its adjoint's adjoint). */
static int embedding_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    tg_tensor *idx;
    TG_TRY(tg__ctx_saved(ctx, 0, &idx));
    emb_params prm = *(const emb_params *)tg__ctx_params(ctx);
    prm.num_rows = tg__ctx_input_meta(ctx, 0)->shape[0];
    prm.adjoint = false;
    return call(&embedding_backward_op, &gi[0], g, idx, &prm);
}

/* acc += embedding_backward(g, indices), touching only the rows the
 * indices pick (tg_op_backward_into_fn): the weight's gradient is (V, D)
 * and a batch picks a few rows of it.  Each picked row's terms fk * g[k]
 * are summed in double in k's order from 0, rounded once to the dtype and
 * added to acc's row as the engine adds (tg__sum_term): the bits of the
 * backward and the sum.  padding_idx's row (all of its terms skipped) is
 * left alone: the backward's +0 there would turn acc's -0 into +0. */
static int embedding_backward_into(tg_ctx *ctx, tg_tensor *g, tg_tensor *acc)
{
    tg_tensor *idx;
    TG_TRY(tg__ctx_saved(ctx, 0, &idx));
    const emb_params *p = tg__ctx_params(ctx);
    const int64_t V = acc->shape[0], D = acc->shape[1], m = tg_tensor_numel(idx);
    if (m == 0 || D == 0) return TG_OK;
    int64_t *iv = NULL, *slot = tg__malloc((size_t)V * sizeof *slot), *rows = NULL;
    double *gv = tg__malloc((size_t)(m * D) * sizeof *gv), *f = NULL, *sum = NULL;
    rows = tg__malloc((size_t)m * sizeof *rows);
    sum = tg__malloc((size_t)(m * D) * sizeof *sum);   /* (picked rows, D) */
    int rc = slot && gv && rows && sum ? tg__embedding_read_indices("embedding", idx, V, &iv)
                                       : TG_ENOMEM;
    if (rc >= 0) rc = row_factors(p, iv, m, V, &f);
    int64_t n = 0;
    if (rc >= 0) {
        tg__gather(g, TG_F64, gv);
        for (int64_t r = 0; r < V; r++) slot[r] = -1;
        for (int64_t k = 0; k < m; k++) {
            const double fk = f ? f[k] : 1.0;
            if (fk == 0.0) continue;   /* padding_idx's row gets nothing, NaN included */
            if (slot[iv[k]] < 0) {
                slot[iv[k]] = n;
                rows[n] = iv[k];
                memset(sum + n++ * D, 0, (size_t)D * sizeof *sum);
            }
            double *srow = sum + slot[iv[k]] * D;
            for (int64_t j = 0; j < D; j++) srow[j] += fk * gv[k * D + j];
        }
    }
    const tg_dtype dt = acc->dtype;
    char *ad = (char *)acc->storage->data;
    for (int64_t q = 0; rc >= 0 && q < n; q++)
        for (int64_t j = 0; j < D; j++) {
            const int64_t e = acc->offset + rows[q] * D + j;
            const double t = tg__round_to(dt, sum[q * D + j]);
            tg_dtype_store(dt, ad, e, tg__sum_term(dt, tg_dtype_load(dt, ad, e), t));
        }
    free(iv);
    free(slot);
    free(rows);
    free(gv);
    free(f);
    free(sum);
    return rc;
}

/* dg = embedding(h, indices) as embedding_backward's adjoint. */
static int embedding_backward_backward(tg_ctx *ctx, tg_tensor *h, tg_tensor **gi)
{
    tg_tensor *idx;
    TG_TRY(tg__ctx_saved(ctx, 0, &idx));
    emb_params prm = *(const emb_params *)tg__ctx_params(ctx);
    prm.adjoint = true;
    return call(&embedding_op, &gi[0], h, idx, &prm);
}

static const tg_op_schema embedding_op = {.name = "embedding", .arity = 2, .amp = TG_AMP_KEEP,
                                    .forward = tg__embedding_forward,
                                    .backward = embedding_backward, .double_backward = true,
                                    .vjp = "dweight = g's rows added into the rows they were "
                                           "picked from (embedding_backward; none into "
                                           "padding_idx's, each divided by its index's "
                                           "count with scale_grad_by_freq); "
                                           "the indices get none",
                                    .backward_into = embedding_backward_into};
static const tg_op_schema embedding_backward_op = {
    .name = "embedding_backward", .arity = 2, .amp = TG_AMP_KEEP,
    .forward = embedding_backward_forward, .backward = embedding_backward_backward,
    .double_backward = true,
    .vjp = "dg = the rows of its gradient at the indices (embedding), "
           "padding_idx's 0, divided by the counts with scale_grad_by_freq"};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__embedding_ops[] = {&embedding_op, &embedding_backward_op};
static_assert(sizeof tg__embedding_ops / sizeof tg__embedding_ops[0] == TG__embedding_N,
              "src/ops/families.h must count the embedding ops");

int tg_embedding(tg_tensor **out, tg_tensor *weight, tg_tensor *indices)
{
    return call(&embedding_op, out, weight, indices, &(emb_params){.padding_idx = -1});
}

/* torch's embedding_renorm_: each row that indices pick (once however
 * often) whose norm_type-norm is above max_norm times max_norm / (norm +
 * 1e-7), in place, the product in the weight's compute type (f32 for the
 * float dtypes but f64) and rounded once; the weight's version is bumped. */
static int renorm_rows(tg_tensor *w, const int64_t *iv, int64_t m, double max_norm, double p)
{
    const int64_t V = w->shape[0], D = w->shape[1];
    bool *seen = tg__calloc((size_t)V, sizeof *seen);
    double *row = tg__malloc((size_t)D * sizeof *row);
    int rc = seen && row ? TG_OK : TG_ENOMEM;
    for (int64_t k = 0; k < m && rc >= 0; k++) {
        const int64_t r = iv[k];
        if (seen[r]) continue;
        seen[r] = true;
        double norm = 0;
        for (int64_t j = 0; j < D && rc >= 0; j++) rc = tg_tensor_get_flat(w, r * D + j, &row[j]);
        for (int64_t j = 0; j < D; j++) {
            const double a = fabs(row[j]);
            norm = isinf(p) ? fmax(norm, a) : p == 1 ? norm + a : p == 2 ? norm + a * a
                                                                         : norm + pow(a, p);
        }
        norm = isinf(p) || p == 1 ? norm : p == 2 ? sqrt(norm) : pow(norm, 1 / p);
        if (rc < 0 || !(norm > max_norm)) continue;
        double scale = max_norm / (norm + 1e-7);
        if (w->dtype != TG_F64) scale = (float)scale;
        for (int64_t j = 0; j < D && rc >= 0; j++) {
            double v = row[j] * scale;
            if (w->dtype != TG_F64) v = (float)v;
            rc = tg__set_flat_rounded(w, r * D + j, v);
        }
    }
    free(seen);
    free(row);
    return rc;
}

int tg__embedding_opts(tg_embedding_opts *o, const tg_embedding_opts *opts, int64_t V,
                       const char *fn)
{
    *o = (tg_embedding_opts)TG_EMBEDDING_OPTS_INIT;
    if (opts) *o = *opts;
    if (o->padding_idx != TG_EMBEDDING_NO_PADDING) {
        TG_CHECK(o->padding_idx >= -V && o->padding_idx < V, TG_EINVAL,
                 "%s: padding_idx=%lld must be within num_embeddings (in [%lld, %lld))", fn,
                 (long long)o->padding_idx, (long long)-V, (long long)V);
        if (o->padding_idx < 0) o->padding_idx += V;
    }
    TG_CHECK(!o->sparse || !o->scale_grad_by_freq, TG_EINVAL,
             "%s: scale_grad_by_freq is not supported with sparse gradients (sparse=true), "
             "as torch's embedding_backward", fn);
    TG_CHECK(o->max_norm >= 0, TG_EINVAL, "%s: max_norm=%g must be >= 0 (0 for none)", fn,
             o->max_norm);
    TG_CHECK(o->max_norm == 0 || o->norm_type > 0, TG_EINVAL,
             "%s: norm_type=%g must be > 0 (inf for the max)", fn, o->norm_type);
    return TG_OK;
}

int tg_embedding_ex(tg_tensor **out, tg_tensor *weight, tg_tensor *indices,
                    const tg_embedding_opts *opts)
{
    const char *op = "embedding";
    TG_CHECK(out != NULL && weight != NULL && indices != NULL, TG_EINVAL,
             "%s: out, weight and indices must not be NULL", op);
    TG_TRY(check_inputs(op, weight, indices));
    const int64_t V = weight->shape[0];
    tg_embedding_opts o;
    TG_TRY(tg__embedding_opts(&o, opts, V, op));
    emb_params prm = {.padding_idx = o.padding_idx == TG_EMBEDDING_NO_PADDING ? -1
                                                                              : o.padding_idx,
                      .scale_by_freq = o.scale_grad_by_freq};
    if (o.max_norm > 0) {
        int64_t *iv = NULL;
        TG_TRY(tg__embedding_read_indices(op, indices, V, &iv));
        int rc = renorm_rows(weight, iv, tg_tensor_numel(indices), o.max_norm, o.norm_type);
        free(iv);
        TG_TRY(rc);
    }
    if (o.sparse) return tg__embedding_sparse_call(out, weight, indices, &prm);
    return call(&embedding_op, out, weight, indices, &prm);
}
