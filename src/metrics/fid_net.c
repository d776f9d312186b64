/* src/metrics/fid_net.c - the Fashion-MNIST feature network of metrics.h:
 * building it, loading its weights and running images through it. */
#include <stdio.h>
#include <string.h>

#include "core/core.h"
#include "tapegrad/autograd.h"
#include "tapegrad/metrics.h"
#include "tapegrad/safetensors.h"

/* Images per forward: bounds the activations' memory (about 8 MB at 500). */
#define FID_BATCH 500
#define FID_LAYERS 10
#define FID_FLAT (64 * 7 * 7)

/* Appends *layer (stolen, and set to NULL) to seq when rc, the status of
 * the constructor that made it, is not an error; returns the new status. */
static int append(tg_module *seq, int rc, tg_module **layer)
{
    tg_module *m = *layer;
    *layer = NULL;
    if (rc < 0) {
        tg_module_release(m);
        return rc;
    }
    return tg_nn_sequential_append(seq, m);
}

int tg_fid_net_new(tg_module **out, tg_rng *rng)
{
    TG_CHECK(out && rng, TG_EINVAL, "fid_net_new: out and rng must not be NULL");
    const int64_t k[2] = {4, 4};
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    p.stride[0] = p.stride[1] = 2;
    tg_conv_params_set_padding(&p, 1);
    tg_module *seq = NULL, *m = NULL;
    TG_TRY(tg_nn_sequential_new(&seq));
    /* Each constructor runs only while rc >= 0. */
    int rc = tg_nn_conv_new(&m, 2, 1, 32, k, &p, false, rng);                    /* 0 */
    rc = append(seq, rc, &m);
    if (rc >= 0) rc = tg_nn_batchnorm_new(&m, 2, 32, 1e-5, 0.1, true, true);   /* 1 */
    rc = append(seq, rc, &m);
    if (rc >= 0) rc = tg_nn_activation_new(&m, TG_ACT_RELU, 0);                /* 2 */
    rc = append(seq, rc, &m);
    if (rc >= 0) rc = tg_nn_conv_new(&m, 2, 32, 64, k, &p, false, rng);        /* 3 */
    rc = append(seq, rc, &m);
    if (rc >= 0) rc = tg_nn_batchnorm_new(&m, 2, 64, 1e-5, 0.1, true, true);   /* 4 */
    rc = append(seq, rc, &m);
    if (rc >= 0) rc = tg_nn_activation_new(&m, TG_ACT_RELU, 0);                /* 5 */
    rc = append(seq, rc, &m);
    if (rc >= 0) rc = tg_nn_flatten_new(&m, 1, -1);                            /* 6 */
    rc = append(seq, rc, &m);
    if (rc >= 0) rc = tg_nn_linear_new(&m, FID_FLAT, TG_FID_FEATURES, true, rng);      /* 7 */
    rc = append(seq, rc, &m);
    if (rc >= 0) rc = tg_nn_activation_new(&m, TG_ACT_RELU, 0);                /* 8 */
    rc = append(seq, rc, &m);
    if (rc >= 0) rc = tg_nn_linear_new(&m, TG_FID_FEATURES, TG_FID_CLASSES, true, rng); /* 9 */
    rc = append(seq, rc, &m);
    if (rc < 0) {
        tg_module_release(seq);
        return rc;
    }
    *out = seq;
    return TG_OK;
}

int tg_fid_net_load(tg_module **out, const char *path)
{
    TG_CHECK(out && path, TG_EINVAL, "fid_net_load: out and path must not be NULL");
    tg_st_file *f = NULL;
    tg_module *net = NULL;
    tg_rng rng;
    tg_rng_init(&rng, 0);
    int rc = tg_safetensors_load(&f, path);
    if (rc >= 0) rc = tg_fid_net_new(&net, &rng);
    if (rc >= 0) rc = tg_module_load_state_dict(net, f, NULL, true);
    tg_st_free(f);
    if (rc < 0) {
        char why[512];   /* the message is rewritten below: copied first */
        snprintf(why, sizeof why, "%s", tg_error_message());
        tg_module_release(net);
        return tg__error(rc, "fid_net_load: %s: %s", path, why);
    }
    tg_module_train(net, false);
    *out = net;
    return TG_OK;
}

/* TG_OK when w is a 2-d tensor of shape (r, c). */
static bool has_shape(const tg_tensor *w, int64_t r, int64_t c)
{
    return w && tg_tensor_ndim(w) == 2 && tg_tensor_dim(w, 0) == r && tg_tensor_dim(w, 1) == c;
}

static int check_features_args(tg_tensor **features, tg_module *net, const tg_tensor *images)
{
    TG_CHECK(features && net && images, TG_EINVAL,
             "fid_features: features, net and images must not be NULL");
    TG_CHECK(tg_module_child_count(net) == FID_LAYERS &&
                 has_shape(tg_module_find(net, "7.weight"), TG_FID_FEATURES, FID_FLAT) &&
                 has_shape(tg_module_find(net, "9.weight"), TG_FID_CLASSES, TG_FID_FEATURES),
             TG_EINVAL, "fid_features: net must be the feature network of tg_fid_net_new");
    const int64_t *s = tg_tensor_shape(images);
    char shape[128];
    TG_CHECK(tg_tensor_ndim(images) == 4 && s[0] >= 1 && s[1] == 1 && s[2] == 28 && s[3] == 28,
             TG_ESHAPE, "fid_features: images are %s: expected (N, 1, 28, 28) with N >= 1",
             tg_shape_str(shape, sizeof shape, tg_tensor_ndim(images), s));
    TG_CHECK(tg_dtype_is_float(tg_tensor_dtype(images)), TG_EDTYPE,
             "fid_features: images must be a float tensor in [-1, 1], not %s",
             tg_dtype_name(tg_tensor_dtype(images)));
    return TG_OK;
}

/* Runs the batch x (b, 1, 28, 28) through the network; the features go to
 * feat[0 .. b*TG_FID_FEATURES) and, when logits is not NULL, the logits to
 * logits[0 .. b*TG_FID_CLASSES).  Grad mode is off. */
static int run_batch(tg_module *net, tg_tensor *x, double *feat, float *logits)
{
    tg_tensor *h = tg_tensor_retain(x), *y = NULL, *f32 = NULL;
    int rc = TG_OK;
    tg__lib_enter();   /* the layers' outputs are released here, not by a caller's scope */
    for (int i = 0; i < FID_LAYERS - 1 && rc >= 0; i++) {
        rc = tg_module_forward(tg_module_child_at(net, i), &y, h);
        tg_tensor_release(h);
        h = rc >= 0 ? y : NULL;
    }
    if (rc >= 0) rc = tg_tensor_to_doubles(h, feat, tg_tensor_numel(h));
    if (rc >= 0 && logits) {
        rc = tg_module_forward(tg_module_child_at(net, FID_LAYERS - 1), &y, h);
        if (rc >= 0) rc = tg_tensor_to_dtype(&f32, y, TG_F32);
        if (rc >= 0) memcpy(logits, tg_tensor_cdata(f32),
                            (size_t)tg_tensor_numel(f32) * sizeof *logits);
        if (rc >= 0) tg_tensor_release(y);
    }
    tg_tensor_release(f32);
    tg_tensor_release(h);
    tg__lib_leave();
    return rc;
}

int tg_fid_features(tg_tensor **features, tg_tensor **logits, tg_module *net,
                    const tg_tensor *images)
{
    TG_TRY(check_features_args(features, net, images));
    const int64_t n = tg_tensor_dim(images, 0), px = 28 * 28;
    tg_tensor *x = NULL, *feat = NULL, *lg = NULL, *batch = NULL;
    int rc = tg_tensor_to_dtype(&x, images, TG_F32);
    if (rc >= 0) rc = tg_tensor_zeros(&feat, TG_F64, 2, (int64_t[]){n, TG_FID_FEATURES});
    if (rc >= 0 && logits) rc = tg_tensor_zeros(&lg, TG_F32, 2, (int64_t[]){n, TG_FID_CLASSES});
    tg_module_train(net, false);
    tg_no_grad_begin();
    for (int64_t i = 0; i < n && rc >= 0; i += FID_BATCH) {
        const int64_t b = n - i < FID_BATCH ? n - i : FID_BATCH;
        rc = tg_tensor_from_data(&batch, TG_F32, 4, (int64_t[]){b, 1, 28, 28},
                                 (const float *)tg_tensor_cdata(x) + i * px);
        if (rc >= 0)
            rc = run_batch(net, batch, (double *)tg_tensor_data(feat) + i * TG_FID_FEATURES,
                           lg ? (float *)tg_tensor_data(lg) + i * TG_FID_CLASSES : NULL);
        tg_tensor_release(batch);
        batch = NULL;
    }
    tg_no_grad_end();
    tg_tensor_release(x);
    if (rc < 0) {
        tg_tensor_release(feat);
        tg_tensor_release(lg);
        return rc;
    }
    *features = feat;
    if (logits) *logits = lg;
    return TG_OK;
}
