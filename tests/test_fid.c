/* tests/test_fid.c - tapegrad/metrics.h (the Fréchet distance, feature
 * statistics, KID's kernel estimate, the Fashion-MNIST feature network) and
 * `tapegrad fid`.
 *
 * The numbers: the distance of a set to itself is 0, that of two Gaussians
 * with commuting covariances is the closed form, and on fixed features it
 * matches torch (tests/golden/fid.safetensors, scripts/make_fid_goldens.py).
 * The committed classifier (data/fid_classifier.safetensors) is checked on
 * the first 1000 images of Fashion-MNIST's test set. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "../examples/dcgan/model.h"
#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define GOLDEN TG_SOURCE_ROOT "/tests/golden/fid.safetensors"
#define WEIGHTS TG_SOURCE_ROOT "/data/fid_classifier.safetensors"

/* The d x d rotation Q = product of Givens rotations by angles from seed. */
static void rotation(double *q, int d, uint64_t seed)
{
    memset(q, 0, (size_t)d * d * sizeof *q);
    for (int i = 0; i < d; i++) q[i * d + i] = 1;
    for (int k = 0; k + 1 < d; k++) {
        double a = 3.0 * th_uniform_pm1(&seed), c = cos(a), s = sin(a);
        for (int r = 0; r < d; r++) {   /* columns k and k + 1 of q rotated */
            double x = q[r * d + k], y = q[r * d + k + 1];
            q[r * d + k] = c * x - s * y;
            q[r * d + k + 1] = s * x + c * y;
        }
    }
}

/* cov = Q diag(ev) Q^T. */
static void with_eigen(double *cov, const double *q, const double *ev, int d)
{
    for (int i = 0; i < d; i++)
        for (int j = 0; j < d; j++) {
            double s = 0;
            for (int k = 0; k < d; k++) s += q[i * d + k] * ev[k] * q[j * d + k];
            cov[i * d + j] = s;
        }
    for (int i = 0; i < d; i++)   /* exactly symmetric */
        for (int j = 0; j < i; j++) cov[j * d + i] = cov[i * d + j];
}

Test(fid, closed_form_of_two_gaussians)
{
    enum { D = 12 };
    double q[D * D], c1[D * D], c2[D * D], e1[D], e2[D], mu1[D], mu2[D], fid;
    uint64_t s = 7;
    /* S1 = Q E1 Q^T and S2 = Q E2 Q^T commute: tr((S1 S2)^(1/2)) = sum sqrt(e1 e2). */
    double want = 0, top1 = 0, top2 = 0;
    for (int i = 0; i < D; i++) {
        e1[i] = 0.1 + 2.0 * (th_uniform_pm1(&s) + 1);
        e2[i] = i == 3 ? 0.0 : 0.05 + 3.0 * (th_uniform_pm1(&s) + 1);   /* one singular */
        mu1[i] = th_uniform_pm1(&s);
        mu2[i] = th_uniform_pm1(&s);
        want += (mu1[i] - mu2[i]) * (mu1[i] - mu2[i]) + e1[i] + e2[i] - 2 * sqrt(e1[i] * e2[i]);
        top1 = fmax(top1, e1[i]);
        top2 = fmax(top2, e2[i]);
    }
    /* The zero eigenvalue of S1 S2 comes out of any eigensolver as some
     * +-D*eps*|S1||S2|, and the square root turns that into an absolute
     * error of up to its root (about 1e-7 here), whichever side of zero the
     * rounding of the machine's BLAS lands on; the rest is relative. */
    const double tol = 1e-12 * want + 2 * sqrt(D * DBL_EPSILON * top1 * top2);
    rotation(q, D, 11);
    with_eigen(c1, q, e1, D);
    with_eigen(c2, q, e2, D);
    cr_assert(eq(int, tg_frechet_distance(&fid, D, mu1, c1, mu2, c2), TG_OK));
    cr_assert(fabs(fid - want) <= tol, "fid %.17g, closed form %.17g", fid, want);
    /* and symmetric in its arguments */
    double back;
    cr_assert(eq(int, tg_frechet_distance(&back, D, mu2, c2, mu1, c1), TG_OK));
    cr_assert(fabs(back - want) <= tol, "reversed %.17g, closed form %.17g", back, want);
    /* S2 = 4 S1 (not diagonal in a shared basis that the code could see):
     * d^2 = |dmu|^2 + (1 - 2)^2 tr S1 */
    for (int i = 0; i < D * D; i++) c2[i] = 4 * c1[i];
    double tr = 0, dm = 0;
    for (int i = 0; i < D; i++) tr += c1[i * D + i], dm += (mu1[i] - mu2[i]) * (mu1[i] - mu2[i]);
    cr_assert(eq(int, tg_frechet_distance(&fid, D, mu1, c1, mu2, c2), TG_OK));
    cr_assert(fabs(fid - (dm + tr)) <= 1e-12 * (dm + tr), "fid %.17g, want %.17g", fid, dm + tr);
}

/* The golden tensor name.what as a malloc'd array of doubles (n of them). */
static double *golden(const tg_st_file *f, const char *name, const char *what, int64_t *n)
{
    char key[64];
    snprintf(key, sizeof key, "%s.%s", name, what);
    const tg_tensor *t = tg_st_get(f, key);
    cr_assert(t != NULL, "%s has no tensor %s", GOLDEN, key);
    *n = tg_tensor_numel(t);
    double *v = malloc((size_t)*n * sizeof *v);
    cr_assert(v != NULL);
    cr_assert(eq(int, tg_tensor_to_doubles(t, v, *n), TG_OK));
    return v;
}

static double max_abs(const double *v, int64_t n)
{
    double m = 0;
    for (int64_t i = 0; i < n; i++) m = fmax(m, fabs(v[i]));
    return m;
}

/* Our mean and covariance of case.<set> against torch's: within 1e-12 of
 * the largest entry. */
static void check_stats(const tg_st_file *f, const char *name, const char *set, double *mu,
                        double *cov)
{
    char what[16];
    int64_t n_mu, n_cov;
    snprintf(what, sizeof what, "mu_%s", set);
    double *mu_t = golden(f, name, what, &n_mu);
    snprintf(what, sizeof what, "cov_%s", set);
    double *cov_t = golden(f, name, what, &n_cov);
    char key[64];
    snprintf(key, sizeof key, "%s.%s", name, set);
    cr_assert(eq(int, tg_feature_stats(mu, cov, tg_st_get(f, key)), TG_OK));
    double sc = max_abs(cov_t, n_cov);
    for (int64_t i = 0; i < n_mu; i++)
        cr_assert(fabs(mu[i] - mu_t[i]) <= 1e-12 * max_abs(mu_t, n_mu), "%s mu[%lld]", key,
                  (long long)i);
    for (int64_t i = 0; i < n_cov; i++)
        cr_assert(fabs(cov[i] - cov_t[i]) <= 1e-12 * sc, "%s cov[%lld]: %.17g vs torch %.17g",
                  key, (long long)i, cov[i], cov_t[i]);
    free(mu_t);
    free(cov_t);
}

Test(fid, matches_torch_on_fixed_features)
{
    tg_st_file *f;
    cr_assert(eq(int, tg_safetensors_load(&f, GOLDEN), TG_OK), "%s: %s", GOLDEN,
              tg_error_message());
    const char *cases[] = {"full", "singular", "lowrank"};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        char key[64];
        snprintf(key, sizeof key, "%s.a", cases[c]);
        const int64_t d = tg_tensor_dim(tg_st_get(f, key), 1);
        double *mu = malloc(2 * (size_t)d * sizeof *mu);
        double *cov = malloc(2 * (size_t)(d * d) * sizeof *cov);
        check_stats(f, cases[c], "a", mu, cov);
        check_stats(f, cases[c], "b", mu + d, cov + d * d);
        int64_t one;
        double *want = golden(f, cases[c], "fid", &one), fid;
        cr_assert(eq(int, tg_frechet_distance(&fid, d, mu, cov, mu + d, cov + d * d), TG_OK));
        cr_assert(fabs(fid - *want) <= 1e-6 * fabs(*want), "%s: fid %.17g, torch %.17g",
                  cases[c], fid, *want);
        /* A set against itself: 0 up to rounding.  When the covariance is
         * singular ("singular": 100 samples of 128 features), M's zero
         * eigenvalues come out as +-eps |M| and their square roots as
         * sqrt(eps |M|): the bound is sqrt(eps) relative, not eps. */
        double self, tr = 0;
        for (int64_t i = 0; i < d; i++) tr += cov[i * d + i];
        cr_assert(eq(int, tg_frechet_distance(&self, d, mu, cov, mu, cov), TG_OK));
        const double tol = strcmp(cases[c], "singular") == 0 ? 1e-7 : 1e-10;
        cr_assert(fabs(self) <= tol * tr, "%s: fid of a set with itself %.3g (trace %.3g)",
                  cases[c], self, tr);
        free(want);
        free(mu);
        free(cov);
    }
    tg_st_free(f);
}

/* ---- KID ---------------------------------------------------------------------- */

static double golden_scalar(const tg_st_file *f, const char *name, const char *what)
{
    int64_t one;
    double *v = golden(f, name, what, &one), x = *v;
    free(v);
    return x;
}

Test(fid, kernel_mmd2_matches_torch_on_fixed_features)
{
    tg_st_file *f;
    cr_assert(eq(int, tg_safetensors_load(&f, GOLDEN), TG_OK), "%s", tg_error_message());
    const char *cases[] = {"full", "singular", "lowrank"};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        char ka[64], kb[64];
        snprintf(ka, sizeof ka, "%s.a", cases[c]);
        snprintf(kb, sizeof kb, "%s.b", cases[c]);
        const tg_tensor *a = tg_st_get(f, ka), *b = tg_st_get(f, kb);
        double v = 0, want = golden_scalar(f, cases[c], "mmd2");
        cr_assert(eq(int, tg_kernel_mmd2(&v, a, b, 3, 0, 1), TG_OK), "%s", tg_error_message());
        cr_assert(fabs(v - want) <= 1e-10 * (1 + fabs(want)), "%s: %.17g, torch %.17g", cases[c],
                  v, want);
        want = golden_scalar(f, cases[c], "mmd2_k2");
        cr_assert(eq(int, tg_kernel_mmd2(&v, a, b, 2, 0.5, -0.25), TG_OK));
        cr_assert(fabs(v - want) <= 1e-10 * (1 + fabs(want)), "%s k2: %.17g, torch %.17g",
                  cases[c], v, want);
        /* symmetric in the two sets */
        double w = 0;
        cr_assert(eq(int, tg_kernel_mmd2(&w, b, a, 3, 0, 1), TG_OK));
        cr_assert(fabs(w - golden_scalar(f, cases[c], "mmd2")) <= 1e-10 * (1 + fabs(w)));
    }
    tg_st_free(f);
}

/* With the linear kernel x.y the estimate has a closed form in the sums of
 * the rows: (|S_a|^2 - sum |a_i|^2) / (m (m - 1)) + (the same for b) -
 * 2 S_a.S_b / (m n).  Rows of more than one BLOCK (256) of the Gram
 * matrices, in f32. */
Test(fid, kernel_mmd2_of_the_linear_kernel_is_its_closed_form)
{
    const int m = 600, n = 300, d = 5;
    tg_tensor *a = th_rand_uniform(TG_F32, 2, (int64_t[]){m, d}, 4);
    tg_tensor *b = th_rand_uniform(TG_F32, 2, (int64_t[]){n, d}, 5);
    double *x = malloc((size_t)m * d * sizeof *x), *y = malloc((size_t)n * d * sizeof *y);
    cr_assert(eq(int, tg_tensor_to_doubles(a, x, (int64_t)m * d), TG_OK));
    cr_assert(eq(int, tg_tensor_to_doubles(b, y, (int64_t)n * d), TG_OK));
    double sa[5] = {0}, sb[5] = {0}, qa = 0, qb = 0;
    for (int i = 0; i < m; i++)
        for (int j = 0; j < d; j++) sa[j] += x[i * d + j], qa += x[i * d + j] * x[i * d + j];
    for (int i = 0; i < n; i++)
        for (int j = 0; j < d; j++) sb[j] += y[i * d + j], qb += y[i * d + j] * y[i * d + j];
    double aa = 0, bb = 0, ab = 0;
    for (int j = 0; j < d; j++) aa += sa[j] * sa[j], bb += sb[j] * sb[j], ab += sa[j] * sb[j];
    const double want = (aa - qa) / ((double)m * (m - 1)) + (bb - qb) / ((double)n * (n - 1)) -
                        2 * ab / ((double)m * n);
    double v = 0;
    cr_assert(eq(int, tg_kernel_mmd2(&v, a, b, 1, 1, 0), TG_OK), "%s", tg_error_message());
    cr_assert(fabs(v - want) <= 1e-12 * (fabs(aa) + fabs(bb)) / ((double)n * n), "%.17g vs %.17g",
              v, want);
    free(x);
    free(y);
    th_release_all(2, (tg_tensor *[]){a, b});
}

/* Subsets as large as both sets are the sets themselves (shuffled): every
 * subset's estimate is the full one, so the mean is it and the spread 0;
 * smaller subsets differ from each other; the rng decides them. */
Test(fid, kid_averages_the_estimate_over_subsets)
{
    tg_tensor *a = th_rand_uniform(TG_F64, 2, (int64_t[]){300, 8}, 6);
    tg_tensor *b = th_rand_uniform(TG_F32, 2, (int64_t[]){300, 8}, 7);
    double full = 0, mean = 0, sd = -1;
    cr_assert(eq(int, tg_kernel_mmd2(&full, a, b, 3, 0, 1), TG_OK));
    tg_kid_opts o = TG_KID_OPTS_INIT;
    o.subsets = 3;
    o.subset_size = 300;
    tg_rng rng;
    tg_rng_init(&rng, 1);
    cr_assert(eq(int, tg_kid(&mean, &sd, a, b, &o, &rng), TG_OK), "%s", tg_error_message());
    cr_assert(fabs(mean - full) <= 1e-12 * (1 + fabs(full)), "%.17g vs %.17g", mean, full);
    cr_assert(sd >= 0 && sd <= 1e-12 * (1 + fabs(full)), "%g", sd);
    o.subsets = 20;
    o.subset_size = 50;
    double m1 = 0, s1 = 0, m2 = 0, s2 = 0, m3 = 0;
    tg_rng_init(&rng, 2);
    cr_assert(eq(int, tg_kid(&m1, &s1, a, b, &o, &rng), TG_OK));
    const tg_rng after = rng;
    tg_rng_init(&rng, 2);
    cr_assert(eq(int, tg_kid(&m2, &s2, a, b, &o, &rng), TG_OK));
    cr_assert(eq(dbl, m1, m2));
    cr_assert(eq(dbl, s1, s2));
    cr_assert(rng.counter == after.counter && rng.counter > 2);
    cr_assert(s1 > 0, "subsets of 50 of 300 differ");
    cr_assert(eq(int, tg_kid(&m3, NULL, a, b, &o, &rng), TG_OK));
    cr_assert(not(eq(dbl, m3, m1)), "the next subsets differ");
    /* the spread divides by the number of subsets, as torchmetrics */
    o.subsets = 1;
    cr_assert(eq(int, tg_kid(&m3, &s1, a, b, &o, &rng), TG_OK));
    cr_assert(eq(dbl, s1, 0.0));
    th_release_all(2, (tg_tensor *[]){a, b});
}

Test(fid, kid_bad_arguments_are_errors_that_name_them)
{
    tg_tensor *a = th_rand_uniform(TG_F32, 2, (int64_t[]){10, 3}, 1);
    tg_tensor *b4 = th_rand_uniform(TG_F32, 2, (int64_t[]){10, 4}, 2);
    tg_tensor *one = th_rand_uniform(TG_F32, 2, (int64_t[]){1, 3}, 3);
    tg_tensor *ints = NULL, *bad = th_rand_uniform(TG_F64, 2, (int64_t[]){10, 3}, 4);
    cr_assert(eq(int, tg_tensor_zeros(&ints, TG_I32, 2, (int64_t[]){10, 3}), TG_OK));
    cr_assert(eq(int, tg_tensor_set(bad, (int64_t[]){7, 2}, NAN), TG_OK));
    double v = 42, sd = 43;
    tg_rng rng;
    tg_rng_init(&rng, 9);
    tg_kid_opts o = TG_KID_OPTS_INIT;
    o.subset_size = 5;
    /* each refusal's status (the messages of some below) */
    const struct {
        int rc, status;
    } cases[] = {
        {tg_kernel_mmd2(NULL, a, a, 3, 0, 1), TG_EINVAL},
        {tg_kernel_mmd2(&v, a, NULL, 3, 0, 1), TG_EINVAL},
        {tg_kernel_mmd2(&v, a, b4, 3, 0, 1), TG_ESHAPE},
        {tg_kernel_mmd2(&v, one, a, 3, 0, 1), TG_EINVAL},
        {tg_kernel_mmd2(&v, a, ints, 3, 0, 1), TG_EDTYPE},
        {tg_kernel_mmd2(&v, a, a, 0, 0, 1), TG_EINVAL},
        {tg_kernel_mmd2(&v, a, a, 3, -1, 1), TG_EINVAL},
        {tg_kernel_mmd2(&v, a, a, 3, 0, NAN), TG_EINVAL},
        {tg_kernel_mmd2(&v, a, bad, 3, 0, 1), TG_EINVAL},
        {tg_kid(&v, &sd, a, a, &o, NULL), TG_EINVAL},
        {tg_kid(NULL, &sd, a, a, &o, &rng), TG_EINVAL},
        {tg_kid(&v, &sd, a, bad, &o, &rng), TG_EINVAL},
        {tg_kid(&v, &sd, a, a, NULL, &rng), TG_EINVAL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        cr_assert(eq(int, cases[i].rc, cases[i].status), "case %zu: %d", i, cases[i].rc);
    /* the messages, one call at a time */
    cr_assert(eq(int, tg_kernel_mmd2(&v, a, b4, 3, 0, 1), TG_ESHAPE));
    th_expect_in(tg_error_message(), "kernel_mmd2: fa has 3 columns but fb 4");
    cr_assert(eq(int, tg_kernel_mmd2(&v, one, a, 3, 0, 1), TG_EINVAL));
    th_expect_in(tg_error_message(), "fa has 1 rows; it needs at least 2");
    cr_assert(eq(int, tg_kernel_mmd2(&v, a, a, 3, -1, 1), TG_EINVAL));
    th_expect_in(tg_error_message(), "gamma=-1 must be finite and >= 0");
    cr_assert(eq(int, tg_kernel_mmd2(&v, a, bad, 3, 0, 1), TG_EINVAL));
    th_expect_in(tg_error_message(), "the features must be finite");
    cr_assert(eq(int, tg_kid(&v, &sd, a, a, NULL, &rng), TG_EINVAL));
    th_expect_in(tg_error_message(), "kid: subset_size=1000 must be <= the rows of fa (10)");
    o.subsets = 0;
    cr_assert(eq(int, tg_kid(&v, &sd, a, a, &o, &rng), TG_EINVAL));
    th_expect_in(tg_error_message(), "subsets=0 must be in [1, 1000000]");
    cr_assert(eq(dbl, v, 42.0));
    cr_assert(eq(dbl, sd, 43.0));
    cr_assert(eq(u64, rng.counter, 0), "on error the rng is untouched");
    th_release_all(5, (tg_tensor *[]){a, b4, one, ints, bad});
}

Test(fid, bad_arguments_are_errors_that_name_them)
{
    double mu[2] = {0, 0}, good[4] = {1, 0.5, 0.5, 2}, bad[4] = {1, 0.5, 0.25, 2}, fid = 42;
    cr_assert(eq(int, tg_frechet_distance(&fid, 0, mu, good, mu, good), TG_EINVAL));
    th_expect_in(tg_error_message(), "d=0 must be in [1, 4096]");
    cr_assert(eq(int, tg_frechet_distance(&fid, 2, mu, good, mu, NULL), TG_EINVAL));
    th_expect_in(tg_error_message(), "must not be NULL");
    cr_assert(eq(int, tg_frechet_distance(&fid, 2, mu, good, mu, bad), TG_EINVAL));
    th_expect_in(tg_error_message(), "cov2 must be symmetric: [1][0]=0.25 differs from [0][1]=0.5");
    double neg[4] = {-1, 0, 0, 1}, nan_mu[2] = {0, NAN};
    cr_assert(eq(int, tg_frechet_distance(&fid, 2, mu, neg, mu, good), TG_EINVAL));
    th_expect_in(tg_error_message(), "cov1[0][0]=-1 must be finite and >= 0");
    cr_assert(eq(int, tg_frechet_distance(&fid, 2, nan_mu, good, mu, good), TG_EINVAL));
    th_expect_in(tg_error_message(), "mu1[1] is not finite");
    cr_assert(eq(dbl, fid, 42.0), "on error *out is untouched");

    tg_tensor *one_row = th_rand_uniform(TG_F32, 2, (int64_t[]){1, 3}, 1);
    tg_tensor *ints = NULL, *three_d = th_rand_uniform(TG_F32, 3, (int64_t[]){2, 2, 2}, 2);
    cr_assert(eq(int, tg_tensor_zeros(&ints, TG_I32, 2, (int64_t[]){4, 3}), TG_OK));
    double m[3], c[9];
    cr_assert(eq(int, tg_feature_stats(m, c, one_row), TG_EINVAL));
    th_expect_in(tg_error_message(), "n=1 rows must be >= 2");
    cr_assert(eq(int, tg_feature_stats(m, c, ints), TG_EDTYPE));
    th_expect_in(tg_error_message(), "must be a float tensor");
    cr_assert(eq(int, tg_feature_stats(m, c, three_d), TG_ESHAPE));
    th_expect_in(tg_error_message(), "must be 2-d (n, d), not 3-d");
    tg_tensor_release(one_row);
    tg_tensor_release(ints);
    tg_tensor_release(three_d);
}

Test(fid, committed_classifier_is_accurate_on_the_test_set)
{
    tg_module *net;
    tg_dataset *ds;
    cr_assert(eq(int, tg_fid_net_load(&net, WEIGHTS), TG_OK), "%s", tg_error_message());
    cr_assert(eq(int, tg_fashion_mnist_load(&ds, NULL, false), TG_OK),
              "Fashion-MNIST (the Debian package dataset-fashion-mnist): %s",
              tg_error_message());
    enum { N = 1000 };
    int64_t idx[N];
    for (int i = 0; i < N; i++) idx[i] = i;
    tg_tensor *x, *y, *feat, *logits;
    cr_assert(eq(int, tg_dataset_batch(&x, &y, ds, idx, N), TG_OK));
    cr_assert(eq(int, tg_fid_features(&feat, &logits, net, x), TG_OK), "%s", tg_error_message());
    cr_assert(eq(int, tg_tensor_ndim(feat), 2));
    cr_assert(eq(i64, tg_tensor_dim(feat, 0), N));
    cr_assert(eq(i64, tg_tensor_dim(feat, 1), TG_FID_FEATURES));
    cr_assert(eq(int, tg_tensor_dtype(feat), TG_F64));
    const float *l = tg_tensor_cdata(logits);
    const int64_t *lab = tg_tensor_cdata(y);
    const double *fv = tg_tensor_cdata(feat);
    int hits = 0, zeros = 0;
    for (int i = 0; i < N; i++) {
        int best = 0;
        for (int c = 1; c < TG_FID_CLASSES; c++)
            if (l[i * TG_FID_CLASSES + c] > l[i * TG_FID_CLASSES + best]) best = c;
        hits += best == lab[i];
    }
    for (int i = 0; i < N * TG_FID_FEATURES; i++) {
        cr_assert(fv[i] >= 0, "features are ReLU outputs");
        zeros += fv[i] == 0;
    }
    cr_assert(hits >= 900, "accuracy %d / %d on the first test images", hits, N);
    cr_assert(zeros < N * TG_FID_FEATURES * 9 / 10, "features are not all clipped");
    tg_tensor_release(x);
    tg_tensor_release(y);
    tg_tensor_release(feat);
    tg_tensor_release(logits);
    tg_dataset_release(ds);
    tg_module_release(net);
}

Test(fid, feature_network_refuses_bad_images_and_weights)
{
    tg_module *net, *other;
    tg_rng rng;
    tg_rng_init(&rng, 3);
    cr_assert(eq(int, tg_fid_net_new(&net, &rng), TG_OK));
    tg_tensor *rgb = th_rand_uniform(TG_F32, 4, (int64_t[]){2, 3, 28, 28}, 4), *feat = NULL;
    cr_assert(eq(int, tg_fid_features(&feat, NULL, net, rgb), TG_ESHAPE));
    th_expect_in(tg_error_message(), "images are (2, 3, 28, 28): expected (N, 1, 28, 28)");
    cr_assert(eq(ptr, feat, NULL));
    cr_assert(eq(int, tg_nn_linear_new(&other, 3, 4, true, &rng), TG_OK));
    tg_tensor *x = th_rand_uniform(TG_F32, 4, (int64_t[]){2, 1, 28, 28}, 5);
    cr_assert(eq(int, tg_fid_features(&feat, NULL, other, x), TG_EINVAL));
    th_expect_in(tg_error_message(), "net must be the feature network");
    /* weights of another network, a corrupt file, a missing file */
    char path[256];
    tg_st_file *f;
    cr_assert(eq(int, tg_st_new(&f), TG_OK));
    cr_assert(eq(int, tg_module_state_dict_save(other, f, NULL), TG_OK));
    th_tmp_dir_make("tg_fid_");
    cr_assert(eq(int, tg_safetensors_save(f, th_tmp_path(path, sizeof path, "w.safetensors")),
                 TG_OK));
    tg_module *loaded = NULL;
    cr_assert(lt(int, tg_fid_net_load(&loaded, path), 0));
    th_expect_in(tg_error_message(), path);
    cr_assert(eq(ptr, loaded, NULL));
    th_write_bytes(path, "\x08\x00\x00\x00\x00\x00\x00\x00{\"a\":1}", 15);
    cr_assert(eq(int, tg_fid_net_load(&loaded, path), TG_EFORMAT));
    th_tmp_dir_remove();
    tg_st_free(f);
    tg_tensor_release(x);
    tg_tensor_release(rgb);
    tg_module_release(other);
    tg_module_release(net);
}

/* ---- the command ------------------------------------------------------------ */

#define FID(...)                                                                   \
    th_run("TG_TOOL", (const char *const[]){"fid", "--weights", WEIGHTS, __VA_ARGS__, NULL})

static void setup(void) { th_tmp_dir_make("tg_fid_cli_"); }
static void teardown(void) { th_tmp_dir_remove(); }

TestSuite(fid_cli, .init = setup, .fini = teardown);

/* A file with one tensor "images" (shape) of values in [lo, hi]. */
static void write_images(const char *name, int ndim, const int64_t *shape, double lo, double hi)
{
    char path[256];
    tg_st_file *f;
    tg_tensor *t = th_rand_uniform(TG_F32, ndim, shape, 9);
    float *p = tg_tensor_data(t);
    for (int64_t i = 0; i < tg_tensor_numel(t); i++)
        p[i] = (float)(lo + (hi - lo) * 0.5 * (p[i] + 1));
    cr_assert(eq(int, tg_st_new(&f), TG_OK));
    cr_assert(eq(int, tg_st_set(f, "images", t), TG_OK));
    cr_assert(eq(int, tg_safetensors_save(f, th_tmp_path(path, sizeof path, name)), TG_OK));
    tg_st_free(f);
    tg_tensor_release(t);
}

/* A randomly initialised DCGAN generator's state dict with prefix (and an
 * n_averaged, as an averaged model's file has, under "module"). */
static void write_generator_as(const char *name, int64_t nz, const char *prefix)
{
    char path[256];
    tg_module *g;
    tg_st_file *f;
    tg_rng rng;
    tg_rng_init(&rng, 1);
    dcgan_arch a = DCGAN_ARCH_INIT;
    a.nz = nz;
    a.g_ch = 8;
    cr_assert(eq(int, dcgan_generator_new(&g, &a, &rng), TG_OK));
    cr_assert(eq(int, tg_st_new(&f), TG_OK));
    cr_assert(eq(int, tg_module_state_dict_save(g, f, prefix), TG_OK));
    tg_tensor *n = NULL;
    cr_assert(eq(int, tg_tensor_full(&n, TG_I64, 0, NULL, 3), TG_OK));
    if (!strcmp(prefix, "module")) cr_assert(eq(int, tg_st_set(f, "n_averaged", n), TG_OK));
    tg_tensor_release(n);
    cr_assert(eq(int, tg_safetensors_save(f, th_tmp_path(path, sizeof path, name)), TG_OK));
    tg_st_free(f);
    tg_module_release(g);
}

static void write_generator(const char *name, int64_t nz)
{
    write_generator_as(name, nz, "gen");
}

static double printed_fid(const char *set)
{
    char want[128];
    snprintf(want, sizeof want, " %s (", set);
    const char *line = strstr(th_out, want);
    cr_assert(line != NULL, "no line for %s in:\n%s", set, th_out);
    while (line > th_out && line[-1] != '\n') line--;
    double v;
    cr_assert(eq(int, sscanf(line, "fid %lf", &v), 1), "%s", line);
    return v;
}

Test(fid_cli, scores_image_files_and_generators)
{
    write_images("a.safetensors", 4, (int64_t[]){300, 1, 28, 28}, -1, 1);
    write_images("b.safetensors", 4, (int64_t[]){200, 1, 28, 28}, -1, 0.2);
    write_generator("g.safetensors", 16);
    cr_assert(eq(int, FID("--count", "250", "a.safetensors", "a.safetensors", "b.safetensors",
                          "g.safetensors"), 0), "%s", th_err);
    th_expect_in(th_out, "a.safetensors (300 images) vs a.safetensors (300 images)");
    th_expect_in(th_out, "g.safetensors (250 images) vs a.safetensors (300 images)");
    cr_assert(eq(dbl, printed_fid("a.safetensors"), 0.0));
    cr_assert(printed_fid("b.safetensors") > 0.0, "%s", th_out);
    double g = printed_fid("g.safetensors");
    /* the same latents (--seed) give the same number */
    cr_assert(eq(int, FID("--count", "250", "a.safetensors", "g.safetensors"), 0), "%s", th_err);
    cr_assert(eq(dbl, printed_fid("g.safetensors"), g));
    cr_assert(eq(int, FID("--count", "250", "--seed", "5", "a.safetensors", "g.safetensors"), 0));
    cr_assert(not(eq(dbl, printed_fid("g.safetensors"), g)));
    /* the same generator as an averaged model's file (module.net.*) */
    write_generator_as("ema.safetensors", 16, "module");
    cr_assert(eq(int, FID("--count", "250", "a.safetensors", "ema.safetensors"), 0), "%s",
              th_err);
    cr_assert(eq(dbl, printed_fid("ema.safetensors"), g));
}

/* --kid SIZE: a kid line after each fid line, the same for the same --seed;
 * a set against itself scores near 0, a different one higher. */
static double printed_kid(const char *set)
{
    for (const char *line = th_out; line && *line;) {
        double v, sd;
        char name[128];
        if (sscanf(line, "kid %lf %lf %127s", &v, &sd, name) == 3 && !strcmp(name, set)) {
            cr_assert(sd >= 0, "%s", line);
            return v;
        }
        line = strchr(line, '\n');
        if (line) line++;
    }
    cr_assert(false, "no kid line for %s in:\n%s", set, th_out);
    return 0;
}

Test(fid_cli, kid_with_the_kid_option)
{
    write_images("a.safetensors", 4, (int64_t[]){120, 1, 28, 28}, -1, 1);
    write_images("b.safetensors", 4, (int64_t[]){100, 1, 28, 28}, -1, 0.2);
    cr_assert(eq(int, FID("--kid", "50", "a.safetensors", "a.safetensors", "b.safetensors"), 0),
              "%s", th_err);
    th_expect_in(th_out, "kid ");
    th_expect_in(th_out, " b.safetensors (100 images) vs a.safetensors (120 images)\n");
    const double self = printed_kid("a.safetensors"), other = printed_kid("b.safetensors");
    cr_assert(other > 10 * fabs(self), "kid %g against itself, %g against another", self, other);
    cr_assert(eq(int, FID("--kid", "50", "a.safetensors", "b.safetensors"), 0), "%s", th_err);
    cr_assert(eq(dbl, printed_kid("b.safetensors"), other));
    cr_assert(eq(int, FID("--kid", "50", "--seed", "3", "a.safetensors", "b.safetensors"), 0));
    cr_assert(not(eq(dbl, printed_kid("b.safetensors"), other)));
    cr_assert(eq(int, FID("a.safetensors", "b.safetensors"), 0));
    cr_assert(strstr(th_out, "kid ") == NULL, "no kid line without --kid");
    cr_assert(eq(int, FID("--kid", "101", "a.safetensors", "b.safetensors"), 1));
    th_expect_in(th_err, "b.safetensors: kid: subset_size=101 must be <= the rows of fa (120) "
                         "and of fb (100)");
    cr_assert(eq(int, FID("--kid", "1", "a.safetensors", "b.safetensors"), 2));
    th_expect_in(th_err, "--kid '1' must be an integer in 2..1000000");
}

Test(fid_cli, fashion_mnist_sets_from_data)
{
    char dir[256];
    th_tmp_path(dir, sizeof dir, "idx");
    cr_assert(eq(int, mkdir(dir, 0700), 0));
    th_write_idx_set(dir, "train", 40, 28, 1);
    th_write_idx_set(dir, "t10k", 30, 28, 2);
    cr_assert(eq(int, FID("--data", dir, "test", "train:20", "train"), 0), "%s", th_err);
    th_expect_in(th_out, "train:20 (20 images) vs test (30 images)");
    th_expect_in(th_out, "train (40 images) vs test (30 images)");
    cr_assert(eq(int, FID("--data", dir, "test", "train:41"), 1));
    th_expect_in(th_err, "train:41: the training set has 40 images, fewer than 41");
}

Test(fid_cli, bad_inputs_are_clear_errors)
{
    write_images("a.safetensors", 4, (int64_t[]){10, 1, 28, 28}, -1, 1);
    write_images("rgb.safetensors", 4, (int64_t[]){10, 3, 28, 28}, -1, 1);
    write_images("bytes.safetensors", 4, (int64_t[]){10, 1, 28, 28}, 0, 255);
    char path[256];
    th_write_bytes(th_tmp_path(path, sizeof path, "corrupt.safetensors"), "\xff\xff\xff\xff", 4);
    cr_assert(eq(int, FID("a.safetensors", "corrupt.safetensors"), 1));
    th_expect_in(th_err, "tapegrad fid: corrupt.safetensors: ");
    cr_assert(eq(int, FID("a.safetensors", "rgb.safetensors"), 1));
    th_expect_in(th_err, "rgb.safetensors: fid_features: images are (10, 3, 28, 28): expected "
                         "(N, 1, 28, 28)");
    cr_assert(eq(int, FID("a.safetensors", "bytes.safetensors"), 1));
    th_expect_in(th_err, "bytes.safetensors: images[");
    th_expect_in(th_err, "pixels must be in [-1, 1]");
    cr_assert(eq(int, FID("missing.safetensors", "a.safetensors"), 1));
    th_expect_in(th_err, "missing.safetensors: ");
    /* a generator whose first weight has the wrong shape */
    tg_st_file *f;
    tg_tensor *w = th_rand_uniform(TG_F32, 2, (int64_t[]){100, 16}, 3);
    cr_assert(eq(int, tg_st_new(&f), TG_OK));
    cr_assert(eq(int, tg_st_set(f, "gen.net.0.weight", w), TG_OK));
    cr_assert(eq(int, tg_safetensors_save(f, th_tmp_path(path, sizeof path, "g.safetensors")),
                 TG_OK));
    cr_assert(eq(int, FID("a.safetensors", "g.safetensors"), 1));
    th_expect_in(th_err, "g.safetensors: gen.net.0.weight is (100, 16): expected (C*49, nz)");
    write_generator("g2.safetensors", 16);
    tg_st_free(f);
    tg_tensor_release(w);
    /* weights that are not the classifier's */
    cr_assert(eq(int, th_run("TG_TOOL", (const char *const[]){"fid", "--weights", "g2.safetensors",
                                                               "a.safetensors", "a.safetensors",
                                                               NULL}), 1));
    th_expect_in(th_err, "tapegrad fid: --weights: fid_net_load: g2.safetensors: ");
    /* no --weights outside the source tree (the test's directory) and not
     * installed: the message gives both defaults, not an option not given */
    if (access("/usr/local/share/tapegrad/fid_classifier.safetensors", F_OK) != 0) {
        cr_assert(eq(int, th_run("TG_TOOL", (const char *const[]){"fid", "a.safetensors",
                                                                   "a.safetensors", NULL}), 1));
        th_expect_in(th_err, "tapegrad fid: the classifier's weights (neither "
                             "data/fid_classifier.safetensors nor ");
        th_expect_in(th_err, "give --weights PATH");
    }
    /* usage */
    cr_assert(eq(int, FID("a.safetensors"), 2));
    th_expect_in(th_err, "give a reference set and at least one set to score");
    cr_assert(eq(int, FID("--count", "1", "a.safetensors", "a.safetensors"), 2));
    th_expect_in(th_err, "--count '1' must be an integer in 2..1000000");
    cr_assert(eq(int, FID("a.safetensors", "--seed", "1", "a.safetensors"), 2));
    th_expect_in(th_err, "options come before the sets");
}
