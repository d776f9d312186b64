/* tests/test_hardact.c - tg_hardtanh, tg_relu6, tg_hardsigmoid, tg_hardswish,
 * tg_mish and their modules: against PyTorch's F.hardtanh, F.relu6,
 * F.hardsigmoid, F.hardswish, F.mish and their gradients (f32, f64, bf16;
 * the kinks, the bounds, +-0, +-inf, NaN), the values at the kinks,
 * derivatives to second order by finite differences, the modules'
 * forwards, and the refusals.
 * Goldens: scripts/make_hardact_goldens.py. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

/* The special points the golden script puts first in every x. */
enum { N_SPECIAL = 17 };

/* The op a golden case names, on x. */
static int run_op(const char *op, tg_tensor **y, tg_tensor *x, double lo, double hi)
{
    if (!strcmp(op, "hardtanh")) return tg_hardtanh(y, x, lo, hi);
    if (!strcmp(op, "relu6")) return tg_relu6(y, x);
    if (!strcmp(op, "hardsigmoid")) return tg_hardsigmoid(y, x);
    if (!strcmp(op, "hardswish")) return tg_hardswish(y, x);
    cr_assert(strncmp(op, "mish", 5) == 0, "unknown op %s", op);
    return tg_mish(y, x);
}

/* A copy of the golden dx with 0 where x = -3 in a hardswish case: torch
 * 1.13 gives -g/2 there, later torch 0, as tapegrad (ops.h). */
static tg_tensor *expected_dx(const char *op, const tg_tensor *x, const tg_tensor *dx)
{
    tg_tensor *w = NULL;
    OK(tg_tensor_clone(&w, dx));
    if (!strcmp(op, "hardswish"))
        for (int64_t k = 0; k < tg_tensor_numel(x); k++)
            if (th_at(x, k) == -3.0) OK(tg_tensor_set_flat(w, k, 0.0));
    return w;
}

/* Equal values (NaN matching NaN, the sign of a zero counting) at the
 * special points, where every op but mish is exact. */
static void expect_specials_exact(const char *c, const char *what, const tg_tensor *x,
                                  const tg_tensor *got, const tg_tensor *want)
{
    for (int64_t k = 0; k < N_SPECIAL; k++) {
        const double xk = th_at(x, k), gk = th_at(got, k), wk = th_at(want, k);
        const bool same = (isnan(gk) && isnan(wk)) || (gk == wk && signbit(gk) == signbit(wk));
        cr_assert(same, "%s %s: x = %g gives %g, torch %g", c, what, xk, gk, wk);
    }
}

/* y and dx within an ulp or so of torch's (they compute in the element
 * type, here in double rounded once), mish's within a few (its gradient is
 * a chain of ops, each rounded, bf16's within two units); the special
 * points exact except for mish.  torch's f64 hardsigmoid gradient is g
 * times 1/6 rounded to f32 (3e-8 relative off 1/6), its bf16 one g times
 * 1/6 rounded to bf16; bf16 hardswish's takes x / 3 + 1/2 in f32 where
 * here each op of the chain rounds to bf16: an ulp off in places. */
Test(hardact, every_case_matches_torch)
{
    tg_st_file *f = th_golden_load("hardact.safetensors");
    const int n = atoi(tg_st_meta_get(f, "cases"));
    int per_op[5] = {0};
    static const char *const ops[5] = {"hardtanh", "relu6", "hardsigmoid", "hardswish", "mish"};
    for (int i = 0; i < n; i++) {
        char c[16];
        snprintf(c, sizeof c, "case%d", i);
        const char *dt = th_golden_meta(f, c, "dtype"), *op = th_golden_meta(f, c, "op");
        const bool hardtanh = !strcmp(op, "hardtanh"), mish = !strcmp(op, "mish");
        const double lo = hardtanh ? atof(th_golden_meta(f, c, "min")) : 0;
        const double hi = hardtanh ? atof(th_golden_meta(f, c, "max")) : 0;
        const tg_tensor *want_y = th_golden_get(f, c, "y"), *x0 = th_golden_get(f, c, "x");
        tg_tensor *x = th_leaf_clone(x0), *y = NULL;
        tg_tensor *want_dx = expected_dx(op, x0, th_golden_get(f, c, "dx"));
        OK(run_op(op, &y, x, lo, hi));
        th_backward_with(y, th_golden_get(f, c, "g"));
        const bool f64 = !strcmp(dt, "f64"), f32 = !strcmp(dt, "f32");
        double rtol = f64 ? 1e-15 : f32 ? 1e-6 : 1.0 / 128;
        th_expect_close(c, y, want_y, mish && !f64 ? 4 * rtol : rtol);
        if (mish) rtol = f64 ? 1e-13 : f32 ? 1e-5 : 2.0 / 128;
        if (f64 && !strcmp(op, "hardsigmoid")) rtol = 1e-7;
        th_expect_close(c, tg_tensor_grad(x), want_dx, rtol);
        if (!mish) {
            expect_specials_exact(c, "y", x, y, want_y);
            if (f32 || !strncmp(op, "hardtanh", 9) || !strcmp(op, "relu6"))
                expect_specials_exact(c, "dx", x, tg_tensor_grad(x), want_dx);
        }
        for (int k = 0; k < 5; k++) per_op[k] += !strcmp(op, ops[k]);
        th_release_all(3, (tg_tensor *[]){x, y, want_dx});
    }
    for (int k = 0; k < 5; k++)
        cr_assert(per_op[k] >= 3, "%s: %d cases", ops[k], per_op[k]);
    tg_st_free(f);
}

/* y and dx (g = 1) of op at the f32 points v. */
static void values_and_grads(const char *op, double lo, double hi, int n, const double *v,
                             tg_tensor **y, tg_tensor **x)
{
    *x = th_vec(TG_F32, n, v, "x", true);
    tg_tensor *l = NULL;
    OK(run_op(op, y, *x, lo, hi));
    OK(tg_sum(&l, *y));
    OK(tg_backward(l, NULL, NULL));
    tg_tensor_release(l);
}

static void expect_at(const char *what, const tg_tensor *t, int64_t k, double want)
{
    const double got = th_at(t, k);
    const bool same = (isnan(got) && isnan(want)) ||
                      (got == want && signbit(got) == signbit(want));
    cr_assert(same, "%s[%lld]: %g, want %g", what, (long long)k, got, want);
}

/* The gradients at the kinks and at NaN, the values at -0.0 and -inf. */
Test(hardact, kinks_zeros_and_nan)
{
    const double v[] = {-3, 3, -1, 1, 0, -0.0, NAN, -INFINITY, 6};
    const int n = (int)(sizeof v / sizeof v[0]);
    tg_tensor *x = NULL, *y = NULL;
    /* hardtanh(-1, 1): 0 at both bounds and at NaN; -0.0 stays */
    values_and_grads("hardtanh", -1, 1, n, v, &y, &x);
    const double ht_dx[] = {0, 0, 0, 0, 1, 1, 0, 0, 0};
    for (int k = 0; k < n; k++) expect_at("hardtanh dx", tg_tensor_grad(x), k, ht_dx[k]);
    expect_at("hardtanh y", y, 5, -0.0);
    expect_at("hardtanh y", y, 6, NAN);
    th_release_all(2, (tg_tensor *[]){x, y});
    /* relu6: 0 at 0 and 6, -0.0 stays */
    values_and_grads("relu6", 0, 0, n, v, &y, &x);
    const double r6_dx[] = {0, 1, 0, 1, 0, 0, 0, 0, 0};
    for (int k = 0; k < n; k++) expect_at("relu6 dx", tg_tensor_grad(x), k, r6_dx[k]);
    expect_at("relu6 y", y, 5, -0.0);
    expect_at("relu6 y", y, 8, 6.0);
    th_release_all(2, (tg_tensor *[]){x, y});
    /* hardsigmoid: 1/6 on the open (-3, 3) only */
    values_and_grads("hardsigmoid", 0, 0, n, v, &y, &x);
    const double sixth = (float)(1.0 / 6.0);
    const double hs_dx[] = {0, 0, sixth, sixth, sixth, sixth, 0, 0, 0};
    for (int k = 0; k < n; k++) expect_at("hardsigmoid dx", tg_tensor_grad(x), k, hs_dx[k]);
    expect_at("hardsigmoid y", y, 0, 0.0);
    expect_at("hardsigmoid y", y, 1, 1.0);
    expect_at("hardsigmoid y", y, 5, 0.5);
    th_release_all(2, (tg_tensor *[]){x, y});
    /* hardswish: 0 at -3, 1 at 3, NaN at NaN; -0.0 stays, -inf gives NaN */
    values_and_grads("hardswish", 0, 0, n, v, &y, &x);
    const double hw_dx[] = {0, 1, (float)(-1.0 / 3.0) + 0.5f, (float)(1.0 / 3.0) + 0.5f,
                            0.5, 0.5, NAN, 0, 1};
    for (int k = 0; k < n; k++) expect_at("hardswish dx", tg_tensor_grad(x), k, hw_dx[k]);
    expect_at("hardswish y", y, 0, -0.0);
    expect_at("hardswish y", y, 5, -0.0);
    expect_at("hardswish y", y, 7, NAN);
    th_release_all(2, (tg_tensor *[]){x, y});
    /* mish: 0.6 at 0, NaN at NaN and -inf (-inf * 0), -0.0 stays */
    values_and_grads("mish", 0, 0, n, v, &y, &x);
    expect_at("mish dx", tg_tensor_grad(x), 4, 0.6f);
    expect_at("mish dx", tg_tensor_grad(x), 6, NAN);
    expect_at("mish dx", tg_tensor_grad(x), 7, NAN);
    expect_at("mish y", y, 5, -0.0);
    expect_at("mish y", y, 7, NAN);
    th_release_all(2, (tg_tensor *[]){x, y});
}

/* Bounds in x's dtype, as torch's: bf16 hardtanh(x, -0.3, 0.3) clamps to
 * -0.30078125 and 0.30078125, and f32 x = 0.7f (below 0.7) is at the bound
 * 0.7f of hardtanh(x, -0.3, 0.7), so its gradient is 0, as torch's. */
Test(hardact, hardtanh_bounds_in_the_dtype)
{
    tg_tensor *x = th_vec(TG_BF16, 2, (double[]){-1, 1}, "x", false), *y = NULL;
    OK(tg_hardtanh(&y, x, -0.3, 0.3));
    expect_at("y", y, 0, -0.30078125);
    expect_at("y", y, 1, 0.30078125);
    th_release_all(2, (tg_tensor *[]){x, y});
    const double v[] = {(float)0.7, (float)-0.3, 0.5};
    values_and_grads("hardtanh", -0.3, 0.7, 3, v, &y, &x);
    for (int k = 0; k < 3; k++) expect_at("dx", tg_tensor_grad(x), k, k == 2 ? 1.0 : 0.0);
    expect_at("y", y, 0, (float)0.7);
    th_release_all(2, (tg_tensor *[]){x, y});
}

typedef struct gc_op {
    const char *op;
    double lo, hi;
} gc_op;

static int gc_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    const gc_op *o = user;
    return run_op(o->op, out, in[0], o->lo, o->hi);
}

/* Away from every kink (-3, -1, 0, 1, 3, 6, and the bounds -0.5, 2), with
 * points in every piece. */
Test(hardact, gradcheck_and_gradgradcheck)
{
    const double v[] = {-4.1, -2.7, -1.6, -0.8, -0.3, 0.2, 0.6, 1.4, 2.2, 2.8, 3.5, 6.4};
    const gc_op ops[] = {{"hardtanh", -1, 1},   {"hardtanh", -0.5, 2}, {"relu6", 0, 0},
                         {"hardsigmoid", 0, 0}, {"hardswish", 0, 0},   {"mish", 0, 0}};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        tg_tensor *x = th_vec(TG_F64, 12, v, "x", true);
        tg_gradcheck_opts o = TG_GRADCHECK_OPTS_INIT;
        cr_assert(eq(int, tg_gradcheck(gc_fn, (void *)&ops[i], 1, &x, &o), TG_OK), "%s: %s",
                  ops[i].op, tg_error_message());
        cr_assert(eq(int, tg_gradgradcheck(gc_fn, (void *)&ops[i], 1, &x, &o), TG_OK),
                  "%s: %s", ops[i].op, tg_error_message());
        tg_tensor_release(x);
    }
}

/* Each module's forward is its function's, bit for bit. */
static void expect_module(tg_module *m, const char *type, const char *op, double lo, double hi)
{
    cr_assert(strncmp(tg_module_type_name(m), type, strlen(type) + 1) == 0, "%s: %s", type,
              tg_module_type_name(m));
    cr_assert(eq(i64, tg_module_parameter_numel(m), 0));
    uint64_t s = 53;
    tg_tensor *x = th_rand_tensor(&s, TG_F32, 2, (int64_t[]){4, 5}, -8, 8), *y = NULL;
    tg_tensor *want = NULL;
    tg_module *copy = NULL;
    OK(tg_module_forward(m, &y, x));
    OK(run_op(op, &want, x, lo, hi));
    th_expect_same_bits(type, x, y, want);
    tg_tensor_release(y);
    y = NULL;
    OK(tg_module_copy(&copy, m));
    OK(tg_module_forward(copy, &y, x));
    th_expect_same_bits(type, x, y, want);
    th_release_all(3, (tg_tensor *[]){x, y, want});
    tg_module_release(copy);
}

Test(hardact, modules_forward_and_bounds)
{
    tg_module *ht = NULL, *r6 = NULL, *hs = NULL, *hw = NULL, *mi = NULL;
    OK(tg_nn_hardtanh_new(&ht, -0.5, 2));
    OK(tg_nn_relu6_new(&r6));
    OK(tg_nn_hardsigmoid_new(&hs));
    OK(tg_nn_hardswish_new(&hw));
    OK(tg_nn_mish_new(&mi));
    expect_module(ht, "Hardtanh", "hardtanh", -0.5, 2);
    expect_module(r6, "ReLU6", "relu6", 0, 6);
    expect_module(hs, "Hardsigmoid", "hardsigmoid", 0, 0);
    expect_module(hw, "Hardswish", "hardswish", 0, 0);
    expect_module(mi, "Mish", "mish", 0, 0);
    double lo = 0, hi = 0;
    OK(tg_nn_hardtanh_bounds(ht, &lo, &hi));
    cr_assert(lo == -0.5 && hi == 2.0, "%g %g", lo, hi);
    OK(tg_nn_hardtanh_bounds(r6, &lo, &hi));
    cr_assert(lo == 0.0 && hi == 6.0, "%g %g", lo, hi);
    th_expect_refused(tg_nn_hardtanh_bounds(mi, &lo, &hi), TG_EINVAL, "not Hardtanh", NULL);
    th_expect_refused(tg_nn_hardtanh_bounds(NULL, &lo, &hi), TG_EINVAL, "must not be NULL",
                      NULL);
    th_expect_refused(tg_nn_hardtanh_bounds(ht, NULL, &hi), TG_EINVAL, "must not be NULL",
                      NULL);
    tg_module *bad = NULL;
    th_expect_refused(tg_nn_hardtanh_new(&bad, 1, 1), TG_EINVAL, "max_val=1 must be > min_val=1",
                      NULL);
    th_expect_refused(tg_nn_hardtanh_new(&bad, 2, 1), TG_EINVAL, "max_val", NULL);
    th_expect_refused(tg_nn_hardtanh_new(&bad, NAN, 1), TG_EINVAL, "min_val=nan", NULL);
    cr_assert_null(bad);
    th_expect_refused(tg_nn_hardtanh_new(NULL, -1, 1), TG_EINVAL, "nn_hardtanh_new", NULL);
    th_expect_refused(tg_nn_relu6_new(NULL), TG_EINVAL, "nn_relu6_new", NULL);
    th_expect_refused(tg_nn_hardsigmoid_new(NULL), TG_EINVAL, "nn_hardsigmoid_new", NULL);
    th_expect_refused(tg_nn_hardswish_new(NULL), TG_EINVAL, "nn_hardswish_new", NULL);
    th_expect_refused(tg_nn_mish_new(NULL), TG_EINVAL, "nn_mish_new", NULL);
    tg_module *mods[] = {ht, r6, hs, hw, mi};
    for (int i = 0; i < 5; i++) tg_module_release(mods[i]);
}

Test(hardact, refusals)
{
    uint64_t s = 59;
    tg_tensor *x = th_rand_tensor(&s, TG_F32, 1, (int64_t[]){6}, -4, 4), *xi = NULL, *z = NULL;
    OK(tg_tensor_to_dtype(&xi, x, TG_I64));
    th_expect_refused(tg_hardtanh(&z, x, 2, 1), TG_EINVAL, "min_val=2 must be <= max_val=1", z);
    th_expect_refused(tg_hardtanh(&z, x, NAN, 1), TG_EINVAL, "must not be NaN", z);
    th_expect_refused(tg_hardtanh(&z, x, -1, NAN), TG_EINVAL, "must not be NaN", z);
    th_expect_refused(tg_hardtanh(NULL, x, -1, 1), TG_EINVAL, "hardtanh", NULL);
    th_expect_refused(tg_hardtanh(&z, NULL, -1, 1), TG_EINVAL, "hardtanh", z);
    /* an integer x stays an integer, as torch's (tests/test_int_arith.c);
     * its bounds must be finite */
    th_expect_refused(tg_hardtanh(&z, xi, -INFINITY, 1), TG_EINVAL,
                      "min_val=-inf cannot be converted to i64", z);
    th_expect_refused(tg_relu6(NULL, x), TG_EINVAL, "hardtanh", NULL);
    static const struct {
        const char *name;
        int (*f)(tg_tensor **, tg_tensor *);
    } u[] = {{"hardsigmoid", tg_hardsigmoid}, {"hardswish", tg_hardswish}, {"mish", tg_mish}};
    for (size_t i = 0; i < sizeof u / sizeof u[0]; i++) {
        th_expect_refused(u[i].f(&z, NULL), TG_EINVAL, u[i].name, z);
        th_expect_refused(u[i].f(NULL, x), TG_EINVAL, u[i].name, NULL);
        th_expect_refused(u[i].f(&z, xi), TG_EDTYPE, u[i].name, z);
    }
    /* min_val = max_val and infinite bounds are allowed, as torch's */
    OK(tg_hardtanh(&z, x, 0.5, 0.5));
    for (int64_t k = 0; k < 6; k++) expect_at("hardtanh(x, 0.5, 0.5)", z, k, 0.5);
    tg_tensor_release(z);
    z = NULL;
    OK(tg_hardtanh(&z, x, -INFINITY, INFINITY));
    th_expect_same_bits("hardtanh(x, -inf, inf)", x, z, x);
    th_release_all(3, (tg_tensor *[]){x, xi, z});
}
