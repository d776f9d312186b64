/* src/ops/upsample_linear.c - upsample_linear(x, size, align_corners)
 * (F.interpolate(mode='linear' | 'bilinear' | 'trilinear'), nn.Upsample
 * with those modes) and its adjoint upsample_linear_backward.
 *
 * Along each spatial axis of input extent I and output extent O, output
 * index o reads the two input indices around a source position r (PyTorch's
 * area_pixel_compute_source_index, computed in the compute dtype):
 *   align_corners:  r = o * (I-1)/(O-1)          (0 when O = 1)
 *   otherwise:      r = max((o + 1/2) * I/O - 1/2, 0)
 * i0 = floor(r) (at most I-1), i1 = i0 + 1 (i0 at the last index), with
 * weights l1 = r - i0 (clamped to [0, 1]) and l0 = 1 - l1; when O = I,
 * i0 = i1 = o, l0 = 1, l1 = 0.  An
 * output element is the product of these 1-D interpolations over the
 * axes, the last axis innermost: y = l0_a * (...at i0_a) + l1_a * (...at
 * i1_a), as torch's CPU kernel nests them.
 *
 * So y = A x for a matrix A with at most 2^N entries per row.  The gradient
 * is A^T g, each g element added into the 2^N inputs it read with the
 * product of their weights; that op is linear too, and its gradient is A h,
 * upsample_linear again: the two are each other's adjoint, and derivatives
 * of any order are these two ops. */
#include <assert.h>
#include <string.h>

#include "autograd/tape.h"
#include "ops/families.h"
#include "ops/pool_internal.h"
#include "tapegrad/pool.h"

static const tg_op_schema uplin_op, uplin_backward_op;

/* ---- the kernels, in float and double ---- */

/* One axis's table: output index o reads i0[o] and i1[o] with weights
 * l0[o] and l1[o] (in the compute dtype; lf or ld). */
typedef struct lin_axis {
    int64_t *i0, *i1;
    void *l0, *l1;
} lin_axis;

/* A kernel's job: tg__pool_run's job first (it sets src and dst), then the
 * tables of the three axes (an added axis of extent 1 has i0 = i1 = 0, l0
 * = 1, l1 = 0 and is skipped: real[a] false). */
typedef struct lin_job {
    tg__pool_job pj;
    lin_axis ax[3];
    bool real[3];
} lin_job;

/* The element offsets in a plane of x of the input rows that output row
 * (o0, o1) reads: (i0, i0), (i0, i1), (i1, i0), (i1, i1) along axes 0, 1. */
static void lin_rows(const lin_job *j, int64_t o0, int64_t o1, int64_t off[4])
{
    const tg__pool_geom *g = j->pj.g;
    const lin_axis *a0 = &j->ax[0], *a1 = &j->ax[1];
    for (int q = 0; q < 4; q++)
        off[q] = ((q & 2 ? a0->i1 : a0->i0)[o0] * g->in[1] + (q & 1 ? a1->i1 : a1->i0)[o1]) *
                 g->in[2];
}

/* A kernel's view of job p: the geometry g, the weights l<axis><0|1> and
 * the last axis's indices i20, i21, as compute type T; O2 the output row
 * length. */
#define LIN_TABLES(T)                                                                     \
    const lin_job *j = p;                                                                 \
    const tg__pool_geom *g = j->pj.g;                                                     \
    const T *l00 = j->ax[0].l0, *l01 = j->ax[0].l1;                                       \
    const T *l10 = j->ax[1].l0, *l11 = j->ax[1].l1;                                       \
    const T *l20 = j->ax[2].l0, *l21 = j->ax[2].l1;                                       \
    const int64_t *i20 = j->ax[2].i0, *i21 = j->ax[2].i1, O2 = g->out[2];

/* LIN_KERNELS(T, S): lin_table_S, lin_forward_S and lin_adjoint_S for
 * compute type T. */
#define LIN_KERNELS(T, S)                                                                   \
    static void lin_table_##S(lin_axis *t, int64_t in, int64_t out, bool align)            \
    {                                                                                      \
        T *l0 = t->l0, *l1 = t->l1;                                                        \
        const T scale = align ? (out > 1 ? (T)(in - 1) / (T)(out - 1) : (T)0)              \
                              : (T)in / (T)out;                                            \
        for (int64_t o = 0; o < out; o++) {                                                \
            if (in == out) {                                                               \
                t->i0[o] = t->i1[o] = o;                                                   \
                l0[o] = 1, l1[o] = 0;                                                      \
                continue;                                                                  \
            }                                                                              \
            T r = align ? scale * (T)o : scale * ((T)o + (T)0.5) - (T)0.5;                 \
            if (r < 0) r = 0;                                                              \
            const int64_t i0 = (int64_t)r < in - 1 ? (int64_t)r : in - 1;                  \
            T w = r - (T)i0;                                                               \
            w = w < 0 ? 0 : w > 1 ? 1 : w;                                                 \
            t->i0[o] = i0;                                                                 \
            t->i1[o] = i0 + (i0 < in - 1 ? 1 : 0);                                         \
            l1[o] = w, l0[o] = (T)1 - w;                                                   \
        }                                                                                  \
    }                                                                                      \
                                                                                           \
    /* Planes [lo, hi): y from x, row by row of the output. */                             \
    static void lin_forward_##S(void *p, int64_t lo, int64_t hi)                           \
    {                                                                                      \
        LIN_TABLES(T)                                                                      \
        for (int64_t pl = lo; pl < hi; pl++) {                                             \
            const T *x = (const T *)j->pj.src + pl * g->in_plane;                          \
            T *y = (T *)j->pj.dst + pl * g->out_plane;                                     \
            for (int64_t o0 = 0; o0 < g->out[0]; o0++)                                     \
                for (int64_t o1 = 0; o1 < g->out[1]; o1++, y += O2) {                      \
                    int64_t off[4];                                                        \
                    lin_rows(j, o0, o1, off);                                              \
                    const T *r00 = x + off[0], *r01 = x + off[1], *r10 = x + off[2];       \
                    const T *r11 = x + off[3];                                             \
                    const T w00 = l00[o0], w01 = l01[o0], w10 = l10[o1], w11 = l11[o1];    \
                    for (int64_t o2 = 0; o2 < O2; o2++) {                                  \
                        const int64_t c0 = i20[o2], c1 = i21[o2];                          \
                        const T u0 = l20[o2], u1 = l21[o2];                                \
                        T v = r00[c0] * u0 + r00[c1] * u1;                                 \
                        if (j->real[1]) v = v * w10 + (r01[c0] * u0 + r01[c1] * u1) * w11; \
                        if (j->real[0]) {                                                  \
                            T v1 = r10[c0] * u0 + r10[c1] * u1;                            \
                            if (j->real[1])                                                \
                                v1 = v1 * w10 + (r11[c0] * u0 + r11[c1] * u1) * w11;       \
                            v = v * w00 + v1 * w01;                                        \
                        }                                                                  \
                        y[o2] = v;                                                         \
                    }                                                                      \
                }                                                                          \
        }                                                                                  \
    }                                                                                      \
                                                                                           \
    /* Planes [lo, hi): dx (zeroed) += A^T g, in the order of the outputs. */              \
    static void lin_adjoint_##S(void *p, int64_t lo, int64_t hi)                           \
    {                                                                                      \
        LIN_TABLES(T)                                                                      \
        for (int64_t pl = lo; pl < hi; pl++) {                                             \
            const T *gp = (const T *)j->pj.src + pl * g->out_plane;                        \
            T *dx = (T *)j->pj.dst + pl * g->in_plane;                                     \
            for (int64_t o0 = 0; o0 < g->out[0]; o0++)                                     \
                for (int64_t o1 = 0; o1 < g->out[1]; o1++, gp += O2) {                     \
                    int64_t off[4];                                                        \
                    lin_rows(j, o0, o1, off);                                              \
                    T *r[4] = {dx + off[0], dx + off[1], dx + off[2], dx + off[3]};        \
                    const T w0[2] = {l00[o0], l01[o0]}, w1[2] = {l10[o1], l11[o1]};        \
                    for (int q = 0; q < 4; q++) {                                          \
                        if ((q & 2 && !j->real[0]) || (q & 1 && !j->real[1])) continue;    \
                        T w = (T)1;                                                        \
                        if (j->real[0]) w *= w0[q >> 1];                                   \
                        if (j->real[1]) w *= w1[q & 1];                                    \
                        for (int64_t o2 = 0; o2 < O2; o2++) {                              \
                            r[q][i20[o2]] += w * l20[o2] * gp[o2];                         \
                            r[q][i21[o2]] += w * l21[o2] * gp[o2];                         \
                        }                                                                  \
                    }                                                                      \
                }                                                                          \
        }                                                                                  \
    }

LIN_KERNELS(float, f32)
LIN_KERNELS(double, f64)
#undef LIN_KERNELS
#undef LIN_TABLES

static const tg__pool_kernels lin_forward_kernels = {.f32 = lin_forward_f32,
                                                     .f64 = lin_forward_f64};
static const tg__pool_kernels lin_adjoint_kernels = {.f32 = lin_adjoint_f32,
                                                     .f64 = lin_adjoint_f64};

/* The tables of geometry g (the call's align_corners) for compute dtype
 * cdt into j, owned by the returned block (NULL: out of memory). */
static void *lin_tables(lin_job *j, const tg__pool_geom *g, bool align, tg_dtype cdt)
{
    const size_t es = tg_dtype_size(cdt);
    const int64_t no = g->out[0] + g->out[1] + g->out[2];
    char *mem = tg__malloc((size_t)no * (2 * sizeof(int64_t) + 2 * es));
    if (!mem) return NULL;
    int64_t *ip = (int64_t *)mem;
    char *lp = mem + (size_t)(2 * no) * sizeof(int64_t);
    for (int a = 0; a < 3; a++) {
        const int64_t n = g->out[a];
        lin_axis *t = &j->ax[a];
        *t = (lin_axis){.i0 = ip, .i1 = ip + n, .l0 = lp, .l1 = lp + (size_t)n * es};
        ip += 2 * n;
        lp += (size_t)(2 * n) * es;
        if (cdt == TG_F64) lin_table_f64(t, g->in[a], n, align);
        else lin_table_f32(t, g->in[a], n, align);
    }
    return mem;
}

/* Runs kernels k of call c (its geometry g) on src into *out of shape
 * (ndim, shape), in src's compute dtype. */
static int lin_run(const tg__pool_kernels *k, const tg__pool_call *c, const tg__pool_geom *g,
                   const tg_tensor *src, int ndim, const int64_t *shape, bool zeroed,
                   tg_tensor **out)
{
    const tg_dtype cdt = tg__compute_dtype(src->dtype);
    lin_job j = {.pj = {.g = g}};
    for (int a = 0; a < 3; a++) j.real[a] = a >= 3 - c->ns;
    void *mem = lin_tables(&j, g, c->align_corners, cdt);
    if (!mem) return TG_ENOMEM;
    const int rc = tg__pool_run(k, &j.pj, cdt, src, ndim, shape, zeroed, out);
    free(mem);
    return rc;
}

/* ---- the ops ---- */

static int uplin_shape(int n, tg_tensor *const *in, const void *params, tg_dtype *dtype,
                       int *ndim, int64_t *shape)
{
    (void)n;
    return tg__pool_forward_shape(TG__UPSAMPLE_LINEAR, in, params, dtype, ndim, shape);
}

/* y = A x in the compute dtype, rounded once into x's dtype. */
static int uplin_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                         const void *params)
{
    (void)ctx, (void)n;
    tg__pool_call c;
    int64_t os[TG_MAX_DIMS];
    TG_TRY(tg__pool_prepare_x(TG__UPSAMPLE_LINEAR, params, in[0], &c, os));
    tg__pool_geom g;
    tg__pool_geom_of(TG__UPSAMPLE_LINEAR, &c, os, &g);
    return lin_run(&lin_forward_kernels, &c, &g, in[0], c.ndim, os, false, out);
}

/* The gradient of upsample_linear: upsample_linear_backward(g), told x's
 * shape. */
static int uplin_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    const tg_meta *xm = tg__ctx_input_meta(ctx, 0);
    tg__pool_call b = *(const tg__pool_call *)tg__ctx_params(ctx);
    b.ndim = xm->ndim;
    memcpy(b.shape, xm->shape, sizeof(int64_t) * (size_t)xm->ndim);
    tg_tensor *in[1] = {g};
    return tg_op_call(&uplin_backward_op, &gi[0], 1, in, &b, sizeof b);
}

/* dx = A^T g in the compute dtype, rounded once into g's dtype. */
static int uplin_bw_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                            const void *params)
{
    (void)ctx, (void)n;
    const char *op = "upsample_linear_backward";
    tg__pool_call c = *(const tg__pool_call *)params;
    tg_tensor *g = in[0];
    int64_t os[TG_MAX_DIMS];
    TG_TRY(tg__pool_prepare(op, TG__UPSAMPLE_LINEAR, g ? g->dtype : TG_F64, &c, os));
    TG_TRY(tg__pool_check_grad(op, g, &c, os));
    tg__pool_geom geo;
    tg__pool_geom_of(TG__UPSAMPLE_LINEAR, &c, os, &geo);
    return lin_run(&lin_adjoint_kernels, &c, &geo, g, c.ndim, c.shape, true, out);
}

/* The gradient of upsample_linear_backward: upsample_linear. */
static int uplin_bw_backward(tg_ctx *ctx, tg_tensor *h, tg_tensor **gi)
{
    tg_tensor *in[1] = {h};
    return tg_op_call(&uplin_op, &gi[0], 1, in, tg__ctx_params(ctx), sizeof(tg__pool_call));
}

static const tg_op_schema uplin_op = {
    .name = "upsample_linear", .arity = 1, .amp = TG_AMP_KEEP, .forward = uplin_forward,
    .backward = uplin_backward, .shape = uplin_shape, .double_backward = true};
static const tg_op_schema uplin_backward_op = {
    .name = "upsample_linear_backward", .arity = 1, .amp = TG_AMP_KEEP,
    .forward = uplin_bw_forward, .backward = uplin_bw_backward, .double_backward = true};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__upsample_linear_ops[] = {&uplin_op, &uplin_backward_op};
static_assert(sizeof tg__upsample_linear_ops / sizeof tg__upsample_linear_ops[0] ==
                  TG__upsample_linear_N,
              "src/ops/families.h must count the upsample_linear ops");

int tg_upsample_linear(tg_tensor **out, tg_tensor *x, int n_spatial, const int64_t *size,
                       bool align_corners)
{
    const char *op = tg__pool_opname(TG__UPSAMPLE_LINEAR, n_spatial);
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", op);
    TG_CHECK(x != NULL, TG_EINVAL, "%s: x must not be NULL", op);
    TG_TRY(tg__upsample_check_size(op, n_spatial, size));
    tg__pool_call c = {.ns = n_spatial, .align_corners = align_corners};
    memcpy(c.size, size, (size_t)n_spatial * sizeof *size);
    tg_tensor *in[1] = {x};
    return tg_op_call(&uplin_op, out, 1, in, &c, sizeof c);
}
