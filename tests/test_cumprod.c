/* tests/test_cumprod.c - tg_cumprod, tg_prod, tg_prod_dim, tg_cummax,
 * tg_cummin and tg_logcumsumexp against PyTorch (values, indices, first
 * and, in f64, second derivatives; f64, f32, bf16, f16, i64, i32, u8;
 * ranks 0 to 3, every dim, an empty extent, zeros in every line (one, two,
 * at both ends, runs), NaNs and infinities, ties), gradcheck and
 * gradgradcheck in f64 at inputs with one, two and runs of zeros, a line of
 * 200000 with zeros to the second order, views, the tie and NaN rules, and
 * the refusals.  Goldens: scripts/make_cumprod_goldens.py. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

/* Runs golden case c's function on x: values into *y, indices into *i
 * (cummax and cummin only). */
static int run_case(const tg_st_file *f, const char *c, tg_tensor *x, tg_tensor **y,
                    tg_tensor **i)
{
    const char *fn = th_golden_meta(f, c, "fn");
    const int dim = atoi(th_golden_meta(f, c, "dim"));
    const bool keep = atoi(th_golden_meta(f, c, "keepdim")) != 0;
    if (!strcmp(fn, "cumprod")) return tg_cumprod(y, x, dim);
    if (!strcmp(fn, "prod")) return tg_prod(y, x);
    if (!strcmp(fn, "prod_dim")) return tg_prod_dim(y, x, dim, keep);
    if (!strcmp(fn, "cummax")) return tg_cummax(y, i, x, dim);
    if (!strcmp(fn, "cummin")) return tg_cummin(y, i, x, dim);
    if (!strcmp(fn, "logcumsumexp")) return tg_logcumsumexp(y, x, dim);
    cr_assert(false, "%s: unknown fn %s", c, fn);
    return TG_EINVAL;
}

/* The relative tolerance of values (grad false) or gradients of dtype dt:
 * cummax's and cummin's values are x's elements, exact; an integer result
 * is exact; a half's gradient goes through several ops, each rounding. */
static double tol(tg_dtype dt, const char *fn, bool grad)
{
    if (!grad && (!strcmp(fn, "cummax") || !strcmp(fn, "cummin"))) return 0;
    switch (dt) {
    case TG_F64: return 1e-12;
    case TG_F32: return grad ? 2e-6 : 1e-6;
    case TG_BF16: return grad ? 4e-2 : 4e-3;
    case TG_F16: return grad ? 6e-3 : 5e-4;
    default: return 0;
    }
}

Test(cumprod, every_case_matches_torch)
{
    tg_st_file *f = th_golden_load("cumprod.safetensors");
    const int n = atoi(tg_st_meta_get(f, "cases"));
    int grads = 0, seconds = 0, ints = 0, zeros = 0, nans = 0;
    for (int c_i = 0; c_i < n; c_i++) {
        char c[16], key[32], what[160];
        snprintf(c, sizeof c, "case%d", c_i);
        const char *fn = th_golden_meta(f, c, "fn"), *kind = th_golden_meta(f, c, "kind");
        const tg_tensor *gx = th_golden_get(f, c, "x");
        const tg_dtype dt = tg_tensor_dtype(gx);
        const bool is_float = tg_dtype_is_float(dt);
        tg_tensor *x = is_float ? th_leaf_clone(gx) : tg_tensor_retain((tg_tensor *)gx);
        tg_tensor *y = NULL, *i = NULL, *dx = NULL, *ddx = NULL;
        snprintf(what, sizeof what, "%s (%s %s %s, %d-d, dim %s, keepdim %s)", c, fn,
                 th_golden_meta(f, c, "dtype"), kind, tg_tensor_ndim(x),
                 th_golden_meta(f, c, "dim"), th_golden_meta(f, c, "keepdim"));
        const bool ext = !strcmp(fn, "cummax") || !strcmp(fn, "cummin");
        OK(run_case(f, c, x, &y, ext ? &i : NULL));
        th_expect_close(what, y, th_golden_get(f, c, "y"), tol(dt, fn, false));
        if (ext) th_expect_close(what, i, th_golden_get(f, c, "i"), 0);
        snprintf(key, sizeof key, "%s.g", c);
        tg_tensor *g = tg_st_get(f, key);
        snprintf(key, sizeof key, "%s.h", c);
        tg_tensor *h = tg_st_get(f, key);
        if (g) {
            tg_backward_opts o = TG_BACKWARD_OPTS_INIT;
            o.create_graph = h != NULL;
            OK(tg_grad(&dx, 1, &y, &g, 1, &x, &o));
            th_expect_close(what, dx, th_golden_get(f, c, "dx"), tol(dt, fn, true));
            grads++;
        }
        if (h && tg_tensor_requires_grad(dx)) {
            OK(tg_grad(&ddx, 1, &dx, &h, 1, &x, NULL));
            th_expect_close(what, ddx, th_golden_get(f, c, "ddx"), 1e-10);
            seconds++;
        } else if (h) {   /* torch's second derivative is zero (cummax, cummin) */
            const tg_tensor *want = th_golden_get(f, c, "ddx");
            for (int64_t e = 0; e < tg_tensor_numel(want); e++)
                cr_assert(eq(dbl, th_at(want, e), 0.0), "%s: ddx[%lld]", what, (long long)e);
        }
        ints += !is_float;
        zeros += strstr(kind, "zero") != NULL;
        nans += !strcmp(kind, "nonfinite");
        th_release_all(5, (tg_tensor *[]){x, y, i, dx, ddx});
    }
    cr_assert(n >= 1500 && grads >= 800 && seconds >= 100 && ints >= 300 && zeros >= 400 &&
              nans >= 150, "%d cases, %d gradients, %d second, %d integer, %d with zeros, "
              "%d nonfinite", n, grads, seconds, ints, zeros, nans);
    tg_st_free(f);
}

typedef struct cp_case {
    int fn;   /* 0 cumprod, 1 prod_dim, 2 prod, 3 cummax, 4 cummin, 5 logcumsumexp */
    int dim;
    int zeros;   /* zeros put into x: 0, 1 or 2 (in one line), 3 (a line of them),
                    4 (runs of two) */
} cp_case;

static int cp_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    const cp_case *c = user;
    switch (c->fn) {
    case 0: return tg_cumprod(out, in[0], c->dim);
    case 1: return tg_prod_dim(out, in[0], c->dim, c->dim == 0);
    case 2: return tg_prod(out, in[0]);
    case 3: return tg_cummax(out, NULL, in[0], c->dim);
    case 4: return tg_cummin(out, NULL, in[0], c->dim);
    default: return tg_logcumsumexp(out, in[0], c->dim);
    }
}

/* Distinct values away from 0 (so that the cummax order does not move
 * under gradcheck's steps), then c's zeros: one at (0, 1, 2) (every dim's
 * line through it has one), two at (0, 1, 2) and (0, 1, 0) (dim 2's line
 * has two), all of x[1], or three at (0, 1, 1), (0, 1, 2) and (0, 2, 2)
 * (two in a row along dims 1 and 2). */
Test(cumprod, gradcheck_and_gradgradcheck)
{
    const cp_case cases[] = {{0, 2, 0}, {0, 2, 1}, {0, 2, 2}, {0, 1, 1}, {0, -3, 2},
                             {0, 0, 3}, {0, 2, 4}, {0, 1, 4}, {0, 0, 4}, {1, 2, 0},
                             {1, 2, 1}, {1, 2, 2}, {1, 0, 3}, {2, 0, 0}, {2, 0, 1},
                             {2, 0, 2}, {3, 2, 0}, {4, 1, 0}, {5, 2, 0}, {5, 0, 0}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        tg_tensor *x = th_seq(TG_F64, 3, (int64_t[]){2, 3, 4}, 0.5, 1.5);
        double *d = tg_tensor_data(x);
        for (int e = 0; e < 24; e++) d[e] *= e % 3 == 1 ? -1 : 1;
        if (cases[c].zeros >= 1) d[1 * 4 + 2] = 0;
        if (cases[c].zeros >= 2) d[1 * 4 + 0] = 0;
        if (cases[c].zeros == 3)
            for (int e = 12; e < 24; e++) d[e] = 0;
        if (cases[c].zeros == 4) d[1 * 4 + 1] = d[2 * 4 + 2] = d[1 * 4 + 2] = 0;
        OK(tg_tensor_set_requires_grad(x, true));
        tg_gradcheck_opts o = TG_GRADCHECK_OPTS_INIT;
        cr_assert(eq(int, tg_gradcheck(cp_fn, (void *)&cases[c], 1, &x, &o), TG_OK),
                  "case %zu: %s", c, tg_error_message());
        cr_assert(eq(int, tg_gradgradcheck(cp_fn, (void *)&cases[c], 1, &x, &o), TG_OK),
                  "case %zu: %s", c, tg_error_message());
        tg_tensor_release(x);
    }
}

/* The exact gradients at zeros, worked by hand: x = (2, 0, 3, 0, 4).
 * prod: the gradient is 0 everywhere (two zeros); with x[3] = 5 it is the
 * product of the others at the zero, 120, and 0 elsewhere.  cumprod with
 * g = 1: dx[0] = 1 + 0 ... = 1, dx[1] = 2 + 2*3 = 8, then 0s (torch's). */
Test(cumprod, zero_gradients_by_hand)
{
    tg_tensor *x = th_vec(TG_F64, 5, (double[]){2, 0, 3, 0, 4}, "x", true);
    tg_tensor *p = NULL, *dp = NULL, *cp = NULL, *dc = NULL, *s = NULL;
    OK(tg_prod(&p, x));
    OK(tg_grad(&dp, 1, &p, NULL, 1, &x, NULL));
    for (int e = 0; e < 5; e++) cr_assert(eq(dbl, th_at(dp, e), 0.0));
    OK(tg_cumprod(&cp, x, 0));
    OK(tg_sum(&s, cp));
    OK(tg_grad(&dc, 1, &s, NULL, 1, &x, NULL));
    const double want[] = {1, 8, 0, 0, 0};
    for (int e = 0; e < 5; e++) cr_assert(eq(dbl, th_at(dc, e), want[e]), "dx[%d]", e);
    th_release_all(6, (tg_tensor *[]){x, p, dp, cp, dc, s});

    x = th_vec(TG_F64, 5, (double[]){2, 0, 3, 5, 4}, "x", true);
    p = dp = NULL;
    OK(tg_prod(&p, x));
    OK(tg_grad(&dp, 1, &p, NULL, 1, &x, NULL));
    const double wp[] = {0, 120, 0, 0, 0};
    for (int e = 0; e < 5; e++) cr_assert(eq(dbl, th_at(dp, e), wp[e]), "dp[%d]", e);
    th_release_all(3, (tg_tensor *[]){x, p, dp});
}

/* sum(w * f(x)) (cumprod) or 1.5 f(x) (prod) differentiated three times,
 * each time against a fixed direction (v, then u): the first, second and
 * third derivatives into d[0..3) (5 values each). */
static void three_orders(bool cumprod, const double *xs, double d[3][5])
{
    tg_tensor *x = th_vec(TG_F64, 5, xs, "x", true);
    tg_tensor *w = th_vec(TG_F64, 5, (double[]){1, 2, 3, 4, 5}, "w", false);
    tg_tensor *v = th_vec(TG_F64, 5, (double[]){0.5, -1, 2, 1, -0.5}, "v", false);
    tg_tensor *u = th_vec(TG_F64, 5, (double[]){1, 1, -1, 2, 0.5}, "u", false);
    tg_tensor *c = NULL, *cw = NULL, *y = NULL, *g = NULL, *h = NULL, *t = NULL;
    tg_backward_opts o = TG_BACKWARD_OPTS_INIT;
    o.create_graph = true;
    if (cumprod) {
        OK(tg_cumprod(&c, x, 0));
        OK(tg_mul(&cw, c, w));
        OK(tg_sum(&y, cw));
    } else {
        OK(tg_prod(&c, x));
        OK(tg_mul_scalar(&y, c, 1.5));
    }
    OK(tg_grad(&g, 1, &y, NULL, 1, &x, &o));
    OK(tg_grad(&h, 1, &g, &v, 1, &x, &o));
    OK(tg_grad(&t, 1, &h, &u, 1, &x, NULL));
    for (int e = 0; e < 5; e++) {
        d[0][e] = th_at(g, e);
        d[1][e] = th_at(h, e);
        d[2][e] = th_at(t, e);
    }
    th_release_all(10, (tg_tensor *[]){x, w, v, u, c, cw, y, g, h, t});
}

/* Derivatives of the first three orders at one and two zeros, and at runs
 * of zeros (two in a row, a line ending in two, a line starting with
 * three), as torch 1.13 gives them (its exact paths for inputs with zeros). */
Test(cumprod, third_order_at_zeros_matches_torch)
{
    const double xs[6][5] = {{2, 0, 3, 0.5, 4}, {2, 0, 3, 0, 4},  {2, 0, 3, 0.5, 4},
                             {2, 0, 0, 3, 4},   {2, 3, 0.5, 0, 0}, {0, 0, 0, 3, 4}};
    const double want[6][3][5] = {
        {{1, 94, 0, 0, 0}, {-47, 220, -30, -144, -15}, {-34.5, 301.125, -60.5, 78, -18.75}},
        {{1, 22, 0, 0, 0}, {-11, 161.5, -6, -144, 0}, {-63, 277.5, -49.5, 78, -30}},
        {{0, 18, 0, 0, 0}, {-9, 50.25, -6, -36, -4.5}, {-11.25, 73.6875, -15, 18, -5.625}},
        {{1, 4, 0, 0, 0}, {-2, 301, -150, 0, 0}, {225, 301.5, -115.5, 144, 90}},
        {{11.5, 7, 18, 12, 0}, {20.5, 17.75, 22.5, 39.5, 15}, {39.25, 30, -0.5, 79.125, 100}},
        {{1, 0, 0, 0, 0}, {-2, 1, 0, 0, 0}, {225, 112.5, -37.5, 0, 0}}};
    for (int k = 0; k < 6; k++) {
        double d[3][5];
        three_orders(k != 2, xs[k], d);
        for (int o = 0; o < 3; o++)
            for (int e = 0; e < 5; e++)
                cr_assert(th_close(d[o][e], want[k][o][e], 1e-12, 1e-12),
                          "case %d order %d [%d]: %g, torch %g", k, o + 1, e, d[o][e],
                          want[k][o][e]);
    }
}

/* cumprod's gradient at zeros without a graph (a loop per line) is the
 * one with a graph (the linear scan), on lines of 40 with no, one, two,
 * many zeros and runs of them, along each dim of a view. */
Test(cumprod, zero_paths_agree)
{
    for (int zeros = 0; zeros < 5; zeros++)
        for (int dim = 0; dim < 2; dim++) {
            tg_tensor *b = th_seq(TG_F64, 2, (int64_t[]){40, 3}, -1.5, 1.5), *x = NULL;
            double *d = tg_tensor_data(b);
            for (int e = 0; e < 120; e++)
                if ((zeros == 1 && e == 61) || (zeros == 2 && (e == 4 || e == 100)) ||
                    (zeros == 3 && e % 7 == 2) || (zeros == 4 && (e % 40 < 3 || e > 110)))
                    d[e] = 0;
            OK(tg_tensor_set_requires_grad(b, true));
            OK(tg_transpose(&x, b, 0, 1));   /* (3, 40), strided */
            tg_tensor *y = NULL, *g = th_seq(TG_F64, 2, tg_tensor_shape(x), -1, 1);
            tg_tensor *d1 = NULL, *d2 = NULL;
            OK(tg_cumprod(&y, x, dim));
            tg_backward_opts o = TG_BACKWARD_OPTS_INIT;
            o.create_graph = true;
            OK(tg_grad(&d2, 1, &y, &g, 1, &b, &o));   /* keeps the graph */
            OK(tg_grad(&d1, 1, &y, &g, 1, &b, NULL));
            char what[48];
            snprintf(what, sizeof what, "zeros %d dim %d", zeros, dim);
            th_expect_close(what, d1, d2, 1e-12);
            th_release_all(6, (tg_tensor *[]){b, x, y, g, d1, d2});
        }
}

/* The first gradient of sum(g * cumprod(x)) with no graph kept (the loop
 * per line), at x + t e_m: affine in t, since the gradient has degree 1 in
 * each x[m].  So its difference at t = 1 and t = -1, halved, is exactly the
 * derivative along e_m, which sum(h * dx)'s gradient at m must be. */
static double fd_along(tg_tensor *x, tg_tensor *g, tg_tensor *h, int64_t m)
{
    double r[2];
    for (int s = 0; s < 2; s++) {
        tg_tensor *xp = NULL, *y = NULL, *dx = NULL, *p = NULL, *t = NULL;
        OK(tg_tensor_clone(&xp, x));
        double *d = tg_tensor_data(xp);
        d[m] += s == 0 ? 1.0 : -1.0;
        OK(tg_tensor_set_requires_grad(xp, true));
        OK(tg_cumprod(&y, xp, 0));
        OK(tg_grad(&dx, 1, &y, &g, 1, &xp, NULL));
        OK(tg_mul(&p, dx, h));
        OK(tg_sum(&t, p));
        r[s] = th_at(t, 0);
        th_release_all(5, (tg_tensor *[]){xp, y, dx, p, t});
    }
    return (r[0] - r[1]) / 2;
}

/* A line of 200000 with zeros (single ones and runs) under create_graph:
 * the first gradient is the loop's, and the second, at the zeros and
 * beside them, the exact difference of first gradients (fd_along). */
Test(cumprod, long_line_with_zeros_second_order)
{
    const int64_t D = 200000, ms[] = {0, 999, 1000, 1001, 1002, 1003, 70000, 199999};
    tg_tensor *x = th_seq(TG_F64, 1, &D, -1, 1), *g = th_seq(TG_F64, 1, &D, 1, -1);
    tg_tensor *h = th_seq(TG_F64, 1, &D, 0.5, -0.25);
    double *d = tg_tensor_data(x);
    for (int64_t e = 0; e < D; e++) d[e] = (e % 2 ? -1 : 1) * (1 + 1e-3 * sin((double)e));
    d[1000] = d[1001] = d[1002] = d[70000] = d[150000] = 0;
    OK(tg_tensor_set_requires_grad(x, true));
    tg_tensor *y = NULL, *d1 = NULL, *d2 = NULL, *p = NULL, *s = NULL, *dd = NULL;
    OK(tg_cumprod(&y, x, 0));
    tg_backward_opts o = TG_BACKWARD_OPTS_INIT;
    o.create_graph = true;
    OK(tg_grad(&d2, 1, &y, &g, 1, &x, &o));
    tg_backward_opts keep = TG_BACKWARD_OPTS_INIT;
    keep.retain_graph = true;
    OK(tg_grad(&d1, 1, &y, &g, 1, &x, &keep));
    th_expect_close("first order", d1, d2, 1e-12);
    OK(tg_mul(&p, d2, h));
    OK(tg_sum(&s, p));
    OK(tg_grad(&dd, 1, &s, NULL, 1, &x, NULL));
    for (size_t k = 0; k < sizeof ms / sizeof *ms; k++) {
        const double want = fd_along(x, g, h, ms[k]), got = th_at(dd, ms[k]);
        cr_assert(th_close(got, want, 1e-9, 1e-9), "ddx[%lld]: %g, by differences %g",
                  (long long)ms[k], got, want);
    }
    th_release_all(9, (tg_tensor *[]){x, g, h, y, d1, d2, p, s, dd});
}

/* torch's CPU rule, element by element: the later of equal elements, a
 * NaN taken when met (the latest NaN's index), -0.0 and 0.0 equal. */
Test(cumprod, cummax_ties_and_nans)
{
    tg_tensor *x = th_vec(TG_F32, 9, (double[]){1, 3, 3, NAN, 2, NAN, 5, -0.0, 0.0}, "x",
                          false);
    tg_tensor *v = NULL, *i = NULL, *mv = NULL, *mi = NULL;
    OK(tg_cummax(&v, &i, x, 0));
    OK(tg_cummin(&mv, &mi, x, -1));
    const int64_t wi[] = {0, 1, 2, 3, 3, 5, 5, 5, 5}, wmi[] = {0, 0, 0, 3, 3, 5, 5, 5, 5};
    for (int e = 0; e < 9; e++) {
        cr_assert(eq(i64, ((const int64_t *)tg_tensor_cdata(i))[e], wi[e]), "max %d", e);
        cr_assert(eq(i64, ((const int64_t *)tg_tensor_cdata(mi))[e], wmi[e]), "min %d", e);
    }
    cr_assert(isnan(th_at(v, 8)) && th_at(v, 2) == 3);
    th_release_all(5, (tg_tensor *[]){x, v, i, mv, mi});

    tg_tensor *z = th_vec(TG_F64, 3, (double[]){-0.0, 0.0, -0.0}, "z", false);
    OK(tg_cummax(&v, &i, z, 0));
    for (int e = 0; e < 3; e++) {
        cr_assert(eq(i64, ((const int64_t *)tg_tensor_cdata(i))[e], e));
        cr_assert(eq(int, signbit(th_at(v, e)) != 0, e != 1));
    }
    th_release_all(3, (tg_tensor *[]){z, v, i});
}

/* Transposed, sliced and expanded views give what their contiguous copies
 * give, along each dim. */
Test(cumprod, views_match_their_contiguous_copies)
{
    tg_tensor *v[3];
    th_views_of_3x4x5(v);
    for (int k = 0; k < 3; k++)
        for (int dim = 0; dim < 3; dim++)
            for (int fn = 0; fn < 5; fn++) {
                tg_tensor *c = NULL, *gv = NULL, *wv = NULL, *gi = NULL, *wi = NULL;
                char what[48];
                snprintf(what, sizeof what, "view %d dim %d fn %d", k, dim, fn);
                OK(tg_contiguous(&c, v[k]));
                if (fn == 0) OK(tg_cumprod(&gv, v[k], dim));
                if (fn == 0) OK(tg_cumprod(&wv, c, dim));
                if (fn == 1) OK(tg_prod_dim(&gv, v[k], dim, true));
                if (fn == 1) OK(tg_prod_dim(&wv, c, dim, true));
                if (fn == 2) OK(tg_cummax(&gv, &gi, v[k], dim));
                if (fn == 2) OK(tg_cummax(&wv, &wi, c, dim));
                if (fn == 3) OK(tg_cummin(&gv, &gi, v[k], dim));
                if (fn == 3) OK(tg_cummin(&wv, &wi, c, dim));
                if (fn == 4) OK(tg_logcumsumexp(&gv, v[k], dim));
                if (fn == 4) OK(tg_logcumsumexp(&wv, c, dim));
                th_expect_same_bits(what, v[k], gv, wv);
                if (gi) th_expect_same_bits(what, v[k], gi, wi);
                th_release_all(5, (tg_tensor *[]){c, gv, wv, gi, wi});
            }
    th_release_all(3, v);
}

/* Integer results are int64 and wrap as torch's; 0-d inputs keep 0-d;
 * empty products are 1; one of values and indices may be left out. */
Test(cumprod, edges)
{
    tg_tensor *x = th_vec(TG_I64, 3, (double[]){4611686018427387904.0, 3, 2}, "x", false);
    tg_tensor *y = NULL, *p = NULL;
    OK(tg_cumprod(&y, x, 0));
    OK(tg_prod(&p, x));
    cr_assert(eq(int, tg_tensor_dtype(y), TG_I64));
    /* 3 * 2^62 wraps to -2^62, and twice that to -2^63 */
    cr_assert(eq(i64, ((const int64_t *)tg_tensor_cdata(y))[1], -(INT64_C(1) << 62)));
    cr_assert(eq(i64, ((const int64_t *)tg_tensor_cdata(y))[2], INT64_MIN));
    cr_assert(eq(i64, *(const int64_t *)tg_tensor_cdata(p), INT64_MIN));
    th_release_all(3, (tg_tensor *[]){x, y, p});

    tg_tensor *z = NULL, *zy = NULL, *zi = NULL, *zp = NULL, *e = NULL, *ep = NULL;
    OK(tg_tensor_full(&z, TG_F32, 0, NULL, 2.5));
    OK(tg_cummin(NULL, &zi, z, -1));
    OK(tg_cumprod(&zy, z, 0));
    OK(tg_prod_dim(&zp, z, -1, true));
    cr_assert(eq(int, tg_tensor_ndim(zi), 0));
    cr_assert(eq(int, tg_tensor_ndim(zy) + tg_tensor_ndim(zp), 0));
    cr_assert(eq(dbl, tg_tensor_item(zy), 2.5));
    OK(tg_tensor_zeros(&e, TG_F64, 2, (int64_t[]){2, 0}));
    OK(tg_prod_dim(&ep, e, 1, false));
    cr_assert(eq(dbl, th_at(ep, 0), 1.0));
    cr_assert(eq(dbl, th_at(ep, 1), 1.0));
    th_release_all(6, (tg_tensor *[]){z, zy, zi, zp, e, ep});
}

/* FP32 under autocast, as cumsum: a bf16 x gives the f32 result of x in
 * f32 and its gradient comes back in bf16; outside autocast, bf16. */
static int cumprod_dim1(tg_tensor **y, tg_tensor *x)
{
    return tg_cumprod(y, x, 1);
}

static int prod_dim0(tg_tensor **y, tg_tensor *x)
{
    return tg_prod_dim(y, x, 0, false);
}

Test(cumprod, autocast_computes_in_f32)
{
    th_expect_fp32_autocast(cumprod_dim1, 412);
    th_expect_fp32_autocast(prod_dim0, 413);
}

/* Inside a scope both of cummax's results are the scope's; one alone when
 * the other is not wanted. */
Test(cumprod, scopes_own_the_results)
{
    tg_tensor *x = th_seq(TG_F32, 2, (int64_t[]){3, 5}, -1, 1), *v = NULL, *i = NULL;
    tg_tensor *m = NULL, *p = NULL;
    OK(tg_scope_begin());
    OK(tg_cummax(&v, &i, x, 1));
    OK(tg_cummin(NULL, &m, x, 0));
    OK(tg_prod(&p, x));
    cr_assert(eq(int, tg_scope_size(), 4));
    OK(tg_scope_end());
    tg_tensor_release(x);
}

Test(cumprod, refusals)
{
    tg_tensor *x = th_seq(TG_F32, 2, (int64_t[]){3, 5}, -1, 1), *v = NULL, *i = NULL;
    tg_tensor *n = th_vec(TG_I64, 2, (double[]){1, 2}, "n", false);
    th_expect_refused(tg_cumprod(&v, NULL, 0), TG_EINVAL, "x must not be NULL", v);
    th_expect_refused(tg_cumprod(NULL, x, 0), TG_EINVAL, "out must not be NULL", NULL);
    th_expect_refused(tg_cumprod(&v, x, 2), TG_EINVAL, "dim=2 must be in [-2, 2)", v);
    th_expect_refused(tg_prod(&v, NULL), TG_EINVAL, "x must not be NULL", v);
    th_expect_refused(tg_prod_dim(&v, x, -3, false), TG_EINVAL, "dim=-3", v);
    th_expect_refused(tg_cummax(NULL, NULL, x, 0), TG_EINVAL, "both be NULL", NULL);
    th_expect_refused(tg_cummin(&v, &v, x, 0), TG_EINVAL, "two different places", v);
    th_expect_refused(tg_cummax(&v, &i, x, 5), TG_EINVAL, "dim=5", v);
    th_expect_refused(tg_logcumsumexp(&v, n, 0), TG_EDTYPE, "must be a float dtype", v);
    th_expect_refused(tg_logcumsumexp(&v, x, -3), TG_EINVAL, "dim=-3", v);
    cr_assert(i == NULL);
    th_release_all(2, (tg_tensor *[]){x, n});
}
