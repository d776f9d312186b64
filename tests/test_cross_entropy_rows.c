/* tests/test_cross_entropy_rows.c - cross_entropy of f32 (N, C) logits and
 * class indices as one op (src/ops/cross_entropy_rows.c): its value and
 * gradient have the bits of log_softmax followed by nll_loss for every
 * reduction, with and without weights and an ignore_index, 1 and 2
 * threads, every exp width, contiguous and transposed logits and rows
 * holding -inf, +inf and NaN; a create_graph backward gives the
 * composition's second derivative; the messages of bad targets are the
 * composition's. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <string.h>

#include "cross_entropy_fixtures.h"
#include "helpers.h"
#include "ops/softmax_rows_internal.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

Test(cross_entropy_rows, value_and_gradient_have_the_composition_bits)
{
    /* (40, 1000) and (4000, 10) are two tasks of rows; rows of fewer than
     * 256 classes go through the exp in blocks of 1024 values: (300, 10)
     * three of them, (37, 63) three, the last of five rows, (9, 255) three */
    static const int64_t shapes[][4] = {{40, 1000}, {4000, 10}, {300, 10}, {37, 63},
                                        {5, 1},     {9, 255},   {3, 256}};
    static const int ndims[] = {2, 2, 2, 2, 2, 2, 2};
    const int checked = expect_shapes_as_composition(TG_F32, 7, ndims, shapes, 40);
    cr_assert(eq(int, checked, 7 * 2 * 2 * 2 * 3 * 2 * 2));
}

/* tg_cross_entropy (mean, sum, none, no options) is the one op too, in
 * every exp width this CPU runs. */
Test(cross_entropy_rows, every_exp_width_and_tg_cross_entropy)
{
    const int64_t shape[2] = {33, 257};
    tg_tensor *x = logits(TG_F32, 2, shape, false, true, 9), *t = targets(2, shape, -1);
    int widths = 0;
    for (int wd = 1; wd <= 3; wd++) {
        tg__exp_width_force(wd);
        if (tg__exp_width_get() != (tg__exp_width)wd) continue;
        widths++;
        for (int r = 0; r < 3; r++) {
            tg_tensor *ya = NULL, *yb = NULL, *lp = NULL, *ga = NULL, *gb = NULL;
            OK(tg_cross_entropy(&ya, x, t, REDS[r]));
            cr_assert(tape_has(ya, "cross_entropy"), "width %d", wd);
            OK(tg_log_softmax(&lp, x, 1));
            OK(tg_nll_loss(&yb, lp, t, NULL, REDS[r], TG_IGNORE_INDEX_DEFAULT));
            th_expect_same_bits(RED_NAMES[r], x, ya, yb);
            OK(tg_sum(&ga, ya));
            OK(tg_backward(ga, NULL, NULL));
            tg_tensor_release(ga);
            OK(tg_tensor_detach(&ga, tg_tensor_grad(x)));
            tg_tensor_zero_grad(x);
            OK(tg_sum(&gb, yb));
            OK(tg_backward(gb, NULL, NULL));
            tg_tensor_release(gb);
            OK(tg_tensor_detach(&gb, tg_tensor_grad(x)));
            tg_tensor_zero_grad(x);
            th_expect_same_bits(RED_NAMES[r], x, ga, gb);
            th_release_all(5, (tg_tensor *[]){ya, yb, lp, ga, gb});
        }
    }
    tg__exp_width_force(0);
    cr_assert(widths >= 1);
    th_release_all(2, (tg_tensor *[]){x, t});
}

/* A create_graph backward builds the composition's ops: the gradient and
 * the gradient of sum(grad * v) have the composition's bits. */
Test(cross_entropy_rows, create_graph_gives_the_composition_second_derivative)
{
    const int64_t N = 6, C = 5, shape[2] = {N, C};
    tg_tensor *x = logits(TG_F32, 2, shape, false, false, 3), *t = targets(2, shape, 2);
    tg_tensor *w = th_tensor_from(TG_F32, 1, &C, (double[]){0.5, 2, 1.5, 1, 0.25});
    tg_tensor *v = th_rand_uniform(TG_F32, 2, (int64_t[]){6, 5}, 8);
    expect_second_derivative_as_composition(x, t, w, v);
    th_release_all(4, (tg_tensor *[]){x, t, w, v});
}

/* A target out of range is refused with the composition's message; f64
 * logits take the one op too; label smoothing takes cross_entropy_soft
 * (src/ops/cross_entropy_soft.c); a weight requiring grad is refused. */
Test(cross_entropy_rows, refusals_and_other_arguments_as_the_composition)
{
    tg_tensor *x = logits(TG_F32, 2, (int64_t[]){3, 4}, false, false, 4), *y = NULL;
    tg_tensor *bad = th_tensor_from(TG_I64, 1, (int64_t[]){3}, (double[]){0, 7, 1});
    cr_assert(eq(int, tg_cross_entropy_ex(&y, x, bad, NULL, -100, TG_REDUCTION_MEAN, 0.0),
                 TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "nll_loss: target[1]=7 must be a class in [0, 4)") !=
                  NULL, "%s", tg_error_message());
    cr_assert(eq(ptr, y, NULL));
    tg_tensor *t = targets(2, (int64_t[]){3, 4}, -1), *x64 = NULL, *w = NULL;
    OK(tg_to_dtype(&x64, x, TG_F64));
    OK(tg_cross_entropy_ex(&y, x64, t, NULL, -100, TG_REDUCTION_MEAN, 0.0));
    cr_assert(tape_has(y, "cross_entropy"));
    tg_tensor_release(y);
    OK(tg_cross_entropy_ex(&y, x, t, NULL, -100, TG_REDUCTION_MEAN, 0.1));
    cr_assert(tape_has(y, "cross_entropy_soft"));
    tg_tensor_release(y);
    OK(tg_tensor_full(&w, TG_F32, 1, (int64_t[]){4}, 1.0));
    OK(tg_tensor_set_requires_grad(w, true));
    cr_assert(eq(int, tg_cross_entropy_ex(&y, x, t, w, -100, TG_REDUCTION_MEAN, 0.0),
                 TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "nll_loss: weight requires grad") != NULL, "%s",
              tg_error_message());
    th_release_all(5, (tg_tensor *[]){x, bad, t, x64, w});
}
