/* src/ops/dim_rows.c - the dims, shapes and row layout of the row
 * reductions (src/ops/dim_rows.h).
 *
 * The rows come from a view of x whose dims are permuted so that the
 * reduced ones come last (kept dims in order, then reduced dims in order):
 * gathering that view in row-major order gives, for each result element in
 * row-major order, its n = prod(reduced extents) elements in one run. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "ops/dim_rows.h"
#include "ops/reduce_internal.h"
#include "ops/shape_internal.h"

int tg__dims_mask(const char *op, int ndims, const int *dims, int ndim, unsigned *mask)
{
    unsigned seen = 0;
    for (int i = 0; i < ndims; i++) {
        char arg[32];
        int d;
        snprintf(arg, sizeof arg, "dims[%d]", i);
        TG_TRY(tg__shape_wrap_dim(op, arg, dims[i], ndim, &d));
        TG_CHECK(!(seen & (1u << d)), TG_EINVAL, "%s: dims[%d]=%d names dim %d again (each "
                 "dim at most once)", op, i, dims[i], d);
        seen |= 1u << d;
    }
    *mask = ndim > 0 ? seen : 0;
    return TG_OK;
}

bool tg__dims_run(const tg_tensor *x, unsigned mask, int64_t *n, int64_t *inner)
{
    *n = 1;
    *inner = 1;
    if (mask == 0) return x->ndim == 0;
    int d0 = 0, d1 = x->ndim - 1;
    while (!(mask >> d0 & 1u)) d0++;
    while (!(mask >> d1 & 1u)) d1--;
    for (int d = 0; d < x->ndim; d++) {
        const bool in_run = d >= d0 && d <= d1;
        if (in_run != (bool)(mask >> d & 1u)) return false;
        if (in_run) *n *= x->shape[d];
        else if (d > d1) *inner *= x->shape[d];
    }
    return true;
}

int tg__dims_nonempty(const char *op, const tg_tensor *x, unsigned mask)
{
    for (int d = 0; d < x->ndim; d++)
        TG_CHECK(!((mask >> d) & 1u) || x->shape[d] > 0, TG_ESHAPE,
                 "%s: dim %d has extent 0; a reduced dim needs at least one element", op, d);
    return TG_OK;
}

void tg__dims_out_shape(int ndim, const int64_t *shape, unsigned mask, bool keepdim, int *ond,
                        int64_t *oshape)
{
    *ond = 0;
    for (int d = 0; d < ndim; d++) {
        if (!((mask >> d) & 1u)) oshape[(*ond)++] = shape[d];
        else if (keepdim) oshape[(*ond)++] = 1;
    }
}

int tg__dim_rows(const tg_tensor *x, unsigned mask, tg_dtype as, void **buf, int64_t *rows,
                 int64_t *n)
{
    TG_ASSERT(as == TG_F64 || as == TG_I64);
    int64_t shape[TG_MAX_DIMS], strides[TG_MAX_DIMS];
    int k = 0;
    *rows = *n = 1;
    for (int pass = 0; pass < 2; pass++)   /* kept dims, then reduced dims */
        for (int d = 0; d < x->ndim; d++) {
            if ((int)((mask >> d) & 1u) != pass) continue;
            shape[k] = x->shape[d];
            strides[k++] = x->strides[d];
            *(pass ? n : rows) *= x->shape[d];
        }
    const int64_t numel = *rows * *n;
    const int64_t size = numel > *rows ? numel : *rows;   /* a result per row fits too */
    *buf = tg__work_alloc((size_t)(size > 0 ? size : 1) * 8);
    if (!*buf) return TG_ENOMEM;
    if (numel == 0) return TG_OK;
    tg_tensor *v = tg__tensor_view_of(x->storage, x->dtype, x->ndim, shape, strides, x->offset);
    if (!v) {
        tg__work_free(*buf);
        *buf = NULL;
        return TG_ENOMEM;
    }
    tg__gather(v, as, *buf);
    tg_tensor_release(v);
    return TG_OK;
}

/* Rows [lo, hi) of a tg__rows_f64_job: each writes only its own first slot. */
static void rows_f64_range(void *p, int64_t lo, int64_t hi)
{
    const tg__rows_f64_job *j = p;
    for (int64_t r = lo; r < hi; r++) j->v[r * j->n] = j->fn(j->v + r * j->n, j->n, j->arg);
}

void tg__rows_f64(void *job, tg_dtype as, void *buf, int64_t rows, int64_t n)
{
    tg__rows_f64_job *j = job;
    (void)as;
    j->v = buf;
    j->n = n;
    if (n > 0) {
        tg__parallel_range(rows, rows * n > 32768, rows_f64_range, j);
        for (int64_t k = 0; k < rows; k++) j->v[k] = j->v[k * n];   /* k <= k n */
    } else {   /* empty rows (the buffer holds one result each) */
        const double empty = j->fn(NULL, 0, j->arg);
        for (int64_t k = 0; k < rows; k++) j->v[k] = empty;
    }
}

int tg__dim_rows_reduce(tg_op_ctx *ctx, tg_tensor **out, tg_tensor *x, unsigned mask,
                        bool keepdim, tg_dtype as, tg__rows_fn fn, void *arg, bool save_out)
{
    int ond;
    int64_t oshape[TG_MAX_DIMS], rows, n;
    tg__dims_out_shape(x->ndim, x->shape, mask, keepdim, &ond, oshape);
    void *buf = NULL;
    tg_tensor *r = tg__tensor_uninit(x->dtype, ond, oshape);
    if (!r) return TG_ENOMEM;
    int rc = tg__dim_rows(x, mask, as, &buf, &rows, &n);
    if (rc >= 0) {
        fn(arg, as, buf, rows, n);
        if (rows > 0) tg__scatter(r, as, buf);
        if (ctx) {
            int s = tg_op_ctx_save(ctx, x);
            if (s >= 0 && save_out) s = tg_op_ctx_save_output(ctx, r);
            if (s < 0) rc = s;
        }
    }
    tg__work_free(buf);
    if (rc < 0) {
        tg_tensor_release(r);
        return rc;
    }
    *out = r;
    return TG_OK;
}

int tg__tie_mask(const tg_tensor *x, const tg_tensor *y, unsigned mask, bool nan_ties, bool abs,
                 tg_dtype dt, tg_tensor **m, tg_tensor **c)
{
    int64_t kept[TG_MAX_DIMS], ostride[TG_MAX_DIMS], idx[TG_MAX_DIMS] = {0};
    int kn;
    tg__dims_out_shape(x->ndim, x->shape, mask, true, &kn, kept);
    tg__contiguous_strides(x->ndim, kept, ostride);
    for (int d = 0; d < x->ndim; d++)
        if ((mask >> d) & 1u) ostride[d] = 0;
    const int64_t nx = tg_tensor_numel(x), ny = tg_tensor_numel(y);
    double *xv = tg__malloc((size_t)(nx > 0 ? nx : 1) * sizeof *xv);
    double *yv = tg__malloc((size_t)(ny > 0 ? ny : 1) * sizeof *yv);
    double *cv = tg__calloc((size_t)(ny > 0 ? ny : 1), sizeof *cv);
    tg_tensor *mt = tg__tensor_uninit(dt, x->ndim, x->shape);
    tg_tensor *ct = tg__tensor_uninit(dt, kn, kept);
    int rc = xv && yv && cv && mt && ct ? TG_OK : TG_ENOMEM;
    if (rc >= 0 && nx > 0) {
        tg__gather(x, TG_F64, xv);
        tg__gather(y, TG_F64, yv);
        int64_t o = 0;
        for (int64_t i = 0; i < nx; i++) {
            const double v = abs ? fabs(xv[i]) : xv[i];
            const bool hit = v == yv[o] || (nan_ties && isnan(v) && isnan(yv[o]));
            xv[i] = hit;
            cv[o] += hit;
            o = tg__reduce_next(x, ostride, idx, o);
        }
        tg__scatter(mt, TG_F64, xv);
        tg__scatter(ct, TG_F64, cv);
    }
    if (rc >= 0) {
        *m = mt;
        *c = ct;
    } else {
        tg_tensor_release(mt);
        tg_tensor_release(ct);
    }
    free(xv);
    free(yv);
    free(cv);
    return rc;
}
