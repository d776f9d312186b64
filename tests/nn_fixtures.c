/* Fixtures shared by the nn test files; see nn_fixtures.h. */
#include "nn_fixtures.h"

#include <math.h>
#include <stdlib.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "helpers.h"

double *nf_snapshot(const tg_module *m, int64_t *n)
{
    int64_t total = 0;
    for (int i = 0; i < tg_module_state_count(m); i++) {
        tg_tensor *t = NULL;
        tg_module_state_at(m, i, NULL, 0, &t, NULL);
        total += tg_tensor_numel(t);
    }
    double *v = malloc(sizeof(double) * (size_t)(total + 1));
    cr_assert(v != NULL);
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

void nf_expect_snapshot(const tg_module *m, const double *before, int64_t n)
{
    int64_t n2;
    double *now = nf_snapshot(m, &n2);
    cr_assert(eq(i64, n2, n));
    for (int64_t i = 0; i < n; i++)
        cr_assert(now[i] == before[i], "state value %lld changed", (long long)i);
    free(now);
}

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

tg_module *nf_make_generator(tg_rng *rng)
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
