/* examples/gen_fid.h - the FID of a generator of examples/dcgan/model.h
 * against Fashion-MNIST's test set (tapegrad/metrics.h), for the examples
 * that compare generators (dcgan_quantize: float, int8, int8 after QAT). */
#ifndef GEN_FID_H
#define GEN_FID_H

#include <stdint.h>

#include <tapegrad/tapegrad.h>

/* The feature network and the test set's feature statistics. */
typedef struct gen_fid {
    tg_module *net;
    double *mu, *cov;   /* TG_FID_FEATURES, TG_FID_FEATURES^2 */
} gen_fid;

/* Loads the classifier weights at path and computes the statistics of the
 * test set in data (NULL: TG_FASHION_MNIST_DIR).  On error *r holds nothing
 * (gen_fid_free is still safe) and a message is set. */
int gen_fid_init(gen_fid *r, const char *weights, const char *data);
void gen_fid_free(gen_fid *r);

/* *fid = the FID of n images of gen (in eval mode, without grad) from latents
 * (n, nz) ~ N(0, 1) drawn with seed, in batches, against the test set. */
int gen_fid_score(const gen_fid *r, tg_module *gen, int64_t nz, int64_t n, uint64_t seed,
                  double *fid);

#endif
