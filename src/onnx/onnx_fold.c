/* src/onnx/onnx_fold.c - nn.Unfold and nn.Fold as ONNX nodes.
 *
 * Unfold is written as torch.onnx's im2col symbolic writes it: the image
 * zero-padded (Pad), its rows gathered block by block (Gather on H with
 * the (kh, bh) indices l*stride + i*dilation, in padded coordinates), then
 * its columns (Gather on W with the (kw, bw) ones), giving (N, C, kh, bh,
 * kw, bw); Transpose to (N, C, kh, kw, bh, bw) and Reshape to (N, C*kh*kw,
 * L).  Only copies, so ONNX Runtime gives tapegrad's values exactly.  An
 * unbatched (C, H, W) input takes the same nodes one rank lower.
 *
 * Fold sums overlapping blocks into the image: col2im, which ONNX has as
 * Col2Im from opset 18 only.  At opset 17 it is a ConvTranspose, since a
 * transposed convolution adds w[ci, co, i, j] x[ci, l] into image position
 * (bh_l*stride + i*dilation - pad, bw_l*stride + j*dilation - pad).  With
 * group = C, the input channel c*kh*kw + i*kw + j of group c and a weight
 * of 1 at tap (i, j) of that channel and 0 elsewhere, each block value
 * lands exactly where col2im puts it; output_padding fills the rows and
 * columns past the last block that output_size asks for (fewer than
 * stride). */
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

/* The ConvTranspose weight (C kh kw, 1, kh, kw) that scatters each input
 * channel to its own tap: w[c*K + q, 0, i, j] = (q == i*kw + j). */
static const char *tg__onnx_fold_kernel(const tg__onnx_site *s, int64_t c, int64_t kh,
                                        int64_t kw)
{
    const int64_t k = kh * kw;
    float *w = tg__malloc((size_t)(c * k * k) * sizeof *w);
    if (!w) return NULL;
    for (int64_t r = 0; r < c * k; r++)
        for (int64_t t = 0; t < k; t++) w[r * k + t] = (r % k == t) ? 1.0f : 0.0f;
    const char *name = tg__onnx_str(s->g, "%s/%s", s->scope, "taps");
    const int64_t shape[4] = {c * k, 1, kh, kw};
    int rc = name ? tg__onnx_init_raw(s->g, name, TG__ONNX_FLOAT, 4, shape, w, sizeof *w)
                  : TG_ENOMEM;
    free(w);
    return rc < 0 ? NULL : name;
}

int tg__onnx_emit_fold(const tg__onnx_site *s, const char **y)
{
    tg_fold_params p;
    int64_t osz[2];
    bool fold;
    TG_TRY(tg_nn_fold_params(s->m, &p, osz, &fold));
    TG_ASSERT(fold);
    const int nd = tg_tensor_ndim(s->xt), ynd = tg_tensor_ndim(s->yt);
    TG_ASSERT((nd == 2 || nd == 3) && ynd == nd + 1);
    const int64_t kk = p.kernel_size[0] * p.kernel_size[1];
    const int64_t ck = tg_tensor_dim(s->xt, nd - 2), c = ck / kk;
    int64_t blocks[2], opad[2];
    for (int a = 0; a < 2; a++) {
        const int64_t span = p.dilation[a] * (p.kernel_size[a] - 1) + 1;
        blocks[a] = (osz[a] + 2 * p.padding[a] - span) / p.stride[a] + 1;
        /* ConvTranspose's extent (b-1)*stride - 2*pad + span, short of
         * output_size by less than stride */
        opad[a] = osz[a] - ((blocks[a] - 1) * p.stride[a] - 2 * p.padding[a] + span);
        TG_ASSERT(opad[a] >= 0 && opad[a] < p.stride[a]);
    }
    TG_ASSERT(blocks[0] * blocks[1] == tg_tensor_dim(s->xt, nd - 1));
    /* (N, C kh kw, L) -> (N, C kh kw, bh, bw), 0 keeping the batch free;
     * unbatched (C kh kw, L) -> (1, C kh kw, bh, bw) */
    const int64_t four = 4, shape[4] = {nd == 3 ? 0 : 1, ck, blocks[0], blocks[1]};
    const char *sn = tg__onnx_fold_i64s(s, "blocks_shape", 1, &four, shape);
    const char *wn = tg__onnx_fold_kernel(s, c, p.kernel_size[0], p.kernel_size[1]);
    if (!sn || !wn) return TG_ENOMEM;
    const char *t = NULL;
    tg__onnx_node *n = NULL;
    TG_TRY(tg__onnx_add(s->g, NULL, &t, s->scope, "Reshape", 2, (const char *const[]){s->x, sn}));
    const char **ct = nd == 3 ? y : &t;
    TG_TRY(tg__onnx_add(s->g, &n, ct, s->scope, "ConvTranspose", 2,
                        (const char *const[]){t, wn}));
    const int64_t pads[4] = {p.padding[0], p.padding[1], p.padding[0], p.padding[1]};
    TG_TRY(tg__onnx_attr_int(s->g, n, "group", c));
    TG_TRY(tg__onnx_attr_ints(s->g, n, "kernel_shape", 2, p.kernel_size));
    TG_TRY(tg__onnx_attr_ints(s->g, n, "strides", 2, p.stride));
    TG_TRY(tg__onnx_attr_ints(s->g, n, "dilations", 2, p.dilation));
    TG_TRY(tg__onnx_attr_ints(s->g, n, "pads", 4, pads));
    TG_TRY(tg__onnx_attr_ints(s->g, n, "output_padding", 2, opad));
    if (nd == 3) return TG_OK;
    /* unbatched: (1, C, H, W) -> (C, H, W) */
    const int64_t three = 3, img[3] = {c, osz[0], osz[1]};
    const char *in = tg__onnx_fold_i64s(s, "image_shape", 1, &three, img);
    if (!in) return TG_ENOMEM;
    return tg__onnx_add(s->g, NULL, y, s->scope, "Reshape", 2, (const char *const[]){t, in});
}
