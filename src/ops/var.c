/* src/ops/var.c - var and std over chosen dims or the whole tensor
 * (torch.var / torch.std with correction and keepdim).
 *
 * Each result element reduces a row of N elements (dim_rows.h):
 *   mean = sum(x) / N,   M2 = sum((x - mean)^2) - (sum(x - mean))^2 / N
 *   var  = M2 / max(0, N - correction),   std = sqrt(var)
 * in double (the second term of M2 removes the rounding of mean: the
 * corrected two-pass formula), rounded once to x's dtype.  N - correction
 * <= 0 gives inf, or NaN where M2 = 0, as PyTorch's divisor max(0, N - c).
 *
 * Gradients, with g and the results kept as extents of 1 at the reduced
 * dims and dof = max(0, N - correction):
 *   var: dx = ((2 / dof) * g) * (x - mean(x))          (torch's var_backward)
 *   std: dx = var's dx for g' = g / (2 std), with g' = 0 where std = 0
 * (torch's std_backward: a constant row has std 0 and gradient 0, not
 * NaN).  Written with differentiable ops (mean_dims, sub, mul, div, where),
 * so derivatives of any order follow; std's backward reads the saved
 * output, which carries this op again in a create_graph backward. */
#include <assert.h>
#include <math.h>
#include <string.h>

#include "autograd/tape.h"
#include "ops/dim_rows.h"
#include "ops/elementwise.h"
#include "ops/families.h"
#include "ops/reduce_internal.h"
#include "tapegrad/ops.h"

typedef struct var_params {
    int ndims;
    int dims[TG_MAX_DIMS];
    int64_t correction;
    bool keepdim;
    bool whole;   /* every dim, a 0-d result */
    bool std;
} var_params;

static const char *op_name(const var_params *p) { return p->std ? "std" : "var"; }

static int var_mask(const tg_tensor *x, const var_params *p, unsigned *mask)
{
    if (p->whole) {
        *mask = tg__dims_all(x->ndim);
        return TG_OK;
    }
    return tg__dims_mask(op_name(p), p->ndims, p->dims, x->ndim, mask);
}

/* The number of elements each result reduces. */
static int64_t row_count(const tg_tensor *x, unsigned mask)
{
    int64_t n = 1;
    for (int d = 0; d < x->ndim; d++)
        if ((mask >> d) & 1u) n *= x->shape[d];
    return n;
}

typedef struct var_row_args {
    double divisor;
    bool std;
} var_row_args;

/* A tg__row_f64_fn, arg a var_row_args: M2 / divisor (its root for std),
 * M2 = 0 for a row of no elements. */
static double var_row(const double *row, int64_t n, const void *arg)
{
    const var_row_args *a = arg;
    double var = 0.0 / a->divisor;
    if (n > 0) {
        double s = 0, m2 = 0, c = 0;
        for (int64_t k = 0; k < n; k++) s += row[k];
        const double mean = s / (double)n;
        for (int64_t k = 0; k < n; k++) {
            const double e = row[k] - mean;
            m2 += e * e;
            c += e;
        }
        m2 -= c * c / (double)n;
        var = m2 / a->divisor;
    }
    return a->std ? sqrt(var) : var;
}

static int var_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                       const void *params)
{
    const var_params *p = params;
    const char *op = op_name(p);
    tg_tensor *x = in[0];
    unsigned mask;
    TG_CHECK(x != NULL, TG_EINVAL, "%s: x must not be NULL", op);
    TG_CHECK(tg_dtype_is_float(x->dtype), TG_EDTYPE, "%s: x has dtype %s; float dtypes only "
             "(tg_to_dtype first)", op, tg_dtype_name(x->dtype));
    TG_TRY(var_mask(x, p, &mask));
    const var_row_args a = {
        .divisor = fmax(0.0, (double)row_count(x, mask) - (double)p->correction),
        .std = p->std};
    tg__rows_f64_job j = {.fn = var_row, .arg = &a};
    /* var(x) and std(x) reduce every dim without keepdim: a 0-d result */
    return tg__dim_rows_reduce(ctx, out, x, mask, p->keepdim, TG_F64, tg__rows_f64, &j, p->std);
}

/* dx = ((2 / dof) * gk) * (x - mean(x)) for gk of the kept shape (var's
 * gradient; std's with its g'). */
static int var_grad(const var_params *p, tg_tensor *x, unsigned mask, tg_tensor *gk,
                    tg_tensor **dx)
{
    int dims[TG_MAX_DIMS], nd = 0, rc;
    for (int d = 0; d < x->ndim; d++)
        if ((mask >> d) & 1u) dims[nd++] = d;
    const double dof = fmax(0.0, (double)row_count(x, mask) - (double)p->correction);
    tg_tensor *t = NULL, *mean = NULL, *dev = NULL;
    TG_TRY_GOTO(tg_mul_scalar(&t, gk, 2.0 / dof));
    TG_TRY_GOTO(tg_mean_dims(&mean, x, nd, dims, true));
    TG_TRY_GOTO(tg_sub(&dev, x, mean));
    TG_TRY_GOTO(tg_mul(dx, t, dev));
done:
    tg_tensor_release(t);
    tg_tensor_release(mean);
    tg_tensor_release(dev);
    return rc;
}

static int var_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    const var_params *p = tg_op_ctx_params(ctx);
    tg_tensor *x, *y = NULL, *gk = NULL, *yk = NULL, *y2 = NULL, *q = NULL, *qm = NULL;
    unsigned mask;
    int kn, rc;
    int64_t kept[TG_MAX_DIMS];
    TG_TRY(tg_op_ctx_saved(ctx, 0, &x));
    TG_TRY(var_mask(x, p, &mask));
    tg__dims_out_shape(x->ndim, x->shape, mask, true, &kn, kept);
    TG_TRY(tg_reshape(&gk, g, kn, kept));   /* the reduced dims as 1 */
    if (!p->std) {
        rc = var_grad(p, x, mask, gk, &gi[0]);
        tg_tensor_release(gk);
        return rc;
    }
    TG_TRY_GOTO(tg_op_ctx_saved_output(ctx, 1, &y));
    TG_TRY_GOTO(tg_reshape(&yk, y, kn, kept));
    TG_TRY_GOTO(tg_mul_scalar(&y2, yk, 2.0));
    TG_TRY_GOTO(tg_div(&q, gk, y2));
    TG_TRY_GOTO(tg__where_or_zero(&qm, yk, q));   /* 0 where std = 0 */
    TG_TRY_GOTO(var_grad(p, x, mask, qm, &gi[0]));
done:
    tg_tensor_release(gk);
    tg_tensor_release(y);
    tg_tensor_release(yk);
    tg_tensor_release(y2);
    tg_tensor_release(q);
    tg_tensor_release(qm);
    return rc;
}

/* FP32, as sum and mean: a half x inside an autocast scope gives f32. */
static const tg_op_schema var_op = {.name = "var", .arity = 1, .amp = TG_AMP_FP32,
                                    .forward = var_forward, .backward = var_backward,
                                    .double_backward = true,
                                    .vjp = "da = (2 / (N - correction)) g (a - mean(a)), "
                                           "g copied along the reduced dims"};
static const tg_op_schema std_op = {.name = "std", .arity = 1, .amp = TG_AMP_FP32,
                                    .forward = var_forward, .backward = var_backward,
                                    .double_backward = true,
                                    .vjp = "da = var's da for g / (2 y), 0 where y = 0"};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__var_ops[] = {&var_op, &std_op};
static_assert(sizeof tg__var_ops / sizeof tg__var_ops[0] == TG__var_N,
              "src/ops/families.h must count the var ops");

static int var_call(bool std, tg_tensor **out, tg_tensor *x, int ndims, const int *dims,
                    int64_t correction, bool keepdim, bool whole)
{
    const tg_op_schema *op = std ? &std_op : &var_op;
    var_params p;
    memset(&p, 0, sizeof p);
    TG_TRY(tg__dims_args(op->name, "x", out, x, ndims, dims, &p.ndims, p.dims));
    p.correction = correction;
    p.keepdim = keepdim;
    p.whole = whole;
    p.std = std;
    return tg_op_call(op, out, 1, &x, &p, sizeof p);
}

int tg_var_dims(tg_tensor **out, tg_tensor *x, int ndims, const int *dims, int64_t correction,
                bool keepdim)
{
    return var_call(false, out, x, ndims, dims, correction, keepdim, false);
}

int tg_std_dims(tg_tensor **out, tg_tensor *x, int ndims, const int *dims, int64_t correction,
                bool keepdim)
{
    return var_call(true, out, x, ndims, dims, correction, keepdim, false);
}

int tg_var(tg_tensor **out, tg_tensor *x, int64_t correction)
{
    return var_call(false, out, x, 0, NULL, correction, false, true);
}

int tg_std(tg_tensor **out, tg_tensor *x, int64_t correction)
{
    return var_call(true, out, x, 0, NULL, correction, false, true);
}
