/* tests/test_norm.c - the batch_norm op (src/ops/norm.c): values and
 * gradients against a naive double reference, what the tape keeps, half
 * inputs under autocast, errors, strided inputs, and the kernel's paths
 * (half channels, channel blocks) against each other.  The backward's own
 * tests (fused against recorded, gradcheck and gradgradcheck) are in
 * test_norm_grad.c; the BatchNorm module built on the op is checked against
 * PyTorch goldens in test_nn.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "helpers.h"
#include "norm_fixtures.h"
#include "core/core.h"
#include "tapegrad/tapegrad.h"
#include "ops/norm_internal.h"
#include "tapegrad/autograd.h"
#include "tapegrad/ops.h"
#include "tapegrad/registry.h"

static const int64_t XS[4] = {3, 4, 5, 7};   /* N, C, H, W: 105 values per channel */

/* y, the new running buffers, and the gradients of <y, gy> by a naive double
 * loop over (n, c, s). */
static void reference(const tg_tensor *x, const tg_tensor *w, const tg_tensor *b, double *rm,
                      double *rv, bool training, double mom, double eps, const tg_tensor *gy,
                      double *y, double *dx, double *dw, double *db)
{
    const int64_t N = tg_tensor_dim(x, 0), C = tg_tensor_dim(x, 1), S = tg_tensor_numel(x) / (N * C);
    const double M = (double)(N * S);
    for (int64_t c = 0; c < C; c++) {
        double mean = 0, var = 0;
        if (training) {
            for (int64_t n = 0; n < N; n++)
                for (int64_t s = 0; s < S; s++) mean += th_at(x, (n * C + c) * S + s);
            mean /= M;
            for (int64_t n = 0; n < N; n++)
                for (int64_t s = 0; s < S; s++) {
                    double d = th_at(x, (n * C + c) * S + s) - mean;
                    var += d * d;
                }
            var /= M;
            rm[c] = (1 - mom) * rm[c] + mom * mean;
            rv[c] = (1 - mom) * rv[c] + mom * var * M / (M - 1);
        } else {
            mean = rm[c];
            var = rv[c];
        }
        const double inv = 1 / sqrt(var + eps), wc = w ? th_at(w, c) : 1, bc = b ? th_at(b, c) : 0;
        double sg = 0, sgx = 0;
        for (int64_t n = 0; n < N; n++)
            for (int64_t s = 0; s < S; s++) {
                const int64_t i = (n * C + c) * S + s;
                const double xh = (th_at(x, i) - mean) * inv;
                y[i] = xh * wc + bc;
                sg += th_at(gy, i);
                sgx += th_at(gy, i) * xh;
            }
        dw[c] = sgx;
        db[c] = sg;
        for (int64_t n = 0; n < N; n++)
            for (int64_t s = 0; s < S; s++) {
                const int64_t i = (n * C + c) * S + s;
                const double xh = (th_at(x, i) - mean) * inv, g = th_at(gy, i);
                dx[i] = training ? wc * inv * (g - sg / M - xh * sgx / M) : wc * inv * g;
            }
    }
}

/* Training and eval, with and without weight and bias, f32 and f64: output,
 * running buffers and the three gradients against the reference. */
Test(norm, batch_norm_matches_naive_reference)
{
    for (int d = 0; d < 2; d++)
        for (int training = 0; training < 2; training++)
            for (int affine = 0; affine < 2; affine++) {
                const tg_dtype dt = d ? TG_F64 : TG_F32;
                const double tol = d ? 1e-12 : 2e-5, mom = 0.3, eps = 1e-3;
                tg_tensor *x = th_rand_uniform(dt, 4, XS, 11), *gy = th_rand_uniform(dt, 4, XS, 12);
                for (int64_t i = 0; i < tg_tensor_numel(x); i++)   /* away from 0, spread */
                    tg_tensor_set_flat(x, i, 3 + 2 * th_at(x, i) * (1 + i % 4));
                tg_tensor *w = affine ? vec(dt, 4, 13, 0.5, 2) : NULL;
                tg_tensor *b = affine ? vec(dt, 4, 14, -1, 1) : NULL;
                tg_tensor *rm = vec(dt, 4, 15, -1, 1), *rv = vec(dt, 4, 16, 0.5, 2);
                double rmw[4], rvw[4], y[420], dx[420], dw[4], db[4];
                for (int c = 0; c < 4; c++) rmw[c] = th_at(rm, c), rvw[c] = th_at(rv, c);
                reference(x, w, b, rmw, rvw, training, mom, eps, gy, y, dx, dw, db);
                tg_tensor_set_requires_grad(x, true);
                if (affine) tg_tensor_set_requires_grad(w, true), tg_tensor_set_requires_grad(b, true);
                tg_tensor *out = NULL;
                cr_assert(eq(int, tg_batch_norm(&out, x, rm, rv, w, b, training, mom, eps), TG_OK),
                          "%s", tg_error_message());
                cr_assert(eq(int, tg_tensor_dtype(out), dt));
                expect_close(out, y, tol, "y");
                expect_close(rm, rmw, tol, "running_mean");
                expect_close(rv, rvw, tol, "running_var");
                cr_assert(eq(int, tg_backward(out, gy, NULL), TG_OK), "%s", tg_error_message());
                expect_close(tg_tensor_grad(x), dx, d ? 1e-10 : 1e-4, "dx");
                if (affine) {
                    expect_close(tg_tensor_grad(w), dw, d ? 1e-10 : 1e-4, "dw");
                    expect_close(tg_tensor_grad(b), db, d ? 1e-10 : 1e-4, "db");
                    cr_assert(eq(int, tg_tensor_dtype(tg_tensor_grad(w)), dt));
                }
                tg_tensor *all[] = {x, gy, w, b, rm, rv, out};
                for (size_t i = 0; i < sizeof all / sizeof *all; i++) tg_tensor_release(all[i]);
            }
}

/* The tape keeps x and per-channel values only: with its input's other
 * owner gone, a recorded batch_norm holds x and y, and no third activation
 * (the composed version kept x - mean as well). */
Test(norm, tape_keeps_x_and_per_channel_values)
{
    const int64_t xs[4] = {8, 16, 16, 16};   /* 32768 values, 128 KiB in f32 */
    const int64_t full = 8 * 16 * 16 * 16 * 4;
    tg_tensor *x = th_rand_uniform(TG_F32, 4, xs, 41), *w = vec(TG_F32, 16, 42, 0.5, 2), *a = NULL, *y = NULL;
    tg_tensor_set_requires_grad(x, true);
    cr_assert(eq(int, tg_mul_scalar(&a, x, 2.0), TG_OK));
    int64_t before, after;
    tg_memory_stats(&before, NULL);   /* x, w, a */
    cr_assert(eq(int, tg_batch_norm(&y, a, NULL, NULL, w, NULL, true, 0.1, 1e-5), TG_OK));
    tg_tensor_release(a);   /* still saved by batch_norm */
    tg_memory_stats(&after, NULL);
    cr_assert(le(i64, after - before, full + 1024), "tape holds %lld bytes more", (long long)(after - before));
    cr_assert(ge(i64, after - before, full));   /* y itself */
    cr_assert(eq(int, tg_backward(y, y, NULL), TG_OK), "%s", tg_error_message());
    cr_assert(not(eq(ptr, tg_tensor_grad(x), NULL)));
    tg_tensor_release(x), tg_tensor_release(w), tg_tensor_release(y);
}

/* A bf16 input with f32 weight: inside autocast the output is bf16 and equals
 * the f32 computation on the same values rounded once, and the tape keeps
 * the bf16 x (no f32 copy); outside autocast the output is promoted to f32. */
Test(norm, half_input_under_autocast_stays_half)
{
    const int64_t xs[4] = {8, 16, 16, 16};
    const int64_t half = 8 * 16 * 16 * 16 * 2;
    tg_tensor *x32 = th_rand_uniform(TG_F32, 4, xs, 51), *xh = NULL, *xe = NULL, *w = vec(TG_F32, 16, 52, 0.5, 2);
    cr_assert(eq(int, tg_to_dtype(&xh, x32, TG_BF16), TG_OK));
    cr_assert(eq(int, tg_to_dtype(&xe, xh, TG_F32), TG_OK));   /* the same values in f32 */
    tg_tensor *yh = NULL, *yf = NULL, *yp = NULL, *a = NULL;
    cr_assert(eq(int, tg_batch_norm(&yf, xe, NULL, NULL, w, NULL, true, 0.1, 1e-5), TG_OK));
    tg_tensor_set_requires_grad(xh, true);
    cr_assert(eq(int, tg_mul_scalar(&a, xh, 1.0), TG_OK));
    int64_t before, after;
    tg_memory_stats(&before, NULL);
    cr_assert(eq(int, tg_autocast_begin(TG_BF16), TG_OK));
    int rc = tg_batch_norm(&yh, a, NULL, NULL, w, NULL, true, 0.1, 1e-5);
    tg_autocast_end();
    cr_assert(eq(int, rc, TG_OK), "%s", tg_error_message());
    tg_tensor_release(a);
    tg_memory_stats(&after, NULL);
    cr_assert(le(i64, after - before, half + 1024));   /* y; the saved x is a, bf16, counted before */
    cr_assert(eq(int, tg_tensor_dtype(yh), TG_BF16));
    tg_tensor *r = NULL;
    cr_assert(eq(int, tg_to_dtype(&r, yf, TG_BF16), TG_OK));
    cr_assert(eq(int, memcmp(tg_tensor_data(yh), tg_tensor_data(r), (size_t)half), 0));
    cr_assert(eq(int, tg_backward(yh, yh, NULL), TG_OK), "%s", tg_error_message());
    cr_assert(eq(int, tg_tensor_dtype(tg_tensor_grad(xh)), TG_BF16));
    cr_assert(eq(int, tg_batch_norm(&yp, xh, NULL, NULL, w, NULL, true, 0.1, 1e-5), TG_OK));
    cr_assert(eq(int, tg_tensor_dtype(yp), TG_F32));   /* outside autocast: promoted */
    tg_tensor *all[] = {x32, xh, xe, w, yh, yf, yp, r};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tg_tensor_release(all[i]);
}

/* Bad arguments: a clear status, *out untouched and the running buffers
 * unchanged. */
Test(norm, batch_norm_errors_change_nothing)
{
    const int64_t s1[1] = {4}, s2[2] = {1, 4}, s4[4] = {2, 4, 3, 3}, s5[1] = {5};
    tg_tensor *x = th_rand_uniform(TG_F32, 4, s4, 61), *x1 = th_rand_uniform(TG_F32, 1, s1, 62);
    tg_tensor *one = th_rand_uniform(TG_F32, 2, s2, 63), *w5 = th_rand_uniform(TG_F32, 1, s5, 64);
    tg_tensor *rm = vec(TG_F32, 4, 65, -1, 1), *rv = vec(TG_F32, 4, 66, 0.5, 2), *xi = NULL;
    cr_assert(eq(int, tg_tensor_zeros(&xi, TG_I32, 4, s4), TG_OK));
    double m0[4], v0[4];
    for (int c = 0; c < 4; c++) m0[c] = th_at(rm, c), v0[c] = th_at(rv, c);
    tg_tensor *y = (tg_tensor *)&y;   /* a sentinel: must stay */
    struct { int rc; tg_tensor *x, *rm, *rv, *w; bool training; double mom, eps; const char *msg; } cs[] = {
        {TG_EINVAL, NULL, NULL, NULL, NULL, true, 0.1, 1e-5, "x must not be NULL"},
        {TG_ESHAPE, x1, NULL, NULL, NULL, true, 0.1, 1e-5, "expected (N, C, ...)"},
        {TG_EDTYPE, xi, NULL, NULL, NULL, true, 0.1, 1e-5, "float dtypes only"},
        {TG_ESHAPE, x, NULL, NULL, w5, true, 0.1, 1e-5, "weight must have shape (4,)"},
        {TG_ESHAPE, x, w5, rv, NULL, true, 0.1, 1e-5, "running_mean must have shape (4,)"},
        {TG_EINVAL, x, NULL, NULL, NULL, false, 0.1, 1e-5, "needs running_mean and running_var"},
        {TG_EINVAL, one, rm, rv, NULL, true, 0.1, 1e-5, "more than 1 value per channel"},
        {TG_EINVAL, x, rm, rv, NULL, true, 0.1, -1.0, "eps=-1"},
        {TG_EINVAL, x, rm, rv, NULL, true, 1.5, 1e-5, "momentum=1.5"},
    };
    for (size_t k = 0; k < sizeof cs / sizeof *cs; k++) {
        cr_assert(eq(int, tg_batch_norm(&y, cs[k].x, cs[k].rm, cs[k].rv, cs[k].w, NULL,
                                        cs[k].training, cs[k].mom, cs[k].eps), cs[k].rc), "case %zu", k);
        cr_assert(not(eq(ptr, strstr(tg_error_message(), cs[k].msg), NULL)), "case %zu: %s", k,
                  tg_error_message());
        cr_assert(eq(ptr, y, (tg_tensor *)&y));
    }
    cr_assert(eq(int, tg_batch_norm(NULL, x, NULL, NULL, NULL, NULL, true, 0.1, 1e-5), TG_EINVAL));
    for (int c = 0; c < 4; c++) cr_assert(th_at(rm, c) == m0[c] && th_at(rv, c) == v0[c]);
    tg_tensor *all[] = {x, x1, one, w5, rm, rv, xi};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tg_tensor_release(all[i]);
}

/* A strided x (a transposed view) gives the values and gradients of its
 * contiguous copy. */
Test(norm, strided_input_matches_contiguous_copy)
{
    const int64_t xs[4] = {5, 6, 3, 4};   /* viewed as (5, 3, 6, 4): C = 3 */
    tg_tensor *base = th_rand_uniform(TG_F64, 4, xs, 91), *xv = NULL, *xc = NULL, *y[2], *g[2];
    tg_tensor *gy = NULL, *w = vec(TG_F64, 3, 92, 0.5, 2);
    cr_assert(eq(int, tg_transpose(&xv, base, 1, 2), TG_OK));
    cr_assert(not(tg_tensor_is_contiguous(xv)));
    cr_assert(eq(int, tg_contiguous(&xc, xv), TG_OK));
    tg_tensor *xs2[2] = {xv, xc};
    gy = th_rand_uniform(TG_F64, 4, tg_tensor_shape(xv), 93);
    for (int r = 0; r < 2; r++) {
        tg_tensor *leaf = NULL;
        cr_assert(eq(int, tg_tensor_detach(&leaf, xs2[r]), TG_OK));
        tg_tensor_set_requires_grad(leaf, true);
        y[r] = NULL;
        cr_assert(eq(int, tg_batch_norm(&y[r], leaf, NULL, NULL, w, NULL, true, 0.1, 1e-5), TG_OK),
                  "%s", tg_error_message());
        cr_assert(eq(int, tg_backward(y[r], gy, NULL), TG_OK), "%s", tg_error_message());
        g[r] = tg_tensor_retain(tg_tensor_grad(leaf));
        tg_tensor_release(leaf);
    }
    for (int k = 0; k < 2; k++) {
        tg_tensor *a = k ? g[0] : y[0], *b = k ? g[1] : y[1];
        double *vb = th_doubles(b);
        expect_close(a, vb, 1e-13, k ? "dx" : "y");
        free(vb);
    }
    tg_tensor *all[] = {base, xv, xc, gy, w, y[0], y[1], g[0], g[1]};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tg_tensor_release(all[i]);
}

/* Half x goes channel by channel through per-thread f32 copies (contiguous x
 * only); a strided view of the same values takes the whole-tensor f32 copy.
 * Both give the same bits: output, running buffers and every gradient, in
 * training and eval, in and out of autocast (half or f32 output), f16 and
 * bf16, with a half dy that the backward may overwrite in place (an f32 one
 * when the output is f32). */
Test(norm, half_channels_same_bits_as_whole_copy)
{
    const int64_t bs[4] = {4, 5, 3, 6};   /* viewed as (4, 3, 5, 6): C = 3 */
    const tg_dtype halves[2] = {TG_F16, TG_BF16};
    for (int h = 0; h < 2; h++)
        for (int ac = 0; ac < 2; ac++)
            for (int tr = 0; tr < 2; tr++) {
                const tg_dtype dt = halves[h];
                tg_tensor *base = th_rand_uniform(dt, 4, bs, 101 + h), *xv = NULL, *xc = NULL;
                cr_assert(eq(int, tg_transpose(&xv, base, 1, 2), TG_OK));
                cr_assert(eq(int, tg_contiguous(&xc, xv), TG_OK));
                cr_assert(not(tg_tensor_is_contiguous(xv)));
                tg_tensor *w = vec(TG_F32, 3, 102, 0.5, 2), *b = vec(TG_F32, 3, 103, -1, 1);
                tg_tensor_set_requires_grad(w, true);
                tg_tensor_set_requires_grad(b, true);
                tg_tensor *xs2[2] = {xv, xc}, *y[2], *gx[2], *gw[2], *gb[2], *rm[2], *rv[2];
                tg_tensor *gy = NULL;
                for (int r = 0; r < 2; r++) {
                    tg_tensor *leaf = NULL;
                    rm[r] = vec(TG_F32, 3, 104, -0.5, 0.5);
                    rv[r] = vec(TG_F32, 3, 105, 0.5, 1.5);
                    cr_assert(eq(int, tg_tensor_detach(&leaf, xs2[r]), TG_OK));
                    tg_tensor_set_requires_grad(leaf, true);
                    if (ac) cr_assert(eq(int, tg_autocast_begin(dt), TG_OK));
                    y[r] = NULL;
                    int rc = tg_batch_norm(&y[r], leaf, rm[r], rv[r], w, b, tr, 0.1, 1e-5);
                    if (ac) tg_autocast_end();
                    cr_assert(eq(int, rc, TG_OK), "%s", tg_error_message());
                    cr_assert(eq(int, tg_tensor_dtype(y[r]), ac ? dt : TG_F32));
                    if (!gy)
                        gy = th_rand_uniform(tg_tensor_dtype(y[r]), 4, tg_tensor_shape(xv), 106);
                    /* through sum(y * gy): dy arrives as a fresh tensor, which the
                     * fused backward overwrites with dx when it is half */
                    tg_tensor *z = NULL, *s = NULL;
                    cr_assert(eq(int, tg_mul(&z, y[r], gy), TG_OK));
                    cr_assert(eq(int, tg_sum(&s, z), TG_OK));
                    cr_assert(eq(int, tg_backward(s, NULL, NULL), TG_OK), "%s", tg_error_message());
                    tg_tensor_release(z), tg_tensor_release(s);
                    gx[r] = tg_tensor_retain(tg_tensor_grad(leaf));
                    gw[r] = tg_tensor_retain(tg_tensor_grad(w));
                    gb[r] = tg_tensor_retain(tg_tensor_grad(b));
                    tg_tensor_zero_grad(w);
                    tg_tensor_zero_grad(b);
                    tg_tensor_release(leaf);
                }
                tg_tensor *pairs[6][2] = {{y[0], y[1]},   {gx[0], gx[1]}, {gw[0], gw[1]},
                                          {gb[0], gb[1]}, {rm[0], rm[1]}, {rv[0], rv[1]}};
                for (int k = 0; k < 6; k++) {
                    tg_tensor *a = pairs[k][0], *c = pairs[k][1];
                    cr_assert(eq(int, tg_tensor_dtype(a), tg_tensor_dtype(c)));
                    cr_assert(tg_tensor_is_contiguous(a) && tg_tensor_is_contiguous(c));
                    cr_assert(eq(int, memcmp(tg_tensor_cdata(a), tg_tensor_cdata(c),
                                             (size_t)tg_tensor_numel(a) *
                                                 tg_dtype_size(tg_tensor_dtype(a))), 0),
                              "%s autocast %d training %d: tensor %d", tg_dtype_name(dt), ac, tr,
                              k);
                }
                for (int k = 0; k < 6; k++)
                    tg_tensor_release(pairs[k][0]), tg_tensor_release(pairs[k][1]);
                tg_tensor *all[] = {base, xv, xc, w, b, gy};
                for (size_t i = 0; i < sizeof all / sizeof *all; i++) tg_tensor_release(all[i]);
            }
}

/* Rows shorter than 16 values (BatchNorm1d's (N, C), or tiny images) go
 * through blocks of 256 channels, sample by sample; tg__bn_set_blocks(false)
 * forces the per-channel loops.  Both must give the same bits: output,
 * running buffers and the gradients of x, weight and bias, in f32 and f64,
 * training and eval, with and without weight and bias, over channel counts
 * that leave a partial block. */
Test(norm, channel_blocks_same_bits_as_channel_loops)
{
    const int64_t shapes[3][3] = {{5, 300, 1}, {4, 520, 3}, {3, 7, 15}};   /* (N, C, S) */
    const tg_dtype dts[2] = {TG_F32, TG_F64};
    for (int k = 0; k < 3; k++)
        for (int d = 0; d < 2; d++)
            for (int mode = 0; mode < 4; mode++) {
                const bool training = mode & 1, affine = mode & 2;
                const int64_t c = shapes[k][1], xs[3] = {shapes[k][0], c, shapes[k][2]};
                const tg_dtype dt = dts[d];
                tg_tensor *x = th_rand_uniform(dt, 3, xs, 201 + k), *gy = th_rand_uniform(dt, 3, xs, 211);
                tg_tensor *w = affine ? vec(dt, c, 202, 0.5, 2) : NULL;
                tg_tensor *b = affine ? vec(dt, c, 203, -1, 1) : NULL;
                tg_tensor *out[2][6];
                for (int r = 0; r < 2; r++) {
                    tg__bn_set_blocks(r == 0);
                    tg_tensor *rm = vec(dt, c, 204, -0.5, 0.5), *rv = vec(dt, c, 205, 0.5, 1.5);
                    tg_tensor *leaf = NULL, *y = NULL;
                    cr_assert(eq(int, tg_tensor_detach(&leaf, x), TG_OK));
                    tg_tensor_set_requires_grad(leaf, true);
                    if (w) tg_tensor_set_requires_grad(w, true), tg_tensor_set_requires_grad(b, true);
                    cr_assert(eq(int, tg_batch_norm(&y, leaf, rm, rv, w, b, training, 0.1, 1e-5),
                                 TG_OK), "%s", tg_error_message());
                    tg_tensor *in[3] = {leaf, w, b}, *gi[3] = {NULL, NULL, NULL};
                    cr_assert(eq(int, tg_grad(gi, 1, &y, &gy, w ? 3 : 1, in, NULL), TG_OK), "%s",
                              tg_error_message());
                    tg_tensor *got[6] = {y, rm, rv, gi[0], gi[1], gi[2]};
                    memcpy(out[r], got, sizeof got);
                    tg_tensor_release(leaf);
                }
                tg__bn_set_blocks(true);
                for (int i = 0; i < 6; i++) {
                    if (!out[0][i]) continue;
                    cr_assert(eq(int, memcmp(tg_tensor_data(out[0][i]), tg_tensor_data(out[1][i]),
                                             (size_t)tg_tensor_numel(out[0][i]) * tg_dtype_size(dt)), 0),
                              "shape %d %s training %d affine %d: output %d differs", k,
                              tg_dtype_name(dt), training, affine, i);
                    tg_tensor_release(out[0][i]), tg_tensor_release(out[1][i]);
                }
                tg_tensor_release(x), tg_tensor_release(gy), tg_tensor_release(w), tg_tensor_release(b);
            }
}

/* A batch variance past f32's range (values of +-1e20: 1e40) makes the f32
 * running_var +inf, as PyTorch's in-place update does, with the output
 * computed (the batch statistics are in double) and no error: not refused
 * by a checked store after running_mean has been updated. */
Test(norm, running_var_past_the_dtype_range_becomes_inf)
{
    const double xv[8] = {1e20, -1e20, -1e20, 1e20, 1e20, 1e20, -1e20, -1e20};
    tg_tensor *x = th_tensor_from(TG_F32, 2, (int64_t[]){4, 2}, xv);
    tg_tensor *rm = th_tensor_from(TG_F32, 1, (int64_t[]){2}, (double[]){0.5, 0.5});
    tg_tensor *rv = th_tensor_from(TG_F32, 1, (int64_t[]){2}, (double[]){1.0, 1.0}), *y = NULL;
    cr_assert(eq(int, tg_batch_norm(&y, x, rm, rv, NULL, NULL, true, 0.1, 1e-5), TG_OK), "%s",
              tg_error_message());
    for (int c = 0; c < 2; c++) {
        cr_assert(isinf(th_at(rv, c)) && th_at(rv, c) > 0, "running_var[%d] = %g", c, th_at(rv, c));
        cr_assert(th_close(th_at(rm, c), 0.45, 1e-6, 0), "running_mean[%d] = %g", c, th_at(rm, c));
    }
    for (int i = 0; i < 8; i++)
        cr_assert(th_close(th_at(y, i), xv[i] > 0 ? 1.0 : -1.0, 1e-5, 0), "y[%d] = %g", i,
                  th_at(y, i));
    tg_tensor_release(y);
    tg_tensor_release(rv);
    tg_tensor_release(rm);
    tg_tensor_release(x);
}
