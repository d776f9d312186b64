/* src/onnx/onnx_fold.c - nn.Unfold as ONNX nodes, and nn.Fold refused.
 *
 * Unfold is written as torch.onnx's im2col symbolic writes it: the image
 * zero-padded (Pad), its rows gathered block by block (Gather on H with
 * the (kh, bh) indices l*stride + i*dilation, in padded coordinates), then
 * its columns (Gather on W with the (kw, bw) ones), giving (N, C, kh, bh,
 * kw, bw); Transpose to (N, C, kh, kw, bh, bw) and Reshape to (N, C*kh*kw,
 * L).  Only copies, so ONNX Runtime gives tapegrad's values exactly.  An
 * unbatched (C, H, W) input takes the same nodes one rank lower.
 *
 * Fold sums overlapping blocks into the image, which ONNX expresses with
 * Col2Im, an opset 18 operator; the export writes opset 17 (as torch 1.13
 * cannot export Fold below 18), so a Fold is refused. */
#include <string.h>

#include "core/core.h"
#include "onnx/onnx_graph.h"
#include "tapegrad/nn.h"

/* An int64 initializer "<scope>/<what>" of the given shape (copied). */
static const char *tg__onnx_fold_i64s(const tg__onnx_site *s, const char *what, int ndim,
                                      const int64_t *shape, const int64_t *v)
{
    const char *name = tg__onnx_str(s->g, "%s/%s", s->scope, what);
    if (!name || tg__onnx_init_raw(s->g, name, TG__ONNX_INT64, ndim, shape, v, sizeof *v) < 0)
        return NULL;
    return name;
}

/* The (k, b) indices along one axis: idx[i][l] = l*stride + i*dilation. */
static const char *tg__onnx_fold_taps(const tg__onnx_site *s, const char *what, int64_t k,
                                      int64_t b, int64_t stride, int64_t dil)
{
    int64_t *idx = tg__malloc((size_t)(k * b) * sizeof *idx);
    if (!idx) return NULL;
    for (int64_t i = 0; i < k; i++)
        for (int64_t l = 0; l < b; l++) idx[i * b + l] = l * stride + i * dil;
    const char *name = tg__onnx_fold_i64s(s, what, 2, (const int64_t[]){k, b}, idx);
    free(idx);
    return name;
}

int tg__onnx_emit_unfold(const tg__onnx_site *s, const char **y)
{
    tg_fold_params p;
    bool fold;
    TG_TRY(tg_nn_fold_params(s->m, &p, NULL, &fold));
    TG_ASSERT(!fold);
    const int nd = tg_tensor_ndim(s->xt), ynd = tg_tensor_ndim(s->yt);
    TG_ASSERT((nd == 3 || nd == 4) && ynd == nd - 1);
    const int64_t ck = tg_tensor_dim(s->yt, ynd - 2), l = tg_tensor_dim(s->yt, ynd - 1);
    /* the blocks per axis, from the padded extents */
    int64_t blocks[2];
    for (int a = 0; a < 2; a++)
        blocks[a] = (tg_tensor_dim(s->xt, nd - 2 + a) + 2 * p.padding[a] -
                     p.dilation[a] * (p.kernel_size[a] - 1) - 1) / p.stride[a] + 1;
    TG_ASSERT(blocks[0] * blocks[1] == l);
    const char *x = s->x;
    if (p.padding[0] || p.padding[1]) {
        int64_t pads[8] = {0};
        const int64_t n2 = 2 * nd;
        pads[nd - 2] = pads[2 * nd - 2] = p.padding[0];
        pads[nd - 1] = pads[2 * nd - 1] = p.padding[1];
        const char *pn = tg__onnx_fold_i64s(s, "pads", 1, &n2, pads);
        if (!pn) return TG_ENOMEM;
        TG_TRY(tg__onnx_add(s->g, NULL, &x, s->scope, "Pad", 2, (const char *const[]){x, pn}));
    }
    const char *rows = tg__onnx_fold_taps(s, "rows", p.kernel_size[0], blocks[0], p.stride[0],
                                          p.dilation[0]);
    const char *cols = tg__onnx_fold_taps(s, "cols", p.kernel_size[1], blocks[1], p.stride[1],
                                          p.dilation[1]);
    if (!rows || !cols) return TG_ENOMEM;
    tg__onnx_node *n = NULL;
    const char *t = NULL;
    /* (..., C, Hp, Wp) -> (..., C, kh, bh, Wp) -> (..., C, kh, bh, kw, bw) */
    TG_TRY(tg__onnx_add(s->g, &n, &t, s->scope, "Gather", 2, (const char *const[]){x, rows}));
    TG_TRY(tg__onnx_attr_int(s->g, n, "axis", nd - 2));
    TG_TRY(tg__onnx_add(s->g, &n, &t, s->scope, "Gather", 2, (const char *const[]){t, cols}));
    TG_TRY(tg__onnx_attr_int(s->g, n, "axis", nd));
    /* -> (..., C, kh, kw, bh, bw) */
    static const int64_t perm4[6] = {0, 1, 2, 4, 3, 5}, perm3[5] = {0, 1, 3, 2, 4};
    TG_TRY(tg__onnx_add(s->g, &n, &t, s->scope, "Transpose", 1, (const char *const[]){t}));
    TG_TRY(tg__onnx_attr_ints(s->g, n, "perm", nd + 2, nd == 4 ? perm4 : perm3));
    /* -> (N, C*kh*kw, L), 0: the input's batch, so that it stays free */
    const int64_t shape[3] = {0, ck, l}, ns = ynd;
    const char *sn = tg__onnx_fold_i64s(s, "shape", 1, &ns, nd == 4 ? shape : shape + 1);
    if (!sn) return TG_ENOMEM;
    return tg__onnx_add(s->g, NULL, y, s->scope, "Reshape", 2, (const char *const[]){t, sn});
}

int tg__onnx_refuse_fold(const tg_module *m, const char *path)
{
    (void)m;
    return tg__error(TG_EUNSUPPORTED,
                     "onnx_export: module '%s' (Fold) is not supported: summing the blocks "
                     "into the image takes ONNX's Col2Im, an opset 18 operator, and the export "
                     "writes opset 17", path[0] ? path : "<top>");
}
