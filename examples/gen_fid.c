/* examples/gen_fid.c - see gen_fid.h. */
#include "gen_fid.h"

#include <stdlib.h>
#include <string.h>

#include <tapegrad/metrics.h>

#include "dcgan/model.h"

#define GEN_BATCH 500

static int stats_of(const gen_fid *r, const tg_tensor *images, double *mu, double *cov)
{
    tg_tensor *feat = NULL;
    int rc = tg_fid_features(&feat, NULL, r->net, images);
    if (rc >= 0) rc = tg_feature_stats(mu, cov, feat);
    tg_tensor_release(feat);
    return rc;
}

int gen_fid_init(gen_fid *r, const char *weights, const char *data)
{
    *r = (gen_fid){0};
    tg_dataset *ds = NULL;
    tg_tensor *x = NULL, *y = NULL;
    int64_t *idx = NULL;
    int rc = tg_fid_net_load(&r->net, weights);
    if (rc >= 0) rc = tg_fashion_mnist_load(&ds, data, false);
    const int64_t n = rc >= 0 ? tg_dataset_size(ds) : 0;
    r->mu = malloc(TG_FID_FEATURES * sizeof *r->mu);
    r->cov = malloc(TG_FID_FEATURES * TG_FID_FEATURES * sizeof *r->cov);
    idx = malloc((size_t)(n > 0 ? n : 1) * sizeof *idx);
    if (rc >= 0 && (!r->mu || !r->cov || !idx)) rc = tg_error_set(TG_ENOMEM, "out of memory");
    for (int64_t i = 0; rc >= 0 && i < n; i++) idx[i] = i;
    if (rc >= 0) rc = tg_dataset_batch(&x, &y, ds, idx, n);
    if (rc >= 0) rc = stats_of(r, x, r->mu, r->cov);
    free(idx);
    tg_tensor_release(x);
    tg_tensor_release(y);
    tg_dataset_release(ds);
    if (rc < 0) gen_fid_free(r);
    return rc;
}

void gen_fid_free(gen_fid *r)
{
    tg_module_release(r->net);
    free(r->mu);
    free(r->cov);
    *r = (gen_fid){0};
}

/* n images of gen into the new tensor *images (n, 1, 28, 28) f32. */
static int generate(tg_tensor **images, tg_module *gen, int64_t nz, int64_t n, uint64_t seed)
{
    tg_tensor *out = NULL, *z = NULL, *img = NULL, *f32 = NULL;
    tg_rng rng;
    tg_rng_init(&rng, seed);
    int rc = tg_tensor_zeros(&out, TG_F32, 4, (int64_t[]){n, 1, 28, 28});
    tg_module_train(gen, false);
    tg_no_grad_begin();
    for (int64_t i = 0; rc >= 0 && i < n; i += GEN_BATCH) {
        const int64_t b = n - i < GEN_BATCH ? n - i : GEN_BATCH;
        rc = dcgan_latents(&z, b, nz, &rng);
        if (rc >= 0) rc = tg_module_forward(gen, &img, z);
        if (rc >= 0) rc = tg_tensor_to_dtype(&f32, img, TG_F32);
        if (rc >= 0) memcpy((float *)tg_tensor_data(out) + i * 784, tg_tensor_cdata(f32),
                            (size_t)b * 784 * sizeof(float));
        tg_tensor_release(z), tg_tensor_release(img), tg_tensor_release(f32);
        z = img = f32 = NULL;
    }
    tg_no_grad_end();
    if (rc < 0) {
        tg_tensor_release(out);
        return rc;
    }
    *images = out;
    return TG_OK;
}

int gen_fid_score(const gen_fid *r, tg_module *gen, int64_t nz, int64_t n, uint64_t seed,
                  double *fid)
{
    enum { D = TG_FID_FEATURES };
    double *mu = malloc(D * sizeof *mu), *cov = malloc(D * D * sizeof *cov);
    tg_tensor *images = NULL;
    int rc = mu && cov ? TG_OK : tg_error_set(TG_ENOMEM, "out of memory");
    if (rc >= 0) rc = generate(&images, gen, nz, n, seed);
    if (rc >= 0) rc = stats_of(r, images, mu, cov);
    if (rc >= 0) rc = tg_frechet_distance(fid, D, mu, cov, r->mu, r->cov);
    tg_tensor_release(images);
    free(mu);
    free(cov);
    return rc;
}
