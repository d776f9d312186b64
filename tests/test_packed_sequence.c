/* tests/test_packed_sequence.c - tg_packed_sequence and its functions
 * against PyTorch 1.13's torch.nn.utils.rnn (goldens:
 * scripts/make_packed_sequence_goldens.py): pack_padded_sequence and
 * pad_packed_sequence (values, batch sizes, indices and gradients, both
 * layouts, sorted and unsorted lengths, trailing dims, total_length,
 * padding_value), pack_sequence, and RNN, LSTM and GRU layers called with
 * a packed sequence; f64 gradchecks to second order; ownership (the
 * refusals: tests/test_packed_sequence_refusals.c). */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "rnn_fixtures.h"
#include "tapegrad/tapegrad.h"

TestSuite(packed_sequence);

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

/* The golden tensor c.what, or NULL when the file has none. */
static tg_tensor *maybe(const tg_st_file *f, const char *c, const char *what)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", c, what);
    return tg_st_get(f, key);
}

/* ps's four tensors are the golden's c.data, .batch_sizes and indices (NULL
 * where the golden has none), bit for bit. */
static void expect_packed(const tg_st_file *f, const char *c, const tg_packed_sequence *ps)
{
    char what[160];
    snprintf(what, sizeof what, "%s data", c);
    th_expect_same_bits(what, ps->data, ps->data, th_golden_get(f, c, "data"));
    snprintf(what, sizeof what, "%s batch_sizes", c);
    th_expect_same_bits(what, ps->batch_sizes, ps->batch_sizes,
                        th_golden_get(f, c, "batch_sizes"));
    const tg_tensor *si = maybe(f, c, "sorted_indices"), *ui = maybe(f, c, "unsorted_indices");
    cr_assert(eq(int, si != NULL, ps->sorted_indices != NULL), "%s sorted_indices", c);
    cr_assert(eq(int, ui != NULL, ps->unsorted_indices != NULL), "%s unsorted_indices", c);
    if (!si) return;
    snprintf(what, sizeof what, "%s sorted_indices", c);
    th_expect_same_bits(what, ps->sorted_indices, ps->sorted_indices, si);
    snprintf(what, sizeof what, "%s unsorted_indices", c);
    th_expect_same_bits(what, ps->unsorted_indices, ps->unsorted_indices, ui);
}

/* pack_padded_sequence and x's gradient through data for case c. */
static void check_pack(const tg_st_file *f, const char *c, bool bf, bool es)
{
    tg_tensor *x = th_leaf_clone(th_golden_get(f, c, "x")), *dx = NULL;
    tg_tensor *gdata = (tg_tensor *)th_golden_get(f, c, "gdata");
    tg_packed_sequence ps = TG_PACKED_SEQUENCE_INIT;
    OK(tg_pack_padded_sequence(&ps, x, th_golden_get(f, c, "lengths"), bf, es));
    expect_packed(f, c, &ps);
    OK(tg_grad(&dx, 1, &ps.data, &gdata, 1, &x, NULL));
    th_expect_same_bits(c, dx, dx, th_golden_get(f, c, "dx"));
    tg_packed_sequence_release(&ps);
    th_release_all(2, (tg_tensor *[]){x, dx});
}

/* pad_packed_sequence of torch's packed sequence for case c, and its
 * data's gradient. */
static void check_pad(const tg_st_file *f, const char *c, bool bf, int64_t total, double value)
{
    tg_packed_sequence ps = {
        .data = th_leaf_clone(th_golden_get(f, c, "data")),
        .batch_sizes = (tg_tensor *)th_golden_get(f, c, "batch_sizes"),
        .sorted_indices = maybe(f, c, "sorted_indices"),
        .unsorted_indices = maybe(f, c, "unsorted_indices")};
    tg_tensor *y = NULL, *len = NULL, *dd = NULL, *gy = (tg_tensor *)th_golden_get(f, c, "gy");
    OK(tg_pad_packed_sequence(&y, &len, &ps, bf, value, total));
    th_expect_same_bits(c, y, y, th_golden_get(f, c, "y"));
    th_expect_same_bits(c, len, len, th_golden_get(f, c, "ylengths"));
    OK(tg_grad(&dd, 1, &y, &gy, 1, &ps.data, NULL));
    th_expect_same_bits(c, dd, dd, th_golden_get(f, c, "ddata"));
    th_release_all(4, (tg_tensor *[]){ps.data, y, len, dd});
}

Test(packed_sequence, pack_and_pad_match_torch_with_gradients)
{
    tg_st_file *f = th_golden_load("packed_sequence.safetensors");
    const int pads = atoi(tg_st_meta_get(f, "pads"));
    int sorted = 0, bfs = 0, totals = 0;
    for (int i = 0; i < pads; i++) {
        char c[16];
        snprintf(c, sizeof c, "pad%d", i);
        int bf, es;
        long long total;
        double value;
        cr_assert(eq(int, sscanf(th_golden_meta(f, c, "cfg"), "%d %d %lld %lf", &bf, &es,
                                 &total, &value), 4));
        check_pack(f, c, bf, es);
        check_pad(f, c, bf, total, value);
        sorted += es;
        bfs += bf;
        totals += total != -1;
    }
    cr_assert(pads >= 9 && sorted >= 3 && bfs >= 4 && totals >= 4, "%d cases", pads);
    tg_st_free(f);
}

Test(packed_sequence, pack_sequence_matches_torch)
{
    tg_st_file *f = th_golden_load("packed_sequence.safetensors");
    const int cases = atoi(tg_st_meta_get(f, "seqs"));
    for (int i = 0; i < cases; i++) {
        char c[16], key[16];
        snprintf(c, sizeof c, "seq%d", i);
        int n, es;
        cr_assert(eq(int, sscanf(th_golden_meta(f, c, "cfg"), "%d %d", &n, &es), 2));
        cr_assert(n >= 1 && n <= 4);
        tg_tensor *s[4], *d[4] = {NULL}, *g = (tg_tensor *)th_golden_get(f, c, "gdata");
        for (int j = 0; j < n; j++) {
            snprintf(key, sizeof key, "s%d", j);
            s[j] = th_leaf_clone(th_golden_get(f, c, key));
        }
        tg_packed_sequence ps = TG_PACKED_SEQUENCE_INIT;
        OK(tg_pack_sequence(&ps, n, s, es));
        expect_packed(f, c, &ps);
        OK(tg_grad(d, 1, &ps.data, &g, n, s, NULL));
        for (int j = 0; j < n; j++) {
            snprintf(key, sizeof key, "d%d", j);
            th_expect_same_bits(c, d[j], d[j], th_golden_get(f, c, key));
        }
        tg_packed_sequence_release(&ps);
        th_release_all(n, s);
        th_release_all(n, d);
    }
    cr_assert(cases >= 3);
    tg_st_free(f);
}

/* ---- recurrent layers over a packed sequence ---- */

static tg_module *make_layer(const tg_st_file *f, const char *pre, const char *name,
                             tg_dtype dt, bool *lstm, bool *has_state, bool *es)
{
    char kind[8];
    int layers, bidir, bf, sorted, state;
    cr_assert(eq(int, sscanf(th_golden_meta(f, name, "cfg"), "%7s %d %d %d %d %d", kind,
                             &layers, &bidir, &bf, &sorted, &state), 6));
    tg_rnn_opts o = TG_RNN_OPTS_INIT;
    o.num_layers = layers;
    o.bidirectional = bidir;
    o.batch_first = bf;
    tg_rng rng;
    tg_rng_init(&rng, 1);
    tg_module *m = NULL;
    *lstm = !strcmp(kind, "lstm");
    OK(*lstm                   ? tg_nn_lstm_new(&m, 3, 4, &o, &rng)
       : !strcmp(kind, "gru") ? tg_nn_gru_new(&m, 3, 4, &o, &rng)
                               : tg_nn_rnn_new(&m, 3, 4, &o, &rng));
    if (dt != TG_F32) OK(tg_module_to_dtype(m, dt));
    char key[128];
    snprintf(key, sizeof key, "%s.sd", pre);
    OK(tg_module_load_state_dict(m, f, key, true));
    *has_state = state;
    *es = sorted;
    return m;
}

static void check_layer(const tg_st_file *f, const char *tn, const char *name)
{
    const tg_dtype dt = strcmp(tn, "f32") ? TG_F64 : TG_F32;
    const double tol = dt == TG_F32 ? 2e-5 : 1e-12;
    char pre[96], key[512];
    snprintf(pre, sizeof pre, "%s.%s", tn, name);
    bool lstm, has_state, es;
    tg_module *m = make_layer(f, pre, name, dt, &lstm, &has_state, &es);
    tg_tensor *x = th_leaf_clone(th_golden_get(f, pre, "x"));
    tg_tensor *h0 = has_state ? th_leaf_clone(th_golden_get(f, pre, "h0")) : NULL;
    tg_tensor *c0 = has_state && lstm ? th_leaf_clone(th_golden_get(f, pre, "c0")) : NULL;
    tg_packed_sequence in = TG_PACKED_SEQUENCE_INIT, out = TG_PACKED_SEQUENCE_INIT;
    OK(tg_pack_padded_sequence(&in, x, th_golden_get(f, pre, "lengths"), false, es));
    tg_tensor *r[3] = {NULL, NULL, NULL}, *g[3] = {NULL, NULL, NULL};
    if (lstm) OK(tg_nn_lstm_forward_packed_sequence(m, &out, &r[1], &r[2], &in, h0, c0));
    else OK(tg_nn_rnn_forward_packed_sequence(m, &out, &r[1], &in, h0));
    cr_assert(out.batch_sizes == in.batch_sizes && out.sorted_indices == in.sorted_indices &&
                  out.unsorted_indices == in.unsorted_indices,
              "%s: the output is packed as the input", pre);
    r[0] = out.data;
    static const char *const rn[3] = {"data", "hn", "cn"}, *const gn[3] = {"gdata", "ghn",
                                                                          "gcn"};
    for (int i = 0; i < 3; i++) {
        if (!r[i]) continue;
        snprintf(key, sizeof key, "%s %s", pre, rn[i]);
        th_expect_close_scaled(key, r[i], th_golden_get(f, pre, rn[i]), tol);
        g[i] = (tg_tensor *)th_golden_get(f, pre, gn[i]);
    }
    tg_tensor *loss = th_weighted_sum(3, r, g);
    OK(tg_backward(loss, NULL, NULL));
    th_expect_golden_grads(f, pre, m, (tg_tensor *const[3]){x, h0, c0}, tol);
    tg_packed_sequence_release(&in);
    tg_packed_sequence_release(&out);
    th_release_all(6, (tg_tensor *[]){r[1], r[2], loss, x, h0, c0});
    tg_module_release(m);
}

Test(packed_sequence, layers_over_a_packed_batch_match_torch)
{
    static const char *const names[] = {"lstm_2l_bidir", "gru_2l_bidir", "gru_2l_bidir_bf",
                                        "lstm_sorted", "rnn_bidir"};
    tg_st_file *f = th_golden_load("packed_sequence.safetensors");
    for (int t = 0; t < 2; t++)
        for (int i = 0; i < (int)(sizeof names / sizeof *names); i++)
            check_layer(f, t ? "f64" : "f32", names[i]);
    tg_st_free(f);
}

/* ---- gradients of any order, in f64 ---- */

typedef struct how {
    bool bf, es;
    const int64_t *lens;
} how;

static tg_tensor *lengths_of(int n, const int64_t *v)
{
    tg_tensor *t = NULL;
    OK(tg_tensor_from_data(&t, TG_I64, 1, (int64_t[]){n}, v));
    return t;
}

/* data of pack_padded_sequence(in[0]); then pad_packed_sequence of it. */
static int pack_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    const how *h = user;
    tg_tensor *len = lengths_of(3, h->lens);
    tg_packed_sequence ps = TG_PACKED_SEQUENCE_INIT;
    int rc = tg_pack_padded_sequence(&ps, in[0], len, h->bf, h->es);
    if (rc >= 0) {
        *out = tg_tensor_retain(ps.data);
        tg_packed_sequence_release(&ps);
    }
    tg_tensor_release(len);
    return rc;
}

static int pad_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    const how *h = user;
    tg_tensor *len = lengths_of(3, h->lens);
    tg_packed_sequence ps = TG_PACKED_SEQUENCE_INIT;
    int rc = tg_pack_padded_sequence(&ps, in[0], len, h->bf, h->es);
    tg_tensor *data = ps.data;
    if (rc >= 0) {   /* pad a leaf-like data: in[0]'s values, its own graph */
        ps.data = in[1];
        rc = tg_pad_packed_sequence(out, NULL, &ps, h->bf, 0.5, 5);
        ps.data = data;
    }
    tg_packed_sequence_release(&ps);
    tg_tensor_release(len);
    return rc;
}

Test(packed_sequence, gradcheck_and_gradgradcheck_in_f64)
{
    static const int64_t unsorted[3] = {2, 4, 1}, sorted[3] = {4, 2, 1};
    for (int k = 0; k < 4; k++) {
        how h = {.bf = k & 1, .es = k >= 2, .lens = k >= 2 ? sorted : unsorted};
        const int64_t shape[3] = {h.bf ? 3 : 4, h.bf ? 4 : 3, 2};
        tg_tensor *x = th_rand_uniform(TG_F64, 3, shape, 31 + (uint64_t)k);
        tg_tensor *d = th_rand_uniform(TG_F64, 2, (int64_t[]){7, 2}, 41 + (uint64_t)k);
        OK(tg_tensor_set_requires_grad(x, true));
        OK(tg_tensor_set_requires_grad(d, true));
        th_expect_gradchecks(pack_fn, &h, 1, &x, "pack, case %d", k);
        th_expect_gradchecks(pad_fn, &h, 2, (tg_tensor *[]){x, d}, "pad, case %d", k);
        th_release_all(2, (tg_tensor *[]){x, d});
    }
}

static int gru_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    tg_module *m = user;
    tg_tensor *len = lengths_of(3, (int64_t[]){2, 3, 1});
    tg_packed_sequence ps = TG_PACKED_SEQUENCE_INIT, po = TG_PACKED_SEQUENCE_INIT;
    int rc = tg_pack_padded_sequence(&ps, in[0], len, false, false);
    if (rc >= 0) rc = tg_nn_rnn_forward_packed_sequence(m, &po, NULL, &ps, in[1]);
    if (rc >= 0) *out = tg_tensor_retain(po.data);
    tg_packed_sequence_release(&ps);
    tg_packed_sequence_release(&po);
    tg_tensor_release(len);
    return rc;
}

Test(packed_sequence, a_gru_over_a_packed_batch_passes_gradcheck)
{
    tg_rnn_opts o = TG_RNN_OPTS_INIT;
    o.bidirectional = true;
    tg_rng rng;
    tg_rng_init(&rng, 5);
    tg_module *m = NULL;
    OK(tg_nn_gru_new(&m, 2, 2, &o, &rng));
    OK(tg_module_to_dtype(m, TG_F64));
    tg_tensor *x = th_rand_uniform(TG_F64, 3, (int64_t[]){3, 3, 2}, 7);
    tg_tensor *h0 = th_rand_uniform(TG_F64, 3, (int64_t[]){2, 3, 2}, 8);
    OK(tg_tensor_set_requires_grad(x, true));
    OK(tg_tensor_set_requires_grad(h0, true));
    th_expect_gradchecks(gru_fn, m, 2, (tg_tensor *[]){x, h0}, "gru");
    th_release_all(2, (tg_tensor *[]){x, h0});
    tg_module_release(m);
}

/* ---- invariants ---- */

/* pad(pack(x)) is x at the valid steps and padding_value elsewhere, and
 * pack(pad(p)) is p's data, bit for bit. */
Test(packed_sequence, pad_undoes_pack)
{
    const int64_t lens[4] = {3, 1, 3, 2};
    tg_tensor *x = th_rand_uniform(TG_F32, 3, (int64_t[]){4, 3, 2}, 9), *y = NULL, *yl = NULL;
    tg_tensor *len = lengths_of(4, lens);
    tg_packed_sequence ps = TG_PACKED_SEQUENCE_INIT, again = TG_PACKED_SEQUENCE_INIT;
    OK(tg_pack_padded_sequence(&ps, x, len, true, false));
    OK(tg_pad_packed_sequence(&y, &yl, &ps, true, -7, -1));
    th_expect_same_bits("lengths", yl, yl, len);
    for (int64_t b = 0; b < 4; b++)
        for (int64_t t = 0; t < 3; t++)
            for (int64_t k = 0; k < 2; k++) {
                const int64_t i[3] = {b, t, k};
                const double want = t < lens[b] ? th_get(x, i) : -7;
                cr_assert(eq(dbl, th_get(y, i), want), "(%lld, %lld, %lld)", (long long)b,
                          (long long)t, (long long)k);
            }
    OK(tg_pack_padded_sequence(&again, y, yl, true, false));
    th_expect_same_bits("data", again.data, again.data, ps.data);
    th_expect_same_bits("batch_sizes", again.batch_sizes, again.batch_sizes, ps.batch_sizes);
    tg_packed_sequence_release(&again);
    tg_tensor *len32 = NULL;   /* i32 lengths pack the same */
    OK(tg_tensor_to_dtype(&len32, len, TG_I32));
    OK(tg_pack_padded_sequence(&again, x, len32, true, false));
    th_expect_same_bits("i32", again.data, again.data, ps.data);
    th_expect_same_bits("i32", again.sorted_indices, again.sorted_indices, ps.sorted_indices);
    tg_packed_sequence_release(&ps);
    tg_packed_sequence_release(&again);
    th_release_all(5, (tg_tensor *[]){x, y, yl, len, len32});
}

/* The struct holds one reference to each tensor, which release drops;
 * a scope captures pad_packed_sequence's results and h_n, never the
 * packed sequence. */
Test(packed_sequence, ownership_and_scopes)
{
    tg_tensor *x = th_rand_uniform(TG_F32, 3, (int64_t[]){3, 2, 2}, 3);
    tg_tensor *len = lengths_of(2, (int64_t[]){2, 3});
    tg_packed_sequence ps = TG_PACKED_SEQUENCE_INIT, po = TG_PACKED_SEQUENCE_INIT;
    OK(tg_scope_begin());
    OK(tg_pack_padded_sequence(&ps, x, len, false, false));
    cr_assert(eq(int, tg_scope_size(), 0));
    cr_assert(eq(int, tg_tensor_refcount(ps.batch_sizes), 1));
    tg_tensor *y = NULL, *yl = NULL, *hn = NULL;
    OK(tg_pad_packed_sequence(&y, &yl, &ps, false, 0, -1));
    cr_assert(eq(int, tg_scope_size(), 2));
    tg_rng rng;
    tg_rng_init(&rng, 2);
    tg_module *m = NULL;
    OK(tg_nn_gru_new(&m, 2, 3, NULL, &rng));
    OK(tg_nn_rnn_forward_packed_sequence(m, &po, &hn, &ps, NULL));
    cr_assert(eq(int, tg_scope_size(), 3));
    th_expect_shape(po.data, 2, (int64_t[]){5, 3});
    th_expect_shape(hn, 3, (int64_t[]){1, 2, 3});
    cr_assert(eq(int, tg_tensor_refcount(ps.batch_sizes), 2));
    tg_packed_sequence_release(&po);
    cr_assert(po.data == NULL && po.batch_sizes == NULL && po.sorted_indices == NULL);
    cr_assert(eq(int, tg_tensor_refcount(ps.batch_sizes), 1));
    tg_packed_sequence_release(&ps);
    tg_packed_sequence_release(NULL);
    OK(tg_scope_end());
    tg_module_release(m);
    th_release_all(2, (tg_tensor *[]){x, len});
}
