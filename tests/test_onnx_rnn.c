/* tests/test_onnx_rnn.c - tg_onnx_export of nn.RNN (tanh, relu), nn.LSTM
 * and nn.GRU: one ONNX RNN / LSTM / GRU node per layer with the weights in
 * ONNX's gate order, 1 and 2 layers, bidirectional, batch_first, without
 * bias, unbatched, with a dynamic batch and in a character-level language
 * model (Embedding, LSTM, Linear on i64 indices), checked by onnx's checker
 * and against tapegrad's own forward under ONNX Runtime; the same nodes,
 * attributes and weights as torch.onnx.export of torch's module with the
 * same state dict (tests/onnx/torch_rnn.py); with extra_outputs the final
 * states h_n and c_n as further outputs (torch's names, shapes and values
 * with several layers, bidirectional, batch_first, unbatched, with and
 * without h_0 and c_0); RNNCell, LSTMCell (h' and c') and GRUCell as one
 * step of the ONNX node; the states of a Sequential's last recurrent
 * module (nested too) as outputs; an LSTM with proj_size and wrong uses of
 * extra_outputs and of a cell's inputs refused, nothing written. */
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
static void same_as_torch_ex(const char *name, tg_module *m, const char *mode, tg_tensor *x,
                             bool batch_first, bool states)
{
    tg_onnx_options o = TG_ONNX_OPTIONS_INIT;
    o.extra_outputs = states;
    char path[256], file[128], ours[128], theirs[128], in[128], dims[64] = "";
    tg_st_file *f = NULL;
    snprintf(file, sizeof file, "%s.safetensors", name);
    cr_assert(tg_st_new(&f) == TG_OK);
    cr_assert(tg_module_state_dict_save(m, f, "") == TG_OK, "%s", tg_error_message());
    cr_assert(tg_safetensors_save(f, th_tmp_path(path, sizeof path, file)) == TG_OK);
    tg_st_free(f);
    snprintf(ours, sizeof ours, "%s.onnx", name);
    snprintf(theirs, sizeof theirs, "%s.torch.onnx", name);
    cr_assert(tg_onnx_export(m, x, th_tmp_path(path, sizeof path, ours), &o) == TG_OK, "%s",
              tg_error_message());
    for (int d = 0; d < tg_tensor_ndim(x); d++)
        jcat(dims, sizeof dims, "%s%lld", d ? "," : "", (long long)tg_tensor_dim(x, d));
    int rc = th_run("TG_PYTHON", (const char *const[]){TG_SOURCE_ROOT "/tests/onnx/torch_rnn.py",
                                                       file, ours, theirs, mode, dims,
                                                       states ? "--states" : "--",
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

static void same_as_torch(const char *name, tg_module *m, const char *mode, tg_tensor *x,
                          bool batch_first)
{
    same_as_torch_ex(name, m, mode, x, batch_first, false);
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

/* With extra_outputs the graph gives torch.onnx.export's outputs of the
 * module's whole result: output, h_n (and c_n), the same names, shapes and
 * values under ONNX Runtime. */
Test(onnx_rnn, final_states_as_torch_onnx_export)
{
    need_onnx();
    tg_tensor *x = seq_input(5, 2, 3, 26), *xb = seq_input(2, 5, 3, 27);
    tg_module *m[3] = {layer(LSTM, 3, 4, 2, true, true, true, 28),
                       layer(GRU, 3, 4, 2, false, false, true, 29),
                       relu_rnn(3, 5, 1, false, 30)};
    same_as_torch_ex("lstm_states", m[0], "LSTM", xb, true, true);
    same_as_torch_ex("gru_states", m[1], "GRU", x, false, true);
    same_as_torch_ex("rnn_states", m[2], "RNN_RELU", x, false, true);
    for (int i = 0; i < 3; i++) tg_module_release(m[i]);
    th_release_all(2, (tg_tensor *[]){x, xb});
}

/* tapegrad's outputs of m on its n inputs xs (a layer: output, h_n, c_n;
 * a cell: h', c'), eval, no grad: ys[0..3) (NULL where the module has
 * none), the count returned. */
static int all_outputs(tg_module *m, int n, tg_tensor *const *xs, tg_tensor **ys)
{
    const char *type = tg_module_type_name(m);
    tg_tensor *h0 = n > 1 ? xs[1] : NULL, *c0 = n > 2 ? xs[2] : NULL;
    ys[0] = ys[1] = ys[2] = NULL;
    tg_module_train(m, false);
    tg_no_grad_begin();
    int rc, count;
    if (!strcmp(type, "LSTM")) {
        rc = tg_nn_lstm_forward(m, &ys[0], &ys[1], &ys[2], xs[0], h0, c0);
        count = 3;
    } else if (!strcmp(type, "LSTMCell")) {
        rc = tg_nn_lstm_cell_forward(m, &ys[0], &ys[1], xs[0], h0, c0);
        count = 2;
    } else if (strstr(type, "Cell")) {
        rc = tg_nn_rnn_cell_forward(m, &ys[0], xs[0], h0);
        count = 1;
    } else {
        rc = tg_nn_rnn_forward(m, &ys[0], &ys[1], xs[0], h0);
        count = 2;
    }
    tg_no_grad_end();
    cr_assert(rc == TG_OK, "%s: %s", type, tg_error_message());
    return count;
}

/* Exports m on its n inputs xs with extra_outputs (names: their names, or
 * NULL) as case `name`: tapegrad's every output checked under ONNX
 * Runtime. */
static void states_case(const char *name, tg_module *m, int n, tg_tensor *const *xs,
                        const char *const *names, bool dynamic)
{
    char path[256], file[128];
    tg_tensor *ys[3];
    const int count = all_outputs(m, n, xs, ys);
    const bool cell = strstr(tg_module_type_name(m), "Cell") != NULL;
    const char *const dflt[2] = {cell ? "c_n" : "h_n", "c_n"};
    tg_onnx_options o = TG_ONNX_OPTIONS_INIT;
    o.extra_outputs = true;
    o.extra_output_names = names;
    o.dynamic_batch = dynamic;
    snprintf(file, sizeof file, "%s.onnx", name);
    cr_assert(tg_onnx_export_n(m, n, xs, NULL, th_tmp_path(path, sizeof path, file), &o) == TG_OK,
              "%s: %s", name, tg_error_message());
    case_extra_outputs(name, count - 1, ys + 1, names ? names : dflt);
    if (n == 1) write_expected(name, xs[0], ys[0], RTOL, ATOL, NULL);
    else write_expected_n(name, n, xs, NULL, ys[0], RTOL, ATOL, NULL);
    for (int i = 0; i < count; i++) tg_tensor_release(ys[i]);
}

Test(onnx_rnn, final_states_match_onnxruntime)
{
    need_onnx();
    tg_tensor *x = seq_input(5, 3, 3, 31), *xb = seq_input(3, 4, 3, 32);
    tg_tensor *xu = input_nd(2, (const int64_t[]){4, 3}, 33);
    /* (D num_layers, N, H) states, in either layout */
    tg_tensor *h4 = input_nd(3, (const int64_t[]){4, 3, 4}, 34);
    tg_tensor *c4 = input_nd(3, (const int64_t[]){4, 3, 4}, 35);
    tg_tensor *h3 = input_nd(3, (const int64_t[]){3, 3, 5}, 36);
    tg_tensor *hu = input_nd(2, (const int64_t[]){2, 4}, 37);
    tg_module *m[6] = {layer(LSTM, 3, 4, 2, true, false, true, 38),
                       layer(LSTM, 3, 4, 2, true, true, true, 39),
                       layer(GRU, 3, 5, 3, false, true, false, 40),
                       relu_rnn(3, 4, 1, true, 41),
                       layer(LSTM, 3, 4, 2, false, false, true, 42),
                       layer(RNN, 3, 4, 2, false, false, true, 43)};
    /* two bidirectional layers, from zeros and from h_0, c_0 given */
    case_graph = "\"ops\": [\"LSTM\", \"Transpose\", \"Reshape\", \"LSTM\", \"Transpose\", "
                 "\"Reshape\", \"Concat\", \"Concat\"]";
    states_case("lstm_bidir_states", m[0], 1, &x, NULL, false);
    states_case("lstm_bidir_h0_c0_states", m[0], 3, (tg_tensor *[]){x, h4, c4}, NULL, false);
    /* batch first: the states stay (D num_layers, N, H); a dynamic batch */
    tg_tensor *h4b = input_nd(3, (const int64_t[]){4, 3, 4}, 44);
    states_case("lstm_batch_first_h0_c0_states", m[1], 3, (tg_tensor *[]){xb, h4b, c4}, NULL,
                true);
    states_case("gru_3layers_batch_first_h0_states", m[2], 2, (tg_tensor *[]){xb, h3}, NULL,
                false);
    states_case("gru_3layers_batch_first_states", m[2], 1, &xb, NULL, true);
    /* unbatched: (D num_layers, H) */
    states_case("rnn_relu_bidir_unbatched_states", m[3], 1, &xu, NULL, false);
    states_case("rnn_relu_bidir_unbatched_h0_states", m[3], 2, (tg_tensor *[]){xu, hu}, NULL,
                false);
    states_case("lstm_2layers_unbatched_states", m[4], 1, &xu, NULL, false);
    states_case("lstm_2layers_named_states", m[4], 1, &x,
                (const char *const[]){"hidden", "cell"}, false);
    states_case("rnn_2layers_states", m[5], 1, &x, NULL, false);
    check_cases();
    for (int i = 0; i < 6; i++) tg_module_release(m[i]);
    th_release_all(8, (tg_tensor *[]){x, xb, xu, h4, c4, h3, hu, h4b});
}

static tg_module *cell(kind k, int64_t in, int64_t h, bool bias, tg_rnn_nonlinearity nl,
                       uint64_t seed)
{
    tg_rng rng;
    tg_rng_init(&rng, seed);
    tg_module *m = NULL;
    int rc = k == LSTM ? tg_nn_lstm_cell_new(&m, in, h, bias, &rng)
             : k == GRU ? tg_nn_gru_cell_new(&m, in, h, bias, &rng)
                        : tg_nn_rnn_cell_new(&m, in, h, bias, nl, &rng);
    cr_assert(rc == TG_OK, "%s", tg_error_message());
    return m;
}

/* states_case for a container seq whose last module `last` takes the
 * output of head (the modules before it) on x: tapegrad's outputs are
 * last's on head(x). */
static void tail_states_case(const char *name, tg_module *seq, tg_module *head, tg_module *last,
                             tg_tensor *x, const char *const *names, bool dynamic)
{
    char path[256], file[128];
    tg_tensor *ys[3], *h = forward(head, x);
    const int count = all_outputs(last, 1, &h, ys);
    const bool cell = strstr(tg_module_type_name(last), "Cell") != NULL;
    const char *const dflt[2] = {cell ? "c_n" : "h_n", "c_n"};
    tg_onnx_options o = TG_ONNX_OPTIONS_INIT;
    o.extra_outputs = true;
    o.extra_output_names = names;
    o.dynamic_batch = dynamic;
    snprintf(file, sizeof file, "%s.onnx", name);
    cr_assert(tg_onnx_export(seq, x, th_tmp_path(path, sizeof path, file), &o) == TG_OK,
              "%s: %s", name, tg_error_message());
    case_extra_outputs(name, count - 1, ys + 1, names ? names : dflt);
    write_expected(name, x, ys[0], RTOL, ATOL, NULL);
    for (int i = 0; i < count; i++) tg_tensor_release(ys[i]);
    tg_tensor_release(h);
}

static tg_module *linear(int64_t in, int64_t out, uint64_t seed)
{
    tg_rng rng;
    tg_rng_init(&rng, seed);
    tg_module *m = NULL;
    cr_assert(tg_nn_linear_new(&m, in, out, true, &rng) == TG_OK, "%s", tg_error_message());
    return m;
}

/* The last module of a Sequential (through nested ones) gives its outputs
 * beyond the first, as torch's Sequential returns its last module's
 * tuple. */
Test(onnx_rnn, final_states_of_a_sequentials_last_module_match_onnxruntime)
{
    need_onnx();
    tg_tensor *xb = seq_input(3, 4, 3, 60), *x = seq_input(5, 3, 3, 61);
    tg_tensor *x2 = input_nd(2, (const int64_t[]){3, 4}, 62);
    /* Linear, then a batch-first 2-layer LSTM: h_n and c_n, a dynamic batch */
    tg_module *lin = linear(3, 3, 63), *lstm = layer(LSTM, 3, 4, 2, false, true, true, 64);
    tg_module *seq = NULL, *inner = NULL, *head = NULL, *seq2 = NULL, *seq3 = NULL;
    cr_assert(tg_nn_sequential_new(&seq) == TG_OK);
    append(seq, tg_module_retain(lin));
    append(seq, tg_module_retain(lstm));
    tail_states_case("linear_lstm_states", seq, lin, lstm, xb, NULL, true);
    /* a Sequential in a Sequential: Linear, ReLU, bidirectional GRU, whose
     * h_n is the graph's (module path 0.2) */
    tg_module *gru = layer(GRU, 3, 5, 1, true, false, true, 65), *relu = act(TG_ACT_RELU, 0);
    cr_assert(tg_nn_sequential_new(&inner) == TG_OK);
    cr_assert(tg_nn_sequential_new(&head) == TG_OK);
    cr_assert(tg_nn_sequential_new(&seq2) == TG_OK);
    append(inner, tg_module_retain(lin));
    append(inner, tg_module_retain(relu));
    append(inner, tg_module_retain(gru));
    append(head, tg_module_retain(lin));
    append(head, relu);
    append(seq2, inner);
    case_graph = "\"ops\": [\"Transpose\", \"MatMul\", \"Add\", \"Relu\", \"GRU\", "
                 "\"Transpose\", \"Reshape\"]";
    tail_states_case("nested_gru_states", seq2, head, gru, x, NULL, false);
    /* Linear, then an LSTMCell: c', named */
    tg_module *lc = cell(LSTM, 4, 5, true, TG_RNN_TANH, 66), *lin4 = linear(4, 4, 67);
    cr_assert(tg_nn_sequential_new(&seq3) == TG_OK);
    append(seq3, tg_module_retain(lin4));
    append(seq3, tg_module_retain(lc));
    tail_states_case("linear_lstm_cell_c", seq3, lin4, lc, x2, (const char *const[]){"cell"},
                     false);
    check_cases();
    tg_module *ms[9] = {lin, lstm, seq, head, seq2, seq3, gru, lc, lin4};
    for (int i = 0; i < 9; i++) tg_module_release(ms[i]);
    th_release_all(3, (tg_tensor *[]){xb, x, x2});
}

/* A cell: one step of an ONNX RNN / LSTM / GRU node between Unsqueeze and
 * Squeeze, from zeros or the given states, batched and unbatched; the
 * LSTMCell's c' with extra_outputs. */
Test(onnx_rnn, cells_match_onnxruntime)
{
    need_onnx();
    tg_tensor *x = input_nd(2, (const int64_t[]){3, 4}, 45), *hx = input_nd(2,
                                                                          (const int64_t[]){3,
                                                                                            5},
                                                                          46);
    tg_tensor *cx = input_nd(2, (const int64_t[]){3, 5}, 47);
    tg_tensor *xu = input_nd(1, (const int64_t[]){4}, 48), *hu = input_nd(1, (const int64_t[]){5},
                                                                            49);
    tg_tensor *cu = input_nd(1, (const int64_t[]){5}, 50);
    tg_module *rt = cell(RNN, 4, 5, true, TG_RNN_TANH, 51),
              *rr = cell(RNN, 4, 5, false, TG_RNN_RELU, 52),
              *ls = cell(LSTM, 4, 5, true, TG_RNN_TANH, 53),
              *gr = cell(GRU, 4, 5, true, TG_RNN_TANH, 54),
              *gn = cell(GRU, 4, 5, false, TG_RNN_TANH, 55);
    case_graph = "\"ops\": [\"Unsqueeze\", \"RNN\", \"Squeeze\"], \"attributes\": {\"RNN\": "
                 "{\"hidden_size\": 5, \"activations\": [\"Tanh\"]}}";
    write_case("rnn_cell", rt, x, RTOL, ATOL,
               (const char *const[]){"W", "R", "B", "/x_axes", "/h_axes", NULL}, NULL);
    case_graph = "\"attributes\": {\"RNN\": {\"activations\": [\"Relu\"]}}";
    write_case_n("rnn_cell_relu_nobias_hx", rr, 2, (tg_tensor *[]){x, hx}, NULL, RTOL, ATOL,
                 (const char *const[]){"W", "R", "/x_axes", "/hx_axes", "/h_axes", NULL}, NULL);
    case_graph = "\"ops\": [\"Unsqueeze\", \"LSTM\", \"Squeeze\"]";
    write_case("lstm_cell", ls, x, RTOL, ATOL, NULL, NULL);
    case_graph = "\"ops\": [\"Unsqueeze\", \"Unsqueeze\", \"Unsqueeze\", \"LSTM\", "
                 "\"Squeeze\", \"Squeeze\"]";
    states_case("lstm_cell_hx_cx_c", ls, 3, (tg_tensor *[]){x, hx, cx}, NULL, true);
    states_case("lstm_cell_unbatched_c", ls, 3, (tg_tensor *[]){xu, hu, cu},
                (const char *const[]){"c_1"}, false);
    states_case("lstm_cell_zeros_c", ls, 1, &x, NULL, false);
    case_graph = "\"attributes\": {\"GRU\": {\"linear_before_reset\": 1}}";
    write_case_n("gru_cell_hx", gr, 2, (tg_tensor *[]){x, hx}, NULL, RTOL, ATOL, NULL, NULL);
    write_case("gru_cell_nobias_unbatched", gn, xu, RTOL, ATOL, NULL, NULL);
    /* a GRUCell or RNNCell has no output beyond h' */
    states_case("gru_cell_unbatched_hx", gr, 2, (tg_tensor *[]){xu, hu}, NULL, false);
    states_case("rnn_cell_hx", rt, 2, (tg_tensor *[]){x, hx}, NULL, true);
    /* inside a Sequential: from zero states, as its forward */
    tg_module *seq = NULL;
    cr_assert(tg_nn_sequential_new(&seq) == TG_OK);
    append(seq, tg_module_retain(ls));
    append(seq, act(TG_ACT_RELU, 0));
    write_case("lstm_cell_in_sequential", seq, x, RTOL, ATOL,
               (const char *const[]){"0.W", "0.R", "0.B", "/0/x_axes", "/0/h_axes", NULL}, NULL);
    tg_module_release(seq);
    check_cases();
    tg_module *ms[5] = {rt, rr, ls, gr, gn};
    for (int i = 0; i < 5; i++) tg_module_release(ms[i]);
    th_release_all(6, (tg_tensor *[]){x, hx, cx, xu, hu, cu});
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

/* export_n with options o must fail with status and a message containing
 * words, writing no file. */
static void expect_refused_n(tg_module *m, int n, tg_tensor *const *xs, const tg_onnx_options *o,
                             int status, const char *words)
{
    char path[256];
    th_tmp_path(path, sizeof path, "refused.onnx");
    cr_assert(eq(int, tg_onnx_export_n(m, n, xs, NULL, path, o), status), "%s",
              tg_error_message());
    th_expect_in(tg_error_message(), words);
    cr_assert(th_exists(path) == false, "a refused export left %s", path);
}

Test(onnx_rnn, projections_and_extra_outputs_refused)
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
    cr_assert(tg_nn_gru_cell_new(&gcell, 3, 4, true, &rng) == TG_OK);
    /* extra_outputs: only the recurrent modules and MultiheadAttention at
     * the top, or a recurrent module last in a Sequential there; names
     * distinct from each other, the inputs' and the output's */
    tg_onnx_options eo = TG_ONNX_OPTIONS_INIT;
    eo.extra_outputs = true;
    expect_refused_n(seq, 1, &x, &eo, TG_EUNSUPPORTED, "module '1' (LSTM) with proj_size=2");
    tg_module *lin = NULL, *seq2 = NULL;
    cr_assert(tg_nn_linear_new(&lin, 3, 2, true, &rng) == TG_OK);
    cr_assert(tg_nn_sequential_new(&seq2) == TG_OK);
    append(seq2, layer(GRU, 3, 3, 1, false, false, true, 15));
    append(seq2, tg_module_retain(lin));
    expect_refused_n(seq2, 1, &x, &eo, TG_EUNSUPPORTED,
                     "onnx_export: extra_outputs: module '1' (Linear) is not supported: only an "
                     "RNN, LSTM, GRU, RNNCell, LSTMCell, GRUCell, MaxPoolNd or "
                     "MultiheadAttention at the top of the export, or an RNN, LSTM, GRU, cell "
                     "or MaxPoolNd last in a Sequential there, gives outputs beyond its first");
    tg_module_release(seq2);
    expect_refused_n(lin, 1, &x2, &eo, TG_EUNSUPPORTED, "module '<top>' (Linear) is not "
                     "supported");
    expect_refused_n(proj, 1, &x, &eo, TG_EUNSUPPORTED, "(LSTM) with proj_size=2");
    tg_module *lstm = layer(LSTM, 3, 4, 1, false, false, true, 14);
    eo.extra_output_names = (const char *const[]){"h_n", "h_n"};
    expect_refused_n(lstm, 1, &x, &eo, TG_EINVAL,
                     "onnx_export: extra outputs 0 and 1 are both named 'h_n'");
    eo.extra_output_names = (const char *const[]){"h_n", "output"};
    expect_refused_n(lstm, 1, &x, &eo, TG_EINVAL,
                     "onnx_export: extra output 1 must have a non-empty name other than the "
                     "output's ('output')");
    eo.extra_output_names = (const char *const[]){"", "c_n"};
    expect_refused_n(lstm, 1, &x, &eo, TG_EINVAL, "extra output 0 must have a non-empty name");
    eo.extra_output_names = (const char *const[]){"input", "c_n"};
    expect_refused_n(lstm, 1, &x, &eo, TG_EINVAL,
                     "onnx_export: extra output 0 and input 0 are both named 'input'");
    eo.extra_output_names = NULL;
    /* a cell's inputs: (x), (x, hx), LSTMCell (x, hx, cx) */
    tg_tensor *h2 = th_rand_uniform(TG_F32, 2, (const int64_t[]){2, 4}, 18);
    tg_tensor *h2d = th_tensor_from(TG_U8, 2, (const int64_t[]){2, 4},
                                    (const double[]){0, 1, 0, 1, 0, 1, 0, 1});
    expect_refused_n(cell, 2, (tg_tensor *[]){x2, h2}, &eo, TG_EINVAL,
                     "onnx_export: module '<top>' (LSTMCell) takes the graph inputs (x) or (x, "
                     "hx, cx), not 2");
    expect_refused_n(gcell, 3, (tg_tensor *[]){x2, h2, h2}, NULL, TG_EINVAL,
                     "module '<top>' (GRUCell) takes the graph inputs (x) or (x, hx), not 3");
    expect_refused_n(gcell, 2, (tg_tensor *[]){x2, h2d}, NULL, TG_EDTYPE,
                     "module '<top>' (GRUCell): graph input 1 (hx) has dtype u8; it must be "
                     "f32");
    tg_module_release(lin);
    tg_module_release(lstm);
    th_release_all(2, (tg_tensor *[]){h2, h2d});
    tg_module_release(proj);
    tg_module_release(seq);
    tg_module_release(cell);
    tg_module_release(gcell);
    th_release_all(2, (tg_tensor *[]){x, x2});
}
