/* tests/test_cumsum.c - tg_cumsum against PyTorch's torch.cumsum and its
 * gradient (f32, f64, bf16; ranks 0 to 4, every dim from the front and
 * from the end, empty extents), gradcheck and gradgradcheck in f64, views,
 * rounding once per element, integers promoted to int64, autocast, the
 * refusals, and large tensors against a plain loop bit for bit on one and
 * two threads, NaN payloads too.  Goldens: scripts/make_cumsum_goldens.py. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

/* f64 and f32 to rounding (torch's CPU kernel also sums f32 in double);
 * bf16 within a unit of the last place of torch's (which sums in f32) and
 * within half a unit of the f64 sums of the same bf16 values. */
Test(cumsum, every_case_matches_torch)
{
    tg_st_file *f = th_golden_load("cumsum.safetensors");
    const int n = atoi(tg_st_meta_get(f, "cases"));
    int per_dtype[3] = {0}, empty = 0, ranks = 0;
    for (int i = 0; i < n; i++) {
        char c[16], what[96];
        snprintf(c, sizeof c, "case%d", i);
        const char *dt = th_golden_meta(f, c, "dtype");
        const int dim = atoi(th_golden_meta(f, c, "dim"));
        tg_tensor *x = th_leaf_clone(th_golden_get(f, c, "x")), *y = NULL, *dx = NULL;
        snprintf(what, sizeof what, "%s (%s, %d-d, dim %d)", c, dt, tg_tensor_ndim(x), dim);
        OK(tg_cumsum(&y, x, dim));
        const bool f64 = !strcmp(dt, "f64"), f32 = !strcmp(dt, "f32");
        const double r = f64 ? 1e-15 : f32 ? 1e-7 : 1.0 / 128, a = f64 ? 1e-14 : 1e-6;
        th_expect_near(what, y, th_golden_get(f, c, "y"), r, a);
        tg_tensor *g = (tg_tensor *)th_golden_get(f, c, "g");
        OK(tg_grad(&dx, 1, &y, &g, 1, &x, NULL));
        th_expect_near(what, dx, th_golden_get(f, c, "dx"), r, a);
        if (!f64 && !f32) {
            th_expect_near(what, y, th_golden_get(f, c, "y64"), 1.0 / 256, 1e-6);
            th_expect_near(what, dx, th_golden_get(f, c, "dx64"), 1.0 / 256, 1e-6);
        }
        per_dtype[f64 ? 0 : f32 ? 1 : 2]++;
        empty += tg_tensor_numel(x) == 0;
        ranks |= 1 << tg_tensor_ndim(x);
        th_release_all(3, (tg_tensor *[]){x, y, dx});
    }
    for (int d = 0; d < 3; d++)
        cr_assert(per_dtype[d] >= 25, "dtype %d: %d cases", d, per_dtype[d]);
    cr_assert(empty >= 6 && ranks == 0x1f, "%d empty cases, ranks mask %x", empty, ranks);
    tg_st_free(f);
}

static int cumsum_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    return tg_cumsum(out, in[0], *(const int *)user);
}

Test(cumsum, gradcheck_and_gradgradcheck)
{
    const int dims[] = {0, 1, 2, -1, -3};
    for (size_t i = 0; i < sizeof dims / sizeof *dims; i++) {
        uint64_t s = 71 + i;
        tg_tensor *x = th_rand_tensor(&s, TG_F64, 3, (int64_t[]){2, 3, 4}, -3, 3);
        OK(tg_tensor_set_requires_grad(x, true));
        th_expect_gradchecks(cumsum_fn, (void *)&dims[i], 1, &x, "dim %d", dims[i]);
        tg_tensor_release(x);
    }
}

/* cumsum is linear: the backward's backward is cumsum itself, bit for bit. */
Test(cumsum, double_backward_is_the_forward)
{
    uint64_t s = 91;
    tg_tensor *x = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){4, 6}, -2, 2), *y = NULL;
    OK(tg_tensor_set_requires_grad(x, true));
    OK(tg_cumsum(&y, x, -1));
    th_expect_double_backward_is_forward(x, y, 17);
    th_release_all(2, (tg_tensor *[]){x, y});
}

/* A transposed, a sliced and an expanded x (stride 0) give the bits of
 * their contiguous copies, in every dim. */
Test(cumsum, views_match_their_contiguous_copies)
{
    tg_tensor *v[3];
    th_views_of_3x4x5(v);
    for (int k = 0; k < 3; k++)
        for (int dim = -3; dim < 3; dim++) {
            tg_tensor *c = NULL, *got = NULL, *want = NULL;
            char what[48];
            snprintf(what, sizeof what, "view %d dim %d", k, dim);
            OK(tg_contiguous(&c, v[k]));
            cr_assert(not(tg_tensor_is_contiguous(v[k])), "%s", what);
            OK(tg_cumsum(&got, v[k], dim));
            OK(tg_cumsum(&want, c, dim));
            th_expect_same_bits(what, v[k], got, want);
            th_release_all(3, (tg_tensor *[]){c, got, want});
        }
    th_release_all(3, v);
}

/* Each element is its double sum rounded once: 2^24 + 1 + 1 gives 2^24 + 2
 * in f32, where adding in f32 would stay at 2^24. */
Test(cumsum, rounds_each_double_sum_once)
{
    tg_tensor *x = th_vec(TG_F32, 3, (double[]){16777216.0, 1, 1}, "x", false), *y = NULL;
    OK(tg_cumsum(&y, x, 0));
    cr_assert(eq(dbl, th_at(y, 0), 16777216.0));
    cr_assert(eq(dbl, th_at(y, 1), 16777216.0));   /* 2^24 + 1 ties to even */
    cr_assert(eq(dbl, th_at(y, 2), 16777218.0));
    th_release_all(2, (tg_tensor *[]){x, y});
}

/* Integers give exact int64 sums, as torch's promotion, wrapping on
 * overflow, and are not differentiable. */
Test(cumsum, integers_give_int64)
{
    const tg_dtype dts[] = {TG_U8, TG_I8, TG_I32, TG_I64};
    for (size_t k = 0; k < sizeof dts / sizeof *dts; k++) {
        tg_tensor *x = th_tensor_from(dts[k], 2, (int64_t[]){2, 3},
                                      (double[]){1, 2, 3, 100, 100, 100}), *y = NULL;
        OK(tg_cumsum(&y, x, 1));
        cr_assert(eq(int, tg_tensor_dtype(y), TG_I64));
        cr_assert(not(tg_tensor_requires_grad(y)));
        const double want[] = {1, 3, 6, 100, 200, 300};
        for (int i = 0; i < 6; i++) cr_assert(eq(dbl, th_at(y, i), want[i]), "%zu %d", k, i);
        th_release_all(2, (tg_tensor *[]){x, y});
    }
    tg_tensor *big = NULL, *y = NULL;
    OK(tg_tensor_full(&big, TG_I64, 1, (int64_t[]){2}, 4611686018427387904.0));   /* 2^62 */
    OK(tg_cumsum(&y, big, 0));
    const int64_t *v = tg_tensor_data(y);
    cr_assert(eq(i64, v[1], INT64_MIN), "%lld", (long long)v[1]);   /* 2^63 wraps */
    th_release_all(2, (tg_tensor *[]){big, y});
}

/* A 0-d x takes dim 0 and -1 and gives its value; its gradient is g. */
Test(cumsum, zero_d_x_is_its_own_sum)
{
    tg_tensor *x = NULL, *y = NULL, *z = NULL;
    OK(tg_tensor_full(&x, TG_F64, 0, NULL, 2.5));
    OK(tg_tensor_set_requires_grad(x, true));
    OK(tg_cumsum(&y, x, -1));
    cr_assert(eq(int, tg_tensor_ndim(y), 0));
    cr_assert(eq(dbl, th_at(y, 0), 2.5));
    OK(tg_backward(y, NULL, NULL));
    cr_assert(eq(dbl, th_at(tg_tensor_grad(x), 0), 1.0));
    th_expect_refused(tg_cumsum(&z, x, 1), TG_EINVAL, "dim", z);
    th_release_all(2, (tg_tensor *[]){x, y});
}

/* FP32 under autocast: a bf16 x gives the f32 result of x in f32, and x's
 * gradient comes back in bf16; outside autocast, bf16. */
static int cumsum_dim1(tg_tensor **y, tg_tensor *x)
{
    return tg_cumsum(y, x, 1);
}

Test(cumsum, autocast_computes_in_f32)
{
    th_expect_fp32_autocast(cumsum_dim1, 411);
}

Test(cumsum, refusals_name_the_argument)
{
    tg_tensor *x = th_vec(TG_F32, 3, (double[]){1, 2, 3}, "x", false), *z = NULL;
    th_expect_refused(tg_cumsum(&z, NULL, 0), TG_EINVAL, "x must not be NULL", z);
    th_expect_refused(tg_cumsum(NULL, x, 0), TG_EINVAL, "out", NULL);
    th_expect_refused(tg_cumsum(&z, x, 1), TG_EINVAL, "dim", z);
    th_expect_refused(tg_cumsum(&z, x, -2), TG_EINVAL, "dim", z);
    tg_tensor_release(x);
}

/* v with its quiet bit set (v + v for a NaN v on x86). */
static double quieted(double v)
{
    uint64_t b;
    memcpy(&b, &v, sizeof b);
    b |= UINT64_C(1) << 51;
    memcpy(&v, &b, sizeof v);
    return v;
}

/* cumsum of x along dim (in [0, ndim)) by a plain loop over x's row-major
 * elements: double sums for a float x, each rounded once to x's dtype (a
 * NaN element's NaN, quieted, is the sum where it is added), wrapping
 * int64 sums for an integer x. */
static tg_tensor *cumsum_by_loop(tg_tensor *x, int dim)
{
    tg_tensor *c = NULL, *want = NULL;
    OK(tg_contiguous(&c, x));
    const int nd = tg_tensor_ndim(x);
    const int64_t *shape = tg_tensor_shape(x), n = tg_tensor_numel(x);
    const tg_dtype dt = tg_tensor_dtype(x);
    const bool ints = !tg_dtype_is_float(dt);
    OK(tg_tensor_zeros(&want, ints ? TG_I64 : dt, nd, shape));
    int64_t inner = 1;
    for (int d = dim + 1; d < nd; d++) inner *= shape[d];
    const void *xv = tg_tensor_cdata(c);
    void *yv = tg_tensor_data(want);
    double *sum = malloc(sizeof(double) * (size_t)n);
    uint64_t *isum = yv;
    cr_assert(sum != NULL);
    for (int64_t e = 0; e < n; e++) {
        const bool first = e / inner % shape[dim] == 0;
        if (ints) {
            const uint64_t v = dt == TG_I64 ? ((const uint64_t *)xv)[e]
                                            : (uint64_t)(int64_t)tg_dtype_load(dt, xv, e);
            isum[e] = first ? v : isum[e - inner] + v;
        } else {
            const double v = tg_dtype_load(dt, xv, e);
            sum[e] = first ? v : isnan(v) ? quieted(v) : sum[e - inner] + v;
            tg_dtype_store(dt, yv, e, sum[e]);
        }
    }
    free(sum);
    tg_tensor_release(c);
    return want;
}

/* Tensors large enough to be shared out among threads, summed along every
 * dim (the first: one o and its columns in blocks, the last: whole lines;
 * 129 and 257 columns end in a short block), contiguous, transposed and
 * sliced, give the bits of the plain loop on one thread and on two. */
Test(cumsum, large_tensors_give_the_plain_loops_bits_on_one_and_two_threads)
{
    const tg_dtype dts[] = {TG_F32, TG_BF16, TG_I32, TG_I64};
    const struct { int nd; int64_t shape[3]; } shapes[] = {{2, {512, 512}}, {3, {3, 257, 129}}};
    const int old = tg_get_num_threads();
    int cases = 0;
    for (size_t t = 0; t < sizeof dts / sizeof *dts; t++)
        for (size_t s = 0; s < 2; s++)
            for (int layout = 0; layout < 3; layout++) {
                const int nd = shapes[s].nd;
                tg_tensor *x = th_layout_of(dts[t], nd, shapes[s].shape, layout, 7 + t);
                cr_assert(layout == 0 || !tg_tensor_is_contiguous(x));
                for (int dim = 0; dim < nd; dim++) {
                    tg_tensor *want = cumsum_by_loop(x, dim), *y[2] = {NULL, NULL};
                    /* both results held, so that the second cannot be given
                     * the first one's memory, right values and all */
                    for (int threads = 1; threads <= 2; threads++) {
                        OK(tg_set_num_threads(threads));
                        OK(tg_cumsum(&y[threads - 1], x, dim));
                        const int64_t at = th_first_difference(y[threads - 1], want);
                        const int64_t a = at < 0 ? 0 : at;
                        cr_assert(eq(i64, at, -1), "%s (%d dims) layout %d dim %d, %d threads: "
                                  "element %lld is %g, not %g", tg_dtype_name(dts[t]), nd,
                                  layout, dim, threads, (long long)at, th_at(y[threads - 1], a),
                                  th_at(want, a));
                        cases++;
                    }
                    th_release_all(3, (tg_tensor *[]){want, y[0], y[1]});
                }
                tg_tensor_release(x);
            }
    OK(tg_set_num_threads(old));
    cr_assert(eq(int, cases, 4 * 3 * 5 * 2));
}

/* NaNs of distinct payloads and signs, and infinities of both signs (whose
 * sum is NaN), in lines of three runs of 256 (f32, f64; along the last dim:
 * lines summed side by side, along the first: columns): each NaN element's
 * own NaN, quieted, is the sum from there on until the next, as the plain
 * loop's, on one thread and on two. */
Test(cumsum, nans_keep_the_payload_of_the_last_nan_added)
{
    const tg_dtype dts[2] = {TG_F32, TG_F64};
    const int64_t shape[2] = {63, 600};   /* 15 blocks of 4 lines and 3 lines */
    const int old = tg_get_num_threads();
    for (int t = 0; t < 2; t++) {
        tg_tensor *x = th_layout_of(dts[t], 2, shape, 0, 3 + (uint64_t)t);
        void *xv = tg_tensor_data(x);
        uint64_t st = 17;
        for (int k = 0; k < 300; k++) {
            const int64_t e = th_rand_int(&st, 0, 63 * 600 - 1), kind = th_rand_int(&st, 0, 3);
            const uint32_t sign = kind == 1 ? UINT32_C(0x80000000) : 0;
            if (kind >= 2) {
                tg_dtype_store(dts[t], xv, e, kind == 2 ? INFINITY : -INFINITY);
            } else if (dts[t] == TG_F32) {
                const uint32_t b = sign | UINT32_C(0x7fc00000) | (uint32_t)(k + 1);
                memcpy((float *)xv + e, &b, sizeof b);
            } else {
                const uint64_t b = (uint64_t)sign << 32 | UINT64_C(0x7ff8000000000000) |
                                   (uint64_t)(k + 1) << 29;
                memcpy((double *)xv + e, &b, sizeof b);
            }
        }
        for (int dim = 0; dim < 2; dim++) {
            tg_tensor *want = cumsum_by_loop(x, dim), *y[2] = {NULL, NULL};
            for (int threads = 1; threads <= 2; threads++) {
                OK(tg_set_num_threads(threads));
                OK(tg_cumsum(&y[threads - 1], x, dim));
                const int64_t at = th_first_difference(y[threads - 1], want);
                cr_assert(eq(i64, at, -1), "%s dim %d, %d threads: element %lld differs",
                          tg_dtype_name(dts[t]), dim, threads, (long long)at);
            }
            th_release_all(3, (tg_tensor *[]){want, y[0], y[1]});
        }
        tg_tensor_release(x);
    }
    OK(tg_set_num_threads(old));
}
