/* tests/test_vector_norm.c - tg_vector_norm against PyTorch's
 * torch.linalg.vector_norm and its gradient (f32, f64, bf16; ord 2, 1,
 * +-inf, 0, 3, 0.5, -1, 1.5; every dim, one, two with keepdim; zeros, NaN,
 * +-inf), the second derivative against torch's, derivatives to second
 * order by finite differences, the penalty of WGAN-GP at a gradient of
 * zeros, and the refusals.  Goldens: scripts/make_vector_norm_goldens.py. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

/* th_expect_close for a bf16 got against an f64 want. */
static void expect_close_f64(const char *what, const tg_tensor *got, const tg_tensor *want,
                             double rtol)
{
    tg_tensor *g64 = NULL;
    OK(tg_tensor_to_dtype(&g64, got, TG_F64));
    th_expect_close(what, g64, want, rtol);
    tg_tensor_release(g64);
}

/* x's gradient (a second derivative) is torch's (want), but 0 at the zeros
 * of x where torch's is NaN (0 * inf: ord 2 at a row of zeros; 1 < ord < 2,
 * and ord < 1 but for 0, at a zero element), see
 * second_derivatives_at_zeros. */
static void expect_ddx(const char *what, const tg_tensor *x, const tg_tensor *want)
{
    const tg_tensor *got = tg_tensor_grad(x);
    for (int64_t i = 0; i < tg_tensor_numel(x); i++) {
        const double gi = th_at(got, i), wi = th_at(want, i);
        if (isnan(wi))
            cr_assert(th_at(x, i) == 0 && gi == 0, "%s: ddx[%lld] = %g at x = %g, torch NaN",
                      what, (long long)i, gi, th_at(x, i));
        else
            cr_assert(th_close(gi, wi, 1e-11, 1e-13), "%s: ddx[%lld] = %g, torch %g", what,
                      (long long)i, gi, wi);
    }
}

/* y within rounding of torch's (which sums f32 in f32; ours sums in double
 * and rounds once), dx within a few units of the last place (torch's
 * backward rounds each of its steps to x's dtype, as ours, in another
 * order); the second derivative likewise in f64.  bf16: torch's kernel sums
 * in bf16 steps, a few percent off over 120 elements, so y and dx are held
 * to the f64 values of the same x and g (y rounded once, dx through the
 * backward's bf16 steps) and to torch's loosely. */
Test(vector_norm, every_case_matches_torch)
{
    tg_st_file *f = th_golden_load("vector_norm.safetensors");
    const int n = atoi(tg_st_meta_get(f, "cases"));
    int per_dtype[3] = {0}, second = 0;
    for (int i = 0; i < n; i++) {
        char c[16], what[96];
        snprintf(c, sizeof c, "case%d", i);
        const char *dt = th_golden_meta(f, c, "dtype");
        const double ord = atof(th_golden_meta(f, c, "ord"));
        int dims[TG_MAX_DIMS];
        const int nd = th_dims_of(th_golden_meta(f, c, "dims"), dims);
        const bool keepdim = atoi(th_golden_meta(f, c, "keepdim")) != 0;
        snprintf(what, sizeof what, "%s (%s, ord %g, %d dims, keepdim %d)", c, dt, ord, nd,
                 keepdim);
        tg_tensor *x = th_leaf_clone(th_golden_get(f, c, "x")), *y = NULL, *dx = NULL;
        OK(tg_vector_norm(&y, x, ord, nd, dims, keepdim));
        const bool f64 = !strcmp(dt, "f64"), f32 = !strcmp(dt, "f32");
        th_expect_close(what, y, th_golden_get(f, c, "y"), f64 ? 1e-13 : f32 ? 1e-5 : 1.0 / 32);
        if (!f64 && !f32) expect_close_f64(what, y, th_golden_get(f, c, "y64"), 1.0 / 256);
        const tg_tensor *h = tg_st_get(f, (snprintf(what, sizeof what, "%s.h", c), what));
        tg_backward_opts o = {.create_graph = h != NULL};
        tg_tensor *g = (tg_tensor *)th_golden_get(f, c, "g");
        OK(tg_grad(&dx, 1, &y, &g, 1, &x, &o));
        snprintf(what, sizeof what, "%s dx (%s, ord %g)", c, dt, ord);
        th_expect_close(what, dx, th_golden_get(f, c, "dx"), f64 ? 1e-12 : f32 ? 1e-5 : 1.0 / 8);
        if (!f64 && !f32) expect_close_f64(what, dx, th_golden_get(f, c, "dx64"), 4.0 / 128);
        if (h) {
            th_backward_with(dx, h);
            snprintf(what, sizeof what, "%s ddx (ord %g)", c, ord);
            expect_ddx(what, x, th_golden_get(f, c, "ddx"));
            second++;
        }
        per_dtype[f64 ? 0 : f32 ? 1 : 2]++;
        th_release_all(3, (tg_tensor *[]){x, y, dx});
    }
    for (int d = 0; d < 3; d++)
        cr_assert(per_dtype[d] >= 40, "dtype %d: %d cases", d, per_dtype[d]);
    cr_assert(second >= 3, "%d second-derivative cases", second);
    tg_st_free(f);
}

typedef struct ord_dims {
    double ord;
    int nd, dims[2];
} ord_dims;

static int norm_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    const ord_dims *o = user;
    return tg_vector_norm(out, in[0], o->ord, o->nd, o->dims, false);
}

/* Away from zeros and ties, where the norms are smooth. */
Test(vector_norm, gradcheck_and_gradgradcheck)
{
    const ord_dims cases[] = {{2, 1, {1}},  {1, 1, {0}},         {INFINITY, 1, {1}},
                              {-INFINITY, 0, {0}}, {3, 2, {0, 1}}, {0.5, 1, {1}},
                              {-1, 1, {1}}, {1.5, 0, {0}},       {2, 0, {0}}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        uint64_t s = 101 + i;
        tg_tensor *x = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){3, 4}, 0.2, 2);
        for (int64_t k = 0; k < tg_tensor_numel(x); k += 3)
            OK(tg_tensor_set_flat(x, k, -th_at(x, k)));
        OK(tg_tensor_set_requires_grad(x, true));
        th_expect_gradchecks(norm_fn, (void *)&cases[i], 1, &x, "ord %g", cases[i].ord);
        tg_tensor_release(x);
    }
}

/* WGAN-GP: (||d sum(w * x) / dx||_2 - 1)^2 with the critic's gradient a row
 * of zeros (w = 0) has the gradient 0 in w, as torch's: the norm's
 * gradient at a norm of 0 is 0. */
Test(vector_norm, penalty_at_a_zero_gradient_is_finite)
{
    tg_tensor *w = th_vec(TG_F64, 3, (double[]){0, 0, 0}, "w", true);
    tg_tensor *x = th_vec(TG_F64, 3, (double[]){1, -2, 3}, "x", true);
    tg_tensor *wx = NULL, *c = NULL, *gx = NULL, *nrm = NULL, *dev = NULL, *pen = NULL;
    OK(tg_mul(&wx, w, x));
    OK(tg_sum(&c, wx));
    tg_backward_opts o = {.create_graph = true};
    OK(tg_grad(&gx, 1, &c, NULL, 1, &x, &o));
    OK(tg_vector_norm(&nrm, gx, 2.0, 0, NULL, false));
    cr_assert(eq(dbl, th_at(nrm, 0), 0.0));
    OK(tg_sub_scalar(&dev, nrm, 1.0));
    OK(tg_mul(&pen, dev, dev));
    OK(tg_backward(pen, NULL, NULL));
    for (int k = 0; k < 3; k++)
        cr_assert(eq(dbl, th_at(tg_tensor_grad(w), k), 0.0), "dw[%d] = %g", k,
                  th_at(tg_tensor_grad(w), k));
    th_release_all(8, (tg_tensor *[]){w, x, wx, c, gx, nrm, dev, pen});
}

/* Second derivatives with zeros in x (ord 2 and 3: x all 0; ord 0.5 and
 * -1: one 0): torch's where x is not 0, and 0 where it is, where torch's
 * are NaN.  x multiplies the masked quotient, and the power of |x| reads
 * its zeros as 1 (its sign is 0 there), so differentiating again
 * multiplies no inf by 0. */
Test(vector_norm, second_derivatives_at_zeros)
{
    tg_st_file *f = th_golden_load("vector_norm.safetensors");
    const int n = atoi(tg_st_meta_get(f, "seconds"));
    cr_assert(n >= 4);
    for (int k = 0; k < n; k++) {
        char c[24];
        snprintf(c, sizeof c, "second%d", k);
        const double ord = atof(th_golden_meta(f, c, "ord"));
        const tg_tensor *want = th_golden_get(f, c, "ddx");
        tg_tensor *x = th_leaf_clone(th_golden_get(f, c, "x"));
        tg_tensor *y = NULL, *dx = NULL;
        OK(tg_vector_norm(&y, x, ord, 0, NULL, false));
        tg_backward_opts o = {.create_graph = true};
        OK(tg_grad(&dx, 1, &y, NULL, 1, &x, &o));
        th_backward_with(dx, th_golden_get(f, c, "h"));
        char what[48];
        snprintf(what, sizeof what, "%s (ord %g)", c, ord);
        expect_ddx(what, x, want);
        th_release_all(3, (tg_tensor *[]){x, y, dx});
    }
    tg_st_free(f);
}

/* f32 squares beyond f32's range: summed in double, the norm is finite
 * (torch's f32 kernel gives inf); an empty dim gives 0 for ord 2. */
Test(vector_norm, large_f32_and_empty_rows)
{
    tg_tensor *x = th_vec(TG_F32, 2, (double[]){1e20, 3e20}, "x", false), *y = NULL;
    OK(tg_vector_norm(&y, x, 2.0, 0, NULL, false));
    cr_assert(th_close(th_at(y, 0), sqrt(10.0) * 1e20, 1e-6, 0), "%g", th_at(y, 0));
    tg_tensor *e = NULL, *ye = NULL;
    OK(tg_tensor_zeros(&e, TG_F32, 2, (int64_t[]){0, 3}));
    OK(tg_vector_norm(&ye, e, 2.0, 1, (int[]){0}, false));
    cr_assert(eq(i64, tg_tensor_numel(ye), 3));
    for (int k = 0; k < 3; k++) cr_assert(eq(dbl, th_at(ye, k), 0.0));
    th_release_all(4, (tg_tensor *[]){x, y, e, ye});
}

/* FP32 under autocast: a bf16 x gives an f32 norm equal to the norm of x
 * in f32, and x's gradient comes back in bf16; outside, a bf16 norm. */
static int vector_norm_dim1(tg_tensor **y, tg_tensor *x)
{
    return tg_vector_norm(y, x, 2.0, 1, (int[]){1}, false);
}

Test(vector_norm, autocast_computes_in_f32)
{
    th_expect_fp32_autocast(vector_norm_dim1, 211);
}

Test(vector_norm, refusals_name_the_argument)
{
    tg_tensor *x = th_vec(TG_F32, 3, (double[]){1, 2, 3}, "x", false), *z = NULL, *xi = NULL;
    tg_tensor *e = NULL;
    th_expect_refused(tg_vector_norm(&z, NULL, 2.0, 0, NULL, false), TG_EINVAL, "vector_norm",
                      z);
    th_expect_refused(tg_vector_norm(NULL, x, 2.0, 0, NULL, false), TG_EINVAL, "out", NULL);
    th_expect_refused(tg_vector_norm(&z, x, NAN, 0, NULL, false), TG_EINVAL, "ord is NaN", z);
    th_expect_refused(tg_vector_norm(&z, x, 2.0, 1, (int[]){1}, false), TG_EINVAL, "dims[0]", z);
    th_expect_refused(tg_vector_norm(&z, x, 2.0, 2, (int[]){0, -1}, false), TG_EINVAL,
                      "dims[1]", z);
    th_expect_refused(tg_vector_norm(&z, x, 2.0, 1, NULL, false), TG_EINVAL, "dims", z);
    OK(tg_tensor_to_dtype(&xi, x, TG_I64));
    th_expect_refused(tg_vector_norm(&z, xi, 2.0, 0, NULL, false), TG_EDTYPE, "float", z);
    OK(tg_tensor_zeros(&e, TG_F32, 2, (int64_t[]){0, 3}));
    th_expect_refused(tg_vector_norm(&z, e, INFINITY, 1, (int[]){0}, false), TG_ESHAPE,
                      "extent 0", z);
    th_expect_refused(tg_vector_norm(&z, e, -INFINITY, 0, NULL, false), TG_ESHAPE, "empty", z);
    th_expect_refused(tg_vector_norm(&z, e, -0.5, 1, (int[]){0}, false), TG_ESHAPE, "extent 0",
                      z);
    th_release_all(3, (tg_tensor *[]){x, xi, e});
}
