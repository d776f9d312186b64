/* src/ops/norm_backward_ops.c - batch_norm's backward written with
 * differentiable ops, the one it runs under create_graph (norm.c has the op,
 * its forward and its fused backward, and the formulas).
 *
 * Training recomputes the batch statistics from the saved x on the tape, so
 * that the gradients' own gradients reach x through mean and invstd too;
 * eval reads mean and invstd as constants (the running buffers).
 */
#include "core/core.h"
#include "ops/norm_internal.h"
#include "autograd/tape.h"
#include "tapegrad/ops.h"

/* t as (1, C, 1, ...) for x's rank. */
static int as_channel(tg_tensor **out, tg_tensor *t, int nd)
{
    int64_t shape[TG_MAX_DIMS];
    for (int d = 0; d < nd; d++) shape[d] = d == 1 ? t->shape[0] : 1;
    return tg_reshape(out, t, nd, shape);
}

/* Sums t over every dim but 1, as a (C,) tensor of dtype dt. */
static int channel_sum(tg_tensor **out, tg_tensor *t, tg_dtype dt)
{
    int dims[TG_MAX_DIMS], k = 0;
    for (int d = 0; d < t->ndim; d++)
        if (d != 1) dims[k++] = d;
    tg_tensor *s = NULL;
    TG_TRY(tg_sum_dims(&s, t, k, dims, false));
    int rc = TG_OK;
    if (s->dtype != dt) {
        rc = tg_to_dtype(out, s, dt);
        tg_tensor_release(s);
    } else {
        *out = s;
    }
    return rc;
}

int tg__bn_backward_ops(tg_op_ctx *ctx, const void *params, tg_tensor *g, tg_tensor *x,
                        tg_tensor *w, tg_tensor *mean, tg_tensor *invstd, tg_tensor **gin)
{
    const tg__bn_params *p = params;
    enum { MU, XC, SQ, VAR, VE, INV, XHAT, WC, GW, M1, GX, M2, T1, T2, T3, DX, GXH, N_TMP };
    tg_tensor *t[N_TMP] = {NULL};
    const int nd = x->ndim;
    int dims[TG_MAX_DIMS], k = 0, rc;
    for (int d = 0; d < nd; d++)
        if (d != 1) dims[k++] = d;
    if (p->training) {   /* the batch statistics, recomputed from x on the tape */
        TG_TRY_GOTO(tg_mean_dims(&t[MU], x, k, dims, true));
        TG_TRY_GOTO(tg_sub(&t[XC], x, t[MU]));
        TG_TRY_GOTO(tg_mul(&t[SQ], t[XC], t[XC]));
        TG_TRY_GOTO(tg_mean_dims(&t[VAR], t[SQ], k, dims, true));
        TG_TRY_GOTO(tg_add_scalar(&t[VE], t[VAR], p->eps));
        TG_TRY_GOTO(tg_pow_scalar(&t[INV], t[VE], -0.5));
    } else {             /* constants from the running buffers */
        TG_TRY_GOTO(as_channel(&t[MU], mean, nd));
        TG_TRY_GOTO(tg_sub(&t[XC], x, t[MU]));
        TG_TRY_GOTO(as_channel(&t[INV], invstd, nd));
    }
    TG_TRY_GOTO(tg_mul(&t[XHAT], t[XC], t[INV]));
    if (w) {
        TG_TRY_GOTO(as_channel(&t[WC], w, nd));
        TG_TRY_GOTO(tg_mul(&t[GW], g, t[WC]));
    } else {
        t[GW] = tg_tensor_retain(g);
    }
    if (tg__ctx_needs_grad(ctx, 0)) {
        if (p->training) {   /* invstd (gw - mean(gw) - xhat mean(gw xhat)) */
            TG_TRY_GOTO(tg_mean_dims(&t[M1], t[GW], k, dims, true));
            TG_TRY_GOTO(tg_mul(&t[GX], t[GW], t[XHAT]));
            TG_TRY_GOTO(tg_mean_dims(&t[M2], t[GX], k, dims, true));
            TG_TRY_GOTO(tg_sub(&t[T1], t[GW], t[M1]));
            TG_TRY_GOTO(tg_mul(&t[T2], t[XHAT], t[M2]));
            TG_TRY_GOTO(tg_sub(&t[T3], t[T1], t[T2]));
            TG_TRY_GOTO(tg_mul(&t[DX], t[T3], t[INV]));
        } else {
            TG_TRY_GOTO(tg_mul(&t[DX], t[GW], t[INV]));
        }
        if (t[DX]->dtype != x->dtype) TG_TRY_GOTO(tg_to_dtype(&gin[0], t[DX], x->dtype));
        else gin[0] = tg_tensor_retain(t[DX]);
    }
    if (w && tg__ctx_needs_grad(ctx, 1)) {
        TG_TRY_GOTO(tg_mul(&t[GXH], g, t[XHAT]));
        TG_TRY_GOTO(channel_sum(&gin[1], t[GXH], w->dtype));
    }
    if (tg__ctx_needs_grad(ctx, 2)) TG_TRY_GOTO(channel_sum(&gin[2], g, ctx->in_meta[2].dtype));
done:
    for (int i = 0; i < N_TMP; i++) tg_tensor_release(t[i]);
    return rc;
}
