/* tests/test_recompute.c - tg_recompute and tg_module_forward_recompute
 * (autograd.h, nn.h): the gradients of a recomputed block are those of the
 * plain block bit for bit (Linear/tanh and conv blocks, parameters, several
 * inputs and outputs, an input that needs no gradient, Dropout, autocast),
 * the peak of tensor memory is lower, the block is one node of the tape, its
 * outputs belong to an open scope, and a second backward adds again.  The
 * refusals are in test_recompute_refusals.c. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdio.h>
#include <string.h>

#include "helpers.h"
#include "recompute_fixtures.h"
#include "tapegrad/autograd.h"
#include "tapegrad/nn.h"
#include "tapegrad/ops.h"
#include "tapegrad/scope.h"

/* Conv2d(3, 8, 3, pad 1), relu, Conv2d(8, 4, 3, stride 2), tanh */
static tg_module *conv_block(void)
{
    tg_module *seq = NULL, *m = NULL;
    tg_rng rng;
    tg_rng_init(&rng, 7);
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    const int64_t k[2] = {3, 3};
    OK(tg_nn_sequential_new(&seq));
    p.padding[0][0] = p.padding[0][1] = p.padding[1][0] = p.padding[1][1] = 1;
    append(seq, tg_nn_conv_new(&m, 2, 3, 8, k, &p, true, &rng), &m);
    append(seq, tg_nn_activation_new(&m, TG_ACT_RELU, 0), &m);
    tg_conv_params q = TG_CONV_PARAMS_INIT;
    q.stride[0] = q.stride[1] = 2;
    append(seq, tg_nn_conv_new(&m, 2, 8, 4, k, &q, true, &rng), &m);
    append(seq, tg_nn_activation_new(&m, TG_ACT_TANH, 0), &m);
    return seq;
}


/* A run's autocast: off, or on in dt with the backward inside the scope or
 * after it has closed. */
typedef struct amp_run {
    bool on;
    tg_dtype dt;
    bool backward_inside;
} amp_run;

static const amp_run no_amp = {.on = false};

/* loss = sum(m(x)) (recomputed or not), backward; returns the loss value.
 * y_dt: y's dtype, when not NULL. */
static double run_module(tg_module *m, tg_tensor *x, bool recompute, const amp_run *a,
                         tg_dtype *y_dt)
{
    tg_tensor *y = NULL, *loss = NULL;
    if (a->on) OK(tg_autocast_begin(a->dt));
    if (recompute) OK(tg_module_forward_recompute(m, &y, x));
    else OK(tg_module_forward(m, &y, x));
    OK(tg_sum(&loss, y));
    if (a->on && !a->backward_inside) OK(tg_autocast_end());
    OK(tg_backward(loss, NULL, NULL));
    if (a->on && a->backward_inside) OK(tg_autocast_end());
    double v = tg_tensor_item(loss);
    if (y_dt) *y_dt = tg_tensor_dtype(y);
    tg_tensor_release(loss);
    tg_tensor_release(y);
    return v;
}

/* Runs m on x plainly then recomputed, from zero gradients, under autocast
 * as a says, and checks y's dtype, the loss, x's gradient and every
 * parameter's gradient bit for bit. */
static void expect_same_as_plain_amp(tg_module *m, tg_tensor *x, const amp_run *a)
{
    tg_tensor **params = NULL;
    int n = 0;
    tg_dtype dt_plain, dt_again;
    OK(tg_module_parameters(m, &params, &n));
    double plain = run_module(m, x, false, a, &dt_plain);
    tg_tensor *gx = grad_copy(x), *gp[64] = {0};
    cr_assert(n <= 64);
    for (int i = 0; i < n; i++) gp[i] = grad_copy(params[i]);
    tg_tensor_zero_grad(x);
    for (int i = 0; i < n; i++) tg_tensor_set_grad(params[i], NULL);
    tg_tensor_set_grad(x, NULL);
    double again = run_module(m, x, true, a, &dt_again);
    cr_assert(eq(int, dt_again, dt_plain));
    cr_assert(memcmp(&plain, &again, sizeof plain) == 0, "loss %g vs %g", plain, again);
    if (gx) expect_same_bits(gx, tg_tensor_grad(x), "x");
    else cr_assert_null(tg_tensor_grad(x));
    for (int i = 0; i < n; i++) {
        char what[32];
        snprintf(what, sizeof what, "parameter %d", i);
        expect_same_bits(gp[i], tg_tensor_grad(params[i]), what);
        tg_tensor_release(gp[i]);
    }
    tg_tensor_release(gx);
    free(params);
}

static void expect_same_as_plain(tg_module *m, tg_tensor *x)
{
    expect_same_as_plain_amp(m, x, &no_amp);
}

Test(recompute, linear_tanh_block_gradients_are_the_plain_ones)
{
    tg_module *m = mlp(4, 16, 1);
    tg_tensor *x = randn(2, (int64_t[]){5, 16}, 2, true);
    expect_same_as_plain(m, x);
    tg_tensor_release(x);
    tg_module_release(m);
}

Test(recompute, conv_block_gradients_are_the_plain_ones)
{
    tg_module *m = conv_block();
    tg_tensor *x = randn(4, (int64_t[]){2, 3, 9, 9}, 3, true);
    expect_same_as_plain(m, x);
    tg_tensor_release(x);
    tg_module_release(m);
}

/* As torch's checkpoint: the block runs again under the forward's autocast,
 * so the recomputed ops cast as they did, also when the backward runs after
 * the scope has closed; the output keeps its half dtype and the gradients
 * are the plain block's.  Also with f32 master weights cast at each forward
 * (tg_module_autocast_weights). */
Test(recompute, under_autocast_the_block_runs_again_as_in_the_forward)
{
    const tg_dtype dts[2] = {TG_BF16, TG_F16};
    for (int d = 0; d < 2; d++)
        for (int inside = 0; inside < 2; inside++)
            for (int master = 0; master < 2; master++) {
                tg_module *m = conv_block();
                tg_module_autocast_weights(m, master);
                tg_tensor *x = randn(4, (int64_t[]){2, 3, 9, 9}, 3, true);
                const amp_run a = {.on = true, .dt = dts[d], .backward_inside = inside};
                tg_dtype y_dt;
                run_module(m, x, true, &a, &y_dt);
                cr_assert(eq(int, y_dt, dts[d]), "%s", tg_dtype_name(y_dt));
                tg_tensor_set_grad(x, NULL);
                tg_module_zero_grad(m);
                expect_same_as_plain_amp(m, x, &a);
                cr_assert_not(tg_autocast_active(NULL));
                tg_tensor_release(x);
                tg_module_release(m);
            }
}

/* As torch's non-reentrant checkpoint: parameters get gradients although
 * the input requires none. */
Test(recompute, parameters_get_gradients_when_the_input_needs_none)
{
    tg_module *m = mlp(2, 8, 4);
    tg_tensor *x = randn(2, (int64_t[]){3, 8}, 5, false);
    expect_same_as_plain(m, x);
    tg_tensor *w = tg_module_find(m, "0.weight");
    cr_assert_not_null(tg_tensor_grad(w));
    cr_assert_null(tg_tensor_grad(x));
    tg_tensor_release(x);
    tg_module_release(m);
}

/* n_blocks x (Linear(width, 4 width), tanh, Linear(4 width, width), tanh):
 * a decoder's feed-forward blocks, whose insides are 4 times wider than
 * what goes between them. */
static tg_module *ffn_stack(int n_blocks, int64_t width, uint64_t seed)
{
    tg_module *seq = NULL, *blk = NULL, *m = NULL;
    tg_rng rng;
    tg_rng_init(&rng, seed);
    OK(tg_nn_sequential_new(&seq));
    for (int i = 0; i < n_blocks; i++) {
        OK(tg_nn_sequential_new(&blk));
        append(blk, tg_nn_linear_new(&m, width, 4 * width, true, &rng), &m);
        append(blk, tg_nn_activation_new(&m, TG_ACT_TANH, 0), &m);
        append(blk, tg_nn_linear_new(&m, 4 * width, width, true, &rng), &m);
        append(blk, tg_nn_activation_new(&m, TG_ACT_TANH, 0), &m);
        OK(tg_nn_sequential_append(seq, blk));
    }
    return seq;
}

/* loss = sum(blocks(x)), each block of seq recomputed or not (as torch's
 * checkpoint_sequential with one block per segment); backward.  The peak
 * of tensor bytes above what was alive before, from zero gradients. */
static int64_t peak_of(tg_module *seq, tg_tensor *x, bool recompute)
{
    tg_tensor **params = NULL, *y = tg_tensor_retain(x), *loss = NULL;
    int n = 0;
    int64_t base = 0, peak = 0;
    OK(tg_module_parameters(seq, &params, &n));
    for (int i = 0; i < n; i++) tg_tensor_set_grad(params[i], NULL);
    tg_tensor_set_grad(x, NULL);
    free(params);
    tg_memory_stats(&base, NULL);
    tg_memory_reset_peak();
    for (int i = 0; i < tg_module_child_count(seq); i++) {
        tg_tensor *next = NULL;
        if (recompute) OK(tg_module_forward_recompute(tg_module_child_at(seq, i), &next, y));
        else OK(tg_module_forward(tg_module_child_at(seq, i), &next, y));
        tg_tensor_release(y);
        y = next;
    }
    OK(tg_sum(&loss, y));
    tg_tensor_release(y);
    OK(tg_backward(loss, NULL, NULL));
    tg_tensor_release(loss);
    tg_memory_stats(NULL, &peak);
    return peak - base;
}

/* The figure in docs/autograd.md: 8 feed-forward blocks of width 256 on a
 * batch of 1024 f32 rows (1 MiB between blocks, 4 MiB inside). */
Test(recompute, peak_memory_is_lower_and_gradients_the_same)
{
    tg_module *m = ffn_stack(8, 256, 6);
    tg_tensor *x = randn(2, (int64_t[]){1024, 256}, 7, true);
    tg_tensor **params = NULL;
    int n = 0;
    OK(tg_module_parameters(m, &params, &n));
    int64_t plain = peak_of(m, x, false);
    tg_tensor *gx = grad_copy(x), *gp[32] = {0};
    cr_assert(eq(int, n, 32));
    for (int i = 0; i < n; i++) gp[i] = grad_copy(params[i]);
    int64_t again = peak_of(m, x, true);
    fprintf(stderr, "recompute: peak tensor bytes of forward+backward: plain %lld, "
                    "recomputed %lld\n", (long long)plain, (long long)again);
    /* the plain stack keeps 8 x (1 + 4) MiB of activations until its
     * backward; the recomputed one keeps 8 x 1 MiB, and one block's insides
     * while that block's backward runs; both end with 16 MiB of .grad */
    cr_assert(plain - again >= 16 * (1 << 20), "plain %lld, recomputed %lld", (long long)plain,
              (long long)again);
    expect_same_bits(gx, tg_tensor_grad(x), "x");
    for (int i = 0; i < n; i++) {
        char what[32];
        snprintf(what, sizeof what, "parameter %d", i);
        expect_same_bits(gp[i], tg_tensor_grad(params[i]), what);
        tg_tensor_release(gp[i]);
    }
    free(params);
    tg_tensor_release(gx);
    tg_tensor_release(x);
    tg_module_release(m);
}

/* outs[0] = tanh(a * b) + c, outs[1] = a * a * b: a and b require grad, c
 * does not. */
static int two_out(tg_tensor **outs, int n_out, int n_in, tg_tensor *const *in, void *user)
{
    int *calls = user;
    ++*calls;
    cr_assert(eq(int, n_out, 2));
    cr_assert(eq(int, n_in, 3));
    tg_tensor *ab = NULL, *t = NULL, *aa = NULL;
    int rc = tg_mul(&ab, in[0], in[1]);
    if (rc >= 0) rc = tg_tanh(&t, ab);
    if (rc >= 0) rc = tg_add(&outs[0], t, in[2]);
    if (rc >= 0) rc = tg_mul(&aa, in[0], in[0]);
    if (rc >= 0) rc = tg_mul(&outs[1], aa, in[1]);
    tg_tensor_release(ab);
    tg_tensor_release(t);
    tg_tensor_release(aa);
    return rc;
}

/* loss = sum(outs[0] * w0) + sum(outs[1] * w1) */
static void two_out_loss(tg_tensor *const *outs, tg_tensor *w0, tg_tensor *w1)
{
    tg_tensor *p0 = NULL, *p1 = NULL, *s0 = NULL, *s1 = NULL, *loss = NULL;
    OK(tg_mul(&p0, outs[0], w0));
    OK(tg_mul(&p1, outs[1], w1));
    OK(tg_sum(&s0, p0));
    OK(tg_sum(&s1, p1));
    OK(tg_add(&loss, s0, s1));
    OK(tg_backward(loss, NULL, NULL));
    tg_tensor *all[] = {p0, p1, s0, s1, loss};
    for (int i = 0; i < 5; i++) tg_tensor_release(all[i]);
}

Test(recompute, several_inputs_and_outputs)
{
    const int64_t s[2] = {3, 4};
    tg_tensor *a = randn(2, s, 10, true), *b = randn(2, s, 11, true), *c = randn(2, s, 12, false);
    tg_tensor *w0 = randn(2, s, 13, false), *w1 = randn(2, s, 14, false);
    tg_tensor *in[3] = {a, b, c}, *outs[2] = {0};
    int calls = 0;
    OK(two_out(outs, 2, 3, in, &calls));
    two_out_loss(outs, w0, w1);
    tg_tensor *ga = grad_copy(a), *gb = grad_copy(b);
    tg_tensor_release(outs[0]);
    tg_tensor_release(outs[1]);
    tg_tensor_set_grad(a, NULL);
    tg_tensor_set_grad(b, NULL);

    calls = 0;
    OK(tg_recompute(outs, 2, two_out, &calls, 3, in));
    cr_assert(eq(int, calls, 1));
    cr_assert(tg_tensor_requires_grad(outs[0]) && tg_tensor_requires_grad(outs[1]));
    cr_assert(eq(i64, tg_tensor_shape(outs[1])[1], 4));
    two_out_loss(outs, w0, w1);
    cr_assert(eq(int, calls, 2));
    expect_same_bits(ga, tg_tensor_grad(a), "a");
    expect_same_bits(gb, tg_tensor_grad(b), "b");
    cr_assert_null(tg_tensor_grad(c));
    tg_tensor *all[] = {outs[0], outs[1], ga, gb, a, b, c, w0, w1};
    for (int i = 0; i < 9; i++) tg_tensor_release(all[i]);
}

/* Only one of two outputs used: the other's gradient is zero. */
Test(recompute, an_unused_output_gives_no_gradient)
{
    const int64_t s[2] = {2, 3};
    tg_tensor *a = randn(2, s, 20, true), *b = randn(2, s, 21, true), *c = randn(2, s, 22, false);
    tg_tensor *in[3] = {a, b, c}, *outs[2] = {0}, *loss = NULL;
    int calls = 0;
    OK(two_out(outs, 2, 3, in, &calls));
    OK(tg_sum(&loss, outs[1]));
    OK(tg_backward(loss, NULL, NULL));
    tg_tensor *ga = grad_copy(a);
    tg_tensor_release(loss);
    tg_tensor_release(outs[0]);
    tg_tensor_release(outs[1]);
    tg_tensor_set_grad(a, NULL);
    OK(tg_recompute(outs, 2, two_out, &calls, 3, in));
    OK(tg_sum(&loss, outs[1]));
    OK(tg_backward(loss, NULL, NULL));
    expect_same_bits(ga, tg_tensor_grad(a), "a");
    tg_tensor *all[] = {loss, outs[0], outs[1], ga, a, b, c};
    for (int i = 0; i < 7; i++) tg_tensor_release(all[i]);
}

/* Linear, Dropout(0.5), Linear: the recomputation draws the forward's mask,
 * and the Dropout's count moves as after one forward. */
static tg_module *dropout_block(void)
{
    tg_module *seq = NULL, *m = NULL;
    tg_rng rng;
    tg_rng_init(&rng, 30);
    OK(tg_nn_sequential_new(&seq));
    append(seq, tg_nn_linear_new(&m, 12, 12, true, &rng), &m);
    append(seq, tg_nn_dropout_new(&m, 0.5, 99), &m);
    append(seq, tg_nn_linear_new(&m, 12, 3, true, &rng), &m);
    tg_module_train(seq, true);
    return seq;
}

/* loss = sum(m(x)) (recomputed or not), then a second forward of m before
 * the backward of the first: the block's recomputation must draw the first
 * forward's mask, and leave the count where the second forward left it. */
static float dropout_run(tg_module *m, tg_tensor *x, bool recompute, tg_tensor **second)
{
    tg_tensor *y = NULL, *loss = NULL;
    if (recompute) OK(tg_module_forward_recompute(m, &y, x));
    else OK(tg_module_forward(m, &y, x));
    OK(tg_module_forward(m, second, x));
    OK(tg_sum(&loss, y));
    OK(tg_backward(loss, NULL, NULL));
    float v = *(float *)tg_tensor_data(loss);
    tg_tensor_release(loss);
    tg_tensor_release(y);
    return v;
}

Test(recompute, dropout_draws_the_same_mask)
{
    tg_module *m1 = dropout_block(), *m2 = dropout_block();
    tg_tensor *x = randn(2, (int64_t[]){6, 12}, 31, true), *y1 = NULL, *y2 = NULL;
    float plain = dropout_run(m1, x, false, &y1);
    tg_tensor *gx = grad_copy(x), *gw = grad_copy(tg_module_find(m1, "0.weight"));
    tg_tensor_set_grad(x, NULL);
    float again = dropout_run(m2, x, true, &y2);
    cr_assert(memcmp(&plain, &again, sizeof plain) == 0, "loss %g vs %g", plain, again);
    expect_same_bits(gx, tg_tensor_grad(x), "x");
    expect_same_bits(gw, tg_tensor_grad(tg_module_find(m2, "0.weight")), "0.weight");
    expect_same_bits(y1, y2, "second forward");
    tg_tensor_release(y1);
    tg_tensor_release(y2);
    /* the third forward of both draws the same (third) mask */
    OK(tg_module_forward(m1, &y1, x));
    OK(tg_module_forward(m2, &y2, x));
    expect_same_bits(y1, y2, "third forward");
    tg_tensor *all[] = {y1, y2, gx, gw, x};
    for (int i = 0; i < 5; i++) tg_tensor_release(all[i]);
    tg_module_release(m1);
    tg_module_release(m2);
}

Test(recompute, tape_print_lists_the_node)
{
    tg_module *m = mlp(3, 4, 42);
    tg_tensor *x = randn(2, (int64_t[]){2, 4}, 43, true), *y = NULL;
    OK(tg_module_forward_recompute(m, &y, x));
    char buf[4096] = {0};
    FILE *f = fmemopen(buf, sizeof buf - 1, "w");
    OK(tg_tape_print(f, y));
    fclose(f);
    /* one node, whose inputs are x and one parameter (no linear, no tanh) */
    cr_assert(strstr(buf, "recompute") != NULL, "%s", buf);
    cr_assert(strstr(buf, "linear") == NULL && strstr(buf, "tanh") == NULL, "%s", buf);
    tg_tensor_release(y);
    tg_tensor_release(x);
    tg_module_release(m);
}

/* Inside a scope the outputs belong to the scope, and nothing the block
 * makes in the forward or the backward does. */
Test(recompute, outputs_are_owned_by_an_open_scope)
{
    const int64_t s[2] = {3, 4};
    tg_tensor *a = randn(2, s, 60, true), *b = randn(2, s, 61, true), *c = randn(2, s, 62, false);
    tg_tensor *in[3] = {a, b, c}, *outs[2] = {0}, *p = NULL, *loss = NULL;
    int calls = 0;
    OK(tg_scope_begin());
    OK(tg_recompute(outs, 2, two_out, &calls, 3, in));
    OK(tg_mul(&p, outs[0], outs[1]));
    OK(tg_sum(&loss, p));
    OK(tg_backward(loss, NULL, NULL));
    tg_tensor *kept = tg_scope_keep(outs[1]);
    cr_assert(kept == outs[1], "%s", tg_error_message());
    OK(tg_scope_end());
    tg_tensor_release(kept);
    cr_assert(eq(int, calls, 2));
    cr_assert_not_null(tg_tensor_grad(a));
    tg_tensor_release(a);
    tg_tensor_release(b);
    tg_tensor_release(c);
}

/* retain_graph: a second backward runs the block again and adds the same
 * gradients. */
Test(recompute, a_second_backward_with_retain_graph_adds_again)
{
    tg_module *m = mlp(2, 6, 63);
    tg_tensor *x = randn(2, (int64_t[]){3, 6}, 64, true), *y = NULL, *loss = NULL;
    OK(tg_module_forward_recompute(m, &y, x));
    OK(tg_sum(&loss, y));
    tg_backward_opts o = {.retain_graph = true};
    OK(tg_backward(loss, NULL, &o));
    tg_tensor *g1 = grad_copy(x), *twice = NULL;
    OK(tg_backward(loss, NULL, NULL));
    OK(tg_add(&twice, g1, g1));
    expect_same_bits(twice, tg_tensor_grad(x), "x after two backwards");
    cr_assert(eq(int, tg_backward(loss, NULL, NULL), TG_EGRAD));
    tg_tensor *all[] = {twice, g1, loss, y, x};
    for (int i = 0; i < 5; i++) tg_tensor_release(all[i]);
    tg_module_release(m);
}
