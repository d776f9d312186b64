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
 * under 1e-12), s summed in eight partial sums, and e_c times 1 / s for
 * e_c / s; the rounding to f32's 24 bits rarely lets them through.  A
 * NaN never becomes the maximum, but its exp is NaN and so is s: a row
 * holding a NaN or +inf, or of -inf only, is NaN throughout, as
 * softmax.c's. */
#include <math.h>
#include <string.h>

#include "core/core.h"
#include "ops/softmax_rows_internal.h"

/* ---- exp in double, four or eight lanes at a time ---- */

/* e^t for t <= 0 (and -inf: 0; NaN: NaN) in each lane, relative error
 * under 1e-12 (for f32 rows, whose results are rounded to 24 bits):
 * t = k ln2 + r (|r| <= ln2/2; ln2 split in two so that k ln2_hi is
 * exact), e^t = 2^k (1 + p(r)), p(r) = expm1(r) by its Taylor series to
 * r^10 / 10! (truncated below 3e-13 relative), 2^k from the low bits of
 * t / ln2 rounded by the magic constant (src/ops/activation.c's exp_parts).
 * Below -708, where 2^k would be subnormal, 0: a probability under
 * 1e-307, 0 in f32.  GCC's vector extensions, so that the AVX2 and
 * AVX-512 clones below run it on 256- and 512-bit registers whatever the
 * optimization level; every lane takes the same operations, so the widths
 * give the same bits.  Vectors go by pointer (no ABI that depends on AVX).
 * EXP_NONPOS(name, VD, VI) defines name(double *e), in place on one vector
 * of VD (doubles) with VI (int64) lanes: exp_nonpos4 and exp_nonpos8. */
typedef double v4d __attribute__((vector_size(32)));
typedef int64_t v4i __attribute__((vector_size(32)));
typedef double v8d __attribute__((vector_size(64)));
typedef int64_t v8i __attribute__((vector_size(64)));

#define EXP_NONPOS(name, VD, VI)                                                          \
    static inline __attribute__((always_inline)) void name(double *e)                   \
    {                                                                                     \
        VD t;                                                                             \
        memcpy(&t, e, sizeof t);                                                          \
        const VI tiny = t < -708.0;           /* all ones where true; false for NaN */    \
        const VD x = (VD)((VI)t & ~tiny);     /* 0 there, so nothing overflows */         \
        const VD km = x * 0x1.71547652b82fep0 + 0x1.8p52;   /* round(x / ln2), low bits */ \
        const VD kd = km - 0x1.8p52;                                                      \
        const VD r = (x - kd * 0x1.62e42fefa0000p-1) - kd * 0x1.cf79abc9e3b3ap-40;         \
        VD p = r * (1.0 / 3628800.0) + 1.0 / 362880.0;                                    \
        p = p * r + 1.0 / 40320.0;                                                        \
        p = p * r + 1.0 / 5040.0;                                                         \
        p = p * r + 1.0 / 720.0;                                                          \
        p = p * r + 1.0 / 120.0;                                                          \
        p = p * r + 1.0 / 24.0;                                                           \
        p = p * r + 1.0 / 6.0;                                                            \
        p = p * r + 0.5;                                                                  \
        p = p * r * r + r;                                                                \
        const VI sb = (((VI)km + 1023) & 0x7FF) << 52;   /* k's low bits, biased */       \
        const VD y = (VD)sb * (1.0 + p);                                                  \
        t = (VD)((VI)y & ~tiny);                                                          \
        memcpy(e, &t, sizeof t);                                                          \
    }
EXP_NONPOS(exp_nonpos4, v4d, v4i)
EXP_NONPOS(exp_nonpos8, v8d, v8i)

/* e[i] = exp(e[i]) for i < n, each e[i] <= 0 or NaN, W lanes at a time;
 * the last vector runs past n into e's padding (TG__EXP_PAD), so every
 * element takes the same operations and no scalar store feeds a vector
 * load.  EXP_RUN(name, W, fn) defines name(e, n): exp_run4, exp_run8. */
#define EXP_RUN(name, W, fn)                                                              \
    static inline __attribute__((always_inline)) void name(double *e, int64_t n)        \
    {                                                                                     \
        for (int64_t i = 0; i < n; i += (W)) fn(e + i);                                   \
    }
EXP_RUN(exp_run4, 4, exp_nonpos4)
EXP_RUN(exp_run8, 8, exp_nonpos8)

/* ---- one row ---- */

/* The largest number of x (n >= 1), -inf when it holds none: sixteen
 * running maxima (a NaN never replaces one), merged at the end. */
static inline __attribute__((always_inline)) float row_max(const float *x, int64_t n)
{
    float m[16];
    for (int l = 0; l < 16; l++) m[l] = -INFINITY;
    int64_t c = 0;
    for (; c + 16 <= n; c += 16)
        for (int l = 0; l < 16; l++) m[l] = x[c + l] > m[l] ? x[c + l] : m[l];
    for (; c < n; c++) m[0] = x[c] > m[0] ? x[c] : m[0];
    float r = m[0];
    for (int l = 1; l < 16; l++) r = m[l] > r ? m[l] : r;
    return r;
}

/* Eight partial sums added pairwise. */
static inline double sum8(const double *a)
{
    return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
}

/* e[c] = exp(x[c] - m) for c < n, the exp W lanes wide; then their sum in
 * eight partial sums (one vector's lanes), added pairwise at the end. */
static inline __attribute__((always_inline)) double exp_shifted(const float *x, double m,
                                                                double *e, int64_t n, int W)
{
    for (int64_t c = 0; c < n; c++) e[c] = (double)x[c] - m;
    for (int c = 0; c < TG__EXP_PAD; c++) e[n + c] = 0.0;   /* the padding: defined values */
    if (W == 8) exp_run8(e, n);
    else exp_run4(e, n);
    double a[8] = {0.0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++) a[l] += e[i + l];
    for (int l = 0; i < n; i++, l++) a[l] += e[i];
    return sum8(a);
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

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define ROWS_AVX2 __attribute__((target("avx2")))
#define ROWS_AVX512 __attribute__((target("avx512f")))
#else
#define ROWS_AVX2
#define ROWS_AVX512
#endif

/* The clones: plain (four lanes of SSE2 on x86-64), AVX2, AVX-512. */
static void forward_plain(const float *x, float *y, int64_t n, bool log_, double *e)
{
    forward_row(x, y, n, log_, e, 4);
}
ROWS_AVX2 static void forward_avx2(const float *x, float *y, int64_t n, bool log_, double *e)
{
    forward_row(x, y, n, log_, e, 4);
}
ROWS_AVX512 static void forward_avx512(const float *x, float *y, int64_t n, bool log_,
                                       double *e)
{
    forward_row(x, y, n, log_, e, 8);
}
static void backward_plain(const float *x, const float *g, float *dx, int64_t n, double *e)
{
    log_backward_row(x, g, dx, n, e, 4);
}
ROWS_AVX2 static void backward_avx2(const float *x, const float *g, float *dx, int64_t n,
                                    double *e)
{
    log_backward_row(x, g, dx, n, e, 4);
}
ROWS_AVX512 static void backward_avx512(const float *x, const float *g, float *dx, int64_t n,
                                        double *e)
{
    log_backward_row(x, g, dx, n, e, 8);
}

/* ---- the width ---- */

static _Thread_local tg__exp_width forced;   /* tests: tg__exp_width_force */

void tg__exp_width_force(int width)
{
    forced = width >= TG__EXP_PLAIN && width <= TG__EXP_AVX512 ? (tg__exp_width)width
                                                               : TG__EXP_AUTO;
}

tg__exp_width tg__exp_width_get(void)
{
    const tg__exp_width best = tg__cpu_has_avx512bw() ? TG__EXP_AVX512
                               : tg__cpu_has_half_simd() ? TG__EXP_AVX2
                                                         : TG__EXP_PLAIN;
    return forced != TG__EXP_AUTO && forced <= best ? forced : best;
}

void tg__softmax_row_f32(const float *x, float *y, int64_t n, bool log_, double *e,
                         tg__exp_width w)
{
    if (n <= 0) return;
    if (w == TG__EXP_AVX512) forward_avx512(x, y, n, log_, e);
    else if (w == TG__EXP_AVX2) forward_avx2(x, y, n, log_, e);
    else forward_plain(x, y, n, log_, e);
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
