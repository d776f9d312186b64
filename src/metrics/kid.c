/* src/metrics/kid.c - the kernel two-sample statistic of KID (metrics.h):
 * the unbiased squared MMD under a polynomial kernel, in f64, over random
 * subsets of two sets of features.
 *
 * The kernel sums come from Gram matrices made a block of rows at a time
 * (BLOCK rows of one set against every row of the other, by dgemm), so the
 * memory is BLOCK x max(m, n) doubles, not m x n.  Within one set only the
 * pairs i > j are formed, each counted twice. */
#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "tapegrad/metrics.h"

enum { BLOCK = 256 };

static double kernel(double dot, int degree, double gamma, double coef)
{
    const double base = gamma * dot + coef;
    double k = 1;
    for (int e = 0; e < degree; e++) k *= base;
    return k;
}

/* The sum of k(a_i, b_j) over every i < m, j < n, or, with b NULL, twice
 * the sum over j < i < m of k(a_i, a_j).  a (m, d) and b (n, d) row-major;
 * g holds BLOCK x max(m, n) doubles. */
static double kernel_sum(const double *a, int m, const double *b, int n, int d, int degree,
                         double gamma, double coef, double *g)
{
    double sum = 0;
    for (int i0 = 0; i0 < m; i0 += BLOCK) {
        const int rows = m - i0 < BLOCK ? m - i0 : BLOCK, cols = b ? n : i0 + rows;
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, cols, d, 1.0,
                    a + (size_t)i0 * (size_t)d, d, b ? b : a, d, 0.0, g, cols);
        for (int r = 0; r < rows; r++) {
            const int end = b ? n : i0 + r;
            double s = 0;
            for (int j = 0; j < end; j++) s += kernel(g[(size_t)r * cols + j], degree, gamma, coef);
            sum += b ? s : 2 * s;
        }
    }
    return sum;
}

/* The unbiased squared MMD of a (m, d) and b (n, d), m, n >= 2. */
static double mmd2(const double *a, int m, const double *b, int n, int d, int degree,
                   double gamma, double coef, double *g)
{
    const double kaa = kernel_sum(a, m, NULL, 0, d, degree, gamma, coef, g);
    const double kbb = kernel_sum(b, n, NULL, 0, d, degree, gamma, coef, g);
    const double kab = kernel_sum(a, m, b, n, d, degree, gamma, coef, g);
    return kaa / ((double)m * (m - 1)) + kbb / ((double)n * (n - 1)) -
           2 * kab / ((double)m * n);
}

/* Checks a features tensor (n >= min_rows rows) and gives its row and
 * column counts. */
static int check_features(const char *fn, const char *name, const tg_tensor *f, int64_t min_rows,
                          int *n, int *d)
{
    TG_CHECK(f != NULL, TG_EINVAL, "%s: %s must not be NULL", fn, name);
    TG_CHECK(tg_tensor_ndim(f) == 2, TG_ESHAPE, "%s: %s must be 2-d (n, d), not %d-d", fn, name,
             tg_tensor_ndim(f));
    TG_CHECK(tg_dtype_is_float(tg_tensor_dtype(f)), TG_EDTYPE,
             "%s: %s must be a float tensor, not %s", fn, name,
             tg_dtype_name(tg_tensor_dtype(f)));
    const int64_t rows = tg_tensor_dim(f, 0), cols = tg_tensor_dim(f, 1);
    TG_CHECK(rows >= min_rows && rows <= INT_MAX, TG_EINVAL,
             "%s: %s has %lld rows; it needs at least %lld (and at most %d)", fn, name,
             (long long)rows, (long long)min_rows, INT_MAX);
    TG_CHECK(cols >= 1 && cols <= TG_FRECHET_MAX_DIM, TG_ESHAPE,
             "%s: %s has d=%lld columns; d must be in [1, %d]", fn, name, (long long)cols,
             TG_FRECHET_MAX_DIM);
    *n = (int)rows;
    *d = (int)cols;
    return TG_OK;
}

static int check_kernel(const char *fn, int degree, double gamma, double coef)
{
    TG_CHECK(degree >= 1 && degree <= 16, TG_EINVAL, "%s: degree=%d must be in [1, 16]", fn,
             degree);
    TG_CHECK(isfinite(gamma) && gamma >= 0, TG_EINVAL,
             "%s: gamma=%g must be finite and >= 0 (0: 1 / d)", fn, gamma);
    TG_CHECK(isfinite(coef), TG_EINVAL, "%s: coef=%g must be finite", fn, coef);
    return TG_OK;
}

/* The rows of f as doubles (a new buffer in *x). */
static int rows_of(const tg_tensor *f, int n, int d, double **x)
{
    *x = tg__malloc((size_t)n * (size_t)d * sizeof **x);
    if (!*x) return TG_ENOMEM;
    const int rc = tg_tensor_to_doubles(f, *x, (int64_t)n * d);
    if (rc < 0) {
        free(*x);
        *x = NULL;
    }
    return rc;
}

static bool all_finite(const double *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return false;
    return true;
}

/* fa (m, d) and fb (n, d) checked, m, n >= 2. */
static int check_pair(const char *fn, const tg_tensor *fa, const tg_tensor *fb, int *m, int *n,
                      int *d)
{
    int db;
    TG_TRY(check_features(fn, "fa", fa, 2, m, d));
    TG_TRY(check_features(fn, "fb", fb, 2, n, &db));
    TG_CHECK(*d == db, TG_ESHAPE, "%s: fa has %d columns but fb %d", fn, *d, db);
    return TG_OK;
}

/* The rows of fa and fb as doubles (new buffers in *a and *b, freed by the
 * caller either way), which must be finite. */
static int load_pair(const char *fn, const tg_tensor *fa, const tg_tensor *fb, int m, int n,
                     int d, double **a, double **b)
{
    int rc = rows_of(fa, m, d, a);
    if (rc >= 0) rc = rows_of(fb, n, d, b);
    if (rc >= 0 && (!all_finite(*a, (size_t)m * d) || !all_finite(*b, (size_t)n * d)))
        rc = tg__error(TG_EINVAL, "%s: the features must be finite", fn);
    return rc;
}

int tg_kernel_mmd2(double *out, const tg_tensor *fa, const tg_tensor *fb, int degree,
                   double gamma, double coef)
{
    const char *fn = "kernel_mmd2";
    int m, n, d;
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", fn);
    TG_TRY(check_pair(fn, fa, fb, &m, &n, &d));
    TG_TRY(check_kernel(fn, degree, gamma, coef));
    if (gamma == 0) gamma = 1.0 / d;
    double *a = NULL, *b = NULL, *g = NULL;
    int rc = load_pair(fn, fa, fb, m, n, d, &a, &b);
    if (rc >= 0 && !(g = tg__malloc((size_t)BLOCK * (size_t)(m > n ? m : n) * sizeof *g)))
        rc = TG_ENOMEM;
    if (rc >= 0) *out = mmd2(a, m, b, n, d, degree, gamma, coef, g);
    free(a);
    free(b);
    free(g);
    return rc;
}

/* The first k entries of idx[0..n) a uniform sample without replacement
 * (a partial Fisher-Yates shuffle of the identity). */
static void sample(int *idx, int n, int k, tg_rng *rng)
{
    for (int i = 0; i < n; i++) idx[i] = i;
    for (int i = 0; i < k; i++) {
        int j = i + (int)(tg_rng_uniform(rng) * (double)(n - i));
        if (j >= n) j = n - 1;
        const int t = idx[i];
        idx[i] = idx[j];
        idx[j] = t;
    }
}

static void gather_rows(double *dst, const double *x, const int *idx, int k, int d)
{
    for (int i = 0; i < k; i++)
        memcpy(dst + (size_t)i * d, x + (size_t)idx[i] * d, (size_t)d * sizeof *dst);
}

int tg_kid(double *mean, double *std, const tg_tensor *fa, const tg_tensor *fb,
           const tg_kid_opts *opts, tg_rng *rng)
{
    const char *fn = "kid";
    const tg_kid_opts o = opts ? *opts : (tg_kid_opts)TG_KID_OPTS_INIT;
    int m, n, d;
    TG_CHECK(mean != NULL, TG_EINVAL, "%s: mean must not be NULL", fn);
    TG_CHECK(rng != NULL, TG_EINVAL, "%s: rng must not be NULL", fn);
    TG_CHECK(o.subsets >= 1 && o.subsets <= 1000000, TG_EINVAL,
             "%s: subsets=%lld must be in [1, 1000000]", fn, (long long)o.subsets);
    TG_CHECK(o.subset_size >= 2, TG_EINVAL, "%s: subset_size=%lld must be >= 2", fn,
             (long long)o.subset_size);
    TG_TRY(check_pair(fn, fa, fb, &m, &n, &d));
    TG_CHECK(o.subset_size <= m && o.subset_size <= n, TG_EINVAL,
             "%s: subset_size=%lld must be <= the rows of fa (%d) and of fb (%d)", fn,
             (long long)o.subset_size, m, n);
    TG_TRY(check_kernel(fn, o.degree, o.gamma, o.coef));
    const double gamma = o.gamma == 0 ? 1.0 / d : o.gamma;
    const int k = (int)o.subset_size;
    double *a = NULL, *b = NULL, *sa = NULL, *sb = NULL, *g = NULL, *v = NULL;
    int *ia = NULL, *ib = NULL;
    int rc = load_pair(fn, fa, fb, m, n, d, &a, &b);
    if (rc >= 0) {
        sa = tg__malloc((size_t)k * (size_t)d * sizeof *sa);
        sb = tg__malloc((size_t)k * (size_t)d * sizeof *sb);
        g = tg__malloc((size_t)BLOCK * (size_t)k * sizeof *g);
        v = tg__malloc((size_t)o.subsets * sizeof *v);
        ia = tg__malloc((size_t)m * sizeof *ia);
        ib = tg__malloc((size_t)n * sizeof *ib);
        if (!sa || !sb || !g || !v || !ia || !ib) rc = TG_ENOMEM;
    }
    if (rc >= 0) {
        double sum = 0, var = 0;
        for (int64_t s = 0; s < o.subsets; s++) {
            sample(ia, m, k, rng);
            sample(ib, n, k, rng);
            gather_rows(sa, a, ia, k, d);
            gather_rows(sb, b, ib, k, d);
            v[s] = mmd2(sa, k, sb, k, d, o.degree, gamma, o.coef, g);
            sum += v[s];
        }
        const double mu = sum / (double)o.subsets;
        for (int64_t s = 0; s < o.subsets; s++) var += (v[s] - mu) * (v[s] - mu);
        *mean = mu;
        if (std) *std = sqrt(var / (double)o.subsets);
    }
    free(a);
    free(b);
    free(sa);
    free(sb);
    free(g);
    free(v);
    free(ia);
    free(ib);
    return rc;
}
