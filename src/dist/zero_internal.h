/* src/dist/zero_internal.h - the ZeroRedundancyOptimizer shared by zero.c
 * (partition, step) and zero_state.c (consolidation, loading). */
#ifndef TG_DIST_ZERO_INTERNAL_H
#define TG_DIST_ZERO_INTERNAL_H

#include "dist/dist_internal.h"

struct tg_zero {
    tg_dist *d;              /* borrowed */
    int n;
    tg_tensor **params;      /* retained, tg_zero_new's order */
    int *owner;              /* n: the rank of each parameter */
    int *local_index;        /* n: its index in opt, -1 when another rank owns it */
    int n_local;
    tg_optimizer *opt;       /* owned; NULL when n_local is 0 */
    int64_t steps;
};

/* The prefix under which zero_state.c moves the local optimizer's state. */
#define TG__ZERO_PREFIX "zero"

#endif
