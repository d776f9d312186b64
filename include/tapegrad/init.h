/* tapegrad/init.h - torch.nn.init: filling a weight in place with the
 * distributions PyTorch's layers and papers use, from a tg_rng.
 *
 *   tg_rng rng; tg_rng_init(&rng, 0);
 *   tg_tensor *w = tg_module_find(conv, "weight");      // borrowed
 *   tg_init_kaiming_normal_(w, 0, TG_FAN_OUT, TG_NL_RELU, &rng);
 *   tg_init_zeros_(tg_module_find(conv, "bias"));
 *
 * The fans are torch's _calculate_fan_in_and_fan_out, from the shape alone:
 * for a weight (d0, d1, k...) with receptive field r = prod(k) (1 for a
 * 2-d weight), fan_in = d1 r and fan_out = d0 r.  So Linear (out, in) has
 * fan_in = in; ConvNd (c_out, c_in/groups, k...) fan_in = c_in/groups r;
 * and ConvTransposeNd, whose weight is (c_in, c_out/groups, k...), has
 * fan_in = c_out/groups r and fan_out = c_in r, as in torch.
 *
 * Each function writes t in place (bumping its version, outside the tape
 * as torch's init runs under no_grad) and returns TG_OK, or a negative
 * tg_status with nothing written: TG_EINVAL for a NULL t or rng, an integer
 * t where a distribution is drawn (torch refuses those too), or a bad
 * parameter; TG_ESHAPE for a t of fewer than 2 dims where fans or a matrix
 * are needed.
 * The draws come from tg_tensor_rand_uniform / tg_tensor_rand_normal:
 * the same on every machine, not torch's numbers.  An empty t is left as
 * it is (torch's kaiming functions warn and do the same). */
#ifndef TAPEGRAD_INIT_H
#define TAPEGRAD_INIT_H

#include <stdint.h>

#include "tapegrad/export.h"
#include "tapegrad/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The nonlinearities of torch.nn.init.calculate_gain. */
typedef enum tg_nonlinearity {
    TG_NL_LINEAR = 0,          /* 1 */
    TG_NL_CONV1D,              /* 1 */
    TG_NL_CONV2D,              /* 1 */
    TG_NL_CONV3D,              /* 1 */
    TG_NL_CONV_TRANSPOSE1D,    /* 1 */
    TG_NL_CONV_TRANSPOSE2D,    /* 1 */
    TG_NL_CONV_TRANSPOSE3D,    /* 1 */
    TG_NL_SIGMOID,             /* 1 */
    TG_NL_TANH,                /* 5/3 */
    TG_NL_RELU,                /* sqrt(2) */
    TG_NL_LEAKY_RELU,          /* sqrt(2 / (1 + slope^2)) */
    TG_NL_SELU,                /* 3/4 */
    TG_NL_COUNT
} tg_nonlinearity;

/* Which fan kaiming keeps the variance of: fan_in (forward) or fan_out
 * (backward). */
typedef enum tg_fan_mode { TG_FAN_IN = 0, TG_FAN_OUT } tg_fan_mode;

/* calculate_gain(nl, param) into *out.  param is leaky_relu's negative
 * slope (finite; NAN for torch's param=None, the slope 0.01) and is
 * ignored by the others. */
TG_API int tg_init_calculate_gain(double *out, tg_nonlinearity nl, double param);
/* t's fans (see the top) into *fan_in and *fan_out (either may be NULL). */
TG_API int tg_init_calculate_fan(int64_t *fan_in, int64_t *fan_out, const tg_tensor *t);

/* uniform_(t, a, b): U[a, b), a <= b finite. */
TG_API int tg_init_uniform_(tg_tensor *t, double a, double b, tg_rng *rng);
/* normal_(t, mean, std): N(mean, std^2), std >= 0, both finite. */
TG_API int tg_init_normal_(tg_tensor *t, double mean, double std, tg_rng *rng);
/* constant_(t, val), zeros_(t), ones_(t): any dtype, val within its range. */
TG_API int tg_init_constant_(tg_tensor *t, double val);
TG_API int tg_init_zeros_(tg_tensor *t);
TG_API int tg_init_ones_(tg_tensor *t);
/* xavier_uniform_(t, gain): U[-a, a) with a = gain sqrt(6 / (fan_in +
 * fan_out)); xavier_normal_: N(0, gain^2 2 / (fan_in + fan_out)).  gain
 * >= 0 (torch's default 1). */
TG_API int tg_init_xavier_uniform_(tg_tensor *t, double gain, tg_rng *rng);
TG_API int tg_init_xavier_normal_(tg_tensor *t, double gain, tg_rng *rng);
/* kaiming_uniform_(t, a, mode, nonlinearity): with fan the mode's fan and
 * gain = calculate_gain(nl, a), U[-b, b) for b = gain sqrt(3 / fan);
 * kaiming_normal_: N(0, gain^2 / fan).  torch's defaults are a = 0,
 * TG_FAN_IN, TG_NL_LEAKY_RELU; nn.Linear's and nn.ConvNd's own init is
 * kaiming_uniform_ with a = sqrt(5). */
TG_API int tg_init_kaiming_uniform_(tg_tensor *t, double a, tg_fan_mode mode,
                                    tg_nonlinearity nl, tg_rng *rng);
TG_API int tg_init_kaiming_normal_(tg_tensor *t, double a, tg_fan_mode mode,
                                   tg_nonlinearity nl, tg_rng *rng);
/* trunc_normal_(t, mean, std, a, b): N(mean, std^2) conditioned on [a, b]
 * (torch's defaults mean 0, std 1, a -2, b 2).  std finite and > 0; a < b,
 * both finite; the interval's probability must not underflow (it is taken
 * in the tail [a, b] lies nearer, so e.g. [10 std, 11 std] is drawn, not
 * collapsed onto b as torch's erfinv of 2 Phi - 1 does).  With alpha =
 * (a - mean) / std, beta likewise and u a uniform_ draw of t's size, value
 * i is mean + std z with Phi(z) = Phi(alpha) + (Phi(beta) - Phi(alpha)) u_i,
 * or mirrored, Phi(-z) = Phi(-beta) + (Phi(-alpha) - Phi(-beta)) u_i, when
 * alpha + beta > 0; computed in f64, clamped to [a, b] and rounded to t's
 * dtype (in f16 and bf16 it stays in [a, b] when a and b are
 * representable).  Moves rng as a uniform_ fill of t does. */
TG_API int tg_init_trunc_normal_(tg_tensor *t, double mean, double std, double a, double b,
                                 tg_rng *rng);
/* orthogonal_(t, gain): a (semi-)orthogonal matrix times gain (torch's
 * default 1, here finite and >= 0).  t has at least 2 dims (else
 * TG_ESHAPE) and is seen as rows = size(0) by cols = numel / rows: a
 * (rows, cols) matrix A is drawn as tg_tensor_rand_normal draws an f64
 * tensor of that shape, factored A = Q R in f64 (A^T = Q R when rows <
 * cols) with Q's columns multiplied by the signs of R's diagonal, so that
 * R's diagonal is >= 0, as torch does; t = gain Q (gain Q^T when wide), so
 * t^T t = gain^2 I for rows >= cols and t t^T = gain^2 I otherwise. */
TG_API int tg_init_orthogonal_(tg_tensor *t, double gain, tg_rng *rng);

#ifdef __cplusplus
}
#endif
#endif
