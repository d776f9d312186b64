/* tests/test_encoder_fast.c - TransformerEncoderLayer's fused inference
 * forward (src/nn/transformer_fast.c, on src/ops/rows_fused.c): in eval
 * under no_grad against the op by op path (TG_ENCODER_FAST=0) for
 * post-norm and norm_first, ReLU and GELU, batch_first both ways,
 * unbatched and strided sources, no masks, u8 and float src masks and key
 * padding masks, f32 (1e-5) and f64 (1e-12); a stack of layers with a
 * final norm; torch's outputs (the "tel" goldens of
 * scripts/make_attention_goldens.py) on the fused path; and the op by op
 * path, with the same numbers, outside its conditions (gradients recorded,
 * training, TG_ATTENTION_FAST=0, a reparametrized weight, autocast). */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "transformer_fixtures.h"
#include "nn/transformer_internal.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

/* An encoder layer of E = 32, 4 heads, dim_feedforward 48 in eval, of dtype
 * dt, with nonzero biases and norm affines (so that a term in the wrong
 * place shows). */
static tg_module *make_layer(bool pre, bool gelu, bool bf, tg_dtype dt, uint64_t seed,
                             double dropout)
{
    tg_rng rng;
    tg_rng_init(&rng, seed);
    tg_nn_transformer_encoder_layer_opts to = TG_NN_TRANSFORMER_ENCODER_LAYER_OPTS_INIT;
    to.dim_feedforward = 48;
    to.batch_first = bf;
    to.norm_first = pre;
    to.activation = gelu ? TG_ACT_GELU : TG_ACT_RELU;
    to.seed = seed;
    to.dropout = dropout;
    tg_module *m = NULL;
    OK(tg_nn_transformer_encoder_layer_new(&m, 32, 4, &to, &rng));
    OK(tg_module_to_dtype(m, dt));
    static const char *const names[6] = {"self_attn.in_proj_bias", "self_attn.out_proj.bias",
                                         "norm1.weight", "norm1.bias", "norm2.weight",
                                         "norm2.bias"};
    for (int i = 0; i < 6; i++)
        OK(tg_init_uniform_(tg_module_find(m, names[i]), i == 2 || i == 4 ? 0.5 : -0.5, 1.5,
                            &rng));
    tg_module_train(m, false);
    return m;
}

/* Mask kinds: none; a u8 src_mask (L, L) and a u8 key padding mask; a
 * float src_mask (N*H, L, L) and a float key padding mask; a causal mask. */
enum { M_NONE, M_U8, M_FLOAT, M_CAUSAL, N_MASKS };

static void make_masks(int kind, tg_dtype dt, int64_t n, int64_t L, uint64_t *seed,
                       tg_tensor **am, tg_tensor **kpm)
{
    *am = *kpm = NULL;
    const int64_t nb = n ? n : 1;
    if (kind == M_U8) {   /* the diagonal never masked */
        OK(tg_tensor_zeros(am, TG_U8, 2, (int64_t[]){L, L}));
        for (int64_t i = 0; i < L * L; i++)
            if (i % (L + 1) != 0) OK(tg_tensor_set_flat(*am, i, th_uniform_pm1(seed) > 0.3));
    } else if (kind == M_FLOAT) {
        *am = th_rand_tensor(seed, dt, 3, (int64_t[]){nb * 4, L, L}, -2.0, 2.0);
        if (!n) {   /* unbatched: (H, L, L) */
            tg_tensor *r = NULL;
            OK(tg_reshape(&r, *am, 3, (int64_t[]){4, L, L}));
            tg_tensor_release(*am);
            *am = r;
        }
    } else if (kind == M_CAUSAL) {
        OK(tg_nn_transformer_square_subsequent_mask(am, L, dt));
    }
    if (kind == M_U8 || kind == M_FLOAT) {
        const tg_dtype kd = kind == M_FLOAT ? dt : TG_U8;
        if (n)
            OK(tg_tensor_zeros(kpm, kd, 2, (int64_t[]){n, L}));
        else
            OK(tg_tensor_zeros(kpm, kd, 1, (int64_t[]){L}));
        for (int64_t b = 0; b < nb; b++)   /* the last b % 3 keys of batch b */
            for (int64_t s = L - b % 3 - (n ? 0 : 1); s < L; s++)
                OK(tg_tensor_set_flat(*kpm, b * L + s, kd == TG_U8 ? 1.0 : -1.5));
    }
}

/* y = layer m's forward under no_grad, fused (fast) or op by op
 * (TG_ENCODER_FAST=0); *took: the fused path ran. */
static tg_tensor *run(bool fast, tg_module *m, tg_tensor *x, tg_tensor *am, tg_tensor *kpm,
                      bool *took)
{
    if (!fast) setenv("TG_ENCODER_FAST", "0", 1);
    const uint64_t before = tg__transformer_encoder_fast_calls();
    tg_tensor *y = NULL;
    tg_no_grad_begin();
    const int rc = tg_nn_transformer_encoder_layer_forward(m, &y, x, am, kpm);
    tg_no_grad_end();
    unsetenv("TG_ENCODER_FAST");
    OK(rc);
    *took = tg__transformer_encoder_fast_calls() == before + 1;
    return y;
}

/* layout 0: (L, N, E); 1: batch_first (N, L, E); 2: unbatched (L, E);
 * 3: (L, N, E) as a transposed view of an (N, L, E) tensor. */
static void check_layer(int c, int layout, int kind, tg_dtype dt, uint64_t seed)
{
    const bool pre = c & 1, gelu = c & 2, bf = layout == 1;
    const int64_t n = layout == 2 ? 0 : 3, L = 10;
    tg_module *m = make_layer(pre, gelu, bf, dt, 50 + seed, 0.1);
    tg_tensor *x = NULL, *base = NULL, *am = NULL, *kpm = NULL;
    if (layout == 2) {
        x = th_rand_tensor(&seed, dt, 2, (int64_t[]){L, 32}, -2, 2);
    } else if (layout == 3) {
        base = th_rand_tensor(&seed, dt, 3, (int64_t[]){n, L, 32}, -2, 2);
        OK(tg_transpose(&x, base, 0, 1));
    } else {
        x = th_rand_tensor(&seed, dt, 3, bf ? (int64_t[]){n, L, 32} : (int64_t[]){L, n, 32},
                           -2, 2);
    }
    make_masks(kind, dt, n, L, &seed, &am, &kpm);
    bool took_fast, took_slow;
    tg_tensor *y = run(true, m, x, am, kpm, &took_fast);
    tg_tensor *want = run(false, m, x, am, kpm, &took_slow);
    char what[96];
    snprintf(what, sizeof what, "%s %s %s layout %d mask %d", tg_dtype_name(dt),
             pre ? "norm_first" : "post-norm", gelu ? "gelu" : "relu", layout, kind);
    cr_assert(took_fast, "%s: the fused path was not taken", what);
    cr_assert(took_slow == false, "%s: TG_ENCODER_FAST=0 took it", what);
    cr_assert(tg_tensor_requires_grad(y) == false, "%s: the output records nothing", what);
    th_expect_close(what, y, want, dt == TG_F64 ? 1e-12 : 1e-5);
    th_release_all(6, (tg_tensor *[]){x, base, am, kpm, y, want});
    tg_module_release(m);
}

Test(encoder_fast, matches_op_by_op_over_norms_activations_layouts_and_masks)
{
    uint64_t seed = 5;
    for (int c = 0; c < 4; c++)
        for (int layout = 0; layout < 4; layout++)
            for (int kind = 0; kind < N_MASKS; kind++)
                for (int d = 0; d < 2; d++)
                    check_layer(c, layout, kind, d ? TG_F64 : TG_F32, seed++);
}

/* A TransformerEncoder of three layers and a final LayerNorm: each layer
 * fused, the output the op by op path's. */
Test(encoder_fast, stack_with_final_norm)
{
    for (int c = 0; c < 4; c++) {
        const bool pre = c & 1;
        const tg_dtype dt = c & 2 ? TG_F64 : TG_F32;
        uint64_t seed = 90 + (uint64_t)c;
        tg_module *layer = make_layer(pre, !pre, c & 1, dt, seed, 0.1), *norm = NULL, *st = NULL;
        const int64_t e = 32;
        OK(tg_nn_layer_norm_new(&norm, 1, &e, 1e-5, true));
        OK(tg_module_to_dtype(norm, dt));
        OK(tg_nn_transformer_encoder_new(&st, layer, 3, norm));
        tg_module_train(st, false);
        tg_tensor *x = th_rand_tensor(&seed, dt, 3, (int64_t[]){4, 7, 32}, -2, 2), *am = NULL;
        OK(tg_nn_transformer_square_subsequent_mask(&am, c & 1 ? 7 : 4, dt));
        tg_tensor *y = NULL, *want = NULL;
        tg_no_grad_begin();
        const uint64_t before = tg__transformer_encoder_fast_calls();
        OK(tg_nn_transformer_encoder_forward(st, &y, x, am, NULL));
        cr_assert(eq(u64, tg__transformer_encoder_fast_calls(), before + 3), "case %d", c);
        setenv("TG_ENCODER_FAST", "0", 1);
        OK(tg_nn_transformer_encoder_forward(st, &want, x, am, NULL));
        unsetenv("TG_ENCODER_FAST");
        cr_assert(eq(u64, tg__transformer_encoder_fast_calls(), before + 3), "case %d", c);
        tg_no_grad_end();
        char what[32];
        snprintf(what, sizeof what, "stack case %d", c);
        th_expect_close(what, y, want, dt == TG_F64 ? 1e-12 : 1e-5);
        th_release_all(4, (tg_tensor *[]){x, am, y, want});
        tg_module_release(st);
        tg_module_release(norm);
        tg_module_release(layer);
    }
}

/* torch 1.13's outputs of the "tel" cases (attention.safetensors) on the
 * fused path: the layer in eval under no_grad (dropout 0 there, so eval
 * gives training's output). */
Test(encoder_fast, matches_torch_goldens)
{
    tg_st_file *f = th_golden_load("attention.safetensors");
    const int n = atoi(tg_st_meta_get(f, "tel_cases"));
    int cases = 0;
    for (int i = 0; i < n; i++) {
        char c[16], key[64];
        snprintf(c, sizeof c, "tel%d", i);
        bool f64;
        tg_module *m = th_golden_encoder_layer(f, c, &f64);
        tg_module_train(m, false);
        snprintf(key, sizeof key, "%s.mask", c);
        tg_tensor *mask = tg_st_get(f, key);
        snprintf(key, sizeof key, "%s.kpm", c);
        tg_tensor *kpm = tg_st_get(f, key);
        tg_tensor *y = NULL;
        const uint64_t before = tg__transformer_encoder_fast_calls();
        tg_no_grad_begin();
        OK(tg_nn_transformer_encoder_layer_forward(m, &y, (tg_tensor *)th_golden_get(f, c, "x"),
                                                   mask, kpm));
        tg_no_grad_end();
        cr_assert(eq(u64, tg__transformer_encoder_fast_calls(), before + 1), "%s fused", c);
        th_expect_close_scaled(c, y, th_golden_get(f, c, "y"), f64 ? 1e-10 : 5e-5);
        tg_tensor_release(y);
        tg_module_release(m);
        cases++;
    }
    cr_assert(cases >= 16, "%d cases", cases);
    tg_st_free(f);
}

/* Outside its conditions the op by op path runs, with the same numbers:
 * gradients recorded (the parameters require one), training (at p = 0),
 * TG_ATTENTION_FAST=0, a weight-normed linear1, autocast; and a bad mask
 * is refused as the op by op path refuses it. */
Test(encoder_fast, op_by_op_outside_its_conditions)
{
    uint64_t seed = 11;
    tg_module *m = make_layer(true, true, true, TG_F32, 7, 0.0);
    tg_tensor *x = th_rand_tensor(&seed, TG_F32, 3, (int64_t[]){2, 6, 32}, -2, 2);
    bool took;
    tg_tensor *want = run(true, m, x, NULL, NULL, &took);
    cr_assert(took, "eval under no_grad: fused");
    const uint64_t before = tg__transformer_encoder_fast_calls();
    tg_tensor *yg = NULL;   /* grad mode on, the parameters require grad */
    OK(tg_nn_transformer_encoder_layer_forward(m, &yg, x, NULL, NULL));
    cr_assert(tg_tensor_requires_grad(yg), "the output records a gradient");
    th_expect_close("with gradients", yg, want, 1e-5);
    tg_module_train(m, true);   /* training, though its dropout (p = 0) draws nothing */
    tg_tensor *yt = NULL;
    tg_no_grad_begin();
    OK(tg_nn_transformer_encoder_layer_forward(m, &yt, x, NULL, NULL));
    tg_no_grad_end();
    tg_module_train(m, false);
    th_expect_close("training at p = 0", yt, want, 1e-5);
    setenv("TG_ATTENTION_FAST", "0", 1);
    tg_tensor *ya = run(true, m, x, NULL, NULL, &took);
    unsetenv("TG_ATTENTION_FAST");
    cr_assert(took == false, "TG_ATTENTION_FAST=0: the attention is not fused, nor the layer");
    th_expect_close("TG_ATTENTION_FAST=0", ya, want, 1e-5);
    OK(tg_autocast_begin(TG_BF16));
    tg_tensor *yc = NULL;
    tg_no_grad_begin();
    OK(tg_nn_transformer_encoder_layer_forward(m, &yc, x, NULL, NULL));
    tg_no_grad_end();
    OK(tg_autocast_end());
    cr_assert(eq(u64, tg__transformer_encoder_fast_calls(), before), "grad, training, autocast");
    /* a bad key padding mask: the op by op path's error, TG_ESHAPE */
    tg_tensor *bad = NULL, *yb = NULL;
    OK(tg_tensor_zeros(&bad, TG_U8, 2, (int64_t[]){2, 5}));
    tg_no_grad_begin();
    cr_assert(eq(int, tg_nn_transformer_encoder_layer_forward(m, &yb, x, NULL, bad), TG_ESHAPE));
    setenv("TG_ENCODER_FAST", "0", 1);
    cr_assert(eq(int, tg_nn_transformer_encoder_layer_forward(m, &yb, x, NULL, bad), TG_ESHAPE));
    unsetenv("TG_ENCODER_FAST");
    tg_no_grad_end();
    /* linear1 weight-normed: its weight is computed by its forward */
    OK(tg_nn_weight_norm(tg_module_child(m, "linear1"), "weight", 0));
    tg_module_train(m, false);
    tg_tensor *yw = run(true, m, x, NULL, NULL, &took);
    cr_assert(took == false, "a computed weight: not fused");
    th_expect_close("weight norm", yw, want, 1e-5);
    th_release_all(8, (tg_tensor *[]){x, want, yg, yt, ya, yc, bad, yw});
    tg_module_release(m);
}
