/* src/nn/multihead_attention_fast.c - MultiheadAttention's self-attention
 * for inference (src/nn/mha_internal.h).  With x's rows in their memory
 * order (T = N L rows of E), rn and rl the row steps of batch n and
 * position l (batch_first: L and 1; else 1 and N):
 *   P (T, 3E) = x @ in_proj_weight^T + in_proj_bias      one GEMM
 *   q[n, h, l, c] = P[n rn + l rl, h d + c]              (N, H, L, d) views,
 *   k and v the same at columns E + h d + c, 2E + h d + c  strides
 *                                                         (rn 3E, d, rl 3E, 1)
 *   O[n rn + l rl, h d + c] = attention(q, k, v)[n, h, l, c]   (T, E)
 *   out = out_proj(O)                                    (T, E) in x's shape
 * The fused kernel (src/ops/attention_fast.c) reads the strided heads as
 * GEMM operands and writes each head's rows where out_proj reads them, so
 * the step by step path's three slices, three GEMMs, head copies and the
 * copy back to (L N, E) are gone.  Each number is the step by step path's:
 * the same dot products of x's rows with in_proj_weight's rows plus the
 * bias, on a GEMM of 3E columns instead of three of E, whose blocking may
 * add a dot product's terms in another order (a few ulps). */
#include "nn/mha_internal.h"
#include "nn/module_internal.h"
#include "ops/attention_internal.h"
#include "tapegrad/ops.h"

static _Thread_local uint64_t self_fast_calls;

uint64_t tg__nn_mha_self_fast_calls(void) { return self_fast_calls; }

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

int tg__nn_mha_self_heads(tg_tensor **out, tg_module *m, tg_tensor *x, tg_tensor *mask,
                          int64_t heads, bool batch_first)
{
    const bool batched = x->ndim == 3, bf = !batched || batch_first;
    const int64_t e = x->shape[x->ndim - 1];
    const int64_t a0 = batched ? x->shape[0] : 1, a1 = batched ? x->shape[1] : x->shape[0];
    const int64_t n = bf ? a0 : a1, len = bf ? a1 : a0, d = e / heads, rows = a0 * a1;
    const int64_t rn = bf ? a1 : 1, rl = bf ? 1 : a1;   /* row steps of n and l */
    const tg_dtype dt = x->dtype;
    enum { XC, X2, P, Q, K, V, M4, OB, O, N_TMP };
    tg_tensor *t[N_TMP] = {NULL};
    int rc;
    TG_TRY_GOTO(tg_contiguous(&t[XC], x));   /* x itself when contiguous */
    TG_TRY_GOTO(tg_reshape(&t[X2], t[XC], 2, (int64_t[]){rows, e}));
    TG_TRY_GOTO(tg_linear(&t[P], t[X2], tg__module_local(m, "in_proj_weight"),
                          tg__module_local(m, "in_proj_bias")));
    TG_ASSERT(tg_tensor_is_contiguous(t[P]));
    const int64_t hshape[4] = {n, heads, len, d};
    const int64_t pst[4] = {rn * 3 * e, d, rl * 3 * e, 1}, ost[4] = {rn * e, d, rl * e, 1};
    for (int i = 0; i < 3; i++)   /* q, k, v: P's thirds as heads */
        if (!(t[Q + i] = tg__tensor_view_of(t[P]->storage, dt, 4, hshape, pst,
                                            t[P]->offset + i * e))) {
            rc = TG_ENOMEM;
            goto done;
        }
    TG_TRY_GOTO(mask_4d(&t[M4], mask, n, heads));
    if (!(t[OB] = tg__tensor_uninit(dt, 2, (int64_t[]){rows, e})) ||
        !(t[O] = tg__tensor_view_of(t[OB]->storage, dt, 4, hshape, ost, t[OB]->offset))) {
        rc = TG_ENOMEM;
        goto done;
    }
    TG_TRY_GOTO(tg__attention_fast_into(t[O], t[Q], t[K], t[V], t[M4]));
    *out = tg_tensor_retain(t[OB]);
    self_fast_calls++;
done:
    for (int i = 0; i < N_TMP; i++) tg_tensor_release(t[i]);
    return rc;
}

int tg__nn_mha_self_fast(tg_tensor **out, tg_module *m, tg_tensor *x, tg_tensor *mask,
                         int64_t heads, bool batch_first)
{
    tg_tensor *ob = NULL, *y = NULL;
    TG_TRY(tg__nn_mha_self_heads(&ob, m, x, mask, heads, batch_first));
    int rc = tg_module_forward(tg_module_child(m, "out_proj"), &y, ob);
    if (rc >= 0) rc = tg_reshape(out, y, x->ndim, x->shape);
    tg_tensor_release(ob);
    tg_tensor_release(y);
    return rc;
}
