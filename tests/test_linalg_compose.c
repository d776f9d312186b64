/* tests/test_linalg_compose.c - the torch.linalg functions tapegrad composes
 * from others (matrix_norm, pinv, matrix_rank, matrix_power, logdet,
 * multi_dot) against PyTorch, values and gradients, f32 and f64;
 * gradcheck and gradgradcheck in f64; pinv's Moore-Penrose conditions;
 * multi_dot's order; the refusals.  Goldens:
 * scripts/make_linalg_compose_goldens.py. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

/* Runs golden op `op` (arg as the script writes it) on in[0..n). */
static int run_op(const char *op, const char *arg, tg_tensor **y, int n, tg_tensor *const *in)
{
    if (!strcmp(op, "matrix_norm")) {
        char ord[8];
        int d0, d1, keep;
        cr_assert(sscanf(arg, "%7[^,],%d,%d,%d", ord, &d0, &d1, &keep) == 4, "arg %s", arg);
        return tg_linalg_matrix_norm(y, in[0], ord, (int[]){d0, d1}, keep == 1);
    }
    if (!strcmp(op, "pinv") || !strcmp(op, "matrix_rank")) {
        double atol, rtol;
        int herm;
        cr_assert(sscanf(arg, "%lf,%lf,%d", &atol, &rtol, &herm) == 3, "arg %s", arg);
        return !strcmp(op, "pinv") ? tg_linalg_pinv(y, in[0], atol, rtol, herm == 1)
                                   : tg_linalg_matrix_rank(y, in[0], atol, rtol, herm == 1);
    }
    if (!strcmp(op, "matrix_power")) return tg_linalg_matrix_power(y, in[0], atoll(arg));
    if (!strcmp(op, "logdet")) return tg_logdet(y, in[0]);
    cr_assert(strcmp(op, "multi_dot") == 0, "unknown op %s", op);
    return tg_linalg_multi_dot(y, n, in);
}

Test(linalg_compose, every_case_matches_torch)
{
    tg_st_file *f = th_golden_load("linalg_compose.safetensors");
    const int n = atoi(tg_st_meta_get(f, "cases"));
    static const char *const ops[6] = {"matrix_norm",  "pinv",   "matrix_rank",
                                       "matrix_power", "logdet", "multi_dot"};
    int per_op[6] = {0};
    for (int i = 0; i < n; i++) {
        char c[16], what[128], key[16];
        snprintf(c, sizeof c, "case%d", i);
        const char *op = th_golden_meta(f, c, "op"), *dt = th_golden_meta(f, c, "dtype");
        const char *arg = th_golden_meta(f, c, "arg");
        const int k = atoi(th_golden_meta(f, c, "n"));
        const bool rank = !strcmp(op, "matrix_rank");
        tg_tensor *in[4] = {NULL}, *y = NULL, *d[4] = {NULL};
        for (int j = 0; j < k; j++) {
            snprintf(key, sizeof key, "in%d", j);
            in[j] = rank ? tg_tensor_retain((tg_tensor *)th_golden_get(f, c, key))
                         : th_leaf_clone(th_golden_get(f, c, key));
        }
        snprintf(what, sizeof what, "%s (%s %s '%s')", c, op, dt, arg);
        cr_assert(eq(int, run_op(op, arg, &y, k, in), TG_OK), "%s: %s", what,
                  tg_error_message());
        const double tol = !strcmp(dt, "f64") ? 1e-12 : 2e-5;
        th_expect_close_scaled(what, y, th_golden_get(f, c, "y"), rank ? 0 : tol);
        if (!rank) {
            tg_tensor *g = (tg_tensor *)th_golden_get(f, c, "g");
            cr_assert(eq(int, tg_grad(d, 1, &y, &g, k, in, NULL), TG_OK), "%s: %s", what,
                      tg_error_message());
            for (int j = 0; j < k; j++) {
                snprintf(key, sizeof key, "d%d", j);
                cr_assert(d[j] != NULL, "%s: input %d has no gradient", what, j);
                th_expect_close_scaled(what, d[j], th_golden_get(f, c, key), tol * 100);
            }
        }
        for (int o = 0; o < 6; o++) per_op[o] += !strcmp(op, ops[o]);
        th_release_all(4, in);
        th_release_all(4, d);
        tg_tensor_release(y);
    }
    for (int o = 0; o < 6; o++) cr_assert(per_op[o] >= 4, "%d %s cases", per_op[o], ops[o]);
    tg_st_free(f);
}

/* ---- gradcheck and gradgradcheck in f64 ---- */

/* hermitian pinv reads A's lower triangle: it sees x + x^T, so that a
 * perturbation of either triangle of x reaches it; matrix_power sees x + I,
 * well away from singular. */
static int call_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    const th_call *c = user;
    const bool herm = !strcmp(c->arg, "-1,-1,1"), power = !strcmp(c->op, "matrix_power");
    if (!herm && !power) return run_op(c->op, c->arg, out, n, in);
    tg_tensor *t = NULL, *a = NULL;
    const int64_t m = tg_tensor_dim(in[0], -1);
    int rc = herm ? tg_transpose(&t, in[0], -2, -1) : tg_tensor_eye(&t, TG_F64, m, m);
    if (rc >= 0) rc = tg_add(&a, in[0], t);
    if (rc >= 0) rc = run_op(c->op, c->arg, out, 1, &a);
    th_release_all(2, (tg_tensor *[]){t, a});
    return rc;
}


static const th_call CHECKED[] = {
    {"matrix_norm", "fro,-2,-1,0", 1, {2}, {{3, 4}}},
    {"matrix_norm", "nuc,0,2,1", 1, {3}, {{3, 2, 4}}},
    {"matrix_norm", "2,-2,-1,0", 1, {3}, {{2, 3, 3}}},
    {"matrix_norm", "-inf,-2,-1,0", 1, {2}, {{4, 3}}},
    {"matrix_norm", "1,-2,-1,0", 1, {2}, {{3, 5}}},
    {"pinv", "-1,-1,0", 1, {2}, {{4, 3}}},
    {"pinv", "-1,-1,0", 1, {3}, {{2, 2, 3}}},
    {"pinv", "-1,-1,1", 1, {2}, {{3, 3}}},
    {"matrix_power", "3", 1, {2}, {{3, 3}}},
    {"matrix_power", "-2", 1, {3}, {{2, 2, 2}}},
    {"multi_dot", "", 3, {1, 2, 2}, {{3}, {3, 4}, {4, 2}}},
    {"multi_dot", "", 3, {2, 2, 1}, {{2, 3}, {3, 4}, {4}}},
};

Test(linalg_compose, gradcheck_and_gradgradcheck_f64)
{
    th_gradcheck_calls(CHECKED, sizeof CHECKED / sizeof *CHECKED, call_fn, 500, -1, 1);
}

/* ---- invariants ---- */

/* The largest |a - b|. */
static double max_diff(tg_tensor *a, tg_tensor *b)
{
    tg_tensor *d = NULL;
    OK(tg_sub(&d, a, b));
    double m = 0, x;
    for (int64_t i = 0; i < tg_tensor_numel(d); i++) {
        OK(tg_tensor_get_flat(d, i, &x));
        m = fmax(m, fabs(x));
    }
    tg_tensor_release(d);
    return m;
}

/* The Moore-Penrose conditions: A P A = A, P A P = P, for a rank-deficient
 * A (rank 2 of 4 x 3), whose pinv drops the zero singular value. */
Test(linalg_compose, pinv_meets_the_penrose_conditions)
{
    uint64_t s = 21;
    tg_tensor *l = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){4, 2}, -1, 1);
    tg_tensor *r = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){2, 3}, -1, 1);
    tg_tensor *a = NULL, *p = NULL, *ap = NULL, *apa = NULL, *pa = NULL, *pap = NULL, *rk = NULL;
    OK(tg_matmul(&a, l, r));
    OK(tg_linalg_pinv(&p, a, -1, -1, false));
    OK(tg_matmul(&ap, a, p));
    OK(tg_matmul(&apa, ap, a));
    OK(tg_matmul(&pa, p, a));
    OK(tg_matmul(&pap, pa, p));
    cr_assert(max_diff(apa, a) < 1e-12, "A P A - A: %g", max_diff(apa, a));
    cr_assert(max_diff(pap, p) < 1e-10, "P A P - P: %g", max_diff(pap, p));
    OK(tg_linalg_matrix_rank(&rk, a, -1, -1, false));
    double v;
    OK(tg_tensor_get_flat(rk, 0, &v));
    cr_assert(v == 2, "rank %g", v);
    cr_assert(eq(int, tg_tensor_dtype(rk), TG_I64));
    th_release_all(5, (tg_tensor *[]){l, r, a, p, ap});
    th_release_all(4, (tg_tensor *[]){apa, pa, pap, rk});
}

/* The 2-norm is the largest singular value, the nuclear norm their sum,
 * and the Frobenius norm the root of the sum of their squares. */
Test(linalg_compose, norms_agree_with_the_singular_values)
{
    uint64_t s = 8;
    tg_tensor *a = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){5, 3}, -1, 1), *sv = NULL;
    OK(tg_linalg_svdvals(&sv, a));
    double v[3], sum = 0, sq = 0;
    for (int i = 0; i < 3; i++) {
        OK(tg_tensor_get_flat(sv, i, &v[i]));
        sum += v[i], sq += v[i] * v[i];
    }
    const char *ords[3] = {"2", "nuc", "fro"};
    const double want[3] = {v[0], sum, sqrt(sq)};
    for (int i = 0; i < 3; i++) {
        tg_tensor *nrm = NULL;
        double x;
        OK(tg_linalg_matrix_norm(&nrm, a, ords[i], NULL, false));
        OK(tg_tensor_get_flat(nrm, 0, &x));
        cr_assert(fabs(x - want[i]) < 1e-13, "%s: %.17g want %.17g", ords[i], x, want[i]);
        tg_tensor_release(nrm);
    }
    th_release_all(2, (tg_tensor *[]){a, sv});
}

/* multi_dot's result does not depend on the order; a chain whose cheap
 * order is not left to right gives the same product as plain matmuls. */
Test(linalg_compose, multi_dot_equals_left_to_right)
{
    uint64_t s = 4;
    tg_tensor *m[4] = {th_rand_tensor(&s, TG_F64, 2, (int64_t[]){10, 2}, -1, 1),
                       th_rand_tensor(&s, TG_F64, 2, (int64_t[]){2, 10}, -1, 1),
                       th_rand_tensor(&s, TG_F64, 2, (int64_t[]){10, 3}, -1, 1),
                       th_rand_tensor(&s, TG_F64, 2, (int64_t[]){3, 1}, -1, 1)};
    tg_tensor *y = NULL, *a = NULL, *b = NULL, *c = NULL;
    OK(tg_linalg_multi_dot(&y, 4, m));
    OK(tg_matmul(&a, m[0], m[1]));
    OK(tg_matmul(&b, a, m[2]));
    OK(tg_matmul(&c, b, m[3]));
    cr_assert(max_diff(y, c) < 1e-13, "multi_dot - matmuls: %g", max_diff(y, c));
    th_release_all(4, m);
    th_release_all(4, (tg_tensor *[]){y, a, b, c});
}

Test(linalg_compose, refusals_name_the_rule)
{
    uint64_t s = 2;
    tg_tensor *a = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){3, 4}, -1, 1);
    tg_tensor *v = th_rand_tensor(&s, TG_F64, 1, (int64_t[]){3}, -1, 1);
    tg_tensor *b3 = th_rand_tensor(&s, TG_F64, 3, (int64_t[]){2, 3, 3}, -1, 1);
    th_expect_refused_clean(tg_linalg_matrix_norm(out_, a, "3", NULL, false), TG_EINVAL,
                            "Order 3 not supported");
    th_expect_refused_clean(tg_linalg_matrix_norm(out_, a, "fro", (int[]){0, 0}, false),
                            TG_EINVAL, "dims must be different");
    th_expect_refused_clean(tg_linalg_matrix_norm(out_, a, "fro", (int[]){0, 2}, false),
                            TG_EINVAL, "out of range");
    th_expect_refused_clean(tg_linalg_matrix_power(out_, a, 2), TG_ESHAPE,
                            "batches of square matrices");
    th_expect_refused_clean(tg_linalg_pinv(out_, a, -1, -1, true), TG_ESHAPE,
                            "square matrices");
    th_expect_refused_clean(tg_linalg_pinv(out_, a, NAN, -1, false), TG_EINVAL, "NaN");
    th_expect_refused_clean(tg_linalg_multi_dot(out_, 1, &a), TG_EINVAL,
                            "expected at least 2 tensors");
    th_expect_refused_clean(tg_linalg_multi_dot(out_, 3, (tg_tensor *[]){a, b3, a}), TG_ESHAPE,
                            "tensor 1 must be 2D");
    th_expect_refused_clean(tg_linalg_multi_dot(out_, 2, (tg_tensor *[]){a, v}), TG_ESHAPE,
                            "cannot be multiplied");
    th_release_all(3, (tg_tensor *[]){a, v, b3});
}
