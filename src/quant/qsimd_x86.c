/* src/quant/qsimd_x86.c - SIMD forms of the quantization formulas:
 * requantization by rows (AVX-512 and AVX2) and one channel per lane, and tg_quantize of
 * contiguous f32.  Each gives the scalar formula's integers (tests in
 * test_quant_kernels.c and test_quant.c). */
#include <stddef.h>
#include <string.h>

#include "quant/quant_internal.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

/* tg__q_requant_one on eight lanes of i64, each with its own parameters
 * (i64 lanes; shift in [1, 62]): the same clamp of acc + bias to i32, the
 * exact product with m0 (vpmuldq: the low 32 bits of each lane, signed), the
 * floor shift, the half-to-even carry rem + (q & 1) > half, the zero point
 * and the clamp to [lo, hi]. */
typedef struct requant8 {
    __m512i bias, m0, shift, zp, lo, hi;
} requant8;

__attribute__((target("avx512f"))) static inline __m512i requant_lanes(__m512i acc,
                                                                      const requant8 *p)
{
    const __m512i one = _mm512_set1_epi64(1);
    const __m512i i32lo = _mm512_set1_epi64(INT32_MIN), i32hi = _mm512_set1_epi64(INT32_MAX);
    const __m512i s = _mm512_min_epi64(_mm512_max_epi64(_mm512_add_epi64(acc, p->bias), i32lo),
                                       i32hi);
    const __m512i v = _mm512_mul_epi32(s, p->m0);
    __m512i q = _mm512_srav_epi64(v, p->shift);
    const __m512i mask = _mm512_sub_epi64(_mm512_sllv_epi64(one, p->shift), one);
    const __m512i rem = _mm512_and_si512(v, mask);
    const __m512i half = _mm512_sllv_epi64(one, _mm512_sub_epi64(p->shift, one));
    const __mmask8 up =
        _mm512_cmpgt_epi64_mask(_mm512_add_epi64(rem, _mm512_and_si512(q, one)), half);
    q = _mm512_mask_add_epi64(q, up, q, one);
    return _mm512_min_epi64(_mm512_max_epi64(_mm512_add_epi64(q, p->zp), p->lo), p->hi);
}

/* One requantization r over `rows` runs of n read ss apart and written ds
 * apart. */
__attribute__((target("avx512f"))) void tg__q_requant_avx512(uint8_t *y, int64_t ds,
                                                             const int32_t *src, int64_t rows,
                                                             int64_t n, int64_t ss,
                                                             const tg__q_requant *r)
{
    const requant8 p = {.bias = _mm512_set1_epi64(r->bias), .m0 = _mm512_set1_epi64(r->m0),
                        .shift = _mm512_set1_epi64(r->shift), .zp = _mm512_set1_epi64(r->zp),
                        .lo = _mm512_set1_epi64(r->lo), .hi = _mm512_set1_epi64(r->hi)};
    for (int64_t row = 0; row < rows; row++, src += ss, y += ds) {
        for (int64_t i = 0; i < n; i += 8) {
            const __mmask8 m = n - i >= 8 ? (__mmask8)0xff : (__mmask8)((1u << (n - i)) - 1);
            const __m512i acc = _mm512_cvtepi32_epi64(
                _mm512_castsi512_si256(_mm512_maskz_loadu_epi32(m, src + i)));
            _mm512_mask_cvtepi64_storeu_epi8(y + i, m, requant_lanes(acc, &p));
        }
    }
}

/* The same on four lanes of i64 with AVX2 only, which has no 64-bit
 * arithmetic shift, min or max: the shift is done on v ^ sign (a logical
 * shift of the ones' complement of a negative v floors it too), per lane
 * (vpsrlvq), min and max by compare and blend.  Each lane has its own
 * parameters (shift in [1, 62]). */
__attribute__((target("avx2"))) static inline __m256i clamp64_avx2(__m256i v, __m256i lo,
                                                                    __m256i hi)
{
    v = _mm256_blendv_epi8(v, lo, _mm256_cmpgt_epi64(lo, v));
    return _mm256_blendv_epi8(v, hi, _mm256_cmpgt_epi64(v, hi));
}

typedef struct requant4 {
    __m256i bias, m0, shift, mask, half, zp, lo, hi;
} requant4;

/* The lanes' parameters, with the shift's mask and half derived. */
__attribute__((target("avx2"))) static inline requant4 requant4_make(__m256i bias, __m256i m0,
                                                                     __m256i shift, __m256i zp,
                                                                     __m256i lo, __m256i hi)
{
    const __m256i one = _mm256_set1_epi64x(1);
    return (requant4){.bias = bias, .m0 = m0, .shift = shift,
                      .mask = _mm256_sub_epi64(_mm256_sllv_epi64(one, shift), one),
                      .half = _mm256_sllv_epi64(one, _mm256_sub_epi64(shift, one)),
                      .zp = zp, .lo = lo, .hi = hi};
}

__attribute__((target("avx2"))) static inline __m256i requant_lanes_avx2(__m256i acc,
                                                                         const requant4 *p)
{
    const __m256i one = _mm256_set1_epi64x(1), zero = _mm256_setzero_si256();
    const __m256i s = clamp64_avx2(_mm256_add_epi64(acc, p->bias),
                                   _mm256_set1_epi64x(INT32_MIN), _mm256_set1_epi64x(INT32_MAX));
    const __m256i v = _mm256_mul_epi32(s, p->m0);
    const __m256i sign = _mm256_cmpgt_epi64(zero, v);
    const __m256i q =
        _mm256_xor_si256(_mm256_srlv_epi64(_mm256_xor_si256(v, sign), p->shift), sign);
    const __m256i rem = _mm256_and_si256(v, p->mask);
    const __m256i up = _mm256_cmpgt_epi64(_mm256_add_epi64(rem, _mm256_and_si256(q, one)), p->half);
    return clamp64_avx2(_mm256_add_epi64(_mm256_sub_epi64(q, up), p->zp), p->lo, p->hi);
}

/* Eight accumulators at a, requantized by p into eight bytes (the low 64 bits). */
__attribute__((target("avx2"))) static inline __m128i requant8_avx2(const int32_t *a,
                                                                    const requant4 *p,
                                                                    bool is_signed)
{
    const __m256i low32 = _mm256_setr_epi32(0, 2, 4, 6, 0, 0, 0, 0);
    const __m128i a0 = _mm_loadu_si128((const __m128i *)a);
    const __m128i a1 = _mm_loadu_si128((const __m128i *)(a + 4));
    const __m256i q0 = requant_lanes_avx2(_mm256_cvtepi32_epi64(a0), p);
    const __m256i q1 = requant_lanes_avx2(_mm256_cvtepi32_epi64(a1), p);
    const __m128i d0 = _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(q0, low32));
    const __m128i d1 = _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(q1, low32));
    const __m128i w = _mm_packs_epi32(d0, d1);   /* in [-128, 255]: exact */
    return is_signed ? _mm_packs_epi16(w, w) : _mm_packus_epi16(w, w);
}

__attribute__((target("avx2"))) void tg__q_requant_avx2(uint8_t *y, bool is_signed, int64_t ds,
                                                        const int32_t *src, int64_t rows,
                                                        int64_t n, int64_t ss,
                                                        const tg__q_requant *r)
{
    const requant4 p = requant4_make(
        _mm256_set1_epi64x(r->bias), _mm256_set1_epi64x(r->m0), _mm256_set1_epi64x(r->shift),
        _mm256_set1_epi64x(r->zp), _mm256_set1_epi64x(r->lo), _mm256_set1_epi64x(r->hi));
    for (int64_t row = 0; row < rows; row++, src += ss, y += ds) {
        int64_t i = 0;
        for (; i + 8 <= n; i += 8)
            _mm_storel_epi64((__m128i *)(y + i), requant8_avx2(src + i, &p, is_signed));
        if (i < n) {   /* the rest of a short row (a DCGAN plane's 14), through a copy */
            int32_t a[8] = {0};
            uint8_t b[8];
            memcpy(a, src + i, (size_t)(n - i) * sizeof *a);
            _mm_storel_epi64((__m128i *)b, requant8_avx2(a, &p, is_signed));
            memcpy(y + i, b, (size_t)(n - i));
        }
    }
}

_Static_assert(sizeof(tg__q_requant) == 6 * sizeof(int32_t) &&
                   offsetof(tg__q_requant, m0) == 4 && offsetof(tg__q_requant, shift) == 8 &&
                   offsetof(tg__q_requant, zp) == 12 && offsetof(tg__q_requant, lo) == 16 &&
                   offsetof(tg__q_requant, hi) == 20,
               "tg__q_requant_channels_avx512 gathers the fields as six i32");

/* Field f (0 bias ... 5 hi) of r[0..8), widened to i64 lanes. */
__attribute__((target("avx512f,avx2"))) static inline __m512i field8(const tg__q_requant *r,
                                                                     int f)
{
    const __m256i idx = _mm256_setr_epi32(0, 6, 12, 18, 24, 30, 36, 42);
    return _mm512_cvtepi32_epi64(_mm256_i32gather_epi32((const int *)r + f, idx, 4));
}

/* Channels [c0, c1) of every row by the scalar formula. */
static void requant_channels_scalar(uint8_t *y, int64_t ys, const int32_t *acc, int64_t as,
                                    int64_t rows, int64_t c0, int64_t c1,
                                    const tg__q_requant *r)
{
    for (int64_t row = 0; row < rows; row++)
        for (int64_t c = c0; c < c1; c++)
            y[row * ys + c] = (uint8_t)tg__q_requant_one(acc[row * as + c], &r[c]);
}

/* One channel per lane, its requantization gathered from r[] once per eight
 * channels and used for every row. */
__attribute__((target("avx512f,avx2"))) void tg__q_requant_channels_avx512(
    uint8_t *y, int64_t ys, const int32_t *acc, int64_t as, int64_t rows, int64_t n,
    const tg__q_requant *r)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const requant8 p = {.bias = field8(r + i, 0), .m0 = field8(r + i, 1),
                            .shift = field8(r + i, 2), .zp = field8(r + i, 3),
                            .lo = field8(r + i, 4), .hi = field8(r + i, 5)};
        if (_mm512_cmple_epi64_mask(p.shift, _mm512_setzero_si512())) {   /* the scalar rule */
            requant_channels_scalar(y, ys, acc, as, rows, i, i + 8, r);
            continue;
        }
        for (int64_t row = 0; row < rows; row++) {
            const int32_t *ar = acc + row * as + i;
            const __m512i a = _mm512_cvtepi32_epi64(_mm256_loadu_si256((const __m256i *)ar));
            _mm512_mask_cvtepi64_storeu_epi8(y + row * ys + i, 0xff, requant_lanes(a, &p));
        }
    }
    requant_channels_scalar(y, ys, acc, as, rows, i, n, r);
}

/* The same with AVX2, four channels at a time. */
__attribute__((target("avx2"))) void tg__q_requant_channels_avx2(uint8_t *y, int64_t ys,
                                                                 const int32_t *acc, int64_t as,
                                                                 int64_t rows, int64_t n,
                                                                 const tg__q_requant *r)
{
    const __m128i idx = _mm_setr_epi32(0, 6, 12, 18);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
#define FIELD4(f) _mm256_cvtepi32_epi64(_mm_i32gather_epi32((const int *)(r + i) + (f), idx, 4))
        const requant4 p = requant4_make(FIELD4(0), FIELD4(1), FIELD4(2), FIELD4(3), FIELD4(4),
                                         FIELD4(5));
#undef FIELD4
        if (_mm256_movemask_epi8(_mm256_cmpgt_epi64(_mm256_set1_epi64x(1), p.shift))) {
            requant_channels_scalar(y, ys, acc, as, rows, i, i + 4, r);   /* a shift <= 0 */
            continue;
        }
        for (int64_t row = 0; row < rows; row++) {
            const __m128i a = _mm_loadu_si128((const __m128i *)(acc + row * as + i));
            int64_t lanes[4];
            _mm256_storeu_si256((__m256i *)lanes,
                                requant_lanes_avx2(_mm256_cvtepi32_epi64(a), &p));
            for (int e = 0; e < 4; e++) y[row * ys + i + e] = (uint8_t)lanes[e];
        }
    }
    requant_channels_scalar(y, ys, acc, as, rows, i, n, r);
}

/* tg_quantize's formula on n contiguous f32, eight lanes of f64 at a time:
 * r = rint(x / scale) + zp (correctly rounded division, rounding in the
 * current mode, as rint), NaN -> zp, clamp to [lo, hi], the low byte
 * stored. */
__attribute__((target("avx512f"))) void tg__q_quantize_avx512(uint8_t *y, const float *x,
                                                              int64_t n, double scale,
                                                              int32_t zp, int32_t lo, int32_t hi)
{
    const __m512d s = _mm512_set1_pd(scale), z = _mm512_set1_pd(zp);
    const __m512d dlo = _mm512_set1_pd(lo), dhi = _mm512_set1_pd(hi);
    for (int64_t i = 0; i < n; i += 8) {
        const __mmask8 m = n - i >= 8 ? (__mmask8)0xff : (__mmask8)((1u << (n - i)) - 1);
        const __m512d v = _mm512_cvtps_pd(_mm512_castps512_ps256(_mm512_maskz_loadu_ps(m, x + i)));
        __m512d r = _mm512_add_pd(
            _mm512_roundscale_pd(_mm512_div_pd(v, s), _MM_FROUND_CUR_DIRECTION), z);
        const __mmask8 nan = _mm512_cmp_pd_mask(r, r, _CMP_UNORD_Q);
        r = _mm512_mask_blend_pd(nan, _mm512_min_pd(_mm512_max_pd(r, dlo), dhi), z);
        _mm512_mask_cvtepi32_storeu_epi8(y + i, m, _mm512_castsi256_si512(_mm512_cvtpd_epi32(r)));
    }
}

#else /* not x86 */

void tg__q_requant_channels_avx2(uint8_t *y, int64_t ys, const int32_t *acc, int64_t as,
                                 int64_t rows, int64_t n, const tg__q_requant *r)
{
    TG_ASSERT(!"avx2 requantization called on a non-x86 build");
}
void tg__q_requant_avx2(uint8_t *y, bool is_signed, int64_t ds, const int32_t *src,
                        int64_t rows, int64_t n, int64_t ss, const tg__q_requant *r)
{
    TG_ASSERT(!"avx2 requantization called on a non-x86 build");
}
void tg__q_requant_avx512(uint8_t *y, int64_t ds, const int32_t *src, int64_t rows, int64_t n,
                          int64_t ss, const tg__q_requant *r)
{
    TG_ASSERT(!"avx512 requantization called on a non-x86 build");
}
void tg__q_requant_channels_avx512(uint8_t *y, int64_t ys, const int32_t *acc, int64_t as,
                                   int64_t rows, int64_t n, const tg__q_requant *r)
{
    TG_ASSERT(!"avx512 requantization called on a non-x86 build");
}
void tg__q_quantize_avx512(uint8_t *y, const float *x, int64_t n, double scale, int32_t zp,
                           int32_t lo, int32_t hi)
{
    TG_ASSERT(!"avx512 quantization called on a non-x86 build");
}
#endif
