/* src/ops/linalg_tri.c - the triangular functions of tapegrad/linalg.h:
 * cholesky (LAPACK's potrf) and solve_triangular (BLAS's trsm), each one
 * op over a batch of matrices.
 *
 * cholesky's op gives the lower factor L from A's lower triangle; upper=true
 * is the transpose of A^T's (torch reads the upper triangle then; views,
 * differentiable).  Its backward is torch's
 * (Murray, arXiv 1602.07527), with L the saved output:
 *   gA = tril(L^T gL);  gA = (gA + tril(gA, -1)^T) / 2;
 *   gA = L^-T gA (solve_triangular, upper, left);  gA = gA L^-1 (lower, right)
 * which is symmetric.  cholesky_ex runs the same op without the error
 * (potrf's partial factor where A is not positive-definite) and takes info
 * from a potrf pass of its own.
 *
 * solve_triangular's op is the left case, A X = B, reading A's upper or
 * lower triangle (unitriangular: not its diagonal, taken as ones); the
 * right case X A = B is the left one transposed, A^T X^T = B^T.  Backward,
 * torch's: gB = solve_triangular(A^T, g) on the other triangle, gA = -gB X^T
 * kept on A's triangle (strictly, when unitriangular), each summed over the
 * batch dims its operand was broadcast along. */
#include <assert.h>
#include <string.h>

#include "autograd/tape.h"
#include "ops/families.h"
#include "ops/linalg_la.h"
#include "tapegrad/linalg.h"
#include "tapegrad/ops.h"

/* ---- cholesky ------------------------------------------------------------ */

/* The gathered batch of chol_forward, factored in place. */
typedef struct chol_job {
    tg_dtype dt;
    int n;
    bool batched;
    bool unchecked;   /* cholesky_ex: a matrix that is not PD is no error */
    int32_t *info;    /* potrf's info of each matrix, or NULL */
    char *a;
} chol_job;

typedef struct chol_params {
    bool unchecked;   /* potrf's partial factor where A is not PD, no error */
} chol_params;

/* Matrix b's lower factor, its strictly upper triangle zeroed. */
static int chol_one(void *job, int64_t b, void *ws)
{
    (void)ws;
    static const char fn[] = "linalg.cholesky";
    const chol_job *j = job;
    const int n = j->n;
    const size_t es = tg_dtype_size(j->dt);
    char *m = j->a + (size_t)b * (size_t)n * (size_t)n * es;
    const int info = tg__lapack_potrf_lower(j->dt, n, m);
    if (j->info) j->info[b] = info;
    if (info > 0 && !j->unchecked) {
        char note[48] = "";
        if (j->batched) snprintf(note, sizeof note, " (Batch element %lld):", (long long)b);
        return tg__error(TG_EINVAL, "%s:%s The factorization could not be completed because "
                         "the input is not positive-definite (the leading minor of order %d "
                         "is not positive-definite).", fn, note, info);
    }
    for (int i = 0; i < n; i++)   /* the strictly upper triangle to zero */
        memset(m + ((size_t)i * (size_t)n + (size_t)i + 1) * es, 0, (size_t)(n - 1 - i) * es);
    return TG_OK;
}

static int chol_forward(tg_ctx *ctx, tg_tensor **out, int n_in, tg_tensor *const *in,
                        const void *params)
{
    (void)n_in;
    const chol_params *p = params;
    static const char fn[] = "linalg.cholesky";
    tg_tensor *A = in[0];
    TG_TRY(tg__la_check(fn, "A", A, true));
    const tg_dtype dt = A->dtype;
    const int bn = A->ndim - 2, n = (int)A->shape[bn];
    const int64_t count = tg__la_count(bn, A->shape);
    const size_t es = tg_dtype_size(dt), nn = (size_t)n * (size_t)n;
    tg_tensor *L = tg__tensor_uninit(dt, A->ndim, A->shape);
    char *a = L ? tg__la_gather(A, bn, A->shape, 2, dt) : NULL;
    int rc = a ? TG_OK : TG_ENOMEM;
    chol_job j = {.dt = dt, .n = n, .batched = bn > 0, .unchecked = p && p->unchecked, .a = a};
    const double dn = n;
    if (rc == TG_OK) rc = tg__la_batch(count, dn * dn * dn / 3, 0, chol_one, &j);
    if (rc == TG_OK) memcpy(tg_tensor_data(L), a, (size_t)count * nn * es);
    tg__work_free(a);
    return tg__la_finish(ctx, rc, NULL, L, out);
}

static int chol_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    tg_tensor *L = NULL, *lt = NULL, *t[6] = {NULL, NULL, NULL, NULL, NULL, NULL};
    int rc;
    TG_TRY_GOTO(tg__ctx_saved_output(ctx, 0, &L));
    TG_TRY_GOTO(tg__la_mT(&lt, L));
    TG_TRY_GOTO(tg_matmul(&t[0], lt, g));
    TG_TRY_GOTO(tg_tril(&t[1], t[0], 0));
    TG_TRY_GOTO(tg_tril(&t[2], t[1], -1));
    TG_TRY_GOTO(tg__la_mT(&t[3], t[2]));
    TG_TRY_GOTO(tg_add(&t[4], t[1], t[3]));
    TG_TRY_GOTO(tg_mul_scalar(&t[5], t[4], 0.5));
    tg_tensor_release(t[0]);
    t[0] = NULL;
    TG_TRY_GOTO(tg_linalg_solve_triangular(&t[0], lt, t[5], true, true, false));
    TG_TRY_GOTO(tg_linalg_solve_triangular(&gi[0], L, t[0], false, false, false));
done:
    tg_tensor_release(L);
    tg_tensor_release(lt);
    for (int i = 0; i < 6; i++) tg_tensor_release(t[i]);
    return rc;
}

/* FP32: torch's CPU autocast lists linalg_cholesky with the ops that run in
 * f32. */
static const tg_op_schema chol_op = {
    .name = "linalg_cholesky", .arity = 1, .amp = TG_AMP_FP32, .forward = chol_forward,
    .backward = chol_backward, .double_backward = true,
    .vjp = "da = y^-T Phi(y^T g) y^-1, Phi: lower triangle, half diagonal, symmetrized"};

/* ---- solve_triangular (left) --------------------------------------------- */

typedef struct tri_params {
    bool upper, unit;
} tri_params;

/* The gathered batch of tri_forward: A's matrices, X = B on entry. */
typedef struct tri_job {
    tg_dtype dt;
    bool upper, unit;
    int n, k;
    const char *a;
    char *x;
} tri_job;

static int tri_one(void *job, int64_t i, void *ws)
{
    (void)ws;
    const tri_job *j = job;
    const size_t es = tg_dtype_size(j->dt), nn = (size_t)j->n * (size_t)j->n;
    tg__blas_trsm_left(j->dt, j->upper, j->unit, j->n, j->k, j->a + (size_t)i * nn * es,
                       j->x + (size_t)i * (size_t)j->n * (size_t)j->k * es);
    return TG_OK;
}

static int tri_forward(tg_ctx *ctx, tg_tensor **out, int n_in, tg_tensor *const *in,
                       const void *params)
{
    (void)n_in;
    static const char fn[] = "linalg.solve_triangular";
    const tri_params *p = params;
    const bool upper = p && p->upper, unit = p && p->unit;
    tg_tensor *A = in[0], *B = in[1];
    TG_TRY(tg__la_check(fn, "A", A, true));
    TG_TRY(tg__la_check(fn, "B", B, false));
    TG_CHECK(B->dtype == A->dtype, TG_EDTYPE,
             "%s: Expected A and B to have the same dtype, but found A of type %s and B of "
             "type %s instead", fn, tg_dtype_name(A->dtype), tg_dtype_name(B->dtype));
    const int n = (int)A->shape[A->ndim - 1], k = (int)B->shape[B->ndim - 1];
    TG_CHECK(B->shape[B->ndim - 2] == n, TG_ESHAPE,
             "%s: Incompatible shapes of A and B for the equation AX = B (%lldx%lld and "
             "%lldx%lld)", fn, (long long)n, (long long)n, (long long)B->shape[B->ndim - 2],
             (long long)k);
    int bn = 0;
    int64_t bshape[TG_MAX_DIMS + 2];
    TG_TRY(tg__la_broadcast(fn, A->ndim - 2, A->shape, B->ndim - 2, B->shape, &bn, bshape));
    TG_CHECK(bn + 2 <= TG_MAX_DIMS, TG_ESHAPE, "%s: the result would have %d dims, more than %d",
             fn, bn + 2, TG_MAX_DIMS);
    int64_t xs[TG_MAX_DIMS];
    memcpy(xs, bshape, (size_t)bn * sizeof *xs);
    xs[bn] = n, xs[bn + 1] = k;
    const tg_dtype dt = A->dtype;
    const int64_t count = tg__la_count(bn, bshape);
    const size_t es = tg_dtype_size(dt), nn = (size_t)n * (size_t)n, nk = (size_t)n * (size_t)k;
    tg_tensor *X = tg__tensor_uninit(dt, bn + 2, xs);
    char *a = X ? tg__la_gather(A, bn, bshape, 2, dt) : NULL;
    void *b = a ? tg__la_gather(B, bn, bshape, 2, dt) : NULL;
    int rc = b ? TG_OK : TG_ENOMEM;
    if (rc == TG_OK) {
        char *x = tg_tensor_data(X);
        memcpy(x, b, (size_t)count * nk * es);
        tri_job j = {.dt = dt, .upper = upper, .unit = unit, .n = n, .k = k, .a = a, .x = x};
        rc = tg__la_batch(count, (double)nn * (double)k, 0, tri_one, &j);
    }
    tg__work_free(a);
    tg__work_free(b);
    return tg__la_finish(ctx, rc, A, X, out);
}

/* solve_triangular of A^T (the other triangle) against g. */
static int tri_solve_t(tg_tensor **out, tg_tensor *at, tg_tensor *g, const void *arg)
{
    const tri_params *p = arg;
    return tg_linalg_solve_triangular(out, at, g, !p->upper, true, p->unit);
}

/* x on A's triangle, strictly when unitriangular (its diagonal is not read). */
static int tri_mask(tg_tensor **out, tg_tensor *x, const void *arg)
{
    const tri_params *p = arg;
    return p->upper ? tg_triu(out, x, p->unit ? 1 : 0) : tg_tril(out, x, p->unit ? -1 : 0);
}

static int tri_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    return tg__la_solve_backward(ctx, g, gi, false, tri_solve_t, tri_mask,
                                 tg__ctx_params(ctx));
}

/* KEEP: torch's CPU autocast lists no solve_triangular (and refuses a bf16
 * one). */
static const tg_op_schema tri_op = {
    .name = "linalg_solve_triangular", .arity = 2, .amp = TG_AMP_KEEP,
    .forward = tri_forward, .backward = tri_backward, .double_backward = true,
    .vjp = "db = solve_triangular(a^T, g), da = -db y^T on a's triangle"};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__linalg_tri_ops[] = {&chol_op, &tri_op};
static_assert(sizeof tg__linalg_tri_ops / sizeof tg__linalg_tri_ops[0] == TG__linalg_tri_N,
              "src/ops/families.h must count the linalg_tri ops");

/* ---- the public functions ------------------------------------------------ */

int tg_linalg_cholesky(tg_tensor **out, tg_tensor *A, bool upper)
{
    TG_CHECK(out != NULL, TG_EINVAL, "linalg.cholesky: out is NULL");
    if (!upper) return tg_op_call(&chol_op, out, 1, &A, NULL, 0);
    /* torch reads the upper triangle then: the lower one of A^T */
    TG_TRY(tg__la_check("linalg.cholesky", "A", A, true));
    tg__lib_enter();
    tg_tensor *at = NULL, *L = NULL, *U = NULL;
    int rc = tg__la_mT(&at, A);
    if (rc >= 0) rc = tg_op_call(&chol_op, &L, 1, &at, NULL, 0);
    if (rc >= 0) rc = tg__la_mT(&U, L);
    tg_tensor_release(at);
    tg_tensor_release(L);
    tg__lib_leave();
    return tg__scope_capture_pair(out, U, NULL, NULL, rc);
}

/* potrf's info of each matrix of A's lower triangle into the new i32
 * *info (A's batch shape), not recorded. */
static int chol_info(tg_tensor **info, const tg_tensor *A)
{
    const int bn = A->ndim - 2, n = (int)A->shape[bn];
    const int64_t count = tg__la_count(bn, A->shape);
    tg_tensor *in = tg__tensor_uninit(TG_I32, bn, A->shape);
    char *a = in ? tg__la_gather(A, bn, A->shape, 2, A->dtype) : NULL;
    int rc = a ? TG_OK : TG_ENOMEM;
    chol_job j = {.dt = A->dtype, .n = n, .unchecked = true, .a = a};
    if (in) j.info = tg_tensor_data(in);
    const double dn = n;
    if (rc == TG_OK) rc = tg__la_batch(count, dn * dn * dn / 3, 0, chol_one, &j);
    tg__work_free(a);
    if (rc < 0) {
        tg_tensor_release(in);
        return rc;
    }
    *info = in;
    return TG_OK;
}

/* torch's words for cholesky_ex's check_errors (%d: the info) */
#define NOT_PD                                                                                    \
    "The factorization could not be completed because the input is not positive-definite "    \
    "(the leading minor of order %d is not positive-definite)."

int tg_linalg_cholesky_ex(tg_tensor **L, tg_tensor **info, tg_tensor *A, bool upper,
                          bool check_errors)
{
    static const char fn[] = "linalg.cholesky_ex";
    TG_CHECK(L != NULL || info != NULL, TG_EINVAL, "%s: L and info are both NULL", fn);
    TG_TRY(tg__la_distinct(fn, 2, (tg_tensor **const[]){L, info},
                           (const char *const[]){"L", "info"}));
    TG_TRY(tg__la_check(fn, "A", A, true));
    tg__lib_enter();
    tg_tensor *at = NULL, *lo = NULL, *y = NULL, *in = NULL;
    const chol_params p = {.unchecked = true};
    /* upper: the lower factor of A^T, transposed (tg_linalg_cholesky's) */
    int rc = upper ? tg__la_mT(&at, A) : (at = tg_tensor_retain(A), TG_OK);
    if (rc >= 0) rc = chol_info(&in, at);
    if (rc >= 0 && check_errors) rc = tg__la_info_check(fn, in, NOT_PD);
    if (rc >= 0 && L) rc = tg_op_call(&chol_op, &lo, 1, &at, &p, sizeof p);
    if (rc >= 0 && L) rc = upper ? tg__la_mT(&y, lo) : (y = tg_tensor_retain(lo), TG_OK);
    tg_tensor_release(at);
    tg_tensor_release(lo);
    tg__lib_leave();
    return tg__la_capture3((tg_tensor **[]){L, info, NULL}, (tg_tensor *[]){y, in, NULL}, rc);
}

int tg_linalg_solve_triangular(tg_tensor **out, tg_tensor *A, tg_tensor *B, bool upper, bool left,
                               bool unitriangular)
{
    TG_CHECK(out != NULL, TG_EINVAL, "linalg.solve_triangular: out is NULL");
    TG_TRY(tg__la_same_dtype("linalg.solve_triangular", A, B, false));
    if (left) {
        const tri_params p = {.upper = upper, .unit = unitriangular};
        return tg_op_call(&tri_op, out, 2, (tg_tensor *[]){A, B}, &p, sizeof p);
    }
    /* X A = B  <=>  A^T X^T = B^T, A^T on the other triangle */
    TG_TRY(tg__la_check("linalg.solve_triangular", "A", A, true));
    TG_TRY(tg__la_check("linalg.solve_triangular", "B", B, false));
    tg__lib_enter();
    tg_tensor *at = NULL, *bt = NULL, *xt = NULL, *x = NULL;
    const tri_params p = {.upper = !upper, .unit = unitriangular};
    int rc = tg__la_mT(&at, A);
    if (rc >= 0) rc = tg__la_mT(&bt, B);
    if (rc >= 0) rc = tg_op_call(&tri_op, &xt, 2, (tg_tensor *[]){at, bt}, &p, sizeof p);
    if (rc >= 0) rc = tg__la_mT(&x, xt);
    tg_tensor_release(at);
    tg_tensor_release(bt);
    tg_tensor_release(xt);
    tg__lib_leave();
    return tg__scope_capture_pair(out, x, NULL, NULL, rc);
}
