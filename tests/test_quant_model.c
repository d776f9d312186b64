/* tests/test_quant_model.c - packed int8 weights and post-training
 * quantization of a model (tapegrad/quant.h); BatchNorm folding is in
 * test_quant_model_fold.c.
 *
 * Oracles: the packed ops against the unpacked ops (which test_quant checks
 * against the float ops on dequantized inputs) on every kernel this CPU has;
 * the quantized model against the float model it came from (SNR of the
 * output, computed here), and its structure (which modules were converted,
 * which are shared). */
#include <math.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "helpers.h"
#include "quant_model_fixtures.h"
#include "core/core.h"
#include "tapegrad/nn.h"
#include "tapegrad/quant.h"
#include "tapegrad/status.h"

static bool same_bytes(const tg_tensor *a, const tg_tensor *b)
{
    return tg_tensor_numel(a) == tg_tensor_numel(b) &&
           memcmp(tg_tensor_cdata(a), tg_tensor_cdata(b), (size_t)tg_tensor_numel(a)) == 0;
}

/* ---- packed weights ---- */

typedef struct pcase {
    int kind;   /* 0 linear, 1 conv, 2 conv_transpose */
    int64_t xs[4], ws[4];
    int nd;
    int64_t groups, stride, pad;
    tg_dtype dt;
} pcase;

static int run_op(const pcase *c, tg_tensor **y, tg_tensor *x, tg_tensor *w, const tg_qweight *pw,
                  tg_tensor *b, const tg_qscales *q)
{
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    p.groups = c->groups;
    for (int a = 0; a < 2; a++) p.stride[a] = c->stride, p.padding[a][0] = p.padding[a][1] = c->pad;
    if (c->kind == 0)
        return pw ? tg_quantized_linear_packed(y, x, pw, b, q, false)
                  : tg_quantized_linear(y, x, w, b, q, false);
    if (c->kind == 1)
        return pw ? tg_quantized_conv_packed(y, x, pw, b, &p, q) : tg_quantized_conv(y, x, w, b, &p, q);
    return pw ? tg_quantized_conv_transpose_packed(y, x, pw, b, &p, q)
              : tg_quantized_conv_transpose(y, x, w, b, &p, q);
}

Test(quant_model, packed_weight_gives_the_unpacked_integers_on_every_kernel)
{
    static const pcase cases[] = {
        {0, {13, 37}, {11, 37}, 2, 1, 1, 0, TG_U8},
        {1, {3, 4, 7, 6}, {6, 2, 3, 3}, 4, 2, 2, 1, TG_I8},
        {1, {2, 4, 9, 9}, {6, 2, 3, 3}, 4, 2, 1, 1, TG_I8},   /* 81 rows: AMX's tiles */
        {2, {2, 6, 5, 4}, {6, 5, 4, 4}, 4, 3, 2, 1, TG_U8},
        {2, {7, 9, 1, 1}, {9, 20, 4, 4}, 4, 1, 1, 0, TG_I8},
    };
    const tg_int8_kernel kerns[] = {TG_INT8_KERNEL_PORTABLE, TG_INT8_KERNEL_AVX2,
                                    TG_INT8_KERNEL_VNNI, TG_INT8_KERNEL_AMX};
    tg_rng rng;
    tg_rng_init(&rng, 7);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const pcase *c = &cases[i];
        const bool u8 = c->dt == TG_U8;
        tg_tensor *x = rnd_tensor(c->dt, c->nd, c->xs, &rng, u8 ? 0 : -128, u8 ? 256 : 128);
        tg_tensor *w = rnd_tensor(TG_I8, c->nd, c->ws, &rng, -128, 128);
        const int64_t c_out = c->kind == 2 ? c->ws[1] * c->groups : c->ws[0];
        tg_tensor *b = rnd_tensor(TG_F32, 1, &c_out, &rng, -2, 2);
        double ws[32];
        for (int64_t k = 0; k < c_out; k++) ws[k] = 0.001 * (1 + k % 7);
        tg_qscales q = {.x_scale = 0.02, .x_zero_point = u8 ? 131 : -3, .n_weight_scales = c_out,
                        .weight_scales = ws, .y_scale = 0.3, .y_zero_point = u8 ? 128 : 0};
        tg_qweight *pw = NULL;
        cr_assert(eq(int, tg_qweight_new(&pw, w, c->kind == 2, c->groups), TG_OK));
        cr_assert(eq(int, tg_int8_kernel_set(TG_INT8_KERNEL_PORTABLE), TG_OK));
        tg_tensor *ref = NULL;
        cr_assert(eq(int, run_op(c, &ref, x, w, NULL, b, &q), TG_OK), "%s", tg_error_message());
        /* e = 4: amx on emulated tiles, where the CPU has VNNI (AMX or not) */
        for (int e = 0; e < 5; e++) {
            const bool emu = e == 4;
            if (emu && !tg_int8_kernel_available(TG_INT8_KERNEL_VNNI)) continue;
            tg__amx_set_emulated(emu);
            const tg_int8_kernel kern = emu ? TG_INT8_KERNEL_AMX : kerns[e];
            if (!tg_int8_kernel_available(kern)) continue;
            cr_assert(eq(int, tg_int8_kernel_set(kern), TG_OK));
            tg_tensor *y = NULL;
            cr_assert(eq(int, run_op(c, &y, x, w, pw, b, &q), TG_OK), "%s", tg_error_message());
            cr_assert(same_bytes(y, ref), "case %zu, %s kernel%s", i, tg_int8_kernel_name(kern),
                      emu ? " on emulated tiles" : "");
            tg_tensor_release(y);
        }
        tg__amx_set_emulated(false);
        tg_int8_kernel_set(TG_INT8_KERNEL_AUTO);
        tg_tensor_release(ref), tg_qweight_free(pw);
        tg_tensor_release(x), tg_tensor_release(w), tg_tensor_release(b);
    }
}

Test(quant_model, packed_weight_errors_change_nothing)
{
    tg_rng rng;
    tg_rng_init(&rng, 3);
    const int64_t xs[] = {1, 4, 5, 5}, ws[] = {4, 3, 3, 3};
    tg_tensor *x = rnd_tensor(TG_U8, 4, xs, &rng, 0, 256);
    tg_tensor *w = rnd_tensor(TG_I8, 4, ws, &rng, -128, 128);
    tg_tensor *wf = rnd_tensor(TG_F32, 4, ws, &rng, -1, 1);
    tg_qweight *pw = NULL;
    cr_assert(eq(int, tg_qweight_new(&pw, wf, false, 1), TG_EDTYPE));
    cr_assert(pw == NULL);
    cr_assert(eq(int, tg_qweight_new(&pw, w, false, 3), TG_EINVAL));   /* 3 does not divide 4 */
    cr_assert(pw == NULL);
    cr_assert(eq(int, tg_qweight_new(&pw, w, false, 1), TG_OK));
    double s = 0.01;
    tg_qscales q = {.x_scale = 0.02, .x_zero_point = 128, .n_weight_scales = 1,
                    .weight_scales = &s, .y_scale = 0.1, .y_zero_point = 128};
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    tg_tensor *y = NULL;
    /* packed for conv, used as conv_transpose / linear; groups differ */
    cr_assert(eq(int, tg_quantized_conv_transpose_packed(&y, x, pw, NULL, &p, &q), TG_EINVAL));
    cr_assert(eq(int, tg_quantized_linear_packed(&y, x, pw, NULL, &q, false), TG_EINVAL));
    p.groups = 2;
    cr_assert(eq(int, tg_quantized_conv_packed(&y, x, pw, NULL, &p, &q), TG_EINVAL));
    cr_assert(y == NULL);
    p.groups = 1;
    cr_assert(eq(int, tg_quantized_conv_packed(&y, x, NULL, NULL, &p, &q), TG_EINVAL));
    cr_assert(y == NULL);
    tg_qweight_free(pw);
    tg_qweight_free(NULL);
    tg_tensor_release(x), tg_tensor_release(w), tg_tensor_release(wf);
}

/* ---- tg_quantize_model ---- */

static double snr_db(const tg_tensor *ref, const tg_tensor *got)
{
    double sig = 0, err = 0, a, b;
    for (int64_t i = 0; i < tg_tensor_numel(ref); i++) {
        tg_tensor_get_flat(ref, i, &a);
        tg_tensor_get_flat(got, i, &b);
        sig += a * a, err += (a - b) * (a - b);
    }
    return 10 * log10(sig / fmax(err, 1e-300));
}

Test(quant_model, calibrated_model_is_close_to_float_and_converts_the_layers)
{
    tg_rng rng;
    tg_rng_init(&rng, 11);
    tg_module *f = small_model(&rng);
    const int64_t xs[] = {16, 8};
    tg_tensor *batches[4];
    for (int i = 0; i < 4; i++) batches[i] = rnd_tensor(TG_F32, 2, xs, &rng, -2, 2);
    tg_tensor *x = rnd_tensor(TG_F32, 2, xs, &rng, -1.8, 1.8);
    tg_module *q = NULL;
    cr_assert(eq(int, tg_quantize_model(&q, f, 4, batches, NULL), TG_OK), "%s", tg_error_message());
    tg_module *fnet = tg_module_child(f, "net"), *qnet = tg_module_child(q, "net");
    cr_assert(eq(str, (char *)tg_module_type_name(q), "Net"));
    const char *want[] = {"QuantizedLinear", "Unflatten", "Identity", "QuantizedConvTranspose",
                          "Identity", "Identity", "QuantizedConv"};
    for (int i = 0; i < 7; i++) {
        cr_assert(eq(str, (char *)tg_module_type_name(tg_module_child_at(qnet, i)), (char *)want[i]));
        if (!strcmp(want[i], "Unflatten"))   /* float modules are shared */
            cr_assert(tg_module_child_at(qnet, i) == tg_module_child_at(fnet, i));
    }
    tg_tensor *yf = NULL, *yq = NULL;
    tg_module_train(f, false);   /* the folded BatchNorm is no longer shared, so still training */
    cr_assert(eq(int, tg_module_forward(f, &yf, x), TG_OK));
    cr_assert(eq(int, tg_module_forward(q, &yq, x), TG_OK));
    cr_assert(eq(int, tg_tensor_ndim(yq), 4));
    cr_assert(tg_tensor_same_shape(yf, yq));
    const double snr = snr_db(yf, yq);
    cr_log_info("quantized small model: SNR %.1f dB", snr);
    cr_assert(snr > 25, "SNR %.2f dB", snr);
    cr_assert(snr < 80, "SNR %.2f dB: suspiciously exact, is the model really quantized?", snr);
    tg_tensor_release(yf), tg_tensor_release(yq), tg_tensor_release(x);
    for (int i = 0; i < 4; i++) tg_tensor_release(batches[i]);
    tg_module_release(q);
    tg_module_release(f);
}

Test(quant_model, quantize_model_errors_change_nothing)
{
    tg_rng rng;
    tg_rng_init(&rng, 5);
    tg_module *f = small_model(&rng);
    const int64_t xs[] = {4, 8}, bad[] = {4, 5};
    tg_tensor *good = rnd_tensor(TG_F32, 2, xs, &rng, -1, 1);
    tg_tensor *wrong = rnd_tensor(TG_F32, 2, bad, &rng, -1, 1);
    tg_module *q = NULL;
    cr_assert(eq(int, tg_quantize_model(&q, f, 0, &good, NULL), TG_EINVAL));
    cr_assert(eq(int, tg_quantize_model(&q, NULL, 1, &good, NULL), TG_EINVAL));
    cr_assert(eq(int, tg_quantize_model(&q, f, 1, &wrong, NULL), TG_ESHAPE));   /* forward fails */
    tg_quantize_options o = TG_QUANTIZE_OPTIONS_INIT;
    o.act_dtype = TG_F32;
    cr_assert(eq(int, tg_quantize_model(&q, f, 1, &good, &o), TG_EDTYPE));
    cr_assert(q == NULL);
    /* the float model still runs and still has its float layers */
    tg_tensor *y = NULL;
    cr_assert(eq(int, tg_module_forward(f, &y, good), TG_OK));
    cr_assert(eq(str, (char *)tg_module_type_name(tg_module_child_at(tg_module_child(f, "net"), 0)),
                 "Linear"));
    tg_tensor_release(y), tg_tensor_release(good), tg_tensor_release(wrong);
    tg_module_release(f);
}

/* A Conv module with its own fused ReLU is converted to int8; a Conv with
 * another fused activation (which the int8 ops cannot apply) stays float,
 * and the model still matches the float one (a converted tanh conv would
 * lose its tanh).  Whether the int8 op applies the ReLU itself is not
 * visible here and not asserted: the observed range [0, max] puts the output
 * zero point at qmin, so saturation clamps negatives to 0 either way. */
Test(quant_model, conv_with_relu_converts_other_activations_stay_float)
{
    tg_rng rng;
    tg_rng_init(&rng, 12);
    tg_module *seq = NULL, *l = NULL, *q = NULL;
    cr_assert(eq(int, tg_nn_sequential_new(&seq), TG_OK));
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    const int64_t k[] = {3, 3};
    p.act = TG_ACT_RELU;
    cr_assert(eq(int, tg_nn_conv_new(&l, 2, 3, 4, k, &p, true, &rng), TG_OK));
    cr_assert(eq(int, tg_nn_sequential_append(seq, l), TG_OK));
    p.act = TG_ACT_TANH;
    cr_assert(eq(int, tg_nn_conv_new(&l, 2, 4, 2, k, &p, true, &rng), TG_OK));
    cr_assert(eq(int, tg_nn_sequential_append(seq, l), TG_OK));
    const int64_t xs[] = {2, 3, 8, 8};
    tg_tensor *x = rnd_tensor(TG_F32, 4, xs, &rng, -1, 1), *yf = NULL, *yq = NULL;
    cr_assert(eq(int, tg_quantize_model(&q, seq, 1, &x, NULL), TG_OK), "%s", tg_error_message());
    cr_assert(eq(str, (char *)tg_module_type_name(tg_module_child_at(q, 0)), "QuantizedConv"));
    cr_assert(tg_module_child_at(q, 1) == tg_module_child_at(seq, 1), "tanh conv shared, float");
    cr_assert(eq(int, tg_module_forward(seq, &yf, x), TG_OK));
    cr_assert(eq(int, tg_module_forward(q, &yq, x), TG_OK));
    const double snr = snr_db(yf, yq);
    cr_assert(snr > 25, "SNR %.1f dB: the first conv's ReLU was lost?", snr);
    tg_tensor_release(x), tg_tensor_release(yf), tg_tensor_release(yq);
    tg_module_release(q), tg_module_release(seq);
}
