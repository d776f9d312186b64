/* src/ops/matmul.c - matmul with torch.matmul's shape rules, on the batched
 * gemm of src/ops/linalg.c.
 *
 * A 1-d a is a row (1, K) and a 1-d b a column (K, 1), the added dim
 * removed from the result; the dims before the last two are batch dims,
 * broadcast together.  When b is at most 2-d, a's leading dims fold into
 * the rows of one gemm (as torch folds them); otherwise each operand is
 * viewed with stride 0 along its broadcast dims, and copied only when its
 * batch dims cannot be walked with one stride.
 *
 * Backward uses the differentiable ops themselves:
 *   C = A B  =>  dA = dC B^T,  dB = A^T dC,
 * each summed over the batch dims its operand was broadcast along. */
#include <assert.h>
#include <string.h>

#include "core/core.h"
#include "autograd/tape.h"
#include "ops/families.h"
#include "ops/linalg_internal.h"
#include "tapegrad/ops.h"

typedef tg__mat mat;

/* torch.matmul's shapes: a 1-d a is a row (1, K) and a 1-d b a column
 * (K, 1), the added dim removed from the result; the dims before the last
 * two are batch dims, broadcast together (NumPy rules), so the result is
 * (batch..., [M], [N]). */
typedef struct mm_shape {
    int nbatch;
    int64_t batch[TG_MAX_DIMS];
    int64_t M, K, N;
    int ndim;
    int64_t shape[TG_MAX_DIMS];
} mm_shape;

static int matmul_shape_of(const tg_tensor *a, const tg_tensor *b, mm_shape *s)
{
    char sa[96], sb[96];
    tg_shape_str(sa, sizeof sa, a->ndim, a->shape);
    tg_shape_str(sb, sizeof sb, b->ndim, b->shape);
    TG_CHECK(a->ndim >= 1 && b->ndim >= 1, TG_EINVAL,
             "matmul: a is %s and b is %s: both must have at least 1 dim", sa, sb);
    const int na = a->ndim > 2 ? a->ndim - 2 : 0, nb = b->ndim > 2 ? b->ndim - 2 : 0;
    s->M = a->ndim >= 2 ? a->shape[a->ndim - 2] : 1;
    s->K = a->shape[a->ndim - 1];
    s->N = b->ndim >= 2 ? b->shape[b->ndim - 1] : 1;
    const int64_t kb = b->shape[b->ndim >= 2 ? b->ndim - 2 : 0];
    TG_CHECK(s->K == kb, TG_ESHAPE, "matmul: a is %s and b is %s: inner dims %lld and %lld differ",
             sa, sb, (long long)s->K, (long long)kb);
    s->nbatch = na > nb ? na : nb;
    for (int d = 0; d < s->nbatch; d++) {
        const int da = d - (s->nbatch - na), db = d - (s->nbatch - nb);
        const int64_t ea = da >= 0 ? a->shape[da] : 1, eb = db >= 0 ? b->shape[db] : 1;
        TG_CHECK(ea == eb || ea == 1 || eb == 1, TG_ESHAPE,
                 "matmul: a is %s and b is %s: batch dims %lld and %lld (dim %d of the "
                 "broadcast batch) differ and neither is 1",
                 sa, sb, (long long)ea, (long long)eb, d);
        s->batch[d] = ea == 1 ? eb : ea;
    }
    s->ndim = s->nbatch;
    memcpy(s->shape, s->batch, sizeof s->batch);
    if (a->ndim >= 2) s->shape[s->ndim++] = s->M;
    if (b->ndim >= 2) s->shape[s->ndim++] = s->N;
    return TG_OK;
}

/* The first n dims of v as one stride *st (element k of them, row-major,
 * at k * st), when there is one. */
static bool one_stride(const tg_tensor *v, int n, int64_t *st)
{
    int64_t inner = 0, span = 1;
    bool any = false;
    *st = 0;
    for (int d = 0; d < n; d++)
        if (v->shape[d] == 0) return true;   /* no element to walk */
    for (int d = n - 1; d >= 0; d--) {
        if (v->shape[d] == 1) continue;
        if (any && v->strides[d] != inner * span) return false;
        if (!any) inner = v->strides[d];
        any = true;
        span *= v->shape[d];
    }
    *st = inner;
    return true;
}

/* v, whose first n dims are to be one stride, as *out (a new reference):
 * v itself when they are, else its contiguous copy; *st is that stride. */
static int flat_leading(tg_tensor **out, tg_tensor *v, int n, int64_t *st)
{
    if (one_stride(v, n, st)) {
        *out = tg_tensor_retain(v);
        return TG_OK;
    }
    TG_TRY(tg_contiguous(out, v));
    TG_ASSERT(one_stride(*out, n, st));
    return TG_OK;
}

/* t as the matrices of batch s: a view (new reference) of shape (batch...,
 * rows, cols) whose broadcast batch dims, and the added dim of a vector,
 * have stride 0. */
static tg_tensor *batched_view(const tg_tensor *t, bool is_b, const mm_shape *s)
{
    int64_t shape[TG_MAX_DIMS], strides[TG_MAX_DIMS];
    const int nb = s->nbatch, tb = t->ndim > 2 ? t->ndim - 2 : 0, r = t->ndim - 2;
    for (int d = 0; d < nb; d++) {
        const int td = d - (nb - tb);
        shape[d] = s->batch[d];
        strides[d] = td >= 0 && t->shape[td] != 1 ? t->strides[td] : 0;
    }
    shape[nb] = is_b ? s->K : s->M;
    shape[nb + 1] = is_b ? s->N : s->K;
    strides[nb] = t->ndim >= 2 ? t->strides[r] : is_b ? t->strides[0] : 0;
    strides[nb + 1] = t->ndim >= 2 ? t->strides[r + 1] : is_b ? 0 : t->strides[0];
    return tg__tensor_view_of(t->storage, t->dtype, nb + 2, shape, strides, t->offset);
}

/* The matrices of a batched view (batch dims flattened to one stride). */
static int as_batched_mat(tg_tensor **keep, tg_tensor *v, int nb, mat *m)
{
    int64_t bs;
    TG_TRY(flat_leading(keep, v, nb, &bs));
    const tg_tensor *k = *keep;
    *m = (mat){k, k->shape[nb], k->shape[nb + 1], k->offset, bs, k->strides[nb],
               k->strides[nb + 1]};
    return TG_OK;
}

/* c = a @ b with b at most 2-d: a's leading dims fold into the rows of one
 * (rows, K) x (K, N) product, as torch folds them. */
static int matmul_folded(tg_tensor *a, tg_tensor *b, const mm_shape *s, tg_tensor *c)
{
    tg_tensor *af = NULL;
    const int64_t rows = a->ndim >= 2 ? tg__numel(a->ndim - 1, a->shape) : 1;
    int64_t rs = 0;
    if (a->ndim >= 2) {
        TG_TRY(flat_leading(&af, a, a->ndim - 1, &rs));
    } else {
        af = tg_tensor_retain(a);
    }
    const mat ma = {af, rows, s->K, af->offset, 0, rs, af->strides[af->ndim - 1]};
    const mat mb = b->ndim == 2
                       ? (mat){b, s->K, s->N, b->offset, 0, b->strides[0], b->strides[1]}
                       : (mat){b, s->K, 1, b->offset, 0, b->strides[0], 0};
    const int rc = tg__gemm_batched(1, &ma, &mb, NULL, c, false);
    tg_tensor_release(af);
    return rc;
}

/* c = a @ b over the broadcast batch, one gemm per matrix. */
static int matmul_batched(tg_tensor *a, tg_tensor *b, const mm_shape *s, tg_tensor *c)
{
    tg_tensor *va = batched_view(a, false, s), *vb = batched_view(b, true, s);
    tg_tensor *ka = NULL, *kb = NULL;
    mat ma, mb;
    int rc = va && vb ? TG_OK : TG_ENOMEM;
    if (rc == TG_OK) rc = as_batched_mat(&ka, va, s->nbatch, &ma);
    if (rc == TG_OK) rc = as_batched_mat(&kb, vb, s->nbatch, &mb);
    if (rc == TG_OK)
        rc = tg__gemm_batched(tg__numel(s->nbatch, s->batch), &ma, &mb, NULL, c, false);
    tg_tensor_release(va);
    tg_tensor_release(vb);
    tg_tensor_release(ka);
    tg_tensor_release(kb);
    return rc;
}

static int matmul_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                          const void *params)
{
    tg_tensor *a = in[0], *b = in[1];
    mm_shape s;
    TG_CHECK(a && b, TG_EINVAL, "matmul: a and b must not be NULL");
    TG_TRY(tg__check_float_pair("matmul", "a", a, "b", b));
    TG_TRY(matmul_shape_of(a, b, &s));
    tg_tensor *c = tg__tensor_empty(a->dtype, s.ndim, s.shape);
    if (!c) return TG_ENOMEM;
    int rc = b->ndim <= 2 ? matmul_folded(a, b, &s, c) : matmul_batched(a, b, &s, c);
    if (rc < 0) {
        tg_tensor_release(c);
        return rc;
    }
    if (ctx) {   /* each read only for the other's gradient (matmul_backward) */
        tg__ctx_save_if(ctx, a, tg__ctx_needs_grad(ctx, 1));
        tg__ctx_save_if(ctx, b, tg__ctx_needs_grad(ctx, 0));
    }
    *out = c;
    return TG_OK;
}

/* *out = x @ y^T (yt) or x^T @ y (xt), the transpose on the last two dims. */
static int matmul_t(tg_tensor **out, tg_tensor *x, bool xt, tg_tensor *y, bool yt)
{
    tg_tensor *t = NULL;
    int rc;
    if (xt) {
        TG_TRY(tg_transpose(&t, x, -2, -1));
        rc = tg_matmul(out, t, y);
    } else {
        TG_TRY(tg_transpose(&t, y, -2, -1));
        rc = tg_matmul(out, x, t);
    }
    tg_tensor_release(t);
    return rc;
}

/* x (an input of shape m) as matrices: a 1-d a as (1, K), a 1-d b as (K, 1);
 * the shape taken is written to shape, its ndim returned. */
static int matrix_shape(const tg_meta *m, bool is_b, int64_t *shape)
{
    if (m->ndim >= 2) {
        memcpy(shape, m->shape, sizeof(int64_t) * (size_t)m->ndim);
        return m->ndim;
    }
    shape[0] = is_b ? m->shape[0] : 1;
    shape[1] = is_b ? 1 : m->shape[0];
    return 2;
}

/* *out = t summed over the batch dims its input (meta m, as matrices of
 * ndim nd, shape sh) did not have, then given m's shape; steals t. */
static int reduce_to(tg_tensor **out, tg_tensor *t, const tg_meta *m, int nd, const int64_t *sh)
{
    tg_tensor *r = NULL;
    int rc = TG_OK;
    if (t->ndim != nd || memcmp(t->shape, sh, sizeof(int64_t) * (size_t)nd) != 0) {
        rc = tg_sum_to_shape(&r, t, nd, sh);
        tg_tensor_release(t);
        t = r;
    }
    if (rc == TG_OK && nd != m->ndim) {
        rc = tg_reshape(&r, t, m->ndim, m->shape);
        tg_tensor_release(t);
        t = r;
    }
    *out = rc == TG_OK ? t : NULL;
    return rc;
}

/* Each saved operand is read only for the gradient that needs it (as
 * PyTorch saves them): X @ W with X constant may have X written in place
 * before backward.  With the operands as matrices a' and b' and g as g'
 * (batch..., M, N):  da' = g' b'^T and db' = a'^T g', each summed over
 * the batch dims its operand was broadcast along.  When b is at most 2-d
 * and a has batch dims, db' = a2^T g2 over a's rows folded, as the
 * forward. */
static int matmul_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **grad_in)
{
    const tg_meta *am = tg__ctx_input_meta(ctx, 0), *bm = tg__ctx_input_meta(ctx, 1);
    int64_t ash[TG_MAX_DIMS], bsh[TG_MAX_DIMS], gsh[TG_MAX_DIMS];
    const int an = matrix_shape(am, false, ash), bn = matrix_shape(bm, true, bsh);
    const int gn = (an > bn ? an : bn);
    memcpy(gsh, g->shape, sizeof(int64_t) * (size_t)(gn - 2));
    gsh[gn - 2] = ash[an - 2];
    gsh[gn - 1] = bsh[bn - 1];
    tg_tensor *a, *b, *gm = NULL, *xm = NULL, *t = NULL;
    TG_TRY(tg_reshape(&gm, g, gn, gsh));
    int rc = TG_OK;
    if (tg__ctx_needs_grad(ctx, 0) && (rc = tg__ctx_saved(ctx, 1, &b)) == TG_OK &&
        (rc = tg_reshape(&xm, b, bn, bsh)) == TG_OK &&
        (rc = matmul_t(&t, gm, false, xm, true)) == TG_OK)
        rc = reduce_to(&grad_in[0], t, am, an, ash);
    tg_tensor_release(xm);
    xm = NULL;
    if (rc == TG_OK && tg__ctx_needs_grad(ctx, 1) && (rc = tg__ctx_saved(ctx, 0, &a)) == TG_OK) {
        tg_tensor *g2 = NULL;
        if (bm->ndim <= 2 && am->ndim >= 3) {   /* a's rows folded: (rows, K)^T (rows, N) */
            const int64_t rows = tg__numel(am->ndim - 1, am->shape);
            rc = tg_reshape(&xm, a, 2, (int64_t[]){rows, ash[an - 1]});
            if (rc == TG_OK) rc = tg_reshape(&g2, gm, 2, (int64_t[]){rows, gsh[gn - 1]});
        } else {
            rc = tg_reshape(&xm, a, an, ash);
            if (rc == TG_OK) g2 = tg_tensor_retain(gm);
        }
        if (rc == TG_OK && (rc = matmul_t(&t, xm, true, g2, false)) == TG_OK)
            rc = reduce_to(&grad_in[1], t, bm, bn, bsh);
        tg_tensor_release(g2);
    }
    tg_tensor_release(xm);
    tg_tensor_release(gm);
    return rc;
}

static const tg_op_schema matmul_schema = {
    .name = "matmul", .arity = 2, .amp = TG_AMP_LOWER_PRECISION, .forward = matmul_forward,
    .backward = matmul_backward, .double_backward = true,
    .vjp = "da = g b^T, db = a^T g (summed over broadcast dims)",
};

int tg_matmul(tg_tensor **out, tg_tensor *a, tg_tensor *b)
{
    TG_CHECK(out != NULL, TG_EINVAL, "matmul: out must not be NULL");
    TG_CHECK(a != NULL && b != NULL, TG_EINVAL, "matmul: a and b must not be NULL");
    TG_TRY(tg__check_amp_dtypes("matmul", "a", a, "b", b));
    tg_tensor *in[2] = {a, b};
    return tg_op_call(&matmul_schema, out, 2, in, NULL, 0);
}

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__matmul_ops[] = {&matmul_schema};
static_assert(sizeof tg__matmul_ops / sizeof tg__matmul_ops[0] == TG__matmul_N,
              "src/ops/families.h must count the matmul ops");
