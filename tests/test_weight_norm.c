/* tests/test_weight_norm.c - tg_weight_norm, tg_norm_except_dim,
 * tg_nn_weight_norm, tg_nn_remove_weight_norm and
 * tg_nn_remove_spectral_norm: PyTorch 1.13's initial g and v, outputs,
 * computed weights, gradients, SGD step and removed weights for Linear,
 * Conv1d, ConvTranspose1d and ConvTranspose2d at dim 0, 1 and None, in f32
 * and f64 (tests/golden/weight_norm.safetensors, written by
 * scripts/make_weight_norm_goldens.py); torch's norm shapes for every dim;
 * f64 gradcheck to second order; torch's state dict keys and order, a
 * safetensors round trip; refusals that change nothing. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

static void setup(void) { th_tmp_dir_make("tg_wn_"); }

TestSuite(weight_norm, .init = setup, .fini = th_tmp_dir_remove);

static const char *const cases[] = {"lin", "conv1d", "convt1d", "convt2d"};
static const char *const dim_names[] = {"d0", "d1", "dn"};
static const int dims[] = {0, 1, TG_NN_WEIGHT_NORM_NONE};

/* The plain module of golden case c (the script's), in dtype dt. */
static tg_module *case_module(const char *c, tg_dtype dt)
{
    tg_rng rng;
    tg_rng_init(&rng, 3);
    tg_module *m = NULL;
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    for (int i = 0; i < 2; i++) {
        p.stride[i] = 2;
        p.padding[i][0] = p.padding[i][1] = 1;
    }
    int rc;
    if (!strcmp(c, "lin")) {
        rc = tg_nn_linear_new(&m, 5, 4, true, &rng);
    } else if (!strcmp(c, "conv1d")) {
        rc = tg_nn_conv_new(&m, 1, 3, 4, (int64_t[]){3}, &p, true, &rng);
    } else if (!strcmp(c, "convt1d")) {
        rc = tg_nn_conv_transpose_new(&m, 1, 4, 3, (int64_t[]){4}, &p, true, &rng);
    } else {
        p.output_padding[0] = p.output_padding[1] = 1;
        rc = tg_nn_conv_transpose_new(&m, 2, 4, 3, (int64_t[]){3, 3}, &p, true, &rng);
    }
    cr_assert(eq(int, rc, TG_OK), "%s", tg_error_message());
    if (dt != TG_F32) cr_assert(eq(int, tg_module_to_dtype(m, dt), TG_OK));
    return m;
}

static void expect_keys(const tg_module *m, int n, const char *const *keys)
{
    cr_assert(eq(int, tg_module_state_count(m), n));
    for (int i = 0; i < n; i++) {
        char name[TG_MODULE_NAME_MAX];
        cr_assert(eq(int, tg_module_state_at(m, i, name, sizeof name, NULL, NULL), TG_OK));
        cr_assert(eq(str, name, (char *)keys[i]));
    }
}

static const char *const wn_keys[] = {"bias", "weight_g", "weight_v"};
static const char *const plain_keys[] = {"bias", "weight"};

/* Tolerances, relative to the largest |want| of each tensor.  f32: g is
 * the norm summed in double and rounded once (torch sums in f32), so g, w
 * and y differ from torch's by a few ulps of the largest element, and the
 * gradients, sums of up to 36 products of such values, by a few more: the
 * largest difference over these cases lies between 3e-7 and 1e-6, and
 * 1e-5 keeps a margin over it while an error in one term (a lost factor or
 * a missing term is of the order of the values) stays far outside.  f64:
 * the same ops in double, the largest difference between 1e-15 and 1e-14;
 * 1e-12. */
static double tol(tg_dtype dt) { return dt == TG_F32 ? 1e-5 : 1e-12; }

/* One case at one dim in dtype tn ("f32" / "f64"): the life of a
 * weight-normed layer against torch's. */
static void check_case(const tg_st_file *f, const char *tn, const char *c, int d)
{
    const tg_dtype dt = tn[1] == '3' ? TG_F32 : TG_F64;
    char pre[64], k[96];
    tg_module *m = case_module(c, dt);
    snprintf(pre, sizeof pre, "%s.%s", tn, c);
    snprintf(k, sizeof k, "%s.w0", pre);
    cr_assert(eq(int, tg_module_load_state_dict(m, f, k, true), TG_OK), "%s", tg_error_message());
    tg_tensor *w0 = tg_module_find(m, "weight");
    cr_assert(eq(int, tg_nn_weight_norm(m, "weight", dims[d]), TG_OK), "%s",
              tg_error_message());
    snprintf(pre, sizeof pre, "%s.%s.%s", tn, c, dim_names[d]);
    /* torch's keys, order and initial values; v is the weight itself */
    expect_keys(m, 3, wn_keys);
    cr_assert(eq(ptr, tg_module_find(m, "weight_v"), w0));
    snprintf(k, sizeof k, "%s.init", pre);
    th_expect_state(m, f, k, tol(dt));
    th_expect_close_scaled(pre, tg_module_find(m, "weight"), w0, tol(dt));
    snprintf(k, sizeof k, "%s.sd", pre);
    cr_assert(eq(int, tg_module_load_state_dict(m, f, k, true), TG_OK), "%s", tg_error_message());

    tg_optimizer *opt = NULL;
    tg_sgd_opts so = TG_SGD_OPTS_INIT;
    so.lr = 0.1;
    cr_assert(eq(int, tg_sgd_from_module(&opt, m, &so), TG_OK));
    tg_tensor *y = NULL;
    snprintf(k, sizeof k, "%s.%s", tn, c);
    cr_assert(eq(int, tg_module_forward(m, &y, th_golden_at(f, "%s.%s", k, "x")), TG_OK), "%s",
              tg_error_message());
    th_expect_close_scaled(pre, y, th_golden_get(f, pre, "y"), tol(dt));
    th_expect_close_scaled(pre, tg_module_find(m, "weight"), th_golden_get(f, pre, "w"), tol(dt));
    th_backward_with(y, th_golden_get(f, k, "gy"));
    for (int i = 0; i < 3; i++) {
        snprintf(k, sizeof k, "grad.%s", wn_keys[i]);
        th_expect_close_scaled(k, tg_tensor_grad(tg_module_find(m, wn_keys[i])),
                               th_golden_get(f, pre, k), tol(dt));
    }
    cr_assert(eq(int, tg_optimizer_step(opt), TG_OK));
    snprintf(k, sizeof k, "%s.step", pre);
    th_expect_state(m, f, k, tol(dt));

    cr_assert(eq(int, tg_nn_remove_weight_norm(m, "weight"), TG_OK), "%s", tg_error_message());
    expect_keys(m, 2, plain_keys);
    snprintf(k, sizeof k, "%s.removed", pre);
    th_expect_state(m, f, k, tol(dt));
    tg_optimizer_free(opt);
    tg_tensor_release(y);
    tg_module_release(m);
}

Test(weight_norm, matches_torch_in_f32_and_f64)
{
    tg_st_file *f = th_golden_load("weight_norm.safetensors");
    for (int t = 0; t < 2; t++)
        for (int c = 0; c < 4; c++)
            for (int d = 0; d < 3; d++) check_case(f, t ? "f64" : "f32", cases[c], d);
    tg_st_free(f);
}

/* torch.norm_except_dim's shapes for v (3, 4, 5) at every dim torch
 * takes, and the values: each g element is the norm of its slice, and
 * weight_norm(v, norm_except_dim(v), dim) is v again. */
Test(weight_norm, norm_except_dim_has_torch_shapes)
{
    tg_tensor *v = th_rand_uniform(TG_F64, 3, (int64_t[]){3, 4, 5}, 7);
    const int ds[] = {0, 1, 2, -1, -2, -3};
    const int64_t want[6][3] = {{3, 1, 1}, {1, 4, 1}, {1, 1, 5}, {0}, {1, 4, 1}, {3, 1, 1}};
    for (int i = 0; i < 6; i++) {
        tg_tensor *n = NULL, *w = NULL;
        cr_assert(eq(int, tg_norm_except_dim(&n, v, ds[i]), TG_OK), "%s", tg_error_message());
        const int nd = ds[i] == -1 ? 0 : 3;
        cr_assert(eq(int, tg_tensor_ndim(n), nd), "dim %d", ds[i]);
        for (int j = 0; j < nd; j++) cr_assert(eq(i64, tg_tensor_dim(n, j), want[i][j]));
        /* the norm of the slice holding element (a, b, c), from the sums */
        const int keep = ds[i] < -1 ? ds[i] + 3 : ds[i];
        for (int64_t e = 0; e < 60; e++) {
            const int64_t idx[3] = {e / 20, e / 5 % 4, e % 5};
            double ss = 0, x = 0, got = 0;
            for (int64_t o = 0; o < 60; o++) {
                const int64_t jdx[3] = {o / 20, o / 5 % 4, o % 5};
                if (keep >= 0 && jdx[keep] != idx[keep]) continue;
                tg_tensor_get_flat(v, o, &x);
                ss += x * x;
            }
            int64_t at = keep < 0 ? 0 : idx[keep];
            tg_tensor_get_flat(n, at, &got);
            cr_assert(th_close(got, sqrt(ss), 1e-14, 0), "dim %d [%lld]", ds[i], (long long)e);
        }
        cr_assert(eq(int, tg_weight_norm(&w, v, n, ds[i]), TG_OK), "%s", tg_error_message());
        th_expect_near("v again", w, v, 1e-15, 0);
        th_release_all(2, (tg_tensor *[]){n, w});
    }
    /* a 1-d v at dim 0: |v| */
    tg_tensor *v1 = NULL, *n1 = NULL, *a1 = NULL;
    cr_assert(eq(int, tg_tensor_from_data(&v1, TG_F64, 1, (int64_t[]){3},
                                          (double[]){-2, 0.5, 3}), TG_OK));
    cr_assert(eq(int, tg_norm_except_dim(&n1, v1, 0), TG_OK));
    cr_assert(eq(int, tg_abs(&a1, v1), TG_OK));
    th_expect_same_bits("1-d", v1, n1, a1);
    th_release_all(4, (tg_tensor *[]){v, v1, n1, a1});
}

static int wn_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    return tg_weight_norm(out, in[0], in[1], *(const int *)user);
}

/* First and second derivatives in v and g, f64, at every dim of a 3-d v
 * and of a 1-d one. */
Test(weight_norm, gradcheck_f64_first_and_second_order)
{
    const int ds[] = {0, 1, 2, -1, -2};
    const int64_t gs[5][3] = {{3, 1, 1}, {1, 4, 1}, {1, 1, 5}, {0}, {1, 4, 1}};
    for (int i = 0; i < 6; i++) {
        const bool one_d = i == 5;
        int dim = one_d ? 0 : ds[i];
        tg_tensor *v = one_d ? th_rand_uniform(TG_F64, 1, (int64_t[]){4}, 3)
                             : th_rand_uniform(TG_F64, 3, (int64_t[]){3, 4, 5}, 3 + i);
        tg_tensor *g = one_d ? th_rand_uniform(TG_F64, 1, (int64_t[]){4}, 30)
                             : th_rand_uniform(TG_F64, dim == -1 ? 0 : 3, gs[i], 30 + i);
        tg_tensor_set_requires_grad(v, true);
        tg_tensor_set_requires_grad(g, true);
        tg_tensor *in[2] = {v, g};
        th_expect_gradchecks(wn_fn, &dim, 2, in, "dim %d", dim);
        th_release_all(2, (tg_tensor *[]){v, g});
    }
}

static int module_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    return tg_module_forward(user, out, in[0]);
}

/* A weight-normed ConvTranspose1d in f64: first and second derivatives in
 * x, weight_g, weight_v and bias, through the module's forward. */
Test(weight_norm, module_gradcheck_f64)
{
    for (int d = 0; d < 3; d++) {
        tg_module *m = case_module("convt1d", TG_F64);
        cr_assert(eq(int, tg_nn_weight_norm(m, "weight", dims[d]), TG_OK));
        tg_tensor *x = th_rand_uniform(TG_F64, 3, (int64_t[]){2, 4, 3}, 5);
        tg_tensor_set_requires_grad(x, true);
        tg_tensor *in[4] = {x, tg_module_find(m, "weight_g"), tg_module_find(m, "weight_v"),
                            tg_module_find(m, "bias")};
        tg_gradcheck_opts o = TG_GRADCHECK_OPTS_INIT;
        cr_assert(eq(int, tg_gradcheck(module_fn, m, 4, in, &o), TG_OK), "%s",
                  tg_error_message());
        cr_assert(eq(int, tg_gradgradcheck(module_fn, m, 4, in, &o), TG_OK), "%s",
                  tg_error_message());
        tg_tensor_release(x);
        tg_module_release(m);
    }
}

/* A state dict with a 0-d weight_g (dim None) saved as safetensors loads
 * strictly into another weight-normed module, which then computes the same
 * output bit for bit. */
Test(weight_norm, state_dict_round_trips_through_safetensors)
{
    for (int d = 0; d < 3; d++) {
        tg_module *a = case_module("convt1d", TG_F32), *b = case_module("convt1d", TG_F32);
        tg_rng rng;
        tg_rng_init(&rng, 77);
        cr_assert(eq(int, tg_tensor_rand_normal(tg_module_find(b, "weight"), &rng, 0, 1), TG_OK));
        cr_assert(eq(int, tg_nn_weight_norm(a, "weight", dims[d]), TG_OK));
        cr_assert(eq(int, tg_nn_weight_norm(b, "weight", dims[d]), TG_OK));
        cr_assert(eq(int, tg_tensor_ndim(tg_module_find(a, "weight_g")), d == 2 ? 0 : 3));
        tg_st_file *f = NULL;
        char path[256];
        th_tmp_path(path, sizeof path, "sd.safetensors");
        cr_assert(eq(int, tg_st_new(&f), TG_OK));
        cr_assert(eq(int, tg_module_state_dict_save(a, f, "m"), TG_OK));
        cr_assert(eq(int, tg_safetensors_save(f, path), TG_OK));
        tg_st_free(f);
        cr_assert(eq(int, tg_safetensors_load(&f, path), TG_OK));
        cr_assert(eq(int, tg_module_load_state_dict(b, f, "m", true), TG_OK), "%s",
                  tg_error_message());
        tg_st_free(f);
        tg_tensor *x = th_rand_uniform(TG_F32, 3, (int64_t[]){2, 4, 5}, 8), *ya = NULL,
                  *yb = NULL;
        for (int i = 0; i < 3; i++)
            th_expect_same_bits(wn_keys[i], x, tg_module_find(b, wn_keys[i]),
                                tg_module_find(a, wn_keys[i]));
        cr_assert(eq(int, tg_module_forward(a, &ya, x), TG_OK));
        cr_assert(eq(int, tg_module_forward(b, &yb, x), TG_OK));
        th_expect_same_bits("output", x, yb, ya);
        th_release_all(3, (tg_tensor *[]){x, ya, yb});
        tg_module_release(a);
        tg_module_release(b);
    }
}

/* tg_module_copy of a weight-normed module keeps the reparametrization:
 * the copy computes the original's output from its own g and v. */
Test(weight_norm, a_copy_keeps_it_and_is_independent)
{
    tg_module *m = case_module("convt1d", TG_F32), *c = NULL;
    cr_assert(eq(int, tg_nn_weight_norm(m, "weight", 0), TG_OK));
    cr_assert(eq(int, tg_module_copy(&c, m), TG_OK), "%s", tg_error_message());
    expect_keys(c, 3, wn_keys);
    cr_assert(tg_module_find(c, "weight_g") != tg_module_find(m, "weight_g"));
    tg_tensor *x = th_rand_uniform(TG_F32, 3, (int64_t[]){2, 4, 5}, 9), *y = NULL, *yc = NULL;
    cr_assert(eq(int, tg_module_forward(m, &y, x), TG_OK));
    cr_assert(eq(int, tg_module_forward(c, &yc, x), TG_OK), "%s", tg_error_message());
    th_expect_same_bits("copy", x, yc, y);
    tg_tensor_release(yc);
    cr_assert(eq(int, tg_tensor_fill(tg_module_find(c, "weight_g"), 0.0), TG_OK));
    cr_assert(eq(int, tg_module_forward(c, &yc, x), TG_OK));
    double a = 0, b = 0;
    tg_tensor_get_flat(yc, 0, &a);
    tg_tensor_get_flat(tg_module_find(c, "bias"), 0, &b);
    cr_assert(eq(dbl, a, b), "g = 0 leaves the bias alone");
    tg_tensor_release(yc);
    cr_assert(eq(int, tg_module_forward(m, &yc, x), TG_OK));
    th_expect_same_bits("the original is unchanged", x, yc, y);
    th_release_all(3, (tg_tensor *[]){x, y, yc});
    tg_module_release(m);
    tg_module_release(c);
}

/* Inside a bf16 autocast scope the weight is still computed in f32, the
 * parameters' dtype, with the bits it has outside (the layer's matmul is
 * what autocast lowers). */
Test(weight_norm, autocast_computes_the_weight_in_the_parameters_dtype)
{
    tg_module *m = case_module("lin", TG_F32);
    cr_assert(eq(int, tg_nn_weight_norm(m, "weight", 0), TG_OK));
    tg_tensor *x = th_rand_uniform(TG_F32, 2, (int64_t[]){3, 5}, 6), *y = NULL, *w = NULL;
    cr_assert(eq(int, tg_module_forward(m, &y, x), TG_OK));
    cr_assert(eq(int, tg_tensor_clone(&w, tg_module_find(m, "weight")), TG_OK));
    tg_tensor_release(y);
    cr_assert(eq(int, tg_autocast_begin(TG_BF16), TG_OK));
    int rc = tg_module_forward(m, &y, x);
    tg_autocast_end();
    cr_assert(eq(int, rc, TG_OK), "%s", tg_error_message());
    th_expect_same_bits("weight under autocast", x, tg_module_find(m, "weight"), w);
    th_release_all(3, (tg_tensor *[]){x, y, w});
    tg_module_release(m);
}

/* Negative dims count from the end, as torch's: -2 of a 3-d weight is 1;
 * -1 is None (one g). */
Test(weight_norm, negative_dims_are_torch_s)
{
    tg_module *m = case_module("convt1d", TG_F32);
    cr_assert(eq(int, tg_nn_weight_norm(m, "weight", -2), TG_OK));
    const tg_tensor *g = tg_module_find(m, "weight_g");
    cr_assert(eq(int, tg_tensor_ndim(g), 3));
    cr_assert(eq(i64, tg_tensor_dim(g, 0), 1));
    cr_assert(eq(i64, tg_tensor_dim(g, 1), 3));
    cr_assert(eq(i64, tg_tensor_dim(g, 2), 1));
    tg_module_release(m);
}

/* torch.nn.utils.remove_spectral_norm's weight and state dict order. */
Test(weight_norm, remove_spectral_norm_matches_torch)
{
    tg_st_file *f = th_golden_load("weight_norm.safetensors");
    tg_rng rng;
    tg_rng_init(&rng, 2);
    tg_module *m = case_module("lin", TG_F32);
    cr_assert(eq(int, tg_nn_spectral_norm(m, "weight", 1, 1e-12, -1, &rng), TG_OK));
    cr_assert(eq(int, tg_module_load_state_dict(m, f, "f32.sn.sd", true), TG_OK), "%s",
              tg_error_message());
    tg_tensor *u = NULL;
    cr_assert(eq(int, tg_tensor_clone(&u, tg_module_find(m, "weight_u")), TG_OK));
    cr_assert(eq(int, tg_nn_remove_spectral_norm(m, "weight"), TG_OK), "%s",
                tg_error_message());
    expect_keys(m, 2, plain_keys);
    cr_assert(tg_module_find(m, "weight_orig") == NULL && tg_module_find(m, "weight_u") == NULL);
    th_expect_state(m, f, "f32.sn.removed", 1e-6);
    /* a plain Linear again: y = x W^T + b, and it takes spectral norm anew */
    tg_tensor *x = th_rand_uniform(TG_F32, 2, (int64_t[]){2, 5}, 4), *y = NULL, *want = NULL;
    cr_assert(eq(int, tg_module_forward(m, &y, x), TG_OK));
    cr_assert(eq(int, tg_linear(&want, x, tg_module_find(m, "weight"), tg_module_find(m, "bias")),
                 TG_OK));
    th_expect_same_bits("plain forward", x, y, want);
    cr_assert(eq(int, tg_nn_spectral_norm(m, "weight", 1, 1e-12, -1, &rng), TG_OK));
    cr_assert(eq(int, tg_nn_remove_spectral_norm(m, "weight"), TG_OK));
    th_release_all(4, (tg_tensor *[]){x, y, want, u});
    tg_module_release(m);
    tg_st_free(f);
}

/* After remove_weight_norm the module is a plain layer that an optimizer
 * made then trains, and weight norm applies again. */
Test(weight_norm, remove_gives_a_plain_trainable_weight)
{
    tg_module *m = case_module("conv1d", TG_F32);
    cr_assert(eq(int, tg_nn_weight_norm(m, "weight", 0), TG_OK));
    tg_tensor *g = tg_module_find(m, "weight_g");
    cr_assert(eq(int, tg_tensor_fill(g, 2.0), TG_OK));
    tg_tensor *x = th_rand_uniform(TG_F32, 3, (int64_t[]){2, 3, 7}, 4), *y0 = NULL, *y = NULL;
    cr_assert(eq(int, tg_module_forward(m, &y0, x), TG_OK));
    cr_assert(eq(int, tg_nn_remove_weight_norm(m, "weight"), TG_OK), "%s", tg_error_message());
    expect_keys(m, 2, plain_keys);
    cr_assert(eq(int, tg_module_parameter_count(m), 2));
    cr_assert(tg_tensor_requires_grad(tg_module_find(m, "weight")));
    cr_assert(tg_tensor_is_leaf(tg_module_find(m, "weight")));
    cr_assert(eq(int, tg_module_forward(m, &y, x), TG_OK));
    th_expect_same_bits("same output", x, y, y0);
    /* each row's norm is now g = 2 */
    tg_tensor *n = NULL;
    cr_assert(eq(int, tg_norm_except_dim(&n, tg_module_find(m, "weight"), 0), TG_OK));
    for (int i = 0; i < 4; i++) {
        double a = 0;
        tg_tensor_get_flat(n, i, &a);
        cr_assert(th_close(a, 2.0, 1e-6, 0));
    }
    cr_assert(eq(int, tg_nn_weight_norm(m, "weight", 0), TG_OK));
    expect_keys(m, 3, wn_keys);
    th_release_all(4, (tg_tensor *[]){x, y0, y, n});
    tg_module_release(m);
}

/* Each refusal leaves the module's state keys as they were. */
static void expect_refused(const tg_module *m, int rc, int status, const char *words, int n,
                           const char *const *keys)
{
    th_expect_refused(rc, status, words, NULL);
    expect_keys(m, n, keys);
}

Test(weight_norm, refusals_name_the_argument_and_change_nothing)
{
    tg_module *m = case_module("lin", TG_F32), *act = NULL;
    const char *const lin_keys[] = {"weight", "bias"};
    expect_refused(m, tg_nn_weight_norm(m, "nope", 0), TG_EINVAL, "no parameter 'nope'", 2,
                   lin_keys);
    expect_refused(m, tg_nn_weight_norm(m, "weight", 2), TG_EINVAL, "dim=2 must be in [-2, 2)",
                   2, lin_keys);
    expect_refused(m, tg_nn_weight_norm(m, "weight", -3), TG_EINVAL, "dim=-3", 2, lin_keys);
    expect_refused(m, tg_nn_weight_norm(m, NULL, 0), TG_EINVAL, "must not be NULL", 2,
                   lin_keys);
    cr_assert(eq(int, tg_nn_weight_norm(NULL, "weight", 0), TG_EINVAL));
    expect_refused(m, tg_nn_remove_weight_norm(m, "weight"), TG_EINVAL,
                   "weight norm of 'weight' not found in Linear", 2, lin_keys);
    expect_refused(m, tg_nn_remove_spectral_norm(m, "weight"), TG_EINVAL,
                   "spectral norm of 'weight' not found in Linear", 2, lin_keys);
    cr_assert(eq(int, tg_nn_remove_weight_norm(m, NULL), TG_EINVAL));
    cr_assert(eq(int, tg_nn_remove_spectral_norm(NULL, "weight"), TG_EINVAL));

    /* a name it would add is taken: nothing is added */
    tg_tensor *t = NULL;
    tg_tensor_zeros(&t, TG_F32, 1, (int64_t[]){3});
    cr_assert(eq(int, tg_module_add_buffer(m, "weight_g", t), TG_OK));
    const char *const taken[] = {"weight", "bias", "weight_g"};
    expect_refused(m, tg_nn_weight_norm(m, "weight", 0), TG_EINVAL,
                   "'weight_g' is already used", 3, taken);
    cr_assert(eq(int, tg_module_parameter_count(m), 2));
    tg_module_release(m);

    /* twice, and weight norm over spectral norm and back */
    m = case_module("lin", TG_F32);
    cr_assert(eq(int, tg_nn_weight_norm(m, "weight", 0), TG_OK));
    expect_refused(m, tg_nn_weight_norm(m, "weight", 0), TG_EINVAL, "already has weight norm",
                   3, wn_keys);
    tg_rng rng;
    tg_rng_init(&rng, 1);
    expect_refused(m, tg_nn_spectral_norm(m, "weight", 1, 1e-12, -1, &rng), TG_EINVAL,
                   "already computed", 3, wn_keys);
    expect_refused(m, tg_nn_remove_spectral_norm(m, "weight"), TG_EINVAL,
                   "spectral norm of 'weight' not found", 3, wn_keys);
    tg_module_release(m);
    m = case_module("lin", TG_F32);
    cr_assert(eq(int, tg_nn_spectral_norm(m, "weight", 1, 1e-12, -1, &rng), TG_OK));
    const char *const sn_keys[] = {"bias", "weight_orig", "weight_u", "weight_v"};
    expect_refused(m, tg_nn_weight_norm(m, "weight", 0), TG_EINVAL, "already computed", 4,
                   sn_keys);
    expect_refused(m, tg_nn_remove_weight_norm(m, "weight"), TG_EINVAL,
                   "weight norm of 'weight' not found", 4, sn_keys);
    tg_module_release(m);

    /* a module without parameters */
    cr_assert(eq(int, tg_nn_activation_new(&act, TG_ACT_RELU, 0), TG_OK));
    th_expect_refused(tg_nn_weight_norm(act, "weight", 0), TG_EINVAL, "no parameter 'weight'",
                      NULL);
    tg_module_release(act);
}

Test(weight_norm, op_refusals_leave_out_untouched)
{
    tg_tensor *v = th_rand_uniform(TG_F32, 3, (int64_t[]){3, 4, 5}, 2), *out = NULL;
    tg_tensor *g0 = th_rand_uniform(TG_F32, 3, (int64_t[]){3, 1, 1}, 3);
    tg_tensor *bad = th_rand_uniform(TG_F32, 1, (int64_t[]){4}, 3);
    tg_tensor *g64 = th_rand_uniform(TG_F64, 3, (int64_t[]){3, 1, 1}, 3);
    th_expect_refused(tg_weight_norm(&out, v, g0, 3), TG_EINVAL, "dim=3 must be in [-3, 3)",
                      out);
    th_expect_refused(tg_weight_norm(&out, v, g0, -4), TG_EINVAL, "dim=-4", out);
    th_expect_refused(tg_norm_except_dim(&out, v, 3), TG_EINVAL, "norm_except_dim: dim=3", out);
    th_expect_refused(tg_weight_norm(&out, v, bad, 0), TG_ESHAPE, "g must broadcast", out);
    th_expect_refused(tg_weight_norm(&out, v, g64, 0), TG_EDTYPE, "g has dtype f64", out);
    th_expect_refused(tg_weight_norm(&out, v, NULL, 0), TG_EINVAL, "g must not be NULL", out);
    th_expect_refused(tg_weight_norm(&out, NULL, g0, 0), TG_EINVAL, "must not be NULL", out);
    th_release_all(4, (tg_tensor *[]){v, g0, bad, g64});
}
