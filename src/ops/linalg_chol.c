/* src/ops/linalg_chol.c - torch.cholesky_solve and torch.cholesky_inverse
 * of tapegrad/linalg.h: solves and the inverse of A = L L^T (upper: U^T U)
 * given its Cholesky factor, each one op over a batch.
 *
 * The forwards are two triangular solves (tg_linalg_solve_triangular, which
 * reads only the factor's triangle, as LAPACK's potrs / potri).  The
 * backwards are torch 1.13's formulas, which take the factor as a full
 * matrix (an entry of the other triangle gets a gradient too), written with
 * these functions and matmul so gradients of gradients follow:
 *   cholesky_solve:   gB = cholesky_solve(g, L),  S = gB X^T + X gB^T,
 *                     gL = -S L (upper: -U S);
 *   cholesky_inverse: S = Y (g + g^T) Y,  gL = -S L (upper: -U S),
 * X, Y the saved results.  Both run in f32 under autocast (FP32), as in
 * torch's CPU autocast. */
#include <assert.h>
#include <string.h>

#include "autograd/tape.h"
#include "ops/families.h"
#include "ops/linalg_la.h"
#include "tapegrad/linalg.h"
#include "tapegrad/ops.h"
#include "tapegrad/registry.h"

typedef struct chol_params {
    bool upper;
} chol_params;

/* X = (L L^T)^-1 B (upper: (U^T U)^-1 B) by two triangular solves. */
static int chol_solve2(tg_tensor **out, tg_tensor *B, tg_tensor *L, bool upper)
{
    tg_tensor *lt = NULL, *y = NULL;
    int rc;
    TG_TRY_GOTO(tg__la_mT(&lt, L));
    if (upper) {
        TG_TRY_GOTO(tg_linalg_solve_triangular(&y, lt, B, false, true, false));
        TG_TRY_GOTO(tg_linalg_solve_triangular(out, L, y, true, true, false));
    } else {
        TG_TRY_GOTO(tg_linalg_solve_triangular(&y, L, B, false, true, false));
        TG_TRY_GOTO(tg_linalg_solve_triangular(out, lt, y, true, true, false));
    }
done:
    tg_tensor_release(lt);
    tg_tensor_release(y);
    return rc;
}

/* -S L (upper: -L S), S = t + t^T. */
static int factor_grad(tg_tensor **out, tg_tensor *t, tg_tensor *L, bool upper)
{
    tg_tensor *tt = NULL, *s = NULL, *m = NULL;
    int rc;
    TG_TRY_GOTO(tg__la_mT(&tt, t));
    TG_TRY_GOTO(tg_add(&s, t, tt));
    TG_TRY_GOTO(upper ? tg_matmul(&m, L, s) : tg_matmul(&m, s, L));
    TG_TRY_GOTO(tg_neg(out, m));
done:
    tg_tensor_release(tt);
    tg_tensor_release(s);
    tg_tensor_release(m);
    return rc;
}

/* ---- cholesky_solve ---------------------------------------------------- */

static int csolve_forward(tg_ctx *ctx, tg_tensor **out, int n_in, tg_tensor *const *in,
                          const void *params)
{
    (void)n_in;
    static const char fn[] = "torch.cholesky_solve";
    const chol_params *p = params;
    tg_tensor *B = in[0], *L = in[1], *X = NULL;
    TG_TRY(tg__la_check(fn, "B", B, false));
    TG_TRY(tg__la_check(fn, "L", L, true));
    TG_CHECK(B->dtype == L->dtype, TG_EDTYPE, "%s: Expected b and A to have the same dtype, but "
             "found b of type %s and A of type %s instead", fn, tg_dtype_name(B->dtype),
             tg_dtype_name(L->dtype));
    const int64_t n = L->shape[L->ndim - 1];
    TG_CHECK(B->shape[B->ndim - 2] == n, TG_ESHAPE, "%s: Incompatible matrix sizes for "
             "cholesky_solve: each A matrix is %lld by %lld but each b matrix is %lld by %lld",
             fn, (long long)n, (long long)n, (long long)B->shape[B->ndim - 2],
             (long long)B->shape[B->ndim - 1]);
    int bn = 0;
    int64_t bshape[TG_MAX_DIMS + 2];
    TG_TRY(tg__la_broadcast(fn, B->ndim - 2, B->shape, L->ndim - 2, L->shape, &bn, bshape));
    TG_TRY(chol_solve2(&X, B, L, p->upper));
    int rc = TG_OK;
    if (ctx) rc = tg__ctx_save(ctx, L);
    if (rc >= 0 && ctx) rc = tg_op_ctx_save_output(ctx, X);
    if (rc < 0) {
        tg_tensor_release(X);
        return rc;
    }
    *out = X;
    return TG_OK;
}

static int csolve_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    const chol_params *p = tg__ctx_params(ctx);
    const tg_meta *mb = tg__ctx_input_meta(ctx, 0), *ml = tg__ctx_input_meta(ctx, 1);
    tg_tensor *L, *x = NULL, *gb = NULL, *xt = NULL, *t = NULL, *gl = NULL;
    int rc;
    TG_TRY_GOTO(tg__ctx_saved(ctx, 0, &L));
    TG_TRY_GOTO(tg__ctx_saved_output(ctx, 1, &x));
    TG_TRY_GOTO(tg_cholesky_solve(&gb, g, L, p->upper));
    if (tg__ctx_needs_grad(ctx, 1)) {
        TG_TRY_GOTO(tg__la_mT(&xt, x));
        TG_TRY_GOTO(tg_matmul(&t, gb, xt));
        TG_TRY_GOTO(factor_grad(&gl, t, L, p->upper));
        TG_TRY_GOTO(tg_sum_to_shape(&gi[1], gl, ml->ndim, ml->shape));
    }
    if (tg__ctx_needs_grad(ctx, 0)) TG_TRY_GOTO(tg_sum_to_shape(&gi[0], gb, mb->ndim, mb->shape));
done:
    tg_tensor_release(x);
    tg_tensor_release(gb);
    tg_tensor_release(xt);
    tg_tensor_release(t);
    tg_tensor_release(gl);
    if (rc < 0)
        for (int i = 0; i < 2; i++) {
            tg_tensor_release(gi[i]);
            gi[i] = NULL;
        }
    return rc;
}

static const tg_op_schema csolve_op = {
    .name = "cholesky_solve", .arity = 2, .amp = TG_AMP_FP32, .forward = csolve_forward,
    .backward = csolve_backward, .double_backward = true,
    .vjp = "db = cholesky_solve(g, L), dL = -(db y^T + y db^T) L"};

/* ---- cholesky_inverse -------------------------------------------------- */

static int cinv_forward(tg_ctx *ctx, tg_tensor **out, int n_in, tg_tensor *const *in,
                        const void *params)
{
    (void)n_in;
    static const char fn[] = "torch.cholesky_inverse";
    const chol_params *p = params;
    tg_tensor *L = in[0], *e = NULL, *Y = NULL, *d = NULL;
    TG_TRY(tg__la_check(fn, "L", L, true));
    const int64_t n = L->shape[L->ndim - 1];
    int rc;
    TG_TRY_GOTO(tg_diagonal(&d, L, 0, -2, -1));
    for (int64_t i = 0; i < tg_tensor_numel(d); i++) {   /* potri's singular check */
        double v = 0;
        TG_TRY_GOTO(tg_tensor_get_flat(d, i, &v));
        if (v == 0) {
            rc = tg__error(TG_EINVAL, "%s: The diagonal element %lld is zero, the inversion "
                           "could not be completed because the input matrix is singular.", fn,
                           (long long)(i % n + 1));
            goto done;
        }
    }
    TG_TRY_GOTO(tg_tensor_eye(&e, L->dtype, n, n));
    TG_TRY_GOTO(chol_solve2(&Y, e, L, p->upper));
    if (ctx) TG_TRY_GOTO(tg__ctx_save(ctx, L));
    if (ctx) TG_TRY_GOTO(tg_op_ctx_save_output(ctx, Y));
    *out = Y;
    Y = NULL;
done:
    tg_tensor_release(e);
    tg_tensor_release(d);
    tg_tensor_release(Y);
    return rc;
}

static int cinv_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    const chol_params *p = tg__ctx_params(ctx);
    tg_tensor *L, *y = NULL, *t = NULL, *u = NULL;
    int rc;
    TG_TRY_GOTO(tg__ctx_saved(ctx, 0, &L));
    TG_TRY_GOTO(tg__ctx_saved_output(ctx, 1, &y));
    TG_TRY_GOTO(tg_matmul(&t, y, g));
    TG_TRY_GOTO(tg_matmul(&u, t, y));      /* Y g Y: factor_grad adds its transpose */
    TG_TRY_GOTO(factor_grad(&gi[0], u, L, p->upper));
done:
    tg_tensor_release(y);
    tg_tensor_release(t);
    tg_tensor_release(u);
    return rc;
}

static const tg_op_schema cinv_op = {
    .name = "cholesky_inverse", .arity = 1, .amp = TG_AMP_FP32, .forward = cinv_forward,
    .backward = cinv_backward, .double_backward = true,
    .vjp = "dL = -y (g + g^T) y L"};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__linalg_chol_ops[] = {&csolve_op, &cinv_op};
static_assert(sizeof tg__linalg_chol_ops / sizeof tg__linalg_chol_ops[0] == TG__linalg_chol_N,
              "src/ops/families.h must count the linalg_chol ops");

/* ---- the public functions ---------------------------------------------- */

int tg_cholesky_solve(tg_tensor **out, tg_tensor *B, tg_tensor *L, bool upper)
{
    static const char fn[] = "torch.cholesky_solve";
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out is NULL", fn);
    /* before dispatch, which would promote them; under autocast f16 and bf16
     * count as f32 (the op takes them so) */
    if (B && L && tg_dtype_is_float(B->dtype) && tg_dtype_is_float(L->dtype)) {
        tg_dtype b = B->dtype, l = L->dtype, ac;
        if (tg_autocast_active(&ac)) {
            if (b == TG_F16 || b == TG_BF16) b = TG_F32;
            if (l == TG_F16 || l == TG_BF16) l = TG_F32;
        }
        TG_CHECK(b == l, TG_EDTYPE, "%s: Expected b and A to have the same dtype, but found b "
                 "of type %s and A of type %s instead", fn, tg_dtype_name(B->dtype),
                 tg_dtype_name(L->dtype));
    }
    const chol_params p = {.upper = upper};
    return tg_op_call(&csolve_op, out, 2, (tg_tensor *[]){B, L}, &p, sizeof p);
}

int tg_cholesky_inverse(tg_tensor **out, tg_tensor *L, bool upper)
{
    TG_CHECK(out != NULL, TG_EINVAL, "torch.cholesky_inverse: out is NULL");
    const chol_params p = {.upper = upper};
    return tg_op_call(&cinv_op, out, 1, &L, &p, sizeof p);
}
