/* tests/test_backward_into.c - the ops whose input gradient is a scatter
 * into the input's shape add it straight into the engine's pending sum
 * (their backward_into, tapegrad/op.h): index_select, gather, embedding
 * (the weight's rows) and pick_along_dim (tg_max_dim's values).
 *
 * Each op's input is made by a node (y = x * 1.5), so a plain backward runs
 * the op's backward_into; a watched one (tg_backward_steps) and one with
 * create_graph run its backward and the engine's sum.  The two must give the same bits, in
 * every float dtype, with repeated index values and with a gradient that
 * reaches the op through a transpose (not contiguous).  gradcheck in f64
 * stages its inputs through an identity op, so it checks backward_into's
 * values against finite differences; and the peak of tensor memory in a
 * backward shows that the zero-padded gradient is never made. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "autograd_fixtures.h"
#include "into_fixtures.h"
#include "tapegrad/tapegrad.h"
#include "tapegrad/ops.h"

typedef enum kind { K_INDEX_SELECT, K_GATHER, K_EMBEDDING, K_EMBEDDING_EX, K_MAX_DIM } kind;

static int count_step(const tg_backward_step *step, void *user)
{
    (void)step;
    ++*(int *)user;
    return TG_OK;
}

static tg_tensor *i64(int ndim, const int64_t *shape, const int64_t *v)
{
    tg_tensor *t = NULL;
    OK(tg_tensor_from_data(&t, TG_I64, ndim, shape, v));
    return t;
}

/* op(y) for the pick number k (0..2) of kind: repeated, unordered values. */
static tg_tensor *pick(int kd, tg_tensor *y, int k)
{
    tg_tensor *r = NULL, *idx = NULL, *vi = NULL;
    switch (kd) {
    case K_INDEX_SELECT: {   /* y (3, 5, 11) along dim k */
        static const int64_t v[3][6] = {{2, 0, 2, 2, 1, 0}, {4, 1, 1, 3}, {10, 0, 10, 5, 9}};
        static const int64_t n[3] = {6, 4, 5};
        idx = i64(1, &n[k], v[k]);
        OK(tg_index_select(&r, y, k, idx));
        break;
    }
    case K_GATHER: {   /* y (3, 5, 11): an index of (2, 4, 3) along dim k */
        int64_t v[24];
        const int64_t ext[3] = {3, 5, 11};
        for (int i = 0; i < 24; i++) v[i] = (i * 7 + k) % (ext[k] > 4 ? 4 : ext[k]);
        idx = i64(3, (const int64_t[]){2, 4, 3}, v);
        OK(tg_gather(&r, y, k, idx));
        break;
    }
    case K_EMBEDDING:
    case K_EMBEDDING_EX: {   /* y (7, 19) the weight; indices (2, 3) */
        static const int64_t v[3][6] = {{3, 0, 3, 6, 3, 1}, {5, 5, 2, 0, 4, 4}, {1, 2, 3, 4, 5, 6}};
        idx = i64(2, (const int64_t[]){2, 3}, v[k]);
        tg_embedding_opts o = TG_EMBEDDING_OPTS_INIT;
        o.padding_idx = kd == K_EMBEDDING_EX ? 3 : TG_EMBEDDING_NO_PADDING;
        o.scale_grad_by_freq = kd == K_EMBEDDING_EX;
        OK(tg_embedding_ex(&r, y, idx, &o));
        break;
    }
    case K_MAX_DIM:   /* y (3, 5, 11): the maxima along dim k, kept on the first */
        OK(tg_max_dim(&r, &vi, y, k, k == 0));
        break;
    }
    th_release_all(2, (tg_tensor *[]){idx, vi});
    return r;
}

static const int64_t kind_shape[][3] = {{3, 5, 11}, {3, 5, 11}, {7, 19, 1}, {7, 19, 1},
                                        {3, 5, 11}};
static const int kind_ndim[] = {3, 3, 2, 2, 3};

/* kind's case of the harness (into_fixtures.h): weights in [-2, 2). */
static th_into_case case_of(kind kd)
{
    return (th_into_case){.kind = kd, .ndim = kind_ndim[kd], .shape = kind_shape[kd],
                          .seed = 17, .wlo = -2, .whi = 2, .pick = pick};
}

static tg_tensor *weighted(tg_tensor *p, uint64_t seed)
{
    const th_into_case c = case_of(K_INDEX_SELECT);
    return th_into_weighted(&c, p, seed);
}

static void same_bits_both_ways(kind kd, const char *name)
{
    const th_into_case c = case_of(kd);
    th_into_same_bits(&c, name);
}

Test(backward_into, index_select_adds_as_its_backward_in_every_dtype)
{
    same_bits_both_ways(K_INDEX_SELECT, "index_select");
}

Test(backward_into, gather_adds_as_its_backward_in_every_dtype)
{
    same_bits_both_ways(K_GATHER, "gather");
}

Test(backward_into, embedding_adds_the_weights_rows_as_its_backward)
{
    same_bits_both_ways(K_EMBEDDING, "embedding");
    same_bits_both_ways(K_EMBEDDING_EX, "embedding with padding_idx and scale_grad_by_freq");
}

Test(backward_into, max_dim_values_add_as_their_backward)
{
    same_bits_both_ways(K_MAX_DIM, "max_dim");
}

/* Rows longer than a vector step and its rest, picked once (straight into
 * acc) and repeatedly (partial sums first), in f32 and f16: index_select's
 * row loops against the backward. */
Test(backward_into, index_select_rows_of_any_length)
{
    const int64_t lens[] = {1, 7, 8, 9, 33};
    const tg_dtype dts[3] = {TG_F32, TG_F16, TG_F64};
    for (int li = 0; li < 5; li++)
        for (int di = 0; di < 3; di++)
            for (int rep = 0; rep < 2; rep++) {
                tg_tensor *g[2];
                for (int w = 0; w < 2; w++) {
                    const int64_t shape[2] = {6, lens[li]};
                    tg_tensor *x0 = th_rand_uniform(TG_F64, 2, shape, 3 + (uint64_t)li);
                    tg_tensor *x = NULL, *y = NULL, *p = NULL, *l = NULL;
                    OK(tg_tensor_to_dtype(&x, x0, dts[di]));
                    OK(tg_tensor_set_requires_grad(x, true));
                    OK(tg_mul_scalar(&y, x, 1.5));
                    tg_tensor *idx = i64(1, (const int64_t[]){4},
                                         rep ? (const int64_t[]){5, 2, 5, 5}
                                             : (const int64_t[]){5, 2, 0, 3});
                    OK(tg_index_select(&p, y, 0, idx));
                    l = weighted(p, 41);
                    int steps = 0;
                    if (w) OK(tg_backward_steps(l, NULL, NULL, count_step, &steps));
                    else OK(tg_backward(l, NULL, NULL));
                    g[w] = tg_tensor_retain(tg_tensor_grad(x));
                    th_release_all(6, (tg_tensor *[]){x0, x, y, p, l, idx});
                }
                cr_assert(memcmp(tg_tensor_cdata(g[0]), tg_tensor_cdata(g[1]),
                                 (size_t)(6 * lens[li]) * tg_dtype_size(dts[di])) == 0,
                          "len %lld %s rep %d", (long long)lens[li], tg_dtype_name(dts[di]),
                          rep);
                th_release_all(2, g);
            }
}

/* op applied twice with a product between, so g is not all ones and the
 * second op's backward_into runs on the staged input's node. */
static int twice_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    const int *which = user;
    tg_tensor *p = NULL, *q = NULL, *idx = NULL, *vi = NULL;
    int rc;
    if (*which == 0) {
        int64_t v[6] = {2, 0, 2, 1, 1, 2};
        idx = i64(2, (const int64_t[]){2, 3}, v);
        tg_tensor *idx2 = i64(2, (const int64_t[]){3, 2}, (const int64_t[]){1, 0, 1, 1, 0, 1});
        rc = tg_gather(&p, in[0], 1, idx);
        if (rc == TG_OK) rc = tg_mul(&q, p, p);
        if (rc == TG_OK) rc = tg_gather(out, q, 0, idx2);
        tg_tensor_release(idx2);
    } else if (*which == 1) {
        idx = i64(1, (const int64_t[]){4}, (const int64_t[]){2, 0, 2, 2});
        /* plain: padding_idx and scale_grad_by_freq change the gradient
         * on purpose, away from the derivative finite differences see */
        rc = tg_embedding(&p, in[0], idx);
        if (rc == TG_OK) rc = tg_mul(&q, p, p);
        if (rc == TG_OK) rc = tg_sum_dims(out, q, 1, (const int[]){0}, false);
    } else {
        rc = tg_max_dim(&p, &vi, in[0], 1, true);
        if (rc == TG_OK) rc = tg_mul(&q, p, p);
        if (rc == TG_OK) rc = tg_max_dim(out, &idx, q, 0, false);
    }
    th_release_all(4, (tg_tensor *[]){p, q, idx, vi});
    return rc;
}

Test(backward_into, gradcheck_checks_gather_embedding_and_max_dim_into)
{
    for (int which = 0; which < 3; which++) {
        uint64_t seed = 8 + (uint64_t)which;
        tg_tensor *x = th_rand_tensor(&seed, TG_F64, 2, (int64_t[]){3, 3}, -1, 1);
        OK(tg_tensor_set_requires_grad(x, true));
        tg_gradcheck_opts o = TG_GRADCHECK_OPTS_INIT;
        OK(tg_gradcheck(twice_fn, &which, 1, &x, &o));
        o.fast_mode = true;
        OK(tg_gradcheck(twice_fn, &which, 1, &x, &o));
        OK(tg_gradgradcheck(twice_fn, &which, 1, &x, &o));
        tg_tensor_release(x);
    }
}

/* Tensor memory in a backward through picks of a few rows of a large y
 * (R, D) f32, a reshape of x (a node whose backward is a view of its
 * gradient, so it allocates nothing): with backward_into the picks add
 * into y's one pending sum, and the backward holds one tensor of y's size
 * (that sum, then x's gradient) and the picks' own small gradients; a
 * backward that made each pick's zero-padded gradient holds a second one
 * beside the sum (the watched one, TG_PEAK_WATCH=1, reaches 2 y's and
 * fails).  An invariant of sizes, not a time. */
static void peak_below_one_and_a_half_ys(kind kd)
{
    const int64_t R = 2048, D = 64, Y = R * D * 4;
    const int64_t shape[2] = {R, D};
    tg_tensor *x = th_rand_uniform(TG_F32, 2, shape, 1), *y = NULL, *l = NULL;
    OK(tg_tensor_set_requires_grad(x, true));
    OK(tg_reshape(&y, x, 2, shape));
    cr_assert(tg_tensor_is_leaf(y) == false);
    for (int k = 0; k < 4; k++) {
        tg_tensor *idx = NULL, *p = NULL, *vi = NULL, *s = NULL, *u = NULL;
        const int64_t v[4] = {k, 100 + k, 7 * k, 2000 - k};
        if (kd == K_INDEX_SELECT) {
            idx = i64(1, (const int64_t[]){4}, v);
            OK(tg_index_select(&p, y, 0, idx));
        } else if (kd == K_EMBEDDING) {
            idx = i64(1, (const int64_t[]){4}, v);
            OK(tg_embedding(&p, y, idx));
        } else if (kd == K_GATHER) {
            int64_t gv[4 * 64];
            for (int i = 0; i < 4 * 64; i++) gv[i] = v[i / 64];
            idx = i64(2, (const int64_t[]){4, 64}, gv);
            OK(tg_gather(&p, y, 0, idx));
        } else {
            OK(tg_max_dim(&p, &vi, y, 1, false));
        }
        OK(tg_sum(&s, p));
        if (l) OK(tg_add(&u, l, s));
        else u = tg_tensor_retain(s);
        th_release_all(5, (tg_tensor *[]){idx, p, vi, s, l});
        l = u;
    }
    int64_t before = 0, peak = 0;
    tg_memory_stats(&before, NULL);
    tg_memory_reset_peak();
    int steps = 0;
    if (getenv("TG_PEAK_WATCH")) OK(tg_backward_steps(l, NULL, NULL, count_step, &steps));
    else OK(tg_backward(l, NULL, NULL));
    tg_memory_stats(NULL, &peak);
    cr_assert(peak - before < Y + Y / 2,
              "kind %d: the backward's peak was %lld bytes above the start; y is %lld", kd,
              (long long)(peak - before), (long long)Y);
    th_release_all(3, (tg_tensor *[]){x, y, l});
}

Test(backward_into, picks_of_a_few_rows_never_make_a_padded_gradient)
{
    peak_below_one_and_a_half_ys(K_INDEX_SELECT);
    peak_below_one_and_a_half_ys(K_EMBEDDING);
    peak_below_one_and_a_half_ys(K_GATHER);
    peak_below_one_and_a_half_ys(K_MAX_DIM);
}
