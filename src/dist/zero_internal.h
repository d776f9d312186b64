/* src/dist/zero_internal.h - the ZeroRedundancyOptimizer shared by zero.c
 * (construction, step), zero_groups.c (param groups) and zero_state.c
 * (consolidation, loading). */
#ifndef TG_DIST_ZERO_INTERNAL_H
#define TG_DIST_ZERO_INTERNAL_H

#include "dist/dist_internal.h"

struct tg_zero {
    tg_dist *d;              /* borrowed */
    int n;
    tg_tensor **params;      /* retained; the groups' parameters one group after another */
    int *owner;              /* n: the rank of each parameter */
    int *local_index;        /* n: its index in opt, -1 when another rank owns it */
    int n_local;
    int n_groups;
    int *group_end;          /* n_groups: group g is params[group_end[g - 1]..group_end[g]) */
    int *local_group;        /* n_groups: group g's group in opt: g once it is placed
                              * (an empty share is an empty group), -1 before */
    tg_zero_make_fn make;
    tg_optimizer *all;       /* owned: every parameter, the groups' hyperparameters, no
                              * state (torch's zero.param_groups) */
    tg_optimizer *opt;       /* owned; NULL when n_local is 0 */
    bool broken;             /* an add_param_group failed half-way: z only frees */
    bool bucket_view;        /* parameters_as_bucket_view (zero_buckets.c) */
    int n_buckets;
    tg_tensor **buckets;     /* owned (n_buckets): flat, one per (rank, dtype) */
    int *bucket_root;        /* (n_buckets) the rank that owns each */
    int *bucket_of;          /* (n) each parameter's bucket, -1 without buckets */
    int64_t steps;
};

/* The prefix under which zero_state.c moves the local optimizer's state. */
#define TG__ZERO_PREFIX "zero"

/* Local checks of params[0..n) (one group's, or all groups' in a row:
 * float, contiguous, dense, distinct; fn names the caller); *layout:
 * their dtypes and shapes hashed on from its value (FNV-1a, first
 * TG__ZERO_FNV_BASIS). */
#define TG__ZERO_FNV_BASIS 0xcbf29ce484222325ull
int tg__zero_check_params(const char *fn, int n, tg_tensor *const *params, uint64_t *layout);
/* Grows z's arrays to hold n parameters and n_groups groups (the new
 * entries unset); TG_ENOMEM with z unchanged but for the capacity. */
int tg__zero_reserve(tg_zero *z, int n, int n_groups);
/* Partitions group g (the last of z's, its parameters and group_end set)
 * over the ranks, as torch's rule over groups 0..g gives it (the earlier
 * groups keep their owners), and puts this rank's share of it, largest
 * first (none: an empty group), into its optimizer as its next group:
 * make(opts) when it has none yet, else add(opts), then local_group[g]. */
int tg__zero_place_group(tg_zero *z, int g, tg_zero_add_fn add, const void *opts);
/* Rank's parameters of group g, in the order of that group of its
 * optimizer (largest first, stably), into idx; their count. */
int tg__zero_share(const tg_zero *z, int g, int rank, int *idx);
/* Rebuilds the buckets over z's parameters (on) or gives each parameter
 * its own storage (off); local.  TG_ENOMEM with nothing changed. */
int tg__zero_build_buckets(tg_zero *z, bool on);
/* TG_EINVAL when a parameter no longer views its bucket (local). */
int tg__zero_check_buckets(const tg_zero *z);
/* The broadcast after a step: each parameter from its owner, or each
 * bucket from its rank.  Collective. */
int tg__zero_broadcast(tg_zero *z);
/* Copies each group's hyperparameters from z->all to z->opt (torch's
 * _sync_param_groups(self.param_groups, self.optim.param_groups)). */
int tg__zero_sync(tg_zero *z);

#endif
