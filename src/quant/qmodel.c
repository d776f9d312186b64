/* src/quant/qmodel.c - post-training quantization of a module tree
 * (tg_quantize_model): prepare a copy whose Linear / Conv / ConvTranspose
 * layers are wrapped by observing modules, run the calibration batches
 * through it, then turn each wrapper into a quantized module in place.
 *
 * A wrapper first observes (min-max of its input and of the float layer's
 * output, as torch's prepare), then, converted, computes
 *   y = dequantize(int8_op(quantize(x; x_scale, x_zp), packed W; per-channel
 *       symmetric scales), y_scale, y_zp)
 * with the requantization of tapegrad/quant.h.  Inside a Sequential a
 * following BatchNorm is folded into the layer first (qfold.c) and a
 * following ReLU fused into the int8 op; both slots then hold an Identity.
 * Everything else (activations, reshapes) stays float and is shared with the
 * float model.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "nn/module_internal.h"
#include "ops/conv_internal.h"
#include "quant/quant_internal.h"
#include "tapegrad/autograd.h"
#include "tapegrad/ops.h"

typedef enum ql_kind { QL_LINEAR, QL_CONV, QL_CONVT } ql_kind;

typedef struct qlayer {
    ql_kind kind;
    tg_dtype act;                 /* dtype of the quantized activations */
    bool relu;                    /* ReLU fused after the layer (int8: q >= y_zp) */
    bool need_2d;                 /* a folded Linear: input must be (N, in) */
    tg_module *float_layer;       /* owned while observing, NULL once converted */
    tg_observer in_obs, out_obs;
    /* converted: */
    tg_qweight *w;
    tg_tensor *wq;                /* i8 weight in the float layout, owned */
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
    tg_tensor_release(s->wq);
    tg_tensor_release(s->bias);
    free(s->wscales);
    free(s);
}

/* The integer op between quantize and dequantize, with conv params p. */
static int qlayer_int8(const qlayer *s, const tg_conv_params *p, tg_tensor **yq, tg_tensor *xq)
{
    if (s->kind == QL_LINEAR)
        return tg_quantized_linear_packed(yq, xq, s->w, s->bias, &s->q, s->relu);
    if (s->kind == QL_CONV) return tg_quantized_conv_packed(yq, xq, s->w, s->bias, p, &s->q);
    return tg_quantized_conv_transpose_packed(yq, xq, s->w, s->bias, p, &s->q);
}

/* The float layer (then the fused ReLU) during calibration. */
static int qlayer_float(qlayer *s, tg_tensor **y, tg_tensor *x)
{
    tg_tensor *yf = NULL;
    TG_TRY(tg_module_forward(s->float_layer, &yf, x));
    if (!s->relu) {
        *y = yf;
        return TG_OK;
    }
    int rc = tg_relu(y, yf);
    tg_tensor_release(yf);
    return rc;
}

static int qlayer_forward(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    qlayer *s = m->state;
    TG_CHECK(!s->need_2d || tg_tensor_ndim(x) == 2, TG_EINVAL,
             "%s: a Linear folded with the BatchNorm after it takes (N, in) input, got %d-d "
             "(quantize without opt->fold_batchnorm for other ranks)", tg_module_type_name(m),
             tg_tensor_ndim(x));
    if (s->float_layer) {   /* observing */
        TG_TRY(tg_observer_update(&s->in_obs, x));
        tg_tensor *yf = NULL;
        TG_TRY(qlayer_float(s, &yf, x));
        int rc = tg_observer_update(&s->out_obs, yf);
        if (rc < 0) {
            tg_tensor_release(yf);
            return rc;
        }
        *y = yf;
        return TG_OK;
    }
    tg_tensor *xq = NULL, *yq = NULL, *xp = NULL;
    tg_conv_params p = s->p;
    int rc = TG_OK;
    if (s->kind == QL_CONV && s->p.padding_mode != TG_PAD_CONSTANT) {
        /* a Conv's reflect, replicate or circular padding: the float x
         * padded so (copies of its values: x's scale holds them), then the
         * int8 op without padding */
        const int nsp = tg_tensor_ndim(s->wq) - 2;
        int64_t pads[6];
        bool any;
        rc = tg__conv_pad_pairs(tg_module_type_name(m), &s->p, nsp, pads, &p, &any);
        if (rc >= 0 && any) rc = tg_pad(&xp, x, 2 * nsp, pads, s->p.padding_mode, 0.0);
    }
    if (rc >= 0) rc = tg_quantize(&xq, xp ? xp : x, s->act, s->q.x_scale, s->q.x_zero_point);
    tg_tensor_release(xp);
    if (rc >= 0) rc = qlayer_int8(s, &p, &yq, xq);
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

/* A wrapper observing layer (borrowed), then fused ReLU when relu.  A
 * Conv's own ReLU (p.act) becomes the fused one. */
static int qlayer_new(tg_module **out, tg_module *layer, ql_kind kind, bool relu, bool need_2d,
                      const tg_quantize_options *o)
{
    qlayer *s = tg__calloc(1, sizeof *s);
    if (!s) return TG_ENOMEM;
    s->kind = kind;
    s->act = o->act_dtype;
    s->relu = relu;
    s->need_2d = need_2d;
    s->float_layer = tg_module_retain(layer);
    int rc = tg_observer_init(&s->in_obs, o->act_observer, o->act_dtype, false, 0);
    if (rc >= 0) rc = tg_observer_init(&s->out_obs, o->act_observer, o->act_dtype, false, 0);
    if (rc >= 0 && kind != QL_LINEAR) rc = tg_nn_conv_params(layer, &s->p);
    if (rc >= 0 && kind != QL_LINEAR) s->relu = relu || s->p.act == TG_ACT_RELU;
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
    int rc = tg_quantize_conv_weight(&s->wq, w, transpose, groups, s->q.n_weight_scales,
                                     s->wscales);
    if (rc >= 0) rc = tg_qweight_new(&s->w, s->wq, transpose, groups);
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
    s->p.act = s->relu ? TG_ACT_RELU : TG_ACT_NONE;   /* prepare left only NONE / RELU */
    tg_module_release(s->float_layer);
    s->float_layer = NULL;
    return TG_OK;
}

/* ---- the tree ---- */

/* QL_LINEAR.. for a layer the int8 ops can compute, -1 otherwise (a Conv
 * whose fused activation is not ReLU stays float). */
static int layer_kind(const tg_module *m)
{
    tg_conv_params p;
    if (m->vt == &tg__nn_linear_vt) return QL_LINEAR;
    if (m->vt != &tg__nn_conv_vt && m->vt != &tg__nn_conv_transpose_vt) return -1;
    if (tg_nn_conv_params(m, &p) < 0 || (p.act != TG_ACT_NONE && p.act != TG_ACT_RELU)) return -1;
    return m->vt == &tg__nn_conv_vt ? QL_CONV : QL_CONVT;
}

/* Runs a stateless module on a small f32 probe without grad; *y or NULL. */
static tg_tensor *probe(tg_module *m, int nd, const int64_t *shape, const float *v)
{
    tg_tensor *x = NULL, *y = NULL;
    if (tg_tensor_from_data(&x, TG_F32, nd, shape, v) < 0) return NULL;
    tg_no_grad_begin();
    if (tg_module_forward(m, &y, x) < 0) y = NULL;
    tg_no_grad_end();
    tg_tensor_release(x);
    return y;
}

/* True when m is an activation module computing ReLU: one of
 * tg_nn_activation_new, told apart by its values either side of 0 (every
 * other tg_activation differs from max(v, 0) at one of them). */
static bool is_relu(tg_module *m)
{
    static const float v[] = {-3.0f, -1.0f, -0.25f, -1e-6f, 0.0f, 1e-6f, 0.25f, 1.0f, 3.0f};
    const int64_t n = 9;
    if (!tg__nn_is_basic_activation(m)) return false;
    tg_tensor *y = probe(m, 1, &n, v);
    bool ok = y && tg_tensor_numel(y) == n;
    for (int64_t i = 0; ok && i < n; i++) {
        double got = -1;
        tg_tensor_get_flat(y, i, &got);
        ok = got == fmax(v[i], 0.0);
    }
    tg_tensor_release(y);
    return ok;
}

/* True when m is an Unflatten that turns a Linear's (N, out_f) output into
 * (N, c, ...): feature f then lies in channel f / (out_f / c). */
static bool unflattens_to(tg_module *m, int64_t out_f, int64_t c)
{
    if (strcmp(tg_module_type_name(m), "Unflatten") != 0) return false;
    const int64_t shape[2] = {1, out_f};
    float *zeros = tg__calloc((size_t)out_f, sizeof *zeros);
    tg_tensor *y = zeros ? probe(m, 2, shape, zeros) : NULL;
    const bool ok = y && tg_tensor_ndim(y) >= 2 && tg_tensor_dim(y, 0) == 1 &&
                    tg_tensor_dim(y, 1) == c;
    tg_tensor_release(y);
    free(zeros);
    return ok;
}

/* A BatchNorm with running statistics of c channels. */
static bool foldable_bn(const tg_module *m, int64_t c)
{
    const tg_tensor *rm = m->vt == &tg__nn_batchnorm_vt ? tg_module_find(m, "running_mean") : NULL;
    return rm && tg_module_find(m, "running_var") && tg_tensor_numel(rm) == c;
}

/* Which children after layer i of a Sequential fold into it: bn and relu
 * are child indices, -1 when absent.  Layer [Unflatten (Linear only)]
 * [BatchNorm] [ReLU], in that order. */
typedef struct fuse_plan {
    int bn, relu;
} fuse_plan;

static void plan_fusion(const tg_module *seq, int i, const tg_quantize_options *o, fuse_plan *f)
{
    const tg_module *l = seq->children[i].m;
    const int n = seq->n_children;
    const bool lin = l->vt == &tg__nn_linear_vt;
    const tg_tensor *w = tg_module_find(l, "weight");
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    if (!lin) tg_nn_conv_params(l, &p);
    const int64_t c_out = !w || tg_tensor_ndim(w) < 2 ? -1
                          : l->vt == &tg__nn_conv_transpose_vt ? tg_tensor_dim(w, 1) * p.groups
                                                               : tg_tensor_dim(w, 0);
#define CHILD(k) (seq->children[k].m)
    const int unf = lin && i + 1 < n && !strcmp(tg_module_type_name(CHILD(i + 1)), "Unflatten")
                        ? i + 1 : -1;
    int k = unf >= 0 ? unf + 1 : i + 1;
    f->bn = f->relu = -1;
    if (o->fold_batchnorm && k < n && c_out > 0 && p.act == TG_ACT_NONE &&
        CHILD(k)->vt == &tg__nn_batchnorm_vt) {
        const tg_tensor *rm = tg_module_find(CHILD(k), "running_mean");
        const int64_t nc = rm ? tg_tensor_numel(rm) : -1;
        /* Linear: BatchNorm1d on its (N, out_f) output, or the BatchNorm of
         * the channels an Unflatten made; Conv/ConvT: one per out channel */
        const bool match = unf >= 0 ? unflattens_to(CHILD(unf), c_out, nc) : nc == c_out;
        if (match && foldable_bn(CHILD(k), nc)) f->bn = k++;
    }
    if (o->fuse_relu && k < n && is_relu(CHILD(k))) f->relu = k;
#undef CHILD
}

/* The wrapper of layer l (child i of seq, or seq NULL), folding and fusing
 * the children that f lists. */
static int prepare_layer(tg_module **out, tg_module *l, ql_kind kind, const tg_module *seq, int i,
                         const tg_quantize_options *o, fuse_plan *f)
{
    f->bn = f->relu = -1;
    if (seq) plan_fusion(seq, i, o, f);
    tg_module *src = l, *folded = NULL;
    if (f->bn >= 0) {
        TG_TRY(tg_fold_batchnorm(&folded, l, seq->children[f->bn].m));
        src = folded;
    }
    int rc = qlayer_new(out, src, kind, f->relu >= 0, folded != NULL && kind == QL_LINEAR, o);
    tg_module_release(folded);
    return rc;
}

static int prepare(tg_module **out, tg_module *m, const tg_quantize_options *o);

/* child i of m, prepared: a wrapper, an Identity in a slot that plan folded
 * away, or whatever prepare makes of it. */
static int prepare_child(tg_module **out, const tg_module *m, int i, const tg_quantize_options *o,
                         fuse_plan *plan)
{
    tg_module *ch = m->children[i].m;
    /* a folded BatchNorm or a fused ReLU leaves an nn.Identity in its slot, so
     * the other children keep their names */
    if (i == plan->bn || i == plan->relu) return tg_nn_identity_new(out);
    const int kind = layer_kind(ch);
    if (kind < 0) return prepare(out, ch, o);
    const bool seq = !strcmp(tg_module_type_name(m), "Sequential");
    return prepare_layer(out, ch, (ql_kind)kind, seq ? m : NULL, i, o, plan);
}

/* A copy of container m (no private state) with prepared children under the
 * same names; its own parameters and buffers are shared.  Only a
 * Sequential's children run in insertion order, so only there do
 * neighbours fold. */
static int copy_container(tg_module **out, tg_module *m, const tg_quantize_options *o)
{
    tg_module *c = NULL;
    TG_TRY(tg_module_new(&c, m->vt, NULL));
    int rc = TG_OK;
    for (int i = 0; i < m->n_params && rc >= 0; i++)
        rc = tg_module_add_parameter(c, m->params[i].name, tg_tensor_retain(m->params[i].t));
    for (int i = 0; i < m->n_buffers && rc >= 0; i++)
        rc = tg_module_add_buffer(c, m->buffers[i].name, tg_tensor_retain(m->buffers[i].t));
    fuse_plan plan = {-1, -1};
    for (int i = 0; i < m->n_children && rc >= 0; i++) {
        tg_module *child = NULL;
        rc = prepare_child(&child, m, i, o, &plan);
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
    const int kind = layer_kind(m);
    fuse_plan none;
    if (kind >= 0) return prepare_layer(out, m, (ql_kind)kind, NULL, 0, o, &none);
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

static int quantize_model(tg_module **out, tg_module *float_model, int n_batches,
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

int tg_quantized_layer_info(const tg_module *m, tg_qlayer_info *info)
{
    TG_CHECK(m && info, TG_EINVAL, "quantized_layer_info: m and info must not be NULL");
    TG_CHECK(is_qlayer(m), TG_EINVAL, "quantized_layer_info: m is a %s module, not a quantized "
             "layer of tg_quantize_model", tg_module_type_name(m));
    const qlayer *s = m->state;
    TG_CHECK(s->float_layer == NULL, TG_EINVAL,
             "quantized_layer_info: the %s module is still calibrating", tg_module_type_name(m));
    *info = (tg_qlayer_info){
        .transpose = s->kind == QL_CONVT, .linear = s->kind == QL_LINEAR, .weight = s->wq,
        .bias = s->bias, .p = s->p, .q = s->q, .act_dtype = s->act, .relu = s->relu};
    return TG_OK;
}

/* Calibration runs the model on the library's behalf: nothing it makes goes to
 * the caller's scope (tapegrad/scope.h). */
int tg_quantize_model(tg_module **out, tg_module *float_model, int n_batches,
                      tg_tensor *const *batches, const tg_quantize_options *opt)
{
    tg__lib_enter();
    int rc = quantize_model(out, float_model, n_batches, batches, opt);
    tg__lib_leave();
    return rc;
}
