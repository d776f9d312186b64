/* tests/test_linalg_square.c - torch.linalg's square-matrix functions
 * (tapegrad/linalg.h: inv, det, slogdet, solve, cholesky,
 * solve_triangular) against PyTorch (values and gradients, f32 and f64,
 * batches, broadcasting, vectors), gradcheck and gradgradcheck in f64, the
 * identities they must keep, det's gradient at a singular matrix, autocast,
 * empty matrices and the refusals.  Goldens:
 * scripts/make_linalg_square_goldens.py. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

/* Runs golden op `op` (arg as the script writes it) on in[0..n); slogdet's
 * sign into *sign, and eigh's squared eigenvectors (whose sign is
 * arbitrary). */
static int run_op(const char *op, const char *arg, tg_tensor **y, tg_tensor **sign,
                  tg_tensor *const *in);

/* svd's S into *y and the squares of U's first k columns and Vh's first k
 * rows (a sign-free loss) into sq[0], sq[1]. */
static int run_svd(bool full, tg_tensor *a, tg_tensor **y, tg_tensor **sq)
{
    tg_tensor *u = NULL, *vh = NULL, *uk = NULL, *vk = NULL;
    int rc = tg_linalg_svd(&u, y, &vh, a, full);
    const int64_t k = rc >= 0 ? tg_tensor_dim(*y, -1) : 0;
    if (rc >= 0) rc = tg_narrow(&uk, u, -1, 0, k);
    if (rc >= 0) rc = tg_narrow(&vk, vh, -2, 0, k);
    if (rc >= 0) rc = tg_mul(&sq[0], uk, uk);
    if (rc >= 0) rc = tg_mul(&sq[1], vk, vk);
    th_release_all(4, (tg_tensor *[]){u, vh, uk, vk});
    return rc;
}

static int run_op(const char *op, const char *arg, tg_tensor **y, tg_tensor **sign,
                  tg_tensor *const *in)
{
    if (!strcmp(op, "svdvals")) return tg_linalg_svdvals(y, in[0]);
    if (!strcmp(op, "inv")) return tg_linalg_inv(y, in[0]);
    if (!strcmp(op, "det")) return tg_linalg_det(y, in[0]);
    if (!strcmp(op, "slogdet")) return tg_linalg_slogdet(sign, y, in[0]);
    if (!strcmp(op, "solve")) return tg_linalg_solve(y, in[0], in[1]);
    if (!strcmp(op, "cholesky")) return tg_linalg_cholesky(y, in[0], !strcmp(arg, "upper"));
    if (!strcmp(op, "eigvalsh")) return tg_linalg_eigvalsh(y, in[0], !strcmp(arg, "upper"));
    if (!strcmp(op, "eigh")) {   /* *sign: the squared eigenvectors */
        tg_tensor *q = NULL;
        int rc = tg_linalg_eigh(y, &q, in[0], !strcmp(arg, "upper"));
        if (rc >= 0) rc = tg_mul(sign, q, q);
        tg_tensor_release(q);
        return rc;
    }
    cr_assert(strcmp(op, "solve_triangular") == 0, "unknown op %s", op);
    return tg_linalg_solve_triangular(y, in[0], in[1], arg[0] == '1', arg[1] == '1',
                                      arg[2] == '1');
}

/* Golden case c of svd: S, the squares of U's and Vh's first k columns and
 * rows, and the gradient of a loss of the three. */
static void check_svd_case(const tg_st_file *f, const char *c, const char *what, double tol,
                           bool full, tg_tensor *a)
{
    tg_tensor *sq[2] = {NULL, NULL}, *y = NULL, *d = NULL;
    cr_assert(eq(int, run_svd(full, a, &y, sq), TG_OK), "%s: %s", what, tg_error_message());
    th_expect_close_scaled(what, y, th_golden_get(f, c, "y"), tol);
    th_expect_close_scaled(what, sq[0], th_golden_get(f, c, "uu"), tol * 10);
    th_expect_close_scaled(what, sq[1], th_golden_get(f, c, "vv"), tol * 10);
    tg_tensor *g[3] = {(tg_tensor *)th_golden_get(f, c, "g"),
                       (tg_tensor *)th_golden_get(f, c, "gu"),
                       (tg_tensor *)th_golden_get(f, c, "gv")};
    tg_tensor *ys[3] = {y, sq[0], sq[1]};
    cr_assert(eq(int, tg_grad(&d, 3, ys, g, 1, &a, NULL), TG_OK), "%s: %s", what,
              tg_error_message());
    th_expect_close_scaled(what, d, th_golden_get(f, c, "d0"), tol * 100);
    th_release_all(4, (tg_tensor *[]){y, sq[0], sq[1], d});
}

/* Golden case c of qr: R and Q, and the gradient of a loss of both; where
 * torch has none (mode "r", "complete" with m > n), the backward is
 * refused. */
static void check_qr_case(const tg_st_file *f, const char *c, const char *what, double tol,
                          const char *mode, tg_tensor *a)
{
    tg_tensor *q = NULL, *r = NULL, *d = NULL;
    cr_assert(eq(int, tg_linalg_qr(&q, &r, a, mode), TG_OK), "%s: %s", what,
              tg_error_message());
    th_expect_close_scaled(what, r, th_golden_get(f, c, "y"), tol);
    th_expect_close_scaled(what, q, th_golden_get(f, c, "q"), tol * 10);
    tg_tensor *g[2] = {(tg_tensor *)th_golden_get(f, c, "g"), NULL};
    if (!strcmp(th_golden_meta(f, c, "grad"), "1")) {
        g[1] = (tg_tensor *)th_golden_get(f, c, "gq");
        cr_assert(eq(int, tg_grad(&d, 2, (tg_tensor *[]){r, q}, g, 1, &a, NULL), TG_OK),
                  "%s: %s", what, tg_error_message());
        th_expect_close_scaled(what, d, th_golden_get(f, c, "d0"), tol * 100);
    } else {
        th_expect_refused(tg_grad(&d, 1, &r, g, 1, &a, NULL), TG_EUNSUPPORTED,
                          "The ", d);
    }
    th_release_all(3, (tg_tensor *[]){q, r, d});
}

/* Every case: the value and each input's gradient, scaled to the largest
 * element; slogdet's sign exactly. */
Test(linalg_square, every_case_matches_torch)
{
    tg_st_file *f = th_golden_load("linalg_square.safetensors");
    const int n = atoi(tg_st_meta_get(f, "cases"));
    static const char *const ops[11] = {"inv",      "det",  "slogdet",  "solve",
                                        "cholesky", "solve_triangular", "eigh", "eigvalsh",
                                        "svd",      "svdvals", "qr"};
    int per_op[11] = {0}, f32 = 0;
    for (int i = 0; i < n; i++) {
        char c[16], what[128], key[16];
        snprintf(c, sizeof c, "case%d", i);
        const char *op = th_golden_meta(f, c, "op"), *dt = th_golden_meta(f, c, "dtype");
        const char *arg = th_golden_meta(f, c, "arg");
        const int k = atoi(th_golden_meta(f, c, "n"));
        tg_tensor *in[2] = {NULL, NULL}, *y = NULL, *sign = NULL, *d[2] = {NULL, NULL};
        for (int j = 0; j < k; j++) {
            snprintf(key, sizeof key, "in%d", j);
            in[j] = th_leaf_clone(th_golden_get(f, c, key));
        }
        snprintf(what, sizeof what, "%s (%s %s '%s')", c, op, dt, arg);
        if (!strcmp(op, "qr")) {
            check_qr_case(f, c, what, !strcmp(dt, "f64") ? 1e-12 : 2e-5, arg, in[0]);
            per_op[10]++;
            f32 += !strcmp(dt, "f32");
            tg_tensor_release(in[0]);
            continue;
        }
        if (!strcmp(op, "svd")) {
            check_svd_case(f, c, what, !strcmp(dt, "f64") ? 1e-12 : 2e-5, !strcmp(arg, "full"),
                           in[0]);
            per_op[8]++;
            f32 += !strcmp(dt, "f32");
            tg_tensor_release(in[0]);
            continue;
        }
        cr_assert(eq(int, run_op(op, arg, &y, &sign, in), TG_OK), "%s: %s", what,
                  tg_error_message());
        const double tol = !strcmp(dt, "f64") ? 1e-12 : 2e-5;
        th_expect_close_scaled(what, y, th_golden_get(f, c, "y"), tol);
        const bool eigh = !strcmp(op, "eigh");
        if (sign && !eigh) th_expect_close(what, sign, th_golden_get(f, c, "sign"), 0);
        if (eigh) th_expect_close_scaled(what, sign, th_golden_get(f, c, "qq"), tol * 10);
        tg_tensor *g[2] = {(tg_tensor *)th_golden_get(f, c, "g"), NULL};
        tg_tensor *ys[2] = {y, sign};
        if (eigh) g[1] = (tg_tensor *)th_golden_get(f, c, "gq");
        cr_assert(eq(int, tg_grad(d, eigh ? 2 : 1, ys, g, k, in, NULL), TG_OK), "%s: %s", what,
                  tg_error_message());
        for (int j = 0; j < k; j++) {
            snprintf(key, sizeof key, "d%d", j);
            cr_assert(d[j] != NULL, "%s: input %d has no gradient", what, j);
            th_expect_close_scaled(what, d[j], th_golden_get(f, c, key), tol * 10);
        }
        for (int o = 0; o < 11; o++) per_op[o] += !strcmp(op, ops[o]);
        f32 += !strcmp(dt, "f32");
        th_release_all(2, in);
        th_release_all(2, d);
        th_release_all(2, (tg_tensor *[]){y, sign});
    }
    for (int o = 0; o < 11; o++) cr_assert(per_op[o] >= 8, "%d %s cases", per_op[o], ops[o]);
    cr_assert(f32 * 2 == n, "%d of %d cases f32", f32, n);
    tg_st_free(f);
}

/* ---- gradcheck and gradgradcheck in f64 ---- */

typedef struct call {
    const char *op, *arg;
    int n;
    int nd[2];
    int64_t shape[2][4];
} call;

/* A well-conditioned or positive-definite operand from a random one:
 * inv/det/slogdet/solve see x + 3 I; cholesky sees x x^T + I and eigh x +
 * x^T (so that both of x's triangles reach the result); solve_triangular's
 * A gets 3 on its diagonal.  eigh's result is its squared eigenvectors
 * (their sign is arbitrary), eigvalsh's the eigenvalues. */
static int call_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    const call *c = user;
    if (!strcmp(c->op, "qr")) {   /* Q and R, flattened */
        tg_tensor *f[2] = {NULL, NULL}, *q = NULL, *r = NULL;
        int rc = tg_linalg_qr(&q, &r, in[0], c->arg);
        if (rc >= 0) rc = tg_reshape(&f[0], q, 1, (int64_t[]){-1});
        if (rc >= 0) rc = tg_reshape(&f[1], r, 1, (int64_t[]){-1});
        if (rc >= 0) rc = tg_cat(out, 2, f, 0);
        th_release_all(2, f);
        th_release_all(2, (tg_tensor *[]){q, r});
        return rc;
    }
    if (!strcmp(c->op, "svd")) {   /* S, U's and Vh's squares, flattened */
        tg_tensor *f[3] = {NULL, NULL, NULL}, *sq[2] = {NULL, NULL}, *sv = NULL;
        int rc = run_svd(!strcmp(c->arg, "full"), in[0], &sv, sq);
        tg_tensor *parts[3] = {sv, sq[0], sq[1]};
        for (int i = 0; i < 3 && rc >= 0; i++) rc = tg_reshape(&f[i], parts[i], 1, (int64_t[]){-1});
        if (rc >= 0) rc = tg_cat(out, 3, f, 0);
        th_release_all(3, f);
        th_release_all(3, parts);
        return rc;
    }
    tg_tensor *a = NULL, *e = NULL, *t = NULL, *u = NULL, *args[2] = {NULL, in[n > 1 ? 1 : 0]};
    const int64_t m = tg_tensor_dim(in[0], -1);
    int rc = tg_tensor_eye(&e, TG_F64, m, m);
    if (rc >= 0 && (!strcmp(c->op, "eigh") || !strcmp(c->op, "eigvalsh"))) {
        rc = tg_transpose(&t, in[0], -2, -1);   /* symmetric: both triangles reach y */
        if (rc >= 0) rc = tg_add(&a, in[0], t);
    } else if (rc >= 0 && !strcmp(c->op, "cholesky")) {
        rc = tg_transpose(&t, in[0], -2, -1);
        if (rc >= 0) rc = tg_matmul(&u, in[0], t);
        if (rc >= 0) rc = tg_add(&a, u, e);
    } else if (rc >= 0) {
        rc = tg_mul_scalar(&t, e, 3);
        if (rc >= 0) rc = tg_add(&a, in[0], t);
    }
    args[0] = a;
    tg_tensor *sign = NULL;
    if (rc >= 0) rc = run_op(c->op, c->arg, out, &sign, args);
    if (rc >= 0 && !strcmp(c->op, "eigh")) {   /* the squared eigenvectors */
        tg_tensor_release(*out);
        *out = sign;
        sign = NULL;
    }
    th_release_all(5, (tg_tensor *[]){a, e, t, u, sign});
    return rc;
}

static const call CHECKED[] = {
    {"inv", "", 1, {2}, {{3, 3}}},
    {"inv", "", 1, {3}, {{2, 2, 2}}},
    {"det", "", 1, {2}, {{3, 3}}},
    {"det", "", 1, {3}, {{2, 3, 3}}},
    {"slogdet", "", 1, {3}, {{2, 3, 3}}},
    {"solve", "", 2, {2, 1}, {{3, 3}, {3}}},
    {"solve", "", 2, {3, 2}, {{2, 3, 3}, {3, 2}}},
    {"solve", "", 2, {2, 3}, {{3, 3}, {2, 3, 1}}},
    {"solve", "", 2, {3, 2}, {{2, 3, 3}, {2, 3}}},
    {"cholesky", "lower", 1, {2}, {{3, 3}}},
    {"cholesky", "upper", 1, {3}, {{2, 3, 3}}},
    {"qr", "reduced", 1, {2}, {{3, 3}}},
    {"qr", "reduced", 1, {2}, {{4, 2}}},
    {"qr", "reduced", 1, {3}, {{2, 2, 4}}},
    {"qr", "complete", 1, {2}, {{2, 3}}},
    {"svd", "reduced", 1, {2}, {{3, 3}}},
    {"svd", "reduced", 1, {2}, {{4, 2}}},
    {"svd", "full", 1, {3}, {{2, 2, 3}}},
    {"svdvals", "", 1, {2}, {{3, 3}}},
    {"eigh", "lower", 1, {2}, {{3, 3}}},
    {"eigh", "upper", 1, {3}, {{2, 3, 3}}},
    {"eigvalsh", "lower", 1, {3}, {{2, 4, 4}}},
    {"solve_triangular", "110", 2, {2, 2}, {{3, 3}, {3, 2}}},
    {"solve_triangular", "010", 2, {3, 2}, {{2, 3, 3}, {3, 2}}},
    {"solve_triangular", "111", 2, {2, 3}, {{3, 3}, {2, 3, 2}}},
    {"solve_triangular", "000", 2, {2, 2}, {{3, 3}, {2, 3}}},
    {"solve_triangular", "101", 2, {2, 2}, {{3, 3}, {2, 3}}},
};

Test(linalg_square, gradcheck_and_gradgradcheck_f64)
{
    for (size_t i = 0; i < sizeof CHECKED / sizeof *CHECKED; i++) {
        const call *c = &CHECKED[i];
        tg_tensor *in[2] = {NULL, NULL};
        for (int j = 0; j < c->n; j++) {
            uint64_t s = 300 + 7 * i + (uint64_t)j;
            in[j] = th_rand_tensor(&s, TG_F64, c->nd[j], c->shape[j], -1, 1);
            OK(tg_tensor_set_requires_grad(in[j], true));
        }
        th_expect_gradchecks(call_fn, (void *)c, c->n, in, "%s '%s'", c->op, c->arg);
        th_release_all(c->n, in);
    }
}

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
Test(linalg_square, identities_hold)
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
Test(linalg_square, the_other_triangle_is_not_read)
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

Test(linalg_square, det_gradient_at_singular_matrices)
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
Test(linalg_square, det_gradient_of_rank_n_minus_2_is_zero)
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
Test(linalg_square, slogdet_of_a_singular_matrix)
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

/* ---- empty matrices, autocast ---- */

Test(linalg_square, empty_matrices)
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
Test(linalg_square, autocast_policies)
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

Test(linalg_square, refusals_name_the_rule)
{
    const double sing[8] = {1, 2, 3, 4, 1, 2, 2, 4};
    tg_tensor *a = th_tensor_from(TG_F64, 3, (int64_t[]){2, 2, 2}, sing);
    tg_tensor *rect = th_tensor_from(TG_F64, 2, (int64_t[]){2, 3}, sing);
    tg_tensor *vec = th_tensor_from(TG_F64, 1, (int64_t[]){2}, sing);
    tg_tensor *v3 = th_tensor_from(TG_F64, 1, (int64_t[]){3}, sing);
    tg_tensor *f32 = th_tensor_from(TG_F32, 2, (int64_t[]){2, 2}, sing);
    tg_tensor *i32 = th_tensor_from(TG_I32, 2, (int64_t[]){2, 2}, sing);
    tg_tensor *npd = th_tensor_from(TG_F64, 2, (int64_t[]){2, 2}, (double[]){1, 2, 2, 1});
    tg_tensor *b3 = th_tensor_from(TG_F64, 3, (int64_t[]){3, 2, 2}, sing);
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
    th_release_all(8, (tg_tensor *[]){a, rect, vec, v3, f32, i32, npd, b3});
}

/* tg_tensor_eye, which the identities use: torch.eye's ones and zeros. */
Test(linalg_square, eye_is_torch_eye)
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
