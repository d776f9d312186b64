/* Element types: the traits table, name parsing, f16/bf16 conversions by bit
 * manipulation, and scalar load/store for every dtype. */
#include <assert.h>
#include <math.h>
#include <string.h>

#include "internal.h"

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
static uint32_t tg__shift_rne(uint32_t v, int shift)
{
    uint32_t q = v >> shift;
    uint32_t rem = v & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) q++;
    return q;
}

uint16_t tg_f32_to_f16(float f)
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

float tg_f16_to_f32(uint16_t h)
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

uint16_t tg_f32_to_bf16(float f)
{
    uint32_t x = tg__f32_bits(f);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u)   /* NaN: quiet, keep sign */
        return (uint16_t)((x >> 16) | 0x0040u);
    /* bf16 is the top half of f32: round the low 16 bits to nearest even.  A
     * carry past the largest finite value gives 0x7F80 = inf. */
    uint32_t bias = 0x7FFFu + ((x >> 16) & 1u);
    return (uint16_t)((x + bias) >> 16);
}

float tg_bf16_to_f32(uint16_t h) { return tg__bits_f32((uint32_t)h << 16); }

/* ---- scalar load / store -------------------------------------------------- */

double tg_dtype_load(tg_dtype dt, const void *base, int64_t i)
{
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
    TG_ASSERT(!"tg_dtype_load: invalid dtype");
}

/* v rounded to nearest (ties to even) and clamped to [lo, hi]; NaN -> 0.
 * The bounds are compared as doubles so 2^63 (not representable in i64) is
 * handled: hi_excl is the first value above the range. */
static int64_t tg__saturate(double v, double lo, double hi_excl, int64_t lo_i, int64_t hi_i)
{
    if (isnan(v)) return 0;
    double r = nearbyint(v);
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

void tg_dtype_store(tg_dtype dt, void *base, int64_t i, double v)
{
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
    TG_ASSERT(!"tg_dtype_store: invalid dtype");
}
