/* src/metrics/frechet.c - the Fréchet distance between two Gaussians and the
 * mean and covariance of a set of features, in f64.
 *
 * tr((S1 S2)^(1/2)) is computed as tr(M^(1/2)) with M = S1^(1/2) S2 S1^(1/2)
 * (metrics.h says why they are equal): M is symmetric positive semi-definite,
 * so its square root's trace is the sum of the square roots of its
 * eigenvalues, with no complex parts to drop as scipy's sqrtm of the
 * non-symmetric S1 S2 has.  S1^(1/2) = V diag(sqrt(lambda)) V^T from S1's
 * eigen-decomposition, formed as B B^T with B = V diag(lambda^(1/4)).
 * Matrices are d x d column-major; being symmetric, every one of them reads
 * the same row-major. */
#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "tapegrad/metrics.h"

/* LAPACK's symmetric eigensolver (divide and conquer), from OpenBLAS or the
 * reference LAPACK.  The two trailing arguments are the hidden lengths of the
 * character arguments that Fortran compilers pass. */
extern void dsyevd_(const char *jobz, const char *uplo, const int *n, double *a, const int *lda,
                    double *w, double *work, const int *lwork, int *iwork, const int *liwork,
                    int *info, size_t jobz_len, size_t uplo_len);

/* Eigenvalues of the symmetric d x d matrix a (ascending, into w) and, with
 * vectors, its eigenvectors as the columns of a (overwritten either way). */
static int sym_eig(double *a, double *w, int d, bool vectors)
{
    const char jobz = vectors ? 'V' : 'N', uplo = 'L';
    int info = 0, lwork = -1, liwork = -1, iw_query = 0;
    double w_query = 0;
    dsyevd_(&jobz, &uplo, &d, a, &d, w, &w_query, &lwork, &iw_query, &liwork, &info, 1, 1);
    TG_ASSERT(info == 0);
    lwork = (int)w_query;
    liwork = iw_query;
    double *work = malloc((size_t)lwork * sizeof *work);
    int *iwork = malloc((size_t)liwork * sizeof *iwork);
    int rc = TG_OK;
    if (!work || !iwork) {
        rc = tg__error(TG_ENOMEM, "frechet_distance: out of memory for the eigensolver");
        goto done;
    }
    dsyevd_(&jobz, &uplo, &d, a, &d, w, work, &lwork, iwork, &liwork, &info, 1, 1);
    if (info != 0)
        rc = tg__error(TG_EUNSUPPORTED, "frechet_distance: the eigensolver (dsyevd) did not "
                       "converge (info=%d)", info);
done:
    free(work);
    free(iwork);
    return rc;
}

/* TG_OK when cov (d x d) is finite and symmetric with a non-negative
 * diagonal, else TG_EINVAL naming the entry. */
static int check_cov(const double *cov, int64_t d, const char *name)
{
    for (int64_t i = 0; i < d; i++) {
        double cii = cov[i * d + i];
        if (!(cii >= 0) || isinf(cii))
            return tg__error(TG_EINVAL, "frechet_distance: %s[%lld][%lld]=%g must be finite "
                             "and >= 0 (a variance)", name, (long long)i, (long long)i, cii);
        for (int64_t j = 0; j < i; j++) {
            double a = cov[i * d + j], b = cov[j * d + i];
            if (!isfinite(a) || !isfinite(b))
                return tg__error(TG_EINVAL, "frechet_distance: %s[%lld][%lld] is not finite",
                                 name, (long long)(isfinite(a) ? j : i),
                                 (long long)(isfinite(a) ? i : j));
            if (fabs(a - b) > 1e-9 * (cii + cov[j * d + j]))
                return tg__error(TG_EINVAL, "frechet_distance: %s must be symmetric: "
                                 "[%lld][%lld]=%.17g differs from [%lld][%lld]=%.17g",
                                 name, (long long)i, (long long)j, a, (long long)j,
                                 (long long)i, b);
        }
    }
    return TG_OK;
}

static int check_args(int64_t d, const double *mu1, const double *cov1, const double *mu2,
                      const double *cov2)
{
    TG_CHECK(mu1 && cov1 && mu2 && cov2, TG_EINVAL,
             "frechet_distance: mu1, cov1, mu2 and cov2 must not be NULL");
    TG_CHECK(d >= 1 && d <= TG_FRECHET_MAX_DIM, TG_EINVAL,
             "frechet_distance: d=%lld must be in [1, %d]", (long long)d, TG_FRECHET_MAX_DIM);
    for (int64_t i = 0; i < d; i++)
        TG_CHECK(isfinite(mu1[i]) && isfinite(mu2[i]), TG_EINVAL,
                 "frechet_distance: %s[%lld] is not finite", isfinite(mu1[i]) ? "mu2" : "mu1",
                 (long long)i);
    int rc = check_cov(cov1, d, "cov1");
    return rc < 0 ? rc : check_cov(cov2, d, "cov2");
}

/* tr(M^(1/2)) for M = S1^(1/2) S2 S1^(1/2); buf holds 4 d*d + d doubles. */
static int trace_sqrt_product(double *tr, const double *s1, const double *s2, int d, double *buf)
{
    const size_t dd = (size_t)d * (size_t)d;
    double *v = buf, *r = v + dd, *t = r + dd, *m = t + dd, *w = m + dd;
    memcpy(v, s1, dd * sizeof *v);
    int rc = sym_eig(v, w, d, true);
    if (rc < 0) return rc;
    /* v's columns scaled by lambda^(1/4): then S1^(1/2) = v v^T. */
    for (int j = 0; j < d; j++) {
        double s = w[j] > 0 ? sqrt(sqrt(w[j])) : 0.0;
        for (int i = 0; i < d; i++) v[(size_t)j * d + i] *= s;
    }
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasTrans, d, d, d, 1.0, v, d, v, d, 0.0, r, d);
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, d, d, d, 1.0, r, d, s2, d, 0.0, t, d);
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, d, d, d, 1.0, t, d, r, d, 0.0, m, d);
    /* M is symmetric up to rounding; the eigensolver reads the lower half. */
    for (int j = 0; j < d; j++)
        for (int i = j + 1; i < d; i++) {
            double a = 0.5 * (m[(size_t)j * d + i] + m[(size_t)i * d + j]);
            m[(size_t)j * d + i] = m[(size_t)i * d + j] = a;
        }
    if ((rc = sym_eig(m, w, d, false)) < 0) return rc;
    double s = 0;
    for (int i = 0; i < d; i++) s += w[i] > 0 ? sqrt(w[i]) : 0.0;
    *tr = s;
    return TG_OK;
}

int tg_frechet_distance(double *out, int64_t d, const double *mu1, const double *cov1,
                        const double *mu2, const double *cov2)
{
    TG_CHECK(out, TG_EINVAL, "frechet_distance: out must not be NULL");
    int rc = check_args(d, mu1, cov1, mu2, cov2);
    if (rc < 0) return rc;
    const size_t dd = (size_t)d * (size_t)d;
    double *buf = malloc((4 * dd + (size_t)d) * sizeof *buf);
    TG_CHECK(buf, TG_ENOMEM, "frechet_distance: out of memory (d=%lld)", (long long)d);
    double tr_sqrt = 0;
    rc = trace_sqrt_product(&tr_sqrt, cov1, cov2, (int)d, buf);
    free(buf);
    if (rc < 0) return rc;
    double diff = 0, tr = 0;
    for (int64_t i = 0; i < d; i++) {
        double e = mu1[i] - mu2[i];
        diff += e * e;
        tr += cov1[i * d + i] + cov2[i * d + i];
    }
    *out = diff + tr - 2.0 * tr_sqrt;
    return TG_OK;
}

int tg_feature_stats(double *mean, double *cov, const tg_tensor *features)
{
    TG_CHECK(mean && cov && features, TG_EINVAL,
             "feature_stats: mean, cov and features must not be NULL");
    TG_CHECK(tg_tensor_ndim(features) == 2, TG_ESHAPE,
             "feature_stats: features must be 2-d (n, d), not %d-d", tg_tensor_ndim(features));
    TG_CHECK(tg_dtype_is_float(tg_tensor_dtype(features)), TG_EDTYPE,
             "feature_stats: features must be a float tensor, not %s",
             tg_dtype_name(tg_tensor_dtype(features)));
    const int64_t n = tg_tensor_dim(features, 0), d = tg_tensor_dim(features, 1);
    TG_CHECK(n >= 2, TG_EINVAL, "feature_stats: n=%lld rows must be >= 2 for a covariance",
             (long long)n);
    TG_CHECK(d >= 1 && d <= TG_FRECHET_MAX_DIM, TG_ESHAPE,
             "feature_stats: d=%lld columns must be in [1, %d]", (long long)d,
             TG_FRECHET_MAX_DIM);
    TG_CHECK(n <= INT_MAX, TG_ESHAPE, "feature_stats: n=%lld rows must be <= %d",
             (long long)n, INT_MAX);
    double *x = malloc((size_t)n * (size_t)d * sizeof *x), *mu = calloc((size_t)d, sizeof *mu);
    int rc = TG_OK;
    if (!x || !mu) {
        rc = tg__error(TG_ENOMEM, "feature_stats: out of memory (n=%lld, d=%lld)",
                       (long long)n, (long long)d);
        goto done;
    }
    if ((rc = tg_tensor_to_doubles(features, x, n * d)) < 0) goto done;
    /* x is (n, d) row-major: column-major (d, n), one feature vector a column. */
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < d; j++) mu[j] += x[i * d + j];
    for (int64_t j = 0; j < d; j++) mu[j] /= (double)n;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < d; j++) x[i * d + j] -= mu[j];
    /* cov = Xc Xc^T / (n - 1) with Xc the centred (d, n) column-major matrix:
     * the lower half from dsyrk, mirrored. */
    cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, (int)d, (int)n, 1.0 / (double)(n - 1),
                x, (int)d, 0.0, cov, (int)d);
    for (int64_t j = 0; j < d; j++)
        for (int64_t i = j + 1; i < d; i++) cov[i * d + j] = cov[j * d + i];
    memcpy(mean, mu, (size_t)d * sizeof *mean);
done:
    free(x);
    free(mu);
    return rc;
}
