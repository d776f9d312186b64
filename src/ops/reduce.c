/* src/ops/reduce.c - reductions: sum, mean, sum_dims, mean_dims, sum_to_shape.
 *
 * One kernel serves them all (reduce_float.c, tg__reduce_float): every input
 * element is added into the output element whose flat index is
 * sum_d idx[d] * ostride[d], where ostride[d] is 0 for a reduced dim and the
 * output's contiguous stride of that dim otherwise; sums accumulate in
 * double and are rounded once, in an order that depends on the shape alone
 * (not on the thread count or the CPU): row-major, except that a
 * contiguous f32 run of 64 or more terms goes into 32 interleaved lanes.
 *
 * Integer inputs: sum and sum_dims give an exact int64 (reduce_int.c), as
 * torch; mean, mean_dims and sum_to_shape take float dtypes only.
 *
 * Backward: sum and sum_to_shape expand the gradient back to the input shape
 * (the adjoint of summing is broadcasting); the means also scale by 1/N. */
#include <assert.h>
#include <string.h>

#include "core/core.h"
#include "ops/reduce_internal.h"
#include "autograd/tape.h"
#include "ops/families.h"
#include "shape_internal.h"
#include "tapegrad/ops.h"

static int check_float(const char *op, const tg_tensor *a)
{
    TG_CHECK(tg_dtype_is_float(a->dtype), TG_EDTYPE, "%s: a is %s but must be a float dtype",
             op, tg_dtype_name(a->dtype));
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
    return tg__reduce_float(out, a, 0, NULL, zero, p->mean ? 1.0 / numel : 1.0);
}

/* Expands g (the reduced shape) to the input's shape; scales by 1/N for
 * means, before the expansion: the same quotient in every element, divided
 * once per element of g, and the expanded gradient stays a broadcast view. */
static int expand_back(tg_ctx *ctx, tg_tensor *g, bool mean, tg_tensor **grad)
{
    const tg_meta *m = tg__ctx_input_meta(ctx, 0);
    if (!mean) return tg_expand(grad, g, m->ndim, m->shape);
    /* g / count, as PyTorch's mean backward divides (count is converted to
     * g's dtype first, as every scalar operand: multiplying by a rounded
     * 1/count would differ in half precision). */
    int64_t gn = tg__numel(g->ndim, g->shape), n = tg__numel(m->ndim, m->shape);
    double count = gn > 0 ? (double)n / (double)gn : 0.0;
    tg_tensor *q = NULL;
    TG_TRY(tg_div_scalar(&q, g, count));
    int rc = tg_expand(grad, q, m->ndim, m->shape);
    tg_tensor_release(q);
    return rc;
}

static int all_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **grad_in)
{
    return expand_back(ctx, g, ((const all_params *)tg__ctx_params(ctx))->mean, &grad_in[0]);
}

static const tg_op_schema sum_schema = {
    .name = "sum", .arity = 1, .amp = TG_AMP_FP32, .forward = all_forward,
    .backward = all_backward, .double_backward = true,
    .vjp = "da = g copied to every element of a",
};
static const tg_op_schema mean_schema = {
    .name = "mean", .arity = 1, .amp = TG_AMP_FP32, .forward = all_forward,
    .backward = all_backward, .double_backward = true,
    .vjp = "da = g / n copied to every element of a",
};

static int all_call(const tg_op_schema *op, bool mean, tg_tensor **out, tg_tensor *a)
{
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", op->name);
    TG_CHECK(a != NULL, TG_EINVAL, "%s: a must not be NULL", op->name);
    all_params p = {mean};
    tg_tensor *in[1] = {a};
    return tg_op_call(op, out, 1, in, &p, sizeof p);
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
    return tg__reduce_float(out, a, ond, shape, ostride, p->mean ? 1.0 / count : 1.0);
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

static const tg_op_schema sum_dims_schema = {
    .name = "sum_dims", .arity = 1, .amp = TG_AMP_FP32, .forward = dims_forward,
    .backward = dims_backward, .double_backward = true,
    .vjp = "da = g copied along the reduced dims",
};
static const tg_op_schema mean_dims_schema = {
    .name = "mean_dims", .arity = 1, .amp = TG_AMP_FP32, .forward = dims_forward,
    .backward = dims_backward, .double_backward = true,
    .vjp = "da = g / n copied along the reduced dims",
};

int tg__dims_args(const char *op, const char *xname, tg_tensor **out, const tg_tensor *x,
                  int ndims, const int *dims, int *pndims, int *pdims)
{
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", op);
    TG_CHECK(x != NULL, TG_EINVAL, "%s: %s must not be NULL", op, xname);
    TG_CHECK(ndims >= 0 && ndims <= TG_MAX_DIMS, TG_EINVAL, "%s: ndims=%d must be in [0, %d]",
             op, ndims, TG_MAX_DIMS);
    TG_CHECK(ndims == 0 || dims != NULL, TG_EINVAL, "%s: dims must not be NULL", op);
    *pndims = ndims;
    if (ndims > 0) memcpy(pdims, dims, (size_t)ndims * sizeof *dims);
    return TG_OK;
}

static int dims_call(const tg_op_schema *op, bool mean, tg_tensor **out, tg_tensor *a,
                     int ndims, const int *dims, bool keepdim)
{
    dims_params p;
    memset(&p, 0, sizeof p);
    TG_TRY(tg__dims_args(op->name, "a", out, a, ndims, dims, &p.ndims, p.dims));
    p.keepdim = keepdim;
    p.mean = mean;
    tg_tensor *in[1] = {a};
    return tg_op_call(op, out, 1, in, &p, sizeof p);
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
    return tg__reduce_float(out, a, p->ndim, p->shape, ostride, 1.0);
}

static int to_shape_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **grad_in)
{
    const tg_meta *m = tg__ctx_input_meta(ctx, 0);
    return tg_expand(&grad_in[0], g, m->ndim, m->shape);
}

static const tg_op_schema to_shape_schema = {
    .name = "sum_to_shape", .arity = 1, .amp = TG_AMP_KEEP, .forward = to_shape_forward,
    .backward = to_shape_backward, .double_backward = true,
    .vjp = "da = g expanded back to a's shape",
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
    return tg_op_call(&to_shape_schema, out, 1, in, &p, sizeof p);
}

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__reduce_ops[] = {&sum_schema, &mean_schema, &sum_dims_schema, &mean_dims_schema, &to_shape_schema};
static_assert(sizeof tg__reduce_ops / sizeof tg__reduce_ops[0] == TG__reduce_N,
              "src/ops/families.h must count the reduce ops");
