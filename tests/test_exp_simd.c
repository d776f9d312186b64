/* tests/test_exp_simd.c - the exp in double of src/ops/exp_simd.h (taken
 * by softmax_rows.c and unary_simd.c): its table holds the doubles nearest
 * 2^(j/32), and its low parts what is left (expm1's, which tanh takes:
 * tests/test_activation.c); its relative error against expl stays under
 * 2.3e-16 over a sweep of [-708, 700] that takes in both sides of every
 * point where the reduction's K = round(32 t / ln2) steps; every width this
 * CPU runs gives the plain C width's bits; special values (0, -0, -inf,
 * NaN, below -708); and f32 exp next to those steps is within one rounding
 * of libm's. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ops/exp_simd.h"
#include "ops/softmax_rows_internal.h"
#include "ops/unary_simd_internal.h"

enum { KLO = -32686, KHI = 32318, NEAR = 5 };   /* K over t in [-708, 700] */

#define LN2_32 (0.693147180559945309417232121458176568L / 32)

Test(exp_simd, table_holds_the_nearest_doubles)
{
    for (int j = 0; j < 32; j++) {
        const long double v = exp2l((long double)j / 32);
        const double t = TG__EXP2_TAB[j];
        const long double d = fabsl((long double)t - v);
        cr_assert(d <= fabsl((long double)nextafter(t, INFINITY) - v) &&
                      d <= fabsl((long double)nextafter(t, -INFINITY) - v),
                  "2^(%d/32): %a, not the nearest double to %La", j, t, v);
    }
}

Test(exp_simd, low_parts_complete_the_table)
{
    for (int j = 0; j < 32; j++) {
        const long double v = exp2l((long double)j / 32);
        const long double sum = (long double)TG__EXP2_TAB[j] + TG__EXP2_TAB_LO[j];
        cr_assert(fabsl(sum - v) <= 0x1p-62L * v, "2^(%d/32): %a + %a, not %La", j,
                  TG__EXP2_TAB[j], TG__EXP2_TAB_LO[j], v);
        cr_assert(fabs(TG__EXP2_TAB_LO[j]) <= 0x1p-53 * TG__EXP2_TAB[j], "2^(%d/32): low %a", j,
                  TG__EXP2_TAB_LO[j]);
    }
}

/* The sweep: around every t = (K + 1/2) ln2 / 32 (where K steps) and K
 * ln2 / 32 (r near 0), NEAR doubles each side, then evenly spaced points;
 * n rounded up to a multiple of 8 with zeros.  Returns n (unpadded). */
static int64_t sweep(double **out)
{
    const int64_t per = 2 * (2 * NEAR + 1), nk = KHI - KLO + 1, even = 1 << 20;
    const int64_t n = nk * per + even;
    double *t = calloc((size_t)(n + 8), sizeof *t);
    int64_t i = 0;
    for (int64_t k = KLO; k <= KHI; k++)
        for (int h = 0; h < 2; h++) {
            double c = (double)(((long double)k + 0.5L * h) * LN2_32);
            for (int s = 0; s < NEAR; s++) c = nextafter(c, -INFINITY);
            for (int s = 0; s < 2 * NEAR + 1; s++, c = nextafter(c, INFINITY))
                t[i++] = c < -708.0 ? -708.0 : c > 700.0 ? 700.0 : c;
        }
    for (int64_t s = 0; s < even; s++) t[i++] = -708.0 + 1408.0 * (double)s / (double)even;
    *out = t;
    return n;
}

Test(exp_simd, relative_error_under_2_3e_16)
{
    double *t, *y;
    const int64_t n = sweep(&t);
    y = malloc((size_t)(n + 8) * sizeof *y);
    memcpy(y, t, (size_t)(n + 8) * sizeof *y);
    tg__exp_f64_inplace(y, n, tg__exp_width_get());
    double worst = 0.0, at = 0.0;
    for (int64_t i = 0; i < n; i++) {
        const long double want = expl((long double)t[i]);
        const double rel = (double)(fabsl((long double)y[i] - want) / want);
        if (rel > worst) worst = rel, at = t[i];
    }
    cr_log_info("exp_simd: largest relative error %.3g at t=%a", worst, at);
    cr_assert(worst < 2.3e-16, "relative error %.3g at t=%a", worst, at);
    free(t), free(y);
}

Test(exp_simd, every_width_gives_the_plain_bits)
{
    double *t, *want, *got;
    const int64_t n = sweep(&t);
    const size_t bytes = (size_t)(n + 8) * sizeof *t;
    want = malloc(bytes), got = malloc(bytes);
    memcpy(want, t, bytes);
    tg__exp_f64_inplace(want, n, TG__EXP_PLAIN);
    int widths = 0;
    for (int w = TG__EXP_AVX2; w <= TG__EXP_AVX512; w++) {
        tg__exp_width_force(w);
        if (tg__exp_width_get() != (tg__exp_width)w) continue;
        widths++;
        memcpy(got, t, bytes);
        tg__exp_f64_inplace(got, n, (tg__exp_width)w);
        for (int64_t i = 0; i < n; i++)
            cr_assert(memcmp(&got[i], &want[i], sizeof *got) == 0,
                      "width %d t=%a: %a, plain %a", w, t[i], got[i], want[i]);
    }
    tg__exp_width_force(0);
    cr_log_info("exp_simd: %d vector widths besides plain", widths);
    free(t), free(want), free(got);
}

/* expm1 (tanh's) over [0, 40] around every step of K: relative error under
 * 6e-16 (where e^t - 1 < 2^(j/32) - 1 cancels a little, just past a step of
 * K), and every width gives the plain one's bits. */
Test(exp_simd, expm1_relative_error_and_widths)
{
    enum { K1 = 1847 };   /* 40 * 32 / ln2 */
    const int64_t n = (int64_t)(K1 + 1) * 2 * (2 * NEAR + 1) + 8;
    double *t = calloc((size_t)n, sizeof *t), *y = malloc((size_t)n * sizeof *y);
    double *w = malloc((size_t)n * sizeof *w);
    int64_t i = 8;
    t[1] = 0x1p-30, t[2] = 1e-300, t[3] = 1e-10, t[4] = 0.5, t[5] = 1.0, t[6] = 40.0;
    for (int64_t k = 0; k <= K1; k++)
        for (int h = 0; h < 2; h++) {
            double c = (double)(((long double)k + 0.5L * h) * LN2_32);
            for (int s = 0; s < NEAR; s++) c = nextafter(c, -INFINITY);
            for (int s = 0; s < 2 * NEAR + 1; s++, c = nextafter(c, INFINITY))
                t[i++] = c < 0.0 ? 0.0 : c;
        }
    tg__expm1_f64(y, t, n, TG__EXP_PLAIN);
    double worst = 0.0, at = 0.0;
    for (i = 0; i < n; i++) {
        const long double want = expm1l((long double)t[i]);
        const long double d = fabsl((long double)y[i] - want);
        const double rel = want == 0 ? fabs(y[i]) : (double)(d / want);
        if (rel > worst) worst = rel, at = t[i];
    }
    cr_log_info("exp_simd: expm1's largest relative error %.3g at t=%a", worst, at);
    cr_assert(worst < 6e-16, "expm1: relative error %.3g at t=%a", worst, at);
    for (int wd = TG__EXP_AVX2; wd <= TG__EXP_AVX512; wd++) {
        tg__exp_width_force(wd);
        if (tg__exp_width_get() != (tg__exp_width)wd) continue;
        tg__expm1_f64(w, t, n, (tg__exp_width)wd);
        cr_assert(memcmp(w, y, (size_t)n * sizeof *w) == 0, "expm1: width %d differs", wd);
    }
    tg__exp_width_force(0);
    free(t), free(y), free(w);
}

Test(exp_simd, special_values)
{
    double e[8] = {0.0, -0.0, -INFINITY, NAN, -708.5, -1e300, -708.0, 1.0};
    for (int w = TG__EXP_PLAIN; w <= TG__EXP_AVX512; w++) {
        tg__exp_width_force(w);
        if (tg__exp_width_get() != (tg__exp_width)w) continue;
        double y[8];
        memcpy(y, e, sizeof y);
        tg__exp_f64_inplace(y, 8, (tg__exp_width)w);
        cr_assert(y[0] == 1.0 && y[1] == 1.0, "width %d: exp(+-0) %a %a", w, y[0], y[1]);
        cr_assert(y[2] == 0.0 && y[4] == 0.0 && y[5] == 0.0, "width %d: 0 below -708", w);
        cr_assert(isnan(y[3]), "width %d: exp(NaN) %a", w, y[3]);
        cr_assert(fabs(y[6] / exp(-708.0) - 1.0) < 3e-16, "width %d: exp(-708) %a", w, y[6]);
        cr_assert(isnormal(y[6]), "width %d: exp(-708) %a not normal", w, y[6]);
        cr_assert(fabs(y[7] / M_E - 1.0) < 3e-16, "width %d: exp(1) %a", w, y[7]);
    }
    tg__exp_width_force(0);
}

/* f32 exp at the f32 next to each step of K in [-120, 89]: within one
 * rounding of libm's exp, and that rounding almost always. */
Test(exp_simd, f32_exp_at_the_steps)
{
    enum { K0 = -5540, K1 = 4110, PER = 2 * (2 * NEAR + 1) };
    const int64_t n = (int64_t)(K1 - K0 + 1) * PER;
    float *a = malloc((size_t)n * sizeof *a), *y = malloc((size_t)n * sizeof *y);
    int64_t i = 0;
    for (int64_t k = K0; k <= K1; k++)
        for (int h = 0; h < 2; h++) {
            float c = (float)(((long double)k + 0.5L * h) * LN2_32);
            for (int s = 0; s < NEAR; s++) c = nextafterf(c, -INFINITY);
            for (int s = 0; s < 2 * NEAR + 1; s++, c = nextafterf(c, INFINITY)) a[i++] = c;
        }
    tg__unary_simd_f32(TG__USIMD_EXP, y, a, NULL, n, tg__exp_width_get());
    long off = 0;
    for (i = 0; i < n; i++) {
        const double want = exp((double)a[i]);
        const float r = (float)want;
        if (y[i] == r) continue;
        off++;
        const float other = (double)r > want ? nextafterf(r, -INFINITY) : nextafterf(r, INFINITY);
        cr_assert(y[i] == other, "x=%a: %a, libm %a", (double)a[i], (double)y[i], want);
    }
    cr_log_info("exp_simd: %ld of %lld f32 results off (float)libm", off, (long long)n);
    cr_assert(off * 100000 < n, "%ld of %lld f32 results off (float)libm", off, (long long)n);
    free(a), free(y);
}
