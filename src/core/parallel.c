/* src/core/parallel.c - tapegrad's thread pool.
 *
 * The kernels split their work over a fixed team: the calling thread and
 * tg_get_num_threads() - 1 workers, started on first use.  A parallel call
 * publishes a job (a function, its argument) by bumping a generation number;
 * each thread runs the function with its own id, and the caller waits until
 * every worker that took part has finished.
 *
 * Taking part needs a ticket: a job comes with one per worker, and a worker
 * takes one before it reads the job, at most one of each job (a ticket names
 * its job's generation: a worker still waking from an earlier job that took
 * this one's ticket does not take a second and run its share twice, leaving
 * another worker's undone).  When a worker cannot get a CPU (a shared 2-core
 * machine whose other core is busy), the caller does not wait for it: after
 * its own share, and a quarter as long again (at most TG__PATIENCE_NS)
 * without every ticket taken, it withdraws the tickets left, runs the shares
 * no worker claimed itself, and waits only for the workers holding a ticket.
 * A worker that wakes later finds no ticket and goes back to waiting; the
 * job's memory is never read by a thread without a ticket.  A share is
 * claimed before it runs, so it runs once, and the split of the work is the
 * same whoever runs it.
 *
 * Waiting is "spin, then sleep".  A DCGAN training step makes about a
 * hundred parallel calls with a few tens of microseconds of serial work
 * between most of them, so a worker that has just finished spins on the
 * generation for up to TG__SPIN_NS before it sleeps on a condition variable;
 * the caller waits for the workers the same way.  OpenMP (libgomp), which
 * the kernels used before, made this an environment variable:
 * OMP_WAIT_POLICY=passive (sleep at once) cost the step 10-30% in thread
 * wake-ups, and its default (spin much longer) halved it when two busy
 * processes shared the two cores (docs/performance.md).
 *
 * Calls made from inside a parallel call run serially on the calling
 * thread: the team is busy, and the kernels' inner loops are written to be
 * called either way.  The results of every kernel are the same for any
 * thread count where docs/performance.md says so: the split of work never
 * changes which terms are summed in which order. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "core/core.h"

#define TG__MAX_THREADS 256
/* 50 us: as fast as 0.2-20 ms on an idle machine for the DCGAN step, and
 * the least lost when another process wants the cores (docs/performance.md) */
#define TG__SPIN_NS 50000
/* At most 200 us, and a quarter of the caller's own share: longer than a
 * worker's wake-up on an idle machine for the shares worth sharing, far
 * shorter than a busy core's time slice */
#define TG__PATIENCE_NS 200000

typedef void (*tg__team_fn)(void *arg, int tid, int nt);

static struct {
    pthread_mutex_t mu;
    pthread_cond_t wake;      /* workers: a new generation */
    pthread_cond_t done;      /* caller: the last worker finished */
    alignas(64) atomic_ullong gen;   /* bumped to publish fn/arg; a worker runs each one once */
    alignas(64) atomic_int pending;  /* tickets of the current generation not yet done */
    alignas(64) atomic_ullong tickets;  /* generation << 32 | tickets not yet taken */
    atomic_int sleepers;      /* workers waiting on `wake` */
    atomic_int caller_asleep; /* the caller waits on `done` */
    tg__team_fn fn;           /* NULL: workers exit */
    void *arg;
    int nworkers;             /* started */
    int sized_for;            /* the team size last asked for (pool_size) */
    int64_t spin_ns;          /* TG__SPIN_NS, or 0 with more threads than CPUs */
    pthread_t *threads;
    pid_t pid;                /* the process that started them (after fork: none) */
} pool = {.mu = PTHREAD_MUTEX_INITIALIZER,
          .wake = PTHREAD_COND_INITIALIZER,
          .done = PTHREAD_COND_INITIALIZER};

static pthread_mutex_t pool_owner = PTHREAD_MUTEX_INITIALIZER;   /* one caller at a time */
static _Atomic int64_t patience_ns = TG__PATIENCE_NS;   /* tests: tg__pool_set_patience */
static atomic_int held;     /* tests: workers wait before taking a ticket (tg__pool_hold) */
static atomic_int wanted;   /* tg_set_num_threads; 0: not called */
static atomic_int deflt;    /* TG_NUM_THREADS, OMP_NUM_THREADS or the CPUs; 0: not read yet */
static _Thread_local bool in_team;

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Spins until ready(arg) (returns true) or the spin budget is spent. */
static inline bool spin(bool (*ready)(unsigned long long arg), unsigned long long arg)
{
    if (pool.spin_ns == 0) return ready(arg);
    const int64_t end = now_ns() + pool.spin_ns;
    for (;;) {
        for (int i = 0; i < 64; i++) {
            if (ready(arg)) return true;
            cpu_relax();
        }
        if (now_ns() > end) return false;
    }
}

/* A generation after `seen` is published (workers). */
static inline bool published_after(unsigned long long seen)
{
    return atomic_load_explicit(&pool.gen, memory_order_acquire) != seen;
}

/* Every worker has finished the current generation (the caller). */
static inline bool all_done(unsigned long long unused)
{
    (void)unused;
    return atomic_load_explicit(&pool.pending, memory_order_acquire) == 0;
}

#define TICKET_COUNT 0xffffffffull

/* The tickets word of generation g with n tickets. */
static inline unsigned long long tickets_of(unsigned long long g, int n)
{
    return (g & TICKET_COUNT) << 32 | (unsigned long long)n;
}

/* Takes a ticket of generation `seen`, if that is the current job's and
 * one is left. */
static bool take_ticket(unsigned long long seen)
{
    unsigned long long t = atomic_load_explicit(&pool.tickets, memory_order_relaxed);
    while (t >> 32 == (seen & TICKET_COUNT) && (t & TICKET_COUNT) > 0)
        if (atomic_compare_exchange_weak_explicit(&pool.tickets, &t, t - 1, memory_order_acquire,
                                                  memory_order_relaxed))
            return true;
    return false;
}

static void *worker_main(void *p)
{
    const int tid = (int)(intptr_t)p;
    unsigned long long seen = 0;
    in_team = true;
    for (;;) {
        if (!spin(published_after, seen)) {
            pthread_mutex_lock(&pool.mu);
            atomic_fetch_add(&pool.sleepers, 1);
            while (atomic_load(&pool.gen) == seen) pthread_cond_wait(&pool.wake, &pool.mu);
            atomic_fetch_sub(&pool.sleepers, 1);
            pthread_mutex_unlock(&pool.mu);
        }
        seen = atomic_load_explicit(&pool.gen, memory_order_acquire);
        while (atomic_load(&held)) {   /* tests only */
            const struct timespec ms = {0, 1000000};
            nanosleep(&ms, NULL);
        }
        if (!take_ticket(seen)) continue;   /* withdrawn, or a later job's: wait for its gen */
        const tg__team_fn fn = pool.fn;
        if (fn) fn(pool.arg, tid, pool.nworkers + 1);
        if (atomic_fetch_sub(&pool.pending, 1) == 1 &&
            atomic_load(&pool.caller_asleep)) {
            pthread_mutex_lock(&pool.mu);
            pthread_cond_signal(&pool.done);
            pthread_mutex_unlock(&pool.mu);
        }
        if (!fn) return NULL;
    }
}

/* Publishes fn/arg to the workers (pool_owner held). */
static void publish(tg__team_fn fn, void *arg)
{
    pool.fn = fn;
    pool.arg = arg;
    /* only the pool's owner publishes: gen changes nowhere else meanwhile */
    const unsigned long long g = atomic_load_explicit(&pool.gen, memory_order_relaxed) + 1;
    atomic_store_explicit(&pool.pending, pool.nworkers, memory_order_relaxed);
    atomic_store_explicit(&pool.tickets, tickets_of(g, pool.nworkers), memory_order_release);
    atomic_store(&pool.gen, g);   /* seq_cst: ordered before the sleepers load */
    if (atomic_load(&pool.sleepers) > 0) {
        pthread_mutex_lock(&pool.mu);
        pthread_cond_broadcast(&pool.wake);
        pthread_mutex_unlock(&pool.mu);
    }
}

static void wait_workers(void)
{
    if (spin(all_done, 0)) return;
    pthread_mutex_lock(&pool.mu);
    atomic_store(&pool.caller_asleep, 1);
    while (atomic_load(&pool.pending) != 0) pthread_cond_wait(&pool.done, &pool.mu);
    atomic_store(&pool.caller_asleep, 0);
    pthread_mutex_unlock(&pool.mu);
}

int tg__parse_threads(const char *s)
{
    if (!s || *s < '0' || *s > '9') return 0;
    char *end;
    errno = 0;
    const long v = strtol(s, &end, 10);
    if (end == s || (*end != '\0' && *end != ',') || v < 1) return 0;   /* "4,2": the outer level */
    return errno == ERANGE || v > TG__MAX_THREADS ? TG__MAX_THREADS : (int)v;
}

/* The CPUs this process may run on (its affinity mask, as `taskset` sets
 * it), else the online ones. */
static int online_cpus(void)
{
    long cpus = 0;
#ifdef CPU_COUNT
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) cpus = CPU_COUNT(&set);
#endif
    if (cpus < 1) cpus = sysconf(_SC_NPROCESSORS_ONLN);
    return cpus < 1 ? 1 : cpus > TG__MAX_THREADS ? TG__MAX_THREADS : (int)cpus;
}

static int default_threads(void)
{
    int n = tg__parse_threads(getenv("TG_NUM_THREADS"));
    if (n == 0) n = tg__parse_threads(getenv("OMP_NUM_THREADS"));
    return n > 0 ? n : online_cpus();
}

int tg_get_num_threads(void)
{
    if (in_team) return 1;
    int n = atomic_load_explicit(&wanted, memory_order_relaxed);
    if (n > 0) return n;
    if ((n = atomic_load_explicit(&deflt, memory_order_relaxed)) > 0) return n;
    n = default_threads();
    atomic_store(&deflt, n);
    return n;
}

/* Stops the workers (pool_owner held). */
static void pool_stop(void)
{
    if (pool.pid != getpid()) {   /* a forked child: its parent's workers are not here */
        pthread_mutex_init(&pool.mu, NULL);
        pthread_cond_init(&pool.wake, NULL);
        pthread_cond_init(&pool.done, NULL);
        free(pool.threads);
        pool.threads = NULL;
        pool.nworkers = 0;
        return;
    }
    if (pool.nworkers == 0) return;
    publish(NULL, NULL);
    wait_workers();
    for (int i = 0; i < pool.nworkers; i++) pthread_join(pool.threads[i], NULL);
    free(pool.threads);
    pool.threads = NULL;
    pool.nworkers = 0;
}

/* Makes the pool nt - 1 workers strong (pool_owner held), or as many as
 * could be started; they are not asked again until nt changes.  False: no
 * worker; the call then runs serially. */
static bool pool_size(int nt)
{
    if (pool.pid == getpid() && pool.sized_for == nt) return pool.nworkers > 0;
    pool_stop();
    pool.pid = getpid();
    pool.sized_for = nt;
    /* More threads than CPUs: a spinning thread would hold a CPU that a
     * working one needs (dcgan_step --threads 8 on 2 CPUs: 400 images/s
     * spinning, against 478 for OpenMP's passive), so they sleep at once. */
    pool.spin_ns = nt > online_cpus() ? 0 : TG__SPIN_NS;
    if (nt < 2) return false;
    if (!(pool.threads = malloc(sizeof *pool.threads * (size_t)(nt - 1)))) return false;
    atomic_store(&pool.gen, 0);
    atomic_store(&pool.tickets, tickets_of(0, 0));
    atomic_store(&pool.sleepers, 0);
    atomic_store(&pool.caller_asleep, 0);
    /* Workers block every signal, so that the program's handlers (dcgan's
     * SIGINT: save and stop) run on its own threads. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    for (int i = 0; i < nt - 1; i++) {
        if (pthread_create(&pool.threads[i], NULL, worker_main, (void *)(intptr_t)(i + 1)) != 0)
            break;
        pool.nworkers++;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return pool.nworkers > 0;
}

int tg_set_num_threads(int n)
{
    if (n < 1 || n > TG__MAX_THREADS)
        return tg_error_set(TG_EINVAL, "tg_set_num_threads: n=%d must be in [1, %d]", n,
                            TG__MAX_THREADS);
    if (in_team)
        return tg_error_set(TG_EINVAL, "tg_set_num_threads: called from inside a parallel call");
    atomic_store(&wanted, n);
    return TG_OK;
}

bool tg__in_parallel(void) { return in_team; }

/* The threads a call with `parallel` and n items runs on: 1 when it is not
 * to be split, has one item, or is made inside a parallel call. */
static int call_threads(bool parallel, int64_t n)
{
    return !parallel || n < 2 || in_team ? 1 : tg_get_num_threads();
}

/* Every ticket is taken (the caller, waiting for its team to join). */
static inline bool all_joined(void)
{
    return (atomic_load_explicit(&pool.tickets, memory_order_relaxed) & TICKET_COUNT) == 0;
}

/* Waits up to `wait` ns for every worker to take its ticket (negative:
 * without end), then withdraws the tickets left; returns how many. */
static int withdraw_tickets(int64_t wait)
{
    if (wait < 0) {
        while (!all_joined()) sched_yield();
    } else {
        const int64_t end = now_ns() + wait;
        while (!all_joined() && now_ns() < end) cpu_relax();
    }
    const int left = (int)(atomic_fetch_and(&pool.tickets, ~TICKET_COUNT) & TICKET_COUNT);
    if (left > 0) atomic_fetch_sub(&pool.pending, left);
    return left;
}

int64_t tg__pool_set_patience(int64_t ns) { return atomic_exchange(&patience_ns, ns); }

void tg__pool_hold(bool hold) { atomic_store(&held, hold); }

/* Runs fn(arg, tid, nt) on nt threads, tid 0 being this one, for a call
 * outside any parallel call that wants `want` >= 2 threads, then, when a
 * worker did not join in time, rest(arg, nt) on this thread: the shares
 * no one claimed (see the top).  rest NULL: the caller's fn leaves nothing
 * undone (it takes work until none is left), so no worker is waited for
 * that has not joined when it returns.  Serial (nt = 1) while another
 * thread of the program holds the team, or when no worker could be
 * started. */
static void team_run(tg__team_fn fn, void (*rest)(void *arg, int nt), void *arg, int want)
{
    bool team = pthread_mutex_trylock(&pool_owner) == 0;
    if (team && !pool_size(want)) {
        pthread_mutex_unlock(&pool_owner);
        team = false;
    }
    if (!team) {
        in_team = true;
        fn(arg, 0, 1);
        in_team = false;
        return;
    }
    publish(fn, arg);
    in_team = true;
    const int nt = pool.nworkers + 1;
    const int64_t t0 = now_ns();
    fn(arg, 0, nt);
    /* Patience: a quarter of the time the caller's own share took (a
     * missing worker's share costs about that whole time to run here), so
     * a worker that never comes makes the call at most a quarter slower
     * than a serial one. */
    int64_t wait = rest ? atomic_load(&patience_ns) : 0, own = (now_ns() - t0) / 4;
    if (wait > own) wait = own;
    if (withdraw_tickets(wait) > 0 && rest) rest(arg, nt);
    in_team = false;
    wait_workers();
    pthread_mutex_unlock(&pool_owner);
}

/* ---- contiguous ranges ---------------------------------------------------- */

typedef struct {
    int64_t n;
    void (*body)(void *ctx, int64_t lo, int64_t hi);
    void *ctx;
    atomic_flag claimed[TG__MAX_THREADS];   /* share tid taken */
} range_job;

static void range_part(void *p, int tid, int nt)
{
    range_job *j = p;
    if (atomic_flag_test_and_set(&j->claimed[tid])) return;   /* the caller ran it */
    /* n/nt each, the first n%nt one more (no n*tid, which could overflow) */
    const int64_t q = j->n / nt, r = j->n % nt;
    const int64_t lo = tid * q + (tid < r ? tid : r), hi = lo + q + (tid < r ? 1 : 0);
    if (lo < hi) j->body(j->ctx, lo, hi);
}

/* The shares of workers that did not join in time, on the caller. */
static void range_rest(void *p, int nt)
{
    for (int tid = 1; tid < nt; tid++) range_part(p, tid, nt);
}

void tg__parallel_range(int64_t n, bool parallel, void (*body)(void *ctx, int64_t lo, int64_t hi),
                        void *ctx)
{
    if (n <= 0) return;
    const int nt = call_threads(parallel, n);
    if (nt < 2) {
        body(ctx, 0, n);
        return;
    }
    range_job j = {.n = n, .body = body, .ctx = ctx};
    for (int i = 0; i < nt; i++) atomic_flag_clear(&j.claimed[i]);
    team_run(range_part, range_rest, &j, nt);
}

/* ---- independent tasks, taken one at a time ----------------------------- */

typedef struct {
    int64_t n;
    int (*task)(void *job, int64_t i);
    void *job;
    atomic_llong next;
    atomic_int rc;
    atomic_flag msg_taken;
    char msg[512];   /* a worker's message: tg_error_message is per thread */
} tasks_job;

static void tasks_part(void *p, int tid, int nt)
{
    (void)tid;
    (void)nt;
    tasks_job *j = p;
    for (;;) {
        if (atomic_load_explicit(&j->rc, memory_order_relaxed) < 0)
            return;   /* a task failed: the ones not started are skipped */
        const int64_t i = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
        if (i >= j->n) return;
        const int r = j->task(j->job, i);
        if (r < 0 && !atomic_flag_test_and_set(&j->msg_taken)) {
            snprintf(j->msg, sizeof j->msg, "%s", tg_error_message());
            atomic_store(&j->rc, r);
        }
    }
}

int tg__run_tasks(int64_t n, bool parallel, int (*task)(void *job, int64_t i), void *job)
{
    const int nt = call_threads(parallel, n);
    if (nt < 2) {
        for (int64_t i = 0; i < n; i++) TG_TRY(task(job, i));
        return TG_OK;
    }
    tasks_job j = {.n = n, .task = task, .job = job, .msg_taken = ATOMIC_FLAG_INIT};
    atomic_init(&j.next, 0);
    atomic_init(&j.rc, TG_OK);
    team_run(tasks_part, NULL, &j, nt);
    const int rc = atomic_load(&j.rc);
    return rc < 0 ? tg_error_set(rc, "%s", j.msg) : TG_OK;
}
