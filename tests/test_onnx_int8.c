/* tests/test_onnx_int8.c - tg_onnx_export of int8 models as QDQ graphs,
 * checked by onnx's checker and ONNX Runtime within one quantization step
 * of the output: the quantized DCGAN generator, a Conv -> ConvTranspose ->
 * Linear stack with u8 and i8 activations, and quantized Convs that pad
 * before they quantize; each with i8 and with u8 weights.
 * Each case writes its files into the test's temporary folder and
 * check_cases runs onnx's checker and ONNX Runtime over it (onnx_cases.h). */
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#include <criterion/criterion.h>
#include <stdio.h>

#include "helpers.h"
#include "onnx_cases.h"
#include "tapegrad/tapegrad.h"

TestSuite(onnx_int8, .init = onnx_setup, .fini = th_tmp_dir_remove);

/* ONNX Runtime fuses QDQ nodes into int8 ops whose x86 kernels, on a CPU
 * without VNNI, multiply u8 x i8 with vpmaddubsw, which saturates each pair
 * of products at 16 bits (ONNX Runtime's quantization docs): a model with
 * i8 weights then gives other numbers there, by design.  So i8-weight
 * files run fused (level "all") where the CPU has VNNI, else as written
 * (level "basic", the QDQ nodes evaluated one by one); u8-weight files
 * (tg_onnx_options.u8_weights) run fused everywhere. */
static bool cpu_has_avx_vnni(void)   /* CPUID.(7, 1):EAX[4], AVX-VNNI */
{
#if defined(__x86_64__) || defined(__i386__)
    unsigned a, b, c, d;
    return __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a >> 4 & 1u);
#else
    return false;
#endif
}

static const char *i8_weights_level(void)
{
    if (tg_int8_kernel_available(TG_INT8_KERNEL_VNNI) || cpu_has_avx_vnni()) return "all";
    th_not_run("ONNX Runtime's fused u8 x i8 kernels: this CPU has no VNNI, where they saturate "
               "pairs of products; the i8-weight models ran unfused, the u8-weight ones fused");
    return "basic";
}

/* Exports the int8 model q on x as case `name` (one step of y_scale of
 * tolerance) twice: with i8 weights at i8_weights_level, and as
 * `<name>_u8w` with u8 weights, fused, whose weight and zero point
 * initializers (`<wpath>.weight`, `<wpath>.weight_zero_point`) must be u8. */
static void write_int8_cases(const char *name, tg_module *q, tg_tensor *x, double y_scale,
                             const char *wpath)
{
    char name_u8[128], types[256];
    const char *graph = case_graph;   /* for both files */
    case_level = i8_weights_level();
    write_case(name, q, x, 0, y_scale, NULL, NULL);
    tg_onnx_options o = TG_ONNX_OPTIONS_INIT;
    o.u8_weights = true;
    snprintf(name_u8, sizeof name_u8, "%s_u8w", name);
    snprintf(types, sizeof types, "\"%s.weight\": \"UINT8\", \"%s.weight_zero_point\": \"UINT8\"",
             wpath, wpath);
    case_types = types;
    case_graph = graph;
    write_case(name_u8, q, x, 0, y_scale, NULL, &o);
}

/* The generator quantized by tg_quantize_model (BatchNorms folded, ReLUs
 * fused): QDQ nodes around Gemm / ConvTranspose.  Between the same integers
 * ONNX Runtime's arithmetic may round a layer's output one step away from
 * tapegrad's fixed-point requantization, so the tolerance is one step of
 * the last int8 layer's output (tanh after it has slope <= 1). */
Test(onnx_int8, int8_generator_matches_onnxruntime_within_quantization_error)
{
    need_onnx();
    tg_module *g = dcgan_generator(), *q = NULL;
    tg_tensor *calib[2] = {th_rand_uniform(TG_F32, 2, (const int64_t[]){16, 16}, 50),
                           th_rand_uniform(TG_F32, 2, (const int64_t[]){16, 16}, 51)};
    cr_assert(tg_quantize_model(&q, g, 2, calib, NULL) == TG_OK, "%s", tg_error_message());
    tg_qlayer_info last;
    tg_module *l7 = tg_module_child(tg_module_child(q, "net"), "7");
    cr_assert(tg_quantized_layer_info(l7, &last) == TG_OK, "%s", tg_error_message());
    cr_assert(last.transpose && last.q.n_weight_scales == 1);
    tg_tensor *z = th_rand_uniform(TG_F32, 2, (const int64_t[]){4, 16}, 9);
    write_int8_cases("dcgan_generator_int8", q, z, last.q.y_scale, "net.7");
    check_cases();
    cr_log_info("int8 generator: tolerance y_scale = %g", last.q.y_scale);
    tg_module_release(q);
    tg_module_release(g);
    th_release_all(2, calib);
    tg_tensor_release(z);
}

/* Conv (groups 2, fused ReLU) -> ConvTranspose with per-channel weight
 * scales on axis 1 -> Linear, quantized; i8 activations too. */
Test(onnx_int8, int8_conv_convT_linear_match_onnxruntime)
{
    need_onnx();
    tg_rng rng;
    tg_rng_init(&rng, 12);
    tg_module *seq = NULL, *m = NULL;
    cr_assert(tg_nn_sequential_new(&seq) == TG_OK);
    append(seq, conv_module(&conv_cases[4], &rng));          /* conv2d g3 relu: 3 -> 6 */
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    p.stride[0] = p.stride[1] = 2;
    p.padding[0][0] = 1;
    p.output_padding[1] = 1;
    cr_assert(tg_nn_conv_transpose_new(&m, 2, 6, 5, (const int64_t[]){3, 3}, &p, true, &rng) ==
              TG_OK);
    append(seq, m);
    cr_assert(tg_nn_flatten_new(&m, 1, -1) == TG_OK);
    append(seq, m);
    tg_tensor *x = th_rand_uniform(TG_F32, 4, (const int64_t[]){2, 3, 8, 7}, 60);
    tg_tensor *y = forward(seq, x);
    cr_assert(tg_nn_linear_new(&m, tg_tensor_dim(y, 1), 4, true, &rng) == TG_OK);
    append(seq, m);
    tg_tensor_release(y);
    for (int i = 0; i < 2; i++) {
        tg_quantize_options qo = TG_QUANTIZE_OPTIONS_INIT;
        qo.act_dtype = i ? TG_I8 : TG_U8;
        tg_module *q = NULL;
        cr_assert(tg_quantize_model(&q, seq, 1, &x, &qo) == TG_OK, "%s", tg_error_message());
        tg_qlayer_info lin;
        cr_assert(tg_quantized_layer_info(tg_module_child(q, "3"), &lin) == TG_OK);
        write_int8_cases(i ? "int8_stack_i8" : "int8_stack_u8", q, x, lin.q.y_scale, "1");
        tg_module_release(q);
    }
    check_cases();
    tg_module_release(seq);
    tg_tensor_release(x);
}

/* A quantized Conv with reflect padding (and a fused ReLU), then one with
 * circular padding: the padding nodes work on the float input, before its
 * QuantizeLinear, as the int8 module pads before it quantizes. */
Test(onnx_int8, int8_conv_padding_modes_pad_before_quantizing)
{
    need_onnx();
    tg_rng rng;
    tg_rng_init(&rng, 43);
    static const conv_case layers[] = {
        {"reflect", false, 2, 3, 4, 1, {3, 3}, {1, 2}, {1, 1}, {1, 2}, {2, 1}, {0, 0}, {7, 6},
         TG_ACT_RELU, true, TG_PAD_REFLECT},
        {"circular", false, 2, 4, 3, 1, {3, 2}, {1, 1}, {2, 1}, {1, 0}, {1, 2}, {0, 0}, {0, 0},
         TG_ACT_NONE, true, TG_PAD_CIRCULAR},
    };
    tg_module *seq = NULL;
    cr_assert(tg_nn_sequential_new(&seq) == TG_OK);
    append(seq, conv_module(&layers[0], &rng));
    append(seq, conv_module(&layers[1], &rng));
    tg_tensor *x = conv_input(&layers[0], 2, 70);
    tg_module *q = NULL;
    cr_assert(tg_quantize_model(&q, seq, 1, &x, NULL) == TG_OK, "%s", tg_error_message());
    tg_qlayer_info last;
    cr_assert(tg_quantized_layer_info(tg_module_child(q, "1"), &last) == TG_OK);
    cr_assert(last.p.padding_mode == TG_PAD_CIRCULAR);
    case_graph = "\"ops\": [\"Pad\", \"QuantizeLinear\", \"DequantizeLinear\", "
                 "\"DequantizeLinear\", \"DequantizeLinear\", \"Conv\", \"Relu\", "
                 "\"QuantizeLinear\", \"DequantizeLinear\", "
                 "\"Slice\", \"Slice\", \"Concat\", \"Slice\", \"Concat\", \"QuantizeLinear\", "
                 "\"DequantizeLinear\", \"DequantizeLinear\", \"DequantizeLinear\", \"Conv\", "
                 "\"QuantizeLinear\", \"DequantizeLinear\"], "
                 "\"attributes\": {\"Pad\": {\"mode\": \"reflect\"}, "
                 "\"Conv\": {\"pads\": [0, 0, 0, 0]}}, "
                 "\"initializer_values\": {\"/0/pads\": [0, 0, 1, 2, 0, 0, 2, 1], "
                 "\"/1/wrap2_tail_starts\": [-1], \"/1/wrap2_head_ends\": [1], "
                 "\"/1/wrap3_head_ends\": [2]}";
    write_int8_cases("int8_conv_padding_modes", q, x, last.q.y_scale, "1");
    check_cases();
    tg_module_release(q);
    tg_module_release(seq);
    tg_tensor_release(x);
}

