/* src/nn/lr_scheduler_internal.h - the scheduler object shared by
 * lr_scheduler.c (kinds, step), lr_scheduler_new.c (construction) and
 * lr_scheduler_state.c (save and load). */
#ifndef TAPEGRAD_LR_SCHEDULER_INTERNAL_H
#define TAPEGRAD_LR_SCHEDULER_INTERNAL_H

#include "optim_internal.h"
#include "tapegrad/lr_scheduler.h"

typedef enum tg__sched_kind {
    TG__SCHED_STEP = 0,
    TG__SCHED_MULTI_STEP,
    TG__SCHED_EXPONENTIAL,
    TG__SCHED_COSINE,
    TG__SCHED_LINEAR,
    TG__SCHED_LAMBDA,
    TG__SCHED_SEQUENTIAL,
    TG__SCHED_ONE_CYCLE,
    TG__SCHED_CYCLIC,
    TG__SCHED_PLATEAU,
    TG__SCHED_SWA,
    TG__SCHED_CONSTANT,
    TG__SCHED_MULTIPLICATIVE,
    TG__SCHED_POLYNOMIAL,
    TG__SCHED_WARM_RESTARTS,
    TG__SCHED_CHAINED,
    TG__SCHED_N_KINDS
} tg__sched_kind;

/* torch's attributes, with its names. */
struct tg_lr_scheduler {
    tg__sched_kind kind;
    tg_optimizer *opt;    /* borrowed */
    int64_t last_epoch;
    /* base_lrs: one per param group opt had when the scheduler was made
     * (n_groups), owned.  A group added to opt later has none, as torch's
     * base_lrs, and the formulas that need one leave its lr alone. */
    int n_groups;
    double *base_lrs;
    /* _last_lr: one per param group opt had at the last step (n_last, from
     * n_groups up to opt's count); next, where a step computes the new lrs
     * before it commits them.  One owned block of 2 cap doubles, last_lrs
     * then next, grown by tg__sched_reserve. */
    int n_last, cap;
    double *last_lrs, *next;
    union {
        struct { int64_t step_size; double gamma; } step;
        struct { int n; int64_t *milestones; double gamma; } multi_step;   /* owned */
        struct { double gamma; } exponential;
        struct { int64_t t_max; double eta_min; } cosine;
        struct { double start_factor, end_factor; int64_t total_iters; } linear;
        struct {
            tg_lr_lambda_fn *fns;   /* owned, one per group with a base lr */
            void **users;           /* owned array of borrowed pointers */
        } lambda;                   /* also MultiplicativeLR's */
        struct {
            int n;                          /* schedulers; n - 1 milestones */
            tg_lr_scheduler **schedulers;   /* owned array of borrowed schedulers */
            int64_t *milestones;            /* owned; NULL for a ChainedScheduler */
        } sequential;                       /* also ChainedScheduler's */
        struct { double factor; int64_t total_iters; } constant;
        struct { int64_t total_iters; double power; } polynomial;
        struct {
            int64_t t_0, t_mult, t_i;   /* T_i: the current cycle's length */
            double eta_min, t_cur;      /* T_cur: epochs since the restart (a double, as
                                         * torch's after a fractional step) */
        } warm;
        /* OneCycleLR, CyclicLR, ReduceLROnPlateau, SWALR: owned, defined in
         * lr_scheduler_cyclic.h. */
        struct tg__sched_cyclic *cyclic;
    } u;
};

/* A SequentialLR or ChainedScheduler: it borrows u.sequential.schedulers,
 * which it steps, saves and loads. */
static inline bool tg__sched_borrows(const tg_lr_scheduler *s)
{
    return s->kind == TG__SCHED_SEQUENTIAL || s->kind == TG__SCHED_CHAINED;
}

/* A kind whose factor comes from the caller's fn (LambdaLR,
 * MultiplicativeLR): a negative lr is the caller's and fails the step. */
static inline bool tg__sched_has_fn(tg__sched_kind k)
{
    return k == TG__SCHED_LAMBDA || k == TG__SCHED_MULTIPLICATIVE;
}

/* "step_lr", "multi_step_lr", ..., "sequential_lr": the state's "kind". */
const char *tg__sched_kind_name(tg__sched_kind k);
/* Grows the last_lrs/next block of s (and of a SequentialLR's schedulers)
 * to hold one value per param group of its optimizer.  TG_ENOMEM leaves
 * every value as it was. */
int tg__sched_reserve(tg_lr_scheduler *s);
/* The lrs of the optimizer's groups at epoch e, from io[g] (each group's
 * lr before it) into io (closed: torch's step(e) with an epoch, else
 * step()), checked; ctor names the constructor taking its initial step,
 * NULL in a step.  Changes nothing else.  A group without a base lr keeps
 * its lr under a closed form, which torch zips over base_lrs. */
int tg__sched_next_lrs(const tg_lr_scheduler *s, int64_t e, bool closed, double *io,
                       const char *ctor);
/* Each group's current lr into io. */
void tg__sched_current_lrs(const tg_optimizer *opt, double *io);
/* Enters epoch e with lrs (from tg__sched_next_lrs, checked): torch's step()
 * after get_lr() sets each param group's lr, and _last_lr holds them all. */
void tg__sched_commit(tg_lr_scheduler *s, int64_t e, const double *lrs);

/* ---- OneCycleLR, CyclicLR, ReduceLROnPlateau, SWALR ----
 * (lr_scheduler_cyclic.c; the state keys in lr_scheduler_plateau.c) */

/* Whether kind k is one of them: tg__sched_next_lrs hands them to
 * tg__sched_cyclic_next_lrs and tg__sched_commit to tg__sched_cyclic_commit. */
bool tg__sched_is_cyclic(tg__sched_kind k);
/* tg__sched_next_lrs of those kinds; also computes (in s->u.cyclic) the
 * momenta and counters that tg__sched_cyclic_commit then sets. */
int tg__sched_cyclic_next_lrs(const tg_lr_scheduler *s, int64_t e, double *io,
                              const char *ctor);
void tg__sched_cyclic_commit(tg_lr_scheduler *s);
void tg__sched_cyclic_free(tg_lr_scheduler *s);
/* TG_EINVAL for schedulers a SequentialLR or ChainedScheduler (op) cannot run. */
int tg__sched_cyclic_check_sequential(const char *op, tg_lr_scheduler *const *scheds, int n);
/* Their state's own keys under prefix; load with apply false only checks
 * them, with apply true (after a check) restores them. */
int tg__sched_cyclic_save(const tg_lr_scheduler *s, tg_st_file *f, const char *prefix);
int tg__sched_cyclic_load(const tg_lr_scheduler *s, const tg_st_file *f, const char *prefix,
                          bool apply);

/* A new scheduler like proto (kind and options set; its arrays are taken
 * over on success) attached to opt, with the initial step
 * (lr_scheduler_new.c). */
int tg__sched_attach(tg_lr_scheduler **out, tg_optimizer *opt, tg_lr_scheduler proto);
/* TG_EINVAL for a NULL out or opt, named in op's message (every
 * constructor's first check; lr_scheduler_new.c). */
int tg__sched_check_common(const char *op, tg_lr_scheduler **out, const tg_optimizer *opt);
/* A LambdaLR or MultiplicativeLR (kind) whose group g uses fns[g] with
 * users[g] (fns[0] and users[0] for every group when shared, n ignored),
 * out, opt and the fns checked with messages naming op (lr_scheduler_new.c). */
int tg__sched_lambda_new(const char *op, tg_lr_scheduler **out, tg_optimizer *opt,
                         tg__sched_kind kind, int n, const tg_lr_lambda_fn *fns,
                         void *const *users, bool shared);

/* ---- the kinds of lr_scheduler_more.c ---- */

/* The lr of a group of base lr base under the kinds of lr_scheduler_more.c,
 * as kinds[]' chain and closed functions of lr_scheduler.c. */
double tg__sched_constant_chain(const tg_lr_scheduler *s, int g, int64_t e, double lr,
                                double base);
double tg__sched_constant_closed(const tg_lr_scheduler *s, int64_t e, double base);
double tg__sched_multiplicative_chain(const tg_lr_scheduler *s, int g, int64_t e, double lr,
                                      double base);
double tg__sched_polynomial_chain(const tg_lr_scheduler *s, int g, int64_t e, double lr,
                                  double base);
double tg__sched_polynomial_closed(const tg_lr_scheduler *s, int64_t e, double base);
double tg__sched_warm_chain(const tg_lr_scheduler *s, int g, int64_t e, double lr, double base);
/* CosineAnnealingWarmRestarts entering epoch e by a step: T_cur and T_i
 * move on (torch's step(), or its step(0) for e <= 0). */
void tg__sched_warm_enter(tg_lr_scheduler *s, int64_t e);
/* ChainedScheduler's step: each scheduler's step in turn, all checked
 * before any is committed. */
int tg__sched_chained_step(tg_lr_scheduler *s);
/* The state a kind keeps beyond last_epoch and the lrs (warm restarts'
 * T_cur and T_i) under prefix: save adds it; load checks it for s and, when
 * into is not NULL (s itself), restores it there.  TG_OK for the other
 * kinds. */
int tg__sched_extra_save(const tg_lr_scheduler *s, tg_st_file *f, const char *prefix);
int tg__sched_extra_load(const tg_lr_scheduler *s, const tg_st_file *f, const char *prefix,
                         tg_lr_scheduler *into);

#endif
