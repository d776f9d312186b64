/* tests/cross_entropy_fixtures.c - shared by test_cross_entropy_rows.c and
 * test_cross_entropy_spatial.c (cross_entropy_fixtures.h): the reductions,
 * the targets of a case, and the check of the one op against log_softmax
 * then nll_loss. */
#include "cross_entropy_fixtures.h"

#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

const char *const RED_NAMES[3] = {"mean", "sum", "none"};
const tg_reduction REDS[3] = {TG_REDUCTION_MEAN, TG_REDUCTION_SUM, TG_REDUCTION_NONE};

/* Whether y's tape names op (tg_tape_print). */
bool tape_has(const tg_tensor *y, const char *op)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert(f != NULL);
    OK(tg_tape_print(f, y));
    fclose(f);
    const bool has = strstr(buf, op) != NULL;
    free(buf);
    return has;
}

/* Targets of x's shape without dim 1: k * 7 % C for flat index k, every
 * third one ignore when ignore >= 0 (a class, so that it also counts as
 * one where not ignored). */
tg_tensor *targets(int ndim, const int64_t *shape, int64_t ignore)
{
    int64_t ts[8] = {0};
    int64_t K = 1;
    for (int d = 0, k = 0; d < ndim; d++)
        if (d != 1) K *= ts[k++] = shape[d];
    double *t = malloc((size_t)K * sizeof *t);
    for (int64_t k = 0; k < K; k++) t[k] = (double)((k * 7) % shape[1]);
    if (ignore >= 0)
        for (int64_t k = 0; k < K; k += 3) t[k] = (double)ignore;
    tg_tensor *r = th_tensor_from(TG_I64, ndim - 1, ts, t);
    free(t);
    return r;
}

/* The value and x's gradient (for an upstream gy) of cross_entropy (one op)
 * and of log_softmax followed by nll_loss: the same bits. */
void expect_as_composition(const char *what, tg_tensor *x, tg_tensor *t, tg_tensor *w,
                                  int64_t ignore, int r)
{
    tg_tensor *ya = NULL, *yb = NULL, *lp = NULL, *ga = NULL, *gb = NULL;
    OK(tg_cross_entropy_ex(&ya, x, t, w, ignore, REDS[r], 0.0));
    cr_assert(tape_has(ya, "cross_entropy"), "%s: not the one op", what);
    OK(tg_log_softmax(&lp, x, 1));
    OK(tg_nll_loss(&yb, lp, t, w, REDS[r], ignore));
    cr_assert(tape_has(yb, "nll_loss"), "%s", what);
    th_expect_same_bits(what, x, ya, yb);
    uint64_t st = 5;
    tg_tensor *gy = th_rand_tensor(&st, tg_tensor_dtype(x), tg_tensor_ndim(ya),
                                   tg_tensor_shape(ya), 0.5, 2);
    OK(tg_backward(ya, gy, NULL));
    OK(tg_tensor_detach(&ga, tg_tensor_grad(x)));
    tg_tensor_zero_grad(x);
    OK(tg_backward(yb, gy, NULL));
    OK(tg_tensor_detach(&gb, tg_tensor_grad(x)));
    tg_tensor_zero_grad(x);
    th_expect_same_bits(what, x, ga, gb);
    th_release_all(6, (tg_tensor *[]){ya, yb, lp, ga, gb, gy});
}

void expect_second_derivative_as_composition(tg_tensor *x, tg_tensor *t, tg_tensor *w,
                                             tg_tensor *v)
{
    for (int r = 0; r < 3; r++) {
        tg_tensor *g2[2] = {NULL, NULL}, *g1[2] = {NULL, NULL};
        for (int k = 0; k < 2; k++) {
            tg_tensor *y = NULL, *lp = NULL, *ones = NULL, *p = NULL, *s = NULL;
            if (k == 0) {
                OK(tg_cross_entropy_ex(&y, x, t, w, 2, REDS[r], 0.0));
                cr_assert(tape_has(y, "cross_entropy"));
            } else {
                OK(tg_log_softmax(&lp, x, 1));
                OK(tg_nll_loss(&y, lp, t, w, REDS[r], 2));
            }
            OK(tg_tensor_full(&ones, tg_tensor_dtype(x), tg_tensor_ndim(y), tg_tensor_shape(y),
                              0.75));
            tg_backward_opts o = {.create_graph = true};
            OK(tg_grad(&g1[k], 1, &y, &ones, 1, &x, &o));
            OK(tg_mul(&p, g1[k], v));
            OK(tg_sum(&s, p));
            OK(tg_grad(&g2[k], 1, &s, NULL, 1, &x, NULL));
            th_release_all(5, (tg_tensor *[]){y, lp, ones, p, s});
        }
        th_expect_same_bits(RED_NAMES[r], x, g1[0], g1[1]);
        th_expect_same_bits(RED_NAMES[r], x, g2[0], g2[1]);
        th_release_all(4, (tg_tensor *[]){g1[0], g1[1], g2[0], g2[1]});
    }
}
