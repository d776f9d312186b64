/* tests/test_conv_fast_half.c - the f16/bf16 kernels of conv,
 * conv_transpose and the weight gradient: contiguous half activations read
 * in place and strided ones through an f32 copy both give the f32 results
 * rounded once, forwards with bias and backwards, over every kernel path. */
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "helpers.h"
#include "conv_fast_fixtures.h"
#include "tapegrad/tapegrad.h"
#include "ops/conv_internal.h"
#include "tapegrad/autograd.h"
#include "tapegrad/conv.h"
#include "tapegrad/ops.h"

/* A random half tensor of shape s three times, as leaves that require
 * grad: contiguous (v[0]), a strided view of the same values (v[1]: the
 * first two axes swapped in memory, or every other element for one axis)
 * and its f32 copy (v[2]). */
static void half_triple(tg_dtype dt, int nd, const int64_t *s, tg_tensor **v)
{
    int64_t bs[5];
    memcpy(bs, s, sizeof(int64_t) * (size_t)nd);
    if (nd == 1) bs[0] = 2 * s[0];
    else bs[0] = s[1], bs[1] = s[0];
    tg_tensor *base = mk_rand(dt, nd, bs), *vt = NULL, *cc = NULL, *f = NULL;
    cr_assert(eq(int, nd == 1 ? tg_slice(&vt, base, 0, 0, bs[0], 2) : tg_transpose(&vt, base, 0, 1),
                 TG_OK));
    cr_assert(eq(int, tg_contiguous(&cc, vt), TG_OK));
    cr_assert(not(tg_tensor_is_contiguous(vt)));
    cr_assert(eq(int, tg_tensor_to_dtype(&f, cc, TG_F32), TG_OK));
    tg_tensor *src[3] = {cc, vt, f};
    for (int k = 0; k < 3; k++) {
        cr_assert(eq(int, tg_tensor_detach(&v[k], src[k]), TG_OK));
        tg_tensor_set_requires_grad(v[k], true);
        tg_tensor_release(src[k]);
    }
    tg_tensor_release(base);
}

/* conv(x, w, b), conv_transpose(xt, w, bt), conv_weight_grad(x, u) and the
 * gradients (x, w) of both convs for output gradients gy[0..1]: 7 tensors. */
static void half_ops(tg_tensor *x, tg_tensor *xt, tg_tensor *u, tg_tensor *w, tg_tensor *b,
                     tg_tensor *bt, tg_tensor *const *gy, const tg_conv_params *p, tg_tensor **out)
{
    tg_tensor *y[2] = {NULL, NULL}, *in[2][2] = {{x, w}, {xt, w}};
    cr_assert(eq(int, tg_conv(&y[0], x, w, b, p), TG_OK), "%s", tg_error_message());
    cr_assert(eq(int, tg_conv_transpose(&y[1], xt, w, bt, p), TG_OK), "%s", tg_error_message());
    cr_assert(eq(int, tg_conv_weight_grad(&out[2], x, u, tg_tensor_ndim(w), tg_tensor_shape(w), p),
                 TG_OK), "%s", tg_error_message());
    for (int k = 0; k < 2; k++) {
        tg_tensor *r = gy[k];
        cr_assert(eq(int, tg_grad(out + 3 + 2 * k, 1, &y[k], &r, 2, in[k], NULL), TG_OK), "%s",
                  tg_error_message());
        out[k] = y[k];
    }
}

/* The f16/bf16 GEMM kernels read contiguous half activations in place,
 * converting chunk by chunk (im2col's planes, pack's rows, or one chunk at a
 * time for large planes; the phase kernel converts x whole), and round their
 * half outputs in chunk by chunk with the bias added (the phase kernel: whole).
 * A strided x takes the whole-tensor f32 copy instead.  Either way every
 * result must be the f32 computation on the same values, rounded once: the
 * forwards with bias, the weight gradient op and the backwards of conv and
 * conv_transpose (the latter fused), with several samples per chunk and one,
 * over the table path of small and large planes, the row path, a pointwise
 * kernel and the phase kernel. */
Test(conv_fast_half, half_kernels_round_the_f32_results)
{
    struct { int nsp; int64_t cin, cout, img[3], k[3], stride[3], dil[3], pad[3]; int64_t groups; } cs[] = {
        {2, 6, 4, {14, 14}, {4, 4}, {2, 2}, {1, 1}, {1, 1}, 1},      /* DCGAN's: small planes */
        {1, 4, 6, {4500}, {5}, {150}, {1}, {0}, 2},                    /* a plane over 4096 */
        {2, 4, 6, {9, 40}, {3, 3}, {1, 1}, {1, 1}, {0, 0}, 1},       /* rows of 38: row path */
        {2, 4, 6, {5, 6}, {1, 1}, {1, 1}, {1, 1}, {0, 0}, 1},        /* pointwise */
        {3, 4, 6, {5, 6, 7}, {2, 3, 2}, {2, 1, 2}, {1, 2, 1}, {1, 0, 2}, 2},
        {2, 48, 8, {32, 32}, {4, 4}, {2, 2}, {1, 1}, {1, 1}, 1},     /* conv_transpose by phases */
    };
    const tg_dtype halves[2] = {TG_F16, TG_BF16};
    /* bf16 on the kernel that sums as sgemm does (the others' sums are
     * checked against f64 in test_bf16_gemm_ops.c) */
    cr_assert(eq(int, tg_bf16_kernel_set(TG_BF16_KERNEL_PORTABLE), TG_OK));
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++)
        for (int h = 0; h < 2; h++)
            for (int64_t chunk = 0; chunk <= 2; chunk++) {
                const tg_dtype dt = halves[h];
                const int nsp = cs[c].nsp;
                tg_conv_params p = TG_CONV_PARAMS_INIT;
                p.groups = cs[c].groups;
                int64_t xs[5] = {3, cs[c].cin}, ws[5] = {cs[c].cout, cs[c].cin / cs[c].groups};
                int64_t ys[5] = {3, cs[c].cout}, ts[5] = {3, cs[c].cin};
                for (int a = 0; a < nsp; a++) {
                    p.stride[a] = cs[c].stride[a];
                    p.dilation[a] = cs[c].dil[a];
                    p.padding[a][0] = p.padding[a][1] = cs[c].pad[a];
                    xs[2 + a] = cs[c].img[a];
                    ws[2 + a] = cs[c].k[a];
                }
                cr_assert(eq(int, tg_conv_output_size(ys + 2, nsp, xs + 2, ws + 2, &p), TG_OK),
                          "%s", tg_error_message());
                for (int a = 0; a < nsp; a++)   /* conv_transpose(xt)'s extents */
                    ts[2 + a] = (ys[2 + a] - 1) * p.stride[a] - 2 * p.padding[a][0] +
                                p.dilation[a] * (ws[2 + a] - 1) + 1;
                tg_tensor *x[3], *xt[3], *u[3], *w[3], *b[3], *bt[3], *gy[3], *gyt[3];
                half_triple(dt, 2 + nsp, xs, x);
                half_triple(dt, 2 + nsp, ys, xt);
                half_triple(dt, 2 + nsp, ys, u);
                half_triple(dt, 2 + nsp, ws, w);
                half_triple(dt, 1, ws, b);
                half_triple(dt, 1, ts + 1, bt);
                half_triple(dt, 2 + nsp, ys, gy);
                half_triple(dt, 2 + nsp, ts, gyt);
                tg_tensor *out[3][7];
                tg__conv_set_chunk(chunk);
                for (int r = 0; r < 3; r++) {
                    /* the contiguous weights, biases and gradients: only x's layout varies */
                    const int q = r == 1 ? 0 : r;
                    tg_tensor *g2[2] = {gy[q], gyt[q]};
                    half_ops(x[r], xt[r], u[r], w[q], b[q], bt[q], g2, &p, out[r]);
                }
                tg__conv_set_chunk(0);
                for (int k = 0; k < 7; k++) {
                    tg_tensor *want = NULL;
                    cr_assert(eq(int, tg_tensor_to_dtype(&want, out[2][k], dt), TG_OK));
                    for (int r = 0; r < 2; r++) {
                        cr_assert(eq(int, tg_tensor_dtype(out[r][k]), dt));
                        cr_assert(eq(i64, tg_tensor_numel(out[r][k]), tg_tensor_numel(want)));
                        cr_assert(eq(int, memcmp(tg_tensor_data(out[r][k]), tg_tensor_data(want),
                                                 (size_t)tg_tensor_numel(want) * 2), 0),
                                  "case %zu %s chunk %lld output %d, x %s", c, tg_dtype_name(dt),
                                  (long long)chunk, k, r ? "strided" : "contiguous");
                    }
                    tg_tensor_release(want);
                    for (int r = 0; r < 3; r++) tg_tensor_release(out[r][k]);
                }
                tg_tensor **all[] = {x, xt, u, w, b, bt, gy, gyt};
                for (size_t i = 0; i < sizeof all / sizeof *all; i++)
                    for (int r = 0; r < 3; r++) tg_tensor_release(all[i][r]);
            }
}
