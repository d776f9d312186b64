/* tests/test_interpolate_aa.c - tg_upsample_antialias and the antialiased
 * Upsample module against PyTorch's F.interpolate(..., antialias=True)
 * (bilinear and bicubic; align_corners on and off; shrinking by 2, 3 and
 * non-integer factors, enlarging, equal extents, extent 1; f64, f32, and
 * bf16 against the f64 interpolation of the same bf16 numbers), values
 * worked by hand, the gradient's gradient as the forward, the module and
 * the refusals.  The invariants shared with the other resampling ops
 * (derivatives by finite differences, adjoint, unbatched, half dtypes,
 * threads, empty batches): test_pool_invariants.c.
 * Goldens: scripts/make_interpolate_aa_goldens.py. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

/* The magnitudes of one output's normalised weights along an axis add up
 * to at most this (1 for the triangle; Keys's a = -0.5 has negative lobes
 * of at most 0.075 at two taps on either side of the centre). */
#define WSUM 1.3

/* Along an axis of extents in -> out: the inputs one output reads
 * (*terms, 2 ceil(support) + 1) and the outputs one input is read by
 * (*readers: the filter's width over the spacing of the centres, + 1). */
static void axis_counts(int64_t in, int64_t out, bool align, bool cubic, double *terms,
                        double *readers)
{
    const double scale = align ? (out > 1 ? (double)(in - 1) / (double)(out - 1) : 0)
                               : (double)in / (double)out;
    const double support = (cubic ? 2.0 : 1.0) * fmax(scale, 1.0);
    *terms = 2 * ceil(support) + 1;
    *readers = scale > 0 ? ceil(2 * support / scale) + 1 : (double)out;
}

static double max_abs(const tg_tensor *t)
{
    double m = 0;
    for (int64_t i = 0; i < tg_tensor_numel(t); i++) m = fmax(m, fabs(th_at(t, i)));
    return m;
}

/* |got - want| <= rel |want| + abs for each element. */
static void expect_within(const char *what, const tg_tensor *got, const tg_tensor *want,
                          double rel, double abs)
{
    th_expect_shape(got, tg_tensor_ndim(want), tg_tensor_shape(want));
    for (int64_t i = 0; i < tg_tensor_numel(want); i++) {
        const double g = th_at(got, i), w = th_at(want, i);
        cr_assert(fabs(g - w) <= rel * fabs(w) + abs, "%s[%lld]: %.17g, want %.17g (bound %.3g)",
                  what, (long long)i, g, w, rel * fabs(w) + abs);
    }
}

/* A case's bounds, from its extents.  A two-pass sum in a dtype of unit
 * roundoff u with n1 then n2 terms, the weights rounded too, is within
 * (n1 + n2 + 4) u sum |w1||w2||v| of the exact one: the forward's terms
 * are the inputs each output reads, the gradient's the outputs each input
 * is read by, with column sums of |w| up to readers * WSUM. */
typedef struct bounds {
    double fwd, bwd;   /* times u and max |x| or max |grad_y| */
} bounds;

static bounds bounds_of(const int64_t *in, const int64_t *size, bool align, bool cubic)
{
    double t0, r0, t1, r1;
    axis_counts(in[0], size[0], align, cubic, &t0, &r0);
    axis_counts(in[1], size[1], align, cubic, &t1, &r1);
    return (bounds){.fwd = (t0 + t1 + 4) * WSUM * WSUM,
                    .bwd = (r0 + r1 + 4) * r0 * r1 * WSUM * WSUM};
}

/* y and d sum(y * gy) / dx of x (a new leaf), in x's dtype. */
static void run_case(tg_upsample_mode mode, const int64_t *size, bool align, const tg_tensor *x0,
                     const tg_tensor *gy, tg_tensor **y, tg_tensor **gx)
{
    tg_tensor *x = th_leaf_clone(x0), *p = NULL, *s = NULL;
    OK(tg_upsample_antialias(y, x, mode, size, align));
    OK(tg_mul(&p, *y, (tg_tensor *)gy));
    OK(tg_sum(&s, p));
    OK(tg_backward(s, NULL, NULL));
    OK(tg_tensor_clone(gx, tg_tensor_grad(x)));
    th_release_all(3, (tg_tensor *[]){x, p, s});
}

static tg_tensor *as(const tg_tensor *t, tg_dtype dt)
{
    tg_tensor *r = NULL;
    OK(tg_tensor_to_dtype(&r, (tg_tensor *)t, dt));
    return r;
}

/* bf16 is computed in f32 and rounded once: within bf16's unit roundoff
 * 2^-8 of the f64 interpolation of the same bf16 numbers, plus f32's
 * rounding (u = 2^-24) of the sums. */
static void check_bf16(const tg_st_file *f, const char *c, tg_upsample_mode mode,
                       const int64_t *size, bool align, bounds b)
{
    tg_tensor *xb = as(th_golden_get(f, c, "x_bf16"), TG_BF16);
    tg_tensor *gb = as(th_golden_get(f, c, "grad_y_bf16"), TG_BF16), *y = NULL, *gx = NULL;
    run_case(mode, size, align, xb, gb, &y, &gx);
    cr_assert(tg_tensor_dtype(y) == TG_BF16 && tg_tensor_dtype(gx) == TG_BF16);
    const double u = ldexp(1.0, -24), r = ldexp(1.0, -8);
    expect_within(c, y, th_golden_get(f, c, "y_bf16"), r, b.fwd * u * max_abs(xb) * (1 + r));
    expect_within(c, gx, th_golden_get(f, c, "grad_x_bf16"), r, b.bwd * u * max_abs(gb) * (1 + r));
    th_release_all(4, (tg_tensor *[]){xb, gb, y, gx});
}

Test(interpolate_aa, every_case_matches_torch)
{
    tg_st_file *f = th_golden_load("interpolate_aa.safetensors");
    const int n = atoi(tg_st_meta_get(f, "cases"));
    int cubic = 0, aligned = 0, f32 = 0, bf16 = 0, down = 0, up = 0;
    for (int i = 0; i < n; i++) {
        char c[16], key[32];
        snprintf(c, sizeof c, "case%d", i);
        const bool cub = strcmp(th_golden_meta(f, c, "mode"), "bicubic") == 0;
        const tg_upsample_mode mode = cub ? TG_UPSAMPLE_BICUBIC : TG_UPSAMPLE_LINEAR;
        const bool align = atoi(th_golden_meta(f, c, "align_corners")) != 0;
        int64_t size[2];
        th_ints_of(th_golden_meta(f, c, "size"), size);
        const tg_tensor *x = th_golden_get(f, c, "x"), *gy = th_golden_get(f, c, "grad_y");
        const int64_t *in = tg_tensor_shape(x) + 2;
        const bounds b = bounds_of(in, size, align, cub);
        tg_tensor *y = NULL, *gx = NULL;
        run_case(mode, size, align, x, gy, &y, &gx);
        /* f64 within f64's roundings; f32 within two f32 sums' (torch's and
         * tapegrad's, the same terms in other orders) */
        const bool is32 = tg_tensor_dtype(x) == TG_F32;
        const double u = is32 ? 2 * ldexp(1.0, -24) : ldexp(1.0, -53);
        expect_within(c, y, th_golden_get(f, c, "y"), 0, b.fwd * u * max_abs(x));
        expect_within(c, gx, th_golden_get(f, c, "grad_x"), 0, b.bwd * u * max_abs(gy));
        snprintf(key, sizeof key, "%s.bf16", c);
        if (tg_st_meta_get(f, key)) {
            check_bf16(f, c, mode, size, align, b);
            bf16++;
        }
        cubic += cub;
        aligned += align;
        f32 += is32;
        down += size[0] < in[0] || size[1] < in[1];
        up += size[0] > in[0] && size[1] > in[1];
        th_release_all(2, (tg_tensor *[]){y, gx});
    }
    cr_assert(n >= 30 && cubic >= 15 && aligned >= 10 && f32 >= 6 && bf16 >= 6 && down >= 20 &&
                  up >= 4,
              "golden has %d cases: %d bicubic, %d aligned, %d f32, %d bf16, %d down, %d up", n,
              cubic, aligned, f32, bf16, down, up);
    tg_st_free(f);
}

/* x = 0 .. 7 (one row) to 4: scale 2, the triangle 2 wide, centres
 * c = 1, 3, 5, 7.  Output 0 reads x[0..2] with weights f((i + 1/2 - 1)/2)
 * = 3/4, 3/4, 1/4 (sum 7/4): 5/7; output 1 reads x[1..4] with 1/4, 3/4,
 * 3/4, 1/4 (sum 2): 5/2; output 3 reads x[5..7]: 44/7. */
Test(upsample_antialias, values_by_hand)
{
    tg_tensor *x = th_arange(TG_F64, 4, (int64_t[]){1, 1, 1, 8}), *y = NULL;
    OK(tg_upsample_antialias(&y, x, TG_UPSAMPLE_LINEAR, (int64_t[]){1, 4}, false));
    th_expect_shape(y, 4, (int64_t[]){1, 1, 1, 4});
    const double want[4] = {5.0 / 7, 2.5, 4.5, 44.0 / 7};
    for (int i = 0; i < 4; i++)
        cr_assert(epsilon_eq(dbl, th_at(y, i), want[i], 1e-15), "y[%d] = %.17g, want %.17g", i,
                  th_at(y, i), want[i]);
    th_release_all(2, (tg_tensor *[]){x, y});
}

/* The weights of each output add up to 1: a constant plane stays that
 * constant, shrunk or enlarged, with either filter and either corners. */
Test(upsample_antialias, constant_stays_constant)
{
    tg_tensor *x = NULL;
    OK(tg_tensor_full(&x, TG_F64, 4, (int64_t[]){1, 2, 11, 7}, 3.25));
    const int64_t sizes[3][2] = {{3, 2}, {1, 1}, {17, 9}};
    for (int m = 0; m < 2; m++)
        for (int s = 0; s < 3; s++)
            for (int a = 0; a < 2; a++) {
                tg_tensor *y = NULL;
                OK(tg_upsample_antialias(&y, x, m ? TG_UPSAMPLE_BICUBIC : TG_UPSAMPLE_LINEAR,
                                         sizes[s], a));
                for (int64_t i = 0; i < tg_tensor_numel(y); i++)
                    cr_assert(epsilon_eq(dbl, th_at(y, i), 3.25, 1e-14),
                              "mode %d size %d align %d: y[%lld] = %.17g", m, s, a,
                              (long long)i, th_at(y, i));
                tg_tensor_release(y);
            }
    tg_tensor_release(x);
}

/* Enlarging with the triangle and align_corners off is plain bilinear
 * interpolation (to rounding); the cubic (a = -0.5) is not plain bicubic
 * (a = -0.75). */
Test(upsample_antialias, enlarging_bilinear_is_plain_bilinear)
{
    tg_tensor *x = th_rand_uniform(TG_F64, 4, (int64_t[]){2, 2, 4, 5}, 3);
    tg_tensor *a = NULL, *b = NULL, *c = NULL, *d = NULL;
    const int64_t size[2] = {9, 13};
    OK(tg_upsample_antialias(&a, x, TG_UPSAMPLE_LINEAR, size, false));
    OK(tg_upsample_linear(&b, x, 2, size, false));
    th_expect_close_scaled("bilinear", a, b, 1e-15);
    OK(tg_upsample_antialias(&c, x, TG_UPSAMPLE_BICUBIC, size, false));
    OK(tg_upsample_bicubic(&d, x, size, false));
    double diff = 0;
    for (int64_t i = 0; i < tg_tensor_numel(c); i++)
        diff = fmax(diff, fabs(th_at(c, i) - th_at(d, i)));
    cr_assert(diff > 1e-3, "bicubic: antialiased and plain differ by %g", diff);
    th_release_all(5, (tg_tensor *[]){x, a, b, c, d});
}

/* The gradient of the gradient (in g) is the forward again: with h = x,
 * d<A^T g, h>/dg = A x. */
Test(upsample_antialias, double_backward_is_the_forward)
{
    for (int m = 0; m < 2; m++) {
        tg_tensor *x = th_rand_uniform(TG_F64, 4, (int64_t[]){2, 3, 9, 5}, 4), *y = NULL;
        OK(tg_tensor_set_requires_grad(x, true));
        OK(tg_upsample_antialias(&y, x, m ? TG_UPSAMPLE_BICUBIC : TG_UPSAMPLE_LINEAR,
                                 (int64_t[]){4, 7}, m == 1));
        th_expect_double_backward_is_forward(x, y, 5);
        th_release_all(2, (tg_tensor *[]){x, y});
    }
}

/* ---- the module ---- */

Test(upsample_antialias, module_runs_the_op_and_reports_its_mode)
{
    tg_module *m = NULL, *plain = NULL, *other = NULL;
    OK(tg_nn_upsample_antialias_new(&m, TG_UPSAMPLE_BICUBIC, (int64_t[]){2, 3}, true));
    OK(tg_nn_upsample_bicubic_new(&plain, (int64_t[]){2, 3}, true));
    OK(tg_nn_flatten_new(&other, 1, -1));
    cr_assert(eq(str, (char *)tg_module_type_name(m), "Upsample"));
    tg_upsample_mode mode = TG_UPSAMPLE_NEAREST;
    bool align = false, aa = false;
    int ns = 0;
    int64_t scale[3] = {0};
    OK(tg_nn_upsample_mode(m, &mode, &align));
    OK(tg_nn_upsample_antialias(m, &aa));
    cr_assert(mode == TG_UPSAMPLE_BICUBIC && align && aa);
    OK(tg_nn_upsample_params(m, &ns, scale));
    cr_assert(ns == 2 && scale[0] == 2 && scale[1] == 3);
    OK(tg_nn_upsample_antialias(plain, &aa));
    cr_assert(aa == false);
    OK(tg_nn_upsample_antialias(m, NULL));
    cr_assert(eq(int, tg_nn_upsample_antialias(other, &aa), TG_EINVAL));
    th_expect_in(tg_error_message(), "nn_upsample_antialias: m is a Flatten module, not Upsample");
    cr_assert(eq(int, tg_nn_upsample_antialias(NULL, &aa), TG_EINVAL));
    /* unbatched (C, H, W) as well as (B, C, H, W) */
    tg_tensor *x = th_rand_uniform(TG_F32, 3, (int64_t[]){2, 3, 4}, 3), *y = NULL, *z = NULL;
    OK(tg_module_forward(m, &y, x));
    OK(tg_upsample_antialias(&z, x, TG_UPSAMPLE_BICUBIC, (int64_t[]){6, 12}, true));
    th_expect_shape(y, 3, (int64_t[]){2, 6, 12});
    th_expect_same_bits("module", x, y, z);
    th_release_all(3, (tg_tensor *[]){x, y, z});
    tg_module_release(m);
    tg_module_release(plain);
    tg_module_release(other);
}

/* ---- refusals ---- */

Test(upsample_antialias, refusals_name_the_rule)
{
    tg_tensor *x = th_rand_uniform(TG_F32, 4, (int64_t[]){2, 3, 5, 4}, 1), *y = NULL;
    const int64_t sz[2] = {3, 2};
    const tg_upsample_mode L = TG_UPSAMPLE_LINEAR, C = TG_UPSAMPLE_BICUBIC;
    th_expect_refused(tg_upsample_antialias(&y, x, TG_UPSAMPLE_NEAREST, sz, false), TG_EINVAL,
                      "upsample_antialias: mode=0; antialias is only for bilinear", y);
    th_expect_refused(tg_upsample_antialias(&y, x, (tg_upsample_mode)7, sz, false), TG_EINVAL,
                      "upsample_antialias: mode=7", y);
    th_expect_refused(tg_upsample_antialias(NULL, x, L, sz, false), TG_EINVAL,
                      "upsample_bilinear2d_aa: out must not be NULL", y);
    th_expect_refused(tg_upsample_antialias(&y, NULL, C, sz, false), TG_EINVAL,
                      "upsample_bicubic2d_aa: x must not be NULL", y);
    th_expect_refused(tg_upsample_antialias(&y, x, C, NULL, false), TG_EINVAL,
                      "upsample_bicubic2d_aa: size must not be NULL", y);
    th_expect_refused(tg_upsample_antialias(&y, x, L, (int64_t[]){0, 6}, false), TG_EINVAL,
                      "upsample_bilinear2d_aa: size[0]=0 must be in [1, 2147483647]", y);
    tg_tensor *x5 = th_rand_uniform(TG_F32, 5, (int64_t[]){1, 2, 3, 4, 5}, 2);
    th_expect_refused(tg_upsample_antialias(&y, x5, L, sz, false), TG_ESHAPE,
                      "upsample_bilinear2d_aa: x has 5 dims; it must have 3 (C, S...) or 4", y);
    tg_tensor *xi = NULL, *x0 = NULL;
    OK(tg_tensor_zeros(&xi, TG_I32, 4, (int64_t[]){2, 3, 5, 4}));
    th_expect_refused(tg_upsample_antialias(&y, xi, C, sz, false), TG_EDTYPE,
                      "upsample_bicubic2d_aa: x has dtype i32; a float dtype is needed", y);
    OK(tg_tensor_zeros(&x0, TG_F32, 4, (int64_t[]){2, 3, 0, 4}));
    th_expect_refused(tg_upsample_antialias(&y, x0, C, sz, false), TG_ESHAPE,
                      "x's dim 2 has extent 0", y);
    /* the first pass's buffer, 2^16 x (2^31 - 1) f32 elements, is more
     * than an address space */
    tg_tensor *xt = NULL;
    OK(tg_tensor_zeros(&xt, TG_F32, 4, (int64_t[]){1, 1, 1 << 16, 1}));
    th_expect_refused(tg_upsample_antialias(&y, xt, L, (int64_t[]){1, INT32_MAX}, false),
                      TG_ENOMEM, "upsample_bilinear2d_aa: no memory for the filter tables and "
                      "the first pass's 1 x 65536 x 2147483647 elements", y);
    tg_tensor_release(xt);
    tg_module *m = NULL;
    cr_assert(eq(int, tg_nn_upsample_antialias_new(&m, TG_UPSAMPLE_NEAREST, (int64_t[]){2, 2},
                                                   false),
                 TG_EINVAL));
    th_expect_in(tg_error_message(), "nn_upsample_antialias_new: mode=0; antialias is only for");
    cr_assert(eq(int, tg_nn_upsample_antialias_new(&m, L, (int64_t[]){2, 0}, true), TG_EINVAL));
    th_expect_in(tg_error_message(), "nn_upsample_antialias_new: scale[1]=0");
    cr_assert(eq(int, tg_nn_upsample_antialias_new(NULL, L, (int64_t[]){2, 2}, true), TG_EINVAL));
    cr_assert(eq(int, tg_nn_upsample_antialias_new(&m, C, NULL, true), TG_EINVAL));
    cr_assert(m == NULL);
    th_release_all(4, (tg_tensor *[]){x, x5, xi, x0});
}
