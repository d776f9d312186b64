/* tests/quant_model_fixtures.c - the random tensors and the small model
 * shared by the tests of a quantized model (quant_model_fixtures.h). */
#include "quant_model_fixtures.h"

#include <math.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "helpers.h"

uint64_t xorshift(tg_rng *rng)
{
    return th_xorshift64(&rng->seed);   /* the seed word reused as a xorshift64 state */
}

/* Uniform in [lo, hi); integer dtypes get floor() of it. */
tg_tensor *rnd_tensor(tg_dtype dt, int nd, const int64_t *shape, tg_rng *rng, double lo,
                      double hi)
{
    tg_tensor *t = NULL;
    cr_assert(eq(int, tg_tensor_zeros(&t, dt, nd, shape), TG_OK));
    for (int64_t i = 0; i < tg_tensor_numel(t); i++) {
        double u = lo + (hi - lo) * (double)(xorshift(rng) >> 11) / 9007199254740992.0;
        tg_tensor_set_flat(t, i, dt == TG_F32 ? u : floor(u));
    }
    return t;
}

static int wrapper_forward(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    return tg_module_forward(tg_module_child(m, "net"), y, x);
}
static const tg_module_vtable wrapper_vt = {.type_name = "Net", .forward = wrapper_forward};

/* Net{net: Linear(8, 32) -> Unflatten(8, 2, 2) -> ReLU -> ConvTranspose2d(8, 6, 4, 2, 1,
 * groups 2) -> BatchNorm2d(6) -> ReLU -> Conv2d(6, 3, 3, padding 1)}; output (N, 3, 4, 4). */
tg_module *small_model(tg_rng *rng)
{
    tg_module *seq = NULL, *m = NULL, *l = NULL;
    cr_assert(eq(int, tg_nn_sequential_new(&seq), TG_OK));
    cr_assert(eq(int, tg_nn_linear_new(&l, 8, 32, true, rng), TG_OK));
    cr_assert(eq(int, tg_nn_sequential_append(seq, l), TG_OK));
    const int64_t unf[] = {8, 2, 2};
    cr_assert(eq(int, tg_nn_unflatten_new(&l, 1, 3, unf), TG_OK));
    cr_assert(eq(int, tg_nn_sequential_append(seq, l), TG_OK));
    cr_assert(eq(int, tg_nn_activation_new(&l, TG_ACT_RELU, 0), TG_OK));
    cr_assert(eq(int, tg_nn_sequential_append(seq, l), TG_OK));
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    p.stride[0] = p.stride[1] = 2;
    p.padding[0][0] = p.padding[0][1] = p.padding[1][0] = p.padding[1][1] = 1;
    p.groups = 2;
    const int64_t k4[] = {4, 4}, k3[] = {3, 3};
    cr_assert(eq(int, tg_nn_conv_transpose_new(&l, 2, 8, 6, k4, &p, true, rng), TG_OK));
    cr_assert(eq(int, tg_nn_sequential_append(seq, l), TG_OK));
    cr_assert(eq(int, tg_nn_batchnorm_new(&l, 2, 6, 1e-5, 0.1, true, true), TG_OK));
    tg_tensor *rv = tg_module_find(l, "running_var"), *rm = tg_module_find(l, "running_mean");
    for (int c = 0; c < 6; c++)
        tg_tensor_set_flat(rv, c, 0.02 + 0.01 * c), tg_tensor_set_flat(rm, c, 0.05 * (c - 3));
    cr_assert(eq(int, tg_nn_sequential_append(seq, l), TG_OK));
    cr_assert(eq(int, tg_nn_activation_new(&l, TG_ACT_RELU, 0), TG_OK));
    cr_assert(eq(int, tg_nn_sequential_append(seq, l), TG_OK));
    tg_conv_params p3 = TG_CONV_PARAMS_INIT;
    p3.padding[0][0] = p3.padding[0][1] = p3.padding[1][0] = p3.padding[1][1] = 1;
    cr_assert(eq(int, tg_nn_conv_new(&l, 2, 6, 3, k3, &p3, true, rng), TG_OK));
    cr_assert(eq(int, tg_nn_sequential_append(seq, l), TG_OK));
    cr_assert(eq(int, tg_module_new(&m, &wrapper_vt, NULL), TG_OK));
    cr_assert(eq(int, tg_module_add_child(m, "net", seq), TG_OK));
    return m;
}
