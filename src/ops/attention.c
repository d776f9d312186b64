/* src/ops/attention.c - scaled dot-product attention (tapegrad/attention.h),
 * torch 1.13's _scaled_dot_product_attention, made of differentiable ops:
 *   scores = (q / sqrt(E)) @ k^T           (B, L, S), B the leading dims
 *   scores = scores + mask, or masked_fill(scores, mask, -inf) for u8
 *   a = dropout(softmax(scores, -1)),  out = a @ v   (B, L, Ev)
 * tg_matmul takes (B, M, K) x (B, K, N), so the leading dims are flattened
 * into one batch dim around each product.  When no weights and no gradient
 * are wanted and no dropout draws, one fused kernel computes the same
 * (src/ops/attention_fast.c). */
#include <math.h>
#include <string.h>

#include "core/core.h"
#include "ops/attention_internal.h"
#include "tapegrad/attention.h"
#include "tapegrad/ops.h"
#include "tapegrad/registry.h"
#include "tapegrad/scope.h"

#define OP "scaled_dot_product_attention"

/* Whether mask (ndim <= nd) broadcasts to shape (nd dims). */
static bool broadcasts(const tg_tensor *mask, int nd, const int64_t *shape)
{
    if (mask->ndim > nd) return false;
    for (int i = 1; i <= mask->ndim; i++) {
        int64_t e = mask->shape[mask->ndim - i];
        if (e != 1 && e != shape[nd - i]) return false;
    }
    return true;
}

static int check_args(const tg_tensor *q, const tg_tensor *k, const tg_tensor *v,
                      const tg_attention_opts *o)
{
    char sq[96], sk[96], sv[96];
    tg_shape_str(sq, sizeof sq, q->ndim, q->shape);
    tg_shape_str(sk, sizeof sk, k->ndim, k->shape);
    tg_shape_str(sv, sizeof sv, v->ndim, v->shape);
    /* inside autocast the products cast their operands, as torch's bmm */
    const bool amp = tg_autocast_active(NULL);
    TG_CHECK(tg_dtype_is_float(q->dtype) && tg_dtype_is_float(k->dtype) &&
                 tg_dtype_is_float(v->dtype) &&
                 (amp || (k->dtype == q->dtype && v->dtype == q->dtype)),
             TG_EDTYPE, OP ": q, k and v are %s, %s and %s; they must be of one float dtype%s",
             tg_dtype_name(q->dtype), tg_dtype_name(k->dtype), tg_dtype_name(v->dtype),
             amp ? " (inside autocast: float dtypes)" : "");
    const int nd = q->ndim;
    TG_CHECK(nd >= 2 && nd <= 4 && k->ndim == nd && v->ndim == nd, TG_ESHAPE,
             OP ": q %s, k %s and v %s must have one rank, 2, 3 or 4 ((..., L, E))", sq, sk, sv);
    for (int i = 0; i < nd - 2; i++)
        TG_CHECK(k->shape[i] == q->shape[i] && v->shape[i] == q->shape[i], TG_ESHAPE,
                 OP ": q %s, k %s and v %s must have the same leading dims", sq, sk, sv);
    TG_CHECK(k->shape[nd - 1] == q->shape[nd - 1], TG_ESHAPE,
             OP ": k %s must have q %s's features E=%lld in its last dim", sk, sq,
             (long long)q->shape[nd - 1]);
    TG_CHECK(v->shape[nd - 2] == k->shape[nd - 2], TG_ESHAPE,
             OP ": v %s must have k %s's length S=%lld in dim %d", sv, sk,
             (long long)k->shape[nd - 2], nd - 2);
    TG_CHECK(o->dropout_p >= 0.0 && o->dropout_p <= 1.0, TG_EINVAL,
             OP ": dropout_p=%g must be in [0, 1]", o->dropout_p);
    TG_CHECK(!o->training || o->dropout_p == 0.0 || o->rng != NULL, TG_EINVAL,
             OP ": rng must not be NULL for dropout_p=%g in training", o->dropout_p);
    const tg_tensor *m = o->attn_mask;
    if (!m) return TG_OK;
    TG_CHECK(m->dtype == TG_U8 || m->dtype == q->dtype || (amp && tg_dtype_is_float(m->dtype)),
             TG_EDTYPE, OP ": attn_mask is %s; it must be u8 (torch's bool) or q's dtype %s",
             tg_dtype_name(m->dtype), tg_dtype_name(q->dtype));
    int64_t ss[TG_MAX_DIMS];
    memcpy(ss, q->shape, sizeof(int64_t) * (size_t)nd);
    ss[nd - 1] = k->shape[nd - 2];
    char sm[96], sc[96];
    tg_shape_str(sm, sizeof sm, m->ndim, m->shape);
    tg_shape_str(sc, sizeof sc, nd, ss);
    TG_CHECK(broadcasts(m, nd, ss), TG_ESHAPE,
             OP ": attn_mask %s must broadcast to the scores' shape %s (..., L, S)", sm, sc);
    return TG_OK;
}

/* x (..., R, C) as (B, R, C), B the product of the leading dims. */
static int as_batch(tg_tensor **out, tg_tensor *x)
{
    const int nd = x->ndim;
    int64_t s[3] = {1, x->shape[nd - 2], x->shape[nd - 1]};
    for (int i = 0; i < nd - 2; i++) s[0] *= x->shape[i];
    return tg_reshape(out, x, 3, s);
}

/* (B, R, C) back to the leading dims of like, (..., R, C). */
static int from_batch(tg_tensor **out, tg_tensor *x3, const tg_tensor *like)
{
    int64_t s[TG_MAX_DIMS];
    memcpy(s, like->shape, sizeof(int64_t) * (size_t)like->ndim);
    s[like->ndim - 2] = x3->shape[1];
    s[like->ndim - 1] = x3->shape[2];
    return tg_reshape(out, x3, like->ndim, s);
}

static int attention(tg_tensor **out, tg_tensor **weights, tg_tensor *q, tg_tensor *k,
                     tg_tensor *v, const tg_attention_opts *o)
{
    enum { QS, Q3, K3, KT, S3, S, SM, A, AD, A3, V3, O3, N_TMP };
    tg_tensor *t[N_TMP] = {NULL};
    int rc;
    /* torch divides q by sqrt(E) before the product (not the scores) */
    TG_TRY_GOTO(tg_div_scalar(&t[QS], q, sqrt((double)q->shape[q->ndim - 1])));
    TG_TRY_GOTO(as_batch(&t[Q3], t[QS]));
    TG_TRY_GOTO(as_batch(&t[K3], k));
    TG_TRY_GOTO(tg_transpose(&t[KT], t[K3], 1, 2));
    TG_TRY_GOTO(tg_matmul(&t[S3], t[Q3], t[KT]));   /* (B, L, S) */
    TG_TRY_GOTO(from_batch(&t[S], t[S3], q));
    if (!o->attn_mask)
        t[SM] = tg_tensor_retain(t[S]);
    else if (o->attn_mask->dtype == TG_U8)
        TG_TRY_GOTO(tg_masked_fill(&t[SM], t[S], o->attn_mask, -INFINITY));
    else
        TG_TRY_GOTO(tg_add(&t[SM], t[S], o->attn_mask));
    TG_TRY_GOTO(tg_softmax(&t[A], t[SM], -1));
    TG_TRY_GOTO(tg_dropout(&t[AD], t[A], o->dropout_p, o->training, o->rng));
    TG_TRY_GOTO(as_batch(&t[A3], t[AD]));
    TG_TRY_GOTO(as_batch(&t[V3], v));
    TG_TRY_GOTO(tg_matmul(&t[O3], t[A3], t[V3]));   /* (B, L, Ev) */
    TG_TRY_GOTO(from_batch(out, t[O3], q));
    if (weights) *weights = tg_tensor_retain(t[AD]);
done:
    for (int i = 0; i < N_TMP; i++) tg_tensor_release(t[i]);
    return rc;
}

int tg_scaled_dot_product_attention(tg_tensor **out, tg_tensor **weights, tg_tensor *q,
                                    tg_tensor *k, tg_tensor *v, const tg_attention_opts *opts)
{
    TG_CHECK(out != NULL, TG_EINVAL, OP ": out must not be NULL");
    TG_CHECK(q != NULL && k != NULL && v != NULL, TG_EINVAL, OP ": q, k and v must not be NULL");
    TG_CHECK(weights != out, TG_EINVAL, OP ": out and weights must be two different places");
    const tg_attention_opts o = opts ? *opts : (tg_attention_opts)TG_ATTENTION_OPTS_INIT;
    TG_TRY(check_args(q, k, v, &o));
    tg_tensor *y = NULL, *w = NULL;
    tg__lib_enter();
    tg_dtype amp;   /* inside autocast of a half dtype, f32 q, k, v go fused cast to it */
    const bool cast = !weights && tg_autocast_active(&amp) && q->dtype == TG_F32 &&
                      tg__attention_fast_applies_as(q, k, v, &o, amp);
    int rc = cast ? tg__attention_fast_cast(&y, q, k, v, o.attn_mask, amp)
             : !weights && tg__attention_fast_applies(q, k, v, &o)
                 ? tg__attention_fast(&y, q, k, v, o.attn_mask)
                 : attention(&y, weights ? &w : NULL, q, k, v, &o);
    tg__lib_leave();
    return tg__scope_capture_pair(out, y, weights, w, rc);
}
