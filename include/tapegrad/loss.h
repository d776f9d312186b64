/* tapegrad/loss.h - loss functions (differentiable to any order).
 *
 * Every loss is built from differentiable ops (nll_loss is one op, whose
 * gradient is another), so its gradient and the gradient of that gradient
 * come from autograd.  Each writes a new reference into *out and returns
 * TG_OK, or returns a negative tg_status and leaves *out untouched.  Inputs
 * are borrowed.
 *
 * For mse, l1 and bce_with_logits, input and target must have exactly the
 * same shape (no broadcasting: TG_ESHAPE otherwise) and float dtypes;
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
    TG_REDUCTION_NONE
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
