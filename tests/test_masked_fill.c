/* tests/test_masked_fill.c - tg_masked_fill against PyTorch's
 * Tensor.masked_fill and its gradient (f32, f64, bf16; a mask and an x
 * that broadcast either way, 0-d and empty tensors, NaN/inf/-0.0 in x and
 * as the value), gradcheck and gradgradcheck in f64, masks of any dtype and
 * the refusals.  Goldens: scripts/make_masked_fill_goldens.py. */
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
    tg_tensor *xi = th_arange(TG_I32, 1, (int64_t[]){3});
    OK(tg_tensor_zeros(&m, TG_U8, 1, (int64_t[]){2}));
    th_expect_refused(tg_masked_fill(NULL, x, m, 0), TG_EINVAL, "out must not be NULL", NULL);
    th_expect_refused(tg_masked_fill(&z, NULL, m, 0), TG_EINVAL, "x must not be NULL", z);
    th_expect_refused(tg_masked_fill(&z, x, NULL, 0), TG_EINVAL, "mask must not be NULL", z);
    th_expect_refused(tg_masked_fill(&z, xi, m, 0), TG_EDTYPE, "x has dtype i32", z);
    th_expect_refused(tg_masked_fill(&z, x, m, 0), TG_ESHAPE, "where", z);
    th_expect_refused(tg_masked_fill(&z, x, m, 1e300), TG_EINVAL,
                      "value 1e+300 cannot be converted to x's dtype f32", z);
    th_release_all(3, (tg_tensor *[]){x, m, xi});
}
