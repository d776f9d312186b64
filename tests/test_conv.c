/* tests/test_conv.c - ConvNd / ConvTransposeNd, N = 1, 2, 3.
 *
 * The oracle is a pair of naive direct loops written here (ConvTranspose in
 * its scatter form y[o] += x[i] * W[k] for o = i*stride - lo + k*dilation,
 * Conv in its gather form), run in double on a parameter sweep against both
 * algorithms; plus the adjoint identity and hand-computed cases (gradients:
 * test_conv_grad.c; sizes, layouts, caller errors and AMP policies:
 * test_conv_api.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "helpers.h"
#include "conv_fixtures.h"
#include "core/core.h"
#include "tapegrad/tapegrad.h"
#include "ops/conv_internal.h"
#include "tapegrad/autograd.h"
#include "tapegrad/conv.h"
#include "tapegrad/ops.h"

/* ---- helpers ---- */

static double rnd(void) { return th_uniform_pm1(&rng_state); }
static int64_t rnd_int(int64_t lo, int64_t hi) /* inclusive */
{
    return lo + (int64_t)((rnd() + 1.0) / 2.0 * (double)(hi - lo + 1)) % (hi - lo + 1);
}

static double act_ref(double v, tg_activation a, double slope)
{
    switch (a) {
    case TG_ACT_RELU: return v > 0 ? v : 0;
    case TG_ACT_LEAKY_RELU: return v > 0 ? v : slope * v;
    case TG_ACT_TANH: return tanh(v);
    case TG_ACT_SIGMOID: return 1 / (1 + exp(-v));
    case TG_ACT_SILU: return v / (1 + exp(-v));
    case TG_ACT_GELU: return 0.5 * v * (1 + erf(v / sqrt(2.0)));
    case TG_ACT_GELU_TANH:
        return 0.5 * v * (1 + tanh(sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
    default: return v;
    }
}

/* ---- the naive oracle ----
 * Shapes are padded to 3 spatial axes with leading extent-1 axes (stride 1,
 * dilation 1, padding 0, kernel 1), which leaves every index unchanged. */

typedef struct ax3 { int64_t S[3], K[3], O[3], s[3], d[3], lo[3]; } ax3;

static ax3 axes3(const ccase *c, const int64_t *out_sp)
{
    ax3 a;
    for (int i = 0; i < 3; i++) {
        int j = i - (3 - c->nsp);
        a.S[i] = j < 0 ? 1 : c->S[j];
        a.K[i] = j < 0 ? 1 : c->K[j];
        a.O[i] = j < 0 ? 1 : out_sp[j];
        a.s[i] = j < 0 ? 1 : c->p.stride[j];
        a.d[i] = j < 0 ? 1 : c->p.dilation[j];
        a.lo[i] = j < 0 ? 0 : c->p.padding[j][0];
    }
    return a;
}

static int64_t at3(const int64_t *e, int64_t a, int64_t b, int64_t c) { return (a * e[1] + b) * e[2] + c; }

/* ConvTranspose, scatter form: y (B, cout, O) += x (B, cin, S) * w (cin, cout/G, K). */
static void naive_conv_transpose(const ccase *c, const int64_t *out_sp, const double *x,
                                 const double *w, const double *b, double *y)
{
    ax3 a = axes3(c, out_sp);
    int64_t cig = c->cin / c->groups, cog = c->cout / c->groups;
    int64_t ssz = a.S[0] * a.S[1] * a.S[2], osz = a.O[0] * a.O[1] * a.O[2],
            ksz = a.K[0] * a.K[1] * a.K[2];
    memset(y, 0, sizeof(double) * (size_t)(c->B * c->cout * osz));
    for (int64_t bb = 0; bb < c->B; bb++)
    for (int64_t ci = 0; ci < c->cin; ci++)
    for (int64_t col = 0; col < cog; col++)
    for (int64_t i0 = 0; i0 < a.S[0]; i0++) for (int64_t i1 = 0; i1 < a.S[1]; i1++)
    for (int64_t i2 = 0; i2 < a.S[2]; i2++)
    for (int64_t k0 = 0; k0 < a.K[0]; k0++) for (int64_t k1 = 0; k1 < a.K[1]; k1++)
    for (int64_t k2 = 0; k2 < a.K[2]; k2++) {
        int64_t o0 = i0 * a.s[0] - a.lo[0] + k0 * a.d[0];
        int64_t o1 = i1 * a.s[1] - a.lo[1] + k1 * a.d[1];
        int64_t o2 = i2 * a.s[2] - a.lo[2] + k2 * a.d[2];
        if (o0 < 0 || o0 >= a.O[0] || o1 < 0 || o1 >= a.O[1] || o2 < 0 || o2 >= a.O[2]) continue;
        int64_t co = (ci / cig) * cog + col;
        y[(bb * c->cout + co) * osz + at3(a.O, o0, o1, o2)] +=
            x[(bb * c->cin + ci) * ssz + at3(a.S, i0, i1, i2)] *
            w[(ci * cog + col) * ksz + at3(a.K, k0, k1, k2)];
    }
    for (int64_t i = 0; i < c->B * c->cout * osz; i++)
        y[i] = act_ref(y[i] + (b ? b[(i / osz) % c->cout] : 0), c->p.act, c->p.act_slope);
}

/* Conv, gather form: y (B, cout, O) = sum x (B, cin, S) * w (cout, cin/G, K). */
static void naive_conv(const ccase *c, const int64_t *out_sp, const double *x,
                       const double *w, const double *b, double *y)
{
    ax3 a = axes3(c, out_sp);
    int64_t cig = c->cin / c->groups, cog = c->cout / c->groups;
    int64_t ssz = a.S[0] * a.S[1] * a.S[2], osz = a.O[0] * a.O[1] * a.O[2],
            ksz = a.K[0] * a.K[1] * a.K[2];
    for (int64_t bb = 0; bb < c->B; bb++)
    for (int64_t co = 0; co < c->cout; co++)
    for (int64_t o0 = 0; o0 < a.O[0]; o0++) for (int64_t o1 = 0; o1 < a.O[1]; o1++)
    for (int64_t o2 = 0; o2 < a.O[2]; o2++) {
        double acc = b ? b[co] : 0;
        for (int64_t cil = 0; cil < cig; cil++)
        for (int64_t k0 = 0; k0 < a.K[0]; k0++) for (int64_t k1 = 0; k1 < a.K[1]; k1++)
        for (int64_t k2 = 0; k2 < a.K[2]; k2++) {
            int64_t i0 = o0 * a.s[0] - a.lo[0] + k0 * a.d[0];
            int64_t i1 = o1 * a.s[1] - a.lo[1] + k1 * a.d[1];
            int64_t i2 = o2 * a.s[2] - a.lo[2] + k2 * a.d[2];
            if (i0 < 0 || i0 >= a.S[0] || i1 < 0 || i1 >= a.S[1] || i2 < 0 || i2 >= a.S[2]) continue;
            int64_t ci = (co / cog) * cig + cil;
            acc += x[(bb * c->cin + ci) * ssz + at3(a.S, i0, i1, i2)] *
                   w[(co * cig + cil) * ksz + at3(a.K, k0, k1, k2)];
        }
        y[(bb * c->cout + co) * osz + at3(a.O, o0, o1, o2)] = act_ref(acc, c->p.act, c->p.act_slope);
    }
}

/* A random case; transposed cases get a valid output_padding. */
static ccase random_case(int nsp, bool transpose)
{
    ccase c = {.nsp = nsp, .B = rnd_int(1, 3)};
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    c.groups = rnd_int(1, 3) == 3 ? 2 : 1;
    c.cin = c.groups * rnd_int(1, 2);
    c.cout = c.groups * rnd_int(1, 2);
    if (rnd_int(0, 5) == 0) c.groups = c.cin = c.cout = 3;   /* depthwise */
    for (int a = 0; a < nsp; a++) {
        c.S[a] = rnd_int(nsp == 3 ? 2 : 3, nsp == 3 ? 4 : 6);
        c.K[a] = rnd_int(1, 3);
        p.stride[a] = rnd_int(1, 3);
        p.dilation[a] = rnd_int(1, 2);
        p.padding[a][0] = rnd_int(0, 2);
        p.padding[a][1] = rnd_int(0, 2);
        int64_t lim = p.stride[a] > p.dilation[a] ? p.stride[a] : p.dilation[a];
        if (transpose) p.output_padding[a] = rnd_int(0, lim - 1);
    }
    p.groups = c.groups;
    p.act = (tg_activation)rnd_int(0, TG_ACT_COUNT - 1);
    p.act_slope = 0.2;
    c.p = p;
    c.bias = rnd_int(0, 1);
    return c;
}

/* Runs the op with the given algo and compares with the oracle; returns the
 * number of cases actually run. */
static int check_case(const ccase *c, bool transpose, tg_dtype dt)
{
    built r = build(c, transpose, dt);
    if (!r.ok) return 0;
    double *x = th_doubles(r.x), *w = th_doubles(r.w), *b = r.b ? th_doubles(r.b) : NULL;
    int64_t n = c->B * c->cout * r.out_sp[0] * (c->nsp > 1 ? r.out_sp[1] : 1) *
                (c->nsp > 2 ? r.out_sp[2] : 1);
    double *want = malloc(sizeof(double) * (size_t)n);
    if (transpose) naive_conv_transpose(c, r.out_sp, x, w, b, want);
    else naive_conv(c, r.out_sp, x, w, b, want);
    const double tol = dt == TG_F64 ? 1e-12 : 1e-5;
    for (int algo = TG_CONV_ALGO_FAST; algo <= (transpose ? TG_CONV_ALGO_REFERENCE : TG_CONV_ALGO_FAST); algo++) {
        tg_conv_params p = c->p;
        p.algo = (tg_conv_algo)algo;
        tg_tensor *y = NULL;
        int rc = transpose ? tg_conv_transpose(&y, r.x, r.w, r.b, &p) : tg_conv(&y, r.x, r.w, r.b, &p);
        cr_assert(eq(int, rc, TG_OK), "%s", tg_error_message());
        cr_assert(eq(i64, tg_tensor_numel(y), n));
        double *got = th_doubles(y);
        for (int64_t i = 0; i < n; i++)
            cr_assert(fabs(got[i] - want[i]) <= tol * (1 + fabs(want[i])),
                      "%s nsp=%d algo=%d dt=%s elem %lld: got %g want %g",
                      transpose ? "convT" : "conv", c->nsp, algo, tg_dtype_name(dt),
                      (long long)i, got[i], want[i]);
        free(got);
        tg_tensor_release(y);
    }
    free(x); free(w); free(b); free(want);
    unbuild(&r);
    return 1;
}

/* The fast kernels cut the batch into chunks of samples (one GEMM per chunk):
 * the sweep forces 2 samples per chunk (a remainder chunk when B = 3), one
 * (the per-sample path) and the automatic size (whole batch here). */
Test(conv, sweep_matches_naive_oracle)
{
    int run = 0;
    for (int it = 0; it < 60; it++)
        for (int nsp = 1; nsp <= 3; nsp++)
            for (int t = 0; t < 2; t++) {
                ccase c = random_case(nsp, t);
                tg__conv_set_chunk((it + nsp) % 3);
                run += check_case(&c, t, it % 2 ? TG_F32 : TG_F64);
            }
    tg__conv_set_chunk(0);
    cr_assert(run > 250, "only %d cases ran", run);
}

Test(conv, stride2_dilation2_and_op_beyond_stride)
{
    for (int nsp = 1; nsp <= 3; nsp++) {
        ccase c = {.nsp = nsp, .B = 2, .cin = 4, .cout = 2, .groups = 2, .bias = true};
        tg_conv_params p = TG_CONV_PARAMS_INIT;
        for (int a = 0; a < nsp; a++) {
            c.S[a] = 3; c.K[a] = 3;
            p.stride[a] = 2; p.dilation[a] = 2; p.output_padding[a] = 1;
            p.padding[a][0] = 1; p.padding[a][1] = 2;
        }
        p.groups = 2;
        c.p = p;
        for (int dt = 0; dt < 2; dt++) {
            cr_assert(eq(int, check_case(&c, true, dt ? TG_F32 : TG_F64), 1));
            cr_assert(eq(int, check_case(&c, false, dt ? TG_F32 : TG_F64), 1));
        }
        /* output_padding 1 >= stride 1 is allowed when dilation is 2 */
        for (int a = 0; a < nsp; a++) c.p.stride[a] = 1;
        cr_assert(eq(int, check_case(&c, true, TG_F64), 1));
    }
}

Test(conv, fast_equals_reference_f64)
{
    for (int it = 0; it < 40; it++) {
        ccase c = random_case(1 + it % 3, true);
        built r = build(&c, true, TG_F64);
        if (!r.ok) continue;
        tg_tensor *y[2] = {NULL, NULL};
        for (int k = 0; k < 2; k++) {
            tg_conv_params p = c.p;
            p.algo = k ? TG_CONV_ALGO_REFERENCE : TG_CONV_ALGO_FAST;
            cr_assert(eq(int, tg_conv_transpose(&y[k], r.x, r.w, r.b, &p), TG_OK));
        }
        double *a = th_doubles(y[0]), *b = th_doubles(y[1]);
        for (int64_t i = 0; i < tg_tensor_numel(y[0]); i++)
            cr_assert(epsilon_eq(dbl, a[i], b[i], 1e-12));
        free(a); free(b);
        tg_tensor_release(y[0]); tg_tensor_release(y[1]);
        unbuild(&r);
    }
}

/* y of conv_transpose under algo, a new reference. */
static tg_tensor *convt_with(const ccase *c, const built *r, tg_conv_algo algo)
{
    tg_conv_params p = c->p;
    p.algo = algo;
    tg_tensor *y = NULL;
    cr_assert(eq(int, tg_conv_transpose(&y, r->x, r->w, r->b, &p), TG_OK), "%s",
              tg_error_message());
    return y;
}

Test(conv, env_var_selects_algo)
{
    unsetenv("TG_CONV_ALGO");
    cr_assert(eq(int, tg__conv_resolve_algo(TG_CONV_ALGO_DEFAULT), TG_CONV_ALGO_FAST));
    setenv("TG_CONV_ALGO", "reference", 1);
    cr_assert(eq(int, tg__conv_resolve_algo(TG_CONV_ALGO_DEFAULT), TG_CONV_ALGO_REFERENCE));
    cr_assert(eq(int, tg__conv_resolve_algo(TG_CONV_ALGO_FAST), TG_CONV_ALGO_FAST));
    setenv("TG_CONV_ALGO", "fast", 1);
    cr_assert(eq(int, tg__conv_resolve_algo(TG_CONV_ALGO_DEFAULT), TG_CONV_ALGO_FAST));
    cr_assert(eq(int, tg__conv_resolve_algo(TG_CONV_ALGO_REFERENCE), TG_CONV_ALGO_REFERENCE));
    /* End to end: on a case where the two paths round differently (f32), the
     * default algo gives the bits of the path the variable names. */
    int seen = 0;
    for (int it = 0; it < 40 && !seen; it++) {
        ccase c = random_case(2, true);
        built r = build(&c, true, TG_F32);
        if (!r.ok) continue;
        unsetenv("TG_CONV_ALGO");
        tg_tensor *fast = convt_with(&c, &r, TG_CONV_ALGO_FAST);
        tg_tensor *ref = convt_with(&c, &r, TG_CONV_ALGO_REFERENCE);
        if (!th_same_bits(fast, ref)) {
            seen++;
            tg_tensor *d = convt_with(&c, &r, TG_CONV_ALGO_DEFAULT);
            cr_assert(th_same_bits(d, fast), "default without TG_CONV_ALGO is not the fast path");
            tg_tensor_release(d);
            setenv("TG_CONV_ALGO", "reference", 1);
            d = convt_with(&c, &r, TG_CONV_ALGO_DEFAULT);
            cr_assert(th_same_bits(d, ref),
                      "TG_CONV_ALGO=reference did not select the reference path");
            tg_tensor_release(d);
            setenv("TG_CONV_ALGO", "fast", 1);
            d = convt_with(&c, &r, TG_CONV_ALGO_DEFAULT);
            cr_assert(th_same_bits(d, fast), "TG_CONV_ALGO=fast did not select the fast path");
            tg_tensor_release(d);
        }
        tg_tensor_release(fast), tg_tensor_release(ref);
        unbuild(&r);
    }
    unsetenv("TG_CONV_ALGO");
    cr_assert(seen, "no case where the fast and reference paths differ in f32");
}

/* <conv(z, W), x> = <z, conv_transpose(x, W)>: z has conv_transpose's output
 * extents, x conv's (output_padding < stride makes them agree). */
Test(conv, adjoint_identity_f64)
{
    for (int it = 0; it < 30; it++) {
        ccase c = random_case(1 + it % 3, true);
        c.p.act = TG_ACT_NONE;
        c.bias = false;
        for (int a = 0; a < c.nsp; a++) c.p.output_padding[a] %= c.p.stride[a];
        built r = build(&c, true, TG_F64);
        if (!r.ok) continue;
        int64_t zs[5] = {c.B, c.cout, r.out_sp[0], r.out_sp[1], r.out_sp[2]};
        tg_tensor *z = mk_rand(TG_F64, c.nsp + 2, zs), *cz = NULL, *tx = NULL;
        cr_assert(eq(int, tg_conv(&cz, z, r.w, NULL, &c.p), TG_OK), "%s", tg_error_message());
        cr_assert(eq(int, tg_conv_transpose(&tx, r.x, r.w, NULL, &c.p), TG_OK));
        cr_assert(eq(i64, tg_tensor_numel(cz), tg_tensor_numel(r.x)));
        double *a = th_doubles(cz), *x = th_doubles(r.x), *b = th_doubles(tx), *zz = th_doubles(z);
        double lhs = 0, rhs = 0;
        for (int64_t i = 0; i < tg_tensor_numel(cz); i++) lhs += a[i] * x[i];
        for (int64_t i = 0; i < tg_tensor_numel(z); i++) rhs += zz[i] * b[i];
        cr_assert(epsilon_eq(dbl, lhs, rhs, 1e-10 * (1 + fabs(lhs))), "%g vs %g", lhs, rhs);
        free(a); free(x); free(b); free(zz);
        tg_tensor_release(z); tg_tensor_release(cz); tg_tensor_release(tx);
        unbuild(&r);
    }
}

/* conv_transpose1d, x = [1, 2, 3], w = [1, 10, 100], stride 2, padding
 * (lo 1, hi 0).  Scatter y_full[2i + k] += x[i] w[k]:
 *   i=0: p0 1, p1 10, p2 100;  i=1: p2 2, p3 20, p4 200;  i=2: p4 3, p5 30, p6 300
 *   y_full = [1, 10, 102, 20, 203, 30, 300]  (extent (3-1)*2 + 3 = 7).
 * lo = 1 crops the first entry, hi = 0 nothing: y = [10, 102, 20, 203, 30, 300]
 * (extent (3-1)*2 - 1 - 0 + 2 + 1 = 6).
 * conv1d, x = [1, 2, 3, 4], w = [1, 10], padding (lo 2, hi 0): the padded input
 * is [0, 0, 1, 2, 3, 4] and y[o] = xp[o] + 10 xp[o+1] = [0, 10, 21, 32, 43]. */
Test(conv, asymmetric_padding_by_hand)
{
    const double xv[3] = {1, 2, 3}, wv[3] = {1, 10, 100};
    const double want_t[6] = {10, 102, 20, 203, 30, 300};
    int64_t xs[3] = {1, 1, 3}, ws[3] = {1, 1, 3};
    tg_tensor *x = th_tensor_from(TG_F64, 3, xs, xv), *w = th_tensor_from(TG_F64, 3, ws, wv), *y;
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    p.stride[0] = 2;
    p.padding[0][0] = 1;
    for (int algo = TG_CONV_ALGO_FAST; algo <= TG_CONV_ALGO_REFERENCE; algo++) {
        p.algo = (tg_conv_algo)algo;
        y = NULL;
        cr_assert(eq(int, tg_conv_transpose(&y, x, w, NULL, &p), TG_OK));
        cr_assert(eq(i64, tg_tensor_dim(y, 2), 6));
        double *v = th_doubles(y);
        for (int i = 0; i < 6; i++) cr_assert(ieee_ulp_eq(dbl, v[i], want_t[i], 0));
        free(v);
        tg_tensor_release(y);
    }
    tg_tensor_release(x);
    tg_tensor_release(w);

    const double xv2[4] = {1, 2, 3, 4}, wv2[2] = {1, 10}, want_c[5] = {0, 10, 21, 32, 43};
    int64_t xs2[3] = {1, 1, 4}, ws2[3] = {1, 1, 2};
    x = th_tensor_from(TG_F32, 3, xs2, xv2);
    w = th_tensor_from(TG_F32, 3, ws2, wv2);
    tg_conv_params q = TG_CONV_PARAMS_INIT;
    q.padding[0][0] = 2;
    y = NULL;
    cr_assert(eq(int, tg_conv(&y, x, w, NULL, &q), TG_OK));
    cr_assert(eq(i64, tg_tensor_dim(y, 2), 5));
    double *v = th_doubles(y);
    for (int i = 0; i < 5; i++) cr_assert(ieee_ulp_eq(dbl, v[i], want_c[i], 0));
    free(v);
    tg_tensor_release(y);
    tg_tensor_release(x);
    tg_tensor_release(w);
}

/* f16 / bf16 compute in f32 and round once: equal to the f32 result rounded. */
Test(conv, half_dtypes_round_once)
{
    ccase c = random_case(2, true);
    built r = build(&c, true, TG_F32);
    while (!r.ok) { c = random_case(2, true); r = build(&c, true, TG_F32); }
    tg_tensor *ref = NULL;
    cr_assert(eq(int, tg_conv_transpose(&ref, r.x, r.w, r.b, &c.p), TG_OK));
    double *want = th_doubles(ref);
    tg_dtype dts[2] = {TG_F16, TG_BF16};
    for (int k = 0; k < 2; k++) {
        /* inputs exactly representable: round them first, then compare */
        tg_tensor *x = NULL, *w = NULL, *b = NULL, *y = NULL, *x32 = NULL, *w32 = NULL,
                  *b32 = NULL, *y32 = NULL;
        tg_tensor_to_dtype(&x, r.x, dts[k]);
        tg_tensor_to_dtype(&w, r.w, dts[k]);
        if (r.b) tg_tensor_to_dtype(&b, r.b, dts[k]);
        tg_tensor_to_dtype(&x32, x, TG_F32);
        tg_tensor_to_dtype(&w32, w, TG_F32);
        if (b) tg_tensor_to_dtype(&b32, b, TG_F32);
        cr_assert(eq(int, tg_conv_transpose(&y, x, w, b, &c.p), TG_OK));
        cr_assert(eq(int, tg_tensor_dtype(y), dts[k]));
        cr_assert(eq(int, tg_conv_transpose(&y32, x32, w32, b32, &c.p), TG_OK));
        double *got = th_doubles(y), *w2 = th_doubles(y32);
        for (int64_t i = 0; i < tg_tensor_numel(y); i++) {
            double rounded = dts[k] == TG_F16 ? tg_f16_to_f32(tg_f32_to_f16((float)w2[i]))
                                              : tg_bf16_to_f32(tg_f32_to_bf16((float)w2[i]));
            cr_assert(ieee_ulp_eq(dbl, got[i], rounded, 0));
        }
        free(got); free(w2);
        tg_tensor *all[8] = {x, w, b, y, x32, w32, b32, y32};
        for (int i = 0; i < 8; i++) tg_tensor_release(all[i]);
    }
    free(want);
    tg_tensor_release(ref);
    unbuild(&r);
}

