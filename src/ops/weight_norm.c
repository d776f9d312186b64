/* src/ops/weight_norm.c - torch._weight_norm(v, g, dim) and
 * torch.norm_except_dim(v, 2, dim): the reparametrization of Salimans and
 * Kingma's weight normalization,
 *     w = v * (g / ||v||),
 * ||v|| the Euclidean norm over every dim of v except `dim`, kept as
 * extents of 1 (shape (1, .., v.size(dim), .., 1)), so that it broadcasts
 * along `dim`; dim -1 is the norm of the whole tensor, 0-d (torch's
 * dim=None, which WeightNorm stores as -1).  Other negative dims count from
 * the end, as torch's transposes do.  A 1-d v with dim 0 has no dim to
 * reduce: the norm of each element is |v_i|.
 *
 * Written with tg_vector_norm, tg_div and tg_mul in torch's order
 * (the double-differentiable path of at::_weight_norm), so gradients of
 * every order are those of the parts: with n = ||v||,
 *     dL/dg = sum over the reduced dims of dL/dw * v / n,
 *     dL/dv = (g / n) * (dL/dw - v * sum(dL/dw * v) / n^2). */
#include <string.h>

#include "core/core.h"
#include "ops/weight_norm_internal.h"
#include "tapegrad/ops.h"

#define WN_FN "weight_norm"

/* torch's range [-nd, nd), which -1 (the whole tensor) joins. */
int tg__weight_norm_dim(const char *fn, const char *what, int nd, int dim, int *out)
{
    TG_CHECK(dim == -1 || (dim >= -nd && dim < nd), TG_EINVAL,
             "%s: dim=%d must be in [%d, %d) (%s has %d dims) or -1 for the whole tensor", fn,
             dim, -nd, nd, what, nd);
    *out = dim < -1 ? dim + nd : dim;
    return TG_OK;
}

/* *out = ||v|| over every dim but dim (resolved), kept as extents of 1. */
static int norm_except(tg_tensor **out, tg_tensor *v, int dim)
{
    const int nd = tg_tensor_ndim(v);
    if (dim == -1) return tg_vector_norm(out, v, 2.0, 0, NULL, false);
    if (nd == 1) return tg_abs(out, v);   /* no dim left to reduce */
    int dims[TG_MAX_DIMS], k = 0;
    for (int i = 0; i < nd; i++)
        if (i != dim) dims[k++] = i;
    return tg_vector_norm(out, v, 2.0, k, dims, true);
}

static int check_v(const char *fn, tg_tensor **out, tg_tensor *v)
{
    TG_CHECK(out != NULL && v != NULL, TG_EINVAL, "%s: out and v must not be NULL", fn);
    TG_CHECK(tg_dtype_is_float(tg_tensor_dtype(v)), TG_EDTYPE,
             "%s: v has dtype %s; it must be a float tensor", fn,
             tg_dtype_name(tg_tensor_dtype(v)));
    return TG_OK;
}

int tg_norm_except_dim(tg_tensor **out, tg_tensor *v, int dim)
{
    TG_TRY(check_v("norm_except_dim", out, v));
    TG_TRY(tg__weight_norm_dim("norm_except_dim", "v", tg_tensor_ndim(v), dim, &dim));
    tg__lib_enter();
    tg_tensor *r = NULL;
    int rc = norm_except(&r, v, dim);
    tg__lib_leave();
    if (rc < 0) return rc;
    *out = r;
    return tg__scope_capture(out, rc);
}

/* Whether g broadcasts against v's shape without changing it. */
static bool g_fits(const tg_tensor *v, const tg_tensor *g)
{
    const int nv = tg_tensor_ndim(v), ng = tg_tensor_ndim(g);
    if (ng > nv) return false;
    for (int i = 1; i <= ng; i++) {
        const int64_t a = tg_tensor_dim(v, nv - i), b = tg_tensor_dim(g, ng - i);
        if (b != 1 && b != a) return false;
    }
    return true;
}

static int weight_norm(tg_tensor **out, tg_tensor *v, tg_tensor *g, int dim)
{
    tg_tensor *n = NULL, *q = NULL;
    int rc;
    TG_TRY_GOTO(norm_except(&n, v, dim));
    TG_TRY_GOTO(tg_div(&q, g, n));
    TG_TRY_GOTO(tg_mul(out, v, q));
done:
    tg_tensor_release(n);
    tg_tensor_release(q);
    return rc;
}

/* The ops run on the library's behalf; only the result goes to the
 * caller's scope (tapegrad/scope.h). */
int tg_weight_norm(tg_tensor **out, tg_tensor *v, tg_tensor *g, int dim)
{
    TG_TRY(check_v(WN_FN, out, v));
    TG_CHECK(g != NULL, TG_EINVAL, WN_FN ": g must not be NULL");
    TG_CHECK(tg_tensor_dtype(g) == tg_tensor_dtype(v), TG_EDTYPE,
             WN_FN ": g has dtype %s and v %s; they must be the same",
             tg_dtype_name(tg_tensor_dtype(g)), tg_dtype_name(tg_tensor_dtype(v)));
    TG_TRY(tg__weight_norm_dim(WN_FN, "v", tg_tensor_ndim(v), dim, &dim));
    TG_CHECK(g_fits(v, g), TG_ESHAPE,
             WN_FN ": g has %d dims and v %d: g must broadcast to v's shape without "
             "changing it (norm_except_dim's shape: v's extent at dim, 1 elsewhere)",
             tg_tensor_ndim(g), tg_tensor_ndim(v));
    tg__lib_enter();
    tg_tensor *r = NULL;
    int rc = weight_norm(&r, v, g, dim);
    tg__lib_leave();
    if (rc < 0) return rc;
    *out = r;
    return tg__scope_capture(out, rc);
}
