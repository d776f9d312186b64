/* tests/test_recompute_refusals.c - what tg_recompute, tg_recompute_ex and
 * tg_module_forward_recompute (autograd.h, nn.h) refuse: a backward that
 * builds a graph of the gradients, fn failing in the forward or in the
 * recomputation, another shape on recomputation, fn reading a non-leaf
 * besides its inputs, and bad arguments. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <string.h>

#include "recompute_fixtures.h"
#include "tapegrad/autograd.h"
#include "tapegrad/nn.h"
#include "tapegrad/ops.h"

Test(recompute_refusals, create_graph_and_tg_grad_are_refused)
{
    tg_module *m = mlp(1, 4, 40);
    tg_tensor *x = randn(2, (int64_t[]){2, 4}, 41, true), *y = NULL, *loss = NULL, *g = NULL;
    OK(tg_module_forward_recompute(m, &y, x));
    OK(tg_sum(&loss, y));
    tg_backward_opts o = {.create_graph = true};
    cr_assert(eq(int, tg_backward(loss, NULL, &o), TG_EGRAD));
    cr_assert(strstr(tg_error_message(), "recompute") != NULL, "%s", tg_error_message());
    cr_assert(eq(int, tg_grad(&g, 1, &loss, NULL, 1, &x, NULL), TG_EGRAD));
    cr_assert(strstr(tg_error_message(), "tg_grad") != NULL, "%s", tg_error_message());
    cr_assert_null(g);
    tg_tensor_release(loss);
    tg_tensor_release(y);
    tg_tensor_release(x);
    tg_module_release(m);
}

/* Fails on call number *user (1: the forward, 2: the recomputation);
 * with *user = -1, gives another shape the second time. */
static int flaky(tg_tensor **outs, int n_out, int n_in, tg_tensor *const *in, void *user)
{
    (void)n_out;
    (void)n_in;
    int *plan = user;
    static _Thread_local int calls;
    if (plan[1] == 0) calls = 0;
    plan[1] = ++calls;
    if (plan[0] == calls) return tg_error_set(TG_ESHAPE, "flaky: fails on call %d", calls);
    if (plan[0] == -1 && calls == 2) return tg_sum(&outs[0], in[0]);
    return tg_tanh(&outs[0], in[0]);
}

Test(recompute_refusals, fn_failing_in_the_forward_records_nothing)
{
    tg_tensor *x = randn(1, (int64_t[]){3}, 50, true), *y = (tg_tensor *)0x1;
    int plan[2] = {1, 0};
    cr_assert(eq(int, tg_recompute(&y, 1, flaky, plan, 1, &x), TG_ESHAPE));
    cr_assert(strstr(tg_error_message(), "fails on call 1") != NULL, "%s", tg_error_message());
    cr_assert(y == (tg_tensor *)0x1);
    tg_tensor_release(x);
}

Test(recompute_refusals, fn_failing_in_the_recomputation_fails_the_backward)
{
    tg_tensor *x = randn(1, (int64_t[]){3}, 51, true), *y = NULL, *loss = NULL;
    int plan[2] = {2, 0};
    OK(tg_recompute(&y, 1, flaky, plan, 1, &x));
    OK(tg_sum(&loss, y));
    cr_assert(eq(int, tg_backward(loss, NULL, NULL), TG_ESHAPE));
    cr_assert(strstr(tg_error_message(), "fails on call 2") != NULL, "%s", tg_error_message());
    cr_assert_null(tg_tensor_grad(x));
    tg_tensor_release(loss);
    tg_tensor_release(y);
    tg_tensor_release(x);
}

Test(recompute_refusals, another_shape_on_recomputation_is_egrad)
{
    tg_tensor *x = randn(1, (int64_t[]){3}, 52, true), *y = NULL, *loss = NULL;
    int plan[2] = {-1, 0};
    OK(tg_recompute(&y, 1, flaky, plan, 1, &x));
    OK(tg_sum(&loss, y));
    cr_assert(eq(int, tg_backward(loss, NULL, NULL), TG_EGRAD));
    cr_assert(strstr(tg_error_message(), "outs[0] was f32 (3)") != NULL, "%s",
              tg_error_message());
    tg_tensor_release(loss);
    tg_tensor_release(y);
    tg_tensor_release(x);
}

/* outs[0] = in[0] * h: h is in[1] when there are two inputs, else the
 * tensor user, which fn reads besides its input. */
static int times_h(tg_tensor **outs, int n_out, int n_in, tg_tensor *const *in, void *user)
{
    (void)n_out;
    return tg_mul(&outs[0], in[0], n_in == 2 ? in[1] : user);
}

/* A non-leaf that fn reads without it being an input would have its history
 * walked by the block's own backward beside the outer one: refused, naming
 * the op that made it; detached, or as an input, it is fine. */
Test(recompute_refusals, fn_reading_a_non_leaf_besides_its_inputs_is_egrad)
{
    tg_tensor *x = randn(1, (int64_t[]){3}, 54, true), *w = randn(1, (int64_t[]){3}, 55, true);
    tg_tensor *h = NULL, *y = NULL, *loss = NULL;
    OK(tg_tanh(&h, w));
    OK(tg_recompute(&y, 1, times_h, h, 1, &x));
    OK(tg_sum(&loss, y));
    cr_assert(eq(int, tg_backward(loss, NULL, NULL), TG_EGRAD));
    cr_assert(strstr(tg_error_message(), "fn reads a tensor that is not one of its inputs and "
                                         "not a leaf (the output of tanh") != NULL,
              "%s", tg_error_message());
    cr_assert_null(tg_tensor_grad(w));
    tg_tensor_release(loss);
    tg_tensor_release(y);

    /* detached, h is a constant of the block: x gets h as its gradient */
    tg_tensor *hd = NULL;
    OK(tg_tensor_detach(&hd, h));
    OK(tg_recompute(&y, 1, times_h, hd, 1, &x));
    OK(tg_sum(&loss, y));
    OK(tg_backward(loss, NULL, NULL));
    expect_same_bits(tg_tensor_grad(x), hd, "x's gradient");
    cr_assert_null(tg_tensor_grad(w));
    tg_tensor_release(loss);
    tg_tensor_release(y);
    tg_tensor_release(hd);

    /* as an input: w's gradient is the plain block's */
    tg_tensor_set_grad(x, NULL);
    tg_tensor *in[2] = {x, h};
    OK(times_h(&y, 1, 2, in, NULL));
    OK(tg_sum(&loss, y));
    OK(tg_backward(loss, NULL, NULL));
    tg_tensor *gw = grad_copy(w);
    tg_tensor_release(loss);
    tg_tensor_release(y);
    tg_tensor_set_grad(w, NULL);
    OK(tg_tanh(&hd, w));   /* h's graph was freed by that backward: a new one */
    in[1] = hd;
    OK(tg_recompute(&y, 1, times_h, NULL, 2, in));
    OK(tg_sum(&loss, y));
    OK(tg_backward(loss, NULL, NULL));
    expect_same_bits(gw, tg_tensor_grad(w), "w's gradient");
    tg_tensor_release(gw);
    tg_tensor_release(loss);
    tg_tensor_release(y);
    tg_tensor_release(hd);
    tg_tensor_release(h);
    tg_tensor_release(w);
    tg_tensor_release(x);
}

static int mixed_dtypes(tg_tensor **outs, int n_out, int n_in, tg_tensor *const *in, void *user)
{
    (void)n_out;
    (void)n_in;
    (void)user;
    TG_TRY(tg_tanh(&outs[0], in[0]));
    return tg_tensor_to_dtype(&outs[1], in[0], TG_F64);
}

static int leaves_null(tg_tensor **outs, int n_out, int n_in, tg_tensor *const *in, void *user)
{
    (void)outs, (void)n_out, (void)n_in, (void)in, (void)user;
    return TG_OK;
}

Test(recompute_refusals, bad_arguments_are_refused)
{
    tg_tensor *x = randn(1, (int64_t[]){3}, 53, true), *outs[2] = {0};
    tg_tensor *in9[9] = {x, x, x, x, x, x, x, x, x}, *nul[1] = {NULL};
    int plan[2] = {0, 0};
    cr_assert(eq(int, tg_recompute(NULL, 1, flaky, plan, 1, &x), TG_EINVAL));
    cr_assert(eq(int, tg_recompute(outs, 1, NULL, plan, 1, &x), TG_EINVAL));
    cr_assert(eq(int, tg_recompute(outs, 1, flaky, plan, 1, NULL), TG_EINVAL));
    cr_assert(eq(int, tg_recompute(outs, 1, flaky, plan, 1, nul), TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "in[0] is NULL") != NULL, "%s", tg_error_message());
    cr_assert(eq(int, tg_recompute(outs, 0, flaky, plan, 1, &x), TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "n_out=0") != NULL, "%s", tg_error_message());
    cr_assert(eq(int, tg_recompute(outs, 9, flaky, plan, 1, &x), TG_EINVAL));
    cr_assert(eq(int, tg_recompute(outs, 1, flaky, plan, 0, &x), TG_EINVAL));
    cr_assert(eq(int, tg_recompute(outs, 1, flaky, plan, 9, in9), TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "n_in=9") != NULL, "%s", tg_error_message());
    cr_assert(eq(int, tg_recompute_ex(outs, 1, flaky, NULL, 4, 1, &x, 0, NULL), TG_EINVAL));
    cr_assert(eq(int, tg_recompute_ex(outs, 1, flaky, plan, 0, 1, &x, -1, NULL), TG_EINVAL));
    cr_assert(eq(int, tg_recompute_ex(outs, 1, flaky, plan, 0, 1, &x, 1, NULL), TG_EINVAL));
    cr_assert(eq(int, tg_recompute_ex(outs, 1, flaky, plan, 0, 1, &x, 1, nul), TG_EINVAL));
    cr_assert(eq(int, tg_recompute_ex(outs, 1, flaky, plan, 0, 8, in9, 1, &x), TG_EINVAL));
    cr_assert(eq(int, tg_recompute(outs, 2, mixed_dtypes, NULL, 1, &x), TG_EDTYPE));
    cr_assert(strstr(tg_error_message(), "outs[1] is f64") != NULL, "%s", tg_error_message());
    cr_assert(eq(int, tg_recompute(outs, 1, leaves_null, NULL, 1, &x), TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "outs[0] NULL") != NULL, "%s", tg_error_message());
    cr_assert(outs[0] == NULL && outs[1] == NULL);
    cr_assert(eq(int, tg_module_forward_recompute(NULL, outs, x), TG_EINVAL));
    cr_assert(eq(int, tg_module_forward_recompute((tg_module *)0x1, NULL, x), TG_EINVAL));
    cr_assert(eq(int, tg_module_forward_recompute((tg_module *)0x1, outs, NULL), TG_EINVAL));
    tg_tensor_release(x);
}
