/* tests/test_roll.c - tg_roll against PyTorch's torch.roll and its
 * gradient (f32, f64, bf16; ranks 0 to 4, flattened and along every dim
 * from the front and from the end, shifts of either sign and beyond the
 * extent, several dims, a dim named twice, empty extents), gradcheck and
 * gradgradcheck in f64, views, integer dtypes and the refusals.
 * Goldens: scripts/make_roll_goldens.py. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

/* roll moves elements: values and gradients are torch's bit for bit. */
Test(roll, every_case_matches_torch)
{
    tg_st_file *f = th_golden_load("roll.safetensors");
    const int n = atoi(tg_st_meta_get(f, "cases"));
    int per_dtype[3] = {0}, flat = 0, empty = 0, ranks = 0;
    for (int i = 0; i < n; i++) {
        char c[16], what[96];
        snprintf(c, sizeof c, "case%d", i);
        const char *dt = th_golden_meta(f, c, "dtype");
        int dims[TG_MAX_DIMS];
        int64_t shifts[TG_MAX_DIMS];
        const int nd = th_dims_of(th_golden_meta(f, c, "dims"), dims);
        th_ints_of(th_golden_meta(f, c, "shifts"), shifts);
        tg_tensor *x = th_leaf_clone(th_golden_get(f, c, "x")), *y = NULL, *dx = NULL;
        snprintf(what, sizeof what, "%s (%s, %d-d, shifts %s, dims %s)", c, dt,
                 tg_tensor_ndim(x), th_golden_meta(f, c, "shifts"), th_golden_meta(f, c, "dims"));
        OK(tg_roll(&y, x, nd, shifts, nd > 0 ? dims : NULL));
        th_expect_close(what, y, th_golden_get(f, c, "y"), 0);
        tg_tensor *g = (tg_tensor *)th_golden_get(f, c, "g");
        OK(tg_grad(&dx, 1, &y, &g, 1, &x, NULL));
        th_expect_close(what, dx, th_golden_get(f, c, "dx"), 0);
        per_dtype[!strcmp(dt, "f64") ? 0 : !strcmp(dt, "f32") ? 1 : 2]++;
        flat += nd == 0;
        empty += tg_tensor_numel(x) == 0;
        ranks |= 1 << tg_tensor_ndim(x);
        th_release_all(3, (tg_tensor *[]){x, y, dx});
    }
    for (int d = 0; d < 3; d++)
        cr_assert(per_dtype[d] >= 50, "dtype %d: %d cases", d, per_dtype[d]);
    cr_assert(flat >= 21 && empty >= 12 && ranks == 0x1f, "%d flat, %d empty, ranks %x", flat,
              empty, ranks);
    tg_st_free(f);
}

typedef struct roll_case {
    int n;
    int64_t shifts[2];
    int dims[2];
} roll_case;

static int roll_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    const roll_case *r = user;
    return tg_roll(out, in[0], r->n, r->shifts, r->n > 0 ? r->dims : NULL);
}

Test(roll, gradcheck_and_gradgradcheck)
{
    const roll_case cases[] = {{1, {1, 0}, {0, 0}}, {1, {-5, 0}, {-1, 0}},
                               {2, {2, 1}, {1, 2}}, {0, {7, 0}, {0, 0}}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        uint64_t s = 33 + i;
        tg_tensor *x = th_rand_tensor(&s, TG_F64, 3, (int64_t[]){2, 3, 4}, -3, 3);
        OK(tg_tensor_set_requires_grad(x, true));
        th_expect_gradchecks(roll_fn, (void *)&cases[i], 1, &x, "case %zu", i);
        tg_tensor_release(x);
    }
}

/* roll is linear: the backward's backward is roll itself, bit for bit. */
Test(roll, double_backward_is_the_forward)
{
    uint64_t s = 9;
    tg_tensor *x = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){4, 6}, -2, 2), *y = NULL;
    OK(tg_tensor_set_requires_grad(x, true));
    OK(tg_roll(&y, x, 2, (int64_t[]){1, -2}, (int[]){0, 1}));
    th_expect_double_backward_is_forward(x, y, 23);
    th_release_all(2, (tg_tensor *[]){x, y});
}

/* Transposed, sliced and expanded (stride 0) views give the bits of their
 * contiguous copies, flattened and along each dim. */
Test(roll, views_match_their_contiguous_copies)
{
    tg_tensor *v[3];
    th_views_of_3x4x5(v);
    for (int k = 0; k < 3; k++)
        for (int dim = -3; dim < 4; dim++) {
            tg_tensor *c = NULL, *got = NULL, *want = NULL;
            char what[48];
            const int64_t shift = 2 * dim - 1;
            const int nd = dim < 3 ? 1 : 0;   /* dim 3: the flattened roll */
            snprintf(what, sizeof what, "view %d dim %d", k, dim);
            OK(tg_contiguous(&c, v[k]));
            cr_assert(not(tg_tensor_is_contiguous(v[k])), "%s", what);
            OK(tg_roll(&got, v[k], nd, &shift, nd ? &dim : NULL));
            OK(tg_roll(&want, c, nd, &shift, nd ? &dim : NULL));
            th_expect_same_bits(what, v[k], got, want);
            th_release_all(3, (tg_tensor *[]){c, got, want});
        }
    th_release_all(3, v);
}

/* Any dtype: integers move unchanged (torch.roll(arange(6).view(2, 3), 1)
 * is [[5, 0, 1], [2, 3, 4]]); the result is a copy, even for shift 0. */
Test(roll, integers_and_copies)
{
    const tg_dtype dts[] = {TG_U8, TG_I8, TG_I32, TG_I64, TG_F16};
    for (size_t k = 0; k < sizeof dts / sizeof *dts; k++) {
        tg_tensor *x = th_arange(dts[k], 2, (int64_t[]){2, 3}), *y = NULL, *z = NULL;
        OK(tg_roll(&y, x, 0, (int64_t[]){1}, NULL));
        cr_assert(eq(int, tg_tensor_dtype(y), dts[k]));
        const double want[] = {5, 0, 1, 2, 3, 4};
        for (int i = 0; i < 6; i++) cr_assert(eq(dbl, th_at(y, i), want[i]), "%zu %d", k, i);
        OK(tg_roll(&z, x, 1, (int64_t[]){3}, (int[]){1}));
        cr_assert(tg_tensor_cdata(z) != tg_tensor_cdata(x));
        for (int i = 0; i < 6; i++) cr_assert(eq(dbl, th_at(z, i), (double)i));
        th_release_all(3, (tg_tensor *[]){x, y, z});
    }
}

/* Shifts near INT64_MIN and INT64_MAX wrap without overflow. */
Test(roll, extreme_shifts)
{
    tg_tensor *x = th_arange(TG_F64, 1, (int64_t[]){7}), *y = NULL, *w = NULL;
    OK(tg_roll(&y, x, 1, (int64_t[]){INT64_MIN}, (int[]){0}));
    OK(tg_roll(&w, x, 0, (int64_t[]){INT64_MIN % 7}, NULL));
    th_expect_same_bits("INT64_MIN", x, y, w);
    th_release_all(2, (tg_tensor *[]){y, w});
    y = w = NULL;
    OK(tg_roll(&y, x, 2, (int64_t[]){INT64_MAX, INT64_MAX}, (int[]){0, -1}));
    OK(tg_roll(&w, x, 1, (int64_t[]){2 * (INT64_MAX % 7)}, (int[]){0}));
    th_expect_same_bits("INT64_MAX twice", x, y, w);
    th_release_all(3, (tg_tensor *[]){x, y, w});
}

Test(roll, refusals_name_the_argument)
{
    tg_tensor *x = th_arange(TG_F32, 2, (int64_t[]){2, 3}), *s = NULL, *z = NULL;
    const int64_t sh[] = {1, 1};
    th_expect_refused(tg_roll(&z, NULL, 0, sh, NULL), TG_EINVAL, "x must not be NULL", z);
    th_expect_refused(tg_roll(NULL, x, 0, sh, NULL), TG_EINVAL, "out", NULL);
    th_expect_refused(tg_roll(&z, x, 0, NULL, NULL), TG_EINVAL, "shifts", z);
    th_expect_refused(tg_roll(&z, x, -1, sh, NULL), TG_EINVAL, "n=-1", z);
    th_expect_refused(tg_roll(&z, x, 9, sh, (int[9]){0}), TG_EINVAL, "n=9", z);
    th_expect_refused(tg_roll(&z, x, 1, sh, NULL), TG_EINVAL, "dims is NULL", z);
    th_expect_refused(tg_roll(&z, x, 1, sh, (int[]){2}), TG_EINVAL, "dims[0]", z);
    th_expect_refused(tg_roll(&z, x, 2, sh, (int[]){0, -3}), TG_EINVAL, "dims[1]", z);
    OK(tg_tensor_full(&s, TG_F32, 0, NULL, 1));
    th_expect_refused(tg_roll(&z, s, 1, sh, (int[]){0}), TG_EINVAL, "0-d", z);
    OK(tg_roll(&z, s, 0, sh, NULL));   /* the flattened roll of one element */
    cr_assert(eq(dbl, th_at(z, 0), 1.0));
    th_release_all(3, (tg_tensor *[]){x, s, z});
}
