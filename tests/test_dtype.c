/* Tests of src/core/dtype.c: traits, names, f16/bf16 conversions, load/store. */
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "core/core.h"
#include "tapegrad/tapegrad.h"
#include "tapegrad/ops.h"

static uint32_t bits_of(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    return x;
}

static float float_of(uint32_t x)
{
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}

static uint64_t bits64_of(double d)
{
    uint64_t x;
    memcpy(&x, &d, sizeof x);
    return x;
}

/* The value of an f16 bit pattern computed from the IEEE definition, not from
 * bit shuffling: subnormals are mant * 2^-24, normals (1024 + mant) * 2^(e-25). */
static double f16_value(uint16_t h)
{
    int e = (h >> 10) & 0x1F, m = h & 0x3FF;
    double s = (h & 0x8000) ? -1.0 : 1.0;
    if (e == 31) return m ? NAN : s * INFINITY;
    if (e == 0) return s * ldexp(m, -24);
    return s * ldexp(1024 + m, e - 25);
}

static bool f16_is_nan(uint16_t h) { return (h & 0x7C00) == 0x7C00 && (h & 0x03FF) != 0; }

Test(dtype, traits_table)
{
    static const struct { tg_dtype dt; const char *name, *st; size_t size; bool fl, sg; } want[] = {
        {TG_F32, "f32", "F32", 4, true, true},   {TG_F64, "f64", "F64", 8, true, true},
        {TG_F16, "f16", "F16", 2, true, true},   {TG_BF16, "bf16", "BF16", 2, true, true},
        {TG_I8, "i8", "I8", 1, false, true},     {TG_U8, "u8", "U8", 1, false, false},
        {TG_I32, "i32", "I32", 4, false, true},  {TG_I64, "i64", "I64", 8, false, true},
    };
    cr_assert(eq(int, (int)(sizeof want / sizeof want[0]), TG_DTYPE_COUNT));
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const tg_dtype_traits *t = tg_dtype_get_traits(want[i].dt);
        cr_assert(t != NULL);
        cr_assert(eq(str, (char *)t->name, (char *)want[i].name));
        cr_assert(eq(str, (char *)t->st_name, (char *)want[i].st));
        cr_assert(eq(sz, t->size, want[i].size));
        cr_assert(eq(int, t->is_float, want[i].fl));
        cr_assert(eq(int, t->is_signed, want[i].sg));
        cr_assert(eq(str, (char *)tg_dtype_name(want[i].dt), (char *)want[i].name));
        cr_assert(eq(sz, tg_dtype_size(want[i].dt), want[i].size));
        cr_assert(eq(int, tg_dtype_is_float(want[i].dt), want[i].fl));
    }
}

Test(dtype, invalid_dtype_has_no_traits)
{
    cr_assert(tg_dtype_get_traits(TG_DTYPE_COUNT) == NULL);
    cr_assert(tg_dtype_get_traits((tg_dtype)-1) == NULL);
    cr_assert(eq(str, (char *)tg_dtype_name(TG_DTYPE_COUNT), "?"));
    cr_assert(eq(sz, tg_dtype_size((tg_dtype)99), 0));
    cr_assert(not(tg_dtype_is_float((tg_dtype)99)));
}

Test(dtype, from_name_accepts_every_spelling)
{
    static const struct { const char *s; tg_dtype dt; } cases[] = {
        {"f32", TG_F32},   {"F32", TG_F32},       {"float32", TG_F32},  {"float", TG_F32},
        {"bf16", TG_BF16}, {"BF16", TG_BF16},     {"bfloat16", TG_BF16},
        {"f16", TG_F16},   {"F16", TG_F16},       {"float16", TG_F16},  {"half", TG_F16},
        {"f64", TG_F64},   {"F64", TG_F64},       {"float64", TG_F64},  {"double", TG_F64},
        {"i8", TG_I8},     {"I8", TG_I8},         {"int8", TG_I8},
        {"u8", TG_U8},     {"U8", TG_U8},         {"uint8", TG_U8},
        {"i32", TG_I32},   {"I32", TG_I32},       {"int32", TG_I32},
        {"i64", TG_I64},   {"I64", TG_I64},       {"int64", TG_I64},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tg_dtype dt = TG_DTYPE_COUNT;
        cr_assert(eq(int, tg_dtype_from_name(&dt, cases[i].s), TG_OK), "%s", cases[i].s);
        cr_assert(eq(int, (int)dt, (int)cases[i].dt), "%s", cases[i].s);
    }
}

Test(dtype, from_name_rejects_unknown_and_null)
{
    tg_dtype dt = TG_I8;
    cr_assert(eq(int, tg_dtype_from_name(&dt, "f128"), TG_EINVAL));
    cr_assert(eq(int, (int)dt, (int)TG_I8));
    cr_assert(strstr(tg_error_message(), "f128") != NULL);
    cr_assert(eq(int, tg_dtype_from_name(&dt, ""), TG_EINVAL));
    cr_assert(eq(int, tg_dtype_from_name(&dt, "Float32"), TG_EINVAL));
    cr_assert(eq(int, tg_dtype_from_name(&dt, NULL), TG_EINVAL));
    cr_assert(eq(int, tg_dtype_from_name(NULL, "f32"), TG_EINVAL));
    cr_assert(eq(int, (int)dt, (int)TG_I8));
}

Test(dtype, f16_edges)
{
    cr_assert(eq(u16, tg_f32_to_f16(65504.0f), 0x7BFF));          /* largest normal */
    cr_assert(eq(flt, tg_f16_to_f32(0x7BFF), 65504.0f));
    cr_assert(eq(u16, tg_f32_to_f16(65519.0f), 0x7BFF));          /* below the midpoint */
    cr_assert(eq(u16, tg_f32_to_f16(65520.0f), 0x7C00));          /* midpoint: ties to inf */
    cr_assert(eq(u16, tg_f32_to_f16(-65520.0f), 0xFC00));
    cr_assert(eq(u16, tg_f32_to_f16(1e10f), 0x7C00));
    cr_assert(eq(u16, tg_f32_to_f16(ldexpf(1.0f, -14)), 0x0400)); /* smallest normal */
    cr_assert(eq(u16, tg_f32_to_f16(ldexpf(1.0f, -24)), 0x0001)); /* smallest subnormal */
    cr_assert(eq(flt, tg_f16_to_f32(0x0001), ldexpf(1.0f, -24)));
    cr_assert(eq(u16, tg_f32_to_f16(ldexpf(1.0f, -25)), 0x0000)); /* half of it: tie to 0 */
    cr_assert(eq(u16, tg_f32_to_f16(-ldexpf(1.0f, -25)), 0x8000));
    cr_assert(eq(u16, tg_f32_to_f16(ldexpf(1.0f, -25) * 1.0001f), 0x0001));
    cr_assert(eq(u16, tg_f32_to_f16(ldexpf(3.0f, -25)), 0x0002)); /* 1.5 units: tie to 2 */
    cr_assert(eq(u16, tg_f32_to_f16(ldexpf(1023.5f, -24)), 0x0400)); /* tie to even: normal */
    cr_assert(eq(u16, tg_f32_to_f16(1.0f + ldexpf(1.0f, -11)), 0x3C00));      /* tie to 1 */
    cr_assert(eq(u16, tg_f32_to_f16(1.0f + ldexpf(3.0f, -11)), 0x3C02));      /* tie up */
    cr_assert(eq(u16, tg_f32_to_f16(1.0f + ldexpf(1.0f, -11) + ldexpf(1.0f, -20)), 0x3C01));
    cr_assert(eq(u16, tg_f32_to_f16(INFINITY), 0x7C00));
    cr_assert(eq(u16, tg_f32_to_f16(-INFINITY), 0xFC00));
    cr_assert(eq(u16, tg_f32_to_f16(-0.0f), 0x8000));
    cr_assert(eq(u16, tg_f32_to_f16(0.0f), 0x0000));
    cr_assert(eq(u32, bits_of(tg_f16_to_f32(0x8000)), 0x80000000u));
    cr_assert(isinf(tg_f16_to_f32(0xFC00)) != 0 && tg_f16_to_f32(0xFC00) < 0);
}

Test(dtype, f16_nan_stays_nan)
{
    uint16_t h = tg_f32_to_f16(NAN);
    cr_assert(f16_is_nan(h));
    cr_assert(0 != (h & 0x0200), "quiet bit set");
    cr_assert(f16_is_nan(tg_f32_to_f16(-NAN)) && (tg_f32_to_f16(-NAN) & 0x8000) != 0);
    /* A NaN whose payload lives only in the low f32 bits must not become inf. */
    cr_assert(f16_is_nan(tg_f32_to_f16(float_of(0x7F800001u))));
    cr_assert(isnan(tg_f16_to_f32(0x7C01)));
    cr_assert(isnan(tg_f16_to_f32(0xFE00)) && signbit(tg_f16_to_f32(0xFE00)) != 0);
}

/* Every f16 value converts exactly to f32 (checked against the IEEE formula)
 * and back to the same bits. */
Test(dtype, f16_exhaustive_round_trip)
{
    for (uint32_t i = 0; i < 65536; i++) {
        uint16_t h = (uint16_t)i;
        float f = tg_f16_to_f32(h);
        if (f16_is_nan(h)) {
            cr_assert(isnan(f), "0x%04x", i);
            uint16_t back = tg_f32_to_f16(f);
            cr_assert(f16_is_nan(back) && (back & 0x8000) == (h & 0x8000), "0x%04x", i);
            continue;
        }
        if ((double)f != f16_value(h) || tg_f32_to_f16(f) != h)
            cr_fatal("f16 0x%04x: f32 %.9g (want %.9g), back 0x%04x", i, (double)f,
                     f16_value(h), tg_f32_to_f16(f));
        if (f == 0.0f) cr_assert(eq(int, !!signbit(f), !!(h & 0x8000)));
    }
}

/* Fails unless h is the f16 nearest to v, ties to the even mantissa; values
 * at or past the midpoint 65520 above 65504 must give inf. */
static void check_nearest_even(double v, uint16_t h, const char *what)
{
    double got = f16_value(h);
    if (isinf(got)) {
        if (fabs(v) < 65520.0 || !!signbit(got) != !!signbit(v)) cr_fatal("%s %.17g -> inf", what, v);
        return;
    }
    if (got != 0 && !!signbit(got) != !!signbit(v)) cr_fatal("%s %.17g: sign", what, v);
    double err = fabs(got - v);
    uint16_t mag = h & 0x7FFF;
    double up = f16_value((uint16_t)(mag + 1)), dn = mag ? f16_value((uint16_t)(mag - 1)) : 0;
    double eu = fabs(up - fabs(v)), ed = fabs(fabs(v) - dn);
    if (err > eu || err > ed || ((err == eu || err == ed) && (h & 1)))
        cr_fatal("%s %.17g -> 0x%04x: not nearest-even", what, v, h);
}

/* For f32 values spread over the f16 range (and past it), the result is the
 * nearest f16, with ties to the even mantissa: checked against neighbours. */
Test(dtype, f16_rounding_is_nearest_even)
{
    uint32_t state = 12345;
    for (int k = 0; k < 200000; k++) {
        state = state * 1664525u + 1013904223u;
        /* exponents 2^-26 .. 2^16, any mantissa, either sign */
        uint32_t e = 101 + (state >> 8) % 42;
        uint32_t x = (state & 0x80000000u) | (e << 23) | ((state * 2654435761u) & 0x7FFFFFu);
        check_nearest_even(float_of(x), tg_f32_to_f16(float_of(x)), "f32");
    }
}

/* The same from f64 through tg_dtype_store, including values within a hair
 * of an f16 tie (where rounding to f32 first would land on the tie). */
Test(dtype, f16_store_from_f64_is_nearest_even)
{
    uint64_t state = 777;
    for (int k = 0; k < 100000; k++) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        int e = -26 + (int)((state >> 33) % 43);
        double m = 1.0 + (double)(state >> 53) / 2048.0;            /* an f16-ish grid point */
        double tie = m + ((state >> 20) & 1 ? 1.0 : -1.0) / 4096.0;  /* a half step away */
        double hair = ldexp((double)((state >> 10) & 0xFF) - 128.0, -52);
        double v = ldexp(tie + hair, e) * ((state >> 5) & 1 ? -1.0 : 1.0);
        uint16_t h;
        tg_dtype_store(TG_F16, &h, 0, v);
        check_nearest_even(v, h, "f64");
    }
}

Test(dtype, bf16_edges)
{
    cr_assert(eq(u16, tg_f32_to_bf16(float_of(0x3F808000u)), 0x3F80));   /* tie to even */
    cr_assert(eq(u16, tg_f32_to_bf16(float_of(0x3F818000u)), 0x3F82));   /* tie up to even */
    cr_assert(eq(u16, tg_f32_to_bf16(float_of(0x3F808001u)), 0x3F81));   /* above the tie */
    cr_assert(eq(u16, tg_f32_to_bf16(float_of(0x3F807FFFu)), 0x3F80));   /* below it */
    cr_assert(eq(u16, tg_f32_to_bf16(1.0f), 0x3F80));
    cr_assert(eq(flt, tg_bf16_to_f32(0x3F80), 1.0f));
    cr_assert(eq(flt, tg_bf16_to_f32(0xC040), -3.0f));
    cr_assert(eq(u16, tg_f32_to_bf16(float_of(0x7F7FFFFFu)), 0x7F80));   /* FLT_MAX -> inf */
    cr_assert(eq(u16, tg_f32_to_bf16(float_of(0x7F7F7FFFu)), 0x7F7F));
    cr_assert(eq(u16, tg_f32_to_bf16(INFINITY), 0x7F80));
    cr_assert(eq(u16, tg_f32_to_bf16(-INFINITY), 0xFF80));
    cr_assert(eq(u16, tg_f32_to_bf16(-0.0f), 0x8000));
    cr_assert(eq(u16, tg_f32_to_bf16(float_of(0x00000001u)), 0x0000));   /* tiny subnormal */
    uint16_t n = tg_f32_to_bf16(float_of(0x7F800001u));   /* payload only in low bits */
    bool n_is_nan = (n & 0x7F80) == 0x7F80 && (n & 0x7F) != 0;
    cr_assert(n_is_nan, "NaN stays NaN: 0x%04x", n);
    cr_assert(isnan(tg_bf16_to_f32(tg_f32_to_bf16(NAN))));
    cr_assert(isnan(tg_bf16_to_f32(tg_f32_to_bf16(-NAN))));
    cr_assert(signbit(tg_bf16_to_f32(tg_f32_to_bf16(-NAN))) != 0);
}

Test(dtype, bf16_exhaustive_round_trip)
{
    for (uint32_t i = 0; i < 65536; i++) {
        float f = tg_bf16_to_f32((uint16_t)i);
        cr_assert(eq(u32, bits_of(f), i << 16));
        bool nan = (i & 0x7F80) == 0x7F80 && (i & 0x7F);
        if (!nan) cr_assert(eq(u16, tg_f32_to_bf16(f), (uint16_t)i));
        else cr_assert(isnan(tg_bf16_to_f32(tg_f32_to_bf16(f))));
    }
}

/* Truncation toward zero inside the range, as C and PyTorch; beyond it,
 * where both leave the result undefined, saturation. */
Test(dtype, store_truncates_and_saturates_integers)
{
    int8_t i8[1];
    uint8_t u8[1];
    int32_t i32[1];
    int64_t i64[1];
    static const struct { double v; int8_t want; } c8[] = {
        {200, 127}, {-200, -128}, {127.4, 127}, {127.6, 127}, {-128.6, -128}, {1e300, 127},
        {-INFINITY, -128}, {INFINITY, 127}, {NAN, 0}, {2.5, 2}, {3.5, 3}, {-2.5, -2}, {-0.4, 0},
        {2.7, 2}, {-2.7, -2}, {-0.99, 0}, {128.0, 127}, {-129.0, -128},
    };
    for (size_t k = 0; k < sizeof c8 / sizeof c8[0]; k++) {
        tg_dtype_store(TG_I8, i8, 0, c8[k].v);
        cr_assert(eq(i8, i8[0], c8[k].want), "i8 store %g", c8[k].v);
    }
    tg_dtype_store(TG_U8, u8, 0, -1.0);
    cr_assert(eq(u8, u8[0], 0));
    tg_dtype_store(TG_U8, u8, 0, 255.9);
    cr_assert(eq(u8, u8[0], 255));
    tg_dtype_store(TG_U8, u8, 0, -0.9);
    cr_assert(eq(u8, u8[0], 0));
    tg_dtype_store(TG_U8, u8, 0, 256.0);
    cr_assert(eq(u8, u8[0], 255));
    tg_dtype_store(TG_U8, u8, 0, NAN);
    cr_assert(eq(u8, u8[0], 0));
    tg_dtype_store(TG_I32, i32, 0, 3e9);
    cr_assert(eq(i32, i32[0], INT32_MAX));
    tg_dtype_store(TG_I32, i32, 0, -3e9);
    cr_assert(eq(i32, i32[0], INT32_MIN));
    tg_dtype_store(TG_I32, i32, 0, -2147483648.0);
    cr_assert(eq(i32, i32[0], INT32_MIN));
    tg_dtype_store(TG_I64, i64, 0, 9223372036854775808.0);   /* 2^63 */
    cr_assert(eq(i64, i64[0], INT64_MAX));
    tg_dtype_store(TG_I64, i64, 0, -1e19);
    cr_assert(eq(i64, i64[0], INT64_MIN));
    tg_dtype_store(TG_I64, i64, 0, 4503599627370497.0);      /* 2^52 + 1, exact */
    cr_assert(eq(i64, i64[0], 4503599627370497LL));
    tg_dtype_store(TG_I64, i64, 0, -4503599627370495.5);     /* -(2^52 - 0.5), exact */
    cr_assert(eq(i64, i64[0], -4503599627370495LL));
    tg_dtype_store(TG_I64, i64, 0, NAN);
    cr_assert(eq(i64, i64[0], 0));
}

/* tg_to_dtype from f32 and f64 to every integer dtype against torch 1.13's
 * Tensor.to (scripts/make_cast_goldens.py: values whose cast torch defines,
 * ties and both ends of each range included), bit for bit. */
Test(dtype, float_to_int_casts_match_torch)
{
    tg_st_file *f = th_golden_load("cast.safetensors");
    static const char *const src[] = {"f32", "f64"}, *const dst[] = {"i8", "u8", "i32", "i64"};
    for (size_t i = 0; i < 2; i++) {
        for (size_t j = 0; j < 4; j++) {
            char xn[16], yn[16];
            snprintf(xn, sizeof xn, "x.%s.%s", src[i], dst[j]);
            snprintf(yn, sizeof yn, "y.%s.%s", src[i], dst[j]);
            tg_tensor *x = tg_st_get(f, xn), *want = tg_st_get(f, yn), *y = NULL;
            cr_assert(x && want, "%s and %s in the golden file", xn, yn);
            cr_assert(eq(int, tg_to_dtype(&y, x, tg_tensor_dtype(want)), TG_OK), "%s",
                      tg_error_message());
            const int64_t n = tg_tensor_numel(want);
            cr_assert(eq(i64, tg_tensor_numel(y), n));
            cr_assert(n > 250, "%s: the file holds the cases", xn);
            const size_t esz = tg_dtype_size(tg_tensor_dtype(want));
            const unsigned char *a = tg_tensor_cdata(y), *b = tg_tensor_cdata(want);
            for (int64_t k = 0; k < n; k++)
                cr_assert(eq(int, memcmp(a + k * esz, b + k * esz, esz), 0),
                          "%s[%lld] = %.17g: got %.17g, torch %.17g", xn, (long long)k,
                          th_at(x, k), th_at(y, k), th_at(want, k));
            tg_tensor_release(y);
        }
    }
    tg_st_free(f);
}

Test(dtype, load_store_every_dtype)
{
    _Alignas(8) unsigned char buf[3 * 8];
    for (int d = 0; d < TG_DTYPE_COUNT; d++) {
        memset(buf, 0xAB, sizeof buf);
        tg_dtype_store((tg_dtype)d, buf, 1, -3.0);   /* exactly representable except u8 */
        double want = d == TG_U8 ? 0.0 : -3.0;
        cr_assert(eq(dbl, tg_dtype_load((tg_dtype)d, buf, 1), want), "%s", tg_dtype_name(d));
        /* Element 0 and 2 untouched: the store wrote exactly one element. */
        size_t sz = tg_dtype_size((tg_dtype)d);
        cr_assert(eq(u8, buf[0], 0xAB));
        cr_assert(eq(u8, buf[2 * sz], 0xAB));
    }
    /* A NULL buffer or a value that is not a tg_dtype: NaN read, nothing written. */
    memset(buf, 0xAB, sizeof buf);
    cr_assert(isnan(tg_dtype_load(TG_F32, NULL, 0)));
    cr_assert(isnan(tg_dtype_load((tg_dtype)99, buf, 0)));
    cr_assert(isnan(tg_dtype_load((tg_dtype)-1, buf, 0)));
    tg_dtype_store(TG_F64, NULL, 0, 1.0);
    tg_dtype_store(TG_DTYPE_COUNT, buf, 0, 1.0);
    for (size_t k = 0; k < sizeof buf; k++) cr_assert(eq(u8, buf[k], 0xAB));
    /* Floats round to nearest: 1/3 in f16 is the f16 nearest to it. */
    uint16_t h[1];
    tg_dtype_store(TG_F16, h, 0, 1.0 / 3.0);
    cr_assert(eq(u16, h[0], 0x3555));   /* 1365/4096 = 0.333252 (0x3556 is 0.333496) */
    tg_dtype_store(TG_BF16, h, 0, 1.0 / 3.0);
    cr_assert(eq(u16, h[0], 0x3EAB));   /* 171/512 = 0.333984 vs 170/512 = 0.332031 */
    /* One rounding from f64, not two: 1 + 2^-11 + 2^-40 is just above the f16
     * tie between 1 and 1 + 2^-10 (as f32 it would be the tie itself). */
    tg_dtype_store(TG_F16, h, 0, 1.0 + ldexp(1.0, -11) + ldexp(1.0, -40));
    cr_assert(eq(u16, h[0], 0x3C01));
    tg_dtype_store(TG_F16, h, 0, -(1.0 + ldexp(1.0, -11) - ldexp(1.0, -40)));
    cr_assert(eq(u16, h[0], 0xBC00));
    tg_dtype_store(TG_BF16, h, 0, 1.0 + ldexp(1.0, -8) + ldexp(1.0, -40));
    cr_assert(eq(u16, h[0], 0x3F81));
    tg_dtype_store(TG_F16, h, 0, ldexp(1.0, -25) + ldexp(1.0, -60));   /* above half the min subnormal */
    cr_assert(eq(u16, h[0], 0x0001));
    tg_dtype_store(TG_F16, h, 0, 1e300);
    cr_assert(eq(u16, h[0], 0x7C00));
    tg_dtype_store(TG_BF16, h, 0, -1e300);
    cr_assert(eq(u16, h[0], 0xFF80));
}

/* ---- bulk half <-> f32 (tg__f32_to_half_n / tg__half_to_f32_n) ---------- */

/* bf16 nearest to the finite f32 x, ties to even, found by comparing the
 * distances to the two bf16 neighbours in double arithmetic (independent of
 * the bias trick of the code); the step past the largest finite bf16 is inf
 * at distance 2^128. */
static uint16_t bf16_nearest_ref(uint32_t x)
{
    uint32_t mag = x & 0x7FFFFFFFu, lo = mag & 0xFFFF0000u, hi = lo + 0x10000u;
    double v = (double)float_of(mag);
    double dl = v - (double)float_of(lo);
    double dh = (hi == 0x7F800000u ? ldexp(1.0, 128) : (double)float_of(hi)) - v;
    uint32_t pick = dl < dh ? lo : dh < dl ? hi : (((lo >> 16) & 1u) ? hi : lo);
    return (uint16_t)(((x & 0x80000000u) | pick) >> 16);
}

/* A sweep of f32 bit patterns: both signs, every exponent, mantissas with
 * single bits, runs of ones and tie patterns at every rounding position
 * (f16 subnormal results round at positions 13..24), plus pseudo-random
 * ones; NaN payloads and infinities come from exponent 255. */
static uint32_t *f32_sweep(size_t *count)
{
    enum { MANTS = 23 * 3 + 4 + 48 };
    uint32_t mants[MANTS];
    int m = 0;
    for (int k = 0; k < 23; k++) {
        mants[m++] = 1u << k;                          /* a tie when k is the cut */
        mants[m++] = ((1u << k) - 1u) | (1u << k);     /* just above a tie */
        mants[m++] = (1u << k) | (k < 22 ? 1u << (k + 1) : 0u);   /* tie with odd kept bit */
    }
    mants[m++] = 0;
    mants[m++] = 0x7FFFFFu;
    mants[m++] = 0x400000u | 0x1FFFu;
    mants[m++] = 0x3FFFFFu;
    uint64_t s = 99;
    while (m < MANTS) mants[m++] = (uint32_t)(th_xorshift64(&s) >> 20) & 0x7FFFFFu;
    size_t n = 2u * 256u * MANTS;
    uint32_t *xs = malloc(n * sizeof *xs);
    cr_assert(xs != NULL);
    size_t i = 0;
    for (uint32_t sg = 0; sg < 2; sg++)
        for (uint32_t e = 0; e < 256; e++)
            for (int k = 0; k < MANTS; k++) xs[i++] = (sg << 31) | (e << 23) | mants[k];
    *count = n;
    return xs;
}

/* The vector kernels are really taken where the CPU has them (otherwise the
 * vector == scalar tests below would compare the scalar loop with itself). */
Test(dtype, bulk_simd_path_is_taken_where_supported)
{
#if defined(__x86_64__)
    /* F16C from CPUID.1:ECX (clang's __builtin_cpu_supports lacks "f16c") */
    unsigned a, b, c, d;
    bool f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
    cr_assert(eq(int, tg__cpu_has_half_simd(), f16c && __builtin_cpu_supports("avx2")));
#else
    cr_assert(!tg__cpu_has_half_simd());
#endif
}

Test(dtype, bulk_half_to_f32_exhaustive)
{
    static uint16_t h[65536];
    static float fs[65536], fv[65536];
    for (uint32_t i = 0; i < 65536; i++) h[i] = (uint16_t)i;
    for (int which = 0; which < 2; which++) {
        tg_dtype dt = which ? TG_BF16 : TG_F16;
        tg__half_to_f32_n(dt, h, fs, 65536, false);
        tg__half_to_f32_n(dt, h, fv, 65536, true);
        for (uint32_t i = 0; i < 65536; i++) {
            uint32_t want;
            if (dt == TG_BF16) {
                want = i << 16;   /* bf16 is the top half of f32 */
            } else if (f16_is_nan((uint16_t)i)) {
                /* IEEE/x86: the payload moves up 13 bits and the NaN is made quiet */
                want = ((i & 0x8000u) << 16) | 0x7FC00000u | ((i & 0x3FFu) << 13);
            } else {
                want = bits_of((float)f16_value((uint16_t)i));
            }
            if (bits_of(fs[i]) != want || bits_of(fv[i]) != want)
                cr_fatal("%s 0x%04x: scalar 0x%08x simd 0x%08x want 0x%08x", tg_dtype_name(dt),
                         i, bits_of(fs[i]), bits_of(fv[i]), want);
        }
    }
}

Test(dtype, bulk_f32_to_half_matches_reference)
{
    size_t n;
    uint32_t *xs = f32_sweep(&n);
    float *f = malloc(n * sizeof *f);
    uint16_t *hs = malloc(n * sizeof *hs), *hv = malloc(n * sizeof *hv);
    cr_assert(f && hs && hv);
    for (size_t i = 0; i < n; i++) f[i] = float_of(xs[i]);
    for (int which = 0; which < 2; which++) {
        tg_dtype dt = which ? TG_BF16 : TG_F16;
        tg__f32_to_half_n(dt, f, hs, (int64_t)n, false);
        tg__f32_to_half_n(dt, f, hv, (int64_t)n, true);
        for (size_t i = 0; i < n; i++) {
            uint32_t x = xs[i];
            bool nan = (x & 0x7FFFFFFFu) > 0x7F800000u;
            uint16_t want;
            if (nan)   /* quiet NaN, sign and top payload bits kept */
                want = dt == TG_BF16 ? (uint16_t)((x >> 16) | 0x40u)
                                     : (uint16_t)(((x >> 16) & 0x8000u) | 0x7E00u | ((x >> 13) & 0x3FFu));
            else
                want = dt == TG_BF16 ? bf16_nearest_ref(x) : tg_f32_to_f16(f[i]);
            if (hs[i] != want || hv[i] != want)
                cr_fatal("%s of 0x%08x: scalar 0x%04x simd 0x%04x want 0x%04x",
                         tg_dtype_name(dt), x, hs[i], hv[i], want);
            if (dt == TG_F16 && !nan) check_nearest_even((double)f[i], hv[i], "bulk");
        }
    }
    free(xs);
    free(f);
    free(hs);
    free(hv);
}

/* Lengths 0..40 (every SIMD tail) at unaligned starts: the bulk result equals
 * the scalar function element by element and nothing past n is written. */
Test(dtype, bulk_tails_and_unaligned_starts)
{
    float src[48], back[48];
    uint16_t h[48], hsrc[48];
    uint64_t s = 5;
    for (int i = 0; i < 48; i++) {
        src[i] = (float)(th_uniform_pm1(&s) * 70000.0);   /* some overflow f16 */
        hsrc[i] = (uint16_t)(th_xorshift64(&s) >> 48);
    }
    for (int which = 0; which < 2; which++) {
        tg_dtype dt = which ? TG_BF16 : TG_F16;
        for (int off = 0; off < 4; off++)
            for (int n = 0; n <= 40; n++) {
                for (int i = 0; i < 48; i++) h[i] = 0xABCD, back[i] = -7.0f;
                tg__f32_to_half_n(dt, src + off, h + off, n, true);
                tg__half_to_f32_n(dt, hsrc + off, back + off, n, true);
                for (int i = 0; i < 48; i++) {
                    bool in = i >= off && i < off + n;
                    uint16_t wh = !in ? 0xABCD : dt == TG_F16 ? tg_f32_to_f16(src[i])
                                                             : tg_f32_to_bf16(src[i]);
                    float wf = !in ? -7.0f : dt == TG_F16 ? tg_f16_to_f32(hsrc[i])
                                                         : tg_bf16_to_f32(hsrc[i]);
                    cr_assert(eq(u16, h[i], wh), "%s n=%d off=%d i=%d", tg_dtype_name(dt), n, off, i);
                    cr_assert(eq(u32, bits_of(back[i]), bits_of(wf)), "%s n=%d off=%d i=%d",
                              tg_dtype_name(dt), n, off, i);
                }
            }
    }
}

/* Strided and broadcast (step 0) runs through gather/scatter of a view, and a
 * run long enough for the parallel path, agree with element-wise load/store. */
Test(dtype, bulk_strided_views_match_elementwise)
{
    int64_t shape[2] = {300, 7};
    tg_tensor *t = tg__tensor_empty(TG_BF16, 2, shape);
    cr_assert(t != NULL);
    uint16_t *d = tg_tensor_data(t);
    uint64_t s = 11;
    for (int i = 0; i < 2100; i++) d[i] = tg_f32_to_bf16((float)th_uniform_pm1(&s));
    /* the transpose (7, 300): strides (1, 7) */
    tg_tensor v = *t;
    v.shape[0] = 7, v.shape[1] = 300, v.strides[0] = 1, v.strides[1] = 7;
    float got[2100], row[300];
    tg__gather(&v, TG_F32, got);
    for (int i = 0; i < 7; i++)
        for (int j = 0; j < 300; j++)
            cr_assert(eq(u32, bits_of(got[i * 300 + j]), (uint32_t)d[j * 7 + i] << 16));
    for (int j = 0; j < 300; j++) row[j] = (float)j + 0.5f;   /* 10 bits: most need rounding */
    v.shape[0] = 300, v.ndim = 1, v.strides[0] = 7, v.offset = 3;   /* column 3 */
    tg__scatter(&v, TG_F32, row);
    for (int j = 0; j < 300; j++) cr_assert(eq(u16, d[j * 7 + 3], tg_f32_to_bf16(row[j])));
    tg_tensor_release(t);

    enum { N = 200003 };
    float *f = malloc(N * sizeof *f), *g = malloc(N * sizeof *g);
    uint16_t *h = malloc(N * sizeof *h);
    cr_assert(f && g && h);
    for (int i = 0; i < N; i++) f[i] = (float)(th_uniform_pm1(&s) * 1e5);
    tg__convert_n(TG_F32, f, TG_F16, h, N);
    tg__convert_n(TG_F16, h, TG_F32, g, N);
    for (int i = 0; i < N; i++) {
        uint16_t w = tg_f32_to_f16(f[i]);
        if (h[i] != w || bits_of(g[i]) != bits_of(tg_f16_to_f32(w))) cr_fatal("i=%d", i);
    }
    free(f);
    free(g);
    free(h);
}

/* The strided block conversions equal the contiguous ones row by row, and
 * touch nothing between the rows: rows of 49 (vector blocks and a scalar
 * tail) and of 5, both directions, f16 and bf16. */
Test(dtype, bulk_rows_match_contiguous_runs)
{
    enum { ROWS = 6, SS = 64, DS = 57 };   /* element strides of the two sides */
    const int64_t lens[2] = {49, 5};
    static uint16_t h[ROWS * SS], h2[ROWS * DS], hw[ROWS * DS];
    static float f[ROWS * SS], f2[ROWS * DS], fw[ROWS * DS];
    uint64_t s = 7;
    for (int i = 0; i < ROWS * SS; i++) {
        h[i] = (uint16_t)(th_xorshift64(&s) >> 48);
        f[i] = float_of((uint32_t)(th_xorshift64(&s) >> 32));
    }
    for (int which = 0; which < 2; which++)
        for (int l = 0; l < 2; l++) {
            const tg_dtype dt = which ? TG_BF16 : TG_F16;
            const int64_t len = lens[l];
            memset(f2, 0xA5, sizeof f2), memset(fw, 0xA5, sizeof fw);
            memset(h2, 0x5A, sizeof h2), memset(hw, 0x5A, sizeof hw);
            tg__half_to_f32_rows(dt, h, SS, f2, DS, ROWS, len);
            tg__f32_to_half_rows(dt, f, SS, h2, DS, ROWS, len);
            for (int r = 0; r < ROWS; r++) {
                tg__half_to_f32_n(dt, h + r * SS, fw + r * DS, len, false);
                tg__f32_to_half_n(dt, f + r * SS, hw + r * DS, len, false);
            }
            cr_assert(eq(int, memcmp(f2, fw, sizeof f2), 0), "%s to f32, rows of %lld",
                      tg_dtype_name(dt), (long long)len);
            cr_assert(eq(int, memcmp(h2, hw, sizeof h2), 0), "f32 to %s, rows of %lld",
                      tg_dtype_name(dt), (long long)len);
        }
}

/* ---- bulk half <-> f64 (tg__f64_to_half_n / tg__half_to_f64_n) ---------- */

/* Half to f64 over every bit pattern, and f64 to half over the widened f32
 * sweep, each pattern nudged below f32's resolution (a value just off a tie
 * of the half, where rounding through a nearest f32 would land on the tie
 * and then on the even neighbour), and values beyond f32's range (past
 * FLT_MAX, under its smallest subnormal), at lengths 0..300 (every tail of
 * the 256-element blocks): the bits of tg_dtype_load / tg_dtype_store. */
Test(dtype, bulk_f64_half_matches_load_store)
{
    static uint16_t h[65536], hb[65536];
    static double d[65536];
    for (uint32_t i = 0; i < 65536; i++) h[i] = (uint16_t)i;
    size_t n;
    uint32_t *xs = f32_sweep(&n);
    double *v = malloc((3 * n + 6) * sizeof *v);
    uint16_t *got = malloc((3 * n + 6) * sizeof *got);
    cr_assert(v && got);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        const double x = (double)float_of(xs[i]);
        v[m++] = x;
        v[m++] = x * (1 + ldexp(1.0, -40));
        v[m++] = x * (1 - ldexp(1.0, -40));
    }
    const double far[6] = {1e39, -1e300, 0x1.fffffep127 * (1 + 0x1p-30), 1e-50, -0x1p-150,
                           0x1p-149 * 0.75};
    for (int i = 0; i < 6; i++) v[m++] = far[i];
    for (int which = 0; which < 2; which++) {
        const tg_dtype dt = which ? TG_BF16 : TG_F16;
        tg__half_to_f64_n(dt, h, d, 65536);
        for (uint32_t i = 0; i < 65536; i++) {
            const double want = tg_dtype_load(dt, h, i);
            if (memcmp(&d[i], &want, sizeof want) != 0)
                cr_fatal("%s 0x%04x: %a, load gives %a", tg_dtype_name(dt), i, d[i], want);
        }
        tg__f64_to_half_n(dt, v, got, (int64_t)m);
        for (size_t i = 0; i < m; i++) {
            tg_dtype_store(dt, hb, 0, v[i]);
            if (got[i] != hb[0])
                cr_fatal("%s of %a: 0x%04x, store gives 0x%04x", tg_dtype_name(dt), v[i],
                         got[i], hb[0]);
        }
        for (int64_t len = 0; len <= 300; len++) {   /* nothing past len is written */
            for (int i = 0; i < 302; i++) hb[i] = 0xABCD;
            tg__f64_to_half_n(dt, v + 1000, hb, len);
            for (int64_t i = 0; i < 302; i++) {
                uint16_t want = 0xABCD;
                if (i < len) tg_dtype_store(dt, &want, 0, v[1000 + i]);
                cr_assert(eq(u16, hb[i], want), "%s len=%lld i=%lld", tg_dtype_name(dt),
                          (long long)len, (long long)i);
            }
        }
    }
    free(xs);
    free(v);
    free(got);
}

/* Values at and just off the halfway points between neighbouring halves of
 * dtype dt, three per bit pattern (a rounding through the nearest f32 lands
 * on the tie and then on the even neighbour; a store rounds once). */
static void half_ties(tg_dtype dt, double *v)
{
    for (uint32_t i = 0; i < 65536; i++) {
        const uint16_t lo = (uint16_t)i, hi = (uint16_t)(i + 1);
        const double a = tg_dtype_load(dt, &lo, 0), b = tg_dtype_load(dt, &hi, 0);
        const double mid = isfinite(a) && isfinite(b) ? a + (b - a) / 2 : a;
        v[3 * i] = mid;
        v[3 * i + 1] = mid * (1 + 0x1p-40);
        v[3 * i + 2] = mid * (1 - 0x1p-40);
    }
}

/* The (C, R) transpose of t, a (R, C) tensor: element (j, i) is t's (i, j). */
static tg_tensor transposed(const tg_tensor *t)
{
    tg_tensor v = *t;
    v.shape[0] = t->shape[1], v.shape[1] = t->shape[0];
    v.strides[0] = 1, v.strides[1] = t->shape[1];
    return v;
}

/* f64 <-> f16 and f64 <-> bf16 copies have the bits of tg_dtype_store and
 * tg_dtype_load element by element: contiguous (tg__convert_n), from and
 * into a transposed view (gather and scatter: strided runs on either side)
 * and from a broadcast view (runs of step 0), over half_ties' values. */
Test(dtype, f64_half_copies_round_as_store)
{
    enum { R = 512, C = 384, N = R * C };   /* N = 3 * 65536 */
    const int64_t shape[2] = {R, C};
    for (int which = 0; which < 2; which++) {
        const tg_dtype dt = which ? TG_BF16 : TG_F16;
        const char *name = tg_dtype_name(dt);
        tg_tensor *t64 = tg__tensor_empty(TG_F64, 2, shape);
        tg_tensor *t16 = tg__tensor_empty(dt, 2, shape);
        double *d = malloc(N * sizeof *d);
        uint16_t *h = malloc(N * sizeof *h);
        cr_assert(t64 && t16 && d && h);
        double *v = tg_tensor_data(t64);
        uint16_t *w = tg_tensor_data(t16), want;
        half_ties(dt, v);
        tg__convert_n(TG_F64, v, dt, w, N);
        for (int i = 0; i < N; i++) {
            tg_dtype_store(dt, &want, 0, v[i]);
            if (w[i] != want) cr_fatal("f64 to %s, contiguous: %a gives 0x%04x, not 0x%04x",
                                       name, v[i], w[i], want);
        }
        tg__convert_n(dt, w, TG_F64, d, N);
        for (int i = 0; i < N; i++)
            if (bits64_of(d[i]) != bits64_of(tg_dtype_load(dt, w, i)))
                cr_fatal("%s to f64, contiguous: 0x%04x gives %a", name, w[i], d[i]);
        tg_tensor v64 = transposed(t64), v16 = transposed(t16);
        tg__gather(&v64, dt, h);   /* strided f64 source */
        tg__gather(&v16, TG_F64, d);   /* strided half source */
        for (int j = 0; j < C; j++)
            for (int i = 0; i < R; i++) {
                tg_dtype_store(dt, &want, 0, v[i * C + j]);
                if (h[j * R + i] != want)
                    cr_fatal("f64 to %s, strided source (%d, %d)", name, i, j);
                if (bits64_of(d[j * R + i]) != bits64_of(tg_dtype_load(dt, w, i * C + j)))
                    cr_fatal("%s to f64, strided source (%d, %d)", name, i, j);
            }
        double *src = malloc(N * sizeof *src);
        cr_assert(src != NULL);
        memcpy(src, v, N * sizeof *src);
        tg__scatter(&v16, TG_F64, src);   /* strided half destination */
        tg__scatter(&v64, dt, h);         /* strided f64 destination */
        for (int j = 0; j < C; j++)
            for (int i = 0; i < R; i++) {
                tg_dtype_store(dt, &want, 0, src[j * R + i]);
                if (w[i * C + j] != want)
                    cr_fatal("f64 to %s, strided dest (%d, %d)", name, i, j);
                if (bits64_of(v[i * C + j]) != bits64_of(tg_dtype_load(dt, h, j * R + i)))
                    cr_fatal("%s to f64, strided dest (%d, %d)", name, i, j);
            }
        tg_tensor b64 = *t64;   /* (C, R), element (j, i) = src's element j: step 0 in a run */
        b64.shape[0] = C, b64.shape[1] = R, b64.strides[0] = 1, b64.strides[1] = 0;
        memcpy(v, src, C * sizeof *v);
        tg__gather(&b64, dt, h);
        for (int j = 0; j < C; j++) {
            tg_dtype_store(dt, &want, 0, src[j]);
            for (int i = 0; i < R; i++)
                if (h[j * R + i] != want) cr_fatal("f64 to %s, broadcast (%d, %d)", name, j, i);
        }
        free(src);
        free(d);
        free(h);
        tg_tensor_release(t64);
        tg_tensor_release(t16);
    }
}
