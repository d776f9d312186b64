/* Element types: the traits table, name parsing, f16/bf16 conversions by bit
 * manipulation (the scalar reference), their bulk forms (AVX2/F16C chosen at
 * run time, portable loops elsewhere) and scalar load/store for every dtype. */
#include <assert.h>
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "core/half_simd.h"
#include "core/core.h"

static const tg_dtype_traits tg__traits[] = {
    [TG_F32]  = {.name = "f32",  .st_name = "F32",  .size = 4, .is_float = true,  .is_signed = true},
    [TG_F64]  = {.name = "f64",  .st_name = "F64",  .size = 8, .is_float = true,  .is_signed = true},
    [TG_F16]  = {.name = "f16",  .st_name = "F16",  .size = 2, .is_float = true,  .is_signed = true},
    [TG_BF16] = {.name = "bf16", .st_name = "BF16", .size = 2, .is_float = true,  .is_signed = true},
    [TG_I8]   = {.name = "i8",   .st_name = "I8",   .size = 1, .is_float = false, .is_signed = true},
    [TG_U8]   = {.name = "u8",   .st_name = "U8",   .size = 1, .is_float = false, .is_signed = false},
    [TG_I32]  = {.name = "i32",  .st_name = "I32",  .size = 4, .is_float = false, .is_signed = true},
    [TG_I64]  = {.name = "i64",  .st_name = "I64",  .size = 8, .is_float = false, .is_signed = true},
};
static_assert(sizeof tg__traits / sizeof tg__traits[0] == TG_DTYPE_COUNT,
              "tg__traits must have one entry per tg_dtype");

/* Accepted spellings of each dtype (besides its name and safetensors name). */
static const char *const tg__aliases[][3] = {
    [TG_F32]  = {"float32", "float", NULL},
    [TG_F64]  = {"float64", "double", NULL},
    [TG_F16]  = {"float16", "half", NULL},
    [TG_BF16] = {"bfloat16", NULL, NULL},
    [TG_I8]   = {"int8", NULL, NULL},
    [TG_U8]   = {"uint8", NULL, NULL},
    [TG_I32]  = {"int32", NULL, NULL},
    [TG_I64]  = {"int64", NULL, NULL},
};
static_assert(sizeof tg__aliases / sizeof tg__aliases[0] == TG_DTYPE_COUNT,
              "tg__aliases must have one entry per tg_dtype");

static bool tg__dtype_valid(tg_dtype dt) { return (unsigned)dt < (unsigned)TG_DTYPE_COUNT; }

const tg_dtype_traits *tg_dtype_get_traits(tg_dtype dt)
{
    return tg__dtype_valid(dt) ? &tg__traits[dt] : NULL;
}

const char *tg_dtype_name(tg_dtype dt) { return tg__dtype_valid(dt) ? tg__traits[dt].name : "?"; }
size_t tg_dtype_size(tg_dtype dt) { return tg__dtype_valid(dt) ? tg__traits[dt].size : 0; }
bool tg_dtype_is_float(tg_dtype dt) { return tg__dtype_valid(dt) && tg__traits[dt].is_float; }

int tg_dtype_from_name(tg_dtype *out, const char *name)
{
    TG_CHECK(out != NULL, TG_EINVAL, "dtype_from_name: out must not be NULL");
    TG_CHECK(name != NULL, TG_EINVAL, "dtype_from_name: name must not be NULL");
    for (int d = 0; d < TG_DTYPE_COUNT; d++) {
        bool hit = strcmp(name, tg__traits[d].name) == 0 || strcmp(name, tg__traits[d].st_name) == 0;
        for (int a = 0; a < 3 && !hit && tg__aliases[d][a]; a++)
            hit = strcmp(name, tg__aliases[d][a]) == 0;
        if (hit) {
            *out = (tg_dtype)d;
            return TG_OK;
        }
    }
    return tg__error(TG_EINVAL, "dtype_from_name: name=\"%s\" is not a known dtype "
                                "(f32, f64, f16, bf16, i8, u8, i32, i64)", name);
}

/* ---- f16 / bf16 ----------------------------------------------------------- */

static uint32_t tg__f32_bits(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    return x;
}

static float tg__bits_f32(uint32_t x)
{
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}

/* Rounds v >> shift to nearest, ties to even (shift in [1, 31]). */
static inline uint32_t tg__shift_rne(uint32_t v, int shift)
{
    uint32_t q = v >> shift;
    uint32_t rem = v & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) q++;
    return q;
}

/* The scalar conversions are the reference: the bulk loops below inline
 * them, the SIMD kernels must agree with them bit for bit. */
static inline uint16_t tg__f32_to_f16_s(float f)
{
    uint32_t x = tg__f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7FFFFFFFu;
    if (ax > 0x7F800000u)   /* NaN: quiet it, keep the payload's top bits */
        return (uint16_t)(sign | 0x7E00u | ((ax >> 13) & 0x03FFu));
    if (ax >= 0x47800000u)  /* |f| >= 2^16 (or inf): beyond every rounding */
        return (uint16_t)(sign | 0x7C00u);
    if (ax >= 0x38800000u) {
        /* Normal f16 (|f| >= 2^-14): rebias the exponent (127 -> 15) and
         * round the 23-bit mantissa to 10 bits.  A carry out of the mantissa
         * correctly bumps the exponent, up to 0x7C00 = inf past 65504. */
        uint32_t rebased = ax - ((uint32_t)(127 - 15) << 23);
        return (uint16_t)(sign | tg__shift_rne(rebased, 13));
    }
    if (ax <= 0x33000000u)  /* |f| <= 2^-25: rounds to zero (2^-25 is a tie to even 0) */
        return sign;
    /* Subnormal f16: |f| = m * 2^(e-150) with m the 24-bit significand, and the
     * f16 unit is 2^-24, so the result is m * 2^(e-126) = m >> (126 - e). */
    int e = (int)(ax >> 23);
    uint32_t m = (ax & 0x007FFFFFu) | 0x00800000u;
    return (uint16_t)(sign | tg__shift_rne(m, 126 - e));
}

static inline float tg__f16_to_f32_s(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1Fu;
    uint32_t mant = h & 0x03FFu;
    if (exp == 0x1F)   /* inf or NaN (NaN made quiet) */
        return tg__bits_f32(sign | 0x7F800000u | (mant << 13) | (mant ? 0x00400000u : 0));
    if (exp != 0)
        return tg__bits_f32(sign | ((exp + 127 - 15) << 23) | (mant << 13));
    if (mant == 0) return tg__bits_f32(sign);
    /* Subnormal mant * 2^-24: normalise so the leading 1 sits at bit 10. */
    int e = -14;
    while (!(mant & 0x0400u)) {
        mant <<= 1;
        e--;
    }
    return tg__bits_f32(sign | ((uint32_t)(e + 127) << 23) | ((mant & 0x03FFu) << 13));
}

static inline uint16_t tg__f32_to_bf16_s(float f)
{
    uint32_t x = tg__f32_bits(f);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u)   /* NaN: quiet, keep sign */
        return (uint16_t)((x >> 16) | 0x0040u);
    /* bf16 is the top half of f32: round the low 16 bits to nearest even.  A
     * carry past the largest finite value gives 0x7F80 = inf. */
    uint32_t bias = 0x7FFFu + ((x >> 16) & 1u);
    return (uint16_t)((x + bias) >> 16);
}

static inline float tg__bf16_to_f32_s(uint16_t h) { return tg__bits_f32((uint32_t)h << 16); }

uint16_t tg_f32_to_f16(float f) { return tg__f32_to_f16_s(f); }
float tg_f16_to_f32(uint16_t h) { return tg__f16_to_f32_s(h); }
uint16_t tg_f32_to_bf16(float f) { return tg__f32_to_bf16_s(f); }
float tg_bf16_to_f32(uint16_t h) { return tg__bf16_to_f32_s(h); }

/* ---- bulk half <-> f32 ------------------------------------------------------ */

/* Portable loops: the scalar reference, inlined. */
static void tg__f32_to_half_scalar(tg_dtype to, const float *src, uint16_t *dst, int64_t n)
{
    if (to == TG_F16)
        for (int64_t i = 0; i < n; i++) dst[i] = tg__f32_to_f16_s(src[i]);
    else
        for (int64_t i = 0; i < n; i++) dst[i] = tg__f32_to_bf16_s(src[i]);
}

static void tg__half_to_f32_scalar(tg_dtype from, const uint16_t *src, float *dst, int64_t n)
{
    if (from == TG_F16)
        for (int64_t i = 0; i < n; i++) dst[i] = tg__f16_to_f32_s(src[i]);
    else
        for (int64_t i = 0; i < n; i++) dst[i] = tg__bf16_to_f32_s(src[i]);
}

#ifdef TG__HAVE_X86_SIMD
#include <cpuid.h>

TG__AVX2 static void tg__f32_to_bf16_avx2(const float *src, uint16_t *dst, int64_t n)
{
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i lo = tg__bf16x8(_mm256_loadu_si256((const __m256i *)(const void *)(src + i)));
        __m256i hi = tg__bf16x8(_mm256_loadu_si256((const __m256i *)(const void *)(src + i + 8)));
        /* packus works per 128-bit lane (lo0-3 hi0-3 lo4-7 hi4-7); every
         * value is <= 0xFFFF so it never saturates; the permute restores
         * order. */
        __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(lo, hi), 0xD8);
        _mm256_storeu_si256((__m256i *)(void *)(dst + i), p);
    }
    for (; i < n; i++) dst[i] = tg__f32_to_bf16_s(src[i]);
}

TG__AVX2 static void tg__bf16_to_f32_avx2(const uint16_t *src, float *dst, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm_loadu_si128((const __m128i *)(const void *)(src + i));
        __m256i x = _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16);
        _mm256_storeu_si256((__m256i *)(void *)(dst + i), x);
    }
    for (; i < n; i++) dst[i] = tg__bf16_to_f32_s(src[i]);
}

/* F16C rounds to nearest even (the immediate, not MXCSR), keeps f16
 * subnormals, and turns a NaN into sign | 0x7E00 | top payload bits: the
 * scalar rule (tests/test_dtype_bulk.c checks every f16 pattern and a sweep of f32
 * patterns against the scalar path). */
TG__AVX2 static void tg__f32_to_f16_f16c(const float *src, uint16_t *dst, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm_storeu_si128((__m128i *)(void *)(dst + i), h);
    }
    for (; i < n; i++) dst[i] = tg__f32_to_f16_s(src[i]);
}

TG__AVX2 static void tg__f16_to_f32_f16c(const uint16_t *src, float *dst, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(src + i))));
    for (; i < n; i++) dst[i] = tg__f16_to_f32_s(src[i]);
}

/* Sixteen at a time with half_simd.h's AVX-512 helpers (the rounding of
 * tg__bf16x8, and F16C's conversion at twice the width: the same bits),
 * the rest by the AVX2/F16C kernels above. */
TG__AVX512 static void tg__f32_to_half_avx512(tg_dtype to, const float *src, uint16_t *dst,
                                              int64_t n)
{
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) tg__half_store16(to, dst + i, _mm512_loadu_ps(src + i));
    if (to == TG_F16) tg__f32_to_f16_f16c(src + i, dst + i, n - i);
    else tg__f32_to_bf16_avx2(src + i, dst + i, n - i);
}

TG__AVX512 static void tg__half_to_f32_avx512(tg_dtype from, const uint16_t *src, float *dst,
                                              int64_t n)
{
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(dst + i, tg__half_load16(from, src + i));
    if (from == TG_F16) tg__f16_to_f32_f16c(src + i, dst + i, n - i);
    else tg__bf16_to_f32_avx2(src + i, dst + i, n - i);
}
#endif

bool tg__cpu_has_avx512bw(void)
{
#ifdef TG__HAVE_X86_SIMD
    if (!tg__isa_allows(TG__ISA_AVX512)) return false;
    static _Atomic int known = -1;   /* a race only stores the same answer twice */
    int k = atomic_load_explicit(&known, memory_order_relaxed);
    if (k < 0) {
        __builtin_cpu_init();
        k = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
        atomic_store_explicit(&known, k, memory_order_relaxed);
    }
    return k != 0;
#else
    return false;
#endif
}

bool tg__cpu_has_half_simd(void)
{
#ifdef TG__HAVE_X86_SIMD
    if (!tg__isa_allows(TG__ISA_AVX2)) return false;
    /* F16C is CPUID.1:ECX bit 29 (clang's __builtin_cpu_supports does not
     * know "f16c"); cpuid traps in a VM, so it is asked once.  A race only
     * makes two threads store the same answer. */
    static _Atomic int known = -1;
    int k = atomic_load_explicit(&known, memory_order_relaxed);
    if (k < 0) {
        unsigned a, b, c, d;
        bool f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
        k = f16c && __builtin_cpu_supports("avx2");
        atomic_store_explicit(&known, k, memory_order_relaxed);
    }
    return k != 0;
#else
    return false;
#endif
}

/* ---- the kernel of the bulk conversions ---------------------------------- */

static const char *const cast_names[] = {
    [TG__CAST_AUTO] = "auto",
    [TG__CAST_PORTABLE] = "portable",
    [TG__CAST_AVX2] = "avx2",
    [TG__CAST_AVX512] = "avx512",
};

static bool cast_runs_on(int k)
{
    return k == TG__CAST_PORTABLE || (k == TG__CAST_AVX2 && tg__cpu_has_half_simd()) ||
           (k == TG__CAST_AVX512 && tg__cpu_has_half_simd() && tg__cpu_has_avx512bw());
}

/* process-wide: long conversions run on the pool's threads */
static atomic_int cast_forced;

void tg__set_cast_kernel(tg__cast k) { atomic_store(&cast_forced, (int)k); }

tg__cast tg__cast_kernel(void)
{
    static atomic_flag told = ATOMIC_FLAG_INIT;
    const int f = atomic_load(&cast_forced);
    if (f != TG__CAST_AUTO && cast_runs_on(f)) return (tg__cast)f;
    const int best = cast_runs_on(TG__CAST_AVX512) ? TG__CAST_AVX512
                     : cast_runs_on(TG__CAST_AVX2) ? TG__CAST_AVX2
                                                   : TG__CAST_PORTABLE;
    return (tg__cast)tg__kernel_from_env("TG_CAST_KERNEL", "a conversion", cast_names,
                                         TG__CAST_AVX512 + 1, cast_runs_on, best, &told);
}

/* One block of a conversion by kernel k (tg__cast_kernel, asked once per
 * call of the functions below, not per block). */
static void tg__f32_to_half_blk(tg_dtype to, const float *src, uint16_t *dst, int64_t n,
                                tg__cast k)
{
#ifdef TG__HAVE_X86_SIMD
    if (k == TG__CAST_AVX512) {
        tg__f32_to_half_avx512(to, src, dst, n);
        return;
    }
    if (k == TG__CAST_AVX2) {
        if (to == TG_F16) tg__f32_to_f16_f16c(src, dst, n);
        else tg__f32_to_bf16_avx2(src, dst, n);
        return;
    }
#endif
    (void)k;
    tg__f32_to_half_scalar(to, src, dst, n);
}

static void tg__half_to_f32_blk(tg_dtype from, const uint16_t *src, float *dst, int64_t n,
                                tg__cast k)
{
#ifdef TG__HAVE_X86_SIMD
    if (k == TG__CAST_AVX512) {
        tg__half_to_f32_avx512(from, src, dst, n);
        return;
    }
    if (k == TG__CAST_AVX2) {
        if (from == TG_F16) tg__f16_to_f32_f16c(src, dst, n);
        else tg__bf16_to_f32_avx2(src, dst, n);
        return;
    }
#endif
    (void)k;
    tg__half_to_f32_scalar(from, src, dst, n);
}

/* Long runs are split into one range per thread (serially when already
 * inside a parallel call or below the threshold: a conversion is
 * memory-bound, a short one is not worth waking threads). */
enum { TG__CVT_PAR_MIN = 65536 };

typedef struct {
    tg_dtype dt;
    float *f32;       /* const when to_half */
    uint16_t *half;   /* const when !to_half */
    bool to_half;
    tg__cast kern;
} cvt_job;

static void cvt_range(void *p, int64_t lo, int64_t hi)
{
    const cvt_job *q = p;
    if (q->to_half) tg__f32_to_half_blk(q->dt, q->f32 + lo, q->half + lo, hi - lo, q->kern);
    else tg__half_to_f32_blk(q->dt, q->half + lo, q->f32 + lo, hi - lo, q->kern);
}

void tg__f32_to_half_n(tg_dtype to, const float *src, uint16_t *dst, int64_t n, bool simd)
{
    TG_ASSERT(tg__dtype_is_half(to));
    cvt_job q = {.dt = to, .f32 = (float *)src, .half = dst, .to_half = true,
                 .kern = simd ? tg__cast_kernel() : TG__CAST_PORTABLE};
    tg__parallel_range(n, n >= TG__CVT_PAR_MIN, cvt_range, &q);
}

void tg__half_to_f32_n(tg_dtype from, const uint16_t *src, float *dst, int64_t n, bool simd)
{
    TG_ASSERT(tg__dtype_is_half(from));
    cvt_job q = {.dt = from, .f32 = dst, .half = (uint16_t *)src, .to_half = false,
                 .kern = simd ? tg__cast_kernel() : TG__CAST_PORTABLE};
    tg__parallel_range(n, n >= TG__CVT_PAR_MIN, cvt_range, &q);
}

/* Strided blocks, one serial call for all rows (for loops that are already
 * parallel: batch_norm's half path called the bulk conversion and looked up
 * its tensors once per row, a visible share of its time at 7x7 planes). */
void tg__f32_to_half_rows(tg_dtype to, const float *src, int64_t sstride, uint16_t *dst,
                          int64_t dstride, int64_t rows, int64_t len)
{
    TG_ASSERT(tg__dtype_is_half(to));
    const tg__cast k = tg__cast_kernel();
    for (int64_t r = 0; r < rows; r++)
        tg__f32_to_half_blk(to, src + r * sstride, dst + r * dstride, len, k);
}

void tg__half_to_f32_rows(tg_dtype from, const uint16_t *src, int64_t sstride, float *dst,
                          int64_t dstride, int64_t rows, int64_t len)
{
    TG_ASSERT(tg__dtype_is_half(from));
    const tg__cast k = tg__cast_kernel();
    for (int64_t r = 0; r < rows; r++)
        tg__half_to_f32_blk(from, src + r * sstride, dst + r * dstride, len, k);
}

void tg__f32_to_half_k(tg_dtype to, const float *src, uint16_t *dst, int64_t n, tg__cast k)
{
    TG_ASSERT(tg__dtype_is_half(to));
    tg__f32_to_half_blk(to, src, dst, n, k == TG__CAST_AUTO ? tg__cast_kernel() : k);
}

void tg__half_to_f32_k(tg_dtype from, const uint16_t *src, float *dst, int64_t n, tg__cast k)
{
    TG_ASSERT(tg__dtype_is_half(from));
    tg__half_to_f32_blk(from, src, dst, n, k == TG__CAST_AUTO ? tg__cast_kernel() : k);
}

#ifdef TG__HAVE_X86_SIMD
/* The first multiple of eight of tg__half_add_round's n values; returns it. */
TG__AVX2 static int64_t half_add_round_avx2(tg_dtype to, const float *src, float bias,
                                            uint16_t *dst, int64_t n)
{
    const __m256 b = _mm256_set1_ps(bias);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        tg__half_store8(to, dst + i, _mm256_add_ps(_mm256_loadu_ps(src + i), b));
    return i;
}

/* The same sixteen at a time (tg__half_store16 has tg__half_store8's bits),
 * the rest of the multiples of eight by half_add_round_avx2. */
TG__AVX512 static int64_t half_add_round_avx512(tg_dtype to, const float *src, float bias,
                                                uint16_t *dst, int64_t n)
{
    const __m512 b = _mm512_set1_ps(bias);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        tg__half_store16(to, dst + i, _mm512_add_ps(_mm512_loadu_ps(src + i), b));
    return i + half_add_round_avx2(to, src + i, bias, dst + i, n - i);
}
#endif

void tg__half_add_round(tg_dtype to, const float *src, bool add, float bias, uint16_t *dst,
                        int64_t n, tg__cast k)
{
    TG_ASSERT(tg__dtype_is_half(to));
    if (k == TG__CAST_AUTO) k = tg__cast_kernel();
    if (!add) {
        tg__f32_to_half_blk(to, src, dst, n, k);
        return;
    }
    int64_t i = 0;
#ifdef TG__HAVE_X86_SIMD
    /* the vector kernels imply AVX2 and F16C (cast_runs_on): no CPU
     * question per row */
    if (k == TG__CAST_AVX512) i = half_add_round_avx512(to, src, bias, dst, n);
    else if (k == TG__CAST_AVX2) i = half_add_round_avx2(to, src, bias, dst, n);
#endif
    for (; i < n; i++) dst[i] = tg__f32_to_half(to, src[i] + bias);
}

/* ---- scalar load / store -------------------------------------------------- */

double tg_dtype_load(tg_dtype dt, const void *base, int64_t i)
{
    if (!base) return NAN;
    switch (dt) {
    case TG_F32:  return ((const float *)base)[i];
    case TG_F64:  return ((const double *)base)[i];
    case TG_F16:  return tg_f16_to_f32(((const uint16_t *)base)[i]);
    case TG_BF16: return tg_bf16_to_f32(((const uint16_t *)base)[i]);
    case TG_I8:   return ((const int8_t *)base)[i];
    case TG_U8:   return ((const uint8_t *)base)[i];
    case TG_I32:  return ((const int32_t *)base)[i];
    case TG_I64:  return (double)((const int64_t *)base)[i];
    case TG_DTYPE_COUNT: break;
    }
    return NAN;   /* not a tg_dtype */
}

/* v truncated toward zero (as a C cast and PyTorch's Tensor.to) and clamped
 * to [lo, hi]; NaN -> 0.  Beyond the range, where C and PyTorch leave the
 * result undefined, the nearest end is the defined answer.
 * The bounds are compared as doubles so 2^63 (not representable in i64) is
 * handled: hi_excl is the first value above the range. */
static int64_t tg__saturate(double v, double lo, double hi_excl, int64_t lo_i, int64_t hi_i)
{
    if (isnan(v)) return 0;
    double r = trunc(v);
    if (r < lo) return lo_i;
    if (r >= hi_excl) return hi_i;
    return (int64_t)r;
}

/* v narrowed to f32 with round-to-odd: truncate toward zero, then set the
 * last mantissa bit if anything was dropped.  Rounding that f32 once more to
 * f16 or bf16 (at least 13 fewer mantissa bits) then gives the correctly
 * rounded result of v, avoiding double-rounding errors at ties. */
static float tg__f64_to_f32_odd(double v)
{
    float f = (float)v;
    if ((double)f == v || isnan(v) || isinf(f)) return f;
    uint32_t x = tg__f32_bits(f);
    if (fabs((double)f) > fabs(v)) x--;   /* rounded away from zero: step back */
    return tg__bits_f32(x | 1u);
}

/* f64 runs go through an f32 block on the stack: f64 -> f32 is exact for
 * a half's value and round-to-odd the other way, so the bulk f32 kernels
 * give tg_dtype_load's and tg_dtype_store's bits. */
enum { TG__F64_BLOCK = 256 };

void tg__f64_to_half_n(tg_dtype to, const double *src, uint16_t *dst, int64_t n)
{
    TG_ASSERT(tg__dtype_is_half(to));
    const tg__cast kern = tg__cast_kernel();
    float blk[TG__F64_BLOCK];
    for (int64_t k0 = 0; k0 < n; k0 += TG__F64_BLOCK) {
        const int64_t m = n - k0 < TG__F64_BLOCK ? n - k0 : TG__F64_BLOCK;
        for (int64_t k = 0; k < m; k++) blk[k] = tg__f64_to_f32_odd(src[k0 + k]);
        tg__f32_to_half_blk(to, blk, dst + k0, m, kern);
    }
}

void tg__half_to_f64_n(tg_dtype from, const uint16_t *src, double *dst, int64_t n)
{
    TG_ASSERT(tg__dtype_is_half(from));
    const tg__cast kern = tg__cast_kernel();
    float blk[TG__F64_BLOCK];
    for (int64_t k0 = 0; k0 < n; k0 += TG__F64_BLOCK) {
        const int64_t m = n - k0 < TG__F64_BLOCK ? n - k0 : TG__F64_BLOCK;
        tg__half_to_f32_blk(from, src + k0, blk, m, kern);
        for (int64_t k = 0; k < m; k++) dst[k0 + k] = blk[k];
    }
}

void tg_dtype_store(tg_dtype dt, void *base, int64_t i, double v)
{
    if (!base) return;
    switch (dt) {
    case TG_F32:  ((float *)base)[i] = (float)v; return;
    case TG_F64:  ((double *)base)[i] = v; return;
    case TG_F16:  ((uint16_t *)base)[i] = tg_f32_to_f16(tg__f64_to_f32_odd(v)); return;
    case TG_BF16: ((uint16_t *)base)[i] = tg_f32_to_bf16(tg__f64_to_f32_odd(v)); return;
    case TG_I8:   ((int8_t *)base)[i] = (int8_t)tg__saturate(v, -128.0, 128.0, -128, 127); return;
    case TG_U8:   ((uint8_t *)base)[i] = (uint8_t)tg__saturate(v, 0.0, 256.0, 0, 255); return;
    case TG_I32:
        ((int32_t *)base)[i] = (int32_t)tg__saturate(v, -2147483648.0, 2147483648.0,
                                                     INT32_MIN, INT32_MAX);
        return;
    case TG_I64:
        ((int64_t *)base)[i] = tg__saturate(v, -9223372036854775808.0, 9223372036854775808.0,
                                            INT64_MIN, INT64_MAX);
        return;
    case TG_DTYPE_COUNT: break;
    }
    /* not a tg_dtype: nothing is written */
}
