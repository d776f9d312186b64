/* tests/test_pool.c - tg_avg_pool, tg_max_pool and tg_upsample_nearest
 * against PyTorch (values and gradients, 1-3 spatial dims, kernel, stride,
 * padding, dilation, ceil_mode, count_include_pad, ties and NaN in max
 * pooling, f64, f32 and bf16), PyTorch's rules by hand (avg_pool's divisor
 * conversion, a max window outside x, nearest's source index), the
 * refusals, and the modules (AvgPoolNd, MaxPoolNd, Upsample).  Derivatives,
 * half dtypes, threads and other inputs: test_pool_invariants.c.
 * Goldens: scripts/make_pool_goldens.py. */
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

static call call_of(const tg_st_file *f, const char *c)
{
    const char *k = th_golden_meta(f, c, "kind");
    call r = {.k = !strcmp(k, "avg") ? AVG : !strcmp(k, "max") ? MAX : UP,
              .ns = atoi(th_golden_meta(f, c, "ns")), .p = TG_POOL_PARAMS_INIT};
    if (r.k == UP) {
        th_ints_of(th_golden_meta(f, c, "scale"), r.scale);
        return r;
    }
    th_ints_of(th_golden_meta(f, c, "kernel"), r.p.kernel);
    th_ints_of(th_golden_meta(f, c, "stride"), r.p.stride);
    th_ints_of(th_golden_meta(f, c, "padding"), r.p.padding);
    th_ints_of(th_golden_meta(f, c, "dilation"), r.p.dilation);
    r.p.ceil_mode = atoi(th_golden_meta(f, c, "ceil_mode"));
    r.p.count_include_pad = atoi(th_golden_meta(f, c, "count_include_pad"));
    return r;
}

/* The tolerance of a dtype relative to the largest value: f32 values and
 * gradients are torch's to the bit (the same sums in the same order); bf16
 * gradients are within rounding of them (torch's bf16 backward kernels add
 * in bf16, tapegrad in f32, rounding once). */
static double tol_of(tg_dtype dt)
{
    return dt == TG_F64 ? 1e-14 : dt == TG_F32 ? 0 : 1.0 / 128;
}

Test(pool, every_case_matches_torch)
{
    tg_st_file *f = th_golden_load("pool/pool.safetensors");
    const int n = atoi(tg_st_meta_get(f, "cases"));
    int seen[3] = {0};
    for (int i = 0; i < n; i++) {
        char c[16];
        snprintf(c, sizeof c, "case%d", i);
        const call k = call_of(f, c);
        seen[k.k]++;
        const tg_tensor *want = th_golden_get(f, c, "y");
        const double tol = tol_of(tg_tensor_dtype(want));
        tg_tensor *x = th_leaf_clone(th_golden_get(f, c, "x")), *y = NULL;
        OK(run(&k, &y, x));
        /* max and nearest copy elements of x: exactly torch's */
        th_expect_close_scaled(c, y, want, k.k == AVG ? tol : 0);
        th_backward_with(y, th_golden_get(f, c, "grad_y"));
        th_expect_close_scaled(c, tg_tensor_grad(x), th_golden_get(f, c, "grad_x"), tol);
        th_release_all(2, (tg_tensor *[]){x, y});
    }
    cr_assert(seen[AVG] >= 12 && seen[MAX] >= 12 && seen[UP] >= 6, "golden has %d/%d/%d cases",
              seen[AVG], seen[MAX], seen[UP]);
    tg_st_free(f);
}

/* PyTorch's tie rule, by hand: windows [1 3 3], [3 3 2], [3 2 3] pick
 * elements 1, 1 and 2, so ones as g give (0, 2, 1, 0, 0); a NaN is taken
 * over any number, the last NaN over an earlier one. */
Test(pool, max_ties_go_to_the_first_maximum)
{
    tg_tensor *x = th_vec(TG_F64, 5, (double[]){1, 3, 3, 2, 3}, "x", true), *y = NULL;
    tg_tensor *x3 = NULL, *s = NULL;
    tg_pool_params p = TG_POOL_PARAMS_INIT;
    tg_pool_params_set(&p, 3, 1, 0);
    OK(tg_reshape(&x3, x, 3, (int64_t[]){1, 1, 5}));
    OK(tg_max_pool(&y, x3, 1, &p));
    OK(tg_sum(&s, y));
    OK(tg_backward(s, NULL, NULL));
    const double want[] = {0, 2, 1, 0, 0};
    for (int i = 0; i < 5; i++)
        cr_assert(eq(dbl, th_at(tg_tensor_grad(x), i), want[i]), "grad[%d]", i);
    th_release_all(4, (tg_tensor *[]){x, x3, y, s});

    const double nan = NAN;
    tg_tensor *z = th_tensor_from(TG_F32, 3, (int64_t[]){1, 1, 5}, (double[]){1, nan, 3, nan, 2});
    OK(tg_tensor_set_requires_grad(z, true));
    tg_pool_params_set(&p, 5, 0, 0);
    OK(tg_max_pool(&y, z, 1, &p));
    cr_assert(isnan(th_at(y, 0)));
    OK(tg_backward(y, NULL, NULL));
    cr_assert(eq(dbl, th_at(tg_tensor_grad(z), 3), 1.0), "the last NaN takes the gradient");
    cr_assert(eq(dbl, th_at(tg_tensor_grad(z), 1), 0.0));
    th_release_all(2, (tg_tensor *[]){z, y});
}

/* ceil_mode's last window starts inside x and runs past the padding: its
 * divisor with count_include_pad counts up to the padding's end only.  On
 * x = 0..5, kernel 3, stride 2, padding 1: windows [-1, 2), [1, 4),
 * [3, 6), [5, 7) (cut at I + p = 7): x[5] / 2, and x[5] / 1 without the
 * padding in the count. */
Test(pool, ceil_mode_last_window_is_cut_at_the_padding)
{
    tg_tensor *x = th_arange(TG_F64, 3, (int64_t[]){1, 1, 6}), *y = NULL, *y2 = NULL;
    tg_pool_params p = TG_POOL_PARAMS_INIT;
    tg_pool_params_set(&p, 3, 2, 1);
    p.ceil_mode = true;
    OK(tg_avg_pool(&y, x, 1, &p));
    th_expect_shape(y, 3, (int64_t[]){1, 1, 4});
    const double want[] = {1.0 / 3, 6.0 / 3, 12.0 / 3, 5.0 / 2};
    for (int i = 0; i < 4; i++) cr_assert(epsilon_eq(dbl, th_at(y, i), want[i], 1e-15));
    p.count_include_pad = false;
    OK(tg_avg_pool(&y2, x, 1, &p));
    cr_assert(eq(dbl, th_at(y2, 0), 0.5));
    cr_assert(eq(dbl, th_at(y2, 3), 5.0));
    /* and a window that would start in the right padding is dropped:
     * length 4, kernel 2, stride 3, padding 1: rounding up gives windows at
     * -1, 2 and 5, but 5 >= I + p, so 2 windows, as without ceil_mode */
    int64_t o = 0;
    tg_pool_params_set(&p, 2, 3, 1);
    OK(tg_pool_output_size(&o, 1, (int64_t[]){4}, &p));
    cr_assert(eq(i64, o, 2));
    p.ceil_mode = false;
    OK(tg_pool_output_size(&o, 1, (int64_t[]){4}, &p));
    cr_assert(eq(i64, o, 2));
    /* where ceil_mode does add one: length 5, kernel 2, stride 2 */
    tg_pool_params_set(&p, 2, 2, 0);
    OK(tg_pool_output_size(&o, 1, (int64_t[]){5}, &p));
    cr_assert(eq(i64, o, 2));
    p.ceil_mode = true;
    OK(tg_pool_output_size(&o, 1, (int64_t[]){5}, &p));
    cr_assert(eq(i64, o, 3));
    th_release_all(3, (tg_tensor *[]){x, y, y2});
}

/* ---- more of PyTorch's rules ---- */

/* An avg_pool divisor is the integer window size converted to the dtype,
 * as PyTorch's division by an int64: with one x element, kernel K =
 * 2^24 + 1 and padding K/2 on both axes (counted), y = x / (float)(K*K)
 * in f32, not x / ((float)K * (float)K), and x / (K*K) in f64; the gradient
 * of sum(y) is the same quotient of 1. */
Test(pool, avg_divisor_is_the_integer_size_converted)
{
    const int64_t K = ((int64_t)1 << 24) + 1;
    tg_pool_params p = TG_POOL_PARAMS_INIT;
    tg_pool_params_set(&p, K, 1, K / 2);
    for (int d = 0; d < 2; d++) {
        const tg_dtype dt = d ? TG_F64 : TG_F32;
        tg_tensor *x = NULL, *y = NULL, *s = NULL;
        OK(tg_tensor_full(&x, dt, 4, (int64_t[]){1, 1, 1, 1}, 3.0));
        OK(tg_tensor_set_requires_grad(x, true));
        OK(tg_avg_pool(&y, x, 2, &p));
        th_expect_shape(y, 4, (int64_t[]){1, 1, 1, 1});
        const double want = d ? 3.0 / (double)(K * K) : (double)(3.0f / (float)(K * K));
        const double gwant = d ? 1.0 / (double)(K * K) : (double)(1.0f / (float)(K * K));
        cr_assert(eq(dbl, th_at(y, 0), want), "%s: %.17g", tg_dtype_name(dt), th_at(y, 0));
        OK(tg_sum(&s, y));
        OK(tg_backward(s, NULL, NULL));
        cr_assert(eq(dbl, th_at(tg_tensor_grad(x), 0), gwant), "%s: %.17g", tg_dtype_name(dt),
                  th_at(tg_tensor_grad(x), 0));
        th_release_all(3, (tg_tensor *[]){x, y, s});
    }
}

/* With dilation a window can miss x altogether (length 2, kernel 2,
 * dilation 3, padding 1: positions -1 and 2): -inf, as PyTorch, and no
 * gradient (PyTorch records an index outside x there). */
Test(pool, max_window_outside_x_gives_minus_inf)
{
    tg_tensor *x = th_vec(TG_F64, 2, (double[]){1, 2}, "x", true), *x3 = NULL, *y = NULL;
    OK(tg_reshape(&x3, x, 3, (int64_t[]){1, 1, 2}));
    tg_pool_params p = TG_POOL_PARAMS_INIT;
    tg_pool_params_set(&p, 2, 1, 1);
    p.dilation[0] = 3;
    OK(tg_max_pool(&y, x3, 1, &p));
    th_expect_shape(y, 3, (int64_t[]){1, 1, 1});
    cr_assert(th_at(y, 0) == -INFINITY);
    OK(tg_backward(y, NULL, NULL));
    cr_assert(eq(dbl, th_at(tg_tensor_grad(x), 0), 0.0));
    cr_assert(eq(dbl, th_at(tg_tensor_grad(x), 1), 0.0));
    th_release_all(3, (tg_tensor *[]){x, x3, y});
}

Test(pool, nearest_reads_o_over_s)
{
    tg_tensor *x = th_arange(TG_F32, 4, (int64_t[]){1, 1, 2, 3}), *y = NULL;
    OK(tg_upsample_nearest(&y, x, 2, (int64_t[]){2, 3}));
    th_expect_shape(y, 4, (int64_t[]){1, 1, 4, 9});
    for (int64_t h = 0; h < 4; h++)
        for (int64_t w = 0; w < 9; w++)
            cr_assert(eq(dbl, th_get(y, (int64_t[]){0, 0, h, w}), (double)(h / 2 * 3 + w / 3)));
    th_release_all(2, (tg_tensor *[]){x, y});
}

Test(pool, refusals_name_the_rule)
{
    tg_tensor *x = th_rand_uniform(TG_F32, 4, (int64_t[]){2, 3, 5, 4}, 1), *y = NULL;
    tg_pool_params p = TG_POOL_PARAMS_INIT;
    tg_pool_params_set(&p, 2, 0, 0);
    th_expect_refused(tg_avg_pool(&y, x, 4, &p), TG_EINVAL,
                      "avg_pool: n_spatial=4 must be 1, 2 or 3", y);
    th_expect_refused(tg_max_pool(&y, x, 0, &p), TG_EINVAL, "max_pool: n_spatial=0", y);
    th_expect_refused(tg_upsample_nearest(&y, x, 5, (int64_t[]){2, 2}), TG_EINVAL,
                      "upsample_nearest: n_spatial=5", y);
    th_expect_refused(tg_avg_pool(&y, x, 2, NULL), TG_EINVAL, "avg_pool2d: p must not be NULL", y);
    th_expect_refused(tg_upsample_nearest(&y, x, 2, NULL), TG_EINVAL, "scale must not be NULL", y);
    /* rank: n_spatial + 1 or + 2 */
    th_expect_refused(tg_max_pool(&y, x, 1, &p), TG_ESHAPE,
                      "max_pool1d: x has 4 dims; it must have 2 (C, S...) or 3 (B, C, S...)", y);
    th_expect_refused(tg_upsample_nearest(&y, x, 1, (int64_t[]){2}), TG_ESHAPE,
                      "upsample_nearest1d: x has 4 dims", y);

    tg_pool_params b = p;
    b.kernel[1] = 0;
    th_expect_refused(tg_avg_pool(&y, x, 2, &b), TG_EINVAL, "avg_pool2d: kernel[1]=0 must be >= 1",
                      y);
    b = p;
    b.stride[0] = -1;
    th_expect_refused(tg_max_pool(&y, x, 2, &b), TG_EINVAL, "stride[0]=-1 must be >= 1", y);
    b = p;
    tg_pool_params_set(&b, 3, 1, 2);
    th_expect_refused(tg_max_pool(&y, x, 2, &b), TG_EINVAL,
                      "max_pool2d: padding[0]=2 must be <= kernel[0]/2 = 1", y);
    b = p;
    b.padding[1] = -1;
    th_expect_refused(tg_avg_pool(&y, x, 2, &b), TG_EINVAL, "padding[1]=-1 must be >= 0", y);
    b = p;
    b.dilation[0] = 2;
    th_expect_refused(tg_avg_pool(&y, x, 2, &b), TG_EINVAL,
                      "avg_pool2d: dilation[0]=2: average pooling has no dilation", y);
    b.dilation[0] = 0;
    th_expect_refused(tg_max_pool(&y, x, 2, &b), TG_EINVAL, "dilation[0]=0 must be >= 1", y);
    b = p;
    b.kernel[0] = (int64_t)1 << 40;
    th_expect_refused(tg_max_pool(&y, x, 2, &b), TG_EINVAL, "must each be <= 2147483647", y);
    /* the output: kernel 6 on an extent of 5 */
    tg_pool_params_set(&b, 6, 1, 0);
    th_expect_refused(tg_avg_pool(&y, x, 2, &b), TG_EINVAL,
                      "avg_pool2d: spatial dim 0 of extent 5 gives an output extent of 0", y);
    tg_pool_params_set(&b, 2, 1, 0);
    b.dilation[1] = 4;
    th_expect_refused(tg_max_pool(&y, x, 2, &b), TG_EINVAL,
                      "spatial dim 1 of extent 4 gives an output extent of 0", y);
    th_expect_refused(tg_upsample_nearest(&y, x, 2, (int64_t[]){2, 0}), TG_EINVAL,
                      "upsample_nearest2d: scale[1]=0 must be an integer in [1, 2147483647]", y);
    th_expect_refused(tg_upsample_nearest(&y, x, 2, (int64_t[]){INT32_MAX, INT32_MAX}), TG_EINVAL,
                      "too large", y);
    th_expect_refused(tg_avg_pool(NULL, x, 2, &p), TG_EINVAL, "out must not be NULL", y);
    th_expect_refused(tg_max_pool(&y, NULL, 2, &p), TG_EINVAL, "x must not be NULL", y);

    /* non-float and empty inputs */
    tg_tensor *xi = NULL, *e = NULL;
    OK(tg_tensor_zeros(&xi, TG_I64, 4, (int64_t[]){2, 3, 5, 4}));
    th_expect_refused(tg_max_pool(&y, xi, 2, &p), TG_EDTYPE,
                      "max_pool2d: x has dtype i64; a float dtype is needed", y);
    th_expect_refused(tg_avg_pool(&y, xi, 2, &p), TG_EDTYPE, "a float dtype is needed", y);
    th_expect_refused(tg_upsample_nearest(&y, xi, 2, (int64_t[]){2, 2}), TG_EDTYPE,
                      "upsample_nearest2d: x has dtype i64", y);
    OK(tg_tensor_zeros(&e, TG_F32, 4, (int64_t[]){2, 3, 0, 4}));
    th_expect_refused(tg_avg_pool(&y, e, 2, &p), TG_ESHAPE,
                      "x's dim 2 has extent 0; every dim but the batch must be >= 1", y);
    th_release_all(3, (tg_tensor *[]){x, xi, e});

    int64_t o[3];
    cr_assert(eq(int, tg_pool_output_size(o, 1, (int64_t[]){0}, &p), TG_EINVAL));
    th_expect_in(tg_error_message(), "in[0]=0 must be >= 1");
    cr_assert(eq(int, tg_pool_output_size(o, 2, (int64_t[]){4, 4}, NULL), TG_EINVAL));
}

/* ---- modules ---- */

Test(pool, modules_run_the_ops)
{
    tg_pool_params p = TG_POOL_PARAMS_INIT;
    tg_pool_params_set(&p, 3, 2, 1);
    p.ceil_mode = true;
    p.count_include_pad = false;
    tg_tensor *x = th_rand_uniform(TG_F32, 5, (int64_t[]){2, 3, 5, 6, 7}, 8);
    for (int ns = 1; ns <= 3; ns++) {
        tg_tensor *xs = NULL;
        OK(tg_reshape(&xs, x, ns + 2, (int64_t[][5]){{6, 5, 42}, {6, 5, 6, 7}, {2, 3, 5, 6, 7}}[ns - 1]));
        tg_module *m[3] = {NULL};
        const int64_t scale[3] = {2, 1, 3};
        OK(tg_nn_avg_pool_new(&m[0], ns, &p));
        OK(tg_nn_max_pool_new(&m[1], ns, &p));
        OK(tg_nn_upsample_new(&m[2], ns, scale));
        const call calls[] = {{.k = AVG, .ns = ns, .p = p}, {.k = MAX, .ns = ns, .p = p},
                              {.k = UP, .ns = ns, .scale = {2, 1, 3}}};
        char want_name[3][16];
        snprintf(want_name[0], 16, "AvgPool%dd", ns);
        snprintf(want_name[1], 16, "MaxPool%dd", ns);
        snprintf(want_name[2], 16, "Upsample");
        for (int i = 0; i < 3; i++) {
            cr_assert(eq(str, (char *)tg_module_type_name(m[i]), want_name[i]));
            cr_assert(eq(int, tg_module_state_count(m[i]), 0));
            tg_tensor *ym = NULL, *yo = NULL;
            OK(tg_module_forward(m[i], &ym, xs));
            OK(run(&calls[i], &yo, xs));
            th_expect_same_bits(want_name[i], xs, ym, yo);
            th_release_all(2, (tg_tensor *[]){ym, yo});
        }
        /* introspection: what each was made with, strides resolved */
        int n = 0;
        tg_pool_params got;
        int64_t sc[3] = {0};
        OK(tg_nn_pool_params(m[1], &n, &got));
        cr_assert(eq(int, n, ns));
        cr_assert(got.stride[0] == 2 && got.ceil_mode && !got.count_include_pad);
        OK(tg_nn_upsample_params(m[2], &n, sc));
        cr_assert(eq(int, n, ns));
        for (int a = 0; a < ns; a++) cr_assert(eq(i64, sc[a], scale[a]));
        cr_assert(eq(int, tg_nn_pool_params(m[2], NULL, NULL), TG_EINVAL));
        th_expect_in(tg_error_message(), "m is a Upsample module, not AvgPoolNd or MaxPoolNd");
        cr_assert(eq(int, tg_nn_upsample_params(m[0], NULL, NULL), TG_EINVAL));
        for (int i = 0; i < 3; i++) tg_module_release(m[i]);
        tg_tensor_release(xs);
    }
    tg_tensor_release(x);

    /* a stride of 0 reads as the kernel */
    tg_module *m = NULL;
    tg_pool_params d = TG_POOL_PARAMS_INIT;
    tg_pool_params_set(&d, 2, 0, 0);
    OK(tg_nn_avg_pool_new(&m, 2, &d));
    OK(tg_nn_pool_params(m, NULL, &d));
    cr_assert(d.stride[0] == 2 && d.stride[1] == 2);
    tg_module_release(m);
    m = NULL;
    /* bad parameters are refused when the module is made */
    d.padding[0] = 2;
    cr_assert(eq(int, tg_nn_max_pool_new(&m, 2, &d), TG_EINVAL));
    th_expect_in(tg_error_message(), "nn_max_pool_new: padding[0]=2 must be <= kernel[0]/2 = 1");
    cr_assert(eq(int, tg_nn_avg_pool_new(&m, 0, &d), TG_EINVAL));
    cr_assert(eq(int, tg_nn_upsample_new(&m, 2, (int64_t[]){1, -2}), TG_EINVAL));
    th_expect_in(tg_error_message(), "nn_upsample_new: scale[1]=-2");
    cr_assert(m == NULL);
}

/* Upsample + Conv, the decoder stage that replaces a ConvTranspose, in a
 * Sequential with a pool: gradients reach the conv's weight. */
Test(pool, a_decoder_stage_trains)
{
    tg_rng rng;
    tg_rng_init(&rng, 2);
    tg_module *seq = NULL, *up = NULL, *conv = NULL, *pool = NULL;
    tg_conv_params cp = TG_CONV_PARAMS_INIT;
    tg_conv_params_set_padding(&cp, 1);
    tg_pool_params pp = TG_POOL_PARAMS_INIT;
    tg_pool_params_set(&pp, 2, 0, 0);
    OK(tg_nn_sequential_new(&seq));
    OK(tg_nn_upsample_new(&up, 2, (int64_t[]){2, 2}));
    OK(tg_nn_sequential_append(seq, up));
    OK(tg_nn_conv_new(&conv, 2, 3, 4, (int64_t[]){3, 3}, &cp, true, &rng));
    OK(tg_nn_sequential_append(seq, conv));
    OK(tg_nn_max_pool_new(&pool, 2, &pp));
    OK(tg_nn_sequential_append(seq, pool));
    tg_tensor *x = th_rand_uniform(TG_F32, 4, (int64_t[]){2, 3, 4, 4}, 3), *y = NULL, *s = NULL;
    OK(tg_module_forward(seq, &y, x));
    th_expect_shape(y, 4, (int64_t[]){2, 4, 4, 4});
    OK(tg_mean(&s, y));
    OK(tg_backward(s, NULL, NULL));
    const tg_tensor *gw = tg_tensor_grad(tg_module_find(seq, "1.weight"));
    cr_assert(gw != NULL);
    double norm = 0;
    for (int64_t i = 0; i < tg_tensor_numel(gw); i++) norm += fabs(th_at(gw, i));
    cr_assert(norm > 0);
    th_release_all(3, (tg_tensor *[]){x, y, s});
    tg_module_release(seq);
}
