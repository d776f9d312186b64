/* tests/test_lapack_small.c - the plain-loop LU, its solves, Cholesky,
 * triangular solves and Householder QR of small matrices
 * (src/core/lapack_small.c) against LAPACK's own routines called
 * directly, and the batched functions of tapegrad/linalg.h that use them
 * on the thread pool.
 *
 * The pivots must be LAPACK's (the first row of largest |value|), so they
 * are compared exactly, on random matrices and on columns with ties.  The
 * factors and solutions agree within rounding: the tests allow
 * 64 n u max|.| (u the unit roundoff), far below the error of a wrong
 * pivot, a dropped update or a misplaced element. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>
#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "helpers.h"
#include "core/lapack_small.h"
#include "tapegrad/linalg.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

extern void dgetrf_(const int *m, const int *n, double *a, const int *lda, int *ipiv, int *info);
extern void sgetrf_(const int *m, const int *n, float *a, const int *lda, int *ipiv, int *info);
extern void dgetrs_(const char *trans, const int *n, const int *nrhs, const double *a,
                    const int *lda, const int *ipiv, double *b, const int *ldb, int *info,
                    size_t trans_len);
extern void dgeqrf_(const int *m, const int *n, double *a, const int *lda, double *tau,
                    double *work, const int *lwork, int *info);
extern void sgeqrf_(const int *m, const int *n, float *a, const int *lda, float *tau, float *work,
                    const int *lwork, int *info);
extern void dorgqr_(const int *m, const int *n, const int *k, double *a, const int *lda,
                    const double *tau, double *work, const int *lwork, int *info);
extern void dpotrf_(const char *uplo, const int *n, double *a, const int *lda, int *info,
                    size_t uplo_len);

enum { NMAX = 9 };

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static void fill(double *x, int count)
{
    for (int i = 0; i < count; i++) x[i] = th_uniform_pm1(&rng_state);
}

static double max_abs(const double *x, int count)
{
    double m = 0;
    for (int i = 0; i < count; i++) m = fmax(m, fabs(x[i]));
    return m;
}

/* Whether x and y (count each) agree within 64 n u max|y|. */
static bool close_to(const double *x, const double *y, int count, int n, double u)
{
    const double tol = 64.0 * n * u * (max_abs(y, count) + 1);
    for (int i = 0; i < count; i++)
        if (!(fabs(x[i] - y[i]) <= tol)) return false;
    return true;
}

/* The small getrf and LAPACK's on the column-major m x n a: the same info
 * and pivots, the factors within rounding; in f64, and in f32 (sgetrf). */
static void check_getrf(int m, int n, const double *a)
{
    double x[NMAX * NMAX], y[NMAX * NMAX];
    int px[NMAX], py[NMAX], info = 0;
    const int k = m < n ? m : n;
    memcpy(x, a, sizeof(double) * (size_t)(m * n));
    memcpy(y, a, sizeof(double) * (size_t)(m * n));
    const int ix = tg__small_getrf(TG_F64, m, n, x, px);
    dgetrf_(&m, &n, y, &m, py, &info);
    cr_assert(eq(int, ix, info), "f64 %d x %d: info", m, n);
    cr_assert(memcmp(px, py, sizeof(int) * (size_t)k) == 0, "f64 %d x %d: pivots", m, n);
    cr_assert(close_to(x, y, m * n, n, DBL_EPSILON), "f64 %d x %d: factors", m, n);
    float xf[NMAX * NMAX], yf[NMAX * NMAX];
    for (int i = 0; i < m * n; i++) xf[i] = yf[i] = (float)a[i];
    const int ixf = tg__small_getrf(TG_F32, m, n, xf, px);
    sgetrf_(&m, &n, yf, &m, py, &info);
    cr_assert(eq(int, ixf, info), "f32 %d x %d: info", m, n);
    cr_assert(memcmp(px, py, sizeof(int) * (size_t)k) == 0, "f32 %d x %d: pivots", m, n);
    for (int i = 0; i < m * n; i++) x[i] = xf[i], y[i] = yf[i];
    cr_assert(close_to(x, y, m * n, n, FLT_EPSILON), "f32 %d x %d: factors", m, n);
}

Test(lapack_small, getrf_matches_lapack_square_and_rectangular)
{
    for (int m = 1; m <= NMAX; m++)
        for (int n = 1; n <= NMAX; n++)
            for (int r = 0; r < 4; r++) {
                double a[NMAX * NMAX];
                fill(a, m * n);
                check_getrf(m, n, a);
            }
}

Test(lapack_small, getrf_pivot_is_the_first_largest_magnitude)
{
    /* column-major 3 x 3: column 0 is (1, -1, 1) (a three-way tie: row 0
     * stays), then after the update column 1 ties rows 1 and 2 */
    const double a[9] = {1, -1, 1, 2, 0, 0, 5, 7, -3};
    check_getrf(3, 3, a);
    double x[9];
    int p[3];
    memcpy(x, a, sizeof x);
    cr_assert(eq(int, tg__small_getrf(TG_F64, 3, 3, x, p), 0));
    cr_assert(eq(int, p[0], 1));
    cr_assert(eq(int, p[1], 2), "rows 1 and 2 tie at |2|: the first, row 1");
    /* the column (0, 2, -2): the first of the two, row 1 */
    const double b[3] = {0, 2, -2};
    memcpy(x, b, sizeof b);
    check_getrf(3, 1, b);
    tg__small_getrf(TG_F64, 3, 1, x, p);
    cr_assert(eq(int, p[0], 2));
}

Test(lapack_small, getrf_singular_reports_the_first_zero_pivot_and_completes)
{
    for (int n = 1; n <= NMAX; n++)
        for (int zc = 0; zc < n; zc++) {
            double a[NMAX * NMAX];
            fill(a, n * n);
            /* column zc zero: it stays zero through the updates of the
             * columns before it, so U(zc, zc) is exactly zero */
            for (int i = 0; i < n; i++) a[zc * n + i] = 0;
            check_getrf(n, n, a);
            double x[NMAX * NMAX];
            int p[NMAX];
            memcpy(x, a, sizeof(double) * (size_t)(n * n));
            cr_assert(eq(int, tg__small_getrf(TG_F64, n, n, x, p), zc + 1), "n %d, column %d",
                      n, zc);
        }
}

Test(lapack_small, getrs_both_transpositions_match_lapack)
{
    for (int n = 1; n <= NMAX; n++)
        for (int nrhs = 1; nrhs <= 3; nrhs++)
            for (int t = 0; t < 2; t++) {
                double a[NMAX * NMAX], b[NMAX * 3], x[NMAX * 3], y[NMAX * 3];
                int piv[NMAX], info = 0;
                fill(a, n * n);
                for (int i = 0; i < n; i++) a[i * n + i] += 0.5;
                fill(b, n * nrhs);
                tg__small_getrf(TG_F64, n, n, a, piv);
                memcpy(x, b, sizeof(double) * (size_t)(n * nrhs));
                memcpy(y, b, sizeof(double) * (size_t)(n * nrhs));
                tg__small_getrs(TG_F64, t == 1, n, nrhs, a, piv, x);
                const char tr = t == 1 ? 'T' : 'N';
                dgetrs_(&tr, &n, &nrhs, a, &n, piv, y, &n, &info, 1);
                cr_assert(eq(int, info, 0));
                cr_assert(close_to(x, y, n * nrhs, n, DBL_EPSILON), "n %d nrhs %d trans %d", n,
                          nrhs, t);
            }
}

Test(lapack_small, potrf_matches_lapack_and_reports_the_failing_minor)
{
    for (int n = 1; n <= NMAX; n++)
        for (int bad = -1; bad < n; bad++) {
            double g[NMAX * NMAX], a[NMAX * NMAX], x[NMAX * NMAX], y[NMAX * NMAX];
            fill(g, n * n);
            for (int i = 0; i < n; i++)   /* A = G G^T / n + I, symmetric positive-definite */
                for (int j = 0; j < n; j++) {
                    double v = i == j ? 1 : 0;
                    for (int q = 0; q < n; q++) v += g[i * n + q] * g[j * n + q] / n;
                    a[i * n + j] = v;
                }
            if (bad >= 0) a[bad * n + bad] = -1;   /* minor bad + 1 not positive-definite */
            memcpy(x, a, sizeof(double) * (size_t)(n * n));
            memcpy(y, a, sizeof(double) * (size_t)(n * n));
            const char uplo = 'U';   /* column-major upper = row-major lower */
            int info = 0;
            const int ix = tg__small_potrf_lower(TG_F64, n, x);
            dpotrf_(&uplo, &n, y, &n, &info, 1);
            cr_assert(eq(int, ix, info), "n %d bad %d", n, bad);
            cr_assert(eq(int, ix, bad + 1), "n %d bad %d", n, bad);
            const int rows = ix ? ix : n;   /* the columns LAPACK completed */
            for (int i = 0; i < n; i++)
                for (int j = 0; j <= i && j < rows; j++)
                    cr_assert(fabs(x[i * n + j] - y[i * n + j]) <= 1e-12 * (fabs(y[i * n + j]) + 1),
                              "n %d bad %d: L(%d, %d)", n, bad, i, j);
        }
}

Test(lapack_small, trsm_matches_blas)
{
    for (int n = 1; n <= NMAX; n++)
        for (int c = 0; c < 4; c++) {
            const bool upper = c & 1, unit = c & 2;
            double a[NMAX * NMAX], b[NMAX * 3], x[NMAX * 3], y[NMAX * 3];
            fill(a, n * n);
            for (int i = 0; i < n; i++) a[i * n + i] += 2;
            fill(b, n * 3);
            memcpy(x, b, sizeof(double) * (size_t)(n * 3));
            memcpy(y, b, sizeof(double) * (size_t)(n * 3));
            tg__small_trsm_left(TG_F64, upper, unit, n, 3, a, x);
            cblas_dtrsm(CblasRowMajor, CblasLeft, upper ? CblasUpper : CblasLower, CblasNoTrans,
                        unit ? CblasUnit : CblasNonUnit, n, 3, 1.0, a, n, y, 3);
            cr_assert(close_to(x, y, n * 3, n, DBL_EPSILON), "n %d upper %d unit %d", n, upper,
                      unit);
        }
}

/* The small geqrf and LAPACK's on the column-major m x n a, f64 and f32:
 * R, the reflectors and tau within rounding; then, for m >= n, the small
 * orgqr and LAPACK's on LAPACK's factors, with k = n and k = n - 1
 * reflectors. */
static void check_geqrf(int m, int n, const double *a)
{
    enum { LW = 64 * NMAX };
    double x[NMAX * NMAX], y[NMAX * NMAX], tx[NMAX], ty[NMAX], work[LW];
    const int k = m < n ? m : n, lw = LW;
    int info = 0;
    memcpy(x, a, sizeof(double) * (size_t)(m * n));
    memcpy(y, a, sizeof(double) * (size_t)(m * n));
    tg__small_geqrf(TG_F64, m, n, x, tx);
    dgeqrf_(&m, &n, y, &m, ty, work, &lw, &info);
    cr_assert(eq(int, info, 0));
    cr_assert(close_to(x, y, m * n, m, DBL_EPSILON), "f64 %d x %d: R and reflectors", m, n);
    cr_assert(close_to(tx, ty, k, m, DBL_EPSILON), "f64 %d x %d: tau", m, n);
    float xf[NMAX * NMAX], yf[NMAX * NMAX], txf[NMAX], tyf[NMAX], workf[LW];
    for (int i = 0; i < m * n; i++) xf[i] = yf[i] = (float)a[i];
    tg__small_geqrf(TG_F32, m, n, xf, txf);
    sgeqrf_(&m, &n, yf, &m, tyf, workf, &lw, &info);
    for (int i = 0; i < m * n; i++) x[i] = xf[i], y[i] = yf[i];
    for (int i = 0; i < k; i++) tx[i] = txf[i], ty[i] = tyf[i];
    cr_assert(close_to(x, y, m * n, m, FLT_EPSILON), "f32 %d x %d: R and reflectors", m, n);
    cr_assert(close_to(tx, ty, k, m, FLT_EPSILON), "f32 %d x %d: tau", m, n);
    for (int kk = n; m >= n && kk >= n - 1 && kk >= 0; kk--) {
        double f[NMAX * NMAX], tf[NMAX];
        memcpy(f, a, sizeof(double) * (size_t)(m * n));
        dgeqrf_(&m, &n, f, &m, tf, work, &lw, &info);
        memcpy(x, f, sizeof(double) * (size_t)(m * n));
        memcpy(y, f, sizeof(double) * (size_t)(m * n));
        tg__small_orgqr(TG_F64, m, n, kk, x, tf);
        dorgqr_(&m, &n, &kk, y, &m, tf, work, &lw, &info);
        cr_assert(eq(int, info, 0));
        cr_assert(close_to(x, y, m * n, m, DBL_EPSILON), "orgqr %d x %d, k %d", m, n, kk);
    }
}

Test(lapack_small, geqrf_and_orgqr_match_lapack_square_tall_and_wide)
{
    for (int m = 1; m <= NMAX; m++)
        for (int n = 1; n <= NMAX; n++)
            for (int r = 0; r < 3; r++) {
                double a[NMAX * NMAX];
                fill(a, m * n);
                check_geqrf(m, n, a);
            }
}

Test(lapack_small, geqrf_zero_columns_match_lapack)
{
    for (int n = 1; n <= NMAX; n++)
        for (int c = 0; c < 2; c++) {
            double a[NMAX * NMAX];
            fill(a, n * n);
            if (c == 0)   /* column 0 zero: its reflector is the identity (tau 0) */
                for (int i = 0; i < n; i++) a[i] = 0;
            else   /* column 0 zero below the diagonal */
                for (int i = 1; i < n; i++) a[i] = 0;
            check_geqrf(n, n, a);
        }
}

Test(lapack_small, geqrf_of_2_to_the_s_a_is_2_to_the_s_r_at_extreme_scales)
{
    /* scales at which the squares of the norm would underflow or overflow,
     * and (2^-1000) a beta below LAPACK's safmin, rescaled: by powers of 2
     * every step is exact, so R scales and the reflectors and tau do not
     * change, bit for bit */
    const int ss[4] = {-1000, -530, 530, 1000};
    for (int n = 2; n <= NMAX; n++)
        for (int si = 0; si < 4; si++) {
            double a[NMAX * NMAX], x[NMAX * NMAX], y[NMAX * NMAX], tx[NMAX], ty[NMAX];
            fill(a, n * n);
            for (int i = 0; i < n * n; i++) x[i] = a[i], y[i] = ldexp(a[i], ss[si]);
            tg__small_geqrf(TG_F64, n, n, x, tx);
            tg__small_geqrf(TG_F64, n, n, y, ty);
            for (int j = 0; j < n; j++)
                for (int i = 0; i < n; i++) {
                    const double want = i <= j ? ldexp(x[j * n + i], ss[si]) : x[j * n + i];
                    cr_assert(y[j * n + i] == want, "n %d scale 2^%d: (%d, %d) %g, not %g", n,
                              ss[si], i, j, y[j * n + i], want);
                }
            cr_assert(memcmp(tx, ty, sizeof(double) * (size_t)n) == 0, "n %d scale 2^%d: tau",
                      n, ss[si]);
        }
}

Test(lapack_small, geqrf_propagates_nan_as_lapack)
{
    for (int n = 2; n <= NMAX; n++) {
        double a[NMAX * NMAX], x[NMAX * NMAX], y[NMAX * NMAX], tx[NMAX], ty[NMAX];
        double work[64 * NMAX];
        const int lw = 64 * NMAX;
        int info = 0;
        fill(a, n * n);
        a[n - 1] = NAN;   /* column 0's last element */
        memcpy(x, a, sizeof(double) * (size_t)(n * n));
        memcpy(y, a, sizeof(double) * (size_t)(n * n));
        tg__small_geqrf(TG_F64, n, n, x, tx);
        dgeqrf_(&n, &n, y, &n, ty, work, &lw, &info);
        for (int i = 0; i < n * n; i++)
            cr_assert(eq(int, isnan(x[i]) != 0, isnan(y[i]) != 0), "n %d element %d", n, i);
        cr_assert(isnan(tx[0]) != 0, "n %d: tau[0] %g", n, tx[0]);
    }
}

/* ---- the batched functions on the pool --------------------------------- */

enum { BATCH = 1024 };

/* (BATCH, n, n) of dt: U[-1, 1) plus 2 sqrt(n) on the diagonal, or G G^T /
 * n + I (spd); the matrices zero[0..nz) all zeros. */
static tg_tensor *batch_a(tg_dtype dt, int n, bool spd, int nz, const int *zero)
{
    static double g[BATCH * NMAX * NMAX], a[BATCH * NMAX * NMAX];
    uint64_t s = 99;
    for (int i = 0; i < BATCH * n * n; i++) g[i] = th_uniform_pm1(&s);
    for (int b = 0; b < BATCH; b++)
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++) {
                const double *gb = g + b * n * n;
                double v = gb[i * n + j] + (i == j ? 2 * sqrt((double)n) : 0);
                if (spd) {
                    v = i == j ? 1 : 0;
                    for (int q = 0; q < n; q++) v += gb[i * n + q] * gb[j * n + q] / n;
                }
                a[(b * n + i) * n + j] = v;
            }
    for (int z = 0; z < nz; z++) memset(a + zero[z] * n * n, 0, sizeof(double) * (size_t)(n * n));
    return th_tensor_from(dt, 3, (int64_t[]){BATCH, n, n}, a);
}

static bool same_bits(const tg_tensor *a, const tg_tensor *b)
{
    if (tg_tensor_numel(a) != tg_tensor_numel(b)) return false;
    for (int64_t i = 0; i < tg_tensor_numel(a); i++) {
        const double u = th_at(a, i), v = th_at(b, i);
        if (memcmp(&u, &v, sizeof u) != 0) return false;
    }
    return true;
}

/* Function f on A (B a right-hand side) into y[0..2]; how many outputs. */
static int run_fn(int f, tg_tensor *A, tg_tensor *B, tg_tensor **y)
{
    y[0] = y[1] = NULL;
    switch (f) {
    case 0: OK(tg_linalg_inv(&y[0], A)); return 1;
    case 1: OK(tg_linalg_solve(&y[0], A, B)); return 1;
    case 2: OK(tg_linalg_det(&y[0], A)); return 1;
    case 3: OK(tg_linalg_slogdet(&y[0], &y[1], A)); return 2;
    case 4: OK(tg_linalg_lu_factor(&y[0], &y[1], A)); return 2;
    case 5: OK(tg_linalg_cholesky(&y[0], A, false)); return 1;
    case 6: OK(tg_linalg_solve_triangular(&y[0], A, B, false, true, false)); return 1;
    default: OK(tg_linalg_qr(&y[0], &y[1], A, "reduced")); return 2;
    }
}

Test(lapack_small, batches_same_bits_on_1_and_2_threads_both_sides_of_the_crossover)
{
    const int ns[4] = {1, 4, TG__LAPACK_SMALL_MAX, TG__LAPACK_SMALL_MAX + 1};
    const tg_dtype dts[2] = {TG_F32, TG_F64};
    const int saved = tg_get_num_threads();
    for (int ni = 0; ni < 4; ni++)
        for (int d = 0; d < 2; d++)
            for (int f = 0; f < 8; f++) {
                const int n = ns[ni];
                tg_tensor *A = batch_a(dts[d], n, f == 5, 0, NULL), *y1[2], *y2[2];
                uint64_t s = 7;
                tg_tensor *B = th_rand_tensor(&s, dts[d], 3, (int64_t[]){BATCH, n, 2}, -1, 1);
                OK(tg_set_num_threads(1));
                const int k = run_fn(f, A, B, y1);
                OK(tg_set_num_threads(2));
                run_fn(f, A, B, y2);
                for (int i = 0; i < k; i++)
                    cr_assert(same_bits(y1[i], y2[i]), "n %d dtype %d function %d output %d", n,
                              d, f, i);
                th_release_all(k, y1);
                th_release_all(k, y2);
                tg_tensor_release(A);
                tg_tensor_release(B);
            }
    OK(tg_set_num_threads(saved));
}

Test(lapack_small, inv_times_a_is_the_identity_for_small_n)
{
    for (int n = 1; n <= TG__LAPACK_SMALL_MAX + 1; n++) {
        tg_tensor *A = batch_a(TG_F64, n, false, 0, NULL), *Y = NULL, *P = NULL;
        OK(tg_linalg_inv(&Y, A));
        OK(tg_matmul(&P, Y, A));
        for (int64_t i = 0; i < tg_tensor_numel(P); i++) {
            const int64_t r = i / n % n, c = i % n;
            cr_assert(fabs(th_at(P, i) - (r == c ? 1 : 0)) < 1e-12, "n %d element %lld", n,
                      (long long)i);
        }
        tg_tensor_release(A);
        tg_tensor_release(Y);
        tg_tensor_release(P);
    }
}

Test(lapack_small, singular_batch_names_the_first_singular_matrix_on_2_threads)
{
    static const int zero[2] = {900, 37};
    const int saved = tg_get_num_threads();
    for (int threads = 1; threads <= 2; threads++)
        for (int f = 0; f < 3; f++) {
            tg_tensor *A = batch_a(TG_F32, 4, f == 2, 2, zero), *y = NULL, *p = NULL;
            OK(tg_set_num_threads(threads));
            const int rc = f == 0   ? tg_linalg_inv(&y, A)
                           : f == 1 ? tg_linalg_lu_factor(&y, &p, A)
                                    : tg_linalg_cholesky(&y, A, false);
            cr_assert(eq(int, rc, TG_EINVAL), "function %d threads %d", f, threads);
            cr_assert(strstr(tg_error_message(), "(Batch element 37):") != NULL,
                      "function %d threads %d: %s", f, threads, tg_error_message());
            cr_assert(y == NULL);
            tg_tensor_release(A);
        }
    OK(tg_set_num_threads(saved));
}

Test(lapack_small, qr_of_small_batches_reconstructs_a_with_orthonormal_q)
{
    for (int n = 1; n <= TG__LAPACK_SMALL_MAX + 1; n++) {
        tg_tensor *A = batch_a(TG_F64, n, false, 0, NULL), *Q = NULL, *R = NULL, *QR = NULL,
                  *Qt = NULL, *QtQ = NULL;
        OK(tg_linalg_qr(&Q, &R, A, "reduced"));
        OK(tg_matmul(&QR, Q, R));
        OK(tg_transpose(&Qt, Q, -2, -1));
        OK(tg_matmul(&QtQ, Qt, Q));
        for (int64_t i = 0; i < tg_tensor_numel(A); i++) {
            const int64_t r = i / n % n, c = i % n;
            cr_assert(fabs(th_at(QR, i) - th_at(A, i)) < 1e-12, "n %d element %lld", n,
                      (long long)i);
            cr_assert(fabs(th_at(QtQ, i) - (r == c ? 1 : 0)) < 1e-13, "n %d element %lld", n,
                      (long long)i);
            if (r > c) cr_assert(th_at(R, i) == 0, "n %d: R below the diagonal", n);
        }
        th_release_all(5, (tg_tensor *[]){A, Q, R, QR, Qt});
        tg_tensor_release(QtQ);
    }
}
