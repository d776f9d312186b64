/* tests/test_transformer.c - the TransformerEncoderLayer module: against
 * torch 1.13's nn.TransformerEncoderLayer (post-norm and norm_first, relu
 * and gelu, batch_first, unbatched, a causal float src_mask and a u8
 * src_key_padding_mask; output and the gradients of src and of every
 * parameter; f32 and f64), its children and state-dict keys, gradients of
 * first and second order by finite differences, dropout in train and eval,
 * the options it reports (tg_nn_transformer_encoder_layer_params) and the
 * refusals.
 * Goldens: scripts/make_attention_goldens.py (its "tel" cases). */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "transformer_fixtures.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

static const char *const TORCH_KEYS =
    "self_attn.in_proj_weight,self_attn.in_proj_bias,self_attn.out_proj.weight,"
    "self_attn.out_proj.bias,linear1.weight,linear1.bias,linear2.weight,linear2.bias,"
    "norm1.weight,norm1.bias,norm2.weight,norm2.bias";

static void compare_case(const tg_st_file *f, int i, int *counts)
{
    char c[16], key[TG_MODULE_NAME_MAX + 16];
    snprintf(c, sizeof c, "tel%d", i);
    bool f64;
    tg_module *m = th_golden_encoder_layer(f, c, &f64);
    const double rtol = f64 ? 1e-10 : 5e-5;
    th_expect_state_keys(m, th_golden_meta(f, c, "params"));
    tg_tensor *x = th_leaf_clone(th_golden_get(f, c, "x")), *y = NULL, *p = NULL, *l = NULL;
    snprintf(key, sizeof key, "%s.mask", c);
    tg_tensor *mask = tg_st_get(f, key);
    snprintf(key, sizeof key, "%s.kpm", c);
    const tg_tensor *kpm0 = tg_st_get(f, key);
    snprintf(key, sizeof key, "%s.dkpm", c);
    const tg_tensor *dkpm = tg_st_get(f, key);   /* a float mask's gradient */
    tg_tensor *kpm = dkpm ? th_leaf_clone(kpm0) : tg_tensor_retain((tg_tensor *)kpm0);
    OK(tg_nn_transformer_encoder_layer_forward(m, &y, x, mask, kpm));
    th_expect_close_scaled(c, y, th_golden_get(f, c, "y"), rtol);
    OK(tg_mul(&p, y, (tg_tensor *)th_golden_get(f, c, "g")));
    OK(tg_sum(&l, p));
    OK(tg_backward(l, NULL, NULL));
    th_expect_close_scaled(c, tg_tensor_grad(x), th_golden_get(f, c, "dx"), rtol);
    if (dkpm) th_expect_close_scaled(c, tg_tensor_grad(kpm), dkpm, rtol);
    counts[0]++;
    counts[1] += kpm && tg_tensor_dtype(kpm) != TG_U8;
    char name[TG_MODULE_NAME_MAX];
    for (int j = 0; j < tg_module_state_count(m); j++) {
        tg_tensor *t = NULL;
        OK(tg_module_state_at(m, j, name, sizeof name, &t, NULL));
        snprintf(key, sizeof key, "dp.%s", name);
        cr_assert_not_null(tg_tensor_grad(t), "%s: %s has no gradient", c, name);
        th_expect_close_scaled(c, tg_tensor_grad(t), th_golden_get(f, c, key), rtol);
    }
    th_release_all(5, (tg_tensor *[]){x, y, p, l, kpm});
    tg_module_release(m);
}

Test(transformer, every_case_matches_torch)
{
    tg_st_file *f = th_golden_load("attention.safetensors");
    const int n = atoi(tg_st_meta_get(f, "tel_cases"));
    int counts[2] = {0};   /* cases, with a float src_key_padding_mask */
    for (int i = 0; i < n; i++) compare_case(f, i, counts);
    cr_assert(counts[0] >= 16 && counts[1] >= 6, "%d cases, %d float kpm", counts[0], counts[1]);
    tg_st_free(f);
}

static tg_module *small_layer(bool norm_first, double dropout, uint64_t seed)
{
    tg_nn_transformer_encoder_layer_opts o = TG_NN_TRANSFORMER_ENCODER_LAYER_OPTS_INIT;
    o.dim_feedforward = 6;
    o.dropout = dropout;
    o.norm_first = norm_first;
    o.activation = TG_ACT_GELU;
    o.seed = seed;
    tg_rng rng;
    tg_rng_init(&rng, seed);
    tg_module *m = NULL;
    OK(tg_nn_transformer_encoder_layer_new(&m, 4, 2, &o, &rng));
    OK(tg_module_to_dtype(m, TG_F64));
    return m;
}

typedef struct tel_user {
    tg_module *m;
    tg_tensor *mask;
} tel_user;

static int tel_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    const tel_user *u = user;
    return tg_nn_transformer_encoder_layer_forward(u->m, out, in[0], u->mask, NULL);
}

/* First and second derivatives in src and the first parameters, by finite
 * differences in f64, post-norm and pre-norm with a causal mask. */
Test(transformer, gradcheck_and_gradgradcheck)
{
    double cm[9];
    for (int i = 0; i < 9; i++) cm[i] = i % 3 > i / 3 ? -INFINITY : 0.0;
    tg_tensor *mask = th_tensor_from(TG_F64, 2, (int64_t[]){3, 3}, cm);
    for (int c = 0; c < 2; c++) {
        tg_module *m = small_layer(c == 1, 0.0, 3);
        uint64_t s = 4;
        tg_tensor *in[8] = {th_rand_tensor(&s, TG_F64, 3, (int64_t[]){3, 2, 4}, -1, 1)};
        OK(tg_tensor_set_requires_grad(in[0], true));
        tg_tensor **params = NULL;
        int np = 0;
        OK(tg_module_parameters(m, &params, &np));
        cr_assert(eq(int, np, 12));
        for (int i = 1; i < 8; i++) in[i] = tg_tensor_retain(params[i - 1]);
        free(params);
        tel_user u = {.m = m, .mask = mask};
        th_expect_gradchecks(tel_fn, &u, 8, in, "case %d", c);
        th_release_all(8, in);
        tg_module_release(m);
    }
    tg_tensor_release(mask);
}

/* torch's children and keys, each dropout with the layer's p;
 * tg_module_forward is the forward without masks; dropout draws in
 * training only (eval gives the dropout-free layer's output); a state dict
 * round trip. */
Test(transformer, children_forward_dropout_and_state_dict)
{
    tg_module *m = small_layer(false, 0.5, 7), *m0 = small_layer(false, 0.0, 7);
    th_expect_state_keys(m, TORCH_KEYS);
    const char *kids[9] = {"self_attn", "linear1", "dropout", "linear2", "norm1", "norm2",
                           "dropout1", "dropout2", "activation"};
    cr_assert(eq(int, tg_module_child_count(m), 9));
    for (int i = 0; i < 9; i++) cr_assert(eq(str, (char *)tg_module_child_name_at(m, i),
                                             (char *)kids[i]));
    cr_assert(eq(str, (char *)tg_module_type_name(m), "TransformerEncoderLayer"));
    for (int i = 0; i < 3; i++) {   /* each Dropout child has the layer's p */
        static const char *const drops[3] = {"dropout", "dropout1", "dropout2"};
        double p = -1;
        OK(tg_nn_dropout_params(tg_module_child(m, drops[i]), NULL, &p));
        cr_assert(eq(dbl, p, 0.5), "%s: p=%g", drops[i], p);
    }
    tg_nn_multihead_attention_opts ao;
    OK(tg_nn_multihead_attention_params(tg_module_child(m, "self_attn"), NULL, NULL, &ao));
    cr_assert(eq(dbl, ao.dropout, 0.5));
    uint64_t s = 2;
    tg_tensor *x = th_rand_tensor(&s, TG_F64, 3, (int64_t[]){3, 2, 4}, -1, 1);
    tg_tensor *yt = NULL, *ye = NULL, *y0 = NULL, *yf = NULL;
    OK(tg_module_forward(m, &yt, x));
    tg_module_train(m, false);
    OK(tg_module_forward(m, &ye, x));
    OK(tg_nn_transformer_encoder_layer_forward(m0, &y0, x, NULL, NULL));
    th_expect_same_bits("eval", x, ye, y0);
    cr_assert(th_same_bits(yt, ye) == false, "training drops");
    tg_st_file *f = NULL;
    OK(tg_st_new(&f));
    OK(tg_module_state_dict_save(m, f, NULL));
    tg_module *m2 = small_layer(false, 0.0, 8);
    OK(tg_module_load_state_dict(m2, f, NULL, true));
    OK(tg_nn_transformer_encoder_layer_forward(m2, &yf, x, NULL, NULL));
    th_expect_same_bits("loaded", x, yf, ye);
    tg_st_free(f);
    th_release_all(5, (tg_tensor *[]){x, yt, ye, y0, yf});
    tg_module_release(m);
    tg_module_release(m0);
    tg_module_release(m2);
}

Test(transformer, refusals_name_the_argument)
{
    tg_rng rng;
    tg_rng_init(&rng, 1);
    tg_module *m = NULL;
    tg_nn_transformer_encoder_layer_opts o = TG_NN_TRANSFORMER_ENCODER_LAYER_OPTS_INIT;
    th_expect_refused(tg_nn_transformer_encoder_layer_new(&m, 6, 4, NULL, &rng), TG_EINVAL,
                      "d_model=6 must be >= 1 and divisible by nhead=4", NULL);
    o.activation = TG_ACT_TANH;
    th_expect_refused(tg_nn_transformer_encoder_layer_new(&m, 4, 2, &o, &rng), TG_EINVAL,
                      "must be TG_ACT_RELU or TG_ACT_GELU", NULL);
    o = (tg_nn_transformer_encoder_layer_opts)TG_NN_TRANSFORMER_ENCODER_LAYER_OPTS_INIT;
    o.dim_feedforward = 0;
    th_expect_refused(tg_nn_transformer_encoder_layer_new(&m, 4, 2, &o, &rng), TG_EINVAL,
                      "dim_feedforward=0 must be >= 1", NULL);
    o = (tg_nn_transformer_encoder_layer_opts)TG_NN_TRANSFORMER_ENCODER_LAYER_OPTS_INIT;
    o.layer_norm_eps = 0;
    th_expect_refused(tg_nn_transformer_encoder_layer_new(&m, 4, 2, &o, &rng), TG_EINVAL,
                      "layer_norm_eps=0 must be > 0", NULL);
    cr_assert_null(m);
    OK(tg_nn_transformer_encoder_layer_new(&m, 4, 2, NULL, &rng));
    uint64_t s = 1;
    tg_tensor *x5 = th_rand_tensor(&s, TG_F32, 3, (int64_t[]){3, 2, 5}, -1, 1);
    tg_tensor *x = th_rand_tensor(&s, TG_F32, 3, (int64_t[]){3, 2, 4}, -1, 1);
    tg_tensor *bad = th_rand_tensor(&s, TG_F32, 2, (int64_t[]){3, 4}, -1, 1), *y = NULL;
    th_expect_refused(tg_nn_transformer_encoder_layer_forward(m, &y, x5, NULL, NULL), TG_ESHAPE,
                      "src is (3, 2, 5); it must be (S, N, d_model=4)", y);
    th_expect_refused(tg_nn_transformer_encoder_layer_forward(m, &y, x, bad, NULL), TG_ESHAPE,
                      "attn_mask is (3, 4); it must be (L, S) = (3, 3)", y);
    th_expect_refused(tg_module_forward(m, &y, x5), TG_ESHAPE, "d_model=4", y);
    th_release_all(3, (tg_tensor *[]){x5, x, bad});
    tg_module_release(m);
}

Test(transformer, params_give_what_it_was_made_with)
{
    tg_module *m = small_layer(true, 0.25, 7), *lin = NULL;
    int64_t d = 0, h = 0;
    tg_nn_transformer_encoder_layer_opts o = {0};
    OK(tg_nn_transformer_encoder_layer_params(m, &d, &h, &o));
    cr_assert(eq(i64, d, 4));
    cr_assert(eq(i64, h, 2));
    cr_assert(eq(i64, o.dim_feedforward, 6));
    cr_assert(eq(dbl, o.dropout, 0.25));
    cr_assert(eq(int, (int)o.activation, (int)TG_ACT_GELU));
    cr_assert(eq(dbl, o.layer_norm_eps, 1e-5));
    cr_assert(o.norm_first && !o.batch_first);
    cr_assert(eq(u64, o.seed, 7));
    OK(tg_nn_transformer_encoder_layer_params(m, NULL, NULL, NULL));
    tg_rng rng;
    tg_rng_init(&rng, 1);
    OK(tg_nn_linear_new(&lin, 2, 2, true, &rng));
    th_expect_refused(tg_nn_transformer_encoder_layer_params(lin, &d, NULL, NULL), TG_EINVAL,
                      "nn_transformer_encoder_layer_params: m is a Linear module, not "
                      "TransformerEncoderLayer", NULL);
    th_expect_refused(tg_nn_transformer_encoder_layer_params(NULL, &d, NULL, NULL), TG_EINVAL,
                      "m must not be NULL", NULL);
    tg_module_release(lin);
    tg_module_release(m);
}
