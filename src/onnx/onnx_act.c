/* src/onnx/onnx_act.c - the ONNX nodes of Softplus, LogSigmoid, Softmax and
 * LogSoftmax (act_modules.c in src/nn), read through their public
 * introspection (tapegrad/nn.h).
 *
 * Mapping (docs/onnx.md):
 *   Softplus(1, threshold >= 15)  -> Softplus
 *   Softplus(beta, threshold)     -> Where(Greater(b, threshold), x, Softplus(b) / beta),
 *                                    b = x * beta (no Mul and Div when beta = 1)
 *   LogSigmoid                    -> Neg(Softplus(Neg(x)))
 *   Softmax(dim), LogSoftmax(dim) -> Softmax, LogSoftmax with axis = dim
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

/* Softmax and LogSoftmax: opset 13 on normalise along the one axis, as
 * torch's dim (opset 11's axis flattened the dims from it on). */
int tg__onnx_emit_softmax(const tg__onnx_site *s, const char **y)
{
    int dim;
    TG_TRY(tg_nn_softmax_params(s->m, &dim));
    const char *type = tg_module_type_name(s->m);
    TG_CHECK(tg_tensor_ndim(s->xt) >= 1, TG_EUNSUPPORTED,
             "onnx_export: module '%s' (%s) runs on a 0-d input, which ONNX's %s has no axis "
             "of", s->path[0] ? s->path : "<top>", type, type);
    tg__onnx_node *n = NULL;
    TG_TRY(tg__onnx_unary(s->g, s->scope, type, s->x, &n, y));
    return tg__onnx_attr_int(s->g, n, "axis", dim);
}
