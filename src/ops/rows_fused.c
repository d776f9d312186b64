/* src/ops/rows_fused.c - the row passes of fused inference paths
 * (src/ops/rows_fused_internal.h).  A Linear followed by its element-wise
 * steps, done op by op, writes its bias into every row of the output, runs
 * a GEMM that adds into it, then each later step (activation, residual
 * add, LayerNorm) reads the whole activation and writes a new one.  Here
 * the GEMM writes its rows (beta 0) and one pass per row does the rest
 * while the row is in cache:
 *   y = act(x W^T + b)                                   tg__linear_act_into
 *   s = res + (h + b),  ln = layer_norm(s)               tg__add_norm_rows_run
 * Each element takes the ops' steps in the dtype: h + b rounded (the op by
 * op path adds the GEMM's products onto the bias, so the two may differ in
 * the last bit), then + res rounded as tg_add's, then relu (a < 0 ? 0 : a:
 * NaN and -0.0 stay) or gelu (tg_gelu's kernels, in double, rounded once).  The
 * LayerNorm is layer_norm.c's: the row's mean and biased variance in double
 * with four interleaved accumulators (tg__bn_stats's order), invstd =
 * 1 / sqrt(var + eps), y = (s - mean) (invstd w) + b in the dtype, so its
 * bits are the op's for the same s.  Rows go to the thread pool in
 * contiguous ranges; every range writes its own rows. */
#include <limits.h>
#include <math.h>

#include "core/core.h"
#include "ops/activation_internal.h"
#include "ops/rows_fused_internal.h"
#include "ops/unary_simd_internal.h"

/* gelu of a row in place with tg_gelu's kernels: f32 in vector registers
 * (src/ops/unary_simd.c), f64 by tg__gelu_d. */
static void gelu_row_f32(float *y, int64_t n)
{
    tg__unary_simd_f32(TG__USIMD_GELU, y, y, NULL, n, tg__exp_width_get());
}

static void gelu_row_f64(double *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++) y[i] = tg__gelu_d(y[i]);
}

/* Passes of fewer elements stay on the calling thread (the element-wise
 * ops' threshold). */
enum { PAR_MIN = 32768 };

static void *data_of(const tg_tensor *t)
{
    return t ? (char *)t->storage->data + t->offset * (int64_t)tg_dtype_size(t->dtype) : NULL;
}

typedef struct act_job {
    void *y;
    const void *b;
    int64_t n;
    tg_activation act;
} act_job;

typedef struct norm_job {
    void *h, *sum, *ln;
    const void *bias, *res, *w, *lb;
    int64_t n;
    double eps;
} norm_job;

/* ROWS_KERNELS(T, SUF) defines, for element type T:
 *   act_rows_SUF(job, r0, r1): rows [r0, r1) of act_job, in place;
 *   norm_rows_SUF(job, r0, r1): rows [r0, r1) of norm_job.
 * Instantiated as act_rows_f32, norm_rows_f32, act_rows_f64 and
 * norm_rows_f64. */
#define ROWS_KERNELS(T, SUF)                                                                    \
    static void act_rows_##SUF(void *job, int64_t r0, int64_t r1)                               \
    {                                                                                           \
        const act_job *q = job;                                                                 \
        const T *b = q->b;                                                                      \
        for (int64_t r = r0; r < r1; r++) {                                                     \
            T *y = (T *)q->y + r * q->n;                                                        \
            if (b)                                                                              \
                for (int64_t i = 0; i < q->n; i++) y[i] = y[i] + b[i];                          \
            if (q->act == TG_ACT_RELU)                                                          \
                for (int64_t i = 0; i < q->n; i++) y[i] = y[i] < 0 ? (T)0 : y[i];               \
            else if (q->act == TG_ACT_GELU)                                                     \
                gelu_row_##SUF(y, q->n);                                                        \
        }                                                                                       \
    }                                                                                           \
                                                                                                \
    /* sum over i of (p[i] - m)^2 (sq) or of p[i] - m: acc[i mod 4] in double, */               \
    /* (acc0 + acc1) + (acc2 + acc3), as tg__bn_stats's bn_sum */                               \
    static double row_sum_##SUF(const T *p, int64_t n, double m, bool sq)                       \
    {                                                                                           \
        double acc[4] = {0, 0, 0, 0};                                                           \
        int64_t i = 0;                                                                          \
        for (; i + 4 <= n; i += 4)                                                              \
            for (int l = 0; l < 4; l++) {                                                       \
                const double v = (double)p[i + l] - m;                                          \
                acc[l] += sq ? v * v : v;                                                       \
            }                                                                                   \
        for (; i < n; i++) {                                                                    \
            const double v = (double)p[i] - m;                                                  \
            acc[i & 3] += sq ? v * v : v;                                                       \
        }                                                                                       \
        return (acc[0] + acc[1]) + (acc[2] + acc[3]);                                           \
    }                                                                                           \
                                                                                                \
    static void norm_rows_##SUF(void *job, int64_t r0, int64_t r1)                              \
    {                                                                                           \
        const norm_job *q = job;                                                                \
        const int64_t n = q->n;                                                                 \
        const T *bias = q->bias, *w = q->w, *lb = q->lb;                                        \
        for (int64_t r = r0; r < r1; r++) {                                                     \
            T *h = (T *)q->h + r * n;                                                           \
            const T *res = q->res ? (const T *)q->res + r * n : NULL;                           \
            /* s where a later step reads it: sum; h itself when nothing is added */            \
            T *s = q->sum ? (T *)q->sum + r * n                                                 \
                   : !bias && !res ? h : q->ln ? (T *)q->ln + r * n : h;                        \
            if (bias && res)                                                                    \
                for (int64_t i = 0; i < n; i++) s[i] = res[i] + (h[i] + bias[i]);               \
            else if (bias)                                                                      \
                for (int64_t i = 0; i < n; i++) s[i] = h[i] + bias[i];                          \
            else if (res)                                                                       \
                for (int64_t i = 0; i < n; i++) s[i] = res[i] + h[i];                           \
            else if (s != h)                                                                    \
                for (int64_t i = 0; i < n; i++) s[i] = h[i];                                    \
            if (!q->ln) continue;                                                               \
            const double mean = row_sum_##SUF(s, n, 0.0, false) / (double)n;                    \
            const double var = row_sum_##SUF(s, n, mean, true) / (double)n;                     \
            const T mu = (T)mean, inv = (T)(1.0 / sqrt(var + q->eps));                          \
            T *o = (T *)q->ln + r * n;                                                          \
            if (w && lb)                                                                        \
                for (int64_t i = 0; i < n; i++) o[i] = (s[i] - mu) * (inv * w[i]) + lb[i];      \
            else                                                                                \
                for (int64_t i = 0; i < n; i++)                                                 \
                    o[i] = (s[i] - mu) * (w ? inv * w[i] : inv) + (lb ? lb[i] : (T)0);          \
        }                                                                                       \
    }

ROWS_KERNELS(float, f32)
ROWS_KERNELS(double, f64)

int tg__linear_act_into(tg_tensor *y, const tg_tensor *x, const tg_tensor *w,
                        const tg_tensor *b, tg_activation act)
{
    const tg_dtype dt = y->dtype;
    const int64_t rows = x->shape[0], in = x->shape[1], out = w->shape[0];
    TG_ASSERT((dt == TG_F32 || dt == TG_F64) && x->dtype == dt && w->dtype == dt);
    TG_ASSERT(x->ndim == 2 && w->ndim == 2 && w->shape[1] == in && y->shape[0] == rows &&
              y->shape[1] == out && (!b || (b->dtype == dt && b->shape[0] == out)));
    TG_ASSERT(act == TG_ACT_NONE || act == TG_ACT_RELU || act == TG_ACT_GELU);
    TG_CHECK(rows <= INT_MAX && in <= INT_MAX && out <= INT_MAX, TG_EUNSUPPORTED,
             "linear: extents above INT_MAX are not supported by BLAS");
    if (rows == 0 || out == 0) return TG_OK;
    /* y (rows, out) = x (rows, in) @ w^T, w stored (out, in) */
    tg__gemm(dt, false, true, rows, out, in, data_of(x), in > 1 ? in : 1, data_of(w),
             in > 1 ? in : 1, 0.0, data_of(y), out);
    if (!b && act == TG_ACT_NONE) return TG_OK;
    act_job q = {.y = data_of(y), .b = data_of(b), .n = out, .act = act};
    tg__parallel_range(rows, rows * out > PAR_MIN, dt == TG_F64 ? act_rows_f64 : act_rows_f32,
                       &q);
    return TG_OK;
}

void tg__add_norm_rows_run(const tg__add_norm_rows *a)
{
    const tg_tensor *h = a->h;
    const tg_dtype dt = h->dtype;
    TG_ASSERT((dt == TG_F32 || dt == TG_F64) && h->ndim == 2);
    const int64_t rows = h->shape[0], n = h->shape[1];
    const tg_tensor *all[6] = {a->bias, a->res, a->sum, a->weight, a->ln_bias, a->ln};
    for (int i = 0; i < 6; i++) TG_ASSERT(!all[i] || all[i]->dtype == dt);
    if (rows == 0 || n == 0) return;
    norm_job q = {.h = data_of(h), .sum = data_of(a->sum), .ln = data_of(a->ln),
                  .bias = data_of(a->bias), .res = data_of(a->res), .w = data_of(a->weight),
                  .lb = data_of(a->ln_bias), .n = n, .eps = a->eps};
    tg__parallel_range(rows, rows * n > PAR_MIN, dt == TG_F64 ? norm_rows_f64 : norm_rows_f32,
                       &q);
}
