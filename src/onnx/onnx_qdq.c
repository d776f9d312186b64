/* src/onnx_qdq.c - the QDQ form of tg_quantize_model's int8 layers:
 *
 *   x -> QuantizeLinear(x_scale, x_zp) -> DequantizeLinear ----\
 *   W (i8) -> DequantizeLinear(w_scale[c], 0, axis) ----------- op -> [Relu]
 *   b (i32 = rint(b / (x_scale w_scale[c]))) -> DequantizeLinear /
 *     -> QuantizeLinear(y_scale, y_zp) -> DequantizeLinear -> y
 *
 * which is what the int8 module computes (tapegrad/quant.h): the same
 * quantized input, weight and bias integers, the float op in between and
 * the requantized output.  A runtime that fuses QDQ runs it as an int8 op.
 * A Conv's reflect, replicate or circular padding pads the float x before
 * its QuantizeLinear (onnx_pad.c), as the int8 module pads before it
 * quantizes (the padded values are copies of x's, inside x's range).
 * With tg_onnx_options.u8_weights the weight is W + 128 as u8 with zero
 * point 128: the same values, in the u8 x u8 form that ONNX Runtime
 * multiplies without saturation on CPUs that lack VNNI.
 * The weight scales lie along the output-channel axis: 0 for Conv / Linear
 * weights (C_out, C_in/g, K...), 1 for ConvTranspose weights
 * (C_in, C_out/g, K...).  DequantizeLinear has one scale per index of that
 * axis, so a grouped ConvTranspose exports per channel only when every group
 * has the same C_out/g scales. */
#include <math.h>
#include <string.h>

#include "core/core.h"
#include "onnx/onnx_graph.h"
#include "tapegrad/quant.h"

/* A (scale, zero point) pair of n entries (n = 1: 0-d) as initializers
 * `<path>.<what>_scale` / `_zero_point` of zero-point type zdt. */
static int tg__qdq_params(const tg__onnx_site *s, const char *what, int64_t n,
                          const float *scale, int zdt, const void *zp, size_t zsize,
                          const char **sname, const char **zname)
{
    *sname = tg__onnx_str(s->g, "%s%s%s_scale", s->path, s->path[0] ? "." : "", what);
    *zname = tg__onnx_str(s->g, "%s%s%s_zero_point", s->path, s->path[0] ? "." : "", what);
    if (!*sname || !*zname) return TG_ENOMEM;
    const int nd = n == 1 ? 0 : 1;
    TG_TRY(tg__onnx_init_raw(s->g, *sname, TG__ONNX_FLOAT, nd, &n, scale, sizeof *scale));
    return tg__onnx_init_raw(s->g, *zname, zdt, nd, &n, zp, zsize);
}

/* Quantize then dequantize x with a per-tensor pair: *y. */
static int tg__qdq_act(const tg__onnx_site *s, const char *what, const char *x, double scale,
                       int32_t zp, tg_dtype qdt, const char **y)
{
    const float sc = (float)scale;
    const uint8_t zu = (uint8_t)zp;
    const int8_t zi = (int8_t)zp;
    const char *sn = NULL, *zn = NULL, *q = NULL;
    TG_TRY(tg__qdq_params(s, what, 1, &sc, qdt == TG_U8 ? TG__ONNX_UINT8 : TG__ONNX_INT8,
                          qdt == TG_U8 ? (const void *)&zu : (const void *)&zi, 1, &sn, &zn));
    TG_TRY(tg__onnx_add(s->g, NULL, &q, s->scope, "QuantizeLinear", 3,
                         (const char *const[]){x, sn, zn}));
    return tg__onnx_add(s->g, NULL, y, s->scope, "DequantizeLinear", 3,
                         (const char *const[]){q, sn, zn});
}

/* The weight scales DequantizeLinear takes along the weight's channel axis:
 * n_axis of them (1 when per tensor).  TG_EUNSUPPORTED for a grouped
 * ConvTranspose whose groups have different scales. */
static int tg__qdq_weight_scales(const tg__onnx_site *s, const tg_qlayer_info *in,
                                 float *out, int64_t *n_axis)
{
    const int64_t n = in->q.n_weight_scales;
    const double *ws = in->q.weight_scales;
    int64_t k = n;
    if (in->transpose && n > 1 && in->p.groups > 1) {
        k = n / in->p.groups;   /* C_out/g: channel g*k + j uses ws[j] in DequantizeLinear */
        for (int64_t c = k; c < n; c++)
            TG_CHECK((float)ws[c] == (float)ws[c % k], TG_EUNSUPPORTED,
                     "onnx_export: module '%s' (QuantizedConvTranspose) is not supported: "
                     "groups=%lld with per-channel weight scales that differ between groups "
                     "(DequantizeLinear on axis 1 has C_out/groups=%lld scales; quantize "
                     "with per_channel=false)", s->path, (long long)in->p.groups, (long long)k);
    }
    for (int64_t c = 0; c < k; c++) out[c] = (float)ws[c];
    *n_axis = k;
    return TG_OK;
}

/* The i8 weight w as u8 values w + 128, an initializer `name`. */
static int tg__qdq_weight_u8(const tg__onnx_site *s, const char *name, const tg_tensor *w)
{
    const int64_t n = tg_tensor_numel(w);
    int8_t *v = tg__malloc((size_t)(n ? n : 1));
    if (!v) return TG_ENOMEM;
    tg__gather(w, TG_I8, v);
    uint8_t *u = (uint8_t *)v;
    for (int64_t i = 0; i < n; i++) u[i] = (uint8_t)(v[i] + 128);
    const int rc = tg__onnx_init_raw(s->g, name, TG__ONNX_UINT8, tg_tensor_ndim(w),
                                     tg_tensor_shape(w), u, 1);
    free(v);
    return rc;
}

/* DequantizeLinear of the weight: the i8 values with zero point 0, or with
 * u8_weights the same values as u8 with zero point 128.  *y. */
static int tg__qdq_weight(const tg__onnx_site *s, const tg_qlayer_info *in,
                          const char **y)
{
    const bool u8 = tg__onnx_options(s->g)->u8_weights;
    const int64_t n = in->q.n_weight_scales;
    float *sc = tg__malloc((size_t)n * sizeof *sc);
    uint8_t *zp = tg__malloc((size_t)n);
    const char *wname = tg__onnx_param_name(s, "weight"), *sn = NULL, *zn = NULL;
    int64_t k = 0;
    int rc = sc && zp && wname ? TG_OK : TG_ENOMEM;
    if (rc >= 0) memset(zp, u8 ? 128 : 0, (size_t)n);
    if (rc >= 0) rc = tg__qdq_weight_scales(s, in, sc, &k);
    if (rc >= 0)
        rc = u8 ? tg__qdq_weight_u8(s, wname, in->weight)
                : tg__onnx_init_tensor(s->g, wname, in->weight);
    if (rc >= 0)
        rc = tg__qdq_params(s, "weight", k, sc, u8 ? TG__ONNX_UINT8 : TG__ONNX_INT8, zp, 1,
                            &sn, &zn);
    tg__onnx_node *node = NULL;
    if (rc >= 0)
        rc = tg__onnx_add(s->g, &node, y, s->scope, "DequantizeLinear", 3,
                           (const char *const[]){wname, sn, zn});
    if (rc >= 0 && k > 1) rc = tg__onnx_attr_int(s->g, node, "axis", in->transpose ? 1 : 0);
    free(sc);
    free(zp);
    return rc;
}

/* The bias as i32 at scale x_scale * w_scale[c], rounded half to even and
 * saturated as the int8 ops do, and its DequantizeLinear: *y ("" without). */
static int tg__qdq_bias(const tg__onnx_site *s, const tg_qlayer_info *in,
                        const char **y)
{
    if (!in->bias) {
        *y = "";
        return TG_OK;
    }
    const int64_t c_out = tg_tensor_numel(in->bias), nw = in->q.n_weight_scales;
    float *b = tg__malloc((size_t)c_out * sizeof *b), *sc = tg__malloc((size_t)c_out * sizeof *sc);
    int32_t *bq = tg__malloc((size_t)c_out * sizeof *bq);
    int32_t *zp = tg__calloc((size_t)c_out, sizeof *zp);
    const char *bname = tg__onnx_param_name(s, "bias"), *sn = NULL, *zn = NULL;
    int rc = b && sc && bq && zp && bname ? TG_OK : TG_ENOMEM;
    if (rc >= 0) {
        tg__gather(in->bias, TG_F32, b);
        for (int64_t c = 0; c < c_out; c++) {
            const double acc = in->q.x_scale * in->q.weight_scales[nw == 1 ? 0 : c];
            const double r = rint((double)b[c] / acc);
            bq[c] = r != r ? 0 : r < INT32_MIN ? INT32_MIN : r > INT32_MAX ? INT32_MAX : (int32_t)r;
            sc[c] = (float)acc;
        }
        rc = tg__onnx_init_raw(s->g, bname, TG__ONNX_INT32, 1, &c_out, bq, sizeof *bq);
    }
    if (rc >= 0) rc = tg__qdq_params(s, "bias", c_out == 1 ? 1 : c_out, sc, TG__ONNX_INT32, zp,
                                     sizeof *zp, &sn, &zn);
    tg__onnx_node *node = NULL;
    if (rc >= 0)
        rc = tg__onnx_add(s->g, &node, y, s->scope, "DequantizeLinear", 3,
                           (const char *const[]){bname, sn, zn});
    if (rc >= 0 && c_out > 1) rc = tg__onnx_attr_int(s->g, node, "axis", 0);
    free(b), free(sc), free(bq), free(zp);
    return rc;
}

int tg__onnx_emit_qdq(const tg__onnx_site *s, const char **y)
{
    tg_qlayer_info in;
    TG_TRY(tg_quantized_layer_info(s->m, &in));
    const char *xf = s->x, *x = NULL, *w = NULL, *b = NULL, *t = NULL;
    /* a Conv's reflect / replicate / circular padding applies to the float
     * input, before its quantization, as in the int8 module */
    if (!in.linear) TG_TRY(tg__onnx_conv_pad(s, &in.p, tg_tensor_ndim(in.weight) - 2, &xf));
    TG_TRY(tg__qdq_act(s, "input", xf, in.q.x_scale, in.q.x_zero_point, in.act_dtype, &x));
    TG_TRY(tg__qdq_weight(s, &in, &w));
    TG_TRY(tg__qdq_bias(s, &in, &b));
    if (in.linear) {
        TG_TRY(tg__onnx_linear(s->g, s->scope, x, tg_tensor_ndim(s->xt), w, b, &t));
    } else {
        tg__onnx_node *n = NULL;
        TG_TRY(tg__onnx_add(s->g, &n, &t, s->scope, in.transpose ? "ConvTranspose" : "Conv",
                             b[0] ? 3 : 2, (const char *const[]){x, w, b}));
        TG_TRY(tg__onnx_conv_attrs(s->g, n, &in.p, in.weight, in.transpose));
    }
    if (in.relu) TG_TRY(tg__onnx_activation(s->g, s->scope, t, TG_ACT_RELU, 0, &t));
    return tg__qdq_act(s, "output", t, in.q.y_scale, in.q.y_zero_point, in.act_dtype, y);
}
