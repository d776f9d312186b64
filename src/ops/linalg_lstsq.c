/* src/ops/linalg_lstsq.c - torch.linalg.lstsq of tapegrad/linalg.h: the
 * minimum-norm least-squares solution X = pinv(A) B, made of
 * tg_linalg_pinv and tg_matmul.  torch 1.13's CPU default driver gelsy
 * gives the same minimum-norm solution, and torch's backward is this very
 * product's (linalg_lstsq_backward: pinv_backward of gX B^T for A,
 * pinv(A)^T gX for B), so the gradient and its own gradients follow.
 * Under autocast f16 and bf16 operands are taken in f32, as torch's CPU
 * autocast runs lstsq. */
#include <float.h>

#include "autograd/tape.h"
#include "ops/linalg_la.h"
#include "tapegrad/linalg.h"
#include "tapegrad/ops.h"
#include "tapegrad/registry.h"

/* The solution x (wanted: want_x) and rank r (want_r) of the checked call. */
static int lstsq_impl(tg_tensor **x, tg_tensor **r, tg_tensor *A, tg_tensor *B, double rcond,
                      bool want_x, bool want_r)
{
    static const char fn[] = "torch.linalg.lstsq";
    TG_TRY(tg__la_check(fn, "A", A, false));
    TG_CHECK(tg_dtype_is_float(B->dtype), TG_EDTYPE, "%s: B: Expected a floating point tensor, "
             "found %s", fn, tg_dtype_name(B->dtype));
    TG_CHECK(B->dtype == A->dtype, TG_EDTYPE, "%s: Expected input and other to have the same "
             "dtype, but got input's dtype %s and other's dtype %s", fn,
             tg_dtype_name(A->dtype), tg_dtype_name(B->dtype));
    TG_CHECK(B->ndim >= 1, TG_ESHAPE, "%s: B must have at least 1 dimension", fn);
    const bool vec = B->ndim == A->ndim - 1;   /* torch's rule for a batch of vectors */
    const int64_t m = A->shape[A->ndim - 2];
    TG_CHECK(B->shape[B->ndim - (vec ? 1 : 2)] == m, TG_ESHAPE,
             "%s: input.size(-2) should match other.size(%d): A has %lld rows, B %lld", fn,
             vec ? -1 : -2, (long long)m, (long long)B->shape[B->ndim - (vec ? 1 : 2)]);
    int bn = 0;
    int64_t bshape[TG_MAX_DIMS + 2];
    TG_TRY(tg__la_broadcast(fn, A->ndim - 2, A->shape, B->ndim - (vec ? 1 : 2), B->shape, &bn,
                            bshape));
    const double eps = A->dtype == TG_F64 ? DBL_EPSILON : FLT_EPSILON;
    const int64_t n = A->shape[A->ndim - 1];
    const double rtol = rcond >= 0 ? rcond : eps * (double)(m > n ? m : n);
    tg_tensor *p = NULL, *b = NULL, *y = NULL;
    int rc = TG_OK;
    if (want_x) {
        TG_TRY_GOTO(tg_linalg_pinv(&p, A, -1, rtol, false));
        if (vec) TG_TRY_GOTO(tg_unsqueeze(&b, B, -1));
        TG_TRY_GOTO(tg_matmul(vec ? &y : x, p, vec ? b : B));
        if (vec) TG_TRY_GOTO(tg_squeeze(x, y, -1));
    }
    if (want_r) TG_TRY_GOTO(tg_linalg_matrix_rank(r, A, -1, rtol, false));
done:
    tg_tensor_release(p);
    tg_tensor_release(b);
    tg_tensor_release(y);
    return rc;
}

int tg_linalg_lstsq(tg_tensor **solution, tg_tensor **rank, tg_tensor *A, tg_tensor *B,
                    double rcond)
{
    static const char fn[] = "torch.linalg.lstsq";
    TG_CHECK(solution != NULL || rank != NULL, TG_EINVAL, "%s: solution and rank are both NULL",
             fn);
    TG_TRY(tg__la_distinct(fn, 2, (tg_tensor **const[]){solution, rank},
                           (const char *const[]){"solution", "rank"}));
    TG_CHECK(A != NULL, TG_EINVAL, "%s: A is NULL", fn);
    TG_CHECK(B != NULL, TG_EINVAL, "%s: B is NULL", fn);
    tg_tensor *a = NULL, *b = NULL, *x = NULL, *r = NULL;
    tg_dtype ac;
    int rc = TG_OK;
    tg__lib_enter();
    if (tg_autocast_active(&ac)) {   /* torch's CPU autocast runs lstsq in f32 */
        if (A->dtype == TG_F16 || A->dtype == TG_BF16) rc = tg_to_dtype(&a, A, TG_F32);
        if (rc >= 0 && (B->dtype == TG_F16 || B->dtype == TG_BF16))
            rc = tg_to_dtype(&b, B, TG_F32);
    }
    /* computed in the operands' dtype: autocast off inside (matmul would
     * take f32 to bf16) */
    const bool suspended = tg__autocast_suspend(true);
    if (rc >= 0)
        rc = lstsq_impl(&x, &r, a ? a : A, b ? b : B, rcond, solution != NULL, rank != NULL);
    tg__autocast_suspend(suspended);
    tg_tensor_release(a);
    tg_tensor_release(b);
    tg__lib_leave();
    return tg__la_capture3((tg_tensor **[]){solution, rank, NULL}, (tg_tensor *[]){x, r, NULL},
                           rc);
}
