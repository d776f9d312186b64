/* tests/test_linalg_threads.c - the batched functions of tapegrad/linalg.h
 * on tapegrad's thread pool: the same bits on 1 and 2 threads for every
 * function over a batch, and the error of a batch with failing matrices
 * naming the first of them whatever the thread count. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/linalg.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

enum { BATCH = 64, N = 8, MAX_OUT = 3, N_FNS = 10 };

/* A (BATCH, N, N) of dt made from X U[-1, 1): X + 2 sqrt(N) I (kind 0),
 * X X^T / N + I (1: positive-definite), (X + X^T) / 2 (2: symmetric).  The
 * matrices listed in zero[0..nz) are all zeros (singular, and not
 * positive-definite). */
static tg_tensor *make_a(tg_dtype dt, int kind, int nz, const int *zero)
{
    uint64_t s = 12345;
    static double x[BATCH * N * N], a[BATCH * N * N];
    for (int i = 0; i < BATCH * N * N; i++) x[i] = th_uniform_pm1(&s);
    for (int b = 0; b < BATCH; b++) {
        const double *xb = x + b * N * N;
        double *ab = a + b * N * N;
        for (int i = 0; i < N; i++)
            for (int j = 0; j < N; j++) {
                double v = xb[i * N + j];
                if (kind == 0) {
                    v += i == j ? 2 * sqrt((double)N) : 0;
                } else if (kind == 1) {
                    v = i == j ? 1 : 0;
                    for (int k = 0; k < N; k++) v += xb[i * N + k] * xb[j * N + k] / N;
                } else {
                    v = (v + xb[j * N + i]) / 2;
                }
                ab[i * N + j] = v;
            }
    }
    for (int z = 0; z < nz; z++) memset(a + zero[z] * N * N, 0, sizeof(double) * N * N);
    return th_tensor_from(dt, 3, (int64_t[]){BATCH, N, N}, a);
}

/* Function f of the list on A (B: a right-hand side) into y; how many
 * outputs. */
static int run_fn(int f, tg_tensor *A, tg_tensor *B, tg_tensor **y)
{
    for (int i = 0; i < MAX_OUT; i++) y[i] = NULL;
    switch (f) {
    case 0: OK(tg_linalg_inv(&y[0], A)); return 1;
    case 1: OK(tg_linalg_solve(&y[0], A, B)); return 1;
    case 2: OK(tg_linalg_det(&y[0], A)); return 1;
    case 3: OK(tg_linalg_slogdet(&y[0], &y[1], A)); return 2;
    case 4: OK(tg_linalg_cholesky(&y[0], A, false)); return 1;
    case 5: OK(tg_linalg_solve_triangular(&y[0], A, B, false, true, false)); return 1;
    case 6: OK(tg_linalg_eigh(&y[0], &y[1], A, false)); return 2;
    case 7: OK(tg_linalg_svd(&y[0], &y[1], &y[2], A, false)); return 3;
    case 8: OK(tg_linalg_svd(&y[0], &y[1], &y[2], A, true)); return 3;
    default: OK(tg_linalg_qr(&y[0], &y[1], A, "reduced")); return 2;
    }
}

/* Whether a and b have one shape and the same bits in every element. */
static bool same_bits(const tg_tensor *a, const tg_tensor *b)
{
    if (tg_tensor_numel(a) != tg_tensor_numel(b)) return false;
    for (int64_t i = 0; i < tg_tensor_numel(a); i++) {
        const double u = th_at(a, i), v = th_at(b, i);
        if (memcmp(&u, &v, sizeof u) != 0) return false;
    }
    return true;
}

Test(linalg_threads, batch_results_same_bits_on_1_and_2_threads)
{
    const int kinds[N_FNS] = {0, 0, 0, 0, 1, 0, 2, 0, 0, 0};
    const tg_dtype dts[2] = {TG_F32, TG_F64};
    const int saved = tg_get_num_threads();
    for (int d = 0; d < 2; d++)
        for (int f = 0; f < N_FNS; f++) {
            tg_tensor *A = make_a(dts[d], kinds[f], 0, NULL);
            uint64_t s = 7;
            tg_tensor *B = th_rand_tensor(&s, dts[d], 3, (int64_t[]){BATCH, N, 3}, -1, 1);
            tg_tensor *y1[MAX_OUT], *y2[MAX_OUT];
            OK(tg_set_num_threads(1));
            const int n = run_fn(f, A, B, y1);
            OK(tg_set_num_threads(2));
            run_fn(f, A, B, y2);
            for (int i = 0; i < n; i++)
                cr_assert(same_bits(y1[i], y2[i]), "function %d, dtype %d, output %d", f, d, i);
            th_release_all(n, y1);
            th_release_all(n, y2);
            tg_tensor_release(A);
            tg_tensor_release(B);
        }
    OK(tg_set_num_threads(saved));
}

/* The message of f (0 inv, 1 solve, 2 cholesky) on a batch whose matrices
 * zero[0..nz) are zero, at `threads` threads, into msg. */
static void failing_call(int f, int threads, int nz, const int *zero, char *msg, size_t n)
{
    tg_tensor *A = make_a(TG_F64, f == 2 ? 1 : 0, nz, zero), *y = NULL;
    uint64_t s = 7;
    tg_tensor *B = th_rand_tensor(&s, TG_F64, 3, (int64_t[]){BATCH, N, 2}, -1, 1);
    OK(tg_set_num_threads(threads));
    const int rc = f == 0 ? tg_linalg_inv(&y, A)
                   : f == 1 ? tg_linalg_solve(&y, A, B)
                            : tg_linalg_cholesky(&y, A, false);
    cr_assert(eq(int, rc, TG_EINVAL), "function %d", f);
    cr_assert(y == NULL, "no output on an error");
    snprintf(msg, n, "%s", tg_error_message());
    tg_tensor_release(A);
    tg_tensor_release(B);
}

Test(linalg_threads, batch_error_names_the_first_failing_matrix)
{
    /* first in the first half, or both in the second half of the batch
     * (the share of a second thread), or the last */
    static const int sets[4][3] = {{5, 40, 63}, {40, 50, 63}, {63, 63, 63}, {33, 32, 60}};
    static const int first[4] = {5, 40, 63, 32};
    const int saved = tg_get_num_threads();
    for (int f = 0; f < 3; f++)
        for (int k = 0; k < 4; k++)
            for (int threads = 1; threads <= 2; threads++) {
                char msg[512], want[48];
                failing_call(f, threads, 3, sets[k], msg, sizeof msg);
                snprintf(want, sizeof want, "(Batch element %d):", first[k]);
                cr_assert(strstr(msg, want) != NULL, "function %d, threads %d: want %s in %s", f,
                          threads, want, msg);
            }
    OK(tg_set_num_threads(saved));
}

Test(linalg_threads, batch_error_same_message_over_repeats)
{
    /* two failing matrices, one in each thread's share, many times: the
     * first wins whichever thread fails first */
    static const int zero[2] = {60, 2};
    const int saved = tg_get_num_threads();
    for (int r = 0; r < 20; r++) {
        char msg[512];
        failing_call(0, 2, 2, zero, msg, sizeof msg);
        cr_assert(strstr(msg, "(Batch element 2):") != NULL, "repeat %d: %s", r, msg);
    }
    OK(tg_set_num_threads(saved));
}
