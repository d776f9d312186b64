/* tests/test_softmax_rows.c - softmax and log_softmax of f32 rows along the
 * last dim (src/ops/softmax_rows.c: a vectorized exp in double, eight
 * partial sums), in each exp width this CPU runs: every result is within
 * one rounding of the f64 computation on the same inputs rounded to f32,
 * and their gradients within a few. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "ops/softmax_rows_internal.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

enum { ROWS = 10 };

/* The rows of x (ROWS, n) in f64: uniform in [-12, 12), and row by row: 2
 * shifted by +1000 (exp of x - 0 would overflow), 3 with the maximum last,
 * 900 above the rest, 4 with -inf entries (masked scores), 5 with a NaN, 6
 * with +inf, 7 of -inf only, 8 with every value 1e-3 apart. */
static tg_tensor *rows_of(int64_t n, uint64_t seed)
{
    tg_tensor *x = th_rand_uniform(TG_F64, 2, (int64_t[]){ROWS, n}, seed);
    double *d = tg_tensor_data(x);
    for (int64_t i = 0; i < ROWS * n; i++) d[i] = 24.0 * d[i] - 12.0;
    for (int64_t c = 0; c < n; c++) {
        d[2 * n + c] += 1000.0;
        d[3 * n + c] = c == n - 1 ? 900.0 : d[3 * n + c];
        if (c % 3 == 1) d[4 * n + c] = -INFINITY;
        d[7 * n + c] = -INFINITY;
        d[8 * n + c] = 1e-3 * (double)c;
    }
    d[5 * n + n / 2] = NAN;
    d[6 * n + (n - 1) / 3] = INFINITY;
    return x;
}

/* |got - want| within k roundings of f32 at want, or both NaN. */
static void expect_near(const char *what, double got, double want, double k, int64_t n,
                        int64_t i)
{
    if (isnan(want)) {
        cr_assert(isnan(got), "%s n=%lld [%lld]: %g, want NaN", what, (long long)n,
                  (long long)i, got);
        return;
    }
    const double tol = k * ldexp(fabs(want), -24) + 1e-44;   /* subnormals: absolute */
    cr_assert(fabs(got - want) <= tol || got == want, "%s n=%lld [%lld]: %.9g, want %.9g",
              what, (long long)n, (long long)i, got, want);
}

/* One length in the exp width in force: softmax, log_softmax and the
 * log_softmax gradient of the f32 rows against the f64 computation. */
static void check_length(int64_t n, uint64_t seed)
{
    tg_tensor *x64 = rows_of(n, seed), *x32 = NULL, *xw = NULL;
    OK(tg_tensor_to_dtype(&x32, x64, TG_F32));
    OK(tg_tensor_to_dtype(&xw, x32, TG_F64));   /* exactly the f32 inputs */
    tg_tensor *g64 = th_rand_uniform(TG_F64, 2, (int64_t[]){ROWS, n}, seed + 1), *g32 = NULL;
    OK(tg_tensor_to_dtype(&g32, g64, TG_F32));
    tg_tensor *gw = NULL;
    OK(tg_tensor_to_dtype(&gw, g32, TG_F64));
    OK(tg_tensor_set_requires_grad(x32, true));
    OK(tg_tensor_set_requires_grad(xw, true));
    for (int l = 0; l < 2; l++) {
        tg_tensor *y32 = NULL, *yw = NULL;
        OK((l ? tg_log_softmax : tg_softmax)(&y32, x32, 1));
        OK((l ? tg_log_softmax : tg_softmax)(&yw, xw, 1));
        for (int64_t i = 0; i < ROWS * n; i++)
            expect_near(l ? "log_softmax" : "softmax", th_at(y32, i),
                        th_round_to(TG_F32, th_at(yw, i)), 1.0, n, i);
        if (l) {   /* the one-pass backward: dx = g - p sum(g) */
            tg_tensor *d32 = NULL, *dw = NULL;
            OK(tg_grad(&d32, 1, &y32, &g32, 1, &x32, NULL));
            OK(tg_grad(&dw, 1, &yw, &gw, 1, &xw, NULL));
            for (int64_t i = 0; i < ROWS * n; i++) {
                const double want = th_at(dw, i), scale = fabs(th_at(gw, i)) + fabs(want);
                const double got = th_at(d32, i);
                if (isnan(want)) {
                    cr_assert(isnan(got), "log_softmax backward n=%lld [%lld]: %g, want NaN",
                              (long long)n, (long long)i, got);
                    continue;
                }
                cr_assert(fabs(got - want) <= ldexp(scale, -22) + 1e-44,
                          "log_softmax backward n=%lld [%lld]: %.9g, want %.9g", (long long)n,
                          (long long)i, got, want);
            }
            th_release_all(2, (tg_tensor *[]){d32, dw});
        } else {   /* dx = y (g - sum(g y)), g in [0, 1): |sum(g y)| <= 1 */
            tg_tensor *d32 = NULL, *dw = NULL;
            OK(tg_grad(&d32, 1, &y32, &g32, 1, &x32, NULL));
            OK(tg_grad(&dw, 1, &yw, &gw, 1, &xw, NULL));
            for (int64_t i = 0; i < ROWS * n; i++) {
                const double want = th_at(dw, i), got = th_at(d32, i);
                if (isnan(want)) {
                    cr_assert(isnan(got), "softmax backward n=%lld [%lld]: %g, want NaN",
                              (long long)n, (long long)i, got);
                    continue;
                }
                cr_assert(fabs(got - want) <= ldexp(fabs(th_at(yw, i)), -20) + 1e-44,
                          "softmax backward n=%lld [%lld]: %.9g, want %.9g", (long long)n,
                          (long long)i, got, want);
            }
            th_release_all(2, (tg_tensor *[]){d32, dw});
        }
        th_release_all(2, (tg_tensor *[]){y32, yw});
    }
    th_release_all(6, (tg_tensor *[]){x64, x32, xw, g64, g32, gw});
}

/* Lengths around each vector width (4 and 8 doubles, 16 floats) and past
 * the eight partial sums, in plain C, AVX2 and AVX-512 (those this CPU
 * runs; the others are reported). */
Test(softmax_rows, f32_rows_are_the_f64_result_rounded_in_each_exp_width)
{
    static const int64_t lengths[] = {1,  2,  3,  4,  5,  7,   8,   9,  15,
                                      16, 17, 31, 33, 64, 100, 257, 300};
    static const char *const names[] = {"", "plain", "AVX2", "AVX-512"};
    int widths = 0;
    for (int w = TG__EXP_PLAIN; w <= TG__EXP_AVX512; w++) {
        tg__exp_width_force(w);
        if (tg__exp_width_get() != (tg__exp_width)w) {
            th_not_run("the %s exp of softmax rows is not run: this CPU lacks it", names[w]);
            continue;
        }
        for (size_t k = 0; k < sizeof lengths / sizeof *lengths; k++)
            check_length(lengths[k], 100 + 7 * k);
        widths++;
    }
    tg__exp_width_force(0);
    cr_assert(widths >= 1, "no exp width ran");
}

/* The rows of several tasks (more than 32768 elements) and a strided input
 * (its contiguous copy takes the same rows): the same bits as one row at a
 * time. */
Test(softmax_rows, many_rows_and_strided_input_give_the_same_bits)
{
    const int64_t shape[2] = {300, 257};
    tg_tensor *x = th_rand_uniform(TG_F32, 2, shape, 5), *t = NULL, *xs = NULL, *y = NULL;
    tg_tensor *yt = NULL, *ys = NULL;
    OK(tg_softmax(&y, x, 1));
    OK(tg_transpose(&t, x, 0, 1));
    OK(tg_contiguous(&xs, t));
    tg_tensor *back = NULL;
    OK(tg_transpose(&back, xs, 0, 1));   /* x's values, strided */
    OK(tg_softmax(&ys, back, 1));
    th_expect_same_bits("strided", x, y, ys);
    for (int64_t r = 0; r < shape[0]; r += 37) {
        tg_tensor *row = NULL, *yr = NULL, *want = NULL;
        OK(tg_narrow(&row, x, 0, r, 1));
        OK(tg_softmax(&yr, row, 1));
        OK(tg_narrow(&want, y, 0, r, 1));
        th_expect_same_bits("one row", row, yr, want);
        th_release_all(3, (tg_tensor *[]){row, yr, want});
    }
    th_release_all(7, (tg_tensor *[]){x, t, xs, y, yt, ys, back});
}

/* Rows shorter than 256 go through the exp in blocks of 1024 values: f32
 * softmax and log_softmax of (N, C) have the bits of the one-row kernel
 * row by row, in each exp width, with 1 and 2 threads (N C over 32768:
 * two tasks), with the special rows of rows_of in the first block. */
Test(softmax_rows, short_rows_in_blocks_give_the_one_row_bits)
{
    static const int64_t cs[] = {1, 3, 10, 63, 100, 255, 256};
    const int64_t N = 700;
    const int threads = tg_get_num_threads();
    for (size_t ci = 0; ci < sizeof cs / sizeof *cs; ci++) {
        const int64_t C = cs[ci];
        tg_tensor *x = th_rand_uniform(TG_F32, 2, (int64_t[]){N, C}, 60 + ci), *x64 = NULL;
        tg_tensor *sp = rows_of(C, 70 + ci);
        OK(tg_to_dtype(&x64, sp, TG_F32));
        memcpy(tg_tensor_data(x), tg_tensor_cdata(x64), (size_t)(ROWS * C) * sizeof(float));
        float *want = malloc((size_t)(N * C) * sizeof *want);
        double *e = malloc((size_t)(C + 8) * sizeof *e);
        for (int w = TG__EXP_PLAIN; w <= TG__EXP_AVX512; w++) {
            tg__exp_width_force(w);
            if (tg__exp_width_get() != (tg__exp_width)w) continue;
            for (int l = 0; l < 2; l++) {
                const float *xv = tg_tensor_cdata(x);
                for (int64_t r = 0; r < N; r++)
                    tg__softmax_row_f32(xv + r * C, want + r * C, C, l == 1, e,
                                        (tg__exp_width)w);
                for (int t = 1; t <= 2; t++) {
                    OK(tg_set_num_threads(t));
                    tg_tensor *y = NULL;
                    OK(l ? tg_log_softmax(&y, x, 1) : tg_softmax(&y, x, 1));
                    const float *yv = tg_tensor_cdata(y);
                    cr_assert(eq(int, memcmp(yv, want, (size_t)(N * C) * sizeof *want), 0),
                              "C=%lld %s width %d threads %d", (long long)C,
                              l ? "log_softmax" : "softmax", w, t);
                    tg_tensor_release(y);
                }
            }
        }
        tg__exp_width_force(0);
        free(want);
        free(e);
        th_release_all(3, (tg_tensor *[]){x, x64, sp});
    }
    OK(tg_set_num_threads(threads));
}
