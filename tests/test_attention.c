/* tests/test_attention.c - tg_scaled_dot_product_attention and the
 * MultiheadAttention module: against torch 1.13's nn.MultiheadAttention
 * (self- and cross-attention, kdim/vdim, batch_first both ways, unbatched,
 * u8 and float key_padding_mask (alone and beside a u8 attn_mask), u8
 * and float attn_mask of 2 and 3 dims, averaged and per-head weights,
 * add_bias_kv, add_zero_attn, bias=False; output, weights, the inputs',
 * a float mask's and every parameter's gradients; f32 and f64),
 * gradients of first and second order by finite differences, torch's
 * state-dict keys and initialisation, dropout in training and eval, and
 * the refusals.
 * Goldens: scripts/make_attention_goldens.py. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

/* The options of a golden case's "cfg": "E H kdim vdim bias add_bias_kv
 * add_zero_attn batch_first self need_weights average". */
typedef struct golden_cfg {
    int64_t e, h;
    tg_nn_multihead_attention_opts o;
    bool self, need_weights, average;
} golden_cfg;

static golden_cfg cfg_of(const char *s)
{
    long long v[11];
    cr_assert(eq(int, sscanf(s, "%lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld", &v[0],
                             &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9],
                             &v[10]),
                 11));
    golden_cfg c = {.e = v[0], .h = v[1], .o = TG_NN_MULTIHEAD_ATTENTION_OPTS_INIT};
    c.o.kdim = v[2];
    c.o.vdim = v[3];
    c.o.bias = v[4];
    c.o.add_bias_kv = v[5];
    c.o.add_zero_attn = v[6];
    c.o.batch_first = v[7];
    c.self = v[8];
    c.need_weights = v[9];
    c.average = v[10];
    return c;
}

/* The module of a golden case, with torch's parameters loaded. */
static tg_module *golden_module(const tg_st_file *f, const char *c, const golden_cfg *g,
                                tg_dtype dt)
{
    tg_rng rng;
    tg_rng_init(&rng, 1);
    tg_module *m = NULL;
    OK(tg_nn_multihead_attention_new(&m, g->e, g->h, &g->o, &rng));
    OK(tg_module_to_dtype(m, dt));
    char prefix[32];
    snprintf(prefix, sizeof prefix, "%s.p", c);
    OK(tg_module_load_state_dict(m, f, prefix, true));
    return m;
}

/* sum(g * y) (+ sum(gw * w)), backpropagated. */
static void backprop(tg_tensor *y, const tg_tensor *g, tg_tensor *w, const tg_tensor *gw)
{
    tg_tensor *p = NULL, *l = NULL, *pw = NULL, *lw = NULL, *tot = NULL;
    OK(tg_mul(&p, y, (tg_tensor *)g));
    OK(tg_sum(&l, p));
    if (w) {
        OK(tg_mul(&pw, w, (tg_tensor *)gw));
        OK(tg_sum(&lw, pw));
        OK(tg_add(&tot, l, lw));
    } else {
        tot = tg_tensor_retain(l);
    }
    OK(tg_backward(tot, NULL, NULL));
    th_release_all(5, (tg_tensor *[]){p, l, pw, lw, tot});
}

static void compare_case(const tg_st_file *f, int i, int *counts)
{
    char c[16];
    snprintf(c, sizeof c, "case%d", i);
    const golden_cfg g = cfg_of(th_golden_meta(f, c, "cfg"));
    const bool f64 = !strcmp(th_golden_meta(f, c, "dtype"), "f64");
    const double rtol = f64 ? 1e-10 : 3e-5;
    tg_module *m = golden_module(f, c, &g, f64 ? TG_F64 : TG_F32);
    th_expect_state_keys(m, th_golden_meta(f, c, "params"));
    tg_tensor *q = th_leaf_clone(th_golden_get(f, c, "q"));
    tg_tensor *k = g.self ? tg_tensor_retain(q) : th_leaf_clone(th_golden_get(f, c, "k"));
    tg_tensor *v = g.self ? tg_tensor_retain(q) : th_leaf_clone(th_golden_get(f, c, "v"));
    char key[TG_MODULE_NAME_MAX + 16];
    snprintf(key, sizeof key, "%s.kpm", c);
    const tg_tensor *kpm = tg_st_get(f, key);
    snprintf(key, sizeof key, "%s.dkpm", c);
    const tg_tensor *dkpm = tg_st_get(f, key);   /* a float mask's gradient */
    tg_nn_mha_forward_opts fo = TG_NN_MHA_FORWARD_OPTS_INIT;
    fo.key_padding_mask = dkpm ? th_leaf_clone(kpm) : tg_tensor_retain((tg_tensor *)kpm);
    snprintf(key, sizeof key, "%s.am", c);
    fo.attn_mask = (tg_tensor *)tg_st_get(f, key);
    fo.average_attn_weights = g.average;
    tg_tensor *y = NULL, *w = NULL;
    OK(tg_nn_multihead_attention_forward(m, &y, g.need_weights ? &w : NULL, q, k, v, &fo));
    th_expect_close_scaled(c, y, th_golden_get(f, c, "y"), rtol);
    if (g.need_weights) th_expect_close_scaled(c, w, th_golden_get(f, c, "w"), rtol);
    backprop(y, th_golden_get(f, c, "g"), w, w ? th_golden_get(f, c, "gw") : NULL);
    th_expect_close_scaled(c, tg_tensor_grad(q), th_golden_get(f, c, "dq"), rtol);
    if (!g.self) {
        th_expect_close_scaled(c, tg_tensor_grad(k), th_golden_get(f, c, "dk"), rtol);
        th_expect_close_scaled(c, tg_tensor_grad(v), th_golden_get(f, c, "dv"), rtol);
    }
    if (dkpm) th_expect_close_scaled(c, tg_tensor_grad(fo.key_padding_mask), dkpm, rtol);
    char name[TG_MODULE_NAME_MAX];
    for (int j = 0; j < tg_module_state_count(m); j++) {
        tg_tensor *p = NULL;
        OK(tg_module_state_at(m, j, name, sizeof name, &p, NULL));
        snprintf(key, sizeof key, "dp.%s", name);
        cr_assert_not_null(tg_tensor_grad(p), "%s: %s has no gradient", c, name);
        th_expect_close_scaled(c, tg_tensor_grad(p), th_golden_get(f, c, key), rtol);
    }
    counts[f64]++;
    counts[2] += fo.attn_mask != NULL;
    counts[3] += fo.key_padding_mask != NULL;
    counts[4] += kpm && tg_tensor_dtype(kpm) != TG_U8;
    counts[5] += dkpm != NULL;
    th_release_all(6, (tg_tensor *[]){q, k, v, y, w, fo.key_padding_mask});
    tg_module_release(m);
}

Test(attention, every_case_matches_torch)
{
    tg_st_file *f = th_golden_load("attention.safetensors");
    const int n = atoi(tg_st_meta_get(f, "cases"));
    /* f32, f64, with attn_mask, with key_padding_mask, a float one, its gradient */
    int counts[6] = {0};
    for (int i = 0; i < n; i++) compare_case(f, i, counts);
    cr_assert(counts[0] >= 22 && counts[1] >= 22, "%d f32, %d f64 cases", counts[0], counts[1]);
    cr_assert(counts[2] >= 24 && counts[3] >= 28, "%d, %d masked", counts[2], counts[3]);
    cr_assert(counts[4] >= 12 && counts[5] >= 8, "%d float kpm, %d with dkpm", counts[4],
              counts[5]);
    tg_st_free(f);
}

/* tg_module_forward_n with (q, k, v) gives the forward's output. */
Test(attention, forward_n_is_the_forward_without_masks)
{
    tg_st_file *f = th_golden_load("attention.safetensors");
    const golden_cfg g = cfg_of(th_golden_meta(f, "case2", "cfg"));
    tg_module *m = golden_module(f, "case2", &g, TG_F32);
    tg_tensor *qkv[3] = {(tg_tensor *)th_golden_get(f, "case2", "q"),
                         (tg_tensor *)th_golden_get(f, "case2", "k"),
                         (tg_tensor *)th_golden_get(f, "case2", "v")};
    tg_tensor *y = NULL, *want = NULL;
    OK(tg_module_forward_n(m, &y, 3, qkv));
    OK(tg_nn_multihead_attention_forward(m, &want, NULL, qkv[0], qkv[1], qkv[2], NULL));
    th_expect_same_bits("forward_n", qkv[0], y, want);
    th_expect_close_scaled("torch", y, th_golden_get(f, "case2", "y"), 3e-5);
    tg_tensor *y1 = NULL;
    th_expect_refused(tg_module_forward(m, &y1, qkv[0]), TG_EINVAL, "takes 3 inputs", y1);
    th_release_all(2, (tg_tensor *[]){y, want});
    tg_module_release(m);
    tg_st_free(f);
}

/* ---- the functional form ---- */

typedef struct sdpa_user {
    tg_tensor *mask;
    bool want_weights;
} sdpa_user;

/* out, or with want_weights out + sum(w^2, -1) (so that the weights'
 * derivatives are checked too). */
static int sdpa_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    const sdpa_user *u = user;
    tg_attention_opts o = TG_ATTENTION_OPTS_INIT;
    o.attn_mask = u->mask;
    tg_tensor *y = NULL, *w = NULL;
    int rc = tg_scaled_dot_product_attention(&y, u->want_weights ? &w : NULL, in[0], in[1],
                                             in[2], &o);
    if (rc < 0 || !u->want_weights) {
        if (rc >= 0) *out = y;
        return rc;
    }
    tg_tensor *ww = NULL, *s = NULL;
    rc = tg_mul(&ww, w, w);
    if (rc >= 0) rc = tg_sum_dims(&s, ww, 1, (int[]){-1}, true);   /* (..., L, 1) */
    if (rc >= 0) rc = tg_add(out, y, s);
    th_release_all(4, (tg_tensor *[]){y, w, ww, s});
    return rc;
}

/* First and second derivatives by finite differences in f64: 3-d and 4-d
 * inputs, no mask, a float mask (broadcast over the batch) and a u8 one. */
Test(attention, functional_gradcheck_and_gradgradcheck)
{
    uint64_t s = 11;
    const int64_t q3[3] = {2, 3, 4}, k3[3] = {2, 5, 4}, v3[3] = {2, 5, 3};
    const int64_t q4[4] = {2, 2, 3, 4}, k4[4] = {2, 2, 5, 4}, v4[4] = {2, 2, 5, 3};
    tg_tensor *fm = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){3, 5}, -1, 1);
    tg_tensor *bm = th_tensor_from(TG_U8, 3, (int64_t[]){2, 1, 5},
                                   (double[]){0, 1, 0, 0, 1, 1, 0, 0, 1, 0});
    for (int c = 0; c < 4; c++) {
        const bool four = c >= 2;
        tg_tensor *in[3] = {th_rand_tensor(&s, TG_F64, four ? 4 : 3, four ? q4 : q3, -1, 1),
                            th_rand_tensor(&s, TG_F64, four ? 4 : 3, four ? k4 : k3, -1, 1),
                            th_rand_tensor(&s, TG_F64, four ? 4 : 3, four ? v4 : v3, -1, 1)};
        for (int i = 0; i < 3; i++) OK(tg_tensor_set_requires_grad(in[i], true));
        sdpa_user u = {.mask = c == 1 ? fm : c == 3 ? bm : NULL, .want_weights = c % 2 == 1};
        th_expect_gradchecks(sdpa_fn, &u, 3, in, "case %d", c);
        th_release_all(3, in);
    }
    th_release_all(2, (tg_tensor *[]){fm, bm});
}

/* A u8 mask is the float mask of -inf and 0; (B, H, L, E) inputs give the
 * (B*H, L, E) results in their shape; the weights' rows sum to 1. */
Test(attention, functional_masks_and_ranks_agree)
{
    uint64_t s = 5;
    tg_tensor *q = th_rand_tensor(&s, TG_F64, 4, (int64_t[]){2, 3, 4, 5}, -1, 1);
    tg_tensor *k = th_rand_tensor(&s, TG_F64, 4, (int64_t[]){2, 3, 6, 5}, -1, 1);
    tg_tensor *v = th_rand_tensor(&s, TG_F64, 4, (int64_t[]){2, 3, 6, 2}, -1, 1);
    double mv[24], fv[24];
    for (int i = 0; i < 24; i++) {
        mv[i] = (i % 6 != 0) && (i * 7 % 5 == 1);
        fv[i] = mv[i] ? -INFINITY : 0.0;
    }
    tg_tensor *bm = th_tensor_from(TG_U8, 2, (int64_t[]){4, 6}, mv);
    tg_tensor *fm = th_tensor_from(TG_F64, 2, (int64_t[]){4, 6}, fv);
    tg_attention_opts o = TG_ATTENTION_OPTS_INIT;
    tg_tensor *yb = NULL, *wb = NULL, *yf = NULL, *wf = NULL;
    o.attn_mask = bm;
    OK(tg_scaled_dot_product_attention(&yb, &wb, q, k, v, &o));
    o.attn_mask = fm;
    OK(tg_scaled_dot_product_attention(&yf, &wf, q, k, v, &o));
    th_expect_shape(yb, 4, (int64_t[]){2, 3, 4, 2});
    th_expect_shape(wb, 4, (int64_t[]){2, 3, 4, 6});
    th_expect_same_bits("y", q, yb, yf);
    th_expect_same_bits("w", q, wb, wf);
    for (int64_t r = 0; r < 24; r++) {
        double sum = 0;
        for (int j = 0; j < 6; j++) {
            sum += th_at(wb, r * 6 + j);
            if (mv[(r % 4) * 6 + j]) cr_assert(eq(dbl, th_at(wb, r * 6 + j), 0.0));
        }
        cr_assert(fabs(sum - 1.0) < 1e-12, "row %lld sums to %g", (long long)r, sum);
    }
    tg_tensor *q3 = NULL, *k3 = NULL, *v3 = NULL, *y3 = NULL, *y3b = NULL;
    OK(tg_reshape(&q3, q, 3, (int64_t[]){6, 4, 5}));
    OK(tg_reshape(&k3, k, 3, (int64_t[]){6, 6, 5}));
    OK(tg_reshape(&v3, v, 3, (int64_t[]){6, 6, 2}));
    OK(tg_scaled_dot_product_attention(&y3, NULL, q3, k3, v3, &o));
    OK(tg_reshape(&y3b, y3, 4, (int64_t[]){2, 3, 4, 2}));
    th_expect_same_bits("3-d", q, y3b, yf);
    th_release_all(14, (tg_tensor *[]){q, k, v, bm, fm, yb, wb, yf, wf, q3, k3, v3, y3, y3b});
}

/* Dropout on the weights: in training each weight is 0 or scaled by
 * 1 / (1 - p), the output is the dropped weights times v; not training,
 * or p = 0, none. */
Test(attention, functional_dropout_in_training_only)
{
    uint64_t s = 8;
    tg_tensor *q = th_rand_tensor(&s, TG_F64, 3, (int64_t[]){2, 4, 3}, -1, 1);
    tg_tensor *k = th_rand_tensor(&s, TG_F64, 3, (int64_t[]){2, 6, 3}, -1, 1);
    tg_tensor *v = th_rand_tensor(&s, TG_F64, 3, (int64_t[]){2, 6, 3}, -1, 1);
    tg_rng rng;
    tg_rng_init(&rng, 4);
    tg_attention_opts o = {.dropout_p = 0.5, .training = true, .rng = &rng};
    tg_tensor *y = NULL, *w = NULL, *y0 = NULL, *w0 = NULL, *ye = NULL, *we = NULL, *yw = NULL;
    OK(tg_scaled_dot_product_attention(&y, &w, q, k, v, &o));
    OK(tg_scaled_dot_product_attention(&y0, &w0, q, k, v, NULL));
    o.training = false;
    OK(tg_scaled_dot_product_attention(&ye, &we, q, k, v, &o));
    th_expect_same_bits("eval", q, we, w0);
    th_expect_same_bits("eval", q, ye, y0);
    int zeros = 0;
    for (int64_t i = 0; i < tg_tensor_numel(w); i++) {
        const double a = th_at(w, i), b = th_at(w0, i);
        zeros += a == 0.0;
        cr_assert(a == 0.0 || fabs(a - 2 * b) < 1e-15, "%lld: %g against %g", (long long)i, a, b);
    }
    cr_assert(zeros > 5 && zeros < 43, "%d of 48 dropped", zeros);
    OK(tg_matmul(&yw, w, v));
    th_expect_close("a @ v", y, yw, 1e-14);
    th_release_all(10, (tg_tensor *[]){q, k, v, y, w, y0, w0, ye, we, yw});
}

/* ---- the module ---- */

static tg_module *small_module(const tg_nn_multihead_attention_opts *o, uint64_t seed)
{
    tg_rng rng;
    tg_rng_init(&rng, seed);
    tg_module *m = NULL;
    OK(tg_nn_multihead_attention_new(&m, 4, 2, o, &rng));
    OK(tg_module_to_dtype(m, TG_F64));
    return m;
}

typedef struct mha_user {
    tg_module *m;
    tg_nn_mha_forward_opts fo;
} mha_user;

/* out + the mean of the weights squared (n = 3 + the parameters: those are
 * the module's own tensors, which gradcheck perturbs in place). */
static int mha_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    mha_user *u = user;
    tg_tensor *y = NULL, *w = NULL, *ww = NULL, *s = NULL;
    int rc = tg_nn_multihead_attention_forward(u->m, &y, &w, in[0], in[1], in[2], &u->fo);
    if (rc >= 0) rc = tg_mul(&ww, w, w);
    if (rc >= 0) rc = tg_mean(&s, ww);
    if (rc >= 0) rc = tg_add(out, y, s);
    th_release_all(4, (tg_tensor *[]){y, w, ww, s});
    return rc;
}

/* First derivatives of the module by finite differences in f64, in the
 * inputs and every parameter, and second ones in the inputs and the first
 * parameters (in_proj_weight or q/k/v_proj_weight, ...): cross-attention with kdim and vdim,
 * add_bias_kv and add_zero_attn, both masks, batch_first; and unbatched
 * self-attention with per-head weights. */
Test(attention, module_gradcheck_and_gradgradcheck)
{
    for (int c = 0; c < 2; c++) {
        tg_nn_multihead_attention_opts o = TG_NN_MULTIHEAD_ATTENTION_OPTS_INIT;
        if (c == 0) {
            o.kdim = 3;
            o.vdim = 5;
            o.add_bias_kv = o.add_zero_attn = o.batch_first = true;
        }
        tg_module *m = small_module(&o, 3 + (uint64_t)c);
        tg_tensor *all[16] = {NULL};
        uint64_t s = 21;
        int64_t qs[3] = {2, 3, 4}, ks[3] = {2, 2, 3}, vs[3] = {2, 2, 5};
        if (c == 1) {   /* unbatched (L, E): only qs is read */
            qs[0] = 3;
            qs[1] = 4;
        }
        all[0] = th_rand_tensor(&s, TG_F64, 3 - c, qs, -1, 1);
        all[1] = c ? tg_tensor_retain(all[0]) : th_rand_tensor(&s, TG_F64, 3, ks, -1, 1);
        all[2] = c ? tg_tensor_retain(all[0]) : th_rand_tensor(&s, TG_F64, 3, vs, -1, 1);
        for (int i = 0; i < 3; i++) OK(tg_tensor_set_requires_grad(all[i], true));
        tg_tensor **params = NULL;
        int np = 0;
        OK(tg_module_parameters(m, &params, &np));
        cr_assert(eq(int, np, c ? 4 : 8));
        for (int i = 0; i < np; i++) all[3 + i] = tg_tensor_retain(params[i]);
        free(params);
        mha_user u = {.m = m, .fo = TG_NN_MHA_FORWARD_OPTS_INIT};
        tg_tensor *kpm = th_tensor_from(TG_U8, 2, (int64_t[]){2, 2}, (double[]){0, 1, 0, 0});
        tg_tensor *am = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){3, 2}, -1, 1);
        if (c == 0) {
            u.fo.key_padding_mask = kpm;
            u.fo.attn_mask = am;
        } else {
            u.fo.average_attn_weights = false;
        }
        const int n = 3 + np;
        tg_gradcheck_opts go = TG_GRADCHECK_OPTS_INIT;
        cr_assert(eq(int, tg_gradcheck(mha_fn, &u, n, all, &go), TG_OK), "case %d: %s", c,
                  tg_error_message());
        /* gradgradcheck takes 8 inputs: q, k, v and the first parameters */
        cr_assert(eq(int, tg_gradgradcheck(mha_fn, &u, n < 8 ? n : 8, all, &go), TG_OK),
                  "case %d: %s", c, tg_error_message());
        th_release_all(n, all);
        th_release_all(2, (tg_tensor *[]){kpm, am});
        tg_module_release(m);
    }
}

/* out + the mean of the weights squared, with in[3] the float
 * key_padding_mask (n = 4). */
static int mha_kpm_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    mha_user *u = user;
    u->fo.key_padding_mask = in[n - 1];
    return mha_fn(out, n, in, user);
}

/* A float key_padding_mask is added to the scores: first and second
 * derivatives by finite differences in f64 in q, k, v and the mask itself,
 * cross-attention with kdim, vdim, add_bias_kv and add_zero_attn. */
Test(attention, float_key_padding_mask_gradcheck_and_gradgradcheck)
{
    tg_nn_multihead_attention_opts o = TG_NN_MULTIHEAD_ATTENTION_OPTS_INIT;
    o.kdim = 3;
    o.vdim = 5;
    o.add_bias_kv = o.add_zero_attn = true;
    tg_module *m = small_module(&o, 7);
    uint64_t s = 23;
    tg_tensor *in[4] = {th_rand_tensor(&s, TG_F64, 3, (int64_t[]){3, 2, 4}, -1, 1),
                        th_rand_tensor(&s, TG_F64, 3, (int64_t[]){4, 2, 3}, -1, 1),
                        th_rand_tensor(&s, TG_F64, 3, (int64_t[]){4, 2, 5}, -1, 1),
                        th_rand_tensor(&s, TG_F64, 2, (int64_t[]){2, 4}, -2, 2)};
    for (int i = 0; i < 4; i++) OK(tg_tensor_set_requires_grad(in[i], true));
    mha_user u = {.m = m, .fo = TG_NN_MHA_FORWARD_OPTS_INIT};
    tg_gradcheck_opts go = TG_GRADCHECK_OPTS_INIT;
    cr_assert(eq(int, tg_gradcheck(mha_kpm_fn, &u, 4, in, &go), TG_OK), "%s",
              tg_error_message());
    cr_assert(eq(int, tg_gradgradcheck(mha_kpm_fn, &u, 4, in, &go), TG_OK), "%s",
              tg_error_message());
    th_release_all(4, in);
    tg_module_release(m);
}

/* The forward's output with the masks kpm and am (either may be NULL). */
static tg_tensor *masked_out(tg_module *m, tg_tensor *q, tg_tensor *kpm, tg_tensor *am)
{
    tg_nn_mha_forward_opts fo = TG_NN_MHA_FORWARD_OPTS_INIT;
    fo.key_padding_mask = kpm;
    fo.attn_mask = am;
    tg_tensor *y = NULL;
    OK(tg_nn_multihead_attention_forward(m, &y, NULL, q, q, q, &fo));
    return y;
}

/* How a float key_padding_mask merges with the attn_mask (N = 2, H = 2,
 * L = S = 3): alone, -inf and 0 in it give what the u8 mask of its -inf
 * gives; beside a u8 attn_mask it masks where nonzero, as torch 1.13's
 * logical_or; beside a float attn_mask the two are added (torch 2's
 * merge), as one (N*H, L, S) attn_mask of their sums. */
Test(attention, float_key_padding_mask_merges_as_torch)
{
    tg_module *m = small_module(NULL, 9);
    uint64_t s = 31;
    tg_tensor *q = th_rand_tensor(&s, TG_F64, 3, (int64_t[]){3, 2, 4}, -1, 1);
    const double inf = INFINITY, kv[6] = {0, -inf, 0, 0.0, 0.0, -inf};
    const double kv2[6] = {0, 0.5, 0, -1.5, 0.0, 0.0};
    tg_tensor *kf = th_tensor_from(TG_F64, 2, (int64_t[]){2, 3}, kv);
    tg_tensor *ku = th_tensor_from(TG_U8, 2, (int64_t[]){2, 3}, (double[6]){0, 1, 0, 0, 0, 1});
    tg_tensor *kf2 = th_tensor_from(TG_F64, 2, (int64_t[]){2, 3}, kv2);
    tg_tensor *ku2 = th_tensor_from(TG_U8, 2, (int64_t[]){2, 3}, (double[6]){0, 1, 0, 1, 0, 0});
    tg_tensor *amu = th_tensor_from(TG_U8, 2, (int64_t[]){3, 3},
                                    (double[9]){0, 0, 1, 0, 0, 0, 1, 0, 0});
    tg_tensor *amf = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){3, 3}, -1, 1);
    double sum[4 * 9];   /* (N*H, L, S): amf[l][s] + kf2[n][s] at row n*H + h */
    for (int r = 0; r < 4; r++)
        for (int l = 0; l < 3; l++)
            for (int c = 0; c < 3; c++)
                sum[(r * 3 + l) * 3 + c] = th_at(amf, l * 3 + c) + kv2[(r / 2) * 3 + c];
    tg_tensor *am3 = th_tensor_from(TG_F64, 3, (int64_t[]){4, 3, 3}, sum);
    tg_tensor *y[8] = {masked_out(m, q, kf, NULL), masked_out(m, q, ku, NULL),
                       masked_out(m, q, kf2, amu), masked_out(m, q, ku2, amu),
                       masked_out(m, q, kf2, amf), masked_out(m, q, NULL, am3),
                       masked_out(m, q, kf2, NULL), masked_out(m, q, NULL, NULL)};
    th_expect_same_bits("-inf and 0 as the u8 mask", q, y[0], y[1]);
    th_expect_same_bits("or-ed with a u8 attn_mask", q, y[2], y[3]);
    th_expect_close("added to a float attn_mask", y[4], y[5], 1e-14);
    const bool unchanged = th_same_bits(y[6], y[7]);
    cr_assert(unchanged == false, "a finite float mask changes the output");
    th_release_all(8, y);
    th_release_all(8, (tg_tensor *[]){q, kf, ku, kf2, ku2, amu, amf, am3});
    tg_module_release(m);
}

/* torch's parameters, shapes and initialisation laws: xavier_uniform_ for
 * the projections (|w| <= sqrt(6 / (fan_in + fan_out))), zero biases,
 * out_proj.weight U(-1/sqrt(E), 1/sqrt(E)), bias_k and bias_v drawn; a
 * state dict written by one module loads into another (strict). */
Test(attention, parameters_init_and_state_dict_round_trip)
{
    tg_rng rng;
    tg_rng_init(&rng, 9);
    tg_nn_multihead_attention_opts o = TG_NN_MULTIHEAD_ATTENTION_OPTS_INIT;
    o.kdim = 6;
    o.add_bias_kv = true;
    tg_module *m = NULL, *m2 = NULL;
    OK(tg_nn_multihead_attention_new(&m, 8, 4, &o, &rng));
    cr_assert(eq(str, (char *)tg_module_type_name(m), "MultiheadAttention"));
    th_expect_state_keys(m, "q_proj_weight,k_proj_weight,v_proj_weight,in_proj_bias,bias_k,bias_v,"
                            "out_proj.weight,out_proj.bias");
    th_expect_shape(tg_module_find(m, "k_proj_weight"), 2, (int64_t[]){8, 6});
    th_expect_shape(tg_module_find(m, "v_proj_weight"), 2, (int64_t[]){8, 8});
    th_expect_shape(tg_module_find(m, "bias_k"), 3, (int64_t[]){1, 1, 8});
    const struct { const char *name; double bound; } laws[] = {
        {"q_proj_weight", sqrt(6.0 / 16)}, {"k_proj_weight", sqrt(6.0 / 14)},
        {"out_proj.weight", 1 / sqrt(8.0)}, {"in_proj_bias", 0}, {"out_proj.bias", 0}};
    for (size_t i = 0; i < sizeof laws / sizeof *laws; i++) {
        const tg_tensor *t = tg_module_find(m, laws[i].name);
        double mx = 0;
        for (int64_t j = 0; j < tg_tensor_numel(t); j++) mx = fmax(mx, fabs(th_at(t, j)));
        cr_assert(mx <= laws[i].bound && mx >= 0.7 * laws[i].bound, "%s: max %g, bound %g",
                  laws[i].name, mx, laws[i].bound);
    }
    cr_assert(th_at(tg_module_find(m, "bias_k"), 0) != 0.0);
    int64_t e = 0, h = 0;
    tg_nn_multihead_attention_opts got;
    OK(tg_nn_multihead_attention_params(m, &e, &h, &got));
    cr_assert(e == 8 && h == 4 && got.kdim == 6 && got.vdim == 8 && got.add_bias_kv);
    tg_module *packed = NULL;
    OK(tg_nn_multihead_attention_new(&packed, 6, 3, NULL, &rng));
    th_expect_state_keys(packed, "in_proj_weight,in_proj_bias,out_proj.weight,out_proj.bias");
    th_expect_shape(tg_module_find(packed, "in_proj_weight"), 2, (int64_t[]){18, 6});
    tg_module_release(packed);

    tg_st_file *f = NULL;
    OK(tg_st_new(&f));
    OK(tg_module_state_dict_save(m, f, "attn"));
    OK(tg_nn_multihead_attention_new(&m2, 8, 4, &o, &rng));
    OK(tg_module_load_state_dict(m2, f, "attn", true));
    th_expect_state(m2, f, "attn", 0);
    uint64_t s = 2;
    tg_tensor *q = th_rand_tensor(&s, TG_F32, 3, (int64_t[]){3, 2, 8}, -1, 1);
    tg_tensor *k = th_rand_tensor(&s, TG_F32, 3, (int64_t[]){4, 2, 6}, -1, 1);
    tg_tensor *v = th_rand_tensor(&s, TG_F32, 3, (int64_t[]){4, 2, 8}, -1, 1);
    tg_tensor *y = NULL, *y2 = NULL;
    OK(tg_nn_multihead_attention_forward(m, &y, NULL, q, k, v, NULL));
    OK(tg_nn_multihead_attention_forward(m2, &y2, NULL, q, k, v, NULL));
    th_expect_same_bits("loaded", q, y2, y);
    th_expect_shape(y, 3, (int64_t[]){3, 2, 8});
    th_release_all(5, (tg_tensor *[]){q, k, v, y, y2});
    tg_st_free(f);
    tg_module_release(m);
    tg_module_release(m2);
}

/* The attention dropout: in training the weights are dropped (0 or scaled
 * by 1 / (1 - p)) and the k-th mask depends on (seed, k) only, so a copy
 * of the module repeats it; in eval there is none. */
Test(attention, module_dropout_follows_train_and_eval)
{
    tg_nn_multihead_attention_opts o = TG_NN_MULTIHEAD_ATTENTION_OPTS_INIT;
    o.dropout = 0.5;
    o.seed = 77;
    tg_module *m = small_module(&o, 5), *c = NULL;
    OK(tg_module_copy(&c, m));
    uint64_t s = 6;
    tg_tensor *x = th_rand_tensor(&s, TG_F64, 3, (int64_t[]){5, 2, 4}, -1, 1);
    tg_nn_mha_forward_opts fo = TG_NN_MHA_FORWARD_OPTS_INIT;
    fo.average_attn_weights = false;
    tg_tensor *y1 = NULL, *w1 = NULL, *y2 = NULL, *w2 = NULL, *yc = NULL, *wc = NULL;
    tg_tensor *ye = NULL, *we = NULL;
    OK(tg_nn_multihead_attention_forward(m, &y1, &w1, x, x, x, &fo));
    OK(tg_nn_multihead_attention_forward(m, &y2, &w2, x, x, x, &fo));
    OK(tg_nn_multihead_attention_forward(c, &yc, &wc, x, x, x, &fo));
    th_expect_same_bits("copy", x, wc, w1);
    th_expect_same_bits("copy", x, yc, y1);
    cr_assert(th_same_bits(w1, w2) == false, "the second forward draws another mask");
    tg_module_train(m, false);
    OK(tg_nn_multihead_attention_forward(m, &ye, &we, x, x, x, &fo));
    int zeros = 0;
    for (int64_t i = 0; i < tg_tensor_numel(we); i++) {
        const double a = th_at(w1, i), b = th_at(we, i);
        zeros += a == 0.0;
        cr_assert(a == 0.0 || fabs(a - 2 * b) < 1e-14, "%lld: %g against %g", (long long)i, a, b);
    }
    cr_assert(zeros > 10 && zeros < 90, "%d of 100 dropped", zeros);
    for (int64_t r = 0; r < 20; r++) {
        double sum = 0;
        for (int j = 0; j < 5; j++) sum += th_at(we, r * 5 + j);
        cr_assert(fabs(sum - 1) < 1e-12, "eval row %lld sums to %g", (long long)r, sum);
    }
    th_release_all(9, (tg_tensor *[]){x, y1, w1, y2, w2, yc, wc, ye, we});
    tg_module_release(m);
    tg_module_release(c);
}

/* Each refusal names the argument and the rule and leaves the outputs
 * NULL (the weights too). */
static void expect_forward_refused(int line, tg_module *m, tg_tensor *q, tg_tensor *k,
                                   tg_tensor *v, const tg_nn_mha_forward_opts *fo, int status,
                                   const char *words)
{
    tg_tensor *y = NULL, *w = NULL;
    th_refused_at(line, tg_nn_multihead_attention_forward(m, &y, &w, q, k, v, fo), status,
                  words, y);
    cr_assert_null(w, "line %d: weights were written", line);
}
#define FWD_REFUSED(q, k, v, fo, status, words) \
    expect_forward_refused(__LINE__, m, q, k, v, fo, status, words)

Test(attention, module_refusals_name_the_argument)
{
    tg_rng rng;
    tg_rng_init(&rng, 1);
    tg_module *m = NULL, *bad = NULL;
    tg_nn_multihead_attention_opts o = TG_NN_MULTIHEAD_ATTENTION_OPTS_INIT;
    th_expect_refused(tg_nn_multihead_attention_new(&bad, 10, 3, NULL, &rng), TG_EINVAL,
                      "embed_dim=10 must be divisible by num_heads=3", NULL);
    th_expect_refused(tg_nn_multihead_attention_new(&bad, 0, 1, NULL, &rng), TG_EINVAL,
                      "must be >= 1", NULL);
    o.dropout = 1.5;
    th_expect_refused(tg_nn_multihead_attention_new(&bad, 4, 2, &o, &rng), TG_EINVAL,
                      "dropout=1.5 must be in [0, 1]", NULL);
    o = (tg_nn_multihead_attention_opts)TG_NN_MULTIHEAD_ATTENTION_OPTS_INIT;
    o.kdim = -2;
    th_expect_refused(tg_nn_multihead_attention_new(&bad, 4, 2, &o, &rng), TG_EINVAL,
                      "kdim=-2", NULL);
    th_expect_refused(tg_nn_multihead_attention_new(&bad, 4, 2, NULL, NULL), TG_EINVAL,
                      "rng must not be NULL", NULL);
    cr_assert_null(bad);

    o = (tg_nn_multihead_attention_opts)TG_NN_MULTIHEAD_ATTENTION_OPTS_INIT;
    o.vdim = 3;
    OK(tg_nn_multihead_attention_new(&m, 4, 2, &o, &rng));
    uint64_t s = 4;
    tg_tensor *q = th_rand_tensor(&s, TG_F32, 3, (int64_t[]){3, 2, 4}, -1, 1);
    tg_tensor *k = th_rand_tensor(&s, TG_F32, 3, (int64_t[]){5, 2, 4}, -1, 1);
    tg_tensor *v = th_rand_tensor(&s, TG_F32, 3, (int64_t[]){5, 2, 3}, -1, 1);
    tg_tensor *v4 = th_rand_tensor(&s, TG_F32, 3, (int64_t[]){5, 2, 4}, -1, 1);
    tg_tensor *v6 = th_rand_tensor(&s, TG_F32, 3, (int64_t[]){6, 2, 3}, -1, 1);
    tg_tensor *k1 = th_rand_tensor(&s, TG_F32, 3, (int64_t[]){5, 1, 4}, -1, 1);
    tg_tensor *q2 = th_rand_tensor(&s, TG_F32, 2, (int64_t[]){3, 4}, -1, 1);
    tg_tensor *q4 = th_rand_tensor(&s, TG_F32, 4, (int64_t[]){1, 3, 2, 4}, -1, 1);
    tg_tensor *q5 = th_rand_tensor(&s, TG_F32, 3, (int64_t[]){3, 2, 5}, -1, 1);
    tg_tensor *qd = NULL;
    OK(tg_tensor_to_dtype(&qd, q, TG_F64));
    FWD_REFUSED(q, k, v4, NULL, TG_ESHAPE, "value (5, 2, 4) must have vdim=3 features");
    FWD_REFUSED(q5, k, v, NULL, TG_ESHAPE, "query (3, 2, 5) must have embed_dim=4 features");
    FWD_REFUSED(q, k, v6, NULL, TG_ESHAPE, "must have one length S");
    FWD_REFUSED(q, k1, v, NULL, TG_ESHAPE, "must have one batch size");
    FWD_REFUSED(q2, k, v, NULL, TG_ESHAPE, "key (5, 2, 4) and value (5, 2, 3) must be 2-d");
    FWD_REFUSED(q4, k, v, NULL, TG_ESHAPE, "must be 3-d (batched) or 2-d (unbatched)");
    FWD_REFUSED(qd, k, v, NULL, TG_EDTYPE, "must be the parameters' f32");
    tg_nn_mha_forward_opts fo = TG_NN_MHA_FORWARD_OPTS_INIT;
    tg_tensor *kpm_f = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){2, 5}, 0, 1);
    tg_tensor *kpm_s = th_tensor_from(TG_U8, 2, (int64_t[]){5, 2}, (double[10]){0});
    tg_tensor *am_1 = th_tensor_from(TG_U8, 1, (int64_t[]){5}, (double[5]){0});
    tg_tensor *am_3 = th_rand_tensor(&s, TG_F32, 3, (int64_t[]){2, 3, 5}, 0, 1);
    tg_tensor *am_i = th_tensor_from(TG_I32, 2, (int64_t[]){3, 5}, (double[15]){0});
    fo.key_padding_mask = kpm_f;
    FWD_REFUSED(q, k, v, &fo, TG_EDTYPE,
                "key_padding_mask is f64; it must be u8 (torch's bool) or the query's dtype f32");
    fo.key_padding_mask = am_i;
    FWD_REFUSED(q, k, v, &fo, TG_EDTYPE, "key_padding_mask is i32; it must be u8");
    fo.key_padding_mask = kpm_s;
    FWD_REFUSED(q, k, v, &fo, TG_ESHAPE, "key_padding_mask is (5, 2); it must be (N, S)");
    fo.key_padding_mask = NULL;
    fo.attn_mask = am_1;
    FWD_REFUSED(q, k, v, &fo, TG_ESHAPE, "attn_mask is (5); it must be (L, S) = (3, 5) or");
    fo.attn_mask = am_3;
    FWD_REFUSED(q, k, v, &fo, TG_ESHAPE, "(N*num_heads, L, S) = (4, 3, 5)");
    fo.attn_mask = am_i;
    FWD_REFUSED(q, k, v, &fo, TG_EDTYPE, "attn_mask is i32; it must be u8");
    FWD_REFUSED(NULL, k, v, NULL, TG_EINVAL, "must not be NULL");
    tg_module *lin = NULL;
    OK(tg_nn_linear_new(&lin, 4, 4, true, &rng));
    tg_tensor *y = NULL;
    th_expect_refused(tg_nn_multihead_attention_forward(lin, &y, NULL, q, k, v, NULL),
                      TG_EINVAL, "m is a Linear module, not MultiheadAttention", y);
    th_expect_refused(tg_nn_multihead_attention_forward(m, &y, &y, q, k, v, NULL), TG_EINVAL,
                      "out and weights must be two different places", y);
    th_expect_refused(tg_nn_multihead_attention_params(lin, NULL, NULL, NULL), TG_EINVAL,
                      "not MultiheadAttention", NULL);
    tg_module_release(lin);
    th_release_all(15, (tg_tensor *[]){q, k, v, v4, v6, k1, q2, q4, q5, qd, kpm_f, kpm_s, am_1,
                                       am_3, am_i});
    tg_module_release(m);
}

Test(attention, functional_refusals_name_the_argument)
{
    uint64_t s = 3;
    tg_tensor *q = th_rand_tensor(&s, TG_F32, 3, (int64_t[]){2, 3, 4}, -1, 1);
    tg_tensor *k = th_rand_tensor(&s, TG_F32, 3, (int64_t[]){2, 5, 4}, -1, 1);
    tg_tensor *v = th_rand_tensor(&s, TG_F32, 3, (int64_t[]){2, 5, 6}, -1, 1);
    tg_tensor *k3 = th_rand_tensor(&s, TG_F32, 3, (int64_t[]){2, 5, 3}, -1, 1);
    tg_tensor *v4 = th_rand_tensor(&s, TG_F32, 3, (int64_t[]){2, 4, 6}, -1, 1);
    tg_tensor *kb = th_rand_tensor(&s, TG_F32, 3, (int64_t[]){3, 5, 4}, -1, 1);
    tg_tensor *m35 = th_rand_tensor(&s, TG_F32, 2, (int64_t[]){3, 4}, -1, 1);
    tg_tensor *m64 = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){3, 5}, -1, 1);
    tg_tensor *q1 = th_rand_tensor(&s, TG_F32, 1, (int64_t[]){4}, -1, 1);
    tg_tensor *qi = NULL, *y = NULL, *w = NULL;
    OK(tg_tensor_to_dtype(&qi, q, TG_I32));
    tg_attention_opts o = TG_ATTENTION_OPTS_INIT;
#define SDPA_REFUSED(qq, kk, vv, oo, status, words)                                        \
    do {                                                                                     \
        th_expect_refused(tg_scaled_dot_product_attention(&y, &w, qq, kk, vv, oo), status,   \
                          words, y);                                                         \
        cr_assert_null(w);                                                                   \
    } while (0)
    SDPA_REFUSED(q, k3, v, NULL, TG_ESHAPE, "must have q (2, 3, 4)'s features E=4");
    SDPA_REFUSED(q, k, v4, NULL, TG_ESHAPE, "must have k (2, 5, 4)'s length S=5");
    SDPA_REFUSED(q, kb, v, NULL, TG_ESHAPE, "must have the same leading dims");
    SDPA_REFUSED(q1, q1, q1, NULL, TG_ESHAPE, "must have one rank, 2, 3 or 4");
    SDPA_REFUSED(qi, k, v, NULL, TG_EDTYPE, "must be of one float dtype");
    SDPA_REFUSED(NULL, k, v, NULL, TG_EINVAL, "q, k and v must not be NULL");
    th_expect_refused(tg_scaled_dot_product_attention(&y, &y, q, k, v, NULL), TG_EINVAL,
                      "out and weights must be two different places", y);
    o.attn_mask = m35;
    SDPA_REFUSED(q, k, v, &o, TG_ESHAPE, "attn_mask (3, 4) must broadcast to the scores' shape "
                                         "(2, 3, 5)");
    o.attn_mask = m64;
    SDPA_REFUSED(q, k, v, &o, TG_EDTYPE, "attn_mask is f64; it must be u8");
    o.attn_mask = NULL;
    o.dropout_p = -0.1;
    SDPA_REFUSED(q, k, v, &o, TG_EINVAL, "dropout_p=-0.1 must be in [0, 1]");
    o.dropout_p = 0.1;
    o.training = true;
    SDPA_REFUSED(q, k, v, &o, TG_EINVAL, "rng must not be NULL");
    cr_assert(eq(int, tg_scaled_dot_product_attention(NULL, NULL, q, k, v, NULL), TG_EINVAL));
#undef SDPA_REFUSED
    th_release_all(10, (tg_tensor *[]){q, k, v, k3, v4, kb, m35, m64, q1, qi});
}

/* The ONNX exporter has no form for attention: it refuses the module by
 * name, inside a Sequential too. */
Test(attention, onnx_export_refuses_the_module)
{
    tg_rng rng;
    tg_rng_init(&rng, 1);
    tg_module *m = NULL, *seq = NULL;
    OK(tg_nn_multihead_attention_new(&m, 4, 2, NULL, &rng));
    OK(tg_nn_sequential_new(&seq));
    OK(tg_nn_sequential_append(seq, tg_module_retain(m)));
    uint64_t s = 1;
    tg_tensor *x = th_rand_tensor(&s, TG_F32, 3, (int64_t[]){3, 2, 4}, -1, 1);
    th_tmp_dir_make("attention_onnx");
    char path[512];
    th_tmp_path(path, sizeof path, "mha.onnx");
    if (tg_onnx_available()) {
        th_expect_refused(tg_onnx_export(m, x, path, NULL), TG_EUNSUPPORTED,
                          "'<top>' (MultiheadAttention) is not supported", NULL);
        th_expect_refused(tg_onnx_export(seq, x, path, NULL), TG_EUNSUPPORTED,
                          "'0' (MultiheadAttention) is not supported", NULL);
    } else {
        cr_assert(tg_onnx_export(m, x, path, NULL) < 0);
    }
    cr_assert(th_exists(path) == false);
    th_tmp_dir_remove();
    tg_tensor_release(x);
    tg_module_release(seq);
    tg_module_release(m);
}

/* A checkpoint keeps the number of dropout masks drawn, as a Dropout's, so
 * a resumed module draws the mask the uninterrupted one would have. */
Test(attention, a_checkpoint_keeps_the_dropout_count)
{
    tg_nn_multihead_attention_opts o = TG_NN_MULTIHEAD_ATTENTION_OPTS_INIT;
    o.dropout = 0.5;
    o.seed = 12;
    tg_module *m = small_module(&o, 5), *m2 = small_module(&o, 6);
    uint64_t s = 6;
    tg_tensor *x = th_rand_tensor(&s, TG_F64, 3, (int64_t[]){5, 2, 4}, -1, 1);
    tg_tensor *y = NULL, *w = NULL, *want = NULL, *got = NULL;
    for (int i = 0; i < 2; i++) {
        OK(tg_nn_multihead_attention_forward(m, &y, &w, x, x, x, NULL));
        th_release_all(2, (tg_tensor *[]){y, w});
    }
    th_tmp_dir_make("attention_ck");
    char path[512];
    th_tmp_path(path, sizeof path, "ck.safetensors");
    tg_checkpoint *ck = NULL, *ck2 = NULL;
    OK(tg_checkpoint_new(&ck));
    OK(tg_checkpoint_add_module(ck, "mha", m));
    OK(tg_checkpoint_save(ck, path, NULL));
    OK(tg_nn_multihead_attention_forward(m, &y, &want, x, x, x, NULL));
    tg_st_file *f = NULL;
    OK(tg_safetensors_load(&f, path));
    const char *calls = tg_st_meta_get(f, "mha.dropout_calls");
    cr_assert(calls && strcmp(calls, "2") == 0, "mha.dropout_calls is %s", calls ? calls : "-");
    OK(tg_checkpoint_new(&ck2));
    OK(tg_checkpoint_add_module(ck2, "mha", m2));
    OK(tg_checkpoint_load(ck2, path));
    tg_tensor_release(y);
    OK(tg_nn_multihead_attention_forward(m2, &y, &got, x, x, x, NULL));
    th_expect_same_bits("resumed", x, got, want);
    th_tmp_dir_remove();
    tg_st_free(f);
    tg_checkpoint_free(ck);
    tg_checkpoint_free(ck2);
    th_release_all(4, (tg_tensor *[]){x, y, want, got});
    tg_module_release(m);
    tg_module_release(m2);
}

/* Inside a bf16 autocast scope the linears and products run in bf16, as
 * torch's CPU autocast: the output is bf16, near the f32 one, and the f32
 * parameters get f32 gradients; a float attn_mask of f32 is taken. */
Test(attention, module_runs_under_autocast)
{
    tg_nn_multihead_attention_opts o = TG_NN_MULTIHEAD_ATTENTION_OPTS_INIT;
    o.add_bias_kv = o.add_zero_attn = true;
    tg_rng rng;
    tg_rng_init(&rng, 2);
    tg_module *m = NULL;
    OK(tg_nn_multihead_attention_new(&m, 8, 2, &o, &rng));
    uint64_t s = 3;
    tg_tensor *x = th_rand_tensor(&s, TG_F32, 3, (int64_t[]){4, 2, 8}, -1, 1);
    tg_tensor *am = th_rand_tensor(&s, TG_F32, 2, (int64_t[]){4, 4}, -1, 0);
    tg_tensor *kpm = th_tensor_from(TG_U8, 2, (int64_t[]){2, 4}, (double[]){0, 0, 1, 0,
                                                                             1, 0, 0, 0});
    tg_nn_mha_forward_opts fo = {.key_padding_mask = kpm, .attn_mask = am,
                                 .average_attn_weights = true};
    tg_tensor *y = NULL, *w = NULL, *y32 = NULL, *w32 = NULL, *yf = NULL, *l = NULL;
    OK(tg_nn_multihead_attention_forward(m, &y32, &w32, x, x, x, &fo));
    OK(tg_autocast_begin(TG_BF16));
    OK(tg_nn_multihead_attention_forward(m, &y, &w, x, x, x, &fo));
    OK(tg_autocast_end());
    cr_assert(eq(int, tg_tensor_dtype(y), TG_BF16));
    OK(tg_to_dtype(&yf, y, TG_F32));
    th_expect_close_scaled("bf16", yf, y32, 1.0 / 16);
    OK(tg_sum(&l, yf));
    OK(tg_backward(l, NULL, NULL));
    const tg_tensor *g = tg_tensor_grad(tg_module_find(m, "in_proj_weight"));
    cr_assert_not_null(g);
    cr_assert(eq(int, tg_tensor_dtype(g), TG_F32));
    cr_assert_not_null(tg_tensor_grad(tg_module_find(m, "bias_k")));
    th_release_all(9, (tg_tensor *[]){x, am, kpm, y, w, y32, w32, yf, l});
    tg_module_release(m);
}

/* torch.nn.utils.weight_norm(mha, "in_proj_weight"): the forward reads the
 * weight computed from in_proj_weight_g and _v at each call, through
 * tg_nn_multihead_attention_forward as through tg_module_forward_n. */
Test(attention, a_weight_normed_projection_is_computed_at_each_forward)
{
    tg_module *m = small_module(NULL, 4);
    uint64_t s = 9;
    tg_tensor *x = th_rand_tensor(&s, TG_F64, 3, (int64_t[]){3, 2, 4}, -1, 1);
    tg_tensor *y0 = NULL, *y1 = NULL, *y2 = NULL, *y3 = NULL;
    OK(tg_module_forward_n(m, &y0, 3, (tg_tensor *[]){x, x, x}));
    OK(tg_nn_weight_norm(m, "in_proj_weight", 0));
    OK(tg_nn_multihead_attention_forward(m, &y1, NULL, x, x, x, NULL));
    th_expect_close("weight norm", y1, y0, 1e-12);
    tg_tensor *g = tg_module_find(m, "in_proj_weight_g");
    cr_assert_not_null(g);
    for (int64_t i = 0; i < tg_tensor_numel(g); i++)
        OK(tg_tensor_set_flat(g, i, 0.5 * th_at(g, i)));
    OK(tg_nn_multihead_attention_forward(m, &y2, NULL, x, x, x, NULL));
    OK(tg_module_forward_n(m, &y3, 3, (tg_tensor *[]){x, x, x}));
    th_expect_same_bits("both entry points", x, y2, y3);
    cr_assert(th_same_bits(y2, y1) == false, "g's change reached the forward");
    th_release_all(5, (tg_tensor *[]){x, y0, y1, y2, y3});
    tg_module_release(m);
}
