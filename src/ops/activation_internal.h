/* src/ops/activation_internal.h - the half-precision activation kernels of
 * activation_half.c, used by activation.c, and gelu's value of an f64 element,
 * which activation.c and rows_fused.c share. */
#ifndef TAPEGRAD_OPS_ACTIVATION_INTERNAL_H
#define TAPEGRAD_OPS_ACTIVATION_INTERNAL_H

#include <math.h>

#include "core/core.h"

/* gelu(x) = x * Phi(x), Phi(x) = 0.5 * (1 + erf(x/sqrt2)) = 0.5 * erfc(-x/sqrt2);
 * the erfc form keeps precision for large negative x where 1 + erf cancels.
 * tg_gelu's value of each f64 element, and src/ops/rows_fused.c's; f32
 * elements (and the half dtypes') take src/ops/unary_simd.c's, within one
 * rounding of this. */
static inline double tg__gelu_d(double x)
{
    return 0.5 * x * erfc(-x * M_SQRT1_2);
}

/* relu, leaky_relu (slope s) and their one-pass gradients, leaky_relu's
 * g * (a > 0 ? 1 : s) and relu's g * (a <= 0 ? 0 : 1), on n contiguous halves of
 * dtype dt, in one pass with AVX2/F16C (src/ops/activation_half.c): the bits
 * of the f32 kernels of activation.c followed by one rounding.  o may be a
 * or g.  g is read by the gradients only.  False (nothing written) on CPUs
 * without the vector kernels: the caller takes the general path. */
typedef enum tg__half_act {
    TG__HALF_RELU,
    TG__HALF_LEAKY,
    TG__HALF_MASKED_GRAD,
    TG__HALF_RELU_GRAD
} tg__half_act;
bool tg__half_act_n(tg__half_act op, tg_dtype dt, const uint16_t *a, const uint16_t *g,
                    uint16_t *o, int64_t n, double s);
/* Whether tg__half_act_n takes leaky_relu's product of halves of dtype dt
 * and slope s in f32 (x * (float)s) instead of double: true when that
 * gives every half of dt the same result (checked over all 65536 once per
 * thread and slope; src/ops/activation_half.c). */
bool tg__half_leaky_f32_ok(tg_dtype dt, double s);
/* Tests: false makes relu/leaky_relu on this thread take the general half
 * path instead of tg__half_act_n (true, the default, restores). */
void tg__act_set_half_fused(bool on);
/* Tests: false makes tg__half_act_n take its AVX2 loop on a CPU with
 * AVX-512 BW too (process-wide; true, the default, restores). */
void tg__act_set_half_avx512(bool on);
/* tanh of n contiguous f32 as the f32 op computes it (in f64 arithmetic,
 * src/ops/unary_simd.c), in AVX2 or AVX-512 registers when simd is true
 * (this thread's tg__exp_width_get(), softmax_rows_internal.h), else in
 * the plain C width (the same results). */
void tg__tanh_f32_n(float *out, const float *a, int64_t n, bool simd);
/* out[i] = sigmoid(a[i]) (silu: a[i] sigmoid(a[i])) for f32, computed in
 * f64 and rounded once (src/ops/unary_simd.c): AVX2 or AVX-512 registers
 * when simd is set (as tg__tanh_f32_n), else the plain C width; the same
 * bits either way (tests). */
void tg__sigmoid_f32_n(float *out, const float *a, int64_t n, bool silu, bool simd);

/* The kernels of gelu_tanh's f32 forward (src/ops/gelu_tanh.c), all with
 * the same bits: TG_GELU_KERNEL=portable|avx2|avx512 when the CPU runs it
 * (read at each call; another value is reported once on stderr), else the
 * widest it runs.  avx2 needs FMA too. */
typedef enum tg__gelu_kernel {
    TG__GELU_KERNEL_AUTO = 0,   /* not a kernel: the name table's first entry */
    TG__GELU_KERNEL_PORTABLE,
    TG__GELU_KERNEL_AVX2,
    TG__GELU_KERNEL_AVX512,
} tg__gelu_kernel;
bool tg__gelu_kernel_available(tg__gelu_kernel k);
/* "portable", "avx2", "avx512"; "auto", or "?" for another value (static). */
const char *tg__gelu_kernel_name(tg__gelu_kernel k);
tg__gelu_kernel tg__gelu_kernel_get(void);
/* gelu_tanh of n contiguous f32 by kernel kern (one the CPU runs; AUTO and
 * PORTABLE: the portable one).  o may be a. */
void tg__gelu_tanh_f32_n(tg__gelu_kernel kern, float *o, const float *a, int64_t n);

#endif
