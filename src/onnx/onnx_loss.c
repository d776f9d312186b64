/* src/onnx/onnx_loss.c - the ONNX nodes of the loss modules that
 * torch.onnx.export writes at opset 17: CrossEntropyLoss, NLLLoss,
 * BCEWithLogitsLoss and KLDivLoss (tapegrad/nn.h), on the two graph inputs
 * (input, target) of tg_onnx_export_n, read through tg_nn_loss_options
 * and their buffers "weight" and "pos_weight".
 *
 * Mapping (docs/onnx.md), red the module's reduction:
 *   CrossEntropyLoss  -> SoftmaxCrossEntropyLoss(input, target[, weight])
 *                        with reduction and ignore_index
 *   NLLLoss           -> NegativeLogLikelihoodLoss(input, target[, weight])
 *                        the same; both on an unbatched input (C) with a 0-d
 *                        target between Unsqueeze and (NONE) Squeeze of axis 0
 *   BCEWithLogitsLoss -> (1 - t) x + lw Softplus(-x), lw = 1 + (pos_weight
 *                        - 1) t (1 without pos_weight), times weight, then
 *                        red: ReduceMean / ReduceSum over every axis
 *   KLDivLoss         -> Where(t = 0, 0, t Log(t)) - t x, or with
 *                        log_target Exp(t) (t - x), then red; BATCHMEAN
 *                        divides the sum by input's dim 0, read from its
 *                        Shape (so that a dynamic batch stays right)
 *
 * These are the formulas tapegrad's forwards compute (torch 1.13's):
 * ONNX's loss operators take MEAN as the sum of the weighted losses over
 * the sum of the weights of the targets not ignored, as torch.
 * Softplus(-x) is log(1 + e^-x), finite for |x| = 1000 under ONNX Runtime,
 * where torch.onnx writes Log(Sigmoid(x)) (onnx_act.c's LogSigmoid).
 * CrossEntropyLoss with label smoothing, or with class probabilities as
 * its target, has no ONNX operator and is refused (torch.onnx refuses
 * label smoothing too). */
#include <string.h>

#include "core/core.h"
#include "onnx/onnx_graph.h"

static const char *tg__onnx_where(const char *path) { return path[0] ? path : "<top>"; }

static bool tg__onnx_loss_classes(const tg_module *m)
{
    const char *type = tg_module_type_name(m);
    return !strcmp(type, "CrossEntropyLoss") || !strcmp(type, "NLLLoss");
}

int tg__onnx_refuse_loss(const tg_module *m, const char *path)
{
    tg_nn_loss_opts o;
    TG_TRY(tg_nn_loss_options(m, &o));
    TG_CHECK(o.label_smoothing == 0, TG_EUNSUPPORTED,
             "onnx_export: module '%s' (%s) with label_smoothing=%g is not supported: ONNX's "
             "SoftmaxCrossEntropyLoss has no label smoothing", tg__onnx_where(path),
             tg_module_type_name(m), o.label_smoothing);
    return TG_OK;
}

int tg__onnx_inputs_loss(const tg_module *m, const char *path, int n, tg_tensor *const *xs,
                         int *axes)
{
    const char *type = tg_module_type_name(m), *where = tg__onnx_where(path);
    TG_CHECK(n == 2, TG_EINVAL,
             "onnx_export: module '%s' (%s) takes the graph inputs (input, target), not %d "
             "(tg_onnx_export_n, with the module at the top of the export)", where, type, n);
    const bool classes = tg__onnx_loss_classes(m);
    TG_CHECK(tg_tensor_dtype(xs[0]) == TG_F32, TG_EDTYPE,
             "onnx_export: module '%s' (%s): graph input 0 (input) has dtype %s; it must be "
             "f32", where, type, tg_dtype_name(tg_tensor_dtype(xs[0])));
    const tg_dtype dt = tg_tensor_dtype(xs[1]);
    TG_CHECK(classes ? dt == TG_I64 : dt == TG_F32, TG_EDTYPE,
             "onnx_export: module '%s' (%s): graph input 1 (target) has dtype %s; it must be "
             "%s", where, type, tg_dtype_name(dt),
             classes ? "i64 class indices (ONNX's loss operators take no class probabilities)"
                     : "f32");
    tg_nn_loss_opts o;
    TG_TRY(tg_nn_loss_options(m, &o));
    /* the batch: dim 0 of an input of classes (N, C, ...) and its target;
     * dim 0 of the pointwise losses' inputs of the full rank, the output's
     * only without reduction */
    const int r0 = tg_tensor_ndim(xs[0]), r1 = tg_tensor_ndim(xs[1]);
    const int nd = r0 > r1 ? r0 : r1;
    if (classes) {
        axes[0] = axes[1] = r0 >= 2 ? 0 : -1;
    } else {
        int64_t b0 = 1;
        for (int i = 0; i < 2; i++)
            if (tg_tensor_ndim(xs[i]) == nd && tg_tensor_dim(xs[i], 0) > b0)
                b0 = tg_tensor_dim(xs[i], 0);
        for (int i = 0; i < 2; i++)
            axes[i] = tg_tensor_ndim(xs[i]) == nd && tg_tensor_dim(xs[i], 0) == b0 ? 0 : -1;
    }
    axes[2] = o.reduction == TG_REDUCTION_NONE && (axes[0] == 0 || axes[1] == 0) ? 0 : -1;
    return TG_OK;
}

/* The i64 initializer "<scope>/axis0" holding (0), the axes input of
 * Unsqueeze and Squeeze, in *axes. */
static int tg__onnx_loss_axis0(const tg__onnx_site *s, const char **axes)
{
    *axes = tg__onnx_str(s->g, "%s/axis0", s->scope);
    if (!*axes) return TG_ENOMEM;
    const int64_t one = 1, zero = 0;
    return tg__onnx_init_raw(s->g, *axes, TG__ONNX_INT64, 1, &one, &zero, sizeof zero);
}

int tg__onnx_emit_loss_classes(const tg__onnx_site *s, const char **y)
{
    TG_ASSERT(s->n == 2);
    tg_nn_loss_opts o;
    TG_TRY(tg_nn_loss_options(s->m, &o));
    const bool ce = !strcmp(tg_module_type_name(s->m), "CrossEntropyLoss");
    const bool one = tg_tensor_ndim(s->xts[0]) == 1;   /* an input (C) of one sample */
    const char *x = s->xs[0], *t = s->xs[1], *w = NULL, *l = NULL, *ax = NULL;
    if (one) {
        TG_TRY(tg__onnx_loss_axis0(s, &ax));
        TG_TRY(tg__onnx_add(s->g, NULL, &x, s->scope, "Unsqueeze", 2,
                            (const char *const[]){x, ax}));
        TG_TRY(tg__onnx_add(s->g, NULL, &t, s->scope, "Unsqueeze", 2,
                            (const char *const[]){t, ax}));
    }
    TG_TRY(tg__onnx_param(s, "weight", &w));
    tg__onnx_node *n = NULL;
    const char *op = ce ? "SoftmaxCrossEntropyLoss" : "NegativeLogLikelihoodLoss";
    const bool none = o.reduction == TG_REDUCTION_NONE;
    TG_TRY(tg__onnx_add(s->g, &n, one && none ? &l : y, s->scope, op, w[0] ? 3 : 2,
                        (const char *const[]){x, t, w}));
    TG_TRY(tg__onnx_attr_str(s->g, n, "reduction",
                             none ? "none" : o.reduction == TG_REDUCTION_SUM ? "sum" : "mean"));
    TG_TRY(tg__onnx_attr_int(s->g, n, "ignore_index", o.ignore_index));
    if (!(one && none)) return TG_OK;
    return tg__onnx_add(s->g, NULL, y, s->scope, "Squeeze", 2, (const char *const[]){l, ax});
}

/* The pointwise loss l reduced as red: NONE as it is, MEAN and SUM over
 * every axis, BATCHMEAN the sum over input's dim 0. */
static int tg__onnx_loss_reduce(const tg__onnx_site *s, tg_reduction red, const char *l,
                                const char **y)
{
    if (red == TG_REDUCTION_NONE) {
        *y = l;
        return TG_OK;
    }
    tg__onnx_node *n = NULL;
    const char *sum = NULL;
    TG_TRY(tg__onnx_unary(s->g, s->scope, red == TG_REDUCTION_MEAN ? "ReduceMean" : "ReduceSum",
                          l, &n, red == TG_REDUCTION_BATCHMEAN ? &sum : y));
    TG_TRY(tg__onnx_attr_int(s->g, n, "keepdims", 0));
    if (red != TG_REDUCTION_BATCHMEAN) return TG_OK;
    const char *idx = tg__onnx_str(s->g, "%s/batch_index", s->scope);
    if (!idx) return TG_ENOMEM;
    const int64_t zero = 0;
    TG_TRY(tg__onnx_init_raw(s->g, idx, TG__ONNX_INT64, 0, NULL, &zero, sizeof zero));
    const char *shape = NULL, *b = NULL, *bf = NULL;
    TG_TRY(tg__onnx_unary(s->g, s->scope, "Shape", s->xs[0], NULL, &shape));
    TG_TRY(tg__onnx_add(s->g, NULL, &b, s->scope, "Gather", 2, (const char *const[]){shape, idx}));
    TG_TRY(tg__onnx_unary(s->g, s->scope, "Cast", b, &n, &bf));
    TG_TRY(tg__onnx_attr_int(s->g, n, "to", TG__ONNX_FLOAT));
    return tg__onnx_add(s->g, NULL, y, s->scope, "Div", 2, (const char *const[]){sum, bf});
}

/* a op b -> *y */
static int tg__onnx_bin(const tg__onnx_site *s, const char *op, const char *a, const char *b,
                        const char **y)
{
    return tg__onnx_add(s->g, NULL, y, s->scope, op, 2, (const char *const[]){a, b});
}

int tg__onnx_emit_bce_with_logits(const tg__onnx_site *s, const char **y)
{
    TG_ASSERT(s->n == 2);
    tg_nn_loss_opts o;
    TG_TRY(tg_nn_loss_options(s->m, &o));
    const char *x = s->xs[0], *t = s->xs[1], *w = NULL, *pw = NULL;
    TG_TRY(tg__onnx_param(s, "weight", &w));
    TG_TRY(tg__onnx_param(s, "pos_weight", &pw));
    const char *one = tg__onnx_const(s->g, s->scope, "one", 1.0f);
    if (!one) return TG_ENOMEM;
    /* l = (1 - t) x + lw softplus(-x) */
    const char *nx = NULL, *sp = NULL, *u = NULL, *a = NULL, *b = NULL, *l = NULL;
    TG_TRY(tg__onnx_unary(s->g, s->scope, "Neg", x, NULL, &nx));
    TG_TRY(tg__onnx_unary(s->g, s->scope, "Softplus", nx, NULL, &sp));
    TG_TRY(tg__onnx_bin(s, "Sub", one, t, &u));
    TG_TRY(tg__onnx_bin(s, "Mul", u, x, &a));
    b = sp;
    if (pw[0]) {   /* lw = 1 + (pos_weight - 1) t */
        const char *pm = NULL, *pt = NULL, *lw = NULL;
        TG_TRY(tg__onnx_bin(s, "Sub", pw, one, &pm));
        TG_TRY(tg__onnx_bin(s, "Mul", pm, t, &pt));
        TG_TRY(tg__onnx_bin(s, "Add", one, pt, &lw));
        TG_TRY(tg__onnx_bin(s, "Mul", lw, sp, &b));
    }
    TG_TRY(tg__onnx_bin(s, "Add", a, b, &l));
    if (w[0]) TG_TRY(tg__onnx_bin(s, "Mul", l, w, &l));
    return tg__onnx_loss_reduce(s, o.reduction, l, y);
}

int tg__onnx_emit_kl_div(const tg__onnx_site *s, const char **y)
{
    TG_ASSERT(s->n == 2);
    tg_nn_loss_opts o;
    TG_TRY(tg_nn_loss_options(s->m, &o));
    const char *x = s->xs[0], *t = s->xs[1], *l = NULL, *d = NULL;
    if (o.log_target) {   /* e^t (t - x) */
        const char *et = NULL;
        TG_TRY(tg__onnx_unary(s->g, s->scope, "Exp", t, NULL, &et));
        TG_TRY(tg__onnx_bin(s, "Sub", t, x, &d));
        TG_TRY(tg__onnx_bin(s, "Mul", et, d, &l));
        return tg__onnx_loss_reduce(s, o.reduction, l, y);
    }
    /* xlogy(t, t) - t x, xlogy 0 where t = 0 */
    const char *zero = tg__onnx_const(s->g, s->scope, "zero", 0.0f);
    if (!zero) return TG_ENOMEM;
    const char *lg = NULL, *tl = NULL, *eq = NULL, *xl = NULL, *tx = NULL;
    TG_TRY(tg__onnx_unary(s->g, s->scope, "Log", t, NULL, &lg));
    TG_TRY(tg__onnx_bin(s, "Mul", t, lg, &tl));
    TG_TRY(tg__onnx_bin(s, "Equal", t, zero, &eq));
    TG_TRY(tg__onnx_add(s->g, NULL, &xl, s->scope, "Where", 3,
                        (const char *const[]){eq, zero, tl}));
    TG_TRY(tg__onnx_bin(s, "Mul", t, x, &tx));
    TG_TRY(tg__onnx_bin(s, "Sub", xl, tx, &l));
    return tg__onnx_loss_reduce(s, o.reduction, l, y);
}
