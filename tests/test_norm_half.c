/* tests/test_norm_half.c - batch_norm's half blocks (src/ops/norm.c,
 * norm_simd.c), whose kernels read f16/bf16 channels in place, against the
 * f32 kernels on an f32 copy of the whole tensor rounded once
 * (tg__bn_set_half_blocks(false)): the same bits for y, the running
 * buffers, dx, dweight and dbias, on 1 and 2 threads, with the AVX-512
 * loops, the AVX2 ones (tg__isa_set_bound) and the portable ones
 * (tg__bn_set_simd), as far as the CPU and TG_MAX_ISA allow (the suite
 * runs again under TG_MAX_ISA=avx2 and =portable: docs/testing.md).
 * And tg__bn_half_sums directly against bn_sum's order. */
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "helpers.h"
#include "norm_fixtures.h"
#include "core/core.h"
#include "ops/norm_internal.h"
#include "tapegrad/tapegrad.h"

enum { NOUT = 7 };
static const char *const names[NOUT] = {"y",  "running_mean", "running_var", "dx (given gy)",
                                        "dweight", "dbias", "dx (gy reused)"};

/* y, the running buffers and the gradients of one batch_norm of x: with
 * the given gy (kept by the caller, so dx is a new tensor), then again
 * from sum(y * gy) (the gradient of y a fresh tensor, which dx may
 * overwrite).  Under autocast when half_out (y in x's dtype), else y is
 * the promotion of x and the f32 weight and bias (x's dtype without
 * them).  blocks: the half blocks, else the f32 copy
 * of the whole tensor. */
static void run(tg_tensor *x, tg_tensor *gy, bool training, bool affine, bool half_out,
                bool blocks, tg_tensor *out[NOUT])
{
    const tg_dtype dt = tg_tensor_dtype(x);
    bn_args a = bn_args_of(x, affine);
    tg_tensor *leaf = a.leaf, *rm = a.rm, *rv = a.rv, *w = a.w, *b = a.b;
    tg_tensor *y = NULL, *y2 = NULL, *prod = NULL, *loss = NULL;
    tg__bn_set_half_blocks(blocks);
    if (half_out) cr_assert(eq(int, tg_autocast_begin(dt), TG_OK));
    int rc = tg_batch_norm(&y, leaf, rm, rv, w, b, training, 0.1, 1e-5);
    cr_assert(eq(int, rc, TG_OK), "%s", tg_error_message());
    cr_assert(eq(int, tg_tensor_dtype(y), half_out || !affine ? dt : TG_F32));
    tg_tensor *in[3] = {leaf, w, b}, *gi[3] = {NULL, NULL, NULL}, *gi2 = NULL;
    tg_tensor *gyo = NULL;   /* gy in y's dtype */
    cr_assert(eq(int, tg_tensor_to_dtype(&gyo, gy, tg_tensor_dtype(y)), TG_OK));
    rc = tg_grad(gi, 1, &y, &gyo, w ? 3 : 1, in, NULL);
    cr_assert(eq(int, rc, TG_OK), "%s", tg_error_message());
    /* again, dx from a gradient of y that nothing else holds */
    rc = tg_batch_norm(&y2, leaf, NULL, NULL, w, b, true, 0.1, 1e-5);
    cr_assert(eq(int, rc, TG_OK), "%s", tg_error_message());
    cr_assert(eq(int, tg_mul(&prod, y2, gyo), TG_OK));
    cr_assert(eq(int, tg_sum(&loss, prod), TG_OK));
    rc = tg_grad(&gi2, 1, &loss, NULL, 1, &leaf, NULL);
    if (half_out) tg_autocast_end();
    tg__bn_set_half_blocks(true);
    cr_assert(eq(int, rc, TG_OK), "%s", tg_error_message());
    tg_tensor *got[NOUT] = {y, rm, rv, gi[0], gi[1], gi[2], gi2};
    memcpy(out, got, sizeof got);
    bn_args_release(&a);
    tg_tensor_release(y2), tg_tensor_release(prod), tg_tensor_release(loss);
    tg_tensor_release(gyo);
}

/* Odd (N, C, S) with rows of 16 values and more (the half blocks' rule),
 * every row tail mod 4, 8 and 16, channel counts with and without a
 * remainder of four, and shapes large enough to share among threads (the
 * DCGAN's 7x7 layer at N = 64 among them, several blocks a thread). */
Test(norm_half, blocks_read_in_place_same_bits_as_f32_copy)
{
    if (!tg__cpu_has_half_simd())
        printf("norm_half: this CPU lacks AVX2/F16C (or TG_MAX_ISA bars it): portable loops\n");
    const int64_t shapes[][3] = {{3, 5, 17}, {2, 9, 18}, {3, 7, 19}, {2, 4, 16}, {5, 13, 23},
                                 {1, 3, 37}, {3, 6, 31}, {2, 5, 24}, {64, 24, 49}, {8, 19, 257},
                                 {2, 1, 1025}};
    const int nshapes = (int)(sizeof shapes / sizeof shapes[0]);
    const tg_dtype dts[2] = {TG_BF16, TG_F16};
    const int threads0 = tg_get_num_threads();
    for (int k = 0; k < nshapes; k++)
        for (int d = 0; d < 2; d++)
            for (int mode = 0; mode < 48; mode++) {
                const bool training = mode & 1, affine = mode & 2, half_out = mode & 4;
                const int threads = mode & 8 ? 2 : 1;
                const int lvl = mode / 16;   /* 0 portable, 1 AVX2 at most, 2 any */
                const int64_t xs[3] = {shapes[k][0], shapes[k][1], shapes[k][2]};
                const tg_dtype dt = dts[d];
                /* values about 1.5, so that the centred sums differ from the plain ones */
                tg_tensor *u = th_rand_uniform(TG_F32, 3, xs, 501 + k), *x32 = NULL, *x = NULL;
                cr_assert(eq(int, tg_add_scalar(&x32, u, 1.5), TG_OK));
                cr_assert(eq(int, tg_tensor_to_dtype(&x, x32, dt), TG_OK));
                tg_tensor *gy = th_rand_uniform(dt, 3, xs, 511 + k);
                tg_tensor *out[2][NOUT];
                cr_assert(eq(int, tg_set_num_threads(threads), TG_OK));
                tg__bn_set_simd(lvl > 0);
                const int bound = lvl == 1 ? tg__isa_set_bound(TG__ISA_AVX2) : -2;
                run(x, gy, training, affine, half_out, false, out[0]);
                run(x, gy, training, affine, half_out, true, out[1]);
                if (bound != -2) tg__isa_set_bound(bound);
                tg__bn_set_simd(true);
                cr_assert(eq(int, tg_set_num_threads(threads0), TG_OK));
                for (int i = 0; i < NOUT; i++) {
                    cr_assert(eq(int, out[0][i] == NULL, out[1][i] == NULL));
                    if (!out[0][i]) continue;
                    cr_assert(th_same_bits(out[0][i], out[1][i]),
                              "(%lld, %lld, %lld) %s training %d affine %d half y %d level %d "
                              "threads %d: %s differs",
                              (long long)xs[0], (long long)xs[1], (long long)xs[2],
                              tg_dtype_name(dt), training, affine, half_out, lvl, threads,
                              names[i]);
                    tg_tensor_release(out[0][i]), tg_tensor_release(out[1][i]);
                }
                tg_tensor_release(u), tg_tensor_release(x32), tg_tensor_release(x);
                tg_tensor_release(gy);
            }
}

/* bn_sum's order on the widened values, written out: term i of a row into
 * acc[i mod 4], rows in turn, then (acc0 + acc1) + (acc2 + acc3). */
static double ref_sum(tg_dtype dt, const uint16_t *x, const uint16_t *gr, double mean, int kind,
                      int64_t n, int64_t rstride, int64_t s)
{
    double acc[4] = {0, 0, 0, 0};
    for (int64_t r = 0; r < n; r++)
        for (int64_t i = 0; i < s; i++) {
            const int64_t e = r * rstride + i;
            const double xv = dt == TG_F16 ? tg_f16_to_f32(x[e]) : tg_bf16_to_f32(x[e]);
            const double v = xv - mean;
            double q = 0;
            if (kind == 2) q = dt == TG_F16 ? tg_f16_to_f32(gr[e]) : tg_bf16_to_f32(gr[e]);
            acc[i & 3] += kind == 2 ? q * v : kind == 1 ? v * v : v;
        }
    return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

/* tg__bn_half_sums directly, AVX-512, AVX2 and portable (as far as the CPU
 * and TG_MAX_ISA allow), on halves over twelve binary orders of magnitude
 * (where any other order of the adds shows in the last bits): every row
 * length 1..40 (each loop of sixteen, eight, four values and the tail),
 * 1..4 rows, 1..6 channels (four
 * at once and the rest one by one), centred on a mean per channel or 0. */
Test(norm_half, half_sums_are_bn_sums_order_bit_for_bit)
{
    enum { C = 6, S = 40, N = 4 };
    uint16_t x[2][N * C * S], g[2][N * C * S];
    uint64_t st = 0x9E3779B97F4A7C15u;
    const tg_dtype dts[2] = {TG_BF16, TG_F16};
    for (int i = 0; i < N * C * S; i++) {
        const double u = (th_uniform_pm1(&st) + 1) / 2;   /* [0, 1) */
        const float xv = (float)((u - 0.3) * (double)(1 << (i % 13)));
        const float gv = (float)((0.7 - u) * (double)(1 << ((i * 7) % 11)));
        x[0][i] = tg_f32_to_bf16(xv), g[0][i] = tg_f32_to_bf16(gv);
        x[1][i] = tg_f32_to_f16(xv), g[1][i] = tg_f32_to_f16(gv);
    }
    /* means no binary fraction holds, so that x - mean rounds and the sums
     * depend on the order of their adds */
    const double mean[C] = {1.0 / 3, -3.7, 17.0 / 7, 0.1, 2.0 / 3, -0.3};
    for (int d = 0; d < 2; d++)
        for (int simd = 0; simd <= tg__bn_half_simd(); simd++)   /* portable, AVX2, AVX-512 */
            for (int kind = 0; kind < 4; kind++)   /* 3: kind 0 about 0 (mean NULL) */
                for (int64_t n = 1; n <= N; n++)
                    for (int64_t s = 1; s <= S; s++)
                        for (int64_t nc = 1; nc <= C; nc++) {
                            const tg__bn_geom geo = {n, C, s};
                            const uint16_t *gr = kind == 2 ? g[d] : NULL;
                            const double *mu = kind == 3 ? NULL : mean;
                            double out[C];
                            tg__bn_half_sums(dts[d], x[d], gr, mu, kind == 1, geo, nc, out,
                                             simd);
                            for (int64_t k = 0; k < nc; k++) {
                                const double want =
                                    ref_sum(dts[d], x[d] + k * s, gr ? gr + k * s : NULL,
                                            mu ? mu[k] : 0.0, kind == 3 ? 0 : kind, n, C * s, s);
                                cr_assert(eq(int, memcmp(&out[k], &want, sizeof want), 0),
                                          "%s simd %d kind %d n %lld s %lld nc %lld channel "
                                          "%lld: %.17g, want %.17g",
                                          tg_dtype_name(dts[d]), simd, kind, (long long)n,
                                          (long long)s, (long long)nc, (long long)k, out[k],
                                          want);
                            }
                        }
}

/* The row kernels of the forward (tg__bn_half_affine) and of dx
 * (tg__bn_half_dx, into a separate row and in place over q) on every row
 * length 1..70, each level the CPU and TG_MAX_ISA allow against the
 * portable loop: the AVX-512 loops end a row of 16 or more with its last
 * sixteen values again (overlapping the vectors before them), shorter rows
 * go to AVX2.  The values before and past the row are left as they were. */
Test(norm_half, row_kernels_every_length_same_bits_as_portable)
{
    enum { NMAX = 70, PAD = 20 };
    uint16_t p[NMAX], q[NMAX], want[PAD + NMAX + PAD], got[PAD + NMAX + PAD];
    uint16_t *const w = want + PAD, *const o = got + PAD;   /* the rows */
    uint64_t st = 0xD1B54A32D192ED03u;
    const tg_dtype dts[2] = {TG_BF16, TG_F16};
    const tg__bn_dx_factors f = {.kt = 1.3f, .mu = 0.37f, .a = -0.21f, .bc = 0.83f};
    for (int d = 0; d < 2; d++)
        for (int64_t n = 1; n <= NMAX; n++) {
            for (int64_t i = 0; i < n; i++) {
                const float pv = (float)(3 * th_uniform_pm1(&st));
                const float qv = (float)(2 * th_uniform_pm1(&st));
                p[i] = dts[d] == TG_F16 ? tg_f32_to_f16(pv) : tg_f32_to_bf16(pv);
                q[i] = dts[d] == TG_F16 ? tg_f32_to_f16(qv) : tg_f32_to_bf16(qv);
            }
            for (int simd = 1; simd <= tg__bn_half_simd(); simd++)
                for (int op = 0; op < 3; op++) {   /* affine, dx, dx in place */
                    memset(want, 0x5A, sizeof want);
                    memset(got, 0x5A, sizeof got);
                    if (op == 2) memcpy(w, q, (size_t)n * 2), memcpy(o, q, (size_t)n * 2);
                    if (op == 0) {
                        tg__bn_half_affine(dts[d], p, n, 0.37f, 1.7f, -0.4f, w, 0);
                        tg__bn_half_affine(dts[d], p, n, 0.37f, 1.7f, -0.4f, o, simd);
                    } else {
                        tg__bn_half_dx(dts[d], p, op == 2 ? w : q, n, &f, w, 0);
                        tg__bn_half_dx(dts[d], p, op == 2 ? o : q, n, &f, o, simd);
                    }
                    cr_assert(eq(int, memcmp(got, want, sizeof want), 0),
                              "%s n %lld simd %d op %d: other bits", tg_dtype_name(dts[d]),
                              (long long)n, simd, op);
                }
        }
}
