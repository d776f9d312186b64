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
        } lambda;
        struct {
            int n;                          /* schedulers; n - 1 milestones */
            tg_lr_scheduler **schedulers;   /* owned array of borrowed schedulers */
            int64_t *milestones;            /* owned */
        } sequential;
        /* OneCycleLR, CyclicLR, ReduceLROnPlateau, SWALR: owned, defined in
         * lr_scheduler_cyclic.h. */
        struct tg__sched_cyclic *cyclic;
    } u;
};

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
/* TG_EINVAL for schedulers a SequentialLR (op) cannot run. */
int tg__sched_cyclic_check_sequential(const char *op, tg_lr_scheduler *const *scheds, int n);
/* Their state's own keys under prefix; load with apply false only checks
 * them, with apply true (after a check) restores them. */
int tg__sched_cyclic_save(const tg_lr_scheduler *s, tg_st_file *f, const char *prefix);
int tg__sched_cyclic_load(const tg_lr_scheduler *s, const tg_st_file *f, const char *prefix,
                          bool apply);

#endif
