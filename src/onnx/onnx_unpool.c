/* src/onnx/onnx_unpool.c - the indices of a MaxPoolNd with return_indices
 * and MaxUnpoolNd (opset 17).
 *
 * torch numbers an index within its (n, c) plane of x: i = h*W + w (3-d
 * likewise), in [0, P) for the plane size P = prod S.  ONNX's MaxPool gives
 * the Indices of the whole tensor (storage_order 0): (n*C + c)*P + i, and
 * its MaxUnpool takes indices of that kind into its output of plane size
 * P' = prod S'.  So
 *   MaxPool:   torch's = Mod(onnx's, P)            (onnx's >= 0)
 *   MaxUnpool: onnx's  = torch's + (n*C + c)*P'
 * where n*C*P' is an exclusive CumSum over the batch (which may be
 * dynamic) and c*P' a constant.  MaxUnpool's default output extent (I-1)*s + k -
 * 2p is torch's; the module takes no output_size, so none is written. */
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "onnx/onnx_graph.h"

/* A 1-d i64 initializer "<scope>/<what>" of n values: its name, or NULL. */
static const char *tg__onnx_i64s(const tg__onnx_site *s, const char *what, int64_t n,
                                 const int64_t *v)
{
    const char *name = tg__onnx_str(s->g, "%s/%s", s->scope, what);
    if (!name || tg__onnx_init_raw(s->g, name, TG__ONNX_INT64, 1, &n, v, sizeof *v) < 0)
        return NULL;
    return name;
}

int tg__onnx_pool_indices(const tg__onnx_site *s, int ns, const tg_pool_params *p,
                          tg__onnx_node *n, const char **idx)
{
    const char *path = s->path[0] ? s->path : "<top>", *type = tg_module_type_name(s->m);
    TG_CHECK(n != NULL, TG_EUNSUPPORTED,
             "onnx_export: module '%s' (%s) with return_indices has an end pad as large as "
             "its kernel (ceil_mode with dilation): ONNX Runtime's MaxPool takes no such pad, "
             "and the -inf Pad before it would number the indices in the padded input", path,
             type);
    /* a window with no element inside x (torch's index -1) has no ONNX index */
    tg_tensor *y = NULL, *i = NULL;
    TG_TRY(tg_max_pool_with_indices(&y, &i, (tg_tensor *)s->xt, ns, p));
    double lo = 0;
    for (int64_t e = 0, m = tg_tensor_numel(i); e < m && lo >= 0; e++)
        tg_tensor_get_flat(i, e, &lo);
    tg_tensor_release(y);
    tg_tensor_release(i);
    TG_CHECK(lo >= 0, TG_EUNSUPPORTED,
             "onnx_export: module '%s' (%s) with return_indices has a window with no element "
             "of x (torch's index -1), which ONNX's MaxPool does not number", path, type);
    int64_t plane = 1;
    for (int a = 0; a < ns; a++) plane *= tg_tensor_dim(s->xt, 2 + a);
    const char *flat = NULL, *size = tg__onnx_str(s->g, "%s/plane_size", s->scope);
    if (!size) return TG_ENOMEM;
    TG_TRY(tg__onnx_init_raw(s->g, size, TG__ONNX_INT64, 0, NULL, &plane, sizeof plane));
    TG_TRY(tg__onnx_add_output(s->g, n, s->scope, &flat));
    return tg__onnx_add(s->g, NULL, idx, s->scope, "Mod", 2, (const char *const[]){flat, size});
}

/* The onnx indices of torch's indices idx (N, C, S...), for an output of
 * plane size plane: idx + n*C*plane + c*plane.  n*C*plane is the exclusive
 * CumSum over N of C*plane in an (N, 1...) slice of idx (so the batch may
 * be dynamic, and every value keeps a shape that onnx's inference knows);
 * c*plane a (1, C, 1...) initializer. */
static int tg__onnx_unpool_offsets(const tg__onnx_site *s, int ns, int64_t plane, const char *idx,
                                   const char **out)
{
    const int64_t nc = tg_tensor_dim(s->xt, 1), zero = 0, step = nc * plane;
    int64_t starts[1 + TG_POOL_MAX_SPATIAL] = {0}, ends[1 + TG_POOL_MAX_SPATIAL],
            axes[1 + TG_POOL_MAX_SPATIAL], shape[2 + TG_POOL_MAX_SPATIAL] = {1, nc, 1, 1, 1};
    for (int a = 0; a <= ns; a++) {
        ends[a] = 1;
        axes[a] = 1 + a;
    }
    int64_t *coff = tg__malloc((size_t)nc * sizeof *coff);
    if (!coff) return TG_ENOMEM;
    for (int64_t c = 0; c < nc; c++) coff[c] = c * plane;
    const char *cname = tg__onnx_str(s->g, "%s/channel_offsets", s->scope);
    int rc = cname ? tg__onnx_init_raw(s->g, cname, TG__ONNX_INT64, ns + 2, shape, coff,
                                       sizeof *coff)
                   : TG_ENOMEM;
    free(coff);
    TG_TRY(rc);
    const char *st = tg__onnx_i64s(s, "slice_starts", ns + 1, starts);
    const char *en = tg__onnx_i64s(s, "slice_ends", ns + 1, ends);
    const char *ax = tg__onnx_i64s(s, "slice_axes", ns + 1, axes);
    const char *z = tg__onnx_str(s->g, "%s/zero", s->scope);
    const char *b = tg__onnx_str(s->g, "%s/batch_step", s->scope);
    if (!st || !en || !ax || !z || !b) return TG_ENOMEM;
    TG_TRY(tg__onnx_init_raw(s->g, z, TG__ONNX_INT64, 0, NULL, &zero, sizeof zero));
    TG_TRY(tg__onnx_init_raw(s->g, b, TG__ONNX_INT64, 0, NULL, &step, sizeof step));
    const char *t = NULL;
    tg__onnx_node *node = NULL;
    TG_TRY(tg__onnx_add(s->g, NULL, &t, s->scope, "Slice", 4,
                        (const char *const[]){idx, st, en, ax}));
    TG_TRY(tg__onnx_add(s->g, NULL, &t, s->scope, "Mul", 2, (const char *const[]){t, z}));
    TG_TRY(tg__onnx_add(s->g, NULL, &t, s->scope, "Add", 2, (const char *const[]){t, b}));
    TG_TRY(tg__onnx_add(s->g, &node, &t, s->scope, "CumSum", 2, (const char *const[]){t, z}));
    TG_TRY(tg__onnx_attr_int(s->g, node, "exclusive", 1));
    TG_TRY(tg__onnx_add(s->g, NULL, &t, s->scope, "Add", 2, (const char *const[]){idx, t}));
    return tg__onnx_add(s->g, NULL, out, s->scope, "Add", 2, (const char *const[]){t, cname});
}

int tg__onnx_emit_max_unpool(const tg__onnx_site *s, const char **y)
{
    int ns;
    tg_pool_params p;
    TG_TRY(tg_nn_max_unpool_params(s->m, &ns, &p));
    TG_TRY(tg__onnx_need_batched(s, ns, "MaxUnpool"));
    TG_ASSERT(s->n == 2 && s->xs && s->xs[1]);
    int64_t plane = 1, pads[2 * TG_POOL_MAX_SPATIAL];
    for (int a = 0; a < ns; a++) {
        plane *= tg_tensor_dim(s->yt, 2 + a);
        pads[a] = pads[ns + a] = p.padding[a];
    }
    const char *idx = NULL;
    TG_TRY(tg__onnx_unpool_offsets(s, ns, plane, s->xs[1], &idx));
    tg__onnx_node *n = NULL;
    TG_TRY(tg__onnx_add(s->g, &n, y, s->scope, "MaxUnpool", 2, (const char *const[]){s->x, idx}));
    TG_TRY(tg__onnx_attr_ints(s->g, n, "kernel_shape", ns, p.kernel));
    TG_TRY(tg__onnx_attr_ints(s->g, n, "strides", ns, p.stride));
    return tg__onnx_attr_ints(s->g, n, "pads", 2 * ns, pads);
}

int tg__onnx_inputs_max_unpool(const tg_module *m, const char *path, int n, tg_tensor *const *xs,
                               int *axes)
{
    const char *where = path[0] ? path : "<top>", *type = tg_module_type_name(m);
    TG_CHECK(n == 2, TG_EINVAL, "onnx_export: module '%s' (%s) takes 2 graph inputs (x, "
             "indices), not %d", where, type, n);
    TG_CHECK(tg_tensor_dtype(xs[0]) == TG_F32 && tg_tensor_dtype(xs[1]) == TG_I64, TG_EDTYPE,
             "onnx_export: module '%s' (%s) takes x f32 and indices i64, not %s and %s", where,
             type, tg_dtype_name(tg_tensor_dtype(xs[0])), tg_dtype_name(tg_tensor_dtype(xs[1])));
    axes[0] = axes[1] = axes[2] = 0;
    return TG_OK;
}

int tg__onnx_extra_max_pool(tg_module *m, const tg_onnx_options *opt, int n, tg_tensor *const *xs,
                            tg_tensor **ys, const char **names, int *axes)
{
    (void)opt;
    TG_TRY(tg_nn_pool_params(m, NULL, NULL));   /* the library's MaxPool: two outputs */
    if (tg_module_output_count(m) < 2) return 0;   /* no return_indices: y only */
    tg_tensor *r[2] = {NULL, NULL};
    TG_TRY(tg_module_forward_outputs(m, r, n, xs));
    tg_tensor_release(r[0]);
    ys[0] = r[1];
    names[0] = "indices";
    axes[0] = 0;
    return 1;
}
