/* tests/test_activation.c - relu, leaky_relu, tanh and sigmoid beyond their
 * values (test_ops.c has those): what they keep on the tape (their output, so
 * the input can be freed), their one-pass backward and its fused half path,
 * against the general path bit for bit, gradients at NaN and at the kinks,
 * and relu/leaky_relu against torch 1.13 bit for bit
 * (tests/golden/elementwise.safetensors, scripts/make_ew_goldens.py). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "helpers.h"
#include "core/core.h"
#include "tapegrad/tapegrad.h"
#include "ops/activation_internal.h"
#include "tapegrad/autograd.h"
#include "tapegrad/ops.h"

/* ---- what the tape keeps, and the one-pass backward ---- */

/* relu and leaky_relu with slope >= 0 keep their output on the tape, not
 * their input: once the caller drops the input (here a = 2x, which saves
 * nothing), its bytes are gone while the graph lives.  The gradient is still
 * the mask of the input's sign, including at exact zeros. */
Test(activation, relu_family_saves_output_so_its_input_is_freed)
{
    const double slopes[] = {0.0, 0.2, -0.5};   /* relu, leaky, leaky with a negative slope */
    int64_t sh[1] = {50000};
    for (int k = 0; k < 3; k++) {
        tg_tensor *x = th_seq(TG_F32, 1, sh, -2, 2), *a = NULL, *y = NULL;
        cr_assert(eq(int, tg_tensor_set_flat(x, 7, 0.0), TG_OK));   /* a kink */
        tg_tensor_set_requires_grad(x, true);
        cr_assert(eq(int, tg_mul_scalar(&a, x, 2.0), TG_OK));
        int64_t before, after;
        tg_memory_stats(&before, NULL);   /* x and a */
        cr_assert(eq(int, slopes[k] == 0 ? tg_relu(&y, a) : tg_leaky_relu(&y, a, slopes[k]), TG_OK));
        tg_tensor_release(a);
        tg_memory_stats(&after, NULL);
        /* with a slope >= 0, a's storage went back; with a negative one, it is kept */
        cr_assert(eq(i64, after - before, slopes[k] >= 0 ? 0 : 50000 * 4), "slope %g", slopes[k]);
        cr_assert(eq(int, tg_backward(y, y, NULL), TG_OK), "%s", tg_error_message());
        double *vx = th_doubles(x), *vy = th_doubles(y), *vg = th_doubles(tg_tensor_grad(x));
        for (int64_t i = 0; i < sh[0]; i++) {
            const double m = vx[i] > 0 ? 1.0 : slopes[k];   /* d y/d a */
            cr_assert(eq(dbl, vg[i], (double)(float)(vy[i] * (float)m) * 2.0),
                      "slope %g, x %g: grad %g", slopes[k], vx[i], vg[i]);
        }
        free(vx), free(vy), free(vg);
        tg_tensor_release(x), tg_tensor_release(y);
    }
}

/* The one-pass backward of relu / leaky_relu (no graph recorded) gives the
 * same bits as the recorded mask-and-multiply path (create_graph) in f32 and
 * f64, with NaN, inf and zero inputs and gradients.  In bf16 it rounds once,
 * g * slope computed in f32 (as PyTorch's leaky_relu_backward), while the
 * recorded path's mask is a bf16 tensor whose slope is rounded first: there
 * the one-pass result is checked element by element against that single
 * rounding, and the recorded one to within bf16's precision. */
Test(activation, relu_backward_one_pass_same_bits_as_recorded)
{
    const tg_dtype dts[] = {TG_F32, TG_F64, TG_BF16};
    const double specials[] = {0.0, -0.0, NAN, INFINITY, -INFINITY, 1e-30, -1e-30};
    int64_t sh[2] = {40, 1000};
    for (int d = 0; d < 3; d++)
        for (int k = 0; k < 2; k++) {
            const double slope = k == 0 ? 0.0 : 0.3;
            tg_tensor *x[2], *y[2], *g = th_seq(dts[d], 2, sh, -3, 3), *gx[2];
            for (int i = 0; i < 7; i++) cr_assert(eq(int, tg_tensor_set_flat(g, 3 * i + 1, specials[i]), TG_OK));
            for (int r = 0; r < 2; r++) {
                x[r] = th_seq(dts[d], 2, sh, -3, 3);   /* the same values both times */
                for (int i = 0; i < 7; i++) cr_assert(eq(int, tg_tensor_set_flat(x[r], 3 * i, specials[i]), TG_OK));
                tg_tensor_set_requires_grad(x[r], true);
                y[r] = NULL;
                cr_assert(eq(int, k == 0 ? tg_relu(&y[r], x[r]) : tg_leaky_relu(&y[r], x[r], slope), TG_OK));
                tg_backward_opts o = TG_BACKWARD_OPTS_INIT;
                o.create_graph = r == 1;
                cr_assert(eq(int, tg_backward(y[r], g, &o), TG_OK), "%s", tg_error_message());
                gx[r] = tg_tensor_grad(x[r]);
            }
            const size_t bytes = (size_t)(sh[0] * sh[1]) * tg_dtype_size(dts[d]);
            if (dts[d] != TG_BF16) {
                cr_assert(eq(int, memcmp(tg_tensor_data(gx[0]), tg_tensor_data(gx[1]), bytes), 0),
                          "dtype %d slope %g", (int)dts[d], slope);
            } else {
                tg_tensor *want = NULL;
                cr_assert(eq(int, tg_tensor_zeros(&want, TG_BF16, 2, sh), TG_OK));
                for (int64_t i = 0; i < sh[0] * sh[1]; i++) {
                    /* leaky: a > 0 ? g : g * slope; relu: g * (a <= 0 ? 0 : 1), so a
                     * NaN a passes g, as PyTorch's threshold_backward */
                    const float gi = (float)th_at(g, i);
                    const double xi = th_at(x[0], i);
                    const float p = slope != 0 ? (xi > 0 ? gi : gi * (float)slope)
                                               : gi * (xi <= 0 ? 0.0f : 1.0f);
                    cr_assert(eq(int, tg_tensor_set_flat(want, i, p), TG_OK));
                }
                cr_assert(eq(int, memcmp(tg_tensor_data(gx[0]), tg_tensor_data(want), bytes), 0),
                          "bf16 slope %g", slope);
                for (int64_t i = 0; i < sh[0] * sh[1]; i++) {
                    const double a0 = th_at(gx[0], i), a1 = th_at(gx[1], i);
                    cr_assert(isnan(a0) ? isnan(a1) : th_close(a1, a0, 1.0 / 128, 0), "%g vs %g", a0, a1);
                }
                tg_tensor_release(want);
            }
            for (int r = 0; r < 2; r++) tg_tensor_release(x[r]), tg_tensor_release(y[r]);
            tg_tensor_release(g);
        }
}

/* tanh and sigmoid save their output, as PyTorch does, so their input goes
 * back after the forward; their one-pass backward (no graph) gives the same
 * bits as the recorded one (create_graph) in f32 and f64, and writes over a
 * sole incoming gradient; modifying the output in place before backward is
 * TG_EINPLACE. */
Test(activation, tanh_sigmoid_save_output_one_pass_backward)
{
    int64_t sh[1] = {50000};
    for (int k = 0; k < 4; k++) {   /* tanh, sigmoid; f32, f64 */
        const bool is_tanh = k % 2 == 0;
        const tg_dtype dt = k < 2 ? TG_F32 : TG_F64;
        const int64_t bytes = sh[0] * (int64_t)tg_dtype_size(dt);
        tg_tensor *x[2], *gx[2], *c = th_seq(dt, 1, sh, 0.5, 1.5);
        for (int r = 0; r < 2; r++) {   /* r = 1: create_graph */
            tg_tensor *a = NULL, *y = NULL, *z = NULL, *s = NULL;
            x[r] = th_seq(dt, 1, sh, -4, 4);
            tg_tensor_set_requires_grad(x[r], true);
            /* y = f(2x) with 2x freed at once: the tape keeps y, not 2x */
            cr_assert(eq(int, tg_mul_scalar(&a, x[r], 2.0), TG_OK));
            int64_t before, after, peak;
            tg_memory_stats(&before, NULL);
            cr_assert(eq(int, is_tanh ? tg_tanh(&y, a) : tg_sigmoid(&y, a), TG_OK));
            tg_tensor_release(a);
            tg_memory_stats(&after, NULL);
            cr_assert(eq(i64, after - before, 0), "case %d: a was kept", k);
            tg_tensor_release(y);
            y = NULL;
            /* the measured graph: s = sum(f(x) * c) */
            cr_assert(eq(int, is_tanh ? tg_tanh(&y, x[r]) : tg_sigmoid(&y, x[r]), TG_OK));
            cr_assert(eq(int, tg_mul(&z, y, c), TG_OK));
            cr_assert(eq(int, tg_sum(&s, z), TG_OK));
            tg_tensor_release(y), tg_tensor_release(z);
            tg_backward_opts o = TG_BACKWARD_OPTS_INIT;
            o.create_graph = r == 1;
            tg_memory_reset_peak();
            tg_memory_stats(&before, NULL);
            cr_assert(eq(int, tg_backward(s, NULL, &o), TG_OK), "%s", tg_error_message());
            tg_memory_stats(NULL, &peak);
            if (r == 0)   /* dy = c, then written over with dx */
                cr_assert(le(i64, peak - before, bytes + 4096), "case %d: %lld bytes", k,
                          (long long)(peak - before));
            gx[r] = tg_tensor_grad(x[r]);
            tg_tensor_release(s);
        }
        cr_assert(eq(int, memcmp(tg_tensor_data(gx[0]), tg_tensor_data(gx[1]), (size_t)bytes), 0),
                  "case %d: one-pass and recorded backwards differ", k);
        double *vx = th_doubles(x[0]), *vc = th_doubles(c), *vg = th_doubles(gx[0]);
        for (int64_t i = 0; i < sh[0]; i++) {
            const double y = is_tanh ? tanh(vx[i]) : 1 / (1 + exp(-vx[i]));
            const double want = vc[i] * (is_tanh ? 1 - y * y : y * (1 - y));
            cr_assert(th_close(vg[i], want, dt == TG_F32 ? 1e-5 : 1e-13, 1e-6), "case %d", k);
        }
        free(vx), free(vc), free(vg);
        /* x[1].grad's graph leads back to x[1] (as in PyTorch, create_graph
         * makes that cycle): clear it first */
        tg_tensor_set_grad(x[1], NULL);
        tg_tensor_release(x[0]), tg_tensor_release(x[1]), tg_tensor_release(c);
    }
    /* the saved output is checked like any saved tensor */
    tg_tensor *x = th_seq(TG_F32, 1, sh, -1, 1), *y = NULL;
    tg_tensor_set_requires_grad(x, true);
    cr_assert(eq(int, tg_tanh(&y, x), TG_OK));
    cr_assert(eq(int, tg_tensor_fill(y, 0.5), TG_OK));
    cr_assert(eq(int, tg_backward(y, y, NULL), TG_EINPLACE));
    cr_assert(strstr(tg_error_message(), "tanh: saved tensor #0") != NULL, "%s", tg_error_message());
    tg_tensor_release(x), tg_tensor_release(y);
}

/* When the incoming gradient is the engine's alone (here mul's output), the
 * one-pass relu / leaky_relu backward writes over it instead of allocating:
 * the backward's tensor peak stays at one activation-sized buffer (the
 * gradient of y) above what the graph holds, and x's gradient is still
 * c * mask exactly. */
Test(activation, relu_backward_reuses_a_sole_gradient_buffer)
{
    int64_t sh[1] = {65536};
    for (int k = 0; k < 4; k++) {   /* relu, leaky; f32, then bf16 (in f32 chunks) */
        const tg_dtype dt = k < 2 ? TG_F32 : TG_BF16;
        const int64_t bytes = 65536 * (int64_t)tg_dtype_size(dt);
        tg_tensor *x = th_seq(dt, 1, sh, -2, 2), *c = th_seq(dt, 1, sh, 0.5, 1.5), *y = NULL, *z = NULL,
                  *s = NULL, *want = NULL;
        tg_tensor_set_requires_grad(x, true);
        cr_assert(eq(int, k % 2 ? tg_leaky_relu(&y, x, 0.2) : tg_relu(&y, x), TG_OK));
        cr_assert(eq(int, tg_mul(&z, y, c), TG_OK));
        cr_assert(eq(int, tg_sum(&s, z), TG_OK));
        tg_tensor_release(y), tg_tensor_release(z);
        int64_t before, peak;
        tg_memory_reset_peak();
        tg_memory_stats(&before, NULL);
        cr_assert(eq(int, tg_backward(s, NULL, NULL), TG_OK), "%s", tg_error_message());
        tg_memory_stats(NULL, &peak);
        cr_assert(le(i64, peak - before, bytes + 4096), "case %d: %lld bytes above the graph", k,
                  (long long)(peak - before));
        cr_assert(eq(int, tg_tensor_zeros(&want, dt, 1, sh), TG_OK));   /* c * mask, rounded once */
        double *vx = th_doubles(x), *vc = th_doubles(c);
        for (int64_t i = 0; i < sh[0]; i++)
            tg_tensor_set_flat(want, i, (float)vc[i] * (vx[i] > 0 ? 1.0f : k % 2 ? 0.2f : 0.0f));
        cr_assert(eq(int, memcmp(tg_tensor_data(tg_tensor_grad(x)), tg_tensor_data(want), (size_t)bytes), 0),
                  "case %d", k);
        free(vx), free(vc);
        tg_tensor_release(x), tg_tensor_release(c), tg_tensor_release(s), tg_tensor_release(want);
    }
}

/* relu and leaky_relu of contiguous f16/bf16 tensors, and their gradients,
 * run in one pass in registers (tg__half_act_n); tg__act_set_half_fused(false)
 * forces the general half path (f32 chunks, the f32 kernels, one rounding).
 * Both must give the same bits for every half value: forward over all 65536
 * patterns (NaNs, infinities, subnormals, both zeros), and the gradient over
 * all patterns of the saved tensor against a scrambled set of gradients, with
 * slopes 0 (relu), 0.2, 0.01 and -0.5 (which saves the input), f16 and bf16,
 * the gradient both fresh and overwritten in place (a product after the
 * activation hands the engine's only reference on). */
static tg_tensor *all_halves(tg_dtype dt, uint32_t mult)
{
    const int64_t n = 65536;
    tg_tensor *t = NULL;
    cr_assert(eq(int, tg_tensor_zeros(&t, dt, 1, &n), TG_OK));
    uint16_t *p = tg_tensor_data(t);
    for (uint32_t i = 0; i < 65536; i++) p[i] = (uint16_t)((i * mult) & 0xFFFFu);
    return t;
}

/* y = act(x) and x's gradient for output gradient r (through y * c when
 * chained, so that the activation's backward may overwrite its gradient). */
static void act_run(bool fused, bool chained, double slope, tg_tensor *xv, tg_tensor *r,
                    tg_tensor *c, tg_tensor **y, tg_tensor **gx)
{
    tg__act_set_half_fused(fused);
    tg_tensor *x = NULL, *z = NULL;
    cr_assert(eq(int, tg_tensor_detach(&x, xv), TG_OK));
    tg_tensor_set_requires_grad(x, true);
    *y = NULL;
    if (slope == 0) cr_assert(eq(int, tg_relu(y, x), TG_OK));
    else cr_assert(eq(int, tg_leaky_relu(y, x, slope), TG_OK));
    if (chained) cr_assert(eq(int, tg_mul(&z, *y, c), TG_OK));
    tg_tensor *top = chained ? z : *y;
    cr_assert(eq(int, tg_grad(gx, 1, &top, &r, 1, &x, NULL), TG_OK), "%s", tg_error_message());
    tg_tensor_release(z);
    tg_tensor_release(x);
    tg__act_set_half_fused(true);
}

static void expect_same_halves(tg_tensor *a, tg_tensor *b, const char *what, tg_dtype dt,
                               double slope, int chained, tg_tensor *x)
{
    const uint16_t *pa = tg_tensor_cdata(a), *pb = tg_tensor_cdata(b);
    for (int64_t e = 0; e < 65536; e++)
        if (pa[e] != pb[e])
            cr_fatal("%s slope %g chained %d %s elem %lld (x 0x%04x): 0x%04x vs 0x%04x",
                     tg_dtype_name(dt), slope, chained, what, (long long)e,
                     ((const uint16_t *)tg_tensor_cdata(x))[e], pa[e], pb[e]);
}

Test(activation, half_relu_family_one_pass_same_bits_as_general_path)
{
    if (!tg__cpu_has_avx512bw())
        th_not_run("the fused half activations' AVX-512 BW loop is not run: this CPU lacks "
                    "AVX-512 F and BW (the AVX2 loop is)");
    const tg_dtype dts[2] = {TG_F16, TG_BF16};
    const double slopes[4] = {0, 0.2, 0.01, -0.5};
    for (int d = 0; d < 2; d++) {
        tg_tensor *x = all_halves(dts[d], 1), *r = all_halves(dts[d], 40503);
        tg_tensor *c = all_halves(dts[d], 2654435761u);
        for (int k = 0; k < 4; k++)
            for (int chained = 0; chained < 2; chained++) {
                tg_tensor *y[2], *g[2];
                for (int f = 0; f < 2; f++) act_run(f == 0, chained, slopes[k], x, r, c, &y[f], &g[f]);
                /* the fused kernels' AVX2 loop also where the CPU has AVX-512 */
                tg__act_set_half_avx512(false);
                tg_tensor *y2, *g2;
                act_run(true, chained, slopes[k], x, r, c, &y2, &g2);
                tg__act_set_half_avx512(true);
                expect_same_halves(y2, y[1], "y (avx2)", dts[d], slopes[k], chained, x);
                expect_same_halves(g2, g[1], "grad (avx2)", dts[d], slopes[k], chained, x);
                tg_tensor_release(y2), tg_tensor_release(g2);
                for (int i = 0; i < 2; i++) {
                    tg_tensor *a = i ? g[0] : y[0], *b = i ? g[1] : y[1];
                    cr_assert(eq(int, tg_tensor_dtype(a), dts[d]));
                    const uint16_t *pa = tg_tensor_cdata(a), *pb = tg_tensor_cdata(b);
                    for (int64_t e = 0; e < 65536; e++)
                        if (pa[e] != pb[e])
                            cr_fatal("%s slope %g chained %d %s elem %lld (x 0x%04x): 0x%04x vs 0x%04x",
                                     tg_dtype_name(dts[d]), slopes[k], chained, i ? "grad" : "y",
                                     (long long)e, ((const uint16_t *)tg_tensor_cdata(x))[e], pa[e],
                                     pb[e]);
                }
                tg_tensor_release(y[0]), tg_tensor_release(y[1]);
                tg_tensor_release(g[0]), tg_tensor_release(g[1]);
            }
        tg_tensor_release(x), tg_tensor_release(r), tg_tensor_release(c);
    }
}

/* relu's gradient at a NaN input is the incoming gradient, as PyTorch's
 * threshold_backward (a <= 0 ? 0 : g); leaky_relu's is g * slope, as its
 * leaky_relu_backward (a > 0 ? g : g * slope).  Every path: one pass (f32,
 * f64, the fused half kernels and the general half path) and recorded. */
Test(activation, relu_family_gradient_at_nan_inputs_as_pytorch)
{
    const tg_dtype dts[] = {TG_F32, TG_F64, TG_BF16, TG_F16};
    const double xs[] = {NAN, 1.5, -1.5, 0.0, -NAN};
    const double gs[] = {2.0, 3.0, 4.0, 5.0, 6.0};
    int64_t n = 5;
    for (size_t d = 0; d < sizeof dts / sizeof *dts; d++)
        for (int fused = 0; fused < 2; fused++)
            for (int create_graph = 0; create_graph < 2; create_graph++)
                for (int k = 0; k < 2; k++) {
                    const double slope = k == 0 ? 0.0 : 0.25;
                    tg__act_set_half_fused(fused);
                    tg_tensor *x = th_tensor_from(dts[d], 1, &n, xs);
                    tg_tensor *g = th_tensor_from(dts[d], 1, &n, gs), *y = NULL;
                    tg_tensor_set_requires_grad(x, true);
                    cr_assert(eq(int, k == 0 ? tg_relu(&y, x) : tg_leaky_relu(&y, x, slope), TG_OK));
                    tg_backward_opts o = TG_BACKWARD_OPTS_INIT;
                    o.create_graph = create_graph;
                    cr_assert(eq(int, tg_backward(y, g, &o), TG_OK), "%s", tg_error_message());
                    const tg_tensor *gx = tg_tensor_grad(x);
                    for (int64_t i = 0; i < n; i++) {
                        const double want = isnan(xs[i]) ? (k == 0 ? gs[i] : gs[i] * slope)
                                            : xs[i] > 0  ? gs[i]
                                                         : gs[i] * slope;
                        cr_assert(eq(dbl, th_at(gx, i), want), "%s fused %d graph %d slope %g x %g",
                                  tg_dtype_name(dts[d]), fused, create_graph, slope, xs[i]);
                    }
                    tg_tensor_release(y), tg_tensor_release(g), tg_tensor_release(x);
                    tg__act_set_half_fused(true);
                }
}

/* ---- bit for bit against torch 1.13 (scripts/make_ew_goldens.py) ---- */

/* For each dtype name dn[d]: fn(<op>.x.<dn>) must equal <op>.y.<dn> of the
 * golden file bit for bit. */
static void expect_golden_unary(const char *op, int nd, const char *const *dn,
                                int (*fn)(tg_tensor **, tg_tensor *))
{
    tg_st_file *f = th_golden_load("elementwise.safetensors");
    for (int d = 0; d < nd; d++) {
        char xn[32], yn[32];
        snprintf(xn, sizeof xn, "%s.x.%s", op, dn[d]);
        snprintf(yn, sizeof yn, "%s.y.%s", op, dn[d]);
        tg_tensor *x = tg_st_get(f, xn), *want = tg_st_get(f, yn), *y = NULL;
        cr_assert(x && want, "%s in the golden file", xn);
        cr_assert(eq(int, fn(&y, x), TG_OK), "%s", tg_error_message());
        th_expect_same_bits(xn, x, y, want);
        tg_tensor_release(y);
    }
    tg_st_free(f);
}

/* relu as torch.relu (clamp_min(x, 0)): NaN stays, and so does -0.0. */
Test(activation, relu_matches_torch_bit_for_bit)
{
    static const char *const dn[] = {"f32", "f64"};
    expect_golden_unary("relu", 2, dn, tg_relu);
}

static int leaky_02(tg_tensor **out, tg_tensor *x) { return tg_leaky_relu(out, x, 0.2); }

/* leaky_relu(x, 0.2) as torch's: the slope is converted to the tensor's
 * dtype (f32 for f32 and bf16, whose kernel runs in f32) before the
 * multiply, so the f32 result is x * 0.2f rounded once. */
Test(activation, leaky_relu_matches_torch_bit_for_bit)
{
    static const char *const dn[] = {"f32", "f64", "bf16"};
    expect_golden_unary("leaky", 3, dn, leaky_02);
}

/* f32 tanh (f64 arithmetic, vectorized) against the correctly rounded
 * (float)tanh((double)x), in AVX2 registers and without: the same bits both
 * ways, NaN for NaN, never more than one unit in the last place from
 * libm's, and one off only where the double rounding lies within the f64
 * error of a halfway point: at most one in a million.  Every 97th f32 bit
 * pattern (44 million values: zeros, subnormals, the whole normal range,
 * infinities, NaNs), then every 5th f32 of [2^-8, 16) (where tanh is
 * neither x nor 1 in f32) of both signs. */
static void tanh_sweep(uint64_t from, uint64_t to, uint64_t step, int64_t *n, int64_t *off)
{
    enum { CHUNK = 1 << 16 };
    static float x[CHUNK], got[CHUNK], alt[CHUNK];
    for (uint64_t bits = from; bits < to;) {
        int m = 0;
        for (; m < CHUNK && bits < to; m++, bits += step) {
            const uint32_t b = (uint32_t)bits;
            memcpy(&x[m], &b, sizeof b);
        }
        tg__tanh_f32_n(got, x, m, true);
        tg__tanh_f32_n(alt, x, m, false);
        cr_assert(memcmp(got, alt, (size_t)m * sizeof *got) == 0, "AVX2 and plain loops differ");
        for (int i = 0; i < m; i++) {
            const float want = (float)tanh((double)x[i]);
            if (isnan(x[i])) {
                cr_assert(isnan(got[i]));
                continue;
            }
            if (memcmp(&got[i], &want, sizeof want) == 0) continue;
            int32_t gi, wi;
            memcpy(&gi, &got[i], 4), memcpy(&wi, &want, 4);
            cr_assert(gi - wi == 1 || gi - wi == -1, "tanh(%a) = %a, libm %a", (double)x[i],
                      (double)got[i], (double)want);
            ++*off;
        }
        *n += m;
    }
}

Test(activation, f32_tanh_is_libms_correctly_rounded_tanh)
{
    int64_t n = 0, off = 0;
    tanh_sweep(0, UINT64_C(1) << 32, 97, &n, &off);
    cr_assert(n > 44000000);
    const uint64_t lo = 0x3b800000, hi = 0x41800000;   /* 2^-8, 16 */
    tanh_sweep(lo, hi, 5, &n, &off);
    tanh_sweep(lo | 0x80000000u, hi | 0x80000000u, 5, &n, &off);
    cr_assert(off * 1000000 <= n, "%lld of %lld one unit off", (long long)off, (long long)n);
    if (!tg__cpu_has_half_simd()) th_not_run("this CPU has no AVX2: tanh's AVX2 loop was not run");
}

/* f32 sigmoid and silu (f64 arithmetic with unary_simd.c's exp,
 * vectorized) against sigmoid and x sigmoid(x) in long double rounded to
 * f32, in AVX2 registers and without: the same bits both ways, NaN for NaN,
 * never more than one unit in the last place off, and one off at most once
 * in a million (a double rounding near a halfway point).  Every 193rd f32
 * bit pattern, then every 13th f32 of [-128, -2^-8] and [2^-8, 128] (where
 * sigmoid is neither 0, 1/2 nor 1 in f32, past exp's cut at -120). */
static void sigmoid_sweep(uint64_t from, uint64_t to, uint64_t step, int64_t *n, int64_t *off)
{
    enum { CHUNK = 1 << 16 };
    static float x[CHUNK], got[CHUNK], alt[CHUNK];
    for (uint64_t bits = from; bits < to;) {
        int m = 0;
        for (; m < CHUNK && bits < to; m++, bits += step) {
            const uint32_t b = (uint32_t)bits;
            memcpy(&x[m], &b, sizeof b);
        }
        for (int silu = 0; silu < 2; silu++) {
            tg__sigmoid_f32_n(got, x, m, silu, true);
            tg__sigmoid_f32_n(alt, x, m, silu, false);
            cr_assert(memcmp(got, alt, (size_t)m * sizeof *got) == 0,
                      "AVX2 and plain loops differ");
            for (int i = 0; i < m; i++) {
                const long double v = x[i], e = expl(-fabsl(v));
                const long double sg = v >= 0 ? 1 / (1 + e) : e / (1 + e);
                const float want = (float)(silu ? v * sg : sg);
                if (isnan(want)) {
                    cr_assert(isnan(got[i]), "%s(%a) = %a, want NaN", silu ? "silu" : "sigmoid",
                              (double)x[i], (double)got[i]);
                    continue;
                }
                if (memcmp(&got[i], &want, sizeof want) == 0) continue;
                int32_t gi, wi;
                memcpy(&gi, &got[i], 4), memcpy(&wi, &want, 4);
                cr_assert(gi - wi == 1 || gi - wi == -1, "%s(%a) = %a, want %a",
                          silu ? "silu" : "sigmoid", (double)x[i], (double)got[i],
                          (double)want);
                ++*off;
            }
            *n += m;
        }
    }
}

Test(activation, f32_sigmoid_and_silu_are_correctly_rounded)
{
    int64_t n = 0, off = 0;
    sigmoid_sweep(0, UINT64_C(1) << 32, 193, &n, &off);
    const uint64_t lo = 0x3b800000, hi = 0x43000000;   /* 2^-8, 128 */
    sigmoid_sweep(lo, hi, 13, &n, &off);
    sigmoid_sweep(lo | 0x80000000u, hi | 0x80000000u, 13, &n, &off);
    cr_assert(n > 80000000);
    cr_assert(off * 1000000 <= n, "%lld of %lld one unit off", (long long)off, (long long)n);
    if (!tg__cpu_has_half_simd())
        th_not_run("this CPU has no AVX2: sigmoid's AVX2 loop was not run");
}

/* leaky_relu's fused half kernels take the product in f32 where that gives
 * every half the f32 kernel's bits, else in double (tg__half_leaky_f32_ok):
 * over every half value, slopes where the f32 product serves (bf16 and f16
 * at 0.2) and one where it does not (f16 at 0.3, where 39 halves would
 * differ), AVX-512 and AVX2 loops, against the general path. */
Test(activation, half_leaky_f32_product_same_bits_as_general_path)
{
    if (!tg__cpu_has_half_simd())
        th_not_run("the fused half activations are not run: this CPU lacks AVX2/F16C");
    cr_assert(tg__half_leaky_f32_ok(TG_BF16, 0.2));
    cr_assert(tg__half_leaky_f32_ok(TG_F16, 0.2));
    cr_assert(tg__half_leaky_f32_ok(TG_BF16, 0.3));   /* the same slope, the other dtype next */
    cr_assert(not(tg__half_leaky_f32_ok(TG_F16, 0.3)));
    const tg_dtype dts[2] = {TG_F16, TG_BF16};
    const double slopes[7] = {0.2, 0.3, 0.001, 1.0 / 3, 5.5, 0.1234567, -0.2};
    for (int d = 0; d < 2; d++) {
        tg_tensor *x = all_halves(dts[d], 1), *r = all_halves(dts[d], 40503);
        tg_tensor *c = all_halves(dts[d], 2654435761u);
        for (int k = 0; k < 7; k++)
            for (int wide = 0; wide < 2; wide++) {
                tg_tensor *y[2], *g[2];
                tg__act_set_half_avx512(wide);
                for (int f = 0; f < 2; f++) act_run(f == 1, false, slopes[k], x, r, c, &y[f], &g[f]);
                tg__act_set_half_avx512(true);
                expect_same_halves(y[1], y[0], wide ? "y (fused)" : "y (fused, avx2)", dts[d],
                                   slopes[k], 0, x);
                expect_same_halves(g[1], g[0], wide ? "grad (fused)" : "grad (fused, avx2)",
                                   dts[d], slopes[k], 0, x);
                tg_tensor_release(y[0]), tg_tensor_release(y[1]);
                tg_tensor_release(g[0]), tg_tensor_release(g[1]);
            }
        tg_tensor_release(x), tg_tensor_release(r), tg_tensor_release(c);
    }
}
