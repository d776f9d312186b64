/* src/quant/qgemm_x86.c - the x86 int8 GEMM kernels, compiled with
 * per-function target attributes and chosen at run time: the AVX2 and
 * AVX-512 VNNI one-row kernels of tg_int8_gemm, the AVX2 tile of the packed
 * GEMM (i16 activations) and the VNNI packed GEMM (u8 activations;
 * quant_internal.h).  AMX is in qamx_x86.c, the AVX-512 requantization and
 * quantization in qsimd_x86.c.
 *
 * Both are exact (no saturating instruction):
 *  AVX2: bytes are widened to i16 (u8 zero-extended or i8 sign-extended) and
 *        vpmaddwd sums pairs of i16 products into i32.  (vpmaddubsw is not
 *        used: its i16 pair sums saturate, e.g. 2 * 255 * -128.)
 *  VNNI: vpdpbusd multiplies u8 by s8 and adds groups of 4 products into
 *        i32 without saturation.  For i8 activations a, a + 128 is a u8
 *        (flip the top bit), and sum a*w = sum (a+128)*w - 128 * sum w, with
 *        the row sums of w computed once per GEMM.
 * Tails (k not a multiple of 16 or 64) are summed in scalar code (AVX2) or
 * with masked loads that read zeros past the end (VNNI).
 */
#include <string.h>

#include "quant/quant_internal.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

bool tg__q_cpu_has_avx2(void)
{
    return tg__isa_allows(TG__ISA_AVX2) && __builtin_cpu_supports("avx2");
}

bool tg__q_cpu_has_vnni(void)
{
    return tg__isa_allows(TG__ISA_AVX512) && __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vnni");
}

__attribute__((target("avx2"))) static inline int32_t hsum256(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

__attribute__((target("avx2"))) static inline __m256i widen(const void *p, bool is_signed)
{
    __m128i v = _mm_loadu_si128((const __m128i *)p);
    return is_signed ? _mm256_cvtepi8_epi16(v) : _mm256_cvtepu8_epi16(v);
}

static inline int32_t tail_dot(const uint8_t *a, bool a_signed, const int8_t *w, int64_t t,
                               int64_t k)
{
    int32_t s = 0;
    for (; t < k; t++) s += (a_signed ? (int32_t)(int8_t)a[t] : (int32_t)a[t]) * w[t];
    return s;
}

/* Four rows of w share each 16-byte slice of a. */
__attribute__((target("avx2"))) void tg__q_row_avx2(int32_t *c, const uint8_t *a, bool a_signed,
                                                   const int8_t *w, int64_t n, int64_t k)
{
    const int64_t k16 = k & ~(int64_t)15;
    int64_t j = 0;
    for (; j + 4 <= n; j += 4) {
        const int8_t *w0 = w + j * k, *w1 = w0 + k, *w2 = w1 + k, *w3 = w2 + k;
        __m256i c0 = _mm256_setzero_si256(), c1 = c0, c2 = c0, c3 = c0;
        for (int64_t t = 0; t < k16; t += 16) {
            const __m256i av = widen(a + t, a_signed);
            c0 = _mm256_add_epi32(c0, _mm256_madd_epi16(av, widen(w0 + t, true)));
            c1 = _mm256_add_epi32(c1, _mm256_madd_epi16(av, widen(w1 + t, true)));
            c2 = _mm256_add_epi32(c2, _mm256_madd_epi16(av, widen(w2 + t, true)));
            c3 = _mm256_add_epi32(c3, _mm256_madd_epi16(av, widen(w3 + t, true)));
        }
        c[j] = hsum256(c0) + tail_dot(a, a_signed, w0, k16, k);
        c[j + 1] = hsum256(c1) + tail_dot(a, a_signed, w1, k16, k);
        c[j + 2] = hsum256(c2) + tail_dot(a, a_signed, w2, k16, k);
        c[j + 3] = hsum256(c3) + tail_dot(a, a_signed, w3, k16, k);
    }
    for (; j < n; j++) {
        const int8_t *wj = w + j * k;
        __m256i acc = _mm256_setzero_si256();
        for (int64_t t = 0; t < k16; t += 16)
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(widen(a + t, a_signed), widen(wj + t, true)));
        c[j] = hsum256(acc) + tail_dot(a, a_signed, wj, k16, k);
    }
}

/* Two rows of a against four rows of w: each w slice loaded once serves
 * both rows (8 accumulators), halving the traffic over w. */
__attribute__((target("avx2"))) void tg__q_row2_avx2(int32_t *c0, int32_t *c1, const uint8_t *a0,
                                                    const uint8_t *a1, bool a_signed,
                                                    const int8_t *w, int64_t n, int64_t k)
{
    const int64_t k16 = k & ~(int64_t)15;
    int64_t j = 0;
    for (; j + 4 <= n; j += 4) {
        const int8_t *wr[4] = {w + j * k, w + (j + 1) * k, w + (j + 2) * k, w + (j + 3) * k};
        __m256i p0 = _mm256_setzero_si256(), p1 = p0, p2 = p0, p3 = p0;
        __m256i q0 = p0, q1 = p0, q2 = p0, q3 = p0;
        for (int64_t t = 0; t < k16; t += 16) {
            const __m256i x0 = widen(a0 + t, a_signed), x1 = widen(a1 + t, a_signed);
            __m256i wv = widen(wr[0] + t, true);
            p0 = _mm256_add_epi32(p0, _mm256_madd_epi16(x0, wv));
            q0 = _mm256_add_epi32(q0, _mm256_madd_epi16(x1, wv));
            wv = widen(wr[1] + t, true);
            p1 = _mm256_add_epi32(p1, _mm256_madd_epi16(x0, wv));
            q1 = _mm256_add_epi32(q1, _mm256_madd_epi16(x1, wv));
            wv = widen(wr[2] + t, true);
            p2 = _mm256_add_epi32(p2, _mm256_madd_epi16(x0, wv));
            q2 = _mm256_add_epi32(q2, _mm256_madd_epi16(x1, wv));
            wv = widen(wr[3] + t, true);
            p3 = _mm256_add_epi32(p3, _mm256_madd_epi16(x0, wv));
            q3 = _mm256_add_epi32(q3, _mm256_madd_epi16(x1, wv));
        }
        const __m256i ps[4] = {p0, p1, p2, p3}, qs[4] = {q0, q1, q2, q3};
        for (int r = 0; r < 4; r++) {
            c0[j + r] = hsum256(ps[r]) + tail_dot(a0, a_signed, wr[r], k16, k);
            c1[j + r] = hsum256(qs[r]) + tail_dot(a1, a_signed, wr[r], k16, k);
        }
    }
    if (j < n) {
        tg__q_row_avx2(c0 + j, a0, a_signed, w + j * k, n - j, k);
        tg__q_row_avx2(c1 + j, a1, a_signed, w + j * k, n - j, k);
    }
}

#define VNNI_TARGET __attribute__((target("avx512vnni,avx512bw,avx512f")))

/* The 64 bytes of a at t as u8 (top bit flipped for i8), zero past k. */
VNNI_TARGET static inline __m512i load_a(const uint8_t *a, bool a_signed, int64_t t, int64_t k)
{
    const int64_t rem = k - t;
    const __mmask64 m = rem >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << rem) - 1);
    __m512i v = _mm512_maskz_loadu_epi8(m, a + t);
    if (a_signed) v = _mm512_maskz_mov_epi8(m, _mm512_xor_si512(v, _mm512_set1_epi8((char)0x80)));
    return v;
}

VNNI_TARGET static inline __m512i load_w(const int8_t *w, int64_t t, int64_t k)
{
    const int64_t rem = k - t;
    const __mmask64 m = rem >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << rem) - 1);
    return _mm512_maskz_loadu_epi8(m, w + t);
}

VNNI_TARGET void tg__q_row_vnni(int32_t *c, const uint8_t *a, bool a_signed, const int8_t *w,
                                const int32_t *wsum, int64_t n, int64_t k)
{
    int64_t j = 0;
    for (; j + 4 <= n; j += 4) {
        const int8_t *w0 = w + j * k, *w1 = w0 + k, *w2 = w1 + k, *w3 = w2 + k;
        __m512i c0 = _mm512_setzero_si512(), c1 = c0, c2 = c0, c3 = c0;
        for (int64_t t = 0; t < k; t += 64) {
            const __m512i av = load_a(a, a_signed, t, k);
            c0 = _mm512_dpbusd_epi32(c0, av, load_w(w0, t, k));
            c1 = _mm512_dpbusd_epi32(c1, av, load_w(w1, t, k));
            c2 = _mm512_dpbusd_epi32(c2, av, load_w(w2, t, k));
            c3 = _mm512_dpbusd_epi32(c3, av, load_w(w3, t, k));
        }
        c[j] = _mm512_reduce_add_epi32(c0) - (a_signed ? 128 * wsum[j] : 0);
        c[j + 1] = _mm512_reduce_add_epi32(c1) - (a_signed ? 128 * wsum[j + 1] : 0);
        c[j + 2] = _mm512_reduce_add_epi32(c2) - (a_signed ? 128 * wsum[j + 2] : 0);
        c[j + 3] = _mm512_reduce_add_epi32(c3) - (a_signed ? 128 * wsum[j + 3] : 0);
    }
    for (; j < n; j++) {
        const int8_t *wj = w + j * k;
        __m512i acc = _mm512_setzero_si512();
        for (int64_t t = 0; t < k; t += 64)
            acc = _mm512_dpbusd_epi32(acc, load_a(a, a_signed, t, k), load_w(wj, t, k));
        c[j] = _mm512_reduce_add_epi32(acc) - (a_signed ? 128 * wsum[j] : 0);
    }
}

/* ---- packed tiles (layout in quant_internal.h) ----
 * 6 rows x 16 columns of i32 in 12 registers; per k pair one broadcast of
 * the row's two i16 activations against two 8-column slices. */
#define TILE_BODY(ADDTO)                                                                                \
    const int16_t *ar[TG__Q_MR];                                                         \
    for (int r = 0; r < TG__Q_MR; r++) ar[r] = a + (r < mr ? r : mr - 1) * lda;          \
    __m256i c00 = _mm256_setzero_si256(), c01 = c00, c10 = c00, c11 = c00, c20 = c00,      \
            c21 = c00, c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;   \
    for (int64_t t2 = 0; t2 < kd2; t2++) {                                                 \
        const __m256i b0 = _mm256_loadu_si256((const __m256i *)(panel + t2 * 32));         \
        const __m256i b1 = _mm256_loadu_si256((const __m256i *)(panel + t2 * 32 + 16));    \
        __m256i av;                                                                        \
        int32_t pair;                                                                      \
        memcpy(&pair, ar[0] + 2 * t2, 4); av = _mm256_set1_epi32(pair);                   \
        c00 = ADDTO(c00, av, b0); c01 = ADDTO(c01, av, b1);                                \
        memcpy(&pair, ar[1] + 2 * t2, 4); av = _mm256_set1_epi32(pair);                   \
        c10 = ADDTO(c10, av, b0); c11 = ADDTO(c11, av, b1);                                \
        memcpy(&pair, ar[2] + 2 * t2, 4); av = _mm256_set1_epi32(pair);                   \
        c20 = ADDTO(c20, av, b0); c21 = ADDTO(c21, av, b1);                                \
        memcpy(&pair, ar[3] + 2 * t2, 4); av = _mm256_set1_epi32(pair);                   \
        c30 = ADDTO(c30, av, b0); c31 = ADDTO(c31, av, b1);                                \
        memcpy(&pair, ar[4] + 2 * t2, 4); av = _mm256_set1_epi32(pair);                   \
        c40 = ADDTO(c40, av, b0); c41 = ADDTO(c41, av, b1);                                \
        memcpy(&pair, ar[5] + 2 * t2, 4); av = _mm256_set1_epi32(pair);                   \
        c50 = ADDTO(c50, av, b0); c51 = ADDTO(c51, av, b1);                                \
    }                                                                                      \
    const __m256i cs[12] = {c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51};   \
    for (int r = 0; r < TG__Q_MR; r++) {                                                   \
        _mm256_storeu_si256((__m256i *)(c + r * ldc), cs[2 * r]);                          \
        _mm256_storeu_si256((__m256i *)(c + r * ldc + 8), cs[2 * r + 1]);                  \
    }

#define AVX2_ADDTO(acc, x, y) _mm256_add_epi32((acc), _mm256_madd_epi16((x), (y)))
__attribute__((target("avx2"))) void tg__q_tile_avx2(int32_t *c, int64_t ldc, const int16_t *a,
                                                    int64_t lda, int mr, const int16_t *panel,
                                                    int64_t kd2)
{
    TILE_BODY(AVX2_ADDTO)
}

/* ---- the u8 x i8 packed GEMM (panels8; layout in quant_internal.h) ----
 * An 8-row x 32-column tile in 16 zmm accumulators: per group of four k,
 * two 64-byte weight vectors and, per row, one broadcast of four activation
 * bytes; vpdpbusd adds the four u8 x s8 products of each lane into its i32
 * without saturation. */
#define VNNI512_TARGET __attribute__((target("avx512vnni,avx512bw,avx512f")))

static inline __mmask16 lanes(int nr)
{
    return nr >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << nr) - 1);
}

/* Row `row`, columns j..j+nr (nr <= 16, j a multiple of 16) of c in the
 * layout of tg__q_gemm_packed. */
VNNI512_TARGET static inline void store16(int32_t *c, int64_t ldc, int64_t kgrp, int64_t row,
                                          int64_t j, int nr, __m512i v)
{
    if (kgrp == 0) {
        _mm512_mask_storeu_epi32(c + row * ldc + j, lanes(nr), v);
    } else if (kgrp % 16 == 0) {   /* the 16 columns lie in one group of kgrp */
        _mm512_mask_storeu_epi32(c + (j / kgrp) * ldc + row * kgrp + j % kgrp, lanes(nr), v);
    } else {
        int32_t tmp[16];
        _mm512_storeu_si512(tmp, v);
        for (int e = 0; e < nr; e++)
            c[((j + e) / kgrp) * ldc + row * kgrp + (j + e) % kgrp] = tmp[e];
    }
}

/* Rows i..i+mr, columns j0..j0+nr (nr <= 32) of c from the sums acc[2r],
 * acc[2r + 1] (columns j0.., j0+16..), less zoff times the column sums. */
VNNI512_TARGET static void store_rows(int32_t *c, int64_t ldc, int64_t kgrp, const __m512i *acc,
                                      int64_t i, int mr, int64_t j0, int nr,
                                      const int32_t *colsum, int32_t zoff)
{
    const int nr0 = nr < 16 ? nr : 16, nr1 = nr - nr0;
    const __m512i z = _mm512_set1_epi32(zoff);
    const __m512i k0 = _mm512_mullo_epi32(z, _mm512_maskz_loadu_epi32(lanes(nr0), colsum + j0));
    const __m512i k1 = nr1 > 0 ? _mm512_mullo_epi32(
                                     z, _mm512_maskz_loadu_epi32(lanes(nr1), colsum + j0 + 16))
                               : _mm512_setzero_si512();
    for (int r = 0; r < mr; r++) {
        store16(c, ldc, kgrp, i + r, j0, nr0, _mm512_sub_epi32(acc[2 * r], k0));
        if (nr1 > 0)
            store16(c, ldc, kgrp, i + r, j0 + 16, nr1, _mm512_sub_epi32(acc[2 * r + 1], k1));
    }
}

VNNI512_TARGET static inline __m512i bcast4(const uint8_t *p)
{
    int32_t v;
    memcpy(&v, p, sizeof v);
    return _mm512_set1_epi32(v);
}

#define ROW_STEP(r)                                                           \
    {                                                                         \
        const __m512i av = bcast4(a##r + 4 * t4);                             \
        c##r##0 = _mm512_dpbusd_epi32(c##r##0, av, b0);                       \
        c##r##1 = _mm512_dpbusd_epi32(c##r##1, av, b1);                       \
    }

/* Rows i..i+mr (mr <= 8; rows past mr repeat the last one and are not
 * stored), columns j0..j0+nr (nr <= 32) of block `panel`. */
VNNI512_TARGET static void tile_vnni8(int32_t *c, int64_t ldc, int64_t kgrp, const uint8_t *a,
                                      int64_t lda, int64_t i, int mr, const int8_t *panel,
                                      int64_t kq, int64_t j0, int nr, const int32_t *colsum,
                                      int32_t zoff)
{
    const uint8_t *ar[TG__Q_MR8];
    for (int r = 0; r < TG__Q_MR8; r++) ar[r] = a + (i + (r < mr ? r : mr - 1)) * lda;
    const uint8_t *a0 = ar[0], *a1 = ar[1], *a2 = ar[2], *a3 = ar[3], *a4 = ar[4], *a5 = ar[5],
                  *a6 = ar[6], *a7 = ar[7];
    __m512i c00 = _mm512_setzero_si512(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
            c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00, c60 = c00,
            c61 = c00, c70 = c00, c71 = c00;
    for (int64_t t4 = 0; t4 < kq; t4++) {
        const __m512i b0 = _mm512_loadu_si512(panel + t4 * 4 * TG__Q_NR8);
        const __m512i b1 = _mm512_loadu_si512(panel + t4 * 4 * TG__Q_NR8 + 64);
        ROW_STEP(0) ROW_STEP(1) ROW_STEP(2) ROW_STEP(3)
        ROW_STEP(4) ROW_STEP(5) ROW_STEP(6) ROW_STEP(7)
    }
    const __m512i acc[2 * TG__Q_MR8] = {c00, c01, c10, c11, c20, c21, c30, c31,
                                        c40, c41, c50, c51, c60, c61, c70, c71};
    store_rows(c, ldc, kgrp, acc, i, mr, j0, nr, colsum, zoff);
}
#undef ROW_STEP

VNNI512_TARGET void tg__q_store_tile(int32_t *c, int64_t ldc, int64_t kgrp, const int32_t *tmp,
                                     int64_t i, int mr, int64_t j0, int nr,
                                     const int32_t *colsum, int32_t zoff)
{
    for (int r0 = 0; r0 < mr; r0 += TG__Q_MR8) {
        __m512i acc[2 * TG__Q_MR8];
        for (int r = 0; r < 2 * TG__Q_MR8; r++)
            acc[r] = _mm512_loadu_si512(tmp + (r0 + r / 2) * TG__Q_NR8 + 16 * (r % 2));
        store_rows(c, ldc, kgrp, acc, i + r0, mr - r0 < TG__Q_MR8 ? mr - r0 : TG__Q_MR8, j0, nr,
                   colsum, zoff);
    }
}

/* Column blocks outside: one block's panel (kqp * 128 bytes) stays in cache
 * while every row block of a sweeps past it. */
VNNI512_TARGET void tg__q_gemm_vnni(int32_t *c, int64_t ldc, int64_t kgrp, const uint8_t *a,
                                    int64_t lda, int64_t m, const tg_qweight *w, int64_t gi,
                                    int32_t zoff)
{
    const int8_t *panels = tg__q_group_panels8(w, gi);
    const int32_t *colsum = w->colsum + gi * w->n;
    for (int64_t blk = 0; blk < w->nblk8; blk++) {
        const int64_t j0 = blk * TG__Q_NR8;
        const int nr = (int)(w->n - j0 < TG__Q_NR8 ? w->n - j0 : TG__Q_NR8);
        const int8_t *panel = panels + blk * w->kqp * 4 * TG__Q_NR8;
        for (int64_t i = 0; i < m; i += TG__Q_MR8) {
            const int mr = (int)(m - i < TG__Q_MR8 ? m - i : TG__Q_MR8);
            tile_vnni8(c, ldc, kgrp, a, lda, i, mr, panel, w->kq, j0, nr, colsum, zoff);
        }
    }
}

#else /* not x86: only the portable kernel exists */

void tg__q_tile_avx2(int32_t *c, int64_t ldc, const int16_t *a, int64_t lda, int mr,
                     const int16_t *panel, int64_t kd2)
{
    TG_ASSERT(!"avx2 kernel called on a non-x86 build");
}
void tg__q_row2_avx2(int32_t *c0, int32_t *c1, const uint8_t *a0, const uint8_t *a1,
                     bool a_signed, const int8_t *w, int64_t n, int64_t k)
{
    TG_ASSERT(!"avx2 kernel called on a non-x86 build");
}

void tg__q_gemm_vnni(int32_t *c, int64_t ldc, int64_t kgrp, const uint8_t *a, int64_t lda,
                     int64_t m, const tg_qweight *w, int64_t gi, int32_t zoff)
{
    TG_ASSERT(!"vnni kernel called on a non-x86 build");
}

void tg__q_store_tile(int32_t *c, int64_t ldc, int64_t kgrp, const int32_t *tmp, int64_t i,
                      int mr, int64_t j0, int nr, const int32_t *colsum, int32_t zoff)
{
    TG_ASSERT(!"vnni store called on a non-x86 build");
}

bool tg__q_cpu_has_avx2(void) { return false; }
bool tg__q_cpu_has_vnni(void) { return false; }
void tg__q_row_avx2(int32_t *c, const uint8_t *a, bool a_signed, const int8_t *w, int64_t n,
                    int64_t k)
{
    TG_ASSERT(!"avx2 kernel called on a non-x86 build");
}
void tg__q_row_vnni(int32_t *c, const uint8_t *a, bool a_signed, const int8_t *w,
                    const int32_t *wsum, int64_t n, int64_t k)
{
    TG_ASSERT(!"vnni kernel called on a non-x86 build");
}
#endif
