/* src/ops/softmax_strided_internal.h - softmax, log_softmax and their
 * backwards of f32 rows of stride S (a slab (C, S): row i is the C
 * elements c S + i), in double with the vectorized exp and log, rounded
 * once to f32 (src/ops/softmax_strided.c), for softmax.c's kernels and cross_entropy's
 * spatial rows (src/ops/cross_entropy_rows.c).  The width w as
 * tg__exp_width_get gives it (src/ops/softmax_rows_internal.h); every
 * width gives the same bits.  Internal to src/ops. */
#ifndef TAPEGRAD_OPS_SOFTMAX_STRIDED_INTERNAL_H
#define TAPEGRAD_OPS_SOFTMAX_STRIDED_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "ops/softmax_rows_internal.h"

/* Doubles of scratch per class (e below: C times this). */
enum { TG__STRIDED_SCRATCH = 8 };

/* Elements a task of softmax's and cross_entropy's slabs takes, about. */
enum { TG__SLAB_TASK = 32768 };

/* How softmax.c and cross_entropy_rows.c share n slabs (C, S) among tasks
 * of about TG__SLAB_TASK elements: *per whole slabs a task; or, with split
 * (slabs of S > 1, whose rows the kernels above and the double ones of
 * softmax.c and cross_entropy_rows.c take by ranges) and slabs larger than
 * that, *pos rows of a slab a task (a multiple of 8, at
 * least 8) and *chunks tasks a slab, so that one slab uses every thread
 * (*pos and *chunks 0 otherwise).  Returns the number of tasks. */
static inline int64_t tg__slab_tasks(int64_t n, int64_t C, int64_t S, bool split, int64_t *per,
                                     int64_t *pos, int64_t *chunks)
{
    const int64_t slab = C * S, rows = TG__SLAB_TASK / C / 8 * 8;
    *per = slab >= TG__SLAB_TASK ? 1 : TG__SLAB_TASK / slab;
    *pos = *chunks = 0;
    if (!split || slab <= TG__SLAB_TASK) return (n + *per - 1) / *per;
    *pos = rows > 8 ? rows : 8;
    *chunks = (S + *pos - 1) / *pos;
    return n * *chunks;
}

/* y = softmax(x) (log_: log_softmax(x)) of rows [i0, i1) of the slab x
 * (C, S) (0 and S: all; a row's bits do not depend on the range it is
 * computed in); y does not overlap x.  e: TG__STRIDED_SCRATCH C doubles of
 * scratch. */
void tg__softmax_strided_f32(const float *x, float *y, int64_t C, int64_t S, int64_t i0,
                             int64_t i1, bool log_, double *e, tg__exp_width w);

/* dx = y (g - sum(g y)): softmax's backward from its output y and the
 * gradient g, rows [i0, i1) of slabs (C, S), the sum in class order; dx
 * may be g. */
void tg__softmax_backward_strided_f32(const float *y, const float *g, float *dx, int64_t C,
                                      int64_t S, int64_t i0, int64_t i1, tg__exp_width w);

/* dx = g - softmax(x) sum(g): log_softmax's backward from its input x and
 * the gradient g, rows [i0, i1) of slabs (C, S); dx may be g.  e as
 * above. */
void tg__log_softmax_backward_strided_f32(const float *x, const float *g, float *dx,
                                          int64_t C, int64_t S, int64_t i0, int64_t i1,
                                          double *e, tg__exp_width w);

/* For each row i in [i0, i1) of the slab x (C, S): st[2 i] = m, its
 * maximum, and st[2 i + 1] = s = sum exp(x - m), as
 * tg__softmax_strided_f32 computes them (log_softmax(x) = (x - m) -
 * log(s)), and lp[i] = log_softmax(x) at class t[i], rounded to f32 as
 * tg__softmax_strided_f32 stores it (0 for t[i] < 0, and t[i] < C). */
void tg__log_softmax_stats_strided_f32(const float *x, int64_t C, int64_t S, int64_t i0,
                                       int64_t i1, const int64_t *t, double *st, double *lp,
                                       tg__exp_width w);

/* tg__log_softmax_backward_strided_f32 of rows [i0, i1) of the slab x (C,
 * S) for a g that is 0 but at class t[i] of row i (none for t[i] < 0), g
 * = gt[i] there
 * (a value of f32), from the rows' stats st
 * (tg__log_softmax_stats_strided_f32): the same bits, with no pass for the
 * maximum and the sums.  dx does not overlap x. */
void tg__log_softmax_pick_backward_strided_f32(const float *x, float *dx, int64_t C,
                                               int64_t S, int64_t i0, int64_t i1,
                                               const double *st, const int64_t *t,
                                               const double *gt, tg__exp_width w);

/* v[i] = log(v[i]) for i < n, in place, at width w: src/ops/log_simd.h's
 * log, the one the kernels above take for log(s).  For tests. */
void tg__log_f64_inplace(double *v, int64_t n, tg__exp_width w);

#endif
