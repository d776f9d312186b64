/* src/ops/gather_simd.c - the index kernels (gather_internal.h) and their
 * choice: gather's checked picks along a contiguous line of x, and
 * scatter_add's checked adds of a line along the last dim.
 *
 * A pick of n elements o[i] = b[v[i]] whose values v the kernel also
 * checks against the line's extent, in one pass over v: each lane's value
 * is compared (unsigned, so a negative value is out of range too) and
 * only the lanes in range are loaded, so a bad value never reads outside
 * x.  The vector kernels gather 4- or 8-byte elements (f32, f64), and
 * for 2-byte ones (f16, bf16) the 4-byte word that starts at the element
 * (at the one before it for the line's last element, whose word would
 * end past the line; its high half then), narrowed to the element's 16
 * bits; a line of one 2-byte element takes the portable loop:
 *   portable  one value at a time, a bad value's load redirected to b[0]
 *   avx2      four values per vpgatherqd / vpgatherqq
 *   avx512    eight values per vpgatherqd / vpgatherqq, compares in masks
 * Every kernel writes the same bits (x's, copied); they differ only in
 * speed.  A line's last n % 4 (avx2) or n % 8 (avx512) values take the
 * portable loop.
 *
 * The adds stay one term at a time, in the index's order (two terms of a
 * vector may land on one element, and their order fixes the rounding);
 * what the kernels vectorise is the check of each chunk of values and the
 * test of its terms for a NaN just before the chunk's adds: portable C on
 * chunks of eight (an OR of v | (extent - 1 - v), which any SIMD does) or
 * AVX-512 compares on runs of 64 (avx512; avx2 runs the portable loop). */
#include <stdatomic.h>
#include <string.h>

#include "ops/gather_internal.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define INDEX_X86 1
#define INDEX_AVX2 __attribute__((target("avx2")))
#define INDEX_AVX512 __attribute__((target("avx512f,avx512vl")))
#endif

static const char *const kernel_names[] = {
    [TG__INDEX_KERNEL_AUTO] = "auto",
    [TG__INDEX_KERNEL_PORTABLE] = "portable",
    [TG__INDEX_KERNEL_AVX2] = "avx2",
    [TG__INDEX_KERNEL_AVX512] = "avx512",
};

/* The CPU runs kernel k's instructions: avx2, or avx512 F and VL
 * (__builtin_cpu_supports reads what __builtin_cpu_init found once). */
static bool cpu_runs(tg__index_kernel k)
{
#ifdef INDEX_X86
    __builtin_cpu_init();
    if (k == TG__INDEX_KERNEL_AVX2)
        return tg__isa_allows(TG__ISA_AVX2) && __builtin_cpu_supports("avx2");
    return tg__isa_allows(TG__ISA_AVX512) && __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512vl");
#else
    (void)k;
    return false;
#endif
}

bool tg__index_kernel_available(tg__index_kernel k)
{
    switch (k) {
    case TG__INDEX_KERNEL_PORTABLE: return true;
    case TG__INDEX_KERNEL_AVX2:
    case TG__INDEX_KERNEL_AVX512: return cpu_runs(k);
    default: return false;
    }
}

const char *tg__index_kernel_name(tg__index_kernel k)
{
    return k >= TG__INDEX_KERNEL_AUTO && k <= TG__INDEX_KERNEL_AVX512 ? kernel_names[k] : "?";
}

static bool available(int k) { return tg__index_kernel_available((tg__index_kernel)k); }

tg__index_kernel tg__index_kernel_get(void)
{
    static atomic_flag told = ATOMIC_FLAG_INIT;
    const int best = cpu_runs(TG__INDEX_KERNEL_AVX512) ? TG__INDEX_KERNEL_AVX512
                     : cpu_runs(TG__INDEX_KERNEL_AVX2) ? TG__INDEX_KERNEL_AVX2
                                                       : TG__INDEX_KERNEL_PORTABLE;
    return (tg__index_kernel)tg__kernel_from_env("TG_INDEX_KERNEL", "an index", kernel_names,
                                                 TG__INDEX_KERNEL_AVX512 + 1, available, best,
                                                 &told);
}

/* The portable kernel for T: a value out of range loads b[0] (extent > 0)
 * and marks the pick bad. */
#define PICK_CHECKED(T)                                                                 \
    do {                                                                                \
        const T *b = xb;                                                                \
        T *o = out;                                                                     \
        uint64_t bad = 0;                                                               \
        for (int64_t i = 0; i < n; i++) {                                               \
            const uint64_t u = (uint64_t)v[i];                                          \
            const bool ok = u < (uint64_t)extent;                                       \
            bad |= !ok;                                                                 \
            o[i] = b[ok ? u : 0];                                                       \
        }                                                                               \
        return bad == 0;                                                                \
    } while (0)

static bool pick_portable(size_t es, void *out, const void *xb, const int64_t *v, int64_t n,
                          int64_t extent)
{
    if (es == 2) PICK_CHECKED(uint16_t);
    else if (es == 4) PICK_CHECKED(uint32_t);
    else if (es == 1) PICK_CHECKED(uint8_t);   /* i8, u8 */
    else PICK_CHECKED(uint64_t);
}
#undef PICK_CHECKED

#ifdef INDEX_X86
/* Four values' lanes u < extent (unsigned): a signed compare of both with
 * the sign bit flipped. */
INDEX_AVX2 static inline __m256i lanes_ok4(__m256i iv, __m256i ext_flipped)
{
    const __m256i sign = _mm256_set1_epi64x(INT64_MIN);
    return _mm256_cmpgt_epi64(ext_flipped, _mm256_xor_si256(iv, sign));
}

INDEX_AVX2 static bool pick_avx2(size_t es, void *out, const void *xb, const int64_t *v,
                                 int64_t n, int64_t extent)
{
    const __m256i ext = _mm256_set1_epi64x(extent ^ INT64_MIN);
    __m256i all = _mm256_set1_epi64x(-1);   /* lanes in range so far */
    int64_t i = 0;
    if (es == 4) {
        const __m256i even = _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6);
        for (; i + 4 <= n; i += 4) {
            const __m256i iv = _mm256_loadu_si256((const __m256i *)(const void *)(v + i));
            const __m256i ok = lanes_ok4(iv, ext);
            all = _mm256_and_si256(all, ok);
            const __m128i m = _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(ok, even));
            const __m128i g = _mm256_mask_i64gather_epi32(_mm_setzero_si128(), xb, iv, m, 4);
            _mm_storeu_si128((__m128i *)((uint32_t *)out + i), g);
        }
    } else if (es == 8) {
        for (; i + 4 <= n; i += 4) {
            const __m256i iv = _mm256_loadu_si256((const __m256i *)(const void *)(v + i));
            const __m256i ok = lanes_ok4(iv, ext);
            all = _mm256_and_si256(all, ok);
            const __m256i g = _mm256_mask_i64gather_epi64(_mm256_setzero_si256(), xb, iv, ok, 8);
            _mm256_storeu_si256((__m256i *)((uint64_t *)out + i), g);
        }
    } else if (es == 2 && extent >= 2) {
        const __m256i even = _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6);
        const __m256i last = _mm256_set1_epi64x(extent - 1);
        const __m128i halves = _mm_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1,
                                             -1, -1);
        for (; i + 4 <= n; i += 4) {
            const __m256i iv = _mm256_loadu_si256((const __m256i *)(const void *)(v + i));
            const __m256i ok = lanes_ok4(iv, ext);
            all = _mm256_and_si256(all, ok);
            /* the word at the element, or at the one before it for the last */
            const __m256i end = _mm256_cmpeq_epi64(iv, last);
            const __m256i w = _mm256_add_epi64(iv, end);
            const __m128i m = _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(ok, even));
            const __m128i e = _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(end, even));
            const __m128i g = _mm256_mask_i64gather_epi32(_mm_setzero_si128(), xb, w, m, 2);
            const __m128i h = _mm_srlv_epi32(g, _mm_and_si128(e, _mm_set1_epi32(16)));
            _mm_storel_epi64((__m128i *)(void *)((uint16_t *)out + i),
                             _mm_shuffle_epi8(h, halves));
        }
    }
    const bool ok = _mm256_movemask_pd(_mm256_castsi256_pd(all)) == 0xf;
    _mm256_zeroupper();   /* gcc leaves it out here: the SSE code after it would crawl */
    return pick_portable(es, (char *)out + (size_t)i * es, xb, v + i, n - i, extent) && ok;
}

INDEX_AVX512 static bool pick_avx512(size_t es, void *out, const void *xb, const int64_t *v,
                                     int64_t n, int64_t extent)
{
    const __m512i ext = _mm512_set1_epi64(extent);
    __mmask8 all = 0xff;   /* lanes in range so far */
    int64_t i = 0;
    if (es == 4) {
        for (; i + 8 <= n; i += 8) {
            const __m512i iv = _mm512_loadu_si512(v + i);
            const __mmask8 ok = _mm512_cmplt_epu64_mask(iv, ext);
            all &= ok;
            const __m256i g = _mm512_mask_i64gather_epi32(_mm256_setzero_si256(), ok, iv, xb, 4);
            _mm256_storeu_si256((__m256i *)((uint32_t *)out + i), g);
        }
    } else if (es == 8) {
        for (; i + 8 <= n; i += 8) {
            const __m512i iv = _mm512_loadu_si512(v + i);
            const __mmask8 ok = _mm512_cmplt_epu64_mask(iv, ext);
            all &= ok;
            const __m512i g = _mm512_mask_i64gather_epi64(_mm512_setzero_si512(), ok, iv, xb, 8);
            _mm512_storeu_si512((uint64_t *)out + i, g);
        }
    } else if (es == 2 && extent >= 2) {
        const __m512i last = _mm512_set1_epi64(extent - 1), one = _mm512_set1_epi64(1);
        const __m256i sixteen = _mm256_set1_epi32(16);
        for (; i + 8 <= n; i += 8) {
            const __m512i iv = _mm512_loadu_si512(v + i);
            const __mmask8 ok = _mm512_cmplt_epu64_mask(iv, ext);
            all &= ok;
            /* the word at the element, or at the one before it for the last */
            const __mmask8 end = _mm512_cmpeq_epi64_mask(iv, last);
            const __m512i w = _mm512_mask_sub_epi64(iv, end, iv, one);
            const __m256i g = _mm512_mask_i64gather_epi32(_mm256_setzero_si256(), ok, w, xb, 2);
            const __m256i h = _mm256_srlv_epi32(g, _mm256_maskz_mov_epi32(end, sixteen));
            _mm_storeu_si128((__m128i *)(void *)((uint16_t *)out + i), _mm256_cvtepi32_epi16(h));
        }
    }
    _mm256_zeroupper();   /* as pick_avx2's */
    return pick_portable(es, (char *)out + (size_t)i * es, xb, v + i, n - i, extent) &&
           all == 0xff;
}
#endif

bool tg__pick_line_checked(tg__index_kernel kern, size_t es, void *out, const void *xb,
                           const int64_t *v, int64_t n, int64_t extent)
{
    if (extent <= 0) return n == 0;   /* no value is in range, and b[0] is not x's */
#ifdef INDEX_X86
    if (kern == TG__INDEX_KERNEL_AVX512) return pick_avx512(es, out, xb, v, n, extent);
    if (kern == TG__INDEX_KERNEL_AVX2) return pick_avx2(es, out, xb, v, n, extent);
#else
    (void)kern;
#endif
    return pick_portable(es, out, xb, v, n, extent);
}


/* Whether any of the n floats (es = 4) or doubles (es = 8) at p is a NaN.
 * Only a NaN term needs tg__add_to's care: a NaN sum plus a number is the
 * sum's NaN in either operand order.  A NaN's magnitude bits exceed
 * infinity's, so infinity's bits minus them is negative: one OR of the
 * differences finds any, in integers that any SIMD subtracts. */
static bool any_nan(size_t es, const void *p, int64_t n)
{
    const char *b = p;
    if (es == 4) {
        uint32_t any = 0;
        for (int64_t i = 0; i < n; i++) {
            uint32_t u;
            memcpy(&u, b + i * 4, 4);
            any |= UINT32_C(0x7f800000) - (u & UINT32_C(0x7fffffff));
        }
        return any >> 31;
    }
    uint64_t any = 0;
    for (int64_t i = 0; i < n; i++) {
        uint64_t u;
        memcpy(&u, b + i * 8, 8);
        any |= UINT64_C(0x7ff0000000000000) - (u & UINT64_C(0x7fffffffffffffff));
    }
    return any >> 63;
}

/* One line's adds for T (float: tg__add_to_f, double: tg__add_to): r[v[q]] =
 * ADD(r[v[q]], s[q]) for q in [0, n) in order, ADD_CHUNK terms at a time,
 * each chunk's values checked in [0, extent) first when `check` (false at
 * a bad one: r is then partly added) and its terms tested for a NaN, the
 * only term that needs ADD's order (else the plain +=, which the compiler
 * may emit either way round).  The check rides along with the adds, one
 * pass over v while its lines are in the cache. */
enum { ADD_CHUNK = 8 };
/* e terms of a chunk (a constant ADD_CHUNK in the loop, for the unrolled
 * code; the line's tail after it). */
#define ADD_TERMS(T, ADD, e)                                                            \
    do {                                                                                \
        uint64_t any = 0;                                                               \
        for (int64_t i = 0; check && i < (e); i++)                                      \
            any |= (uint64_t)v[q + i] | (last - (uint64_t)v[q + i]);                    \
        if (any >> 63) return false;                                                    \
        if (any_nan(sizeof(T), s + q, (e)))                                             \
            for (int64_t i = 0; i < (e); i++) r[v[q + i]] = ADD(r[v[q + i]], s[q + i]); \
        else                                                                            \
            for (int64_t i = 0; i < (e); i++) r[v[q + i]] += s[q + i];                  \
    } while (0)
#define ADD_LINE(T, ADD)                                                                \
    do {                                                                                \
        const uint64_t last = (uint64_t)extent - 1;                                     \
        int64_t q = 0;                                                                  \
        for (; q + ADD_CHUNK <= n; q += ADD_CHUNK) ADD_TERMS(T, ADD, ADD_CHUNK);        \
        if (q < n) ADD_TERMS(T, ADD, n - q);                                            \
        return true;                                                                    \
    } while (0)

static bool add_line_f(float *r, const float *s, const int64_t *v, int64_t n, bool check,
                       int64_t extent)
{
    ADD_LINE(float, tg__add_to_f);
}

static bool add_line_d(double *r, const double *s, const int64_t *v, int64_t n, bool check,
                       int64_t extent)
{
    ADD_LINE(double, tg__add_to);
}
#undef ADD_LINE
#undef ADD_TERMS


#ifdef INDEX_X86
/* One line's adds with AVX-512, AVX512_RUN terms at a time: the run's
 * values compared (unsigned, against the extent) eight to a compare and
 * its terms tested for a NaN, sixteen floats or eight doubles to a
 * compare, then the run's adds one at a time in order, as add_line_f's
 * (ADD where a term is NaN, else the plain +=); the line's last
 * n % AVX512_RUN terms by add_line_f.  A run of 64 keeps the tests out of
 * the loop of adds, whose loads and stores of r are the work.
 * NAN_RUN(p): a NaN among the run's terms at p. */
enum { AVX512_RUN = 64 };
#define ADD_LINE_AVX512(T, ADD, NAN_RUN, TAIL)                                          \
    do {                                                                                \
        const __m512i ext = _mm512_set1_epi64(extent);                                  \
        bool ok = true;                                                                 \
        int64_t q = 0;                                                                  \
        for (; q + AVX512_RUN <= n; q += AVX512_RUN) {                                  \
            __mmask8 in = 0xff;                                                         \
            for (int i = 0; check && i < AVX512_RUN; i += 8)                            \
                in &= _mm512_cmplt_epu64_mask(_mm512_loadu_si512(v + q + i), ext);      \
            if (in != 0xff) {                                                           \
                ok = false;                                                             \
                break;                                                                  \
            }                                                                           \
            if (NAN_RUN(s + q))                                                         \
                for (int i = 0; i < AVX512_RUN; i++) r[v[q + i]] = ADD(r[v[q + i]], s[q + i]); \
            else                                                                        \
                for (int i = 0; i < AVX512_RUN; i++) r[v[q + i]] += s[q + i];           \
        }                                                                               \
        _mm256_zeroupper();                                                             \
        return ok && TAIL(r, s + q, v + q, n - q, check, extent);                       \
    } while (0)

/* A NaN among AVX512_RUN floats or doubles at p. */
INDEX_AVX512 static inline bool nan_run_f(const float *p)
{
    __mmask16 any = 0;
    for (int i = 0; i < AVX512_RUN; i += 16) {
        const __m512 x = _mm512_loadu_ps(p + i);
        any |= _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    }
    return any != 0;
}

INDEX_AVX512 static inline bool nan_run_d(const double *p)
{
    __mmask8 any = 0;
    for (int i = 0; i < AVX512_RUN; i += 8) {
        const __m512d x = _mm512_loadu_pd(p + i);
        any |= _mm512_cmp_pd_mask(x, x, _CMP_UNORD_Q);
    }
    return any != 0;
}

INDEX_AVX512 static bool add_line_f_avx512(float *r, const float *s, const int64_t *v, int64_t n,
                                           bool check, int64_t extent)
{
    ADD_LINE_AVX512(float, tg__add_to_f, nan_run_f, add_line_f);
}

INDEX_AVX512 static bool add_line_d_avx512(double *r, const double *s, const int64_t *v,
                                           int64_t n, bool check, int64_t extent)
{
    ADD_LINE_AVX512(double, tg__add_to, nan_run_d, add_line_d);
}
#undef ADD_LINE_AVX512
#endif

bool tg__add_line_f(tg__index_kernel kern, float *r, const float *s, const int64_t *v,
                    int64_t n, bool check, int64_t extent)
{
#ifdef INDEX_X86
    if (kern == TG__INDEX_KERNEL_AVX512) return add_line_f_avx512(r, s, v, n, check, extent);
#else
    (void)kern;
#endif
    return add_line_f(r, s, v, n, check, extent);
}

bool tg__add_line_d(tg__index_kernel kern, double *r, const double *s, const int64_t *v,
                    int64_t n, bool check, int64_t extent)
{
#ifdef INDEX_X86
    if (kern == TG__INDEX_KERNEL_AVX512) return add_line_d_avx512(r, s, v, n, check, extent);
#else
    (void)kern;
#endif
    return add_line_d(r, s, v, n, check, extent);
}
