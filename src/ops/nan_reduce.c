/* src/ops/nan_reduce.c - nansum, nanmean and count_nonzero (torch.nansum,
 * torch.nanmean, torch.count_nonzero), composites of registered ops, as
 * torch's own nanmean is:
 *   nansum(x, dims)  = sum_dims(masked_fill(x, isnan(x), 0), dims)
 *   nanmean(x, dims) = nansum(x, dims) / sum_dims(!isnan(x), dims)
 *   count_nonzero(x, dims) = sum_dims(x != 0, dims), an i64 count
 * so their gradients are those of the parts (g where x is not NaN, 0 at
 * NaN; nanmean's divided by the count), to any order.  Float sums are in
 * double, rounded once (tg_sum_dims).  An integer x: nansum is its i64 sum
 * as torch's, nanmean TG_EDTYPE as torch's ("expected input to have
 * floating point dtype"), count_nonzero counts it.  NaN counts as nonzero.
 */
#include "core/core.h"
#include "tapegrad/ops.h"

/* sum_dims, or the sum over every dim when ndims is 0 (torch's dim=None). */
static int sum_over(tg_tensor **out, tg_tensor *x, int ndims, const int *dims, bool keepdim)
{
    if (ndims > 0) return tg_sum_dims(out, x, ndims, dims, keepdim);
    if (!keepdim || x->ndim == 0) return tg_sum(out, x);
    int all[TG_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) all[i] = i;
    return tg_sum_dims(out, x, x->ndim, all, true);
}

/* TG_EINVAL for NULL out or x, or dims NULL with ndims > 0. */
static int nan_args(const char *op, tg_tensor **out, const tg_tensor *x, int ndims,
                    const int *dims)
{
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out is NULL", op);
    TG_CHECK(x != NULL, TG_EINVAL, "%s: x is NULL", op);
    TG_CHECK(ndims >= 0 && (ndims == 0 || dims != NULL), TG_EINVAL,
             "%s: ndims=%d with dims %s; ndims >= 0, dims not NULL when ndims > 0", op, ndims,
             dims ? "given" : "NULL");
    return TG_OK;
}

/* x with its NaNs replaced by 0 (a new reference); *mask (if not NULL)
 * gets the u8 isnan mask. */
static int nan_zeroed(tg_tensor **out, tg_tensor *x, tg_tensor **mask)
{
    tg_tensor *m = NULL;
    TG_TRY(tg_isnan(&m, x));
    const int rc = tg_masked_fill(out, x, m, 0.0);
    if (rc >= 0 && mask) *mask = m;
    else tg_tensor_release(m);
    return rc;
}

static int nansum_dims(tg_tensor **out, tg_tensor *x, int ndims, const int *dims, bool keepdim)
{
    if (!tg_dtype_is_float(x->dtype)) return sum_over(out, x, ndims, dims, keepdim);
    tg_tensor *z = NULL;
    TG_TRY(nan_zeroed(&z, x, NULL));
    const int rc = sum_over(out, z, ndims, dims, keepdim);
    tg_tensor_release(z);
    return rc;
}

static int nanmean_dims(tg_tensor **out, tg_tensor *x, int ndims, const int *dims,
                        bool keepdim)
{
    tg_tensor *z = NULL, *m = NULL, *keep = NULL, *s = NULL, *c = NULL;
    int rc;
    TG_TRY_GOTO(nan_zeroed(&z, x, &m));
    TG_TRY_GOTO(tg_eq_scalar(&keep, m, 0.0));
    TG_TRY_GOTO(sum_over(&s, z, ndims, dims, keepdim));
    TG_TRY_GOTO(sum_over(&c, keep, ndims, dims, keepdim));
    TG_TRY_GOTO(tg_div(out, s, c));
done:
    tg_tensor_release(z);
    tg_tensor_release(m);
    tg_tensor_release(keep);
    tg_tensor_release(s);
    tg_tensor_release(c);
    return rc;
}

static int count_nonzero(tg_tensor **out, tg_tensor *x, int ndims, const int *dims,
                         bool keepdim)
{
    (void)keepdim;
    tg_tensor *nz = NULL;
    TG_TRY(tg_ne_scalar(&nz, x, 0.0));
    const int rc = sum_over(out, nz, ndims, dims, false);
    tg_tensor_release(nz);
    return rc;
}

/* The public calls: arguments checked, then the composite run inside the
 * library (its intermediates not captured by a caller's scope). */
typedef int (*nan_fn)(tg_tensor **, tg_tensor *, int, const int *, bool);

static int run(const char *op, nan_fn f, tg_tensor **out, tg_tensor *x, int ndims,
               const int *dims, bool keepdim)
{
    TG_TRY(nan_args(op, out, x, ndims, dims));
    tg__lib_enter();
    const int rc = f(out, x, ndims, dims, keepdim);
    tg__lib_leave();
    return tg__scope_capture(out, rc);
}

int tg_nansum_dims(tg_tensor **out, tg_tensor *x, int ndims, const int *dims, bool keepdim)
{
    return run("nansum", nansum_dims, out, x, ndims, dims, keepdim);
}

int tg_nansum(tg_tensor **out, tg_tensor *x)
{
    return run("nansum", nansum_dims, out, x, 0, NULL, false);
}

int tg_nanmean_dims(tg_tensor **out, tg_tensor *x, int ndims, const int *dims, bool keepdim)
{
    if (x)
        TG_CHECK(tg_dtype_is_float(x->dtype), TG_EDTYPE,
                 "nanmean: x has dtype %s; float dtypes only (as torch)",
                 tg_dtype_name(x->dtype));
    return run("nanmean", nanmean_dims, out, x, ndims, dims, keepdim);
}

int tg_nanmean(tg_tensor **out, tg_tensor *x)
{
    return tg_nanmean_dims(out, x, 0, NULL, false);
}

int tg_count_nonzero(tg_tensor **out, tg_tensor *x, int ndims, const int *dims)
{
    return run("count_nonzero", count_nonzero, out, x, ndims, dims, false);
}
