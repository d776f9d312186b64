/* tests/test_gelu_pieces.c - the piecewise polynomials of f32 gelu and its
 * gradient (src/ops/gelu_pieces.h, src/ops/unary_simd.c): each piece's F
 * and D, evaluated in double as the kernels do (fused steps of Horner's
 * rule), against long double erfc and exp over the piece, at its edges and
 * a little past them; the piece-major copies hold the same coefficients;
 * and vectors that mix lanes below and past the pieces' bound (5.8) give
 * each lane the value it has in a vector of its own, within one rounding
 * of libm's, at every width. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "ops/gelu_pieces.h"
#include "ops/unary_simd_internal.h"

static const double W = 0.375;

/* Piece k's polynomial of table tab (coefficient-major) at t, as the kernels. */
static double horner(const double tab[GELU_N][GELU_PIECES], int k, double t)
{
    double p = tab[GELU_N - 1][k];
    for (int j = GELU_N - 2; j >= 0; j--) p = fma(p, t, tab[j][k]);
    return p;
}

/* F(a) = erfc(a / sqrt2) / 2 and a phi(a) in long double. */
static long double f_ld(long double a)
{
    return erfcl(a / sqrtl(2.0L)) / 2.0L;
}
static long double aphi_ld(long double a)
{
    return a * expl(-a * a / 2.0L) / sqrtl(2.0L * 3.14159265358979323846264338327950288L);
}

Test(gelu_pieces, each_piece_within_6e_16_of_long_double)
{
    double worst_f = 0, worst_d = 0;
    for (int k = 0; k < GELU_PIECES; k++) {
        /* 2001 points of [kW - 0.51 W, kW + 0.51 W] (a >= 0), then the
         * piece's edges kW -+ W / 2; t = a - kW exact, as the kernels' */
        for (int i = 0; i <= 2002; i++) {
            const double a = i <= 2000   ? k * W + (-0.51 * W + 1.02 * W * i / 2000.0)
                             : i == 2001 ? k * W - 0.5 * W
                                         : k * W + 0.5 * W;
            if (a < 0) continue;
            const double t = a - k * W;
            const long double f = f_ld(a), ap = aphi_ld(a);
            const double ef = (double)fabsl((horner(GELU_F, k, t) - f) / f);
            const double ed = (double)fabsl((horner(GELU_D, k, t) - (f - ap)) / (f + ap));
            worst_f = fmax(worst_f, ef);
            worst_d = fmax(worst_d, ed);
            cr_assert(ef <= 6e-16, "F piece %d a=%a: relative error %g", k, a, ef);
            cr_assert(ed <= 6e-16, "D piece %d a=%a: relative error %g", k, a, ed);
        }
    }
    cr_log_info("gelu_pieces: worst relative error F %.3g, D %.3g", worst_f, worst_d);
}

Test(gelu_pieces, piece_major_copies_hold_the_same_coefficients)
{
    for (int k = 0; k < GELU_PIECES; k++)
        for (int j = 0; j < GELU_N; j++) {
            cr_assert(memcmp(&GELU_FP[k][j], &GELU_F[j][k], sizeof(double)) == 0,
                      "F piece %d t^%d", k, j);
            cr_assert(memcmp(&GELU_DP[k][j], &GELU_D[j][k], sizeof(double)) == 0,
                      "D piece %d t^%d", k, j);
        }
}

/* got is one of the two f32 next to want (or want itself), or both NaN. */
static bool one_rounding(float got, double want)
{
    if (isnan(want)) return isnan(got);
    const float r = (float)want;
    if (got == r) return true;
    const float lo = (double)r <= want ? r : nextafterf(r, -INFINITY);
    const float hi = (double)r >= want ? r : nextafterf(r, INFINITY);
    return got == lo || got == hi;
}

static double reference(int op, float xf, float gf)
{
    const double x = xf, g = gf;
    if (op == TG__USIMD_GELU) return 0.5 * x * erfc(-x * M_SQRT1_2);
    return g * (0.5 * erfc(-x * M_SQRT1_2) +
                x * (exp(-0.5 * (x * x)) * (0.5 * M_2_SQRTPI * M_SQRT1_2)));
}

Test(gelu_pieces, mixed_vectors_give_each_lane_its_own_value)
{
    enum { N = 64 };
    /* around the bound 5.8 and the last piece's end (5.8125), small values,
     * both signs, interleaved so that most vectors mix the two paths */
    float xs[N], gs[N], got[N], alone[8], same[8], g8[8];
    for (int i = 0; i < N; i++) {
        const float far = 5.78f + 0.0025f * (float)i, near = 0.1f + 0.09f * (float)i;
        xs[i] = (i % 3 == 0 ? far : near) * (i % 2 ? -1.0f : 1.0f);
        gs[i] = 0.75f - 0.03125f * (float)i;
    }
    int widths = 0;
    for (int w = TG__EXP_PLAIN; w <= TG__EXP_AVX512; w++) {
        if (w != TG__EXP_PLAIN) {
            tg__exp_width_force(w);
            if (tg__exp_width_get() != (tg__exp_width)w) continue;
        }
        widths++;
        for (int op = TG__USIMD_GELU; op <= TG__USIMD_GELU_GRAD; op++) {
            tg__unary_simd_f32(op, got, xs, gs, N, (tg__exp_width)w);
            for (int i = 0; i < N; i++) {
                for (int l = 0; l < 8; l++) same[l] = xs[i], g8[l] = gs[i];
                tg__unary_simd_f32(op, alone, same, g8, 8, (tg__exp_width)w);
                cr_assert(memcmp(&got[i], &alone[0], sizeof(float)) == 0,
                          "width %d op %d x=%a: %a mixed, %a alone", w, op, (double)xs[i],
                          (double)got[i], (double)alone[0]);
                const double want = reference(op, xs[i], gs[i]);
                cr_assert(one_rounding(got[i], want), "width %d op %d x=%a: %a, libm %a", w,
                          op, (double)xs[i], (double)got[i], want);
            }
        }
    }
    tg__exp_width_force(0);
    cr_log_info("gelu_pieces: %d widths", widths);
}
