/* src/ops/conv.c - the conv and conv_transpose ops: forward through the
 * kernels of conv_kernels.c / conv_reference.c, backward through the same
 * public differentiable ops, and the public entry points.
 *
 * Backward, with the adjoint identity <conv(z, W), x> = <z, conv_transpose(x, W)>:
 *   y = conv(x, W, b):            dx = conv_transpose(dy, W)  (output_padding from sizes)
 *                                 dW = conv_weight_grad(z = x, u = dy)
 *   y = conv_transpose(x, W, b):  dx = conv(dy, W)            (cropped to x's extents)
 *                                 dW = conv_weight_grad(z = dy, u = x)
 *   both:                         db = sum of dy over batch and spatial axes.
 * Every one of these is itself a differentiable op, so create_graph gives
 * derivatives of any order.
 */
#include <assert.h>
#include <string.h>

#include "ops/conv_internal.h"
#include "ops/families.h"
#include "ops/linalg_internal.h"
#include "tapegrad/ops.h"

/* ---- helpers shared with conv_wgrad.c and norm.c ---- */

void *tg__conv_gather(const tg_tensor *t, tg_dtype cdt)
{
    if (!t) return NULL;
    void *buf = tg__work_alloc((size_t)tg_tensor_numel(t) * tg_dtype_size(cdt));
    if (buf) tg__gather(t, cdt, buf);
    return buf;
}

const void *tg__conv_input(const tg_tensor *t, tg_dtype cdt, void **owned)
{
    *owned = NULL;
    if (!t) return NULL;
    if (t->dtype == cdt && tg_tensor_is_contiguous(t)) return tg_tensor_cdata(t);
    *owned = tg__conv_gather(t, cdt);
    return *owned;
}

void tg__conv_acts(tg__conv_geom *g, tg_dtype cdt, const tg_tensor *a, const tg_tensor *b,
                   const void **ab, const void **bb, void **ao, void **bo)
{
    if (a->dtype == TG_BF16) g->bf16 = tg_bf16_kernel_get();
    g->cast = tg__cast_kernel();
    g->col2im = tg__conv_col2im_kernel();
    if (cdt == TG_F32 && tg__dtype_is_half(a->dtype) && tg_tensor_is_contiguous(a) &&
        (!b || (b->dtype == a->dtype && tg_tensor_is_contiguous(b)))) {
        g->half_in = a->dtype;
        g->bits = tg__conv_bits_enabled();
        *ao = NULL;
        *ab = tg_tensor_cdata(a);
        if (b) {
            *bo = NULL;
            *bb = tg_tensor_cdata(b);
        }
        return;
    }
    *ab = tg__conv_input(a, cdt, ao);
    if (b) *bb = tg__conv_input(b, cdt, bo);
}

void *tg__conv_output(tg_tensor *t, tg_dtype cdt, void **owned)
{
    *owned = NULL;
    if (!t) return NULL;
    if (t->dtype == cdt) return tg_tensor_data(t);
    *owned = tg__work_alloc((size_t)tg_tensor_numel(t) * tg_dtype_size(cdt));
    return *owned;
}

int tg__conv_crop(tg_tensor **out, tg_tensor *t, int nsp, const int64_t *want)
{
    tg_tensor *cur = tg_tensor_retain(t);
    for (int a = 0; a < nsp; a++) {
        if (cur->shape[2 + a] == want[a]) continue;
        TG_ASSERT(cur->shape[2 + a] > want[a]);
        tg_tensor *next = NULL;
        int rc = tg_slice(&next, cur, 2 + a, 0, want[a], 1);
        tg_tensor_release(cur);
        if (rc < 0) return rc;
        cur = next;
    }
    *out = cur;
    return TG_OK;
}

tg__bf16_panels *tg__conv_weight_panels(tg__conv_geom *g, const tg_tensor *w, bool transposed)
{
    g->wp = NULL;
    if (g->bf16 <= TG_BF16_KERNEL_PORTABLE || g->groups != 1 ||
        (transposed && tg__conv_phase_pays(g)))
        return NULL;
    const int64_t kk = g->c_img * tg__conv_prod3(g->k);
    /* conv: A = W (c_col, kk) row-major; conv_transpose: A = W^T, so k runs
     * down W's columns */
    const tg__bf16_operand o = transposed
        ? (tg__bf16_operand){.lines = kk, .k = g->c_col, .ld = kk, .tcontig = false}
        : (tg__bf16_operand){.lines = g->c_col, .k = kk, .ld = kk, .tcontig = true};
    tg__bf16_panels *p = tg__bf16_panels_get(w, g->bf16, false, &o);
    g->wp = p;
    return p;
}

tg_conv_algo tg__conv_resolve_algo(tg_conv_algo a)
{
    if (a != TG_CONV_ALGO_DEFAULT) return a;
    const char *env = getenv("TG_CONV_ALGO");
    return (env && strcmp(env, "reference") == 0) ? TG_CONV_ALGO_REFERENCE : TG_CONV_ALGO_FAST;
}

/* ---- forward ---- */

/* Runs the kernel chosen by (transpose, algo) on compute-dtype buffers. */
static int run_kernel(bool transpose, const tg__conv_geom *g, const tg_conv_params *p,
                      tg_dtype cdt, const void *x, const void *w, void *y)
{
    if (!transpose) return tg__conv_forward_raw(cdt, g, x, w, y);
    if (tg__conv_resolve_algo(p->algo) == TG_CONV_ALGO_FAST)
        return tg__conv_transpose_fast_raw(cdt, g, x, w, y);
    int64_t hi[3] = {0, 0, 0}, op[3] = {0, 0, 0};
    for (int a = 0; a < g->nsp; a++) {
        hi[3 - g->nsp + a] = p->padding[a][1];
        op[3 - g->nsp + a] = p->output_padding[a];
    }
    return tg__conv_transpose_reference_raw(cdt, g, hi, op, x, w, y);
}

static int forward_common(bool transpose, tg_ctx *ctx, tg_tensor **out, tg_tensor *const *in,
                          const tg_conv_params *p)
{
    tg_tensor *x = in[0], *w = in[1], *b = in[2];
    tg__conv_geom g;
    int64_t oshape[5];
    TG_TRY(tg__conv_validate(transpose, x, w, b, p, &g, oshape));
    TG_ASSERT(!ctx || p->act == TG_ACT_NONE);   /* recorded convs apply it as an op */
    const tg_dtype cdt = tg__compute_dtype(x->dtype);
    int64_t spatial = 1;
    for (int a = 2; a < x->ndim; a++) spatial *= oshape[a];
    tg_tensor *y = tg__tensor_uninit(x->dtype, x->ndim, oshape);
    /* The GEMM kernels read half x as they go; the reference path takes f32. */
    const bool gemm = !transpose || tg__conv_resolve_algo(p->algo) != TG_CONV_ALGO_REFERENCE;
    void *xo, *wo = NULL, *bo;   /* owned copies, when x, w, b are not usable in place */
    const void *xb;
    if (gemm) tg__conv_acts(&g, cdt, x, NULL, &xb, NULL, &xo, NULL);
    else xb = tg__conv_input(x, cdt, &xo);
    /* a weight multiplied from its panels needs no f32 copy */
    tg__bf16_panels *wp = gemm ? tg__conv_weight_panels(&g, w, transpose) : NULL;
    const void *wb = wp ? NULL : tg__conv_input(w, cdt, &wo);
    const void *bb = tg__conv_input(b, cdt, &bo);
    /* f32/f64 outputs are computed in place.  f16/bf16 ones are rounded in
     * chunk by chunk by the GEMM kernels, which add the bias (without an
     * activation); else computed in an f32 buffer with the epilogue, rounded
     * once by the final scatter. */
    const bool half_out = y && gemm && y->dtype != cdt && p->act == TG_ACT_NONE;
    if (half_out) {
        g.half_out = y->dtype;
        g.out_bias = bb;
    }
    void *yo = NULL, *yb = half_out ? tg_tensor_data(y) : tg__conv_output(y, cdt, &yo);
    int rc = TG_ENOMEM;
    if (!yb || !xb || !(wb || wp) || (b && !bb)) goto done;
    rc = run_kernel(transpose, &g, p, cdt, xb, wb, yb);
    if (rc < 0) goto done;
    if (!half_out && (bb || p->act != TG_ACT_NONE))
        tg__conv_epilogue(cdt, yb, oshape[0], oshape[1], spatial, bb, p->act, p->act_slope);
    if (yo) tg__scatter(y, cdt, yo);
    if (ctx) {
        tg__ctx_save(ctx, x);
        tg__ctx_save(ctx, w);
    }
    *out = y;
    y = NULL;
done:
    tg__bf16_panels_release(wp);
    tg__work_free(yo);
    tg_tensor_release(y);
    tg__work_free(xo);
    tg__work_free(wo);
    tg__work_free(bo);
    return rc;
}

static int conv_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                        const void *params)
{
    TG_ASSERT(n == 3);
    return forward_common(false, ctx, out, in, params);
}

static int conv_transpose_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                                  const void *params)
{
    TG_ASSERT(n == 3);
    return forward_common(true, ctx, out, in, params);
}

/* ---- backward ---- */

/* db = sum of dy over the batch and spatial axes: (C_out). */
static int bias_grad(tg_tensor **db, tg_tensor *gy)
{
    int dims[4] = {0, 2, 3, 4};
    return tg_sum_dims(db, gy, gy->ndim - 1, dims, false);
}

static void release_grads(tg_tensor **gin, int n)
{
    for (int i = 0; i < n; i++) {
        tg_tensor_release(gin[i]);
        gin[i] = NULL;
    }
}

/* What both backwards start from: the forward's parameters without the
 * activation (a recorded conv applies it as its own op) and the saved x, W. */
static int backward_inputs(tg_ctx *ctx, tg_conv_params *q, tg_tensor **x, tg_tensor **w)
{
    *q = *(const tg_conv_params *)tg__ctx_params(ctx);
    q->act = TG_ACT_NONE;
    TG_TRY(tg__ctx_saved(ctx, 0, x));
    return tg__ctx_saved(ctx, 1, w);
}

static int conv_backward(tg_ctx *ctx, tg_tensor *gy, tg_tensor **gin)
{
    tg_conv_params q;
    tg_tensor *x, *w;
    TG_TRY(backward_inputs(ctx, &q, &x, &w));
    const int nsp = x->ndim - 2;
    int rc = TG_OK;
    if (tg__ctx_needs_grad(ctx, 0)) {
        /* conv_transpose maps dy's extents back to x's with the output_padding
         * that absorbs the floor of the conv extent formula. */
        rc = tg_conv_transpose_output_padding_for(&q, nsp, gy->shape + 2, w->shape + 2,
                                                  x->shape + 2);
        if (rc == TG_OK) rc = tg_conv_transpose(&gin[0], gy, w, NULL, &q);
    }
    if (rc == TG_OK && tg__ctx_needs_grad(ctx, 1))
        rc = tg_conv_weight_grad(&gin[1], x, gy, w->ndim, w->shape, &q);
    if (rc == TG_OK && tg__ctx_needs_grad(ctx, 2)) rc = bias_grad(&gin[2], gy);
    if (rc < 0) release_grads(gin, 3);
    return rc;
}

/* ConvTranspose's dx = conv(dy, W) and dW = conv_weight_grad(dy, x) in one
 * pass over im2col(dy) (tg__conv_and_weight_grad_raw), the same bits as the
 * two ops.  Applies only when nothing is being recorded (no create_graph: the
 * ops path keeps higher derivatives), dy, W and x share a dtype and conv(dy)
 * has x's extents (no crop).  Returns 1 when it does not apply. */
static int fused_transpose_grads(tg_tensor *gy, tg_tensor *w, tg_tensor *x,
                                 const tg_conv_params *q, tg_tensor **gin)
{
    tg__conv_geom g;
    int64_t oshape[5];
    if (tg_grad_enabled() || gy->dtype != x->dtype || w->dtype != x->dtype ||
        tg__conv_validate(false, gy, w, NULL, q, &g, oshape) < 0 ||
        memcmp(oshape, x->shape, sizeof(int64_t) * (size_t)x->ndim) != 0)
        return 1;   /* (a validation message, if any, is re-set by the ops path) */
    const tg_dtype cdt = tg__compute_dtype(x->dtype);
    tg_tensor *dx = tg__tensor_uninit(x->dtype, x->ndim, x->shape);
    tg_tensor *dw = tg__tensor_uninit(w->dtype, w->ndim, w->shape);
    void *dxo = NULL, *dwo, *zo, *wo = NULL, *uo;   /* owned buffers and copies */
    /* half dx is rounded in chunk by chunk by the kernel */
    if (dx && dx->dtype != cdt) g.half_out = dx->dtype;
    void *dxb = tg__conv_half_out(&g) ? tg_tensor_data(dx) : tg__conv_output(dx, cdt, &dxo);
    void *dwb = tg__conv_output(dw, cdt, &dwo);
    const void *zb, *ub;
    tg__conv_acts(&g, cdt, gy, x, &zb, &ub, &zo, &uo);
    tg__bf16_panels *wp = tg__conv_weight_panels(&g, w, false);
    const void *wb = wp ? NULL : tg__conv_input(w, cdt, &wo);
    int rc = TG_ENOMEM;
    if (dxb && dwb && zb && (wb || wp) && ub)
        rc = tg__conv_and_weight_grad_raw(cdt, &g, zb, wb, ub, dxb, dwb);
    tg__bf16_panels_release(wp);
    if (rc == TG_OK) {
        if (dxo) tg__scatter(dx, cdt, dxo);
        if (dwo) tg__scatter(dw, cdt, dwo);
        gin[0] = dx;
        gin[1] = dw;
        dx = dw = NULL;
    }
    tg__work_free(dxo);
    tg__work_free(dwo);
    tg__work_free(zo);
    tg__work_free(wo);
    tg__work_free(uo);
    tg_tensor_release(dx);
    tg_tensor_release(dw);
    return rc;
}

static int conv_transpose_backward(tg_ctx *ctx, tg_tensor *gy, tg_tensor **gin)
{
    tg_conv_params q;
    tg_tensor *x, *w;
    TG_TRY(backward_inputs(ctx, &q, &x, &w));
    const int nsp = x->ndim - 2;
    int rc = TG_OK;
    bool fused = false;   /* dx and dW done by fused_transpose_grads */
    if (tg__ctx_needs_grad(ctx, 0) && tg__ctx_needs_grad(ctx, 1)) {
        rc = fused_transpose_grads(gy, w, x, &q, gin);
        fused = rc == TG_OK;
        if (rc > 0) rc = TG_OK;   /* does not apply: the ops below */
    }
    if (rc == TG_OK && !fused && tg__ctx_needs_grad(ctx, 0)) {
        /* When output_padding >= stride (possible if dilation > stride) conv
         * of dy is longer than x; the extra positions pair with no input. */
        tg_tensor *dx = NULL;
        rc = tg_conv(&dx, gy, w, NULL, &q);
        if (rc == TG_OK) rc = tg__conv_crop(&gin[0], dx, nsp, x->shape + 2);
        tg_tensor_release(dx);
    }
    if (rc == TG_OK && !fused && tg__ctx_needs_grad(ctx, 1))
        rc = tg_conv_weight_grad(&gin[1], gy, x, w->ndim, w->shape, &q);
    if (rc == TG_OK && tg__ctx_needs_grad(ctx, 2)) rc = bias_grad(&gin[2], gy);
    if (rc < 0) release_grads(gin, 3);
    return rc;
}

/* ---- schemas and public entry points ---- */

static const tg_op_schema conv_schema = {
    .name = "conv", .arity = 3, .amp = TG_AMP_LOWER_PRECISION,
    .forward = conv_forward, .backward = conv_backward, .double_backward = true,
    .vjp = "dx = conv_transpose(g, w), dw = conv_weight_grad(x, g), "
           "db = g summed over batch and positions"};
static const tg_op_schema conv_transpose_schema = {
    .name = "conv_transpose", .arity = 3, .amp = TG_AMP_PROMOTE,
    .forward = conv_transpose_forward, .backward = conv_transpose_backward,
    .double_backward = true,
    .vjp = "dx = conv(g, w), dw = conv_weight_grad(g, x), db = g summed over batch and positions"};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__conv_ops[] = {&conv_schema, &conv_transpose_schema, &tg__conv_weight_grad_schema};
static_assert(sizeof tg__conv_ops / sizeof tg__conv_ops[0] == TG__conv_N,
              "src/ops/families.h must count the conv ops");

static int apply_activation(tg_tensor **out, tg_tensor *a, tg_activation act, double slope)
{
    switch (act) {
    case TG_ACT_RELU: return tg_relu(out, a);
    case TG_ACT_LEAKY_RELU: return tg_leaky_relu(out, a, slope);
    case TG_ACT_TANH: return tg_tanh(out, a);
    case TG_ACT_SIGMOID: return tg_sigmoid(out, a);
    case TG_ACT_SILU: return tg_silu(out, a);
    case TG_ACT_GELU: return tg_gelu(out, a);
    case TG_ACT_GELU_TANH: return tg_gelu_tanh(out, a);
    default: *out = tg_tensor_retain(a); return TG_OK;
    }
}

static bool needs_recording(tg_tensor *const *in)
{
    if (!tg_grad_enabled()) return false;
    for (int i = 0; i < 3; i++)
        if (in[i] && tg_tensor_requires_grad(in[i])) return true;
    return false;
}

/* When the conv is recorded, its activation becomes a separate public op so
 * that its gradient flows; otherwise it is fused into the kernel's last pass. */
static int call(const tg_op_schema *op, tg_tensor **out, tg_tensor *x, tg_tensor *w,
                tg_tensor *b, const tg_conv_params *p)
{
    TG_CHECK(out, TG_EINVAL, "%s: out must not be NULL", op->name);
    if (x && w && w->ndim >= 3 && w->ndim <= 5 && x->ndim == w->ndim - 1) {
        /* unbatched (C, S...), as torch: through a batch of one */
        tg_tensor *xb = NULL, *yb = NULL;
        TG_TRY(tg_unsqueeze(&xb, x, 0));
        int rc = call(op, &yb, xb, w, b, p);
        if (rc >= 0) rc = tg_squeeze(out, yb, 0);
        tg_tensor_release(yb);
        tg_tensor_release(xb);
        return rc;
    }
    tg_conv_params q;
    if (p) q = *p;
    else tg__conv_params_default(&q);
    if (q.padding_mode != TG_PAD_CONSTANT) {
        TG_CHECK(op == &conv_schema, TG_EINVAL,
                 "%s: padding_mode=%d: only TG_PAD_CONSTANT (zeros) is supported, as in PyTorch",
                 op->name, (int)q.padding_mode);
        TG_CHECK(q.padding_mode > TG_PAD_CONSTANT && q.padding_mode <= TG_PAD_CIRCULAR,
                 TG_EINVAL, "%s: padding_mode=%d is not a tg_pad_mode", op->name,
                 (int)q.padding_mode);
        TG_CHECK(x && w && w->ndim >= 3 && w->ndim <= 5 && x->ndim == w->ndim, TG_EINVAL,
                 "%s: with padding_mode, x and weight must be set and of one rank (3-5)",
                 op->name);
        /* pad x in that mode, then convolve it without padding */
        const int nsp = w->ndim - 2;
        int64_t pads[2 * 3];
        bool any;
        tg_conv_params zp;
        TG_TRY(tg__conv_pad_pairs(op->name, &q, nsp, pads, &zp, &any));
        if (!any) return call(op, out, x, w, b, &zp);
        tg_tensor *xp = NULL;
        TG_TRY(tg_pad(&xp, x, 2 * nsp, pads, q.padding_mode, 0.0));
        const int rc = call(op, out, xp, w, b, &zp);
        tg_tensor_release(xp);
        return rc;
    }
    tg_tensor *in[3] = {x, w, b};
    bool split = q.act > TG_ACT_NONE && q.act < TG_ACT_COUNT && needs_recording(in);
    if (!split) return tg_op_call(op, out, 3, in, &q, sizeof q);
    tg_activation act = q.act;
    q.act = TG_ACT_NONE;
    tg_tensor *lin = NULL;
    TG_TRY(tg_op_call(op, &lin, 3, in, &q, sizeof q));
    int rc = apply_activation(out, lin, act, q.act_slope);
    tg_tensor_release(lin);
    return rc;
}

/* torch's dtype rule for x, weight and bias (tg__check_amp_dtypes): one
 * dtype outside autocast, where torch's conv2d refuses mixed ones
 * ("expected scalar type Float but found Double"); under autocast the
 * policy casts them (conv to the scope's dtype, conv_transpose to the
 * widest), except an f64 beside another float dtype, which autocast does
 * not cast.  The op's own checks name NULL or non-float tensors. */
static int check_dtypes(const tg_op_schema *op, const tg_tensor *x, const tg_tensor *w,
                        const tg_tensor *b)
{
    if (!x || !w || !tg_dtype_is_float(x->dtype) || !tg_dtype_is_float(w->dtype)) return TG_OK;
    const char *name = op->name;
    if (w->ndim >= 3 && w->ndim <= 5) name = tg__conv_opname(op != &conv_schema, w->ndim - 2);
    TG_TRY(tg__check_amp_dtypes(name, "x", x, "weight", w));
    if (!b || !tg_dtype_is_float(b->dtype)) return TG_OK;
    return tg__check_amp_dtypes(name, "x", x, "bias", b);
}

/* call() runs public ops on the library's behalf (the unsqueeze of an
 * unbatched x, the split activation); only the result goes to the caller's
 * scope (tapegrad/scope.h). */
static int scoped_call(const tg_op_schema *op, tg_tensor **out, tg_tensor *x, tg_tensor *w,
                       tg_tensor *b, const tg_conv_params *p)
{
    TG_CHECK(out, TG_EINVAL, "%s: out must not be NULL", op->name);
    TG_TRY(check_dtypes(op, x, w, b));
    tg__lib_enter();
    const int rc = call(op, out, x, w, b, p);
    tg__lib_leave();
    return tg__scope_capture(out, rc);
}

int tg_conv(tg_tensor **out, tg_tensor *x, tg_tensor *weight, tg_tensor *bias,
            const tg_conv_params *p)
{
    return scoped_call(&conv_schema, out, x, weight, bias, p);
}

int tg_conv_transpose(tg_tensor **out, tg_tensor *x, tg_tensor *weight, tg_tensor *bias,
                      const tg_conv_params *p)
{
    return scoped_call(&conv_transpose_schema, out, x, weight, bias, p);
}
