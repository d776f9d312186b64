/* tests/test_rnn_api.c - what the recurrent modules (nn.RNN, nn.LSTM,
 * nn.GRU and their cells) are besides their numbers (tests/test_rnn.c):
 * torch's keys, shapes and init bounds; options read back; a safetensors
 * round trip and a copy; inter-layer dropout in training and eval, through
 * recomputation and checkpoints; refusals that name the argument and write
 * nothing; the ONNX export of a cell where the library has it (the
 * exported numbers: tests/test_onnx_rnn.c); scope capture. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

static void setup(void) { th_tmp_dir_make("tg_rnn_api_"); }

TestSuite(rnn_api, .init = setup, .fini = th_tmp_dir_remove);

/* ---- parameters and the state dict ---- */

/* torch's keys, order and shapes for LSTM(5, 4, num_layers=2,
 * bidirectional=True, proj_size=3), and the init bound 1/sqrt(4). */
Test(rnn_api, lstm_has_torch_keys_shapes_and_init)
{
    tg_rng rng;
    tg_rng_init(&rng, 3);
    tg_rnn_opts o = TG_RNN_OPTS_INIT;
    o.num_layers = 2;
    o.bidirectional = true;
    o.proj_size = 3;
    tg_module *m = NULL;
    cr_assert(eq(int, tg_nn_lstm_new(&m, 5, 4, &o, &rng), TG_OK), "%s", tg_error_message());
    cr_assert(eq(str, (char *)tg_module_type_name(m), "LSTM"));
    static const char *const base[5] = {"weight_ih", "weight_hh", "bias_ih", "bias_hh",
                                        "weight_hr"};
    /* (rows, cols) per base name; weight_ih's cols: 5, then 2 * 3 */
    const int64_t shp[5][2] = {{16, 5}, {16, 3}, {16, 0}, {16, 0}, {3, 4}};
    cr_assert(eq(int, tg_module_state_count(m), 20));
    int i = 0;
    for (int l = 0; l < 2; l++)
        for (int d = 0; d < 2; d++)
            for (int b = 0; b < 5; b++, i++) {
                char want[64], got[TG_MODULE_NAME_MAX];
                tg_tensor *t = NULL;
                snprintf(want, sizeof want, "%s_l%d%s", base[b], l, d ? "_reverse" : "");
                cr_assert(eq(int, tg_module_state_at(m, i, got, sizeof got, &t, NULL), TG_OK));
                cr_assert(eq(str, got, want));
                const int64_t cols = b == 0 && l == 1 ? 6 : shp[b][1];
                if (cols) th_expect_shape(t, 2, (int64_t[]){shp[b][0], cols});
                else th_expect_shape(t, 1, (int64_t[]){shp[b][0]});
                cr_assert(eq(int, tg_tensor_dtype(t), TG_F32));
                cr_assert(tg_tensor_requires_grad(t));
                double lo = 1, hi = -1;
                for (int64_t e = 0; e < tg_tensor_numel(t); e++) {
                    lo = fmin(lo, th_at(t, e));
                    hi = fmax(hi, th_at(t, e));
                }
                cr_assert(lo >= -0.5 && hi <= 0.5 && hi > lo, "%s in [%g, %g]", got, lo, hi);
            }
    tg_module_release(m);
}

Test(rnn_api, cell_keys_and_options_read_back)
{
    tg_rng rng;
    tg_rng_init(&rng, 3);
    tg_module *m = NULL;
    cr_assert(eq(int, tg_nn_gru_cell_new(&m, 5, 4, true, &rng), TG_OK));
    cr_assert(eq(str, (char *)tg_module_type_name(m), "GRUCell"));
    static const char *const keys[] = {"weight_ih", "weight_hh", "bias_ih", "bias_hh"};
    cr_assert(eq(int, tg_module_state_count(m), 4));
    for (int i = 0; i < 4; i++) {
        char got[TG_MODULE_NAME_MAX];
        cr_assert(eq(int, tg_module_state_at(m, i, got, sizeof got, NULL, NULL), TG_OK));
        cr_assert(eq(str, got, (char *)keys[i]));
    }
    th_expect_shape(tg_module_find(m, "weight_ih"), 2, (int64_t[]){12, 5});
    th_expect_shape(tg_module_find(m, "weight_hh"), 2, (int64_t[]){12, 4});
    int64_t in = 0, h = 0;
    tg_rnn_opts o;
    cr_assert(eq(int, tg_nn_rnn_options(m, &in, &h, &o), TG_OK));
    cr_assert(eq(i64, in, 5));
    cr_assert(eq(i64, h, 4));
    cr_assert(eq(int, o.num_layers, 1));
    cr_assert(o.bias);
    tg_module_release(m);
    cr_assert(eq(int, tg_nn_rnn_cell_new(&m, 2, 3, false, TG_RNN_RELU, &rng), TG_OK));
    cr_assert(eq(int, tg_module_state_count(m), 2));
    cr_assert(eq(int, tg_nn_rnn_options(m, NULL, NULL, &o), TG_OK));
    cr_assert(eq(int, o.nonlinearity, TG_RNN_RELU));
    cr_assert(o.bias == false);
    tg_module_release(m);
}

/* Saved with torch's keys and loaded into a module drawn from another
 * seed, a GRU computes the same output; a copy too. */
Test(rnn_api, state_dict_round_trip)
{
    tg_rng rng;
    tg_rng_init(&rng, 21);
    tg_rnn_opts o = TG_RNN_OPTS_INIT;
    o.num_layers = 2;
    o.bidirectional = true;
    o.batch_first = true;
    tg_module *a = NULL, *b = NULL, *c = NULL;
    cr_assert(eq(int, tg_nn_gru_new(&a, 3, 4, &o, &rng), TG_OK));
    cr_assert(eq(int, tg_nn_gru_new(&b, 3, 4, &o, &rng), TG_OK));
    tg_st_file *f = NULL;
    char path[256];
    th_tmp_path(path, sizeof path, "gru.safetensors");
    cr_assert(eq(int, tg_st_new(&f), TG_OK));
    cr_assert(eq(int, tg_module_state_dict_save(a, f, NULL), TG_OK));
    cr_assert(eq(int, tg_safetensors_save(f, path), TG_OK));
    tg_st_free(f);
    cr_assert(eq(int, tg_safetensors_load(&f, path), TG_OK));
    cr_assert(tg_st_get(f, "weight_hh_l1_reverse") != NULL);
    cr_assert(tg_st_get(f, "bias_ih_l0") != NULL);
    cr_assert(eq(int, tg_module_load_state_dict(b, f, NULL, true), TG_OK), "%s",
              tg_error_message());
    cr_assert(eq(int, tg_module_copy(&c, a), TG_OK), "%s", tg_error_message());
    tg_tensor *x = th_rand_uniform(TG_F32, 3, (int64_t[]){2, 5, 3}, 9);
    tg_tensor *ya = NULL, *yb = NULL, *yc = NULL;
    cr_assert(eq(int, tg_module_forward(a, &ya, x), TG_OK));
    cr_assert(eq(int, tg_module_forward(b, &yb, x), TG_OK));
    cr_assert(eq(int, tg_module_forward(c, &yc, x), TG_OK));
    th_expect_shape(ya, 3, (int64_t[]){2, 5, 8});
    th_expect_close("loaded", yb, ya, 0);
    th_expect_close("copy", yc, ya, 0);
    th_release_all(4, (tg_tensor *[]){x, ya, yb, yc});
    tg_st_free(f);
    tg_module_release(a);
    tg_module_release(b);
    tg_module_release(c);
}

/* ---- dropout between layers ---- */

Test(rnn_api, dropout_acts_in_training_between_layers_only)
{
    tg_rng rng;
    tg_rng_init(&rng, 5);
    tg_rnn_opts o = TG_RNN_OPTS_INIT;
    o.num_layers = 2;
    o.dropout = 0.5;
    o.seed = 77;
    tg_module *m = NULL, *plain = NULL;
    cr_assert(eq(int, tg_nn_lstm_new(&m, 3, 4, &o, &rng), TG_OK));
    o.dropout = 0;
    cr_assert(eq(int, tg_nn_lstm_new(&plain, 3, 4, &o, &rng), TG_OK));
    tg_st_file *f = NULL;
    cr_assert(eq(int, tg_st_new(&f), TG_OK));
    cr_assert(eq(int, tg_module_state_dict_save(m, f, NULL), TG_OK));
    cr_assert(eq(int, tg_module_load_state_dict(plain, f, NULL, true), TG_OK));
    tg_tensor *x = th_rand_uniform(TG_F32, 3, (int64_t[]){6, 2, 3}, 8);
    tg_tensor *y1 = NULL, *y2 = NULL, *y3 = NULL, *ye = NULL, *yp = NULL;
    cr_assert(eq(int, tg_module_forward(plain, &yp, x), TG_OK));
    cr_assert(tg_module_is_training(m));
    cr_assert(eq(int, tg_module_forward(m, &y1, x), TG_OK));
    cr_assert(eq(int, tg_module_forward(m, &y2, x), TG_OK));
    /* training: the masks change the output, and differ between calls */
    cr_assert(th_first_difference(y1, yp) >= 0);
    cr_assert(th_first_difference(y1, y2) >= 0);
    tg_module_train(m, false);
    cr_assert(eq(int, tg_module_forward(m, &ye, x), TG_OK));
    th_expect_close("eval", ye, yp, 0);
    /* the k-th training forward's masks depend on (seed, k) alone */
    tg_module *again = NULL;
    cr_assert(eq(int, tg_module_copy(&again, m), TG_OK));
    tg_module_train(m, true);
    cr_assert(eq(int, tg_module_forward(m, &y3, x), TG_OK));
    tg_tensor *yk = NULL;
    tg_module_train(again, true);
    cr_assert(eq(int, tg_module_forward(again, &yk, x), TG_OK));
    th_expect_close("same count, same masks", yk, y3, 0);
    th_release_all(7, (tg_tensor *[]){x, y1, y2, y3, ye, yp, yk});
    tg_st_free(f);
    tg_module_release(m);
    tg_module_release(plain);
    tg_module_release(again);
}

/* ---- refusals ---- */

Test(rnn_api, constructors_refuse_bad_options)
{
    tg_rng rng;
    tg_rng_init(&rng, 1);
    tg_module *m = NULL;
    tg_rnn_opts o = TG_RNN_OPTS_INIT;
    o.proj_size = 2;
    th_expect_refused(tg_nn_gru_new(&m, 3, 4, &o, &rng), TG_EINVAL, "proj_size=2", NULL);
    cr_assert(strstr(tg_error_message(), "LSTM only") != NULL);
    o.proj_size = 4;
    th_expect_refused(tg_nn_lstm_new(&m, 3, 4, &o, &rng), TG_EINVAL,
                      "proj_size=4 must be in [0, hidden_size=4)", NULL);
    o = (tg_rnn_opts)TG_RNN_OPTS_INIT;
    o.dropout = 1.5;
    th_expect_refused(tg_nn_rnn_new(&m, 3, 4, &o, &rng), TG_EINVAL, "dropout=1.5", NULL);
    o.dropout = NAN;
    th_expect_refused(tg_nn_rnn_new(&m, 3, 4, &o, &rng), TG_EINVAL, "dropout", NULL);
    o = (tg_rnn_opts)TG_RNN_OPTS_INIT;
    o.num_layers = 0;
    th_expect_refused(tg_nn_lstm_new(&m, 3, 4, &o, &rng), TG_EINVAL, "num_layers=0", NULL);
    o = (tg_rnn_opts)TG_RNN_OPTS_INIT;
    o.nonlinearity = TG_RNN_RELU;
    th_expect_refused(tg_nn_lstm_new(&m, 3, 4, &o, &rng), TG_EINVAL, "RNN only", NULL);
    th_expect_refused(tg_nn_gru_new(&m, 0, 4, NULL, &rng), TG_EINVAL, "input_size=0", NULL);
    th_expect_refused(tg_nn_lstm_cell_new(&m, 3, 0, true, &rng), TG_EINVAL, "hidden_size=0",
                      NULL);
    th_expect_refused(tg_nn_rnn_cell_new(&m, 3, 2, true, (tg_rnn_nonlinearity)7, &rng),
                      TG_EINVAL, "nonlinearity=7", NULL);
    th_expect_refused(tg_nn_gru_cell_new(&m, 3, 2, true, NULL), TG_EINVAL, "rng", NULL);
    cr_assert(m == NULL);
}

/* Every refusal of a forward names the argument, writes no output and
 * leaves the module as it was. */
Test(rnn_api, forwards_refuse_bad_arguments)
{
    tg_rng rng;
    tg_rng_init(&rng, 1);
    tg_rnn_opts o = TG_RNN_OPTS_INIT;
    o.num_layers = 2;
    o.bidirectional = true;
    tg_module *lstm = NULL, *gru = NULL, *cell = NULL;
    cr_assert(eq(int, tg_nn_lstm_new(&lstm, 3, 4, &o, &rng), TG_OK));
    o.batch_first = true;
    cr_assert(eq(int, tg_nn_gru_new(&gru, 3, 4, &o, &rng), TG_OK));
    cr_assert(eq(int, tg_nn_lstm_cell_new(&cell, 3, 4, true, &rng), TG_OK));
    tg_tensor *x = th_rand_uniform(TG_F32, 3, (int64_t[]){5, 2, 3}, 1);
    tg_tensor *x4 = th_rand_uniform(TG_F32, 4, (int64_t[]){5, 2, 3, 1}, 1);
    tg_tensor *xw = th_rand_uniform(TG_F32, 3, (int64_t[]){5, 2, 6}, 1);
    tg_tensor *x64 = th_rand_uniform(TG_F64, 3, (int64_t[]){5, 2, 3}, 1);
    tg_tensor *x0 = th_rand_uniform(TG_F32, 3, (int64_t[]){0, 2, 3}, 1);
    tg_tensor *h_ok = th_rand_uniform(TG_F32, 3, (int64_t[]){4, 2, 4}, 2);
    tg_tensor *h_bad = th_rand_uniform(TG_F32, 3, (int64_t[]){2, 2, 4}, 2);
    tg_tensor *h_2d = th_rand_uniform(TG_F32, 2, (int64_t[]){4, 4}, 2);
    tg_tensor *h64 = th_rand_uniform(TG_F64, 3, (int64_t[]){4, 2, 4}, 2);
    tg_tensor *y = NULL, *h = NULL, *c = NULL;
    th_expect_refused(tg_nn_lstm_forward(lstm, &y, &h, &h, x, NULL, NULL), TG_EINVAL,
                      "outputs 1 and 2 must be two different places", h);
    th_expect_refused(tg_nn_lstm_forward(lstm, &y, &h, &c, x4, NULL, NULL), TG_ESHAPE,
                      "input is (5, 2, 3, 1); it must be 3-d (L, N, input_size)", y);
    th_expect_refused(tg_nn_lstm_forward(lstm, &y, &h, &c, xw, NULL, NULL), TG_ESHAPE,
                      "last extent must be input_size=3", y);
    th_expect_refused(tg_nn_lstm_forward(lstm, &y, &h, &c, x0, NULL, NULL), TG_ESHAPE,
                      "must be >= 1", y);
    th_expect_refused(tg_nn_lstm_forward(lstm, &y, &h, &c, x64, NULL, NULL), TG_EDTYPE,
                      "input has dtype f64", y);
    th_expect_refused(tg_nn_lstm_forward(lstm, &y, &h, &c, x, h_bad, NULL), TG_ESHAPE,
                      "h_0 is (2, 2, 4); for a batched input it must be (D*num_layers, N, "
                      "H_out) = (4, 2, 4)", y);
    th_expect_refused(tg_nn_lstm_forward(lstm, &y, &h, &c, x, h_2d, NULL), TG_ESHAPE, "h_0",
                      y);
    th_expect_refused(tg_nn_lstm_forward(lstm, &y, &h, &c, x, h_ok, h_bad), TG_ESHAPE,
                      "c_0 is (2, 2, 4)", y);
    th_expect_refused(tg_nn_lstm_forward(lstm, &y, &h, &c, x, h64, NULL), TG_EDTYPE,
                      "h_0 has dtype f64", y);
    cr_assert(h == NULL && c == NULL);
    /* batch_first: x (N=5, L=2, 3) wants h_0 (4, 5, 4) */
    th_expect_refused(tg_nn_rnn_forward(gru, &y, &h, x, h_ok), TG_ESHAPE, "(4, 5, 4)", y);
    th_expect_refused(tg_nn_rnn_forward(lstm, &y, &h, x, NULL), TG_EINVAL,
                      "m is a LSTM module, not an RNN or GRU", y);
    th_expect_refused(tg_nn_lstm_forward(gru, &y, &h, &c, x, NULL, NULL), TG_EINVAL,
                      "not an LSTM", y);
    th_expect_refused(tg_nn_rnn_forward(NULL, &y, &h, x, NULL), TG_EINVAL, "m and input", y);
    th_expect_refused(tg_module_forward_n(lstm, &y, 2, (tg_tensor *[]){x, h_ok}), TG_EINVAL,
                      "forward takes (input) or (input, h_0, c_0); got 2 inputs", y);
    /* cells */
    tg_tensor *cx = th_rand_uniform(TG_F32, 2, (int64_t[]){2, 3}, 3);
    tg_tensor *cv = th_rand_uniform(TG_F32, 1, (int64_t[]){3}, 3);
    tg_tensor *ch = th_rand_uniform(TG_F32, 2, (int64_t[]){2, 4}, 3);
    tg_tensor *ch_bad = th_rand_uniform(TG_F32, 2, (int64_t[]){3, 4}, 3);
    th_expect_refused(tg_nn_lstm_cell_forward(cell, &h, &c, x, NULL, NULL), TG_ESHAPE,
                      "it must be 2-d (N, input_size) or 1-d unbatched", h);
    th_expect_refused(tg_nn_lstm_cell_forward(cell, &h, &c, cx, ch_bad, NULL), TG_ESHAPE,
                      "hx is (3, 4); for an input of batch N=2 it must be (N, hidden_size) = "
                      "(2, 4)", h);
    th_expect_refused(tg_nn_lstm_cell_forward(cell, &h, &c, cx, ch, ch_bad), TG_ESHAPE,
                      "cx is (3, 4)", h);
    th_expect_refused(tg_nn_lstm_cell_forward(cell, &h, &c, cv, ch, NULL), TG_ESHAPE,
                      "for an unbatched input it must be (hidden_size) = (4)", h);
    th_expect_refused(tg_nn_rnn_cell_forward(cell, &h, cx, NULL), TG_EINVAL,
                      "not an RNNCell or GRUCell", h);
    th_expect_refused(tg_nn_rnn_cell_forward(lstm, &h, cx, NULL), TG_EINVAL, "LSTM module",
                      h);
    cr_assert(c == NULL);
    th_expect_refused(tg_nn_rnn_options(NULL, NULL, NULL, NULL), TG_EINVAL,
                      "m must not be NULL", NULL);
    tg_module *lin = NULL;
    cr_assert(eq(int, tg_nn_linear_new(&lin, 2, 2, true, &rng), TG_OK));
    th_expect_refused(tg_nn_rnn_options(lin, NULL, NULL, NULL), TG_EINVAL,
                      "Linear module, not a recurrent one", NULL);
    th_release_all(9, (tg_tensor *[]){x, x4, xw, x64, x0, h_ok, h_bad, h_2d, h64});
    th_release_all(4, (tg_tensor *[]){cx, cv, ch, ch_bad});
    tg_module_release(lin);
    tg_module_release(lstm);
    tg_module_release(gru);
    tg_module_release(cell);
}

/* The ONNX exporter has no form for the cells: it refuses them by name,
 * writing no file. */
/* sum(y) + sum(h) (+ sum(c)), backpropagated; any may be NULL. */
static void backprop_sums(tg_tensor *y, tg_tensor *h, tg_tensor *c)
{
    tg_tensor *t[3] = {y, h, c}, *tot = NULL;
    for (int i = 0; i < 3; i++) {
        if (!t[i]) continue;
        tg_tensor *si = NULL, *acc = NULL;
        cr_assert(eq(int, tg_sum(&si, t[i]), TG_OK));
        if (tot) {
            cr_assert(eq(int, tg_add(&acc, tot, si), TG_OK));
            th_release_all(2, (tg_tensor *[]){tot, si});
            tot = acc;
        } else {
            tot = si;
        }
    }
    cr_assert(eq(int, tg_backward(tot, NULL, NULL), TG_OK), "%s", tg_error_message());
    tg_tensor_release(tot);
}

/* Every parameter of m has a gradient of its shape, all zeros (torch's
 * for an empty batch). */
static void expect_zero_param_grads(tg_module *m, const char *what)
{
    tg_tensor **ps = NULL;
    int np = 0;
    cr_assert(eq(int, tg_module_parameters(m, &ps, &np), TG_OK));
    for (int i = 0; i < np; i++) {
        const tg_tensor *g = tg_tensor_grad(ps[i]);
        cr_assert_not_null(g, "%s: parameter %d has no gradient", what, i);
        th_expect_shape(g, tg_tensor_ndim(ps[i]), tg_tensor_shape(ps[i]));
        for (int64_t j = 0; j < tg_tensor_numel(g); j++)
            cr_assert(th_at(g, j) == 0.0, "%s: parameter %d", what, i);
    }
    free(ps);
}

/* A batch of N = 0, as torch 1.13: output (L, 0, D H_out) ((0, L, D H_out)
 * batch first), h_n (D num_layers, 0, H_out), c_n (D num_layers, 0, H);
 * backward gives the input and h_0 gradients of their (empty) shapes and
 * zero parameter gradients.  The cells give (0, H).  The sequence length
 * must still be >= 1, and the packed forwards refuse N = 0 (torch cannot
 * pack an empty batch). */
Test(rnn_api, a_batch_of_zero_gives_empty_outputs)
{
    tg_rng rng;
    tg_rng_init(&rng, 3);
    for (int kind = 0; kind < 3; kind++) {   /* RNN, LSTM (proj_size 2), GRU */
        for (int bf = 0; bf < 2; bf++) {
            tg_rnn_opts o = TG_RNN_OPTS_INIT;
            o.num_layers = 2;
            o.bidirectional = true;
            o.batch_first = bf;
            o.proj_size = kind == 1 ? 2 : 0;
            tg_module *m = NULL;
            if (kind == 0) OK(tg_nn_rnn_new(&m, 3, 4, &o, &rng));
            else if (kind == 1) OK(tg_nn_lstm_new(&m, 3, 4, &o, &rng));
            else OK(tg_nn_gru_new(&m, 3, 4, &o, &rng));
            const int64_t ho = kind == 1 ? 2 : 4;
            const int64_t xs[3] = {bf ? 0 : 5, bf ? 5 : 0, 3};
            tg_tensor *x = th_rand_uniform(TG_F32, 3, xs, 1);
            tg_tensor *h0 = th_rand_uniform(TG_F32, 3, (int64_t[]){4, 0, ho}, 2);
            OK(tg_tensor_set_requires_grad(x, true));
            OK(tg_tensor_set_requires_grad(h0, true));
            tg_tensor *y = NULL, *h = NULL, *c = NULL;
            if (kind == 1) OK(tg_nn_lstm_forward(m, &y, &h, &c, x, h0, NULL));
            else OK(tg_nn_rnn_forward(m, &y, &h, x, h0));
            th_expect_shape(y, 3, (int64_t[]){bf ? 0 : 5, bf ? 5 : 0, 2 * ho});
            th_expect_shape(h, 3, (int64_t[]){4, 0, ho});
            if (kind == 1) th_expect_shape(c, 3, (int64_t[]){4, 0, 4});
            backprop_sums(y, h, c);
            cr_assert_not_null(tg_tensor_grad(x));
            th_expect_shape(tg_tensor_grad(x), 3, xs);
            cr_assert_not_null(tg_tensor_grad(h0));
            th_expect_shape(tg_tensor_grad(h0), 3, (int64_t[]){4, 0, ho});
            expect_zero_param_grads(m, kind == 0 ? "RNN" : kind == 1 ? "LSTM" : "GRU");
            tg_tensor *lens = th_tensor_from(TG_I64, 1, (int64_t[]){0}, NULL), *yp = NULL;
            if (kind == 1)
                th_expect_refused(tg_nn_lstm_forward_packed(m, &yp, NULL, NULL, x, lens, NULL,
                                                            NULL),
                                  TG_ESHAPE, "torch cannot pack an empty batch", yp);
            else
                th_expect_refused(tg_nn_rnn_forward_packed(m, &yp, NULL, x, lens, NULL),
                                  TG_ESHAPE, "torch cannot pack an empty batch", yp);
            th_release_all(6, (tg_tensor *[]){x, h0, y, h, c, lens});
            tg_module_release(m);
        }
    }
    tg_module *cells[3] = {NULL, NULL, NULL};
    OK(tg_nn_rnn_cell_new(&cells[0], 3, 4, true, TG_RNN_TANH, &rng));
    OK(tg_nn_lstm_cell_new(&cells[1], 3, 4, true, &rng));
    OK(tg_nn_gru_cell_new(&cells[2], 3, 4, true, &rng));
    for (int i = 0; i < 3; i++) {
        tg_tensor *x = th_rand_uniform(TG_F32, 2, (int64_t[]){0, 3}, 4), *h = NULL, *c = NULL;
        OK(tg_tensor_set_requires_grad(x, true));
        if (i == 1) OK(tg_nn_lstm_cell_forward(cells[i], &h, &c, x, NULL, NULL));
        else OK(tg_nn_rnn_cell_forward(cells[i], &h, x, NULL));
        th_expect_shape(h, 2, (int64_t[]){0, 4});
        if (i == 1) th_expect_shape(c, 2, (int64_t[]){0, 4});
        backprop_sums(h, c, NULL);
        th_expect_shape(tg_tensor_grad(x), 2, (int64_t[]){0, 3});
        expect_zero_param_grads(cells[i], "cell");
        th_release_all(3, (tg_tensor *[]){x, h, c});
        tg_module_release(cells[i]);
    }
}

Test(rnn_api, onnx_export_writes_cells)
{
    tg_rng rng;
    tg_rng_init(&rng, 1);
    tg_module *m = NULL;
    cr_assert(eq(int, tg_nn_gru_cell_new(&m, 3, 4, true, &rng), TG_OK));
    tg_tensor *x = th_rand_uniform(TG_F32, 2, (int64_t[]){2, 3}, 1);
    char path[256];
    th_tmp_path(path, sizeof path, "gru_cell.onnx");
    int rc = tg_onnx_export(m, x, path, NULL);
    const bool onnx = tg_onnx_available();
    cr_assert(eq(int, rc, onnx ? TG_OK : TG_EUNSUPPORTED), "%s", tg_error_message());
    cr_assert(th_exists(path) == onnx);
    tg_tensor_release(x);
    tg_module_release(m);
}

/* Inside a scope, a forward's results belong to the scope, and only
 * they: the ones asked for. */
Test(rnn_api, scope_captures_the_results_only)
{
    tg_rng rng;
    tg_rng_init(&rng, 1);
    tg_module *m = NULL;
    cr_assert(eq(int, tg_nn_lstm_new(&m, 3, 4, NULL, &rng), TG_OK));
    tg_tensor *x = th_rand_uniform(TG_F32, 2, (int64_t[]){5, 3}, 1);
    tg_tensor *y = NULL, *c = NULL;
    cr_assert(eq(int, tg_scope_begin(), TG_OK));
    cr_assert(eq(int, tg_nn_lstm_forward(m, &y, NULL, &c, x, NULL, NULL), TG_OK));
    cr_assert(eq(int, tg_scope_size(), 2));
    th_expect_shape(y, 2, (int64_t[]){5, 4});
    th_expect_shape(c, 2, (int64_t[]){1, 4});
    cr_assert(eq(int, tg_scope_end(), TG_OK));
    tg_tensor_release(x);
    tg_module_release(m);
}

/* Recomputed (tg_module_forward_recompute), a layer with dropout draws in
 * the backward the masks of its forward: its values and gradients are
 * those of a plain run of a copy, and the count goes on as the copy's. */
Test(rnn_api, dropout_masks_survive_recomputation)
{
    tg_rng rng;
    tg_rng_init(&rng, 5);
    tg_rnn_opts o = TG_RNN_OPTS_INIT;
    o.num_layers = 3;
    o.dropout = 0.4;
    o.seed = 9;
    tg_module *m = NULL, *c = NULL;
    cr_assert(eq(int, tg_nn_gru_new(&m, 3, 4, &o, &rng), TG_OK));
    cr_assert(eq(int, tg_module_copy(&c, m), TG_OK));
    tg_tensor *x = th_rand_uniform(TG_F32, 3, (int64_t[]){4, 2, 3}, 8);
    tg_tensor *gy = th_rand_uniform(TG_F32, 3, (int64_t[]){4, 2, 4}, 9);
    tg_tensor *ym = NULL, *yc = NULL, *zm = NULL, *zc = NULL;
    cr_assert(eq(int, tg_module_forward_recompute(m, &ym, x), TG_OK), "%s", tg_error_message());
    cr_assert(eq(int, tg_module_forward(c, &yc, x), TG_OK));
    th_expect_close("y", ym, yc, 0);
    th_backward_with(ym, gy);
    th_backward_with(yc, gy);
    const char *names[] = {"weight_ih_l0", "weight_hh_l1", "bias_hh_l2"};
    for (int i = 0; i < 3; i++)
        th_expect_close(names[i], tg_tensor_grad(tg_module_find(m, names[i])),
                        tg_tensor_grad(tg_module_find(c, names[i])), 0);
    cr_assert(eq(int, tg_module_forward(m, &zm, x), TG_OK));
    cr_assert(eq(int, tg_module_forward(c, &zc, x), TG_OK));
    th_expect_close("next forward", zm, zc, 0);
    cr_assert(th_first_difference(zm, ym) >= 0);
    th_release_all(6, (tg_tensor *[]){x, gy, ym, yc, zm, zc});
    tg_module_release(m);
    tg_module_release(c);
}

/* A checkpoint keeps a layer's count of dropout masks (metadata
 * "<slot>.dropout_calls", as a Dropout's), so a resumed run draws the
 * masks the uninterrupted one would have. */
Test(rnn_api, checkpoint_keeps_the_dropout_count)
{
    tg_rng rng;
    tg_rng_init(&rng, 5);
    tg_rnn_opts o = TG_RNN_OPTS_INIT;
    o.num_layers = 2;
    o.dropout = 0.5;
    o.seed = 3;
    tg_module *m = NULL, *r = NULL;
    cr_assert(eq(int, tg_nn_rnn_new(&m, 3, 4, &o, &rng), TG_OK));
    cr_assert(eq(int, tg_nn_rnn_new(&r, 3, 4, &o, &rng), TG_OK));
    tg_tensor *x = th_rand_uniform(TG_F32, 3, (int64_t[]){4, 2, 3}, 8);
    tg_tensor *y = NULL, *want = NULL, *got = NULL;
    cr_assert(eq(int, tg_module_forward(m, &y, x), TG_OK));
    char path[256];
    th_tmp_path(path, sizeof path, "ck.safetensors");
    tg_checkpoint *ck = NULL, *ck2 = NULL;
    cr_assert(eq(int, tg_checkpoint_new(&ck), TG_OK));
    cr_assert(eq(int, tg_checkpoint_add_module(ck, "model", m), TG_OK));
    cr_assert(eq(int, tg_checkpoint_save(ck, path, NULL), TG_OK), "%s", tg_error_message());
    cr_assert(eq(int, tg_module_forward(m, &want, x), TG_OK));
    tg_st_file *f = NULL;
    cr_assert(eq(int, tg_safetensors_load(&f, path), TG_OK));
    const char *calls = tg_st_meta_get(f, "model.dropout_calls");
    cr_assert(calls && strcmp(calls, "1") == 0, "model.dropout_calls is %s",
              calls ? calls : "missing");
    cr_assert(eq(int, tg_checkpoint_new(&ck2), TG_OK));
    cr_assert(eq(int, tg_checkpoint_add_module(ck2, "model", r), TG_OK));
    cr_assert(eq(int, tg_checkpoint_load(ck2, path), TG_OK), "%s", tg_error_message());
    cr_assert(eq(int, tg_module_forward(r, &got, x), TG_OK));
    th_expect_close("resumed", got, want, 0);
    th_release_all(4, (tg_tensor *[]){x, y, want, got});
    tg_st_free(f);
    tg_checkpoint_free(ck);
    tg_checkpoint_free(ck2);
    tg_module_release(m);
    tg_module_release(r);
}

/* An LSTM's h_0 and c_0 may each be given alone (nn.h): the absent one is
 * zeros, the same values as zeros given. */
Test(rnn_api, lstm_takes_h_0_or_c_0_alone)
{
    tg_rng rng;
    tg_rng_init(&rng, 6);
    tg_rnn_opts o = TG_RNN_OPTS_INIT;
    o.bidirectional = true;
    o.proj_size = 2;
    tg_module *m = NULL;
    cr_assert(eq(int, tg_nn_lstm_new(&m, 3, 4, &o, &rng), TG_OK));
    tg_tensor *x = th_rand_uniform(TG_F32, 3, (int64_t[]){4, 2, 3}, 1);
    tg_tensor *h0 = th_rand_uniform(TG_F32, 3, (int64_t[]){2, 2, 2}, 2);
    tg_tensor *c0 = th_rand_uniform(TG_F32, 3, (int64_t[]){2, 2, 4}, 3);
    tg_tensor *hz = NULL, *cz = NULL;
    cr_assert(eq(int, tg_tensor_zeros_like(&hz, h0), TG_OK));
    cr_assert(eq(int, tg_tensor_zeros_like(&cz, c0), TG_OK));
    tg_tensor *const pairs[2][4] = {{h0, NULL, h0, cz}, {NULL, c0, hz, c0}};
    for (int i = 0; i < 2; i++) {
        tg_tensor *a[3] = {NULL, NULL, NULL}, *b[3] = {NULL, NULL, NULL};
        cr_assert(eq(int, tg_nn_lstm_forward(m, &a[0], &a[1], &a[2], x, pairs[i][0],
                                             pairs[i][1]), TG_OK), "%s", tg_error_message());
        cr_assert(eq(int, tg_nn_lstm_forward(m, &b[0], &b[1], &b[2], x, pairs[i][2],
                                             pairs[i][3]), TG_OK), "%s", tg_error_message());
        for (int j = 0; j < 3; j++) th_expect_close("one state alone", a[j], b[j], 0);
        th_release_all(3, a);
        th_release_all(3, b);
    }
    th_release_all(5, (tg_tensor *[]){x, h0, c0, hz, cz});
    tg_module_release(m);
}
