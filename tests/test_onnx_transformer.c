/* tests/test_onnx_transformer.c - tg_onnx_export of nn.TransformerEncoderLayer
 * (its self-attention written out as MatMul, Split, Reshape, Transpose, Div,
 * MatMul, Softmax, MatMul, out_proj; the residual Adds, LayerNormalization,
 * the feed-forward Linears and activation), checked by onnx's checker and
 * by ONNX Runtime against tapegrad's eval forward: post-norm and
 * norm_first, relu and gelu, batch_first or not, unbatched, 1 and 4 heads,
 * a dynamic batch (and a free sequence length), and inside a Sequential
 * between Linears.  A MultiheadAttention on its own (three inputs) is
 * refused and writes nothing. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "onnx_cases.h"
#include "tapegrad/tapegrad.h"

TestSuite(onnx_transformer, .init = onnx_setup, .fini = th_tmp_dir_remove);

/* ORT's f32 sums in other orders than tapegrad's: a few ulps of the
 * LayerNorm-scaled outputs, far below what a wrong node gives. */
#define RTOL 1e-5
#define ATOL 1e-5

/* Every parameter of m drawn uniformly from [-0.5, 0.5] (0.5 + that for the
 * norms' weights), so no bias is 0 and no norm the identity: a bias added
 * to the wrong part shows. */
static void randomize(tg_module *m, uint64_t seed)
{
    tg_rng rng;
    tg_rng_init(&rng, seed);
    char **names = NULL;
    tg_tensor **ps = NULL;
    int n = 0;
    cr_assert(tg_module_named_parameters(m, &names, &ps, &n) == TG_OK, "%s", tg_error_message());
    tg_no_grad_begin();
    for (int i = 0; i < n; i++) {
        const bool norm_w = strstr(names[i], "norm") && strstr(names[i], "weight");
        cr_assert(tg_init_uniform_(ps[i], norm_w ? 0.5 : -0.5, norm_w ? 1.5 : 0.5, &rng) == TG_OK);
    }
    tg_no_grad_end();
    free(names);
    free(ps);
}

/* A TransformerEncoderLayer(d_model, nhead, dim_feedforward 12), dropout
 * 0.1 (the identity in eval), its parameters random. */
static tg_module *layer(int64_t d, int64_t nhead, bool norm_first, tg_activation act,
                        bool batch_first, uint64_t seed)
{
    tg_nn_transformer_encoder_layer_opts o = TG_NN_TRANSFORMER_ENCODER_LAYER_OPTS_INIT;
    o.dim_feedforward = 12;
    o.activation = act;
    o.norm_first = norm_first;
    o.batch_first = batch_first;
    o.seed = seed;
    tg_rng rng;
    tg_rng_init(&rng, seed);
    tg_module *m = NULL;
    cr_assert(tg_nn_transformer_encoder_layer_new(&m, d, nhead, &o, &rng) == TG_OK, "%s",
              tg_error_message());
    randomize(m, seed + 100);
    return m;
}

/* The initializers of a layer at the top level: its state dict and the
 * attention's shapes and scale, then extra (NULL-terminated). */
static const char *const POST_RELU_INITS[] = {
    "self_attn.in_proj_weight", "self_attn.in_proj_bias", "self_attn.out_proj.weight",
    "self_attn.out_proj.bias", "linear1.weight", "linear1.bias", "linear2.weight",
    "linear2.bias", "norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias",
    "/self_attn/qkv_split", "/self_attn/head_shape", "/self_attn/merged_shape",
    "/self_attn/scale", NULL};

Test(onnx_transformer, post_norm_relu_seq_first_nodes_and_values)
{
    need_onnx();
    /* (S, N, E) = (5, 2, 8), 2 heads of 4: the scale is sqrt(4) = 2 */
    tg_module *m = layer(8, 2, false, TG_ACT_RELU, false, 1);
    tg_tensor *x = th_rand_uniform(TG_F32, 3, (const int64_t[]){5, 2, 8}, 11);
    case_graph =
        "\"ops\": [\"Transpose\", \"MatMul\", \"Add\", \"Split\", \"Reshape\", \"Transpose\", "
        "\"Reshape\", \"Transpose\", \"Reshape\", \"Transpose\", \"Div\", \"MatMul\", "
        "\"Softmax\", \"MatMul\", \"Transpose\", \"Reshape\", \"Transpose\", \"MatMul\", "
        "\"Add\", \"Add\", \"LayerNormalization\", \"Transpose\", \"MatMul\", \"Add\", "
        "\"Relu\", \"Transpose\", \"MatMul\", \"Add\", \"Add\", \"LayerNormalization\"], "
        "\"initializer_values\": {\"/self_attn/scale\": [2.0], "
        "\"/self_attn/qkv_split\": [8, 8, 8], \"/self_attn/head_shape\": [0, -1, 4], "
        "\"/self_attn/merged_shape\": [0, -1, 8]}, "
        "\"attributes\": {\"Softmax\": {\"axis\": -1}, \"Split\": {\"axis\": -1}, "
        "\"LayerNormalization\": {\"axis\": -1}}";
    write_case("post_relu", m, x, RTOL, ATOL, POST_RELU_INITS, NULL);
    check_cases();
    tg_module_release(m);
    tg_tensor_release(x);
}

Test(onnx_transformer, every_order_activation_layout_and_heads)
{
    need_onnx();
    static const struct {
        const char *name;
        bool norm_first, batch_first;
        tg_activation act;
        int64_t nhead;
    } cases[] = {
        {"post_relu_bf_h4", false, true, TG_ACT_RELU, 4},
        {"post_gelu_sf_h1", false, false, TG_ACT_GELU, 1},
        {"post_gelu_bf_h4", false, true, TG_ACT_GELU, 4},
        {"pre_relu_sf_h1", true, false, TG_ACT_RELU, 1},
        {"pre_relu_bf_h4", true, true, TG_ACT_RELU, 4},
        {"pre_gelu_sf_h4", true, false, TG_ACT_GELU, 4},
        {"pre_gelu_bf_h1", true, true, TG_ACT_GELU, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        tg_module *m = layer(8, cases[i].nhead, cases[i].norm_first, cases[i].act,
                             cases[i].batch_first, 20 + i);
        /* batch 3, sequence 4: the two dims are told apart */
        const int64_t shape[3] = {cases[i].batch_first ? 3 : 4, cases[i].batch_first ? 4 : 3, 8};
        tg_tensor *x = th_rand_uniform(TG_F32, 3, shape, 40 + i);
        write_case(cases[i].name, m, x, RTOL, ATOL, NULL, NULL);
        tg_module_release(m);
        tg_tensor_release(x);
    }
    /* the gelu of a norm_first layer, the Erf form */
    tg_module *m = layer(8, 2, true, TG_ACT_GELU, false, 60);
    tg_tensor *x = th_rand_uniform(TG_F32, 3, (const int64_t[]){4, 2, 8}, 61);
    case_graph = "\"ops\": [\"LayerNormalization\", \"Transpose\", \"MatMul\", \"Add\", "
                 "\"Split\", \"Reshape\", \"Transpose\", \"Reshape\", \"Transpose\", "
                 "\"Reshape\", \"Transpose\", \"Div\", \"MatMul\", \"Softmax\", \"MatMul\", \"Transpose\", "
                 "\"Reshape\", \"Transpose\", \"MatMul\", \"Add\", \"Add\", "
                 "\"LayerNormalization\", \"Transpose\", \"MatMul\", \"Add\", \"Div\", \"Erf\", "
                 "\"Add\", \"Mul\", \"Mul\", \"Transpose\", \"MatMul\", \"Add\", \"Add\"]";
    write_case("pre_gelu_nodes", m, x, RTOL, ATOL, NULL, NULL);
    check_cases();
    tg_module_release(m);
    tg_tensor_release(x);
}

/* Exports m on x (dynamic batch) and expects ONNX Runtime to give m(xr). */
static void dynamic_case(const char *name, tg_module *m, tg_tensor *x, tg_tensor *xr)
{
    tg_onnx_options o = TG_ONNX_OPTIONS_INIT;
    o.dynamic_batch = true;
    tg_tensor *y = forward(m, xr);
    char path[256], file[128];
    snprintf(file, sizeof file, "%s.onnx", name);
    cr_assert(tg_onnx_export(m, x, th_tmp_path(path, sizeof path, file), &o) == TG_OK, "%s: %s",
              name, tg_error_message());
    write_expected(name, xr, y, RTOL, ATOL, NULL);
    tg_tensor_release(y);
}

Test(onnx_transformer, dynamic_batch_unbatched_and_sequential)
{
    need_onnx();
    /* batch_first: exported on 2 samples, run on 3 */
    tg_module *a = layer(8, 4, false, TG_ACT_GELU, true, 70);
    tg_tensor *x = th_rand_uniform(TG_F32, 3, (const int64_t[]){2, 5, 8}, 71);
    tg_tensor *xr = th_rand_uniform(TG_F32, 3, (const int64_t[]){3, 5, 8}, 72);
    dynamic_case("dynamic_bf", a, x, xr);
    /* seq-first: dim 0 is the sequence, free as well (exported on 5, run
     * on 7) */
    tg_module *b = layer(8, 2, true, TG_ACT_RELU, false, 73);
    tg_tensor *x2 = th_rand_uniform(TG_F32, 3, (const int64_t[]){5, 2, 8}, 74);
    tg_tensor *xr2 = th_rand_uniform(TG_F32, 3, (const int64_t[]){7, 2, 8}, 75);
    dynamic_case("dynamic_sf", b, x2, xr2);
    /* unbatched (S, E): Unsqueeze to (S, 1, E), Squeeze back */
    tg_module *c = layer(8, 4, false, TG_ACT_RELU, true, 76);
    tg_tensor *x3 = th_rand_uniform(TG_F32, 2, (const int64_t[]){6, 8}, 77);
    write_case("unbatched", c, x3, RTOL, ATOL, NULL, NULL);
    /* Sequential(Linear(6, 8), TransformerEncoderLayer, Linear(8, 3)), batch
     * first, a dynamic batch: the layer's initializers under "1." */
    tg_module *seq = NULL, *lin = NULL;
    tg_rng rng;
    tg_rng_init(&rng, 78);
    cr_assert(tg_nn_sequential_new(&seq) == TG_OK);
    cr_assert(tg_nn_linear_new(&lin, 6, 8, true, &rng) == TG_OK);
    append(seq, lin);
    append(seq, layer(8, 4, true, TG_ACT_GELU, true, 79));
    cr_assert(tg_nn_linear_new(&lin, 8, 3, true, &rng) == TG_OK);
    append(seq, lin);
    tg_tensor *x4 = th_rand_uniform(TG_F32, 3, (const int64_t[]){2, 4, 6}, 80);
    tg_tensor *xr4 = th_rand_uniform(TG_F32, 3, (const int64_t[]){5, 4, 6}, 81);
    dynamic_case("sequential", seq, x4, xr4);
    /* its initializer names, on a fixed batch */
    tg_tensor *y4 = forward(seq, x4);
    char path[256];
    cr_assert(tg_onnx_export(seq, x4, th_tmp_path(path, sizeof path, "sequential_names.onnx"),
                             NULL) == TG_OK, "%s", tg_error_message());
    write_expected(
        "sequential_names", x4, y4, RTOL, ATOL,
        (const char *const[]){
            "0.weight", "0.bias", "1.self_attn.in_proj_weight", "1.self_attn.in_proj_bias",
            "1.self_attn.out_proj.weight", "1.self_attn.out_proj.bias", "1.linear1.weight",
            "1.linear1.bias", "1.linear2.weight", "1.linear2.bias", "1.norm1.weight",
            "1.norm1.bias", "1.norm2.weight", "1.norm2.bias", "/1/self_attn/qkv_split",
            "/1/self_attn/head_shape", "/1/self_attn/merged_shape", "/1/self_attn/scale",
            "/1/activation/sqrt2", "/1/activation/one", "/1/activation/half", "2.weight",
            "2.bias", NULL});
    check_cases();
    tg_module_release(a);
    tg_module_release(b);
    tg_module_release(c);
    tg_module_release(seq);
    th_release_all(8, (tg_tensor *[]){x, xr, x2, xr2, x3, x4, xr4, y4});
}

Test(onnx_transformer, export_leaves_the_layer_as_it_was)
{
    need_onnx();
    tg_module *m = layer(8, 2, false, TG_ACT_RELU, false, 90);
    tg_module_train(m, true);
    tg_tensor *x = th_rand_uniform(TG_F32, 3, (const int64_t[]){3, 2, 8}, 91);
    tg_tensor *y0 = forward(m, x);   /* (eval) */
    tg_module_train(m, true);
    char path[256];
    cr_assert(tg_onnx_export(m, x, th_tmp_path(path, sizeof path, "flags.onnx"), NULL) == TG_OK,
              "%s", tg_error_message());
    cr_assert(tg_module_is_training(m) && tg_module_is_training(tg_module_child(m, "self_attn")),
              "the training flags are restored");
    tg_tensor *y1 = forward(m, x);
    th_expect_same_bits("after export", x, y1, y0);
    th_release_all(3, (tg_tensor *[]){x, y0, y1});
    tg_module_release(m);
}

Test(onnx_transformer, multihead_attention_alone_is_refused)
{
    need_onnx();
    tg_rng rng;
    tg_rng_init(&rng, 5);
    tg_module *mha = NULL, *seq = NULL;
    cr_assert(tg_nn_multihead_attention_new(&mha, 8, 2, NULL, &rng) == TG_OK);
    tg_tensor *x = th_rand_uniform(TG_F32, 3, (const int64_t[]){4, 2, 8}, 6);
    char path[256];
    th_tmp_path(path, sizeof path, "mha.onnx");
    cr_assert(eq(int, tg_onnx_export(mha, x, path, NULL), TG_EUNSUPPORTED), "%s",
              tg_error_message());
    th_expect_in(tg_error_message(),
                 "onnx_export: module '<top>' (MultiheadAttention) is not supported on its own: "
                 "its forward takes query, key and value, and the exported graph has one input");
    cr_assert(th_exists(path) == false, "a refused export left %s", path);
    /* inside a Sequential, named by its path */
    cr_assert(tg_nn_sequential_new(&seq) == TG_OK);
    append(seq, tg_module_retain(mha));
    cr_assert(eq(int, tg_onnx_export(seq, x, path, NULL), TG_EUNSUPPORTED));
    th_expect_in(tg_error_message(), "module '0' (MultiheadAttention) is not supported");
    cr_assert(th_exists(path) == false, "a refused export left %s", path);
    tg_module_release(seq);
    tg_module_release(mha);
    tg_tensor_release(x);
}
