/* src/ops/pool_simd.c - the sums of whole f32 planes (a pooling to one
 * output per plane, as global average pooling), with AVX2 or AVX-512
 * chosen at run time (TG_POOL_KERNEL=portable|avx2|avx512).  Every kernel
 * adds the same terms in the same order, so all give the same bits.
 *
 * A plane of n >= 64 elements is contiguous, so its sum is taken in the
 * lanes of vectors: element i goes to lane i % 16 of accumulator
 * (i / 16) % 4, and each of those 64 partial sums adds its elements from 0
 * in the order of i (one 64-element block after the other).  Then, lane by
 * lane,
 *   v[l] = (acc0[l] + acc1[l]) + (acc2[l] + acc3[l]),
 * and the halves are folded, v[l] += v[l + h] for l < h, h = 8, 4, 2, 1;
 * the sum is v[0].  The portable kernel keeps the accumulators in arrays,
 * avx2 each as two 8-lane halves, avx512 as one 16-lane vector.  A block
 * past the plane's end is added as zeros (masked loads), which changes no
 * partial sum: those start as +0 and so are never -0, and s + 0 = s for
 * every other s, NaN and infinities included.  Against the sum from left
 * to right (the pooling kernels' order), whose error may reach (n - 1) u
 * sum |x|, each term here goes through at most ceil(n / 64) + 6 roundings:
 * the error is at most (ceil(n / 64) + 6) u sum |x| (u = 2^-24), to first
 * order.
 *
 * A shorter plane (as 7 x 7) would spend most of its time in the folds:
 * its sum is x[p n] + x[p n + 1] + ... from 0, left to right, the order of
 * the kernel that pools one window at a time.  avx2 and avx512 keep eight
 * planes' sums in the lanes of one vector: they load eight elements of
 * each of the eight planes, transpose the 8 x 8 block in registers (24
 * shuffles), and add its columns to the sums one after the other; two
 * groups of eight planes go side by side, so that one group's chain of
 * dependent adds overlaps the other's.  The elements past the last whole
 * block, and the planes past the last whole group, are added one by
 * one. */
#include <stdatomic.h>
#include <string.h>

#include "ops/pool_internal.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define POOL_X86 1
#define POOL_AVX2 __attribute__((target("avx2")))
#define POOL_AVX512 __attribute__((target("avx512f")))
#endif

static const char *const kernel_names[] = {
    [TG__POOL_KERNEL_AUTO] = "auto",
    [TG__POOL_KERNEL_PORTABLE] = "portable",
    [TG__POOL_KERNEL_AVX2] = "avx2",
    [TG__POOL_KERNEL_AVX512] = "avx512",
};

bool tg__pool_kernel_available(tg__pool_kernel_id k)
{
    if (k == TG__POOL_KERNEL_PORTABLE) return true;
#ifdef POOL_X86
    __builtin_cpu_init();
    if (k == TG__POOL_KERNEL_AVX2)
        return tg__isa_allows(TG__ISA_AVX2) && __builtin_cpu_supports("avx2");
    if (k == TG__POOL_KERNEL_AVX512)
        return tg__isa_allows(TG__ISA_AVX512) && __builtin_cpu_supports("avx512f");
#endif
    return false;
}

const char *tg__pool_kernel_name(tg__pool_kernel_id k)
{
    return k >= TG__POOL_KERNEL_AUTO && k <= TG__POOL_KERNEL_AVX512 ? kernel_names[k] : "?";
}

static bool available(int k) { return tg__pool_kernel_available((tg__pool_kernel_id)k); }

tg__pool_kernel_id tg__pool_kernel_get(void)
{
    static atomic_flag told = ATOMIC_FLAG_INIT;
    const int best = available(TG__POOL_KERNEL_AVX512) ? TG__POOL_KERNEL_AVX512
                     : available(TG__POOL_KERNEL_AVX2) ? TG__POOL_KERNEL_AVX2
                                                       : TG__POOL_KERNEL_PORTABLE;
    return (tg__pool_kernel_id)tg__kernel_from_env("TG_POOL_KERNEL", "a pooling", kernel_names,
                                                   TG__POOL_KERNEL_AVX512 + 1, available, best,
                                                   &told);
}

enum { LANES = 16, ACCS = 4, BLOCK = LANES * ACCS };

/* The sum of one plane of n elements, in the order above. */
static float sum_portable(const float *x, int64_t n)
{
    float acc[ACCS][LANES] = {{0}}, v[LANES];
    int64_t i = 0;
    for (; i + BLOCK <= n; i += BLOCK)
        for (int a = 0; a < ACCS; a++)
            for (int l = 0; l < LANES; l++) acc[a][l] += x[i + a * LANES + l];
    for (int64_t j = i; j < n; j++) acc[(j - i) / LANES][(j - i) % LANES] += x[j];
    for (int l = 0; l < LANES; l++) v[l] = (acc[0][l] + acc[1][l]) + (acc[2][l] + acc[3][l]);
    for (int h = LANES / 2; h >= 1; h /= 2)
        for (int l = 0; l < h; l++) v[l] += v[l + h];
    return v[0];
}

/* s[p] += x[p n + i] for i in [i0, n), p in [0, np): one element at a time. */
static void sums_tail(float *s, const float *x, int64_t n, int64_t np, int64_t i0)
{
    for (int64_t i = i0; i < n; i++)
        for (int64_t p = 0; p < np; p++) s[p] += x[p * n + i];
}

#ifdef POOL_X86
/* The columns c[0..8) of the 8 x 8 block whose row p is x + p n + i: lane p
 * of c[j] is x[p n + i + j]. */
POOL_AVX2 static inline void columns8(__m256 *c, const float *x, int64_t n, int64_t i)
{
    __m256 r[8], t[8], u[8];
    for (int p = 0; p < 8; p++) r[p] = _mm256_loadu_ps(x + p * n + i);
    for (int p = 0; p < 8; p += 2) {
        t[p] = _mm256_unpacklo_ps(r[p], r[p + 1]);       /* r0[0] r1[0] r0[1] r1[1] | [4] [5] */
        t[p + 1] = _mm256_unpackhi_ps(r[p], r[p + 1]);   /* r0[2] r1[2] r0[3] r1[3] | [6] [7] */
    }
    for (int q = 0; q < 8; q += 4) {
        u[q] = _mm256_shuffle_ps(t[q], t[q + 2], 0x44);       /* rows q..q+3, [0] | [4] */
        u[q + 1] = _mm256_shuffle_ps(t[q], t[q + 2], 0xee);   /* [1] | [5] */
        u[q + 2] = _mm256_shuffle_ps(t[q + 1], t[q + 3], 0x44);   /* [2] | [6] */
        u[q + 3] = _mm256_shuffle_ps(t[q + 1], t[q + 3], 0xee);   /* [3] | [7] */
    }
    for (int j = 0; j < 4; j++) {
        c[j] = _mm256_permute2f128_ps(u[j], u[j + 4], 0x20);
        c[j + 4] = _mm256_permute2f128_ps(u[j], u[j + 4], 0x31);
    }
}

/* The sums from left to right of np planes (np a multiple of 8). */
POOL_AVX2 static void ordered_avx2(float *s, const float *x, int64_t n, int64_t np)
{
    const int64_t nb = n - n % 8;
    int64_t p = 0;
    for (; p + 16 <= np; p += 16) {
        const float *xa = x + p * n, *xb = xa + 8 * n;
        __m256 a = _mm256_setzero_ps(), b = _mm256_setzero_ps(), ca[8], cb[8];
        for (int64_t i = 0; i < nb; i += 8) {   /* cb's adds overlap ca's */
            columns8(ca, xa, n, i);
            for (int j = 0; j < 8; j++) a = _mm256_add_ps(a, ca[j]);
            columns8(cb, xb, n, i);
            for (int j = 0; j < 8; j++) b = _mm256_add_ps(b, cb[j]);
        }
        _mm256_storeu_ps(s + p, a);
        _mm256_storeu_ps(s + p + 8, b);
        sums_tail(s + p, xa, n, 16, nb);
    }
    for (; p < np; p += 8) {
        const float *xa = x + p * n;
        __m256 a = _mm256_setzero_ps(), ca[8];
        for (int64_t i = 0; i < nb; i += 8) {
            columns8(ca, xa, n, i);
            for (int j = 0; j < 8; j++) a = _mm256_add_ps(a, ca[j]);
        }
        _mm256_storeu_ps(s + p, a);
        sums_tail(s + p, xa, n, 8, nb);
    }
}

/* v[0..8) + v[8..16) given as lo and hi, then folded to lane 0 as above. */
POOL_AVX2 static inline float fold8(__m256 lo, __m256 hi)
{
    const __m256 w = _mm256_add_ps(lo, hi);                                  /* h = 8 */
    __m128 q = _mm_add_ps(_mm256_castps256_ps128(w), _mm256_extractf128_ps(w, 1));   /* 4 */
    q = _mm_add_ps(q, _mm_movehl_ps(q, q));                                  /* 2 */
    q = _mm_add_ss(q, _mm_movehdup_ps(q));                                   /* 1 */
    return _mm_cvtss_f32(q);
}

/* Lanes [0, c) of an 8-lane load's mask, c in [0, 8]. */
static const int32_t lane_masks[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};

/* The accumulators as 8-lane halves: a[2g] lanes 0-7 of accumulator g,
 * a[2g + 1] lanes 8-15. */
POOL_AVX2 static float sum_avx2(const float *x, int64_t n)
{
    __m256 a[2 * ACCS];
    for (int k = 0; k < 2 * ACCS; k++) a[k] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + BLOCK <= n; i += BLOCK)
        for (int k = 0; k < 2 * ACCS; k++)
            a[k] = _mm256_add_ps(a[k], _mm256_loadu_ps(x + i + 8 * k));
    for (int k = 0; k < 2 * ACCS && i + 8 * k < n; k++) {
        const int64_t c = n - i - 8 * k < 8 ? n - i - 8 * k : 8;
        const __m256i m = _mm256_loadu_si256((const __m256i *)(lane_masks + 8 - c));
        a[k] = _mm256_add_ps(a[k], _mm256_maskload_ps(x + i + 8 * k, m));
    }
    const __m256 lo = _mm256_add_ps(_mm256_add_ps(a[0], a[2]), _mm256_add_ps(a[4], a[6]));
    const __m256 hi = _mm256_add_ps(_mm256_add_ps(a[1], a[3]), _mm256_add_ps(a[5], a[7]));
    return fold8(lo, hi);
}

POOL_AVX512 static float sum_avx512(const float *x, int64_t n)
{
    __m512 a[ACCS];
    for (int k = 0; k < ACCS; k++) a[k] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + BLOCK <= n; i += BLOCK)
        for (int k = 0; k < ACCS; k++)
            a[k] = _mm512_add_ps(a[k], _mm512_loadu_ps(x + i + 16 * k));
    for (int k = 0; k < ACCS && i + 16 * k < n; k++) {
        const int64_t c = n - i - 16 * k < 16 ? n - i - 16 * k : 16;
        const __mmask16 m = (__mmask16)((1u << c) - 1);
        a[k] = _mm512_add_ps(a[k], _mm512_maskz_loadu_ps(m, x + i + 16 * k));
    }
    const __m512 v = _mm512_add_ps(_mm512_add_ps(a[0], a[1]), _mm512_add_ps(a[2], a[3]));
    const __m256 lo = _mm512_castps512_ps256(v);
    const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
    return fold8(lo, hi);
}

POOL_AVX2 static void sums_avx2(float *s, const float *x, int64_t n, int64_t np)
{
    for (int64_t p = 0; p < np; p++) s[p] = sum_avx2(x + p * n, n);
}

POOL_AVX512 static void sums_avx512(float *s, const float *x, int64_t n, int64_t np)
{
    for (int64_t p = 0; p < np; p++) s[p] = sum_avx512(x + p * n, n);
}
#endif

void tg__plane_sums_f32(float *s, const float *x, int64_t n, int64_t np)
{
    const tg__pool_kernel_id k = tg__pool_kernel_get();
    (void)k;   /* a portable build has one kernel */
    if (n < BLOCK) {   /* from left to right */
        int64_t done = 0;
#ifdef POOL_X86
        if (np >= 8 && n >= 8 && k != TG__POOL_KERNEL_PORTABLE) {
            done = np - np % 8;
            ordered_avx2(s, x, n, done);
        }
#endif
        memset(s + done, 0, sizeof *s * (size_t)(np - done));
        sums_tail(s + done, x + done * n, n, np - done, 0);
        return;
    }
#ifdef POOL_X86
    if (k == TG__POOL_KERNEL_AVX512) {
        sums_avx512(s, x, n, np);
        return;
    }
    if (k == TG__POOL_KERNEL_AVX2) {
        sums_avx2(s, x, n, np);
        return;
    }
#endif
    for (int64_t p = 0; p < np; p++) s[p] = sum_portable(x + p * n, n);
}
