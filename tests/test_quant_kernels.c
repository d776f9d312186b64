/* tests/test_quant_kernels.c - the integer arithmetic under the quantized
 * ops: the fixed-point requantizer against exact long-double arithmetic,
 * every int8 GEMM kernel against a naive i64 loop, and the AVX-512
 * requantization (by rows, and one channel per lane) against the scalar
 * formula, and the AMX byte-tile products (emulated, and on the CPU's
 * tiles where it has them) against the instructions' definition.  (Every
 * kernel against the portable one on whole quantized ops: test_quant_ops.c.) */
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "helpers.h"
#include "core/core.h"
#include "quant/quant_internal.h"
#include "tapegrad/autograd.h"
#include "tapegrad/ops.h"
#include "tapegrad/quant.h"
#include "tapegrad/registry.h"
#include "tapegrad/status.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;   /* each test starts from it (fork) */
static double rnd(void) { return th_uniform_pm1(&rng_state); }
static int64_t rnd_int(int64_t lo, int64_t hi) { return th_rand_int(&rng_state, lo, hi); }

/* ---- fixed-point requantization ---- */

Test(quant_kernels, requantize_is_exact_round_half_even)
{
    for (int it = 0; it < 2000; it++) {
        double m = exp2(rnd() * 20 - 12);   /* 2^-32 .. 2^8 */
        int32_t m0;
        int shift;
        cr_assert(eq(int, tg_quant_multiplier(m, &m0, &shift), TG_OK));
        cr_assert(m0 > 0 && shift >= 1 && shift <= 62);
        cr_assert(fabs(ldexp((double)m0, -shift) / m - 1) < 1e-8, "m=%g", m);
        int64_t acc = rnd_int(-2000000000, 2000000000);
        long double exact = (long double)acc * m0 / ldexpl(1.0L, shift);
        long double fl = floorl(exact), frac = exact - fl;
        long double want = frac > 0.5L ? fl + 1 : frac < 0.5L ? fl : (fmodl(fl, 2) != 0 ? fl + 1 : fl);
        cr_assert(eq(i64, tg_quant_requantize(acc, m0, shift), (int64_t)want), "acc=%lld",
                  (long long)acc);
    }
    /* ties: 5 * 2^30 / 2^31 = 2.5 -> 2; 7 * 2^30 / 2^31 = 3.5 -> 4; -2.5 -> -2 */
    cr_assert(eq(i64, tg_quant_requantize(5, 1 << 30, 31), 2));
    cr_assert(eq(i64, tg_quant_requantize(7, 1 << 30, 31), 4));
    cr_assert(eq(i64, tg_quant_requantize(-5, 1 << 30, 31), -2));
    /* Outside the domain: defined (the sanitizer build checks the shifts and
     * the product), shift clamped to [0, 62] and acc * m0 saturated. */
    cr_assert(eq(i64, tg_quant_requantize(7, 1 << 30, 0), (int64_t)7 << 30));
    cr_assert(eq(i64, tg_quant_requantize(7, 1 << 30, -5), (int64_t)7 << 30));
    cr_assert(eq(i64, tg_quant_requantize(7, 1 << 30, 1 << 30),
                 tg_quant_requantize(7, 1 << 30, 62)));
    cr_assert(eq(i64, tg_quant_requantize((int64_t)1 << 40, 1 << 30, 63), 2));   /* (2^63-1)/2^62 */
    cr_assert(eq(i64, tg_quant_requantize(INT64_MIN, INT32_MAX, 62), -2));
    cr_assert(eq(i64, tg_quant_requantize(INT64_MAX, -1, 0), -INT64_MAX));
    int32_t m0 = 7;
    int sh = 7;
    cr_assert(eq(int, tg_quant_multiplier(0x1p31, &m0, &sh), TG_EINVAL));
    cr_assert(eq(int, tg_quant_multiplier(-1, &m0, &sh), TG_EINVAL));
    cr_assert(m0 == 7 && sh == 7);
}

/* The kernels' inlined requantizer (branch-free rounding) against the exact
 * value in long double (s * m0 < 2^62 fits its 64-bit mantissa), with bias,
 * zero point and range; ties (odd s with m0 = 2^30, shift 31) included. */
static int64_t requant_oracle(int32_t acc, const tg__q_requant *r)
{
    int64_t s = (int64_t)acc + r->bias;
    s = s < INT32_MIN ? INT32_MIN : s > INT32_MAX ? INT32_MAX : s;
    const long double exact = (long double)s * r->m0 / ldexpl(1.0L, r->shift);
    const long double fl = floorl(exact), frac = exact - fl;
    const long double q = frac > 0.5L ? fl + 1 : frac < 0.5L ? fl : (fmodl(fl, 2) != 0 ? fl + 1 : fl);
    const int64_t v = r->zp + (int64_t)q;
    return v < r->lo ? r->lo : v > r->hi ? r->hi : v;
}

Test(quant_kernels, inlined_requantizer_is_exact)
{
    for (int it = 0; it < 20000; it++) {
        const bool tie = it % 4 == 0;
        tg__q_requant r = {.bias = tie ? 0 : (int32_t)rnd_int(-100000, 100000),
                           .m0 = tie ? 1 << 30 : (int32_t)rnd_int(1 << 30, INT32_MAX),
                           .shift = tie ? 31 : (int)rnd_int(0, 62),
                           .zp = (int32_t)rnd_int(-128, 255)};
        r.lo = it % 3 ? -128 : r.zp;
        r.hi = it % 2 ? 127 : 255;
        const int32_t acc = tie ? (int32_t)rnd_int(-300, 300)
                                : (int32_t)rnd_int(-(INT64_C(1) << (it % 31)), INT64_C(1) << (it % 31));
        cr_assert(eq(i64, tg__q_requant_one(acc, &r), requant_oracle(acc, &r)),
                  "acc=%d bias=%d m0=%d shift=%d", acc, r.bias, r.m0, r.shift);
    }
}

/* ---- int8 GEMM ---- */

static void naive_gemm(int32_t *c, const void *a, bool a_signed, const int8_t *w, int64_t m,
                       int64_t n, int64_t k)
{
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            int64_t s = 0;
            for (int64_t t = 0; t < k; t++) {
                int64_t av = a_signed ? ((const int8_t *)a)[i * k + t] : ((const uint8_t *)a)[i * k + t];
                s += av * w[j * k + t];
            }
            c[i * n + j] = (int32_t)s;
        }
}

static void fill_bytes(uint8_t *p, int64_t n, int edge_every)
{
    static const uint8_t edges[] = {0x80, 0x7f, 0xff, 0x00, 0x81};
    for (int64_t i = 0; i < n; i++)
        p[i] = (edge_every && i % edge_every == 0) ? edges[(i / edge_every) % 5]
                                                   : (uint8_t)rnd_int(0, 255);
}

Test(quant_kernels, gemm_kernels_are_bit_identical)
{
    const int64_t ks[] = {1, 3, 15, 16, 17, 63, 64, 65, 130, 300};
    const tg_int8_kernel kerns[] = {TG_INT8_KERNEL_PORTABLE, TG_INT8_KERNEL_AVX2,
                                    TG_INT8_KERNEL_VNNI};
    int ran = 0;
    for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++) {
        /* small, and (every other k) large enough for tg_int8_gemm to split
         * its row pairs over the threads (m * n * k > 65536) */
        const int64_t m = rnd_int(1, ki % 2 ? 70 : 9), n = rnd_int(1, ki % 2 ? 100 : 11), k = ks[ki];
        uint8_t *a = malloc((size_t)(m * k)), *w = malloc((size_t)(n * k));
        int32_t *want = malloc((size_t)(m * n) * 4), *got = malloc((size_t)(m * n) * 4);
        fill_bytes(a, m * k, ki % 2 ? 3 : 0);
        fill_bytes(w, n * k, ki % 2 ? 0 : 2);
        if (ki == 0) memset(a, 0xff, (size_t)(m * k)), memset(w, 0x80, (size_t)(n * k));
        for (int sgn = 0; sgn < 2; sgn++) {
            naive_gemm(want, a, sgn, (int8_t *)w, m, n, k);
            for (int e = 0; e < 3; e++) {
                if (!tg_int8_kernel_available(kerns[e])) {
                    cr_assert(eq(int, tg_int8_kernel_set(kerns[e]), TG_EUNSUPPORTED));
                    continue;
                }
                cr_assert(eq(int, tg_int8_kernel_set(kerns[e]), TG_OK));
                cr_assert(eq(int, tg_int8_kernel_get(), kerns[e]));
                memset(got, 0x55, (size_t)(m * n) * 4);
                cr_assert(eq(int, tg_int8_gemm(got, a, sgn, (int8_t *)w, m, n, k), TG_OK));
                cr_assert(memcmp(got, want, (size_t)(m * n) * 4) == 0,
                          "%s kernel, k=%lld, signed=%d", tg_int8_kernel_name(kerns[e]),
                          (long long)k, sgn);
                ran++;
            }
        }
        free(a), free(w), free(want), free(got);
    }
    cr_assert(eq(int, tg_int8_kernel_set(TG_INT8_KERNEL_AUTO), TG_OK));
    cr_assert(ran >= 20);
    if (!tg_int8_kernel_available(TG_INT8_KERNEL_VNNI))
        th_not_run("this CPU has no AVX-512 VNNI: the vnni kernel was not run");
}

/* ---- AVX-512 requantization ---- */

/* The per-channel AVX-512 and AVX2 requantizations (one channel per lane,
 * as a Linear's outputs) give tg__q_requant_one's bytes, with lanes whose
 * multiplier needs shift <= 0, ties and both ends of i32 among them. */
static void per_channel_case(bool avx512);
Test(quant_kernels, simd_per_channel_requantization_gives_the_scalar_bytes)
{
    if (tg__q_cpu_has_vnni()) per_channel_case(true);
    else th_not_run("this CPU has no AVX-512: its per-channel requantization was not run");
    if (tg__q_cpu_has_avx2()) per_channel_case(false);
    else th_not_run("this CPU has no AVX2: its per-channel requantization was not run");
}

/* Rows of n channels: acc's rows N + 5 apart, y's n + 3 apart (the bytes
 * between stay untouched), each row with its own accumulators. */
static void per_channel_case(bool avx512)
{
    enum { N = 83, ROWS = 3, AS = N + 5 };
    tg__q_requant r[N];
    int32_t acc[ROWS * AS];
    uint8_t got[ROWS * (N + 3)], want[ROWS * (N + 3)];
    for (int trial = 0; trial < 200; trial++) {
        for (int c = 0; c < N; c++) {
            const bool u8 = (c + trial) % 2, tie = c % 5 == 0;
            r[c] = (tg__q_requant){
                .bias = tie ? 0 : (int32_t)rnd_int(-100000, 100000),
                .m0 = tie ? 1 << 30 : (int32_t)rnd_int(1 << 30, INT32_MAX),
                .shift = tie ? 31 : (trial + c) % 23 == 0 ? (int)rnd_int(-2, 0) : (int)rnd_int(1, 62),
                .zp = (int32_t)(u8 ? rnd_int(0, 255) : rnd_int(-128, 127))};
            r[c].lo = c % 7 == 0 ? r[c].zp : u8 ? 0 : -128;
            r[c].hi = u8 ? 255 : 127;
            for (int row = 0; row < ROWS; row++)
                acc[row * AS + c] =
                    tie ? (int32_t)rnd_int(-300, 300)
                    : (c + row) % 11 == 0 ? (c % 2 ? INT32_MAX : INT32_MIN)
                                          : (int32_t)rnd_int(-(INT64_C(1) << (c % 31)),
                                                             INT64_C(1) << (c % 31));
        }
        const int n = 1 + trial % N, rows = 1 + trial % ROWS, ys = n + 3;
        memset(got, 0xAA, sizeof got);
        memset(want, 0xAA, sizeof want);
        (avx512 ? tg__q_requant_channels_avx512 : tg__q_requant_channels_avx2)(got, ys, acc, AS,
                                                                               rows, n, r);
        for (int row = 0; row < rows; row++)
            for (int c = 0; c < n; c++)
                want[row * ys + c] = (uint8_t)tg__q_requant_one(acc[row * AS + c], &r[c]);
        cr_assert(memcmp(got, want, sizeof got) == 0, "%s, trial %d, n %d, rows %d",
                  avx512 ? "avx512" : "avx2", trial, n, rows);
    }
}

/* tg__q_requant_rows through AVX-512 (the VNNI kernel's) and AVX2 gives
 * tg__q_requant_one's bytes: ties at every shift, both ends of i32 with
 * biases that push past them, every tail length, u8 and i8 ranges, relu's
 * lower bound. */
static void requant_rows_case(tg_int8_kernel kern);
Test(quant_kernels, simd_requantization_gives_the_scalar_bytes)
{
    const tg_int8_kernel kerns[] = {TG_INT8_KERNEL_VNNI, TG_INT8_KERNEL_AVX2};
    for (int k = 0; k < 2; k++) {
        if (!tg_int8_kernel_available(kerns[k])) {
            th_not_run("this CPU has no %s kernel: its SIMD requantization was not run",
                        tg_int8_kernel_name(kerns[k]));
            continue;
        }
        requant_rows_case(kerns[k]);
    }
}

static void requant_rows_case(tg_int8_kernel kern)
{
    enum { N = 67 };
    int32_t acc[N];
    uint8_t got[N + 8], want[N + 8];
    for (int trial = 0; trial < 400; trial++) {
        /* every fourth trial: (acc + bias) / 2^(1..3) with acc + bias small, so
         * about half the values are ties */
        const bool ties = trial % 4 == 0;
        tg__q_requant r = {.m0 = ties ? 1 << 30 : (int32_t)rnd_int(1 << 30, INT32_MAX),
                           .shift = ties ? 31 + trial % 3 : 1 + trial % 62};
        /* trials 1, 29, 57, ...: a small multiplier (m0 < 2^12, shift 20-43),
         * so that the clamp of acc + bias to i32 decides results in range */
        if (trial % 28 == 1)
            r.m0 = (int32_t)rnd_int(1, 1 << 12), r.shift = 20 + (int)rnd_int(0, 23);
        const bool u8 = trial % 2;
        r.zp = (int32_t)(u8 ? rnd_int(0, 255) : rnd_int(-128, 127));
        r.lo = trial % 5 == 0 ? r.zp : u8 ? 0 : -128;
        r.hi = u8 ? 255 : 127;
        r.bias = ties ? (int32_t)rnd_int(-20, 20)
                 : trial % 7 == 1 ? INT32_MAX : trial % 7 == 2 ? INT32_MIN
                                              : (int32_t)rnd_int(-100000, 100000);
        for (int i = 0; i < N; i++) {
            const int64_t kind = rnd_int(0, 3);
            acc[i] = ties ? (int32_t)rnd_int(-300, 300)
                     : kind == 0 ? INT32_MAX - (int32_t)rnd_int(0, 3)
                     : kind == 1 ? INT32_MIN + (int32_t)rnd_int(0, 3)
                                 : (int32_t)rnd_int(-(INT64_C(1) << (trial % 31)),
                                                    INT64_C(1) << (trial % 31));
        }
        const int n = 1 + trial % N;
        memset(got, 0xAA, sizeof got);
        memset(want, 0xAA, sizeof want);
        const tg_dtype dt = u8 ? TG_U8 : TG_I8;
        /* as one run, and as rows of n/3 read at a stride of n/3 + 1 and
         * written at a stride of n/3 + 2 */
        const tg_int8_kernel ref = TG_INT8_KERNEL_PORTABLE;
        tg__q_requant_rows(got, dt, 0, n, acc, 1, n, n, &r, kern);
        tg__q_requant_rows(want, dt, 0, n, acc, 1, n, n, &r, ref);
        cr_assert(memcmp(got, want, sizeof got) == 0, "%s, trial %d: shift %d, n %d",
                  tg_int8_kernel_name(kern), trial, r.shift, n);
        const int64_t cols = n / 3 > 0 ? n / 3 : 1, rows = n / (cols + 2) > 0 ? n / (cols + 2) : 1;
        tg__q_requant_rows(got, dt, 0, cols + 2, acc, rows, cols, cols + 1, &r, kern);
        tg__q_requant_rows(want, dt, 0, cols + 2, acc, rows, cols, cols + 1, &r, ref);
        cr_assert(memcmp(got, want, sizeof got) == 0, "%s, trial %d: shift %d, n %d",
                  tg_int8_kernel_name(kern), trial, r.shift, n);
    }
}

/* tg__q_requant_channel_rows, a block of output channels with one
 * requantization a row, gives tg__q_requant_one's bytes on every kernel the
 * CPU runs: rows whose shifts are inside and outside f64's exact range (0,
 * 1-43, 44-62) side by side, the same parameters on neighbouring rows and
 * not, tails of every length, strides past the row. */
Test(quant_kernels, block_requantization_uses_each_rows_parameters)
{
    const tg_int8_kernel kerns[] = {TG_INT8_KERNEL_PORTABLE, TG_INT8_KERNEL_AVX2,
                                    TG_INT8_KERNEL_VNNI, TG_INT8_KERNEL_AMX};
    enum { R = 9, C = 41 };
    int32_t acc[R * (C + 3)];
    tg__q_requant r[R];
    uint8_t got[R * (C + 5)], want[R * (C + 5)];
    int ran = 0;
    for (int k = 0; k < 4; k++) {
        if (!tg_int8_kernel_available(kerns[k])) {
            th_not_run("this CPU has no %s kernel: its block requantization was not run",
                        tg_int8_kernel_name(kerns[k]));
            continue;
        }
        ran++;
        for (int trial = 0; trial < 200; trial++) {
            const int rows = 1 + trial % R, cols = 1 + (trial * 7) % C;
            const int64_t ss = cols + 3, ds = cols + 5;
            const bool u8 = trial % 2;
            for (int i = 0; i < rows; i++) {
                if (i > 0 && trial % 3 == 0) {   /* a repeat of the row above */
                    r[i] = r[i - 1];
                    continue;
                }
                const int64_t pick = rnd_int(0, 9);
                r[i] = (tg__q_requant){
                    .bias = (int32_t)rnd_int(-100000, 100000),
                    .m0 = (int32_t)rnd_int(1 << 30, INT32_MAX),
                    .shift = pick == 0 ? 0 : pick < 6 ? (int)rnd_int(1, 43) : (int)rnd_int(44, 62)};
                if (r[i].shift == 0) r[i].m0 = (int32_t)rnd_int(-3, 3);
                r[i].zp = (int32_t)(u8 ? rnd_int(0, 255) : rnd_int(-128, 127));
                r[i].lo = u8 ? 0 : -128;
                r[i].hi = u8 ? 255 : 127;
            }
            for (int i = 0; i < rows * ss; i++)
                acc[i] = (int32_t)rnd_int(-(INT64_C(1) << (trial % 32)), INT64_C(1) << (trial % 32));
            memset(got, 0xAA, sizeof got);
            memset(want, 0xAA, sizeof want);
            for (int i = 0; i < rows; i++)
                for (int e = 0; e < cols; e++)
                    want[i * ds + e] = (uint8_t)tg__q_requant_one(acc[i * ss + e], &r[i]);
            tg__q_requant_channel_rows(got, u8 ? TG_U8 : TG_I8, 0, ds, acc, rows, cols, ss, r,
                                       kerns[k]);
            cr_assert(memcmp(got, want, sizeof got) == 0, "%s, trial %d: %d rows of %d",
                      tg_int8_kernel_name(kerns[k]), trial, rows, cols);
        }
    }
    cr_assert(ran > 0);
}

/* The SIMD requantizations compute in f64 where that is exact (shift up to
 * 43); past it, a product that f64 rounds onto a tie must not be rounded as
 * one: 536838145 * 536903681 = 2^58 + 1, so with shift 59 the exact result
 * is 0.5 + 2^-59, which rounds to 1 (and its negative to -1), where the f64
 * product 2^58 would round half to even, to 0. */
Test(quant_kernels, requantization_past_f64_exactness_rounds_exactly)
{
    const tg_int8_kernel kerns[] = {TG_INT8_KERNEL_PORTABLE, TG_INT8_KERNEL_AVX2,
                                    TG_INT8_KERNEL_VNNI};
    const tg__q_requant r = {.bias = 0, .m0 = 536903681, .shift = 59, .zp = 100, .lo = 0,
                             .hi = 255};
    int32_t acc[11];
    for (int i = 0; i < 11; i++) acc[i] = i % 2 ? -536838145 : 536838145;
    for (int k = 0; k < 3; k++) {
        if (!tg_int8_kernel_available(kerns[k])) continue;
        uint8_t y[11];
        tg__q_requant_rows(y, TG_U8, 0, 11, acc, 1, 11, 11, &r, kerns[k]);
        for (int i = 0; i < 11; i++)
            cr_assert(eq(int, y[i], i % 2 ? 99 : 101), "%s kernel, lane %d",
                      tg_int8_kernel_name(kerns[k]), i);
    }
}

/* ---- AMX byte-tile products ---- */

/* c (16 x 16 i32) += a (16 rows of 64 bytes) times b (16 rows of 64 bytes)
 * as tdpbusd (a unsigned, b signed) or tdpbsud (a signed, b unsigned)
 * define it: c[m][n] += sum over k < 16, i < 4 of a[m][4k+i] b[k][4n+i],
 * wrapping to 32 bits. */
static void naive_tile_dp(int32_t *c, const uint8_t *a, const uint8_t *b, bool signed_a)
{
    for (int m = 0; m < 16; m++)
        for (int n = 0; n < 16; n++) {
            int64_t s = c[m * 16 + n];
            for (int k = 0; k < 16; k++)
                for (int i = 0; i < 4; i++) {
                    const int64_t x = signed_a ? (int8_t)a[m * 64 + 4 * k + i] : a[m * 64 + 4 * k + i];
                    const int64_t y = signed_a ? b[k * 64 + 4 * n + i] : (int8_t)b[k * 64 + 4 * n + i];
                    s += x * y;
                }
            c[m * 16 + n] = (int32_t)(uint32_t)(uint64_t)s;
        }
}

/* One tile product, on the tiles that core/amx_tiles.h names at its use. */
#define TILE_DP(c, a, b, signed_a)                                                              \
    do {                                                                                        \
        TG__TILE_LOAD(5, c, 64);                                                                \
        TG__TILE_LOAD(3, a, 64);                                                                \
        TG__TILE_LOAD(7, b, 64);                                                                \
        if (signed_a) TG__TILE_DPBSUD(5, 3, 7);                                                 \
        else TG__TILE_DPBUSD(5, 3, 7);                                                          \
        TG__TILE_STORE(5, c, 64);                                                               \
    } while (0)

#define TG__AMX_EMU 1
#include "core/amx_tiles.h"
static void emulated_tile_dp(int32_t *c, const uint8_t *a, const uint8_t *b, bool signed_a)
{
    tg__amx_emu_config();
    TILE_DP(c, a, b, signed_a);
    tg__amx_emu_release();
}
#undef TG__AMX_EMU

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define TG__AMX_EMU 0
#include "core/amx_tiles.h"
__attribute__((target("amx-tile,amx-int8"))) static void cpu_tile_dp(int32_t *c, const uint8_t *a,
                                                                     const uint8_t *b, bool signed_a)
{
    tg__amx_tiles_begin();
    TILE_DP(c, a, b, signed_a);
    tg__amx_tiles_end();
}
#undef TG__AMX_EMU
static bool cpu_has_amx_int8(void)
{
    return !tg__amx_emulated() && tg__amx_available(TG__AMX_INT8);
}
#else
static void cpu_tile_dp(int32_t *c, const uint8_t *a, const uint8_t *b, bool signed_a) {}
static bool cpu_has_amx_int8(void) { return false; }
#endif

/* Random bytes with both ends among them, and sums started near both ends
 * of i32 so that some wrap. */
Test(quant_kernels, amx_byte_tile_products_follow_the_instructions)
{
    const bool cpu = cpu_has_amx_int8();
    uint8_t a[1024], b[1024];
    int32_t c0[256], want[256], got[256];
    for (int trial = 0; trial < 40; trial++) {
        fill_bytes(a, 1024, trial % 3 ? 5 : 0);
        fill_bytes(b, 1024, trial % 3 ? 0 : 3);
        for (int i = 0; i < 256; i++)
            c0[i] = trial % 4 == 1 ? INT32_MAX - (int32_t)rnd_int(0, 1 << 20)
                    : trial % 4 == 2 ? INT32_MIN + (int32_t)rnd_int(0, 1 << 20)
                                     : (int32_t)rnd_int(-100000, 100000);
        const bool sa = trial % 2;
        memcpy(want, c0, sizeof want);
        naive_tile_dp(want, a, b, sa);
        memcpy(got, c0, sizeof got);
        emulated_tile_dp(got, a, b, sa);
        cr_assert(memcmp(got, want, sizeof got) == 0, "emulated %s, trial %d",
                  sa ? "tdpbsud" : "tdpbusd", trial);
        if (!cpu) continue;
        memcpy(got, c0, sizeof got);
        cpu_tile_dp(got, a, b, sa);
        cr_assert(memcmp(got, want, sizeof got) == 0, "the CPU's %s, trial %d",
                  sa ? "tdpbsud" : "tdpbusd", trial);
    }
    if (!cpu) cr_log_info("this CPU has no AMX-INT8: the tile products ran emulated only");
}

/* The emulated tiles refuse an instruction outside a configuration, as the
 * CPU raises #UD: once before any, once after a release.  Within one, a
 * tile must be loaded or zeroed before it is read. */
static void tile_dp_unconfigured(bool after_release)
{
    uint8_t a[1024] = {0}, b[1024] = {0};
    int32_t c[256] = {0};
    if (after_release) emulated_tile_dp(c, a, b, false);   /* configures, then releases */
    tg__amx_emu_load(3, a, 64);
}

Test(quant_kernels, emulated_tile_instruction_before_configuration_aborts, .signal = SIGABRT)
{
    tile_dp_unconfigured(false);
}

Test(quant_kernels, emulated_tile_instruction_after_release_aborts, .signal = SIGABRT)
{
    tile_dp_unconfigured(true);
}

Test(quant_kernels, emulated_tiles_start_as_junk)
{
    int32_t c[256];
    tg__amx_emu_config();
    tg__amx_emu_store(1, c, 64);
    bool zero = true;
    for (int i = 0; i < 256; i++) zero = zero && c[i] == 0;
    cr_assert(zero == false, "a configured tile read before a load or zero is all zeros");
    tg__amx_emu_zero(1);
    tg__amx_emu_store(1, c, 64);
    for (int i = 0; i < 256; i++) cr_assert(c[i] == 0, "a zeroed tile, element %d", i);
    tg__amx_emu_release();
}
