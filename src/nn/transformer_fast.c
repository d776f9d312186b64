/* src/nn/transformer_fast.c - TransformerEncoderLayer's and
 * TransformerDecoderLayer's inference forwards, fused in the spirit of
 * torch's _transformer_encoder_layer_fwd (src/nn/transformer_internal.h).
 * A layer is a chain of blocks, each with its LayerNorm: the encoder's
 * self-attention and feed-forward, the decoder's self-attention, attention
 * over the memory and feed-forward.  With x's rows in their memory order
 * (T rows of E), X the running rows (x at first), F = dim_feedforward and
 * LN_k block k's norm:
 *   post-norm, for each block k            norm_first: N = LN_0(x), then
 *   B = block_k(X) without its last bias   B = block_k(N)
 *   X = LN_k(X + (B + b_k))  one pass      X = X + (B + b_k), N = LN_k+1(X)
 *                                          one pass (the last block: no N)
 * where an attention block is MultiheadAttention's fused attention up to
 * its out_proj (tg__nn_mha_attend) of the block's input over itself or
 * over the memory, then B = A Wo^T; the feed-forward Fh = act(in W1^T +
 * b1) (T, F) in one pass, B = Fh W2^T.  Each product is one GEMM and each
 * "one pass" one walk over the rows (src/ops/rows_fused.c).  The op by op
 * path makes a tensor and a pass for each bias, activation, residual add
 * and LayerNorm; here X, B, Fh (and N with norm_first) serve the layer
 * and nothing is recorded.  Dropouts are identities in eval.  The numbers
 * are the op by op path's steps, except that a bias is added after the
 * GEMM's sum instead of before it (the last bit may differ) and that the
 * GEMMs may block their sums otherwise; tests/test_encoder_fast.c and
 * tests/test_decoder_fast.c hold the two to 1e-5 (f32) and 1e-12 (f64)
 * relative. */
#include <stdlib.h>
#include <string.h>

#include "nn/mha_internal.h"
#include "nn/module_internal.h"
#include "nn/transformer_internal.h"
#include "ops/rows_fused_internal.h"
#include "tapegrad/autograd.h"
#include "tapegrad/ops.h"
#include "tapegrad/registry.h"

static _Thread_local uint64_t enc_calls, dec_calls;

uint64_t tg__transformer_encoder_fast_calls(void) { return enc_calls; }

uint64_t tg__transformer_decoder_fast_calls(void) { return dec_calls; }

/* The most attention blocks of a layer (a decoder's two). */
enum { MAX_ATTN = 2 };

/* What the fused forward reads from the layer's children (borrowed):
 * n_attn attention blocks, then the feed-forward; norm k is block k's. */
typedef struct layer_parts {
    int n_attn;
    tg_module *attn[MAX_ATTN];
    tg_tensor *wo[MAX_ATTN], *bo[MAX_ATTN];
    tg_tensor *w1, *b1, *w2, *b2;
    tg_tensor *g[MAX_ATTN + 1], *c[MAX_ATTN + 1];   /* the norms' weights and biases */
    double eps[MAX_ATTN + 1];
    tg_activation act;
} layer_parts;

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

/* Whether the fused forward applies to layer m (n_attn attention blocks)
 * and x (dtype dt, e features), env not "0" in the environment and none of
 * the n inputs ins (x, the memory, the masks; NULL ones skipped) recording
 * a gradient, filling p; the conditions are in transformer_internal.h. */
static bool applies(tg_module *m, const char *env, tg_tensor *x, int n, tg_tensor *const *ins,
                    int n_attn, layer_parts *p)
{
    static const char *const attns[MAX_ATTN] = {"self_attn", "multihead_attn"};
    static const char *const drops[MAX_ATTN + 2] = {"dropout", "dropout1", "dropout2",
                                                    "dropout3"};
    static const char *const norms[MAX_ATTN + 1] = {"norm1", "norm2", "norm3"};
    const char *off = getenv(env);
    if (off && strcmp(off, "0") == 0) return false;
    const tg_dtype dt = x->dtype;
    if ((dt != TG_F32 && dt != TG_F64) || tg_autocast_active(NULL)) return false;
    bool grad = tg_grad_enabled();
    for (int i = 0; grad && i < n; i++)
        if (ins[i] && tg_tensor_requires_grad(ins[i])) return false;
    if (tg__module_visit(m, not_plain_eval, &grad) != TG_OK) return false;
    const int64_t e = x->shape[x->ndim - 1];
    tg_module *lin1 = tg_module_child(m, "linear1");
    const tg_tensor *w1 = lin1 ? tg__module_local(lin1, "weight") : NULL;
    const int64_t f = w1 && w1->ndim == 2 ? w1->shape[0] : 0;
    for (int i = 0; i < n_attn + 2; i++)
        if (tg_nn_dropout_params(tg_module_child(m, drops[i]), NULL, NULL) != TG_OK) return false;
    tg_module *act = tg_module_child(m, "activation");
    if (!act || tg_nn_activation_params(act, &p->act, NULL) != TG_OK ||
        (p->act != TG_ACT_RELU && p->act != TG_ACT_GELU) || f <= 0)
        return false;
    p->n_attn = n_attn;
    for (int k = 0; k < n_attn; k++) {
        p->attn[k] = tg_module_child(m, attns[k]);
        if (!p->attn[k] ||
            tg_nn_multihead_attention_params(p->attn[k], NULL, NULL, NULL) != TG_OK ||
            !linear_part(tg_module_child(p->attn[k], "out_proj"), dt, e, e, &p->wo[k], &p->bo[k]))
            return false;
    }
    for (int k = 0; k <= n_attn; k++)
        if (!norm_part(tg_module_child(m, norms[k]), dt, e, &p->g[k], &p->c[k], &p->eps[k]))
            return false;
    return linear_part(lin1, dt, f, e, &p->w1, &p->b1) &&
           linear_part(tg_module_child(m, "linear2"), dt, e, f, &p->w2, &p->b2);
}

/* The buffers of a fused forward: X the running rows, N the normed ones
 * (norm_first), B a block's output, FH the feed-forward's hidden rows. */
enum { X, N, B, FH, N_BUF };

/* b[B] = block k of in2 (T, E), x's rows (x3: in2 as x's shape), without
 * its last bias (*bias): the attention over itself or, for block 1, over
 * mem, then out_proj; or the feed-forward. */
static int block(const layer_parts *p, int k, tg_tensor *const *b, tg_tensor *in2,
                 const tg_tensor *xc, tg_tensor *mem, const tg_nn_mha_forward_opts *fo,
                 tg_tensor **bias)
{
    if (k == p->n_attn) {   /* Fh = act(in W1^T + b1); B = Fh W2^T */
        *bias = p->b2;
        TG_TRY(tg__linear_act_into(b[FH], in2, p->w1, p->b1, p->act));
        return tg__linear_act_into(b[B], b[FH], p->w2, NULL, TG_ACT_NONE);
    }
    *bias = p->bo[k];
    tg_tensor *in3 = NULL, *a = NULL;
    int rc = tg_reshape(&in3, in2, xc->ndim, xc->shape);
    if (rc >= 0) rc = tg__nn_mha_attend(&a, p->attn[k], in3, k == 1 ? mem : in3, &fo[k]);
    if (rc >= 0) rc = tg__linear_act_into(b[B], a, p->wo[k], NULL, TG_ACT_NONE);
    tg_tensor_release(in3);
    tg_tensor_release(a);
    return rc;
}

/* The layer on the fused path: xc contiguous, x2 its (T, E) view, fo[k]
 * attention block k's masks. */
static int fused(const layer_parts *p, bool pre, tg_tensor **y, tg_tensor *xc, tg_tensor *x2,
                 tg_tensor *mem, const tg_nn_mha_forward_opts *fo)
{
    const tg_dtype dt = xc->dtype;
    const int64_t rows = x2->shape[0], e = x2->shape[1], f = p->w1->shape[0];
    tg_tensor *b[N_BUF] = {NULL};
    int rc = TG_ENOMEM;
    if (!(b[X] = tg__tensor_uninit(dt, 2, (int64_t[]){rows, e})) ||
        !(b[B] = tg__tensor_uninit(dt, 2, (int64_t[]){rows, e})) ||
        !(b[FH] = tg__tensor_uninit(dt, 2, (int64_t[]){rows, f})) ||
        (pre && !(b[N] = tg__tensor_uninit(dt, 2, (int64_t[]){rows, e}))))
        goto done;
    if (pre)   /* N = LN_0(x) */
        tg__add_norm_rows_run(&(tg__add_norm_rows){.h = x2, .weight = p->g[0],
                                                   .ln_bias = p->c[0], .eps = p->eps[0],
                                                   .ln = b[N]});
    tg_tensor *res = x2;   /* the running rows: x, then X */
    for (int k = 0; k <= p->n_attn; k++) {
        tg_tensor *bias = NULL;
        TG_TRY_GOTO(block(p, k, b, pre ? b[N] : res, xc, mem, fo, &bias));
        tg__add_norm_rows a = {.h = b[B], .bias = bias, .res = res};
        if (!pre) {   /* X = LN_k(X + (B + b_k)) */
            a.weight = p->g[k];
            a.ln_bias = p->c[k];
            a.eps = p->eps[k];
            a.ln = b[X];
        } else {      /* X = X + (B + b_k); N = LN_k+1(X) but after the last block */
            a.sum = b[X];
            if (k < p->n_attn) {
                a.weight = p->g[k + 1];
                a.ln_bias = p->c[k + 1];
                a.eps = p->eps[k + 1];
                a.ln = b[N];
            }
        }
        tg__add_norm_rows_run(&a);
        res = b[X];
    }
    rc = tg_reshape(y, b[X], xc->ndim, xc->shape);
done:
    for (int i = 0; i < N_BUF; i++) tg_tensor_release(b[i]);
    return rc;
}

/* Runs layer p on x (and mem) when every attention block's fused attention
 * applies (its checks' errors returned); *taken says whether it ran. */
static int run_fused(const layer_parts *p, bool pre, tg_tensor **y, tg_tensor *x,
                     tg_tensor *mem, const tg_nn_mha_forward_opts *fo, bool *taken)
{
    for (int k = 0; k < p->n_attn; k++) {
        bool ok = false;
        TG_TRY(tg__nn_mha_fast_check(p->attn[k], x, k == 1 ? mem : x, &fo[k], &ok));
        if (!ok) return TG_OK;
    }
    const int64_t e = x->shape[x->ndim - 1], rows = tg_tensor_numel(x) / e;
    tg_tensor *xc = NULL, *x2 = NULL;
    int rc = tg_contiguous(&xc, x);   /* x itself when contiguous */
    if (rc >= 0) rc = tg_reshape(&x2, xc, 2, (int64_t[]){rows, e});
    if (rc >= 0) rc = fused(p, pre, y, xc, x2, mem, fo);
    tg_tensor_release(xc);
    tg_tensor_release(x2);
    *taken = rc >= 0;
    return rc;
}

int tg__transformer_encoder_fast(tg_module *m, bool norm_first, tg_tensor **y, tg_tensor *x,
                                 tg_tensor *mask, tg_tensor *kpm, bool *taken)
{
    *taken = false;
    layer_parts p;
    if (!applies(m, "TG_ENCODER_FAST", x, 3, (tg_tensor *[]){x, mask, kpm}, 1, &p))
        return TG_OK;
    const tg_nn_mha_forward_opts fo = {.key_padding_mask = kpm, .attn_mask = mask,
                                       .average_attn_weights = true};
    TG_TRY(run_fused(&p, norm_first, y, x, NULL, &fo, taken));
    if (*taken) enc_calls++;
    return TG_OK;
}

int tg__transformer_decoder_fast(tg_module *m, bool norm_first, tg_tensor **y, tg_tensor *x,
                                 tg_tensor *mem, const tg_nn_transformer_masks *mk, bool *taken)
{
    *taken = false;
    layer_parts p;
    tg_tensor *const ins[6] = {x, mem, mk->tgt_mask, mk->tgt_key_padding_mask, mk->memory_mask,
                               mk->memory_key_padding_mask};
    if (!applies(m, "TG_DECODER_FAST", x, 6, ins, 2, &p)) return TG_OK;
    const tg_nn_mha_forward_opts fo[2] = {
        {.key_padding_mask = mk->tgt_key_padding_mask, .attn_mask = mk->tgt_mask,
         .average_attn_weights = true},
        {.key_padding_mask = mk->memory_key_padding_mask, .attn_mask = mk->memory_mask,
         .average_attn_weights = true}};
    TG_TRY(run_fused(&p, norm_first, y, x, mem, fo, taken));
    if (*taken) dec_calls++;
    return TG_OK;
}
