/* src/ops/conv_wgrad.c - the conv_weight_grad op:
 *   conv_weight_grad(z, u) = d<u, conv(z, W)>/dW,  W-shaped (C_u, C_z/groups, K...).
 * It is the weight gradient of conv (z = x, u = dy) and of conv_transpose
 * (z = dy, u = x).  Being bilinear, <G, conv_weight_grad(z, u)> = <u, conv(z, G)>
 * for every G, so its own backward with incoming gradient G is
 *   dz = conv_transpose(u, G)   (output_padding chosen so the extent is z's),
 *   du = conv(z, G)             (cropped to u's extents).
 * u's extents may be shorter than conv's output of z by what output_padding
 * can absorb (the conv_transpose case with output_padding >= stride); the
 * missing output positions simply do not contribute. */
#include <string.h>

#include "ops/conv_internal.h"
#include "tapegrad/ops.h"

typedef struct wgrad_params {
    tg_conv_params p;
    int wndim;
    int64_t wshape[5];
} wgrad_params;

static int check_inputs(const char *op, const tg_tensor *z, const tg_tensor *u,
                        const wgrad_params *wp)
{
    TG_CHECK(z && u, TG_EINVAL, "%s: z and u must not be NULL", op);
    TG_CHECK(z->ndim >= 3 && z->ndim <= 5 && u->ndim == z->ndim, TG_ESHAPE,
             "%s: z and u must both be 3-D, 4-D or 5-D, got %d-D and %d-D", op, z->ndim,
             u->ndim);
    TG_CHECK(tg_dtype_is_float(z->dtype) && u->dtype == z->dtype, TG_EDTYPE,
             "%s: z and u must have the same float dtype, got %s and %s", op,
             tg_dtype_name(z->dtype), tg_dtype_name(u->dtype));
    TG_CHECK(wp->wndim == z->ndim, TG_ESHAPE, "%s: wndim=%d must equal z's rank %d", op,
             wp->wndim, z->ndim);
    for (int a = 0; a < wp->wndim; a++)
        TG_CHECK(wp->wshape[a] >= 1, TG_ESHAPE, "%s: wshape[%d]=%lld must be >= 1", op, a,
                 (long long)wp->wshape[a]);
    const int64_t G = wp->p.groups;
    TG_CHECK(G >= 1 && wp->wshape[0] % G == 0, TG_EINVAL,
             "%s: groups=%lld must be >= 1 and divide wshape[0]=%lld", op, (long long)G,
             (long long)wp->wshape[0]);
    TG_CHECK(z->shape[0] == u->shape[0], TG_ESHAPE, "%s: z and u batch %lld != %lld", op,
             (long long)z->shape[0], (long long)u->shape[0]);
    TG_CHECK(u->shape[1] == wp->wshape[0], TG_ESHAPE,
             "%s: u's channels %lld must equal wshape[0]=%lld", op, (long long)u->shape[1],
             (long long)wp->wshape[0]);
    TG_CHECK(z->shape[1] == wp->wshape[1] * G, TG_ESHAPE,
             "%s: z's channels %lld must equal wshape[1]*groups=%lld", op,
             (long long)z->shape[1], (long long)(wp->wshape[1] * G));
    return TG_OK;
}

/* u's extent Su must be one conv_transpose of Su can map back to z's Sz:
 * base = (Su-1)*s - lo - hi + d*(K-1) + 1 <= Sz < base + max(s, d). */
static int check_extents(const char *op, const tg_tensor *z, const tg_tensor *u,
                         const wgrad_params *wp)
{
    const tg_conv_params *p = &wp->p;
    for (int a = 0; a < z->ndim - 2; a++) {
        const int64_t s = p->stride[a], d = p->dilation[a], su = u->shape[2 + a],
                      sz = z->shape[2 + a];
        int64_t base = (su - 1) * s - p->padding[a][0] - p->padding[a][1] +
                       d * (wp->wshape[2 + a] - 1) + 1;
        TG_CHECK(su >= 1 && sz >= 1 && base <= sz && sz < base + (s > d ? s : d), TG_ESHAPE,
                 "%s: u extent %lld on axis %d is not conv's output extent for z extent %lld",
                 op, (long long)su, a, (long long)sz);
    }
    return TG_OK;
}

static int wgrad_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                         const void *params)
{
    const wgrad_params *wp = params;
    tg_tensor *z = in[0], *u = in[1];
    TG_ASSERT(n == 2);
    const char *op = "conv_weight_grad";
    TG_TRY(check_inputs(op, z, u, wp));
    TG_TRY(tg__conv_check_params(op, z->ndim - 2, &wp->p, false));
    TG_TRY(check_extents(op, z, u, wp));
    const int nsp = z->ndim - 2;
    tg__conv_geom g = {.nsp = nsp, .batch = z->shape[0], .groups = wp->p.groups,
                       .c_img = z->shape[1], .c_col = u->shape[1]};
    for (int a = 0; a < 3; a++) {
        int ca = a - (3 - nsp);   /* the caller's axis, < 0 for a padding axis */
        g.img[a] = ca < 0 ? 1 : z->shape[2 + ca];
        g.col[a] = ca < 0 ? 1 : u->shape[2 + ca];
        g.k[a] = ca < 0 ? 1 : wp->wshape[2 + ca];
        g.stride[a] = ca < 0 ? 1 : wp->p.stride[ca];
        g.dil[a] = ca < 0 ? 1 : wp->p.dilation[ca];
        g.pad[a] = ca < 0 ? 0 : wp->p.padding[ca][0];
    }
    const tg_dtype cdt = tg__compute_dtype(z->dtype);
    tg_tensor *dw = tg__tensor_uninit(z->dtype, wp->wndim, wp->wshape);
    const bool own = !dw || dw->dtype != cdt;
    void *db = !dw ? NULL
               : own ? tg__work_alloc((size_t)tg_tensor_numel(dw) * tg_dtype_size(cdt))
                     : tg_tensor_data(dw);
    void *zo, *uo;   /* owned copies, when z, u are not usable in place */
    const void *zb, *ub;
    tg__conv_acts(&g, cdt, z, u, &zb, &ub, &zo, &uo);
    int rc = TG_ENOMEM;
    if (!db || !zb || !ub) goto done;
    rc = tg__conv_weight_grad_raw(cdt, &g, zb, ub, db);
    if (rc < 0) goto done;
    if (own) tg__scatter(dw, cdt, db);
    if (ctx) {
        tg__ctx_save(ctx, z);
        tg__ctx_save(ctx, u);
    }
    *out = dw;
    dw = NULL;
done:
    if (own) tg__work_free(db);
    tg_tensor_release(dw);
    tg__work_free(zo);
    tg__work_free(uo);
    return rc;
}

static int wgrad_backward(tg_ctx *ctx, tg_tensor *gw, tg_tensor **gin)
{
    const wgrad_params *wp = tg__ctx_params(ctx);
    tg_conv_params q = wp->p;
    tg_tensor *z, *u;
    TG_TRY(tg__ctx_saved(ctx, 0, &z));
    TG_TRY(tg__ctx_saved(ctx, 1, &u));
    const int nsp = z->ndim - 2;
    int rc = TG_OK;
    if (tg__ctx_needs_grad(ctx, 0)) {
        rc = tg_conv_transpose_output_padding_for(&q, nsp, u->shape + 2, wp->wshape + 2,
                                                  z->shape + 2);
        if (rc == TG_OK) rc = tg_conv_transpose(&gin[0], u, gw, NULL, &q);
    }
    if (rc == TG_OK && tg__ctx_needs_grad(ctx, 1)) {
        tg_tensor *du = NULL;
        rc = tg_conv(&du, z, gw, NULL, &q);
        if (rc == TG_OK) rc = tg__conv_crop(&gin[1], du, nsp, u->shape + 2);
        tg_tensor_release(du);
    }
    if (rc < 0)
        for (int i = 0; i < 2; i++) {
            tg_tensor_release(gin[i]);
            gin[i] = NULL;
        }
    return rc;
}

const tg_op_schema tg__conv_weight_grad_schema = {
    .name = "conv_weight_grad", .arity = 2, .amp = TG_AMP_PROMOTE,
    .forward = wgrad_forward, .backward = wgrad_backward, .double_backward = true,
    .vjp = "the adjoint convolutions of g with the other input"};

int tg_conv_weight_grad(tg_tensor **out, tg_tensor *z, tg_tensor *u, int wndim,
                        const int64_t *wshape, const tg_conv_params *p)
{
    TG_CHECK(out, TG_EINVAL, "conv_weight_grad: out must not be NULL");
    TG_CHECK(wshape && wndim >= 3 && wndim <= 5, TG_EINVAL,
             "conv_weight_grad: wshape must be non-NULL with wndim 3..5, got %d", wndim);
    wgrad_params wp = {.wndim = wndim};
    if (p) wp.p = *p;
    else tg__conv_params_default(&wp.p);
    /* The activation and algorithm do not apply to a weight gradient. */
    wp.p.act = TG_ACT_NONE;
    wp.p.algo = TG_CONV_ALGO_DEFAULT;
    memcpy(wp.wshape, wshape, (size_t)wndim * sizeof *wshape);
    tg_tensor *in[2] = {z, u};
    return tg_op_call(&tg__conv_weight_grad_schema, out, 2, in, &wp, sizeof wp);
}
