/* tapegrad/quant.h - int8 quantization: quantize/dequantize, fake quantization
 * for quantization-aware training, observers, an int8 GEMM and true integer
 * ConvNd / ConvTransposeNd / Linear.
 *
 * Schemes.  A quantized tensor is a plain u8 or i8 tensor plus its parameters,
 * which the caller carries:
 *   per-tensor affine        real = scale * (q - zero_point), q in u8 or i8
 *   per-channel symmetric    real = scale[c] * q, q in i8 (zero_point 0), c the
 *                            index along one axis.  For weights that axis is
 *                            the OUTPUT channel: axis 0 of a Conv/Linear weight
 *                            (C_out, C_in/groups, K...) / (N, K), and axis 1 of
 *                            a ConvTranspose weight (C_in, C_out/groups, K...),
 *                            whose index j in group g is output channel
 *                            g*(C_out/groups) + j.
 * Quantizing rounds half to even (q = rint(x / scale) + zero_point) and
 * saturates at the dtype's range ([0, 255] or [-128, 127]).
 *
 * Quantized ops (not differentiable) accumulate u8/i8 x i8 products in i32,
 * add the bias quantized to i32 at scale x_scale * w_scale[c] (rounded half to
 * even), and requantize each accumulator to the output's scale with a
 * fixed-point multiplier: x_scale * w_scale[c] / y_scale = M0 * 2^-s with M0 a
 * 31-bit integer in [2^30, 2^31); q_y = y_zero_point + round(acc * M0 / 2^s)
 * where the division ROUNDS HALF TO EVEN (exact on the 64-bit product), then
 * an optional ReLU (q_y = max(q_y, y_zero_point)) and saturation.  The output
 * has x's dtype.
 *
 * Example (uint8 ConvTranspose2d with per-channel weights):
 *     tg_tensor *xq, *wq, *y;
 *     tg_quantize(&xq, x, TG_U8, 0.02, 128);
 *     tg_quantize_conv_weight(&wq, w, true, 1, c_out, w_scales);  // ConvT: axis 1
 *     tg_qscales q = {.x_scale = 0.02, .x_zero_point = 128,
 *                     .n_weight_scales = c_out, .weight_scales = w_scales,
 *                     .y_scale = 0.05, .y_zero_point = 128};
 *     tg_quantized_conv_transpose(&y, xq, wq, bias, &p, &q);
 */
#ifndef TAPEGRAD_QUANT_H
#define TAPEGRAD_QUANT_H

#include <stdbool.h>
#include <stdint.h>

#include "tapegrad/conv.h"
#include "tapegrad/export.h"
#include "tapegrad/nn.h"
#include "tapegrad/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- quantize / dequantize ------------------------------------------------ */

/* *out (new reference, contiguous, dtype qdt = TG_U8 or TG_I8) =
 * clamp(rint(x / scale) + zero_point) for a float x.  scale must be finite and
 * > 0; zero_point must lie in qdt's range.  x / scale is computed in double,
 * so a value next to a rounding tie can land one step away from
 * torch.quantize_per_tensor, which rounds x * (1/scale) in f32 (5.05 at
 * scale 0.1: 51 here, 50 there; about 2% of the values of a 0.05 grid); NaN
 * becomes the zero point (torch: quant_min).  The same holds for the
 * per-channel and conv-weight variants. */
TG_API int tg_quantize(tg_tensor **out, tg_tensor *x, tg_dtype qdt, double scale,
                       int32_t zero_point);
/* Per-channel symmetric i8: *out = clamp(rint(x / scales[c]), -128, 127) with c
 * the index along `axis` (negative counts from the end); n must equal that
 * extent.  scales is borrowed. */
TG_API int tg_quantize_per_channel(tg_tensor **out, tg_tensor *x, int axis, int64_t n,
                                   const double *scales);
/* *out (new reference, f32) = scale * (q - zero_point) for a u8/i8 q. */
TG_API int tg_dequantize(tg_tensor **out, tg_tensor *q, double scale, int32_t zero_point);
/* *out (f32) = scales[c] * q for an i8 q, c along axis. */
TG_API int tg_dequantize_per_channel(tg_tensor **out, tg_tensor *q, int axis, int64_t n,
                                     const double *scales);

/* Per-output-channel symmetric i8 quantization of a conv weight with n = 1 or
 * C_out scales: Conv/Linear (transpose false) weight (C_out, C_in/groups, K...)
 * uses scales[i0]; ConvTranspose weight (C_in, C_out/groups, K...) element
 * (ci, j, k...) uses scales[g*(C_out/groups) + j] with g = ci / (C_in/groups),
 * its group.  (tg_quantize_per_channel on axis 1 cannot express groups > 1.) */
TG_API int tg_quantize_conv_weight(tg_tensor **out, tg_tensor *w, bool transpose,
                                   int64_t groups, int64_t n, const double *scales);
TG_API int tg_dequantize_conv_weight(tg_tensor **out, tg_tensor *q, bool transpose,
                                     int64_t groups, int64_t n, const double *scales);

/* Fake quantization (differentiable): *out = (clamp(rint(x/scale) + zp, qmin, qmax)
 * - zp) * scale in x's dtype.  Its gradient is straight-through: dx = dy where
 * qmin <= rint(x/scale) + zp <= qmax, 0 where the value was clamped.
 * Requires qmin < qmax and qmin <= zero_point <= qmax. */
TG_API int tg_fake_quantize(tg_tensor **out, tg_tensor *x, double scale, int32_t zero_point,
                            int32_t quant_min, int32_t quant_max);
/* Per-channel fake quantization (differentiable), as
 * torch.fake_quantize_per_channel_affine: with c the index along `axis`
 * (negative counts from the end; n must equal that extent),
 *     *out = (clamp(rint(x / scales[c]) + zp[c], qmin, qmax) - zp[c]) * scales[c]
 * in x's dtype, and the straight-through gradient dx = dy where
 * qmin <= rint(x / scales[c]) + zp[c] <= qmax, 0 elsewhere (the per-tensor
 * rule, channel by channel).  scales (n finite values > 0) and zero_points
 * (n values in [qmin, qmax], or NULL for all 0) are borrowed and copied.
 * Requires qmin < qmax.  On error *out is untouched. */
TG_API int tg_fake_quantize_per_channel(tg_tensor **out, tg_tensor *x, int axis, int64_t n,
                                        const double *scales, const int32_t *zero_points,
                                        int32_t quant_min, int32_t quant_max);

/* ---- observers --------------------------------------------------------------
 * Like PyTorch's MinMaxObserver, MovingAverageMinMaxObserver and
 * PerChannelMinMaxObserver with reduce_range=False: they track min/max of
 * what they see and compute (all in f32 arithmetic, as torch does)
 *   affine:    scale = max((max(hi,0) - min(lo,0)) / (qmax - qmin), eps)
 *              zero_point = clamp(qmin - rint(min(lo,0) / scale), qmin, qmax)
 *   symmetric: scale = max(max(-min(lo,0), max(hi,0)) / ((qmax - qmin) / 2), eps)
 *              zero_point = 0 for i8, 128 for u8
 * with eps = FLT_EPSILON.  Moving average: lo += c * (batch_lo - lo) (same for
 * hi) after the first batch, c = averaging_constant (torch: 0.01). */
typedef enum tg_observer_kind {
    TG_OBSERVER_MINMAX = 0,
    TG_OBSERVER_MOVING_AVERAGE,
    TG_OBSERVER_PER_CHANNEL,
} tg_observer_kind;

typedef struct tg_observer {
    tg_observer_kind kind;
    tg_dtype dtype;          /* TG_U8 or TG_I8 */
    bool symmetric;
    int32_t quant_min, quant_max;
    double averaging_constant;
    int axis;                /* per-channel only */
    int64_t n;               /* channels seen (per-channel), 1 otherwise */
    float *min, *max;        /* owned, n entries; NULL before the first update */
} tg_observer;

/* Initialises an observer (nothing allocated yet).  Defaults as torch: the
 * per-tensor observers are u8 affine [0, 255]; the per-channel one is i8
 * symmetric [-128, 127] along `axis` (torch's default weight observer). */
TG_API int tg_observer_init(tg_observer *obs, tg_observer_kind kind, tg_dtype dtype,
                            bool symmetric, int axis);
/* Updates the statistics with a float tensor (borrowed).  TG_EINVAL, the
 * statistics unchanged, when x holds NaN or, for the moving average, an
 * infinity (PyTorch fails later, at qparams: "min nan should be less than
 * max nan"). */
TG_API int tg_observer_update(tg_observer *obs, tg_tensor *x);
/* Per-tensor parameters.  TG_EINVAL before any update, for a per-channel
 * observer, for a range that is not qmin < qmax within the dtype's range and
 * holding 0 (quant_min/quant_max may be set after init, as torch's
 * arguments), or when the observed range is infinite (a min-max observer
 * that saw an infinity: no finite scale).  On error nothing is written. */
TG_API int tg_observer_qparams(const tg_observer *obs, double *scale, int32_t *zero_point);
/* Per-channel parameters into scales[0..n) and zero_points[0..n) (may be
 * NULL).  Errors as tg_observer_qparams (an infinite range in any channel,
 * named), plus TG_ESHAPE when n is not the channel count. */
TG_API int tg_observer_channel_qparams(const tg_observer *obs, int64_t n, double *scales,
                                       int32_t *zero_points);
/* Frees what the observer owns; it can be initialised again. */
TG_API void tg_observer_free(tg_observer *obs);

/* ---- int8 GEMM ---------------------------------------------------------------- */

typedef enum tg_int8_kernel {
    TG_INT8_KERNEL_AUTO = 0,   /* TG_INT8_KERNEL env var, else the best the CPU has */
    TG_INT8_KERNEL_PORTABLE,
    TG_INT8_KERNEL_AVX2,
    TG_INT8_KERNEL_VNNI,       /* AVX-512 VNNI (vpdpbusd) */
    TG_INT8_KERNEL_AMX,        /* AMX-INT8 tiles (tdpbusd) for the quantized conv
                                * and Linear ops; tg_int8_gemm runs VNNI for it.
                                * Finding out whether it is available asks Linux
                                * for this process's AMX permission (arch_prctl
                                * ARCH_REQ_XCOMP_PERM), which makes its signal
                                * frames about 8 KiB larger. */
} tg_int8_kernel;

/* True when this CPU (and build) can run kernel k. */
TG_API bool tg_int8_kernel_available(tg_int8_kernel k);
/* Forces kernel k for this thread's int8 GEMMs (AUTO restores the default).
 * TG_EUNSUPPORTED when the CPU lacks it; nothing changes then. */
TG_API int tg_int8_kernel_set(tg_int8_kernel k);
/* The kernel this thread's GEMMs use now (never AUTO). */
TG_API tg_int8_kernel tg_int8_kernel_get(void);
TG_API const char *tg_int8_kernel_name(tg_int8_kernel k);

/* c (m, n) = a (m, k) * w (n, k)^T, exact in i32: a is u8 (a_signed false) or
 * i8, w is i8, all row-major contiguous.  Every kernel gives the same
 * integers (none saturates).  Caller keeps |k| * 255 * 128 below 2^31. */
TG_API int tg_int8_gemm(int32_t *c, const void *a, bool a_signed, const int8_t *w, int64_t m,
                        int64_t n, int64_t k);

/* ---- quantized ops -------------------------------------------------------------- */

typedef struct tg_qscales {
    double x_scale;
    int32_t x_zero_point;
    int64_t n_weight_scales;       /* 1 (per tensor) or C_out (per channel) */
    const double *weight_scales;   /* borrowed */
    double y_scale;
    int32_t y_zero_point;
} tg_qscales;

/* Integer ConvNd / ConvTransposeNd (N = 1, 2, 3) with the float ops' layouts
 * and rules (tapegrad/conv.h): x u8 or i8 (B, C_in, S...), weight i8 in the
 * float layout, bias f32 (C_out) or NULL.  p->act must be TG_ACT_NONE or
 * TG_ACT_RELU; p->algo is ignored.  *out (new reference) has x's dtype. */
TG_API int tg_quantized_conv(tg_tensor **out, tg_tensor *x, tg_tensor *weight, tg_tensor *bias,
                             const tg_conv_params *p, const tg_qscales *q);
TG_API int tg_quantized_conv_transpose(tg_tensor **out, tg_tensor *x, tg_tensor *weight,
                                       tg_tensor *bias, const tg_conv_params *p,
                                       const tg_qscales *q);
/* Integer Linear: x u8/i8 (..., K), weight i8 (N, K), bias f32 (N) or NULL;
 * *out is (..., N) in x's dtype. */
TG_API int tg_quantized_linear(tg_tensor **out, tg_tensor *x, tg_tensor *weight,
                               tg_tensor *bias, const tg_qscales *q, bool relu);

/* ---- packed weights ---------------------------------------------------------
 * An i8 weight rearranged once for the GEMM kernels (what a quantized module
 * keeps), so repeated calls skip the packing.  The unpacked ops above pack on
 * every call and give the same integers.  weight is borrowed (its values are
 * copied); layouts as above: Conv (C_out, C_in/groups, K...), ConvTranspose
 * (C_in, C_out/groups, K...) with transpose true, Linear (N, K) with
 * transpose false and groups 1. */
typedef struct tg_qweight tg_qweight;

TG_API int tg_qweight_new(tg_qweight **out, tg_tensor *weight, bool transpose, int64_t groups);
/* Frees w; NULL does nothing. */
TG_API void tg_qweight_free(tg_qweight *w);
/* As tg_quantized_conv / _conv_transpose / _linear with a packed weight; the
 * packing's transpose flag and groups must match the call (p->groups). */
TG_API int tg_quantized_conv_packed(tg_tensor **out, tg_tensor *x, const tg_qweight *w,
                                    tg_tensor *bias, const tg_conv_params *p,
                                    const tg_qscales *q);
TG_API int tg_quantized_conv_transpose_packed(tg_tensor **out, tg_tensor *x,
                                              const tg_qweight *w, tg_tensor *bias,
                                              const tg_conv_params *p, const tg_qscales *q);
TG_API int tg_quantized_linear_packed(tg_tensor **out, tg_tensor *x, const tg_qweight *w,
                                      tg_tensor *bias, const tg_qscales *q, bool relu);

/* ---- post-training quantization of a model -----------------------------------
 * tg_quantize_model builds *out (new reference) from float_model: every
 * Linear, Conv and ConvTranspose module becomes a quantized module
 * ("QuantizedLinear", "QuantizedConv", "QuantizedConvTranspose") computing
 *     y = dequantize(int8 op(quantize(x; x_scale, x_zp), W_q), y_scale, y_zp)
 * with W_q per-output-channel symmetric i8 (scale = max|W_c| / 127.5, as
 * torch's per-channel observer; one scale when !per_channel), packed once,
 * and x/y parameters from min-max observers of the layer's float input and
 * output over the calibration batches (each run through the model in eval
 * mode, without grad).  The bias stays f32 (quantized to i32 per call).
 *
 * Folding (opt->fold_batchnorm, default on).  Inside a Sequential, a layer
 * directly followed by a BatchNorm with running statistics (for a Linear
 * also: followed by an Unflatten of dim 1 into (C, ...) and then a
 * BatchNorm of C channels) is replaced by tg_fold_batchnorm(layer, bn)
 * BEFORE calibration, so the observers see the post-BatchNorm values, and
 * the BatchNorm becomes an Identity (tg_nn_identity_new).  A folded Linear needs 2-d
 * input (N, in) (TG_EINVAL otherwise: a 3-d input would put other features
 * on BatchNorm's channel axis).  With opt->fuse_relu (default on) a ReLU
 * right after the layer (after its folded BatchNorm / Unflatten) is fused
 * into the int8 op (q = max(q, y_zero_point)) and also becomes "Identity";
 * the output observer then sees the post-ReLU values.  A Conv module's own
 * fused ReLU (tg_conv_params.act) is kept as the int8 op's ReLU; a layer
 * with any other fused activation is left float.
 *
 * Everything else (unfolded BatchNorm, activations, reshapes) stays float
 * and is SHARED with float_model (retained, not copied); float_model's
 * parameters and buffers are never written.  Containers without private
 * state (Sequential, custom tg_module_new(vt, NULL) modules) are rebuilt
 * around the converted children (children keep their names); a module with
 * private state is shared as is, so layers inside it stay float.  The
 * shared modules are left in eval mode.  batches are borrowed.  A layer
 * that no batch reached is TG_EINVAL (its ranges are unknown); on error
 * *out is untouched. */
typedef struct tg_quantize_options {
    tg_dtype act_dtype;              /* activations: TG_U8 (default) or TG_I8 */
    tg_observer_kind act_observer;   /* MINMAX (default) or MOVING_AVERAGE */
    bool per_channel;                /* weight scales per output channel (default) */
    bool fold_batchnorm;             /* fold a following BatchNorm (default) */
    bool fuse_relu;                  /* fuse a following ReLU into the int8 op (default) */
} tg_quantize_options;
#define TG_QUANTIZE_OPTIONS_INIT                                                    \
    {.act_dtype = TG_U8, .act_observer = TG_OBSERVER_MINMAX, .per_channel = true, \
     .fold_batchnorm = true, .fuse_relu = true}

/* opt may be NULL for the defaults. */
TG_API int tg_quantize_model(tg_module **out, tg_module *float_model, int n_batches,
                             tg_tensor *const *batches, const tg_quantize_options *opt);

/* What a quantized layer of tg_quantize_model computes (for an exporter):
 * y = dequantize(op(quantize(x; q.x_scale, q.x_zero_point) as act_dtype,
 * weight; q.weight_scales), then ReLU when relu, requantized to (q.y_scale,
 * q.y_zero_point)).  Tensors and scales are borrowed from m. */
typedef struct tg_qlayer_info {
    bool linear;             /* QuantizedLinear */
    bool transpose;          /* QuantizedConvTranspose */
    tg_tensor *weight;       /* i8, the float layer's layout */
    tg_tensor *bias;         /* f32 (C_out) or NULL */
    tg_conv_params p;        /* Conv / ConvTranspose only */
    tg_qscales q;
    tg_dtype act_dtype;      /* TG_U8 or TG_I8 */
    bool relu;
} tg_qlayer_info;
/* TG_EINVAL when m is not a QuantizedLinear/Conv/ConvTranspose module. */
TG_API int tg_quantized_layer_info(const tg_module *m, tg_qlayer_info *info);

/* A float layer computing bn(layer(x)) for an eval-mode BatchNorm bn: *out
 * (new reference) is a new module of layer's kind (Linear, Conv or
 * ConvTranspose, same hyper-parameters and dtype, always with a bias) with
 *     W'[.., c, ..] = W * s_c along the OUTPUT-channel axis (axis 0 of a
 *                     Conv/Linear weight; for ConvTranspose axis 1, element
 *                     (ci, j, k...) in group g = ci / (C_in/groups) scaling
 *                     by s of channel g*(C_out/groups) + j)
 *     b'_c = (b_c - running_mean_c) * s_c + beta_c    (b = 0 without bias)
 * where s_c = gamma_c / sqrt(running_var_c + eps) (gamma 1, beta 0 when bn is
 * not affine).  s and beta are measured by running bn itself in eval mode
 * on two f64 probe rows, so the fold matches the module exactly.  For a
 * Linear with out_f = C * r, feature f belongs to channel f / r (r = 1:
 * BatchNorm1d after it; r > 1: the BatchNorm after an Unflatten(1, (C, ...))).
 * layer and bn are borrowed and unchanged (bn's training flag is restored).
 * Errors: a layer with a fused activation, a bn without running statistics
 * (TG_EINVAL), channel counts that do not match (TG_ESHAPE). */
TG_API int tg_fold_batchnorm(tg_module **out, tg_module *layer, tg_module *bn);

/* The fixed-point form of a real multiplier 0 < m < 2^30: m ~ m0 * 2^-shift
 * with m0 in [2^30, 2^31) and 0 < shift <= 62 (tiny m lose low bits of m0). */
TG_API int tg_quant_multiplier(double m, int32_t *m0, int *shift);
/* round(acc * m0 / 2^shift), half to even, exact when acc * m0 fits in an
 * int64 and 0 <= shift <= 62 (as tg_quant_multiplier gives).  Outside that
 * the result is defined but clamped: shift to [0, 62], acc * m0 saturated. */
TG_API int64_t tg_quant_requantize(int64_t acc, int32_t m0, int shift);

#ifdef __cplusplus
}
#endif
#endif
