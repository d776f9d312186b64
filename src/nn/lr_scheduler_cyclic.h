/* src/nn/lr_scheduler_cyclic.h - what lr_scheduler_cyclic.c (OneCycleLR,
 * CyclicLR, SWALR, the values at a step) and lr_scheduler_plateau.c
 * (ReduceLROnPlateau, the state keys) share: the object behind
 * s->u.cyclic and the construction helpers. */
#ifndef TAPEGRAD_LR_SCHEDULER_CYCLIC_H
#define TAPEGRAD_LR_SCHEDULER_CYCLIC_H

#include "lr_scheduler_internal.h"

/* The largest step count kept: doubles hold every integer up to it. */
#define TG__SCHED_MAX_STEPS 0x1p53

/* What lives in s->u.cyclic.  g0..g2, bmom, mmom and mom are n_groups
 * values each, in one owned block: OneCycleLR's initial, max and min lr
 * (torch's param_group 'initial_lr', 'max_lr', 'min_lr'); CyclicLR's
 * max_lrs (g0); SWALR's swa_lr (g0); ReduceLROnPlateau's min_lrs (g0);
 * OneCycleLR's and CyclicLR's base and max momentum of each group (bmom,
 * mmom).  mom is the momentum the last tg__sched_cyclic_next_lrs computed,
 * and the next_* fields the counters, that tg__sched_cyclic_commit sets. */
struct tg__sched_cyclic {
    double *g0, *g1, *g2, *bmom, *mmom, *mom;
    bool cycle_momentum, linear;
    /* OneCycleLR */
    int64_t total_steps;
    int n_phases;
    double end_step[3];
    /* CyclicLR; scale_fn NULL for mode's own scale */
    double total_size, step_ratio, gamma;
    tg_cyclic_mode mode;
    tg_cyclic_scale_fn scale_fn;
    void *scale_user;
    bool scale_iterations;
    /* SWALR */
    int64_t anneal_epochs, step_count, next_count;
    /* ReduceLROnPlateau */
    tg_plateau_opts p;
    double best, next_best;
    int64_t bad, next_bad, cool, next_cool;
};
typedef struct tg__sched_cyclic cyc;

/* A new cyc with its block of 6 G values, or NULL; freeing NULL does
 * nothing. */
cyc *tg__cyc_new(int G);
void tg__cyc_free(cyc *c);
/* v[0..n) (n 1 or G: torch's float or list), each finite and >= 0, into
 * out[0..G); the message names n_<name> and <name>. */
int tg__cyc_per_group(const char *op, const char *name, int n, const double *v, int G,
                      double *out);
/* A new scheduler of kind k with c (taken, also on error) on opt: base lrs
 * base[g], the initial step (when step) from the groups' lrs, then each
 * group's initial lr set to base[g] (when set_initial) and the step
 * committed.  Without a step its last lrs are the groups' lrs. */
int tg__cyc_attach(tg_lr_scheduler **out, tg_optimizer *opt, tg__sched_kind k, cyc *c,
                   const double *base, bool step, bool set_initial);

#endif
