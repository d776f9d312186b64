/* src/core/profile.c - the profiler of tapegrad/profile.h.
 *
 * Each thread keeps a stack of open frames (an op's forward, a backward
 * step, a marked range): its start time, the time of the frames that ran
 * inside it, and the run of the profiler it belongs to.  A frame's end adds
 * its time to the row (name, phase) of the table, under the lock, and to
 * its parent's inner time, so a row's self time is its total less what ran
 * inside it.  A run number (bumped by each start) keeps a frame opened in
 * an earlier run, or while the profiler was off, out of the table.
 *
 * TG_PROFILE=N in the environment starts it when the library is loaded and
 * prints the N rows of most self time on stderr when the process exits. */
#include <limits.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "core/core.h"
#include "core/profile.h"
#include "tapegrad/profile.h"

enum { MAX_DEPTH = 64, TABLE = 1024 };

typedef struct frame {
    const char *name;   /* an op's (lives through the call) or label */
    char label[64];     /* a range's own copy */
    int phase;
    uint64_t run;       /* 0: not counted */
    double start, inner;
} frame;

static _Thread_local frame stack[MAX_DEPTH];
static _Thread_local int depth;

static atomic_bool running;
static atomic_uint_fast64_t current_run;   /* of the last start */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static tg_profile_row rows[TABLE];
static int n_rows;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static tg_profile_row *find(const char *name, int phase)
{
    for (int i = 0; i < n_rows; i++)
        if ((int)rows[i].phase == phase &&
            strncmp(rows[i].name, name, sizeof rows[i].name - 1) == 0)
            return &rows[i];
    return NULL;
}

/* The row (name, phase), made when new; when the table is full, the row
 * "(other)" of that phase (the last three places are kept for those).
 * Under the lock. */
static tg_profile_row *row_of(const char *name, int phase)
{
    tg_profile_row *r = find(name, phase);
    if (r) return r;
    if (n_rows >= TABLE - 3) {
        name = "(other)";
        if ((r = find(name, phase))) return r;
    }
    r = &rows[n_rows++];
    *r = (tg_profile_row){.phase = (tg_profile_phase)phase};
    snprintf(r->name, sizeof r->name, "%s", name);
    return r;
}

static int push(const char *name, int phase, uint64_t run)
{
    if (depth == MAX_DEPTH) return -1;
    stack[depth] = (frame){.name = name, .phase = phase, .run = run, .start = now()};
    return depth++;
}

/* Closes the frames from d up (d itself last), each counted when its run
 * is the current one. */
static void close_to(int d)
{
    while (depth > d) {
        frame *f = &stack[--depth];
        const double t = now() - f->start;
        if (depth > 0) stack[depth - 1].inner += t;
        if (f->run == 0 || !atomic_load(&running) || f->run != atomic_load(&current_run))
            continue;
        pthread_mutex_lock(&lock);
        tg_profile_row *r = row_of(f->name, f->phase);
        r->calls++;
        r->total_s += t;
        r->self_s += t - f->inner;
        pthread_mutex_unlock(&lock);
    }
}

int tg__prof_enter(const char *name, int phase)
{
    if (!atomic_load_explicit(&running, memory_order_relaxed)) return -1;
    return push(name, phase, atomic_load(&current_run));
}

void tg__prof_leave(int d)
{
    if (d >= 0 && d < depth) close_to(d);
}

int tg_profile_start(void)
{
    pthread_mutex_lock(&lock);
    const bool was = atomic_load(&running);
    if (!was) {
        n_rows = 0;
        atomic_fetch_add(&current_run, 1);
        atomic_store(&running, true);
    }
    pthread_mutex_unlock(&lock);
    TG_CHECK(!was, TG_EINVAL, "profile_start: the profiler already runs");
    return TG_OK;
}

int tg_profile_stop(void)
{
    pthread_mutex_lock(&lock);
    const bool was = atomic_exchange(&running, false);
    pthread_mutex_unlock(&lock);
    TG_CHECK(was, TG_EINVAL, "profile_stop: the profiler does not run");
    return TG_OK;
}

int tg_profile_running(void) { return atomic_load(&running); }

int tg_profile_push(const char *label)
{
    TG_CHECK(label != NULL, TG_EINVAL, "profile_push: label must not be NULL");
    const uint64_t run = atomic_load(&running) ? atomic_load(&current_run) : 0;
    const int d = push(NULL, TG_PROFILE_RANGE, run);
    TG_CHECK(d >= 0, TG_ENOMEM, "profile_push: ranges and ops nest deeper than %d", MAX_DEPTH);
    snprintf(stack[d].label, sizeof stack[d].label, "%s", label);
    stack[d].name = stack[d].label;
    return TG_OK;
}

int tg_profile_pop(void)
{
    TG_CHECK(depth > 0 && stack[depth - 1].phase == TG_PROFILE_RANGE, TG_EINVAL,
             "profile_pop: no range is open on this thread (%s)",
             depth > 0 ? "the innermost frame is an op's" : "no push before it");
    close_to(depth - 1);
    return TG_OK;
}

/* Self time, largest first; then name, then phase. */
static int by_self(const void *a, const void *b)
{
    const tg_profile_row *x = a, *y = b;
    if (x->self_s != y->self_s) return x->self_s < y->self_s ? 1 : -1;
    const int c = strcmp(x->name, y->name);
    return c ? c : (int)x->phase - (int)y->phase;
}

/* A sorted copy of the table into *out (n rows; NULL when empty). */
static int sorted(tg_profile_row **out, int *n)
{
    pthread_mutex_lock(&lock);
    *n = n_rows;
    *out = NULL;
    if (n_rows > 0) {
        *out = tg__malloc((size_t)n_rows * sizeof **out);
        if (*out) memcpy(*out, rows, (size_t)n_rows * sizeof **out);
    }
    pthread_mutex_unlock(&lock);
    if (*n > 0 && !*out) return TG_ENOMEM;
    if (*out) qsort(*out, (size_t)*n, sizeof **out, by_self);
    return TG_OK;
}

int tg_profile_row_count(void)
{
    pthread_mutex_lock(&lock);
    const int n = n_rows;
    pthread_mutex_unlock(&lock);
    return n;
}

int tg_profile_row_at(int i, tg_profile_row *row)
{
    TG_CHECK(row != NULL, TG_EINVAL, "profile_row_at: row must not be NULL");
    tg_profile_row *all = NULL;
    int n = 0;
    TG_TRY(sorted(&all, &n));
    const bool in = i >= 0 && i < n;
    if (in) *row = all[i];
    free(all);
    TG_CHECK(in, TG_EINVAL, "profile_row_at: i=%d must be in [0, %d)", i, n);
    return TG_OK;
}

static const char *phase_name(tg_profile_phase p)
{
    return p == TG_PROFILE_FORWARD ? "forward" : p == TG_PROFILE_BACKWARD ? "backward" : "range";
}

int tg_profile_print(FILE *f, int top)
{
    TG_CHECK(f != NULL, TG_EINVAL, "profile_print: f must not be NULL");
    tg_profile_row *all = NULL;
    int n = 0;
    TG_TRY(sorted(&all, &n));
    double self = 0, width = 4;
    for (int i = 0; i < n; i++) {
        self += all[i].self_s;
        const double w = (double)strlen(all[i].name);
        width = w > width ? w : width;
    }
    const int shown = top > 0 && top < n ? top : n, w = (int)width;
    int bad = fprintf(f, "%-*s  %-8s  %8s  %10s  %6s  %10s  %10s\n", w, "name", "phase", "calls",
                      "self ms", "self%", "total ms", "us/call") < 0;
    for (int i = 0; i < shown; i++) {
        const tg_profile_row *r = &all[i];
        bad |= fprintf(f, "%-*s  %-8s  %8lld  %10.3f  %5.1f%%  %10.3f  %10.1f\n", w, r->name,
                       phase_name(r->phase), (long long)r->calls, 1e3 * r->self_s,
                       self > 0 ? 100 * r->self_s / self : 0.0, 1e3 * r->total_s,
                       r->calls ? 1e6 * r->total_s / (double)r->calls : 0.0) < 0;
    }
    bad |= fprintf(f, "%d of %d rows shown; self time of all rows %.3f ms\n", shown, n,
                   1e3 * self) < 0;
    free(all);
    TG_CHECK(!bad, TG_EIO, "profile_print: writing the table failed");
    return TG_OK;
}

/* ---- TG_PROFILE ---- */

static int exit_rows;

static void print_at_exit(void)
{
    if (tg_profile_running()) tg_profile_stop();
    tg_profile_print(stderr, exit_rows);
}

__attribute__((constructor)) static void profile_from_env(void)
{
    const char *e = getenv("TG_PROFILE");
    if (!e || !*e) return;
    char *end;
    const long v = strtol(e, &end, 10);
    if (*end != '\0' || v < 1) {
        fprintf(stderr, "tapegrad: TG_PROFILE=%.32s is not a number of rows >= 1; not "
                        "profiling\n", e);
        return;
    }
    exit_rows = v > INT_MAX ? INT_MAX : (int)v;
    if (tg_profile_start() == TG_OK) atexit(print_at_exit);
}
