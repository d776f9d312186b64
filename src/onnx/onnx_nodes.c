/* src/onnx_nodes.c - the ONNX nodes of the float modules: Linear, Conv,
 * ConvTranspose, BatchNorm, the activations (ELU, PReLU, Hardtanh, ReLU6,
 * Hardsigmoid, Hardswish, Mish too), Flatten / Unflatten,
 * PixelShuffle / PixelUnshuffle.  Each
 * emitter reads one module (through the public introspection of
 * tapegrad/nn.h) and appends its nodes after the value site->x.
 *
 * Mapping (docs/onnx.md): Linear -> Gemm(transB=1) on 2-d input, else
 * Transpose + MatMul + Add; ConvNd / ConvTransposeNd -> Conv / ConvTranspose
 * with pads = (low..., high...) (a padding_mode other than zeros: the nodes
 * of onnx_pad.c, then pads 0) and the fused activation as its own node;
 * BatchNorm and SyncBatchNorm (eval) -> BatchNormalization with the
 * running statistics; Flatten and
 * Unflatten -> Reshape; PixelShuffle -> DepthToSpace (mode CRD, torch's
 * channel order c*r*r + i*r + j); PixelUnshuffle -> Reshape to (N, C, H, r,
 * W, r), Transpose (0, 1, 3, 5, 2, 4), Reshape (SpaceToDepth orders the
 * channels (i*r + j)*C + c); gelu (erf form, opset 17 has no Gelu) ->
 * x * 0.5 * (1 + Erf(x / sqrt 2)); gelu_tanh -> torch.onnx's form,
 * 0.5 * (x * (1 + Tanh(beta * (x + kappa * x^3)))); silu -> x * Sigmoid(x); Hardtanh and ReLU6
 * -> Clip; Hardsigmoid -> HardSigmoid; Hardswish -> HardSwish; Mish (opset
 * 17 has no Mish) -> x * Tanh(Softplus(x)). */
#include <math.h>
#include <string.h>

#include "core/core.h"
#include "onnx/onnx_graph.h"
#include "tapegrad/dist.h"
#include "ops/prelu_internal.h"

const char *tg__onnx_param_name(const tg__onnx_site *s, const char *name)
{
    return s->path[0] ? tg__onnx_str(s->g, "%s.%s", s->path, name) : tg__onnx_str(s->g, "%s", name);
}

int tg__onnx_unary(tg__onnx *g, const char *scope, const char *op, const char *x,
                   tg__onnx_node **n, const char **y)
{
    return tg__onnx_add(g, n, y, scope, op, 1, (const char *const[]){x});
}

const char *tg__onnx_const(tg__onnx *g, const char *scope, const char *what, float v)
{
    const char *name = tg__onnx_str(g, "%s/%s", scope, what);
    if (!name || tg__onnx_init_raw(g, name, TG__ONNX_FLOAT, 0, NULL, &v, sizeof v) < 0)
        return NULL;
    return name;
}

/* gelu(x, approximate='tanh') as torch.onnx exports it (opset 17 has no
 * Gelu): 0.5 * (x * (1 + Tanh(beta * (x + kappa * (x * (x * x)))))),
 * beta = sqrt(2 / pi), kappa = 0.044715, the constants f32 initializers. */
static int gelu_tanh(tg__onnx *g, const char *scope, const char *x, const char **y)
{
    const char *beta = tg__onnx_const(g, scope, "beta", (float)(M_SQRT2 * M_2_SQRTPI * 0.5));
    const char *kappa = tg__onnx_const(g, scope, "kappa", 0.044715f);
    const char *one = tg__onnx_const(g, scope, "one", 1.0f);
    const char *half = tg__onnx_const(g, scope, "half", 0.5f);
    const char *t = NULL;
    if (!beta || !kappa || !one || !half) return TG_ENOMEM;
    TG_TRY(tg__onnx_add(g, NULL, &t, scope, "Mul", 2, (const char *const[]){x, x}));
    TG_TRY(tg__onnx_add(g, NULL, &t, scope, "Mul", 2, (const char *const[]){x, t}));
    TG_TRY(tg__onnx_add(g, NULL, &t, scope, "Mul", 2, (const char *const[]){kappa, t}));
    TG_TRY(tg__onnx_add(g, NULL, &t, scope, "Add", 2, (const char *const[]){x, t}));
    TG_TRY(tg__onnx_add(g, NULL, &t, scope, "Mul", 2, (const char *const[]){beta, t}));
    TG_TRY(tg__onnx_unary(g, scope, "Tanh", t, NULL, &t));
    TG_TRY(tg__onnx_add(g, NULL, &t, scope, "Add", 2, (const char *const[]){one, t}));
    TG_TRY(tg__onnx_add(g, NULL, &t, scope, "Mul", 2, (const char *const[]){x, t}));
    return tg__onnx_add(g, NULL, y, scope, "Mul", 2, (const char *const[]){half, t});
}

int tg__onnx_activation(tg__onnx *g, const char *scope, const char *x, tg_activation act,
                        double slope, const char **y)
{
    static const char *const simple[TG_ACT_COUNT] = {
        [TG_ACT_RELU] = "Relu", [TG_ACT_TANH] = "Tanh", [TG_ACT_SIGMOID] = "Sigmoid"};
    tg__onnx_node *n = NULL;
    if (act == TG_ACT_NONE) {
        *y = x;
        return TG_OK;
    }
    if (simple[act]) return tg__onnx_unary(g, scope, simple[act], x, NULL, y);
    if (act == TG_ACT_LEAKY_RELU) {
        TG_TRY(tg__onnx_unary(g, scope, "LeakyRelu", x, &n, y));
        return tg__onnx_attr_float(g, n, "alpha", (float)slope);
    }
    const char *t = NULL;
    if (act == TG_ACT_SILU) {   /* x * sigmoid(x) */
        TG_TRY(tg__onnx_unary(g, scope, "Sigmoid", x, NULL, &t));
        return tg__onnx_add(g, NULL, y, scope, "Mul", 2, (const char *const[]){x, t});
    }
    if (act == TG_ACT_GELU_TANH) return gelu_tanh(g, scope, x, y);
    TG_ASSERT(act == TG_ACT_GELU);
    /* gelu(x) = x * 0.5 * (1 + erf(x / sqrt 2)), tapegrad's (exact) form */
    const char *r2 = tg__onnx_const(g, scope, "sqrt2", (float)sqrt(2.0));
    const char *one = tg__onnx_const(g, scope, "one", 1.0f);
    const char *half = tg__onnx_const(g, scope, "half", 0.5f);
    if (!r2 || !one || !half) return TG_ENOMEM;
    TG_TRY(tg__onnx_add(g, NULL, &t, scope, "Div", 2, (const char *const[]){x, r2}));
    TG_TRY(tg__onnx_unary(g, scope, "Erf", t, NULL, &t));
    TG_TRY(tg__onnx_add(g, NULL, &t, scope, "Add", 2, (const char *const[]){t, one}));
    TG_TRY(tg__onnx_add(g, NULL, &t, scope, "Mul", 2, (const char *const[]){x, t}));
    return tg__onnx_add(g, NULL, y, scope, "Mul", 2, (const char *const[]){t, half});
}

int tg__onnx_linear(tg__onnx *g, const char *scope, const char *x, int x_ndim,
                    const char *wname, const char *bname, const char **y)
{
    tg__onnx_node *n = NULL;
    const bool bias = bname[0] != '\0';
    if (x_ndim == 2) {
        TG_TRY(tg__onnx_add(g, &n, y, scope, "Gemm", bias ? 3 : 2,
                             (const char *const[]){x, wname, bname}));
        return tg__onnx_attr_int(g, n, "transB", 1);
    }
    const char *wt = NULL, *t = NULL;
    TG_TRY(tg__onnx_unary(g, scope, "Transpose", wname, NULL, &wt));
    TG_TRY(tg__onnx_add(g, NULL, bias ? &t : y, scope, "MatMul", 2, (const char *const[]){x, wt}));
    if (!bias) return TG_OK;
    return tg__onnx_add(g, NULL, y, scope, "Add", 2, (const char *const[]){t, bname});
}

int tg__onnx_conv_attrs(tg__onnx *g, tg__onnx_node *n, const tg_conv_params *p,
                        const tg_tensor *w, bool transpose)
{
    const int ns = tg_tensor_ndim(w) - 2;
    /* ONNX's Conv pads with zeros: the other modes are nodes before it
     * (tg__onnx_conv_pad), which leave p with zero padding */
    TG_ASSERT(p->padding_mode == TG_PAD_CONSTANT);
    int64_t pads[2 * TG_CONV_MAX_SPATIAL];
    for (int i = 0; i < ns; i++) {   /* ONNX: all beginnings, then all ends */
        pads[i] = p->padding[i][0];
        pads[ns + i] = p->padding[i][1];
    }
    TG_TRY(tg__onnx_attr_ints(g, n, "kernel_shape", ns, tg_tensor_shape(w) + 2));
    TG_TRY(tg__onnx_attr_ints(g, n, "strides", ns, p->stride));
    TG_TRY(tg__onnx_attr_ints(g, n, "dilations", ns, p->dilation));
    TG_TRY(tg__onnx_attr_ints(g, n, "pads", 2 * ns, pads));
    if (transpose) TG_TRY(tg__onnx_attr_ints(g, n, "output_padding", ns, p->output_padding));
    return tg__onnx_attr_int(g, n, "group", p->groups);
}

int tg__onnx_param(const tg__onnx_site *s, const char *name, const char **out)
{
    tg_tensor *t = tg_module_find(s->m, name);
    if (!t) {
        *out = "";
        return TG_OK;
    }
    const char *full = tg__onnx_param_name(s, name);
    if (!full) return TG_ENOMEM;
    TG_TRY(tg__onnx_init_tensor(s->g, full, t));
    *out = full;
    return TG_OK;
}

int tg__onnx_emit_linear(const tg__onnx_site *s, const char **y)
{
    const char *w = NULL, *b = NULL;
    TG_TRY(tg__onnx_param(s, "weight", &w));
    TG_TRY(tg__onnx_param(s, "bias", &b));
    TG_ASSERT(w[0] != '\0');
    return tg__onnx_linear(s->g, s->scope, s->x, tg_tensor_ndim(s->xt), w, b, y);
}

/* An Embedding with max_norm: its forward rescales its weight, which no
 * graph of initializers can do (and the export must not). */
int tg__onnx_refuse_embedding(const tg_module *m, const char *path)
{
    tg_embedding_opts o;
    TG_TRY(tg_nn_embedding_options(m, &o));
    TG_CHECK(o.max_norm == 0, TG_EUNSUPPORTED,
             "onnx_export: module '%s' (Embedding) with max_norm=%g is not supported: its "
             "forward rescales its weight", path[0] ? path : "<top>", o.max_norm);
    return TG_OK;
}

/* Embedding: Gather(weight, indices) along axis 0, as torch.onnx writes it
 * (padding_idx changes only gradients). */
int tg__onnx_emit_embedding(const tg__onnx_site *s, const char **y)
{
    const char *w = NULL;
    TG_TRY(tg__onnx_param(s, "weight", &w));
    tg__onnx_node *n = NULL;
    TG_TRY(tg__onnx_add(s->g, &n, y, s->scope, "Gather", 2, (const char *const[]){w, s->x}));
    return tg__onnx_attr_int(s->g, n, "axis", 0);
}

int tg__onnx_emit_conv(const tg__onnx_site *s, const char **y)
{
    tg_conv_params p;
    TG_TRY(tg_nn_conv_params(s->m, &p));
    const bool transpose = !strcmp(tg_module_type_name(s->m), "ConvTranspose");
    const tg_tensor *wt = tg_module_find(s->m, "weight");
    const char *x = NULL, *w = NULL, *b = NULL, *t = NULL;
    TG_TRY(tg__onnx_conv_pad(s, &p, tg_tensor_ndim(wt) - 2, &x));
    TG_TRY(tg__onnx_param(s, "weight", &w));
    TG_TRY(tg__onnx_param(s, "bias", &b));
    tg__onnx_node *n = NULL;
    TG_TRY(tg__onnx_add(s->g, &n, &t, s->scope, transpose ? "ConvTranspose" : "Conv",
                         b[0] ? 3 : 2, (const char *const[]){x, w, b}));
    TG_TRY(tg__onnx_conv_attrs(s->g, n, &p, wt, transpose));
    return tg__onnx_activation(s->g, s->scope, t, p.act, p.act_slope, y);
}

/* c values v as a 1-d f32 initializer `<path>.<what>`. */
static const char *tg__onnx_fill(const tg__onnx_site *s, const char *what, int64_t c, float v)
{
    const char *name = tg__onnx_param_name(s, what);
    float *buf = tg__malloc((size_t)c * sizeof *buf);
    int rc = name && buf ? TG_OK : TG_ENOMEM;
    for (int64_t i = 0; rc == TG_OK && i < c; i++) buf[i] = v;
    if (rc == TG_OK) rc = tg__onnx_init_raw(s->g, name, TG__ONNX_FLOAT, 1, &c, buf, sizeof *buf);
    free(buf);
    return rc == TG_OK ? name : NULL;
}

/* BatchNormalization of s->x by the module's running statistics and,
 * with affine, its weight and bias. */
static int tg__onnx_bn_node(const tg__onnx_site *s, double eps, bool affine, const char **y)
{
    const int64_t c = tg_tensor_dim(s->xt, 1);
    const char *w = NULL, *b = NULL, *mean = NULL, *var = NULL;
    if (affine) {
        TG_TRY(tg__onnx_param(s, "weight", &w));
        TG_TRY(tg__onnx_param(s, "bias", &b));
    } else {   /* gamma 1, beta 0 */
        w = tg__onnx_fill(s, "unit_weight", c, 1.0f);
        b = tg__onnx_fill(s, "zero_bias", c, 0.0f);
        if (!w || !b) return TG_ENOMEM;
    }
    TG_TRY(tg__onnx_param(s, "running_mean", &mean));
    TG_TRY(tg__onnx_param(s, "running_var", &var));
    tg__onnx_node *n = NULL;
    TG_TRY(tg__onnx_add(s->g, &n, y, s->scope, "BatchNormalization", 5,
                         (const char *const[]){s->x, w, b, mean, var}));
    return tg__onnx_attr_float(s->g, n, "epsilon", (float)eps);
}

int tg__onnx_emit_batchnorm(const tg__onnx_site *s, const char **y)
{
    double eps;
    bool affine, track;
    TG_TRY(tg_nn_batchnorm_params(s->m, NULL, &eps, NULL, &affine, &track));
    TG_CHECK(track, TG_EUNSUPPORTED,
             "onnx_export: module '%s' (BatchNorm) has no running statistics "
             "(track_running_stats=false): its inference form is not defined",
             s->path[0] ? s->path : "<top>");
    return tg__onnx_bn_node(s, eps, affine, y);
}

/* A SyncBatchNorm is affine with running statistics; in eval it is a
 * BatchNorm with them. */
int tg__onnx_emit_sync_batchnorm(const tg__onnx_site *s, const char **y)
{
    double eps;
    TG_TRY(tg_dist_sync_batchnorm_params(s->m, &eps, NULL));
    return tg__onnx_bn_node(s, eps, true, y);
}

int tg__onnx_emit_activation(const tg__onnx_site *s, const char **y)
{
    tg_activation act;
    double slope;
    TG_TRY(tg_nn_activation_params(s->m, &act, &slope));
    if (act == TG_ACT_NONE) return tg__onnx_unary(s->g, s->scope, "Identity", s->x, NULL, y);
    return tg__onnx_activation(s->g, s->scope, s->x, act, slope, y);
}

/* ELU: Elu with its alpha. */
int tg__onnx_emit_elu(const tg__onnx_site *s, const char **y)
{
    double alpha;
    TG_TRY(tg_nn_elu_alpha(s->m, &alpha));
    tg__onnx_node *n = NULL;
    TG_TRY(tg__onnx_add(s->g, &n, y, s->scope, "Elu", 1, (const char *const[]){s->x}));
    return tg__onnx_attr_float(s->g, n, "alpha", (float)alpha);
}

/* Hardtanh and ReLU6: Clip(x, min, max), the bounds as f32 initializers
 * (opset 11 on: inputs, not attributes). */
int tg__onnx_emit_hardtanh(const tg__onnx_site *s, const char **y)
{
    double lo, hi;
    TG_TRY(tg_nn_hardtanh_bounds(s->m, &lo, &hi));
    const char *cmin = tg__onnx_const(s->g, s->scope, "min", (float)lo);
    const char *cmax = tg__onnx_const(s->g, s->scope, "max", (float)hi);
    if (!cmin || !cmax) return TG_ENOMEM;
    return tg__onnx_add(s->g, NULL, y, s->scope, "Clip", 3, (const char *const[]){s->x, cmin,
                                                                                  cmax});
}

/* Hardsigmoid: HardSigmoid(alpha = 1/6, beta = 1/2), max(0, min(1, x/6 + 1/2)),
 * which is relu6(x + 3) / 6.  Hardswish: HardSwish (opset 14). */
int tg__onnx_emit_hardsigmoid(const tg__onnx_site *s, const char **y)
{
    tg__onnx_node *n = NULL;
    TG_TRY(tg__onnx_unary(s->g, s->scope, "HardSigmoid", s->x, &n, y));
    TG_TRY(tg__onnx_attr_float(s->g, n, "alpha", 1.0f / 6.0f));
    return tg__onnx_attr_float(s->g, n, "beta", 0.5f);
}

int tg__onnx_emit_hardswish(const tg__onnx_site *s, const char **y)
{
    return tg__onnx_unary(s->g, s->scope, "HardSwish", s->x, NULL, y);
}

/* Mish: opset 17 has no Mish (it came in opset 18): x * Tanh(Softplus(x)),
 * as torch.onnx.export writes it. */
int tg__onnx_emit_mish(const tg__onnx_site *s, const char **y)
{
    const char *t = NULL;
    TG_TRY(tg__onnx_unary(s->g, s->scope, "Softplus", s->x, NULL, &t));
    TG_TRY(tg__onnx_unary(s->g, s->scope, "Tanh", t, NULL, &t));
    return tg__onnx_add(s->g, NULL, y, s->scope, "Mul", 2, (const char *const[]){s->x, t});
}

/* PReLU: PRelu with the weight as its slope, an initializer under the
 * weight's name shaped as tg_prelu reads it: (C, 1, ...) to broadcast over
 * x's spatial dims, or (1) for one weight (() for a 0-d x). */
int tg__onnx_emit_prelu(const tg__onnx_site *s, const char **y)
{
    tg_tensor *w = tg_module_find(s->m, "weight"), *slope = NULL;
    TG_ASSERT(w != NULL);
    int nd = 0;
    int64_t shape[TG_MAX_DIMS];
    TG_TRY(tg__prelu_weight_shape(s->xt, w, &nd, shape));
    const char *name = tg__onnx_param_name(s, "weight");
    if (!name) return TG_ENOMEM;
    TG_TRY(tg_reshape(&slope, w, nd, shape));   /* (the export runs with grad mode off) */
    int rc = tg__onnx_init_tensor(s->g, name, slope);
    tg_tensor_release(slope);
    TG_TRY(rc);
    return tg__onnx_add(s->g, NULL, y, s->scope, "PRelu", 2, (const char *const[]){s->x, name});
}

/* Flatten and Unflatten: Reshape to the output's shape, where the dims
 * before the first one the module changes are 0 ("copy the input's", so the
 * batch stays free) and a flattened dim is -1. */
int tg__onnx_emit_reshape(const tg__onnx_site *s, const char **y)
{
    const bool flatten = !strcmp(tg_module_type_name(s->m), "Flatten");
    const int xnd = tg_tensor_ndim(s->xt), ynd = tg_tensor_ndim(s->yt);
    int first, ndim = 0;
    if (flatten) TG_TRY(tg_nn_flatten_params(s->m, &first, NULL));
    else TG_TRY(tg_nn_unflatten_params(s->m, &first, &ndim, NULL));
    const int span = xnd ? xnd : 1;
    if (first < 0) first += span;
    TG_ASSERT(first >= 0 && first < span);
    int64_t shape[TG_MAX_DIMS];
    for (int d = 0; d < ynd; d++)
        shape[d] = d < first ? 0 : d == first && flatten ? -1 : tg_tensor_dim(s->yt, d);
    const char *name = tg__onnx_str(s->g, "%s/shape", s->scope);
    if (!name) return TG_ENOMEM;
    const int64_t n = ynd;
    TG_TRY(tg__onnx_init_raw(s->g, name, TG__ONNX_INT64, 1, &n, shape, sizeof *shape));
    return tg__onnx_add(s->g, NULL, y, s->scope, "Reshape", 2, (const char *const[]){s->x, name});
}

/* PixelShuffle and PixelUnshuffle of an (N, C, H, W) input. */
int tg__onnx_emit_pixel_shuffle(const tg__onnx_site *s, const char **y)
{
    int64_t r;
    bool un;
    TG_TRY(tg_nn_pixel_shuffle_params(s->m, &r, &un));
    TG_CHECK(tg_tensor_ndim(s->xt) == 4, TG_EUNSUPPORTED,
             "onnx_export: module '%s' (%s) runs on a %d-d input: the export takes (N, C, H, W)",
             s->path[0] ? s->path : "<top>", tg_module_type_name(s->m), tg_tensor_ndim(s->xt));
    tg__onnx_node *n = NULL;
    if (!un) {
        TG_TRY(tg__onnx_add(s->g, &n, y, s->scope, "DepthToSpace", 1,
                            (const char *const[]){s->x}));
        TG_TRY(tg__onnx_attr_int(s->g, n, "blocksize", r));
        return tg__onnx_attr_str(s->g, n, "mode", "CRD");
    }
    const int64_t c = tg_tensor_dim(s->xt, 1), h = tg_tensor_dim(s->yt, 2),
                  w = tg_tensor_dim(s->yt, 3);
    /* 0: the input's batch, so that it stays free */
    const int64_t six[6] = {0, c, h, r, w, r}, four[4] = {0, c * r * r, h, w}, n6 = 6, n4 = 4;
    const char *s6 = tg__onnx_str(s->g, "%s/split_shape", s->scope);
    const char *s4 = tg__onnx_str(s->g, "%s/shape", s->scope);
    if (!s6 || !s4) return TG_ENOMEM;
    TG_TRY(tg__onnx_init_raw(s->g, s6, TG__ONNX_INT64, 1, &n6, six, sizeof *six));
    TG_TRY(tg__onnx_init_raw(s->g, s4, TG__ONNX_INT64, 1, &n4, four, sizeof *four));
    const char *a = NULL, *b = NULL;
    TG_TRY(tg__onnx_add(s->g, NULL, &a, s->scope, "Reshape", 2, (const char *const[]){s->x, s6}));
    TG_TRY(tg__onnx_add(s->g, &n, &b, s->scope, "Transpose", 1, (const char *const[]){a}));
    TG_TRY(tg__onnx_attr_ints(s->g, n, "perm", 6, (const int64_t[]){0, 1, 3, 5, 2, 4}));
    return tg__onnx_add(s->g, NULL, y, s->scope, "Reshape", 2, (const char *const[]){b, s4});
}
