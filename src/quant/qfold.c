/* src/quant/qfold.c - folding an eval-mode BatchNorm into the Linear / Conv /
 * ConvTranspose layer before it (tg_fold_batchnorm), as torch's
 * fuse_conv_bn_eval / fuse_linear_bn_eval.
 *
 * In eval mode BatchNorm is a per-channel affine map
 *     BN(y)_c = (y_c - mean_c) * s_c + beta_c,   s_c = gamma_c / sqrt(var_c + eps)
 * so BN(W x + b) = W' x + b' with W' = W scaled by s_c along the layer's
 * OUTPUT-channel axis and b'_c = (b_c - mean_c) * s_c + beta_c.
 *
 * eps is private to the BatchNorm module, so s_c and beta_c are measured
 * rather than recomputed: the module itself runs (in eval mode, in f64) on
 * two probe rows, y = mean and y = mean + 1, which give BN = beta and
 * BN = beta + s exactly up to f64 rounding.  The fold thus matches whatever
 * the module computes (affine or not) and needs no copy of its formula.
 */
#include <math.h>
#include <string.h>

#include "nn/module_internal.h"
#include "quant/quant_internal.h"
#include "tapegrad/autograd.h"

/* The per-channel map of an eval-mode BatchNorm: s[c] and beta[c] (c < C). */
typedef struct bn_map {
    int64_t c;
    double *mean, *s, *beta;   /* owned, c entries each */
} bn_map;

static void bn_map_free(bn_map *m)
{
    free(m->mean), free(m->s), free(m->beta);
    *m = (bn_map){0};
}

/* Runs bn (eval mode, no grad) on a (2, C, 1...) f64 probe of rank nd whose
 * rows are mean and mean + 1.  Restores bn's training flag.  The BatchNorm
 * rejects ranks it does not take (TG_ESHAPE). */
static int bn_probe(tg_module *bn, bn_map *m, int nd)
{
    int64_t shape[TG_MAX_DIMS] = {2, m->c};
    for (int d = 2; d < nd; d++) shape[d] = 1;
    tg_tensor *x = NULL, *y = NULL;
    TG_TRY(tg_tensor_zeros(&x, TG_F64, nd, shape));
    for (int64_t c = 0; c < m->c; c++) {
        tg_tensor_set_flat(x, c, m->mean[c]);
        tg_tensor_set_flat(x, m->c + c, m->mean[c] + 1.0);
    }
    const bool was_training = tg_module_is_training(bn);
    tg_module_train(bn, false);
    tg_no_grad_begin();
    int rc = tg_module_forward(bn, &y, x);
    tg_no_grad_end();
    tg_module_train(bn, was_training);
    for (int64_t c = 0; rc >= 0 && c < m->c; c++) {
        double y0 = 0, y1 = 0;
        tg_tensor_get_flat(y, c, &y0);
        tg_tensor_get_flat(y, m->c + c, &y1);
        m->beta[c] = y0;
        m->s[c] = y1 - y0;
    }
    tg_tensor_release(x);
    tg_tensor_release(y);
    return rc;
}

/* Fills m from bn: its running mean and the probed map.  nd is the rank of
 * the probe, or 0 to try the ranks a BatchNorm takes (2..5). */
static int bn_map_get(tg_module *bn, bn_map *m, int nd)
{
    const char *op = "fold_batchnorm";
    TG_CHECK(bn->vt == &tg__nn_batchnorm_vt, TG_EINVAL, "%s: bn is a %s module, not BatchNorm",
             op, tg_module_type_name(bn));
    tg_tensor *rm = tg_module_find(bn, "running_mean");
    TG_CHECK(rm && tg_module_find(bn, "running_var"), TG_EINVAL,
             "%s: a BatchNorm without running statistics (track_running_stats false) uses batch "
             "statistics in eval mode and cannot be folded", op);
    m->c = tg_tensor_numel(rm);
    m->mean = tg__malloc((size_t)m->c * sizeof *m->mean);
    m->s = tg__malloc((size_t)m->c * sizeof *m->s);
    m->beta = tg__malloc((size_t)m->c * sizeof *m->beta);
    if (!m->mean || !m->s || !m->beta) {
        bn_map_free(m);
        return TG_ENOMEM;
    }
    tg__gather(rm, TG_F64, m->mean);
    int rc = TG_EINVAL;
    for (int r = nd ? nd : 2; r <= (nd ? nd : 5); r++)
        if ((rc = bn_probe(bn, m, r)) >= 0) break;
    if (rc < 0) bn_map_free(m);
    return rc;
}

/* The layer's output channel of weight element i (row-major) under the rule
 * of tapegrad/quant.h, divided by `inner` for a Linear whose out_f features
 * come in C blocks of inner. */
typedef struct wlayout {
    bool transpose;
    int64_t d1, inner_w, cig, inner_f;
} wlayout;

static int64_t out_channel(const wlayout *L, int64_t i)
{
    const int64_t i0 = i / (L->d1 * L->inner_w), i1 = (i / L->inner_w) % L->d1;
    /* ConvTranspose: element (ci, j, k...) feeds output channel g*(C_out/G) + j */
    return L->transpose ? (i0 / L->cig) * L->d1 + i1 : i0 / L->inner_f;
}

/* A new module of layer's kind and hyper-parameters, with a bias, whose
 * weight and bias take the f64 values wv and bv. */
static int new_like(tg_module **out, tg_module *layer, const tg_tensor *w, const double *wv,
                    const double *bv, int64_t c_out)
{
    tg_rng rng;
    tg_rng_init(&rng, 0);   /* the drawn values are overwritten */
    tg_module *m = NULL;
    const int nd = tg_tensor_ndim(w);
    if (layer->vt == &tg__nn_linear_vt) {
        TG_TRY(tg_nn_linear_new(&m, tg_tensor_dim(w, 1), c_out, true, &rng));
    } else {
        tg_conv_params p;
        TG_TRY(tg_nn_conv_params(layer, &p));
        const bool tr = layer->vt == &tg__nn_conv_transpose_vt;
        const int64_t c_in = tr ? tg_tensor_dim(w, 0) : tg_tensor_dim(w, 1) * p.groups;
        TG_TRY(tr ? tg_nn_conv_transpose_new(&m, nd - 2, c_in, c_out, tg_tensor_shape(w) + 2, &p,
                                             true, &rng)
                  : tg_nn_conv_new(&m, nd - 2, c_in, c_out, tg_tensor_shape(w) + 2, &p, true,
                                   &rng));
    }
    tg__scatter(tg_module_find(m, "weight"), TG_F64, wv);
    tg__scatter(tg_module_find(m, "bias"), TG_F64, bv);
    int rc = tg_tensor_dtype(w) == TG_F32 ? TG_OK : tg_module_to_dtype(m, tg_tensor_dtype(w));
    if (rc < 0) {
        tg_module_release(m);
        return rc;
    }
    *out = m;
    return TG_OK;
}

/* W' = W * s_c and b'_f = (b_f - mean_c) * s_c + beta_c (b = 0 without a
 * bias), c the output channel of each weight element / output feature f. */
static int fold_into(tg_module **out, tg_module *layer, const tg_tensor *w, const tg_tensor *b,
                     const bn_map *m, const wlayout *L, int64_t c_out)
{
    const int64_t n = tg_tensor_numel(w);
    double *wv = tg__malloc((size_t)n * sizeof *wv), *bv = tg__malloc((size_t)c_out * sizeof *bv);
    int rc = TG_ENOMEM;
    if (wv && bv) {
        tg__gather(w, TG_F64, wv);
        for (int64_t i = 0; i < n; i++) wv[i] *= m->s[out_channel(L, i)];
        if (b) tg__gather(b, TG_F64, bv);
        for (int64_t f = 0; f < c_out; f++) {
            const int64_t c = f / L->inner_f;
            bv[f] = ((b ? bv[f] : 0.0) - m->mean[c]) * m->s[c] + m->beta[c];
        }
        rc = new_like(out, layer, w, wv, bv, c_out);
    }
    free(wv), free(bv);
    return rc;
}

static int fold_batchnorm(tg_module **out, tg_module *layer, tg_module *bn)
{
    const char *op = "fold_batchnorm";
    TG_CHECK(out && layer && bn, TG_EINVAL, "%s: out, layer and bn must not be NULL", op);
    const bool lin = layer->vt == &tg__nn_linear_vt, tr = layer->vt == &tg__nn_conv_transpose_vt;
    TG_CHECK(lin || tr || layer->vt == &tg__nn_conv_vt, TG_EINVAL,
             "%s: layer is a %s module, not Linear, Conv or ConvTranspose", op,
             tg_module_type_name(layer));
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    if (!lin) TG_TRY(tg_nn_conv_params(layer, &p));
    TG_CHECK(p.act == TG_ACT_NONE, TG_EINVAL,
             "%s: the layer applies %s before the BatchNorm; only a layer without a fused "
             "activation folds", op, tg_activation_name(p.act));
    tg_tensor *w = tg_module_find(layer, "weight"), *b = tg_module_find(layer, "bias");
    TG_CHECK(w && tg_tensor_ndim(w) >= 2, TG_EINVAL, "%s: the layer has no usable weight", op);
    const int64_t c_out = tr ? tg_tensor_dim(w, 1) * p.groups : tg_tensor_dim(w, 0);
    bn_map m = {0};
    TG_TRY(bn_map_get(bn, &m, lin ? 0 : tg_tensor_ndim(w)));
    /* Linear: out_f = C * inner, feature f in channel f / inner (BatchNorm1d
     * directly after it: inner 1; after Unflatten(1, (C, ...)): the rest). */
    int rc = TG_OK;
    if (lin ? c_out % m.c != 0 : c_out != m.c)
        rc = tg__error(TG_ESHAPE, "%s: the layer has %lld output %s; the BatchNorm has %lld "
                       "channels", op, (long long)c_out, lin ? "features" : "channels",
                       (long long)m.c);
    const int64_t d1 = tg_tensor_dim(w, 1);
    const wlayout L = {.transpose = tr, .d1 = d1,
                       .inner_w = tg_tensor_numel(w) / (tg_tensor_dim(w, 0) * d1),
                       .cig = tg_tensor_dim(w, 0) / p.groups, .inner_f = lin ? c_out / m.c : 1};
    if (rc >= 0) rc = fold_into(out, layer, w, b, &m, &L, c_out);
    bn_map_free(&m);
    return rc;
}

/* The BatchNorm probe runs on the library's behalf (never in the caller's
 * scope). */
int tg_fold_batchnorm(tg_module **out, tg_module *layer, tg_module *bn)
{
    tg__lib_enter();
    int rc = fold_batchnorm(out, layer, bn);
    tg__lib_leave();
    return rc;
}
