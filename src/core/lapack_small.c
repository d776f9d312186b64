/* src/core/lapack_small.c - LU with partial pivoting, its solves,
 * Cholesky, triangular solves and the Householder QR of one small matrix
 * (n <= TG__LAPACK_SMALL_MAX) as plain loops, in the layouts and
 * conventions of the LAPACK wrappers of src/core/lapack.c, which call them
 * for such sizes.  OpenBLAS's LAPACK and
 * BLAS interfaces take a global lock each call to allocate their buffer: a
 * batch of 4 x 4 matrices spends more on it than on the arithmetic, and the
 * pool's threads calling at once wait on each other.
 *
 * The algorithms are the unblocked ones of the reference LAPACK (getf2,
 * potf2, the column and dot-product forms of trsm, geqr2 and org2r), so the pivots follow
 * LAPACK's rule: in column j the first row of largest |value| (idamax),
 * and a pivot of |p| >= the smallest normal number scales the column by
 * 1 / p.  The values agree with OpenBLAS's blocked routines within
 * rounding, not bit for bit.  Each matrix takes one path for its size, so
 * results do not depend on the thread count. */
#include <float.h>
#include <math.h>

#include "core/lapack_small.h"

/* getf2 on the column-major m x n a (lda m): a = P L U, L unit lower
 * (below the diagonal), U on and above; ipiv 1-based.  Column by column
 * (left-looking, as OpenBLAS's getf2): column j takes the interchanges
 * so far, then each element minus the dot product of L's row with the
 * column's part above it, summed first and subtracted once, so that a
 * column that is a sum of earlier ones (an exactly singular matrix) comes
 * out as exactly zero as in LAPACK's.  Returns 0, or the 1-based index of
 * U's first exactly zero diagonal element (the factorization is still
 * completed, as LAPACK's). */
#define GETF2(name, T, ABS, TINY)                                                          \
    static int name(int m, int n, T *a, int *ipiv)                                         \
    {                                                                                      \
        const int k = m < n ? m : n;                                                       \
        int info = 0;                                                                      \
        for (int j = 0; j < n; j++) {                                                      \
            T *b = a + (size_t)j * (size_t)m;                                              \
            const int top = j < m ? j : m;                                                 \
            for (int i = 0; i < top; i++) {                                                \
                const int p = ipiv[i] - 1;                                                 \
                const T t = b[i];                                                          \
                b[i] = b[p];                                                               \
                b[p] = t;                                                                  \
            }                                                                              \
            for (int i = 0; i < m; i++) {   /* L(i, 0:q) . b(0:q), q = min(i, j) */        \
                const int q = i < top ? i : top;                                           \
                T dot = 0;                                                                 \
                for (int c = 0; c < q; c++) dot += a[(size_t)c * (size_t)m + (size_t)i] * b[c]; \
                b[i] -= dot;                                                               \
            }                                                                              \
            if (j >= k) continue;                                                          \
            int p = j;                                                                     \
            T best = ABS(b[j]);                                                            \
            for (int i = j + 1; i < m; i++)                                                \
                if (ABS(b[i]) > best) best = ABS(b[i]), p = i;                             \
            ipiv[j] = p + 1;                                                               \
            if (b[p] != 0) {                                                               \
                if (p != j)   /* rows j and p of columns 0..j */                           \
                    for (int c = 0; c <= j; c++) {                                         \
                        T *col = a + (size_t)c * (size_t)m, t = col[j];                    \
                        col[j] = col[p];                                                   \
                        col[p] = t;                                                        \
                    }                                                                      \
                if (ABS(b[j]) >= TINY) {                                                   \
                    const T r = 1 / b[j];                                                  \
                    for (int i = j + 1; i < m; i++) b[i] *= r;                             \
                } else {                                                                   \
                    for (int i = j + 1; i < m; i++) b[i] /= b[j];                          \
                }                                                                          \
            } else if (info == 0) {                                                        \
                info = j + 1;                                                              \
            }                                                                              \
        }                                                                                  \
        return info;                                                                       \
    }

/* getrs on the column-major n x n factors lu = P L U (of A^T, for a
 * row-major A: see src/core/lapack.c) and the column-major b (n x nrhs).
 * trans: A X = B, that is (P L U)^T X = B: U^T Y = B forward, L^T Z = Y
 * backward, then X = P Z (the interchanges in reverse order).  Else
 * P L U X = B: the interchanges in order, L forward, U backward. */
#define GETRS(name, T)                                                                     \
    static void name(bool trans, int n, int nrhs, const T *lu, const int *ipiv, T *b)      \
    {                                                                                      \
        for (int r = 0; r < nrhs; r++) {                                                   \
            T *x = b + (size_t)r * (size_t)n;                                              \
            if (trans) {                                                                   \
                for (int i = 0; i < n; i++) {   /* U(0:i, i) is column i */                \
                    const T *ci = lu + (size_t)i * (size_t)n;                              \
                    T t = x[i];                                                            \
                    for (int q = 0; q < i; q++) t -= ci[q] * x[q];                         \
                    x[i] = t / ci[i];                                                      \
                }                                                                          \
                for (int i = n - 1; i >= 0; i--) {   /* L(i+1:n, i) is column i */         \
                    const T *ci = lu + (size_t)i * (size_t)n;                              \
                    T t = x[i];                                                            \
                    for (int q = i + 1; q < n; q++) t -= ci[q] * x[q];                     \
                    x[i] = t;                                                              \
                }                                                                          \
                for (int i = n - 1; i >= 0; i--) {                                         \
                    const int p = ipiv[i] - 1;                                             \
                    const T t = x[i];                                                      \
                    x[i] = x[p];                                                           \
                    x[p] = t;                                                              \
                }                                                                          \
                continue;                                                                  \
            }                                                                              \
            for (int i = 0; i < n; i++) {                                                  \
                const int p = ipiv[i] - 1;                                                 \
                const T t = x[i];                                                          \
                x[i] = x[p];                                                               \
                x[p] = t;                                                                  \
            }                                                                              \
            for (int j = 0; j < n; j++) {                                                  \
                const T *cj = lu + (size_t)j * (size_t)n;                                  \
                for (int i = j + 1; i < n; i++) x[i] -= x[j] * cj[i];                      \
            }                                                                              \
            for (int j = n - 1; j >= 0; j--) {                                             \
                const T *cj = lu + (size_t)j * (size_t)n;                                  \
                x[j] /= cj[j];                                                             \
                for (int i = 0; i < j; i++) x[i] -= x[j] * cj[i];                          \
            }                                                                              \
        }                                                                                  \
    }

/* potf2 on the row-major lower triangle of a: L(j, j) = sqrt(A(j, j) -
 * sum_q L(j, q)^2), then the rest of column j times 1 / L(j, j).  On a
 * non-positive (or NaN) L(j, j)^2 it is stored there and j + 1 returned,
 * the later columns left as they were (LAPACK's). */
#define POTF2(name, T, SQRT)                                                               \
    static int name(int n, T *a)                                                           \
    {                                                                                      \
        for (int j = 0; j < n; j++) {                                                      \
            T *rj = a + (size_t)j * (size_t)n;                                             \
            T d = rj[j];                                                                   \
            for (int q = 0; q < j; q++) d -= rj[q] * rj[q];                                \
            if (!(d > 0)) {                                                                \
                rj[j] = d;                                                                 \
                return j + 1;                                                              \
            }                                                                              \
            d = SQRT(d);                                                                   \
            rj[j] = d;                                                                     \
            const T r = 1 / d;                                                             \
            for (int i = j + 1; i < n; i++) {                                              \
                T *ri = a + (size_t)i * (size_t)n, t = ri[j];                              \
                for (int q = 0; q < j; q++) t -= ri[q] * rj[q];                            \
                ri[j] = t * r;                                                             \
            }                                                                              \
        }                                                                                  \
        return 0;                                                                          \
    }

/* B = A^-1 B, row-major, A (n x n) triangular, B (n x nrhs): row i of B
 * minus A(i, q) times the solved rows q, then over A(i, i) unless unit. */
#define TRSM(name, T)                                                                      \
    static void name(bool upper, bool unit, int n, int nrhs, const T *a, T *b)             \
    {                                                                                      \
        for (int s = 0; s < n; s++) {                                                      \
            const int i = upper ? n - 1 - s : s;                                           \
            const int q0 = upper ? i + 1 : 0, q1 = upper ? n : i;                          \
            T *bi = b + (size_t)i * (size_t)nrhs;                                          \
            const T *ai = a + (size_t)i * (size_t)n;                                       \
            for (int q = q0; q < q1; q++) {                                                \
                const T *bq = b + (size_t)q * (size_t)nrhs;                                \
                for (int c = 0; c < nrhs; c++) bi[c] -= ai[q] * bq[c];                     \
            }                                                                              \
            if (!unit)                                                                     \
                for (int c = 0; c < nrhs; c++) bi[c] /= ai[i];                             \
        }                                                                                  \
    }

/* larfg, larf and the Householder QR (geqr2) and its Q (org2r) on
 * column-major matrices (lda m), the reference LAPACK's unblocked
 * routines, which its geqrf and orgqr call for fewer than 32 columns.
 * larfg: the reflector H = I - tau v v^T (v(0) = 1, the rest into x) with
 * H [alpha; x] = [beta; 0], beta = -sign(alpha) |[alpha; x]|; tau = 0
 * when x is zero.  Its norm is scaled by the largest |x_i| (nrm2's aim:
 * no overflow or underflow in the squares), and a beta below safmin =
 * MIN / (EPS / 2) is rescaled as LAPACK does, at most 20 times. */
#define HOUSEHOLDER(sfx, T, ABS, SQRT, MINV, MAXV, EPSV)                                         \
    static T nrm2_##sfx(int n, const T *x)                                                 \
    {                                                                                      \
        T big = 0, s = 0;                                                                  \
        for (int i = 0; i < n; i++) {                                                      \
            if (x[i] != x[i]) return x[i];                                                 \
            big = ABS(x[i]) > big ? ABS(x[i]) : big;                                       \
        }                                                                                  \
        if (big == 0 || big > MAXV) return big;                                            \
        for (int i = 0; i < n; i++) s += (x[i] / big) * (x[i] / big);                      \
        return big * SQRT(s);                                                              \
    }                                                                                      \
    static T lapy2_##sfx(T x, T y)   /* sqrt(x^2 + y^2), LAPACK's dlapy2 */                 \
    {                                                                                      \
        const T w = ABS(x) > ABS(y) ? ABS(x) : ABS(y), z = ABS(x) > ABS(y) ? ABS(y) : ABS(x); \
        if (z == 0 || w > MAXV) return w;                                                  \
        return w * SQRT(1 + (z / w) * (z / w));                                            \
    }                                                                                      \
    static void larfg_##sfx(int n, T *alpha, T *x, T *tau)                                 \
    {                                                                                      \
        *tau = 0;                                                                          \
        if (n <= 1) return;                                                                \
        T xnorm = nrm2_##sfx(n - 1, x);                                                    \
        if (xnorm == 0) return;                                                            \
        T beta = -(*alpha >= 0 ? 1 : -1) * lapy2_##sfx(*alpha, xnorm);                     \
        const T safmin = MINV / (EPSV / 2), rsafmn = 1 / safmin;                           \
        int knt = 0;                                                                       \
        if (ABS(beta) < safmin) {                                                          \
            do {                                                                           \
                knt++;                                                                     \
                for (int i = 0; i < n - 1; i++) x[i] *= rsafmn;                            \
                beta *= rsafmn;                                                            \
                *alpha *= rsafmn;                                                          \
            } while (ABS(beta) < safmin && knt < 20);                                      \
            xnorm = nrm2_##sfx(n - 1, x);                                                  \
            beta = -(*alpha >= 0 ? 1 : -1) * lapy2_##sfx(*alpha, xnorm);                   \
        }                                                                                  \
        *tau = (beta - *alpha) / beta;                                                     \
        const T r = 1 / (*alpha - beta);                                                   \
        for (int i = 0; i < n - 1; i++) x[i] *= r;                                         \
        for (int j = 0; j < knt; j++) beta *= safmin;                                      \
        *alpha = beta;                                                                     \
    }                                                                                      \
    /* C = H C, C (m x n, lda ldc), H = I - tau v v^T: w = C^T v, C -= tau v w^T */        \
    static void larf_left_##sfx(int m, int n, const T *v, T tau, T *c, int ldc)           \
    {                                                                                      \
        if (tau == 0) return;                                                              \
        for (int j = 0; j < n; j++) {                                                      \
            T *cj = c + (size_t)j * (size_t)ldc, w = 0;                                    \
            for (int i = 0; i < m; i++) w += cj[i] * v[i];                                 \
            w *= tau;                                                                      \
            for (int i = 0; i < m; i++) cj[i] -= v[i] * w;                                 \
        }                                                                                  \
    }                                                                                      \
    static void geqr2_##sfx(int m, int n, T *a, T *tau)                                    \
    {                                                                                      \
        const int k = m < n ? m : n;                                                       \
        for (int i = 0; i < k; i++) {                                                      \
            T *d = a + (size_t)i * (size_t)m + (size_t)i;   /* a(i, i) */                  \
            larfg_##sfx(m - i, d, d + (i + 1 < m ? 1 : 0), &tau[i]);                       \
            if (i + 1 < n) {                                                               \
                const T aii = *d;                                                          \
                *d = 1;                                                                    \
                larf_left_##sfx(m - i, n - i - 1, d, tau[i], d + m, m);                    \
                *d = aii;                                                                  \
            }                                                                              \
        }                                                                                  \
    }                                                                                      \
    static void org2r_##sfx(int m, int n, int k, T *a, const T *tau)                       \
    {                                                                                      \
        for (int j = k; j < n; j++) {   /* columns k..n-1 of the identity */               \
            T *cj = a + (size_t)j * (size_t)m;                                             \
            for (int l = 0; l < m; l++) cj[l] = 0;                                         \
            cj[j] = 1;                                                                     \
        }                                                                                  \
        for (int i = k - 1; i >= 0; i--) {                                                 \
            T *ci = a + (size_t)i * (size_t)m, *d = ci + i;                                \
            if (i + 1 < n) {                                                               \
                *d = 1;                                                                    \
                larf_left_##sfx(m - i, n - i - 1, d, tau[i], d + m, m);                    \
            }                                                                              \
            for (int l = i + 1; l < m; l++) ci[l] *= -tau[i];                              \
            *d = 1 - tau[i];                                                               \
            for (int l = 0; l < i; l++) ci[l] = 0;                                         \
        }                                                                                  \
    }

GETF2(getf2_f32, float, fabsf, FLT_MIN)
GETF2(getf2_f64, double, fabs, DBL_MIN)
GETRS(getrs_f32, float)
GETRS(getrs_f64, double)
POTF2(potf2_f32, float, sqrtf)
POTF2(potf2_f64, double, sqrt)
TRSM(trsm_f32, float)
TRSM(trsm_f64, double)
HOUSEHOLDER(f32, float, fabsf, sqrtf, FLT_MIN, FLT_MAX, FLT_EPSILON)
HOUSEHOLDER(f64, double, fabs, sqrt, DBL_MIN, DBL_MAX, DBL_EPSILON)

int tg__small_getrf(tg_dtype dt, int m, int n, void *a, int *ipiv)
{
    return dt == TG_F64 ? getf2_f64(m, n, a, ipiv) : getf2_f32(m, n, a, ipiv);
}

void tg__small_getrs(tg_dtype dt, bool trans, int n, int nrhs, const void *lu, const int *ipiv,
                     void *b)
{
    if (dt == TG_F64) getrs_f64(trans, n, nrhs, lu, ipiv, b);
    else getrs_f32(trans, n, nrhs, lu, ipiv, b);
}

int tg__small_potrf_lower(tg_dtype dt, int n, void *a)
{
    return dt == TG_F64 ? potf2_f64(n, a) : potf2_f32(n, a);
}

void tg__small_trsm_left(tg_dtype dt, bool upper, bool unit, int n, int nrhs, const void *a,
                         void *b)
{
    if (dt == TG_F64) trsm_f64(upper, unit, n, nrhs, a, b);
    else trsm_f32(upper, unit, n, nrhs, a, b);
}

void tg__small_geqrf(tg_dtype dt, int m, int n, void *a, void *tau)
{
    if (dt == TG_F64) geqr2_f64(m, n, a, tau);
    else geqr2_f32(m, n, a, tau);
}

void tg__small_orgqr(tg_dtype dt, int m, int n, int k, void *a, const void *tau)
{
    if (dt == TG_F64) org2r_f64(m, n, k, a, tau);
    else org2r_f32(m, n, k, a, tau);
}
