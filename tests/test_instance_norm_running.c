/* tests/test_instance_norm_running.c - InstanceNorm{1,2,3}d with
 * track_running_stats (tg_nn_instance_norm_new_ex) against PyTorch's:
 * several training forwards (outputs, gradients and the running statistics
 * after each) then an eval forward with those statistics, f32 and f64,
 * batched and unbatched; the update by hand; first and second derivatives
 * by finite differences in training and eval; the state dict under torch's
 * keys, to and from a file, resuming bit for bit; the refusals.  Goldens:
 * scripts/make_instance_norm_goldens.py (instance_norm_running). */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

TestSuite(instance_norm_running, .fini = th_tmp_dir_remove);

/* A tracking InstanceNorm of golden case c, in the case's dtype, with its
 * weight, bias, starting running statistics and num_batches_tracked. */
static tg_module *case_module(const tg_st_file *f, const char *c)
{
    const int ns = atoi(th_golden_meta(f, c, "ns"));
    const bool affine = atoi(th_golden_meta(f, c, "affine")) != 0;
    const double eps = strtod(th_golden_meta(f, c, "eps"), NULL);
    const double mom = strtod(th_golden_meta(f, c, "momentum"), NULL);
    const tg_tensor *rm0 = th_golden_get(f, c, "rm0");
    tg_module *m = NULL;
    OK(tg_nn_instance_norm_new_ex(&m, ns, tg_tensor_numel(rm0), eps, mom, affine, true));
    OK(tg_module_to_dtype(m, tg_tensor_dtype(rm0)));
    if (affine) {
        OK(tg_tensor_copy_(tg_module_find(m, "weight"), th_golden_get(f, c, "w")));
        OK(tg_tensor_copy_(tg_module_find(m, "bias"), th_golden_get(f, c, "b")));
    }
    OK(tg_tensor_copy_(tg_module_find(m, "running_mean"), rm0));
    OK(tg_tensor_copy_(tg_module_find(m, "running_var"), th_golden_get(f, c, "rv0")));
    OK(tg_tensor_copy_(tg_module_find(m, "num_batches_tracked"), th_golden_get(f, c, "nbt")));
    return m;
}

/* One forward of m on golden step "<c>.<k>": y, and the gradients of
 * sum(y * gy) with respect to x, weight and bias. */
static void check_step(const tg_st_file *f, const char *c, const char *k, tg_module *m,
                       double tol)
{
    char what[32];
#define G(name) (snprintf(what, sizeof what, "%s.%s", k, name), th_golden_get(f, c, what))
    tg_tensor *x = NULL, *y = NULL, *p = NULL, *s = NULL;
    tg_module_zero_grad(m);
    OK(tg_tensor_clone(&x, G("x")));
    OK(tg_tensor_set_requires_grad(x, true));
    OK(tg_module_forward(m, &y, x));
    th_expect_close_scaled(what, y, G("y"), tol);
    OK(tg_mul(&p, y, (tg_tensor *)G("gy")));
    OK(tg_sum(&s, p));
    OK(tg_backward(s, NULL, NULL));
    th_expect_close_scaled(what, tg_tensor_grad(x), G("gx"), tol);
    if (tg_module_find(m, "weight")) {
        th_expect_close_scaled(what, tg_tensor_grad(tg_module_find(m, "weight")), G("gw"), tol);
        th_expect_close_scaled(what, tg_tensor_grad(tg_module_find(m, "bias")), G("gb"), tol);
    }
#undef G
    th_release_all(4, (tg_tensor *[]){x, y, p, s});
}

Test(instance_norm_running, training_steps_then_eval_match_torch)
{
    tg_st_file *f = th_golden_load("instance_norm_running.safetensors");
    const int n = atoi(tg_st_meta_get(f, "cases"));
    int seen[4] = {0}, f32 = 0, unbatched = 0, still = 0, last = 0;
    for (int i = 0; i < n; i++) {
        char c[16], k[16], what[40];
        snprintf(c, sizeof c, "run%d", i);
        const int ns = atoi(th_golden_meta(f, c, "ns"));
        const int steps = atoi(th_golden_meta(f, c, "steps"));
        const double mom = strtod(th_golden_meta(f, c, "momentum"), NULL);
        tg_module *m = case_module(f, c);
        const tg_dtype dt = tg_tensor_dtype(th_golden_get(f, c, "rm0"));
        const double tol = dt == TG_F64 ? 1e-13 : 2e-6;
        tg_tensor *rm = tg_module_find(m, "running_mean"), *rv = tg_module_find(m, "running_var");
        tg_tensor *nbt = tg_module_find(m, "num_batches_tracked");
        seen[ns]++;
        f32 += dt == TG_F32;
        unbatched += tg_tensor_ndim(th_golden_get(f, c, "t0.x")) == ns + 1;
        still += mom == 0;
        last += mom == 1;
        tg_module_train(m, true);
        for (int t = 0; t < steps; t++) {
            snprintf(k, sizeof k, "t%d", t);
            check_step(f, c, k, m, tol);
            snprintf(what, sizeof what, "%s.rm", k);
            th_expect_close_scaled(what, rm, th_golden_get(f, c, what), tol);
            snprintf(what, sizeof what, "%s.rv", k);
            th_expect_close_scaled(what, rv, th_golden_get(f, c, what), tol);
        }
        /* eval normalises with the statistics and leaves them as they are */
        tg_tensor *rm1 = NULL, *rv1 = NULL;
        OK(tg_tensor_clone(&rm1, rm));
        OK(tg_tensor_clone(&rv1, rv));
        tg_module_train(m, false);
        check_step(f, c, "e", m, tol);
        cr_assert(th_same_bits(rm, rm1) && th_same_bits(rv, rv1),
                  "%s: eval changed the statistics", c);
        cr_assert(th_same_bits(nbt, th_golden_get(f, c, "nbt")),
                  "%s: num_batches_tracked moved", c);
        th_release_all(2, (tg_tensor *[]){rm1, rv1});
        tg_module_release(m);
    }
    cr_assert(seen[1] >= 2 && seen[2] >= 2 && seen[3] >= 2 && f32 >= 2 && unbatched >= 2 &&
                  still >= 1 && last >= 1,
              "golden cases: %d/%d/%d, %d f32, %d unbatched, momentum 0: %d, 1: %d", seen[1],
              seen[2], seen[3], f32, unbatched, still, last);
    tg_st_free(f);
}

/* Rows {1, 2, 3, 6} (mean 3, unbiased variance 14/3) and {-4, -4, 4, 4}
 * (mean 0, variance 64/3): the batch's statistics are 1.5 and 13, and with
 * momentum 0.5 from (0, 1) the running ones become 0.75 and 7.  Eval then
 * gives (x - 0.75) / sqrt(7) * weight + bias. */
Test(instance_norm_running, update_and_eval_by_hand)
{
    tg_module *m = NULL;
    OK(tg_nn_instance_norm_new_ex(&m, 1, 1, 0.0, 0.5, true, true));
    OK(tg_module_to_dtype(m, TG_F64));
    OK(tg_tensor_fill(tg_module_find(m, "weight"), 2.0));
    OK(tg_tensor_fill(tg_module_find(m, "bias"), -1.0));
    const double xv[8] = {1, 2, 3, 6, -4, -4, 4, 4};
    tg_tensor *x = th_tensor_from(TG_F64, 3, (int64_t[]){2, 1, 4}, xv), *y = NULL, *ye = NULL;
    OK(tg_module_forward(m, &y, x));
    const double sd = sqrt(3.5);   /* training: each row by its biased variance */
    for (int i = 0; i < 4; i++)
        cr_assert(epsilon_eq(dbl, th_at(y, i), 2 * (xv[i] - 3) / sd - 1, 1e-15));
    cr_assert(epsilon_eq(dbl, th_at(tg_module_find(m, "running_mean"), 0), 0.75, 1e-15));
    cr_assert(epsilon_eq(dbl, th_at(tg_module_find(m, "running_var"), 0), 7.0, 1e-14));
    cr_assert(eq(dbl, th_at(tg_module_find(m, "num_batches_tracked"), 0), 0.0));
    tg_module_train(m, false);
    OK(tg_module_forward(m, &ye, x));
    for (int i = 0; i < 8; i++)
        cr_assert(epsilon_eq(dbl, th_at(ye, i), 2 * (xv[i] - 0.75) / sqrt(7.0) - 1, 1e-14),
                  "ye[%d] = %.17g", i, th_at(ye, i));
    th_release_all(3, (tg_tensor *[]){x, y, ye});
    tg_module_release(m);
}

/* An empty batch averages no rows: NaN statistics, as torch's. */
Test(instance_norm_running, empty_batch_gives_nan_statistics_as_torch)
{
    tg_module *m = NULL;
    OK(tg_nn_instance_norm_new_ex(&m, 1, 3, 1e-5, 0.1, false, true));
    tg_tensor *x = NULL, *y = NULL;
    OK(tg_tensor_zeros(&x, TG_F32, 3, (int64_t[]){0, 3, 4}));
    OK(tg_module_forward(m, &y, x));
    cr_assert(eq(i64, tg_tensor_numel(y), 0));
    cr_assert(isnan(th_at(tg_module_find(m, "running_mean"), 2)) &&
              isnan(th_at(tg_module_find(m, "running_var"), 0)));
    th_release_all(2, (tg_tensor *[]){x, y});
    tg_module_release(m);
}

static int module_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    return tg_module_forward(user, out, in[0]);
}

Test(instance_norm_running, derivatives_by_finite_differences_in_training_and_eval)
{
    const int64_t shapes[3][5] = {{2, 3, 5}, {3, 3, 4}, {2, 2, 3, 2, 2}};
    for (int ns = 1; ns <= 3; ns++) {
        tg_module *m = NULL;
        const int nd = ns + 2 - (ns == 2);   /* the 2-d case unbatched */
        const int64_t c = shapes[ns - 1][nd - ns - 1];
        OK(tg_nn_instance_norm_new_ex(&m, ns, c, 1e-5, 0.5, true, true));
        OK(tg_module_to_dtype(m, TG_F64));
        tg_tensor *x = th_rand_uniform(TG_F64, nd, shapes[ns - 1], 60 + ns), *y = NULL;
        OK(tg_module_forward(m, &y, x));   /* statistics away from (0, 1) */
        OK(tg_tensor_set_requires_grad(x, true));
        tg_tensor *in[1] = {x};
        for (int train = 1; train >= 0; train--) {
            tg_module_train(m, train);
            cr_assert(eq(int, tg_gradcheck(module_fn, m, 1, in, NULL), TG_OK), "%dd %s: %s", ns,
                      train ? "train" : "eval", tg_error_message());
            cr_assert(eq(int, tg_gradgradcheck(module_fn, m, 1, in, NULL), TG_OK), "%dd %s: %s",
                      ns, train ? "train" : "eval", tg_error_message());
        }
        th_release_all(2, (tg_tensor *[]){x, y});
        tg_module_release(m);
    }
}

/* The entries of m's state dict, in order, as "name:dtype name:dtype ". */
static void state_list(const tg_module *m, char *buf, size_t cap)
{
    buf[0] = '\0';
    for (int i = 0; i < tg_module_state_count(m); i++) {
        char name[64];
        tg_tensor *t = NULL;
        OK(tg_module_state_at(m, i, name, sizeof name, &t, NULL));
        snprintf(buf + strlen(buf), cap - strlen(buf), "%s:%s ", name,
                 tg_dtype_name(tg_tensor_dtype(t)));
    }
}

/* torch's state dict (run1: InstanceNorm2d(3, momentum 0.3, affine,
 * tracking) after its steps) loads strictly under its own keys; saved to a
 * file and loaded into another module, a training step gives the same bits
 * in both. */
Test(instance_norm_running, state_dict_under_torch_keys_resumes_bit_for_bit)
{
    th_tmp_dir_make("tg_instnorm_");
    tg_st_file *g = th_golden_load("instance_norm_running.safetensors");
    tg_module *a = NULL, *b = NULL, *plain = NULL;
    OK(tg_nn_instance_norm_new_ex(&a, 2, 3, 1e-5, 0.3, true, true));
    OK(tg_nn_instance_norm_new_ex(&b, 2, 3, 1e-5, 0.3, true, true));
    OK(tg_module_to_dtype(a, TG_F64));
    OK(tg_module_to_dtype(b, TG_F64));
    char list[256];
    state_list(a, list, sizeof list);
    cr_assert(eq(str, list, "weight:f64 bias:f64 running_mean:f64 running_var:f64 "
                            "num_batches_tracked:i64 "));
    OK(tg_module_load_state_dict(a, g, "sd", true));
    const char *keys[5] = {"weight", "bias", "running_mean", "running_var", "num_batches_tracked"};
    for (int i = 0; i < 5; i++) {
        char key[64];
        snprintf(key, sizeof key, "sd.%s", keys[i]);
        cr_assert(th_same_bits(tg_module_find(a, keys[i]), tg_st_get(g, key)), "%s", key);
    }
    /* to a file and back */
    char path[256];
    tg_st_file *f = NULL, *r = NULL;
    OK(tg_st_new(&f));
    OK(tg_module_state_dict_save(a, f, "norm"));
    OK(tg_safetensors_save(f, th_tmp_path(path, sizeof path, "norm.safetensors")));
    OK(tg_safetensors_load(&r, path));
    OK(tg_module_load_state_dict(b, r, "norm", true));
    tg_tensor *x = th_rand_uniform(TG_F64, 4, (int64_t[]){2, 3, 4, 4}, 77), *ya = NULL, *yb = NULL;
    OK(tg_module_forward(a, &ya, x));
    OK(tg_module_forward(b, &yb, x));
    cr_assert(th_same_bits(ya, yb));
    for (int i = 0; i < 5; i++)
        cr_assert(th_same_bits(tg_module_find(a, keys[i]), tg_module_find(b, keys[i])), "%s",
                  keys[i]);
    cr_assert(eq(dbl, th_at(tg_module_find(b, "num_batches_tracked"), 0), 5.0));
    /* a file without num_batches_tracked loads it as 0, as torch */
    tg_st_file *no_count = th_st_copy_without(g, "sd.num_batches_tracked");
    OK(tg_module_load_state_dict(b, no_count, "sd", true));
    cr_assert(eq(dbl, th_at(tg_module_find(b, "num_batches_tracked"), 0), 0.0));
    /* a module without running statistics has no such keys */
    OK(tg_nn_instance_norm_new(&plain, 2, 3, 1e-5, true));
    OK(tg_module_to_dtype(plain, TG_F64));
    cr_assert(eq(int, tg_module_load_state_dict(plain, g, "sd", true), TG_EINVAL));
    th_expect_in(tg_error_message(), "running_mean");
    th_release_all(3, (tg_tensor *[]){x, ya, yb});
    tg_st_free(f);
    tg_st_free(r);
    tg_st_free(no_count);
    tg_st_free(g);
    tg_module_release(a);
    tg_module_release(b);
    tg_module_release(plain);
}

Test(instance_norm_running, params_report_momentum_and_tracking)
{
    tg_module *m = NULL, *d = NULL;
    OK(tg_nn_instance_norm_new_ex(&m, 3, 4, 1e-3, 0.25, false, true));
    OK(tg_nn_instance_norm_new(&d, 1, 4, 1e-5, false));
    cr_assert(eq(str, (char *)tg_module_type_name(m), "InstanceNorm3d"));
    int ns = 0;
    int64_t c = 0;
    double eps = 0, mom = 0;
    bool affine = true, track = false;
    OK(tg_nn_instance_norm_params(m, &ns, &c, &eps, &mom, &affine, &track));
    cr_assert(ns == 3 && c == 4 && eps == 1e-3 && mom == 0.25 && !affine && track);
    OK(tg_nn_instance_norm_params(d, NULL, NULL, NULL, &mom, NULL, &track));
    cr_assert(mom == 0.1 && !track, "the plain constructor is torch's defaults");
    cr_assert(eq(int, tg_module_state_count(m), 3));
    cr_assert(eq(int, tg_module_parameter_count(m), 0));
    tg_module_release(m);
    tg_module_release(d);
}

Test(instance_norm_running, refusals_name_the_rule_and_change_nothing)
{
    tg_module *m = NULL;
    const double bad[4] = {-0.1, 1.5, NAN, INFINITY};
    for (int i = 0; i < 4; i++) {
        cr_assert(eq(int, tg_nn_instance_norm_new_ex(&m, 2, 3, 1e-5, bad[i], false, true),
                     TG_EINVAL));
        th_expect_in(tg_error_message(), "nn_instance_norm_new_ex: momentum=");
        th_expect_in(tg_error_message(), "must be in [0, 1]");
    }
    cr_assert(eq(int, tg_nn_instance_norm_new_ex(&m, 0, 3, 1e-5, 0.1, false, true), TG_EINVAL));
    th_expect_in(tg_error_message(), "nn_instance_norm_new_ex: n_spatial=0 must be 1, 2 or 3");
    cr_assert(eq(int, tg_nn_instance_norm_new_ex(&m, 2, -3, 1e-5, 0.1, false, true), TG_EINVAL));
    th_expect_in(tg_error_message(), "nn_instance_norm_new_ex: num_features=-3 must be > 0");
    cr_assert(eq(int, tg_nn_instance_norm_new_ex(&m, 2, 3, NAN, 0.1, false, true), TG_EINVAL));
    th_expect_in(tg_error_message(), "nn_instance_norm_new_ex: eps=nan must be >= 0");
    cr_assert(eq(int, tg_nn_instance_norm_new_ex(NULL, 2, 3, 1e-5, 0.1, false, true), TG_EINVAL));
    cr_assert(m == NULL);
    /* a refused training forward leaves the statistics as they were */
    OK(tg_nn_instance_norm_new_ex(&m, 2, 3, 1e-5, 0.1, false, true));
    tg_tensor *y = NULL, *x1 = th_rand_uniform(TG_F32, 4, (int64_t[]){2, 3, 1, 1}, 3);
    tg_tensor *xc = th_rand_uniform(TG_F32, 4, (int64_t[]){2, 4, 3, 3}, 4);
    th_expect_refused(tg_module_forward(m, &y, x1), TG_ESHAPE,
                      "InstanceNorm2d: x has 1 spatial element in training", y);
    th_expect_refused(tg_module_forward(m, &y, xc), TG_ESHAPE,
                      "x has 4 channels (dim 1); the module has num_features=3", y);
    for (int j = 0; j < 3; j++)
        cr_assert(th_at(tg_module_find(m, "running_mean"), j) == 0.0 &&
                  th_at(tg_module_find(m, "running_var"), j) == 1.0);
    tg_module_train(m, false);
    OK(tg_module_forward(m, &y, x1));   /* eval takes one element: running statistics */
    th_release_all(3, (tg_tensor *[]){x1, xc, y});
    tg_module_release(m);
}
