/* tests/test_pool_invariants.c - what holds for every call of tg_avg_pool,
 * tg_max_pool, tg_upsample_nearest, tg_upsample_linear, tg_upsample_bicubic
 * and tg_upsample_antialias over a sweep of 1-3 spatial dims:
 * derivatives to second order by finite differences, each backward as the
 * forward's adjoint, max pooling's double backward as a gather, unbatched
 * inputs as one sample, half dtypes as the f32 result rounded once; and
 * half avg_pool's f32 sums, one thread against two, empty batches.  The
 * values against PyTorch: test_pool.c. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "pool_calls.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

/* ---- derivatives ---- */

static int call_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    return run(user, out, in[0]);
}

/* A sweep of calls over 1-3 spatial dims, each with its input shape. */
typedef struct sweep_case {
    call c;
    int ndim;
    int64_t shape[5];
} sweep_case;

static sweep_case avg_case(int ns, int64_t k, int64_t s, int64_t pad, bool ceil, bool cip)
{
    sweep_case r = {.c = {.k = AVG, .ns = ns, .p = TG_POOL_PARAMS_INIT}, .ndim = ns + 2};
    tg_pool_params_set(&r.c.p, k, s, pad);
    r.c.p.ceil_mode = ceil;
    r.c.p.count_include_pad = cip;
    const int64_t ext[3] = {5, 4, 3};
    r.shape[0] = 2;
    r.shape[1] = 2;
    for (int a = 0; a < ns; a++) r.shape[2 + a] = ext[3 - ns + a];
    return r;
}

static sweep_case max_case(int ns, int64_t k, int64_t s, int64_t pad, int64_t dil, bool ceil)
{
    sweep_case r = avg_case(ns, k, s, pad, ceil, true);
    r.c.k = MAX;
    for (int a = 0; a < 3; a++) r.c.p.dilation[a] = dil;
    return r;
}

static sweep_case up_case(int ns, const int64_t *scale)
{
    sweep_case r = avg_case(ns, 1, 1, 0, false, true);
    r.c.k = UP;
    memcpy(r.c.scale, scale, sizeof r.c.scale);
    return r;
}

/* Linear (or, with ns = 2 and k = CUB, AAL or AAC, bicubic or
 * antialiased) interpolation of avg_case's input to size[0..ns). */
static sweep_case interp_case(kind k, int ns, const int64_t *size, bool align)
{
    sweep_case r = avg_case(ns, 1, 1, 0, false, true);
    r.c.k = k;
    r.c.align = align;
    memcpy(r.c.size, size, (size_t)ns * sizeof *size);
    return r;
}

static void sweep(void (*check)(const sweep_case *sc, tg_tensor *x))
{
    const sweep_case cases[] = {
        avg_case(1, 3, 2, 1, false, true), avg_case(1, 3, 2, 1, true, false),
        avg_case(2, 3, 2, 1, true, true),  avg_case(2, 2, 1, 1, false, false),
        avg_case(3, 2, 0, 1, true, false), avg_case(3, 3, 2, 0, false, true),
        max_case(1, 3, 2, 1, 1, true),     max_case(1, 2, 1, 1, 2, false),
        max_case(2, 3, 2, 1, 1, false),    max_case(2, 2, 1, 0, 2, true),
        max_case(3, 2, 0, 1, 1, true),     max_case(3, 3, 1, 1, 1, false),
        up_case(1, (int64_t[]){3, 1, 1}),  up_case(2, (int64_t[]){2, 3, 1}),
        up_case(3, (int64_t[]){1, 2, 2}),
        interp_case(LIN, 1, (int64_t[]){9}, false),
        interp_case(LIN, 1, (int64_t[]){2}, true),
        interp_case(LIN, 2, (int64_t[]){7, 3}, false),
        interp_case(LIN, 2, (int64_t[]){1, 6}, true),
        interp_case(LIN, 3, (int64_t[]){4, 3, 5}, false),
        interp_case(LIN, 3, (int64_t[]){3, 5, 2}, true),
        interp_case(CUB, 2, (int64_t[]){7, 3}, false),
        interp_case(CUB, 2, (int64_t[]){1, 6}, true),
        interp_case(CUB, 2, (int64_t[]){9, 11}, false),
        interp_case(AAL, 2, (int64_t[]){2, 2}, false),
        interp_case(AAL, 2, (int64_t[]){3, 7}, true),
        interp_case(AAC, 2, (int64_t[]){2, 1}, false),
        interp_case(AAC, 2, (int64_t[]){1, 5}, true),
        interp_case(AAC, 2, (int64_t[]){7, 2}, false),
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        /* distinct values: no ties, where max is not differentiable */
        tg_tensor *x = th_rand_uniform(TG_F64, cases[i].ndim, cases[i].shape, 11 + i);
        OK(tg_tensor_set_requires_grad(x, true));
        check(&cases[i], x);
        tg_tensor_release(x);
    }
}

static void check_derivatives(const sweep_case *sc, tg_tensor *x)
{
    tg_tensor *in[1] = {x};
    cr_assert(eq(int, tg_gradcheck(call_fn, (void *)&sc->c, 1, in, NULL), TG_OK),
              "kind %d, %d-d: %s", sc->c.k, sc->c.ns, tg_error_message());
    cr_assert(eq(int, tg_gradgradcheck(call_fn, (void *)&sc->c, 1, in, NULL), TG_OK),
              "kind %d, %d-d: %s", sc->c.k, sc->c.ns, tg_error_message());
}

Test(pool_invariants, first_and_second_derivatives_by_finite_differences)
{
    sweep(check_derivatives);
}

/* <op(x), w> = <x, op's backward applied to w>: the backward is the
 * adjoint of the forward (exactly so for avg and nearest, which are linear;
 * for max at x's own indices). */
static void check_adjoint(const sweep_case *sc, tg_tensor *x)
{
    tg_tensor *y = NULL, *p = NULL, *s = NULL, *gx = NULL, *q = NULL, *t = NULL;
    OK(run(&sc->c, &y, x));
    tg_tensor *w = th_rand_uniform(TG_F64, tg_tensor_ndim(y), tg_tensor_shape(y), 99);
    OK(tg_mul(&p, y, w));
    OK(tg_sum(&s, p));
    OK(tg_grad(&gx, 1, &y, &w, 1, &x, NULL));
    OK(tg_mul(&q, x, gx));
    OK(tg_sum(&t, q));
    cr_assert(epsilon_eq(dbl, tg_tensor_item(s), tg_tensor_item(t),
                         1e-13 * (1 + fabs(tg_tensor_item(s)))),
              "kind %d, %d-d: <op(x), w> = %.17g, <x, op^T w> = %.17g", sc->c.k, sc->c.ns,
              tg_tensor_item(s), tg_tensor_item(t));
    th_release_all(7, (tg_tensor *[]){y, w, p, s, gx, q, t});
}

Test(pool_invariants, backward_is_the_adjoint_of_the_forward)
{
    sweep(check_adjoint);
}

/* max_pool's backward is S^T g for the selection S: its gradient in g,
 * against h, is S h, so with h = x it is max_pool(x) itself. */
Test(pool_invariants, max_pool_double_backward_is_a_gather)
{
    tg_tensor *x = th_rand_uniform(TG_F64, 4, (int64_t[]){2, 3, 6, 5}, 4);
    OK(tg_tensor_set_requires_grad(x, true));
    tg_pool_params p = TG_POOL_PARAMS_INIT;
    tg_pool_params_set(&p, 3, 2, 1);
    tg_tensor *y = NULL, *g = NULL, *dx = NULL, *dg = NULL;
    OK(tg_max_pool(&y, x, 2, &p));
    g = th_rand_uniform(TG_F64, 4, tg_tensor_shape(y), 5);
    OK(tg_tensor_set_requires_grad(g, true));
    tg_backward_opts o = {.create_graph = true};
    OK(tg_grad(&dx, 1, &y, &g, 1, &x, &o));
    tg_tensor *xc = NULL;
    OK(tg_tensor_clone(&xc, x));   /* h = x's values, a constant */
    OK(tg_grad(&dg, 1, &dx, &xc, 1, &g, NULL));
    th_expect_same_bits("S x", x, dg, y);
    th_release_all(6, (tg_tensor *[]){x, y, g, dx, dg, xc});
}

/* ---- other inputs ---- */

/* An unbatched (C, S...) x is one sample: the batched result's only row. */
static void check_unbatched(const sweep_case *sc, tg_tensor *x)
{
    tg_tensor *x1 = NULL, *xu = NULL, *y1 = NULL, *yu = NULL, *want = NULL;
    OK(tg_slice(&x1, x, 0, 1, 2, 1));
    OK(tg_squeeze(&xu, x1, 0));
    OK(run(&sc->c, &y1, x1));
    OK(run(&sc->c, &yu, xu));
    OK(tg_squeeze(&want, y1, 0));
    th_expect_same_bits("unbatched", xu, yu, want);
    th_release_all(5, (tg_tensor *[]){x1, xu, y1, yu, want});
}

Test(pool_invariants, unbatched_input_is_one_sample)
{
    sweep(check_unbatched);
}

/* f16 and bf16: computed in f32, rounded once: the f32 result of the same
 * (rounded) input, rounded, and the same for the gradient (of sum(y * w)). */
static void check_half(const sweep_case *sc, tg_tensor *x)
{
    static const tg_dtype dts[] = {TG_F16, TG_BF16};
    for (size_t d = 0; d < 2; d++) {
        tg_tensor *xh = NULL, *x32 = NULL, *yh = NULL, *y32 = NULL, *want = NULL;
        tg_tensor *wh = NULL, *w32 = NULL, *gh = NULL, *g32 = NULL, *gwant = NULL;
        OK(tg_tensor_to_dtype(&xh, x, dts[d]));
        OK(tg_tensor_to_dtype(&x32, xh, TG_F32));
        OK(run(&sc->c, &yh, xh));
        OK(run(&sc->c, &y32, x32));
        OK(tg_tensor_to_dtype(&want, y32, dts[d]));
        th_expect_same_bits(tg_dtype_name(dts[d]), xh, yh, want);
        tg_tensor *w = th_rand_uniform(TG_F64, tg_tensor_ndim(yh), tg_tensor_shape(yh), 7);
        OK(tg_tensor_to_dtype(&wh, w, dts[d]));
        OK(tg_tensor_to_dtype(&w32, wh, TG_F32));
        OK(tg_tensor_set_requires_grad(xh, true));
        OK(tg_tensor_set_requires_grad(x32, true));
        tg_tensor_release(yh);
        tg_tensor_release(y32);
        yh = y32 = NULL;
        OK(run(&sc->c, &yh, xh));
        OK(run(&sc->c, &y32, x32));
        OK(tg_grad(&gh, 1, &yh, &wh, 1, &xh, NULL));
        OK(tg_grad(&g32, 1, &y32, &w32, 1, &x32, NULL));
        cr_assert(eq(int, tg_tensor_dtype(gh), dts[d]));
        OK(tg_tensor_to_dtype(&gwant, g32, dts[d]));
        th_expect_same_bits("gradient", xh, gh, gwant);
        th_release_all(11, (tg_tensor *[]){xh, x32, yh, y32, want, w, wh, w32, gh, g32, gwant});
    }
}

Test(pool_invariants, half_dtypes_round_the_f32_result_once)
{
    sweep(check_half);
}

/* A half avg_pool sums in f32, as PyTorch's bf16 kernel: a window of 1 and
 * 2^17 - 1 elements of 2^-24 (each at most half an f32 ulp of the running
 * sum, so the f32 sum stays 1) averages to 2^-17 exactly, where the exact
 * mean, 2^-17 (1 + 2^-7 - 2^-24), rounds to another f16 and bf16 value. */
Test(pool_invariants, half_avg_pool_sums_in_f32)
{
    const int64_t n = (int64_t)1 << 17;
    double *v = malloc((size_t)n * sizeof *v);
    cr_assert(v != NULL);
    v[0] = 1.0;
    for (int64_t i = 1; i < n; i++) v[i] = ldexp(1.0, -24);
    tg_pool_params p = TG_POOL_PARAMS_INIT;
    tg_pool_params_set(&p, n, 0, 0);
    tg_tensor *x64 = NULL;
    OK(tg_tensor_from_data(&x64, TG_F64, 3, (int64_t[]){1, 1, n}, v));
    static const tg_dtype dts[] = {TG_F16, TG_BF16};
    for (size_t d = 0; d < 2; d++) {
        tg_tensor *x = NULL, *y = NULL, *exact = NULL;
        OK(tg_tensor_to_dtype(&x, x64, dts[d]));
        OK(tg_avg_pool(&y, x, 1, &p));
        cr_assert(eq(dbl, th_at(y, 0), ldexp(1.0, -17)), "%s: %.17g", tg_dtype_name(dts[d]),
                  th_at(y, 0));
        /* the exact mean rounds elsewhere: the case tells the two apart */
        const double mean = ldexp(1.0 + ldexp(1.0, -7) - ldexp(1.0, -24), -17);
        OK(tg_tensor_full(&exact, dts[d], 1, (int64_t[]){1}, mean));
        cr_assert(th_at(exact, 0) != ldexp(1.0, -17));
        th_release_all(3, (tg_tensor *[]){x, y, exact});
    }
    tg_tensor_release(x64);
    free(v);
}

/* Each plane's sums run in one order, so splitting the planes over two
 * threads (inputs above the parallel threshold) gives the one thread's bits,
 * forward and backward. */
Test(pool_invariants, two_threads_give_one_threads_bits)
{
    const int saved = tg_get_num_threads();
    tg_pool_params k3 = TG_POOL_PARAMS_INIT, k2 = TG_POOL_PARAMS_INIT;
    tg_pool_params_set(&k3, 3, 1, 1);
    tg_pool_params_set(&k2, 3, 2, 1);
    const call calls[] = {{.k = AVG, .ns = 2, .p = k3}, {.k = MAX, .ns = 2, .p = k2},
                          {.k = UP, .ns = 2, .scale = {2, 2}},
                          {.k = LIN, .ns = 2, .size = {64, 40}},
                          {.k = CUB, .ns = 2, .size = {48, 64}},
                          {.k = AAL, .ns = 2, .size = {13, 9}},
                          {.k = AAC, .ns = 2, .size = {48, 11}, .align = true}};
    tg_tensor *x = th_rand_uniform(TG_F32, 4, (int64_t[]){4, 8, 32, 32}, 21);
    OK(tg_tensor_set_requires_grad(x, true));
    for (int i = 0; i < 7; i++) {
        tg_tensor *y[2] = {NULL, NULL}, *w = NULL, *gx[2] = {NULL, NULL};
        for (int t = 0; t < 2; t++) {
            OK(tg_set_num_threads(t + 1));
            OK(run(&calls[i], &y[t], x));
            if (!w) w = th_rand_uniform(TG_F32, 4, tg_tensor_shape(y[0]), 22);
            OK(tg_grad(&gx[t], 1, &y[t], &w, 1, &x, NULL));
        }
        th_expect_same_bits("y", x, y[1], y[0]);
        th_expect_same_bits("dx", x, gx[1], gx[0]);
        th_release_all(5, (tg_tensor *[]){y[0], y[1], w, gx[0], gx[1]});
    }
    tg_tensor_release(x);
    OK(tg_set_num_threads(saved));
}

/* An empty batch: an empty result of the right shape, zero gradients. */
Test(pool_invariants, empty_batch_gives_an_empty_result)
{
    tg_tensor *x = NULL;
    OK(tg_tensor_zeros(&x, TG_F32, 4, (int64_t[]){0, 3, 5, 4}));
    OK(tg_tensor_set_requires_grad(x, true));
    tg_pool_params p = TG_POOL_PARAMS_INIT;
    tg_pool_params_set(&p, 2, 0, 1);
    const call calls[] = {{.k = AVG, .ns = 2, .p = p}, {.k = MAX, .ns = 2, .p = p},
                          {.k = UP, .ns = 2, .scale = {2, 3}},
                          {.k = LIN, .ns = 2, .size = {10, 3}, .align = true},
                          {.k = CUB, .ns = 2, .size = {2, 7}},
                          {.k = AAL, .ns = 2, .size = {2, 2}},
                          {.k = AAC, .ns = 2, .size = {9, 3}, .align = true}};
    const int64_t want[7][4] = {{0, 3, 3, 3}, {0, 3, 3, 3}, {0, 3, 10, 12}, {0, 3, 10, 3},
                                {0, 3, 2, 7}, {0, 3, 2, 2}, {0, 3, 9, 3}};
    for (int i = 0; i < 7; i++) {
        tg_tensor *y = NULL, *s = NULL;
        OK(run(&calls[i], &y, x));
        th_expect_shape(y, 4, want[i]);
        OK(tg_sum(&s, y));
        OK(tg_backward(s, NULL, NULL));
        th_expect_shape(tg_tensor_grad(x), 4, (int64_t[]){0, 3, 5, 4});
        th_release_all(2, (tg_tensor *[]){y, s});
    }
    tg_tensor_release(x);
}
