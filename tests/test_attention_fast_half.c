/* tests/test_attention_fast_half.c - the inference path of scaled
 * dot-product attention (src/ops/attention_fast.c) in bf16 and f16: its
 * results against the taped path's (the same call with TG_ATTENTION_FAST=0)
 * within the bound of docs/autograd.md, and mostly bit for bit, over the
 * shapes of tests/test_attention_fast.c (ranks, L != S, many query blocks,
 * one row per block), u8 and float masks (broadcast, causal, key padding),
 * 1 and 2 threads, each bf16 kernel this CPU runs (portable, avx512, amx on
 * emulated tiles) and f16; fully masked rows (NaN in both); and
 * MultiheadAttention's self- and cross-attention, TransformerEncoderLayer
 * and TransformerDecoderLayer in eval. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "bf16_gemm_fixtures.h"
#include "core/core.h"
#include "helpers.h"
#include "ops/attention_internal.h"
#include "ops/softmax_rows_internal.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

/* tg_scaled_dot_product_attention(q, k, v, o) on the fused path (fast) or,
 * with TG_ATTENTION_FAST=0, the taped one; *took: the fused kernel ran. */
static tg_tensor *sdpa(bool fast, tg_tensor *q, tg_tensor *k, tg_tensor *v,
                       const tg_attention_opts *o, bool *took)
{
    if (!fast) setenv("TG_ATTENTION_FAST", "0", 1);
    const uint64_t before = tg__attention_fast_calls();
    tg_tensor *y = NULL;
    const int rc = tg_scaled_dot_product_attention(&y, NULL, q, k, v, o);
    unsetenv("TG_ATTENTION_FAST");
    OK(rc);
    *took = tg__attention_fast_calls() == before + 1;
    return y;
}

/* The unit roundoff of a half dtype. */
static double unit_of(tg_dtype dt) { return dt == TG_BF16 ? 0x1p-8 : 0x1p-11; }

/* t (nd dims) as contiguous doubles, broadcast to shape (nd dims) first. */
static double *doubles_as(const tg_tensor *t, int nd, const int64_t *shape)
{
    tg_tensor *e = NULL;
    OK(tg_expand(&e, (tg_tensor *)t, nd, shape));
    double *d = th_doubles(e);
    tg_tensor_release(e);
    return d;
}

/* The bound of docs/autograd.md on |fused - taped| for element j of row
 * (b, l): with s the scores q k^T / sqrt(E) and t = s + mask in double, u
 * the dtype's unit roundoff, D = 2u max_c (|s_c| + |t_c|) + 2^-20 max_c
 * sum_i |q_i k_ci| / sqrt(E) over the keys not masked, rho = e^(2D) (1 +
 * u)^2 - 1, p = softmax(t) and A = sum_c p_c |v_cj|:
 *   (rho + S 2^-23) A + 2u |taped|  (+ 2^-23 for f16's subnormals),
 * checked with a factor of 2 (p and s here are exact, the paths' rounded). */
typedef struct bound_in {
    tg_dtype dt;
    int64_t B, L, S, E, Ev;
    const double *q, *k, *v, *m;   /* m: NULL, or the mask as doubles */
    bool mu8;
} bound_in;

static void row_bounds(const bound_in *in, int64_t b, int64_t l, const double *want,
                       double *bound, double *p)
{
    const int64_t S = in->S, E = in->E, Ev = in->Ev;
    const double u = unit_of(in->dt), sq = sqrt((double)E);
    double D = 0, big = 0, tmax = -INFINITY;
    for (int64_t c = 0; c < S; c++) {
        double s = 0, a = 0;
        for (int64_t i = 0; i < E; i++) {
            const double x = in->q[(b * in->L + l) * E + i] * in->k[(b * S + c) * E + i];
            s += x;
            a += fabs(x);
        }
        s /= sq;
        double t = s;
        const double mv = in->m ? in->m[(b * in->L + l) * S + c] : 0.0;
        if (in->m && in->mu8 && mv != 0.0) t = -INFINITY;
        else if (in->m && !in->mu8) t = s + mv;
        p[c] = t;
        if (!isfinite(t)) continue;
        if (2 * u * (fabs(s) + fabs(t)) > D) D = 2 * u * (fabs(s) + fabs(t));
        if (a / sq > big) big = a / sq;
        if (t > tmax) tmax = t;
    }
    D += 0x1p-20 * big;
    double sum = 0;
    for (int64_t c = 0; c < S; c++) {
        p[c] = isfinite(p[c]) ? exp(p[c] - tmax) : 0.0;
        sum += p[c];
    }
    const double rho = exp(2 * D) * (1 + u) * (1 + u) - 1;
    for (int64_t j = 0; j < Ev; j++) {
        double A = 0;
        for (int64_t c = 0; c < S; c++) A += p[c] / sum * fabs(in->v[(b * S + c) * Ev + j]);
        bound[j] = 2 * ((rho + (double)S * 0x1p-23) * A + 2 * u * fabs(want[j]) +
                        (in->dt == TG_F16 ? 0x1p-23 : 0.0));
    }
}

/* Every element of got within the bound of want (NaN where want is NaN);
 * returns the number of elements whose bits differ. */
static int64_t expect_within_bound(const char *what, const bound_in *in, const tg_tensor *got,
                                   const tg_tensor *want)
{
    double *a = th_doubles(got), *w = th_doubles(want);
    double *bound = malloc(sizeof *bound * (size_t)in->Ev);
    double *p = malloc(sizeof *p * (size_t)in->S);
    int64_t differ = 0;
    for (int64_t b = 0; b < in->B; b++)
        for (int64_t l = 0; l < in->L; l++) {
            const int64_t r = (b * in->L + l) * in->Ev;
            row_bounds(in, b, l, w + r, bound, p);
            for (int64_t j = 0; j < in->Ev; j++) {
                const double x = a[r + j], y = w[r + j];
                if (isnan(y)) {
                    cr_assert(isnan(x), "%s: (%lld, %lld, %lld) is %g, the taped path's NaN",
                              what, (long long)b, (long long)l, (long long)j, x);
                    continue;
                }
                differ += x != y;
                cr_assert(fabs(x - y) <= bound[j],
                          "%s: (%lld, %lld, %lld) is %.9g, the taped path's %.9g, beyond the "
                          "bound %.3g", what, (long long)b, (long long)l, (long long)j, x, y,
                          bound[j]);
            }
        }
    free(a);
    free(w);
    free(bound);
    free(p);
    return differ;
}

/* Mask kinds of a case. */
enum { M_NONE, M_U8, M_FLOAT, M_CAUSAL, M_PAD_U8, M_FULL };

/* The mask of kind `kind` for scores (lead..., L, S) of nd dims. */
static tg_tensor *make_mask(int kind, tg_dtype dt, int nd, const int64_t *sc, uint64_t *seed)
{
    const int64_t L = sc[nd - 2], S = sc[nd - 1];
    tg_tensor *m = NULL;
    if (kind == M_U8 || kind == M_CAUSAL) {
        OK(tg_tensor_zeros(&m, kind == M_U8 ? TG_U8 : dt, 2, (int64_t[]){L, S}));
        for (int64_t l = 0; l < L; l++)
            for (int64_t s = 0; s < S; s++) {
                const int64_t i = l * S + s;
                if (kind == M_U8) OK(tg_tensor_set_flat(m, i, th_uniform_pm1(seed) > 0.4));
                else if (s > l + S - L) OK(tg_tensor_set_flat(m, i, -INFINITY));
            }
    } else if (kind == M_FLOAT) {
        m = th_rand_tensor(seed, dt, 2, (int64_t[]){L, S}, -2.0, 2.0);
    } else if (kind == M_PAD_U8) {   /* (lead0, 1, ..., S): keys of batch b padded */
        int64_t sh[4] = {sc[0], 1, 1, 1};
        sh[nd - 1] = S;
        OK(tg_tensor_zeros(&m, TG_U8, nd, sh));
        for (int64_t b = 0; b < sc[0]; b++)
            for (int64_t s = S - b % 3; s < S; s++) OK(tg_tensor_set_flat(m, b * S + s, 1));
    } else if (kind == M_FULL) {
        m = th_rand_tensor(seed, dt, nd, sc, -3.0, 3.0);
    }
    return m;
}

typedef struct sdpa_case {
    int nd;
    int64_t lead[2], L, S, E, Ev;
    int mask;
} sdpa_case;

/* tests/test_attention_fast.c's shapes, and two whose products pay for the
 * bf16 kernels (E, S and Ev >= 32). */
static const sdpa_case cases[] = {
    {2, {1, 1}, 5, 7, 3, 4, M_NONE},
    {2, {1, 1}, 5, 7, 3, 4, M_U8},
    {2, {1, 1}, 1, 1, 1, 1, M_NONE},
    {3, {6, 1}, 9, 13, 8, 5, M_FLOAT},
    {3, {6, 1}, 9, 13, 8, 5, M_PAD_U8},
    {3, {4, 1}, 13, 9, 8, 8, M_CAUSAL},   /* L > S: the first rows fully masked */
    {4, {3, 4}, 70, 130, 16, 16, M_CAUSAL},
    {4, {3, 4}, 70, 130, 16, 24, M_FULL},
    {4, {2, 2}, 150, 40, 32, 8, M_PAD_U8},
    {3, {1, 1}, 3, 33000, 2, 3, M_FLOAT},   /* one row per block */
    {4, {2, 3}, 100, 80, 64, 64, M_FULL},
    {3, {4, 1}, 130, 130, 32, 48, M_CAUSAL},
};
enum { N_CASES = sizeof cases / sizeof cases[0] };

/* Case c in dtype dt: the fused path taken, its output the taped one's
 * within the bound; returns the elements that differ (*n: all of them). */
static int64_t check_case(const sdpa_case *c, tg_dtype dt, uint64_t seed, int64_t *n)
{
    int64_t qs[4], ks[4], vs[4], sc[4];
    const int nl = c->nd - 2;
    for (int i = 0; i < nl; i++) qs[i] = ks[i] = vs[i] = sc[i] = c->lead[i];
    qs[nl] = sc[nl] = c->L;
    ks[nl] = vs[nl] = sc[nl + 1] = c->S;
    qs[nl + 1] = ks[nl + 1] = c->E;
    vs[nl + 1] = c->Ev;
    tg_tensor *q = th_rand_tensor(&seed, dt, c->nd, qs, -2.0, 2.0);
    tg_tensor *k = th_rand_tensor(&seed, dt, c->nd, ks, -2.0, 2.0);
    tg_tensor *v = th_rand_tensor(&seed, dt, c->nd, vs, -1.0, 1.0);
    tg_attention_opts o = TG_ATTENTION_OPTS_INIT;
    o.attn_mask = make_mask(c->mask, dt, c->nd, sc, &seed);
    bool fast_took, taped_took;
    tg_tensor *y = sdpa(true, q, k, v, &o, &fast_took);
    tg_tensor *want = sdpa(false, q, k, v, &o, &taped_took);
    char what[160];
    snprintf(what, sizeof what,
             "%s %s kernel, %d threads: nd %d lead %lld %lld L %lld S %lld E %lld Ev %lld "
             "mask %d", tg_dtype_name(dt), tg_bf16_kernel_name(tg_bf16_kernel_get()),
             tg_get_num_threads(), c->nd, (long long)c->lead[0], (long long)c->lead[1],
             (long long)c->L, (long long)c->S, (long long)c->E, (long long)c->Ev, c->mask);
    cr_assert(fast_took, "%s: the fused path was not taken", what);
    cr_assert(taped_took == false, "%s: TG_ATTENTION_FAST=0 took the fused path", what);
    cr_assert(eq(int, tg_tensor_dtype(y), dt), "%s: the output's dtype", what);
    th_expect_shape(y, tg_tensor_ndim(want), tg_tensor_shape(want));
    const int64_t B = tg_tensor_numel(q) / (c->L * c->E);
    double *md = o.attn_mask ? doubles_as(o.attn_mask, c->nd, sc) : NULL;
    double *qd = th_doubles(q), *kd = th_doubles(k), *vd = th_doubles(v);
    const bound_in in = {.dt = dt, .B = B, .L = c->L, .S = c->S, .E = c->E, .Ev = c->Ev,
                         .q = qd, .k = kd, .v = vd, .m = md,
                         .mu8 = o.attn_mask && tg_tensor_dtype(o.attn_mask) == TG_U8};
    const int64_t differ = expect_within_bound(what, &in, y, want);
    *n = tg_tensor_numel(want);
    free(md);
    free(qd);
    free(kd);
    free(vd);
    th_release_all(6, (tg_tensor *[]){q, k, v, o.attn_mask, y, want});
    return differ;
}

/* Every case in dtype dt with 1 and 2 threads: within the bound, and at
 * most 0.1% of the elements not the taped path's bits (the two differ only
 * where an f32 sum's order moves a rounding); on the avx512 and amx
 * kernels, whose bits do not depend on the rows of C, none where both
 * products take the kernel (E, S and Ev >= 32). */
static void sweep(tg_dtype dt, uint64_t seed)
{
    tg_no_grad_begin();
    for (int t = 1; t <= 2; t++) {
        OK(tg_set_num_threads(t));
        int64_t differ = 0, all = 0;
        for (int i = 0; i < N_CASES; i++) {
            int64_t n = 0;
            const int64_t d = check_case(&cases[i], dt, seed + (uint64_t)i, &n);
            const sdpa_case *c = &cases[i];
            if (dt == TG_BF16 && tg_bf16_kernel_get() > TG_BF16_KERNEL_PORTABLE && c->E >= 32 &&
                c->S >= 32 && c->Ev >= 32)
                cr_assert(eq(i64, d, 0), "case %d: %lld elements differ on the %s kernel", i,
                          (long long)d, tg_bf16_kernel_name(tg_bf16_kernel_get()));
            differ += d;
            all += n;
        }
        cr_log_info("%s, %s kernel, %d threads: %lld of %lld elements differ from the taped "
                    "path's bits", tg_dtype_name(dt), tg_bf16_kernel_name(tg_bf16_kernel_get()),
                    t, (long long)differ, (long long)all);
        cr_assert(differ * 1000 <= all, "%s, %d threads: %lld of %lld elements differ",
                  tg_dtype_name(dt), t, (long long)differ, (long long)all);
    }
    tg_no_grad_end();
    OK(tg_set_num_threads(2));
}

Test(attention_fast_half, bf16_portable_kernel_matches_taped_path)
{
    use_kernel(TG_BF16_KERNEL_PORTABLE);
    sweep(TG_BF16, 100);
}

Test(attention_fast_half, bf16_avx512_kernel_matches_taped_path)
{
    use_kernel(TG_BF16_KERNEL_AVX512);
    sweep(TG_BF16, 200);
}

Test(attention_fast_half, bf16_amx_kernel_on_emulated_tiles_matches_taped_path)
{
    emulate_amx();
    use_kernel(TG_BF16_KERNEL_AMX);
    sweep(TG_BF16, 300);
    tg__amx_set_emulated(false);
}

Test(attention_fast_half, f16_matches_taped_path)
{
    sweep(TG_F16, 400);
}

/* ---- MultiheadAttention ---- */

/* Every element: NaN where want is NaN, else |got - want| <= tol (|want| +
 * max |want|); returns the elements whose bits differ. */
static int64_t expect_close(const char *what, const tg_tensor *got, const tg_tensor *want,
                            double tol)
{
    th_expect_shape(got, tg_tensor_ndim(want), tg_tensor_shape(want));
    const int64_t n = tg_tensor_numel(want);
    double *a = th_doubles(got), *b = th_doubles(want), big = 0;
    for (int64_t i = 0; i < n; i++)
        if (fabs(b[i]) > big) big = fabs(b[i]);
    int64_t differ = 0;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(b[i])) {
            cr_assert(isnan(a[i]), "%s: element %lld is %g, the taped path's NaN", what,
                      (long long)i, a[i]);
            continue;
        }
        differ += a[i] != b[i];
        cr_assert(fabs(a[i] - b[i]) <= tol * (fabs(b[i]) + big),
                  "%s: element %lld is %.9g, the taped path's %.9g (tol %g, max %g)", what,
                  (long long)i, a[i], b[i], tol, big);
    }
    free(a);
    free(b);
    return differ;
}

/* MultiheadAttention (E 64, 4 heads) in eval under no_grad, self- (query =
 * key = value) and cross-attention (a memory of another length), batch
 * first or not, a float causal mask and a u8 key padding mask, in dtype dt:
 * one fused call per forward, the output the taped path's within 8u
 * (|y| + max |y|), u the dtype's unit roundoff (the attention's bound of
 * docs/autograd.md carried through out_proj's dot products of 64 terms,
 * whose weights are below 1/8), most elements bit for bit. */
static void mha_case(tg_dtype dt, bool self, bool bf, uint64_t seed)
{
    tg_rng rng;
    tg_rng_init(&rng, seed);
    tg_nn_multihead_attention_opts mo = TG_NN_MULTIHEAD_ATTENTION_OPTS_INIT;
    mo.batch_first = bf;
    tg_module *m = NULL;
    const int64_t E = 64, n = 3, L = 40, S = self ? L : 29;
    OK(tg_nn_multihead_attention_new(&m, E, 4, &mo, &rng));
    OK(tg_module_to_dtype(m, dt));
    tg_module_train(m, false);
    const int64_t qs[3] = {bf ? n : L, bf ? L : n, E}, ks[3] = {bf ? n : S, bf ? S : n, E};
    tg_tensor *q = th_rand_tensor(&seed, dt, 3, qs, -1, 1);
    tg_tensor *kv = self ? tg_tensor_retain(q) : th_rand_tensor(&seed, dt, 3, ks, -1, 1);
    tg_tensor *causal = NULL, *y = NULL, *want = NULL;
    OK(tg_nn_transformer_square_subsequent_mask(&causal, L, dt));
    tg_nn_mha_forward_opts fo = TG_NN_MHA_FORWARD_OPTS_INIT;
    fo.key_padding_mask = make_mask(M_PAD_U8, dt, 2, (int64_t[]){n, S}, &seed);
    if (self) fo.attn_mask = causal;
    tg_no_grad_begin();
    const uint64_t before = tg__attention_fast_calls();
    OK(tg_nn_multihead_attention_forward(m, &y, NULL, q, kv, kv, &fo));
    cr_assert(eq(u64, tg__attention_fast_calls(), before + 1), "%s self %d: not fused",
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
    th_release_all(6, (tg_tensor *[]){q, kv, causal, fo.key_padding_mask, y, want});
    tg_module_release(m);
}

static void mha_sweep(tg_dtype dt)
{
    for (int self = 0; self < 2; self++)
        for (int bf = 0; bf < 2; bf++) mha_case(dt, self, bf, 50 + (uint64_t)(2 * self + bf));
}

Test(attention_fast_half, mha_bf16_portable_kernel)
{
    use_kernel(TG_BF16_KERNEL_PORTABLE);
    mha_sweep(TG_BF16);
}

Test(attention_fast_half, mha_bf16_avx512_kernel)
{
    use_kernel(TG_BF16_KERNEL_AVX512);
    mha_sweep(TG_BF16);
}

Test(attention_fast_half, mha_f16)
{
    mha_sweep(TG_F16);
}

/* TransformerEncoderLayer (d_model 64, 4 heads) in bf16 eval under
 * no_grad with a causal mask: the self-attention block takes the fused
 * kernel (the rest of the layer its bf16 ops), the output the taped
 * path's within the MultiheadAttention check's tolerance. */
Test(attention_fast_half, transformer_encoder_layer_bf16_eval_forward)
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
Test(attention_fast_half, transformer_decoder_layer_half_eval_forward)
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

/* The softmax's exp in plain C, on AVX2 and on AVX-512 (those this CPU
 * runs; the others fall back to the widest it has): the same checks. */
Test(attention_fast_half, every_exp_width_matches_the_taped_path)
{
    for (int w = 1; w <= 3; w++) {
        tg__exp_width_force(w);
        sweep(TG_BF16, 500 + (uint64_t)w);
        sweep(TG_F16, 600 + (uint64_t)w);
    }
    tg__exp_width_force(0);
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
Test(attention_fast_half, mha_bf16_matches_torch)
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
