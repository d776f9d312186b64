/* src/ops/linalg_eig.c - torch.linalg.eigh and eigvalsh: the eigenvalues
 * (ascending) and orthonormal eigenvectors of a batch of symmetric
 * matrices, from LAPACK's syevd (divide and conquer, as torch's CPU
 * kernel), read from one triangle.
 *
 * One op gives both results packed as (..., n + 1, n): row 0 the
 * eigenvalues L, rows 1..n the matrix Q whose columns are the eigenvectors;
 * the public functions slice it (views, differentiable).  Backward, torch's
 * rule for a Hermitian A (the eigenvectors' sign is arbitrary, so only a
 * loss that does not depend on it has a gradient that means anything):
 *   M = Q^T gQ;  M = (M - M^T) / 2;  R_ij = M_ij / (L_j - L_i) (i != j),
 *   R_ii = gL_i;  gA = Q R Q^T
 * written with differentiable ops (equal eigenvalues divide by zero, as
 * torch's).
 *
 * eigvalsh with no gradient to record (grad mode off, or A not requiring
 * grad) runs the op values-only, (..., n), with syevd's jobz 'N' (no
 * eigenvectors computed, as torch's); such an op is never recorded, so
 * its backward never sees one. */
#include <assert.h>
#include <string.h>

#include "autograd/tape.h"
#include "ops/families.h"
#include "ops/linalg_la.h"
#include "tapegrad/linalg.h"
#include "tapegrad/ops.h"

typedef struct eigh_params {
    bool upper;   /* read A's upper triangle (torch's UPLO='U') */
    bool values;  /* eigenvalues alone, (..., n): never recorded */
} eigh_params;

/* The gathered batch of eigh_forward and its packed output. */
typedef struct eigh_job {
    tg_dtype dt;
    int n, lwork, liwork;   /* syevd's work sizes */
    bool lower, values;     /* values: y holds the eigenvalues alone */
    char *a, *y;
} eigh_job;

/* Matrix b: its eigenvalues, then Q, into y's row block b; ws: syevd's
 * work (lwork elements) then its iwork (liwork ints). */
static int eigh_one(void *job, int64_t b, void *ws)
{
    const eigh_job *j = job;
    const size_t es = tg_dtype_size(j->dt), nn = (size_t)j->n * (size_t)j->n;
    char *m = j->a + (size_t)b * nn * es;
    char *yb = j->y + (size_t)b * ((j->values ? 0 : nn) + (size_t)j->n) * es;
    TG_TRY(tg__lapack_syevd_work(j->dt, j->n, m, yb, j->lower, !j->values, ws, j->lwork,
                                 (int *)(void *)((char *)ws + (size_t)j->lwork * es), j->liwork));
    if (j->values) return TG_OK;
    /* the eigenvectors are m's rows: Q = their transpose */
    tg__la_transpose(j->dt, j->n, j->n, m, yb + (size_t)j->n * es);
    return TG_OK;
}

static int eigh_forward(tg_ctx *ctx, tg_tensor **out, int n_in, tg_tensor *const *in,
                        const void *params)
{
    (void)n_in;
    static const char fn[] = "linalg.eigh";
    const eigh_params *p = params;
    tg_tensor *A = in[0];
    TG_TRY(tg__la_check(fn, "A", A, true));
    const tg_dtype dt = A->dtype;
    const int bn = A->ndim - 2, n = (int)A->shape[bn];
    const int64_t count = tg__la_count(bn, A->shape);
    int64_t shape[TG_MAX_DIMS];
    memcpy(shape, A->shape, sizeof shape);
    shape[bn] = n + 1;
    const bool values = p && p->values;
    if (values) shape[bn] = n;   /* (..., n): the last dim dropped below */
    tg_tensor *y = tg__tensor_uninit(dt, A->ndim - values, shape);
    char *a = y ? tg__la_gather(A, bn, A->shape, 2, dt) : NULL;
    int rc = a ? TG_OK : TG_ENOMEM;
    eigh_job j = {.dt = dt, .n = n, .lower = !(p && p->upper), .values = values, .a = a,
                  .y = y ? tg_tensor_data(y) : NULL};
    tg__lapack_syevd_query(dt, n, j.lower, !values, &j.lwork, &j.liwork);
    const size_t ws = (size_t)j.lwork * tg_dtype_size(dt) + (size_t)j.liwork * sizeof(int);
    const double dn = n;
    if (rc == TG_OK) rc = tg__la_batch(count, (values ? 4 : 9) * dn * dn * dn, ws, eigh_one, &j);
    tg__work_free(a);
    return tg__la_finish(ctx, rc, NULL, y, out);
}

/* Row 0 (L, squeezed to (..., n)) or rows 1.. (Q) of a packed tensor. */
static int unpack(tg_tensor *y, bool values, tg_tensor **out)
{
    const int64_t n = tg_tensor_dim(y, -1);
    if (!values) return tg_narrow(out, y, -2, 1, n);
    tg_tensor *r = NULL;
    int rc = tg_narrow(&r, y, -2, 0, 1);
    if (rc >= 0) rc = tg_squeeze(out, r, -2);
    tg_tensor_release(r);
    return rc;
}

static int eigh_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    tg_tensor *y = NULL, *L = NULL, *Q = NULL, *gL = NULL, *gQ = NULL, *t[12] = {NULL};
    int rc;
    const eigh_params *p = tg__ctx_params(ctx);
    TG_ASSERT(!(p && p->values));   /* values-only runs are never recorded */
    TG_TRY_GOTO(tg__ctx_saved_output(ctx, 0, &y));
    TG_TRY_GOTO(unpack(y, true, &L));
    TG_TRY_GOTO(unpack(y, false, &Q));
    TG_TRY_GOTO(unpack(g, true, &gL));
    TG_TRY_GOTO(unpack(g, false, &gQ));
    const int64_t n = tg_tensor_dim(Q, -1);
    TG_TRY_GOTO(tg__la_mT(&t[0], Q));
    TG_TRY_GOTO(tg_matmul(&t[1], t[0], gQ));                 /* M = Q^T gQ */
    TG_TRY_GOTO(tg__la_mT(&t[2], t[1]));
    TG_TRY_GOTO(tg_sub(&t[3], t[1], t[2]));
    TG_TRY_GOTO(tg_mul_scalar(&t[4], t[3], 0.5));            /* (M - M^T) / 2 */
    TG_TRY_GOTO(tg_unsqueeze(&t[5], L, -2));
    TG_TRY_GOTO(tg_unsqueeze(&t[6], L, -1));
    TG_TRY_GOTO(tg_sub(&t[7], t[5], t[6]));                  /* E_ij = L_j - L_i */
    TG_TRY_GOTO(tg_tensor_eye(&t[8], tg_tensor_dtype(L), n, n));
    TG_TRY_GOTO(tg_add(&t[9], t[7], t[8]));                  /* 1 on the diagonal */
    TG_TRY_GOTO(tg_div(&t[10], t[4], t[9]));                 /* its diagonal is 0 */
    TG_TRY_GOTO(tg_diag_embed(&t[11], gL, 0, -2, -1));
    tg_tensor_release(t[2]);
    t[2] = NULL;
    TG_TRY_GOTO(tg_add(&t[2], t[10], t[11]));                /* R */
    tg_tensor_release(t[3]);
    t[3] = NULL;
    TG_TRY_GOTO(tg_matmul(&t[3], Q, t[2]));
    TG_TRY_GOTO(tg_matmul(&gi[0], t[3], t[0]));              /* Q R Q^T */
done:
    for (int i = 0; i < 12; i++) tg_tensor_release(t[i]);
    tg_tensor_release(y);
    tg_tensor_release(L);
    tg_tensor_release(Q);
    tg_tensor_release(gL);
    tg_tensor_release(gQ);
    return rc;
}

/* KEEP: torch's CPU autocast lists no eigh (and refuses a bf16 one). */
static const tg_op_schema eigh_op = {
    .name = "linalg_eigh", .arity = 1, .amp = TG_AMP_KEEP, .forward = eigh_forward,
    .backward = eigh_backward, .double_backward = true,
    .vjp = "da = Q (skew(Q^T gQ) / (L_j - L_i) + diag(gL)) Q^T (y = [L; Q])"};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__linalg_eig_ops[] = {&eigh_op};
static_assert(sizeof tg__linalg_eig_ops / sizeof tg__linalg_eig_ops[0] == TG__linalg_eig_N,
              "src/ops/families.h must count the linalg_eig ops");

int tg_linalg_eigh(tg_tensor **eigenvalues, tg_tensor **eigenvectors, tg_tensor *A, bool upper)
{
    TG_CHECK(eigenvalues != NULL || eigenvectors != NULL, TG_EINVAL,
             "linalg.eigh: eigenvalues and eigenvectors are both NULL");
    TG_TRY(tg__la_distinct("linalg.eigh", 2, (tg_tensor **const[]){eigenvalues, eigenvectors},
                           (const char *const[]){"eigenvalues", "eigenvectors"}));
    const eigh_params p = {.upper = upper};
    tg__lib_enter();
    tg_tensor *y = NULL, *L = NULL, *Q = NULL;
    int rc = tg_op_call(&eigh_op, &y, 1, &A, &p, sizeof p);
    if (rc >= 0 && eigenvalues) rc = unpack(y, true, &L);
    if (rc >= 0 && eigenvectors) rc = unpack(y, false, &Q);
    tg_tensor_release(y);
    tg__lib_leave();
    if (eigenvalues) return tg__scope_capture_pair(eigenvalues, L, eigenvectors, Q, rc);
    return tg__scope_capture_pair(eigenvectors, Q, NULL, NULL, rc);
}

int tg_linalg_eigvalsh(tg_tensor **out, tg_tensor *A, bool upper)
{
    TG_CHECK(out != NULL, TG_EINVAL, "linalg.eigvalsh: out is NULL");
    if (A && tg_grad_enabled() && tg_tensor_requires_grad(A))
        return tg_linalg_eigh(out, NULL, A, upper);
    /* no gradient to record: syevd without eigenvectors, as torch's */
    const eigh_params p = {.upper = upper, .values = true};
    tg__lib_enter();
    tg_tensor *y = NULL;
    const int rc = tg_op_call(&eigh_op, &y, 1, &A, &p, sizeof p);
    tg__lib_leave();
    return tg__scope_capture_pair(out, y, NULL, NULL, rc);
}
