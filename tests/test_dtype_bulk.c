/* Tests of src/core/dtype.c's bulk conversions: half <-> f32 on the SIMD
 * and scalar paths, strided views and rows, half <-> f64. */
#if defined(__x86_64__)
#include <cpuid.h>
#endif

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
Test(dtype_bulk, bulk_simd_path_is_taken_where_supported)
{
#if defined(__x86_64__)
    /* F16C from CPUID.1:ECX (clang's __builtin_cpu_supports lacks "f16c") */
    unsigned a, b, c, d;
    bool f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
    cr_assert(eq(int, tg__cpu_has_half_simd(),
                 f16c && __builtin_cpu_supports("avx2") && tg__isa_allows(TG__ISA_AVX2)));
#else
    cr_assert(!tg__cpu_has_half_simd());
#endif
}

Test(dtype_bulk, bulk_half_to_f32_exhaustive)
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

Test(dtype_bulk, bulk_f32_to_half_matches_reference)
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
Test(dtype_bulk, bulk_tails_and_unaligned_starts)
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
Test(dtype_bulk, bulk_strided_views_match_elementwise)
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
Test(dtype_bulk, bulk_rows_match_contiguous_runs)
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
Test(dtype_bulk, bulk_f64_half_matches_load_store)
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
Test(dtype_bulk, f64_half_copies_round_as_store)
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

/* Every conversion kernel this CPU runs (tg__cast_kernel: portable, avx2,
 * avx512) gives the scalar functions' bits: every half pattern to f32, the
 * f32 sweep to halves, and lengths 0..70 (every tail of sixteen and of
 * eight) at unaligned starts without writing past n.  A kernel the CPU
 * lacks is left out, with its name in the not-run list. */
Test(dtype_bulk, every_cast_kernel_gives_the_scalar_bits)
{
    static uint16_t h[65536], hv[65536];
    static float fv[65536];
    size_t n;
    uint32_t *xs = f32_sweep(&n);
    float *f = malloc(n * sizeof *f);
    uint16_t *hs = malloc(n * sizeof *hs), *hk = malloc(n * sizeof *hk);
    cr_assert(f && hs && hk);
    for (size_t i = 0; i < n; i++) f[i] = float_of(xs[i]);
    for (uint32_t i = 0; i < 65536; i++) h[i] = (uint16_t)i;
    static const char *const names[] = {"auto", "portable", "avx2", "avx512"};
    for (int k = TG__CAST_PORTABLE; k <= TG__CAST_AVX512; k++) {
        tg__set_cast_kernel((tg__cast)k);
        if (tg__cast_kernel() != (tg__cast)k) {
            th_not_run("the %s conversion kernel needs CPU instructions this machine lacks",
                       names[k]);
            continue;
        }
        for (int which = 0; which < 2; which++) {
            const tg_dtype dt = which ? TG_BF16 : TG_F16;
            tg__half_to_f32_n(dt, h, fv, 65536, true);
            for (uint32_t i = 0; i < 65536; i++) {
                const float want = dt == TG_F16 ? tg_f16_to_f32(h[i]) : tg_bf16_to_f32(h[i]);
                if (bits_of(fv[i]) != bits_of(want))
                    cr_fatal("%s %s 0x%04x: 0x%08x want 0x%08x", names[k], tg_dtype_name(dt), i,
                             bits_of(fv[i]), bits_of(want));
            }
            tg__f32_to_half_n(dt, f, hs, (int64_t)n, false);
            tg__f32_to_half_n(dt, f, hk, (int64_t)n, true);
            for (size_t i = 0; i < n; i++)
                if (hk[i] != hs[i])
                    cr_fatal("%s %s of 0x%08x: 0x%04x scalar 0x%04x", names[k],
                             tg_dtype_name(dt), xs[i], hk[i], hs[i]);
            for (int off = 0; off < 3; off++)
                for (int m = 0; m <= 70; m++) {
                    float back[80];
                    for (int i = 0; i < 80; i++) hv[i] = 0xABCD, back[i] = -7.0f;
                    tg__f32_to_half_n(dt, f + 1000 + off, hv + off, m, true);
                    tg__half_to_f32_n(dt, h + 0x3C00 + off, back + off, m, true);
                    for (int i = 0; i < 80; i++) {
                        const bool in = i >= off && i < off + m;
                        const uint16_t wh = !in ? 0xABCD : tg__f32_to_half(dt, f[1000 + i]);
                        const float wf = !in ? -7.0f
                                             : dt == TG_F16 ? tg_f16_to_f32(h[0x3C00 + i])
                                                            : tg_bf16_to_f32(h[0x3C00 + i]);
                        cr_assert(eq(u16, hv[i], wh), "%s %s n=%d off=%d i=%d", names[k],
                                  tg_dtype_name(dt), m, off, i);
                        cr_assert(eq(u32, bits_of(back[i]), bits_of(wf)),
                                  "%s %s n=%d off=%d i=%d", names[k], tg_dtype_name(dt), m, off,
                                  i);
                    }
                }
        }
    }
    tg__set_cast_kernel(TG__CAST_AUTO);
    free(xs);
    free(f);
    free(hs);
    free(hk);
}

/* TG_CAST_KERNEL picks a kernel this CPU runs; an unknown name, or none,
 * leaves the widest (tg__set_cast_kernel wins over all). */
Test(dtype_bulk, environment_variable_chooses_the_cast_kernel)
{
    const tg__cast best = tg__cpu_has_half_simd() && tg__cpu_has_avx512bw() ? TG__CAST_AVX512
                          : tg__cpu_has_half_simd()                         ? TG__CAST_AVX2
                                                                            : TG__CAST_PORTABLE;
    cr_assert(eq(int, unsetenv("TG_CAST_KERNEL"), 0));
    cr_assert(eq(int, tg__cast_kernel(), best));
    cr_assert(eq(int, setenv("TG_CAST_KERNEL", "portable", 1), 0));
    cr_assert(eq(int, tg__cast_kernel(), TG__CAST_PORTABLE));
    cr_assert(eq(int, setenv("TG_CAST_KERNEL", "avx2", 1), 0));
    cr_assert(eq(int, tg__cast_kernel(), tg__cpu_has_half_simd() ? TG__CAST_AVX2 : best));
    cr_assert(eq(int, setenv("TG_CAST_KERNEL", "sideways", 1), 0));
    cr_assert(eq(int, tg__cast_kernel(), best));
    tg__set_cast_kernel(TG__CAST_PORTABLE);
    cr_assert(eq(int, setenv("TG_CAST_KERNEL", "avx2", 1), 0));
    cr_assert(eq(int, tg__cast_kernel(), TG__CAST_PORTABLE));
    tg__set_cast_kernel(TG__CAST_AUTO);
    cr_assert(eq(int, unsetenv("TG_CAST_KERNEL"), 0));
}
