/* tests/test_flip.c - tg_flip: against torch.flip (one dim, several,
 * negative dims, none, 0-d, empty, 8-d, integers), the index rule by hand on
 * a non-contiguous x, flip twice is x, derivatives to second order by
 * finite differences, and the refusals.
 * Goldens: scripts/make_flip_goldens.py. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

Test(flip, every_case_matches_torch)
{
    tg_st_file *f = th_golden_load("flip.safetensors");
    const int n = atoi(tg_st_meta_get(f, "cases"));
    int ints = 0;
    for (int i = 0; i < n; i++) {
        char c[16];
        snprintf(c, sizeof c, "case%d", i);
        const char *ds = th_golden_meta(f, c, "dims");
        int64_t d64[TG_MAX_DIMS] = {0};
        th_ints_of(ds, d64);
        int dims[TG_MAX_DIMS], nd = 0;
        for (const char *p = ds; *p; p++) nd += *p == ',';
        nd = *ds ? nd + 1 : 0;
        for (int k = 0; k < nd; k++) dims[k] = (int)d64[k];
        const tg_tensor *x = th_golden_get(f, c, "x");
        tg_tensor *y = NULL;
        OK(tg_flip(&y, (tg_tensor *)x, nd, dims));
        th_expect_same_bits(c, x, y, th_golden_get(f, c, "y"));
        ints += tg_tensor_dtype(y) == TG_I64;
        tg_tensor_release(y);
    }
    cr_assert(n >= 10 && ints >= 1, "golden has %d cases, %d of integers", n, ints);
    tg_st_free(f);
}

/* On a permuted (non-contiguous) x of 4 dims, flipping dims 0, 2 and -1:
 * y[a, b, c, d] = x[A-1-a, b, C-1-c, D-1-d]; flipping y again gives x. */
Test(flip, index_rule_by_hand_on_a_view_and_flip_twice_is_x)
{
    tg_tensor *base = th_arange(TG_F32, 4, (int64_t[]){3, 2, 4, 5}), *x = NULL, *y = NULL;
    tg_tensor *back = NULL;
    OK(tg_permute(&x, base, (int[]){2, 0, 3, 1}));   /* (4, 3, 5, 2) */
    const int dims[3] = {0, 2, -1};
    OK(tg_flip(&y, x, 3, dims));
    th_expect_shape(y, 4, (int64_t[]){4, 3, 5, 2});
    for (int64_t a = 0; a < 4; a++)
        for (int64_t b = 0; b < 3; b++)
            for (int64_t c = 0; c < 5; c++)
                for (int64_t d = 0; d < 2; d++)
                    cr_assert(eq(dbl, th_get(y, (int64_t[]){a, b, c, d}),
                                 th_get(x, (int64_t[]){3 - a, b, 4 - c, 1 - d})));
    OK(tg_flip(&back, y, 3, dims));
    th_expect_same_bits("flip twice", x, back, x);
    th_release_all(4, (tg_tensor *[]){base, x, y, back});
}

static int flip_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    const int *dims = user;
    return tg_flip(out, in[0], 2, dims);
}

Test(flip, gradcheck_and_gradgradcheck)
{
    uint64_t s = 41;
    tg_tensor *x = th_rand_tensor(&s, TG_F64, 3, (int64_t[]){2, 3, 4}, -1, 1);
    OK(tg_tensor_set_requires_grad(x, true));
    static const int dims[2] = {0, -1};
    tg_gradcheck_opts o = TG_GRADCHECK_OPTS_INIT;
    cr_assert(eq(int, tg_gradcheck(flip_fn, (void *)dims, 1, &x, &o), TG_OK), "%s",
              tg_error_message());
    cr_assert(eq(int, tg_gradgradcheck(flip_fn, (void *)dims, 1, &x, &o), TG_OK), "%s",
              tg_error_message());
    tg_tensor_release(x);
}

Test(flip, refusals_name_the_argument)
{
    tg_tensor *x = th_arange(TG_F32, 2, (int64_t[]){2, 3}), *y = NULL;
    th_expect_refused(tg_flip(&y, x, 1, (int[]){2}), TG_EINVAL, "dims[0]=2 is out of range", y);
    th_expect_refused(tg_flip(&y, x, 1, (int[]){-3}), TG_EINVAL, "expected [-2, 1]", y);
    th_expect_refused(tg_flip(&y, x, 2, (int[]){1, -1}), TG_EINVAL,
                      "dim 1 appears more than once", y);
    th_expect_refused(tg_flip(&y, x, 1, NULL), TG_EINVAL, "dims is NULL", y);
    th_expect_refused(tg_flip(&y, x, -1, (int[]){0}), TG_EINVAL, "ndims=-1", y);
    th_expect_refused(tg_flip(&y, x, 9, (int[]){0, 1, 0, 1, 0, 1, 0, 1, 0}), TG_EINVAL,
                      "ndims=9", y);
    th_expect_refused(tg_flip(&y, NULL, 1, (int[]){0}), TG_EINVAL, "x must not be NULL", y);
    cr_assert(eq(int, tg_flip(NULL, x, 1, (int[]){0}), TG_EINVAL));
    tg_tensor *s = th_arange(TG_F32, 0, NULL);
    th_expect_refused(tg_flip(&y, s, 1, (int[]){1}), TG_EINVAL, "expected [-1, 0]", y);
    th_release_all(2, (tg_tensor *[]){x, s});
}
