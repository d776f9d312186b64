/* src/quant/fake_quantize.c - the fake_quantize op: quantize then dequantize
 * in float, with the straight-through gradient of quantization-aware
 * training. */
#include <math.h>

#include "quant/quant_internal.h"
#include "tapegrad/ops.h"

typedef struct fq_params {
    double scale;
    int32_t zp, qmin, qmax;
} fq_params;

/* The quantized level before clamping: rint(x / scale) + zp (half to even). */
static inline double fq_level(double x, const fq_params *p) { return rint(x / p->scale) + p->zp; }

/* Applies f elementwise: dst[i] = f(src[i]) on a gathered copy of x, into a
 * new tensor of x's dtype.  mask selects the output: the fake-quantized value
 * (false) or the straight-through mask 1/0 (true). */
static int fq_map(tg_tensor **out, const tg_tensor *x, const fq_params *p, bool mask)
{
    const int64_t n = tg_tensor_numel(x);
    double *v = tg__malloc((size_t)(n ? n : 1) * sizeof *v);
    if (!v) return TG_ENOMEM;
    tg_tensor *y = tg__tensor_empty(x->dtype, x->ndim, x->shape);
    if (!y) {
        free(v);
        return TG_ENOMEM;
    }
    tg__gather(x, TG_F64, v);
    for (int64_t i = 0; i < n; i++) {
        double l = fq_level(v[i], p);
        if (mask) v[i] = (l >= p->qmin && l <= p->qmax) ? 1.0 : 0.0;
        else if (!isnan(l)) v[i] = ((l < p->qmin ? p->qmin : l > p->qmax ? p->qmax : l) - p->zp) * p->scale;
    }
    tg__scatter(y, TG_F64, v);
    free(v);
    *out = y;
    return TG_OK;
}

static int fq_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                      const void *params)
{
    const tg_tensor *x = in[0];
    TG_CHECK(x, TG_EINVAL, "fake_quantize: x must not be NULL");
    TG_CHECK(tg_dtype_is_float(x->dtype), TG_EDTYPE,
             "fake_quantize: x must be a float tensor, got %s", tg_dtype_name(x->dtype));
    TG_TRY(fq_map(out, x, params, false));
    if (ctx) tg__ctx_save(ctx, in[0]);
    return TG_OK;
}

/* Straight-through estimator: d fq / dx = 1 where the level was in range,
 * 0 where it was clamped; the mask is a constant, so dx = dy * mask is
 * differentiable (in dy) to any order. */
static int fq_backward(tg_ctx *ctx, tg_tensor *grad_out, tg_tensor **grad_in)
{
    if (!tg__ctx_needs_grad(ctx, 0)) return TG_OK;
    tg_tensor *x = NULL, *mask = NULL;
    TG_TRY(tg__ctx_saved(ctx, 0, &x));
    TG_TRY(fq_map(&mask, x, tg__ctx_params(ctx), true));
    int rc = tg_mul(&grad_in[0], grad_out, mask);
    tg_tensor_release(mask);
    return rc;
}

static tg_op_schema fq_schema = {
    .name = "fake_quantize",
    .arity = 1,
    .amp = TG_AMP_KEEP,
    .forward = fq_forward,
    .backward = fq_backward,
    .double_backward = true,
};

void tg__register_quant(void) { tg__op_register(&fq_schema); }

int tg_fake_quantize(tg_tensor **out, tg_tensor *x, double scale, int32_t zero_point,
                     int32_t quant_min, int32_t quant_max)
{
    TG_CHECK(out, TG_EINVAL, "fake_quantize: out must not be NULL");
    TG_CHECK(isfinite(scale) && scale > 0, TG_EINVAL,
             "fake_quantize: scale=%g must be finite and > 0", scale);
    TG_CHECK(quant_min < quant_max, TG_EINVAL,
             "fake_quantize: quant_min=%d must be < quant_max=%d", (int)quant_min,
             (int)quant_max);
    TG_CHECK(zero_point >= quant_min && zero_point <= quant_max, TG_EINVAL,
             "fake_quantize: zero_point=%d must lie in [quant_min, quant_max]=[%d, %d]",
             (int)zero_point, (int)quant_min, (int)quant_max);
    fq_params p = {.scale = scale, .zp = zero_point, .qmin = quant_min, .qmax = quant_max};
    tg_tensor *in[1] = {x};
    return tg__op_call(&fq_schema, out, 1, in, &p, sizeof p);
}
