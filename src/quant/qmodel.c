/* src/quant/qmodel.c - post-training quantization of a module tree
 * (tg_quantize_model): prepare a copy whose Linear / Conv / ConvTranspose
 * layers are wrapped by observing modules, run the calibration batches
 * through it, then turn each wrapper into a quantized module in place.
 *
 * A wrapper first observes (min-max of its input and of the float layer's
 * output, as torch's prepare), then, converted, computes
 *   y = dequantize(int8_op(quantize(x; x_scale, x_zp), packed W; per-channel
 *       symmetric scales), y_scale, y_zp)
 * with the requantization of tapegrad/quant.h.  Everything else (BatchNorm,
 * activations, reshapes) stays float and is shared with the float model.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "nn/module_internal.h"
#include "quant/quant_internal.h"
#include "tapegrad/autograd.h"

typedef enum ql_kind { QL_LINEAR, QL_CONV, QL_CONVT } ql_kind;

typedef struct qlayer {
    ql_kind kind;
    tg_dtype act;                 /* dtype of the quantized activations */
    tg_module *float_layer;       /* owned while observing, NULL once converted */
    tg_observer in_obs, out_obs;
    /* converted: */
    tg_qweight *w;
    tg_tensor *bias;              /* f32 (c_out) or NULL, owned */
    tg_conv_params p;
    double *wscales;              /* owned, q.n_weight_scales entries */
    tg_qscales q;
} qlayer;

static void qlayer_release(void *state)
{
    qlayer *s = state;
    tg_module_release(s->float_layer);
    tg_observer_free(&s->in_obs);
    tg_observer_free(&s->out_obs);
    tg_qweight_free(s->w);
    tg_tensor_release(s->bias);
    free(s->wscales);
    free(s);
}

/* The integer op between quantize and dequantize. */
static int qlayer_int8(const qlayer *s, tg_tensor **yq, tg_tensor *xq)
{
    if (s->kind == QL_LINEAR) return tg_quantized_linear_packed(yq, xq, s->w, s->bias, &s->q, false);
    if (s->kind == QL_CONV) return tg_quantized_conv_packed(yq, xq, s->w, s->bias, &s->p, &s->q);
    return tg_quantized_conv_transpose_packed(yq, xq, s->w, s->bias, &s->p, &s->q);
}

static int qlayer_forward(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    qlayer *s = m->state;
    if (s->float_layer) {   /* observing */
        TG_TRY(tg_observer_update(&s->in_obs, x));
        tg_tensor *yf = NULL;
        TG_TRY(tg_module_forward(s->float_layer, &yf, x));
        int rc = tg_observer_update(&s->out_obs, yf);
        if (rc < 0) {
            tg_tensor_release(yf);
            return rc;
        }
        *y = yf;
        return TG_OK;
    }
    tg_tensor *xq = NULL, *yq = NULL;
    int rc = tg_quantize(&xq, x, s->act, s->q.x_scale, s->q.x_zero_point);
    if (rc >= 0) rc = qlayer_int8(s, &yq, xq);
    if (rc >= 0) rc = tg_dequantize(y, yq, s->q.y_scale, s->q.y_zero_point);
    tg_tensor_release(xq);
    tg_tensor_release(yq);
    return rc;
}

static const tg_module_vtable qlayer_vt[3] = {
    [QL_LINEAR] = {.type_name = "QuantizedLinear", .forward = qlayer_forward,
                   .release = qlayer_release},
    [QL_CONV] = {.type_name = "QuantizedConv", .forward = qlayer_forward,
                 .release = qlayer_release},
    [QL_CONVT] = {.type_name = "QuantizedConvTranspose", .forward = qlayer_forward,
                  .release = qlayer_release},
};

static bool is_qlayer(const tg_module *m)
{
    return m->vt >= &qlayer_vt[0] && m->vt <= &qlayer_vt[2];
}

static int qlayer_new(tg_module **out, tg_module *layer, ql_kind kind,
                      const tg_quantize_options *o)
{
    qlayer *s = tg__calloc(1, sizeof *s);
    if (!s) return TG_ENOMEM;
    s->kind = kind;
    s->act = o->act_dtype;
    s->float_layer = tg_module_retain(layer);
    int rc = tg_observer_init(&s->in_obs, o->act_observer, o->act_dtype, false, 0);
    if (rc >= 0) rc = tg_observer_init(&s->out_obs, o->act_observer, o->act_dtype, false, 0);
    if (rc >= 0 && kind != QL_LINEAR) rc = tg_nn_conv_params(layer, &s->p);
    if (rc >= 0) rc = tg_module_new(out, &qlayer_vt[kind], s);
    if (rc < 0) qlayer_release(s);
    return rc;
}

/* ---- conversion of one wrapper ---- */

/* Per-output-channel symmetric scales (torch: amax / ((qmax - qmin) / 2),
 * at least FLT_EPSILON) of w (f32 values wv) under the channel rule of
 * tapegrad/quant.h; one scale over everything when !per_channel. */
static void weight_scales(const qlayer *s, const tg_tensor *w, const float *wv, int64_t c_out,
                          bool per_channel, double *scales)
{
    const int64_t n = tg_tensor_numel(w), d0 = tg_tensor_dim(w, 0), d1 = tg_tensor_dim(w, 1);
    const int64_t inner = n / (d0 * d1), cig = d0 / (s->kind == QL_CONVT ? s->p.groups : 1);
    for (int64_t c = 0; c < c_out; c++) scales[c] = 0;
    for (int64_t i = 0; i < n; i++) {
        const int64_t i0 = i / (d1 * inner), i1 = (i / inner) % d1;
        /* ConvTranspose: element (ci, j, k) feeds output channel g*(C_out/G) + j */
        const int64_t c = s->kind == QL_CONVT ? (i0 / cig) * d1 + i1 : i0;
        scales[c] = fmax(scales[c], fabs((double)wv[i]));
    }
    double all = 0;
    for (int64_t c = 0; c < c_out; c++) all = fmax(all, scales[c]);
    for (int64_t c = 0; c < c_out; c++)
        scales[c] = fmax((per_channel ? scales[c] : all) / 127.5, FLT_EPSILON);
}

static int pack_weight(qlayer *s, tg_tensor *w, int64_t c_out, bool per_channel)
{
    const bool transpose = s->kind == QL_CONVT;
    const int64_t groups = s->kind == QL_LINEAR ? 1 : s->p.groups;
    float *wv = tg__malloc((size_t)tg_tensor_numel(w) * sizeof *wv + 1);
    s->wscales = tg__malloc((size_t)c_out * sizeof *s->wscales);
    if (!wv || !s->wscales) {
        free(wv);
        return TG_ENOMEM;
    }
    tg__gather(w, TG_F32, wv);
    weight_scales(s, w, wv, c_out, per_channel, s->wscales);
    free(wv);
    s->q.n_weight_scales = per_channel ? c_out : 1;
    s->q.weight_scales = s->wscales;
    tg_tensor *wq = NULL;
    int rc = tg_quantize_conv_weight(&wq, w, transpose, groups, s->q.n_weight_scales, s->wscales);
    if (rc >= 0) rc = tg_qweight_new(&s->w, wq, transpose, groups);
    tg_tensor_release(wq);
    return rc;
}

static int qlayer_convert(tg_module *m, const tg_quantize_options *o)
{
    qlayer *s = m->state;
    const char *op = "quantize_model";
    tg_tensor *w = tg_module_find(s->float_layer, "weight");
    tg_tensor *b = tg_module_find(s->float_layer, "bias");
    TG_CHECK(w && tg_tensor_ndim(w) >= 2, TG_EINVAL, "%s: a %s layer has no usable weight", op,
             tg_module_type_name(s->float_layer));
    TG_CHECK(!b || tg_tensor_dtype(b) == TG_F32, TG_EDTYPE,
             "%s: bias must be f32 to be quantized, got %s", op,
             tg_dtype_name(tg_tensor_dtype(b)));
    int rc = tg_observer_qparams(&s->in_obs, &s->q.x_scale, &s->q.x_zero_point);
    if (rc >= 0) rc = tg_observer_qparams(&s->out_obs, &s->q.y_scale, &s->q.y_zero_point);
    TG_CHECK(rc >= 0, TG_EINVAL,
             "%s: a %s layer saw no calibration batch (it never ran in forward)", op,
             tg_module_type_name(s->float_layer));
    const int64_t c_out = s->kind == QL_CONVT ? tg_tensor_dim(w, 1) * s->p.groups
                                              : tg_tensor_dim(w, 0);
    TG_TRY(pack_weight(s, w, c_out, o->per_channel));
    s->bias = b ? tg_tensor_retain(b) : NULL;
    s->p.act = TG_ACT_NONE;   /* the float layer's fused activation, if any, stays float */
    tg_module_release(s->float_layer);
    s->float_layer = NULL;
    return TG_OK;
}

/* ---- the tree ---- */

static int prepare(tg_module **out, tg_module *m, const tg_quantize_options *o);

/* A copy of container m (no private state) with prepared children; its own
 * parameters and buffers are shared. */
static int copy_container(tg_module **out, tg_module *m, const tg_quantize_options *o)
{
    tg_module *c = NULL;
    TG_TRY(tg_module_new(&c, m->vt, NULL));
    int rc = TG_OK;
    for (int i = 0; i < m->n_params && rc >= 0; i++)
        rc = tg_module_add_parameter(c, m->params[i].name, tg_tensor_retain(m->params[i].t));
    for (int i = 0; i < m->n_buffers && rc >= 0; i++)
        rc = tg_module_add_buffer(c, m->buffers[i].name, tg_tensor_retain(m->buffers[i].t));
    for (int i = 0; i < m->n_children && rc >= 0; i++) {
        tg_module *child = NULL;
        rc = prepare(&child, m->children[i].m, o);
        if (rc >= 0) rc = tg_module_add_child(c, m->children[i].name, child);
    }
    if (rc < 0) {
        tg_module_release(c);
        return rc;
    }
    *out = c;
    return TG_OK;
}

static int prepare(tg_module **out, tg_module *m, const tg_quantize_options *o)
{
    const char *t = tg_module_type_name(m);
    if (!strcmp(t, "Linear")) return qlayer_new(out, m, QL_LINEAR, o);
    if (!strcmp(t, "Conv")) return qlayer_new(out, m, QL_CONV, o);
    if (!strcmp(t, "ConvTranspose")) return qlayer_new(out, m, QL_CONVT, o);
    /* A container without private state can be rebuilt around quantized
     * children; anything else is shared as is (and stays float). */
    if (m->n_children > 0 && m->state == NULL) return copy_container(out, m, o);
    *out = tg_module_retain(m);
    return TG_OK;
}

static int convert_visit(tg_module *m, void *user)
{
    return is_qlayer(m) ? qlayer_convert(m, user) : TG_OK;
}

static int calibrate(tg_module *q, int n_batches, tg_tensor *const *batches)
{
    int rc = TG_OK;
    tg_no_grad_begin();
    for (int i = 0; i < n_batches && rc >= 0; i++) {
        tg_tensor *y = NULL;
        rc = tg_module_forward(q, &y, batches[i]);
        tg_tensor_release(y);
    }
    tg_no_grad_end();
    return rc;
}

int tg_quantize_model(tg_module **out, tg_module *float_model, int n_batches,
                      tg_tensor *const *batches, const tg_quantize_options *opt)
{
    const char *op = "quantize_model";
    TG_CHECK(out && float_model, TG_EINVAL, "%s: out and float_model must not be NULL", op);
    TG_CHECK(n_batches >= 1 && batches, TG_EINVAL,
             "%s: n_batches=%d must be >= 1 with a batches array", op, n_batches);
    for (int i = 0; i < n_batches; i++)
        TG_CHECK(batches[i], TG_EINVAL, "%s: batches[%d] must not be NULL", op, i);
    tg_quantize_options o = TG_QUANTIZE_OPTIONS_INIT;
    if (opt) o = *opt;
    TG_CHECK(o.act_dtype == TG_U8 || o.act_dtype == TG_I8, TG_EDTYPE,
             "%s: opt->act_dtype must be u8 or i8, got %s", op, tg_dtype_name(o.act_dtype));
    TG_CHECK(o.act_observer == TG_OBSERVER_MINMAX || o.act_observer == TG_OBSERVER_MOVING_AVERAGE,
             TG_EINVAL, "%s: opt->act_observer must be a per-tensor observer", op);
    tg_module *q = NULL;
    TG_TRY(prepare(&q, float_model, &o));
    tg_module_train(q, false);   /* eval: BatchNorm uses its running statistics */
    int rc = calibrate(q, n_batches, batches);
    if (rc >= 0) rc = tg__module_visit(q, convert_visit, &o);
    if (rc < 0) {
        tg_module_release(q);
        return rc;
    }
    *out = q;
    return TG_OK;
}
