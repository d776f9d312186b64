/* src/core/gemm_bf16_avx512.c - the AVX-512 BF16 pieces of the bf16 GEMM:
 * the packers (used by the amx kernel too: every CPU with AMX-BF16 has
 * AVX-512 BF16) and the 12 x 32 micro-kernel on vdpbf16ps, in its two
 * forms (A broadcast by each instruction's load, or through a register). */
#include <stdatomic.h>
#include <string.h>

#include "core/gemm_bf16.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>

#define BF16_TARGET __attribute__((target("avx512bf16,avx512bw,avx512vl,avx512f")))

bool tg__bf16_cpu_has_avx512(void)
{
    /* (tg__cpu_has_avx512bw has run __builtin_cpu_init) */
    return tg__cpu_has_avx512bw() && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512bf16");
}

static __mmask16 first_lanes(int64_t n)
{
    return n >= 16 ? (__mmask16)0xFFFF : n <= 0 ? 0 : (__mmask16)((1u << n) - 1);
}

/* 32 f32 -> 16 pairs: x[2q] in the low half of lane q, x[2q+1] in the high
 * (cvtne2ps2bf16 puts its second operand first). */
BF16_TARGET static inline __m512i pairs_of_run(const float *x, int64_t n)
{
    const __m512 lo = _mm512_maskz_loadu_ps(first_lanes(n), x);
    const __m512 hi = _mm512_maskz_loadu_ps(first_lanes(n - 16), x + 16);
    return (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
}

/* The same 16 pairs from bf16 bits: two neighbours along k already are the
 * pair's low and high half. */
BF16_TARGET static inline __m512i pairs_of_bits(const uint16_t *x, int64_t n)
{
    const __mmask32 m = n >= 32 ? (__mmask32)0xFFFFFFFFu : n <= 0 ? 0 : (__mmask32)((1u << n) - 1);
    return _mm512_maskz_loadu_epi16(m, x);
}

/* Pairs [0, n) along k of line l (k contiguous) of s from element t on. */
BF16_TARGET static inline __m512i pairs_at(const tg__bf16_src *s, int64_t l, int64_t t, int64_t n)
{
    return s->h ? pairs_of_bits(s->h + l * s->ld + t, n) : pairs_of_run(s->p + l * s->ld + t, n);
}

/* Lane q: element q of row x0 in its low half and of row x1 in its high half,
 * for the first n lanes (zero after; a NULL row is zeros); rows of s at
 * element offsets o0, o1 (negative: NULL). */
BF16_TARGET static inline __m512i pairs_across(const tg__bf16_src *s, int64_t o0, int64_t o1,
                                               int64_t n)
{
    const __mmask16 m = first_lanes(n);
    if (s->h) {
        const __m512i lo = o0 >= 0 ? _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, s->h + o0))
                                   : _mm512_setzero_si512();
        const __m512i hi = o1 >= 0 ? _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, s->h + o1))
                                   : _mm512_setzero_si512();
        return _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16));
    }
    /* lane q of the result: elements q and 16 + q of cvtne2ps2bf16(hi, lo) */
    const __m512i idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9,
                                         24, 8, 23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1,
                                         16, 0);
    const __m512 lo = o0 >= 0 ? _mm512_maskz_loadu_ps(m, s->p + o0) : _mm512_setzero_ps();
    const __m512 hi = o1 >= 0 ? _mm512_maskz_loadu_ps(m, s->p + o1) : _mm512_setzero_ps();
    return _mm512_permutexvar_epi16(idx, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
}

/* out[q] = lane q of each of r[0..16) (a 16 x 16 transpose of 32-bit lanes):
 * pairs of rows interleaved, then pairs of pairs, then 128-bit lanes. */
BF16_TARGET static inline void transpose16(__m512i r[16])
{
    __m512i t[16], u[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
    /* u[4b + c] holds lanes c, c+4, c+8, c+12 of rows 4b..4b+3 (one per 128 bits) */
    for (int b = 0; b < 4; b++) {
        u[4 * b] = _mm512_unpacklo_epi64(t[4 * b], t[4 * b + 2]);
        u[4 * b + 1] = _mm512_unpackhi_epi64(t[4 * b], t[4 * b + 2]);
        u[4 * b + 2] = _mm512_unpacklo_epi64(t[4 * b + 1], t[4 * b + 3]);
        u[4 * b + 3] = _mm512_unpackhi_epi64(t[4 * b + 1], t[4 * b + 3]);
    }
    for (int c = 0; c < 4; c++) {
        const __m512i v0 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0x88);
        const __m512i v1 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0xDD);
        const __m512i w0 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0x88);
        const __m512i w1 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0xDD);
        r[c] = _mm512_shuffle_i32x4(v0, w0, 0x88);
        r[c + 8] = _mm512_shuffle_i32x4(v0, w0, 0xDD);
        r[c + 4] = _mm512_shuffle_i32x4(v1, w1, 0x88);
        r[c + 12] = _mm512_shuffle_i32x4(v1, w1, 0xDD);
    }
}

/* Lines whose k is contiguous, line stride 1 in dst: 16 lines x 16 pairs
 * at a time, transposed so that each pair's lines are one store. */
BF16_TARGET static void pack_krun_t(uint32_t *dst, int64_t R, int64_t ps, const tg__bf16_src *s,
                                    int64_t l0, int64_t nl, int64_t t0, int64_t kc, int64_t kp)
{
    __m512i v[16];
    for (int64_t l = 0; l < R; l += 16) {
        const __mmask16 keep = first_lanes(R - l);
        const int64_t n16 = R - l < 16 ? R - l : 16;   /* the group's lines kept */
        int64_t p0 = 0;
        if (s->h && l + n16 <= nl) {
            /* all of them lines of bf16 bits, sixteen whole pairs: loads
             * without masks or tests per line */
            const uint16_t *src = s->h + (l0 + l) * s->ld + t0;
            for (; p0 + 16 <= kp && 2 * p0 + 32 <= kc; p0 += 16) {
                for (int r = 0; r < 16; r++)
                    v[r] = r < n16 ? _mm512_loadu_si512((const void *)(src + r * s->ld + 2 * p0))
                                   : _mm512_setzero_si512();
                transpose16(v);
                for (int q = 0; q < 16; q++)
                    _mm512_mask_storeu_epi32(dst + (p0 + q) * ps + l, keep, v[q]);
            }
        }
        for (; p0 < kp; p0 += 16) {
            for (int64_t r = 0; r < 16; r++)
                v[r] = l + r < nl ? pairs_at(s, l0 + l + r, t0 + 2 * p0, kc - 2 * p0)
                                  : _mm512_setzero_si512();
            transpose16(v);
            const int64_t q1 = kp - p0 < 16 ? kp - p0 : 16;
            for (int64_t q = 0; q < q1; q++)
                _mm512_mask_storeu_epi32(dst + (p0 + q) * ps + l, keep, v[q]);
        }
    }
}

/* Lines whose k is contiguous: each line's run of k becomes its pairs. */
BF16_TARGET static void pack_krun(uint32_t *dst, int64_t R, int64_t rs, int64_t ps,
                                  const tg__bf16_src *s, int64_t l0, int64_t nl, int64_t t0,
                                  int64_t kc, int64_t kp)
{
    _Alignas(64) uint32_t tmp[16];
    for (int64_t r = 0; r < R; r++) {
        uint32_t *d = dst + r * rs;
        if (r >= nl) {
            for (int64_t p = 0; p < kp; p++) d[p * ps] = 0;
            continue;
        }
        for (int64_t p0 = 0; p0 < kp; p0 += 16) {
            const __m512i v = pairs_at(s, l0 + r, t0 + 2 * p0, kc - 2 * p0);
            const int64_t q1 = kp - p0 < 16 ? kp - p0 : 16;
            if (ps == 1) {
                _mm512_mask_storeu_epi32(d + p0, first_lanes(q1), v);
                continue;
            }
            _mm512_store_si512((void *)tmp, v);
            for (int64_t q = 0; q < q1; q++) d[(p0 + q) * ps] = tmp[q];
        }
    }
}

/* Lines contiguous, k strided: rows 2p and 2p+1 of k interleaved. */
BF16_TARGET static void pack_lines(uint32_t *dst, int64_t R, int64_t rs, int64_t ps,
                                   const tg__bf16_src *s, int64_t l0, int64_t nl, int64_t t0,
                                   int64_t kc, int64_t kp)
{
    _Alignas(64) uint32_t tmp[16];
    for (int64_t p = 0; p < kp; p++) {
        /* rows t, t + 1 of k; past kc (the padding up to kcp) they are zero */
        const int64_t t = 2 * p;
        const int64_t o0 = t < kc ? (t0 + t) * s->ld + l0 : -1;
        const int64_t o1 = t + 1 < kc ? o0 + s->ld : -1;
        for (int64_t l = 0; l < R; l += 16) {
            const __m512i v = pairs_across(s, o0 < 0 ? -1 : o0 + l, o1 < 0 ? -1 : o1 + l, nl - l);
            const int64_t q1 = R - l < 16 ? R - l : 16;
            if (rs == 1) {
                _mm512_mask_storeu_epi32(dst + p * ps + l, first_lanes(q1), v);
                continue;
            }
            _mm512_store_si512((void *)tmp, v);
            for (int64_t q = 0; q < q1; q++) dst[(l + q) * rs + p * ps] = tmp[q];
        }
    }
}

/* A whole B block of lines contiguous (k strided), as panels of NR lines:
 * pack_lines's layout, but with the pairs of k rows outside and the panels
 * inside, so that each row of the source is read once from start to end.
 * (Panel by panel, the reads of a block of 384 rows jump a row apart 128
 * bytes at a time, which the prefetchers do not follow: the DCGAN conv's
 * forward GEMM spent as long packing its columns as multiplying them.) */
BF16_TARGET static void pack_b_lines(uint32_t *bp, const tg__bf16_src *s, int64_t j0,
                                     int64_t nc, int64_t t0, int64_t kc, int64_t kp)
{
    for (int64_t p = 0; p < kp; p++) {
        const int64_t t = 2 * p;
        const int64_t o0 = t < kc ? (t0 + t) * s->ld + j0 : -1;
        const int64_t o1 = t + 1 < kc ? o0 + s->ld : -1;
        uint32_t *d = bp + p * TG__BF16_NR;
        int64_t l = 0;
        if (s->h && o1 >= 0) {
            /* bf16 bits, both rows: a whole panel's 32 lines at a time, the
             * two rows' halves interleaved by one permute each (word q of lo:
             * row t's entry q low, row t + 1's high, index 32 + q) */
            const __m512i lo = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10,
                                                41, 9, 40, 8, 39, 7, 38, 6, 37, 5, 36, 4, 35, 3,
                                                34, 2, 33, 1, 32, 0);
            const __m512i hi = _mm512_add_epi16(lo, _mm512_set1_epi16(16));
            for (; l + TG__BF16_NR <= nc; l += TG__BF16_NR) {
                const __m512i r0 = _mm512_loadu_si512((const void *)(s->h + o0 + l));
                const __m512i r1 = _mm512_loadu_si512((const void *)(s->h + o1 + l));
                uint32_t *q = d + (l / TG__BF16_NR) * kp * TG__BF16_NR;
                _mm512_storeu_si512((void *)q, _mm512_permutex2var_epi16(r0, lo, r1));
                _mm512_storeu_si512((void *)(q + 16), _mm512_permutex2var_epi16(r0, hi, r1));
            }
        }
        for (; l < nc; l += 16) {
            const __m512i v = pairs_across(s, o0 < 0 ? -1 : o0 + l, o1 < 0 ? -1 : o1 + l, nc - l);
            /* line l of the block: panel l / NR, lane l % NR */
            _mm512_storeu_si512((void *)(d + (l / TG__BF16_NR) * kp * TG__BF16_NR +
                                         l % TG__BF16_NR),
                                v);
        }
        /* a last panel's upper half past the lines: zeros, so the panel holds no
         * undefined bytes (those lanes' sums are never stored) */
        if (nc % TG__BF16_NR != 0 && nc % TG__BF16_NR <= 16)
            _mm512_storeu_si512((void *)(d + (nc / TG__BF16_NR) * kp * TG__BF16_NR + 16),
                                _mm512_setzero_si512());
    }
}

void tg__bf16_pack_b(uint32_t *bp, const tg__bf16_src *s, int64_t j0, int64_t nc, int64_t t0,
                     int64_t kc, int64_t kcp)
{
    TG_ASSERT(kcp % 2 == 0 && kcp >= kc);
    if (!s->tcontig) {
        pack_b_lines(bp, s, j0, nc, t0, kc, kcp / 2);
        return;
    }
    for (int64_t j = 0; j < nc; j += TG__BF16_NR) {
        const int64_t nl = nc - j < TG__BF16_NR ? nc - j : TG__BF16_NR;
        pack_krun_t(bp + j * (kcp / 2), TG__BF16_NR, TG__BF16_NR, s, j0 + j, nl, t0, kc,
                    kcp / 2);
    }
}

void tg__bf16_pack(uint32_t *dst, int64_t R, int64_t rs, int64_t ps, const tg__bf16_src *s,
                   int64_t l0, int64_t nl, int64_t t0, int64_t kc, int64_t kcp)
{
    TG_ASSERT(kcp % 2 == 0 && kcp >= kc && nl <= R);
    if (s->tcontig && rs == 1) pack_krun_t(dst, R, ps, s, l0, nl, t0, kc, kcp / 2);
    else if (s->tcontig) pack_krun(dst, R, rs, ps, s, l0, nl, t0, kc, kcp / 2);
    else pack_lines(dst, R, rs, ps, s, l0, nl, t0, kc, kcp / 2);
}

/* Row r of the tile: acc_r0, acc_r1 += pair p of row r times the B pairs,
 * the pair broadcast one of two ways (tg__bf16_broadcast):
 *  - LOAD: by each instruction's own load ({1to16}), one vector
 *    instruction fewer per row and pair, which pays where one 512-bit
 *    vdpbf16ps issues a cycle (Zen 4);
 *  - REGISTER: once into a register (vbroadcastss) for both instructions,
 *    half the loads, which pays where two issue a cycle and the 26 loads
 *    a pair of the LOAD form are the limit (Zen 5).
 * A pair's two products are exact and added in the instruction's order
 * whichever operand holds A, so both give the sums of the broadcast
 * register, bit for bit. */
#define ROW_LOAD(r)                                                               \
    __asm__("vdpbf16ps %[a]%{1to16%}, %[b0], %[c0]\n\t"                          \
            "vdpbf16ps %[a]%{1to16%}, %[b1], %[c1]"                               \
            : [c0] "+v"(c##r##0), [c1] "+v"(c##r##1)                              \
            : [a] "m"(ap[p * 12 + (r)]), [b0] "v"(b0), [b1] "v"(b1))
#define ROW_REGISTER(r)                                                           \
    do {                                                                          \
        __m512 x_;                                                                \
        __asm__("vbroadcastss %[a], %[x]\n\t"                                    \
                "vdpbf16ps %[x], %[b0], %[c0]\n\t"                               \
                "vdpbf16ps %[x], %[b1], %[c1]"                                    \
                : [c0] "+v"(c##r##0), [c1] "+v"(c##r##1), [x] "=&v"(x_)           \
                : [a] "m"(ap[p * 12 + (r)]), [b0] "v"(b0), [b1] "v"(b1));         \
    } while (0)
/* The same for a tile of at most 16 columns: the panel's first half only. */
#define ROW_LOAD16(r)                                                             \
    __asm__("vdpbf16ps %[a]%{1to16%}, %[b0], %[c0]"                               \
            : [c0] "+v"(c##r##0)                                                  \
            : [a] "m"(ap[p * 12 + (r)]), [b0] "v"(b0))
#define ROW_REGISTER16(r)                                                         \
    do {                                                                          \
        __m512 x_;                                                                \
        __asm__("vbroadcastss %[a], %[x]\n\t"                                    \
                "vdpbf16ps %[x], %[b0], %[c0]"                                    \
                : [c0] "+v"(c##r##0), [x] "=&v"(x_)                               \
                : [a] "m"(ap[p * 12 + (r)]), [b0] "v"(b0));                       \
    } while (0)
/* Row r of a tile of R rows (R a constant: the rows past it compile to
 * nothing). */
#define ROW_IF(HOW, R, r)                                                         \
    do {                                                                          \
        if ((r) < (R)) ROW_##HOW(r);                                              \
    } while (0)
#define OUT(r)                                                                    \
    do {                                                                          \
        if ((r) < mr) store_row(c + (r) * ldc, c##r##0, c##r##1, m0, m1, first, beta); \
    } while (0)

/* tg__bf16_store of one row of the tile, the first nr of its 32 lanes (masks
 * m0, m1; m1 empty leaves the second half alone). */
BF16_TARGET static inline void store_row(float *c, __m512 v0, __m512 v1, __mmask16 m0,
                                         __mmask16 m1, bool first, float beta)
{
    if (!first || beta != 0) {
        const __m512 b = _mm512_set1_ps(first ? beta : 1.0f);
        v0 = _mm512_fmadd_ps(b, _mm512_maskz_loadu_ps(m0, c), v0);
        if (m1) v1 = _mm512_fmadd_ps(b, _mm512_maskz_loadu_ps(m1, c + 16), v1);
    }
    _mm512_mask_storeu_ps(c, m0, v0);
    if (m1) _mm512_mask_storeu_ps(c + 16, m1, v1);
}

/* The micro-kernel on a tile of R (4, 8 or 12) rows of A's 12-row panel and
 * W (16 or 32) columns of B's panel, with ROW_##HOW (broadcast form) and
 * ROW_##HOW##16 for 16 columns.  Rows and columns past the tile are never
 * computed: a tile of mr <= R rows and nr <= W columns costs R x W lanes,
 * not 12 x 32.  Each lane's sums are the full tile's, instruction for
 * instruction, so every tile size gives the same bits. */
#define MICRO(HOW, R, W)                                                          \
    _Static_assert(TG__BF16_MR_AVX512 == 12 && TG__BF16_NR == 32, "the tile below is 12 x 32"); \
    /* C's tile is read at the end when it is added to (a later k block):   \
     * fetched now, it arrives while the dot products run */                      \
    if (!first || beta != 0)                                                      \
        for (int r = 0; r < mr; r++) {                                            \
            _mm_prefetch((const char *)(c + r * ldc), _MM_HINT_T0);               \
            if ((W) > 16) _mm_prefetch((const char *)(c + r * ldc + 16), _MM_HINT_T0); \
        }                                                                         \
    __m512 c00 = _mm512_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00; \
    __m512 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;      \
    __m512 c60 = c00, c61 = c00, c70 = c00, c71 = c00, c80 = c00, c81 = c00;      \
    __m512 c90 = c00, c91 = c00, c100 = c00, c101 = c00, c110 = c00, c111 = c00;  \
    if ((W) > 16)                                                                 \
        for (int64_t p = 0; p < kp; p++) {                                        \
            const __m512bh b0 = (__m512bh)_mm512_loadu_si512((const void *)(bp + p * 32)); \
            const __m512bh b1 =                                                   \
                (__m512bh)_mm512_loadu_si512((const void *)(bp + p * 32 + 16));   \
            ROW_IF(HOW, R, 0); ROW_IF(HOW, R, 1); ROW_IF(HOW, R, 2);              \
            ROW_IF(HOW, R, 3); ROW_IF(HOW, R, 4); ROW_IF(HOW, R, 5);              \
            ROW_IF(HOW, R, 6); ROW_IF(HOW, R, 7); ROW_IF(HOW, R, 8);              \
            ROW_IF(HOW, R, 9); ROW_IF(HOW, R, 10); ROW_IF(HOW, R, 11);            \
        }                                                                         \
    else                                                                          \
        for (int64_t p = 0; p < kp; p++) {                                        \
            const __m512bh b0 = (__m512bh)_mm512_loadu_si512((const void *)(bp + p * 32)); \
            ROW_IF(HOW##16, R, 0); ROW_IF(HOW##16, R, 1); ROW_IF(HOW##16, R, 2);  \
            ROW_IF(HOW##16, R, 3); ROW_IF(HOW##16, R, 4); ROW_IF(HOW##16, R, 5);  \
            ROW_IF(HOW##16, R, 6); ROW_IF(HOW##16, R, 7); ROW_IF(HOW##16, R, 8);  \
            ROW_IF(HOW##16, R, 9); ROW_IF(HOW##16, R, 10); ROW_IF(HOW##16, R, 11); \
        }                                                                         \
    const __mmask16 m0 = first_lanes(nr), m1 = first_lanes(nr - 16);              \
    OUT(0); OUT(1); OUT(2); OUT(3); OUT(4); OUT(5);                               \
    OUT(6); OUT(7); OUT(8); OUT(9); OUT(10); OUT(11)

/* One function per broadcast form and tile size. */
#define MICRO_FN(HOW, R, W)                                                       \
    BF16_TARGET static void micro_##HOW##_##R##x##W(const uint32_t *ap, const uint32_t *bp, \
                                                   int64_t kp, float *c, int64_t ldc, int mr, \
                                                   int nr, bool first, float beta) \
    {                                                                             \
        MICRO(HOW, R, W);                                                         \
    }
MICRO_FN(LOAD, 4, 16)
MICRO_FN(LOAD, 8, 16)
MICRO_FN(LOAD, 12, 16)
MICRO_FN(LOAD, 4, 32)
MICRO_FN(LOAD, 8, 32)
MICRO_FN(LOAD, 12, 32)
MICRO_FN(REGISTER, 4, 16)
MICRO_FN(REGISTER, 8, 16)
MICRO_FN(REGISTER, 12, 16)
MICRO_FN(REGISTER, 4, 32)
MICRO_FN(REGISTER, 8, 32)
MICRO_FN(REGISTER, 12, 32)

/* The smallest tile that holds mr x nr: [rows 4, 8, 12][columns 16, 32];
 * or the full tile for every size (tg__bf16_set_full_tiles). */
static const tg__bf16_tiles micro_load = {{{micro_LOAD_4x16, micro_LOAD_4x32},
                                           {micro_LOAD_8x16, micro_LOAD_8x32},
                                           {micro_LOAD_12x16, micro_LOAD_12x32}}};
static const tg__bf16_tiles micro_register = {{{micro_REGISTER_4x16, micro_REGISTER_4x32},
                                               {micro_REGISTER_8x16, micro_REGISTER_8x32},
                                               {micro_REGISTER_12x16, micro_REGISTER_12x32}}};
static const tg__bf16_tiles full_load = {{{micro_LOAD_12x32, micro_LOAD_12x32},
                                          {micro_LOAD_12x32, micro_LOAD_12x32},
                                          {micro_LOAD_12x32, micro_LOAD_12x32}}};
static const tg__bf16_tiles full_register = {{{micro_REGISTER_12x32, micro_REGISTER_12x32},
                                              {micro_REGISTER_12x32, micro_REGISTER_12x32},
                                              {micro_REGISTER_12x32, micro_REGISTER_12x32}}};

static _Thread_local bool full_tiles_only;

void tg__bf16_set_full_tiles(bool on) { full_tiles_only = on; }

const tg__bf16_tiles *tg__bf16_micro_avx512_tiles(bool reg)
{
    if (full_tiles_only) return reg ? &full_register : &full_load;
    return reg ? &micro_register : &micro_load;
}

/* AMD family 19h (Zen 3 and Zen 4; only Zen 4 has AVX-512 BF16). */
static bool cpu_is_amd_family_19h(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d) || b != 0x68747541u /* "Auth" */) return false;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
    const unsigned base = (a >> 8) & 0xF, ext = (a >> 20) & 0xFF;
    return base == 0xF && base + ext == 0x19;
}

/* Asked once: cpuid costs microseconds in a virtual machine (an exit to the
 * host), and every GEMM call asks. */
bool tg__bf16_broadcast_best_register(void)
{
    static atomic_int best;   /* 0 not asked yet, 1 load, 2 register */
    int b = atomic_load_explicit(&best, memory_order_relaxed);
    if (!b) {
        b = cpu_is_amd_family_19h() ? 1 : 2;
        atomic_store_explicit(&best, b, memory_order_relaxed);
    }
    return b == 2;
}

#undef MICRO
#undef MICRO_FN
#undef ROW_LOAD
#undef ROW_REGISTER
#undef ROW_LOAD16
#undef ROW_REGISTER16
#undef ROW_IF
#undef OUT

#else /* not x86 with GCC or Clang */

bool tg__bf16_cpu_has_avx512(void) { return false; }
void tg__bf16_pack(uint32_t *dst, int64_t R, int64_t rs, int64_t ps, const tg__bf16_src *s,
                   int64_t l0, int64_t nl, int64_t t0, int64_t kc, int64_t kcp)
{
    TG_ASSERT(!"bf16 packing called on a build without AVX-512 BF16");
}
void tg__bf16_pack_b(uint32_t *bp, const tg__bf16_src *s, int64_t j0, int64_t nc, int64_t t0,
                     int64_t kc, int64_t kcp)
{
    TG_ASSERT(!"bf16 packing called on a build without AVX-512 BF16");
}
bool tg__bf16_broadcast_best_register(void) { return false; }
void tg__bf16_set_full_tiles(bool on) { (void)on; }
const tg__bf16_tiles *tg__bf16_micro_avx512_tiles(bool reg)
{
    (void)reg;
    return NULL;
}
#endif
