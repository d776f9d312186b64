/* src/nn/multihead_attention.c - nn.MultiheadAttention (tapegrad/attention.h),
 * torch 1.13's F.multi_head_attention_forward step by step, with E the
 * embedding, H the heads, d = E / H, L the targets, S the sources, N the
 * batch:
 *   q, k, v = in-projections of query (L, N, E), key (S, N, kdim),
 *             value (S, N, vdim)                     each (., N, E)
 *   k, v += a row bias_k, bias_v (add_bias_kv)        (S+1, N, E)
 *   q, k, v -> (N*H, ., d) (head h of batch n at row n*H + h)
 *   k, v += a zero row (add_zero_attn)                (N*H, S', d)
 *   mask = attn_mask merged with key_padding_mask, the appended columns
 *          unmasked                                   (1 or N*H, L or 1, S')
 *   o, a = scaled_dot_product_attention(q, k, v, mask, dropout)
 *   out = out_proj(o -> (L*N, E)) -> (L, N, E)
 * batch_first transposes the inputs and the output; an unbatched input is
 * the batched one with N = 1, squeezed back.  All ops are differentiable,
 * so gradients of every order follow. */
#include <math.h>
#include <string.h>

#include "nn/mha_internal.h"
#include "nn/module_internal.h"
#include "ops/attention_internal.h"
#include "tapegrad/attention.h"
#include "tapegrad/init.h"
#include "tapegrad/ops.h"
#include "tapegrad/registry.h"

#define FWD "multihead_attention"

typedef struct mha_state {
    int64_t embed_dim, num_heads;
    tg_nn_multihead_attention_opts o;   /* kdim and vdim resolved */
    uint64_t calls;   /* training forwards that drew a dropout mask (Dropout's count) */
} mha_state;

static int mha_forward_n(tg_module *m, tg_tensor **y, int n, tg_tensor *const *xs);

static const tg_module_vtable mha_vt = {
    .type_name = "MultiheadAttention", .forward_n = mha_forward_n, .n_inputs = 3,
    .release = free, .state_size = sizeof(mha_state)};

uint64_t *tg__nn_mha_dropout_calls(tg_module *m)
{
    return m->vt == &mha_vt ? &((mha_state *)m->state)->calls : NULL;
}

uint64_t *tg__nn_mha_dropout_seed(tg_module *m)
{
    return m->vt == &mha_vt ? &((mha_state *)m->state)->o.seed : NULL;
}

/* ---- construction ---- */

/* The parameters in torch's registration order, drawn as _reset_parameters
 * after out_proj's own Linear initialisation. */
static int mha_params(tg_module *m, const mha_state *s, tg_rng *rng)
{
    const int64_t e = s->embed_dim;
    const tg_nn_multihead_attention_opts *o = &s->o;
    tg_module *out_proj = NULL;
    TG_TRY(tg_nn_linear_new(&out_proj, e, e, o->bias, rng));
    tg_tensor *w = NULL;
    int rc;
    if (o->kdim == e && o->vdim == e) {
        TG_TRY_GOTO(tg__nn_add_param_zeros(m, "in_proj_weight", 2, (int64_t[]){3 * e, e}, &w));
        TG_TRY_GOTO(tg_init_xavier_uniform_(w, 1.0, rng));
    } else {
        const char *names[3] = {"q_proj_weight", "k_proj_weight", "v_proj_weight"};
        const int64_t in[3] = {e, o->kdim, o->vdim};
        for (int i = 0; i < 3; i++) {
            TG_TRY_GOTO(tg__nn_add_param_zeros(m, names[i], 2, (int64_t[]){e, in[i]}, &w));
            TG_TRY_GOTO(tg_init_xavier_uniform_(w, 1.0, rng));
        }
    }
    if (o->bias) {   /* in_proj_bias and out_proj.bias start at 0 */
        TG_TRY_GOTO(tg__nn_add_param_zeros(m, "in_proj_bias", 1, (int64_t[]){3 * e}, &w));
        TG_TRY_GOTO(tg_init_zeros_(tg_module_find(out_proj, "bias")));
    }
    if (o->add_bias_kv) {
        const char *names[2] = {"bias_k", "bias_v"};
        for (int i = 0; i < 2; i++) {
            TG_TRY_GOTO(tg__nn_add_param_zeros(m, names[i], 3, (int64_t[]){1, 1, e}, &w));
            TG_TRY_GOTO(tg_init_xavier_normal_(w, 1.0, rng));
        }
    }
    return tg_module_add_child(m, "out_proj", out_proj);   /* steals it */
done:
    tg_module_release(out_proj);
    return rc;
}

int tg_nn_multihead_attention_new(tg_module **out, int64_t embed_dim, int64_t num_heads,
                                  const tg_nn_multihead_attention_opts *opts, tg_rng *rng)
{
    static const char fn[] = "nn_multihead_attention_new";
    TG_CHECK(out != NULL && rng != NULL, TG_EINVAL, "%s: out and rng must not be NULL", fn);
    TG_CHECK(embed_dim >= 1 && num_heads >= 1, TG_EINVAL,
             "%s: embed_dim=%lld and num_heads=%lld must be >= 1", fn, (long long)embed_dim,
             (long long)num_heads);
    TG_CHECK(embed_dim % num_heads == 0, TG_EINVAL,
             "%s: embed_dim=%lld must be divisible by num_heads=%lld", fn, (long long)embed_dim,
             (long long)num_heads);
    mha_state s = {.embed_dim = embed_dim, .num_heads = num_heads,
                   .o = (tg_nn_multihead_attention_opts)TG_NN_MULTIHEAD_ATTENTION_OPTS_INIT};
    if (opts) s.o = *opts;
    TG_CHECK(s.o.kdim >= 0 && s.o.vdim >= 0, TG_EINVAL,
             "%s: kdim=%lld and vdim=%lld must be >= 0 (0: embed_dim)", fn, (long long)s.o.kdim,
             (long long)s.o.vdim);
    TG_CHECK(s.o.dropout >= 0.0 && s.o.dropout <= 1.0, TG_EINVAL,
             "%s: dropout=%g must be in [0, 1]", fn, s.o.dropout);
    if (s.o.kdim == 0) s.o.kdim = embed_dim;
    if (s.o.vdim == 0) s.o.vdim = embed_dim;
    tg_module *m = NULL;
    TG_TRY(tg__module_new_state(&m, &mha_vt, &s));
    int rc = mha_params(m, &s, rng);
    if (rc < 0) {
        tg_module_release(m);
        return rc;
    }
    *out = m;
    return TG_OK;
}

int tg_nn_multihead_attention_params(const tg_module *m, int64_t *embed_dim, int64_t *num_heads,
                                     tg_nn_multihead_attention_opts *opts)
{
    TG_CHECK(m != NULL, TG_EINVAL, "nn_multihead_attention_params: m must not be NULL");
    TG_CHECK(m->vt == &mha_vt, TG_EINVAL,
             "nn_multihead_attention_params: m is a %s module, not MultiheadAttention",
             tg_module_type_name(m));
    const mha_state *s = m->state;
    if (embed_dim) *embed_dim = s->embed_dim;
    if (num_heads) *num_heads = s->num_heads;
    if (opts) *opts = s->o;
    return TG_OK;
}

/* ---- checks: torch's _mha_shape_check and multi_head_attention_forward's ---- */

static int check_masks(const mha_state *s, const tg_tensor *q, const tg_tensor *k, tg_dtype dt,
                       bool amp, const tg_nn_mha_forward_opts *fo)
{
    const bool batched = q->ndim == 3;
    const int sd = batched && s->o.batch_first ? 1 : 0;   /* the sequence dim */
    const int64_t n = batched ? q->shape[1 - sd] : 1, len = q->shape[sd], src = k->shape[sd];
    char sm[96];
    const tg_tensor *kpm = fo->key_padding_mask, *am = fo->attn_mask;
    if (kpm) {
        tg_shape_str(sm, sizeof sm, kpm->ndim, kpm->shape);
        TG_CHECK(kpm->dtype == TG_U8 || kpm->dtype == dt ||
                     (amp && tg_dtype_is_float(kpm->dtype)),
                 TG_EDTYPE,
                 FWD ": key_padding_mask is %s; it must be u8 (torch's bool) or the query's "
                 "dtype %s", tg_dtype_name(kpm->dtype), tg_dtype_name(dt));
        TG_CHECK(batched ? kpm->ndim == 2 && kpm->shape[0] == n && kpm->shape[1] == src
                         : kpm->ndim == 1 && kpm->shape[0] == src,
                 TG_ESHAPE, FWD ": key_padding_mask is %s; it must be %s (N=%lld, S=%lld)", sm,
                 batched ? "(N, S)" : "(S) for an unbatched query", (long long)n,
                 (long long)src);
    }
    if (am) {
        tg_shape_str(sm, sizeof sm, am->ndim, am->shape);
        TG_CHECK(am->dtype == TG_U8 || am->dtype == dt || (amp && tg_dtype_is_float(am->dtype)),
                 TG_EDTYPE,
                 FWD ": attn_mask is %s; it must be u8 (torch's bool) or the query's dtype %s",
                 tg_dtype_name(am->dtype), tg_dtype_name(dt));
        const int64_t nh = n * s->num_heads;
        TG_CHECK((am->ndim == 2 && am->shape[0] == len && am->shape[1] == src) ||
                     (am->ndim == 3 && am->shape[0] == nh && am->shape[1] == len &&
                      am->shape[2] == src),
                 TG_ESHAPE,
                 FWD ": attn_mask is %s; it must be (L, S) = (%lld, %lld) or "
                 "(N*num_heads, L, S) = (%lld, %lld, %lld)", sm, (long long)len,
                 (long long)src, (long long)nh, (long long)len, (long long)src);
    }
    return TG_OK;
}

static int check_inputs(const tg_module *m, const tg_tensor *q, const tg_tensor *k,
                        const tg_tensor *v, const tg_nn_mha_forward_opts *fo)
{
    const mha_state *s = m->state;
    char sq[96], sk[96], sv[96];
    tg_shape_str(sq, sizeof sq, q->ndim, q->shape);
    tg_shape_str(sk, sizeof sk, k->ndim, k->shape);
    tg_shape_str(sv, sizeof sv, v->ndim, v->shape);
    const tg_dtype dt = tg_tensor_dtype(tg_module_find(m, "out_proj.weight"));
    /* inside autocast the linears and products cast their operands */
    const bool amp = tg_autocast_active(NULL);
    TG_CHECK(amp ? tg_dtype_is_float(q->dtype) && tg_dtype_is_float(k->dtype) &&
                       tg_dtype_is_float(v->dtype)
                 : q->dtype == dt && k->dtype == dt && v->dtype == dt,
             TG_EDTYPE,
             FWD ": query, key and value are %s, %s and %s; they must be the parameters' %s%s",
             tg_dtype_name(q->dtype), tg_dtype_name(k->dtype), tg_dtype_name(v->dtype),
             tg_dtype_name(dt), amp ? " (inside autocast: float dtypes)" : "");
    TG_CHECK(q->ndim == 3 || q->ndim == 2, TG_ESHAPE,
             FWD ": query is %s; it must be 3-d (batched) or 2-d (unbatched)", sq);
    TG_CHECK(k->ndim == q->ndim && v->ndim == q->ndim, TG_ESHAPE,
             FWD ": query is %s, so key %s and value %s must be %d-d too", sq, sk, sv, q->ndim);
    const int e = q->ndim - 1;
    TG_CHECK(q->shape[e] == s->embed_dim, TG_ESHAPE,
             FWD ": query %s must have embed_dim=%lld features", sq, (long long)s->embed_dim);
    TG_CHECK(k->shape[e] == s->o.kdim, TG_ESHAPE, FWD ": key %s must have kdim=%lld features",
             sk, (long long)s->o.kdim);
    TG_CHECK(v->shape[e] == s->o.vdim, TG_ESHAPE, FWD ": value %s must have vdim=%lld features",
             sv, (long long)s->o.vdim);
    const int sd = q->ndim == 3 && s->o.batch_first ? 1 : 0;
    TG_CHECK(q->ndim == 2 || (k->shape[1 - sd] == q->shape[1 - sd] &&
                              v->shape[1 - sd] == q->shape[1 - sd]),
             TG_ESHAPE, FWD ": query %s, key %s and value %s must have one batch size (dim %d)",
             sq, sk, sv, 1 - sd);
    TG_CHECK(k->shape[sd] == v->shape[sd], TG_ESHAPE,
             FWD ": key %s and value %s must have one length S (dim %d)", sk, sv, sd);
    return check_masks(s, q, k, dt, amp, fo);
}

/* ---- forward ---- */

/* x as (len, N, feat): a transposed view with batch_first, a view with
 * N = 1 unbatched. */
static int to_seq_first(tg_tensor **out, tg_tensor *x, const mha_state *s)
{
    if (x->ndim == 2) return tg_unsqueeze(out, x, 1);
    if (s->o.batch_first) return tg_transpose(out, x, 0, 1);
    *out = tg_tensor_retain(x);
    return TG_OK;
}

/* The i-th (0: q, 1: k, 2: v) in-projection of x: rows [iE, (i+1)E) of
 * in_proj_weight, or q/k/v_proj_weight, and of in_proj_bias. */
static int in_proj(tg_tensor **out, tg_module *m, const mha_state *s, int i, tg_tensor *x)
{
    static const char *const sep[3] = {"q_proj_weight", "k_proj_weight", "v_proj_weight"};
    const int64_t e = s->embed_dim;
    tg_tensor *w = NULL, *b = NULL, *ipw = tg__module_local(m, "in_proj_weight");
    tg_tensor *ipb = tg__module_local(m, "in_proj_bias");
    int rc = TG_OK;
    if (ipw)
        rc = tg_slice(&w, ipw, 0, i * e, (i + 1) * e, 1);
    else
        w = tg_tensor_retain(tg__module_local(m, sep[i]));
    if (rc >= 0 && ipb) rc = tg_slice(&b, ipb, 0, i * e, (i + 1) * e, 1);
    if (rc >= 0) rc = tg_linear(out, x, w, b);
    tg_tensor_release(w);
    tg_tensor_release(b);
    return rc;
}

/* x (len, N, E) with bias (1, 1, E) appended along dim 0: (len+1, N, E). */
static int append_bias(tg_tensor **out, tg_tensor *x, tg_tensor *bias)
{
    tg_tensor *be = NULL;
    TG_TRY(tg_expand(&be, bias, 3, (int64_t[]){1, x->shape[1], x->shape[2]}));
    int rc = tg_cat(out, 2, (tg_tensor *[]){x, be}, 0);
    tg_tensor_release(be);
    return rc;
}

/* x (len, N, E) as (N*H, len, d), head h of batch n at row n*H + h; with
 * zero_row, a row of zeros appended: (N*H, len+1, d). */
static int to_heads(tg_tensor **out, tg_tensor *x, const mha_state *s, bool zero_row)
{
    const int64_t nh = x->shape[1] * s->num_heads, d = s->embed_dim / s->num_heads;
    tg_tensor *r = NULL, *t = NULL, *z = NULL;
    int rc;
    TG_TRY_GOTO(tg_reshape(&r, x, 3, (int64_t[]){x->shape[0], nh, d}));
    TG_TRY_GOTO(tg_transpose(zero_row ? &t : out, r, 0, 1));
    if (zero_row) {
        TG_TRY_GOTO(tg_tensor_zeros(&z, x->dtype, 3, (int64_t[]){nh, 1, d}));
        TG_TRY_GOTO(tg_cat(out, 2, (tg_tensor *[]){t, z}, 1));
    }
done:
    tg_tensor_release(r);
    tg_tensor_release(t);
    tg_tensor_release(z);
    return rc;
}

/* The additive mask of the scores (1 or N*H, L or 1, S + extra) in *out
 * (NULL without masks), merged as torch 1.13 does: attn_mask (-inf where a
 * u8 one is set); a u8 key_padding_mask (N, S) puts -inf where set, and so
 * does a float one beside a u8 attn_mask (torch or-s the two as bools); a
 * float key_padding_mask is otherwise added (alone it is the mask; beside a
 * float attn_mask, where torch 1.13 fails, the sum, as torch 2 merges
 * them).  Then extra unmasked columns for the appended bias and zero keys. */
static int make_mask(tg_tensor **out, const mha_state *s, const tg_nn_mha_forward_opts *fo,
                     tg_dtype dt, int64_t n, int64_t extra)
{
    enum { AZ, AM, K4, KE, K3, KB, KZ, MK, N_TMP };
    tg_tensor *t[N_TMP] = {NULL};
    tg_tensor *am = fo->attn_mask, *kpm = fo->key_padding_mask;
    int rc = TG_OK;
    if (am && am->dtype == TG_U8) {
        TG_TRY_GOTO(tg_tensor_zeros(&t[AZ], dt, am->ndim, am->shape));
        TG_TRY_GOTO(tg_masked_fill(&t[AM], t[AZ], am, -INFINITY));
    } else if (am) {
        t[AM] = tg_tensor_retain(am);
    }
    if (kpm) {   /* (N, S) -> (N, 1, 1, S) -> (N, H, 1, S) -> (N*H, 1, S) */
        const int64_t src = kpm->shape[kpm->ndim - 1], h = s->num_heads;
        TG_TRY_GOTO(tg_reshape(&t[K4], kpm, 4, (int64_t[]){n, 1, 1, src}));
        TG_TRY_GOTO(tg_expand(&t[KE], t[K4], 4, (int64_t[]){n, h, 1, src}));
        TG_TRY_GOTO(tg_reshape(&t[K3], t[KE], 3, (int64_t[]){n * h, 1, src}));
        if (kpm->dtype == TG_U8 || (am && am->dtype == TG_U8)) {
            if (kpm->dtype == TG_U8)
                t[KB] = tg_tensor_retain(t[K3]);
            else   /* torch's logical_or: nonzero (NaN too) is set */
                TG_TRY_GOTO(tg_ne_scalar(&t[KB], t[K3], 0.0));
            if (!t[AM]) TG_TRY_GOTO(tg_tensor_zeros(&t[KZ], dt, 3, (int64_t[]){n * h, 1, src}));
            TG_TRY_GOTO(tg_masked_fill(&t[MK], t[AM] ? t[AM] : t[KZ], t[KB], -INFINITY));
        } else if (t[AM]) {
            TG_TRY_GOTO(tg_add(&t[MK], t[AM], t[K3]));
        } else {
            t[MK] = tg_tensor_retain(t[K3]);
        }
    } else if (t[AM]) {
        t[MK] = tg_tensor_retain(t[AM]);
    }
    if (!t[MK]) {
        *out = NULL;
    } else if (extra > 0) {
        TG_TRY_GOTO(tg_pad(out, t[MK], 2, (int64_t[]){0, extra}, TG_PAD_CONSTANT, 0.0));
    } else {
        *out = tg_tensor_retain(t[MK]);
    }
done:
    for (int i = 0; i < N_TMP; i++) tg_tensor_release(t[i]);
    return rc;
}

/* weights a (N*H, L, S') as (N, H, L, S'), or their mean over the heads
 * (N, L, S') (torch's sum / H), without N when unbatched. */
static int head_weights(tg_tensor **out, tg_tensor *a, const mha_state *s, int64_t n,
                        bool average, bool batched)
{
    const int64_t h = s->num_heads, len = a->shape[1], src = a->shape[2];
    tg_tensor *w4 = NULL, *sum = NULL, *w = NULL;
    int rc;
    TG_TRY_GOTO(tg_reshape(&w4, a, 4, (int64_t[]){n, h, len, src}));
    if (average) {
        TG_TRY_GOTO(tg_sum_dims(&sum, w4, 1, (int[]){1}, false));
        TG_TRY_GOTO(tg_div_scalar(&w, sum, (double)h));
    } else {
        w = tg_tensor_retain(w4);
    }
    if (batched)
        *out = tg_tensor_retain(w);
    else
        TG_TRY_GOTO(tg_squeeze(out, w, 0));
done:
    tg_tensor_release(w4);
    tg_tensor_release(sum);
    tg_tensor_release(w);
    return rc;
}

/* The dtype the fused attention computes in: the inputs', or inside
 * autocast of a half dtype, for f32 query and key, autocast's, to which
 * the projections cast them as the step by step path's do. */
static tg_dtype fast_dtype(const tg_tensor *q, const tg_tensor *kv)
{
    tg_dtype amp;
    if (tg_autocast_active(&amp) && (amp == TG_BF16 || amp == TG_F16) && q->dtype == TG_F32 &&
        kv->dtype == TG_F32)
        return amp;
    return q->dtype;
}

/* Whether the forward may take the fused attention (tg__nn_mha_fast): no
 * weights wanted, key and value one tensor (the query's for
 * self-attention), the packed in_proj_weight, no appended keys, the fused
 * kernel's conditions (no dropout draws, one float dtype, outside autocast
 * or of its half dtype or f32 inside it, TG_ATTENTION_FAST not "0", no
 * gradient recorded for query or key), masks it takes
 * (tg__attention_fast_mask_fits; make_mask turns a u8 one into 0 and -inf
 * of dt) and no gradient recorded for the parameters or the masks. */
static bool fast_applies(tg_module *m, const mha_state *s, bool weights,
                         tg_tensor *const qkv[3], const tg_nn_mha_forward_opts *fo)
{
    if (weights || qkv[2] != qkv[1] || s->o.add_bias_kv || s->o.add_zero_attn ||
        !tg__module_local(m, "in_proj_weight"))
        return false;
    const tg_attention_opts ao = {.dropout_p = s->o.dropout, .training = m->training};
    const tg_dtype dt = fast_dtype(qkv[0], qkv[1]);
    if (!tg__attention_fast_applies_as(qkv[0], qkv[1], qkv[1], &ao, dt) ||
        !tg__attention_fast_mask_fits(fo->attn_mask, dt) ||
        !tg__attention_fast_mask_fits(fo->key_padding_mask, dt))
        return false;
    if (!tg_grad_enabled()) return true;
    const tg_tensor *need[6] = {tg__module_local(m, "in_proj_weight"),
                                tg__module_local(m, "in_proj_bias"),
                                tg_module_find(m, "out_proj.weight"),
                                tg_module_find(m, "out_proj.bias"), fo->attn_mask,
                                fo->key_padding_mask};
    for (int i = 0; i < 6; i++)
        if (need[i] && tg_tensor_requires_grad(need[i])) return false;
    return true;
}

int tg__nn_mha_fast_check(tg_module *m, tg_tensor *q, tg_tensor *kv,
                          const tg_nn_mha_forward_opts *fo, bool *fused)
{
    TG_ASSERT(m->vt == &mha_vt);
    TG_TRY(check_inputs(m, q, kv, kv, fo));
    *fused = fast_applies(m, m->state, false, (tg_tensor *[]){q, kv, kv}, fo);
    return TG_OK;
}

int tg__nn_mha_attend(tg_tensor **out, tg_module *m, tg_tensor *q, tg_tensor *kv,
                      const tg_nn_mha_forward_opts *fo)
{
    const mha_state *s = m->state;
    const int64_t n = q->ndim == 3 ? q->shape[s->o.batch_first ? 0 : 1] : 1;
    tg_tensor *mask = NULL;
    TG_TRY(make_mask(&mask, s, fo, fast_dtype(q, kv), n, 0));
    int rc = tg__nn_mha_heads(out, m, q, kv, mask, s->num_heads, s->o.batch_first);
    tg_tensor_release(mask);
    return rc;
}

/* The forward, the inputs checked (check_inputs), run at library depth:
 * *out, and *weights when weights is not NULL. */
static int run(tg_module *m, tg_tensor **out, tg_tensor **weights, tg_tensor *const qkv[3],
               const tg_nn_mha_forward_opts *fo)
{
    mha_state *s = m->state;
    const bool batched = qkv[0]->ndim == 3;
    enum { X0, X1, X2, P0, P1, P2, KB, VB, H0, H1, H2, MASK, O, A, OT, O2, Y2, Y3, N_TMP };
    tg_tensor *t[N_TMP] = {NULL};
    int rc = TG_OK;
    if (fast_applies(m, s, weights != NULL, qkv, fo)) {
        const int64_t n = batched ? qkv[0]->shape[s->o.batch_first ? 0 : 1] : 1;
        TG_TRY_GOTO(make_mask(&t[MASK], s, fo, fast_dtype(qkv[0], qkv[1]), n, 0));
        rc = tg__nn_mha_fast(out, m, qkv[0], qkv[1], t[MASK], s->num_heads, s->o.batch_first);
        goto done;
    }
    for (int i = 0; i < 3; i++) {   /* (len, N, feat), then projected to (len, N, E) */
        TG_TRY_GOTO(to_seq_first(&t[X0 + i], qkv[i], s));
        TG_TRY_GOTO(in_proj(&t[P0 + i], m, s, i, t[X0 + i]));
    }
    const int64_t len = t[P0]->shape[0], n = t[P0]->shape[1], e = s->embed_dim;
    tg_tensor *k = t[P1], *v = t[P2];
    if (s->o.add_bias_kv) {
        TG_TRY_GOTO(append_bias(&t[KB], k, tg__module_local(m, "bias_k")));
        TG_TRY_GOTO(append_bias(&t[VB], v, tg__module_local(m, "bias_v")));
        k = t[KB];
        v = t[VB];
    }
    TG_TRY_GOTO(to_heads(&t[H0], t[P0], s, false));
    TG_TRY_GOTO(to_heads(&t[H1], k, s, s->o.add_zero_attn));
    TG_TRY_GOTO(to_heads(&t[H2], v, s, s->o.add_zero_attn));
    TG_TRY_GOTO(make_mask(&t[MASK], s, fo, k->dtype, n,
                          (int64_t)s->o.add_bias_kv + (int64_t)s->o.add_zero_attn));
    /* the k-th drawing forward owns Philox blocks [k << 40, (k + 1) << 40),
     * as Dropout's */
    tg_rng rng = {.seed = s->o.seed, .counter = s->calls << 40};
    const tg_attention_opts ao = {.attn_mask = t[MASK], .dropout_p = s->o.dropout,
                                  .training = m->training, .rng = &rng};
    TG_TRY_GOTO(tg_scaled_dot_product_attention(&t[O], weights ? &t[A] : NULL, t[H0], t[H1],
                                                t[H2], &ao));
    if (m->training && s->o.dropout > 0.0) s->calls++;
    /* (N*H, L, d) -> (L, N*H, d) -> (L*N, E) -> out_proj -> (L, N, E) */
    TG_TRY_GOTO(tg_transpose(&t[OT], t[O], 0, 1));
    TG_TRY_GOTO(tg_reshape(&t[O2], t[OT], 2, (int64_t[]){len * n, e}));
    TG_TRY_GOTO(tg_module_forward(tg_module_child(m, "out_proj"), &t[Y2], t[O2]));
    TG_TRY_GOTO(tg_reshape(&t[Y3], t[Y2], 3, (int64_t[]){len, n, e}));
    if (weights)
        TG_TRY_GOTO(head_weights(weights, t[A], s, n, fo->average_attn_weights, batched));
    if (!batched)
        rc = tg_squeeze(out, t[Y3], 1);
    else if (s->o.batch_first)
        rc = tg_transpose(out, t[Y3], 0, 1);
    else
        *out = tg_tensor_retain(t[Y3]);
    if (rc < 0 && weights) {
        tg_tensor_release(*weights);
        *weights = NULL;
    }
done:
    for (int i = 0; i < N_TMP; i++) tg_tensor_release(t[i]);
    return rc;
}

static int mha_forward_n(tg_module *m, tg_tensor **y, int n, tg_tensor *const *xs)
{
    (void)n;   /* 3: the vtable's n_inputs */
    const tg_nn_mha_forward_opts fo = TG_NN_MHA_FORWARD_OPTS_INIT;
    TG_TRY(check_inputs(m, xs[0], xs[1], xs[2], &fo));
    return run(m, y, NULL, xs, &fo);
}

int tg_nn_multihead_attention_forward(tg_module *m, tg_tensor **out, tg_tensor **weights,
                                      tg_tensor *query, tg_tensor *key, tg_tensor *value,
                                      const tg_nn_mha_forward_opts *opts)
{
    TG_CHECK(m != NULL && out != NULL, TG_EINVAL, FWD ": m and out must not be NULL");
    TG_CHECK(weights != out, TG_EINVAL, FWD ": out and weights must be two different places");
    TG_CHECK(query != NULL && key != NULL && value != NULL, TG_EINVAL,
             FWD ": query, key and value must not be NULL");
    TG_CHECK(m->vt == &mha_vt, TG_EINVAL, FWD ": m is a %s module, not MultiheadAttention",
             tg_module_type_name(m));
    const tg_nn_mha_forward_opts fo = opts ? *opts
                                           : (tg_nn_mha_forward_opts)TG_NN_MHA_FORWARD_OPTS_INIT;
    TG_TRY(check_inputs(m, query, key, value, &fo));
    tg_tensor *y = NULL, *w = NULL;
    tg__lib_enter();
    /* a reparametrized weight (weight_norm, spectral_norm) computed first */
    int rc = tg__module_compute(m);
    if (rc >= 0) rc = run(m, &y, weights ? &w : NULL, (tg_tensor *[]){query, key, value}, &fo);
    tg__lib_leave();
    return tg__scope_capture_pair(out, y, weights, w, rc);
}
