/* src/ops/bilinear.c - F.bilinear(x1, x2, weight, bias) of PyTorch 1.13,
 * composed of differentiable public ops (derivatives of any order follow).
 *
 *   y[..., o] = sum_ij x1[..., i] A[o, i, j] x2[..., j] + b[o]
 *
 * With the leading dims folded into B rows, the sum is one GEMM of
 * B*in1*in2*out multiply-adds (torch's _trilinear does the same work) in
 * one of two orders, whichever keeps the smaller intermediate on the tape:
 *
 *   outer:  z = x1 (B, in1, 1) * x2 (B, 1, in2), read as (B, in1*in2);
 *           y = z A^T + b, A read as (out, in1*in2)           (tg_linear)
 *           keeps B*in1*in2 values;
 *   x2 first: t = x2 A2^T, A2 = A read as (out*in1, in2), t read as
 *           (B, out, in1); y = t x1 (B, in1, 1) + b            (tg_bmm)
 *           keeps B*out*in1 values, less when out < in2 (a bilinear
 *           score, out = 1, keeps in1 values a row instead of in1*in2).
 * Both read A in place (no permuted copy). */
#include "core/core.h"
#include "autograd/tape.h"
#include "tapegrad/ops.h"

/* The operand rules of torch's bilinear: float operands of one dtype,
 * x1 and x2 of the same rank >= 1 and leading dims, weight (out, in1, in2)
 * matching their last dims, bias (out) or NULL. */
static int check_bilinear(tg_tensor **out, const tg_tensor *x1, const tg_tensor *x2,
                          const tg_tensor *w, const tg_tensor *b)
{
    const char *op = "bilinear";
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", op);
    TG_CHECK(x1 != NULL && x2 != NULL && w != NULL, TG_EINVAL,
             "%s: x1, x2 and weight must not be NULL (bias may be)", op);
    TG_CHECK(tg_dtype_is_float(x1->dtype), TG_EDTYPE, "%s: x1 has dtype %s; float dtypes only",
             op, tg_dtype_name(x1->dtype));
    const tg_tensor *other[3] = {x2, w, b};
    static const char *const names[3] = {"x2", "weight", "bias"};
    for (int i = 0; i < 3; i++)
        TG_CHECK(!other[i] || other[i]->dtype == x1->dtype, TG_EDTYPE,
                 "%s: %s has dtype %s but x1 %s; they must be the same, as torch's", op,
                 names[i], tg_dtype_name(other[i]->dtype), tg_dtype_name(x1->dtype));
    TG_CHECK(x1->ndim >= 1, TG_ESHAPE, "%s: x1 is 0-d; x1 and x2 must have at least 1 dim", op);
    TG_CHECK(x1->ndim == x2->ndim, TG_ESHAPE,
             "%s: x1 has %d dims and x2 %d; they must be the same", op, x1->ndim, x2->ndim);
    for (int d = 0; d < x1->ndim - 1; d++)
        TG_CHECK(x1->shape[d] == x2->shape[d], TG_ESHAPE,
                 "%s: x1 and x2 differ at batch dim %d (%lld and %lld); they must be the same",
                 op, d, (long long)x1->shape[d], (long long)x2->shape[d]);
    TG_CHECK(w->ndim == 3, TG_ESHAPE, "%s: weight has %d dims; it must be (out, in1, in2)", op,
             w->ndim);
    const int64_t in1 = x1->shape[x1->ndim - 1], in2 = x2->shape[x2->ndim - 1];
    TG_CHECK(in1 == w->shape[1], TG_ESHAPE,
             "%s: x1 has %lld features (last dim) but weight (out, in1, in2) has in1=%lld", op,
             (long long)in1, (long long)w->shape[1]);
    TG_CHECK(in2 == w->shape[2], TG_ESHAPE,
             "%s: x2 has %lld features (last dim) but weight (out, in1, in2) has in2=%lld", op,
             (long long)in2, (long long)w->shape[2]);
    TG_CHECK(!b || (b->ndim == 1 && b->shape[0] == w->shape[0]), TG_ESHAPE,
             "%s: bias must be 1-d with out=%lld elements (weight's dim 0)", op,
             (long long)w->shape[0]);
    /* the intermediate (below) must be addressable: rows * in1 *
     * min(out, in2) values */
    const int64_t out_f = w->shape[0], k = out_f < in2 ? out_f : in2;
    int64_t rows = 1, z = 0;
    for (int d = 0; d < x1->ndim - 1; d++) rows *= x1->shape[d];
    TG_CHECK(!__builtin_mul_overflow(in1, k, &z) && !__builtin_mul_overflow(rows, z, &z),
             TG_EINVAL, "%s: an intermediate of %lld rows by %lld by %lld is too large", op,
             (long long)rows, (long long)in1, (long long)k);
    return TG_OK;
}

/* y = (x1 x2^T read as (B, in1*in2)) A^T + b, A read as (out, in1*in2). */
static int bilinear_outer(tg_tensor **y, tg_tensor *x1, tg_tensor *x2, tg_tensor *w,
                          tg_tensor *b, int64_t rows)
{
    const int64_t out_f = w->shape[0], in1 = w->shape[1], in2 = w->shape[2];
    enum { A, C, P, Z, WR, N };
    tg_tensor *t[N] = {NULL};
    int rc;
    TG_TRY_GOTO(tg_reshape(&t[A], x1, 3, (const int64_t[]){rows, in1, 1}));
    TG_TRY_GOTO(tg_reshape(&t[C], x2, 3, (const int64_t[]){rows, 1, in2}));
    TG_TRY_GOTO(tg_mul(&t[P], t[A], t[C]));   /* (B, in1, in2): x1[r, i] x2[r, j] */
    TG_TRY_GOTO(tg_reshape(&t[Z], t[P], 2, (const int64_t[]){rows, in1 * in2}));
    TG_TRY_GOTO(tg_reshape(&t[WR], w, 2, (const int64_t[]){out_f, in1 * in2}));
    rc = tg_linear(y, t[Z], t[WR], b);
done:
    for (int i = 0; i < N; i++) tg_tensor_release(t[i]);
    return rc;
}

/* t[r, o, i] = sum_j A[o, i, j] x2[r, j] (one GEMM, A read as
 * (out*in1, in2)), then y[r, o] = sum_i t[r, o, i] x1[r, i] + b[o]. */
static int bilinear_x2_first(tg_tensor **y, tg_tensor *x1, tg_tensor *x2, tg_tensor *w,
                             tg_tensor *b, int64_t rows)
{
    const int64_t out_f = w->shape[0], in1 = w->shape[1], in2 = w->shape[2];
    enum { X2, WR, T, T3, X1, Y3, Y2, N };
    tg_tensor *t[N] = {NULL};
    int rc;
    TG_TRY_GOTO(tg_reshape(&t[X2], x2, 2, (const int64_t[]){rows, in2}));
    TG_TRY_GOTO(tg_reshape(&t[WR], w, 2, (const int64_t[]){out_f * in1, in2}));
    TG_TRY_GOTO(tg_linear(&t[T], t[X2], t[WR], NULL));   /* (B, out*in1) */
    TG_TRY_GOTO(tg_reshape(&t[T3], t[T], 3, (const int64_t[]){rows, out_f, in1}));
    TG_TRY_GOTO(tg_reshape(&t[X1], x1, 3, (const int64_t[]){rows, in1, 1}));
    TG_TRY_GOTO(tg_bmm(&t[Y3], t[T3], t[X1]));   /* (B, out, 1) */
    TG_TRY_GOTO(tg_reshape(b ? &t[Y2] : y, t[Y3], 2, (const int64_t[]){rows, out_f}));
    if (b) rc = tg_add(y, t[Y2], b);
done:
    for (int i = 0; i < N; i++) tg_tensor_release(t[i]);
    return rc;
}

/* The product itself, operands checked; autocast is off around it. */
static int bilinear(tg_tensor **out, tg_tensor *x1, tg_tensor *x2, tg_tensor *w, tg_tensor *b)
{
    const int nd = x1->ndim;
    const int64_t out_f = w->shape[0], in2 = w->shape[2];
    int64_t rows = 1;   /* the product of the leading dims */
    for (int d = 0; d < nd - 1; d++) rows *= x1->shape[d];
    int64_t ysh[TG_MAX_DIMS];
    for (int d = 0; d < nd - 1; d++) ysh[d] = x1->shape[d];
    ysh[nd - 1] = out_f;
    tg_tensor *y = NULL;
    int rc = out_f < in2 ? bilinear_x2_first(&y, x1, x2, w, b, rows)
                         : bilinear_outer(&y, x1, x2, w, b, rows);
    if (rc >= 0) rc = tg_reshape(out, y, nd, ysh);
    tg_tensor_release(y);
    return rc;
}

int tg_bilinear(tg_tensor **out, tg_tensor *x1, tg_tensor *x2, tg_tensor *weight,
                tg_tensor *bias)
{
    TG_TRY(check_bilinear(out, x1, x2, weight, bias));
    tg_tensor *y = NULL;
    tg__lib_enter();
    /* torch's bilinear is on none of its autocast lists: it runs in its
     * operands' dtype, so the inner linear is not lowered */
    const bool suspended = tg__autocast_suspend(true);
    int rc = bilinear(&y, x1, x2, weight, bias);
    tg__autocast_suspend(suspended);
    tg__lib_leave();
    if (rc >= 0) *out = y;
    return tg__scope_capture(out, rc);
}
