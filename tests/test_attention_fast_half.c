/* tests/test_attention_fast_half.c - the inference path of scaled
 * dot-product attention (src/ops/attention_fast.c) in bf16 and f16: its
 * results against the taped path's (the same call with TG_ATTENTION_FAST=0)
 * within the bound of docs/autograd.md, and mostly bit for bit, over the
 * shapes of tests/test_attention_fast.c (ranks, L != S, many query blocks,
 * one row per block), u8 and float masks (broadcast, causal, key padding),
 * 1 and 2 threads, each bf16 kernel this CPU runs (portable, avx512, amx on
 * emulated tiles), f16, every exp width and inside autocast of the inputs'
 * dtype; fully masked rows (NaN in both); and weights whose rounding once
 * and through f32 differ.  MultiheadAttention and the Transformer layers:
 * tests/test_mha_fast_half.c. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention_fixtures.h"
#include "bf16_gemm_fixtures.h"
#include "core/core.h"
#include "helpers.h"
#include "ops/attention_internal.h"
#include "ops/softmax_rows_internal.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())



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


/* tests/test_attention_fast.c's shapes, and two whose products pay for the
 * bf16 kernels (E, S and Ev >= 32). */
static const sdpa_case cases[] = {
    SDPA_CASES,
    {4, {2, 3}, 100, 80, 64, 64, M_FULL},
    {3, {4, 1}, 130, 130, 32, 48, M_CAUSAL},
};
enum { N_CASES = sizeof cases / sizeof cases[0] };

/* Case c computed in dtype dt, its inputs and float mask of dtype in (dt,
 * or f32 inside autocast of dt; in_dt): the fused path taken, its output the taped
 * one's within the bound; returns the elements that differ (*n: all of
 * them). */
static int64_t check_case(const sdpa_case *c, tg_dtype dt, tg_dtype in_dt, uint64_t seed,
                          int64_t *n)
{
    tg_tensor *q, *k, *v;
    tg_attention_opts o;
    case_inputs(c, in_dt, &seed, &q, &k, &v, &o);
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
    int64_t sc[4];
    case_scores_shape(c, sc);
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

/* Every case in dtype dt (inputs of dtype in_dt) with 1 and 2 threads: within
 * the bound, and at most 0.1% of the elements not the taped path's bits
 * (the two differ only where an f32 sum's order moves a rounding); on the
 * avx512 and amx kernels, whose bits do not depend on the rows of C, none
 * where both products take the kernel (E, S and Ev >= 32). */
static void sweep_as(tg_dtype dt, tg_dtype in_dt, uint64_t seed)
{
    tg_no_grad_begin();
    for (int t = 1; t <= 2; t++) {
        OK(tg_set_num_threads(t));
        int64_t differ = 0, all = 0;
        for (int i = 0; i < N_CASES; i++) {
            int64_t n = 0;
            const int64_t d = check_case(&cases[i], dt, in_dt, seed + (uint64_t)i, &n);
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

static void sweep(tg_dtype dt, uint64_t seed) { sweep_as(dt, dt, seed); }

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

/* Inside autocast of bf16 (f16) with q, k, v and the masks already bf16
 * (f16): the fused path, the taped path's bits there as above (softmax an
 * f32 op, its weights rounded to f32 and then to the dtype). */
Test(attention_fast_half, inside_autocast_of_the_inputs_dtype)
{
    use_kernel(TG_BF16_KERNEL_AVX512);
    OK(tg_autocast_begin(TG_BF16));
    sweep(TG_BF16, 700);
    OK(tg_autocast_end());
    OK(tg_autocast_begin(TG_F16));
    sweep(TG_F16, 800);
    OK(tg_autocast_end());
}

/* Inside autocast of bf16 (each bf16 kernel this CPU runs) and of f16
 * with f32 q, k, v and float masks: the fused path on k and v cast to the
 * dtype and q divided in f32 and then cast, as the taped path's products
 * cast them; its output in the dtype, within the bound of the taped one's
 * and mostly its bits. */
Test(attention_fast_half, f32_inputs_inside_autocast)
{
    const tg_bf16_kernel kernels[2] = {TG_BF16_KERNEL_PORTABLE, TG_BF16_KERNEL_AVX512};
    for (int i = 0; i < 2; i++) {
        if (!use_kernel_if_there(kernels[i])) continue;
        OK(tg_autocast_begin(TG_BF16));
        sweep_as(TG_BF16, TG_F32, 900 + (uint64_t)i);
        OK(tg_autocast_end());
    }
    OK(tg_autocast_begin(TG_F16));
    sweep_as(TG_F16, TG_F32, 910);
    OK(tg_autocast_end());
}

/* Rows whose weights round differently once than through f32: scores (0,
 * a, b) of three keys (q = 1, E = 1, k the scores), v the identity, so the
 * output is the weights.  A weight p whose f32 rounding lands exactly
 * halfway between two values of the dtype (and is not p) rounds once to
 * p's side and through f32 to the even one; up to 64 rows with such a
 * weight are sought among a, b = -i/256, -j/256 (i <= j <= 2048).  Outside autocast the
 * taped softmax rounds p once, inside it rounds p to f32 (an f32 op) and
 * the product's cast to the dtype: the fused path each way, bit for bit,
 * and the two ways differ on some row. */
static void tie_rows(tg_dtype dt)
{
    const uint32_t low = dt == TG_BF16 ? 0xFFFFu : 0x1FFFu, half = dt == TG_BF16 ? 0x8000u
                                                                                : 0x1000u;
    enum { MAX_ROWS = 64 };
    double kv[MAX_ROWS * 3];
    int64_t n = 0;
    for (int i = 1; i <= 2048 && n < MAX_ROWS; i++)
        for (int j = i; j <= 2048 && n < MAX_ROWS; j++) {
            const double s[3] = {0.0, th_round_to(dt, -i / 256.0), th_round_to(dt, -j / 256.0)};
            const double sum = 1.0 + exp(s[1]) + exp(s[2]);
            bool tie = false;
            for (int c = 0; c < 3; c++) {
                const double p = exp(s[c]) / sum;
                const float f = (float)p;
                uint32_t x;
                memcpy(&x, &f, sizeof x);
                tie |= (x & low) == half && (double)f != p && p >= 0x1p-14;
            }
            if (!tie) continue;
            for (int c = 0; c < 3; c++) kv[n * 3 + c] = s[c];
            n++;
        }
    cr_assert(n > 0, "%s: no row with a tie found", tg_dtype_name(dt));
    double *ones = malloc(sizeof *ones * (size_t)n), *eye = malloc(sizeof *eye * (size_t)(9 * n));
    for (int64_t r = 0; r < n; r++) {
        ones[r] = 1.0;
        for (int c = 0; c < 9; c++) eye[r * 9 + c] = c % 4 == 0 ? 1.0 : 0.0;
    }
    tg_tensor *q = th_tensor_from(dt, 3, (int64_t[]){n, 1, 1}, ones);
    tg_tensor *k = th_tensor_from(dt, 3, (int64_t[]){n, 3, 1}, kv);
    tg_tensor *v = th_tensor_from(dt, 3, (int64_t[]){n, 3, 3}, eye);
    tg_tensor *y[2] = {NULL, NULL};
    for (int amp = 0; amp < 2; amp++) {
        if (amp) OK(tg_autocast_begin(dt));
        bool took, taped;
        y[amp] = sdpa(true, q, k, v, NULL, &took);
        tg_tensor *want = sdpa(false, q, k, v, NULL, &taped);
        if (amp) OK(tg_autocast_end());
        cr_assert(took, "%s autocast %d: not fused", tg_dtype_name(dt), amp);
        th_expect_same_bits("tie rows", q, y[amp], want);
        tg_tensor_release(want);
    }
    cr_assert(th_same_bits(y[0], y[1]) == false,
              "%s: %lld rows with a tie, none rounded otherwise inside autocast",
              tg_dtype_name(dt), (long long)n);
    th_release_all(5, (tg_tensor *[]){q, k, v, y[0], y[1]});
    free(ones);
    free(eye);
}

Test(attention_fast_half, weights_round_once_or_through_f32_inside_autocast)
{
    tg_no_grad_begin();
    tie_rows(TG_BF16);
    tie_rows(TG_F16);
    tg_no_grad_end();
}
