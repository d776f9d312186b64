/* src/ops/bilinear.c - F.bilinear(x1, x2, weight, bias) of PyTorch 1.13,
 * composed of differentiable public ops (derivatives of any order follow).
 *
 *   y[..., o] = sum_ij x1[..., i] A[o, i, j] x2[..., j] + b[o]
 *
 * With the leading dims folded into B rows, the sum is one GEMM over the
 * outer products of the rows:
 *
 *   z = x1 (B, in1, 1) * x2 (B, 1, in2), read as (B, in1*in2)
 *   y = z A^T + b, A read as (out, in1*in2)           (tg_linear)
 *
 * so the work is the B*in1*in2*out multiply-adds of torch's _trilinear in
 * one product, and the tape holds z (B, in1*in2). */
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
    int64_t rows = 1, z = 0;   /* the outer products' (B, in1*in2) must be addressable */
    for (int d = 0; d < x1->ndim - 1; d++) rows *= x1->shape[d];
    TG_CHECK(!__builtin_mul_overflow(in1, in2, &z) && !__builtin_mul_overflow(rows, z, &z),
             TG_EINVAL, "%s: %lld rows of in1=%lld by in2=%lld products are too many", op,
             (long long)rows, (long long)in1, (long long)in2);
    return TG_OK;
}

/* The product itself, operands checked; autocast is off around it. */
static int bilinear(tg_tensor **out, tg_tensor *x1, tg_tensor *x2, tg_tensor *w, tg_tensor *b)
{
    const int nd = x1->ndim;
    const int64_t out_f = w->shape[0], in1 = w->shape[1], in2 = w->shape[2];
    int64_t rows_b = 1;   /* the product of the leading dims */
    for (int d = 0; d < nd - 1; d++) rows_b *= x1->shape[d];
    int64_t ysh[TG_MAX_DIMS];
    for (int d = 0; d < nd - 1; d++) ysh[d] = x1->shape[d];
    ysh[nd - 1] = out_f;
    enum { A, C, P, Z, WR, Y, N };
    tg_tensor *t[N] = {NULL};
    int rc;
    TG_TRY_GOTO(tg_reshape(&t[A], x1, 3, (const int64_t[]){rows_b, in1, 1}));
    TG_TRY_GOTO(tg_reshape(&t[C], x2, 3, (const int64_t[]){rows_b, 1, in2}));
    TG_TRY_GOTO(tg_mul(&t[P], t[A], t[C]));   /* (B, in1, in2): z[r, i, j] = x1[r, i] x2[r, j] */
    TG_TRY_GOTO(tg_reshape(&t[Z], t[P], 2, (const int64_t[]){rows_b, in1 * in2}));
    TG_TRY_GOTO(tg_reshape(&t[WR], w, 2, (const int64_t[]){out_f, in1 * in2}));
    TG_TRY_GOTO(tg_linear(&t[Y], t[Z], t[WR], b));
    rc = tg_reshape(out, t[Y], nd, ysh);
done:
    for (int i = 0; i < N; i++) tg_tensor_release(t[i]);
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
