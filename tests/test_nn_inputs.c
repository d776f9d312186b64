/* tests/test_nn_inputs.c - what modules do with unusual and bad inputs:
 * Flatten/Unflatten shapes (a scalar included, as torch), BatchNorm's input
 * errors and its empty training batch, constructor errors. */
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

Test(nn_inputs, flatten_unflatten_shapes)
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
Test(nn_inputs, flatten_scalar_as_torch)
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

Test(nn_inputs, batchnorm_input_errors)
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
    double *before = nf_snapshot(m, &n);
    cr_assert(eq(int, tg_module_forward(m, &y, x), TG_EINVAL));
    /* the message shows the input's shape, as PyTorch's does */
    th_expect_in(tg_error_message(), "more than 1 value per channel when training");
    th_expect_in(tg_error_message(), "input of shape (1, 3)");
    nf_expect_snapshot(m, before, n);
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
    before = nf_snapshot(m, &n);
    cr_assert(eq(int, tg_module_forward(m, &y, x), TG_EINVAL));
    th_expect_in(tg_error_message(), "num_batches_tracked");
    nf_expect_snapshot(m, before, n);
    free(before);
    cr_assert(y == NULL);
    tg_module_train(m, false);
    cr_assert(eq(int, tg_module_forward(m, &y, x), TG_OK));
    tg_tensor_release(y);
    tg_tensor_release(x);
    tg_module_release(m);
}

/* num_batches_tracked counts in int64 as torch's add_(1): 2^53 (past which
 * a double would lose the increment) becomes 2^53 + 1; with momentum None
 * (cumulative average) a count of -1 would divide by zero and is refused
 * with nothing changed.  (A checkpoint holding a count of 2^54 was accepted
 * by the load and then refused by the next training step: found by the
 * checkpoint fuzz target.) */
Test(nn_inputs, batchnorm_counts_num_batches_tracked_exactly_in_int64)
{
    for (int cumulative = 0; cumulative < 2; cumulative++) {
        tg_module *m = NULL;
        cr_assert(eq(int, tg_nn_batchnorm_new(&m, 0, 3, 1e-5, cumulative ? -1.0 : 0.1, true,
                                              true), TG_OK));
        tg_tensor *x = NULL, *y = NULL;
        tg_tensor_zeros(&x, TG_F32, 2, (int64_t[]){4, 3});
        cr_assert(eq(int, tg_tensor_set_flat(x, 0, 5.0), TG_OK));
        int64_t *nbt = tg_tensor_data(tg_module_find(m, "num_batches_tracked"));
        const int64_t starts[3] = {(int64_t)1 << 53, (int64_t)1 << 54, INT64_MAX - 1};
        for (int k = 0; k < 3; k++) {
            *nbt = starts[k];
            cr_assert(eq(int, tg_module_forward(m, &y, x), TG_OK), "%s", tg_error_message());
            cr_assert(eq(i64, *nbt, starts[k] + 1));
            tg_tensor_release(y);
            y = NULL;
        }
        *nbt = -1;
        int64_t n;
        double *before = nf_snapshot(m, &n);
        cr_assert(eq(int, tg_module_forward(m, &y, x), cumulative ? TG_EINVAL : TG_OK));
        if (cumulative) {
            th_expect_in(tg_error_message(), "num_batches_tracked = -1");
            nf_expect_snapshot(m, before, n);
        } else {
            cr_assert(eq(i64, *nbt, 0));
        }
        free(before);
        tg_tensor_release(y);
        tg_tensor_release(x);
        tg_module_release(m);
    }
}

/* An empty batch in training is PyTorch's no-op: an empty output, running
 * statistics unchanged, num_batches_tracked still counted (so momentum=None
 * weighs the next batch by 1/2), zero weight and bias gradients; in f32,
 * f64 and f16 (the per-channel half path), with and without running stats. */
Test(nn_inputs, batchnorm_empty_batch_in_training)
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
            double *before = nf_snapshot(m, &n);
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
                double *now = nf_snapshot(m, &n);
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

/* An empty batch of half values read channel by channel (rows of 16 or
 * more): in eval mode an empty output, and in training a contiguous empty
 * gradient (not the expanded zero of a sum) gives zero weight and bias
 * gradients; f16 and bf16. */
Test(nn_inputs, batchnorm_empty_half_batch_eval_and_contiguous_grad)
{
    const tg_dtype dts[2] = {TG_F16, TG_BF16};
    for (int d = 0; d < 2; d++)
        for (int training = 0; training < 2; training++) {
            tg_module *m = NULL;
            cr_assert(eq(int, tg_nn_batchnorm_new(&m, 2, 3, 1e-5, 0.1, true, true), TG_OK));
            cr_assert(eq(int, tg_module_to_dtype(m, dts[d]), TG_OK));
            tg_module_train(m, training);
            tg_tensor *x = NULL, *y = NULL, *gy = NULL;
            cr_assert(eq(int, tg_tensor_zeros(&x, dts[d], 4, (int64_t[]){0, 3, 8, 8}), TG_OK));
            cr_assert(eq(int, tg_module_forward(m, &y, x), TG_OK), "%s", tg_error_message());
            cr_assert(eq(i64, tg_tensor_numel(y), 0));
            cr_assert(eq(int, tg_tensor_zeros(&gy, dts[d], 4, (int64_t[]){0, 3, 8, 8}), TG_OK));
            cr_assert(eq(int, tg_backward(y, gy, NULL), TG_OK), "%s", tg_error_message());
            for (int p = 0; p < 2; p++) {
                const tg_tensor *g = tg_tensor_grad(tg_module_find(m, p ? "bias" : "weight"));
                cr_assert(g != NULL);
                for (int c = 0; c < 3; c++) cr_assert(eq(dbl, th_at(g, c), 0.0), "grad %d[%d]", p, c);
            }
            tg_tensor_release(gy);
            tg_tensor_release(y);
            tg_tensor_release(x);
            tg_module_release(m);
        }
}

Test(nn_inputs, constructor_errors_leave_out_untouched)
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
    const int64_t ns[2] = {4, 0};
    cr_assert(eq(int, tg_nn_layer_norm_new(&m, 0, ns, 1e-5, true), TG_EINVAL));
    th_expect_in(tg_error_message(), "nn_layer_norm_new: n=0 must be in 1..8");
    cr_assert(eq(int, tg_nn_layer_norm_new(&m, 9, ns, 1e-5, true), TG_EINVAL));
    cr_assert(eq(int, tg_nn_layer_norm_new(&m, 1, NULL, 1e-5, true), TG_EINVAL));
    cr_assert(eq(int, tg_nn_layer_norm_new(&m, 2, ns, 1e-5, true), TG_EINVAL));
    th_expect_in(tg_error_message(), "normalized_shape[1]=0 must be > 0");
    cr_assert(eq(int, tg_nn_layer_norm_new(&m, 1, ns, -1e-5, true), TG_EINVAL));
    th_expect_in(tg_error_message(), "nn_layer_norm_new: eps=-1e-05 must be >= 0");
    cr_assert(eq(int, tg_nn_group_norm_new(&m, 0, 4, 1e-5, true), TG_EINVAL));
    th_expect_in(tg_error_message(), "nn_group_norm_new: num_groups=0 must be > 0");
    cr_assert(eq(int, tg_nn_group_norm_new(&m, 3, 4, 1e-5, true), TG_EINVAL));
    th_expect_in(tg_error_message(), "num_channels=4 must be > 0 and divisible by num_groups=3");
    cr_assert(eq(int, tg_nn_group_norm_new(&m, 2, 4, NAN, true), TG_EINVAL));
    cr_assert(eq(int, tg_nn_layer_norm_new(NULL, 1, ns, 1e-5, true), TG_EINVAL));
    cr_assert(eq(int, tg_nn_dropout_new(&m, 1.5, 0), TG_EINVAL));
    cr_assert(eq(int, tg_nn_activation_new(&m, TG_ACT_COUNT, 0), TG_EINVAL));
    cr_assert(eq(int, tg_nn_unflatten_new(&m, 1, 0, k), TG_EINVAL));
    cr_assert(m == NULL);
    cr_assert(eq(int, tg_nn_sequential_append(NULL, NULL), TG_EINVAL));
    cr_assert(eq(int, tg_module_to_dtype(NULL, TG_F64), TG_EINVAL));
}

/* A custom module whose forward fails without a message of its own: the
 * message names the module, not an older error. */
static int quiet_forward(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    (void)m, (void)y, (void)x;
    return TG_EUNSUPPORTED;
}

Test(nn_inputs, failing_custom_forward_gets_a_message)
{
    static const tg_module_vtable quiet_vt = {.type_name = "Quiet", .forward = quiet_forward};
    tg_module *m = NULL;
    tg_tensor *x = NULL, *y = NULL, *bad = NULL;
    cr_assert(eq(int, tg_module_new(&m, &quiet_vt, NULL), TG_OK));
    tg_tensor_zeros(&x, TG_F32, 1, (int64_t[]){3});
    cr_assert(eq(int, tg_reshape(&bad, x, 1, (int64_t[]){4}), TG_ESHAPE));   /* an old error */
    cr_assert(eq(int, tg_module_forward(m, &y, x), TG_EUNSUPPORTED));
    cr_assert(y == NULL);
    th_expect_in(tg_error_message(),
                 "module_forward: Quiet's forward failed with TG_EUNSUPPORTED and no message");
    tg_tensor_release(x);
    tg_module_release(m);
}

/* A child of a Sequential failing: the message leads with the child's
 * dotted path and type, through nested Sequentials, then the op's own. */
Test(nn_inputs, sequential_names_the_failing_child)
{
    tg_rng rng;
    tg_rng_init(&rng, 3);
    tg_module *outer = NULL, *enc = NULL, *l0 = NULL, *l1 = NULL, *act = NULL;
    tg_tensor *x = NULL, *y = NULL;
    cr_assert(eq(int, tg_nn_sequential_new(&outer), TG_OK));
    cr_assert(eq(int, tg_nn_sequential_new(&enc), TG_OK));
    cr_assert(eq(int, tg_nn_linear_new(&l0, 8, 7, true, &rng), TG_OK));
    cr_assert(eq(int, tg_nn_activation_new(&act, TG_ACT_RELU, 0), TG_OK));
    cr_assert(eq(int, tg_nn_linear_new(&l1, 6, 2, true, &rng), TG_OK));   /* 7 features in */
    cr_assert(eq(int, tg_module_add_child(enc, "0", l0), TG_OK));
    cr_assert(eq(int, tg_module_add_child(enc, "act", act), TG_OK));
    cr_assert(eq(int, tg_module_add_child(enc, "2", l1), TG_OK));
    cr_assert(eq(int, tg_module_add_child(outer, "enc", enc), TG_OK));
    tg_tensor_zeros(&x, TG_F32, 2, (int64_t[]){3, 8});
    cr_assert(eq(int, tg_module_forward(outer, &y, x), TG_ESHAPE));
    cr_assert(y == NULL);
    const char *msg = tg_error_message();
    cr_assert(strncmp(msg, "in enc.2 (Linear): linear: ", 27) == 0, "%s", msg);
    th_expect_in(msg, "features 7 and 6 differ");
    cr_assert(eq(int, tg_module_forward(enc, &y, x), TG_ESHAPE));
    cr_assert(strncmp(tg_error_message(), "in 2 (Linear): linear: ", 23) == 0, "%s",
              tg_error_message());
    tg_tensor_release(x);
    tg_module_release(outer);   /* holds the others (add_child steals them) */
}

/* A forward that returns TG_OK without setting *y: refused, naming the module. */
static int empty_forward(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    (void)m, (void)y, (void)x;
    return TG_OK;
}

Test(nn_inputs, custom_forward_without_output_is_refused)
{
    static const tg_module_vtable empty_vt = {.type_name = "Empty", .forward = empty_forward};
    tg_module *m = NULL;
    tg_tensor *x = NULL, *y = (tg_tensor *)&m;   /* untouched on error */
    cr_assert(eq(int, tg_module_new(&m, &empty_vt, NULL), TG_OK));
    tg_tensor_zeros(&x, TG_F32, 1, (int64_t[]){3});
    cr_assert(eq(int, tg_module_forward(m, &y, x), TG_EINVAL));
    cr_assert(y == (tg_tensor *)&m);
    th_expect_in(tg_error_message(), "Empty's forward returned TG_OK without an output");
    tg_tensor_release(x);
    tg_module_release(m);
}

/* Modules form a tree: a child that contains its new parent (a cycle, which
 * every walk would follow forever) is refused and released; the tree is
 * unchanged. */
Test(nn_inputs, module_cycles_are_refused)
{
    tg_module *a = NULL, *b = NULL, *c = NULL;
    cr_assert(eq(int, tg_nn_sequential_new(&a), TG_OK));
    cr_assert(eq(int, tg_nn_sequential_new(&b), TG_OK));
    cr_assert(eq(int, tg_nn_sequential_new(&c), TG_OK));
    cr_assert(eq(int, tg_module_add_child(a, "b", b), TG_OK));
    cr_assert(eq(int, tg_module_add_child(b, "c", c), TG_OK));
    cr_assert(eq(int, tg_module_add_child(c, "up", tg_module_retain(a)), TG_EINVAL));
    th_expect_in(tg_error_message(), "module_add_child: child 'up' (Sequential) contains the parent");
    cr_assert(eq(int, tg_module_add_child(b, "up", tg_module_retain(a)), TG_EINVAL));
    cr_assert(eq(int, tg_module_add_child(c, "self", tg_module_retain(c)), TG_EINVAL));
    cr_assert(eq(int, tg_module_child_count(c), 0));
    cr_assert(eq(int, tg_module_child_count(b), 1));
    /* the same module twice under one parent is no cycle */
    cr_assert(eq(int, tg_module_add_child(a, "c_again", tg_module_retain(c)), TG_OK));
    cr_assert(eq(int, tg_module_parameter_count(a), 0));
    /* nn_sequential_append's refusals name it, not the function it calls */
    cr_assert(eq(int, tg_nn_sequential_append(b, NULL), TG_EINVAL));
    th_expect_in(tg_error_message(), "nn_sequential_append: child must not be NULL");
    cr_assert(eq(int, tg_nn_sequential_append(c, tg_module_retain(a)), TG_EINVAL));
    th_expect_in(tg_error_message(), "nn_sequential_append: child '0' (Sequential) contains the parent");
    tg_module_release(a);
}

/* A parameter must be a float tensor; the message names the function and
 * the parameter, and the tensor (stolen) is released. */
Test(nn_inputs, integer_parameter_is_refused_by_name)
{
    tg_module *m = NULL;
    tg_tensor *t = NULL;
    static const tg_module_vtable box_vt = {.type_name = "Box"};
    cr_assert(eq(int, tg_module_new(&m, &box_vt, NULL), TG_OK));
    tg_tensor_zeros(&t, TG_I64, 1, (int64_t[]){4});
    cr_assert(eq(int, tg_module_add_parameter(m, "lookup", t), TG_EDTYPE));
    th_expect_in(tg_error_message(), "module_add_parameter: 'lookup' has dtype i64");
    cr_assert(eq(int, tg_module_state_count(m), 0));
    tg_module_release(m);
}

/* A dotted name past TG_MODULE_NAME_MAX - 1 characters: counting the state
 * is an error, not a partial count. */
Test(nn_inputs, state_count_of_too_long_names_is_an_error)
{
    tg_module *root = NULL, *cur;
    cr_assert(eq(int, tg_nn_sequential_new(&root), TG_OK));
    char name[61];
    memset(name, 'n', 60);
    name[60] = '\0';
    cur = root;
    for (int d = 0; d < 5; d++) {   /* 5 levels of 61 characters */
        tg_module *c = NULL;
        cr_assert(eq(int, tg_nn_sequential_new(&c), TG_OK));
        name[0] = (char)('a' + d);
        cr_assert(eq(int, tg_module_add_child(cur, name, c), TG_OK));
        cur = c;
    }
    tg_tensor *t = NULL;
    tg_tensor_zeros(&t, TG_F32, 1, (int64_t[]){2});
    cr_assert(eq(int, tg_module_add_parameter(cur, "w", t), TG_OK));
    cr_assert(eq(int, tg_module_state_count(root), TG_EINVAL));
    th_expect_in(tg_error_message(), "is longer than 255 characters");
    char **names = NULL;
    tg_tensor **ps = NULL;
    int n = -1;
    cr_assert(eq(int, tg_module_named_parameters(root, &names, &ps, &n), TG_EINVAL));
    th_expect_in(tg_error_message(), "is longer than 255 characters");
    cr_assert(names == NULL && ps == NULL && n == -1, "an output was written");
    tg_module_release(root);
}

/* An unnamed parameter or buffer takes its local name, which the tape's
 * printouts and messages then show; a tensor with a name keeps it. */
Test(nn_inputs, registered_tensors_take_their_local_names)
{
    tg_rng rng;
    tg_rng_init(&rng, 2);
    tg_module *lin = NULL, *box = NULL;
    cr_assert(eq(int, tg_nn_linear_new(&lin, 3, 2, true, &rng), TG_OK));
    cr_assert(eq(str, (char *)tg_tensor_name(tg_module_find(lin, "weight")), "weight"));
    cr_assert(eq(str, (char *)tg_tensor_name(tg_module_find(lin, "bias")), "bias"));
    static const tg_module_vtable box_vt = {.type_name = "Box"};
    cr_assert(eq(int, tg_module_new(&box, &box_vt, NULL), TG_OK));
    tg_tensor *t = NULL;
    tg_tensor_zeros(&t, TG_F32, 1, (int64_t[]){2});
    tg_tensor_set_name(t, "mine");
    cr_assert(eq(int, tg_module_add_buffer(box, "stat", t), TG_OK));
    cr_assert(eq(str, (char *)tg_tensor_name(tg_module_find(box, "stat")), "mine"));
    tg_module_release(box);
    tg_module_release(lin);
}
