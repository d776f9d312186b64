/* src/ops/layer_norm.c - layer_norm and group_norm, as
 * torch.nn.functional.layer_norm and group_norm.
 *
 * Both normalise rows of contiguous values, then scale and shift per
 * channel.  x is walked as (N, C, S), its C channels in G groups of K = C/G:
 *   layer_norm over the last d dims: N = the product of the other dims,
 *     C = prod(normalized_shape), S = 1, G = 1 (each element of a row is a
 *     channel of its own, with its own weight);
 *   group_norm: N = x.shape[0], C = x.shape[1], S = prod(x.shape[2:]),
 *     G = num_groups.
 * Row r = n G + j (group j of sample n) is the L = K S contiguous values
 * from r L.  With mean_r and var_r (biased) over them:
 *   invstd_r = (var_r + eps)^-1/2,  xhat = (x - mean_r) invstd_r,
 *   y = xhat w_c + b_c.
 * Gradients, with g = dL/dy, gw = g w_c and means over the row:
 *   dx   = invstd_r (gw - mean(gw) - xhat mean(gw xhat))
 *   dw_c = sum over n, s of g xhat,   db_c = sum over n, s of g.
 *
 * The row statistics are batch_norm's kernel (tg__bn_stats) on x seen as
 * one sample of N G channels of L values; the rest is
 * layer_norm_kernels_tmpl.h.  Sums are in double in a fixed order (the
 * results do not depend on the thread count); the elementwise parts are in
 * the compute dtype, f64 if any input is f64, else f32 (f16/bf16 inputs
 * converted to f32 and the output rounded once).  Output dtype: x's when x
 * is f16/bf16 inside an autocast scope (torch 1.13's CPU autocast lists
 * neither op, so a bf16 x stays bf16), otherwise the promotion of x,
 * weight and bias.  The tape keeps x, w and two values per row.
 *
 * The backward that builds no graph makes two passes over x and g: the
 * sums (of each channel's run of S values, which give dw, db and the rows'
 * sums at once; or, for short runs, dw and db by tiles of samples), then
 * dx.  With create_graph it is the formulas above written with
 * differentiable ops (the statistics recomputed from the saved x), so
 * higher derivatives come from the tape as for every other op.
 */
#include <assert.h>
#include <math.h>
#include <string.h>

#include "core/core.h"
#include "autograd/tape.h"
#include "ops/conv_internal.h"   /* tg__conv_input/output: buffers in the compute dtype */
#include "ops/dispatch.h"
#include "ops/families.h"
#include "ops/norm_internal.h"
#include "tapegrad/autograd.h"
#include "tapegrad/ops.h"

typedef struct ln_params {
    bool group;                        /* group_norm, else layer_norm */
    int n_norm;                        /* layer_norm: normalized_shape's length */
    int64_t norm_shape[TG_MAX_DIMS];
    int64_t groups;                    /* group_norm: num_groups */
    double eps;
} ln_params;

/* x as (N, C, S) with G groups of channels (see the top). */
typedef struct ln_geom {
    int64_t n, c, s, g;
} ln_geom;

/* Runs (the S values of one channel of one sample) at least this long have
 * their sums taken once in the backward, for both dw, db and dx.  Shorter
 * runs (layer norm's are single values) take dw and db in tiles of LN_CHUNK
 * samples by LN_CBLK channels, whose partial sums add up in chunk order. */
#define LN_RUN_MIN 16
#define LN_CHUNK 256
#define LN_CBLK 2048

static bool ln_par(ln_geom g) { return g.n * g.c * g.s > 32768; }

/* The scratch doubles of the backward: the run sums or the tiles' sums. */
static int64_t ln_scratch(ln_geom g)
{
    return g.s >= LN_RUN_MIN ? 2 * g.n * g.c : 2 * ((g.n + LN_CHUNK - 1) / LN_CHUNK) * g.c;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define LN_AVX2 __attribute__((target("avx2")))
#define LN_AVX512 __attribute__((target("avx512f,avx512bw")))
#else
#define LN_AVX2
#define LN_AVX512
#endif

#define T float
#define SUF f32
#include "ops/layer_norm_kernels_tmpl.h"
#undef T
#undef SUF

#define T double
#define SUF f64
#include "ops/layer_norm_kernels_tmpl.h"
#undef T
#undef SUF

static const char *op_name(const ln_params *p) { return p->group ? "group_norm" : "layer_norm"; }

static ln_geom geom_of(const tg_tensor *x, const ln_params *p)
{
    if (p->group) {
        ln_geom g = {x->shape[0], x->shape[1], 1, p->groups};
        for (int d = 2; d < x->ndim; d++) g.s *= x->shape[d];
        return g;
    }
    ln_geom g = {1, 1, 1, 1};
    for (int d = 0; d < x->ndim; d++) *(d < x->ndim - p->n_norm ? &g.n : &g.c) *= x->shape[d];
    return g;
}

/* ---- checks ------------------------------------------------------------------ */

/* weight or bias v: NULL, or a float tensor of shape (ndim, shape). */
static int check_affine(const ln_params *p, const char *what, const tg_tensor *v, int ndim,
                        const int64_t *shape)
{
    if (!v) return TG_OK;
    TG_CHECK(tg_dtype_is_float(v->dtype), TG_EDTYPE, "%s: %s has dtype %s; float dtypes only",
             op_name(p), what, tg_dtype_name(v->dtype));
    bool same = v->ndim == ndim;
    for (int d = 0; same && d < ndim; d++) same = v->shape[d] == shape[d];
    if (same) return TG_OK;
    char got[96], want[96];
    tg_shape_str(got, sizeof got, v->ndim, v->shape);
    tg_shape_str(want, sizeof want, ndim, shape);
    return tg__error(TG_ESHAPE, "%s: %s has shape %s; expected %s (%s)", op_name(p), what, got,
                     want, p->group ? "num channels, x's dim 1" : "normalized_shape");
}

static int check_inputs(const tg_tensor *x, const tg_tensor *w, const tg_tensor *b,
                        const ln_params *p)
{
    const char *op = op_name(p);
    TG_CHECK(x != NULL, TG_EINVAL, "%s: x must not be NULL", op);
    TG_CHECK(tg_dtype_is_float(x->dtype), TG_EDTYPE, "%s: x has dtype %s; float dtypes only", op,
             tg_dtype_name(x->dtype));
    char xs[96];
    tg_shape_str(xs, sizeof xs, x->ndim, x->shape);
    if (p->group) {
        TG_CHECK(p->groups > 0, TG_EINVAL, "group_norm: num_groups=%lld must be > 0",
                 (long long)p->groups);
        TG_CHECK(x->ndim >= 2, TG_ESHAPE,
                 "group_norm: x has shape %s; expected (N, C, ...) with at least 2 dims", xs);
        TG_CHECK(x->shape[1] % p->groups == 0, TG_EINVAL,
                 "group_norm: x's channels C=%lld (dim 1 of %s) must be divisible by "
                 "num_groups=%lld", (long long)x->shape[1], xs, (long long)p->groups);
        TG_TRY(check_affine(p, "weight", w, 1, &x->shape[1]));
        TG_TRY(check_affine(p, "bias", b, 1, &x->shape[1]));
    } else {
        bool match = p->n_norm >= 1 && p->n_norm <= x->ndim;
        for (int d = 0; match && d < p->n_norm; d++)
            match = x->shape[x->ndim - p->n_norm + d] == p->norm_shape[d];
        if (!match) {
            char ns[96];
            tg_shape_str(ns, sizeof ns, p->n_norm, p->norm_shape);
            return tg__error(TG_ESHAPE, "layer_norm: normalized_shape %s must equal the last %d "
                             "dims of x, which has shape %s", ns, p->n_norm, xs);
        }
        TG_TRY(check_affine(p, "weight", w, p->n_norm, p->norm_shape));
        TG_TRY(check_affine(p, "bias", b, p->n_norm, p->norm_shape));
    }
    TG_CHECK(isfinite(p->eps) && p->eps >= 0, TG_EINVAL, "%s: eps=%g must be finite and >= 0", op,
             p->eps);
    return TG_OK;
}

static int ln_shape(int n, tg_tensor *const *in, const void *params, tg_dtype *dtype, int *ndim,
                    int64_t *shape)
{
    TG_TRY(check_inputs(in[0], in[1], in[2], params));
    *dtype = tg__norm_out_dtype(in[0], in[1], in[2]);
    *ndim = in[0]->ndim;
    memcpy(shape, in[0]->shape, sizeof *shape * (size_t)in[0]->ndim);
    return TG_OK;
}

/* ---- forward ----------------------------------------------------------------- */

/* Saves x, mean and invstd (each (N G,) in the compute dtype) and w. */
static int save_for_backward(tg_op_ctx *ctx, tg_tensor *x, tg_tensor *w, tg_dtype cdt,
                             int64_t rows, const double *mean, const double *invstd)
{
    tg_tensor *tm = tg__norm_from_doubles(cdt, 1, &rows, mean),
              *ti = tg__norm_from_doubles(cdt, 1, &rows, invstd);
    int rc = tm && ti ? tg_op_ctx_save(ctx, x) : TG_ENOMEM;
    if (rc >= 0) rc = tg_op_ctx_save(ctx, tm);
    if (rc >= 0) rc = tg_op_ctx_save(ctx, ti);
    if (rc >= 0 && w) rc = tg_op_ctx_save(ctx, w);
    tg_tensor_release(tm);
    tg_tensor_release(ti);
    return rc < 0 ? rc : TG_OK;
}

static int ln_forward(tg_op_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                      const void *params)
{
    const ln_params *p = params;
    tg_tensor *x = in[0], *w = in[1], *b = in[2];
    TG_TRY(check_inputs(x, w, b, p));
    const ln_geom g = geom_of(x, p);
    const int64_t rows = g.n * g.g, l = g.c / g.g * g.s;
    const tg_dtype cdt = tg__norm_compute_dtype(x, w, b);
    int rc = TG_ENOMEM;
    double *stats = tg__malloc((size_t)(2 * (rows > 0 ? rows : 1)) * sizeof(double));
    void *xo = NULL, *wo = NULL, *bo = NULL, *yo = NULL;
    tg_tensor *y = tg__tensor_uninit(tg__norm_out_dtype(x, w, b), x->ndim, x->shape);
    const void *xb = tg__conv_input(x, cdt, &xo);
    const void *wb = tg__conv_input(w, cdt, &wo), *bb = tg__conv_input(b, cdt, &bo);
    void *yb = tg__conv_output(y, cdt, &yo);
    if (!stats || !y || !xb || !yb || (w && !wb) || (b && !bb)) goto done;
    /* mean, then var turned into invstd in place; rows of no values (an
     * empty x) keep zeros, which give zero gradients */
    double *mean = stats, *invstd = stats + rows;
    memset(stats, 0, (size_t)(2 * rows) * sizeof(double));
    if (rows > 0 && l > 0) {
        tg__bn_stats(cdt, xb, (tg__bn_geom){1, rows, l}, mean, invstd);
        for (int64_t r = 0; r < rows; r++) invstd[r] = 1.0 / sqrt(invstd[r] + p->eps);
        if (cdt == TG_F64) ln_apply_f64(xb, g, mean, invstd, wb, bb, yb);
        else ln_apply_f32(xb, g, mean, invstd, wb, bb, yb);
        if (yo) tg__scatter(y, cdt, yo);
    }
    if (ctx) TG_TRY_GOTO(save_for_backward(ctx, x, w, cdt, rows, mean, invstd));
    *out = y;
    y = NULL;
    rc = TG_OK;
done:
    free(stats);
    tg__work_free(xo), tg__work_free(wo), tg__work_free(bo), tg__work_free(yo);
    tg_tensor_release(y);
    return rc;
}

/* ---- backward ---------------------------------------------------------------- */

/* The fused gradients (no graph recorded). */
static int backward_fused(tg_op_ctx *ctx, const void *params, tg_tensor *gy, tg_tensor *x,
                          tg_tensor *w, tg_tensor *mean, tg_tensor *invstd, tg_tensor **gin)
{
    const ln_geom g = geom_of(x, params);
    const int64_t rows = g.n * g.g;
    const tg_dtype cdt = mean->dtype;   /* the forward's compute dtype */
    const bool need_dx = tg_op_ctx_needs_grad(ctx, 0);
    const bool need_dw = w && tg_op_ctx_needs_grad(ctx, 1), need_db = tg_op_ctx_needs_grad(ctx, 2);
    int rc = TG_ENOMEM;
    double *st = tg__malloc((size_t)(2 * rows + 2 * g.c + ln_scratch(g) + 1) * sizeof(double));
    void *xo = NULL, *go = NULL, *wo = NULL, *dxo = NULL;
    /* dx over gy when gy is ours alone (ln_grads reads gy for dw and db
     * before the rows of dx are written, each row's sums before its dx) */
    const bool in_place = need_dx && tg__grad_is_reusable(gy, x->dtype, x);
    tg_tensor *dx = !need_dx ? NULL : in_place ? tg_tensor_retain(gy)
                                               : tg__tensor_uninit(x->dtype, x->ndim, x->shape);
    const void *xb = tg__conv_input(x, cdt, &xo), *gb = tg__conv_input(gy, cdt, &go);
    const void *wb = tg__conv_input(w, cdt, &wo);
    void *dxb = tg__conv_output(dx, cdt, &dxo);
    if (!st || !xb || !gb || (w && !wb) || (need_dx && (!dx || !dxb))) goto done;
    double *mu = st, *inv = st + rows, *dw = inv + rows, *db = dw + g.c;
    double *scratch = db + g.c, *dwb = need_dw || need_db ? dw : NULL;
    tg__gather(mean, TG_F64, mu);
    tg__gather(invstd, TG_F64, inv);
    if (cdt == TG_F64) ln_grads_f64(xb, gb, g, mu, inv, wb, dxb, dwb, db, scratch);
    else ln_grads_f32(xb, gb, g, mu, inv, wb, dxb, dwb, db, scratch);
    if (dxo) tg__scatter(dx, cdt, dxo);
    if (need_dw && !(gin[1] = tg__norm_from_doubles(w->dtype, w->ndim, w->shape, dw))) goto done;
    if (need_db) {
        tg_dtype dt;
        int nd;
        const int64_t *shape;
        tg_op_ctx_input(ctx, 2, &dt, &nd, &shape);
        if (!(gin[2] = tg__norm_from_doubles(dt, nd, shape, db))) goto done;
    }
    if (need_dx) {
        gin[0] = dx;
        dx = NULL;
    }
    rc = TG_OK;
done:
    free(st);
    tg__work_free(xo), tg__work_free(go), tg__work_free(wo), tg__work_free(dxo);
    tg_tensor_release(dx);
    return rc;
}

/* *out = t converted to dtype dt (t retained when it has it). */
static int as_dtype(tg_tensor **out, tg_tensor *t, tg_dtype dt)
{
    if (t->dtype != dt) return tg_to_dtype(out, t, dt);
    *out = tg_tensor_retain(t);
    return TG_OK;
}

/* *out = the (C,) sum s reshaped to the shape of input i and converted to
 * its dtype. */
static int to_input(tg_op_ctx *ctx, int i, tg_tensor *s, tg_tensor **out)
{
    tg_dtype dt;
    int nd;
    const int64_t *shape;
    tg_op_ctx_input(ctx, i, &dt, &nd, &shape);
    tg_tensor *r = NULL;
    TG_TRY(tg_reshape(&r, s, nd, shape));
    int rc = as_dtype(out, r, dt);
    tg_tensor_release(r);
    return rc;
}

/* The gradients as differentiable ops (create_graph): x in rows (N, G, L)
 * for the statistics (recomputed: the saved invstd is not read), in
 * (N, C, S) for the weight (1, C, 1), in the forward's compute dtype. */
static int backward_ops(tg_op_ctx *ctx, const void *params, tg_tensor *gy, tg_tensor *x,
                        tg_tensor *w, tg_tensor *mean, tg_tensor *invstd, tg_tensor **gin)
{
    (void)invstd;
    const ln_params *p = params;
    const tg_dtype cdt = mean->dtype;
    enum { XD, XR, MU, XC, SQ, VAR, VE, INV, XH, XH3, GD, G3, W3, GW3, GWR, M1, GX, M2, T1, T2,
           T3, DXR, DX, GXH, SW, SB, N_TMP };
    tg_tensor *t[N_TMP] = {NULL};
    const ln_geom g = geom_of(x, p);
    const int64_t sr[3] = {g.n, g.g, g.c / g.g * g.s}, s3[3] = {g.n, g.c, g.s};
    const int two = 2, not_c[2] = {0, 2};
    int rc;
    TG_TRY_GOTO(as_dtype(&t[XD], x, cdt));
    TG_TRY_GOTO(tg_reshape(&t[XR], t[XD], 3, sr));
    TG_TRY_GOTO(tg_mean_dims(&t[MU], t[XR], 1, &two, true));
    TG_TRY_GOTO(tg_sub(&t[XC], t[XR], t[MU]));
    TG_TRY_GOTO(tg_mul(&t[SQ], t[XC], t[XC]));
    TG_TRY_GOTO(tg_mean_dims(&t[VAR], t[SQ], 1, &two, true));
    TG_TRY_GOTO(tg_add_scalar(&t[VE], t[VAR], p->eps));
    TG_TRY_GOTO(tg_pow_scalar(&t[INV], t[VE], -0.5));
    TG_TRY_GOTO(tg_mul(&t[XH], t[XC], t[INV]));
    TG_TRY_GOTO(tg_reshape(&t[XH3], t[XH], 3, s3));
    TG_TRY_GOTO(as_dtype(&t[GD], gy, cdt));
    TG_TRY_GOTO(tg_reshape(&t[G3], t[GD], 3, s3));
    if (w) {
        TG_TRY_GOTO(tg_reshape(&t[W3], w, 3, (const int64_t[]){1, g.c, 1}));
        TG_TRY_GOTO(tg_mul(&t[GW3], t[G3], t[W3]));
    } else {
        t[GW3] = tg_tensor_retain(t[G3]);
    }
    if (tg_op_ctx_needs_grad(ctx, 0)) {   /* invstd (gw - mean(gw) - xhat mean(gw xhat)) */
        TG_TRY_GOTO(tg_reshape(&t[GWR], t[GW3], 3, sr));
        TG_TRY_GOTO(tg_mean_dims(&t[M1], t[GWR], 1, &two, true));
        TG_TRY_GOTO(tg_mul(&t[GX], t[GWR], t[XH]));
        TG_TRY_GOTO(tg_mean_dims(&t[M2], t[GX], 1, &two, true));
        TG_TRY_GOTO(tg_sub(&t[T1], t[GWR], t[M1]));
        TG_TRY_GOTO(tg_mul(&t[T2], t[XH], t[M2]));
        TG_TRY_GOTO(tg_sub(&t[T3], t[T1], t[T2]));
        TG_TRY_GOTO(tg_mul(&t[DXR], t[T3], t[INV]));
        TG_TRY_GOTO(tg_reshape(&t[DX], t[DXR], x->ndim, x->shape));
        TG_TRY_GOTO(as_dtype(&gin[0], t[DX], x->dtype));
    }
    if (w && tg_op_ctx_needs_grad(ctx, 1)) {
        TG_TRY_GOTO(tg_mul(&t[GXH], t[G3], t[XH3]));
        TG_TRY_GOTO(tg_sum_dims(&t[SW], t[GXH], 2, not_c, false));
        TG_TRY_GOTO(to_input(ctx, 1, t[SW], &gin[1]));
    }
    if (tg_op_ctx_needs_grad(ctx, 2)) {
        TG_TRY_GOTO(tg_sum_dims(&t[SB], t[G3], 2, not_c, false));
        TG_TRY_GOTO(to_input(ctx, 2, t[SB], &gin[2]));
    }
done:
    for (int i = 0; i < N_TMP; i++) tg_tensor_release(t[i]);
    return rc;
}

static int ln_backward(tg_op_ctx *ctx, tg_tensor *gy, tg_tensor **gin)
{
    return tg__norm_backward(ctx, gy, gin, backward_fused, backward_ops);
}

/* KEEP: the ops cast nothing on the tape; they compute in f32/f64 whatever
 * x's dtype, and a half x under autocast gives a half result, as in torch
 * 1.13's CPU autocast, which lists neither op. */
static const tg_op_schema layer_norm_op = {.name = "layer_norm", .arity = 3, .amp = TG_AMP_KEEP,
                                           .forward = ln_forward, .backward = ln_backward,
                                           .shape = ln_shape, .double_backward = true,
                                           .vjp = "dx = (gw - mean(gw) - xhat mean(gw xhat)) / "
                                                  "sigma with gw = g weight, "
                                                  "means over the normalised dims; "
                                                  "dweight = sum(g xhat), dbias = sum(g) over the "
                                                  "other dims"};
static const tg_op_schema group_norm_op = {.name = "group_norm", .arity = 3, .amp = TG_AMP_KEEP,
                                           .forward = ln_forward, .backward = ln_backward,
                                           .shape = ln_shape, .double_backward = true,
                                           .vjp = "dx = (gw - mean(gw) - xhat mean(gw xhat)) / "
                                                  "sigma with gw = g weight[c], "
                                                  "means over each group; dweight = sum(g xhat), "
                                                  "dbias = sum(g) per channel"};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__layer_norm_ops[] = {&layer_norm_op, &group_norm_op};
static_assert(sizeof tg__layer_norm_ops / sizeof tg__layer_norm_ops[0] == TG__layer_norm_N,
              "src/ops/families.h must count the layer_norm ops");

int tg_layer_norm(tg_tensor **out, tg_tensor *x, int n_normalized, const int64_t *normalized_shape,
                  tg_tensor *weight, tg_tensor *bias, double eps)
{
    TG_CHECK(out != NULL, TG_EINVAL, "layer_norm: out must not be NULL");
    TG_CHECK(n_normalized >= 1 && n_normalized <= TG_MAX_DIMS, TG_EINVAL,
             "layer_norm: n_normalized=%d must be in 1..%d (normalized_shape's length)",
             n_normalized, TG_MAX_DIMS);
    TG_CHECK(normalized_shape != NULL, TG_EINVAL, "layer_norm: normalized_shape must not be NULL");
    ln_params p = {.n_norm = n_normalized, .eps = eps};
    memcpy(p.norm_shape, normalized_shape, (size_t)n_normalized * sizeof *normalized_shape);
    tg_tensor *in[3] = {x, weight, bias};
    return tg_op_call(&layer_norm_op, out, 3, in, &p, sizeof p);
}

int tg_group_norm(tg_tensor **out, tg_tensor *x, int64_t num_groups, tg_tensor *weight,
                  tg_tensor *bias, double eps)
{
    TG_CHECK(out != NULL, TG_EINVAL, "group_norm: out must not be NULL");
    ln_params p = {.group = true, .groups = num_groups, .eps = eps};
    tg_tensor *in[3] = {x, weight, bias};
    return tg_op_call(&group_norm_op, out, 3, in, &p, sizeof p);
}
