/* src/onnx/onnx_norm.c - the ONNX nodes of LayerNorm, GroupNorm and
 * InstanceNormNd (opset 17), as torch.onnx.export of PyTorch 1.13 writes
 * them:
 *   LayerNorm -> LayerNormalization(x, Scale, B) with axis = -n (the n
 *                normalised dims) and epsilon; Scale is the module's weight
 *                and B its bias, or without elementwise_affine Scale ones
 *                ("<path>.unit_weight", normalized_shape) and no B
 *   GroupNorm -> opset 17 has no GroupNormalization:
 *                Reshape(x, (0, G, -1))
 *                -> InstanceNormalization(scale 1, bias 0 for each of the G
 *                   rows, epsilon)
 *                -> Reshape to x's shape (0: the batch as it comes)
 *                -> with affine, Mul by the weight and Add the bias, each
 *                   Unsqueezed to (C, 1, ...) to broadcast over the spatial
 *                   dims
 *   InstanceNormNd -> InstanceNormalization(x, scale, B, epsilon): the
 *                module's weight and bias, or without affine ones and
 *                zeros ("<scope>/instance_scale", "<scope>/instance_bias");
 *                with track_running_stats, whose eval form normalises by
 *                the running statistics, BatchNormalization(x, scale, B,
 *                running_mean, running_var, epsilon) with the same scale
 *                and B (torch 1.13 writes that BatchNormalization on x
 *                reshaped to (1, N*C, S...) with the statistics tiled N
 *                times: the same numbers); (N, C, S...) inputs only
 * InstanceNormalization of (N, G, L) normalises each row of L values with
 * its mean and biased variance: group norm's statistics.  The reshapes keep
 * the batch free, so a dynamic batch exports too. */
#include <string.h>

#include "core/core.h"
#include "onnx/onnx_graph.h"

/* numel(shape) copies of v as an f32 initializer "<scope>/<what>" or, when
 * param, "<path>.<what>". */
static const char *tg__onnx_filled(const tg__onnx_site *s, bool param, const char *what,
                                   int ndim, const int64_t *shape, float v)
{
    const char *name = param ? tg__onnx_param_name(s, what)
                             : tg__onnx_str(s->g, "%s/%s", s->scope, what);
    const int64_t n = tg__numel(ndim, shape);
    float *buf = tg__malloc((size_t)(n > 0 ? n : 1) * sizeof *buf);
    int rc = name && buf ? TG_OK : TG_ENOMEM;
    for (int64_t i = 0; rc == TG_OK && i < n; i++) buf[i] = v;
    if (rc == TG_OK) rc = tg__onnx_init_raw(s->g, name, TG__ONNX_FLOAT, ndim, shape, buf, sizeof *buf);
    free(buf);
    return rc == TG_OK ? name : NULL;
}

/* An int64 initializer "<scope>/<what>" of n values. */
static const char *tg__onnx_ints(const tg__onnx_site *s, const char *what, int64_t n,
                                 const int64_t *v)
{
    const char *name = tg__onnx_str(s->g, "%s/%s", s->scope, what);
    if (!name || tg__onnx_init_raw(s->g, name, TG__ONNX_INT64, 1, &n, v, sizeof *v) < 0)
        return NULL;
    return name;
}

int tg__onnx_emit_layer_norm(const tg__onnx_site *s, const char **y)
{
    int n;
    int64_t shape[TG_MAX_DIMS];
    double eps;
    bool affine;
    TG_TRY(tg_nn_layer_norm_params(s->m, &n, shape, &eps, &affine));
    const char *w = NULL, *b = "";
    if (affine) {
        TG_TRY(tg__onnx_param(s, "weight", &w));
        TG_TRY(tg__onnx_param(s, "bias", &b));
    } else if (!(w = tg__onnx_filled(s, true, "unit_weight", n, shape, 1.0f))) {
        return TG_ENOMEM;
    }
    tg__onnx_node *node = NULL;
    TG_TRY(tg__onnx_add(s->g, &node, y, s->scope, "LayerNormalization", b[0] ? 3 : 2,
                        (const char *const[]){s->x, w, b}));
    TG_TRY(tg__onnx_attr_int(s->g, node, "axis", -n));
    return tg__onnx_attr_float(s->g, node, "epsilon", (float)eps);
}

/* t * Unsqueeze(<path>.weight) or t + Unsqueeze(<path>.bias) (op "Mul" or
 * "Add"), the parameter (C,) as (C, 1, ...) for an x of nd dims. */
static int tg__onnx_gn_affine(const tg__onnx_site *s, const char *param, const char *op,
                              const char *axes, const char *t, const char **y)
{
    const char *p = NULL;
    TG_TRY(tg__onnx_param(s, param, &p));
    if (axes)
        TG_TRY(tg__onnx_add(s->g, NULL, &p, s->scope, "Unsqueeze", 2,
                            (const char *const[]){p, axes}));
    return tg__onnx_add(s->g, NULL, y, s->scope, op, 2, (const char *const[]){t, p});
}

int tg__onnx_emit_group_norm(const tg__onnx_site *s, const char **y)
{
    int64_t groups;
    double eps;
    bool affine;
    TG_TRY(tg_nn_group_norm_params(s->m, &groups, NULL, &eps, &affine));
    const int nd = tg_tensor_ndim(s->xt);
    int64_t rows[3] = {0, groups, -1}, back[TG_MAX_DIMS], axes[TG_MAX_DIMS];
    for (int d = 0; d < nd; d++) back[d] = d == 0 ? 0 : tg_tensor_dim(s->xt, d);
    for (int d = 2; d < nd; d++) axes[d - 2] = d - 1;   /* (C,) -> (C, 1, ...) */
    const char *rshape = tg__onnx_ints(s, "group_shape", 3, rows);
    const char *bshape = tg__onnx_ints(s, "shape", nd, back);
    const bool unsq = affine && nd > 2;
    const char *ax = unsq ? tg__onnx_ints(s, "affine_axes", nd - 2, axes) : NULL;
    const char *one = tg__onnx_filled(s, false, "group_scale", 1, &groups, 1.0f);
    const char *zero = tg__onnx_filled(s, false, "group_bias", 1, &groups, 0.0f);
    if (!rshape || !bshape || (unsq && !ax) || !one || !zero) return TG_ENOMEM;
    const char *r = NULL, *in = NULL, *t = NULL, *m = NULL;
    tg__onnx_node *node = NULL;
    TG_TRY(tg__onnx_add(s->g, NULL, &r, s->scope, "Reshape", 2, (const char *const[]){s->x, rshape}));
    TG_TRY(tg__onnx_add(s->g, &node, &in, s->scope, "InstanceNormalization", 3,
                        (const char *const[]){r, one, zero}));
    TG_TRY(tg__onnx_attr_float(s->g, node, "epsilon", (float)eps));
    TG_TRY(tg__onnx_add(s->g, NULL, affine ? &t : y, s->scope, "Reshape", 2,
                        (const char *const[]){in, bshape}));
    if (!affine) return TG_OK;
    TG_TRY(tg__onnx_gn_affine(s, "weight", "Mul", ax, t, &m));
    return tg__onnx_gn_affine(s, "bias", "Add", ax, m, y);
}

int tg__onnx_emit_instance_norm(const tg__onnx_site *s, const char **y)
{
    int ns;
    int64_t c;
    double eps;
    bool affine, track;
    TG_TRY(tg_nn_instance_norm_params(s->m, &ns, &c, &eps, NULL, &affine, &track));
    TG_TRY(tg__onnx_need_batched(s, ns, track ? "BatchNormalization" : "InstanceNormalization"));
    const char *w = NULL, *b = NULL;
    if (affine) {
        TG_TRY(tg__onnx_param(s, "weight", &w));
        TG_TRY(tg__onnx_param(s, "bias", &b));
    } else {
        w = tg__onnx_filled(s, false, "instance_scale", 1, &c, 1.0f);
        b = tg__onnx_filled(s, false, "instance_bias", 1, &c, 0.0f);
        if (!w || !b) return TG_ENOMEM;
    }
    const char *mean = NULL, *var = NULL;
    if (track) {
        TG_TRY(tg__onnx_param(s, "running_mean", &mean));
        TG_TRY(tg__onnx_param(s, "running_var", &var));
    }
    tg__onnx_node *node = NULL;
    TG_TRY(tg__onnx_add(s->g, &node, y, s->scope,
                        track ? "BatchNormalization" : "InstanceNormalization", track ? 5 : 3,
                        (const char *const[]){s->x, w, b, mean, var}));
    return tg__onnx_attr_float(s->g, node, "epsilon", (float)eps);
}
