/* examples/dcgan/progress.c - the progress bar on stderr. */
#include "progress.h"

#include <stdio.h>
#include <time.h>
#include <unistd.h>

#define BAR_WIDTH 20

double progress_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void progress_init(progress *p, int log_every, int64_t batch, int64_t steps_per_epoch,
                   int64_t epochs, int64_t start_step, double budget)
{
    *p = (progress){.tty = isatty(STDERR_FILENO) == 1, .log_every = log_every,
                    .batch = batch, .steps_per_epoch = steps_per_epoch, .epochs = epochs,
                    .start_step = start_step, .budget = budget, .t0 = progress_now(),
                    .rate_step = start_step};
    p->rate_t = p->t0;
}

double progress_elapsed(const progress *p)
{
    return progress_now() - p->t0;
}

/* Updates the smoothed images/s once at least half a second has passed. */
static void sample_rate(progress *p, int64_t step, double now)
{
    double dt = now - p->rate_t;
    if (dt < 0.5) return;
    double r = (double)((step - p->rate_step) * p->batch) / dt;
    p->rate = p->rate > 0 ? 0.7 * p->rate + 0.3 * r : r;
    p->rate_step = step;
    p->rate_t = now;
}

/* Seconds left: to the end of the epochs at the current rate, or to the
 * time budget, whichever comes first; and the fraction done of that. */
static double eta(const progress *p, int64_t step, double elapsed, double *frac)
{
    int64_t total = p->steps_per_epoch * p->epochs;
    double left = p->rate > 0 ? (double)((total - step) * p->batch) / p->rate : -1;
    *frac = total > 0 ? (double)step / (double)total : 0;
    if (p->budget > 0 && (left < 0 || p->budget - elapsed < left)) {
        left = p->budget - elapsed;
        *frac = elapsed / p->budget;
    }
    if (*frac > 1) *frac = 1;
    return left < 0 ? 0 : left;
}

void progress_update(progress *p, int64_t epoch, int64_t step, double d_loss, double g_loss)
{
    double now = progress_now(), elapsed = now - p->t0, frac;
    sample_rate(p, step, now);
    if (p->tty ? now - p->last_draw < 0.1 : step % p->log_every != 0) return;
    p->last_draw = now;
    double left = eta(p, step, elapsed, &frac);
    int fill = (int)(frac * BAR_WIDTH + 0.5);
    char bar[BAR_WIDTH + 1];
    for (int i = 0; i < BAR_WIDTH; i++) bar[i] = i < fill ? '#' : '.';
    bar[BAR_WIDTH] = '\0';
    int64_t in_epoch = step % p->steps_per_epoch;
    fprintf(stderr,
            "%sepoch %lld/%lld step %lld (%lld/%lld) [%s] D %.4f G %.4f | %.0f img/s | "
            "ETA %d:%02d%s",
            p->tty ? "\r" : "", (long long)epoch + 1, (long long)p->epochs, (long long)step,
            (long long)in_epoch, (long long)p->steps_per_epoch, bar, d_loss, g_loss, p->rate,
            (int)left / 60, (int)left % 60, p->tty ? "\033[K" : "\n");
    fflush(stderr);
}

void progress_break(progress *p)
{
    if (p->tty && p->last_draw > 0) fputc('\n', stderr);
    p->last_draw = 0;
}
