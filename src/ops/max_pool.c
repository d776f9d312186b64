/* src/ops/max_pool.c - max_pool(x) (MaxPool1d/2d/3d), its gradient
 * max_pool_backward and that one's gradient max_pool_gather, and
 * max_pool_indices(x), the indices alone (F.max_pool's return_indices).
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
 * indices are an input of both (an i64 tensor of y's shape, no gradient).
 * max_pool's backward_into adds S^T g straight into the engine's pending
 * sum, touching only the maxima. */
#include <assert.h>
#include <string.h>

#include "autograd/tape.h"
#include "ops/families.h"
#include "ops/gather_internal.h"
#include "ops/pool_internal.h"
#include "tapegrad/pool.h"

static const tg_op_schema max_pool_op, max_pool_backward_op, max_pool_gather_op,
    max_pool_indices_op;

static int max_pool_shape(int n, tg_tensor *const *in, const void *params, tg_dtype *dtype,
                          int *ndim, int64_t *shape)
{
    (void)n;
    return tg__pool_forward_shape(TG__MAX_POOL, in, params, dtype, ndim, shape);
}

/* y = max_pool(x) for call `params` into a new *y, and the indices into a
 * new i64 *idx when idx is not NULL. */
static int max_pool_run(tg_tensor *x, const void *params, tg_tensor **y, tg_tensor **idx)
{
    tg__pool_call c;
    int64_t os[TG_MAX_DIMS];
    TG_TRY(tg__pool_prepare_x(TG__MAX_POOL, params, x, &c, os));
    tg__pool_geom g;
    tg__pool_geom_of(TG__MAX_POOL, &c, os, &g);
    /* f32's kernel keeps indices in 32 bits: a larger plane runs in f64,
     * where the maxima are the same values. */
    const tg_dtype cdt = g.in_plane > INT32_MAX ? TG_F64 : tg__compute_dtype(x->dtype);
    tg__pool_axes ax;
    TG_TRY(tg__pool_axes_init(&ax, &g, false, cdt));
    tg_tensor *it = idx ? tg__tensor_uninit(TG_I64, c.ndim, os) : NULL;
    int rc = it || !idx ? TG_OK : TG_ENOMEM;
    if (rc >= 0) {
        tg__pool_job j = {.g = &g, .ax = &ax,
                          .idx_out = it ? (int64_t *)it->storage->data : NULL};
        rc = tg__pool_run(&tg__max_pool_kernels, &j, cdt, x, c.ndim, os, false, y);
    }
    if (rc >= 0 && idx) *idx = it;
    else tg_tensor_release(it);
    tg__pool_axes_free(&ax);
    return rc;
}

/* y and, when recorded, the indices (saved for the backward). */
static int max_pool_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                            const void *params)
{
    (void)n;
    tg_tensor *y = NULL, *idx = NULL;
    int rc = max_pool_run(in[0], params, &y, ctx ? &idx : NULL);
    if (rc >= 0 && idx) rc = tg__ctx_save(ctx, idx);
    if (rc >= 0) {
        *out = y;
        y = NULL;
    }
    tg_tensor_release(idx);
    tg_tensor_release(y);
    return rc < 0 ? rc : TG_OK;
}

static int max_pool_indices_shape(int n, tg_tensor *const *in, const void *params,
                                  tg_dtype *dtype, int *ndim, int64_t *shape)
{
    TG_TRY(max_pool_shape(n, in, params, dtype, ndim, shape));
    *dtype = TG_I64;
    return TG_OK;
}

/* The indices alone (the maxima computed on the way are dropped). */
static int max_pool_indices_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                                    const void *params)
{
    (void)ctx, (void)n;
    tg_tensor *y = NULL;
    const int rc = max_pool_run(in[0], params, &y, out);
    tg_tensor_release(y);
    return rc;
}

/* Checks the indices of call c (an i64 tensor of shape `want`, each in
 * [lowest, in_plane): lowest -1 lets an empty window pick none) and gives
 * their elements in *iv: idx's own when it is contiguous, else a copy that
 * *owned holds (NULL otherwise) for the caller to free. */
static int read_indices(const char *op, const tg_tensor *idx, const tg__pool_call *c,
                        const int64_t *want, int64_t lowest, int64_t in_plane,
                        const int64_t **iv, int64_t **owned)
{
    TG_CHECK(idx != NULL && idx->dtype == TG_I64, TG_EDTYPE,
             "%s: the indices must be an i64 tensor", op);
    bool same = idx->ndim == c->ndim;
    for (int d = 0; same && d < idx->ndim; d++) same = idx->shape[d] == want[d];
    TG_CHECK(same, TG_ESHAPE, "%s: the indices must have the pooled shape", op);
    const int64_t n = tg_tensor_numel(idx);
    int64_t *copy = NULL;
    if (!tg_tensor_is_contiguous(idx)) {
        copy = tg__work_alloc((size_t)(n > 0 ? n : 1) * sizeof *copy);
        if (!copy) return TG_ENOMEM;
        tg__gather(idx, TG_I64, copy);
    }
    const int64_t *v = copy ? copy : (const int64_t *)idx->storage->data + idx->offset;
    for (int64_t e = 0; e < n; e++) {
        if (v[e] < lowest || v[e] >= in_plane) {
            const long long bad = (long long)v[e];
            tg__work_free(copy);
            return tg__error(TG_EINVAL, "%s: indices[%lld]=%lld must be in [%lld, %lld)", op,
                             (long long)e, bad, (long long)lowest, (long long)in_plane);
        }
    }
    *iv = v;
    *owned = copy;
    return TG_OK;
}

int tg__pool_indexed_forward(const char *op, tg__pool_kind kind, bool scatter, tg_ctx *ctx,
                             tg_tensor **out, tg_tensor *const *in, const void *params)
{
    tg__pool_call c = *(const tg__pool_call *)params;
    int64_t os[TG_MAX_DIMS];
    TG_CHECK(in[0] != NULL, TG_EINVAL, "%s: input 0 must not be NULL", op);
    TG_TRY(tg__pool_prepare(op, kind, in[0]->dtype, &c, os));
    tg__pool_geom g;
    tg__pool_geom_of(kind, &c, os, &g);
    const int64_t *iv = NULL;
    int64_t *owned = NULL;
    const int64_t lowest = kind == TG__MAX_POOL ? -1 : 0;
    TG_TRY(read_indices(op, in[1], &c, os, lowest, g.in_plane, &iv, &owned));
    int rc = tg__pool_check_grad(op, in[0], &c, scatter ? os : c.shape);
    tg_tensor *r = NULL;
    if (rc >= 0) {
        tg__pool_job j = {.g = &g, .idx = iv};
        rc = tg__pool_run(scatter ? &tg__max_pool_scatter_kernels : &tg__max_pool_gather_kernels,
                          &j, tg__compute_dtype(in[0]->dtype), in[0], c.ndim,
                          scatter ? c.shape : os, scatter, &r);
    }
    if (rc >= 0 && ctx) rc = tg__ctx_save(ctx, in[1]);
    if (rc >= 0) {
        *out = r;
        r = NULL;
    }
    tg_tensor_release(r);
    tg__work_free(owned);
    return rc < 0 ? rc : TG_OK;
}

static int max_bw_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                          const void *params)
{
    (void)n;
    return tg__pool_indexed_forward("max_pool_backward", TG__MAX_POOL, true, ctx, out, in,
                                    params);
}

static int max_gather_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                              const void *params)
{
    (void)n;
    return tg__pool_indexed_forward("max_pool_gather", TG__MAX_POOL, false, ctx, out, in,
                                    params);
}

int tg__pool_call_indexed(const tg_op_schema *op, tg_tensor **out, tg_tensor *a, tg_ctx *ctx,
                          const tg__pool_call *params)
{
    tg_tensor *idx;
    TG_TRY(tg__ctx_saved(ctx, 0, &idx));
    tg_tensor *in[2] = {a, idx};
    return tg_op_call(op, out, 2, in, params, sizeof *params);
}

int tg__pool_indexed_backward(const tg_op_schema *scatter, tg_ctx *ctx, tg_tensor *g,
                              tg_tensor **gi)
{
    const tg_meta *xm = tg__ctx_input_meta(ctx, 0);
    tg__pool_call b = *(const tg__pool_call *)tg__ctx_params(ctx);
    b.ndim = xm->ndim;
    memcpy(b.shape, xm->shape, sizeof(int64_t) * (size_t)xm->ndim);
    return tg__pool_call_indexed(scatter, &gi[0], g, ctx, &b);
}

/* The gradient of max_pool: max_pool_backward(g, idx), told x's shape. */
static int max_pool_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    return tg__pool_indexed_backward(&max_pool_backward_op, ctx, g, gi);
}

/* acc += max_pool_backward(g, indices), touching only the elements some
 * window picks (tg_op_backward_into_fn).  Per (b, c) plane, each picked
 * element's terms are summed from +0 in the outputs' order in the
 * scatter kernel's precision (f64 for f64, else f32), rounded to the
 * dtype, then added to acc's element as the engine adds (tg__sum_term):
 * the bits of the backward and the sum.  An element no window picks is
 * left alone (the backward's +0 would turn acc's -0 into +0).  Scratch:
 * a plane's sums and stamps, and its picked elements in first-pick order. */
static int max_pool_backward_into(tg_ctx *ctx, tg_tensor *g, tg_tensor *acc)
{
    const tg__pool_call *c = tg__ctx_params(ctx);
    tg_tensor *idx;
    TG_TRY(tg__ctx_saved(ctx, 0, &idx));
    int64_t in_plane = 1, out_plane = 1;
    for (int d = acc->ndim - c->ns; d < acc->ndim; d++) {
        in_plane *= acc->shape[d];
        out_plane *= idx->shape[d];
    }
    const int64_t on = tg_tensor_numel(idx);
    if (on == 0 || in_plane == 0) return TG_OK;
    const int64_t planes = on / out_plane;
    double *gv = tg__work_alloc((size_t)on * sizeof *gv);
    int64_t *iv = tg__work_alloc((size_t)on * sizeof *iv);
    double *sum = tg__work_alloc((size_t)in_plane * sizeof *sum);
    int64_t *stamp = tg__work_alloc((size_t)in_plane * sizeof *stamp);
    int64_t *picked = tg__work_alloc((size_t)out_plane * sizeof *picked);
    const int rc = gv && iv && sum && stamp && picked ? TG_OK : TG_ENOMEM;
    const tg_dtype dt = acc->dtype;
    char *ad = (char *)acc->storage->data;
    if (rc == TG_OK) {
        tg__gather(g, TG_F64, gv);
        tg__gather(idx, TG_I64, iv);
        for (int64_t i = 0; i < in_plane; i++) stamp[i] = -1;
    }
    for (int64_t pl = 0; rc == TG_OK && pl < planes; pl++) {
        const double *gp = gv + pl * out_plane;
        const int64_t *ip = iv + pl * out_plane;
        int64_t n = 0;
        for (int64_t e = 0; e < out_plane; e++) {
            const int64_t i = ip[e];
            if (i < 0) continue;   /* an empty window picks none */
            if (stamp[i] != pl) {
                stamp[i] = pl;
                sum[i] = 0.0;
                picked[n++] = i;
            }
            sum[i] = dt == TG_F64 ? tg__add_to(sum[i], gp[e])
                                  : (double)tg__add_to_f((float)sum[i], (float)gp[e]);
        }
        for (int64_t q = 0; q < n; q++) {
            const int64_t el = acc->offset + pl * in_plane + picked[q];
            const double t = tg__round_to(dt, sum[picked[q]]);
            tg_dtype_store(dt, ad, el, tg__sum_term(dt, tg_dtype_load(dt, ad, el), t));
        }
    }
    tg__work_free(gv);
    tg__work_free(iv);
    tg__work_free(sum);
    tg__work_free(stamp);
    tg__work_free(picked);
    return rc;
}

/* The gradient of max_pool_backward in g: max_pool_gather (none for the
 * indices). */
static int max_bw_backward(tg_ctx *ctx, tg_tensor *h, tg_tensor **gi)
{
    return tg__pool_call_indexed(&max_pool_gather_op, &gi[0], h, ctx, tg__ctx_params(ctx));
}

/* The gradient of max_pool_gather in h: max_pool_backward. */
static int max_gather_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    return tg__pool_call_indexed(&max_pool_backward_op, &gi[0], g, ctx, tg__ctx_params(ctx));
}

static const tg_op_schema max_pool_op = {
    .name = "max_pool", .arity = 1, .amp = TG_AMP_KEEP, .forward = max_pool_forward,
    .backward = max_pool_backward, .shape = max_pool_shape, .double_backward = true,
    .vjp = "da = max_pool_backward(g, indices): each g element added into its window's maximum",
    .backward_into = max_pool_backward_into};
static const tg_op_schema max_pool_backward_op = {
    .name = "max_pool_backward", .arity = 2, .amp = TG_AMP_KEEP, .forward = max_bw_forward,
    .backward = max_bw_backward, .double_backward = true,
    .vjp = "dg = max_pool_gather(g', indices): g' at each window's maximum; the indices get none"};
static const tg_op_schema max_pool_gather_op = {
    .name = "max_pool_gather", .arity = 2, .amp = TG_AMP_KEEP, .forward = max_gather_forward,
    .backward = max_gather_backward, .double_backward = true,
    .vjp = "da = max_pool_backward(g, indices); the indices get none"};

static const tg_op_schema max_pool_indices_op = {
    .name = "max_pool_indices", .arity = 1, .amp = TG_AMP_KEEP,
    .forward = max_pool_indices_forward, .shape = max_pool_indices_shape,
    .vjp = "no gradient: the result is indices"};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__max_pool_ops[] = {&max_pool_op, &max_pool_backward_op,
                                                &max_pool_gather_op, &max_pool_indices_op};
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

/* y = max_pool(x) (its own gradient) and the indices of the same scan from
 * max_pool_indices: two ops on the library's behalf, both results handed
 * to the caller's scope or neither. */
int tg_max_pool_with_indices(tg_tensor **out, tg_tensor **indices, tg_tensor *x, int n_spatial,
                             const tg_pool_params *p)
{
    const char *op = tg__pool_opname(TG__MAX_POOL, n_spatial);
    TG_CHECK(out != NULL && indices != NULL, TG_EINVAL,
             "%s: out and indices must not be NULL", op);
    TG_CHECK(out != indices, TG_EINVAL, "%s: out and indices must be two different places", op);
    TG_CHECK(x != NULL, TG_EINVAL, "%s: x must not be NULL", op);
    tg__pool_call c = {.ns = n_spatial};
    TG_TRY(tg__pool_check_params(op, TG__MAX_POOL, n_spatial, p, &c.p));
    tg_tensor *in[1] = {x}, *y = NULL, *idx = NULL;
    tg__lib_enter();
    int rc = tg_op_call(&max_pool_op, &y, 1, in, &c, sizeof c);
    if (rc >= 0) rc = tg_op_call(&max_pool_indices_op, &idx, 1, in, &c, sizeof c);
    tg__lib_leave();
    return tg__scope_capture_pair(out, y, indices, idx, rc);
}
