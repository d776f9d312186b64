/* src/ops/reduce.c - reductions: sum, mean, sum_dims, mean_dims, sum_to_shape.
 *
 * One kernel serves them all.  Every input element, visited in row-major
 * order, is added into the output element whose flat index is
 * sum_d idx[d] * ostride[d], where ostride[d] is 0 for a reduced dim and the
 * output's contiguous stride of that dim otherwise.  Sums accumulate in double
 * whatever the dtype and are rounded once into the output dtype; the order is
 * fixed, so results do not depend on the thread count.  f32/f64 inputs take
 * reduce_fast, which reads a in place and adds the same terms in the same
 * order per output (bit-identical results); outputs may be split over threads
 * but each is summed by one thread.
 *
 * Integer inputs: sum and sum_dims give an exact int64 (reduce_int.c), as
 * torch; mean, mean_dims and sum_to_shape take float dtypes only.
 *
 * Backward: sum and sum_to_shape expand the gradient back to the input shape
 * (the adjoint of summing is broadcasting); the means also scale by 1/N. */
#include <string.h>

#include "internal.h"
#include "shape_internal.h"
#include "tapegrad/ops.h"

/* Sums a into out (contiguous, float) following ostride (see above), then
 * multiplies by scale.  TG_ENOMEM leaves out unchanged. */
static int reduce_kernel(const tg_tensor *a, const int64_t *ostride, tg_tensor *out, double scale)
{
    int64_t n = tg__numel(a->ndim, a->shape), on = tg__numel(out->ndim, out->shape);
    double *x = tg__malloc((size_t)(n > 0 ? n : 1) * sizeof *x);
    double *acc = tg__calloc((size_t)(on > 0 ? on : 1), sizeof *acc);
    if (!x || !acc) {
        free(x);
        free(acc);
        return TG_ENOMEM;
    }
    if (n > 0) tg__gather(a, TG_F64, x);
    int64_t idx[TG_MAX_DIMS] = {0}, o = 0;
    for (int64_t i = 0; i < n; i++) {
        acc[o] += x[i];
        o = tg__reduce_next(a, ostride, idx, o);
    }
    for (int64_t j = 0; j < on; j++) acc[j] *= scale;
    if (on > 0) tg__scatter(out, TG_F64, acc);
    free(x);
    free(acc);
    return TG_OK;
}

/* ---- fast path: f32/f64 input read in place ------------------------------------
 *
 * Same sums in the same order as reduce_kernel, without the f64 copy of a or
 * per-element dtype dispatch.  The dims of a are first simplified: extent-1
 * dims dropped, neighbours with the same role (reduced or kept) merged when
 * they are one strided run (stride[d] == stride[d+1] * shape[d+1]); both keep
 * the row-major visiting order.  Output flat index = row-major index over the
 * kept dims, which is what ostride encodes. */

typedef struct rdim {
    int64_t n, st; /* extent, stride of a in elements */
    bool red;
} rdim;

static int simplify_dims(const tg_tensor *a, const int64_t *ostride, rdim *dd)
{
    int nd = 0;
    for (int d = 0; d < a->ndim; d++) {
        if (a->shape[d] == 1) continue;
        bool red = ostride[d] == 0;
        if (nd > 0 && dd[nd - 1].red == red && dd[nd - 1].st == a->strides[d] * a->shape[d]) {
            dd[nd - 1].n *= a->shape[d];
            dd[nd - 1].st = a->strides[d];
            continue;
        }
        dd[nd++] = (rdim){a->shape[d], a->strides[d], red};
    }
    return nd;
}

/* Steps the row-major counter idx over dims[0..nd) and pos with it. */
static inline int64_t step_pos(int nd, const rdim *dims, int64_t *idx, int64_t pos)
{
    for (int d = nd - 1; d >= 0; d--) {
        pos += dims[d].st;
        if (++idx[d] < dims[d].n) break;
        pos -= dims[d].st * dims[d].n;
        idx[d] = 0;
    }
    return pos;
}

/* f16/bf16 runs are converted to f32 (exactly) in pieces of this many
 * elements, on the stack: no full-size f32 copy of a half tensor. */
#define TG__HALF_RUN 256

/* buf[0..len) = the f16/bf16 elements data[pos + k*st] as f32. */
static void half_run(tg_dtype dt, const void *data, int64_t pos, int64_t st, int64_t len,
                     float *buf)
{
    const uint16_t *h = (const uint16_t *)data + pos;
    if (st == 1) {
        tg__half_to_f32_n(dt, h, buf, len, true);
        return;
    }
    for (int64_t k = 0; k < len; k++) buf[k] = (float)tg_dtype_load(dt, h, k * st);
}

/* Sum over the reduced dims r[0..nr) (row-major) of a's elements from pos:
 * for a fixed kept index that is exactly the subsequence reduce_kernel adds
 * into that output, in the same order, so the double result is identical.
 * f16/bf16 elements are added as their exact f32 values. */
static double sum_block(const void *data, tg_dtype dt, int64_t pos, int nr, const rdim *r)
{
    double s = 0.0;
    if (nr == 0) return s + tg_dtype_load(dt, data, pos);
    int64_t inner = r[nr - 1].n, ist = r[nr - 1].st, rows = 1;
    int64_t idx[TG_MAX_DIMS] = {0};
    for (int d = 0; d < nr - 1; d++) rows *= r[d].n;
    for (int64_t row = 0; row < rows; row++) {
        if (dt == TG_F64) {
            const double *x = (const double *)data + pos;
            for (int64_t k = 0; k < inner; k++) s += x[k * ist];
        } else if (dt == TG_F32) {
            const float *x = (const float *)data + pos;
            for (int64_t k = 0; k < inner; k++) s += (double)x[k * ist];
        } else {
            float buf[TG__HALF_RUN];
            for (int64_t k0 = 0; k0 < inner; k0 += TG__HALF_RUN) {
                const int64_t len = inner - k0 < TG__HALF_RUN ? inner - k0 : TG__HALF_RUN;
                half_run(dt, data, pos + k0 * ist, ist, len, buf);
                for (int64_t k = 0; k < len; k++) s += (double)buf[k];
            }
        }
        pos = step_pos(nr - 1, r, idx, pos);
    }
    return s;
}

static void store_out(tg_tensor *out, int64_t j, double v)
{
    if (out->dtype == TG_F64) ((double *)tg_tensor_data(out))[j] = v;
    else ((float *)tg_tensor_data(out))[j] = (float)v;
}

/* Innermost dim reduced: each output is one independent block sum, so the
 * outputs are split over threads; every output still has one fixed order. */
typedef struct {
    const tg_tensor *a;
    int nk, nr;
    const rdim *k, *r;
    tg_tensor *out;
    double scale;
} blocks_job;

/* Outputs [j0, j1) of reduce_blocks. */
static void reduce_blocks_range(void *p, int64_t j0, int64_t j1)
{
    const blocks_job *q = p;
    const tg_tensor *a = q->a;
    const rdim *k = q->k;
    for (int64_t j = j0; j < j1; j++) {
        /* Kept multi-index of output j (row-major over k) -> position in a. */
        int64_t pos = a->offset, rest = j;
        for (int d = q->nk - 1; d >= 0; d--) {
            pos += (rest % k[d].n) * k[d].st;
            rest /= k[d].n;
        }
        store_out(q->out, j, sum_block(a->storage->data, a->dtype, pos, q->nr, q->r) * q->scale);
    }
}

static void reduce_blocks(const tg_tensor *a, int nk, const rdim *k, int nr, const rdim *r,
                          tg_tensor *out, int64_t on, double scale)
{
    blocks_job q = {.a = a, .nk = nk, .nr = nr, .k = k, .r = r, .out = out, .scale = scale};
    tg__parallel_range(on, tg__numel(a->ndim, a->shape) > 32768, reduce_blocks_range, &q);
}

/* Innermost dim kept: walk a in row-major order as reduce_kernel does, the
 * inner run adding into consecutive outputs (its output stride is 1). */
static int reduce_rows(const tg_tensor *a, int nd, const rdim *dd, tg_tensor *out, int64_t on,
                       double scale)
{
    double *acc = tg__calloc((size_t)on, sizeof *acc);
    if (!acc) return TG_ENOMEM;
    int64_t ost[TG_MAX_DIMS], run = 1;
    for (int d = nd - 1; d >= 0; d--) {
        ost[d] = dd[d].red ? 0 : run;
        if (!dd[d].red) run *= dd[d].n;
    }
    const void *data = a->storage->data;
    int64_t inner = dd[nd - 1].n, ist = dd[nd - 1].st, rows = 1;
    int64_t idx[TG_MAX_DIMS] = {0}, pos = a->offset, o = 0;
    for (int d = 0; d < nd - 1; d++) rows *= dd[d].n;
    for (int64_t row = 0; row < rows; row++) {
        double *y = acc + o;
        if (a->dtype == TG_F64) {
            const double *x = (const double *)data + pos;
            for (int64_t k = 0; k < inner; k++) y[k] += x[k * ist];
        } else if (a->dtype == TG_F32) {
            const float *x = (const float *)data + pos;
            for (int64_t k = 0; k < inner; k++) y[k] += (double)x[k * ist];
        } else {
            float buf[TG__HALF_RUN];
            for (int64_t k0 = 0; k0 < inner; k0 += TG__HALF_RUN) {
                const int64_t len = inner - k0 < TG__HALF_RUN ? inner - k0 : TG__HALF_RUN;
                half_run(a->dtype, data, pos + k0 * ist, ist, len, buf);
                for (int64_t k = 0; k < len; k++) y[k0 + k] += (double)buf[k];
            }
        }
        /* Same counter as step_pos, also tracking the output index o. */
        for (int d = nd - 2; d >= 0; d--) {
            pos += dd[d].st;
            o += ost[d];
            if (++idx[d] < dd[d].n) break;
            pos -= dd[d].st * dd[d].n;
            o -= ost[d] * dd[d].n;
            idx[d] = 0;
        }
    }
    for (int64_t j = 0; j < on; j++) store_out(out, j, acc[j] * scale);
    free(acc);
    return TG_OK;
}

/* Returns 1 when it handled the reduction (a float a with at least one
 * element; out f32 or f64), 0 to fall back to reduce_kernel, or TG_ENOMEM. */
static int reduce_fast(const tg_tensor *a, const int64_t *ostride, tg_tensor *out, double scale)
{
    int64_t n = tg__numel(a->ndim, a->shape), on = tg__numel(out->ndim, out->shape);
    if (!tg_dtype_is_float(a->dtype) || n == 0) return 0;
    if (out->dtype != TG_F32 && out->dtype != TG_F64) return 0;
    rdim dd[TG_MAX_DIMS], k[TG_MAX_DIMS], r[TG_MAX_DIMS];
    int nd = simplify_dims(a, ostride, dd), nk = 0, nr = 0;
    if (nd > 0 && !dd[nd - 1].red) {
        TG_TRY(reduce_rows(a, nd, dd, out, on, scale));
        return 1;
    }
    for (int d = 0; d < nd; d++) {
        if (dd[d].red) r[nr++] = dd[d];
        else k[nk++] = dd[d];
    }
    reduce_blocks(a, nk, k, nr, r, out, on, scale);
    return 1;
}

static int check_float(const char *op, const tg_tensor *a)
{
    TG_CHECK(tg_dtype_is_float(a->dtype), TG_EDTYPE, "%s: a is %s but must be a float dtype",
             op, tg_dtype_name(a->dtype));
    return TG_OK;
}

/* f16/bf16 a: reduced by reduce_fast (runs converted to f32 in small pieces,
 * exactly) into f64 sums, then rounded once into out as reduce_kernel does
 * (its f64 gather of a holds the same values, added in the same order), so
 * the result is bit-identical, with no full-size copy of a and without
 * per-element dtype dispatch.  Returns 1 when handled, 0 to fall back, or
 * TG_ENOMEM. */
static int reduce_half(const tg_tensor *a, const int64_t *ostride, tg_tensor *out, double scale)
{
    if ((a->dtype != TG_F16 && a->dtype != TG_BF16) || tg__numel(a->ndim, a->shape) == 0) return 0;
    tg_tensor *o64 = tg__tensor_empty(TG_F64, out->ndim, out->shape);
    if (!o64) return TG_ENOMEM;
    int rc = reduce_fast(a, ostride, o64, scale);
    if (rc > 0) tg__scatter(out, TG_F64, tg_tensor_cdata(o64));
    tg_tensor_release(o64);
    return rc;
}

/* Allocates out (ndim, shape) of a's dtype and reduces a into it. */
static int reduce_into(tg_tensor **out, const tg_tensor *a, int ndim, const int64_t *shape,
                       const int64_t *ostride, double scale)
{
    tg_tensor *r = tg__tensor_empty(a->dtype, ndim, shape);
    if (!r) return TG_ENOMEM;
    int rc = reduce_fast(a, ostride, r, scale);
    if (rc == 0) rc = reduce_half(a, ostride, r, scale);
    if (rc == 0) rc = reduce_kernel(a, ostride, r, scale);
    if (rc < 0) {
        tg_tensor_release(r);
        return rc;
    }
    *out = r;
    return TG_OK;
}

/* ---- sum / mean of all elements --------------------------------------------- */

typedef struct all_params {
    bool mean;
} all_params;

static int all_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                       const void *params)
{
    const all_params *p = params;
    tg_tensor *a = in[0];
    int64_t zero[TG_MAX_DIMS] = {0};
    if (!p->mean && !tg_dtype_is_float(a->dtype)) return tg__reduce_int(out, a, 0, NULL, zero);
    TG_TRY(check_float("mean", a));
    /* mean of no elements is 0/0 = NaN, as in PyTorch. */
    double numel = (double)tg__numel(a->ndim, a->shape);
    return reduce_into(out, a, 0, NULL, zero, p->mean ? 1.0 / numel : 1.0);
}

/* Expands g (the reduced shape) to the input's shape; scales by 1/N for means. */
static int expand_back(tg_ctx *ctx, tg_tensor *g, bool mean, tg_tensor **grad)
{
    const tg_meta *m = tg__ctx_input_meta(ctx, 0);
    tg_tensor *e = NULL;
    TG_TRY(tg_expand(&e, g, m->ndim, m->shape));
    if (!mean) {
        *grad = e;
        return TG_OK;
    }
    /* g / count, as PyTorch's mean backward divides (count is converted to
     * g's dtype first, as every scalar operand: multiplying by a rounded
     * 1/count would differ in half precision). */
    int64_t gn = tg__numel(g->ndim, g->shape), n = tg__numel(m->ndim, m->shape);
    double count = gn > 0 ? (double)n / (double)gn : 0.0;
    int rc = tg_div_scalar(grad, e, count);
    tg_tensor_release(e);
    return rc;
}

static int all_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **grad_in)
{
    return expand_back(ctx, g, ((const all_params *)tg__ctx_params(ctx))->mean, &grad_in[0]);
}

static tg_op_schema sum_schema = {
    .name = "sum", .arity = 1, .amp = TG_AMP_FP32, .forward = all_forward,
    .backward = all_backward, .double_backward = true,
};
static tg_op_schema mean_schema = {
    .name = "mean", .arity = 1, .amp = TG_AMP_FP32, .forward = all_forward,
    .backward = all_backward, .double_backward = true,
};

static int all_call(const tg_op_schema *op, bool mean, tg_tensor **out, tg_tensor *a)
{
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", op->name);
    TG_CHECK(a != NULL, TG_EINVAL, "%s: a must not be NULL", op->name);
    all_params p = {mean};
    tg_tensor *in[1] = {a};
    return tg__op_call(op, out, 1, in, &p, sizeof p);
}

int tg_sum(tg_tensor **out, tg_tensor *a) { return all_call(&sum_schema, false, out, a); }
int tg_mean(tg_tensor **out, tg_tensor *a) { return all_call(&mean_schema, true, out, a); }

/* ---- sum_dims / mean_dims ------------------------------------------------------ */

typedef struct dims_params {
    int ndims;
    int dims[TG_MAX_DIMS];
    bool keepdim;
    bool mean;
} dims_params;

/* The set of reduced dims of an ndim tensor as a bit mask. */
static int dims_mask(const char *op, const dims_params *p, int ndim, unsigned *mask)
{
    /* Dims wrap as in every shape op (a 0-d tensor takes -1 and 0, and
     * reducing over its one "dim" leaves the scalar as it is). */
    unsigned seen = 0;
    for (int i = 0; i < p->ndims; i++) {
        char arg[32];
        int d;
        snprintf(arg, sizeof arg, "dims[%d]", i);
        TG_TRY(tg__shape_wrap_dim(op, arg, p->dims[i], ndim, &d));
        TG_CHECK(!(seen & (1u << d)), TG_EINVAL, "%s: dims[%d]=%d names dim %d again (each "
                 "dim at most once)", op, i, p->dims[i], d);
        seen |= 1u << d;
    }
    *mask = ndim > 0 ? seen : 0;
    return TG_OK;
}

/* The keepdim shape: reduced dims become 1. */
static void kept_shape(int ndim, const int64_t *shape, unsigned mask, int64_t *kept)
{
    for (int d = 0; d < ndim; d++) kept[d] = (mask & (1u << d)) ? 1 : shape[d];
}

static int dims_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                        const void *params)
{
    const dims_params *p = params;
    const char *op = p->mean ? "mean_dims" : "sum_dims";
    tg_tensor *a = in[0];
    unsigned mask;
    if (p->mean) TG_TRY(check_float(op, a));
    TG_TRY(dims_mask(op, p, a->ndim, &mask));
    int64_t kept[TG_MAX_DIMS], ostride[TG_MAX_DIMS], shape[TG_MAX_DIMS];
    kept_shape(a->ndim, a->shape, mask, kept);
    tg__contiguous_strides(a->ndim, kept, ostride);
    int ond = 0;
    double count = 1.0;
    for (int d = 0; d < a->ndim; d++) {
        if (mask & (1u << d)) {
            ostride[d] = 0;
            count *= (double)a->shape[d];
            if (!p->keepdim) continue;
        }
        shape[ond++] = kept[d];
    }
    if (!tg_dtype_is_float(a->dtype)) return tg__reduce_int(out, a, ond, shape, ostride);
    return reduce_into(out, a, ond, shape, ostride, p->mean ? 1.0 / count : 1.0);
}

static int dims_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **grad_in)
{
    const dims_params *p = tg__ctx_params(ctx);
    const tg_meta *m = tg__ctx_input_meta(ctx, 0);
    unsigned mask;
    TG_TRY(dims_mask("sum_dims", p, m->ndim, &mask));
    int64_t kept[TG_MAX_DIMS];
    kept_shape(m->ndim, m->shape, mask, kept);
    /* Put the removed dims back as extents of 1, then broadcast. */
    tg_tensor *gk = NULL;
    TG_TRY(tg_reshape(&gk, g, m->ndim, kept));
    int rc = expand_back(ctx, gk, p->mean, &grad_in[0]);
    tg_tensor_release(gk);
    return rc;
}

static tg_op_schema sum_dims_schema = {
    .name = "sum_dims", .arity = 1, .amp = TG_AMP_FP32, .forward = dims_forward,
    .backward = dims_backward, .double_backward = true,
};
static tg_op_schema mean_dims_schema = {
    .name = "mean_dims", .arity = 1, .amp = TG_AMP_FP32, .forward = dims_forward,
    .backward = dims_backward, .double_backward = true,
};

static int dims_call(const tg_op_schema *op, bool mean, tg_tensor **out, tg_tensor *a,
                     int ndims, const int *dims, bool keepdim)
{
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", op->name);
    TG_CHECK(a != NULL, TG_EINVAL, "%s: a must not be NULL", op->name);
    TG_CHECK(ndims >= 0 && ndims <= TG_MAX_DIMS, TG_EINVAL, "%s: ndims=%d must be in [0, %d]",
             op->name, ndims, TG_MAX_DIMS);
    TG_CHECK(ndims == 0 || dims != NULL, TG_EINVAL, "%s: dims must not be NULL", op->name);
    dims_params p;
    memset(&p, 0, sizeof p);
    p.ndims = ndims;
    if (ndims > 0) memcpy(p.dims, dims, (size_t)ndims * sizeof *dims);
    p.keepdim = keepdim;
    p.mean = mean;
    tg_tensor *in[1] = {a};
    return tg__op_call(op, out, 1, in, &p, sizeof p);
}

int tg_sum_dims(tg_tensor **out, tg_tensor *a, int ndims, const int *dims, bool keepdim)
{
    return dims_call(&sum_dims_schema, false, out, a, ndims, dims, keepdim);
}

int tg_mean_dims(tg_tensor **out, tg_tensor *a, int ndims, const int *dims, bool keepdim)
{
    return dims_call(&mean_dims_schema, true, out, a, ndims, dims, keepdim);
}

/* ---- sum_to_shape -------------------------------------------------------------- */

typedef struct to_shape_params {
    int ndim;
    int64_t shape[TG_MAX_DIMS];
} to_shape_params;

/* The target must broadcast to a's shape: aligned at the trailing dims, each
 * target extent equals a's or is 1.  Leading dims of a and the dims where the
 * target has 1 (and a does not) are summed. */
static int to_shape_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                            const void *params)
{
    const to_shape_params *p = params;
    tg_tensor *a = in[0];
    char sa[96], st[96];
    TG_TRY(check_float("sum_to_shape", a));
    tg_shape_str(sa, sizeof sa, a->ndim, a->shape);
    tg_shape_str(st, sizeof st, p->ndim, p->shape);
    TG_CHECK(p->ndim <= a->ndim, TG_ESHAPE, "sum_to_shape: shape %s has more dims than a %s",
             st, sa);
    int lead = a->ndim - p->ndim;
    int64_t tstride[TG_MAX_DIMS], ostride[TG_MAX_DIMS];
    tg__contiguous_strides(p->ndim, p->shape, tstride);
    for (int d = 0; d < a->ndim; d++) {
        if (d < lead) {
            ostride[d] = 0;
            continue;
        }
        int64_t t = p->shape[d - lead];
        TG_CHECK(t == a->shape[d] || t == 1, TG_ESHAPE, "sum_to_shape: shape %s does not "
                 "broadcast to a %s: dim %d is %lld, must be %lld or 1", st, sa, d - lead,
                 (long long)t, (long long)a->shape[d]);
        ostride[d] = t == 1 ? 0 : tstride[d - lead];
    }
    return reduce_into(out, a, p->ndim, p->shape, ostride, 1.0);
}

static int to_shape_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **grad_in)
{
    const tg_meta *m = tg__ctx_input_meta(ctx, 0);
    return tg_expand(&grad_in[0], g, m->ndim, m->shape);
}

static tg_op_schema to_shape_schema = {
    .name = "sum_to_shape", .arity = 1, .amp = TG_AMP_KEEP, .forward = to_shape_forward,
    .backward = to_shape_backward, .double_backward = true,
};

int tg_sum_to_shape(tg_tensor **out, tg_tensor *a, int ndim, const int64_t *shape)
{
    TG_CHECK(out != NULL, TG_EINVAL, "sum_to_shape: out must not be NULL");
    TG_CHECK(a != NULL, TG_EINVAL, "sum_to_shape: a must not be NULL");
    TG_CHECK(ndim >= 0 && ndim <= TG_MAX_DIMS, TG_EINVAL, "sum_to_shape: ndim=%d must be in "
             "[0, %d]", ndim, TG_MAX_DIMS);
    TG_CHECK(ndim == 0 || shape != NULL, TG_EINVAL, "sum_to_shape: shape must not be NULL");
    TG_TRY(tg__check_shape("sum_to_shape", ndim, shape));
    to_shape_params p;
    memset(&p, 0, sizeof p);
    p.ndim = ndim;
    if (ndim > 0) memcpy(p.shape, shape, (size_t)ndim * sizeof *shape);
    tg_tensor *in[1] = {a};
    return tg__op_call(&to_shape_schema, out, 1, in, &p, sizeof p);
}

void tg__register_reduce(void)
{
    tg__op_register(&sum_schema);
    tg__op_register(&mean_schema);
    tg__op_register(&sum_dims_schema);
    tg__op_register(&mean_dims_schema);
    tg__op_register(&to_shape_schema);
}
