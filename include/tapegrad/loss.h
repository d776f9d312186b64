/* tapegrad/loss.h - loss functions (composite, differentiable to any order).
 *
 * Every loss is built from public differentiable ops, so its gradient and the
 * gradient of that gradient come from autograd.  Each writes a new reference
 * into *out and returns TG_OK, or returns a negative tg_status and leaves *out
 * untouched.  Inputs are borrowed.
 *
 * input and target must have exactly the same shape (no broadcasting:
 * TG_ESHAPE otherwise) and float dtypes.  Inside an autocast scope the inputs
 * are first cast to f32 (the FP32 policy: losses never compute in f16/bf16).
 *
 * Reductions as PyTorch's `reduction=` argument: MEAN averages over all
 * elements (over the batch for cross_entropy), SUM adds them, NONE returns the
 * elementwise losses (shape of input; (N) for cross_entropy).
 */
#ifndef TAPEGRAD_LOSS_H
#define TAPEGRAD_LOSS_H

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
 * loss[n] = logsumexp(logits[n, :]) - logits[n, target[n]], with the row
 * maximum subtracted before exp (so a row holding +inf is NaN, value and
 * gradient, as in PyTorch).  A target outside [0, C) is TG_EINVAL naming its
 * index. */
TG_API int tg_cross_entropy(tg_tensor **out, tg_tensor *logits, tg_tensor *target,
                            tg_reduction red);

#ifdef __cplusplus
}
#endif
#endif
