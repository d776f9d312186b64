/* tests/test_quant.c - int8 quantization and the quantized ops.
 *
 * Oracles: quantization against rint() loops written here; the quantized ops
 * against the float op run on the dequantized inputs (dequantized here by
 * explicit index loops, so the per-output-channel axis is checked
 * independently), rounded to the output grid: within 1 unit; every int8
 * kernel against the portable one, byte for byte; PyTorch's quantized
 * modules (golden files).  The requantizer, the GEMM kernels and the SIMD
 * requantization are in test_quant_kernels.c, fake quantization and the
 * observers in test_fake_quant.c. */
#include <dirent.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "helpers.h"
#include "quant/quant_internal.h"
#include "../tools/case.h"
#include "tapegrad/autograd.h"
#include "tapegrad/conv.h"
#include "tapegrad/ops.h"
#include "tapegrad/quant.h"
#include "tapegrad/registry.h"
#include "tapegrad/status.h"

#ifndef TG_SOURCE_ROOT
#define TG_SOURCE_ROOT "."
#endif

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;   /* each test starts from it (fork) */
static double rnd(void) { return th_uniform_pm1(&rng_state); }
static tg_tensor *mk(tg_dtype dt, int nd, const int64_t *shape, double lo, double hi)
{
    return th_rand_tensor(&rng_state, dt, nd, shape, lo, hi);
}

/* ---- quantize / dequantize ---- */

Test(quant, quantize_rounds_half_to_even_and_saturates)
{
    const double s = 0.5;
    const float xs[] = {0.25f, 0.75f, 1.25f, -0.25f, -0.75f, 100.0f, -100.0f, 0.0f};
    int64_t n = 8;
    tg_tensor *x = NULL, *qu = NULL, *qi = NULL;
    cr_assert(eq(int, tg_tensor_from_data(&x, TG_F32, 1, &n, xs), TG_OK));
    cr_assert(eq(int, tg_quantize(&qu, x, TG_U8, s, 10), TG_OK));
    cr_assert(eq(int, tg_quantize(&qi, x, TG_I8, s, -3), TG_OK));
    /* x/s = 0.5, 1.5, 2.5, -0.5, -1.5, 200, -200, 0 -> rint 0, 2, 2, -0, -2 */
    const int want_u[] = {10, 12, 12, 10, 8, 210, 0, 10};
    const int want_i[] = {-3, -1, -1, -3, -5, 127, -128, -3};
    cr_assert(eq(int, tg_tensor_dtype(qu), TG_U8));
    cr_assert(eq(int, tg_tensor_dtype(qi), TG_I8));
    for (int i = 0; i < 8; i++) {
        cr_assert(eq(dbl, th_at(qu, i), want_u[i]), "u8 element %d", i);
        cr_assert(eq(dbl, th_at(qi, i), want_i[i]), "i8 element %d", i);
    }
    tg_tensor_release(x);
    tg_tensor_release(qu);
    tg_tensor_release(qi);
}

/* tg_quantize of a contiguous f32 tensor (on the SIMD of each int8 kernel
 * this CPU has: eight lanes at a time with AVX-512, four with AVX2, none on
 * portable; split over the threads past 65536 elements) is
 * clamp(rint(x / s) + zp) in f64, NaN giving zp: ties of every parity, NaN,
 * +-inf, huge and tiny values, -0.0, every tail length. */
static void quantize_formula_case(void);
Test(quant, quantize_of_contiguous_f32_is_the_f64_formula_everywhere)
{
    const tg_int8_kernel kerns[] = {TG_INT8_KERNEL_PORTABLE, TG_INT8_KERNEL_AVX2,
                                    TG_INT8_KERNEL_VNNI};
    for (int k = 0; k < 3; k++) {
        if (tg_int8_kernel_set(kerns[k]) < 0) {
            th_not_run("this CPU has no %s kernel: its quantization was not run",
                        tg_int8_kernel_name(kerns[k]));
            continue;
        }
        quantize_formula_case();
    }
    tg_int8_kernel_set(TG_INT8_KERNEL_AUTO);
}

static void quantize_formula_case(void)
{
    const double scales[] = {0.5, 0.1, 1e-3, 3.7};
    const int32_t zps[2][3] = {{0, 128, 255}, {-128, 0, 127}};
    for (int big = 0; big < 2; big++) {
        const int64_t n = big ? 70001 : 1003;
        float *xs = malloc((size_t)n * sizeof *xs);
        for (int si = 0; si < 4; si++) {
            const double s = scales[si];
            for (int64_t i = 0; i < n; i++) {
                const int kind = (int)(i % 9);
                xs[i] = kind == 0   ? (float)(((double)(i % 601) - 300.5) * s)   /* ties */
                        : kind == 1 ? NAN
                        : kind == 2 ? (i % 2 ? INFINITY : -INFINITY)
                        : kind == 3 ? (i % 2 ? 3e38f : -3e38f)
                        : kind == 4 ? (i % 2 ? 1e-40f : -0.0f)
                                    : (float)(rnd() * 300.0 * s);
            }
            tg_tensor *x = NULL;
            cr_assert(eq(int, tg_tensor_from_data(&x, TG_F32, 1, &n, xs), TG_OK));
            for (int d = 0; d < 2; d++)
                for (int z = 0; z < 3; z++) {
                    const tg_dtype dt = d ? TG_I8 : TG_U8;
                    const int32_t zp = zps[d][z], lo = d ? -128 : 0, hi = d ? 127 : 255;
                    tg_tensor *q = NULL, *back = NULL;
                    cr_assert(eq(int, tg_quantize(&q, x, dt, s, zp), TG_OK));
                    cr_assert(eq(int, tg_dequantize(&back, q, s, zp), TG_OK));
                    const float *bf = tg_tensor_cdata(back);
                    for (int64_t i = 0; i < n; i++) {
                        const double r = rint((double)xs[i] / s) + zp;
                        const double want = isnan(r) ? zp : r < lo ? lo : r > hi ? hi : r;
                        if (th_at(q, i) != want)
                            cr_assert(th_at(q, i) == want,
                                      "%s kernel, n %lld, scale %g, %s zp %d: element %lld (%g) "
                                      "-> %g, want %g", tg_int8_kernel_name(tg_int8_kernel_get()),
                                      (long long)n, s, tg_dtype_name(dt), (int)zp, (long long)i,
                                      (double)xs[i], th_at(q, i), want);
                        /* and back: (float)(s * (q - zp)) */
                        const float wantf = (float)(s * (want - zp));
                        if (memcmp(&bf[i], &wantf, sizeof wantf) != 0)
                            cr_assert(false, "%s kernel: dequantize of element %lld: %g, want %g",
                                      tg_int8_kernel_name(tg_int8_kernel_get()), (long long)i,
                                      (double)bf[i], (double)wantf);
                    }
                    tg_tensor_release(q), tg_tensor_release(back);
                }
            tg_tensor_release(x);
        }
        free(xs);
    }
}

Test(quant, round_trip_within_half_a_step)
{
    int64_t shape[] = {3, 50};
    tg_tensor *x = mk(TG_F32, 2, shape, -1.0, 1.0), *q = NULL, *d = NULL;
    const double s = 2.0 / 255;
    cr_assert(eq(int, tg_quantize(&q, x, TG_U8, s, 128), TG_OK));
    cr_assert(eq(int, tg_dequantize(&d, q, s, 128), TG_OK));
    cr_assert(eq(int, tg_tensor_dtype(d), TG_F32));
    for (int64_t i = 0; i < 150; i++) {
        double e = fabs(th_at(d, i) - th_at(x, i));
        cr_assert(e <= s / 2 * (1 + 1e-6), "element %lld off by %g", (long long)i, e);
        cr_assert(eq(dbl, th_at(q, i), fmin(255, rint(th_at(x, i) / s) + 128)));
    }
    tg_tensor_release(x);
    tg_tensor_release(q);
    tg_tensor_release(d);
}

Test(quant, per_channel_uses_the_axis_index)
{
    int64_t shape[] = {2, 3, 4};
    const double scales[] = {0.01, 0.02, 0.05};
    tg_tensor *x = mk(TG_F32, 3, shape, -3.0, 3.0), *q = NULL, *d = NULL;
    cr_assert(eq(int, tg_quantize_per_channel(&q, x, 1, 3, scales), TG_OK));
    cr_assert(eq(int, tg_dequantize_per_channel(&d, q, -2, 3, scales), TG_OK));
    for (int64_t i = 0; i < 24; i++) {
        const int64_t c = (i / 4) % 3;
        const double want = fmax(-128, fmin(127, rint(th_at(x, i) / scales[c])));
        cr_assert(eq(dbl, th_at(q, i), want), "element %lld", (long long)i);
        cr_assert(epsilon_eq(dbl, th_at(d, i), want * scales[c], 1e-6));
    }
    tg_tensor_release(x);
    tg_tensor_release(q);
    tg_tensor_release(d);
}

/* ConvTranspose weight (C_in=4, cog=3, K=2), groups 2: element (ci, j, k)
 * belongs to output channel (ci / 2) * 3 + j. */
Test(quant, conv_transpose_weight_scale_is_per_output_channel_per_group)
{
    int64_t shape[] = {4, 3, 2};
    double scales[6];
    for (int c = 0; c < 6; c++) scales[c] = 0.003 * (c + 1);
    tg_tensor *w = mk(TG_F32, 3, shape, -0.5, 0.5), *q = NULL, *d = NULL;
    cr_assert(eq(int, tg_quantize_conv_weight(&q, w, true, 2, 6, scales), TG_OK));
    cr_assert(eq(int, tg_dequantize_conv_weight(&d, q, true, 2, 6, scales), TG_OK));
    for (int64_t ci = 0; ci < 4; ci++)
        for (int64_t j = 0; j < 3; j++)
            for (int64_t k = 0; k < 2; k++) {
                int64_t i = (ci * 3 + j) * 2 + k;
                double s = scales[(ci / 2) * 3 + j];
                double want = fmax(-128, fmin(127, rint(th_at(w, i) / s)));
                cr_assert(eq(dbl, th_at(q, i), want), "(%lld,%lld,%lld)", (long long)ci,
                          (long long)j, (long long)k);
                cr_assert(epsilon_eq(dbl, th_at(d, i), want * s, 1e-6));
            }
    tg_tensor_release(w);
    tg_tensor_release(q);
    tg_tensor_release(d);
}

/* Bytes equal to tg_quantize of a fresh copy of x's values (so never the
 * shortcut of a dequantized tensor). */
static void expect_fresh_quantize(tg_tensor *q, tg_tensor *x, tg_dtype dt, double s, int32_t zp,
                                  const char *what)
{
    tg_tensor *fresh = NULL, *qf = NULL;
    cr_assert(eq(int, tg_tensor_clone(&fresh, x), TG_OK));
    cr_assert(eq(int, tg_quantize(&qf, fresh, dt, s, zp), TG_OK));
    cr_assert(memcmp(tg_tensor_cdata(q), tg_tensor_cdata(qf), (size_t)tg_tensor_numel(q)) == 0,
              "%s", what);
    tg_tensor_release(fresh), tg_tensor_release(qf);
}

/* tg_quantize of what tg_dequantize made, with the same parameters, copies
 * the bytes it came from (every byte value, both dtypes, a view of it), and
 * they are the bytes quantizing the values afresh gives; other parameters,
 * or a write to either tensor since, quantize afresh; the copy is not
 * shared with the source. */
Test(quant, quantize_after_dequantize_gives_the_source_bytes)
{
    const double scales[] = {0.02, 0.37, 1.0 / 3, 3e-8, 4000.0};
    for (int d = 0; d < 2; d++)
        for (size_t si = 0; si < sizeof scales / sizeof *scales; si++) {
            const tg_dtype dt = d ? TG_I8 : TG_U8;
            const int32_t zp = d ? -5 : 131;
            const double sc = scales[si];
            const int64_t shape[2] = {16, 32};
            uint8_t bytes[512];
            for (int i = 0; i < 512; i++) bytes[i] = (uint8_t)(i * 7 + si);
            tg_tensor *q = NULL, *x = NULL, *back = NULL, *view = NULL, *other = NULL;
            cr_assert(eq(int, tg_tensor_from_data(&q, dt, 2, shape, bytes), TG_OK));
            cr_assert(eq(int, tg_dequantize(&x, q, sc, zp), TG_OK));
            cr_assert(eq(int, tg_quantize(&back, x, dt, sc, zp), TG_OK));
            cr_assert(memcmp(tg_tensor_cdata(back), bytes, 512) == 0, "%s, scale %g",
                      tg_dtype_name(dt), sc);
            expect_fresh_quantize(back, x, dt, sc, zp, "the source's bytes are the fresh ones");
            /* a view (the reshape an Unflatten makes) */
            const int64_t flat = 512;
            cr_assert(eq(int, tg_reshape(&view, x, 1, &flat), TG_OK));
            tg_tensor_release(back);
            cr_assert(eq(int, tg_quantize(&back, view, dt, sc, zp), TG_OK));
            cr_assert(memcmp(tg_tensor_cdata(back), bytes, 512) == 0);
            /* not shared: writing the copy leaves q as it was */
            cr_assert(eq(int, tg_tensor_set_flat(back, 3, 9), TG_OK));
            cr_assert(eq(int, th_at(q, 3), (double)(d ? (int8_t)bytes[3] : bytes[3])));
            tg_tensor_release(back);
            /* other parameters: quantized afresh */
            cr_assert(eq(int, tg_quantize(&other, x, dt, sc * 2, zp), TG_OK));
            expect_fresh_quantize(other, x, dt, sc * 2, zp, "another scale");
            tg_tensor_release(other);
            cr_assert(eq(int, tg_quantize(&other, x, dt, sc, zp + 1), TG_OK));
            expect_fresh_quantize(other, x, dt, sc, zp + 1, "another zero point");
            tg_tensor_release(other);
            /* a write to the source: x's values are still the old bytes' */
            cr_assert(eq(int, tg_tensor_set_flat(q, 0, d ? 100 : 3), TG_OK));
            cr_assert(eq(int, tg_quantize(&other, x, dt, sc, zp), TG_OK));
            cr_assert(eq(int, th_at(other, 0), (double)(d ? (int8_t)bytes[0] : bytes[0])));
            expect_fresh_quantize(other, x, dt, sc, zp, "after a write to the source");
            tg_tensor_release(other);
            tg_tensor_release(x), tg_tensor_release(view);
            /* a write to the dequantized tensor, in place and through its data */
            cr_assert(eq(int, tg_dequantize(&x, q, sc, zp), TG_OK));
            cr_assert(eq(int, tg_tensor_set_flat(x, 5, 0.0), TG_OK));
            cr_assert(eq(int, tg_quantize(&other, x, dt, sc, zp), TG_OK));
            expect_fresh_quantize(other, x, dt, sc, zp, "after tg_tensor_set_flat");
            cr_assert(eq(int, th_at(other, 5), (double)zp));
            tg_tensor_release(other), tg_tensor_release(x);
            cr_assert(eq(int, tg_dequantize(&x, q, sc, zp), TG_OK));
            ((float *)tg_tensor_data(x))[7] = 0.0f;
            cr_assert(eq(int, tg_quantize(&other, x, dt, sc, zp), TG_OK));
            cr_assert(eq(int, th_at(other, 7), (double)zp));
            tg_tensor_release(other), tg_tensor_release(x), tg_tensor_release(q);
        }
}

Test(quant, quantize_errors_change_nothing)
{
    int64_t n = 4;
    tg_tensor *x = mk(TG_F32, 1, &n, -1, 1), *out = NULL, *xi = NULL;
    double scales[] = {0.1, 0.1, 0.1};
    cr_assert(eq(int, tg_quantize(&out, x, TG_U8, 0.0, 0), TG_EINVAL));
    cr_assert(eq(int, tg_quantize(&out, x, TG_U8, NAN, 0), TG_EINVAL));
    cr_assert(eq(int, tg_quantize(&out, x, TG_U8, 0.1, 256), TG_EINVAL));
    cr_assert(eq(int, tg_quantize(&out, x, TG_I8, 0.1, -129), TG_EINVAL));
    cr_assert(eq(int, tg_quantize(&out, x, TG_I32, 0.1, 0), TG_EDTYPE));
    cr_assert(eq(int, tg_quantize(&out, NULL, TG_U8, 0.1, 0), TG_EINVAL));
    cr_assert(eq(int, tg_quantize_per_channel(&out, x, 0, 3, scales), TG_ESHAPE));
    cr_assert(eq(int, tg_quantize_per_channel(&out, x, 1, 4, scales), TG_EINVAL));
    cr_assert(eq(int, tg_quantize(&xi, x, TG_U8, 0.1, 0), TG_OK));
    cr_assert(eq(int, tg_quantize(&out, xi, TG_U8, 0.1, 0), TG_EDTYPE));
    cr_assert(eq(int, tg_dequantize(&out, x, 0.1, 0), TG_EDTYPE));
    cr_assert(eq(int, tg_dequantize_per_channel(&out, xi, 0, 4, scales), TG_EDTYPE));
    cr_assert(strstr(tg_error_message(), "i8") != NULL);
    cr_assert(out == NULL);
    tg_tensor_release(x);
    tg_tensor_release(xi);
}

/* ---- quantized ops against the float op on dequantized inputs ---- */

typedef struct qcase {
    bool transpose;
    int nsp;
    int64_t batch, c_in, c_out, groups;
    int64_t s[3], k[3];
    int64_t stride, pad, dil, outpad;
    tg_dtype dt;
    bool per_channel, relu, bias;
} qcase;

typedef struct qdata {
    tg_tensor *xq, *wq, *bias, *xd, *wd;
    double wscales[64];
    tg_qscales q;
    tg_conv_params p;
} qdata;

/* Builds random quantized inputs and their dequantized float copies. */
static void qdata_make(qdata *d, const qcase *c)
{
    memset(d, 0, sizeof *d);
    const int nd = c->nsp + 2;
    int64_t xs[5] = {c->batch, c->c_in}, ws[5];
    ws[0] = c->transpose ? c->c_in : c->c_out;
    ws[1] = c->transpose ? c->c_out / c->groups : c->c_in / c->groups;
    for (int a = 0; a < c->nsp; a++) xs[2 + a] = c->s[a], ws[2 + a] = c->k[a];
    const bool u8 = c->dt == TG_U8;
    d->q.x_scale = 0.0125;
    d->q.x_zero_point = u8 ? 120 : -7;
    d->q.n_weight_scales = c->per_channel ? c->c_out : 1;
    for (int64_t i = 0; i < d->q.n_weight_scales; i++) d->wscales[i] = 0.004 * (1 + i % 5);
    d->q.weight_scales = d->wscales;
    d->q.y_scale = 0.02 + 0.01 * c->nsp;
    d->q.y_zero_point = u8 ? 100 : 3;
    tg_tensor *xf = mk(TG_F32, nd, xs, -1.6, 1.6), *wf = mk(TG_F32, nd, ws, -0.6, 0.6);
    cr_assert(eq(int, tg_quantize(&d->xq, xf, c->dt, d->q.x_scale, d->q.x_zero_point), TG_OK));
    cr_assert(eq(int, tg_quantize_conv_weight(&d->wq, wf, c->transpose, c->groups,
                                              d->q.n_weight_scales, d->wscales), TG_OK));
    /* dequantize here, by index, so the channel rule is checked independently */
    tg_tensor_clone(&d->xd, xf);
    for (int64_t i = 0; i < tg_tensor_numel(xf); i++)
        tg_tensor_set_flat(d->xd, i, d->q.x_scale * (th_at(d->xq, i) - d->q.x_zero_point));
    tg_tensor_clone(&d->wd, wf);
    const int64_t inner = tg_tensor_numel(wf) / (ws[0] * ws[1]);
    for (int64_t i = 0; i < tg_tensor_numel(wf); i++) {
        int64_t i0 = i / (ws[1] * inner), i1 = (i / inner) % ws[1];
        int64_t ch = !c->per_channel ? 0 : !c->transpose ? i0 : (i0 / (c->c_in / c->groups)) * ws[1] + i1;
        tg_tensor_set_flat(d->wd, i, d->wscales[ch] * th_at(d->wq, i));
    }
    if (c->bias) d->bias = mk(TG_F32, 1, &c->c_out, -0.5, 0.5);
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    for (int a = 0; a < 3; a++) {
        p.stride[a] = c->stride;
        p.dilation[a] = c->dil;
        p.padding[a][0] = p.padding[a][1] = c->pad;
        p.output_padding[a] = c->transpose ? c->outpad : 0;
    }
    p.groups = c->groups;
    p.act = c->relu ? TG_ACT_RELU : TG_ACT_NONE;
    d->p = p;
    tg_tensor_release(xf);
    tg_tensor_release(wf);
}

static void qdata_free(qdata *d)
{
    tg_tensor_release(d->xq), tg_tensor_release(d->wq), tg_tensor_release(d->bias);
    tg_tensor_release(d->xd), tg_tensor_release(d->wd);
}

/* ours must be within 1 of rint(y_float / y_scale) + zp (relu, saturation);
 * returns how many elements differ at all. */
static int64_t compare_to_float(const tg_tensor *ours, const tg_tensor *yf, const qdata *d,
                                tg_dtype dt, bool relu)
{
    cr_assert(eq(int, tg_tensor_dtype(ours), dt));
    cr_assert(tg_tensor_same_shape(ours, yf));
    const double lo = dt == TG_U8 ? 0 : -128, hi = dt == TG_U8 ? 255 : 127;
    int64_t diff = 0;
    for (int64_t i = 0; i < tg_tensor_numel(yf); i++) {
        double r = rint(th_at(yf, i) / d->q.y_scale) + d->q.y_zero_point;
        if (relu) r = fmax(r, d->q.y_zero_point);
        r = fmax(lo, fmin(hi, r));
        double e = fabs(th_at(ours, i) - r);
        cr_assert(e <= 1, "element %lld: got %g, float reference %g", (long long)i,
                  th_at(ours, i), r);
        diff += e != 0;
    }
    return diff;
}

static void run_qcase(const qcase *c)
{
    qdata d;
    qdata_make(&d, c);
    tg_tensor *y = NULL, *yf = NULL;
    tg_conv_params pf = d.p;
    pf.act = TG_ACT_NONE;
    if (c->transpose) {
        cr_assert(eq(int, tg_quantized_conv_transpose(&y, d.xq, d.wq, d.bias, &d.p, &d.q), TG_OK),
                  "%s", tg_error_message());
        cr_assert(eq(int, tg_conv_transpose(&yf, d.xd, d.wd, d.bias, &pf), TG_OK));
    } else {
        cr_assert(eq(int, tg_quantized_conv(&y, d.xq, d.wq, d.bias, &d.p, &d.q), TG_OK),
                  "%s", tg_error_message());
        cr_assert(eq(int, tg_conv(&yf, d.xd, d.wd, d.bias, &pf), TG_OK));
    }
    int64_t diff = compare_to_float(y, yf, &d, c->dt, c->relu);
    cr_assert(diff * 20 <= tg_tensor_numel(y), "%lld of %lld elements off by one",
              (long long)diff, (long long)tg_tensor_numel(y));
    tg_tensor_release(y), tg_tensor_release(yf);
    qdata_free(&d);
}

static const qcase sweep[] = {
    /* transpose nsp B  Cin Cout G  S          K          st pad dil op dt   pc  relu bias */
    {true, 1, 2, 3, 4, 1, {9}, {3}, 2, 1, 1, 1, TG_U8, true, false, true},
    {true, 1, 1, 4, 6, 2, {7}, {2}, 3, 0, 2, 1, TG_I8, true, true, true},
    {true, 2, 2, 4, 6, 2, {5, 4}, {3, 2}, 2, 1, 1, 1, TG_U8, true, false, true},
    {true, 2, 1, 6, 9, 3, {4, 5}, {2, 3}, 1, 0, 2, 1, TG_I8, true, false, false},
    {true, 2, 1, 8, 4, 1, {4, 4}, {4, 4}, 2, 1, 1, 0, TG_U8, false, true, true},
    {true, 2, 9, 5, 7, 1, {1, 1}, {4, 4}, 1, 0, 1, 0, TG_I8, true, true, true},   /* 1x1 -> 4x4 */
    {true, 3, 1, 4, 4, 2, {3, 3, 2}, {2, 2, 2}, 2, 1, 1, 1, TG_U8, true, false, true},
    {true, 3, 2, 2, 3, 1, {2, 3, 2}, {3, 1, 2}, 1, 0, 1, 0, TG_I8, false, false, true},
    {false, 1, 2, 3, 4, 1, {11}, {3}, 2, 1, 1, 0, TG_U8, true, false, true},
    {false, 1, 1, 4, 6, 2, {12}, {3}, 1, 2, 2, 0, TG_I8, true, true, true},
    {false, 2, 2, 4, 6, 2, {7, 6}, {3, 2}, 2, 1, 1, 0, TG_U8, true, false, true},
    {false, 2, 1, 6, 9, 3, {8, 7}, {3, 3}, 1, 1, 2, 0, TG_I8, true, false, false},
    {false, 3, 1, 4, 4, 2, {5, 4, 4}, {2, 2, 2}, 2, 1, 1, 0, TG_U8, true, true, true},
};

Test(quant, quantized_conv_ops_match_float_within_one_unit)
{
    for (size_t i = 0; i < sizeof sweep / sizeof *sweep; i++) run_qcase(&sweep[i]);
}

/* The op of case c (conv, conv_transpose, or, with c->nsp == 0, Linear on
 * x (batch, c_in)) on the given kernel; NULL when this CPU lacks it. */
static tg_tensor *run_on_kernel(const qcase *c, qdata *d, tg_int8_kernel k)
{
    if (tg_int8_kernel_set(k) < 0) return NULL;
    tg_tensor *y = NULL;
    int rc = c->nsp == 0 ? tg_quantized_linear(&y, d->xq, d->wq, d->bias, &d->q, c->relu)
             : c->transpose ? tg_quantized_conv_transpose(&y, d->xq, d->wq, d->bias, &d->p, &d->q)
                            : tg_quantized_conv(&y, d->xq, d->wq, d->bias, &d->p, &d->q);
    cr_assert(eq(int, rc, TG_OK), "%s", tg_error_message());
    cr_assert(eq(int, tg_int8_kernel_set(TG_INT8_KERNEL_AUTO), TG_OK));
    return y;
}

/* Every kernel this CPU has (AVX2, AVX-512 VNNI, AMX) gives the portable kernel's bytes: on the
 * sweep (conv and conv_transpose, 1-3 spatial axes, padding read through a
 * nonzero zero point, groups with per-channel scales, dilation, relu), on a
 * 70-channel ConvTranspose (kd past one 64-byte vector, a partial column
 * block), on layers whose AMX tiles are stored whole, and on Linear with
 * sizes off every block (VNNI works on 8 x 32 tiles and groups of 4 k, AMX
 * on 32 x 32 tiles and 64 k). */
static int kernels_give_portable_bytes(const tg_int8_kernel *kerns, int nk, int *ncases);

Test(quant, every_kernel_gives_the_portable_bytes)
{
    const tg_int8_kernel kerns[] = {TG_INT8_KERNEL_AVX2, TG_INT8_KERNEL_VNNI, TG_INT8_KERNEL_AMX};
    int n;
    const int compared = kernels_give_portable_bytes(kerns, 3, &n);
    if (tg_int8_kernel_available(TG_INT8_KERNEL_AVX2)) cr_assert(compared >= 2 * n);
    if (!tg_int8_kernel_available(TG_INT8_KERNEL_AMX))
        th_not_run("this CPU has no AMX-INT8: amx not run on tiles here (%s)",
                   tg_int8_kernel_available(TG_INT8_KERNEL_VNNI)
                       ? "on emulated ones by amx_kernel_on_emulated_tiles_gives_the_portable_bytes"
                       : "nor on emulated ones, whose packing needs AVX-512 VNNI");
}

/* The amx kernel's addressing and tile use (its GEMM and its column-free
 * ConvTranspose), on emulated tiles where the CPU has none; its
 * requantization and packing are AVX-512's, so the CPU needs VNNI. */
Test(quant, amx_kernel_on_emulated_tiles_gives_the_portable_bytes)
{
    if (!tg_int8_kernel_available(TG_INT8_KERNEL_VNNI))
        cr_skip_test("this CPU has no AVX-512 VNNI, which the amx kernel's packing and "
                     "requantization need: amx not run, not even on emulated tiles");
    tg__amx_set_emulated(true);
    const tg_int8_kernel amx = TG_INT8_KERNEL_AMX;
    cr_assert(tg_int8_kernel_available(amx));
    int n;
    const int compared = kernels_give_portable_bytes(&amx, 1, &n);
    tg__amx_set_emulated(false);
    cr_assert(eq(int, compared, 2 * n));
}

/* The cases below (*ncases of them) on each kernel of kerns this CPU has,
 * in two passes: the number of outputs compared. */
static int kernels_give_portable_bytes(const tg_int8_kernel *kerns, int nk, int *ncases)
{
    qcase cases[sizeof sweep / sizeof *sweep + 12];
    size_t n = 0;
    for (size_t i = 0; i < sizeof sweep / sizeof *sweep; i++) cases[n++] = sweep[i];
    for (int ci = 0; ci < 2; ci++)
        cases[n++] = (qcase){true, 2, 2, 70, 6, 2, {5, 5}, {3, 3}, 2, 1, 1, 1,
                             ci ? TG_I8 : TG_U8, true, false, true};
    /* full 32 x 32 tiles stored straight into both layouts of the GEMM's
     * result: 4x4 taps (column groups of 16), and rows of 40 channels */
    cases[n++] = (qcase){true, 2, 2, 70, 4, 1, {6, 6}, {4, 4}, 2, 1, 1, 0, TG_U8, true, false, true};
    cases[n++] = (qcase){false, 2, 2, 6, 40, 1, {9, 9}, {3, 3}, 1, 1, 1, 0, TG_I8, true, false, true};
    /* 16x16 and 300 input positions: AMX takes its column-free path by default
     * (40 output channels: a pair of 16-channel blocks and a single one) */
    cases[n++] = (qcase){true, 2, 2, 70, 40, 1, {16, 16}, {4, 4}, 2, 1, 1, 1, TG_I8, true, true, true};
    cases[n++] = (qcase){true, 1, 1, 6, 9, 3, {300}, {5}, 3, 2, 1, 2, TG_U8, true, false, true};
    /* 300 x 1 -> 599 x 1: stride 2 onto a last axis of one output (its
     * column-free interleave once wrote nothing there; found by the case
     * fuzz target) */
    cases[n++] = (qcase){true, 2, 1, 6, 5, 1, {300, 1}, {3, 3}, 2, 1, 1, 0, TG_U8, true, false, true};
    /* one output channel (the DCGAN's last layer): the AVX2 column-free
     * kernel's one-channel blocks of 96 positions, and the rest */
    for (int ci = 0; ci < 2; ci++)
        cases[n++] = (qcase){true, 2, 2, 12, 1, 1, {14, 14 + ci}, {4, 4}, 2, 1, 1, ci,
                             ci ? TG_I8 : TG_U8, true, ci == 1, true};
    /* stride 2 and 4 taps on an odd last axis, 20 output channels (more
     * than AVX2's column-free limit): col2im's pairs of positions and the
     * last position alone */
    cases[n++] = (qcase){true, 2, 2, 9, 20, 1, {4, 7}, {4, 4}, 2, 1, 1, 1, TG_I8, true, false, true};
    for (int ci = 0; ci < 2; ci++)   /* Linear: x (13, 70), weight (37, 70) */
        cases[n++] = (qcase){false, 0, 13, 70, 37, 1, {0}, {0}, 1, 0, 1, 0,
                             ci ? TG_I8 : TG_U8, ci == 0, ci == 1, true};
    *ncases = (int)n;
    int compared = 0;
    /* first pass: the column-free ConvTranspose from the smallest input on
     * (qconvt_phase.c: AVX2, VNNI, AMX), second pass: where it runs by default */
    const int64_t phase_default = tg__q_phase_min_positions;
    for (size_t i = 0; i < 2 * n; i++) {
        tg__q_phase_min_positions = i < n ? 1 : phase_default;
        const qcase *c = &cases[i % n];
        qdata d;
        qdata_make(&d, c);
        tg_tensor *ref = run_on_kernel(c, &d, TG_INT8_KERNEL_PORTABLE);
        for (int e = 0; e < nk; e++) {
            tg_tensor *y = run_on_kernel(c, &d, kerns[e]);
            if (!y) continue;
            cr_assert(eq(i64, tg_tensor_numel(y), tg_tensor_numel(ref)));
            cr_assert(memcmp(tg_tensor_cdata(y), tg_tensor_cdata(ref),
                             (size_t)tg_tensor_numel(y)) == 0,
                      "case %zu (pass %zu), %s kernel", i % n, i / n, tg_int8_kernel_name(kerns[e]));
            compared++;
            tg_tensor_release(y);
        }
        tg_tensor_release(ref);
        qdata_free(&d);
    }
    tg__q_phase_min_positions = phase_default;
    return compared;
}

Test(quant, quantized_linear_matches_float_within_one_unit)
{
    for (int t = 0; t < 4; t++) {
        const int64_t m = 5, k = 37 + 30 * t, n = 6;
        int64_t xs[] = {m, k}, ws[] = {n, k};
        tg_dtype dt = t % 2 ? TG_I8 : TG_U8;
        qdata d = {0};
        d.q = (tg_qscales){.x_scale = 0.01, .x_zero_point = dt == TG_U8 ? 128 : 0,
                           .n_weight_scales = t < 2 ? n : 1, .weight_scales = d.wscales,
                           .y_scale = 0.05, .y_zero_point = dt == TG_U8 ? 90 : -10};
        for (int i = 0; i < n; i++) d.wscales[i] = 0.003 * (i + 1);
        tg_tensor *xf = mk(TG_F32, 2, xs, -1.2, 1.2), *wf = mk(TG_F32, 2, ws, -0.4, 0.4);
        tg_tensor *bias = mk(TG_F32, 1, &ws[0], -1, 1), *y = NULL, *yf = NULL;
        cr_assert(eq(int, tg_quantize(&d.xq, xf, dt, d.q.x_scale, d.q.x_zero_point), TG_OK));
        cr_assert(eq(int, tg_quantize_conv_weight(&d.wq, wf, false, 1, d.q.n_weight_scales, d.wscales), TG_OK));
        cr_assert(eq(int, tg_dequantize(&d.xd, d.xq, d.q.x_scale, d.q.x_zero_point), TG_OK));
        tg_tensor_clone(&d.wd, wf);
        for (int64_t i = 0; i < n * k; i++)
            tg_tensor_set_flat(d.wd, i, th_at(d.wq, i) * d.wscales[t < 2 ? i / k : 0]);
        cr_assert(eq(int, tg_quantized_linear(&y, d.xq, d.wq, bias, &d.q, t == 3), TG_OK));
        cr_assert(eq(int, tg_linear(&yf, d.xd, d.wd, bias), TG_OK));
        int64_t diff = compare_to_float(y, yf, &d, dt, t == 3);
        cr_assert(diff * 20 <= tg_tensor_numel(y), "t=%d: %lld of %lld elements off by one", t,
                  (long long)diff, (long long)tg_tensor_numel(y));
        tg_tensor_release(xf), tg_tensor_release(wf), tg_tensor_release(bias);
        tg_tensor_release(y), tg_tensor_release(yf);
        qdata_free(&d);
    }
}

/* An empty batch gives an empty result of the right shape (it used to
 * divide by zero when cutting the batch into tasks), as the float ops do. */
Test(quant, empty_batch_gives_empty_output)
{
    tg_qscales q = {.x_scale = 0.1, .n_weight_scales = 1, .y_scale = 0.05};
    const double ws = 0.02;
    q.weight_scales = &ws;
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    p.stride[0] = p.stride[1] = 2;
    for (int transpose = 0; transpose < 2; transpose++) {
        tg_tensor *xq = NULL, *wf = NULL, *wq = NULL, *y = NULL;
        cr_assert(eq(int, tg_tensor_zeros(&xq, TG_U8, 4, (int64_t[]){0, 2, 5, 5}), TG_OK));
        /* 2 -> 3 channels: conv weight (3, 2, 3, 3), transpose weight (2, 3, 3, 3) */
        const int64_t wshape[4] = {transpose ? 2 : 3, transpose ? 3 : 2, 3, 3};
        cr_assert(eq(int, tg_tensor_full(&wf, TG_F32, 4, wshape, 0.1), TG_OK));
        cr_assert(eq(int, tg_quantize_conv_weight(&wq, wf, transpose, 1, 1, &ws), TG_OK));
        int rc = transpose ? tg_quantized_conv_transpose(&y, xq, wq, NULL, &p, &q)
                           : tg_quantized_conv(&y, xq, wq, NULL, &p, &q);
        cr_assert(eq(int, rc, TG_OK), "%s", tg_error_message());
        const int64_t want[4] = {0, 3, transpose ? 11 : 2, transpose ? 11 : 2};
        cr_assert(eq(int, tg_tensor_ndim(y), 4));
        for (int d = 0; d < 4; d++) cr_assert(eq(i64, tg_tensor_dim(y, d), want[d]), "dim %d", d);
        tg_tensor_release(y), tg_tensor_release(wq), tg_tensor_release(wf), tg_tensor_release(xq);
    }
    tg_tensor *xq = NULL, *wf = NULL, *wq = NULL, *y = NULL;
    cr_assert(eq(int, tg_tensor_zeros(&xq, TG_U8, 2, (int64_t[]){0, 7}), TG_OK));
    cr_assert(eq(int, tg_tensor_full(&wf, TG_F32, 2, (int64_t[]){4, 7}, 0.1), TG_OK));
    cr_assert(eq(int, tg_quantize_conv_weight(&wq, wf, false, 1, 1, &ws), TG_OK));
    cr_assert(eq(int, tg_quantized_linear(&y, xq, wq, NULL, &q, false), TG_OK), "%s", tg_error_message());
    cr_assert(eq(i64, tg_tensor_dim(y, 0), 0));
    cr_assert(eq(i64, tg_tensor_dim(y, 1), 4));
    tg_tensor_release(y), tg_tensor_release(wq), tg_tensor_release(wf), tg_tensor_release(xq);
}

Test(quant, quantized_op_errors_change_nothing)
{
    qdata d;
    qcase c = {true, 2, 1, 4, 6, 2, {4, 4}, {3, 3}, 2, 1, 1, 1, TG_U8, true, false, true};
    qdata_make(&d, &c);
    tg_tensor *y = NULL;
    tg_conv_params p = d.p;
    p.output_padding[1] = 2;   /* must be < max(stride, dilation) = 2 */
    cr_assert(eq(int, tg_quantized_conv_transpose(&y, d.xq, d.wq, d.bias, &p, &d.q), TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "output_padding[1]=2") != NULL, "%s", tg_error_message());
    p = d.p;
    p.groups = 3;
    cr_assert(eq(int, tg_quantized_conv_transpose(&y, d.xq, d.wq, d.bias, &p, &d.q), TG_EINVAL));
    p = d.p;
    p.act = TG_ACT_TANH;
    cr_assert(eq(int, tg_quantized_conv_transpose(&y, d.xq, d.wq, d.bias, &p, &d.q), TG_EUNSUPPORTED));
    tg_qscales q = d.q;
    q.n_weight_scales = 3;
    cr_assert(eq(int, tg_quantized_conv_transpose(&y, d.xq, d.wq, d.bias, &d.p, &q), TG_ESHAPE));
    q = d.q;
    q.y_zero_point = 300;
    cr_assert(eq(int, tg_quantized_conv_transpose(&y, d.xq, d.wq, d.bias, &d.p, &q), TG_EINVAL));
    q = d.q;
    q.y_scale = 1e-15;   /* multiplier beyond 2^30 */
    cr_assert(eq(int, tg_quantized_conv_transpose(&y, d.xq, d.wq, d.bias, &d.p, &q), TG_EINVAL));
    cr_assert(eq(int, tg_quantized_conv_transpose(&y, d.xd, d.wq, d.bias, &d.p, &d.q), TG_EDTYPE));
    cr_assert(eq(int, tg_quantized_conv_transpose(&y, d.xq, d.wd, d.bias, &d.p, &d.q), TG_EDTYPE));
    cr_assert(eq(int, tg_quantized_conv_transpose(&y, d.xq, d.wq, d.xq, &d.p, &d.q), TG_EDTYPE));
    cr_assert(eq(int, tg_quantized_conv(&y, d.xq, d.wq, d.bias, &d.p, NULL), TG_EINVAL));
    cr_assert(eq(int, tg_quantized_linear(&y, d.xq, d.wq, NULL, &d.q, false), TG_ESHAPE));
    cr_assert(y == NULL);
    qdata_free(&d);
}

/* A Linear's thousands of channels are set up over the threads: the
 * message still names the lowest channel whose multiplier is out of range,
 * and nothing is made. */
Test(quant, a_bad_channel_multiplier_is_named_among_thousands)
{
    enum { N = 3000, K = 8 };
    const int64_t xs[2] = {2, K}, ws[2] = {N, K};
    tg_tensor *x = NULL, *w = NULL, *y = NULL;
    cr_assert(eq(int, tg_tensor_zeros(&x, TG_U8, 2, xs), TG_OK));
    cr_assert(eq(int, tg_tensor_zeros(&w, TG_I8, 2, ws), TG_OK));
    static double scales[N];
    for (int c = 0; c < N; c++) scales[c] = 0.01;
    scales[2900] = scales[1200] = 1e10;   /* multiplier 0.02 * 1e10 / 0.05 >= 2^30 */
    const tg_qscales q = {.x_scale = 0.02, .x_zero_point = 3, .n_weight_scales = N,
                          .weight_scales = scales, .y_scale = 0.05, .y_zero_point = 7};
    cr_assert(eq(int, tg_quantized_linear(&y, x, w, NULL, &q, false), TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "weight_scale[1200]") != NULL, "%s", tg_error_message());
    cr_assert(y == NULL);
    scales[1200] = scales[2900] = 0.01;
    cr_assert(eq(int, tg_quantized_linear(&y, x, w, NULL, &q, false), TG_OK));
    tg_tensor_release(y), tg_tensor_release(x), tg_tensor_release(w);
}

/* ---- goldens from PyTorch's quantized modules (scripts/make_quant_goldens.py) ---- */

/* Runs one case through tools/case.c (the code behind `tapegrad run-op`);
 * returns the number of elements that differ from torch (each by <= 1). */
static int64_t run_golden(const char *name, int64_t *numel)
{
    char err[1024] = "";
    tg_st_file *cf = th_golden_load("quant/%s.case.safetensors", name);
    tg_st_file *rf = th_golden_load("quant/%s.result.safetensors", name), *res = NULL;
    tg_case c;
    cr_assert(eq(int, tg_case_parse(&c, cf, err, sizeof err), TG_OK), "%s: %s", name, err);
    cr_assert(c.quantized);
    cr_assert(eq(int, tg_case_run(&res, &c, TG_CONV_ALGO_DEFAULT, err, sizeof err), TG_OK),
              "%s: %s", name, err);
    tg_tensor *got = tg_st_get(res, "y"), *want = tg_st_get(rf, "y"), *ref = tg_st_get(rf, "y_ref");
    cr_assert(got && want && ref);
    cr_assert(eq(int, tg_tensor_dtype(got), tg_tensor_dtype(want)));
    cr_assert(tg_tensor_same_shape(got, want), "%s: shape", name);
    /* Elements where torch itself is off the f64 reference by > 1 unit (an
     * onednn anomaly, listed by the generator) are checked against the
     * reference only; they must be exactly the listed ones. */
    const char *outl = tg_st_meta_get(rf, "torch_outliers");
    int64_t diff = 0, n_out = 0;
    *numel = tg_tensor_numel(want);
    for (int64_t i = 0; i < *numel; i++) {
        cr_assert(fabs(th_at(got, i) - th_at(ref, i)) <= 1,
                  "%s: element %lld: got %g, f64 reference %g", name, (long long)i, th_at(got, i),
                  th_at(ref, i));
        if (fabs(th_at(want, i) - th_at(ref, i)) > 1) {
            char idx[32], list[512];
            snprintf(idx, sizeof idx, ",%lld,", (long long)i);
            snprintf(list, sizeof list, ",%s,", outl ? outl : "");
            cr_assert(strstr(list, idx) != NULL, "%s: torch outlier %lld not listed", name, (long long)i);
            n_out++;
            continue;
        }
        double e = fabs(th_at(got, i) - th_at(want, i));
        cr_assert(e <= 1, "%s: element %lld: got %g, torch %g", name, (long long)i,
                  th_at(got, i), th_at(want, i));
        diff += e != 0;
    }
    cr_assert(n_out <= 1, "%s: %lld torch outliers", name, (long long)n_out);
    tg_st_free(res), tg_st_free(cf), tg_st_free(rf);
    return diff;
}

Test(quant, goldens_from_torch_within_one_unit)
{
    char dir[4096];
    th_golden_path(dir, sizeof dir, "quant");
    DIR *d = opendir(dir);
    cr_assert(d != NULL, "cannot open %s", dir);
    struct dirent *e;
    int cases = 0;
    int64_t diff = 0, total = 0;
    const char suffix[] = ".case.safetensors";
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name), sl = sizeof suffix - 1;
        if (len <= sl || strcmp(e->d_name + len - sl, suffix) != 0) continue;
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(len - sl), e->d_name);
        int64_t n = 0;
        diff += run_golden(name, &n);
        total += n;
        cases++;
    }
    closedir(d);
    cr_assert(cases >= 6, "only %d golden cases", cases);
    cr_assert(diff * 50 <= total, "%lld of %lld elements differ from torch by one",
              (long long)diff, (long long)total);
    cr_log_info("quant goldens: %d cases, %lld of %lld elements off by one", cases,
                (long long)diff, (long long)total);
}

/* Case files: quantization keys only on quantized ops; their values checked. */
Test(quant, case_parser_checks_quant_metadata)
{
    int64_t xs[] = {1, 2, 3}, ws[] = {2, 2, 2};
    tg_tensor *x = NULL, *w = NULL;
    tg_tensor_zeros(&x, TG_U8, 3, xs);
    tg_tensor_zeros(&w, TG_I8, 3, ws);
    struct { const char *op, *key, *value; int rc; } rows[] = {
        {"conv_transpose1d", "x_scale", "0.1", TG_EINVAL},          /* float op */
        {"quantized_conv_transpose1d", "x_scale", "-1", TG_EINVAL},
        {"quantized_conv_transpose1d", "x_scale", "0.1", TG_EINVAL}, /* y_scale missing */
        {"quantized_conv_transposeXd", "x_scale", "0.1", TG_EINVAL},
    };
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        tg_st_file *f = NULL;
        char err[512] = "";
        cr_assert(eq(int, tg_st_new(&f), TG_OK));
        tg_st_set(f, "x", x);
        tg_st_set(f, "weight", w);
        tg_st_meta_set(f, "op", rows[i].op);
        tg_st_meta_set(f, "weight_scale", "0.1");
        tg_st_meta_set(f, rows[i].key, rows[i].value);
        tg_case c;
        c.op = "untouched";
        cr_assert(eq(int, tg_case_parse(&c, f, err, sizeof err), rows[i].rc), "row %zu", i);
        cr_assert(strlen(err) > 0 && strcmp(c.op, "untouched") == 0, "row %zu: %s", i, err);
        tg_st_free(f);
    }
    /* a complete case runs and gives y in x's dtype */
    tg_st_file *f = NULL;
    char err[512] = "";
    tg_st_new(&f);
    tg_st_set(f, "x", x);
    tg_st_set(f, "weight", w);
    tg_st_meta_set(f, "op", "quantized_conv_transpose1d");
    tg_st_meta_set(f, "x_scale", "0.1");
    tg_st_meta_set(f, "y_scale", "0.2");
    tg_st_meta_set(f, "weight_scale", "0.5,0.25");
    tg_case c;
    cr_assert(eq(int, tg_case_parse(&c, f, err, sizeof err), TG_OK), "%s", err);
    cr_assert(eq(i64, c.q.n_weight_scales, 2));
    tg_st_file *res = NULL;
    cr_assert(eq(int, tg_case_run(&res, &c, TG_CONV_ALGO_DEFAULT, err, sizeof err), TG_OK), "%s", err);
    tg_tensor *y = tg_st_get(res, "y");
    cr_assert(eq(int, tg_tensor_dtype(y), TG_U8));
    cr_assert(eq(i64, tg_tensor_dim(y, 2), 4));
    tg_st_free(res), tg_st_free(f);
    tg_tensor_release(x), tg_tensor_release(w);
}

/* A min-max observer accepts an infinity, but its range then has no finite
 * scale: qparams is TG_EINVAL naming the channel (it used to return scale
 * inf, and for [-inf, 0] a zero point from (int64_t)rintf(NaN)), and writes
 * nothing.  The public quant_min/quant_max are checked as torch's observer
 * arguments are (qmin < qmax inside the dtype's range, 0 included). */
Test(quant, observer_qparams_refuse_infinite_ranges_and_bad_quant_ranges)
{
    const int64_t s4[1] = {4}, s22[2] = {2, 2};
    tg_tensor *pinf = NULL, *ninf = NULL, *ch = NULL;
    tg_tensor_from_data(&pinf, TG_F32, 1, s4, (float[]){-1, 2, 3, INFINITY});
    tg_tensor_from_data(&ninf, TG_F32, 1, s4, (float[]){-INFINITY, -1, -2, -3});
    tg_tensor_from_data(&ch, TG_F32, 2, s22, (float[]){1, -2, 3, -INFINITY});   /* channels on axis 1 */
    tg_tensor *const bad[2] = {pinf, ninf};
    for (int i = 0; i < 2; i++)
        for (int sym = 0; sym < 2; sym++) {
            tg_observer o;
            cr_assert(eq(int, tg_observer_init(&o, TG_OBSERVER_MINMAX, TG_U8, sym, 0), TG_OK));
            cr_assert(eq(int, tg_observer_update(&o, bad[i]), TG_OK));
            double s = 7;
            int32_t z = 7;
            cr_assert(eq(int, tg_observer_qparams(&o, &s, &z), TG_EINVAL), "case %d sym %d", i, sym);
            cr_assert(strstr(tg_error_message(), "is not finite") != NULL, "%s", tg_error_message());
            cr_assert(s == 7 && z == 7);
            tg_observer_free(&o);
        }
    tg_observer o;
    cr_assert(eq(int, tg_observer_init(&o, TG_OBSERVER_PER_CHANNEL, TG_I8, false, 1), TG_OK));
    cr_assert(eq(int, tg_observer_update(&o, ch), TG_OK));
    double s[2] = {7, 7};
    int32_t z[2] = {7, 7};
    cr_assert(eq(int, tg_observer_channel_qparams(&o, 2, s, z), TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "channel 1's observed range") != NULL, "%s",
              tg_error_message());
    cr_assert(s[0] == 7 && z[0] == 7, "channel 0 was written before the error");
    tg_observer_free(&o);

    const int32_t ranges[][2] = {{10, 5}, {1, 255}, {-5, 255}, {0, 256}, {7, 7}};
    for (size_t k = 0; k < sizeof ranges / sizeof ranges[0]; k++) {
        cr_assert(eq(int, tg_observer_init(&o, TG_OBSERVER_MINMAX, TG_U8, false, 0), TG_OK));
        cr_assert(eq(int, tg_observer_update(&o, ch), TG_OK));
        o.quant_min = ranges[k][0];
        o.quant_max = ranges[k][1];
        double ps;
        int32_t pz;
        cr_assert(eq(int, tg_observer_qparams(&o, &ps, &pz), TG_EINVAL), "range %zu", k);
        cr_assert(strstr(tg_error_message(), "quant_m") != NULL ||
                      strstr(tg_error_message(), "include 0") != NULL, "%s", tg_error_message());
        tg_observer_free(&o);
    }
    /* a narrower range that holds 0 is fine (torch's reduce_range: [0, 127]) */
    cr_assert(eq(int, tg_observer_init(&o, TG_OBSERVER_MINMAX, TG_U8, false, 0), TG_OK));
    o.quant_max = 127;
    tg_tensor *t = NULL;
    tg_tensor_from_data(&t, TG_F32, 1, s4, (float[]){-1, 2, 3, 0.5f});
    cr_assert(eq(int, tg_observer_update(&o, t), TG_OK));
    double ps;
    int32_t pz;
    cr_assert(eq(int, tg_observer_qparams(&o, &ps, &pz), TG_OK));
    cr_assert(epsilon_eq(dbl, ps, 4.0f / 127.0f, 1e-9));   /* (3 - -1) / 127 */
    cr_assert(eq(i32, pz, 32));                             /* 0 - rint(-1 / (4/127)) = 31.75 -> 32 */
    tg_observer_free(&o);
    tg_tensor_release(pinf), tg_tensor_release(ninf), tg_tensor_release(ch), tg_tensor_release(t);
}
