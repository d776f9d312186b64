/* tests/test_adaptive_max_pool.c - tg_adaptive_max_pool against PyTorch's
 * F.adaptive_max_pool1d/2d/3d(return_indices=True): values, indices and
 * the gradient (f64, f32, bf16; output extents that divide x's, that do
 * not, larger than x's, 1 everywhere, None; batched and unbatched; x with
 * ties, NaNs and windows of -infs), the call with and without indices
 * against each other, derivatives to second order by finite differences,
 * f16, views, max_pool's kernels (where they run) against the adaptive
 * scan bit for bit, scopes, the AdaptiveMaxPoolNd modules and the refusals.
 * Goldens: scripts/make_adaptive_max_pool_goldens.py. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "ops/pool_internal.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

/* y, x's gradient for grad_y and (when idx is not NULL) the indices of one
 * call, with or without asking for the indices; new references. */
static void run(const tg_tensor *x0, const tg_tensor *gy, int ns, const int64_t *size,
                bool with_indices, tg_tensor **y, tg_tensor **dx, tg_tensor **idx)
{
    tg_tensor *x = th_leaf_clone(x0);
    OK(tg_adaptive_max_pool(y, with_indices ? idx : NULL, x, ns, size));
    th_backward_with(*y, gy);
    OK(tg_tensor_clone(dx, tg_tensor_grad(x)));
    tg_tensor_release(x);
}

/* Values and indices are torch's exactly (a maximum is one of x's
 * elements), in every dtype, with and without indices asked for.  The
 * gradients: f64 and f32 torch's to the bit (the g of windows sharing a
 * maximum added in torch's order); bf16 within a rounding (torch adds them
 * in bf16 steps, tapegrad in f32 rounded once). */
Test(adaptive_max_pool, every_case_matches_torch)
{
    tg_st_file *f = th_golden_load("pool/adaptive_max_pool.safetensors");
    const int n = atoi(tg_st_meta_get(f, "cases"));
    int per_ns[4] = {0}, per_fill[4] = {0}, bf16 = 0;
    static const char *const fills[4] = {"randn", "ties", "nan", "-inf"};
    for (int i = 0; i < n; i++) {
        char c[16];
        snprintf(c, sizeof c, "case%d", i);
        const int ns = atoi(th_golden_meta(f, c, "ns"));
        int64_t size[3] = {0};
        th_ints_of(th_golden_meta(f, c, "output_size"), size);
        per_ns[ns]++;
        for (int k = 0; k < 4; k++)
            per_fill[k] += strcmp(th_golden_meta(f, c, "fill"), fills[k]) == 0;
        const tg_tensor *x = th_golden_get(f, c, "x"), *gy = th_golden_get(f, c, "grad_y");
        const tg_dtype dt = tg_tensor_dtype(x);
        bf16 += dt == TG_BF16;
        for (int w = 0; w < 2; w++) {
            tg_tensor *y = NULL, *dx = NULL, *idx = NULL;
            run(x, gy, ns, size, w, &y, &dx, &idx);
            char what[48];
            snprintf(what, sizeof what, "%s %s indices", c, w ? "with" : "without");
            th_expect_same_bits(what, x, y, th_golden_get(f, c, "y"));
            if (w) {
                th_expect_same_bits(what, x, idx, th_golden_get(f, c, "indices"));
                cr_assert(tg_tensor_requires_grad(idx) == false, "%s", what);
            }
            th_expect_close_scaled(what, dx, th_golden_get(f, c, "grad_x"),
                                   dt == TG_BF16 ? 1.0 / 128 : 0);
            th_release_all(3, (tg_tensor *[]){y, dx, idx});
        }
    }
    cr_assert(per_ns[1] >= 40 && per_ns[2] >= 48 && per_ns[3] >= 32 && bf16 >= 40,
              "golden has %d/%d/%d cases, %d bf16", per_ns[1], per_ns[2], per_ns[3], bf16);
    for (int k = 0; k < 4; k++) cr_assert(per_fill[k] >= 30, "%s: %d", fills[k], per_fill[k]);
    tg_st_free(f);
}

/* The windows by hand: 5 -> 3 gives [0, 2), [1, 4), [3, 5), so x = (1, 5,
 * 2, 0, 3) pools to (5, 5, 3) at (1, 1, 4), and ones as g give x's
 * gradient (0, 2, 0, 0, 1); 2 -> 5 repeats each element (a window of one
 * or two); ties keep the first, the last NaN wins, -infs give the first. */
Test(adaptive_max_pool, windows_by_hand)
{
    tg_tensor *x = th_tensor_from(TG_F64, 2, (int64_t[]){1, 5}, (double[]){1, 5, 2, 0, 3});
    tg_tensor *y = NULL, *idx = NULL, *s = NULL;
    OK(tg_tensor_set_requires_grad(x, true));
    OK(tg_adaptive_max_pool(&y, &idx, x, 1, (int64_t[]){3}));
    th_expect_shape(y, 2, (int64_t[]){1, 3});
    th_expect_shape(idx, 2, (int64_t[]){1, 3});
    cr_assert(eq(int, tg_tensor_dtype(idx), TG_I64));
    const double wy[] = {5, 5, 3}, wi[] = {1, 1, 4}, wg[] = {0, 2, 0, 0, 1};
    for (int i = 0; i < 3; i++) {
        cr_assert(eq(dbl, th_at(y, i), wy[i]), "y[%d]", i);
        cr_assert(eq(dbl, th_at(idx, i), wi[i]), "idx[%d]", i);
    }
    OK(tg_sum(&s, y));
    OK(tg_backward(s, NULL, NULL));
    for (int i = 0; i < 5; i++) cr_assert(eq(dbl, th_at(tg_tensor_grad(x), i), wg[i]), "dx[%d]", i);
    th_release_all(4, (tg_tensor *[]){x, y, idx, s});

    tg_tensor *z = th_tensor_from(TG_F32, 2, (int64_t[]){1, 2}, (double[]){2, 6});
    OK(tg_adaptive_max_pool(&y, &idx, z, 1, (int64_t[]){5}));
    const double wz[] = {2, 2, 6, 6, 6}, wzi[] = {0, 0, 1, 1, 1};
    for (int i = 0; i < 5; i++) {
        cr_assert(eq(dbl, th_at(y, i), wz[i]), "y[%d]", i);
        cr_assert(eq(dbl, th_at(idx, i), wzi[i]), "idx[%d]", i);
    }
    th_release_all(3, (tg_tensor *[]){y, idx, z});

    /* one window of 2 x 3 each: ties, two NaNs, -infs */
    const double v[3][6] = {{1, 3, 3, 0, 3, 2},
                            {1, NAN, 7, NAN, 9, 0},
                            {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY,
                             -INFINITY}};
    const double want_i[3] = {1, 3, 0};
    for (int k = 0; k < 3; k++) {
        tg_tensor *w = th_tensor_from(TG_F32, 3, (int64_t[]){1, 2, 3}, v[k]);
        OK(tg_adaptive_max_pool(&y, &idx, w, 2, (int64_t[]){1, 1}));
        cr_assert(eq(dbl, th_at(idx, 0), want_i[k]), "window %d: index %g", k, th_at(idx, 0));
        th_release_all(3, (tg_tensor *[]){y, idx, w});
    }
}

/* One call: x's shape and the output size. */
typedef struct mcase {
    int ns, ndim;
    int64_t shape[5];
    int64_t size[3];
    bool indices;
} mcase;

static const mcase cases[] = {
    {1, 3, {2, 2, 7}, {3}, false},
    {1, 2, {2, 3}, {5}, true},
    {2, 4, {1, 2, 5, 7}, {3, 4}, true},
    {2, 3, {2, 4, 3}, {3, 5}, false},
    {2, 4, {2, 1, 6, 4}, {3, 2}, false},
    {3, 5, {1, 1, 3, 5, 4}, {2, 3, 3}, true},
    {3, 4, {2, 2, 3, 5}, {3, 2, 4}, false},
    {3, 4, {2, 4, 2, 4}, {2, 1, 2}, true},
    {2, 4, {1, 2, 4, 8}, {2, 4}, true},   /* max_pool's kernels */
    {1, 3, {2, 3, 12}, {4}, false},       /* max_pool's kernels */
};

static int call_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    const mcase *k = user;
    tg_tensor *idx = NULL;
    const int rc = tg_adaptive_max_pool(out, k->indices ? &idx : NULL, in[0], k->ns, k->size);
    tg_tensor_release(idx);
    return rc;
}

/* First and second derivatives by finite differences, through both ops
 * (with indices: the gather; without: adaptive_max_pool).  x's elements
 * are distinct and far apart, so that a step moves no maximum. */
Test(adaptive_max_pool, first_and_second_derivatives_by_finite_differences)
{
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const mcase *k = &cases[i];
        tg_tensor *x = th_rand_uniform(TG_F64, k->ndim, k->shape, 7 + i);
        OK(tg_tensor_set_requires_grad(x, true));
        tg_tensor *in[1] = {x};
        cr_assert(eq(int, tg_gradcheck(call_fn, (void *)k, 1, in, NULL), TG_OK), "case %zu: %s",
                  i, tg_error_message());
        cr_assert(eq(int, tg_gradgradcheck(call_fn, (void *)k, 1, in, NULL), TG_OK),
                  "case %zu: %s", i, tg_error_message());
        tg_tensor_release(x);
    }
}

/* The gradient's gradient in g picks g' at the maxima: with g' = x it is
 * y itself, bit for bit, through either op. */
Test(adaptive_max_pool, double_backward_picks_the_maxima)
{
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const mcase *k = &cases[i];
        tg_tensor *x = th_rand_uniform(TG_F64, k->ndim, k->shape, 30 + i), *y = NULL;
        OK(tg_tensor_set_requires_grad(x, true));
        OK(call_fn(&y, 1, (tg_tensor *[]){x}, (void *)k));
        th_expect_double_backward_is_forward(x, y, 3 + i);
        th_release_all(2, (tg_tensor *[]){x, y});
    }
}

/* f16 and bf16 give the f64 result rounded (exactly: a maximum is one of
 * x's values), the same indices, and the gradient in their dtype. */
Test(adaptive_max_pool, half_dtypes_are_exact)
{
    const tg_dtype dts[2] = {TG_F16, TG_BF16};
    for (int d = 0; d < 2; d++)
        for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
            const mcase *k = &cases[i];
            tg_tensor *xh = th_rand_uniform(dts[d], k->ndim, k->shape, 60 + i);
            tg_tensor *x64 = NULL, *yh = NULL, *y64 = NULL, *ih = NULL, *i64 = NULL;
            OK(tg_tensor_to_dtype(&x64, xh, TG_F64));
            OK(tg_adaptive_max_pool(&yh, &ih, xh, k->ns, k->size));
            OK(tg_adaptive_max_pool(&y64, &i64, x64, k->ns, k->size));
            cr_assert(eq(int, tg_tensor_dtype(yh), dts[d]));
            th_expect_same_bits("indices", xh, ih, i64);
            for (int64_t e = 0; e < tg_tensor_numel(y64); e++)
                cr_assert(eq(dbl, th_at(yh, e), th_at(y64, e)), "dtype %d case %zu element %lld",
                          d, i, (long long)e);
            th_release_all(6, (tg_tensor *[]){xh, x64, yh, y64, ih, i64});
        }
}

/* A view as x: the result of its contiguous copy. */
Test(adaptive_max_pool, views_read_their_elements)
{
    tg_tensor *v[3];
    th_views_of_3x4x5(v);
    for (int i = 0; i < 3; i++) {
        tg_tensor *c = NULL, *y = NULL, *z = NULL, *iy = NULL, *iz = NULL;
        OK(tg_tensor_contiguous(&c, v[i]));
        OK(tg_adaptive_max_pool(&y, &iy, v[i], 2, (int64_t[]){3, 2}));
        OK(tg_adaptive_max_pool(&z, &iz, c, 2, (int64_t[]){3, 2}));
        th_expect_same_bits("view", c, y, z);
        th_expect_same_bits("view indices", c, iy, iz);
        th_release_all(6, (tg_tensor *[]){v[i], c, y, z, iy, iz});
    }
}

/* Calls where O divides I on every axis and the last output extent is 4
 * or more (max_pool's kernels run them), with kernels 1..4 along the last
 * axis (strides 1 and 2 have loops of their own), one large enough to run
 * in parallel. */
static const mcase divisible[] = {
    {1, 3, {3, 2, 16}, {8}, true},
    {1, 2, {4, 12}, {4}, true},
    {1, 3, {2, 3, 20}, {5}, true},
    {2, 4, {2, 3, 8, 8}, {4, 4}, true},
    {2, 3, {3, 6, 16}, {2, 4}, true},
    {2, 4, {1, 2, 9, 12}, {3, 4}, true},
    {2, 4, {4, 8, 32, 64}, {16, 32}, true},
    {3, 5, {2, 2, 4, 6, 8}, {2, 3, 4}, true},
    {3, 4, {3, 3, 4, 12}, {3, 1, 6}, true},
};

/* x for the fast-path sweep: the values -1, -0, 0, 0.5, 1, NaN and -inf (so
 * windows hold ties, several NaNs and zeros of both signs), and one run
 * of -infs long enough to fill some windows; transposed over its last two
 * dims (a strided view) when `strided`.  A new reference. */
static tg_tensor *tricky_x(tg_dtype dt, const mcase *k, bool strided, uint64_t seed)
{
    static const double levels[7] = {-1, -0.0, 0, 0.5, 1, NAN, -INFINITY};
    int64_t shape[5];
    memcpy(shape, k->shape, sizeof shape);
    const int nd = k->ndim;
    if (strided) {
        shape[nd - 1] = k->shape[nd - 2];
        shape[nd - 2] = k->shape[nd - 1];
    }
    int64_t n = 1;
    for (int d = 0; d < nd; d++) n *= shape[d];
    double *v = malloc((size_t)n * sizeof *v);
    cr_assert(v != NULL);
    uint64_t s = seed;
    for (int64_t e = 0; e < n; e++) v[e] = levels[th_rand_int(&s, 0, 6)];
    int64_t plane = 1;
    for (int d = nd - k->ns; d < nd; d++) plane *= shape[d];
    for (int64_t e = plane; e < 2 * plane && e < n; e++) v[e] = -INFINITY;
    tg_tensor *x = th_tensor_from(dt, nd, shape, v), *t = NULL;
    free(v);
    if (!strided) return x;
    OK(tg_transpose(&t, x, nd - 2, nd - 1));
    tg_tensor_release(x);
    return t;
}

/* max_pool's kernels where they run give the serial adaptive scan's values
 * and indices to the bit (ties keep the first, the last NaN wins, a window of
 * -infs gives its first element), in every float dtype, on contiguous and
 * strided x, on one thread and two, with and without indices asked for
 * and when recorded. */
Test(adaptive_max_pool, fast_path_same_bits_as_general_path)
{
    const int threads = tg_get_num_threads();
    for (int th = 1; th <= 2; th++) {
        OK(tg_set_num_threads(th));
        for (size_t i = 0; i < sizeof divisible / sizeof *divisible; i++)
            for (int d = 0; d < 4; d++)
                for (int v = 0; v < 4; v++) {
                    const mcase *k = &divisible[i];
                    tg_tensor *x = tricky_x(th_floats[d], k, v & 1, 11 + i * 8 + (size_t)d);
                    if (v & 2) OK(tg_tensor_set_requires_grad(x, true));
                    tg_tensor *y[2] = {0}, *idx[2] = {0}, *z[2] = {0};
                    for (int g = 0; g < 2; g++) {
                        const unsigned kn = g ? TG__POOL_GENERAL | TG__POOL_SERIAL : 0;
                        OK(tg__adaptive_max_pool_call(&y[g], &idx[g], x, k->ns, k->size, kn));
                        OK(tg__adaptive_max_pool_call(&z[g], NULL, x, k->ns, k->size, kn));
                    }
                    char what[80];
                    snprintf(what, sizeof what, "case %zu dtype %d %s%s, %d threads", i, d,
                             v & 1 ? "strided" : "contiguous", v & 2 ? " recorded" : "", th);
                    cr_assert(eq(i64, th_first_difference(y[0], y[1]), -1), "%s: y", what);
                    cr_assert(eq(i64, th_first_difference(idx[0], idx[1]), -1), "%s: idx",
                              what);
                    cr_assert(eq(i64, th_first_difference(z[0], y[1]), -1), "%s: y alone",
                              what);
                    cr_assert(eq(i64, th_first_difference(z[1], y[1]), -1), "%s: y alone",
                              what);
                    th_release_all(7, (tg_tensor *[]){x, y[0], y[1], idx[0], idx[1], z[0], z[1]});
                }
    }
    OK(tg_set_num_threads(threads));
}

/* An empty batch gives an empty result, empty indices and an empty
 * gradient. */
Test(adaptive_max_pool, empty_batch)
{
    tg_tensor *x = NULL, *y = NULL, *idx = NULL, *s = NULL;
    OK(tg_tensor_zeros(&x, TG_F32, 4, (int64_t[]){0, 2, 5, 4}));
    OK(tg_tensor_set_requires_grad(x, true));
    OK(tg_adaptive_max_pool(&y, &idx, x, 2, (int64_t[]){3, 3}));
    th_expect_shape(y, 4, (int64_t[]){0, 2, 3, 3});
    th_expect_shape(idx, 4, (int64_t[]){0, 2, 3, 3});
    OK(tg_sum(&s, y));
    OK(tg_backward(s, NULL, NULL));
    th_expect_shape(tg_tensor_grad(x), 4, (int64_t[]){0, 2, 5, 4});
    th_release_all(4, (tg_tensor *[]){x, y, idx, s});
}

Test(adaptive_max_pool, refusals)
{
    tg_tensor *x = th_rand_uniform(TG_F32, 4, (int64_t[]){2, 3, 5, 4}, 1), *y = NULL;
    tg_tensor *idx = NULL;
    const int64_t two[3] = {2, 2, 2};
    th_expect_refused(tg_adaptive_max_pool(NULL, &idx, x, 2, two), TG_EINVAL,
                      "adaptive_max_pool2d: out must not be NULL", idx);
    th_expect_refused(tg_adaptive_max_pool(NULL, NULL, x, 2, two), TG_EINVAL,
                      "out must not be NULL", y);
    th_expect_refused(tg_adaptive_max_pool(&y, &y, x, 2, two), TG_EINVAL,
                      "adaptive_max_pool2d: out and indices must be two different places", y);
    th_expect_refused(tg_adaptive_max_pool(&y, &idx, NULL, 2, two), TG_EINVAL,
                      "x must not be NULL", y);
    th_expect_refused(tg_adaptive_max_pool(&y, &idx, x, 2, NULL), TG_EINVAL,
                      "output_size must not be NULL", y);
    th_expect_refused(tg_adaptive_max_pool(&y, &idx, x, 0, two), TG_EINVAL,
                      "adaptive_max_pool: n_spatial=0 must be 1, 2 or 3", y);
    th_expect_refused(tg_adaptive_max_pool(&y, &idx, x, 4, two), TG_EINVAL,
                      "n_spatial=4 must be 1, 2", y);
    th_expect_refused(tg_adaptive_max_pool(&y, &idx, x, 2, (int64_t[]){2, -1}), TG_EINVAL,
                      "adaptive_max_pool2d: output_size[1]=-1 must be in [1, ", y);
    th_expect_refused(tg_adaptive_max_pool(&y, NULL, x, 2, (int64_t[]){TG_POOL_MAX_PARAM + 1, 2}),
                      TG_EINVAL, "output_size[0]=2147483648 must be in [1, ", y);
    th_expect_refused(tg_adaptive_max_pool(&y, &idx, x, 1, two), TG_ESHAPE,
                      "adaptive_max_pool1d: x has 4 dims; it must have 2 (C, S...) or 3", y);
    tg_tensor *flat = th_rand_uniform(TG_F32, 2, (int64_t[]){3, 4}, 2);
    th_expect_refused(tg_adaptive_max_pool(&y, &idx, flat, 2, two), TG_ESHAPE,
                      "x has 2 dims; it must have 3 (C, S...) or 4 (B, C, S...)", y);
    tg_tensor_release(flat);
    tg_tensor *e = NULL, *xi = NULL;
    OK(tg_tensor_zeros(&e, TG_F32, 3, (int64_t[]){2, 0, 4}));
    th_expect_refused(tg_adaptive_max_pool(&y, &idx, e, 2, two), TG_ESHAPE,
                      "x's dim 1 has extent 0", y);
    th_expect_refused(tg_adaptive_max_pool(&y, NULL, e, 2, (int64_t[]){0, 2}), TG_ESHAPE,
                      "x's dim 1 has extent 0", y);
    const tg_dtype ints[3] = {TG_I32, TG_I64, TG_U8};
    for (int i = 0; i < 3; i++) {
        OK(tg_tensor_zeros(&xi, ints[i], 3, (int64_t[]){2, 4, 4}));
        th_expect_refused(tg_adaptive_max_pool(&y, &idx, xi, 2, two), TG_EDTYPE,
                          "adaptive_max_pool2d: x has dtype", y);
        th_expect_refused(tg_adaptive_max_pool(&y, NULL, xi, 2, two), TG_EDTYPE,
                          "a float dtype is needed", y);
        tg_tensor_release(xi);
    }
    cr_assert(idx == NULL, "indices are untouched on error");
    th_release_all(2, (tg_tensor *[]){x, e});
}

/* The registered adjoint pair, called as the gradient calls it, checks the
 * indices it is given: i64, y's shape, each inside the plane. */
Test(adaptive_max_pool, the_pair_checks_its_indices)
{
    const tg_op_schema *ops[2] = {NULL, NULL};
    OK(tg_op_find(&ops[0], "adaptive_max_pool_backward"));
    OK(tg_op_find(&ops[1], "adaptive_max_pool_gather"));
    tg__pool_call c = {.ns = 2, .size = {3, 3}, .ndim = 3, .shape = {2, 5, 4}};
    tg_tensor *g = NULL, *h = NULL, *bad = NULL, *r = NULL;
    OK(tg_tensor_zeros(&g, TG_F32, 3, (int64_t[]){2, 3, 3}));
    OK(tg_tensor_zeros(&h, TG_F32, 3, (int64_t[]){2, 5, 4}));
    for (int k = 0; k < 2; k++) {
        tg_tensor *a = k ? h : g;
        OK(tg_tensor_full(&bad, TG_I64, 3, (int64_t[]){2, 3, 3}, 20));
        th_expect_refused(tg_op_call(ops[k], &r, 2, (tg_tensor *[]){a, bad}, &c, sizeof c),
                          TG_EINVAL, "indices[0]=20 must be in [0, 20)", r);
        tg_tensor_release(bad);
        OK(tg_tensor_full(&bad, TG_I64, 3, (int64_t[]){2, 3, 2}, 0));
        th_expect_refused(tg_op_call(ops[k], &r, 2, (tg_tensor *[]){a, bad}, &c, sizeof c),
                          TG_ESHAPE, "the indices must have the pooled shape", r);
        tg_tensor_release(bad);
        OK(tg_tensor_full(&bad, TG_F32, 3, (int64_t[]){2, 3, 3}, 0));
        th_expect_refused(tg_op_call(ops[k], &r, 2, (tg_tensor *[]){a, bad}, &c, sizeof c),
                          TG_EDTYPE, "the indices must be an i64 tensor", r);
        tg_tensor_release(bad);
        OK(tg_tensor_full(&bad, TG_I64, 3, (int64_t[]){2, 3, 3}, 19));
        th_expect_refused(tg_op_call(ops[k], &r, 2, (tg_tensor *[]){k ? g : h, bad}, &c,
                                     sizeof c),
                          TG_ESHAPE, "g has shape", r);
        OK(tg_op_call(ops[k], &r, 2, (tg_tensor *[]){a, bad}, &c, sizeof c));
        th_expect_shape(r, 3, k ? (int64_t[]){2, 3, 3} : (int64_t[]){2, 5, 4});
        th_release_all(2, (tg_tensor *[]){r, bad});
        r = NULL;
    }
    th_release_all(2, (tg_tensor *[]){g, h});
}

/* Inside a scope the scope owns y and the indices, and nothing else the
 * call made. */
Test(adaptive_max_pool, a_scope_gets_both_results)
{
    tg_tensor *x = th_rand_uniform(TG_F32, 3, (int64_t[]){2, 5, 4}, 8), *y = NULL, *idx = NULL;
    OK(tg_tensor_set_requires_grad(x, true));
    OK(tg_scope_begin());
    OK(tg_adaptive_max_pool(&y, &idx, x, 2, (int64_t[]){3, 3}));
    cr_assert(eq(int, tg_scope_size(), 2));
    OK(tg_adaptive_max_pool(&y, NULL, x, 2, (int64_t[]){3, 3}));
    cr_assert(eq(int, tg_scope_size(), 3));
    cr_assert(tg_scope_keep(idx) == idx, "the indices are the scope's");
    OK(tg_scope_end());
    th_expect_shape(idx, 3, (int64_t[]){2, 3, 3});
    th_release_all(2, (tg_tensor *[]){x, idx});
}

/* The indices op keeps x's dtype under autocast and has no gradient; the
 * other three have gradients of every order. */
Test(adaptive_max_pool, the_ops_are_registered)
{
    tg_op_info info;
    OK(tg_op_info_find("adaptive_max_pool_indices", &info));
    cr_assert(info.amp == TG_AMP_KEEP && info.has_backward == false);
    static const char *const names[3] = {"adaptive_max_pool", "adaptive_max_pool_backward",
                                         "adaptive_max_pool_gather"};
    for (int i = 0; i < 3; i++) {
        OK(tg_op_info_find(names[i], &info));
        cr_assert(info.amp == TG_AMP_KEEP && info.has_backward && info.has_double_backward, "%s",
                  names[i]);
    }
}

/* AdaptiveMaxPoolNd runs tg_adaptive_max_pool with its output size (0
 * kept as None), which tg_nn_adaptive_pool_params returns. */
Test(adaptive_max_pool, module_runs_the_op)
{
    tg_module *m = NULL;
    tg_tensor *x = th_rand_uniform(TG_F64, 4, (int64_t[]){2, 3, 7, 5}, 5), *y = NULL, *z = NULL;
    OK(tg_nn_adaptive_max_pool_new(&m, 2, (int64_t[]){3, 0}));
    cr_assert(strncmp(tg_module_type_name(m), "AdaptiveMaxPool2d", 32) == 0);
    OK(tg_module_forward(m, &y, x));
    OK(tg_adaptive_max_pool(&z, NULL, x, 2, (int64_t[]){3, 0}));
    th_expect_same_bits("module", x, y, z);
    th_expect_shape(y, 4, (int64_t[]){2, 3, 3, 5});
    int ns = 0;
    int64_t size[3] = {-5, -5, -5};
    OK(tg_nn_adaptive_pool_params(m, &ns, size));
    cr_assert(ns == 2 && size[0] == 3 && size[1] == 0 && size[2] == -5);
    tg_module *other = NULL, *bad = NULL;
    tg_pool_params p = TG_POOL_PARAMS_INIT;
    tg_pool_params_set(&p, 2, 0, 0);
    OK(tg_nn_max_pool_new(&other, 2, &p));
    cr_assert(eq(int, tg_nn_adaptive_pool_params(other, &ns, size), TG_EINVAL));
    th_expect_in(tg_error_message(), "not AdaptiveAvgPoolNd or AdaptiveMaxPoolNd");
    cr_assert(eq(int, tg_nn_pool_params(m, &ns, &p), TG_EINVAL));
    cr_assert(eq(int, tg_nn_adaptive_max_pool_new(NULL, 2, size), TG_EINVAL));
    th_expect_in(tg_error_message(), "nn_adaptive_max_pool_new: out must not be NULL");
    cr_assert(eq(int, tg_nn_adaptive_max_pool_new(&bad, 4, size), TG_EINVAL));
    th_expect_in(tg_error_message(), "n_spatial=4");
    cr_assert(eq(int, tg_nn_adaptive_max_pool_new(&bad, 2, NULL), TG_EINVAL));
    th_expect_in(tg_error_message(), "output_size must not be NULL");
    cr_assert(eq(int, tg_nn_adaptive_max_pool_new(&bad, 2, (int64_t[]){1, -2}), TG_EINVAL));
    th_expect_in(tg_error_message(), "output_size[1]=-2");
    cr_assert(bad == NULL);
    for (int n = 1; n <= 3; n++) {
        char want[32];
        snprintf(want, sizeof want, "AdaptiveMaxPool%dd", n);
        OK(tg_nn_adaptive_max_pool_new(&bad, n, (int64_t[]){1, 1, 1}));
        cr_assert(strncmp(tg_module_type_name(bad), want, 32) == 0);
        tg_module_release(bad);
        bad = NULL;
    }
    tg_module_release(m);
    tg_module_release(other);
    th_release_all(3, (tg_tensor *[]){x, y, z});
}
