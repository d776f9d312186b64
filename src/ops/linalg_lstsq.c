/* src/ops/linalg_lstsq.c - torch.linalg.lstsq of tapegrad/linalg.h: the
 * least-squares solution X of A X = B by one of LAPACK's drivers (gels,
 * gelsy, gelsd, gelss; torch's CPU default gelsy), with torch 1.13's
 * residuals, rank and singular values.
 *
 * The forward runs the driver on every matrix of the broadcast batch.
 * torch's backward (linalg_lstsq_backward) is the derivative of pinv(A) B
 * (pinv at its default tolerance, whatever rcond and driver): for A the
 * pinv_backward of gX B^T, for B pinv(A)^T gX.  So when a gradient is to
 * be recorded the solution is X + (Y - detach(Y)), Y = pinv(A) B: the
 * added term is exactly zero (Y's values less themselves) and its
 * gradient, and its gradients' gradients, are those of pinv(A) B.
 * Residuals, rank and singular values are not differentiable, as torch's.
 * Under autocast f16 and bf16 operands are taken in f32, as torch's CPU
 * autocast runs lstsq. */
#include <float.h>
#include <string.h>

#include "autograd/tape.h"
#include "ops/linalg_la.h"
#include "tapegrad/autograd.h"
#include "tapegrad/linalg.h"
#include "tapegrad/ops.h"
#include "tapegrad/registry.h"
#include "tapegrad/scope.h"

static const char FN[] = "torch.linalg.lstsq";

/* The gathered batch: A (count, m, n) and B (count, m, k) row-major; the
 * results X (count, n, k), res (count, k), sv (count, min(m, n)), rank. */
typedef struct lstsq_job {
    tg_dtype dt;
    char driver;          /* 'g' gels, 'y' gelsy, 'd' gelsd, 's' gelss */
    int m, n, k, ldb;     /* ldb = max(m, n, 1) */
    double rcond;
    bool batched, res;    /* res: sum the squares of b's rows n..m-1 */
    const char *a, *b;
    char *x, *r, *sv;
    int64_t *rank;
} lstsq_job;

/* Matrix i; ws: A column-major (m x n) then B column-major (ldb x k). */
static int lstsq_one(void *job, int64_t i, void *ws)
{
    const lstsq_job *j = job;
    const size_t es = tg_dtype_size(j->dt), mn = (size_t)j->m * (size_t)j->n;
    const int m = j->m, n = j->n, k = j->k, ldb = j->ldb;
    char *a = ws, *b = a + mn * es;
    const int kk = m < n ? m : n;
    tg__la_transpose(j->dt, m, n, j->a + (size_t)i * mn * es, a);
    memset(b, 0, (size_t)ldb * (size_t)k * es);
    const char *bi = j->b + (size_t)i * (size_t)m * (size_t)k * es;
    for (int c = 0; c < k; c++)   /* B's column c into b's column c (its first m rows) */
        for (int r = 0; r < m; r++)
            memcpy(b + ((size_t)c * (size_t)ldb + (size_t)r) * es,
                   bi + ((size_t)r * (size_t)k + (size_t)c) * es, es);
    int rank = 0;
    char *sv = j->sv ? j->sv + (size_t)i * (size_t)kk * es : NULL;
    const int info = tg__lapack_lstsq(j->dt, j->driver, m, n, k, a, b, ldb, j->rcond, sv,
                                      &rank);
    if (info < 0) return info;
    if (info > 0) {
        char note[48] = "";
        if (j->batched) snprintf(note, sizeof note, " (Batch element %lld):", (long long)i);
        if (j->driver == 'g')
            return tg__error(TG_EINVAL, "%s:%s The least squares solution could not be "
                             "computed because the input matrix does not have full rank "
                             "(error code: %d).", FN, note, info);
        return tg__error(TG_EUNSUPPORTED, "%s:%s The algorithm failed to converge because the "
                         "input matrix is ill-conditioned or has too many repeated singular "
                         "values (error code: %d).", FN, note, info);
    }
    if (j->rank) j->rank[i] = rank;
    char *xi = j->x + (size_t)i * (size_t)n * (size_t)k * es;
    for (int r = 0; r < n; r++)   /* b's first n rows, column-major, into X (n, k) */
        for (int c = 0; c < k; c++)
            memcpy(xi + ((size_t)r * (size_t)k + (size_t)c) * es,
                   b + ((size_t)c * (size_t)ldb + (size_t)r) * es, es);
    for (int c = 0; j->res && c < k; c++) {   /* LAPACK's residual parts, rows n..m-1 */
        double s = 0;
        for (int r = n; r < m; r++) {
            const size_t e = (size_t)c * (size_t)ldb + (size_t)r;
            const double v = j->dt == TG_F64 ? ((const double *)(void *)b)[e]
                                             : ((const float *)(void *)b)[e];
            s += v * v;
        }
        if (j->dt == TG_F64) ((double *)(void *)j->r)[(size_t)i * (size_t)k + (size_t)c] = s;
        else ((float *)(void *)j->r)[(size_t)i * (size_t)k + (size_t)c] = (float)s;
    }
    return TG_OK;
}

/* driver (NULL: gelsy) as one letter, or TG_EINVAL with torch's words. */
static int parse_driver(const char *driver, char *d)
{
    static const char *const names[4] = {"gels", "gelsy", "gelsd", "gelss"};
    static const char letters[4] = {'g', 'y', 'd', 's'};
    if (!driver) driver = "gelsy";
    for (int i = 0; i < 4; i++)
        if (!strcmp(driver, names[i])) {
            *d = letters[i];
            return TG_OK;
        }
    return tg__error(TG_EINVAL, "%s: parameter `driver` should be one of (gels, gelsy, gelsd, "
                     "gelss), got '%s'", FN, driver);
}

/* The checked operands' shapes: vec (B a batch of vectors), m, n, k and the
 * broadcast batch shape (bn dims). */
typedef struct lstsq_shape {
    bool vec;
    int64_t m, n, k;
    int bn;
    int64_t bshape[TG_MAX_DIMS + 2];
} lstsq_shape;

static int check_operands(tg_tensor *A, tg_tensor *B, lstsq_shape *s)
{
    TG_TRY(tg__la_check(FN, "A", A, false));
    TG_CHECK(B != NULL, TG_EINVAL, "%s: B is NULL", FN);
    TG_CHECK(tg_dtype_is_float(B->dtype), TG_EDTYPE, "%s: B: Expected a floating point "
             "tensor, found %s", FN, tg_dtype_name(B->dtype));
    TG_CHECK(B->dtype == A->dtype, TG_EDTYPE, "%s: Expected input and other to have the same "
             "dtype, but got input's dtype %s and other's dtype %s", FN,
             tg_dtype_name(A->dtype), tg_dtype_name(B->dtype));
    TG_CHECK(B->ndim >= 1, TG_ESHAPE, "%s: B must have at least 1 dimension", FN);
    s->vec = B->ndim == A->ndim - 1;   /* torch's rule for a batch of vectors */
    s->m = A->shape[A->ndim - 2];
    s->n = A->shape[A->ndim - 1];
    const int64_t bm = B->shape[B->ndim - (s->vec ? 1 : 2)];
    TG_CHECK(bm == s->m, TG_ESHAPE, "%s: input.size(-2) should match other.size(%d): A has "
             "%lld rows, B %lld", FN, s->vec ? -1 : -2, (long long)s->m, (long long)bm);
    s->k = s->vec ? 1 : B->shape[B->ndim - 1];
    TG_CHECK(s->k <= INT32_MAX / (s->m > s->n ? s->m + 1 : s->n + 1), TG_EINVAL,
             "%s: B's %lld columns exceed LAPACK's int sizes", FN, (long long)s->k);
    return tg__la_broadcast(FN, A->ndim - 2, A->shape, B->ndim - (s->vec ? 1 : 2), B->shape,
                            &s->bn, s->bshape);
}

/* t (the broadcast batch bshape, bn dims, then `tail` dims) at A's batch
 * shape: the first copy along each dim A was broadcast along (rank and
 * singular values are A's, as torch's).  Replaces *t. */
static int to_a_batch(tg_tensor **t, const tg_tensor *A, int bn, const int64_t *bshape,
                      int tail)
{
    const int an = A->ndim - 2;
    tg_tensor *cur = tg_tensor_retain(*t), *next = NULL;
    int rc = TG_OK;
    for (int i = 0; i < bn && rc >= 0; i++) {
        const int j = i - (bn - an);
        if ((j < 0 || A->shape[j] == 1) && bshape[i] != 1) {
            rc = tg_narrow(&next, cur, i, 0, 1);
            tg_tensor_release(cur);
            cur = next, next = NULL;
        }
    }
    int64_t shape[TG_MAX_DIMS + 2];
    memcpy(shape, A->shape, (size_t)an * sizeof *shape);
    for (int i = 0; i < tail; i++) shape[an + i] = tg_tensor_dim(*t, bn + i);
    if (rc >= 0) rc = tg_reshape(&next, cur, an + tail, shape);
    tg_tensor_release(cur);
    if (rc < 0) return rc;
    tg_tensor_release(*t);
    *t = next;
    return TG_OK;
}

/* The results of the driver (not recorded): x (..., n, k), res, rank, sv
 * (NULL: not wanted) in torch's shapes. */
static int lapack_results(tg_tensor *A, tg_tensor *B, const lstsq_shape *s, char driver,
                          double rcond, tg_tensor **x, tg_tensor **res, tg_tensor **rank,
                          tg_tensor **sv)
{
    const tg_dtype dt = A->dtype;
    const int bn = s->bn;
    const int64_t count = tg__la_count(bn, s->bshape), kk = s->m < s->n ? s->m : s->n;
    int64_t shape[TG_MAX_DIMS + 2];
    memcpy(shape, s->bshape, (size_t)bn * sizeof *shape);
    lstsq_job j = {.dt = dt, .driver = driver, .m = (int)s->m, .n = (int)s->n, .k = (int)s->k,
                   .rcond = rcond, .batched = bn > 0};
    j.ldb = j.m > j.n ? j.m : j.n;
    j.ldb = j.ldb > 0 ? j.ldb : 1;
    tg_tensor *tx = NULL, *tr = NULL, *tk = NULL, *ts = NULL, *bb = NULL;
    char *a = NULL, *b = NULL;
    int rc = TG_OK;
    shape[bn] = s->n, shape[bn + 1] = s->k;
    TG_TRY_GOTO(tg_tensor_zeros(&tx, dt, bn + 2, shape));
    const bool has_rank = driver != 'g', has_sv = driver == 'd' || driver == 's';
    shape[bn] = kk;
    if (has_sv) TG_TRY_GOTO(tg_tensor_zeros(&ts, dt, bn + 1, shape));
    if (has_rank) TG_TRY_GOTO(tg_tensor_zeros(&tk, TG_I64, bn, shape));
    shape[bn] = s->k;
    j.res = s->m > s->n && driver != 'y';
    if (j.res) TG_TRY_GOTO(tg_tensor_zeros(&tr, dt, bn + 1, shape));
    if (s->vec) TG_TRY_GOTO(tg_unsqueeze(&bb, B, -1));
    a = tg__la_gather(A, bn, s->bshape, 2, dt);
    b = tg__la_gather(bb ? bb : B, bn, s->bshape, 2, dt);
    if (!a || !b) TG_TRY_GOTO(TG_ENOMEM);
    j.a = a, j.b = b, j.x = tg_tensor_data(tx);
    j.r = tr ? tg_tensor_data(tr) : NULL;
    j.sv = ts ? tg_tensor_data(ts) : NULL;
    j.rank = tk ? tg_tensor_data(tk) : NULL;
    const double m = (double)s->m, n = (double)s->n;
    const size_t ws = ((size_t)j.m * (size_t)j.n + (size_t)j.ldb * (size_t)j.k) *
                      tg_dtype_size(dt);
    TG_TRY_GOTO(tg__la_batch(count, 4 * m * n * (m < n ? m : n), ws, lstsq_one, &j));
    if (j.res && (driver == 'd' || driver == 's'))   /* torch's: only when every rank is n */
        for (int64_t i = 0; i < count; i++)
            if (j.rank[i] != s->n) {
                tg_tensor_release(tr);
                tr = NULL;
                break;
            }
    if (tk) TG_TRY_GOTO(to_a_batch(&tk, A, bn, s->bshape, 0));
    if (ts) TG_TRY_GOTO(to_a_batch(&ts, A, bn, s->bshape, 1));
    if (!tr && res) TG_TRY_GOTO(tg_tensor_zeros(&tr, dt, 1, (int64_t[]){0}));
    if (!tk && rank) TG_TRY_GOTO(tg_tensor_zeros(&tk, TG_I64, 1, (int64_t[]){0}));
    if (!ts && sv) TG_TRY_GOTO(tg_tensor_zeros(&ts, dt, 1, (int64_t[]){0}));
done:
    tg__work_free(a);
    tg__work_free(b);
    tg_tensor_release(bb);
    if (rc < 0) {
        tg__la_release((tg_tensor *[]){tx, tr, tk, ts}, 4);
        return rc;
    }
    *x = tx;
    if (res) *res = tr;
    else tg_tensor_release(tr);
    if (rank) *rank = tk;
    else tg_tensor_release(tk);
    if (sv) *sv = ts;
    else tg_tensor_release(ts);
    return TG_OK;
}

/* x + (Y - detach(Y)), Y = pinv(A) B: x's values, pinv(A) B's gradient. */
static int attach_gradient(tg_tensor *A, tg_tensor *B, bool vec, tg_tensor *x, tg_tensor **out)
{
    tg_tensor *p = NULL, *b = NULL, *y = NULL, *yv = NULL;
    int rc = TG_OK;
    TG_TRY_GOTO(tg_linalg_pinv(&p, A, -1, -1, false));
    if (vec) TG_TRY_GOTO(tg_unsqueeze(&b, B, -1));
    TG_TRY_GOTO(tg_matmul(&y, p, vec ? b : B));
    if (vec) TG_TRY_GOTO(tg_squeeze(&yv, y, -1));
    TG_TRY_GOTO(tg__la_attach(out, x, yv ? yv : y));
done:
    tg__la_release((tg_tensor *[]){p, b, y, yv}, 4);
    return rc;
}

/* The checked call in the operands' dtype. */
static int lstsq_impl(tg_tensor **x, tg_tensor **res, tg_tensor **rank, tg_tensor **sv,
                      tg_tensor *A, tg_tensor *B, double rcond, char driver)
{
    lstsq_shape s;
    TG_TRY(check_operands(A, B, &s));
    const double eps = A->dtype == TG_F64 ? DBL_EPSILON : FLT_EPSILON;
    const double rc_ = rcond >= 0 ? rcond : eps * (double)(s.m > s.n ? s.m : s.n);
    tg_tensor *xl = NULL, *xv = NULL;
    int rc = TG_OK;
    TG_TRY_GOTO(lapack_results(A, B, &s, driver, rc_, &xl, res, rank, sv));
    if (s.vec) TG_TRY_GOTO(tg_squeeze(&xv, xl, -1));
    tg_tensor *sol = xv ? xv : xl;
    if (x && tg_grad_enabled() && (tg_tensor_requires_grad(A) || tg_tensor_requires_grad(B)))
        TG_TRY_GOTO(attach_gradient(A, B, s.vec, sol, x));
    else if (x)
        *x = tg_tensor_retain(sol);
done:
    tg_tensor_release(xl);
    tg_tensor_release(xv);
    if (rc < 0) {
        if (res) tg_tensor_release(*res), *res = NULL;
        if (rank) tg_tensor_release(*rank), *rank = NULL;
        if (sv) tg_tensor_release(*sv), *sv = NULL;
    }
    return rc;
}

/* Hands four results to the caller's scope, all or none (tg__la_capture3's
 * rule); steals v[0..4). */
static int capture4(tg_tensor **o[4], tg_tensor *v[4], int rc)
{
    if (rc < 0) {
        tg__la_release(v, 4);
        return rc;
    }
    if (!o[3]) return tg__la_capture3(o, v, rc);
    tg_tensor *last = NULL;
    rc = tg__scope_capture_pair(&last, v[3], NULL, NULL, rc);
    if (rc < 0) {
        tg__la_release(v, 3);
        return rc;
    }
    if (o[0] || o[1] || o[2]) {
        rc = tg__la_capture3(o, v, rc);
        if (rc < 0) {
            if (tg_scope_keep(last)) tg_tensor_release(last);
            return rc;
        }
    }
    *o[3] = last;
    return TG_OK;
}

int tg_linalg_lstsq_ex(tg_tensor **solution, tg_tensor **residuals, tg_tensor **rank,
                       tg_tensor **singular_values, tg_tensor *A, tg_tensor *B, double rcond,
                       const char *driver)
{
    tg_tensor **o[4] = {solution, residuals, rank, singular_values};
    TG_CHECK(solution || residuals || rank || singular_values, TG_EINVAL,
             "%s: solution, residuals, rank and singular_values are all NULL", FN);
    TG_TRY(tg__la_distinct(FN, 4, o, (const char *const[]){"solution", "residuals", "rank",
                                                           "singular_values"}));
    char d = 0;
    TG_TRY(parse_driver(driver, &d));
    TG_CHECK(A != NULL, TG_EINVAL, "%s: A is NULL", FN);
    TG_CHECK(B != NULL, TG_EINVAL, "%s: B is NULL", FN);
    tg_tensor *a = NULL, *b = NULL, *v[4] = {NULL, NULL, NULL, NULL};
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
        rc = lstsq_impl(solution ? &v[0] : NULL, residuals ? &v[1] : NULL, rank ? &v[2] : NULL,
                        singular_values ? &v[3] : NULL, a ? a : A, b ? b : B, rcond, d);
    tg__autocast_suspend(suspended);
    tg_tensor_release(a);
    tg_tensor_release(b);
    tg__lib_leave();
    return capture4(o, v, rc);
}

int tg_linalg_lstsq(tg_tensor **solution, tg_tensor **rank, tg_tensor *A, tg_tensor *B,
                    double rcond)
{
    TG_CHECK(solution != NULL || rank != NULL, TG_EINVAL, "%s: solution and rank are both NULL",
             FN);
    return tg_linalg_lstsq_ex(solution, NULL, rank, NULL, A, B, rcond, NULL);
}
