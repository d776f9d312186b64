/* tests/test_masked_fill.c - tg_masked_fill against PyTorch's
 * Tensor.masked_fill and its gradient (f32, f64, bf16; a mask and an x
 * that broadcast either way, 0-d and empty tensors, NaN/inf/-0.0 in x and
 * as the value), gradcheck and gradgradcheck in f64, masks of any dtype and
 * the refusals; integer x (i8, u8, i32, i64) filled and refused as torch's.
 * Goldens: scripts/make_masked_fill_goldens.py. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

/* y moves values: torch's bits.  dx is g where the mask is 0, torch's bits
 * when y has x's shape; summed back over broadcast dims, within a rounding
 * of the dtype (torch and tapegrad may add in another order). */
Test(masked_fill, every_case_matches_torch)
{
    tg_st_file *f = th_golden_load("masked_fill.safetensors");
    const int n = atoi(tg_st_meta_get(f, "cases"));
    int per_dtype[3] = {0}, summed = 0, larger_mask = 0;
    for (int i = 0; i < n; i++) {
        char c[16], what[96];
        snprintf(c, sizeof c, "case%d", i);
        const char *dt = th_golden_meta(f, c, "dtype");
        const double value = strtod(th_golden_meta(f, c, "value"), NULL);
        tg_tensor *x = th_leaf_clone(th_golden_get(f, c, "x")), *y = NULL, *dx = NULL;
        tg_tensor *mask = (tg_tensor *)th_golden_get(f, c, "mask");
        snprintf(what, sizeof what, "%s (%s, %d-d x, %d-d mask, value %s)", c, dt,
                 tg_tensor_ndim(x), tg_tensor_ndim(mask), th_golden_meta(f, c, "value"));
        OK(tg_masked_fill(&y, x, mask, value));
        th_expect_close(what, y, th_golden_get(f, c, "y"), 0);
        tg_tensor *g = (tg_tensor *)th_golden_get(f, c, "g");
        OK(tg_grad(&dx, 1, &y, &g, 1, &x, NULL));
        const int k = !strcmp(dt, "f64") ? 0 : !strcmp(dt, "f32") ? 1 : 2;
        const double sum_rtol[3] = {1e-15, 1e-7, 1.0 / 256};
        const bool sum = !tg_tensor_same_shape(x, y);
        th_expect_close(what, dx, th_golden_get(f, c, "dx"), sum ? sum_rtol[k] : 0);
        per_dtype[k]++;
        summed += sum;
        larger_mask += tg_tensor_ndim(mask) > tg_tensor_ndim(x);
        th_release_all(3, (tg_tensor *[]){x, y, dx});
    }
    for (int d = 0; d < 3; d++)
        cr_assert(per_dtype[d] == 49, "dtype %d: %d cases", d, per_dtype[d]);
    cr_assert(summed == 63 && larger_mask == 42, "%d summed, %d larger masks", summed,
              larger_mask);
    tg_st_free(f);
}

static int fill_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    return tg_masked_fill(out, in[0], (tg_tensor *)user, 0.5);
}

/* Mask (3, 1) against x (2, 1, 4): y is (2, 3, 4), dx summed back. */
Test(masked_fill, gradcheck_and_gradgradcheck)
{
    uint64_t s = 61;
    tg_tensor *x = th_rand_tensor(&s, TG_F64, 3, (int64_t[]){2, 1, 4}, -3, 3), *m = NULL;
    OK(tg_tensor_from_data(&m, TG_U8, 2, (int64_t[]){3, 1}, (uint8_t[]){1, 0, 1}));
    OK(tg_tensor_set_requires_grad(x, true));
    tg_gradcheck_opts o = TG_GRADCHECK_OPTS_INIT;
    cr_assert(eq(int, tg_gradcheck(fill_fn, m, 1, &x, &o), TG_OK), "%s", tg_error_message());
    cr_assert(eq(int, tg_gradgradcheck(fill_fn, m, 1, &x, &o), TG_OK), "%s",
              tg_error_message());
    th_release_all(2, (tg_tensor *[]){x, m});
}

/* A mask of any dtype fills where it is nonzero (NaN too, -0.0 not), and
 * gets no gradient even when it asks for one. */
Test(masked_fill, masks_of_any_dtype)
{
    tg_tensor *x = th_arange(TG_F32, 1, (int64_t[]){5}), *y = NULL, *dm = NULL;
    const float mv[] = {0.0f, 2.5f, -0.0f, NAN, -1.0f};
    const double want[] = {0, 7, 2, 7, 7};
    tg_tensor *m = NULL, *mi = NULL;
    OK(tg_tensor_from_data(&m, TG_F32, 1, (int64_t[]){5}, mv));
    OK(tg_tensor_set_requires_grad(m, true));
    OK(tg_masked_fill(&y, x, m, 7.0));
    for (int i = 0; i < 5; i++) cr_assert(eq(dbl, th_at(y, i), want[i]), "element %d", i);
    tg_tensor_release(y);
    y = NULL;
    OK(tg_tensor_from_data(&mi, TG_I64, 1, (int64_t[]){5}, (int64_t[]){0, -3, 0, 1, 0}));
    OK(tg_masked_fill(&y, x, mi, -1.0));
    const double want_i[] = {0, -1, 2, -1, 4};
    for (int i = 0; i < 5; i++) cr_assert(eq(dbl, th_at(y, i), want_i[i]), "element %d", i);
    tg_tensor_release(y);
    y = NULL;
    OK(tg_tensor_set_requires_grad(x, true));
    OK(tg_masked_fill(&y, x, m, 7.0));
    tg_tensor *s = NULL;
    OK(tg_sum(&s, y));
    OK(tg_backward(s, NULL, NULL));
    cr_assert(tg_tensor_grad(m) == NULL, "the mask got a gradient");
    dm = tg_tensor_grad(x);
    cr_assert(dm != NULL, "x got no gradient");
    const double dwant[] = {1, 0, 1, 0, 0};
    for (int i = 0; i < 5; i++) cr_assert(eq(dbl, th_at(dm, i), dwant[i]), "dx %d", i);
    th_release_all(5, (tg_tensor *[]){x, y, m, mi, s});
}

Test(masked_fill, refusals_name_the_argument)
{
    tg_tensor *x = th_arange(TG_F32, 2, (int64_t[]){2, 3}), *m = NULL, *z = NULL;
    OK(tg_tensor_zeros(&m, TG_U8, 1, (int64_t[]){2}));
    th_expect_refused(tg_masked_fill(NULL, x, m, 0), TG_EINVAL, "out must not be NULL", NULL);
    th_expect_refused(tg_masked_fill(&z, NULL, m, 0), TG_EINVAL, "x must not be NULL", z);
    th_expect_refused(tg_masked_fill(&z, x, NULL, 0), TG_EINVAL, "mask must not be NULL", z);
    th_expect_refused(tg_masked_fill(&z, x, m, 0), TG_ESHAPE, "where", z);
    th_expect_refused(tg_masked_fill(&z, x, m, 1e300), TG_EINVAL,
                      "value 1e+300 cannot be converted to x's dtype f32", z);
    th_release_all(2, (tg_tensor *[]){x, m});
}

/* An integer x: y has x's dtype and torch's bytes (the value truncated
 * toward zero, an i64 beyond 2^53 exact), is not recorded, and the all-true
 * and all-false masks fill everything and nothing. */
Test(masked_fill, integer_cases_match_torch)
{
    tg_st_file *f = th_golden_load("masked_fill.safetensors");
    const int n = atoi(tg_st_meta_get(f, "icases"));
    int per_dtype[4] = {0};
    for (int i = 0; i < n; i++) {
        char c[16], what[96];
        snprintf(c, sizeof c, "icase%d", i);
        const char *dt = th_golden_meta(f, c, "dtype");
        const double value = strtod(th_golden_meta(f, c, "value"), NULL);
        tg_tensor *x = (tg_tensor *)th_golden_get(f, c, "x"), *y = NULL;
        tg_tensor *mask = (tg_tensor *)th_golden_get(f, c, "mask");
        const tg_tensor *want = th_golden_get(f, c, "y");
        snprintf(what, sizeof what, "%s (%s, %d-d x, %d-d mask, value %s)", c, dt,
                 tg_tensor_ndim(x), tg_tensor_ndim(mask), th_golden_meta(f, c, "value"));
        OK(tg_masked_fill(&y, x, mask, value));
        th_expect_same_tensor_bytes(what, y, want);
        cr_assert(not(tg_tensor_requires_grad(y)), "%s: y requires grad", what);
        per_dtype[!strcmp(dt, "i8") ? 0 : !strcmp(dt, "u8") ? 1 : !strcmp(dt, "i32") ? 2 : 3]++;
        tg_tensor_release(y);
    }
    cr_assert(per_dtype[0] == 56 && per_dtype[1] == 42 && per_dtype[2] == 56 &&
                  per_dtype[3] == 56,
              "cases per dtype: %d %d %d %d", per_dtype[0], per_dtype[1], per_dtype[2],
              per_dtype[3]);
    tg_st_free(f);
}

/* Each value torch refuses for an integer dtype ("cannot be converted ...
 * without overflow") is TG_EINVAL naming the value, the dtype and its
 * range; so is 2^63 for i64, which torch 1.13 writes as INT64_MIN. */
Test(masked_fill, integer_overflow_is_refused_as_torch)
{
    tg_st_file *f = th_golden_load("masked_fill.safetensors");
    const int n = atoi(tg_st_meta_get(f, "refusals"));
    cr_assert(n == 29, "%d refusals", n);
    tg_tensor *m = th_tensor_from(TG_U8, 1, (int64_t[]){3}, (double[]){1, 0, 1}), *y = NULL;
    for (int i = 0; i < n; i++) {
        char c[16], words[96];
        snprintf(c, sizeof c, "refuse%d", i);
        const char *dt = th_golden_meta(f, c, "dtype");
        tg_dtype d;
        OK(tg_dtype_from_name(&d, dt));
        tg_tensor *x = th_arange(d, 1, (int64_t[]){3});
        const double value = strtod(th_golden_meta(f, c, "value"), NULL);
        snprintf(words, sizeof words, "cannot be converted to x's dtype %s without overflow", dt);
        th_expect_refused(tg_masked_fill(&y, x, m, value), TG_EINVAL, words, y);
        tg_tensor_release(x);
    }
    static const struct {
        tg_dtype dt;
        double v;
        const char *words;
    } edges[] = {
        {TG_I8, 128, "masked_fill: value 128 cannot be converted to x's dtype i8 without "
                     "overflow (range [-128, 127])"},
        {TG_I8, 127.5, "value 127.5 cannot be converted to x's dtype i8"},
        {TG_I8, -128.5, "value -128.5 cannot"},
        {TG_U8, 300, "value 300 cannot be converted to x's dtype u8 without overflow "
                     "(range [0, 255])"},
        {TG_U8, -1, "value -1 cannot be converted to x's dtype u8"},
        {TG_U8, -0.5, "value -0.5 cannot"},
        {TG_U8, 256, "value 256 cannot"},
        {TG_I32, 2147483648.0, "value 2147483648 cannot be converted to x's dtype i32 without "
                               "overflow (range [-2147483648, 2147483647])"},
        {TG_I32, -2147483648.5, "value -2147483648.5 cannot"},
        {TG_I64, 0x1p63, "value 9.223372036854776e+18 cannot be converted to x's dtype i64 "
                         "without overflow (range [-9223372036854775808, 9223372036854775807])"},
        {TG_I64, NAN, "value nan cannot be converted to x's dtype i64"},
        {TG_I32, INFINITY, "value inf cannot be converted to x's dtype i32"},
        {TG_I8, -INFINITY, "value -inf cannot be converted to x's dtype i8"},
    };
    for (size_t i = 0; i < sizeof edges / sizeof *edges; i++) {
        tg_tensor *x = th_arange(edges[i].dt, 1, (int64_t[]){3});
        th_expect_refused(tg_masked_fill(&y, x, m, edges[i].v), TG_EINVAL, edges[i].words, y);
        tg_tensor_release(x);
    }
    tg_tensor_release(m);
    tg_st_free(f);
}

/* The ends of each integer range are accepted and land exactly: 127 and
 * -128 into i8, 255 and -0.0 into u8, -2^63 into i64 (beyond 2^53); a
 * fraction inside the range truncates toward zero (-127.5 to -127, 254.75
 * to 254, 2.9 to 2). */
Test(masked_fill, integer_range_ends_are_filled)
{
    tg_tensor *m = th_tensor_from(TG_U8, 1, (int64_t[]){2}, (double[]){1, 0}), *y = NULL;
    static const struct {
        tg_dtype dt;
        double v, want;
    } cases[] = {
        {TG_I8, 127, 127},  {TG_I8, -128, -128}, {TG_I8, -127.5, -127}, {TG_U8, 255, 255},
        {TG_U8, -0.0, 0},   {TG_U8, 254.75, 254}, {TG_I32, 2.9, 2},       {TG_I32, -2.9, -2},
        {TG_I64, -0x1p63, -0x1p63},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        tg_tensor *x = th_arange(cases[i].dt, 1, (int64_t[]){2});
        OK(tg_masked_fill(&y, x, m, cases[i].v));
        cr_assert(eq(dbl, th_at(y, 0), cases[i].want), "%s %.17g", tg_dtype_name(cases[i].dt),
                  cases[i].v);
        cr_assert(eq(dbl, th_at(y, 1), 1.0));
        th_release_all(2, (tg_tensor *[]){x, y});
        y = NULL;
    }
    tg_tensor *x = th_arange(TG_I64, 1, (int64_t[]){2});
    OK(tg_masked_fill(&y, x, m, -0x1p63));
    cr_assert(eq(i64, ((const int64_t *)tg_tensor_cdata(y))[0], INT64_MIN));
    th_release_all(3, (tg_tensor *[]){x, y, m});
}
