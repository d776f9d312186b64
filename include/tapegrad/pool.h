/* tapegrad/pool.h - AvgPoolNd, MaxPoolNd, AdaptiveAvgPoolNd, nearest upsampling
 * (nn.Upsample(scale_factor=s), F.interpolate(mode='nearest')), linear
 * interpolation (modes 'linear', 'bilinear', 'trilinear') for N = 1, 2, 3
 * spatial dims, and bicubic and antialiased (antialias=True) bilinear and
 * bicubic interpolation for N = 2, and sampling at grid points (F.grid_sample,
 * F.affine_grid), with PyTorch's semantics.
 *
 *   tg_pool_params p = TG_POOL_PARAMS_INIT;
 *   tg_pool_params_set(&p, 2, 0, 0);           // kernel 2, stride = kernel
 *   tg_max_pool(&y, x, 2, &p);                 // x (B, C, 8, 8) -> (B, C, 4, 4)
 *   tg_upsample_nearest(&z, y, 2, (int64_t[]){2, 2});   // back to (B, C, 8, 8)
 *
 * x is (B, C, S...) with N spatial dims S, or unbatched (C, S...), one
 * sample, whose result is unbatched too.  x has a float dtype (f16 and bf16
 * are computed in double and rounded once).  Every dim but the batch must
 * be >= 1; an empty batch gives an empty result.
 *
 * Pooling, along each spatial axis of extent I: window o covers the indices
 * i = o*stride - padding + j*dilation, j = 0 .. kernel-1, and the output
 * extent is
 *   O = floor((I + 2*padding - dilation*(kernel-1) - 1) / stride) + 1
 * with ceil_mode rounding up instead, less one window when the last would
 * start in the right padding ((O-1)*stride >= I + padding), as PyTorch.
 *  - avg: the sum of the window's elements inside x, divided by the
 *    window's size counted inside [-padding, I + padding) (count_include_pad,
 *    PyTorch's default: a ceil_mode window that runs past the right padding
 *    counts only up to it) or inside [0, I) (without).
 *  - max: the largest element inside x.  Ties go to the first in row-major
 *    order within the window, a NaN is taken over any number (and the last
 *    NaN over earlier ones), as PyTorch's CPU kernels; a dilated window with
 *    no element inside x gives -inf and passes no gradient.
 * Nearest upsampling by integer factors s: output extent S*s, output index
 * o reading input index o / s (PyTorch's nearest, which for integer factors
 * is exactly this).
 *
 * Gradients of every order.  avg_pool is linear: its gradient spreads each
 * g element over its window, divided by the same count, an op whose own
 * gradient is avg_pool again.  max_pool's gradient adds each g element into
 * the element its window picked (indices saved by the forward); the
 * gradient of that with respect to g picks the same elements again.
 * Upsampling's gradient sums each s-block; its gradient is upsampling.
 *
 * Where PyTorch 1.13 differs: integer inputs are refused (PyTorch's
 * avg_pool and nearest interpolation take them); nearest upsampling takes
 * an unbatched x as pooling does (F.interpolate reads a (C, S...) tensor as
 * a batch of C one-channel samples of N-1 spatial dims) and so does linear
 * interpolation (F.interpolate refuses one); avg_pool has no
 * divisor_override; antialiased interpolation (tg_upsample_antialias)
 * takes an unbatched (C, H, W) x too and f16 and bf16 (PyTorch takes
 * (B, C, H, W) f32 and f64 only).
 */
#ifndef TAPEGRAD_POOL_H
#define TAPEGRAD_POOL_H

#include <stdbool.h>
#include <stdint.h>

#include "tapegrad/export.h"
#include "tapegrad/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TG_POOL_MAX_SPATIAL 3
/* The largest kernel, stride, padding, dilation or scale factor accepted
 * (larger values are TG_EINVAL): it keeps every extent formula in int64. */
#define TG_POOL_MAX_PARAM ((int64_t)INT32_MAX)

/* Per spatial axis parameters; only the first N entries are read.  Each
 * value is at most TG_POOL_MAX_PARAM. */
typedef struct tg_pool_params {
    int64_t kernel[TG_POOL_MAX_SPATIAL];     /* >= 1; no default */
    int64_t stride[TG_POOL_MAX_SPATIAL];     /* >= 1, or 0 for the kernel (stride=None) */
    int64_t padding[TG_POOL_MAX_SPATIAL];    /* both ends; in [0, kernel/2] */
    int64_t dilation[TG_POOL_MAX_SPATIAL];   /* >= 1; avg_pool takes 1 only */
    bool ceil_mode;
    bool count_include_pad;                  /* avg_pool only */
} tg_pool_params;

/* PyTorch's defaults, kernel left 0: set it (tg_pool_params_set). */
#define TG_POOL_PARAMS_INIT                                                   \
    {.kernel = {0, 0, 0}, .stride = {0, 0, 0}, .padding = {0, 0, 0},          \
     .dilation = {1, 1, 1}, .ceil_mode = false, .count_include_pad = true}

/* Sets the same kernel, stride (0: the kernel) and padding on every axis,
 * as PyTorch's integer arguments.  NULL p does nothing. */
TG_API void tg_pool_params_set(tg_pool_params *p, int64_t kernel, int64_t stride,
                               int64_t padding);

/* The output extents out[0..n_spatial) of pooling input extents
 * in[0..n_spatial) with p (the rules above).  TG_EINVAL naming the
 * parameter and the rule for bad parameters, or when an extent would be
 * < 1; on error out is unchanged. */
TG_API int tg_pool_output_size(int64_t *out, int n_spatial, const int64_t *in,
                               const tg_pool_params *p);

/* AvgPool{1,2,3}d / MaxPool{1,2,3}d of x over its last n_spatial dims.
 * *out receives a new reference; on error it is untouched.  TG_EINVAL for
 * n_spatial outside 1..3 or bad parameters (avg_pool: a dilation other than
 * 1), TG_ESHAPE when x's rank is not n_spatial + 1 or + 2 or a dim is 0,
 * TG_EDTYPE for an integer x. */
TG_API int tg_avg_pool(tg_tensor **out, tg_tensor *x, int n_spatial, const tg_pool_params *p);
TG_API int tg_max_pool(tg_tensor **out, tg_tensor *x, int n_spatial, const tg_pool_params *p);
/* tg_max_pool with return_indices=True: *indices receives a new i64
 * tensor of *out's shape holding each maximum's flat index within its
 * (b, c) plane of x (row-major over the n_spatial dims), PyTorch's returned
 * indices, which tg_max_unpool takes; -1 for a dilated window with no
 * element inside x.  The indices never require grad; *out is tg_max_pool's
 * (its gradients).  On error out and indices are untouched.  Errors as
 * tg_max_pool, and TG_EINVAL for a NULL indices or out and indices the
 * same place. */
TG_API int tg_max_pool_with_indices(tg_tensor **out, tg_tensor **indices, tg_tensor *x,
                                    int n_spatial, const tg_pool_params *p);

/* An Upsample module's interpolation (tg_nn_upsample_mode). */
typedef enum tg_upsample_mode {
    TG_UPSAMPLE_NEAREST = 0,
    TG_UPSAMPLE_LINEAR = 1,
    TG_UPSAMPLE_BICUBIC = 2
} tg_upsample_mode;

/* x upsampled by the integer factors scale[0..n_spatial) (each >= 1) along
 * its last n_spatial dims, nearest neighbour.  Errors as tg_avg_pool. */
TG_API int tg_upsample_nearest(tg_tensor **out, tg_tensor *x, int n_spatial,
                               const int64_t *scale);

/* x resized to the extents size[0..n_spatial) (each >= 1, larger or
 * smaller than x's) along its last n_spatial dims by linear interpolation:
 * F.interpolate(x, size=size, mode='linear' | 'bilinear' | 'trilinear',
 * align_corners=align_corners) for n_spatial 1, 2, 3.  For a scale factor
 * s pass size = S*s (what F.interpolate(scale_factor=s) computes for an
 * integer s).  Output index o reads the two input indices around
 *   align_corners:  r = o * (S-1)/(size-1)   (0 when size = 1)
 *   otherwise:      r = max((o + 1/2) * S/size - 1/2, 0)
 * weighted by their distances to r, computed in the compute dtype as
 * PyTorch's CPU kernel does.  Gradients of every order: the gradient adds
 * each g element into the inputs it read with the same weights, an op whose
 * own gradient is this interpolation again.  Errors as tg_upsample_nearest
 * (TG_EINVAL for a NULL size or an extent outside [1, TG_POOL_MAX_PARAM]). */
TG_API int tg_upsample_linear(tg_tensor **out, tg_tensor *x, int n_spatial, const int64_t *size,
                              bool align_corners);

/* x resized to the extents size[0..2) along its last two dims by cubic
 * convolution: F.interpolate(x, size=size, mode='bicubic',
 * align_corners=align_corners).  Output index o reads the four input
 * indices floor(r)-1 .. floor(r)+2 (each clamped to [0, S-1]) around the
 * source position
 *   align_corners:  r = o * (S-1)/(size-1)   (0 when size = 1)
 *   otherwise:      r = (o + 1/2) * S/size - 1/2   (not clamped at 0)
 * with Keys's cubic weights (a = -0.75) of t = r - floor(r), computed in
 * the compute dtype as PyTorch's CPU kernel does; the result may lie
 * outside the range of x.  Gradients of every order, as tg_upsample_linear.
 * Errors as tg_upsample_linear. */
TG_API int tg_upsample_bicubic(tg_tensor **out, tg_tensor *x, const int64_t *size,
                               bool align_corners);

/* x resized to the extents size[0..2) along its last two dims with an
 * antialiasing filter: F.interpolate(x, size=size, mode='bilinear' (mode
 * TG_UPSAMPLE_LINEAR) | 'bicubic' (TG_UPSAMPLE_BICUBIC),
 * align_corners=align_corners, antialias=True).  Along an axis of extent
 * S, with scale = S/size (align_corners: (S-1)/(size-1), 0 when size = 1),
 * output index o is a weighted mean of the inputs i whose centres i + 1/2
 * lie within support = n/2 * max(scale, 1) of its centre c = scale*(o+1/2)
 * (n = 2 bilinear, 4 bicubic), each weighted by
 * f((i + 1/2 - c) / max(scale, 1)), the triangle max(0, 1 - |d|) or Keys's
 * cubic with a = -0.5, the weights divided by their sum: shrinking by s
 * widens the filter s times, so every input counts.  An axis whose extent
 * does not change is left as it is.  Enlarging with the triangle and
 * align_corners false is tg_upsample_linear; the cubic, or align_corners
 * (which changes the scale, not the centres), differ from the plain modes.
 * Computed in the compute dtype, width first, then height, as PyTorch's
 * CPU kernel (f32 results within a few roundings of PyTorch's).
 * Gradients of every order, as tg_upsample_linear.  Errors as
 * tg_upsample_bicubic, and TG_EINVAL for another mode (PyTorch: "Anti-alias
 * option is only supported for bilinear and bicubic modes"); TG_ENOMEM
 * when the filter tables or the I_H x size[1] buffer of the first pass
 * cannot be allocated. */
TG_API int tg_upsample_antialias(tg_tensor **out, tg_tensor *x, tg_upsample_mode mode,
                                 const int64_t *size, bool align_corners);

/* AdaptiveAvgPool{1,2,3}d: F.adaptive_avg_pool1d/2d/3d(x, output_size) over
 * the last n_spatial dims of x, (B, C, S...) or unbatched (C, S...).  Along
 * an axis of extent I pooled to O = output_size[a], output o is the mean of
 * x's indices [floor(o*I/O), ceil((o+1)*I/O)): windows of size I/O when O
 * divides I (avg_pool with kernel = stride = I/O), overlapping windows
 * otherwise, and windows repeated when O > I (each output is then one
 * element or the mean of two).  output_size[a] is in [1,
 * TG_POOL_MAX_PARAM], or 0 for x's own extent (PyTorch's None).  Sums in
 * the compute dtype, divided by each axis's window size in turn, as
 * PyTorch's CPU kernel.  Gradients of every order: the gradient spreads
 * each g element over its window divided by the same sizes, an op whose own
 * gradient is this pooling again.  *out receives a new reference; on error
 * it is untouched.  TG_EINVAL for a NULL out, x or output_size, n_spatial
 * outside 1..3 or an output_size entry out of range, TG_ESHAPE when x's
 * rank is not n_spatial + 1 or + 2 or a dim but the batch is 0, TG_EDTYPE
 * for an integer x.  A 2-d or 3-d output of extent 1 on every axis is
 * x.mean over those axes in PyTorch (another order of the same sum). */
TG_API int tg_adaptive_avg_pool(tg_tensor **out, tg_tensor *x, int n_spatial,
                                const int64_t *output_size);

/* AdaptiveMaxPool{1,2,3}d: F.adaptive_max_pool1d/2d/3d(x, output_size,
 * return_indices=indices != NULL) over the last n_spatial dims of x,
 * (B, C, S...) or unbatched (C, S...).  The windows are
 * tg_adaptive_avg_pool's: along an axis of extent I pooled to O =
 * output_size[a] (in [1, TG_POOL_MAX_PARAM], or 0 for x's own extent,
 * PyTorch's None), output o covers x's indices [floor(o*I/O),
 * ceil((o+1)*I/O)).  Each output is its window's largest element, found as
 * PyTorch's CPU kernels scan the window in row-major order: ties give the
 * first, a NaN wins over every number (the window's last NaN when it has
 * several), a window of -infs gives its first element.  When indices is
 * not NULL it receives a new reference to an i64 tensor of *out's shape
 * holding each maximum's flat index within its (b, c) plane of x
 * (row-major over the n_spatial dims), PyTorch's returned indices; it
 * never requires grad.  Gradients of every order: the gradient adds each g
 * element into its window's maximum (an x element that is the maximum of
 * several overlapping windows takes all their g), an op whose own gradient
 * picks those elements again.  f32, f64, f16 and bf16 (exact: a maximum
 * is one of x's values).  *out receives a new reference; on error out and
 * indices are untouched.  Errors as tg_adaptive_avg_pool, and TG_EINVAL
 * when out and indices are the same pointer. */
TG_API int tg_adaptive_max_pool(tg_tensor **out, tg_tensor **indices, tg_tensor *x,
                                int n_spatial, const int64_t *output_size);

/* MaxUnpool{1,2,3}d: F.max_unpool1d/2d/3d(x, indices, kernel, stride,
 * padding, output_size) over the last n_spatial dims of x, (B, C, S...) or
 * unbatched (C, S...), float dtypes.  Each element of x is put at its
 * index in a zeroed output plane: indices (i64, x's shape) hold flat
 * indices within each (b, c) plane of the output, row-major over its
 * n_spatial dims, as tg_max_pool_with_indices, tg_adaptive_max_pool and
 * tg_fractional_max_pool give them (PyTorch's); an index named
 * twice keeps the later element, as torch's CPU kernel.  Only p's kernel,
 * stride (0: the kernel) and padding are read.  The output extents are
 * output_size[0..n_spatial) when not NULL, each strictly between
 * D - stride and D + stride, D = (S - 1)*stride + kernel - 2*padding (the
 * default, used when output_size is NULL), as torch's _unpool_output_size.
 * Gradients of every order: dx gathers g at the indices (every element,
 * an overwritten one too, as torch's), and that gather's gradient adds into
 * the indices.  *out receives a new reference; on error it is untouched.
 * TG_EINVAL for a NULL out, x, indices or p, n_spatial outside 1..3, bad
 * parameters, an output_size entry out of its range or an output extent
 * below 1, or an index outside [0, the output plane's size) ("found an
 * invalid max index"); TG_ESHAPE when x's rank is not n_spatial + 1 or + 2,
 * a dim but the batch is 0 or indices' shape is not x's; TG_EDTYPE for an
 * integer x or indices not i64. */
TG_API int tg_max_unpool(tg_tensor **out, tg_tensor *x, tg_tensor *indices, int n_spatial,
                         const tg_pool_params *p, const int64_t *output_size);

/* LPPool{1,2}d: F.lp_pool1d/2d(x, norm_type, kernel, stride, ceil_mode)
 * over the last n_spatial (1 or 2) dims of x: torch 1.13's composition
 *   a = avg_pool(x^p, kernel, stride, padding 0, ceil_mode)
 *   y = (sign(a) * relu(|a|) * prod(kernel))^(1/p)
 * i.e. the p-norm of each window (a ceil_mode window cut short by x's end
 * is averaged over its part and multiplied by the full kernel size, as
 * torch's).  Only p's kernel, stride (0: the kernel) and ceil_mode are
 * read; its padding must be 0 and its dilation 1.  norm_type is finite and
 * not 0.  Differentiable to any order (the gradients of the parts; a
 * window summing to 0 has an infinite or NaN gradient for p > 1, as
 * torch's).  *out receives a new reference; on error it is untouched.
 * TG_EINVAL for a NULL argument, n_spatial not 1 or 2 (LPPool3d came after
 * torch 1.13), a bad norm_type or parameter; otherwise tg_avg_pool's
 * errors. */
TG_API int tg_lp_pool(tg_tensor **out, tg_tensor *x, int n_spatial, double norm_type,
                      const tg_pool_params *p);

/* FractionalMaxPool{2,3}d: F.fractional_max_pool2d/3d(x, kernel,
 * output_size | output_ratio, return_indices=indices != NULL,
 * _random_samples) over the last n_spatial (2 or 3) dims of x, (B, C, S...)
 * or unbatched (C, S...), f32 or f64.  Give exactly one of output_size
 * (n_spatial extents, each >= 1) and output_ratio (each in (0, 1); the
 * extent is int(S * ratio), as torch's).  Along an axis of extent I pooled
 * to O with kernel K (O + K - 1 <= I for n_spatial 2, < I for 3, as
 * torch 1.13 checks), output o is the maximum over the K
 * elements from
 *   start[o] = int((o + u) * alpha) - int(u * alpha)  (o < O - 1),
 *   start[O - 1] = I - K,     alpha = (I - K) / (O - 1),
 * computed in x's dtype as torch's CPU kernel, u the plane's sample for
 * that axis: random_samples is (B, C, n_spatial) ((1, C, n_spatial)
 * unbatched) of x's dtype with values in [0, 1), column 0 for the last
 * axis and 1 for the first when n_spatial is 2 (torch's W, H), columns
 * 0, 1, 2 for the axes in order when 3 (T, H, W).  So the same samples give
 * torch's values and indices to the bit.  Each window is scanned as
 * max_pool's (ties: the first; the last NaN wins).  When indices is not
 * NULL it receives a new i64 tensor of *out's shape: each maximum's flat
 * index within its (b, c) plane of x (no gradient).  Gradients of every
 * order: g is added into each window's maximum (max_pool's), an op whose
 * own gradient picks those elements again.  The module
 * (tg_nn_fractional_max_pool_new) draws the samples from its generator.
 * *out receives a new reference; on error out and indices are untouched.
 * TG_EINVAL for a NULL out, x, kernel or random_samples, out and indices
 * the same place, n_spatial not 2 or 3, both or neither of output_size and
 * output_ratio, a kernel outside [1, I], an output extent below 1 or with
 * O + K - 1 too large, or a sample outside [0, 1); TG_ESHAPE for x's rank, an
 * empty dim but the batch or random_samples' shape; TG_EDTYPE for x not
 * f32 or f64 or random_samples of another dtype. */
TG_API int tg_fractional_max_pool(tg_tensor **out, tg_tensor **indices, tg_tensor *x,
                                  int n_spatial, const int64_t *kernel,
                                  const int64_t *output_size, const double *output_ratio,
                                  tg_tensor *random_samples);

/* ---- sampling at grid points: F.grid_sample and F.affine_grid ---- */

/* grid_sample's interpolation; the values are torch's
 * GridSamplerInterpolation. */
typedef enum tg_grid_sample_mode {
    TG_GRID_SAMPLE_BILINEAR = 0,
    TG_GRID_SAMPLE_NEAREST = 1,
    TG_GRID_SAMPLE_BICUBIC = 2
} tg_grid_sample_mode;

/* grid_sample's reading outside the input (torch's GridSamplerPadding):
 * zeros, the nearest border pixel, or the position reflected at the
 * borders.  Not tg_pad_mode: reflection here mirrors a continuous position
 * (about the outer edges without align_corners). */
typedef enum tg_grid_sample_padding {
    TG_GRID_SAMPLE_ZEROS = 0,
    TG_GRID_SAMPLE_BORDER = 1,
    TG_GRID_SAMPLE_REFLECTION = 2
} tg_grid_sample_padding;

/* F.grid_sample(input, grid, mode, padding_mode, align_corners) of torch
 * 1.13: input (N, C, H_in, W_in) with grid (N, H, W, 2) gives (N, C, H, W);
 * input (N, C, D_in, H_in, W_in) with grid (N, D, H, W, 3) gives
 * (N, C, D, H, W).  grid[..., 0] is x (along W), [..., 1] y, [..., 2] z,
 * each -1 .. 1 across the input: with align_corners the centres of the
 * corner pixels, without it their outer edges.  A position
 *   align_corners:  r = (c + 1) / 2 * (S - 1),  otherwise r = ((c + 1) S - 1) / 2
 * reads, by padding_mode, zeros outside, the clipped position, or the
 * position reflected at the borders (and clipped).  Nearest takes pixel
 * nearbyint(r) (ties to even), bilinear the 2 (x 2 x 2) pixels around r,
 * bicubic (4-D only) the 4 x 4 around r with Keys's weights (A = -0.75),
 * the padding applied to each tap's index, as torch's.  f32 and f64 (input
 * and grid of the same dtype), computed in their own arithmetic; f16 and
 * bf16 only inside an autocast scope, which computes in f32 as torch's CPU
 * autocast does.  Gradients for input and grid, torch's: the grid's is 0
 * for nearest and at and beyond the clipped ends (border, reflection).  A
 * create_graph backward records the gradients, and differentiating them
 * again is TG_EUNSUPPORTED, where torch 1.13 raises "derivative for
 * grid_sampler_2d_backward is not implemented".  The batch runs over the
 * thread pool with results independent of the thread count.  A NaN grid
 * coordinate reads pixel 0 along its axis with border and reflection (as
 * torch's 2-D kernel) and nothing with zeros (0; torch's 2-D bilinear
 * gives NaN); bicubic gives NaN, as torch.  input and grid are borrowed;
 * *out receives a new reference; on error it is untouched.  TG_EINVAL for
 * a NULL argument or an unknown mode or padding_mode, and for bicubic with
 * a 5-D input; TG_EDTYPE for an integer tensor, dtypes that differ, or
 * f16/bf16 outside autocast; TG_ESHAPE with torch's words for an input
 * that is not 4-D or 5-D, a grid of another rank, batch size or last
 * extent (2 for 4-D, 3 for 5-D), or an empty spatial dim of input. */
TG_API int tg_grid_sample(tg_tensor **out, tg_tensor *input, tg_tensor *grid,
                          tg_grid_sample_mode mode, tg_grid_sample_padding padding_mode,
                          bool align_corners);

/* F.affine_grid(theta, size, align_corners) of torch 1.13: the sampling
 * grid of the affine maps theta for an output of size (n = 4: (N, C, H, W),
 * theta (N, 2, 3), result (N, H, W, 2); n = 5: (N, C, D, H, W), theta
 * (N, 3, 4), result (N, D, H, W, 3)).  Point (.., i, j) is theta times
 * (x_j, y_i, 1) (and z), where x_j runs evenly over -1 .. 1 across W
 * (align_corners) or over the pixel centres -1 + 1/W .. 1 - 1/W (not), and
 * is 0 for an extent of 1: a base grid times theta^T by tg_matmul, so
 * differentiable in theta to any order.  theta and size are borrowed;
 * *out receives a new reference; on error it is untouched.  TG_EINVAL for
 * a NULL out, theta or size, or n not 4 or 5; TG_EDTYPE for an integer
 * theta; TG_ESHAPE with torch's words for theta not (N, 2, 3) / (N, 3, 4)
 * of size's N, or a size entry < 1 (torch takes a 0 extent with
 * align_corners only when another is 1). */
TG_API int tg_affine_grid(tg_tensor **out, tg_tensor *theta, int n, const int64_t *size,
                          bool align_corners);

#ifdef __cplusplus
}
#endif
#endif
