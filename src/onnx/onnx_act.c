/* src/onnx/onnx_act.c - the ONNX nodes of Softplus, LogSigmoid, Softmax,
 * LogSoftmax, SELU, CELU, Hardshrink, Softshrink, Threshold, GLU, Softsign,
 * Tanhshrink and Softmin (act_modules.c in src/nn), read through their
 * public introspection (tapegrad/nn.h).
 *
 * Mapping (docs/onnx.md):
 *   Softplus(1, threshold >= 15)  -> Softplus
 *   Softplus(beta, threshold)     -> Where(Greater(b, threshold), x, Softplus(b) / beta),
 *                                    b = x * beta (no Mul and Div when beta = 1)
 *   LogSigmoid                    -> Neg(Softplus(Neg(x)))
 *   Softmax(dim), LogSoftmax(dim) -> Softmax, LogSoftmax with axis = dim
 *   SELU                          -> Selu with torch's alpha and scale (gamma)
 *   CELU(alpha)                   -> Celu(alpha)
 *   Hardshrink(lambd)             -> Shrink(bias = 0, lambd)
 *   Softshrink(lambd)             -> Shrink(bias = lambd, lambd)
 *   Threshold(threshold, value)   -> Where(LessOrEqual(x, threshold), value, x)
 *   GLU(dim)                      -> Split(x, axis = dim) into a, b; Mul(a, Sigmoid(b))
 *   Softsign                      -> Softsign
 *   Tanhshrink                    -> Sub(x, Tanh(x))
 *   Softmin(dim)                  -> Softmax(Neg(x), axis = dim)
 *
 * Threshold compares as torch's kernel does (x <= threshold gives value), so
 * a NaN x stays NaN; Where(Greater(x, threshold), x, value) would give
 * value there.  Its numbers, like the shrinks' lambd, are written in f32,
 * the dtype torch converts them to for an f32 x.
 *
 * ONNX's Softplus is log(1 + e^x), without beta or threshold.  Where
 * beta x > threshold, torch's softplus is x itself, which differs from
 * log(1 + e^x) by log1p(e^-x) < log1p(e^-threshold); with threshold >= 15
 * that is below 2^-25 |x| (log1p(e^-15) / 15 = 2.0e-8), under half an f32
 * ulp of x, so the one node gives the same f32 values; torch's default
 * threshold 20 is such a case.  A smaller threshold, or another beta, takes
 * torch's formula as its kernel computes it, x * beta and both constants in
 * f32 (torch.onnx writes Softplus(x * beta) / beta and drops the threshold).
 *
 * log(sigmoid(x)), torch.onnx's form, loses both tails in f32: ONNX
 * Runtime's Sigmoid is already off at x = -16 (Log gives -16.64) and 0 from
 * -18 on (-inf), and it rounds to 1 above x = 17 (0, where -log1p(e^-x) is
 * -4e-8).  -softplus(-x) keeps both, as tg_logsigmoid does. */
#include <string.h>

#include "core/core.h"
#include "onnx/onnx_graph.h"

/* Below this threshold a Softplus with beta 1 needs the Where (see the top). */
#define TG__ONNX_SOFTPLUS_PLAIN_THRESHOLD 15.0

int tg__onnx_emit_softplus(const tg__onnx_site *s, const char **y)
{
    double beta, threshold;
    TG_TRY(tg_nn_softplus_params(s->m, &beta, &threshold));
    if (beta == 1.0 && threshold >= TG__ONNX_SOFTPLUS_PLAIN_THRESHOLD)
        return tg__onnx_unary(s->g, s->scope, "Softplus", s->x, NULL, y);
    /* b = x * beta, sp = softplus(b) / beta, y = b > threshold ? x : sp */
    const bool scaled = beta != 1.0;
    const char *b = s->x, *sp = NULL, *cmp = NULL, *cb = NULL;
    if (scaled) cb = tg__onnx_const(s->g, s->scope, "beta", (float)beta);
    const char *ct = tg__onnx_const(s->g, s->scope, "threshold", (float)threshold);
    if (!ct || (scaled && !cb)) return TG_ENOMEM;
    if (scaled)
        TG_TRY(tg__onnx_add(s->g, NULL, &b, s->scope, "Mul", 2, (const char *const[]){s->x, cb}));
    TG_TRY(tg__onnx_unary(s->g, s->scope, "Softplus", b, NULL, &sp));
    if (scaled)
        TG_TRY(tg__onnx_add(s->g, NULL, &sp, s->scope, "Div", 2, (const char *const[]){sp, cb}));
    TG_TRY(tg__onnx_add(s->g, NULL, &cmp, s->scope, "Greater", 2, (const char *const[]){b, ct}));
    return tg__onnx_add(s->g, NULL, y, s->scope, "Where", 3, (const char *const[]){cmp, s->x, sp});
}

int tg__onnx_emit_logsigmoid(const tg__onnx_site *s, const char **y)
{
    const char *t = NULL;
    TG_TRY(tg__onnx_unary(s->g, s->scope, "Neg", s->x, NULL, &t));
    TG_TRY(tg__onnx_unary(s->g, s->scope, "Softplus", t, NULL, &t));
    return tg__onnx_unary(s->g, s->scope, "Neg", t, NULL, y);
}

/* Softmax, LogSoftmax and Softmax2d (a Softmax of axis -3): opset 13 on
 * normalise along the one axis, as torch's dim (opset 11's axis flattened
 * the dims from it on). */
int tg__onnx_emit_softmax(const tg__onnx_site *s, const char **y)
{
    int dim;
    TG_TRY(tg_nn_act_dim(s->m, &dim));
    const char *type = tg_module_type_name(s->m);
    TG_CHECK(tg_tensor_ndim(s->xt) >= 1, TG_EUNSUPPORTED,
             "onnx_export: module '%s' (%s) runs on a 0-d input, which ONNX's %s has no axis "
             "of", s->path[0] ? s->path : "<top>", type, type);
    tg__onnx_node *n = NULL;
    const char *op = strcmp(type, "LogSoftmax") == 0 ? "LogSoftmax" : "Softmax";
    TG_TRY(tg__onnx_unary(s->g, s->scope, op, s->x, &n, y));
    return tg__onnx_attr_int(s->g, n, "axis", dim);
}

/* torch's SELU constants (as in src/ops/selu.c) */
#define TG__ONNX_SELU_ALPHA 1.6732632423543772848170429916717
#define TG__ONNX_SELU_SCALE 1.0507009873554804934193349852946

int tg__onnx_emit_selu(const tg__onnx_site *s, const char **y)
{
    tg__onnx_node *n = NULL;
    TG_TRY(tg__onnx_unary(s->g, s->scope, "Selu", s->x, &n, y));
    TG_TRY(tg__onnx_attr_float(s->g, n, "alpha", (float)TG__ONNX_SELU_ALPHA));
    return tg__onnx_attr_float(s->g, n, "gamma", (float)TG__ONNX_SELU_SCALE);
}

int tg__onnx_emit_celu(const tg__onnx_site *s, const char **y)
{
    double alpha;
    TG_TRY(tg_nn_act_number(s->m, &alpha));
    tg__onnx_node *n = NULL;
    TG_TRY(tg__onnx_unary(s->g, s->scope, "Celu", s->x, &n, y));
    return tg__onnx_attr_float(s->g, n, "alpha", (float)alpha);
}

/* Shrink gives x + bias below -lambd, x - bias above lambd, 0 between:
 * Hardshrink with bias 0, Softshrink with bias lambd. */
int tg__onnx_emit_shrink(const tg__onnx_site *s, const char **y)
{
    double lambd;
    TG_TRY(tg_nn_act_number(s->m, &lambd));
    const bool soft = strcmp(tg_module_type_name(s->m), "Softshrink") == 0;
    tg__onnx_node *n = NULL;
    TG_TRY(tg__onnx_unary(s->g, s->scope, "Shrink", s->x, &n, y));
    TG_TRY(tg__onnx_attr_float(s->g, n, "bias", soft ? (float)lambd : 0.0f));
    return tg__onnx_attr_float(s->g, n, "lambd", (float)lambd);
}

int tg__onnx_emit_threshold(const tg__onnx_site *s, const char **y)
{
    double threshold, value;
    TG_TRY(tg_nn_threshold_params(s->m, &threshold, &value));
    const char *ct = tg__onnx_const(s->g, s->scope, "threshold", (float)threshold);
    const char *cv = tg__onnx_const(s->g, s->scope, "value", (float)value);
    if (!ct || !cv) return TG_ENOMEM;
    const char *le = NULL;
    TG_TRY(tg__onnx_add(s->g, NULL, &le, s->scope, "LessOrEqual", 2,
                        (const char *const[]){s->x, ct}));
    return tg__onnx_add(s->g, NULL, y, s->scope, "Where", 3, (const char *const[]){le, cv, s->x});
}

/* Split without its sizes input halves the axis (the forward has checked
 * that its extent is even); y = a * sigmoid(b). */
int tg__onnx_emit_glu(const tg__onnx_site *s, const char **y)
{
    int dim;
    TG_TRY(tg_nn_act_dim(s->m, &dim));
    tg__onnx_node *n = NULL;
    const char *a = NULL, *b = NULL, *sb = NULL;
    TG_TRY(tg__onnx_unary(s->g, s->scope, "Split", s->x, &n, &a));
    TG_TRY(tg__onnx_add_output(s->g, n, s->scope, &b));
    TG_TRY(tg__onnx_attr_int(s->g, n, "axis", dim));
    TG_TRY(tg__onnx_unary(s->g, s->scope, "Sigmoid", b, NULL, &sb));
    return tg__onnx_add(s->g, NULL, y, s->scope, "Mul", 2, (const char *const[]){a, sb});
}

int tg__onnx_emit_softsign(const tg__onnx_site *s, const char **y)
{
    return tg__onnx_unary(s->g, s->scope, "Softsign", s->x, NULL, y);
}

int tg__onnx_emit_tanhshrink(const tg__onnx_site *s, const char **y)
{
    const char *t = NULL;
    TG_TRY(tg__onnx_unary(s->g, s->scope, "Tanh", s->x, NULL, &t));
    return tg__onnx_add(s->g, NULL, y, s->scope, "Sub", 2, (const char *const[]){s->x, t});
}

int tg__onnx_emit_softmin(const tg__onnx_site *s, const char **y)
{
    int dim;
    TG_TRY(tg_nn_act_dim(s->m, &dim));
    TG_CHECK(tg_tensor_ndim(s->xt) >= 1, TG_EUNSUPPORTED,
             "onnx_export: module '%s' (Softmin) runs on a 0-d input, which ONNX's Softmax has "
             "no axis of", s->path[0] ? s->path : "<top>");
    const char *t = NULL;
    tg__onnx_node *n = NULL;
    TG_TRY(tg__onnx_unary(s->g, s->scope, "Neg", s->x, NULL, &t));
    TG_TRY(tg__onnx_unary(s->g, s->scope, "Softmax", t, &n, y));
    return tg__onnx_attr_int(s->g, n, "axis", dim);
}
