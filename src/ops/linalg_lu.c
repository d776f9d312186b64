/* src/ops/linalg_lu.c - inv and solve of tapegrad/linalg.h, from an LU
 * factorization with partial pivoting (LAPACK's getrf), each one op over a
 * batch of matrices.
 *
 * getrf factors the buffer of a row-major A, which LAPACK reads as A^T
 * (src/core/lapack.c), and getrs with trans 'T' solves A X = B from that
 * factor.
 *
 * Backward, with these functions and matmul (so gradients of gradients
 * follow):
 *   inv:     dA = -Y^T g Y^T, Y the saved output;
 *   solve:   dB = solve(A^T, g), dA = -dB X^T (vectors: -dB x^T), each summed
 *            over the batch dims its operand was broadcast along.
 * solve factors A's own batch once (A broadcast against B: each matrix
 * once, not once per right-hand side) and keeps the factors and pivots on
 * its context; a backward that records no graph solves A^T dB = g with
 * them (getrs with trans 'N' on A^T's factors), as torch's
 * linalg_solve_backward reuses its forward's LU, while a create_graph
 * backward calls solve again, whose gradients follow.
 * inv and solve have unchecked forms (tg__linalg_inv_unchecked,
 * tg__linalg_solve_unchecked) whose singular matrix gives getrs's
 * infinities instead of an error, for slogdet's gradient
 * (src/ops/linalg_det.c); the unchecked solve's create_graph backward
 * solves unchecked too.  inv_ex and solve_ex run both ops unchecked,
 * their info from a getrf pass of A^T of their own. */
#include <assert.h>
#include <math.h>
#include <string.h>

#include "autograd/tape.h"
#include "ops/families.h"
#include "ops/linalg_la.h"
#include "tapegrad/autograd.h"
#include "tapegrad/linalg.h"
#include "tapegrad/ops.h"

/* ---- the kernels --------------------------------------------------------- */

/* " (Batch element 3):" for a batch, else "" (torch's prefix). */
static const char *batch_note(bool batched, int64_t b, char *buf, size_t n)
{
    if (!batched) return "";
    snprintf(buf, n, " (Batch element %lld):", (long long)b);
    return buf;
}

/* Pivots are kept in a TG_I32 tensor and handed to LAPACK as int. */
static_assert(sizeof(int) == sizeof(int32_t), "LAPACK's pivots are 32-bit ints");

/* inv's and solve's params (NULL: checked). */
typedef struct inv_params {
    bool unchecked;   /* a singular matrix gives getrs's inf / NaN, no error */
} inv_params;

/* A's matrices (..., n, n) factored and solved against I, or against B's
 * (bn broadcast batch dims, nrhs columns: vectors when vec), into the
 * contiguous X; or, adjoint, A^T X = B solved from the factors alone.  fn
 * names the caller for the messages. */
typedef struct lu_job {
    const char *fn;
    tg_dtype dt;
    int n, nrhs;
    bool check, identity;     /* identity: inv's, B = I */
    bool batched;             /* batch dims: the messages name the element */
    bool factor, solve;       /* what one() does to its matrix */
    bool adjoint;             /* solve A^T X = B (solve's backward) */
    char *lu;                 /* A's matrices, factored in place by getrf */
    int *piv;                 /* their pivots, n each */
    char *b;                  /* gathered B (count matrices), or NULL: I */
    char *x;                  /* the result, count * n * nrhs */
    int64_t count;            /* right-hand sides: the broadcast batch */
    int bn, an;               /* the broadcast batch's dims, A's batch dims */
    const int64_t *bshape, *ashape;
} lu_job;

/* The matrix of A that matrix b of the broadcast batch reads: b's index
 * along each of A's batch dims, 0 where A's extent is 1. */
static int64_t a_index(const lu_job *j, int64_t b)
{
    int64_t a = 0, step = 1;
    for (int i = j->bn - 1, k = j->an - 1; i >= 0 && k >= 0; i--, k--) {
        const int64_t c = b % j->bshape[i];
        b /= j->bshape[i];
        if (j->ashape[k] != 1) a += c * step;
        step *= j->ashape[k];
    }
    return a;
}

/* Matrix b of the batch: factors it (factor; b indexes A's matrices), then
 * solves its right-hand sides (solve; with factor, A and the broadcast
 * batch are one, else b indexes the broadcast batch).  ws: the
 * column-major right-hand sides (n * nrhs). */
static int lu_one(void *job, int64_t b, void *ws)
{
    const lu_job *j = job;
    const size_t es = tg_dtype_size(j->dt);
    const int n = j->n, k = j->nrhs;
    const int64_t a = j->factor ? b : a_index(j, b);
    char *w = ws;
    char *lu = j->lu + (size_t)a * (size_t)n * (size_t)n * es;
    int *ipiv = j->piv + (size_t)a * (size_t)n;
    const int info = j->factor ? tg__lapack_getrf(j->dt, n, lu, ipiv) : 0;
    if (info > 0 && j->check) {
        char note[48], rule[160];
        if (j->identity)
            snprintf(rule, sizeof rule, "The diagonal element %d is zero, the inversion "
                     "could not be completed because the input matrix is singular.", info);
        else
            snprintf(rule, sizeof rule, "The solver failed because the input matrix is "
                     "singular.");
        return tg__error(TG_EINVAL, "%s:%s %s", j->fn,
                         batch_note(j->batched, b, note, sizeof note), rule);
    }
    if (!j->solve) return TG_OK;
    char *xb = j->x + (size_t)b * (size_t)n * (size_t)k * es;
    if (j->identity) {
        memset(w, 0, (size_t)n * (size_t)k * es);
        for (int i = 0; i < n; i++) {
            if (j->dt == TG_F64) ((double *)(void *)w)[(size_t)i * (size_t)n + (size_t)i] = 1;
            else ((float *)(void *)w)[(size_t)i * (size_t)n + (size_t)i] = 1;
        }
    } else {   /* B's matrix (n, k) into column-major order */
        tg__la_transpose(j->dt, n, k, j->b + (size_t)b * (size_t)n * (size_t)k * es, w);
    }
    if (j->adjoint) tg__lapack_getrs_n(j->dt, n, k, lu, ipiv, w);
    else tg__lapack_getrs_t(j->dt, n, k, lu, ipiv, w);
    tg__la_transpose(j->dt, k, n, w, xb);
    return TG_OK;
}

/* Runs j over its batch: with j->factor and acount (A's matrices) below
 * j->count (A broadcast), factors A's matrices first, then solves each
 * right-hand side with its matrix's factors; else one pass. */
static int lu_solve_all(lu_job *j, int64_t acount)
{
    const size_t es = tg_dtype_size(j->dt), n = (size_t)j->n, k = (size_t)j->nrhs;
    const double nf = (double)n, lu_cost = nf * nf * nf, rs_cost = 2.0 * nf * nf * (double)k;
    if (j->factor && acount != j->count) {
        j->solve = false;
        const int rc = tg__la_batch(acount, lu_cost, 1, lu_one, j);
        j->factor = false;
        j->solve = true;
        TG_TRY(rc);
    }
    return tg__la_batch(j->count, (j->factor ? lu_cost : 0) + rs_cost, n * k * es, lu_one, j);
}

/* ---- inv ----------------------------------------------------------------- */

static int inv_forward(tg_ctx *ctx, tg_tensor **out, int n_in, tg_tensor *const *in,
                       const void *params)
{
    (void)n_in;
    const inv_params *p = params;
    tg_tensor *A = in[0];
    TG_TRY(tg__la_check("linalg.inv", "A", A, true));
    const int bn = A->ndim - 2;
    lu_job j = {.fn = "linalg.inv", .dt = A->dtype, .n = (int)A->shape[bn], .batched = bn > 0,
                .check = !(p && p->unchecked), .identity = true, .factor = true, .solve = true,
                .count = tg__la_count(bn, A->shape)};
    j.nrhs = j.n;
    tg_tensor *Y = tg__tensor_uninit(A->dtype, A->ndim, A->shape);
    j.lu = Y ? tg__la_gather(A, bn, A->shape, 2, A->dtype) : NULL;
    j.piv = j.lu ? tg__work_alloc((size_t)(j.count * j.n + 1) * sizeof(int)) : NULL;
    int rc = j.piv ? TG_OK : TG_ENOMEM;
    if (rc == TG_OK) {
        j.x = tg_tensor_data(Y);
        rc = lu_solve_all(&j, j.count);
    }
    tg__work_free(j.lu);
    tg__work_free(j.piv);
    return tg__la_finish(ctx, rc, NULL, Y, out);
}

/* dA = -Y^T g Y^T. */
static int inv_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    tg_tensor *y = NULL, *yt = NULL, *t = NULL, *u = NULL;
    int rc;
    TG_TRY_GOTO(tg__ctx_saved_output(ctx, 0, &y));
    TG_TRY_GOTO(tg__la_mT(&yt, y));
    TG_TRY_GOTO(tg_matmul(&t, yt, g));
    TG_TRY_GOTO(tg_matmul(&u, t, yt));
    TG_TRY_GOTO(tg_neg(&gi[0], u));
done:
    tg_tensor_release(y);
    tg_tensor_release(yt);
    tg_tensor_release(t);
    tg_tensor_release(u);
    return rc;
}

/* FP32: torch's CPU autocast lists linalg_inv with the ops that run in f32. */
static const tg_op_schema inv_op = {
    .name = "linalg_inv", .arity = 1, .amp = TG_AMP_FP32, .forward = inv_forward,
    .backward = inv_backward, .double_backward = true, .vjp = "da = -y^T g y^T"};

/* ---- solve --------------------------------------------------------------- */

/* torch.linalg.solve's rule: B is a batch of vectors when it is 1-d or has
 * A's shape without the last dim. */
static bool solve_vec(int an, const int64_t *a, int bn, const int64_t *b)
{
    if (bn == 1) return true;
    if (bn != an - 1) return false;
    for (int i = 0; i < bn; i++)
        if (a[i] != b[i]) return false;
    return true;
}

static int solve_forward(tg_ctx *ctx, tg_tensor **out, int n_in, tg_tensor *const *in,
                         const void *params)
{
    (void)n_in;
    const inv_params *p = params;
    static const char fn[] = "torch.linalg.solve";
    tg_tensor *A = in[0], *B = in[1];
    TG_TRY(tg__la_check(fn, "A", A, true));
    TG_CHECK(B != NULL, TG_EINVAL, "%s: B is NULL", fn);
    TG_CHECK(tg_dtype_is_float(B->dtype) && B->dtype == A->dtype, TG_EDTYPE,
             "%s: Expected A and B to have the same dtype, but found A of type %s and B of "
             "type %s instead", fn, tg_dtype_name(A->dtype), tg_dtype_name(B->dtype));
    TG_CHECK(B->ndim >= 1, TG_ESHAPE, "%s: B must have at least 1 dimension", fn);
    const int n = (int)A->shape[A->ndim - 1];
    const bool vec = solve_vec(A->ndim, A->shape, B->ndim, B->shape);
    const int tail = vec ? 1 : 2;
    TG_CHECK(B->shape[B->ndim - tail] == n, TG_ESHAPE,
             "%s: Incompatible shapes of A and B for the equation AX = B: A's matrices are "
             "%lld x %lld, B's %s have %lld rows", fn, (long long)n, (long long)n,
             vec ? "vectors" : "matrices", (long long)B->shape[B->ndim - tail]);
    const int64_t k64 = vec ? 1 : B->shape[B->ndim - 1];
    TG_CHECK(k64 <= INT32_MAX / (n ? n : 1), TG_EINVAL, "%s: B has too many columns (%lld)", fn,
             (long long)k64);
    int bn = 0;
    int64_t bshape[TG_MAX_DIMS + 2];
    TG_TRY(tg__la_broadcast(fn, A->ndim - 2, A->shape, B->ndim - tail, B->shape, &bn, bshape));
    TG_CHECK(bn + tail <= TG_MAX_DIMS, TG_ESHAPE, "%s: the result would have %d dims, more "
             "than %d", fn, bn + tail, TG_MAX_DIMS);
    int64_t xs[TG_MAX_DIMS];
    memcpy(xs, bshape, (size_t)bn * sizeof *xs);
    xs[bn] = n;
    if (!vec) xs[bn + 1] = k64;
    /* A's own batch is factored (LU and its pivots, A's batch shape, as
     * torch's), each right-hand side solved with its matrix's factors. */
    lu_job j = {.fn = fn, .dt = A->dtype, .n = n, .nrhs = (int)k64,
                .check = !(p && p->unchecked),
                .batched = A->ndim > 2, .factor = true, .solve = true,
                .count = tg__la_count(bn, bshape), .bn = bn, .an = A->ndim - 2,
                .bshape = bshape, .ashape = A->shape};
    tg_tensor *X = tg__tensor_uninit(A->dtype, bn + tail, xs);
    tg_tensor *LU = X ? tg__tensor_uninit(A->dtype, A->ndim, A->shape) : NULL;
    tg_tensor *P = LU ? tg__tensor_uninit(TG_I32, A->ndim - 1, A->shape) : NULL;
    j.b = P ? tg__la_gather(B, bn, bshape, tail, A->dtype) : NULL;
    int rc = j.b ? TG_OK : TG_ENOMEM;
    if (rc == TG_OK) {
        tg__gather(A, A->dtype, tg_tensor_data(LU));
        j.lu = tg_tensor_data(LU);
        j.piv = tg_tensor_data(P);
        j.x = tg_tensor_data(X);
        rc = lu_solve_all(&j, tg__la_count(A->ndim - 2, A->shape));
    }
    tg__work_free(j.b);
    rc = tg__la_finish(ctx, rc, A, X, out);
    if (rc >= 0 && ctx) {   /* slots 2 and 3, for the backward */
        rc = tg__ctx_save(ctx, LU);
        if (rc >= 0) rc = tg__ctx_save(ctx, P);
        if (rc < 0) {
            tg_tensor_release(*out);
            *out = NULL;
        }
    }
    tg_tensor_release(LU);
    tg_tensor_release(P);
    return rc < 0 ? rc : TG_OK;
}

/* What solve's backward reads of its forward: the LU factors and pivots of
 * A's matrices (slots 2 and 3, borrowed; NULL when it records a graph), and
 * whether B is a batch of vectors. */
typedef struct solve_saved {
    tg_tensor *lu, *piv;
    bool vec, unchecked;
} solve_saved;

/* dB = A^-T g for each right-hand side of g (X's shape: the broadcast
 * batch) from the saved factors, getrs with A^T: no new factorization. */
static int solve_t_saved(tg_tensor **out, const solve_saved *s, tg_tensor *g)
{
    const int tail = s->vec ? 1 : 2, bn = g->ndim - tail, an = s->lu->ndim - 2;
    lu_job j = {.fn = "torch.linalg.solve", .dt = g->dtype, .n = (int)s->lu->shape[an],
                .nrhs = s->vec ? 1 : (int)g->shape[g->ndim - 1], .solve = true, .adjoint = true,
                .lu = tg_tensor_data(s->lu), .piv = tg_tensor_data(s->piv),
                .count = tg__la_count(bn, g->shape), .bn = bn, .an = an, .bshape = g->shape,
                .ashape = s->lu->shape};
    tg_tensor *gb = tg__tensor_uninit(g->dtype, g->ndim, g->shape);
    j.b = gb ? tg__la_gather(g, bn, g->shape, tail, g->dtype) : NULL;
    int rc = j.b ? TG_OK : TG_ENOMEM;
    if (rc == TG_OK) {
        j.x = tg_tensor_data(gb);
        rc = lu_solve_all(&j, 0);
    }
    tg__work_free(j.b);
    if (rc < 0) {
        tg_tensor_release(gb);
        return rc;
    }
    *out = gb;
    return TG_OK;
}

/* dB = solve(A^T, g): from the saved factors when there are, else by
 * tg_linalg_solve, which records. */
static int solve_t(tg_tensor **out, tg_tensor *at, tg_tensor *g, const void *arg)
{
    const solve_saved *s = arg;
    if (s->lu && g->dtype == s->lu->dtype) return solve_t_saved(out, s, g);
    return s->unchecked ? tg__linalg_solve_unchecked(out, at, g) : tg_linalg_solve(out, at, g);
}

/* dB = solve(A^T, g); dA = -dB X^T (vectors: the outer product).  As torch's
 * linalg_solve_backward: a backward that records a graph (create_graph)
 * solves with A^T by differentiable ops, any other one with the forward's
 * factors. */
static int solve_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    const tg_meta *ma = tg__ctx_input_meta(ctx, 0), *mb = tg__ctx_input_meta(ctx, 1);
    const inv_params *p = tg__ctx_params(ctx);
    solve_saved s = {.vec = solve_vec(ma->ndim, ma->shape, mb->ndim, mb->shape),
                     .unchecked = p && p->unchecked};
    if (!tg_grad_enabled()) {
        TG_TRY(tg__ctx_saved(ctx, 2, &s.lu));
        TG_TRY(tg__ctx_saved(ctx, 3, &s.piv));
    }
    return tg__la_solve_backward(ctx, g, gi, s.vec, solve_t, NULL, &s);
}

/* FP32: torch's CPU autocast lists linalg_solve with the ops that run in
 * f32. */
static const tg_op_schema solve_op = {
    .name = "linalg_solve", .arity = 2, .amp = TG_AMP_FP32, .forward = solve_forward,
    .backward = solve_backward, .double_backward = true,
    .vjp = "db = solve(a^T, g), da = -db y^T"};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__linalg_lu_ops[] = {&inv_op, &solve_op};
static_assert(sizeof tg__linalg_lu_ops / sizeof tg__linalg_lu_ops[0] == TG__linalg_lu_N,
              "src/ops/families.h must count the linalg_lu ops");

/* ---- the public functions ------------------------------------------------ */

int tg__la_lu_inv_t(tg_tensor **out, tg_tensor *lu, tg_tensor *piv)
{
    const int an = lu->ndim - 2;
    lu_job j = {.fn = "linalg.inv", .dt = lu->dtype, .n = (int)lu->shape[an],
                .identity = true, .solve = true, .adjoint = true, .lu = tg_tensor_data(lu),
                .piv = tg_tensor_data(piv), .count = tg__la_count(an, lu->shape), .bn = an,
                .an = an, .bshape = lu->shape, .ashape = lu->shape};
    j.nrhs = j.n;
    tg_tensor *y = tg__tensor_uninit(lu->dtype, lu->ndim, lu->shape);
    if (!y) return TG_ENOMEM;
    j.x = tg_tensor_data(y);
    const int rc = lu_solve_all(&j, 0);
    if (rc < 0) {
        tg_tensor_release(y);
        return rc;
    }
    *out = y;
    return TG_OK;
}

int tg__linalg_inv_unchecked(tg_tensor **out, tg_tensor *A)
{
    const inv_params p = {.unchecked = true};
    return tg_op_call(&inv_op, out, 1, &A, &p, sizeof p);
}

int tg__linalg_solve_unchecked(tg_tensor **out, tg_tensor *A, tg_tensor *B)
{
    const inv_params p = {.unchecked = true};
    return tg_op_call(&solve_op, out, 2, (tg_tensor *[]){A, B}, &p, sizeof p);
}

int tg_linalg_inv(tg_tensor **out, tg_tensor *A)
{
    TG_CHECK(out != NULL, TG_EINVAL, "linalg.inv: out is NULL");
    const inv_params p = {.unchecked = false};
    return tg_op_call(&inv_op, out, 1, &A, &p, sizeof p);
}

int tg_linalg_solve(tg_tensor **out, tg_tensor *A, tg_tensor *B)
{
    TG_CHECK(out != NULL, TG_EINVAL, "torch.linalg.solve: out is NULL");
    TG_TRY(tg__la_same_dtype("torch.linalg.solve", A, B, true));
    return tg_op_call(&solve_op, out, 2, (tg_tensor *[]){A, B}, NULL, 0);
}

/* torch's words for the check_errors of inv_ex and solve_ex (%d: the
 * info) */
#define INV_SINGULAR                                                                              \
    "The diagonal element %d is zero, the inversion could not be completed because the input " \
    "matrix is singular."
#define SOLVE_SINGULAR "The solver failed because the input matrix is singular."

/* getrf's info of each matrix of A^T, the factorization inv's and solve's
 * kernels run (module comment) and torch's for a contiguous A. */
static int lu_t_info(tg_tensor **info, tg_tensor *A)
{
    tg_tensor *at = NULL;
    int rc = tg__la_mT(&at, A);
    if (rc >= 0) rc = tg__la_lu_info(info, NULL, at);
    tg_tensor_release(at);
    return rc;
}

int tg_linalg_inv_ex(tg_tensor **inverse, tg_tensor **info, tg_tensor *A, bool check_errors)
{
    static const char fn[] = "linalg.inv_ex";
    TG_CHECK(inverse != NULL || info != NULL, TG_EINVAL, "%s: inverse and info are both NULL",
             fn);
    TG_TRY(tg__la_distinct(fn, 2, (tg_tensor **const[]){inverse, info},
                           (const char *const[]){"inverse", "info"}));
    TG_TRY(tg__la_check(fn, "A", A, true));
    tg_tensor *y = NULL, *in = NULL;
    const inv_params p = {.unchecked = true};
    tg__lib_enter();
    int rc = lu_t_info(&in, A);
    if (rc >= 0 && check_errors) rc = tg__la_info_check(fn, in, INV_SINGULAR);
    if (rc >= 0 && inverse) rc = tg_op_call(&inv_op, &y, 1, &A, &p, sizeof p);
    tg__lib_leave();
    return tg__la_capture3((tg_tensor **[]){inverse, info, NULL}, (tg_tensor *[]){y, in, NULL},
                           rc);
}

int tg_linalg_solve_ex(tg_tensor **result, tg_tensor **info, tg_tensor *A, tg_tensor *B,
                       bool check_errors)
{
    static const char fn[] = "torch.linalg.solve_ex";
    TG_CHECK(result != NULL || info != NULL, TG_EINVAL, "%s: result and info are both NULL",
             fn);
    TG_TRY(tg__la_distinct(fn, 2, (tg_tensor **const[]){result, info},
                           (const char *const[]){"result", "info"}));
    TG_TRY(tg__la_same_dtype(fn, A, B, true));
    TG_TRY(tg__la_check(fn, "A", A, true));
    tg_tensor *x = NULL, *in = NULL;
    const inv_params p = {.unchecked = true};
    tg__lib_enter();
    int rc = lu_t_info(&in, A);
    if (rc >= 0 && check_errors) rc = tg__la_info_check(fn, in, SOLVE_SINGULAR);
    /* the shapes are checked here also when only info is wanted */
    if (rc >= 0) rc = tg_op_call(&solve_op, &x, 2, (tg_tensor *[]){A, B}, &p, sizeof p);
    tg__lib_leave();
    return tg__la_capture3((tg_tensor **[]){result, info, NULL}, (tg_tensor *[]){x, in, NULL},
                           rc);
}
