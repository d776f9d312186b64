/* tests/test_linalg_rules.c - what tapegrad/linalg.h's functions must keep
 * beyond PyTorch's goldens (tests/test_linalg_square.c): the identities
 * between them, the triangle they read, det's gradient at singular
 * matrices, slogdet at one, empty matrices, autocast, the refusals, and
 * tg_tensor_eye. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

/* ---- identities ---- */

/* The largest |a - b|, b broadcast against a. */
static double max_diff(tg_tensor *a, tg_tensor *b)
{
    tg_tensor *d = NULL;
    OK(tg_sub(&d, a, b));
    const int64_t n = tg_tensor_numel(d);
    cr_assert(eq(i64, n, tg_tensor_numel(a)));
    double m = 0, x;
    for (int64_t i = 0; i < n; i++) {
        OK(tg_tensor_get_flat(d, i, &x));
        m = fmax(m, fabs(x));
    }
    tg_tensor_release(d);
    return m;
}

/* A inv(A) = I, A solve(A, B) = B, L L^T = A, A solve_triangular(A, B) = B
 * on A's triangle, det(A B) = det(A) det(B), exp(logabsdet) sign = det, for
 * random f64 batches. */
Test(linalg_rules, identities_hold)
{
    uint64_t s = 11;
    const int64_t sh[3] = {4, 6, 6}, shb[3] = {4, 6, 3};
    tg_tensor *a = th_rand_tensor(&s, TG_F64, 3, sh, -1, 1);
    tg_tensor *b = th_rand_tensor(&s, TG_F64, 3, sh, -1, 1);
    tg_tensor *r = th_rand_tensor(&s, TG_F64, 3, shb, -1, 1);
    tg_tensor *ai = NULL, *p = NULL, *eye = NULL, *x = NULL, *ax = NULL;
    OK(tg_tensor_eye(&eye, TG_F64, 6, 6));
    OK(tg_linalg_inv(&ai, a));
    OK(tg_matmul(&p, a, ai));
    cr_assert(max_diff(p, eye) < 1e-12 * 50, "A inv(A) - I: %g", max_diff(p, eye));
    OK(tg_linalg_solve(&x, a, r));
    OK(tg_matmul(&ax, a, x));
    cr_assert(max_diff(ax, r) < 1e-11, "A X - B: %g", max_diff(ax, r));
    tg_tensor *ab = NULL, *dab = NULL, *da = NULL, *db = NULL, *prod = NULL;
    OK(tg_matmul(&ab, a, b));
    OK(tg_linalg_det(&dab, ab));
    OK(tg_linalg_det(&da, a));
    OK(tg_linalg_det(&db, b));
    OK(tg_mul(&prod, da, db));
    cr_assert(max_diff(dab, prod) < 1e-12 * 10, "det(AB) - det A det B: %g", max_diff(dab, prod));
    tg_tensor *sg = NULL, *la = NULL, *el = NULL, *sd = NULL;
    OK(tg_linalg_slogdet(&sg, &la, a));
    OK(tg_exp(&el, la));
    OK(tg_mul(&sd, sg, el));
    cr_assert(max_diff(sd, da) < 1e-12, "sign exp(logabsdet) - det: %g", max_diff(sd, da));
    tg_tensor *at = NULL, *spd = NULL, *spd1 = NULL, *eye6 = NULL, *L = NULL, *lt = NULL,
              *llt = NULL;
    OK(tg_transpose(&at, a, -2, -1));
    OK(tg_matmul(&spd, a, at));
    OK(tg_add(&spd1, spd, eye));
    OK(tg_linalg_cholesky(&L, spd1, false));
    OK(tg_transpose(&lt, L, -2, -1));
    OK(tg_matmul(&llt, L, lt));
    cr_assert(max_diff(llt, spd1) < 1e-12 * 10, "L L^T - A: %g", max_diff(llt, spd1));
    tg_tensor *x2 = NULL, *tri = NULL, *tx = NULL;
    OK(tg_linalg_solve_triangular(&x2, L, r, false, true, false));
    OK(tg_tril(&tri, L, 0));
    OK(tg_matmul(&tx, tri, x2));
    cr_assert(max_diff(tx, r) < 1e-11, "L X - B: %g", max_diff(tx, r));
    th_release_all(5, (tg_tensor *[]){a, b, r, ai, p});
    th_release_all(5, (tg_tensor *[]){eye, x, ax, ab, dab});
    th_release_all(5, (tg_tensor *[]){da, db, prod, sg, la});
    th_release_all(5, (tg_tensor *[]){el, sd, at, spd, spd1});
    th_release_all(5, (tg_tensor *[]){eye6, L, lt, llt, x2});
    th_release_all(2, (tg_tensor *[]){tri, tx});
}

/* cholesky and solve_triangular read one triangle: what is in the other
 * changes nothing. */
Test(linalg_rules, the_other_triangle_is_not_read)
{
    const double spd[9] = {4, 99, -7, 2, 5, 1e30, 1, 3, 6};
    const double spd2[9] = {4, -1, NAN, 2, 5, 3, 1, 3, 6};
    tg_tensor *a = th_tensor_from(TG_F64, 2, (int64_t[]){3, 3}, spd);
    tg_tensor *b = th_tensor_from(TG_F64, 2, (int64_t[]){3, 3}, spd2);
    tg_tensor *la = NULL, *lb = NULL, *r = NULL, *xa = NULL, *xb = NULL;
    OK(tg_linalg_cholesky(&la, a, false));
    OK(tg_linalg_cholesky(&lb, b, false));
    th_expect_close("cholesky", la, lb, 0);
    uint64_t s = 3;
    r = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){3, 2}, -1, 1);
    OK(tg_linalg_solve_triangular(&xa, a, r, false, true, false));
    OK(tg_linalg_solve_triangular(&xb, b, r, false, true, false));
    th_expect_close("solve_triangular", xa, xb, 0);
    th_release_all(5, (tg_tensor *[]){a, b, la, lb, r});
    th_release_all(2, (tg_tensor *[]){xa, xb});
}

/* ---- det at a singular matrix ---- */

/* det's gradient at a matrix of rank n - 1 is adj(A)^T, which gradcheck's
 * finite differences see (det is linear in each element); torch 1.13
 * gives zeros there.  A batch mixing singular and regular matrices, and
 * rank n - 2 (gradient zero). */
static int det_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    (void)user;
    return tg_linalg_det(out, in[0]);
}

Test(linalg_rules, det_gradient_at_singular_matrices)
{
    const double v[2 * 9] = {1, 2, 3, 2, 4, 6.5, -1, 0.5, 2,   /* rows 0, 1 nearly dependent */
                             1, 2, 3, 2, 4, 6, 1, 1, 1};        /* rank 2: rows 0, 1 dependent */
    tg_tensor *a = th_tensor_from(TG_F64, 3, (int64_t[]){2, 3, 3}, v), *d = NULL;
    OK(tg_tensor_set_requires_grad(a, true));
    tg_gradcheck_opts o = TG_GRADCHECK_OPTS_INIT;
    cr_assert(eq(int, tg_gradcheck(det_fn, NULL, 1, &a, &o), TG_OK), "%s", tg_error_message());
    /* the adjugate of [[1,2,3],[2,4,6],[1,1,1]]: cofactors by hand */
    OK(tg_linalg_det(&d, a));
    double z;
    OK(tg_tensor_get_flat(d, 1, &z));
    cr_assert(z == 0, "det of the rank-2 matrix: %g", z);
    tg_tensor *g = NULL, *ones = NULL;
    tg_backward_opts keep = TG_BACKWARD_OPTS_INIT;
    keep.retain_graph = true;
    OK(tg_tensor_full_like(&ones, d, 1));
    OK(tg_grad(&g, 1, &d, &ones, 1, &a, &keep));
    static const double cof[9] = {4 - 6, -(2 - 6), 2 - 4, -(2 - 3), 1 - 3, -(1 - 2),
                                  12 - 12, -(6 - 6), 4 - 4};
    for (int i = 0; i < 9; i++) {
        double x;
        OK(tg_tensor_get_flat(g, 9 + i, &x));
        cr_assert(epsilon_eq(dbl, x, cof[i], 1e-12), "cofactor %d: %g, want %g", i, x, cof[i]);
    }
    /* a create_graph backward through det there has no second derivative */
    tg_backward_opts go = TG_BACKWARD_OPTS_INIT;
    go.create_graph = true;
    tg_tensor *g2 = NULL;
    th_expect_refused(tg_grad(&g2, 1, &d, &ones, 1, &a, &go), TG_EUNSUPPORTED,
                      "not differentiable again", g2);
    th_release_all(4, (tg_tensor *[]){a, d, g, ones});
}

/* rank n - 2: every cofactor is zero. */
Test(linalg_rules, det_gradient_of_rank_n_minus_2_is_zero)
{
    const double v[9] = {1, 2, 3, 2, 4, 6, 3, 6, 9};
    tg_tensor *a = th_tensor_from(TG_F64, 2, (int64_t[]){3, 3}, v), *d = NULL, *g = NULL;
    OK(tg_tensor_set_requires_grad(a, true));
    OK(tg_linalg_det(&d, a));
    OK(tg_grad(&g, 1, &d, NULL, 1, &a, NULL));
    for (int i = 0; i < 9; i++) {
        double x;
        OK(tg_tensor_get_flat(g, i, &x));
        cr_assert(fabs(x) < 1e-12, "element %d: %g", i, x);
    }
    th_release_all(3, (tg_tensor *[]){a, d, g});
}

/* slogdet of a singular matrix: sign 0, logabsdet -inf, and a gradient of
 * infinities (torch's: [[-inf, inf], [inf, -inf]] here), no error. */
Test(linalg_rules, slogdet_of_a_singular_matrix)
{
    const double v[4] = {1, 2, 2, 4};
    tg_tensor *a = th_tensor_from(TG_F64, 2, (int64_t[]){2, 2}, v), *s = NULL, *l = NULL;
    OK(tg_tensor_set_requires_grad(a, true));
    OK(tg_linalg_slogdet(&s, &l, a));
    double sv, lv;
    OK(tg_tensor_get_flat(s, 0, &sv));
    OK(tg_tensor_get_flat(l, 0, &lv));
    cr_assert(sv == 0 && isinf(lv) != 0 && lv < 0, "sign %g, logabsdet %g", sv, lv);
    tg_tensor *g = NULL;
    OK(tg_grad(&g, 1, &l, NULL, 1, &a, NULL));
    for (int i = 0; i < 4; i++) {
        double x;
        OK(tg_tensor_get_flat(g, i, &x));
        cr_assert(isinf(x) != 0, "element %d: %g", i, x);
    }
    th_release_all(4, (tg_tensor *[]){a, s, l, g});
}

/* ---- higher derivatives of det and slogdet ---- */

/* The gradient of sum(w * det(A + 3 I)) (user non-NULL: of sum(w *
 * logabsdet(A + 3 I))) with respect to A, taken with create_graph, so that
 * gradcheck of it checks det's second derivative and gradgradcheck its
 * third.  w = (1, -2) over a batch of two.  With no_graph set, the same
 * gradient without create_graph. */
static bool no_graph;   /* det_grad_fn without create_graph */

static int det_grad_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    const int64_t m = tg_tensor_dim(in[0], -1);
    tg_tensor *e = NULL, *e3 = NULL, *a = NULL, *d = NULL, *w = NULL;
    int rc = tg_tensor_eye(&e, TG_F64, m, m);
    if (rc >= 0) rc = tg_mul_scalar(&e3, e, 3);
    if (rc >= 0) rc = tg_add(&a, in[0], e3);
    if (rc >= 0 && user) rc = tg_linalg_slogdet(NULL, &d, a);
    else if (rc >= 0) rc = tg_linalg_det(&d, a);
    if (rc >= 0) w = th_tensor_from(TG_F64, 1, (int64_t[]){2}, (double[]){1, -2});
    tg_backward_opts o = TG_BACKWARD_OPTS_INIT;
    o.create_graph = !no_graph;
    tg_tensor *x = in[0];
    if (rc >= 0) rc = tg_grad(out, 1, &d, &w, 1, &x, &o);
    th_release_all(5, (tg_tensor *[]){e, e3, a, d, w});
    return rc;
}

/* det's and slogdet's second and third derivatives (their create_graph
 * gradients solve with A^T, whose own gradients follow) by gradcheck and
 * gradgradcheck in f64 of the gradient; the create_graph gradient itself
 * is the one without a graph (from the forward's LU factors). */
Test(linalg_rules, det_and_slogdet_third_derivatives)
{
    static int slog = 1;
    for (int k = 0; k < 2; k++) {
        tg_tensor *a = th_rand_uniform(TG_F64, 3, (int64_t[]){2, 3, 3}, 41 + (uint64_t)k);
        OK(tg_tensor_set_requires_grad(a, true));
        tg_gradcheck_opts o = TG_GRADCHECK_OPTS_INIT;
        void *user = k ? &slog : NULL;
        tg_tensor *g1 = NULL, *g0 = NULL;
        OK(det_grad_fn(&g1, 1, &a, user));
        no_graph = true;
        OK(det_grad_fn(&g0, 1, &a, user));
        no_graph = false;
        th_expect_close(k ? "slogdet's gradient" : "det's gradient", g1, g0, 1e-12);
        th_release_all(2, (tg_tensor *[]){g1, g0});
        cr_assert(eq(int, tg_gradcheck(det_grad_fn, user, 1, &a, &o), TG_OK), "%s: %s",
                  k ? "slogdet" : "det", tg_error_message());
        cr_assert(eq(int, tg_gradgradcheck(det_grad_fn, user, 1, &a, &o), TG_OK), "%s: %s",
                  k ? "slogdet" : "det", tg_error_message());
        tg_tensor_release(a);
    }
}

/* slogdet's gradient at a singular matrix with create_graph is the
 * infinities it is without (the solve there unchecked), no error. */
Test(linalg_rules, slogdet_singular_gradient_with_create_graph)
{
    const double v[4] = {1, 2, 2, 4};
    tg_tensor *a = th_tensor_from(TG_F64, 2, (int64_t[]){2, 2}, v), *l = NULL, *g = NULL;
    OK(tg_tensor_set_requires_grad(a, true));
    OK(tg_linalg_slogdet(NULL, &l, a));
    tg_backward_opts o = TG_BACKWARD_OPTS_INIT;
    o.create_graph = true;
    OK(tg_grad(&g, 1, &l, NULL, 1, &a, &o));
    for (int i = 0; i < 4; i++) {
        double x;
        OK(tg_tensor_get_flat(g, i, &x));
        cr_assert(isinf(x) != 0 || isnan(x) != 0, "element %d: %g", i, x);
    }
    th_release_all(3, (tg_tensor *[]){a, l, g});
}

/* ---- empty matrices, autocast ---- */

Test(linalg_rules, empty_matrices)
{
    tg_tensor *a = NULL, *y = NULL, *d = NULL;
    OK(tg_tensor_zeros(&a, TG_F64, 3, (int64_t[]){2, 0, 0}));
    OK(tg_linalg_inv(&y, a));
    cr_assert(eq(int, tg_tensor_ndim(y), 3));
    cr_assert(eq(i64, tg_tensor_numel(y), 0));
    OK(tg_linalg_det(&d, a));
    for (int i = 0; i < 2; i++) {
        double x;
        OK(tg_tensor_get_flat(d, i, &x));
        cr_assert(x == 1, "det of a 0 x 0 matrix: %g", x);
    }
    th_release_all(3, (tg_tensor *[]){a, y, d});
}

/* torch's CPU autocast runs inv, solve and cholesky in f32 and leaves det
 * alone (which then refuses bf16, as torch's). */
Test(linalg_rules, autocast_policies)
{
    const double v[4] = {2, 1, 1, 3};
    tg_tensor *a = th_tensor_from(TG_BF16, 2, (int64_t[]){2, 2}, v), *y = NULL, *l = NULL;
    tg_autocast_begin(TG_BF16);
    OK(tg_linalg_inv(&y, a));
    cr_assert(eq(int, tg_tensor_dtype(y), TG_F32));
    OK(tg_linalg_cholesky(&l, a, false));
    cr_assert(eq(int, tg_tensor_dtype(l), TG_F32));
    tg_tensor *d = NULL;
    th_expect_refused(tg_linalg_det(&d, a), TG_EDTYPE, "Low precision", d);
    tg_autocast_end();
    tg_tensor *y2 = NULL;
    th_expect_refused(tg_linalg_inv(&y2, a), TG_EDTYPE, "Low precision dtypes not supported",
                      y2);
    th_release_all(3, (tg_tensor *[]){a, y, l});
}

/* ---- refusals ---- */

Test(linalg_rules, refusals_name_the_rule)
{
    const double sing[8] = {1, 2, 3, 4, 1, 2, 2, 4};
    tg_tensor *a = th_tensor_from(TG_F64, 3, (int64_t[]){2, 2, 2}, sing);
    tg_tensor *rect = th_tensor_from(TG_F64, 2, (int64_t[]){2, 3}, sing);
    tg_tensor *vec = th_tensor_from(TG_F64, 1, (int64_t[]){2}, sing);
    tg_tensor *v3 = th_tensor_from(TG_F64, 1, (int64_t[]){3}, sing);
    tg_tensor *f32 = th_tensor_from(TG_F32, 2, (int64_t[]){2, 2}, sing);
    tg_tensor *i32 = th_tensor_from(TG_I32, 2, (int64_t[]){2, 2}, sing);
    tg_tensor *npd = th_tensor_from(TG_F64, 2, (int64_t[]){2, 2}, (double[]){1, 2, 2, 1});
    const double twelve[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    tg_tensor *b3 = th_tensor_from(TG_F64, 3, (int64_t[]){3, 2, 2}, twelve);
    th_expect_refused_clean(tg_linalg_inv(out_, a), TG_EINVAL,
                            "(Batch element 1): The diagonal element 2 is zero");
    th_expect_refused_clean(tg_linalg_solve(out_, a, vec), TG_EINVAL,
                            "(Batch element 1): The solver failed because the input matrix is "
                            "singular");
    th_expect_refused_clean(tg_linalg_inv(out_, rect), TG_ESHAPE,
                            "batches of square matrices, but they are 2 by 3 matrices");
    th_expect_refused_clean(tg_linalg_det(out_, vec), TG_ESHAPE, "at least 2 dimensions");
    th_expect_refused_clean(tg_linalg_inv(out_, i32), TG_EDTYPE,
                            "Expected a floating point tensor as A. Got i32");
    th_expect_refused_clean(tg_linalg_solve(out_, a, f32), TG_EDTYPE,
                            "Expected A and B to have the same dtype");
    th_expect_refused_clean(tg_linalg_solve(out_, a, v3), TG_ESHAPE, "have 3 rows");
    th_expect_refused_clean(tg_linalg_solve(out_, a, b3), TG_ESHAPE, "do not broadcast");
    th_expect_refused_clean(tg_linalg_cholesky(out_, npd, false), TG_EINVAL,
                            "the leading minor of order 2 is not positive-definite");
    th_expect_refused_clean(tg_linalg_solve_triangular(out_, a, vec, true, true, false),
                            TG_ESHAPE, "B must have at least 2 dimensions");
    th_expect_refused_clean(tg_linalg_inv(out_, NULL), TG_EINVAL, "A is NULL");
    cr_assert(eq(int, tg_linalg_inv(NULL, a), TG_EINVAL));
    cr_assert(eq(int, tg_linalg_slogdet(NULL, NULL, a), TG_EINVAL));
    /* one place for two results would lose one: refused, nothing written */
    tg_tensor *same = NULL;
    th_expect_refused(tg_linalg_svd(&same, NULL, &same, rect, false), TG_EINVAL,
                      "U and Vh must be two different places", same);
    th_expect_refused(tg_linalg_slogdet(&same, &same, a), TG_EINVAL,
                      "sign and logabsdet must be two different places", same);
    th_expect_refused(tg_linalg_lstsq(&same, &same, rect, rect, -1), TG_EINVAL,
                      "solution and rank must be two different places", same);
    th_expect_refused(tg_linalg_lu(NULL, &same, &same, a), TG_EINVAL,
                      "L and U must be two different places", same);
    th_release_all(8, (tg_tensor *[]){a, rect, vec, v3, f32, i32, npd, b3});
}

/* tg_tensor_eye, which the identities use: torch.eye's ones and zeros. */
Test(linalg_rules, eye_is_torch_eye)
{
    tg_tensor *e = NULL;
    OK(tg_tensor_eye(&e, TG_F32, 2, 3));
    static const double want[6] = {1, 0, 0, 0, 1, 0};
    for (int i = 0; i < 6; i++) {
        double x;
        OK(tg_tensor_get_flat(e, i, &x));
        cr_assert(x == want[i], "element %d: %g", i, x);
    }
    tg_tensor *f = NULL;
    th_expect_refused(tg_tensor_eye(&f, TG_F32, -1, 2), TG_EINVAL, "must be >= 0", f);
    tg_tensor_release(e);
}
