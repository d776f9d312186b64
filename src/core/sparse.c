/* src/core/sparse.c - sparse COO tensors (tapegrad/sparse.h): one sparse
 * dim of rows, each stored row an index and a dense block of values.  The
 * handle is a tg_tensor whose `sparse` part holds the indices and values and
 * whose storage is empty; every op refuses it at dispatch and every dense
 * element access in tensor.c / tensor_access.c refuses it (tg__refuse_sparse). */
#include <string.h>

#include "core/core.h"
#include "tapegrad/sparse.h"

tg_tensor *tg__sparse_new(tg_dtype dt, int ndim, const int64_t *shape, tg_tensor *indices,
                          tg_tensor *values, bool coalesced)
{
    tg__sparse *sp = tg__calloc(1, sizeof *sp);
    tg_storage *s = sp ? tg__storage_new(0) : NULL;
    tg_tensor *t = s ? tg__tensor_view_of(s, dt, ndim, shape, NULL, 0) : NULL;
    tg__storage_release(s);
    if (!t) {
        free(sp);
        tg_tensor_release(indices);
        tg_tensor_release(values);
        return NULL;
    }
    *sp = (tg__sparse){.indices = indices, .values = values, .coalesced = coalesced};
    t->sparse = sp;
    return t;
}

int64_t tg__sparse_row_numel(const tg_tensor *t) { return tg__numel(t->ndim - 1, t->shape + 1); }

/* The values' shape for nnz rows of t's shape. */
static void values_shape(const tg_tensor *t, int64_t nnz, int64_t *vs)
{
    vs[0] = nnz;
    for (int d = 1; d < t->ndim; d++) vs[d] = t->shape[d];
}

/* A sparse tensor of t's dtype and shape whose nnz rows are uninitialised. */
static tg_tensor *sparse_alloc(const tg_tensor *t, int64_t nnz, bool coalesced)
{
    int64_t vs[TG_MAX_DIMS];
    values_shape(t, nnz, vs);
    tg_tensor *ix = tg__tensor_uninit(TG_I64, 2, (int64_t[]){1, nnz});
    tg_tensor *v = ix ? tg__tensor_uninit(t->dtype, t->ndim, vs) : NULL;
    if (!v) {
        tg_tensor_release(ix);
        return NULL;
    }
    return tg__sparse_new(t->dtype, t->ndim, t->shape, ix, v, coalesced);
}

tg_tensor *tg__sparse_empty_like(const tg_tensor *t) { return sparse_alloc(t, 0, true); }

int tg__sparse_clone(tg_tensor **out, const tg_tensor *t)
{
    const tg__sparse *sp = t->sparse;
    tg_tensor *c = sparse_alloc(t, sp->indices->shape[1], sp->coalesced);
    if (!c) return TG_ENOMEM;
    memcpy(tg_tensor_data(c->sparse->indices), tg_tensor_cdata(sp->indices),
           (size_t)sp->indices->shape[1] * sizeof(int64_t));
    memcpy(tg_tensor_data(c->sparse->values), tg_tensor_cdata(sp->values),
           (size_t)tg_tensor_numel(sp->values) * tg_dtype_size(t->dtype));
    *out = c;
    return TG_OK;
}

/* torch's add of two sparse tensors (add_out_sparse_contiguous): one walk
 * over both lists of rows as if each were sorted, taking a's row while its
 * index is below b's, b's while above, and both summed when equal; the
 * rows left over go last.  Coalesced lists give the coalesced sum; others
 * a list of the same total, in torch's order. */
static tg_tensor *sparse_merge(const tg_tensor *a, const tg_tensor *b)
{
    const int64_t na = a->sparse->indices->shape[1], nb = b->sparse->indices->shape[1];
    const int64_t rn = tg__sparse_row_numel(a);
    const int64_t *ia = a->sparse->indices->storage->data, *ib = b->sparse->indices->storage->data;
    const void *va = a->sparse->values->storage->data, *vb = b->sparse->values->storage->data;
    int64_t n = 0;
    for (int64_t i = 0, j = 0; i < na || j < nb; n++) {
        const int cmp = i >= na ? -1 : j >= nb ? 1 : ia[i] < ib[j] ? 1 : ia[i] > ib[j] ? -1 : 0;
        i += cmp >= 0;
        j += cmp <= 0;
    }
    tg_tensor *c = sparse_alloc(a, n, a->sparse->coalesced && b->sparse->coalesced);
    if (!c) return NULL;
    int64_t *ic = c->sparse->indices->storage->data;
    void *vc = c->sparse->values->storage->data;
    const tg_dtype dt = a->dtype;
    for (int64_t i = 0, j = 0, r = 0; i < na || j < nb; r++) {
        const int cmp = i >= na ? -1 : j >= nb ? 1 : ia[i] < ib[j] ? 1 : ia[i] > ib[j] ? -1 : 0;
        for (int64_t e = 0; e < rn; e++) {
            double v = cmp >= 0 ? tg_dtype_load(dt, va, i * rn + e) : 0.0;
            if (cmp <= 0) v = cmp == 0 ? v + tg_dtype_load(dt, vb, j * rn + e)
                                       : tg_dtype_load(dt, vb, j * rn + e);
            tg_dtype_store(dt, vc, r * rn + e, v);   /* one rounding per addition */
        }
        ic[r] = cmp >= 0 ? ia[i] : ib[j];
        i += cmp >= 0;
        j += cmp <= 0;
    }
    return c;
}

int tg__sparse_grad_sum(tg_tensor **out, const tg_tensor *a, const tg_tensor *b)
{
    if (a->sparse && b->sparse) {
        const int64_t na = a->sparse->indices->shape[1], nb = b->sparse->indices->shape[1];
        if (na == 0 || nb == 0) return tg__sparse_clone(out, na == 0 ? b : a);
        tg_tensor *c = sparse_merge(a, b);
        if (!c) return TG_ENOMEM;
        *out = c;
        return TG_OK;
    }
    const tg_tensor *dense = a->sparse ? b : a, *sparse = a->sparse ? a : b;
    tg_tensor *c = NULL;
    TG_TRY(tg_tensor_to_dtype(&c, dense, dense->dtype));   /* a contiguous copy */
    tg__sparse_add_into(c, sparse);
    *out = c;
    return TG_OK;
}

void tg__sparse_add_into(tg_tensor *dense, const tg_tensor *sparse)
{
    const tg__sparse *sp = sparse->sparse;
    const int64_t nnz = sp->indices->shape[1], rn = tg__sparse_row_numel(sparse);
    const int64_t *ix = tg_tensor_cdata(sp->indices);
    const void *v = tg_tensor_cdata(sp->values);
    const tg_dtype dt = dense->dtype;
    void *d = dense->storage->data;
    for (int64_t k = 0; k < nnz; k++)
        for (int64_t j = 0; j < rn; j++) {
            const int64_t e = dense->offset + ix[k] * rn + j;
            const double s = tg_dtype_load(dt, d, e) + tg_dtype_load(dt, v, k * rn + j);
            tg_dtype_store(dt, d, e, s);   /* rounded once: the dtype's own addition */
        }
    tg__bump_version(dense);
}

/* Sorts order[0..n) by key (a stable merge sort, so that the rows of one
 * index keep the order they are stored in). */
static void sort_by_key(int64_t *order, int64_t *tmp, const int64_t *key, int64_t n)
{
    for (int64_t w = 1; w < n; w *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * w) {
            int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            int64_t i = lo, j = mid, o = lo;
            while (i < mid && j < hi) tmp[o++] = key[order[j]] < key[order[i]] ? order[j++]
                                                                           : order[i++];
            while (i < mid) tmp[o++] = order[i++];
            while (j < hi) tmp[o++] = order[j++];
        }
        memcpy(order, tmp, (size_t)n * sizeof *order);
    }
}

int tg__sparse_coalesced_rows(const tg_tensor *t, int64_t **rows, double **vals, int64_t *n)
{
    const tg__sparse *sp = t->sparse;
    const int64_t nnz = sp->indices->shape[1], rn = tg__sparse_row_numel(t);
    const int64_t *ix = tg_tensor_cdata(sp->indices);
    *rows = NULL;
    *vals = NULL;
    *n = 0;
    if (nnz == 0) return TG_OK;
    int64_t *order = tg__malloc((size_t)nnz * sizeof *order);
    int64_t *tmp = tg__malloc((size_t)nnz * sizeof *tmp);
    int64_t *r = tg__malloc((size_t)nnz * sizeof *r);
    double *in = tg__malloc((size_t)(nnz * rn > 0 ? nnz * rn : 1) * sizeof *in);
    double *out = tg__calloc((size_t)(nnz * rn > 0 ? nnz * rn : 1), sizeof *out);
    if (!order || !tmp || !r || !in || !out) {
        free(order), free(tmp), free(r), free(in), free(out);
        return TG_ENOMEM;
    }
    for (int64_t k = 0; k < nnz; k++) order[k] = k;
    sort_by_key(order, tmp, ix, nnz);
    tg__gather(sp->values, TG_F64, in);
    int64_t m = -1;
    for (int64_t q = 0; q < nnz; q++) {
        const int64_t k = order[q];
        if (m < 0 || r[m] != ix[k]) r[++m] = ix[k];
        for (int64_t j = 0; j < rn; j++) out[m * rn + j] += in[k * rn + j];
    }
    m++;
    for (int64_t e = 0; e < m * rn; e++) out[e] = tg__round_to(t->dtype, out[e]);
    free(order), free(tmp), free(in);
    *rows = r;
    *vals = out;
    *n = m;
    return TG_OK;
}

/* ---- public API ---------------------------------------------------------- */

bool tg_tensor_is_sparse(const tg_tensor *t) { return t && t->sparse; }

static int check_sparse(const char *fn, const tg_tensor *t)
{
    TG_CHECK(t != NULL, TG_EINVAL, "%s: t must not be NULL", fn);
    TG_CHECK(t->sparse != NULL, TG_EINVAL, "%s: t is a dense tensor; a sparse COO tensor is "
             "needed (tg_tensor_is_sparse)", fn);
    return TG_OK;
}

int tg_sparse_coo_new(tg_tensor **out, const tg_tensor *indices, const tg_tensor *values,
                      int ndim, const int64_t *shape)
{
    const char *fn = "sparse_coo_new";
    char a[96], b[96];
    TG_CHECK(out != NULL && indices != NULL && values != NULL, TG_EINVAL,
             "%s: out, indices and values must not be NULL", fn);
    TG_TRY(tg__refuse_sparse(fn, "indices", indices));
    TG_TRY(tg__refuse_sparse(fn, "values", values));
    TG_CHECK(ndim >= 1 && ndim <= TG_MAX_DIMS, TG_EINVAL, "%s: ndim=%d must be in [1, %d]", fn,
             ndim, TG_MAX_DIMS);
    TG_TRY(tg__check_shape(fn, ndim, shape));
    TG_CHECK(!tg_dtype_is_float(indices->dtype), TG_EDTYPE,
             "%s: indices have dtype %s; an integer dtype is needed", fn,
             tg_dtype_name(indices->dtype));
    TG_CHECK(tg_dtype_is_float(values->dtype), TG_EDTYPE,
             "%s: values have dtype %s; a float dtype is needed", fn,
             tg_dtype_name(values->dtype));
    TG_CHECK(indices->ndim == 2 && indices->shape[0] == 1, TG_ESHAPE,
             "%s: indices have shape %s; must be (1, nnz) (one sparse dim)", fn,
             tg_shape_str(a, sizeof a, indices->ndim, indices->shape));
    const int64_t nnz = indices->shape[1];
    int64_t vs[TG_MAX_DIMS];
    vs[0] = nnz;
    for (int d = 1; d < ndim; d++) vs[d] = shape[d];
    bool same = values->ndim == ndim;
    for (int d = 0; same && d < ndim; d++) same = values->shape[d] == vs[d];
    TG_CHECK(same, TG_ESHAPE, "%s: values have shape %s; must be %s (nnz, shape[1:])", fn,
             tg_shape_str(a, sizeof a, values->ndim, values->shape),
             tg_shape_str(b, sizeof b, ndim, vs));
    tg_tensor *ix = tg__tensor_uninit(TG_I64, 2, (int64_t[]){1, nnz}), *v = NULL;
    if (!ix) return TG_ENOMEM;
    int64_t *iv = tg_tensor_data(ix);
    tg__gather(indices, TG_I64, iv);
    for (int64_t k = 0; k < nnz; k++)
        if (iv[k] < 0 || iv[k] >= shape[0]) {
            const int64_t bad = iv[k];
            tg_tensor_release(ix);
            return tg__error(TG_EINVAL, "%s: indices[0][%lld]=%lld must be in [0, %lld) "
                             "(shape[0])", fn, (long long)k, (long long)bad,
                             (long long)shape[0]);
        }
    int rc = tg_tensor_to_dtype(&v, values, values->dtype);
    if (rc < 0) {
        tg_tensor_release(ix);
        return rc;
    }
    tg_tensor *t = tg__sparse_new(values->dtype, ndim, shape, ix, v, false);
    if (!t) return TG_ENOMEM;
    *out = t;
    return TG_OK;
}

int64_t tg_sparse_nnz(const tg_tensor *t)
{
    if (check_sparse("sparse_nnz", t) < 0) return -1;
    return t->sparse->indices->shape[1];
}

bool tg_sparse_is_coalesced(const tg_tensor *t) { return t && t->sparse && t->sparse->coalesced; }

int tg_sparse_indices(tg_tensor **out, const tg_tensor *t)
{
    TG_CHECK(out != NULL, TG_EINVAL, "sparse_indices: out must not be NULL");
    TG_TRY(check_sparse("sparse_indices", t));
    *out = tg_tensor_retain(t->sparse->indices);
    return TG_OK;
}

int tg_sparse_values(tg_tensor **out, const tg_tensor *t)
{
    TG_CHECK(out != NULL, TG_EINVAL, "sparse_values: out must not be NULL");
    TG_TRY(check_sparse("sparse_values", t));
    *out = tg_tensor_retain(t->sparse->values);
    return TG_OK;
}

int tg_sparse_coalesce(tg_tensor **out, const tg_tensor *t)
{
    TG_CHECK(out != NULL, TG_EINVAL, "sparse_coalesce: out must not be NULL");
    TG_TRY(check_sparse("sparse_coalesce", t));
    if (t->sparse->coalesced) {
        *out = tg_tensor_retain((tg_tensor *)t);
        return TG_OK;
    }
    int64_t *rows, n;
    double *vals;
    TG_TRY(tg__sparse_coalesced_rows(t, &rows, &vals, &n));
    tg_tensor *c = sparse_alloc(t, n, true);
    if (c) {
        if (n > 0) memcpy(tg_tensor_data(c->sparse->indices), rows, (size_t)n * sizeof *rows);
        tg__scatter(c->sparse->values, TG_F64, vals);
    }
    free(rows);
    free(vals);
    if (!c) return TG_ENOMEM;
    *out = c;
    return TG_OK;
}

int tg_sparse_to_dense(tg_tensor **out, const tg_tensor *t)
{
    TG_CHECK(out != NULL, TG_EINVAL, "sparse_to_dense: out must not be NULL");
    TG_TRY(check_sparse("sparse_to_dense", t));
    int64_t *rows, n;
    double *vals;
    TG_TRY(tg__sparse_coalesced_rows(t, &rows, &vals, &n));
    tg_tensor *d = tg__tensor_empty(t->dtype, t->ndim, t->shape);
    const int64_t rn = tg__sparse_row_numel(t);
    for (int64_t q = 0; d && q < n; q++)
        for (int64_t j = 0; j < rn; j++)
            tg_dtype_store(t->dtype, d->storage->data, rows[q] * rn + j, vals[q * rn + j]);
    free(rows);
    free(vals);
    if (!d) return TG_ENOMEM;
    *out = d;
    return TG_OK;
}
