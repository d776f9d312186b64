/* tools/gradcheck_fns_nn.c - the functions under test of the built-in sweep
 * of `tapegrad gradcheck` in its nn and pool groups: normalisation, losses,
 * pooling and upsampling (gradcheck_cases.c has the table of cases). */
#include "gradcheck_cases.h"
#include "tapegrad/loss.h"
#include "tapegrad/ops.h"
#include "tapegrad/pool.h"

/* Training-mode batch norm of x (4, 3, 2) with weight and bias (3), no
 * running statistics. */
int f_batch_norm(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return tg_batch_norm(out, in[0], NULL, NULL, in[1], in[2], true, 0.1, 1e-5);
}

/* Layer norm of x (2, 3, 4) over its last two dims, weight and bias (3, 4). */
int f_layer_norm(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    static const int64_t shape[2] = {3, 4};
    return tg_layer_norm(out, in[0], 2, shape, in[1], in[2], 1e-5);
}

/* Group norm of x (2, 4, 3) in 2 groups, weight and bias (4). */
int f_group_norm(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return tg_group_norm(out, in[0], 2, in[1], in[2], 1e-5);
}

/* Mean BCE with logits: both the logits and the target are differentiable. */
int f_kl_div_log_target(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return tg_kl_div(out, in[0], in[1], TG_REDUCTION_BATCHMEAN, true);
}

/* Gradients in logits, target and pos_weight (4), without weight. */
int f_bce_logits_weighted(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return tg_bce_with_logits_weighted(out, in[0], in[1], NULL, in[2], TG_REDUCTION_MEAN);
}

int f_bce_logits(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return tg_bce_with_logits(out, in[0], in[1], TG_REDUCTION_MEAN);
}

/* Mean BCE of probabilities 0.5 + 0.4 x against targets 0.5 + 0.5 t (x, t
 * in [-1, 1]), weight (4) broadcast over the rows: the three differentiable. */
int f_bce_loss(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    tg_tensor *a = NULL, *p = NULL, *b = NULL, *t = NULL;
    int rc = tg_mul_scalar(&a, in[0], 0.4);
    if (rc >= 0) rc = tg_add_scalar(&p, a, 0.5);
    if (rc >= 0) rc = tg_mul_scalar(&b, in[1], 0.5);
    if (rc >= 0) rc = tg_add_scalar(&t, b, 0.5);
    if (rc >= 0) rc = tg_bce_loss(out, p, t, in[2], TG_REDUCTION_MEAN);
    tg_tensor_release(a);
    tg_tensor_release(p);
    tg_tensor_release(b);
    tg_tensor_release(t);
    return rc;
}

/* x - t spans both sides of beta = delta = 0.5 (x, t in [-1, 1]). */
int f_smooth_l1_loss(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return tg_smooth_l1_loss(out, in[0], in[1], TG_REDUCTION_SUM, 0.5);
}

int f_huber_loss(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return tg_huber_loss(out, in[0], in[1], TG_REDUCTION_MEAN, 0.5);
}

/* Cross entropy of logits (3, 4) against the classes {2, 0, 3}: nll_loss of
 * log_softmax. */
int f_cross_entropy(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    static const int64_t classes[] = {2, 0, 3}, shape[] = {3};
    tg_tensor *target = NULL;
    int rc = tg_tensor_from_data(&target, TG_I64, 1, shape, classes);
    if (rc >= 0)
        rc = tg_cross_entropy(out, in[0], target, TG_REDUCTION_MEAN);
    tg_tensor_release(target);
    return rc;
}

/* Weighted mean NLL of x (3, 4) against the classes {2, -100, 3}, the
 * second ignored. */
int f_nll_loss(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    static const int64_t classes[] = {2, -100, 3}, shape[] = {3}, wshape[] = {4};
    static const double weights[] = {0.5, 1.0, 2.0, 1.5};
    tg_tensor *target = NULL, *weight = NULL;
    int rc = tg_tensor_from_data(&target, TG_I64, 1, shape, classes);
    if (rc >= 0)
        rc = tg_tensor_from_data(&weight, TG_F64, 1, wshape, weights);
    if (rc >= 0)
        rc = tg_nll_loss(out, in[0], target, weight, TG_REDUCTION_MEAN, TG_IGNORE_INDEX_DEFAULT);
    tg_tensor_release(target);
    tg_tensor_release(weight);
    return rc;
}

/* Pooling and upsampling of x (2, 2, 5, 4) over its last two dims. */
int f_avg_pool(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    tg_pool_params p = TG_POOL_PARAMS_INIT;
    tg_pool_params_set(&p, 3, 2, 1);
    p.ceil_mode = true;
    return tg_avg_pool(out, in[0], 2, &p);
}

int f_adaptive_avg_pool(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return tg_adaptive_avg_pool(out, in[0], 2, (const int64_t[]){3, 6});
}

int f_adaptive_max_pool(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return tg_adaptive_max_pool(out, NULL, in[0], 2, (const int64_t[]){3, 6});
}

int f_max_pool(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    tg_pool_params p = TG_POOL_PARAMS_INIT;
    tg_pool_params_set(&p, 2, 1, 1);
    p.dilation[1] = 2;
    return tg_max_pool(out, in[0], 2, &p);
}

int f_upsample_nearest(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return tg_upsample_nearest(out, in[0], 2, (const int64_t[]){2, 3});
}

int f_bilinear(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return tg_upsample_linear(out, in[0], 2, (const int64_t[]){7, 3}, false);
}

/* x (1, 2, 2, 3, 2) to (3, 5, 4), corners aligned. */
int f_trilinear(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return tg_upsample_linear(out, in[0], 3, (const int64_t[]){3, 5, 4}, true);
}

int f_bicubic(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return tg_upsample_bicubic(out, in[0], (const int64_t[]){9, 3}, false);
}

/* antialiased: x (2, 2, 9, 5) shrunk to (4, 3) by the triangle, or
 * shrunk and enlarged to (3, 8) by the cubic with aligned corners */
int f_bilinear_aa(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return tg_upsample_antialias(out, in[0], TG_UPSAMPLE_LINEAR, (const int64_t[]){4, 3}, false);
}

int f_bicubic_aa(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return tg_upsample_antialias(out, in[0], TG_UPSAMPLE_BICUBIC, (const int64_t[]){3, 8}, true);
}
