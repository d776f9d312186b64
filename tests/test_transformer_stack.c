/* tests/test_transformer_stack.c - TransformerDecoderLayer,
 * TransformerEncoder, TransformerDecoder and Transformer: against torch
 * 1.13 (post-norm and norm_first, relu and gelu, batch_first, unbatched,
 * causal, u8 and float masks, u8 and float key padding masks; output and
 * the gradients of the inputs, of float key padding masks and of every
 * parameter; f32 and f64), their state-dict keys, the clones' equal
 * weights, Transformer's xavier init, gradients of first and second order
 * by finite differences, the tg_module_forward_n forms, dropout in train
 * and eval, a state-dict round trip, the mask generator and the refusals.
 * Goldens: scripts/make_transformer_goldens.py. */
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

static const char *const TDL_KEYS =
    "self_attn.in_proj_weight,self_attn.in_proj_bias,self_attn.out_proj.weight,"
    "self_attn.out_proj.bias,multihead_attn.in_proj_weight,multihead_attn.in_proj_bias,"
    "multihead_attn.out_proj.weight,multihead_attn.out_proj.bias,linear1.weight,linear1.bias,"
    "linear2.weight,linear2.bias,norm1.weight,norm1.bias,norm2.weight,norm2.bias,"
    "norm3.weight,norm3.bias";

static int run(tg_module *m, const char *kind, tg_tensor **y, tg_tensor *a, tg_tensor *b,
               const tg_nn_transformer_masks *mk)
{
    if (!strcmp(kind, "tdl")) return tg_nn_transformer_decoder_layer_forward(m, y, a, b, mk);
    if (!strcmp(kind, "dec")) return tg_nn_transformer_decoder_forward(m, y, a, b, mk);
    if (!strcmp(kind, "tf")) return tg_nn_transformer_forward(m, y, a, b, mk);
    return tg_nn_transformer_encoder_forward(m, y, a, mk->src_mask, mk->src_key_padding_mask);
}

static void compare_case(const tg_st_file *f, int i, int *float_kpm)
{
    char c[16], key[TG_MODULE_NAME_MAX + 16];
    snprintf(c, sizeof c, "case%d", i);
    const char *kind = th_golden_meta(f, c, "kind");
    bool f64;
    tg_module *m = th_golden_transformer(f, c, &f64);
    const double rtol = f64 ? 1e-10 : 1e-4;
    const bool two = strcmp(kind, "enc") != 0;
    tg_tensor *a = th_leaf_clone(th_golden_get(f, c, "a"));
    tg_tensor *b = two ? th_leaf_clone(th_golden_get(f, c, "b")) : NULL;
    static const char *const kpm_names[3] = {"src_kpm", "tgt_kpm", "mem_kpm"};
    tg_tensor *kpm[3], *dkpm[3];   /* a float mask with a gradient: a leaf */
    for (int j = 0; j < 3; j++) {
        char dname[16];
        snprintf(dname, sizeof dname, "d%s", kpm_names[j]);
        dkpm[j] = th_golden_opt(f, c, dname);
        kpm[j] = th_golden_opt(f, c, kpm_names[j]);
        kpm[j] = dkpm[j] ? th_leaf_clone(kpm[j]) : tg_tensor_retain(kpm[j]);
        *float_kpm += kpm[j] && tg_tensor_dtype(kpm[j]) != TG_U8;
    }
    const tg_nn_transformer_masks mk = {
        th_golden_opt(f, c, "src_mask"), th_golden_opt(f, c, "tgt_mask"),
        th_golden_opt(f, c, "memory_mask"), kpm[0], kpm[1], kpm[2]};
    tg_tensor *y = NULL, *p = NULL, *l = NULL;
    OK(run(m, kind, &y, a, b, &mk));
    th_expect_close_scaled(c, y, th_golden_get(f, c, "y"), rtol);
    OK(tg_mul(&p, y, (tg_tensor *)th_golden_get(f, c, "g")));
    OK(tg_sum(&l, p));
    OK(tg_backward(l, NULL, NULL));
    th_expect_close_scaled(c, tg_tensor_grad(a), th_golden_get(f, c, "da"), rtol);
    if (two) th_expect_close_scaled(c, tg_tensor_grad(b), th_golden_get(f, c, "db"), rtol);
    for (int j = 0; j < 3; j++)
        if (dkpm[j]) th_expect_close_scaled(kpm_names[j], tg_tensor_grad(kpm[j]), dkpm[j], rtol);
    char name[TG_MODULE_NAME_MAX];
    for (int j = 0; j < tg_module_state_count(m); j++) {
        tg_tensor *t = NULL;
        OK(tg_module_state_at(m, j, name, sizeof name, &t, NULL));
        snprintf(key, sizeof key, "dp.%s", name);
        cr_assert_not_null(tg_tensor_grad(t), "%s: %s has no gradient", c, name);
        th_expect_close_scaled(name, tg_tensor_grad(t), th_golden_get(f, c, key), rtol);
    }
    th_release_all(5, (tg_tensor *[]){a, b, y, p, l});
    th_release_all(3, kpm);
    tg_module_release(m);
}

Test(transformer_stack, every_case_matches_torch)
{
    tg_st_file *f = th_golden_load("transformer.safetensors");
    const int n = atoi(tg_st_meta_get(f, "cases"));
    int float_kpm = 0;   /* float key padding masks given */
    for (int i = 0; i < n; i++) compare_case(f, i, &float_kpm);
    cr_assert(n >= 40 && float_kpm >= 20, "%d cases, %d float masks", n, float_kpm);
    tg_st_free(f);
}

/* The state of child `layers.<i>` of stack m equals that of layers.0, bit
 * for bit (same), or differs in every matrix (!same). */
static void expect_layers(const tg_module *m, int64_t n, bool same)
{
    const tg_module *list = tg_module_child(m, "layers");
    cr_assert_not_null(list);
    cr_assert(eq(str, (char *)tg_module_type_name(list), "ModuleList"));
    cr_assert(eq(int, tg_module_child_count(list), (int)n));
    const tg_module *l0 = tg_module_child_at(list, 0);
    for (int i = 1; i < n; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "%d", i);
        const tg_module *li = tg_module_child(list, nm);
        cr_assert_not_null(li, "layers.%s", nm);
        cr_assert(eq(int, tg_module_state_count(li), tg_module_state_count(l0)));
        for (int j = 0; j < tg_module_state_count(l0); j++) {
            tg_tensor *a = NULL, *b = NULL;
            char name[TG_MODULE_NAME_MAX];
            OK(tg_module_state_at(l0, j, name, sizeof name, &a, NULL));
            OK(tg_module_state_at(li, j, name, sizeof name, &b, NULL));
            cr_assert(a != b, "layers.%d.%s is layers.0's tensor", i, name);
            if (same || tg_tensor_ndim(a) > 1)
                cr_assert(th_same_bits(a, b) == same, "layers.%d.%s", i, name);
        }
    }
}

/* A fresh stack holds num_layers copies with equal weights (torch's
 * _get_clones), the given norm as "norm", torch's keys. */
Test(transformer_stack, fresh_stacks_clone_the_layer)
{
    const th_tf_cfg k = {.layers = 3, .norm = 1, .dropout = 0.1};
    tg_module *e = th_transformer_make("enc", &k, 4, 6), *d = th_transformer_make("dec", &k, 4, 6);
    expect_layers(e, 3, true);
    expect_layers(d, 3, true);
    cr_assert(eq(str, (char *)tg_module_type_name(e), "TransformerEncoder"));
    cr_assert(eq(str, (char *)tg_module_type_name(d), "TransformerDecoder"));
    cr_assert(eq(str, (char *)tg_module_child_name_at(d, 1), "norm"));
    char want[4096] = "", part[64];
    char *keys = strdup(TDL_KEYS);
    for (int i = 0; i < 3; i++) {
        char *save = NULL, *cp = strdup(keys);
        for (char *t = strtok_r(cp, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            snprintf(part, sizeof part, "%slayers.%d.%s", want[0] ? "," : "", i, t);
            strcat(want, part);
        }
        free(cp);
    }
    strcat(want, ",norm.weight,norm.bias");
    th_expect_state_keys(d, want);
    free(keys);
    int64_t nl = 0;
    bool hn = false;
    OK(tg_nn_transformer_stack_params(e, &nl, &hn));
    cr_assert(nl == 3 && hn);
    const th_tf_cfg k0 = {.layers = 2, .norm = 0};
    tg_module *e0 = th_transformer_make("enc", &k0, 4, 6);
    OK(tg_nn_transformer_stack_params(e0, &nl, &hn));
    cr_assert(nl == 2 && !hn);
    cr_assert_null(tg_module_child(e0, "norm"));
    tg_module_release(e0);
    tg_module_release(e);
    tg_module_release(d);
}

/* Transformer: torch's children and keys, and _reset_parameters: every
 * matrix xavier_uniform_ (|w| <= sqrt(6 / (fan_in + fan_out)), its
 * variance that bound^2 / 3), so the layers no longer share values; the
 * biases keep their laws (in_proj_bias 0), the norms 1 and 0. */
Test(transformer_stack, transformer_init_is_xavier)
{
    const th_tf_cfg k = {.layers = 2, .dec_layers = 2, .dropout = 0.1};
    tg_module *m = th_transformer_make("tf", &k, 16, 32);
    cr_assert(eq(str, (char *)tg_module_child_name_at(m, 0), "encoder"));
    cr_assert(eq(str, (char *)tg_module_child_name_at(m, 1), "decoder"));
    cr_assert_not_null(tg_module_find(m, "encoder.norm.weight"));
    cr_assert_not_null(tg_module_find(m, "decoder.norm.bias"));
    cr_assert_not_null(tg_module_find(m, "decoder.layers.1.multihead_attn.in_proj_weight"));
    expect_layers(tg_module_child(m, "encoder"), 2, false);
    expect_layers(tg_module_child(m, "decoder"), 2, false);
    char **names = NULL;
    tg_tensor **ps = NULL;
    int n = 0, matrices = 0;
    OK(tg_module_named_parameters(m, &names, &ps, &n));
    cr_assert(eq(int, n, 2 * 12 + 2 + 2 * 18 + 2));
    for (int i = 0; i < n; i++) {
        const int64_t numel = tg_tensor_numel(ps[i]);
        double *v = th_doubles(ps[i]), mx = 0, s2 = 0;
        for (int64_t j = 0; j < numel; j++) {
            mx = fmax(mx, fabs(v[j]));
            s2 += v[j] * v[j];
        }
        if (tg_tensor_ndim(ps[i]) > 1) {
            const int64_t fo = tg_tensor_dim(ps[i], 0), fi = tg_tensor_dim(ps[i], 1);
            const double a = sqrt(6.0 / (double)(fi + fo)), var = s2 / (double)numel;
            cr_assert(mx <= a && mx > 0.9 * a, "%s: max %g, bound %g", names[i], mx, a);
            cr_assert(fabs(var / (a * a / 3) - 1) < 0.25, "%s: var %g, want %g", names[i], var,
                      a * a / 3);
            matrices++;
        } else if (strstr(names[i], "in_proj_bias")) {
            cr_assert(eq(dbl, mx, 0.0), "%s", names[i]);
        } else if (strstr(names[i], "norm")) {
            cr_assert(eq(dbl, v[0], strstr(names[i], "weight") ? 1.0 : 0.0), "%s", names[i]);
        }
        free(v);
    }
    cr_assert(eq(int, matrices, 2 * 4 + 2 * 6));
    free(names);
    free(ps);
    tg_module_release(m);
}

typedef struct tdl_user {
    tg_module *m;
    tg_tensor *mask;
} tdl_user;

static int tdl_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    const tdl_user *u = user;
    const tg_nn_transformer_masks mk = {.tgt_mask = u->mask};
    return tg_nn_transformer_decoder_layer_forward(u->m, out, in[0], in[1], &mk);
}

/* First and second derivatives in tgt, memory and the first parameters of a
 * tiny decoder layer, by finite differences in f64, post-norm and pre-norm
 * with a causal tgt_mask. */
Test(transformer_stack, decoder_layer_gradcheck_and_gradgradcheck)
{
    tg_tensor *mask = NULL;
    OK(tg_nn_transformer_square_subsequent_mask(&mask, 3, TG_F64));
    for (int c = 0; c < 2; c++) {
        const th_tf_cfg k = {.nf = c, .gelu = 1, .seed = 3};
        tg_rng rng;
        tg_rng_init(&rng, 3);
        tg_module *m = th_decoder_layer(&k, 4, 6, &rng);
        OK(tg_module_to_dtype(m, TG_F64));
        uint64_t s = 4;
        tg_tensor *in[8] = {th_rand_tensor(&s, TG_F64, 3, (int64_t[]){3, 2, 4}, -1, 1),
                            th_rand_tensor(&s, TG_F64, 3, (int64_t[]){2, 2, 4}, -1, 1)};
        OK(tg_tensor_set_requires_grad(in[0], true));
        OK(tg_tensor_set_requires_grad(in[1], true));
        tg_tensor **params = NULL;
        int np = 0;
        OK(tg_module_parameters(m, &params, &np));
        cr_assert(eq(int, np, 18));
        for (int i = 2; i < 8; i++) in[i] = tg_tensor_retain(params[i + 2]);  /* cross-attn */
        free(params);
        tdl_user u = {.m = m, .mask = mask};
        th_expect_gradchecks(tdl_fn, &u, 8, in, "case %d", c);
        th_release_all(8, in);
        tg_module_release(m);
    }
    tg_tensor_release(mask);
}

/* Children, the tg_module_forward(_n) forms (the forwards without masks),
 * dropout in training only (eval gives the dropout-free module's output). */
Test(transformer_stack, children_forward_forms_and_dropout)
{
    const th_tf_cfg k = {.dropout = 0.5, .seed = 7}, k0 = {.seed = 7};
    tg_rng rng;
    tg_rng_init(&rng, 7);
    tg_module *m = th_decoder_layer(&k, 4, 6, &rng);
    tg_rng_init(&rng, 7);
    tg_module *m0 = th_decoder_layer(&k0, 4, 6, &rng);
    th_expect_state_keys(m, TDL_KEYS);
    const char *kids[12] = {"self_attn", "multihead_attn", "linear1", "dropout", "linear2",
                            "norm1", "norm2", "norm3", "dropout1", "dropout2", "dropout3",
                            "activation"};
    cr_assert(eq(int, tg_module_child_count(m), 12));
    for (int i = 0; i < 12; i++)
        cr_assert(eq(str, (char *)tg_module_child_name_at(m, i), (char *)kids[i]));
    cr_assert(eq(str, (char *)tg_module_type_name(m), "TransformerDecoderLayer"));
    for (int i = 0; i < 4; i++) {
        static const char *const drops[4] = {"dropout", "dropout1", "dropout2", "dropout3"};
        double p = -1;
        OK(tg_nn_dropout_params(tg_module_child(m, drops[i]), NULL, &p));
        cr_assert(eq(dbl, p, 0.5), "%s: p=%g", drops[i], p);
    }
    uint64_t s = 2;
    tg_tensor *x = th_rand_tensor(&s, TG_F32, 3, (int64_t[]){3, 2, 4}, -1, 1);
    tg_tensor *mem = th_rand_tensor(&s, TG_F32, 3, (int64_t[]){5, 2, 4}, -1, 1);
    tg_tensor *yt = NULL, *ye = NULL, *y0 = NULL, *yn = NULL;
    OK(tg_module_forward_n(m, &yt, 2, (tg_tensor *[]){x, mem}));
    tg_module_train(m, false);
    OK(tg_module_forward_n(m, &ye, 2, (tg_tensor *[]){x, mem}));
    OK(tg_nn_transformer_decoder_layer_forward(m0, &y0, x, mem, NULL));
    th_expect_same_bits("eval", x, ye, y0);
    cr_assert(th_same_bits(yt, ye) == false, "training drops");
    th_expect_refused(tg_module_forward(m, &yn, x), TG_EINVAL, "takes 2 inputs", yn);
    th_release_all(3, (tg_tensor *[]){yt, ye, y0});
    /* the stacks and the Transformer: forward(_n) = the explicit forward */
    const th_tf_cfg ks = {.layers = 2, .dec_layers = 1, .norm = 1};
    static const char *const kinds[3] = {"enc", "dec", "tf"};
    for (int i = 0; i < 3; i++) {
        tg_module *st = th_transformer_make(kinds[i], &ks, 4, 6);
        const tg_nn_transformer_masks none = TG_NN_TRANSFORMER_MASKS_INIT;
        tg_tensor *a = i == 2 ? mem : x, *b = i == 2 ? x : mem;
        if (i == 0) OK(tg_module_forward(st, &yt, a));
        else OK(tg_module_forward_n(st, &yt, 2, (tg_tensor *[]){a, b}));
        OK(run(st, kinds[i], &ye, a, b, &none));
        th_expect_same_bits(kinds[i], a, yt, ye);
        th_expect_shape(yt, 3, (int64_t[]){i == 2 ? 3 : 3, 2, 4});
        th_release_all(2, (tg_tensor *[]){yt, ye});
        yt = ye = NULL;
        tg_module_release(st);
    }
    th_release_all(2, (tg_tensor *[]){x, mem});
    tg_module_release(m);
    tg_module_release(m0);
}

/* Layer i of the stack of kind ("enc", "dec"). */
static tg_module *layer_at(tg_module *st, int i)
{
    return tg_module_child_at(tg_module_child(st, "layers"), i);
}

/* The forward of layer (encoder or decoder) on x (and mem). */
static tg_tensor *layer_out(tg_module *layer, bool dec, tg_tensor *x, tg_tensor *mem)
{
    tg_tensor *y = NULL;
    if (dec) OK(tg_nn_transformer_decoder_layer_forward(layer, &y, x, mem, NULL));
    else OK(tg_nn_transformer_encoder_layer_forward(layer, &y, x, NULL, NULL));
    return y;
}

/* The layers of a stack hold equal weights but draw their own dropout
 * masks (layer i's seed is the layer's + i * 2^32, its attentions' seeds
 * follow), as torch's layers draw fresh masks; layer 0 draws the masks the
 * layer given draws; the same seed gives the same training output twice;
 * eval has no dropout, so the layers agree there. */
Test(transformer_stack, stack_layers_draw_their_own_dropout_masks)
{
    const th_tf_cfg k = {.layers = 3, .dropout = 0.5, .seed = 7};
    uint64_t s = 5;
    tg_tensor *x = th_rand_tensor(&s, TG_F32, 3, (int64_t[]){3, 2, 4}, -1, 1);
    tg_tensor *mem = th_rand_tensor(&s, TG_F32, 3, (int64_t[]){5, 2, 4}, -1, 1);
    for (int dec = 0; dec < 2; dec++) {
        const char *kind = dec ? "dec" : "enc";
        tg_module *st = th_transformer_make(kind, &k, 4, 6);
        tg_module *st2 = th_transformer_make(kind, &k, 4, 6);
        tg_module *st3 = th_transformer_make(kind, &k, 4, 6);
        tg_rng rng;
        tg_rng_init(&rng, 1);
        tg_module *one = dec ? th_decoder_layer(&k, 4, 6, &rng) : th_encoder_layer(&k, 4, 6, &rng);
        tg_tensor *y[3], *y0 = layer_out(one, dec, x, mem);
        for (int i = 0; i < 3; i++) {
            y[i] = layer_out(layer_at(st, i), dec, x, mem);
            uint64_t seed = 0;
            tg_nn_multihead_attention_opts ao;
            if (dec) {
                tg_nn_transformer_decoder_layer_opts o;
                OK(tg_nn_transformer_decoder_layer_params(layer_at(st, i), NULL, NULL, &o));
                seed = o.seed;
                OK(tg_nn_multihead_attention_params(
                    tg_module_child(layer_at(st, i), "multihead_attn"), NULL, NULL, &ao));
                cr_assert(eq(u64, ao.seed, seed + 1), "%s layer %d", kind, i);
            } else {
                tg_nn_transformer_encoder_layer_opts o;
                OK(tg_nn_transformer_encoder_layer_params(layer_at(st, i), NULL, NULL, &o));
                seed = o.seed;
            }
            cr_assert(eq(u64, seed, 7 + ((uint64_t)i << 32)), "%s layer %d", kind, i);
            OK(tg_nn_multihead_attention_params(tg_module_child(layer_at(st, i), "self_attn"),
                                                NULL, NULL, &ao));
            cr_assert(eq(u64, ao.seed, seed), "%s layer %d", kind, i);
        }
        th_expect_same_bits("layer 0 as the layer given", x, y[0], y0);
        for (int i = 1; i < 3; i++)
            cr_assert(th_same_bits(y[i], y[0]) == false, "%s: layer %d drew layer 0's masks",
                      kind, i);
        cr_assert(th_same_bits(y[1], y[2]) == false, "%s: layers 1 and 2 drew one mask", kind);
        /* every Dropout child too (each has drawn once in each layer) */
        static const char *const drops[4] = {"dropout", "dropout1", "dropout2", "dropout3"};
        for (int j = 0; j < 3 + dec; j++) {
            tg_tensor *d0 = NULL, *d1 = NULL;
            OK(tg_module_forward(tg_module_child(layer_at(st, 0), drops[j]), &d0, x));
            OK(tg_module_forward(tg_module_child(layer_at(st, 1), drops[j]), &d1, x));
            cr_assert(th_same_bits(d0, d1) == false, "%s: %s of layer 1", kind, drops[j]);
            th_release_all(2, (tg_tensor *[]){d0, d1});
        }
        tg_tensor *a = NULL, *b = NULL, *e0 = NULL, *e1 = NULL;
        const tg_nn_transformer_masks none = TG_NN_TRANSFORMER_MASKS_INIT;
        OK(run(st2, kind, &a, x, mem, &none));
        OK(run(st3, kind, &b, x, mem, &none));
        th_expect_same_bits("one seed, one training output", x, a, b);
        tg_module_train(st, false);
        e0 = layer_out(layer_at(st, 0), dec, x, mem);
        e1 = layer_out(layer_at(st, 1), dec, x, mem);
        th_expect_same_bits("eval: equal layers agree", x, e1, e0);
        th_release_all(8, (tg_tensor *[]){y[0], y[1], y[2], y0, a, b, e0, e1});
        tg_module_release(st);
        tg_module_release(st2);
        tg_module_release(st3);
        tg_module_release(one);
    }
    th_release_all(2, (tg_tensor *[]){x, mem});
}

Test(transformer_stack, square_subsequent_mask)
{
    tg_tensor *t = NULL, *e = NULL;
    OK(tg_nn_transformer_square_subsequent_mask(&t, 4, TG_F32));
    cr_assert(eq(int, (int)tg_tensor_dtype(t), (int)TG_F32));
    th_expect_shape(t, 2, (int64_t[]){4, 4});
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
            const double v = th_get(t, (int64_t[]){i, j});
            if (j > i) cr_assert(isinf(v) && v < 0, "(%d, %d) = %g", i, j, v);
            else cr_assert(v == 0.0 && !signbit(v), "(%d, %d) = %g", i, j, v);
        }
    OK(tg_nn_transformer_square_subsequent_mask(&e, 0, TG_F64));
    cr_assert(eq(i64, tg_tensor_numel(e), 0));
    tg_tensor *y = NULL;
    th_expect_refused(tg_nn_transformer_square_subsequent_mask(&y, -1, TG_F32), TG_EINVAL,
                      "sz=-1", y);
    th_expect_refused(tg_nn_transformer_square_subsequent_mask(&y, 2, TG_I64), TG_EDTYPE,
                      "must be a float dtype", y);
    th_expect_refused(tg_nn_transformer_square_subsequent_mask(NULL, 2, TG_F32), TG_EINVAL,
                      "out must not be NULL", NULL);
    th_release_all(2, (tg_tensor *[]){t, e});
}

Test(transformer_stack, params_give_what_it_was_made_with)
{
    const th_tf_cfg k = {.nf = 1, .gelu = 1, .dropout = 0.25, .seed = 9};
    tg_rng rng;
    tg_rng_init(&rng, 1);
    tg_module *m = th_decoder_layer(&k, 4, 6, &rng);
    int64_t d = 0, h = 0;
    tg_nn_transformer_decoder_layer_opts o = {0};
    OK(tg_nn_transformer_decoder_layer_params(m, &d, &h, &o));
    cr_assert(d == 4 && h == 2 && o.dim_feedforward == 6 && o.norm_first && !o.batch_first);
    cr_assert(eq(dbl, o.dropout, 0.25));
    cr_assert(eq(int, (int)o.activation, (int)TG_ACT_GELU));
    cr_assert(eq(u64, o.seed, 9));
    tg_nn_multihead_attention_opts ao;
    OK(tg_nn_multihead_attention_params(tg_module_child(m, "multihead_attn"), NULL, NULL, &ao));
    cr_assert(eq(u64, ao.seed, 10));
    const th_tf_cfg kt = {.layers = 2, .dec_layers = 3, .bf = 1, .seed = 5};
    tg_module *t = th_transformer_make("tf", &kt, 8, 12);
    tg_nn_transformer_opts to = {0};
    OK(tg_nn_transformer_params(t, &d, &h, &to));
    cr_assert(d == 8 && h == 2 && to.num_encoder_layers == 2 && to.num_decoder_layers == 3);
    cr_assert(to.batch_first && to.dim_feedforward == 12 && to.seed == 5);
    /* the layers' seeds: the encoder's from 5, the decoder's from 5 + 4,
     * layer i + i * 2^32 */
    tg_nn_transformer_encoder_layer_opts eo;
    OK(tg_nn_transformer_encoder_layer_params(layer_at(tg_module_child(t, "encoder"), 1), NULL,
                                              NULL, &eo));
    cr_assert(eq(u64, eo.seed, 5 + (UINT64_C(1) << 32)));
    tg_nn_transformer_decoder_layer_opts dlo;
    OK(tg_nn_transformer_decoder_layer_params(layer_at(tg_module_child(t, "decoder"), 0), NULL,
                                              NULL, &dlo));
    cr_assert(eq(u64, dlo.seed, 9));
    OK(tg_nn_transformer_decoder_layer_params(layer_at(tg_module_child(t, "decoder"), 2), NULL,
                                              NULL, &dlo));
    cr_assert(eq(u64, dlo.seed, 9 + (UINT64_C(2) << 32)));
    OK(tg_nn_transformer_params(t, NULL, NULL, NULL));
    th_expect_refused(tg_nn_transformer_params(m, &d, NULL, NULL), TG_EINVAL,
                      "m is a TransformerDecoderLayer module, not Transformer", NULL);
    th_expect_refused(tg_nn_transformer_decoder_layer_params(t, &d, NULL, NULL), TG_EINVAL,
                      "m is a Transformer module, not TransformerDecoderLayer", NULL);
    th_expect_refused(tg_nn_transformer_stack_params(m, NULL, NULL), TG_EINVAL,
                      "not TransformerEncoder or TransformerDecoder", NULL);
    th_expect_refused(tg_nn_transformer_decoder_layer_params(NULL, NULL, NULL, NULL), TG_EINVAL,
                      "m must not be NULL", NULL);
    tg_module_release(m);
    tg_module_release(t);
}

Test(transformer_stack, refusals_name_the_argument)
{
    tg_rng rng;
    tg_rng_init(&rng, 1);
    tg_module *m = NULL, *st = NULL;
    tg_nn_transformer_decoder_layer_opts o = TG_NN_TRANSFORMER_DECODER_LAYER_OPTS_INIT;
    th_expect_refused(tg_nn_transformer_decoder_layer_new(&m, 6, 4, NULL, &rng), TG_EINVAL,
                      "d_model=6 must be >= 1 and divisible by nhead=4", NULL);
    o.activation = TG_ACT_TANH;
    th_expect_refused(tg_nn_transformer_decoder_layer_new(&m, 4, 2, &o, &rng), TG_EINVAL,
                      "must be TG_ACT_RELU or TG_ACT_GELU", NULL);
    o = (tg_nn_transformer_decoder_layer_opts)TG_NN_TRANSFORMER_DECODER_LAYER_OPTS_INIT;
    o.dropout = 1.5;
    th_expect_refused(tg_nn_transformer_decoder_layer_new(&m, 4, 2, &o, &rng), TG_EINVAL,
                      "dropout=1.5 must be in [0, 1]", NULL);
    th_expect_refused(tg_nn_transformer_decoder_layer_new(&m, 4, 2, NULL, NULL), TG_EINVAL,
                      "out and rng must not be NULL", NULL);
    cr_assert_null(m);
    tg_nn_transformer_opts to = TG_NN_TRANSFORMER_OPTS_INIT;
    to.num_decoder_layers = 0;
    th_expect_refused(tg_nn_transformer_new(&m, 4, 2, &to, &rng), TG_EINVAL,
                      "num_decoder_layers=0 must be >= 1", NULL);
    th_expect_refused(tg_nn_transformer_new(&m, 5, 2, NULL, &rng), TG_EINVAL,
                      "d_model=5 must be >= 1 and divisible by nhead=2", NULL);
    cr_assert_null(m);
    OK(tg_nn_transformer_decoder_layer_new(&m, 4, 2, NULL, &rng));
    th_expect_refused(tg_nn_transformer_encoder_new(&st, m, 2, NULL), TG_EINVAL,
                      "encoder_layer is a TransformerDecoderLayer module, not "
                      "TransformerEncoderLayer", NULL);
    th_expect_refused(tg_nn_transformer_decoder_new(&st, m, 0, NULL), TG_EINVAL,
                      "num_layers=0 must be in [1, 100000]", NULL);
    th_expect_refused(tg_nn_transformer_decoder_new(&st, NULL, 1, NULL), TG_EINVAL,
                      "out and decoder_layer must not be NULL", NULL);
    cr_assert_null(st);
    /* a norm is retained: the caller keeps its reference */
    tg_module *norm = NULL;
    const int64_t d4 = 4;
    OK(tg_nn_layer_norm_new(&norm, 1, &d4, 1e-5, true));
    OK(tg_nn_transformer_decoder_new(&st, m, 1, norm));
    cr_assert(tg_module_child(st, "norm") == norm);
    tg_module_release(norm);

    uint64_t s = 1;
    tg_tensor *x = th_rand_tensor(&s, TG_F32, 3, (int64_t[]){3, 2, 4}, -1, 1);
    tg_tensor *mem = th_rand_tensor(&s, TG_F32, 3, (int64_t[]){5, 2, 4}, -1, 1);
    tg_tensor *x5 = th_rand_tensor(&s, TG_F32, 3, (int64_t[]){3, 2, 5}, -1, 1);
    tg_tensor *mem2 = th_rand_tensor(&s, TG_F32, 2, (int64_t[]){5, 4}, -1, 1);
    tg_tensor *memb = th_rand_tensor(&s, TG_F32, 3, (int64_t[]){5, 3, 4}, -1, 1);
    tg_tensor *bad = th_rand_tensor(&s, TG_F32, 2, (int64_t[]){3, 4}, -1, 1), *y = NULL;
    tg_nn_transformer_masks mk = TG_NN_TRANSFORMER_MASKS_INIT;
    th_expect_refused(tg_nn_transformer_decoder_layer_forward(m, &y, x5, mem, NULL), TG_ESHAPE,
                      "tgt is (3, 2, 5); it must be (T, N, d_model=4)", y);
    th_expect_refused(tg_nn_transformer_decoder_layer_forward(m, &y, x, mem2, NULL), TG_ESHAPE,
                      "memory is (5, 4); with tgt (3, 2, 4) it must be of rank 3", y);
    th_expect_refused(tg_nn_transformer_decoder_layer_forward(m, &y, x, memb, NULL), TG_ESHAPE,
                      "", y);
    mk.tgt_mask = bad;
    th_expect_refused(tg_nn_transformer_decoder_layer_forward(m, &y, x, mem, &mk), TG_ESHAPE,
                      "attn_mask is (3, 4); it must be (L, S) = (3, 3)", y);
    mk.tgt_mask = NULL;
    mk.memory_mask = bad;
    th_expect_refused(tg_nn_transformer_decoder_forward(st, &y, x, mem, &mk), TG_ESHAPE,
                      "attn_mask is (3, 4); it must be (L, S) = (3, 5)", y);
    mk.memory_mask = NULL;
    mk.src_mask = bad;
    th_expect_refused(tg_nn_transformer_decoder_forward(st, &y, x, mem, &mk), TG_EINVAL,
                      "masks->src_mask and masks->src_key_padding_mask must be NULL", y);
    th_expect_refused(tg_nn_transformer_decoder_layer_forward(m, &y, x, NULL, NULL), TG_EINVAL,
                      "m, out, tgt and memory must not be NULL", y);
    th_expect_refused(tg_nn_transformer_decoder_forward(m, &y, x, mem, NULL), TG_EINVAL,
                      "m is a TransformerDecoderLayer module, not TransformerDecoder", y);
    th_expect_refused(tg_nn_transformer_decoder_layer_forward(st, &y, x, mem, NULL), TG_EINVAL,
                      "not TransformerDecoderLayer", y);
    th_expect_refused(tg_module_forward_n(m, &y, 2, (tg_tensor *[]){x5, mem}), TG_ESHAPE,
                      "d_model=4", y);

    tg_module *t = NULL;
    OK(tg_nn_transformer_new(&t, 4, 2, NULL, &rng));
    th_expect_refused(tg_nn_transformer_forward(t, &y, mem, x5, NULL), TG_ESHAPE,
                      "tgt is (3, 2, 5)", y);
    th_expect_refused(tg_nn_transformer_forward(t, &y, memb, x, NULL), TG_ESHAPE,
                      "the batch sizes of src (3) and tgt (2) must be equal", y);
    th_expect_refused(tg_nn_transformer_forward(t, &y, mem2, x, NULL), TG_ESHAPE,
                      "src is (5, 4); with tgt (3, 2, 4) it must be of rank 3", y);
    th_expect_refused(tg_nn_transformer_forward(t, &y, NULL, x, NULL), TG_EINVAL,
                      "m, out, src and tgt must not be NULL", y);
    mk.src_mask = NULL;
    mk.src_key_padding_mask = bad;
    th_expect_refused(tg_nn_transformer_forward(t, &y, mem, x, &mk), TG_ESHAPE,
                      "key_padding_mask is (3, 4); it must be (N, S) (N=2, S=5)", y);
    tg_module *e = NULL, *el = NULL;
    OK(tg_nn_transformer_encoder_layer_new(&el, 4, 2, NULL, &rng));
    OK(tg_nn_transformer_encoder_new(&e, el, 2, NULL));
    th_expect_refused(tg_nn_transformer_encoder_forward(e, &y, x5, NULL, NULL), TG_ESHAPE,
                      "src is (3, 2, 5)", y);
    th_expect_refused(tg_nn_transformer_encoder_forward(e, &y, x, bad, NULL), TG_ESHAPE,
                      "attn_mask is (3, 4); it must be (L, S) = (3, 3)", y);
    th_expect_refused(tg_nn_transformer_encoder_forward(t, &y, x, NULL, NULL), TG_EINVAL,
                      "m is a Transformer module, not TransformerEncoder", y);
    th_expect_refused(tg_module_forward(e, &y, x5), TG_ESHAPE, "d_model=4", y);
    th_release_all(6, (tg_tensor *[]){x, mem, x5, mem2, memb, bad});
    tg_module_release(el);
    tg_module_release(e);
    tg_module_release(t);
    tg_module_release(m);
    tg_module_release(st);
}

/* A Transformer's state dict loads into one made from another seed and
 * gives the same output; its dropout draws in training only (eval gives the
 * output of the same weights without dropout). */
Test(transformer_stack, state_dict_round_trip_and_dropout)
{
    const th_tf_cfg k = {.layers = 2, .dec_layers = 2, .dropout = 0.5, .seed = 4};
    tg_module *m = th_transformer_make("tf", &k, 4, 6), *m0 = NULL;
    tg_rng rng;
    tg_rng_init(&rng, 99);
    OK(tg_nn_transformer_new(&m0, 4, 2, &(tg_nn_transformer_opts){2, 2, 6, 0.0, TG_ACT_RELU,
                                                                  1e-5, false, false, 0},
                             &rng));
    tg_st_file *f = NULL;
    OK(tg_st_new(&f));
    OK(tg_module_state_dict_save(m, f, NULL));
    OK(tg_module_load_state_dict(m0, f, NULL, true));
    uint64_t s = 3;
    tg_tensor *src = th_rand_tensor(&s, TG_F32, 3, (int64_t[]){5, 2, 4}, -1, 1);
    tg_tensor *tgt = th_rand_tensor(&s, TG_F32, 3, (int64_t[]){3, 2, 4}, -1, 1);
    tg_tensor *yt = NULL, *ye = NULL, *y0 = NULL;
    OK(tg_nn_transformer_forward(m, &yt, src, tgt, NULL));
    tg_module_train(m, false);
    OK(tg_nn_transformer_forward(m, &ye, src, tgt, NULL));
    OK(tg_nn_transformer_forward(m0, &y0, src, tgt, NULL));
    th_expect_same_bits("loaded", tgt, y0, ye);
    cr_assert(th_same_bits(yt, ye) == false, "training drops");
    th_release_all(5, (tg_tensor *[]){src, tgt, yt, ye, y0});
    tg_st_free(f);
    tg_module_release(m);
    tg_module_release(m0);
}
