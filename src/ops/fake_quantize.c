/* src/ops/fake_quantize.c - the fake_quantize ops (per tensor and per
 * channel): quantize then dequantize in float, with the straight-through
 * gradient of quantization-aware training.
 *
 * Both ops share one kernel: a per-tensor op is the per-channel one with a
 * single channel spanning the whole tensor. */
#include <assert.h>
#include <math.h>
#include <string.h>

#include "ops/quant_params.h"
#include "ops/dispatch.h"
#include "ops/families.h"
#include "tapegrad/ops.h"
#include "tapegrad/quant.h"   /* the TG_API declarations: exported from the shared library */

typedef struct fq_channel {
    double scale;
    int32_t zp;
} fq_channel;

/* Per tensor: one channel.  Kept fixed-size so the node's params copy is
 * small. */
typedef struct fq_params {
    int32_t qmin, qmax;
    fq_channel ch;
} fq_params;

/* Per channel: n channels along axis (already resolved to >= 0). */
typedef struct fqc_params {
    int axis;
    int32_t qmin, qmax;
    int64_t n;
    fq_channel ch[];   /* n entries */
} fqc_params;

/* v[0..len) <- the fake-quantized values (mask false) or the
 * straight-through mask (mask true), all with one channel's (scale, zp).
 * The level before clamping is l = rint(v / scale) + zp (half to even); the
 * mask is 1 where qmin <= l <= qmax (torch's cachemask rule), else 0.  NaN
 * stays NaN (mask 0). */
static void fq_run(double *v, int64_t len, const fq_channel *c, int32_t qmin, int32_t qmax,
                   bool mask)
{
    for (int64_t i = 0; i < len; i++) {
        const double l = rint(v[i] / c->scale) + c->zp;
        if (mask) v[i] = (l >= qmin && l <= qmax) ? 1.0 : 0.0;
        else if (!isnan(l)) v[i] = ((l < qmin ? qmin : l > qmax ? qmax : l) - c->zp) * c->scale;
    }
}

/* *out (new, x's dtype and shape) = fq_run over a gathered copy of x, where
 * the row-major x is split into blocks of `inner` elements and block b uses
 * channel ch[b % n]: with inner = prod(shape[axis+1:]) that is the channel
 * index along axis.  Per tensor: n = 1, inner = numel. */
static int fq_map(tg_tensor **out, const tg_tensor *x, const fq_channel *ch, int64_t n,
                  int64_t inner, int32_t qmin, int32_t qmax, bool mask)
{
    const int64_t numel = tg_tensor_numel(x);
    double *v = tg__malloc((size_t)(numel ? numel : 1) * sizeof *v);
    if (!v) return TG_ENOMEM;
    tg_tensor *y = tg__tensor_empty(x->dtype, x->ndim, x->shape);
    if (!y) {
        free(v);
        return TG_ENOMEM;
    }
    tg__gather(x, TG_F64, v);
    if (inner > 0)
        for (int64_t b = 0; b * inner < numel; b++)
            fq_run(v + b * inner, inner, &ch[b % n], qmin, qmax, mask);
    tg__scatter(y, TG_F64, v);
    free(v);
    *out = y;
    return TG_OK;
}

/* Block size of fq_map for a channel axis; axis < 0: one channel, the whole x. */
static int64_t fq_inner(const tg_tensor *x, int axis)
{
    return axis < 0 ? tg_tensor_numel(x) : tg__q_inner_size(x, axis);
}

/* The forward of both ops: out = fake_quantize(x), saving x for backward. */
static int fq_apply(tg_ctx *ctx, tg_tensor **out, tg_tensor *x, const fq_channel *ch, int64_t n,
                    int axis, int32_t qmin, int32_t qmax)
{
    TG_TRY(fq_map(out, x, ch, n, fq_inner(x, axis), qmin, qmax, false));
    if (ctx) tg__ctx_save(ctx, x);
    return TG_OK;
}

/* Straight-through estimator, for both ops: d fq / dx = 1 where the level
 * was in range, 0 where it was clamped; the mask is a constant, so
 * dx = dy * mask is differentiable (in dy) to any order. */
static int fq_backward_ste(tg_ctx *ctx, tg_tensor *grad_out, tg_tensor **grad_in,
                           const fq_channel *ch, int64_t n, int axis, int32_t qmin, int32_t qmax)
{
    if (!tg__ctx_needs_grad(ctx, 0)) return TG_OK;
    tg_tensor *x = NULL, *mask = NULL;
    TG_TRY(tg__ctx_saved(ctx, 0, &x));
    TG_TRY(fq_map(&mask, x, ch, n, fq_inner(x, axis), qmin, qmax, true));
    int rc = tg_mul(&grad_in[0], grad_out, mask);
    tg_tensor_release(mask);
    return rc;
}

/* ---- per tensor ---- */

static int fq_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                      const void *params)
{
    (void)n;
    const fq_params *p = params;
    TG_TRY(tg__q_check_float("fake_quantize", in[0]));
    return fq_apply(ctx, out, in[0], &p->ch, 1, -1, p->qmin, p->qmax);
}

static int fq_backward(tg_ctx *ctx, tg_tensor *grad_out, tg_tensor **grad_in)
{
    const fq_params *p = tg__ctx_params(ctx);
    return fq_backward_ste(ctx, grad_out, grad_in, &p->ch, 1, -1, p->qmin, p->qmax);
}

static const tg_op_schema fq_schema = {
    .name = "fake_quantize",
    .arity = 1,
    .amp = TG_AMP_KEEP,
    .forward = fq_forward,
    .backward = fq_backward,
    .double_backward = true,
    .vjp = "da = g inside the clamp range, 0 outside (straight-through)",
};

static int fq_check_range(const char *op, int32_t quant_min, int32_t quant_max)
{
    TG_CHECK(quant_min < quant_max, TG_EINVAL, "%s: quant_min=%d must be < quant_max=%d", op,
             (int)quant_min, (int)quant_max);
    return TG_OK;
}

static int fq_check_zp(const char *op, const char *what, int32_t zp, int32_t quant_min,
                       int32_t quant_max)
{
    TG_CHECK(zp >= quant_min && zp <= quant_max, TG_EINVAL,
             "%s: %s=%d must lie in [quant_min, quant_max]=[%d, %d]", op, what, (int)zp,
             (int)quant_min, (int)quant_max);
    return TG_OK;
}

int tg_fake_quantize(tg_tensor **out, tg_tensor *x, double scale, int32_t zero_point,
                     int32_t quant_min, int32_t quant_max)
{
    TG_CHECK(out, TG_EINVAL, "fake_quantize: out must not be NULL");
    TG_CHECK(isfinite(scale) && scale > 0, TG_EINVAL,
             "fake_quantize: scale=%g must be finite and > 0", scale);
    TG_TRY(fq_check_range("fake_quantize", quant_min, quant_max));
    TG_TRY(fq_check_zp("fake_quantize", "zero_point", zero_point, quant_min, quant_max));
    fq_params p = {.qmin = quant_min, .qmax = quant_max, .ch = {scale, zero_point}};
    tg_tensor *in[1] = {x};
    return tg_op_call(&fq_schema, out, 1, in, &p, sizeof p);
}

/* ---- per channel ---- */

static int fqc_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                       const void *params)
{
    (void)n;
    const fqc_params *p = params;
    const tg_tensor *x = in[0];
    TG_TRY(tg__q_check_float("fake_quantize_per_channel", x));
    TG_CHECK(p->axis < x->ndim && x->shape[p->axis] == p->n, TG_ESHAPE,
             "fake_quantize_per_channel: x no longer has %lld channels on axis %d",
             (long long)p->n, p->axis);
    return fq_apply(ctx, out, in[0], p->ch, p->n, p->axis, p->qmin, p->qmax);
}

static int fqc_backward(tg_ctx *ctx, tg_tensor *grad_out, tg_tensor **grad_in)
{
    const fqc_params *p = tg__ctx_params(ctx);
    return fq_backward_ste(ctx, grad_out, grad_in, p->ch, p->n, p->axis, p->qmin, p->qmax);
}

static const tg_op_schema fqc_schema = {
    .name = "fake_quantize_per_channel",
    .arity = 1,
    .amp = TG_AMP_KEEP,
    .forward = fqc_forward,
    .backward = fqc_backward,
    .double_backward = true,
    .vjp = "da = g inside the clamp range, 0 outside (straight-through)",
};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__fake_quantize_ops[] = {&fq_schema, &fqc_schema};
static_assert(sizeof tg__fake_quantize_ops / sizeof tg__fake_quantize_ops[0] == TG__fake_quantize_N,
              "src/ops/families.h must count the fake_quantize ops");

int tg_fake_quantize_per_channel(tg_tensor **out, tg_tensor *x, int axis, int64_t n,
                                 const double *scales, const int32_t *zero_points,
                                 int32_t quant_min, int32_t quant_max)
{
    const char *op = "fake_quantize_per_channel";
    TG_CHECK(out, TG_EINVAL, "%s: out must not be NULL", op);
    TG_TRY(tg__q_check_float(op, x));
    TG_TRY(tg__q_check_channels(op, x, &axis, n, scales));
    TG_TRY(fq_check_range(op, quant_min, quant_max));
    for (int64_t c = 0; zero_points && c < n; c++) {
        char what[40];
        snprintf(what, sizeof what, "zero_points[%lld]", (long long)c);
        TG_TRY(fq_check_zp(op, what, zero_points[c], quant_min, quant_max));
    }
    TG_CHECK(zero_points || (quant_min <= 0 && quant_max >= 0), TG_EINVAL,
             "%s: zero_points NULL means 0, which must lie in [quant_min, quant_max]=[%d, %d]",
             op, (int)quant_min, (int)quant_max);
    const size_t size = sizeof(fqc_params) + (size_t)n * sizeof(fq_channel);
    fqc_params *p = tg__malloc(size);
    if (!p) return TG_ENOMEM;
    *p = (fqc_params){.axis = axis, .qmin = quant_min, .qmax = quant_max, .n = n};
    for (int64_t c = 0; c < n; c++)
        p->ch[c] = (fq_channel){scales[c], zero_points ? zero_points[c] : 0};
    tg_tensor *in[1] = {x};
    int rc = tg_op_call(&fqc_schema, out, 1, in, p, size);
    free(p);
    return rc;
}
