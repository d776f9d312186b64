/* src/ops/upsample.c - upsample_nearest(x, scale) (nn.Upsample(scale_factor=s),
 * F.interpolate(mode='nearest') with integer factors) and its adjoint
 * upsample_nearest_backward.
 *
 * Along each spatial axis output index o reads input index o / s (integer
 * division), so y = U x for a 0/1 matrix U with one 1 in each row.  The
 * gradient is U^T g: each x element gets the sum of the s_1 x s_2 x ...
 * block of g it was copied into.  That op is linear too, and its gradient
 * is U h, upsample_nearest again: the two are each other's adjoint, so
 * derivatives of any order are these two ops. */
#include <assert.h>
#include <string.h>

#include "autograd/tape.h"
#include "ops/families.h"
#include "ops/pool_internal.h"
#include "tapegrad/pool.h"

static const tg_op_schema upsample_op, upsample_backward_op;

/* One kernel's work, shared by the planes of parallel ranges. */
typedef struct up_job {
    const tg__pool_geom *g;
    size_t es;                      /* element bytes (forward) */
    const unsigned char *xb;        /* forward: x's elements, row-major */
    unsigned char *yb;              /* forward: y's */
    const double *gv;               /* backward: g's values */
    double *acc;                    /* backward: dx's */
} up_job;

/* Output row (o0, o1) of a plane reads input row (o0 / k0, o1 / k1); its
 * element o2 reads element o2 / k2 of that row. */
static int64_t in_row(const tg__pool_geom *g, int64_t o0, int64_t o1)
{
    return ((o0 / g->k[0]) * g->in[1] + o1 / g->k[1]) * g->in[2];
}

/* Planes [lo, hi) of y: each output row is its input row with every
 * element repeated k2 times, or a copy of the row before when it reads the
 * same input row. */
static void up_forward_planes(void *ctx, int64_t lo, int64_t hi)
{
    const up_job *j = ctx;
    const tg__pool_geom *g = j->g;
    const size_t es = j->es, row = (size_t)g->out[2] * es;
    for (int64_t pl = lo; pl < hi; pl++) {
        const unsigned char *xp = j->xb + (size_t)(pl * g->in_plane) * es;
        unsigned char *yp = j->yb + (size_t)(pl * g->out_plane) * es;
        for (int64_t o0 = 0; o0 < g->out[0]; o0++)
            for (int64_t o1 = 0; o1 < g->out[1]; o1++, yp += row) {
                if ((o1 > 0 && o1 % g->k[1]) || (o1 == 0 && o0 % g->k[0])) {
                    memcpy(yp, yp - (o1 > 0 ? row : row * (size_t)g->out[1]), row);
                    continue;
                }
                const unsigned char *src = xp + (size_t)in_row(g, o0, o1) * es;
                unsigned char *dst = yp;
                for (int64_t i2 = 0; i2 < g->in[2]; i2++, src += es)
                    for (int64_t r = 0; r < g->k[2]; r++, dst += es) memcpy(dst, src, es);
            }
    }
}

/* Planes [lo, hi) of dx: each g row's k2-blocks summed into its input row. */
static void up_backward_planes(void *ctx, int64_t lo, int64_t hi)
{
    const up_job *j = ctx;
    const tg__pool_geom *g = j->g;
    for (int64_t pl = lo; pl < hi; pl++) {
        const double *gp = j->gv + pl * g->out_plane;
        double *acc = j->acc + pl * g->in_plane;
        for (int64_t o0 = 0; o0 < g->out[0]; o0++)
            for (int64_t o1 = 0; o1 < g->out[1]; o1++) {
                double *dst = acc + in_row(g, o0, o1);
                for (int64_t i2 = 0; i2 < g->in[2]; i2++)
                    for (int64_t r = 0; r < g->k[2]; r++) dst[i2] += *gp++;
            }
    }
}

static int upsample_shape(int n, tg_tensor *const *in, const void *params, tg_dtype *dtype,
                          int *ndim, int64_t *shape)
{
    (void)n;
    return tg__pool_forward_shape(TG__UPSAMPLE, in, params, dtype, ndim, shape);
}

/* y[o] = x[o / s]: a copy of x's elements in its own dtype. */
static int upsample_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                            const void *params)
{
    (void)ctx, (void)n;
    tg_tensor *x = in[0];
    tg__pool_call c;
    int64_t os[TG_MAX_DIMS];
    TG_TRY(tg__pool_prepare_x(TG__UPSAMPLE, params, x, &c, os));
    tg__pool_geom g;
    tg__pool_geom_of(TG__UPSAMPLE, &c, os, &g);
    const size_t es = tg_dtype_size(x->dtype);
    const int64_t nx = tg_tensor_numel(x);
    unsigned char *xb = tg__work_alloc((size_t)(nx > 0 ? nx : 1) * es);
    tg_tensor *y = xb ? tg__tensor_uninit(x->dtype, c.ndim, os) : NULL;
    if (!y) {
        tg__work_free(xb);
        return TG_ENOMEM;
    }
    tg__gather(x, x->dtype, xb);
    up_job j = {.g = &g, .es = es, .xb = xb, .yb = (unsigned char *)y->storage->data};
    tg__parallel_range(g.planes, tg_tensor_numel(y) > 32768, up_forward_planes, &j);
    tg__work_free(xb);
    *out = y;
    return TG_OK;
}

/* The gradient of upsample_nearest: upsample_nearest_backward(g), told x's
 * shape. */
static int upsample_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    const tg_meta *xm = tg__ctx_input_meta(ctx, 0);
    tg__pool_call b = *(const tg__pool_call *)tg__ctx_params(ctx);
    b.ndim = xm->ndim;
    memcpy(b.shape, xm->shape, sizeof(int64_t) * (size_t)xm->ndim);
    tg_tensor *in[1] = {g};
    return tg_op_call(&upsample_backward_op, &gi[0], 1, in, &b, sizeof b);
}

/* dx[i] = the sum of g over the block that reads i, in double, rounded once
 * into g's dtype. */
static int upsample_bw_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                               const void *params)
{
    (void)ctx, (void)n;
    const char *op = "upsample_nearest_backward";
    tg__pool_call c = *(const tg__pool_call *)params;
    tg_tensor *g = in[0];
    int64_t os[TG_MAX_DIMS];
    TG_TRY(tg__pool_prepare(op, TG__UPSAMPLE, g ? g->dtype : TG_F64, &c, os));
    TG_TRY(tg__pool_check_grad(op, g, &c, os));
    tg__pool_geom geo;
    tg__pool_geom_of(TG__UPSAMPLE, &c, os, &geo);
    const int64_t ng = tg_tensor_numel(g), nx = tg__numel(c.ndim, c.shape);
    double *gv = tg__work_alloc((size_t)(ng > 0 ? ng : 1) * sizeof *gv);
    double *acc = tg__calloc((size_t)(nx > 0 ? nx : 1), sizeof *acc);
    tg_tensor *x = gv && acc ? tg__tensor_uninit(g->dtype, c.ndim, c.shape) : NULL;
    if (x) {
        tg__gather(g, TG_F64, gv);
        up_job j = {.g = &geo, .gv = gv, .acc = acc};
        tg__parallel_range(geo.planes, ng > 32768, up_backward_planes, &j);
        tg__scatter(x, TG_F64, acc);
        *out = x;
    }
    free(acc);
    tg__work_free(gv);
    return x ? TG_OK : TG_ENOMEM;
}

/* The gradient of upsample_nearest_backward: upsample_nearest. */
static int upsample_bw_backward(tg_ctx *ctx, tg_tensor *h, tg_tensor **gi)
{
    tg_tensor *in[1] = {h};
    return tg_op_call(&upsample_op, &gi[0], 1, in, tg__ctx_params(ctx), sizeof(tg__pool_call));
}

static const tg_op_schema upsample_op = {
    .name = "upsample_nearest", .arity = 1, .amp = TG_AMP_KEEP, .forward = upsample_forward,
    .backward = upsample_backward, .shape = upsample_shape, .double_backward = true};
static const tg_op_schema upsample_backward_op = {
    .name = "upsample_nearest_backward", .arity = 1, .amp = TG_AMP_KEEP,
    .forward = upsample_bw_forward, .backward = upsample_bw_backward, .double_backward = true};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__upsample_ops[] = {&upsample_op, &upsample_backward_op};
static_assert(sizeof tg__upsample_ops / sizeof tg__upsample_ops[0] == TG__upsample_N,
              "src/ops/families.h must count the upsample ops");

int tg_upsample_nearest(tg_tensor **out, tg_tensor *x, int n_spatial, const int64_t *scale)
{
    const char *op = tg__pool_opname(TG__UPSAMPLE, n_spatial);
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", op);
    TG_CHECK(x != NULL, TG_EINVAL, "%s: x must not be NULL", op);
    TG_TRY(tg__upsample_check_scale(op, n_spatial, scale));
    tg__pool_call c = {.ns = n_spatial};
    memcpy(c.scale, scale, (size_t)n_spatial * sizeof *scale);
    tg_tensor *in[1] = {x};
    return tg_op_call(&upsample_op, out, 1, in, &c, sizeof c);
}
