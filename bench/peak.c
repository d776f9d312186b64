/* bench/peak.c - bench/peak.h: peak rates of the multiply instructions that
 * the GEMM kernels are built on, measured on this machine. */
#include "peak.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tapegrad/tapegrad.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define X86 1
#else
#define X86 0
#endif

/* The calling thread's CPU time: a loop on registers runs at the same rate
 * whenever the thread runs, so time that another process takes the core
 * does not lower the figure (a wall-clock rate on a busy host comes out
 * under what the GEMMs reach). */
static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The loops: 12 chains, each one register, so that the instruction's
 * latency (4-6 cycles) is covered twice over at two a cycle; the empty asm
 * keeps the compiler from folding or reordering them away.  Each returns
 * the instructions it ran per second. */
#define CHAINS(T, init) T a0 = init, a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, \
                        a7 = a0, a8 = a0, a9 = a0, a10 = a0, a11 = a0
#define STEP(f)                                                                           \
    do {                                                                                  \
        a0 = f(a0); a1 = f(a1); a2 = f(a2); a3 = f(a3); a4 = f(a4); a5 = f(a5);           \
        a6 = f(a6); a7 = f(a7); a8 = f(a8); a9 = f(a9); a10 = f(a10); a11 = f(a11);       \
        __asm__ volatile("" : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3), "+v"(a4), "+v"(a5), \
                         "+v"(a6), "+v"(a7), "+v"(a8), "+v"(a9), "+v"(a10), "+v"(a11));  \
    } while (0)
#define KEEP()                                                                            \
    __asm__ volatile("" ::"v"(a0), "v"(a1), "v"(a2), "v"(a3), "v"(a4), "v"(a5), "v"(a6),  \
                     "v"(a7), "v"(a8), "v"(a9), "v"(a10), "v"(a11))

#if X86
#define LOOP(name, isa, T, init, f)                                  \
    __attribute__((target(isa))) static double name(long n)          \
    {                                                                \
        CHAINS(T, init);                                             \
        const double t = cpu_now();                                  \
        for (long i = 0; i < n; i++) STEP(f);                        \
        const double dt = cpu_now() - t;                             \
        KEEP();                                                      \
        return 12.0 * (double)n / dt;                                \
    }

#define FMA_Y(a) _mm256_fmadd_ps(a, _mm256_set1_ps(1.0f), _mm256_set1_ps(1e-9f))
#define FMA_Z(a) _mm512_fmadd_ps(a, _mm512_set1_ps(1.0f), _mm512_set1_ps(1e-9f))
#define DPBF16(a) _mm512_dpbf16_ps(a, (__m512bh)_mm512_set1_epi16(0x3f80), \
                                   (__m512bh)_mm512_set1_epi16(0x3f80))
#define DPBUSD(a) _mm512_dpbusd_epi32(a, _mm512_set1_epi8(1), _mm512_set1_epi8(1))
#define MADDWD(a) _mm256_madd_epi16(a, _mm256_set1_epi16(1))
LOOP(run_fma_ymm, "avx2,fma", __m256, _mm256_set1_ps(1e-3f), FMA_Y)
LOOP(run_fma_zmm, "avx512f", __m512, _mm512_set1_ps(1e-3f), FMA_Z)
LOOP(run_dpbf16, "avx512f,avx512bf16", __m512, _mm512_set1_ps(1e-3f), DPBF16)
LOOP(run_dpbusd, "avx512f,avx512vnni", __m512i, _mm512_set1_epi32(1), DPBUSD)
LOOP(run_maddwd, "avx2", __m256i, _mm256_set1_epi16(1), MADDWD)

static bool has_fma_ymm(void) { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }
static bool has_fma_zmm(void) { return __builtin_cpu_supports("avx512f"); }
static bool has_dpbf16(void) { return __builtin_cpu_supports("avx512bf16"); }
static bool has_dpbusd(void) { return __builtin_cpu_supports("avx512vnni"); }
static bool has_maddwd(void) { return __builtin_cpu_supports("avx2"); }
#endif
static bool has_amx_bf16(void) { return tg_bf16_kernel_available(TG_BF16_KERNEL_AMX); }
static bool has_amx_int8(void) { return tg_int8_kernel_available(TG_INT8_KERNEL_AMX); }

typedef struct entry {
    const char *name;
    int products;
    bool (*has)(void);
    double (*run)(long n);   /* NULL: derived from the clock, one per 16 cycles */
} entry;

static const entry entries[] = {
#if X86
    {"vfmadd231ps ymm", 8, has_fma_ymm, run_fma_ymm},
    {"vfmadd231ps zmm", 16, has_fma_zmm, run_fma_zmm},
    {"vdpbf16ps zmm", 32, has_dpbf16, run_dpbf16},
    {"vpdpbusd zmm", 64, has_dpbusd, run_dpbusd},
    {"vpmaddwd ymm", 16, has_maddwd, run_maddwd},
#endif
    {"tdpbf16ps", 16 * 16 * 32, has_amx_bf16, NULL},
    {"tdpbusd", 16 * 16 * 64, has_amx_int8, NULL},
};

int bench_peak_count(void) { return (int)(sizeof entries / sizeof *entries); }

/* Instructions a second of the thread's CPU time: a short calibration run,
 * then the best of RUNS runs sharing `seconds` (a run slowed by another
 * process on the core's caches or clock counts less). */
static double timed(double (*run)(long), double seconds)
{
    const double rate = run(100000);
    enum { RUNS = 9 };
    const long n = (long)(rate * seconds / RUNS / 12.0);
    double best = 0;
    for (int r = 0; r < RUNS; r++) {
        const double v = run(n > 1000 ? n : 1000);
        if (v > best) best = v;
    }
    return best;
}

typedef struct job {
    double (*run)(long);
    double seconds, rate;
    pthread_barrier_t *start;
} job;

static void *job_main(void *p)
{
    job *j = p;
    pthread_barrier_wait(j->start);
    j->rate = timed(j->run, j->seconds);
    return NULL;
}

/* The summed rate of run on `threads` threads started together. */
static double on_threads(double (*run)(long), int threads, double seconds)
{
    enum { MAX = 256 };
    if (threads < 1) threads = 1;
    if (threads > MAX) threads = MAX;
    pthread_t tid[MAX];
    job jobs[MAX];
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)threads);
    for (int t = 0; t < threads; t++) {
        jobs[t] = (job){.run = run, .seconds = seconds, .start = &start};
        /* the threads started so far wait for all at the barrier: a measure
         * on fewer threads than asked would be a wrong figure */
        if (t > 0 && pthread_create(&tid[t], NULL, job_main, &jobs[t]) != 0) {
            fprintf(stderr, "peak: cannot start thread %d of %d\n", t + 1, threads);
            exit(1);
        }
    }
    job_main(&jobs[0]);
    double sum = jobs[0].rate;
    for (int t = 1; t < threads; t++) {
        pthread_join(tid[t], NULL);
        sum += jobs[t].rate;
    }
    pthread_barrier_destroy(&start);
    return sum;
}

/* A chain of dependent adds: one a cycle, whatever the core. */
#if X86
static double run_adds(long n)
{
    unsigned long x = 0;
    const double t = cpu_now();
    for (long i = 0; i < n; i++)
        __asm__ volatile("add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
                         "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
                         "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0"
                         : "+r"(x));
    return 12.0 * (double)n / (cpu_now() - t);
}
#else
static double run_adds(long n)
{
    (void)n;
    return 0;
}
#endif

double bench_peak_ghz(double seconds) { return timed(run_adds, seconds) / 1e9; }

bench_peak bench_peak_measure(int i, int threads, double seconds)
{
    const entry *e = &entries[i];
    bench_peak r = {.instruction = e->name, .products = e->products, .derived = !e->run};
    if (!e->has()) return r;
    const double per_s = e->run ? on_threads(e->run, threads, seconds)
                                : threads * bench_peak_ghz(seconds) * 1e9 / 16;
    r.gops = per_s * e->products * 2 / 1e9;
    return r;
}

double bench_peak_of(const char *instruction, int threads, double seconds)
{
    for (int i = 0; i < bench_peak_count(); i++)
        if (strcmp(entries[i].name, instruction) == 0)
            return bench_peak_measure(i, threads, seconds).gops;
    return 0;
}
