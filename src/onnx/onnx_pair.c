/* src/onnx/onnx_pair.c - the ONNX nodes of the modules of two inputs
 * (x1, x2): Bilinear, CosineSimilarity and PairwiseDistance
 * (tapegrad/nn.h), the two graph inputs of tg_onnx_export_n.
 *
 * Mapping (docs/onnx.md):
 *   Bilinear          -> Einsum("...i,oij,...j->...o", x1, weight, x2)
 *                        (+ Add bias)
 *   CosineSimilarity(dim, eps)
 *                     -> ReduceSum(a * b, dim), a = e1 / n1, b = e2 / n2,
 *                        n = Sqrt(Max(ReduceSum(e^2, dim, keepdims), eps^2)),
 *                        e = x, or Expand(x, Shape(other)) when x is
 *                        broadcast (a stretched extent of dim counts in
 *                        the norm, as torch's)
 *   PairwiseDistance(p, eps, keepdim)
 *                     -> the p-norm over the last axis of d = x1 - x2 + eps:
 *                        ReduceL2 (p 2), ReduceL1 (p 1), ReduceMax(|d|)
 *                        (inf), ReduceMin(|d|) (-inf), ReduceSum of
 *                        Cast(Not(Equal(d, 0))) (p 0), otherwise
 *                        Pow(ReduceSum(Pow(|d|, p)), 1/p)
 *
 * These are torch's formulas in torch 1.13 (eps clamps the squared norms
 * at eps^2; pairwise_distance adds eps to the difference), as
 * tg_cosine_similarity and tg_pairwise_distance compute them.  ONNX
 * Runtime computes in f32 where tapegrad's norms sum in double, within a
 * few f32 ulps on inputs of moderate size. */
#include <math.h>
#include <string.h>

#include "core/core.h"
#include "onnx/onnx_graph.h"

int tg__onnx_inputs_pair(const tg_module *m, const char *path, int n, tg_tensor *const *xs,
                         int *axes)
{
    const char *type = tg_module_type_name(m), *where = path[0] ? path : "<top>";
    TG_CHECK(n == 2, TG_EINVAL,
             "onnx_export: module '%s' (%s) takes the graph inputs (x1, x2), not %d "
             "(tg_onnx_export_n, with the module at the top of the export)", where, type, n);
    for (int i = 0; i < 2; i++)
        TG_CHECK(tg_tensor_dtype(xs[i]) == TG_F32, TG_EDTYPE,
                 "onnx_export: module '%s' (%s): graph input %d (x%d) has dtype %s; it must "
                 "be f32", where, type, i, i + 1, tg_dtype_name(tg_tensor_dtype(xs[i])));
    /* dim 0 is the batch of an input of the broadcast rank (2 or more)
     * whose extent there is the broadcast one, unless it is the dim a
     * CosineSimilarity reduces; an input stretched there by the other has
     * none, and the output has one when an input has */
    const int r1 = tg_tensor_ndim(xs[0]), r2 = tg_tensor_ndim(xs[1]);
    const int nd = r1 > r2 ? r1 : r2;
    bool batched = nd >= 2;
    if (!strcmp(type, "CosineSimilarity")) {
        int dim;
        TG_TRY(tg_nn_cosine_similarity_params(m, &dim, NULL));
        batched = batched && dim != 0 && dim != -nd;
    }
    int64_t b0 = 1;
    for (int i = 0; i < 2; i++)
        if (tg_tensor_ndim(xs[i]) == nd && tg_tensor_dim(xs[i], 0) > b0)
            b0 = tg_tensor_dim(xs[i], 0);
    axes[2] = -1;
    for (int i = 0; i < 2; i++) {
        const bool own = batched && tg_tensor_ndim(xs[i]) == nd && tg_tensor_dim(xs[i], 0) == b0;
        axes[i] = own ? 0 : -1;
        if (own) axes[2] = 0;
    }
    return TG_OK;
}

int tg__onnx_emit_bilinear(const tg__onnx_site *s, const char **y)
{
    TG_ASSERT(s->n == 2);
    const char *w = NULL, *b = NULL, *t = NULL;
    TG_TRY(tg__onnx_param(s, "weight", &w));
    TG_TRY(tg__onnx_param(s, "bias", &b));
    tg__onnx_node *n = NULL;
    TG_TRY(tg__onnx_add(s->g, &n, b[0] ? &t : y, s->scope, "Einsum", 3,
                        (const char *const[]){s->xs[0], w, s->xs[1]}));
    TG_TRY(tg__onnx_attr_str(s->g, n, "equation", "...i,oij,...j->...o"));
    if (!b[0]) return TG_OK;
    return tg__onnx_add(s->g, NULL, y, s->scope, "Add", 2, (const char *const[]){t, b});
}

/* Input i as the broadcast shape of the two: itself when its shape is
 * that already, else Expand(x_i, Shape(x_other)), which stays right for
 * any batch. */
static int tg__onnx_pair_expand(const tg__onnx_site *s, int i, const char **e)
{
    const tg_tensor *x = s->xts[i], *o = s->xts[1 - i];
    bool same = tg_tensor_ndim(x) >= tg_tensor_ndim(o);
    const int rx = tg_tensor_ndim(x), ro = tg_tensor_ndim(o);
    for (int d = 1; same && d <= ro; d++)
        same = tg_tensor_dim(x, rx - d) >= tg_tensor_dim(o, ro - d);
    if (same) {
        *e = s->xs[i];
        return TG_OK;
    }
    const char *shape = NULL;
    TG_TRY(tg__onnx_unary(s->g, s->scope, "Shape", s->xs[1 - i], NULL, &shape));
    return tg__onnx_add(s->g, NULL, e, s->scope, "Expand", 2,
                        (const char *const[]){s->xs[i], shape});
}

/* e / Sqrt(Max(ReduceSum(e^2, axes, keepdims), eps2)). */
static int tg__onnx_pair_normalize(const tg__onnx_site *s, const char *e, const char *axes,
                                   const char *eps2, const char **y)
{
    const char *sq = NULL, *ss = NULL, *cl = NULL, *nrm = NULL;
    tg__onnx_node *n = NULL;
    TG_TRY(tg__onnx_add(s->g, NULL, &sq, s->scope, "Mul", 2, (const char *const[]){e, e}));
    TG_TRY(tg__onnx_add(s->g, &n, &ss, s->scope, "ReduceSum", 2, (const char *const[]){sq, axes}));
    TG_TRY(tg__onnx_attr_int(s->g, n, "keepdims", 1));
    TG_TRY(tg__onnx_add(s->g, NULL, &cl, s->scope, "Max", 2, (const char *const[]){ss, eps2}));
    TG_TRY(tg__onnx_unary(s->g, s->scope, "Sqrt", cl, NULL, &nrm));
    return tg__onnx_add(s->g, NULL, y, s->scope, "Div", 2, (const char *const[]){e, nrm});
}

/* The 1-d i64 initializer "<scope>/axes" holding axis. */
static const char *tg__onnx_pair_axes(const tg__onnx_site *s, int64_t axis)
{
    const char *name = tg__onnx_str(s->g, "%s/axes", s->scope);
    const int64_t one = 1;
    if (!name || tg__onnx_init_raw(s->g, name, TG__ONNX_INT64, 1, &one, &axis, sizeof axis) < 0)
        return NULL;
    return name;
}

int tg__onnx_emit_cosine_similarity(const tg__onnx_site *s, const char **y)
{
    TG_ASSERT(s->n == 2);
    int dim;
    double eps;
    TG_TRY(tg_nn_cosine_similarity_params(s->m, &dim, &eps));
    const int r1 = tg_tensor_ndim(s->xts[0]), r2 = tg_tensor_ndim(s->xts[1]);
    const int nd = r1 > r2 ? r1 : r2;   /* >= 1: the export's first input has a batch dim */
    if (dim < 0) dim += nd;
    const char *axes = tg__onnx_pair_axes(s, dim);
    const char *eps2 = tg__onnx_const(s->g, s->scope, "eps_squared", (float)(eps * eps));
    if (!axes || !eps2) return TG_ENOMEM;
    const char *e1 = NULL, *e2 = NULL, *a = NULL, *b = NULL, *p = NULL;
    TG_TRY(tg__onnx_pair_expand(s, 0, &e1));
    TG_TRY(tg__onnx_pair_expand(s, 1, &e2));
    TG_TRY(tg__onnx_pair_normalize(s, e1, axes, eps2, &a));
    TG_TRY(tg__onnx_pair_normalize(s, e2, axes, eps2, &b));
    TG_TRY(tg__onnx_add(s->g, NULL, &p, s->scope, "Mul", 2, (const char *const[]){a, b}));
    tg__onnx_node *n = NULL;
    TG_TRY(tg__onnx_add(s->g, &n, y, s->scope, "ReduceSum", 2, (const char *const[]){p, axes}));
    return tg__onnx_attr_int(s->g, n, "keepdims", 0);
}

/* op(t) over the last axis (axes an attribute: ReduceL1, ReduceL2,
 * ReduceMax, ReduceMin in opset 17). */
static int tg__onnx_pair_reduce_attr(const tg__onnx_site *s, const char *op, const char *t,
                                     bool keepdim, const char **y)
{
    tg__onnx_node *n = NULL;
    TG_TRY(tg__onnx_unary(s->g, s->scope, op, t, &n, y));
    TG_TRY(tg__onnx_attr_ints(s->g, n, "axes", 1, (const int64_t[]){-1}));
    return tg__onnx_attr_int(s->g, n, "keepdims", keepdim);
}

/* ReduceSum(t) over the last axis (axes an input since opset 13). */
static int tg__onnx_pair_sum_last(const tg__onnx_site *s, const char *t, bool keepdim,
                                  const char **y)
{
    const char *axes = tg__onnx_pair_axes(s, -1);
    if (!axes) return TG_ENOMEM;
    tg__onnx_node *n = NULL;
    TG_TRY(tg__onnx_add(s->g, &n, y, s->scope, "ReduceSum", 2, (const char *const[]){t, axes}));
    return tg__onnx_attr_int(s->g, n, "keepdims", keepdim);
}

/* The count of nonzero d over the last axis (the 0-"norm"). */
static int tg__onnx_pair_count(const tg__onnx_site *s, const char *d, bool keepdim,
                               const char **y)
{
    const char *zero = tg__onnx_const(s->g, s->scope, "zero", 0.0f);
    if (!zero) return TG_ENOMEM;
    const char *eq = NULL, *ne = NULL, *f = NULL;
    tg__onnx_node *n = NULL;
    TG_TRY(tg__onnx_add(s->g, NULL, &eq, s->scope, "Equal", 2, (const char *const[]){d, zero}));
    TG_TRY(tg__onnx_unary(s->g, s->scope, "Not", eq, NULL, &ne));
    TG_TRY(tg__onnx_unary(s->g, s->scope, "Cast", ne, &n, &f));
    TG_TRY(tg__onnx_attr_int(s->g, n, "to", TG__ONNX_FLOAT));
    return tg__onnx_pair_sum_last(s, f, keepdim, y);
}

int tg__onnx_emit_pairwise_distance(const tg__onnx_site *s, const char **y)
{
    TG_ASSERT(s->n == 2);
    double p, eps;
    bool keepdim;
    TG_TRY(tg_nn_pairwise_distance_params(s->m, &p, &eps, &keepdim));
    const char *ce = tg__onnx_const(s->g, s->scope, "eps", (float)eps);
    if (!ce) return TG_ENOMEM;
    const char *diff = NULL, *d = NULL, *a = NULL;
    TG_TRY(tg__onnx_add(s->g, NULL, &diff, s->scope, "Sub", 2,
                        (const char *const[]){s->xs[0], s->xs[1]}));
    TG_TRY(tg__onnx_add(s->g, NULL, &d, s->scope, "Add", 2, (const char *const[]){diff, ce}));
    if (p == 2) return tg__onnx_pair_reduce_attr(s, "ReduceL2", d, keepdim, y);
    if (p == 1) return tg__onnx_pair_reduce_attr(s, "ReduceL1", d, keepdim, y);
    if (p == 0) return tg__onnx_pair_count(s, d, keepdim, y);
    TG_TRY(tg__onnx_unary(s->g, s->scope, "Abs", d, NULL, &a));
    if (isinf(p)) return tg__onnx_pair_reduce_attr(s, p > 0 ? "ReduceMax" : "ReduceMin", a,
                                                   keepdim, y);
    /* (sum |d|^p)^(1/p) */
    const char *cp = tg__onnx_const(s->g, s->scope, "p", (float)p);
    const char *ci = tg__onnx_const(s->g, s->scope, "inv_p", (float)(1.0 / p));
    if (!cp || !ci) return TG_ENOMEM;
    const char *pw = NULL, *sum = NULL;
    TG_TRY(tg__onnx_add(s->g, NULL, &pw, s->scope, "Pow", 2, (const char *const[]){a, cp}));
    TG_TRY(tg__onnx_pair_sum_last(s, pw, keepdim, &sum));
    return tg__onnx_add(s->g, NULL, y, s->scope, "Pow", 2, (const char *const[]){sum, ci});
}
