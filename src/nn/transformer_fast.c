/* src/nn/transformer_fast.c - TransformerEncoderLayer's inference forward,
 * fused in the spirit of torch's _transformer_encoder_layer_fwd
 * (src/nn/transformer_internal.h).  With x's rows in their memory order
 * (T rows of E), F = dim_feedforward and LN1, LN2 norm1, norm2:
 *   post-norm                              norm_first
 *   A = attention(x)        (T, E)         N = LN1(x)                 (T, E)
 *   H = A Wo^T              (T, E)         A = attention(N)
 *   H = LN1(x + (H + bo))   one pass       H = A Wo^T
 *                                          H = x + (H + bo), N = LN2(H)  one pass
 *   Fh = act(H W1^T + b1)   (T, F)         Fh = act(N W1^T + b1)      (T, F)
 *   A = Fh W2^T                            A = Fh W2^T
 *   A = LN2(H + (A + b2))   one pass       A = H + (A + b2)           one pass
 * where attention is MultiheadAttention's fused self-attention up to its
 * out_proj (tg__nn_mha_self_attend), each product one GEMM and each "one
 * pass" one walk over the rows (src/ops/rows_fused.c).  The op by op path
 * makes a tensor and a pass for each bias, activation, residual add and
 * LayerNorm; here A, H, Fh (and N with norm_first) serve the layer and
 * nothing is recorded.  Dropouts are identities in eval.  The numbers are the op
 * by op path's steps, except that a bias is added after the GEMM's sum
 * instead of before it (the last bit may differ) and that the GEMMs may
 * block their sums otherwise; tests/test_encoder_fast.c holds the two to
 * 1e-5 (f32) and 1e-12 (f64) relative. */
#include <stdlib.h>
#include <string.h>

#include "nn/mha_internal.h"
#include "nn/module_internal.h"
#include "nn/transformer_internal.h"
#include "ops/rows_fused_internal.h"
#include "tapegrad/autograd.h"
#include "tapegrad/ops.h"
#include "tapegrad/registry.h"

static _Thread_local uint64_t fast_calls;

uint64_t tg__transformer_encoder_fast_calls(void) { return fast_calls; }

/* What the fused forward reads from the layer's children (borrowed). */
typedef struct enc_parts {
    tg_module *sa;
    tg_tensor *wo, *bo, *w1, *b1, *w2, *b2;
    tg_tensor *g1, *c1, *g2, *c2;   /* norm1's and norm2's weight and bias */
    double eps1, eps2;
    tg_activation act;
} enc_parts;

/* Whether t is NULL or a contiguous tensor of dtype dt and rank ndim. */
static bool plain(const tg_tensor *t, tg_dtype dt, int ndim)
{
    return !t || (t->dtype == dt && t->ndim == ndim && tg_tensor_is_contiguous(t));
}

/* lin's weight (out, in) and bias (out, or NULL) when lin is a Linear with
 * plain tensors of dtype dt. */
static bool linear_part(tg_module *lin, tg_dtype dt, int64_t out, int64_t in, tg_tensor **w,
                        tg_tensor **b)
{
    if (!lin || lin->vt != &tg__nn_linear_vt) return false;
    *w = tg__module_local(lin, "weight");
    *b = tg__module_local(lin, "bias");
    return *w && plain(*w, dt, 2) && (*w)->shape[0] == out && (*w)->shape[1] == in &&
           plain(*b, dt, 1) && (!*b || (*b)->shape[0] == out);
}

/* norm's weight, bias (either NULL without affine) and eps when norm is a
 * LayerNorm over the last dim of e features with plain tensors of dt. */
static bool norm_part(tg_module *norm, tg_dtype dt, int64_t e, tg_tensor **g, tg_tensor **c,
                      double *eps)
{
    int n = 0;
    int64_t shape[TG_MAX_DIMS];
    if (!norm || tg_nn_layer_norm_params(norm, &n, shape, eps, NULL) != TG_OK || n != 1 ||
        shape[0] != e)
        return false;
    *g = tg__module_local(norm, "weight");
    *c = tg__module_local(norm, "bias");
    return plain(*g, dt, 1) && plain(*c, dt, 1);
}

/* tg__module_visit: stops (TG_EUNSUPPORTED, no message: a signal, not an
 * error) at a module in training, with a computed tensor (its forward
 * would compute it first) or, when *(bool *)user, with a parameter that
 * requires a gradient. */
static int not_plain_eval(tg_module *m, void *user)
{
    if (m->training || m->n_computed > 0) return TG_EUNSUPPORTED;
    if (*(const bool *)user)
        for (int i = 0; i < m->n_params; i++)
            if (tg_tensor_requires_grad(m->params[i].t)) return TG_EUNSUPPORTED;
    return TG_OK;
}

/* Whether the fused forward applies to layer m and x (dtype dt, e
 * features), filling p; the conditions are in transformer_internal.h. */
static bool applies(tg_module *m, tg_tensor *x, tg_tensor *mask, tg_tensor *kpm, enc_parts *p)
{
    const char *env = getenv("TG_ENCODER_FAST");
    if (env && strcmp(env, "0") == 0) return false;
    const tg_dtype dt = x->dtype;
    if ((dt != TG_F32 && dt != TG_F64) || tg_autocast_active(NULL)) return false;
    bool grad = tg_grad_enabled();
    if (grad && (tg_tensor_requires_grad(x) || (mask && tg_tensor_requires_grad(mask)) ||
                 (kpm && tg_tensor_requires_grad(kpm))))
        return false;
    if (tg__module_visit(m, not_plain_eval, &grad) != TG_OK) return false;
    const int64_t e = x->shape[x->ndim - 1];
    tg_module *lin1 = tg_module_child(m, "linear1");
    const tg_tensor *w1 = lin1 ? tg__module_local(lin1, "weight") : NULL;
    const int64_t f = w1 && w1->ndim == 2 ? w1->shape[0] : 0;
    static const char *const drops[3] = {"dropout", "dropout1", "dropout2"};
    for (int i = 0; i < 3; i++)
        if (tg_nn_dropout_params(tg_module_child(m, drops[i]), NULL, NULL) != TG_OK) return false;
    tg_module *act = tg_module_child(m, "activation");
    p->sa = tg_module_child(m, "self_attn");
    if (!act || tg_nn_activation_params(act, &p->act, NULL) != TG_OK ||
        (p->act != TG_ACT_RELU && p->act != TG_ACT_GELU) || !p->sa ||
        tg_nn_multihead_attention_params(p->sa, NULL, NULL, NULL) != TG_OK)
        return false;
    return f > 0 && linear_part(tg_module_child(p->sa, "out_proj"), dt, e, e, &p->wo, &p->bo) &&
           linear_part(lin1, dt, f, e, &p->w1, &p->b1) &&
           linear_part(tg_module_child(m, "linear2"), dt, e, f, &p->w2, &p->b2) &&
           norm_part(tg_module_child(m, "norm1"), dt, e, &p->g1, &p->c1, &p->eps1) &&
           norm_part(tg_module_child(m, "norm2"), dt, e, &p->g2, &p->c2, &p->eps2);
}

/* The layer on the fused path: xc contiguous, x2 its (T, E) view. */
static int fused(const enc_parts *p, bool pre, tg_tensor **y, tg_tensor *xc, tg_tensor *x2,
                 const tg_nn_mha_forward_opts *fo)
{
    const tg_dtype dt = xc->dtype;
    const int64_t rows = x2->shape[0], e = x2->shape[1], f = p->w1->shape[0];
    enum { A, H, N, N3, FH, N_TMP };
    tg_tensor *t[N_TMP] = {NULL};
    int rc = TG_ENOMEM;
    if (!(t[H] = tg__tensor_uninit(dt, 2, (int64_t[]){rows, e})) ||
        !(t[FH] = tg__tensor_uninit(dt, 2, (int64_t[]){rows, f})) ||
        (pre && !(t[N] = tg__tensor_uninit(dt, 2, (int64_t[]){rows, e}))))
        goto done;
    if (pre) {   /* N = LN1(x); A = attention(N) */
        tg__add_norm_rows_run(&(tg__add_norm_rows){.h = x2, .weight = p->g1, .ln_bias = p->c1,
                                                   .eps = p->eps1, .ln = t[N]});
        TG_TRY_GOTO(tg_reshape(&t[N3], t[N], xc->ndim, xc->shape));
        TG_TRY_GOTO(tg__nn_mha_self_attend(&t[A], p->sa, t[N3], fo));
    } else {
        TG_TRY_GOTO(tg__nn_mha_self_attend(&t[A], p->sa, xc, fo));
    }
    TG_TRY_GOTO(tg__linear_act_into(t[H], t[A], p->wo, NULL, TG_ACT_NONE));
    if (pre)   /* H = x + (H + bo), the residual; N = LN2(H) */
        tg__add_norm_rows_run(&(tg__add_norm_rows){.h = t[H], .bias = p->bo, .res = x2,
                                                   .sum = t[H], .weight = p->g2,
                                                   .ln_bias = p->c2, .eps = p->eps2,
                                                   .ln = t[N]});
    else   /* H = LN1(x + (H + bo)) */
        tg__add_norm_rows_run(&(tg__add_norm_rows){.h = t[H], .bias = p->bo, .res = x2,
                                                   .weight = p->g1, .ln_bias = p->c1,
                                                   .eps = p->eps1, .ln = t[H]});
    TG_TRY_GOTO(tg__linear_act_into(t[FH], pre ? t[N] : t[H], p->w1, p->b1, p->act));
    TG_TRY_GOTO(tg__linear_act_into(t[A], t[FH], p->w2, NULL, TG_ACT_NONE));
    if (pre)   /* A = H + (A + b2) */
        tg__add_norm_rows_run(&(tg__add_norm_rows){.h = t[A], .bias = p->b2, .res = t[H],
                                                   .sum = t[A]});
    else   /* A = LN2(H + (A + b2)) */
        tg__add_norm_rows_run(&(tg__add_norm_rows){.h = t[A], .bias = p->b2, .res = t[H],
                                                   .weight = p->g2, .ln_bias = p->c2,
                                                   .eps = p->eps2, .ln = t[A]});
    rc = tg_reshape(y, t[A], xc->ndim, xc->shape);
done:
    for (int i = 0; i < N_TMP; i++) tg_tensor_release(t[i]);
    return rc;
}

int tg__transformer_encoder_fast(tg_module *m, bool norm_first, tg_tensor **y, tg_tensor *x,
                                 tg_tensor *mask, tg_tensor *kpm, bool *taken)
{
    *taken = false;
    enc_parts p;
    if (!applies(m, x, mask, kpm, &p)) return TG_OK;
    const tg_nn_mha_forward_opts fo = {.key_padding_mask = kpm, .attn_mask = mask,
                                       .average_attn_weights = true};
    bool ok = false;
    TG_TRY(tg__nn_mha_self_check(p.sa, x, &fo, &ok));
    if (!ok) return TG_OK;
    const int64_t e = x->shape[x->ndim - 1], rows = tg_tensor_numel(x) / e;
    tg_tensor *xc = NULL, *x2 = NULL;
    int rc = tg_contiguous(&xc, x);   /* x itself when contiguous */
    if (rc >= 0) rc = tg_reshape(&x2, xc, 2, (int64_t[]){rows, e});
    if (rc >= 0) rc = fused(&p, norm_first, y, xc, x2, &fo);
    tg_tensor_release(xc);
    tg_tensor_release(x2);
    if (rc >= 0) {
        *taken = true;
        fast_calls++;
    }
    return rc;
}
