/* src/ops/linalg_qr.c - torch.linalg.qr: A = Q R for a batch of m x n
 * matrices, Q with orthonormal columns and R upper triangular, from LAPACK's
 * geqrf and orgqr (Householder reflections, as torch's CPU kernel; R's
 * diagonal keeps LAPACK's signs, as torch's).  mode "reduced": Q (m, k),
 * R (k, n), k = min(m, n); "complete": Q (m, m), R (m, n); "r": R alone.
 *
 * One op gives Q and R packed along one last dim (Q's elements, then R's);
 * the public function slices and reshapes it (views, differentiable).
 * Backward (Walter and Lehmann; Liao et al., arXiv 1903.09650, as torch's),
 * with copyltu(M) = tril(M) + tril(M, -1)^T:
 *   m >= n:  M = R gR^T - gQ^T Q;  gA = (gQ + Q copyltu(M)) R^-T
 *   m < n:   R = [U | V], A = [X | Y] (U, X the first m columns):
 *            gQ' = gQ + Y gV^T;  M = U gU^T - gQ'^T Q;
 *            gA = [(gQ' + Q copyltu(M)) U^-T | Q gV]
 * written with differentiable ops (R^-T by solve_triangular).  torch's
 * refusals: no gradient in mode "r" (Q is not computed), nor in mode
 * "complete" with m > n (Q's last columns are not determined by A). */
#include <assert.h>
#include <string.h>

#include "autograd/tape.h"
#include "ops/families.h"
#include "ops/linalg_la.h"
#include "tapegrad/linalg.h"
#include "tapegrad/ops.h"
#include "tapegrad/scope.h"

typedef enum qr_mode { QR_REDUCED, QR_COMPLETE, QR_R } qr_mode;

typedef struct qr_params {
    qr_mode mode;
} qr_params;

/* The packed layout: Q (m, mq) then R (kr, n). */
typedef struct qr_dims {
    int64_t m, n, k, mq, kr;
} qr_dims;

static qr_dims dims_of(int64_t m, int64_t n, qr_mode mode)
{
    const int64_t k = m < n ? m : n;
    return (qr_dims){.m = m, .n = n, .k = k,
                     .mq = mode == QR_R ? 0 : mode == QR_COMPLETE ? m : k,
                     .kr = mode == QR_COMPLETE ? m : k};
}

/* One matrix: a row-major (m, n) into q (m, mq) and r (kr, n), row-major;
 * w (m * max(n, mq) elements) and tau (k) are work. */
#define QR_ONE(T)                                                                           \
    do {                                                                                    \
        const T *src = a;                                                                   \
        T *wb = w, *qo = q, *ro = r;                                                        \
        for (int64_t i = 0; i < d->m; i++)                                                  \
            for (int64_t j = 0; j < d->n; j++) wb[j * d->m + i] = src[i * d->n + j];        \
        rc = tg__lapack_geqrf(dt, (int)d->m, (int)d->n, wb, tau);                           \
        if (rc < 0) break;                                                                  \
        for (int64_t i = 0; i < d->kr; i++)                                                 \
            for (int64_t j = 0; j < d->n; j++) ro[i * d->n + j] = j >= i ? wb[j * d->m + i] : 0; \
        if (d->mq == 0) break;                                                              \
        rc = tg__lapack_orgqr(dt, (int)d->m, (int)d->mq, (int)d->k, wb, tau);               \
        if (rc < 0) break;                                                                  \
        for (int64_t i = 0; i < d->m; i++)                                                  \
            for (int64_t j = 0; j < d->mq; j++) qo[i * d->mq + j] = wb[j * d->m + i];       \
    } while (0)

static int qr_one(tg_dtype dt, const qr_dims *d, const void *a, void *q, void *r, void *w,
                  void *tau)
{
    int rc = TG_OK;
    if (dt == TG_F64) QR_ONE(double);
    else QR_ONE(float);
    return rc;
}
#undef QR_ONE

/* The gathered batch of qr_forward and its packed output. */
typedef struct qr_job {
    tg_dtype dt;
    const qr_dims *d;
    int64_t per, wide;
    char *a, *y;
} qr_job;

/* Matrix b into y's row block b; ws: qr_one's w then tau. */
static int qr_job_one(void *job, int64_t b, void *ws)
{
    const qr_job *j = job;
    const qr_dims *d = j->d;
    const size_t es = tg_dtype_size(j->dt);
    char *yb = j->y + (size_t)(b * j->per) * es;
    return qr_one(j->dt, d, j->a + (size_t)(b * d->m * d->n) * es, yb,
                  yb + (size_t)(d->m * d->mq) * es, ws, (char *)ws + (size_t)(d->m * j->wide) * es);
}

static int qr_forward(tg_ctx *ctx, tg_tensor **out, int n_in, tg_tensor *const *in,
                      const void *params)
{
    (void)n_in;
    const qr_params *p = params;
    const qr_mode mode = p ? p->mode : QR_REDUCED;
    tg_tensor *A = in[0];
    TG_TRY(tg__la_check("linalg.qr", "A", A, false));
    const tg_dtype dt = A->dtype;
    const int bn = A->ndim - 2;
    const qr_dims d = dims_of(A->shape[bn], A->shape[bn + 1], mode);
    const int64_t count = tg__la_count(bn, A->shape), per = d.m * d.mq + d.kr * d.n;
    const size_t es = tg_dtype_size(dt);
    int64_t shape[TG_MAX_DIMS];
    memcpy(shape, A->shape, sizeof shape);
    shape[bn] = per;
    const int64_t wide = d.n > d.mq ? d.n : d.mq;
    tg_tensor *y = tg__tensor_empty(dt, bn + 1, shape);
    char *a = y ? tg__la_gather(A, bn, A->shape, 2, dt) : NULL;
    int rc = a ? TG_OK : TG_ENOMEM;
    qr_job j = {.dt = dt, .d = &d, .per = per, .wide = wide, .a = a,
                .y = y ? tg_tensor_data(y) : NULL};
    const double cost = 4.0 * (double)d.m * (double)d.n * (double)(d.k ? d.k : 1);
    if (rc == TG_OK && d.m > 0 && d.n > 0)
        rc = tg__la_batch(count, cost, (size_t)(d.m * wide + d.k + 1) * es, qr_job_one, &j);
    if (rc == TG_OK && d.mq > 0 && (d.m == 0 || d.n == 0)) {   /* Q's columns: the identity's */
        for (int64_t b = 0; b < count; b++)
            for (int64_t i = 0; i < d.m && i < d.mq; i++)
                tg_dtype_store(dt, tg_tensor_data(y), b * per + i * d.mq + i, 1);
    }
    tg__work_free(a);
    return tg__la_finish(ctx, rc, A, y, out);
}

/* Q (part 0) or R (1) of the packed y. */
static int unpack(tg_tensor *y, const qr_dims *d, int part, tg_tensor **out)
{
    return part == 0 ? tg__la_part(y, 0, d->m, d->mq, out)
                     : tg__la_part(y, d->m * d->mq, d->kr, d->n, out);
}

/* tril(M) + tril(M, -1)^T. */
static int copyltu(tg_tensor *m, tg_tensor **out)
{
    tg_tensor *l = NULL, *s = NULL, *st = NULL;
    int rc = tg_tril(&l, m, 0);
    if (rc >= 0) rc = tg_tril(&s, m, -1);
    if (rc >= 0) rc = tg__la_mT(&st, s);
    if (rc >= 0) rc = tg_add(out, l, st);
    tg__la_release((tg_tensor *[]){l, s, st}, 3);
    return rc;
}

/* (gQ + Q copyltu(R gR^T - gQ^T Q)) R^-T, R square upper triangular. */
static int square_part(tg_tensor *Q, tg_tensor *R, tg_tensor *gQ, tg_tensor *gR, tg_tensor **out)
{
    tg_tensor *t[9] = {NULL};
    int rc;
    TG_TRY_GOTO(tg__la_mT(&t[0], gR));
    TG_TRY_GOTO(tg_matmul(&t[1], R, t[0]));            /* R gR^T */
    TG_TRY_GOTO(tg__la_mT(&t[2], gQ));
    TG_TRY_GOTO(tg_matmul(&t[3], t[2], Q));            /* gQ^T Q */
    TG_TRY_GOTO(tg_sub(&t[4], t[1], t[3]));            /* M */
    TG_TRY_GOTO(copyltu(t[4], &t[5]));
    TG_TRY_GOTO(tg_matmul(&t[6], Q, t[5]));
    TG_TRY_GOTO(tg_add(&t[7], gQ, t[6]));
    TG_TRY_GOTO(tg__la_mT(&t[8], R));                  /* X R^T = B: R^T lower, right */
    TG_TRY_GOTO(tg_linalg_solve_triangular(out, t[8], t[7], false, false, false));
done:
    tg__la_release(t, 9);
    return rc;
}

static int qr_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    const qr_params *p = tg__ctx_params(ctx);
    const tg_meta *ma = tg__ctx_input_meta(ctx, 0);
    const qr_dims d = dims_of(ma->shape[ma->ndim - 2], ma->shape[ma->ndim - 1], p->mode);
    TG_CHECK(p->mode != QR_R, TG_EUNSUPPORTED,
             "linalg.qr: The derivative of linalg.qr depends on Q, which is not computed when "
             "mode='r'. Please use linalg.qr(A, mode='reduced') if you are going to "
             "differentiate through linalg.qr.");
    TG_CHECK(p->mode != QR_COMPLETE || d.m <= d.n, TG_EUNSUPPORTED,
             "linalg.qr: The QR decomposition is not differentiable when mode='complete' and "
             "nrows > ncols.");
    tg_tensor *A, *y = NULL, *x[4] = {NULL}, *t[10] = {NULL};
    int rc;
    TG_TRY_GOTO(tg__ctx_saved(ctx, 0, &A));
    TG_TRY_GOTO(tg__ctx_saved_output(ctx, 1, &y));
    for (int part = 0; part < 2; part++) {
        TG_TRY_GOTO(unpack(y, &d, part, &x[part]));       /* Q, R */
        TG_TRY_GOTO(unpack(g, &d, part, &x[2 + part]));   /* gQ, gR */
    }
    if (d.m >= d.n) {
        TG_TRY_GOTO(square_part(x[0], x[1], x[2], x[3], &gi[0]));
        goto done;
    }
    /* m < n: R = [U | V], A = [X | Y] */
    TG_TRY_GOTO(tg_narrow(&t[0], x[1], -1, 0, d.m));              /* U */
    TG_TRY_GOTO(tg_narrow(&t[1], x[3], -1, 0, d.m));              /* gU */
    TG_TRY_GOTO(tg_narrow(&t[2], x[3], -1, d.m, d.n - d.m));      /* gV */
    TG_TRY_GOTO(tg_narrow(&t[3], A, -1, d.m, d.n - d.m));         /* Y */
    TG_TRY_GOTO(tg__la_mT(&t[4], t[2]));
    TG_TRY_GOTO(tg_matmul(&t[5], t[3], t[4]));
    TG_TRY_GOTO(tg_add(&t[6], x[2], t[5]));                       /* gQ' = gQ + Y gV^T */
    TG_TRY_GOTO(square_part(x[0], t[0], t[6], t[1], &t[7]));      /* gX */
    TG_TRY_GOTO(tg_matmul(&t[8], x[0], t[2]));                    /* gY = Q gV */
    TG_TRY_GOTO(tg_cat(&gi[0], 2, (tg_tensor *[]){t[7], t[8]}, -1));
done:
    tg_tensor_release(y);
    tg__la_release(x, 4);
    tg__la_release(t, 10);
    return rc;
}

/* KEEP: torch's CPU autocast lists no qr (and refuses a bf16 one). */
static const tg_op_schema qr_op = {
    .name = "linalg_qr", .arity = 1, .amp = TG_AMP_KEEP, .forward = qr_forward,
    .backward = qr_backward, .double_backward = true,
    .vjp = "da = (gQ + Q copyltu(R gR^T - gQ^T Q)) R^-T (m >= n), y = [Q, R]"};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__linalg_qr_ops[] = {&qr_op};
static_assert(sizeof tg__linalg_qr_ops / sizeof tg__linalg_qr_ops[0] == TG__linalg_qr_N,
              "src/ops/families.h must count the linalg_qr ops");

int tg_linalg_qr(tg_tensor **Q, tg_tensor **R, tg_tensor *A, const char *mode)
{
    static const char fn[] = "linalg.qr";
    TG_CHECK(Q != NULL || R != NULL, TG_EINVAL, "%s: Q and R are both NULL", fn);
    TG_TRY(tg__la_distinct(fn, 2, (tg_tensor **const[]){Q, R}, (const char *const[]){"Q", "R"}));
    TG_CHECK(mode != NULL, TG_EINVAL, "%s: mode is NULL", fn);
    qr_params p;
    if (!strcmp(mode, "reduced")) p.mode = QR_REDUCED;
    else if (!strcmp(mode, "complete")) p.mode = QR_COMPLETE;
    else if (!strcmp(mode, "r")) p.mode = QR_R;
    else
        return tg__error(TG_EINVAL, "%s: qr received unrecognized mode '%s' but expected one of "
                         "'reduced' (default), 'r', or 'complete'", fn, mode);
    TG_TRY(tg__la_check(fn, "A", A, false));
    const qr_dims d = dims_of(tg_tensor_dim(A, -2), tg_tensor_dim(A, -1), p.mode);
    tg__lib_enter();
    tg_tensor *y = NULL, *q = NULL, *r = NULL;
    int rc = tg_op_call(&qr_op, &y, 1, &A, &p, sizeof p);
    if (rc >= 0 && Q && p.mode == QR_R)   /* torch's empty Q */
        rc = tg_tensor_zeros(&q, tg_tensor_dtype(A), 1, (int64_t[]){0});
    else if (rc >= 0 && Q)
        rc = unpack(y, &d, 0, &q);
    if (rc >= 0 && R) rc = unpack(y, &d, 1, &r);
    tg_tensor_release(y);
    tg__lib_leave();
    if (Q) return tg__scope_capture_pair(Q, q, R, r, rc);
    return tg__scope_capture_pair(R, r, NULL, NULL, rc);
}
