/* src/ops/max_unpool.c - max_unpool (F.max_unpool1d/2d/3d): each element of
 * x put at its index in a zeroed output, the inverse that max_pool's
 * indices allow.
 *
 * With x and the indices viewed as (lead..., L_in) (their N spatial dims
 * flattened) and the output as (lead..., L_out), L_out the product of the
 * output extents,
 *   y = scatter(zeros, -1, idx, x):   y[..., idx[..., i]] = x[..., i]
 * which is torch's CPU kernel to the bit: an index named twice keeps the
 * last element in row-major order.  Its gradient is scatter's,
 *   dx = gather(g, -1, idx)
 * (every element gets g at its index, the overwritten ones too, as torch's
 * max_pool_double_backward), and gather's gradient is scatter_add, so
 * derivatives of every order are these ops. */
#include <string.h>

#include "core/core.h"
#include "ops/pool_internal.h"
#include "tapegrad/ops.h"
#include "tapegrad/pool.h"

static const char *unpool_name(int n_spatial)
{
    static const char *const names[] = {"max_unpool1d", "max_unpool2d", "max_unpool3d"};
    return n_spatial >= 1 && n_spatial <= 3 ? names[n_spatial - 1] : "max_unpool";
}

/* The output extents out[0..n) for x's extents in (the rules of
 * tg_max_unpool). */
static int unpool_size(const char *op, int n, const int64_t *in, const tg_pool_params *p,
                       const int64_t *output_size, int64_t *out)
{
    for (int a = 0; a < n; a++) {
        const int64_t k = p->kernel[a], s = p->stride[a] ? p->stride[a] : k,
                      pad = p->padding[a];
        TG_CHECK(k >= 1 && k <= TG_POOL_MAX_PARAM, TG_EINVAL,
                 "%s: kernel[%d]=%lld must be in [1, %lld]", op, a, (long long)k,
                 (long long)TG_POOL_MAX_PARAM);
        TG_CHECK(s >= 1 && s <= TG_POOL_MAX_PARAM, TG_EINVAL,
                 "%s: stride[%d]=%lld must be in [1, %lld] (0: the kernel)", op, a,
                 (long long)p->stride[a], (long long)TG_POOL_MAX_PARAM);
        TG_CHECK(pad >= 0 && pad <= TG_POOL_MAX_PARAM, TG_EINVAL,
                 "%s: padding[%d]=%lld must be in [0, %lld]", op, a, (long long)pad,
                 (long long)TG_POOL_MAX_PARAM);
        TG_CHECK(in[a] <= TG_POOL_MAX_PARAM, TG_ESHAPE, "%s: spatial dim %d of extent %lld "
                 "is above %lld", op, a, (long long)in[a], (long long)TG_POOL_MAX_PARAM);
        /* torch's _unpool_output_size */
        const int64_t def = (in[a] - 1) * s + k - 2 * pad;
        if (!output_size) {
            TG_CHECK(def >= 1, TG_EINVAL, "%s: the output extent (%lld - 1)*%lld + %lld - "
                     "2*%lld = %lld of spatial dim %d must be >= 1", op, (long long)in[a],
                     (long long)s, (long long)k, (long long)pad, (long long)def, a);
            out[a] = def;
            continue;
        }
        const int64_t o = output_size[a];
        TG_CHECK(o > def - s && o < def + s && o >= 1, TG_EINVAL,
                 "%s: invalid output_size[%d]=%lld: must be between %lld and %lld "
                 "(exclusive) and >= 1", op, a, (long long)o, (long long)(def - s),
                 (long long)(def + s));
        out[a] = o;
    }
    return TG_OK;
}

/* Checks that every index is in [0, plane) (torch: "Found an invalid max
 * index"). */
static int check_indices(const char *op, const tg_tensor *idx, int64_t plane)
{
    const int64_t n = tg_tensor_numel(idx);
    int64_t *v = tg__work_alloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    if (!v) return TG_ENOMEM;
    tg__gather(idx, TG_I64, v);
    int rc = TG_OK;
    for (int64_t e = 0; e < n && rc >= 0; e++)
        if (v[e] < 0 || v[e] >= plane)
            rc = tg__error(TG_EINVAL, "%s: found an invalid max index: indices[%lld]=%lld "
                           "(the output planes have %lld elements)", op, (long long)e,
                           (long long)v[e], (long long)plane);
    tg__work_free(v);
    return rc;
}

/* y = scatter(zeros(lead..., L_out), -1, idx', x') viewed as
 * (lead..., out...), x' and idx' being x and idx as (lead..., L_in). */
static int unpool(tg_tensor **y, tg_tensor *x, tg_tensor *idx, int n, const int64_t *os)
{
    const int nd = x->ndim, lead = nd - n;
    int64_t flat[TG_MAX_DIMS], full[TG_MAX_DIMS];
    memcpy(flat, x->shape, sizeof(int64_t) * (size_t)lead);
    memcpy(full, x->shape, sizeof(int64_t) * (size_t)lead);
    int64_t l_out = 1;
    for (int a = 0; a < n; a++) {
        l_out *= os[a];
        full[lead + a] = os[a];
    }
    flat[lead] = l_out;
    tg_tensor *xf = NULL, *If = NULL, *z = NULL, *s = NULL;
    int rc;
    TG_TRY_GOTO(tg_flatten(&xf, x, lead, nd - 1));
    TG_TRY_GOTO(tg_flatten(&If, idx, lead, nd - 1));
    TG_TRY_GOTO(tg_tensor_zeros(&z, x->dtype, lead + 1, flat));
    TG_TRY_GOTO(tg_scatter(&s, z, -1, If, xf));
    TG_TRY_GOTO(tg_reshape(y, s, nd, full));
done:
    tg_tensor_release(xf);
    tg_tensor_release(If);
    tg_tensor_release(z);
    tg_tensor_release(s);
    return rc;
}

int tg_max_unpool(tg_tensor **out, tg_tensor *x, tg_tensor *indices, int n_spatial,
                  const tg_pool_params *p, const int64_t *output_size)
{
    const char *op = unpool_name(n_spatial);
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", op);
    TG_CHECK(x != NULL && indices != NULL && p != NULL, TG_EINVAL,
             "%s: x, indices and p must not be NULL", op);
    TG_CHECK(n_spatial >= 1 && n_spatial <= 3, TG_EINVAL, "%s: n_spatial=%d must be 1, 2 or 3",
             op, n_spatial);
    TG_TRY(tg__pool_check_rank(op, n_spatial, x->ndim));
    TG_CHECK(tg_dtype_is_float(x->dtype), TG_EDTYPE, "%s: x has dtype %s; float dtypes only",
             op, tg_dtype_name(x->dtype));
    TG_CHECK(indices->dtype == TG_I64, TG_EDTYPE, "%s: indices has dtype %s; must be i64", op,
             tg_dtype_name(indices->dtype));
    bool same = indices->ndim == x->ndim;
    for (int d = 0; same && d < x->ndim; d++) same = indices->shape[d] == x->shape[d];
    TG_CHECK(same, TG_ESHAPE, "%s: indices must have x's shape", op);
    const int lead = x->ndim - n_spatial;
    for (int d = lead == 2 ? 1 : 0; d < x->ndim; d++)
        TG_CHECK(x->shape[d] >= 1, TG_ESHAPE, "%s: x's dim %d is empty; every dim but the "
                 "batch must be >= 1", op, d);
    int64_t os[TG_POOL_MAX_SPATIAL];
    TG_TRY(unpool_size(op, n_spatial, x->shape + lead, p, output_size, os));
    int64_t plane = 1;
    for (int a = 0; a < n_spatial; a++) {
        TG_CHECK(os[a] <= INT64_MAX / 8 / plane, TG_ESHAPE, "%s: the output is too large", op);
        plane *= os[a];
    }
    TG_TRY(check_indices(op, indices, plane));
    tg__lib_enter();
    const int rc = unpool(out, x, indices, n_spatial, os);
    tg__lib_leave();
    return tg__scope_capture(out, rc);
}
