/* tests/test_unary_simd.c - exp, gelu, softplus, sigmoid, silu, tanh and the
 * one-pass gradients of gelu and silu on f32 in vector registers
 * (src/ops/unary_simd.c), and tanh, sigmoid and silu (activation.c): every
 * width this CPU runs gives the plain C width's bits; each unary_simd
 * result is within one rounding of the value from libm's exp and erfc in
 * double, over a sweep of every 257th f32 bit pattern and a list of
 * special values (+-0, subnormals, +-inf, NaN, large magnitudes); and
 * tg_exp, tg_gelu and the backwards of gelu and silu (one pass outside
 * grad mode, recorded ops with create_graph) take them. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "ops/activation_internal.h"
#include "ops/unary_simd_internal.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

enum { CHUNK = 65531, NOPS = 8 };   /* odd: every chunk ends in a partial vector */

static const float specials[] = {0.0f, -0.0f, 0x1p-149f, -0x1p-149f, 0x1.fffffcp-127f,
                                 -0x1p-126f, 1e-30f, -1e-30f, 1.0f, -1.0f, 0.5f, -0.75f,
                                 -1.2784645f, 5.0f, -5.0f, 9.0f, -9.0f, 15.5f, -15.5f,
                                 15.49f, -15.49f, 88.72f, 88.73f, -87.3f, -103.9f, -104.0f,
                                 -120.5f, 100.5f, 1e6f, -1e6f, 3e38f, -3e38f, INFINITY,
                                 -INFINITY, NAN, -NAN};

/* Fills a with chunk c of the sweep (every 257th bit pattern), the
 * specials in the first; g with gradients of both signs.  Returns n. */
static int64_t fill(float *a, float *g, uint64_t c)
{
    int64_t n = 0;
    if (c == 0)
        for (; n < (int64_t)(sizeof specials / sizeof specials[0]); n++) a[n] = specials[n];
    for (; n < CHUNK; n++) {
        const uint64_t u = (c * CHUNK + (uint64_t)n) * 257u;
        if (u >> 32) break;
        const uint32_t b = (uint32_t)u;
        memcpy(&a[n], &b, sizeof b);
    }
    for (int64_t i = 0; i < n; i++) g[i] = (float)((i % 9) - 4) * 0.375f + 0.125f;
    return n;
}

enum { NCHUNKS = (int)((1ull << 32) / 257 / CHUNK + 1) };

/* op's value of x (and g) in double with libm's exp and erfc: the formulas
 * of activation.c's f64 kernels. */
static double reference(int op, float xf, float gf)
{
    const double x = xf, g = gf;
    switch (op) {
    case TG__USIMD_EXP: return exp(x);
    case TG__USIMD_GELU: return 0.5 * x * erfc(-x * M_SQRT1_2);
    case TG__USIMD_GELU_GRAD:
        return g * (0.5 * erfc(-x * M_SQRT1_2) +
                    x * (exp(-0.5 * (x * x)) * (0.5 * M_2_SQRTPI * M_SQRT1_2)));
    case TG__USIMD_SILU_GRAD:
    case TG__USIMD_SIGMOID:
    case TG__USIMD_SILU: {
        const double e = exp(-fabs(x)), s = x >= 0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
        return op == TG__USIMD_SIGMOID ? s
               : op == TG__USIMD_SILU  ? x * s
                                       : g * (s * (1.0 + x * (1.0 - s)));
    }
    case TG__USIMD_TANH: return tanh(x);
    default: return (x > 0 ? x : 0.0) + log1p(exp(-fabs(x)));   /* softplus */
    }
}

/* got is one of the two f32 next to want (or want itself), or both NaN. */
static bool one_rounding(float got, double want)
{
    if (isnan(want)) return isnan(got);
    const float r = (float)want;
    if (got == r && signbit(got) == signbit(r)) return true;
    if (isinf(want)) return got == r;
    const float lo = (double)r <= want ? r : nextafterf(r, -INFINITY);
    const float hi = (double)r >= want ? r : nextafterf(r, INFINITY);
    return got == lo || got == hi;
}

Test(unary_simd, every_width_gives_the_plain_bits)
{
    float *a = malloc(CHUNK * sizeof *a), *g = malloc(CHUNK * sizeof *g);
    float *want = malloc(CHUNK * sizeof *want), *got = malloc(CHUNK * sizeof *got);
    int widths = 0;
    for (int w = TG__EXP_AVX2; w <= TG__EXP_AVX512; w++) {
        tg__exp_width_force(w);
        if (tg__exp_width_get() != (tg__exp_width)w) continue;
        widths++;
        for (uint64_t c = 0; c < NCHUNKS; c += 3) {
            const int64_t n = fill(a, g, c);
            for (int op = 0; op < NOPS; op++) {
                tg__unary_simd_f32(op, want, a, g, n, TG__EXP_PLAIN);
                tg__unary_simd_f32(op, got, a, g, n, (tg__exp_width)w);
                for (int64_t i = 0; i < n; i++)
                    cr_assert(memcmp(&got[i], &want[i], sizeof *got) == 0,
                              "width %d op %d x=%a: %a, plain %a", w, op, (double)a[i],
                              (double)got[i], (double)want[i]);
            }
            for (int op = 0; op < 3; op++) {   /* tanh, sigmoid, silu (activation.c) */
                if (op == 0) {
                    tg__tanh_f32_n(want, a, n, false);
                    tg__tanh_f32_n(got, a, n, true);
                } else {
                    tg__sigmoid_f32_n(want, a, n, op == 2, false);
                    tg__sigmoid_f32_n(got, a, n, op == 2, true);
                }
                for (int64_t i = 0; i < n; i++)
                    cr_assert(memcmp(&got[i], &want[i], sizeof *got) == 0,
                              "width %d activation %d x=%a: %a, plain %a", w, op,
                              (double)a[i], (double)got[i], (double)want[i]);
            }
        }
    }
    tg__exp_width_force(0);
    cr_log_info("unary_simd: %d vector widths besides plain", widths);
    free(a), free(g), free(want), free(got);
}

Test(unary_simd, within_one_rounding_of_libm)
{
    float *a = malloc(CHUNK * sizeof *a), *g = malloc(CHUNK * sizeof *g);
    float *got = malloc(CHUNK * sizeof *got);
    long inexact = 0, total = 0;
    for (uint64_t c = 0; c < NCHUNKS; c++) {
        const int64_t n = fill(a, g, c);
        for (int op = 0; op < NOPS; op++) {
            tg__unary_simd_f32(op, got, a, g, n, tg__exp_width_get());
            for (int64_t i = 0; i < n; i++) {
                const double want = reference(op, a[i], g[i]);
                cr_assert(one_rounding(got[i], want), "op %d x=%a g=%a: %a, libm %a", op,
                          (double)a[i], (double)g[i], (double)got[i], want);
                inexact += !isnan(want) && got[i] != (float)want;
                total++;
            }
        }
    }
    cr_log_info("unary_simd: %ld of %ld not the rounded libm value", inexact, total);
    cr_assert(inexact * 100000 < total, "%ld of %ld results off (float)libm", inexact, total);
    free(a), free(g), free(got);
}

/* tg_exp and tg_gelu of an f32 tensor, and the gradients of exp (g * y),
 * gelu and silu outside grad mode (one pass) and with create_graph
 * (recorded ops). */
Test(unary_simd, ops_take_the_kernels)
{
    enum { N = 1003 };
    float xs[N], gs[N], want[N];
    for (int i = 0; i < N; i++) {
        xs[i] = (float)(i - 500) * 0.0173f;
        gs[i] = (float)((i % 7) - 3) * 0.5f + 0.25f;
    }
    tg_tensor *x = NULL, *g = NULL;
    OK(tg_tensor_from_data(&x, TG_F32, 1, (int64_t[]){N}, xs));
    OK(tg_tensor_from_data(&g, TG_F32, 1, (int64_t[]){N}, gs));
    OK(tg_tensor_set_requires_grad(x, true));
    int (*fns[3])(tg_tensor **, tg_tensor *) = {tg_exp, tg_gelu, tg_silu};
    const int fwd[3] = {TG__USIMD_EXP, TG__USIMD_GELU, -1};
    const int grad[3] = {TG__USIMD_EXP, TG__USIMD_GELU_GRAD, TG__USIMD_SILU_GRAD};
    for (int f = 0; f < 3; f++) {
        tg_tensor *y = NULL, *d = NULL, *dg = NULL;
        OK(fns[f](&y, x));
        if (fwd[f] >= 0) {
            tg__unary_simd_f32(fwd[f], want, xs, NULL, N, tg__exp_width_get());
            for (int i = 0; i < N; i++)
                cr_assert(eq(flt, (float)th_at(y, i), want[i]), "op %d [%d]", f, i);
        }
        tg_backward_opts keep = {.retain_graph = true};
        OK(tg_grad(&d, 1, &y, &g, 1, &x, &keep));
        tg__unary_simd_f32(grad[f], want, xs, gs, N, tg__exp_width_get());
        if (f == 0)   /* exp: g * y in f32 */
            for (int i = 0; i < N; i++) want[i] = gs[i] * want[i];
        for (int i = 0; i < N; i++)
            cr_assert(eq(flt, (float)th_at(d, i), want[i]), "grad %d [%d]", f, i);
        tg_backward_opts cg = {.create_graph = true};
        OK(tg_grad(&dg, 1, &y, &g, 1, &x, &cg));
        for (int i = 0; i < N; i++) {   /* the recorded ops round each step to f32 */
            const double w = want[i], tol = 8.0 * ldexp(fabs(w), -24) + 1e-6 * fabs(gs[i]);
            cr_assert(fabs(th_at(dg, i) - w) <= tol, "recorded grad %d [%d]: %g, %g", f, i,
                      th_at(dg, i), w);
            if (f == 0)   /* exp: the same bits */
                cr_assert(eq(flt, (float)th_at(dg, i), want[i]), "exp grad [%d]", i);
        }
        th_release_all(3, (tg_tensor *[]){y, d, dg});
    }
    th_release_all(2, (tg_tensor *[]){x, g});
}

/* f64: the one-pass gradients of gelu and silu (libm, outside grad mode)
 * and exp's g * y against their recorded ops (create_graph), which the
 * gradchecks check. */
Test(unary_simd, f64_one_pass_gradients_match_the_recorded_ops)
{
    enum { N = 401 };
    double xs[N], gs[N];
    for (int i = 0; i < N; i++) {
        xs[i] = (double)(i - 200) * 0.0437;
        gs[i] = (double)((i % 5) - 2) * 0.75 + 0.125;
    }
    tg_tensor *x = NULL, *g = NULL;
    OK(tg_tensor_from_data(&x, TG_F64, 1, (int64_t[]){N}, xs));
    OK(tg_tensor_from_data(&g, TG_F64, 1, (int64_t[]){N}, gs));
    OK(tg_tensor_set_requires_grad(x, true));
    int (*fns[3])(tg_tensor **, tg_tensor *) = {tg_exp, tg_gelu, tg_silu};
    for (int f = 0; f < 3; f++) {
        tg_tensor *y = NULL, *d = NULL, *dg = NULL;
        OK(fns[f](&y, x));
        tg_backward_opts keep = {.retain_graph = true}, cg = {.create_graph = true};
        OK(tg_grad(&d, 1, &y, &g, 1, &x, &keep));
        OK(tg_grad(&dg, 1, &y, &g, 1, &x, &cg));
        for (int i = 0; i < N; i++) {
            const double w = th_at(dg, i);
            cr_assert(fabs(th_at(d, i) - w) <= 1e-15 * (fabs(w) + fabs(gs[i])),
                      "op %d x=%g: %.17g, recorded %.17g", f, xs[i], th_at(d, i), w);
        }
        th_release_all(3, (tg_tensor *[]){y, d, dg});
    }
    th_release_all(2, (tg_tensor *[]){x, g});
}

/* exp saves its output, as PyTorch's: writing into it before backward is
 * TG_EINPLACE naming the op. */
Test(unary_simd, exp_checks_its_saved_output)
{
    tg_tensor *x = th_seq(TG_F32, 1, (int64_t[]){5}, -1, 1), *y = NULL;
    OK(tg_tensor_set_requires_grad(x, true));
    OK(tg_exp(&y, x));
    OK(tg_tensor_fill(y, 0.5));
    cr_assert(eq(int, tg_backward(y, y, NULL), TG_EINPLACE));
    cr_assert(strstr(tg_error_message(), "exp: saved tensor #0") != NULL, "%s",
              tg_error_message());
    th_release_all(2, (tg_tensor *[]){x, y});
}
