/* src/core/half_simd.h - the x86 AVX2/F16C pieces shared by the bulk half
 * conversions (dtype.c) and the fused half activations (ops/activation_half.c).
 * Defines TG__HAVE_X86_SIMD where the compiler can target them; callers still
 * ask tg__cpu_has_half_simd() before running any of it. */
#ifndef TAPEGRAD_HALF_SIMD_H
#define TAPEGRAD_HALF_SIMD_H

#include "core/core.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define TG__HAVE_X86_SIMD 1
#define TG__AVX2 __attribute__((target("avx2,f16c")))

/* Eight f32 bit patterns -> eight bf16 patterns in the low halves of the
 * 32-bit lanes, exactly as the scalar tg_f32_to_bf16: (x + 0x7FFF + lsb) >> 16
 * rounds to nearest even (no NaN reaches the add's wrap-around, they are
 * blended out); NaN becomes its top half with the quiet bit 0x0040 set. */
TG__AVX2 static inline __m256i tg__bf16x8(__m256i x)
{
    const __m256i abs = _mm256_and_si256(x, _mm256_set1_epi32(0x7FFFFFFF));
    const __m256i nan = _mm256_cmpgt_epi32(abs, _mm256_set1_epi32(0x7F800000));
    const __m256i top = _mm256_srli_epi32(x, 16);
    const __m256i lsb = _mm256_and_si256(top, _mm256_set1_epi32(1));
    const __m256i bias = _mm256_add_epi32(_mm256_set1_epi32(0x7FFF), lsb);
    const __m256i rne = _mm256_srli_epi32(_mm256_add_epi32(x, bias), 16);
    const __m256i qnan = _mm256_or_si256(top, _mm256_set1_epi32(0x0040));
    return _mm256_blendv_epi8(rne, qnan, nan);
}

/* Eight halves of dtype dt (TG_F16 or TG_BF16) at p as f32 (exact). */
TG__AVX2 static inline __m256 tg__half_load8(tg_dtype dt, const uint16_t *p)
{
    const __m128i h = _mm_loadu_si128((const __m128i *)(const void *)p);
    if (dt == TG_F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* Eight f32 rounded (nearest even) to halves of dtype dt at p: the bits of
 * the bulk conversions. */
TG__AVX2 static inline void tg__half_store8(tg_dtype dt, uint16_t *p, __m256 v)
{
    __m128i h;
    if (dt == TG_F16) {
        h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    } else {
        const __m256i b = tg__bf16x8(_mm256_castps_si256(v));   /* every lane <= 0xFFFF */
        h = _mm_packus_epi32(_mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1));
    }
    _mm_storeu_si128((__m128i *)(void *)p, h);
}

/* The same sixteen at a time, for CPUs with AVX-512 BW (callers ask
 * tg__cpu_has_avx512bw() first, core.h). */
#define TG__AVX512 __attribute__((target("avx512f,avx512bw,avx2,f16c")))

/* Sixteen halves of dtype dt at p as f32 (exact). */
TG__AVX512 static inline __m512 tg__half_load16(tg_dtype dt, const uint16_t *p)
{
    const __m256i h = _mm256_loadu_si256((const __m256i *)(const void *)p);
    if (dt == TG_F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* Sixteen f32 rounded into halves at p: tg__half_store8's bits. */
TG__AVX512 static inline void tg__half_store16(tg_dtype dt, uint16_t *p, __m512 v)
{
    __m256i h;
    if (dt == TG_F16) {
        h = _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    } else {
        /* tg__bf16x8's rounding: (x + 0x7FFF + lsb) >> 16, NaN its top half
         * with the quiet bit set */
        const __m512i x = _mm512_castps_si512(v);
        const __mmask16 nan = _mm512_cmpgt_epi32_mask(
            _mm512_and_si512(x, _mm512_set1_epi32(0x7FFFFFFF)), _mm512_set1_epi32(0x7F800000));
        const __m512i top = _mm512_srli_epi32(x, 16);
        const __m512i bias = _mm512_add_epi32(_mm512_set1_epi32(0x7FFF),
                                              _mm512_and_si512(top, _mm512_set1_epi32(1)));
        const __m512i rne = _mm512_srli_epi32(_mm512_add_epi32(x, bias), 16);
        h = _mm512_cvtepi32_epi16(_mm512_mask_or_epi32(rne, nan, top, _mm512_set1_epi32(0x0040)));
    }
    _mm256_storeu_si256((__m256i *)(void *)p, h);
}
#endif

#endif
