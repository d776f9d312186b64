/* tapegrad/optim.h - SGD, Adam, AdamW, RMSprop, Adagrad, Adadelta, Adamax, NAdam, RAdam,
 * Rprop, ASGD, L-BFGS and SparseAdam with PyTorch 1.13's update rules.
 *
 *   tg_optimizer *opt;
 *   tg_adam_opts o = TG_ADAM_OPTS_INIT;   // lr 1e-3, betas (0.9, 0.999), eps 1e-8
 *   tg_adam_new(&opt, 2, (tg_tensor *[]){w, b}, &o);
 *   for (...) {
 *       tg_optimizer_zero_grad(opt);   // or tg_optimizer_zero_grad_ex(opt, false)
 *       ... compute loss; tg_backward(loss, NULL, NULL);
 *       tg_optimizer_step(opt);
 *   }
 *   tg_optimizer_free(opt);
 *
 * An optimizer is an opaque object owned by its creator (tg_optimizer_free).
 * It retains its parameters, which must be float leaf tensors, each given
 * once, in param groups with options of their own (the constructor's is
 * group 0; tg_adam_add_param_group adds more).  Per-parameter state
 * (momentum buffers, moments, step counts) is created on a parameter's
 * first step with a gradient, as in PyTorch, and kept in f64 for f64
 * parameters and in f32 otherwise (f16/bf16 parameters are updated in f32
 * and rounded once); a parameter whose dtype changed since
 * (tg_module_to_dtype) has its state converted at its next step.  Functions
 * return TG_OK or a negative tg_status; on error nothing is changed.
 */
#ifndef TAPEGRAD_OPTIM_H
#define TAPEGRAD_OPTIM_H

#include <stdbool.h>
#include <stdint.h>

#include "tapegrad/data.h"
#include "tapegrad/export.h"
#include "tapegrad/safetensors.h"
#include "tapegrad/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tg_optimizer tg_optimizer;
typedef struct tg_module tg_module;   /* tapegrad/nn.h */

/* torch.optim.SGD:  d = g (-g when maximize);  d = d + weight_decay * p;
 * with momentum, buf = d on the first step, else
 * buf = momentum * buf + (1 - dampening) * d, and d = d + momentum * buf
 * (nesterov) or d = buf;  p -= lr * d.
 * lr, momentum, weight_decay >= 0; nesterov needs momentum > 0 and
 * dampening == 0. */
typedef struct tg_sgd_opts {
    double lr;
    double momentum;
    double dampening;
    double weight_decay;
    bool nesterov;
    bool maximize;   /* ascend the objective: the gradient's sign flipped */
} tg_sgd_opts;
#define TG_SGD_OPTS_INIT                                                      \
    {.lr = 1e-2, .momentum = 0.0, .dampening = 0.0, .weight_decay = 0.0, .nesterov = false, \
     .maximize = false}

/* torch.optim.Adam / AdamW:  t += 1;  g = -g when maximize;
 * Adam adds weight_decay * p to g (L2); AdamW instead scales
 * p *= 1 - lr * weight_decay (decoupled);  m = b1 m + (1 - b1) g;
 * v = b2 v + (1 - b2) g^2;  with amsgrad, vmax = max(vmax, v) (NaN if
 * either is) takes v's place below;
 * p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
 * lr, eps, weight_decay >= 0; betas in [0, 1). */
typedef struct tg_adam_opts {
    double lr;
    double beta1, beta2;
    double eps;
    double weight_decay;
    bool amsgrad;    /* AMSGrad: the largest v so far in the denominator */
    bool maximize;   /* ascend the objective: the gradient's sign flipped */
} tg_adam_opts;
#define TG_ADAM_OPTS_INIT                                                     \
    {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.0,  \
     .amsgrad = false, .maximize = false}
#define TG_ADAMW_OPTS_INIT                                                    \
    {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 1e-2, \
     .amsgrad = false, .maximize = false}

/* torch.optim.RMSprop:  g = g (-g when maximize);  g = g + weight_decay * p;
 * v = alpha * v + (1 - alpha) * g^2;  centered: a = alpha * a + (1 - alpha) * g
 * and d = sqrt(v - a^2) + eps, else d = sqrt(v) + eps;  with momentum > 0,
 * buf = momentum * buf + g / d and p -= lr * buf, else p -= lr * g / d
 * (v, a and buf start at zeros).  lr, alpha, eps, weight_decay, momentum
 * >= 0, as torch checks (alpha > 1 is accepted, as there). */
typedef struct tg_rmsprop_opts {
    double lr;
    double alpha;    /* smoothing constant of the averages */
    double eps;
    double weight_decay;
    double momentum;
    bool centered;   /* divide by the estimated standard deviation of g */
    bool maximize;   /* ascend the objective: the gradient's sign flipped */
} tg_rmsprop_opts;
#define TG_RMSPROP_OPTS_INIT                                                  \
    {.lr = 1e-2, .alpha = 0.99, .eps = 1e-8, .weight_decay = 0.0, .momentum = 0.0, \
     .centered = false, .maximize = false}

/* torch.optim.Adagrad:  t += 1;  g = -g when maximize;  g = g + weight_decay * p;
 * clr = lr / (1 + (t - 1) * lr_decay);  sum = sum + g * g;
 * p -= clr * g / (sqrt(sum) + eps), sum starting at initial_accumulator_value.
 * lr, lr_decay, weight_decay, initial_accumulator_value, eps >= 0. */
typedef struct tg_adagrad_opts {
    double lr;
    double lr_decay;
    double weight_decay;
    double initial_accumulator_value;
    double eps;
    bool maximize;   /* ascend the objective: the gradient's sign flipped */
} tg_adagrad_opts;
#define TG_ADAGRAD_OPTS_INIT                                                  \
    {.lr = 1e-2, .lr_decay = 0.0, .weight_decay = 0.0, .initial_accumulator_value = 0.0, \
     .eps = 1e-10, .maximize = false}

/* torch.optim.Adadelta:  g = -g when maximize;  g = g + weight_decay * p;
 * v = rho v + (1 - rho) g^2;  d = sqrt(u + eps) / sqrt(v + eps) * g;
 * u = rho u + (1 - rho) d^2;  p -= lr * d (v: square_avg, u: acc_delta, both
 * starting at zeros).  lr, eps, weight_decay >= 0; rho in [0, 1]. */
typedef struct tg_adadelta_opts {
    double lr;
    double rho;
    double eps;
    double weight_decay;
    bool maximize;   /* ascend the objective: the gradient's sign flipped */
} tg_adadelta_opts;
#define TG_ADADELTA_OPTS_INIT                                                 \
    {.lr = 1.0, .rho = 0.9, .eps = 1e-6, .weight_decay = 0.0, .maximize = false}

/* torch.optim.Adamax:  t += 1;  g = -g when maximize;  g = g + weight_decay * p;
 * m = b1 m + (1 - b1) g;  u = max(b2 u, |g| + eps) (NaN if either is);
 * p -= lr / (1 - b1^t) * m / u.  lr, eps, weight_decay >= 0; betas in [0, 1). */
typedef struct tg_adamax_opts {
    double lr;
    double beta1, beta2;
    double eps;
    double weight_decay;
    bool maximize;   /* ascend the objective: the gradient's sign flipped */
} tg_adamax_opts;
#define TG_ADAMAX_OPTS_INIT                                                   \
    {.lr = 2e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.0, \
     .maximize = false}

/* torch.optim.NAdam:  t += 1;  g = g + weight_decay * p;
 * mu_t = b1 (1 - 0.96^(t momentum_decay) / 2), mu_{t+1} likewise;
 * P = P mu_t (the product of the mu so far, kept in f32 as torch's state
 * "mu_product");  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
 * d = sqrt(v / (1 - b2^t)) + eps;
 * p -= lr (1 - mu_t) / (1 - P) * g / d;
 * p -= lr mu_{t+1} / (1 - P mu_t mu_{t+1}) * m / d (torch 1.13's product, mu_t
 * in it twice, where the NAdam paper has P mu_{t+1}).
 * lr, eps, weight_decay, momentum_decay >= 0; betas in [0, 1). */
typedef struct tg_nadam_opts {
    double lr;
    double beta1, beta2;
    double eps;
    double weight_decay;
    double momentum_decay;
} tg_nadam_opts;
#define TG_NADAM_OPTS_INIT                                                    \
    {.lr = 2e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.0, \
     .momentum_decay = 4e-3}

/* torch.optim.RAdam:  t += 1;  g = g + weight_decay * p;  m = b1 m + (1 - b1) g;
 * v = b2 v + (1 - b2) g^2;  rho_inf = 2 / (1 - b2) - 1,
 * rho_t = rho_inf - 2 t b2^t / (1 - b2^t);  with rho_t > 5 (the variance of
 * the adaptive rate tractable) r = sqrt((rho_t - 4) (rho_t - 2) rho_inf /
 * ((rho_inf - 4) (rho_inf - 2) rho_t)) and
 * p -= m / (1 - b1^t) * lr * (sqrt(1 - b2^t) / (sqrt(v) + eps)) * r,
 * else p -= m / (1 - b1^t) * lr (SGD with momentum for the first steps).
 * lr, eps, weight_decay >= 0; betas in [0, 1). */
typedef struct tg_radam_opts {
    double lr;
    double beta1, beta2;
    double eps;
    double weight_decay;
} tg_radam_opts;
#define TG_RADAM_OPTS_INIT                                                    \
    {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.0}

/* torch.optim.Rprop:  g = -g when maximize;  with s = g * prev, each
 * element's step size (starting at lr) is multiplied by eta_plus where
 * s > 0, by eta_minus where s < 0 (and g taken as 0 there), by 1 where
 * s = 0, then clamped to [step_size_min, step_size_max];
 * p -= sign(g) * step size;  prev = g (starting at zeros).  torch's etas
 * are (eta_minus, eta_plus) and step_sizes (step_size_min, step_size_max).
 * lr >= 0; 0 < eta_minus < 1 < eta_plus. */
typedef struct tg_rprop_opts {
    double lr;
    double eta_minus, eta_plus;
    double step_size_min, step_size_max;
    bool maximize;   /* ascend the objective: the gradient's sign flipped */
} tg_rprop_opts;
#define TG_RPROP_OPTS_INIT                                                    \
    {.lr = 1e-2, .eta_minus = 0.5, .eta_plus = 1.2, .step_size_min = 1e-6, \
     .step_size_max = 50.0, .maximize = false}

/* torch.optim.ASGD (averaged SGD):  t += 1;  g = -g when maximize;
 * g = g + weight_decay * p;  p = p * (1 - lambd * eta);  p = p - eta * g;
 * ax = ax + (p - ax) * mu (ax = p while mu is 1);  then
 * eta = lr / (1 + lambd * lr * t)^alpha and mu = 1 / max(1, t - t0), both
 * kept in f32 as torch's state "eta" and "mu" (eta starting at lr, mu at
 * 1).  The average ax is state, not the parameters.  lr finite and >= 0,
 * weight_decay >= 0, as torch checks; lambd, alpha, t0 not NaN. */
typedef struct tg_asgd_opts {
    double lr;
    double lambd;
    double alpha;
    double t0;
    double weight_decay;
    bool maximize;   /* ascend the objective: the gradient's sign flipped */
} tg_asgd_opts;
#define TG_ASGD_OPTS_INIT                                                     \
    {.lr = 1e-2, .lambd = 1e-4, .alpha = 0.75, .t0 = 1e6, .weight_decay = 0.0, \
     .maximize = false}

/* torch.optim.SparseAdam, the lazy Adam of sparse gradients (an Embedding
 * with sparse=true, tapegrad/sparse.h):  t += 1;  g = -g when maximize;
 * g coalesced (each row once, repeats summed);  then at g's rows only:
 * m = m + (1 - b1)(g - m);  v = v + (1 - b2)(g^2 - v);
 * p -= lr sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + eps), the other rows
 * of m, v and p untouched; each step in the parameter's dtype as torch's
 * sparse_adam computes it (f32: f32 roundings at each of its tensor ops).
 * State: step, exp_avg, exp_avg_sq (torch's keys; the step an integer
 * count).  A dense gradient is TG_EUNSUPPORTED at step, as torch's
 * ("SparseAdam does not support dense gradients, please consider Adam
 * instead"); f16/bf16 parameters too.  lr > 0, eps > 0, betas in [0, 1),
 * as torch checks. */
typedef struct tg_sparse_adam_opts {
    double lr;
    double beta1, beta2;   /* torch's betas */
    double eps;
    bool maximize;   /* ascend the objective: the gradient's sign flipped */
} tg_sparse_adam_opts;
#define TG_SPARSE_ADAM_OPTS_INIT                                              \
    {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .maximize = false}

/* torch.optim.LBFGS: each step (tg_optimizer_step_closure; it needs the
 * closure) runs up to max_iter L-BFGS iterations over all the parameters
 * as one flat vector: the direction from the last history_size pairs of
 * (gradient change, step), the step length lr (the first iteration ever:
 * min(1, 1 / sum |g|) * lr), or with strong_wolfe a line search for the
 * strong Wolfe conditions (torch's line_search_fn="strong_wolfe", c1 1e-4,
 * c2 0.9, 25 evaluations at most); it stops early after max_eval closure
 * calls (0: max_iter * 5 / 4, torch's None), when max |g| <= tolerance_grad,
 * or when the step or the loss changes by less than tolerance_change.  One
 * param group (no tg_*_add_param_group).  The arithmetic is in double
 * (torch's in the parameters' dtype): f64 parameters follow torch's to
 * rounding, f32 ones to f32 roundings, which the iterations amplify.  lr
 * finite and >= 0; max_iter, history_size >= 1, max_eval >= 0;
 * tolerances >= 0. */
typedef struct tg_lbfgs_opts {
    double lr;
    int max_iter;
    int max_eval;
    double tolerance_grad;
    double tolerance_change;
    int history_size;
    bool strong_wolfe;
} tg_lbfgs_opts;
#define TG_LBFGS_OPTS_INIT                                                    \
    {.lr = 1.0, .max_iter = 20, .max_eval = 0, .tolerance_grad = 1e-7,        \
     .tolerance_change = 1e-9, .history_size = 100, .strong_wolfe = false}

/* Each makes *out a new optimizer over params[0..n_params) (retained).
 * n_params may be 0 (params then may be NULL): group 0 is empty, as in
 * torch's SGD([{"params": []}]), and its groups still take options and
 * schedulers (ZeroRedundancyOptimizer's local optimizers have such groups).
 * TG_EINVAL for a bad option, NULL/duplicate/non-leaf parameter, or
 * n_params < 0 (< 1 for L-BFGS); TG_EDTYPE for a non-float parameter. */
TG_API int tg_sgd_new(tg_optimizer **out, int n_params, tg_tensor *const *params,
                      const tg_sgd_opts *opts);
TG_API int tg_adam_new(tg_optimizer **out, int n_params, tg_tensor *const *params,
                       const tg_adam_opts *opts);
TG_API int tg_adamw_new(tg_optimizer **out, int n_params, tg_tensor *const *params,
                        const tg_adam_opts *opts);
TG_API int tg_rmsprop_new(tg_optimizer **out, int n_params, tg_tensor *const *params,
                          const tg_rmsprop_opts *opts);
TG_API int tg_adagrad_new(tg_optimizer **out, int n_params, tg_tensor *const *params,
                          const tg_adagrad_opts *opts);
TG_API int tg_adadelta_new(tg_optimizer **out, int n_params, tg_tensor *const *params,
                           const tg_adadelta_opts *opts);
TG_API int tg_adamax_new(tg_optimizer **out, int n_params, tg_tensor *const *params,
                         const tg_adamax_opts *opts);
TG_API int tg_nadam_new(tg_optimizer **out, int n_params, tg_tensor *const *params,
                        const tg_nadam_opts *opts);
TG_API int tg_radam_new(tg_optimizer **out, int n_params, tg_tensor *const *params,
                        const tg_radam_opts *opts);
TG_API int tg_rprop_new(tg_optimizer **out, int n_params, tg_tensor *const *params,
                        const tg_rprop_opts *opts);
TG_API int tg_asgd_new(tg_optimizer **out, int n_params, tg_tensor *const *params,
                       const tg_asgd_opts *opts);
TG_API int tg_lbfgs_new(tg_optimizer **out, int n_params, tg_tensor *const *params,
                        const tg_lbfgs_opts *opts);
/* The same over the parameters of module m (tg_module_parameters: each
 * tensor once, in state-dict order), as torch.optim.Adam(model.parameters()).
 * TG_EINVAL for NULL or a module without parameters. */
TG_API int tg_sgd_from_module(tg_optimizer **out, const tg_module *m,
                              const tg_sgd_opts *opts);
TG_API int tg_adam_from_module(tg_optimizer **out, const tg_module *m,
                               const tg_adam_opts *opts);
TG_API int tg_adamw_from_module(tg_optimizer **out, const tg_module *m,
                                const tg_adam_opts *opts);
TG_API int tg_rmsprop_from_module(tg_optimizer **out, const tg_module *m,
                                  const tg_rmsprop_opts *opts);
TG_API int tg_adagrad_from_module(tg_optimizer **out, const tg_module *m,
                                  const tg_adagrad_opts *opts);
TG_API int tg_adadelta_from_module(tg_optimizer **out, const tg_module *m,
                                   const tg_adadelta_opts *opts);
TG_API int tg_adamax_from_module(tg_optimizer **out, const tg_module *m,
                                 const tg_adamax_opts *opts);
TG_API int tg_nadam_from_module(tg_optimizer **out, const tg_module *m,
                                const tg_nadam_opts *opts);
TG_API int tg_radam_from_module(tg_optimizer **out, const tg_module *m,
                                const tg_radam_opts *opts);
TG_API int tg_rprop_from_module(tg_optimizer **out, const tg_module *m,
                                const tg_rprop_opts *opts);
TG_API int tg_asgd_from_module(tg_optimizer **out, const tg_module *m,
                               const tg_asgd_opts *opts);
TG_API int tg_lbfgs_from_module(tg_optimizer **out, const tg_module *m,
                                const tg_lbfgs_opts *opts);
/* Frees opt and releases its parameters; NULL does nothing. */
TG_API void tg_optimizer_free(tg_optimizer *opt);

/* ---- param groups (torch's optimizer.param_groups) ----
 * The constructor's parameters are group 0, with its options.  Each call
 * adds the next group, params[0..n_params) (retained) with their own
 * options: torch's opt.add_param_group({"params": params, **opts}), or the
 * list of dicts given to torch's constructor.  opts NULL gives the
 * constructor's options (torch's defaults); otherwise opts is complete, so
 * start from the constructor's struct and change what differs, e.g. AdamW
 * without weight decay for biases and norms:
 *   tg_adam_opts o = TG_ADAMW_OPTS_INIT;
 *   tg_adamw_new(&opt, n_weights, weights, &o);
 *   o.weight_decay = 0;
 *   tg_adam_add_param_group(opt, n_others, others, &o);
 * The parameters are numbered on from the existing ones (state keys
 * "prefix.<i>.*", as torch's state_dict numbers them).  Add the groups
 * before making a learning-rate scheduler (it schedules the groups there
 * are).  n_params may be 0: an empty group (torch's {"params": []}).
 * TG_EINVAL for NULL opt, an optimizer of another family (SGD;
 * Adam and AdamW; RMSprop; Adagrad; Adadelta; Adamax; NAdam; RAdam; Rprop;
 * ASGD: each takes its own function; L-BFGS has one group), a parameter already in a group, and the
 * constructors' errors; on error nothing is changed. */
TG_API int tg_sgd_add_param_group(tg_optimizer *opt, int n_params, tg_tensor *const *params,
                                  const tg_sgd_opts *opts);
TG_API int tg_adam_add_param_group(tg_optimizer *opt, int n_params, tg_tensor *const *params,
                                   const tg_adam_opts *opts);
TG_API int tg_rmsprop_add_param_group(tg_optimizer *opt, int n_params,
                                      tg_tensor *const *params, const tg_rmsprop_opts *opts);
TG_API int tg_adagrad_add_param_group(tg_optimizer *opt, int n_params,
                                      tg_tensor *const *params, const tg_adagrad_opts *opts);
TG_API int tg_adadelta_add_param_group(tg_optimizer *opt, int n_params,
                                       tg_tensor *const *params, const tg_adadelta_opts *opts);
TG_API int tg_adamax_add_param_group(tg_optimizer *opt, int n_params,
                                     tg_tensor *const *params, const tg_adamax_opts *opts);
TG_API int tg_nadam_add_param_group(tg_optimizer *opt, int n_params,
                                    tg_tensor *const *params, const tg_nadam_opts *opts);
TG_API int tg_radam_add_param_group(tg_optimizer *opt, int n_params,
                                    tg_tensor *const *params, const tg_radam_opts *opts);
TG_API int tg_rprop_add_param_group(tg_optimizer *opt, int n_params,
                                    tg_tensor *const *params, const tg_rprop_opts *opts);
TG_API int tg_asgd_add_param_group(tg_optimizer *opt, int n_params, tg_tensor *const *params,
                                   const tg_asgd_opts *opts);
/* SparseAdam: its constructors and param groups, as the others' above. */
TG_API int tg_sparse_adam_new(tg_optimizer **out, int n_params, tg_tensor *const *params,
                              const tg_sparse_adam_opts *opts);
TG_API int tg_sparse_adam_from_module(tg_optimizer **out, const tg_module *m,
                                      const tg_sparse_adam_opts *opts);
TG_API int tg_sparse_adam_add_param_group(tg_optimizer *opt, int n_params,
                                          tg_tensor *const *params,
                                          const tg_sparse_adam_opts *opts);
/* The number of param groups (1 for a new optimizer); 0 for NULL. */
TG_API int tg_optimizer_param_group_count(const tg_optimizer *opt);
/* opt.param_groups[group]["lr"].  TG_EINVAL when group is not in
 * [0, count) or lr < 0 or not finite; get gives NaN then. */
TG_API int tg_optimizer_set_group_lr(tg_optimizer *opt, int group, double lr);
TG_API double tg_optimizer_get_group_lr(const tg_optimizer *opt, int group);
/* The momentum of param group `group` that torch's OneCycleLR and CyclicLR
 * cycle: SGD's and RMSprop's param_group["momentum"], the beta1
 * (param_group["betas"][0]) of Adam, AdamW, Adamax, NAdam and RAdam;
 * Adagrad, Adadelta, Rprop, ASGD and L-BFGS have none.  TG_EINVAL when group is not in
 * [0, count), for a value the constructor would refuse (not finite, < 0,
 * beta1 >= 1, SGD momentum 0 with nesterov), for an optimizer without a
 * momentum (torch's "optimizer must support momentum"), and for RMSprop
 * going between 0 and > 0 once a parameter of the group has state (its
 * momentum buffer exists only when momentum > 0 at the first step).  get
 * gives NaN for NULL, a group out of range or an optimizer without one. */
TG_API int tg_optimizer_set_group_momentum(tg_optimizer *opt, int group, double momentum);
TG_API double tg_optimizer_get_group_momentum(const tg_optimizer *opt, int group);

/* opt.param_groups[group][name]: any option of opt's kind by its name in
 * the options struct (torch's param_group key: "lr", "weight_decay",
 * "eps", "momentum", "amsgrad", "history_size", ..., a pair's elements as
 * "beta1", "beta2", "eta_minus", "eta_plus", "step_size_min",
 * "step_size_max"; L-BFGS's strong_wolfe as torch's "line_search_fn"),
 * flags as 0 or 1.  set checks the group's options as the constructor
 * does (lr and the momentum as tg_optimizer_set_group_lr and
 * tg_optimizer_set_group_momentum) and refuses a change of amsgrad,
 * centered or history_size once a parameter of the group has state (they
 * decide what it holds).  TG_EINVAL for NULL arguments, a group out of
 * range, a name opt's kind does not have (naming it) or a refused value;
 * on error nothing is changed. */
TG_API int tg_optimizer_get_group_option(const tg_optimizer *opt, int group, const char *name,
                                         double *value);
TG_API int tg_optimizer_set_group_option(tg_optimizer *opt, int group, const char *name,
                                         double value);

/* dst's param group dst_group takes every hyperparameter of src's group
 * src_group (lr and the options above; not the parameters, nor their
 * state), as ZeroRedundancyOptimizer's _sync_param_groups copies a param
 * group's keys.  src and dst are of one kind (Adam and AdamW are two).
 * TG_EINVAL for NULL optimizers, a group out of range, another kind, and a
 * change of amsgrad, centered or history_size once a parameter of dst's
 * group has state (tg_optimizer_set_group_option's rule); on error nothing
 * is changed. */
TG_API int tg_optimizer_copy_group_options(tg_optimizer *dst, int dst_group,
                                           const tg_optimizer *src, int src_group);

/* One update of every parameter whose .grad is set (others are skipped),
 * with grad mode off; writes the parameters in place and bumps their
 * versions.  TG_ESHAPE when a gradient's shape differs from its parameter's
 * (checked for all before any is updated); TG_EINVAL for L-BFGS, which
 * needs tg_optimizer_step_closure.
 * Sparse gradients (tapegrad/sparse.h), as torch 1.13 takes them:
 * SparseAdam needs them; SGD takes them with weight_decay 0 (torch:
 * "add(sparse, dense) is not supported") and momentum 0 (torch keeps a
 * sparse momentum buffer; tapegrad refuses), p -= lr * each stored row in
 * turn (repeats applied one after another); Adagrad takes them with
 * weight_decay 0 (torch's "weight_decay option is not compatible with
 * sparse gradients"): the gradient coalesced, sum += g^2 and
 * p -= clr * g / (sqrt(sum) + eps) at its rows only.  Every other
 * optimizer refuses them with torch's words ("Adam does not support sparse
 * gradients, please consider SparseAdam instead", ...), and so do
 * f16/bf16 parameters; all TG_EUNSUPPORTED naming the parameter, checked
 * before any parameter is updated. */
TG_API int tg_optimizer_step(tg_optimizer *opt);
/* torch's opt.step(closure): closure(user, &loss) re-evaluates the model
 * (typically: zero the gradients, compute the loss, tg_backward, write the
 * loss's value into *loss) and returns TG_OK or a negative status, which
 * ends the step with that status.  It runs with grad mode on.  For L-BFGS
 * the closure is called as often as its iterations and line search need;
 * for the others once, then the step.  *loss (may be NULL): the first
 * call's loss, torch's return value.  TG_EINVAL for NULL opt or closure.
 * On a closure's error an L-BFGS step leaves the parameters where that
 * evaluation found them. */
typedef int (*tg_closure_fn)(void *user, double *loss);
TG_API int tg_optimizer_step_closure(tg_optimizer *opt, tg_closure_fn closure, void *user,
                                     double *loss);
/* Releases every parameter's gradient (PyTorch's set_to_none=True, its
 * default from torch 2.0); NULL does nothing. */
TG_API void tg_optimizer_zero_grad(tg_optimizer *opt);
/* opt.zero_grad(set_to_none): true is tg_optimizer_zero_grad; false (torch
 * 1.13's default) sets every gradient to zeros, so a later backward adds
 * into zeros and a step moves a parameter no backward reached by its
 * momentum alone.  A .grad that is its parameter's own (the tensor a
 * backward adds into in place, tapegrad/tensor.h's tg_tensor_grad) is
 * zeroed in place and its version bumped; a shared one (retained by the
 * caller, viewed, saved by an op, or recorded with create_graph) is left
 * as it was and the parameter gets a new zero tensor, where PyTorch zeroes
 * the shared tensor.  Parameters without a gradient keep none.  TG_EINVAL
 * for NULL opt; TG_ENOMEM with nothing changed. */
TG_API int tg_optimizer_zero_grad_ex(tg_optimizer *opt, bool set_to_none);
/* Learning rate for the next steps, of every param group (as `for g in
 * opt.param_groups: g["lr"] = lr`); TG_EINVAL when lr < 0 or not finite.
 * get gives group 0's (NaN for NULL). */
TG_API int tg_optimizer_set_lr(tg_optimizer *opt, double lr);
TG_API double tg_optimizer_get_lr(const tg_optimizer *opt);
/* Number of tg_optimizer_step calls so far (restored by state_load). */
TG_API int64_t tg_optimizer_steps(const tg_optimizer *opt);

/* Adds the optimizer's state to f under prefix (copies, so f may outlive
 * opt), as torch's optimizer.state_dict() holds it:
 *   "prefix.step"     0-d i64, the number of steps;
 *   the hyperparameters under torch's param_group keys: "prefix.lr", and
 *   for SGD "prefix.momentum", ".dampening", ".weight_decay", ".nesterov",
 *   ".maximize"; for Adam/AdamW "prefix.betas" (two f64), ".eps",
 *   ".weight_decay", ".amsgrad", ".maximize"; for RMSprop "prefix.alpha",
 *   ".eps", ".weight_decay", ".momentum", ".centered", ".maximize"; for
 *   Adagrad "prefix.lr_decay", ".eps", ".weight_decay",
 *   ".initial_accumulator_value", ".maximize"; for Adadelta "prefix.rho",
 *   ".eps", ".weight_decay", ".maximize"; for Rprop "prefix.etas" and
 *   "prefix.step_sizes" (two f64 each), ".maximize"; for ASGD "prefix.lambd",
 *   ".alpha", ".t0", ".weight_decay", ".maximize"; for Adamax "prefix.betas",
 *   ".eps", ".weight_decay", ".maximize"; for NAdam "prefix.betas", ".eps",
 *   ".weight_decay", ".momentum_decay"; for RAdam "prefix.betas", ".eps",
 *   ".weight_decay" (reals f64, flags i64 0 or 1);
 *   "prefix.initial_lr" once a learning-rate scheduler is attached.  Each
 *   holds one value per param group: 0-d (betas: shape (2)) for one group;
 *   for G > 1 groups shape (G) (betas: (G, 2)), with "prefix.param_groups"
 *   (i64, (G)) the number of parameters in each group;
 *   per parameter i (numbered across the groups) that has state:
 *   "prefix.<i>.step" (0-d i64, all but SGD), "prefix.<i>.exp_avg",
 *   "prefix.<i>.exp_avg_sq" and with amsgrad "prefix.<i>.max_exp_avg_sq"
 *   (Adam/AdamW), or "prefix.<i>.momentum_buffer" (SGD with momentum), or
 *   "prefix.<i>.square_avg", with momentum > 0 "prefix.<i>.momentum_buffer"
 *   and centered "prefix.<i>.grad_avg" (RMSprop), or "prefix.<i>.sum"
 *   (Adagrad), or "prefix.<i>.exp_avg" and "prefix.<i>.exp_inf" (Adamax), or
 *   "prefix.<i>.mu_product" (0-d f32), "prefix.<i>.exp_avg" and
 *   "prefix.<i>.exp_avg_sq" (NAdam), or "prefix.<i>.exp_avg" and
 *   "prefix.<i>.exp_avg_sq" (RAdam), or "prefix.<i>.square_avg" and
 *   "prefix.<i>.acc_delta" (Adadelta), or "prefix.<i>.prev" and
 *   "prefix.<i>.step_size" (Rprop), or "prefix.<i>.eta", "prefix.<i>.mu" (0-d
 *   f32) and "prefix.<i>.ax" (ASGD); for L-BFGS the hyperparameters
 *   "prefix.max_iter", ".max_eval", ".tolerance_grad", ".tolerance_change",
 *   ".history_size" (f64) and ".line_search_fn" (i64 1: strong_wolfe), and
 *   its state, torch's state of the first parameter: "prefix.0.func_evals",
 *   "prefix.0.n_iter" (0-d i64) and, after an iteration, "prefix.0.d",
 *   "prefix.0.prev_flat_grad" (f64, the parameters' total size),
 *   "prefix.0.old_dirs", "prefix.0.old_stps" (f64, (k, size), k pairs),
 *   "prefix.0.ro" (f64, (k)), "prefix.0.t", "prefix.0.H_diag",
 *   "prefix.0.prev_loss" (0-d f64; torch's scratch "al" is not kept);
 *   the metadata "prefix.kind" = "sgd" | "adam" | "adamw" | "rmsprop" |
 *   "adagrad" | "adadelta" | "adamax" | "nadam" | "radam" | "rprop" | "asgd" |
 *   "lbfgs". */
TG_API int tg_optimizer_state_save(const tg_optimizer *opt, tg_st_file *f, const char *prefix);
/* Restores what state_save wrote, exactly, hyperparameters included (as
 * torch's load_state_dict restores param_groups): an optimizer made with
 * other options continues as the saved one would.  The file's param groups
 * must be opt's (as many, of the same sizes).  A hyperparameter the file
 * lacks (a file written before they were saved) keeps opt's values.
 * TG_ENOTFOUND for a missing key (the step, lr, or part of a parameter's
 * state, such as max_exp_avg_sq under amsgrad or grad_avg when centered),
 * TG_ESHAPE for a state tensor whose shape is not its parameter's or a
 * hyperparameter that is not one value per group, TG_EINVAL for a value the
 * constructor would refuse (beta1 = 2, alpha = -1, a flag other than 0 or 1,
 * nesterov without momentum), other param groups, another kind of optimizer
 * or an entry for a parameter it does not have: each message names the key.
 * On error the optimizer is unchanged. */
TG_API int tg_optimizer_state_load(tg_optimizer *opt, const tg_st_file *f, const char *prefix);

/* ---- weight averaging (torch.optim.swa_utils.AveragedModel) ----
 * An averaged model is a module (type name "AveragedModel") holding a deep
 * copy of a model (tg_module_copy) as child "module" and the number of
 * updates so far as buffer "n_averaged" (0-d i64), so its state dict has
 * torch's keys, "n_averaged" and "module.<name>", and loads into and from
 * torch's AveragedModel; a checkpoint keeps it as any module
 * (tg_checkpoint_add_module).  Its forward is the copy's (any number of
 * inputs).  The copy's parameters do not require grad (torch's keep the
 * flag; its users run the averaged model under no_grad): give the model's
 * parameters, not these, to the optimizer.  Keeping an EMA of a GAN's
 * generator:
 *   tg_module *ema;
 *   tg_averaged_model_new(&ema, gen, 0.999, true);
 *   for (...) { ... tg_optimizer_step(opt_g); tg_averaged_model_update(ema, gen); }
 *   tg_module_train(ema, false);
 *   tg_module_forward(ema, &samples, noise);
 */

/* *out: a new averaged model of model (borrowed; deep-copied, with n_averaged
 * 0).  decay in [0, 1): the exponential moving average torch users build with
 * avg_fn = lambda a, p, n: decay * a + (1 - decay) * p; decay < 0: torch's
 * default, the equal average of every model given to update.  use_buffers:
 * torch's option, which averages the buffers (BatchNorm's running statistics
 * and num_batches_tracked) as the parameters; without it (torch's default)
 * the copy's buffers keep the values they had when it was made, or were
 * loaded.  TG_EINVAL for decay >= 1, NaN or infinite; TG_EUNSUPPORTED for a
 * model tg_module_copy cannot copy. */
TG_API int tg_averaged_model_new(tg_module **out, const tg_module *model, double decay,
                                 bool use_buffers);
/* update_parameters(model): with n = n_averaged, each parameter a of the copy
 * (each parameter and buffer with use_buffers, each tensor once) becomes the
 * model's p when n is 0, else a + (p - a) / (n + 1) (equal average) or
 * decay * a + (1 - decay) * p (EMA), computed as torch does in the tensor's
 * dtype (f32 for integer buffers, truncated back); then n_averaged += 1.
 * model must have avg's structure: the same state dict names, shapes and
 * dtypes in the same order, and the same tied weights.  TG_EINVAL when avg is
 * not an averaged model, its n_averaged is negative or the largest int64, or
 * the structures differ; TG_ESHAPE / TG_EDTYPE naming the tensor whose shape
 * or dtype differs.  On error nothing is changed. */
TG_API int tg_averaged_model_update(tg_module *avg, const tg_module *model);
/* What avg was made with (decay -1 for the equal average).  Out-pointers may
 * be NULL; TG_EINVAL naming the module's type for another module. */
TG_API int tg_averaged_model_params(const tg_module *avg, double *decay, bool *use_buffers);

/* torch.optim.swa_utils.update_bn(loader, model): recomputes the running
 * statistics of every BatchNorm of model (each once, however often it
 * appears) from a pass over data, as an averaged model needs after its
 * parameters were averaged.  Each BatchNorm with running statistics gets
 * running_mean 0, running_var 1, num_batches_tracked 0 and momentum None
 * (the cumulative average); model is put in training mode and run on every
 * batch under no_grad (the numbers are torch's, which records a graph it
 * drops); then the momenta are put back and the whole model is set to the
 * mode model itself was in (torch's model.train(was_training)).  A model
 * without such a BatchNorm returns TG_OK without reading any batch.
 * BatchNorms without running statistics are left alone (torch fails on
 * them); a SyncBatchNorm is refused (TG_EUNSUPPORTED).
 *
 * next(user, &x) gives the batches: it returns 1 with *x a new tensor (the
 * input, owned by update_bn from then on), 0 when there are no more, or a
 * negative status, which update_bn returns.  For a GAN's generator it can
 * draw noise.  TG_EINVAL for a NULL model or next, or a batch of 1 with a
 * NULL *x.  On any error (from next, a forward or memory) the statistics,
 * momenta and modes are restored: nothing is changed. */
typedef int (*tg_update_bn_fn)(void *user, tg_tensor **x);
TG_API int tg_update_bn(tg_module *model, tg_update_bn_fn next, void *user);
/* update_bn over one epoch of ld: its current epoch from the first batch,
 * the images of each (the labels are dropped, as torch's input[0]).
 * Afterwards ld is back at the position it had, so a training loop's loader
 * goes on as before. */
TG_API int tg_update_bn_loader(tg_module *model, tg_loader *ld);

/* ---- gradient clipping (torch.nn.utils), between backward and step ---- */

/* clip_grad_norm_: the norm of order norm_type (2.0 for the Euclidean norm,
 * INFINITY for the largest magnitude) of all the .grad of params[0..n) taken
 * together, into *total_norm (may be NULL; 0 when none has a gradient); then
 * every gradient is multiplied in place by min(max_norm / (total + 1e-6), 1).
 * As PyTorch: each gradient's norm in its dtype, the total and the factor
 * in the dtypes' promotion, a NaN total makes every gradient NaN, unless
 * error_if_nonfinite, which refuses a NaN or infinite total (TG_EINVAL) before
 * any gradient changes.  Parameters without a gradient are skipped.  Under a
 * tg_grad_scaler, call tg_grad_scaler_unscale first.  TG_EINVAL for a NULL or
 * repeated parameter, max_norm < 0 or NaN, norm_type <= 0 or NaN; TG_EDTYPE
 * for an integer gradient: all checked before any gradient changes.  Fails
 * afterwards only for want of memory (half or strided gradients), when the
 * gradients before the failing one are scaled already. */
TG_API int tg_clip_grad_norm(double *total_norm, int n, tg_tensor *const *params,
                             double max_norm, double norm_type, bool error_if_nonfinite);
/* clip_grad_value_: clamps every element of each .grad of params[0..n) to
 * [-clip_value, clip_value] in place (NaN stays NaN).  TG_EINVAL for
 * clip_value < 0 or NaN, or a NULL or repeated parameter; TG_EDTYPE for an
 * integer gradient. */
TG_API int tg_clip_grad_value(int n, tg_tensor *const *params, double clip_value);

#ifdef __cplusplus
}
#endif
#endif
