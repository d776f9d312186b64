/* tests/test_nn.c - nn modules against PyTorch.
 *
 * The goldens (scripts/make_nn_goldens.py) hold each module's torch
 * state_dict, an input, the output and every gradient of sum(y * grad_y).
 * Loading that state_dict into our module through tg_module_load_state_dict
 * tests the interchange (names, layouts) and the numbers at once.  The rest:
 * state-dict order vs the file's key order, BatchNorm running statistics,
 * LayerNorm and GroupNorm (the ops themselves: test_layer_norm.c),
 * Softplus, LogSigmoid, Identity, Softmax and LogSoftmax in a Sequential,
 * SELU, CELU, the shrinks, Threshold, GLU, Softsign, Tanhshrink and Softmin
 * in another (scripts/make_act_modules_goldens.py; the modules alone:
 * test_nn_act.c),
 * Dropout statistics, init bounds, and gradcheck/gradgradcheck of BatchNorm
 * in f64.  The state dict's own tests are in test_nn_state.c, unusual and
 * bad inputs in test_nn_inputs.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "helpers.h"
#include "nn_fixtures.h"
#include "tapegrad/autograd.h"
#include "tapegrad/nn.h"
#include "tapegrad/ops.h"
#include "tapegrad/safetensors.h"

/* ---- helpers ---- */

static tg_tensor *must_get(const tg_st_file *f, const char *key)
{
    tg_tensor *t = tg_st_get(f, key);
    cr_assert(t != NULL, "golden has no key '%s'", key);
    return t;
}

/* The module's state names in order equal the file's keys under "prefix.",
 * in the file's order (which is torch's state_dict order). */
static void expect_torch_names(const tg_module *m, const tg_st_file *f, const char *prefix)
{
    size_t plen = strlen(prefix);
    int k = 0;
    for (int i = 0; i < tg_st_count(f); i++) {
        const char *key;
        tg_tensor *t;
        tg_st_at(f, i, &key, &t);
        if (strncmp(key, prefix, plen) != 0 || key[plen] != '.') continue;
        char name[TG_MODULE_NAME_MAX];
        cr_assert(eq(int, tg_module_state_at(m, k, name, sizeof name, NULL, NULL), TG_OK),
                  "module has fewer entries than the file (at '%s')", key);
        cr_assert(eq(str, name, (char *)key + plen + 1), "entry %d", k);
        k++;
    }
    cr_assert(eq(int, k, tg_module_state_count(m)));
}

/* Loads the golden state into m, runs forward + backward of sum(y * grad_y)
 * and compares y, grad_x and every parameter gradient with "<tag>..." keys. */
static void check_case(tg_module *m, const tg_st_file *f, const char *prefix, const char *tag,
                       double tol)
{
    char key[TG_MODULE_NAME_MAX + 64], name[TG_MODULE_NAME_MAX];
    cr_assert(eq(int, tg_module_load_state_dict(m, f, prefix, true), TG_OK), "%s",
              tg_error_message());
    tg_module_zero_grad(m);
    tg_tensor *x = NULL, *y = NULL;
    cr_assert(eq(int, tg_tensor_clone(&x, must_get(f, "x")), TG_OK));
    tg_tensor_set_requires_grad(x, true);
    cr_assert(eq(int, tg_module_forward(m, &y, x), TG_OK), "%s", tg_error_message());
    snprintf(key, sizeof key, "%sy", tag);
    th_expect_near(key, y, must_get(f, key), tol, tol);
    cr_assert(eq(int, tg_backward(y, must_get(f, "grad_y"), NULL), TG_OK), "%s",
              tg_error_message());
    snprintf(key, sizeof key, "%sgrad_x", tag);
    th_expect_near(key, tg_tensor_grad(x), must_get(f, key), tol, tol);
    for (int i = 0; i < tg_module_state_count(m); i++) {
        tg_tensor *t;
        bool is_param;
        tg_module_state_at(m, i, name, sizeof name, &t, &is_param);
        if (!is_param) continue;
        snprintf(key, sizeof key, "%sgrad.%s.%s", tag, prefix, name);
        th_expect_near(key, tg_tensor_grad(t), must_get(f, key), tol, tol);
    }
    tg_tensor_release(y);
    tg_tensor_release(x);
}

/* Every state entry equals the file's "after.<prefix>.<name>". */
static void check_after(const tg_module *m, const tg_st_file *f, const char *prefix)
{
    char key[TG_MODULE_NAME_MAX + 64], name[TG_MODULE_NAME_MAX];
    for (int i = 0; i < tg_module_state_count(m); i++) {
        tg_tensor *t;
        tg_module_state_at(m, i, name, sizeof name, &t, NULL);
        snprintf(key, sizeof key, "after.%s.%s", prefix, name);
        th_expect_near(key, t, must_get(f, key), 1e-5, 1e-6);
    }
}

/* ---- the goldens ---- */

Test(nn, linear_matches_torch)
{
    tg_st_file *f = th_golden_load("nn/linear.safetensors");
    tg_rng rng;
    tg_rng_init(&rng, 1);
    tg_module *m = NULL;
    cr_assert(eq(int, tg_nn_linear_new(&m, 5, 4, true, &rng), TG_OK));
    expect_torch_names(m, f, "m");
    check_case(m, f, "m", "", 1e-5);
    tg_module_release(m);
    tg_st_free(f);
}

Test(nn, conv2d_matches_torch)
{
    tg_st_file *f = th_golden_load("nn/conv2d.safetensors");
    tg_rng rng;
    tg_rng_init(&rng, 1);
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    tg_conv_params_set_padding(&p, 1);
    int64_t k[2] = {3, 3};
    tg_module *m = NULL;
    cr_assert(eq(int, tg_nn_conv_new(&m, 2, 3, 4, k, &p, true, &rng), TG_OK));
    expect_torch_names(m, f, "m");
    check_case(m, f, "m", "", 1e-5);
    tg_module_release(m);
    tg_st_free(f);
}

Test(nn, conv_transpose2d_matches_torch)
{
    tg_st_file *f = th_golden_load("nn/conv_transpose2d.safetensors");
    tg_rng rng;
    tg_rng_init(&rng, 1);
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    p.stride[0] = p.stride[1] = 2;
    tg_conv_params_set_padding(&p, 1);
    int64_t k[2] = {4, 4};
    tg_module *m = NULL;
    cr_assert(eq(int, tg_nn_conv_transpose_new(&m, 2, 4, 3, k, &p, true, &rng), TG_OK));
    const int64_t *ws = tg_tensor_shape(tg_module_find(m, "weight"));
    cr_assert(ws[0] == 4 && ws[1] == 3 && ws[2] == 4 && ws[3] == 4, "weight is (C_in, C_out, K, K)");
    expect_torch_names(m, f, "m");
    check_case(m, f, "m", "", 1e-5);
    tg_module_release(m);
    tg_st_free(f);
}

/* Train step (batch stats, running stats updated with the unbiased var,
 * num_batches_tracked 3 -> 4), then eval from the same starting state. */
static void bn_case(const char *name, int nspatial, double eps, double momentum)
{
    tg_st_file *f = th_golden_load("nn/%s.safetensors", name);
    tg_module *m = NULL;
    cr_assert(eq(int, tg_nn_batchnorm_new(&m, nspatial, 3, eps, momentum, true, true), TG_OK));
    expect_torch_names(m, f, "m");
    check_case(m, f, "m", "", 2e-5);
    check_after(m, f, "m");
    double nbt = 0;
    tg_tensor_get_flat(tg_module_find(m, "num_batches_tracked"), 0, &nbt);
    cr_assert(eq(dbl, nbt, 4.0));
    tg_module_train(m, false);
    check_case(m, f, "m", "eval.", 2e-5);
    /* eval leaves the running stats as loaded */
    int64_t n;
    double *now = nf_snapshot(m, &n);
    cr_assert(eq(int, tg_module_load_state_dict(m, f, "m", true), TG_OK));
    nf_expect_snapshot(m, now, n);
    free(now);
    tg_module_release(m);
    tg_st_free(f);
}

Test(nn, batchnorm1d_nc_matches_torch) { bn_case("batchnorm1d_nc", 0, 1e-5, 0.2); }
Test(nn, batchnorm1d_ncl_matches_torch) { bn_case("batchnorm1d_ncl", 0, 1e-5, 0.1); }
Test(nn, batchnorm2d_matches_torch) { bn_case("batchnorm2d", 2, 1e-3, 0.1); }

Test(nn, generator_matches_torch)
{
    tg_st_file *f = th_golden_load("nn/generator.safetensors");
    tg_rng rng;
    tg_rng_init(&rng, 7);
    tg_module *gen = nf_make_generator(&rng);
    expect_torch_names(gen, f, "gen");
    cr_assert(eq(int, tg_module_parameter_count(gen), 10));
    check_case(gen, f, "gen", "", 1e-4);
    check_after(gen, f, "gen");
    tg_module_release(gen);
    tg_st_free(f);
}

/* LayerNorm and GroupNorm load torch's state dicts by name and compute
 * torch's values and gradients; the read-back gives what they were made
 * with. */
Test(nn, layernorm_matches_torch)
{
    tg_st_file *f = th_golden_load("nn/layernorm.safetensors");
    tg_module *m = NULL;
    const int64_t ns[2] = {4, 5};
    cr_assert(eq(int, tg_nn_layer_norm_new(&m, 2, ns, 1e-4, true), TG_OK));
    cr_assert(eq(str, (char *)tg_module_type_name(m), "LayerNorm"));
    expect_torch_names(m, f, "m");
    check_case(m, f, "m", "", 1e-5);
    int n = 0;
    int64_t got[TG_MAX_DIMS] = {0};
    double eps = 0;
    bool affine = false;
    cr_assert(eq(int, tg_nn_layer_norm_params(m, &n, got, &eps, &affine), TG_OK));
    cr_assert(n == 2 && got[0] == 4 && got[1] == 5 && eps == 1e-4 && affine);
    cr_assert(eq(int, tg_nn_group_norm_params(m, NULL, NULL, NULL, NULL), TG_EINVAL));
    th_expect_in(tg_error_message(), "m is a LayerNorm module, not GroupNorm");
    tg_module_release(m);
    tg_st_free(f);
}

Test(nn, groupnorm_matches_torch)
{
    tg_st_file *f = th_golden_load("nn/groupnorm.safetensors");
    tg_module *m = NULL;
    cr_assert(eq(int, tg_nn_group_norm_new(&m, 3, 6, 1e-5, true), TG_OK));
    cr_assert(eq(str, (char *)tg_module_type_name(m), "GroupNorm"));
    expect_torch_names(m, f, "m");
    check_case(m, f, "m", "", 1e-5);
    int64_t groups = 0, channels = 0;
    double eps = 0;
    bool affine = false;
    cr_assert(eq(int, tg_nn_group_norm_params(m, &groups, &channels, &eps, &affine), TG_OK));
    cr_assert(groups == 3 && channels == 6 && eps == 1e-5 && affine);
    cr_assert(eq(int, tg_nn_layer_norm_params(m, NULL, NULL, NULL, NULL), TG_EINVAL));
    th_expect_in(tg_error_message(), "m is a GroupNorm module, not LayerNorm");
    tg_module_release(m);
    tg_st_free(f);
}

/* A Conv2d -> GroupNorm -> ReLU stage under torch's Sequential names. */
Test(nn, conv_groupnorm_stage_matches_torch)
{
    tg_st_file *f = th_golden_load("nn/conv_groupnorm.safetensors");
    tg_rng rng;
    tg_rng_init(&rng, 3);
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    tg_conv_params_set_padding(&p, 1);
    tg_module *seq = NULL, *m = NULL;
    cr_assert(eq(int, tg_nn_sequential_new(&seq), TG_OK));
    cr_assert(eq(int, tg_nn_conv_new(&m, 2, 3, 4, (const int64_t[]){3, 3}, &p, true, &rng), TG_OK));
    cr_assert(eq(int, tg_nn_sequential_append(seq, m), TG_OK));
    cr_assert(eq(int, tg_nn_group_norm_new(&m, 2, 4, 1e-5, true), TG_OK));
    cr_assert(eq(int, tg_nn_sequential_append(seq, m), TG_OK));
    cr_assert(eq(int, tg_nn_activation_new(&m, TG_ACT_RELU, 0), TG_OK));
    cr_assert(eq(int, tg_nn_sequential_append(seq, m), TG_OK));
    expect_torch_names(seq, f, "m");
    check_case(seq, f, "m", "", 1e-5);
    tg_module_release(seq);
    tg_st_free(f);
}

/* Linear -> Softplus(2, 1) -> Linear -> LogSigmoid -> Identity -> Linear ->
 * Softmax(0) -> Linear -> LogSoftmax(-1): the parameter-free modules keep
 * torch's child indices and compute torch's values and gradients. */
Test(nn, activation_modules_sequential_matches_torch)
{
    tg_st_file *f = th_golden_load("nn/act_modules.safetensors");
    tg_rng rng;
    tg_rng_init(&rng, 4);
    tg_module *seq = NULL, *m = NULL;
    cr_assert(eq(int, tg_nn_sequential_new(&seq), TG_OK));
    const int64_t dims[][2] = {{6, 8}, {8, 8}, {8, 5}, {5, 4}};
    for (int i = 0; i < 4; i++) {
        cr_assert(eq(int, tg_nn_linear_new(&m, dims[i][0], dims[i][1], true, &rng), TG_OK));
        cr_assert(eq(int, tg_nn_sequential_append(seq, m), TG_OK));
        if (i == 0) cr_assert(eq(int, tg_nn_softplus_new(&m, 2, 1), TG_OK));
        if (i == 1) {
            cr_assert(eq(int, tg_nn_logsigmoid_new(&m), TG_OK));
            cr_assert(eq(int, tg_nn_sequential_append(seq, m), TG_OK));
            cr_assert(eq(int, tg_nn_identity_new(&m), TG_OK));
        }
        if (i == 2) cr_assert(eq(int, tg_nn_softmax_new(&m, 0), TG_OK));
        if (i == 3) cr_assert(eq(int, tg_nn_log_softmax_new(&m, -1), TG_OK));
        cr_assert(eq(int, tg_nn_sequential_append(seq, m), TG_OK));
    }
    expect_torch_names(seq, f, "m");
    check_case(seq, f, "m", "", 1e-5);
    tg_module_release(seq);
    tg_st_free(f);
}

/* Linear -> SELU -> Linear -> CELU(0.5) -> Hardshrink(0.3) -> Linear ->
 * Softshrink(0.2) -> Threshold(0.1, -0.5) -> Linear -> GLU(1) -> Softsign ->
 * Tanhshrink -> Linear -> Softmin(0), torch's golden (act_modules2). */
Test(nn, more_activation_modules_sequential_matches_torch)
{
    tg_st_file *f = th_golden_load("nn/act_modules2.safetensors");
    tg_rng rng;
    tg_rng_init(&rng, 5);
    tg_module *seq = NULL, *m = NULL;
    cr_assert(eq(int, tg_nn_sequential_new(&seq), TG_OK));
    const int64_t dims[][2] = {{6, 8}, {8, 8}, {8, 8}, {8, 10}, {5, 4}};
    for (int i = 0; i < 5; i++) {
        tg_module *acts[3] = {NULL, NULL, NULL};
        cr_assert(eq(int, tg_nn_linear_new(&m, dims[i][0], dims[i][1], true, &rng), TG_OK));
        cr_assert(eq(int, tg_nn_sequential_append(seq, m), TG_OK));
        if (i == 0) cr_assert(eq(int, tg_nn_selu_new(&acts[0]), TG_OK));
        if (i == 1) {
            cr_assert(eq(int, tg_nn_celu_new(&acts[0], 0.5), TG_OK));
            cr_assert(eq(int, tg_nn_hardshrink_new(&acts[1], 0.3), TG_OK));
        }
        if (i == 2) {
            cr_assert(eq(int, tg_nn_softshrink_new(&acts[0], 0.2), TG_OK));
            cr_assert(eq(int, tg_nn_threshold_new(&acts[1], 0.1, -0.5), TG_OK));
        }
        if (i == 3) {
            cr_assert(eq(int, tg_nn_glu_new(&acts[0], 1), TG_OK));
            cr_assert(eq(int, tg_nn_softsign_new(&acts[1]), TG_OK));
            cr_assert(eq(int, tg_nn_tanhshrink_new(&acts[2]), TG_OK));
        }
        if (i == 4) cr_assert(eq(int, tg_nn_softmin_new(&acts[0], 0), TG_OK));
        for (int k = 0; k < 3 && acts[k]; k++)
            cr_assert(eq(int, tg_nn_sequential_append(seq, acts[k]), TG_OK));
    }
    expect_torch_names(seq, f, "m");
    check_case(seq, f, "m", "", 1e-5);
    tg_module_release(seq);
    tg_st_free(f);
}

/* Linear -> GELU(approximate='tanh') -> Linear, torch's golden
 * (scripts/make_gelu_tanh_goldens.py). */
Test(nn, gelu_tanh_sequential_matches_torch)
{
    tg_st_file *f = th_golden_load("nn/gelu_tanh_seq.safetensors");
    tg_rng rng;
    tg_rng_init(&rng, 6);
    tg_module *seq = NULL, *m = NULL;
    cr_assert(eq(int, tg_nn_sequential_new(&seq), TG_OK));
    cr_assert(eq(int, tg_nn_linear_new(&m, 6, 8, true, &rng), TG_OK));
    cr_assert(eq(int, tg_nn_sequential_append(seq, m), TG_OK));
    cr_assert(eq(int, tg_nn_gelu_new(&m, "tanh"), TG_OK));
    cr_assert(eq(int, tg_nn_sequential_append(seq, m), TG_OK));
    cr_assert(eq(int, tg_nn_linear_new(&m, 8, 4, true, &rng), TG_OK));
    cr_assert(eq(int, tg_nn_sequential_append(seq, m), TG_OK));
    expect_torch_names(seq, f, "m");
    check_case(seq, f, "m", "", 1e-5);
    tg_module_release(seq);
    tg_st_free(f);
}

/* ---- init ---- */

/* All |v| <= bound, and (for many elements) the spread reaches 0.9 bound,
 * which a wrong fan_in (e.g. C_in instead of C_out for ConvTranspose) fails. */
static void expect_uniform(const tg_tensor *t, double bound, bool check_spread)
{
    double *v = th_doubles(t), mx = 0;
    for (int64_t i = 0; i < tg_tensor_numel(t); i++) {
        cr_assert(fabs(v[i]) <= bound, "|%g| > %g", v[i], bound);
        mx = fmax(mx, fabs(v[i]));
    }
    if (check_spread) cr_assert(mx > 0.9 * bound, "max %g vs bound %g", mx, bound);
    free(v);
}

Test(nn, init_bounds_follow_fan_in)
{
    tg_rng rng;
    tg_rng_init(&rng, 11);
    tg_module *m = NULL;
    cr_assert(eq(int, tg_nn_linear_new(&m, 7, 30, true, &rng), TG_OK));
    expect_uniform(tg_module_find(m, "weight"), 1 / sqrt(7.0), true);
    expect_uniform(tg_module_find(m, "bias"), 1 / sqrt(7.0), true);
    tg_module_release(m);
    /* Conv2d(6, 4, 3x3, groups 2): fan_in = 6/2 * 9 = 27 */
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    p.groups = 2;
    int64_t k[2] = {3, 3};
    cr_assert(eq(int, tg_nn_conv_new(&m, 2, 6, 4, k, &p, true, &rng), TG_OK));
    expect_uniform(tg_module_find(m, "weight"), 1 / sqrt(27.0), true);
    expect_uniform(tg_module_find(m, "bias"), 1 / sqrt(27.0), false);
    tg_module_release(m);
    /* ConvTranspose2d(8, 2, 3x3): weight (8, 2, 3, 3), torch's fan_in = 2 * 9 */
    cr_assert(eq(int, tg_nn_conv_transpose_new(&m, 2, 8, 2, k, NULL, false, &rng), TG_OK));
    expect_uniform(tg_module_find(m, "weight"), 1 / sqrt(18.0), true);
    cr_assert(tg_module_find(m, "bias") == NULL);
    cr_assert(eq(int, tg_module_state_count(m), 1));
    tg_module_release(m);
    /* BatchNorm: weight 1, bias 0, running_mean 0, running_var 1, count 0 (i64) */
    cr_assert(eq(int, tg_nn_batchnorm_new(&m, 2, 3, 1e-5, 0.1, true, true), TG_OK));
    const char *names[] = {"weight", "bias", "running_mean", "running_var"};
    const double want[] = {1, 0, 0, 1};
    for (int i = 0; i < 4; i++) {
        double *v = th_doubles(tg_module_find(m, names[i]));
        for (int c = 0; c < 3; c++) cr_assert(eq(dbl, v[c], want[i]), "%s", names[i]);
        free(v);
    }
    cr_assert(eq(int, tg_tensor_dtype(tg_module_find(m, "num_batches_tracked")), TG_I64));
    tg_module_release(m);
    /* LayerNorm and GroupNorm: weight 1 and bias 0 (f32) of torch's shapes;
     * without affine parameters no state at all */
    const int64_t ns[2] = {2, 3};
    for (int j = 0; j < 4; j++) {
        const bool affine = j < 2;
        cr_assert(eq(int, j % 2 ? tg_nn_group_norm_new(&m, 2, 6, 1e-5, affine)
                                : tg_nn_layer_norm_new(&m, 2, ns, 1e-5, affine), TG_OK));
        cr_assert(eq(int, tg_module_state_count(m), affine ? 2 : 0));
        for (int i = 0; affine && i < 2; i++) {
            const tg_tensor *t = tg_module_find(m, i ? "bias" : "weight");
            cr_assert(eq(int, tg_tensor_dtype(t), TG_F32));
            if (j % 2) th_expect_shape(t, 1, (const int64_t[]){6});
            else th_expect_shape(t, 2, ns);
            for (int64_t e = 0; e < 6; e++) cr_assert(eq(dbl, th_at(t, e), i ? 0.0 : 1.0));
        }
        tg_module_release(m);
    }
}

Test(nn, init_normal_dcgan)
{
    tg_rng rng;
    tg_rng_init(&rng, 5);
    tg_module *gen = nf_make_generator(&rng);
    tg_tensor_fill(tg_module_find(gen, "net.2.bias"), 3.0);
    cr_assert(eq(int, tg_nn_init_normal(gen, 0.0, 0.02, &rng), TG_OK));
    tg_tensor *w = tg_module_find(gen, "net.4.weight");   /* 512 values */
    double *v = th_doubles(w), s = 0, s2 = 0;
    int64_t n = tg_tensor_numel(w);
    for (int64_t i = 0; i < n; i++) {
        s += v[i];
        s2 += v[i] * v[i];
    }
    free(v);
    double mean = s / (double)n, sd = sqrt(s2 / (double)n - mean * mean);
    cr_assert(fabs(mean) < 0.004 && fabs(sd - 0.02) < 0.003, "mean %g sd %g", mean, sd);
    v = th_doubles(tg_module_find(gen, "net.2.weight"));
    for (int c = 0; c < 8; c++) cr_assert(fabs(v[c] - 1.0) < 0.1 && v[c] != 1.0);
    free(v);
    v = th_doubles(tg_module_find(gen, "net.2.bias"));
    for (int c = 0; c < 8; c++) cr_assert(eq(dbl, v[c], 0.0));
    free(v);
    tg_module_release(gen);
}

/* ---- Dropout ---- */

Test(nn, dropout_statistics_and_eval_identity)
{
    int64_t shape[2] = {100, 200};
    tg_tensor *x = NULL, *y = NULL, *y2 = NULL, *y3 = NULL;
    tg_tensor_full(&x, TG_F32, 2, shape, 1.0);
    tg_tensor_set_requires_grad(x, true);
    tg_module *d = NULL, *d2 = NULL;
    cr_assert(eq(int, tg_nn_dropout_new(&d, 0.3, 99), TG_OK));
    cr_assert(eq(int, tg_nn_dropout_new(&d2, 0.3, 99), TG_OK));
    cr_assert(eq(int, tg_module_forward(d, &y, x), TG_OK));
    cr_assert(eq(int, tg_module_forward(d2, &y2, x), TG_OK));
    cr_assert(eq(int, tg_module_forward(d2, &y3, x), TG_OK));
    double *v = th_doubles(y), *v2 = th_doubles(y2), *v3 = th_doubles(y3);
    int64_t zeros = 0, same3 = 0, n = 20000;
    for (int64_t i = 0; i < n; i++) {
        cr_assert(v[i] == 0.0 || fabs(v[i] - 1 / 0.7) < 1e-6, "value %g", v[i]);
        zeros += v[i] == 0.0;
        cr_assert(v[i] == v2[i], "same seed, same call: same mask");
        same3 += v3[i] == v2[i];
    }
    /* Binomial(20000, 0.3): sd = 65, so +-400 is > 6 sd */
    cr_assert(llabs(zeros - 6000) < 400, "zeros %lld", (long long)zeros);
    cr_assert(same3 < n - 1000, "the second call draws a new mask");
    /* d sum(y) / dx is the mask itself */
    cr_assert(eq(int, tg_backward(y, x, NULL), TG_OK));
    double *g = th_doubles(tg_tensor_grad(x));
    for (int64_t i = 0; i < n; i++) cr_assert(g[i] == v[i]);
    free(g);
    free(v);
    free(v2);
    free(v3);
    tg_tensor_release(y);
    tg_tensor_release(y2);
    tg_tensor_release(y3);
    tg_module_train(d, false);
    cr_assert(eq(int, tg_module_forward(d, &y, x), TG_OK));
    th_expect_near("eval dropout", y, x, 0, 0);
    tg_tensor_release(y);
    tg_module_release(d);
    tg_module_release(d2);
    tg_tensor_release(x);
}

/* ---- BatchNorm gradients in f64 ---- */

static int module_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    return tg_module_forward(user, out, in[0]);
}

static void bn_gradcheck(bool training, bool affine)
{
    tg_module *m = NULL;
    cr_assert(eq(int, tg_nn_batchnorm_new(&m, 2, 3, 1e-5, 0.1, affine, true), TG_OK));
    cr_assert(eq(int, tg_module_to_dtype(m, TG_F64), TG_OK));
    tg_rng rng;
    tg_rng_init(&rng, 17);
    tg_tensor *in[3] = {NULL, NULL, NULL};
    int64_t xs[4] = {2, 3, 2, 2};
    tg_tensor_zeros(&in[0], TG_F64, 4, xs);
    tg_tensor_rand_normal(in[0], &rng, 0.5, 1.0);
    tg_tensor_set_requires_grad(in[0], true);
    int n = 1;
    if (affine) {
        in[1] = tg_module_find(m, "weight");
        in[2] = tg_module_find(m, "bias");
        cr_assert(eq(int, tg_tensor_dtype(in[1]), TG_F64));
        tg_tensor_rand_normal(in[1], &rng, 1.0, 0.3);
        tg_tensor_rand_normal(in[2], &rng, 0.0, 0.3);
        n = 3;
    }
    tg_tensor_rand_uniform(tg_module_find(m, "running_var"), &rng, 0.5, 2.0);
    tg_tensor_rand_normal(tg_module_find(m, "running_mean"), &rng, 0.0, 0.5);
    tg_module_train(m, training);
    tg_gradcheck_opts o = TG_GRADCHECK_OPTS_INIT;
    cr_assert(eq(int, tg_gradcheck(module_fn, m, n, in, &o), TG_OK), "%s", tg_error_message());
    cr_assert(eq(int, tg_gradgradcheck(module_fn, m, n, in, &o), TG_OK), "%s",
              tg_error_message());
    tg_tensor_release(in[0]);
    tg_module_release(m);
}

Test(nn, batchnorm_gradcheck_f64)
{
    bn_gradcheck(true, true);
    bn_gradcheck(true, false);
    bn_gradcheck(false, true);
}

/* module.zero_grad(set_to_none=False) reaches the parameters of every
 * descendant: each .grad the parameter owns is zeroed in place, one the
 * caller retained is replaced by a new zero tensor and keeps its values. */
Test(nn, zero_grad_in_place_reaches_every_descendant)
{
    tg_rng rng;
    tg_rng_init(&rng, 9);
    tg_module *seq = NULL, *a = NULL, *b = NULL;
    cr_assert(eq(int, tg_nn_sequential_new(&seq), TG_OK));
    cr_assert(eq(int, tg_nn_linear_new(&a, 3, 4, true, &rng), TG_OK));
    cr_assert(eq(int, tg_nn_linear_new(&b, 4, 2, true, &rng), TG_OK));
    tg_nn_sequential_append(seq, a);
    tg_nn_sequential_append(seq, b);
    tg_tensor *x = th_rand_uniform(TG_F32, 2, (int64_t[]){5, 3}, 4), *y = NULL, *l = NULL;
    cr_assert(eq(int, tg_module_forward(seq, &y, x), TG_OK));
    cr_assert(eq(int, tg_sum(&l, y), TG_OK));
    cr_assert(eq(int, tg_backward(l, NULL, NULL), TG_OK));
    tg_tensor **ps = NULL;
    int n = 0;
    cr_assert(eq(int, tg_module_parameters(seq, &ps, &n), TG_OK));
    cr_assert(eq(int, n, 4));
    tg_tensor *grads[4], *held = tg_tensor_retain(tg_tensor_grad(ps[3]));
    double held0 = th_at(held, 0);
    cr_assert(held0 != 0);
    for (int i = 0; i < n; i++) grads[i] = tg_tensor_grad(ps[i]);
    cr_assert(eq(int, tg_module_zero_grad_ex(seq, false), TG_OK), "%s", tg_error_message());
    for (int i = 0; i < n; i++) {
        const tg_tensor *g = tg_tensor_grad(ps[i]);
        cr_assert(g != NULL);
        cr_assert(i == 3 ? g != grads[i] : g == grads[i], "parameter %d", i);
        for (int64_t k = 0; k < tg_tensor_numel(g); k++)
            cr_assert(eq(dbl, th_at(g, k), 0.0), "parameter %d element %lld", i, (long long)k);
    }
    cr_assert(eq(dbl, th_at(held, 0), held0));
    cr_assert(eq(int, tg_module_zero_grad_ex(seq, true), TG_OK));
    for (int i = 0; i < n; i++) cr_assert(tg_tensor_grad(ps[i]) == NULL);
    cr_assert(eq(int, tg_module_zero_grad_ex(NULL, false), TG_EINVAL));
    free(ps);
    tg_tensor_release(held);
    tg_tensor_release(x);
    tg_tensor_release(y);
    tg_tensor_release(l);
    tg_module_release(seq);
}
