/* tests/test_onnx_rnn.c - tg_onnx_export of nn.RNN (tanh, relu), nn.LSTM
 * and nn.GRU: one ONNX RNN / LSTM / GRU node per layer with the weights in
 * ONNX's gate order, 1 and 2 layers, bidirectional, batch_first, without
 * bias, unbatched, with a dynamic batch and in a character-level language
 * model (Embedding, LSTM, Linear on i64 indices), checked by onnx's checker
 * and against tapegrad's own forward under ONNX Runtime; the same nodes,
 * attributes and weights as torch.onnx.export of torch's module with the
 * same state dict (tests/onnx/torch_rnn.py); an LSTM with proj_size and the
 * cells refused, nothing written. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdio.h>
#include <string.h>

#include "helpers.h"
#include "onnx_cases.h"
#include "tapegrad/tapegrad.h"

TestSuite(onnx_rnn, .init = onnx_setup, .fini = th_tmp_dir_remove);

/* ONNX Runtime's recurrent kernels sum the gates in another order than
 * tapegrad's tg_linear: f32 rounding apart, the same numbers. */
#define RTOL 1e-5
#define ATOL 1e-5

typedef enum kind { RNN, LSTM, GRU } kind;

/* A layer of kind k made from opts' fields set over the defaults. */
static tg_module *layer(kind k, int64_t in, int64_t h, int layers, bool bidir, bool batch_first,
                        bool bias, uint64_t seed)
{
    tg_rnn_opts o = TG_RNN_OPTS_INIT;
    o.num_layers = layers;
    o.bidirectional = bidir;
    o.batch_first = batch_first;
    o.bias = bias;
    o.dropout = layers > 1 ? 0.3 : 0;   /* the identity in eval */
    tg_rng rng;
    tg_rng_init(&rng, seed);
    tg_module *m = NULL;
    int rc = k == LSTM ? tg_nn_lstm_new(&m, in, h, &o, &rng)
             : k == GRU ? tg_nn_gru_new(&m, in, h, &o, &rng)
                        : tg_nn_rnn_new(&m, in, h, &o, &rng);
    cr_assert(rc == TG_OK, "%s", tg_error_message());
    return m;
}

static tg_module *relu_rnn(int64_t in, int64_t h, int layers, bool bidir, uint64_t seed)
{
    tg_rnn_opts o = TG_RNN_OPTS_INIT;
    o.num_layers = layers;
    o.bidirectional = bidir;
    o.nonlinearity = TG_RNN_RELU;
    tg_rng rng;
    tg_rng_init(&rng, seed);
    tg_module *m = NULL;
    cr_assert(tg_nn_rnn_new(&m, in, h, &o, &rng) == TG_OK, "%s", tg_error_message());
    return m;
}

/* An input of the given shape in [-2, 2): the gates leave their linear
 * range. */
static tg_tensor *input_nd(int nd, const int64_t *shape, uint64_t seed)
{
    tg_tensor *u = th_rand_uniform(TG_F32, nd, shape, seed), *x = NULL;
    cr_assert(tg_mul_scalar(&x, u, 4.0) == TG_OK);
    tg_tensor *y = NULL;
    cr_assert(tg_add_scalar(&y, x, -2.0) == TG_OK);
    th_release_all(2, (tg_tensor *[]){u, x});
    return y;
}

/* (L, N, in), or (N, L, in) for a batch-first layer. */
static tg_tensor *seq_input(int64_t a, int64_t b, int64_t in, uint64_t seed)
{
    return input_nd(3, (const int64_t[]){a, b, in}, seed);
}

/* Exports m on x as case `name`, its expected output m(xr) on another
 * input xr (a dynamic batch run on another batch size). */
static void write_case_on(const char *name, tg_module *m, tg_tensor *x, tg_tensor *xr,
                          const char *const *inits, const tg_onnx_options *o)
{
    char path[256], file[128];
    snprintf(file, sizeof file, "%s.onnx", name);
    cr_assert(tg_onnx_export(m, x, th_tmp_path(path, sizeof path, file), o) == TG_OK, "%s: %s",
              name, tg_error_message());
    tg_tensor *y = forward(m, xr);
    write_expected(name, xr, y, RTOL, ATOL, inits);
    tg_tensor_release(y);
}

Test(onnx_rnn, rnn_matches_onnxruntime)
{
    need_onnx();
    tg_module *a = layer(RNN, 3, 5, 1, false, false, true, 1);
    tg_tensor *x = seq_input(6, 2, 3, 11);
    case_graph = "\"ops\": [\"RNN\", \"Squeeze\"], \"attributes\": {\"RNN\": "
                 "{\"hidden_size\": 5, \"activations\": [\"Tanh\"]}}";
    write_case("rnn_tanh", a, x, RTOL, ATOL,
               (const char *const[]){"W_l0", "R_l0", "B_l0", "/axes", NULL}, NULL);
    /* relu, two layers, both directions in one node each */
    tg_module *b = relu_rnn(3, 4, 2, true, 2);
    case_graph = "\"ops\": [\"RNN\", \"Transpose\", \"Reshape\", \"RNN\", \"Transpose\", "
                 "\"Reshape\"], \"attributes\": {\"RNN\": {\"activations\": [\"Relu\", "
                 "\"Relu\"], \"direction\": \"bidirectional\"}, \"Transpose\": {\"perm\": "
                 "[0, 2, 1, 3]}}, \"initializer_values\": {\"/shape\": [0, 0, -1]}";
    write_case("rnn_relu_bidir_2layers", b, x, RTOL, ATOL,
               (const char *const[]){"W_l0", "R_l0", "B_l0", "W_l1", "R_l1", "B_l1", "/shape",
                                     NULL},
               NULL);
    check_cases();
    tg_module_release(a);
    tg_module_release(b);
    tg_tensor_release(x);
}

Test(onnx_rnn, lstm_matches_onnxruntime)
{
    need_onnx();
    tg_module *a = layer(LSTM, 3, 5, 1, false, false, true, 3);
    tg_tensor *x = seq_input(7, 2, 3, 12), *xb = seq_input(3, 5, 4, 13);
    case_graph = "\"ops\": [\"LSTM\", \"Squeeze\"], \"attributes\": {\"LSTM\": "
                 "{\"hidden_size\": 5}}";
    write_case("lstm", a, x, RTOL, ATOL,
               (const char *const[]){"W_l0", "R_l0", "B_l0", "/axes", NULL}, NULL);
    /* two bidirectional layers on a batch-first input */
    tg_module *b = layer(LSTM, 4, 3, 2, true, true, true, 4);
    case_graph = "\"ops\": [\"Transpose\", \"LSTM\", \"Transpose\", \"Reshape\", \"LSTM\", "
                 "\"Transpose\", \"Reshape\", \"Transpose\"], \"attributes\": {\"LSTM\": "
                 "{\"hidden_size\": 3, \"direction\": \"bidirectional\"}}";
    write_case("lstm_bidir_2layers_batch_first", b, xb, RTOL, ATOL, NULL, NULL);
    /* no bias: no B (ONNX's zeros) */
    tg_module *c = layer(LSTM, 3, 4, 2, false, false, false, 5);
    case_graph = "\"ops\": [\"LSTM\", \"Squeeze\", \"LSTM\", \"Squeeze\"]";
    write_case("lstm_nobias_2layers", c, x, RTOL, ATOL,
               (const char *const[]){"W_l0", "R_l0", "W_l1", "R_l1", "/axes", NULL}, NULL);
    /* unbatched (L, in): Unsqueeze, the node, Squeeze back */
    tg_module *d = layer(LSTM, 3, 4, 1, true, false, true, 6);
    tg_tensor *xu = input_nd(2, (const int64_t[]){6, 3}, 18);
    case_graph = "\"ops\": [\"Unsqueeze\", \"LSTM\", \"Transpose\", \"Reshape\", \"Squeeze\"]";
    write_case("lstm_bidir_unbatched", d, xu, RTOL, ATOL, NULL, NULL);
    check_cases();
    tg_module_release(a);
    tg_module_release(b);
    tg_module_release(c);
    tg_module_release(d);
    th_release_all(3, (tg_tensor *[]){x, xb, xu});
}

Test(onnx_rnn, gru_matches_onnxruntime)
{
    need_onnx();
    tg_module *a = layer(GRU, 3, 5, 1, false, false, true, 7);
    tg_tensor *x = seq_input(6, 3, 3, 14), *xb = seq_input(4, 6, 3, 15),
              *xr = seq_input(2, 6, 3, 16);
    case_graph = "\"ops\": [\"GRU\", \"Squeeze\"], \"attributes\": {\"GRU\": "
                 "{\"hidden_size\": 5, \"linear_before_reset\": 1}}";
    write_case("gru", a, x, RTOL, ATOL,
               (const char *const[]){"W_l0", "R_l0", "B_l0", "/axes", NULL}, NULL);
    tg_module *b = layer(GRU, 3, 4, 2, true, false, false, 8);
    case_graph = "\"attributes\": {\"GRU\": {\"direction\": \"bidirectional\", "
                 "\"linear_before_reset\": 1}}";
    write_case("gru_bidir_2layers_nobias", b, x, RTOL, ATOL,
               (const char *const[]){"W_l0", "R_l0", "W_l1", "R_l1", "/shape", NULL}, NULL);
    /* batch first with a dynamic batch, exported on 4 and run on 2: the
     * reshapes keep N free */
    tg_module *c = layer(GRU, 3, 4, 2, true, true, true, 9);
    tg_onnx_options o = TG_ONNX_OPTIONS_INIT;
    o.dynamic_batch = true;
    write_case_on("gru_batch_first_dynamic", c, xb, xr, NULL, &o);
    check_cases();
    tg_module_release(a);
    tg_module_release(b);
    tg_module_release(c);
    th_release_all(3, (tg_tensor *[]){x, xb, xr});
}

/* A character-level language model: Sequential(Embedding(V, E),
 * LSTM(E, H, batch_first), Linear(H, V)) on (N, L) i64 indices, giving
 * the (N, L, V) logits. */
Test(onnx_rnn, char_lm_matches_onnxruntime)
{
    need_onnx();
    tg_rng rng;
    tg_rng_init(&rng, 10);
    tg_module *seq = NULL, *emb = NULL, *lin = NULL;
    cr_assert(tg_nn_sequential_new(&seq) == TG_OK);
    cr_assert(tg_nn_embedding_new(&emb, 12, 6, &rng) == TG_OK);
    cr_assert(tg_nn_linear_new(&lin, 8, 12, true, &rng) == TG_OK);
    append(seq, emb);
    append(seq, layer(LSTM, 6, 8, 2, false, true, true, 11));
    append(seq, lin);
    tg_tensor *idx = th_tensor_from(TG_I64, 2, (const int64_t[]){2, 5},
                                    (const double[]){0, 3, 11, 7, 7, 2, 9, 1, 4, 10});
    tg_tensor *idx3 = th_tensor_from(TG_I64, 2, (const int64_t[]){3, 5},
                                     (const double[]){5, 5, 1, 0, 8, 11, 2, 6, 3, 3, 9, 4, 0,
                                                      7, 10});
    tg_onnx_options o = TG_ONNX_OPTIONS_INIT;
    o.dynamic_batch = true;
    case_graph = "\"ops\": [\"Gather\", \"Transpose\", \"LSTM\", \"Squeeze\", \"LSTM\", "
                 "\"Squeeze\", \"Transpose\", \"Transpose\", \"MatMul\", \"Add\"]";
    write_case_on("char_lm", seq, idx, idx3,
               (const char *const[]){"0.weight", "1.W_l0", "1.R_l0", "1.B_l0", "1.W_l1",
                                     "1.R_l1", "1.B_l1", "/1/axes", "2.weight", "2.bias", NULL},
                  &o);
    check_cases();
    tg_module_release(seq);
    th_release_all(2, (tg_tensor *[]){idx, idx3});
}

/* torch.onnx.export of torch's module holding the same state dict
 * (tests/onnx/torch_rnn.py) writes the same recurrent nodes with the same
 * W, R and B, and ONNX Runtime gives the same outputs from both files. */
static void same_as_torch(const char *name, tg_module *m, const char *mode, tg_tensor *x,
                          bool batch_first)
{
    char path[256], file[128], ours[128], theirs[128], in[128], dims[64] = "";
    tg_st_file *f = NULL;
    snprintf(file, sizeof file, "%s.safetensors", name);
    cr_assert(tg_st_new(&f) == TG_OK);
    cr_assert(tg_module_state_dict_save(m, f, "") == TG_OK, "%s", tg_error_message());
    cr_assert(tg_safetensors_save(f, th_tmp_path(path, sizeof path, file)) == TG_OK);
    tg_st_free(f);
    snprintf(ours, sizeof ours, "%s.onnx", name);
    snprintf(theirs, sizeof theirs, "%s.torch.onnx", name);
    cr_assert(tg_onnx_export(m, x, th_tmp_path(path, sizeof path, ours), NULL) == TG_OK, "%s",
              tg_error_message());
    for (int d = 0; d < tg_tensor_ndim(x); d++)
        jcat(dims, sizeof dims, "%s%lld", d ? "," : "", (long long)tg_tensor_dim(x, d));
    int rc = th_run("TG_PYTHON", (const char *const[]){TG_SOURCE_ROOT "/tests/onnx/torch_rnn.py",
                                                       file, ours, theirs, mode, dims,
                                                       batch_first ? "--batch-first" : NULL,
                                                       NULL});
    cr_log_info("torch_rnn.py %s: %s", name, th_out);
    cr_assert(rc == 0, "%s against torch.onnx.export:\n%s%s", name, th_out, th_err);
    write_f32(name, ".in.f32", x);
    snprintf(in, sizeof in, "%s.in.f32", name);
    rc = th_run("TG_NODE", (const char *const[]){TG_SOURCE_ROOT "/tests/onnx/run.mjs", "--same",
                                                 ours, theirs, in, dims, "1e-5", NULL});
    cr_log_info("%s", th_out);
    cr_assert(rc == 0, "onnxruntime:\n%s%s", th_out, th_err);
}

Test(onnx_rnn, same_nodes_and_weights_as_torch_onnx_export)
{
    need_onnx();
    tg_tensor *x = seq_input(5, 2, 3, 19), *xb = seq_input(2, 5, 3, 20);
    tg_module *m[5] = {layer(RNN, 3, 4, 1, false, false, true, 21), relu_rnn(3, 4, 2, true, 22),
                       layer(LSTM, 3, 4, 2, true, true, true, 23),
                       layer(LSTM, 3, 5, 1, false, false, false, 24),
                       layer(GRU, 3, 4, 2, true, false, true, 25)};
    same_as_torch("rnn_tanh", m[0], "RNN_TANH", x, false);
    same_as_torch("rnn_relu", m[1], "RNN_RELU", x, false);
    same_as_torch("lstm_bidir_batch_first", m[2], "LSTM", xb, true);
    same_as_torch("lstm_nobias", m[3], "LSTM", x, false);
    same_as_torch("gru_bidir", m[4], "GRU", x, false);
    for (int i = 0; i < 5; i++) tg_module_release(m[i]);
    th_release_all(2, (tg_tensor *[]){x, xb});
}

/* export must fail with status and a message containing words, writing
 * no file. */
static void expect_refused(tg_module *m, tg_tensor *x, int status, const char *words)
{
    char path[256];
    th_tmp_path(path, sizeof path, "refused.onnx");
    cr_assert(eq(int, tg_onnx_export(m, x, path, NULL), status), "%s", tg_error_message());
    th_expect_in(tg_error_message(), words);
    cr_assert(th_exists(path) == false, "a refused export left %s", path);
}

Test(onnx_rnn, projections_and_cells_are_refused)
{
    need_onnx();
    tg_rng rng;
    tg_rng_init(&rng, 12);
    tg_rnn_opts o = TG_RNN_OPTS_INIT;
    o.proj_size = 2;
    tg_module *proj = NULL, *seq = NULL, *cell = NULL, *gcell = NULL;
    cr_assert(tg_nn_lstm_new(&proj, 3, 4, &o, &rng) == TG_OK);
    tg_tensor *x = seq_input(5, 2, 3, 16), *x2 = th_rand_uniform(TG_F32, 2,
                                                                 (const int64_t[]){2, 3}, 17);
    expect_refused(proj, x, TG_EUNSUPPORTED,
                   "onnx_export: module '<top>' (LSTM) with proj_size=2 is not supported: "
                   "ONNX's LSTM has no projection of its hidden state");
    cr_assert(tg_nn_sequential_new(&seq) == TG_OK);
    append(seq, layer(GRU, 3, 3, 1, false, false, true, 13));
    append(seq, tg_module_retain(proj));
    expect_refused(seq, x, TG_EUNSUPPORTED, "module '1' (LSTM) with proj_size=2");
    cr_assert(tg_nn_lstm_cell_new(&cell, 3, 4, true, &rng) == TG_OK);
    expect_refused(cell, x2, TG_EUNSUPPORTED,
                   "onnx_export: module '<top>' (LSTMCell) is not supported");
    cr_assert(tg_nn_gru_cell_new(&gcell, 3, 4, true, &rng) == TG_OK);
    expect_refused(gcell, x2, TG_EUNSUPPORTED, "module '<top>' (GRUCell) is not supported");
    tg_module_release(proj);
    tg_module_release(seq);
    tg_module_release(cell);
    tg_module_release(gcell);
    th_release_all(2, (tg_tensor *[]){x, x2});
}
