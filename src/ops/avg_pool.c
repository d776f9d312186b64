/* src/ops/avg_pool.c - avg_pool(x) (AvgPool1d/2d/3d) and its adjoint
 * avg_pool_backward.
 *
 * Along each spatial axis of extent I, window o runs from lo = o*s - p to
 * hi = min(lo + k, I + p), a size of hi - lo counting the padding
 * (PyTorch's pool_size: a ceil_mode window is cut at the right padding),
 * of which the indices in [max(lo, 0), min(hi, I)) are inside x.  With
 * div(o) the product over the axes of either size (count_include_pad) or
 * the inside count (without),
 *   y[o] = (1 / div(o)) sum_{i in window o, inside x} x[i],
 * so y = A x for a fixed matrix A.  The gradient is A^T g: each g[o] / div(o)
 * added into every x element of window o; that op is linear too, and its
 * gradient is A h, avg_pool again.  The two are each other's adjoint, so
 * derivatives of any order are these two ops.  Both run in the compute
 * dtype (pool_kernels_tmpl.h), in PyTorch's order: the sum of a window from
 * 0, then one division; g[o] / div(o) added into x's elements output by
 * output. */
#include <assert.h>
#include <string.h>

#include "autograd/tape.h"
#include "ops/families.h"
#include "ops/pool_internal.h"
#include "tapegrad/pool.h"

static const tg_op_schema avg_pool_op, avg_pool_backward_op;

/* t's values through A (adjoint: A^T) into a new tensor *out of shape
 * (ndim, shape), in t's dtype. */
static int avg_run(const tg__pool_geom *g, bool cip, const tg_tensor *t, int ndim,
                   const int64_t *shape, bool adjoint, tg_tensor **out)
{
    const tg_dtype cdt = tg__compute_dtype(t->dtype);
    tg__pool_axes ax;
    TG_TRY(tg__pool_axes_init(&ax, g, cip, cdt));
    tg__pool_job j = {.g = g, .ax = &ax};
    int rc = tg__pool_run(adjoint ? &tg__avg_pool_adjoint_kernels : &tg__avg_pool_kernels, &j,
                          cdt, t, ndim, shape, adjoint, out);
    tg__pool_axes_free(&ax);
    return rc;
}

static int avg_pool_shape(int n, tg_tensor *const *in, const void *params, tg_dtype *dtype,
                          int *ndim, int64_t *shape)
{
    (void)n;
    return tg__pool_forward_shape(TG__AVG_POOL, in, params, dtype, ndim, shape);
}

static int avg_pool_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                            const void *params)
{
    (void)ctx, (void)n;
    tg__pool_call c;
    int64_t os[TG_MAX_DIMS];
    TG_TRY(tg__pool_prepare_x(TG__AVG_POOL, params, in[0], &c, os));
    tg__pool_geom g;
    tg__pool_geom_of(TG__AVG_POOL, &c, os, &g);
    return avg_run(&g, c.p.count_include_pad, in[0], c.ndim, os, false, out);
}

/* The gradient of avg_pool: avg_pool_backward(g), told x's shape. */
static int avg_pool_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    const tg_meta *xm = tg__ctx_input_meta(ctx, 0);
    tg__pool_call b = *(const tg__pool_call *)tg__ctx_params(ctx);
    b.ndim = xm->ndim;
    memcpy(b.shape, xm->shape, sizeof(int64_t) * (size_t)xm->ndim);
    tg_tensor *in[1] = {g};
    return tg_op_call(&avg_pool_backward_op, &gi[0], 1, in, &b, sizeof b);
}

/* dx = A^T g, of x's shape (in the params). */
static int avg_bw_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                          const void *params)
{
    (void)ctx, (void)n;
    const char *op = "avg_pool_backward";
    tg__pool_call c = *(const tg__pool_call *)params;
    tg_tensor *g = in[0];
    int64_t os[TG_MAX_DIMS];
    TG_TRY(tg__pool_prepare(op, TG__AVG_POOL, g ? g->dtype : TG_F64, &c, os));
    TG_TRY(tg__pool_check_grad(op, g, &c, os));
    tg__pool_geom geo;
    tg__pool_geom_of(TG__AVG_POOL, &c, os, &geo);
    return avg_run(&geo, c.p.count_include_pad, g, c.ndim, c.shape, true, out);
}

/* The gradient of avg_pool_backward: avg_pool with the same parameters. */
static int avg_bw_backward(tg_ctx *ctx, tg_tensor *h, tg_tensor **gi)
{
    tg_tensor *in[1] = {h};
    return tg_op_call(&avg_pool_op, &gi[0], 1, in, tg__ctx_params(ctx), sizeof(tg__pool_call));
}

static const tg_op_schema avg_pool_op = {
    .name = "avg_pool", .arity = 1, .amp = TG_AMP_KEEP, .forward = avg_pool_forward,
    .backward = avg_pool_backward, .shape = avg_pool_shape, .double_backward = true,
    .vjp = "da = avg_pool_backward(g): each g element / its window's count added into the window"};
static const tg_op_schema avg_pool_backward_op = {
    .name = "avg_pool_backward", .arity = 1, .amp = TG_AMP_KEEP, .forward = avg_bw_forward,
    .backward = avg_bw_backward, .double_backward = true,
    .vjp = "dg = avg_pool(g'), same parameters"};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__avg_pool_ops[] = {&avg_pool_op, &avg_pool_backward_op};
static_assert(sizeof tg__avg_pool_ops / sizeof tg__avg_pool_ops[0] == TG__avg_pool_N,
              "src/ops/families.h must count the avg_pool ops");

int tg_avg_pool(tg_tensor **out, tg_tensor *x, int n_spatial, const tg_pool_params *p)
{
    const char *op = tg__pool_opname(TG__AVG_POOL, n_spatial);
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", op);
    TG_CHECK(x != NULL, TG_EINVAL, "%s: x must not be NULL", op);
    tg__pool_call c = {.ns = n_spatial};
    TG_TRY(tg__pool_check_params(op, TG__AVG_POOL, n_spatial, p, &c.p));
    tg_tensor *in[1] = {x};
    return tg_op_call(&avg_pool_op, out, 1, in, &c, sizeof c);
}
