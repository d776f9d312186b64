/* tests/test_rnn.c - nn.RNNCell, nn.LSTMCell, nn.GRUCell, nn.RNN, nn.LSTM
 * and nn.GRU: PyTorch 1.13's outputs, final states and the gradients of
 * the input, the initial states and every parameter, in f32 and f64, over
 * one and two layers, bidirectional, batch_first, unbatched inputs, given
 * and absent states, bias=False, relu and an LSTM projection
 * (tests/golden/rnn.safetensors, written by scripts/make_rnn_goldens.py,
 * whose state dicts load under torch's keys); the same cases in f16 and
 * bf16 against torch's exact (f64) answers for their values, within a
 * tolerance of the dtype's unit roundoff; f64 gradcheck to second
 * order of a cell and two-layer bidirectional layers (the rest of the API:
 * tests/test_rnn_api.c). */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <string.h>

#include "helpers.h"
#include "rnn_fixtures.h"
#include "tapegrad/tapegrad.h"

TestSuite(rnn);

/* A golden case's configuration (the script's "C.cfg"). */
typedef struct cfg {
    char kind[16];
    long long in, hidden, layers, bidir, bf, bias, relu, proj, batched, has_state;
} cfg;

static cfg cfg_of(const tg_st_file *f, const char *c)
{
    cfg k;
    int n = sscanf(th_golden_meta(f, c, "cfg"), "%15s %lld %lld %lld %lld %lld %lld %lld %lld "
                                                 "%lld %lld",
                   k.kind, &k.in, &k.hidden, &k.layers, &k.bidir, &k.bf, &k.bias, &k.relu,
                   &k.proj, &k.batched, &k.has_state);
    cr_assert(eq(int, n, 11));
    return k;
}

static bool is_cell(const cfg *k) { return strstr(k->kind, "_cell") != NULL; }
static bool is_lstm(const cfg *k) { return strncmp(k->kind, "lstm", 4) == 0; }

static tg_module *make(const cfg *k, tg_dtype dt, uint64_t seed)
{
    tg_rng rng;
    tg_rng_init(&rng, seed);
    tg_module *m = NULL;
    tg_rnn_opts o = TG_RNN_OPTS_INIT;
    o.num_layers = (int)k->layers;
    o.bidirectional = k->bidir;
    o.batch_first = k->bf;
    o.bias = k->bias;
    o.proj_size = k->proj;
    o.nonlinearity = k->relu ? TG_RNN_RELU : TG_RNN_TANH;
    int rc;
    if (!strcmp(k->kind, "rnn_cell"))
        rc = tg_nn_rnn_cell_new(&m, k->in, k->hidden, k->bias, o.nonlinearity, &rng);
    else if (!strcmp(k->kind, "lstm_cell"))
        rc = tg_nn_lstm_cell_new(&m, k->in, k->hidden, k->bias, &rng);
    else if (!strcmp(k->kind, "gru_cell"))
        rc = tg_nn_gru_cell_new(&m, k->in, k->hidden, k->bias, &rng);
    else if (!strcmp(k->kind, "rnn"))
        rc = tg_nn_rnn_new(&m, k->in, k->hidden, &o, &rng);
    else if (!strcmp(k->kind, "lstm"))
        rc = tg_nn_lstm_new(&m, k->in, k->hidden, &o, &rng);
    else
        rc = tg_nn_gru_new(&m, k->in, k->hidden, &o, &rng);
    cr_assert(eq(int, rc, TG_OK), "%s", tg_error_message());
    if (dt != TG_F32) cr_assert(eq(int, tg_module_to_dtype(m, dt), TG_OK));
    return m;
}

/* Runs module m of configuration k: r[0] y (a cell's h), r[1] h_n, r[2]
 * c_n (a cell's c), NULL where there is none. */
static int run(tg_module *m, const cfg *k, tg_tensor **r, tg_tensor *x, tg_tensor *h0,
               tg_tensor *c0)
{
    r[0] = r[1] = r[2] = NULL;
    if (is_cell(k))
        return is_lstm(k) ? tg_nn_lstm_cell_forward(m, &r[0], &r[2], x, h0, c0)
                          : tg_nn_rnn_cell_forward(m, &r[0], x, h0);
    return is_lstm(k) ? tg_nn_lstm_forward(m, &r[0], &r[1], &r[2], x, h0, c0)
                      : tg_nn_rnn_forward(m, &r[0], &r[1], x, h0);
}

/* Tolerances relative to the largest |want| of each tensor.  The values
 * are sums of at most a few dozen products of O(1) numbers through
 * tanh/sigmoid, computed by the same formulas as torch's but with other
 * BLAS kernels, so they differ by a few ulps: f32 a few 1e-7, f64 a few
 * 1e-16.  A wrong gate order, a lost term or a wrong direction changes
 * them by O(0.1). */
static double tol(tg_dtype dt)
{
    /* f16 and bf16: 16 unit roundoffs (2^-11, 2^-8), the exact answer
     * being torch's f64 one for the same values; torch's own bf16 RNNs are
     * within 6 of them on these cases (the steps round their gates and
     * states to the dtype; the gradients sum over the steps) */
    switch (dt) {
    case TG_F16: return 16 * 0x1p-11;
    case TG_BF16: return 16 * 0x1p-8;
    case TG_F32: return 2e-5;
    default: return 1e-12;
    }
}

/* The dtype of the file's prefix tn ("f32", "f64", "f16", "bf16"). */
static tg_dtype dtype_of(const char *tn)
{
    if (!strcmp(tn, "f32")) return TG_F32;
    if (!strcmp(tn, "f16")) return TG_F16;
    return strcmp(tn, "bf16") ? TG_F64 : TG_BF16;
}

static void check_case(const tg_st_file *f, const char *tn, const char *c)
{
    const tg_dtype dt = dtype_of(tn);
    const cfg k = cfg_of(f, c);
    char pre[96], key[512];
    snprintf(pre, sizeof pre, "%s.%s", tn, c);
    tg_module *m = make(&k, dt, 7);
    snprintf(key, sizeof key, "%s.sd", pre);
    cr_assert(eq(int, tg_module_load_state_dict(m, f, key, true), TG_OK), "%s: %s", c,
              tg_error_message());
    tg_tensor *x = th_leaf_clone(th_golden_get(f, pre, "x"));
    tg_tensor *h0 = k.has_state ? th_leaf_clone(th_golden_get(f, pre, "h0")) : NULL;
    tg_tensor *c0 = k.has_state && is_lstm(&k) ? th_leaf_clone(th_golden_get(f, pre, "c0"))
                                                 : NULL;
    tg_tensor *r[3], *g[3] = {NULL, NULL, NULL};
    cr_assert(eq(int, run(m, &k, r, x, h0, c0), TG_OK), "%s: %s", c, tg_error_message());
    static const char *const rn[3] = {"y", "hn", "cn"}, *const gn[3] = {"gy", "ghn", "gcn"};
    for (int i = 0; i < 3; i++) {
        if (!r[i]) continue;
        snprintf(key, sizeof key, "%s %s", pre, rn[i]);
        th_expect_golden_in(key, r[i], th_golden_get(f, pre, rn[i]), tol(dt));
        g[i] = (tg_tensor *)th_golden_get(f, pre, gn[i]);
    }
    tg_tensor *loss = th_weighted_sum(3, r, g);
    cr_assert(eq(int, tg_backward(loss, NULL, NULL), TG_OK), "%s", tg_error_message());
    th_expect_golden_grads(f, pre, m, (tg_tensor *const[3]){x, h0, c0}, tol(dt));
    th_release_all(3, r);
    th_release_all(4, (tg_tensor *[]){loss, x, h0, c0});
    tg_module_release(m);
}

static const char *const cases[] = {
    "rnn_cell", "rnn_cell_relu", "rnn_cell_nobias_nostate", "rnn_cell_unbatched",
    "lstm_cell", "lstm_cell_nostate", "lstm_cell_unbatched_nobias", "gru_cell",
    "gru_cell_nostate", "gru_cell_unbatched_nobias", "rnn", "rnn_relu_2l_nostate",
    "rnn_bidir_bf", "rnn_2l_bidir_unbatched_nobias", "lstm", "lstm_nostate", "lstm_2l_bidir",
    "lstm_2l_bf_nobias", "lstm_unbatched_bidir_nostate", "lstm_proj_2l_bidir", "gru",
    "gru_2l_bidir_bf", "gru_2l_nostate_nobias", "gru_unbatched"};
#define N_CASES ((int)(sizeof cases / sizeof *cases))

Test(rnn, cells_match_torch_in_f32_and_f64)
{
    tg_st_file *f = th_golden_load("rnn.safetensors");
    for (int t = 0; t < 2; t++)
        for (int i = 0; i < N_CASES; i++)
            if (strstr(cases[i], "_cell")) check_case(f, t ? "f64" : "f32", cases[i]);
    tg_st_free(f);
}

Test(rnn, layers_match_torch_in_f32_and_f64)
{
    tg_st_file *f = th_golden_load("rnn.safetensors");
    for (int t = 0; t < 2; t++)
        for (int i = 0; i < N_CASES; i++)
            if (!strstr(cases[i], "_cell")) check_case(f, t ? "f64" : "f32", cases[i]);
    tg_st_free(f);
}

/* Every case, cells and layers, in f16 and bf16: forward, backward and
 * every gradient near torch's exact answers for the same values. */
Test(rnn, half_dtypes_are_near_the_exact_answers)
{
    tg_st_file *f = th_golden_load("rnn.safetensors");
    for (int t = 0; t < 2; t++)
        for (int i = 0; i < N_CASES; i++) check_case(f, t ? "bf16" : "f16", cases[i]);
    tg_st_free(f);
}

/* tg_module_forward gives the output from zero states, and
 * tg_module_forward_n takes the states: the same values as the module's
 * own forward functions. */
Test(rnn, module_forward_is_the_output)
{
    tg_st_file *f = th_golden_load("rnn.safetensors");
    static const char *const which[] = {"lstm_2l_bidir", "gru_2l_bidir_bf", "rnn", "lstm_cell",
                                        "gru_cell"};
    for (int i = 0; i < 5; i++) {
        const cfg k = cfg_of(f, which[i]);
        char pre[96], key[128];
        snprintf(pre, sizeof pre, "f64.%s", which[i]);
        tg_module *m = make(&k, TG_F64, 7);
        snprintf(key, sizeof key, "%s.sd", pre);
        cr_assert(eq(int, tg_module_load_state_dict(m, f, key, true), TG_OK));
        tg_tensor *x = th_golden_at(f, "%s.%s", pre, "x");
        tg_tensor *h0 = th_golden_at(f, "%s.%s", pre, "h0");
        tg_tensor *c0 = is_lstm(&k) ? th_golden_at(f, "%s.%s", pre, "c0") : NULL;
        tg_tensor *y = NULL, *y2 = NULL, *r[3];
        cr_assert(eq(int, tg_module_forward_n(m, &y, is_lstm(&k) ? 3 : 2,
                                              (tg_tensor *[]){x, h0, c0}), TG_OK),
                  "%s", tg_error_message());
        th_expect_close(which[i], y, th_golden_get(f, pre, "y"), 1e-12);
        cr_assert(eq(int, tg_module_forward(m, &y2, x), TG_OK), "%s", tg_error_message());
        cr_assert(eq(int, run(m, &k, r, x, NULL, NULL), TG_OK));
        th_expect_close(which[i], y2, r[0], 0);
        th_release_all(3, r);
        th_release_all(2, (tg_tensor *[]){y, y2});
        tg_module_release(m);
    }
    tg_st_free(f);
}

/* ---- gradcheck ---- */

/* inputs: x, h, c for an LSTMCell (the parameters are checked through
 * the module's own tensors, inputs[3..)); out: cat(h', c'). */
static int lstm_cell_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    tg_tensor *h = NULL, *c = NULL;
    int rc = tg_nn_lstm_cell_forward(user, &h, &c, in[0], in[1], in[2]);
    if (rc >= 0) rc = tg_cat(out, 2, (tg_tensor *[]){h, c}, 1);
    th_release_all(2, (tg_tensor *[]){h, c});
    return rc;
}

/* inputs: x (L, N, in), h_0 for a GRU; out: cat(output, h_n) flattened. */
static int gru_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    tg_tensor *y = NULL, *h = NULL, *a = NULL, *b = NULL;
    int rc = tg_nn_rnn_forward(user, &y, &h, in[0], in[1]);
    if (rc >= 0) rc = tg_reshape(&a, y, 1, (int64_t[]){-1});
    if (rc >= 0) rc = tg_reshape(&b, h, 1, (int64_t[]){-1});
    if (rc >= 0) rc = tg_cat(out, 2, (tg_tensor *[]){a, b}, 0);
    th_release_all(4, (tg_tensor *[]){y, h, a, b});
    return rc;
}

/* inputs: x, h_0, c_0 for an LSTM; out: cat(output, h_n, c_n) flattened. */
static int lstm_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    tg_tensor *r[3] = {NULL, NULL, NULL}, *flat[3] = {NULL, NULL, NULL};
    int rc = tg_nn_lstm_forward(user, &r[0], &r[1], &r[2], in[0], in[1], in[2]);
    for (int i = 0; i < 3 && rc >= 0; i++) rc = tg_reshape(&flat[i], r[i], 1, (int64_t[]){-1});
    if (rc >= 0) rc = tg_cat(out, 3, flat, 0);
    th_release_all(3, r);
    th_release_all(3, flat);
    return rc;
}

/* The inputs of a gradcheck: the n_in tensors, then m's parameters. */
static int with_params(tg_tensor **all, int n_in, tg_tensor *const *in, tg_module *m)
{
    for (int i = 0; i < n_in; i++) all[i] = in[i];
    tg_tensor **ps = NULL;
    int np = 0;
    cr_assert(eq(int, tg_module_parameters(m, &ps, &np), TG_OK));
    for (int i = 0; i < np; i++) all[n_in + i] = ps[i];
    free(ps);
    return n_in + np;
}

static tg_tensor *leaf(int nd, const int64_t *shape, uint64_t seed)
{
    tg_tensor *t = th_rand_uniform(TG_F64, nd, shape, seed);
    tg_tensor_set_requires_grad(t, true);
    return t;
}

/* gradcheck over the n_in inputs and every parameter of m; gradgradcheck
 * (which takes at most 8 inputs) over the inputs and the parameters named
 * in second[0..n2). */
static void gradchecks(tg_gradcheck_fn fn, tg_module *m, int n_in, tg_tensor *const *in,
                       int n2, const char *const *second)
{
    tg_tensor *all[64];
    const int n = with_params(all, n_in, in, m);
    tg_gradcheck_opts o = TG_GRADCHECK_OPTS_INIT;
    cr_assert(eq(int, tg_gradcheck(fn, m, n, all, &o), TG_OK), "%s", tg_error_message());
    for (int i = 0; i < n2; i++) {
        all[n_in + i] = tg_module_find(m, second[i]);
        cr_assert(all[n_in + i] != NULL, "%s", second[i]);
    }
    cr_assert(eq(int, tg_gradgradcheck(fn, m, n_in + n2, all, &o), TG_OK), "%s",
              tg_error_message());
}

Test(rnn, lstm_cell_gradcheck_f64_first_and_second_order)
{
    tg_rng rng;
    tg_rng_init(&rng, 11);
    tg_module *m = NULL;
    cr_assert(eq(int, tg_nn_lstm_cell_new(&m, 3, 2, true, &rng), TG_OK));
    cr_assert(eq(int, tg_module_to_dtype(m, TG_F64), TG_OK));
    tg_tensor *in[3] = {leaf(2, (int64_t[]){2, 3}, 1), leaf(2, (int64_t[]){2, 2}, 2),
                        leaf(2, (int64_t[]){2, 2}, 3)};
    static const char *const ps[] = {"weight_ih", "weight_hh", "bias_ih", "bias_hh"};
    gradchecks(lstm_cell_fn, m, 3, in, 4, ps);
    th_release_all(3, in);
    tg_module_release(m);
}

Test(rnn, two_layer_bidirectional_gradcheck_f64_first_and_second_order)
{
    tg_rng rng;
    tg_rng_init(&rng, 12);
    tg_rnn_opts o = TG_RNN_OPTS_INIT;
    o.num_layers = 2;
    o.bidirectional = true;
    tg_module *gru = NULL, *lstm = NULL;
    cr_assert(eq(int, tg_nn_gru_new(&gru, 2, 2, &o, &rng), TG_OK));
    cr_assert(eq(int, tg_module_to_dtype(gru, TG_F64), TG_OK));
    tg_tensor *in[3] = {leaf(3, (int64_t[]){3, 2, 2}, 4), leaf(3, (int64_t[]){4, 2, 2}, 5),
                        leaf(3, (int64_t[]){4, 2, 2}, 6)};
    static const char *const gp[] = {"weight_ih_l0",         "weight_hh_l0_reverse",
                                     "bias_hh_l0",           "weight_ih_l1_reverse",
                                     "weight_hh_l1",         "bias_hh_l1_reverse"};
    gradchecks(gru_fn, gru, 2, in, 6, gp);
    o.proj_size = 1;
    cr_assert(eq(int, tg_nn_lstm_new(&lstm, 2, 2, &o, &rng), TG_OK));
    cr_assert(eq(int, tg_module_to_dtype(lstm, TG_F64), TG_OK));
    tg_tensor *h0 = leaf(3, (int64_t[]){4, 2, 1}, 7);
    static const char *const lp[] = {"weight_hr_l0", "weight_hh_l0_reverse", "weight_ih_l1",
                                     "bias_ih_l1_reverse", "weight_hr_l1_reverse"};
    gradchecks(lstm_fn, lstm, 3, (tg_tensor *[]){in[0], h0, in[2]}, 5, lp);
    th_release_all(4, (tg_tensor *[]){in[0], in[1], in[2], h0});
    tg_module_release(gru);
    tg_module_release(lstm);
}
