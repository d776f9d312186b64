/* tests/test_reduce.c - sum, mean and their _dims forms, sum_to_shape, and
 * the exact int64 sums of integer tensors, against naive loops written here
 * (their gradients are checked with the shape ops' in test_shape_grad.c). */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "helpers.h"
#include "core/core.h"
#include "ops/reduce_internal.h"
#include "ops/softmax_rows_internal.h"
#include "tapegrad/tapegrad.h"
#include "tapegrad/autograd.h"
#include "tapegrad/ops.h"
#include "tapegrad/tensor.h"

/* ---- reductions ----------------------------------------------------------------- */

Test(reduce, sum_and_mean_match_naive_loops)
{
    int64_t s[3] = {3, 5, 7};
    tg_dtype dts[2] = {TG_F32, TG_F64};
    for (int di = 0; di < 2; di++) {
        tg_tensor *a = th_rand_uniform(dts[di], 3, s, 7), *sm = NULL, *mn = NULL;
        double ref = 0.0;
        for (int64_t k = 0; k < 105; k++) ref += th_at(a, k);
        cr_assert(eq(int, tg_sum(&sm, a), TG_OK));
        cr_assert(eq(int, tg_mean(&mn, a), TG_OK));
        cr_assert(eq(int, tg_tensor_ndim(sm), 0));
        cr_assert(eq(int, tg_tensor_dtype(sm), dts[di]));
        const double tol = dts[di] == TG_F64 ? 1e-12 : 1e-5;   /* 105 terms in [-1, 1) */
        cr_assert(epsilon_eq(dbl, th_at(sm, 0), ref, tol));
        cr_assert(epsilon_eq(dbl, th_at(mn, 0), ref / 105.0, tol / 10));
        tg_tensor_release(sm);
        tg_tensor_release(mn);
        tg_tensor_release(a);
    }
}

Test(reduce, sum_dims_and_mean_dims_match_naive_loops)
{
    int64_t s[3] = {3, 4, 5};
    tg_tensor *a = th_rand_uniform(TG_F64, 3, s, 11), *sd = NULL, *sk = NULL, *md = NULL;
    int dims[2] = {-1, 0};
    cr_assert(eq(int, tg_sum_dims(&sd, a, 2, dims, false), TG_OK));
    cr_assert(eq(int, tg_sum_dims(&sk, a, 2, dims, true), TG_OK));
    cr_assert(eq(int, tg_mean_dims(&md, a, 2, dims, false), TG_OK));
    int64_t w1[1] = {4}, wk[3] = {1, 4, 1};
    th_expect_shape(sd, 1, w1);
    th_expect_shape(sk, 3, wk);
    for (int64_t j = 0; j < 4; j++) {
        double ref = 0.0;
        for (int64_t i = 0; i < 3; i++)
            for (int64_t k = 0; k < 5; k++) ref += th_get(a, (int64_t[]){i, j, k});
        cr_assert(epsilon_eq(dbl, th_at(sd, j), ref, 1e-12));
        cr_assert(epsilon_eq(dbl, th_at(sk, j), ref, 1e-12));
        cr_assert(epsilon_eq(dbl, th_at(md, j), ref / 15.0, 1e-12));
    }
    tg_tensor_release(sd);
    tg_tensor_release(sk);
    tg_tensor_release(md);
    tg_tensor_release(a);
}

Test(reduce, sum_of_a_strided_view_and_half_dtypes)
{
    int64_t s[2] = {4, 6};
    tg_tensor *a = th_rand_uniform(TG_F32, 2, s, 3), *t = NULL, *st = NULL, *h = NULL, *sh = NULL;
    cr_assert(eq(int, tg_transpose(&t, a, 0, 1), TG_OK));
    int dim = 1;
    cr_assert(eq(int, tg_sum_dims(&st, t, 1, &dim, false), TG_OK));   /* = column sums of a */
    for (int64_t j = 0; j < 6; j++) {
        double ref = 0.0;
        for (int64_t i = 0; i < 4; i++) ref += th_at(a, i * 6 + j);
        cr_assert(epsilon_eq(dbl, th_at(st, j), ref, 1e-5));
    }
    tg_dtype halves[2] = {TG_F16, TG_BF16};
    for (int i = 0; i < 2; i++) {
        double ref = 0.0;
        cr_assert(eq(int, tg_tensor_to_dtype(&h, a, halves[i]), TG_OK));
        for (int64_t k = 0; k < 24; k++) ref += th_at(h, k);
        cr_assert(eq(int, tg_sum(&sh, h), TG_OK));
        cr_assert(eq(int, tg_tensor_dtype(sh), halves[i]));
        cr_assert(epsilon_eq(dbl, th_at(sh, 0), ref, fabs(ref) * 1e-2 + 1e-2));
        tg_tensor_release(sh);
        tg_tensor_release(h);
    }
    tg_tensor_release(st);
    tg_tensor_release(t);
    tg_tensor_release(a);
}

Test(reduce, sum_to_shape_sums_broadcast_dims)
{
    int64_t s[3] = {2, 3, 4}, to[2] = {3, 1};
    tg_tensor *a = th_arange(TG_F64, 3, s), *r = NULL, *r0 = NULL;
    cr_assert(eq(int, tg_sum_to_shape(&r, a, 2, to), TG_OK));
    th_expect_shape(r, 2, to);
    for (int64_t j = 0; j < 3; j++) {
        double ref = 0.0;
        for (int64_t i = 0; i < 2; i++)
            for (int64_t k = 0; k < 4; k++) ref += (double)(i * 12 + j * 4 + k);
        cr_assert(eq(dbl, th_at(r, j), ref));
    }
    cr_assert(eq(int, tg_sum_to_shape(&r0, a, 0, NULL), TG_OK));
    cr_assert(eq(dbl, th_at(r0, 0), 23.0 * 24.0 / 2.0));
    tg_tensor_release(r0);
    tg_tensor_release(r);
    tg_tensor_release(a);
}

/* A sum over dims (0, 2, 3) of (N, C, H, W), as a bias gradient: every output
 * is the double sum of its terms in row-major order, rounded once, bit for
 * bit, whether the output is summed alone or side by side with seven
 * others; C = 19 leaves outputs outside the groups of eight on any thread
 * count.  f32, f64, bf16 and f16, contiguous and a permuted view.  The
 * values span 2^60 (f16: 2^23), so that the double sums round: in f64
 * another order of the terms shows in the result; the f32 and half results,
 * rounded from the double sum, are its value in any order here. */
Test(reduce, sum_dims_of_many_outputs_is_row_major_order_bit_for_bit)
{
    const int64_t s[4] = {3, 19, 5, 7};
    const tg_dtype dts[4] = {TG_F32, TG_F64, TG_BF16, TG_F16};
    for (int di = 0; di < 4; di++)
        for (int view = 0; view < 2; view++) {
            double v[3 * 19 * 5 * 7];
            uint64_t st = 23 + (uint64_t)di;
            for (int i = 0; i < 3 * 19 * 5 * 7; i++) {
                const double u = th_uniform_pm1(&st) / 2;   /* [-0.5, 0.5) */
                v[i] = ldexp(u, dts[di] == TG_F16 ? (i * 7) % 24 - 8 : (i * 7) % 61 - 30);
            }
            tg_tensor *a = th_tensor_from(dts[di], 4, s, v), *p = NULL, *pc = NULL;
            tg_tensor *x = a, *sd = NULL;
            if (view) {   /* the same values, (N, H, C, W) in memory */
                cr_assert(eq(int, tg_transpose(&p, a, 1, 2), TG_OK));
                cr_assert(eq(int, tg_contiguous(&pc, p), TG_OK));
                tg_tensor_release(p), p = NULL;
                cr_assert(eq(int, tg_transpose(&p, pc, 1, 2), TG_OK));
                x = p;
            }
            int dims[3] = {0, 2, 3};
            cr_assert(eq(int, tg_sum_dims(&sd, x, 3, dims, false), TG_OK));
            for (int64_t c = 0; c < s[1]; c++) {
                double acc = 0.0;
                for (int64_t n = 0; n < s[0]; n++)
                    for (int64_t h = 0; h < s[2]; h++)
                        for (int64_t w = 0; w < s[3]; w++) acc += th_get(a, (int64_t[]){n, c, h, w});
                tg_tensor *want = th_tensor_from(dts[di], 0, NULL, &acc);
                cr_assert(eq(dbl, th_at(sd, c), th_at(want, 0)), "%s view %d: output %lld",
                          tg_dtype_name(dts[di]), view, (long long)c);
                tg_tensor_release(want);
            }
            th_release_all(4, (tg_tensor *[]){a, p, pc, sd});
        }
}

/* The documented order of an f32 run of 64 or more: term k into lane k % 32,
 * the lanes met pairwise (lane l + w into lane l, w = 16, 8, 4, 2, 1). */
static double lanes_want(const float *x, int64_t n)
{
    double s[32] = {0.0};
    for (int64_t k = 0; k < n; k++) s[k % 32] += (double)x[k];
    for (int w = 16; w >= 1; w /= 2)
        for (int l = 0; l < w; l++) s[l] += s[l + w];
    return s[0];
}

/* f32 runs of 64 or more sum in 32 lanes, the same bits in every vector
 * width this CPU runs: values spanning 2^60, where any other order of the
 * double adds shows in the result. */
Test(reduce, f32_runs_sum_in_32_lanes_in_every_width)
{
    static const int64_t ns[] = {1, 31, 63, 64, 65, 100, 1000, 4099};
    static const char *const names[] = {"", "plain", "AVX2", "AVX-512"};
    static float x[4099];
    uint64_t st = 77;
    for (int i = 0; i < 4099; i++)
        x[i] = (float)ldexp(th_uniform_pm1(&st), (i * 13) % 61 - 30);
    int widths = 0;
    for (int w = 1; w <= 3; w++) {
        tg__exp_width_force(w);
        if (tg__exp_width_get() != (tg__exp_width)w) {
            th_not_run("the %s f32 sum lanes are not run: this CPU lacks them", names[w]);
            continue;
        }
        for (size_t i = 0; i < sizeof ns / sizeof *ns; i++)
            cr_assert(eq(dbl, tg__reduce_lanes_f32(x, ns[i]), lanes_want(x, ns[i])),
                      "%s n=%lld", names[w], (long long)ns[i]);
        widths++;
    }
    tg__exp_width_force(0);
    cr_assert(widths >= 1, "no width ran");
}

/* A sum over the last dim of f32 rows (two rows at a time in the
 * AVX-512 lanes, in groups of eight outputs, an odd one left) gives each
 * row the lanes' bits in every width, with 1 and 2 threads, for
 * contiguous rows and rows of a wider tensor (a slice along dim 1). */
Test(reduce, f32_sum_over_last_dim_gives_each_row_the_lanes_bits)
{
    static const int64_t cs[] = {64, 100, 1000, 4099};
    static const int64_t N = 19, PAD = 5;
    const int threads = tg_get_num_threads();
    for (size_t ci = 0; ci < sizeof cs / sizeof *cs; ci++) {
        const int64_t C = cs[ci], W = C + PAD;
        tg_tensor *wide = NULL;
        cr_assert(eq(int, tg_tensor_zeros(&wide, TG_F32, 2, (int64_t[]){N, W}), TG_OK));
        float *v = tg_tensor_data(wide);
        uint64_t st = 91 + (uint64_t)C;
        for (int64_t i = 0; i < N * W; i++)
            v[i] = (float)ldexp(th_uniform_pm1(&st), (int)((i * 13) % 61) - 30);
        for (int layout = 0; layout < 2; layout++) {
            tg_tensor *x = NULL;
            if (layout == 0) {
                cr_assert(eq(int, tg_tensor_zeros(&x, TG_F32, 2, (int64_t[]){N, C}), TG_OK));
                float *xv = tg_tensor_data(x);
                for (int64_t n = 0; n < N; n++) memcpy(xv + n * C, v + n * W, (size_t)C * 4);
            } else {
                cr_assert(eq(int, tg_slice(&x, wide, 1, 0, C, 1), TG_OK));
            }
            for (int w = 1; w <= 3; w++) {
                tg__exp_width_force(w);
                if (tg__exp_width_get() != (tg__exp_width)w) continue;
                for (int t = 1; t <= 2; t++) {
                    cr_assert(eq(int, tg_set_num_threads(t), TG_OK));
                    tg_tensor *sd = NULL;
                    cr_assert(eq(int, tg_sum_dims(&sd, x, 1, (int[]){1}, false), TG_OK));
                    for (int64_t n = 0; n < N; n++)
                        cr_assert(eq(dbl, th_at(sd, n), (double)(float)lanes_want(v + n * W, C)),
                                  "C=%lld layout %d width %d threads %d row %lld",
                                  (long long)C, layout, w, t, (long long)n);
                    tg_tensor_release(sd);
                }
            }
            tg__exp_width_force(0);
            tg_tensor_release(x);
        }
        tg_tensor_release(wide);
    }
    cr_assert(eq(int, tg_set_num_threads(threads), TG_OK));
}

/* sum, mean and a sum over the last dim of f32 take the lanes for runs of
 * 64 or more and one running sum below: 2^60 + 1 - 2^60 is 1 in lanes (the
 * 1 in a lane of its own) and 0 in one running sum. */
Test(reduce, f32_sums_take_the_lanes_from_runs_of_64)
{
    for (int64_t n = 63; n <= 64; n++) {
        float v[64] = {0};
        v[0] = 0x1p60f;
        v[1] = 1.0f;
        v[n == 64 ? 32 : 62] = -0x1p60f;   /* in lane 0 with 2^60 when n is 64 */
        const double want = n == 64 ? 1.0 : 0.0;
        tg_tensor *x = NULL, *s = NULL, *m = NULL, *sd = NULL;
        cr_assert(eq(int, tg_tensor_zeros(&x, TG_F32, 2, (int64_t[]){1, n}), TG_OK));
        memcpy(tg_tensor_data(x), v, (size_t)n * sizeof *v);
        cr_assert(eq(int, tg_sum(&s, x), TG_OK));
        cr_assert(eq(int, tg_mean(&m, x), TG_OK));
        cr_assert(eq(int, tg_sum_dims(&sd, x, 1, (int[]){1}, false), TG_OK));
        cr_assert(eq(dbl, th_at(s, 0), want), "sum of %lld", (long long)n);
        cr_assert(eq(dbl, th_at(m, 0), (double)(float)(want / (double)n)), "mean of %lld",
                  (long long)n);
        cr_assert(eq(dbl, th_at(sd, 0), want), "sum over the last dim of %lld", (long long)n);
        th_release_all(4, (tg_tensor *[]){x, s, m, sd});
    }
}

/* mean of an integer tensor is an error in torch too ("could not infer output
 * dtype"); so is sum_to_shape here (a gradient helper). */
/* ---- integer inputs --------------------------------------------------------------- */

Test(reduce, mean_of_integers_is_edtype)
{
    int64_t s[1] = {4};
    tg_tensor *a = th_arange(TG_I32, 1, s), *out = NULL;
    cr_assert(eq(int, tg_mean(&out, a), TG_EDTYPE));
    cr_assert(strstr(tg_error_message(), "mean: a is i32") != NULL, "%s", tg_error_message());
    cr_assert(eq(int, tg_mean_dims(&out, a, 1, (int[]){0}, false), TG_EDTYPE));
    cr_assert(eq(int, tg_sum_to_shape(&out, a, 1, (int64_t[]){1}), TG_EDTYPE));
    cr_assert(eq(ptr, out, NULL));
    tg_tensor_release(a);
}

static int64_t i64_at(const tg_tensor *t, int64_t i)
{
    cr_assert(eq(int, tg_tensor_dtype(t), TG_I64));
    cr_assert(tg_tensor_is_contiguous(t));
    return ((const int64_t *)tg_tensor_cdata(t))[i];
}

/* torch sums an integer tensor exactly into an int64, wrapping on overflow:
 * int32 [2^31-1, 1] -> 2147483648, uint8 arange(4) -> 6, int64 [2^53+1, 0]
 * -> 2^53+1 (no double on the way), int64 [2^62, 2^62] -> -2^63, and
 * ones((2, 3), int8).sum(1, keepdim=True) -> int64 [[3], [3]]. */
Test(reduce, sum_of_integers_is_exact_i64_as_torch)
{
    tg_tensor *y = NULL;
    tg_tensor *a = th_tensor_from(TG_I32, 1, (int64_t[]){2}, (double[]){2147483647.0, 1.0});
    cr_assert(eq(int, tg_sum(&y, a), TG_OK), "%s", tg_error_message());
    cr_assert(eq(int, tg_tensor_ndim(y), 0));
    cr_assert(eq(i64, i64_at(y, 0), (int64_t)2147483648));
    tg_tensor_release(y);
    tg_tensor_release(a);
    a = th_arange(TG_U8, 1, (int64_t[]){4});
    cr_assert(eq(int, tg_sum(&y, a), TG_OK));
    cr_assert(eq(i64, i64_at(y, 0), 6));
    tg_tensor_release(y);
    tg_tensor_release(a);
    const int64_t big[2] = {((int64_t)1 << 53) + 1, 0}, wrap[2] = {(int64_t)1 << 62, (int64_t)1 << 62};
    tg_tensor_from_data(&a, TG_I64, 1, (int64_t[]){2}, big);
    cr_assert(eq(int, tg_sum(&y, a), TG_OK));
    cr_assert(eq(i64, i64_at(y, 0), big[0]));
    tg_tensor_release(y);
    tg_tensor_release(a);
    tg_tensor_from_data(&a, TG_I64, 1, (int64_t[]){2}, wrap);
    cr_assert(eq(int, tg_sum(&y, a), TG_OK));
    cr_assert(eq(i64, i64_at(y, 0), INT64_MIN));
    tg_tensor_release(y);
    tg_tensor_release(a);
    tg_tensor_full(&a, TG_I8, 2, (int64_t[]){2, 3}, 1.0);
    cr_assert(eq(int, tg_sum_dims(&y, a, 1, (int[]){1}, true), TG_OK), "%s", tg_error_message());
    th_expect_shape(y, 2, (int64_t[]){2, 1});
    cr_assert(eq(i64, i64_at(y, 0), 3));
    cr_assert(eq(i64, i64_at(y, 1), 3));
    tg_tensor_release(y);
    tg_tensor_release(a);
}

/* The integer sum follows the same dims, strides and empty-tensor rules as
 * the float one: sum over dim 0 of a transposed i32 arange, and of an empty
 * one (zeros). */
Test(reduce, sum_dims_of_a_strided_integer_view)
{
    tg_tensor *a = th_arange(TG_I32, 2, (int64_t[]){2, 3}), *t = NULL, *y = NULL, *e = NULL;
    cr_assert(eq(int, tg_transpose(&t, a, 0, 1), TG_OK));   /* (3, 2): [[0,3],[1,4],[2,5]] */
    cr_assert(eq(int, tg_sum_dims(&y, t, 1, (int[]){-1}, false), TG_OK));
    th_expect_shape(y, 1, (int64_t[]){3});
    for (int k = 0; k < 3; k++) cr_assert(eq(i64, i64_at(y, k), 2 * k + 3));
    tg_tensor_release(y);
    cr_assert(eq(int, tg_slice(&e, t, 1, 2, 2, 1), TG_OK));   /* (3, 0) */
    cr_assert(eq(int, tg_sum_dims(&y, e, 1, (int[]){1}, false), TG_OK));
    for (int k = 0; k < 3; k++) cr_assert(eq(i64, i64_at(y, k), 0));
    tg_tensor_release(y);
    tg_tensor_release(e);
    tg_tensor_release(t);
    tg_tensor_release(a);
}
