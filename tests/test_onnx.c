/* tests/test_onnx.c - tg_onnx_export, checked by parts that tapegrad did
 * not write: every exported file passes onnx's checker (tests/onnx/check.py,
 * python3-onnx) and ONNX Runtime (onnxruntime-node, tests/onnx/run.mjs)
 * computes tapegrad's outputs from it: within 1e-5 of the largest output
 * magnitude in f32, within the output's quantization step for int8.
 *
 * Each case writes <name>.onnx, the input and tapegrad's output (raw f32)
 * and <name>.json (shapes, tolerances, the expected initializer names) into
 * the test's temporary folder; the two scripts then run over the folder. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
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

/* Exports m on x as case `name` with its expected output y = m(x); inits
 * (NULL-terminated, or NULL to skip the check) are the initializer names the
 * file must hold. */
static void write_case(const char *name, tg_module *m, tg_tensor *x, double rtol, double atol,
                       const char *const *inits, const tg_onnx_options *o)
{
    char path[256], file[128];
    tg_tensor *y = forward(m, x);
    snprintf(file, sizeof file, "%s.onnx", name);
    int rc = tg_onnx_export(m, x, th_tmp_path(path, sizeof path, file), o);
    cr_assert(rc == TG_OK, "%s: %s", name, tg_error_message());
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
    fprintf(f, "}\n");
    fclose(f);
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
} conv_case;

static const conv_case conv_cases[] = {
    {"conv1d_s2_d2_asym_g2", false, 1, 4, 6, 2, {3}, {2}, {2}, {1}, {2}, {0}, {11},
     TG_ACT_NONE, true},
    {"conv1d_depthwise_relu", false, 1, 3, 3, 3, {5}, {1}, {1}, {2}, {2}, {0}, {9},
     TG_ACT_RELU, false},
    {"convT1d_s2_asym_op1_g2", true, 1, 4, 6, 2, {3}, {2}, {1}, {1}, {0}, {1}, {7},
     TG_ACT_NONE, true},
    {"convT1d_s3_d2_op2_leaky", true, 1, 3, 2, 1, {4}, {3}, {2}, {2}, {1}, {2}, {5},
     TG_ACT_LEAKY_RELU, true},
    {"conv2d_s21_d12_asym_g3_relu", false, 2, 3, 6, 3, {3, 2}, {2, 1}, {1, 2}, {1, 0}, {0, 2},
     {0, 0}, {8, 7}, TG_ACT_RELU, true},
    {"convT2d_dcgan", true, 2, 6, 3, 1, {4, 4}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, {0, 0}, {5, 5},
     TG_ACT_TANH, true},
    {"convT2d_s23_d21_asym_op12_g2_gelu", true, 2, 4, 6, 2, {3, 2}, {2, 3}, {2, 1}, {0, 1},
     {2, 1}, {1, 2}, {4, 5}, TG_ACT_GELU, true},
    {"convT2d_g4_nobias_sigmoid", true, 2, 8, 4, 4, {2, 3}, {1, 2}, {1, 1}, {0, 1}, {0, 1},
     {0, 1}, {3, 4}, TG_ACT_SIGMOID, false},
    {"conv3d_s121_asym_g2_silu", false, 3, 4, 4, 2, {2, 3, 2}, {1, 2, 1}, {1, 1, 2}, {1, 0, 1},
     {0, 2, 0}, {0, 0, 0}, {4, 6, 5}, TG_ACT_SILU, true},
    {"convT3d_s212_d121_asym_op101_g2", true, 3, 4, 6, 2, {3, 2, 2}, {2, 1, 2}, {1, 2, 1},
     {1, 0, 1}, {0, 1, 1}, {1, 0, 1}, {3, 4, 3}, TG_ACT_NONE, true},
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
