/* tests/test_channel_shuffle.c - tg_channel_shuffle (F.channel_shuffle)
 * and nn.ChannelShuffle: against PyTorch (3-d to 5-d, groups 1 and C),
 * the index rule by hand, integer dtypes, derivatives to second order by
 * finite differences, the module and the refusals.
 * Goldens: scripts/make_nnsmall_goldens.py (tests/golden/nnsmall.safetensors). */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

Test(channel_shuffle, every_case_matches_torch)
{
    tg_st_file *f = th_golden_load("nnsmall.safetensors");
    const int n = atoi(tg_st_meta_get(f, "shuffle.cases"));
    cr_assert(n >= 5, "only %d cases", n);
    for (int i = 0; i < n; i++) {
        char c[32];
        snprintf(c, sizeof c, "shuffle%d", i);
        const int64_t g = atoll(th_golden_meta(f, c, "groups"));
        tg_tensor *x = (tg_tensor *)th_golden_get(f, c, "x"), *y = NULL;
        OK(tg_channel_shuffle(&y, x, g));
        th_expect_same_bits(c, x, y, th_golden_get(f, c, "y"));
        tg_tensor_release(y);
    }
    tg_st_free(f);
}

/* Output channel i * g + j is input channel j * (C / g) + i. */
Test(channel_shuffle, index_rule_by_hand_and_inverse)
{
    const int64_t N = 2, C = 12, L = 3, g = 3;
    tg_tensor *x = th_arange(TG_F32, 3, (int64_t[]){N, C, L}), *y = NULL, *back = NULL;
    OK(tg_channel_shuffle(&y, x, g));
    th_expect_shape(y, 3, (int64_t[]){N, C, L});
    for (int64_t n = 0; n < N; n++)
        for (int64_t i = 0; i < C / g; i++)
            for (int64_t j = 0; j < g; j++)
                for (int64_t l = 0; l < L; l++)
                    cr_assert(eq(dbl, th_get(y, (int64_t[]){n, i * g + j, l}),
                                 th_get(x, (int64_t[]){n, j * (C / g) + i, l})));
    /* shuffling by C / g groups undoes it */
    OK(tg_channel_shuffle(&back, y, C / g));
    th_expect_same_bits("inverse", x, back, x);
    th_release_all(3, (tg_tensor *[]){x, y, back});
}

Test(channel_shuffle, integer_dtypes_are_moved_as_they_are)
{
    tg_tensor *xf = th_arange(TG_F64, 4, (int64_t[]){2, 6, 2, 1}), *x = NULL, *y = NULL;
    tg_tensor *yf = NULL, *want = NULL;
    OK(tg_tensor_to_dtype(&x, xf, TG_I64));
    OK(tg_channel_shuffle(&y, x, 2));
    cr_assert(eq(int, tg_tensor_dtype(y), TG_I64));
    OK(tg_channel_shuffle(&yf, xf, 2));
    OK(tg_tensor_to_dtype(&want, yf, TG_I64));
    th_expect_same_bits("i64", x, y, want);
    th_release_all(5, (tg_tensor *[]){xf, x, y, yf, want});
}

static int shuffle_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    return tg_channel_shuffle(out, in[0], *(const int64_t *)user);
}

Test(channel_shuffle, first_and_second_derivatives_by_finite_differences)
{
    static const int64_t groups = 2;
    tg_tensor *x = th_rand_uniform(TG_F64, 4, (int64_t[]){2, 4, 2, 3}, 5);
    OK(tg_tensor_set_requires_grad(x, true));
    th_expect_gradchecks(shuffle_fn, (void *)&groups, 1, (tg_tensor *[]){x}, "groups 2");
    tg_tensor_release(x);
}

Test(channel_shuffle, module_runs_the_function)
{
    tg_module *m = NULL, *other = NULL, *bad = NULL;
    OK(tg_nn_channel_shuffle_new(&m, 3));
    cr_assert(eq(str, (char *)tg_module_type_name(m), "ChannelShuffle"));
    cr_assert(eq(int, tg_module_state_count(m), 0));
    int64_t g = 0;
    OK(tg_nn_channel_shuffle_params(m, &g));
    cr_assert(eq(i64, g, 3));
    tg_tensor *x = th_rand_uniform(TG_F32, 3, (int64_t[]){2, 6, 4}, 1), *y = NULL, *want = NULL;
    OK(tg_module_forward(m, &y, x));
    OK(tg_channel_shuffle(&want, x, 3));
    th_expect_same_bits("ChannelShuffle", x, y, want);
    OK(tg_nn_flatten_new(&other, 1, -1));
    cr_assert(eq(int, tg_nn_channel_shuffle_params(other, &g), TG_EINVAL));
    th_expect_in(tg_error_message(),
                 "nn_channel_shuffle_params: m is a Flatten module, not ChannelShuffle");
    cr_assert(eq(int, tg_nn_channel_shuffle_params(NULL, &g), TG_EINVAL));
    cr_assert(eq(int, tg_nn_channel_shuffle_new(&bad, 0), TG_EINVAL));
    th_expect_in(tg_error_message(), "nn_channel_shuffle_new: groups=0 must be positive");
    cr_assert(eq(int, tg_nn_channel_shuffle_new(NULL, 2), TG_EINVAL));
    cr_assert(bad == NULL);
    th_release_all(3, (tg_tensor *[]){x, y, want});
    tg_module_release(m);
    tg_module_release(other);
}

Test(channel_shuffle, refusals_name_the_rule)
{
    tg_tensor *x = th_rand_uniform(TG_F32, 3, (int64_t[]){2, 5, 3}, 1);
    tg_tensor *x2 = th_rand_uniform(TG_F32, 2, (int64_t[]){6, 3}, 2);
    th_expect_refused_clean(tg_channel_shuffle(NULL, x, 5), TG_EINVAL,
                            "channel_shuffle: out must not be NULL");
    th_expect_refused_clean(tg_channel_shuffle(out_, NULL, 5), TG_EINVAL,
                            "channel_shuffle: x must not be NULL");
    th_expect_refused_clean(tg_channel_shuffle(out_, x, 0), TG_EINVAL,
                            "channel_shuffle: groups=0 must be positive");
    th_expect_refused_clean(tg_channel_shuffle(out_, x, -2), TG_EINVAL,
                            "channel_shuffle: groups=-2 must be positive");
    th_expect_refused_clean(tg_channel_shuffle(out_, x2, 2), TG_ESHAPE,
                            "channel_shuffle: x has 2 dims; it must have at least 3 (N, C, *)");
    th_expect_refused_clean(tg_channel_shuffle(out_, x, 2), TG_ESHAPE,
                            "channel_shuffle: x has 5 channels (dim 1); they must be divisible "
                            "by groups=2");
    th_release_all(2, (tg_tensor *[]){x, x2});
}
