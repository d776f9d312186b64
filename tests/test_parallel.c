/* Tests of src/core/parallel.c: the thread pool behind every kernel.  Each
 * parallel call must cover its range exactly once, run on as many threads
 * as asked, stay serial when nested, survive two application threads and a
 * fork, and bring a worker's error message back to the caller.  And the
 * BLAS kernels those workers call fit the CPU (src/core/blas.c). */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "helpers.h"
#include "tapegrad/ops.h"
#include "core/core.h"
#include "tapegrad/tapegrad.h"

enum { MAXN = 5000 };

/* What a range body saw: how often each index ran, and on which thread. */
typedef struct {
    atomic_int hits[MAXN];
    pthread_t who[MAXN];
    atomic_int nested_threads;   /* tg_get_num_threads() inside, summed */
    atomic_int nested_flag;      /* tg__in_parallel() inside, summed */
} seen_t;

static void record(void *p, int64_t lo, int64_t hi)
{
    seen_t *s = p;
    atomic_fetch_add(&s->nested_threads, tg_get_num_threads());
    atomic_fetch_add(&s->nested_flag, tg__in_parallel() ? 1 : 0);
    for (int64_t i = lo; i < hi; i++) {
        atomic_fetch_add(&s->hits[i], 1);
        s->who[i] = pthread_self();
    }
    /* long enough that every thread of the team gets its range */
    struct timespec ts = {0, 200000};
    nanosleep(&ts, NULL);
}

/* The number of distinct threads among who[0..n). */
static int distinct_threads(const seen_t *s, int64_t n)
{
    pthread_t ids[64];
    int k = 0;
    for (int64_t i = 0; i < n; i++) {
        int j = 0;
        while (j < k && !pthread_equal(ids[j], s->who[i])) j++;
        if (j == k && k < 64) ids[k++] = s->who[i];
    }
    return k;
}

/* With the caller waiting for every worker to join, each share runs on a
 * thread of its own. */
Test(parallel, range_covers_every_index_once_on_the_asked_threads)
{
    const int64_t patience = tg__pool_set_patience(-1);
    static const int64_t ns[] = {1, 2, 3, 7, 64, 1000, MAXN};
    for (int t = 1; t <= 4; t++) {
        cr_assert(eq(int, tg_set_num_threads(t), TG_OK));
        cr_assert(eq(int, tg_get_num_threads(), t));
        for (size_t c = 0; c < sizeof ns / sizeof *ns; c++) {
            static seen_t s;
            memset(&s, 0, sizeof s);
            const int64_t n = ns[c];
            tg__parallel_range(n, true, record, &s);
            for (int64_t i = 0; i < n; i++)
                cr_assert(eq(int, atomic_load(&s.hits[i]), 1),
                          "threads %d, n %lld: index %lld ran %d times", t, (long long)n,
                          (long long)i, atomic_load(&s.hits[i]));
            const int want = n < t ? (int)n : t;
            cr_assert(eq(int, distinct_threads(&s, n), want), "threads %d, n %lld", t,
                      (long long)n);
            /* inside a parallel call a nested one would be serial (1 thread);
             * a call that ran serially leaves the team to the body */
            const bool par = n >= 2 && t >= 2;
            cr_assert(eq(int, atomic_load(&s.nested_threads), par ? want : t));
            cr_assert(eq(int, atomic_load(&s.nested_flag), par ? want : 0));
        }
    }
    cr_assert(not(tg__in_parallel()));
    tg__pool_set_patience(patience);
}

Test(parallel, range_not_parallel_runs_on_the_caller)
{
    cr_assert(eq(int, tg_set_num_threads(4), TG_OK));
    static seen_t s;
    memset(&s, 0, sizeof s);
    tg__parallel_range(1000, false, record, &s);
    cr_assert(eq(int, distinct_threads(&s, 1000), 1));
    cr_assert(pthread_equal(s.who[0], pthread_self()));
}

/* A body that makes a nested parallel call for its own range. */
static void nest_outer(void *p, int64_t lo, int64_t hi)
{
    seen_t *s = p;
    /* the nested call covers [0, hi - lo) and writes who[lo + i] */
    for (int64_t i = lo; i < hi; i++) s->who[i] = (pthread_t)0;
    pthread_t me = pthread_self();
    static _Thread_local seen_t inner;
    memset(&inner, 0, sizeof inner);
    tg__parallel_range(hi - lo, true, record, &inner);
    for (int64_t i = 0; i < hi - lo; i++) {
        atomic_fetch_add(&s->hits[lo + i], atomic_load(&inner.hits[i]));
        if (!pthread_equal(inner.who[i], me)) atomic_fetch_add(&s->nested_flag, 1000);
    }
}

Test(parallel, nested_calls_run_serially_on_the_calling_thread)
{
    cr_assert(eq(int, tg_set_num_threads(2), TG_OK));
    static seen_t s;
    memset(&s, 0, sizeof s);
    tg__parallel_range(400, true, nest_outer, &s);
    for (int64_t i = 0; i < 400; i++) cr_assert(eq(int, atomic_load(&s.hits[i]), 1));
    cr_assert(eq(int, atomic_load(&s.nested_flag), 0), "a nested call left its thread");
}

typedef struct {
    atomic_int ran[MAXN];
    atomic_bool worker_ran;
    pthread_t caller;
} tasks_t;

/* Fails on the first task a worker runs, with a message set on that worker;
 * the caller's tasks wait (up to 5 s) until a worker has run one. */
static int fail_on_worker(void *p, int64_t i)
{
    tasks_t *t = p;
    atomic_fetch_add(&t->ran[i], 1);
    if (!pthread_equal(pthread_self(), t->caller)) {
        if (!atomic_exchange(&t->worker_ran, true))
            return tg_error_set(TG_EIO, "task %lld failed on a worker", (long long)i);
        return TG_OK;
    }
    for (int k = 0; k < 5000 && !atomic_load(&t->worker_ran); k++) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    return TG_OK;
}

Test(parallel, a_workers_error_and_message_reach_the_caller)
{
    cr_assert(eq(int, tg_set_num_threads(2), TG_OK));
    static tasks_t t;
    memset(&t, 0, sizeof t);
    t.caller = pthread_self();
    tg_error_set(TG_EINVAL, "stale message");
    const int rc = tg__run_tasks(MAXN, true, fail_on_worker, &t);
    cr_assert(eq(int, rc, TG_EIO));
    cr_assert(atomic_load(&t.worker_ran));
    cr_assert(strstr(tg_error_message(), "failed on a worker") != NULL, "message: %s",
              tg_error_message());
    /* tasks not started after the failure are skipped, none runs twice */
    int total = 0;
    for (int i = 0; i < MAXN; i++) {
        cr_assert(atomic_load(&t.ran[i]) <= 1);
        total += atomic_load(&t.ran[i]);
    }
    cr_assert(total < MAXN, "all %d tasks ran after a failure", total);
}

static int count_task(void *p, int64_t i)
{
    tasks_t *t = p;
    atomic_fetch_add(&t->ran[i], 1);
    return TG_OK;
}

Test(parallel, tasks_run_once_each_for_any_thread_count)
{
    for (int th = 1; th <= 3; th++) {
        cr_assert(eq(int, tg_set_num_threads(th), TG_OK));
        for (int64_t n = 0; n < 40; n += 13) {
            static tasks_t t;
            memset(&t, 0, sizeof t);
            cr_assert(eq(int, tg__run_tasks(n, true, count_task, &t), TG_OK));
            for (int64_t i = 0; i < 40; i++)
                cr_assert(eq(int, atomic_load(&t.ran[i]), i < n ? 1 : 0));
        }
    }
}

/* A range body that only counts: no time for a late worker to catch up. */
static void count_range(void *p, int64_t lo, int64_t hi)
{
    seen_t *s = p;
    for (int64_t i = lo; i < hi; i++) atomic_fetch_add(&s->hits[i], 1);
}

/* Workers that come late (more threads than CPUs, so they sleep between
 * calls, and a patience of 20 us): over many calls each share still runs
 * exactly once, whether its worker, the caller or a worker still waking
 * from an earlier call takes it.  A worker takes at most one ticket of a
 * call: with two it would run its own share twice and leave another's. */
Test(parallel, late_workers_neither_lose_nor_repeat_a_share)
{
    const int64_t patience = tg__pool_set_patience(20000);
    static seen_t s;
    for (int t = 3; t <= 6; t++) {
        cr_assert(eq(int, tg_set_num_threads(t), TG_OK));
        for (int r = 0; r < 2000; r++) {
            memset(s.hits, 0, sizeof s.hits);
            tg__parallel_range(64, true, count_range, &s);
            for (int64_t i = 0; i < 64; i++)
                cr_assert(eq(int, atomic_load(&s.hits[i]), 1), "threads %d, call %d: index %lld", t,
                          r, (long long)i);
        }
    }
    tg__pool_set_patience(patience);
}

/* Two application threads calling at once: one gets the team, the other runs
 * serially; both results are whole. */
static void *caller_thread(void *p)
{
    seen_t *s = p;
    for (int r = 0; r < 50; r++) {
        memset(s->hits, 0, sizeof s->hits);
        tg__parallel_range(2000, true, record, s);
        for (int64_t i = 0; i < 2000; i++)
            if (atomic_load(&s->hits[i]) != 1) return (void *)1;
    }
    return NULL;
}

Test(parallel, two_application_threads_at_once)
{
    cr_assert(eq(int, tg_set_num_threads(2), TG_OK));
    static seen_t a, b;
    pthread_t ta, tb;
    cr_assert(eq(int, pthread_create(&ta, NULL, caller_thread, &a), 0));
    cr_assert(eq(int, pthread_create(&tb, NULL, caller_thread, &b), 0));
    void *ra, *rb;
    pthread_join(ta, &ra);
    pthread_join(tb, &rb);
    cr_assert(ra == NULL && rb == NULL, "an index was missed or run twice");
}

/* The parent's worker has run a share before the fork: a thread still
 * starting may hold a lock of the C library or a sanitizer's that the
 * child, whose copy of it nobody will release, would wait for forever. */
Test(parallel, a_forked_child_gets_its_own_team)
{
    cr_assert(eq(int, tg_set_num_threads(2), TG_OK));
    static seen_t s;
    const int64_t patience = tg__pool_set_patience(-1);
    tg__parallel_range(100, true, record, &s);   /* the parent's worker exists and has run */
    tg__pool_set_patience(patience);
    cr_assert(eq(int, distinct_threads(&s, 100), 2));
    const pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        memset(&s, 0, sizeof s);
        tg__pool_set_patience(-1);   /* its new worker joins, however long it takes */
        tg__parallel_range(1000, true, record, &s);
        int ok = distinct_threads(&s, 1000) == 2;
        for (int64_t i = 0; i < 1000; i++) ok = ok && atomic_load(&s.hits[i]) == 1;
        _exit(ok ? 0 : 1);
    }
    /* a child that hangs is killed after 60 s, not left spinning */
    int st = 0;
    pid_t w = 0;
    for (int i = 0; i < 60000 && (w = waitpid(pid, &st, WNOHANG)) == 0; i++) {
        const struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    if (w == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
    }
    cr_assert(eq(int, w, pid), "the child did not finish in 60 s");
    const bool ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
    cr_assert(ok, "child status %d", st);
}

static void set_inside(void *p, int64_t lo, int64_t hi)
{
    (void)lo;
    (void)hi;
    atomic_int *rc = p;
    const int r = tg_set_num_threads(3);
    if (r != TG_OK) atomic_store(rc, r);
}

Test(parallel, set_num_threads_refuses_bad_counts_and_inner_calls)
{
    cr_assert(eq(int, tg_set_num_threads(3), TG_OK));
    const int bad[] = {0, -1, 257, -2147483647 - 1};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        cr_assert(eq(int, tg_set_num_threads(bad[i]), TG_EINVAL));
        th_expect_in(tg_error_message(), "must be in [1, 256]");
        cr_assert(eq(int, tg_get_num_threads(), 3), "a refused count changed the setting");
    }
    atomic_int rc = TG_OK;
    cr_assert(eq(int, tg_set_num_threads(2), TG_OK));
    tg__parallel_range(2, true, set_inside, &rc);
    cr_assert(eq(int, atomic_load(&rc), TG_EINVAL));
    cr_assert(eq(int, tg_get_num_threads(), 2));
}

Test(parallel, thread_counts_from_the_environment)
{
    cr_assert(eq(int, tg__parse_threads("3"), 3));
    cr_assert(eq(int, tg__parse_threads("4,2"), 4));
    cr_assert(eq(int, tg__parse_threads("100000"), 256));
    cr_assert(eq(int, tg__parse_threads("99999999999999999999999"), 256));
    cr_assert(eq(int, tg__parse_threads("0"), 0));
    cr_assert(eq(int, tg__parse_threads("-2"), 0));
    cr_assert(eq(int, tg__parse_threads(" 2"), 0));
    cr_assert(eq(int, tg__parse_threads("2x"), 0));
    cr_assert(eq(int, tg__parse_threads(""), 0));
    cr_assert(eq(int, tg__parse_threads(NULL), 0));
}

static pthread_t signalled_on;
static volatile sig_atomic_t signalled;

static void on_usr1(int sig)
{
    (void)sig;
    signalled_on = pthread_self();
    signalled = 1;
}

Test(parallel, signals_go_to_the_programs_threads_not_the_workers)
{
    cr_assert(eq(int, tg_set_num_threads(4), TG_OK));
    static seen_t s;
    tg__parallel_range(100, true, record, &s);   /* the workers exist */
    struct sigaction sa = {0}, old;
    sa.sa_handler = on_usr1;
    sigemptyset(&sa.sa_mask);
    cr_assert(eq(int, sigaction(SIGUSR1, &sa, &old), 0));
    for (int r = 0; r < 20; r++) {
        signalled = 0;
        cr_assert(eq(int, kill(getpid(), SIGUSR1), 0));
        for (int k = 0; k < 1000 && !signalled; k++) {
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
        cr_assert(signalled);
        cr_assert(pthread_equal(signalled_on, pthread_self()), "SIGUSR1 ran on a worker");
    }
    sigaction(SIGUSR1, &old, NULL);
}

/* src/core/blas.c: where OpenBLAS fell back to its SSE3 kernels (Prescott)
 * on a CPU with AVX2 + FMA or AVX-512, tapegrad selects Haswell or SkylakeX
 * at load (unless OPENBLAS_CORETYPE is set), and the GEMMs that follow are
 * still right. */
Test(parallel, blas_kernels_fit_the_cpu_and_compute_right)
{
    const char *core = tg_blas_core();
    cr_assert(core != NULL && core[0] != '\0');
    cr_assert(eq(str, (char *)core, (char *)tg__blas_core()));
#if defined(__x86_64__)
    if (!getenv("OPENBLAS_CORETYPE") && __builtin_cpu_supports("avx2") &&
        __builtin_cpu_supports("fma"))
        cr_assert(strcasecmp(core, "Prescott") != 0,
                  "OpenBLAS runs its SSE3 kernels on a CPU with AVX2 and FMA");
#endif
    enum { M = 37, K = 53, N = 70 };
    tg_tensor *a, *b, *c;
    cr_assert(eq(int, tg_tensor_zeros(&a, TG_F32, 2, (int64_t[]){M, K}), TG_OK));
    cr_assert(eq(int, tg_tensor_zeros(&b, TG_F32, 2, (int64_t[]){K, N}), TG_OK));
    float *pa = tg_tensor_data(a), *pb = tg_tensor_data(b);
    for (int i = 0; i < M * K; i++) pa[i] = (float)((i * 7) % 19 - 9) / 8.0f;
    for (int i = 0; i < K * N; i++) pb[i] = (float)((i * 5) % 17 - 8) / 4.0f;
    cr_assert(eq(int, tg_matmul(&c, a, b), TG_OK));
    const float *pc = tg_tensor_cdata(c);
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;   /* exact: small multiples of 1/32 */
            for (int t = 0; t < K; t++) s += (double)pa[i * K + t] * pb[t * N + j];
            cr_assert(eq(dbl, (double)pc[i * N + j], s), "c[%d][%d] (core %s)", i, j, core);
        }
    tg_tensor_release(a), tg_tensor_release(b), tg_tensor_release(c);
}

/* A worker that cannot join (held back, as one without a CPU): the caller
 * runs its share itself once the patience is spent and returns without it,
 * every index once; a task call does not wait for it at all.  The held
 * worker, let go, finds no ticket, and the next calls share the work again.
 * The call runs on a thread of the test's, so that a caller waiting for the
 * held worker shows as a call not done in 10 s, not as a hung test. */
typedef struct {
    seen_t s;
    tasks_t t;
    atomic_int done;
} held_call;

static void *held_caller(void *p)
{
    held_call *c = p;
    tg__parallel_range(1000, true, record, &c->s);
    tg__run_tasks(40, true, count_task, &c->t);
    atomic_store(&c->done, 1);
    return NULL;
}

Test(parallel, a_worker_that_cannot_join_is_not_waited_for)
{
    cr_assert(eq(int, tg_set_num_threads(2), TG_OK));
    static seen_t warm;
    tg__parallel_range(100, true, record, &warm);   /* the worker exists */
    const int64_t patience = tg__pool_set_patience(1000000);   /* 1 ms */
    static held_call c;
    memset(&c, 0, sizeof c);
    tg__pool_hold(true);
    pthread_t th;
    cr_assert(eq(int, pthread_create(&th, NULL, held_caller, &c), 0));
    for (int i = 0; i < 10000 && !atomic_load(&c.done); i++) {
        const struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    const int done = atomic_load(&c.done);
    tg__pool_hold(false);   /* a waiting caller finishes now: the join below returns */
    cr_assert(eq(int, pthread_join(th, NULL), 0));
    cr_assert(eq(int, done, 1), "the call waited for a worker that could not join");
    for (int64_t i = 0; i < 1000; i++)
        cr_assert(eq(int, atomic_load(&c.s.hits[i]), 1), "index %lld", (long long)i);
    cr_assert(eq(int, distinct_threads(&c.s, 1000), 1));
    for (int64_t i = 0; i < 40; i++) cr_assert(eq(int, atomic_load(&c.t.ran[i]), 1));
    tg__pool_set_patience(-1);
    static seen_t after;
    for (int r = 0; r < 3; r++) {
        memset(&after, 0, sizeof after);
        tg__parallel_range(1000, true, record, &after);
        for (int64_t i = 0; i < 1000; i++) cr_assert(eq(int, atomic_load(&after.hits[i]), 1));
        cr_assert(eq(int, distinct_threads(&after, 1000), 2), "round %d", r);
    }
    tg__pool_set_patience(patience);
}
