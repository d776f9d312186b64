/* tests/test_elu.c - tg_elu and the ELU module: against PyTorch's F.elu and
 * its gradient (f32, f64, bf16; three alphas; +-0, +-inf, NaN), small
 * negative inputs kept, derivatives to second order by finite
 * differences, the module's forward, and the refusals.
 * Goldens: scripts/make_elu_goldens.py. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

/* y and dx within a few units in the last place of torch's: its f32 kernel
 * takes exp(x) - 1 in f32 and its gradient multiplies in another order
 * (bf16: one unit, from rounding the same f32 value differently by a hair).
 * The positive side, the specials and +-0 are exact. */
Test(elu, every_case_matches_torch)
{
    tg_st_file *f = th_golden_load("elu.safetensors");
    const int n = atoi(tg_st_meta_get(f, "cases"));
    int per_dtype[3] = {0};
    for (int i = 0; i < n; i++) {
        char c[16];
        snprintf(c, sizeof c, "case%d", i);
        const char *dt = th_golden_meta(f, c, "dtype");
        const double alpha = atof(th_golden_meta(f, c, "alpha"));
        tg_tensor *x = th_leaf_clone(th_golden_get(f, c, "x")), *y = NULL, *p = NULL, *l = NULL;
        OK(tg_elu(&y, x, alpha));
        OK(tg_mul(&p, y, (tg_tensor *)th_golden_get(f, c, "g")));
        OK(tg_sum(&l, p));
        OK(tg_backward(l, NULL, NULL));
        const double rtol = !strcmp(dt, "f64") ? 1e-15 : !strcmp(dt, "f32") ? 1e-6 : 1.0 / 128;
        const tg_tensor *want_y = th_golden_get(f, c, "y"), *want_dx = th_golden_get(f, c, "dx");
        th_expect_close(c, y, want_y, rtol);
        th_expect_close(c, tg_tensor_grad(x), want_dx, rtol);
        for (int64_t k = 0; k < tg_tensor_numel(x); k++) {
            const double xk = th_at(x, k), yk = th_at(y, k), wk = th_at(want_y, k);
            if (!(xk < 0) || isinf(xk) || xk == -100.0)   /* x >= 0, NaN, -inf, -100 */
                cr_assert(yk == wk || (isnan(yk) && isnan(wk)), "%s: x[%lld] = %g gives %g, "
                          "torch %g", c, (long long)k, xk, yk, wk);
        }
        per_dtype[!strcmp(dt, "f64") ? 0 : !strcmp(dt, "f32") ? 1 : 2]++;
        th_release_all(4, (tg_tensor *[]){x, y, p, l});
    }
    for (int d = 0; d < 3; d++) cr_assert(per_dtype[d] >= 3, "dtype %d: %d cases", d, per_dtype[d]);
    tg_st_free(f);
}

/* expm1 keeps a small negative x (f32 elu(-1e-10) = -1e-10 with alpha 1,
 * where exp(x) - 1 in f32 cancels to 0); elu(-0.0) is +0.0 as torch's;
 * the gradient at 0 is alpha, as torch's. */
Test(elu, small_inputs_and_zero)
{
    tg_tensor *x = th_vec(TG_F32, 3, (double[]){-1e-10, -0.0, 0.0}, "x", true);
    tg_tensor *y = NULL, *l = NULL;
    OK(tg_elu(&y, x, 1.5));
    cr_assert(th_close(th_at(y, 0), -1.5e-10, 1e-6, 0), "%g", th_at(y, 0));
    cr_assert(th_at(y, 1) == 0.0 && !signbit(th_at(y, 1)));
    OK(tg_sum(&l, y));
    OK(tg_backward(l, NULL, NULL));
    cr_assert(eq(dbl, th_at(tg_tensor_grad(x), 1), 1.5));
    cr_assert(eq(dbl, th_at(tg_tensor_grad(x), 2), 1.5));
    th_release_all(3, (tg_tensor *[]){x, y, l});
}

static int elu_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    (void)user;
    return tg_elu(out, in[0], 0.7);
}

Test(elu, gradcheck_and_gradgradcheck)
{
    uint64_t s = 43;
    tg_tensor *x = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){3, 4}, 0.1, 2);
    for (int64_t i = 0; i < tg_tensor_numel(x); i += 2) OK(tg_tensor_set_flat(x, i, -th_at(x, i)));
    OK(tg_tensor_set_requires_grad(x, true));
    tg_gradcheck_opts o = TG_GRADCHECK_OPTS_INIT;
    cr_assert(eq(int, tg_gradcheck(elu_fn, NULL, 1, &x, &o), TG_OK), "%s", tg_error_message());
    cr_assert(eq(int, tg_gradgradcheck(elu_fn, NULL, 1, &x, &o), TG_OK), "%s",
              tg_error_message());
    tg_tensor_release(x);
}

Test(elu, module_forward_and_refusals)
{
    tg_module *m = NULL;
    OK(tg_nn_elu_new(&m, 0.5));
    cr_assert_str_eq(tg_module_type_name(m), "ELU");
    cr_assert(eq(i64, tg_module_parameter_numel(m), 0));
    double alpha = 0;
    OK(tg_nn_elu_alpha(m, &alpha));
    cr_assert(eq(dbl, alpha, 0.5));
    uint64_t s = 47;
    tg_tensor *x = th_rand_tensor(&s, TG_F32, 2, (int64_t[]){4, 5}, -3, 3), *y = NULL;
    tg_tensor *want = NULL;
    OK(tg_module_forward(m, &y, x));
    OK(tg_elu(&want, x, 0.5));
    th_expect_same_bits("module", x, y, want);
    tg_module *relu = NULL;
    OK(tg_nn_activation_new(&relu, TG_ACT_RELU, 0));
    th_expect_refused(tg_nn_elu_alpha(relu, &alpha), TG_EINVAL, "not ELU", NULL);
    tg_module *bad = NULL;
    th_expect_refused(tg_nn_elu_new(&bad, INFINITY), TG_EINVAL, "alpha=inf", NULL);
    cr_assert_null(bad);
    tg_tensor *z = NULL, *xi = NULL;
    th_expect_refused(tg_elu(&z, x, NAN), TG_EINVAL, "alpha=nan", z);
    th_expect_refused(tg_elu(&z, NULL, 1.0), TG_EINVAL, "elu", z);
    OK(tg_tensor_to_dtype(&xi, x, TG_I64));
    th_expect_refused(tg_elu(&z, xi, 1.0), TG_EDTYPE, "elu", z);
    th_release_all(4, (tg_tensor *[]){x, y, want, xi});
    tg_module_release(m);
    tg_module_release(relu);
}
