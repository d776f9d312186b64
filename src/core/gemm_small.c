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

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "core/core.h"

/* Products of up to MEDIUM_MAX multiply-adds with n at least one vector
 * go to the vector kernels below where the CPU has them (AVX2 and FMA, or
 * AVX-512): on a product of 16 x 16 x 16 OpenBLAS spends more on its lock,
 * its call and packing than on the arithmetic, and the pool's threads
 * would wait on its lock.  B's transpose, when B is given transposed, is
 * packed first: k n <= MEDIUM_PACK. */
#define MEDIUM_MAX 32768
#define MEDIUM_PACK 4096

/* B stored (n, k) copied into bt as (k, n), and b, ldb pointed at it. */
#define UNTRANSPOSE_B(bt, b, ldb, k, n)                                                        \
    do {                                                                                       \
        for (int64_t p_ = 0; p_ < (k); p_++)                                                   \
            for (int64_t j_ = 0; j_ < (n); j_++) (bt)[p_ * (n) + j_] = (b)[j_ * (ldb) + p_];   \
        (b) = (bt);                                                                            \
        (ldb) = (n);                                                                           \
    } while (0)

/* Blocks of C of 2 rows x 4 columns, each element one chain over p in
 * order kept in registers (eight independent chains hide the latency of
 * the multiply-add), then the last row and the last columns one element a
 * chain.  B's transpose is packed into bt first (k n <= MEDIUM_PACK) so
 * that a block reads four neighbouring values of B. */
#define SMALL_FN(name, T, MULADD)                                                              \
    static ATTR void name(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T *a,      \
                          int64_t lda, const T *b, int64_t ldb, T beta, T *c, int64_t ldc)     \
    {                                                                                          \
        T bt[MEDIUM_PACK];                                                                     \
        const int64_t as = ta ? 1 : lda, ak = ta ? lda : 1;                                    \
        if (tb) UNTRANSPOSE_B(bt, b, ldb, k, n);                                               \
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

#if defined(__x86_64__) || defined(__i386__)
/* The vector kernels: C in blocks of 8, 4 or 1 rows by one vector of W
 * columns, one accumulator per row kept in a register, B's row segment
 * loaded once per p for the block's rows; each element is one fused
 * multiply-add chain over p in order from 0, as the small kernels' with
 * FMA, so every path gives the same bits (the last columns, fewer than W,
 * take the chain one element at a time). */
#define MEDIUM_FN(name, ATTRS, T, V, W, ZERO, LOADU, BCAST, FMADD, STOREU, SFMA)              \
    static inline __attribute__((always_inline)) ATTRS void name##_block(                    \
        const int R, int64_t k, const T *a, int64_t as, int64_t ak, const T *b, int64_t ldb,  \
        T beta, T *c, int64_t ldc)                                                           \
    {                                                                                        \
        V acc[8];                                                                            \
        for (int r = 0; r < R; r++) acc[r] = ZERO();                                         \
        for (int64_t p = 0; p < k; p++) {                                                    \
            const V bv = LOADU(b + p * ldb);                                                 \
            for (int r = 0; r < R; r++) acc[r] = FMADD(BCAST(a[r * as + p * ak]), bv, acc[r]); \
        }                                                                                    \
        for (int r = 0; r < R; r++) {                                                        \
            T *cr = c + r * ldc, t[W];                                                       \
            if (beta == 0) {                                                                 \
                STOREU(cr, acc[r]);                                                          \
                continue;                                                                    \
            }                                                                                \
            STOREU(t, acc[r]);                                                               \
            for (int q = 0; q < W; q++) cr[q] = beta * cr[q] + t[q];                         \
        }                                                                                    \
    }                                                                                        \
    static ATTRS void name(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T *a,    \
                           int64_t lda, const T *b, int64_t ldb, T beta, T *c, int64_t ldc)  \
    {                                                                                        \
        T bt[MEDIUM_PACK];                                                                   \
        const int64_t as = ta ? 1 : lda, ak = ta ? lda : 1, nw = n / W * W;                  \
        if (tb) UNTRANSPOSE_B(bt, b, ldb, k, n);                                             \
        for (int64_t j = 0; j < nw; j += W) {                                                \
            int64_t i = 0;                                                                   \
            for (; i + 8 <= m; i += 8)                                                       \
                name##_block(8, k, a + i * as, as, ak, b + j, ldb, beta, c + i * ldc + j, ldc); \
            for (; i + 4 <= m; i += 4)                                                       \
                name##_block(4, k, a + i * as, as, ak, b + j, ldb, beta, c + i * ldc + j, ldc); \
            for (; i < m; i++)                                                               \
                name##_block(1, k, a + i * as, as, ak, b + j, ldb, beta, c + i * ldc + j, ldc); \
        }                                                                                    \
        for (int64_t i = 0; i < m; i++)                                                      \
            for (int64_t j = nw; j < n; j++) {                                               \
                T acc = 0;                                                                   \
                for (int64_t p = 0; p < k; p++)                                              \
                    acc = SFMA(a[i * as + p * ak], b[p * ldb + j], acc);                     \
                T *cij = c + i * ldc + j;                                                    \
                *cij = beta == 0 ? acc : beta * *cij + acc;                                  \
            }                                                                                \
    }

#define ATTR2 __attribute__((target("avx2,fma")))
MEDIUM_FN(medium_f32_avx2, ATTR2, float, __m256, 8, _mm256_setzero_ps, _mm256_loadu_ps,
          _mm256_set1_ps, _mm256_fmadd_ps, _mm256_storeu_ps, __builtin_fmaf)
MEDIUM_FN(medium_f64_avx2, ATTR2, double, __m256d, 4, _mm256_setzero_pd, _mm256_loadu_pd,
          _mm256_set1_pd, _mm256_fmadd_pd, _mm256_storeu_pd, __builtin_fma)
#define ATTR512 __attribute__((target("avx512f,fma")))
MEDIUM_FN(medium_f32_avx512, ATTR512, float, __m512, 16, _mm512_setzero_ps, _mm512_loadu_ps,
          _mm512_set1_ps, _mm512_fmadd_ps, _mm512_storeu_ps, __builtin_fmaf)
MEDIUM_FN(medium_f64_avx512, ATTR512, double, __m512d, 8, _mm512_setzero_pd, _mm512_loadu_pd,
          _mm512_set1_pd, _mm512_fmadd_pd, _mm512_storeu_pd, __builtin_fma)

/* The lanes of the widest vector kernel this CPU runs for dtype ct (and
 * TG_MAX_ISA allows), or 0: none. */
static int medium_lanes(tg_dtype ct)
{
    const int f64 = ct == TG_F64;
    if (tg__cpu_has_avx512bw()) return f64 ? 8 : 16;
    return use_fma() ? (f64 ? 4 : 8) : 0;
}
#else
static int medium_lanes(tg_dtype ct)
{
    (void)ct;
    return 0;
}
#endif

/* Whether the vector kernels take the product: W the lanes (0: none). */
static bool medium_pays(int W, int64_t m, int64_t n, int64_t k)
{
    return W > 0 && n >= W && m * n * k <= MEDIUM_MAX && k * n <= MEDIUM_PACK;
}

bool tg__gemm_small_pays(tg_dtype ct, int64_t m, int64_t n, int64_t k)
{
    if (m * n * (k > 0 ? k : 1) <= TG__GEMM_SMALL_MAX) return true;
    return (ct == TG_F32 || ct == TG_F64) && medium_pays(medium_lanes(ct), m, n, k);
}

void tg__gemm_small(tg_dtype ct, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                    const void *a, int64_t lda, const void *b, int64_t ldb, double beta, void *c,
                    int64_t ldc)
{
    const int W = medium_lanes(ct);
    if (m * n * (k > 0 ? k : 1) > TG__GEMM_SMALL_MAX && medium_pays(W, m, n, k)) {
#if defined(__x86_64__) || defined(__i386__)
        const bool wide = W == (ct == TG_F64 ? 8 : 16);
        if (ct == TG_F64)
            (wide ? medium_f64_avx512 : medium_f64_avx2)(ta, tb, m, n, k, a, lda, b, ldb, beta, c,
                                                         ldc);
        else
            (wide ? medium_f32_avx512 : medium_f32_avx2)(ta, tb, m, n, k, a, lda, b, ldb,
                                                         (float)beta, c, ldc);
#endif
        return;
    }
    const bool fma = use_fma();
    if (ct == TG_F64)
        (fma ? small_f64_fma : small_f64)(ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc);
    else
        (fma ? small_f32_fma : small_f32)(ta, tb, m, n, k, a, lda, b, ldb, (float)beta, c, ldc);
}
