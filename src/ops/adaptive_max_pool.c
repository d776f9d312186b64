/* src/ops/adaptive_max_pool.c - adaptive_max_pool(x) (AdaptiveMaxPool1d/2d/3d),
 * adaptive_max_pool_indices(x), and the adjoint pair
 * adaptive_max_pool_backward / adaptive_max_pool_gather.
 *
 * The windows are adaptive_avg_pool's: along an axis of extent I pooled to
 * O, window o covers [floor(o*I/O), ceil((o+1)*I/O)), never empty.  The
 * forward picks in each window the index of its largest element, idx[o],
 * within the (b, c) plane (PyTorch's returned indices), by PyTorch's scan:
 * ties go to the first, the last NaN wins, a window of -infs gives its
 * first element.  (Where O divides I the windows are max_pool's, and
 * max_pool's kernels, which scan alike, may run them: see amax_run.)
 * Then y[o] = x[idx[o]] = (S x)[o] for the 0/1 selection
 * matrix S that idx defines (held fixed: the choice has gradient 0 almost
 * everywhere), so
 *   dx = S^T g      adaptive_max_pool_backward(g, idx): g[o] added into
 *                   x[idx[o]] (windows overlap when O does not divide I, so
 *                   one x element may take several)
 *   d(S^T g)/dg = S adaptive_max_pool_gather(h, idx) = h[idx[o]]
 * and the gradient of the gather is the backward again: the pair are each
 * other's adjoint, so derivatives of any order are these two ops.  (They
 * run max_pool's scatter and gather kernels, but max_pool's ops check a
 * max_pool call's output shape, and no kernel, stride and padding of at
 * most half the kernel give more than I + 1 outputs along an axis of extent
 * I: they cannot take O > I + 1.)  The indices are an input of
 * both, an i64 tensor of y's shape that gets no gradient.  A caller who
 * wants the indices gets them from adaptive_max_pool_indices (not
 * differentiable) and y as adaptive_max_pool_gather(x, idx): the same
 * elements, one scan. */
#include <assert.h>
#include <string.h>

#include "autograd/tape.h"
#include "core/core.h"
#include "ops/families.h"
#include "ops/pool_internal.h"
#include "tapegrad/pool.h"
#include "tapegrad/scope.h"

static const tg_op_schema amax_op, amax_indices_op, amax_backward_op, amax_gather_op;

/* y = the window maxima of x for call c (output shape os) into a new *y,
 * and their indices into a new i64 *idx when idx is not NULL.  When O
 * divides I on every axis (and c does not ask for the general kernels),
 * the windows are max_pool's with kernel = stride = I/O and no padding, and
 * max_pool's kernels (vectorised along a row) run them: they scan a window
 * in the same row-major order from the same start (-inf, its first
 * element) with the same rule (greater or NaN), so the values and indices
 * are the adaptive scan's to the bit.  Those kernels loop over an output
 * row once per tap, so they pay where a row holds a few outputs at least:
 * a last output extent below 4 (a global pooling) takes the adaptive scan,
 * which runs along x's rows.  In f32 they keep indices in 32 bits: a larger
 * plane takes the adaptive kernels too.  The adaptive scan runs with lanes
 * (pool_small.c's adaptive_max_lanes: the same values and indices) unless c
 * asks for the serial one, or its 32-bit indices cannot hold the plane's. */
static int amax_run(const tg__pool_call *c, const int64_t *os, const tg_tensor *x,
                    tg_tensor **y, tg_tensor **idx)
{
    const tg_dtype cdt = tg__compute_dtype(x->dtype);
    tg__pool_geom g;
    tg__pool_geom_of(TG__ADAPTIVE_MAX_POOL, c, os, &g);
    const bool narrow = cdt == TG_F64 || g.in_plane <= INT32_MAX;
    bool fast = !c->general && g.out[2] >= 4 && narrow;
    for (int a = 0; a < 3; a++) fast = fast && g.in[a] % g.out[a] == 0;
    if (fast)
        for (int a = 0; a < 3; a++) g.k[a] = g.s[a] = g.in[a] / g.out[a];
    const tg__pool_kernels *k = fast                      ? &tg__max_pool_kernels
                                : !c->serial && narrow ? &tg__adaptive_max_lanes_kernels
                                                       : &tg__adaptive_max_kernels;
    tg__pool_axes ax;
    TG_TRY(fast ? tg__pool_axes_init(&ax, &g, false, cdt) : tg__adaptive_axes_init(&ax, &g));
    tg_tensor *it = idx ? tg__tensor_uninit(TG_I64, c->ndim, os) : NULL;
    int rc = it || !idx ? TG_OK : TG_ENOMEM;
    if (rc >= 0) {
        tg__pool_job j = {.g = &g, .ax = &ax,
                          .idx_out = it ? (int64_t *)it->storage->data : NULL};
        rc = tg__pool_run(k, &j, cdt, x, c->ndim, os, false, y);
    }
    if (rc >= 0 && idx) *idx = it;
    else tg_tensor_release(it);
    tg__pool_axes_free(&ax);
    return rc;
}

static int amax_shape(int n, tg_tensor *const *in, const void *params, tg_dtype *dtype,
                      int *ndim, int64_t *shape)
{
    (void)n;
    return tg__pool_forward_shape(TG__ADAPTIVE_MAX_POOL, in, params, dtype, ndim, shape);
}

/* y and, when recorded, the indices (saved for the backward). */
static int amax_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                        const void *params)
{
    (void)n;
    tg__pool_call c;
    int64_t os[TG_MAX_DIMS];
    TG_TRY(tg__pool_prepare_x(TG__ADAPTIVE_MAX_POOL, params, in[0], &c, os));
    tg_tensor *y = NULL, *idx = NULL;
    int rc = amax_run(&c, os, in[0], &y, ctx ? &idx : NULL);
    if (rc >= 0 && idx) rc = tg__ctx_save(ctx, idx);
    if (rc >= 0) {
        *out = y;
        y = NULL;
    }
    tg_tensor_release(idx);
    tg_tensor_release(y);
    return rc < 0 ? rc : TG_OK;
}

static int amax_indices_shape(int n, tg_tensor *const *in, const void *params, tg_dtype *dtype,
                              int *ndim, int64_t *shape)
{
    TG_TRY(amax_shape(n, in, params, dtype, ndim, shape));
    *dtype = TG_I64;
    return TG_OK;
}

/* The indices alone (the maxima computed on the way are dropped). */
static int amax_indices_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                                const void *params)
{
    (void)ctx, (void)n;
    tg__pool_call c;
    int64_t os[TG_MAX_DIMS];
    TG_TRY(tg__pool_prepare_x(TG__ADAPTIVE_MAX_POOL, params, in[0], &c, os));
    tg_tensor *y = NULL;
    const int rc = amax_run(&c, os, in[0], &y, out);
    tg_tensor_release(y);
    return rc;
}

static int amax_bw_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                           const void *params)
{
    (void)n;
    return tg__pool_indexed_forward("adaptive_max_pool_backward", TG__ADAPTIVE_MAX_POOL, true,
                                    ctx, out, in, params);
}

static int amax_gather_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                               const void *params)
{
    (void)n;
    return tg__pool_indexed_forward("adaptive_max_pool_gather", TG__ADAPTIVE_MAX_POOL, false,
                                    ctx, out, in, params);
}

/* The gradient of adaptive_max_pool: adaptive_max_pool_backward(g, idx),
 * told x's shape. */
static int amax_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    return tg__pool_indexed_backward(&amax_backward_op, ctx, g, gi);
}

/* The gradient of adaptive_max_pool_backward in g: the gather (none for
 * the indices). */
static int amax_bw_backward(tg_ctx *ctx, tg_tensor *h, tg_tensor **gi)
{
    return tg__pool_call_indexed(&amax_gather_op, &gi[0], h, ctx, tg__ctx_params(ctx));
}

/* The gradient of adaptive_max_pool_gather in h: the backward. */
static int amax_gather_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    return tg__pool_call_indexed(&amax_backward_op, &gi[0], g, ctx, tg__ctx_params(ctx));
}

static const tg_op_schema amax_op = {
    .name = "adaptive_max_pool", .arity = 1, .amp = TG_AMP_KEEP, .forward = amax_forward,
    .backward = amax_backward, .shape = amax_shape, .double_backward = true,
    .vjp = "da = adaptive_max_pool_backward(g, indices): each g element added into its "
           "window's maximum"};
static const tg_op_schema amax_indices_op = {
    .name = "adaptive_max_pool_indices", .arity = 1, .amp = TG_AMP_KEEP,
    .forward = amax_indices_forward, .shape = amax_indices_shape,
    .vjp = "no gradient: the result is indices"};
static const tg_op_schema amax_backward_op = {
    .name = "adaptive_max_pool_backward", .arity = 2, .amp = TG_AMP_KEEP,
    .forward = amax_bw_forward, .backward = amax_bw_backward, .double_backward = true,
    .vjp = "dg = adaptive_max_pool_gather(g', indices): g' at each window's maximum; the "
           "indices get none"};
static const tg_op_schema amax_gather_op = {
    .name = "adaptive_max_pool_gather", .arity = 2, .amp = TG_AMP_KEEP,
    .forward = amax_gather_forward, .backward = amax_gather_backward, .double_backward = true,
    .vjp = "da = adaptive_max_pool_backward(g, indices); the indices get none"};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__adaptive_max_pool_ops[] = {&amax_op, &amax_indices_op,
                                                         &amax_backward_op, &amax_gather_op};
static_assert(sizeof tg__adaptive_max_pool_ops / sizeof tg__adaptive_max_pool_ops[0] ==
                  TG__adaptive_max_pool_N,
              "src/ops/families.h must count the adaptive_max_pool ops");

/* idx = adaptive_max_pool_indices(x), y = adaptive_max_pool_gather(x, idx)
 * for call c (whose shape is x's). */
static int amax_with_indices(tg_tensor **y, tg_tensor **idx, tg_tensor *x, tg__pool_call *c)
{
    TG_TRY(tg_op_call(&amax_indices_op, idx, 1, (tg_tensor *[]){x}, c, sizeof *c));
    c->ndim = tg_tensor_ndim(x);
    memcpy(c->shape, tg_tensor_shape(x), sizeof(int64_t) * (size_t)c->ndim);
    const int rc = tg_op_call(&amax_gather_op, y, 2, (tg_tensor *[]){x, *idx}, c, sizeof *c);
    if (rc < 0) {
        tg_tensor_release(*idx);
        *idx = NULL;
    }
    return rc;
}

int tg__adaptive_max_pool_call(tg_tensor **out, tg_tensor **indices, tg_tensor *x,
                               int n_spatial, const int64_t *output_size, unsigned kernels)
{
    const char *op = tg__pool_opname(TG__ADAPTIVE_MAX_POOL, n_spatial);
    tg__pool_call c;
    TG_TRY(tg__adaptive_pool_check(op, out, x, n_spatial, output_size, &c));
    c.general = kernels & TG__POOL_GENERAL;
    c.serial = kernels & TG__POOL_SERIAL;
    TG_CHECK(out != indices, TG_EINVAL, "%s: out and indices must be two different places", op);
    if (!indices) return tg_op_call(&amax_op, out, 1, (tg_tensor *[]){x}, &c, sizeof c);
    /* Two op calls made on the library's behalf; the caller's scope, if
     * any, gets both results.  On error nothing is handed out. */
    tg_tensor *y = NULL, *idx = NULL;
    tg__lib_enter();
    int rc = amax_with_indices(&y, &idx, x, &c);
    tg__lib_leave();
    if (rc < 0) return rc;
    rc = tg__scope_capture(&idx, TG_OK);
    if (rc < 0) {
        tg_tensor_release(y);
        return rc;
    }
    rc = tg__scope_capture(&y, TG_OK);
    if (rc < 0) {
        /* idx went into the same (innermost) scope: take it back out. */
        if (tg_scope_keep(idx)) tg_tensor_release(idx);
        return rc;
    }
    *out = y;
    *indices = idx;
    return TG_OK;
}

int tg_adaptive_max_pool(tg_tensor **out, tg_tensor **indices, tg_tensor *x, int n_spatial,
                         const int64_t *output_size)
{
    return tg__adaptive_max_pool_call(out, indices, x, n_spatial, output_size, 0);
}
