/* src/core/gemm_small.c - C = A B + beta C for products of a few hundred
 * multiply-adds, where a call of OpenBLAS costs more than the arithmetic:
 * its GEMM and LAPACK interfaces take a global lock each call to allocate
 * their buffer (linalg.solve's forward and backward on 4096 matrices of
 * 4 x 4 spent 31% of its time taking and releasing it), and two threads
 * calling at once wait on each other.  PyTorch's bmm multiplies such
 * products with plain loops too.
 *
 * Each element of C is one chain of multiply-adds over k in order from 0,
 * with fused multiply-adds where the CPU has them and TG_MAX_ISA allows
 * AVX2, else a multiply then an add; within the usual bound of a dot
 * product of OpenBLAS's result, not bit for bit (OpenBLAS splits the sum
 * among its kernel's accumulators).  Every product of one shape takes one
 * path, so results do not depend on the thread count. */
#include <stdatomic.h>

#include "core/core.h"

/* Blocks of C of 2 rows x 4 columns, each element one chain over p in
 * order kept in registers (eight independent chains hide the latency of
 * the multiply-add), then the last row and the last columns one element a
 * chain.  B's transpose is packed into bt first (k n <= TG__GEMM_SMALL_MAX)
 * so that a block reads four neighbouring values of B. */
#define SMALL_FN(name, T, MULADD)                                                              \
    static ATTR void name(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T *a,      \
                          int64_t lda, const T *b, int64_t ldb, T beta, T *c, int64_t ldc)     \
    {                                                                                          \
        T bt[TG__GEMM_SMALL_MAX];                                                              \
        const int64_t as = ta ? 1 : lda, ak = ta ? lda : 1;                                    \
        if (tb) {                                                                              \
            for (int64_t p = 0; p < k; p++)                                                    \
                for (int64_t j = 0; j < n; j++) bt[p * n + j] = b[j * ldb + p];                \
            b = bt;                                                                            \
            ldb = n;                                                                           \
        }                                                                                      \
        const int64_t m2 = m / 2 * 2, n4 = n / 4 * 4;                                          \
        for (int64_t i = 0; i < m2; i += 2)                                                    \
            for (int64_t j = 0; j < n4; j += 4) {                                              \
                T r0[4] = {0, 0, 0, 0}, r1[4] = {0, 0, 0, 0};                                  \
                for (int64_t p = 0; p < k; p++) {                                              \
                    const T x0 = a[i * as + p * ak], x1 = a[(i + 1) * as + p * ak];            \
                    const T *bp = b + p * ldb + j;                                             \
                    for (int q = 0; q < 4; q++) {                                              \
                        r0[q] = MULADD(x0, bp[q], r0[q]);                                      \
                        r1[q] = MULADD(x1, bp[q], r1[q]);                                      \
                    }                                                                          \
                }                                                                              \
                for (int q = 0; q < 4; q++) {                                                  \
                    T *c0 = c + i * ldc + j + q, *c1 = c0 + ldc;                               \
                    *c0 = beta == 0 ? r0[q] : beta * *c0 + r0[q];                              \
                    *c1 = beta == 0 ? r1[q] : beta * *c1 + r1[q];                              \
                }                                                                              \
            }                                                                                  \
        for (int64_t i = 0; i < m; i++)                                                        \
            for (int64_t j = i < m2 ? n4 : 0; j < n; j++) {                                    \
                T acc = 0;                                                                     \
                for (int64_t p = 0; p < k; p++)                                                \
                    acc = MULADD(a[i * as + p * ak], b[p * ldb + j], acc);                     \
                T *cij = c + i * ldc + j;                                                      \
                *cij = beta == 0 ? acc : beta * *cij + acc;                                    \
            }                                                                                  \
    }

#define PLAIN(x, y, acc) ((acc) + (x) * (y))
#define ATTR
SMALL_FN(small_f32, float, PLAIN)
SMALL_FN(small_f64, double, PLAIN)
#undef ATTR

#if defined(__x86_64__) || defined(__i386__)
#define ATTR __attribute__((target("avx2,fma")))
SMALL_FN(small_f32_fma, float, __builtin_fmaf)
SMALL_FN(small_f64_fma, double, __builtin_fma)
#undef ATTR

static bool use_fma(void)
{
    static atomic_int has = -1;   /* a race stores the same value */
    int h = atomic_load_explicit(&has, memory_order_relaxed);
    if (h < 0) {
        __builtin_cpu_init();
        h = __builtin_cpu_supports("fma") && __builtin_cpu_supports("avx2");
        atomic_store_explicit(&has, h, memory_order_relaxed);
    }
    return h && tg__isa_allows(TG__ISA_AVX2);
}
#else
#define small_f32_fma small_f32
#define small_f64_fma small_f64
static bool use_fma(void) { return false; }
#endif

bool tg__gemm_small_pays(int64_t m, int64_t n, int64_t k)
{
    return m * n * (k > 0 ? k : 1) <= TG__GEMM_SMALL_MAX;
}

void tg__gemm_small(tg_dtype ct, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                    const void *a, int64_t lda, const void *b, int64_t ldb, double beta, void *c,
                    int64_t ldc)
{
    const bool fma = use_fma();
    if (ct == TG_F64)
        (fma ? small_f64_fma : small_f64)(ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc);
    else
        (fma ? small_f32_fma : small_f32)(ta, tb, m, n, k, a, lda, b, ldb, (float)beta, c, ldc);
}
