/* src/ops/linalg_svd.c - torch.linalg.svd and svdvals: A = U diag(S) Vh for a
 * batch of m x n matrices, k = min(m, n) singular values descending, from
 * LAPACK's gesdd (divide and conquer, as torch's CPU kernel).
 *
 * One op gives all three results packed along one last dim of m mu + k +
 * nv n elements (mu = nv = k, or m and n with full_matrices): U's, S's and
 * Vh's elements in turn; the public functions slice and reshape it (views,
 * differentiable).  Backward, torch 1.13's rule (real case), with U, S, Vh
 * the saved output and gU, gS, gVh the parts of the gradient (with
 * full_matrices, U's first k columns and Vh's first k rows only, as torch):
 *   - gU and gVh zero (svdvals, or a loss of S alone): gA = U diag(gS) Vh;
 *   - else, skew(X) = X - X^T, E_ij = S_j^2 - S_i^2 (1 on the diagonal):
 *     gA = (skew(U^T gU) S_j + S_i skew(Vh gVh^T)) / E + diag(gS), then
 *     m > n: gA = (U gA + (I - U U^T) gU / S) Vh;
 *     m < n: gA = U (gA Vh + (S^-1 gVh) (I - Vh^T Vh));
 *     m = n: gA = U gA Vh;
 *   written with differentiable ops.  Equal singular values divide by zero
 *   (inf or NaN) where the loss reads U or Vh, as torch's; a zero singular
 *   value likewise when m != n. */
#include <assert.h>
#include <string.h>

#include "autograd/tape.h"
#include "ops/families.h"
#include "ops/linalg_la.h"
#include "tapegrad/linalg.h"
#include "tapegrad/ops.h"
#include "tapegrad/scope.h"

typedef struct svd_params {
    bool full;
} svd_params;

/* The packed layout of an (m, n) A's results. */
typedef struct svd_dims {
    int64_t m, n, k, mu, nv;
} svd_dims;

static svd_dims dims_of(int64_t m, int64_t n, bool full)
{
    const int64_t k = m < n ? m : n;
    return (svd_dims){.m = m, .n = n, .k = k, .mu = full ? m : k, .nv = full ? n : k};
}

/* The gathered batch of svd_forward and its packed output. */
typedef struct svd_job {
    tg_dtype dt;
    const svd_dims *d;
    bool full;
    int64_t per;
    int lwork;   /* gesdd's work, asked once for the batch */
    char *a, *y;
} svd_job;

/* Matrix b: U, S, Vh into y's row block b; ws: gesdd's work (lwork
 * elements) then its iwork. */
static int svd_one(void *job, int64_t b, void *ws)
{
    const svd_job *j = job;
    const svd_dims *d = j->d;
    const size_t es = tg_dtype_size(j->dt), mn = (size_t)(d->m * d->n);
    char *yb = j->y + (size_t)(b * j->per) * es;
    char *u = yb, *s = u + (size_t)(d->m * d->mu) * es, *vh = s + (size_t)d->k * es;
    return tg__lapack_svd_work(j->dt, (int)d->m, (int)d->n, j->a + (size_t)b * mn * es, j->full,
                               s, u, vh, ws, j->lwork,
                               (int *)(void *)((char *)ws + (size_t)j->lwork * es));
}

static int svd_forward(tg_ctx *ctx, tg_tensor **out, int n_in, tg_tensor *const *in,
                       const void *params)
{
    (void)n_in;
    static const char fn[] = "linalg.svd";
    const svd_params *p = params;
    const bool full = p && p->full;
    tg_tensor *A = in[0];
    TG_TRY(tg__la_check(fn, "A", A, false));
    const tg_dtype dt = A->dtype;
    const int bn = A->ndim - 2;
    const svd_dims d = dims_of(A->shape[bn], A->shape[bn + 1], full);
    const int64_t count = tg__la_count(bn, A->shape), per = d.m * d.mu + d.k + d.nv * d.n;
    const size_t es = tg_dtype_size(dt);
    int64_t shape[TG_MAX_DIMS];
    memcpy(shape, A->shape, sizeof shape);
    shape[bn] = per;
    tg_tensor *y = tg__tensor_empty(dt, bn + 1, shape);
    char *a = y ? tg__la_gather(A, bn, A->shape, 2, dt) : NULL;
    int rc = a ? TG_OK : TG_ENOMEM;
    svd_job j = {.dt = dt, .d = &d, .full = full, .per = per, .a = a,
                 .y = y ? tg_tensor_data(y) : NULL};
    const double cost = 4.0 * (double)d.m * (double)d.n * (double)(d.k ? d.k : 1);
    int liwork;
    tg__lapack_svd_query(dt, (int)d.m, (int)d.n, full, &j.lwork, &liwork);
    const size_t ws = (size_t)j.lwork * es + (size_t)liwork * sizeof(int);
    if (rc == TG_OK) rc = tg__la_batch(count, 3 * cost, ws, svd_one, &j);
    tg__work_free(a);
    if (rc == TG_OK && full && d.k == 0) {   /* no gesdd: U or Vh, first, is the identity */
        const int64_t side = d.m > d.n ? d.m : d.n;
        tg_tensor *e = NULL;
        rc = tg_tensor_eye(&e, dt, side, side);
        for (int64_t b = 0; b < count && rc == TG_OK; b++)
            memcpy((char *)tg_tensor_data(y) + (size_t)(b * per) * es, tg_tensor_data(e),
                   (size_t)(side * side) * es);
        tg_tensor_release(e);
    }
    return tg__la_finish(ctx, rc, NULL, y, out);
}

/* U (part 0), S (1) or Vh (2) of the packed y, whose batch dims are those
 * of y but its last. */
static int unpack(tg_tensor *y, const svd_dims *d, int part, tg_tensor **out)
{
    if (part == 0) return tg__la_part(y, 0, d->m, d->mu, out);
    if (part == 1) return tg__la_part(y, d->m * d->mu, -1, d->k, out);
    return tg__la_part(y, d->m * d->mu + d->k, d->nv, d->n, out);
}

/* Whether every element of t is zero. */
static bool all_zero(const tg_tensor *t)
{
    const int64_t n = tg_tensor_numel(t);
    double *v = tg__work_alloc((size_t)(n ? n : 1) * sizeof *v);
    if (!v) return false;
    tg__gather(t, TG_F64, v);
    bool z = true;
    for (int64_t i = 0; i < n && z; i++) z = v[i] == 0;
    tg__work_free(v);
    return z;
}

/* X - X^T of the last two dims. */
static int skew(tg_tensor *x, tg_tensor **out)
{
    tg_tensor *t = NULL;
    int rc = tg__la_mT(&t, x);
    if (rc >= 0) rc = tg_sub(out, x, t);
    tg_tensor_release(t);
    return rc;
}

/* The gradient of A from U, S, Vh (reduced) and their gradients. */
static int svd_grad(tg_tensor *U, tg_tensor *S, tg_tensor *Vh, tg_tensor *gU, tg_tensor *gS,
                    tg_tensor *gVh, const svd_dims *d, tg_tensor **gA)
{
    tg_tensor *ut = NULL, *vt = NULL, *s2 = NULL, *s2j = NULL, *s2i = NULL, *dif = NULL,
              *eye = NULL, *e = NULL, *sj = NULL, *si = NULL, *a = NULL, *b = NULL, *c = NULL,
              *core = NULL, *w[6] = {NULL};
    int rc;
    const bool zu = all_zero(gU), zv = all_zero(gVh);
    if (zu && zv) {   /* U diag(gS) Vh */
        if (d->m >= d->n) {
            TG_TRY_GOTO(tg_unsqueeze(&a, gS, -1));
            TG_TRY_GOTO(tg_mul(&b, a, Vh));
            TG_TRY_GOTO(tg_matmul(gA, U, b));
        } else {
            TG_TRY_GOTO(tg_unsqueeze(&a, gS, -2));
            TG_TRY_GOTO(tg_mul(&b, U, a));
            TG_TRY_GOTO(tg_matmul(gA, b, Vh));
        }
        goto done;
    }
    TG_TRY_GOTO(tg__la_mT(&ut, U));
    TG_TRY_GOTO(tg__la_mT(&vt, Vh));
    TG_TRY_GOTO(tg_mul(&s2, S, S));
    TG_TRY_GOTO(tg_unsqueeze(&s2j, s2, -2));
    TG_TRY_GOTO(tg_unsqueeze(&s2i, s2, -1));
    TG_TRY_GOTO(tg_sub(&dif, s2j, s2i));                   /* E_ij = S_j^2 - S_i^2 */
    TG_TRY_GOTO(tg_tensor_eye(&eye, tg_tensor_dtype(S), d->k, d->k));
    TG_TRY_GOTO(tg_add(&e, dif, eye));                     /* 1 on the diagonal */
    TG_TRY_GOTO(tg_unsqueeze(&sj, S, -2));
    TG_TRY_GOTO(tg_unsqueeze(&si, S, -1));
    TG_TRY_GOTO(tg_matmul(&w[0], ut, gU));
    TG_TRY_GOTO(skew(w[0], &w[1]));
    TG_TRY_GOTO(tg_mul(&a, w[1], sj));                     /* skew(U^T gU) S_j */
    TG_TRY_GOTO(tg__la_mT(&w[2], gVh));
    TG_TRY_GOTO(tg_matmul(&w[3], Vh, w[2]));
    TG_TRY_GOTO(skew(w[3], &w[4]));
    TG_TRY_GOTO(tg_mul(&b, si, w[4]));                     /* S_i skew(Vh gVh^T) */
    TG_TRY_GOTO(tg_add(&c, a, b));
    tg_tensor_release(a);
    tg_tensor_release(b);
    a = b = NULL;
    TG_TRY_GOTO(tg_div(&a, c, e));
    TG_TRY_GOTO(tg_diag_embed(&b, gS, 0, -2, -1));
    TG_TRY_GOTO(tg_add(&core, a, b));
    tg__la_release(w, 6);
    memset(w, 0, sizeof w);
    if (d->m > d->n && !zu) {   /* (U core + gU / S - U (U^T (gU / S))) Vh */
        TG_TRY_GOTO(tg_matmul(&w[0], U, core));
        TG_TRY_GOTO(tg_div(&w[1], gU, sj));
        TG_TRY_GOTO(tg_matmul(&w[2], ut, w[1]));
        TG_TRY_GOTO(tg_matmul(&w[3], U, w[2]));
        TG_TRY_GOTO(tg_add(&w[4], w[0], w[1]));
        TG_TRY_GOTO(tg_sub(&w[5], w[4], w[3]));
        TG_TRY_GOTO(tg_matmul(gA, w[5], Vh));
    } else if (d->m < d->n && !zv) {   /* U (core Vh + gVh / S - ((gVh / S) Vh^T) Vh) */
        TG_TRY_GOTO(tg_matmul(&w[0], core, Vh));
        TG_TRY_GOTO(tg_div(&w[1], gVh, si));
        TG_TRY_GOTO(tg_matmul(&w[2], w[1], vt));
        TG_TRY_GOTO(tg_matmul(&w[3], w[2], Vh));
        TG_TRY_GOTO(tg_add(&w[4], w[0], w[1]));
        TG_TRY_GOTO(tg_sub(&w[5], w[4], w[3]));
        TG_TRY_GOTO(tg_matmul(gA, U, w[5]));
    } else {
        TG_TRY_GOTO(tg_matmul(&w[0], U, core));
        TG_TRY_GOTO(tg_matmul(gA, w[0], Vh));
    }
done:
    tg__la_release((tg_tensor *[]){ut, vt, s2, s2j, s2i, dif, eye, e, sj, si, a, b, c, core}, 14);
    tg__la_release(w, 6);
    return rc;
}

static int svd_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    const svd_params *p = tg__ctx_params(ctx);
    const tg_meta *ma = tg__ctx_input_meta(ctx, 0);
    const svd_dims d = dims_of(ma->shape[ma->ndim - 2], ma->shape[ma->ndim - 1], p->full);
    const svd_dims r = dims_of(d.m, d.n, false);
    tg_tensor *y = NULL, *x[6] = {NULL}, *k[4] = {NULL};
    int rc;
    TG_TRY_GOTO(tg__ctx_saved_output(ctx, 0, &y));
    for (int part = 0; part < 3; part++) {
        TG_TRY_GOTO(unpack(y, &d, part, &x[part]));
        TG_TRY_GOTO(unpack(g, &d, part, &x[3 + part]));
    }
    if (p->full) {   /* U's first k columns, Vh's first k rows, as torch */
        TG_TRY_GOTO(tg_narrow(&k[0], x[0], -1, 0, d.k));
        TG_TRY_GOTO(tg_narrow(&k[1], x[3], -1, 0, d.k));
        TG_TRY_GOTO(tg_narrow(&k[2], x[2], -2, 0, d.k));
        TG_TRY_GOTO(tg_narrow(&k[3], x[5], -2, 0, d.k));
        static const int slot[4] = {0, 3, 2, 5};
        for (int j = 0; j < 4; j++) {
            tg_tensor_release(x[slot[j]]);
            x[slot[j]] = k[j];
            k[j] = NULL;
        }
    }
    TG_TRY_GOTO(svd_grad(x[0], x[1], x[2], x[3], x[4], x[5], &r, &gi[0]));
done:
    tg_tensor_release(y);
    tg__la_release(x, 6);
    tg__la_release(k, 4);
    return rc;
}

/* KEEP: torch's CPU autocast lists no svd (and refuses a bf16 one). */
static const tg_op_schema svd_op = {
    .name = "linalg_svd", .arity = 1, .amp = TG_AMP_KEEP, .forward = svd_forward,
    .backward = svd_backward, .double_backward = true,
    .vjp = "da = U ((skew(U^T gU) S_j + S_i skew(Vh gVh^T)) / (S_j^2 - S_i^2) + diag(gS)) Vh "
           "(+ the parts off U's and Vh's span), y = [U, S, Vh]"};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__linalg_svd_ops[] = {&svd_op};
static_assert(sizeof tg__linalg_svd_ops / sizeof tg__linalg_svd_ops[0] == TG__linalg_svd_N,
              "src/ops/families.h must count the linalg_svd ops");

int tg_linalg_svd(tg_tensor **U, tg_tensor **S, tg_tensor **Vh, tg_tensor *A, bool full_matrices)
{
    TG_CHECK(U != NULL || S != NULL || Vh != NULL, TG_EINVAL,
             "linalg.svd: U, S and Vh are all NULL");
    TG_TRY(tg__la_distinct("linalg.svd", 3, (tg_tensor **const[]){U, S, Vh},
                           (const char *const[]){"U", "S", "Vh"}));
    TG_TRY(tg__la_check("linalg.svd", "A", A, false));
    const svd_params p = {.full = full_matrices};
    const svd_dims d = dims_of(tg_tensor_dim(A, -2), tg_tensor_dim(A, -1), full_matrices);
    tg__lib_enter();
    tg_tensor *y = NULL, *r[3] = {NULL, NULL, NULL};
    tg_tensor **outs[3] = {U, S, Vh};
    int rc = tg_op_call(&svd_op, &y, 1, &A, &p, sizeof p);
    for (int part = 0; part < 3 && rc >= 0; part++)
        if (outs[part]) rc = unpack(y, &d, part, &r[part]);
    tg_tensor_release(y);
    tg__lib_leave();
    /* hand the wanted results over, all or none */
    tg_tensor **o[3];
    tg_tensor *v[3];
    int n = 0;
    for (int part = 0; part < 3; part++)
        if (outs[part]) o[n] = outs[part], v[n++] = r[part];
    if (n == 3) {
        tg_tensor *a = NULL, *b = NULL, *c = NULL;
        rc = tg__scope_capture_pair(&a, v[0], &b, v[1], rc);
        if (rc < 0) {
            tg_tensor_release(v[2]);
            return rc;
        }
        rc = tg__scope_capture_pair(&c, v[2], NULL, NULL, rc);
        if (rc < 0) {
            if (tg_scope_keep(a)) tg_tensor_release(a);
            if (tg_scope_keep(b)) tg_tensor_release(b);
            return rc;
        }
        *o[0] = a, *o[1] = b, *o[2] = c;
        return TG_OK;
    }
    return tg__scope_capture_pair(o[0], v[0], n == 2 ? o[1] : NULL, n == 2 ? v[1] : NULL, rc);
}

int tg_linalg_svdvals(tg_tensor **out, tg_tensor *A)
{
    TG_CHECK(out != NULL, TG_EINVAL, "linalg.svdvals: out is NULL");
    return tg_linalg_svd(NULL, out, NULL, A, false);
}
