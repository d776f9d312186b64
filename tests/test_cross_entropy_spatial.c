/* tests/test_cross_entropy_spatial.c - cross_entropy as one op
 * (src/ops/cross_entropy_rows.c) for spatial f32 logits (N, C, d1, ...)
 * and for f64 logits (N, C) or (N, C, d1, ...): its value and gradient
 * have the bits of log_softmax over dim 1 followed by nll_loss for every
 * reduction, with and without weights and an ignore_index, 1 and 2
 * threads, contiguous and channels-last logits and rows holding -inf, +inf
 * and NaN, and f32 spatial rows in every exp width; f64 slabs shared among
 * tasks by rows, the same bits with 1 and 2 threads; a create_graph
 * backward gives the composition's second derivative; f64 gradchecks;
 * other arguments stay with the composition. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdio.h>
#include <string.h>

#include "cross_entropy_fixtures.h"
#include "helpers.h"
#include "ops/softmax_rows_internal.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

Test(cross_entropy_spatial, f32_spatial_has_the_composition_bits)
{
    /* (2, 10, 64, 32): two slabs of 20480, two tasks; (64, 10, 8, 8): 64
     * slabs of 640, tasks of 51; (5, 7, 1): S = 1, the vectorized rows */
    static const int64_t shapes[][4] = {{3, 5, 4, 0}, {4, 3, 7, 5}, {2, 10, 64, 32},
                                        {64, 10, 8, 8}, {5, 7, 1, 0}, {2, 1, 3, 0}};
    static const int ndims[] = {3, 4, 4, 4, 3, 3};
    const int checked = expect_shapes_as_composition(TG_F32, 6, ndims, shapes, 40);
    cr_assert(eq(int, checked, 6 * 96));
}

/* The one op's value (reduction none) and the gradient of its sum. */
static void one_op(tg_tensor *x, tg_tensor *t, int64_t ignore, tg_tensor **v, tg_tensor **g)
{
    tg_tensor *s = NULL;
    OK(tg_cross_entropy_ex(v, x, t, NULL, ignore, TG_REDUCTION_NONE, 0.0));
    OK(tg_sum(&s, *v));
    OK(tg_backward(s, NULL, NULL));
    OK(tg_tensor_detach(g, tg_tensor_grad(x)));
    tg_tensor_zero_grad(x);
    tg_tensor_release(s);
}

/* Spatial f32 rows of S = 3, 7, 9, 17 and 1024 positions (tails of the
 * four and eight lanes) and C = 1, 2, 10, 1000 classes, with -inf, +inf
 * and NaN: in each exp width this CPU runs and with 1 and 2 threads, the
 * one op has the composition's bits, and its value and gradient the same
 * bits in every width and thread count. */
Test(cross_entropy_spatial, f32_spatial_same_bits_in_every_exp_width)
{
    static const int64_t ss[] = {3, 7, 9, 17, 1024}, cs[] = {1, 2, 10, 1000};
    static const char *const names[] = {"", "plain", "AVX2", "AVX-512"};
    const int threads = tg_get_num_threads();
    int widths = 0;
    for (size_t ci = 0; ci < sizeof cs / sizeof *cs; ci++)
        for (size_t si = 0; si < sizeof ss / sizeof *ss; si++) {
            const int64_t C = cs[ci], S = ss[si], shape[3] = {C * S > 20000 ? 1 : 5, C, S};
            tg_tensor *x = logits(TG_F32, 3, shape, false, true, 90 + 7 * ci + si);
            const int64_t ignore = C / 2;
            tg_tensor *t = targets(3, shape, ignore), *v0 = NULL, *g0 = NULL;
            OK(tg_set_num_threads(1));
            one_op(x, t, ignore, &v0, &g0);
            widths = 0;
            for (int w = 1; w <= 3; w++) {
                tg__exp_width_force(w);
                if (tg__exp_width_get() != (tg__exp_width)w) {
                    th_not_run("the %s exp width is not run: this CPU lacks it", names[w]);
                    continue;
                }
                widths++;
                for (int th = 1; th <= 2; th++) {
                    OK(tg_set_num_threads(th));
                    char what[160];
                    snprintf(what, sizeof what, "(%lld, %lld, %lld) width %s threads %d",
                             (long long)shape[0], (long long)C, (long long)S, names[w], th);
                    expect_as_composition(what, x, t, NULL, ignore, 2);
                    tg_tensor *v = NULL, *g = NULL;
                    one_op(x, t, ignore, &v, &g);
                    th_expect_same_bits(what, x, v, v0);
                    th_expect_same_bits(what, x, g, g0);
                    th_release_all(2, (tg_tensor *[]){v, g});
                }
            }
            tg__exp_width_force(0);
            th_release_all(4, (tg_tensor *[]){x, t, v0, g0});
        }
    OK(tg_set_num_threads(threads));
    cr_assert(widths >= 1, "no exp width ran");
}

/* One slab larger than a task whose positions (1100) are not a whole
 * number of tasks' rows (104 at C = 300): the last task's share is
 * partial. */
Test(cross_entropy_spatial, a_large_slab_shared_among_tasks)
{
    const int64_t shape[3] = {1, 300, 1100};
    cr_assert(eq(int, expect_cases_as_composition(TG_F32, 3, shape, 50), 96));
}

Test(cross_entropy_spatial, f64_has_the_composition_bits)
{
    static const int64_t shapes[][4] = {{40, 10, 0, 0},  {4000, 10, 0, 0}, {9, 1000, 0, 0},
                                        {3, 5, 4, 0},    {6, 10, 8, 8},    {37, 63, 0, 0}};
    static const int ndims[] = {2, 2, 2, 3, 4, 2};
    const int checked = expect_shapes_as_composition(TG_F64, 6, ndims, shapes, 70);
    cr_assert(eq(int, checked, 6 * 96));
}

/* A create_graph backward builds the composition's ops: the gradient and
 * the gradient of sum(grad * v) have the composition's bits. */
Test(cross_entropy_spatial, create_graph_gives_the_composition_second_derivative)
{
    static const int64_t shapes[2][3] = {{3, 5, 4}, {6, 5, 0}};
    static const tg_dtype dts[2] = {TG_F32, TG_F64};
    for (int c = 0; c < 2; c++) {
        const int ndim = c == 0 ? 3 : 2;
        const int64_t C = 5;
        tg_tensor *x = logits(dts[c], ndim, shapes[c], false, false, 3);
        tg_tensor *t = targets(ndim, shapes[c], 2);
        tg_tensor *w0 = th_tensor_from(dts[c], 1, &C, (double[]){0.5, 2, 1.5, 1, 0.25});
        tg_tensor *v = th_rand_uniform(dts[c], ndim, shapes[c], 8);
        expect_second_derivative_as_composition(x, t, w0, v);
        th_release_all(4, (tg_tensor *[]){x, t, w0, v});
    }
}

typedef struct gc_args {
    tg_tensor *target, *weight;
    tg_reduction red;
} gc_args;

static int ce_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    const gc_args *a = user;
    return tg_cross_entropy_ex(out, in[0], a->target, a->weight, 1, a->red, 0.0);
}

/* The f64 op (spatial and not) against finite differences, to the second
 * order. */
Test(cross_entropy_spatial, f64_gradchecks)
{
    static const int64_t shapes[2][3] = {{2, 4, 3}, {5, 4, 0}};
    const int64_t C = 4;
    tg_tensor *w = th_tensor_from(TG_F64, 1, &C, (double[]){0.5, 2, 1.5, 1});
    for (int c = 0; c < 2; c++) {
        const int ndim = c == 0 ? 3 : 2;
        tg_tensor *x = logits(TG_F64, ndim, shapes[c], false, false, 11);
        tg_tensor *t = targets(ndim, shapes[c], 1);
        for (int r = 0; r < 3; r++) {
            gc_args a = {.target = t, .weight = w, .red = REDS[r]};
            tg_tensor *y = NULL;
            OK(ce_fn(&y, 1, &x, &a));
            cr_assert(tape_has(y, "cross_entropy"));
            tg_tensor_release(y);
            th_expect_gradchecks(ce_fn, &a, 1, &x, "ndim %d %s", ndim, RED_NAMES[r]);
        }
        th_release_all(2, (tg_tensor *[]){x, t});
    }
    tg_tensor_release(w);
}

/* Spatial targets out of range are refused with the composition's message;
 * a weight of another dtype, a target of the wrong shape and f16 logits
 * stay with the composition. */
Test(cross_entropy_spatial, refusals_and_other_arguments_as_the_composition)
{
    const int64_t xs[3] = {2, 4, 3};
    tg_tensor *x = logits(TG_F32, 3, xs, false, false, 4), *y = NULL;
    tg_tensor *bad = th_tensor_from(TG_I64, 2, (int64_t[]){2, 3}, (double[]){0, 1, 2, 3, 9, 1});
    cr_assert(eq(int, tg_cross_entropy_ex(&y, x, bad, NULL, -100, TG_REDUCTION_MEAN, 0.0),
                 TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "nll_loss: target[1, 1]=9 must be a class in [0, 4)") !=
                  NULL, "%s", tg_error_message());
    cr_assert(eq(ptr, y, NULL));
    tg_tensor *t = targets(3, xs, -1), *x64 = NULL, *w = NULL, *x16 = NULL;
    tg_tensor *t2 = th_tensor_from(TG_I64, 1, (int64_t[]){2}, (double[]){0, 1});
    OK(tg_to_dtype(&x64, x, TG_F64));
    OK(tg_tensor_full(&w, TG_F32, 1, (int64_t[]){4}, 1.0));
    OK(tg_cross_entropy_ex(&y, x64, t, w, -100, TG_REDUCTION_MEAN, 0.0));
    cr_assert(tape_has(y, "nll_loss"));
    cr_assert(eq(int, tg_tensor_dtype(y), TG_F64));
    tg_tensor_release(y);
    cr_assert(eq(int, tg_cross_entropy_ex(&y, x, t2, NULL, -100, TG_REDUCTION_MEAN, 0.0),
                 TG_ESHAPE));
    cr_assert(strstr(tg_error_message(), "nll_loss: target has shape") != NULL, "%s",
              tg_error_message());
    OK(tg_to_dtype(&x16, x, TG_F16));
    OK(tg_cross_entropy_ex(&y, x16, t, NULL, -100, TG_REDUCTION_SUM, 0.0));
    cr_assert(tape_has(y, "nll_loss"));
    tg_tensor_release(y);
    th_release_all(7, (tg_tensor *[]){x, bad, t, x64, w, x16, t2});
}

/* tg_cross_entropy of f64 (N, C) logits is the one op too, with the
 * composition's value and gradient. */
Test(cross_entropy_spatial, tg_cross_entropy_of_f64_is_the_one_op)
{
    const int64_t xs[2] = {7, 5};
    tg_tensor *x = logits(TG_F64, 2, xs, false, true, 21), *t = targets(2, xs, -1);
    for (int r = 0; r < 3; r++) {
        tg_tensor *ya = NULL, *yb = NULL, *lp = NULL, *sa = NULL, *sb = NULL, *ga = NULL,
                  *gb = NULL;
        OK(tg_cross_entropy(&ya, x, t, REDS[r]));
        cr_assert(tape_has(ya, "cross_entropy"), "%s", RED_NAMES[r]);
        OK(tg_log_softmax(&lp, x, 1));
        OK(tg_nll_loss(&yb, lp, t, NULL, REDS[r], TG_IGNORE_INDEX_DEFAULT));
        th_expect_same_bits(RED_NAMES[r], x, ya, yb);
        OK(tg_sum(&sa, ya));
        OK(tg_backward(sa, NULL, NULL));
        OK(tg_tensor_detach(&ga, tg_tensor_grad(x)));
        tg_tensor_zero_grad(x);
        OK(tg_sum(&sb, yb));
        OK(tg_backward(sb, NULL, NULL));
        OK(tg_tensor_detach(&gb, tg_tensor_grad(x)));
        tg_tensor_zero_grad(x);
        th_expect_same_bits(RED_NAMES[r], x, ga, gb);
        th_release_all(7, (tg_tensor *[]){ya, yb, lp, sa, sb, ga, gb});
    }
    th_release_all(2, (tg_tensor *[]){x, t});
}

/* f64 logits of one slab larger than a task (1100 positions, 104 a task at
 * C = 300, the last share partial), shared among tasks by rows: the
 * composition's bits with 1 and 2 threads, and the one op's value and
 * gradient the same bits in both thread counts. */
Test(cross_entropy_spatial, f64_large_slab_shared_among_tasks)
{
    const int64_t shape[3] = {1, 300, 1100};
    cr_assert(eq(int, expect_cases_as_composition(TG_F64, 3, shape, 60), 96));
    tg_tensor *x = logits(TG_F64, 3, shape, false, true, 61);
    tg_tensor *t = targets(3, shape, 150), *v[2] = {NULL, NULL}, *g[2] = {NULL, NULL};
    const int threads = tg_get_num_threads();
    for (int th = 1; th <= 2; th++) {
        OK(tg_set_num_threads(th));
        one_op(x, t, 150, &v[th - 1], &g[th - 1]);
    }
    OK(tg_set_num_threads(threads));
    th_expect_same_bits("f64 2 threads against 1", x, v[1], v[0]);
    th_expect_same_bits("f64 2 threads against 1", x, g[1], g[0]);
    th_release_all(6, (tg_tensor *[]){x, t, v[0], v[1], g[0], g[1]});
}
