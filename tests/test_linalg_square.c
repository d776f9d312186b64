/* tests/test_linalg_square.c - torch.linalg's factorizations and solvers
 * (tapegrad/linalg.h: inv, det, slogdet, solve, cholesky, solve_triangular,
 * eigh, eigvalsh, svd, svdvals, qr) against PyTorch (values and gradients, f32 and f64,
 * batches, broadcasting, vectors), gradcheck and gradgradcheck in f64
 * (tests/test_linalg_rules.c has the rest).  Goldens:
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

/* A well-conditioned or positive-definite operand from a random one:
 * inv/det/slogdet/solve see x + 3 I; cholesky sees x x^T + I and eigh x +
 * x^T (so that both of x's triangles reach the result); solve_triangular's
 * A gets 3 on its diagonal.  eigh's result is its squared eigenvectors
 * (their sign is arbitrary), eigvalsh's the eigenvalues. */
static int call_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    const th_call *c = user;
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

static const th_call CHECKED[] = {
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
    th_gradcheck_calls(CHECKED, sizeof CHECKED / sizeof *CHECKED, call_fn, 300, -1, 1);
}
