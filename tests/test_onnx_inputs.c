/* tests/test_onnx_inputs.c - tg_onnx_export_n, graphs of several inputs:
 * MultiheadAttention on (query, key, value) (kdim / vdim, batch_first,
 * unbatched, without bias, a dynamic batch) and with key_padding_mask,
 * attn_mask and its attention weights, TransformerEncoderLayer on
 * (src, src_mask) and (src, src_mask, src_key_padding_mask) with float and
 * u8 masks, RNN / GRU on (input, h_0) and LSTM on (input, h_0, c_0) with
 * one and two layers, bidirectional, batch_first, unbatched, checked by
 * onnx's checker and by ONNX Runtime against tapegrad's forward; the
 * graphs torch.onnx.export writes for torch's modules holding the same
 * state dicts (tests/onnx/torch_inputs.py) give the same outputs on the
 * same inputs; the refusals name the module and the rule and write
 * nothing. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "onnx_cases.h"
#include "tapegrad/tapegrad.h"

TestSuite(onnx_inputs, .init = onnx_setup, .fini = th_tmp_dir_remove);

/* as test_onnx_transformer.c's and test_onnx_rnn.c's: f32 sums in other
 * orders */
#define RTOL 1e-5
#define ATOL 1e-5

/* Every parameter of m uniform in [-0.5, 0.5] (norm weights 0.5 + that):
 * no bias 0, so a bias on the wrong input shows. */
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

static tg_tensor *rand_nd(int nd, const int64_t *shape, uint64_t seed)
{
    return th_rand_uniform(TG_F32, nd, shape, seed);
}

/* A u8 tensor of the given shape holding v. */
static tg_tensor *u8_mask(int nd, const int64_t *shape, const uint8_t *v)
{
    tg_tensor *t = NULL;
    cr_assert(tg_tensor_from_data(&t, TG_U8, nd, shape, v) == TG_OK, "%s", tg_error_message());
    return t;
}

static tg_module *mha(int64_t e, int64_t h, int64_t kdim, int64_t vdim, bool bias,
                      bool batch_first, uint64_t seed)
{
    tg_nn_multihead_attention_opts o = TG_NN_MULTIHEAD_ATTENTION_OPTS_INIT;
    o.kdim = kdim;
    o.vdim = vdim;
    o.bias = bias;
    o.batch_first = batch_first;
    tg_rng rng;
    tg_rng_init(&rng, seed);
    tg_module *m = NULL;
    cr_assert(tg_nn_multihead_attention_new(&m, e, h, &o, &rng) == TG_OK, "%s",
              tg_error_message());
    randomize(m, seed + 1);
    return m;
}

static const char *const QKV[3] = {"query", "key", "value"};

Test(onnx_inputs, multihead_attention_query_key_value)
{
    need_onnx();
    /* seq-first, L 5 and S 6 apart: the key's and value's length is S */
    tg_module *a = mha(8, 2, 0, 0, true, false, 1);
    tg_tensor *q = rand_nd(3, (const int64_t[]){5, 2, 8}, 2);
    tg_tensor *k = rand_nd(3, (const int64_t[]){6, 2, 8}, 3);
    tg_tensor *v = rand_nd(3, (const int64_t[]){6, 2, 8}, 4);
    write_case_n("mha_sf", a, 3, (tg_tensor *[]){q, k, v}, QKV, RTOL, ATOL,
                 (const char *const[]){"in_proj_weight", "in_proj_bias", "out_proj.weight",
                                       "out_proj.bias", "/qkv_split", "/head_shape",
                                       "/merged_shape", "/scale", NULL},
                 NULL);
    /* batch_first, kdim 3 and vdim 5: q/k/v_proj_weight */
    tg_module *b = mha(8, 4, 3, 5, true, true, 5);
    tg_tensor *qb = rand_nd(3, (const int64_t[]){3, 4, 8}, 6);
    tg_tensor *kb = rand_nd(3, (const int64_t[]){3, 7, 3}, 7);
    tg_tensor *vb = rand_nd(3, (const int64_t[]){3, 7, 5}, 8);
    write_case_n("mha_bf_kdim_vdim", b, 3, (tg_tensor *[]){qb, kb, vb}, NULL, RTOL, ATOL,
                 (const char *const[]){"q_proj_weight", "k_proj_weight", "v_proj_weight",
                                       "in_proj_bias", "out_proj.weight", "out_proj.bias",
                                       "/qkv_split", "/head_shape", "/merged_shape", "/scale",
                                       NULL},
                 NULL);
    /* unbatched (L, E), (S, E), without bias: no Add after the projections */
    tg_module *c = mha(8, 2, 0, 0, false, true, 9);
    tg_tensor *qu = rand_nd(2, (const int64_t[]){4, 8}, 10);
    tg_tensor *ku = rand_nd(2, (const int64_t[]){6, 8}, 11);
    tg_tensor *vu = rand_nd(2, (const int64_t[]){6, 8}, 12);
    write_case_n("mha_unbatched_nobias", c, 3, (tg_tensor *[]){qu, ku, vu}, QKV, RTOL, ATOL,
                 NULL, NULL);
    /* a dynamic batch: exported on 3, run on 2 */
    tg_onnx_options o = TG_ONNX_OPTIONS_INIT;
    o.dynamic_batch = true;
    char path[256];
    cr_assert(tg_onnx_export_n(b, 3, (tg_tensor *[]){qb, kb, vb}, QKV,
                               th_tmp_path(path, sizeof path, "mha_dynamic.onnx"), &o) == TG_OK,
              "%s", tg_error_message());
    tg_tensor *q2 = rand_nd(3, (const int64_t[]){2, 4, 8}, 13);
    tg_tensor *k2 = rand_nd(3, (const int64_t[]){2, 7, 3}, 14);
    tg_tensor *v2 = rand_nd(3, (const int64_t[]){2, 7, 5}, 15);
    tg_tensor *y2 = forward_n(b, 3, (tg_tensor *[]){q2, k2, v2});
    write_expected_n("mha_dynamic", 3, (tg_tensor *[]){q2, k2, v2}, QKV, y2, RTOL, ATOL, NULL);
    check_cases();
    th_release_all(13, (tg_tensor *[]){q, k, v, qb, kb, vb, qu, ku, vu, q2, k2, v2, y2});
    tg_module_release(a);
    tg_module_release(b);
    tg_module_release(c);
}

static tg_module *encoder(int64_t nhead, bool norm_first, bool batch_first, uint64_t seed)
{
    tg_nn_transformer_encoder_layer_opts o = TG_NN_TRANSFORMER_ENCODER_LAYER_OPTS_INIT;
    o.dim_feedforward = 12;
    o.norm_first = norm_first;
    o.batch_first = batch_first;
    o.seed = seed;
    tg_rng rng;
    tg_rng_init(&rng, seed);
    tg_module *m = NULL;
    cr_assert(tg_nn_transformer_encoder_layer_new(&m, 8, nhead, &o, &rng) == TG_OK, "%s",
              tg_error_message());
    randomize(m, seed + 100);
    return m;
}

/* (5, 5): 1 above the diagonal, a causal mask */
static const uint8_t CAUSAL[25] = {0, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0, 0, 0, 1, 1,
                                   0, 0, 0, 0, 1, 0, 0, 0, 0, 0};
/* (2, 5): padding at the end of each sequence, none masks a whole row */
static const uint8_t PAD[10] = {0, 0, 0, 1, 1, 0, 0, 0, 0, 1};

static const char *const SRC3[3] = {"src", "src_mask", "src_key_padding_mask"};

Test(onnx_inputs, transformer_encoder_layer_masks)
{
    need_onnx();
    tg_module *a = encoder(2, false, false, 20), *b = encoder(4, true, true, 21);
    tg_tensor *x = rand_nd(3, (const int64_t[]){5, 2, 8}, 22);
    tg_tensor *xb = rand_nd(3, (const int64_t[]){2, 5, 8}, 23);
    tg_tensor *fmask = rand_nd(2, (const int64_t[]){5, 5}, 24);
    tg_tensor *causal = u8_mask(2, (const int64_t[]){5, 5}, CAUSAL);
    tg_tensor *pad = u8_mask(2, (const int64_t[]){2, 5}, PAD);
    /* a float mask Added to the scores */
    write_case_n("tel_float_mask", a, 2, (tg_tensor *[]){x, fmask}, SRC3, RTOL, ATOL, NULL, NULL);
    /* a u8 mask: Where(Cast(mask), -inf, scores) */
    write_case_n("tel_u8_mask", b, 2, (tg_tensor *[]){xb, causal}, SRC3, RTOL, ATOL, NULL, NULL);
    /* both masks, post-norm seq-first and norm_first batch_first */
    write_case_n("tel_float_mask_padding", a, 3, (tg_tensor *[]){x, fmask, pad}, SRC3, RTOL,
                 ATOL, NULL, NULL);
    case_graph = "\"attributes\": {\"Cast\": {\"to\": 9}, \"Tile\": {}}";
    write_case_n("tel_u8_mask_padding", b, 3, (tg_tensor *[]){xb, causal, pad}, SRC3, RTOL,
                 ATOL, NULL, NULL);
    /* a (N*H, L, S) float mask */
    tg_tensor *fmask3 = rand_nd(3, (const int64_t[]){8, 5, 5}, 25);
    write_case_n("tel_mask3", b, 2, (tg_tensor *[]){xb, fmask3}, NULL, RTOL, ATOL, NULL, NULL);
    /* unbatched (S, E) with a (S) padding mask */
    tg_tensor *xu = rand_nd(2, (const int64_t[]){5, 8}, 26);
    tg_tensor *padu = u8_mask(1, (const int64_t[]){5}, PAD);
    write_case_n("tel_unbatched", a, 3, (tg_tensor *[]){xu, fmask, padu}, SRC3, RTOL, ATOL,
                 NULL, NULL);
    /* a dynamic batch: exported on 2, run on 3 */
    tg_onnx_options o = TG_ONNX_OPTIONS_INIT;
    o.dynamic_batch = true;
    char path[256];
    cr_assert(tg_onnx_export_n(b, 3, (tg_tensor *[]){xb, causal, pad}, SRC3,
                               th_tmp_path(path, sizeof path, "tel_dynamic.onnx"), &o) == TG_OK,
              "%s", tg_error_message());
    static const uint8_t pad3[15] = {0, 0, 0, 1, 1, 0, 0, 0, 0, 1, 0, 0, 1, 1, 1};
    tg_tensor *x3 = rand_nd(3, (const int64_t[]){3, 5, 8}, 27);
    tg_tensor *p3 = u8_mask(2, (const int64_t[]){3, 5}, pad3);
    tg_tensor *y3 = forward_n(b, 3, (tg_tensor *[]){x3, causal, p3});
    write_expected_n("tel_dynamic", 3, (tg_tensor *[]){x3, causal, p3}, SRC3, y3, RTOL, ATOL,
                     NULL);
    check_cases();
    th_release_all(12, (tg_tensor *[]){x, xb, fmask, causal, pad, fmask3, xu, padu, x3, p3, y3,
                                       NULL});
    tg_module_release(a);
    tg_module_release(b);
}

typedef enum kind { RNN, LSTM, GRU } kind;

static tg_module *rnn(kind k, int64_t in, int64_t h, int layers, bool bidir, bool batch_first,
                      uint64_t seed)
{
    tg_rnn_opts o = TG_RNN_OPTS_INIT;
    o.num_layers = layers;
    o.bidirectional = bidir;
    o.batch_first = batch_first;
    tg_rng rng;
    tg_rng_init(&rng, seed);
    tg_module *m = NULL;
    int rc = k == LSTM ? tg_nn_lstm_new(&m, in, h, &o, &rng)
             : k == GRU ? tg_nn_gru_new(&m, in, h, &o, &rng)
                        : tg_nn_rnn_new(&m, in, h, &o, &rng);
    cr_assert(rc == TG_OK, "%s", tg_error_message());
    return m;
}

/* An initial state (D layers, N, H), or (D layers, H) for n 0, in
 * [-1, 1): far from zero, so a state sliced from the wrong rows shows. */
static tg_tensor *state(int64_t dl, int64_t n, int64_t h, uint64_t seed)
{
    tg_tensor *u = n ? rand_nd(3, (const int64_t[]){dl, n, h}, seed)
                     : rand_nd(2, (const int64_t[]){dl, h}, seed);
    tg_tensor *a = NULL, *b = NULL;
    cr_assert(tg_mul_scalar(&a, u, 2.0) == TG_OK);
    cr_assert(tg_add_scalar(&b, a, -1.0) == TG_OK);
    th_release_all(2, (tg_tensor *[]){u, a});
    return b;
}

static const char *const IHC[3] = {"input", "h_0", "c_0"};

Test(onnx_inputs, recurrent_initial_states)
{
    need_onnx();
    tg_tensor *x = rand_nd(3, (const int64_t[]){5, 2, 3}, 30);
    tg_tensor *xb = rand_nd(3, (const int64_t[]){2, 5, 3}, 31);
    tg_tensor *xu = rand_nd(2, (const int64_t[]){5, 3}, 32);
    /* RNN, 2 layers, bidirectional: h_0 (4, 2, 4), a Slice per layer */
    tg_module *r = rnn(RNN, 3, 4, 2, true, false, 33);
    tg_tensor *h4 = state(4, 2, 4, 34);
    write_case_n("rnn_l2_bidir", r, 2, (tg_tensor *[]){x, h4}, IHC, RTOL, ATOL, NULL, NULL);
    /* GRU, 1 layer, batch_first: h_0 (1, N, H) still */
    tg_module *g = rnn(GRU, 3, 4, 1, false, true, 35);
    tg_tensor *h1 = state(1, 2, 4, 36);
    write_case_n("gru_bf", g, 2, (tg_tensor *[]){xb, h1}, IHC, RTOL, ATOL, NULL, NULL);
    /* GRU, 3 layers: the middle layer's rows */
    tg_module *g3 = rnn(GRU, 3, 4, 3, false, false, 37);
    tg_tensor *h3 = state(3, 2, 4, 38);
    write_case_n("gru_l3", g3, 2, (tg_tensor *[]){x, h3}, IHC, RTOL, ATOL, NULL, NULL);
    /* LSTM, 2 layers, bidirectional: h_0 and c_0 (4, 2, 5) */
    tg_module *l = rnn(LSTM, 3, 5, 2, true, false, 39);
    tg_tensor *lh = state(4, 2, 5, 40), *lc = state(4, 2, 5, 41);
    case_graph = "\"ops\": [\"Slice\", \"Slice\", \"LSTM\", \"Transpose\", \"Reshape\", "
                 "\"Slice\", \"Slice\", \"LSTM\", \"Transpose\", \"Reshape\"]";
    write_case_n("lstm_l2_bidir", l, 3, (tg_tensor *[]){x, lh, lc}, IHC, RTOL, ATOL, NULL, NULL);
    /* LSTM unbatched: (L, in), h_0 and c_0 (D layers, H) */
    tg_module *lu = rnn(LSTM, 3, 5, 1, true, false, 42);
    tg_tensor *uh = state(2, 0, 5, 43), *uc = state(2, 0, 5, 44);
    write_case_n("lstm_unbatched", lu, 3, (tg_tensor *[]){xu, uh, uc}, IHC, RTOL, ATOL, NULL,
                 NULL);
    /* a dynamic batch, batch_first LSTM: exported on 2, run on 3 */
    tg_module *lb = rnn(LSTM, 3, 5, 2, false, true, 45);
    tg_tensor *bh = state(2, 2, 5, 46), *bc = state(2, 2, 5, 47);
    tg_onnx_options o = TG_ONNX_OPTIONS_INIT;
    o.dynamic_batch = true;
    char path[256];
    cr_assert(tg_onnx_export_n(lb, 3, (tg_tensor *[]){xb, bh, bc}, IHC,
                               th_tmp_path(path, sizeof path, "lstm_dynamic.onnx"), &o) == TG_OK,
              "%s", tg_error_message());
    tg_tensor *x3 = rand_nd(3, (const int64_t[]){3, 5, 3}, 48);
    tg_tensor *h23 = state(2, 3, 5, 49), *c23 = state(2, 3, 5, 50);
    tg_tensor *y3 = forward_n(lb, 3, (tg_tensor *[]){x3, h23, c23});
    write_expected_n("lstm_dynamic", 3, (tg_tensor *[]){x3, h23, c23}, IHC, y3, RTOL, ATOL, NULL);
    check_cases();
    th_release_all(17, (tg_tensor *[]){x, xb, xu, h4, h1, h3, lh, lc, uh, uc, bh, bc, x3, h23,
                                       c23, y3, NULL});
    tg_module *ms[6] = {r, g, g3, l, lu, lb};
    for (int i = 0; i < 6; i++) tg_module_release(ms[i]);
}

/* The same module in torch (tests/onnx/torch_inputs.py builds it from the
 * state dict and `what`), exported by torch.onnx.export with the inputs of
 * case `name`: case "<name>_torch", whose graph must give tapegrad's
 * output on the same inputs. */
static void same_as_torch(const char *name, tg_module *m, const char *what)
{
    char path[256], file[128];
    tg_st_file *f = NULL;
    snprintf(file, sizeof file, "%s.safetensors", name);
    cr_assert(tg_st_new(&f) == TG_OK);
    cr_assert(tg_module_state_dict_save(m, f, "") == TG_OK, "%s", tg_error_message());
    cr_assert(tg_safetensors_save(f, th_tmp_path(path, sizeof path, file)) == TG_OK);
    tg_st_free(f);
    int rc = th_run("TG_PYTHON", (const char *const[]){TG_SOURCE_ROOT
                                                       "/tests/onnx/torch_inputs.py",
                                                       file, name, what, NULL});
    cr_log_info("torch_inputs.py %s: %s", name, th_out);
    cr_assert(rc == 0, "%s by torch.onnx.export:\n%s%s", name, th_out, th_err);
}

Test(onnx_inputs, same_outputs_as_torch_onnx_export)
{
    need_onnx();
    /* MultiheadAttention, batch_first, kdim and vdim */
    tg_module *a = mha(8, 2, 3, 5, true, true, 60);
    tg_tensor *q = rand_nd(3, (const int64_t[]){2, 4, 8}, 61);
    tg_tensor *k = rand_nd(3, (const int64_t[]){2, 6, 3}, 62);
    tg_tensor *v = rand_nd(3, (const int64_t[]){2, 6, 5}, 63);
    write_case_n("t_mha", a, 3, (tg_tensor *[]){q, k, v}, QKV, RTOL, ATOL, NULL, NULL);
    same_as_torch("t_mha", a, "mha heads=2 batch_first");
    /* MultiheadAttention, seq-first, packed */
    tg_module *a2 = mha(8, 4, 0, 0, true, false, 64);
    tg_tensor *q2 = rand_nd(3, (const int64_t[]){4, 2, 8}, 65);
    tg_tensor *k2 = rand_nd(3, (const int64_t[]){6, 2, 8}, 66);
    write_case_n("t_mha_packed", a2, 3, (tg_tensor *[]){q2, k2, k2}, QKV, RTOL, ATOL, NULL,
                 NULL);
    same_as_torch("t_mha_packed", a2, "mha heads=4");
    /* LSTM, 2 layers, bidirectional, (input, h_0, c_0) */
    tg_module *l = rnn(LSTM, 3, 5, 2, true, false, 67);
    tg_tensor *x = rand_nd(3, (const int64_t[]){5, 2, 3}, 68);
    tg_tensor *h = state(4, 2, 5, 69), *c = state(4, 2, 5, 70);
    write_case_n("t_lstm", l, 3, (tg_tensor *[]){x, h, c}, IHC, RTOL, ATOL, NULL, NULL);
    same_as_torch("t_lstm", l, "LSTM");
    /* GRU, 2 layers, batch_first, (input, h_0) */
    tg_module *g = rnn(GRU, 3, 4, 2, false, true, 71);
    tg_tensor *xb = rand_nd(3, (const int64_t[]){2, 5, 3}, 72);
    tg_tensor *hg = state(2, 2, 4, 73);
    write_case_n("t_gru", g, 2, (tg_tensor *[]){xb, hg}, IHC, RTOL, ATOL, NULL, NULL);
    same_as_torch("t_gru", g, "GRU batch_first");
    /* TransformerEncoderLayer with a float src_mask */
    tg_module *e = encoder(2, false, false, 74);
    tg_tensor *src = rand_nd(3, (const int64_t[]){5, 2, 8}, 75);
    tg_tensor *mask = rand_nd(2, (const int64_t[]){5, 5}, 76);
    write_case_n("t_tel", e, 2, (tg_tensor *[]){src, mask}, SRC3, RTOL, ATOL, NULL, NULL);
    same_as_torch("t_tel", e, "tel heads=2");
    check_cases();
    th_release_all(14, (tg_tensor *[]){q, k, v, q2, k2, x, h, c, xb, hg, src, mask, NULL, NULL});
    tg_module *ms[5] = {a, a2, l, g, e};
    for (int i = 0; i < 5; i++) tg_module_release(ms[i]);
}

static const char *const MHA5[5] = {"query", "key", "value", "key_padding_mask", "attn_mask"};

/* MultiheadAttention m on its n graph inputs xs (query, key, value[,
 * key_padding_mask[, attn_mask]], NULL masks left out) as case `name`,
 * with the attention weights (averaged or per head) as a second output
 * when weights; tapegrad's forward gives the expected values. */
static void mha_case(const char *name, tg_module *m, int n, tg_tensor *const *xs, bool weights,
                     bool per_head, bool dynamic)
{
    char path[256], file[128];
    tg_nn_mha_forward_opts fo = TG_NN_MHA_FORWARD_OPTS_INIT;
    fo.key_padding_mask = n > 3 ? xs[3] : NULL;
    fo.attn_mask = n > 4 ? xs[4] : NULL;
    fo.average_attn_weights = !per_head;
    tg_tensor *y = NULL, *w = NULL;
    tg_module_train(m, false);
    tg_no_grad_begin();
    int rc = tg_nn_multihead_attention_forward(m, &y, weights ? &w : NULL, xs[0], xs[1], xs[2],
                                               &fo);
    tg_no_grad_end();
    cr_assert(rc == TG_OK, "%s: %s", name, tg_error_message());
    tg_onnx_options o = TG_ONNX_OPTIONS_INIT;
    o.extra_outputs = weights;
    o.mha_per_head_weights = per_head;
    o.dynamic_batch = dynamic;
    snprintf(file, sizeof file, "%s.onnx", name);
    cr_assert(tg_onnx_export_n(m, n, xs, MHA5, th_tmp_path(path, sizeof path, file), &o) == TG_OK,
              "%s: %s", name, tg_error_message());
    if (weights) case_extra_outputs(name, 1, &w, (const char *const[]){"attn_weights"});
    write_expected_n(name, n, xs, MHA5, y, RTOL, ATOL, NULL);
    tg_tensor_release(y);
    tg_tensor_release(w);
}

/* MultiheadAttention with key_padding_mask and attn_mask graph inputs (u8
 * or float, either left out) and the attention weights as a second output
 * (extra_outputs), averaged over the heads or per head: batched, batch
 * first with kdim and vdim, unbatched, a dynamic batch; torch.onnx.export
 * of torch's module with need_weights gives the same outputs. */
Test(onnx_inputs, mha_masks_and_weights_match_onnxruntime)
{
    need_onnx();
    tg_module *a = mha(8, 2, 0, 0, true, false, 120), *b = mha(8, 2, 3, 5, true, true, 121);
    tg_tensor *q = rand_nd(3, (const int64_t[]){4, 2, 8}, 122);
    tg_tensor *k = rand_nd(3, (const int64_t[]){5, 2, 8}, 123);
    tg_tensor *v = rand_nd(3, (const int64_t[]){5, 2, 8}, 124);
    /* (N, S) u8, no row all masked; a float (L, S) attention mask */
    tg_tensor *kpm = u8_mask(2, (const int64_t[]){2, 5}, PAD);
    tg_tensor *am = rand_nd(2, (const int64_t[]){4, 5}, 125);
    mha_case("mha_kpm_mask_weights", a, 5, (tg_tensor *[]){q, k, v, kpm, am}, true, false,
             false);
    same_as_torch("mha_kpm_mask_weights", a, "mha heads=2 weights");
    mha_case("mha_kpm_mask_head_weights", a, 5, (tg_tensor *[]){q, k, v, kpm, am}, true, true,
             false);
    same_as_torch("mha_kpm_mask_head_weights", a, "mha heads=2 weights per_head");
    mha_case("mha_kpm_mask", a, 5, (tg_tensor *[]){q, k, v, kpm, am}, false, false, false);
    same_as_torch("mha_kpm_mask", a, "mha heads=2");
    /* the key padding mask alone, a dynamic batch */
    mha_case("mha_kpm_weights_dynamic", a, 4, (tg_tensor *[]){q, k, v, kpm}, true, false, true);
    /* batch first, kdim and vdim: a u8 (N*H, L, S) attention mask, the key
     * padding mask left out, the weights per head */
    tg_tensor *qb = rand_nd(3, (const int64_t[]){2, 4, 8}, 126);
    tg_tensor *kb = rand_nd(3, (const int64_t[]){2, 5, 3}, 127);
    tg_tensor *vb = rand_nd(3, (const int64_t[]){2, 5, 5}, 128);
    uint8_t bits[80];
    for (int i = 0; i < 80; i++) bits[i] = i % 5 != 0 && (i * 7) % 3 == 0;   /* key 0 kept */
    tg_tensor *amu = u8_mask(3, (const int64_t[]){4, 4, 5}, bits);
    mha_case("mha_batch_first_u8_mask_head_weights", b, 5, (tg_tensor *[]){qb, kb, vb, NULL, amu},
             true, true, false);
    same_as_torch("mha_batch_first_u8_mask_head_weights", b,
                  "mha heads=2 batch_first weights per_head");
    mha_case("mha_batch_first_u8_mask_weights", b, 5, (tg_tensor *[]){qb, kb, vb, NULL, amu},
             true, false, false);
    /* unbatched: a float (S) key padding mask and a float (L, S) mask */
    tg_tensor *qu = rand_nd(2, (const int64_t[]){4, 8}, 129);
    tg_tensor *ku = rand_nd(2, (const int64_t[]){5, 8}, 130);
    tg_tensor *kpu = rand_nd(1, (const int64_t[]){5}, 131);
    mha_case("mha_unbatched_weights", a, 5, (tg_tensor *[]){qu, ku, ku, kpu, am}, true, false,
             false);
    mha_case("mha_unbatched_head_weights", a, 4, (tg_tensor *[]){qu, ku, ku, kpu}, true, true,
             false);
    check_cases();
    th_release_all(13, (tg_tensor *[]){q, k, v, kpm, am, qb, kb, vb, amu, qu, ku, kpu, NULL});
    tg_module_release(a);
    tg_module_release(b);
}

Test(onnx_inputs, refusals_name_the_module_and_write_nothing)
{
    need_onnx();
    tg_module *a = mha(8, 2, 0, 0, true, false, 80);
    tg_tensor *q = rand_nd(3, (const int64_t[]){5, 2, 8}, 81);
    refused_export_n(a, 2, (tg_tensor *[]){q, q}, NULL, TG_EINVAL,
            "module '<top>' (MultiheadAttention) takes the graph inputs (query, key, value[, "
            "key_padding_mask[, attn_mask]]), not 2");
    refused_export_n(a, 1, (tg_tensor *[]){q}, NULL, TG_EUNSUPPORTED,
            "module '<top>' (MultiheadAttention) is not supported on its own");
    /* names: duplicated, the output's */
    refused_export_n(a, 3, (tg_tensor *[]){q, q, q}, (const char *const[]){"q", "k", "q"},
            TG_EINVAL, "input_names[0] and input_names[2] are both 'q'");
    refused_export_n(a, 3, (tg_tensor *[]){q, q, q}, (const char *const[]){"q", "output", "v"},
            TG_EINVAL, "input_names[1] must be a non-empty name other than the output's");
    refused_export_n(a, 3, (tg_tensor *[]){q, NULL, q}, NULL, TG_EINVAL,
            "example_inputs[1] must not be NULL");
    refused_export_n(a, 0, (tg_tensor *[]){q}, NULL, TG_EINVAL, "n_inputs=0 must be in [1, 8]");
    /* masks: u8 or f32; at most key_padding_mask and attn_mask */
    tg_tensor *ikpm = NULL;
    cr_assert(tg_tensor_zeros(&ikpm, TG_I64, 2, (const int64_t[]){2, 5}) == TG_OK);
    refused_export_n(a, 4, (tg_tensor *[]){q, q, q, ikpm}, NULL, TG_EDTYPE,
            "module '<top>' (MultiheadAttention): graph input 3 (key_padding_mask) has dtype "
            "i64; it must be u8 or f32");
    tg_tensor *u8q = NULL;
    cr_assert(tg_tensor_zeros(&u8q, TG_U8, 3, (const int64_t[]){5, 2, 8}) == TG_OK);
    refused_export_n(a, 3, (tg_tensor *[]){q, u8q, q}, NULL, TG_EDTYPE,
            "module '<top>' (MultiheadAttention): graph input 1 (key) has dtype u8; it must be "
            "f32");
    refused_export_n(a, 6, (tg_tensor *[]){q, q, q, NULL, NULL, q}, NULL, TG_EINVAL,
            "module '<top>' (MultiheadAttention) takes the graph inputs (query, key, value[, "
            "key_padding_mask[, attn_mask]]), not 6");
    th_release_all(2, (tg_tensor *[]){ikpm, u8q});
    /* add_bias_kv has no export */
    tg_nn_multihead_attention_opts ao = TG_NN_MULTIHEAD_ATTENTION_OPTS_INIT;
    ao.add_bias_kv = true;
    tg_rng rng;
    tg_rng_init(&rng, 82);
    tg_module *kv = NULL;
    cr_assert(tg_nn_multihead_attention_new(&kv, 8, 2, &ao, &rng) == TG_OK);
    refused_export_n(kv, 3, (tg_tensor *[]){q, q, q}, NULL, TG_EUNSUPPORTED,
            "module '<top>' (MultiheadAttention) with add_bias_kv or add_zero_attn is not "
            "supported");
    /* recurrent layers: (input, h_0) only, (input, h_0, c_0) for an LSTM */
    tg_module *l = rnn(LSTM, 3, 4, 1, false, false, 83), *g = rnn(GRU, 3, 4, 1, false, false, 84);
    tg_tensor *x = rand_nd(3, (const int64_t[]){5, 2, 3}, 85);
    tg_tensor *h = state(1, 2, 4, 86);
    refused_export_n(l, 2, (tg_tensor *[]){x, h}, NULL, TG_EINVAL,
            "module '<top>' (LSTM) takes the graph inputs (input) or (input, h_0, c_0), not 2");
    refused_export_n(g, 3, (tg_tensor *[]){x, h, h}, NULL, TG_EINVAL,
            "module '<top>' (GRU) takes the graph inputs (input) or (input, h_0), not 3");
    /* an encoder layer: at most three; masks f32 or u8 */
    tg_module *e = encoder(2, false, false, 87);
    tg_tensor *src = rand_nd(3, (const int64_t[]){5, 2, 8}, 88);
    tg_tensor *mask = rand_nd(2, (const int64_t[]){5, 5}, 89);
    refused_export_n(e, 4, (tg_tensor *[]){src, mask, mask, mask}, NULL, TG_EINVAL,
            "module '<top>' (TransformerEncoderLayer) takes the graph inputs (src), (src, "
            "src_mask) or (src, src_mask, src_key_padding_mask), not 4");
    tg_tensor *ipad = NULL;
    cr_assert(tg_tensor_zeros(&ipad, TG_I32, 2, (const int64_t[]){2, 5}) == TG_OK);
    refused_export_n(e, 3, (tg_tensor *[]){src, mask, ipad}, NULL, TG_EDTYPE,
            "graph input 2 (src_key_padding_mask) has dtype i32; it must be u8 or f32");
    tg_tensor_release(ipad);
    /* a module of one input, and a container */
    tg_module *lin = NULL, *seq = NULL;
    cr_assert(tg_nn_linear_new(&lin, 8, 3, true, &rng) == TG_OK);
    refused_export_n(lin, 2, (tg_tensor *[]){src, src}, NULL, TG_EINVAL,
            "module '<top>' (Linear) takes one graph input, not 2");
    cr_assert(tg_nn_sequential_new(&seq) == TG_OK);
    append(seq, tg_module_retain(e));
    refused_export_n(seq, 2, (tg_tensor *[]){src, mask}, NULL, TG_EINVAL,
            "module '<top>' (Sequential) takes one graph input, not 2");
    th_release_all(5, (tg_tensor *[]){q, x, h, src, mask});
    tg_module *ms[7] = {a, kv, l, g, e, lin, seq};
    for (int i = 0; i < 7; i++) tg_module_release(ms[i]);
}

Test(onnx_inputs, one_input_is_tg_onnx_export)
{
    need_onnx();
    /* the same bytes from both entries */
    tg_module *l = rnn(LSTM, 3, 4, 2, true, false, 90);
    tg_tensor *x = rand_nd(3, (const int64_t[]){5, 2, 3}, 91);
    char p1[256], p2[256];
    th_tmp_path(p1, sizeof p1, "one.onnx");
    th_tmp_path(p2, sizeof p2, "one_n.onnx");
    cr_assert(tg_onnx_export(l, x, p1, NULL) == TG_OK, "%s", tg_error_message());
    cr_assert(tg_onnx_export_n(l, 1, (tg_tensor *[]){x}, NULL, p2, NULL) == TG_OK, "%s",
              tg_error_message());
    size_t n1 = 0, n2 = 0;
    char *b1 = th_read_file(p1, &n1), *b2 = th_read_file(p2, &n2);
    cr_assert(n1 == n2 && memcmp(b1, b2, n1) == 0, "tg_onnx_export_n of one input differs");
    free(b1);
    free(b2);
    tg_module_release(l);
    tg_tensor_release(x);
}
