/* tests/test_decoder_fast.c - TransformerDecoderLayer's fused inference
 * forward (src/nn/transformer_fast.c, with MultiheadAttention's fused
 * attention over the memory, src/nn/multihead_attention_fast.c): in eval
 * under no_grad against the op by op, step by step path
 * (TG_DECODER_FAST=0 and TG_ATTENTION_FAST=0) for post-norm and
 * norm_first, ReLU and GELU, batch_first both ways, unbatched and strided
 * inputs, a memory of another length, no masks, u8 and float tgt and
 * memory masks and key padding masks, a causal tgt_mask, f32 (1e-5) and
 * f64 (1e-12); a TransformerDecoder stack with a final norm; torch's
 * outputs (the decoder layer, decoder and Transformer cases of
 * scripts/make_transformer_goldens.py) on the fused path; and the op by op
 * path, with the same numbers, outside its conditions (gradients recorded,
 * training, TG_DECODER_FAST=0, TG_ATTENTION_FAST=0, a reparametrized
 * weight, autocast), bad masks refused alike. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "nn/mha_internal.h"
#include "nn/transformer_internal.h"
#include "tapegrad/tapegrad.h"
#include "transformer_fixtures.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

enum { E = 32, HEADS = 2, FF = 48, L = 10, S = 7 };

/* A decoder layer of E = 32, 2 heads, dim_feedforward 48 in eval, of dtype
 * dt, with nonzero biases and norm affines (so that a term in the wrong
 * place shows). */
static tg_module *make_layer(bool pre, bool gelu, bool bf, tg_dtype dt, uint64_t seed,
                             double dropout)
{
    tg_rng rng;
    tg_rng_init(&rng, seed);
    const th_tf_cfg c = {.bf = bf, .nf = pre, .gelu = gelu, .dropout = dropout, .seed = seed};
    tg_module *m = th_decoder_layer(&c, E, FF, &rng);
    OK(tg_module_to_dtype(m, dt));
    static const char *const names[10] = {
        "self_attn.in_proj_bias", "self_attn.out_proj.bias", "multihead_attn.in_proj_bias",
        "multihead_attn.out_proj.bias", "norm1.weight", "norm1.bias", "norm2.weight",
        "norm2.bias", "norm3.weight", "norm3.bias"};
    for (int i = 0; i < 10; i++) {
        const bool w = i >= 4 && i % 2 == 0;   /* a norm's weight */
        OK(tg_init_uniform_(tg_module_find(m, names[i]), w ? 0.5 : -0.5, 1.5, &rng));
    }
    tg_module_train(m, false);
    return m;
}

/* Mask kinds: none; u8 tgt_mask (L, L), memory_mask (L, S) and key padding
 * masks; float tgt_mask (N*H, L, L), memory_mask (L, S) and key padding
 * masks; a causal tgt_mask with a u8 memory key padding mask. */
enum { M_NONE, M_U8, M_FLOAT, M_CAUSAL, N_MASKS };

/* A key padding mask of n batches (0: unbatched) over len keys, of dtype kd:
 * the last b % 3 keys of batch b (one unbatched) set, key 0 never. */
static tg_tensor *make_kpm(tg_dtype kd, int64_t n, int64_t len)
{
    tg_tensor *kpm = NULL;
    if (n)
        OK(tg_tensor_zeros(&kpm, kd, 2, (int64_t[]){n, len}));
    else
        OK(tg_tensor_zeros(&kpm, kd, 1, (int64_t[]){len}));
    for (int64_t b = 0; b < (n ? n : 1); b++)
        for (int64_t s = len - b % 3 - (n ? 0 : 1); s < len; s++)
            OK(tg_tensor_set_flat(kpm, b * len + s, kd == TG_U8 ? 1.0 : -1.5));
    return kpm;
}

/* A u8 (rows, cols) mask, column 0 never set. */
static tg_tensor *make_u8_mask(int64_t rows, int64_t cols, uint64_t *seed)
{
    tg_tensor *m = NULL;
    OK(tg_tensor_zeros(&m, TG_U8, 2, (int64_t[]){rows, cols}));
    for (int64_t i = 0; i < rows * cols; i++)
        if (i % cols != 0) OK(tg_tensor_set_flat(m, i, th_uniform_pm1(seed) > 0.3));
    return m;
}

static void make_masks(int kind, tg_dtype dt, int64_t n, uint64_t *seed,
                       tg_nn_transformer_masks *mk)
{
    *mk = (tg_nn_transformer_masks)TG_NN_TRANSFORMER_MASKS_INIT;
    const int64_t nb = n ? n : 1;
    if (kind == M_U8) {
        mk->tgt_mask = make_u8_mask(L, L, seed);
        mk->memory_mask = make_u8_mask(L, S, seed);
    } else if (kind == M_FLOAT) {
        mk->tgt_mask = th_rand_tensor(seed, dt, 3, (int64_t[]){nb * HEADS, L, L}, -2.0, 2.0);
        mk->memory_mask = th_rand_tensor(seed, dt, 2, (int64_t[]){L, S}, -2.0, 2.0);
    } else if (kind == M_CAUSAL) {
        OK(tg_nn_transformer_square_subsequent_mask(&mk->tgt_mask, L, dt));
    }
    if (kind == M_U8 || kind == M_FLOAT) {
        const tg_dtype kd = kind == M_FLOAT ? dt : TG_U8;
        mk->tgt_key_padding_mask = make_kpm(kd, n, L);
        mk->memory_key_padding_mask = make_kpm(kd, n, S);
    } else if (kind == M_CAUSAL) {
        mk->memory_key_padding_mask = make_kpm(TG_U8, n, S);
    }
}

static void release_masks(tg_nn_transformer_masks *mk)
{
    th_release_all(4, (tg_tensor *[]){mk->tgt_mask, mk->memory_mask, mk->tgt_key_padding_mask,
                                      mk->memory_key_padding_mask});
}

/* y = layer m's forward of x over mem under no_grad, fused (fast) or op by
 * op and step by step (TG_DECODER_FAST=0, TG_ATTENTION_FAST=0); *took: the
 * fused path ran, its attention over the memory fused. */
static tg_tensor *run(bool fast, tg_module *m, tg_tensor *x, tg_tensor *mem,
                      const tg_nn_transformer_masks *mk, bool *took)
{
    if (!fast) {
        setenv("TG_DECODER_FAST", "0", 1);
        setenv("TG_ATTENTION_FAST", "0", 1);
    }
    const uint64_t before = tg__transformer_decoder_fast_calls();
    const uint64_t cross = tg__nn_mha_cross_fast_calls();
    tg_tensor *y = NULL;
    tg_no_grad_begin();
    const int rc = tg_nn_transformer_decoder_layer_forward(m, &y, x, mem, mk);
    tg_no_grad_end();
    unsetenv("TG_DECODER_FAST");
    unsetenv("TG_ATTENTION_FAST");
    OK(rc);
    *took = tg__transformer_decoder_fast_calls() == before + 1 &&
            tg__nn_mha_cross_fast_calls() == cross + 1;
    return y;
}

/* A sequence of len positions in layout 0: (len, N, E); 1: batch_first
 * (N, len, E); 2: unbatched (len, E); 3: (len, N, E) as a transposed view
 * of an (N, len, E) tensor (*base, else NULL). */
static tg_tensor *make_seq(int layout, int64_t len, tg_dtype dt, uint64_t *seed,
                           tg_tensor **base)
{
    const int64_t n = 3;
    tg_tensor *x = NULL;
    *base = NULL;
    if (layout == 2) return th_rand_tensor(seed, dt, 2, (int64_t[]){len, E}, -2, 2);
    if (layout == 1) return th_rand_tensor(seed, dt, 3, (int64_t[]){n, len, E}, -2, 2);
    if (layout == 0) return th_rand_tensor(seed, dt, 3, (int64_t[]){len, n, E}, -2, 2);
    *base = th_rand_tensor(seed, dt, 3, (int64_t[]){n, len, E}, -2, 2);
    OK(tg_transpose(&x, *base, 0, 1));
    return x;
}

static void check_layer(int c, int layout, int kind, tg_dtype dt, uint64_t seed)
{
    const bool pre = c & 1, gelu = c & 2, bf = layout == 1;
    tg_module *m = make_layer(pre, gelu, bf, dt, 50 + seed, 0.1);
    tg_tensor *xb, *mb;
    tg_tensor *x = make_seq(layout, L, dt, &seed, &xb), *mem = make_seq(layout, S, dt, &seed, &mb);
    tg_nn_transformer_masks mk;
    make_masks(kind, dt, layout == 2 ? 0 : 3, &seed, &mk);
    bool took_fast, took_slow;
    tg_tensor *y = run(true, m, x, mem, &mk, &took_fast);
    tg_tensor *want = run(false, m, x, mem, &mk, &took_slow);
    char what[96];
    snprintf(what, sizeof what, "%s %s %s layout %d mask %d", tg_dtype_name(dt),
             pre ? "norm_first" : "post-norm", gelu ? "gelu" : "relu", layout, kind);
    cr_assert(took_fast, "%s: the fused path was not taken", what);
    cr_assert(took_slow == false, "%s: TG_DECODER_FAST=0 took it", what);
    cr_assert(tg_tensor_requires_grad(y) == false, "%s: the output records nothing", what);
    th_expect_close(what, y, want, dt == TG_F64 ? 1e-12 : 1e-5);
    th_release_all(6, (tg_tensor *[]){x, xb, mem, mb, y, want});
    release_masks(&mk);
    tg_module_release(m);
}

Test(decoder_fast, matches_op_by_op_over_norms_activations_layouts_and_masks)
{
    uint64_t seed = 5;
    for (int c = 0; c < 4; c++)
        for (int layout = 0; layout < 4; layout++)
            for (int kind = 0; kind < N_MASKS; kind++)
                for (int d = 0; d < 2; d++)
                    check_layer(c, layout, kind, d ? TG_F64 : TG_F32, seed++);
}

/* A TransformerDecoder of three layers and a final LayerNorm: each layer
 * fused, the output the op by op, step by step path's. */
Test(decoder_fast, stack_with_final_norm)
{
    for (int c = 0; c < 4; c++) {
        const bool pre = c & 1;
        const tg_dtype dt = c & 2 ? TG_F64 : TG_F32;
        uint64_t seed = 90 + (uint64_t)c;
        tg_module *layer = make_layer(pre, !pre, pre, dt, seed, 0.1), *norm = NULL, *st = NULL;
        const int64_t e = E;
        OK(tg_nn_layer_norm_new(&norm, 1, &e, 1e-5, true));
        OK(tg_module_to_dtype(norm, dt));
        OK(tg_nn_transformer_decoder_new(&st, layer, 3, norm));
        tg_module_train(st, false);
        tg_tensor *xb, *mb, *x = make_seq(pre, L, dt, &seed, &xb);
        tg_tensor *mem = make_seq(pre, S, dt, &seed, &mb);
        tg_nn_transformer_masks mk;
        make_masks(M_CAUSAL, dt, 3, &seed, &mk);
        tg_tensor *y = NULL, *want = NULL;
        tg_no_grad_begin();
        const uint64_t before = tg__transformer_decoder_fast_calls();
        OK(tg_nn_transformer_decoder_forward(st, &y, x, mem, &mk));
        cr_assert(eq(u64, tg__transformer_decoder_fast_calls(), before + 3), "case %d", c);
        setenv("TG_DECODER_FAST", "0", 1);
        setenv("TG_ATTENTION_FAST", "0", 1);
        OK(tg_nn_transformer_decoder_forward(st, &want, x, mem, &mk));
        unsetenv("TG_DECODER_FAST");
        unsetenv("TG_ATTENTION_FAST");
        cr_assert(eq(u64, tg__transformer_decoder_fast_calls(), before + 3), "case %d", c);
        tg_no_grad_end();
        char what[32];
        snprintf(what, sizeof what, "stack case %d", c);
        th_expect_close(what, y, want, dt == TG_F64 ? 1e-12 : 1e-5);
        th_release_all(6, (tg_tensor *[]){x, xb, mem, mb, y, want});
        release_masks(&mk);
        tg_module_release(st);
        tg_module_release(norm);
        tg_module_release(layer);
    }
}

/* The layers of kind's module: (encoder layers, decoder layers). */
static void layers_of(const tg_st_file *f, const char *c, int64_t *enc, int64_t *dec)
{
    int v[7] = {0};
    cr_assert(eq(int, sscanf(th_golden_meta(f, c, "cfg"), "%d %d %d %d %d %d %d", &v[0], &v[1],
                             &v[2], &v[3], &v[4], &v[5], &v[6]), 7));
    const char *kind = th_golden_meta(f, c, "kind");
    *enc = !strcmp(kind, "enc") ? v[5] : !strcmp(kind, "tf") ? v[5] : 0;
    *dec = !strcmp(kind, "tdl") ? 1 : !strcmp(kind, "dec") ? v[5] : !strcmp(kind, "tf") ? v[6] : 0;
}

/* torch 1.13's outputs of the decoder layer, decoder and Transformer cases
 * of transformer.safetensors on the fused paths: each in eval under
 * no_grad (dropout never draws in eval), every layer fused. */
Test(decoder_fast, matches_torch_goldens)
{
    tg_st_file *f = th_golden_load("transformer.safetensors");
    const int n = atoi(tg_st_meta_get(f, "cases"));
    int cases = 0;
    for (int i = 0; i < n; i++) {
        char c[16];
        snprintf(c, sizeof c, "case%d", i);
        const char *kind = th_golden_meta(f, c, "kind");
        if (!strcmp(kind, "enc")) continue;
        int64_t enc, dec;
        layers_of(f, c, &enc, &dec);
        bool f64;
        tg_module *m = th_golden_transformer(f, c, &f64);
        const tg_nn_transformer_masks mk = {
            NULL, th_golden_opt(f, c, "tgt_mask"), th_golden_opt(f, c, "memory_mask"),
            NULL, th_golden_opt(f, c, "tgt_kpm"), th_golden_opt(f, c, "mem_kpm")};
        tg_nn_transformer_masks mt = mk;   /* Transformer's: src's too */
        mt.src_mask = th_golden_opt(f, c, "src_mask");
        mt.src_key_padding_mask = th_golden_opt(f, c, "src_kpm");
        tg_tensor *a = (tg_tensor *)th_golden_get(f, c, "a");
        tg_tensor *b = (tg_tensor *)th_golden_get(f, c, "b"), *y = NULL;
        const uint64_t e0 = tg__transformer_encoder_fast_calls();
        const uint64_t d0 = tg__transformer_decoder_fast_calls();
        tg_no_grad_begin();
        if (!strcmp(kind, "tdl"))
            OK(tg_nn_transformer_decoder_layer_forward(m, &y, a, b, &mk));
        else if (!strcmp(kind, "dec"))
            OK(tg_nn_transformer_decoder_forward(m, &y, a, b, &mk));
        else
            OK(tg_nn_transformer_forward(m, &y, a, b, &mt));
        tg_no_grad_end();
        cr_assert(eq(u64, tg__transformer_decoder_fast_calls(), d0 + (uint64_t)dec), "%s", c);
        cr_assert(eq(u64, tg__transformer_encoder_fast_calls(), e0 + (uint64_t)enc), "%s", c);
        th_expect_close_scaled(c, y, th_golden_get(f, c, "y"), f64 ? 1e-10 : 5e-5);
        tg_tensor_release(y);
        tg_module_release(m);
        cases++;
    }
    cr_assert(cases >= 28, "%d cases", cases);
    tg_st_free(f);
}

/* Layer m's forward of x over mem with masks mk refused with rc, fused
 * (under no_grad) and op by op (TG_DECODER_FAST=0) alike. */
static void expect_refused(tg_module *m, tg_tensor *x, tg_tensor *mem,
                           const tg_nn_transformer_masks *mk, int rc, const char *what)
{
    tg_tensor *y = NULL;
    tg_no_grad_begin();
    cr_assert(eq(int, tg_nn_transformer_decoder_layer_forward(m, &y, x, mem, mk), rc), "%s",
              what);
    setenv("TG_DECODER_FAST", "0", 1);
    cr_assert(eq(int, tg_nn_transformer_decoder_layer_forward(m, &y, x, mem, mk), rc),
              "%s op by op", what);
    unsetenv("TG_DECODER_FAST");
    tg_no_grad_end();
    cr_assert_null(y, "%s: no output", what);
}

/* A memory key padding mask and a memory_mask of the tgt's length instead
 * of the memory's, a tgt_mask of the memory's, and a memory of another
 * dtype: refused, TG_ESHAPE and TG_EDTYPE. */
static void bad_inputs_refused_alike(tg_module *m, tg_tensor *x, tg_tensor *mem)
{
    tg_nn_transformer_masks mk = TG_NN_TRANSFORMER_MASKS_INIT;
    const int64_t n = tg_tensor_shape(x)[0], lt = tg_tensor_shape(x)[1];
    const int64_t ls = tg_tensor_shape(mem)[1];
    tg_tensor *kpm = NULL, *mm = NULL, *tm = NULL, *m64 = NULL;
    OK(tg_tensor_zeros(&kpm, TG_U8, 2, (int64_t[]){n, lt}));
    OK(tg_tensor_zeros(&mm, TG_U8, 2, (int64_t[]){lt, lt}));
    OK(tg_tensor_zeros(&tm, TG_U8, 2, (int64_t[]){lt, ls}));
    OK(tg_tensor_to_dtype(&m64, mem, TG_F64));
    mk.memory_key_padding_mask = kpm;
    expect_refused(m, x, mem, &mk, TG_ESHAPE, "memory key padding mask");
    mk.memory_key_padding_mask = NULL;
    mk.memory_mask = mm;
    expect_refused(m, x, mem, &mk, TG_ESHAPE, "memory_mask");
    mk.memory_mask = NULL;
    mk.tgt_mask = tm;
    expect_refused(m, x, mem, &mk, TG_ESHAPE, "tgt_mask");
    expect_refused(m, x, m64, NULL, TG_EDTYPE, "an f64 memory");
    th_release_all(4, (tg_tensor *[]){kpm, mm, tm, m64});
}

/* Outside its conditions the op by op path runs, with the same numbers:
 * gradients recorded (the parameters require one, or only the memory
 * does), training (at p = 0), TG_DECODER_FAST=0, TG_ATTENTION_FAST=0, a
 * weight-normed linear2, autocast; and bad masks and a memory of another
 * dtype are refused as the op by op path refuses them. */
Test(decoder_fast, op_by_op_outside_its_conditions)
{
    uint64_t seed = 11;
    tg_module *m = make_layer(true, true, true, TG_F32, 7, 0.0);
    tg_tensor *x = th_rand_tensor(&seed, TG_F32, 3, (int64_t[]){2, 6, E}, -2, 2);
    tg_tensor *mem = th_rand_tensor(&seed, TG_F32, 3, (int64_t[]){2, 5, E}, -2, 2);
    const tg_nn_transformer_masks none = TG_NN_TRANSFORMER_MASKS_INIT;
    bool took;
    tg_tensor *want = run(true, m, x, mem, &none, &took);
    cr_assert(took, "eval under no_grad: fused");
    const uint64_t before = tg__transformer_decoder_fast_calls();
    tg_tensor *yg = NULL;   /* grad mode on, the parameters require grad */
    OK(tg_nn_transformer_decoder_layer_forward(m, &yg, x, mem, NULL));
    cr_assert(tg_tensor_requires_grad(yg), "the output records a gradient");
    th_expect_close("with gradients", yg, want, 1e-5);
    tg_module_train(m, true);   /* training, though its dropouts (p = 0) draw nothing */
    tg_tensor *yt = NULL;
    tg_no_grad_begin();
    OK(tg_nn_transformer_decoder_layer_forward(m, &yt, x, mem, NULL));
    tg_no_grad_end();
    tg_module_train(m, false);
    th_expect_close("training at p = 0", yt, want, 1e-5);
    setenv("TG_ATTENTION_FAST", "0", 1);
    tg_no_grad_begin();
    tg_tensor *ya = NULL;
    OK(tg_nn_transformer_decoder_layer_forward(m, &ya, x, mem, NULL));
    tg_no_grad_end();
    unsetenv("TG_ATTENTION_FAST");
    th_expect_close("TG_ATTENTION_FAST=0", ya, want, 1e-5);
    OK(tg_autocast_begin(TG_BF16));
    tg_tensor *yc = NULL;
    tg_no_grad_begin();
    OK(tg_nn_transformer_decoder_layer_forward(m, &yc, x, mem, NULL));
    tg_no_grad_end();
    OK(tg_autocast_end());
    cr_assert(eq(u64, tg__transformer_decoder_fast_calls(), before),
              "grad, training, TG_ATTENTION_FAST=0, autocast");
    /* TG_DECODER_FAST=0: the modules, multihead_attn's attention fused alone */
    setenv("TG_DECODER_FAST", "0", 1);
    const uint64_t cross = tg__nn_mha_cross_fast_calls();
    tg_tensor *yd = run(true, m, x, mem, &none, &took);
    unsetenv("TG_DECODER_FAST");
    cr_assert(eq(u64, tg__transformer_decoder_fast_calls(), before), "TG_DECODER_FAST=0");
    cr_assert(eq(u64, tg__nn_mha_cross_fast_calls(), cross + 1), "the module's fused attention");
    th_expect_close("TG_DECODER_FAST=0", yd, want, 1e-5);
    bad_inputs_refused_alike(m, x, mem);
    tg_tensor *ym = NULL;   /* only the memory records a gradient */
    tg_tensor **ps = NULL;
    int np = 0;
    OK(tg_module_parameters(m, &ps, &np));
    for (int i = 0; i < np; i++) OK(tg_tensor_set_requires_grad(ps[i], false));
    free(ps);
    tg_tensor *mg = th_leaf_clone(mem);
    OK(tg_nn_transformer_decoder_layer_forward(m, &ym, x, mg, NULL));
    cr_assert(eq(u64, tg__transformer_decoder_fast_calls(), before), "memory requires grad");
    cr_assert(tg_tensor_requires_grad(ym), "the output records the memory's gradient");
    th_expect_close("memory requires grad", ym, want, 1e-5);
    /* linear2 weight-normed: its weight is computed by its forward */
    OK(tg_nn_weight_norm(tg_module_child(m, "linear2"), "weight", 0));
    tg_module_train(m, false);
    tg_tensor *yw = run(true, m, x, mem, &none, &took);
    cr_assert(took == false, "a computed weight: not fused");
    th_expect_close("weight norm", yw, want, 1e-5);
    th_release_all(11, (tg_tensor *[]){x, mem, want, yg, yt, ya, yc, yd, ym, mg, yw});
    tg_module_release(m);
}
