/* src/ops/pool_simd.c - the sums of whole f32 planes (a pooling to one
 * output per plane, as global average pooling) with AVX2, chosen at run
 * time (TG_POOL_KERNEL=portable|avx2).
 *
 * Plane p's sum is x[p n] + x[p n + 1] + ... added from 0 left to right, the
 * order of the kernel that pools one window at a time, so every kernel
 * gives its bits.  The avx2 kernel keeps eight planes' sums in the lanes of
 * one vector: it loads eight elements of each of the eight planes,
 * transposes the 8 x 8 block in registers (24 shuffles), and adds its
 * columns to the sums one after the other; two groups of eight planes go
 * side by side, so that one group's chain of dependent adds overlaps the
 * other's.  The elements past the last whole block, and the planes past the
 * last whole group, are added one by one. */
#include <stdatomic.h>
#include <string.h>

#include "ops/pool_internal.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define POOL_X86 1
#define POOL_AVX2 __attribute__((target("avx2")))
#endif

static const char *const kernel_names[] = {
    [TG__POOL_KERNEL_AUTO] = "auto",
    [TG__POOL_KERNEL_PORTABLE] = "portable",
    [TG__POOL_KERNEL_AVX2] = "avx2",
};

bool tg__pool_kernel_available(tg__pool_kernel_id k)
{
    if (k == TG__POOL_KERNEL_PORTABLE) return true;
#ifdef POOL_X86
    __builtin_cpu_init();
    return k == TG__POOL_KERNEL_AVX2 && __builtin_cpu_supports("avx2");
#else
    return false;
#endif
}

const char *tg__pool_kernel_name(tg__pool_kernel_id k)
{
    return k >= TG__POOL_KERNEL_AUTO && k <= TG__POOL_KERNEL_AVX2 ? kernel_names[k] : "?";
}

static bool available(int k) { return tg__pool_kernel_available((tg__pool_kernel_id)k); }

tg__pool_kernel_id tg__pool_kernel_get(void)
{
    static atomic_flag told = ATOMIC_FLAG_INIT;
    const int best = available(TG__POOL_KERNEL_AVX2) ? TG__POOL_KERNEL_AVX2
                                                     : TG__POOL_KERNEL_PORTABLE;
    return (tg__pool_kernel_id)tg__kernel_from_env("TG_POOL_KERNEL", "a pooling", kernel_names,
                                                   TG__POOL_KERNEL_AVX2 + 1, available, best,
                                                   &told);
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

/* The sums of np planes (np a multiple of 8), from 0. */
POOL_AVX2 static void sums_avx2(float *s, const float *x, int64_t n, int64_t np)
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
#endif

void tg__plane_sums_f32(float *s, const float *x, int64_t n, int64_t np)
{
    int64_t done = 0;
#ifdef POOL_X86
    if (np >= 8 && n >= 8 && tg__pool_kernel_get() == TG__POOL_KERNEL_AVX2) {
        done = np - np % 8;
        sums_avx2(s, x, n, done);
    }
#endif
    memset(s + done, 0, sizeof *s * (size_t)(np - done));
    sums_tail(s + done, x + done * n, n, np - done, 0);
}
