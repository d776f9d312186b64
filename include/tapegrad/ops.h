/* tapegrad/ops.h - differentiable tensor operations.
 *
 * Every function here writes a new reference to its result into *out and
 * returns TG_OK, or returns a negative tg_status (leaving *out untouched).
 * Inputs are borrowed.  When grad mode is on and an input requires grad, the op
 * is recorded on the tape (see autograd.h).
 *
 * Binary ops broadcast as NumPy/PyTorch do (align trailing dims; an extent of 1
 * stretches); their gradients are summed back to each input's shape.  Float
 * dtypes (f32, f64, f16, bf16) are accepted; f16/bf16 are computed in f32 and
 * rounded once.  Mixed float dtypes follow the op's AMP policy (registry.h).
 * An integer input to a floating function (tg_div and tg_atan2 of two
 * integers, exp, log, sqrt, erf, sin, cos, log1p, expm1, the functions from
 * reciprocal to exp2 below, tanh, sigmoid) gives f32 as torch's: the
 * integers converted to f32 (an i64 rounded once), then as for an f32
 * input, not recorded.  The ops whose torch result keeps an integer dtype
 * take integers as torch's: add, sub, mul, pow, maximum, minimum, their
 * scalar forms, neg, abs, the rounding ops, relu, relu6, hardtanh and clamp
 * (see there); elsewhere an integer input is TG_EDTYPE naming it, where
 * torch refuses it too: tg_to_dtype first.
 * Transcendental functions are computed in double and rounded once, so f32
 * results are within 0.5 ulp and may differ by an ulp from torch's
 * vectorised kernels; the deliberate differences from torch are listed in
 * docs/autograd.md (Elementwise ops against PyTorch 1.13).
 */
#ifndef TAPEGRAD_OPS_H
#define TAPEGRAD_OPS_H

#include <stdbool.h>
#include <stdint.h>

#include "tapegrad/export.h"
#include "tapegrad/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- elementwise binary (broadcasting) ----
 * Integers as torch's: two integer tensors give an integer of
 * torch.result_type's dtype (the wider; a 0-d operand counts only against
 * a 0-d one: an i32 tensor with a 0-d i64 is i32), each operand and the
 * arithmetic wrapping modulo 2^bits (i8 127 + 1 is -128, INT64_MIN - 1 is
 * INT64_MAX); not recorded.  i8 with u8, int16 in torch, is TG_EDTYPE
 * naming both.  An integer with a float tensor gives the float's dtype, the
 * integer converted to it first as torch's cast (to f16/bf16 through f32);
 * the float operand's gradient is as with two floats.  So for tg_add,
 * tg_sub, tg_mul, tg_pow, tg_maximum and tg_minimum (tg_div: see there). */
TG_API int tg_add(tg_tensor **out, tg_tensor *a, tg_tensor *b);
TG_API int tg_sub(tg_tensor **out, tg_tensor *a, tg_tensor *b);
TG_API int tg_mul(tg_tensor **out, tg_tensor *a, tg_tensor *b);
/* True division a / b; two integer tensors (any integer dtypes) give f32,
 * as torch's; an integer with a float gives the float's dtype, as tg_add. */
TG_API int tg_div(tg_tensor **out, tg_tensor *a, tg_tensor *b);
/* a ** b elementwise.  Gradients as torch's: d/da is 0 where b = 0 (also
 * at a = 0); d/db = a^b log a is 0 where a = 0 and b >= 0, and NaN for a
 * negative a.  Two integers: a^b modulo 2^bits, and for a negative b
 * torch's integer part (1 for a = 1, +-1 for a = -1, else 0). */
TG_API int tg_pow(tg_tensor **out, tg_tensor *a, tg_tensor *b);

/* ---- scalar variants ----
 * As a Python number in PyTorch, s is first converted to a's dtype (f32, or
 * f16/bf16 through f32: a half x * 0.1 multiplies by 0.0999755859375, and
 * x * 70000.0 by inf), then the op runs on the two values and rounds once.
 * The backward of mul/div by s uses that converted s too.
 * An integer a: torch's result dtype depends on whether the number is a
 * Python int (a's dtype) or float (f32), which a double cannot say, so the
 * rule is by value: an integral s is read as a Python int, the result keeps
 * a's dtype and s wraps into it (an i8 + 1000 adds -24), not recorded; a
 * non-integral s (2.5, NaN) is TG_EDTYPE saying to convert a first, and an
 * s outside [-2^63, 2^63) TG_EINVAL.  tg_div_scalar of an integer a is f32
 * (a and s converted to f32), as torch's. */
TG_API int tg_add_scalar(tg_tensor **out, tg_tensor *a, double s);   /* a + s */
TG_API int tg_sub_scalar(tg_tensor **out, tg_tensor *a, double s);   /* a - s */
TG_API int tg_rsub_scalar(tg_tensor **out, tg_tensor *a, double s);  /* s - a */
TG_API int tg_mul_scalar(tg_tensor **out, tg_tensor *a, double s);   /* a * s */
TG_API int tg_div_scalar(tg_tensor **out, tg_tensor *a, double s);   /* a / s */
/* a ** p, p converted as s above.  C's pow for every p: torch's f32/f64
 * kernels take sqrt / rsqrt for p = 0.5 / -0.5, which differ at -0.0 and
 * -inf (torch -0.0, NaN; here +0.0, +inf as C pow and torch's f16).  An
 * integer a takes an integral p as the scalar ops above (a^p modulo
 * 2^bits); as torch, TG_EINVAL for a negative p ("integers to negative
 * integer powers are not allowed") or one past a's dtype (i8: p > 127). */
TG_API int tg_pow_scalar(tg_tensor **out, tg_tensor *a, double p);

/* ---- elementwise unary ---- */
/* -a and |a|.  An integer a (i8, u8, i32, i64) gives a new tensor of its
 * dtype, wrapping as torch's: -(-128) and |-128| are -128 in i8, -(1) is 255
 * in u8; not recorded (integers have no gradient). */
TG_API int tg_neg(tg_tensor **out, tg_tensor *a);
TG_API int tg_exp(tg_tensor **out, tg_tensor *a);
TG_API int tg_log(tg_tensor **out, tg_tensor *a);
TG_API int tg_sqrt(tg_tensor **out, tg_tensor *a);
TG_API int tg_abs(tg_tensor **out, tg_tensor *a);
/* The error function erf(a) (its gradient is 2/sqrt(pi) * exp(-a^2)). */
TG_API int tg_erf(tg_tensor **out, tg_tensor *a);
/* sin(a) and cos(a) in radians (torch.sin, torch.cos), computed in double
 * and rounded once to a's dtype; differentiable to any order (d sin = cos,
 * d cos = -sin); an integer a gives f32 (see the top). */
TG_API int tg_sin(tg_tensor **out, tg_tensor *a);
TG_API int tg_cos(tg_tensor **out, tg_tensor *a);
/* log(1 + a) and exp(a) - 1 (torch.log1p, torch.expm1), computed in
 * double by log1p and expm1 and rounded once, so a small a keeps its digits
 * where log(1 + a) and exp(a) - 1 cancel; log1p(-1) is -inf and below -1
 * NaN, as torch's.  Gradients g / (1 + a) and g * exp(a), differentiable to
 * any order; the FP32 AMP policy, as tg_log and tg_exp. */
TG_API int tg_log1p(tg_tensor **out, tg_tensor *a);
TG_API int tg_expm1(tg_tensor **out, tg_tensor *a);
/* Rounding (torch.sign, torch.floor, torch.ceil, torch.round, torch.trunc):
 * sign(a) in {-1, 0, 1} (0 for +-0 and NaN, as torch's); floor, ceil and trunc
 * round down, up and toward zero; round takes halves to the even neighbour
 * (round(0.5) = 0, round(1.5) = 2, round(-2.5) = -2), as torch.round without
 * decimals.  Each keeps -0.0, +-inf and NaN and a's dtype (f32, f64, f16,
 * bf16).  The gradient is zero everywhere (torch's, also at the jumps), to any
 * order.  An integer a (i8, u8, i32, i64) gives, as torch's, a new tensor of
 * its dtype: a copy of a from floor, ceil, round and trunc, -1, 0 or 1 from
 * sign (0 or 1 in u8), computed on the integers (exact for every i64); not
 * recorded (integers have no gradient). */
TG_API int tg_sign(tg_tensor **out, tg_tensor *a);
TG_API int tg_floor(tg_tensor **out, tg_tensor *a);
TG_API int tg_ceil(tg_tensor **out, tg_tensor *a);
TG_API int tg_round(tg_tensor **out, tg_tensor *a);
TG_API int tg_trunc(tg_tensor **out, tg_tensor *a);
/* More of torch's elementwise math, each computed in double by C's function
 * and rounded once to a's dtype; out-of-domain inputs give NaN and the poles
 * +-inf, as torch's (rsqrt(0) = inf, rsqrt(-0.0) = -inf, log2(0) = -inf,
 * atanh(+-1) = +-inf, acos(1.5) = NaN).  Gradients as torch writes them, from
 * a with differentiable ops, so to any order (infinite at the domain edges:
 * acos'(+-1), atanh'(+-1), rsqrt'(0)):
 *   reciprocal 1/a: -g / a^2          rsqrt 1/sqrt(a): -g / (2 a^(3/2))
 *   tan: g (1 + tan^2 a)              atan: g / (1 + a^2)
 *   asin: g / sqrt(1 - a^2)           acos: -g / sqrt(1 - a^2)
 *   sinh: g cosh a                    cosh: g sinh a
 *   asinh: g / sqrt(a^2 + 1)          acosh: g / sqrt(a^2 - 1)
 *   atanh: g / (1 - a^2)              log2, log10: g / (a ln 2), g / (a ln 10)
 *   exp2 2^a: g 2^a ln 2
 * AMP: FP32 for reciprocal, rsqrt, tan, asin, acos, sinh, cosh, log2, log10
 * and exp2 (torch's autocast fp32 list, exp2 as exp), the others keep their
 * dtype (as sin and cos).  An integer a gives f32 (see the top). */
TG_API int tg_reciprocal(tg_tensor **out, tg_tensor *a);
TG_API int tg_rsqrt(tg_tensor **out, tg_tensor *a);
TG_API int tg_tan(tg_tensor **out, tg_tensor *a);
TG_API int tg_atan(tg_tensor **out, tg_tensor *a);
TG_API int tg_asin(tg_tensor **out, tg_tensor *a);
TG_API int tg_acos(tg_tensor **out, tg_tensor *a);
TG_API int tg_sinh(tg_tensor **out, tg_tensor *a);
TG_API int tg_cosh(tg_tensor **out, tg_tensor *a);
TG_API int tg_asinh(tg_tensor **out, tg_tensor *a);
TG_API int tg_acosh(tg_tensor **out, tg_tensor *a);
TG_API int tg_atanh(tg_tensor **out, tg_tensor *a);
TG_API int tg_log2(tg_tensor **out, tg_tensor *a);
TG_API int tg_log10(tg_tensor **out, tg_tensor *a);
TG_API int tg_exp2(tg_tensor **out, tg_tensor *a);

/* ---- activations ---- */
/* relu is torch's clamp_min(a, 0): NaN and -0.0 stay.  Its gradient is g
 * where a > 0 or a is NaN, 0 where a <= 0 (PyTorch's threshold_backward,
 * except that an inf or NaN g there gives NaN: a product, not a select).
 * leaky_relu's gradient is g where a > 0 and g * slope elsewhere, NaN
 * included, as PyTorch's.  As in torch, the slope is first converted to f32
 * unless a is f64 (an f32 result is a * 0.2f).  relu of an integer a is
 * max(a, 0) in a's dtype, as torch's, not recorded; leaky_relu refuses
 * integers (TG_EDTYPE), as torch. */
TG_API int tg_relu(tg_tensor **out, tg_tensor *a);
TG_API int tg_leaky_relu(tg_tensor **out, tg_tensor *a, double slope);
TG_API int tg_tanh(tg_tensor **out, tg_tensor *a);
/* sigmoid and silu use e^x / (1 + e^x) for x < 0, so their far negative
 * tails keep the value (f32 sigmoid(-88.75) = 2.85e-39) where torch's
 * 1 / (1 + e^-x) gives 0; no overflow, exact 0 and 1 limits. */
TG_API int tg_sigmoid(tg_tensor **out, tg_tensor *a);
TG_API int tg_silu(tg_tensor **out, tg_tensor *a);
/* Exact GELU, x * Phi(x) with the erf form: torch's gelu(approximate='none'),
 * its default (the tanh approximation is tg_gelu_tanh).  Computed as
 * 0.5 x erfc(-x / sqrt 2), which keeps the negative tail (f32 gelu(-5.54) =
 * -8.2e-8, torch 0) and gives -0.0 where it underflows (torch's f32: +0.0). */
TG_API int tg_gelu(tg_tensor **out, tg_tensor *a);
/* torch's gelu(x, approximate='tanh'): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
 * with torch's constants and the steps of its CPU kernel in the element type
 * (f16 and bf16 as f32, rounded once).  Its tanh is the one difference
 * (torch's within 1 ulp; here correctly rounded in f32, libm's in f64), so
 * the result is torch's bits where the two tanh agree and within
 * |0.5 x| ulp(tanh) + 1 ulp otherwise.  gelu_tanh(-inf) is NaN, as torch's.
 * The gradient is torch's formula, written with differentiable ops.
 * Integers are refused (TG_EDTYPE), as torch's. */
TG_API int tg_gelu_tanh(tg_tensor **out, tg_tensor *x);
/* F.elu(x, alpha): x where x > 0, alpha * (e^x - 1) elsewhere (torch's
 * default alpha is 1).  e^x - 1 is expm1 in double, rounded once, so small
 * negative x keep their value where torch's f32 kernel (exp(x) - 1 in f32)
 * gives 0; elsewhere within a few ulp of torch's.  The gradient is torch's
 * (g * alpha * e^x where x <= 0), differentiable to any order.  TG_EINVAL
 * for a NULL argument or an alpha that is not finite, TG_EDTYPE for an
 * integer x. */
TG_API int tg_elu(tg_tensor **out, tg_tensor *x, double alpha);
/* F.hardtanh(x, min_val, max_val): min(max(x, min_val), max_val), the bounds
 * first converted to x's dtype, as torch's (torch's defaults: -1, 1); NaN
 * and -0.0 stay (relu6(-0.0) is -0.0, as torch's).  tg_relu6 is
 * hardtanh(x, 0, 6) (F.relu6).  The gradient is torch's: g where
 * min_val < x < max_val, 0 elsewhere, the bounds and NaN included (torch
 * 1.13's scalar tail loop passes g at NaN).  TG_EINVAL for a NULL argument,
 * a NaN bound or min_val > max_val (infinite bounds are allowed).  An
 * integer x stays an integer, as torch's: the bounds truncated toward zero
 * (-2.5 is -2), then clamped in x's dtype, not recorded; TG_EINVAL, as
 * torch, for a bound past i64 (inf), a negative one for u8, or one past
 * x's dtype (1000 for i8). */
TG_API int tg_hardtanh(tg_tensor **out, tg_tensor *x, double min_val, double max_val);
TG_API int tg_relu6(tg_tensor **out, tg_tensor *x);
/* F.hardsigmoid(x) = relu6(x + 3) / 6 and F.hardswish(x) =
 * x * relu6(x + 3) / 6, computed in double and rounded once: within an ulp
 * of torch's, NaN stays, hardswish(-inf) is NaN (-inf * 0) and
 * hardswish(-0.0) is -0.0, as torch's.  Gradients as torch's: hardsigmoid's
 * g / 6 on the open interval (-3, 3) and 0 elsewhere, NaN included (torch's
 * f64 kernel multiplies by 1/6 rounded to f32, 3e-8 relative off; here by
 * 1/6); hardswish's 0 where x <= -3, g where x >= 3 and g (x / 3 + 1/2)
 * between, NaN for NaN, as torch's vectorized kernel except at x = -3,
 * where torch 1.13 gives -g/2 and later torch 0, as here (torch 1.13's
 * scalar tail loop also gives 1.5 g at 3 and g at NaN).  Differentiable to
 * any order.  TG_EINVAL for a NULL argument, TG_EDTYPE for an integer x. */
TG_API int tg_hardsigmoid(tg_tensor **out, tg_tensor *x);
TG_API int tg_hardswish(tg_tensor **out, tg_tensor *x);
/* F.mish(x) = x * tanh(softplus(x)), as x * tanh(log1p(e^x)) in double,
 * rounded once (f16 and bf16 too, which torch 1.13 refuses on the CPU);
 * NaN stays, mish(+inf) = +inf, mish(-inf) = NaN, mish(-0.0) = -0.0, as
 * torch's.  The gradient is torch's formula, g (t + x sigmoid(x) (1 - t^2))
 * with t = tanh(softplus(x)), NaN at +-inf as torch's, written with tanh,
 * softplus, sigmoid, mul and add, so differentiable to any order.
 * TG_EINVAL for a NULL argument, TG_EDTYPE for an integer x. */
TG_API int tg_mish(tg_tensor **out, tg_tensor *x);
/* F.selu(x) = scale * (x where x > 0, alpha * (e^x - 1) elsewhere) and
 * F.celu(x, alpha) = x where x > 0, alpha * (e^(x / alpha) - 1) elsewhere
 * (torch's default alpha is 1): torch's elu kernel, its coefficients
 * (alpha * scale, scale, 1 / alpha) converted to f32 as torch's unless x
 * is f64, so the positive side is torch's bits; e^t - 1 is expm1 in double
 * as in tg_elu (celu(x, 1) is elu(x, 1)), within a few ulp of torch's
 * elsewhere, and small negative x keep their value; a bf16 x is computed in
 * f32 and rounded once, as torch's.  Gradients as torch's elu_backward:
 * g * alpha * scale * e^x (selu) and g * e^(x / alpha) (celu) where x <= 0,
 * so alpha * scale and 1 at 0, g * scale and g above 0, NaN at NaN (torch's
 * vectorized kernel; its scalar tail loop gives g * scale), to any order.
 * TG_EINVAL for a NULL argument or a celu alpha that is 0 or not finite,
 * TG_EDTYPE for an integer x, as torch. */
TG_API int tg_selu(tg_tensor **out, tg_tensor *x);
TG_API int tg_celu(tg_tensor **out, tg_tensor *x, double alpha);
/* F.hardshrink(x, lambd): 0 where -lambd <= x <= lambd, x elsewhere;
 * F.softshrink(x, lambd): x - lambd above lambd, x + lambd below -lambd, 0
 * between and at NaN; F.threshold(x, threshold, value): value where
 * x <= threshold, x elsewhere (NaN stays).  torch's default lambd is 0.5.
 * The parameters are first converted to x's dtype, as torch's (softshrink's
 * value takes lambd in f32 for bf16 and f16 x, as torch's bf16 kernel; its
 * gradient takes it in x's dtype, as torch's).  Gradients
 * as torch's vectorized kernels: g where x < -lambd or x > lambd (0 at
 * +-lambd and at NaN), and g where x > threshold or x is NaN, 0 elsewhere;
 * to any order.  TG_EINVAL for a NULL argument, a NaN hardshrink lambd
 * (torch passes x through), a softshrink lambd that is NaN or < 0;
 * TG_EDTYPE for an integer hardshrink or softshrink x.  threshold of an
 * integer x keeps its dtype, as torch's: the threshold and value truncated
 * toward zero (a threshold beyond the dtype's range saturates), computed
 * on the integers, not recorded; TG_EINVAL there for a NaN threshold or a
 * value outside the dtype's range. */
TG_API int tg_hardshrink(tg_tensor **out, tg_tensor *x, double lambd);
TG_API int tg_softshrink(tg_tensor **out, tg_tensor *x, double lambd);
TG_API int tg_threshold(tg_tensor **out, tg_tensor *x, double threshold, double value);
/* F.softsign(x) = x / (|x| + 1) and F.tanhshrink(x) = x - tanh(x), made of
 * those ops as torch's (so a bf16 x rounds after each, softsign(+-inf) is
 * NaN); an integer x gives f32, as torch's.  F.softmin(x, dim) =
 * softmax(-x, dim), with softmax's dims, FP32 autocast policy and errors.
 * All differentiable to any order.  TG_EINVAL for a NULL argument,
 * TG_EDTYPE for an integer softmin x. */
TG_API int tg_softsign(tg_tensor **out, tg_tensor *x);
TG_API int tg_tanhshrink(tg_tensor **out, tg_tensor *x);
TG_API int tg_softmin(tg_tensor **out, tg_tensor *x, int dim);
/* F.glu(x, dim): x split in halves a, b along dim (negative counts from
 * the end; torch's default -1), a * sigmoid(b), computed in double and
 * rounded once (bf16: f32, rounded once, as torch's).  The gradient is
 * torch's glu_backward in its order of products (da = s g, db =
 * (1 - s) s a g, s = sigmoid(b)), to any order.  TG_EINVAL for a NULL
 * argument, a 0-d x or dim out of range, TG_ESHAPE for an odd extent along
 * dim, TG_EDTYPE for an integer x. */
TG_API int tg_glu(tg_tensor **out, tg_tensor *x, int dim);
/* F.rrelu(x, lower, upper, training=False): leaky_relu with the slope
 * (lower + upper) / 2 (torch's defaults 1/8 and 1/3), its values and
 * gradients.  training = true (a random slope per element) is refused.
 * TG_EINVAL for a NULL argument, lower > upper or NaN, training true;
 * TG_EDTYPE for an integer x. */
TG_API int tg_rrelu(tg_tensor **out, tg_tensor *x, double lower, double upper, bool training);
/* F.dropout(x, p, training): in training each element is zeroed with
 * probability p and the rest scaled by 1 / (1 - p) (all zeroed for p = 1),
 * the mask drawn by rng in x's dtype (tg_tensor_rand_uniform: the same on
 * every machine, not torch's numbers), which advances rng's counter; the
 * gradient is g times the same mask, to any order.  Not training, or p = 0,
 * returns x itself (a new reference) and draws nothing; rng may then be
 * NULL.  TG_EINVAL for a NULL out or x, p outside [0, 1] (NaN too) or a NULL
 * rng where one is needed; TG_EDTYPE for an integer x.  The Dropout module
 * (tg_nn_dropout_new) calls this with a generator of its own. */
TG_API int tg_dropout(tg_tensor **out, tg_tensor *x, double p, bool training, tg_rng *rng);
/* F.gumbel_softmax(logits, tau, hard, dim): softmax((logits + g) / tau,
 * dim) with Gumbel(0, 1) noise g = -log(E), E ~ Exp(1), one draw per
 * element of logits by rng (the same on every machine, not torch's
 * numbers; rng's counter advances).  hard: the one-hot of the argmax along
 * dim (the first largest), whose gradient is the soft one's
 * (y_hard - detach(y_soft) + y_soft, torch's straight-through form).
 * Differentiable in logits to any order.  TG_EINVAL for a NULL out, logits
 * or rng, tau 0 or NaN, or dim outside logits' dims; TG_EDTYPE for an
 * integer logits.  On error *out is untouched. */
TG_API int tg_gumbel_softmax(tg_tensor **out, tg_tensor *logits, double tau, bool hard, int dim,
                             tg_rng *rng);
/* F.dropout1d / F.dropout2d / F.dropout3d(x, p, training) for n_spatial 1,
 * 2, 3: in training each channel (all of x[n, c] at once) is zeroed with
 * probability p and the rest of x scaled by 1 / (1 - p), as tg_dropout
 * with one draw per channel (a mask of shape (N, C, 1, ...), drawn by rng
 * in x's dtype; rng's counter advances).  The channels are torch 1.13's:
 *  - 1: x (N, C, L), or (C, L) unbatched;
 *  - 2: x (N, C, H, W), or any x of >= 2 dims read as (N, C, ...): a 3-d x
 *    is (N, C, L), not an unbatched (C, H, W) (torch warns of both and
 *    does the same);
 *  - 3: x (N, C, D, H, W), and any other x of >= 1 dims unbatched, its dim
 *    0 the channel (torch warns outside 4 and 5 dims and does the same).
 * The gradient is g times the same mask, to any order.  Not training, or
 * p = 0, returns x itself (a new reference) and draws nothing; rng may then
 * be NULL.  TG_EINVAL for a NULL out or x, n_spatial outside 1..3, p
 * outside [0, 1] (NaN too) or a NULL rng where one is needed; TG_ESHAPE
 * for a rank the rules above refuse; TG_EDTYPE for an integer x.  The
 * Dropout1d/2d/3d modules (tg_nn_dropout_channels_new) call this with a
 * generator of their own. */
TG_API int tg_dropout_channels(tg_tensor **out, tg_tensor *x, int n_spatial, double p,
                               bool training, tg_rng *rng);
/* F.alpha_dropout(x, p, training) and F.feature_alpha_dropout(x, p,
 * training): in training each element (feature: each channel x[n, c], a
 * mask of shape (N, C, 1, ...); x needs 2 dims, TG_ESHAPE) is kept with
 * probability 1 - p, and, with alpha' = 1.7580993408473766 (SELU's
 * scale * alpha) and a = 1 / sqrt((alpha'^2 p + 1) (1 - p)),
 *   y = a x + alpha' a p where kept, alpha' a (p - 1) where dropped,
 * torch's formula, which keeps the mean 0 and variance 1 of a SELU-normal
 * x.  The mask is drawn as tg_dropout's (rng's counter advances; not
 * torch's numbers).  The gradient is g a where kept and 0 where dropped,
 * to any order.  Not training, p = 0 or an empty x returns x itself (a new
 * reference) and draws nothing (rng may then be NULL); p = 1 gives x * 0
 * (zeros, NaN where x is not finite), as torch.  Errors as tg_dropout's;
 * torch's order of checks (a 1-d x with p = 0 or 1 passes the feature
 * form).  The AlphaDropout and FeatureAlphaDropout modules
 * (tg_nn_alpha_dropout_new) call these with a generator of their own. */
TG_API int tg_alpha_dropout(tg_tensor **out, tg_tensor *x, double p, bool training,
                            tg_rng *rng);
TG_API int tg_feature_alpha_dropout(tg_tensor **out, tg_tensor *x, double p, bool training,
                                    tg_rng *rng);
/* F.prelu(x, weight): x where x > 0, weight * x elsewhere, one weight per
 * channel (dim 1 of x) or one for all: weight is 1-d with 1 or C elements
 * (an x of fewer than two dims has one channel).  Values as torch's (the
 * product rounded once; -0.0 and NaN kept); gradients as torch's
 * (dx = g * w where x <= 0, also at 0; dw summed over all but the channel
 * dim), differentiable to any order.  The result has x's dtype, also under
 * autocast: a weight of another float dtype is cast to it first (recorded,
 * so its gradient keeps the weight's dtype), as torch does.  TG_EINVAL for
 * a NULL argument, TG_ESHAPE naming both shapes for another weight,
 * TG_EDTYPE for an integer x or weight. */
TG_API int tg_prelu(tg_tensor **out, tg_tensor *x, tg_tensor *weight);

/* softmax(x) along dim, exp(x - m) / sum(exp(x - m)), and log_softmax(x),
 * (x - m) - log(sum(exp(x - m))), m each row's maximum, as
 * torch.nn.functional.softmax / log_softmax with an explicit dim (negative
 * counts from the end; a 0-d x takes -1 and 0 and gives 1, or 0).  Finite for
 * |x| = 1000.  Computed in double and rounded once to x's dtype, f16
 * included (torch 1.13 has no f16 softmax on the CPU).  A row of -inf, or
 * one holding +inf or NaN, is NaN throughout, as in torch; an empty row
 * gives an empty result.  Gradients dx = y (g - sum(g y)), y the saved
 * output, and dx = g - softmax(x) sum(g), x the saved input (torch saves
 * log_softmax's output: here changing x in place before backward is
 * TG_EINPLACE, changing the output is harmless); differentiable to any
 * order.  The FP32 policy: inside an autocast scope an f16/bf16 x gives
 * an f32 result (as torch's CUDA autocast; its CPU autocast keeps bf16). */
TG_API int tg_softmax(tg_tensor **out, tg_tensor *x, int dim);
TG_API int tg_log_softmax(tg_tensor **out, tg_tensor *x, int dim);

/* softplus(a) = log(1 + e^(beta a)) / beta, and a itself where
 * beta a > threshold (torch's defaults: beta 1, threshold 20).  beta > 0. */
TG_API int tg_softplus(tg_tensor **out, tg_tensor *a, double beta, double threshold);
/* min(max(a, lo), hi) as torch.clamp; NAN for lo or hi means no such bound.
 * NaN elements stay NaN.  The gradient passes where lo <= a <= hi.  An
 * integer a with integral bounds stays an integer (torch's Python int
 * bounds), not recorded; a non-integral bound is TG_EDTYPE (torch's result
 * would be f32: convert a first), one past a's dtype TG_EINVAL as torch's
 * overflow error (u8 takes -255..-1, wrapped: clamp(u8, -2, NAN) is 254). */
TG_API int tg_clamp(tg_tensor **out, tg_tensor *a, double lo, double hi);
/* F.logsigmoid(a) = log(1 / (1 + e^-a)) = -softplus(-a), as
 * min(a, 0) - log1p(e^-|a|) in double, rounded once: no overflow for a far
 * below 0 (logsigmoid(-100) = -100) and the tiny tail above (logsigmoid(100)
 * = -e^-100 in f64).  Gradient g * sigmoid(-a), to any order; KEEP under
 * autocast, as the activations. */
TG_API int tg_logsigmoid(tg_tensor **out, tg_tensor *a);
/* torch.atan2(y, x): the angle of (x, y) in [-pi, pi], y and x broadcast
 * together (one float dtype, promoted as tg_add's), computed in double and
 * rounded once; atan2(+-0, -0) = +-pi as C's.  Gradients, as torch's:
 * dy = g x / (x^2 + y^2), dx = -g y / (x^2 + y^2) (NaN at the origin),
 * summed back to each input's shape, to any order.  PROMOTE under autocast
 * (torch's autocast promote list has atan2).  Two integer tensors give
 * f32, as tg_div's. */
TG_API int tg_atan2(tg_tensor **out, tg_tensor *y, tg_tensor *x);
/* torch.lerp(start, end, weight) with a tensor weight, the three broadcast
 * together, as torch 1.13's CPU kernel, bit for bit: start + w (end - start)
 * where w < 0.5 (a w of -0.7 too), else end - (end - start) (1 - w), each
 * product and sum fused (one rounding; exact at w = 0 and w = 1); f16 and
 * bf16 computed in f32 and rounded once.  Gradients, to any order:
 * g (1 - w), g w and g (end - start), each summed back to its input's
 * shape.  TG_EINVAL for a NULL argument, TG_EDTYPE for an integer operand
 * or dtypes that differ (as torch), TG_ESHAPE for shapes that do not
 * broadcast.  One op, KEEP under autocast. */
TG_API int tg_lerp(tg_tensor **out, tg_tensor *start, tg_tensor *end, tg_tensor *weight);
/* torch.lerp(start, end, weight) with a number weight (the EMA of weights,
 * p_ema.lerp_(p, 1 - decay)), start and end broadcast together, as torch
 * 1.13's kernel: start + w (end - start) where w < 0.5, else
 * end - (end - start) (1 - w), each with one rounding; f16/bf16 computed in
 * f32.  Gradients g (1 - w) to start and g w to end, to any order.
 * TG_EINVAL for a NULL operand, TG_EDTYPE for an integer one or two dtypes
 * that differ, TG_ESHAPE for shapes that do not broadcast.  One op, KEEP
 * under autocast. */
TG_API int tg_lerp_scalar(tg_tensor **out, tg_tensor *start, tg_tensor *end, double weight);
/* x padded as torch.nn.functional.pad: pads holds n/2 (low, high) pairs for
 * the last n/2 dims, the last dim first; the new entries are `value`
 * (CONSTANT), x mirrored without repeating its edge (REFLECT: each padding
 * < the dim's size), its edge repeated (REPLICATE) or x wrapped around
 * (CIRCULAR: each padding <= the size).  A negative padding removes that
 * many elements from its end, as in torch: CONSTANT and CIRCULAR may remove
 * the whole dim but no more, and CIRCULAR then wraps around what is left
 * (each positive padding <= the size less the removed elements); REFLECT
 * and REPLICATE still read x's own ends and must leave each dim >= 1.
 * Paddings lie in [-INT32_MAX, INT32_MAX].  Any dtype; differentiable to
 * any order (the gradient adds each output's gradient into the element it
 * came from; a removed element's gradient is 0). */
typedef enum tg_pad_mode {
    TG_PAD_CONSTANT = 0,
    TG_PAD_REFLECT,
    TG_PAD_REPLICATE,
    TG_PAD_CIRCULAR,
    /* torchvision's 'symmetric' (the edge repeated, then inward), which
     * torch's F.pad has not: tg_loader_set_augment's alone; tg_pad, the
     * convolutions and the padding modules refuse it. */
    TG_PAD_SYMMETRIC,
} tg_pad_mode;
TG_API int tg_pad(tg_tensor **out, tg_tensor *x, int n, const int64_t *pads, tg_pad_mode mode,
                  double value);
/* a where cond is nonzero, else b (torch.where); the three broadcast
 * together.  cond: any dtype (NaN is nonzero, -0.0 is not), no gradient,
 * no part in the result's dtype.  a and b: any dtypes, promoted as torch's
 * where (torch.result_type): an integer with a float gives the float, two
 * integers the wider (u8 with i32 gives i32), two floats tg_promote_dtypes;
 * a 0-d operand counts only against a 0-d one or one of a lower category
 * (an f32 tensor with a 0-d f64 is f32, an i32 tensor with a 0-d f64 is
 * f64).  i8 with u8 (int16 in torch) is TG_EDTYPE naming both.  A float
 * result's gradients are g where cond is nonzero (a) and elsewhere (b),
 * summed back to each input's shape and converted to its dtype,
 * differentiable to any order; an integer operand gets none, and an
 * integer result is not recorded, as torch's; cond gets none either, so
 * with neither a nor b requiring grad the result is not recorded even
 * when a float cond requires grad.  TG_EINVAL for a NULL argument,
 * TG_ESHAPE when the shapes do not broadcast. */
TG_API int tg_where(tg_tensor **out, tg_tensor *cond, tg_tensor *a, tg_tensor *b);
/* x with value where mask is nonzero (x.masked_fill(mask, value)): mask
 * (any dtype, as tg_where's cond; no gradient) and x (any dtype) broadcast
 * together.  value is converted to x's dtype as torch converts a Python
 * float: rounded to a float dtype, truncated toward zero for an integer
 * one (2.7 -> 2, -2.7 -> -2).  TG_EINVAL naming the value and the dtype
 * when it lies outside the dtype's range, as torch's "cannot be converted
 * without overflow" (1e300 for f32; 300, -1 or 255.5 for u8; 127.5 for i8;
 * NaN and +-inf for an integer dtype; 2^63 for i64, which torch 1.13
 * writes as INT64_MIN).  A float x's gradient is g where mask is 0, summed
 * back to x's shape; an integer result is not recorded.  TG_EINVAL for a
 * NULL argument, TG_ESHAPE when the shapes do not broadcast. */
TG_API int tg_masked_fill(tg_tensor **out, tg_tensor *x, tg_tensor *mask, double value);
/* The larger (smaller) of a and b elementwise, broadcast together
 * (torch.maximum / torch.minimum): NaN when either is NaN; any dtypes,
 * promoted as tg_add (integers too, see there).  Gradients as torch's: g
 * to the larger (smaller) input, half to each where a = b, all of g to both
 * where either is NaN. */
TG_API int tg_maximum(tg_tensor **out, tg_tensor *a, tg_tensor *b);
TG_API int tg_minimum(tg_tensor **out, tg_tensor *a, tg_tensor *b);
/* ---- comparisons ----
 * a == b, a != b, a < b, a <= b, a > b, a >= b elementwise (torch.eq, ne,
 * lt, le, gt, ge), broadcast together: a u8 tensor of 0 and 1 (torch's
 * bool; tapegrad has no bool dtype, and a u8 mask serves tg_where and
 * tg_mul after tg_to_dtype).  Any dtypes: two integer tensors compare
 * exactly; otherwise both are converted to their promoted float dtype
 * first, as torch (an f32 x == a 0-d f64 0.1 compares with 0.1f).  NaN is
 * unordered: only ne holds.  Never recorded, no gradient, as torch. */
TG_API int tg_eq(tg_tensor **out, tg_tensor *a, tg_tensor *b);
TG_API int tg_ne(tg_tensor **out, tg_tensor *a, tg_tensor *b);
TG_API int tg_lt(tg_tensor **out, tg_tensor *a, tg_tensor *b);
TG_API int tg_le(tg_tensor **out, tg_tensor *a, tg_tensor *b);
TG_API int tg_gt(tg_tensor **out, tg_tensor *a, tg_tensor *b);
TG_API int tg_ge(tg_tensor **out, tg_tensor *a, tg_tensor *b);
/* a compared with the number s: for a float a, s is first converted to a's
 * dtype (as tg_add_scalar: an f16 x < 0.1 compares with 0.0999755859375);
 * an integer a is compared with s exactly, as numbers (torch compares a
 * Python float in f32 and wraps a Python int into a's dtype). */
TG_API int tg_eq_scalar(tg_tensor **out, tg_tensor *a, double s);
TG_API int tg_ne_scalar(tg_tensor **out, tg_tensor *a, double s);
TG_API int tg_lt_scalar(tg_tensor **out, tg_tensor *a, double s);
TG_API int tg_le_scalar(tg_tensor **out, tg_tensor *a, double s);
TG_API int tg_gt_scalar(tg_tensor **out, tg_tensor *a, double s);
TG_API int tg_ge_scalar(tg_tensor **out, tg_tensor *a, double s);
/* ---- float tests, truth reductions, remainders ----
 * torch.isnan, isinf, isposinf, isneginf, isfinite: a u8 tensor of 0 and 1
 * of x's shape (torch's bool, as tg_eq's); an integer x gives all 0 (all 1
 * from isfinite).  Never recorded, no gradient. */
TG_API int tg_isnan(tg_tensor **out, tg_tensor *x);
TG_API int tg_isinf(tg_tensor **out, tg_tensor *x);
TG_API int tg_isposinf(tg_tensor **out, tg_tensor *x);
TG_API int tg_isneginf(tg_tensor **out, tg_tensor *x);
TG_API int tg_isfinite(tg_tensor **out, tg_tensor *x);
/* torch.all / torch.any: whether every (some) element is nonzero (NaN is,
 * -0.0 is not), over the whole tensor (a 0-d result) or along dim (dropped
 * unless keepdim; negative counts from the end; a 0-d x takes -1 and 0).
 * Any dtype; a u8 result of 0 and 1 (torch gives u8 for a u8 x, bool
 * otherwise).  Over no elements all is 1 and any 0.  No gradient. */
TG_API int tg_all(tg_tensor **out, tg_tensor *x);
TG_API int tg_any(tg_tensor **out, tg_tensor *x);
TG_API int tg_all_dim(tg_tensor **out, tg_tensor *x, int dim, bool keepdim);
TG_API int tg_any_dim(tg_tensor **out, tg_tensor *x, int dim, bool keepdim);
/* torch.nan_to_num(x, nan, posinf, neginf): x with NaN, +inf and -inf
 * replaced by *nan, *posinf and *neginf, each converted to x's dtype (a
 * half one through f32).  A NULL pointer asks for torch's default: 0, the
 * largest and the lowest finite value of x's dtype.  An integer x gives a
 * copy of x.  Gradient g where x is finite, 0 elsewhere (g * isfinite(x),
 * as torch's), to any order. */
TG_API int tg_nan_to_num(tg_tensor **out, tg_tensor *x, const double *nan,
                         const double *posinf, const double *neginf);
/* torch.fmod (C's fmod: the sign of a), torch.remainder (Python's %: the
 * sign of b) and torch.floor_divide (a // b: the quotient rounded down), a
 * and b broadcast together, as torch 1.13's kernels bit for bit (-0.0,
 * +-inf and NaN included: fmod(inf, b) and fmod(a, 0) are NaN,
 * remainder(-1, inf) is inf, floor_divide(a, 0) is a / 0).  Dtypes promote
 * as tg_add's.  Two integers stay integers; a zero divisor is TG_EINVAL
 * (torch's ZeroDivisionError), and the most negative value by -1 wraps
 * (fmod and remainder 0, floor_divide the value itself; torch crashes on
 * x86 for i64).  Gradients as torch's: fmod da = g, db = -g trunc(a / b);
 * remainder da = g, db = -g floor(a / b); to any order.  floor_divide has
 * none in torch 1.13, so a backward through it is TG_EGRAD. */
TG_API int tg_fmod(tg_tensor **out, tg_tensor *a, tg_tensor *b);
TG_API int tg_remainder(tg_tensor **out, tg_tensor *a, tg_tensor *b);
TG_API int tg_floor_divide(tg_tensor **out, tg_tensor *a, tg_tensor *b);
/* fmod and remainder with a number s, converted as tg_add_scalar's (for an
 * integer a an integral s, taken modulo 2^bits of a's dtype). */
TG_API int tg_fmod_scalar(tg_tensor **out, tg_tensor *a, double s);
TG_API int tg_remainder_scalar(tg_tensor **out, tg_tensor *a, double s);
/* torch.square(x) = x * x (tg_mul: an integer x stays an integer,
 * wrapping; the gradient 2 g x). */
TG_API int tg_square(tg_tensor **out, tg_tensor *x);
/* torch.addcmul(input, t1, t2, value=v) = input + v t1 t2 and
 * torch.addcdiv = input + v t1 / t2, the three broadcast together, as torch
 * 1.13's CPU kernels bit for bit: addcmul fma(v t1, t2, input) (one
 * rounding after v t1), addcdiv input + (v t1) / t2; f16 and bf16 in f32,
 * rounded once (torch 1.13 has no f16 CPU kernel).  Dtypes promote as
 * tg_add's; three integers stay integers for addcmul (an integral v, else
 * TG_EDTYPE; torch truncates v), and addcdiv of integer t1 and t2 is
 * TG_EDTYPE, as torch's.  Gradients as torch's, to any order: dinput = g;
 * addcmul dt1 = g (t2 v), dt2 = g (t1 v); addcdiv dt1 = g (v / t2),
 * dt2 = -g ((v t1) / (t2 t2)); each summed back to its input's shape. */
TG_API int tg_addcmul(tg_tensor **out, tg_tensor *input, tg_tensor *t1, tg_tensor *t2,
                      double value);
TG_API int tg_addcdiv(tg_tensor **out, tg_tensor *input, tg_tensor *t1, tg_tensor *t2,
                      double value);
/* (..., num_classes) with 1 at each label of labels (...) and 0 elsewhere,
 * in dtype dt (torch.nn.functional.one_hot gives int64: TG_I64).  Labels are
 * integers in [0, num_classes), else TG_EINVAL naming the first bad one.
 * Not differentiable. */
TG_API int tg_one_hot(tg_tensor **out, tg_tensor *labels, int64_t num_classes, tg_dtype dt);
/* The rows of weight (V, D) picked by the integer indices (...): (..., D),
 * as torch.nn.functional.embedding.  An index outside [0, V) is TG_EINVAL.
 * weight's gradient adds each gradient row into the row it picked;
 * differentiable to any order. */
TG_API int tg_embedding(tg_tensor **out, tg_tensor *weight, tg_tensor *indices);
/* F.embedding's other arguments:
 *  - padding_idx: the row that receives no gradient (its forward value is
 *    weight's row, as torch); negative counts from the end; in [-V, V), else
 *    TG_EINVAL.  TG_EMBEDDING_NO_PADDING for none (torch's None).
 *  - scale_grad_by_freq: each gradient row divided by the number of times
 *    its index occurs in indices.  Its double backward is the derivative of
 *    that scaled sum (torch 1.13's ignores the scaling).
 *  - max_norm > 0: first, each row that indices pick whose norm_type-norm
 *    (> 0, INFINITY for the largest |x|) is above max_norm is rescaled in
 *    place to max_norm / (norm + 1e-7) times itself, outside the tape,
 *    as torch's embedding_renorm_: weight is changed and its version bumped
 *    (so a backward through an earlier use of it is TG_EGRAD).  0 for none.
 *  - sparse: weight's gradient is a sparse COO tensor (tapegrad/sparse.h),
 *    as torch's sparse=True: indices (1, nnz) int64 and values (nnz, D), one
 *    row per looked-up index in the order of indices (repeats kept; none for
 *    padding_idx); the sparse gradients of several backward calls (or of
 *    several uses in one) are summed as torch sums them (tapegrad/sparse.h).
 *    With
 *    create_graph the gradient is the same sparse tensor, not differentiable
 *    further (as torch's).  scale_grad_by_freq with sparse is TG_EINVAL
 *    (torch refuses it in the backward).  Optimizers that take a sparse
 *    gradient: SparseAdam, SGD and Adagrad (tapegrad/optim.h).
 * Errors leave weight unchanged. */
typedef struct tg_embedding_opts {
    int64_t padding_idx;
    bool scale_grad_by_freq;
    double max_norm;
    double norm_type;
    bool sparse;
} tg_embedding_opts;
#define TG_EMBEDDING_NO_PADDING INT64_MIN
#define TG_EMBEDDING_OPTS_INIT                                                                \
    {.padding_idx = TG_EMBEDDING_NO_PADDING, .scale_grad_by_freq = false, .max_norm = 0,         \
     .norm_type = 2, .sparse = false}
/* tg_embedding with opts (NULL: TG_EMBEDDING_OPTS_INIT, tg_embedding). */
TG_API int tg_embedding_ex(tg_tensor **out, tg_tensor *weight, tg_tensor *indices,
                           const tg_embedding_opts *opts);
/* F.embedding_bag's reductions (its mode strings). */
typedef enum tg_embedding_bag_mode {
    TG_EMBEDDING_BAG_SUM = 0,
    TG_EMBEDDING_BAG_MEAN = 1,
    TG_EMBEDDING_BAG_MAX = 2,
} tg_embedding_bag_mode;
/* F.embedding_bag's options: mode (torch's default mean), padding_idx
 * (TG_EMBEDDING_NO_PADDING for none; negative counts from the end),
 * include_last_offset, and max_norm, norm_type, scale_grad_by_freq and
 * sparse as tg_embedding_opts's. */
typedef struct tg_embedding_bag_opts {
    tg_embedding_bag_mode mode;
    int64_t padding_idx;
    bool include_last_offset;
    double max_norm;
    double norm_type;
    bool scale_grad_by_freq;
    bool sparse;
} tg_embedding_bag_opts;
#define TG_EMBEDDING_BAG_OPTS_INIT                                                            \
    {.mode = TG_EMBEDDING_BAG_MEAN, .padding_idx = TG_EMBEDDING_NO_PADDING,                    \
     .include_last_offset = false, .max_norm = 0, .norm_type = 2,                             \
     .scale_grad_by_freq = false, .sparse = false}
/* F.embedding_bag(input, weight, offsets, ..., per_sample_weights, ...):
 * (num_bags, D), each bag's rows of weight (V, D, a float dtype) reduced
 * by opts->mode (opts NULL: TG_EMBEDDING_BAG_OPTS_INIT).  input holds i64
 * or i32 indices in [0, V): 1-d with offsets (1-d, input's dtype; bag b
 * covers positions [offsets[b], offsets[b+1]), the last bag to the end of
 * input, or with include_last_offset the offsets' last entry ends the last
 * bag and there is one bag fewer), or 2-d (B, L) with offsets NULL, bag b
 * its row b (include_last_offset is then refused: torch 1.13 drops the
 * last row, and its f64 backward corrupts memory).  offsets[0] is 0, offsets
 * do not decrease (torch does not check this) and end at most at input's
 * length.  Positions whose index is padding_idx are left out: they add
 * nothing, mean does not count them and max never picks them.  An empty
 * bag gives zeros.  sum adds the rows in input order, each times its
 * per_sample_weights entry when per_sample_weights (input's shape,
 * weight's dtype; sum only) is not NULL; mean divides the sum by the
 * bag's count; max takes each column's largest (the bag's first row, then
 * a greater one, as torch's scan).  Gradients of every order in weight and
 * per_sample_weights, torch's: g (over the count) added into each picked
 * row, or into each column's max row.  sparse (sum and mean): weight's
 * gradient is a sparse COO tensor with one row per kept position
 * (tg_embedding_opts's sparse).  max_norm > 0 renormalises, in place and
 * first, the rows input picks (tg_embedding_opts's).  *out receives a new
 * reference; on error it is untouched.  TG_EINVAL for a NULL out, weight
 * or input, a bad mode or padding_idx, offsets given with a 2-d input or
 * missing with a 1-d one, include_last_offset with a 2-d input, an index
 * or offset breaking the rules above,
 * per_sample_weights with mode mean or max, max with scale_grad_by_freq or
 * sparse, sparse with scale_grad_by_freq; TG_ESHAPE for weight not 2-d,
 * input not 1-d or 2-d (or (B, 0)), offsets not 1-d, per_sample_weights
 * not of input's shape; TG_EDTYPE for the dtypes. */
TG_API int tg_embedding_bag(tg_tensor **out, tg_tensor *weight, tg_tensor *input,
                            tg_tensor *offsets, tg_tensor *per_sample_weights,
                            const tg_embedding_bag_opts *opts);
/* ---- reductions ----
 * Float inputs give their own dtype (summed in double, rounded once); over
 * no elements a sum is 0 and a mean NaN, as in PyTorch.  An integer input's
 * sum is an exact int64 (wrapping on overflow), as torch's; its mean is
 * TG_EDTYPE (torch: "could not infer output dtype"). */
/* Sum/mean of all elements: a 0-d tensor. */
TG_API int tg_sum(tg_tensor **out, tg_tensor *a);
TG_API int tg_mean(tg_tensor **out, tg_tensor *a);
/* Over the listed dims (negative counts from the end, each at most once; a
 * 0-d tensor takes -1 and 0).  An empty list reduces no dim (the result
 * holds a's values), where PyTorch 1.13's dim=[] reduces every dim: use
 * tg_sum / tg_mean for that. */
TG_API int tg_sum_dims(tg_tensor **out, tg_tensor *a, int ndims, const int *dims, bool keepdim);
TG_API int tg_mean_dims(tg_tensor **out, tg_tensor *a, int ndims, const int *dims, bool keepdim);
/* Sums a broadcast gradient back to a shape that broadcasts to a's shape
 * (Tensor.sum_to_size); float dtypes only. */
TG_API int tg_sum_to_shape(tg_tensor **out, tg_tensor *a, int ndim, const int64_t *shape);

/* ---- maxima, minima and their indices ----
 * Any dtype (integers compared exactly); a row holding NaN has NaN as its
 * maximum and minimum, at the index of its first NaN, as in PyTorch.
 * Otherwise the index is that of the first element equal to the result.
 * Reducing a dim of extent 0 (or the whole of an empty tensor) is
 * TG_ESHAPE, as torch's "Expected reduction dim ... to have non-zero
 * size"; dims as in tg_sum_dims (a 0-d tensor takes -1 and 0). */
/* torch.max(x, dim, keepdim) / torch.min: the maxima along dim in *values
 * (x's dtype) and their indices in *indices (i64; NULL when not wanted),
 * dim dropped unless keepdim.  The gradient goes to the element at the
 * index; differentiable to any order. */
TG_API int tg_max_dim(tg_tensor **values, tg_tensor **indices, tg_tensor *x, int dim,
                      bool keepdim);
TG_API int tg_min_dim(tg_tensor **values, tg_tensor **indices, tg_tensor *x, int dim,
                      bool keepdim);
/* torch.argmax(x) / argmin(x): the flat (row-major) index of the whole
 * tensor's maximum, a 0-d i64. */
TG_API int tg_argmax(tg_tensor **out, tg_tensor *x);
TG_API int tg_argmin(tg_tensor **out, tg_tensor *x);
/* torch.argmax(x, dim, keepdim) / argmin: the indices of tg_max_dim. */
TG_API int tg_argmax_dim(tg_tensor **out, tg_tensor *x, int dim, bool keepdim);
TG_API int tg_argmin_dim(tg_tensor **out, tg_tensor *x, int dim, bool keepdim);
/* torch.amax(x, dims, keepdim) / amin over the listed dims (an empty list
 * reduces no dim, as tg_sum_dims).  The gradient is shared evenly by the
 * elements equal to their row's result, g / count at each (a NaN result's
 * row: NaN throughout), as torch's. */
TG_API int tg_amax_dims(tg_tensor **out, tg_tensor *x, int ndims, const int *dims, bool keepdim);
TG_API int tg_amin_dims(tg_tensor **out, tg_tensor *x, int ndims, const int *dims, bool keepdim);
/* torch.max(x) / torch.min(x): a 0-d result.  The gradient is shared
 * evenly by the elements equal to it, or by the NaNs when it is NaN
 * (torch's evenly_distribute_backward). */
TG_API int tg_max(tg_tensor **out, tg_tensor *x);
TG_API int tg_min(tg_tensor **out, tg_tensor *x);

/* ---- diagonals ----
 * torch.diagonal(x, offset, dim1, dim2): a view of the elements at index
 * i of dim1 and i + offset of dim2 (i - offset and i for a negative
 * offset), x's other dims first, in order, then the diagonal as the last
 * dim (length 0 when the offset is past the matrix).  x has 2 dims or
 * more; dims may be negative and must differ (TG_EINVAL otherwise).  The
 * gradient is g on that diagonal of zeros (diag_embed's op), to any order.
 * Any dtype. */
TG_API int tg_diagonal(tg_tensor **out, tg_tensor *x, int64_t offset, int dim1, int dim2);
/* torch.diag_embed(x, offset, dim1, dim2) (torch's defaults 0, -2, -1):
 * zeros of x's shape with the last dim n replaced by two dims of
 * n + |offset| at dim1 and dim2 of the result, x's last dim on that
 * diagonal.  The gradient is the diagonal of g. */
TG_API int tg_diag_embed(tg_tensor **out, tg_tensor *x, int64_t offset, int dim1, int dim2);
/* torch.diag(x, diagonal): of a vector, the square matrix with x on that
 * diagonal (tg_diag_embed with dims 0 and 1); of a matrix, a copy of that
 * diagonal (a vector).  TG_EINVAL for other ranks. */
TG_API int tg_diag(tg_tensor **out, tg_tensor *x, int64_t diagonal);
/* torch.trace(x): the sum of a matrix's diagonal, 0-d; TG_EINVAL unless x
 * is 2-d.  Summed as tg_sum: x's dtype for a float x, i64 for integers. */
TG_API int tg_trace(tg_tensor **out, tg_tensor *x);

/* ---- sorting and selection ----
 * torch.sort, argsort, topk, kthvalue, median and nanmedian along dim (a
 * 0-d x takes -1 and 0 and gives 0-d results).  Any dtype; indices are i64
 * positions along dim.  The order is torch's: ascending puts NaN after
 * every number, descending before; -0.0 equals 0.0; equal elements keep
 * their order in both directions (torch's stable=True, which its CPU sort
 * gives anyway).  Values are x's elements at the indices (x's dtype):
 * for a float x the gather of them, so the gradient goes to the elements
 * picked (dx = scatter_add(zeros, dim, indices, g)), differentiable to any
 * order; integers are not recorded.  Out-pointers: values or indices may
 * be NULL when not wanted, not both.  TG_EINVAL for a NULL x, a dim out of
 * range or k out of range, TG_ESHAPE for a kthvalue or median along a dim
 * of extent 0.  torch's topk, kthvalue and median pick among equal
 * elements by quickselect, so their index may be another of the equal
 * elements than the one here (the first in order); the values agree. */
/* torch.sort(x, dim, descending, stable=True): values and indices of x's
 * shape. */
TG_API int tg_sort(tg_tensor **values, tg_tensor **indices, tg_tensor *x, int dim,
                   bool descending);
/* torch.argsort(x, dim, descending): tg_sort's indices. */
TG_API int tg_argsort(tg_tensor **out, tg_tensor *x, int dim, bool descending);
/* torch.topk(x, k, dim, largest, sorted): the k largest (smallest when
 * !largest) along dim, k in [0, x.size(dim)], in order whatever sorted
 * says (torch's sorted=False allows any order).  NaN counts as the
 * largest. */
TG_API int tg_topk(tg_tensor **values, tg_tensor **indices, tg_tensor *x, int64_t k, int dim,
                   bool largest, bool sorted);
/* torch.kthvalue(x, k, dim, keepdim): the k-th smallest along dim, k in
 * [1, x.size(dim)] (NaN the largest); dim dropped unless keepdim. */
TG_API int tg_kthvalue(tg_tensor **values, tg_tensor **indices, tg_tensor *x, int64_t k,
                       int dim, bool keepdim);
/* torch.median(x, dim, keepdim): the lower median along dim, the
 * ((n - 1) / 2 + 1)-th smallest of n; NaN, at the index of the first NaN,
 * for a row holding one.  torch.nanmedian(x, dim, keepdim): the lower
 * median of the row's numbers, NaNs left out (NaN when all are). */
TG_API int tg_median_dim(tg_tensor **values, tg_tensor **indices, tg_tensor *x, int dim,
                         bool keepdim);
TG_API int tg_nanmedian_dim(tg_tensor **values, tg_tensor **indices, tg_tensor *x, int dim,
                            bool keepdim);
/* torch.median(x) / nanmedian(x): of every element, 0-d; NaN for an empty
 * float x (TG_ESHAPE for an empty integer one). */
TG_API int tg_median(tg_tensor **out, tg_tensor *x);
TG_API int tg_nanmedian(tg_tensor **out, tg_tensor *x);

/* ---- searching, counting, data-dependent shapes ----
 * None of these is recorded but tg_masked_select of a float x (their
 * results are positions and counts, as torch's, which has no derivative
 * for them either).  Results are new tensors; on error *out (and the
 * other out-pointers) are left as they were.  TG_EINVAL for a NULL
 * argument. */
/* torch.searchsorted(sorted_sequence, values, right=right,
 * out_int32=out_int32): for each value the index at which it would go
 * into its row of sorted_sequence (the first position after the elements
 * < v, or <= v when right), i64 (i32 with out_int32) of values' shape.
 * sorted_sequence is 1-d (one row for every value), or has values' ndim
 * and its leading dims (row r for the values of row r); TG_ESHAPE
 * otherwise, and for a 0-d sequence.  torch's binary search, so a NaN
 * value goes after every element, and the search moves right past a NaN
 * of the sequence that it probes (as torch's).  Any dtypes, compared in
 * torch.result_type's: with both of dims integers exactly, an integer
 * with a float in the float's dtype, two floats promoted; a 0-d values
 * takes the sequence's dtype unless it is a float against integers (an
 * i32 -1 against a u8 sequence is 255, as torch's). */
TG_API int tg_searchsorted(tg_tensor **out, tg_tensor *sorted_sequence, tg_tensor *values,
                           bool right, bool out_int32);
/* torch.searchsorted(sorted_sequence, values, right=right,
 * out_int32=out_int32, sorter=sorter): tg_searchsorted of the sequence
 * sorted_sequence.gather(-1, sorter), whose rows sorter's rows of indices
 * sort (sorted_sequence itself need not be sorted); the same probes as
 * torch's search of seq[sorter[mid]].  sorter is i64 (TG_EDTYPE) of
 * sorted_sequence's shape (TG_ESHAPE), each index in [0, n) for rows of n
 * elements (TG_EINVAL: torch 1.13 reads past the row); NULL is no sorter,
 * tg_searchsorted itself.  torch.argsort(seq) or tg_argsort makes one. */
TG_API int tg_searchsorted_sorter(tg_tensor **out, tg_tensor *sorted_sequence, tg_tensor *values,
                                  tg_tensor *sorter, bool right, bool out_int32);
/* torch.bucketize(x, boundaries, right=right, out_int32=out_int32):
 * tg_searchsorted(boundaries, x); boundaries must be 1-d (TG_ESHAPE). */
TG_API int tg_bucketize(tg_tensor **out, tg_tensor *x, tg_tensor *boundaries, bool right,
                        bool out_int32);
/* torch.unique(x, sorted=True, return_inverse, return_counts) over every
 * element (dim=None): values, 1-d in x's dtype, the distinct elements in
 * ascending order (the bits of the first of equal elements in x's order,
 * so one of -0.0 and 0.0); inverse (i64 of x's shape) the position in
 * values of each element; counts (1-d i64) how many elements each value
 * has.  Each NaN is a value of its own with count 0, and a NaN element's
 * inverse is 0, as torch 1.13's CPU kernel's.  With a NaN in an f32 or f64
 * x the values are in torch's order, that of its hash set then std::sort,
 * which the NaNs leave partly unsorted (up to 712697 distinct values;
 * beyond, and for bf16, the numbers ascending, then the NaNs).  torch
 * keeps a bf16 -0.0 and 0.0 apart or together by their hashes.
 * inverse and counts may be NULL (not wanted); values may not.  sorted is
 * ignored: the values are always in order.  Any dtype (torch 1.13 has no
 * f16 unique on the CPU). */
TG_API int tg_unique(tg_tensor **values, tg_tensor **inverse, tg_tensor **counts, tg_tensor *x,
                     bool sorted);
/* torch.unique_consecutive(x, return_inverse, return_counts) over every
 * element: the runs of equal elements of x in row-major order, each run
 * one value (its first element's bits); NaN equals nothing. */
TG_API int tg_unique_consecutive(tg_tensor **values, tg_tensor **inverse, tg_tensor **counts,
                                 tg_tensor *x);
/* torch.bincount(x, weights, minlength): x is 1-d of integers >= 0
 * (TG_EDTYPE for a float x, TG_ESHAPE for other ranks, TG_EINVAL naming a
 * negative element); out[v] counts the elements equal to v (i64), or sums
 * their weights (weights NULL or 1-d of x's length, TG_ESHAPE otherwise):
 * f32 weights in f32, any other dtype in f64, in x's order.  The length
 * is max(max(x) + 1, minlength) (minlength >= 0); an empty x gives
 * minlength i64 zeros, weights or not, as torch's. */
TG_API int tg_bincount(tg_tensor **out, tg_tensor *x, tg_tensor *weights, int64_t minlength);
/* torch.histc(x, bins, min, max): counts of x's elements (every element,
 * any shape; a float dtype, TG_EDTYPE otherwise) in bins (> 0) equal
 * bins over [min, max], x's dtype.  min == max means x's range (and
 * [v - 1, v + 1] when that is one value v); TG_EINVAL when the range is
 * not finite (a NaN in x then) or max < min.  Elements outside the range
 * are left out, max falls in the last bin; the bin is torch's
 * (int)((v - min) * bins / (max - min)) computed in x's dtype, the counts
 * added in it too (so bf16 counts stop at 256).  torch 1.13's bf16 kernel
 * puts a few elements next to a bin edge into the neighbouring bin, and
 * has no f16 one.  NaN elements are left out (torch 1.13 reads a bin
 * through an undefined conversion for them). */
TG_API int tg_histc(tg_tensor **out, tg_tensor *x, int64_t bins, double min, double max);
/* torch.nonzero(x) and torch.argwhere(x): the indices of x's nonzero
 * elements (NaN is nonzero, -0.0 is not) in row-major order, i64 (count,
 * ndim): (1, 0) or (0, 0) for a 0-d x.  Any dtype. */
TG_API int tg_nonzero(tg_tensor **out, tg_tensor *x);
TG_API int tg_argwhere(tg_tensor **out, tg_tensor *x);
/* torch.masked_select(x, mask): the elements of x where mask is nonzero,
 * x and mask broadcast together (TG_ESHAPE otherwise), in row-major order,
 * 1-d of x's dtype.  mask is u8 (torch's bool; TG_EDTYPE otherwise).  A
 * float x's gradient puts g back at the selected places (an index_add into
 * zeros, summed over the dims x was broadcast along), differentiable to
 * any order; any dtype. */
TG_API int tg_masked_select(tg_tensor **out, tg_tensor *x, tg_tensor *mask);

/* ---- variance and standard deviation ----
 * torch.var(x, dims, correction=c, keepdim) and torch.std: with N the
 * number of elements each result reduces, var = sum((x - mean)^2) /
 * max(0, N - c) and std = sqrt(var).  c = 1 is torch 1.13's default
 * (unbiased=True), c = 0 its unbiased=False.  N - c <= 0 gives inf, or NaN
 * where the elements are all equal (NaN for no elements), as torch.  Float
 * dtypes (TG_EDTYPE otherwise), computed in double and rounded once; dims
 * as in tg_sum_dims (an empty list reduces no dim).  Gradients as torch's
 * (std's is 0 where std is 0), differentiable to any order; the FP32 AMP
 * policy, as tg_mean.  tg_var / tg_std reduce every element to a 0-d
 * result (torch.var(x)). */
TG_API int tg_var_dims(tg_tensor **out, tg_tensor *x, int ndims, const int *dims,
                       int64_t correction, bool keepdim);
TG_API int tg_std_dims(tg_tensor **out, tg_tensor *x, int ndims, const int *dims,
                       int64_t correction, bool keepdim);
TG_API int tg_var(tg_tensor **out, tg_tensor *x, int64_t correction);
TG_API int tg_std(tg_tensor **out, tg_tensor *x, int64_t correction);

/* ---- covariance and correlation ----
 * torch.cov(x, correction, fweights, aweights): the covariance of x's rows
 * (V variables by N observations; 1-d or 0-d x: one variable), (V, V), or
 * 0-d for one variable (torch's squeeze).  fweights (integral, N) and
 * aweights (float, N) weight the observations (NULL: none; borrowed; each
 * non-negative, N of them, one or fewer dims, else TG_EINVAL / TG_EDTYPE /
 * TG_ESHAPE with torch's words; weights summing to 0 are TG_EINVAL); with w
 * their product, the mean is sum(x w) / sum(w) and the divisor sum(w) - c
 * (with aweights: sum(w) - c sum(w aweights) / sum(w)), 0 when not above
 * it (inf or NaN, as torch's, without its warning).  Integer x is taken in
 * f32; weights in x's dtype.  torch.corrcoef(x): cov(x) / (s s^T), s the
 * standard deviations, clamped to [-1, 1]; one variable gives cov / cov.
 * Each returns a new reference; x of more than two dims is TG_ESHAPE.
 * Made of differentiable ops: gradients (x, aweights) of any order. */
TG_API int tg_cov(tg_tensor **out, tg_tensor *x, int64_t correction, tg_tensor *fweights,
                  tg_tensor *aweights);
TG_API int tg_corrcoef(tg_tensor **out, tg_tensor *x);

/* ---- vector norms ----
 * torch.linalg.vector_norm(x, ord, dims, keepdim): (sum |x|^ord)^(1/ord)
 * over the listed dims (as in tg_sum_dims), or over every element when
 * ndims is 0 (torch's dim=None; 1.13's dim=[] too).  ord 2 is the
 * Euclidean norm, 1 the sum of |x|, INFINITY / -INFINITY the largest /
 * smallest |x|, 0 the number of non-zero elements, any other ord (negative
 * too) the formula; NaN ord is TG_EINVAL.  Over no elements the norm is 0,
 * but for ord < 0 and the inf-norms, which have no identity: TG_ESHAPE, as
 * torch.  Float dtypes only (TG_EDTYPE otherwise, as torch),
 * computed in double and rounded once to x's dtype, so squares beyond f32's
 * range do not overflow (torch's f32 kernel gives inf there); a NaN element
 * gives NaN.  Gradients as torch's, 0 for a row of zeros (ord > 0) and
 * shared evenly by the largest |x| for ord inf; differentiable to any order
 * (a WGAN-GP penalty on the norm of a gradient).  The FP32 AMP policy, as
 * tg_sum and tg_var: inside an autocast scope a half x gives an f32 norm. */
TG_API int tg_vector_norm(tg_tensor **out, tg_tensor *x, double ord, int ndims, const int *dims,
                          bool keepdim);

/* ---- weight normalization ----
 * torch._weight_norm(v, g, dim): w = v * (g / ||v||), ||v|| the Euclidean
 * norm over every dim of v except dim (torch.norm_except_dim(v, 2, dim)),
 * which tg_norm_except_dim gives: shape (1, .., v.size(dim), .., 1), v's
 * rank with v's extent at dim (a 1-d v: |v|, element by element).  dim -1
 * is the norm of the whole tensor, 0-d (torch's dim=None); dim in
 * [-ndim, -2] counts from the end, as torch's; outside [-ndim, ndim) and
 * not -1: TG_EINVAL.  g has norm_except_dim's shape (g = that norm
 * reproduces v), or any shape that broadcasts to v's without changing it
 * (TG_ESHAPE otherwise); v and g are float tensors of one dtype
 * (TG_EDTYPE).  Made of tg_vector_norm, tg_div and tg_mul in torch's
 * order, so gradients of every order are torch's; a v of zeros along a
 * slice gives NaN there (0 / 0), as torch.  *out is a new reference; on
 * error it is untouched.  tg_nn_weight_norm (nn.h) applies this to a
 * module's weight at every forward. */
TG_API int tg_weight_norm(tg_tensor **out, tg_tensor *v, tg_tensor *g, int dim);
TG_API int tg_norm_except_dim(tg_tensor **out, tg_tensor *v, int dim);

/* ---- log-sum-exp ----
 * torch.logsumexp(x, dims, keepdim): log(sum(exp(x))) over the listed dims
 * (as in tg_sum_dims), or over every element when ndims is 0 (as
 * tg_vector_norm).  *out is a new reference of x's dtype.  Computed in
 * double, shifted by each row's largest element so that large values do
 * not overflow, and rounded once.  torch's edges: a row of -inf gives
 * -inf, a row holding +inf gives +inf, a NaN gives NaN, a row of no
 * elements gives -inf.  The gradient g * exp(x - y) is torch's (NaN in a
 * row of -inf and at a +inf element, as torch's) and differentiable to any
 * order.  An integer x gives f32, as torch 1.13's: logsumexp of x
 * converted to f32, not recorded.  A dim out of range or
 * named twice, or dims NULL with ndims > 0, is TG_EINVAL.  The FP32 AMP
 * policy, as tg_vector_norm: inside an autocast scope a half x gives an
 * f32 result. */
TG_API int tg_logsumexp(tg_tensor **out, tg_tensor *x, int ndims, const int *dims,
                        bool keepdim);

/* ---- shape ops: views where the layout allows, no copy ---- */
/* One extent may be -1 (inferred).  Copies only when a is not viewable. */
TG_API int tg_reshape(tg_tensor **out, tg_tensor *a, int ndim, const int64_t *shape);
TG_API int tg_permute(tg_tensor **out, tg_tensor *a, const int *perm);
TG_API int tg_transpose(tg_tensor **out, tg_tensor *a, int dim0, int dim1);
/* Elements start, start+step, ... < end of dim (Python slice rules for
 * negative start/end; step >= 1). */
TG_API int tg_slice(tg_tensor **out, tg_tensor *a, int dim, int64_t start, int64_t end, int64_t step);
/* Broadcasts a to shape (a view with stride 0 on stretched dims), as
 * Tensor.expand: new leading dims may be added (extent >= 0), an extent of 1
 * may stretch to any extent >= 0 (0 included), -1 keeps a's extent (not in a
 * new leading dim: TG_ESHAPE), and a's other extents must stay (TG_ESHAPE).
 * An extent below -1 is TG_EINVAL.  Its gradient sums over the stretched
 * dims. */
TG_API int tg_expand(tg_tensor **out, tg_tensor *a, int ndim, const int64_t *shape);
/* A view with a new dim of extent 1 before dim of a; dim is in
 * [-ndim-1, ndim] (ndim appends, a negative dim counts from the end of the
 * result), as torch.unsqueeze. */
TG_API int tg_unsqueeze(tg_tensor **out, tg_tensor *a, int dim);
/* A view without dim when its extent is 1; otherwise a view of a unchanged
 * (PyTorch's no-op, not an error).  dim is in [-ndim, ndim) (a 0-d tensor
 * takes -1 and 0 and stays 0-d). */
TG_API int tg_squeeze(tg_tensor **out, tg_tensor *a, int dim);
/* torch.narrow(x, dim, start, length): a view of length elements of dim
 * from start (a negative start counts from the end: in [-extent, extent]),
 * tg_slice's view.  TG_EINVAL for a 0-d x, a dim out of range, or a length
 * below 0 or past the end. */
TG_API int tg_narrow(tg_tensor **out, tg_tensor *x, int dim, int64_t start, int64_t length);
/* torch.movedim(x, source, destination) with n dims each: a view (a
 * permute) with dim source[i] at destination[i] and the other dims in their
 * order in the places left.  Dims may be negative; each list names a dim at
 * most once (TG_EINVAL).  A 0-d x takes -1 and 0 and is returned as it is. */
TG_API int tg_movedim(tg_tensor **out, tg_tensor *x, int n, const int *source,
                      const int *destination);
/* torch.flatten(x, start_dim, end_dim) (torch's defaults 0, -1): dims
 * start..end as one (tg_reshape: a view where the layout allows); a 0-d x
 * becomes (1).  TG_EINVAL for dims out of range or start after end. */
TG_API int tg_flatten(tg_tensor **out, tg_tensor *x, int start_dim, int end_dim);
/* torch.unflatten(x, dim, sizes) with n sizes: dim as the n dims of sizes,
 * one of which may be -1 (inferred); their product must be dim's extent
 * (TG_ESHAPE).  tg_reshape: a view where the layout allows.  TG_EINVAL for a
 * 0-d x, a dim out of range, n < 1, a size below -1 or two -1s. */
TG_API int tg_unflatten(tg_tensor **out, tg_tensor *x, int dim, int n, const int64_t *sizes);
/* A contiguous tensor with a's elements (a itself, retained, when already so). */
TG_API int tg_contiguous(tg_tensor **out, tg_tensor *a);
/* Concatenates n tensors of equal shape but for dim (a copy, even for n = 1).
 * Mixed dtypes promote as torch.cat: floats to the widest (through recorded
 * casts, so each gradient comes back in its input's dtype; the PROMOTE
 * policy, also under autocast, as cat is on torch's autocast promote list),
 * a float wins over integers, integers to the widest signed one (u8 with i8
 * would be i16, which tapegrad lacks: TG_EDTYPE).  0-d inputs are TG_EINVAL.
 * Every input must have the same ndim: PyTorch 1.13's legacy rule that
 * skips a 1-d input of shape (0,) beside inputs of other ndims
 * (torch.cat([torch.zeros(0), x])) is not followed, it is TG_ESHAPE here. */
TG_API int tg_cat(tg_tensor **out, int n, tg_tensor *const *ts, int dim);
/* Joins n >= 1 tensors of one shape along a new dim (torch.stack): dim in
 * [-ndim-1, ndim] (ndim appends; negative counts from the end of the
 * result), the result (..., n, ...) has ts[i] at index i of dim.  Mixed
 * dtypes promote as tg_cat; 0-d inputs give a 1-d result.  Each input's
 * gradient is its slice of g; differentiable to any order. */
TG_API int tg_stack(tg_tensor **out, int n, tg_tensor *const *ts, int dim);
/* Cutting a tensor into pieces along dim (negative counts from the end),
 * as torch.split, torch.chunk and torch.unbind.  Each piece is a view of x
 * (tg_slice), a new reference in outs[i], and gets its part of x's gradient,
 * to any order.  x needs at least 1 dim (TG_ESHAPE).  On error outs is left
 * as it was and no piece is made.
 * tg_split: n >= 1 pieces of sizes[0..n) (each >= 0), which must sum to
 * dim's extent (TG_EINVAL naming the sizes otherwise).
 * tg_split_size, tg_chunk, tg_unbind: the number of pieces follows from x,
 * so outs has room for cap of them and *n_out is set to the number made;
 * outs NULL only sets *n_out (ask first, then allocate).  cap below the
 * count is TG_EINVAL naming both.
 * tg_split_size: pieces of split_size along dim, the last one smaller:
 * max(ceil(D / split_size), 1) of them for an extent D; split_size > 0,
 * or 0 for D = 0 (one empty piece), as torch.
 * tg_chunk: chunks >= 1; pieces of ceil(D / chunks), so there may be fewer
 * than chunks (6 in 4 chunks: 3 pieces of 2), as torch.chunk; D = 0 gives
 * chunks empty pieces.
 * tg_unbind: D pieces of x with dim removed (x[.., i, ..]); none for D = 0. */
TG_API int tg_split(tg_tensor **outs, int n, tg_tensor *x, const int64_t *sizes, int dim);
TG_API int tg_split_size(tg_tensor **outs, int cap, int *n_out, tg_tensor *x,
                         int64_t split_size, int dim);
TG_API int tg_chunk(tg_tensor **outs, int cap, int *n_out, tg_tensor *x, int chunks, int dim);
TG_API int tg_unbind(tg_tensor **outs, int cap, int *n_out, tg_tensor *x, int dim);
/* torch.flip(x, dims): x with its elements along each of dims[0..ndims) in
 * reverse order, a new contiguous tensor of x's dtype (integers too);
 * differentiable to any order (the gradient is g flipped the same way).
 * dims may be negative (from the end); ndims 0 copies x; a 0-d x takes
 * dim 0 or -1, as torch's.  TG_EINVAL for a NULL out or x, dims NULL with
 * ndims > 0, ndims outside [0, TG_MAX_DIMS], a dim out of range or one
 * given twice. */
TG_API int tg_flip(tg_tensor **out, tg_tensor *x, int ndims, const int *dims);
/* torch.cumsum(x, dim): the running sums of x along dim (negative counts
 * from the end; a 0-d x takes 0 or -1 and gives its value), a new
 * contiguous tensor of x's shape.  A float x gives its own dtype: each
 * element is summed in double and rounded once (torch's f32 and bf16 sums
 * run in their own precision, so its low bits differ on long lines).  An
 * integer x gives an int64 result, as torch's promotion, summed exactly and
 * wrapping on overflow (not differentiable).  The gradient is the reversed
 * running sum of g (flip, cumsum, flip), differentiable to any order.  The
 * FP32 AMP policy, as tg_sum: inside an autocast scope a half x gives an
 * f32 result.  TG_EINVAL for a NULL out or x or a dim out of range. */
TG_API int tg_cumsum(tg_tensor **out, tg_tensor *x, int dim);
/* ---- products and running reductions ----
 * Along dim (negative counts from the end; a 0-d x takes 0 or -1), each a
 * new contiguous tensor; a float x's results are computed in double and
 * rounded once to x's dtype.  TG_EINVAL for a NULL out or x or a dim out
 * of range; on error nothing is changed.
 * torch.prod(x) and torch.prod(x, dim, keepdim): the product of every
 * element (0-d) or of each line along dim (dim kept as 1 or removed); 1
 * for no elements.  An integer x gives an int64 result, wrapping on
 * overflow, as torch's promotion (not differentiable).  The gradient is
 * g times the product of the other elements of the line, exact when x
 * holds zeros (built from exclusive running products: no division),
 * differentiable to any order.  The FP32 AMP policy, as tg_sum. */
TG_API int tg_prod(tg_tensor **out, tg_tensor *x);
TG_API int tg_prod_dim(tg_tensor **out, tg_tensor *x, int dim, bool keepdim);
/* torch.cumprod(x, dim): the running products, of x's shape; int64 for an
 * integer x (wrapping, not differentiable).  The gradient is
 * dx[j] = sum_{k >= j} g[k] prod_{i <= k, i != j} x[i]: through a division
 * by x when x has no zero; with a zero, a loop per line without division
 * (O(D)), or, when the graph is kept (create_graph), a D x D matrix of
 * products per line (O(D^2) time and memory, as torch's exact path);
 * exact and differentiable to any order.  The FP32 AMP policy, as
 * tg_cumsum. */
TG_API int tg_cumprod(tg_tensor **out, tg_tensor *x, int dim);
/* torch.cummax(x, dim) / torch.cummin: the running maximum (minimum) and
 * its i64 index along dim, both of x's shape, any dtype.  As torch's CPU
 * kernels: among equal elements the later index is taken (-0.0 and 0.0
 * are equal), and a NaN is taken when met and kept until the next NaN.
 * The values are gather(x, dim, indices), so the gradient goes to the
 * elements picked (scatter_add of g), differentiable to any order.  values
 * or indices may be NULL when not wanted, not both (TG_EINVAL). */
TG_API int tg_cummax(tg_tensor **values, tg_tensor **indices, tg_tensor *x, int dim);
TG_API int tg_cummin(tg_tensor **values, tg_tensor **indices, tg_tensor *x, int dim);
/* torch.logcumsumexp(x, dim): y[k] = log(sum_{j <= k} exp(x[j])), of x's
 * shape and float dtype (TG_EDTYPE for an integer x), run with torch's
 * stable log-add-exp (-inf elements add nothing).  The gradient is torch's
 * formula, sum_{k >= j} g[k] exp(x[j] - y[k]) taken in logs by g's sign,
 * differentiable to any order; as torch's it is NaN at an x[j] of +inf and
 * at an x[j] of -inf with no finite element before it. */
TG_API int tg_logcumsumexp(tg_tensor **out, tg_tensor *x, int dim);
/* torch.roll(x, shifts, dims): x with its elements moved shifts[i] places
 * along dims[i] for i < n, those pushed past the end coming back at the
 * start (negative shifts move the other way; any int64 shift, taken mod
 * the extent; a dim named twice moves by the sum of its shifts).  n = 0
 * (dims may then be NULL) is torch's roll without dims: the flattened x
 * moved by shifts[0], its shape kept.  A new contiguous tensor of x's dtype
 * (integers too); differentiable to any order (the gradient is g rolled
 * back).  A 0-d x takes only n = 0, as torch.  TG_EINVAL for a NULL out, x
 * or shifts, n outside [0, TG_MAX_DIMS], dims NULL with n > 0, or a dim
 * out of range. */
TG_API int tg_roll(tg_tensor **out, tg_tensor *x, int n, const int64_t *shifts, const int *dims);
/* Tensor.repeat(repeats): x tiled repeats[i] times along dim i, i < n, x's
 * shape first padded with leading 1s to n dims (n may exceed x's ndim, as
 * torch; not fall short of it); the result has extents repeats[i] times
 * the padded ones.  A new contiguous tensor of x's dtype (integers too),
 * also when every repeat is 1, as torch's.  Made of tg_reshape, tg_expand
 * and the copy of the last reshape, so the gradient (the sum of g's tiles)
 * is differentiable to any order.  n 0 copies a 0-d x.  TG_EINVAL for a
 * NULL out or x, repeats NULL with n > 0, n outside [x's ndim,
 * TG_MAX_DIMS], a negative repeat, or a result whose extents or bytes
 * overflow int64. */
TG_API int tg_repeat(tg_tensor **out, tg_tensor *x, int n, const int64_t *repeats);
/* Indexing along one dim, each returning a new reference (a new contiguous
 * tensor of x's dtype); x and src are of one dtype, any of them (float or
 * integer; another src dtype is TG_EDTYPE, as torch's), index is i64
 * (else TG_EDTYPE).  dim may be negative (from the
 * end); a 0-d x takes dim 0 or -1.  An index value outside
 * [0, x.size(dim)) is TG_EINVAL naming its position, its value and the
 * extent ("gather: index[1, 0]=7 is out of range for dim 1 of extent 5").
 * gather and index_select copy bits, as torch's: a NaN keeps its payload
 * and a signalling NaN stays signalling.  Repeated indices add up in the
 * index's row-major order (deterministic, whatever the thread count): f32
 * and f64 sums round at each term in their own dtype, as torch's; f16 and
 * bf16 too, each term added in f32 and the sum rounded to x's dtype, as
 * torch's (so 4097 ones added to an f16 0.5 stall at 2048); integer sums
 * wrap modulo 2^bits, as torch's (an i8 120 plus 100 and 100 is 64).  x
 * and src may have any strides.  Differentiable to any order in float x
 * and src; an integer result is not recorded (no gradient, as torch's);
 * the index gets no gradient.  AMP policy keep: they run in x's dtype inside autocast too,
 * and a src of another dtype stays TG_EDTYPE there (torch's CUDA autocast
 * promotes scatter_add's inputs; cast src first).  TG_EINVAL for a NULL
 * out, x, index or src or a dim out of range; TG_ESHAPE for the shape
 * rules below.
 *
 * torch.gather(x, dim, index): out has index's shape, which has x's ndim
 * with index.size(d) <= x.size(d) for d != dim, and (dim = 1)
 * out[i][j][k] = x[i][index[i][j][k]][k].  dx = scatter_add(zeros_like(x),
 * dim, index, g). */
TG_API int tg_gather(tg_tensor **out, tg_tensor *x, int dim, tg_tensor *index);
/* torch.scatter_add(x, dim, index, src), out of place: out = x with
 * out[i][index[i][j][k]][k] += src[i][j][k] (dim = 1), index as tg_gather's
 * and src of index's shape (torch also takes a larger src and reads its
 * leading part; here that is TG_ESHAPE).  dx = g, dsrc = gather(g, dim,
 * index). */
TG_API int tg_scatter_add(tg_tensor **out, tg_tensor *x, int dim, tg_tensor *index,
                          tg_tensor *src);
/* torch.index_select(x, dim, index): index 1-d (or 0-d, one value) of L
 * values; out is x's shape with L at dim, out[i][j][k] = x[i][index[j]][k]
 * (dim = 1).  A 0-d x takes an index of one value and gives a 0-d result
 * (torch gives 0-d for any number of values; other numbers are TG_ESHAPE
 * here).  dx = index_add(zeros_like(x), dim, index, g). */
TG_API int tg_index_select(tg_tensor **out, tg_tensor *x, int dim, tg_tensor *index);
/* torch.index_add(x, dim, index, src) with alpha 1, out of place: index as
 * tg_index_select's, src of x's shape with L at dim, out = x with
 * out[i][index[j]][k] += src[i][j][k] (dim = 1).  dx = g,
 * dsrc = index_select(g, dim, index). */
TG_API int tg_index_add(tg_tensor **out, tg_tensor *x, int dim, tg_tensor *index,
                        tg_tensor *src);
/* F.pixel_shuffle(x, r): x (*, C*r*r, H, W) -> (*, C, H*r, W*r), output
 * channel c at (h*r + i, w*r + j) being input channel c*r*r + i*r + j at
 * (h, w); tg_pixel_unshuffle is its inverse, (*, C, H*r, W*r) -> (*, C*r*r,
 * H, W).  Any dtype; x has at least 3 dims (TG_ESHAPE), r is in [1, 2^31]
 * (TG_EINVAL), the channels a multiple of r*r (shuffle) or H and W
 * multiples of r (unshuffle) (TG_ESHAPE).  A copy, made of reshape and
 * permute, so differentiable to any order. */
TG_API int tg_pixel_shuffle(tg_tensor **out, tg_tensor *x, int64_t r);
TG_API int tg_pixel_unshuffle(tg_tensor **out, tg_tensor *x, int64_t r);
/* F.channel_shuffle(x, groups) (nn.ChannelShuffle): x (N, C, *) with its
 * channels in groups groups read as (N, groups, C/groups, *) and
 * transposed to (N, C/groups, groups, *): output channel i * groups + j is
 * input channel j * (C / groups) + i.  Any dtype; a copy made of reshape
 * and transpose, so differentiable to any order.  TG_EINVAL for a NULL out
 * or x or groups < 1; TG_ESHAPE for fewer than 3 dims or channels not
 * divisible by groups (torch's rules). */
TG_API int tg_channel_shuffle(tg_tensor **out, tg_tensor *x, int64_t groups);
/* Converts to dtype dt; the gradient is converted back to a's dtype. */
TG_API int tg_to_dtype(tg_tensor **out, tg_tensor *a, tg_dtype dt);

/* ---- linear algebra through OpenBLAS ---- */
/* torch.matmul(a, b): (M, K) x (K, N) -> (M, N); a 1-d a is a row (1, K)
 * and a 1-d b a column (K, 1), the added dim removed from the result (1-d x
 * 1-d is the dot product, 0-d); the dims before the last two are batch
 * dims, broadcast together as NumPy's: (2, 1, 3, 4) x (5, 4, 6) -> (2, 5, 3,
 * 6).  When b is at most 2-d, a's leading dims fold into the rows of one
 * gemm.  Float dtypes, both the same outside autocast (TG_EDTYPE naming
 * both, as torch's "expected scalar type"); inside, AMP policy lower
 * precision casts them first, but never f64, so f64 beside another float
 * dtype is TG_EDTYPE there too, as torch.  Differentiable to any order;
 * each gradient is summed over the batch dims its operand was broadcast
 * along.  TG_EINVAL for a NULL argument or a 0-d operand, TG_ESHAPE for
 * inner dims that differ or batch dims that do not broadcast. */
TG_API int tg_matmul(tg_tensor **out, tg_tensor *a, tg_tensor *b);
/* torch's fixed-rank products, each the checks below in front of
 * tg_matmul (so differentiable to any order, AMP policy lower precision):
 * float operands of one dtype (TG_EDTYPE; inside autocast tg_mm and tg_bmm
 * take mixed ones, cast as tg_matmul's, as torch's lower_precision_fp
 * list; tg_mv and tg_dot do not, and run in their operands' dtype there),
 * ranks as listed (TG_EINVAL), contracted extents that match (TG_ESHAPE).
 * On error *out is untouched.
 * tg_mm: (n, m) x (m, p) -> (n, p).  tg_bmm: (B, n, m) x (B, m, p) ->
 * (B, n, p), the batch sizes equal (no broadcasting, as torch).  tg_mv:
 * (n, m) x (m) -> (n).  tg_dot: (n) . (n) -> 0-d.  tg_outer: (n) x (m) ->
 * (n, m), a[i] * b[j] (torch.outer, through tg_mul, whose dtype rule it
 * has: mixed dtypes promote, f32 with f64 giving f64). */
TG_API int tg_mm(tg_tensor **out, tg_tensor *a, tg_tensor *b);
TG_API int tg_bmm(tg_tensor **out, tg_tensor *a, tg_tensor *b);
TG_API int tg_mv(tg_tensor **out, tg_tensor *a, tg_tensor *v);
TG_API int tg_dot(tg_tensor **out, tg_tensor *a, tg_tensor *b);
TG_API int tg_outer(tg_tensor **out, tg_tensor *a, tg_tensor *b);
/* torch.tensordot(a, b, dims): the sum over n pairs of dims, dims_a[i] of
 * a against dims_b[i] of b (both NULL: a's last n against b's first n, as
 * tensordot(a, b, n)), the result a's other dims then b's.  One tg_mm on
 * the operands permuted and folded to matrices (m, k) and (k, p), so
 * differentiable to any order, with tg_mm's dtype rule: float operands of
 * one dtype outside autocast, inside it any float dtypes (in the scope's)
 * with f64 only beside f64 (TG_EDTYPE).  Integer operands of one dtype
 * (TG_EDTYPE otherwise, also beside a float) give that dtype, wrapping
 * modulo 2^bits as torch's, through an (m, k, p) product (not recorded).
 * Contracted extents that match (TG_ESHAPE), each dim named at most once
 * (TG_EINVAL). */
TG_API int tg_tensordot(tg_tensor **out, tg_tensor *a, tg_tensor *b, int n, const int *dims_a,
                        const int *dims_b);
/* torch.kron(a, b): the Kronecker product, the ranks first padded with
 * leading 1s to the larger one; extent a_i b_i in each dim, entry
 * a[i / b.shape] b[i % b.shape].  tg_mul of interleaved views (past 4
 * dims of expanded copies): any dtype and rank, mixed dtypes promote,
 * differentiable to any order. */
TG_API int tg_kron(tg_tensor **out, tg_tensor *a, tg_tensor *b);
/* torch.linalg.cross(a, b, dim) (torch's default dim -1): the 3-vector
 * cross product along dim, of extent 3 in both (TG_ESHAPE); the operands
 * have the same number of dims and one dtype (TG_EDTYPE) and broadcast
 * elsewhere.  Entry k is a[k+1] b[k+2] - a[k+2] b[k+1] (indices mod 3),
 * made of tg_roll, tg_mul and tg_sub: differentiable to any order. */
TG_API int tg_cross(tg_tensor **out, tg_tensor *a, tg_tensor *b, int dim);
/* torch.addmm(input, m1, m2, beta=, alpha=): beta * input + alpha * (m1 @
 * m2) for m1 (n, m), m2 (m, p); tg_baddbmm the same for b1 (B, n, m), b2
 * (B, m, p).  input has the operands' dtype (tg_addmm outside autocast:
 * TG_EDTYPE otherwise, as torch's "self and mat2 must have the same
 * dtype"; tg_baddbmm, and tg_addmm inside autocast, cast an input of
 * another float dtype to the product's, as torch) and broadcasts to the
 * product's shape (TG_ESHAPE otherwise; the result never takes a larger
 * shape from input).  beta = 0 leaves input's values out, its NaN and
 * infinities too, while an input that requires grad still gets a
 * gradient, of zeros of its shape, as torch's (differentiable to any
 * order).  Checks and errors as tg_mm / tg_bmm. */
TG_API int tg_addmm(tg_tensor **out, tg_tensor *input, tg_tensor *m1, tg_tensor *m2, double beta,
                    double alpha);
TG_API int tg_baddbmm(tg_tensor **out, tg_tensor *input, tg_tensor *b1, tg_tensor *b2,
                      double beta, double alpha);
/* torch.tril(x, diagonal) / torch.triu(x, diagonal): x (any dtype, at
 * least 2 dims, TG_ESHAPE otherwise) with the elements of each matrix in
 * its last two dims above (tril) or below (triu) the given diagonal set to
 * 0: tril keeps (i, j) with j - i <= diagonal, triu those with j - i >=
 * diagonal; diagonal 0 is the main one, positive above it.  A copy; the
 * gradient is g masked the same way, differentiable to any order. */
TG_API int tg_tril(tg_tensor **out, tg_tensor *x, int64_t diagonal);
TG_API int tg_triu(tg_tensor **out, tg_tensor *x, int64_t diagonal);
/* torch.einsum(equation, operands): n (1 to TG_OP_MAX_INPUTS) float
 * operands of one dtype, each labelled by its term of the equation, one
 * letter (a-z, A-Z) per dim, terms separated by ',', then an optional
 * "->" and the output's letters (without it: the letters used once, in
 * ASCII order, as torch).  Letters absent from the output are summed over;
 * a letter's extents must match across operands or be 1 (broadcast).
 * "..." in a term stands for the dims the letters leave, broadcast across
 * operands (right-aligned) and placed where the output's "..." is (first,
 * in an implicit output; summed when an explicit output has none).  A
 * letter repeated within one term takes the diagonal ("ii->i", "ii" the
 * trace; tg_diagonal's view, no extra operand).  Up to the 52 letters in
 * an equation, at most TG_MAX_DIMS in a term.  Spaces are ignored.
 * Operands are contracted a pair at a time, each pair by permute, reshape
 * and one batched matmul, so the result is differentiable to any order;
 * the order of the pairs is the cheapest (tg_einsum_path's TG_EINSUM_AUTO:
 * as torch.einsum with opt_einsum, the same values up to rounding).
 * TG_EINVAL for a malformed equation (the message names the rule), a
 * term count other than n, a term whose letters do not match its
 * operand's rank or more than TG_MAX_DIMS letters in a term; TG_ESHAPE for
 * extents that differ; TG_EDTYPE for dtypes; TG_EUNSUPPORTED when an intermediate
 * product would need more than TG_MAX_DIMS dims.  On error *out is
 * untouched. */
TG_API int tg_einsum(tg_tensor **out, const char *equation, int n, tg_tensor *const *operands);

/* Contraction plans for einsum (numpy.einsum_path, torch's opt_einsum).
 * The operands of a plan are einsum's operands, each first reduced to its
 * diagonals (a letter repeated in its term) and summed over the letters
 * no other operand and not the output has.  Step s multiplies the operands
 * at positions steps[s][0] (left) and [1] (right) of the list, which both
 * leave; their product joins the list at its end, with the labels still
 * needed (summing the others), as numpy.einsum_path's contraction list. */
#define TG_EINSUM_MAX_OPERANDS 8   /* TG_OP_MAX_INPUTS */
/* The most operands TG_EINSUM_AUTO searches exhaustively, and the most
 * that TG_EINSUM_OPTIMAL takes (it looks at 3^n / 2 pairs of halves). */
#define TG_EINSUM_AUTO_OPTIMAL_MAX 10
#define TG_EINSUM_OPTIMAL_MAX 14
typedef enum tg_einsum_strategy {
    TG_EINSUM_AUTO,           /* OPTIMAL up to TG_EINSUM_AUTO_OPTIMAL_MAX, then GREEDY */
    TG_EINSUM_OPTIMAL,        /* the cheapest of every pairing (dynamic programming) */
    TG_EINSUM_GREEDY,         /* the cheapest pair of the list, again and again */
    TG_EINSUM_LEFT_TO_RIGHT,  /* ((op0 op1) op2) ...: torch.einsum without opt_einsum */
} tg_einsum_strategy;
typedef struct tg_einsum_plan {
    int n_operands;   /* einsum's operands */
    int n_steps;      /* n_operands - 1 */
    int steps[TG_EINSUM_MAX_OPERANDS - 1][2];
    /* Multiply-adds of the products (each the product of the extents of
     * every label of its pair), this plan's and LEFT_TO_RIGHT's (INFINITY
     * when that order needs an intermediate of more than TG_MAX_DIMS dims),
     * and the elements of the largest product. */
    double cost, left_to_right_cost, largest;
} tg_einsum_plan;
/* *plan for einsum(equation, operands) by strategy; the operands' dtypes
 * and shapes are checked as by tg_einsum, their values not read.
 * TG_EUNSUPPORTED when every order (of those the strategy looks at) needs
 * an intermediate of more than TG_MAX_DIMS dims, or for OPTIMAL over more
 * than TG_EINSUM_OPTIMAL_MAX operands; tg_einsum's errors otherwise.  On
 * error *plan is untouched. */
TG_API int tg_einsum_path(tg_einsum_plan *plan, const char *equation, int n,
                          tg_tensor *const *operands, tg_einsum_strategy strategy);
/* tg_einsum contracting in plan's order (from tg_einsum_path, or written by
 * hand: steps are checked, TG_EINVAL naming a step that does not name two
 * different positions of the list, or a plan for another number of
 * operands; TG_EUNSUPPORTED for a product of more than TG_MAX_DIMS dims). */
TG_API int tg_einsum_planned(tg_tensor **out, const char *equation, int n,
                             tg_tensor *const *operands, const tg_einsum_plan *plan);
/* y = x W^T + b as torch.nn.functional.linear: x (..., in), w (out, in),
 * b (out) or NULL. */
TG_API int tg_linear(tg_tensor **out, tg_tensor *x, tg_tensor *w, tg_tensor *b);
/* F.bilinear(x1, x2, weight, bias): y[..., o] = sum_ij x1[..., i]
 * weight[o, i, j] x2[..., j] + bias[o].  x1 (..., in1) and x2 (..., in2)
 * have the same rank >= 1 and the same leading dims (no broadcasting, as
 * torch), weight is (out, in1, in2), bias (out) or NULL; y is (..., out).
 * One GEMM of tg_linear, over the rows' outer products (x1 x2^T read as
 * in1*in2 features) or, when out < in2, over x2 with weight read as
 * (out*in1, in2) and then one tg_bmm with x1, whichever keeps fewer values
 * on the tape (rows * in1 * min(in2, out)); differentiable to any order.
 * Float operands of one
 * dtype (f16 and bf16 too; torch's CPU refuses f16); not on torch's
 * autocast lists, so it runs in that dtype inside a scope too.  TG_EINVAL
 * for a NULL out, x1, x2 or weight; TG_EDTYPE for an integer operand
 * (torch takes them) or mixed dtypes (naming both); TG_ESHAPE for ranks,
 * batch dims or features that differ, a weight that is not 3-d, or a bias
 * that is not (out). */
TG_API int tg_bilinear(tg_tensor **out, tg_tensor *x1, tg_tensor *x2, tg_tensor *weight,
                       tg_tensor *bias);

/* ---- normalisation ---- */
/* F.local_response_norm(x, size, alpha, beta, k): x (N, C, *), at least 3
 * dims (TG_ESHAPE otherwise, as torch's ValueError), divided by
 * (k + alpha * avg)^beta, avg the mean of the squares of size neighbouring
 * channels, zero-padded by size/2 channels before and (size-1)/2 after
 * (the window at channel c: c - size/2 .. c + (size-1)/2, always divided
 * by size).  Composed of tg_mul, tg_pad, tg_avg_pool, tg_pow_scalar and
 * tg_div, so differentiable to any order; under autocast pow_scalar's FP32
 * policy makes a bf16 or f16 x give f32 (torch: for 4 and more dims, as
 * its avg_pool3d is on the fp32 list; a 3-d x stays bf16).  An empty x
 * returns x itself.  torch's defaults: alpha 1e-4, beta 0.75, k 1.
 * TG_EINVAL for a NULL out or x, size outside [1, 2^31 - 1] or a NaN
 * alpha, beta or k; TG_EDTYPE for an integer x. */
TG_API int tg_local_response_norm(tg_tensor **out, tg_tensor *x, int64_t size, double alpha,
                                  double beta, double k);
/* As torch.nn.functional.batch_norm: x (N, C, ...) normalised per channel
 * (dim 1), y = (x - mean) / sqrt(var + eps) * weight + bias.  training: mean
 * and biased var of the batch, and running_mean / running_var (if not NULL)
 * updated in place, r = (1 - momentum) r + momentum * stat (var unbiased
 * there); otherwise running_mean and running_var are used (both required).
 * weight and bias (C,) may be NULL.  Float dtypes; statistics in double, the
 * rest in f32 (f64 if any input is f64).  The result has x's dtype when x is
 * f16/bf16 inside an autocast scope, else the promotion of x, weight, bias.
 * One recorded op, differentiable to any order; the tape keeps x and two
 * values per channel.  TG_ESHAPE / TG_EDTYPE / TG_EINVAL for bad shapes,
 * dtypes, eps, momentum, or exactly one value per channel when training.  An
 * empty batch in training gives an empty result and leaves the running
 * buffers as they are (PyTorch's behaviour). */
TG_API int tg_batch_norm(tg_tensor **out, tg_tensor *x, tg_tensor *running_mean,
                         tg_tensor *running_var, tg_tensor *weight, tg_tensor *bias,
                         bool training, double momentum, double eps);
/* As torch.nn.functional.layer_norm: x (..., *normalized_shape) normalised
 * over its last n_normalized dims, whose extents normalized_shape[0..n)
 * gives (1 <= n_normalized <= TG_MAX_DIMS; x may have no other dims):
 * y = (x - mean) / sqrt(var + eps) * weight + bias, mean and var (biased)
 * over those dims.  weight and bias have shape normalized_shape, or are
 * NULL.  Dtypes, AMP and the tape as batch_norm: statistics in double, the
 * rest in f32 (f64 if any input is f64; f16/bf16 computed in f32 and
 * rounded once); the result has x's dtype when x is f16/bf16 inside an
 * autocast scope, else the promotion of x, weight and bias (torch 1.13
 * refuses mixed dtypes).  Differentiable to any order; the tape keeps x,
 * weight and two values per normalised row.  TG_ESHAPE when normalized_shape
 * is not x's trailing shape or weight / bias have another shape;
 * TG_EDTYPE for an integer tensor; TG_EINVAL for eps < 0 or not finite
 * (torch takes a negative eps).  An empty x gives an empty result. */
TG_API int tg_layer_norm(tg_tensor **out, tg_tensor *x, int n_normalized,
                         const int64_t *normalized_shape, tg_tensor *weight, tg_tensor *bias,
                         double eps);
/* As torch.nn.functional.group_norm: x (N, C, ...) with its C channels in
 * num_groups groups of C / num_groups consecutive channels, each group of
 * each sample normalised over its channels and every position, then
 * scaled and shifted per channel: y = (x - mean) / sqrt(var + eps) *
 * weight[c] + bias[c].  weight and bias (C,) may be NULL.  x needs at least
 * 2 dims (as in torch 1.13, no unbatched form: a (C, L) input is N = C
 * samples of L channels).  Dtypes, AMP, tape and errors as tg_layer_norm;
 * TG_EINVAL for num_groups <= 0 or C not divisible by it. */
TG_API int tg_group_norm(tg_tensor **out, tg_tensor *x, int64_t num_groups, tg_tensor *weight,
                         tg_tensor *bias, double eps);

/* ---- writes by index along one dim (torch.scatter, scatter_reduce) ----
 * Out of place, each returning a new reference (a new contiguous tensor of
 * x's shape and dtype); on error *out is untouched.  x and src are of one
 * dtype, float or integer (an integer result is not recorded: no
 * gradient, as torch's), index is i64 (else TG_EDTYPE), with
 * x's ndim and index.size(d) <= x.size(d) for d != dim, and src has
 * index's shape (TG_ESHAPE; torch also takes a larger src in the forward,
 * whose backward then fails).  An empty index writes nothing and is not
 * checked against x, as torch's.  dim may be negative; a 0-d x takes dim 0
 * or -1.  An index value outside [0, x.size(dim)) is TG_EINVAL naming its
 * position, value and the extent, and nothing is written.  x, index and
 * src may have any strides.  Differentiable to any order in x and src
 * (torch's formulas); the index gets no gradient.  AMP policy keep, as
 * tg_scatter_add.  TG_EINVAL for a NULL out, x, index or src or a dim out
 * of range. */
/* torch.scatter(x, dim, index, src): out = x with out[i][index[i][j][k]][k]
 * = src[i][j][k] (dim = 1), src's bits copied.  Where the index names one
 * element more than once, the last in the index's row-major order stays,
 * as torch 1.13's CPU kernel (torch calls it undefined).  dx =
 * scatter_value(g, dim, index, 0); dsrc = gather(g, dim, index), so every
 * term gets its element's g, the overwritten ones too, as torch. */
TG_API int tg_scatter(tg_tensor **out, tg_tensor *x, int dim, tg_tensor *index, tg_tensor *src);
/* torch.scatter(x, dim, index, value): out = x with value at the elements
 * the index names; value is rounded to x's dtype (an integer dtype:
 * toward 0, as torch's; TG_EINVAL past its range, as tg_masked_fill).
 * dx = scatter_value(g, dim, index, 0). */
TG_API int tg_scatter_value(tg_tensor **out, tg_tensor *x, int dim, tg_tensor *index,
                            double value);
/* The reductions of tg_scatter_reduce (torch's reduce strings). */
typedef enum tg_scatter_reduce_op {
    TG_SCATTER_SUM,
    TG_SCATTER_PROD,
    TG_SCATTER_MEAN,
    TG_SCATTER_AMAX,
    TG_SCATTER_AMIN,
} tg_scatter_reduce_op;
/* torch.scatter_reduce(x, dim, index, src, reduce, include_self): each
 * element the index names is the reduction of x's element (include_self;
 * else the reduction's identity) and its terms of src in the index's
 * row-major order, rounded to x's dtype at each step as torch 1.13's CPU
 * kernel (f16 and bf16 computed in f32 and rounded); the other elements
 * keep x's.  mean divides by the count of terms (plus 1 with
 * include_self) kept in x's dtype, as torch's; amax / amin keep the
 * earlier of equal values (0.0 then -0.0 gives 0.0) and a NaN term gives
 * NaN.  Gradients as torch 1.13's scatter_reduce_backward: sum dx = g,
 * dsrc = gather(g); mean divides those by the counts; amax / amin share g
 * evenly among x's element and the terms equal to the result; prod dx = g
 * times the product of the others, with zeros handled as torch (two or
 * more zeros of src reaching one element give them 0).  Without
 * include_self dx is 0 at the elements the index names.  All are made of
 * differentiable ops, but prod's dsrc with two zeros of src reaching one
 * element: a create_graph backward needing it is TG_EUNSUPPORTED (torch
 * refuses only its derivative).  An integer x (torch 1.13's integer
 * kernel): sum and prod wrap modulo 2^bits at each step, amax / amin start
 * from the dtype's lowest / highest without include_self, and mean divides
 * the wrapped sum by the count (in x's dtype) rounding toward -inf (a sum
 * of -15 over 2 terms gives -8).  TG_EINVAL for a reduce outside the
 * enum. */
TG_API int tg_scatter_reduce(tg_tensor **out, tg_tensor *x, int dim, tg_tensor *index,
                             tg_tensor *src, tg_scatter_reduce_op reduce, bool include_self);
/* "sum", "prod", "mean", "amax" or "amin" (static), torch's string for
 * reduce; NULL for a value outside the enum. */
TG_API const char *tg_scatter_reduce_name(tg_scatter_reduce_op reduce);

/* ---- more indexing (torch.take_along_dim, index_fill, index_copy,
 * index_put, masked_scatter) ----
 * Out of place, each returning a new reference; on error *out is
 * untouched.  Made of recorded ops (gather, scatter, index_add, expand,
 * reshape), so differentiable to any order in x and the values, with
 * torch's gradients; index tensors get none.  x and the values are of one
 * dtype, float or integer (an integer result is not recorded; index_put's
 * accumulate wraps modulo 2^bits, a u8 x too: torch's bool x would OR),
 * index tensors i64 (TG_EDTYPE otherwise, and for values of another
 * dtype, as torch's).  TG_EINVAL for a NULL argument, a dim out of range, or an
 * index value out of range (naming it, the dim and its extent);
 * TG_ESHAPE for shapes that do not fit, as below. */
/* torch.take_along_dim(x, indices, dim): gather(x, dim, indices) with x
 * and indices broadcast to each other at every dim but dim; they have the
 * same number of dims (TG_ESHAPE).  Indices in [0, x.size(dim)) (torch
 * takes no negative ones here either).  tg_take_along_dim_flat is
 * torch.take_along_dim(x, indices) without dim: both flattened first. */
TG_API int tg_take_along_dim(tg_tensor **out, tg_tensor *x, tg_tensor *indices, int dim);
TG_API int tg_take_along_dim_flat(tg_tensor **out, tg_tensor *x, tg_tensor *indices);
/* torch.index_fill(x, dim, index, value): x with value at the positions
 * index (1-d or 0-d) names along dim; negative values count from the
 * end, as torch's.  value is rounded to x's dtype (toward 0 for an
 * integer one, as torch's; TG_EINVAL past its range).  dx = index_fill(g, dim, index, 0). */
TG_API int tg_index_fill(tg_tensor **out, tg_tensor *x, int dim, tg_tensor *index,
                         double value);
/* torch.index_copy(x, dim, index, src): x with its slices index[j] along
 * dim replaced by src's slice j; src has x's shape with the index's
 * length at dim (TG_ESHAPE).  Values in [0, x.size(dim)), as torch's (no
 * negative ones).  A position named twice keeps the later src slice
 * (torch calls that undefined).  dx = index_fill(g, dim, index, 0), dsrc =
 * index_select(g, dim, index). */
TG_API int tg_index_copy(tg_tensor **out, tg_tensor *x, int dim, tg_tensor *index,
                         tg_tensor *src);
/* torch.index_put(x, indices, values, accumulate) with n (1 to x's ndim)
 * index tensors for x's leading dims: x[i0, ..., in-1] = values
 * (accumulate: +=).  An i64 index tensor addresses one dim; a u8 one is
 * a mask (torch's bool; torch reads uint8 indices so too) over as many
 * dims as it has, from where it stands, with their extents (TG_ESHAPE),
 * and stands for the index tensors of its nonzero elements.  The index
 * tensors broadcast together to a shape B (TG_ESHAPE), negative values
 * count from the end; values broadcast to B followed by x's remaining
 * extents (TG_ESHAPE).  A position named twice keeps the later values
 * without accumulate (torch: undefined), and adds up in order with it.
 * dx is g (accumulate) or g with the written positions 0; dvalues is g
 * at the positions, summed over the dims values was broadcast along.
 * None entries (slices) are not taken. */
TG_API int tg_index_put(tg_tensor **out, tg_tensor *x, int n, tg_tensor *const *indices,
                        tg_tensor *values, bool accumulate);
/* torch.masked_scatter(x, mask, source): x and mask (u8, torch's bool;
 * TG_EDTYPE otherwise) broadcast together (TG_ESHAPE); where mask is
 * nonzero, in row-major order, the result takes source's elements in
 * row-major order; source (any shape, x's dtype) needs at least as many
 * elements as mask selects (TG_ESHAPE).  dx = g where mask is 0 (summed
 * over x's broadcast dims); dsource is g at the selected positions, in
 * order, then zeros. */
TG_API int tg_masked_scatter(tg_tensor **out, tg_tensor *x, tg_tensor *mask, tg_tensor *source);

/* ---- more shape ops (torch.repeat_interleave, tile, rot90, diff,
 * meshgrid, cartesian_prod, block_diag, triu_indices, tril_indices) ----
 * Each returns new references; on error the out-pointers are untouched.
 * Made of recorded ops (index_select, repeat, flip, transpose, narrow,
 * sub, cat, reshape, expand, pad, stack), so a float result is
 * differentiable to any order with torch's gradients.  Any dtype where
 * the ops they are made of take it.  TG_EINVAL for a NULL argument or a
 * dim out of range. */
/* torch.repeat_interleave(x, repeats, dim): each slice of x along dim
 * repeated repeats times in place ([a, b] -> [a, a, b, b]); repeats >= 0
 * (TG_EINVAL).  tg_repeat_interleave_tensor takes a count per slice:
 * repeats is i64 or i32 (TG_EDTYPE), 0-d or 1-d of 1 or x.size(dim)
 * values (TG_ESHAPE), each >= 0 (TG_EINVAL naming it).  torch's dim=None
 * is tg_reshape(x, (-1)) first.  x has a dim (a 0-d x is TG_ESHAPE, as
 * torch).  The gradient adds each copy's g back (index_add). */
TG_API int tg_repeat_interleave(tg_tensor **out, tg_tensor *x, int64_t repeats, int dim);
TG_API int tg_repeat_interleave_tensor(tg_tensor **out, tg_tensor *x, tg_tensor *repeats,
                                       int dim);
/* torch.tile(x, reps): tg_repeat with reps first padded with leading 1s
 * to x's ndim (n may be below it, unlike tg_repeat); n in [0,
 * TG_MAX_DIMS]. */
TG_API int tg_tile(tg_tensor **out, tg_tensor *x, int n, const int64_t *reps);
/* torch.rot90(x, k, dims): x rotated by 90 degrees k times (any k, taken
 * mod 4) in the plane of dims[0] and dims[1], from the first towards the
 * second; x has at least 2 dims (TG_ESHAPE), dims name two different dims
 * (TG_EINVAL).  As torch: k mod 4 of 1 and 3 give a transposed view of a
 * flipped copy, 2 a flipped copy, 0 a copy. */
TG_API int tg_rot90(tg_tensor **out, tg_tensor *x, int64_t k, const int *dims);
/* torch.diff(x, n, dim, prepend, append): the n-th forward difference
 * along dim, out[i] = t[i + 1] - t[i] applied n times to t = cat(prepend,
 * x, append) (prepend and append may be NULL; else x's ndim and extents
 * but at dim, TG_ESHAPE; dtypes promote as tg_cat's).  n = 0 gives x
 * itself, retained, prepend and append left out (as torch 1.13); once t
 * is empty along dim it stays so.  n < 0 is TG_EINVAL (torch 1.13 returns x).  Integer
 * differences wrap as tg_sub's (a u8 0 - 1 is 255, as torch's). */
TG_API int tg_diff(tg_tensor **out, tg_tensor *x, int64_t n, int dim, tg_tensor *prepend,
                   tg_tensor *append);
typedef enum tg_meshgrid_indexing {
    TG_MESHGRID_IJ,   /* matrix indexing: output dims in the inputs' order */
    TG_MESHGRID_XY,   /* Cartesian: the first two swapped */
} tg_meshgrid_indexing;
/* torch.meshgrid(*tensors, indexing): n (1 to TG_MAX_DIMS) 0-d or 1-d
 * tensors (TG_ESHAPE) of one dtype (TG_EDTYPE) give n tensors in outs,
 * each of shape (s0, ..., sn-1) (XY: (s1, s0, s2, ...)), tensor i varying
 * along its own dim: expanded views of the inputs, as torch's. */
TG_API int tg_meshgrid(tg_tensor **outs, int n, tg_tensor *const *tensors,
                       tg_meshgrid_indexing indexing);
/* torch.cartesian_prod(*tensors): n (1 to TG_MAX_DIMS) 1-d tensors
 * (TG_ESHAPE) of one dtype (TG_EDTYPE) give their product's rows, (s0 *
 * ... * sn-1, n), in row-major order; n = 1 gives tensors[0] itself,
 * retained, as torch. */
TG_API int tg_cartesian_prod(tg_tensor **out, int n, tg_tensor *const *tensors);
/* torch.block_diag(*tensors): the n tensors (0-d as 1x1, 1-d as one row,
 * 2-d; more dims are TG_ESHAPE) along the diagonal of a matrix of zeros,
 * of dtype their promotion (tg_cat's); n = 0 gives an f32 (1, 0), as
 * torch's. */
TG_API int tg_block_diag(tg_tensor **out, int n, tg_tensor *const *tensors);
/* torch.triu_indices(row, col, offset) / torch.tril_indices: the (i, j)
 * of a row x col matrix with j - i >= offset (triu) or <= offset (tril),
 * row-major, as an i64 (2, count) tensor; row and col >= 0 (TG_EINVAL). */
TG_API int tg_triu_indices(tg_tensor **out, int64_t row, int64_t col, int64_t offset);
TG_API int tg_tril_indices(tg_tensor **out, int64_t row, int64_t col, int64_t offset);

/* ---- special math functions (torch.logaddexp, torch.xlogy, torch.erfinv,
 * ...) ----
 * Each returns a new reference in *out; on error *out is left NULL and the
 * call returns a negative tg_status: TG_EINVAL for a NULL argument (the
 * message names it: "logaddexp: input 1 is NULL"), TG_EDTYPE for a dtype
 * the op refuses (naming the input and its dtype), TG_ESHAPE for operands
 * that do not broadcast.  f32 and f64 take torch 1.13's CPU steps, each
 * rounded in the dtype, their transcendental functions computed in double
 * and rounded once; f16 and bf16 are computed in f32 and rounded once.
 * Gradients are torch's formulas, differentiable to any order. */
/* torch.logaddexp(a, b) = log(e^a + e^b) and torch.logaddexp2(a, b) =
 * log2(2^a + 2^b), a and b broadcast together, in torch's stable form
 * max(a, b) + log1p(e^-|a - b|) (-inf with -inf is -inf, inf with inf is
 * inf).  Gradients the softmax weights g / (1 + e^(b - a)) and
 * g / (1 + e^(a - b)) (2^ for logaddexp2), summed to each input's shape.
 * Integer operands are TG_EDTYPE, as torch's; two float dtypes promote
 * (PROMOTE). */
TG_API int tg_logaddexp(tg_tensor **out, tg_tensor *a, tg_tensor *b);
TG_API int tg_logaddexp2(tg_tensor **out, tg_tensor *a, tg_tensor *b);
/* torch.xlogy(x, y) = x log(y) and torch.special.xlog1py(x, y) =
 * x log1p(y), broadcast: NaN where y is NaN, else 0 where x == 0.
 * Gradients dx = xlogy(g, y) (0 where x == 0 and y <= 0; xlog1py: y <= -1)
 * and dy = g x / y (g x / (y + 1)).  Integers are promoted as torch: two
 * give f32, one with a float the float's dtype. */
TG_API int tg_xlogy(tg_tensor **out, tg_tensor *x, tg_tensor *y);
TG_API int tg_xlog1py(tg_tensor **out, tg_tensor *x, tg_tensor *y);
/* torch.hypot(a, b) = sqrt(a^2 + b^2) without overflow, broadcast;
 * gradients g a / hypot and g b / hypot (NaN at the origin).  Integer
 * operands are TG_EDTYPE, as torch's. */
TG_API int tg_hypot(tg_tensor **out, tg_tensor *a, tg_tensor *b);
/* torch.erfc(a) = 1 - erf(a) (no cancellation for large a); gradient
 * -g 2/sqrt(pi) e^(-a^2).  An integer a gives f32. */
TG_API int tg_erfc(tg_tensor **out, tg_tensor *a);
/* torch.erfinv(a): the x in (-inf, inf) with erf(x) = a; +-inf at +-1, NaN
 * outside [-1, 1].  Within an ulp of the true value in f64 (Giles'
 * approximation refined by Halley steps on erf, or on erfc near +-1).
 * Gradient g sqrt(pi)/2 e^(erfinv(a)^2).  FP32 under autocast (as
 * PyTorch's CUDA autocast).  An integer a gives f32. */
TG_API int tg_erfinv(tg_tensor **out, tg_tensor *a);
/* torch.logit(x, eps) = log(x / (1 - x)), x first clamped to
 * [eps, 1 - eps] when eps >= 0; NAN (or a negative eps) is torch's
 * eps=None, no clamp.  Gradient g / (x (1 - x)); with eps 0 outside
 * [eps, 1 - eps] (and at NaN), without it NaN outside [0, 1].  An integer
 * x gives f32. */
TG_API int tg_logit(tg_tensor **out, tg_tensor *x, double eps);
/* torch.sinc(x) = sin(pi x) / (pi x), 1 at 0; gradient
 * g (pi x cos(pi x) - sin(pi x)) / (pi x^2), 0 where pi x^2 is 0 (torch's).
 * An integer x gives f32 (sinc(1) is sin(pi_f) / pi_f = -2.78e-8, as
 * torch's). */
TG_API int tg_sinc(tg_tensor **out, tg_tensor *x);
/* torch.lgamma(x) = log|Gamma(x)| (C's lgamma, as torch's kernel): +inf
 * at 0, the negative integers and +-inf.  Gradient g digamma(x).  An
 * integer x gives f32. */
TG_API int tg_lgamma(tg_tensor **out, tg_tensor *x);
/* torch.digamma(x) (torch.special.psi) = Gamma'(x) / Gamma(x), torch's
 * algorithm (Cephes) in the dtype: digamma(+0) = -inf, digamma(-0) = inf,
 * NaN at the negative integers and -inf.  Gradient g polygamma(1, x).  An
 * integer x gives f32. */
TG_API int tg_digamma(tg_tensor **out, tg_tensor *x);
/* torch.polygamma(n, x): the n-th derivative of digamma (n = 0 is
 * digamma), for n >= 1 (-1)^(n+1) n! zeta(n + 1, x) by its series and
 * Euler-Maclaurin tail in double, within a few ulps of the true value;
 * (-1)^(n+1) inf at 0 and the negative integers, (-1)^(n+1) 0 at +inf,
 * NaN at -inf.  Gradient g polygamma(n + 1, x), to any order.  TG_EINVAL
 * for n outside [0, 160] (torch refuses a negative n; 160! is the last
 * factorial a double holds) or a NULL argument.  An integer x gives f32. */
TG_API int tg_polygamma(tg_tensor **out, int n, tg_tensor *x);
/* torch.frac(a) = a - trunc(a), with a's sign; NaN at +-inf.  Gradient g.
 * Integer a is TG_EDTYPE, as torch's. */
TG_API int tg_frac(tg_tensor **out, tg_tensor *a);
/* torch.copysign(a, b): |a| with the sign of b (of -0.0 and NaN too),
 * broadcast; integers promoted as torch (two give f32).  Gradients
 * g copysign(a, b) / a to a (0 where a == 0) and 0 to b. */
TG_API int tg_copysign(tg_tensor **out, tg_tensor *a, tg_tensor *b);
/* torch.heaviside(x, values): values where x == 0, 1 where x > 0, else 0
 * (NaN gives 0), broadcast.  x and values must have one dtype (TG_EDTYPE
 * otherwise, as torch's), an integer one too.  Not recorded: torch has no
 * derivative for it. */
TG_API int tg_heaviside(tg_tensor **out, tg_tensor *x, tg_tensor *values);
/* torch.nansum(x) and torch.nansum(x, dims, keepdim): the sum with NaNs
 * counted as 0 (ndims 0: every dim, torch's dim=None; else dims as
 * tg_sum_dims).  Gradient g where x is not NaN, 0 at NaN.  An integer x
 * gives its i64 sum, as torch's. */
TG_API int tg_nansum(tg_tensor **out, tg_tensor *x);
TG_API int tg_nansum_dims(tg_tensor **out, tg_tensor *x, int ndims, const int *dims,
                          bool keepdim);
/* torch.nanmean: nansum divided by the number of elements that are not
 * NaN (NaN where there are none).  Float dtypes only (TG_EDTYPE, as
 * torch's). */
TG_API int tg_nanmean(tg_tensor **out, tg_tensor *x);
TG_API int tg_nanmean_dims(tg_tensor **out, tg_tensor *x, int ndims, const int *dims,
                           bool keepdim);
/* torch.count_nonzero(x, dims): the number of elements != 0 (NaN counts),
 * an i64 tensor; ndims 0 counts every element (torch's dim=None).  Any
 * dtype; not recorded.  TG_EINVAL for NULL out or x, or NULL dims with
 * ndims > 0; dims as tg_sum_dims. */
TG_API int tg_count_nonzero(tg_tensor **out, tg_tensor *x, int ndims, const int *dims);

#ifdef __cplusplus
}
#endif
#endif
