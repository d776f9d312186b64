/* src/ops/logsumexp.c - log(sum(exp(x))) over chosen dims or the whole
 * tensor (torch.logsumexp(x, dims, keepdim)).
 *
 * Each result element reduces a row of N elements (dim_rows.h), in double,
 * rounded once to x's dtype, shifted by the row's largest element m so
 * that no exp overflows:
 *   y = m + log(sum exp(x - m)),
 * with m read as 0 when it is +-inf (torch's rule): a row of -inf gives
 * log(0) = -inf, a row holding +inf gives +inf, a NaN gives NaN, and a row
 * of no elements gives log(0) = -inf, as torch.
 *
 * Gradient, with g and y kept as extents of 1 at the reduced dims:
 *   dx = g * exp(x - y)   (the softmax of the row times g)
 * written with differentiable ops, so derivatives of any order follow.  As
 * torch's, it is NaN in a row of -inf and at a +inf element (inf - inf). */
#include <assert.h>
#include <math.h>
#include <string.h>

#include "autograd/tape.h"
#include "ops/dim_rows.h"
#include "ops/families.h"
#include "ops/reduce_internal.h"
#include "tapegrad/ops.h"

typedef struct lse_params {
    int ndims;
    int dims[TG_MAX_DIMS];
    bool keepdim;
} lse_params;

/* The reduced dims: every dim when no dims are listed. */
static int lse_mask(const tg_tensor *x, const lse_params *p, unsigned *mask)
{
    if (p->ndims == 0) {
        *mask = tg__dims_all(x->ndim);
        return TG_OK;
    }
    return tg__dims_mask("logsumexp", p->ndims, p->dims, x->ndim, mask);
}

/* A tg__row_f64_fn; a row of no elements gives log(0) = -inf. */
static double row_lse(const double *row, int64_t n, const void *arg)
{
    (void)arg;
    double m = -INFINITY, acc = 0;
    for (int64_t k = 0; k < n; k++) {
        if (isnan(row[k])) return row[k];
        if (row[k] > m) m = row[k];
    }
    if (isinf(m)) m = 0;   /* -inf rows give log(0), rows with +inf give inf */
    for (int64_t k = 0; k < n; k++) acc += exp(row[k] - m);
    return log(acc) + m;
}

static int lse_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                       const void *params)
{
    (void)n;
    const lse_params *p = params;
    tg_tensor *x = in[0];
    unsigned mask;
    TG_TRY(lse_mask(x, p, &mask));
    tg__rows_f64_job j = {.fn = row_lse};
    if (tg_dtype_is_float(x->dtype))
        return tg__dim_rows_reduce(ctx, out, x, mask, p->keepdim, TG_F64, tg__rows_f64, &j, true);
    /* An integer x gives f32, as torch 1.13's: logsumexp of x converted to
     * f32 (torch's default dtype); never recorded (x has no gradient). */
    tg_tensor *xf = NULL;
    TG_TRY(tg_to_dtype(&xf, x, TG_F32));
    int rc = tg__dim_rows_reduce(NULL, out, xf, mask, p->keepdim, TG_F64, tg__rows_f64, &j, true);
    tg_tensor_release(xf);
    return rc;
}

static int lse_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    const lse_params *p = tg_op_ctx_params(ctx);
    tg_tensor *x, *y = NULL, *gk = NULL, *yk = NULL, *d = NULL, *e = NULL;
    unsigned mask;
    int kn, rc;
    int64_t kept[TG_MAX_DIMS];
    TG_TRY(tg_op_ctx_saved(ctx, 0, &x));
    TG_TRY_GOTO(tg_op_ctx_saved_output(ctx, 1, &y));
    TG_TRY_GOTO(lse_mask(x, p, &mask));
    tg__dims_out_shape(x->ndim, x->shape, mask, true, &kn, kept);
    TG_TRY_GOTO(tg_reshape(&gk, g, kn, kept));   /* the reduced dims as 1 */
    TG_TRY_GOTO(tg_reshape(&yk, y, kn, kept));
    TG_TRY_GOTO(tg_sub(&d, x, yk));
    TG_TRY_GOTO(tg_exp(&e, d));
    rc = tg_mul(&gi[0], gk, e);
done:
    tg_tensor_release(y);
    tg_tensor_release(gk);
    tg_tensor_release(yk);
    tg_tensor_release(d);
    tg_tensor_release(e);
    return rc;
}

/* FP32, as vector_norm and sum: a half x inside an autocast scope gives an
 * f32 result (torch's CUDA autocast lists logsumexp as fp32; its CPU
 * autocast leaves it in x's dtype). */
static const tg_op_schema lse_op = {
    .name = "logsumexp", .arity = 1, .amp = TG_AMP_FP32, .forward = lse_forward,
    .backward = lse_backward, .double_backward = true,
    .vjp = "da = g exp(a - y)"};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__logsumexp_ops[] = {&lse_op};
static_assert(sizeof tg__logsumexp_ops / sizeof tg__logsumexp_ops[0] == TG__logsumexp_N,
              "src/ops/families.h must count the logsumexp ops");

int tg_logsumexp(tg_tensor **out, tg_tensor *x, int ndims, const int *dims, bool keepdim)
{
    lse_params p;
    memset(&p, 0, sizeof p);
    TG_TRY(tg__dims_args("logsumexp", "x", out, x, ndims, dims, &p.ndims, p.dims));
    p.keepdim = keepdim;
    return tg_op_call(&lse_op, out, 1, &x, &p, sizeof p);
}
