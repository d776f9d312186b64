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

/* The forward's work, shared by the planes of parallel ranges. */
typedef struct up_job {
    const tg__pool_geom *g;
    size_t es;                 /* element bytes */
    const unsigned char *xb;   /* x's elements, row-major */
    unsigned char *yb;         /* y's */
} up_job;

/* Output row (o0, o1) of a plane reads input row (o0 / k0, o1 / k1); its
 * element o2 reads element o2 / k2 of that row. */
static int64_t in_row(const tg__pool_geom *g, int64_t o0, int64_t o1)
{
    return ((o0 / g->k[0]) * g->in[1] + o1 / g->k[1]) * g->in[2];
}

/* dst[i*k + r] = src[i] for i < n, r < k: the row's elements repeated, as
 * words of the element's size (the factors 1 and 2 in loops of their own,
 * which gcc vectorises). */
#define TG__REPEAT_ROW(W)                                                     \
    static void repeat_row_##W(void *restrict dst, const void *restrict src,  \
                               int64_t n, int64_t k)                          \
    {                                                                         \
        W *restrict d = dst;                                                  \
        const W *restrict s = src;                                            \
        if (k == 1) {                                                         \
            memcpy(d, s, (size_t)n * sizeof *d);                              \
        } else if (k == 2) {                                                  \
            for (int64_t i = 0; i < n; i++) d[2 * i] = d[2 * i + 1] = s[i];   \
        } else {                                                              \
            for (int64_t i = 0; i < n; i++)                                   \
                for (int64_t r = 0; r < k; r++) d[i * k + r] = s[i];          \
        }                                                                     \
    }
/* repeat_row_uint16_t, repeat_row_uint32_t, repeat_row_uint64_t */
TG__REPEAT_ROW(uint16_t)
TG__REPEAT_ROW(uint32_t)
TG__REPEAT_ROW(uint64_t)
#undef TG__REPEAT_ROW

/* Planes [lo, hi) of y: each output row is its input row with every
 * element repeated k2 times, or a copy of the row before when it reads the
 * same input row. */
static void up_forward_planes(void *ctx, int64_t lo, int64_t hi)
{
    const up_job *j = ctx;
    const tg__pool_geom *g = j->g;
    const size_t es = j->es, row = (size_t)g->out[2] * es;
    void (*repeat)(void *restrict, const void *restrict, int64_t, int64_t) =
        es == 2 ? repeat_row_uint16_t : es == 4 ? repeat_row_uint32_t : repeat_row_uint64_t;
    for (int64_t pl = lo; pl < hi; pl++) {
        const unsigned char *xp = j->xb + (size_t)(pl * g->in_plane) * es;
        unsigned char *yp = j->yb + (size_t)(pl * g->out_plane) * es;
        for (int64_t o0 = 0; o0 < g->out[0]; o0++)
            for (int64_t o1 = 0; o1 < g->out[1]; o1++, yp += row) {
                if ((o1 > 0 && o1 % g->k[1]) || (o1 == 0 && o0 % g->k[0]))
                    memcpy(yp, yp - (o1 > 0 ? row : row * (size_t)g->out[1]), row);
                else
                    repeat(yp, xp + (size_t)in_row(g, o0, o1) * es, g->in[2], g->k[2]);
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
    const bool direct = tg_tensor_is_contiguous(x);
    unsigned char *xb = direct ? NULL : tg__work_alloc((size_t)(nx > 0 ? nx : 1) * es);
    tg_tensor *y = direct || xb ? tg__tensor_uninit(x->dtype, c.ndim, os) : NULL;
    if (!y) {
        tg__work_free(xb);
        return TG_ENOMEM;
    }
    if (xb) tg__gather(x, x->dtype, xb);
    up_job j = {.g = &g, .es = es,
                .xb = xb ? xb : (const unsigned char *)x->storage->data + (size_t)x->offset * es,
                .yb = (unsigned char *)y->storage->data};
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

/* dx[i] = the sum of g over the block that reads i, in the compute dtype
 * (pool_kernels_tmpl.h), rounded once into g's dtype. */
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
    tg__pool_job j = {.g = &geo};
    return tg__pool_run(&tg__upsample_sum_kernels, &j, tg__compute_dtype(g->dtype), g, c.ndim,
                        c.shape, true, out);
}

/* The gradient of upsample_nearest_backward: upsample_nearest. */
static int upsample_bw_backward(tg_ctx *ctx, tg_tensor *h, tg_tensor **gi)
{
    tg_tensor *in[1] = {h};
    return tg_op_call(&upsample_op, &gi[0], 1, in, tg__ctx_params(ctx), sizeof(tg__pool_call));
}

static const tg_op_schema upsample_op = {
    .name = "upsample_nearest", .arity = 1, .amp = TG_AMP_KEEP, .forward = upsample_forward,
    .backward = upsample_backward, .shape = upsample_shape, .double_backward = true,
    .vjp = "da = upsample_nearest_backward(g): each s-block of g summed into the element it "
           "copies"};
static const tg_op_schema upsample_backward_op = {
    .name = "upsample_nearest_backward", .arity = 1, .amp = TG_AMP_KEEP,
    .forward = upsample_bw_forward, .backward = upsample_bw_backward, .double_backward = true,
    .vjp = "dg = upsample_nearest(g')"};

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
