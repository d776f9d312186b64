/* tests/test_instance_norm.c - the InstanceNorm{1,2,3}d modules against
 * PyTorch's (values and the gradients of x, weight and bias; affine or not;
 * batched and unbatched; training and eval), the statistics by hand, the
 * derivatives to second order by finite differences, the state dict, and
 * the refusals.  Goldens: scripts/make_instance_norm_goldens.py. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

Test(instance_norm, every_case_matches_torch)
{
    tg_st_file *f = th_golden_load("instance_norm.safetensors");
    const int n = atoi(tg_st_meta_get(f, "cases"));
    int seen[4] = {0}, affine_cases = 0, eval_cases = 0, unbatched = 0;
    for (int i = 0; i < n; i++) {
        char c[16];
        snprintf(c, sizeof c, "case%d", i);
        const int ns = atoi(th_golden_meta(f, c, "ns"));
        const bool affine = atoi(th_golden_meta(f, c, "affine")) != 0;
        const bool train = atoi(th_golden_meta(f, c, "train")) != 0;
        const double eps = strtod(th_golden_meta(f, c, "eps"), NULL);
        const tg_tensor *x0 = th_golden_get(f, c, "x");
        const tg_dtype dt = tg_tensor_dtype(x0);
        const int nd = tg_tensor_ndim(x0);
        const int64_t ch = tg_tensor_dim(x0, nd - ns - 1);
        seen[ns]++;
        affine_cases += affine;
        eval_cases += !train;
        unbatched += nd == ns + 1;
        tg_module *m = NULL;
        OK(tg_nn_instance_norm_new(&m, ns, ch, eps, affine));
        OK(tg_module_to_dtype(m, dt));
        if (affine) {
            OK(tg_tensor_copy_(tg_module_find(m, "weight"), th_golden_get(f, c, "w")));
            OK(tg_tensor_copy_(tg_module_find(m, "bias"), th_golden_get(f, c, "b")));
        }
        tg_module_train(m, train);
        tg_tensor *x = NULL, *y = NULL, *p = NULL, *s = NULL;
        OK(tg_tensor_clone(&x, x0));
        OK(tg_tensor_set_requires_grad(x, true));
        OK(tg_module_forward(m, &y, x));
        const double tol = dt == TG_F64 ? 1e-13 : 2e-6;
        th_expect_close_scaled(c, y, th_golden_get(f, c, "y"), tol);
        OK(tg_mul(&p, y, (tg_tensor *)th_golden_get(f, c, "gy")));
        OK(tg_sum(&s, p));
        OK(tg_backward(s, NULL, NULL));
        th_expect_close_scaled("gx", tg_tensor_grad(x), th_golden_get(f, c, "gx"), tol);
        if (affine) {
            th_expect_close_scaled("gw", tg_tensor_grad(tg_module_find(m, "weight")),
                                   th_golden_get(f, c, "gw"), tol);
            th_expect_close_scaled("gb", tg_tensor_grad(tg_module_find(m, "bias")),
                                   th_golden_get(f, c, "gb"), tol);
        }
        th_release_all(4, (tg_tensor *[]){x, y, p, s});
        tg_module_release(m);
    }
    cr_assert(seen[1] >= 2 && seen[2] >= 2 && seen[3] >= 1 && affine_cases >= 4 &&
                  eval_cases >= 1 && unbatched >= 2,
              "golden cases: %d/%d/%d, %d affine, %d eval, %d unbatched", seen[1], seen[2],
              seen[3], affine_cases, eval_cases, unbatched);
    tg_st_free(f);
}

/* Each (sample, channel) row normalised by its own mean and biased
 * variance: row {1, 2, 3, 6} has mean 3 and variance 3.5. */
Test(instance_norm, statistics_by_hand)
{
    tg_module *m = NULL;
    OK(tg_nn_instance_norm_new(&m, 1, 2, 0.0, false));
    OK(tg_module_to_dtype(m, TG_F64));
    tg_tensor *x = th_tensor_from(TG_F64, 3, (int64_t[]){1, 2, 4},
                                  (double[]){1, 2, 3, 6, -4, -4, 4, 4}), *y = NULL;
    OK(tg_module_forward(m, &y, x));
    const double sd = sqrt(3.5);
    const double want[8] = {-2 / sd, -1 / sd, 0, 3 / sd, -1, -1, 1, 1};
    for (int i = 0; i < 8; i++)
        cr_assert(epsilon_eq(dbl, th_at(y, i), want[i], 1e-15), "y[%d] = %.17g", i, th_at(y, i));
    cr_assert(eq(sz, (size_t)tg_module_state_count(m), 0), "no parameters, no buffers");
    th_release_all(2, (tg_tensor *[]){x, y});
    tg_module_release(m);
}

typedef struct in_call {
    tg_module *m;
} in_call;

static int module_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    return tg_module_forward(((in_call *)user)->m, out, in[0]);
}

Test(instance_norm, first_and_second_derivatives_by_finite_differences)
{
    const int64_t shapes[3][5] = {{2, 3, 5}, {2, 2, 3, 4}, {2, 3, 2, 2}};
    for (int ns = 1; ns <= 3; ns++) {
        in_call c = {NULL};
        OK(tg_nn_instance_norm_new(&c.m, ns, ns == 3 ? 2 : shapes[ns - 1][1], 1e-5, true));
        OK(tg_module_to_dtype(c.m, TG_F64));
        const int nd = ns == 3 ? 4 : ns + 2;   /* the 3-d case unbatched */
        tg_tensor *x = th_rand_uniform(TG_F64, nd, shapes[ns - 1], 40 + ns);
        OK(tg_tensor_set_requires_grad(x, true));
        tg_tensor *in[1] = {x};
        cr_assert(eq(int, tg_gradcheck(module_fn, &c, 1, in, NULL), TG_OK), "%dd: %s", ns,
                  tg_error_message());
        cr_assert(eq(int, tg_gradgradcheck(module_fn, &c, 1, in, NULL), TG_OK), "%dd: %s", ns,
                  tg_error_message());
        tg_tensor_release(x);
        tg_module_release(c.m);
    }
}

Test(instance_norm, params_and_state_dict_names)
{
    tg_module *m = NULL, *other = NULL;
    OK(tg_nn_instance_norm_new(&m, 2, 5, 1e-3, true));
    cr_assert(eq(str, (char *)tg_module_type_name(m), "InstanceNorm2d"));
    int ns = 0;
    int64_t c = 0;
    double eps = 0, mom = 0;
    bool affine = false, track = true;
    OK(tg_nn_instance_norm_params(m, &ns, &c, &eps, &mom, &affine, &track));
    cr_assert(ns == 2 && c == 5 && eps == 1e-3 && mom == 0.1 && affine && !track);
    OK(tg_nn_instance_norm_params(m, NULL, NULL, NULL, NULL, NULL, NULL));
    cr_assert(eq(sz, (size_t)tg_module_state_count(m), 2));
    const tg_tensor *w = tg_module_find(m, "weight"), *b = tg_module_find(m, "bias");
    cr_assert(w && b && tg_tensor_numel(w) == 5 && th_at(w, 0) == 1.0 && th_at(b, 4) == 0.0);
    OK(tg_nn_group_norm_new(&other, 1, 5, 1e-5, true));
    cr_assert(eq(int, tg_nn_instance_norm_params(other, &ns, NULL, NULL, NULL, NULL, NULL), TG_EINVAL));
    th_expect_in(tg_error_message(), "m is a GroupNorm module, not InstanceNormNd");
    tg_module_release(m);
    tg_module_release(other);
}

Test(instance_norm, refusals_name_the_rule)
{
    tg_module *m = NULL;
    cr_assert(eq(int, tg_nn_instance_norm_new(&m, 4, 3, 1e-5, false), TG_EINVAL));
    th_expect_in(tg_error_message(), "nn_instance_norm_new: n_spatial=4 must be 1, 2 or 3");
    cr_assert(eq(int, tg_nn_instance_norm_new(&m, 2, 0, 1e-5, false), TG_EINVAL));
    th_expect_in(tg_error_message(), "num_features=0 must be > 0");
    cr_assert(eq(int, tg_nn_instance_norm_new(&m, 2, 3, -1, false), TG_EINVAL));
    th_expect_in(tg_error_message(), "eps=-1 must be >= 0");
    cr_assert(eq(int, tg_nn_instance_norm_new(NULL, 2, 3, 1e-5, false), TG_EINVAL));
    cr_assert(m == NULL);
    OK(tg_nn_instance_norm_new(&m, 2, 3, 1e-5, false));
    tg_tensor *y = NULL, *x3 = th_rand_uniform(TG_F32, 3, (int64_t[]){2, 3, 4}, 1);
    tg_tensor *xc = th_rand_uniform(TG_F32, 4, (int64_t[]){2, 4, 3, 3}, 2);
    tg_tensor *x1 = th_rand_uniform(TG_F32, 4, (int64_t[]){2, 3, 1, 1}, 3);
    tg_tensor *x5 = th_rand_uniform(TG_F32, 5, (int64_t[]){1, 2, 3, 3, 3}, 4);
    th_expect_refused(tg_module_forward(m, &y, x5), TG_ESHAPE,
                      "InstanceNorm2d: x has 5 dims; it must have 3 (C, S...) or 4", y);
    th_expect_refused(tg_module_forward(m, &y, x3), TG_ESHAPE,
                      "InstanceNorm2d: x has 2 channels (dim 0); the module has num_features=3", y);
    th_expect_refused(tg_module_forward(m, &y, xc), TG_ESHAPE,
                      "x has 4 channels (dim 1); the module has num_features=3", y);
    th_expect_refused(tg_module_forward(m, &y, x1), TG_ESHAPE,
                      "InstanceNorm2d: x has 1 spatial element in training", y);
    tg_module_train(m, false);
    OK(tg_module_forward(m, &y, x1));   /* eval takes it, as torch: all zeros */
    for (int64_t i = 0; i < tg_tensor_numel(y); i++) cr_assert(eq(dbl, th_at(y, i), 0.0));
    th_release_all(5, (tg_tensor *[]){x3, xc, x1, x5, y});
    tg_module_release(m);
}
