/* src/ops/softmax_rows.c - softmax, log_softmax and log_softmax's backward
 * of one contiguous f32 row, in double with a vectorized exp, rounded once
 * to f32 (src/ops/softmax_rows_internal.h).  softmax's and log_softmax's
 * kernels (src/ops/softmax.c) and the fused attention
 * (src/ops/attention_fast.c) take them for f32 rows; f64 rows keep libm's
 * exp.
 *
 * A row's arithmetic is softmax.c's: m the row's maximum, e_c = exp(x_c -
 * m) in double, s their sum, y_c = e_c / s or (x_c - m) - log(s).  Three
 * things differ, in double's last bits only: the exp below (relative error
 * under 2.3e-16), s summed in eight partial sums, and e_c times 1 / s for
 * e_c / s; the rounding to f32's 24 bits rarely lets them through.  A
 * NaN never becomes the maximum, but its exp is NaN and so is s: a row
 * holding a NaN or +inf, or of -inf only, is NaN throughout, as
 * softmax.c's. */
#include <math.h>
#include <string.h>

#include "core/core.h"
#include "ops/exp_simd.h"
#include "ops/softmax_rows_internal.h"

/* ---- exp in double, four or eight lanes at a time ---- */

/* e[i] = exp(e[i]) for i < n, each e[i] <= 0 (-inf: 0) or NaN (NaN), by
 * src/ops/exp_simd.h's exp (relative error under 2.3e-16); below -708,
 * where 2^k would be subnormal, 0: a probability under 1e-307, 0 in f32.
 * W lanes at a time; the last vector runs past n into e's padding
 * (TG__EXP_PAD), so every element takes the same operations and no scalar
 * store feeds a vector load.  Every width gives the same bits.
 * EXP_RUN(name, VD, VI, VU, FMA, TAB, attr) defines name(e, n), a function
 * of its own (called once a row), so that the width's target attribute
 * stays on it: exp_run_plain, exp_run_avx2, exp_run_avx512. */
#define EXP_RUN(name, VD, VI, VU, FMA, TAB, attr)                                         \
    attr static void name(double *e, int64_t n)                                           \
    {                                                                                     \
        for (int64_t i = 0; i < n; i += (int64_t)(sizeof(VD) / sizeof(double))) {        \
            VD t, y;                                                                      \
            memcpy(&t, e + i, sizeof t);                                                  \
            const VI tiny = t < -708.0;         /* all ones where true; false for NaN */  \
            const VD x = (VD)((VI)t & ~tiny);   /* 0 there, in the exp's range */          \
            TG__EXPV(VD, VU, FMA, TAB, x, y);                                             \
            t = (VD)((VI)y & ~tiny);                                                      \
            memcpy(e + i, &t, sizeof t);                                                  \
        }                                                                                 \
    }
EXP_RUN(exp_run_plain, tg__v4d, tg__v4i, tg__v4u, TG__FMA4, TG__TAB4, )
EXP_RUN(exp_run_avx2, tg__v4d, tg__v4i, tg__v4u, TG__FMA4X, TG__TAB4X, TG__SIMD_AVX2)
EXP_RUN(exp_run_avx512, tg__v8d, tg__v8i, tg__v8u, TG__FMA8, TG__TAB8, TG__SIMD_AVX512)

/* exp_run's e[i] = exp(e[i]) for i < n, and the sum of those in eight
 * partial sums (term i into sum i % 8, each in order: one vector's lanes
 * at eight lanes, two vectors' at four), added pairwise (sum8): the adds
 * of a separate pass over e, in the exp's loop, where its chain of adds
 * runs beside the exps instead of after them.  EXP_SUM(name, ...) as
 * EXP_RUN. */
#define EXP_SUM(name, VD, VI, VU, FMA, TAB, attr)                                         \
    attr static double name(double *e, int64_t n)                                         \
    {                                                                                     \
        enum { L = (int)(sizeof(VD) / sizeof(double)), H = 8 / L };                       \
        VD acc[H];                                                                        \
        memset(acc, 0, sizeof acc);                                                       \
        int64_t i = 0;                                                                    \
        for (; i + 8 <= n; i += 8)                                                        \
            for (int h = 0; h < H; h++) {                                                 \
                VD t, y;                                                                  \
                memcpy(&t, e + i + h * L, sizeof t);                                      \
                const VI tiny = t < -708.0;                                               \
                const VD x = (VD)((VI)t & ~tiny);                                         \
                TG__EXPV(VD, VU, FMA, TAB, x, y);                                         \
                t = (VD)((VI)y & ~tiny);                                                  \
                memcpy(e + i + h * L, &t, sizeof t);                                      \
                acc[h] += t;                                                              \
            }                                                                             \
        double a[8];                                                                      \
        memcpy(a, acc, sizeof a);                                                         \
        if (i < n) {                                                                      \
            name##_tail(e + i, n - i);                                                    \
            for (int l = 0; i < n; i++, l++) a[l] += e[i];                                \
        }                                                                                 \
        return sum8(a);                                                                   \
    }
#define exp_sum_plain_tail exp_run_plain
#define exp_sum_avx2_tail exp_run_avx2
#define exp_sum_avx512_tail exp_run_avx512

/* Eight partial sums added pairwise. */
static inline double sum8(const double *a)
{
    return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
}

EXP_SUM(exp_sum_plain, tg__v4d, tg__v4i, tg__v4u, TG__FMA4, TG__TAB4, )
EXP_SUM(exp_sum_avx2, tg__v4d, tg__v4i, tg__v4u, TG__FMA4X, TG__TAB4X, TG__SIMD_AVX2)
EXP_SUM(exp_sum_avx512, tg__v8d, tg__v8i, tg__v8u, TG__FMA8, TG__TAB8, TG__SIMD_AVX512)

/* ---- one row ---- */

/* The largest number of x (n >= 1), -inf when it holds none: sixteen
 * running maxima (a NaN never replaces one), merged at the end. */
typedef float rows_v16f __attribute__((vector_size(64)));
typedef int32_t rows_v16i __attribute__((vector_size(64)));

static inline __attribute__((always_inline)) float row_max(const float *x, int64_t n)
{
    rows_v16f mv;
    for (int l = 0; l < 16; l++) mv[l] = -INFINITY;
    int64_t c = 0;
    for (; c + 16 <= n; c += 16) {   /* running maximum l: x[c + l] > m[l] ? x[c + l] : m[l] */
        rows_v16f v;
        memcpy(&v, x + c, sizeof v);
        const rows_v16i gt = v > mv;
        mv = (rows_v16f)((gt & (rows_v16i)v) | (~gt & (rows_v16i)mv));
    }
    float m[16];
    memcpy(m, &mv, sizeof m);
    for (; c < n; c++) m[0] = x[c] > m[0] ? x[c] : m[0];
    float r = m[0];
    for (int l = 1; l < 16; l++) r = m[l] > r ? m[l] : r;
    return r;
}

/* e[c] = exp(x[c] - m) for c < n, the exp at width W; then their sum in
 * eight partial sums (one vector's lanes), added pairwise at the end. */
static inline __attribute__((always_inline)) double exp_shifted(const float *x, double m,
                                                                double *e, int64_t n, int W)
{
    for (int64_t c = 0; c < n; c++) e[c] = (double)x[c] - m;
    for (int c = 0; c < TG__EXP_PAD; c++) e[n + c] = 0.0;   /* the padding: defined values */
    if (W == TG__EXP_AVX512) return exp_sum_avx512(e, n);
    if (W == TG__EXP_AVX2) return exp_sum_avx2(e, n);
    return exp_sum_plain(e, n);
}

static inline __attribute__((always_inline)) void forward_row(const float *x, float *y,
                                                              int64_t n, bool log_, double *e,
                                                              int W)
{
    const double m = row_max(x, n);   /* -inf for a row of -inf: x - m is NaN */
    const double s = exp_shifted(x, m, e, n, W);
    if (log_) {
        const double ls = log(s);
        for (int64_t c = 0; c < n; c++) y[c] = (float)(((double)x[c] - m) - ls);
    } else {
        const double r = 1.0 / s;   /* within an ulp of double of e / s */
        for (int64_t c = 0; c < n; c++) y[c] = (float)(e[c] * r);
    }
}

/* dx = g - exp(x - m) (sum(g) / s), as softmax.c's
 * log_softmax_backward_slab, sum(g) in eight partial sums. */
static inline __attribute__((always_inline)) void log_backward_row(const float *x,
                                                                   const float *g, float *dx,
                                                                   int64_t n, double *e, int W)
{
    const double m = row_max(x, n);
    const double s = exp_shifted(x, m, e, n, W);
    double a[8] = {0.0};
    int64_t c = 0;
    for (; c + 8 <= n; c += 8)
        for (int l = 0; l < 8; l++) a[l] += g[c + l];
    for (int l = 0; c < n; c++, l++) a[l] += g[c];
    const double f = sum8(a) / s;
    for (c = 0; c < n; c++) dx[c] = (float)((double)g[c] - e[c] * f);
}

/* The row's maximum m and s = sum exp(x - m) of forward_row. */
static inline __attribute__((always_inline)) void stats_row(const float *x, int64_t n,
                                                            double *st, double *e, int W)
{
    st[0] = row_max(x, n);
    st[1] = exp_shifted(x, st[0], e, n, W);
}

/* log_backward_row for g zero but at class t (none for t < 0), g[t] = gt,
 * from the row's stats st (stats_row): sum(g) is 0 + gt as its partial
 * sums add it, and each dx is g - exp(x - m) (sum(g) / s) as there. */
static inline __attribute__((always_inline)) void pick_backward_row(const float *x, float *dx,
                                                                    int64_t n, const double *st,
                                                                    int64_t t, float gt,
                                                                    double *e, int W)
{
    const double m = st[0];
    for (int64_t c = 0; c < n; c++) e[c] = (double)x[c] - m;
    for (int c = 0; c < TG__EXP_PAD; c++) e[n + c] = 0.0;
    if (W == TG__EXP_AVX512) exp_run_avx512(e, n);
    else if (W == TG__EXP_AVX2) exp_run_avx2(e, n);
    else exp_run_plain(e, n);
    const double f = (0.0 + (double)gt) / st[1];
    for (int64_t c = 0; c < n; c++) dx[c] = (float)(0.0 - e[c] * f);
    if (t >= 0) dx[t] = (float)((double)gt - e[t] * f);
}

/* Rows shorter than SMALL_ROW go through the exp together, up to
 * TG__ROWS_BLOCK values at a time: a short row alone leaves the exp's long
 * chain of dependent steps waiting (each value still takes the same exp
 * and each row the same sums, so the bits are a row's alone). */
enum { SMALL_ROW = 256 };

/* e = exp(x - m) over `rows` rows of n values, m row r's maximum st[2r]:
 * one exp run of width W over the block (padded with zeros). */
static inline __attribute__((always_inline)) void exp_shifted_block(const float *x, int64_t rows,
                                                                    int64_t n, const double *st,
                                                                    double *e, int W)
{
    const int64_t k = rows * n;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < n; c++) e[r * n + c] = (double)x[r * n + c] - st[2 * r];
    for (int c = 0; c < TG__EXP_PAD; c++) e[k + c] = 0.0;
    if (W == TG__EXP_AVX512) exp_run_avx512(e, k);
    else if (W == TG__EXP_AVX2) exp_run_avx2(e, k);
    else exp_run_plain(e, k);
}

/* stats_row of `rows` rows of n values (rows n <= TG__ROWS_BLOCK),
 * contiguous: each row's maximum, then one exp run over every x - m, then
 * each row's eight partial sums as exp_shifted adds them. */
static inline __attribute__((always_inline)) void stats_block(const float *x, int64_t rows,
                                                              int64_t n, double *st, double *e,
                                                              int W)
{
    for (int64_t r = 0; r < rows; r++) st[2 * r] = row_max(x + r * n, n);
    exp_shifted_block(x, rows, n, st, e, W);
    for (int64_t r = 0; r < rows; r++) {
        const double *er = e + r * n;
        double a[8] = {0.0};
        int64_t i = 0;
        for (; i + 8 <= n; i += 8)
            for (int l = 0; l < 8; l++) a[l] += er[i + l];
        for (int l = 0; i < n; i++, l++) a[l] += er[i];
        st[2 * r + 1] = sum8(a);
    }
}

/* pick_backward_row of `rows` rows as stats_block takes them: t[r] and
 * gt[r] the class and gradient of row r. */
static inline __attribute__((always_inline)) void pick_block(const float *x, float *dx,
                                                             int64_t rows, int64_t n,
                                                             const double *st, const int64_t *t,
                                                             const float *gt, double *e, int W)
{
    exp_shifted_block(x, rows, n, st, e, W);
    for (int64_t r = 0; r < rows; r++) {
        const double f = (0.0 + (double)gt[r]) / st[2 * r + 1];
        const double *er = e + r * n;
        float *d = dx + r * n;
        for (int64_t c = 0; c < n; c++) d[c] = (float)(0.0 - er[c] * f);
        if (t[r] >= 0) d[t[r]] = (float)((double)gt[r] - er[t[r]] * f);
    }
}

/* forward_row of `rows` rows of n values as stats_block takes them. */
static inline __attribute__((always_inline)) void forward_block(const float *x, float *y,
                                                                int64_t rows, int64_t n,
                                                                bool log_, double *e, int W)
{
    double st[2 * TG__ROWS_BLOCK];
    stats_block(x, rows, n, st, e, W);
    for (int64_t r = 0; r < rows; r++) {
        const double m = st[2 * r], s = st[2 * r + 1];
        const float *xr = x + r * n;
        float *yr = y + r * n;
        if (log_) {
            const double ls = log(s);
            for (int64_t c = 0; c < n; c++) yr[c] = (float)(((double)xr[c] - m) - ls);
        } else {
            const double inv = 1.0 / s;
            const double *er = e + r * n;
            for (int64_t c = 0; c < n; c++) yr[c] = (float)(er[c] * inv);
        }
    }
}

static inline __attribute__((always_inline)) void forward_rows(const float *x, float *y,
                                                               int64_t rows, int64_t n,
                                                               bool log_, double *e, int W)
{
    if (n >= SMALL_ROW) {
        for (int64_t r = 0; r < rows; r++) forward_row(x + r * n, y + r * n, n, log_, e, W);
        return;
    }
    const int64_t per = TG__ROWS_BLOCK / n;
    for (int64_t r = 0; r < rows; r += per)
        forward_block(x + r * n, y + r * n, rows - r < per ? rows - r : per, n, log_, e, W);
}

/* The rows of stats_rows_f32 / pick_rows_f32: one at a time from
 * SMALL_ROW values on, else in blocks of TG__ROWS_BLOCK values. */
static inline __attribute__((always_inline)) void stats_rows(const float *x, int64_t rows,
                                                             int64_t n, double *st, double *e,
                                                             int W)
{
    if (n >= SMALL_ROW) {
        for (int64_t r = 0; r < rows; r++) stats_row(x + r * n, n, st + 2 * r, e, W);
        return;
    }
    const int64_t per = TG__ROWS_BLOCK / n;
    for (int64_t r = 0; r < rows; r += per)
        stats_block(x + r * n, rows - r < per ? rows - r : per, n, st + 2 * r, e, W);
}

static inline __attribute__((always_inline)) void pick_rows(const float *x, float *dx,
                                                            int64_t rows, int64_t n,
                                                            const double *st, const int64_t *t,
                                                            const float *gt, double *e, int W)
{
    if (n >= SMALL_ROW) {
        for (int64_t r = 0; r < rows; r++)
            pick_backward_row(x + r * n, dx + r * n, n, st + 2 * r, t[r], gt[r], e, W);
        return;
    }
    const int64_t per = TG__ROWS_BLOCK / n;
    for (int64_t r = 0; r < rows; r += per)
        pick_block(x + r * n, dx + r * n, rows - r < per ? rows - r : per, n, st + 2 * r,
                   t + r, gt + r, e, W);
}

#define ROWS_AVX2 TG__SIMD_AVX2
#define ROWS_AVX512 TG__SIMD_AVX512

/* The clones: plain (four lanes of SSE2 on x86-64), AVX2 with FMA,
 * AVX-512; W the width of their exp. */
static void forward_plain(const float *x, float *y, int64_t n, bool log_, double *e)
{
    forward_row(x, y, n, log_, e, TG__EXP_PLAIN);
}
ROWS_AVX2 static void forward_avx2(const float *x, float *y, int64_t n, bool log_, double *e)
{
    forward_row(x, y, n, log_, e, TG__EXP_AVX2);
}
ROWS_AVX512 static void forward_avx512(const float *x, float *y, int64_t n, bool log_,
                                       double *e)
{
    forward_row(x, y, n, log_, e, TG__EXP_AVX512);
}
/* e[c] = softmax(x)_c in double, not rounded: forward_row's steps. */
static inline __attribute__((always_inline)) void forward_row_f64(const float *x, int64_t n,
                                                                  double *e, int W)
{
    const double m = row_max(x, n);
    const double r = 1.0 / exp_shifted(x, m, e, n, W);
    for (int64_t c = 0; c < n; c++) e[c] *= r;
}
static void forward_f64_plain(const float *x, int64_t n, double *e)
{
    forward_row_f64(x, n, e, TG__EXP_PLAIN);
}
ROWS_AVX2 static void forward_f64_avx2(const float *x, int64_t n, double *e)
{
    forward_row_f64(x, n, e, TG__EXP_AVX2);
}
ROWS_AVX512 static void forward_f64_avx512(const float *x, int64_t n, double *e)
{
    forward_row_f64(x, n, e, TG__EXP_AVX512);
}
static void backward_plain(const float *x, const float *g, float *dx, int64_t n, double *e)
{
    log_backward_row(x, g, dx, n, e, TG__EXP_PLAIN);
}
ROWS_AVX2 static void backward_avx2(const float *x, const float *g, float *dx, int64_t n,
                                    double *e)
{
    log_backward_row(x, g, dx, n, e, TG__EXP_AVX2);
}
ROWS_AVX512 static void backward_avx512(const float *x, const float *g, float *dx, int64_t n,
                                        double *e)
{
    log_backward_row(x, g, dx, n, e, TG__EXP_AVX512);
}

#define ROWS_CLONES(sfx, attr, W)                                                          \
    attr static void stats_##sfx(const float *x, int64_t rows, int64_t n, double *st,       \
                                 double *e)                                                 \
    {                                                                                       \
        stats_rows(x, rows, n, st, e, W);                                                   \
    }                                                                                       \
    attr static void pick_##sfx(const float *x, float *dx, int64_t rows, int64_t n,         \
                                const double *st, const int64_t *t, const float *gt,        \
                                double *e)                                                  \
    {                                                                                       \
        pick_rows(x, dx, rows, n, st, t, gt, e, W);                                         \
    }
#define FORWARD_CLONE(sfx, attr, W)                                                         \
    attr static void forward_rows_##sfx(const float *x, float *y, int64_t rows, int64_t n,  \
                                        bool log_, double *e)                               \
    {                                                                                       \
        forward_rows(x, y, rows, n, log_, e, W);                                            \
    }
FORWARD_CLONE(plain, , TG__EXP_PLAIN)
FORWARD_CLONE(avx2, ROWS_AVX2, TG__EXP_AVX2)
FORWARD_CLONE(avx512, ROWS_AVX512, TG__EXP_AVX512)
ROWS_CLONES(plain, , TG__EXP_PLAIN)
ROWS_CLONES(avx2, ROWS_AVX2, TG__EXP_AVX2)
ROWS_CLONES(avx512, ROWS_AVX512, TG__EXP_AVX512)

/* ---- the width ---- */

static _Thread_local tg__exp_width forced;   /* tests: tg__exp_width_force */

void tg__exp_width_force(int width)
{
    forced = width >= TG__EXP_PLAIN && width <= TG__EXP_AVX512 ? (tg__exp_width)width
                                                               : TG__EXP_AUTO;
}

/* The AVX2 width fuses its multiply-adds: FMA too (every CPU with AVX2
 * and F16C known has it, but the instruction set does not promise it). */
static bool has_fma(void)
{
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    return __builtin_cpu_supports("fma");
#else
    return false;
#endif
}

tg__exp_width tg__exp_width_get(void)
{
    const tg__exp_width best = tg__cpu_has_avx512bw()                 ? TG__EXP_AVX512
                               : tg__cpu_has_half_simd() && has_fma() ? TG__EXP_AVX2
                                                                      : TG__EXP_PLAIN;
    return forced != TG__EXP_AUTO && forced <= best ? forced : best;
}

void tg__exp_f64_inplace(double *e, int64_t n, tg__exp_width w)
{
    if (n <= 0) return;
    if (w == TG__EXP_AVX512) exp_run_avx512(e, n);
    else if (w == TG__EXP_AVX2) exp_run_avx2(e, n);
    else exp_run_plain(e, n);
}

void tg__softmax_row_f32(const float *x, float *y, int64_t n, bool log_, double *e,
                         tg__exp_width w)
{
    if (n <= 0) return;
    if (w == TG__EXP_AVX512) forward_avx512(x, y, n, log_, e);
    else if (w == TG__EXP_AVX2) forward_avx2(x, y, n, log_, e);
    else forward_plain(x, y, n, log_, e);
}

void tg__softmax_row_f32_to_f64(const float *x, int64_t n, double *e, tg__exp_width w)
{
    if (n <= 0) return;
    if (w == TG__EXP_AVX512) forward_f64_avx512(x, n, e);
    else if (w == TG__EXP_AVX2) forward_f64_avx2(x, n, e);
    else forward_f64_plain(x, n, e);
}

void tg__log_softmax_backward_row_f32(const float *x, const float *g, float *dx, int64_t n,
                                      double *e, tg__exp_width w)
{
    if (n <= 0) return;
    if (w == TG__EXP_AVX512) backward_avx512(x, g, dx, n, e);
    else if (w == TG__EXP_AVX2) backward_avx2(x, g, dx, n, e);
    else backward_plain(x, g, dx, n, e);
}

void tg__softmax_backward_row_f32(const float *y, const float *g, float *dx, int64_t n)
{
    double a[8] = {0.0};
    int64_t c = 0;
    for (; c + 8 <= n; c += 8)
        for (int l = 0; l < 8; l++) a[l] += (double)g[c + l] * (double)y[c + l];
    for (int l = 0; c < n; c++, l++) a[l] += (double)g[c] * (double)y[c];
    const double s = sum8(a);
    for (c = 0; c < n; c++) dx[c] = (float)((double)y[c] * ((double)g[c] - s));
}

void tg__log_softmax_stats_rows_f32(const float *x, int64_t rows, int64_t n, double *st,
                                    double *e, tg__exp_width w)
{
    if (n <= 0 || rows <= 0) return;
    if (w == TG__EXP_AVX512) stats_avx512(x, rows, n, st, e);
    else if (w == TG__EXP_AVX2) stats_avx2(x, rows, n, st, e);
    else stats_plain(x, rows, n, st, e);
}

void tg__log_softmax_pick_backward_rows_f32(const float *x, float *dx, int64_t rows, int64_t n,
                                            const double *st, const int64_t *t, const float *gt,
                                            double *e, tg__exp_width w)
{
    if (n <= 0 || rows <= 0) return;
    if (w == TG__EXP_AVX512) pick_avx512(x, dx, rows, n, st, t, gt, e);
    else if (w == TG__EXP_AVX2) pick_avx2(x, dx, rows, n, st, t, gt, e);
    else pick_plain(x, dx, rows, n, st, t, gt, e);
}

void tg__softmax_rows_f32(const float *x, float *y, int64_t rows, int64_t n, bool log_,
                          double *e, tg__exp_width w)
{
    if (n <= 0 || rows <= 0) return;
    if (w == TG__EXP_AVX512) forward_rows_avx512(x, y, rows, n, log_, e);
    else if (w == TG__EXP_AVX2) forward_rows_avx2(x, y, rows, n, log_, e);
    else forward_rows_plain(x, y, rows, n, log_, e);
}
