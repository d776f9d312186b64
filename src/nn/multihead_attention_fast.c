/* src/nn/multihead_attention_fast.c - MultiheadAttention's attention for
 * inference (src/nn/mha_internal.h), self-attention (query = key = value
 * = x) or attention over a memory (key = value = mem, the query another
 * tensor).  With a tensor's rows in their memory order (T = N L rows of E
 * for the query, N S for mem), rn and rl the row steps of batch n and
 * position l (batch_first: L and 1; else 1 and N), W = in_proj_weight and
 * b = in_proj_bias:
 *   self:  P (T, 3E) = x @ W^T + b                         one GEMM
 *   cross: Pq (T, E) = query @ W[0:E]^T + b[0:E]            one GEMM
 *          Pkv (N S, 2E) = mem @ W[E:3E]^T + b[E:3E]        one GEMM
 *   q[n, h, l, c] = Pq[n rn + l rl, h d + c]               (N, H, L, d) views,
 *   k and v the same of Pkv's rows at columns h d + c,     strides
 *   E + h d + c (self: P's, at E + h d + c, 2E + h d + c)  (rn cols, d, rl cols, 1)
 *   O[n rn + l rl, h d + c] = attention(q, k, v)[n, h, l, c]   (T, E)
 *   out = out_proj(O)                                      (T, E) in the query's shape
 * The fused kernel (src/ops/attention_fast.c) reads the strided heads as
 * GEMM operands and writes each head's rows where out_proj reads them, so
 * the step by step path's three slices, three GEMMs, head copies and the
 * copy back to (L N, E) are gone.  Each number is the step by step path's:
 * the same dot products of the rows with in_proj_weight's rows plus the
 * bias, on GEMMs of 3E or 2E columns instead of three of E, whose blocking
 * may add a dot product's terms in another order (a few ulps). */
#include "nn/mha_internal.h"
#include "nn/module_internal.h"
#include "ops/attention_internal.h"
#include "tapegrad/ops.h"

static _Thread_local uint64_t self_fast_calls, cross_fast_calls;

uint64_t tg__nn_mha_self_fast_calls(void) { return self_fast_calls; }

uint64_t tg__nn_mha_cross_fast_calls(void) { return cross_fast_calls; }

/* The mask as the scores (N, H, L or 1, S) take it: make_mask's per-head
 * (N*H, ., S) split into (N, H, ., S); one shared (1, ., S) broadcasts. */
static int mask_4d(tg_tensor **out, tg_tensor *mask, int64_t n, int64_t heads)
{
    if (!mask || mask->ndim != 3 || mask->shape[0] == 1) {
        *out = tg_tensor_retain(mask);
        return TG_OK;
    }
    const int64_t s4[4] = {n, heads, mask->shape[1], mask->shape[2]};
    return tg_reshape(out, mask, 4, s4);
}

/* A sequence's rows: n batches of len positions, rows n len in memory
 * order, batch n's row l at n rn + l rl. */
typedef struct seq_rows {
    int64_t n, len, rows, rn, rl;
} seq_rows;

static seq_rows rows_of(const tg_tensor *x, bool batch_first)
{
    const bool batched = x->ndim == 3, bf = !batched || batch_first;
    const int64_t a0 = batched ? x->shape[0] : 1, a1 = batched ? x->shape[1] : x->shape[0];
    return (seq_rows){.n = bf ? a0 : a1, .len = bf ? a1 : a0, .rows = a0 * a1,
                      .rn = bf ? a1 : 1, .rl = bf ? 1 : a1};
}

/* *p (new, contiguous (rows, r1 - r0)) = x's rows @ in_proj_weight[r0:r1]^T
 * + in_proj_bias[r0:r1] (no bias without one). */
static int project(tg_tensor **p, tg_module *m, tg_tensor *x, int64_t r0, int64_t r1)
{
    const int64_t e = x->shape[x->ndim - 1], rows = tg_tensor_numel(x) / e;
    tg_tensor *ipw = tg__module_local(m, "in_proj_weight");
    tg_tensor *ipb = tg__module_local(m, "in_proj_bias");
    const bool whole = r0 == 0 && r1 == ipw->shape[0];
    enum { XC, X2, W, B, N_TMP };
    tg_tensor *t[N_TMP] = {NULL};
    int rc;
    TG_TRY_GOTO(tg_contiguous(&t[XC], x));   /* x itself when contiguous */
    TG_TRY_GOTO(tg_reshape(&t[X2], t[XC], 2, (int64_t[]){rows, e}));
    if (whole) {
        t[W] = tg_tensor_retain(ipw);
        t[B] = tg_tensor_retain(ipb);
    } else {
        TG_TRY_GOTO(tg_slice(&t[W], ipw, 0, r0, r1, 1));
        if (ipb) TG_TRY_GOTO(tg_slice(&t[B], ipb, 0, r0, r1, 1));
    }
    TG_TRY_GOTO(tg_linear(p, t[X2], t[W], t[B]));
    TG_ASSERT(tg_tensor_is_contiguous(*p));
done:
    for (int i = 0; i < N_TMP; i++) tg_tensor_release(t[i]);
    return rc;
}

/* *out (new) = the (N, H, len, d) heads of sequence r at columns off +
 * h d + c of p's rows. */
static int heads_view(tg_tensor **out, const tg_tensor *p, const seq_rows *r, int64_t heads,
                      int64_t d, int64_t off)
{
    const int64_t cols = p->shape[1];
    const int64_t shape[4] = {r->n, heads, r->len, d};
    const int64_t st[4] = {r->rn * cols, d, r->rl * cols, 1};
    *out = tg__tensor_view_of(p->storage, p->dtype, 4, shape, st, p->offset + off);
    return *out ? TG_OK : TG_ENOMEM;
}

int tg__nn_mha_heads(tg_tensor **out, tg_module *m, tg_tensor *q, tg_tensor *kv,
                     tg_tensor *mask, int64_t heads, bool batch_first)
{
    const bool self = kv == q;
    const seq_rows rq = rows_of(q, batch_first), rk = rows_of(kv, batch_first);
    const int64_t e = q->shape[q->ndim - 1], d = e / heads;
    enum { PQ, PKV, Q, K, V, M4, OB, O, N_TMP };
    tg_tensor *t[N_TMP] = {NULL};
    int rc;
    if (self) {   /* q, k, v: P's thirds */
        TG_TRY_GOTO(project(&t[PQ], m, q, 0, 3 * e));
        t[PKV] = tg_tensor_retain(t[PQ]);
    } else {      /* q: Pq's columns; k, v: Pkv's halves */
        TG_TRY_GOTO(project(&t[PQ], m, q, 0, e));
        TG_TRY_GOTO(project(&t[PKV], m, kv, e, 3 * e));
    }
    /* the projections' dtype: q's, or inside autocast its half dtype */
    const tg_dtype dt = t[PQ]->dtype;
    const int64_t kv0 = self ? e : 0;   /* k's first column in Pkv */
    TG_TRY_GOTO(heads_view(&t[Q], t[PQ], &rq, heads, d, 0));
    TG_TRY_GOTO(heads_view(&t[K], t[PKV], &rk, heads, d, kv0));
    TG_TRY_GOTO(heads_view(&t[V], t[PKV], &rk, heads, d, kv0 + e));
    TG_TRY_GOTO(mask_4d(&t[M4], mask, rq.n, heads));
    const int64_t hshape[4] = {rq.n, heads, rq.len, d};
    const int64_t ost[4] = {rq.rn * e, d, rq.rl * e, 1};
    if (!(t[OB] = tg__tensor_uninit(dt, 2, (int64_t[]){rq.rows, e})) ||
        !(t[O] = tg__tensor_view_of(t[OB]->storage, dt, 4, hshape, ost, t[OB]->offset))) {
        rc = TG_ENOMEM;
        goto done;
    }
    TG_TRY_GOTO(tg__attention_fast_into(t[O], t[Q], t[K], t[V], t[M4]));
    *out = tg_tensor_retain(t[OB]);
    if (self)
        self_fast_calls++;
    else
        cross_fast_calls++;
done:
    for (int i = 0; i < N_TMP; i++) tg_tensor_release(t[i]);
    return rc;
}

int tg__nn_mha_fast(tg_tensor **out, tg_module *m, tg_tensor *q, tg_tensor *kv, tg_tensor *mask,
                    int64_t heads, bool batch_first)
{
    tg_tensor *ob = NULL, *y = NULL;
    TG_TRY(tg__nn_mha_heads(&ob, m, q, kv, mask, heads, batch_first));
    int rc = tg_module_forward(tg_module_child(m, "out_proj"), &y, ob);
    if (rc >= 0) rc = tg_reshape(out, y, q->ndim, q->shape);
    tg_tensor_release(ob);
    tg_tensor_release(y);
    return rc;
}
