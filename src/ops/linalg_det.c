/* src/ops/linalg_det.c - det and slogdet of tapegrad/linalg.h, from an LU
 * factorization with partial pivoting (LAPACK's getrf), each one op over a
 * batch of matrices: det is the product of U's diagonal in order times the
 * permutation's sign (-1 per pivot row that differs from its own), as
 * torch.linalg.det computes it from linalg_lu_factor (getrf factors A^T,
 * whose determinant is A's); slogdet the sum of log |u_ii| and the product
 * of their signs.
 *
 * Backward, with solve and products (so gradients of gradients follow):
 *   det:     dA = (g det) inv(A)^T, under create_graph the solve of
 *            A^T X = (g det) I (torch's linalg_det_backward; no inverse
 *            is formed); at a singular matrix (det exactly 0)
 *            g adj(A)^T, the adjugate from the SVD A = U S V^T,
 *            adj(A)^T = det(U) det(V) U diag(prod_{j != i} s_j) V^T, which
 *            is not differentiable again (a create_graph backward there is
 *            TG_EUNSUPPORTED);
 *   slogdet: its op's output is (..., 2), sign and log |det|; dA = g_1
 *            inv(A)^T from the second, under create_graph the solve of
 *            A^T X = g_1 I, the solve unchecked so that a singular
 *            matrix gives torch's infinities.
 * Both keep A's LU factors and pivots, from which a backward that records
 * no graph takes inv(A)^T (tg__la_lu_inv_t) without factoring A again. */
#include <assert.h>
#include <math.h>
#include <string.h>

#include "autograd/tape.h"
#include "ops/families.h"
#include "ops/linalg_la.h"
#include "tapegrad/autograd.h"
#include "tapegrad/linalg.h"
#include "tapegrad/ops.h"

/* ---- det and slogdet ----------------------------------------------------- */

/* The gathered batch of det_all and where its dets go. */
typedef struct det_job {
    tg_dtype dt;
    int n;
    bool slog;
    char *a;      /* A's matrices, factored in place */
    int *piv;     /* their pivots, n each (NULL: not kept, in ws) */
    void *d;
} det_job;

/* Matrix b's det (slog: sign and log |det|); ws: the pivots when not
 * kept. */
static int det_one(void *job, int64_t b, void *ws)
{
    const det_job *j = job;
    const tg_dtype dt = j->dt;
    const int n = j->n;
    const bool slog = j->slog;
    void *d = j->d;
    int *ipiv = j->piv ? j->piv + (size_t)b * (size_t)n : ws;
    char *lu = j->a + (size_t)b * (size_t)n * (size_t)n * tg_dtype_size(dt);
    tg__lapack_getrf(dt, n, lu, ipiv);
    const int s = tg__la_perm_sign(n, ipiv);
    if (dt == TG_F64) {
        const double *u = (const double *)(void *)lu;
        double *o = d;
        if (slog) {
            double sg = s, la = 0;
            for (int i = 0; i < n; i++) {
                const double v = u[(size_t)i * (size_t)n + (size_t)i];
                sg *= v > 0 ? 1.0 : v < 0 ? -1.0 : 0.0;
                la += log(fabs(v));
            }
            o[2 * b] = sg, o[2 * b + 1] = la;
        } else {
            double p = 1;
            for (int i = 0; i < n; i++) p *= u[(size_t)i * (size_t)n + (size_t)i];
            o[b] = p * s;
        }
    } else {
        const float *u = (const float *)(void *)lu;
        float *o = d;
        if (slog) {
            float sg = (float)s, la = 0;
            for (int i = 0; i < n; i++) {
                const float v = u[(size_t)i * (size_t)n + (size_t)i];
                sg *= v > 0 ? 1.0f : v < 0 ? -1.0f : 0.0f;
                la += logf(fabsf(v));
            }
            o[2 * b] = sg, o[2 * b + 1] = la;
        } else {
            float p = 1;
            for (int i = 0; i < n; i++) p *= u[(size_t)i * (size_t)n + (size_t)i];
            o[b] = p * (float)s;
        }
    }
    return TG_OK;
}

/* Each matrix's det (slog: sign and log |det|, two values) into the
 * contiguous d; with lu (A's shape, not NULL with a ctx) A's LU factors
 * and their pivots (TG_I32, A's shape without the last dim) into lu and
 * piv, for the backward (tg__la_lu_inv_t). */
static int det_all(const tg_tensor *A, bool slog, void *d, tg_tensor *lu, tg_tensor *piv)
{
    const int bn = A->ndim - 2;
    det_job j = {.dt = A->dtype, .n = (int)A->shape[bn], .slog = slog, .d = d};
    if (lu) {
        j.a = tg_tensor_data(lu);
        j.piv = tg_tensor_data(piv);
        tg__gather(A, j.dt, j.a);
    } else {
        j.a = tg__la_gather(A, bn, A->shape, 2, j.dt);
        if (!j.a) return TG_ENOMEM;
    }
    const double n = j.n;
    const int rc = tg__la_batch(tg__la_count(bn, A->shape), n * n * n, (size_t)j.n * sizeof(int),
                                det_one, &j);
    if (!lu) tg__work_free(j.a);
    return rc;
}

/* The tensors det_all keeps for a recorded call (ctx): LU and pivots, new
 * references, or both NULL without a ctx.  TG_ENOMEM. */
static int factors_new(const tg_ctx *ctx, const tg_tensor *A, tg_tensor **lu, tg_tensor **piv)
{
    *lu = *piv = NULL;
    if (!ctx) return TG_OK;
    *lu = tg__tensor_uninit(A->dtype, A->ndim, A->shape);
    *piv = *lu ? tg__tensor_uninit(TG_I32, A->ndim - 1, A->shape) : NULL;
    if (*piv) return TG_OK;
    tg_tensor_release(*lu);
    *lu = NULL;
    return TG_ENOMEM;
}

/* The end of det's and slogdet's forwards: with rc >= 0 and a ctx, saves
 * lu and piv (the next two slots), then *out = y; on any error y is
 * released and *out untouched.  Releases lu and piv. */
static int factors_finish(tg_ctx *ctx, int rc, tg_tensor *lu, tg_tensor *piv, tg_tensor *y,
                          tg_tensor **out)
{
    if (rc >= 0 && ctx) rc = tg__ctx_save(ctx, lu);
    if (rc >= 0 && ctx) rc = tg__ctx_save(ctx, piv);
    tg_tensor_release(lu);
    tg_tensor_release(piv);
    if (rc < 0) {
        tg_tensor_release(y);
        return rc;
    }
    *out = y;
    return TG_OK;
}

static int det_forward(tg_ctx *ctx, tg_tensor **out, int n_in, tg_tensor *const *in,
                       const void *params)
{
    (void)n_in;
    (void)params;
    tg_tensor *A = in[0];
    TG_TRY(tg__la_check("linalg.det", "A", A, true));
    tg_tensor *d = tg__tensor_uninit(A->dtype, A->ndim - 2, A->shape), *lu, *piv;
    if (!d) return TG_ENOMEM;
    int rc = factors_new(ctx, A, &lu, &piv);
    if (rc == TG_OK) rc = det_all(A, false, tg_tensor_data(d), lu, piv);
    if (rc == TG_OK && ctx) rc = tg__ctx_save(ctx, A);
    tg_tensor *y = NULL;
    rc = tg__la_finish(ctx, rc, NULL, d, &y);   /* slots 0 and 1: A and d */
    return factors_finish(ctx, rc, lu, piv, y, out);
}

/* v (...) as (..., 1, 1). */
static int unsqueeze2(tg_tensor **out, tg_tensor *v)
{
    tg_tensor *t = NULL;
    int rc = tg_unsqueeze(&t, v, -1);
    if (rc >= 0) rc = tg_unsqueeze(out, t, -1);
    tg_tensor_release(t);
    return rc;
}

/* (w, shaped (...)) * inv(A)^T; the solve unchecked when `unchecked`.  A
 * backward that records no graph takes inv(A)^T from the forward's LU
 * factors and pivots in ctx's slots lu_slot, lu_slot + 1; a create_graph
 * one solves A^T X = diag(w) (w times the identity) with linalg_solve,
 * whose gradients follow, as torch's linalg_det_backward and
 * slogdet_backward do (no inverse is formed). */
static int scaled_inv_t(tg_ctx *ctx, int lu_slot, tg_tensor *w, tg_tensor *A, bool unchecked,
                        tg_tensor **out)
{
    tg_tensor *at = NULL, *w2 = NULL, *eye = NULL, *dw = NULL, *lu, *piv;
    int rc;
    TG_TRY_GOTO(unsqueeze2(&w2, w));
    if (!tg_grad_enabled()) {
        TG_TRY_GOTO(tg__ctx_saved(ctx, lu_slot, &lu));
        TG_TRY_GOTO(tg__ctx_saved(ctx, lu_slot + 1, &piv));
        TG_TRY_GOTO(tg__la_lu_inv_t(&at, lu, piv));
        rc = tg_mul(out, w2, at);
        goto done;
    }
    const int64_t n = A->shape[A->ndim - 1];
    TG_TRY_GOTO(tg_tensor_eye(&eye, A->dtype, n, n));
    TG_TRY_GOTO(tg_mul(&dw, w2, eye));   /* (..., n, n): w on each diagonal */
    TG_TRY_GOTO(tg__la_mT(&at, A));
    rc = unchecked ? tg__linalg_solve_unchecked(out, at, dw) : tg_linalg_solve(out, at, dw);
done:
    tg_tensor_release(at);
    tg_tensor_release(w2);
    tg_tensor_release(eye);
    tg_tensor_release(dw);
    return rc;
}

/* The transposed adjugate of each matrix of A (contiguous, A's shape), from
 * its SVD; into the new tensor *out.  Not recorded. */
static int adjugate_t(const tg_tensor *A, tg_tensor **out)
{
    const tg_dtype dt = TG_F64;   /* computed in f64, rounded to A's dtype */
    const int bn = A->ndim - 2, n = (int)A->shape[bn];
    const int64_t count = tg__la_count(bn, A->shape);
    const size_t nn = (size_t)n * (size_t)n;
    double *a = tg__la_gather(A, bn, A->shape, 2, dt);
    double *w = tg__work_alloc((4 * nn + 3 * (size_t)n + 1) * sizeof *w);
    int *ipiv = tg__malloc((size_t)n * sizeof *ipiv + 1);
    tg_tensor *c = tg__tensor_uninit(dt, A->ndim, A->shape);
    int rc = a && w && ipiv && c ? TG_OK : TG_ENOMEM;
    const int saved = tg__blas_single_begin();
    for (int64_t b = 0; b < count && rc == TG_OK; b++) {
        double *s = w, *u = s + n, *vh = u + nn, *m = vh + nn, *p = m + nn;
        rc = tg__lapack_svd(dt, n, n, a + (size_t)b * nn, true, s, u, vh);
        if (rc < 0) break;
        /* prod_{j != i} s_j without dividing: prefix and suffix products */
        double acc = 1;
        for (int i = 0; i < n; i++) p[i] = acc, acc *= s[i];
        acc = 1;
        for (int i = n - 1; i >= 0; i--) p[i] *= acc, acc *= s[i];
        /* det(U) det(Vh) from their LU factors (each +-1) */
        double sign = 1;
        for (int q = 0; q < 2; q++) {
            memcpy(m, q ? vh : u, nn * sizeof *m);
            tg__lapack_getrf(dt, n, m, ipiv);
            for (int i = 0; i < n; i++) sign *= m[(size_t)i * (size_t)n + (size_t)i] < 0 ? -1 : 1;
            sign *= tg__la_perm_sign(n, ipiv);
        }
        /* adj(A)^T = det(U) det(V) U diag(p) Vh */
        double *cb = (double *)tg_tensor_data(c) + (size_t)b * nn;
        for (int i = 0; i < n; i++)
            for (int jj = 0; jj < n; jj++) {
                double v = 0;
                for (int l = 0; l < n; l++)
                    v += u[(size_t)i * (size_t)n + (size_t)l] * p[l] *
                         vh[(size_t)l * (size_t)n + (size_t)jj];
                cb[(size_t)i * (size_t)n + (size_t)jj] = sign * v;
            }
    }
    tg__blas_restore(saved);
    tg__work_free(a);
    tg__work_free(w);
    free(ipiv);
    if (rc == TG_OK && A->dtype != TG_F64) {
        tg_tensor *r = NULL;
        rc = tg_tensor_to_dtype(&r, c, A->dtype);
        tg_tensor_release(c);
        c = r;
    }
    if (rc < 0) {
        tg_tensor_release(c);
        return rc;
    }
    *out = c;
    return TG_OK;
}

/* Whether one of d's values (a contiguous det) is exactly zero. */
static bool any_zero(const tg_tensor *d)
{
    const int64_t n = tg_tensor_numel(d);
    for (int64_t i = 0; i < n; i++) {
        double v = 1;
        if (tg_tensor_get_flat(d, i, &v) == TG_OK && v == 0) return true;
    }
    return false;
}

static int det_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    tg_tensor *A, *d = NULL, *w = NULL, *c = NULL, *g2 = NULL;
    int rc;
    TG_TRY_GOTO(tg__ctx_saved(ctx, 0, &A));
    TG_TRY_GOTO(tg__ctx_saved_output(ctx, 1, &d));
    if (!any_zero(d)) {
        TG_TRY_GOTO(tg_mul(&w, g, d));
        TG_TRY_GOTO(scaled_inv_t(ctx, 2, w, A, false, &gi[0]));
    } else {
        if (tg_grad_enabled()) {
            rc = tg__error(TG_EUNSUPPORTED, "linalg.det: the gradient at a singular matrix "
                           "(the adjugate) is not differentiable again: a create_graph "
                           "backward through det at a matrix whose det is 0 is not supported");
            goto done;
        }
        TG_TRY_GOTO(adjugate_t(A, &c));
        TG_TRY_GOTO(unsqueeze2(&g2, g));
        TG_TRY_GOTO(tg_mul(&gi[0], g2, c));
    }
done:
    tg_tensor_release(d);
    tg_tensor_release(w);
    tg_tensor_release(c);
    tg_tensor_release(g2);
    return rc;
}

/* KEEP: torch's CPU autocast lists no det (and refuses a bf16 one). */
static const tg_op_schema det_op = {
    .name = "linalg_det", .arity = 1, .amp = TG_AMP_KEEP, .forward = det_forward,
    .backward = det_backward, .double_backward = true,
    .vjp = "da = g * y * inv(a)^T (g * adj(a)^T where y = 0)"};

static int slogdet_forward(tg_ctx *ctx, tg_tensor **out, int n_in, tg_tensor *const *in,
                           const void *params)
{
    (void)n_in;
    (void)params;
    tg_tensor *A = in[0];
    TG_TRY(tg__la_check("linalg.slogdet", "A", A, true));
    int64_t shape[TG_MAX_DIMS];
    memcpy(shape, A->shape, sizeof shape);
    shape[A->ndim - 2] = 2;
    tg_tensor *d = tg__tensor_uninit(A->dtype, A->ndim - 1, shape);
    if (!d) return TG_ENOMEM;
    tg_tensor *lu, *piv;
    int rc = factors_new(ctx, A, &lu, &piv);
    if (rc == TG_OK) rc = det_all(A, true, tg_tensor_data(d), lu, piv);
    if (rc == TG_OK && ctx) rc = tg__ctx_save(ctx, A);
    return factors_finish(ctx, rc, lu, piv, d, out);   /* slots 1 and 2 */
}

/* dA = g[..., 1] inv(A)^T (the sign has no gradient). */
static int slogdet_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    tg_tensor *A, *g1 = NULL, *w = NULL;
    int rc;
    TG_TRY_GOTO(tg__ctx_saved(ctx, 0, &A));
    TG_TRY_GOTO(tg_narrow(&g1, g, -1, 1, 1));
    TG_TRY_GOTO(tg_squeeze(&w, g1, -1));
    TG_TRY_GOTO(scaled_inv_t(ctx, 1, w, A, true, &gi[0]));
done:
    tg_tensor_release(g1);
    tg_tensor_release(w);
    return rc;
}

/* KEEP: torch's CPU autocast lists no slogdet (and refuses a bf16 one). */
static const tg_op_schema slogdet_op = {
    .name = "linalg_slogdet", .arity = 1, .amp = TG_AMP_KEEP, .forward = slogdet_forward,
    .backward = slogdet_backward, .double_backward = true,
    .vjp = "da = g[..., 1] * inv(a)^T (y = [sign, log|det a|])"};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__linalg_det_ops[] = {&det_op, &slogdet_op};
static_assert(sizeof tg__linalg_det_ops / sizeof tg__linalg_det_ops[0] == TG__linalg_det_N,
              "src/ops/families.h must count the linalg_det ops");

/* ---- the public functions ------------------------------------------------ */

int tg_linalg_det(tg_tensor **out, tg_tensor *A)
{
    TG_CHECK(out != NULL, TG_EINVAL, "linalg.det: out is NULL");
    return tg_op_call(&det_op, out, 1, &A, NULL, 0);
}

int tg_linalg_slogdet(tg_tensor **sign, tg_tensor **logabsdet, tg_tensor *A)
{
    TG_CHECK(sign != NULL || logabsdet != NULL, TG_EINVAL,
             "linalg.slogdet: sign and logabsdet are both NULL");
    TG_TRY(tg__la_distinct("linalg.slogdet", 2, (tg_tensor **const[]){sign, logabsdet},
                           (const char *const[]){"sign", "logabsdet"}));
    tg__lib_enter();
    tg_tensor *d = NULL, *s = NULL, *l = NULL, *t = NULL, *u = NULL;
    int rc = tg_op_call(&slogdet_op, &d, 1, &A, NULL, 0);
    if (rc >= 0 && sign) {
        rc = tg_tensor_detach(&t, d);
        if (rc >= 0) rc = tg_narrow(&u, t, -1, 0, 1);
        if (rc >= 0) rc = tg_squeeze(&s, u, -1);
    }
    tg_tensor_release(u);
    u = NULL;
    if (rc >= 0 && logabsdet) {
        rc = tg_narrow(&u, d, -1, 1, 1);
        if (rc >= 0) rc = tg_squeeze(&l, u, -1);
    }
    tg_tensor_release(d);
    tg_tensor_release(t);
    tg_tensor_release(u);
    tg__lib_leave();
    if (sign) return tg__scope_capture_pair(sign, s, logabsdet, l, rc);
    return tg__scope_capture_pair(logabsdet, l, NULL, NULL, rc);
}
