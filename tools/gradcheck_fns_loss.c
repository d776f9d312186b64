/* tools/gradcheck_fns_loss.c - the functions under test of the built-in sweep
 * of `tapegrad gradcheck` for the distances, the margin, embedding and
 * likelihood losses, weight normalization, attention, a Transformer decoder
 * layer, and unfold / fold
 * (gradcheck_cases.c has the table of cases).  Inputs are U[-1, 1] kept away
 * from 0 (GC_POSITIVE: U[0.5, 2]); targets and class indices are fixed here,
 * and the margins are chosen so that no hinge sits at a kink. */
#include "gradcheck_cases.h"
#include "tapegrad/attention.h"
#include "tapegrad/conv.h"
#include "tapegrad/loss.h"
#include "tapegrad/ops.h"

/* A fixed f64 tensor (the sweep's dtype) holding v, (3) or (3, 4). */
static int fixed(tg_tensor **t, int ndim, const double *v)
{
    static const int64_t shape1[] = {3}, shape2[] = {3, 4};
    return tg_tensor_from_data(t, TG_F64, ndim, ndim == 1 ? shape1 : shape2, v);
}

int f_cosine_similarity(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return tg_cosine_similarity(out, in[0], in[1], 1, 1e-8);
}

int f_pairwise_distance(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return tg_pairwise_distance(out, in[0], in[1], 3.0, 1e-6, false);
}

/* margin 0.25 over differences in [-2, 2]: some samples inside the margin,
 * some outside, none on it for the sweep's draws. */
int f_margin_ranking_loss(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    static const double t[] = {1, -1, 1};
    tg_tensor *target = NULL;
    int rc = fixed(&target, 1, t);
    if (rc >= 0) rc = tg_margin_ranking_loss(out, in[0], in[1], target, 0.25, TG_REDUCTION_MEAN);
    tg_tensor_release(target);
    return rc;
}

int f_hinge_embedding_loss(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    static const double t[] = {1, -1, -1, 1, -1, 1, 1, -1, -1, 1, -1, 1};
    tg_tensor *target = NULL;
    int rc = fixed(&target, 2, t);
    if (rc >= 0) rc = tg_hinge_embedding_loss(out, in[0], target, 0.5, TG_REDUCTION_SUM);
    tg_tensor_release(target);
    return rc;
}

/* A fixed target of +-1 and fractions: torch differentiates in input only. */
int f_soft_margin_loss(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    static const double t[] = {1, -1, 0.5, -0.25, 1, 1, -1, 0.75, -1, 0.5, 1, -0.5};
    tg_tensor *target = NULL;
    int rc = fixed(&target, 2, t);
    if (rc >= 0) rc = tg_soft_margin_loss(out, in[0], target, TG_REDUCTION_MEAN);
    tg_tensor_release(target);
    return rc;
}

int f_cosine_embedding_loss(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    static const double t[] = {1, -1, -1};
    tg_tensor *target = NULL;
    int rc = fixed(&target, 1, t);
    if (rc >= 0)
        rc = tg_cosine_embedding_loss(out, in[0], in[1], target, -0.5, TG_REDUCTION_MEAN);
    tg_tensor_release(target);
    return rc;
}

int f_triplet_margin_loss(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return tg_triplet_margin_loss(out, in[0], in[1], in[2], 2.0, 2.0, 1e-6, true,
                                  TG_REDUCTION_MEAN);
}

/* input, target, var all U[0.5, 2] (GC_POSITIVE), var above eps. */
int f_gaussian_nll_loss(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return tg_gaussian_nll_loss(out, in[0], in[1], in[2], true, 1e-6, TG_REDUCTION_MEAN);
}

/* log_input and full, with counts 0, 1 and above 1 (Stirling's term). */
int f_poisson_nll_loss(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    static const double t[] = {0, 1, 2, 3, 5, 0, 1, 4, 2, 7, 1, 0};
    tg_tensor *target = NULL;
    int rc = fixed(&target, 2, t);
    if (rc >= 0) rc = tg_poisson_nll_loss(out, in[0], target, true, true, 1e-8, TG_REDUCTION_SUM);
    tg_tensor_release(target);
    return rc;
}

/* p = 2, margin 3 (every hinge active over x in [-1, 1]), fixed class
 * weights (torch does not differentiate in them). */
int f_multi_margin_loss(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    static const int64_t classes[] = {2, 0, 3}, shape[] = {3}, wshape[] = {4};
    static const double w[] = {0.5, 1.5, 0.75, 1};
    tg_tensor *target = NULL, *weight = NULL;
    int rc = tg_tensor_from_data(&target, TG_I64, 1, shape, classes);
    if (rc >= 0) rc = tg_tensor_from_data(&weight, TG_F64, 1, wshape, w);
    if (rc >= 0) rc = tg_multi_margin_loss(out, in[0], target, 2, 3.0, weight, TG_REDUCTION_MEAN);
    tg_tensor_release(weight);
    tg_tensor_release(target);
    return rc;
}

/* Rows ended by -1 early, late and never. */
int f_multilabel_margin_loss(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    static const int64_t labels[] = {3, -1, 0, 1, 0, 2, 1, -1, 1, 0, 3, 2}, shape[] = {3, 4};
    tg_tensor *target = NULL;
    int rc = tg_tensor_from_data(&target, TG_I64, 2, shape, labels);
    if (rc >= 0) rc = tg_multilabel_margin_loss(out, in[0], target, TG_REDUCTION_MEAN);
    tg_tensor_release(target);
    return rc;
}

int f_multilabel_soft_margin_loss(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    static const double t[] = {1, 0, 0, 1, 0, 1, 1, 0, 1, 1, 0, 0};
    tg_tensor *target = NULL;
    int rc = fixed(&target, 2, t);
    if (rc >= 0)
        rc = tg_multilabel_soft_margin_loss(out, in[0], target, in[1], TG_REDUCTION_MEAN);
    tg_tensor_release(target);
    return rc;
}

/* v (3, 2, 4) and g (3, 1, 1): one norm per slice of dim 0. */
int f_weight_norm(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return tg_weight_norm(out, in[0], in[1], 0);
}

/* q (2, 3, 4), k (2, 5, 4), v (2, 5, 3), a u8 mask (3, 5) hiding two keys
 * of each query (never all of them). */
int f_attention(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    static const uint8_t hide[15] = {0, 1, 0, 0, 1, 1, 0, 0, 1, 0, 0, 0, 1, 1, 0};
    tg_tensor *mask = NULL;
    int rc = tg_tensor_from_data(&mask, TG_U8, 2, (int64_t[]){3, 5}, hide);
    tg_attention_opts o = TG_ATTENTION_OPTS_INIT;
    o.attn_mask = mask;
    if (rc >= 0) rc = tg_scaled_dot_product_attention(out, NULL, in[0], in[1], in[2], &o);
    tg_tensor_release(mask);
    return rc;
}

/* A TransformerDecoderLayer (d_model 4, nhead 2, dim_feedforward 6, gelu,
 * norm_first, no dropout; weights from seed 3, in f64) over tgt (3, 2, 4)
 * and memory (2, 2, 4), with a causal tgt_mask (3, 3). */
int f_transformer_decoder_layer(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    tg_nn_transformer_decoder_layer_opts o = TG_NN_TRANSFORMER_DECODER_LAYER_OPTS_INIT;
    o.dim_feedforward = 6;
    o.dropout = 0.0;
    o.activation = TG_ACT_GELU;
    o.norm_first = true;
    tg_rng rng;
    tg_rng_init(&rng, 3);
    tg_module *m = NULL;
    tg_nn_transformer_masks mk = TG_NN_TRANSFORMER_MASKS_INIT;
    int rc = tg_nn_transformer_decoder_layer_new(&m, 4, 2, &o, &rng);
    if (rc >= 0) rc = tg_module_to_dtype(m, TG_F64);
    if (rc >= 0) rc = tg_nn_transformer_square_subsequent_mask(&mk.tgt_mask, 3, TG_F64);
    if (rc >= 0) rc = tg_nn_transformer_decoder_layer_forward(m, out, in[0], in[1], &mk);
    tg_tensor_release(mk.tgt_mask);
    tg_module_release(m);
    return rc;
}

/* x (2, 2, 5, 4): kernel (2, 3), padding 1, stride (2, 1): 3 x 4 blocks. */
int f_unfold(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    const tg_fold_params p = {.kernel_size = {2, 3}, .dilation = {1, 1}, .padding = {1, 1},
                              .stride = {2, 1}};
    return tg_unfold(out, in[0], &p);
}

/* x (2, 8, 12) into (4, 5): kernel 2, dilation (2, 1), padding (0, 1):
 * 2 x 6 blocks, neighbours overlapping along W. */
int f_fold(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    const tg_fold_params p = {.kernel_size = {2, 2}, .dilation = {2, 1}, .padding = {0, 1},
                              .stride = {1, 1}};
    return tg_fold(out, in[0], (const int64_t[]){4, 5}, &p);
}
