/* tests/test_onnx_conv.c - tg_onnx_export of Conv and ConvTranspose,
 * checked by onnx's checker and ONNX Runtime (within 1e-5): a sweep over
 * ranks, strides, dilations, asymmetric padding, output padding, groups and
 * fused activations, and the reflect, replicate and circular padding modes
 * written as torch.onnx.export writes them; spectral-normed layers, whose
 * exported weight is their eval-mode weight_orig / sigma, and
 * weight-normed ones, whose exported weight is v * g / ||v||; the padding
 * modules (Pad, or Slice + Concat for circular, a cropping Slice first
 * for a negative circular padding) and the channel dropouts (nothing).
 * Each case writes its files into the test's temporary folder and
 * check_cases runs onnx's checker and ONNX Runtime over it (onnx_cases.h). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "helpers.h"
#include "onnx_cases.h"
#include "tapegrad/tapegrad.h"

TestSuite(onnx_conv, .init = onnx_setup, .fini = th_tmp_dir_remove);

/* ---- the conv / convT sweep ---- */

Test(onnx_conv, conv_and_conv_transpose_sweep_matches_onnxruntime)
{
    need_onnx();
    tg_rng rng;
    tg_rng_init(&rng, 31);
    for (size_t i = 0; i < n_conv_cases; i++) {
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
        /* gelu adds its constants (sqrt 2, 1, 1/2; gelu_tanh beta, kappa,
         * 1, 1/2) as initializers */
        const bool consts = c->act == TG_ACT_GELU || c->act == TG_ACT_GELU_TANH;
        const char *const *inits = consts ? NULL : i % 2 ? inits_seq : inits_top;
        write_case(c->name, m, x, 1e-5, 0, inits, NULL);
        tg_module_release(m);
        tg_tensor_release(x);
    }
    check_cases();
}

/* ---- a Conv's padding_mode ---- */

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

Test(onnx_conv, conv_padding_modes_match_onnxruntime)
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


/* ---- spectral norm ---- */

/* Fails unless layer's "weight" (what the export wrote) is weight_orig /
 * sigma with sigma = u . (W v), W weight_orig read as (h, w) (dim 0). */
static void expect_sn_weight(const tg_module *seq, const char *layer)
{
    char k[32];
    snprintf(k, sizeof k, "%s.weight_orig", layer);
    const tg_tensor *wo = tg_module_find(seq, k);
    snprintf(k, sizeof k, "%s.weight_u", layer);
    const tg_tensor *u = tg_module_find(seq, k);
    snprintf(k, sizeof k, "%s.weight_v", layer);
    const tg_tensor *v = tg_module_find(seq, k);
    snprintf(k, sizeof k, "%s.weight", layer);
    const tg_tensor *w = tg_module_find(seq, k);
    const int64_t h = tg_tensor_numel(u), n = tg_tensor_numel(v);
    double sigma = 0, a, b;
    for (int64_t i = 0; i < h; i++) {
        double wv = 0;
        for (int64_t j = 0; j < n; j++) {
            tg_tensor_get_flat(wo, i * n + j, &a);
            tg_tensor_get_flat(v, j, &b);
            wv += a * b;
        }
        tg_tensor_get_flat(u, i, &a);
        sigma += a * wv;
    }
    for (int64_t i = 0; i < h * n; i++) {
        tg_tensor_get_flat(wo, i, &a);
        tg_tensor_get_flat(w, i, &b);
        cr_assert(th_close(b, a / sigma, 1e-5, 1e-7), "%s[%lld]: %g, want %g", k, (long long)i,
                  b, a / sigma);
    }
}

/* A discriminator of spectral-normed Conv2d and Linear layers, trained a
 * little (u and v move) and changed after its last forward: the export
 * holds each layer's eval-mode weight_orig / sigma under "<layer>.weight",
 * and none of weight_orig, weight_u, weight_v. */
Test(onnx_conv, spectral_norm_exports_the_eval_mode_weight)
{
    need_onnx();
    tg_rng rng;
    tg_rng_init(&rng, 41);
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    p.stride[0] = p.stride[1] = 2;
    tg_module *seq = NULL, *conv = NULL, *lin = NULL, *flat = NULL;
    cr_assert(tg_nn_sequential_new(&seq) == TG_OK);
    cr_assert(tg_nn_conv_new(&conv, 2, 3, 4, (const int64_t[]){4, 4}, &p, true, &rng) == TG_OK);
    cr_assert(tg_nn_spectral_norm(conv, "weight", 1, 1e-12, -1, &rng) == TG_OK);
    cr_assert(tg_nn_flatten_new(&flat, 1, -1) == TG_OK);
    cr_assert(tg_nn_linear_new(&lin, 4 * 3 * 3, 1, true, &rng) == TG_OK);
    cr_assert(tg_nn_spectral_norm(lin, "weight", 1, 1e-12, -1, &rng) == TG_OK);
    append(seq, conv);
    append(seq, act(TG_ACT_LEAKY_RELU, 0.2));
    append(seq, flat);
    append(seq, lin);
    tg_tensor *x = th_rand_uniform(TG_F32, 4, (const int64_t[]){2, 3, 8, 8}, 12);
    for (int i = 0; i < 3; i++) {
        tg_tensor *y = NULL;
        cr_assert(tg_module_forward(seq, &y, x) == TG_OK);
        tg_tensor_release(y);
    }
    cr_assert(tg_tensor_rand_normal(tg_module_find(seq, "0.weight_orig"), &rng, 0, 0.5) == TG_OK);
    write_case("sn_discriminator", seq, x, 1e-5, 1e-6,
               (const char *const[]){"0.weight", "0.bias", "3.weight", "3.bias", "/2/shape",
                                     NULL}, NULL);
    expect_sn_weight(seq, "0");
    expect_sn_weight(seq, "3");
    check_cases();
    tg_module_release(seq);
    tg_tensor_release(x);
}

/* ---- weight norm ---- */

/* Fails unless layer's "weight" (what the export wrote) is
 * weight_v * (weight_g / ||weight_v||) at the layer's dim. */
static void expect_wn_weight(const tg_module *seq, const char *layer, int dim)
{
    char k[32];
    snprintf(k, sizeof k, "%s.weight_g", layer);
    tg_tensor *g = tg_module_find(seq, k), *want = NULL;
    snprintf(k, sizeof k, "%s.weight_v", layer);
    tg_tensor *v = tg_module_find(seq, k);
    snprintf(k, sizeof k, "%s.weight", layer);
    cr_assert(tg_weight_norm(&want, v, g, dim) == TG_OK);
    th_expect_close_scaled(k, tg_module_find(seq, k), want, 1e-6);
    tg_tensor_release(want);
}

/* A HiFi-GAN-like upsampling block: a weight-normed ConvTranspose1d (dim
 * 0), LeakyReLU and a weight-normed Conv1d (dim None), whose g is changed
 * after the last forward: the export holds each layer's computed weight
 * under "<layer>.weight", and none of weight_g, weight_v. */
Test(onnx_conv, weight_norm_exports_the_computed_weight)
{
    need_onnx();
    tg_rng rng;
    tg_rng_init(&rng, 43);
    tg_conv_params p = TG_CONV_PARAMS_INIT, q = TG_CONV_PARAMS_INIT;
    p.stride[0] = 2;
    p.padding[0][0] = p.padding[0][1] = 1;
    q.padding[0][0] = q.padding[0][1] = 1;
    tg_module *seq = NULL, *up = NULL, *conv = NULL;
    cr_assert(tg_nn_sequential_new(&seq) == TG_OK);
    cr_assert(tg_nn_conv_transpose_new(&up, 1, 4, 3, (const int64_t[]){4}, &p, true, &rng) ==
              TG_OK);
    cr_assert(tg_nn_weight_norm(up, "weight", 0) == TG_OK);
    cr_assert(tg_nn_conv_new(&conv, 1, 3, 2, (const int64_t[]){3}, &q, true, &rng) == TG_OK);
    cr_assert(tg_nn_weight_norm(conv, "weight", TG_NN_WEIGHT_NORM_NONE) == TG_OK);
    append(seq, up);
    append(seq, act(TG_ACT_LEAKY_RELU, 0.1));
    append(seq, conv);
    tg_tensor *x = th_rand_uniform(TG_F32, 3, (const int64_t[]){2, 4, 6}, 13), *y = NULL;
    cr_assert(tg_module_forward(seq, &y, x) == TG_OK);
    tg_tensor_release(y);
    cr_assert(tg_tensor_rand_normal(tg_module_find(seq, "0.weight_g"), &rng, 1, 0.5) == TG_OK);
    cr_assert(tg_tensor_fill(tg_module_find(seq, "2.weight_g"), 0.75) == TG_OK);
    write_case("wn_upsampler", seq, x, 1e-5, 1e-6,
               (const char *const[]){"0.weight", "0.bias", "2.weight", "2.bias", NULL}, NULL);
    expect_wn_weight(seq, "0", 0);
    expect_wn_weight(seq, "2", TG_NN_WEIGHT_NORM_NONE);
    check_cases();
    tg_module_release(seq);
    tg_tensor_release(x);
}

/* ---- the padding modules and the channel dropouts ---- */

/* A padding module (zero2d: ZeroPad2d) on an input of shape in[0..nd),
 * and the ops its export holds (NULL: one Pad). */
typedef struct pad_module_case {
    const char *name;
    tg_pad_mode mode;
    int ns;
    int64_t pads[6];
    double value;
    bool zero2d;
    int nd;
    int64_t in[5];
    const char *ops;
} pad_module_case;

/* Batched and unbatched inputs, more leading dims in constant mode, and
 * negative paddings (the Pad node's negative pads remove elements). */
static const pad_module_case pad_module_cases[] = {
    {"zeropad2d", TG_PAD_CONSTANT, 2, {1, 2, 0, 3}, 0, true, 4, {2, 3, 4, 5}, NULL},
    {"constantpad1d_crop", TG_PAD_CONSTANT, 1, {2, -1}, 1.5, false, 3, {2, 3, 5}, NULL},
    {"constantpad2d_2d_input", TG_PAD_CONSTANT, 2, {1, 1, 1, 1}, 0.25, false, 2, {3, 4}, NULL},
    {"constantpad3d", TG_PAD_CONSTANT, 3, {1, 0, 2, 1, 0, 2}, -0.5, false, 5, {1, 2, 3, 4, 5},
     NULL},
    {"reflectionpad1d", TG_PAD_REFLECT, 1, {2, 3}, 0, false, 3, {2, 3, 5}, NULL},
    {"reflectionpad2d_unbatched", TG_PAD_REFLECT, 2, {1, 2, 3, 0}, 0, false, 3, {3, 4, 5}, NULL},
    {"reflectionpad2d_crop", TG_PAD_REFLECT, 2, {-1, 2, 1, -1}, 0, false, 4, {2, 2, 4, 5}, NULL},
    {"reflectionpad3d", TG_PAD_REFLECT, 3, {1, 1, 0, 1, 2, 1}, 0, false, 5, {1, 2, 3, 4, 5}, NULL},
    {"replicationpad1d_unbatched", TG_PAD_REPLICATE, 1, {3, 1}, 0, false, 2, {3, 4}, NULL},
    {"replicationpad1d_crop", TG_PAD_REPLICATE, 1, {-2, 3}, 0, false, 3, {2, 3, 5}, NULL},
    {"replicationpad2d", TG_PAD_REPLICATE, 2, {2, 0, 1, 3}, 0, false, 4, {2, 2, 3, 4}, NULL},
    {"replicationpad3d", TG_PAD_REPLICATE, 3, {1, 2, 0, 1, 1, 0}, 0, false, 5, {1, 2, 3, 3, 4},
     NULL},
    /* per spatial axis, the first first: H (2, 0), then W (1, 2) */
    {"circularpad2d", TG_PAD_CIRCULAR, 2, {1, 2, 2, 0}, 0, false, 4, {2, 2, 3, 4},
     "\"Slice\", \"Concat\", \"Slice\", \"Slice\", \"Concat\""},
    /* a negative padding crops (Slice) before wrapping around what is left */
    {"circularpad1d_crop", TG_PAD_CIRCULAR, 1, {2, -1}, 0, false, 3, {2, 3, 5},
     "\"Slice\", \"Slice\", \"Concat\""},
    /* H (1, -2): crop, tail; W (-1, 2): crop, head */
    {"circularpad2d_crop", TG_PAD_CIRCULAR, 2, {-1, 2, 1, -2}, 0, false, 4, {2, 2, 5, 6},
     "\"Slice\", \"Slice\", \"Concat\", \"Slice\", \"Slice\", \"Concat\""},
    /* unbatched; D (2, -1): crop, tail; W (-1, -1): the crop alone */
    {"circularpad3d_crop_unbatched", TG_PAD_CIRCULAR, 3, {-1, -1, 0, 0, 2, -1}, 0, false, 4,
     {2, 4, 3, 5}, "\"Slice\", \"Slice\", \"Concat\", \"Slice\""},
};

/* What check.py checks of a one-Pad case: the node, its mode, the pads
 * over every dim (the dims before the padded ones 0, ONNX's order: every
 * beginning, then every end) and the constant. */
static void pad_module_graph(char *buf, size_t size, const pad_module_case *c)
{
    static const char *const modes[] = {"constant", "reflect", "edge"};
    buf[0] = '\0';
    if (c->ops) {
        jcat(buf, size, "\"ops\": [%s]", c->ops);
        return;
    }
    jcat(buf, size, "\"ops\": [\"Pad\"], \"attributes\": {\"Pad\": {\"mode\": \"%s\"}}, "
         "\"initializer_values\": {\"/pads\": [", modes[c->mode]);
    for (int e = 0; e < 2 * c->nd; e++) {
        const int d = e % c->nd, k = c->nd - 1 - d;   /* torch's pair k pads dim nd-1-k */
        const long long v = k < c->ns ? (long long)c->pads[2 * k + (e >= c->nd)] : 0;
        jcat(buf, size, "%s%lld", e ? ", " : "", v);
    }
    jcat(buf, size, "]");
    if (c->mode == TG_PAD_CONSTANT) jcat(buf, size, ", \"/value\": [%g]", c->value);
    jcat(buf, size, "}");
}

Test(onnx_conv, padding_modules_match_onnxruntime)
{
    need_onnx();
    for (size_t i = 0; i < sizeof pad_module_cases / sizeof *pad_module_cases; i++) {
        const pad_module_case *c = &pad_module_cases[i];
        tg_module *m = NULL;
        int rc = c->zero2d ? tg_nn_zero_pad2d_new(&m, c->pads)
                           : tg_nn_pad_new(&m, c->mode, c->ns, c->pads, c->value);
        cr_assert(rc == TG_OK, "%s: %s", c->name, tg_error_message());
        tg_tensor *x = th_rand_uniform(TG_F32, c->nd, c->in, 600 + i);
        char graph[1024];
        pad_module_graph(graph, sizeof graph, c);
        case_graph = graph;
        tg_onnx_options o = TG_ONNX_OPTIONS_INIT;
        o.dynamic_batch = c->nd == c->ns + 2;
        write_case(c->name, m, x, 0, 0, NULL, &o);
        tg_module_release(m);
        tg_tensor_release(x);
    }
    /* ReflectionPad2d(1), Dropout2d, Conv2d, ReplicationPad2d, Dropout3d:
     * the dropouts write nothing, the pads one Pad each; exported on 2
     * samples, run on 3 */
    tg_rng rng;
    tg_rng_init(&rng, 17);
    tg_module *seq = NULL, *m = NULL;
    cr_assert(tg_nn_sequential_new(&seq) == TG_OK);
    cr_assert(tg_nn_pad_new_int(&m, TG_PAD_REFLECT, 2, 1, 0) == TG_OK);
    append(seq, m);
    cr_assert(tg_nn_dropout_channels_new(&m, 2, 0.5, 3) == TG_OK);
    append(seq, m);
    cr_assert(tg_nn_conv_new(&m, 2, 3, 4, (const int64_t[]){3, 3}, NULL, true, &rng) == TG_OK);
    append(seq, m);
    cr_assert(tg_nn_pad_new(&m, TG_PAD_REPLICATE, 2, (const int64_t[]){0, 1, 2, 0}, 0) == TG_OK);
    append(seq, m);
    cr_assert(tg_nn_dropout_channels_new(&m, 3, 0.5, 4) == TG_OK);
    append(seq, m);
    tg_onnx_options o = TG_ONNX_OPTIONS_INIT;
    o.dynamic_batch = true;
    tg_tensor *x = th_rand_uniform(TG_F32, 4, (const int64_t[]){2, 3, 5, 4}, 7);
    tg_tensor *xr = th_rand_uniform(TG_F32, 4, (const int64_t[]){3, 3, 5, 4}, 8);
    tg_tensor *y = forward(seq, xr);
    char path[256];
    cr_assert(tg_onnx_export(seq, x, th_tmp_path(path, sizeof path, "pad_conv.onnx"), &o) ==
                  TG_OK, "%s", tg_error_message());
    case_graph = "\"ops\": [\"Pad\", \"Conv\", \"Pad\"], \"initializer_values\": {"
                 "\"/0/pads\": [0, 0, 1, 1, 0, 0, 1, 1], \"/3/pads\": [0, 0, 2, 0, 0, 0, 0, 1]}";
    write_expected("pad_conv", xr, y, 1e-5, 0,
                   (const char *const[]){"/0/pads", "2.bias", "2.weight", "/3/pads", NULL});
    check_cases();
    th_release_all(3, (tg_tensor *[]){x, xr, y});
    tg_module_release(seq);
}
