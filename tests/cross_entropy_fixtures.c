/* tests/cross_entropy_fixtures.c - shared by test_cross_entropy_rows.c and
 * test_cross_entropy_spatial.c (cross_entropy_fixtures.h): the reductions,
 * the logits and targets of a case, and the checks of the one op against
 * log_softmax then nll_loss. */
#include "cross_entropy_fixtures.h"

#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
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

void grads_to_second_order(tg_tensor *y, tg_tensor *x, tg_tensor *v, tg_tensor **g1,
                           tg_tensor **g2)
{
    tg_tensor *ones = NULL, *p = NULL, *s = NULL;
    OK(tg_tensor_full(&ones, tg_tensor_dtype(x), tg_tensor_ndim(y), tg_tensor_shape(y), 0.75));
    tg_backward_opts o = {.create_graph = true};
    OK(tg_grad(g1, 1, &y, &ones, 1, &x, &o));
    OK(tg_mul(&p, *g1, v));
    OK(tg_sum(&s, p));
    OK(tg_grad(g2, 1, &s, NULL, 1, &x, NULL));
    th_release_all(3, (tg_tensor *[]){ones, p, s});
}

void expect_second_derivative_as_composition(tg_tensor *x, tg_tensor *t, tg_tensor *w,
                                             tg_tensor *v)
{
    for (int r = 0; r < 3; r++) {
        tg_tensor *g2[2] = {NULL, NULL}, *g1[2] = {NULL, NULL};
        for (int k = 0; k < 2; k++) {
            tg_tensor *y = NULL, *lp = NULL;
            if (k == 0) {
                OK(tg_cross_entropy_ex(&y, x, t, w, 2, REDS[r], 0.0));
                cr_assert(tape_has(y, "cross_entropy"));
            } else {
                OK(tg_log_softmax(&lp, x, 1));
                OK(tg_nll_loss(&y, lp, t, w, REDS[r], 2));
            }
            grads_to_second_order(y, x, v, &g1[k], &g2[k]);
            th_release_all(2, (tg_tensor *[]){y, lp});
        }
        th_expect_same_bits(RED_NAMES[r], x, g1[0], g1[1]);
        th_expect_same_bits(RED_NAMES[r], x, g2[0], g2[1]);
        th_release_all(4, (tg_tensor *[]){g1[0], g1[1], g2[0], g2[1]});
    }
}

tg_tensor *logits(tg_dtype dt, int ndim, const int64_t *shape, bool last, bool special,
                  uint64_t seed)
{
    int64_t bs[8] = {0};
    int perm[8] = {0};
    for (int d = 0, k = 0; d < ndim; d++)
        if (!last || d != 1) bs[k++] = shape[d];
    if (last) bs[ndim - 1] = shape[1];
    for (int d = 0; d < ndim; d++) perm[d] = !last || d == 0 ? d : d == 1 ? ndim - 1 : d - 1;
    if (last && ndim == 2) {   /* (N, C): the transpose of a (C, N) tensor */
        bs[0] = shape[1];
        bs[1] = shape[0];
        perm[0] = 1;
        perm[1] = 0;
    }
    uint64_t st = seed;
    tg_tensor *base = th_rand_tensor(&st, dt, ndim, bs, -4, 4);
    const int64_t numel = tg_tensor_numel(base);
    if (special && numel >= 4) {
        const int64_t at[3] = {1, numel / 2, numel - 1};
        const double val[3] = {-INFINITY, INFINITY, NAN};
        for (int k = 0; k < 3; k++) {
            if (dt == TG_F64) ((double *)tg_tensor_data(base))[at[k]] = val[k];
            else ((float *)tg_tensor_data(base))[at[k]] = (float)val[k];
        }
    }
    tg_tensor *x = base;
    if (last) {
        tg_tensor *t = NULL;
        OK(tg_permute(&t, base, perm));
        OK(tg_tensor_detach(&x, t));
        tg_tensor_release(t);
        tg_tensor_release(base);
        int64_t S = 1;
        for (int d = 2; d < ndim; d++) S *= shape[d];
        if (shape[1] > 1 && (ndim == 2 || S > 1))
            cr_assert(tg_tensor_is_contiguous(x) == false, "a strided view");
    }
    OK(tg_tensor_set_requires_grad(x, true));
    return x;
}

int expect_cases_as_composition(tg_dtype dt, int ndim, const int64_t *shape, uint64_t seed)
{
    const int64_t C = shape[1];
    uint64_t wst = 17;
    tg_tensor *w = th_rand_tensor(&wst, dt, 1, &C, 0.5, 2);
    int checked = 0;
    for (int layout = 0; layout < 2; layout++)
        for (int special = 0; special < 2; special++) {
            tg_tensor *x = logits(dt, ndim, shape, layout == 1, special == 1, seed);
            for (int ig = 0; ig < 2; ig++) {
                const int64_t ignore = ig ? C / 2 : TG_IGNORE_INDEX_DEFAULT;
                tg_tensor *t = targets(ndim, shape, ig ? ignore : -1);
                for (int r = 0; r < 3; r++)
                    for (int weighted = 0; weighted < 2; weighted++)
                        for (int th = 1; th <= 2; th++) {
                            OK(tg_set_num_threads(th));
                            char what[200];
                            snprintf(what, sizeof what,
                                     "%s ndim %d (%lld, %lld, ...) layout %d special %d "
                                     "ignore %d %s weight %d threads %d",
                                     tg_dtype_name(dt), ndim, (long long)shape[0],
                                     (long long)C, layout, special, ig, RED_NAMES[r],
                                     weighted, th);
                            expect_as_composition(what, x, t, weighted ? w : NULL, ignore, r);
                            checked++;
                        }
                tg_tensor_release(t);
            }
            tg_tensor_release(x);
        }
    tg_tensor_release(w);
    return checked;
}

int expect_shapes_as_composition(tg_dtype dt, int n, const int *ndims,
                                 const int64_t (*shapes)[4], uint64_t seed)
{
    const int threads = tg_get_num_threads();
    int checked = 0;
    for (int s = 0; s < n; s++)
        checked += expect_cases_as_composition(dt, ndims[s], shapes[s], seed + (uint64_t)s);
    OK(tg_set_num_threads(threads));
    return checked;
}
