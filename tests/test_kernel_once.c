/* Tests of the kernel choices that an op asks once per call and passes
 * down (the conversion kernel of the half stores and loads, col2im's
 * kernel): the environment is still read at every call, and every kernel
 * passed gives the bits of the portable one; and of the im2col of small
 * bf16 planes by permutes (tg__conv_perm_plane), for every count of
 * register pairs, against the plain gather through the same table, and of
 * larger planes of short rows a row at a time (tg__conv_rowperm_plane)
 * against the table-driven copy. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "core/core.h"
#include "ops/conv_internal.h"
#include "tapegrad/tapegrad.h"

static uint64_t rng = 0x9E3779B97F4A7C15u;

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static uint32_t next_u32(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

/* The conversion kernels this CPU runs, PORTABLE first; returns how many. */
static int runnable_casts(tg__cast *ks)
{
    int n = 0;
    for (int k = TG__CAST_PORTABLE; k <= TG__CAST_AVX512; k++) {
        tg__set_cast_kernel((tg__cast)k);
        if (tg__cast_kernel() == (tg__cast)k) ks[n++] = (tg__cast)k;
    }
    tg__set_cast_kernel(TG__CAST_AUTO);
    return n;
}

/* tg__conv_acts takes the conversion and col2im kernels into the geometry
 * from the environment as it is at that call: TG_CAST_KERNEL and
 * TG_COL2IM_KERNEL changed between two calls are both honoured. */
Test(kernel_once, conv_geometry_takes_the_kernels_of_the_environment_at_each_call)
{
    tg_tensor *x = th_rand_uniform(TG_BF16, 4, (int64_t[]){2, 3, 5, 5}, 7);
    const void *xb;
    void *xo;
    cr_assert(eq(int, setenv("TG_CAST_KERNEL", "portable", 1), 0));
    cr_assert(eq(int, setenv("TG_COL2IM_KERNEL", "portable", 1), 0));
    tg__conv_geom g;
    memset(&g, 0, sizeof g);
    tg__conv_acts(&g, TG_F32, x, NULL, &xb, NULL, &xo, NULL);
    cr_assert(eq(int, g.cast, TG__CAST_PORTABLE));
    cr_assert(eq(int, g.col2im, TG__CONV_COL2IM_PORTABLE));
    cr_assert(eq(int, tg__conv_cast(&g), TG__CAST_PORTABLE));
    cr_assert(eq(int, unsetenv("TG_CAST_KERNEL"), 0));
    cr_assert(eq(int, unsetenv("TG_COL2IM_KERNEL"), 0));
    memset(&g, 0, sizeof g);
    tg__conv_acts(&g, TG_F32, x, NULL, &xb, NULL, &xo, NULL);
    cr_assert(eq(int, g.cast, tg__cast_kernel()));
    cr_assert(eq(int, g.col2im, tg__conv_col2im_kernel()));
    /* a zeroed geometry asks where the kernel is used */
    memset(&g, 0, sizeof g);
    cr_assert(eq(int, tg__conv_cast(&g), tg__cast_kernel()));
    cr_assert(eq(int, tg__conv_col2im_of(&g), tg__conv_col2im_kernel()));
    tg_tensor_release(x);
}

/* tg__half_add_round, tg__f32_to_half_k and tg__half_to_f32_k with each
 * kernel this CPU runs (and AUTO) give the scalar conversions' bits, for
 * lengths around the vector widths, with and without the bias. */
Test(kernel_once, conversions_given_a_kernel_give_the_scalar_bits)
{
    tg__cast ks[4];
    int nk = runnable_casts(ks);
    ks[nk++] = TG__CAST_AUTO;
    enum { N = 70 };
    float src[N], back[N];
    uint16_t want[N], got[N], half[N];
    for (int i = 0; i < N; i++) {
        const uint32_t b = next_u32();
        src[i] = (float)((int32_t)b % 100000) / 977.0f;
        if (i % 11 == 3) src[i] = -0.0f;
    }
    const tg_dtype dts[2] = {TG_BF16, TG_F16};
    for (int d = 0; d < 2; d++)
        for (int64_t n = 0; n <= N; n++)
            for (int add = 0; add < 2; add++)
                for (int k = 0; k < nk; k++) {
                    const float bias = add ? 0.3125f : 0.0f;
                    for (int64_t i = 0; i < n; i++)
                        want[i] = add ? tg__f32_to_half(dts[d], src[i] + bias)
                                      : tg__f32_to_half(dts[d], src[i]);
                    memset(got, 0xAB, sizeof got);
                    tg__half_add_round(dts[d], src, add, bias, got, n, ks[k]);
                    cr_assert(memcmp(got, want, (size_t)n * 2) == 0,
                              "%s n=%lld add=%d kernel %d", tg_dtype_name(dts[d]), (long long)n,
                              add, (int)ks[k]);
                    if (add) continue;
                    memset(half, 0xAB, sizeof half);
                    tg__f32_to_half_k(dts[d], src, half, n, ks[k]);
                    cr_assert(memcmp(half, want, (size_t)n * 2) == 0, "f32_to_half_k n=%lld k=%d",
                              (long long)n, (int)ks[k]);
                    tg__half_to_f32_k(dts[d], half, back, n, ks[k]);
                    for (int64_t i = 0; i < n; i++)
                        cr_assert(eq(u32, bits_of(back[i]),
                                     bits_of(dts[d] == TG_BF16 ? tg_bf16_to_f32(want[i])
                                                               : tg_f16_to_f32(want[i]))),
                                  "half_to_f32_k n=%lld i=%lld k=%d", (long long)n, (long long)i,
                                  (int)ks[k]);
                }
}

/* The permutes give the gather's columns for every plane size below
 * TG__CONV_PERM_PLANE (1 to 4 register pairs), with padding entries
 * (pointing at the zero after the plane) and column counts that do and do
 * not fill whole vectors. */
Test(kernel_once, perm_plane_gives_the_gather_for_every_plane_size)
{
    if (!tg__conv_perm_usable(1)) cr_skip_test("the permutes need AVX-512 BW");
    enum { KMAX = 5, OMAX = 70 };
    static uint16_t plane[TG__CONV_PERM_PLANE + 1], got[KMAX * OMAX], want[KMAX * OMAX];
    static int32_t tab[KMAX * OMAX];
    for (int64_t isz = 0; isz < TG__CONV_PERM_PLANE; isz++) {
        for (int64_t i = 0; i < isz; i++) plane[i] = (uint16_t)(next_u32() | 1u);
        plane[isz] = 0;
        const int64_t ksz = 1 + next_u32() % KMAX, osz = 1 + next_u32() % OMAX;
        for (int64_t e = 0; e < ksz * osz; e++)
            tab[e] = next_u32() % 5 == 0 ? (int32_t)isz : (int32_t)(next_u32() % (isz + 1));
        uint16_t *idx = tg__conv_perm_table(tab, ksz, osz);
        cr_assert(idx != NULL);
        memset(got, 0xAB, sizeof got);
        tg__conv_perm_plane(plane, isz, idx, ksz, osz, got, OMAX);
        for (int64_t k = 0; k < ksz; k++)
            for (int64_t o = 0; o < osz; o++) want[k * OMAX + o] = plane[tab[k * osz + o]];
        for (int64_t k = 0; k < ksz; k++)
            cr_assert(memcmp(got + k * OMAX, want + k * OMAX, (size_t)osz * 2) == 0,
                      "isz %lld ksz %lld osz %lld: tap %lld", (long long)isz, (long long)ksz,
                      (long long)osz, (long long)k);
        free(idx);
    }
}

/* Outputs of a DCGAN-shaped bf16 conv (14x14 planes, 4x4 taps, stride 2,
 * padding 1: the permutes on four register pairs) and conv_transpose
 * (col2im and the half store of the results), their bias included. */
typedef struct outs {
    tg_tensor *y, *yt;
} outs;

static outs run_layers(void)
{
    tg_tensor *x = th_rand_uniform(TG_BF16, 4, (int64_t[]){3, 8, 14, 14}, 11);
    tg_tensor *w = th_rand_uniform(TG_BF16, 4, (int64_t[]){16, 8, 4, 4}, 12);
    tg_tensor *b = th_rand_uniform(TG_BF16, 1, (int64_t[]){16}, 13);
    tg_tensor *bt = th_rand_uniform(TG_BF16, 1, (int64_t[]){8}, 14);
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    p.stride[0] = p.stride[1] = 2;
    tg_conv_params_set_padding(&p, 1);
    outs o = {NULL, NULL};
    cr_assert(eq(int, tg_conv(&o.y, x, w, b, &p), TG_OK), "%s", tg_error_message());
    cr_assert(eq(int, tg_conv_transpose(&o.yt, o.y, w, bt, &p), TG_OK), "%s",
              tg_error_message());
    th_release_all(4, (tg_tensor *[]){x, w, b, bt});
    return o;
}

static void same_bits(const char *what, const tg_tensor *a, const tg_tensor *b)
{
    cr_assert(eq(i64, tg_tensor_numel(a), tg_tensor_numel(b)));
    cr_assert(memcmp(tg_tensor_cdata(a), tg_tensor_cdata(b), (size_t)tg_tensor_numel(a) * 2) == 0,
              "%s: other bits", what);
}

/* The same bits on 1 and 2 threads, with the portable conversion and col2im
 * kernels chosen through the environment, and with the table-driven copy
 * instead of the permutes. */
Test(kernel_once, bf16_conv_layers_same_bits_for_kernels_threads_and_copies)
{
    const int threads = tg_get_num_threads();
    tg_set_num_threads(1);
    outs ref = run_layers();
    for (int nt = 1; nt <= 2; nt++) {
        tg_set_num_threads(nt);
        outs a = run_layers();
        cr_assert(eq(int, setenv("TG_CAST_KERNEL", "portable", 1), 0));
        cr_assert(eq(int, setenv("TG_COL2IM_KERNEL", "portable", 1), 0));
        outs p = run_layers();
        cr_assert(eq(int, unsetenv("TG_CAST_KERNEL"), 0));
        cr_assert(eq(int, unsetenv("TG_COL2IM_KERNEL"), 0));
        tg__conv_set_perm(false);
        outs c = run_layers();
        tg__conv_set_perm(true);
        same_bits("conv", a.y, ref.y);
        same_bits("conv_transpose", a.yt, ref.yt);
        same_bits("conv (portable kernels)", p.y, ref.y);
        same_bits("conv_transpose (portable kernels)", p.yt, ref.yt);
        same_bits("conv (copied columns)", c.y, ref.y);
        same_bits("conv_transpose (copied columns)", c.yt, ref.yt);
        th_release_all(6, (tg_tensor *[]){a.y, a.yt, p.y, p.yt, c.y, c.yt});
    }
    th_release_all(2, (tg_tensor *[]){ref.y, ref.yt});
    tg_set_num_threads(threads);
}

/* bf16 reductions and elementwise ops, whose runs and chunks are converted
 * by the kernel asked once per call: the same bits on 1 and 2 threads and
 * with TG_CAST_KERNEL=portable. */
Test(kernel_once, bf16_sums_and_products_same_bits_for_kernels_and_threads)
{
    const int threads = tg_get_num_threads();
    tg_tensor *a = th_rand_uniform(TG_BF16, 3, (int64_t[]){40, 30, 700}, 21);
    tg_tensor *b = th_rand_uniform(TG_BF16, 3, (int64_t[]){40, 30, 700}, 22);
    tg_tensor *ref[3] = {NULL, NULL, NULL};
    for (int run = 0; run < 3; run++) {
        tg_set_num_threads(run == 1 ? 2 : 1);
        if (run == 2) cr_assert(eq(int, setenv("TG_CAST_KERNEL", "portable", 1), 0));
        tg_tensor *o[3] = {NULL, NULL, NULL};
        cr_assert(eq(int, tg_sum_dims(&o[0], a, 1, (int[]){2}, false), TG_OK));
        cr_assert(eq(int, tg_sum_dims(&o[1], a, 2, (int[]){0, 1}, false), TG_OK));
        cr_assert(eq(int, tg_mul(&o[2], a, b), TG_OK));
        cr_assert(eq(int, unsetenv("TG_CAST_KERNEL"), 0));
        for (int i = 0; i < 3; i++) {
            if (run == 0) {
                ref[i] = o[i];
                continue;
            }
            same_bits(i == 2 ? "mul" : "sum", o[i], ref[i]);
            tg_tensor_release(o[i]);
        }
    }
    th_release_all(3, ref);
    th_release_all(2, (tg_tensor *[]){a, b});
    tg_set_num_threads(threads);
}

/* im2col of bf16 planes of 256 elements or more whose rows are at most 32
 * wide, a column row per permute of an image row (tg__conv_rowperm_plane),
 * gives the columns of the table-driven copy (tg__conv_set_perm(false))
 * over image widths 1..32, kernels, strides, paddings and dilations that
 * put taps outside the rows on either side, in 2-D and 3-D, with 3 images
 * of 2 channels. */
Test(kernel_once, rowperm_im2col_same_columns_as_table_copy)
{
    if (!tg__cpu_has_avx512bw()) cr_skip_test("the permutes need AVX-512 BW");
    static const int64_t widths[] = {1, 2, 5, 13, 16, 17, 28, 31, 32};
    static const int64_t kspd[][4] = {{4, 2, 1, 1}, {3, 1, 1, 1}, {2, 3, 0, 1},
                                      {3, 2, 2, 2}, {1, 1, 0, 1}, {5, 1, 4, 1}};
    int used = 0;
    for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; wi++)
        for (size_t c = 0; c < sizeof kspd / sizeof kspd[0]; c++)
            for (int nd = 2; nd <= 3; nd++) {
                const int64_t iw = widths[wi], k = kspd[c][0];
                const int64_t ih = 300 / iw + 3, id = nd == 3 ? 3 : 1;
                int64_t xs[5] = {3, 2, 0, 0, 0}, ws[5] = {4, 2, 0, 0, 0}, ys[5];
                tg_conv_params p = TG_CONV_PARAMS_INIT;
                const int64_t ext[3] = {id, ih, iw};
                for (int a = 0; a < nd; a++) {
                    const int ax = 3 - nd + a;   /* the geometry's axis */
                    xs[2 + a] = ext[ax];
                    ws[2 + a] = ax == 0 ? 2 : k;
                    p.stride[a] = ax == 0 ? 1 : kspd[c][1];
                    p.padding[a][0] = p.padding[a][1] = ax == 0 ? 1 : kspd[c][2];
                    p.dilation[a] = ax == 0 ? 1 : kspd[c][3];
                }
                if (tg_conv_output_size(ys + 2, nd, xs + 2, ws + 2, &p) < 0) continue;
                tg_tensor *x = th_rand_uniform(TG_BF16, 2 + nd, xs, 41);
                tg_tensor *w = th_rand_uniform(TG_BF16, 2 + nd, ws, 42);
                tg__conv_geom g;
                cr_assert(eq(int, tg__conv_validate(false, x, w, NULL, &p, &g, ys), TG_OK),
                          "%s", tg_error_message());
                g.half_in = TG_BF16;
                g.bits = true;
                used += tg__conv_rowperm_usable(&g) && tg__conv_prod3(g.img) >= 256;
                const int64_t n = g.c_img * tg__conv_prod3(g.k) * g.batch * tg__conv_prod3(g.col);
                uint16_t *cols[2];
                for (int v = 0; v < 2; v++) {
                    cols[v] = malloc((size_t)n * sizeof *cols[v]);
                    cr_assert(cols[v] != NULL);
                    memset(cols[v], 0xAB, (size_t)n * sizeof *cols[v]);
                    tg__conv_set_perm(v == 0);
                    cr_assert(eq(int, tg__conv_im2col_batch_bf16(tg_tensor_cdata(x), g.batch,
                                                                 g.c_img, &g, cols[v]),
                                 TG_OK));
                }
                tg__conv_set_perm(true);
                cr_assert(eq(int, memcmp(cols[0], cols[1], (size_t)n * sizeof *cols[0]), 0),
                          "%dd width %lld case %zu: other columns", nd, (long long)iw, c);
                free(cols[0]), free(cols[1]);
                th_release_all(2, (tg_tensor *[]){x, w});
            }
    cr_assert(used > 60, "the row permutes ran on %d cases", used);
}
