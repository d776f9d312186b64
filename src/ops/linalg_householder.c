/* src/ops/linalg_householder.c - torch.linalg.householder_product of
 * tapegrad/linalg.h: the first n columns of H_1 H_2 .. H_k, H_i = I -
 * tau_i v_i v_i^T, v_i A's column i below the diagonal with a 1 on it
 * (the reflectors geqrf leaves), A (..., m, n), tau (..., k), m >= n >= k.
 *
 * The values come from LAPACK's orgqr, as torch's CPU kernel.  When a
 * gradient is to be recorded the result is Q + (Y - detach(Y)) with Y the
 * same product written with differentiable ops (applied to the first n
 * columns of the identity from the right: Y = E, Y -= tau_i v_i (v_i^T Y)
 * for i = k-1 .. 0): its values are Q's, its gradients (of any order) are
 * those of the product, which torch's householder_product_backward also
 * gives. */
#include <string.h>

#include "ops/linalg_la.h"
#include "tapegrad/autograd.h"
#include "tapegrad/linalg.h"
#include "tapegrad/ops.h"

static const char FN[] = "torch.linalg.householder_product";

/* The gathered batch: A (count, m, n) row-major, tau (count, k). */
typedef struct hh_job {
    tg_dtype dt;
    int m, n, k;
    char *a, *tau, *q;
} hh_job;

/* Matrix b; ws: A column-major (m x n) then tau (k). */
static int hh_one(void *job, int64_t b, void *ws)
{
    const hh_job *j = job;
    const size_t es = tg_dtype_size(j->dt), mn = (size_t)j->m * (size_t)j->n;
    char *w = ws, *t = w + mn * es;
    tg__la_transpose(j->dt, j->m, j->n, j->a + (size_t)b * mn * es, w);
    memcpy(t, j->tau + (size_t)b * (size_t)j->k * es, (size_t)j->k * es);
    TG_TRY(tg__lapack_orgqr(j->dt, j->m, j->n, j->k, w, t));
    tg__la_transpose(j->dt, j->n, j->m, w, j->q + (size_t)b * mn * es);
    return TG_OK;
}

/* Q from orgqr, not recorded. */
static int hh_lapack(tg_tensor *A, tg_tensor *tau, tg_tensor **out)
{
    const int bn = A->ndim - 2;
    hh_job j = {.dt = A->dtype, .m = (int)A->shape[bn], .n = (int)A->shape[bn + 1],
                .k = (int)tau->shape[tau->ndim - 1]};
    tg_tensor *q = tg__tensor_uninit(A->dtype, A->ndim, A->shape);
    j.a = q ? tg__la_gather(A, bn, A->shape, 2, A->dtype) : NULL;
    j.tau = j.a ? tg__la_gather(tau, bn, A->shape, 1, A->dtype) : NULL;
    int rc = j.tau ? TG_OK : TG_ENOMEM;
    if (rc == TG_OK) {
        j.q = tg_tensor_data(q);
        const double m = j.m, n = j.n, k = j.k;
        rc = tg__la_batch(tg__la_count(bn, A->shape), 4 * m * n * k,
                          ((size_t)j.m * (size_t)j.n + (size_t)j.k + 1) * tg_dtype_size(j.dt),
                          hh_one, &j);
    }
    tg__work_free(j.a);
    tg__work_free(j.tau);
    if (rc < 0) {
        tg_tensor_release(q);
        return rc;
    }
    *out = q;
    return TG_OK;
}

/* v_i (..., m, 1): A's column i below row i, 1 at row i, 0 above. */
static int reflector(tg_tensor *A, int64_t i, tg_tensor **v)
{
    const int64_t m = tg_tensor_dim(A, -2);
    const tg_dtype dt = tg_tensor_dtype(A);
    tg_tensor *c = NULL, *below = NULL, *mask = NULL, *e = NULL;
    int rc = TG_OK;
    TG_TRY_GOTO(tg_narrow(&c, A, -1, i, 1));
    TG_TRY_GOTO(tg_tensor_zeros(&mask, dt, 2, (int64_t[]){m, 1}));
    TG_TRY_GOTO(tg_tensor_zeros(&e, dt, 2, (int64_t[]){m, 1}));
    for (int64_t r = 0; r < m; r++) {   /* constant masks: rows below i, row i */
        const double mv = r > i ? 1.0 : 0.0, ev = r == i ? 1.0 : 0.0;
        if (dt == TG_F64) {
            ((double *)tg_tensor_data(mask))[r] = mv;
            ((double *)tg_tensor_data(e))[r] = ev;
        } else {
            ((float *)tg_tensor_data(mask))[r] = (float)mv;
            ((float *)tg_tensor_data(e))[r] = (float)ev;
        }
    }
    TG_TRY_GOTO(tg_mul(&below, c, mask));
    TG_TRY_GOTO(tg_add(v, below, e));
done:
    tg__la_release((tg_tensor *[]){c, below, mask, e}, 4);
    return rc;
}

/* Y = H_1 .. H_k E with differentiable ops (module comment). */
static int hh_compose(tg_tensor *A, tg_tensor *tau, tg_tensor **out)
{
    const int64_t m = tg_tensor_dim(A, -2), n = tg_tensor_dim(A, -1), k = tg_tensor_dim(tau, -1);
    tg_tensor *y = NULL;
    int rc = tg_tensor_eye(&y, tg_tensor_dtype(A), m, n);
    for (int64_t i = k - 1; rc >= 0 && i >= 0; i--) {
        tg_tensor *v = NULL, *vt = NULL, *vy = NULL, *ti = NULL, *tu = NULL, *w = NULL,
                  *wt = NULL, *ny = NULL;
        TG_TRY_GOTO(reflector(A, i, &v));
        TG_TRY_GOTO(tg__la_mT(&vt, v));
        TG_TRY_GOTO(tg_matmul(&vy, vt, y));              /* v^T Y (..., 1, n) */
        TG_TRY_GOTO(tg_narrow(&ti, tau, -1, i, 1));
        TG_TRY_GOTO(tg_unsqueeze(&tu, ti, -1));          /* tau_i (..., 1, 1) */
        TG_TRY_GOTO(tg_mul(&w, v, tu));
        TG_TRY_GOTO(tg_matmul(&wt, w, vy));
        TG_TRY_GOTO(tg_sub(&ny, y, wt));
        tg_tensor_release(y);
        y = ny, ny = NULL;
    done:
        tg__la_release((tg_tensor *[]){v, vt, vy, ti, tu, w, wt, ny}, 8);
    }
    if (rc < 0) {
        tg_tensor_release(y);
        return rc;
    }
    *out = y;
    return TG_OK;
}

static int check_args(tg_tensor *A, tg_tensor *tau)
{
    TG_TRY(tg__la_check(FN, "A", A, false));
    TG_CHECK(tau != NULL, TG_EINVAL, "%s: tau is NULL", FN);
    TG_CHECK(tau->ndim == A->ndim - 1, TG_ESHAPE, "%s: input must have at least 2 dimensions, "
             "and tau one fewer than input (got %d and %d)", FN, A->ndim, tau->ndim);
    const int64_t m = A->shape[A->ndim - 2], n = A->shape[A->ndim - 1];
    TG_CHECK(m >= n, TG_ESHAPE, "%s: input.shape[-2] must be greater than or equal to "
             "input.shape[-1]", FN);
    TG_CHECK(n >= tau->shape[tau->ndim - 1], TG_ESHAPE, "%s: input.shape[-1] must be greater "
             "than or equal to tau.shape[-1]", FN);
    for (int i = 0; i < A->ndim - 2; i++)
        TG_CHECK(tau->shape[i] == A->shape[i], TG_ESHAPE, "%s: Expected batch dimensions of tau "
                 "to be equal to input.shape[:-2], but got tau's extent %lld at dim %d", FN,
                 (long long)tau->shape[i], i);
    TG_CHECK(tau->dtype == A->dtype, TG_EDTYPE, "%s: tau dtype %s does not match input dtype %s",
             FN, tg_dtype_name(tau->dtype), tg_dtype_name(A->dtype));
    return TG_OK;
}

int tg_linalg_householder_product(tg_tensor **out, tg_tensor *A, tg_tensor *tau)
{
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out is NULL", FN);
    TG_TRY(check_args(A, tau));
    tg_tensor *q = NULL, *y = NULL, *r = NULL;
    int rc = TG_OK;
    tg__lib_enter();
    TG_TRY_GOTO(hh_lapack(A, tau, &q));
    if (tg_grad_enabled() && (tg_tensor_requires_grad(A) || tg_tensor_requires_grad(tau))) {
        TG_TRY_GOTO(hh_compose(A, tau, &y));
        TG_TRY_GOTO(tg__la_attach(&r, q, y));
    } else {
        r = tg_tensor_retain(q);
    }
done:
    tg__la_release((tg_tensor *[]){q, y}, 2);
    tg__lib_leave();
    if (rc < 0) return rc;
    *out = r;
    return tg__scope_capture(out, rc);
}
