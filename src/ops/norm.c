/* src/ops/norm.c - batch_norm as one op, as torch.nn.functional.batch_norm.
 *
 * x is (N, C, *); with M = N * prod(*) values per channel c:
 *   training:  mean_c = sum x / M,  var_c = sum (x - mean_c)^2 / M  (biased),
 *              running_mean = (1 - m) running_mean + m mean_c,
 *              running_var  = (1 - m) running_var  + m var_c * M / (M - 1)
 *   eval:      mean_c, var_c = running_mean, running_var
 *   invstd_c = (var_c + eps)^-1/2,  xhat = (x - mean_c) invstd_c,
 *   y = xhat weight_c + bias_c.
 * Gradients, with g = dL/dy and gw = g weight_c:
 *   training:  dx = invstd_c (gw - mean(gw) - xhat mean(gw xhat))  (means per channel)
 *   eval:      dx = gw invstd_c
 *   dweight_c = sum g xhat,  dbias_c = sum g.
 *
 * Written as a dozen elementwise ops and reductions, a training step would
 * make ten full passes over the activation and keep x - mean on the tape
 * beside x.  Here the forward is three passes per
 * channel (sum, centred sum of squares, output) and the backward two (the
 * two sums, then dx), each channel's slice small enough to stay in cache
 * between them; the tape keeps x itself (in its own dtype: half under
 * autocast) and the C values of mean and invstd.
 *
 * Sums are in double with four interleaved accumulators (a fixed order, so
 * the results do not depend on the thread count); the elementwise parts in
 * the compute dtype (f64 if any input is f64, else f32; f16/bf16 inputs are
 * converted to f32 and the output rounded once).  Output dtype: x's when x is
 * f16/bf16 inside an autocast scope (as PyTorch keeps half activations
 * through batch norm), otherwise the promotion of x, weight and bias.
 *
 * The fused backward runs when no graph is recorded.  With create_graph the
 * backward is the formulas above written with differentiable ops (the batch
 * statistics recomputed from the saved x; norm_backward_ops.c), so higher
 * derivatives come from the tape as for every other op.
 */
#include <assert.h>
#include <math.h>

#include "core/core.h"
#include "ops/norm_internal.h"
#include "ops/dispatch.h"
#include "autograd/tape.h"
#include "ops/families.h"
#include "ops/conv_internal.h"   /* tg__conv_input/output: buffers in the compute dtype */
#include "tapegrad/ops.h"

/* The (N, C, S) geometry of x. */
typedef tg__bn_geom bn_geom;

static bn_geom geom_of(const tg_tensor *x)
{
    bn_geom g = {x->shape[0], x->shape[1], 1};
    for (int d = 2; d < x->ndim; d++) g.s *= x->shape[d];
    return g;
}

/* ---- kernels, for T = float and double: norm_kernels_tmpl.h ------------------ */

/* Rows shorter than BN_BLK_ROW values go BN_BLK channels at a time (unless
 * a test turned that off for this thread: tg__bn_set_blocks). */
#define BN_BLK_ROW TG__BN_BLK_ROW
#define BN_BLK TG__BN_BLK
static _Thread_local bool bn_blocks_off;

void tg__bn_set_blocks(bool on) { bn_blocks_off = !on; }

static bool bn_rows(bn_geom g) { return g.s >= BN_BLK_ROW || bn_blocks_off; }

#define T float
#define SUF f32
#define SUM4 tg__bn_sum4_f32
#include "ops/norm_kernels_tmpl.h"
#undef T
#undef SUF
#undef SUM4

/* f64: bn_sum alone */
static bool no_sum4(const double *x, const double *gr, const double *mean, bool centred_sq,
                    int64_t n, int64_t rstride, int64_t s, double *out)
{
    (void)x, (void)gr, (void)mean, (void)centred_sq, (void)n, (void)rstride, (void)s, (void)out;
    return false;
}

#define T double
#define SUF f64
#define SUM4 no_sum4
#include "ops/norm_kernels_tmpl.h"
#undef T
#undef SUF
#undef SUM4

void tg__bn_stats(tg_dtype cdt, const void *x, tg__bn_geom g, double *mean, double *var)
{
    if (cdt == TG_F64) bn_stats_f64(x, g, mean, var);
    else bn_stats_f32(x, g, mean, var);
}

/* ---- half x: blocks of channels ---------------------------------------------- */

/* One block's work for norm_blocks.c's loop (which gives the reasons for
 * the blocks): norm_simd.c's kernels on the block's halves in place, the
 * f32 kernels' arithmetic. */
typedef struct bn_half_fwd {
    tg_tensor *x, *y;
    bn_geom g;
    bool training;
    double eps;
    const float *w, *b;
    double *mean, *var, *invstd;
} bn_half_fwd;

static void half_forward_blk(void *job, int64_t c0, int64_t nc)
{
    const bn_half_fwd *j = job;
    const bn_geom g = j->g;
    const tg_dtype dt = j->x->dtype;
    const uint16_t *x = (const uint16_t *)tg_tensor_cdata(j->x) + c0 * g.s;
    const int simd = tg__bn_half_simd();
    if (j->training) {   /* bn_stats_chan's */
        const double m = (double)(g.n * g.s);
        double sum[BN_BLK];
        tg__bn_half_sums(dt, x, NULL, NULL, false, g, nc, sum, simd);
        for (int64_t c = 0; c < nc; c++) j->mean[c0 + c] = sum[c] / m;
        tg__bn_half_sums(dt, x, NULL, j->mean + c0, true, g, nc, sum, simd);
        for (int64_t c = 0; c < nc; c++) j->var[c0 + c] = sum[c] / m;
    }
    for (int64_t c = 0; c < nc; c++) j->invstd[c0 + c] = 1.0 / sqrt(j->var[c0 + c] + j->eps);
    if (j->y->dtype == TG_F32) {   /* x's rows widened into y, then bn_row there */
        float *y = (float *)tg_tensor_data(j->y) + c0 * g.s;
        tg__half_to_f32_rows(dt, x, g.c * g.s, y, g.c * g.s, g.n, nc * g.s);
        for (int64_t n = 0; n < g.n; n++)
            for (int64_t c = 0; c < nc; c++) {
                float *row = y + (n * g.c + c) * g.s;
                bn_row_f32(row, g.s, c0 + c, j->mean, j->invstd, j->w, j->b, row);
            }
        return;
    }
    /* a half y (x's dtype: the output dtype rule gives no other half):
     * each row computed and rounded into y, sample by sample, so that x and
     * y are walked in runs */
    assert(j->y->dtype == dt);
    float mu[BN_BLK], k[BN_BLK], sh[BN_BLK];
    for (int64_t c = 0; c < nc; c++)
        bn_affine_f32(c0 + c, j->mean, j->invstd, j->w, j->b, &mu[c], &k[c], &sh[c]);
    uint16_t *y = (uint16_t *)tg_tensor_data(j->y) + c0 * g.s;
    for (int64_t n = 0; n < g.n; n++)
        for (int64_t c = 0; c < nc; c++) {
            const int64_t r = (n * g.c + c) * g.s;
            tg__bn_half_affine(dt, x + r, g.s, mu[c], k[c], sh[c], y + r, simd);
        }
}

typedef struct bn_half_bwd {
    tg_tensor *x, *gy, *dx;   /* dx: NULL, or gy itself (in place) */
    bn_geom g;
    bool training;
    const float *w;
    const double *mean, *invstd;
    double *dw, *db;
} bn_half_bwd;

static void half_backward_blk(void *job, int64_t c0, int64_t nc)
{
    const bn_half_bwd *j = job;
    const bn_geom g = j->g;
    const double m = (double)(g.n * g.s);
    const tg_dtype dt = j->x->dtype;
    const uint16_t *x = (const uint16_t *)tg_tensor_cdata(j->x) + c0 * g.s;
    const uint16_t *gy = (const uint16_t *)tg_tensor_cdata(j->gy) + c0 * g.s;
    const int simd = tg__bn_half_simd();
    /* the block's sums (bn_grad_sums's), then dx (x's dtype) computed and
     * rounded row by row, sample by sample, each value of a row from gy's
     * at its place (which dx may be): bn_grads_chan_sums's arithmetic */
    tg__bn_dx_factors f[BN_BLK];
    double sg[BN_BLK], sgx[BN_BLK];
    tg__bn_half_sums(dt, gy, NULL, NULL, false, g, nc, sg, simd);
    tg__bn_half_sums(dt, x, gy, j->mean + c0, false, g, nc, sgx, simd);
    for (int64_t c = 0; c < nc; c++)
        bn_grad_factors_f32(c0 + c, sg[c], sgx[c], m, j->mean, j->invstd, j->w, j->training,
                            j->dw, j->db, &f[c].kt, &f[c].mu, &f[c].a, &f[c].bc);
    if (!j->dx) return;
    uint16_t *dx = (uint16_t *)tg_tensor_data(j->dx) + c0 * g.s;
    for (int64_t n = 0; n < g.n; n++)
        for (int64_t c = 0; c < nc; c++) {
            const int64_t r = (n * g.c + c) * g.s;
            tg__bn_half_dx(dt, x + r, gy + r, g.s, &f[c], dx + r, simd);
        }
}

/* ---- forward ------------------------------------------------------------------- */

static int check_vec(const char *what, const tg_tensor *v, int64_t c)
{
    if (!v) return TG_OK;
    TG_CHECK(v->ndim == 1 && v->shape[0] == c, TG_ESHAPE,
             "batch_norm: %s must have shape (%lld,) (num channels)", what, (long long)c);
    TG_CHECK(tg_dtype_is_float(v->dtype), TG_EDTYPE, "batch_norm: %s has dtype %s; float dtypes only",
             what, tg_dtype_name(v->dtype));
    return TG_OK;
}

static int check_inputs(const tg_tensor *x, const tg_tensor *w, const tg_tensor *b,
                        const tg__bn_params *p)
{
    TG_CHECK(x != NULL, TG_EINVAL, "batch_norm: x must not be NULL");
    TG_CHECK(x->ndim >= 2, TG_ESHAPE, "batch_norm: x has %d dims; expected (N, C, ...)", x->ndim);
    TG_CHECK(tg_dtype_is_float(x->dtype), TG_EDTYPE, "batch_norm: x has dtype %s; float dtypes only",
             tg_dtype_name(x->dtype));
    const bn_geom g = geom_of(x);
    TG_TRY(check_vec("weight", w, g.c));
    TG_TRY(check_vec("bias", b, g.c));
    TG_TRY(check_vec("running_mean", p->running_mean, g.c));
    TG_TRY(check_vec("running_var", p->running_var, g.c));
    TG_CHECK(p->training || (p->running_mean && p->running_var), TG_EINVAL,
             "batch_norm: eval mode (training=false) needs running_mean and running_var");
    if (p->training && g.n * g.s == 1) {
        char shape[96];
        tg_shape_str(shape, sizeof shape, x->ndim, x->shape);
        return tg__error(TG_EINVAL, "batch_norm: expected more than 1 value per channel when "
                         "training, got input of shape %s (N * spatial = 1)", shape);
    }
    TG_CHECK(isfinite(p->eps) && p->eps >= 0, TG_EINVAL, "batch_norm: eps=%g must be finite and >= 0",
             p->eps);
    TG_CHECK(!p->training || !p->running_mean || (isfinite(p->momentum) && p->momentum >= 0 &&
                                                 p->momentum <= 1),
             TG_EINVAL, "batch_norm: momentum=%g must be in [0, 1]", p->momentum);
    return TG_OK;
}

tg_dtype tg__norm_out_dtype(const tg_tensor *x, const tg_tensor *w, const tg_tensor *b)
{
    if (tg__dtype_is_half(x->dtype) && tg__autocast_dtype(NULL)) return x->dtype;
    tg_dtype dt = x->dtype;
    if (w) dt = tg_promote_dtypes(dt, w->dtype);
    if (b) dt = tg_promote_dtypes(dt, b->dtype);
    return dt;
}

tg_dtype tg__norm_compute_dtype(const tg_tensor *x, const tg_tensor *w, const tg_tensor *b)
{
    const bool f64 = x->dtype == TG_F64 || (w && w->dtype == TG_F64) || (b && b->dtype == TG_F64);
    return f64 ? TG_F64 : TG_F32;
}

tg_tensor *tg__norm_from_doubles(tg_dtype dt, int ndim, const int64_t *shape, const double *v)
{
    tg_tensor *t = tg__tensor_uninit(dt, ndim, shape);
    if (t) tg__scatter(t, TG_F64, v);
    return t;
}

/* running = (1 - m) running + m * stat * factor, in the buffer's dtype (past its
 * range: +-inf, as PyTorch's in-place update gives). */
static int update_running(tg_tensor *run, const double *stat, double m, double factor)
{
    if (!run) return TG_OK;
    for (int64_t c = 0; c < run->shape[0]; c++) {
        double r;
        TG_TRY(tg_tensor_get_flat(run, c, &r));
        TG_TRY(tg__set_flat_rounded(run, c, (1 - m) * r + m * stat[c] * factor));
    }
    return TG_OK;
}

static int batch_norm_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                              const void *params)
{
    const tg__bn_params *p = params;
    tg_tensor *x = in[0], *w = in[1], *b = in[2];
    TG_TRY(check_inputs(x, w, b, p));
    const bn_geom g = geom_of(x);
    const tg_dtype cdt = tg__norm_compute_dtype(x, w, b), odt = tg__norm_out_dtype(x, w, b);
    const bool f64 = cdt == TG_F64;

    int rc = TG_ENOMEM;
    double *stats = tg__malloc((size_t)(3 * (g.c > 0 ? g.c : 1)) * sizeof(double));
    void *xo = NULL, *wo = NULL, *bo = NULL, *yo = NULL;
    tg_tensor *y = tg__tensor_uninit(odt, x->ndim, x->shape), *tm = NULL, *ti = NULL;
    const bool by_chan = !f64 && tg__bn_half_channels(x, g);   /* x is read channel by channel */
    const void *xb = by_chan ? NULL : tg__conv_input(x, cdt, &xo);
    const void *wb = tg__conv_input(w, cdt, &wo), *bb = tg__conv_input(b, cdt, &bo);
    void *yb = by_chan ? NULL : tg__conv_output(y, cdt, &yo);
    if (!stats || !y || (!by_chan && (!xb || !yb)) || (w && !wb) || (b && !bb)) goto done;
    double *mean = stats, *var = stats + g.c, *invstd = stats + 2 * g.c;
    if (!p->training) {
        tg__gather(p->running_mean, TG_F64, mean);
        tg__gather(p->running_var, TG_F64, var);
    }
    /* Training on an empty batch does nothing, as in PyTorch: y is empty and
     * the running buffers stay; the statistics saved for backward are zeros
     * (so its sums over no element give zero gradients). */
    const bool empty = p->training && g.n * g.s == 0;
    if (empty) {
        for (int64_t c = 0; c < 3 * g.c; c++) stats[c] = 0.0;
    } else if (by_chan) {
        bn_half_fwd j = {.x = x, .y = y, .g = g, .training = p->training, .eps = p->eps,
                         .w = wb, .b = bb, .mean = mean, .var = var, .invstd = invstd};
        tg__bn_for_channels(g, half_forward_blk, &j);
    } else {
        if (p->training) {
            if (f64) bn_stats_f64(xb, g, mean, var);
            else bn_stats_f32(xb, g, mean, var);
        }
        for (int64_t c = 0; c < g.c; c++) invstd[c] = 1.0 / sqrt(var[c] + p->eps);
        if (f64) bn_apply_f64(xb, g, mean, invstd, wb, bb, yb);
        else bn_apply_f32(xb, g, mean, invstd, wb, bb, yb);
        if (yo) tg__scatter(y, cdt, yo);
    }
    rc = TG_ENOMEM;
    if (ctx && (!(tm = tg__norm_from_doubles(cdt, 1, &g.c, mean)) ||
                !(ti = tg__norm_from_doubles(cdt, 1, &g.c, invstd))))
        goto done;
    if (p->training && !empty) {   /* last: a failure above leaves the buffers as they were */
        const double mm = (double)(g.n * g.s);
        rc = update_running(p->running_mean, mean, p->momentum, 1.0);
        if (rc == TG_OK) rc = update_running(p->running_var, var, p->momentum, mm / (mm - 1));
        if (rc < 0) goto done;
    }
    rc = TG_OK;
    if (ctx) {
        tg__ctx_save(ctx, x);
        tg__ctx_save(ctx, tm);
        tg__ctx_save(ctx, ti);
        if (w) tg__ctx_save(ctx, w);
    }
    *out = y;
    y = NULL;
done:
    free(stats);
    tg__work_free(xo), tg__work_free(wo), tg__work_free(bo), tg__work_free(yo);
    tg_tensor_release(y);
    tg_tensor_release(tm);
    tg_tensor_release(ti);
    return rc;
}

/* ---- backward ------------------------------------------------------------------ */

/* The fused gradients (no graph recorded). */
static int backward_fused(tg_ctx *ctx, const void *params, tg_tensor *gy, tg_tensor *x,
                          tg_tensor *w, tg_tensor *mean, tg_tensor *invstd, tg_tensor **gin)
{
    const tg__bn_params *p = params;
    const bn_geom g = geom_of(x);
    const tg_dtype cdt = mean->dtype;   /* the forward's compute dtype */
    const bool f64 = cdt == TG_F64, need_dx = tg__ctx_needs_grad(ctx, 0);
    const bool need_dw = w && tg__ctx_needs_grad(ctx, 1), need_db = tg__ctx_needs_grad(ctx, 2);
    int rc = TG_ENOMEM;
    double *st = tg__malloc((size_t)(4 * (g.c > 0 ? g.c : 1)) * sizeof(double));
    void *xo = NULL, *go = NULL, *wo = NULL, *dxo = NULL;
    /* dx over gy when gy is ours alone: each channel's sums are taken before
     * its dx is written, element by element in the same place (a half
     * block's sums before its rows; else from the f32 copy made below) */
    const bool in_place = need_dx && tg__grad_is_reusable(gy, x->dtype, x);
    tg_tensor *dx = !need_dx ? NULL : in_place ? tg_tensor_retain(gy)
                                               : tg__tensor_uninit(x->dtype, x->ndim, x->shape);
    /* half x and gy of one dtype: block by block, read in place (dx's rows
     * are written after the block's sums) */
    const bool by_chan = !f64 && tg__bn_half_channels(x, g) && tg__bn_half_channels(gy, g) &&
                         gy->dtype == x->dtype;
    const void *xb = by_chan ? NULL : tg__conv_input(x, cdt, &xo);
    const void *gb = by_chan ? NULL : tg__conv_input(gy, cdt, &go);
    const void *wb = tg__conv_input(w, cdt, &wo);
    void *dxb = by_chan ? NULL : tg__conv_output(dx, cdt, &dxo);
    if (!st || (need_dx && (!dx || (!by_chan && !dxb))) || (!by_chan && (!xb || !gb)) ||
        (w && !wb))
        goto done;
    double *mu = st, *inv = st + g.c, *dw = st + 2 * g.c, *db = st + 3 * g.c;
    tg__gather(mean, TG_F64, mu);
    tg__gather(invstd, TG_F64, inv);
    if (by_chan) {
        bn_half_bwd j = {.x = x, .gy = gy, .dx = dx, .g = g, .training = p->training, .w = wb,
                         .mean = mu, .invstd = inv, .dw = dw, .db = db};
        tg__bn_for_channels(g, half_backward_blk, &j);
    } else {
        if (f64) bn_grads_f64(xb, gb, g, mu, inv, wb, p->training, dxb, dw, db);
        else bn_grads_f32(xb, gb, g, mu, inv, wb, p->training, dxb, dw, db);
        if (dxo) tg__scatter(dx, cdt, dxo);
    }
    rc = TG_ENOMEM;
    if (need_dw && !(gin[1] = tg__norm_from_doubles(w->dtype, 1, &g.c, dw))) goto done;
    if (need_db) {
        if (!(gin[2] = tg__norm_from_doubles(ctx->in_meta[2].dtype, 1, &g.c, db))) goto done;
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

int tg__norm_backward(tg_op_ctx *ctx, tg_tensor *gy, tg_tensor **gin, tg__norm_grads_fn fused,
                      tg__norm_grads_fn ops)
{
    const void *p = tg_op_ctx_params(ctx);
    tg_tensor *x, *mean, *invstd, *w = NULL;
    int wnd;
    tg_op_ctx_input(ctx, 1, NULL, &wnd, NULL);   /* -1: no weight */
    TG_TRY(tg_op_ctx_saved(ctx, 0, &x));
    TG_TRY(tg_op_ctx_saved(ctx, 1, &mean));
    TG_TRY(tg_op_ctx_saved(ctx, 2, &invstd));
    if (wnd >= 0) TG_TRY(tg_op_ctx_saved(ctx, 3, &w));
    int rc = !tg_grad_enabled() ? fused(ctx, p, gy, x, w, mean, invstd, gin)
                                : ops(ctx, p, gy, x, w, mean, invstd, gin);
    if (rc < 0)
        for (int i = 0; i < 3; i++) {
            tg_tensor_release(gin[i]);
            gin[i] = NULL;
        }
    return rc;
}

static int batch_norm_backward(tg_ctx *ctx, tg_tensor *gy, tg_tensor **gin)
{
    return tg__norm_backward(ctx, gy, gin, backward_fused, tg__bn_backward_ops);
}

/* KEEP: the op casts nothing on the tape; its statistics are accumulated in
 * double and its arithmetic done in f32/f64 whatever x's dtype (the FP32 rule
 * for batch-norm statistics, without a saved f32 copy of a half x). */
static const tg_op_schema batch_norm_op = {.name = "batch_norm", .arity = 3, .amp = TG_AMP_KEEP,
                                     .forward = batch_norm_forward,
                                     .backward = batch_norm_backward, .double_backward = true,
                                     .vjp = "training: dx = (g - mean(g) - xhat mean(g xhat)) "
                                            "gamma / sigma, dgamma = sum(g xhat), "
                                            "dbeta = sum(g) (per channel); eval: "
                                            "dx = g gamma / sqrt(running_var + eps)"};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__norm_ops[] = {&batch_norm_op};
static_assert(sizeof tg__norm_ops / sizeof tg__norm_ops[0] == TG__norm_N,
              "src/ops/families.h must count the norm ops");

int tg_batch_norm(tg_tensor **out, tg_tensor *x, tg_tensor *running_mean, tg_tensor *running_var,
                  tg_tensor *weight, tg_tensor *bias, bool training, double momentum, double eps)
{
    TG_CHECK(out != NULL, TG_EINVAL, "batch_norm: out must not be NULL");
    tg__bn_params p = {.momentum = momentum, .eps = eps, .training = training,
                       .running_mean = running_mean, .running_var = running_var};
    tg_tensor *in[3] = {x, weight, bias};
    return tg_op_call(&batch_norm_op, out, 3, in, &p, sizeof p);
}
