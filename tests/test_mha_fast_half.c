/* tests/test_mha_fast_half.c - MultiheadAttention's fused attention
 * (src/nn/multihead_attention_fast.c, src/ops/attention_fast.c) in bf16 and
 * f16: self- and cross-attention against the taped forward (each bf16
 * kernel this CPU runs, f16, inside autocast), TransformerEncoderLayer and
 * TransformerDecoderLayer in eval, and torch 1.13's bf16
 * nn.MultiheadAttention (tests/golden/attention_half.safetensors). */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdio.h>
#include <stdlib.h>

#include "attention_fixtures.h"
#include "bf16_gemm_fixtures.h"
#include "helpers.h"
#include "nn/mha_internal.h"
#include "ops/attention_internal.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())


/* MultiheadAttention (E 64, 4 heads) in eval under no_grad, self- (query =
 * key = value) and cross-attention (a memory of another length), batch
 * first or not, a float mask of dtype mdt (self: causal; with rand_mask
 * (L, S) of values in [-2, 2]) and a u8 key padding mask, its parameters
 * and inputs of dtype in, computing in dtype dt (in's, or inside autocast
 * of dt, f32 inputs projected to it): the module's fused forward (one
 * fused attention call), the output the taped path's within 8u (|y| + max
 * |y|), u the dtype's unit roundoff (the attention's bound of docs/autograd.md
 * carried through out_proj's dot products of 64 terms, whose weights are
 * below 1/8), most elements bit for bit. */
static void mha_case_as(tg_dtype dt, tg_dtype in, tg_dtype mdt, bool rand_mask, bool self,
                        bool bf, uint64_t seed)
{
    tg_rng rng;
    tg_rng_init(&rng, seed);
    tg_nn_multihead_attention_opts mo = TG_NN_MULTIHEAD_ATTENTION_OPTS_INIT;
    mo.batch_first = bf;
    tg_module *m = NULL;
    const int64_t E = 64, n = 3, L = 40, S = self ? L : 29;
    OK(tg_nn_multihead_attention_new(&m, E, 4, &mo, &rng));
    OK(tg_module_to_dtype(m, in));
    tg_module_train(m, false);
    const int64_t qs[3] = {bf ? n : L, bf ? L : n, E}, ks[3] = {bf ? n : S, bf ? S : n, E};
    tg_tensor *q = th_rand_tensor(&seed, in, 3, qs, -1, 1);
    tg_tensor *kv = self ? tg_tensor_retain(q) : th_rand_tensor(&seed, in, 3, ks, -1, 1);
    tg_tensor *causal = NULL, *y = NULL, *want = NULL;
    OK(tg_nn_transformer_square_subsequent_mask(&causal, L, mdt));
    tg_nn_mha_forward_opts fo = TG_NN_MHA_FORWARD_OPTS_INIT;
    fo.key_padding_mask = make_mask(M_PAD_U8, in, 2, (int64_t[]){n, S}, &seed);
    tg_tensor *am = rand_mask ? make_mask(M_FLOAT, mdt, 2, (int64_t[]){L, S}, &seed) : NULL;
    if (rand_mask)
        fo.attn_mask = am;
    else if (self)
        fo.attn_mask = causal;
    tg_no_grad_begin();
    const uint64_t before = tg__attention_fast_calls();
    const uint64_t mha_before = self ? tg__nn_mha_self_fast_calls() : tg__nn_mha_cross_fast_calls();
    OK(tg_nn_multihead_attention_forward(m, &y, NULL, q, kv, kv, &fo));
    cr_assert(eq(u64, tg__attention_fast_calls(), before + 1), "%s self %d: not fused",
              tg_dtype_name(dt), self);
    cr_assert(eq(u64, self ? tg__nn_mha_self_fast_calls() : tg__nn_mha_cross_fast_calls(),
                 mha_before + 1), "%s self %d: not the module's fused forward",
              tg_dtype_name(dt), self);
    setenv("TG_ATTENTION_FAST", "0", 1);
    OK(tg_nn_multihead_attention_forward(m, &want, NULL, q, kv, kv, &fo));
    unsetenv("TG_ATTENTION_FAST");
    cr_assert(eq(u64, tg__attention_fast_calls(), before + 1), "TG_ATTENTION_FAST=0: fused");
    tg_no_grad_end();
    cr_assert(eq(int, tg_tensor_dtype(y), dt));
    char what[96];
    snprintf(what, sizeof what, "mha %s self %d batch_first %d %s", tg_dtype_name(dt), self, bf,
             tg_bf16_kernel_name(tg_bf16_kernel_get()));
    const int64_t differ = expect_close(what, y, want, 8 * unit_of(dt));
    cr_log_info("%s: %lld of %lld elements differ", what, (long long)differ,
                (long long)tg_tensor_numel(want));
    cr_assert(differ * 10 <= tg_tensor_numel(want), "%s: %lld elements differ", what,
              (long long)differ);
    th_release_all(7, (tg_tensor *[]){q, kv, causal, am, fo.key_padding_mask, y, want});
    tg_module_release(m);
}

static void mha_sweep_as(tg_dtype dt, tg_dtype in, tg_dtype mdt, bool rand_mask)
{
    for (int self = 0; self < 2; self++)
        for (int bf = 0; bf < 2; bf++)
            mha_case_as(dt, in, mdt, rand_mask, self, bf, 50 + (uint64_t)(2 * self + bf));
}

static void mha_sweep(tg_dtype dt) { mha_sweep_as(dt, dt, dt, false); }

Test(mha_fast_half, mha_bf16_portable_kernel)
{
    use_kernel(TG_BF16_KERNEL_PORTABLE);
    mha_sweep(TG_BF16);
}

Test(mha_fast_half, mha_bf16_avx512_kernel)
{
    use_kernel(TG_BF16_KERNEL_AVX512);
    mha_sweep(TG_BF16);
}

Test(mha_fast_half, mha_f16)
{
    mha_sweep(TG_F16);
}

/* TransformerEncoderLayer (d_model 64, 4 heads) in bf16 eval under
 * no_grad with a causal mask: the self-attention block takes the fused
 * kernel (the rest of the layer its bf16 ops), the output the taped
 * path's within the MultiheadAttention check's tolerance. */
Test(mha_fast_half, transformer_encoder_layer_bf16_eval_forward)
{
    uint64_t seed = 23;
    for (int pre = 0; pre < 2; pre++) {
        tg_rng rng;
        tg_rng_init(&rng, 9);
        tg_nn_transformer_encoder_layer_opts to = TG_NN_TRANSFORMER_ENCODER_LAYER_OPTS_INIT;
        to.dim_feedforward = 128;
        to.batch_first = true;
        to.norm_first = pre;
        tg_module *m = NULL;
        OK(tg_nn_transformer_encoder_layer_new(&m, 64, 4, &to, &rng));
        OK(tg_module_to_dtype(m, TG_BF16));
        tg_module_train(m, false);
        const int64_t n = 4, S = 40;
        tg_tensor *x = th_rand_tensor(&seed, TG_BF16, 3, (int64_t[]){n, S, 64}, -1, 1);
        tg_tensor *causal = NULL, *y = NULL, *want = NULL;
        OK(tg_nn_transformer_square_subsequent_mask(&causal, S, TG_BF16));
        tg_no_grad_begin();
        const uint64_t before = tg__attention_fast_calls();
        OK(tg_nn_transformer_encoder_layer_forward(m, &y, x, causal, NULL));
        cr_assert(eq(u64, tg__attention_fast_calls(), before + 1), "norm_first %d", pre);
        setenv("TG_ATTENTION_FAST", "0", 1);
        OK(tg_nn_transformer_encoder_layer_forward(m, &want, x, causal, NULL));
        unsetenv("TG_ATTENTION_FAST");
        tg_no_grad_end();
        expect_close("encoder layer bf16", y, want, 8 * unit_of(TG_BF16));
        th_release_all(4, (tg_tensor *[]){x, causal, y, want});
        tg_module_release(m);
    }
}

/* TransformerDecoderLayer (d_model 64, 4 heads) in f16 and bf16 eval
 * under no_grad with a causal tgt_mask over a memory of another length:
 * both attention blocks take the fused kernel, the output the taped path's
 * within the same tolerance. */
Test(mha_fast_half, transformer_decoder_layer_half_eval_forward)
{
    uint64_t seed = 29;
    const tg_dtype dts[2] = {TG_BF16, TG_F16};
    for (int i = 0; i < 2; i++) {
        tg_rng rng;
        tg_rng_init(&rng, 10);
        tg_nn_transformer_decoder_layer_opts to = TG_NN_TRANSFORMER_DECODER_LAYER_OPTS_INIT;
        to.dim_feedforward = 128;
        to.batch_first = true;
        tg_module *m = NULL;
        OK(tg_nn_transformer_decoder_layer_new(&m, 64, 4, &to, &rng));
        OK(tg_module_to_dtype(m, dts[i]));
        tg_module_train(m, false);
        const int64_t n = 3, T = 33, S = 45;
        tg_tensor *x = th_rand_tensor(&seed, dts[i], 3, (int64_t[]){n, T, 64}, -1, 1);
        tg_tensor *mem = th_rand_tensor(&seed, dts[i], 3, (int64_t[]){n, S, 64}, -1, 1);
        tg_tensor *causal = NULL, *y = NULL, *want = NULL;
        OK(tg_nn_transformer_square_subsequent_mask(&causal, T, dts[i]));
        tg_nn_transformer_masks mk = TG_NN_TRANSFORMER_MASKS_INIT;
        mk.tgt_mask = causal;
        tg_no_grad_begin();
        const uint64_t before = tg__attention_fast_calls();
        OK(tg_nn_transformer_decoder_layer_forward(m, &y, x, mem, &mk));
        cr_assert(eq(u64, tg__attention_fast_calls(), before + 2), "%s",
                  tg_dtype_name(dts[i]));
        setenv("TG_ATTENTION_FAST", "0", 1);
        OK(tg_nn_transformer_decoder_layer_forward(m, &want, x, mem, &mk));
        unsetenv("TG_ATTENTION_FAST");
        tg_no_grad_end();
        expect_close("decoder layer", y, want, 8 * unit_of(dts[i]));
        th_release_all(5, (tg_tensor *[]){x, mem, causal, y, want});
        tg_module_release(m);
    }
}

/* ---- PyTorch's bf16 MultiheadAttention ---- */

/* Each case of tests/golden/attention_half.safetensors (torch 1.13's
 * nn.MultiheadAttention in bf16, eval, no_grad; scripts/
 * make_attention_half_goldens.py): the fused forward (taken) and the taped
 * one each within 8u (|y| + max |y|) of torch's output, u = 2^-8 (the
 * MultiheadAttention check's tolerance above).  Without batch_first torch
 * runs its math path, whose bits both give here; with batch_first its eval
 * forward takes its own fused kernel, whose roundings land elsewhere (as
 * they do against its math path). */
Test(mha_fast_half, mha_bf16_matches_torch)
{
    tg_st_file *f = th_golden_load("attention_half.safetensors");
    const int n = atoi(tg_st_meta_get(f, "cases"));
    cr_assert(n > 0, "no cases");
    for (int i = 0; i < n; i++) {
        char c[16];
        snprintf(c, sizeof c, "case%d", i);
        long long e, h, bf, self;
        cr_assert(eq(int, sscanf(th_golden_meta(f, c, "cfg"), "%lld %lld %lld %lld", &e, &h,
                                 &bf, &self), 4));
        tg_rng rng;
        tg_rng_init(&rng, 1);
        tg_nn_multihead_attention_opts mo = TG_NN_MULTIHEAD_ATTENTION_OPTS_INIT;
        mo.batch_first = bf;
        tg_module *m = NULL;
        OK(tg_nn_multihead_attention_new(&m, e, h, &mo, &rng));
        OK(tg_module_to_dtype(m, TG_BF16));
        char prefix[32];
        snprintf(prefix, sizeof prefix, "%s.p", c);
        OK(tg_module_load_state_dict(m, f, prefix, true));
        tg_module_train(m, false);
        tg_tensor *q = (tg_tensor *)th_golden_get(f, c, "q");
        tg_tensor *kv = self ? q : (tg_tensor *)th_golden_get(f, c, "kv");
        tg_nn_mha_forward_opts fo = TG_NN_MHA_FORWARD_OPTS_INIT;
        snprintf(prefix, sizeof prefix, "%s.kpm", c);
        fo.key_padding_mask = tg_st_get(f, prefix);   /* NULL: none */
        snprintf(prefix, sizeof prefix, "%s.am", c);
        fo.attn_mask = tg_st_get(f, prefix);
        tg_tensor *y = NULL, *yt = NULL;
        tg_no_grad_begin();
        const uint64_t before = tg__attention_fast_calls();
        OK(tg_nn_multihead_attention_forward(m, &y, NULL, q, kv, kv, &fo));
        cr_assert(eq(u64, tg__attention_fast_calls(), before + 1), "%s: not fused", c);
        setenv("TG_ATTENTION_FAST", "0", 1);
        OK(tg_nn_multihead_attention_forward(m, &yt, NULL, q, kv, kv, &fo));
        unsetenv("TG_ATTENTION_FAST");
        tg_no_grad_end();
        const tg_tensor *want = th_golden_get(f, c, "y");
        char what[48];
        snprintf(what, sizeof what, "%s fused", c);
        const int64_t dfused = expect_close(what, y, want, 8 * unit_of(TG_BF16));
        snprintf(what, sizeof what, "%s taped", c);
        const int64_t dtaped = expect_close(what, yt, want, 8 * unit_of(TG_BF16));
        cr_log_info("%s: %lld (fused) and %lld (taped) of %lld elements differ from torch's",
                    c, (long long)dfused, (long long)dtaped, (long long)tg_tensor_numel(want));
        if (!bf) {
            cr_assert(eq(i64, dfused, 0), "%s: the fused path is not torch's math path", c);
            cr_assert(eq(i64, dtaped, 0), "%s: the taped path is not torch's math path", c);
        }
        th_release_all(2, (tg_tensor *[]){y, yt});
        tg_module_release(m);
    }
    tg_st_free(f);
}

/* A bf16 MultiheadAttention inside autocast of bf16, under no_grad: fused,
 * the taped forward's output. */
Test(mha_fast_half, mha_inside_autocast)
{
    use_kernel(TG_BF16_KERNEL_AVX512);
    OK(tg_autocast_begin(TG_BF16));
    mha_sweep(TG_BF16);
    OK(tg_autocast_end());
}

/* MultiheadAttention with f32 parameters and inputs inside autocast of bf16
 * (each bf16 kernel this CPU runs) and of f16, under no_grad, an f32 causal
 * mask: the projections give the autocast dtype, the attention is fused in
 * it, the output the taped forward's. */
Test(mha_fast_half, mha_f32_inputs_inside_autocast)
{
    const tg_bf16_kernel kernels[2] = {TG_BF16_KERNEL_PORTABLE, TG_BF16_KERNEL_AVX512};
    for (int i = 0; i < 2; i++) {
        if (!use_kernel_if_there(kernels[i])) continue;
        OK(tg_autocast_begin(TG_BF16));
        mha_sweep_as(TG_BF16, TG_F32, TG_F32, false);
        mha_sweep_as(TG_BF16, TG_F32, TG_F32, true);
        OK(tg_autocast_end());
    }
    OK(tg_autocast_begin(TG_F16));
    mha_sweep_as(TG_F16, TG_F32, TG_F32, true);
    OK(tg_autocast_end());
}

/* A bf16 MultiheadAttention inside autocast of bf16 given an f32 mask,
 * causal or of values in [-2, 2]: fused, the mask read as f32 and the
 * scores' sum with it kept in f32 (tg_add's of a half and an f32), the
 * taped forward's output. */
Test(mha_fast_half, mha_f32_mask_inside_autocast)
{
    use_kernel(TG_BF16_KERNEL_AVX512);
    OK(tg_autocast_begin(TG_BF16));
    mha_sweep_as(TG_BF16, TG_BF16, TG_F32, false);
    mha_sweep_as(TG_BF16, TG_BF16, TG_F32, true);
    OK(tg_autocast_end());
}

/* Inside autocast an f64 mask is not one the fused kernel reads: the
 * forward takes the taped path (no fused call), which refuses it as
 * autocast's products refuse an f64 operand, instead of the kernel reading
 * it as another dtype. */
Test(mha_fast_half, mha_f64_mask_inside_autocast_is_taped)
{
    tg_rng rng;
    tg_rng_init(&rng, 3);
    tg_nn_multihead_attention_opts mo = TG_NN_MULTIHEAD_ATTENTION_OPTS_INIT;
    tg_module *m = NULL;
    OK(tg_nn_multihead_attention_new(&m, 32, 2, &mo, &rng));
    tg_module_train(m, false);
    uint64_t seed = 77;
    tg_tensor *x = th_rand_tensor(&seed, TG_F32, 3, (int64_t[]){12, 2, 32}, -1, 1);
    tg_tensor *causal = NULL, *y = NULL;
    OK(tg_nn_transformer_square_subsequent_mask(&causal, 12, TG_F64));
    tg_nn_mha_forward_opts fo = TG_NN_MHA_FORWARD_OPTS_INIT;
    fo.attn_mask = causal;
    tg_no_grad_begin();
    OK(tg_autocast_begin(TG_BF16));
    const uint64_t before = tg__attention_fast_calls();
    const int rc = tg_nn_multihead_attention_forward(m, &y, NULL, x, x, x, &fo);
    OK(tg_autocast_end());
    tg_no_grad_end();
    cr_assert(eq(u64, tg__attention_fast_calls(), before), "an f64 mask went to the kernel");
    cr_assert(eq(int, rc, TG_EDTYPE), "%s", tg_error_message());
    cr_assert(y == NULL, "a result beside the error");
    th_release_all(2, (tg_tensor *[]){x, causal});
    tg_module_release(m);
}

/* TransformerEncoderLayer (d_model 64, 4 heads) with f32 parameters and
 * input inside autocast of bf16, in eval under no_grad with an f32 causal
 * mask, post-norm and norm_first: its self-attention takes the fused
 * kernel in bf16, the output the taped path's within the tolerance above. */
Test(mha_fast_half, transformer_encoder_layer_f32_inside_autocast)
{
    use_kernel(TG_BF16_KERNEL_AVX512);
    uint64_t seed = 31;
    for (int pre = 0; pre < 2; pre++) {
        tg_rng rng;
        tg_rng_init(&rng, 9);
        tg_nn_transformer_encoder_layer_opts to = TG_NN_TRANSFORMER_ENCODER_LAYER_OPTS_INIT;
        to.dim_feedforward = 128;
        to.batch_first = true;
        to.norm_first = pre;
        tg_module *m = NULL;
        OK(tg_nn_transformer_encoder_layer_new(&m, 64, 4, &to, &rng));
        tg_module_train(m, false);
        const int64_t n = 4, S = 40;
        tg_tensor *x = th_rand_tensor(&seed, TG_F32, 3, (int64_t[]){n, S, 64}, -1, 1);
        tg_tensor *causal = NULL, *y = NULL, *want = NULL;
        OK(tg_nn_transformer_square_subsequent_mask(&causal, S, TG_F32));
        tg_no_grad_begin();
        OK(tg_autocast_begin(TG_BF16));
        const uint64_t before = tg__attention_fast_calls();
        const uint64_t mha_before = tg__nn_mha_self_fast_calls();
        OK(tg_nn_transformer_encoder_layer_forward(m, &y, x, causal, NULL));
        cr_assert(eq(u64, tg__attention_fast_calls(), before + 1), "norm_first %d", pre);
        cr_assert(eq(u64, tg__nn_mha_self_fast_calls(), mha_before + 1),
                  "norm_first %d: not MultiheadAttention's fused forward", pre);
        setenv("TG_ATTENTION_FAST", "0", 1);
        OK(tg_nn_transformer_encoder_layer_forward(m, &want, x, causal, NULL));
        unsetenv("TG_ATTENTION_FAST");
        OK(tg_autocast_end());
        tg_no_grad_end();
        cr_assert(eq(int, tg_tensor_dtype(y), tg_tensor_dtype(want)));
        expect_close("encoder layer f32 inside autocast", y, want, 8 * unit_of(TG_BF16));
        th_release_all(4, (tg_tensor *[]){x, causal, y, want});
        tg_module_release(m);
    }
}
