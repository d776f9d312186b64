/* tapegrad/loss.h - loss functions (differentiable to any order).
 *
 * Every loss is built from differentiable ops (nll_loss, smooth_l1_loss,
 * huber_loss, and mse_loss and l1_loss of one f32 or f64 dtype, are each
 * one op whose gradient is another), so its gradient and the gradient of
 * that gradient come from autograd.  Each writes a new reference into *out
 * and returns TG_OK, or returns a negative tg_status and leaves *out
 * untouched.  Inputs are borrowed.
 * tg_ctc_loss (at the end) is the exception: differentiable once, as
 * torch's.
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

#include <stdbool.h>
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
 * [0, C) is TG_EINVAL naming its index.  For class weights, another
 * ignore_index, label smoothing or other shapes: tg_cross_entropy_ex. */
TG_API int tg_cross_entropy(tg_tensor **out, tg_tensor *logits, tg_tensor *target,
                            tg_reduction red);
/* F.cross_entropy(input, target, weight, ignore_index=ignore_index,
 * reduction=red, label_smoothing=label_smoothing) in full: input (C),
 * (N, C) or (N, C, d1, ...) logits; target class indices (i64 of input's
 * shape without the class dim: (), (N) or (N, d1, ...)) or class
 * probabilities (a float target of input's shape); weight NULL or (C).
 * The loss is nll_loss(log_softmax(input, class dim), target, weight,
 * red, ignore_index), and with label smoothing e in [0, 1] as torch's,
 * (1 - e) of that plus e / C of the smoothing term: -sum_c w[c] logp[c]
 * per target (0 where ignored), reduced by red (MEAN: divided by the
 * weights of the targets not ignored).  Probability targets p give
 * -sum_c w[c] logp[c] p'[c] with p' = (1 - e) p + e / C (MEAN: over the
 * numel / C targets).  Differentiable to any order.  TG_EINVAL for NULL
 * out, input or target, or e outside [0, 1]; TG_ESHAPE for a 0-d input,
 * or a float target or a weight of the wrong shape; the rest as
 * tg_nll_loss's. */
TG_API int tg_cross_entropy_ex(tg_tensor **out, tg_tensor *input, tg_tensor *target,
                               tg_tensor *weight, int64_t ignore_index, tg_reduction red,
                               double label_smoothing);

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

/* ---- distances and the margin, embedding and likelihood losses ----
 * As torch 1.13's F.<name>, each composed of differentiable ops: gradients
 * flow to every float input, to any order.  Each writes a new reference
 * into *out and returns TG_OK, or returns a negative tg_status (TG_EINVAL
 * for a NULL argument, a NaN parameter or a reduction other than MEAN, SUM
 * or NONE; TG_EDTYPE for an integer input where torch refuses one;
 * TG_ESHAPE for shapes torch refuses) and leaves *out untouched.  Inputs
 * are borrowed.  Inputs of mixed float dtypes promote as tg_mul.  Where
 * torch takes integer inputs (pairwise_distance, margin_ranking,
 * cosine_embedding, triplet_margin, gaussian_nll, poisson_nll), each is
 * first cast to the float inputs' dtype, f32 when none is float (torch
 * computes their integer parts in integers: the same values below 2^24).
 * The FP32 policy of the losses above: inside an autocast scope f16/bf16
 * inputs are first cast to f32 (their gradients come back in their
 * dtype). */

/* F.cosine_similarity(x1, x2, dim, eps): sum(x1 / n1 * x2 / n2) over dim
 * with n = sqrt(max(sum(x^2, dim), eps^2)), x1 and x2 first expanded to
 * their broadcast shape (TG_ESHAPE when they do not broadcast); dim is of
 * that shape, negative counting from the end (a 0-d pair takes 0 and -1;
 * TG_EINVAL otherwise).  A zero vector gives 0.  As torch's, the clamp does
 * not stop the gradient: d n / d x = x / n with the clamped n. */
TG_API int tg_cosine_similarity(tg_tensor **out, tg_tensor *x1, tg_tensor *x2, int dim,
                                double eps);
/* F.pairwise_distance(x1, x2, p, eps, keepdim): tg_vector_norm(x1 - x2 +
 * eps, p) over the last dim of the broadcast shape (over the element of a
 * 0-d pair), keeping it as extent 1 with keepdim.  Any p but NaN, negative
 * and inf included, as tg_vector_norm (its gradient is 0 for a row of
 * zeros). */
TG_API int tg_pairwise_distance(tg_tensor **out, tg_tensor *x1, tg_tensor *x2, double p,
                                double eps, bool keepdim);
/* torch.cdist(x1, x2, p): the p-norm distance of every row of x1 (.., P, M)
 * to every row of x2 (.., R, M), shape (.., P, R), the batch dims
 * broadcast.  p >= 0 (0, fractional and inf included), as
 * tg_vector_norm over each pair's difference; for p = 2 with P or R above
 * 25, torch's default compute mode: sqrt(max(|a|^2 - 2 a.b + |b|^2, 0))
 * through one matmul (faster, with the cancellation error of that form).
 * The gradient is 0 where a distance is 0, as torch's.  For p = inf, as
 * torch's CPU kernel: the distance is the largest |difference| that is
 * not NaN (0 if none), the whole gradient goes to each tied largest
 * |difference|, and a difference that is NaN or infinite gets NaN;
 * differentiable to any order.  Float x1 and x2 of one dtype (TG_EDTYPE), at least 2-d
 * (TG_EINVAL), the same number of columns (TG_ESHAPE).  The FP32 AMP policy
 * (torch's autocast list): inside autocast half inputs give an f32 result. */
TG_API int tg_cdist(tg_tensor **out, tg_tensor *x1, tg_tensor *x2, double p);
/* torch.pdist(x, p) / F.pdist: the p-norm distance of every pair of rows
 * i < j of x (N, M), in row-major order of the pairs: shape
 * (N (N - 1) / 2), empty for N < 2, zeros for M = 0.  p >= 0 (0,
 * fractional and inf included; TG_EINVAL otherwise), each distance as
 * tg_cdist's direct path (tg_vector_norm over the difference; for p = inf
 * the largest |difference|, the whole gradient to each tied one).  The
 * gradient is 0 where a distance is 0, as torch's; differentiable to any
 * order.  x is a 2-d float tensor (TG_ESHAPE, TG_EDTYPE); inside autocast
 * a half x gives an f32 result (torch's FP32 list). */
TG_API int tg_pdist(tg_tensor **out, tg_tensor *x, double p);
/* F.margin_ranking_loss: max(0, -target (input1 - input2) + margin).  The
 * three must have the same number of dims (TG_ESHAPE otherwise, as torch)
 * and broadcast together; target holds 1 or -1, of any dtype. */
TG_API int tg_margin_ranking_loss(tg_tensor **out, tg_tensor *input1, tg_tensor *input2,
                                  tg_tensor *target, double margin, tg_reduction red);
/* F.hinge_embedding_loss: where(target != 1, max(0, margin - input), 0) +
 * where(target != -1, input, 0), input and target (any dtype, 1 or -1)
 * broadcast together; a target that is neither gets both terms, as
 * torch's. */
TG_API int tg_hinge_embedding_loss(tg_tensor **out, tg_tensor *input, tg_tensor *target,
                                   double margin, tg_reduction red);
/* F.soft_margin_loss: log1p(exp(-input target)), target a float tensor that
 * broadcasts to input's shape without growing it (TG_ESHAPE otherwise, as
 * torch).  Like torch's, exp overflows: inf for input target < -89 in
 * f32.  Not differentiable in target, as torch's: a target that requires
 * grad is TG_EGRAD with grad mode on (torch: "not differentiable with
 * respect to argument 'target'"). */
TG_API int tg_soft_margin_loss(tg_tensor **out, tg_tensor *input, tg_tensor *target,
                               tg_reduction red);
/* F.cosine_embedding_loss: with cos = sum(x1 x2) / sqrt((sum(x1^2) + e)
 * (sum(x2^2) + e)) over the last dim, e = 1e-12 rounded to float as
 * torch's constant (also in f64), 1 - cos where target is 1,
 * max(0, cos - margin) where it is -1 and 0 elsewhere.  target (any dtype)
 * is 1-d (N) with input1 and input2 (N, D), or 0-d with (D); input1 and
 * input2 broadcast together, target with the (N) of cos. */
TG_API int tg_cosine_embedding_loss(tg_tensor **out, tg_tensor *input1, tg_tensor *input2,
                                    tg_tensor *target, double margin, tg_reduction red);
/* F.triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap):
 * max(0, margin + d(a, p) - d(a, n)) with d = tg_pairwise_distance(., .,
 * p, eps, false); swap replaces d(a, n) with min(d(a, n), d(p, n))
 * (tg_minimum: half the gradient to each at a tie).  The three must have
 * the same number of dims (TG_ESHAPE otherwise, as torch) and broadcast
 * together. */
TG_API int tg_triplet_margin_loss(tg_tensor **out, tg_tensor *anchor, tg_tensor *positive,
                                  tg_tensor *negative, double margin, double p, double eps,
                                  bool swap, tg_reduction red);
/* A distance for tg_triplet_margin_with_distance_loss: *out (a new
 * reference) the distances of x1 and x2 (borrowed), user the caller's
 * pointer; TG_OK or a negative tg_status with its message set. */
typedef int (*tg_distance_fn)(tg_tensor **out, tg_tensor *x1, tg_tensor *x2, void *user);
/* F.triplet_margin_with_distance_loss(anchor, positive, negative,
 * distance_function, margin, swap, reduction): max(0, margin + d(a, p) -
 * d(a, n)) with d = distance(., ., user), tg_pairwise_distance(., ., 2,
 * 1e-6, false) for a NULL distance (torch's None); swap replaces d(a, n)
 * with min(d(a, n), d(p, n)).  Differentiable as far as d is (gradients
 * flow through what distance records).  margin > 0 (TG_EINVAL, as torch);
 * the three must have the same number of dims (TG_ESHAPE); no dtype rule
 * or AMP cast of its own: distance's apply.  An error of distance is
 * returned as it is. */
TG_API int tg_triplet_margin_with_distance_loss(tg_tensor **out, tg_tensor *anchor,
                                                tg_tensor *positive, tg_tensor *negative,
                                                tg_distance_fn distance, void *user,
                                                double margin, bool swap, tg_reduction red);
/* F.gaussian_nll_loss(input, target, var, full, eps): 0.5 (log v + (input -
 * target)^2 / v), plus 0.5 log(2 pi) with full, v = max(var, eps); as
 * torch's, the clamp does not stop the gradient in var.  input and target
 * broadcast together; var has input's shape, or it without the last dim
 * (then given one of extent 1), or it with a last dim of 1 (TG_ESHAPE
 * otherwise, as torch's "var is of incorrect size").  A negative element of
 * var is TG_EINVAL (checked by one read-only pass); NaN passes, as torch's
 * check. */
TG_API int tg_gaussian_nll_loss(tg_tensor **out, tg_tensor *input, tg_tensor *target,
                                tg_tensor *var, bool full, double eps, tg_reduction red);
/* F.poisson_nll_loss(input, target, log_input, full, eps): exp(input) -
 * target input with log_input, input - target log(input + eps) without;
 * full adds the Stirling term target log target - target + 0.5 log(2 pi
 * target) where target > 1 (0 elsewhere; its gradient in target is NaN at
 * target = 0, as torch's).  input and target are float tensors that
 * broadcast together. */
TG_API int tg_poisson_nll_loss(tg_tensor **out, tg_tensor *input, tg_tensor *target,
                               bool log_input, bool full, double eps, tg_reduction red);

/* F.multi_margin_loss(input, target, p, margin, weight): per sample, the
 * sum over classes i != y of w[y] max(0, margin - x[y] + x[i])^p, / C;
 * input (N, C), (C) or 0-d (C = 1), target i64 class indices (N), (1) or
 * 0-d (one per sample; in [0, C), TG_EINVAL naming the first that is not),
 * p 1 or 2 (TG_EINVAL otherwise, as torch), weight NULL or 1-d of C
 * elements.  NONE gives (N), or target's shape for an input of one sample.
 * The gradient is 0 where the margin is hit exactly, as torch's.  Not
 * differentiable in weight, as torch's: a weight that requires grad is
 * TG_EGRAD with grad mode on (torch: "not differentiable with respect to
 * argument 'weight'"). */
TG_API int tg_multi_margin_loss(tg_tensor **out, tg_tensor *input, tg_tensor *target, int p,
                                double margin, tg_tensor *weight, tg_reduction red);
/* F.multilabel_margin_loss(input, target): per sample, the sum over the
 * classes j listed in target's row (up to the first -1) and the classes i
 * not listed of max(0, 1 - x[j] + x[i]), / C; input (N, C), (C) or 0-d,
 * target i64 of input's shape with elements in [-1, C) (TG_EINVAL naming
 * the first that is not, as torch checks every one).  NONE gives (N), ()
 * for one sample.  Memory: an (N, C, C) grid of pairs. */
TG_API int tg_multilabel_margin_loss(tg_tensor **out, tg_tensor *input, tg_tensor *target,
                                     tg_reduction red);
/* F.multilabel_soft_margin_loss(input, target, weight): -(t logsigmoid(x) +
 * (1 - t) logsigmoid(-x)) w, summed over the last dim of the result and
 * divided by input's last extent C; input of at least one dim, target a
 * float tensor that broadcasts with it, weight NULL or a float tensor that
 * broadcasts too.  NONE gives the per-sample losses. */
TG_API int tg_multilabel_soft_margin_loss(tg_tensor **out, tg_tensor *input, tg_tensor *target,
                                          tg_tensor *weight, tg_reduction red);

/* ---- connectionist temporal classification ---- */

/* tg_ctc_loss's options beside its tensors; torch's defaults in
 * TG_CTC_LOSS_OPTS_INIT. */
typedef struct tg_ctc_loss_opts {
    int64_t blank;            /* the blank label, in [0, C) */
    tg_reduction reduction;   /* MEAN, SUM or NONE */
    bool zero_infinity;       /* infinite losses (and their gradients) become 0 */
} tg_ctc_loss_opts;
#define TG_CTC_LOSS_OPTS_INIT {.blank = 0, .reduction = TG_REDUCTION_MEAN, .zero_infinity = false}

/* F.ctc_loss(log_probs, targets, input_lengths, target_lengths, blank,
 * reduction, zero_infinity) of torch 1.13, its CPU kernel's values and
 * gradient.  log_probs (T, N, C), or (T, C) for one unbatched sequence
 * (N = 1), f32 or f64 (inside an autocast scope f16/bf16 are first cast to
 * f32, torch's FP32 list; outside, TG_EDTYPE as torch's CPU kernel).
 * targets, of any integer dtype: padded (N, S), row n holding its
 * target_lengths[n] labels first (the rest is never read), or the N
 * targets concatenated, 1-d of sum(target_lengths) elements.
 * input_lengths and target_lengths: integer tensors of N elements (torch
 * takes any shape of N elements: (N), or 0-d for unbatched input), each
 * input length in [0, T] and target length in [0, S] (padded).  The labels
 * read must be in [0, C) (the blank label too is taken, as torch runs it).
 *
 * The loss of sequence n is -log p(target_n | log_probs[:input_lengths[n],
 * n]), summed over every alignment that collapses to the target, by the
 * log-space alpha recursion over the target with blanks interleaved; a
 * target no alignment of its input length reaches (too long, or too many
 * repeated labels, which need a blank between them) has loss +inf, not an
 * error.  An input length of 0 gives 0 for an empty target, +inf
 * otherwise.  zero_infinity replaces +inf losses by 0 and their gradients
 * by 0.  NONE gives the (N) losses (0-d for unbatched), SUM their sum,
 * MEAN the mean over the batch of each loss divided by max(its target
 * length, 1) (NaN for N = 0, as torch).
 *
 * The gradient in log_probs is torch's: for t < input_lengths[n],
 * g_n (exp(lp[t, n, c]) - sum over positions s of label c of
 * exp(log_alpha[t, s] + log_beta[t, s] + loss_n - lp[t, n, c])), 0 for t
 * at or past the input length.  The exp(lp) term makes it the gradient
 * through a log_softmax (which drops it) rather than the derivative in
 * log_probs themselves: feed log_probs from tg_log_softmax, as torch's
 * docs ask.  An infinite loss without zero_infinity gives NaN there, as
 * torch.  Computed in log_probs' dtype, as torch's kernel, in parallel over
 * the batch.  Not differentiable twice, as torch's _ctc_loss_backward: a
 * create_graph backward through it is TG_EGRAD naming ctc_loss.  targets
 * and the lengths get no gradient.
 *
 * opts may be NULL (TG_CTC_LOSS_OPTS_INIT).  *out is a new reference;
 * inputs are borrowed.  Errors, naming the argument and the rule, leave
 * *out untouched: TG_EINVAL for NULL out or tensors, a blank outside
 * [0, C), another reduction, a length outside its range (negative
 * included), a label outside [0, C); TG_EDTYPE for float targets or
 * lengths or a log_probs that is not f32 or f64; TG_ESHAPE for log_probs
 * not 2-d or 3-d, targets not 1-d or 2-d, padded targets of other than N
 * rows, concatenated targets of other than sum(target_lengths) elements,
 * or lengths of other than N elements. */
TG_API int tg_ctc_loss(tg_tensor **out, tg_tensor *log_probs, tg_tensor *targets,
                       tg_tensor *input_lengths, tg_tensor *target_lengths,
                       const tg_ctc_loss_opts *opts);

#ifdef __cplusplus
}
#endif
#endif
