/* tests/test_stats_var.c - var and std beyond the PyTorch goldens of
 * test_stats.c: gradcheck and gradgradcheck in f64, the zero gradient of a
 * constant row, no degrees of freedom and empty inputs, accuracy far from
 * 0, autocast, and the errors that name the argument. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

typedef struct {
    bool std, whole;
    int ndims;
    int dims[2];
    int64_t correction;
    bool keepdim;
} var_user;

/* var or std of x, times x (nonlinear beyond the op). */
static int g_var(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    const var_user *u = user;
    tg_tensor *y = NULL;
    int rc;
    if (u->whole) rc = (u->std ? tg_std : tg_var)(&y, in[0], u->correction);
    else rc = (u->std ? tg_std_dims : tg_var_dims)(&y, in[0], u->ndims, u->dims, u->correction,
                                                  u->keepdim);
    if (rc >= 0) rc = tg_mul(out, y, in[0]);
    tg_tensor_release(y);
    return rc;
}

Test(stats_var, var_std_gradcheck_and_gradgradcheck_in_f64)
{
    tg_tensor *x = th_seq(TG_F64, 3, (int64_t[]){3, 4, 2}, -1.0, 2.0);
    OK(tg_tensor_set_requires_grad(x, true));
    const var_user us[] = {{false, false, 1, {1}, 1, true}, {true, false, 1, {1}, 1, true},
                           {false, false, 2, {0, -1}, 0, true}, {true, false, 2, {2, 0}, 2, true},
                           {false, true, 0, {0}, 1, false}, {true, true, 0, {0}, 0, false}};
    for (size_t k = 0; k < sizeof us / sizeof us[0]; k++) {
        var_user u = us[k];
        cr_assert(eq(int, tg_gradcheck(g_var, &u, 1, &x, NULL), TG_OK), "case %zu: %s", k,
                  tg_error_message());
        cr_assert(eq(int, tg_gradgradcheck(g_var, &u, 1, &x, NULL), TG_OK), "case %zu: %s", k,
                  tg_error_message());
    }
    tg_tensor_release(x);
}

/* A constant row: var and std 0, and gradient 0 for both (torch's std
 * masks the 0 / 0 of g / (2 std) * (x - mean)). */
Test(stats_var, constant_rows_have_zero_gradient)
{
    const double v[6] = {2, 2, 2, 1, 2, 4};
    for (int s = 0; s < 2; s++) {
        tg_tensor *x = th_tensor_from(TG_F64, 2, (int64_t[]){2, 3}, v), *y = NULL, *t = NULL;
        OK(tg_tensor_set_requires_grad(x, true));
        OK((s ? tg_std_dims : tg_var_dims)(&y, x, 1, (int[]){1}, 1, false));
        cr_assert(eq(dbl, th_at(y, 0), 0.0));
        cr_assert(epsilon_eq(dbl, th_at(y, 1), s ? sqrt(7.0 / 3) : 7.0 / 3, 1e-15));
        OK(tg_sum(&t, y));
        OK(tg_backward(t, NULL, NULL));
        const tg_tensor *g = tg_tensor_grad(x);
        for (int k = 0; k < 3; k++)
            cr_assert(eq(dbl, th_at(g, k), 0.0), "%s [%d]: %g", s ? "std" : "var", k, th_at(g, k));
        /* var: dx = 2 (x - mean) / 2 = x - 7/3 */
        for (int k = 3; k < 6 && !s; k++)
            cr_assert(epsilon_eq(dbl, th_at(g, k), v[k] - 7.0 / 3, 1e-15), "var [%d]", k);
        th_release_all(3, (tg_tensor *[]){x, y, t});
    }
}

/* N - correction <= 0: inf, or NaN for equal elements; no elements: NaN,
 * and a reduced dim of extent 0 is no error. */
Test(stats_var, var_without_degrees_of_freedom_and_empty)
{
    const double v[4] = {1, 3, 5, 5};
    tg_tensor *x = th_tensor_from(TG_F32, 2, (int64_t[]){2, 2}, v), *y = NULL;
    OK(tg_var_dims(&y, x, 1, (int[]){1}, 2, false));
    cr_assert(isinf(th_at(y, 0)) && th_at(y, 0) > 0, "%g", th_at(y, 0));
    cr_assert(isnan(th_at(y, 1)));
    tg_tensor_release(y);
    OK(tg_std(&y, x, 7));
    cr_assert(isinf(th_at(y, 0)));
    th_release_all(2, (tg_tensor *[]){x, y});
    OK(tg_tensor_zeros(&x, TG_F64, 2, (int64_t[]){3, 0}));
    OK(tg_var_dims(&y, x, 1, (int[]){1}, 1, true));
    th_expect_shape(y, 2, (int64_t[]){3, 1});
    for (int k = 0; k < 3; k++) cr_assert(isnan(th_at(y, k)));
    tg_tensor_release(y);
    OK(tg_std_dims(&y, x, 1, (int[]){0}, 0, false));
    th_expect_shape(y, 1, (int64_t[]){0});
    th_release_all(2, (tg_tensor *[]){x, y});
}

/* Values 1e8 apart from their spread: the two-pass formula in double keeps
 * the variance to the last bits (sum of squares minus square of sums
 * would lose every digit). */
Test(stats_var, var_is_accurate_far_from_zero)
{
    enum { N = 1000 };
    double v[N];
    long double mean = 0, m2 = 0;
    for (int k = 0; k < N; k++) {
        v[k] = 1e8 + (k % 7) * 0.1 + (k % 13) * 1e-3;
        mean += v[k];
    }
    mean /= N;
    for (int k = 0; k < N; k++) m2 += (v[k] - mean) * (v[k] - mean);
    tg_tensor *x = th_tensor_from(TG_F64, 1, (int64_t[]){N}, v), *y = NULL;
    OK(tg_var(&y, x, 1));
    const long double want = m2 / (N - 1);
    cr_assert(fabsl(th_at(y, 0) - want) <= 1e-15L * want, "%.17g, want %.17Lg", th_at(y, 0), want);
    th_release_all(2, (tg_tensor *[]){x, y});
}

/* The FP32 policy: a bf16 x gives f32 inside autocast, bf16 outside. */
Test(stats_var, var_autocast_computes_in_f32)
{
    tg_tensor *x = th_rand_uniform(TG_BF16, 2, (int64_t[]){2, 3}, 5), *y = NULL;
    OK(tg_std_dims(&y, x, 1, (int[]){1}, 1, false));
    cr_assert(eq(int, tg_tensor_dtype(y), TG_BF16));
    tg_tensor_release(y);
    OK(tg_autocast_begin(TG_BF16));
    OK(tg_var(&y, x, 1));
    OK(tg_autocast_end());
    cr_assert(eq(int, tg_tensor_dtype(y), TG_F32));
    th_release_all(2, (tg_tensor *[]){x, y});
}

Test(stats_var, var_bad_arguments_name_the_rule)
{
    tg_tensor *x = th_rand_uniform(TG_F32, 2, (int64_t[]){2, 3}, 1), *y = NULL;
    tg_tensor *xi = th_tensor_from(TG_I32, 1, (int64_t[]){3}, (double[]){0, 1, 2});
    cr_assert(eq(int, tg_var(&y, xi, 1), TG_EDTYPE));
    th_expect_in(tg_error_message(), "var: x has dtype i32; float dtypes only");
    cr_assert(eq(int, tg_std_dims(&y, x, 1, (int[]){2}, 1, false), TG_EINVAL));
    th_expect_in(tg_error_message(), "std: dims[0]=2 must be in [-2, 2) for a 2-d tensor");
    cr_assert(eq(int, tg_var_dims(&y, x, 2, (int[]){0, 0}, 1, false), TG_EINVAL));
    th_expect_in(tg_error_message(), "var: dims[1]=0 names dim 0 again");
    cr_assert(eq(int, tg_std_dims(&y, x, -1, NULL, 1, false), TG_EINVAL));
    th_expect_in(tg_error_message(), "std: ndims=-1 must be in [0, 8]");
    cr_assert(eq(int, tg_std(&y, NULL, 1), TG_EINVAL));
    th_expect_in(tg_error_message(), "std: x must not be NULL");
    cr_assert(eq(int, tg_var(NULL, x, 1), TG_EINVAL));
    cr_assert(y == NULL, "an error left a result");
    th_release_all(2, (tg_tensor *[]){x, xi});
}
