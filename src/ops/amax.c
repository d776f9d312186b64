/* src/ops/amax.c - amax and amin over chosen dims (torch.amax / torch.amin)
 * and max and min of the whole tensor (torch.max(x) / torch.min(x)).
 *
 * Values: the largest (smallest) element of each row, or NaN when the row
 * holds one, as PyTorch.  Any dtype; integers are compared exactly.  A
 * float x in contiguous memory reduced over one run of dims is read in one
 * pass (the index of each row's first NaN or extreme, src/ops/sort_first.c);
 * other cases go through rows of f64 or i64.
 *
 * Gradients: every element equal to its row's result shares the row's
 * gradient evenly, with m the 0/1 mask of those elements and c = sum(m)
 * over the row:
 *   amax:       dx = (g / c) * m      (PyTorch's scale_grad_by_count)
 *   max(x):     dx = where(m, g / c, 0), and a NaN result's mask is x's
 *               NaNs (PyTorch's evenly_distribute_backward)
 * so a row whose result is NaN has c = 0 and a gradient of NaN throughout
 * under amax, and the gradient split among its NaNs under max(x), both as
 * PyTorch.  m and c are constants (a tie changes only where x moves by a
 * jump), so these are products and a where of g: differentiable again,
 * with second derivatives 0 in x. */
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/tape.h"
#include "ops/dim_rows.h"
#include "ops/elementwise.h"
#include "ops/families.h"
#include "ops/reduce_internal.h"
#include "ops/sort_internal.h"
#include "tapegrad/ops.h"

typedef struct amax_params {
    int ndims;
    int dims[TG_MAX_DIMS];
    bool keepdim;
    bool min;
    bool whole;   /* max(x) / min(x): every dim, a 0-d result */
} amax_params;

static const char *op_name(const amax_params *p)
{
    if (p->whole) return p->min ? "min" : "max";
    return p->min ? "amin" : "amax";
}

/* The reduced dims, checked (TG_EINVAL for bad dims, TG_ESHAPE for an
 * empty reduction). */
static int amax_mask(const tg_tensor *x, const amax_params *p, unsigned *mask)
{
    const char *op = op_name(p);
    if (p->whole) {
        TG_CHECK(tg_tensor_numel(x) > 0, TG_ESHAPE, "%s: x is empty; the maximum or minimum "
                 "of a whole tensor needs at least one element", op);
        *mask = tg__dims_all(x->ndim);
        return TG_OK;
    }
    TG_TRY(tg__dims_mask(op, p->ndims, p->dims, x->ndim, mask));
    return tg__dims_nonempty(op, x, *mask);
}

/* Each row's largest (smallest) element in place of the row's first, NaN
 * taken over any number. */
static void reduce_rows_f64(double *v, int64_t rows, int64_t n, bool min)
{
    for (int64_t r = 0; r < rows; r++) {
        const double *row = v + r * n;
        double best = row[0];
        for (int64_t k = 0; k < n && !isnan(best); k++)
            if (isnan(row[k]) || (min ? row[k] < best : row[k] > best)) best = row[k];
        v[r] = best;
    }
}

static void reduce_rows_i64(int64_t *v, int64_t rows, int64_t n, bool min)
{
    for (int64_t r = 0; r < rows; r++) {
        const int64_t *row = v + r * n;
        int64_t best = row[0];
        for (int64_t k = 1; k < n; k++)
            if (min ? row[k] < best : row[k] > best) best = row[k];
        v[r] = best;
    }
}

/* tg__dim_rows_reduce's fn: min points at amax_params.min. */
static void amax_rows(void *min, tg_dtype as, void *buf, int64_t rows, int64_t n)
{
    if (as == TG_F64) reduce_rows_f64(buf, rows, n, *(const bool *)min);
    else reduce_rows_i64(buf, rows, n, *(const bool *)min);
}

/* The forward for a float x in contiguous memory whose reduced dims are
 * one run: each row's result is its element at the index of its first
 * NaN, else of its first largest (smallest) element, which one pass over
 * x finds (src/ops/sort_first.c); the same value as amax_rows'. */
static int amax_first(tg_op_ctx *ctx, tg_tensor **out, tg_tensor *x, unsigned mask,
                      const amax_params *p, int64_t n, int64_t inner)
{
    int ond;
    int64_t oshape[TG_MAX_DIMS];
    tg__dims_out_shape(x->ndim, x->shape, mask, p->keepdim, &ond, oshape);
    const int64_t m = tg_tensor_numel(x) / n;   /* outer x inner results */
    const bool values = inner == 1 && tg__extreme_applies(x, n);   /* no index needed */
    tg_tensor *r = tg__tensor_uninit(x->dtype, ond, oshape);
    int64_t *ix = values ? NULL : tg__malloc((size_t)(m > 0 ? m : 1) * sizeof *ix);
    int rc = r && (values || ix) ? TG_OK : TG_ENOMEM;
    if (rc >= 0 && values) tg__extreme_rows(x, p->min, n, tg_tensor_data(r));
    if (rc >= 0 && !values)
        rc = tg__first_along(x, p->min ? TG__FIRST_MIN_NAN_FIRST : TG__FIRST_MAX_NAN_FIRST, n,
                             inner, ix);
    if (rc >= 0 && !values) {
        const size_t es = tg_dtype_size(x->dtype);
        const char *xd = tg_tensor_cdata(x);
        char *rd = tg_tensor_data(r);
        for (int64_t e = 0; e < m; e++) {   /* e = (o, k) */
            const int64_t at = ((e / inner) * n + ix[e]) * inner + e % inner;
            if (es == 4) ((float *)rd)[e] = ((const float *)xd)[at];
            else if (es == 8) ((double *)rd)[e] = ((const double *)xd)[at];
            else memcpy(rd + (size_t)e * es, xd + (size_t)at * es, es);   /* f16, bf16 */
        }
    }
    if (rc >= 0 && ctx) rc = tg_op_ctx_save(ctx, x);
    if (rc >= 0 && ctx) rc = tg_op_ctx_save_output(ctx, r);
    free(ix);
    if (rc < 0) {
        tg_tensor_release(r);
        return rc;
    }
    *out = r;
    return TG_OK;
}

static int amax_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                        const void *params)
{
    const amax_params *p = params;
    tg_tensor *x = in[0];
    unsigned mask;
    TG_CHECK(x != NULL, TG_EINVAL, "%s: x must not be NULL", op_name(p));
    TG_TRY(amax_mask(x, p, &mask));
    /* max(x) and min(x) reduce every dim without keepdim: a 0-d result */
    int64_t rn, inner;
    if (tg__dims_run(x, mask, &rn, &inner) && tg__first_applies(x, rn))
        return amax_first(ctx, out, x, mask, p, rn, inner);
    const tg_dtype as = tg_dtype_is_float(x->dtype) ? TG_F64 : TG_I64;
    bool min = p->min;
    return tg__dim_rows_reduce(ctx, out, x, mask, p->keepdim, as, amax_rows, &min, true);
}

static int amax_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    const amax_params *p = tg_op_ctx_params(ctx);
    tg_tensor *x, *y = NULL, *m = NULL, *c = NULL, *gk = NULL, *t = NULL;
    unsigned mask;
    int rc;
    TG_TRY(tg_op_ctx_saved(ctx, 0, &x));
    TG_TRY(tg_op_ctx_saved_output(ctx, 1, &y));
    TG_TRY_GOTO(amax_mask(x, p, &mask));
    TG_TRY_GOTO(tg__tie_mask(x, y, mask, p->whole, false, g->dtype, &m, &c));
    TG_TRY_GOTO(tg_reshape(&gk, g, c->ndim, c->shape));   /* the reduced dims as 1 */
    TG_TRY_GOTO(tg_div(&t, gk, c));
    if (p->whole) TG_TRY_GOTO(tg__where_or_zero(&gi[0], m, t));
    else TG_TRY_GOTO(tg_mul(&gi[0], t, m));
done:
    tg_tensor_release(y);
    tg_tensor_release(m);
    tg_tensor_release(c);
    tg_tensor_release(gk);
    tg_tensor_release(t);
    return rc;
}

/* formula: the schema's vjp (tapegrad/op.h). */
#define AMAX_SCHEMA(var, opname, formula)                                     \
    static const tg_op_schema var = {.name = opname, .arity = 1, .amp = TG_AMP_KEEP, \
                                     .forward = amax_forward, .backward = amax_backward, \
                                     .double_backward = true, .vjp = formula}
AMAX_SCHEMA(amax_op, "amax",
            "da = g / count at the elements equal to their row's maximum, 0 elsewhere");
AMAX_SCHEMA(amin_op, "amin",
            "da = g / count at the elements equal to their row's minimum, 0 elsewhere");
AMAX_SCHEMA(max_op, "max",
            "da = g / count at the elements equal to the maximum (its NaNs when it is NaN)");
AMAX_SCHEMA(min_op, "min",
            "da = g / count at the elements equal to the minimum (its NaNs when it is NaN)");

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__amax_ops[] = {&amax_op, &amin_op, &max_op, &min_op};
static_assert(sizeof tg__amax_ops / sizeof tg__amax_ops[0] == TG__amax_N,
              "src/ops/families.h must count the amax ops");

static int amax_call(const tg_op_schema *op, tg_tensor **out, tg_tensor *x, int ndims,
                     const int *dims, const amax_params *base)
{
    amax_params p = *base;
    TG_TRY(tg__dims_args(op->name, "x", out, x, ndims, dims, &p.ndims, p.dims));
    return tg_op_call(op, out, 1, &x, &p, sizeof p);
}

int tg_amax_dims(tg_tensor **out, tg_tensor *x, int ndims, const int *dims, bool keepdim)
{
    return amax_call(&amax_op, out, x, ndims, dims, &(amax_params){.keepdim = keepdim});
}

int tg_amin_dims(tg_tensor **out, tg_tensor *x, int ndims, const int *dims, bool keepdim)
{
    return amax_call(&amin_op, out, x, ndims, dims,
                     &(amax_params){.keepdim = keepdim, .min = true});
}

int tg_max(tg_tensor **out, tg_tensor *x)
{
    return amax_call(&max_op, out, x, 0, NULL, &(amax_params){.whole = true});
}

int tg_min(tg_tensor **out, tg_tensor *x)
{
    return amax_call(&min_op, out, x, 0, NULL, &(amax_params){.whole = true, .min = true});
}
