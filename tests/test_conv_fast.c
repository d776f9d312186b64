/* tests/test_conv_fast.c - the speed paths of the conv kernels: batch chunks
 * (one GEMM per chunk of samples), the pointwise path without a column
 * buffer, reused workspaces, and determinism (same bits twice; 1 vs 2 threads
 * within rounding).  The naive oracle sweep of tests/test_conv.c and the
 * gradchecks of tests/test_conv_grad.c also run with forced chunk sizes; the
 * f16/bf16 kernels are tested in tests/test_conv_fast_half.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "helpers.h"
#include "conv_fast_fixtures.h"
#include "core/core.h"
#include "tapegrad/tapegrad.h"
#include "ops/conv_internal.h"
#include "tapegrad/autograd.h"
#include "tapegrad/conv.h"
#include "tapegrad/ops.h"

static void assert_close(const tg_tensor *a, const tg_tensor *b, double tol, const char *what)
{
    cr_assert(eq(i64, tg_tensor_numel(a), tg_tensor_numel(b)));
    double *x = th_doubles(a), *y = th_doubles(b);
    for (int64_t i = 0; i < tg_tensor_numel(a); i++)
        cr_assert(fabs(x[i] - y[i]) <= tol * (1 + fabs(y[i])), "%s elem %lld: %g vs %g", what,
                  (long long)i, x[i], y[i]);
    free(x);
    free(y);
}

/* conv, conv_transpose and conv_weight_grad of one 2-D configuration in f64,
 * run with `chunk` samples per GEMM; out[3] are new references. */
static void run_ops(int64_t chunk, tg_tensor *x, tg_tensor *w, tg_tensor *xt, tg_tensor *u,
                    const tg_conv_params *p, tg_tensor **out)
{
    tg__conv_set_chunk(chunk);
    cr_assert(eq(int, tg_conv(&out[0], x, w, NULL, p), TG_OK), "%s", tg_error_message());
    cr_assert(eq(int, tg_conv_transpose(&out[1], xt, w, NULL, p), TG_OK), "%s",
              tg_error_message());
    cr_assert(eq(int, tg_conv_weight_grad(&out[2], x, u, tg_tensor_ndim(w), tg_tensor_shape(w), p), TG_OK),
              "%s", tg_error_message());
    tg__conv_set_chunk(0);
}

/* Every chunk size, with remainders (B = 5 in chunks of 2 and 3), gives the
 * per-sample results (chunk 1, itself checked against the naive oracle in
 * test_conv.c); odd extents, stride 2, dilation 2, groups 2. */
Test(conv_fast, chunks_match_per_sample)
{
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    p.stride[0] = 2; p.stride[1] = 1; p.dilation[1] = 2;
    p.padding[0][0] = 1; p.padding[1][1] = 2; p.groups = 2;
    const int64_t xs[4] = {5, 10, 7, 5}, ws[4] = {6, 5, 3, 2};
    int64_t os[2];
    cr_assert(eq(int, tg_conv_output_size(os, 2, xs + 2, ws + 2, &p), TG_OK));
    const int64_t ys[4] = {5, 6, os[0], os[1]};
    /* conv_transpose with the same weight maps 6 -> 10 channels: >= 8, so
     * col2im gives each thread whole channels across the chunk's samples */
    tg_tensor *x = mk_rand(TG_F64, 4, xs), *w = mk_rand(TG_F64, 4, ws);
    tg_tensor *xt = mk_rand(TG_F64, 4, ys), *u = mk_rand(TG_F64, 4, ys);
    tg_tensor *want[3], *got[3];
    run_ops(1, x, w, xt, u, &p, want);
    for (int64_t chunk = 0; chunk <= 5; chunk++) {
        if (chunk == 1) continue;
        run_ops(chunk, x, w, xt, u, &p, got);
        for (int k = 0; k < 3; k++) {
            assert_close(got[k], want[k], 1e-12, k == 0 ? "conv" : k == 1 ? "convT" : "wgrad");
            tg_tensor_release(got[k]);
        }
    }
    for (int k = 0; k < 3; k++) tg_tensor_release(want[k]);
    tg_tensor_release(x); tg_tensor_release(w); tg_tensor_release(xt); tg_tensor_release(u);
}

/* 1x1 stride-1 kernels skip the column buffer (B = 1) or only permute the
 * batch (B = 3): checked against y[b, co, s] = sum_ci w[co, ci] x[b, ci, s]
 * and, for conv_transpose, y[b, co, s] = sum_ci w[ci, co] x[b, ci, s]. */
Test(conv_fast, pointwise_matches_matmul_loops)
{
    for (int64_t B = 1; B <= 3; B += 2)
        for (int t = 0; t < 2; t++) {
            const int64_t ci = 3, co = 4, S0 = 5, S1 = 3;
            const int64_t xs[4] = {B, ci, S0, S1}, ws[4] = {t ? ci : co, t ? co : ci, 1, 1};
            tg_tensor *x = mk_rand(TG_F64, 4, xs), *w = mk_rand(TG_F64, 4, ws), *y = NULL;
            int rc = t ? tg_conv_transpose(&y, x, w, NULL, NULL) : tg_conv(&y, x, w, NULL, NULL);
            cr_assert(eq(int, rc, TG_OK), "%s", tg_error_message());
            double *xv = th_doubles(x), *wv = th_doubles(w), *yv = th_doubles(y);
            const int64_t S = S0 * S1;
            for (int64_t b = 0; b < B; b++)
                for (int64_t o = 0; o < co; o++)
                    for (int64_t s = 0; s < S; s++) {
                        double acc = 0;
                        for (int64_t i = 0; i < ci; i++)
                            acc += (t ? wv[i * co + o] : wv[o * ci + i]) * xv[(b * ci + i) * S + s];
                        cr_assert(epsilon_eq(dbl, yv[(b * co + o) * S + s], acc, 1e-12));
                    }
            free(xv); free(wv); free(yv);
            tg_tensor_release(x); tg_tensor_release(w); tg_tensor_release(y);
        }
}

/* A DCGAN-style layer (f32) forward and backward; returns y, dx, dW. */
static void dcgan_layer(tg_tensor *x, tg_tensor *w, tg_tensor **out)
{
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    p.stride[0] = p.stride[1] = 2;
    tg_conv_params_set_padding(&p, 1);
    tg_tensor_set_requires_grad(x, true);
    tg_tensor_set_requires_grad(w, true);
    cr_assert(eq(int, tg_conv_transpose(&out[0], x, w, NULL, &p), TG_OK), "%s",
              tg_error_message());
    tg_tensor *g = NULL;
    cr_assert(eq(int, tg_tensor_full(&g, TG_F32, 4, tg_tensor_shape(out[0]), 0.5), TG_OK));
    cr_assert(eq(int, tg_backward(out[0], g, NULL), TG_OK), "%s", tg_error_message());
    out[1] = tg_tensor_retain(tg_tensor_grad(x));
    out[2] = tg_tensor_retain(tg_tensor_grad(w));
    tg_tensor_zero_grad(x);
    tg_tensor_zero_grad(w);
    tg_tensor_release(g);
}

static void set_threads(int n)
{
    tg_set_num_threads(n);
    openblas_set_num_threads(n);
}

static void layer_inputs(tg_tensor **x, tg_tensor **w)
{
    const int64_t xs[4] = {6, 24, 7, 9}, ws[4] = {24, 10, 4, 4};
    *x = mk_rand(TG_F32, 4, xs);
    *w = mk_rand(TG_F32, 4, ws);
}

/* Asserts a[k] and b[k] hold the same bits for k < n, then releases them. */
static void expect_same_bits(tg_tensor **a, tg_tensor **b, int n, const char *what)
{
    for (int k = 0; k < n; k++) {
        const size_t bytes = (size_t)tg_tensor_numel(a[k]) * tg_dtype_size(tg_tensor_dtype(a[k]));
        cr_assert(eq(int, memcmp(tg_tensor_data(a[k]), tg_tensor_data(b[k]), bytes), 0),
                  "%s: output %d differs", what, k);
        tg_tensor_release(a[k]);
        tg_tensor_release(b[k]);
    }
}

Test(conv_fast, same_inputs_same_bits)
{
    set_threads(2);
    tg_tensor *x, *w, *a[3], *b[3];
    layer_inputs(&x, &w);
    dcgan_layer(x, w, a);
    dcgan_layer(x, w, b);
    expect_same_bits(a, b, 3, "two identical runs");
    tg_tensor_release(x);
    tg_tensor_release(w);
}

Test(conv_fast, one_and_two_threads_agree)
{
    tg_tensor *x, *w, *a[3], *b[3];
    layer_inputs(&x, &w);
    set_threads(1);
    dcgan_layer(x, w, a);
    set_threads(2);
    dcgan_layer(x, w, b);
    for (int k = 0; k < 3; k++) {
        assert_close(a[k], b[k], 1e-5, "1 vs 2 threads");
        tg_tensor_release(a[k]);
        tg_tensor_release(b[k]);
    }
    tg_tensor_release(x);
    tg_tensor_release(w);
}

/* With several chunks, the chunks run in parallel (one thread each) and the
 * weight-gradient partials are summed in chunk order: the bits are the same
 * for 1 and 2 threads, for ConvTranspose (forward: GEMM + col2im; backward:
 * the fused conv + weight gradient) and for Conv (forward, and dx through
 * the ConvTranspose kernel). */
Test(conv_fast, chunks_in_parallel_same_bits_as_one_thread)
{
    tg_tensor *x, *w, *a[3], *b[3];
    layer_inputs(&x, &w);   /* batch 6: chunks of 2, 2, 2 and of 3, 3 below */
    for (int it = 0; it < 3; it++) {
        const int nb = it == 0 ? 3 : 2;
        tg__conv_set_chunk(nb);
        tg__conv_set_part_bytes(it == 2 ? 1 : 0);   /* 2: waves of two chunks */
        char what[96];
        snprintf(what, sizeof what, "conv_transpose, case %d, 1 vs 2 threads", it);
        set_threads(1);
        dcgan_layer(x, w, a);
        set_threads(2);
        dcgan_layer(x, w, b);
        expect_same_bits(a, b, 3, what);
        /* Conv: y = conv(x', w') and its gradients, x' = the ConvT output */
        tg_tensor *y[2] = {NULL, NULL}, *gx[2], *gw[2];
        tg_conv_params p = TG_CONV_PARAMS_INIT;
        p.stride[0] = p.stride[1] = 2;
        tg_conv_params_set_padding(&p, 1);
        const int64_t zs[4] = {6, 10, 14, 18}, vs[4] = {24, 10, 4, 4};
        tg_tensor *z = mk_rand(TG_F32, 4, zs), *v = mk_rand(TG_F32, 4, vs);
        tg_tensor_set_requires_grad(z, true);
        tg_tensor_set_requires_grad(v, true);
        for (int t = 0; t < 2; t++) {
            set_threads(t + 1);
            cr_assert(eq(int, tg_conv(&y[t], z, v, NULL, &p), TG_OK), "%s", tg_error_message());
            cr_assert(eq(int, tg_backward(y[t], y[t], NULL), TG_OK), "%s", tg_error_message());
            gx[t] = tg_tensor_retain(tg_tensor_grad(z));
            gw[t] = tg_tensor_retain(tg_tensor_grad(v));
            tg_tensor_zero_grad(z);
            tg_tensor_zero_grad(v);
        }
        tg_tensor *one[3] = {y[0], gx[0], gw[0]}, *two[3] = {y[1], gx[1], gw[1]};
        snprintf(what, sizeof what, "conv, case %d, 1 vs 2 threads", it);
        expect_same_bits(one, two, 3, what);
        tg_tensor_release(z);
        tg_tensor_release(v);
    }
    tg__conv_set_chunk(0);
    tg__conv_set_part_bytes(0);
    tg_tensor_release(x);
    tg_tensor_release(w);
}

/* The weight gradient is ((dW_0 + dW_1) + dW_2) + ... whatever the waves:
 * the same bits with the partials of all chunks held at once and with one
 * partial at a time. */
Test(conv_fast, waves_of_chunks_same_bits)
{
    tg_tensor *x, *w, *a[3], *b[3];
    layer_inputs(&x, &w);
    set_threads(2);
    tg__conv_set_chunk(1);   /* six chunks */
    dcgan_layer(x, w, a);
    tg__conv_set_part_bytes(1);
    dcgan_layer(x, w, b);
    expect_same_bits(a, b, 3, "one wave vs waves of two");
    tg__conv_set_chunk(0);
    tg__conv_set_part_bytes(0);
    tg_tensor_release(x);
    tg_tensor_release(w);
}

/* A batch whose columns fit one chunk is cut in two once they reach
 * 512 KiB in all (the DCGAN's one-channel 28x28 layers: 25 KiB a sample),
 * never below, never a batch of one, and never when a test sets the chunk;
 * a batch larger than one chunk keeps the budget's size. */
Test(conv_fast, a_batch_that_fits_one_chunk_is_cut_in_two_when_large)
{
    cr_assert(eq(i64, tg__conv_chunk_split(64, 25 << 10), 32));
    cr_assert(eq(i64, tg__conv_chunk_split(63, 25 << 10), 32));
    cr_assert(eq(i64, tg__conv_chunk_split(64, 8 << 10), 32));          /* 512 KiB */
    cr_assert(eq(i64, tg__conv_chunk_split(64, (8 << 10) - 1), 64));    /* just below */
    cr_assert(eq(i64, tg__conv_chunk_split(1, 1 << 20), 1));
    cr_assert(eq(i64, tg__conv_chunk_split(64, 400 << 10), tg__conv_chunk(64, 400 << 10)));
    tg__conv_set_chunk(64);
    cr_assert(eq(i64, tg__conv_chunk_split(64, 25 << 10), 64));
    tg__conv_set_chunk(0);
}

/* The scratch buffers grow and are reused: a small call after a large one
 * (and the reverse) gives the results of a fresh thread. */
Test(conv_fast, scratch_reuse_across_shapes)
{
    tg_tensor *x, *w, *first[3], *again[3];
    layer_inputs(&x, &w);
    tg__conv_scratch_release();
    dcgan_layer(x, w, first);
    const int64_t bs[4] = {9, 24, 11, 13};
    tg_tensor *big = mk_rand(TG_F32, 4, bs), *tmp[3];
    dcgan_layer(big, w, tmp);
    dcgan_layer(x, w, again);
    for (int k = 0; k < 3; k++) {
        assert_close(again[k], first[k], 0, "after a larger call");
        tg_tensor_release(first[k]);
        tg_tensor_release(again[k]);
        tg_tensor_release(tmp[k]);
    }
    tg_tensor_release(big);
    tg_tensor_release(x);
    tg_tensor_release(w);
    tg__conv_scratch_release();
}

/* The zeroed column buffer: all zero when taken, whether the last taker gave
 * it back (after zeroing what it used) or failed on the way and left
 * garbage; growing keeps the promise for the new bytes. */
static bool all_zero(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i]) return false;
    return true;
}

Test(conv_fast, zeroed_buffer_is_zero_at_every_take)
{
    tg__conv_scratch_release();
    unsigned char *p = tg__conv_zeroed_take(1000);
    cr_assert(p && all_zero(p, 1000));
    memset(p, 0xab, 1000);   /* a taker that fails: no give */
    p = tg__conv_zeroed_take(1000);
    cr_assert(all_zero(p, 1000), "garbage left by a taker without a give");
    memset(p, 0xcd, 400);    /* a taker that uses 400 bytes, zeroes them, gives */
    memset(p, 0, 400);
    tg__conv_zeroed_give();
    p = tg__conv_zeroed_take(1000);
    cr_assert(all_zero(p, 1000));
    tg__conv_zeroed_give();
    p = tg__conv_zeroed_take(5000);   /* larger: a new buffer */
    cr_assert(p && all_zero(p, 5000));
    memset(p + 4000, 0x11, 1000);
    p = tg__conv_zeroed_take(600);    /* smaller, after a failed taker */
    cr_assert(all_zero(p, 600));
    tg__conv_zeroed_give();
    p = tg__conv_zeroed_take(5000);
    cr_assert(all_zero(p, 5000), "bytes past the last take's size");
    tg__conv_zeroed_give();
    tg__conv_scratch_release();
}

/* dx and dW of conv_transpose with and without create_graph: without it the
 * backward shares one im2col(dy) between the two (tg__conv_and_weight_grad_raw);
 * with it, it runs the recorded ops conv and conv_weight_grad.  Both must give
 * the same bits: for 1-D, 2-D (groups 2, stride 2, dilation 2, padding) and
 * 3-D, in f32, f64 and bf16, with several samples per chunk and one. */
static void fused_vs_ops(tg_dtype dt, int nd, const int64_t *xs, const int64_t *ws,
                         const tg_conv_params *p, int64_t chunk)
{
    tg_tensor *x = mk_rand(dt, nd, xs), *w = mk_rand(dt, nd, ws), *y = NULL, *r = NULL;
    tg_tensor *g[2][2] = {{NULL, NULL}, {NULL, NULL}};
    tg_tensor *in[2] = {x, w};
    cr_assert(eq(int, tg_tensor_set_requires_grad(x, true), TG_OK));
    cr_assert(eq(int, tg_tensor_set_requires_grad(w, true), TG_OK));
    tg__conv_set_chunk(chunk);
    cr_assert(eq(int, tg_conv_transpose(&y, x, w, NULL, p), TG_OK), "%s", tg_error_message());
    r = mk_rand(dt, nd, tg_tensor_shape(y));
    for (int cg = 0; cg < 2; cg++) {
        tg_backward_opts o = TG_BACKWARD_OPTS_INIT;
        o.create_graph = cg == 1;
        o.retain_graph = true;
        cr_assert(eq(int, tg_grad(g[cg], 1, &y, &r, 2, in, &o), TG_OK), "%s",
                  tg_error_message());
    }
    tg__conv_set_chunk(0);
    for (int k = 0; k < 2; k++) {
        cr_assert(eq(int, tg_tensor_dtype(g[0][k]), dt));
        double *a = th_doubles(g[0][k]), *b = th_doubles(g[1][k]);
        for (int64_t i = 0; i < tg_tensor_numel(g[0][k]); i++)
            cr_assert(a[i] == b[i], "%s grad %s elem %lld: %.17g vs %.17g (chunk %lld)",
                      tg_dtype_name(dt), k ? "w" : "x", (long long)i, a[i], b[i],
                      (long long)chunk);
        free(a);
        free(b);
        tg_tensor_release(g[0][k]);
        tg_tensor_release(g[1][k]);
    }
    tg_tensor_release(r); tg_tensor_release(y); tg_tensor_release(x); tg_tensor_release(w);
}

Test(conv_fast, transpose_backward_fused_same_bits_as_ops)
{
    tg_conv_params p1 = TG_CONV_PARAMS_INIT, p2 = TG_CONV_PARAMS_INIT, p3 = TG_CONV_PARAMS_INIT;
    p1.stride[0] = 3; p1.padding[0][0] = p1.padding[0][1] = 1;
    p2.stride[0] = p2.stride[1] = 2; p2.dilation[1] = 2; p2.groups = 2;
    p2.padding[0][0] = p2.padding[0][1] = 1; p2.output_padding[0] = 1;
    p3.stride[0] = p3.stride[1] = p3.stride[2] = 2;
    const int64_t x1[3] = {3, 4, 9}, w1[3] = {4, 3, 5};
    const int64_t x2[4] = {3, 4, 5, 6}, w2[4] = {4, 3, 3, 2};
    const int64_t x3[5] = {2, 3, 3, 4, 2}, w3[5] = {3, 2, 2, 3, 2};
    const tg_dtype dts[3] = {TG_F32, TG_F64, TG_BF16};
    for (int d = 0; d < 3; d++)
        for (int64_t chunk = 0; chunk <= 1; chunk++) {
            fused_vs_ops(dts[d], 3, x1, w1, &p1, chunk);
            fused_vs_ops(dts[d], 4, x2, w2, &p2, chunk);
            fused_vs_ops(dts[d], 5, x3, w3, &p3, chunk);
        }
}

/* A conv geometry of the tests below: spatial dims, image extents, kernel,
 * stride, dilation, padding and groups. */
typedef struct conv_case {
    int nsp;
    int64_t img[3], k[3], stride[3], dil[3], pad[3][2];
    int64_t groups;
} conv_case;

/* The params of cc, and the shapes of a conv of it with 6 output channels:
 * x (batch, c_img, img...), w (6, c_img / groups, k...), y (batch, 6, ...). */
static void case_shapes(const conv_case *cc, int64_t batch, int64_t c_img, tg_conv_params *p,
                        int64_t *xs, int64_t *ws, int64_t *ys)
{
    *p = (tg_conv_params)TG_CONV_PARAMS_INIT;
    p->groups = cc->groups;
    xs[0] = ys[0] = batch;
    xs[1] = c_img;
    ws[0] = ys[1] = 6;
    ws[1] = c_img / cc->groups;
    for (int a = 0; a < cc->nsp; a++) {
        p->stride[a] = cc->stride[a];
        p->dilation[a] = cc->dil[a];
        p->padding[a][0] = cc->pad[a][0];
        p->padding[a][1] = cc->pad[a][1];
        xs[2 + a] = cc->img[a];
        ws[2 + a] = cc->k[a];
    }
    cr_assert(eq(int, tg_conv_output_size(ys + 2, cc->nsp, xs + 2, ws + 2, p), TG_OK), "%s",
              tg_error_message());
}

/* col2im by phases across a block's samples (image = stride x columns on
 * every axis, column rows of at least 6, 8 image channels so that a block
 * is a channel of all the chunk's samples) gives the bits of the sums sample by sample and of the
 * rows (no phases): conv_transpose, in 1-D, 2-D and 3-D, f32 and f64, with
 * taps in the padding on either side, dilation, groups, and chunks of 2 and
 * 3 samples of 5 (the last chunk one sample: sample by sample). */
Test(conv_fast, col2im_across_samples_same_bits)
{
    static const conv_case cs[] = {
        {2, {14, 14}, {4, 4}, {2, 2}, {1, 1}, {{1, 1}, {1, 1}}, 1},   /* DCGAN's 7 -> 14 */
        {1, {24}, {3}, {3}, {1}, {{0, 0}}, 2},
        {1, {12}, {5}, {2}, {2}, {{5, 2}}, 1},                        /* taps in the padding */
        {2, {10, 18}, {4, 3}, {2, 3}, {1, 2}, {{1, 1}, {0, 2}}, 2},
        {3, {4, 6, 12}, {2, 3, 2}, {2, 2, 2}, {1, 1, 1}, {{0, 0}, {1, 0}, {0, 0}}, 1},
    };
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++)
        for (int d = 0; d < 2; d++) {
            const tg_dtype dt = d ? TG_F64 : TG_F32;
            const int nsp = cs[c].nsp;
            tg_conv_params p;
            int64_t img[5], ws[5], ys[5];
            case_shapes(&cs[c], 5, 8, &p, img, ws, ys);
            tg_tensor *w = mk_rand(dt, 2 + nsp, ws), *xt = mk_rand(dt, 2 + nsp, ys);
            for (int64_t chunk = 2; chunk <= 3; chunk++) {
                tg_tensor *y[3] = {NULL, NULL, NULL};
                const int64_t before = tg__conv_col2im_runs_calls();
                tg__conv_set_chunk(chunk);
                for (int v = 0; v < 3; v++) {   /* across samples, sample by sample, rows */
                    tg__conv_set_col2im_runs(v == 0);
                    tg__conv_set_tap_tables(v < 2);
                    cr_assert(eq(int, tg_conv_transpose(&y[v], xt, w, NULL, &p), TG_OK), "%s",
                              tg_error_message());
                    if (v == 0)
                        cr_assert(tg__conv_col2im_runs_calls() > before,
                                  "case %zu: col2im did not go across samples", c);
                }
                tg__conv_set_col2im_runs(true);
                tg__conv_set_tap_tables(true);
                tg__conv_set_chunk(0);
                cr_assert(eq(int, tg_tensor_ndim(y[0]), 2 + nsp));
                for (int a = 0; a < nsp; a++)
                    cr_assert(eq(i64, tg_tensor_shape(y[0])[2 + a], cs[c].img[a]));
                for (int v = 1; v < 3; v++)
                    cr_assert(eq(int, memcmp(tg_tensor_data(y[0]), tg_tensor_data(y[v]),
                                             (size_t)tg_tensor_numel(y[0]) * tg_dtype_size(dt)), 0),
                              "case %zu %s chunk %lld: %s", c, tg_dtype_name(dt), (long long)chunk,
                              v == 1 ? "sample by sample" : "rows");
                for (int v = 0; v < 3; v++) tg_tensor_release(y[v]);
            }
            tg_tensor_release(w), tg_tensor_release(xt);
        }
}

/* The tap table of small planes (im2col in conv and the weight gradient;
 * col2im in conv_transpose past 64 phases) and col2im by output phases give
 * the same bits as the row-by-row paths, in
 * 1-D, 2-D and 3-D, f32 and f64, with strides, dilations, uneven padding
 * that leaves whole rows and columns (and some taps entirely) in the
 * padding, and groups.  Each case has column rows shorter than 32, so the
 * table is taken when it is on. */
Test(conv_fast, tap_table_same_bits_as_rows)
{
    static const conv_case cs[] = {
        {1, {29}, {5}, {3}, {1}, {{4, 0}}, 1},
        {2, {14, 14}, {4, 4}, {2, 2}, {1, 1}, {{1, 1}, {1, 1}}, 1},   /* DCGAN's */
        {2, {9, 11}, {3, 2}, {1, 3}, {2, 1}, {{3, 0}, {0, 2}}, 2},
        {3, {5, 6, 7}, {2, 3, 2}, {2, 1, 2}, {1, 2, 1}, {{1, 1}, {0, 2}, {2, 0}}, 2},
        {2, {6, 9}, {2, 3}, {2, 1}, {1, 3}, {{0, 1}, {4, 4}}, 1},   /* stride 1, wide padding */
        {1, {40}, {3}, {4}, {5}, {{7, 9}}, 2},                        /* taps beyond the image */
        {2, {20, 17}, {3, 2}, {9, 8}, {1, 1}, {{1, 2}, {0, 3}}, 1},   /* 72 phases: a table */
    };
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++)
        for (int d = 0; d < 2; d++) {
            const tg_dtype dt = d ? TG_F64 : TG_F32;
            const int nsp = cs[c].nsp;
            tg_conv_params p;
            int64_t xs[5], ws[5], ys[5];
            case_shapes(&cs[c], 3, 4, &p, xs, ws, ys);
            tg_tensor *x = mk_rand(dt, 2 + nsp, xs), *w = mk_rand(dt, 2 + nsp, ws);
            tg_tensor *xt = mk_rand(dt, 2 + nsp, ys), *u = mk_rand(dt, 2 + nsp, ys);
            tg_tensor *rows[3], *tab[3];
            tg__conv_set_tap_tables(false);
            run_ops(0, x, w, xt, u, &p, rows);
            tg__conv_set_tap_tables(true);
            run_ops(0, x, w, xt, u, &p, tab);
            for (int k = 0; k < 3; k++) {
                cr_assert(eq(i64, tg_tensor_numel(tab[k]), tg_tensor_numel(rows[k])));
                cr_assert(eq(int, memcmp(tg_tensor_data(tab[k]), tg_tensor_data(rows[k]),
                                         (size_t)tg_tensor_numel(tab[k]) * tg_dtype_size(dt)), 0),
                          "case %zu %s op %d", c, tg_dtype_name(dt), k);
                tg_tensor_release(tab[k]), tg_tensor_release(rows[k]);
            }
            tg_tensor_release(x), tg_tensor_release(w), tg_tensor_release(xt), tg_tensor_release(u);
        }
}

/* conv_transpose of case cc (case_shapes's batch and c_img, dtype dt,
 * chunks of `chunk` samples, col2im across samples or sample by sample)
 * with the avx512 col2im and with the portable one: the same bits (what
 * names the case); returns the avx512 output. */
static tg_tensor *col2im_kernels_agree(const conv_case *cc, int64_t batch, int64_t c_img,
                                       int chunk, tg_dtype dt, bool runs, const char *what)
{
    tg_conv_params p;
    int64_t img[5], ws[5], ys[5];
    case_shapes(cc, batch, c_img, &p, img, ws, ys);
    tg_tensor *w = mk_rand(dt, 2 + cc->nsp, ws), *xt = mk_rand(dt, 2 + cc->nsp, ys);
    tg_tensor *y[2] = {NULL, NULL};
    tg__conv_set_chunk(chunk);
    tg__conv_set_col2im_runs(runs);
    for (int v = 0; v < 2; v++) {
        tg__conv_set_col2im_kernel(v ? TG__CONV_COL2IM_PORTABLE : TG__CONV_COL2IM_AVX512);
        cr_assert(eq(int, tg_conv_transpose(&y[v], xt, w, NULL, &p), TG_OK), "%s",
                  tg_error_message());
    }
    tg__conv_set_col2im_kernel(TG__CONV_COL2IM_AUTO);
    tg__conv_set_col2im_runs(true);
    tg__conv_set_chunk(0);
    cr_assert(eq(int, memcmp(tg_tensor_data(y[0]), tg_tensor_data(y[1]),
                             (size_t)tg_tensor_numel(y[0]) * tg_dtype_size(dt)), 0),
              "%s %s runs %d", what, tg_dtype_name(dt), runs);
    th_release_all(3, (tg_tensor *[]){y[1], w, xt});
    return y[0];
}

/* col2im's phased sums compiled for AVX-512 give the portable build's
 * bits (tg__conv_col2im_kernel): conv_transpose across samples and sample
 * by sample, in 1-D, 2-D (DCGAN's layers) and 3-D, f32 and f64; skipped
 * on a CPU without AVX-512 BW.  TG_COL2IM_KERNEL picks the kernel. */
Test(conv_fast, col2im_avx512_same_bits_as_portable)
{
    cr_assert(eq(int, unsetenv("TG_COL2IM_KERNEL"), 0));
    const tg__conv_col2im best = tg__cpu_has_avx512bw() ? TG__CONV_COL2IM_AVX512
                                                        : TG__CONV_COL2IM_PORTABLE;
    cr_assert(eq(int, tg__conv_col2im_kernel(), best));
    cr_assert(eq(int, setenv("TG_COL2IM_KERNEL", "portable", 1), 0));
    cr_assert(eq(int, tg__conv_col2im_kernel(), TG__CONV_COL2IM_PORTABLE));
    cr_assert(eq(int, setenv("TG_COL2IM_KERNEL", "sideways", 1), 0));
    cr_assert(eq(int, tg__conv_col2im_kernel(), best));
    cr_assert(eq(int, unsetenv("TG_COL2IM_KERNEL"), 0));
    tg__conv_set_col2im_kernel(TG__CONV_COL2IM_AVX512);
    if (tg__conv_col2im_kernel() != TG__CONV_COL2IM_AVX512) {
        tg__conv_set_col2im_kernel(TG__CONV_COL2IM_AUTO);
        cr_skip_test("the avx512 col2im needs AVX-512 F and BW, which this machine lacks");
    }
    static const conv_case cs[] = {
        {2, {14, 14}, {4, 4}, {2, 2}, {1, 1}, {{1, 1}, {1, 1}}, 1},   /* DCGAN's 7 -> 14 */
        {2, {28, 28}, {4, 4}, {2, 2}, {1, 1}, {{1, 1}, {1, 1}}, 1},   /* and 14 -> 28 */
        {1, {24}, {3}, {3}, {1}, {{0, 0}}, 2},
        {1, {12}, {5}, {2}, {2}, {{5, 2}}, 1},
        {2, {10, 18}, {4, 3}, {2, 3}, {1, 2}, {{1, 1}, {0, 2}}, 2},
        {3, {4, 6, 12}, {2, 3, 2}, {2, 2, 2}, {1, 1, 1}, {{0, 0}, {1, 0}, {0, 0}}, 1},
    };
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++)
        for (int d = 0; d < 2; d++)
            for (int runs = 0; runs < 2; runs++) {
                char what[48];
                snprintf(what, sizeof what, "case %zu", c);
                tg_tensor_release(col2im_kernels_agree(&cs[c], 5, 8, 3, d ? TG_F64 : TG_F32,
                                                       runs == 1, what));
            }
}

/* The rows of stride 2 that col2im interleaves from two phase rows of q
 * values (interleave_avx512: eight pairs a permute, the last ones masked)
 * give the portable loop's bits for every q from 6 (TG__COL2IM_PHASED_ROW,
 * the shortest column rows that go by phases) to 25, images 12 to 50 wide
 * (4 taps, padding 1: the DCGAN's upsampling), across samples and sample
 * by sample, f32 and f64, the image 6 or 12 rows high. */
Test(conv_fast, col2im_stride2_rows_every_width_same_bits_as_portable)
{
    tg__conv_set_col2im_kernel(TG__CONV_COL2IM_AVX512);
    if (tg__conv_col2im_kernel() != TG__CONV_COL2IM_AVX512) {
        tg__conv_set_col2im_kernel(TG__CONV_COL2IM_AUTO);
        cr_skip_test("the avx512 col2im needs AVX-512 F and BW, which this machine lacks");
    }
    for (int64_t q = 6; q <= 25; q++)
        for (int d = 0; d < 2; d++)
            for (int runs = 0; runs < 2; runs++) {
                const int64_t h = q % 2 ? 3 : 6;   /* phase rows: column rows of q */
                const conv_case cc = {2, {2 * h, 2 * q}, {4, 4}, {2, 2}, {1, 1},
                                      {{1, 1}, {1, 1}}, 1};
                char what[48];
                snprintf(what, sizeof what, "q %lld", (long long)q);
                tg_tensor *y = col2im_kernels_agree(&cc, 3, 5, 2, d ? TG_F64 : TG_F32,
                                                    runs == 1, what);
                cr_assert(eq(i64, tg_tensor_dim(y, 3), 2 * q));
                tg_tensor_release(y);
            }
}
