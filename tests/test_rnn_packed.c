/* tests/test_rnn_packed.c - nn.RNN, nn.LSTM and nn.GRU over sequences of
 * different lengths (tg_nn_rnn_forward_packed, tg_nn_lstm_forward_packed):
 * PyTorch 1.13's pack_padded_sequence (enforce_sorted=False) -> module ->
 * pad_packed_sequence(total_length=L) outputs, final states and gradients
 * of the input, the states and every parameter in f32 and f64
 * (tests/golden/rnn_packed.safetensors, scripts/make_rnn_packed_goldens.py);
 * f64 gradcheck to second order; every length L is the plain forward; a
 * row's results are those of its valid steps alone, whatever its padding
 * holds; dropout between layers; refusals. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <string.h>

#include "helpers.h"
#include "rnn_fixtures.h"
#include "tapegrad/tapegrad.h"

TestSuite(rnn_packed);

/* A golden case's configuration (the script's "C.cfg"). */
typedef struct cfg {
    char kind[16];
    long long in, hidden, layers, bidir, bf, proj, has_state;
} cfg;

static cfg cfg_of(const tg_st_file *f, const char *c)
{
    cfg k;
    int n = sscanf(th_golden_meta(f, c, "cfg"), "%15s %lld %lld %lld %lld %lld %lld %lld",
                   k.kind, &k.in, &k.hidden, &k.layers, &k.bidir, &k.bf, &k.proj,
                   &k.has_state);
    cr_assert(eq(int, n, 8));
    return k;
}

static bool is_lstm(const char *kind) { return strcmp(kind, "lstm") == 0; }

static tg_module *make(const char *kind, int64_t in, int64_t hidden, const tg_rnn_opts *o,
                       tg_dtype dt, uint64_t seed)
{
    tg_rng rng;
    tg_rng_init(&rng, seed);
    tg_module *m = NULL;
    int rc = !strcmp(kind, "rnn")    ? tg_nn_rnn_new(&m, in, hidden, o, &rng)
             : !strcmp(kind, "lstm") ? tg_nn_lstm_new(&m, in, hidden, o, &rng)
                                     : tg_nn_gru_new(&m, in, hidden, o, &rng);
    cr_assert(eq(int, rc, TG_OK), "%s", tg_error_message());
    if (dt != TG_F32) cr_assert(eq(int, tg_module_to_dtype(m, dt), TG_OK));
    return m;
}

static tg_module *make_cfg(const cfg *k, tg_dtype dt)
{
    tg_rnn_opts o = TG_RNN_OPTS_INIT;
    o.num_layers = (int)k->layers;
    o.bidirectional = k->bidir;
    o.batch_first = k->bf;
    o.proj_size = k->proj;
    return make(k->kind, k->in, k->hidden, &o, dt, 7);
}

/* r[0] output, r[1] h_n, r[2] c_n (LSTM; NULL otherwise); lengths NULL:
 * the plain forward. */
static int run(tg_module *m, bool lstm, tg_tensor **r, tg_tensor *x, const tg_tensor *lengths,
               tg_tensor *h0, tg_tensor *c0)
{
    r[0] = r[1] = r[2] = NULL;
    if (!lengths)
        return lstm ? tg_nn_lstm_forward(m, &r[0], &r[1], &r[2], x, h0, c0)
                    : tg_nn_rnn_forward(m, &r[0], &r[1], x, h0);
    return lstm ? tg_nn_lstm_forward_packed(m, &r[0], &r[1], &r[2], x, lengths, h0, c0)
                : tg_nn_rnn_forward_packed(m, &r[0], &r[1], x, lengths, h0);
}

/* As tests/test_rnn.c's: a few ulps of sums of O(1) products, while a
 * wrong step, direction or mask changes values by O(0.1). */
static double tol(tg_dtype dt) { return dt == TG_F32 ? 2e-5 : 1e-12; }

static void check_case(const tg_st_file *f, const char *tn, const char *c)
{
    const tg_dtype dt = tn[1] == '3' ? TG_F32 : TG_F64;
    const cfg k = cfg_of(f, c);
    const bool lstm = is_lstm(k.kind);
    char pre[96], key[512];
    snprintf(pre, sizeof pre, "%s.%s", tn, c);
    tg_module *m = make_cfg(&k, dt);
    snprintf(key, sizeof key, "%s.sd", pre);
    cr_assert(eq(int, tg_module_load_state_dict(m, f, key, true), TG_OK), "%s: %s", c,
              tg_error_message());
    tg_tensor *x = th_leaf_clone(th_golden_get(f, pre, "x"));
    const tg_tensor *lengths = th_golden_get(f, pre, "lengths");
    tg_tensor *h0 = k.has_state ? th_leaf_clone(th_golden_get(f, pre, "h0")) : NULL;
    tg_tensor *c0 = k.has_state && lstm ? th_leaf_clone(th_golden_get(f, pre, "c0")) : NULL;
    tg_tensor *r[3], *g[3] = {NULL, NULL, NULL};
    cr_assert(eq(int, run(m, lstm, r, x, lengths, h0, c0), TG_OK), "%s: %s", c,
              tg_error_message());
    static const char *const rn[3] = {"y", "hn", "cn"}, *const gn[3] = {"gy", "ghn", "gcn"};
    for (int i = 0; i < 3; i++) {
        if (!r[i]) continue;
        snprintf(key, sizeof key, "%s %s", pre, rn[i]);
        th_expect_close_scaled(key, r[i], th_golden_get(f, pre, rn[i]), tol(dt));
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
    "rnn", "rnn_bidir_bf_nostate", "lstm_2l_bidir", "lstm_2l_bidir_bf_short",
    "lstm_proj_2l_bidir", "lstm_proj_bf_nostate", "gru_2l_bidir", "gru_2l_bidir_bf"};

Test(rnn_packed, layers_match_torch_in_f32_and_f64)
{
    tg_st_file *f = th_golden_load("rnn_packed.safetensors");
    for (int t = 0; t < 2; t++)
        for (int i = 0; i < (int)(sizeof cases / sizeof *cases); i++)
            check_case(f, t ? "f64" : "f32", cases[i]);
    tg_st_free(f);
}

static tg_tensor *lengths_of(int n, const int64_t *v)
{
    tg_tensor *t = NULL;
    cr_assert(eq(int, tg_tensor_from_data(&t, TG_I64, 1, (int64_t[]){n}, v), TG_OK));
    return t;
}

/* ---- invariants ---- */

/* Every length L: the plain forward's values, to the bit. */
Test(rnn_packed, full_lengths_are_the_plain_forward)
{
    tg_rnn_opts o = TG_RNN_OPTS_INIT;
    o.num_layers = 2;
    o.bidirectional = true;
    static const char *const kinds[3] = {"rnn", "lstm", "gru"};
    tg_tensor *x = th_rand_uniform(TG_F64, 3, (int64_t[]){4, 3, 2}, 5);
    tg_tensor *h0 = th_rand_uniform(TG_F64, 3, (int64_t[]){4, 3, 3}, 6);
    tg_tensor *len = lengths_of(3, (int64_t[]){4, 4, 4});
    for (int i = 0; i < 3; i++) {
        o.proj_size = is_lstm(kinds[i]) ? 1 : 0;
        tg_module *m = make(kinds[i], 2, 3, &o, TG_F64, 3);
        tg_tensor *h = is_lstm(kinds[i]) ? NULL : h0, *a[3], *b[3];
        cr_assert(eq(int, run(m, is_lstm(kinds[i]), a, x, NULL, h, NULL), TG_OK), "%s",
                  tg_error_message());
        cr_assert(eq(int, run(m, is_lstm(kinds[i]), b, x, len, h, NULL), TG_OK), "%s",
                  tg_error_message());
        for (int j = 0; j < 3; j++)
            if (a[j]) th_expect_close(kinds[i], b[j], a[j], 0);
        th_release_all(3, a);
        th_release_all(3, b);
        tg_module_release(m);
    }
    th_release_all(3, (tg_tensor *[]){x, h0, len});
}

/* x (L, N, in) with its padded steps (t >= len[b]) set to v. */
static tg_tensor *with_padding(const tg_tensor *x, const int64_t *len, double v)
{
    tg_tensor *y = NULL;
    cr_assert(eq(int, tg_tensor_clone(&y, x), TG_OK));
    const int64_t L = tg_tensor_dim(x, 0), N = tg_tensor_dim(x, 1), F = tg_tensor_dim(x, 2);
    for (int64_t t = 0; t < L; t++)
        for (int64_t b = 0; b < N; b++)
            for (int64_t i = 0; t >= len[b] && i < F; i++)
                cr_assert(eq(int, tg_tensor_set(y, (int64_t[]){t, b, i}, v), TG_OK));
    return y;
}

/* A two-layer bidirectional LSTM with a projection: row b's output and
 * final states are those of the plain forward over its len[b] valid steps
 * alone (the reverse direction starting at step len[b] - 1), the output is
 * zero at the padded steps, and neither the values nor the gradients
 * depend on what the padded steps hold (1e30, NaN); their gradient is
 * zero. */
Test(rnn_packed, a_row_is_its_valid_steps_alone)
{
    tg_rnn_opts o = TG_RNN_OPTS_INIT;
    o.num_layers = 2;
    o.bidirectional = true;
    o.proj_size = 2;
    tg_module *m = make("lstm", 3, 3, &o, TG_F64, 9);
    const int64_t L = 5, N = 4, lens[4] = {3, 5, 1, 4};
    tg_tensor *x = th_rand_uniform(TG_F64, 3, (int64_t[]){L, N, 3}, 10);
    tg_tensor *h0 = th_rand_uniform(TG_F64, 3, (int64_t[]){4, N, 2}, 11);
    tg_tensor *c0 = th_rand_uniform(TG_F64, 3, (int64_t[]){4, N, 3}, 12);
    tg_tensor *len = lengths_of(4, lens), *r[3];
    cr_assert(eq(int, run(m, true, r, x, len, h0, c0), TG_OK), "%s", tg_error_message());
    for (int64_t b = 0; b < N; b++) {
        tg_tensor *xb = NULL, *xt = NULL, *hb = NULL, *cb = NULL, *q[3];
        tg_tensor *yb = NULL, *yv = NULL, *yp = NULL, *hn = NULL, *cn = NULL;
        cr_assert(eq(int, tg_slice(&xb, x, 1, b, b + 1, 1), TG_OK));
        cr_assert(eq(int, tg_slice(&xt, xb, 0, 0, lens[b], 1), TG_OK));
        cr_assert(eq(int, tg_slice(&hb, h0, 1, b, b + 1, 1), TG_OK));
        cr_assert(eq(int, tg_slice(&cb, c0, 1, b, b + 1, 1), TG_OK));
        cr_assert(eq(int, run(m, true, q, xt, NULL, hb, cb), TG_OK), "%s", tg_error_message());
        cr_assert(eq(int, tg_slice(&yb, r[0], 1, b, b + 1, 1), TG_OK));
        cr_assert(eq(int, tg_slice(&yv, yb, 0, 0, lens[b], 1), TG_OK));
        th_expect_close("valid output", yv, q[0], 1e-12);
        cr_assert(eq(int, tg_slice(&hn, r[1], 1, b, b + 1, 1), TG_OK));
        cr_assert(eq(int, tg_slice(&cn, r[2], 1, b, b + 1, 1), TG_OK));
        th_expect_close("h_n", hn, q[1], 1e-12);
        th_expect_close("c_n", cn, q[2], 1e-12);
        cr_assert(eq(int, tg_slice(&yp, yb, 0, lens[b], L, 1), TG_OK));
        for (int64_t e = 0; e < tg_tensor_numel(yp); e++)
            cr_assert(th_at(yp, e) == 0, "row %lld: padded output %g", (long long)b,
                      th_at(yp, e));
        th_release_all(3, q);
        th_release_all(9, (tg_tensor *[]){xb, xt, hb, cb, yb, yv, yp, hn, cn});
    }
    static const double fill[2] = {1e30, NAN};
    tg_tensor *g[3] = {th_rand_uniform(TG_F64, 3, (int64_t[]){L, N, 4}, 13),
                       th_rand_uniform(TG_F64, 3, (int64_t[]){4, N, 2}, 14),
                       th_rand_uniform(TG_F64, 3, (int64_t[]){4, N, 3}, 15)};
    tg_tensor *gx[3] = {NULL, NULL, NULL}, *w = tg_module_find(m, "weight_ih_l0");
    tg_tensor *gw[3] = {NULL, NULL, NULL};
    for (int k = 0; k < 3; k++) {
        tg_tensor *xp = k ? with_padding(x, lens, fill[k - 1]) : th_leaf_clone(x), *q[3];
        tg_tensor_set_requires_grad(xp, true);
        cr_assert(eq(int, run(m, true, q, xp, len, h0, c0), TG_OK), "%s", tg_error_message());
        for (int j = 0; j < 3; j++) th_expect_close("padding ignored", q[j], r[j], 0);
        tg_tensor *loss = th_weighted_sum(3, q, g);
        tg_module_zero_grad(m);
        cr_assert(eq(int, tg_backward(loss, NULL, NULL), TG_OK), "%s", tg_error_message());
        cr_assert(eq(int, tg_tensor_clone(&gx[k], tg_tensor_grad(xp)), TG_OK));
        cr_assert(eq(int, tg_tensor_clone(&gw[k], tg_tensor_grad(w)), TG_OK));
        if (k) {
            th_expect_close("grad x", gx[k], gx[0], 0);
            th_expect_close("grad weight_ih_l0", gw[k], gw[0], 0);
        }
        th_release_all(3, q);
        th_release_all(2, (tg_tensor *[]){loss, xp});
    }
    for (int64_t t = 0; t < L; t++)
        for (int64_t b = 0; b < N; b++)
            for (int64_t i = 0; i < 3; i++) {
                double v = 0;
                cr_assert(eq(int, tg_tensor_get(gx[0], (int64_t[]){t, b, i}, &v), TG_OK));
                if (t >= lens[b]) cr_assert(v == 0, "grad x[%lld, %lld] = %g", (long long)t,
                                            (long long)b, v);
                else cr_assert(v != 0);
            }
    th_release_all(3, g);
    th_release_all(3, gx);
    th_release_all(3, gw);
    th_release_all(3, r);
    th_release_all(4, (tg_tensor *[]){x, h0, c0, len});
    tg_module_release(m);
}

/* Dropout between the layers in training: the padded outputs stay zero,
 * and the k-th training forward's masks depend on (seed, k) alone. */
Test(rnn_packed, dropout_between_layers)
{
    tg_rnn_opts o = TG_RNN_OPTS_INIT;
    o.num_layers = 2;
    o.dropout = 0.5;
    o.seed = 4;
    o.batch_first = true;
    tg_module *m = make("gru", 3, 4, &o, TG_F32, 2), *c = NULL;
    cr_assert(eq(int, tg_module_copy(&c, m), TG_OK));
    const int64_t lens[3] = {2, 6, 4};
    tg_tensor *x = th_rand_uniform(TG_F32, 3, (int64_t[]){3, 6, 3}, 3);
    tg_tensor *len = lengths_of(3, lens), *a[3], *b[3];
    cr_assert(eq(int, run(m, false, a, x, len, NULL, NULL), TG_OK), "%s", tg_error_message());
    cr_assert(eq(int, run(c, false, b, x, len, NULL, NULL), TG_OK), "%s", tg_error_message());
    th_expect_close("same masks", b[0], a[0], 0);
    for (int64_t n = 0; n < 3; n++)
        for (int64_t t = 0; t < 6; t++)
            for (int64_t i = 0; i < 4; i++) {
                double v = 0;
                cr_assert(eq(int, tg_tensor_get(a[0], (int64_t[]){n, t, i}, &v), TG_OK));
                cr_assert(isfinite(v));
                if (t >= lens[n]) cr_assert(v == 0);
            }
    th_release_all(3, a);
    th_release_all(3, b);
    th_release_all(2, (tg_tensor *[]){x, len});
    tg_module_release(m);
    tg_module_release(c);
}

/* ---- gradcheck ---- */

/* inputs x (L, N, in), h_0, c_0 of a packed LSTM with lengths {3, 1, 2};
 * out: cat(output, h_n, c_n) flattened. */
static int packed_lstm_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    tg_tensor *len = NULL, *r[3] = {NULL, NULL, NULL}, *flat[3] = {NULL, NULL, NULL};
    int rc = tg_tensor_from_data(&len, TG_I64, 1, (int64_t[]){3}, (int64_t[]){3, 1, 2});
    if (rc >= 0) rc = tg_nn_lstm_forward_packed(user, &r[0], &r[1], &r[2], in[0], len, in[1],
                                                in[2]);
    for (int i = 0; i < 3 && rc >= 0; i++) rc = tg_reshape(&flat[i], r[i], 1, (int64_t[]){-1});
    if (rc >= 0) rc = tg_cat(out, 3, flat, 0);
    th_release_all(3, r);
    th_release_all(3, flat);
    tg_tensor_release(len);
    return rc;
}

static tg_tensor *leaf(int nd, const int64_t *shape, uint64_t seed)
{
    tg_tensor *t = th_rand_uniform(TG_F64, nd, shape, seed);
    tg_tensor_set_requires_grad(t, true);
    return t;
}

Test(rnn_packed, lstm_gradcheck_f64_first_and_second_order)
{
    tg_rnn_opts o = TG_RNN_OPTS_INIT;
    o.bidirectional = true;
    o.proj_size = 1;
    tg_module *m = make("lstm", 2, 2, &o, TG_F64, 13);
    tg_tensor *all[16] = {leaf(3, (int64_t[]){3, 3, 2}, 1), leaf(3, (int64_t[]){2, 3, 1}, 2),
                          leaf(3, (int64_t[]){2, 3, 2}, 3)};
    tg_tensor **ps = NULL;
    int np = 0;
    cr_assert(eq(int, tg_module_parameters(m, &ps, &np), TG_OK));
    for (int i = 0; i < np; i++) all[3 + i] = ps[i];
    free(ps);
    tg_gradcheck_opts go = TG_GRADCHECK_OPTS_INIT;
    cr_assert(eq(int, tg_gradcheck(packed_lstm_fn, m, 3 + np, all, &go), TG_OK), "%s",
              tg_error_message());
    static const char *const second[] = {"weight_ih_l0", "weight_hh_l0_reverse",
                                         "weight_hr_l0", "bias_hh_l0_reverse"};
    for (int i = 0; i < 4; i++) all[3 + i] = tg_module_find(m, second[i]);
    cr_assert(eq(int, tg_gradgradcheck(packed_lstm_fn, m, 7, all, &go), TG_OK), "%s",
              tg_error_message());
    th_release_all(3, all);
    tg_module_release(m);
}

/* ---- refusals ---- */

Test(rnn_packed, refusals_name_lengths_and_write_nothing)
{
    tg_module *lstm = make("lstm", 3, 4, NULL, TG_F32, 1);
    tg_module *gru = make("gru", 3, 4, NULL, TG_F32, 1);
    tg_tensor *x = th_rand_uniform(TG_F32, 3, (int64_t[]){5, 2, 3}, 1);
    tg_tensor *x2 = th_rand_uniform(TG_F32, 2, (int64_t[]){5, 3}, 1);
    tg_tensor *y = NULL, *h = NULL, *c = NULL;
    tg_tensor *ok = lengths_of(2, (int64_t[]){5, 2});
    tg_tensor *zero = lengths_of(2, (int64_t[]){3, 0}), *big = lengths_of(2, (int64_t[]){6, 1});
    tg_tensor *three = lengths_of(3, (int64_t[]){1, 2, 3}), *f = NULL, *two_d = NULL;
    cr_assert(eq(int, tg_tensor_from_data(&f, TG_F32, 1, (int64_t[]){2}, (float[]){5, 2}),
                 TG_OK));
    cr_assert(eq(int, tg_tensor_from_data(&two_d, TG_I64, 2, (int64_t[]){2, 1},
                                          (int64_t[]){5, 2}), TG_OK));
    th_expect_refused(tg_nn_lstm_forward_packed(lstm, &y, &h, &c, x, NULL, NULL, NULL),
                      TG_EINVAL, "lengths must not be NULL", y);
    th_expect_refused(tg_nn_rnn_forward_packed(gru, &y, &h, x, zero, NULL), TG_EINVAL,
                      "lengths[1]=0 must be in [1, L=5]", y);
    th_expect_refused(tg_nn_rnn_forward_packed(gru, &y, &h, x, big, NULL), TG_EINVAL,
                      "lengths[0]=6 must be in [1, L=5]", y);
    th_expect_refused(tg_nn_lstm_forward_packed(lstm, &y, &h, &c, x, three, NULL, NULL),
                      TG_EINVAL, "lengths is (3); it must be 1-d with one length per batch "
                      "row, (N) = (2)", y);
    th_expect_refused(tg_nn_lstm_forward_packed(lstm, &y, &h, &c, x, two_d, NULL, NULL),
                      TG_EINVAL, "lengths is (2, 1)", y);
    th_expect_refused(tg_nn_rnn_forward_packed(gru, &y, &h, x, f, NULL), TG_EINVAL,
                      "lengths has dtype f32; it must be i64 (or i32)", y);
    th_expect_refused(tg_nn_rnn_forward_packed(gru, &y, &h, x2, ok, NULL), TG_ESHAPE,
                      "with lengths it must be batched", y);
    th_expect_refused(tg_nn_rnn_forward_packed(lstm, &y, &h, x, ok, NULL), TG_EINVAL,
                      "not an RNN or GRU", y);
    th_expect_refused(tg_nn_lstm_forward_packed(lstm, &y, &y, &c, x, ok, NULL, NULL),
                      TG_EINVAL, "two different places", y);
    cr_assert(h == NULL && c == NULL);
    /* i32 lengths serve as i64 ones */
    tg_tensor *l32 = NULL, *a[3], *b[3];
    cr_assert(eq(int, tg_tensor_from_data(&l32, TG_I32, 1, (int64_t[]){2}, (int32_t[]){5, 2}),
                 TG_OK));
    cr_assert(eq(int, run(lstm, true, a, x, ok, NULL, NULL), TG_OK), "%s", tg_error_message());
    cr_assert(eq(int, run(lstm, true, b, x, l32, NULL, NULL), TG_OK), "%s", tg_error_message());
    for (int j = 0; j < 3; j++) th_expect_close("i32", b[j], a[j], 0);
    th_release_all(3, a);
    th_release_all(3, b);
    th_release_all(9, (tg_tensor *[]){x, x2, ok, zero, big, three, f, two_d, l32});
    tg_module_release(lstm);
    tg_module_release(gru);
}
