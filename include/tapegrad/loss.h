/* tapegrad/loss.h - loss functions (differentiable to any order).
 *
 * Every loss is built from differentiable ops (nll_loss, smooth_l1_loss and
 * huber_loss are each one op whose gradient is another), so its gradient and
 * the gradient of that gradient come from autograd.  Each writes a new reference into *out and returns
 * TG_OK, or returns a negative tg_status and leaves *out untouched.  Inputs
 * are borrowed.
 *
 * For mse, l1, bce_with_logits, bce, smooth_l1 and huber, input and target
 * must have exactly the same shape (no broadcasting: TG_ESHAPE otherwise)
 * and float dtypes (mixed float dtypes promote);
 * cross_entropy and nll_loss take i64 class indices.  Inside an autocast
 * scope the float inputs are first cast to f32 (the FP32 policy: losses never
 * compute in f16/bf16).
 *
 * Reductions as PyTorch's `reduction=` argument: MEAN averages over all
 * elements (over the batch for cross_entropy; a weighted mean for nll_loss),
 * SUM adds them, NONE returns the elementwise losses (shape of input; (N) for
 * cross_entropy, target's shape for nll_loss).
 */
#ifndef TAPEGRAD_LOSS_H
#define TAPEGRAD_LOSS_H

#include <stdint.h>

#include "tapegrad/export.h"
#include "tapegrad/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tg_reduction {
    TG_REDUCTION_MEAN = 0,
    TG_REDUCTION_SUM,
    TG_REDUCTION_NONE,
    TG_REDUCTION_BATCHMEAN   /* tg_kl_div only: the sum / input's dim 0 (the other losses:
                                TG_EINVAL) */
} tg_reduction;

/* (input - target)^2, reduced. */
TG_API int tg_mse_loss(tg_tensor **out, tg_tensor *input, tg_tensor *target, tg_reduction red);
/* |input - target|, reduced (gradient 0 where they are equal, as PyTorch). */
TG_API int tg_l1_loss(tg_tensor **out, tg_tensor *input, tg_tensor *target, tg_reduction red);
/* Binary cross entropy of sigmoid(logits) against target probabilities,
 * computed stably as softplus(x) - x*t with
 * softplus(x) = max(x, 0) + log1p(exp(-|x|)): finite for |x| = 1000, and its
 * gradient is exactly sigmoid(x) - t (also at x = 0).  Infinite logits give
 * PyTorch's values: (1 - t) * x at x = +inf (inf; NaN for t = 1) and NaN at
 * x = -inf. */
TG_API int tg_bce_with_logits(tg_tensor **out, tg_tensor *logits, tg_tensor *target,
                              tg_reduction red);
/* Binary cross entropy of probabilities, as F.binary_cross_entropy:
 * loss = -weight (t max(log x, -100) + (1 - t) max(log(1 - x), -100)); the
 * clamp at -100 keeps it finite at x = 0 and 1.  Every element of input
 * must be in [0, 1] (TG_EINVAL naming the first that is not, NaN included,
 * as PyTorch refuses them): checked by two read-only passes (its minimum
 * and maximum), so the check costs about as much as two reductions.  weight
 * is NULL or a float tensor that broadcasts to input's shape (PyTorch's
 * rule: it must not grow the result).  The gradients are PyTorch's:
 * g (x - t) / max((1 - x) x, eps) for input, eps = 1e-12 rounded to
 * float as in PyTorch's kernel (finite at x = 0 and 1) and
 * g (log(1 - x) - log x) for target; weight, a factor of the loss, gets
 * one too (PyTorch has none).  f16/bf16 are computed in f32 and rounded
 * once (PyTorch's CPU kernel has no half version); in f16 the gradient at
 * x = 0 or 1 is infinite, 1e12 being beyond its range. */
TG_API int tg_bce_loss(tg_tensor **out, tg_tensor *input, tg_tensor *target, tg_tensor *weight,
                       tg_reduction red);
/* Smooth L1 loss, as F.smooth_l1_loss: with d = input - target,
 * d^2 / (2 beta) where |d| < beta and |d| - beta / 2 elsewhere.  beta >= 0
 * (TG_EINVAL otherwise, NaN too); beta = 0 is |d|, whose gradient is
 * PyTorch's: the sign of d for input and of -d for target, but -1 for both
 * at d = 0 (tg_l1_loss gives 0 there). */
TG_API int tg_smooth_l1_loss(tg_tensor **out, tg_tensor *input, tg_tensor *target,
                             tg_reduction red, double beta);
/* Huber loss, as F.huber_loss: d^2 / 2 where |d| < delta and
 * delta (|d| - delta / 2) elsewhere, that is delta times the smooth L1 loss
 * with beta = delta.  delta > 0 (TG_EINVAL otherwise, NaN too).  Both
 * losses are differentiable to any order; the second derivative is 0 at
 * |d| = beta (delta), as PyTorch's. */
TG_API int tg_huber_loss(tg_tensor **out, tg_tensor *input, tg_tensor *target,
                         tg_reduction red, double delta);
/* Cross entropy of logits (N, C) against class indices target (N), dtype i64:
 * loss[n] = logsumexp(logits[n, :]) - logits[n, target[n]], computed as
 * tg_nll_loss(tg_log_softmax(logits, 1), target), so with the row maximum
 * subtracted before exp (a row holding +inf is NaN, value and gradient, as in
 * PyTorch).  A target of -100 is ignored, as by PyTorch's default
 * ignore_index (loss 0, left out of the mean); any other target outside
 * [0, C) is TG_EINVAL naming its index.  For class weights or another
 * ignore_index, call tg_log_softmax and tg_nll_loss. */
TG_API int tg_cross_entropy(tg_tensor **out, tg_tensor *logits, tg_tensor *target,
                            tg_reduction red);

/* F.binary_cross_entropy_with_logits(logits, target, weight, reduction,
 * pos_weight=pos_weight): weight * ((1 - t) x + lw * softplus(-x)) with lw
 * = 1 + (pos_weight - 1) * t, softplus(-x) computed as log1p(exp(-|x|)) +
 * max(-x, 0), finite for |x| = 1000.  logits and target are float tensors
 * of one shape (TG_ESHAPE otherwise); weight and pos_weight are borrowed,
 * NULL (1) or float tensors that broadcast to logits' shape (pos_weight
 * typically (C), against the last dim).  red is MEAN, SUM or NONE
 * (TG_EINVAL otherwise).  *out is a new reference.  Composed of
 * differentiable ops: gradients flow to logits, target, weight and
 * pos_weight, to any order.  tg_bce_with_logits is this with both weights
 * NULL, computed by a fused op. */
TG_API int tg_bce_with_logits_weighted(tg_tensor **out, tg_tensor *logits, tg_tensor *target,
                                       tg_tensor *weight, tg_tensor *pos_weight,
                                       tg_reduction red);

/* F.kl_div(input, target, reduction, log_target) of PyTorch 1.13: with
 * log_target false, xlogy(target, target) - target * input (0 where target
 * is 0, NaN where it is negative); with log_target true, exp(target) *
 * (target - input).  input holds log-probabilities; input and target are
 * float tensors whose shapes broadcast together, as torch's (TG_ESHAPE
 * otherwise; the pointwise loss has the broadcast shape).  red is MEAN
 * (over every element of it), SUM, NONE, or BATCHMEAN: the sum / input's
 * extent of dim 0 (the sum for a 0-d input), torch's "batchmean".  *out is a new
 * reference.  Composed of differentiable ops: gradients flow to input and
 * target, to any order (the gradient in target at target = 0 is NaN, as
 * torch's).  TG_EINVAL for NULL arguments or another red, TG_EDTYPE for
 * integer tensors. */
TG_API int tg_kl_div(tg_tensor **out, tg_tensor *input, tg_tensor *target, tg_reduction red,
                     bool log_target);

/* PyTorch's default ignore_index (-100): a target no class has, so nothing
 * is ignored unless a target says -100. */
#define TG_IGNORE_INDEX_DEFAULT (-100)

/* Negative log-likelihood of log-probabilities logp (from tg_log_softmax)
 * against class indices target (dtype i64), as torch.nn.functional.nll_loss:
 * logp (N, C) with target (N), logp (N, C, d1, ...) with target (N, d1, ...),
 * or one sample logp (C) with a 0-d target.  loss = -logp[.., target, ..] *
 * weight[target], weight (C) or NULL (all ones); a target equal to
 * ignore_index (TG_IGNORE_INDEX_DEFAULT, or a class) contributes 0.  MEAN
 * divides the sum by the weights of the targets not ignored, so it is NaN
 * when every target is ignored or every weight used is 0, as in torch 1.13
 * (the gradient is then 0 at ignored targets and NaN at those of weight 0);
 * NONE gives target's shape.  A target outside [0, C) that is not
 * ignore_index is TG_EINVAL naming its index.  The gradient is -weight *
 * g at each target's class and 0 elsewhere, differentiable to any order;
 * weight gets none (TG_EINVAL when it requires grad and the call is
 * recorded; detach it).  Mixed float dtypes of logp and weight promote
 * (torch: an error). */
TG_API int tg_nll_loss(tg_tensor **out, tg_tensor *logp, tg_tensor *target, tg_tensor *weight,
                       tg_reduction red, int64_t ignore_index);

#ifdef __cplusplus
}
#endif
#endif
