/* src/ops/unary_simd_internal.h - exp, gelu, softplus, sigmoid, silu, tanh
 * and the one-pass gradients of gelu and silu on contiguous f32, in double,
 * four or eight lanes at a time (src/ops/unary_simd.c), for unary.c's,
 * activation.c's and loss.c's f32 kernels (and the half dtypes, which
 * compute in f32).
 * Internal to src/ops. */
#ifndef TAPEGRAD_OPS_UNARY_SIMD_INTERNAL_H
#define TAPEGRAD_OPS_UNARY_SIMD_INTERNAL_H

#include <stdint.h>

#include "ops/softmax_rows_internal.h"

/* The op of a tg__unary_simd_f32 call, each element in double arithmetic
 * and rounded once to f32 (a = the input, g = the gradient):
 *   EXP        o = exp(a)              (a relative error a few 1e-16)
 *   GELU       o = a Phi(a)            Phi(a) = 0.5 erfc(-a / sqrt 2)
 *   GELU_GRAD  o = g (Phi(a) + a phi(a)), phi(a) = exp(-a^2 / 2) / sqrt(2 pi)
 *   SILU_GRAD  o = g s (1 + a (1 - s)), s = sigmoid(a)
 *   SOFTPLUS   o = max(a, 0) + log1p(exp(-|a|))   (log1p as 2 atanh(e / (2 + e)),
 *              its series to the 37th power, within 4.4e-16 relative)
 *   SIGMOID    o = 1 / (1 + e) for a >= 0, e / (1 + e) else, e = exp(-|a|)
 *   SILU       o = a sigmoid(a)
 *   TANH       o = sign(a) u / (u + 2), u = expm1(2 |a|) (exp_simd.h's expm1)
 * exp as src/ops/exp_simd.h (relative error under 2.3e-16), erfc as
 * exp(-z^2) erfcx(z), erfcx by a polynomial within 5e-16 relative
 * on [0, 11] (scripts/make_erfcx_coeffs.py; past 11, exp(-z^2) < e^-120
 * and the term is 0); gelu and its gradient for |a| <= 5.8 by piecewise
 * polynomials in |a| instead (src/ops/gelu_pieces.h), so each f32 result
 * is within one rounding of the value from libm's exp and erfc (tests). */
typedef enum tg__unary_simd_op {
    TG__USIMD_EXP,
    TG__USIMD_GELU,
    TG__USIMD_GELU_GRAD,
    TG__USIMD_SILU_GRAD,
    TG__USIMD_SOFTPLUS,
    TG__USIMD_SIGMOID,
    TG__USIMD_SILU,
    TG__USIMD_TANH,
} tg__unary_simd_op;

/* o[i] = op(a[i], g[i]) for i < n (g read by the gradients only), at width
 * w (softmax_rows_internal.h: tg__exp_width_get() picks this thread's, which
 * tg__exp_width_force sets for tests).  Every width takes the same
 * operations per element, so all give the same bits.  o may be a or g. */
void tg__unary_simd_f32(tg__unary_simd_op op, float *o, const float *a, const float *g,
                        int64_t n, tg__exp_width w);

/* Tests: y[i] = expm1(t[i]) for i < n (a multiple of 8), each t[i] in [0,
 * 700] or NaN, by exp_simd.h's expm1 (TANH's) at width w. */
void tg__expm1_f64(double *y, const double *t, int64_t n, tg__exp_width w);

#endif
