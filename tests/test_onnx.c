/* tests/test_onnx.c - tg_onnx_export, checked by parts that tapegrad did
 * not write: every exported file passes onnx's checker (tests/onnx/check.py,
 * python3-onnx; it also checks the initializers and nodes a case lists) and
 * ONNX Runtime (onnxruntime-node, tests/onnx/run.mjs)
 * computes tapegrad's outputs from it: within 1e-5 of the largest output
 * magnitude in f32, within the output's quantization step for int8.
 *
 * Each case writes <name>.onnx, the input and tapegrad's output (raw f32)
 * and <name>.json (shapes, tolerances, the expected initializer names,
 * ONNX Runtime's optimization level) into the test's temporary folder; the
 * two scripts then run over the folder. */
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "dcgan/model.h"
#include "helpers.h"
#include "tapegrad/tapegrad.h"

static void setup(void)
{
    th_tmp_dir_make("tg_onnx_");
}

TestSuite(onnx, .init = setup, .fini = th_tmp_dir_remove);

static void need_onnx(void)
{
    if (!tg_onnx_available()) cr_skip_test("the library was built without ONNX support");
}

/* Runs m (eval, no grad) on x: a new reference. */
static tg_tensor *forward(tg_module *m, tg_tensor *x)
{
    tg_tensor *y = NULL;
    tg_module_train(m, false);
    tg_no_grad_begin();
    int rc = tg_module_forward(m, &y, x);
    tg_no_grad_end();
    cr_assert(rc == TG_OK, "forward: %s", tg_error_message());
    return y;
}

static void write_f32(const char *name, const char *ext, const tg_tensor *t)
{
    char path[256], file[128];
    snprintf(file, sizeof file, "%s%s", name, ext);
    const int64_t n = tg_tensor_numel(t);
    float *v = malloc((size_t)n * sizeof *v + 1);
    for (int64_t i = 0; i < n; i++) v[i] = (float)th_at(t, i);
    th_write_bytes(th_tmp_path(path, sizeof path, file), v, (size_t)n * sizeof *v);
    free(v);
}

static void json_shape(FILE *f, const char *key, const tg_tensor *t)
{
    fprintf(f, "\"%s\": [", key);
    for (int d = 0; d < tg_tensor_ndim(t); d++)
        fprintf(f, "%s%lld", d ? ", " : "", (long long)tg_tensor_dim(t, d));
    fprintf(f, "]");
}

/* What write_expected adds to the next case's .json: ONNX Runtime's
 * graphOptimizationLevel (NULL: run.mjs's "all"), the initializers
 * whose types check.py checks ("name": "UINT8" pairs, NULL for none) and
 * what it checks of the graph (a JSON fragment with "ops", "attributes",
 * "initializer_values"; NULL for none).  Reset after each case. */
static const char *case_level;
static const char *case_types;
static const char *case_graph;

/* The files of case `name` but its .onnx: the input x, tapegrad's output y
 * and <name>.json; inits (NULL-terminated, or NULL to skip the check) are
 * the initializer names the file must hold. */
static void write_expected(const char *name, const tg_tensor *x, const tg_tensor *y, double rtol,
                           double atol, const char *const *inits)
{
    char path[256], file[128];
    write_f32(name, ".in.f32", x);
    write_f32(name, ".out.f32", y);
    snprintf(file, sizeof file, "%s.json", name);
    FILE *f = fopen(th_tmp_path(path, sizeof path, file), "w");
    cr_assert(f != NULL);
    fprintf(f, "{");
    json_shape(f, "input_shape", x);
    fprintf(f, ", ");
    json_shape(f, "output_shape", y);
    fprintf(f, ", \"rtol\": %.17g, \"atol\": %.17g", rtol, atol);
    if (inits) {
        fprintf(f, ", \"initializers\": [");
        for (int i = 0; inits[i]; i++) fprintf(f, "%s\"%s\"", i ? ", " : "", inits[i]);
        fprintf(f, "]");
    }
    if (case_level) fprintf(f, ", \"level\": \"%s\"", case_level);
    if (case_types) fprintf(f, ", \"initializer_types\": {%s}", case_types);
    if (case_graph) fprintf(f, ", %s", case_graph);
    case_level = case_types = case_graph = NULL;
    fprintf(f, "}\n");
    fclose(f);
}

/* Exports m on x as case `name`, with its expected output m(x). */
static void write_case(const char *name, tg_module *m, tg_tensor *x, double rtol, double atol,
                       const char *const *inits, const tg_onnx_options *o)
{
    char path[256], file[128];
    tg_tensor *y = forward(m, x);
    snprintf(file, sizeof file, "%s.onnx", name);
    int rc = tg_onnx_export(m, x, th_tmp_path(path, sizeof path, file), o);
    cr_assert(rc == TG_OK, "%s: %s", name, tg_error_message());
    write_expected(name, x, y, rtol, atol, inits);
    tg_tensor_release(y);
}

/* The checker and ONNX Runtime over every case of the folder. */
static void check_cases(void)
{
    int rc = th_run("TG_PYTHON", (const char *const[]){TG_SOURCE_ROOT "/tests/onnx/check.py",
                                                       ".", NULL});
    cr_log_info("check.py:\n%s%s", th_out, th_err);
    cr_assert(rc == 0, "onnx checker:\n%s%s", th_out, th_err);
    rc = th_run("TG_NODE", (const char *const[]){TG_SOURCE_ROOT "/tests/onnx/run.mjs", ".", NULL});
    cr_log_info("run.mjs:\n%s%s", th_out, th_err);
    cr_assert(rc == 0, "onnxruntime:\n%s%s", th_out, th_err);
}

/* ---- the conv / convT sweep ---- */

typedef struct conv_case {
    const char *name;
    bool transpose;
    int ns;
    int64_t c_in, c_out, groups;
    int64_t k[3], stride[3], dil[3], lo[3], hi[3], outpad[3], in[3];
    tg_activation act;
    bool bias;
    tg_pad_mode mode;   /* padding_mode */
} conv_case;

static const conv_case conv_cases[] = {
    {"conv1d_s2_d2_asym_g2", false, 1, 4, 6, 2, {3}, {2}, {2}, {1}, {2}, {0}, {11},
     TG_ACT_NONE, true, TG_PAD_CONSTANT},
    {"conv1d_depthwise_relu", false, 1, 3, 3, 3, {5}, {1}, {1}, {2}, {2}, {0}, {9},
     TG_ACT_RELU, false, TG_PAD_CONSTANT},
    {"convT1d_s2_asym_op1_g2", true, 1, 4, 6, 2, {3}, {2}, {1}, {1}, {0}, {1}, {7},
     TG_ACT_NONE, true, TG_PAD_CONSTANT},
    {"convT1d_s3_d2_op2_leaky", true, 1, 3, 2, 1, {4}, {3}, {2}, {2}, {1}, {2}, {5},
     TG_ACT_LEAKY_RELU, true, TG_PAD_CONSTANT},
    {"conv2d_s21_d12_asym_g3_relu", false, 2, 3, 6, 3, {3, 2}, {2, 1}, {1, 2}, {1, 0}, {0, 2},
     {0, 0}, {8, 7}, TG_ACT_RELU, true, TG_PAD_CONSTANT},
    {"convT2d_dcgan", true, 2, 6, 3, 1, {4, 4}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, {0, 0}, {5, 5},
     TG_ACT_TANH, true, TG_PAD_CONSTANT},
    {"convT2d_s23_d21_asym_op12_g2_gelu", true, 2, 4, 6, 2, {3, 2}, {2, 3}, {2, 1}, {0, 1},
     {2, 1}, {1, 2}, {4, 5}, TG_ACT_GELU, true, TG_PAD_CONSTANT},
    {"convT2d_g4_nobias_sigmoid", true, 2, 8, 4, 4, {2, 3}, {1, 2}, {1, 1}, {0, 1}, {0, 1},
     {0, 1}, {3, 4}, TG_ACT_SIGMOID, false, TG_PAD_CONSTANT},
    {"conv3d_s121_asym_g2_silu", false, 3, 4, 4, 2, {2, 3, 2}, {1, 2, 1}, {1, 1, 2}, {1, 0, 1},
     {0, 2, 0}, {0, 0, 0}, {4, 6, 5}, TG_ACT_SILU, true, TG_PAD_CONSTANT},
    {"convT3d_s212_d121_asym_op101_g2", true, 3, 4, 6, 2, {3, 2, 2}, {2, 1, 2}, {1, 2, 1},
     {1, 0, 1}, {0, 1, 1}, {1, 0, 1}, {3, 4, 3}, TG_ACT_NONE, true, TG_PAD_CONSTANT},
};

static tg_module *conv_module(const conv_case *c, tg_rng *rng)
{
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    for (int i = 0; i < c->ns; i++) {
        p.stride[i] = c->stride[i];
        p.dilation[i] = c->dil[i];
        p.padding[i][0] = c->lo[i];
        p.padding[i][1] = c->hi[i];
        p.output_padding[i] = c->outpad[i];
    }
    p.groups = c->groups;
    p.padding_mode = c->mode;
    p.act = c->act;
    p.act_slope = 0.15;
    tg_module *m = NULL;
    int rc = c->transpose
                 ? tg_nn_conv_transpose_new(&m, c->ns, c->c_in, c->c_out, c->k, &p, c->bias, rng)
                 : tg_nn_conv_new(&m, c->ns, c->c_in, c->c_out, c->k, &p, c->bias, rng);
    cr_assert(rc == TG_OK, "%s: %s", c->name, tg_error_message());
    return m;
}

static tg_tensor *conv_input(const conv_case *c, int64_t batch, uint64_t seed)
{
    int64_t shape[5] = {batch, c->c_in};
    for (int i = 0; i < c->ns; i++) shape[2 + i] = c->in[i];
    return th_rand_uniform(TG_F32, 2 + c->ns, shape, seed);
}

Test(onnx, conv_and_conv_transpose_sweep_matches_onnxruntime)
{
    need_onnx();
    tg_rng rng;
    tg_rng_init(&rng, 31);
    for (size_t i = 0; i < sizeof conv_cases / sizeof *conv_cases; i++) {
        const conv_case *c = &conv_cases[i];
        tg_module *conv = conv_module(c, &rng), *seq = NULL;
        tg_tensor *x = conv_input(c, 2, 100 + i);
        /* odd cases inside a Sequential ("0.weight"), even ones at the top */
        tg_module *m = conv;
        if (i % 2) {
            cr_assert(tg_nn_sequential_new(&seq) == TG_OK);
            cr_assert(tg_nn_sequential_append(seq, conv) == TG_OK);
            m = seq;
        }
        const char *inits_seq[] = {"0.weight", "0.bias", NULL}, *inits_top[] = {"weight", "bias",
                                                                                NULL};
        if (!c->bias) inits_seq[1] = inits_top[1] = NULL;
        /* gelu adds its constants (sqrt 2, 1, 1/2) as initializers */
        const char *const *inits = c->act == TG_ACT_GELU ? NULL : i % 2 ? inits_seq : inits_top;
        write_case(c->name, m, x, 1e-5, 0, inits, NULL);
        tg_module_release(m);
        tg_tensor_release(x);
    }
    check_cases();
}

/* ---- the other modules ---- */

/* Appends m to seq (asserting). */
static void append(tg_module *seq, tg_module *m)
{
    cr_assert(m != NULL && tg_nn_sequential_append(seq, m) == TG_OK, "%s", tg_error_message());
}

static tg_module *act(tg_activation a, double slope)
{
    tg_module *m = NULL;
    cr_assert(tg_nn_activation_new(&m, a, slope) == TG_OK);
    return m;
}

/* Sets a BatchNorm's running statistics to values away from (0, 1). */
static void set_running_stats(tg_module *bn, uint64_t seed)
{
    tg_tensor *mean = tg_module_find(bn, "running_mean"), *var = tg_module_find(bn, "running_var");
    uint64_t s = seed;
    for (int64_t i = 0; i < tg_tensor_numel(mean); i++) {
        tg_tensor_set_flat(mean, i, 0.3 * th_uniform_pm1(&s));
        tg_tensor_set_flat(var, i, 0.5 + 0.4 * th_uniform_pm1(&s));
    }
}

/* Flatten -> Linear -> BatchNorm1d -> gelu -> Linear -> Unflatten ->
 * BatchNorm2d (no affine) -> sigmoid -> Dropout -> Flatten(2, 3) ->
 * leaky_relu -> Linear on a 3-d input (MatMul) -> silu -> tanh -> Identity. */
static tg_module *mixed_model(tg_rng *rng)
{
    tg_module *seq = NULL, *m = NULL;
    cr_assert(tg_nn_sequential_new(&seq) == TG_OK);
    cr_assert(tg_nn_flatten_new(&m, 1, -1) == TG_OK);
    append(seq, m);                                                        /* 0 */
    cr_assert(tg_nn_linear_new(&m, 12, 24, true, rng) == TG_OK);
    append(seq, m);                                                        /* 1 */
    cr_assert(tg_nn_batchnorm_new(&m, 0, 24, 1e-3, 0.1, true, true) == TG_OK);
    set_running_stats(m, 5);
    append(seq, m);                                                        /* 2 */
    append(seq, act(TG_ACT_GELU, 0));                                      /* 3 */
    cr_assert(tg_nn_linear_new(&m, 24, 24, false, rng) == TG_OK);
    append(seq, m);                                                        /* 4 */
    cr_assert(tg_nn_unflatten_new(&m, 1, 3, (const int64_t[]){2, 3, 4}) == TG_OK);
    append(seq, m);                                                        /* 5 */
    cr_assert(tg_nn_batchnorm_new(&m, 2, 2, 1e-5, 0.1, false, true) == TG_OK);
    set_running_stats(m, 6);
    append(seq, m);                                                        /* 6 */
    append(seq, act(TG_ACT_SIGMOID, 0));                                   /* 7 */
    cr_assert(tg_nn_dropout_new(&m, 0.5, 1) == TG_OK);
    append(seq, m);                                                        /* 8 */
    cr_assert(tg_nn_flatten_new(&m, 2, 3) == TG_OK);
    append(seq, m);                                                        /* 9: (N, 2, 12) */
    append(seq, act(TG_ACT_LEAKY_RELU, 0.3));                              /* 10 */
    cr_assert(tg_nn_linear_new(&m, 12, 5, true, rng) == TG_OK);
    append(seq, m);                                                        /* 11 */
    append(seq, act(TG_ACT_SILU, 0));                                      /* 12 */
    append(seq, act(TG_ACT_TANH, 0));                                      /* 13 */
    append(seq, act(TG_ACT_NONE, 0));                                      /* 14 */
    return seq;
}

Test(onnx, linear_batchnorm_activations_and_reshapes_match_onnxruntime)
{
    need_onnx();
    tg_rng rng;
    tg_rng_init(&rng, 7);
    tg_module *m = mixed_model(&rng);
    tg_tensor *x = th_rand_uniform(TG_F32, 3, (const int64_t[]){3, 3, 4}, 11);
    tg_onnx_options o = TG_ONNX_OPTIONS_INIT;
    o.dynamic_batch = true;
    write_case("mixed", m, x, 1e-5, 0, NULL, &o);
    /* a leaf alone, and the identity model (one Identity node) */
    tg_module *relu = act(TG_ACT_RELU, 0), *id = act(TG_ACT_NONE, 0);
    write_case("relu_alone", relu, x, 1e-5, 0, (const char *const[]){NULL}, NULL);
    write_case("identity_alone", id, x, 1e-5, 0, (const char *const[]){NULL}, NULL);
    check_cases();
    tg_module_release(relu);
    tg_module_release(id);
    tg_module_release(m);
    tg_tensor_release(x);
}

/* ---- the DCGAN generator, float and int8 ---- */

/* The generator of examples/dcgan/model.h (nz 16, C 8) after a few
 * training-mode forwards, so its running statistics are not (0, 1). */
static tg_module *dcgan_generator(void)
{
    tg_rng rng;
    tg_rng_init(&rng, 3);
    dcgan_arch a = DCGAN_ARCH_INIT;
    a.nz = 16;
    a.g_ch = 8;
    tg_module *g = NULL;
    cr_assert(dcgan_generator_new(&g, &a, &rng) == TG_OK, "%s", tg_error_message());
    tg_module_train(g, true);
    tg_no_grad_begin();
    for (int i = 0; i < 3; i++) {
        tg_tensor *z = th_rand_uniform(TG_F32, 2, (const int64_t[]){8, 16}, 40 + i), *y = NULL;
        cr_assert(tg_module_forward(g, &y, z) == TG_OK);
        tg_tensor_release(y);
        tg_tensor_release(z);
    }
    tg_no_grad_end();
    return g;
}

static const char *const generator_inits[] = {
    "net.0.weight", "net.2.weight", "net.2.bias", "net.2.running_mean", "net.2.running_var",
    "net.4.weight", "net.5.weight", "net.5.bias", "net.5.running_mean", "net.5.running_var",
    "net.7.weight", "net.7.bias", "/net/1/shape", NULL};

Test(onnx, dcgan_generator_matches_onnxruntime_with_state_dict_names)
{
    need_onnx();
    tg_module *g = dcgan_generator();
    tg_tensor *z = th_rand_uniform(TG_F32, 2, (const int64_t[]){4, 16}, 9);
    tg_onnx_options o = TG_ONNX_OPTIONS_INIT;
    o.dynamic_batch = true;
    write_case("dcgan_generator", g, z, 1e-5, 0, generator_inits, &o);
    check_cases();
    tg_module_release(g);
    tg_tensor_release(z);
}

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
Test(onnx, int8_generator_matches_onnxruntime_within_quantization_error)
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
Test(onnx, int8_conv_convT_linear_match_onnxruntime)
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

/* ---- a Conv's padding_mode ---- */

/* Appends printf output to the string buf of size bytes. */
static void __attribute__((format(printf, 3, 4))) jcat(char *buf, size_t size, const char *fmt,
                                                       ...)
{
    const size_t n = strlen(buf);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + n, size - n, fmt, ap);
    va_end(ap);
    cr_assert(strlen(buf) + 1 < size, "the JSON fragment outgrew its buffer");
}

/* Reflect, replicate and circular padding as torch.onnx.export writes
 * them: a Pad (or, circular, Slice + Concat per axis) before a Conv with
 * pads 0.  Asymmetric padding with stride, dilation and groups; an axis
 * without padding and a circular padding as large as the extent (conv3d);
 * only the head of one axis (conv1d); a mode with no padding at all. */
static const conv_case pad_conv_cases[] = {
    {"conv1d_reflect_s2_asym", false, 1, 2, 3, 1, {3}, {2}, {1}, {2}, {1}, {0}, {9},
     TG_ACT_NONE, true, TG_PAD_REFLECT},
    {"conv1d_circular_d2_head_only_relu", false, 1, 2, 2, 1, {3}, {1}, {2}, {0}, {3}, {0}, {7},
     TG_ACT_RELU, false, TG_PAD_CIRCULAR},
    {"conv2d_reflect_s21_d12_asym_relu", false, 2, 3, 4, 1, {3, 3}, {2, 1}, {1, 2}, {1, 2},
     {2, 0}, {0, 0}, {7, 8}, TG_ACT_RELU, true, TG_PAD_REFLECT},
    {"conv2d_replicate_s12_d21_asym_g2", false, 2, 4, 6, 2, {2, 3}, {1, 2}, {2, 1}, {3, 0},
     {0, 2}, {0, 0}, {6, 7}, TG_ACT_NONE, true, TG_PAD_REPLICATE},
    {"conv2d_circular_s21_d12_asym", false, 2, 2, 3, 1, {3, 2}, {2, 1}, {1, 2}, {2, 1}, {1, 3},
     {0, 0}, {6, 5}, TG_ACT_NONE, true, TG_PAD_CIRCULAR},
    {"conv3d_replicate_s121_d112_asym", false, 3, 2, 3, 1, {2, 3, 2}, {1, 2, 1}, {1, 1, 2},
     {1, 0, 2}, {0, 2, 1}, {0, 0, 0}, {4, 5, 6}, TG_ACT_NONE, true, TG_PAD_REPLICATE},
    {"conv3d_circular_s112_full_extent", false, 3, 2, 2, 1, {2, 2, 3}, {1, 1, 2}, {1, 1, 1},
     {0, 2, 1}, {0, 1, 4}, {0, 0, 0}, {3, 4, 4}, TG_ACT_NONE, true, TG_PAD_CIRCULAR},
    {"conv3d_reflect_asym", false, 3, 2, 2, 1, {2, 2, 2}, {1, 1, 1}, {1, 1, 1}, {1, 2, 0},
     {2, 1, 1}, {0, 0, 0}, {3, 4, 5}, TG_ACT_NONE, true, TG_PAD_REFLECT},
    {"conv2d_reflect_no_padding", false, 2, 2, 2, 1, {3, 3}, {1, 1}, {1, 1}, {0, 0}, {0, 0},
     {0, 0}, {5, 5}, TG_ACT_NONE, true, TG_PAD_REFLECT},
};

/* What check.py checks of the graph of conv case c exported with node
 * scope `scope`: the op types in order, Conv's pads all 0, Pad's mode, and
 * the padding initializers: Pad's pads over every input dim (0 for the
 * batch and channel), or each wrapped axis's slice bounds. */
static void pad_graph_json(char *buf, size_t size, const conv_case *c, const char *scope)
{
    const int nd = 2 + c->ns;
    const bool circular = c->mode == TG_PAD_CIRCULAR;
    bool any = false;
    for (int a = 0; a < c->ns; a++) any |= c->lo[a] != 0 || c->hi[a] != 0;
    buf[0] = '\0';
    jcat(buf, size, "\"ops\": [%s", any && !circular ? "\"Pad\", " : "");
    for (int a = 0; any && circular && a < c->ns; a++) {
        if (c->lo[a]) jcat(buf, size, "\"Slice\", ");
        if (c->hi[a]) jcat(buf, size, "\"Slice\", ");
        if (c->lo[a] || c->hi[a]) jcat(buf, size, "\"Concat\", ");
    }
    jcat(buf, size, "\"Conv\"%s], \"attributes\": {\"Conv\": {\"pads\": [",
         c->act == TG_ACT_RELU ? ", \"Relu\"" : "");
    for (int a = 0; a < 2 * c->ns; a++) jcat(buf, size, "%s0", a ? ", " : "");
    jcat(buf, size, "]}");
    if (any && !circular)
        jcat(buf, size, ", \"Pad\": {\"mode\": \"%s\"}",
             c->mode == TG_PAD_REFLECT ? "reflect" : "edge");
    jcat(buf, size, "}, \"initializer_values\": {");
    if (any && !circular) {
        jcat(buf, size, "\"%s/pads\": [", scope);
        for (int e = 0; e < 2 * nd; e++) {
            const int a = e % nd - 2;   /* the spatial axis of entry e, < 0: batch, channel */
            jcat(buf, size, "%s%lld", e ? ", " : "",
                 a < 0 ? 0LL : (long long)(e < nd ? c->lo[a] : c->hi[a]));
        }
        jcat(buf, size, "]");
    }
    const char *sep = "";
    for (int a = 0; circular && a < c->ns; a++) {
        if (c->lo[a] == 0 && c->hi[a] == 0) continue;
        jcat(buf, size, "%s\"%s/wrap%d_axes\": [%d]", sep, scope, 2 + a, 2 + a);
        sep = ", ";
        if (c->lo[a])
            jcat(buf, size, ", \"%s/wrap%d_tail_starts\": [%lld]", scope, 2 + a,
                 -(long long)c->lo[a]);
        if (c->hi[a])
            jcat(buf, size, ", \"%s/wrap%d_head_ends\": [%lld]", scope, 2 + a,
                 (long long)c->hi[a]);
    }
    jcat(buf, size, "}");
}

Test(onnx, conv_padding_modes_match_onnxruntime)
{
    need_onnx();
    tg_rng rng;
    tg_rng_init(&rng, 41);
    for (size_t i = 0; i < sizeof pad_conv_cases / sizeof *pad_conv_cases; i++) {
        const conv_case *c = &pad_conv_cases[i];
        tg_module *conv = conv_module(c, &rng), *m = conv;
        if (i % 2) {   /* odd cases inside a Sequential: scope "/0" */
            cr_assert(tg_nn_sequential_new(&m) == TG_OK);
            append(m, conv);
        }
        /* even cases with a dynamic batch, exported on 2 samples and run on 3 */
        tg_onnx_options o = TG_ONNX_OPTIONS_INIT;
        o.dynamic_batch = i % 2 == 0;
        tg_tensor *x = conv_input(c, 2, 200 + i), *xr = o.dynamic_batch ? conv_input(c, 3, 300 + i)
                                                                       : tg_tensor_retain(x);
        tg_tensor *y = forward(m, xr);
        char path[256], file[128], graph[2048];
        snprintf(file, sizeof file, "%s.onnx", c->name);
        int rc = tg_onnx_export(m, x, th_tmp_path(path, sizeof path, file), &o);
        cr_assert(rc == TG_OK, "%s: %s", c->name, tg_error_message());
        pad_graph_json(graph, sizeof graph, c, i % 2 ? "/0" : "");
        case_graph = graph;
        write_expected(c->name, xr, y, 1e-5, 0, NULL);
        th_release_all(3, (tg_tensor *[]){x, xr, y});
        tg_module_release(m);
    }
    check_cases();
}

/* A quantized Conv with reflect padding (and a fused ReLU), then one with
 * circular padding: the padding nodes work on the float input, before its
 * QuantizeLinear, as the int8 module pads before it quantizes. */
Test(onnx, int8_conv_padding_modes_pad_before_quantizing)
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

/* ---- pooling and upsampling ---- */

/* One resampling module: kind 'u' (Upsample), 'a' (AvgPoolNd), 'm'
 * (MaxPoolNd); for pools kernel, stride, padding, dilation per axis; and
 * the graph expected, worked out by hand: the nodes and the pool's pads
 * (ceil_mode is written as floor mode with grown end pads; a
 * count_include_pad window cut at the padding is rescaled by a Mul; a
 * MaxPool pad that reaches the kernel is a Pad node of -inf). */
typedef struct pool_case {
    const char *name;
    char kind;
    int ns;
    int64_t k[3], stride[3], pad[3], dil[3];
    bool ceil, cip;
    int64_t in[5];   /* the input's shape, rank ns + 2 */
    const char *ops;
    int64_t pads[6];
    int cip_attr;
} pool_case;

/* Every rank; ceil_mode windows that run past the padding (torch divides
 * those by the count up to the padding's end) or would start in it (torch
 * drops them); both count_include_pad; dilation, with an end pad as large
 * as the kernel. */
static const pool_case pool_cases[] = {
    {"upsample1d_s3", 'u', 1, {3}, {0}, {0}, {0}, false, false, {2, 3, 5}, NULL, {0}, 0},
    {"upsample2d_s23", 'u', 2, {2, 3}, {0}, {0}, {0}, false, false, {2, 2, 4, 5}, NULL, {0}, 0},
    {"upsample3d_s212", 'u', 3, {2, 1, 2}, {0}, {0}, {0}, false, false, {1, 2, 2, 3, 2}, NULL,
     {0}, 0},
    {"upsample_linear1d_s3", 'l', 1, {3}, {0}, {0}, {0}, false, false, {2, 3, 5}, NULL, {0}, 0},
    {"upsample_bilinear2d_s23", 'l', 2, {2, 3}, {0}, {0}, {0}, false, false, {2, 2, 4, 5}, NULL,
     {0}, 0},
    {"upsample_bilinear2d_s22_aligned", 'L', 2, {2, 2}, {0}, {0}, {0}, false, false,
     {2, 2, 4, 5}, NULL, {0}, 0},
    {"upsample_trilinear3d_s212", 'l', 3, {2, 1, 2}, {0}, {0}, {0}, false, false,
     {1, 2, 2, 3, 2}, NULL, {0}, 0},
    {"avgpool1d_ceil_past_padding", 'a', 1, {3}, {2}, {1}, {1}, true, true, {2, 2, 6},
     "\"AveragePool\", \"Mul\"", {1, 2}, 1},
    {"avgpool1d_ceil_no_pad_count", 'a', 1, {3}, {2}, {1}, {1}, true, false, {2, 2, 6},
     "\"AveragePool\"", {1, 2}, 0},
    {"avgpool2d_k3s2p1", 'a', 2, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false, true, {2, 3, 7, 6},
     "\"AveragePool\"", {1, 1, 1, 1}, 1},
    {"avgpool2d_k32_s21_ceil", 'a', 2, {3, 2}, {2, 1}, {1, 1}, {1, 1}, true, false,
     {2, 3, 7, 6}, "\"AveragePool\"", {1, 1, 1, 1}, 0},
    {"avgpool2d_ceil_one_axis_past_padding", 'a', 2, {3, 2}, {2, 2}, {1, 1}, {1, 1}, true, true,
     {2, 2, 6, 5}, "\"AveragePool\", \"Mul\"", {1, 1, 2, 1}, 1},
    {"avgpool3d_ceil_drops_a_window", 'a', 3, {2, 2, 2}, {2, 2, 1}, {1, 0, 1}, {1, 1, 1}, true,
     true, {1, 2, 5, 4, 4}, "\"AveragePool\"", {1, 0, 1, 1, 0, 1}, 1},
    {"maxpool1d_ceil", 'm', 1, {3}, {2}, {1}, {1}, true, false, {2, 3, 10}, "\"MaxPool\"",
     {1, 2}, 0},
    {"maxpool1d_ceil_dilated_end_pad_2", 'm', 1, {2}, {3}, {1}, {2}, true, false, {2, 2, 6},
     "\"Pad\", \"MaxPool\"", {0, 0}, 0},
    {"maxpool2d_dilated", 'm', 2, {3, 2}, {1, 2}, {1, 1}, {2, 1}, false, false, {2, 2, 8, 7},
     "\"MaxPool\"", {1, 1, 1, 1}, 0},
    {"maxpool3d_ceil_dilated", 'm', 3, {2, 3, 2}, {2, 2, 1}, {1, 1, 0}, {1, 1, 2}, true, false,
     {1, 2, 5, 6, 5}, "\"MaxPool\"", {1, 1, 0, 1, 2, 0}, 0},
};

static tg_module *pool_module(const pool_case *c)
{
    tg_module *m = NULL;
    tg_pool_params p = TG_POOL_PARAMS_INIT;
    for (int a = 0; a < c->ns; a++) {
        p.kernel[a] = c->k[a];
        p.stride[a] = c->stride[a];
        p.padding[a] = c->pad[a];
        p.dilation[a] = c->dil[a];
    }
    p.ceil_mode = c->ceil;
    p.count_include_pad = c->cip;
    int rc = c->kind == 'u'   ? tg_nn_upsample_new(&m, c->ns, c->k)
             : c->kind == 'l' || c->kind == 'L'
                 ? tg_nn_upsample_linear_new(&m, c->ns, c->k, c->kind == 'L')
             : c->kind == 'a' ? tg_nn_avg_pool_new(&m, c->ns, &p)
                              : tg_nn_max_pool_new(&m, c->ns, &p);
    cr_assert(rc == TG_OK, "%s: %s", c->name, tg_error_message());
    return m;
}

/* What check.py checks of case c's graph: the nodes, Resize's attributes
 * and scales (1, 1, s...), or the pool's attributes. */
static void pool_graph_json(char *buf, size_t size, const pool_case *c)
{
    buf[0] = '\0';
    if (c->kind == 'l' || c->kind == 'L') {
        jcat(buf, size, "\"ops\": [\"Resize\"], \"attributes\": {\"Resize\": {\"mode\": "
             "\"linear\", \"coordinate_transformation_mode\": \"%s\"}}, "
             "\"initializer_values\": {\"/scales\": [1, 1",
             c->kind == 'L' ? "align_corners" : "pytorch_half_pixel");
        for (int a = 0; a < c->ns; a++) jcat(buf, size, ", %lld", (long long)c->k[a]);
        jcat(buf, size, "]}");
        return;
    }
    if (c->kind == 'u') {
        jcat(buf, size, "\"ops\": [\"Resize\"], \"attributes\": {\"Resize\": {\"mode\": "
             "\"nearest\", \"coordinate_transformation_mode\": \"asymmetric\", "
             "\"nearest_mode\": \"floor\"}}, \"initializer_values\": {\"/scales\": [1, 1");
        for (int a = 0; a < c->ns; a++) jcat(buf, size, ", %lld", (long long)c->k[a]);
        jcat(buf, size, "]}");
        return;
    }
    const char *op = c->kind == 'a' ? "AveragePool" : "MaxPool";
    jcat(buf, size, "\"ops\": [%s], \"attributes\": {\"%s\": {\"ceil_mode\": 0, \"pads\": [",
         c->ops, op);
    for (int e = 0; e < 2 * c->ns; e++) jcat(buf, size, "%s%lld", e ? ", " : "", (long long)c->pads[e]);
    jcat(buf, size, "], \"kernel_shape\": [");
    for (int a = 0; a < c->ns; a++) jcat(buf, size, "%s%lld", a ? ", " : "", (long long)c->k[a]);
    jcat(buf, size, "], \"strides\": [");
    for (int a = 0; a < c->ns; a++)
        jcat(buf, size, "%s%lld", a ? ", " : "", (long long)c->stride[a]);
    if (c->kind == 'a') {
        jcat(buf, size, "], \"count_include_pad\": %d}}", c->cip_attr);
        return;
    }
    jcat(buf, size, "], \"dilations\": [");
    for (int a = 0; a < c->ns; a++) jcat(buf, size, "%s%lld", a ? ", " : "", (long long)c->dil[a]);
    jcat(buf, size, "]}}");
}

Test(onnx, pooling_and_upsampling_match_onnxruntime)
{
    need_onnx();
    for (size_t i = 0; i < sizeof pool_cases / sizeof *pool_cases; i++) {
        const pool_case *c = &pool_cases[i];
        tg_module *m = pool_module(c);
        tg_tensor *x = th_rand_uniform(TG_F32, c->ns + 2, c->in, 500 + i);
        char graph[1024];
        pool_graph_json(graph, sizeof graph, c);
        case_graph = graph;
        write_case(c->name, m, x, 1e-5, 0, NULL, NULL);
        tg_module_release(m);
        tg_tensor_release(x);
    }
    /* a decoder stage, Upsample + Conv in place of a ConvTranspose, then a
     * MaxPool, with a dynamic batch: exported on 2 samples, run on 3 */
    tg_rng rng;
    tg_rng_init(&rng, 5);
    tg_module *seq = NULL, *m = NULL;
    cr_assert(tg_nn_sequential_new(&seq) == TG_OK);
    cr_assert(tg_nn_upsample_new(&m, 2, (const int64_t[]){2, 2}) == TG_OK);
    append(seq, m);
    tg_conv_params cp = TG_CONV_PARAMS_INIT;
    tg_conv_params_set_padding(&cp, 1);
    cr_assert(tg_nn_conv_new(&m, 2, 3, 4, (const int64_t[]){3, 3}, &cp, true, &rng) == TG_OK);
    append(seq, m);
    tg_pool_params pp = TG_POOL_PARAMS_INIT;
    tg_pool_params_set(&pp, 3, 2, 1);
    cr_assert(tg_nn_max_pool_new(&m, 2, &pp) == TG_OK);
    append(seq, m);
    tg_onnx_options o = TG_ONNX_OPTIONS_INIT;
    o.dynamic_batch = true;
    tg_tensor *x = th_rand_uniform(TG_F32, 4, (const int64_t[]){2, 3, 5, 4}, 7);
    tg_tensor *xr = th_rand_uniform(TG_F32, 4, (const int64_t[]){3, 3, 5, 4}, 8);
    tg_tensor *y = forward(seq, xr);
    char path[256];
    cr_assert(tg_onnx_export(seq, x, th_tmp_path(path, sizeof path, "decoder.onnx"), &o) == TG_OK,
              "%s", tg_error_message());
    case_graph = "\"ops\": [\"Resize\", \"Conv\", \"MaxPool\"]";
    write_expected("decoder", xr, y, 1e-5, 0,
                   (const char *const[]){"/0/scales", "1.bias", "1.weight", NULL});
    th_release_all(3, (tg_tensor *[]){x, xr, y});
    tg_module_release(seq);
    /* a sub-pixel stage: Conv to 4r^2 channels, PixelShuffle (DepthToSpace
     * CRD), then PixelUnshuffle (Reshape, Transpose, Reshape) and a Conv,
     * also with a dynamic batch */
    cr_assert(tg_nn_sequential_new(&seq) == TG_OK);
    cr_assert(tg_nn_conv_new(&m, 2, 3, 16, (const int64_t[]){3, 3}, &cp, true, &rng) == TG_OK);
    append(seq, m);
    cr_assert(tg_nn_pixel_shuffle_new(&m, 2) == TG_OK);
    append(seq, m);
    cr_assert(tg_nn_pixel_unshuffle_new(&m, 2) == TG_OK);
    append(seq, m);
    cr_assert(tg_nn_conv_new(&m, 2, 16, 2, (const int64_t[]){1, 1}, &cp, true, &rng) == TG_OK);
    append(seq, m);
    x = th_rand_uniform(TG_F32, 4, (const int64_t[]){2, 3, 5, 4}, 9);
    xr = th_rand_uniform(TG_F32, 4, (const int64_t[]){3, 3, 5, 4}, 10);
    y = forward(seq, xr);
    cr_assert(tg_onnx_export(seq, x, th_tmp_path(path, sizeof path, "subpixel.onnx"), &o) ==
                  TG_OK, "%s", tg_error_message());
    case_graph = "\"ops\": [\"Conv\", \"DepthToSpace\", \"Reshape\", \"Transpose\", "
                 "\"Reshape\", \"Conv\"], \"attributes\": {\"DepthToSpace\": {\"blocksize\": "
                 "2, \"mode\": \"CRD\"}, \"Transpose\": {\"perm\": [0, 1, 3, 5, 2, 4]}}";
    write_expected("subpixel", xr, y, 1e-5, 1e-6,
                   (const char *const[]){"0.bias", "0.weight", "/2/split_shape", "/2/shape",
                                         "3.bias", "3.weight", NULL});
    check_cases();
    th_release_all(3, (tg_tensor *[]){x, xr, y});
    tg_module_release(seq);
}

/* ---- layer and group normalisation ---- */

/* Weight and bias of m (when it has them) set to random values, so that a
 * mix-up of the two, or of their axes, shows. */
static void randomize_affine(tg_module *m, uint64_t seed)
{
    for (int i = 0; i < 2; i++) {
        tg_tensor *t = tg_module_find(m, i ? "bias" : "weight");
        if (!t) continue;
        tg_tensor *r = th_rand_uniform(TG_F32, tg_tensor_ndim(t), tg_tensor_shape(t), seed + i);
        for (int64_t e = 0; e < tg_tensor_numel(t); e++)
            tg_tensor_set_flat(t, e, (i ? 0.0 : 1.0) + th_at(r, e));
        tg_tensor_release(r);
    }
}

/* One LayerNorm (groups 0) or GroupNorm case: the input's shape, the
 * normalized shape or the groups, affine, and the graph expected. */
typedef struct norm_case {
    const char *name;
    int nd;
    int64_t in[5];
    int n_norm;
    int64_t groups;
    bool affine;
    double eps;
    const char *graph;
    const char *inits[8];   /* the initializers, sorted */
} norm_case;

static const norm_case norm_cases[] = {
    {"layernorm_last", 3, {2, 3, 8}, 1, 0, true, 1e-5,
     "\"ops\": [\"LayerNormalization\"], \"attributes\": {\"LayerNormalization\": "
     "{\"axis\": -1}}", {"bias", "weight"}},
    {"layernorm_two_dims_no_affine", 3, {2, 4, 5}, 2, 0, false, 1e-3,
     "\"ops\": [\"LayerNormalization\"], \"attributes\": {\"LayerNormalization\": "
     "{\"axis\": -2}}, \"initializer_values\": {\"unit_weight\": [1, 1, 1, 1, 1, 1, 1, 1, 1, "
     "1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]}", {"unit_weight"}},
    {"groupnorm2d", 4, {2, 6, 4, 5}, 0, 3, true, 1e-5,
     "\"ops\": [\"Reshape\", \"InstanceNormalization\", \"Reshape\", \"Unsqueeze\", \"Mul\", "
     "\"Unsqueeze\", \"Add\"], \"initializer_values\": {\"/group_shape\": [0, 3, -1], "
     "\"/shape\": [0, 6, 4, 5], \"/affine_axes\": [1, 2], \"/group_scale\": [1, 1, 1]}",
     {"/affine_axes", "/group_bias", "/group_scale", "/group_shape", "/shape", "bias", "weight"}},
    {"groupnorm1d_instance_no_affine", 3, {2, 4, 7}, 0, 4, false, 1e-4,
     "\"ops\": [\"Reshape\", \"InstanceNormalization\", \"Reshape\"]",
     {"/group_bias", "/group_scale", "/group_shape", "/shape"}},
    {"groupnorm_no_spatial", 2, {3, 6}, 0, 2, true, 1e-5,
     "\"ops\": [\"Reshape\", \"InstanceNormalization\", \"Reshape\", \"Mul\", \"Add\"]",
     {"/group_bias", "/group_scale", "/group_shape", "/shape", "bias", "weight"}},
    {"groupnorm3d_one_group", 5, {1, 4, 2, 3, 3}, 0, 1, true, 1e-5, NULL,
     {"/affine_axes", "/group_bias", "/group_scale", "/group_shape", "/shape", "bias", "weight"}},
    /* groups -N: InstanceNormNd */
    {"instancenorm2d", 4, {2, 3, 4, 5}, 0, -2, true, 1e-5,
     "\"ops\": [\"InstanceNormalization\"]", {"bias", "weight"}},
    {"instancenorm1d_no_affine", 3, {2, 4, 7}, 0, -1, false, 1e-4,
     "\"ops\": [\"InstanceNormalization\"], \"initializer_values\": {\"/instance_scale\": "
     "[1, 1, 1, 1], \"/instance_bias\": [0, 0, 0, 0]}", {"/instance_bias", "/instance_scale"}},
};

Test(onnx, layer_and_group_norm_match_onnxruntime)
{
    need_onnx();
    for (size_t i = 0; i < sizeof norm_cases / sizeof *norm_cases; i++) {
        const norm_case *c = &norm_cases[i];
        tg_module *m = NULL;
        int rc = c->groups < 0
                     ? tg_nn_instance_norm_new(&m, (int)-c->groups, c->in[1], c->eps, c->affine)
                 : c->groups ? tg_nn_group_norm_new(&m, c->groups, c->in[1], c->eps, c->affine)
                             : tg_nn_layer_norm_new(&m, c->n_norm, &c->in[c->nd - c->n_norm],
                                                    c->eps, c->affine);
        cr_assert(rc == TG_OK, "%s: %s", c->name, tg_error_message());
        randomize_affine(m, 600 + 2 * i);
        tg_tensor *x = th_rand_uniform(TG_F32, c->nd, c->in, 700 + i);
        case_graph = c->graph;
        write_case(c->name, m, x, 1e-5, 0, c->inits, NULL);
        tg_module_release(m);
        tg_tensor_release(x);
    }
    /* decoder stages with a dynamic batch, exported on 2 samples and run on
     * 3: Linear -> LayerNorm -> Unflatten -> ConvTranspose -> GroupNorm ->
     * ReLU */
    tg_rng rng;
    tg_rng_init(&rng, 9);
    tg_module *seq = NULL, *m = NULL;
    cr_assert(tg_nn_sequential_new(&seq) == TG_OK);
    cr_assert(tg_nn_linear_new(&m, 6, 32, true, &rng) == TG_OK);
    append(seq, m);
    cr_assert(tg_nn_layer_norm_new(&m, 1, (const int64_t[]){32}, 1e-5, true) == TG_OK);
    randomize_affine(m, 801);
    append(seq, m);
    cr_assert(tg_nn_unflatten_new(&m, 1, 3, (const int64_t[]){8, 2, 2}) == TG_OK);
    append(seq, m);
    tg_conv_params cp = TG_CONV_PARAMS_INIT;
    cp.stride[0] = cp.stride[1] = 2;
    tg_conv_params_set_padding(&cp, 1);
    cr_assert(tg_nn_conv_transpose_new(&m, 2, 8, 4, (const int64_t[]){4, 4}, &cp, true, &rng) ==
              TG_OK);
    append(seq, m);
    cr_assert(tg_nn_group_norm_new(&m, 2, 4, 1e-5, true) == TG_OK);
    randomize_affine(m, 803);
    append(seq, m);
    append(seq, act(TG_ACT_RELU, 0));
    tg_onnx_options o = TG_ONNX_OPTIONS_INIT;
    o.dynamic_batch = true;
    tg_tensor *x = th_rand_uniform(TG_F32, 2, (const int64_t[]){2, 6}, 805);
    tg_tensor *xr = th_rand_uniform(TG_F32, 2, (const int64_t[]){3, 6}, 806);
    tg_tensor *y = forward(seq, xr);
    char path[256];
    cr_assert(tg_onnx_export(seq, x, th_tmp_path(path, sizeof path, "norm_decoder.onnx"), &o) ==
                  TG_OK, "%s", tg_error_message());
    write_expected("norm_decoder", xr, y, 1e-5, 0,
                   (const char *const[]){"/2/shape", "/4/affine_axes", "/4/group_bias",
                                         "/4/group_scale", "/4/group_shape", "/4/shape",
                                         "0.bias", "0.weight", "1.bias", "1.weight", "3.bias",
                                         "3.weight", "4.bias", "4.weight", NULL});
    check_cases();
    th_release_all(3, (tg_tensor *[]){x, xr, y});
    tg_module_release(seq);
}

/* ---- errors ---- */

static int custom_forward(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    (void)m;
    return tg_mul_scalar(y, x, 2.0);
}
static const tg_module_vtable custom_vt = {.type_name = "Doubler", .forward = custom_forward};
static const tg_module_vtable fake_seq_vt = {.type_name = "Sequential", .forward = custom_forward};

/* Exports m and expects status rc with `want` in the message, no file at
 * path, and an existing file left as it was. */
static void expect_refused(tg_module *m, tg_tensor *x, const tg_onnx_options *o, int rc,
                           const char *want)
{
    char path[256], prev[256];
    th_tmp_path(path, sizeof path, "refused.onnx");
    cr_assert(tg_onnx_export(m, x, path, o) == rc, "expected %s: %s", tg_status_name(rc),
              tg_error_message());
    th_expect_in(tg_error_message(), want);
    cr_assert(th_exists(path) == false, "a refused export left %s", path);
    th_tmp_path(prev, sizeof prev, "kept.onnx");
    th_write_bytes(prev, "previous", 8);
    cr_assert(tg_onnx_export(m, x, prev, o) == rc);
    th_expect_same_bytes(prev, "previous", 8);
    cr_assert(th_tmp_dir_count() == 1, "a temporary file was left behind");
    remove(prev);
}

Test(onnx, unsupported_modules_and_options_are_named_errors_and_write_nothing)
{
    need_onnx();
    tg_rng rng;
    tg_rng_init(&rng, 1);
    tg_module *seq = NULL, *lin = NULL, *custom = NULL, *bn = NULL;
    cr_assert(tg_nn_sequential_new(&seq) == TG_OK);
    cr_assert(tg_nn_linear_new(&lin, 4, 4, true, &rng) == TG_OK);
    append(seq, lin);
    cr_assert(tg_module_new(&custom, &custom_vt, NULL) == TG_OK);
    append(seq, custom);
    tg_tensor *x = th_rand_uniform(TG_F32, 2, (const int64_t[]){2, 4}, 1);
    expect_refused(seq, x, NULL, TG_EUNSUPPORTED, "module '1' (Doubler) is not supported");

    cr_assert(tg_nn_batchnorm_new(&bn, 0, 4, 1e-5, 0.1, true, false) == TG_OK);
    expect_refused(bn, x, NULL, TG_EUNSUPPORTED, "has no running statistics");

    /* a one-child wrapper whose forward is not its child's */
    tg_module *wrap = NULL;
    cr_assert(tg_module_new(&wrap, &custom_vt, NULL) == TG_OK);
    cr_assert(tg_module_add_child(wrap, "net", tg_module_retain(lin)) == TG_OK);
    expect_refused(wrap, x, NULL, TG_EUNSUPPORTED,
                   "module '<top>' (Doubler) is not supported: its forward is not its one child's");
    /* a custom module that only borrows the name Sequential */
    tg_module *fake = NULL;
    cr_assert(tg_module_new(&fake, &fake_seq_vt, NULL) == TG_OK);
    cr_assert(tg_module_add_child(fake, "0", tg_module_retain(lin)) == TG_OK);
    expect_refused(fake, x, NULL, TG_EUNSUPPORTED, "its forward is not its children in order");
    tg_module_release(fake);

    tg_onnx_options o = TG_ONNX_OPTIONS_INIT;
    o.opset = 13;
    expect_refused(lin, x, &o, TG_EINVAL, "only opset 17");
    o = (tg_onnx_options)TG_ONNX_OPTIONS_INIT;
    o.output_name = "input";
    expect_refused(lin, x, &o, TG_EINVAL, "distinct");

    tg_tensor *x64 = NULL;
    cr_assert(tg_tensor_to_dtype(&x64, x, TG_F64) == TG_OK);
    expect_refused(lin, x64, NULL, TG_EDTYPE, "example_input has dtype f64");
    cr_assert(tg_module_to_dtype(lin, TG_F64) == TG_OK);
    expect_refused(lin, x, NULL, TG_EDTYPE, "'weight' has dtype f64");
    cr_assert(tg_onnx_export(NULL, x, "x.onnx", NULL) == TG_EINVAL);

    /* a grouped ConvTranspose with per-channel scales that differ between
     * groups: DequantizeLinear on axis 1 holds only C_out/groups scales */
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    p.groups = 2;
    tg_module *ct = NULL, *q = NULL;
    cr_assert(tg_nn_conv_transpose_new(&ct, 1, 4, 4, (const int64_t[]){3}, &p, true, &rng) ==
              TG_OK);
    tg_tensor *w = tg_module_find(ct, "weight");
    tg_tensor_set_flat(w, 0, 5.0);   /* group 0's channel 0 has the larger scale */
    tg_tensor *xc = th_rand_uniform(TG_F32, 3, (const int64_t[]){2, 4, 5}, 2);
    cr_assert(tg_quantize_model(&q, ct, 1, &xc, NULL) == TG_OK, "%s", tg_error_message());
    expect_refused(q, xc, NULL, TG_EUNSUPPORTED,
                   "(QuantizedConvTranspose) is not supported: groups=2");
    tg_module_release(q);
    tg_module_release(ct);
    tg_tensor_release(xc);

    /* ONNX's pooling has a batch dim: a pool run on (C, H, W) is refused */
    tg_module *pool = NULL;
    tg_pool_params pp = TG_POOL_PARAMS_INIT;
    tg_pool_params_set(&pp, 2, 0, 0);
    cr_assert(tg_nn_avg_pool_new(&pool, 2, &pp) == TG_OK);
    tg_tensor *xu = th_rand_uniform(TG_F32, 3, (const int64_t[]){3, 4, 4}, 3);
    expect_refused(pool, xu, NULL, TG_EUNSUPPORTED,
                   "module '<top>' (AvgPool2d) runs on an unbatched input (3 dims): ONNX's "
                   "AveragePool takes (N, C, S...)");
    tg_module_release(pool);
    tg_tensor_release(xu);

    tg_module_release(wrap);
    tg_module_release(bn);
    tg_module_release(seq);
    tg_tensor_release(x);
    tg_tensor_release(x64);
}

Test(onnx, export_restores_training_flags_and_changes_no_state)
{
    need_onnx();
    tg_module *g = dcgan_generator();
    tg_module *net = tg_module_child(g, "net");
    tg_module_train(g, true);
    tg_module_train(tg_module_child(net, "5"), false);   /* a mixed tree */
    const tg_tensor *nbt = tg_module_find(g, "net.2.num_batches_tracked");
    const double before = th_at(nbt, 0), mean0 = th_at(tg_module_find(g, "net.2.running_mean"), 0);
    char path[256];
    tg_tensor *z = th_rand_uniform(TG_F32, 2, (const int64_t[]){2, 16}, 3);
    cr_assert(tg_onnx_export(g, z, th_tmp_path(path, sizeof path, "g.onnx"), NULL) == TG_OK);
    cr_assert(tg_module_is_training(g) && tg_module_is_training(tg_module_child(net, "2")));
    cr_assert(tg_module_is_training(tg_module_child(net, "5")) == false);
    cr_assert(th_at(nbt, 0) == before);
    cr_assert(th_at(tg_module_find(g, "net.2.running_mean"), 0) == mean0);
    tg_module_release(g);
    tg_tensor_release(z);
}

/* ---- the command line, against torch.onnx.export ---- */

/* `tapegrad export --onnx` of a generator file, and PyTorch's export of the
 * same file (examples/dcgan_torch.py --export-onnx): both pass the checker
 * and give the same images under ONNX Runtime, for a batch other than the
 * example's (the batch dim is dynamic in both). */
Test(onnx, cli_export_matches_torch_onnx_export)
{
    need_onnx();
    tg_module *g = dcgan_generator();
    tg_st_file *f = NULL;
    char path[256];
    cr_assert(tg_st_new(&f) == TG_OK);
    cr_assert(tg_module_state_dict_save(g, f, "gen") == TG_OK);
    cr_assert(tg_safetensors_save(f, th_tmp_path(path, sizeof path, "generator.safetensors")) ==
              TG_OK);
    tg_st_free(f);
    int rc = th_run("TG_TOOL", (const char *const[]){"export", "--onnx", "ours.onnx",
                                                     "--dynamic-batch", "--batch", "2",
                                                     "generator.safetensors", NULL});
    cr_assert(rc == 0, "tapegrad export:\n%s%s", th_out, th_err);
    th_expect_in(th_out, "generator nz=16 C=8");
    rc = th_run("TG_PYTHON", (const char *const[]){TG_SOURCE_ROOT "/examples/dcgan_torch.py",
                                                   "--dir", ".", "--export-onnx", "torch.onnx",
                                                   NULL});
    cr_assert(rc == 0, "dcgan_torch.py --export-onnx:\n%s%s", th_out, th_err);
    rc = th_run("TG_PYTHON", (const char *const[]){TG_SOURCE_ROOT "/tests/onnx/check.py", ".",
                                                   NULL});
    cr_assert(rc == 0, "onnx checker:\n%s%s", th_out, th_err);
    tg_tensor *z = th_rand_uniform(TG_F32, 2, (const int64_t[]){5, 16}, 77);
    write_f32("z", ".f32", z);
    rc = th_run("TG_NODE", (const char *const[]){TG_SOURCE_ROOT "/tests/onnx/run.mjs", "--same",
                                                 "ours.onnx", "torch.onnx", "z.f32", "5,16",
                                                 "1e-5", NULL});
    cr_log_info("%s", th_out);
    cr_assert(rc == 0, "onnxruntime:\n%s%s", th_out, th_err);
    /* --int8 writes QDQ nodes; a missing file is a plain error */
    rc = th_run("TG_TOOL", (const char *const[]){"export", "--onnx", "int8.onnx", "--int8",
                                                 "--calib", "2", "generator.safetensors", NULL});
    cr_assert(rc == 0, "tapegrad export --int8:\n%s%s", th_out, th_err);
    th_expect_in(th_out, "int8 QDQ");
    rc = th_run("TG_TOOL", (const char *const[]){"export", "--onnx", "int8u.onnx", "--int8",
                                                 "--u8-weights", "--calib", "2",
                                                 "generator.safetensors", NULL});
    cr_assert(rc == 0, "tapegrad export --int8 --u8-weights:\n%s%s", th_out, th_err);
    th_expect_in(th_out, "int8 QDQ, u8 weights");
    rc = th_run("TG_TOOL", (const char *const[]){"export", "--onnx", "u.onnx", "--u8-weights",
                                                 "generator.safetensors", NULL});
    cr_assert(rc == 2);
    th_expect_in(th_err, "--u8-weights applies to int8 weights: add --int8");
    cr_assert(th_exists(th_tmp_path(path, sizeof path, "u.onnx")) == false);
    rc = th_run("TG_TOOL", (const char *const[]){"export", "--onnx", "x.onnx", "none.safetensors",
                                                 NULL});
    cr_assert(rc == 1);
    th_expect_in(th_err, "none.safetensors");
    cr_assert(th_exists(th_tmp_path(path, sizeof path, "x.onnx")) == false);
    rc = th_run("TG_TOOL", (const char *const[]){"export", "generator.safetensors", NULL});
    cr_assert(rc == 2);
    tg_tensor_release(z);
    tg_module_release(g);
}

/* examples/dcgan trains a few steps and writes its generator with
 * --export-onnx (and again with --sample): ONNX Runtime draws from it the
 * images the run stored in latents.safetensors. */
Test(onnx, dcgan_example_exports_its_trained_generator)
{
    need_onnx();
    th_write_idx_set(th_tmp_dir, "train", 24, 28, 7);
    char out[256], path[512];
    th_tmp_path(out, sizeof out, "out");
    int rc = th_run("TG_DCGAN", (const char *const[]){"--data", th_tmp_dir, "--out", out,
                                                      "--batch", "8", "--epochs", "1", "--g-ch",
                                                      "8", "--d-ch", "4", "--nz", "16",
                                                      "--threads", "1", "--export-onnx",
                                                      "dcgan_trained.onnx", NULL});
    cr_assert(rc == 0, "dcgan:\n%s", th_err);
    th_expect_in(th_err, "wrote the generator as ONNX to dcgan_trained.onnx");
    tg_st_file *f = NULL;
    snprintf(path, sizeof path, "%s/latents.safetensors", out);
    cr_assert(tg_safetensors_load(&f, path) == TG_OK, "%s", tg_error_message());
    write_expected("dcgan_trained", tg_st_get(f, "z"), tg_st_get(f, "images"), 1e-5, 0, NULL);
    tg_st_free(f);
    rc = th_run("TG_DCGAN", (const char *const[]){"--out", out, "--sample", "4", "--export-onnx",
                                                  "sampled.onnx", NULL});
    cr_assert(rc == 0, "dcgan --sample:\n%s", th_err);
    cr_assert(th_exists(th_tmp_path(path, sizeof path, "sampled.onnx")));
    /* the same weights: the same bytes */
    size_t n1 = 0, n2 = 0;
    char *a = th_read_file(path, &n1);
    char *b = th_read_file(th_tmp_path(path, sizeof path, "dcgan_trained.onnx"), &n2);
    cr_assert(a && b && n1 == n2 && memcmp(a, b, n1) == 0);
    free(a);
    free(b);
    remove(th_tmp_path(path, sizeof path, "sampled.onnx"));
    check_cases();
}

/* A library built with -Donnx=disabled (or without protobuf-c) says so. */
Test(onnx, a_build_without_onnx_support_says_so)
{
    if (tg_onnx_available()) cr_skip_test("this build has ONNX support");
    tg_module *relu = act(TG_ACT_RELU, 0);
    tg_tensor *x = th_rand_uniform(TG_F32, 2, (const int64_t[]){1, 3}, 1);
    char path[256];
    cr_assert(tg_onnx_export(relu, x, th_tmp_path(path, sizeof path, "m.onnx"), NULL) ==
              TG_EUNSUPPORTED);
    th_expect_in(tg_error_message(), "built without ONNX support");
    cr_assert(th_exists(path) == false);
    tg_module_release(relu);
    tg_tensor_release(x);
}
