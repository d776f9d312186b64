/* tests/test_distance_modules.c - nn.CosineSimilarity and
 * nn.PairwiseDistance: their forwards of two inputs against PyTorch's
 * modules (default and other dims, eps that decides, p = 1 and 3,
 * keepdim), their options, the number of inputs they take, gradients
 * through the module equal to the function's, and the refusals.  (The
 * functions themselves: test_losses2.c.)
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

static void run_pair(tg_module *m, const tg_st_file *f, const char *c)
{
    tg_tensor *xs[2] = {(tg_tensor *)th_golden_get(f, c, "x1"),
                        (tg_tensor *)th_golden_get(f, c, "x2")};
    tg_tensor *y = NULL;
    OK(tg_module_forward_n(m, &y, 2, xs));
    th_expect_close(c, y, th_golden_get(f, c, "y"), 1e-12);
    tg_tensor_release(y);
}

Test(distance_modules, cosine_similarity_matches_torch)
{
    tg_st_file *f = th_golden_load("nnsmall.safetensors");
    const int n = atoi(tg_st_meta_get(f, "module.cos.cases"));
    cr_assert(n >= 3);
    for (int i = 0; i < n; i++) {
        char c[32];
        snprintf(c, sizeof c, "module.cos%d", i);
        const int dim = atoi(th_golden_meta(f, c, "dim"));
        const double eps = atof(th_golden_meta(f, c, "eps"));
        tg_module *m = NULL;
        OK(tg_nn_cosine_similarity_new(&m, dim, eps));
        cr_assert(eq(str, (char *)tg_module_type_name(m), "CosineSimilarity"));
        int d = 99;
        double e = 0;
        OK(tg_nn_cosine_similarity_params(m, &d, &e));
        cr_assert(d == dim && e == eps);
        run_pair(m, f, c);
        tg_module_release(m);
    }
    tg_st_free(f);
}

Test(distance_modules, pairwise_distance_matches_torch)
{
    tg_st_file *f = th_golden_load("nnsmall.safetensors");
    const int n = atoi(tg_st_meta_get(f, "module.pdist.cases"));
    cr_assert(n >= 3);
    for (int i = 0; i < n; i++) {
        char c[32];
        snprintf(c, sizeof c, "module.pdist%d", i);
        const double p = atof(th_golden_meta(f, c, "p"));
        const double eps = atof(th_golden_meta(f, c, "eps"));
        const bool keepdim = strcmp(th_golden_meta(f, c, "keepdim"), "1") == 0;
        tg_module *m = NULL;
        OK(tg_nn_pairwise_distance_new(&m, p, eps, keepdim));
        cr_assert(eq(str, (char *)tg_module_type_name(m), "PairwiseDistance"));
        double pp = 0, ee = 0;
        bool kd = !keepdim;
        OK(tg_nn_pairwise_distance_params(m, &pp, &ee, &kd));
        cr_assert(pp == p && ee == eps && kd == keepdim);
        OK(tg_nn_pairwise_distance_params(m, NULL, NULL, NULL));
        run_pair(m, f, c);
        tg_module_release(m);
    }
    tg_st_free(f);
}

/* The module's gradients are the function's, bit for bit. */
Test(distance_modules, gradients_are_the_functions)
{
    tg_tensor *a = th_rand_uniform(TG_F64, 2, (int64_t[]){3, 5}, 1);
    tg_tensor *b = th_rand_uniform(TG_F64, 2, (int64_t[]){3, 5}, 2);
    for (int k = 0; k < 2; k++) {
        tg_tensor *x[2] = {th_leaf_clone(a), th_leaf_clone(b)};
        tg_tensor *z[2] = {th_leaf_clone(a), th_leaf_clone(b)};
        tg_module *m = NULL;
        tg_tensor *y = NULL, *w = NULL;
        if (k == 0) {
            OK(tg_nn_cosine_similarity_new(&m, 1, 1e-8));
            OK(tg_cosine_similarity(&w, z[0], z[1], 1, 1e-8));
        } else {
            OK(tg_nn_pairwise_distance_new(&m, 2.0, 1e-6, false));
            OK(tg_pairwise_distance(&w, z[0], z[1], 2.0, 1e-6, false));
        }
        OK(tg_module_forward_n(m, &y, 2, x));
        th_expect_same_bits("forward", a, y, w);
        tg_tensor *gy = th_rand_uniform(TG_F64, 1, (int64_t[]){3}, 9);
        th_backward_with(y, gy);
        th_backward_with(w, gy);
        for (int i = 0; i < 2; i++)
            th_expect_same_bits("gradient", a, tg_tensor_grad(x[i]), tg_tensor_grad(z[i]));
        th_release_all(7, (tg_tensor *[]){x[0], x[1], z[0], z[1], y, w, gy});
        tg_module_release(m);
    }
    th_release_all(2, (tg_tensor *[]){a, b});
}

Test(distance_modules, refusals_name_the_rule)
{
    tg_module *m = NULL, *other = NULL;
    cr_assert(eq(int, tg_nn_cosine_similarity_new(NULL, 1, 1e-8), TG_EINVAL));
    cr_assert(eq(int, tg_nn_cosine_similarity_new(&m, 1, NAN), TG_EINVAL));
    th_expect_in(tg_error_message(), "nn_cosine_similarity_new: eps must not be NaN");
    cr_assert(eq(int, tg_nn_cosine_similarity_new(&m, 40, 1e-8), TG_EINVAL));
    th_expect_in(tg_error_message(), "nn_cosine_similarity_new: dim=40 must be within");
    cr_assert(eq(int, tg_nn_pairwise_distance_new(&m, NAN, 1e-6, false), TG_EINVAL));
    th_expect_in(tg_error_message(), "nn_pairwise_distance_new: p and eps must not be NaN");
    cr_assert(eq(int, tg_nn_pairwise_distance_new(NULL, 2, 1e-6, false), TG_EINVAL));
    cr_assert(m == NULL);
    /* one input is refused before the forward runs; the function's own
     * errors come through the module */
    OK(tg_nn_cosine_similarity_new(&m, 1, 1e-8));
    tg_tensor *x = th_rand_uniform(TG_F32, 2, (int64_t[]){3, 4}, 1);
    tg_tensor *x3 = th_rand_uniform(TG_F32, 2, (int64_t[]){3, 5}, 2), *y = NULL;
    cr_assert(eq(int, tg_module_forward(m, &y, x), TG_EINVAL));
    cr_assert(y == NULL);
    cr_assert(eq(int, tg_module_forward_n(m, &y, 2, (tg_tensor *[]){x, x3}), TG_ESHAPE));
    cr_assert(y == NULL);
    OK(tg_nn_flatten_new(&other, 1, -1));
    cr_assert(eq(int, tg_nn_cosine_similarity_params(other, NULL, NULL), TG_EINVAL));
    th_expect_in(tg_error_message(),
                 "nn_cosine_similarity_params: m is a Flatten module, not CosineSimilarity");
    cr_assert(eq(int, tg_nn_pairwise_distance_params(m, NULL, NULL, NULL), TG_EINVAL));
    th_expect_in(tg_error_message(), "m is a CosineSimilarity module, not PairwiseDistance");
    cr_assert(eq(int, tg_nn_pairwise_distance_params(NULL, NULL, NULL, NULL), TG_EINVAL));
    cr_assert(eq(int, tg_nn_cosine_similarity_params(NULL, NULL, NULL), TG_EINVAL));
    th_release_all(2, (tg_tensor *[]){x, x3});
    tg_module_release(m);
    tg_module_release(other);
}
