/* src/ops/linalg_exp.c - torch.linalg.matrix_exp of tapegrad/linalg.h for a
 * batch of square matrices, one op.
 *
 * Each matrix, in f64 whatever its dtype, is scaled by 2^-s so that its
 * 1-norm is at most 1/2, its exponential taken by the Taylor polynomial of
 * degree 18 (Horner's rule; the remainder is below 2^-19 / 19!, under f64's
 * rounding) and squared s times, then rounded once to the input's dtype
 * (f64, f32, bf16 or f16).  torch 1.13 picks a polynomial degree by the
 * norm instead and computes in the input's dtype (its CPU bf16 kernel
 * gives non-finite values; it has no f16 one).
 *
 * Backward, torch's: the gradient for g is the upper right n x n block of
 * matrix_exp([[A^T, g], [0, A^T]]) (the Frechet derivative's adjoint), made
 * of this op, cat and narrow, so gradients of gradients follow. */
#include <assert.h>
#include <math.h>
#include <string.h>

#include "autograd/tape.h"
#include "ops/families.h"
#include "ops/linalg_la.h"
#include "tapegrad/linalg.h"
#include "tapegrad/ops.h"

#define EXP_DEGREE 18

/* exp of the n x n f64 matrix a (row-major) into e; w: 2 n n doubles. */
static void exp_matrix(int n, const double *a, double *e, double *w)
{
    const size_t nn = (size_t)n * (size_t)n;
    double norm = 0;
    for (int j = 0; j < n; j++) {
        double c = 0;
        for (int i = 0; i < n; i++) c += fabs(a[(size_t)i * (size_t)n + (size_t)j]);
        norm = fmax(norm, c);
    }
    int s = 0;
    if (norm > 0.5) {
        int ex = 0;
        (void)frexp(norm / 0.5, &ex);   /* norm / 0.5 <= 2^ex */
        s = ex;
    }
    const double scale = ldexp(1.0, -s);
    double *x = w, *t = w + nn;
    for (size_t i = 0; i < nn; i++) x[i] = a[i] * scale;
    /* Horner: E = I + X/1 (I + X/2 (I + ... (I + X/18))) */
    memset(e, 0, nn * sizeof *e);
    for (int i = 0; i < n; i++) e[(size_t)i * (size_t)n + (size_t)i] = 1;
    for (int k = EXP_DEGREE; k >= 1; k--) {
        tg__gemm(TG_F64, false, false, n, n, n, x, n, e, n, 0.0, t, n);
        for (size_t i = 0; i < nn; i++) e[i] = t[i] / k;
        for (int i = 0; i < n; i++) e[(size_t)i * (size_t)n + (size_t)i] += 1;
    }
    for (int i = 0; i < s; i++) {
        tg__gemm(TG_F64, false, false, n, n, n, e, n, e, n, 0.0, t, n);
        memcpy(e, t, nn * sizeof *e);
    }
}

static int mexp_forward(tg_ctx *ctx, tg_tensor **out, int n_in, tg_tensor *const *in,
                        const void *params)
{
    (void)n_in;
    (void)params;
    tg_tensor *A = in[0];
    TG_TRY(tg__la_check_half("linalg.matrix_exp", "A", A, true));
    const int bn = A->ndim - 2, n = (int)A->shape[bn];
    const int64_t count = tg__la_count(bn, A->shape);
    const size_t nn = (size_t)n * (size_t)n;
    tg_tensor *Y = tg__tensor_uninit(A->dtype, A->ndim, A->shape);
    double *a = Y ? tg__la_gather(A, bn, A->shape, 2, TG_F64) : NULL;
    double *w = a ? tg__work_alloc(3 * nn * sizeof *w + 1) : NULL;
    int rc = w ? TG_OK : TG_ENOMEM;
    for (int64_t b = 0; rc == TG_OK && b < count; b++) {
        double *ab = a + (size_t)b * nn;
        exp_matrix(n, ab, w, w + nn);
        memcpy(ab, w, nn * sizeof *w);
    }
    if (rc == TG_OK) tg__scatter(Y, TG_F64, a);
    tg__work_free(a);
    tg__work_free(w);
    if (rc == TG_OK && ctx) rc = tg__ctx_save(ctx, A);
    if (rc < 0) {
        tg_tensor_release(Y);
        return rc;
    }
    *out = Y;
    return TG_OK;
}

/* dA = matrix_exp([[A^T, g], [0, A^T]])[:n, n:]. */
static int mexp_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    tg_tensor *A, *at = NULL, *z = NULL, *top = NULL, *bot = NULL, *m = NULL, *e = NULL,
              *r = NULL;
    int rc;
    TG_TRY_GOTO(tg__ctx_saved(ctx, 0, &A));
    const int64_t n = tg_tensor_dim(A, -1);
    TG_TRY_GOTO(tg__la_mT(&at, A));
    TG_TRY_GOTO(tg_tensor_zeros_like(&z, A));
    TG_TRY_GOTO(tg_cat(&top, 2, (tg_tensor *[]){at, g}, -1));
    TG_TRY_GOTO(tg_cat(&bot, 2, (tg_tensor *[]){z, at}, -1));
    TG_TRY_GOTO(tg_cat(&m, 2, (tg_tensor *[]){top, bot}, -2));
    TG_TRY_GOTO(tg_linalg_matrix_exp(&e, m));
    TG_TRY_GOTO(tg_narrow(&r, e, -2, 0, n));
    TG_TRY_GOTO(tg_narrow(&gi[0], r, -1, n, n));
done:
    tg_tensor_release(at);
    tg_tensor_release(z);
    tg_tensor_release(top);
    tg_tensor_release(bot);
    tg_tensor_release(m);
    tg_tensor_release(e);
    tg_tensor_release(r);
    return rc;
}

/* KEEP: torch's CPU autocast lists no matrix_exp (a bf16 one stays bf16). */
static const tg_op_schema mexp_op = {
    .name = "linalg_matrix_exp", .arity = 1, .amp = TG_AMP_KEEP, .forward = mexp_forward,
    .backward = mexp_backward, .double_backward = true,
    .vjp = "da = matrix_exp([[a^T, g], [0, a^T]])[:n, n:]"};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__linalg_exp_ops[] = {&mexp_op};
static_assert(sizeof tg__linalg_exp_ops / sizeof tg__linalg_exp_ops[0] == TG__linalg_exp_N,
              "src/ops/families.h must count the linalg_exp ops");

int tg_linalg_matrix_exp(tg_tensor **out, tg_tensor *A)
{
    TG_CHECK(out != NULL, TG_EINVAL, "linalg.matrix_exp: out is NULL");
    return tg_op_call(&mexp_op, out, 1, &A, NULL, 0);
}
