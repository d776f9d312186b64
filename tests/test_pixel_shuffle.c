/* tests/test_pixel_shuffle.c - tg_pixel_shuffle, tg_pixel_unshuffle and
 * their modules: against PyTorch's F.pixel_shuffle / F.pixel_unshuffle
 * (batched, unbatched, two leading dims, r = 1), the index rule by hand,
 * each the other's inverse, integer dtypes, derivatives to second order
 * by finite differences, and the refusals.
 * Goldens: scripts/make_pixel_shuffle_goldens.py. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

Test(pixel_shuffle, every_case_matches_torch)
{
    tg_st_file *f = th_golden_load("pixel_shuffle.safetensors");
    const int n = atoi(tg_st_meta_get(f, "cases"));
    int seen[2] = {0};
    for (int i = 0; i < n; i++) {
        char k[32];
        snprintf(k, sizeof k, "case%d.op", i);
        const bool un = strcmp(tg_st_meta_get(f, k), "unshuffle") == 0;
        snprintf(k, sizeof k, "case%d.r", i);
        const int64_t r = atoll(tg_st_meta_get(f, k));
        snprintf(k, sizeof k, "case%d.x", i);
        const tg_tensor *x = tg_st_get(f, k);
        snprintf(k, sizeof k, "case%d.y", i);
        const tg_tensor *want = tg_st_get(f, k);
        cr_assert(x && want, "case %d", i);
        tg_tensor *y = NULL;
        OK((un ? tg_pixel_unshuffle : tg_pixel_shuffle)(&y, (tg_tensor *)x, r));
        th_expect_same_bits(k, x, y, want);
        tg_tensor_release(y);
        seen[un]++;
    }
    cr_assert(seen[0] >= 3 && seen[1] >= 3, "golden has %d/%d cases", seen[0], seen[1]);
    tg_st_free(f);
}

/* Output channel c at (h*r + i, w*r + j) is input channel c*r*r + i*r + j
 * at (h, w), and unshuffle gives x back. */
Test(pixel_shuffle, index_rule_by_hand_and_inverse)
{
    const int64_t r = 3, C = 2, H = 2, W = 4;
    tg_tensor *x = th_arange(TG_F32, 4, (int64_t[]){2, C * r * r, H, W}), *y = NULL, *back = NULL;
    OK(tg_pixel_shuffle(&y, x, r));
    th_expect_shape(y, 4, (int64_t[]){2, C, H * r, W * r});
    for (int64_t b = 0; b < 2; b++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t oh = 0; oh < H * r; oh++)
                for (int64_t ow = 0; ow < W * r; ow++) {
                    const int64_t ic = c * r * r + (oh % r) * r + ow % r;
                    cr_assert(eq(dbl, th_get(y, (int64_t[]){b, c, oh, ow}),
                                 th_get(x, (int64_t[]){b, ic, oh / r, ow / r})));
                }
    OK(tg_pixel_unshuffle(&back, y, r));
    th_expect_same_bits("unshuffle(shuffle(x))", x, back, x);
    th_release_all(3, (tg_tensor *[]){x, y, back});
}

Test(pixel_shuffle, integer_dtypes_are_moved_as_they_are)
{
    tg_tensor *x = NULL, *y = NULL, *xf = th_arange(TG_F64, 3, (int64_t[]){4, 2, 3});
    tg_tensor *yf = NULL, *want = NULL;
    OK(tg_tensor_to_dtype(&x, xf, TG_I64));
    OK(tg_pixel_shuffle(&y, x, 2));
    cr_assert(eq(int, tg_tensor_dtype(y), TG_I64));
    OK(tg_pixel_shuffle(&yf, xf, 2));
    OK(tg_tensor_to_dtype(&want, yf, TG_I64));
    th_expect_same_bits("i64", x, y, want);
    th_release_all(5, (tg_tensor *[]){x, y, xf, yf, want});
}

static int shuffle_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    const bool un = *(const bool *)user;
    return un ? tg_pixel_unshuffle(out, in[0], 2) : tg_pixel_shuffle(out, in[0], 2);
}

Test(pixel_shuffle, first_and_second_derivatives_by_finite_differences)
{
    static const bool kinds[2] = {false, true};
    const int64_t shapes[2][5] = {{2, 8, 2, 3}, {2, 1, 2, 4, 6}};
    for (int k = 0; k < 2; k++) {
        tg_tensor *x = th_rand_uniform(TG_F64, 4 + k, shapes[k], 5 + k);
        OK(tg_tensor_set_requires_grad(x, true));
        tg_tensor *in[1] = {x};
        cr_assert(eq(int, tg_gradcheck(shuffle_fn, (void *)&kinds[k], 1, in, NULL), TG_OK), "%s",
                  tg_error_message());
        cr_assert(eq(int, tg_gradgradcheck(shuffle_fn, (void *)&kinds[k], 1, in, NULL), TG_OK),
                  "%s", tg_error_message());
        tg_tensor_release(x);
    }
}

Test(pixel_shuffle, modules_run_the_functions)
{
    tg_module *s = NULL, *u = NULL, *other = NULL;
    OK(tg_nn_pixel_shuffle_new(&s, 2));
    OK(tg_nn_pixel_unshuffle_new(&u, 2));
    cr_assert(eq(str, (char *)tg_module_type_name(s), "PixelShuffle"));
    cr_assert(eq(str, (char *)tg_module_type_name(u), "PixelUnshuffle"));
    int64_t r = 0;
    bool un = true;
    OK(tg_nn_pixel_shuffle_params(s, &r, &un));
    cr_assert(r == 2 && !un);
    OK(tg_nn_pixel_shuffle_params(u, &r, &un));
    cr_assert(r == 2 && un);
    OK(tg_nn_pixel_shuffle_params(u, NULL, NULL));
    tg_tensor *x = th_rand_uniform(TG_F32, 4, (int64_t[]){1, 4, 3, 2}, 1), *y = NULL, *z = NULL;
    tg_tensor *want = NULL;
    OK(tg_module_forward(s, &y, x));
    OK(tg_pixel_shuffle(&want, x, 2));
    th_expect_same_bits("PixelShuffle", x, y, want);
    OK(tg_module_forward(u, &z, y));
    th_expect_same_bits("PixelUnshuffle", x, z, x);
    OK(tg_nn_flatten_new(&other, 1, -1));
    cr_assert(eq(int, tg_nn_pixel_shuffle_params(other, &r, NULL), TG_EINVAL));
    th_expect_in(tg_error_message(), "m is a Flatten module, not PixelShuffle or PixelUnshuffle");
    cr_assert(eq(int, tg_nn_pixel_shuffle_params(NULL, &r, NULL), TG_EINVAL));
    tg_module *bad = NULL;
    cr_assert(eq(int, tg_nn_pixel_shuffle_new(&bad, 0), TG_EINVAL));
    th_expect_in(tg_error_message(), "nn_pixel_shuffle_new: r=0 must be in [1, 2^31]");
    cr_assert(bad == NULL);
    cr_assert(eq(int, tg_nn_pixel_unshuffle_new(NULL, 2), TG_EINVAL));
    th_release_all(4, (tg_tensor *[]){x, y, z, want});
    tg_module_release(s);
    tg_module_release(u);
    tg_module_release(other);
}

Test(pixel_shuffle, refusals_name_the_rule)
{
    tg_tensor *x = th_rand_uniform(TG_F32, 4, (int64_t[]){2, 6, 4, 5}, 1), *y = NULL;
    tg_tensor *x2 = th_rand_uniform(TG_F32, 2, (int64_t[]){4, 4}, 2);
    th_expect_refused(tg_pixel_shuffle(NULL, x, 2), TG_EINVAL,
                      "pixel_shuffle: out must not be NULL", y);
    th_expect_refused(tg_pixel_shuffle(&y, NULL, 2), TG_EINVAL, "pixel_shuffle: x must not be NULL",
                      y);
    th_expect_refused(tg_pixel_shuffle(&y, x, 0), TG_EINVAL,
                      "pixel_shuffle: r=0 must be in [1, 2^31]", y);
    th_expect_refused(tg_pixel_unshuffle(&y, x, -2), TG_EINVAL, "pixel_unshuffle: r=-2", y);
    th_expect_refused(tg_pixel_shuffle(&y, x2, 2), TG_ESHAPE,
                      "pixel_shuffle: x has 2 dims; it must have at least 3 (*, C, H, W)", y);
    th_expect_refused(tg_pixel_shuffle(&y, x, 2), TG_ESHAPE,
                      "pixel_shuffle: x has 6 channels (dim 1); they must be a multiple of r*r = 4",
                      y);
    th_expect_refused(tg_pixel_unshuffle(&y, x, 2), TG_ESHAPE,
                      "pixel_unshuffle: x's H=4 and W=5 must be multiples of r=2", y);
    th_release_all(2, (tg_tensor *[]){x, x2});
}
