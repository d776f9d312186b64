/* tools/gradcheck_fns_nn.c - the functions under test of the built-in sweep
 * of `tapegrad gradcheck` in its nn and pool groups: normalisation, losses,
 * the recurrent modules, pooling and upsampling (gradcheck_cases.c has the
 * table of cases). */
#include "gradcheck_cases.h"
#include "tapegrad/loss.h"
#include "tapegrad/nn.h"
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

/* ---- the recurrent modules ----
 * Each call makes the module afresh from one seed in f64 (the same
 * weights every time), so the check is over the inputs and states; the
 * parameters' gradients are checked in tests/test_rnn.c.  The results are
 * flattened and concatenated into one output. */

typedef enum rnn_kind { RK_RNN, RK_LSTM, RK_GRU, RK_RNN_CELL, RK_LSTM_CELL, RK_GRU_CELL } rnn_kind;

/* kind with input_size 2, hidden_size 3 and the layer options o. */
static int rnn_make(tg_module **m, rnn_kind kind, const tg_rnn_opts *o)
{
    tg_rng rng;
    tg_rng_init(&rng, 29);
    int rc;
    switch (kind) {
    case RK_RNN: rc = tg_nn_rnn_new(m, 2, 3, o, &rng); break;
    case RK_LSTM: rc = tg_nn_lstm_new(m, 2, 3, o, &rng); break;
    case RK_GRU: rc = tg_nn_gru_new(m, 2, 3, o, &rng); break;
    case RK_RNN_CELL: rc = tg_nn_rnn_cell_new(m, 2, 3, true, TG_RNN_TANH, &rng); break;
    case RK_LSTM_CELL: rc = tg_nn_lstm_cell_new(m, 2, 3, true, &rng); break;
    default: rc = tg_nn_gru_cell_new(m, 2, 3, true, &rng); break;
    }
    if (rc >= 0) rc = tg_module_to_dtype(*m, TG_F64);
    return rc;
}

/* *out = cat(flatten(r[0..n)), the non-NULL ones); releases r[]. */
static int flat_cat(tg_tensor **out, int n, tg_tensor **r)
{
    tg_tensor *flat[3] = {NULL, NULL, NULL};
    int k = 0, rc = TG_OK;
    for (int i = 0; i < n && rc >= 0; i++)
        if (r[i]) rc = tg_reshape(&flat[k++], r[i], 1, (const int64_t[]){-1});
    if (rc >= 0) rc = tg_cat(out, k, flat, 0);
    for (int i = 0; i < 3; i++) {
        tg_tensor_release(flat[i]);
        if (i < n) tg_tensor_release(r[i]);
    }
    return rc;
}

/* The module's forward on (x, h, c) = in[0..n): lengths NULL for the
 * plain one. */
static int rnn_run(tg_tensor **out, rnn_kind kind, const tg_rnn_opts *o,
                   const tg_tensor *lengths, int n, tg_tensor *const *in)
{
    tg_module *m = NULL;
    tg_tensor *r[3] = {NULL, NULL, NULL}, *c = n > 2 ? in[2] : NULL;
    int rc = rnn_make(&m, kind, o);
    if (rc < 0) {
        tg_module_release(m);
        return rc;
    }
    switch (kind) {
    case RK_LSTM:
        rc = lengths ? tg_nn_lstm_forward_packed(m, &r[0], &r[1], &r[2], in[0], lengths, in[1], c)
                     : tg_nn_lstm_forward(m, &r[0], &r[1], &r[2], in[0], in[1], c);
        break;
    case RK_RNN:
    case RK_GRU:
        rc = tg_nn_rnn_forward(m, &r[0], &r[1], in[0], in[1]);
        break;
    case RK_LSTM_CELL: rc = tg_nn_lstm_cell_forward(m, &r[0], &r[1], in[0], in[1], c); break;
    default: rc = tg_nn_rnn_cell_forward(m, &r[0], in[0], in[1]); break;
    }
    tg_module_release(m);
    if (rc < 0) return rc;
    return flat_cat(out, 3, r);
}

/* RNN(2, 3) tanh: x (3, 2, 2), h_0 (1, 2, 3). */
int f_rnn_tanh(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    const tg_rnn_opts o = TG_RNN_OPTS_INIT;
    return rnn_run(out, RK_RNN, &o, NULL, n, in);
}

/* LSTM(2, 3, proj_size=2, bidirectional): x (3, 2, 2), h_0 (2, 2, 2),
 * c_0 (2, 2, 3). */
int f_lstm_proj_bidir(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    tg_rnn_opts o = TG_RNN_OPTS_INIT;
    o.proj_size = 2;
    o.bidirectional = true;
    return rnn_run(out, RK_LSTM, &o, NULL, n, in);
}

/* GRU(2, 3, batch_first): x (2, 3, 2), h_0 (1, 2, 3). */
int f_gru(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    tg_rnn_opts o = TG_RNN_OPTS_INIT;
    o.batch_first = true;
    return rnn_run(out, RK_GRU, &o, NULL, n, in);
}

/* The cells (2, 3): x (2, 2), h (2, 3) (and c (2, 3)). */
int f_rnn_cell(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return rnn_run(out, RK_RNN_CELL, NULL, NULL, n, in);
}

int f_lstm_cell(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return rnn_run(out, RK_LSTM_CELL, NULL, NULL, n, in);
}

int f_gru_cell(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return rnn_run(out, RK_GRU_CELL, NULL, NULL, n, in);
}

/* A bidirectional LSTM(2, 3) over x (3, 3, 2) with lengths {3, 1, 2}:
 * h_0 and c_0 (2, 3, 3). */
int f_lstm_packed(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    static const int64_t lens[3] = {3, 1, 2};
    tg_rnn_opts o = TG_RNN_OPTS_INIT;
    o.bidirectional = true;
    tg_tensor *lengths = NULL;
    int rc = tg_tensor_from_data(&lengths, TG_I64, 1, (const int64_t[]){3}, lens);
    if (rc >= 0) rc = rnn_run(out, RK_LSTM, &o, lengths, n, in);
    tg_tensor_release(lengths);
    return rc;
}
