/* tests/test_linalg_ext.c - torch.linalg's lstsq with its drivers and full
 * result, lu_factor and lu of rectangular matrices, eigvalsh without a
 * gradient, cond, tensorinv, tensorsolve, householder_product, vander,
 * vecdot (tapegrad/linalg.h) and cov, corrcoef (tapegrad/ops.h) against
 * PyTorch (values and gradients, f32 and f64), gradcheck and gradgradcheck
 * in f64, identities and refusals.  Goldens:
 * scripts/make_linalg_ext_goldens.py. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

/* The op of a golden case (or a gradcheck call) on in[] (fw: cov's
 * fweights or NULL) into y[0..4). */
static int run_op(const char *op, const char *arg, tg_tensor *const *in, tg_tensor *fw,
                  tg_tensor **y)
{
    if (!strcmp(op, "eigvalsh")) return tg_linalg_eigvalsh(&y[0], in[0], !strcmp(arg, "upper"));
    if (!strncmp(op, "lstsq", 5)) {
        char d[8] = "";
        const char *comma = strchr(arg, ',');
        memcpy(d, arg, (size_t)(comma - arg));
        return tg_linalg_lstsq_ex(&y[0], &y[1], &y[2], &y[3], in[0], in[1], atof(comma + 1), d);
    }
    if (!strcmp(op, "lu_factor")) return tg_linalg_lu_factor(&y[0], &y[1], in[0]);
    if (!strcmp(op, "lu")) return tg_linalg_lu(&y[2], &y[0], &y[1], in[0]);
    if (!strncmp(op, "cond", 4)) return tg_linalg_cond(&y[0], in[0], strcmp(arg, "None") ? arg
                                                                                        : NULL);
    if (!strcmp(op, "tensorinv")) return tg_linalg_tensorinv(&y[0], in[0], atoi(arg));
    if (!strcmp(op, "tensorsolve")) {
        int dims[4], nd = 0;
        if (arg[0]) nd = th_dims_of(arg, dims);
        return tg_linalg_tensorsolve(&y[0], in[0], in[1], nd, nd ? dims : NULL);
    }
    if (!strcmp(op, "householder_product"))
        return tg_linalg_householder_product(&y[0], in[0], in[1]);
    if (!strcmp(op, "vander")) return tg_linalg_vander(&y[0], in[0], atoll(arg));
    if (!strcmp(op, "vecdot")) return tg_linalg_vecdot(&y[0], in[0], in[1], atoi(arg));
    if (!strcmp(op, "cov"))
        return tg_cov(&y[0], in[0], atoll(arg), fw, arg[4] == '1' ? in[1] : NULL);
    cr_assert(strcmp(op, "corrcoef") == 0, "unknown op %s", op);
    return tg_corrcoef(&y[0], in[0]);
}

/* Golden case c: every result (integers exactly), then the gradients. */
static void check_case(const tg_st_file *f, const char *c, const char *what, double tol)
{
    const char *op = th_golden_meta(f, c, "op"), *arg = th_golden_meta(f, c, "arg");
    const int n = atoi(th_golden_meta(f, c, "n")), ny = atoi(th_golden_meta(f, c, "ny"));
    const int ng = atoi(th_golden_meta(f, c, "ng"));
    const bool grad = !strcmp(th_golden_meta(f, c, "grad"), "1");
    tg_tensor *in[2] = {NULL, NULL}, *y[4] = {NULL, NULL, NULL, NULL}, *d[2] = {NULL, NULL};
    tg_tensor *g[4] = {NULL, NULL, NULL, NULL};
    char key[16];
    for (int k = 0; k < n; k++) {
        snprintf(key, sizeof key, "in%d", k);
        in[k] = th_leaf_clone(th_golden_get(f, c, key));
        if (!strcmp(op, "eigvalsh")) OK(tg_tensor_set_requires_grad(in[k], false));
    }
    tg_tensor *fw = !strcmp(op, "cov") && arg[2] == '1'
                        ? (tg_tensor *)th_golden_get(f, c, "fw") : NULL;
    OK(run_op(op, arg, in, fw, y));
    for (int j = 0; j < ny; j++) {
        snprintf(key, sizeof key, "y%d", j);
        const tg_tensor *want = th_golden_get(f, c, key);
        if (tg_dtype_is_float(tg_tensor_dtype(want)))
            th_expect_close_scaled(what, y[j], want, tol);
        else
            cr_assert(th_same_bits(y[j], want), "%s: result %d differs", what, j);
    }
    for (int j = 0; j < ng; j++) {
        snprintf(key, sizeof key, "g%d", j);
        g[j] = (tg_tensor *)th_golden_get(f, c, key);
    }
    if (grad) {
        cr_assert(eq(int, tg_grad(d, ng, y, g, n, in, NULL), TG_OK), "%s: %s", what,
                  tg_error_message());
        for (int k = 0; k < n; k++) {
            snprintf(key, sizeof key, "d%d", k);
            cr_assert(d[k] != NULL, "%s: input %d has no gradient", what, k);
            const tg_tensor *want = th_golden_get(f, c, key);
            double top = 0;   /* all zeros (corrcoef of one variable): absolute */
            for (int64_t i = 0; i < tg_tensor_numel(want); i++)
                top = fmax(top, fabs(th_at(want, i)));
            if (top > 0) th_expect_close_scaled(what, d[k], want, tol * 10);
            else th_expect_near(what, d[k], want, 0, tol);
        }
    }
    th_release_all(2, in);
    th_release_all(2, d);
    th_release_all(4, y);
}

Test(linalg_ext, every_case_matches_torch)
{
    tg_st_file *f = th_golden_load("linalg_ext.safetensors");
    const int n = atoi(tg_st_meta_get(f, "cases"));
    int graded = 0;
    for (int i = 0; i < n; i++) {
        char c[16], what[160];
        snprintf(c, sizeof c, "case%d", i);
        const char *dt = th_golden_meta(f, c, "dtype");
        snprintf(what, sizeof what, "%s (%s %s '%s')", c, th_golden_meta(f, c, "op"), dt,
                 th_golden_meta(f, c, "arg"));
        check_case(f, c, what, !strcmp(dt, "f64") ? 1e-11 : 5e-5);
        graded += !strcmp(th_golden_meta(f, c, "grad"), "1");
    }
    cr_assert(n >= 140, "%d cases", n);
    cr_assert(graded >= 100, "%d cases with gradients", graded);
    tg_st_free(f);
}

/* ---- eigvalsh without a gradient: syevd's values alone ---- */

/* With nothing to record the eigenvalues are a contiguous (..., n) tensor
 * of their own (jobz 'N'); with A requiring grad they are a view of eigh's
 * packed values and vectors (..., n + 1, n), strided n * (n + 1) per
 * matrix, and carry eigh's gradient.  Both match eigh's values. */
Test(linalg_ext, eigvalsh_computes_values_alone_without_a_gradient)
{
    uint64_t s = 12;
    tg_tensor *x = th_rand_tensor(&s, TG_F64, 3, (int64_t[]){3, 4, 4}, -1, 1);
    tg_tensor *xt = NULL, *a = NULL, *v = NULL, *w = NULL, *ve = NULL, *vg = NULL, *vn = NULL;
    OK(tg_transpose(&xt, x, -2, -1));
    OK(tg_add(&a, x, xt));
    OK(tg_linalg_eigh(&ve, NULL, a, false));
    OK(tg_linalg_eigvalsh(&v, a, false));
    cr_assert(tg_tensor_is_contiguous(v), "values-only eigvalsh is not its own tensor");
    cr_assert(tg_tensor_requires_grad(v) == false);
    th_expect_shape(v, 2, (int64_t[]){3, 4});
    th_expect_near("eigvalsh", v, ve, 1e-13, 1e-13);
    OK(tg_tensor_set_requires_grad(x, true));
    tg_tensor *xt2 = NULL, *a2 = NULL;
    OK(tg_transpose(&xt2, x, -2, -1));
    OK(tg_add(&a2, x, xt2));
    OK(tg_linalg_eigvalsh(&vg, a2, false));
    cr_assert(tg_tensor_requires_grad(vg), "eigvalsh of a graph has no gradient");
    cr_assert(eq(i64, tg_tensor_strides(vg)[0], 20));   /* eigh's packed (4 + 1) x 4 */
    th_expect_near("eigvalsh with grad", vg, ve, 1e-13, 1e-13);
    tg_no_grad_begin();
    const int rc = tg_linalg_eigvalsh(&vn, a2, true);
    tg_no_grad_end();
    OK(rc);
    cr_assert(tg_tensor_is_contiguous(vn), "no_grad eigvalsh is not values-only");
    th_expect_near("eigvalsh upper", vn, ve, 1e-13, 1e-13);
    th_release_all(11, (tg_tensor *[]){x, xt, a, v, w, ve, vg, vn, xt2, a2, NULL});
}

/* ---- gradcheck and gradgradcheck in f64 ---- */

typedef th_call call;

/* The op's first result; lu: L and U flattened into one; lstsq: the
 * solution; cov with fweights 1, 2, 0, 3, ... */
static int call_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    const call *c = user;
    tg_tensor *y[4] = {NULL, NULL, NULL, NULL}, *fw = NULL, *f[2] = {NULL, NULL};
    int rc = TG_OK;
    if (!strcmp(c->op, "cov") && c->arg[2] == '1') {
        const int64_t N = tg_tensor_dim(in[0], -1);
        rc = tg_tensor_zeros(&fw, TG_I64, 1, &N);
        for (int64_t i = 0; rc >= 0 && i < N; i++) rc = tg_tensor_set_flat(fw, i, (double)(i % 4));
    }
    if (rc >= 0) rc = run_op(c->op, c->arg, in, fw, y);
    if (rc >= 0 && !strcmp(c->op, "lu")) {
        rc = tg_reshape(&f[0], y[0], 1, (int64_t[]){-1});
        if (rc >= 0) rc = tg_reshape(&f[1], y[1], 1, (int64_t[]){-1});
        if (rc >= 0) rc = tg_cat(out, 2, f, 0);
    } else if (rc >= 0) {
        *out = tg_tensor_retain(y[0]);
    }
    th_release_all(4, y);
    th_release_all(3, (tg_tensor *[]){fw, f[0], f[1]});
    return rc;
}

static const call CHECKED[] = {
    {"lstsq", "gels,-1", 2, {2, 2}, {{5, 3}, {5, 2}}},
    {"lstsq", "gelsy,-1", 2, {2, 2}, {{3, 5}, {3, 2}}},
    {"lstsq", "gelsd,-1", 2, {3, 3}, {{2, 4, 3}, {2, 4, 2}}},
    {"lstsq", "gelss,-1", 2, {2, 1}, {{4, 2}, {4}}},
    {"lu_factor", "", 1, {2}, {{4, 3}}},
    {"lu_factor", "", 1, {3}, {{2, 3, 5}}},
    {"lu", "", 1, {2}, {{5, 2}}},
    {"lu", "", 1, {3}, {{2, 2, 4}}},
    {"cond", "None", 1, {2}, {{3, 4}}},
    {"cond", "-2", 1, {3}, {{2, 3, 3}}},
    {"cond", "fro", 1, {2}, {{3, 3}}},
    {"cond", "nuc", 1, {2}, {{3, 3}}},
    {"cond", "1", 1, {3}, {{2, 3, 3}}},
    {"cond", "-inf", 1, {2}, {{3, 3}}},
    {"tensorinv", "2", 1, {3}, {{2, 3, 6}}},
    {"tensorsolve", "0", 2, {3, 2}, {{4, 2, 2}, {2, 2}}},
    {"householder_product", "", 2, {2, 1}, {{4, 3}, {2}}},
    {"householder_product", "", 2, {3, 2}, {{2, 3, 3}, {2, 3}}},
    {"vander", "4", 1, {2}, {{2, 3}}},
    {"vecdot", "-1", 2, {2, 1}, {{3, 4}, {4}}},
    {"cov", "1,0,0", 1, {2}, {{3, 5}}},
    {"cov", "1,1,1", 2, {2, 1}, {{2, 5}, {5}}},
    {"cov", "2,0,1", 2, {1, 1}, {{5}, {5}}},
    {"corrcoef", "", 1, {2}, {{3, 5}}},
};

Test(linalg_ext, gradcheck_and_gradgradcheck_f64)
{
    for (size_t i = 0; i < sizeof CHECKED / sizeof *CHECKED; i++) {
        const call *c = &CHECKED[i];
        tg_tensor *in[2] = {NULL, NULL};
        for (int j = 0; j < c->n; j++) {
            uint64_t s = 900 + 7 * i + (uint64_t)j;
            const bool weights = !strcmp(c->op, "cov") && j == 1;
            in[j] = th_rand_tensor(&s, TG_F64, c->nd[j], c->shape[j], weights ? 0.5 : -1,
                                   weights ? 2 : 1);
            OK(tg_tensor_set_requires_grad(in[j], true));
        }
        th_expect_gradchecks(call_fn, (void *)c, c->n, in, "%s '%s'", c->op, c->arg);
        th_release_all(c->n, in);
    }
}

/* ---- identities ---- */

/* P L U = A for tall and wide batches, L unit lower (m, k), U upper (k,
 * n); lu_factor's LU packs the same L and U, its pivots are k per
 * matrix. */
Test(linalg_ext, p_l_u_is_a_for_rectangular_matrices)
{
    static const int64_t shapes[3][3] = {{2, 6, 4}, {3, 3, 5}, {2, 1, 4}};
    for (int c = 0; c < 3; c++) {
        uint64_t s = 70 + (uint64_t)c;
        const int64_t m = shapes[c][1], n = shapes[c][2], k = m < n ? m : n;
        tg_tensor *a = th_rand_tensor(&s, TG_F64, 3, shapes[c], -2, 2);
        tg_tensor *p = NULL, *l = NULL, *u = NULL, *pl = NULL, *plu = NULL, *lu = NULL,
                  *pv = NULL;
        OK(tg_linalg_lu(&p, &l, &u, a));
        th_expect_shape(p, 3, (int64_t[]){shapes[c][0], m, m});
        th_expect_shape(l, 3, (int64_t[]){shapes[c][0], m, k});
        th_expect_shape(u, 3, (int64_t[]){shapes[c][0], k, n});
        OK(tg_matmul(&pl, p, l));
        OK(tg_matmul(&plu, pl, u));
        cr_assert(th_max_diff(plu, a) < 1e-13, "%lld x %lld: P L U differs from A by %g",
                  (long long)m, (long long)n, th_max_diff(plu, a));
        for (int64_t i = 0; i < m; i++)   /* L's diagonal is one, above it zero */
            for (int64_t j = i; j < k; j++)
                cr_assert(eq(dbl, th_get(l, (int64_t[]){0, i, j}), i == j ? 1.0 : 0.0));
        OK(tg_linalg_lu_factor(&lu, &pv, a));
        th_expect_shape(lu, 3, shapes[c]);
        th_expect_shape(pv, 2, (int64_t[]){shapes[c][0], k});
        cr_assert(eq(int, tg_tensor_dtype(pv), TG_I32));
        th_release_all(8, (tg_tensor *[]){a, p, l, u, pl, plu, lu, pv});
    }
}

/* lstsq: every driver solves a full-rank tall system (normal equations),
 * the residuals are |A X - B|^2 per column, gelsd's and gelss's singular
 * values are svdvals', and gels's rank and gelsy's residuals are empty. */
Test(linalg_ext, lstsq_drivers_give_torchs_full_result)
{
    static const char *const drivers[4] = {"gels", "gelsy", "gelsd", "gelss"};
    uint64_t s = 51;
    tg_tensor *a = th_rand_tensor(&s, TG_F64, 3, (int64_t[]){2, 7, 3}, -1, 1);
    tg_tensor *b = th_rand_tensor(&s, TG_F64, 3, (int64_t[]){2, 7, 2}, -1, 1);
    tg_tensor *sv = NULL;
    OK(tg_linalg_svdvals(&sv, a));
    for (int d = 0; d < 4; d++) {
        tg_tensor *x = NULL, *res = NULL, *rk = NULL, *s2 = NULL, *ax = NULL, *r = NULL,
                  *r2 = NULL, *rs = NULL;
        OK(tg_linalg_lstsq_ex(&x, &res, &rk, &s2, a, b, -1, drivers[d]));
        OK(tg_matmul(&ax, a, x));
        OK(tg_sub(&r, ax, b));
        OK(tg_mul(&r2, r, r));
        OK(tg_sum_dims(&rs, r2, 1, (int[]){-2}, false));
        if (d == 1) {
            th_expect_shape(res, 1, (int64_t[]){0});
        } else {
            th_expect_shape(res, 2, (int64_t[]){2, 2});
            cr_assert(th_max_diff(res, rs) < 1e-12, "%s residuals: %g", drivers[d],
                      th_max_diff(res, rs));
        }
        if (d == 0) {
            th_expect_shape(rk, 1, (int64_t[]){0});
        } else {
            th_expect_shape(rk, 1, (int64_t[]){2});
            cr_assert(eq(dbl, th_at(rk, 0), 3.0), "%s rank", drivers[d]);
        }
        if (d >= 2) cr_assert(th_max_diff(s2, sv) < 1e-13, "%s singular values", drivers[d]);
        else th_expect_shape(s2, 1, (int64_t[]){0});
        tg_tensor *at = NULL, *nrm = NULL;
        OK(tg_transpose(&at, a, -2, -1));
        OK(tg_matmul(&nrm, at, r));
        double worst = 0;
        for (int64_t i = 0; i < tg_tensor_numel(nrm); i++) worst = fmax(worst, fabs(th_at(nrm, i)));
        cr_assert(worst < 1e-12, "%s: normal equations %g", drivers[d], worst);
        th_release_all(10, (tg_tensor *[]){x, res, rk, s2, ax, r, r2, rs, at, nrm});
    }
    th_release_all(3, (tg_tensor *[]){a, b, sv});
}

/* cond(A) = s_max / s_min; cond(A, "1") = |A|_1 |A^-1|_1; a singular A
 * gives inf for a norm order; tensordot(tensorinv(A, 2), A, 2) = I;
 * tensorsolve solves; householder_product's columns are orthonormal. */
Test(linalg_ext, cond_tensorinv_tensorsolve_householder_identities)
{
    uint64_t s = 88;
    tg_tensor *a = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){4, 6}, -1, 1);
    tg_tensor *c = NULL, *sv = NULL;
    OK(tg_linalg_cond(&c, a, NULL));
    OK(tg_linalg_svdvals(&sv, a));
    cr_assert(epsilon_eq(dbl, th_at(c, 0), th_at(sv, 0) / th_at(sv, 3), 1e-12));
    tg_tensor *sq = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){3, 3}, -1, 1);
    tg_tensor *c1 = NULL, *inv = NULL, *n1 = NULL, *ni = NULL;
    OK(tg_linalg_cond(&c1, sq, "1"));
    OK(tg_linalg_inv(&inv, sq));
    OK(tg_linalg_matrix_norm(&n1, sq, "1", NULL, false));
    OK(tg_linalg_matrix_norm(&ni, inv, "1", NULL, false));
    cr_assert(epsilon_eq(dbl, th_at(c1, 0), th_at(n1, 0) * th_at(ni, 0), 1e-12));
    tg_tensor *sing = th_tensor_from(TG_F64, 2, (int64_t[]){2, 2}, (double[]){1, 2, 2, 4});
    tg_tensor *ci = NULL;
    OK(tg_linalg_cond(&ci, sing, "inf"));
    cr_assert(isinf(th_at(ci, 0)), "cond of a singular matrix: %g", th_at(ci, 0));
    tg_tensor *t = th_rand_tensor(&s, TG_F64, 4, (int64_t[]){2, 3, 3, 2}, -1, 1);
    tg_tensor *ti = NULL, *td = NULL, *e = NULL, *ef = NULL;
    OK(tg_linalg_tensorinv(&ti, t, 2));
    th_expect_shape(ti, 4, (int64_t[]){3, 2, 2, 3});
    OK(tg_tensordot(&td, ti, t, 2, NULL, NULL));
    OK(tg_tensor_eye(&e, TG_F64, 6, 6));
    OK(tg_reshape(&ef, e, 4, (int64_t[]){3, 2, 3, 2}));
    cr_assert(th_max_diff(td, ef) < 1e-12, "tensorinv: %g", th_max_diff(td, ef));
    tg_tensor *bb = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){2, 3}, -1, 1);
    tg_tensor *x = NULL, *tx = NULL;
    OK(tg_linalg_tensorsolve(&x, t, bb, 0, NULL));
    th_expect_shape(x, 2, (int64_t[]){3, 2});
    OK(tg_tensordot(&tx, t, x, 2, NULL, NULL));
    cr_assert(th_max_diff(tx, bb) < 1e-12, "tensorsolve: %g", th_max_diff(tx, bb));
    tg_tensor *h = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){5, 3}, -1, 1);
    tg_tensor *tau = th_rand_tensor(&s, TG_F64, 1, (int64_t[]){3}, 0.1, 0.5);
    tg_tensor *q = NULL, *qt = NULL, *qq = NULL, *e3 = NULL;
    tg_tensor *vv = NULL, *vs = NULL, *tau2 = NULL;
    /* tau_i = 2 / |v_i|^2 makes each H_i orthogonal */
    OK(tg_tensor_zeros(&tau2, TG_F64, 1, (int64_t[]){3}));
    for (int64_t i = 0; i < 3; i++) {
        double nn = 1;
        for (int64_t r = i + 1; r < 5; r++) nn += pow(th_get(h, (int64_t[]){r, i}), 2);
        OK(tg_tensor_set_flat(tau2, i, 2 / nn));
    }
    OK(tg_linalg_householder_product(&q, h, tau2));
    OK(tg_transpose(&qt, q, -2, -1));
    OK(tg_matmul(&qq, qt, q));
    OK(tg_tensor_eye(&e3, TG_F64, 3, 3));
    cr_assert(th_max_diff(qq, e3) < 1e-13, "householder Q^T Q: %g", th_max_diff(qq, e3));
    th_release_all(12, (tg_tensor *[]){a, c, sv, sq, c1, inv, n1, ni, sing, ci, t, ti});
    th_release_all(12, (tg_tensor *[]){td, e, ef, bb, x, tx, h, tau, q, qt, qq, e3});
    th_release_all(3, (tg_tensor *[]){vv, vs, tau2});
}

/* vander's columns are powers; vecdot is sum(x y); cov of two identical
 * rows is var, corrcoef of a row with an affine copy of itself is 1. */
Test(linalg_ext, vander_vecdot_cov_corrcoef_identities)
{
    tg_tensor *x = th_tensor_from(TG_F64, 1, (int64_t[]){3}, (double[]){2, -1, 0});
    tg_tensor *v = NULL;
    OK(tg_linalg_vander(&v, x, 4));
    th_expect_shape(v, 2, (int64_t[]){3, 4});
    cr_assert(eq(dbl, th_get(v, (int64_t[]){0, 3}), 8.0));
    cr_assert(eq(dbl, th_get(v, (int64_t[]){1, 2}), 1.0));
    cr_assert(eq(dbl, th_get(v, (int64_t[]){2, 0}), 1.0));
    uint64_t s = 4;
    tg_tensor *r = th_rand_tensor(&s, TG_F64, 1, (int64_t[]){7}, -1, 1);
    tg_tensor *r2 = NULL, *two = NULL, *cv = NULL, *var = NULL, *cc = NULL, *vd = NULL;
    OK(tg_mul_scalar(&two, r, 3));
    OK(tg_add_scalar(&r2, two, 1));   /* 3 r + 1 */
    tg_tensor *rows = NULL;
    OK(tg_stack(&rows, 2, (tg_tensor *[]){r, r2}, 0));
    OK(tg_cov(&cv, rows, 1, NULL, NULL));
    OK(tg_var(&var, r, 1));
    cr_assert(epsilon_eq(dbl, th_at(cv, 0), th_at(var, 0), 1e-14));
    cr_assert(epsilon_eq(dbl, th_at(cv, 3), 9 * th_at(var, 0), 1e-13));
    OK(tg_corrcoef(&cc, rows));
    cr_assert(epsilon_eq(dbl, th_at(cc, 1), 1.0, 1e-14));
    OK(tg_linalg_vecdot(&vd, r, r, 0));
    double ss = 0;
    for (int i = 0; i < 7; i++) ss += th_at(r, i) * th_at(r, i);
    cr_assert(epsilon_eq(dbl, th_at(vd, 0), ss, 1e-14));
    th_release_all(11, (tg_tensor *[]){x, v, r, r2, two, cv, var, cc, vd, rows, NULL});
}

/* ---- refusals ---- */

Test(linalg_ext, refusals_name_the_argument)
{
    uint64_t s = 23;
    tg_tensor *a = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){4, 3}, -1, 1);
    tg_tensor *b = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){4, 2}, -1, 1);
    tg_tensor *sq = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){3, 3}, -1, 1);
    tg_tensor *v = th_rand_tensor(&s, TG_F64, 1, (int64_t[]){3}, -1, 1);
    tg_tensor *vf = th_rand_tensor(&s, TG_F32, 1, (int64_t[]){3}, -1, 1);
    tg_tensor *dup = th_tensor_from(TG_F64, 2, (int64_t[]){3, 2}, (double[]){1, 2, 1, 2, 1, 2});
    tg_tensor *b3 = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){3, 1}, -1, 1);
    tg_tensor *x = NULL, *r = NULL;
    th_expect_refused_clean(tg_linalg_lstsq_ex(out_, NULL, NULL, NULL, a, b, -1, "gelsx"),
                            TG_EINVAL, "should be one of (gels, gelsy, gelsd, gelss)");
    th_expect_refused(tg_linalg_lstsq_ex(NULL, NULL, NULL, NULL, a, b, -1, NULL), TG_EINVAL,
                      "all NULL", NULL);
    th_expect_refused(tg_linalg_lstsq_ex(&x, NULL, &x, NULL, a, b, -1, NULL), TG_EINVAL,
                      "solution and rank must be two different places", x);
    th_expect_refused_clean(tg_linalg_lstsq_ex(out_, NULL, NULL, NULL, dup, b3, -1, "gels"),
                            TG_EINVAL, "does not have full rank");
    th_expect_refused_clean(tg_linalg_lstsq_ex(NULL, out_, NULL, NULL, a, NULL, -1, "gelsd"),
                            TG_EINVAL, "B is NULL");
    th_expect_refused_clean(tg_linalg_cond(out_, a, "fro"), TG_ESHAPE,
                            "linalg.cond(ord=fro): A must be batches of square matrices");
    th_expect_refused_clean(tg_linalg_cond(out_, sq, "3"), TG_EINVAL, "invalid norm type: 3");
    th_expect_refused_clean(tg_linalg_cond(out_, v, NULL), TG_ESHAPE, "at least 2 dimensions");
    th_expect_refused(tg_linalg_cond(NULL, sq, NULL), TG_EINVAL, "out is NULL", NULL);
    th_expect_refused_clean(tg_linalg_tensorinv(out_, a, 0), TG_EINVAL,
                            "strictly positive integer for 'ind', but got 0");
    th_expect_refused_clean(tg_linalg_tensorinv(out_, a, 1), TG_ESHAPE,
                            "prod(self.shape[ind:]) == prod(self.shape[:ind]), but got 3 != 4");
    th_expect_refused_clean(tg_linalg_tensorinv(out_, NULL, 1), TG_EINVAL, "A is NULL");
    th_expect_refused_clean(tg_linalg_tensorsolve(out_, a, v, 0, NULL), TG_ESHAPE,
                            "but got 3 != 4");
    th_expect_refused_clean(tg_linalg_tensorsolve(out_, a, NULL, 0, NULL), TG_EINVAL,
                            "B is NULL");
    th_expect_refused_clean(tg_linalg_householder_product(out_, b3, v), TG_ESHAPE,
                            "input.shape[-1] must be greater than or equal to tau.shape[-1]");
    th_expect_refused_clean(tg_linalg_householder_product(out_, b, v), TG_ESHAPE,
                            "input.shape[-1] must be greater than or equal to tau.shape[-1]");
    tg_tensor *wide = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){2, 3}, -1, 1);
    th_expect_refused_clean(tg_linalg_householder_product(out_, wide, v), TG_ESHAPE,
                            "input.shape[-2] must be greater than or equal to input.shape[-1]");
    th_expect_refused_clean(tg_linalg_householder_product(out_, a, vf), TG_EDTYPE,
                            "tau dtype f32 does not match input dtype f64");
    th_expect_refused_clean(tg_linalg_householder_product(out_, a, NULL), TG_EINVAL,
                            "tau is NULL");
    th_expect_refused_clean(tg_linalg_vander(out_, v, 1), TG_EINVAL,
                            "N must be greater than 1");
    tg_tensor *z = NULL;
    OK(tg_tensor_zeros(&z, TG_F64, 0, NULL));
    th_expect_refused_clean(tg_linalg_vander(out_, z, -1), TG_ESHAPE,
                            "x must have at least one dimension");
    th_expect_refused_clean(tg_linalg_vecdot(out_, v, vf, 0), TG_EDTYPE,
                            "Expected x and y to have the same dtype");
    tg_tensor *x3 = th_rand_tensor(&s, TG_F64, 3, (int64_t[]){2, 2, 2}, -1, 1);
    tg_tensor *fwf = th_rand_tensor(&s, TG_F64, 1, (int64_t[]){3}, 0, 1);
    tg_tensor *fw2 = th_tensor_from(TG_I64, 1, (int64_t[]){2}, (double[]){1, 1});
    tg_tensor *fwn = th_tensor_from(TG_I64, 1, (int64_t[]){3}, (double[]){1, -1, 1});
    tg_tensor *fw0 = th_tensor_from(TG_I64, 1, (int64_t[]){3}, (double[]){0, 0, 0});
    tg_tensor *awn = th_tensor_from(TG_F64, 1, (int64_t[]){3}, (double[]){1, -1, 1});
    th_expect_refused_clean(tg_cov(out_, x3, 1, NULL, NULL), TG_ESHAPE,
                            "expected input to have two or fewer dimensions but got an input "
                            "with 3 dimensions");
    th_expect_refused_clean(tg_cov(out_, sq, 1, fwf, NULL), TG_EDTYPE,
                            "expected fweights to have integral dtype");
    th_expect_refused_clean(tg_cov(out_, sq, 1, fw2, NULL), TG_ESHAPE,
                            "same numel as there are observations in the input but got 2 != 3");
    th_expect_refused_clean(tg_cov(out_, sq, 1, fwn, NULL), TG_EINVAL,
                            "fweights cannot be negative");
    th_expect_refused_clean(tg_cov(out_, sq, 1, fw0, NULL), TG_EINVAL, "weights sum to zero");
    th_expect_refused_clean(tg_cov(out_, sq, 1, NULL, fw2), TG_EDTYPE,
                            "expected aweights to have floating point dtype");
    th_expect_refused_clean(tg_cov(out_, sq, 1, NULL, awn), TG_EINVAL,
                            "aweights cannot be negative");
    th_expect_refused_clean(tg_corrcoef(out_, x3), TG_ESHAPE, "two or fewer dimensions");
    th_expect_refused_clean(tg_corrcoef(out_, NULL), TG_EINVAL, "input is NULL");
    th_release_all(10, (tg_tensor *[]){a, b, sq, v, vf, dup, b3, r, wide, z});
    th_release_all(7, (tg_tensor *[]){x3, fwf, fw2, fwn, fw0, awn, NULL});
}

/* ---- the thread pool ---- */

/* lstsq's drivers, eigvalsh's values-only run and householder_product run
 * a batch on the pool (64 matrices: split): the same bits on 1 and 2
 * threads. */
Test(linalg_ext, batches_give_the_same_bits_on_1_and_2_threads)
{
    uint64_t s = 61;
    tg_tensor *a = th_rand_tensor(&s, TG_F64, 3, (int64_t[]){64, 9, 6}, -1, 1);
    tg_tensor *b = th_rand_tensor(&s, TG_F64, 3, (int64_t[]){64, 9, 2}, -1, 1);
    tg_tensor *tau = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){64, 6}, 0, 1);
    tg_tensor *sq = th_rand_tensor(&s, TG_F64, 3, (int64_t[]){64, 9, 9}, -1, 1);
    const int saved = tg_get_num_threads();
    tg_tensor *y[2][7];
    for (int t = 0; t < 2; t++) {
        OK(tg_set_num_threads(t + 1));
        OK(tg_linalg_lstsq_ex(&y[t][0], &y[t][1], &y[t][2], &y[t][3], a, b, -1, "gelsd"));
        OK(tg_linalg_lstsq_ex(&y[t][4], NULL, NULL, NULL, a, b, -1, "gels"));
        OK(tg_linalg_eigvalsh(&y[t][5], sq, false));
        OK(tg_linalg_householder_product(&y[t][6], a, tau));
    }
    OK(tg_set_num_threads(saved));
    for (int i = 0; i < 7; i++) {
        const tg_tensor *u = y[0][i], *v = y[1][i];
        cr_assert(eq(i64, tg_tensor_numel(u), tg_tensor_numel(v)), "result %d", i);
        for (int64_t e = 0; e < tg_tensor_numel(u); e++) {
            const double p = th_at(u, e), q = th_at(v, e);
            cr_assert(memcmp(&p, &q, sizeof p) == 0, "result %d, element %lld", i,
                      (long long)e);
        }
    }
    th_release_all(7, y[0]);
    th_release_all(7, y[1]);
    th_release_all(4, (tg_tensor *[]){a, b, tau, sq});
}
