/* examples/dcgan/progress.h - the progress bar on stderr.
 *
 * On a terminal one line is redrawn in place (at most 10 times a second);
 * otherwise (a log file, a pipe) a plain line is printed every log_every
 * steps, so logs stay readable. */
#ifndef DCGAN_PROGRESS_H
#define DCGAN_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>

typedef struct progress {
    bool tty;
    int log_every;
    int64_t batch, steps_per_epoch, epochs;
    int64_t start_step;        /* the step this process started at */
    double budget;             /* seconds, <= 0: none */
    double t0, last_draw;      /* monotonic seconds */
    double rate;               /* images/s, smoothed */
    int64_t rate_step;         /* step at the last rate sample */
    double rate_t;
} progress;

double progress_now(void);
void progress_init(progress *p, int log_every, int64_t batch, int64_t steps_per_epoch,
                   int64_t epochs, int64_t start_step, double budget);
/* After step `step` (1-based count of steps done) of epoch `epoch` (0-based). */
void progress_update(progress *p, int64_t epoch, int64_t step, double d_loss, double g_loss);
/* Ends the bar's line (on a terminal) before other output. */
void progress_break(progress *p);
/* Seconds since progress_init. */
double progress_elapsed(const progress *p);

#endif
