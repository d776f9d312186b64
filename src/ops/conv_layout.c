/* src/ops/conv_layout.c - conversions between PyTorch's conv_transpose weight
 * layout (C_in, C_out/groups, K...) and the kernel-first layouts
 *   KDHW_CI_CO: (K..., C_in, C_out/groups)
 *   KDHW_CO_CI: (K..., C_out/groups, C_in)
 * which store the spatial taps flipped: PyTorch tap k sits at K-1-k on each
 * axis (the form a direct, gather-style ConvTranspose kernel reads).  These
 * are plain copies, not recorded ops. */
#include <string.h>

#include "ops/conv_internal.h"

/* Flat index, in a kernel-first tensor of layout lay, of PyTorch element
 * (ci, co, k[0..n)); K are the kernel extents, nci/nco the channel extents. */
static int64_t kernel_first_index(tg_weight_layout lay, int n, const int64_t *K,
                                  const int64_t *k, int64_t ci, int64_t co, int64_t nci,
                                  int64_t nco)
{
    int64_t idx = 0;
    for (int a = 0; a < n; a++) idx = idx * K[a] + (K[a] - 1 - k[a]);
    return lay == TG_LAYOUT_KDHW_CI_CO ? (idx * nci + ci) * nco + co
                                       : (idx * nco + co) * nci + ci;
}

static int check_args(const char *op, tg_tensor **out, const tg_tensor *w,
                      tg_weight_layout lay, int nspatial)
{
    TG_CHECK(out && w, TG_EINVAL, "%s: out and w must not be NULL", op);
    TG_CHECK(nspatial >= 1 && nspatial <= 3, TG_EINVAL,
             "%s: nspatial=%d must be 1, 2 or 3", op, nspatial);
    TG_CHECK(w->ndim == nspatial + 2, TG_ESHAPE,
             "%s: w must be %d-D for nspatial=%d, got %d-D", op, nspatial + 2, nspatial,
             w->ndim);
    TG_CHECK(lay >= TG_LAYOUT_PYTORCH && lay <= TG_LAYOUT_KDHW_CO_CI, TG_EINVAL,
             "%s: layout=%d is not a tg_weight_layout (0..2)", op, (int)lay);
    return TG_OK;
}

/* Copies between layouts; to_pt says which way.  pt_shape is the PyTorch shape. */
static int convert(tg_tensor **out, tg_tensor *w, tg_weight_layout lay, int n, bool to_pt)
{
    int64_t pt[5], kf[5];
    const int64_t *ws = w->shape;
    if (to_pt) {
        /* w is kernel-first: (K..., X, Y). */
        pt[0] = lay == TG_LAYOUT_KDHW_CI_CO ? ws[n] : ws[n + 1];
        pt[1] = lay == TG_LAYOUT_KDHW_CI_CO ? ws[n + 1] : ws[n];
        memcpy(pt + 2, ws, (size_t)n * sizeof *ws);
    } else {
        memcpy(pt, ws, (size_t)(n + 2) * sizeof *ws);
        memcpy(kf, ws + 2, (size_t)n * sizeof *ws);
        kf[n] = lay == TG_LAYOUT_KDHW_CI_CO ? ws[0] : ws[1];
        kf[n + 1] = lay == TG_LAYOUT_KDHW_CI_CO ? ws[1] : ws[0];
    }
    const size_t esz = tg_dtype_size(w->dtype);
    const int64_t numel = tg_tensor_numel(w);
    int64_t ksz = 1;   /* taps per (ci, co) pair */
    for (int a = 0; a < n; a++) ksz *= pt[2 + a];
    tg_tensor *r = tg__tensor_empty(w->dtype, n + 2, to_pt ? pt : kf);
    char *src = tg__malloc((size_t)numel * esz);
    if (!r || !src) {
        tg_tensor_release(r);
        free(src);
        return TG_ENOMEM;
    }
    tg__gather(w, w->dtype, src);
    char *dst = tg_tensor_data(r);
    for (int64_t ci = 0; ci < pt[0]; ci++)
        for (int64_t co = 0; co < pt[1]; co++)
            for (int64_t t = 0; t < ksz; t++) {
                int64_t k[3], rem = t;
                for (int a = n - 1; a >= 0; a--) {
                    k[a] = rem % pt[2 + a];
                    rem /= pt[2 + a];
                }
                int64_t ip = (ci * pt[1] + co) * ksz + t;
                int64_t ik = kernel_first_index(lay, n, pt + 2, k, ci, co, pt[0], pt[1]);
                if (to_pt) memcpy(dst + ip * (int64_t)esz, src + ik * (int64_t)esz, esz);
                else memcpy(dst + ik * (int64_t)esz, src + ip * (int64_t)esz, esz);
            }
    free(src);
    *out = r;
    return TG_OK;
}

int tg_conv_weight_to_pytorch(tg_tensor **out, tg_tensor *w, tg_weight_layout from,
                              int nspatial)
{
    TG_TRY(check_args("conv_weight_to_pytorch", out, w, from, nspatial));
    if (from == TG_LAYOUT_PYTORCH) return tg_tensor_clone(out, w);
    return convert(out, w, from, nspatial, true);
}

int tg_conv_weight_from_pytorch(tg_tensor **out, tg_tensor *w, tg_weight_layout to,
                                int nspatial)
{
    TG_TRY(check_args("conv_weight_from_pytorch", out, w, to, nspatial));
    if (to == TG_LAYOUT_PYTORCH) return tg_tensor_clone(out, w);
    return convert(out, w, to, nspatial, false);
}
