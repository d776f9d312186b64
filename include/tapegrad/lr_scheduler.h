/* tapegrad/lr_scheduler.h - learning-rate schedulers with PyTorch 1.13's
 * torch.optim.lr_scheduler semantics.
 *
 *   tg_lr_scheduler *warmup, *cosine, *sched;
 *   tg_linear_lr_new(&warmup, opt, 0.1, 1.0, 5);          // LinearLR(opt, 0.1, 1.0, 5)
 *   tg_cosine_annealing_lr_new(&cosine, opt, 95, 0.0);     // CosineAnnealingLR(opt, 95)
 *   tg_sequential_lr_new(&sched, opt, 2, (tg_lr_scheduler *[]){warmup, cosine},
 *                        (int64_t[]){5});                  // SequentialLR(..., [5])
 *   for (int epoch = 0; epoch < 100; epoch++) {
 *       ... tg_optimizer_step(opt) for each batch ...
 *       tg_lr_scheduler_step(sched);
 *   }
 *   tg_lr_scheduler_free(sched);   // the SequentialLR first: it borrows the others
 *   tg_lr_scheduler_free(cosine);
 *   tg_lr_scheduler_free(warmup);
 *
 * A scheduler is an opaque object owned by its creator (tg_lr_scheduler_free).
 * It borrows its optimizer, which must outlive it, and sets the learning
 * rate of each of the optimizer's param groups, from that group's own lr
 * and base lr, when it is made and at every step (tg_optimizer_get_group_lr
 * reads them).  Its base lrs are those of the groups the optimizer has when
 * it is made.  A group added later (tg_adam_add_param_group) is stepped as
 * torch steps it: the chainable formulas take it from its own lr (StepLR
 * multiplies it by gamma too), and those torch zips over base_lrs (or a
 * function per group) leave its lr alone: LambdaLR, MultiplicativeLR,
 * CosineAnnealingWarmRestarts, CosineAnnealingLR's step at an odd multiple
 * of T_max plus one, and the closed form a SequentialLR restarts a
 * scheduler with.
 * Constructors take torch's arguments in torch's order; its defaults are
 * given with each.
 *
 * As in torch:
 * - The first scheduler made on an optimizer records each group's lr as its
 *   initial lr (torch's param_group['initial_lr']).  Every scheduler on that
 *   optimizer takes the initial lrs as its base_lrs, also one made after
 *   another scheduler has changed the lrs.
 * - A constructor takes one step: last_epoch goes from -1 to 0 and the lr is
 *   set to its epoch-0 value (for LinearLR, lr * start_factor).
 * - The formulas are torch's chainable ones: except for LambdaLR and
 *   CosineAnnealingWarmRestarts, each step starts from the optimizer's
 *   current lr, so a tg_optimizer_set_lr between steps carries into the
 *   following ones.
 * Where torch's rounding would give a negative lr (LinearLR towards
 * end_factor 0 ends near -1e-18) the lr is 0: an optimizer's lr is >= 0.
 *
 * Functions return TG_OK or a negative tg_status with a message naming the
 * argument and the rule; on error nothing is changed.
 */
#ifndef TAPEGRAD_LR_SCHEDULER_H
#define TAPEGRAD_LR_SCHEDULER_H

#include <stdint.h>

#include "tapegrad/export.h"
#include "tapegrad/optim.h"
#include "tapegrad/safetensors.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tg_lr_scheduler tg_lr_scheduler;

/* LambdaLR's factor at an epoch; user is the pointer given to
 * tg_lambda_lr_new (borrowed, passed through untouched). */
typedef double (*tg_lr_lambda_fn)(int64_t epoch, void *user);

/* Each makes *out a new scheduler attached to opt (borrowed) and takes the
 * initial step.  TG_EINVAL for a NULL out or opt and for the arguments
 * below.  gamma and eta_min must be finite and >= 0 (torch does not check
 * them; a negative one would make a negative lr). */

/* StepLR(step_size, gamma=0.1): lr * gamma every step_size epochs.
 * step_size >= 1. */
TG_API int tg_step_lr_new(tg_lr_scheduler **out, tg_optimizer *opt, int64_t step_size,
                          double gamma);
/* MultiStepLR(milestones, gamma=0.1): lr * gamma^c at an epoch that occurs
 * c times in milestones[0..n_milestones) (copied).  As torch (a Counter),
 * the milestones need not be sorted and a repeated one counts each time;
 * milestone 0 applies at the constructor's step.  n_milestones >= 0;
 * milestones may be NULL when it is 0. */
TG_API int tg_multi_step_lr_new(tg_lr_scheduler **out, tg_optimizer *opt, int n_milestones,
                                const int64_t *milestones, double gamma);
/* ExponentialLR(gamma): lr * gamma every epoch. */
TG_API int tg_exponential_lr_new(tg_lr_scheduler **out, tg_optimizer *opt, double gamma);
/* CosineAnnealingLR(T_max, eta_min=0): from base_lr down to eta_min over
 * t_max epochs along half a cosine; past t_max the recursion keeps going,
 * so the lr rises back to base_lr at 2 t_max, and so on.  t_max >= 1. */
TG_API int tg_cosine_annealing_lr_new(tg_lr_scheduler **out, tg_optimizer *opt, int64_t t_max,
                                      double eta_min);
/* LinearLR(start_factor=1/3, end_factor=1.0, total_iters=5): the factor
 * goes linearly from start_factor at epoch 0 to end_factor at total_iters,
 * then stays.  start_factor in (0, 1], end_factor in [0, 1],
 * total_iters >= 1 (torch 1.13 accepts start_factor 0 and then divides by
 * zero at the first step). */
TG_API int tg_linear_lr_new(tg_lr_scheduler **out, tg_optimizer *opt, double start_factor,
                            double end_factor, int64_t total_iters);
/* LambdaLR(lr_lambda): lr = base_lr * fn(epoch, user), not chained.  fn must
 * not be NULL; a factor that makes the lr negative or not finite fails the
 * step (or the constructor) with TG_EINVAL. */
TG_API int tg_lambda_lr_new(tg_lr_scheduler **out, tg_optimizer *opt, tg_lr_lambda_fn fn,
                            void *user);
/* LambdaLR(lr_lambda=[f0, f1, ...]): one function per param group, group
 * g's lr = base_lr[g] * fns[g](epoch, users[g]).  n_fns must equal the
 * optimizer's group count (torch's "Expected 2 lr_lambdas, but got 1");
 * fns (copied) holds no NULL; users (copied, the pointers borrowed) may be
 * NULL for a NULL user everywhere.  Its state is a LambdaLR's
 * ("lambda_lr"). */
TG_API int tg_lambda_lr_new_per_group(tg_lr_scheduler **out, tg_optimizer *opt, int n_fns,
                                      const tg_lr_lambda_fn *fns, void *const *users);
/* SequentialLR(schedulers, milestones): schedulers[0] runs until epoch
 * milestones[0], then schedulers[1] until milestones[1], and so on; at a
 * milestone the next scheduler restarts at epoch 0 with its closed form
 * (torch's step(0): CosineAnnealingLR starts from base_lr, LinearLR from
 * base_lr * start_factor).  Making it resets the lr to the initial lr, moves
 * every scheduler's last_epoch back by one and repeats the first one's
 * initial step, as torch does.  n_schedulers >= 1 with n_schedulers - 1
 * milestones (copied; as in torch, not checked to increase: the scheduler of
 * an epoch is found with Python's bisect_right on them as given).  The
 * schedulers are borrowed: they must be attached to opt, must outlive the
 * SequentialLR, must not be SequentialLRs themselves, and are stepped
 * through it from then on. */
TG_API int tg_sequential_lr_new(tg_lr_scheduler **out, tg_optimizer *opt, int n_schedulers,
                                tg_lr_scheduler *const *schedulers, const int64_t *milestones);
/* ConstantLR(factor=1/3, total_iters=5): lr * factor from epoch 0, and
 * lr / factor again at total_iters (torch's lr * (1 / factor)).  factor in
 * (0, 1], total_iters >= 0 (torch accepts factor 0 and then divides by
 * zero at total_iters). */
TG_API int tg_constant_lr_new(tg_lr_scheduler **out, tg_optimizer *opt, double factor,
                              int64_t total_iters);
/* MultiplicativeLR(lr_lambda): lr * fn(epoch, user) at each epoch > 0,
 * chained (LambdaLR's is from base_lr).  fn must not be NULL; a factor that
 * makes the lr negative or not finite fails the step with TG_EINVAL.  As
 * torch, it has no closed form: a SequentialLR restarts it at its lr. */
TG_API int tg_multiplicative_lr_new(tg_lr_scheduler **out, tg_optimizer *opt,
                                    tg_lr_lambda_fn fn, void *user);
/* MultiplicativeLR(lr_lambda=[f0, f1, ...]): one function per param group,
 * with tg_lambda_lr_new_per_group's rules for n_fns, fns and users.  Its
 * state is a MultiplicativeLR's ("multiplicative_lr"). */
TG_API int tg_multiplicative_lr_new_per_group(tg_lr_scheduler **out, tg_optimizer *opt,
                                              int n_fns, const tg_lr_lambda_fn *fns,
                                              void *const *users);
/* PolynomialLR(total_iters=5, power=1.0): base_lr (1 - e / total_iters)^power
 * up to total_iters, where it is 0, then stays.  total_iters >= 1, power
 * finite and >= 0 (torch checks neither: 0 divides by zero, a negative
 * power raises 0 to it). */
TG_API int tg_polynomial_lr_new(tg_lr_scheduler **out, tg_optimizer *opt, int64_t total_iters,
                                double power);
/* CosineAnnealingWarmRestarts(T_0, T_mult=1, eta_min=0): eta_min +
 * (base_lr - eta_min) (1 + cos(pi T_cur / T_i)) / 2, T_cur counting the
 * epochs since the last restart; a restart comes when T_cur reaches T_i,
 * which starts at t_0 and is multiplied by t_mult at each restart.  Not
 * chainable: each lr is from base_lr (a group added later keeps its lr).
 * t_0 in [1, 2^53], t_mult >= 1; a step whose T_i would pass 2^53 fails. */
TG_API int tg_cosine_annealing_warm_restarts_new(tg_lr_scheduler **out, tg_optimizer *opt,
                                                 int64_t t_0, int64_t t_mult, double eta_min);
/* torch's CosineAnnealingWarmRestarts.step(epoch): T_cur and T_i computed
 * from epoch, which may be fractional (epoch + batch / batches), last_epoch
 * = floor(epoch), and each group's lr set; a tg_lr_scheduler_step after it
 * goes on from there.  TG_EINVAL for NULL or another kind of s, for epoch
 * not in [0, 2^53] (NaN included) and for T_i beyond 2^53; TG_ENOMEM. */
TG_API int tg_cosine_annealing_warm_restarts_step_to(tg_lr_scheduler *s, double epoch);
/* ChainedScheduler(schedulers): each step steps schedulers[0], then [1], ...,
 * each from the lr the one before set.  Making it takes no step; its
 * get_last_lr is each group's lr, its last_epoch counts its steps from 0
 * and its base lrs are the optimizer's initial lrs.  n_schedulers >= 1;
 * the schedulers (copied array, borrowed schedulers) must be attached to
 * one optimizer, must outlive the ChainedScheduler, must each be listed
 * once and must not be SequentialLRs or ChainedSchedulers (torch allows
 * both).  A step checks every scheduler's lrs before it changes any.  It
 * cannot be one of a SequentialLR's schedulers (in torch it has no
 * last_epoch to move back). */
TG_API int tg_chained_scheduler_new(tg_lr_scheduler **out, int n_schedulers,
                                    tg_lr_scheduler *const *schedulers);
/* Frees s (not its optimizer, nor a SequentialLR's or ChainedScheduler's
 * schedulers); NULL does nothing. */
TG_API void tg_lr_scheduler_free(tg_lr_scheduler *s);

/* One epoch: last_epoch += 1 and each param group's lr set to its next
 * value (see the top for a group added since s was made).  TG_EINVAL for
 * NULL or when a value is not finite (an ExponentialLR that overflowed, a
 * LambdaLR or MultiplicativeLR whose fn gives NaN or a negative factor, a
 * warm restart whose T_i would pass 2^53); TG_ENOMEM. */
TG_API int tg_lr_scheduler_step(tg_lr_scheduler *s);
/* The lr the last step (or the constructor) set: torch's get_last_lr()[0].
 * NaN for NULL. */
TG_API double tg_lr_scheduler_get_last_lr(const tg_lr_scheduler *s);
/* torch's get_last_lr()[group] and base_lrs[group]; NaN for NULL or a group
 * that has none: get_last_lr covers the groups of the last step (a group
 * added since counts from the next step), base_lrs those of the
 * optimizer when s was made. */
TG_API double tg_lr_scheduler_get_group_last_lr(const tg_lr_scheduler *s, int group);
TG_API double tg_lr_scheduler_group_base_lr(const tg_lr_scheduler *s, int group);
/* torch's last_epoch: 0 after the constructor, + 1 per step (a
 * SequentialLR's later schedulers are at -1 until their milestone).
 * INT64_MIN for NULL. */
TG_API int64_t tg_lr_scheduler_last_epoch(const tg_lr_scheduler *s);
/* torch's base_lrs[0]: the optimizer's initial lr.  NaN for NULL. */
TG_API double tg_lr_scheduler_base_lr(const tg_lr_scheduler *s);

/* Adds s's state to f under prefix: "prefix.last_epoch" (0-d i64),
 * "prefix.base_lr" and "prefix.last_lr" (f64, torch's base_lrs and
 * _last_lr: one value per param group with a base lr, and per group at the
 * last step; 0-d for one group, else 1-d) and the metadata
 * "prefix.kind" = "step_lr" | "multi_step_lr" | "exponential_lr" |
 * "cosine_annealing_lr" | "linear_lr" | "lambda_lr" | "sequential_lr" |
 * "constant_lr" | "multiplicative_lr" | "polynomial_lr" |
 * "cosine_annealing_warm_restarts" | "chained_scheduler"; warm restarts
 * add "prefix.T_cur" (f64) and "prefix.T_i" (i64); a SequentialLR or
 * ChainedScheduler adds each scheduler i's state under "prefix.<i>".  The
 * options (gamma, milestones, fn, ...) are not saved: they come from the
 * constructor, and the optimizer's lr from the optimizer's own state. */
TG_API int tg_lr_scheduler_state_save(const tg_lr_scheduler *s, tg_st_file *f,
                                      const char *prefix);
/* Restores what state_save wrote (not the optimizer's lr: load that with
 * tg_optimizer_state_load, or put both in one checkpoint).  TG_ENOTFOUND for
 * a missing key, TG_ESHAPE for base lrs that are not one per group s has a
 * base lr for, or last lrs fewer than those or more than the optimizer's
 * groups,
 * TG_EINVAL for another kind of scheduler, a value out of
 * range (last_epoch an integer within +-2^53, lrs finite and >= 0, T_cur
 * within +-2^53, T_i an integer in [1, 2^53]) or a SequentialLR or
 * ChainedScheduler entry for a scheduler it does not have; on error s (and
 * its schedulers) are unchanged. */
TG_API int tg_lr_scheduler_state_load(tg_lr_scheduler *s, const tg_st_file *f,
                                      const char *prefix);

#ifdef __cplusplus
}
#endif
#endif
