/* tests/test_nn.c - nn modules against PyTorch.
 *
 * The goldens (scripts/make_nn_goldens.py) hold each module's torch
 * state_dict, an input, the output and every gradient of sum(y * grad_y).
 * Loading that state_dict into our module through tg_module_load_state_dict
 * tests the interchange (names, layouts) and the numbers at once.  The rest:
 * state-dict order vs the file's key order, BatchNorm running statistics,
 * Dropout statistics, save/load round trip, load errors leaving the module
 * unchanged, init bounds, and gradcheck/gradgradcheck of BatchNorm in f64. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "helpers.h"
#include "internal.h"
#include "tapegrad/autograd.h"
#include "tapegrad/nn.h"
#include "tapegrad/ops.h"
#include "tapegrad/optim.h"
#include "tapegrad/safetensors.h"

/* ---- helpers ---- */

static tg_tensor *must_get(const tg_st_file *f, const char *key)
{
    tg_tensor *t = tg_st_get(f, key);
    cr_assert(t != NULL, "golden has no key '%s'", key);
    return t;
}

static void expect_close(const tg_tensor *got, const tg_tensor *want, double atol, double rtol,
                         const char *what)
{
    cr_assert(got != NULL, "%s: no tensor", what);
    cr_assert(tg_tensor_same_shape(got, want), "%s: shape differs", what);
    double *a = th_doubles(got), *b = th_doubles(want);
    for (int64_t i = 0; i < tg_tensor_numel(want); i++)
        cr_assert(fabs(a[i] - b[i]) <= atol + rtol * fabs(b[i]), "%s[%lld]: got %.9g, want %.9g",
                  what, (long long)i, a[i], b[i]);
    free(a);
    free(b);
}

/* Snapshot of every state value of m, in state-dict order (for "unchanged"). */
static double *snapshot(const tg_module *m, int64_t *n)
{
    int64_t total = 0;
    for (int i = 0; i < tg_module_state_count(m); i++) {
        tg_tensor *t = NULL;
        tg_module_state_at(m, i, NULL, 0, &t, NULL);
        total += tg_tensor_numel(t);
    }
    double *v = malloc(sizeof(double) * (size_t)(total + 1));
    int64_t k = 0;
    for (int i = 0; i < tg_module_state_count(m); i++) {
        tg_tensor *t = NULL;
        tg_module_state_at(m, i, NULL, 0, &t, NULL);
        tg_tensor_to_doubles(t, v + k, tg_tensor_numel(t));
        k += tg_tensor_numel(t);
    }
    *n = total;
    return v;
}

static void expect_snapshot(const tg_module *m, const double *before, int64_t n)
{
    int64_t n2;
    double *now = snapshot(m, &n2);
    cr_assert(eq(i64, n2, n));
    for (int64_t i = 0; i < n; i++)
        cr_assert(now[i] == before[i], "state value %lld changed", (long long)i);
    free(now);
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
    expect_close(y, must_get(f, key), tol, tol, key);
    cr_assert(eq(int, tg_backward(y, must_get(f, "grad_y"), NULL), TG_OK), "%s",
              tg_error_message());
    snprintf(key, sizeof key, "%sgrad_x", tag);
    expect_close(tg_tensor_grad(x), must_get(f, key), tol, tol, key);
    for (int i = 0; i < tg_module_state_count(m); i++) {
        tg_tensor *t;
        bool is_param;
        tg_module_state_at(m, i, name, sizeof name, &t, &is_param);
        if (!is_param) continue;
        snprintf(key, sizeof key, "%sgrad.%s.%s", tag, prefix, name);
        expect_close(tg_tensor_grad(t), must_get(f, key), tol, tol, key);
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
        expect_close(t, must_get(f, key), 1e-6, 1e-5, key);
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
    double *now = snapshot(m, &n);
    cr_assert(eq(int, tg_module_load_state_dict(m, f, "m", true), TG_OK));
    expect_snapshot(m, now, n);
    free(now);
    tg_module_release(m);
    tg_st_free(f);
}

Test(nn, batchnorm1d_nc_matches_torch) { bn_case("batchnorm1d_nc", 0, 1e-5, 0.2); }
Test(nn, batchnorm1d_ncl_matches_torch) { bn_case("batchnorm1d_ncl", 0, 1e-5, 0.1); }
Test(nn, batchnorm2d_matches_torch) { bn_case("batchnorm2d", 2, 1e-3, 0.1); }

static int gen_forward(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    return tg_module_forward(tg_module_child(m, "net"), y, x);
}
static const tg_module_vtable gen_vt = {.type_name = "Gen", .forward = gen_forward};

/* rc is the constructor's status; *child is read after it ran. */
static void append(tg_module *seq, int rc, tg_module **child)
{
    cr_assert(eq(int, rc, TG_OK), "%s", tg_error_message());
    cr_assert(eq(int, tg_nn_sequential_append(seq, *child), TG_OK), "%s", tg_error_message());
    *child = NULL;
}

/* The generator of make_nn_goldens.py: Linear(8, 72) -> Unflatten(8, 3, 3)
 * -> BN2d -> ReLU -> ConvT(8, 4, 4, s2, p1) -> BN2d -> ReLU
 * -> ConvT(4, 1, 4, s2, p1) -> Tanh, as child "net" of a "Gen". */
static tg_module *make_generator(tg_rng *rng)
{
    tg_module *gen = NULL, *net = NULL, *c = NULL;
    cr_assert(eq(int, tg_module_new(&gen, &gen_vt, NULL), TG_OK));
    cr_assert(eq(int, tg_nn_sequential_new(&net), TG_OK));
    int64_t us[3] = {8, 3, 3}, k[2] = {4, 4};
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    p.stride[0] = p.stride[1] = 2;
    tg_conv_params_set_padding(&p, 1);
    append(net, tg_nn_linear_new(&c, 8, 72, true, rng), &c);
    append(net, tg_nn_unflatten_new(&c, 1, 3, us), &c);
    append(net, tg_nn_batchnorm_new(&c, 2, 8, 1e-5, 0.1, true, true), &c);
    append(net, tg_nn_activation_new(&c, TG_ACT_RELU, 0), &c);
    append(net, tg_nn_conv_transpose_new(&c, 2, 8, 4, k, &p, true, rng), &c);
    append(net, tg_nn_batchnorm_new(&c, 2, 4, 1e-5, 0.1, true, true), &c);
    append(net, tg_nn_activation_new(&c, TG_ACT_RELU, 0), &c);
    append(net, tg_nn_conv_transpose_new(&c, 2, 4, 1, k, &p, true, rng), &c);
    append(net, tg_nn_activation_new(&c, TG_ACT_TANH, 0), &c);
    cr_assert(eq(int, tg_module_add_child(gen, "net", net), TG_OK));
    return gen;
}

Test(nn, generator_matches_torch)
{
    tg_st_file *f = th_golden_load("nn/generator.safetensors");
    tg_rng rng;
    tg_rng_init(&rng, 7);
    tg_module *gen = make_generator(&rng);
    expect_torch_names(gen, f, "gen");
    cr_assert(eq(int, tg_module_parameter_count(gen), 10));
    check_case(gen, f, "gen", "", 1e-4);
    check_after(gen, f, "gen");
    tg_module_release(gen);
    tg_st_free(f);
}

/* ---- state dict ---- */

Test(nn, save_load_round_trip)
{
    tg_rng r1, r2;
    tg_rng_init(&r1, 1);
    tg_rng_init(&r2, 2);
    tg_module *a = make_generator(&r1), *b = make_generator(&r2);
    tg_tensor *nbt = tg_module_find(a, "net.2.num_batches_tracked");
    tg_tensor_set_flat(nbt, 0, 5);
    tg_tensor_fill(tg_module_find(a, "net.5.running_var"), 2.5);
    tg_st_file *f = NULL;
    cr_assert(eq(int, tg_st_new(&f), TG_OK));
    cr_assert(eq(int, tg_module_state_dict_save(a, f, "gen"), TG_OK));
    char path[] = "/tmp/tg_nn_rtXXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    cr_assert(eq(int, tg_safetensors_save(f, path), TG_OK), "%s", tg_error_message());
    tg_st_free(f);
    f = NULL;
    cr_assert(eq(int, tg_safetensors_load(&f, path), TG_OK));
    remove(path);
    cr_assert(eq(int, tg_st_count(f), tg_module_state_count(a)));
    cr_assert(eq(int, tg_tensor_dtype(tg_st_get(f, "gen.net.2.num_batches_tracked")), TG_I64));
    cr_assert(eq(int, tg_tensor_ndim(tg_st_get(f, "gen.net.2.num_batches_tracked")), 0));
    cr_assert(eq(int, tg_module_load_state_dict(b, f, "gen.", true), TG_OK), "%s",
              tg_error_message());
    int64_t na, nb;
    double *va = snapshot(a, &na), *vb = snapshot(b, &nb);
    cr_assert(eq(i64, na, nb));
    for (int64_t i = 0; i < na; i++) cr_assert(va[i] == vb[i], "value %lld", (long long)i);
    free(va);
    free(vb);
    tg_st_free(f);
    tg_module_release(a);
    tg_module_release(b);
}

/* A file holding b's state (which differs from a's) with one entry altered:
 * loading it into a must fail and leave a as it was. */
/* m's state dict in a new file, without the entry named skip. */
static tg_st_file *state_without(const tg_module *m, const char *skip)
{
    tg_st_file *f = NULL;
    cr_assert(eq(int, tg_st_new(&f), TG_OK));
    for (int i = 0; i < tg_module_state_count(m); i++) {
        char name[TG_MODULE_NAME_MAX];
        tg_tensor *t;
        tg_module_state_at(m, i, name, sizeof name, &t, NULL);
        if (strcmp(name, skip) != 0) cr_assert(eq(int, tg_st_set(f, name, t), TG_OK));
    }
    return f;
}

static void expect_load_fails(tg_module *a, tg_st_file *f, bool strict, int want)
{
    int64_t n;
    double *before = snapshot(a, &n);
    cr_assert(eq(int, tg_module_load_state_dict(a, f, NULL, strict), want), "%s",
              tg_error_message());
    cr_assert(strlen(tg_error_message()) > 0);
    expect_snapshot(a, before, n);
    free(before);
}

Test(nn, load_errors_change_nothing)
{
    tg_rng r1, r2;
    tg_rng_init(&r1, 1);
    tg_rng_init(&r2, 2);
    tg_module *a = make_generator(&r1), *b = make_generator(&r2);
    tg_tensor *bad = NULL;
    tg_st_file *f = NULL;
    /* missing key */
    f = state_without(b, "net.7.bias");
    expect_load_fails(a, f, true, TG_ENOTFOUND);
    cr_assert(strstr(tg_error_message(), "net.7.bias") != NULL, "%s", tg_error_message());
    /* non-strict: the rest loads */
    cr_assert(eq(int, tg_module_load_state_dict(a, f, NULL, false), TG_OK));
    expect_close(tg_module_find(a, "net.0.weight"), tg_module_find(b, "net.0.weight"), 0, 0, "w");
    tg_st_free(f);
    tg_module_release(a);
    tg_rng_init(&r1, 1);
    a = make_generator(&r1);
    /* wrong shape */
    cr_assert(eq(int, tg_st_new(&f), TG_OK));
    cr_assert(eq(int, tg_module_state_dict_save(b, f, NULL), TG_OK));
    int64_t s[1] = {5};
    tg_tensor_zeros(&bad, TG_F32, 1, s);
    tg_st_set(f, "net.5.bias", bad);
    expect_load_fails(a, f, true, TG_ESHAPE);
    cr_assert(strstr(tg_error_message(), "net.5.bias") != NULL, "%s", tg_error_message());
    tg_tensor_release(bad);
    /* wrong dtype (f64 into f32 is rejected, not converted) */
    s[0] = 4;
    tg_tensor_zeros(&bad, TG_F64, 1, s);
    tg_st_set(f, "net.5.bias", bad);
    expect_load_fails(a, f, true, TG_EDTYPE);
    th_expect_in(tg_error_message(), "use tg_module_to_dtype");
    tg_tensor_release(bad);
    tg_st_set(f, "net.5.bias", tg_module_find(b, "net.5.bias"));
    /* an f32 count for the i64 one: converting the module would not help */
    tg_tensor_zeros(&bad, TG_F32, 0, NULL);
    tg_st_set(f, "net.5.num_batches_tracked", bad);
    expect_load_fails(a, f, true, TG_EDTYPE);
    th_expect_in(tg_error_message(), "'net.5.num_batches_tracked' has dtype f32 in the file but i64");
    cr_assert(strstr(tg_error_message(), "tg_module_to_dtype") == NULL, "%s", tg_error_message());
    tg_tensor_release(bad);
    tg_st_set(f, "net.5.num_batches_tracked", tg_module_find(b, "net.5.num_batches_tracked"));
    /* unexpected key: strict fails, non-strict ignores it */
    tg_tensor_zeros(&bad, TG_F32, 1, s);
    tg_st_set(f, "net.9.weight", bad);
    tg_tensor_release(bad);
    expect_load_fails(a, f, true, TG_EINVAL);
    cr_assert(strstr(tg_error_message(), "net.9.weight") != NULL, "%s", tg_error_message());
    cr_assert(eq(int, tg_module_load_state_dict(a, f, NULL, false), TG_OK));
    tg_st_free(f);
    tg_module_release(a);
    tg_module_release(b);
}

/* A file without BatchNorm's num_batches_tracked (what PyTorch before 0.4.1
 * saved, e.g. torchvision's first ResNet weights) loads as in PyTorch, where
 * BatchNorm treats a state dict without version metadata (as every
 * safetensors file is) as holding num_batches_tracked = 0: strict or not, the
 * rest loads and the count becomes 0.  Another module's buffer of that name
 * gets no such allowance. */
Test(nn, load_without_num_batches_tracked_sets_it_to_zero)
{
    tg_rng r1, r2;
    tg_rng_init(&r1, 1);
    tg_rng_init(&r2, 2);
    for (int strict = 0; strict < 2; strict++) {
        tg_module *a = make_generator(&r1), *b = make_generator(&r2);
        tg_tensor_set_flat(tg_module_find(a, "net.2.num_batches_tracked"), 0, 7);
        tg_tensor_set_flat(tg_module_find(a, "net.5.num_batches_tracked"), 0, 7);
        tg_tensor_set_flat(tg_module_find(b, "net.5.num_batches_tracked"), 0, 3);
        tg_st_file *f = state_without(b, "net.2.num_batches_tracked");
        cr_assert(eq(int, tg_module_load_state_dict(a, f, NULL, strict), TG_OK), "%s",
                  tg_error_message());
        double v;
        tg_tensor_get_flat(tg_module_find(a, "net.2.num_batches_tracked"), 0, &v);
        cr_assert(eq(dbl, v, 0.0), "strict=%d: the absent count is %g, not 0", strict, v);
        tg_tensor_get_flat(tg_module_find(a, "net.5.num_batches_tracked"), 0, &v);
        cr_assert(eq(dbl, v, 3.0));
        expect_close(tg_module_find(a, "net.2.running_var"), tg_module_find(b, "net.2.running_var"),
                     0, 0, "running_var");
        tg_st_free(f);
        tg_module_release(a);
        tg_module_release(b);
    }
    /* a custom module's buffer named num_batches_tracked is an ordinary key */
    tg_module *box = NULL;
    tg_tensor *t = NULL;
    static const tg_module_vtable counter_vt = {.type_name = "Counter"};
    cr_assert(eq(int, tg_module_new(&box, &counter_vt, NULL), TG_OK));
    tg_tensor_zeros(&t, TG_I64, 0, NULL);
    cr_assert(eq(int, tg_module_add_buffer(box, "num_batches_tracked", t), TG_OK));
    tg_st_file *f = NULL;
    cr_assert(eq(int, tg_st_new(&f), TG_OK));
    cr_assert(eq(int, tg_module_load_state_dict(box, f, NULL, true), TG_ENOTFOUND));
    tg_st_free(f);
    tg_module_release(box);
}

/* Sequential(lin, lin, box) where box's "weight" is lin's weight: five state
 * entries, as PyTorch's state_dict, but two parameters, as its parameters()
 * (each tensor once, at its first name), which an optimizer accepts. */
static tg_module *make_tied(void)
{
    static const tg_module_vtable tie_vt = {.type_name = "Tie"};
    tg_rng rng;
    tg_rng_init(&rng, 5);
    tg_module *seq = NULL, *lin = NULL, *box = NULL;
    cr_assert(eq(int, tg_nn_sequential_new(&seq), TG_OK));
    cr_assert(eq(int, tg_nn_linear_new(&lin, 3, 2, true, &rng), TG_OK));
    cr_assert(eq(int, tg_module_new(&box, &tie_vt, NULL), TG_OK));
    tg_tensor *w = tg_module_find(lin, "weight");
    cr_assert(eq(int, tg_module_add_parameter(box, "weight", tg_tensor_retain(w)), TG_OK));
    cr_assert(eq(int, tg_nn_sequential_append(seq, tg_module_retain(lin)), TG_OK));
    cr_assert(eq(int, tg_nn_sequential_append(seq, lin), TG_OK));
    cr_assert(eq(int, tg_nn_sequential_append(seq, box), TG_OK));
    return seq;
}

Test(nn, shared_parameters_are_listed_once)
{
    tg_module *seq = make_tied();
    cr_assert(eq(int, tg_module_state_count(seq), 5));
    tg_tensor **ps = NULL;
    int n = 0;
    cr_assert(eq(int, tg_module_parameters(seq, &ps, &n), TG_OK));
    cr_assert(eq(int, n, 2), "%d parameters; the two distinct tensors expected", n);
    cr_assert(eq(int, tg_module_parameter_count(seq), 2));
    cr_assert(ps[0] == tg_module_find(seq, "0.weight") && ps[1] == tg_module_find(seq, "0.bias"));
    tg_optimizer *opt = NULL;
    tg_sgd_opts o = TG_SGD_OPTS_INIT;
    cr_assert(eq(int, tg_sgd_new(&opt, n, ps, &o), TG_OK), "%s", tg_error_message());
    tg_optimizer_free(opt);
    free(ps);
    tg_module_release(seq);
}

/* torch's Module.to(dtype) converts each parameter once and keeps it shared;
 * here too: every name of a shared tensor gets the same converted tensor. */
Test(nn, to_dtype_keeps_shared_parameters_shared)
{
    tg_module *seq = make_tied();
    double w0[6];
    cr_assert(eq(int, tg_tensor_to_doubles(tg_module_find(seq, "0.weight"), w0, 6), TG_OK));
    cr_assert(eq(int, tg_module_to_dtype(seq, TG_F64), TG_OK), "%s", tg_error_message());
    tg_tensor *w = tg_module_find(seq, "0.weight"), *b = tg_module_find(seq, "0.bias");
    cr_assert(eq(int, tg_tensor_dtype(w), TG_F64));
    cr_assert(eq(int, tg_tensor_dtype(b), TG_F64));
    cr_assert(tg_module_find(seq, "1.weight") == w && tg_module_find(seq, "2.weight") == w,
              "the tie is broken");
    cr_assert(tg_module_find(seq, "1.bias") == b);
    cr_assert(tg_tensor_requires_grad(w) && tg_tensor_is_leaf(w));
    for (int i = 0; i < 6; i++) {
        double v;
        tg_tensor_get_flat(w, i, &v);
        cr_assert(eq(dbl, v, w0[i]));
    }
    cr_assert(eq(int, tg_module_parameter_count(seq), 2));
    tg_module_release(seq);
}

static const tg_module_vtable box_vt = {.type_name = "Box"};

Test(nn, state_walk_and_lookup)
{
    tg_rng rng;
    tg_rng_init(&rng, 3);
    tg_module *gen = make_generator(&rng);
    cr_assert(eq(int, tg_module_state_count(gen), 16));
    tg_tensor **ps = NULL;
    int n = 0;
    cr_assert(eq(int, tg_module_parameters(gen, &ps, &n), TG_OK));
    cr_assert(eq(int, n, 10));
    cr_assert(ps[0] == tg_module_find(gen, "net.0.weight"));
    cr_assert(ps[9] == tg_module_find(gen, "net.7.bias"));
    for (int i = 0; i < n; i++) cr_assert(tg_tensor_requires_grad(ps[i]));
    free(ps);
    cr_assert(tg_module_find(gen, "net.2.running_mean") != NULL);
    cr_assert(tg_module_find(gen, "net.3.weight") == NULL);
    cr_assert(tg_module_find(gen, "nope.0.weight") == NULL);
    char small[4];
    cr_assert(eq(int, tg_module_state_at(gen, 0, small, sizeof small, NULL, NULL), TG_EINVAL));
    cr_assert(eq(int, tg_module_state_at(gen, 16, NULL, 0, NULL, NULL), TG_EINVAL));
    tg_module_train(gen, false);
    cr_assert(not(tg_module_is_training(tg_module_child_at(tg_module_child(gen, "net"), 5))));
    tg_module_train(gen, true);
    cr_assert(tg_module_is_training(tg_module_child_at(tg_module_child(gen, "net"), 5)));
    /* duplicate names and a container without forward */
    tg_module *extra = NULL, *c = NULL;
    tg_nn_sequential_new(&extra);
    cr_assert(eq(int, tg_module_add_child(gen, "net", extra), TG_EINVAL));   /* released */
    cr_assert(eq(int, tg_module_child_count(gen), 1));
    tg_tensor *i32 = NULL;
    tg_tensor_zeros(&i32, TG_I32, 0, NULL);
    cr_assert(eq(int, tg_module_add_parameter(gen, "p", i32), TG_EDTYPE));   /* released */
    cr_assert(eq(int, tg_module_state_count(gen), 16));
    tg_module_new(&c, &box_vt, NULL);
    tg_tensor *x = NULL, *y = NULL;
    tg_tensor_zeros(&x, TG_F32, 0, NULL);
    cr_assert(eq(int, tg_module_forward(c, &y, x), TG_EUNSUPPORTED));
    cr_assert(y == NULL);
    tg_tensor_release(x);
    tg_module_release(c);
    tg_module_release(gen);
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
}

Test(nn, init_normal_dcgan)
{
    tg_rng rng;
    tg_rng_init(&rng, 5);
    tg_module *gen = make_generator(&rng);
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
    expect_close(y, x, 0, 0, "eval dropout");
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

/* ---- shape modules and errors ---- */

Test(nn, flatten_unflatten_shapes)
{
    int64_t xs[4] = {2, 3, 4, 5}, us[2] = {6, 10};
    tg_tensor *x = NULL, *y = NULL, *z = NULL;
    tg_tensor_zeros(&x, TG_F32, 4, xs);
    for (int64_t i = 0; i < 120; i++) tg_tensor_set_flat(x, i, (double)i);
    tg_module *fl = NULL, *un = NULL;
    cr_assert(eq(int, tg_nn_flatten_new(&fl, 1, -1), TG_OK));
    cr_assert(eq(int, tg_nn_unflatten_new(&un, -1, 2, us), TG_OK));
    cr_assert(eq(int, tg_module_forward(fl, &y, x), TG_OK));
    cr_assert(tg_tensor_ndim(y) == 2 && tg_tensor_dim(y, 0) == 2 && tg_tensor_dim(y, 1) == 60);
    cr_assert(eq(int, tg_module_forward(un, &z, y), TG_OK));
    cr_assert(tg_tensor_ndim(z) == 3 && tg_tensor_dim(z, 1) == 6 && tg_tensor_dim(z, 2) == 10);
    double v;
    int64_t idx[3] = {1, 2, 3};
    tg_tensor_get(z, idx, &v);
    cr_assert(eq(dbl, v, 60.0 + 2 * 10 + 3));   /* row-major order is kept */
    tg_tensor_release(z);
    z = NULL;
    cr_assert(eq(int, tg_module_forward(un, &z, x), TG_ESHAPE));   /* 5 != 60 */
    cr_assert(z == NULL);
    tg_tensor_release(y);
    tg_tensor_release(x);
    tg_module_release(fl);
    tg_module_release(un);
}

/* A scalar is one dim to Flatten, as in torch: dims -1 and 0 flatten it into
 * (1); the default start_dim=1 does not fit it. */
Test(nn, flatten_scalar_as_torch)
{
    tg_tensor *x = NULL, *y = NULL;
    tg_tensor_scalar(&x, TG_F32, 3.0);
    const int ok[4][2] = {{0, -1}, {0, 0}, {-1, -1}, {-1, 0}}, bad[3][2] = {{1, -1}, {0, 1}, {-2, 0}};
    for (int i = 0; i < 4; i++) {
        tg_module *fl = NULL;
        cr_assert(eq(int, tg_nn_flatten_new(&fl, ok[i][0], ok[i][1]), TG_OK));
        cr_assert(eq(int, tg_module_forward(fl, &y, x), TG_OK), "(%d, %d)", ok[i][0], ok[i][1]);
        cr_assert(eq(int, tg_tensor_ndim(y), 1));
        cr_assert(eq(dbl, th_at(y, 0), 3.0));
        tg_tensor_release(y);
        y = NULL;
        tg_module_release(fl);
    }
    for (int i = 0; i < 3; i++) {
        tg_module *fl = NULL;
        cr_assert(eq(int, tg_nn_flatten_new(&fl, bad[i][0], bad[i][1]), TG_OK));
        cr_assert(eq(int, tg_module_forward(fl, &y, x), TG_EINVAL), "(%d, %d)", bad[i][0], bad[i][1]);
        cr_assert(strstr(tg_error_message(), "dims in [-1, 0]") != NULL, "%s", tg_error_message());
        cr_assert(y == NULL);
        tg_module_release(fl);
    }
    tg_tensor_release(x);
}

Test(nn, batchnorm_input_errors)
{
    tg_module *m = NULL;
    cr_assert(eq(int, tg_nn_batchnorm_new(&m, 0, 3, 1e-5, 0.1, true, true), TG_OK));
    tg_tensor *x = NULL, *y = NULL;
    int64_t s4[4] = {2, 3, 2, 2}, s2[2] = {4, 5}, s1[2] = {1, 3};
    tg_tensor_zeros(&x, TG_F32, 4, s4);
    cr_assert(eq(int, tg_module_forward(m, &y, x), TG_ESHAPE));
    tg_tensor_release(x);
    tg_tensor_zeros(&x, TG_F32, 2, s2);
    cr_assert(eq(int, tg_module_forward(m, &y, x), TG_ESHAPE));
    tg_tensor_release(x);
    /* one value per channel cannot be normalised in training; stats untouched */
    tg_tensor_zeros(&x, TG_F32, 2, s1);
    int64_t n;
    double *before = snapshot(m, &n);
    cr_assert(eq(int, tg_module_forward(m, &y, x), TG_EINVAL));
    /* the message shows the input's shape, as PyTorch's does */
    th_expect_in(tg_error_message(), "more than 1 value per channel when training");
    th_expect_in(tg_error_message(), "input of shape (1, 3)");
    expect_snapshot(m, before, n);
    free(before);
    cr_assert(y == NULL);
    /* a num_batches_tracked (from a file) that cannot be incremented is
     * refused before the running statistics change (INT64_MAX was refused
     * by the increment's store, after they had changed) */
    tg_tensor *nbt = tg_module_find(m, "num_batches_tracked");
    *(int64_t *)tg_tensor_data(nbt) = INT64_MAX;
    tg_tensor_release(x);
    tg_tensor_zeros(&x, TG_F32, 2, (int64_t[]){4, 3});
    cr_assert(eq(int, tg_tensor_set_flat(x, 0, 5.0), TG_OK));
    before = snapshot(m, &n);
    cr_assert(eq(int, tg_module_forward(m, &y, x), TG_EINVAL));
    th_expect_in(tg_error_message(), "num_batches_tracked");
    expect_snapshot(m, before, n);
    free(before);
    cr_assert(y == NULL);
    tg_module_train(m, false);
    cr_assert(eq(int, tg_module_forward(m, &y, x), TG_OK));
    tg_tensor_release(y);
    tg_tensor_release(x);
    tg_module_release(m);
}

/* An empty batch in training is PyTorch's no-op: an empty output, running
 * statistics unchanged, num_batches_tracked still counted (so momentum=None
 * weighs the next batch by 1/2), zero weight and bias gradients; in f32,
 * f64 and f16 (the per-channel half path), with and without running stats. */
Test(nn, batchnorm_empty_batch_in_training)
{
    const tg_dtype dts[3] = {TG_F32, TG_F64, TG_F16};
    for (int d = 0; d < 3; d++)
        for (int track = 0; track < 2; track++) {
            tg_module *m = NULL;
            cr_assert(eq(int, tg_nn_batchnorm_new(&m, 2, 3, 1e-5, -1.0, true, track), TG_OK));
            if (dts[d] != TG_F32) cr_assert(eq(int, tg_module_to_dtype(m, dts[d]), TG_OK));
            tg_tensor *x = NULL, *y = NULL, *sum = NULL;
            cr_assert(eq(int, tg_tensor_zeros(&x, dts[d], 4, (int64_t[]){0, 3, 4, 4}), TG_OK));
            int64_t n;
            double *before = snapshot(m, &n);
            cr_assert(eq(int, tg_module_forward(m, &y, x), TG_OK), "%s", tg_error_message());
            cr_assert(eq(i64, tg_tensor_numel(y), 0));
            cr_assert(eq(int, tg_tensor_ndim(y), 4));
            cr_assert(eq(int, tg_sum(&sum, y), TG_OK));
            cr_assert(eq(int, tg_backward(sum, NULL, NULL), TG_OK), "%s", tg_error_message());
            for (int p = 0; p < 2; p++) {
                const tg_tensor *g = tg_tensor_grad(tg_module_find(m, p ? "bias" : "weight"));
                cr_assert(g != NULL);
                for (int c = 0; c < 3; c++) cr_assert(eq(dbl, th_at(g, c), 0.0), "grad %d[%d]", p, c);
            }
            if (track) {
                /* running_mean, running_var as before; num_batches_tracked 0 -> 1 */
                double *now = snapshot(m, &n);
                for (int64_t i = 0; i < n - 1; i++) cr_assert(eq(dbl, now[i], before[i]));
                cr_assert(eq(dbl, now[n - 1], before[n - 1] + 1));
                free(now);
                /* then a batch of constant 2: running_mean = (1 - 1/2) 0 + 1/2 * 2 */
                tg_tensor *x2 = NULL, *y2 = NULL;
                tg_tensor_full(&x2, dts[d], 4, (int64_t[]){2, 3, 4, 4}, 2.0);
                cr_assert(eq(int, tg_module_forward(m, &y2, x2), TG_OK));
                const tg_tensor *rm = tg_module_find(m, "running_mean");
                for (int c = 0; c < 3; c++) cr_assert(eq(dbl, th_at(rm, c), 1.0), "%s", tg_dtype_name(dts[d]));
                tg_tensor_release(y2);
                tg_tensor_release(x2);
            }
            free(before);
            tg_tensor_release(sum);
            tg_tensor_release(y);
            tg_tensor_release(x);
            tg_module_release(m);
        }
}

Test(nn, constructor_errors_leave_out_untouched)
{
    tg_rng rng;
    tg_rng_init(&rng, 1);
    tg_module *m = NULL;
    int64_t k[2] = {3, 3}, bad_k[2] = {3, 0};
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    p.groups = 2;
    cr_assert(eq(int, tg_nn_linear_new(&m, 0, 3, true, &rng), TG_EINVAL));
    cr_assert(eq(int, tg_nn_linear_new(&m, 3, 3, true, NULL), TG_EINVAL));
    cr_assert(eq(int, tg_nn_conv_new(&m, 4, 3, 4, k, NULL, true, &rng), TG_EINVAL));
    cr_assert(eq(int, tg_nn_conv_new(&m, 2, 3, 4, k, &p, true, &rng), TG_EINVAL));   /* 3 % 2 */
    cr_assert(eq(int, tg_nn_conv_transpose_new(&m, 2, 4, 4, bad_k, NULL, true, &rng), TG_EINVAL));
    cr_assert(eq(int, tg_nn_batchnorm_new(&m, 4, 3, 1e-5, 0.1, true, true), TG_EINVAL));
    cr_assert(eq(int, tg_nn_batchnorm_new(&m, 2, 0, 1e-5, 0.1, true, true), TG_EINVAL));
    cr_assert(eq(int, tg_nn_dropout_new(&m, 1.5, 0), TG_EINVAL));
    cr_assert(eq(int, tg_nn_activation_new(&m, TG_ACT_COUNT, 0), TG_EINVAL));
    cr_assert(eq(int, tg_nn_unflatten_new(&m, 1, 0, k), TG_EINVAL));
    cr_assert(m == NULL);
    cr_assert(eq(int, tg_nn_sequential_append(NULL, NULL), TG_EINVAL));
    cr_assert(eq(int, tg_module_to_dtype(NULL, TG_F64), TG_EINVAL));
}

Test(nn, to_dtype_keeps_leaves_and_values)
{
    tg_rng rng;
    tg_rng_init(&rng, 4);
    tg_module *gen = make_generator(&rng);
    int64_t n;
    double *before = snapshot(gen, &n);
    cr_assert(eq(int, tg_module_to_dtype(gen, TG_I32), TG_EDTYPE));
    cr_assert(eq(int, tg_module_to_dtype(gen, TG_F64), TG_OK));
    expect_snapshot(gen, before, n);   /* f32 -> f64 is exact */
    free(before);
    tg_tensor *w = tg_module_find(gen, "net.0.weight");
    cr_assert(eq(int, tg_tensor_dtype(w), TG_F64));
    cr_assert(tg_tensor_requires_grad(w) && tg_tensor_is_leaf(w));
    cr_assert(eq(int, tg_tensor_dtype(tg_module_find(gen, "net.2.num_batches_tracked")), TG_I64));
    tg_tensor *x = NULL, *y = NULL;
    int64_t xs[2] = {3, 8};
    tg_tensor_zeros(&x, TG_F64, 2, xs);
    tg_tensor_rand_normal(x, &rng, 0, 1);
    cr_assert(eq(int, tg_module_forward(gen, &y, x), TG_OK), "%s", tg_error_message());
    cr_assert(eq(int, tg_tensor_dtype(y), TG_F64));
    tg_tensor_release(y);
    tg_tensor_release(x);
    tg_module_release(gen);
}
