/* tests/onnx_cases.c - the cases of the ONNX export tests (onnx_cases.h):
 * each writes <name>.onnx, its input, tapegrad's output and <name>.json into
 * the test's temporary folder, and check_cases runs onnx's checker and
 * ONNX Runtime over the folder. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dcgan/model.h"
#include "helpers.h"
#include "onnx_cases.h"
#include "tapegrad/tapegrad.h"

void onnx_setup(void)
{
    th_tmp_dir_make("tg_onnx_");
}

void need_onnx(void)
{
    if (!tg_onnx_available()) cr_skip_test("the library was built without ONNX support");
}

tg_tensor *forward(tg_module *m, tg_tensor *x)
{
    tg_tensor *y = NULL;
    tg_module_train(m, false);
    tg_no_grad_begin();
    int rc = tg_module_forward(m, &y, x);
    tg_no_grad_end();
    cr_assert(rc == TG_OK, "forward: %s", tg_error_message());
    return y;
}

void write_f32(const char *name, const char *ext, const tg_tensor *t)
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

const char *case_level;
const char *case_types;
const char *case_graph;
static char case_extra[1024];

void case_extra_outputs(const char *name, int n, tg_tensor *const *ys, const char *const *names)
{
    char ext[32];
    case_extra[0] = 0;
    jcat(case_extra, sizeof case_extra, "\"extra_outputs\": [");
    for (int i = 0; i < n; i++) {
        snprintf(ext, sizeof ext, ".out%d.f32", i + 1);
        write_f32(name, ext, ys[i]);
        jcat(case_extra, sizeof case_extra, "%s{\"name\": \"%s\", \"file\": \"%s%s\", "
             "\"shape\": [", i ? ", " : "", names[i], name, ext);
        for (int d = 0; d < tg_tensor_ndim(ys[i]); d++)
            jcat(case_extra, sizeof case_extra, "%s%lld", d ? ", " : "",
                 (long long)tg_tensor_dim(ys[i], d));
        jcat(case_extra, sizeof case_extra, "]}");
    }
    jcat(case_extra, sizeof case_extra, "]");
}

/* The files of case `name` but its .onnx: the input x, tapegrad's output y
 * and <name>.json; inits (NULL-terminated, or NULL to skip the check) are
 * the initializer names the file must hold. */
void write_expected(const char *name, const tg_tensor *x, const tg_tensor *y, double rtol,
                    double atol, const char *const *inits)
{
    char path[256], file[128];
    const tg_dtype xdt = tg_tensor_dtype(x);
    if (xdt == TG_I64 || xdt == TG_I32) {   /* indices: raw little-endian integers */
        tg_tensor *c = NULL;
        cr_assert(tg_tensor_contiguous(&c, (tg_tensor *)x) == TG_OK);
        snprintf(file, sizeof file, "%s.in.%s", name, xdt == TG_I64 ? "i64" : "i32");
        th_write_bytes(th_tmp_path(path, sizeof path, file), tg_tensor_cdata(c),
                       (size_t)tg_tensor_numel(c) * (xdt == TG_I64 ? 8 : 4));
        tg_tensor_release(c);
    } else {
        write_f32(name, ".in.f32", x);
    }
    write_f32(name, ".out.f32", y);
    snprintf(file, sizeof file, "%s.json", name);
    FILE *f = fopen(th_tmp_path(path, sizeof path, file), "w");
    cr_assert(f != NULL);
    fprintf(f, "{");
    json_shape(f, "input_shape", x);
    fprintf(f, ", ");
    json_shape(f, "output_shape", y);
    fprintf(f, ", \"rtol\": %.17g, \"atol\": %.17g", rtol, atol);
    if (xdt == TG_I64 || xdt == TG_I32)
        fprintf(f, ", \"input_type\": \"%s\"", xdt == TG_I64 ? "int64" : "int32");
    if (inits) {
        fprintf(f, ", \"initializers\": [");
        for (int i = 0; inits[i]; i++) fprintf(f, "%s\"%s\"", i ? ", " : "", inits[i]);
        fprintf(f, "]");
    }
    if (case_level) fprintf(f, ", \"level\": \"%s\"", case_level);
    if (case_types) fprintf(f, ", \"initializer_types\": {%s}", case_types);
    if (case_graph) fprintf(f, ", %s", case_graph);
    if (case_extra[0]) fprintf(f, ", %s", case_extra);
    case_level = case_types = case_graph = NULL;
    case_extra[0] = 0;
    fprintf(f, "}\n");
    fclose(f);
}

void write_case(const char *name, tg_module *m, tg_tensor *x, double rtol, double atol,
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

/* The raw values of t (f32 as f32, u8, i64, i32 as they are) in file. */
static void write_raw(const char *file, const tg_tensor *t)
{
    char path[256];
    if (tg_tensor_dtype(t) == TG_F32) {
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)(strlen(file) - 4), file);
        write_f32(name, ".f32", t);
        return;
    }
    tg_tensor *c = NULL;
    cr_assert(tg_tensor_contiguous(&c, (tg_tensor *)t) == TG_OK);
    th_write_bytes(th_tmp_path(path, sizeof path, file), tg_tensor_cdata(c),
                   (size_t)tg_tensor_numel(c) * tg_dtype_size(tg_tensor_dtype(c)));
    tg_tensor_release(c);
}

void write_expected_n(const char *name, int n, tg_tensor *const *xs, const char *const *names,
                      const tg_tensor *y, double rtol, double atol, const char *const *inits)
{
    char path[256], file[128];
    write_f32(name, ".out.f32", y);
    snprintf(file, sizeof file, "%s.json", name);
    FILE *f = fopen(th_tmp_path(path, sizeof path, file), "w");
    cr_assert(f != NULL);
    fprintf(f, "{\"inputs\": [");
    for (int i = 0, k = 0; i < n; i++) {
        if (!xs[i]) continue;   /* an optional input left out: no graph input */
        const tg_dtype dt = tg_tensor_dtype(xs[i]);
        const char *type = dt == TG_F32 ? "float32" : dt == TG_U8 ? "uint8"
                         : dt == TG_I64 ? "int64" : "int32";
        snprintf(file, sizeof file, "%s.in%d.%s", name, i, dt == TG_F32 ? "f32" : type);
        write_raw(file, xs[i]);
        char dflt[24];
        snprintf(dflt, sizeof dflt, "input_%d", i);
        fprintf(f, "%s{\"name\": \"%s\", \"type\": \"%s\", \"file\": \"%s\", ",
                k++ ? ", " : "", names ? names[i] : dflt, type, file);
        json_shape(f, "shape", xs[i]);
        fprintf(f, "}");
    }
    fprintf(f, "], ");
    json_shape(f, "output_shape", y);
    fprintf(f, ", \"rtol\": %.17g, \"atol\": %.17g", rtol, atol);
    if (inits) {
        fprintf(f, ", \"initializers\": [");
        for (int i = 0; inits[i]; i++) fprintf(f, "%s\"%s\"", i ? ", " : "", inits[i]);
        fprintf(f, "]");
    }
    if (case_graph) fprintf(f, ", %s", case_graph);
    if (case_extra[0]) fprintf(f, ", %s", case_extra);
    case_level = case_types = case_graph = NULL;
    case_extra[0] = 0;
    fprintf(f, "}\n");
    fclose(f);
}

tg_tensor *forward_n(tg_module *m, int n, tg_tensor *const *xs)
{
    tg_tensor *y = NULL;
    tg_module_train(m, false);
    tg_no_grad_begin();
    int rc = tg_module_forward_n(m, &y, n, xs);
    tg_no_grad_end();
    cr_assert(rc == TG_OK, "forward_n: %s", tg_error_message());
    return y;
}

void write_case_n(const char *name, tg_module *m, int n, tg_tensor *const *xs,
                  const char *const *names, double rtol, double atol, const char *const *inits,
                  const tg_onnx_options *o)
{
    char path[256], file[128];
    tg_tensor *y = forward_n(m, n, xs);
    snprintf(file, sizeof file, "%s.onnx", name);
    int rc = tg_onnx_export_n(m, n, xs, names, th_tmp_path(path, sizeof path, file), o);
    cr_assert(rc == TG_OK, "%s: %s", name, tg_error_message());
    write_expected_n(name, n, xs, names, y, rtol, atol, inits);
    tg_tensor_release(y);
}

void check_cases(void)
{
    int rc = th_run("TG_PYTHON", (const char *const[]){TG_SOURCE_ROOT "/tests/onnx/check.py",
                                                       ".", NULL});
    cr_log_info("check.py:\n%s%s", th_out, th_err);
    cr_assert(rc == 0, "onnx checker:\n%s%s", th_out, th_err);
    rc = th_run("TG_NODE", (const char *const[]){TG_SOURCE_ROOT "/tests/onnx/run.mjs", ".", NULL});
    cr_log_info("run.mjs:\n%s%s", th_out, th_err);
    cr_assert(rc == 0, "onnxruntime:\n%s%s", th_out, th_err);
}

const conv_case conv_cases[] = {
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
    {"conv2d_s2_g2_gelu_tanh", false, 2, 4, 6, 2, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1},
     {0, 0}, {7, 6}, TG_ACT_GELU_TANH, true, TG_PAD_CONSTANT},
    {"convT2d_g4_nobias_sigmoid", true, 2, 8, 4, 4, {2, 3}, {1, 2}, {1, 1}, {0, 1}, {0, 1},
     {0, 1}, {3, 4}, TG_ACT_SIGMOID, false, TG_PAD_CONSTANT},
    {"conv3d_s121_asym_g2_silu", false, 3, 4, 4, 2, {2, 3, 2}, {1, 2, 1}, {1, 1, 2}, {1, 0, 1},
     {0, 2, 0}, {0, 0, 0}, {4, 6, 5}, TG_ACT_SILU, true, TG_PAD_CONSTANT},
    {"convT3d_s212_d121_asym_op101_g2", true, 3, 4, 6, 2, {3, 2, 2}, {2, 1, 2}, {1, 2, 1},
     {1, 0, 1}, {0, 1, 1}, {1, 0, 1}, {3, 4, 3}, TG_ACT_NONE, true, TG_PAD_CONSTANT},
};
const size_t n_conv_cases = sizeof conv_cases / sizeof *conv_cases;

tg_module *conv_module(const conv_case *c, tg_rng *rng)
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

tg_tensor *conv_input(const conv_case *c, int64_t batch, uint64_t seed)
{
    int64_t shape[5] = {batch, c->c_in};
    for (int i = 0; i < c->ns; i++) shape[2 + i] = c->in[i];
    return th_rand_uniform(TG_F32, 2 + c->ns, shape, seed);
}

void append(tg_module *seq, tg_module *m)
{
    cr_assert(m != NULL && tg_nn_sequential_append(seq, m) == TG_OK, "%s", tg_error_message());
}

tg_module *act(tg_activation a, double slope)
{
    tg_module *m = NULL;
    cr_assert(tg_nn_activation_new(&m, a, slope) == TG_OK);
    return m;
}

/* The generator of examples/dcgan/model.h (nz 16, C 8) after a few
 * training-mode forwards, so its running statistics are not (0, 1). */
tg_module *dcgan_generator(void)
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

void jcat(char *buf, size_t size, const char *fmt, ...)
{
    const size_t n = strlen(buf);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + n, size - n, fmt, ap);
    va_end(ap);
    cr_assert(strlen(buf) + 1 < size, "the JSON fragment outgrew its buffer");
}

/* The graph output's dims as <name>.onnx declares them (onnx_cases.h). */
char *onnx_output_dims(const char *name)
{
    char file[128];
    snprintf(file, sizeof file, "%s.onnx", name);
    static const char *const code =
        "import sys, onnx\n"
        "d = onnx.load(sys.argv[1]).graph.output[0].type.tensor_type.shape.dim\n"
        "print(','.join(x.dim_param or str(x.dim_value) for x in d))\n";
    int rc = th_run("TG_PYTHON", (const char *const[]){"-c", code, file, NULL});
    cr_assert(rc == 0, "reading %s's output: %s%s", file, th_out, th_err);
    th_out[strcspn(th_out, "\n")] = 0;
    return strdup(th_out);
}

/* A module of two inputs with a dynamic batch (onnx_cases.h). */
void dynamic_case2(const char *name, tg_module *m, tg_tensor *const *xs, tg_tensor *const *xr,
                   const char *out_dims)
{
    tg_onnx_options o = TG_ONNX_OPTIONS_INIT;
    o.dynamic_batch = true;
    write_case_n(name, m, 2, xs, NULL, 1e-5, 1e-6, NULL, &o);
    char *dims = onnx_output_dims(name);
    cr_assert(strcmp(dims, out_dims) == 0, "%s: output dims %s, not %s", name, dims, out_dims);
    free(dims);
    tg_tensor *y = forward_n(m, 2, xr);
    write_expected_n(name, 2, xr, NULL, y, 1e-5, 1e-6, NULL);
    tg_tensor_release(y);
}

/* An export refused with rc and want, the file at its path kept
 * (onnx_cases.h). */
void refused_export_n(tg_module *m, int n, tg_tensor *const *xs, const char *const *names, int rc,
                      const char *want)
{
    char path[256];
    th_tmp_path(path, sizeof path, "kept.onnx");
    th_write_bytes(path, "kept", 4);
    cr_assert(eq(int, tg_onnx_export_n(m, n, xs, names, path, NULL), rc), "%s: %s", want,
              tg_error_message());
    th_expect_in(tg_error_message(), want);
    size_t len = 0;
    char *got = th_read_file(path, &len);
    cr_assert(len == 4 && strncmp(got, "kept", 4) == 0, "a refused export changed %s", path);
    free(got);
}
