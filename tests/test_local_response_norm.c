/* tests/test_local_response_norm.c - tg_local_response_norm
 * (F.local_response_norm) and nn.LocalResponseNorm: values and gradients
 * against PyTorch (3-d to 5-d inputs, torch's defaults, size above C, size
 * 1, an even size), the window rule by hand, gradcheck and gradgradcheck in
 * f64, an empty input, bf16, the module, ONNX's refusal of an empty input
 * and the refusals.
 * Goldens: scripts/make_nnsmall_goldens.py (tests/golden/nnsmall.safetensors). */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

typedef struct lrn_args {
    int64_t size;
    double alpha, beta, k;
} lrn_args;

static lrn_args args_of(const tg_st_file *f, const char *c)
{
    return (lrn_args){atoll(th_golden_meta(f, c, "size")), atof(th_golden_meta(f, c, "alpha")),
                      atof(th_golden_meta(f, c, "beta")), atof(th_golden_meta(f, c, "k"))};
}

Test(local_response_norm, values_and_gradients_match_torch)
{
    tg_st_file *f = th_golden_load("nnsmall.safetensors");
    const int n = atoi(tg_st_meta_get(f, "lrn.cases"));
    cr_assert(n >= 5, "only %d cases", n);
    for (int i = 0; i < n; i++) {
        char c[32];
        snprintf(c, sizeof c, "lrn%d", i);
        const lrn_args a = args_of(f, c);
        tg_tensor *x = th_leaf_clone(th_golden_get(f, c, "x")), *y = NULL;
        OK(tg_local_response_norm(&y, x, a.size, a.alpha, a.beta, a.k));
        th_expect_close(c, y, th_golden_get(f, c, "y"), 1e-12);
        th_backward_with(y, th_golden_get(f, c, "gy"));
        th_expect_close("gx", tg_tensor_grad(x), th_golden_get(f, c, "gx"), 1e-12);
        th_release_all(2, (tg_tensor *[]){x, y});
    }
    tg_st_free(f);
}

/* y[n, c, l] = x / (k + alpha / size * sum of x[n, c', l]^2 over
 * c' in [c - size/2, c + (size-1)/2] inside [0, C))^beta, in f32. */
Test(local_response_norm, window_rule_by_hand)
{
    const int64_t N = 2, C = 7, L = 3;
    const double alpha = 0.7, beta = 0.6, k = 1.5;
    /* sizes to 16 cut the window's sides to C - 1 = 6 channels; so does
     * the largest size, whose padding stays that small */
    const int64_t sizes[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 14, 16, INT32_MAX};
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        const int64_t size = sizes[si];
        tg_tensor *x = th_rand_uniform(TG_F32, 3, (int64_t[]){N, C, L}, 7), *y = NULL;
        OK(tg_local_response_norm(&y, x, size, alpha, beta, k));
        cr_assert(eq(int, tg_tensor_dtype(y), TG_F32));
        for (int64_t n = 0; n < N; n++)
            for (int64_t c = 0; c < C; c++)
                for (int64_t l = 0; l < L; l++) {
                    double s = 0;
                    for (int64_t q = 0; q < C; q++)
                        if (q >= c - size / 2 && q <= c + (size - 1) / 2)
                            s += pow(th_get(x, (int64_t[]){n, q, l}), 2);
                    const double want = th_get(x, (int64_t[]){n, c, l}) /
                                        pow(k + alpha * s / (double)size, beta);
                    const double got = th_get(y, (int64_t[]){n, c, l});
                    cr_assert(th_close(got, want, 1e-5, 1e-6), "size %lld at (%lld, %lld, %lld)"
                              ": %g, want %g", (long long)size, (long long)n, (long long)c,
                              (long long)l, got, want);
                }
        th_release_all(2, (tg_tensor *[]){x, y});
    }
}

static int lrn_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    const lrn_args *a = user;
    return tg_local_response_norm(out, in[0], a->size, a->alpha, a->beta, a->k);
}

Test(local_response_norm, first_and_second_derivatives_by_finite_differences)
{
    const lrn_args cases[3] = {{3, 0.9, 0.75, 1.0}, {2, 2.0, 1.5, 0.5}, {5, 0.3, 0.5, 2.0}};
    const int64_t shapes[3][4] = {{2, 4, 3}, {1, 3, 2, 2}, {2, 3, 2}};
    const int nds[3] = {3, 4, 3};
    for (int i = 0; i < 3; i++) {
        tg_tensor *x = th_rand_uniform(TG_F64, nds[i], shapes[i], 11 + (uint64_t)i);
        OK(tg_tensor_set_requires_grad(x, true));
        th_expect_gradchecks(lrn_fn, (void *)&cases[i], 1, (tg_tensor *[]){x}, "case %d", i);
        tg_tensor_release(x);
    }
}

/* An empty x is returned as it is (torch's early return). */
Test(local_response_norm, empty_input_is_returned)
{
    tg_tensor *x = NULL, *y = NULL;
    OK(tg_tensor_zeros(&x, TG_F32, 3, (int64_t[]){0, 3, 4}));
    OK(tg_local_response_norm(&y, x, 3, 1e-4, 0.75, 1.0));
    cr_assert(y == x);
    th_release_all(2, (tg_tensor *[]){x, y});
}

/* bf16 x: a bf16 result within bf16 rounding of the f32 computation. */
Test(local_response_norm, bf16_is_close_to_f32)
{
    tg_tensor *x = th_rand_uniform(TG_F32, 4, (int64_t[]){2, 5, 3, 2}, 3), *h = NULL, *hf = NULL;
    OK(tg_to_dtype(&h, x, TG_BF16));
    OK(tg_to_dtype(&hf, h, TG_F32));
    tg_tensor *y = NULL, *yf = NULL, *y32 = NULL;
    OK(tg_local_response_norm(&y, h, 3, 0.5, 0.75, 1.0));
    cr_assert(eq(int, tg_tensor_dtype(y), TG_BF16));
    OK(tg_local_response_norm(&yf, hf, 3, 0.5, 0.75, 1.0));
    OK(tg_to_dtype(&y32, y, TG_F32));
    th_expect_close_scaled("bf16", y32, yf, 2e-2);
    th_release_all(6, (tg_tensor *[]){x, h, hf, y, yf, y32});
}

/* Under a bf16 autocast scope pow_scalar's FP32 policy gives an f32
 * result, as torch's for inputs of 4 or more dims (docs/autograd.md). */
Test(local_response_norm, bf16_under_autocast_gives_f32)
{
    tg_tensor *x = th_rand_uniform(TG_F32, 4, (int64_t[]){2, 5, 3, 2}, 3), *h = NULL, *y = NULL;
    OK(tg_to_dtype(&h, x, TG_BF16));
    OK(tg_autocast_begin(TG_BF16));
    const int rc = tg_local_response_norm(&y, h, 3, 0.5, 0.75, 1.0);
    OK(tg_autocast_end());
    OK(rc);
    cr_assert(eq(int, tg_tensor_dtype(y), TG_F32));
    th_release_all(3, (tg_tensor *[]){x, h, y});
}

Test(local_response_norm, module_runs_the_function)
{
    tg_module *m = NULL, *other = NULL;
    OK(tg_nn_local_response_norm_new(&m, 4, 0.5, 0.6, 2.0));
    cr_assert(eq(str, (char *)tg_module_type_name(m), "LocalResponseNorm"));
    cr_assert(eq(int, tg_module_state_count(m), 0));
    int64_t size = 0;
    double alpha = 0, beta = 0, k = 0;
    OK(tg_nn_local_response_norm_params(m, &size, &alpha, &beta, &k));
    cr_assert(size == 4 && alpha == 0.5 && beta == 0.6 && k == 2.0);
    OK(tg_nn_local_response_norm_params(m, NULL, NULL, NULL, NULL));
    tg_st_file *f = th_golden_load("nnsmall.safetensors");
    tg_tensor *x = (tg_tensor *)th_golden_get(f, "lrn1", "x"), *y = NULL;   /* (4, 0.5, 0.6, 2) */
    OK(tg_module_forward(m, &y, x));
    th_expect_close("module", y, th_golden_get(f, "lrn1", "y"), 1e-12);
    tg_tensor_release(y);
    tg_st_free(f);
    OK(tg_nn_flatten_new(&other, 1, -1));
    cr_assert(eq(int, tg_nn_local_response_norm_params(other, &size, NULL, NULL, NULL),
                 TG_EINVAL));
    th_expect_in(tg_error_message(),
                 "nn_local_response_norm_params: m is a Flatten module, not LocalResponseNorm");
    cr_assert(eq(int, tg_nn_local_response_norm_params(NULL, &size, NULL, NULL, NULL),
                 TG_EINVAL));
    tg_module *bad = NULL;
    cr_assert(eq(int, tg_nn_local_response_norm_new(&bad, 0, 1e-4, 0.75, 1.0), TG_EINVAL));
    th_expect_in(tg_error_message(), "nn_local_response_norm_new: size=0 must be in [1, 2^31 - 1]");
    cr_assert(eq(int, tg_nn_local_response_norm_new(&bad, 2, NAN, 0.75, 1.0), TG_EINVAL));
    th_expect_in(tg_error_message(), "alpha, beta and k must not be NaN");
    cr_assert(eq(int, tg_nn_local_response_norm_new(NULL, 2, 1e-4, 0.75, 1.0), TG_EINVAL));
    cr_assert(bad == NULL);
    tg_module_release(m);
    tg_module_release(other);
}

/* The exporter writes the module (tests/test_onnx_modules.c) but not on
 * an empty input, which ONNX Runtime's LRN does not take: TG_EUNSUPPORTED
 * naming it, no file written. */
Test(local_response_norm, onnx_export_refuses_it_cleanly)
{
    th_tmp_dir_make("lrn_onnx");
    tg_module *seq = NULL, *m = NULL;
    OK(tg_nn_sequential_new(&seq));
    OK(tg_nn_local_response_norm_new(&m, 3, 1e-4, 0.75, 1.0));
    OK(tg_nn_sequential_append(seq, m));
    tg_tensor *x = NULL;
    OK(tg_tensor_zeros(&x, TG_F32, 3, (int64_t[]){2, 4, 0}));
    char path[512];
    th_tmp_path(path, sizeof path, "lrn.onnx");
    cr_assert(eq(int, tg_onnx_export(seq, x, path, NULL), TG_EUNSUPPORTED));
    if (tg_onnx_available())
        th_expect_in(tg_error_message(), "module '0' (LocalResponseNorm) runs on an empty input");
    cr_assert(th_exists(path) == false);
    tg_tensor_release(x);
    tg_module_release(seq);
    th_tmp_dir_remove();
}

Test(local_response_norm, refusals_name_the_rule)
{
    tg_tensor *x = th_rand_uniform(TG_F32, 3, (int64_t[]){2, 3, 4}, 1);
    tg_tensor *x2 = th_rand_uniform(TG_F32, 2, (int64_t[]){2, 3}, 2), *xi = NULL;
    OK(tg_tensor_to_dtype(&xi, x, TG_I32));
    th_expect_refused_clean(tg_local_response_norm(NULL, x, 2, 1e-4, 0.75, 1), TG_EINVAL,
                            "local_response_norm: out must not be NULL");
    th_expect_refused_clean(tg_local_response_norm(out_, NULL, 2, 1e-4, 0.75, 1), TG_EINVAL,
                            "local_response_norm: x must not be NULL");
    th_expect_refused_clean(tg_local_response_norm(out_, xi, 2, 1e-4, 0.75, 1), TG_EDTYPE,
                            "local_response_norm: x has dtype i32; float dtypes only");
    th_expect_refused_clean(tg_local_response_norm(out_, x2, 2, 1e-4, 0.75, 1), TG_ESHAPE,
                            "local_response_norm: x has 2 dims; it must have at least 3 "
                            "(N, C, *), as torch's");
    th_expect_refused_clean(tg_local_response_norm(out_, x, 0, 1e-4, 0.75, 1), TG_EINVAL,
                            "local_response_norm: size=0 must be in [1, 2^31 - 1]");
    th_expect_refused_clean(tg_local_response_norm(out_, x, -1, 1e-4, 0.75, 1), TG_EINVAL,
                            "local_response_norm: size=-1 must be in [1, 2^31 - 1]");
    th_expect_refused_clean(tg_local_response_norm(out_, x, 2, 1e-4, NAN, 1), TG_EINVAL,
                            "local_response_norm: alpha, beta and k must not be NaN");
    th_release_all(3, (tg_tensor *[]){x, x2, xi});
}
