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

#include <stdbool.h>
#include <stddef.h>
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
 * each from the lr the one before set; a scheduler listed twice steps
 * twice, and a ChainedScheduler among them steps its own schedulers (and
 * counts a step of its own).  Making it takes no step; its get_last_lr is
 * each group's lr, its last_epoch counts its steps from 0 and its base lrs
 * are the optimizer's initial lrs.  n_schedulers >= 1; the schedulers
 * (copied array, borrowed schedulers: a repeat is still freed once, by its
 * creator) must be attached to one optimizer, must outlive the
 * ChainedScheduler, and must not be ReduceLROnPlateaus (stepped with a
 * metric) or, counted through nested chains and SequentialLRs, two
 * different OneCycleLRs (as in a SequentialLR) or more than 4096 entries
 * (each repeat counted).  A SequentialLR among them steps as its own
 * step() (torch's ChainedScheduler calls it).  A chain is made of
 * schedulers that exist already, so it cannot contain itself.  A step that fails in one of
 * them puts every scheduler it reaches and the optimizer's lrs and momenta
 * back: it changes nothing.  It cannot be one of a SequentialLR's
 * schedulers (in torch it has no last_epoch to move back). */
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

/* ---- cyclic and metric-driven schedulers ----
 * torch's OneCycleLR, CyclicLR, ReduceLROnPlateau and
 * torch.optim.swa_utils.SWALR.  Their values are torch's closed formulas
 * (SWALR's is chained on each group's lr), given per param group: an
 * argument given as (n, values) takes n = 1 (the same value for every
 * group) or n = the optimizer's group count (one each, copied), as torch's
 * float-or-list.  The cycled momentum is tg_optimizer_get_group_momentum's:
 * SGD's and RMSprop's momentum, the beta1 of Adam, AdamW, Adamax, NAdam
 * and RAdam (OneCycleLR; CyclicLR cycles momentum, SGD's and RMSprop's
 * only, as torch's); Adagrad, Adadelta and Rprop have none.  Their state
 * (tg_lr_scheduler_state_save) is the common one plus the keys given with
 * each; kinds "one_cycle_lr", "cyclic_lr", "reduce_lr_on_plateau" and
 * "swa_lr".  A param group added after one of them was made fails its step
 * (ReduceLROnPlateau's when it reduces: torch has no max_lr, swa_lr or
 * min_lr for it), except that CyclicLR leaves its lr and momentum alone
 * (torch zips over base_lrs). */

/* How OneCycleLR and SWALR go from one value to another: half a cosine
 * (torch's 'cos') or a line ('linear'). */
typedef enum tg_anneal_strategy { TG_ANNEAL_COS = 0, TG_ANNEAL_LINEAR } tg_anneal_strategy;

/* OneCycleLR's options after max_lr, with torch's defaults. */
typedef struct tg_one_cycle_opts {
    int64_t total_steps;       /* 0: epochs * steps_per_epoch (torch's None) */
    int64_t epochs, steps_per_epoch;
    double pct_start;
    tg_anneal_strategy anneal_strategy;
    bool cycle_momentum;
    double base_momentum, max_momentum;
    double div_factor, final_div_factor;
    bool three_phase;
    /* torch's base_momentum and max_momentum given as lists: NULL (the
     * default) for base_momentum or max_momentum in every group, else
     * n_... values (copied), 1 or the group count */
    int n_base_momentums, n_max_momentums;
    const double *base_momentums, *max_momentums;
} tg_one_cycle_opts;
#define TG_ONE_CYCLE_OPTS_INIT                                                                \
    {.total_steps = 0, .epochs = 0, .steps_per_epoch = 0, .pct_start = 0.3,                   \
     .anneal_strategy = TG_ANNEAL_COS, .cycle_momentum = true, .base_momentum = 0.85,         \
     .max_momentum = 0.95, .div_factor = 25.0, .final_div_factor = 1e4, .three_phase = false, \
     .n_base_momentums = 0, .n_max_momentums = 0, .base_momentums = NULL,                     \
     .max_momentums = NULL}

/* OneCycleLR(max_lr, ...): one cycle of total_steps steps, each group's lr
 * from initial = max_lr / div_factor up to max_lr over the first pct_start
 * of the steps, then down to min = initial / final_div_factor (three_phase:
 * up, back down to initial over as many steps, then down to min), each
 * phase annealed by cos or linear; with cycle_momentum the momentum goes
 * the other way, max_momentum -> base_momentum -> max_momentum.  It sets
 * each group's initial lr (torch's param_group['initial_lr'], base_lrs)
 * to its initial, also over another scheduler's.  A step past total_steps
 * (last_epoch > total_steps) fails with TG_EINVAL (torch's "Tried to step
 * X times"), changing nothing.  The last step, at total_steps, extrapolates
 * past min; where that gives an lr < 0 (linear) it is 0, and a beta1 >= 1
 * is the double below 1.  opts NULL means TG_ONE_CYCLE_OPTS_INIT.
 * TG_EINVAL unless: n_max_lr is 1 or the group count, max_lr[i] finite and
 * >= 0; total_steps >= 1, or total_steps 0 with epochs and steps_per_epoch
 * >= 1 (their product at most 2^53); pct_start in [0, 1]; div_factor and
 * final_div_factor finite and > 0; with cycle_momentum the momenta finite
 * and >= 0 (base_momentums and max_momentums, when not NULL, with
 * n_base_momentums and n_max_momentums 1 or the group count); a valid
 * anneal_strategy; and no phase of zero length that a step would reach
 * (torch divides by zero there: pct_start * total_steps = 1, for one).
 * Each group's max_lr, initial and min are its own (torch keeps them in the
 * param group, where another OneCycleLR on the optimizer overwrites them;
 * a SequentialLR refuses two OneCycleLRs for that reason). */
TG_API int tg_one_cycle_lr_new(tg_lr_scheduler **out, tg_optimizer *opt, int n_max_lr,
                               const double *max_lr, const tg_one_cycle_opts *opts);

/* CyclicLR's mode: the amplitude constant (triangular), halved every cycle
 * (triangular2) or times gamma^step (exp_range). */
typedef enum tg_cyclic_mode {
    TG_CYCLIC_TRIANGULAR = 0,
    TG_CYCLIC_TRIANGULAR2,
    TG_CYCLIC_EXP_RANGE
} tg_cyclic_mode;

/* What CyclicLR's custom scale function is given: the cycle, 1 in the
 * first (torch's scale_mode='cycle'), or the step, last_epoch
 * ('iterations'). */
typedef enum tg_cyclic_scale_mode {
    TG_CYCLIC_SCALE_CYCLE = 0,
    TG_CYCLIC_SCALE_ITERATIONS
} tg_cyclic_scale_mode;

/* CyclicLR's custom scale function (torch's scale_fn): the factor of the
 * amplitude at x, the cycle or the step (an integer, given as a double);
 * user is tg_cyclic_opts.scale_user (borrowed, passed through untouched).
 * It may be called more than once for one step and must give the same
 * value each time. */
typedef double (*tg_cyclic_scale_fn)(double x, void *user);

/* CyclicLR's options after base_lr and max_lr, with torch's defaults. */
typedef struct tg_cyclic_opts {
    /* step_size_down 0 means torch's None (= step_size_up) unless
     * step_size_down_set is true: then it is taken as given, 0 included
     * (torch's step_size_down=0: up over step_size_up steps, then straight
     * back to base_lr) */
    int64_t step_size_up, step_size_down;
    tg_cyclic_mode mode;
    double gamma;
    bool cycle_momentum;
    double base_momentum, max_momentum;
    bool step_size_down_set;
    /* torch's scale_fn and scale_mode: NULL (the default) for mode's own
     * scale; otherwise mode is ignored, as in torch */
    tg_cyclic_scale_fn scale_fn;
    void *scale_user;
    tg_cyclic_scale_mode scale_mode;
    /* base_momentum and max_momentum as lists, as tg_one_cycle_opts' */
    int n_base_momentums, n_max_momentums;
    const double *base_momentums, *max_momentums;
} tg_cyclic_opts;
#define TG_CYCLIC_OPTS_INIT                                                                   \
    {.step_size_up = 2000, .step_size_down = 0, .mode = TG_CYCLIC_TRIANGULAR, .gamma = 1.0,   \
     .cycle_momentum = true, .base_momentum = 0.8, .max_momentum = 0.9,                       \
     .step_size_down_set = false, .scale_fn = NULL, .scale_user = NULL,                       \
     .scale_mode = TG_CYCLIC_SCALE_CYCLE, .n_base_momentums = 0, .n_max_momentums = 0,        \
     .base_momentums = NULL, .max_momentums = NULL}

/* CyclicLR(base_lr, max_lr, ...): each group's lr goes from base_lr up to
 * max_lr over step_size_up steps and back over step_size_down, the
 * amplitude scaled by mode (or by scale_fn of the cycle or the step); with
 * cycle_momentum the momentum goes from max_momentum down to base_momentum
 * and back, scaled the same way.  It sets each group's lr to base_lr
 * first, as torch; its base lrs are base_lr (the initial lr stays the
 * first scheduler's).  base_lr and max_lr are each (n, values) with n 1 or
 * the group count.  opts NULL means TG_CYCLIC_OPTS_INIT.  TG_EINVAL unless:
 * the lrs finite and >= 0; step_size_up >= 1 and step_size_down >= 0, at
 * most 2^53 together; a valid mode (without a scale_fn); a valid
 * scale_mode, which must be TG_CYCLIC_SCALE_CYCLE without a scale_fn (the
 * built-in modes choose their own, so another one would be ignored);
 * gamma finite and > 0; with cycle_momentum the momenta finite and >= 0
 * (the lists as in tg_one_cycle_lr_new) and an optimizer with a
 * "momentum" (SGD, RMSprop: torch refuses Adam and AdamW, whose beta1 it
 * does not cycle).  A scale_fn's value that makes an lr negative or not
 * finite, or a momentum out of the optimizer's range, fails that step
 * (or the constructor) with TG_EINVAL. */
TG_API int tg_cyclic_lr_new(tg_lr_scheduler **out, tg_optimizer *opt, int n_base_lr,
                            const double *base_lr, int n_max_lr, const double *max_lr,
                            const tg_cyclic_opts *opts);

/* SWALR(swa_lr, anneal_epochs=10, anneal_strategy='cos'): each group's lr
 * goes from its lr to swa_lr (n_swa_lr 1 or the group count) over
 * anneal_epochs steps, then stays; chained on the group's lr as torch's.
 * TG_EINVAL unless swa_lr[i] is finite and >= 0, anneal_epochs >= 0 and
 * the strategy valid.  Its state adds "prefix.step_count" (0-d i64, torch's
 * _step_count, which it counts its steps with; a SequentialLR's restart
 * does not reset it). */
TG_API int tg_swa_lr_new(tg_lr_scheduler **out, tg_optimizer *opt, int n_swa_lr,
                         const double *swa_lr, int64_t anneal_epochs,
                         tg_anneal_strategy anneal_strategy);

/* ReduceLROnPlateau's options, with torch's defaults. */
typedef struct tg_plateau_opts {
    bool mode_max;            /* false: 'min' (lower is better), true: 'max' */
    double factor;            /* new lr = max(lr * factor, min_lr) */
    int64_t patience;         /* bad steps tolerated before a reduction */
    double threshold;
    bool threshold_abs;       /* false: 'rel', true: 'abs' */
    int64_t cooldown;         /* steps after a reduction that count no bad step */
    double eps;               /* a reduction smaller than eps is skipped */
} tg_plateau_opts;
#define TG_PLATEAU_OPTS_INIT                                                                  \
    {.mode_max = false, .factor = 0.1, .patience = 10, .threshold = 1e-4,                     \
     .threshold_abs = false, .cooldown = 0, .eps = 1e-8}

/* ReduceLROnPlateau(optimizer, ...): stepped with a metric
 * (tg_reduce_lr_on_plateau_step), it multiplies each group's lr by factor
 * once the metric has not improved on the best by the threshold for more
 * than patience steps.  Unlike the others it takes no initial step and
 * leaves the lrs and initial lrs alone: last_epoch 0, its base lrs (torch
 * has none) and last lrs the groups' lrs when it is made.
 * tg_lr_scheduler_step refuses it, and so does a SequentialLR (torch's
 * step() without a metric).  min_lr is (n_min_lr, values) with n_min_lr 1
 * or the group count, or NULL with n_min_lr 0 for 0 everywhere; opts NULL
 * means TG_PLATEAU_OPTS_INIT.  TG_EINVAL unless factor is in [0, 1)
 * (torch's "Factor should be < 1.0."), patience and cooldown >= 0,
 * threshold, eps and min_lr finite and >= 0.  Its state adds "prefix.best"
 * (0-d f64, +-inf before a first metric), "prefix.num_bad_epochs" and
 * "prefix.cooldown_counter" (0-d i64). */
TG_API int tg_reduce_lr_on_plateau_new(tg_lr_scheduler **out, tg_optimizer *opt,
                                       const tg_plateau_opts *opts, int n_min_lr,
                                       const double *min_lr);
/* One step with the metric: last_epoch += 1; the metric improves when it
 * is below best * (1 - threshold) (min, rel), best - threshold (min, abs),
 * above best * (1 + threshold) or best + threshold (max); a NaN never
 * improves (a bad step, as in torch).  A group's reduction to
 * max(lr * factor, min_lr) is skipped when smaller than eps.  TG_EINVAL for
 * NULL, another kind of scheduler, or a reduction while the optimizer has a
 * param group added since s was made; nothing is changed then. */
TG_API int tg_reduce_lr_on_plateau_step(tg_lr_scheduler *s, double metric);
/* torch's best, num_bad_epochs and cooldown_counter into the non-NULL
 * out-parameters.  TG_EINVAL for a NULL s or another kind. */
TG_API int tg_reduce_lr_on_plateau_get(const tg_lr_scheduler *s, double *best,
                                       int64_t *num_bad_epochs, int64_t *cooldown_counter);

#ifdef __cplusplus
}
#endif
#endif
