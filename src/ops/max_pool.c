/* src/ops/max_pool.c - max_pool(x) (MaxPool1d/2d/3d), its gradient
 * max_pool_backward and that one's gradient max_pool_gather.
 *
 * Along each spatial axis of extent I, window o holds the indices
 * o*s - p + j*d, j = 0..k-1, that lie in [0, I).  The forward picks in each
 * window the index of its largest element, idx[o] (as PyTorch's CPU kernels:
 * a row-major scan that takes a value when it is > the best so far or NaN,
 * so ties go to the first and the last NaN wins; a window of -infs picks its
 * first element, and an empty window, possible with dilation, picks none
 * (-1) and gives -inf).  Indices count within one (b, c) plane, as the
 * indices PyTorch returns.  Then
 *   y[o] = x[idx[o]] = (S x)[o]
 * for the 0/1 selection matrix S that idx defines (held fixed: the
 * gradient of the choice itself is 0 almost everywhere).  So
 *   dx = S^T g       max_pool_backward(g, idx): each g[o] added into x[idx[o]]
 *   d/dg of S^T g  = S: max_pool_gather(h, idx) = h[idx[o]]
 * and the gradient of max_pool_gather is max_pool_backward again: the pair
 * are each other's adjoint, so derivatives of any order are these ops.  The
 * indices are an input of both (an i64 tensor of y's shape, no gradient). */
#include <assert.h>
#include <math.h>
#include <string.h>

#include "autograd/tape.h"
#include "ops/families.h"
#include "ops/pool_internal.h"
#include "tapegrad/pool.h"

static const tg_op_schema max_pool_op, max_pool_backward_op, max_pool_gather_op;

/* Window o of axis a: its first index inside x, one past its last possible
 * index, and the step (PyTorch's ih0 moved up by d while negative, and
 * ih1). */
static void window(const tg__pool_geom *g, int a, int64_t o, int64_t *lo, int64_t *hi)
{
    int64_t start = o * g->s[a] - g->p[a];
    int64_t end = start + (g->k[a] - 1) * g->dil[a] + 1;
    if (end > g->in[a]) end = g->in[a];
    if (start < 0) start += (-start + g->dil[a] - 1) / g->dil[a] * g->dil[a];
    *lo = start;
    *hi = end;
}

/* The index (within its plane, -1 for an empty window) and value of the
 * maximum of window o of plane xv. */
static int64_t argmax(const tg__pool_geom *g, const double *xv, const int64_t *o, double *best)
{
    int64_t lo[3], hi[3], idx = -1;
    *best = -INFINITY;
    for (int a = 0; a < 3; a++) {
        window(g, a, o[a], &lo[a], &hi[a]);
        if (lo[a] >= hi[a]) return -1;
    }
    for (int64_t i0 = lo[0]; i0 < hi[0]; i0 += g->dil[0])
        for (int64_t i1 = lo[1]; i1 < hi[1]; i1 += g->dil[1])
            for (int64_t i2 = lo[2]; i2 < hi[2]; i2 += g->dil[2]) {
                const int64_t i = (i0 * g->in[1] + i1) * g->in[2] + i2;
                if (idx < 0) idx = i;   /* -inf everywhere: the first */
                if (xv[i] > *best || isnan(xv[i])) {
                    *best = xv[i];
                    idx = i;
                }
            }
    return idx;
}

/* The forward's work, shared by the planes of parallel ranges. */
typedef struct max_job {
    const tg__pool_geom *g;
    const double *xv;
    double *yv;
    int64_t *iv;   /* NULL when the call is not recorded */
} max_job;

/* Planes [lo, hi): each window's maximum and its index. */
static void max_planes(void *ctx, int64_t lo, int64_t hi)
{
    const max_job *j = ctx;
    const tg__pool_geom *g = j->g;
    int64_t o[3];
    for (int64_t pl = lo; pl < hi; pl++) {
        int64_t e = pl * g->out_plane;
        for (o[0] = 0; o[0] < g->out[0]; o[0]++)
            for (o[1] = 0; o[1] < g->out[1]; o[1]++)
                for (o[2] = 0; o[2] < g->out[2]; o[2]++, e++) {
                    const int64_t i = argmax(g, j->xv + pl * g->in_plane, o, &j->yv[e]);
                    if (j->iv) j->iv[e] = i;
                }
    }
}

static int max_pool_shape(int n, tg_tensor *const *in, const void *params, tg_dtype *dtype,
                          int *ndim, int64_t *shape)
{
    (void)n;
    return tg__pool_forward_shape(TG__MAX_POOL, in, params, dtype, ndim, shape);
}

/* y and, when recorded, the indices (saved for the backward). */
static int max_pool_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                            const void *params)
{
    (void)n;
    tg_tensor *x = in[0];
    tg__pool_call c;
    int64_t os[TG_MAX_DIMS];
    TG_TRY(tg__pool_prepare_x(TG__MAX_POOL, params, x, &c, os));
    tg__pool_geom g;
    tg__pool_geom_of(TG__MAX_POOL, &c, os, &g);
    const int64_t nx = tg_tensor_numel(x), ny = tg__numel(c.ndim, os);
    double *xv = tg__work_alloc((size_t)(nx > 0 ? nx : 1) * sizeof *xv);
    double *yv = tg__work_alloc((size_t)(ny > 0 ? ny : 1) * sizeof *yv);
    tg_tensor *y = xv && yv ? tg__tensor_uninit(x->dtype, c.ndim, os) : NULL;
    tg_tensor *idx = y && ctx ? tg__tensor_uninit(TG_I64, c.ndim, os) : NULL;
    int rc = y && (idx || !ctx) ? TG_OK : TG_ENOMEM;
    if (rc == TG_OK) {
        tg__gather(x, TG_F64, xv);
        max_job j = {.g = &g, .xv = xv, .yv = yv,
                     .iv = idx ? (int64_t *)idx->storage->data : NULL};
        tg__parallel_range(g.planes, nx + ny > 32768, max_planes, &j);
        tg__scatter(y, TG_F64, yv);
        if (idx) rc = tg__ctx_save(ctx, idx);
    }
    if (rc >= 0) {
        *out = y;
        y = NULL;
    }
    tg_tensor_release(idx);
    tg_tensor_release(y);
    tg__work_free(yv);
    tg__work_free(xv);
    return rc < 0 ? rc : TG_OK;
}

/* Checks the indices of call c (an i64 tensor of shape `want`, each in
 * [-1, in_plane)) and copies them into a new buffer *iv. */
static int read_indices(const char *op, const tg_tensor *idx, const tg__pool_call *c,
                        const int64_t *want, int64_t in_plane, int64_t **iv)
{
    TG_CHECK(idx != NULL && idx->dtype == TG_I64, TG_EDTYPE,
             "%s: the indices must be an i64 tensor", op);
    bool same = idx->ndim == c->ndim;
    for (int d = 0; same && d < idx->ndim; d++) same = idx->shape[d] == want[d];
    TG_CHECK(same, TG_ESHAPE, "%s: the indices must have the pooled shape", op);
    const int64_t n = tg_tensor_numel(idx);
    int64_t *v = tg__work_alloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    if (!v) return TG_ENOMEM;
    tg__gather(idx, TG_I64, v);
    for (int64_t e = 0; e < n; e++) {
        if (v[e] < -1 || v[e] >= in_plane) {
            const long long bad = (long long)v[e];
            tg__work_free(v);
            return tg__error(TG_EINVAL, "%s: indices[%lld]=%lld must be in [-1, %lld)", op,
                             (long long)e, bad, (long long)in_plane);
        }
    }
    *iv = v;
    return TG_OK;
}

/* The checked call of a backward op: c from params, its pooled shape in os,
 * the geometry and the indices (in[1]). */
static int prepare_indexed(const char *op, const void *params, tg_tensor *const *in,
                           tg__pool_call *c, int64_t *os, tg__pool_geom *g, int64_t **iv)
{
    *c = *(const tg__pool_call *)params;
    TG_CHECK(in[0] != NULL, TG_EINVAL, "%s: input 0 must not be NULL", op);
    TG_TRY(tg__pool_prepare(op, TG__MAX_POOL, in[0]->dtype, c, os));
    tg__pool_geom_of(TG__MAX_POOL, c, os, g);
    return read_indices(op, in[1], c, os, g->in_plane, iv);
}

/* in[0] g (y's shape), in[1] indices: dx (x's shape, in the params), each
 * g[o] added into x[idx[o]] of its plane, in double. */
static int max_bw_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                          const void *params)
{
    (void)n;
    const char *op = "max_pool_backward";
    tg__pool_call c;
    int64_t os[TG_MAX_DIMS], *iv = NULL;
    tg__pool_geom geo;
    TG_TRY(prepare_indexed(op, params, in, &c, os, &geo, &iv));
    int rc = tg__pool_check_grad(op, in[0], &c, os);
    const int64_t ng = tg_tensor_numel(in[0]), nx = tg__numel(c.ndim, c.shape);
    double *gv = rc < 0 ? NULL : tg__work_alloc((size_t)(ng > 0 ? ng : 1) * sizeof *gv);
    double *acc = gv ? tg__calloc((size_t)(nx > 0 ? nx : 1), sizeof *acc) : NULL;
    tg_tensor *dx = acc ? tg__tensor_uninit(in[0]->dtype, c.ndim, c.shape) : NULL;
    if (rc >= 0 && !dx) rc = TG_ENOMEM;
    if (rc >= 0) {
        tg__gather(in[0], TG_F64, gv);
        for (int64_t e = 0; e < ng; e++)
            if (iv[e] >= 0) acc[e / geo.out_plane * geo.in_plane + iv[e]] += gv[e];
        tg__scatter(dx, TG_F64, acc);
        if (ctx) rc = tg__ctx_save(ctx, in[1]);
    }
    if (rc >= 0) {
        *out = dx;
        dx = NULL;
    }
    tg_tensor_release(dx);
    free(acc);
    tg__work_free(gv);
    tg__work_free(iv);
    return rc < 0 ? rc : TG_OK;
}

/* in[0] h (x's shape), in[1] indices: h[idx[o]] of each plane (0 where a
 * window is empty), in h's dtype. */
static int max_gather_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                              const void *params)
{
    (void)n;
    const char *op = "max_pool_gather";
    tg__pool_call c;
    int64_t os[TG_MAX_DIMS], *iv = NULL;
    tg__pool_geom geo;
    TG_TRY(prepare_indexed(op, params, in, &c, os, &geo, &iv));
    int rc = tg__pool_check_grad(op, in[0], &c, c.shape);
    const int64_t nh = tg_tensor_numel(in[0]), ny = tg__numel(c.ndim, os);
    double *hv = rc < 0 ? NULL : tg__work_alloc((size_t)(nh > 0 ? nh : 1) * sizeof *hv);
    double *yv = hv ? tg__work_alloc((size_t)(ny > 0 ? ny : 1) * sizeof *yv) : NULL;
    tg_tensor *y = yv ? tg__tensor_uninit(in[0]->dtype, c.ndim, os) : NULL;
    if (rc >= 0 && !y) rc = TG_ENOMEM;
    if (rc >= 0) {
        tg__gather(in[0], TG_F64, hv);
        for (int64_t e = 0; e < ny; e++)
            yv[e] = iv[e] < 0 ? 0 : hv[e / geo.out_plane * geo.in_plane + iv[e]];
        tg__scatter(y, TG_F64, yv);
        if (ctx) rc = tg__ctx_save(ctx, in[1]);
    }
    if (rc >= 0) {
        *out = y;
        y = NULL;
    }
    tg_tensor_release(y);
    tg__work_free(yv);
    tg__work_free(hv);
    tg__work_free(iv);
    return rc < 0 ? rc : TG_OK;
}

/* op(a, the saved indices) with params: a node's gradient through the
 * other op of the pair. */
static int call_indexed(const tg_op_schema *op, tg_tensor **out, tg_tensor *a, tg_ctx *ctx,
                        const tg__pool_call *params)
{
    tg_tensor *idx;
    TG_TRY(tg__ctx_saved(ctx, 0, &idx));
    tg_tensor *in[2] = {a, idx};
    return tg_op_call(op, out, 2, in, params, sizeof *params);
}

/* The gradient of max_pool: max_pool_backward(g, idx), told x's shape. */
static int max_pool_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    const tg_meta *xm = tg__ctx_input_meta(ctx, 0);
    tg__pool_call b = *(const tg__pool_call *)tg__ctx_params(ctx);
    b.ndim = xm->ndim;
    memcpy(b.shape, xm->shape, sizeof(int64_t) * (size_t)xm->ndim);
    return call_indexed(&max_pool_backward_op, &gi[0], g, ctx, &b);
}

/* The gradient of max_pool_backward in g: max_pool_gather (none for the
 * indices). */
static int max_bw_backward(tg_ctx *ctx, tg_tensor *h, tg_tensor **gi)
{
    return call_indexed(&max_pool_gather_op, &gi[0], h, ctx, tg__ctx_params(ctx));
}

/* The gradient of max_pool_gather in h: max_pool_backward. */
static int max_gather_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    return call_indexed(&max_pool_backward_op, &gi[0], g, ctx, tg__ctx_params(ctx));
}

static const tg_op_schema max_pool_op = {
    .name = "max_pool", .arity = 1, .amp = TG_AMP_KEEP, .forward = max_pool_forward,
    .backward = max_pool_backward, .shape = max_pool_shape, .double_backward = true};
static const tg_op_schema max_pool_backward_op = {
    .name = "max_pool_backward", .arity = 2, .amp = TG_AMP_KEEP, .forward = max_bw_forward,
    .backward = max_bw_backward, .double_backward = true};
static const tg_op_schema max_pool_gather_op = {
    .name = "max_pool_gather", .arity = 2, .amp = TG_AMP_KEEP, .forward = max_gather_forward,
    .backward = max_gather_backward, .double_backward = true};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__max_pool_ops[] = {&max_pool_op, &max_pool_backward_op,
                                                &max_pool_gather_op};
static_assert(sizeof tg__max_pool_ops / sizeof tg__max_pool_ops[0] == TG__max_pool_N,
              "src/ops/families.h must count the max_pool ops");

int tg_max_pool(tg_tensor **out, tg_tensor *x, int n_spatial, const tg_pool_params *p)
{
    const char *op = tg__pool_opname(TG__MAX_POOL, n_spatial);
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", op);
    TG_CHECK(x != NULL, TG_EINVAL, "%s: x must not be NULL", op);
    tg__pool_call c = {.ns = n_spatial};
    TG_TRY(tg__pool_check_params(op, TG__MAX_POOL, n_spatial, p, &c.p));
    tg_tensor *in[1] = {x};
    return tg_op_call(&max_pool_op, out, 1, in, &c, sizeof c);
}
