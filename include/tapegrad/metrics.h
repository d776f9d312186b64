/* tapegrad/metrics.h - sample quality of image generators: the Fréchet
 * distance between two sets of features (FID), the kernel distance (KID),
 * and the Fashion-MNIST feature network whose penultimate activations are
 * the features.
 *
 *   tg_module *net; tg_tensor *fa, *fb;
 *   tg_fid_net_load(&net, "data/fid_classifier.safetensors");
 *   tg_fid_features(&fa, net, real);          // real (N, 1, 28, 28) in [-1, 1]
 *   tg_fid_features(&fb, net, fake);          // fa, fb (N, 128) f64
 *   double *mu_a = ..., *cov_a = ...;         // 128 and 128 * 128 doubles
 *   tg_feature_stats(mu_a, cov_a, fa);        // likewise mu_b, cov_b
 *   double fid;
 *   tg_frechet_distance(&fid, 128, mu_a, cov_a, mu_b, cov_b);
 *
 * The Fréchet distance between N(mu1, S1) and N(mu2, S2) (Dowson and Landau
 * 1982), as FID (Heusel et al. 2017) uses it:
 *   d^2 = |mu1 - mu2|^2 + tr(S1) + tr(S2) - 2 tr((S1 S2)^(1/2)).
 * (S1 S2)^(1/2) is not symmetric, but it is similar to the symmetric positive
 * semi-definite M = S1^(1/2) S2 S1^(1/2): S1 S2 = S1^(1/2) M S1^(-1/2), so
 * tr((S1 S2)^(1/2)) = tr(M^(1/2)) = sum_i sqrt(lambda_i(M)).  Both square roots
 * come from LAPACK's symmetric eigensolver (dsyevd) in f64; eigenvalues below
 * zero, which rounding gives a singular covariance, count as zero.
 *
 * Ownership: every tensor argument is borrowed; every tensor returned is a new
 * reference.  On error the outputs are untouched.
 */
#ifndef TAPEGRAD_METRICS_H
#define TAPEGRAD_METRICS_H

#include <stdint.h>

#include "tapegrad/export.h"
#include "tapegrad/nn.h"
#include "tapegrad/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The largest feature dimension tg_frechet_distance accepts. */
#define TG_FRECHET_MAX_DIM 4096

/* *out = the squared Fréchet distance above between N(mu1, cov1) and
 * N(mu2, cov2), of dimension d in [1, TG_FRECHET_MAX_DIM]; cov1 and cov2 are
 * d x d, row-major.  TG_EINVAL for a NULL argument, d out of range, a
 * non-finite entry, or a covariance that is not symmetric (|c_ij - c_ji| >
 * 1e-9 (|c_ii| + |c_jj|)) or has a negative diagonal entry, naming it;
 * TG_ENOMEM; TG_EUNSUPPORTED when the eigensolver does not converge.  A result
 * below zero by rounding is returned as is (it is within rounding of 0). */
TG_API int tg_frechet_distance(double *out, int64_t d, const double *mu1, const double *cov1,
                               const double *mu2, const double *cov2);

/* The mean (d doubles) and the unbiased covariance (d x d, divided by n - 1,
 * as numpy.cov) of the rows of features (n, d), any float dtype, n >= 2.
 * TG_EINVAL for NULL or n < 2, TG_ESHAPE for a tensor that is not 2-d,
 * TG_EDTYPE for an integer tensor. */
TG_API int tg_feature_stats(double *mean, double *cov, const tg_tensor *features);

/* ---- the Kernel Inception Distance ----------------------------------------
 * KID (Binkowski et al. 2018, torchmetrics' KernelInceptionDistance): the
 * unbiased estimate of the squared maximum mean discrepancy between two sets
 * of features under the polynomial kernel k(x, y) = (gamma x.y + coef)^degree,
 *   MMD^2 = sum_{i != j} k(a_i, a_j) / (m (m - 1))
 *         + sum_{i != j} k(b_i, b_j) / (n (n - 1)) - 2 sum_{i, j} k(a_i, b_j) / (m n),
 * averaged over random subsets of each set.  Unlike FID it has no bias in
 * the number of images (its expectation is 0 for samples of one
 * distribution; an estimate may be below 0), so sets of a few hundred images
 * compare fairly with large ones. */

/* *out = MMD^2 above between the rows of fa (m, d) and fb (n, d), m, n >= 2,
 * any float dtypes, d in [1, TG_FRECHET_MAX_DIM], in f64.  degree in
 * [1, 16]; gamma >= 0, 0 standing for 1 / d (torchmetrics' None); coef
 * finite.  TG_EINVAL for NULL, too few rows, a bad kernel parameter or a
 * non-finite feature; TG_ESHAPE for a tensor that is not 2-d or d that
 * differs or is out of range; TG_EDTYPE for an integer tensor; TG_ENOMEM. */
TG_API int tg_kernel_mmd2(double *out, const tg_tensor *fa, const tg_tensor *fb, int degree,
                          double gamma, double coef);

typedef struct tg_kid_opts {
    int64_t subsets;       /* random subsets averaged over, in [1, 1000000] */
    int64_t subset_size;   /* rows of each set in a subset, >= 2 */
    int degree;            /* the kernel's; torchmetrics' defaults below */
    double gamma, coef;
} tg_kid_opts;
#define TG_KID_OPTS_INIT {.subsets = 100, .subset_size = 1000, .degree = 3, .gamma = 0, .coef = 1}

/* KID: *mean and *std (over the subsets, divided by their count, as
 * torchmetrics) of tg_kernel_mmd2 over opts->subsets pairs of subsets, each
 * subset_size rows of fa and of fb drawn by rng without replacement.  opts
 * NULL means TG_KID_OPTS_INIT; std may be NULL.  subset_size must not exceed
 * either set's rows (TG_EINVAL, as torchmetrics); tg_kernel_mmd2's errors
 * otherwise.  On error the outputs and rng are untouched. */
TG_API int tg_kid(double *mean, double *std, const tg_tensor *fa, const tg_tensor *fb,
                  const tg_kid_opts *opts, tg_rng *rng);

/* ---- the Fashion-MNIST feature network ----------------------------------------
 * A small classifier of 1x28x28 images in [-1, 1] into the 10 classes, as
 * PyTorch would write it:
 *
 *   nn.Sequential(
 *       nn.Conv2d(1, 32, 4, 2, 1, bias=False),   # 0  (N, 32, 14, 14)
 *       nn.BatchNorm2d(32),                      # 1
 *       nn.ReLU(),                               # 2
 *       nn.Conv2d(32, 64, 4, 2, 1, bias=False),  # 3  (N, 64, 7, 7)
 *       nn.BatchNorm2d(64),                      # 4
 *       nn.ReLU(),                               # 5
 *       nn.Flatten(),                            # 6  (N, 3136)
 *       nn.Linear(3136, 128),                    # 7
 *       nn.ReLU(),                               # 8  (N, 128): the features
 *       nn.Linear(128, 10))                      # 9  (N, 10) logits
 *
 * The features of an image are the 128 outputs of layer 8, in eval mode. */
#define TG_FID_FEATURES 128
#define TG_FID_CLASSES 10

/* A new network (new reference in *out), in training mode, with torch's
 * default initialisation drawn from rng. */
TG_API int tg_fid_net_new(tg_module **out, tg_rng *rng);
/* A new network with the weights of the safetensors file at path (its state
 * dict, keys "0.weight" ... "9.bias", strictly), in eval mode.  TG_EIO or
 * TG_EFORMAT for an unreadable or corrupt file, TG_ENOTFOUND / TG_ESHAPE /
 * TG_EDTYPE / TG_EINVAL for one that is not this network's weights. */
TG_API int tg_fid_net_load(tg_module **out, const char *path);
/* *features = the features (n, TG_FID_FEATURES) f64 of images
 * (n, 1, 28, 28), float, in [-1, 1], computed in batches without recording
 * and with net in eval mode (net is left in eval mode).  *logits, when not
 * NULL, receives the class logits (n, TG_FID_CLASSES) f32.  TG_ESHAPE for
 * images of another shape, TG_EDTYPE for integer images, TG_EINVAL for a
 * NULL argument or a net that is not tg_fid_net_new's. */
TG_API int tg_fid_features(tg_tensor **features, tg_tensor **logits, tg_module *net,
                           const tg_tensor *images);

#ifdef __cplusplus
}
#endif
#endif
