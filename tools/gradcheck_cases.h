/* tools/gradcheck_cases.h - the built-in sweep of `tapegrad gradcheck`
 * (gradcheck_cases.c, gradcheck_fns_nn.c): tiny f64 cases of the ops, each
 * a function under test for tg_gradcheck and tg_gradgradcheck with its
 * input shapes. */
#ifndef TAPEGRAD_TOOLS_GRADCHECK_CASES_H
#define TAPEGRAD_TOOLS_GRADCHECK_CASES_H

#include "tapegrad/autograd.h"
#include "tapegrad/conv.h"

#define GC_MAX_IN 3

typedef enum gc_domain {
    GC_ANY = 0,   /* U[-1, 1] kept away from 0 (kinks of relu, abs) */
    GC_POSITIVE,  /* U[0.5, 2] (log, sqrt, pow, div) */
} gc_domain;

typedef int (*gc_unary_fn)(tg_tensor **, tg_tensor *);
typedef int (*gc_binary_fn)(tg_tensor **, tg_tensor *, tg_tensor *);
typedef int (*gc_scalar_fn)(tg_tensor **, tg_tensor *, double);

typedef struct gc_case {
    const char *op;      /* the registered op's name (`tapegrad ops`) */
    const char *alias;   /* the same cases by rank (conv2d, conv_transpose1d ...), or NULL */
    /* conv, conv_transpose, elementwise, activation, reduce, shape, linalg */
    const char *group;
    const char *label;   /* NULL: generated from the conv parameters */
    tg_gradcheck_fn fn;
    int n;
    int ndim[GC_MAX_IN];
    int64_t shape[GC_MAX_IN][5];
    gc_domain domain;
    gc_unary_fn unary;
    gc_binary_fn binary;
    gc_scalar_fn scalar_op;
    double scalar;
    tg_conv_params conv;
} gc_case;

/* The sweep, gc_ncases cases. */
extern const gc_case gc_cases[];
extern const int gc_ncases;

typedef enum gc_conv_kind { GC_NOT_CONV, GC_CONV, GC_CONV_TRANSPOSE } gc_conv_kind;

/* Whether c is a conv case, which runs with both algorithms and whose label
 * is made from its parameters. */
gc_conv_kind gc_case_conv(const gc_case *c);

/* The functions under test of the nn and pool groups (gradcheck_fns_nn.c),
 * each a tg_gradcheck_fn whose user is the gc_case. */
int f_batch_norm(tg_tensor **out, int n, tg_tensor *const *in, void *user);
int f_layer_norm(tg_tensor **out, int n, tg_tensor *const *in, void *user);
int f_group_norm(tg_tensor **out, int n, tg_tensor *const *in, void *user);
int f_bce_logits(tg_tensor **out, int n, tg_tensor *const *in, void *user);
int f_kl_div_log_target(tg_tensor **out, int n, tg_tensor *const *in, void *user);
int f_bce_logits_weighted(tg_tensor **out, int n, tg_tensor *const *in, void *user);
int f_bce_loss(tg_tensor **out, int n, tg_tensor *const *in, void *user);
int f_smooth_l1_loss(tg_tensor **out, int n, tg_tensor *const *in, void *user);
int f_huber_loss(tg_tensor **out, int n, tg_tensor *const *in, void *user);
int f_cross_entropy(tg_tensor **out, int n, tg_tensor *const *in, void *user);
int f_nll_loss(tg_tensor **out, int n, tg_tensor *const *in, void *user);
int f_avg_pool(tg_tensor **out, int n, tg_tensor *const *in, void *user);
int f_adaptive_avg_pool(tg_tensor **out, int n, tg_tensor *const *in, void *user);
int f_adaptive_max_pool(tg_tensor **out, int n, tg_tensor *const *in, void *user);
int f_max_pool(tg_tensor **out, int n, tg_tensor *const *in, void *user);
int f_upsample_nearest(tg_tensor **out, int n, tg_tensor *const *in, void *user);
int f_bilinear(tg_tensor **out, int n, tg_tensor *const *in, void *user);
int f_trilinear(tg_tensor **out, int n, tg_tensor *const *in, void *user);
int f_bicubic(tg_tensor **out, int n, tg_tensor *const *in, void *user);
int f_bilinear_aa(tg_tensor **out, int n, tg_tensor *const *in, void *user);
int f_bicubic_aa(tg_tensor **out, int n, tg_tensor *const *in, void *user);
int f_rnn_tanh(tg_tensor **out, int n, tg_tensor *const *in, void *user);
int f_lstm_proj_bidir(tg_tensor **out, int n, tg_tensor *const *in, void *user);
int f_gru(tg_tensor **out, int n, tg_tensor *const *in, void *user);
int f_rnn_cell(tg_tensor **out, int n, tg_tensor *const *in, void *user);
int f_lstm_cell(tg_tensor **out, int n, tg_tensor *const *in, void *user);
int f_gru_cell(tg_tensor **out, int n, tg_tensor *const *in, void *user);
int f_lstm_packed(tg_tensor **out, int n, tg_tensor *const *in, void *user);

/* The distances, the newer losses, weight normalization and unfold / fold
 * (gradcheck_fns_loss.c). */
int f_cosine_similarity(tg_tensor **out, int n, tg_tensor *const *in, void *user);
int f_pairwise_distance(tg_tensor **out, int n, tg_tensor *const *in, void *user);
int f_margin_ranking_loss(tg_tensor **out, int n, tg_tensor *const *in, void *user);
int f_hinge_embedding_loss(tg_tensor **out, int n, tg_tensor *const *in, void *user);
int f_soft_margin_loss(tg_tensor **out, int n, tg_tensor *const *in, void *user);
int f_cosine_embedding_loss(tg_tensor **out, int n, tg_tensor *const *in, void *user);
int f_triplet_margin_loss(tg_tensor **out, int n, tg_tensor *const *in, void *user);
int f_gaussian_nll_loss(tg_tensor **out, int n, tg_tensor *const *in, void *user);
int f_poisson_nll_loss(tg_tensor **out, int n, tg_tensor *const *in, void *user);
int f_multi_margin_loss(tg_tensor **out, int n, tg_tensor *const *in, void *user);
int f_multilabel_margin_loss(tg_tensor **out, int n, tg_tensor *const *in, void *user);
int f_multilabel_soft_margin_loss(tg_tensor **out, int n, tg_tensor *const *in, void *user);
int f_weight_norm(tg_tensor **out, int n, tg_tensor *const *in, void *user);
int f_attention(tg_tensor **out, int n, tg_tensor *const *in, void *user);
int f_transformer_decoder_layer(tg_tensor **out, int n, tg_tensor *const *in, void *user);
int f_unfold(tg_tensor **out, int n, tg_tensor *const *in, void *user);
int f_fold(tg_tensor **out, int n, tg_tensor *const *in, void *user);

#endif
