/* tests/test_norm_simd.c - batch_norm's SIMD pieces (src/ops/norm_simd.c)
 * against its portable loops: the sums of four channels at once and the
 * half rows computed and rounded in registers must give the same bits as
 * bn_sum one channel at a time and the f32 rows rounded by the bulk
 * conversion.  tg__bn_set_simd(false) forces the portable loops.  On a CPU
 * without AVX2 both runs take the portable loops, and the test says so. */
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "helpers.h"
#include "norm_fixtures.h"
#include "core/core.h"
#include "ops/norm_internal.h"
#include "tapegrad/tapegrad.h"

/* y, running_mean, running_var and the gradients of x, weight and bias of
 * one batch_norm of x (half x under autocast in its dtype) with gy. */
static void run(tg_tensor *x, tg_tensor *gy, bool training, bool affine, bool simd,
                tg_tensor *out[6])
{
    const tg_dtype dt = tg_tensor_dtype(x);
    bn_args a = bn_args_of(x, affine);
    tg_tensor *leaf = a.leaf, *rm = a.rm, *rv = a.rv, *w = a.w, *b = a.b, *y = NULL;
    tg__bn_set_simd(simd);
    if (dt != TG_F32) cr_assert(eq(int, tg_autocast_begin(dt), TG_OK));
    int rc = tg_batch_norm(&y, leaf, rm, rv, w, b, training, 0.1, 1e-5);
    if (dt != TG_F32) tg_autocast_end();
    cr_assert(eq(int, rc, TG_OK), "%s", tg_error_message());
    cr_assert(eq(int, tg_tensor_dtype(y), dt));
    tg_tensor *in[3] = {leaf, w, b}, *gi[3] = {NULL, NULL, NULL};
    rc = tg_grad(gi, 1, &y, &gy, w ? 3 : 1, in, NULL);
    tg__bn_set_simd(true);
    cr_assert(eq(int, rc, TG_OK), "%s", tg_error_message());
    tg_tensor *got[6] = {y, rm, rv, gi[0], gi[1], gi[2]};
    memcpy(out, got, sizeof got);
    bn_args_release(&a);
}

/* (N, C, S) with every row tail (S mod 4 = 0..3), channel counts with and
 * without a remainder of four, and one shape (the DCGAN's 7x7 layer at
 * N = 64) whose half channels go through the block loop several blocks a
 * thread; f32 (the per-channel loops), bf16 and f16 (the half blocks);
 * training and eval, with and without weight and bias. */
Test(norm_simd, four_channel_sums_and_half_rows_same_bits_as_portable_loops)
{
    if (!tg__cpu_has_half_simd())
        printf("norm_simd: this CPU lacks AVX2/F16C, so both runs take the portable loops\n");
    const int64_t shapes[6][3] = {{3, 4, 16}, {3, 5, 17}, {2, 9, 18}, {3, 7, 19},
                                  {2, 8, 3},  {64, 24, 49}};
    const tg_dtype dts[3] = {TG_F32, TG_BF16, TG_F16};
    for (int k = 0; k < 6; k++)
        for (int d = 0; d < 3; d++)
            for (int mode = 0; mode < 4; mode++) {
                const bool training = mode & 1, affine = mode & 2;
                const int64_t xs[3] = {shapes[k][0], shapes[k][1], shapes[k][2]};
                const tg_dtype dt = dts[d];
                /* values about 1.5, so that the centred sums differ from the plain ones */
                tg_tensor *u = th_rand_uniform(TG_F32, 3, xs, 401 + k), *x32 = NULL, *x = NULL;
                cr_assert(eq(int, tg_add_scalar(&x32, u, 1.5), TG_OK));
                cr_assert(eq(int, tg_tensor_to_dtype(&x, x32, dt), TG_OK));
                tg_tensor *gy = th_rand_uniform(dt, 3, xs, 411 + k);
                tg_tensor *out[2][6];
                run(x, gy, training, affine, false, out[0]);
                run(x, gy, training, affine, true, out[1]);
                static const char *const names[6] = {"y", "running_mean", "running_var", "dx",
                                                     "dweight", "dbias"};
                for (int i = 0; i < 6; i++) {
                    cr_assert(eq(int, out[0][i] == NULL, out[1][i] == NULL));
                    if (!out[0][i]) continue;
                    cr_assert(th_same_bits(out[0][i], out[1][i]),
                              "(%lld, %lld, %lld) %s training %d affine %d: %s differs",
                              (long long)xs[0], (long long)xs[1], (long long)xs[2],
                              tg_dtype_name(dt), training, affine, names[i]);
                    tg_tensor_release(out[0][i]), tg_tensor_release(out[1][i]);
                }
                tg_tensor_release(u), tg_tensor_release(x32), tg_tensor_release(x);
                tg_tensor_release(gy);
            }
}

/* bn_sum's order, written out: term i of a row into acc[i mod 4], rows in
 * turn, then (acc0 + acc1) + (acc2 + acc3). */
static double ref_sum(const float *x, const float *gr, double mean, int kind, int64_t n,
                      int64_t rstride, int64_t s)
{
    double acc[4] = {0, 0, 0, 0};
    for (int64_t r = 0; r < n; r++)
        for (int64_t i = 0; i < s; i++) {
            const double v = (double)x[r * rstride + i] - mean;
            acc[i & 3] += kind == 2 ? (double)gr[r * rstride + i] * v : kind == 1 ? v * v : v;
        }
    return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

/* tg__bn_sum4_f32 directly, on values over twelve binary orders of
 * magnitude (where any other order of the adds shows in the last bits),
 * every row length 1..11 and 1..4 rows, channels s apart in rows of
 * rstride > 4s. */
Test(norm_simd, sum4_is_bn_sums_order_bit_for_bit)
{
    float x[5 * 64], g[5 * 64];
    uint64_t st = 0x9E3779B97F4A7C15u;
    for (int i = 0; i < 5 * 64; i++) {
        const double u = (th_uniform_pm1(&st) + 1) / 2;   /* [0, 1) */
        x[i] = (float)((u - 0.3) * (double)(1 << (i % 13)));
        g[i] = (float)((0.7 - u) * (double)(1 << ((i * 7) % 11)));
    }
    const double mean[4] = {0.25, -3.5, 17.0, 0.0};
    double out[4];
    if (!tg__bn_sum4_f32(x, NULL, mean, false, 1, 64, 1, out)) {
        printf("norm_simd: this CPU lacks AVX2, so tg__bn_sum4_f32 declines (checked below)\n");
        for (int k = 0; k < 4; k++) out[k] = -1;
        cr_assert(not(tg__bn_sum4_f32(x, g, mean, false, 2, 64, 3, out)));
        cr_assert(eq(dbl, out[0], -1.0));
        return;
    }
    for (int kind = 0; kind < 3; kind++)
        for (int64_t n = 1; n <= 4; n++)
            for (int64_t s = 1; s <= 11; s++) {
                cr_assert(tg__bn_sum4_f32(x, kind == 2 ? g : NULL, mean, kind == 1, n, 64, s, out));
                for (int k = 0; k < 4; k++) {
                    const double want = ref_sum(x + k * s, g + k * s, mean[k], kind, n, 64, s);
                    cr_assert(eq(int, memcmp(&out[k], &want, sizeof want), 0),
                              "kind %d n %lld s %lld channel %d: %.17g, want %.17g", kind,
                              (long long)n, (long long)s, k, out[k], want);
                }
            }
    tg__bn_set_simd(false);
    cr_assert(not(tg__bn_sum4_f32(x, NULL, mean, false, 1, 64, 4, out)));
    tg__bn_set_simd(true);
}
