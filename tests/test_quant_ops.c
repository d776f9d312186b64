/* tests/test_quant_ops.c - the quantized ops (conv, conv_transpose, linear)
 * and the int8 kernels under them.
 *
 * Oracles: the quantized ops against the float op run on the dequantized
 * inputs (dequantized here by explicit index loops, so the
 * per-output-channel axis is checked independently), rounded to the output
 * grid: within 1 unit; every int8 kernel against the portable one, byte for
 * byte.  Quantization itself and PyTorch's goldens are in test_quant.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "helpers.h"
#include "quant_fixtures.h"
#include "quant/quant_internal.h"
#include "tapegrad/autograd.h"
#include "tapegrad/conv.h"
#include "tapegrad/ops.h"
#include "tapegrad/quant.h"
#include "tapegrad/registry.h"
#include "tapegrad/status.h"

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

Test(quant_ops, quantized_conv_ops_match_float_within_one_unit)
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

Test(quant_ops, every_kernel_gives_the_portable_bytes)
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
Test(quant_ops, amx_kernel_on_emulated_tiles_gives_the_portable_bytes)
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

Test(quant_ops, quantized_linear_matches_float_within_one_unit)
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

/* An empty batch gives an empty result of the right shape (no division by
 * zero when cutting the batch into tasks), as the float ops do. */
Test(quant_ops, empty_batch_gives_empty_output)
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

Test(quant_ops, quantized_op_errors_change_nothing)
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
Test(quant_ops, a_bad_channel_multiplier_is_named_among_thousands)
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
