/* tests/test_attention_fast.c - the inference path of scaled dot-product
 * attention (src/ops/attention_fast.c): its results against the taped
 * path's (the same call with TG_ATTENTION_FAST=0) over ranks, L != S,
 * 1 to 8 heads, u8 and float masks (broadcast, causal, key padding),
 * strided and expanded inputs and many query blocks, in f32 (1e-6) and
 * f64 (1e-12); fully masked rows (NaN in both); when it is taken and when
 * not (weights, gradients, dropout in training, the variable, autocast;
 * f16 taken, see tests/test_attention_fast_half.c); and
 * MultiheadAttention's and TransformerEncoderLayer's eval forwards. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "attention_fixtures.h"
#include "helpers.h"
#include "ops/attention_internal.h"
#include "ops/softmax_rows_internal.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

/* ---- helpers ---- */


/* Every element: NaN where want is NaN, else |got - want| <= rtol (|want| +
 * scale); scale < 0: the largest |want|. */
static void expect_agree(const char *what, const tg_tensor *got, const tg_tensor *want,
                         double rtol, double scale)
{
    th_expect_shape(got, tg_tensor_ndim(want), tg_tensor_shape(want));
    const int64_t n = tg_tensor_numel(want);
    double *a = th_doubles(got), *b = th_doubles(want);
    if (scale < 0)
        for (int64_t i = 0; i < n; i++)
            if (fabs(b[i]) > -scale) scale = -fabs(b[i]);
    scale = fabs(scale);
    int64_t bad = -1, nans = 0;
    for (int64_t i = 0; i < n && bad < 0; i++) {
        if (isnan(b[i])) {
            nans++;
            if (!isnan(a[i])) bad = i;
        } else if (!(fabs(a[i] - b[i]) <= rtol * (fabs(b[i]) + scale))) {
            bad = i;
        }
    }
    cr_assert(bad < 0, "%s: element %lld is %.17g, the taped path's %.17g (rtol %g, scale %g)",
              what, (long long)bad, bad < 0 ? 0.0 : a[bad], bad < 0 ? 0.0 : b[bad], rtol, scale);
    free(a);
    free(b);
}

static double max_abs(const tg_tensor *t)
{
    double *a = th_doubles(t), m = 0;
    for (int64_t i = 0; i < tg_tensor_numel(t); i++)
        if (fabs(a[i]) > m) m = fabs(a[i]);
    free(a);
    return m;
}



/* Case c in dtype dt: the fused path taken, and its output the taped one's. */
static void check_case(const sdpa_case *c, tg_dtype dt, uint64_t seed)
{
    tg_tensor *q, *k, *v;
    tg_attention_opts o;
    case_inputs(c, dt, &seed, &q, &k, &v, &o);
    bool fast_took, taped_took;
    tg_tensor *y = sdpa(true, q, k, v, &o, &fast_took);
    tg_tensor *want = sdpa(false, q, k, v, &o, &taped_took);
    char what[128];
    snprintf(what, sizeof what, "%s nd %d lead %lld %lld L %lld S %lld E %lld Ev %lld mask %d",
             tg_dtype_name(dt), c->nd, (long long)c->lead[0], (long long)c->lead[1],
             (long long)c->L, (long long)c->S, (long long)c->E, (long long)c->Ev, c->mask);
    cr_assert(fast_took, "%s: the fused path was not taken", what);
    cr_assert(taped_took == false, "%s: TG_ATTENTION_FAST=0 took the fused path", what);
    expect_agree(what, y, want, dt == TG_F64 ? 1e-12 : 1e-6, max_abs(v));
    th_release_all(6, (tg_tensor *[]){q, k, v, o.attn_mask, y, want});
}

static const sdpa_case cases[] = {
    SDPA_CASES,
};

/* ---- results ---- */

Test(attention_fast, matches_taped_path_f32_and_f64)
{
    tg_no_grad_begin();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        check_case(&cases[i], TG_F32, 100 + i);
        check_case(&cases[i], TG_F64, 200 + i);
    }
    tg_no_grad_end();
}

/* The f32 rows' exp in plain C, on AVX2 and on AVX-512 (those this CPU
 * runs; the others fall back to the widest it has): the same results. */
Test(attention_fast, every_exp_width_matches_the_taped_path)
{
    for (int w = 1; w <= 3; w++) {
        tg__exp_width_force(w);
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
            check_case(&cases[i], TG_F32, 600 + i);
    }
    tg__exp_width_force(0);
}

Test(attention_fast, matches_taped_path_for_1_to_8_heads)
{
    static const int kinds[] = {M_NONE, M_U8, M_FLOAT, M_CAUSAL, M_PAD_U8, M_FULL};
    for (int64_t h = 1; h <= 8; h++) {
        const sdpa_case c4 = {4, {2, h}, 7, 11, 4, 6, kinds[h % 6]};
        const sdpa_case c3 = {3, {2 * h, 1}, 12, 5, 6, 3, kinds[(h + 3) % 6]};
        check_case(&c4, TG_F32, 300 + (uint64_t)h);
        check_case(&c4, TG_F64, 400 + (uint64_t)h);
        check_case(&c3, TG_F32, 500 + (uint64_t)h);
    }
}

/* q a transposed view, k's rows of stride 1 (a transposed (E, S)), v
 * expanded along the batch: read in place or copied, the same numbers. */
Test(attention_fast, strided_and_expanded_inputs)
{
    uint64_t seed = 7;
    tg_tensor *qt = th_rand_tensor(&seed, TG_F32, 3, (int64_t[]){9, 4, 8}, -2, 2);
    tg_tensor *kt = th_rand_tensor(&seed, TG_F32, 3, (int64_t[]){4, 8, 6}, -2, 2);
    tg_tensor *v1 = th_rand_tensor(&seed, TG_F32, 3, (int64_t[]){1, 6, 5}, -1, 1);
    tg_tensor *q = NULL, *k = NULL, *v = NULL;
    OK(tg_transpose(&q, qt, 0, 1));   /* (4, 9, 8), rows of stride 32 */
    OK(tg_transpose(&k, kt, 1, 2));   /* (4, 6, 8), columns of stride 6 */
    OK(tg_expand(&v, v1, 3, (int64_t[]){4, 6, 5}));
    bool took, taped;
    tg_tensor *y = sdpa(true, q, k, v, NULL, &took);
    tg_tensor *want = sdpa(false, q, k, v, NULL, &taped);
    cr_assert(took, "the fused path was not taken");
    expect_agree("strided", y, want, 1e-6, max_abs(v));
    th_release_all(8, (tg_tensor *[]){qt, kt, v1, q, k, v, y, want});
}

/* A row whose every key is masked is NaN on both paths (torch's softmax of
 * -inf), the other rows unchanged; so is a row holding +inf. */
Test(attention_fast, fully_masked_rows_are_nan_as_on_the_taped_path)
{
    uint64_t seed = 11;
    const int64_t L = 5, S = 6;
    tg_tensor *q = th_rand_tensor(&seed, TG_F32, 3, (int64_t[]){2, L, 4}, -1, 1);
    tg_tensor *k = th_rand_tensor(&seed, TG_F32, 3, (int64_t[]){2, S, 4}, -1, 1);
    tg_tensor *v = th_rand_tensor(&seed, TG_F32, 3, (int64_t[]){2, S, 3}, -1, 1);
    tg_tensor *mu = NULL, *mf = NULL;
    OK(tg_tensor_zeros(&mu, TG_U8, 2, (int64_t[]){L, S}));
    OK(tg_tensor_zeros(&mf, TG_F32, 3, (int64_t[]){2, L, S}));
    for (int64_t s = 0; s < S; s++) {
        OK(tg_tensor_set_flat(mu, 2 * S + s, 1));          /* row 2 of every matrix */
        OK(tg_tensor_set_flat(mf, 1 * S + s, -INFINITY));  /* row 1 of matrix 0 */
    }
    OK(tg_tensor_set_flat(mf, (L + 3) * S + 2, INFINITY));  /* row 3 of matrix 1 */
    tg_tensor *masks[2] = {mu, mf};
    const int64_t nan_rows[2][2] = {{2, L + 2}, {1, L + 3}};
    for (int i = 0; i < 2; i++) {
        tg_attention_opts o = TG_ATTENTION_OPTS_INIT;
        o.attn_mask = masks[i];
        bool took, taped;
        tg_tensor *y = sdpa(true, q, k, v, &o, &took);
        tg_tensor *want = sdpa(false, q, k, v, &o, &taped);
        cr_assert(took, "mask %d: the fused path was not taken", i);
        expect_agree("masked rows", y, want, 1e-6, max_abs(v));
        for (int r = 0; r < 2; r++)
            for (int64_t c = 0; c < 3; c++)
                cr_assert(isnan(th_at(y, nan_rows[i][r] * 3 + c)), "mask %d: row %lld not NaN",
                          i, (long long)nan_rows[i][r]);
        cr_assert(isnan(th_at(y, 0)) == 0, "mask %d: row 0 is NaN", i);
        th_release_all(2, (tg_tensor *[]){y, want});
    }
    th_release_all(5, (tg_tensor *[]){q, k, v, mu, mf});
}

/* ---- when it is taken ---- */

Test(attention_fast, taken_only_without_gradient_weights_or_dropout)
{
    uint64_t seed = 13;
    tg_tensor *q = th_rand_tensor(&seed, TG_F32, 3, (int64_t[]){2, 4, 8}, -1, 1);
    tg_tensor *k = th_rand_tensor(&seed, TG_F32, 3, (int64_t[]){2, 5, 8}, -1, 1);
    tg_tensor *v = th_rand_tensor(&seed, TG_F32, 3, (int64_t[]){2, 5, 8}, -1, 1);
    tg_tensor *y = NULL, *w = NULL, *qh = NULL, *kh = NULL, *vh = NULL, *qd = NULL, *kd = NULL,
              *vd = NULL;
    bool took;
    y = sdpa(true, q, k, v, NULL, &took);   /* grad mode on, nothing requires grad */
    cr_assert(took, "no input requires grad: the fused path is due");
    tg_tensor_release(y);
    OK(tg_tensor_set_requires_grad(q, true));
    y = sdpa(true, q, k, v, NULL, &took);
    cr_assert(took == false, "q requires grad in grad mode: the taped path is due");
    cr_assert(tg_tensor_requires_grad(y), "the taped output must require grad");
    tg_tensor_release(y);
    tg_no_grad_begin();
    y = sdpa(true, q, k, v, NULL, &took);
    tg_no_grad_end();
    cr_assert(took, "no_grad: the fused path is due");
    tg_tensor_release(y);
    const uint64_t before = tg__attention_fast_calls();
    tg_no_grad_begin();
    OK(tg_scaled_dot_product_attention(&y, &w, q, k, v, NULL));
    tg_no_grad_end();
    cr_assert(eq(u64, tg__attention_fast_calls(), before), "weights wanted: the taped path");
    th_release_all(2, (tg_tensor *[]){y, w});
    tg_rng rng;
    tg_rng_init(&rng, 3);
    tg_attention_opts o = TG_ATTENTION_OPTS_INIT;
    o.dropout_p = 0.5;
    o.rng = &rng;
    tg_no_grad_begin();
    y = sdpa(true, q, k, v, &o, &took);   /* eval: no dropout */
    cr_assert(took, "dropout_p in eval: the fused path is due");
    tg_tensor_release(y);
    o.training = true;
    y = sdpa(true, q, k, v, &o, &took);
    cr_assert(took == false, "dropout in training: the taped path is due");
    tg_tensor_release(y);
    o.dropout_p = 0.0;
    y = sdpa(true, q, k, v, &o, &took);
    cr_assert(took, "training with p = 0: the fused path is due");
    tg_tensor_release(y);
    OK(tg_to_dtype(&qh, q, TG_F16));
    OK(tg_to_dtype(&kh, k, TG_F16));
    OK(tg_to_dtype(&vh, v, TG_F16));
    y = sdpa(true, qh, kh, vh, NULL, &took);
    cr_assert(took, "f16: the fused path is due");
    tg_tensor_release(y);
    OK(tg_autocast_begin(TG_BF16));
    y = sdpa(true, q, k, v, NULL, &took);
    cr_assert(took, "f32 inside autocast: the fused path, cast to bf16, is due");
    cr_assert(eq(int, tg_tensor_dtype(y), TG_BF16), "f32 inside autocast: a bf16 output");
    tg_tensor_release(y);
    y = sdpa(true, qh, kh, vh, NULL, &took);
    cr_assert(took == false, "f16 inside autocast of bf16: the taped path");
    tg_tensor_release(y);
    OK(tg_to_dtype(&qd, q, TG_F64));
    OK(tg_to_dtype(&kd, k, TG_F64));
    OK(tg_to_dtype(&vd, v, TG_F64));
    y = sdpa(true, qd, kd, vd, NULL, &took);
    cr_assert(took == false, "f64 inside autocast (not cast): the taped path");
    cr_assert(eq(int, tg_tensor_dtype(y), TG_F64));
    tg_tensor_release(y);
    OK(tg_autocast_end());
    tg_no_grad_end();
    th_release_all(9, (tg_tensor *[]){q, k, v, qh, kh, vh, qd, kd, vd});
}

/* ---- the modules' eval forwards ---- */

/* MultiheadAttention in eval under no_grad without weights: one fused call
 * per forward, the taped path's output; with weights, none. */
Test(attention_fast, multihead_attention_eval_forward)
{
    uint64_t seed = 17;
    for (int64_t h = 1; h <= 8; h *= 2) {
        for (int bf = 0; bf < 2; bf++) {
            const tg_dtype dt = h == 4 ? TG_F64 : TG_F32;
            tg_rng rng;
            tg_rng_init(&rng, 5 + (uint64_t)h);
            tg_nn_multihead_attention_opts mo = TG_NN_MULTIHEAD_ATTENTION_OPTS_INIT;
            mo.dropout = 0.2;
            mo.kdim = 12;
            mo.vdim = 10;
            mo.batch_first = bf;
            tg_module *m = NULL;
            OK(tg_nn_multihead_attention_new(&m, 16, h, &mo, &rng));
            OK(tg_module_to_dtype(m, dt));
            tg_module_train(m, false);
            const int64_t n = 3, L = 7, S = 9;
            const int64_t qs[3] = {bf ? n : L, bf ? L : n, 16};
            const int64_t ks[3] = {bf ? n : S, bf ? S : n, 12};
            const int64_t vs[3] = {bf ? n : S, bf ? S : n, 10};
            tg_tensor *q = th_rand_tensor(&seed, dt, 3, qs, -1, 1);
            tg_tensor *k = th_rand_tensor(&seed, dt, 3, ks, -1, 1);
            tg_tensor *v = th_rand_tensor(&seed, dt, 3, vs, -1, 1);
            const int64_t ps[2] = {n, S}, as[2] = {L, S};
            tg_nn_mha_forward_opts fo = TG_NN_MHA_FORWARD_OPTS_INIT;
            fo.key_padding_mask = make_mask(M_PAD_U8, dt, 2, ps, &seed);
            fo.attn_mask = make_mask(M_FLOAT, dt, 2, as, &seed);
            tg_tensor *y = NULL, *want = NULL, *w = NULL, *yw = NULL;
            tg_no_grad_begin();
            uint64_t before = tg__attention_fast_calls();
            OK(tg_nn_multihead_attention_forward(m, &y, NULL, q, k, v, &fo));
            cr_assert(eq(u64, tg__attention_fast_calls(), before + 1), "heads %lld", (long long)h);
            setenv("TG_ATTENTION_FAST", "0", 1);
            OK(tg_nn_multihead_attention_forward(m, &want, NULL, q, k, v, &fo));
            unsetenv("TG_ATTENTION_FAST");
            before = tg__attention_fast_calls();
            OK(tg_nn_multihead_attention_forward(m, &yw, &w, q, k, v, &fo));
            cr_assert(eq(u64, tg__attention_fast_calls(), before), "weights: the taped path");
            tg_no_grad_end();
            expect_agree("mha", y, want, dt == TG_F64 ? 1e-12 : 1e-6, -1);
            expect_agree("mha with weights", yw, want, dt == TG_F64 ? 1e-12 : 1e-6, -1);
            th_release_all(9, (tg_tensor *[]){q, k, v, fo.key_padding_mask, fo.attn_mask, y,
                                               want, w, yw});
            tg_module_release(m);
        }
    }
}

/* TransformerEncoderLayer in eval under no_grad, with a causal mask and a
 * key padding mask, post- and pre-norm: the fused attention, the taped
 * path's output. */
Test(attention_fast, transformer_encoder_layer_eval_forward)
{
    uint64_t seed = 19;
    for (int pre = 0; pre < 2; pre++) {
        tg_rng rng;
        tg_rng_init(&rng, 9);
        tg_nn_transformer_encoder_layer_opts to = TG_NN_TRANSFORMER_ENCODER_LAYER_OPTS_INIT;
        to.dim_feedforward = 64;
        to.batch_first = true;
        to.norm_first = pre;
        tg_module *m = NULL;
        OK(tg_nn_transformer_encoder_layer_new(&m, 32, 4, &to, &rng));
        tg_module_train(m, false);
        const int64_t n = 4, S = 10;
        tg_tensor *x = th_rand_tensor(&seed, TG_F32, 3, (int64_t[]){n, S, 32}, -1, 1);
        tg_tensor *causal = NULL, *y = NULL, *want = NULL;
        OK(tg_nn_transformer_square_subsequent_mask(&causal, S, TG_F32));
        tg_tensor *pad = make_mask(M_PAD_U8, TG_F32, 2, (int64_t[]){n, S}, &seed);
        tg_no_grad_begin();
        const uint64_t before = tg__attention_fast_calls();
        OK(tg_nn_transformer_encoder_layer_forward(m, &y, x, causal, pad));
        cr_assert(eq(u64, tg__attention_fast_calls(), before + 1), "norm_first %d", pre);
        setenv("TG_ATTENTION_FAST", "0", 1);
        OK(tg_nn_transformer_encoder_layer_forward(m, &want, x, causal, pad));
        unsetenv("TG_ATTENTION_FAST");
        tg_no_grad_end();
        expect_agree("encoder layer", y, want, 1e-6, -1);
        th_release_all(5, (tg_tensor *[]){x, causal, pad, y, want});
        tg_module_release(m);
    }
}
