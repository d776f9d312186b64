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
 * derivatives of any order are these two ops.  Both run in double, rounded
 * once into the dtype. */
#include <assert.h>
#include <string.h>

#include "autograd/tape.h"
#include "ops/families.h"
#include "ops/pool_internal.h"
#include "tapegrad/pool.h"

static const tg_op_schema avg_pool_op, avg_pool_backward_op;

/* Window o of axis a: [*lo, *hi) inside x and its divisor's factor. */
static int64_t window(const tg__pool_geom *g, bool cip, int a, int64_t o, int64_t *lo,
                      int64_t *hi)
{
    const int64_t start = o * g->s[a] - g->p[a];
    int64_t end = start + g->k[a];
    if (end > g->in[a] + g->p[a]) end = g->in[a] + g->p[a];
    *lo = start > 0 ? start : 0;
    *hi = end < g->in[a] ? end : g->in[a];
    return cip ? end - start : *hi - *lo;
}

/* One run of A or A^T, shared by the planes of parallel ranges. */
typedef struct avg_job {
    const tg__pool_geom *g;
    bool cip, adjoint;
    const double *src;
    double *dst;
} avg_job;

/* Planes [lo, hi): adjoint false: dst (the output) = A src; true: dst (the
 * input, zeroed) += A^T src.  PyTorch's order: the sum, then one division. */
static void avg_planes(void *ctx, int64_t plo, int64_t phi)
{
    const avg_job *j = ctx;
    const tg__pool_geom *g = j->g;
    const bool adjoint = j->adjoint;
    int64_t lo[3], hi[3], o[3];
    for (int64_t pl = plo; pl < phi; pl++) {
        const double *src = j->src + pl * (adjoint ? g->out_plane : g->in_plane);
        double *dst = j->dst + pl * (adjoint ? g->in_plane : g->out_plane);
        int64_t e = 0;   /* the output element, within the plane */
        for (o[0] = 0; o[0] < g->out[0]; o[0]++)
            for (o[1] = 0; o[1] < g->out[1]; o[1]++)
                for (o[2] = 0; o[2] < g->out[2]; o[2]++, e++) {
                    int64_t div = 1;
                    for (int a = 0; a < 3; a++)
                        div *= window(g, j->cip, a, o[a], &lo[a], &hi[a]);
                    const double v = adjoint ? src[e] / (double)div : 0;
                    double sum = 0;
                    for (int64_t i0 = lo[0]; i0 < hi[0]; i0++)
                        for (int64_t i1 = lo[1]; i1 < hi[1]; i1++) {
                            const int64_t row = (i0 * g->in[1] + i1) * g->in[2];
                            for (int64_t i2 = lo[2]; i2 < hi[2]; i2++) {
                                if (adjoint) dst[row + i2] += v;
                                else sum += src[row + i2];
                            }
                        }
                    if (!adjoint) dst[e] = sum / (double)div;
                }
    }
}

/* t's values through A (adjoint: A^T) into a new tensor *out of dtype dt
 * and shape (ndim, shape). */
static int avg_run(const tg__pool_geom *g, bool cip, const tg_tensor *t, tg_dtype dt, int ndim,
                   const int64_t *shape, bool adjoint, tg_tensor **out)
{
    const int64_t ns = tg_tensor_numel(t), nd = tg__numel(ndim, shape);
    double *sv = tg__work_alloc((size_t)(ns > 0 ? ns : 1) * sizeof *sv);
    double *dv = tg__calloc((size_t)(nd > 0 ? nd : 1), sizeof *dv);
    tg_tensor *r = sv && dv ? tg__tensor_uninit(dt, ndim, shape) : NULL;
    if (r) {
        tg__gather(t, TG_F64, sv);
        avg_job j = {.g = g, .cip = cip, .adjoint = adjoint, .src = sv, .dst = dv};
        tg__parallel_range(g->planes, ns + nd > 32768, avg_planes, &j);
        tg__scatter(r, TG_F64, dv);
        *out = r;
    }
    free(dv);
    tg__work_free(sv);
    return r ? TG_OK : TG_ENOMEM;
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
    return avg_run(&g, c.p.count_include_pad, in[0], in[0]->dtype, c.ndim, os, false, out);
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
    return avg_run(&geo, c.p.count_include_pad, g, g->dtype, c.ndim, c.shape, true, out);
}

/* The gradient of avg_pool_backward: avg_pool with the same parameters. */
static int avg_bw_backward(tg_ctx *ctx, tg_tensor *h, tg_tensor **gi)
{
    tg_tensor *in[1] = {h};
    return tg_op_call(&avg_pool_op, &gi[0], 1, in, tg__ctx_params(ctx), sizeof(tg__pool_call));
}

static const tg_op_schema avg_pool_op = {
    .name = "avg_pool", .arity = 1, .amp = TG_AMP_KEEP, .forward = avg_pool_forward,
    .backward = avg_pool_backward, .shape = avg_pool_shape, .double_backward = true};
static const tg_op_schema avg_pool_backward_op = {
    .name = "avg_pool_backward", .arity = 1, .amp = TG_AMP_KEEP, .forward = avg_bw_forward,
    .backward = avg_bw_backward, .double_backward = true};

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
