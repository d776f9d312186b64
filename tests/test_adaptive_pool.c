/* tests/test_adaptive_pool.c - tg_adaptive_avg_pool against PyTorch's
 * F.adaptive_avg_pool1d/2d/3d and its gradient (f64, f32, bf16; output
 * extents that divide x's, that do not, larger than x's, 1 everywhere,
 * None; batched and unbatched), avg_pool's kernels (the fast path) against
 * the general ones where both apply, derivatives to second order by finite
 * differences, f16, the AdaptiveAvgPoolNd modules and the refusals.
 * Goldens: scripts/make_adaptive_pool_goldens.py. */
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

/* th_expect_close for got (any dtype) against an f64 want. */
static void expect_close_f64(const char *what, const tg_tensor *got, const tg_tensor *want,
                             double rtol)
{
    tg_tensor *g64 = NULL;
    OK(tg_tensor_to_dtype(&g64, got, TG_F64));
    th_expect_close_scaled(what, g64, want, rtol);
    tg_tensor_release(g64);
}

/* f64 within rounding of torch's; f32 torch's to the bit where the general
 * kernels run (the same sum, divided by each extent in turn) and in 1-d,
 * within a rounding where avg_pool's kernels run (one division by the
 * product) or torch computes x.mean (output extent 1 everywhere, another
 * order of the sum); bf16
 * within a rounding of the f64 result of the same x and grad_y (rounded
 * once here; PyTorch's bf16 kernels round in bf16 steps) and loosely of
 * torch's. */
Test(adaptive_pool, every_case_matches_torch)
{
    tg_st_file *f = th_golden_load("pool/adaptive_pool.safetensors");
    const int n = atoi(tg_st_meta_get(f, "cases"));
    int per_ns[4] = {0}, bf16 = 0;
    for (int i = 0; i < n; i++) {
        char c[16];
        snprintf(c, sizeof c, "case%d", i);
        const int ns = atoi(th_golden_meta(f, c, "ns"));
        int64_t size[3] = {0};
        th_ints_of(th_golden_meta(f, c, "output_size"), size);
        per_ns[ns]++;
        const tg_tensor *want = th_golden_get(f, c, "y");
        const tg_dtype dt = tg_tensor_dtype(want);
        tg_tensor *x = th_leaf_clone(th_golden_get(f, c, "x")), *y = NULL;
        bool exact = false;   /* the general kernels: torch's sums, divisions */
        for (int a = 0; a < ns; a++) {
            const int64_t in = tg_tensor_shape(x)[tg_tensor_ndim(x) - ns + a];
            exact = exact || (size[a] ? in % size[a] : 0) != 0;
        }
        exact = exact || ns == 1;   /* one division either way, not torch's mean */
        for (int a = 0; a < ns; a++) exact = exact && size[a] != 1;
        const double tol = dt == TG_F64 ? 1e-14 : dt == TG_F32 ? (exact ? 0 : 1e-6) : 1.0 / 64;
        OK(tg_adaptive_avg_pool(&y, x, ns, size));
        th_expect_close_scaled(c, y, want, tol);
        th_backward_with(y, th_golden_get(f, c, "grad_y"));
        th_expect_close_scaled(c, tg_tensor_grad(x), th_golden_get(f, c, "grad_x"), tol);
        if (dt == TG_BF16) {
            bf16++;
            expect_close_f64(c, y, th_golden_get(f, c, "y64"), 1.0 / 256);
            expect_close_f64(c, tg_tensor_grad(x), th_golden_get(f, c, "grad_x64"), 1.0 / 256);
        }
        th_release_all(2, (tg_tensor *[]){x, y});
    }
    cr_assert(per_ns[1] >= 10 && per_ns[2] >= 14 && per_ns[3] >= 9 && bf16 >= 5,
              "golden has %d/%d/%d cases, %d bf16", per_ns[1], per_ns[2], per_ns[3], bf16);
    tg_st_free(f);
}

/* One call: x's shape and the output size. */
typedef struct acase {
    int ns, ndim;
    int64_t shape[5];
    int64_t size[3];
} acase;

static const acase divisible[] = {
    {1, 3, {2, 3, 12}, {4}},
    {1, 2, {3, 6}, {6}},
    {2, 4, {2, 2, 8, 6}, {4, 2}},
    {2, 3, {3, 9, 4}, {3, 1}},
    {2, 4, {1, 2, 5, 7}, {1, 1}},
    {3, 5, {1, 2, 4, 6, 6}, {2, 3, 1}},
    {3, 4, {2, 3, 3, 4}, {3, 3, 2}},
};

/* y and x's gradient from the fast path, the general kernels and avg_pool
 * with kernel = stride = I/O agree to a few roundings (the fast path
 * divides once by the window's size, the general kernels by each extent in
 * turn). */
Test(adaptive_pool, fast_path_is_the_general_path)
{
    for (size_t i = 0; i < sizeof divisible / sizeof *divisible; i++) {
        const acase *k = &divisible[i];
        for (int d = 0; d < 2; d++) {
            const tg_dtype dt = d ? TG_F32 : TG_F64;
            const double tol = d ? 1e-6 : 1e-14;
            tg_tensor *x = th_rand_uniform(dt, k->ndim, k->shape, 40 + i), *y[3] = {0};
            tg_tensor *dx[3] = {0};
            tg_pool_params p = TG_POOL_PARAMS_INIT;
            for (int a = 0; a < k->ns; a++) {
                const int64_t in = k->shape[k->ndim - k->ns + a];
                p.kernel[a] = p.stride[a] = in / k->size[a];
            }
            for (int r = 0; r < 3; r++) {
                tg_tensor *xr = NULL;
                OK(tg_tensor_clone(&xr, x));
                OK(tg_tensor_set_requires_grad(xr, true));
                if (r == 0) OK(tg_adaptive_avg_pool(&y[r], xr, k->ns, k->size));
                else if (r == 1) OK(tg__adaptive_avg_pool_call(&y[r], xr, k->ns, k->size, true));
                else OK(tg_avg_pool(&y[r], xr, k->ns, &p));
                tg_tensor *gs = th_rand_uniform(dt, tg_tensor_ndim(y[r]), tg_tensor_shape(y[r]),
                                                90 + i);
                th_backward_with(y[r], gs);
                OK(tg_tensor_clone(&dx[r], tg_tensor_grad(xr)));
                th_release_all(2, (tg_tensor *[]){xr, gs});
            }
            char what[64];
            for (int r = 1; r < 3; r++) {
                snprintf(what, sizeof what, "case %zu %s, path %d", i, d ? "f32" : "f64", r);
                th_expect_close_scaled(what, y[0], y[r], tol);
                th_expect_close_scaled(what, dx[0], dx[r], tol);
            }
            th_release_all(7, (tg_tensor *[]){x, y[0], y[1], y[2], dx[0], dx[1], dx[2]});
        }
    }
}

static const acase general[] = {
    {1, 3, {2, 2, 7}, {3}},
    {1, 2, {2, 3}, {5}},
    {2, 4, {1, 2, 5, 7}, {3, 4}},
    {2, 3, {2, 4, 3}, {3, 5}},
    {2, 4, {2, 1, 6, 5}, {4, 1}},
    {3, 5, {1, 1, 3, 5, 4}, {2, 3, 3}},
    {3, 4, {2, 2, 3, 5}, {3, 2, 4}},
};

static int call_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    const acase *k = user;
    return tg_adaptive_avg_pool(out, in[0], k->ns, k->size);
}

static int call_general(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    const acase *k = user;
    return tg__adaptive_avg_pool_call(out, in[0], k->ns, k->size, true);
}

/* Both paths, each the other's adjoint: first and second derivatives by
 * finite differences, and the gradient's gradient in g is the forward
 * again, bit for bit. */
Test(adaptive_pool, first_and_second_derivatives_by_finite_differences)
{
    const acase *sets[2] = {general, divisible};
    const size_t counts[2] = {sizeof general / sizeof *general,
                              sizeof divisible / sizeof *divisible};
    for (int s = 0; s < 2; s++)
        for (size_t i = 0; i < counts[s]; i++) {
            const acase *k = &sets[s][i];
            tg_tensor *x = th_rand_uniform(TG_F64, k->ndim, k->shape, 7 + i), *y = NULL;
            OK(tg_tensor_set_requires_grad(x, true));
            tg_tensor *in[1] = {x};
            for (int g = 0; g < 2; g++) {
                tg_gradcheck_fn fn = g ? call_general : call_fn;
                cr_assert(eq(int, tg_gradcheck(fn, (void *)k, 1, in, NULL), TG_OK),
                          "set %d case %zu: %s", s, i, tg_error_message());
                cr_assert(eq(int, tg_gradgradcheck(fn, (void *)k, 1, in, NULL), TG_OK),
                          "set %d case %zu: %s", s, i, tg_error_message());
            }
            OK(tg_adaptive_avg_pool(&y, x, k->ns, k->size));
            th_expect_double_backward_is_forward(x, y, 3 + i);
            th_release_all(2, (tg_tensor *[]){x, y});
        }
}

/* The windows by hand: 5 -> 3 gives [0, 2), [1, 4), [3, 5), so x = 1..5
 * pools to (1.5, 3, 4.5) and ones as g give (1/2, 1/2 + 1/3, 1/3,
 * 1/3 + 1/2, 1/2); 2 -> 3 gives [0, 1), [0, 2), [1, 2).  A 0 keeps the
 * extent: 5 -> 5 is x itself. */
Test(adaptive_pool, windows_by_hand)
{
    tg_tensor *x = th_tensor_from(TG_F64, 2, (int64_t[]){1, 5}, (double[]){1, 2, 3, 4, 5});
    tg_tensor *y = NULL, *s = NULL;
    OK(tg_tensor_set_requires_grad(x, true));
    OK(tg_adaptive_avg_pool(&y, x, 1, (int64_t[]){3}));
    th_expect_shape(y, 2, (int64_t[]){1, 3});
    const double wy[] = {1.5, 3, 4.5}, wg[] = {0.5, 0.5 + 1.0 / 3, 1.0 / 3, 1.0 / 3 + 0.5, 0.5};
    for (int i = 0; i < 3; i++) cr_assert(eq(dbl, th_at(y, i), wy[i]), "y[%d]", i);
    OK(tg_sum(&s, y));
    OK(tg_backward(s, NULL, NULL));
    for (int i = 0; i < 5; i++)
        cr_assert(th_close(th_at(tg_tensor_grad(x), i), wg[i], 1e-15, 0), "dx[%d]", i);
    th_release_all(2, (tg_tensor *[]){y, s});

    OK(tg_adaptive_avg_pool(&y, x, 1, (int64_t[]){0}));
    th_expect_same_bits("0 keeps the extent", x, y, x);
    tg_tensor_release(y);

    tg_tensor *z = th_tensor_from(TG_F32, 2, (int64_t[]){1, 2}, (double[]){2, 6});
    OK(tg_adaptive_avg_pool(&y, z, 1, (int64_t[]){3}));
    const double wz[] = {2, 4, 6};
    for (int i = 0; i < 3; i++) cr_assert(eq(dbl, th_at(y, i), wz[i]), "y[%d]", i);
    th_release_all(3, (tg_tensor *[]){x, y, z});
}

/* f16 and bf16 compute in f32 and round once: the f64 result rounded. */
Test(adaptive_pool, half_dtypes_round_the_f64_result_once)
{
    const tg_dtype dts[2] = {TG_F16, TG_BF16};
    for (int d = 0; d < 2; d++)
        for (size_t i = 0; i < sizeof general / sizeof *general; i++) {
            const acase *k = &general[i];
            tg_tensor *xh = th_rand_uniform(dts[d], k->ndim, k->shape, 60 + i);
            tg_tensor *x64 = NULL, *yh = NULL, *y64 = NULL;
            OK(tg_tensor_to_dtype(&x64, xh, TG_F64));
            OK(tg_adaptive_avg_pool(&yh, xh, k->ns, k->size));
            OK(tg_adaptive_avg_pool(&y64, x64, k->ns, k->size));
            cr_assert(eq(int, tg_tensor_dtype(yh), dts[d]));
            for (int64_t e = 0; e < tg_tensor_numel(y64); e++)
                cr_assert(eq(dbl, th_at(yh, e), th_round_to(dts[d], th_at(y64, e))),
                          "dtype %d case %zu element %lld", d, i, (long long)e);
            th_release_all(4, (tg_tensor *[]){xh, x64, yh, y64});
        }
}

/* An empty batch gives an empty result and an empty gradient. */
Test(adaptive_pool, empty_batch)
{
    tg_tensor *x = NULL, *y = NULL;
    OK(tg_tensor_zeros(&x, TG_F32, 4, (int64_t[]){0, 2, 5, 4}));
    OK(tg_adaptive_avg_pool(&y, x, 2, (int64_t[]){3, 3}));
    th_expect_shape(y, 4, (int64_t[]){0, 2, 3, 3});
    th_release_all(2, (tg_tensor *[]){x, y});
}

static void expect_error(int rc, int want, const char *needle)
{
    cr_assert(eq(int, rc, want), "rc %d, want %d: %s", rc, want, tg_error_message());
    cr_assert(strstr(tg_error_message(), needle) != NULL, "message '%s' lacks '%s'",
              tg_error_message(), needle);
}

Test(adaptive_pool, refusals)
{
    tg_tensor *x = th_rand_uniform(TG_F32, 4, (int64_t[]){2, 3, 5, 4}, 1), *y = NULL;
    const int64_t two[3] = {2, 2, 2};
    expect_error(tg_adaptive_avg_pool(NULL, x, 2, two), TG_EINVAL, "out must not be NULL");
    expect_error(tg_adaptive_avg_pool(&y, NULL, 2, two), TG_EINVAL, "x must not be NULL");
    expect_error(tg_adaptive_avg_pool(&y, x, 2, NULL), TG_EINVAL,
                 "output_size must not be NULL");
    expect_error(tg_adaptive_avg_pool(&y, x, 0, two), TG_EINVAL, "n_spatial=0 must be 1, 2");
    expect_error(tg_adaptive_avg_pool(&y, x, 4, two), TG_EINVAL, "n_spatial=4 must be 1, 2");
    expect_error(tg_adaptive_avg_pool(&y, x, 2, (int64_t[]){2, -1}), TG_EINVAL,
                 "adaptive_avg_pool2d: output_size[1]=-1 must be in [1, ");
    expect_error(tg_adaptive_avg_pool(&y, x, 2, (int64_t[]){TG_POOL_MAX_PARAM + 1, 2}),
                 TG_EINVAL, "output_size[0]=2147483648 must be in [1, ");
    expect_error(tg_adaptive_avg_pool(&y, x, 1, two), TG_ESHAPE,
                 "adaptive_avg_pool1d: x has 4 dims; it must have 2 (C, S...) or 3");
    tg_tensor *flat = th_rand_uniform(TG_F32, 2, (int64_t[]){3, 4}, 2);
    expect_error(tg_adaptive_avg_pool(&y, flat, 2, two), TG_ESHAPE,
                 "x has 2 dims; it must have 3 (C, S...) or 4 (B, C, S...)");
    tg_tensor_release(flat);
    cr_assert(y == NULL, "out is untouched on error");
    tg_tensor *e = NULL, *xi = NULL;
    OK(tg_tensor_zeros(&e, TG_F32, 3, (int64_t[]){2, 0, 4}));
    expect_error(tg_adaptive_avg_pool(&y, e, 2, two), TG_ESHAPE, "x's dim 1 has extent 0");
    expect_error(tg_adaptive_avg_pool(&y, e, 2, (int64_t[]){0, 2}), TG_ESHAPE,
                 "x's dim 1 has extent 0");
    const tg_dtype ints[3] = {TG_I32, TG_I64, TG_U8};
    for (int i = 0; i < 3; i++) {
        OK(tg_tensor_zeros(&xi, ints[i], 3, (int64_t[]){2, 4, 4}));
        expect_error(tg_adaptive_avg_pool(&y, xi, 2, two), TG_EDTYPE,
                     "a float dtype is needed");
        tg_tensor_release(xi);
    }
    cr_assert(y == NULL);
    th_release_all(2, (tg_tensor *[]){x, e});
}

/* The gradient ops of average pooling, called through the registry as a
 * plugin or the fuzzer may, refuse a missing, integer or misshapen g and an
 * integer x's shape, and take a g of the pooled shape. */
Test(adaptive_pool, the_backward_ops_check_g)
{
    const char *names[2] = {"adaptive_avg_pool_backward", "avg_pool_backward"};
    tg__pool_call calls[2] = {
        {.ns = 2, .size = {3, 2}, .ndim = 3, .shape = {2, 5, 4}},
        {.ns = 2, .p = TG_POOL_PARAMS_INIT, .ndim = 3, .shape = {2, 5, 4}}};
    calls[1].p.kernel[0] = 2, calls[1].p.kernel[1] = 2;   /* pooled: (2, 2, 2) */
    const int64_t pooled[2][3] = {{2, 3, 2}, {2, 2, 2}};
    for (int k = 0; k < 2; k++) {
        const tg_op_schema *op = NULL;
        OK(tg_op_find(&op, names[k]));
        tg_tensor *g = NULL, *r = NULL;
        const tg__pool_call *c = &calls[k];
        th_expect_refused(tg_op_call(op, &r, 1, (tg_tensor *[]){NULL}, c, sizeof *c),
                          TG_EINVAL, "g must not be NULL", r);
        OK(tg_tensor_zeros(&g, TG_I32, 3, pooled[k]));
        th_expect_refused(tg_op_call(op, &r, 1, (tg_tensor *[]){g}, c, sizeof *c), TG_EDTYPE,
                          "a float dtype is needed", r);
        tg_tensor_release(g);
        OK(tg_tensor_zeros(&g, TG_F32, 3, (int64_t[]){2, 3, 3}));
        th_expect_refused(tg_op_call(op, &r, 1, (tg_tensor *[]){g}, c, sizeof *c), TG_ESHAPE,
                          "g has shape (2, 3, 3); it must be", r);
        tg_tensor_release(g);
        OK(tg_tensor_zeros(&g, TG_F32, 3, pooled[k]));
        OK(tg_op_call(op, &r, 1, (tg_tensor *[]){g}, c, sizeof *c));
        th_expect_shape(r, 3, (int64_t[]){2, 5, 4});
        th_release_all(2, (tg_tensor *[]){g, r});
    }
}

/* AdaptiveAvgPoolNd runs tg_adaptive_avg_pool with its output size (0
 * kept as None), which its getter returns. */
Test(adaptive_pool, module_runs_the_op)
{
    tg_module *m = NULL;
    tg_tensor *x = th_rand_uniform(TG_F64, 4, (int64_t[]){2, 3, 7, 5}, 5), *y = NULL, *z = NULL;
    OK(tg_nn_adaptive_avg_pool_new(&m, 2, (int64_t[]){3, 0}));
    cr_assert(strncmp(tg_module_type_name(m), "AdaptiveAvgPool2d", 32) == 0);
    OK(tg_module_forward(m, &y, x));
    OK(tg_adaptive_avg_pool(&z, x, 2, (int64_t[]){3, 0}));
    th_expect_same_bits("module", x, y, z);
    th_expect_shape(y, 4, (int64_t[]){2, 3, 3, 5});
    int ns = 0;
    int64_t size[3] = {-5, -5, -5};
    OK(tg_nn_adaptive_pool_params(m, &ns, size));
    cr_assert(ns == 2 && size[0] == 3 && size[1] == 0 && size[2] == -5);
    OK(tg_nn_adaptive_pool_params(m, NULL, NULL));
    tg_module *other = NULL;
    tg_pool_params p = TG_POOL_PARAMS_INIT;
    tg_pool_params_set(&p, 2, 0, 0);
    OK(tg_nn_avg_pool_new(&other, 2, &p));
    expect_error(tg_nn_adaptive_pool_params(other, &ns, size), TG_EINVAL,
                 "not AdaptiveAvgPoolNd");
    expect_error(tg_nn_adaptive_pool_params(NULL, &ns, size), TG_EINVAL,
                 "m must not be NULL");
    expect_error(tg_nn_pool_params(m, &ns, &p), TG_EINVAL, "not AvgPoolNd or MaxPoolNd");
    tg_module *bad = NULL;
    expect_error(tg_nn_adaptive_avg_pool_new(NULL, 2, size), TG_EINVAL, "out must not be NULL");
    expect_error(tg_nn_adaptive_avg_pool_new(&bad, 0, size), TG_EINVAL, "n_spatial=0");
    expect_error(tg_nn_adaptive_avg_pool_new(&bad, 2, NULL), TG_EINVAL,
                 "output_size must not be NULL");
    expect_error(tg_nn_adaptive_avg_pool_new(&bad, 2, (int64_t[]){1, -2}), TG_EINVAL,
                 "output_size[1]=-2");
    cr_assert(bad == NULL);
    for (int n = 1; n <= 3; n++) {
        char want[32];
        snprintf(want, sizeof want, "AdaptiveAvgPool%dd", n);
        OK(tg_nn_adaptive_avg_pool_new(&bad, n, (int64_t[]){1, 1, 1}));
        cr_assert(strncmp(tg_module_type_name(bad), want, 32) == 0);
        tg_module_release(bad);
        bad = NULL;
    }
    tg_module_release(m);
    tg_module_release(other);
    th_release_all(3, (tg_tensor *[]){x, y, z});
}
