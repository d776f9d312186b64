/* tests/test_linalg_more.c - torch.linalg's LU functions (tapegrad/linalg.h:
 * lu_factor, lu, lu_solve), cholesky_solve, cholesky_inverse, lstsq and
 * matrix_exp against PyTorch (values and gradients, f32 and
 * f64, batches, broadcasting, both sides and adjoints), gradcheck and
 * gradgradcheck in f64, identities and refusals.  Goldens:
 * scripts/make_linalg_more_goldens.py. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

/* Golden case c: the value(s) and each input's gradient, scaled to the
 * largest element; pivots and P exactly. */
static void check_case(const tg_st_file *f, const char *c, const char *what, const char *op,
                       const char *arg, double tol)
{
    int k = atoi(th_golden_meta(f, c, "n"));
    const int nin = k;
    tg_tensor *in[2] = {NULL, NULL}, *y = NULL, *y2 = NULL, *pv = NULL, *pm = NULL;
    tg_tensor *d[2] = {NULL, NULL};
    char key[16];
    for (int j = 0; j < k; j++) {
        snprintf(key, sizeof key, "in%d", j);
        in[j] = th_leaf_clone(th_golden_get(f, c, key));
    }
    tg_tensor *g[2] = {(tg_tensor *)th_golden_get(f, c, "g"), NULL};
    int ny = 1;
    if (!strcmp(op, "lu_factor")) {
        OK(tg_linalg_lu_factor(&y, &pv, in[0]));
        cr_assert(th_same_bits(pv, th_golden_get(f, c, "piv")), "%s: pivots differ", what);
    } else if (!strcmp(op, "lu")) {
        OK(tg_linalg_lu(&pm, &y, &y2, in[0]));
        th_expect_close(what, pm, th_golden_get(f, c, "p"), 0);
        th_expect_close_scaled(what, y2, th_golden_get(f, c, "u"), tol);
        g[1] = (tg_tensor *)th_golden_get(f, c, "gu");
        ny = 2;
    } else if (!strcmp(op, "lu_solve")) {
        OK(tg_linalg_lu_solve(&y, in[0], (tg_tensor *)th_golden_get(f, c, "piv"), in[1],
                              arg[0] == '1', arg[1] == '1'));
    } else if (!strcmp(op, "cholesky_solve")) {
        OK(tg_cholesky_solve(&y, in[0], in[1], !strcmp(arg, "upper")));
    } else if (!strcmp(op, "cholesky_inverse")) {
        OK(tg_cholesky_inverse(&y, in[0], !strcmp(arg, "upper")));
    } else if (!strcmp(op, "lstsq")) {
        OK(tg_linalg_lstsq(&y, NULL, in[0], in[1], -1));
    } else {
        cr_assert(strcmp(op, "matrix_exp") == 0, "%s: unknown op", what);
        OK(tg_linalg_matrix_exp(&y, in[0]));
    }
    th_expect_close_scaled(what, y, th_golden_get(f, c, "y"), tol);
    if (!strcmp(th_golden_meta(f, c, "grad"), "0")) k = 0;   /* torch has none */
    if (k > 0)
        cr_assert(eq(int, tg_grad(d, ny, (tg_tensor *[]){y, y2}, g, k, in, NULL), TG_OK),
                  "%s: %s", what, tg_error_message());
    for (int j = 0; j < k; j++) {
        snprintf(key, sizeof key, "d%d", j);
        cr_assert(d[j] != NULL, "%s: input %d has no gradient", what, j);
        th_expect_close_scaled(what, d[j], th_golden_get(f, c, key), tol * 10);
    }
    th_release_all(nin, in);
    th_release_all(2, d);
    th_release_all(4, (tg_tensor *[]){y, y2, pv, pm});
}

Test(linalg_more, every_case_matches_torch)
{
    tg_st_file *f = th_golden_load("linalg_more.safetensors");
    const int n = atoi(tg_st_meta_get(f, "cases"));
    static const char *const ops[7] = {"lu_factor", "lu", "lu_solve", "cholesky_solve",
                                       "cholesky_inverse", "lstsq", "matrix_exp"};
    int per_op[7] = {0}, f32 = 0;
    for (int i = 0; i < n; i++) {
        char c[16], what[128];
        snprintf(c, sizeof c, "case%d", i);
        const char *op = th_golden_meta(f, c, "op"), *dt = th_golden_meta(f, c, "dtype");
        const char *arg = th_golden_meta(f, c, "arg");
        snprintf(what, sizeof what, "%s (%s %s '%s')", c, op, dt, arg);
        check_case(f, c, what, op, arg, !strcmp(dt, "f64") ? 1e-12 : 2e-5);
        for (int o = 0; o < 7; o++) per_op[o] += !strcmp(op, ops[o]);
        f32 += !strcmp(dt, "f32");
    }
    for (int o = 0; o < 7; o++) cr_assert(per_op[o] >= 8, "%d %s cases", per_op[o], ops[o]);
    cr_assert(f32 * 2 == n, "%d of %d cases f32", f32, n);
    tg_st_free(f);
}

/* ---- gradcheck and gradgradcheck in f64 ---- */

typedef th_call call;

/* lu_factor: LU; lu: L and U flattened; lu_solve: in[0] + 3 I as LU with
 * fixed pivots (row swaps 2, 3, 3 in each matrix); cholesky_solve and
 * cholesky_inverse: the factor tril(in[0]) + 3 I (triu: upper), as the
 * forward reads one triangle while torch's gradient reaches both; lstsq and
 * matrix_exp: in[0] as it is. */
static int call_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    const call *c = user;
    if (!strcmp(c->op, "lu_factor")) return tg_linalg_lu_factor(out, NULL, in[0]);
    if (!strcmp(c->op, "lstsq")) return tg_linalg_lstsq(out, NULL, in[0], in[1], -1);
    if (!strcmp(c->op, "matrix_exp")) return tg_linalg_matrix_exp(out, in[0]);
    tg_tensor *l = NULL, *u = NULL, *f[2] = {NULL, NULL}, *e = NULL, *lu = NULL, *pv = NULL;
    int rc;
    if (!strncmp(c->op, "cholesky", 8)) {
        const int64_t m = tg_tensor_dim(in[0], -1);
        const bool upper = !strcmp(c->arg, "upper");
        rc = tg_tensor_eye(&e, TG_F64, m, m);
        if (rc >= 0) rc = tg_mul_scalar(&l, e, 3);
        if (rc >= 0) rc = upper ? tg_triu(&u, in[0], 0) : tg_tril(&u, in[0], 0);
        if (rc >= 0) rc = tg_add(&lu, u, l);
        if (rc >= 0 && !strcmp(c->op, "cholesky_solve"))
            rc = tg_cholesky_solve(out, in[1], lu, upper);
        else if (rc >= 0)
            rc = tg_cholesky_inverse(out, lu, upper);
    } else if (!strcmp(c->op, "lu")) {
        rc = tg_linalg_lu(NULL, &l, &u, in[0]);
        if (rc >= 0) rc = tg_reshape(&f[0], l, 1, (int64_t[]){-1});
        if (rc >= 0) rc = tg_reshape(&f[1], u, 1, (int64_t[]){-1});
        if (rc >= 0) rc = tg_cat(out, 2, f, 0);
    } else {
        const int nd = tg_tensor_ndim(in[0]);
        int64_t ps[4];
        int32_t piv[6];
        for (int i = 0; i < nd - 1; i++) ps[i] = tg_tensor_dim(in[0], i);
        for (int i = 0; i < 6; i++) piv[i] = (int32_t[]){2, 3, 3}[i % 3];
        rc = tg_tensor_eye(&e, TG_F64, 3, 3);
        if (rc >= 0) rc = tg_mul_scalar(&l, e, 3);
        if (rc >= 0) rc = tg_add(&lu, in[0], l);
        if (rc >= 0) rc = tg_tensor_from_data(&pv, TG_I32, nd - 1, ps, piv);
        if (rc >= 0) rc = tg_linalg_lu_solve(out, lu, pv, in[1], c->arg[0] == '1',
                                             c->arg[1] == '1');
    }
    th_release_all(7, (tg_tensor *[]){l, u, f[0], f[1], e, lu, pv});
    return rc;
}

static const call CHECKED[] = {
    {"lu_factor", "", 1, {2}, {{3, 3}}},
    {"lu_factor", "", 1, {3}, {{2, 4, 4}}},
    {"lu", "", 1, {2}, {{3, 3}}},
    {"lu", "", 1, {3}, {{2, 3, 3}}},
    {"lu_solve", "10", 2, {2, 2}, {{3, 3}, {3, 2}}},
    {"lu_solve", "11", 2, {3, 3}, {{2, 3, 3}, {2, 3, 2}}},
    {"lu_solve", "00", 2, {2, 3}, {{3, 3}, {2, 1, 3}}},
    {"lu_solve", "01", 2, {2, 2}, {{3, 3}, {2, 3}}},
    {"cholesky_solve", "lower", 2, {2, 2}, {{3, 3}, {3, 2}}},
    {"cholesky_solve", "upper", 2, {3, 3}, {{2, 3, 3}, {1, 3, 2}}},
    {"cholesky_inverse", "lower", 1, {2}, {{3, 3}}},
    {"cholesky_inverse", "upper", 1, {3}, {{2, 3, 3}}},
    {"lstsq", "", 2, {2, 2}, {{4, 3}, {4, 2}}},
    {"lstsq", "", 2, {3, 2}, {{2, 2, 4}, {2, 2}}},
    {"lstsq", "", 2, {2, 3}, {{4, 2}, {2, 4, 1}}},
    {"matrix_exp", "", 1, {2}, {{3, 3}}},
    {"matrix_exp", "", 1, {3}, {{2, 2, 2}}},
};

Test(linalg_more, gradcheck_and_gradgradcheck_f64)
{
    th_gradcheck_calls(CHECKED, sizeof CHECKED / sizeof *CHECKED, call_fn, 500, -1, 1);
}

/* ---- identities ---- */

Test(linalg_more, p_l_u_is_a_and_lu_solve_solves)
{
    uint64_t s = 77;
    tg_tensor *a = th_rand_tensor(&s, TG_F64, 3, (int64_t[]){3, 5, 5}, -2, 2);
    tg_tensor *b = th_rand_tensor(&s, TG_F64, 3, (int64_t[]){3, 5, 2}, -2, 2);
    tg_tensor *p = NULL, *l = NULL, *u = NULL, *pl = NULL, *plu = NULL, *lu = NULL,
              *pv = NULL, *x = NULL, *ax = NULL, *at = NULL, *xr = NULL, *xa = NULL,
              *bt = NULL;
    OK(tg_linalg_lu(&p, &l, &u, a));
    OK(tg_matmul(&pl, p, l));
    OK(tg_matmul(&plu, pl, u));
    cr_assert(th_max_diff(plu, a) < 1e-13, "P L U differs from A by %g", th_max_diff(plu, a));
    OK(tg_linalg_lu_factor(&lu, &pv, a));
    OK(tg_linalg_lu_solve(&x, lu, pv, b, true, false));
    OK(tg_matmul(&ax, a, x));
    cr_assert(th_max_diff(ax, b) < 1e-12, "A X differs from B by %g", th_max_diff(ax, b));
    /* X A^T = B^T with left = false, adjoint = true */
    OK(tg_transpose(&bt, b, -2, -1));
    OK(tg_linalg_lu_solve(&xr, lu, pv, bt, false, true));
    OK(tg_transpose(&at, a, -2, -1));
    OK(tg_matmul(&xa, xr, at));
    cr_assert(th_max_diff(xa, bt) < 1e-12, "X A^T differs from B^T by %g", th_max_diff(xa, bt));
    th_release_all(13, (tg_tensor *[]){a, b, p, l, u, pl, plu, lu, pv, x, ax, at, xr});
    th_release_all(2, (tg_tensor *[]){xa, bt});
}

Test(linalg_more, lu_of_a_singular_matrix)
{
    tg_tensor *a = th_tensor_from(TG_F64, 2, (int64_t[]){2, 2}, (double[]){1, 2, 2, 4});
    tg_tensor *p = NULL, *l = NULL, *u = NULL, *lu = NULL;
    OK(tg_linalg_lu(&p, &l, &u, a));
    cr_assert(eq(dbl, th_at(u, 3), 0.0));
    th_expect_refused(tg_linalg_lu_factor(&lu, NULL, a), TG_EINVAL, "U[2,2] is zero", lu);
    tg_tensor *ab = th_tensor_from(TG_F64, 3, (int64_t[]){2, 2, 2},
                                   (double[]){1, 0, 0, 1, 1, 2, 2, 4});
    th_expect_refused(tg_linalg_lu_factor(&lu, NULL, ab), TG_EINVAL, "(Batch element 1)", lu);
    th_release_all(5, (tg_tensor *[]){a, p, l, u, ab});
}

/* ---- refusals ---- */

Test(linalg_more, refusals_name_the_argument)
{
    uint64_t s = 9;
    tg_tensor *a = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){3, 3}, -1, 1);
    tg_tensor *lu = NULL, *pv = NULL;
    OK(tg_linalg_lu_factor(&lu, &pv, a));
    tg_tensor *r = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){3, 2}, -1, 1);
    tg_tensor *v = th_rand_tensor(&s, TG_F64, 1, (int64_t[]){3}, -1, 1);
    tg_tensor *ai = th_tensor_from(TG_I64, 2, (int64_t[]){2, 2}, (double[]){1, 2, 3, 4});
    tg_tensor *bf = th_rand_tensor(&s, TG_F32, 2, (int64_t[]){3, 2}, -1, 1);
    tg_tensor *b4 = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){4, 2}, -1, 1);
    tg_tensor *p64 = th_tensor_from(TG_I64, 1, (int64_t[]){3}, (double[]){1, 2, 3});
    tg_tensor *p2 = th_tensor_from(TG_I32, 1, (int64_t[]){2}, (double[]){1, 2});
    tg_tensor *pbad = th_tensor_from(TG_I32, 1, (int64_t[]){3}, (double[]){1, 4, 3});
    tg_tensor *pzero = th_tensor_from(TG_I32, 1, (int64_t[]){3}, (double[]){0, 2, 3});
    th_expect_refused(tg_linalg_lu_factor(NULL, NULL, a), TG_EINVAL, "both NULL", NULL);
    th_expect_refused_clean(tg_linalg_lu_factor(out_, NULL, NULL), TG_EINVAL, "A");
    th_expect_refused_clean(tg_linalg_lu_factor(out_, NULL, v), TG_ESHAPE, "A");
    th_expect_refused_clean(tg_linalg_lu_factor(out_, NULL, ai), TG_EDTYPE, "floating point");
    th_expect_refused(tg_linalg_lu(NULL, NULL, NULL, a), TG_EINVAL, "all NULL", NULL);
    th_expect_refused(tg_linalg_lu_solve(NULL, lu, pv, r, true, false), TG_EINVAL,
                      "out is NULL", NULL);
    th_expect_refused_clean(tg_linalg_lu_solve(out_, lu, pv, v, true, false), TG_ESHAPE, "B");
    th_expect_refused_clean(tg_linalg_lu_solve(out_, lu, pv, bf, true, false), TG_EDTYPE,
                            "same dtype");
    th_expect_refused_clean(tg_linalg_lu_solve(out_, lu, pv, b4, true, false), TG_ESHAPE,
                            "AX = B (3x3 and 4x2)");
    th_expect_refused_clean(tg_linalg_lu_solve(out_, lu, pv, r, false, false), TG_ESHAPE,
                            "XA = B (3x3 and 3x2)");
    th_expect_refused_clean(tg_linalg_lu_solve(out_, lu, p64, r, true, false), TG_EDTYPE,
                            "pivots should be a Tensor of scalar type int32");
    th_expect_refused_clean(tg_linalg_lu_solve(out_, lu, p2, r, true, false), TG_ESHAPE,
                            "pivots must have LU's shape");
    th_expect_refused_clean(tg_linalg_lu_solve(out_, lu, NULL, r, true, false), TG_EINVAL,
                            "pivots is NULL");
    th_expect_refused_clean(tg_linalg_lu_solve(out_, lu, pbad, r, true, false), TG_EINVAL,
                            "smaller or equal to LU.size(-2)");
    th_expect_refused_clean(tg_linalg_lu_solve(out_, lu, pzero, r, true, false), TG_EINVAL,
                            "greater or equal to 1");
    th_expect_refused_clean(tg_linalg_lu_solve(out_, r, pv, r, true, false), TG_ESHAPE, "LU");
    th_expect_refused_clean(tg_linalg_lu_solve(out_, NULL, pv, r, true, false), TG_EINVAL, "LU");
    th_expect_refused_clean(tg_linalg_lu_solve(out_, lu, pv, NULL, true, false), TG_EINVAL, "B");
    th_expect_refused_clean(tg_linalg_lu(out_, NULL, NULL, NULL), TG_EINVAL, "A");
    th_release_all(12, (tg_tensor *[]){a, lu, pv, r, v, ai, bf, b4, p64, p2, pbad, pzero});
}

/* cholesky_solve(B, L) = solve(L L^T, B) and cholesky_inverse(L) = inv(L
 * L^T), with L's other triangle full of values that must not be read;
 * batch dims of B and L broadcast. */
Test(linalg_more, cholesky_solve_and_inverse_identities)
{
    uint64_t s = 31;
    tg_tensor *x = th_rand_tensor(&s, TG_F64, 3, (int64_t[]){2, 4, 4}, -1, 1);
    tg_tensor *junk = th_rand_tensor(&s, TG_F64, 3, (int64_t[]){2, 4, 4}, -5, 5);
    tg_tensor *b = th_rand_tensor(&s, TG_F64, 4, (int64_t[]){3, 1, 4, 2}, -1, 1);
    tg_tensor *xt = NULL, *xx = NULL, *e = NULL, *a = NULL, *l = NULL, *jl = NULL, *lj = NULL,
              *want = NULL, *got = NULL, *inv = NULL, *cinv = NULL, *ut = NULL, *uj = NULL,
              *ju = NULL, *gotu = NULL;
    OK(tg_transpose(&xt, x, -2, -1));
    OK(tg_matmul(&xx, x, xt));
    OK(tg_tensor_eye(&e, TG_F64, 4, 4));
    OK(tg_add(&a, xx, e));
    OK(tg_linalg_cholesky(&l, a, false));
    OK(tg_triu(&jl, junk, 1));
    OK(tg_add(&lj, l, jl));
    OK(tg_linalg_solve(&want, a, b));
    OK(tg_cholesky_solve(&got, b, lj, false));
    cr_assert(th_max_diff(got, want) < 1e-12, "lower: %g", th_max_diff(got, want));
    OK(tg_transpose(&ut, l, -2, -1));
    OK(tg_tril(&ju, junk, -1));
    OK(tg_add(&uj, ut, ju));
    OK(tg_cholesky_solve(&gotu, b, uj, true));
    cr_assert(th_max_diff(gotu, want) < 1e-12, "upper: %g", th_max_diff(gotu, want));
    OK(tg_linalg_inv(&inv, a));
    OK(tg_cholesky_inverse(&cinv, lj, false));
    cr_assert(th_max_diff(cinv, inv) < 1e-12, "inverse: %g", th_max_diff(cinv, inv));
    th_release_all(15, (tg_tensor *[]){x, junk, b, xt, xx, e, a, l, jl, lj, want, got, inv,
                                       cinv, ut});
    th_release_all(4, (tg_tensor *[]){uj, ju, gotu, NULL});
}

/* lstsq: the normal equations A^T (A X - B) = 0 for a tall A, A X = B for
 * a wide one, broadcast batch dims as a loop would, and the rank. */
Test(linalg_more, lstsq_solves_least_squares)
{
    uint64_t s = 41;
    tg_tensor *a = th_rand_tensor(&s, TG_F64, 4, (int64_t[]){2, 1, 6, 3}, -1, 1);
    tg_tensor *b = th_rand_tensor(&s, TG_F64, 4, (int64_t[]){1, 3, 6, 2}, -1, 1);
    tg_tensor *x = NULL, *rk = NULL, *ax = NULL, *r = NULL, *at = NULL, *n = NULL,
              *zero = NULL, *w = NULL, *wt = NULL, *xw = NULL, *wx = NULL, *bw = NULL;
    OK(tg_linalg_lstsq(&x, &rk, a, b, -1));
    int64_t xs[4] = {2, 3, 3, 2};
    th_expect_shape(x, 4, xs);
    th_expect_shape(rk, 2, (int64_t[]){2, 1});
    cr_assert(eq(int, tg_tensor_dtype(rk), TG_I64));
    cr_assert(eq(dbl, th_at(rk, 0), 3.0));
    OK(tg_matmul(&ax, a, x));
    OK(tg_sub(&r, ax, b));
    OK(tg_transpose(&at, a, -2, -1));
    OK(tg_matmul(&n, at, r));
    OK(tg_tensor_zeros_like(&zero, n));
    cr_assert(th_max_diff(n, zero) < 1e-12, "normal equations: %g", th_max_diff(n, zero));
    /* wide: W^T (3 x 6) X = B (3 x 2) exactly */
    OK(tg_transpose(&wt, a, -2, -1));
    tg_tensor *b3 = th_rand_tensor(&s, TG_F64, 4, (int64_t[]){1, 2, 3, 2}, -1, 1);
    OK(tg_linalg_lstsq(&wx, NULL, wt, b3, -1));
    OK(tg_matmul(&xw, wt, wx));
    OK(tg_expand(&bw, b3, 4, (int64_t[]){2, 2, 3, 2}));
    th_expect_shape(wx, 4, (int64_t[]){2, 2, 6, 2});
    cr_assert(th_max_diff(xw, bw) < 1e-12, "wide: %g", th_max_diff(xw, bw));
    th_release_all(12, (tg_tensor *[]){a, b, x, rk, ax, r, at, n, zero, w, wt, xw});
    th_release_all(3, (tg_tensor *[]){wx, bw, b3});
}

/* exp(0) = I, exp of a diagonal matrix is the exp of its diagonal, exp(A)
 * exp(-A) = I with a norm that needs scaling, in f32 and f64. */
Test(linalg_more, matrix_exp_identities)
{
    tg_tensor *z = NULL, *e = NULL, *i3 = NULL, *d = NULL, *ed = NULL;
    OK(tg_tensor_zeros(&z, TG_F32, 2, (int64_t[]){3, 3}));
    OK(tg_linalg_matrix_exp(&e, z));
    OK(tg_tensor_eye(&i3, TG_F32, 3, 3));
    th_expect_close("exp(0)", e, i3, 0);
    d = th_tensor_from(TG_F64, 2, (int64_t[]){2, 2}, (double[]){-7, 0, 0, 3});
    OK(tg_linalg_matrix_exp(&ed, d));
    cr_assert(epsilon_eq(dbl, th_at(ed, 0), exp(-7.0), 1e-16));
    cr_assert(eq(dbl, th_at(ed, 1), 0.0));
    cr_assert(epsilon_eq(dbl, th_at(ed, 3), exp(3.0), 1e-13));
    uint64_t s = 5;
    tg_tensor *a = th_rand_tensor(&s, TG_F64, 3, (int64_t[]){2, 4, 4}, -3, 3);
    tg_tensor *na = NULL, *ea = NULL, *ena = NULL, *p = NULL, *i4 = NULL;
    OK(tg_neg(&na, a));
    OK(tg_linalg_matrix_exp(&ea, a));
    OK(tg_linalg_matrix_exp(&ena, na));
    OK(tg_matmul(&p, ea, ena));
    OK(tg_tensor_eye(&i4, TG_F64, 4, 4));
    cr_assert(th_max_diff(p, i4) < 1e-10, "exp(A) exp(-A): %g", th_max_diff(p, i4));
    th_release_all(10, (tg_tensor *[]){z, e, i3, d, ed, a, na, ea, ena, p});
    tg_tensor_release(i4);
}

/* matrix_exp of bf16 and f16 matrices (computed in f64, rounded once) and
 * its gradient against torch's f64 results rounded to the half dtype
 * (tests/golden/matrix_exp_half.safetensors): within one rounding. */
Test(linalg_more, matrix_exp_half_matches_torch)
{
    tg_st_file *f = th_golden_load("matrix_exp_half.safetensors");
    const int n = atoi(tg_st_meta_get(f, "cases"));
    int per[2] = {0, 0};
    for (int c_i = 0; c_i < n; c_i++) {
        char c[16];
        snprintf(c, sizeof c, "case%d", c_i);
        const bool bf = !strcmp(th_golden_meta(f, c, "dtype"), "bf16");
        tg_tensor *x = th_leaf_clone(th_golden_get(f, c, "x")), *y = NULL, *dx = NULL;
        tg_tensor *g = (tg_tensor *)th_golden_get(f, c, "g");
        OK(tg_linalg_matrix_exp(&y, x));
        cr_assert(eq(int, tg_tensor_dtype(y), bf ? TG_BF16 : TG_F16), "%s", c);
        th_expect_close(c, y, th_golden_get(f, c, "y"), bf ? 4e-3 : 1e-3);
        OK(tg_grad(&dx, 1, &y, &g, 1, &x, NULL));
        th_expect_close(c, dx, th_golden_get(f, c, "dx"), bf ? 4e-3 : 1e-3);
        per[bf]++;
        th_release_all(3, (tg_tensor *[]){x, y, dx});
    }
    cr_assert(per[0] >= 8 && per[1] >= 8, "%d f16, %d bf16 cases", per[0], per[1]);
    tg_st_free(f);
}

Test(linalg_more, more_refusals_name_the_argument)
{
    uint64_t s = 19;
    tg_tensor *l = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){3, 3}, -1, 1);
    tg_tensor *r = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){3, 2}, -1, 1);
    tg_tensor *r4 = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){4, 2}, -1, 1);
    tg_tensor *v = th_rand_tensor(&s, TG_F64, 1, (int64_t[]){3}, -1, 1);
    tg_tensor *rf = th_rand_tensor(&s, TG_F32, 2, (int64_t[]){3, 2}, -1, 1);
    tg_tensor *li = th_tensor_from(TG_I64, 2, (int64_t[]){2, 2}, (double[]){1, 0, 0, 1});
    tg_tensor *l0 = th_tensor_from(TG_F64, 3, (int64_t[]){2, 2, 2},
                                   (double[]){1, 0, 0, 1, 1, 0, 3, 0});
    tg_tensor *bb = th_rand_tensor(&s, TG_F64, 3, (int64_t[]){2, 3, 2}, -1, 1);
    tg_tensor *lb = th_rand_tensor(&s, TG_F64, 3, (int64_t[]){3, 3, 3}, -1, 1);
    th_expect_refused(tg_cholesky_solve(NULL, r, l, false), TG_EINVAL, "out is NULL", NULL);
    th_expect_refused_clean(tg_cholesky_solve(out_, v, l, false), TG_ESHAPE, "B");
    th_expect_refused_clean(tg_cholesky_solve(out_, r, v, false), TG_ESHAPE, "L");
    th_expect_refused_clean(tg_cholesky_solve(out_, r, r, false), TG_ESHAPE, "square");
    th_expect_refused_clean(tg_cholesky_solve(out_, rf, l, false), TG_EDTYPE,
                            "Expected b and A to have the same dtype");
    th_expect_refused_clean(tg_cholesky_solve(out_, r4, l, false), TG_ESHAPE,
                            "each A matrix is 3 by 3 but each b matrix is 4 by 2");
    th_expect_refused_clean(tg_cholesky_solve(out_, bb, lb, false), TG_ESHAPE, "cholesky_solve");
    th_expect_refused_clean(tg_cholesky_inverse(out_, v, false), TG_ESHAPE, "L");
    th_expect_refused_clean(tg_cholesky_inverse(out_, r, true), TG_ESHAPE, "square");
    th_expect_refused_clean(tg_cholesky_inverse(out_, li, false), TG_EDTYPE, "floating point");
    th_expect_refused_clean(tg_cholesky_inverse(out_, l0, false), TG_EINVAL,
                            "The diagonal element 2 is zero");
    th_expect_refused_clean(tg_linalg_lstsq(out_, NULL, v, r, -1), TG_ESHAPE, "A");
    th_expect_refused_clean(tg_linalg_lstsq(out_, NULL, r, NULL, -1), TG_EINVAL, "B is NULL");
    th_expect_refused_clean(tg_linalg_lstsq(out_, NULL, r, rf, -1), TG_EDTYPE,
                            "Expected input and other to have the same dtype");
    th_expect_refused_clean(tg_linalg_lstsq(out_, NULL, r, r4, -1), TG_ESHAPE,
                            "input.size(-2) should match other.size(-2)");
    th_expect_refused_clean(tg_linalg_lstsq(out_, NULL, lb, r4, -1), TG_ESHAPE,
                            "input.size(-2) should match other.size(-1)");
    th_expect_refused(tg_linalg_lstsq(NULL, NULL, r, r, -1), TG_EINVAL, "both NULL", NULL);
    th_expect_refused_clean(tg_linalg_matrix_exp(out_, r), TG_ESHAPE, "square");
    th_expect_refused_clean(tg_linalg_matrix_exp(out_, v), TG_ESHAPE, "A");
    th_expect_refused_clean(tg_linalg_matrix_exp(out_, li), TG_EDTYPE, "floating point");
    th_expect_refused_clean(tg_linalg_matrix_exp(out_, NULL), TG_EINVAL, "A");
    th_expect_refused(tg_linalg_matrix_exp(NULL, l), TG_EINVAL, "out is NULL", NULL);
    th_expect_refused_clean(tg_cholesky_solve(out_, NULL, l, false), TG_EINVAL, "");
    th_expect_refused_clean(tg_cholesky_solve(out_, r, NULL, false), TG_EINVAL, "");
    th_expect_refused_clean(tg_cholesky_inverse(out_, NULL, false), TG_EINVAL, "");
    th_expect_refused_clean(tg_linalg_lstsq(out_, NULL, NULL, r, -1), TG_EINVAL, "A is NULL");
    th_release_all(9, (tg_tensor *[]){l, r, r4, v, rf, li, l0, bb, lb});
}

/* Inside a bf16 autocast scope cholesky_solve, cholesky_inverse and lstsq
 * take bf16 operands in f32 (torch's CPU autocast); lu_factor refuses bf16
 * (not on torch's lists; its lu_factor refuses it); matrix_exp keeps bf16
 * (not on the lists: a bf16 result, as outside the scope); lu_solve of f32
 * operands stays f32. */
Test(linalg_more, autocast_policies)
{
    uint64_t s = 3;
    tg_tensor *l = th_rand_tensor(&s, TG_F32, 2, (int64_t[]){3, 3}, 1, 2);
    tg_tensor *b = th_rand_tensor(&s, TG_F32, 2, (int64_t[]){3, 2}, -1, 1);
    tg_tensor *lb = NULL, *bb = NULL, *y[3] = {NULL, NULL, NULL}, *w[3] = {NULL, NULL, NULL};
    tg_tensor *lbf = NULL, *bbf = NULL, *r = NULL;
    OK(tg_tensor_to_dtype(&lb, l, TG_BF16));
    OK(tg_tensor_to_dtype(&bb, b, TG_BF16));
    OK(tg_tensor_to_dtype(&lbf, lb, TG_F32));   /* the bf16 values in f32 */
    OK(tg_tensor_to_dtype(&bbf, bb, TG_F32));
    OK(tg_autocast_begin(TG_BF16));
    const int rc0 = tg_cholesky_solve(&y[0], bb, lb, false);
    const int rc1 = tg_cholesky_inverse(&y[1], lb, true);
    const int rc2 = tg_linalg_lstsq(&y[2], NULL, lb, bb, -1);
    th_expect_refused(tg_linalg_lu_factor(&r, NULL, lb), TG_EDTYPE, "Low precision", r);
    tg_tensor *e = NULL, *lu = NULL, *pv = NULL, *x = NULL, *xw = NULL;
    const int rc3 = tg_linalg_matrix_exp(&e, lb);
    OK(tg_linalg_lu_factor(&lu, &pv, l));   /* f32 stays f32 */
    const int rc5 = tg_linalg_lu_solve(&x, lu, pv, b, true, false);
    OK(tg_autocast_end());
    cr_assert(eq(int, rc5, TG_OK), "lu_solve: %s", tg_error_message());
    cr_assert(eq(int, tg_tensor_dtype(x), TG_F32));
    OK(tg_linalg_lu_solve(&xw, lu, pv, b, true, false));
    th_expect_close("lu_solve under autocast", x, xw, 0);
    th_release_all(4, (tg_tensor *[]){lu, pv, x, xw});
    cr_assert(eq(int, rc0, TG_OK));
    cr_assert(eq(int, rc1, TG_OK));
    cr_assert(eq(int, rc2, TG_OK));
    cr_assert(eq(int, rc3, TG_OK), "matrix_exp: %s", tg_error_message());
    tg_tensor *e2 = NULL;
    OK(tg_linalg_matrix_exp(&e2, lb));
    cr_assert(eq(int, tg_tensor_dtype(e), TG_BF16));
    th_expect_close("matrix_exp under autocast", e, e2, 0);
    tg_tensor_release(e2);
    OK(tg_cholesky_solve(&w[0], bbf, lbf, false));
    OK(tg_cholesky_inverse(&w[1], lbf, true));
    OK(tg_linalg_lstsq(&w[2], NULL, lbf, bbf, -1));
    for (int i = 0; i < 3; i++) {
        cr_assert(eq(int, tg_tensor_dtype(y[i]), TG_F32), "result %d", i);
        th_expect_close("autocast", y[i], w[i], 0);
    }
    th_release_all(8, (tg_tensor *[]){l, b, lb, bb, lbf, bbf, r, e});
    th_release_all(3, y);
    th_release_all(3, w);
}
