/* src/core/lapack.c - the LAPACK routines of tapegrad's linear algebra
 * (src/ops/linalg_lu.c, linalg_tri.c), from OpenBLAS (whose library carries
 * LAPACK) or the reference LAPACK, in f32 or f64, on one matrix at a time.
 *
 * tapegrad's matrices are row-major, LAPACK's column-major: the buffer of a
 * row-major n x n matrix A read column-major is A^T.  Each wrapper says
 * which of the two it factors, so that the callers need no transposing
 * copies: det(A^T) = det(A); A^T = P L U solves A X = B as (A^T)^T X = B
 * (getrs with trans 'T'); the Cholesky factor U (A = U^T U) of a symmetric
 * A's column-major buffer is, read row-major, the lower factor L = U^T.
 * Matrices of n <= TG__LAPACK_SMALL_MAX go to the plain loops of
 * src/core/lapack_small.c (same layouts, same pivots rule).
 * The trailing size_t arguments are the hidden lengths of Fortran's
 * character arguments. */
#include <cblas.h>

#include "core/core.h"
#include "core/lapack_small.h"

extern void sgetrf_(const int *m, const int *n, float *a, const int *lda, int *ipiv, int *info);
extern void dgetrf_(const int *m, const int *n, double *a, const int *lda, int *ipiv, int *info);
extern void sgetrs_(const char *trans, const int *n, const int *nrhs, const float *a,
                    const int *lda, const int *ipiv, float *b, const int *ldb, int *info,
                    size_t trans_len);
extern void dgetrs_(const char *trans, const int *n, const int *nrhs, const double *a,
                    const int *lda, const int *ipiv, double *b, const int *ldb, int *info,
                    size_t trans_len);
extern void spotrf_(const char *uplo, const int *n, float *a, const int *lda, int *info,
                    size_t uplo_len);
extern void dpotrf_(const char *uplo, const int *n, double *a, const int *lda, int *info,
                    size_t uplo_len);
extern void sgesdd_(const char *jobz, const int *m, const int *n, float *a, const int *lda,
                    float *s, float *u, const int *ldu, float *vt, const int *ldvt, float *work,
                    const int *lwork, int *iwork, int *info, size_t jobz_len);
extern void dgesdd_(const char *jobz, const int *m, const int *n, double *a, const int *lda,
                    double *s, double *u, const int *ldu, double *vt, const int *ldvt,
                    double *work, const int *lwork, int *iwork, int *info, size_t jobz_len);

extern void ssyevd_(const char *jobz, const char *uplo, const int *n, float *a, const int *lda,
                    float *w, float *work, const int *lwork, int *iwork, const int *liwork,
                    int *info, size_t jobz_len, size_t uplo_len);
extern void dsyevd_(const char *jobz, const char *uplo, const int *n, double *a, const int *lda,
                    double *w, double *work, const int *lwork, int *iwork, const int *liwork,
                    int *info, size_t jobz_len, size_t uplo_len);

extern void sgels_(const char *trans, const int *m, const int *n, const int *nrhs, float *a,
                   const int *lda, float *b, const int *ldb, float *work, const int *lwork,
                   int *info, size_t trans_len);
extern void dgels_(const char *trans, const int *m, const int *n, const int *nrhs, double *a,
                   const int *lda, double *b, const int *ldb, double *work, const int *lwork,
                   int *info, size_t trans_len);
extern void sgelsy_(const int *m, const int *n, const int *nrhs, float *a, const int *lda,
                    float *b, const int *ldb, int *jpvt, const float *rcond, int *rank,
                    float *work, const int *lwork, int *info);
extern void dgelsy_(const int *m, const int *n, const int *nrhs, double *a, const int *lda,
                    double *b, const int *ldb, int *jpvt, const double *rcond, int *rank,
                    double *work, const int *lwork, int *info);
extern void sgelsd_(const int *m, const int *n, const int *nrhs, float *a, const int *lda,
                    float *b, const int *ldb, float *s, const float *rcond, int *rank,
                    float *work, const int *lwork, int *iwork, int *info);
extern void dgelsd_(const int *m, const int *n, const int *nrhs, double *a, const int *lda,
                    double *b, const int *ldb, double *s, const double *rcond, int *rank,
                    double *work, const int *lwork, int *iwork, int *info);
extern void sgelss_(const int *m, const int *n, const int *nrhs, float *a, const int *lda,
                    float *b, const int *ldb, float *s, const float *rcond, int *rank,
                    float *work, const int *lwork, int *info);
extern void dgelss_(const int *m, const int *n, const int *nrhs, double *a, const int *lda,
                    double *b, const int *ldb, double *s, const double *rcond, int *rank,
                    double *work, const int *lwork, int *info);

extern void sgeqrf_(const int *m, const int *n, float *a, const int *lda, float *tau,
                    float *work, const int *lwork, int *info);
extern void dgeqrf_(const int *m, const int *n, double *a, const int *lda, double *tau,
                    double *work, const int *lwork, int *info);
extern void sorgqr_(const int *m, const int *n, const int *k, float *a, const int *lda,
                    const float *tau, float *work, const int *lwork, int *info);
extern void dorgqr_(const int *m, const int *n, const int *k, double *a, const int *lda,
                    const double *tau, double *work, const int *lwork, int *info);

int tg__lapack_getrf(tg_dtype dt, int n, void *a, int *ipiv)
{
    return tg__lapack_getrf_mn(dt, n, n, a, ipiv);
}

int tg__lapack_getrf_mn(tg_dtype dt, int m, int n, void *a, int *ipiv)
{
    int info = 0;
    if (m == 0 || n == 0) return 0;
    if (m <= TG__LAPACK_SMALL_MAX && n <= TG__LAPACK_SMALL_MAX)
        return tg__small_getrf(dt, m, n, a, ipiv);
    if (dt == TG_F64) dgetrf_(&m, &n, a, &m, ipiv, &info);
    else sgetrf_(&m, &n, a, &m, ipiv, &info);
    TG_ASSERT(info >= 0);
    return info;
}

static void getrs(char trans, tg_dtype dt, int n, int nrhs, const void *lu, const int *ipiv,
                  void *b)
{
    int info = 0;
    if (n == 0 || nrhs == 0) return;
    if (n <= TG__LAPACK_SMALL_MAX) {
        tg__small_getrs(dt, trans == 'T', n, nrhs, lu, ipiv, b);
        return;
    }
    if (dt == TG_F64) dgetrs_(&trans, &n, &nrhs, lu, &n, ipiv, b, &n, &info, 1);
    else sgetrs_(&trans, &n, &nrhs, lu, &n, ipiv, b, &n, &info, 1);
    TG_ASSERT(info == 0);
}

void tg__lapack_getrs_t(tg_dtype dt, int n, int nrhs, const void *lu, const int *ipiv, void *b)
{
    getrs('T', dt, n, nrhs, lu, ipiv, b);
}

void tg__lapack_getrs_n(tg_dtype dt, int n, int nrhs, const void *lu, const int *ipiv, void *b)
{
    getrs('N', dt, n, nrhs, lu, ipiv, b);
}

int tg__lapack_potrf_lower(tg_dtype dt, int n, void *a)
{
    const char uplo = 'U';   /* column-major upper = row-major lower */
    int info = 0;
    if (n == 0) return 0;
    if (n <= TG__LAPACK_SMALL_MAX) return tg__small_potrf_lower(dt, n, a);
    if (dt == TG_F64) dpotrf_(&uplo, &n, a, &n, &info, 1);
    else spotrf_(&uplo, &n, a, &n, &info, 1);
    TG_ASSERT(info >= 0);
    return info;
}

void tg__blas_trsm_left(tg_dtype dt, bool upper, bool unit, int n, int nrhs, const void *a,
                        void *b)
{
    if (n == 0 || nrhs == 0) return;
    if (n <= TG__LAPACK_SMALL_MAX) {
        tg__small_trsm_left(dt, upper, unit, n, nrhs, a, b);
        return;
    }
    const CBLAS_UPLO ul = upper ? CblasUpper : CblasLower;
    const CBLAS_DIAG dg = unit ? CblasUnit : CblasNonUnit;
    if (dt == TG_F64)
        cblas_dtrsm(CblasRowMajor, CblasLeft, ul, CblasNoTrans, dg, n, nrhs, 1.0, a, n, b, nrhs);
    else
        cblas_strsm(CblasRowMajor, CblasLeft, ul, CblasNoTrans, dg, n, nrhs, 1.0f, a, n, b,
                    nrhs);
}

/* A row-major (m, n) is A^T (n x m) column-major: A^T = U' S V'^T, so A =
 * V' S U'^T, and V'^T (VT', column-major k x m or m x m) read row-major is
 * U; U' (column-major n x k or n x n) read row-major is Vh. */
void tg__lapack_svd_query(tg_dtype dt, int m, int n, bool full, int *lwork, int *liwork)
{
    const char jobz = full ? 'A' : 'S';
    const int k = m < n ? m : n, ldvt = full ? m : k;
    int info = 0, lw = -1;
    double q = 0;
    float qf = 0;
    *lwork = *liwork = 1;
    if (m == 0 || n == 0) return;
    if (dt == TG_F64)
        dgesdd_(&jobz, &n, &m, NULL, &n, NULL, NULL, &n, NULL, &ldvt, &q, &lw, NULL, &info, 1);
    else
        sgesdd_(&jobz, &n, &m, NULL, &n, NULL, NULL, &n, NULL, &ldvt, &qf, &lw, NULL, &info, 1);
    TG_ASSERT(info == 0);
    lw = dt == TG_F64 ? (int)q : (int)qf;
    *lwork = lw > 1 ? lw : 1;
    *liwork = 8 * k;
}

int tg__lapack_svd_work(tg_dtype dt, int m, int n, void *a, bool full, void *s, void *u,
                        void *vh, void *work, int lwork, int *iwork)
{
    const char jobz = full ? 'A' : 'S';
    const int k = m < n ? m : n, ldvt = full ? m : k;
    int info = 0;
    if (m == 0 || n == 0) return TG_OK;
    if (dt == TG_F64)
        dgesdd_(&jobz, &n, &m, a, &n, s, vh, &n, u, &ldvt, work, &lwork, iwork, &info, 1);
    else
        sgesdd_(&jobz, &n, &m, a, &n, s, vh, &n, u, &ldvt, work, &lwork, iwork, &info, 1);
    TG_ASSERT(info >= 0);
    if (info != 0)
        return tg__error(TG_EUNSUPPORTED, "the singular value decomposition (gesdd) did not "
                         "converge (info=%d)", info);
    return TG_OK;
}

int tg__lapack_svd(tg_dtype dt, int m, int n, void *a, bool full, void *s, void *u, void *vh)
{
    int lwork, liwork;
    if (m == 0 || n == 0) return TG_OK;
    tg__lapack_svd_query(dt, m, n, full, &lwork, &liwork);
    void *work = tg__malloc((size_t)lwork * tg_dtype_size(dt));
    int *iwork = tg__malloc((size_t)liwork * sizeof *iwork);
    const int rc = work && iwork ? tg__lapack_svd_work(dt, m, n, a, full, s, u, vh, work, lwork,
                                                       iwork)
                                 : TG_ENOMEM;
    free(work);
    free(iwork);
    return rc;
}

void tg__lapack_syevd_query(tg_dtype dt, int n, bool lower, bool vectors, int *lwork,
                            int *liwork)
{
    const char jobz = vectors ? 'V' : 'N', uplo = lower ? 'U' : 'L';
    int info = 0, lw = -1, liw = -1, iq = 0;
    double q = 0;
    float qf = 0;
    *lwork = *liwork = 1;
    if (n == 0) return;
    if (dt == TG_F64)
        dsyevd_(&jobz, &uplo, &n, NULL, &n, NULL, &q, &lw, &iq, &liw, &info, 1, 1);
    else
        ssyevd_(&jobz, &uplo, &n, NULL, &n, NULL, &qf, &lw, &iq, &liw, &info, 1, 1);
    TG_ASSERT(info == 0);
    lw = dt == TG_F64 ? (int)q : (int)qf;
    *lwork = lw > 1 ? lw : 1;
    *liwork = iq > 1 ? iq : 1;
}

int tg__lapack_syevd_work(tg_dtype dt, int n, void *a, void *w, bool lower, bool vectors,
                          void *work, int lwork, int *iwork, int liwork)
{
    /* row-major lower = column-major upper */
    const char jobz = vectors ? 'V' : 'N', uplo = lower ? 'U' : 'L';
    int info = 0;
    if (n == 0) return TG_OK;
    if (dt == TG_F64)
        dsyevd_(&jobz, &uplo, &n, a, &n, w, work, &lwork, iwork, &liwork, &info, 1, 1);
    else
        ssyevd_(&jobz, &uplo, &n, a, &n, w, work, &lwork, iwork, &liwork, &info, 1, 1);
    TG_ASSERT(info >= 0);
    if (info != 0)
        return tg__error(TG_EUNSUPPORTED, "the symmetric eigensolver (syevd) did not "
                         "converge (info=%d)", info);
    return TG_OK;
}

int tg__lapack_syevd(tg_dtype dt, int n, void *a, void *w, bool lower)
{
    int lwork, liwork;
    if (n == 0) return TG_OK;
    tg__lapack_syevd_query(dt, n, lower, true, &lwork, &liwork);
    void *work = tg__malloc((size_t)lwork * tg_dtype_size(dt));
    int *iwork = tg__malloc((size_t)liwork * sizeof *iwork);
    const int rc = work && iwork ? tg__lapack_syevd_work(dt, n, a, w, lower, true, work, lwork,
                                                         iwork, liwork)
                                 : TG_ENOMEM;
    free(work);
    free(iwork);
    return rc;
}

/* One call of geqrf (orgqr: q) with a workspace query first. */
static int qr_call(tg_dtype dt, bool q, int m, int n, int k, void *a, void *tau)
{
    int info = 0, lwork = -1;
    double wq = 0;
    float wqf = 0;
    if (dt == TG_F64) {
        if (q) dorgqr_(&m, &n, &k, a, &m, tau, &wq, &lwork, &info);
        else dgeqrf_(&m, &n, a, &m, tau, &wq, &lwork, &info);
    } else {
        if (q) sorgqr_(&m, &n, &k, a, &m, tau, &wqf, &lwork, &info);
        else sgeqrf_(&m, &n, a, &m, tau, &wqf, &lwork, &info);
    }
    TG_ASSERT(info == 0);
    lwork = dt == TG_F64 ? (int)wq : (int)wqf;
    if (lwork < 1) lwork = 1;
    void *work = tg__malloc((size_t)lwork * tg_dtype_size(dt));
    if (!work) return TG_ENOMEM;
    if (dt == TG_F64) {
        if (q) dorgqr_(&m, &n, &k, a, &m, tau, work, &lwork, &info);
        else dgeqrf_(&m, &n, a, &m, tau, work, &lwork, &info);
    } else {
        if (q) sorgqr_(&m, &n, &k, a, &m, tau, work, &lwork, &info);
        else sgeqrf_(&m, &n, a, &m, tau, work, &lwork, &info);
    }
    free(work);
    TG_ASSERT(info == 0);
    return TG_OK;
}

int tg__lapack_geqrf(tg_dtype dt, int m, int n, void *a, void *tau)
{
    if (m == 0 || n == 0) return TG_OK;
    if (m <= TG__LAPACK_SMALL_MAX && n <= TG__LAPACK_SMALL_MAX) {
        tg__small_geqrf(dt, m, n, a, tau);
        return TG_OK;
    }
    return qr_call(dt, false, m, n, m < n ? m : n, a, tau);
}

int tg__lapack_orgqr(tg_dtype dt, int m, int n, int k, void *a, void *tau)
{
    if (m == 0 || n == 0) return TG_OK;
    if (m <= TG__LAPACK_SMALL_MAX) {
        tg__small_orgqr(dt, m, n, k, a, tau);
        return TG_OK;
    }
    return qr_call(dt, true, m, n, k, a, tau);
}

/* One least-squares driver call (lwork -1: the workspace query, its size
 * into work[0] and, for gelsd, iwork's into iwork[0]). */
static void gels_call(tg_dtype dt, char driver, int m, int n, int nrhs, void *a, void *b,
                      int ldb, double rcond, void *s, int *rank, int *jpvt, void *work,
                      int lwork, int *iwork, int *info)
{
    const char tr = 'N';
    const float rf = (float)rcond;
    const bool d = dt == TG_F64;
    switch (driver) {
    case 'g':
        if (d) dgels_(&tr, &m, &n, &nrhs, a, &m, b, &ldb, work, &lwork, info, 1);
        else sgels_(&tr, &m, &n, &nrhs, a, &m, b, &ldb, work, &lwork, info, 1);
        break;
    case 'y':
        if (d) dgelsy_(&m, &n, &nrhs, a, &m, b, &ldb, jpvt, &rcond, rank, work, &lwork, info);
        else sgelsy_(&m, &n, &nrhs, a, &m, b, &ldb, jpvt, &rf, rank, work, &lwork, info);
        break;
    case 'd':
        if (d) dgelsd_(&m, &n, &nrhs, a, &m, b, &ldb, s, &rcond, rank, work, &lwork, iwork, info);
        else sgelsd_(&m, &n, &nrhs, a, &m, b, &ldb, s, &rf, rank, work, &lwork, iwork, info);
        break;
    default:
        TG_ASSERT(driver == 's');
        if (d) dgelss_(&m, &n, &nrhs, a, &m, b, &ldb, s, &rcond, rank, work, &lwork, info);
        else sgelss_(&m, &n, &nrhs, a, &m, b, &ldb, s, &rf, rank, work, &lwork, info);
    }
}

int tg__lapack_lstsq(tg_dtype dt, char driver, int m, int n, int nrhs, void *a, void *b,
                     int ldb, double rcond, void *s, int *rank)
{
    const size_t es = tg_dtype_size(dt);
    const int k = m < n ? m : n;
    int info = 0, iq = 1, r = 0;
    double q = 0;
    float qf = 0;
    if (rank) *rank = 0;
    if (k == 0 || nrhs == 0) return 0;
    int *jpvt = driver == 'y' ? tg__calloc((size_t)n, sizeof *jpvt) : NULL;
    if (driver == 'y' && !jpvt) return TG_ENOMEM;
    gels_call(dt, driver, m, n, nrhs, a, b, ldb, rcond, s, &r, jpvt,
              dt == TG_F64 ? (void *)&q : (void *)&qf, -1, &iq, &info);
    TG_ASSERT(info == 0);
    int lwork = dt == TG_F64 ? (int)q : (int)qf;
    lwork = lwork > 1 ? lwork : 1;
    const int liwork = iq > 1 ? iq : 1;
    void *work = tg__malloc((size_t)lwork * es);
    int *iwork = driver == 'd' ? tg__malloc((size_t)liwork * sizeof *iwork) : NULL;
    int rc = TG_ENOMEM;
    if (work && (driver != 'd' || iwork)) {
        gels_call(dt, driver, m, n, nrhs, a, b, ldb, rcond, s, &r, jpvt, work, lwork, iwork,
                  &info);
        TG_ASSERT(info >= 0);
        rc = info;
        if (rank) *rank = driver == 'g' ? 0 : r;
    }
    free(work);
    free(iwork);
    free(jpvt);
    return rc;
}
