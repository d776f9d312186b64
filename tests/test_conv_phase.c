/* tests/test_conv_phase.c - ConvTranspose by stride phases
 * (tg__conv_transpose_phase_raw, src/ops/conv_phase*.{c,h}) against the column
 * path (GEMM into columns + col2im) and the textbook reference (zero
 * interleaving + flipped-kernel Conv), on raw f64/f32 buffers, for sweeps of
 * 1-D, 2-D and 3-D geometries with stride <= kernel and dilation 1. */
#include <math.h>
#include <stdlib.h>
#include <string.h>


#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "helpers.h"
#include "core/core.h"
#include "tapegrad/tapegrad.h"
#include "ops/conv_internal.h"
#include "tapegrad/conv.h"

static uint64_t rng = 0x243f6a8885a308d3ull;

static tg_tensor *mk_rand(int nd, const int64_t *shape)
{
    tg_tensor *t = NULL;
    cr_assert(eq(int, tg_tensor_zeros(&t, TG_F64, nd, shape), TG_OK));
    double *v = tg_tensor_data(t);
    for (int64_t i = 0; i < tg_tensor_numel(t); i++) v[i] = th_uniform_pm1(&rng);
    return t;
}

/* One configuration: nd-2 spatial axes of extents xs[], per-axis stride,
 * kernel, padding (low = high) and output_padding; cx and cy channels per
 * group in and out (0: 2 and 3). */
typedef struct cfg {
    int nd;
    int64_t batch, groups, cx, cy, xs[3], s[3], k[3], p[3], op[3];
} cfg;

/* y's of the phase (last-axis taps copied), column, reference and phase
 * (last-axis taps shifted) paths for cfg c, in f64, with `chunk` samples per
 * chunk; *ny their length.  false (nothing run) when the
 * output would be empty. */
static bool run_f64(const cfg *c, int64_t chunk, double **out, int64_t *ny)
{
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    const int ns = c->nd - 2;
    const int64_t cx = c->cx ? c->cx : 2, cy = c->cy ? c->cy : 3;
    int64_t xs[5] = {c->batch, cx * c->groups}, ws[5] = {cx * c->groups, cy}, os[3];
    for (int a = 0; a < ns; a++) {
        xs[2 + a] = c->xs[a];
        ws[2 + a] = c->k[a];
        p.stride[a] = c->s[a];
        p.padding[a][0] = p.padding[a][1] = c->p[a];
        p.output_padding[a] = c->op[a];
    }
    p.groups = c->groups;
    if (tg_conv_transpose_output_size(os, ns, xs + 2, ws + 2, &p) < 0) return false;
    tg_tensor *x = mk_rand(c->nd, xs), *w = mk_rand(c->nd, ws);
    tg__conv_geom g;
    int64_t yshape[5];
    cr_assert(eq(int, tg__conv_validate(true, x, w, NULL, &p, &g, yshape), TG_OK), "%s",
              tg_error_message());
    cr_assert(tg__conv_phase_applies(&g));
    int64_t hi[3] = {0, 0, 0}, op[3] = {0, 0, 0};
    for (int a = 0; a < ns; a++) {
        hi[3 - ns + a] = c->p[a];
        op[3 - ns + a] = c->op[a];
    }
    *ny = g.batch * g.c_img * tg__conv_prod3(g.img);
    for (int i = 0; i < 4; i++) {
        out[i] = malloc((size_t)*ny * sizeof(double));
        for (int64_t j = 0; j < *ny; j++) out[i][j] = NAN;   /* every y must be written */
    }
    const void *xd = tg_tensor_data(x), *wd = tg_tensor_data(w);
    tg__conv_set_chunk(chunk);
    tg__conv_phase_set_shift(1);
    cr_assert(eq(int, tg__conv_transpose_phase_raw(TG_F64, &g, xd, wd, out[0]), TG_OK));
    tg__conv_phase_set_shift(2);
    cr_assert(eq(int, tg__conv_transpose_phase_raw(TG_F64, &g, xd, wd, out[3]), TG_OK));
    tg__conv_phase_set_shift(0);
    cr_assert(eq(int, tg__conv_transpose_cols_raw(TG_F64, &g, xd, wd, out[1]), TG_OK));
    tg__conv_set_chunk(0);
    cr_assert(eq(int, tg__conv_transpose_reference_raw(TG_F64, &g, hi, op, xd, wd, out[2]),
                 TG_OK));
    tg_tensor_release(x);
    tg_tensor_release(w);
    return true;
}

static void describe(const cfg *c, char *buf, size_t n)
{
    snprintf(buf, n, "%dd B=%lld G=%lld x=(%lld,%lld,%lld) s=(%lld,%lld,%lld) k=(%lld,%lld,%lld) "
             "p=(%lld,%lld,%lld) op=(%lld,%lld,%lld)", c->nd - 2, (long long)c->batch,
             (long long)c->groups, (long long)c->xs[0], (long long)c->xs[1], (long long)c->xs[2],
             (long long)c->s[0], (long long)c->s[1], (long long)c->s[2], (long long)c->k[0],
             (long long)c->k[1], (long long)c->k[2], (long long)c->p[0], (long long)c->p[1],
             (long long)c->p[2], (long long)c->op[0], (long long)c->op[1], (long long)c->op[2]);
}

/* Phase (both variants) == column path and == reference within 1e-12 (relative). */
static void check(const cfg *c, int64_t chunk)
{
    double *y[4];
    int64_t ny;
    if (!run_f64(c, chunk, y, &ny)) return;
    char what[256];
    describe(c, what, sizeof what);
    for (int64_t j = 0; j < ny; j++) {
        cr_assert(fabs(y[0][j] - y[1][j]) <= 1e-12 * (1 + fabs(y[1][j])),
                  "%s chunk %lld elem %lld: phase %.17g vs cols %.17g", what, (long long)chunk,
                  (long long)j, y[0][j], y[1][j]);
        cr_assert(fabs(y[0][j] - y[2][j]) <= 1e-12 * (1 + fabs(y[2][j])),
                  "%s elem %lld: phase %.17g vs reference %.17g", what, (long long)j, y[0][j],
                  y[2][j]);
        cr_assert(fabs(y[3][j] - y[1][j]) <= 1e-12 * (1 + fabs(y[1][j])),
                  "%s chunk %lld elem %lld: shifted phase %.17g vs cols %.17g", what,
                  (long long)chunk, (long long)j, y[3][j], y[1][j]);
    }
    for (int i = 0; i < 4; i++) free(y[i]);
}

/* Axis a of the sweep point (s, dk, p, op): a rotated copy on the other axes,
 * so that 2-D and 3-D mix different strides and kernels per axis. */
static void set_axis(cfg *c, int a, int64_t s, int64_t dk, int64_t p, int64_t op)
{
    c->s[a] = (s - 1 + a) % 3 + 1;
    c->k[a] = c->s[a] + (dk + a) % 4;
    c->p[a] = p < c->k[a] ? p : c->k[a] - 1;
    c->op[a] = op < c->s[a] ? op : c->s[a] - 1;
}

/* stride 1..3, K = stride..stride+3, padding 0..K-1, output_padding < stride,
 * groups 1..3, batch 1 and 5; chunks automatic, 1 and 2 samples. */
static void sweep(int nd, const int64_t *ext, int threads)
{
    tg_set_num_threads(threads);
    int64_t n = 0;
    for (int64_t s = 1; s <= 3; s++)
        for (int64_t dk = 0; dk <= 3; dk++)
            for (int64_t p = 0; p < s + dk; p++)
                for (int64_t op = 0; op < s; op++)
                    for (int64_t G = 1; G <= 3; G++)
                        for (int64_t B = 1; B <= 5; B += 4, n++) {
                            /* 3-D: one of the (groups, batch) pairs per point */
                            if (nd == 5 && n % 6 != (s + dk + p + op) % 6) continue;
                            cfg c = {.nd = nd, .batch = B, .groups = G};
                            for (int a = 0; a < 3; a++) {
                                c.xs[a] = ext[a];
                                set_axis(&c, a, s, dk, p, op);
                            }
                            check(&c, n % 3);
                        }
    tg_set_num_threads(2);
}

Test(conv_phase, sweep_1d)
{
    const int64_t ext[3] = {7, 1, 1};
    sweep(3, ext, 1);
    sweep(3, ext, 2);
}

Test(conv_phase, sweep_2d)
{
    const int64_t ext[3] = {5, 3, 1};
    sweep(4, ext, 1);
    sweep(4, ext, 2);
}

Test(conv_phase, sweep_3d)
{
    const int64_t ext[3] = {3, 1, 3};
    sweep(5, ext, 2);
}

/* Layers large enough that gemm_par and the parallel loops split the work:
 * 1 and 2 threads, chunks 0..3, against the column path (same sums in
 * another order: 1e-12) and the reference. */
Test(conv_phase, threaded_layers_match)
{
    const cfg cs[3] = {
        {.nd = 4, .batch = 5, .groups = 1, .cx = 24, .cy = 10, .xs = {7, 9}, .s = {2, 2}, .k = {4, 4},
         .p = {1, 1}, .op = {1, 0}},
        {.nd = 5, .batch = 3, .groups = 2, .cx = 12, .cy = 8, .xs = {5, 3, 7}, .s = {2, 1, 3}, .k = {3, 2, 4},
         .p = {1, 0, 2}, .op = {1, 0, 2}},
        {.nd = 3, .batch = 5, .groups = 3, .cx = 16, .cy = 8, .xs = {301}, .s = {8}, .k = {16}, .p = {4},
         .op = {5}},
    };
    for (int i = 0; i < 3; i++)
        for (int t = 1; t <= 2; t++)
            for (int64_t chunk = 0; chunk <= 3; chunk++) {
                tg_set_num_threads(t);
                check(&cs[i], chunk);
            }
    tg_set_num_threads(2);
}

/* f32: the phase path within float rounding of the f64 result, and the same
 * bits on a second run with 2 threads (deterministic). */
Test(conv_phase, f32_close_and_deterministic)
{
    tg_set_num_threads(2);
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    p.stride[0] = p.stride[1] = 2;
    tg_conv_params_set_padding(&p, 1);
    const int64_t xs[4] = {6, 24, 7, 9}, ws[4] = {24, 10, 4, 4};
    tg_tensor *x = mk_rand(4, xs), *w = mk_rand(4, ws);
    tg__conv_geom g;
    int64_t ys[4];
    cr_assert(eq(int, tg__conv_validate(true, x, w, NULL, &p, &g, ys), TG_OK));
    const int64_t nx = tg_tensor_numel(x), nw = tg_tensor_numel(w), ny = ys[0] * ys[1] * ys[2] * ys[3];
    const double *xd = tg_tensor_data(x), *wd = tg_tensor_data(w);
    float *xf = malloc((size_t)nx * sizeof(float)), *wf = malloc((size_t)nw * sizeof(float));
    float *a = malloc((size_t)ny * sizeof(float)), *b = malloc((size_t)ny * sizeof(float));
    double *yd = malloc((size_t)ny * sizeof(double));
    for (int64_t i = 0; i < nx; i++) xf[i] = (float)xd[i];
    for (int64_t i = 0; i < nw; i++) wf[i] = (float)wd[i];
    cr_assert(eq(int, tg__conv_transpose_cols_raw(TG_F64, &g, xd, wd, yd), TG_OK));
    cr_assert(eq(int, tg__conv_transpose_phase_raw(TG_F32, &g, xf, wf, a), TG_OK));
    cr_assert(eq(int, tg__conv_transpose_phase_raw(TG_F32, &g, xf, wf, b), TG_OK));
    cr_assert(eq(int, memcmp(a, b, (size_t)ny * sizeof(float)), 0), "two runs differ");
    for (int64_t i = 0; i < ny; i++)
        cr_assert(fabs(a[i] - yd[i]) <= 1e-5 * (1 + fabs(yd[i])), "elem %lld: %g vs %g",
                  (long long)i, a[i], yd[i]);
    free(xf); free(wf); free(a); free(b); free(yd);
    tg_tensor_release(x);
    tg_tensor_release(w);
    tg__conv_scratch_release();
}

/* The phase table partitions every axis's outputs: each o in [0, O) is
 * q*s + r - p for exactly one phase r and q in [qlo, qlo + Q), and each
 * phase has ceil((K - r)/s) taps. */
Test(conv_phase, phases_partition_outputs)
{
    for (int64_t s = 1; s <= 4; s++)
        for (int64_t k = s; k <= s + 3; k++)
            for (int64_t p = 0; p < k; p++)
                for (int64_t o = 1; o <= 12; o++) {
                    tg__conv_geom g = {.nsp = 1, .batch = 1, .groups = 1, .c_img = 1, .c_col = 1,
                                       .img = {1, 1, o}, .col = {1, 1, 4}, .k = {1, 1, k},
                                       .stride = {1, 1, s}, .dil = {1, 1, 1}, .pad = {0, 0, p}};
                    int hits[12] = {0};
                    int64_t taps = 0;
                    for (int64_t ph = 0; ph < s; ph++) {
                        tg__conv_phase f;
                        tg__conv_phase_at(&g, ph, &f);
                        cr_assert(eq(i64, f.r[2], ph));
                        taps += f.t[2];
                        for (int64_t q = f.qlo[2]; q < f.qlo[2] + f.q[2]; q++) {
                            const int64_t at = q * s + ph - p;
                            cr_assert(at >= 0 && at < o, "s=%lld k=%lld p=%lld o=%lld", (long long)s,
                                      (long long)k, (long long)p, (long long)o);
                            hits[at]++;
                        }
                    }
                    cr_assert(eq(i64, taps, k));
                    for (int64_t i = 0; i < o; i++) cr_assert(eq(int, hits[i], 1));
                }
}

/* The dispatch: a 2-D layer with C_in <= C_out, 48 outputs and 289 positions
 * per phase takes the phase path through tg_conv_transpose (bias and fused
 * activation included) and matches the reference algorithm; a DCGAN-like
 * layer (C_in > C_out) does not take it. */
Test(conv_phase, dispatched_layer_matches_reference)
{
    tg_set_num_threads(2);
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    p.stride[0] = p.stride[1] = 2;
    tg_conv_params_set_padding(&p, 1);
    p.output_padding[1] = 1;
    p.act = TG_ACT_LEAKY_RELU;
    p.act_slope = 0.2;
    const int64_t xs[4] = {2, 16, 17, 17}, ws[4] = {16, 48, 4, 4}, bs[1] = {48};
    tg_tensor *x = mk_rand(4, xs), *w = mk_rand(4, ws), *b = mk_rand(1, bs), *y[2] = {NULL, NULL};
    tg__conv_geom g;
    int64_t ys[4];
    cr_assert(eq(int, tg__conv_validate(true, x, w, b, &p, &g, ys), TG_OK));
    cr_assert(tg__conv_phase_pays(&g), "this layer should take the phase path");
    p.algo = TG_CONV_ALGO_FAST;
    cr_assert(eq(int, tg_conv_transpose(&y[0], x, w, b, &p), TG_OK), "%s", tg_error_message());
    p.algo = TG_CONV_ALGO_REFERENCE;
    cr_assert(eq(int, tg_conv_transpose(&y[1], x, w, b, &p), TG_OK), "%s", tg_error_message());
    const double *a = tg_tensor_data(y[0]), *r = tg_tensor_data(y[1]);
    for (int64_t i = 0; i < tg_tensor_numel(y[1]); i++)
        cr_assert(fabs(a[i] - r[i]) <= 1e-12 * (1 + fabs(r[i])), "elem %lld: %.17g vs %.17g",
                  (long long)i, a[i], r[i]);
    for (int i = 0; i < 2; i++) tg_tensor_release(y[i]);

    /* ... and it is the phase kernel that ran: without bias and activation,
     * the result has its bits, not the column path's (asserted to differ) */
    p.algo = TG_CONV_ALGO_FAST;
    p.act = TG_ACT_NONE;
    cr_assert(eq(int, tg__conv_validate(true, x, w, NULL, &p, &g, ys), TG_OK));
    cr_assert(eq(int, tg_conv_transpose(&y[0], x, w, NULL, &p), TG_OK), "%s", tg_error_message());
    const int64_t ny = tg_tensor_numel(y[0]);
    double *ph = malloc((size_t)ny * sizeof *ph), *co = malloc((size_t)ny * sizeof *co);
    cr_assert(ph && co);
    cr_assert(eq(int, tg__conv_transpose_phase_raw(TG_F64, &g, tg_tensor_data(x),
                                                   tg_tensor_data(w), ph), TG_OK));
    cr_assert(eq(int, tg__conv_transpose_cols_raw(TG_F64, &g, tg_tensor_data(x),
                                                  tg_tensor_data(w), co), TG_OK));
    const size_t bytes = (size_t)ny * sizeof(double);
    cr_assert(memcmp(ph, co, bytes) != 0, "the two kernels agree bitwise: no evidence either way");
    cr_assert(memcmp(tg_tensor_data(y[0]), ph, bytes) == 0,
              "tg_conv_transpose did not take the phase kernel");
    free(ph), free(co);
    tg_tensor_release(y[0]);
    tg_tensor_release(x); tg_tensor_release(w); tg_tensor_release(b);

    const int64_t dx[4] = {2, 64, 8, 8}, dw[4] = {64, 32, 4, 4};
    tg_conv_params q = TG_CONV_PARAMS_INIT;
    q.stride[0] = q.stride[1] = 2;
    tg_conv_params_set_padding(&q, 1);
    x = mk_rand(4, dx);
    w = mk_rand(4, dw);
    cr_assert(eq(int, tg__conv_validate(true, x, w, NULL, &q, &g, ys), TG_OK));
    cr_assert(eq(int, tg__conv_phase_pays(&g), 0), "C_in > C_out stays on the column path");
    tg_tensor_release(x); tg_tensor_release(w);
    tg__conv_scratch_release();
}
