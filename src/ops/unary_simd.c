/* src/ops/unary_simd.c - exp, gelu, softplus, sigmoid, silu, tanh and the
 * one-pass gradients of gelu and silu on contiguous f32 in double
 * arithmetic, each result rounded once to f32
 * (src/ops/unary_simd_internal.h).
 *
 * GCC's vector extensions, as src/ops/softmax_rows.c: four lanes of double
 * in the plain C and AVX2 (with FMA) clones, eight in the AVX-512 one,
 * every lane taking the same operations, fused multiply-adds written out
 * (src/ops/exp_simd.h's FMA helpers: c17 contracts nothing else), so all
 * widths give the same bits.  exp, gelu, softplus, sigmoid and silu go
 * N vectors at a time (six with AVX-512, four with AVX2, two in plain C;
 * unary_simd_tmpl.h's BLOCKN), each step for all N in turn, the same
 * operations per lane.  The last, partial vector runs on a zero-padded
 * copy.
 *
 * exp is src/ops/exp_simd.h's (a 32-entry table and a polynomial of
 * degree 6, a relative error under 2.3e-16).  erfc(z) for z >= 0 is
 * exp(-z^2) erfcx(z), erfcx(z) = 2 / (1 + 2z) h(u), u = S z / (z + 3) -
 * 1, h a polynomial of degree 19 (Chebyshev interpolation, its even and
 * odd parts by Horner's rule) within 5e-16 relative over [0, 11]
 * (scripts/make_erfcx_coeffs.py prints ERFCX_C); past z = 11, e^-z^2 is
 * below e^-120 and erfc's term is taken as 0.  For gelu, z = |x| /
 * sqrt 2 and z^2 = x^2 / 2 exact for an f32 x, so exp(-z^2) carries no
 * error from z; Phi(x) = 0.5 erfc(|x| / sqrt 2) for x < 0 and 1 minus that
 * for x >= 0 (no cancellation: Phi >= 0.5 there).  That is gelu's path for
 * |x| > GELU_AMAX only: below, a = |x| picks one of 16 pieces (k =
 * round(a / 0.375), t = a - 0.375 k exact) and a polynomial of degree 15 in
 * t from src/ops/gelu_pieces.h gives F(a) = Phi(-a) (forward: Phi = F for x
 * < 0, 1 - F else) or D(a) = gelu'(-a) (the gradient: D for x < 0, 1 - D
 * else), with no exp and no division; each lane's coefficients of piece k
 * by permutes (AVX-512), paired loads (AVX2) or an index (plain C).  The long
 * path runs only for a vector holding a lane past GELU_AMAX (or NaN), and
 * each lane takes its own path's value, so the bits do not depend on the
 * width.
 */
#include <math.h>
#include <string.h>

#include "core/core.h"
#include "ops/exp_simd.h"
#include "ops/gelu_pieces.h"
#include "ops/unary_simd_internal.h"

typedef float v4f __attribute__((vector_size(16)));
typedef float v8f __attribute__((vector_size(32)));

enum { ERFCX_N = 20 };
/* scripts/make_erfcx_coeffs.py: erfcx(z) = 2 / (1 + 2z) sum_j ERFCX_C[j] u^j,
 * u = ERFCX_S z / (z + 3) - 1, for z in [0, 11]. */
#define ERFCX_S 0x1.45d1745d1745dp+1
static const double ERFCX_C[ERFCX_N] = {
    0x1.4740550db7757p-1,   /* u^0 */
    -0x1.27c0b1741612cp-5,
    -0x1.b10d67bfd4b96p-5,
    0x1.0a497e62fdad9p-4,
    -0x1.46dc5385916cdp-5,
    0x1.eb00ecfdaf827p-7,
    -0x1.7ac052ea34a93p-9,
    -0x1.5b37ee9898b8fp-13,
    0x1.c729410f2af92p-13,
    -0x1.0989b166fa7f4p-16,
    -0x1.f6d239e7dad3ep-17,
    0x1.e8a4ddb672fa3p-20,
    0x1.4ef7bf553c922p-20,
    -0x1.00c0a610297dap-23,
    -0x1.023391fbc28d4p-23,
    0x1.f8307201b8b34p-31,
    0x1.84f076b1ddda4p-27,
    0x1.506b61cf0f774p-30,
    -0x1.947fa2dd323e2p-31,
    -0x1.644b5aa7523dfp-33,
};

/* The lanes of a where mask m (all ones) is set, of b elsewhere. */
#define SEL(m, a, b) ((VD)(((VI)(a) & (m)) | ((VI)(b) & ~(m))))
#define ABSV(x) ((VD)((VI)(x) & 0x7FFFFFFFFFFFFFFF))

/* y = e^t, t in [-120, 100] (or NaN: NaN): src/ops/exp_simd.h. */
#define EXPV(t_in, y) TG__EXPV(VD, VU, FMA, TAB, t_in, y)

/* y = log1p(e) for e in [0, 1] (normal or 0): 2 atanh(s), s = e / (2 + e)
 * in [0, 1/3], by the series s + s^3 / 3 + ... + s^37 / 37 (the rest below
 * 1e-18 relative); within 4.4e-16 of libm's log1p over [0, 1]. */
#define LOG1PV(e_in, y)                                                                   \
    do {                                                                                  \
        const VD s_ = (e_in) / (2.0 + (e_in)), z_ = s_ * s_, zero_ = {0};                 \
        const VD w_ = z_ * z_;   /* the terms' even and odd parts in z, as ERFCXV's */   \
        VD pe_ = FMA(w_, zero_ + 1.0 / 35.0, zero_ + 1.0 / 31.0);                         \
        VD po_ = FMA(w_, zero_ + 1.0 / 37.0, zero_ + 1.0 / 33.0);                         \
        for (int k_ = 27; k_ >= 3; k_ -= 4) {                                             \
            pe_ = FMA(pe_, w_, zero_ + 1.0 / k_);                                         \
            po_ = FMA(po_, w_, zero_ + 1.0 / (k_ + 2));                                   \
        }                                                                                 \
        const VD p_ = FMA(po_, z_, pe_);                                                  \
        (y) = 2.0 * FMA(s_ * z_, p_, s_);                                                 \
    } while (0)

/* y = erfcx(z) (1 + 2z) / 2, z in [0, 11]: the polynomial as its even and
 * odd parts in w = u^2, two independent chains by Horner's rule (half the
 * latency of one), y = E(w) + u O(w). */
#define ERFCXV(z_in, y)                                                                   \
    do {                                                                                  \
        const VD z_ = (z_in), u_ = (z_ * ERFCX_S) / (z_ + 3.0) - 1.0, w_ = u_ * u_;       \
        const VD zero_ = {0};                                                             \
        VD pe_ = FMA(w_, zero_ + ERFCX_C[ERFCX_N - 2], zero_ + ERFCX_C[ERFCX_N - 4]);     \
        VD po_ = FMA(w_, zero_ + ERFCX_C[ERFCX_N - 1], zero_ + ERFCX_C[ERFCX_N - 3]);     \
        for (int j_ = ERFCX_N - 6; j_ >= 0; j_ -= 2) {                                    \
            pe_ = FMA(pe_, w_, zero_ + ERFCX_C[j_]);                                      \
            po_ = FMA(po_, w_, zero_ + ERFCX_C[j_ + 1]);                                  \
        }                                                                                 \
        (y) = FMA(po_, u_, pe_);                                                          \
    } while (0)

/* |x| up to which gelu takes the pieces of src/ops/gelu_pieces.h (round(a /
 * 0.375) <= 15 with a margin for the rounding of a * 8 / 3). */
#define GELU_AMAX 5.8

/* p = the polynomial of each lane's piece kb (0..15) at t, by Horner's rule
 * (the same steps at every width), from the coefficient-major table cm or
 * the piece-major pm (src/ops/gelu_pieces.h); and whether any lane of a
 * mask m is set.  Plain C indexes lane by lane, AVX-512 permutes the 16
 * entries of cm's rows, AVX2 loads two coefficients of each lane's row
 * and interleaves them. */
#define POLY_TAB(TABF, cm, kb, t, p)                                                      \
    do {                                                                                  \
        VD pt_ = TABF((cm)[GELU_N - 1], kb);                                              \
        for (int jt_ = GELU_N - 2; jt_ >= 0; jt_--) pt_ = FMA(pt_, t, TABF((cm)[jt_], kb)); \
        (p) = pt_;                                                                        \
    } while (0)
#define POLY_4(cm, pm, kb, t, p) POLY_TAB(TG__TAB4, cm, kb, t, p)
/* p[u] for u < n as POLY's (the same steps per lane), each coefficient
 * fetched for all n vectors in turn (AVX-512: its two rows loaded once). */
#define POLYN_TAB(TABF, cm, n, kb, t, p)                                                  \
    do {                                                                                  \
        TG__UNROLL for (int un_ = 0; un_ < (n); un_++)                                    \
            (p)[un_] = TABF((cm)[GELU_N - 1], (kb)[un_]);                                 \
        for (int jn_ = GELU_N - 2; jn_ >= 0; jn_--)                                       \
            TG__UNROLL for (int un_ = 0; un_ < (n); un_++)                                \
                (p)[un_] = FMA((p)[un_], (t)[un_], TABF((cm)[jn_], (kb)[un_]));           \
    } while (0)
#define POLYN_4(cm, pm, n, kb, t, p) POLYN_TAB(TG__TAB4, cm, n, kb, t, p)
#define ANY_4(m) ((m)[0] | (m)[1] | (m)[2] | (m)[3])
#define CVT_IN_4(f) __builtin_convertvector((f), tg__v4d)
#define CVT_OUT_4(d) __builtin_convertvector((d), v4f)
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TAB16_8(row, kb)                                                                  \
    ((tg__v8d)_mm512_permutex2var_pd(_mm512_load_pd(row), (__m512i)(kb),                  \
                                     _mm512_load_pd((row) + 8)))
#define POLY_8(cm, pm, kb, t, p) POLY_TAB(TAB16_8, cm, kb, t, p)
#define POLYN_8(cm, pm, n, kb, t, p)                                                      \
    do {                                                                                  \
        __m512d lo_ = _mm512_load_pd((cm)[GELU_N - 1]);                                   \
        __m512d hi_ = _mm512_load_pd((cm)[GELU_N - 1] + 8);                               \
        TG__UNROLL for (int un_ = 0; un_ < (n); un_++)                                    \
            (p)[un_] = (tg__v8d)_mm512_permutex2var_pd(lo_, (__m512i)(kb)[un_], hi_);     \
        for (int jn_ = GELU_N - 2; jn_ >= 0; jn_--) {                                     \
            lo_ = _mm512_load_pd((cm)[jn_]);                                              \
            hi_ = _mm512_load_pd((cm)[jn_] + 8);                                          \
            TG__UNROLL for (int un_ = 0; un_ < (n); un_++)                                \
                (p)[un_] = FMA((p)[un_], (t)[un_],                                        \
                               (tg__v8d)_mm512_permutex2var_pd(lo_, (__m512i)(kb)[un_], hi_)); \
        }                                                                                 \
    } while (0)
/* Coefficients j and j + 1 of lanes 0 and 2 (a) and of 1 and 3 (b):
 * their low and high interleavings are the vectors of j and j + 1. */
#define PAIR_4X(pm, kb, j, lo, hi)                                                        \
    do {                                                                                  \
        const __m256d a_ = _mm256_insertf128_pd(                                          \
            _mm256_castpd128_pd256(_mm_loadu_pd((pm)[(kb)[0]] + (j))),                    \
            _mm_loadu_pd((pm)[(kb)[2]] + (j)), 1);                                        \
        const __m256d b_ = _mm256_insertf128_pd(                                          \
            _mm256_castpd128_pd256(_mm_loadu_pd((pm)[(kb)[1]] + (j))),                    \
            _mm_loadu_pd((pm)[(kb)[3]] + (j)), 1);                                        \
        (lo) = (tg__v4d)_mm256_unpacklo_pd(a_, b_);                                       \
        (hi) = (tg__v4d)_mm256_unpackhi_pd(a_, b_);                                       \
    } while (0)
#define POLY_4X(cm, pm, kb, t, p)                                                         \
    do {                                                                                  \
        const tg__v4u kp_ = (kb);                                                         \
        tg__v4d lp_, hp_, pp_;                                                            \
        PAIR_4X(pm, kp_, GELU_N - 2, lp_, hp_);                                           \
        pp_ = FMA(hp_, t, lp_);                                                           \
        for (int jp_ = GELU_N - 4; jp_ >= 0; jp_ -= 2) {                                  \
            PAIR_4X(pm, kp_, jp_, lp_, hp_);                                              \
            pp_ = FMA(FMA(pp_, t, hp_), t, lp_);                                          \
        }                                                                                 \
        (p) = pp_;                                                                        \
    } while (0)
#define POLYN_4X(cm, pm, n, kb, t, p)                                                     \
    do {                                                                                  \
        tg__v4d lq_, hq_;                                                                 \
        TG__UNROLL for (int un_ = 0; un_ < (n); un_++) {                                  \
            PAIR_4X(pm, (kb)[un_], GELU_N - 2, lq_, hq_);                                 \
            (p)[un_] = FMA(hq_, (t)[un_], lq_);                                           \
        }                                                                                 \
        for (int jq_ = GELU_N - 4; jq_ >= 0; jq_ -= 2)                                    \
            TG__UNROLL for (int un_ = 0; un_ < (n); un_++) {                              \
                PAIR_4X(pm, (kb)[un_], jq_, lq_, hq_);                                    \
                (p)[un_] = FMA(FMA((p)[un_], (t)[un_], hq_), (t)[un_], lq_);              \
            }                                                                             \
    } while (0)
#define ANY_4X(m) _mm256_movemask_pd((__m256d)(m))
/* f32 to and from double, one instruction each (GCC splits the AVX-512
 * vector conversion in two). */
#define CVT_IN_4X(f) ((tg__v4d)_mm256_cvtps_pd((__m128)(f)))
#define CVT_OUT_4X(d) ((v4f)_mm256_cvtpd_ps((__m256d)(d)))
#define CVT_IN_8(f) ((tg__v8d)_mm512_cvtps_pd((__m256)(f)))
#define CVT_OUT_8(d) ((v8f)_mm512_cvtpd_ps((__m512d)(d)))
#define ANY_8(m) _mm512_test_epi64_mask((__m512i)(m), (__m512i)(m))
#else
#define POLY_4X(cm, pm, kb, t, p) POLY_4(cm, pm, kb, t, p)
#define POLY_8(cm, pm, kb, t, p) POLY_TAB(TG__TAB8, cm, kb, t, p)
#define POLYN_4X(cm, pm, n, kb, t, p) POLYN_4(cm, pm, n, kb, t, p)
#define ANY_4X(m) ANY_4(m)
#define CVT_IN_4X(f) CVT_IN_4(f)
#define CVT_OUT_4X(d) CVT_OUT_4(d)
#define CVT_IN_8(f) __builtin_convertvector((f), tg__v8d)
#define CVT_OUT_8(d) __builtin_convertvector((d), v8f)
#define POLYN_8(cm, pm, n, kb, t, p) POLYN_TAB(TG__TAB8, cm, n, kb, t, p)
#define ANY_8(m) (ANY_4(m) | (m)[4] | (m)[5] | (m)[6] | (m)[7])
#endif

/* The three widths: plain C and AVX2 with four lanes, AVX-512 with eight. */
#define VF v4f
#define VD tg__v4d
#define VI tg__v4i
#define VU tg__v4u
#define FMA TG__FMA4
#define TAB TG__TAB4
#define POLY POLY_4
#define POLYN POLYN_4
#define ANY ANY_4
#define BLOCK block_plain
#define CVT_IN CVT_IN_4
#define CVT_OUT CVT_OUT_4
#define BLOCKN blockn_plain
#define N 2
#define ATTR
#include "ops/unary_simd_tmpl.h"
#undef FMA
#undef TAB
#undef POLY
#undef POLYN
#undef ANY
#undef BLOCK
#undef CVT_IN
#undef CVT_OUT
#undef BLOCKN
#undef N
#undef ATTR
#define FMA TG__FMA4X
#define TAB TG__TAB4X
#define POLY POLY_4X
#define POLYN POLYN_4X
#define ANY ANY_4X
#define BLOCK block_avx2
#define CVT_IN CVT_IN_4X
#define CVT_OUT CVT_OUT_4X
#define BLOCKN blockn_avx2
#define N 4
#define ATTR TG__SIMD_AVX2
#include "ops/unary_simd_tmpl.h"
#undef VF
#undef VD
#undef VI
#undef VU
#undef FMA
#undef TAB
#undef POLY
#undef POLYN
#undef ANY
#undef BLOCK
#undef CVT_IN
#undef CVT_OUT
#undef BLOCKN
#undef N
#undef ATTR
#define VF v8f
#define VD tg__v8d
#define VI tg__v8i
#define VU tg__v8u
#define FMA TG__FMA8
#define TAB TG__TAB8
#define POLY POLY_8
#define POLYN POLYN_8
#define ANY ANY_8
#define BLOCK block_avx512
#define CVT_IN CVT_IN_8
#define CVT_OUT CVT_OUT_8
#define BLOCKN blockn_avx512
#define N 6
#define ATTR TG__SIMD_AVX512
#include "ops/unary_simd_tmpl.h"

/* n elements: N W at a time (every op but tanh), then W at a time; the
 * tail through zero-padded copies. */
#define RUN(name, W, NW, block, blockn, attr)                                             \
    attr static inline __attribute__((always_inline)) void name(int op, float *o,         \
                                                                const float *a,           \
                                                                const float *g, int64_t n) \
    {                                                                                     \
        int64_t i = 0;                                                                    \
        if (op != TG__USIMD_TANH)                                                         \
            for (; i + (NW) <= n; i += (NW)) blockn(op, o + i, a + i, g ? g + i : NULL);  \
        for (; i + (W) <= n; i += (W)) block(op, o + i, a + i, g ? g + i : NULL);          \
        if (i == n) return;                                                               \
        float ta[W] = {0}, tg[W] = {0}, to[W];                                            \
        const size_t m = (size_t)(n - i) * sizeof(float);                                 \
        memcpy(ta, a + i, m);                                                             \
        if (g) memcpy(tg, g + i, m);                                                      \
        block(op, to, ta, tg);                                                            \
        memcpy(o + i, to, m);                                                             \
    }
RUN(run4p, 4, 8, block_plain, blockn_plain, )
RUN(run4x, 4, 16, block_avx2, blockn_avx2, TG__SIMD_AVX2)
RUN(run8, 8, 48, block_avx512, blockn_avx512, TG__SIMD_AVX512)

/* One call per op, so that each inlined body is specialized to it. */
#define BY_OP(run, op, o, a, g, n)                                                        \
    switch (op) {                                                                         \
    case TG__USIMD_EXP: run(TG__USIMD_EXP, o, a, g, n); break;                            \
    case TG__USIMD_GELU: run(TG__USIMD_GELU, o, a, g, n); break;                          \
    case TG__USIMD_GELU_GRAD: run(TG__USIMD_GELU_GRAD, o, a, g, n); break;                \
    case TG__USIMD_SILU_GRAD: run(TG__USIMD_SILU_GRAD, o, a, g, n); break;                \
    case TG__USIMD_SIGMOID: run(TG__USIMD_SIGMOID, o, a, g, n); break;                    \
    case TG__USIMD_SILU: run(TG__USIMD_SILU, o, a, g, n); break;                          \
    case TG__USIMD_TANH: run(TG__USIMD_TANH, o, a, g, n); break;                          \
    default: run(TG__USIMD_SOFTPLUS, o, a, g, n); break;                                  \
    }

static void run_plain(int op, float *o, const float *a, const float *g, int64_t n)
{
    BY_OP(run4p, op, o, a, g, n)
}
TG__SIMD_AVX2 static void run_avx2(int op, float *o, const float *a, const float *g,
                                   int64_t n)
{
    BY_OP(run4x, op, o, a, g, n)
}
TG__SIMD_AVX512 static void run_avx512(int op, float *o, const float *a, const float *g,
                                       int64_t n)
{
    BY_OP(run8, op, o, a, g, n)
}

/* Tests: exp_simd.h's expm1 on doubles, one vector at a time. */
#define EXPM1_RUN(name, VD, VU, FMA, TAB, attr)                                           \
    attr static void name(double *y, const double *t, int64_t n)                          \
    {                                                                                     \
        for (int64_t i = 0; i < n; i += (int64_t)(sizeof(VD) / sizeof(double))) {        \
            VD tv, yv;                                                                    \
            memcpy(&tv, t + i, sizeof tv);                                                \
            TG__EXPM1V(VD, VU, FMA, TAB, tv, yv);                                         \
            memcpy(y + i, &yv, sizeof yv);                                                \
        }                                                                                 \
    }
EXPM1_RUN(expm1_plain, tg__v4d, tg__v4u, TG__FMA4, TG__TAB4, )
EXPM1_RUN(expm1_avx2, tg__v4d, tg__v4u, TG__FMA4X, TG__TAB4X, TG__SIMD_AVX2)
EXPM1_RUN(expm1_avx512, tg__v8d, tg__v8u, TG__FMA8, TG__TAB8, TG__SIMD_AVX512)

void tg__expm1_f64(double *y, const double *t, int64_t n, tg__exp_width w)
{
    if (w == TG__EXP_AVX512) expm1_avx512(y, t, n);
    else if (w == TG__EXP_AVX2) expm1_avx2(y, t, n);
    else expm1_plain(y, t, n);
}

void tg__unary_simd_f32(tg__unary_simd_op op, float *o, const float *a, const float *g,
                        int64_t n, tg__exp_width w)
{
    if (n <= 0) return;
    if (w == TG__EXP_AVX512) run_avx512((int)op, o, a, g, n);
    else if (w == TG__EXP_AVX2) run_avx2((int)op, o, a, g, n);
    else run_plain((int)op, o, a, g, n);
}
