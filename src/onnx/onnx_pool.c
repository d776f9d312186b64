/* src/onnx/onnx_pool.c - the ONNX nodes of the resampling modules (opset
 * 17):
 *   Upsample   -> Resize(x, roi "", scales (1, 1, s...)) with mode
 *                 "nearest", coordinate_transformation_mode "asymmetric" and
 *                 nearest_mode "floor", as torch.onnx.export writes it:
 *                 output index o reads floor(o / s), tapegrad's o / s; a
 *                 linear Upsample with mode "linear" and
 *                 coordinate_transformation_mode "align_corners" or
 *                 "pytorch_half_pixel" (r = (o + 1/2)/s - 1/2, which ONNX
 *                 Runtime clamps at 0 as tapegrad does); an antialiased
 *                 one the same, enlarging: bilinear's triangle is plain
 *                 linear's, bicubic's is "cubic" with cubic_coeff_a -0.5
 *                 and exclude_outside 1 (the taps outside x dropped, the
 *                 rest renormalised).  An antialiased Upsample with
 *                 align_corners reads positions (o + 1/2)(S-1)/(O-1) that
 *                 no coordinate_transformation_mode gives: refused
 *   AvgPoolNd  -> AveragePool(kernel_shape, strides, pads,
 *                 count_include_pad), ceil_mode 0
 *   MaxPoolNd  -> MaxPool(kernel_shape, strides, pads, dilations), ceil_mode 0;
 *                 with return_indices, where its indices are wanted (by a
 *                 MaxUnpool after it, or as an extra output), MaxPool's
 *                 Indices made torch's (onnx_unpool.c)
 *   AdaptiveAvgPoolNd -> GlobalAveragePool when every output extent is 1;
 *                 AveragePool(kernel_shape = strides = I/O, no pads) when
 *                 each output extent O divides the input's I (the same
 *                 windows); otherwise refused: ONNX has no pooling whose
 *                 windows overlap unevenly
 *   AdaptiveMaxPoolNd -> GlobalMaxPool or MaxPool the same way (ties and
 *                 NaNs as ONNX Runtime's MaxPool takes them)
 *   LPPoolNd   -> LpPool(kernel_shape, strides, pads 0, p) for an even
 *                 integer p without a ceil_mode window cut short by x's
 *                 end; otherwise torch's own composition, Pow,
 *                 AveragePool, Sign, Abs, Relu, Mul, Mul, Pow: ONNX's
 *                 LpPool sums |x|^p, torch x^p, and torch averages a
 *                 window cut short over its part, then multiplies by the
 *                 kernel's size
 * ONNX's ceil_mode is not PyTorch's: opset 17 rounds the output extent up
 * without dropping a window that would start in the right padding, and
 * AveragePool's count_include_pad counts every padded element of a window.
 * So ceil_mode is written as floor mode with end pads grown by
 *   extra = (O-1)*s + d*(k-1) + 1 - (I + 2p)   (when > 0)
 * for PyTorch's output extent O, which gives the same O windows at the same
 * places, each wholly inside the padded range.  MaxPool and AveragePool
 * without count_include_pad never read padding, so the extra pads change
 * nothing else.  With count_include_pad PyTorch counts a window only up to
 * the end of its padding, I + p: AveragePool divides by the kernel's size,
 * and a constant Mul by kernel size / PyTorch's count (one factor per
 * output position, broadcast over N and C) makes it PyTorch's mean.  (A
 * zero Pad before an AveragePool without count_include_pad would say the
 * same, but ONNX Runtime's graph optimizer fuses the two into one
 * AveragePool that no longer counts the zeros.)  ONNX Runtime takes pads
 * smaller than the kernel only: a MaxPool whose grown pad reaches the
 * kernel (with dilation) pads x with -inf by a Pad node instead.  ONNX's
 * pooling takes (N, C, S...) only: a module run on an unbatched input is
 * refused. */
#include <math.h>
#include <string.h>

#include "core/core.h"
#include "onnx/onnx_graph.h"

int tg__onnx_emit_upsample(const tg__onnx_site *s, const char **y)
{
    int ns;
    int64_t scale[TG_POOL_MAX_SPATIAL];
    tg_upsample_mode mode;
    bool align;
    TG_TRY(tg_nn_upsample_params(s->m, &ns, scale));
    TG_TRY(tg_nn_upsample_mode(s->m, &mode, &align));
    bool aa;
    TG_TRY(tg_nn_upsample_antialias(s->m, &aa));
    TG_CHECK(!aa || !align, TG_EUNSUPPORTED,
             "onnx_export: module '%s' (Upsample) is antialiased with align_corners: its "
             "source positions (o + 1/2) * (S-1)/(O-1) are no coordinate_transformation_mode "
             "of ONNX's Resize", s->path[0] ? s->path : "<top>");
    const int nd = tg_tensor_ndim(s->xt);
    float sc[TG_MAX_DIMS];
    for (int d = 0; d < nd; d++) sc[d] = d < nd - ns ? 1.0f : (float)scale[d - (nd - ns)];
    const char *name = tg__onnx_str(s->g, "%s/scales", s->scope);
    if (!name) return TG_ENOMEM;
    const int64_t n = nd;
    TG_TRY(tg__onnx_init_raw(s->g, name, TG__ONNX_FLOAT, 1, &n, sc, sizeof *sc));
    tg__onnx_node *node = NULL;
    TG_TRY(tg__onnx_add(s->g, &node, y, s->scope, "Resize", 3,
                        (const char *const[]){s->x, "", name}));
    if (mode == TG_UPSAMPLE_LINEAR || mode == TG_UPSAMPLE_BICUBIC) {
        /* cubic: Keys's a = -0.75, the taps outside x clamped to its edge
         * (exclude_outside = 0), as tg_upsample_bicubic; antialiased,
         * a = -0.5 and the taps outside x dropped, as tg_upsample_antialias */
        const bool cubic = mode == TG_UPSAMPLE_BICUBIC;
        TG_TRY(tg__onnx_attr_str(s->g, node, "mode", cubic ? "cubic" : "linear"));
        if (cubic) TG_TRY(tg__onnx_attr_float(s->g, node, "cubic_coeff_a", aa ? -0.5f : -0.75f));
        if (cubic && aa) TG_TRY(tg__onnx_attr_int(s->g, node, "exclude_outside", 1));
        return tg__onnx_attr_str(s->g, node, "coordinate_transformation_mode",
                                 align ? "align_corners" : "pytorch_half_pixel");
    }
    TG_TRY(tg__onnx_attr_str(s->g, node, "mode", "nearest"));
    TG_TRY(tg__onnx_attr_str(s->g, node, "coordinate_transformation_mode", "asymmetric"));
    return tg__onnx_attr_str(s->g, node, "nearest_mode", "floor");
}

/* Pads (begin..., end...) on the spatial dims of s->x, with value v (a
 * Pad node), into *x. */
static int tg__onnx_pool_pad(const tg__onnx_site *s, int ns, const int64_t *pads, float v,
                             const char **x)
{
    const int nd = ns + 2;
    int64_t all[2 * (TG_POOL_MAX_SPATIAL + 2)] = {0};
    for (int a = 0; a < ns; a++) {
        all[2 + a] = pads[a];
        all[nd + 2 + a] = pads[ns + a];
    }
    const char *name = tg__onnx_str(s->g, "%s/pads", s->scope);
    const char *value = tg__onnx_str(s->g, "%s/pad_value", s->scope);
    if (!name || !value) return TG_ENOMEM;
    const int64_t n = 2 * nd;
    TG_TRY(tg__onnx_init_raw(s->g, name, TG__ONNX_INT64, 1, &n, all, sizeof *all));
    TG_TRY(tg__onnx_init_raw(s->g, value, TG__ONNX_FLOAT, 0, NULL, &v, sizeof v));
    return tg__onnx_add(s->g, NULL, x, s->scope, "Pad", 3,
                        (const char *const[]){s->x, name, value});
}

/* y = t * (prod k / PyTorch's count of each window), a (1, 1, O...)
 * initializer: PyTorch's count_include_pad mean from ONNX's. */
static int tg__onnx_pool_rescale(const tg__onnx_site *s, int ns, const tg_pool_params *p,
                                 const char *t, const char **y)
{
    int64_t shape[2 + TG_POOL_MAX_SPATIAL] = {1, 1}, o[TG_POOL_MAX_SPATIAL] = {0};
    for (int a = 0; a < ns; a++) shape[2 + a] = tg_tensor_dim(s->yt, 2 + a);
    const int64_t n = tg__numel(ns + 2, shape);
    float *f = tg__malloc((size_t)n * sizeof *f);
    const char *name = tg__onnx_str(s->g, "%s/count_scale", s->scope);
    int rc = f && name ? TG_OK : TG_ENOMEM;
    for (int64_t e = 0; rc == TG_OK && e < n; e++) {
        double r = 1;
        for (int a = 0; a < ns; a++) {   /* a window's extent up to I + p */
            const int64_t start = o[a] * p->stride[a] - p->padding[a];
            const int64_t lim = tg_tensor_dim(s->xt, 2 + a) + p->padding[a];
            const int64_t end = start + p->kernel[a] < lim ? start + p->kernel[a] : lim;
            r *= (double)p->kernel[a] / (double)(end - start);
        }
        f[e] = (float)r;
        for (int a = ns - 1; a >= 0; a--) {   /* the next position, row-major */
            if (++o[a] < shape[2 + a]) break;
            o[a] = 0;
        }
    }
    if (rc == TG_OK)
        rc = tg__onnx_init_raw(s->g, name, TG__ONNX_FLOAT, ns + 2, shape, f, sizeof *f);
    free(f);
    TG_TRY(rc);
    return tg__onnx_add(s->g, NULL, y, s->scope, "Mul", 2, (const char *const[]){t, name});
}

int tg__onnx_need_batched(const tg__onnx_site *s, int ns, const char *onnx_op)
{
    TG_CHECK(tg_tensor_ndim(s->xt) == ns + 2, TG_EUNSUPPORTED,
             "onnx_export: module '%s' (%s) runs on an unbatched input (%d dims): ONNX's %s "
             "takes (N, C, S...)", s->path[0] ? s->path : "<top>", tg_module_type_name(s->m),
             tg_tensor_ndim(s->xt), onnx_op);
    return TG_OK;
}

/* The AveragePool (avg) or MaxPool of p on value x of s's input's shape,
 * with s's output's extents, into *y; *node: the MaxPool node (NULL after a
 * Pad of -inf, or for avg), whose Indices a caller may add. */
static int tg__onnx_pool_nodes(const tg__onnx_site *s, int ns, const tg_pool_params *p,
                               bool avg, const char *x, const char **y, tg__onnx_node **node)
{
    /* pads (begin..., end...): p's, the ends grown for ceil_mode */
    int64_t pads[2 * TG_POOL_MAX_SPATIAL];
    bool grown = false;
    for (int a = 0; a < ns; a++) {
        const int64_t in = tg_tensor_dim(s->xt, 2 + a), out = tg_tensor_dim(s->yt, 2 + a);
        const int64_t extra = (out - 1) * p->stride[a] + p->dilation[a] * (p->kernel[a] - 1) + 1 -
                              (in + 2 * p->padding[a]);
        pads[a] = p->padding[a];
        pads[ns + a] = p->padding[a] + (extra > 0 ? extra : 0);
        grown |= extra > 0;
    }
    const char *t = NULL;
    bool reach = false;   /* a MaxPool pad as large as the kernel */
    for (int a = 0; !avg && a < ns; a++) reach |= pads[ns + a] >= p->kernel[a];
    if (reach) {
        TG_TRY(tg__onnx_pool_pad(s, ns, pads, -INFINITY, &x));
        memset(pads, 0, sizeof pads);
    }
    const bool rescale = avg && p->count_include_pad && grown;
    tg__onnx_node *n = NULL;
    TG_TRY(tg__onnx_add(s->g, &n, rescale ? &t : y, s->scope, avg ? "AveragePool" : "MaxPool", 1,
                        (const char *const[]){x}));
    *node = avg || reach ? NULL : n;
    TG_TRY(tg__onnx_attr_ints(s->g, n, "kernel_shape", ns, p->kernel));
    TG_TRY(tg__onnx_attr_ints(s->g, n, "strides", ns, p->stride));
    TG_TRY(tg__onnx_attr_ints(s->g, n, "pads", 2 * ns, pads));
    TG_TRY(tg__onnx_attr_int(s->g, n, "ceil_mode", 0));
    if (!avg) return tg__onnx_attr_ints(s->g, n, "dilations", ns, p->dilation);
    TG_TRY(tg__onnx_attr_int(s->g, n, "count_include_pad", p->count_include_pad));
    return rescale ? tg__onnx_pool_rescale(s, ns, p, t, y) : TG_OK;
}

int tg__onnx_emit_pool(const tg__onnx_site *s, const char **y)
{
    int ns;
    tg_pool_params p;
    TG_TRY(tg_nn_pool_params(s->m, &ns, &p));
    const char *type = tg_module_type_name(s->m);
    const bool avg = !strncmp(type, "AvgPool", 7);
    TG_TRY(tg__onnx_need_batched(s, ns, avg ? "AveragePool" : "MaxPool"));
    tg__onnx_node *n = NULL;
    TG_TRY(tg__onnx_pool_nodes(s, ns, &p, avg, s->x, y, &n));
    /* return_indices, its indices wanted (by the next module or as an
     * extra output) */
    if (avg || !s->extra || tg_module_output_count(s->m) < 2) return TG_OK;
    return tg__onnx_pool_indices(s, ns, &p, n, &s->extra[0]);
}

int tg__onnx_emit_adaptive_pool(const tg__onnx_site *s, const char **y)
{
    int ns;
    TG_TRY(tg_nn_adaptive_pool_params(s->m, &ns, NULL));
    const bool max = !strncmp(tg_module_type_name(s->m), "AdaptiveMax", 11);
    const char *pool = max ? "MaxPool" : "AveragePool";
    TG_TRY(tg__onnx_need_batched(s, ns, pool));
    int64_t k[TG_POOL_MAX_SPATIAL], zeros[2 * TG_POOL_MAX_SPATIAL] = {0};
    bool global = true;
    for (int a = 0; a < ns; a++) {
        const int64_t in = tg_tensor_dim(s->xt, 2 + a), out = tg_tensor_dim(s->yt, 2 + a);
        TG_CHECK(in % out == 0, TG_EUNSUPPORTED,
                 "onnx_export: module '%s' (%s) pools spatial dim %d of extent %lld to %lld, "
                 "which does not divide it: ONNX has no pooling with the uneven windows of "
                 "that size (a divisor of the extent, or 1 everywhere, exports)",
                 s->path[0] ? s->path : "<top>", tg_module_type_name(s->m), a, (long long)in,
                 (long long)out);
        k[a] = in / out;
        global &= out == 1;
    }
    if (global)
        return tg__onnx_add(s->g, NULL, y, s->scope, max ? "GlobalMaxPool" : "GlobalAveragePool",
                            1, (const char *const[]){s->x});
    tg__onnx_node *n = NULL;
    TG_TRY(tg__onnx_add(s->g, &n, y, s->scope, pool, 1, (const char *const[]){s->x}));
    TG_TRY(tg__onnx_attr_ints(s->g, n, "kernel_shape", ns, k));
    TG_TRY(tg__onnx_attr_ints(s->g, n, "strides", ns, k));
    TG_TRY(tg__onnx_attr_ints(s->g, n, "pads", 2 * ns, zeros));
    TG_TRY(tg__onnx_attr_int(s->g, n, "ceil_mode", 0));
    return max ? TG_OK : tg__onnx_attr_int(s->g, n, "count_include_pad", 0);
}

/* torch 1.13's F.lp_pool1d/2d written out as it computes it:
 *   out = avg_pool(x^p)   (padding 0, ceil_mode's windows cut short by x's
 *                          end averaged over their part)
 *   y = (sign(out) * relu(|out|) * prod k)^(1/p)
 * so an odd or fractional p gives torch's values on negative x too (a
 * negative sum under a fractional root is NaN in both). */
static int tg__onnx_lp_pool_nodes(const tg__onnx_site *s, int ns, double pn,
                                  const tg_pool_params *p, const char **y)
{
    double k = 1;
    for (int a = 0; a < ns; a++) k *= (double)p->kernel[a];
    tg_pool_params q = *p;
    q.count_include_pad = false;   /* no padding: the count is of x's elements either way */
    const char *pw = tg__onnx_const(s->g, s->scope, "norm_type", (float)pn);
    const char *root = tg__onnx_const(s->g, s->scope, "inv_norm_type", (float)(1.0 / pn));
    const char *size = tg__onnx_const(s->g, s->scope, "kernel_size", (float)k);
    if (!pw || !root || !size) return TG_ENOMEM;
    const char *t = NULL, *sign = NULL, *mag = NULL;
    tg__onnx_node *unused = NULL;
    TG_TRY(tg__onnx_add(s->g, NULL, &t, s->scope, "Pow", 2, (const char *const[]){s->x, pw}));
    TG_TRY(tg__onnx_pool_nodes(s, ns, &q, true, t, &t, &unused));
    TG_TRY(tg__onnx_unary(s->g, s->scope, "Sign", t, NULL, &sign));
    TG_TRY(tg__onnx_unary(s->g, s->scope, "Abs", t, NULL, &mag));
    TG_TRY(tg__onnx_unary(s->g, s->scope, "Relu", mag, NULL, &mag));
    TG_TRY(tg__onnx_add(s->g, NULL, &t, s->scope, "Mul", 2, (const char *const[]){sign, mag}));
    TG_TRY(tg__onnx_add(s->g, NULL, &t, s->scope, "Mul", 2, (const char *const[]){t, size}));
    return tg__onnx_add(s->g, NULL, y, s->scope, "Pow", 2, (const char *const[]){t, root});
}

int tg__onnx_emit_lp_pool(const tg__onnx_site *s, const char **y)
{
    int ns;
    double pn;
    tg_pool_params p;
    TG_TRY(tg_nn_lp_pool_params(s->m, &ns, &pn, &p));
    TG_TRY(tg__onnx_need_batched(s, ns, "LpPool"));
    /* LpPool sums |x|^p over whole windows: torch's for an even p when no
     * ceil_mode window is cut short by x's end (torch scales such a window
     * by the kernel's size over its count) */
    bool lp = pn > 0 && pn <= 64 && fmod(pn, 2) == 0;
    for (int a = 0; a < ns; a++) {
        const int64_t in = tg_tensor_dim(s->xt, 2 + a), out = tg_tensor_dim(s->yt, 2 + a);
        lp &= (out - 1) * p.stride[a] + p.kernel[a] <= in;
    }
    if (!lp) return tg__onnx_lp_pool_nodes(s, ns, pn, &p, y);
    const int64_t zeros[2 * TG_POOL_MAX_SPATIAL] = {0};
    tg__onnx_node *n = NULL;
    TG_TRY(tg__onnx_add(s->g, &n, y, s->scope, "LpPool", 1, (const char *const[]){s->x}));
    TG_TRY(tg__onnx_attr_ints(s->g, n, "kernel_shape", ns, p.kernel));
    TG_TRY(tg__onnx_attr_ints(s->g, n, "strides", ns, p.stride));
    TG_TRY(tg__onnx_attr_ints(s->g, n, "pads", 2 * ns, zeros));
    return tg__onnx_attr_int(s->g, n, "p", (int64_t)pn);
}
