/* src/ops/loss.h - what the loss files (loss.c, bce_loss.c, smooth_l1.c,
 * kl_div.c, bce_logits_weighted.c, nll_loss.c, distance.c, margin_loss.c,
 * nll_dist_loss.c, multi_margin.c) share: the argument checks of a loss and
 * of a weight, the reduction, the FP32 cast, and a clamp that keeps its
 * gradient. */
#ifndef TAPEGRAD_OPS_LOSS_H
#define TAPEGRAD_OPS_LOSS_H

#include "tapegrad/loss.h"
#include "tapegrad/op.h"

/* TG_EINVAL naming op unless red is MEAN, SUM or NONE. */
int tg__loss_check_reduction(const char *op, tg_reduction red);
/* The checks every loss of an input and a target starts with: out, input
 * and target non-NULL, red a reduction, input a float tensor (TG_EINVAL or
 * TG_EDTYPE naming op). */
int tg__loss_check_common(const char *op, tg_tensor **out, const tg_tensor *input,
                          const tg_tensor *target, tg_reduction red);
/* Checks out, input and target non-NULL, red one of the three reductions,
 * float dtypes, and target of exactly input's shape (no broadcasting):
 * TG_EINVAL, TG_EDTYPE or TG_ESHAPE with a message naming op. */
int tg__loss_check_pair(const char *op, tg_tensor **out, const tg_tensor *input,
                        const tg_tensor *target, tg_reduction red);
/* As tg__loss_check_pair, but target's shape need only broadcast with
 * input's (the loss then has the broadcast shape). */
int tg__loss_check_pair_broadcast(const char *op, tg_tensor **out, const tg_tensor *input,
                                  const tg_tensor *target, tg_reduction red);
/* w (name: "weight", "pos_weight") NULL, or a float tensor that broadcasts
 * to input's shape without growing it (PyTorch's rule: the loss keeps
 * input's shape): TG_EDTYPE or TG_ESHAPE with a message naming op and w. */
int tg__loss_check_weight(const char *op, const char *name, const tg_tensor *w,
                          const tg_tensor *input);
/* TG_EGRAD when t (named name) requires grad with grad mode on: torch
 * defines no derivative for it ("The function 'op' is not differentiable
 * with respect to argument 'name'. This input cannot have requires_grad
 * True."), at the call.  Under no-grad, or for NULL t, TG_OK. */
int tg__loss_check_constant(const char *op, const char *name, const tg_tensor *t);
/* The shape rule of a loss op on n float inputs of one shape (no
 * broadcasting; dispatch has promoted them to one dtype): the result has
 * input 0's dtype and shape.  TG_EDTYPE or TG_ESHAPE naming op and the
 * input otherwise. */
int tg__loss_same_shape(const char *op, int n, tg_tensor *const *in, tg_dtype *dtype,
                        int *ndim, int64_t *shape);
/* *out (new reference): tg_mean or tg_sum of t, or t itself retained for
 * TG_REDUCTION_NONE. */
int tg__loss_reduce(tg_tensor **out, tg_tensor *t, tg_reduction red);
/* Releases t[0..n) (NULL entries are skipped): the composed losses' steps. */
void tg__loss_release_all(tg_tensor **t, int n);
/* *out (new reference): max(s, lo) with the gradient of s itself (1 also
 * where the clamp holds), as torch's in-place clamp under no_grad in
 * cosine_similarity and gaussian_nll_loss (src/ops/distance.c). */
int tg__clamp_min_through(tg_tensor **out, tg_tensor *s, double lo);
/* The FP32 policy of the losses composed of other ops (loss.c's mse and
 * l1, distance.c, margin_loss.c, nll_dist_loss.c, multi_margin.c): dst[i]
 * (new references, NULL for a NULL src[i]) is src[i] cast to f32 when an
 * autocast scope is open and it is f16/bf16 (a recorded cast: its gradient
 * comes back in its dtype), src[i] itself otherwise.  On error every dst[i]
 * is NULL. */
int tg__loss_amp_f32(tg_tensor **dst, tg_tensor *const *src, int n);
/* The integer rule of the losses torch runs on integer inputs (the
 * distances but cosine_similarity, margin_ranking, cosine_embedding,
 * triplet_margin, gaussian_nll, poisson_nll): each integer tensor among
 * t[0..n) (new references; NULL entries skipped) is replaced by its cast to
 * the promoted dtype of the float ones, f32 when none is float.  On error
 * every t[i] is released and NULL. */
int tg__loss_ints_to_float(tg_tensor **t, int n);
/* *out (new reference) = (x - t)^2 (square) or |x - t| element-wise as one
 * recorded op whose gradient is one pass (src/ops/diff_loss.c), the bits of
 * mul(sub(x, t), sub(x, t)) or abs(sub(x, t)) and of their gradients: for
 * x and t of one shape and one dtype, f32 or f64. */
int tg__diff_elementwise(tg_tensor **out, tg_tensor *x, tg_tensor *t, bool square);

/* nll_loss.c's reading of the K = numel(target) targets: each class in
 * cls[k] (-1 where target is ignore) and weight in wk[k] (weight[class],
 * 1 without a weight, 0 where ignored), sum_k wk[k] in *total; TG_EINVAL
 * naming op and the first target neither in [0, C) nor ignore. */
int tg__nll_read_targets(const char *op, const tg_tensor *target, const tg_tensor *weight,
                         int64_t C, int64_t ignore, int64_t *cls, double *wk, double *total);
/* *out (new reference) = nll_loss_backward(g): the gradient of
 * tg_nll_loss(logp, target, weight, red, ignore_index) with respect to logp
 * of C classes, as a recorded op (differentiable to any order). */
int tg__nll_loss_backward(tg_tensor **out, tg_tensor *g, tg_tensor *target, tg_tensor *weight,
                          tg_reduction red, int64_t ignore_index, int64_t C);
/* cross_entropy of f32 or f64 logits x (N, C) or (N, C, d1, ...) and i64
 * classes target (N) or (N, d1, ...), weight NULL or (C) of x's dtype not
 * requiring grad, red one of the three, x not empty:
 * tg_nll_loss(tg_log_softmax(x, 1), ...)'s value and gradients, bit for
 * bit, as one recorded op (src/ops/cross_entropy_rows.c) that keeps each
 * row's maximum and sum of exps for its backward.  Returns
 * TG__CE_ROWS_NOT_TAKEN (> 0), nothing done, for any other arguments. */
enum { TG__CE_ROWS_NOT_TAKEN = 1 };
int tg__cross_entropy_rows(tg_tensor **out, tg_tensor *x, tg_tensor *target, tg_tensor *weight,
                           tg_reduction red, int64_t ignore_index);
/* cross_entropy of f32 or f64 logits x (N, C) or (N, C, d1, ...) with
 * label_smoothing in (0, 1] and i64 classes target (N) or (N, d1, ...),
 * or with a target of class probabilities of x's shape and dtype not
 * requiring grad (label_smoothing in [0, 1]), weight NULL or (C) of x's
 * dtype not requiring grad, red one of the three, x not empty: torch's
 * value and gradients as one recorded op (src/ops/cross_entropy_soft.c),
 * each computed in double and rounded once.  Returns
 * TG__CE_ROWS_NOT_TAKEN, nothing done, for any other arguments. */
int tg__cross_entropy_soft(tg_tensor **out, tg_tensor *x, tg_tensor *target, tg_tensor *weight,
                           tg_reduction red, int64_t ignore_index, double label_smoothing);
/* tg_cross_entropy_ex as the composition of recorded ops alone (log_softmax,
 * nll_loss, the smoothing term's), never one of the ops above: for tests
 * that compare those with it. */
int tg__cross_entropy_composed(tg_tensor **out, tg_tensor *input, tg_tensor *target,
                               tg_tensor *weight, int64_t ignore_index, tg_reduction red,
                               double label_smoothing);

/* What both one-op cross entropies (cross_entropy_rows.c,
 * cross_entropy_soft.c) ask of their arguments besides a probability
 * target: x f32 or f64 of ndim >= 2 and not empty; classes (may be NULL,
 * unchecked) i64 class indices of x's shape without dim 1; weight NULL or
 * a (C) tensor of x's dtype not requiring grad; red MEAN, SUM or NONE. */
bool tg__ce_rows_fit(const tg_tensor *x, const tg_tensor *classes, const tg_tensor *weight,
                     tg_reduction red);
/* The end of a one-op cross entropy's forward (cross_entropy_rows.c,
 * cross_entropy_soft.c): the K per-row losses l summed in order (divided by
 * total for MEAN) into l[0] unless red is NONE, written into r (rounded to
 * its dtype); with ctx, the slots x, target, st and weight (when given)
 * saved in that order. */
int tg__ce_rows_finish(tg_op_ctx *ctx, tg_tensor *r, double *l, int64_t K, tg_reduction red,
                       double total, tg_tensor *x, tg_tensor *target, tg_tensor *st,
                       tg_tensor *weight);

#endif
