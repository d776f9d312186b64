/* src/nn/batchnorm.c - BatchNorm1d/2d/3d over dim 1, written with
 * differentiable ops so that first and second derivatives come from the tape.
 *
 * With N = numel / C values per channel c:
 *   training:  mean_c = sum x / N,  var_c = sum (x - mean_c)^2 / N  (biased)
 *              running_mean = (1 - m) running_mean + m mean_c
 *              running_var  = (1 - m) running_var  + m var_c * N / (N - 1)
 *   eval:      mean_c, var_c = running_mean, running_var
 *   y = (x - mean_c) / sqrt(var_c + eps) * weight_c + bias_c
 * as torch.nn.BatchNorm*d (momentum=None: m = 1 / num_batches_tracked).
 *
 * y is computed as xc * scale_c + bias_c with xc = x - mean_c and
 * scale_c = weight_c / sqrt(var_c + eps) (C values), so the tape keeps one
 * full-size tensor (xc, shared by the variance and the output) instead of xc
 * and xhat.  Under autocast a half input stays half on the way out, as in
 * PyTorch: statistics and the normalisation run in f32 (FP32 policy of the
 * reductions, promotion by the f32 parameters), and y is rounded once to x's
 * dtype, so the activations after it (and what their ops save) are half. */
#include <math.h>

#include "nn/module_internal.h"
#include "tapegrad/autograd.h"
#include "tapegrad/ops.h"

typedef struct tg__bn_state {
    int nspatial;
    int64_t c;
    double eps, momentum;
    bool affine, track;
} tg__bn_state;

static int tg__bn_check_input(const tg__bn_state *s, const tg_tensor *x)
{
    int nd = tg_tensor_ndim(x);
    bool ok = s->nspatial <= 1 ? (nd == 2 || nd == 3) : nd == s->nspatial + 2;
    TG_CHECK(ok, TG_ESHAPE, "batchnorm%dd: input has %d dims; expected %s", s->nspatial ? s->nspatial : 1,
             nd, s->nspatial <= 1 ? "(N, C) or (N, C, L)" : s->nspatial == 2 ? "(N, C, H, W)"
                                                                             : "(N, C, D, H, W)");
    TG_CHECK(tg_tensor_dim(x, 1) == s->c, TG_ESHAPE,
             "batchnorm: input dim 1 is %lld; num_features is %lld",
             (long long)tg_tensor_dim(x, 1), (long long)s->c);
    TG_CHECK(tg_dtype_is_float(tg_tensor_dtype(x)), TG_EDTYPE,
             "batchnorm: input has dtype %s; float dtypes only", tg_dtype_name(tg_tensor_dtype(x)));
    return TG_OK;
}

/* Folds the batch statistics (mean, biased var; each (1, C, 1...)) into the
 * running buffers; n is the number of values per channel. */
static int tg__bn_update_running(tg_module *m, const tg__bn_state *s, tg_tensor *mean,
                                 tg_tensor *var, int64_t n)
{
    tg_tensor *rm = tg__module_local(m, "running_mean"), *rv = tg__module_local(m, "running_var");
    tg_tensor *nbt = tg__module_local(m, "num_batches_tracked");
    double count = 0;
    TG_TRY(tg_tensor_get_flat(nbt, 0, &count));
    TG_TRY(tg_tensor_set_flat(nbt, 0, count + 1));
    double mom = s->momentum < 0 ? 1.0 / (count + 1) : s->momentum;
    double unbias = (double)n / (double)(n - 1);   /* running_var uses the unbiased var */
    for (int64_t c = 0; c < s->c; c++) {
        double bm, bv, r_m, r_v;
        TG_TRY(tg_tensor_get_flat(mean, c, &bm));
        TG_TRY(tg_tensor_get_flat(var, c, &bv));
        TG_TRY(tg_tensor_get_flat(rm, c, &r_m));
        TG_TRY(tg_tensor_get_flat(rv, c, &r_v));
        TG_TRY(tg_tensor_set_flat(rm, c, (1 - mom) * r_m + mom * bm));
        TG_TRY(tg_tensor_set_flat(rv, c, (1 - mom) * r_v + mom * bv * unbias));
    }
    return TG_OK;
}

/* xc = x - mean and inv = (var + eps)^-1/2 ((1, C, 1...) = bshape) from batch
 * statistics or the running buffers. */
static int tg__bn_center(tg_module *m, const tg__bn_state *s, tg_tensor **xc, tg_tensor **inv,
                         tg_tensor *x, int nd, const int64_t *bshape)
{
    tg_tensor *mean = NULL, *sq = NULL, *var = NULL, *ve = NULL;
    int rc = TG_OK;
    int dims[TG_MAX_DIMS], k = 0;
    for (int d = 0; d < nd; d++)
        if (d != 1) dims[k++] = d;
    int64_t n = tg_tensor_numel(x) / s->c;
    bool batch = m->training || !s->track;
    if (batch) {
        if (m->training && n <= 1) {
            return tg__error(TG_EINVAL, "batchnorm: expected more than 1 value per channel "
                                        "when training (got input with %lld)", (long long)n);
        }
        rc = tg_mean_dims(&mean, x, k, dims, true);
        if (rc == TG_OK) rc = tg_sub(xc, x, mean);
        if (rc == TG_OK) rc = tg_mul(&sq, *xc, *xc);
        if (rc == TG_OK) rc = tg_mean_dims(&var, sq, k, dims, true);
    } else {
        rc = tg_reshape(&mean, tg__module_local(m, "running_mean"), nd, bshape);
        if (rc == TG_OK) rc = tg_reshape(&var, tg__module_local(m, "running_var"), nd, bshape);
        if (rc == TG_OK) rc = tg_sub(xc, x, mean);
    }
    if (rc == TG_OK) rc = tg_add_scalar(&ve, var, s->eps);
    if (rc == TG_OK) rc = tg_pow_scalar(inv, ve, -0.5);
    if (rc == TG_OK && batch && m->training && s->track) {
        bool prev = tg_set_grad_enabled(false);
        rc = tg__bn_update_running(m, s, mean, var, n);
        tg_set_grad_enabled(prev);
    }
    tg_tensor_release(mean);
    tg_tensor_release(sq);
    tg_tensor_release(var);
    tg_tensor_release(ve);
    if (rc < 0) {
        tg_tensor_release(*xc);
        tg_tensor_release(*inv);
        *xc = *inv = NULL;
    }
    return rc;
}

/* y = xc * scale + bias (scale = inv * weight), or xc * inv without affine. */
static int tg__bn_affine(tg_module *m, const tg__bn_state *s, tg_tensor **y, tg_tensor *xc,
                         tg_tensor *inv, int nd, const int64_t *bshape)
{
    if (!s->affine) return tg_mul(y, xc, inv);
    tg_tensor *w = NULL, *b = NULL, *scale = NULL, *ys = NULL;
    int rc = tg_reshape(&w, tg__module_local(m, "weight"), nd, bshape);
    if (rc == TG_OK) rc = tg_reshape(&b, tg__module_local(m, "bias"), nd, bshape);
    if (rc == TG_OK) rc = tg_mul(&scale, inv, w);
    if (rc == TG_OK) rc = tg_mul(&ys, xc, scale);
    if (rc == TG_OK) rc = tg_add(y, ys, b);
    tg_tensor_release(w);
    tg_tensor_release(b);
    tg_tensor_release(scale);
    tg_tensor_release(ys);
    return rc;
}

static int tg__bn_forward(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    const tg__bn_state *s = m->state;
    TG_TRY(tg__bn_check_input(s, x));
    int nd = tg_tensor_ndim(x);
    int64_t bshape[TG_MAX_DIMS];
    for (int d = 0; d < nd; d++) bshape[d] = d == 1 ? s->c : 1;
    tg_tensor *xc = NULL, *inv = NULL, *yf = NULL;
    TG_TRY(tg__bn_center(m, s, &xc, &inv, x, nd, bshape));
    int rc = tg__bn_affine(m, s, &yf, xc, inv, nd, bshape);
    tg_tensor_release(xc);
    tg_tensor_release(inv);
    if (rc < 0) return rc;
    /* Under autocast an f16/bf16 input gives an output of its own dtype
     * (computed in f32 above, rounded once here). */
    tg_dtype adt, xdt = tg_tensor_dtype(x);
    if ((xdt == TG_F16 || xdt == TG_BF16) && tg__autocast_dtype(&adt) && tg_tensor_dtype(yf) != xdt) {
        rc = tg_to_dtype(y, yf, xdt);
        tg_tensor_release(yf);
        return rc;
    }
    *y = yf;
    return TG_OK;
}

const tg_module_vtable tg__nn_batchnorm_vt = {
    .type_name = "BatchNorm", .forward = tg__bn_forward, .release = free};

/* Registers a tensor of C elements filled with v (a 0-d i64 when c < 0). */
static int tg__bn_add(tg_module *m, const char *name, int64_t c, double v, bool param)
{
    tg_tensor *t = NULL;
    if (c < 0) TG_TRY(tg_tensor_zeros(&t, TG_I64, 0, NULL));
    else TG_TRY(tg_tensor_full(&t, TG_F32, 1, &c, v));
    return param ? tg_module_add_parameter(m, name, t) : tg_module_add_buffer(m, name, t);
}

int tg_nn_batchnorm_new(tg_module **out, int nspatial, int64_t num_features, double eps,
                        double momentum, bool affine, bool track_running_stats)
{
    TG_CHECK(out != NULL, TG_EINVAL, "nn_batchnorm_new: out must not be NULL");
    TG_CHECK(nspatial >= 0 && nspatial <= 3, TG_EINVAL,
             "nn_batchnorm_new: nspatial=%d must be 0..3", nspatial);
    TG_CHECK(num_features > 0, TG_EINVAL, "nn_batchnorm_new: num_features=%lld must be > 0",
             (long long)num_features);
    TG_CHECK(isfinite(eps) && eps >= 0, TG_EINVAL, "nn_batchnorm_new: eps=%g must be >= 0", eps);
    TG_CHECK(isfinite(momentum) && momentum <= 1, TG_EINVAL,
             "nn_batchnorm_new: momentum=%g must be <= 1 (< 0 for a cumulative average)",
             momentum);
    tg__bn_state *s = tg__malloc(sizeof *s);
    if (!s) return TG_ENOMEM;
    *s = (tg__bn_state){nspatial, num_features, eps, momentum, affine, track_running_stats};
    tg_module *m = NULL;
    int rc = tg_module_new(&m, &tg__nn_batchnorm_vt, s);
    if (rc < 0) {
        free(s);
        return rc;
    }
    if (affine) {
        rc = tg__bn_add(m, "weight", num_features, 1.0, true);
        if (rc == TG_OK) rc = tg__bn_add(m, "bias", num_features, 0.0, true);
    }
    if (rc == TG_OK && track_running_stats) {
        rc = tg__bn_add(m, "running_mean", num_features, 0.0, false);
        if (rc == TG_OK) rc = tg__bn_add(m, "running_var", num_features, 1.0, false);
        if (rc == TG_OK) rc = tg__bn_add(m, "num_batches_tracked", -1, 0.0, false);
    }
    if (rc < 0) {
        tg_module_release(m);
        return rc;
    }
    *out = m;
    return TG_OK;
}
