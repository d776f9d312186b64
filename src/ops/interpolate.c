/* src/ops/interpolate.c - F.interpolate's linear and cubic modes:
 * upsample_linear(x, size, align_corners) (mode='linear' | 'bilinear' |
 * 'trilinear'), upsample_bicubic(x, size, align_corners) (mode='bicubic'),
 * nn.Upsample with those modes, and their adjoints upsample_linear_backward
 * and upsample_bicubic_backward.
 *
 * Along each spatial axis of input extent I and output extent O, output
 * index o reads input indices around a source position r (PyTorch's
 * area_pixel_compute_source_index, computed in the compute dtype):
 *   align_corners:  r = o * (I-1)/(O-1)          (0 when O = 1)
 *   otherwise:      r = (o + 1/2) * I/O - 1/2    (linear: at least 0)
 * linear: i0 = floor(r) (at most I-1), i1 = i0 + 1 (i0 at the last index),
 * with weights l1 = r - i0 (clamped to [0, 1]) and l0 = 1 - l1; when
 * O = I, i0 = i1 = o, l0 = 1, l1 = 0.
 * cubic: the four indices floor(r) - 1 + k, k = 0..3, each clamped to
 * [0, I-1], with Keys's weights (a = -0.75) of t = r - floor(r):
 *   w(1+t), w(t), w(1-t), w(2-t),  w(d) = (a+2)d^3 - (a+3)d^2 + 1 (d <= 1),
 *                                  w(d) = a d^3 - 5a d^2 + 8a d - 4a (1 < d < 2).
 * An output element is the product of these 1-D interpolations over the
 * axes, the last axis innermost, each axis's terms added in index order,
 * as torch's CPU kernels nest them.
 *
 * So y = A x for a matrix A with at most 2^N (4^2) entries per row.  The
 * gradient is A^T g, each g element added into the inputs it read with the
 * product of their weights; that op is linear too, and its gradient is A h,
 * the forward op again: each pair are each other's adjoint, and derivatives
 * of any order are these ops. */
#include <assert.h>
#include <math.h>
#include <string.h>

#include "autograd/tape.h"
#include "ops/families.h"
#include "ops/pool_internal.h"
#include "tapegrad/pool.h"

/* ---- the kernels, in float and double ---- */

/* One axis's table: output index o reads the taps input indices
 * idx[o*taps ..] with weights w[o*taps ..] (in the compute dtype).  An
 * axis added in front of the call's (extent 1) has one tap: index 0,
 * weight 1, and its multiplications by 1 are exact. */
typedef struct interp_axis {
    int64_t *idx;
    void *w;
    int taps;
} interp_axis;

/* A kernel's job: tg__pool_run's job first (it sets src and dst), then the
 * tables of the three axes (the last always has the mode's taps). */
typedef struct interp_job {
    tg__pool_job pj;
    interp_axis ax[3];
} interp_job;

/* The element offsets in a plane of x of the input rows that output row
 * (o0, o1) reads: row[a * taps1 + b] for tap a of axis 0 and b of axis 1. */
static void interp_rows(const interp_job *j, int64_t o0, int64_t o1, int64_t *off)
{
    const tg__pool_geom *g = j->pj.g;
    const interp_axis *a0 = &j->ax[0], *a1 = &j->ax[1];
    for (int a = 0; a < a0->taps; a++)
        for (int b = 0; b < a1->taps; b++)
            off[a * a1->taps + b] =
                (a0->idx[o0 * a0->taps + a] * g->in[1] + a1->idx[o1 * a1->taps + b]) * g->in[2];
}

/* PyTorch's cubic convolution weights (A = -0.75) of the four inputs
 * around a source position at fraction t past the second. */
#define CUBIC_A (-0.75)
#define CUBIC_NEAR(T, x) ((((T)CUBIC_A + 2) * (x) - ((T)CUBIC_A + 3)) * (x) * (x) + 1)
#define CUBIC_FAR(T, x)                                                                    \
    ((((T)CUBIC_A * (x) - 5 * (T)CUBIC_A) * (x) + 8 * (T)CUBIC_A) * (x) - 4 * (T)CUBIC_A)

/* INTERP_KERNELS(T, S): for compute type T, the tables (interp_table_S)
 * and the forward and adjoint kernels for K taps on the last axis
 * (interp_forward_S_K, interp_adjoint_S_K; K = 2 linear, 4 cubic). */
#define INTERP_TABLE(T, S)                                                                 \
    static void interp_table_##S(interp_axis *t, int64_t in, int64_t out, bool align,      \
                                 bool cubic)                                               \
    {                                                                                      \
        T *w = t->w;                                                                       \
        int64_t *ix = t->idx;                                                              \
        const T scale = align ? (out > 1 ? (T)(in - 1) / (T)(out - 1) : (T)0)              \
                              : (T)in / (T)out;                                            \
        for (int64_t o = 0; o < out; o++, ix += t->taps, w += t->taps) {                   \
            T r = align ? scale * (T)o : scale * ((T)o + (T)0.5) - (T)0.5;                 \
            if (cubic) { /* the source position unclamped, the taps clamped to x */       \
                const T f = (T)floor((double)r);                                           \
                const T u = r - f, v = (T)1 - u;                                           \
                const T wt[4] = {CUBIC_FAR(T, u + 1), CUBIC_NEAR(T, u), CUBIC_NEAR(T, v),  \
                                 CUBIC_FAR(T, v + 1)};                                     \
                for (int k = 0; k < 4; k++) {                                              \
                    const int64_t i = (int64_t)f - 1 + k;                                  \
                    ix[k] = i < 0 ? 0 : i > in - 1 ? in - 1 : i;                           \
                    w[k] = wt[k];                                                          \
                }                                                                          \
                continue;                                                                  \
            }                                                                              \
            if (in == out) {                                                               \
                ix[0] = ix[1] = o;                                                         \
                w[0] = 1, w[1] = 0;                                                        \
                continue;                                                                  \
            }                                                                              \
            if (r < 0) r = 0;                                                              \
            const int64_t i0 = (int64_t)r < in - 1 ? (int64_t)r : in - 1;                  \
            T l = r - (T)i0;                                                               \
            l = l < 0 ? 0 : l > 1 ? 1 : l;                                                 \
            ix[0] = i0;                                                                    \
            ix[1] = i0 + (i0 < in - 1 ? 1 : 0);                                            \
            w[1] = l, w[0] = (T)1 - l;                                                     \
        }                                                                                  \
    }

/* A kernel's view of job p: the geometry g, the three axes' weights, the
 * last axis's indices (interp_rows reads the others), the taps of axes 0
 * and 1 (n0, n1) and the output row length O2. */
#define INTERP_TABLES(T)                                                                   \
    const interp_job *j = p;                                                               \
    const tg__pool_geom *g = j->pj.g;                                                      \
    const int64_t *ix2 = j->ax[2].idx;                                                     \
    const T *w0 = j->ax[0].w, *w1 = j->ax[1].w, *w2 = j->ax[2].w;                          \
    const int n0 = j->ax[0].taps, n1 = j->ax[1].taps;                                      \
    const int64_t O2 = g->out[2];

#define INTERP_KERNELS(T, S, K)                                                            \
    /* Planes [lo, hi): y from x, row by row of the output; the last axis's    \
     * sums innermost, each weighted and added in tap order (as torch). */     \
    static void interp_forward_##S##_##K(void *p, int64_t lo, int64_t hi)                  \
    {                                                                                      \
        INTERP_TABLES(T)                                                                   \
        for (int64_t pl = lo; pl < hi; pl++) {                                             \
            const T *x = (const T *)j->pj.src + pl * g->in_plane;                          \
            T *y = (T *)j->pj.dst + pl * g->out_plane;                                     \
            for (int64_t o0 = 0; o0 < g->out[0]; o0++)                                     \
                for (int64_t o1 = 0; o1 < g->out[1]; o1++, y += O2) {                      \
                    int64_t off[K * K];                                                    \
                    interp_rows(j, o0, o1, off);                                           \
                    const T *wa = w0 + o0 * n0, *wb = w1 + o1 * n1;                        \
                    for (int64_t o2 = 0; o2 < O2; o2++) {                                  \
                        const int64_t *ic = ix2 + o2 * K;                                  \
                        const T *wc = w2 + o2 * K;                                         \
                        T v0 = 0;                                                          \
                        for (int a = 0; a < n0; a++) {                                     \
                            T v1 = 0;                                                      \
                            for (int b = 0; b < n1; b++) {                                 \
                                const T *r = x + off[a * n1 + b];                          \
                                T v2 = r[ic[0]] * wc[0];                                   \
                                for (int c = 1; c < K; c++) v2 += r[ic[c]] * wc[c];        \
                                v1 = b ? v1 + v2 * wb[b] : v2 * wb[b];                     \
                            }                                                              \
                            v0 = a ? v0 + v1 * wa[a] : v1 * wa[a];                         \
                        }                                                                  \
                        y[o2] = v0;                                                        \
                    }                                                                      \
                }                                                                          \
        }                                                                                  \
    }                                                                                      \
                                                                                           \
    /* Planes [lo, hi): dx (zeroed) += A^T g, in the order of the outputs. */              \
    static void interp_adjoint_##S##_##K(void *p, int64_t lo, int64_t hi)                  \
    {                                                                                      \
        INTERP_TABLES(T)                                                                   \
        for (int64_t pl = lo; pl < hi; pl++) {                                             \
            const T *gp = (const T *)j->pj.src + pl * g->out_plane;                        \
            T *dx = (T *)j->pj.dst + pl * g->in_plane;                                     \
            for (int64_t o0 = 0; o0 < g->out[0]; o0++)                                     \
                for (int64_t o1 = 0; o1 < g->out[1]; o1++, gp += O2) {                     \
                    int64_t off[K * K];                                                    \
                    interp_rows(j, o0, o1, off);                                           \
                    const T *wa = w0 + o0 * n0, *wb = w1 + o1 * n1;                        \
                    for (int a = 0; a < n0; a++)                                           \
                        for (int b = 0; b < n1; b++) {                                     \
                            T *r = dx + off[a * n1 + b];                                   \
                            const T w = (T)1 * wa[a] * wb[b];                              \
                            for (int64_t o2 = 0; o2 < O2; o2++)                            \
                                for (int c = 0; c < K; c++)                                \
                                    r[ix2[o2 * K + c]] += w * w2[o2 * K + c] * gp[o2];     \
                        }                                                                  \
                }                                                                          \
        }                                                                                  \
    }

INTERP_TABLE(float, f32)
INTERP_TABLE(double, f64)
INTERP_KERNELS(float, f32, 2)
INTERP_KERNELS(double, f64, 2)
INTERP_KERNELS(float, f32, 4)
INTERP_KERNELS(double, f64, 4)
#undef INTERP_KERNELS
#undef INTERP_TABLES
#undef INTERP_TABLE

/* Indexed by cubic: the linear (2 taps) and cubic (4) kernels. */
static const tg__pool_kernels forward_kernels[2] = {
    {.f32 = interp_forward_f32_2, .f64 = interp_forward_f64_2},
    {.f32 = interp_forward_f32_4, .f64 = interp_forward_f64_4}};
static const tg__pool_kernels adjoint_kernels[2] = {
    {.f32 = interp_adjoint_f32_2, .f64 = interp_adjoint_f64_2},
    {.f32 = interp_adjoint_f32_4, .f64 = interp_adjoint_f64_4}};

/* The tables of geometry g (the call's mode and align_corners) for compute
 * dtype cdt into j, owned by the returned block (NULL: out of memory). */
static void *interp_tables(interp_job *j, const tg__pool_geom *g, int ns, bool cubic, bool align,
                           tg_dtype cdt)
{
    const size_t es = tg_dtype_size(cdt);
    const int taps = cubic ? 4 : 2;
    int64_t n = 0;
    for (int a = 0; a < 3; a++) {
        j->ax[a].taps = a >= 3 - ns ? taps : 1;
        n += g->out[a] * j->ax[a].taps;
    }
    char *mem = tg__malloc((size_t)n * (sizeof(int64_t) + es));
    if (!mem) return NULL;
    int64_t *ip = (int64_t *)mem;
    char *wp = mem + (size_t)n * sizeof(int64_t);
    for (int a = 0; a < 3; a++) {
        interp_axis *t = &j->ax[a];
        const int64_t m = g->out[a] * t->taps;
        t->idx = ip, t->w = wp;
        ip += m;
        wp += (size_t)m * es;
        if (t->taps == 1) {   /* an added axis: extent 1 */
            t->idx[0] = 0;
            if (cdt == TG_F64) *(double *)t->w = 1;
            else *(float *)t->w = 1;
        } else if (cdt == TG_F64) {
            interp_table_f64(t, g->in[a], g->out[a], align, cubic);
        } else {
            interp_table_f32(t, g->in[a], g->out[a], align, cubic);
        }
    }
    return mem;
}

/* Runs the forward (adjoint false) or adjoint kernels of call c (linear or
 * cubic, its geometry g) on src into *out of shape (ndim, shape), in src's
 * compute dtype. */
static int interp_run(bool adjoint, const tg__pool_call *c, const tg__pool_geom *g,
                      const tg_tensor *src, int ndim, const int64_t *shape, tg_tensor **out)
{
    const tg_dtype cdt = tg__compute_dtype(src->dtype);
    const bool cubic = c->cubic;
    interp_job j = {.pj = {.g = g}};
    void *mem = interp_tables(&j, g, c->ns, cubic, c->align_corners, cdt);
    if (!mem) return TG_ENOMEM;
    const tg__pool_kernels *k = adjoint ? &adjoint_kernels[cubic] : &forward_kernels[cubic];
    const int rc = tg__pool_run(k, &j.pj, cdt, src, ndim, shape, adjoint, out);
    free(mem);
    return rc;
}

/* ---- the ops ---- */

/* One set of callbacks serves both pairs: a call's params say which
 * (tg__pool_call's cubic). */
static const tg_op_schema uplin_op, uplin_backward_op, upcub_op, upcub_backward_op;

static tg__pool_kind kind_of(const void *params)
{
    return ((const tg__pool_call *)params)->cubic ? TG__UPSAMPLE_CUBIC : TG__UPSAMPLE_LINEAR;
}

static int interp_shape(int n, tg_tensor *const *in, const void *params, tg_dtype *dtype,
                        int *ndim, int64_t *shape)
{
    (void)n;
    return tg__pool_forward_shape(kind_of(params), in, params, dtype, ndim, shape);
}

/* y = A x in the compute dtype, rounded once into x's dtype. */
static int interp_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                          const void *params)
{
    (void)ctx, (void)n;
    const tg__pool_kind kind = kind_of(params);
    tg__pool_call c;
    int64_t os[TG_MAX_DIMS];
    TG_TRY(tg__pool_prepare_x(kind, params, in[0], &c, os));
    tg__pool_geom g;
    tg__pool_geom_of(kind, &c, os, &g);
    return interp_run(false, &c, &g, in[0], c.ndim, os, out);
}

/* The gradient of a forward op: its backward op on g, told x's shape. */
static int interp_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    const tg_meta *xm = tg__ctx_input_meta(ctx, 0);
    tg__pool_call b = *(const tg__pool_call *)tg__ctx_params(ctx);
    b.ndim = xm->ndim;
    memcpy(b.shape, xm->shape, sizeof(int64_t) * (size_t)xm->ndim);
    tg_tensor *in[1] = {g};
    return tg_op_call(b.cubic ? &upcub_backward_op : &uplin_backward_op, &gi[0], 1, in, &b,
                      sizeof b);
}

/* dx = A^T g in the compute dtype, rounded once into g's dtype. */
static int interp_adjoint(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                          const void *params)
{
    (void)ctx, (void)n;
    const tg__pool_kind kind = kind_of(params);
    const char *op = kind == TG__UPSAMPLE_CUBIC ? upcub_backward_op.name : uplin_backward_op.name;
    tg__pool_call c = *(const tg__pool_call *)params;
    tg_tensor *g = in[0];
    int64_t os[TG_MAX_DIMS];
    TG_TRY(tg__pool_prepare(op, kind, g ? g->dtype : TG_F64, &c, os));
    TG_TRY(tg__pool_check_grad(op, g, &c, os));
    tg__pool_geom geo;
    tg__pool_geom_of(kind, &c, os, &geo);
    return interp_run(true, &c, &geo, g, c.ndim, c.shape, out);
}

/* The gradient of a backward op: the forward op on h, same size. */
static int interp_adjoint_backward(tg_ctx *ctx, tg_tensor *h, tg_tensor **gi)
{
    const tg__pool_call *c = tg__ctx_params(ctx);
    tg_tensor *in[1] = {h};
    return tg_op_call(c->cubic ? &upcub_op : &uplin_op, &gi[0], 1, in, c, sizeof *c);
}

static const tg_op_schema uplin_op = {
    .name = "upsample_linear", .arity = 1, .amp = TG_AMP_KEEP, .forward = interp_forward,
    .backward = interp_backward, .shape = interp_shape, .double_backward = true,
    .vjp = "da = upsample_linear_backward(g): each g element added into the 2^N inputs it read, "
           "times their weights"};
static const tg_op_schema uplin_backward_op = {
    .name = "upsample_linear_backward", .arity = 1, .amp = TG_AMP_KEEP,
    .forward = interp_adjoint, .backward = interp_adjoint_backward, .double_backward = true,
    .vjp = "dg = upsample_linear(g'), same size"};
static const tg_op_schema upcub_op = {
    .name = "upsample_bicubic", .arity = 1, .amp = TG_AMP_KEEP, .forward = interp_forward,
    .backward = interp_backward, .shape = interp_shape, .double_backward = true,
    .vjp = "da = upsample_bicubic_backward(g): each g element added into the 16 inputs it read, "
           "times their weights"};
static const tg_op_schema upcub_backward_op = {
    .name = "upsample_bicubic_backward", .arity = 1, .amp = TG_AMP_KEEP,
    .forward = interp_adjoint, .backward = interp_adjoint_backward, .double_backward = true,
    .vjp = "dg = upsample_bicubic(g'), same size"};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__interpolate_ops[] = {&uplin_op, &uplin_backward_op, &upcub_op,
                                                   &upcub_backward_op};
static_assert(sizeof tg__interpolate_ops / sizeof tg__interpolate_ops[0] == TG__interpolate_N,
              "src/ops/families.h must count the interpolate ops");

/* The checked call of a forward op of that kind, by tg_op_call. */
static int interp_call(tg__pool_kind kind, tg_tensor **out, tg_tensor *x, int n_spatial,
                       const int64_t *size, bool align_corners)
{
    const char *op = tg__pool_opname(kind, n_spatial);
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", op);
    TG_CHECK(x != NULL, TG_EINVAL, "%s: x must not be NULL", op);
    TG_TRY(tg__upsample_check_size(op, n_spatial, size));
    const bool cubic = kind == TG__UPSAMPLE_CUBIC;
    tg__pool_call c = {.ns = n_spatial, .align_corners = align_corners, .cubic = cubic};
    memcpy(c.size, size, (size_t)n_spatial * sizeof *size);
    tg_tensor *in[1] = {x};
    return tg_op_call(cubic ? &upcub_op : &uplin_op, out, 1, in, &c, sizeof c);
}

int tg_upsample_linear(tg_tensor **out, tg_tensor *x, int n_spatial, const int64_t *size,
                       bool align_corners)
{
    return interp_call(TG__UPSAMPLE_LINEAR, out, x, n_spatial, size, align_corners);
}

int tg_upsample_bicubic(tg_tensor **out, tg_tensor *x, const int64_t *size, bool align_corners)
{
    return interp_call(TG__UPSAMPLE_CUBIC, out, x, 2, size, align_corners);
}
