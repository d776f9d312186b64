/* src/core/blas.c - tapegrad and OpenBLAS: OpenBLAS's kernels on a CPU that
 * OpenBLAS does not know, OpenBLAS's own thread pool kept out of the way of
 * tapegrad's, and the GEMM on tapegrad's pool.
 *
 * Debian's OpenBLAS is built for many CPUs at once (DYNAMIC_ARCH) and picks
 * its kernels from the CPU's family and model when it is loaded.  A model
 * newer than the library falls back to "Prescott", its SSE3 kernels: on an
 * Intel Xeon of family 6, model 207 (Emerald Rapids), Debian 12's OpenBLAS
 * 0.3.21 does so, and sgemm runs at 27 GFLOP/s on one core where its
 * AVX-512 kernels ("SkylakeX") run at 145 (docs/performance.md).
 *
 * So when the library is loaded, before main: if OpenBLAS chose Prescott,
 * OPENBLAS_CORETYPE is not set, and the CPU (with the OS, which
 * __builtin_cpu_supports checks through XGETBV) runs AVX-512 (F, CD, BW, DQ,
 * VL) or AVX2 with FMA, tapegrad asks OpenBLAS for SkylakeX or Haswell
 * through OpenBLAS's own selection: gotoblas_dynamic_quit(), then
 * gotoblas_dynamic_init() with OPENBLAS_CORETYPE set for that call (and
 * removed after, so the environment is left as it was).  Those two functions
 * exist only in DYNAMIC_ARCH builds; they are weak references here, so with
 * any other BLAS nothing happens.  Setting OPENBLAS_CORETYPE yourself (even
 * to Prescott) turns this off.
 *
 * A constructor, not a lazy call, because a process's environment and
 * OpenBLAS's kernel table must not change while other threads may use them
 * (a program that dlopen()s tapegrad while its threads call OpenBLAS should
 * set OPENBLAS_CORETYPE itself).
 * tg__blas_core() is what the GEMM wrappers call, so a program linked with
 * the static library keeps this object (and so its constructor).
 *
 * OpenBLAS's own threads: its pthread build starts a pool when it is
 * loaded, and each worker spins (sched_yield) for about 2^28 cycles, 0.1-0.2
 * s, before it sleeps; it starts the pool again on openblas_set_num_threads
 * after the pool was stopped (as it is before a fork).  tapegrad runs its
 * OpenBLAS calls single-threaded on its own pool (all but the few large ones
 * of the FID statistics, src/metrics/frechet.c, which start OpenBLAS's pool
 * themselves), so those workers only take CPUs from tapegrad's threads: an
 * int8 layer timed over its first 20 calls took 5.0-5.7 ms instead of
 * 2.8-3.0 in about half the processes on 2 CPUs.
 * So a second constructor stops OpenBLAS's pool (blas_thread_shutdown_,
 * which OpenBLAS itself calls before a fork) when its workers are the only
 * threads besides this one, as when a program starts, so that nobody can be
 * inside an OpenBLAS call; and while the pool is stopped, the switch to one
 * thread and back below writes OpenBLAS's thread count
 * (blas_cpu_number) instead of calling openblas_set_num_threads, which would
 * start it.  OpenBLAS's thread count is left as it was, so a program's own
 * multi-threaded OpenBLAS call starts the pool as after a fork.  Only for
 * OpenBLAS's pthread build (openblas_get_parallel() == 1), through weak
 * references; anything else is left alone.
 *
 * Below that, the GEMM every kernel of the library runs: on tapegrad's own
 * thread pool, with OpenBLAS set to one thread meanwhile, so OpenBLAS's pool
 * never spins next to ours on the same cores. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#ifdef __linux__
#include <dirent.h>
#endif

#include <cblas.h>

#include "core/core.h"

extern void gotoblas_dynamic_init(void) __attribute__((weak));
extern void gotoblas_dynamic_quit(void) __attribute__((weak));

/* The OpenBLAS core name worth asking for on this CPU, or NULL. */
static const char *better_core(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vl"))
        return "SkylakeX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
#endif
    return NULL;
}

static const char *openblas_core(void)
{
    const char *name = openblas_get_corename();
    return name ? name : "unknown";
}

__attribute__((constructor)) static void blas_pick_core(void)
{
    if (!gotoblas_dynamic_init || !gotoblas_dynamic_quit) return;   /* not DYNAMIC_ARCH */
    if (getenv("OPENBLAS_CORETYPE") || strcasecmp(openblas_core(), "Prescott") != 0) return;
    const char *want = better_core();
    if (!want || setenv("OPENBLAS_CORETYPE", want, 0) != 0) return;
    gotoblas_dynamic_quit();
    gotoblas_dynamic_init();
    unsetenv("OPENBLAS_CORETYPE");
}

/* OpenBLAS's pool (pthread builds): its size, the caller counted; the
 * threads its next call uses; whether the pool runs; and its shutdown. */
extern int blas_num_threads __attribute__((weak));
extern int blas_cpu_number __attribute__((weak));
extern int blas_server_avail __attribute__((weak));
extern int blas_thread_shutdown_(void) __attribute__((weak));

static bool pthread_pool(void)
{
    return blas_thread_shutdown_ && &blas_num_threads && &blas_cpu_number && &blas_server_avail &&
           openblas_get_parallel() == 1;
}

/* The threads of this process, or -1 if that cannot be read. */
static int process_threads(void)
{
#ifdef __linux__
    DIR *d = opendir("/proc/self/task");
    if (!d) return -1;
    int n = 0;
    for (const struct dirent *e; (e = readdir(d)) != NULL;)
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n;
#else
    return -1;
#endif
}

__attribute__((constructor)) static void blas_stop_pool(void)
{
    if (!pthread_pool() || !blas_server_avail || blas_num_threads < 2) return;
    if (process_threads() != blas_num_threads) return;   /* others may be calling OpenBLAS */
    blas_thread_shutdown_();
}

/* OpenBLAS's thread count for its next calls, without starting its pool. */
static void blas_threads_set(int n)
{
    /* atomic: two application threads may switch at once (OpenBLAS's own
     * openblas_set_num_threads writes it plainly, unseen by sanitizers) */
    if (pthread_pool() && !__atomic_load_n(&blas_server_avail, __ATOMIC_RELAXED))
        __atomic_store_n(&blas_cpu_number, n, __ATOMIC_RELAXED);
    else
        openblas_set_num_threads(n);
}

const char *tg__blas_core(void) { return openblas_core(); }

const char *tg_blas_core(void) { return tg__blas_core(); }

/* ---- GEMM on tapegrad's thread pool ---- */

int tg__blas_single_begin(void)
{
    (void)tg__blas_core();   /* keeps this object, and so its constructor, linked */
    const int n = openblas_get_num_threads();
    if (n != 1) blas_threads_set(1);
    return n;
}

void tg__blas_restore(int n)
{
    if (n != 1) blas_threads_set(n);
}

/* One GEMM cut along the longer side of C: slices [s0, s1) of w rows (or
 * columns) each. */
typedef struct gemm_slices {
    tg_dtype dt;           /* TG_F32 or TG_F64 */
    tg_bf16_kernel bf16;   /* AVX512 or AMX: f32 operands holding bf16 values */
    bool ta, tb, rows;
    int64_t m, n, k, lda, ldb, ldc, w, len;
    const void *a, *b;
    double beta;
    void *c;
    const tg__bf16_panels *pa, *pb;   /* bf16: packed operands, or NULL */
    bool a_bits, b_bits;              /* bf16: a (b) holds bf16 bits, not f32 */
} gemm_slices;

/* The element offset of row (or column) j0 of C's slice in A, B and C. */
static void slice_offsets(const gemm_slices *q, int64_t j0, int64_t *oa, int64_t *ob,
                          int64_t *oc)
{
    *oa = q->rows ? (q->ta ? j0 : j0 * q->lda) : 0;
    *ob = q->rows ? 0 : (q->tb ? j0 * q->ldb : j0);
    *oc = q->rows ? j0 * q->ldc : j0;
}

static void gemm_slice(void *p, int64_t s0, int64_t s1)
{
    const gemm_slices *q = p;
    const enum CBLAS_TRANSPOSE ta = q->ta ? CblasTrans : CblasNoTrans,
                               tb = q->tb ? CblasTrans : CblasNoTrans;
    for (int64_t si = s0; si < s1; si++) {
        const int64_t j0 = si * q->w, nj = j0 + q->w <= q->len ? q->w : q->len - j0;
        const int64_t m = q->rows ? nj : q->m, n = q->rows ? q->n : nj;
        int64_t oa, ob, oc;
        slice_offsets(q, j0, &oa, &ob, &oc);
        if (q->dt == TG_F64) {
            const double *a = q->a, *b = q->b;
            cblas_dgemm(CblasRowMajor, ta, tb, (int)m, (int)n, (int)q->k, 1, a + oa, (int)q->lda,
                        b + ob, (int)q->ldb, q->beta, (double *)q->c + oc, (int)q->ldc);
            continue;
        }
        const float *a = q->a, *b = q->b;
        float *c = (float *)q->c + oc;
        if (q->bf16 > TG_BF16_KERNEL_PORTABLE) {   /* a or b may be NULL: from panels */
            const size_t ea = q->a_bits ? sizeof(uint16_t) : sizeof(float),
                         eb = q->b_bits ? sizeof(uint16_t) : sizeof(float);
            tg__gemm_bf16_bits(q->bf16, q->ta, q->tb, m, n, q->k,
                               a ? (const char *)q->a + (size_t)oa * ea : NULL, q->a_bits, q->lda,
                               b ? (const char *)q->b + (size_t)ob * eb : NULL, q->b_bits, q->ldb,
                               (float)q->beta, c, q->ldc, q->pa, q->rows ? j0 : 0, q->pb,
                               q->rows ? 0 : j0);
        } else
            cblas_sgemm(CblasRowMajor, ta, tb, (int)m, (int)n, (int)q->k, 1, a + oa, (int)q->lda,
                        b + ob, (int)q->ldb, (float)q->beta, c, (int)q->ldc);
    }
}

/* Runs q cut into one slice per thread, each a multiple of `unit` wide. */
static void run_slices(gemm_slices *q, int64_t unit)
{
    const int64_t nt = tg_get_num_threads();
    q->rows = q->m > q->n;
    q->len = q->rows ? q->m : q->n;   /* slice C's rows (and A) rather than its columns (and B) */
    q->w = (q->len + nt - 1) / nt;
    q->w = (q->w + unit - 1) / unit * unit;
    if (nt == 1 || q->m * q->n * q->k < ((int64_t)1 << 18)) q->w = q->len;
    tg__parallel_range((q->len + q->w - 1) / q->w, true, gemm_slice, q);
}

void tg__gemm_par(tg_dtype dt, tg_bf16_kernel bf16, bool ta, bool tb, int64_t m, int64_t n,
                  int64_t k, const void *a, int64_t lda, const void *b, int64_t ldb, double beta,
                  void *c, int64_t ldc)
{
    TG_ASSERT(dt == TG_F32 || (dt == TG_F64 && bf16 <= TG_BF16_KERNEL_PORTABLE));
    if (bf16 <= TG_BF16_KERNEL_PORTABLE && tg__gemm_small_pays(dt, m, n, k)) {
        /* every small product of the library on the same loops, whichever
         * entry point it comes through (the same bits for the same shape) */
        tg__gemm_small(dt, ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc);
        return;
    }
    gemm_slices q = {.dt = dt, .bf16 = bf16, .ta = ta, .tb = tb, .m = m, .n = n, .k = k,
                     .lda = lda, .ldb = ldb, .ldc = ldc, .a = a, .b = b, .beta = beta, .c = c};
    run_slices(&q, 16);   /* whole vector blocks per slice */
}

void tg__gemm_par_panels(tg_bf16_kernel bf16, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                         const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
                         float *c, int64_t ldc, const tg__bf16_panels *pa,
                         const tg__bf16_panels *pb)
{
    tg__gemm_par_bits(bf16, ta, tb, m, n, k, a, false, lda, b, false, ldb, beta, c, ldc, pa, pb);
}

void tg__gemm_par_bits(tg_bf16_kernel bf16, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                       const void *a, bool a_bits, int64_t lda, const void *b, bool b_bits,
                       int64_t ldb, float beta, float *c, int64_t ldc, const tg__bf16_panels *pa,
                       const tg__bf16_panels *pb)
{
    TG_ASSERT(bf16 > TG_BF16_KERNEL_PORTABLE || (!pa && !pb && !a_bits && !b_bits));
    gemm_slices q = {.dt = TG_F32, .bf16 = bf16, .ta = ta, .tb = tb, .m = m, .n = n, .k = k,
                     .lda = lda, .ldb = ldb, .ldc = ldc, .a = a, .b = b, .beta = beta, .c = c,
                     .pa = pa, .pb = pb, .a_bits = a_bits, .b_bits = b_bits};
    /* A slice of a packed operand starts at a whole panel: slices are whole
     * vector blocks and whole panels (48 rows for avx512's A panels of 12).
     * The bf16 kernels' bits do not depend on where C is cut. */
    const bool rows = m > n;
    int64_t unit = 16;
    if (rows ? pa != NULL : pb != NULL)
        while (unit % tg__bf16_panel_lines(bf16, !rows) != 0) unit += 16;
    run_slices(&q, unit);
}

bool tg__bf16_gemm_pays(int64_t m, int64_t n, int64_t k)
{
    (void)m;   /* a short A is as cheap for the kernels as for sgemm */
    return n >= 32 && k >= 32;
}

void tg__gemm(tg_dtype ct, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const void *a,
              int64_t lda, const void *b, int64_t ldb, double beta, void *c, int64_t ldc)
{
    TG_ASSERT(ct == TG_F32 || ct == TG_F64 || ct == TG_BF16);
    if (m <= 0 || n <= 0) return;
    const bool bf16 = ct == TG_BF16 && tg__bf16_gemm_pays(m, n, k);
    const int saved = tg__blas_single_begin();
    tg__gemm_par(ct == TG_F64 ? TG_F64 : TG_F32, bf16 ? tg_bf16_kernel_get() : TG_BF16_KERNEL_AUTO,
                 ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc);
    tg__blas_restore(saved);
}
