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
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cross_entropy_fixtures.h"
#include "helpers.h"
#include "ops/softmax_rows_internal.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())



/* Logits (N, C) of U[-4, 4) (seed), contiguous or the transpose of a
 * (C, N) tensor, requiring grad; with special, row 1 holds a -inf, row 2
 * a +inf and row 3 a NaN. */
static tg_tensor *logits(int64_t N, int64_t C, bool transposed, bool special, uint64_t seed)
{
    uint64_t st = seed;
    tg_tensor *base = th_rand_tensor(&st, TG_F32, 2,
                                     transposed ? (int64_t[]){C, N} : (int64_t[]){N, C}, -4, 4);
    float *v = tg_tensor_data(base);
    if (special && N >= 4 && C >= 2) {
        const int64_t at[3] = {1 * C + 1, 2 * C + 0, 3 * C + C - 1};   /* (n, c) as n C + c */
        const float val[3] = {-INFINITY, INFINITY, NAN};
        for (int k = 0; k < 3; k++) {
            const int64_t n = at[k] / C, c = at[k] % C;
            v[transposed ? c * N + n : n * C + c] = val[k];
        }
    }
    tg_tensor *x = base;
    if (transposed) {
        tg_tensor *t = NULL;
        OK(tg_transpose(&t, base, 0, 1));
        tg_tensor *leaf = NULL;
        OK(tg_tensor_detach(&leaf, t));
        tg_tensor_release(t);
        tg_tensor_release(base);
        x = leaf;
    }
    OK(tg_tensor_set_requires_grad(x, true));
    return x;
}



Test(cross_entropy_rows, value_and_gradient_have_the_composition_bits)
{
    /* (40, 1000) and (4000, 10) are two tasks of rows; rows of fewer than
     * 256 classes go through the exp in blocks of 1024 values: (300, 10)
     * three of them, (37, 63) three, the last of five rows, (9, 255) three */
    static const int64_t shapes[][2] = {{40, 1000}, {4000, 10}, {300, 10}, {37, 63},
                                        {5, 1}, {9, 255}, {3, 256}};
    const int threads = tg_get_num_threads();
    int checked = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        const int64_t N = shapes[s][0], C = shapes[s][1];
        uint64_t wst = 17;
        tg_tensor *w = th_rand_tensor(&wst, TG_F32, 1, &C, 0.5, 2);
        for (int layout = 0; layout < 2; layout++)
            for (int special = 0; special < 2; special++) {
                tg_tensor *x = logits(N, C, layout == 1, special == 1, 40 + s);
                for (int ig = 0; ig < 2; ig++) {
                    const int64_t ignore = ig ? C / 2 : TG_IGNORE_INDEX_DEFAULT;
                    tg_tensor *t = targets(2, (int64_t[]){N, C}, ig ? ignore : -1);
                    for (int r = 0; r < 3; r++)
                        for (int weighted = 0; weighted < 2; weighted++)
                            for (int th = 1; th <= 2; th++) {
                                OK(tg_set_num_threads(th));
                                char what[160];
                                snprintf(what, sizeof what,
                                         "(%lld, %lld) layout %d special %d ignore %d %s "
                                         "weight %d threads %d", (long long)N, (long long)C,
                                         layout, special, ig, RED_NAMES[r], weighted, th);
                                expect_as_composition(what, x, t, weighted ? w : NULL,
                                                      ignore, r);
                                checked++;
                            }
                    tg_tensor_release(t);
                }
                tg_tensor_release(x);
            }
        tg_tensor_release(w);
    }
    OK(tg_set_num_threads(threads));
    cr_assert(eq(int, checked, 7 * 2 * 2 * 2 * 3 * 2 * 2));
}

/* tg_cross_entropy (mean, sum, none, no options) is the one op too, in
 * every exp width this CPU runs. */
Test(cross_entropy_rows, every_exp_width_and_tg_cross_entropy)
{
    tg_tensor *x = logits(33, 257, false, true, 9), *t = targets(2, (int64_t[]){33, 257}, -1);
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
    const int64_t N = 6, C = 5;
    tg_tensor *x = logits(N, C, false, false, 3), *t = targets(2, (int64_t[]){N, C}, 2);
    tg_tensor *w = th_tensor_from(TG_F32, 1, &C, (double[]){0.5, 2, 1.5, 1, 0.25});
    tg_tensor *v = th_rand_uniform(TG_F32, 2, (int64_t[]){6, 5}, 8);
    expect_second_derivative_as_composition(x, t, w, v);
    th_release_all(4, (tg_tensor *[]){x, t, w, v});
}

/* A target out of range is refused with the composition's message; f64
 * logits take the one op too; label smoothing and a weight requiring grad
 * stay with the composition. */
Test(cross_entropy_rows, refusals_and_other_arguments_as_the_composition)
{
    tg_tensor *x = logits(3, 4, false, false, 4), *y = NULL;
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
    cr_assert(tape_has(y, "log_softmax"));
    tg_tensor_release(y);
    OK(tg_tensor_full(&w, TG_F32, 1, (int64_t[]){4}, 1.0));
    OK(tg_tensor_set_requires_grad(w, true));
    cr_assert(eq(int, tg_cross_entropy_ex(&y, x, t, w, -100, TG_REDUCTION_MEAN, 0.0),
                 TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "nll_loss: weight requires grad") != NULL, "%s",
              tg_error_message());
    th_release_all(5, (tg_tensor *[]){x, bad, t, x64, w});
}
