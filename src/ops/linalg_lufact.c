/* src/ops/linalg_lufact.c - torch.linalg.lu_factor, lu_factor_ex, lu and lu_solve of
 * tapegrad/linalg.h: A = P L U with partial pivoting (LAPACK's getrf) for a
 * batch of m x n matrices (lu_solve: square), k = min(m, n): P (m, m), L
 * (m, k) unit lower and U (k, n) upper triangular.
 *
 * One op, lu_factor, gives the packed LU (m, n) (L's strictly lower part,
 * its unit diagonal implied, and U on and above the diagonal).  getrf
 * factors a column-major buffer, so each row-major A is transposed in and
 * the factor out.  The pivots (k 1-based row swaps, LAPACK's, as torch's
 * int32) are not differentiable and come from the same factorization run
 * again (deterministic), in the public function and in the backward (which
 * needs P).  Backward (torch 1.13's lu_factor_ex_backward: gL = gLU[:, :k],
 * gU = gLU[:k, :], then linalg_lu_backward), with
 * tg_linalg_solve_triangular, tril, triu, narrow, cat and matmul so
 * gradients of gradients follow:
 *   square: gA = P L^-T (tril(L^T gL, -1) + triu(gU U^T)) U^-T;
 *   wide (m < n, U = [U1 U2]): X = tril(L^T gL - triu(gU) U^T, -1) U1^-T,
 *     gA = P L^-T [X + triu(gU1), gU2];
 *   tall (m > n, L = [L1; L2]): X = L1^-T triu(gU U^T - L^T tril(gL, -1)),
 *     gA = P [X + tril(gL1, -1); gL2] U^-T.
 * lu unpacks LU with tril, triu and P from the pivots; lu_solve is made of
 * P, matmul and two triangular solves, so their gradients follow from
 * these. */
#include <assert.h>
#include <string.h>

#include "autograd/tape.h"
#include "ops/families.h"
#include "ops/linalg_la.h"
#include "tapegrad/linalg.h"
#include "tapegrad/ops.h"

typedef struct lufact_params {
    bool check;   /* lu_factor: an exact zero on U's diagonal is an error */
} lufact_params;

/* The LU of every matrix of the gathered batch a (count m x n row-major
 * matrices) in place, row-major, its k = min(m, n) pivots into piv
 * (count * k, or NULL) and getrf's info into info (count, or NULL: the
 * 1-based index of U's first exact zero on the diagonal, else 0).  check:
 * TG_EINVAL for a zero on U's diagonal, torch's words. */
static int factor_all(tg_dtype dt, int m, int n, int64_t count, char *a, int *piv, int *info_out,
                      bool check, bool batched)
{
    const size_t es = tg_dtype_size(dt), nn = (size_t)m * (size_t)n;
    const int k = m < n ? m : n;
    int *ip = tg__malloc((size_t)k * sizeof *ip + 1);
    char *w = tg__work_alloc(nn * es + 1);
    int rc = TG_OK;
    if (!ip || !w) rc = TG_ENOMEM;
    const int saved = tg__blas_single_begin();
    for (int64_t b = 0; b < count && rc == TG_OK; b++) {
        char *mb = a + (size_t)b * nn * es;
        tg__la_transpose(dt, m, n, mb, w);   /* column-major m x n */
        const int info = tg__lapack_getrf_mn(dt, m, n, w, ip);
        if (info_out) info_out[b] = info;
        if (info > 0 && check) {
            char note[48] = "";
            if (batched) snprintf(note, sizeof note, " (Batch element %lld):", (long long)b);
            rc = tg__error(TG_EINVAL, "torch.linalg.lu_factor:%s U[%d,%d] is zero and using "
                           "it on lu_solve would result in a division by zero. If you still "
                           "want to perform the factorization, consider calling linalg.lu(A, "
                           "pivot) or linalg.lu_factor_ex(A, pivot)", note, info, info);
            break;
        }
        tg__la_transpose(dt, n, m, w, mb);
        if (piv) memcpy(piv + (size_t)b * (size_t)k, ip, (size_t)k * sizeof *ip);
    }
    tg__blas_restore(saved);
    free(ip);
    tg__work_free(w);
    return rc;
}

static int lufact_forward(tg_ctx *ctx, tg_tensor **out, int n_in, tg_tensor *const *in,
                          const void *params)
{
    (void)n_in;
    const lufact_params *p = params;
    tg_tensor *A = in[0];
    const char *fn = p->check ? "torch.linalg.lu_factor" : "torch.linalg.lu";
    TG_TRY(tg__la_check(fn, "A", A, false));
    const int bn = A->ndim - 2, m = (int)A->shape[bn], n = (int)A->shape[bn + 1];
    tg_tensor *Y = tg__tensor_uninit(A->dtype, A->ndim, A->shape);
    char *a = Y ? tg__la_gather(A, bn, A->shape, 2, A->dtype) : NULL;
    int rc = a ? TG_OK : TG_ENOMEM;
    if (rc == TG_OK)
        rc = factor_all(A->dtype, m, n, tg__la_count(bn, A->shape), a, NULL, NULL, p->check,
                        bn > 0);
    if (rc == TG_OK)
        memcpy(tg_tensor_data(Y), a, (size_t)tg_tensor_numel(Y) * tg_dtype_size(A->dtype));
    tg__work_free(a);
    return tg__la_finish(ctx, rc, A, Y, out);
}

/* P (..., n, n) in dt with A = P L U from the 1-based pivots piv (count
 * rows of k <= n, each checked to be in 1..n: TG_EINVAL naming fn,
 * torch's words); shape is P's (ndim dims). */
static int perm_matrices(const char *fn, tg_dtype dt, int ndim, const int64_t *shape, int k,
                         const int *piv, tg_tensor **P)
{
    const int n = (int)shape[ndim - 1];
    const int64_t count = tg__la_count(ndim - 2, shape);
    const size_t nn = (size_t)n * (size_t)n;
    tg_tensor *pm = tg__tensor_uninit(dt, ndim, shape);
    int *perm = pm ? tg__malloc((size_t)n * sizeof *perm + 1) : NULL;
    int rc = perm ? TG_OK : TG_ENOMEM;
    for (int64_t b = 0; rc == TG_OK && b < count; b++) {
        const int *ip = piv + (size_t)b * (size_t)k;
        for (int i = 0; i < n; i++) perm[i] = i;
        for (int i = 0; i < k && rc == TG_OK; i++) {   /* row i of P^T A is A's perm[i] */
            if (ip[i] < 1 || ip[i] > n) {
                rc = tg__error(TG_EINVAL, "%s: Pivots given to lu_solve must all be %s (found "
                               "%d). Did you properly pass the result of lu_factor?", fn,
                               ip[i] < 1 ? "greater or equal to 1" :
                                           "smaller or equal to LU.size(-2)", ip[i]);
                break;
            }
            const int t = perm[i];
            perm[i] = perm[ip[i] - 1];
            perm[ip[i] - 1] = t;
        }
        for (size_t e = 0; rc == TG_OK && e < nn; e++) {   /* P[perm[i], i] = 1 */
            const size_t r = e / (size_t)n, c = e % (size_t)n;
            const double v = (size_t)perm[c] == r ? 1.0 : 0.0;
            if (dt == TG_F64) ((double *)tg_tensor_data(pm))[(size_t)b * nn + e] = v;
            else ((float *)tg_tensor_data(pm))[(size_t)b * nn + e] = (float)v;
        }
    }
    free(perm);
    if (rc < 0) {
        tg_tensor_release(pm);
        return rc;
    }
    *P = pm;
    return TG_OK;
}

/* The pivots (..., k) as i32 and, when P is not NULL, the permutation
 * matrices P (..., m, m) in A's dtype with A = P L U, and when info is not
 * NULL getrf's info as i32 (...), from A's LU (not recorded). */
static int lu_pivots(const tg_tensor *A, tg_tensor **piv, tg_tensor **P, tg_tensor **info)
{
    const int bn = A->ndim - 2, m = (int)A->shape[bn], n = (int)A->shape[bn + 1];
    const int k = m < n ? m : n;
    int64_t shape[TG_MAX_DIMS];
    memcpy(shape, A->shape, (size_t)A->ndim * sizeof *shape);
    shape[bn] = k;
    tg_tensor *pv = tg__tensor_uninit(TG_I32, A->ndim - 1, shape);
    tg_tensor *in = info ? tg__tensor_uninit(TG_I32, bn, A->shape) : NULL;
    char *a = pv && (in || !info) ? tg__la_gather(A, bn, A->shape, 2, A->dtype) : NULL;
    int rc = a ? TG_OK : TG_ENOMEM;
    if (rc == TG_OK)
        rc = factor_all(A->dtype, m, n, tg__la_count(bn, A->shape), a, tg_tensor_data(pv),
                        in ? tg_tensor_data(in) : NULL, false, false);
    tg__work_free(a);
    shape[bn] = shape[bn + 1] = m;
    if (rc == TG_OK && P)
        rc = perm_matrices("torch.linalg.lu", A->dtype, A->ndim, shape, k, tg_tensor_data(pv), P);
    if (rc < 0) {
        tg_tensor_release(pv);
        tg_tensor_release(in);
        return rc;
    }
    *piv = pv;
    if (info) *info = in;
    return TG_OK;
}

int tg__la_lu_info(tg_tensor **info, tg_tensor **pivots, const tg_tensor *A)
{
    tg_tensor *piv = NULL;
    const int rc = lu_pivots(A, &piv, NULL, info);
    if (rc == TG_OK && pivots) *pivots = piv;
    else tg_tensor_release(piv);
    return rc;
}

/* Square: P^T gA = L^-T (tril(L^T gL, -1) + triu(gU U^T)) U^-T into *out,
 * L^T gL = gL + tril(LU, -1)^T gL (L's unit diagonal). */
static int back_square(tg_tensor *lu, tg_tensor *g, tg_tensor **out)
{
    tg_tensor *lut = NULL, *t[11] = {NULL};
    int rc;
    TG_TRY_GOTO(tg__la_mT(&lut, lu));
    TG_TRY_GOTO(tg_tril(&t[0], g, -1));                 /* gL */
    TG_TRY_GOTO(tg_triu(&t[1], g, 0));                  /* gU */
    TG_TRY_GOTO(tg_triu(&t[2], lut, 1));                /* tril(LU,-1)^T = triu(LU^T, 1) */
    TG_TRY_GOTO(tg_matmul(&t[3], t[2], t[0]));
    TG_TRY_GOTO(tg_add(&t[4], t[3], t[0]));             /* L^T gL */
    TG_TRY_GOTO(tg_tril(&t[5], t[4], -1));
    TG_TRY_GOTO(tg_tril(&t[6], lut, 0));                /* U^T */
    TG_TRY_GOTO(tg_matmul(&t[7], t[1], t[6]));
    TG_TRY_GOTO(tg_triu(&t[8], t[7], 0));
    TG_TRY_GOTO(tg_add(&t[9], t[5], t[8]));
    /* X U^T = t9 (U^T: LU^T's lower triangle), then L^T Y = X (LU^T's
     * strictly upper triangle, unit diagonal) */
    TG_TRY_GOTO(tg_linalg_solve_triangular(&t[10], lut, t[9], false, false, false));
    TG_TRY_GOTO(tg_linalg_solve_triangular(out, lut, t[10], true, true, true));
done:
    tg_tensor_release(lut);
    tg__la_release(t, 11);
    return rc;
}

/* Wide (m < n, k = m; L (m, m), U = [U1 U2], U1 (m, m)): P^T gA =
 * L^-T [tril(L^T gL - triu(gU) U^T, -1) U1^-T + triu(gU1), gU2], gL the
 * first m columns of g and gU all of it. */
static int back_wide(tg_tensor *lu, tg_tensor *g, int64_t m, int64_t n, tg_tensor **out)
{
    tg_tensor *l1 = NULL, *l1t = NULL, *lut = NULL, *t[14] = {NULL};
    int rc;
    TG_TRY_GOTO(tg_narrow(&l1, lu, -1, 0, m));         /* L and U1 packed (m, m) */
    TG_TRY_GOTO(tg__la_mT(&l1t, l1));
    TG_TRY_GOTO(tg__la_mT(&lut, lu));
    TG_TRY_GOTO(tg_narrow(&t[0], g, -1, 0, m));        /* gL (its upper part masked below) */
    TG_TRY_GOTO(tg_triu(&t[1], l1t, 1));
    TG_TRY_GOTO(tg_matmul(&t[2], t[1], t[0]));
    TG_TRY_GOTO(tg_add(&t[3], t[2], t[0]));            /* L^T gL */
    TG_TRY_GOTO(tg_triu(&t[4], g, 0));                 /* triu(gU) */
    TG_TRY_GOTO(tg_tril(&t[5], lut, 0));               /* U^T (n, m) */
    TG_TRY_GOTO(tg_matmul(&t[6], t[4], t[5]));
    TG_TRY_GOTO(tg_sub(&t[7], t[3], t[6]));
    TG_TRY_GOTO(tg_tril(&t[8], t[7], -1));
    /* X U1^T = t8: U1^T is l1t's lower triangle */
    TG_TRY_GOTO(tg_linalg_solve_triangular(&t[9], l1t, t[8], false, false, false));
    TG_TRY_GOTO(tg_narrow(&t[10], t[4], -1, 0, m));    /* triu(gU1) */
    TG_TRY_GOTO(tg_add(&t[11], t[9], t[10]));
    TG_TRY_GOTO(tg_narrow(&t[12], g, -1, m, n - m));   /* gU2 */
    TG_TRY_GOTO(tg_cat(&t[13], 2, (tg_tensor *[]){t[11], t[12]}, -1));
    /* L^T Y = t13: L^T is l1t's strictly upper triangle, unit diagonal */
    TG_TRY_GOTO(tg_linalg_solve_triangular(out, l1t, t[13], true, true, true));
done:
    tg__la_release((tg_tensor *[]){l1, l1t, lut}, 3);
    tg__la_release(t, 14);
    return rc;
}

/* Tall (m > n, k = n; L = [L1; L2], L1 (n, n), U (n, n)): P^T gA =
 * [L1^-T triu(gU U^T - L^T tril(gL, -1)) + tril(gL1, -1); gL2] U^-T, gU
 * the first n rows of g and gL all of it. */
static int back_tall(tg_tensor *lu, tg_tensor *g, int64_t m, int64_t n, tg_tensor **out)
{
    tg_tensor *u1 = NULL, *u1t = NULL, *e = NULL, *t[16] = {NULL};
    int rc;
    TG_TRY_GOTO(tg_narrow(&u1, lu, -2, 0, n));         /* L1 and U packed (n, n) */
    TG_TRY_GOTO(tg__la_mT(&u1t, u1));
    TG_TRY_GOTO(tg_tensor_eye(&e, tg_tensor_dtype(lu), m, n));
    TG_TRY_GOTO(tg_narrow(&t[0], g, -2, 0, n));        /* gU (its lower part masked below) */
    TG_TRY_GOTO(tg_tril(&t[1], u1t, 0));               /* U^T */
    TG_TRY_GOTO(tg_matmul(&t[2], t[0], t[1]));         /* gU U^T */
    TG_TRY_GOTO(tg_tril(&t[3], lu, -1));
    TG_TRY_GOTO(tg_add(&t[4], t[3], e));               /* L (m, n) */
    TG_TRY_GOTO(tg__la_mT(&t[5], t[4]));
    TG_TRY_GOTO(tg_tril(&t[6], g, -1));                /* tril(gL, -1) */
    TG_TRY_GOTO(tg_matmul(&t[7], t[5], t[6]));         /* L^T tril(gL, -1) */
    TG_TRY_GOTO(tg_sub(&t[8], t[2], t[7]));
    TG_TRY_GOTO(tg_triu(&t[9], t[8], 0));
    /* L1^T X = t9: L1^T is u1t's strictly upper triangle, unit diagonal */
    TG_TRY_GOTO(tg_linalg_solve_triangular(&t[10], u1t, t[9], true, true, true));
    TG_TRY_GOTO(tg_narrow(&t[11], t[6], -2, 0, n));    /* tril(gL1, -1) */
    TG_TRY_GOTO(tg_add(&t[12], t[10], t[11]));
    TG_TRY_GOTO(tg_narrow(&t[13], g, -2, n, m - n));   /* gL2 */
    TG_TRY_GOTO(tg_cat(&t[14], 2, (tg_tensor *[]){t[12], t[13]}, -2));
    /* Y U^T = t14: U^T is u1t's lower triangle */
    TG_TRY_GOTO(tg_linalg_solve_triangular(out, u1t, t[14], false, false, false));
done:
    tg__la_release((tg_tensor *[]){u1, u1t, e}, 3);
    tg__la_release(t, 16);
    return rc;
}

/* gA = P (the square, wide or tall rule above, from the saved LU). */
static int lufact_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    tg_tensor *A, *lu = NULL, *x = NULL, *piv = NULL, *P = NULL;
    int rc;
    TG_TRY_GOTO(tg__ctx_saved(ctx, 0, &A));
    TG_TRY_GOTO(tg__ctx_saved_output(ctx, 1, &lu));
    TG_TRY_GOTO(lu_pivots(A, &piv, &P, NULL));
    const int64_t m = tg_tensor_dim(lu, -2), n = tg_tensor_dim(lu, -1);
    if (m == n) TG_TRY_GOTO(back_square(lu, g, &x));
    else if (m < n) TG_TRY_GOTO(back_wide(lu, g, m, n, &x));
    else TG_TRY_GOTO(back_tall(lu, g, m, n, &x));
    TG_TRY_GOTO(tg_matmul(&gi[0], P, x));
done:
    tg__la_release((tg_tensor *[]){lu, x, piv, P}, 4);
    return rc;
}

static const tg_op_schema lufact_op = {
    .name = "linalg_lu_factor", .arity = 1, .forward = lufact_forward,
    .backward = lufact_backward, .double_backward = true,
    .vjp = "square: da = P L^-T (tril(L^T gL, -1) + triu(gU U^T)) U^-T; wide and tall: "
           "torch 1.13's lu_factor_ex_backward"};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__linalg_lufact_ops[] = {&lufact_op};
static_assert(sizeof tg__linalg_lufact_ops / sizeof tg__linalg_lufact_ops[0] ==
                  TG__linalg_lufact_N,
              "src/ops/families.h must count the linalg_lufact ops");

/* ---- the public functions ------------------------------------------------ */

int tg_linalg_lu_factor(tg_tensor **LU, tg_tensor **pivots, tg_tensor *A)
{
    TG_CHECK(LU != NULL || pivots != NULL, TG_EINVAL,
             "torch.linalg.lu_factor: LU and pivots are both NULL");
    TG_TRY(tg__la_distinct("torch.linalg.lu_factor", 2, (tg_tensor **const[]){LU, pivots},
                           (const char *const[]){"LU", "pivots"}));
    TG_TRY(tg__la_check("torch.linalg.lu_factor", "A", A, false));
    tg_tensor *lu = NULL, *piv = NULL;
    const lufact_params p = {.check = true};
    tg__lib_enter();
    int rc = tg_op_call(&lufact_op, &lu, 1, &A, &p, sizeof p);
    if (rc >= 0 && pivots) rc = lu_pivots(A, &piv, NULL, NULL);
    tg__lib_leave();
    return tg__la_capture3((tg_tensor **[]){LU, pivots, NULL}, (tg_tensor *[]){lu, piv, NULL},
                           rc);
}

/* torch's words for lu_factor_ex's check_errors (%d: the info) */
#define LU_ZERO                                                                                   \
    "U[%d,%d] is zero and using it on lu_solve would result in a division by zero. If you "     \
    "still want to perform the factorization, consider calling linalg.lu(A, pivot) or "          \
    "linalg.lu_factor_ex(A, pivot)"

int tg_linalg_lu_factor_ex(tg_tensor **LU, tg_tensor **pivots, tg_tensor **info, tg_tensor *A,
                           bool check_errors)
{
    static const char fn[] = "torch.linalg.lu_factor_ex";
    TG_CHECK(LU != NULL || pivots != NULL || info != NULL, TG_EINVAL,
             "%s: LU, pivots and info are all NULL", fn);
    TG_TRY(tg__la_distinct(fn, 3, (tg_tensor **const[]){LU, pivots, info},
                           (const char *const[]){"LU", "pivots", "info"}));
    TG_TRY(tg__la_check(fn, "A", A, false));
    tg_tensor *lu = NULL, *piv = NULL, *in = NULL;
    const lufact_params p = {.check = false};
    tg__lib_enter();
    int rc = tg__la_lu_info(&in, &piv, A);
    if (rc >= 0 && check_errors) rc = tg__la_info_check(fn, in, LU_ZERO);
    if (rc >= 0 && LU) rc = tg_op_call(&lufact_op, &lu, 1, &A, &p, sizeof p);
    tg__lib_leave();
    return tg__la_capture3((tg_tensor **[]){LU, pivots, info}, (tg_tensor *[]){lu, piv, in}, rc);
}

int tg_linalg_lu(tg_tensor **P, tg_tensor **L, tg_tensor **U, tg_tensor *A)
{
    TG_CHECK(P != NULL || L != NULL || U != NULL, TG_EINVAL,
             "torch.linalg.lu: P, L and U are all NULL");
    TG_TRY(tg__la_distinct("torch.linalg.lu", 3, (tg_tensor **const[]){P, L, U},
                           (const char *const[]){"P", "L", "U"}));
    TG_TRY(tg__la_check("torch.linalg.lu", "A", A, false));
    const int64_t m = A->shape[A->ndim - 2], n = A->shape[A->ndim - 1], k = m < n ? m : n;
    tg_tensor *lu = NULL, *piv = NULL, *pm = NULL, *l = NULL, *u = NULL, *sl = NULL,
              *e = NULL, *lk = NULL, *uk = NULL;
    const lufact_params p = {.check = false};
    int rc = TG_OK;
    tg__lib_enter();
    if (L || U) TG_TRY_GOTO(tg_op_call(&lufact_op, &lu, 1, &A, &p, sizeof p));
    if (P) TG_TRY_GOTO(lu_pivots(A, &piv, &pm, NULL));
    if (L) {   /* L (m, k): LU's first k columns */
        TG_TRY_GOTO(tg_narrow(&lk, lu, -1, 0, k));
        TG_TRY_GOTO(tg_tril(&sl, lk, -1));
        TG_TRY_GOTO(tg_tensor_eye(&e, A->dtype, m, k));
        TG_TRY_GOTO(tg_add(&l, sl, e));
    }
    if (U) {   /* U (k, n): LU's first k rows */
        TG_TRY_GOTO(tg_narrow(&uk, lu, -2, 0, k));
        TG_TRY_GOTO(tg_triu(&u, uk, 0));
    }
done:
    tg_tensor_release(lk);
    tg_tensor_release(uk);
    tg_tensor_release(lu);
    tg_tensor_release(piv);
    tg_tensor_release(sl);
    tg_tensor_release(e);
    tg__lib_leave();
    return tg__la_capture3((tg_tensor **[]){P, L, U}, (tg_tensor *[]){pm, l, u}, rc);
}

/* X with A X = B (left), X A = B (!left), A^T for adjoint, A = P L U from
 * LU and pivots (module comment):
 *   left:            X = U^-1 L^-1 P^T B      left, adjoint:  X = P L^-T U^-T B
 *   right:           X = B U^-1 L^-1 P^T      right, adjoint: X = B P L^-T U^-T */
int tg_linalg_lu_solve(tg_tensor **out, tg_tensor *LU, tg_tensor *pivots, tg_tensor *B,
                       bool left, bool adjoint)
{
    static const char fn[] = "torch.linalg.lu_solve";
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out is NULL", fn);
    TG_TRY(tg__la_check(fn, "LU", LU, true));
    TG_TRY(tg__la_check(fn, "B", B, false));
    TG_CHECK(B->dtype == LU->dtype, TG_EDTYPE, "%s: Expected LU and B to have the same dtype, "
             "but found LU of type %s and B of type %s instead", fn, tg_dtype_name(LU->dtype),
             tg_dtype_name(B->dtype));
    TG_CHECK(pivots != NULL, TG_EINVAL, "%s: pivots is NULL", fn);
    TG_CHECK(pivots->dtype == TG_I32, TG_EDTYPE, "%s: pivots should be a Tensor of scalar type "
             "int32, found %s", fn, tg_dtype_name(pivots->dtype));
    const int64_t n = LU->shape[LU->ndim - 1];
    bool same = pivots->ndim == LU->ndim - 1;
    for (int i = 0; same && i < pivots->ndim; i++) same = pivots->shape[i] == LU->shape[i];
    TG_CHECK(same, TG_ESHAPE, "%s: pivots must have LU's shape without its last dim (the "
             "batch dims and the number of pivots per batch, %lld)", fn, (long long)n);
    const int64_t rows = B->shape[B->ndim - (left ? 2 : 1)];
    TG_CHECK(rows == n, TG_ESHAPE, "%s: Incompatible shapes of A and B for the equation %s "
             "(%lldx%lld and %lldx%lld)", fn, left ? "AX = B" : "XA = B", (long long)n,
             (long long)n, (long long)B->shape[B->ndim - 2], (long long)B->shape[B->ndim - 1]);
    int bn = 0;
    int64_t bshape[TG_MAX_DIMS + 2];
    TG_TRY(tg__la_broadcast(fn, LU->ndim - 2, LU->shape, B->ndim - 2, B->shape, &bn, bshape));
    tg_tensor *P = NULL, *lut = NULL, *t[3] = {NULL, NULL, NULL};
    int *pv = tg__la_gather(pivots, LU->ndim - 2, LU->shape, 1, TG_I32);
    int rc = pv ? TG_OK : TG_ENOMEM;
    if (rc == TG_OK) rc = perm_matrices(fn, LU->dtype, LU->ndim, LU->shape, (int)n, pv, &P);
    tg__work_free(pv);
    if (rc < 0) return rc;
    tg_tensor *x = NULL;
    tg__lib_enter();
    /* in LU's dtype: autocast off inside (matmul would take f32 to bf16) */
    const bool suspended = tg__autocast_suspend(true);
    TG_TRY_GOTO(tg__la_mT(&lut, LU));
    if (left && !adjoint) {
        TG_TRY_GOTO(tg__la_mT(&t[0], P));
        TG_TRY_GOTO(tg_matmul(&t[1], t[0], B));
        TG_TRY_GOTO(tg_linalg_solve_triangular(&t[2], LU, t[1], false, true, true));
        TG_TRY_GOTO(tg_linalg_solve_triangular(&x, LU, t[2], true, true, false));
    } else if (left) {
        TG_TRY_GOTO(tg_linalg_solve_triangular(&t[0], lut, B, false, true, false));
        TG_TRY_GOTO(tg_linalg_solve_triangular(&t[1], lut, t[0], true, true, true));
        TG_TRY_GOTO(tg_matmul(&x, P, t[1]));
    } else if (!adjoint) {
        TG_TRY_GOTO(tg_linalg_solve_triangular(&t[0], LU, B, true, false, false));
        TG_TRY_GOTO(tg_linalg_solve_triangular(&t[1], LU, t[0], false, false, true));
        TG_TRY_GOTO(tg__la_mT(&t[2], P));
        TG_TRY_GOTO(tg_matmul(&x, t[1], t[2]));
    } else {
        TG_TRY_GOTO(tg_matmul(&t[0], B, P));
        TG_TRY_GOTO(tg_linalg_solve_triangular(&t[1], lut, t[0], true, false, true));
        TG_TRY_GOTO(tg_linalg_solve_triangular(&x, lut, t[1], false, false, false));
    }
done:
    tg_tensor_release(P);
    tg_tensor_release(lut);
    for (int i = 0; i < 3; i++) tg_tensor_release(t[i]);
    tg__autocast_suspend(suspended);
    tg__lib_leave();
    if (rc < 0) {
        tg_tensor_release(x);
        return rc;
    }
    *out = x;
    return tg__scope_capture(out, rc);
}
