/* src/ops/adaptive_pool.c - adaptive_avg_pool(x) (AdaptiveAvgPool1d/2d/3d)
 * and its adjoint adaptive_avg_pool_backward.
 *
 * Along each spatial axis of extent I pooled to extent O, window o covers
 * the indices [floor(o*I/O), ceil((o+1)*I/O)), of size k(o) >= 1 (windows
 * overlap when O does not divide I, and repeat when O > I).  With
 * div(o) the product over the axes of those sizes,
 *   y[o] = (1 / div(o)) sum_{i in window o} x[i],
 * so y = A x for a fixed matrix A, and the gradient is A^T g: each g[o] /
 * div(o) added into every x element of window o.  That op is linear too,
 * with gradient A h, adaptive_avg_pool again: derivatives of any order are
 * these two ops.  When O divides I on every axis the windows are avg_pool's
 * with kernel = stride = I/O, and avg_pool's kernels (vectorised) compute
 * both ops; otherwise the adaptive kernels of pool_kernels_tmpl.h do, in
 * PyTorch's order (a window's sum from 0, then a division by each axis's
 * size in turn).  Where those are slow (see adaptive_run), pool_small.c's
 * planes kernel gives either's results with the sums of several planes
 * side by side, but for a global pooling in f32 of planes of 64 or more
 * elements, whose sums (pool_simd.c) take their terms in the lanes of
 * vectors, in an order of their own.  All run in the compute dtype. */
#include <assert.h>
#include <string.h>

#include "autograd/tape.h"
#include "ops/families.h"
#include "ops/pool_internal.h"
#include "tapegrad/pool.h"

static const tg_op_schema adaptive_avg_op, adaptive_avg_backward_op;

/* t's values through A (adjoint: A^T) for call c whose output has shape os,
 * into a new tensor *out of shape (ndim, shape), in t's dtype. */
static int adaptive_run(const tg__pool_call *c, const int64_t *os, const tg_tensor *t, int ndim,
                        const int64_t *shape, bool adjoint, tg_tensor **out)
{
    const tg_dtype cdt = tg__compute_dtype(t->dtype);
    tg__pool_geom g;
    tg__pool_geom_of(TG__ADAPTIVE_AVG_POOL, c, os, &g);
    bool fast = !c->general;
    for (int a = 0; a < 3; a++) fast = fast && g.in[a] % g.out[a] == 0;
    /* avg_pool's kernels loop over an output row once per tap: where a row
     * holds fewer than 4 outputs, and wherever the adaptive kernels run,
     * the planes kernel and the adaptive adjoint run instead, with
     * avg_pool's division where its windows are these. */
    const bool small = !c->serial && (!fast || g.out[2] < 4);
    if (fast && !small)
        for (int a = 0; a < 3; a++) g.k[a] = g.s[a] = g.in[a] / g.out[a];
    tg__pool_axes ax;
    TG_TRY(fast && !small ? tg__pool_axes_init(&ax, &g, true, cdt)
                          : tg__adaptive_axes_init(&ax, &g));
    const tg__pool_kernels *k =
        adjoint ? (fast && !small ? &tg__avg_pool_adjoint_kernels
                                  : &tg__adaptive_avg_adjoint_kernels)
                : (small  ? &tg__adaptive_avg_planes_kernels
                   : fast ? &tg__avg_pool_kernels
                          : &tg__adaptive_avg_kernels);
    tg__pool_job j = {.g = &g, .ax = &ax, .one_division = fast};
    int rc = tg__pool_run(k, &j, cdt, t, ndim, shape, adjoint, out);
    tg__pool_axes_free(&ax);
    return rc;
}

static int adaptive_avg_shape(int n, tg_tensor *const *in, const void *params, tg_dtype *dtype,
                              int *ndim, int64_t *shape)
{
    (void)n;
    return tg__pool_forward_shape(TG__ADAPTIVE_AVG_POOL, in, params, dtype, ndim, shape);
}

static int adaptive_avg_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                                const void *params)
{
    (void)ctx, (void)n;
    tg__pool_call c;
    int64_t os[TG_MAX_DIMS];
    TG_TRY(tg__pool_prepare_x(TG__ADAPTIVE_AVG_POOL, params, in[0], &c, os));
    return adaptive_run(&c, os, in[0], c.ndim, os, false, out);
}

/* The gradient of adaptive_avg_pool: adaptive_avg_pool_backward(g), told
 * x's shape. */
static int adaptive_avg_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    const tg_meta *xm = tg__ctx_input_meta(ctx, 0);
    tg__pool_call b = *(const tg__pool_call *)tg__ctx_params(ctx);
    b.ndim = xm->ndim;
    memcpy(b.shape, xm->shape, sizeof(int64_t) * (size_t)xm->ndim);
    tg_tensor *in[1] = {g};
    return tg_op_call(&adaptive_avg_backward_op, &gi[0], 1, in, &b, sizeof b);
}

/* dx = A^T g, of x's shape (in the params). */
static int adaptive_bw_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                               const void *params)
{
    (void)ctx, (void)n;
    const char *op = "adaptive_avg_pool_backward";
    tg__pool_call c = *(const tg__pool_call *)params;
    tg_tensor *g = in[0];
    int64_t os[TG_MAX_DIMS];
    TG_TRY(tg__pool_prepare(op, TG__ADAPTIVE_AVG_POOL, g ? g->dtype : TG_F64, &c, os));
    TG_TRY(tg__pool_check_grad(op, g, &c, os));
    return adaptive_run(&c, os, g, c.ndim, c.shape, true, out);
}

/* The gradient of adaptive_avg_pool_backward: adaptive_avg_pool with the
 * same parameters. */
static int adaptive_bw_backward(tg_ctx *ctx, tg_tensor *h, tg_tensor **gi)
{
    tg_tensor *in[1] = {h};
    return tg_op_call(&adaptive_avg_op, &gi[0], 1, in, tg__ctx_params(ctx),
                      sizeof(tg__pool_call));
}

static const tg_op_schema adaptive_avg_op = {
    .name = "adaptive_avg_pool", .arity = 1, .amp = TG_AMP_KEEP,
    .forward = adaptive_avg_forward, .backward = adaptive_avg_backward,
    .shape = adaptive_avg_shape, .double_backward = true,
    .vjp = "da = adaptive_avg_pool_backward(g): each g element / its window's size added "
           "into the window"};
static const tg_op_schema adaptive_avg_backward_op = {
    .name = "adaptive_avg_pool_backward", .arity = 1, .amp = TG_AMP_KEEP,
    .forward = adaptive_bw_forward, .backward = adaptive_bw_backward,
    .double_backward = true, .vjp = "dg = adaptive_avg_pool(g'), same output size"};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__adaptive_pool_ops[] = {&adaptive_avg_op, &adaptive_avg_backward_op};
static_assert(sizeof tg__adaptive_pool_ops / sizeof tg__adaptive_pool_ops[0] ==
                  TG__adaptive_pool_N,
              "src/ops/families.h must count the adaptive_pool ops");

int tg__adaptive_pool_check(const char *op, tg_tensor **out, tg_tensor *x, int n_spatial,
                            const int64_t *output_size, tg__pool_call *c)
{
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", op);
    TG_CHECK(x != NULL, TG_EINVAL, "%s: x must not be NULL", op);
    TG_CHECK(n_spatial >= 1 && n_spatial <= TG_POOL_MAX_SPATIAL, TG_EINVAL,
             "%s: n_spatial=%d must be 1, 2 or 3", op, n_spatial);
    TG_CHECK(output_size != NULL, TG_EINVAL, "%s: output_size must not be NULL", op);
    const int nd = tg_tensor_ndim(x);
    TG_TRY(tg__pool_check_rank(op, n_spatial, nd));
    *c = (tg__pool_call){.ns = n_spatial};
    for (int a = 0; a < n_spatial; a++) {
        const int64_t s = output_size[a];
        TG_CHECK(s >= 0 && s <= TG_POOL_MAX_PARAM, TG_EINVAL,
                 "%s: output_size[%d]=%lld must be in [1, %lld], or 0 for x's extent", op, a,
                 (long long)s, (long long)TG_POOL_MAX_PARAM);
        const int64_t in = tg_tensor_shape(x)[nd - n_spatial + a];
        TG_CHECK(s > 0 || in > 0, TG_ESHAPE, "%s: x's dim %d has extent 0; every dim but the "
                 "batch must be >= 1", op, nd - n_spatial + a);
        c->size[a] = s ? s : in;
    }
    return TG_OK;
}

int tg__adaptive_avg_pool_call(tg_tensor **out, tg_tensor *x, int n_spatial,
                               const int64_t *output_size, unsigned kernels)
{
    const char *op = tg__pool_opname(TG__ADAPTIVE_AVG_POOL, n_spatial);
    tg__pool_call c;
    TG_TRY(tg__adaptive_pool_check(op, out, x, n_spatial, output_size, &c));
    c.general = kernels & TG__POOL_GENERAL;
    c.serial = kernels & TG__POOL_SERIAL;
    tg_tensor *in[1] = {x};
    return tg_op_call(&adaptive_avg_op, out, 1, in, &c, sizeof c);
}

int tg_adaptive_avg_pool(tg_tensor **out, tg_tensor *x, int n_spatial,
                         const int64_t *output_size)
{
    return tg__adaptive_avg_pool_call(out, x, n_spatial, output_size, 0);
}
