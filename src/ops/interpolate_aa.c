/* src/ops/interpolate_aa.c - F.interpolate(mode='bilinear' | 'bicubic',
 * antialias=True): upsample_bilinear2d_aa(x, size, align_corners),
 * upsample_bicubic2d_aa(...), and their adjoints, the _backward ops.
 *
 * Along each of the two spatial axes (input extent I, output extent O) the
 * filter is stretched by the scale when it shrinks (PyTorch's
 * _compute_indices_weights_aa, computed in the compute dtype):
 *   scale   = align_corners ? (I-1)/(O-1) (0 when O = 1) : I/O
 *   support = n/2 * max(scale, 1)      (n = 2 bilinear, 4 bicubic)
 *   centre  = scale * (o + 1/2)
 *   output o reads x[i] for i in [lo, hi):
 *     lo = max(trunc(centre - support + 1/2), 0),
 *     hi = min(trunc(centre + support + 1/2), I),
 *   with weight f((i + 1/2 - centre) / max(scale, 1)), the weights of o
 *   divided by their sum (when it is not 0).
 * f is the triangle max(0, 1 - |d|) or Keys's cubic with a = -0.5 (not the
 * -0.75 of plain bicubic).  align_corners changes the scale only: the
 * centres stay at half pixels.  When O > I the triangle's taps are plain
 * bilinear's (align_corners off), the cubic's are not.
 *
 * An axis whose extent does not change is left as it is, and the two axes
 * are filtered one after the other, the last (width) first into a buffer
 * of I_H x O_W, each output's terms added in index order, as torch's
 * separable CPU kernel.  So y = A_H X A_W^T, and the gradient is
 * A_H^T G A_W: the height pass's transpose first, then the width's.  That
 * op is linear too, with gradient the forward op: derivatives of any order
 * are these two ops. */
#include <assert.h>
#include <math.h>
#include <string.h>

#include "autograd/tape.h"
#include "ops/families.h"
#include "ops/pool_internal.h"
#include "tapegrad/pool.h"

/* One axis's table: output o reads n[o] inputs from lo[o] with weights
 * w[o*taps ..] (compute dtype); same: the extent does not change (no pass). */
typedef struct aa_axis {
    int64_t *lo, *n;
    void *w;
    int64_t taps;
    bool same;
} aa_axis;

/* A kernel's job: tg__pool_run's (src, dst), the tables of the height (0)
 * and width (1) axes, and tmp, I_H x O_W elements per plane in the
 * compute dtype. */
typedef struct aa_job {
    tg__pool_job pj;
    aa_axis ax[2];
    void *tmp;
} aa_job;

/* The taps per output: hi - lo <= 2 ceil(support) + 1, with a margin for
 * the support's rounding in f32. */
static int64_t aa_taps(int64_t in, int64_t out, bool align, bool cubic)
{
    const double scale = align ? (out > 1 ? (double)(in - 1) / (double)(out - 1) : 0.0)
                               : (double)in / (double)out;
    const double support = (cubic ? 2.0 : 1.0) * (scale >= 1 ? scale : 1.0);
    return (int64_t)ceil(support) * 2 + 3;
}

/* AA_TABLE(T, S): aa_table_S fills axis t (taps set) for extents in, out
 * in compute type T. */
#define AA_TABLE(T, S)                                                                     \
    static T aa_filter_##S(T d, bool cubic)                                                \
    {                                                                                      \
        const T a = (T)-0.5;                                                               \
        d = d < 0 ? -d : d;                                                                \
        if (!cubic) return d < 1 ? (T)1 - d : (T)0;                                        \
        if (d < 1) return ((a + 2) * d - (a + 3)) * d * d + 1;                             \
        if (d < 2) return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a;                       \
        return 0;                                                                          \
    }                                                                                      \
    static void aa_table_##S(aa_axis *t, int64_t in, int64_t out, bool align, bool cubic)  \
    {                                                                                      \
        const T scale = align ? (out > 1 ? (T)(in - 1) / (T)(out - 1) : (T)0)              \
                              : (T)in / (T)out;                                            \
        const T half = (T)(cubic ? 2 : 1);                                                 \
        const T support = scale >= 1 ? half * scale : half;                                \
        const T inv = scale >= 1 ? (T)1 / scale : (T)1;                                    \
        T *w = t->w;                                                                       \
        for (int64_t o = 0; o < out; o++, w += t->taps) {                                  \
            const T c = scale * ((T)o + (T)0.5);                                           \
            const int64_t lo = (int64_t)(c - support + (T)0.5);                            \
            const int64_t hi = (int64_t)(c + support + (T)0.5);                            \
            t->lo[o] = lo > 0 ? lo : 0;                                                    \
            t->n[o] = (hi < in ? hi : in) - t->lo[o];                                      \
            TG_ASSERT(t->n[o] >= 1 && t->n[o] <= t->taps);                                 \
            T sum = 0;                                                                     \
            for (int64_t j = 0; j < t->n[o]; j++) {                                        \
                w[j] = aa_filter_##S(((T)j + (T)t->lo[o] - c + (T)0.5) * inv, cubic);      \
                sum += w[j];                                                               \
            }                                                                              \
            for (int64_t j = 0; j < t->n[o] && sum != 0; j++) w[j] /= sum;                 \
        }                                                                                  \
    }

/* AA_KERNELS(T, S): the forward and adjoint kernels in compute type T.
 * rows(dst, src, R, I, O, t): dst (R x O) = src (R x I) A^T along rows;
 * cols(dst, src, I, O, C, t): dst (O x C) = A src (I x C) along columns;
 * their transposes add into dst. */
#define AA_KERNELS(T, S)                                                                   \
    static void aa_rows_##S(T *dst, const T *src, int64_t R, int64_t I, int64_t O,         \
                            const aa_axis *t)                                              \
    {                                                                                      \
        for (int64_t r = 0; r < R; r++, src += I, dst += O) {                              \
            const T *w = t->w;                                                             \
            for (int64_t o = 0; o < O; o++, w += t->taps) {                                \
                const T *x = src + t->lo[o];                                               \
                T v = x[0] * w[0];                                                         \
                for (int64_t j = 1; j < t->n[o]; j++) v += x[j] * w[j];                    \
                dst[o] = v;                                                                \
            }                                                                              \
        }                                                                                  \
    }                                                                                      \
    static void aa_cols_##S(T *dst, const T *src, int64_t O, int64_t C, const aa_axis *t)  \
    {                                                                                      \
        const T *w = t->w;                                                                 \
        for (int64_t o = 0; o < O; o++, w += t->taps, dst += C) {                          \
            const T *x = src + t->lo[o] * C;                                               \
            for (int64_t c = 0; c < C; c++) dst[c] = x[c] * w[0];                          \
            for (int64_t j = 1; j < t->n[o]; j++)                                          \
                for (int64_t c = 0; c < C; c++) dst[c] += x[j * C + c] * w[j];             \
        }                                                                                  \
    }                                                                                      \
    /* dst (R x I) += src (R x O) A, row by row */                                         \
    static void aa_rows_t_##S(T *dst, const T *src, int64_t R, int64_t I, int64_t O,       \
                              const aa_axis *t)                                            \
    {                                                                                      \
        for (int64_t r = 0; r < R; r++, src += O, dst += I) {                              \
            const T *w = t->w;                                                             \
            for (int64_t o = 0; o < O; o++, w += t->taps)                                  \
                for (int64_t j = 0; j < t->n[o]; j++) dst[t->lo[o] + j] += w[j] * src[o];  \
        }                                                                                  \
    }                                                                                      \
    /* dst (I x C) += A^T src (O x C) */                                                   \
    static void aa_cols_t_##S(T *dst, const T *src, int64_t O, int64_t C, const aa_axis *t) \
    {                                                                                      \
        const T *w = t->w;                                                                 \
        for (int64_t o = 0; o < O; o++, w += t->taps, src += C)                            \
            for (int64_t j = 0; j < t->n[o]; j++) {                                        \
                T *d = dst + (t->lo[o] + j) * C;                                           \
                for (int64_t c = 0; c < C; c++) d[c] += w[j] * src[c];                     \
            }                                                                              \
    }                                                                                      \
    /* Planes [lo, hi): y = A_H (x A_W^T), a pass skipped for an unchanged    \
     * extent. */                                                              \
    static void aa_forward_##S(void *p, int64_t lo, int64_t hi)                            \
    {                                                                                      \
        const aa_job *j = p;                                                               \
        const tg__pool_geom *g = j->pj.g;                                                  \
        const int64_t IH = g->in[1], IW = g->in[2], OH = g->out[1], OW = g->out[2];        \
        for (int64_t pl = lo; pl < hi; pl++) {                                             \
            const T *x = (const T *)j->pj.src + pl * g->in_plane;                          \
            T *y = (T *)j->pj.dst + pl * g->out_plane;                                     \
            T *tmp = (T *)j->tmp + pl * IH * OW;                                           \
            const T *mid = x;                                                              \
            if (!j->ax[1].same) {                                                          \
                mid = j->ax[0].same ? y : tmp;                                             \
                aa_rows_##S((T *)mid, x, IH, IW, OW, &j->ax[1]);                           \
            }                                                                              \
            if (!j->ax[0].same) aa_cols_##S(y, mid, OH, OW, &j->ax[0]);                    \
            else if (mid == x) memcpy(y, x, (size_t)(IH * IW) * sizeof(T));                \
        }                                                                                  \
    }                                                                                      \
    /* Planes [lo, hi): dx (zeroed) += (A_H^T g) A_W. */                                   \
    static void aa_adjoint_##S(void *p, int64_t lo, int64_t hi)                            \
    {                                                                                      \
        const aa_job *j = p;                                                               \
        const tg__pool_geom *g = j->pj.g;                                                  \
        const int64_t IH = g->in[1], IW = g->in[2], OH = g->out[1], OW = g->out[2];        \
        for (int64_t pl = lo; pl < hi; pl++) {                                             \
            const T *gp = (const T *)j->pj.src + pl * g->out_plane;                        \
            T *dx = (T *)j->pj.dst + pl * g->in_plane;                                     \
            T *tmp = (T *)j->tmp + pl * IH * OW;                                           \
            const T *mid = gp;                                                             \
            if (!j->ax[0].same) {                                                          \
                T *m = j->ax[1].same ? dx : tmp;                                           \
                if (m == tmp) memset(tmp, 0, (size_t)(IH * OW) * sizeof(T));               \
                aa_cols_t_##S(m, gp, OH, OW, &j->ax[0]);                                   \
                mid = m;                                                                   \
            }                                                                              \
            if (!j->ax[1].same) aa_rows_t_##S(dx, mid, IH, IW, OW, &j->ax[1]);             \
            else if (mid == gp)                                                            \
                for (int64_t e = 0; e < IH * IW; e++) dx[e] += gp[e];                      \
        }                                                                                  \
    }

AA_TABLE(float, f32)
AA_TABLE(double, f64)
AA_KERNELS(float, f32)
AA_KERNELS(double, f64)
#undef AA_KERNELS
#undef AA_TABLE

static const tg__pool_kernels aa_forward_kernels = {.f32 = aa_forward_f32, .f64 = aa_forward_f64};
static const tg__pool_kernels aa_adjoint_kernels = {.f32 = aa_adjoint_f32, .f64 = aa_adjoint_f64};

/* The bytes of one axis's table (lo and n, then the weights), rounded up to
 * 16 so that the next table's int64 lo (and the pass buffer) stays aligned
 * after an odd number of f32 weights; 0 on overflow. */
static size_t aa_table_bytes(int64_t out, int64_t taps, size_t es)
{
    size_t w, b;
    if (__builtin_mul_overflow((size_t)out, (size_t)taps * es, &w) ||
        __builtin_add_overflow(w, (size_t)out * 2 * sizeof(int64_t) + 15, &b))
        return 0;
    return b / 16 * 16;
}

/* The tables of geometry g and the pass buffer for compute dtype cdt into
 * j, in one returned block (NULL: out of memory). */
static void *aa_tables(aa_job *j, const tg__pool_geom *g, bool cubic, bool align, tg_dtype cdt)
{
    const size_t es = tg_dtype_size(cdt);
    /* the buffer, planes x I_H x O_W, may be larger than x and y */
    size_t bytes = 0, n;
    if (__builtin_mul_overflow((size_t)g->planes, (size_t)g->in[1], &n) ||
        __builtin_mul_overflow(n, (size_t)g->out[2] * es, &bytes))
        return NULL;
    for (int a = 0; a < 2; a++) {
        aa_axis *t = &j->ax[a];
        const int64_t in = g->in[1 + a], out = g->out[1 + a];
        t->same = in == out;
        t->taps = aa_taps(in, out, align, cubic);
        const size_t tb = aa_table_bytes(out, t->taps, es);
        if (tb == 0 || __builtin_add_overflow(bytes, tb, &bytes)) return NULL;
    }
    char *mem = tg__malloc(bytes > 0 ? bytes : 1);
    if (!mem) return NULL;
    char *p = mem;
    for (int a = 0; a < 2; a++) {
        aa_axis *t = &j->ax[a];
        const int64_t out = g->out[1 + a];
        t->lo = (int64_t *)p;
        t->n = t->lo + out;
        t->w = p + (size_t)out * 2 * sizeof(int64_t);
        p += aa_table_bytes(out, t->taps, es);
        if (cdt == TG_F64) aa_table_f64(t, g->in[1 + a], out, align, cubic);
        else aa_table_f32(t, g->in[1 + a], out, align, cubic);
    }
    j->tmp = p;
    return mem;
}

static const tg_op_schema bilin_aa_op, bilin_aa_backward_op, bicub_aa_op, bicub_aa_backward_op;

/* The op's name, for the messages. */
static const char *aa_name(bool cubic, bool backward)
{
    return cubic ? (backward ? bicub_aa_backward_op : bicub_aa_op).name
                 : (backward ? bilin_aa_backward_op : bilin_aa_op).name;
}

/* Runs the forward (adjoint false) or adjoint kernels of call c (its
 * geometry g) on src into *out of shape (ndim, shape). */
static int aa_run(bool adjoint, const tg__pool_call *c, const tg__pool_geom *g,
                  const tg_tensor *src, int ndim, const int64_t *shape, tg_tensor **out)
{
    const tg_dtype cdt = tg__compute_dtype(src->dtype);
    aa_job j = {.pj = {.g = g}};
    void *mem = aa_tables(&j, g, c->cubic, c->align_corners, cdt);
    TG_CHECK(mem != NULL, TG_ENOMEM,
             "%s: no memory for the filter tables and the first pass's %lld x %lld x %lld "
             "elements", aa_name(c->cubic, adjoint), (long long)g->planes, (long long)g->in[1],
             (long long)g->out[2]);
    const int rc = tg__pool_run(adjoint ? &aa_adjoint_kernels : &aa_forward_kernels, &j.pj, cdt,
                                src, ndim, shape, adjoint, out);
    free(mem);
    return rc;
}

/* ---- the ops ---- */

/* The checked call of params on x: c and the output shape os. */
static int aa_prepare_x(const void *params, const tg_tensor *x, tg__pool_call *c, int64_t *os)
{
    *c = *(const tg__pool_call *)params;
    const char *op = aa_name(c->cubic, false);
    TG_CHECK(x != NULL, TG_EINVAL, "%s: x must not be NULL", op);
    c->ndim = x->ndim;
    memcpy(c->shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
    return tg__pool_prepare(op, TG__UPSAMPLE_CUBIC, x->dtype, c, os);
}

static int aa_shape(int n, tg_tensor *const *in, const void *params, tg_dtype *dtype, int *ndim,
                    int64_t *shape)
{
    (void)n;
    tg__pool_call c;
    TG_TRY(aa_prepare_x(params, in[0], &c, shape));
    *dtype = in[0]->dtype;
    *ndim = c.ndim;
    return TG_OK;
}

/* y = A_H x A_W^T in the compute dtype, rounded once into x's dtype. */
static int aa_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                      const void *params)
{
    (void)ctx, (void)n;
    tg__pool_call c;
    int64_t os[TG_MAX_DIMS];
    TG_TRY(aa_prepare_x(params, in[0], &c, os));
    tg__pool_geom g;
    tg__pool_geom_of(TG__UPSAMPLE_CUBIC, &c, os, &g);
    return aa_run(false, &c, &g, in[0], c.ndim, os, out);
}

/* The gradient of a forward op: its backward op on g, told x's shape. */
static int aa_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    const tg_meta *xm = tg__ctx_input_meta(ctx, 0);
    tg__pool_call b = *(const tg__pool_call *)tg__ctx_params(ctx);
    b.ndim = xm->ndim;
    memcpy(b.shape, xm->shape, sizeof(int64_t) * (size_t)xm->ndim);
    tg_tensor *in[1] = {g};
    return tg_op_call(b.cubic ? &bicub_aa_backward_op : &bilin_aa_backward_op, &gi[0], 1, in, &b,
                      sizeof b);
}

/* dx = A_H^T g A_W in the compute dtype, rounded once into g's dtype. */
static int aa_adjoint(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                      const void *params)
{
    (void)ctx, (void)n;
    tg__pool_call c = *(const tg__pool_call *)params;
    const char *op = aa_name(c.cubic, true);
    tg_tensor *g = in[0];
    int64_t os[TG_MAX_DIMS];
    TG_TRY(tg__pool_prepare(op, TG__UPSAMPLE_CUBIC, g ? g->dtype : TG_F64, &c, os));
    TG_TRY(tg__pool_check_grad(op, g, &c, os));
    tg__pool_geom geo;
    tg__pool_geom_of(TG__UPSAMPLE_CUBIC, &c, os, &geo);
    return aa_run(true, &c, &geo, g, c.ndim, c.shape, out);
}

/* The gradient of a backward op: the forward op on h, same size. */
static int aa_adjoint_backward(tg_ctx *ctx, tg_tensor *h, tg_tensor **gi)
{
    const tg__pool_call *c = tg__ctx_params(ctx);
    tg_tensor *in[1] = {h};
    return tg_op_call(c->cubic ? &bicub_aa_op : &bilin_aa_op, &gi[0], 1, in, c, sizeof *c);
}

static const tg_op_schema bilin_aa_op = {
    .name = "upsample_bilinear2d_aa", .arity = 1, .amp = TG_AMP_KEEP, .forward = aa_forward,
    .backward = aa_backward, .shape = aa_shape, .double_backward = true,
    .vjp = "da = upsample_bilinear2d_aa_backward(g): each g element added into the inputs its "
           "filter read, times their weights"};
static const tg_op_schema bilin_aa_backward_op = {
    .name = "upsample_bilinear2d_aa_backward", .arity = 1, .amp = TG_AMP_KEEP,
    .forward = aa_adjoint, .backward = aa_adjoint_backward, .double_backward = true,
    .vjp = "dg = upsample_bilinear2d_aa(g'), same size"};
static const tg_op_schema bicub_aa_op = {
    .name = "upsample_bicubic2d_aa", .arity = 1, .amp = TG_AMP_KEEP, .forward = aa_forward,
    .backward = aa_backward, .shape = aa_shape, .double_backward = true,
    .vjp = "da = upsample_bicubic2d_aa_backward(g): each g element added into the inputs its "
           "filter read, times their weights"};
static const tg_op_schema bicub_aa_backward_op = {
    .name = "upsample_bicubic2d_aa_backward", .arity = 1, .amp = TG_AMP_KEEP,
    .forward = aa_adjoint, .backward = aa_adjoint_backward, .double_backward = true,
    .vjp = "dg = upsample_bicubic2d_aa(g'), same size"};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__interpolate_aa_ops[] = {&bilin_aa_op, &bilin_aa_backward_op,
                                                      &bicub_aa_op, &bicub_aa_backward_op};
static_assert(sizeof tg__interpolate_aa_ops / sizeof tg__interpolate_aa_ops[0] ==
                  TG__interpolate_aa_N,
              "src/ops/families.h must count the interpolate_aa ops");

const char *tg__upsample_aa_opname(bool cubic) { return aa_name(cubic, false); }

int tg__upsample_check_aa_mode(const char *fn, tg_upsample_mode mode)
{
    TG_CHECK(mode == TG_UPSAMPLE_LINEAR || mode == TG_UPSAMPLE_BICUBIC, TG_EINVAL,
             "%s: mode=%d; antialias is only for bilinear (TG_UPSAMPLE_LINEAR) and bicubic "
             "(TG_UPSAMPLE_BICUBIC) interpolation", fn, (int)mode);
    return TG_OK;
}

int tg_upsample_antialias(tg_tensor **out, tg_tensor *x, tg_upsample_mode mode,
                          const int64_t *size, bool align_corners)
{
    TG_TRY(tg__upsample_check_aa_mode("upsample_antialias", mode));
    const bool cubic = mode == TG_UPSAMPLE_BICUBIC;
    const char *op = aa_name(cubic, false);
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", op);
    TG_CHECK(x != NULL, TG_EINVAL, "%s: x must not be NULL", op);
    TG_TRY(tg__upsample_check_size(op, 2, size));
    tg__pool_call c = {.ns = 2, .align_corners = align_corners, .cubic = cubic};
    memcpy(c.size, size, 2 * sizeof *size);
    tg_tensor *in[1] = {x};
    return tg_op_call(cubic ? &bicub_aa_op : &bilin_aa_op, out, 1, in, &c, sizeof c);
}
