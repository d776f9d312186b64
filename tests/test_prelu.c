/* tests/test_prelu.c - tg_prelu and the PReLU module: against PyTorch's
 * F.prelu and its gradients (per-channel and single weights, 1-d to 3-d
 * images, (N, C), 1-d and 0-d x; f32, f64, bf16, a bf16 x with an f32
 * weight; +-0, +-inf, NaN), the gradient at 0, derivatives to second order
 * by finite differences, a weight of another dtype, the module's parameter
 * and forward, and the refusals.
 * Goldens: scripts/make_prelu_goldens.py. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

/* y, dx and dw of sum(g * prelu(x, w)). */
static void run(tg_tensor *x, tg_tensor *w, const tg_tensor *g, tg_tensor **y)
{
    tg_tensor *p = NULL, *l = NULL;
    OK(tg_prelu(y, x, w));
    OK(tg_mul(&p, *y, (tg_tensor *)g));
    OK(tg_sum(&l, p));
    OK(tg_backward(l, NULL, NULL));
    th_release_all(2, (tg_tensor *[]){p, l});
}

/* y and dx bit for bit (one product, rounded once, or g itself); dw is a
 * sum in another order than torch's: within a few units of its last place
 * (bf16: one unit, from the sum rounded once against torch's f32 sum). */
Test(prelu, every_case_matches_torch)
{
    tg_st_file *f = th_golden_load("prelu.safetensors");
    const int n = atoi(tg_st_meta_get(f, "cases"));
    int per_dtype[4] = {0};   /* f64, f32, bf16, bf16 with an f32 weight */
    for (int i = 0; i < n; i++) {
        char c[16];
        snprintf(c, sizeof c, "case%d", i);
        const char *dt = th_golden_meta(f, c, "dtype");
        tg_tensor *x = th_leaf_clone(th_golden_get(f, c, "x"));
        tg_tensor *w = th_leaf_clone(th_golden_get(f, c, "w"));
        tg_tensor *y = NULL;
        run(x, w, th_golden_get(f, c, "g"), &y);
        th_expect_same_bits(c, x, y, th_golden_get(f, c, "y"));
        th_expect_same_bits(c, x, tg_tensor_grad(x), th_golden_get(f, c, "dx"));
        const double rtol = !strcmp(dt, "f64") ? 1e-13 : !strcmp(dt, "f32") ? 1e-5 : 1.0 / 128;
        th_expect_close_scaled(c, tg_tensor_grad(w), th_golden_get(f, c, "dw"), rtol);
        per_dtype[!strcmp(dt, "f64") ? 0 : !strcmp(dt, "f32") ? 1 : !strcmp(dt, "bf16") ? 2 : 3]++;
        th_release_all(3, (tg_tensor *[]){x, w, y});
    }
    for (int d = 0; d < 4; d++)
        cr_assert(per_dtype[d] >= (d < 3 ? 7 : 2), "dtype %d: %d cases", d, per_dtype[d]);
    tg_st_free(f);
}

/* At x = 0 (and -0) the gradient is g * w, as torch's prelu_backward, and
 * the weight's gradient counts those elements (their x is 0). */
Test(prelu, the_gradient_at_zero_is_the_weights)
{
    const double xs[4] = {0.0, -0.0, 2.0, -3.0};
    tg_tensor *x = th_vec(TG_F64, 4, xs, "x", true);
    tg_tensor *w = th_vec(TG_F64, 1, (double[]){0.25}, "w", true);
    tg_tensor *g = th_vec(TG_F64, 4, (double[]){1, 1, 1, 1}, "g", false), *y = NULL;
    run(x, w, g, &y);
    const double want[4] = {0.25, 0.25, 1.0, 0.25};
    for (int i = 0; i < 4; i++) cr_assert(eq(dbl, th_at(tg_tensor_grad(x), i), want[i]), "%d", i);
    cr_assert(eq(dbl, th_at(tg_tensor_grad(w), 0), -3.0));
    cr_assert(signbit(th_at(y, 1)), "prelu(-0) keeps the sign");
    th_release_all(4, (tg_tensor *[]){x, w, g, y});
}

static int prelu_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    (void)user;
    return tg_prelu(out, in[0], in[1]);
}

/* First and second derivatives against finite differences, per channel and
 * with one weight (x kept away from 0, where prelu has its kink). */
Test(prelu, gradcheck_and_gradgradcheck)
{
    const int64_t shapes[2][4] = {{2, 3, 2, 2}, {2, 3, 2, 2}};
    const int64_t nw[2] = {3, 1};
    for (int c = 0; c < 2; c++) {
        uint64_t s = 77 + (uint64_t)c;
        tg_tensor *x = th_rand_tensor(&s, TG_F64, 4, shapes[c], 0.2, 2.0);
        for (int64_t i = 0; i < tg_tensor_numel(x); i += 2)
            OK(tg_tensor_set_flat(x, i, -th_at(x, i)));
        tg_tensor *w = th_rand_tensor(&s, TG_F64, 1, &nw[c], -0.5, 0.8);
        OK(tg_tensor_set_requires_grad(x, true));
        OK(tg_tensor_set_requires_grad(w, true));
        tg_gradcheck_opts o = TG_GRADCHECK_OPTS_INIT;
        tg_tensor *in[2] = {x, w};
        cr_assert(eq(int, tg_gradcheck(prelu_fn, NULL, 2, in, &o), TG_OK), "%s",
                  tg_error_message());
        cr_assert(eq(int, tg_gradgradcheck(prelu_fn, NULL, 2, in, &o), TG_OK), "%s",
                  tg_error_message());
        th_release_all(2, in);
    }
}

/* The result has x's dtype: an f32 weight with a bf16 x is rounded to bf16
 * first, as torch does (its bf16 cases with an f32 weight are in the
 * goldens); the weight's gradient comes back in f32.  Also under autocast,
 * where the op keeps its inputs' dtypes. */
Test(prelu, a_weight_of_another_dtype_follows_x)
{
    uint64_t s = 5;
    tg_tensor *x32 = th_rand_tensor(&s, TG_F32, 3, (int64_t[]){2, 3, 4}, -2, 2), *x = NULL;
    OK(tg_tensor_to_dtype(&x, x32, TG_BF16));
    OK(tg_tensor_set_requires_grad(x, true));
    tg_tensor *w = th_vec(TG_F32, 3, (double[]){0.3, -0.2, 0.7}, "w", true), *y = NULL, *l = NULL;
    tg_tensor *wb = NULL, *want = NULL;
    OK(tg_tensor_to_dtype(&wb, w, TG_BF16));
    OK(tg_prelu(&want, x, wb));
    for (int amp = 0; amp < 2; amp++) {
        if (amp) OK(tg_autocast_begin(TG_BF16));
        OK(tg_prelu(&y, x, w));
        if (amp) OK(tg_autocast_end());
        cr_assert(eq(int, tg_tensor_dtype(y), TG_BF16));
        th_expect_same_bits("y", x, y, want);
        OK(tg_sum(&l, y));
        OK(tg_backward(l, NULL, NULL));
        cr_assert(eq(int, tg_tensor_dtype(tg_tensor_grad(x)), TG_BF16));
        cr_assert(eq(int, tg_tensor_dtype(tg_tensor_grad(w)), TG_F32));
        th_release_all(2, (tg_tensor *[]){y, l});
    }
    th_release_all(5, (tg_tensor *[]){x32, x, w, wb, want});
}

/* nn.PReLU(num_parameters, init): one parameter "weight" (num_parameters)
 * filled with init; its forward is tg_prelu with it. */
Test(prelu, module_has_torchs_weight_and_forward)
{
    tg_module *m = NULL;
    OK(tg_nn_prelu_new(&m, 3, 0.25));
    cr_assert_str_eq(tg_module_type_name(m), "PReLU");
    tg_tensor *w = tg_module_find(m, "weight");
    cr_assert_not_null(w);
    th_expect_shape(w, 1, (int64_t[]){3});
    for (int i = 0; i < 3; i++) cr_assert(eq(dbl, th_at(w, i), 0.25));
    cr_assert(tg_tensor_requires_grad(w));
    cr_assert(eq(i64, tg_module_parameter_numel(m), 3));
    uint64_t s = 9;
    tg_tensor *x = th_rand_tensor(&s, TG_F32, 4, (int64_t[]){2, 3, 2, 2}, -1, 1);
    tg_tensor *y = NULL, *want = NULL;
    OK(tg_module_forward(m, &y, x));
    OK(tg_prelu(&want, x, w));
    th_expect_same_bits("module", x, y, want);
    th_release_all(3, (tg_tensor *[]){x, y, want});
    tg_module_release(m);
    tg_module *one = NULL;
    OK(tg_nn_prelu_new(&one, 1, -0.5));
    cr_assert(eq(dbl, th_at(tg_module_find(one, "weight"), 0), -0.5));
    tg_module_release(one);
}

Test(prelu, refusals_name_the_argument)
{
    uint64_t s = 3;
    tg_tensor *x = th_rand_tensor(&s, TG_F32, 3, (int64_t[]){2, 3, 4}, -1, 1), *y = NULL;
    tg_tensor *w2 = th_rand_tensor(&s, TG_F32, 1, (int64_t[]){2}, 0, 1);
    tg_tensor *wm = th_rand_tensor(&s, TG_F32, 2, (int64_t[]){3, 1}, 0, 1);
    tg_tensor *w0 = th_rand_tensor(&s, TG_F32, 0, NULL, 0, 1), *xi = NULL;
    th_expect_refused(tg_prelu(&y, x, w2), TG_ESHAPE, "one per channel (3, dim 1", y);
    th_expect_refused(tg_prelu(&y, x, wm), TG_ESHAPE, "must be 1-d", y);
    th_expect_refused(tg_prelu(&y, x, w0), TG_ESHAPE, "must be 1-d", y);
    th_expect_refused(tg_prelu(&y, NULL, w2), TG_EINVAL, "must not be NULL", y);
    th_expect_refused(tg_prelu(&y, x, NULL), TG_EINVAL, "must not be NULL", y);
    cr_assert(eq(int, tg_prelu(NULL, x, w2), TG_EINVAL));
    OK(tg_tensor_to_dtype(&xi, x, TG_I64));
    tg_tensor *w1 = th_rand_tensor(&s, TG_I64, 1, (int64_t[]){1}, 0, 3);
    th_expect_refused(tg_prelu(&y, xi, w1), TG_EDTYPE, "prelu", y);
    tg_module *m = NULL;
    th_expect_refused(tg_nn_prelu_new(&m, 0, 0.25), TG_EINVAL, "num_parameters=0", NULL);
    cr_assert_null(m);
    th_expect_refused(tg_nn_prelu_new(&m, 1, NAN), TG_EINVAL, "init", NULL);
    cr_assert(eq(int, tg_nn_prelu_new(NULL, 1, 0.25), TG_EINVAL));
    th_release_all(7, (tg_tensor *[]){x, w2, wm, w0, xi, w1, y});
}
