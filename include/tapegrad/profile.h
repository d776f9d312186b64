/* tapegrad/profile.h - where the time goes: op by op, forward and backward.
 *
 * The profiler of torch.profiler's key_averages(), for the CPU:
 *
 *   tg_profile_start();
 *   ... forward, tg_backward, tg_optimizer_step ...
 *   tg_profile_stop();
 *   tg_profile_print(stdout, 20);   // the 20 rows of most self time
 *
 * While it runs, every op call (built-in or a program's own, through
 * tg_op_call) is timed under the op's name in the forward phase, every
 * backward step of the tape under the op's name in the backward phase, and
 * every range a program (or the library: "optimizer.step") marks with
 * tg_profile_push/pop under its label.  A row's total time runs from entry
 * to exit; its self time leaves out the rows entered inside it on the same
 * thread (a backward made of differentiable ops: the ops are rows of their
 * own, as aten::mul under MulBackward0).  Self times add up to the time
 * spent in rows, so a row's share of it says where the time goes.  The time
 * is wall-clock time on the calling thread, including the kernels' worker
 * threads it waits for.
 *
 * Without changing a program: TG_PROFILE=N in the environment starts the
 * profiler when the library is loaded and prints the N rows of most self
 * time on stderr when the process exits (a program's own tg_profile_start
 * then finds it running).
 *
 * Rows are kept per (name, phase) across threads, under a lock; when the
 * profiler is off the cost of an op call is one atomic load.  Profiling is
 * process-wide: start and stop from one thread, with the others' ops
 * counted while it runs.
 */
#ifndef TAPEGRAD_PROFILE_H
#define TAPEGRAD_PROFILE_H

#include <stdint.h>
#include <stdio.h>

#include "tapegrad/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tg_profile_phase {
    TG_PROFILE_FORWARD = 0,    /* an op's forward (tg_op_call) */
    TG_PROFILE_BACKWARD = 1,   /* an op's backward step (tg_backward, tg_grad) */
    TG_PROFILE_RANGE = 2       /* a range marked by tg_profile_push */
} tg_profile_phase;

/* One row: what ran, how often and for how long (seconds). */
typedef struct tg_profile_row {
    char name[64];    /* the op's name or the range's label (cut at 63 bytes) */
    tg_profile_phase phase;
    int64_t calls;
    double total_s;   /* entry to exit, summed over the calls */
    double self_s;    /* total_s less the rows entered inside it */
} tg_profile_row;

/* Clears the rows and starts timing.  TG_EINVAL when it already runs. */
TG_API int tg_profile_start(void);
/* Stops timing; the rows stay until the next start.  Calls still open on
 * other threads are not counted.  TG_EINVAL when it does not run. */
TG_API int tg_profile_stop(void);
/* Whether the profiler runs. */
TG_API int tg_profile_running(void);

/* The number of rows. */
TG_API int tg_profile_row_count(void);
/* Row i (0 <= i < tg_profile_row_count()), rows ordered by self time,
 * largest first (ties by name, then phase).  TG_EINVAL for a NULL row or i
 * out of range. */
TG_API int tg_profile_row_at(int i, tg_profile_row *row);
/* The table of the first top rows (all for top <= 0): name, phase, calls,
 * self time and its share of all self time, total time, time per call;
 * then the sum.  TG_EINVAL for a NULL f, TG_EIO when writing fails. */
TG_API int tg_profile_print(FILE *f, int top);

/* Opens a range labelled label (copied) on this thread; it ends at the
 * matching tg_profile_pop.  Both do nothing when the profiler is off (a
 * range that was open when it started is not counted).  TG_EINVAL for a
 * NULL label, or a pop without a push; TG_ENOMEM when ranges nest deeper
 * than 64 (the range is not counted). */
TG_API int tg_profile_push(const char *label);
TG_API int tg_profile_pop(void);

#ifdef __cplusplus
}
#endif
#endif
