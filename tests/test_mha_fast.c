/* tests/test_mha_fast.c - MultiheadAttention's fused attention for
 * inference (src/nn/multihead_attention_fast.c), self-attention and
 * attention over a memory (key = value, another tensor): its eval forwards
 * under no_grad against the step by step path's (TG_ATTENTION_FAST=0) over
 * batch_first, unbatched and strided queries and memories, 1 to 8 heads,
 * u8 and float masks (shared, per head, key padding), f32 (1e-6) and f64
 * (1e-12); when it is taken and when not (key and value two tensors,
 * weights, appended keys, dropout in training, gradients); and
 * TransformerEncoderLayer's eval forwards (pre- and post-norm, ReLU and
 * GELU, masks) through it. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "helpers.h"
#include "nn/mha_internal.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

/* Mask kinds: attn_mask u8 (L, S), float (L, S), float (N*H, L, S), causal;
 * key_padding_mask u8 or float (N, S); both. */
enum { K_NONE, K_U8, K_FLOAT, K_HEADS, K_CAUSAL, K_PAD_U8, K_PAD_FLOAT, K_BOTH, N_KINDS };

/* The masks of kind `kind` for n batches (0: unbatched), h heads, L
 * queries and S keys; a u8 attn_mask never masks key l mod S of query l. */
static void make_masks(tg_nn_mha_forward_opts *fo, int kind, tg_dtype dt, int64_t n, int64_t h,
                       int64_t L, int64_t S, uint64_t *seed)
{
    const int64_t nb = n ? n : 1;
    tg_tensor *am = NULL, *kpm = NULL;
    if (kind == K_U8 || kind == K_BOTH) {
        OK(tg_tensor_zeros(&am, TG_U8, 2, (int64_t[]){L, S}));
        for (int64_t i = 0; i < L * S; i++)
            if (i % S != i / S % S) OK(tg_tensor_set_flat(am, i, th_uniform_pm1(seed) > 0.3));
    } else if (kind == K_FLOAT) {
        am = th_rand_tensor(seed, dt, 2, (int64_t[]){L, S}, -2.0, 2.0);
    } else if (kind == K_HEADS) {
        am = th_rand_tensor(seed, dt, 3, (int64_t[]){nb * h, L, S}, -2.0, 2.0);
    } else if (kind == K_CAUSAL) {
        OK(tg_nn_transformer_square_subsequent_mask(&am, L, dt));
    }
    if (kind == K_PAD_U8 || kind == K_PAD_FLOAT || kind == K_BOTH) {
        const tg_dtype kd = kind == K_PAD_FLOAT ? dt : TG_U8;
        if (n)
            OK(tg_tensor_zeros(&kpm, kd, 2, (int64_t[]){n, S}));
        else
            OK(tg_tensor_zeros(&kpm, kd, 1, (int64_t[]){S}));
        for (int64_t b = 0; b < nb; b++)   /* the last b % 3 keys of batch b */
            for (int64_t s = S - b % 3 - (n ? 0 : 1); s < S; s++)
                OK(tg_tensor_set_flat(kpm, b * S + s, kd == TG_U8 ? 1.0 : -1.5));
    }
    fo->attn_mask = am;
    fo->key_padding_mask = kpm;
}

/* y = m(x, x, x, fo) under no_grad on the fused path (fast) or, with
 * TG_ATTENTION_FAST=0, step by step; *took: the fused self-attention ran. */
static tg_tensor *mha(bool fast, tg_module *m, tg_tensor *x, const tg_nn_mha_forward_opts *fo,
                      bool *took)
{
    if (!fast) setenv("TG_ATTENTION_FAST", "0", 1);
    const uint64_t before = tg__nn_mha_self_fast_calls();
    tg_tensor *y = NULL;
    tg_no_grad_begin();
    const int rc = tg_nn_multihead_attention_forward(m, &y, NULL, x, x, x, fo);
    tg_no_grad_end();
    unsetenv("TG_ATTENTION_FAST");
    OK(rc);
    *took = tg__nn_mha_self_fast_calls() == before + 1;
    return y;
}

/* A MultiheadAttention of E = 16 and h heads in eval, of dtype dt. */
static tg_module *make_mha(int64_t h, bool bf, tg_dtype dt, uint64_t seed)
{
    tg_rng rng;
    tg_rng_init(&rng, seed);
    tg_nn_multihead_attention_opts mo = TG_NN_MULTIHEAD_ATTENTION_OPTS_INIT;
    mo.dropout = 0.25;
    mo.batch_first = bf;
    tg_module *m = NULL;
    OK(tg_nn_multihead_attention_new(&m, 16, h, &mo, &rng));
    OK(tg_module_to_dtype(m, dt));
    /* nonzero biases, so that a bias in the wrong columns shows */
    OK(tg_init_uniform_(tg_module_find(m, "in_proj_bias"), -0.5, 0.5, &rng));
    OK(tg_init_uniform_(tg_module_find(m, "out_proj.bias"), -0.5, 0.5, &rng));
    tg_module_train(m, false);
    return m;
}

/* layout 0: (L, N, E); 1: batch_first (N, L, E); 2: unbatched (L, E);
 * 3: (L, N, E) as a transposed view of an (N, L, E) tensor. */
static void check_mha(int64_t h, int layout, int kind, tg_dtype dt, uint64_t seed)
{
    const bool bf = layout == 1;
    const int64_t n = layout == 2 ? 0 : 3, L = 11;
    tg_module *m = make_mha(h, bf, dt, 40 + seed);
    tg_tensor *x = NULL, *base = NULL;
    if (layout == 2) {
        x = th_rand_tensor(&seed, dt, 2, (int64_t[]){L, 16}, -1, 1);
    } else if (layout == 3) {
        base = th_rand_tensor(&seed, dt, 3, (int64_t[]){n, L, 16}, -1, 1);
        OK(tg_transpose(&x, base, 0, 1));
    } else {
        x = th_rand_tensor(&seed, dt, 3, bf ? (int64_t[]){n, L, 16} : (int64_t[]){L, n, 16},
                           -1, 1);
    }
    tg_nn_mha_forward_opts fo = TG_NN_MHA_FORWARD_OPTS_INIT;
    make_masks(&fo, kind, dt, n, h, L, L, &seed);
    bool took_fast, took_slow;
    tg_tensor *y = mha(true, m, x, &fo, &took_fast);
    tg_tensor *want = mha(false, m, x, &fo, &took_slow);
    char what[96];
    snprintf(what, sizeof what, "%s heads %lld layout %d mask %d", tg_dtype_name(dt),
             (long long)h, layout, kind);
    cr_assert(took_fast, "%s: the fused self-attention was not taken", what);
    cr_assert(took_slow == false, "%s: TG_ATTENTION_FAST=0 took it", what);
    th_expect_close(what, y, want, dt == TG_F64 ? 1e-12 : 1e-6);
    th_release_all(6, (tg_tensor *[]){x, base, fo.attn_mask, fo.key_padding_mask, y, want});
    tg_module_release(m);
}

Test(mha_fast, matches_step_by_step_over_heads_layouts_and_masks)
{
    uint64_t seed = 3;
    for (int64_t h = 1; h <= 8; h *= 2)
        for (int layout = 0; layout < 4; layout++)
            for (int kind = 0; kind < N_KINDS; kind++)
                check_mha(h, layout, kind, (h + layout + kind) % 3 == 0 ? TG_F64 : TG_F32,
                          seed++);
}

Test(mha_fast, matches_step_by_step_in_f64_and_f32_alike)
{
    for (int d = 0; d < 2; d++)
        for (int layout = 0; layout < 4; layout++)
            check_mha(4, layout, K_BOTH, d ? TG_F64 : TG_F32, 100 + (uint64_t)layout);
}

/* The step by step path where the fused one does not apply, with its
 * result: key and value two tensors, weights wanted, appended keys, dropout
 * in training, gradients recorded; key = value another tensor than the
 * query: the fused attention over a memory. */
Test(mha_fast, not_taken_outside_its_conditions)
{
    uint64_t seed = 77;
    tg_module *m = make_mha(4, true, TG_F32, 5);
    tg_tensor *x = th_rand_tensor(&seed, TG_F32, 3, (int64_t[]){2, 6, 16}, -1, 1);
    tg_tensor *xc = NULL, *y = NULL, *want = NULL;
    OK(tg_tensor_clone(&xc, x));
    bool took;
    want = mha(true, m, x, NULL, &took);
    cr_assert(took, "self-attention: taken");
    uint64_t before = tg__nn_mha_self_fast_calls();
    const uint64_t cross = tg__nn_mha_cross_fast_calls();
    tg_no_grad_begin();
    OK(tg_nn_multihead_attention_forward(m, &y, NULL, x, xc, xc, NULL));   /* cross */
    tg_tensor *yk = NULL, *yv = NULL;   /* one of key and value another tensor */
    OK(tg_nn_multihead_attention_forward(m, &yk, NULL, x, xc, x, NULL));
    OK(tg_nn_multihead_attention_forward(m, &yv, NULL, x, x, xc, NULL));
    tg_tensor *yw = NULL, *a = NULL;
    OK(tg_nn_multihead_attention_forward(m, &yw, &a, x, x, x, NULL));   /* weights */
    tg_no_grad_end();
    cr_assert(eq(u64, tg__nn_mha_self_fast_calls(), before), "cross-attention or weights");
    cr_assert(eq(u64, tg__nn_mha_cross_fast_calls(), cross + 1), "key = value: fused alone");
    th_expect_close("cross-attention", y, want, 1e-6);
    th_expect_close("key another tensor", yk, want, 1e-6);
    th_expect_close("value another tensor", yv, want, 1e-6);
    th_expect_close("with weights", yw, want, 1e-6);
    /* gradients recorded: the step by step path, whose result is the same */
    tg_tensor *yg = NULL;
    OK(tg_nn_multihead_attention_forward(m, &yg, NULL, x, x, x, NULL));
    cr_assert(eq(u64, tg__nn_mha_self_fast_calls(), before), "gradients recorded");
    cr_assert(tg_tensor_requires_grad(yg), "the output records a gradient");
    th_expect_close("with gradients", yg, want, 1e-6);
    /* training with dropout: it draws, so no fused path */
    tg_module_train(m, true);
    tg_tensor *yt = NULL;
    tg_no_grad_begin();
    OK(tg_nn_multihead_attention_forward(m, &yt, NULL, x, x, x, NULL));
    tg_no_grad_end();
    cr_assert(eq(u64, tg__nn_mha_self_fast_calls(), before), "dropout in training");
    th_release_all(10, (tg_tensor *[]){x, xc, y, want, yw, a, yg, yt, yk, yv});
    tg_module_release(m);
    /* add_bias_kv: appended keys, the step by step path */
    tg_rng rng;
    tg_rng_init(&rng, 8);
    tg_nn_multihead_attention_opts mo = TG_NN_MULTIHEAD_ATTENTION_OPTS_INIT;
    mo.add_bias_kv = true;
    OK(tg_nn_multihead_attention_new(&m, 16, 2, &mo, &rng));
    tg_module_train(m, false);
    x = th_rand_tensor(&seed, TG_F32, 3, (int64_t[]){6, 2, 16}, -1, 1);
    y = mha(true, m, x, NULL, &took);
    cr_assert(took == false, "add_bias_kv: not taken");
    th_release_all(2, (tg_tensor *[]){x, y});
    tg_module_release(m);
    /* kdim = vdim = 8, not E: separate projections, the step by step path */
    mo = (tg_nn_multihead_attention_opts)TG_NN_MULTIHEAD_ATTENTION_OPTS_INIT;
    mo.kdim = mo.vdim = 8;
    OK(tg_nn_multihead_attention_new(&m, 16, 2, &mo, &rng));
    tg_module_train(m, false);
    x = th_rand_tensor(&seed, TG_F32, 3, (int64_t[]){6, 2, 16}, -1, 1);
    tg_tensor *mem = th_rand_tensor(&seed, TG_F32, 3, (int64_t[]){4, 2, 8}, -1, 1);
    before = tg__nn_mha_cross_fast_calls();
    tg_no_grad_begin();
    OK(tg_nn_multihead_attention_forward(m, &y, NULL, x, mem, mem, NULL));
    tg_no_grad_end();
    cr_assert(eq(u64, tg__nn_mha_cross_fast_calls(), before), "kdim, vdim not E: not taken");
    th_release_all(3, (tg_tensor *[]){x, mem, y});
    tg_module_release(m);
}

/* A sequence of n = 3 batches (layout 2: unbatched) of len positions of
 * E = 16 in layout 0: (len, N, E); 1: batch_first; 2: (len, E); 3: (len,
 * N, E) as a transposed view of an (N, len, E) tensor (*base, else NULL). */
static tg_tensor *make_seq(int layout, int64_t len, tg_dtype dt, uint64_t *seed,
                           tg_tensor **base)
{
    tg_tensor *x = NULL;
    *base = NULL;
    if (layout == 2) return th_rand_tensor(seed, dt, 2, (int64_t[]){len, 16}, -1, 1);
    if (layout == 1) return th_rand_tensor(seed, dt, 3, (int64_t[]){3, len, 16}, -1, 1);
    if (layout == 0) return th_rand_tensor(seed, dt, 3, (int64_t[]){len, 3, 16}, -1, 1);
    *base = th_rand_tensor(seed, dt, 3, (int64_t[]){3, len, 16}, -1, 1);
    OK(tg_transpose(&x, *base, 0, 1));
    return x;
}

/* m(q, mem, mem, fo) of L = 9 queries over S = 6 keys, fused against step
 * by step (TG_ATTENTION_FAST=0). */
static void check_cross(int64_t h, int layout, int kind, tg_dtype dt, uint64_t seed)
{
    const int64_t L = 9, S = 6;
    tg_module *m = make_mha(h, layout == 1, dt, 60 + seed);
    tg_tensor *qb, *mb, *q = make_seq(layout, L, dt, &seed, &qb);
    tg_tensor *mem = make_seq(layout, S, dt, &seed, &mb), *y = NULL, *want = NULL;
    tg_nn_mha_forward_opts fo = TG_NN_MHA_FORWARD_OPTS_INIT;
    make_masks(&fo, kind == K_CAUSAL ? K_NONE : kind, dt, layout == 2 ? 0 : 3, h, L, S, &seed);
    const uint64_t self = tg__nn_mha_self_fast_calls(), cross = tg__nn_mha_cross_fast_calls();
    tg_no_grad_begin();
    OK(tg_nn_multihead_attention_forward(m, &y, NULL, q, mem, mem, &fo));
    char what[96];
    snprintf(what, sizeof what, "cross %s heads %lld layout %d mask %d", tg_dtype_name(dt),
             (long long)h, layout, kind);
    cr_assert(eq(u64, tg__nn_mha_cross_fast_calls(), cross + 1), "%s: not fused", what);
    cr_assert(eq(u64, tg__nn_mha_self_fast_calls(), self), "%s: self-attention", what);
    setenv("TG_ATTENTION_FAST", "0", 1);
    OK(tg_nn_multihead_attention_forward(m, &want, NULL, q, mem, mem, &fo));
    unsetenv("TG_ATTENTION_FAST");
    tg_no_grad_end();
    cr_assert(eq(u64, tg__nn_mha_cross_fast_calls(), cross + 1), "%s: fused when off", what);
    th_expect_close(what, y, want, dt == TG_F64 ? 1e-12 : 1e-6);
    th_release_all(8, (tg_tensor *[]){q, qb, mem, mb, fo.attn_mask, fo.key_padding_mask, y,
                                      want});
    tg_module_release(m);
}

Test(mha_fast, attention_over_a_memory_matches_step_by_step)
{
    uint64_t seed = 31;
    for (int64_t h = 1; h <= 8; h *= 2)
        for (int layout = 0; layout < 4; layout++)
            for (int kind = 0; kind < N_KINDS; kind++)
                for (int d = 0; d < 2; d++)
                    check_cross(h, layout, kind, d ? TG_F64 : TG_F32, seed++);
}

/* TransformerEncoderLayer in eval under no_grad: one fused self-attention
 * per forward, the step by step path's output, post- and pre-norm, ReLU and
 * GELU, with and without masks, both layouts. */
Test(mha_fast, transformer_encoder_layer_eval_forward)
{
    uint64_t seed = 23;
    for (int c = 0; c < 16; c++) {
        const bool pre = c & 1, gelu = c & 2, bf = c & 4, masks = c & 8;
        tg_rng rng;
        tg_rng_init(&rng, 9 + (uint64_t)c);
        tg_nn_transformer_encoder_layer_opts to = TG_NN_TRANSFORMER_ENCODER_LAYER_OPTS_INIT;
        to.dim_feedforward = 48;
        to.batch_first = bf;
        to.norm_first = pre;
        to.activation = gelu ? TG_ACT_GELU : TG_ACT_RELU;
        tg_module *m = NULL;
        OK(tg_nn_transformer_encoder_layer_new(&m, 32, 4, &to, &rng));
        tg_module_train(m, false);
        const int64_t n = 3, S = 10;
        tg_tensor *x = th_rand_tensor(&seed, TG_F32, 3,
                                      bf ? (int64_t[]){n, S, 32} : (int64_t[]){S, n, 32}, -1, 1);
        tg_nn_mha_forward_opts fo = TG_NN_MHA_FORWARD_OPTS_INIT;
        if (masks) make_masks(&fo, K_BOTH, TG_F32, n, 4, S, S, &seed);
        tg_tensor *y = NULL, *want = NULL;
        tg_no_grad_begin();
        const uint64_t before = tg__nn_mha_self_fast_calls();
        OK(tg_nn_transformer_encoder_layer_forward(m, &y, x, fo.attn_mask,
                                                   fo.key_padding_mask));
        cr_assert(eq(u64, tg__nn_mha_self_fast_calls(), before + 1), "case %d", c);
        setenv("TG_ATTENTION_FAST", "0", 1);
        OK(tg_nn_transformer_encoder_layer_forward(m, &want, x, fo.attn_mask,
                                                   fo.key_padding_mask));
        unsetenv("TG_ATTENTION_FAST");
        tg_no_grad_end();
        char what[48];
        snprintf(what, sizeof what, "encoder layer case %d", c);
        th_expect_close(what, y, want, 1e-6);
        th_release_all(5, (tg_tensor *[]){x, fo.attn_mask, fo.key_padding_mask, y, want});
        tg_module_release(m);
    }
}
