/* src/ops/grid_sample.c - F.grid_sample (torch 1.13's grid_sampler_2d and
 * grid_sampler_3d on the CPU) and its gradient grid_sample_backward.
 *
 * input is (N, C, S...) with ns = 2 (H, W) or 3 (D, H, W) spatial dims,
 * grid (N, O..., ns); out[n, c, o] samples input[n, c] at grid[n, o], whose
 * coordinate 0 is x (along W), 1 is y (H), 2 is z (D), each -1..1 across the
 * extent S of its axis.  A coordinate c becomes a pixel position
 *   align_corners:  r = (c + 1) / 2 * (S - 1)      (-1, 1: the corner pixels)
 *   otherwise:      r = ((c + 1) * S - 1) / 2      (-1, 1: the outer edges)
 * then the padding mode: zeros keeps r (pixels outside read 0), border
 * clips r to [0, S - 1], reflection mirrors r at the ends (align_corners:
 * at 0 and S - 1; otherwise at -1/2 and S - 1/2) and then clips.  Then
 *   nearest:   the pixel nearbyint(r) (round half to even)
 *   bilinear:  the 2^ns pixels floor(r) and floor(r) + 1 per axis, weighted
 *              by the products of (floor(r) + 1 - r) or (r - floor(r))
 *   bicubic:   (ns = 2) the 4 x 4 pixels floor(r) - 1 .. floor(r) + 2 of the
 *              unpadded r, Keys's weights (A = -0.75) of r - floor(r); each
 *              tap's index goes through the padding mode (torch's
 *              get_value_bounded), so reflection and border apply per tap.
 * The gradients, torch's: d input adds g times each weight into the pixel
 * read; d grid is g times the derivative of the weights in r (the values
 * read times the other axes' factors, +-1), times dr/dc: (S - 1)/2 or S/2,
 * times the clip's derivative (0 at and beyond either end) and the
 * reflection's (+-1); nearest's is 0.  So the grid gradient is torch's
 * piecewise one, kinks included.  A NaN coordinate clips to 0 (border,
 * reflection: torch's 2-D kernel's pixel) and reads nothing with zeros.
 *
 * grid_sample's backward is the op grid_sample_backward(g, input, grid),
 * whose output packs d input and d grid into one flat tensor that the
 * backward slices: recorded ops, so a create_graph backward gives gradients
 * that carry a graph, as torch's.  grid_sample_backward's own backward is
 * refused (TG_EUNSUPPORTED), as torch 1.13 raises "derivative for
 * aten::grid_sampler_2d_backward is not implemented": a second derivative
 * through grid_sample fails where torch's does.
 *
 * f32 and f64 in their own arithmetic; f16 and bf16 only under autocast,
 * which computes the op in f32 (torch's CPU autocast lists grid_sampler as
 * fp32; its CPU kernel has no half types).  The forward runs the flat
 * (N, points) range over the thread pool; the backward is two passes that
 * each own what they write: d input by (sample, group of channels), each
 * plane's adds in the points' order, and d grid by point, each point's sum
 * over the channels in order, so the sums do not depend on the thread
 * count and a batch of one uses every thread.  f32 takes the kernels of
 * grid_sample_2d.h (2-D bilinear, nearest), grid_sample_cubic.h (bicubic)
 * and grid_sample_3d.h (3-D) instead, vectorized, which give the same
 * bits. */
#include <assert.h>
#include <math.h>
#include <string.h>

#include "core/core.h"
#include "autograd/tape.h"
#include "ops/families.h"
#include "ops/grid_sample_internal.h"
#include "tapegrad/ops.h"
#include "tapegrad/pool.h"

/* A kernel over [lo, hi) of its range (tg__parallel_range's body). */
typedef void (*gs_range_fn)(void *job, int64_t lo, int64_t hi);

typedef struct gs_params {
    int mode, pad;   /* tg_grid_sample_mode, tg_grid_sample_padding */
    bool align;
} gs_params;

/* What the kernels read and write; every tensor contiguous. */
typedef struct gs_job {
    const void *x;      /* (N, C, in...) */
    const void *grid;   /* (N, points, ns) */
    void *y;            /* forward: (N, C, points) */
    const void *g;      /* backward: (N, C, points) */
    void *dx;           /* backward: (N, C, in...), zeroed */
    void *dgrid;        /* backward: (N, points, ns) */
    int64_t C, in[3], in_plane, npts;
    int64_t groups;     /* backward: groups of channels per sample */
    int ns, mode, pad;
    int level;          /* f32: the kernel level of grid_sample_2d.h */
    bool align;
} gs_job;

#define GS_T float
#define GS_S f32
#include "ops/grid_sample_tmpl.h"
#undef GS_T
#undef GS_S
#define GS_T double
#define GS_S f64
#include "ops/grid_sample_tmpl.h"
#undef GS_T
#undef GS_S
#include "ops/grid_sample_2d.h"
#include "ops/grid_sample_cubic.h"
#include "ops/grid_sample_3d.h"

/* Off on a thread where a test compares the vectorized kernels with the
 * general ones (tg__grid_sample_set_fast). */
static _Thread_local bool fast_off;

void tg__grid_sample_set_fast(bool on) { fast_off = !on; }

/* The vectorized kernels apply (f32, offsets in int32; not bicubic 3-D). */
static bool gs_fast(const gs_job *j, tg_dtype dt)
{
    return !fast_off && (gs2_applies(j, dt) || gs3_applies(j, dt));
}

/* ---- checks: torch's grid_sampler() words ---- */

static int gs_shape(int n, tg_tensor *const *in, const void *params, tg_dtype *dtype, int *ndim,
                    int64_t *shape)
{
    (void)n;
    const gs_params *p = params;
    const tg_tensor *x = in[0], *grid = in[1];
    char s1[96], s2[96];
    TG_CHECK(x != NULL, TG_EINVAL, "grid_sample: input must not be NULL");
    TG_CHECK(grid != NULL, TG_EINVAL, "grid_sample: grid must not be NULL");
    TG_CHECK(x->dtype == grid->dtype, TG_EDTYPE,
             "grid_sample: input has dtype %s and grid has %s; they must have the same dtype",
             tg_dtype_name(x->dtype), tg_dtype_name(grid->dtype));
    TG_CHECK(x->dtype == TG_F32 || x->dtype == TG_F64, TG_EDTYPE,
             "grid_sample: input has dtype %s; it must be f32 or f64 (torch's CPU kernel; "
             "autocast computes f16 and bf16 in f32)", tg_dtype_name(x->dtype));
    tg_shape_str(s1, sizeof s1, x->ndim, x->shape);
    tg_shape_str(s2, sizeof s2, grid->ndim, grid->shape);
    const int want = x->ndim == 4 ? 4 : 5;
    TG_CHECK(x->ndim == want && grid->ndim == want, TG_ESHAPE,
             "grid_sample: expected %dD input and grid with same number of dimensions, but got "
             "input with sizes %s and grid with sizes %s", want, s1, s2);
    TG_CHECK(x->shape[0] == grid->shape[0], TG_ESHAPE,
             "grid_sample: expected grid and input to have same batch size, but got input with "
             "sizes %s and grid with sizes %s", s1, s2);
    TG_CHECK(grid->shape[want - 1] == want - 2, TG_ESHAPE,
             "grid_sample: expected grid to have size %d in last dimension, but got grid with "
             "sizes %s", want - 2, s2);
    for (int d = 2; d < want; d++)
        TG_CHECK(x->shape[d] > 0, TG_ESHAPE,
                 "grid_sample: expected input to have non-empty spatial dimensions, but input "
                 "has sizes %s with dimension %d being empty", s1, d);
    TG_CHECK(!(want == 5 && p->mode == TG_GRID_SAMPLE_BICUBIC), TG_EINVAL,
             "grid_sample: bicubic interpolation only supports 4D input (input has sizes %s)",
             s1);
    *dtype = x->dtype;
    *ndim = want;
    shape[0] = x->shape[0];
    shape[1] = x->shape[1];
    for (int d = 2; d < want; d++) shape[d] = grid->shape[d - 1];
    return TG_OK;
}

/* The job of contiguous x and grid (shapes checked). */
static gs_job job_of(const tg_tensor *x, const tg_tensor *grid, const gs_params *p)
{
    gs_job j = {.x = tg_tensor_cdata(x), .grid = tg_tensor_cdata(grid), .C = x->shape[1],
                .in_plane = 1, .npts = 1, .ns = x->ndim - 2, .mode = p->mode, .pad = p->pad,
                .align = p->align};
    for (int a = 0; a < j.ns; a++) {
        j.in[a] = x->shape[2 + a];
        j.in_plane *= j.in[a];
        j.npts *= grid->shape[1 + a];
    }
    return j;
}

/* The work of a range element worth a thread: a few thousand taps. */
static bool worth_threads(const gs_job *j, int64_t elems, int64_t per_elem)
{
    const int taps = j->mode == TG_GRID_SAMPLE_NEAREST ? 1 : j->mode == TG_GRID_SAMPLE_BICUBIC
                                                                 ? 16 : 1 << j->ns;
    return elems > 1 && (double)elems * (double)per_elem * taps > 16384;
}

/* ---- grid_sample ---- */

static int gs_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                      const void *params)
{
    (void)n;
    const gs_params *p = params;
    tg_dtype dt = TG_F32;
    int nd = 0;
    int64_t shape[TG_MAX_DIMS];
    TG_TRY(gs_shape(2, in, params, &dt, &nd, shape));
    tg_tensor *x = NULL, *grid = NULL, *y = NULL;
    int rc = TG_OK;
    TG_TRY_GOTO(tg_contiguous(&x, in[0]));
    TG_TRY_GOTO(tg_contiguous(&grid, in[1]));
    y = tg__tensor_uninit(dt, nd, shape);
    if (!y) {
        rc = TG_ENOMEM;
        goto done;
    }
    gs_job j = job_of(x, grid, p);
    j.y = tg_tensor_data(y);
    const int64_t total = shape[0] * j.npts;
    if (gs_fast(&j, dt)) {
        const bool cubic = j.mode == TG_GRID_SAMPLE_BICUBIC;
        j.level = gs2_level();
        tg__parallel_range(total, worth_threads(&j, total, j.C),
                           j.ns == 3 ? gs3_forward : cubic ? gs2c_forward : gs2_forward, &j);
    } else {
        tg__parallel_range(total, worth_threads(&j, total, j.C),
                           dt == TG_F64 ? gs_forward_f64 : gs_forward_f32, &j);
    }
    if (ctx) {
        TG_TRY_GOTO(tg__ctx_save(ctx, in[0]));
        TG_TRY_GOTO(tg__ctx_save(ctx, in[1]));
    }
    *out = y;
    y = NULL;
done:
    tg_tensor_release(x);
    tg_tensor_release(grid);
    tg_tensor_release(y);
    return rc;
}

static const tg_op_schema gs_op, gs_backward_op;

/* Slice [lo, lo + numel(like)) of flat packed, shaped as like (a view). */
static int unpack(tg_tensor **out, tg_tensor *packed, int64_t lo, const tg_tensor *like)
{
    tg_tensor *s = NULL;
    int rc = tg_slice(&s, packed, 0, lo, lo + tg_tensor_numel(like), 1);
    if (rc >= 0) rc = tg_reshape(out, s, like->ndim, like->shape);
    tg_tensor_release(s);
    return rc;
}

/* d input and d grid: grid_sample_backward's packed result, sliced. */
static int gs_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    tg_tensor *x, *grid, *packed = NULL;
    TG_TRY(tg__ctx_saved(ctx, 0, &x));
    TG_TRY(tg__ctx_saved(ctx, 1, &grid));
    int rc = TG_OK;
    TG_TRY_GOTO(tg_op_call(&gs_backward_op, &packed, 3, (tg_tensor *[]){g, x, grid},
                           tg__ctx_params(ctx), sizeof(gs_params)));
    if (tg__ctx_needs_grad(ctx, 0)) TG_TRY_GOTO(unpack(&gi[0], packed, 0, x));
    if (tg__ctx_needs_grad(ctx, 1))
        TG_TRY_GOTO(unpack(&gi[1], packed, tg_tensor_numel(x), grid));
done:
    tg_tensor_release(packed);
    return rc;
}

/* ---- grid_sample_backward: (g, input, grid) -> [d input | d grid] flat ---- */

static int gsb_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                       const void *params)
{
    (void)ctx, (void)n;
    const gs_params *p = params;
    tg_dtype dt = TG_F32;
    int nd = 0;
    int64_t shape[TG_MAX_DIMS];
    TG_TRY(gs_shape(2, in + 1, params, &dt, &nd, shape));
    char s1[96], s2[96];
    TG_CHECK(in[0] != NULL && in[0]->dtype == dt && in[0]->ndim == nd &&
                 memcmp(in[0]->shape, shape, sizeof(int64_t) * (size_t)nd) == 0,
             TG_ESHAPE, "grid_sample_backward: grad_output has shape %s; it must be %s (%s)",
             in[0] ? tg_shape_str(s1, sizeof s1, in[0]->ndim, in[0]->shape) : "NULL",
             tg_shape_str(s2, sizeof s2, nd, shape), tg_dtype_name(dt));
    tg_tensor *g = NULL, *x = NULL, *grid = NULL, *res = NULL;
    int rc = TG_OK;
    TG_TRY_GOTO(tg_contiguous(&g, in[0]));
    TG_TRY_GOTO(tg_contiguous(&x, in[1]));
    TG_TRY_GOTO(tg_contiguous(&grid, in[2]));
    const int64_t nx = tg_tensor_numel(x), total = nx + tg_tensor_numel(grid);
    res = tg__tensor_empty(dt, 1, &total);   /* d input accumulates into zeros */
    if (!res) {
        rc = TG_ENOMEM;
        goto done;
    }
    gs_job j = job_of(x, grid, p);
    j.g = tg_tensor_cdata(g);
    j.dx = tg_tensor_data(res);
    j.dgrid = (char *)j.dx + (size_t)nx * tg_dtype_size(dt);
    /* groups of channels only when the samples are fewer than the threads;
     * the results do not depend on them */
    const int64_t N = x->shape[0], t = tg_get_num_threads();
    j.groups = N >= t ? 1 : j.C < 2 * t ? j.C : 2 * t;
    gs_range_fn dinput = dt == TG_F64 ? gs_dinput_f64 : gs_dinput_f32;
    gs_range_fn dgrid = dt == TG_F64 ? gs_dgrid_f64 : gs_dgrid_f32;
    if (gs_fast(&j, dt)) {
        const bool cubic = j.mode == TG_GRID_SAMPLE_BICUBIC;
        j.level = gs2_level();
        dinput = j.ns == 3 ? gs3_dinput : cubic ? gs2c_dinput : gs2_dinput;
        dgrid = j.ns == 3 ? gs3_dgrid : cubic ? gs2c_dgrid : gs2_dgrid;
    }
    const int64_t ng = N * j.groups, np = N * j.npts;
    if (j.groups > 0)
        tg__parallel_range(ng, worth_threads(&j, ng, j.C / j.groups * j.npts), dinput, &j);
    if (j.mode != TG_GRID_SAMPLE_NEAREST)   /* nearest's d grid: the zeros */
        tg__parallel_range(np, worth_threads(&j, np, j.C), dgrid, &j);
    *out = res;
    res = NULL;
done:
    tg_tensor_release(g);
    tg_tensor_release(x);
    tg_tensor_release(grid);
    tg_tensor_release(res);
    return rc;
}

/* torch 1.13 has no derivative of grid_sampler_2d_backward either. */
static int gsb_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    (void)ctx, (void)g, (void)gi;
    return tg__error(TG_EUNSUPPORTED, "grid_sample_backward: the second derivative of "
                     "grid_sample is not implemented (torch 1.13: derivative for "
                     "aten::grid_sampler_2d_backward is not implemented)");
}

/* FP32, as torch's CPU autocast lists grid_sampler. */
static const tg_op_schema gs_op = {
    .name = "grid_sample", .arity = 2, .amp = TG_AMP_FP32, .forward = gs_forward,
    .backward = gs_backward, .shape = gs_shape, .double_backward = true,
    .vjp = "dinput, dgrid = grid_sample_backward(g, input, grid): g times the weights added "
           "into the pixels read; the weights' derivative in the grid times the values read"};
static const tg_op_schema gs_backward_op = {
    .name = "grid_sample_backward", .arity = 3, .amp = TG_AMP_KEEP, .forward = gsb_forward,
    .backward = gsb_backward, .double_backward = false,
    .vjp = "not implemented (as torch 1.13's grid_sampler_2d_backward)"};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__grid_sample_ops[] = {&gs_op, &gs_backward_op};
static_assert(sizeof tg__grid_sample_ops / sizeof tg__grid_sample_ops[0] == TG__grid_sample_N,
              "src/ops/families.h must count the grid_sample ops");

int tg_grid_sample(tg_tensor **out, tg_tensor *input, tg_tensor *grid, tg_grid_sample_mode mode,
                   tg_grid_sample_padding padding_mode, bool align_corners)
{
    TG_CHECK(out != NULL, TG_EINVAL, "grid_sample: out must not be NULL");
    TG_CHECK(input != NULL, TG_EINVAL, "grid_sample: input must not be NULL");
    TG_CHECK(grid != NULL, TG_EINVAL, "grid_sample: grid must not be NULL");
    TG_CHECK(mode >= TG_GRID_SAMPLE_BILINEAR && mode <= TG_GRID_SAMPLE_BICUBIC, TG_EINVAL,
             "grid_sample: mode=%d must be TG_GRID_SAMPLE_BILINEAR, _NEAREST or _BICUBIC",
             (int)mode);
    TG_CHECK(padding_mode >= TG_GRID_SAMPLE_ZEROS && padding_mode <= TG_GRID_SAMPLE_REFLECTION,
             TG_EINVAL, "grid_sample: padding_mode=%d must be TG_GRID_SAMPLE_ZEROS, _BORDER or "
             "_REFLECTION", (int)padding_mode);
    TG_CHECK(tg_dtype_is_float(input->dtype), TG_EDTYPE,
             "grid_sample: input has dtype %s; it must be a float tensor",
             tg_dtype_name(input->dtype));
    TG_CHECK(tg_dtype_is_float(grid->dtype), TG_EDTYPE,
             "grid_sample: grid has dtype %s; it must be a float tensor",
             tg_dtype_name(grid->dtype));
    /* before dispatch, whose FP32 policy would promote mixed dtypes outside
     * autocast where torch refuses them */
    TG_CHECK(tg_autocast_active(NULL) || input->dtype == grid->dtype, TG_EDTYPE,
             "grid_sample: input has dtype %s and grid has %s; they must have the same dtype",
             tg_dtype_name(input->dtype), tg_dtype_name(grid->dtype));
    const gs_params p = {.mode = mode, .pad = padding_mode, .align = align_corners};
    return tg_op_call(&gs_op, out, 2, (tg_tensor *[]){input, grid}, &p, sizeof p);
}
