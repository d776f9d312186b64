/* src/ops/exp_simd.h - e^t and e^t - 1 in double on vectors of four or
 * eight lanes, the exp of src/ops/unary_simd.c (exp, gelu, sigmoid, silu,
 * softplus of f32; expm1 for tanh), src/ops/softmax_rows.c (softmax of
 * f32 rows) and src/ops/softmax_strided.c (of f32 rows along another
 * dim).  Internal to
 * src/ops; macros only, so that no vector crosses a function boundary (no
 * ABI that depends on AVX).
 *
 * t = (32 k + j) ln2 / 32 + r, K = 32 k + j = round(32 t / ln2) (by the
 * magic constant 1.5 2^52, whose sum leaves K in the low bits), |r| <= ln2
 * / 64 (ln2 / 32 in two parts, both products fused, so r is within an ulp
 * of r's own), e^t = 2^k 2^(j/32) e^r.  2^(j/32) comes from TG__EXP2_TAB,
 * the double nearest it (scripts/make_exp_table.py), and 2^k enters its
 * exponent by an integer add (exact: the result is normal for t >= -708);
 * e^r = 1 + p, p = r + r^2 (1/2 + r/6 + ... + r^4/720), Taylor's series to
 * r^6 (the rest under 4e-18 relative), by Estrin's scheme (pairs of terms
 * and r^2: a shorter chain of dependent steps than Horner's rule) with
 * fused multiply-adds; y = fma(s, p, s), s = 2^k 2^(j/32).  Relative error
 * under 2.3e-16 (the table's rounding and the last one), so an f32 result
 * rounded from it is the correctly rounded e^t but where e^t lies that
 * close to a halfway point between two f32 (tests/test_exp_simd.c).
 * TG__EXPM1V adds the low parts of the table where e^t - 1 cancels.
 *
 * Every width takes the same operations per lane, and a fused multiply-add
 * rounds once everywhere (glibc's fma(), the plain width's, is exactly
 * rounded and uses the instruction where the CPU has it), so the plain C,
 * AVX2 and AVX-512 widths give the same bits.  A caller names its width's
 * helpers, FMA(a, b, c) and TAB(table, j): TG__FMA4 / TG__TAB4 (plain C,
 * four lanes), TG__FMA4X / TG__TAB4X (AVX2 with FMA: functions with
 * TG__SIMD_AVX2), TG__FMA8 / TG__TAB8 (AVX-512F: TG__SIMD_AVX512).  The
 * operands of one FMA call must not themselves call FMA (their names would
 * shadow). */
#ifndef TAPEGRAD_OPS_EXP_SIMD_H
#define TAPEGRAD_OPS_EXP_SIMD_H

#include <stdint.h>

typedef double tg__v4d __attribute__((vector_size(32)));
typedef uint64_t tg__v4u __attribute__((vector_size(32)));
typedef int64_t tg__v4i __attribute__((vector_size(32)));
typedef double tg__v8d __attribute__((vector_size(64)));
typedef uint64_t tg__v8u __attribute__((vector_size(64)));
typedef int64_t tg__v8i __attribute__((vector_size(64)));

/* 2^(j/32), j = 0..31, each the double nearest (scripts/make_exp_table.py). */
static const double TG__EXP2_TAB[32] __attribute__((aligned(64), unused)) = {
    0x1.0000000000000p+0, 0x1.059b0d3158574p+0, 0x1.0b5586cf9890fp+0, 0x1.11301d0125b51p+0,
    0x1.172b83c7d517bp+0, 0x1.1d4873168b9aap+0, 0x1.2387a6e756238p+0, 0x1.29e9df51fdee1p+0,
    0x1.306fe0a31b715p+0, 0x1.371a7373aa9cbp+0, 0x1.3dea64c123422p+0, 0x1.44e086061892dp+0,
    0x1.4bfdad5362a27p+0, 0x1.5342b569d4f82p+0, 0x1.5ab07dd485429p+0, 0x1.6247eb03a5585p+0,
    0x1.6a09e667f3bcdp+0, 0x1.71f75e8ec5f74p+0, 0x1.7a11473eb0187p+0, 0x1.82589994cce13p+0,
    0x1.8ace5422aa0dbp+0, 0x1.93737b0cdc5e5p+0, 0x1.9c49182a3f090p+0, 0x1.a5503b23e255dp+0,
    0x1.ae89f995ad3adp+0, 0x1.b7f76f2fb5e47p+0, 0x1.c199bdd85529cp+0, 0x1.cb720dcef9069p+0,
    0x1.d5818dcfba487p+0, 0x1.dfc97337b9b5fp+0, 0x1.ea4afa2a490dap+0, 0x1.f50765b6e4540p+0,
};
/* 2^(j/32) - TG__EXP2_TAB[j], each the double nearest (the same script):
 * expm1's, where e^t - 1 cancels. */
static const double TG__EXP2_TAB_LO[32] __attribute__((aligned(64), unused)) = {
    0x0.0p+0, 0x1.d73e2a475b465p-55, 0x1.8a62e4adc610bp-54, -0x1.6c51039449b3ap-54,
    -0x1.19041b9d78a76p-55, 0x1.e016e00a2643cp-54, 0x1.9b07eb6c70573p-54, 0x1.612e8afad1255p-55,
    0x1.6f46ad23182e4p-55, -0x1.63aeabf42eae2p-54, 0x1.ada0911f09ebcp-55, 0x1.89b7a04ef80d0p-59,
    0x1.d4397afec42e2p-56, -0x1.07abe1db13cadp-55, 0x1.6324c054647adp-54, -0x1.383c17e40b497p-54,
    -0x1.bdd3413b26456p-54, -0x1.16e4786887a99p-55, -0x1.41577ee04992fp-55, -0x1.d4c1dd41532d8p-54,
    0x1.6e9f156864b27p-54, -0x1.75fc781b57ebcp-57, 0x1.c7c46b071f2bep-56, -0x1.d2f6edb8d41e1p-54,
    0x1.7a1cd345dcc81p-54, -0x1.5584f7e54ac3bp-56, 0x1.11065895048ddp-55, 0x1.503cbd1e949dbp-56,
    0x1.2ed02d75b3707p-55, -0x1.1a5cd4f184b5cp-54, -0x1.e9c23179c2893p-54, 0x1.9d3e12dd8a18bp-54,
};

/* Before a loop over the n vectors of a _N macro: unrolled early, so that
 * the vectors' steps stay side by side (no loop interchange undoes it). */
#define TG__UNROLL _Pragma("GCC unroll 8")

/* Plain C: fma() lane by lane (n lanes of VD), the table indexed lane by
 * lane. */
#define TG__FMA_LANES(VD, n, a, b, c)                                                     \
    __extension__({                                                                       \
        const VD tg_fa_ = (a), tg_fb_ = (b), tg_fc_ = (c);                                \
        VD tg_fr_;                                                                        \
        for (int tg_fl_ = 0; tg_fl_ < (n); tg_fl_++)                                      \
            tg_fr_[tg_fl_] = __builtin_fma(tg_fa_[tg_fl_], tg_fb_[tg_fl_], tg_fc_[tg_fl_]);  \
        tg_fr_;                                                                           \
    })
#define TG__TAB_LANES(VD, VU, n, tab, j)                                                  \
    __extension__({                                                                       \
        const VU tg_tj_ = (j);                                                            \
        VD tg_tr_;                                                                        \
        for (int tg_tl_ = 0; tg_tl_ < (n); tg_tl_++)                                      \
            tg_tr_[tg_tl_] = (tab)[tg_tj_[tg_tl_]];                                       \
        tg_tr_;                                                                           \
    })
#define TG__FMA4(a, b, c) TG__FMA_LANES(tg__v4d, 4, a, b, c)
#define TG__TAB4(tab, j) TG__TAB_LANES(tg__v4d, tg__v4u, 4, tab, j)

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define TG__SIMD_AVX2 __attribute__((target("avx2,fma")))
#define TG__SIMD_AVX512 __attribute__((target("avx512f")))
#define TG__FMA4X(a, b, c)                                                                \
    ((tg__v4d)_mm256_fmadd_pd((__m256d)(a), (__m256d)(b), (__m256d)(c)))
#define TG__TAB4X(tab, j) ((tg__v4d)_mm256_i64gather_pd((tab), (__m256i)(j), 8))
#define TG__FMA8(a, b, c)                                                                 \
    ((tg__v8d)_mm512_fmadd_pd((__m512d)(a), (__m512d)(b), (__m512d)(c)))
/* Two two-register permutes (entries 0-15 and 16-31), bit 4 picks. */
#define TG__TAB8(tab, j)                                                                  \
    __extension__({                                                                       \
        const __m512i tg_tj_ = (__m512i)(j);                                              \
        const __m512d tg_t0_ = _mm512_load_pd((tab)), tg_t1_ = _mm512_load_pd((tab) + 8), \
                      tg_t2_ = _mm512_load_pd((tab) + 16),                                \
                      tg_t3_ = _mm512_load_pd((tab) + 24);                                \
        (tg__v8d)_mm512_mask_blend_pd(                                                    \
            _mm512_test_epi64_mask(tg_tj_, _mm512_set1_epi64(16)),                        \
            _mm512_permutex2var_pd(tg_t0_, tg_tj_, tg_t1_),                               \
            _mm512_permutex2var_pd(tg_t2_, tg_tj_, tg_t3_));                              \
    })
#else   /* never taken (tg__exp_width_get), but compiled */
#define TG__SIMD_AVX2
#define TG__SIMD_AVX512
#define TG__FMA4X(a, b, c) TG__FMA4(a, b, c)
#define TG__TAB4X(tab, j) TG__TAB4(tab, j)
#define TG__FMA8(a, b, c) TG__FMA_LANES(tg__v8d, 8, a, b, c)
#define TG__TAB8(tab, j) TG__TAB_LANES(tg__v8d, tg__v8u, 8, tab, j)
#endif

/* The reduction and e^r - 1 of t[0..n) (VD lanes each), t in [-708, 700]
 * or NaN: p[u] = e^r - 1 and kb[u], whose low bits hold K (j = kb & 31, k
 * in bits 5..).  Each step runs for all n vectors in turn: the same
 * operations per lane for any n, so the same bits, and n independent
 * chains side by side, which the CPU overlaps where one chain's latency
 * would stall it. */
#define TG__EXP_REDUCE_N(VD, VU, FMA, n, t, p, kb)                                        \
    do {                                                                                  \
        const VD z_ = {0};                                                                \
        VD km_[n], r_[n], r2_[n], a_[n], b_[n];                                           \
        TG__UNROLL for (int u_ = 0; u_ < (n); u_++)                                       \
            km_[u_] = FMA((t)[u_], z_ + 0x1.71547652b82fep+5, z_ + 0x1.8p52); /* 32/ln2 */ \
        TG__UNROLL for (int u_ = 0; u_ < (n); u_++) {                                     \
            const VD k_ = km_[u_] - 0x1.8p52;                                             \
            const VD r0_ = FMA(k_, z_ - 0x1.62e42fefa39efp-6, (t)[u_]); /* ln2/32, 2 parts */ \
            r_[u_] = FMA(k_, z_ - 0x1.abc9e3b39803fp-61, r0_);                            \
        }                                                                                 \
        TG__UNROLL for (int u_ = 0; u_ < (n); u_++) {                                     \
            r2_[u_] = r_[u_] * r_[u_];                                                    \
            a_[u_] = FMA(r_[u_], z_ + 1.0 / 6.0, z_ + 0.5);                               \
            b_[u_] = FMA(r_[u_], z_ + 1.0 / 120.0, z_ + 1.0 / 24.0);                      \
        }                                                                                 \
        TG__UNROLL for (int u_ = 0; u_ < (n); u_++) {                                     \
            const VD c_ = FMA(r2_[u_], z_ + 1.0 / 720.0, b_[u_]);                         \
            const VD q_ = FMA(r2_[u_], c_, a_[u_]);                                       \
            (p)[u_] = FMA(q_, r2_[u_], r_[u_]);                                           \
            (kb)[u_] = (VU)km_[u_];                                                       \
        }                                                                                 \
    } while (0)

/* y[u] = e^t[u] for u < n, each a vector of VD (VU: uint64 lanes), t in
 * [-708, 700] or NaN (NaN); FMA and TAB the width's helpers (above). */
#define TG__EXPV_N(VD, VU, FMA, TAB, n, t, y)                                             \
    do {                                                                                  \
        VD pn_[n];                                                                        \
        VU kbn_[n];                                                                       \
        TG__EXP_REDUCE_N(VD, VU, FMA, n, t, pn_, kbn_);                                   \
        TG__UNROLL for (int un_ = 0; un_ < (n); un_++) {                                  \
            const VD s_ = (VD)((VU)TAB(TG__EXP2_TAB, kbn_[un_] & 31) +                    \
                               ((kbn_[un_] << 47) & 0xFFF0000000000000u)); /* 2^k 2^(j/32) */ \
            (y)[un_] = FMA(s_, pn_[un_], s_);                                             \
        }                                                                                 \
    } while (0)

/* One vector: p = e^r - 1 and kb of t_in, and y = e^t_in. */
#define TG__EXP_REDUCE(VD, VU, FMA, t_in, p, kb)                                          \
    do {                                                                                  \
        const VD t1_[1] = {(t_in)};                                                       \
        VD p1_[1];                                                                        \
        VU kb1_[1];                                                                       \
        TG__EXP_REDUCE_N(VD, VU, FMA, 1, t1_, p1_, kb1_);                                 \
        (p) = p1_[0];                                                                     \
        (kb) = kb1_[0];                                                                   \
    } while (0)
#define TG__EXPV(VD, VU, FMA, TAB, t_in, y)                                               \
    do {                                                                                  \
        const VD tv1_[1] = {(t_in)};                                                      \
        VD yv1_[1];                                                                       \
        TG__EXPV_N(VD, VU, FMA, TAB, 1, tv1_, yv1_);                                      \
        (y) = yv1_[0];                                                                    \
    } while (0)

/* y = e^t - 1 in each lane, t in [0, 700] or NaN (NaN): with s = 2^k
 * 2^(j/32) and s_lo = 2^k TG__EXP2_TAB_LO[j] (both exact), y = (s - 1) +
 * fma(s, p, s_lo), s - 1 exact (both multiples of s's ulp), p itself for K
 * = 0 (s_lo p, under 2^-60 of y, left out).  Relative error under 6e-16
 * (tests/test_exp_simd.c): just past a step of K, t - K ln2 / 32 < 0 and
 * the sum cancels a little, r's and p's roundings then weighing up to
 * twice as much in y. */
#define TG__EXPM1V(VD, VU, FMA, TAB, t_in, y)                                             \
    do {                                                                                  \
        VD p_;                                                                            \
        VU kb_;                                                                           \
        TG__EXP_REDUCE(VD, VU, FMA, t_in, p_, kb_);                                       \
        const VU j_ = kb_ & 31;                                                           \
        const VD k2_ = (VD)(((kb_ << 47) & 0xFFF0000000000000u) + 0x3FF0000000000000u);   \
        const VD s_ = TAB(TG__EXP2_TAB, j_) * k2_, lo_ = TAB(TG__EXP2_TAB_LO, j_) * k2_;  \
        (y) = (s_ - 1.0) + FMA(s_, p_, lo_);                                              \
    } while (0)

#endif
