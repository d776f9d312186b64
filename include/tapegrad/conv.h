/* tapegrad/conv.h - ConvNd and ConvTransposeNd, N = 1, 2, 3, with PyTorch's
 * semantics and weight layouts.
 *
 *   tg_conv:           x (B, C_in, S...), weight (C_out, C_in/groups, K...)
 *                      out extent = (S + lo + hi - dilation*(K-1) - 1) / stride + 1
 *   tg_conv_transpose: x (B, C_in, S...), weight (C_in, C_out/groups, K...)
 *                      out extent = (S-1)*stride - lo - hi + dilation*(K-1)
 *                                   + output_padding + 1
 * bias is (C_out) or NULL.  An optional activation is applied after the bias.
 *
 * An unbatched x (C, S...), one rank below the weight, is one sample, as in
 * PyTorch: the result is unbatched too.
 * Where PyTorch 1.13 differs: every extent of x from dim 1 on and of the
 * weight must be >= 1, and the parameters are checked (output_padding rule,
 * output extent >= 1) whatever the batch size, where PyTorch skips those
 * checks for an empty batch and returns a (B, 0, ...) result for C_in = 0.
 * An empty batch (B = 0) is fine: an empty result and zero gradients.
 *
 * ConvTranspose is the adjoint of Conv with the same weight and parameters:
 * <conv(z, W), x> = <z, conv_transpose(x, W)>.  Both are differentiable to any
 * order: their backward passes are written with conv, conv_transpose and the
 * weight-gradient op conv_weight_grad, which are themselves differentiable.
 */
#ifndef TAPEGRAD_CONV_H
#define TAPEGRAD_CONV_H

#include <stdint.h>

#include "tapegrad/export.h"
#include "tapegrad/ops.h"
#include "tapegrad/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TG_CONV_MAX_SPATIAL 3

typedef enum tg_activation {
    TG_ACT_NONE = 0,
    TG_ACT_RELU,
    TG_ACT_LEAKY_RELU,   /* uses act_slope */
    TG_ACT_TANH,
    TG_ACT_SIGMOID,
    TG_ACT_SILU,
    TG_ACT_GELU,
    TG_ACT_GELU_TANH,    /* gelu(approximate='tanh'), tg_gelu_tanh */
    TG_ACT_COUNT
} tg_activation;

typedef enum tg_conv_algo {
    TG_CONV_ALGO_DEFAULT = 0, /* TG_CONV_ALGO env var ("fast"|"reference"), else fast */
    TG_CONV_ALGO_FAST,        /* GEMM on the un-dilated input, then col2im */
    TG_CONV_ALGO_REFERENCE,   /* interleave zeros, pad, flip, run ConvNd */
} tg_conv_algo;

/* The largest stride, dilation, padding or output_padding accepted (larger
 * values are TG_EINVAL): it keeps every output-extent formula in int64. */
#define TG_CONV_MAX_PARAM ((int64_t)INT32_MAX)

/* Per spatial axis parameters.  Only the first N entries are read, where N is
 * the rank of x minus 2.  stride and dilation are in [1, TG_CONV_MAX_PARAM],
 * padding and output_padding in [0, TG_CONV_MAX_PARAM]. */
typedef struct tg_conv_params {
    int64_t stride[TG_CONV_MAX_SPATIAL];
    int64_t dilation[TG_CONV_MAX_SPATIAL];
    int64_t padding[TG_CONV_MAX_SPATIAL][2];   /* (low, high) per axis */
    int64_t output_padding[TG_CONV_MAX_SPATIAL]; /* conv_transpose only */
    int64_t groups;
    tg_activation act;
    double act_slope;                          /* leaky_relu slope */
    tg_conv_algo algo;
    /* conv only (PyTorch's padding_mode): CONSTANT pads with zeros in the
     * kernel; REFLECT, REPLICATE and CIRCULAR pad x by tg_pad first, then
     * convolve without padding.  conv_transpose takes CONSTANT only. */
    tg_pad_mode padding_mode;
} tg_conv_params;

#define TG_CONV_PARAMS_INIT                                                   \
    {.stride = {1, 1, 1}, .dilation = {1, 1, 1},                              \
     .padding = {{0, 0}, {0, 0}, {0, 0}}, .output_padding = {0, 0, 0},        \
     .groups = 1, .act = TG_ACT_NONE, .act_slope = 0.01,                      \
     .algo = TG_CONV_ALGO_DEFAULT, .padding_mode = TG_PAD_CONSTANT}

/* Sets symmetric padding p on every axis. */
TG_API void tg_conv_params_set_padding(tg_conv_params *p, int64_t pad);

/* x, weight and bias (may be NULL) of one float dtype outside autocast:
 * mixed ones are TG_EDTYPE naming the two, as torch's "expected scalar
 * type Float but found Double".  Inside autocast the AMP policy casts them
 * (tg_conv: LOWER_PRECISION, to the scope's dtype; tg_conv_transpose:
 * PROMOTE, to the widest), but never f64: f64 beside another float dtype
 * is TG_EDTYPE there too, as torch.  On error *out is untouched. */
TG_API int tg_conv(tg_tensor **out, tg_tensor *x, tg_tensor *weight, tg_tensor *bias,
                   const tg_conv_params *p);
TG_API int tg_conv_transpose(tg_tensor **out, tg_tensor *x, tg_tensor *weight,
                             tg_tensor *bias, const tg_conv_params *p);

/* d<u, conv(z, W)>/dW for W of the given shape: the weight gradient of conv
 * (input z, output gradient u) and, with z = dy and u = x, of conv_transpose.
 * Differentiable in z and u. */
TG_API int tg_conv_weight_grad(tg_tensor **out, tg_tensor *z, tg_tensor *u, int wndim,
                               const int64_t *wshape, const tg_conv_params *p);

/* Output extents of each op for input extents in[0..n) and kernel k[0..n).
 * TG_EINVAL with a message when an extent would be < 1. */
TG_API int tg_conv_output_size(int64_t *out, int n, const int64_t *in, const int64_t *k,
                               const tg_conv_params *p);
TG_API int tg_conv_transpose_output_size(int64_t *out, int n, const int64_t *in,
                                         const int64_t *k, const tg_conv_params *p);
/* The output_padding that makes conv_transpose produce extents want[0..n):
 * writes p->output_padding.  TG_EINVAL naming the reachable range when a
 * requested extent cannot be reached. */
TG_API int tg_conv_transpose_output_padding_for(tg_conv_params *p, int n, const int64_t *in,
                                                const int64_t *k, const int64_t *want);

/* Weight layouts.  PyTorch's is the default everywhere.  The kernel-first
 * layouts store the spatial taps first and flipped (tap k at K-1-k), as in
 * the AWS NKI conv3d_transpose kernel:
 *   KDHW_CI_CO: (K..., C_in, C_out/groups)
 *   KDHW_CO_CI: (K..., C_out/groups, C_in)  */
typedef enum tg_weight_layout {
    TG_LAYOUT_PYTORCH = 0,
    TG_LAYOUT_KDHW_CI_CO,
    TG_LAYOUT_KDHW_CO_CI,
} tg_weight_layout;

/* Converts a conv_transpose weight stored in layout `from` to PyTorch's
 * (C_in, C_out/groups, K...) layout; nspatial is 1, 2 or 3.  A copy. */
TG_API int tg_conv_weight_to_pytorch(tg_tensor **out, tg_tensor *w, tg_weight_layout from,
                                     int nspatial);
/* The inverse conversion. */
TG_API int tg_conv_weight_from_pytorch(tg_tensor **out, tg_tensor *w, tg_weight_layout to,
                                       int nspatial);

/* ---- Unfold and Fold: the sliding blocks of an image as columns ----
 *
 * F.unfold(x, kernel_size, dilation, padding, stride) and F.fold(x,
 * output_size, ...) of PyTorch, on two spatial axes.  Each (H, W) position
 * of block l (row-major over the blocks) and tap (i, j) reads the image at
 *   (lh*stride[0] - padding[0] + i*dilation[0],
 *    lw*stride[1] - padding[1] + j*dilation[1])       (0 outside it).
 * With blocks(S, a) = (S + 2 padding[a] - dilation[a] (kernel_size[a] - 1)
 * - 1) / stride[a] + 1 blocks on axis a and L = blocks(H, 0) * blocks(W, 1):
 *   tg_unfold: x (N, C, H, W) or unbatched (C, H, W) -> (N, C*kh*kw, L)
 *              or (C*kh*kw, L); row c*kh*kw + i*kw + j, column l.
 *   tg_fold:   x (N, C*kh*kw, L) or (C*kh*kw, L) -> (N, C, oh, ow) or
 *              (C, oh, ow), (oh, ow) = output_size; the entries that land
 *              on one image position are summed.
 * fold is the adjoint of unfold with the same parameters,
 * <unfold(x), y> = <x, fold(y)>, so each one's backward is the other:
 * differentiable to any order.  f32, f64, bf16 and f16 (the half dtypes
 * computed in f32: unfold copies exactly, fold rounds each sum once).
 * Each value is at most TG_CONV_MAX_PARAM. */
typedef struct tg_fold_params {
    int64_t kernel_size[2];   /* >= 1; no default */
    int64_t dilation[2];      /* >= 1 */
    int64_t padding[2];       /* >= 0, on both sides of the axis */
    int64_t stride[2];        /* >= 1 */
} tg_fold_params;

/* PyTorch's defaults, kernel_size left 0: set it. */
#define TG_FOLD_PARAMS_INIT                                                   \
    {.kernel_size = {0, 0}, .dilation = {1, 1}, .padding = {0, 0}, .stride = {1, 1}}

/* *out (a new reference; untouched on error) = unfold(x) with p (borrowed).
 * TG_EINVAL for NULL out, x or p, or a parameter outside its range (the
 * message names it); TG_EDTYPE for a dtype other than f32, f64, bf16, f16;
 * TG_ESHAPE when x has not 3 or 4 dims, or a dim other than N is 0, or an
 * axis has no sliding block (the message gives the extent and parameters),
 * as PyTorch 1.13 refuses them; TG_EINVAL for a result too large to
 * address. */
TG_API int tg_unfold(tg_tensor **out, tg_tensor *x, const tg_fold_params *p);
/* *out = fold(x) into output_size[0..2) (borrowed; each >= 1) with p.
 * Errors as tg_unfold's, and TG_ESHAPE when x has not 2 or 3 dims, a dim
 * other than N is 0, x's channels (dim -2) are not a multiple of
 * kernel_size[0]*kernel_size[1], an axis of output_size has no sliding
 * block, or x's last dim is not L. */
TG_API int tg_fold(tg_tensor **out, tg_tensor *x, const int64_t *output_size,
                   const tg_fold_params *p);

TG_API const char *tg_activation_name(tg_activation a);
/* Parses "relu", "leaky_relu:0.2", "tanh", ... ; "" or "none" gives TG_ACT_NONE. */
TG_API int tg_activation_parse(const char *s, tg_activation *act, double *slope);

#ifdef __cplusplus
}
#endif
#endif
