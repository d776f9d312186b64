/* Tests of src/core/dtype.c: traits, names, f16/bf16 conversions, load/store
 * (the bulk conversions: test_dtype_bulk.c). */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dtype_fixtures.h"
#include "helpers.h"
#include "core/core.h"
#include "tapegrad/tapegrad.h"
#include "tapegrad/ops.h"

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
