/* tests/test_repeat.c - tg_repeat against PyTorch's Tensor.repeat and its
 * gradient (f32, f64, bf16; ranks 0 to 5, one repeat per dim and more,
 * zeros, empty extents, a tiling of more dims than one expand holds),
 * gradcheck and gradgradcheck in f64, views, integer dtypes, the copy and
 * the refusals.  Goldens: scripts/make_repeat_goldens.py. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

/* The repeat copies: y is torch's bit for bit.  dx sums tiles: f32 and f64
 * to rounding; bf16 within half a unit of the last place of the f64 sum of
 * the same tiles (ours is that sum rounded once; the rank-5 case, tiled a
 * dim at a time, rounds once per dim), and within 1/64 of the
 * largest |dx| of torch's, whose bf16 reduction over several dims rounds
 * more than once (-0.0078 for an exact -0.0059 beside values near 2). */
Test(repeat, every_case_matches_torch)
{
    tg_st_file *f = th_golden_load("repeat.safetensors");
    const int n = atoi(tg_st_meta_get(f, "cases"));
    int per_dtype[3] = {0}, more = 0, empty = 0, ranks = 0;
    for (int i = 0; i < n; i++) {
        char c[16], what[96];
        snprintf(c, sizeof c, "case%d", i);
        const char *dt = th_golden_meta(f, c, "dtype"), *rs = th_golden_meta(f, c, "repeats");
        int64_t reps[TG_MAX_DIMS];
        int dims[TG_MAX_DIMS];   /* th_dims_of counts the repeats */
        const int nr = th_dims_of(rs, dims);
        th_ints_of(rs, reps);
        tg_tensor *x = th_leaf_clone(th_golden_get(f, c, "x")), *y = NULL, *dx = NULL;
        snprintf(what, sizeof what, "%s (%s, %d-d, repeats %s)", c, dt, tg_tensor_ndim(x), rs);
        OK(tg_repeat(&y, x, nr, reps));
        th_expect_close(what, y, th_golden_get(f, c, "y"), 0);
        tg_tensor *g = (tg_tensor *)th_golden_get(f, c, "g");
        OK(tg_grad(&dx, 1, &y, &g, 1, &x, NULL));
        const bool f64 = !strcmp(dt, "f64"), f32 = !strcmp(dt, "f32");
        if (f64 || f32) {
            th_expect_near(what, dx, th_golden_get(f, c, "dx"), f64 ? 1e-14 : 1e-6,
                           f64 ? 1e-14 : 1e-6);
        } else {
            if (tg_tensor_ndim(x) == 5) {   /* rounded once per tiled dim */
                tg_tensor *d64 = NULL;
                OK(tg_tensor_to_dtype(&d64, dx, TG_F64));
                th_expect_close(what, d64, th_golden_get(f, c, "dx64"), 1.0 / 64);
                tg_tensor_release(d64);
            } else {
                th_expect_near(what, dx, th_golden_get(f, c, "dx64"), 1.0 / 256, 1e-6);
            }
            th_expect_close(what, dx, th_golden_get(f, c, "dx"), 1.0 / 64);
        }
        per_dtype[f64 ? 0 : f32 ? 1 : 2]++;
        more += nr > tg_tensor_ndim(x);
        empty += tg_tensor_numel(y) == 0;
        ranks |= 1 << tg_tensor_ndim(x);
        th_release_all(3, (tg_tensor *[]){x, y, dx});
    }
    for (int d = 0; d < 3; d++)
        cr_assert(per_dtype[d] >= 23, "dtype %d: %d cases", d, per_dtype[d]);
    cr_assert(more >= 24 && empty >= 9 && ranks == 0x3f, "%d longer, %d empty, ranks %x", more,
              empty, ranks);
    tg_st_free(f);
}

typedef struct rep_case {
    int n;
    int64_t r[4];
} rep_case;

static int repeat_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    const rep_case *c = user;
    return tg_repeat(out, in[0], c->n, c->r);
}

Test(repeat, gradcheck_and_gradgradcheck)
{
    const rep_case cases[] = {{2, {2, 3}}, {3, {2, 1, 2}}, {2, {1, 1}}, {4, {1, 2, 1, 1}}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        uint64_t s = 13 + i;
        tg_tensor *x = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){2, 3}, -3, 3);
        OK(tg_tensor_set_requires_grad(x, true));
        th_expect_gradchecks(repeat_fn, (void *)&cases[i], 1, &x, "case %zu", i);
        tg_tensor_release(x);
    }
}

/* repeat is linear: the backward's backward is repeat itself, bit for bit,
 * through the one-expand path and the dim-by-dim one. */
Test(repeat, double_backward_is_the_forward)
{
    uint64_t s = 3;
    tg_tensor *x = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){3, 4}, -2, 2), *y = NULL;
    tg_tensor *x5 = th_rand_tensor(&s, TG_F64, 5, (int64_t[]){2, 2, 3, 2, 2}, -2, 2), *y5 = NULL;
    OK(tg_tensor_set_requires_grad(x, true));
    OK(tg_tensor_set_requires_grad(x5, true));
    OK(tg_repeat(&y, x, 3, (int64_t[]){2, 1, 3}));
    th_expect_double_backward_is_forward(x, y, 29);
    OK(tg_repeat(&y5, x5, 5, (int64_t[]){2, 2, 2, 2, 2}));
    th_expect_double_backward_is_forward(x5, y5, 31);
    th_release_all(4, (tg_tensor *[]){x, y, x5, y5});
}

/* Transposed, sliced and expanded (stride 0) views give the bits of their
 * contiguous copies. */
Test(repeat, views_match_their_contiguous_copies)
{
    tg_tensor *v[3];
    th_views_of_3x4x5(v);
    const rep_case reps[] = {{3, {2, 1, 3}}, {4, {2, 1, 1, 2}}, {3, {1, 1, 1}}};
    for (int k = 0; k < 3; k++)
        for (int j = 0; j < 3; j++) {
            tg_tensor *c = NULL, *got = NULL, *want = NULL;
            char what[48];
            snprintf(what, sizeof what, "view %d repeats %d", k, j);
            OK(tg_contiguous(&c, v[k]));
            cr_assert(not(tg_tensor_is_contiguous(v[k])), "%s", what);
            OK(tg_repeat(&got, v[k], reps[j].n, reps[j].r));
            OK(tg_repeat(&want, c, reps[j].n, reps[j].r));
            th_expect_same_bits(what, v[k], got, want);
            th_release_all(3, (tg_tensor *[]){c, got, want});
        }
    th_release_all(3, v);
}

/* Any dtype; the result is a new tensor even when nothing is tiled, as
 * torch's repeat, and writing to it leaves x alone. */
Test(repeat, integers_and_copies)
{
    const tg_dtype dts[] = {TG_U8, TG_I8, TG_I32, TG_I64, TG_F16};
    for (size_t k = 0; k < sizeof dts / sizeof *dts; k++) {
        tg_tensor *x = th_arange(dts[k], 1, (int64_t[]){3}), *y = NULL, *z = NULL;
        OK(tg_repeat(&y, x, 2, (int64_t[]){2, 2}));
        cr_assert(eq(int, tg_tensor_dtype(y), dts[k]));
        th_expect_shape(y, 2, (int64_t[]){2, 6});
        for (int i = 0; i < 12; i++) cr_assert(eq(dbl, th_at(y, i), (double)(i % 3)));
        OK(tg_repeat(&z, x, 1, (int64_t[]){1}));
        cr_assert(tg_tensor_cdata(z) != tg_tensor_cdata(x), "dtype %zu: not a copy", k);
        th_release_all(3, (tg_tensor *[]){x, y, z});
    }
}

Test(repeat, refusals_name_the_argument)
{
    tg_tensor *x = th_arange(TG_F32, 2, (int64_t[]){2, 3}), *z = NULL;
    th_expect_refused(tg_repeat(&z, NULL, 2, (int64_t[]){1, 1}), TG_EINVAL, "x must not", z);
    th_expect_refused(tg_repeat(NULL, x, 2, (int64_t[]){1, 1}), TG_EINVAL, "out", NULL);
    th_expect_refused(tg_repeat(&z, x, 1, (int64_t[]){2}), TG_EINVAL, "n=1", z);
    th_expect_refused(tg_repeat(&z, x, 9, (int64_t[9]){1}), TG_EINVAL, "n=9", z);
    th_expect_refused(tg_repeat(&z, x, 2, NULL), TG_EINVAL, "repeats is NULL", z);
    th_expect_refused(tg_repeat(&z, x, 2, (int64_t[]){1, -1}), TG_EINVAL, "repeats[1]=-1", z);
    th_expect_refused(tg_repeat(&z, x, 2, (int64_t[]){1, INT64_MAX}), TG_EINVAL, "overflows",
                      z);
    th_expect_refused(tg_repeat(&z, x, 2, (int64_t[]){INT64_MAX / 2, INT64_MAX / 4}),
                      TG_EINVAL, "repeat", z);
    tg_tensor_release(x);
}
