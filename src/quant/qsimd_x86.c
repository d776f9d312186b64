/* src/quant/qsimd_x86.c - SIMD forms of the quantization formulas:
 * requantization by rows and one channel per lane, tg_quantize of
 * contiguous f32 and tg_dequantize of contiguous bytes, in AVX-512 and
 * AVX2.  Each gives the scalar formula's integers (or floats): tests in
 * test_quant_kernels.c and test_quant.c. */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "quant/quant_internal.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

/* tg__q_requant_one in f64 lanes, for shift in [1, TG__Q_F64_MAX_SHIFT]:
 * s = acc + bias clamped to i32 (exact in f64), times mult = m0 * 2^-shift
 * (exact), rounded to nearest with ties to even, plus zp, clamped to
 * [lo, hi].  The one rounding of the product to f64 (relative error at
 * most 2^-53) moves a result that the clamp keeps (|q| < 2^9) by at most
 * 2^9 * 2^-53 = 2^-44, while a non-tie lies at least 2^-shift from the
 * nearest half (the exact product is an integer over 2^shift); a tie (an
 * odd multiple of 1/2 below 2^9) is exact in f64.  So the f64 rounding
 * gives the exact rule's integer. */
typedef struct requant_f64 {
    double bias, mult, zp, lo, hi;
} requant_f64;

/* 2^-s for s in [1, TG__Q_F64_MAX_SHIFT], exactly, from its bits (a call
 * to ldexp per run of a few vectors costs about 1.5% of an int8 layer); 0
 * for other s, whose rows take the scalar formula. */
static inline double pow2_neg(int s)
{
    if (s < 1 || s > TG__Q_F64_MAX_SHIFT) return 0.0;
    const uint64_t bits = (uint64_t)(1023 - s) << 52;
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
}

/* r's parameters in f64 (the multiplier 0 when r's shift is outside [1,
 * TG__Q_F64_MAX_SHIFT]). */
static inline requant_f64 requant_f64_of(const tg__q_requant *r)
{
    return (requant_f64){.bias = r->bias, .mult = (double)r->m0 * pow2_neg(r->shift),
                         .zp = r->zp, .lo = r->lo, .hi = r->hi};
}

/* A row of n by r through the scalar formula when r's shift is outside
 * [1, TG__Q_F64_MAX_SHIFT] (true), else nothing (false). */
static bool scalar_row(uint8_t *y, const int32_t *src, int64_t n, const tg__q_requant *r)
{
    if (r->shift >= 1 && r->shift <= TG__Q_F64_MAX_SHIFT) return false;
    for (int64_t i = 0; i < n; i++) y[i] = (uint8_t)tg__q_requant_one(src[i], r);
    return true;
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

static bool shifts_in_f64_range(const tg__q_requant *r, int64_t n)
{
    for (int64_t c = 0; c < n; c++)
        if (r[c].shift < 1 || r[c].shift > TG__Q_F64_MAX_SHIFT) return false;
    return true;
}

/* ---- AVX-512 ---- */

/* Eight lanes of parameters (per-lane vectors). */
typedef struct lanes8 {
    __m512d bias, mult, zp, lo, hi;
} lanes8;

__attribute__((target("avx512f"))) static inline __m256i requant8_avx512(__m256i acc,
                                                                        const lanes8 *p)
{
    __m512d v = _mm512_add_pd(_mm512_cvtepi32_pd(acc), p->bias);
    v = _mm512_min_pd(_mm512_max_pd(v, _mm512_set1_pd(INT32_MIN)), _mm512_set1_pd(INT32_MAX));
    v = _mm512_roundscale_pd(_mm512_mul_pd(v, p->mult),
                             _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    v = _mm512_min_pd(_mm512_max_pd(_mm512_add_pd(v, p->zp), p->lo), p->hi);
    return _mm512_cvtpd_epi32(v);
}

/* r's parameters in eight lanes each. */
__attribute__((target("avx512f"))) static inline lanes8 lanes8_of(const tg__q_requant *r)
{
    const requant_f64 f = requant_f64_of(r);
    return (lanes8){.bias = _mm512_set1_pd(f.bias), .mult = _mm512_set1_pd(f.mult),
                    .zp = _mm512_set1_pd(f.zp), .lo = _mm512_set1_pd(f.lo),
                    .hi = _mm512_set1_pd(f.hi)};
}

/* Row i of the `rows` runs of n (read ss apart, written ds apart) by its
 * requantization r[i * rs] (rs 0: r for every row); the low byte of each
 * result stored (u8 or i8 alike).  A row whose shift is outside [1,
 * TG__Q_F64_MAX_SHIFT] runs the scalar formula. */
__attribute__((target("avx512f"))) void tg__q_requant_avx512(uint8_t *y, int64_t ds,
                                                             const int32_t *src, int64_t rows,
                                                             int64_t n, int64_t ss,
                                                             const tg__q_requant *r, int64_t rs)
{
    lanes8 p = lanes8_of(r);
    const tg__q_requant *pr = r;   /* the requantization in p */
    for (int64_t row = 0; row < rows; row++, src += ss, y += ds) {
        const tg__q_requant *ri = r + row * rs;
        if (scalar_row(y, src, n, ri)) continue;
        if (ri != pr) p = lanes8_of(ri), pr = ri;
        for (int64_t i = 0; i < n; i += 8) {
            const __mmask8 m = n - i >= 8 ? (__mmask8)0xff : (__mmask8)((1u << (n - i)) - 1);
            const __m256i acc = _mm512_castsi512_si256(_mm512_maskz_loadu_epi32(m, src + i));
            _mm512_mask_cvtepi32_storeu_epi8(y + i, m,
                                             _mm512_castsi256_si512(requant8_avx512(acc, &p)));
        }
    }
}

_Static_assert(sizeof(tg__q_requant) == 6 * sizeof(int32_t) &&
                   offsetof(tg__q_requant, m0) == 4 && offsetof(tg__q_requant, shift) == 8 &&
                   offsetof(tg__q_requant, zp) == 12 && offsetof(tg__q_requant, lo) == 16 &&
                   offsetof(tg__q_requant, hi) == 20,
               "the per-channel requantizations gather the fields as six i32");

/* Field f (0 bias ... 5 hi) of r[0..8) as i32 lanes. */
__attribute__((target("avx512f,avx2"))) static inline __m256i field8(const tg__q_requant *r,
                                                                     int f)
{
    const __m256i idx = _mm256_setr_epi32(0, 6, 12, 18, 24, 30, 36, 42);
    return _mm256_i32gather_epi32((const int *)r + f, idx, 4);
}

/* One channel per lane, its requantization gathered from r[] once per eight
 * channels and used for every row. */
__attribute__((target("avx512f,avx2"))) void tg__q_requant_channels_avx512(
    uint8_t *y, int64_t ys, const int32_t *acc, int64_t as, int64_t rows, int64_t n,
    const tg__q_requant *r)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        if (!shifts_in_f64_range(r + i, 8)) {
            requant_channels_scalar(y, ys, acc, as, rows, i, i + 8, r);
            continue;
        }
        const lanes8 p = {
            .bias = _mm512_cvtepi32_pd(field8(r + i, 0)),
            .mult = _mm512_scalef_pd(_mm512_cvtepi32_pd(field8(r + i, 1)),
                                     _mm512_sub_pd(_mm512_setzero_pd(),
                                                   _mm512_cvtepi32_pd(field8(r + i, 2)))),
            .zp = _mm512_cvtepi32_pd(field8(r + i, 3)),
            .lo = _mm512_cvtepi32_pd(field8(r + i, 4)),
            .hi = _mm512_cvtepi32_pd(field8(r + i, 5))};
        for (int64_t row = 0; row < rows; row++) {
            const __m256i a = _mm256_loadu_si256((const __m256i *)(acc + row * as + i));
            _mm512_mask_cvtepi32_storeu_epi8(y + row * ys + i, 0xff,
                                             _mm512_castsi256_si512(requant8_avx512(a, &p)));
        }
    }
    requant_channels_scalar(y, ys, acc, as, rows, i, n, r);
}

/* ---- AVX2 ---- */

typedef struct lanes4 {
    __m256d bias, mult, zp, lo, hi;
} lanes4;

/* Four accumulators, requantized into four i32. */
__attribute__((target("avx2"))) static inline __m128i requant4_avx2(__m128i acc,
                                                                    const lanes4 *p)
{
    __m256d v = _mm256_add_pd(_mm256_cvtepi32_pd(acc), p->bias);
    v = _mm256_min_pd(_mm256_max_pd(v, _mm256_set1_pd(INT32_MIN)), _mm256_set1_pd(INT32_MAX));
    v = _mm256_round_pd(_mm256_mul_pd(v, p->mult), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    v = _mm256_min_pd(_mm256_max_pd(_mm256_add_pd(v, p->zp), p->lo), p->hi);
    return _mm256_cvtpd_epi32(v);
}

/* Eight accumulators at a into eight bytes (the low 64 bits). */
__attribute__((target("avx2"))) static inline __m128i requant8_avx2(const int32_t *a,
                                                                    const lanes4 *p,
                                                                    bool is_signed)
{
    const __m128i d0 = requant4_avx2(_mm_loadu_si128((const __m128i *)a), p);
    const __m128i d1 = requant4_avx2(_mm_loadu_si128((const __m128i *)(a + 4)), p);
    const __m128i w = _mm_packs_epi32(d0, d1);   /* in [-128, 255]: exact */
    return is_signed ? _mm_packs_epi16(w, w) : _mm_packus_epi16(w, w);
}

/* r's parameters in four lanes each. */
__attribute__((target("avx2"))) static inline lanes4 lanes4_of(const tg__q_requant *r)
{
    const requant_f64 f = requant_f64_of(r);
    return (lanes4){.bias = _mm256_set1_pd(f.bias), .mult = _mm256_set1_pd(f.mult),
                    .zp = _mm256_set1_pd(f.zp), .lo = _mm256_set1_pd(f.lo),
                    .hi = _mm256_set1_pd(f.hi)};
}

__attribute__((target("avx2"))) void tg__q_requant_avx2(uint8_t *y, bool is_signed, int64_t ds,
                                                        const int32_t *src, int64_t rows,
                                                        int64_t n, int64_t ss,
                                                        const tg__q_requant *r, int64_t rs)
{
    lanes4 p = lanes4_of(r);
    const tg__q_requant *pr = r;   /* the requantization in p */
    for (int64_t row = 0; row < rows; row++, src += ss, y += ds) {
        const tg__q_requant *ri = r + row * rs;
        if (scalar_row(y, src, n, ri)) continue;
        if (ri != pr) p = lanes4_of(ri), pr = ri;
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

/* The same with AVX2, four channels at a time: mult = m0 * 2^-shift with
 * 2^-shift made from its exponent bits. */
__attribute__((target("avx2"))) void tg__q_requant_channels_avx2(uint8_t *y, int64_t ys,
                                                                 const int32_t *acc, int64_t as,
                                                                 int64_t rows, int64_t n,
                                                                 const tg__q_requant *r)
{
    const __m128i idx = _mm_setr_epi32(0, 6, 12, 18);
    const __m128i low_bytes = _mm_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
                                            -1, -1);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        if (!shifts_in_f64_range(r + i, 4)) {
            requant_channels_scalar(y, ys, acc, as, rows, i, i + 4, r);
            continue;
        }
#define FIELD4(f) _mm_i32gather_epi32((const int *)(r + i) + (f), idx, 4)
        const __m256i pow2 = _mm256_slli_epi64(
            _mm256_sub_epi64(_mm256_set1_epi64x(1023), _mm256_cvtepi32_epi64(FIELD4(2))), 52);
        const lanes4 p = {.bias = _mm256_cvtepi32_pd(FIELD4(0)),
                          .mult = _mm256_mul_pd(_mm256_cvtepi32_pd(FIELD4(1)),
                                                _mm256_castsi256_pd(pow2)),
                          .zp = _mm256_cvtepi32_pd(FIELD4(3)),
                          .lo = _mm256_cvtepi32_pd(FIELD4(4)),
                          .hi = _mm256_cvtepi32_pd(FIELD4(5))};
#undef FIELD4
        for (int64_t row = 0; row < rows; row++) {
            const __m128i a = _mm_loadu_si128((const __m128i *)(acc + row * as + i));
            const int32_t b = _mm_cvtsi128_si32(_mm_shuffle_epi8(requant4_avx2(a, &p), low_bytes));
            memcpy(y + row * ys + i, &b, 4);
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

/* The same four lanes at a time with AVX2. */
__attribute__((target("avx2"))) void tg__q_quantize_avx2(uint8_t *y, const float *x, int64_t n,
                                                         double scale, int32_t zp, int32_t lo,
                                                         int32_t hi)
{
    const __m256d s = _mm256_set1_pd(scale), z = _mm256_set1_pd(zp);
    const __m256d dlo = _mm256_set1_pd(lo), dhi = _mm256_set1_pd(hi);
    const __m128i low_bytes = _mm_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
                                            -1, -1);
    int64_t i = 0;
    for (; i < n; i += 4) {
        float t[4] = {0};
        const float *xi = x + i;
        if (n - i < 4) memcpy(t, x + i, (size_t)(n - i) * sizeof *t), xi = t;
        const __m256d v = _mm256_cvtps_pd(_mm_loadu_ps(xi));
        __m256d r = _mm256_add_pd(_mm256_round_pd(_mm256_div_pd(v, s), _MM_FROUND_CUR_DIRECTION), z);
        const __m256d nan = _mm256_cmp_pd(r, r, _CMP_UNORD_Q);
        r = _mm256_blendv_pd(_mm256_min_pd(_mm256_max_pd(r, dlo), dhi), z, nan);
        const int32_t b = _mm_cvtsi128_si32(_mm_shuffle_epi8(_mm256_cvtpd_epi32(r), low_bytes));
        memcpy(y + i, &b, (size_t)(n - i < 4 ? n - i : 4));
    }
}

/* tg_dequantize's formula on n contiguous u8 or i8 (is_signed):
 * y = (float)(scale * (double)(x - zp)), eight at a time. */
__attribute__((target("avx2"))) void tg__q_dequantize_avx2(float *y, const uint8_t *x, int64_t n,
                                                           bool is_signed, double scale,
                                                           int32_t zp)
{
    const __m256d s = _mm256_set1_pd(scale);
    const __m256i z = _mm256_set1_epi32(zp);
    for (int64_t i = 0; i < n; i += 8) {
        uint8_t t[8] = {0};
        const uint8_t *xi = x + i;
        if (n - i < 8) memcpy(t, x + i, (size_t)(n - i)), xi = t;
        const __m128i b = _mm_loadl_epi64((const __m128i *)xi);
        const __m256i v = _mm256_sub_epi32(is_signed ? _mm256_cvtepi8_epi32(b)
                                                     : _mm256_cvtepu8_epi32(b), z);
        const __m128 lo =
            _mm256_cvtpd_ps(_mm256_mul_pd(_mm256_cvtepi32_pd(_mm256_castsi256_si128(v)), s));
        const __m128 hi =
            _mm256_cvtpd_ps(_mm256_mul_pd(_mm256_cvtepi32_pd(_mm256_extracti128_si256(v, 1)), s));
        if (n - i >= 8) {
            _mm_storeu_ps(y + i, lo);
            _mm_storeu_ps(y + i + 4, hi);
        } else {
            float f[8];
            _mm_storeu_ps(f, lo);
            _mm_storeu_ps(f + 4, hi);
            memcpy(y + i, f, (size_t)(n - i) * sizeof *f);
        }
    }
}

#else /* not x86 */

void tg__q_requant_channels_avx2(uint8_t *y, int64_t ys, const int32_t *acc, int64_t as,
                                 int64_t rows, int64_t n, const tg__q_requant *r)
{
    TG_ASSERT(!"avx2 requantization called on a non-x86 build");
}
void tg__q_requant_avx2(uint8_t *y, bool is_signed, int64_t ds, const int32_t *src,
                        int64_t rows, int64_t n, int64_t ss, const tg__q_requant *r, int64_t rs)
{
    TG_ASSERT(!"avx2 requantization called on a non-x86 build");
}
void tg__q_requant_avx512(uint8_t *y, int64_t ds, const int32_t *src, int64_t rows, int64_t n,
                          int64_t ss, const tg__q_requant *r, int64_t rs)
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
void tg__q_quantize_avx2(uint8_t *y, const float *x, int64_t n, double scale, int32_t zp,
                         int32_t lo, int32_t hi)
{
    TG_ASSERT(!"avx2 quantization called on a non-x86 build");
}
void tg__q_dequantize_avx2(float *y, const uint8_t *x, int64_t n, bool is_signed, double scale,
                           int32_t zp)
{
    TG_ASSERT(!"avx2 dequantization called on a non-x86 build");
}
#endif
