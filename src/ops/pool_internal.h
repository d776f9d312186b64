/* src/ops/pool_internal.h - what avg_pool.c, max_pool.c, adaptive_pool.c,
 * adaptive_max_pool.c, upsample.c, interpolate.c and the pooling modules
 * (src/nn/pool_modules.c) share: parameter checks, the output shape and the geometry of a call. */
#ifndef TAPEGRAD_OPS_POOL_INTERNAL_H
#define TAPEGRAD_OPS_POOL_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "autograd/tape.h"
#include "core/core.h"
#include "tapegrad/pool.h"

typedef enum tg__pool_kind {
    TG__AVG_POOL,
    TG__MAX_POOL,
    TG__UPSAMPLE,          /* nearest, integer scale factors */
    TG__UPSAMPLE_LINEAR,   /* linear, bilinear, trilinear to a given size */
    TG__UPSAMPLE_CUBIC,    /* bicubic to a given size */
    TG__ADAPTIVE_AVG_POOL, /* adaptive average pooling to a given size */
    TG__ADAPTIVE_MAX_POOL, /* adaptive max pooling to a given size */
} tg__pool_kind;

/* "avg_pool2d", "max_pool1d", "upsample_nearest3d", "upsample_bilinear2d",
 * "adaptive_avg_pool1d", "adaptive_max_pool3d" ("avg_pool" ... when
 * n_spatial is not 1..3): the
 * name messages give the call. */
const char *tg__pool_opname(tg__pool_kind kind, int n_spatial);

/* Checks n_spatial and p for a pooling of that kind (messages name op) and
 * writes into *r (may be NULL) p with its strides resolved (0: the kernel). */
int tg__pool_check_params(const char *op, tg__pool_kind kind, int n_spatial,
                          const tg_pool_params *p, tg_pool_params *r);
/* Checks scale[0..n_spatial) (each in [1, TG_POOL_MAX_PARAM]). */
int tg__upsample_check_scale(const char *op, int n_spatial, const int64_t *scale);
/* Checks size[0..n_spatial) (each in [1, TG_POOL_MAX_PARAM]). */
int tg__upsample_check_size(const char *op, int n_spatial, const int64_t *size);
/* The antialiased interpolation (interpolate_aa.c): its op's name,
 * "upsample_bilinear2d_aa" or "upsample_bicubic2d_aa", and the check that
 * mode is one it has (TG_UPSAMPLE_LINEAR or TG_UPSAMPLE_BICUBIC; messages
 * name fn). */
const char *tg__upsample_aa_opname(bool cubic);
int tg__upsample_check_aa_mode(const char *fn, tg_upsample_mode mode);
/* The kernels an adaptive pooling may take, for the tests that compare
 * them (a set of flags; 0: the fastest that apply):
 *   TG__POOL_GENERAL  the adaptive kernels even where avg_pool's or
 *                     max_pool's apply
 *   TG__POOL_SERIAL   one window of one plane at a time: none of
 *                     pool_small.c's kernels */
enum { TG__POOL_GENERAL = 1, TG__POOL_SERIAL = 2 };
/* tg_adaptive_avg_pool with the kernels `kernels` allows (adaptive_pool.c). */
int tg__adaptive_avg_pool_call(tg_tensor **out, tg_tensor *x, int n_spatial,
                               const int64_t *output_size, unsigned kernels);
/* tg_adaptive_max_pool with the kernels `kernels` allows
 * (adaptive_max_pool.c). */
int tg__adaptive_max_pool_call(tg_tensor **out, tg_tensor **indices, tg_tensor *x,
                               int n_spatial, const int64_t *output_size, unsigned kernels);
/* Checks an input's rank: n_spatial + 1 (C, S...) or + 2 (B, C, S...). */
int tg__pool_check_rank(const char *op, int n_spatial, int ndim);

/* The parameters of a recorded call, copied into its node: n_spatial, the
 * resolved pooling parameters, scale factors or output size, and x's shape
 * (the backward's result). */
typedef struct tg__pool_call {
    int ns;
    tg_pool_params p;                  /* pooling */
    int64_t scale[TG_POOL_MAX_SPATIAL];   /* nearest upsampling */
    int64_t size[TG_POOL_MAX_SPATIAL];    /* linear, cubic upsampling, adaptive pooling: the
                                             output extents */
    bool align_corners;                   /* linear, cubic upsampling */
    bool cubic;                           /* interpolate.c: the cubic ops' call */
    bool general;                         /* adaptive pooling: the general kernels even where
                                             avg_pool's or max_pool's apply (the tests compare
                                             the two) */
    bool serial;                          /* adaptive pooling: none of pool_small.c's kernels
                                             (the tests compare them with the others) */
    int ndim;
    int64_t shape[TG_MAX_DIMS];
} tg__pool_call;

/* The checks of tg_adaptive_avg_pool and tg_adaptive_max_pool (messages
 * name op): out, x and output_size not NULL, n_spatial 1..3, x's rank, each
 * output_size entry in [0, TG_POOL_MAX_PARAM] (0 only for an axis of x's of
 * extent >= 1); *c gets the call, its sizes resolved (adaptive_pool.c). */
int tg__adaptive_pool_check(const char *op, tg_tensor **out, tg_tensor *x, int n_spatial,
                            const int64_t *output_size, tg__pool_call *c);

/* Checks call c of that kind on an input of rank c->ndim and shape
 * c->shape (dtype: x's, for the message) and gives the output shape:
 * n_spatial and the parameters (a pooling's strides are resolved in c->p),
 * the input's rank (n_spatial + 1 or + 2), its extents (every dim but the
 * batch >= 1, a float dtype), each output extent >= 1 and the result's
 * size.  Messages name op. */
int tg__pool_prepare(const char *op, tg__pool_kind kind, tg_dtype dtype, tg__pool_call *c,
                     int64_t *out);
/* The call of a forward op of that kind on x: params' n_spatial and
 * parameters with x's rank and shape, checked by tg__pool_prepare (messages
 * name the op); os gets the output shape. */
int tg__pool_prepare_x(tg__pool_kind kind, const tg__pool_call *params, const tg_tensor *x,
                       tg__pool_call *c, int64_t *os);
/* The shape rule of the forward ops (upsample_nearest, avg_pool, max_pool):
 * x's dtype and the output shape of the call of that kind on x = in[0]. */
int tg__pool_forward_shape(tg__pool_kind kind, tg_tensor *const *in, const void *params,
                           tg_dtype *dtype, int *ndim, int64_t *shape);
/* Checks a backward op's input g (gradient of a call's output, or of its
 * gradient) against the shape `want` that call c gives or takes. */
int tg__pool_check_grad(const char *op, const tg_tensor *g, const tg__pool_call *c,
                        const int64_t *want);

/* A call's geometry with its N spatial axes placed last of three, the axes
 * before them of extent 1, kernel 1, stride 1, no padding, so that one loop
 * nest serves N = 1, 2, 3.  planes is the product of the dims before the
 * spatial ones (B*C, or C unbatched). */
typedef struct tg__pool_geom {
    int64_t planes;
    int64_t in[3], out[3];             /* spatial extents */
    int64_t k[3], s[3], p[3], dil[3];
    int64_t in_plane, out_plane;       /* elements of one plane */
} tg__pool_geom;

/* The geometry of call c of that kind whose output has shape out_shape.
 * A nearest upsampling's k holds its scale factors (s 1, p 0, dil 1); a
 * linear one and an adaptive pooling have k 1, s 1, p 0, dil 1. */
void tg__pool_geom_of(tg__pool_kind kind, const tg__pool_call *c, const int64_t *out_shape,
                      tg__pool_geom *g);

/* ---- the index-driven pair of a max pooling (src/ops/max_pool.c) ----
 * max_pool and adaptive max pooling each have two ops, each the other's
 * adjoint, over the indices their forward picked (an i64 tensor of y's
 * shape, in[1]): a scatter (in[0] g of y's shape, the result of x's, given
 * in the params: each g[o] added into dx[idx[o]] of its plane) and a gather
 * (in[0] h of x's shape, the result of y's: h[idx[o]], 0 where max_pool's
 * window is empty, index -1).  The indices are checked (i64, y's shape, in
 * [-1 for max_pool else 0, the plane's size)) and saved when recorded. */
int tg__pool_indexed_forward(const char *op, tg__pool_kind kind, bool scatter, tg_ctx *ctx,
                             tg_tensor **out, tg_tensor *const *in, const void *params);
/* op(a, the indices ctx saved first) with params: a node's gradient
 * through the other op of the pair. */
int tg__pool_call_indexed(const tg_op_schema *op, tg_tensor **out, tg_tensor *a, tg_ctx *ctx,
                          const tg__pool_call *params);
/* The gradient of a max pooling forward (its params, x its input 0, the
 * indices saved first): gi[0] = scatter(g, idx), the params told x's shape. */
int tg__pool_indexed_backward(const tg_op_schema *scatter, tg_ctx *ctx, tg_tensor *g,
                              tg_tensor **gi);

/* ---- the kernels (pool_kernels.c, pool_kernels_tmpl.h) ----
 *
 * They compute in the compute dtype (f32 for f32, f16 and bf16; f64 for
 * f64), plane by plane, with the innermost loop along the last spatial axis
 * of the output so that the compiler vectorises it.  Each output's terms are
 * added in PyTorch's CPU order, so f32 results are PyTorch's to the bit. */

/* The windows of a pooling call, tabulated once: for axis a and output
 * index o, window o's elements inside x are lo[a][o], lo[a][o] + dil, ...
 * below hi[a][o] (none when lo >= hi; lo is the first on the dilation
 * grid), and div[a][o] is its factor of avg_pool's divisor (the window's
 * size counting the padding, or its count inside x).  When every divisor,
 * the product of its three factors, is exact in the compute dtype, divt[a]
 * holds the factors in it (float or double), so that the product of
 * converted factors is the divisor converted; divt[0] is NULL otherwise.
 * Along the last axis, tap j (x index o*s - p + j*dil) of window o lies
 * inside x exactly for o in [olo[t], ohi[t]), t = j - j0, for j in
 * [j0, j0 + taps); the other taps lie outside x for every o.  Every tap
 * j0 .. j0 + taps - 1 lies inside x for o in [in_lo, in_hi) (empty when
 * in_lo >= in_hi). */
typedef struct tg__pool_axes {
    int64_t *lo[3], *hi[3], *div[3];
    void *divt[3];
    int64_t j0, taps, *olo, *ohi, in_lo, in_hi;
    void *mem;   /* owns the tables */
} tg__pool_axes;

/* Tabulates the windows of geometry g (cip: avg_pool's count_include_pad)
 * for kernels computing in cdt.  TG_ENOMEM when the tables cannot be
 * allocated. */
int tg__pool_axes_init(tg__pool_axes *ax, const tg__pool_geom *g, bool cip, tg_dtype cdt);
void tg__pool_axes_free(tg__pool_axes *ax);
/* The windows of an adaptive pooling of geometry g (its in and out): for
 * axis a and output index o, lo[a][o] = floor(o*I/O), hi[a][o] =
 * ceil((o+1)*I/O) and div[a][o] = hi - lo (PyTorch's start_index,
 * end_index); divt, olo and ohi are not set.  TG_ENOMEM when the tables
 * cannot be allocated. */
int tg__adaptive_axes_init(tg__pool_axes *ax, const tg__pool_geom *g);

/* One run of a kernel, shared by the plane ranges of tg__parallel_range:
 * src and dst hold whole planes in the compute dtype, contiguous (x's or
 * the output's plane size, by the kernel); idx are max_pool's indices
 * within a plane, one per output element (-1: an empty window). */
typedef struct tg__pool_job {
    const tg__pool_geom *g;
    const tg__pool_axes *ax;
    const void *src;
    void *dst;
    const int64_t *idx;   /* read: max_pool_backward, max_pool_gather */
    int64_t *idx_out;     /* written by max_pool's forward, NULL when not kept */
    bool one_division;    /* adaptive_avg_adjoint, adaptive_avg_planes: divide by a window's
                             size (the product of its extents) at once, as avg_pool's kernels
                             do, rather than by each extent in turn */
} tg__pool_job;

/* A kernel over planes [lo, hi) of a job, in one compute dtype. */
typedef void (*tg__pool_kernel)(void *job, int64_t lo, int64_t hi);
typedef struct tg__pool_kernels {
    tg__pool_kernel f32, f64;
} tg__pool_kernels;

/* The kernels, each with the shapes of its src and dst (per plane):
 *   avg_pool          x (in) -> y (out): window sums / divisors
 *   avg_pool_adjoint  g (out) -> dx (in, zeroed): g / divisor added over
 *                     each window
 *   max_pool          x (in) -> y (out) and idx_out: each window's maximum
 *                     (f32: in_plane <= INT32_MAX; a maximum is exact in
 *                     f64 too)
 *   max_pool_scatter  g (out) -> dx (in, zeroed): g[o] added into dx[idx[o]]
 *   max_pool_gather   h (in) -> y (out): h[idx[o]], 0 for an empty window
 *   upsample_sum      g (out) -> dx (in, zeroed): each element's block of g
 *                     summed (nearest upsampling's adjoint; k: the scales)
 *   adaptive_avg      x (in) -> y (out): the sums over the windows of
 *                     tg__adaptive_axes_init divided by their three
 *                     extents in turn
 *   adaptive_avg_adjoint  g (out) -> dx (in, zeroed): g divided so (or
 *                     by the window's size, job->one_division), added over
 *                     each window
 *   adaptive_max      x (in) -> y (out) and idx_out (may be NULL): the
 *                     maxima over the windows of tg__adaptive_axes_init and
 *                     their indices, by max_pool's scan
 * and pool_small.c's, for poolings to small outputs, each to the bit the
 * result of the kernel named:
 *   adaptive_max_lanes   adaptive_max's, with lanes (f32: in_plane <=
 *                        INT32_MAX)
 *   adaptive_avg_planes  adaptive_avg's (or with job->one_division
 *                        avg_pool's, where the windows are its), with the
 *                        sums of several planes side by side; but for a
 *                        whole f32 plane of 64 or more elements (one output
 *                        per plane) the sum of tg__plane_sums_f32, in its
 *                        own order, within its bound */
extern const tg__pool_kernels tg__avg_pool_kernels, tg__avg_pool_adjoint_kernels,
    tg__max_pool_kernels, tg__max_pool_scatter_kernels, tg__max_pool_gather_kernels,
    tg__upsample_sum_kernels, tg__adaptive_avg_kernels, tg__adaptive_avg_adjoint_kernels,
    tg__adaptive_max_kernels, tg__adaptive_max_lanes_kernels, tg__adaptive_avg_planes_kernels;
/* The kernels of the sums of whole f32 planes (src/ops/pool_simd.c), all
 * with the same bits: the choice of a test (the variable, read at each
 * call) or TG_POOL_KERNEL=portable|avx2|avx512 when the CPU runs it, else
 * the widest it runs. */
typedef enum tg__pool_kernel_id {
    TG__POOL_KERNEL_AUTO = 0,
    TG__POOL_KERNEL_PORTABLE,
    TG__POOL_KERNEL_AVX2,
    TG__POOL_KERNEL_AVX512,
} tg__pool_kernel_id;
bool tg__pool_kernel_available(tg__pool_kernel_id k);
const char *tg__pool_kernel_name(tg__pool_kernel_id k);
tg__pool_kernel_id tg__pool_kernel_get(void);
/* s[p] = the sum of x[p n], ..., x[p n + n - 1] for p in [0, np): the sums
 * of np planes of n elements, one after the other in x.  Below 64
 * elements a plane's sum is added from 0 left to right; from 64 on, in 64
 * partial sums of 16 lanes folded in a fixed order (pool_simd.c), within
 * (ceil(n / 64) + 6) u sum |x| of the exact sum. */
void tg__plane_sums_f32(float *s, const float *x, int64_t n, int64_t np);

/* The longest x row whose columns adaptive_max_lanes holds as lanes (on
 * the stack). */
#define TG__POOL_LANE_COLS 512

/* Runs kernel k over the planes of job->g (in parallel when large) in
 * compute dtype cdt (TG_F32 or TG_F64) with job->src the elements of src in
 * cdt (src's own storage when it is contiguous in it, else a copy), into a
 * new tensor *out of src's dtype and shape (ndim, shape) (job->dst: *out's
 * storage when that dtype is cdt, else a buffer rounded into it once at the
 * end; zeroed first when `zeroed`: the kernel adds into it).  TG_ENOMEM,
 * with *out untouched. */
int tg__pool_run(const tg__pool_kernels *k, tg__pool_job *job, tg_dtype cdt,
                 const tg_tensor *src, int ndim, const int64_t *shape, bool zeroed,
                 tg_tensor **out);

#endif
