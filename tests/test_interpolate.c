/* tests/test_interpolate.c - tg_upsample_linear, tg_upsample_bicubic and
 * the linear and bicubic Upsample modules against PyTorch's F.interpolate
 * and nn.Upsample (linear, bilinear, trilinear, bicubic; align_corners on
 * and off; larger, smaller and equal extents; f64, f32, bf16), values
 * worked by hand, the gradient's gradient as the forward, the module and
 * the refusals.  The invariants shared with the pooling ops (derivatives by
 * finite differences, adjoint, unbatched, half dtypes, threads, empty
 * batches): test_pool_invariants.c.
 * Goldens: scripts/make_interpolate_goldens.py. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

/* One call: linear or bicubic, over how many spatial dims, to what size,
 * with which corners; through the module (scale factors) when
 * scale[0] > 0. */
typedef struct call {
    bool cubic;
    int ns;
    int64_t size[3];
    bool align;
    int64_t scale[3];
} call;

static int run(const call *c, tg_tensor **y, tg_tensor *x)
{
    if (c->scale[0] == 0 && c->cubic) return tg_upsample_bicubic(y, x, c->size, c->align);
    if (c->scale[0] == 0) return tg_upsample_linear(y, x, c->ns, c->size, c->align);
    tg_module *m = NULL;
    int rc = c->cubic ? tg_nn_upsample_bicubic_new(&m, c->scale, c->align)
                      : tg_nn_upsample_linear_new(&m, c->ns, c->scale, c->align);
    if (rc == TG_OK) rc = tg_module_forward(m, y, x);
    tg_module_release(m);
    return rc;
}

static call call_of(const tg_st_file *f, const char *c)
{
    call r = {.cubic = strcmp(th_golden_meta(f, c, "mode"), "bicubic") == 0,
              .ns = atoi(th_golden_meta(f, c, "ns")),
              .align = atoi(th_golden_meta(f, c, "align_corners")) != 0};
    th_ints_of(th_golden_meta(f, c, "size"), r.size);
    char key[64];
    snprintf(key, sizeof key, "%s.scale", c);   /* made through the module */
    const char *scale = tg_st_meta_get(f, key);
    if (scale) th_ints_of(scale, r.scale);
    return r;
}

/* f64 and f32 within a few roundings of the largest value (the weights are
 * torch's, computed in the same dtype; the gradient's terms are added in
 * another order); bf16 within bf16's rounding (torch rounds its weights
 * and every partial sum to bf16, tapegrad computes in f32, rounding
 * once): 2 roundings' worth for linear, and for bicubic's 16 terms, whose
 * weights' magnitudes add up to more than 1, 1/8. */
static double tol_of(tg_dtype dt, bool cubic)
{
    return dt == TG_F64 ? 1e-14 : dt == TG_F32 ? 4e-7 : cubic ? 1.0 / 8 : 1.0 / 64;
}

/* A bf16 result within one bf16 rounding (2^-8 of the largest value, with
 * f32's sums) of the f64 interpolation of the same bf16 numbers. */
static void expect_rounded_once(const char *what, const tg_tensor *got, const tg_tensor *f64)
{
    tg_tensor *g64 = NULL;
    OK(tg_to_dtype(&g64, (tg_tensor *)got, TG_F64));
    th_expect_close_scaled(what, g64, f64, 1.0 / 256);
    tg_tensor_release(g64);
}

Test(interpolate, every_case_matches_torch)
{
    tg_st_file *f = th_golden_load("interpolate.safetensors");
    const int n = atoi(tg_st_meta_get(f, "cases"));
    int seen[4] = {0}, modules = 0, aligned = 0, cubic = 0, cubic_modules = 0;
    int rounded_once = 0;
    for (int i = 0; i < n; i++) {
        char c[16];
        snprintf(c, sizeof c, "case%d", i);
        const call k = call_of(f, c);
        seen[k.ns] += !k.cubic;
        cubic += k.cubic;
        modules += k.scale[0] > 0 && !k.cubic;
        cubic_modules += k.scale[0] > 0 && k.cubic;
        aligned += k.align;
        const tg_tensor *want = th_golden_get(f, c, "y");
        const double tol = tol_of(tg_tensor_dtype(want), k.cubic);
        tg_tensor *x = th_leaf_clone(th_golden_get(f, c, "x")), *y = NULL, *p = NULL, *s = NULL;
        OK(run(&k, &y, x));
        th_expect_close_scaled(c, y, want, tol);
        OK(tg_mul(&p, y, (tg_tensor *)th_golden_get(f, c, "grad_y")));
        OK(tg_sum(&s, p));
        OK(tg_backward(s, NULL, NULL));
        th_expect_close_scaled(c, tg_tensor_grad(x), th_golden_get(f, c, "grad_x"), tol);
        if (k.cubic && tg_tensor_dtype(want) == TG_BF16) {
            expect_rounded_once(c, y, th_golden_get(f, c, "y_f64"));
            expect_rounded_once(c, tg_tensor_grad(x), th_golden_get(f, c, "grad_x_f64"));
            rounded_once++;
        }
        th_release_all(4, (tg_tensor *[]){x, y, p, s});
    }
    cr_assert(seen[1] >= 4 && seen[2] >= 8 && seen[3] >= 4 && modules >= 4 && aligned >= 6 &&
                  cubic >= 10 && cubic_modules >= 3 && rounded_once >= 1,
              "golden has %d/%d/%d linear cases, %d modules, %d aligned, %d bicubic (%d "
              "modules)",
              seen[1], seen[2], seen[3], modules, aligned, cubic, cubic_modules);
    tg_st_free(f);
}

/* x = 0, 1, 2, 3 to 8: half-pixel centres r = (o + 1/2)/2 - 1/2, clamped
 * at 0, read 0, .25, .75, ... and the last index twice; with aligned
 * corners to 7, r = o/2. */
Test(upsample_linear, values_by_hand)
{
    tg_tensor *x = th_arange(TG_F64, 3, (int64_t[]){1, 1, 4}), *y = NULL, *ya = NULL;
    OK(tg_upsample_linear(&y, x, 1, (int64_t[]){8}, false));
    th_expect_shape(y, 3, (int64_t[]){1, 1, 8});
    const double want[8] = {0, 0.25, 0.75, 1.25, 1.75, 2.25, 2.75, 3};
    for (int i = 0; i < 8; i++) cr_assert(eq(dbl, th_at(y, i), want[i]), "y[%d]", i);
    OK(tg_upsample_linear(&ya, x, 1, (int64_t[]){7}, true));
    for (int i = 0; i < 7; i++) cr_assert(eq(dbl, th_at(ya, i), i / 2.0), "aligned y[%d]", i);
    /* bilinear: a 2x2 plane to 3x3 with aligned corners, the centre is the
     * mean of the four */
    tg_tensor *q = th_tensor_from(TG_F64, 4, (int64_t[]){1, 1, 2, 2}, (double[]){1, 2, 4, 8});
    tg_tensor *yq = NULL;
    OK(tg_upsample_linear(&yq, q, 2, (int64_t[]){3, 3}, true));
    const double wq[9] = {1, 1.5, 2, 2.5, 3.75, 5, 4, 6, 8};
    for (int i = 0; i < 9; i++) cr_assert(eq(dbl, th_at(yq, i), wq[i]), "yq[%d]", i);
    th_release_all(5, (tg_tensor *[]){x, y, ya, q, yq});
}

/* Keys's cubic convolution kernel, a = -0.75, at distance d < 2. */
static double keys(double d)
{
    const double a = -0.75;
    return d <= 1 ? ((a + 2) * d - (a + 3)) * d * d + 1 : ((a * d - 5 * a) * d + 8 * a) * d - 4 * a;
}

/* x = 0, 1, 2, 3 (one row) to 8: r = (o + 1/2)/2 - 1/2, not clamped at 0,
 * so output 0 (r = -1/4) reads x[-2..1] clamped, x[0] x[0] x[0] x[1], and
 * lies below every input; output 3 (r = 5/4) reads x[0..3].  With aligned
 * corners to 7, r = o/2: even outputs are the inputs. */
Test(upsample_bicubic, values_by_hand)
{
    tg_tensor *x = th_arange(TG_F64, 4, (int64_t[]){1, 1, 1, 4}), *y = NULL, *ya = NULL;
    OK(tg_upsample_bicubic(&y, x, (int64_t[]){1, 8}, false));
    th_expect_shape(y, 4, (int64_t[]){1, 1, 1, 8});
    const double y0 = keys(1.25), y3 = keys(0.25) + 2 * keys(0.75) + 3 * keys(1.75);
    cr_assert(y0 < 0);
    cr_assert(epsilon_eq(dbl, th_at(y, 0), y0, 1e-15), "y[0] = %.17g, want %.17g", th_at(y, 0),
              y0);
    cr_assert(epsilon_eq(dbl, th_at(y, 3), y3, 1e-15), "y[3] = %.17g, want %.17g", th_at(y, 3),
              y3);
    OK(tg_upsample_bicubic(&ya, x, (int64_t[]){1, 7}, true));
    for (int i = 0; i < 7; i += 2)
        cr_assert(eq(dbl, th_at(ya, i), i / 2.0), "aligned y[%d] = %.17g", i, th_at(ya, i));
    /* o = 1: r = 1/2 reads x[-1..2] clamped: x[0] x[0] x[1] x[2] */
    const double y1 = keys(0.5) + 2 * keys(1.5);
    cr_assert(epsilon_eq(dbl, th_at(ya, 1), y1, 1e-15), "aligned y[1] = %.17g, want %.17g",
              th_at(ya, 1), y1);
    th_release_all(3, (tg_tensor *[]){x, y, ya});
}

/* ---- the gradient's gradient ---- */

/* The gradient of the gradient (in g) is the forward again: with h = x,
 * d<A^T g, h>/dg = A x. */
static void check_double_backward_is_the_forward(bool cubic)
{
    tg_tensor *x = th_rand_uniform(TG_F64, 4, (int64_t[]){2, 3, 4, 5}, 4), *y = NULL;
    OK(tg_tensor_set_requires_grad(x, true));
    if (cubic) OK(tg_upsample_bicubic(&y, x, (int64_t[]){7, 9}, false));
    else OK(tg_upsample_linear(&y, x, 2, (int64_t[]){7, 9}, false));
    th_expect_double_backward_is_forward(x, y, 5);
    th_release_all(2, (tg_tensor *[]){x, y});
}

Test(upsample_linear, double_backward_is_the_forward)
{
    check_double_backward_is_the_forward(false);
}

Test(upsample_bicubic, double_backward_is_the_forward)
{
    check_double_backward_is_the_forward(true);
}

/* ---- the module ---- */

Test(upsample_linear, module_reports_its_mode)
{
    tg_module *lin = NULL, *near = NULL, *other = NULL;
    OK(tg_nn_upsample_linear_new(&lin, 2, (int64_t[]){2, 3}, true));
    OK(tg_nn_upsample_new(&near, 1, (int64_t[]){2}));
    OK(tg_nn_flatten_new(&other, 1, -1));
    cr_assert(eq(str, (char *)tg_module_type_name(lin), "Upsample"));
    tg_upsample_mode mode = TG_UPSAMPLE_NEAREST;
    bool align = false;
    int ns = 0;
    int64_t scale[3] = {0};
    OK(tg_nn_upsample_mode(lin, &mode, &align));
    cr_assert(mode == TG_UPSAMPLE_LINEAR && align);
    OK(tg_nn_upsample_params(lin, &ns, scale));
    cr_assert(ns == 2 && scale[0] == 2 && scale[1] == 3);
    OK(tg_nn_upsample_mode(near, &mode, &align));
    cr_assert(mode == TG_UPSAMPLE_NEAREST && !align);
    OK(tg_nn_upsample_mode(lin, NULL, NULL));
    cr_assert(eq(int, tg_nn_upsample_mode(other, &mode, NULL), TG_EINVAL));
    th_expect_in(tg_error_message(), "nn_upsample_mode: m is a Flatten module, not Upsample");
    cr_assert(eq(int, tg_nn_upsample_mode(NULL, &mode, NULL), TG_EINVAL));
    /* its forward: x (1, 2, 3, 4) -> (1, 2, 6, 12), the op's result */
    tg_tensor *x = th_rand_uniform(TG_F32, 4, (int64_t[]){1, 2, 3, 4}, 3), *y = NULL, *z = NULL;
    OK(tg_module_forward(lin, &y, x));
    OK(tg_upsample_linear(&z, x, 2, (int64_t[]){6, 12}, true));
    th_expect_same_bits("module", x, y, z);
    th_release_all(3, (tg_tensor *[]){x, y, z});
    tg_module_release(lin);
    tg_module_release(near);
    tg_module_release(other);
}

Test(upsample_linear, refusals_name_the_rule)
{
    tg_tensor *x = th_rand_uniform(TG_F32, 4, (int64_t[]){2, 3, 5, 4}, 1), *y = NULL;
    const int64_t sz[3] = {6, 6, 6};
    th_expect_refused(tg_upsample_linear(NULL, x, 2, sz, false), TG_EINVAL,
                      "upsample_bilinear2d: out must not be NULL", y);
    th_expect_refused(tg_upsample_linear(&y, NULL, 2, sz, false), TG_EINVAL,
                      "upsample_bilinear2d: x must not be NULL", y);
    th_expect_refused(tg_upsample_linear(&y, x, 4, sz, false), TG_EINVAL,
                      "upsample_linear: n_spatial=4 must be 1, 2 or 3", y);
    th_expect_refused(tg_upsample_linear(&y, x, 2, NULL, false), TG_EINVAL,
                      "upsample_bilinear2d: size must not be NULL", y);
    th_expect_refused(tg_upsample_linear(&y, x, 2, (int64_t[]){6, 0}, false), TG_EINVAL,
                      "upsample_bilinear2d: size[1]=0 must be in [1, 2147483647]", y);
    th_expect_refused(tg_upsample_linear(&y, x, 2, (int64_t[]){(int64_t)1 << 31, 2}, false),
                      TG_EINVAL, "size[0]=2147483648", y);
    th_expect_refused(tg_upsample_linear(&y, x, 1, sz, false), TG_ESHAPE,
                      "upsample_linear1d: x has 4 dims; it must have 2 (C, S...) or 3", y);
    tg_tensor *x2 = th_rand_uniform(TG_F32, 2, (int64_t[]){3, 4}, 2);
    th_expect_refused(tg_upsample_linear(&y, x2, 3, sz, true), TG_ESHAPE,
                      "upsample_trilinear3d: x has 2 dims; it must have 4 (C, S...) or 5", y);
    tg_tensor *xi = NULL;
    OK(tg_tensor_zeros(&xi, TG_I64, 4, (int64_t[]){2, 3, 5, 4}));
    th_expect_refused(tg_upsample_linear(&y, xi, 2, sz, false), TG_EDTYPE,
                      "upsample_bilinear2d: x has dtype i64; a float dtype is needed", y);
    tg_tensor *x0 = NULL;
    OK(tg_tensor_zeros(&x0, TG_F32, 4, (int64_t[]){2, 0, 5, 4}));
    th_expect_refused(tg_upsample_linear(&y, x0, 2, sz, false), TG_ESHAPE,
                      "x's dim 1 has extent 0", y);
    /* the module */
    tg_module *m = NULL;
    cr_assert(eq(int, tg_nn_upsample_linear_new(&m, 2, (int64_t[]){2, 0}, false), TG_EINVAL));
    th_expect_in(tg_error_message(), "nn_upsample_linear_new: scale[1]=0");
    cr_assert(m == NULL);
    cr_assert(eq(int, tg_nn_upsample_linear_new(NULL, 2, (int64_t[]){2, 2}, false), TG_EINVAL));
    cr_assert(eq(int, tg_nn_upsample_linear_new(&m, 0, (int64_t[]){2, 2}, false), TG_EINVAL));
    OK(tg_nn_upsample_linear_new(&m, 1, (int64_t[]){2}, false));
    th_expect_refused(tg_module_forward(m, &y, x), TG_ESHAPE,
                      "upsample_linear1d: x has 4 dims; it must have 2 (C, S...) or 3", y);
    tg_module_release(m);
    OK(tg_nn_upsample_linear_new(&m, 2, (int64_t[]){(int64_t)1 << 30, 1}, false));
    th_expect_refused(tg_module_forward(m, &y, x), TG_EINVAL,
                      "upsample_bilinear2d: spatial dim 0 of extent 5 times scale 1073741824", y);
    tg_module_release(m);
    th_release_all(4, (tg_tensor *[]){x, x2, xi, x0});
}

Test(upsample_bicubic, module_runs_the_op_and_reports_its_mode)
{
    tg_module *m = NULL;
    OK(tg_nn_upsample_bicubic_new(&m, (int64_t[]){2, 3}, false));
    cr_assert(eq(str, (char *)tg_module_type_name(m), "Upsample"));
    tg_upsample_mode mode = TG_UPSAMPLE_NEAREST;
    bool align = true;
    int ns = 0;
    int64_t scale[3] = {0};
    OK(tg_nn_upsample_mode(m, &mode, &align));
    cr_assert(mode == TG_UPSAMPLE_BICUBIC && !align);
    OK(tg_nn_upsample_params(m, &ns, scale));
    cr_assert(ns == 2 && scale[0] == 2 && scale[1] == 3);
    /* unbatched (C, H, W) as well as (B, C, H, W) */
    tg_tensor *x = th_rand_uniform(TG_F32, 3, (int64_t[]){2, 3, 4}, 3), *y = NULL, *z = NULL;
    OK(tg_module_forward(m, &y, x));
    OK(tg_upsample_bicubic(&z, x, (int64_t[]){6, 12}, false));
    th_expect_shape(y, 3, (int64_t[]){2, 6, 12});
    th_expect_same_bits("module", x, y, z);
    th_release_all(3, (tg_tensor *[]){x, y, z});
    tg_module_release(m);
}

Test(upsample_bicubic, refusals_name_the_rule)
{
    tg_tensor *x = th_rand_uniform(TG_F32, 4, (int64_t[]){2, 3, 5, 4}, 1), *y = NULL;
    const int64_t sz[2] = {6, 6};
    th_expect_refused(tg_upsample_bicubic(NULL, x, sz, false), TG_EINVAL,
                      "upsample_bicubic2d: out must not be NULL", y);
    th_expect_refused(tg_upsample_bicubic(&y, NULL, sz, false), TG_EINVAL,
                      "upsample_bicubic2d: x must not be NULL", y);
    th_expect_refused(tg_upsample_bicubic(&y, x, NULL, false), TG_EINVAL,
                      "upsample_bicubic2d: size must not be NULL", y);
    th_expect_refused(tg_upsample_bicubic(&y, x, (int64_t[]){0, 6}, false), TG_EINVAL,
                      "upsample_bicubic2d: size[0]=0 must be in [1, 2147483647]", y);
    tg_tensor *x5 = th_rand_uniform(TG_F32, 5, (int64_t[]){1, 2, 3, 4, 5}, 2);
    th_expect_refused(tg_upsample_bicubic(&y, x5, sz, false), TG_ESHAPE,
                      "upsample_bicubic2d: x has 5 dims; it must have 3 (C, S...) or 4", y);
    tg_tensor *xi = NULL;
    OK(tg_tensor_zeros(&xi, TG_I32, 4, (int64_t[]){2, 3, 5, 4}));
    th_expect_refused(tg_upsample_bicubic(&y, xi, sz, false), TG_EDTYPE,
                      "upsample_bicubic2d: x has dtype i32; a float dtype is needed", y);
    tg_module *m = NULL;
    cr_assert(eq(int, tg_nn_upsample_bicubic_new(&m, (int64_t[]){2, 0}, true), TG_EINVAL));
    th_expect_in(tg_error_message(), "nn_upsample_bicubic_new: scale[1]=0");
    cr_assert(m == NULL);
    cr_assert(eq(int, tg_nn_upsample_bicubic_new(NULL, (int64_t[]){2, 2}, true), TG_EINVAL));
    cr_assert(eq(int, tg_nn_upsample_bicubic_new(&m, NULL, true), TG_EINVAL));
    cr_assert(m == NULL);
    th_release_all(3, (tg_tensor *[]){x, x5, xi});
}
