/* tests/test_unary_math.c - the rounding ops (sign, floor, ceil, round,
 * trunc), the elementwise math ops (reciprocal, rsqrt, tan, atan, asin,
 * acos, sinh, cosh, asinh, acosh, atanh, log2, log10, exp2, logsigmoid),
 * atan2 and lerp: values and gradients against PyTorch in f32, f64 and bf16
 * (random values, +-0, +-inf, NaN and each op's domain edges, broadcasting;
 * lerp's kernel bit for bit),
 * round's ties to even, f16, derivatives to second order by finite
 * differences, integer inputs of the rounding ops, neg and abs (i8, u8,
 * i32, i64, torch's integers, not recorded), and the refusals.
 * Goldens: scripts/make_unary_math_goldens.py. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

typedef int (*unary_fn)(tg_tensor **, tg_tensor *);

/* Each op with its function, whether it rounds (exact values, zero
 * gradient) and the range of its f64 gradcheck inputs. */
static const struct {
    const char *name;
    unary_fn f;
    bool rounding;
    double lo, hi;
} ops[] = {
    {"sign", tg_sign, true, -3, 3},         {"floor", tg_floor, true, -3, 3},
    {"ceil", tg_ceil, true, -3, 3},         {"round", tg_round, true, -3, 3},
    {"trunc", tg_trunc, true, -3, 3},       {"reciprocal", tg_reciprocal, false, 0.5, 2},
    {"rsqrt", tg_rsqrt, false, 0.5, 2},     {"tan", tg_tan, false, -1.2, 1.2},
    {"atan", tg_atan, false, -3, 3},        {"asin", tg_asin, false, -0.9, 0.9},
    {"acos", tg_acos, false, -0.9, 0.9},    {"sinh", tg_sinh, false, -2, 2},
    {"cosh", tg_cosh, false, -2, 2},        {"asinh", tg_asinh, false, -3, 3},
    {"acosh", tg_acosh, false, 1.2, 4},     {"atanh", tg_atanh, false, -0.9, 0.9},
    {"log2", tg_log2, false, 0.2, 5},       {"log10", tg_log10, false, 0.2, 5},
    {"exp2", tg_exp2, false, -3, 3},        {"logsigmoid", tg_logsigmoid, false, -5, 5},
};
#define NOPS ((int)(sizeof ops / sizeof ops[0]))

static int op_index(const char *name)
{
    for (int i = 0; i < NOPS; i++)
        if (!strcmp(ops[i].name, name)) return i;
    cr_assert(false, "golden op %s has no entry here", name);
    return -1;
}

/* got within rtol of want relative to want itself (no absolute slack but
 * the smallest normal of the dtype); NaN matches NaN, an infinity itself,
 * and a zero of y keeps its sign. */
static void expect_rel(const char *what, const tg_tensor *x, const tg_tensor *got,
                       const tg_tensor *want, double rtol, double tiny, bool zero_sign)
{
    cr_assert(eq(int, tg_tensor_dtype(got), tg_tensor_dtype(want)), "%s: dtype", what);
    cr_assert(tg_tensor_same_shape(got, want), "%s: shape", what);
    for (int64_t k = 0; k < tg_tensor_numel(want); k++) {
        const double g = th_at(got, k), w = th_at(want, k);
        cr_assert(th_close(g, w, rtol, tiny), "%s[%lld]: x = %.9g gives %.17g, torch %.17g",
                  what, (long long)k, th_at(x, k), g, w);
        if (zero_sign && w == 0)
            cr_assert(g == 0 && signbit(g) == signbit(w), "%s[%lld]: x = %.9g gives %g, "
                      "torch %g", what, (long long)k, th_at(x, k), g, w);
    }
}

/* Rounding ops are exact, with torch's zero gradient.  The others within a
 * few units in the last place: torch's f32 kernels compute in f32 (one
 * rounding more), bf16 rounds the f32 result again and its gradient
 * rounds at each op. */
Test(unary_math, every_op_matches_torch)
{
    tg_st_file *f = th_golden_load("unary_math.safetensors");
    char list[512];
    snprintf(list, sizeof list, "%s", tg_st_meta_get(f, "ops"));
    static const char *const dts[] = {"f64", "f32", "bf16"};
    int seen = 0;
    for (char *op = list, *next; op && *op; op = next) {
        next = strchr(op, ',');
        if (next) *next++ = '\0';
        const int oi = op_index(op);
        for (int d = 0; d < 3; d++) {
            char c[48];
            snprintf(c, sizeof c, "%.32s.%s", op, dts[d]);
            tg_tensor *x = th_leaf_clone(th_golden_get(f, c, "x")), *y = NULL, *p = NULL;
            tg_tensor *l = NULL;
            OK(ops[oi].f(&y, x));
            OK(tg_mul(&p, y, (tg_tensor *)th_golden_get(f, c, "g")));
            OK(tg_sum(&l, p));
            OK(tg_backward(l, NULL, NULL));
            const double rtol = ops[oi].rounding ? 0 : d == 0 ? 4e-15 : d == 1 ? 5e-7 : 1.0 / 64;
            const double tiny = d == 0 ? 0x1p-1022 : 0x1p-126;
            char what[64];
            snprintf(what, sizeof what, "%s y", c);
            expect_rel(what, x, y, th_golden_get(f, c, "y"), rtol, tiny, true);
            snprintf(what, sizeof what, "%s dx", c);
            expect_rel(what, x, tg_tensor_grad(x), th_golden_get(f, c, "dx"),
                       ops[oi].rounding ? 0 : 4 * rtol, tiny, ops[oi].rounding);
            th_release_all(4, (tg_tensor *[]){x, y, p, l});
        }
        seen++;
    }
    cr_assert(eq(int, seen, NOPS), "the goldens cover %d of %d ops", seen, NOPS);
    tg_st_free(f);
}

/* round takes halves to the even neighbour and keeps -0.0 (round(-0.4) is
 * -0.0); floor, ceil and trunc of a half; the same bits in f16. */
Test(unary_math, rounding_halves_and_f16)
{
    static const double x[] = {0.5, 1.5, 2.5, -0.5, -1.5, -2.5, -0.4, 0.4, -0.0};
    static const double want[4][9] = {
        {0, 2, 2, -0.0, -2, -2, -0.0, 0, -0.0},   /* round */
        {0, 1, 2, -1, -2, -3, -1, 0, -0.0},       /* floor */
        {1, 2, 3, -0.0, -1, -2, -0.0, 1, -0.0},   /* ceil */
        {0, 1, 2, -0.0, -1, -2, -0.0, 0, -0.0},   /* trunc */
    };
    const unary_fn fs[4] = {tg_round, tg_floor, tg_ceil, tg_trunc};
    const tg_dtype dts[2] = {TG_F32, TG_F16};
    for (int d = 0; d < 2; d++)
        for (int k = 0; k < 4; k++) {
            tg_tensor *t = th_vec(dts[d], 9, x, "x", false), *y = NULL;
            OK(fs[k](&y, t));
            cr_assert(eq(int, tg_tensor_dtype(y), dts[d]));
            for (int i = 0; i < 9; i++)
                cr_assert(th_at(y, i) == want[k][i] && signbit(th_at(y, i)) == signbit(want[k][i]),
                          "op %d dtype %d: x = %g gives %g, want %g", k, d, x[i], th_at(y, i),
                          want[k][i]);
            th_release_all(2, (tg_tensor *[]){t, y});
        }
    tg_tensor *t = th_vec(TG_F16, 4, (double[]){-3, 0, NAN, 65504}, "x", false), *y = NULL;
    OK(tg_sign(&y, t));
    for (int i = 0; i < 4; i++)
        cr_assert(eq(dbl, th_at(y, i), ((double[]){-1, 0, 0, 1})[i]), "sign[%d]", i);
    th_release_all(2, (tg_tensor *[]){t, y});
}

static int apply(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    return ops[*(const int *)user].f(out, in[0]);
}

/* Every op in f64 on (3, 4) values in its range: first derivatives and,
 * through the differentiable backwards, second ones.  The rounding ops'
 * zero gradient is checked away from their jumps (x within 0.1 of a
 * multiple of 1/2 moved by 0.25). */
Test(unary_math, gradcheck_and_gradgradcheck)
{
    uint64_t s = 61;
    for (int i = 0; i < NOPS; i++) {
        tg_tensor *x = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){3, 4}, ops[i].lo, ops[i].hi);
        for (int64_t k = 0; ops[i].rounding && k < tg_tensor_numel(x); k++) {
            const double v = th_at(x, k), r = v * 2 - nearbyint(v * 2);
            if (fabs(r) < 0.2) OK(tg_tensor_set_flat(x, k, v + 0.25));
        }
        OK(tg_tensor_set_requires_grad(x, true));
        tg_gradcheck_opts o = TG_GRADCHECK_OPTS_INIT;
        cr_assert(eq(int, tg_gradcheck(apply, &i, 1, &x, &o), TG_OK), "%s: %s",
                  ops[i].name, tg_error_message());
        cr_assert(eq(int, tg_gradgradcheck(apply, &i, 1, &x, &o), TG_OK),
                  "%s: %s", ops[i].name, tg_error_message());
        tg_tensor_release(x);
    }
}

/* The rounding ops' gradient is zero also at the jumps and at +-inf and
 * NaN (torch's zeros_like), and its own gradient is zero. */
Test(unary_math, rounding_gradient_is_zero_everywhere)
{
    static const double v[] = {0.5, 1.0, -2.5, 0.0, INFINITY, NAN};
    for (int i = 0; i < 5; i++) {
        tg_tensor *x = th_vec(TG_F64, 6, v, "x", true), *y = NULL, *l = NULL;
        OK(ops[i].f(&y, x));
        OK(tg_sum(&l, y));
        OK(tg_backward(l, NULL, NULL));
        for (int k = 0; k < 6; k++)
            cr_assert(th_at(tg_tensor_grad(x), k) == 0 && !signbit(th_at(tg_tensor_grad(x), k)),
                      "%s'(%g) = %g", ops[i].name, v[k], th_at(tg_tensor_grad(x), k));
        th_release_all(3, (tg_tensor *[]){x, y, l});
    }
}

/* The AMP policies: FP32 where torch's autocast has the op in its fp32 list
 * (exp2 as exp), KEEP for the rest. */
Test(unary_math, amp_policies)
{
    static const char *const fp32[] = {"reciprocal", "rsqrt", "tan", "asin", "acos",
                                       "sinh", "cosh", "log2", "log10", "exp2"};
    for (int i = 0; i < NOPS; i++) {
        tg_op_info info;
        OK(tg_op_info_find(ops[i].name, &info));
        bool want_fp32 = false;
        for (size_t k = 0; k < sizeof fp32 / sizeof fp32[0]; k++)
            want_fp32 |= !strcmp(fp32[k], ops[i].name);
        cr_assert(eq(int, info.amp, want_fp32 ? TG_AMP_FP32 : TG_AMP_KEEP), "%s", ops[i].name);
        cr_assert(info.has_backward && info.has_double_backward, "%s", ops[i].name);
    }
}

/* A NULL input is TG_EINVAL, *out staying NULL; an integer one gives f32
 * for the math ops, as torch's (tests/test_int_promote.c compares the
 * values), but for logsigmoid, TG_EDTYPE as torch's.  The rounding ops keep
 * an integer's dtype (below). */
Test(unary_math, refusals)
{
    tg_tensor *xi = NULL;
    OK(tg_tensor_zeros(&xi, TG_I32, 1, (int64_t[]){3}));
    tg_tensor *xu = NULL;
    OK(tg_tensor_zeros(&xu, TG_U8, 1, (int64_t[]){2}));
    for (int i = 0; i < NOPS; i++) {
        tg_tensor *y = NULL;
        char want[64];
        snprintf(want, sizeof want, "%s: input 0 is NULL", ops[i].name);
        th_expect_refused(ops[i].f(&y, NULL), TG_EINVAL, want, y);
        if (ops[i].rounding) continue;
        if (!strcmp(ops[i].name, "logsigmoid")) {
            snprintf(want, sizeof want, "%s: input 0 has dtype i32", ops[i].name);
            th_expect_refused(ops[i].f(&y, xi), TG_EDTYPE, want, y);
            th_expect_refused(ops[i].f(&y, xu), TG_EDTYPE, ops[i].name, y);
            continue;
        }
        for (int k = 0; k < 2; k++) {
            OK(ops[i].f(&y, k ? xu : xi));
            cr_assert(eq(int, tg_tensor_dtype(y), TG_F32), "%s", ops[i].name);
            tg_tensor_release(y);
            y = NULL;
        }
    }
    th_release_all(2, (tg_tensor *[]){xi, xu});
}

/* The ops that take an integer input, as torch's: the rounding ops, neg
 * and abs. */
static const struct {
    const char *name;
    unary_fn f;
} int_ops[] = {{"sign", tg_sign}, {"floor", tg_floor}, {"ceil", tg_ceil}, {"round", tg_round},
               {"trunc", tg_trunc}, {"abs", tg_abs}, {"neg", tg_neg}};
#define NINT ((int)(sizeof int_ops / sizeof int_ops[0]))

/* An integer x gives torch's integers bit for bit (the extremes, i64 values
 * beyond 2^53, random ones; sign of u8 0 or 1, neg and abs wrapping), in
 * x's dtype: a new tensor (writing it leaves x alone), a leaf that does not
 * require grad with grad mode on. */
Test(unary_math, integer_inputs_match_torch)
{
    tg_st_file *f = th_golden_load("unary_math.safetensors");
    char list[128];
    snprintf(list, sizeof list, "%s", tg_st_meta_get(f, "int_ops"));
    static const char *const dts[] = {"i8", "u8", "i32", "i64"};
    static const tg_dtype dtv[] = {TG_I8, TG_U8, TG_I32, TG_I64};
    int seen = 0;
    for (char *save = NULL, *op = strtok_r(list, ",", &save); op; op = strtok_r(NULL, ",", &save)) {
        int i = 0;
        while (i < NINT && strcmp(int_ops[i].name, op)) i++;
        cr_assert(i < NINT, "golden op %s has no entry here", op);
        for (int k = 0; k < 4; k++) {
            char p[32], what[48];
            snprintf(p, sizeof p, "int.%s", dts[k]);
            snprintf(what, sizeof what, "%s(%s)", op, dts[k]);
            const tg_tensor *x = th_golden_get(f, p, "x");
            cr_assert(eq(int, tg_tensor_dtype(x), dtv[k]), "%s: the golden x's dtype", what);
            tg_tensor *y = NULL;
            OK(int_ops[i].f(&y, (tg_tensor *)x));
            th_expect_same_tensor_bytes(what, y, th_golden_get(f, p, op));
            cr_assert(tg_tensor_is_leaf(y) && !tg_tensor_requires_grad(y), "%s is recorded",
                      what);
            cr_assert(tg_tensor_cdata(y) != tg_tensor_cdata(x), "%s shares x's data", what);
            tg_tensor_release(y);
            seen++;
        }
    }
    cr_assert(eq(int, seen, 4 * NINT));
    tg_st_free(f);
}

/* A strided integer x (every other column of a transposed matrix) gives a
 * contiguous result of the picked elements; more than 32k elements (the
 * parallel path) each get their own value. */
Test(unary_math, integer_inputs_strided_and_large)
{
    tg_tensor *m = th_tensor_from(TG_I32, 2, (int64_t[]){2, 3},
                                  (double[]){-5, 0, 7, INT32_MIN, 1, -1});
    tg_tensor *t = NULL, *v = NULL, *y = NULL;
    OK(tg_transpose(&t, m, 0, 1));                   /* (3, 2) */
    OK(tg_slice(&v, t, 0, 0, 3, 2));                 /* rows 0 and 2: -5 INT32_MIN, 7 -1 */
    OK(tg_neg(&y, v));
    cr_assert(tg_tensor_is_contiguous(y));
    const int32_t want[4] = {5, INT32_MIN, -7, 1};
    cr_assert(memcmp(tg_tensor_cdata(y), want, sizeof want) == 0, "neg of the strided view");
    th_release_all(4, (tg_tensor *[]){m, t, v, y});

    const int64_t n = 100003;
    tg_tensor *x = NULL, *s = NULL;
    OK(tg_tensor_zeros(&x, TG_I64, 1, (int64_t[]){n}));
    int64_t *xv = tg_tensor_data(x);
    for (int64_t i = 0; i < n; i++) xv[i] = (i % 3 - 1) * (INT64_MAX - i);
    OK(tg_sign(&s, x));
    OK(tg_abs(&y, x));
    const int64_t *sv = tg_tensor_cdata(s), *av = tg_tensor_cdata(y);
    for (int64_t i = 0; i < n; i++) {
        cr_assert(sv[i] == i % 3 - 1, "sign[%lld] = %lld", (long long)i, (long long)sv[i]);
        cr_assert(av[i] == (i % 3 == 1 ? 0 : INT64_MAX - i), "abs[%lld]", (long long)i);
    }
    th_release_all(3, (tg_tensor *[]){x, s, y});
}

/* The golden case c (atan2, atan2_bc, lerp, lerp_bc) in each dtype: n
 * inputs named in[], the output and the gradients named d[]. */
static void expect_case(const tg_st_file *f, const char *c, int n, const char *const *in,
                        const char *const *d)
{
    static const char *const dts[] = {"f64", "f32", "bf16"};
    for (int k = 0; k < 3; k++) {
        char p[48], what[64];
        tg_tensor *x[3] = {NULL, NULL, NULL}, *y = NULL, *gy = NULL, *l = NULL;
        snprintf(p, sizeof p, "%s.%s", c, dts[k]);
        for (int i = 0; i < n; i++) x[i] = th_leaf_clone(th_golden_get(f, p, in[i]));
        OK(n == 2 ? tg_atan2(&y, x[0], x[1]) : tg_lerp(&y, x[0], x[1], x[2]));
        OK(tg_mul(&gy, y, (tg_tensor *)th_golden_get(f, p, "g")));
        OK(tg_sum(&l, gy));
        OK(tg_backward(l, NULL, NULL));
        const double rtol = k == 0 ? 4e-15 : k == 1 ? 5e-7 : 1.0 / 64;
        const double tiny = k == 0 ? 0x1p-1022 : 0x1p-126;
        snprintf(what, sizeof what, "%s out", p);
        const tg_tensor *want = th_golden_get(f, p, "out");
        cr_assert(tg_tensor_same_shape(y, want), "%s: shape", what);
        /* lerp's values are torch's kernel's, bit for bit */
        expect_rel(what, y, y, want, n == 3 ? 0 : rtol, tiny, true);
        for (int i = 0; i < n; i++) {
            snprintf(what, sizeof what, "%s %s", p, d[i]);
            /* bf16: torch sums a broadcast input's terms in bf16, which
             * cancels (lerp_bc's start: 0.0156 for 0.0123), so relative to
             * the largest gradient there */
            if (k == 2) th_expect_close(what, tg_tensor_grad(x[i]), th_golden_get(f, p, d[i]),
                                        4 * rtol);
            else expect_rel(what, x[i], tg_tensor_grad(x[i]), th_golden_get(f, p, d[i]),
                            4 * rtol, tiny, false);
        }
        th_release_all(6, (tg_tensor *[]){x[0], x[1], x[2], y, gy, l});
    }
}

/* atan2 at every pair of +-0, +-inf, NaN, +-1 (atan2(+-0, -0) = +-pi,
 * NaN gradients at the origin) and random points, broadcast (3, 1) with
 * (4); lerp at weights 0, 1, +-0.5, 0.49, 2, -1, NaN, +-inf (w = 0 and
 * w = 1 exact, torch's gradients with an infinite weight, start or end),
 * broadcast (2, 3, 1), (3, 4), (4). */
Test(unary_math, atan2_and_lerp_match_torch)
{
    tg_st_file *f = th_golden_load("unary_math.safetensors");
    expect_case(f, "atan2", 2, (const char *[]){"y_in", "x_in"}, (const char *[]){"dy", "dx"});
    expect_case(f, "atan2_bc", 2, (const char *[]){"y_in", "x_in"},
                (const char *[]){"dy", "dx"});
    const char *const lin[] = {"start", "end", "weight"}, *const ld[] = {"dstart", "dend",
                                                                         "dweight"};
    expect_case(f, "lerp", 3, lin, ld);
    expect_case(f, "lerp_bc", 3, lin, ld);
    tg_st_free(f);
}

/* lerp where torch's kernel and two-rounding or |w|-chosen forms part:
 * weights in [-0.55, -0.45] (the first form for w < 0.5, also below
 * -0.5), around 0.5 and over [-1.5, 2.5].  Values equal in f64, f32 (one
 * fused product and sum) and bf16 (computed in f32, rounded once); the
 * gradients g (1 - w), g w and g (end - start) equal too, each factor
 * rounded in the dtype as torch's. */
Test(unary_math, lerp_is_torchs_fused_kernel)
{
    tg_st_file *f = th_golden_load("unary_math.safetensors");
    static const char *const dts[] = {"f64", "f32", "bf16"};
    static const char *const in[] = {"start", "end", "weight"};
    static const char *const d[] = {"dstart", "dend", "dweight"};
    for (int k = 0; k < 3; k++) {
        char p[48], what[64];
        snprintf(p, sizeof p, "lerp_fused.%s", dts[k]);
        tg_tensor *x[3], *y = NULL, *gy = NULL, *l = NULL;
        for (int i = 0; i < 3; i++) x[i] = th_leaf_clone(th_golden_get(f, p, in[i]));
        OK(tg_lerp(&y, x[0], x[1], x[2]));
        const double tiny = k == 0 ? 0x1p-1022 : 0x1p-126;
        snprintf(what, sizeof what, "%s out", p);
        expect_rel(what, x[2], y, th_golden_get(f, p, "out"), 0, tiny, true);
        OK(tg_mul(&gy, y, (tg_tensor *)th_golden_get(f, p, "g")));
        OK(tg_sum(&l, gy));
        OK(tg_backward(l, NULL, NULL));
        for (int i = 0; i < 3; i++) {
            snprintf(what, sizeof what, "%s %s", p, d[i]);
            expect_rel(what, x[2], tg_tensor_grad(x[i]), th_golden_get(f, p, d[i]), 0, tiny,
                       false);
        }
        th_release_all(6, (tg_tensor *[]){x[0], x[1], x[2], y, gy, l});
    }
    tg_st_free(f);
}

/* f16 (which torch 1.13's CPU lerp refuses) is computed in f32 and
 * rounded once: the f32 lerp of the f16 operands, rounded to f16. */
Test(unary_math, lerp_f16_is_the_f32_kernel_rounded_once)
{
    tg_st_file *f = th_golden_load("unary_math.safetensors");
    static const char *const in[] = {"start", "end", "weight"};
    tg_tensor *h[3], *w[3], *y = NULL, *y32 = NULL, *want = NULL;
    for (int i = 0; i < 3; i++) {
        OK(tg_to_dtype(&h[i], (tg_tensor *)th_golden_get(f, "lerp_fused.f32", in[i]), TG_F16));
        OK(tg_to_dtype(&w[i], h[i], TG_F32));
    }
    OK(tg_lerp(&y, h[0], h[1], h[2]));
    OK(tg_lerp(&y32, w[0], w[1], w[2]));
    OK(tg_to_dtype(&want, y32, TG_F16));
    th_expect_close("f16 lerp", y, want, 0);
    th_release_all(9, (tg_tensor *[]){h[0], h[1], h[2], w[0], w[1], w[2], y, y32, want});
    tg_st_free(f);
}

static int atan2_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    (void)user;
    return tg_atan2(out, in[0], in[1]);
}

static int lerp_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    (void)user;
    return tg_lerp(out, in[0], in[1], in[2]);
}

/* Broadcast shapes, points away from the origin, weights on both sides of
 * 0.5 and outside [0, 1]. */
Test(unary_math, atan2_and_lerp_gradcheck_and_gradgradcheck)
{
    uint64_t s = 67;
    tg_tensor *a[2] = {th_rand_tensor(&s, TG_F64, 2, (int64_t[]){3, 1}, 0.5, 2),
                       th_rand_tensor(&s, TG_F64, 1, (int64_t[]){4}, -2, 2)};
    tg_tensor *l[3] = {th_rand_tensor(&s, TG_F64, 3, (int64_t[]){2, 3, 1}, -2, 2),
                       th_rand_tensor(&s, TG_F64, 2, (int64_t[]){3, 4}, -2, 2),
                       th_vec(TG_F64, 4, (double[]){-0.7, 0.2, 0.8, 1.6}, "w", false)};
    OK(tg_tensor_set_flat(a[0], 1, -1.0));
    for (int i = 0; i < 2; i++) OK(tg_tensor_set_requires_grad(a[i], true));
    for (int i = 0; i < 3; i++) OK(tg_tensor_set_requires_grad(l[i], true));
    tg_gradcheck_opts o = TG_GRADCHECK_OPTS_INIT;
    cr_assert(eq(int, tg_gradcheck(atan2_fn, NULL, 2, a, &o), TG_OK), "%s", tg_error_message());
    cr_assert(eq(int, tg_gradgradcheck(atan2_fn, NULL, 2, a, &o), TG_OK), "%s",
              tg_error_message());
    cr_assert(eq(int, tg_gradcheck(lerp_fn, NULL, 3, l, &o), TG_OK), "%s", tg_error_message());
    cr_assert(eq(int, tg_gradgradcheck(lerp_fn, NULL, 3, l, &o), TG_OK), "%s",
              tg_error_message());
    th_release_all(5, (tg_tensor *[]){a[0], a[1], l[0], l[1], l[2]});
}

/* lerp with a number weight, for each golden weight (0, 1, 0.5, -0.7 in
 * the first form, 0.9999 as an EMA's, ...), against torch's values and
 * gradients: f32 and f64 values equal (fused as torch's kernel; any NaN
 * for a NaN, zeros with their sign), bf16 (computed in f32, rounded once)
 * too; gradients g (1 - w) and g w equal
 * too (but the sign of a zero: a leaf's .grad is accumulated), and within
 * a few roundings when summed over the broadcast dims. */
Test(unary_math, lerp_scalar_matches_torch)
{
    tg_st_file *f = th_golden_load("unary_math.safetensors");
    char list[256];
    snprintf(list, sizeof list, "%s", tg_st_meta_get(f, "lerp_scalar_weights"));
    static const char *const dts[] = {"f64", "f32", "bf16"};
    static const char *const d[2] = {"dstart", "dend"};
    int k = 0;
    for (char *save = NULL, *ws = strtok_r(list, ",", &save); ws;
         ws = strtok_r(NULL, ",", &save), k++) {
        const double w = strtod(ws, NULL);
        for (int bc = 0; bc < 2; bc++) {
            for (int j = 0; j < 3; j++) {
                char p[48], what[112];
                snprintf(p, sizeof p, "lerp_s%d%s.%s", k, bc ? "_bc" : "", dts[j]);
                tg_tensor *x[2] = {th_leaf_clone(th_golden_get(f, p, "start")),
                                   th_leaf_clone(th_golden_get(f, p, "end"))};
                tg_tensor *y = NULL, *gy = NULL, *l = NULL;
                OK(tg_lerp_scalar(&y, x[0], x[1], w));
                snprintf(what, sizeof what, "%s (w = %.17g) out", p, w);
                expect_rel(what, x[0], y, th_golden_get(f, p, "out"), 0,
                           j == 0 ? 0x1p-1022 : 0x1p-126, true);
                OK(tg_mul(&gy, y, (tg_tensor *)th_golden_get(f, p, "g")));
                OK(tg_sum(&l, gy));
                OK(tg_backward(l, NULL, NULL));
                for (int i = 0; i < 2; i++) {
                    snprintf(what, sizeof what, "%s (w = %.17g) %s", p, w, d[i]);
                    const tg_tensor *want = th_golden_get(f, p, d[i]);
                    /* a broadcast input's terms: torch sums them in its
                     * dtype, tapegrad in double rounded once */
                    if (bc) th_expect_close(what, tg_tensor_grad(x[i]), want,
                                            j == 0 ? 1e-15 : j == 1 ? 1e-6 : 1.0 / 32);
                    else expect_rel(what, x[i], tg_tensor_grad(x[i]), want, 0,
                                    j == 0 ? 0x1p-1022 : 0x1p-126, false);
                }
                th_release_all(5, (tg_tensor *[]){x[0], x[1], y, gy, l});
            }
        }
    }
    cr_assert(eq(int, k, 13), "%d weights", k);
    tg_st_free(f);
}

/* user: the weight, a double. */
static int lerp_scalar_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    return tg_lerp_scalar(out, in[0], in[1], *(const double *)user);
}

/* f64 gradcheck and gradgradcheck with start (2, 3, 1) and end (3, 4), a
 * weight in each form (and 0.5, the second). */
Test(unary_math, lerp_scalar_gradcheck_and_gradgradcheck)
{
    uint64_t s = 71;
    tg_tensor *x[2] = {th_rand_tensor(&s, TG_F64, 3, (int64_t[]){2, 3, 1}, -2, 2),
                       th_rand_tensor(&s, TG_F64, 2, (int64_t[]){3, 4}, -2, 2)};
    for (int i = 0; i < 2; i++) OK(tg_tensor_set_requires_grad(x[i], true));
    const double ws[] = {0.3, -0.7, 0.5, 0.9999, 1.6};
    for (size_t k = 0; k < sizeof ws / sizeof ws[0]; k++) {
        double w = ws[k];
        tg_gradcheck_opts o = TG_GRADCHECK_OPTS_INIT;
        cr_assert(eq(int, tg_gradcheck(lerp_scalar_fn, &w, 2, x, &o), TG_OK), "w = %g: %s",
                  ws[k], tg_error_message());
        cr_assert(eq(int, tg_gradgradcheck(lerp_scalar_fn, &w, 2, x, &o), TG_OK),
                  "w = %g: %s", ws[k], tg_error_message());
    }
    th_release_all(2, x);
}

/* NULL operands, an integer one, two dtypes and shapes that do not
 * broadcast; *out stays NULL. */
Test(unary_math, lerp_scalar_refusals)
{
    tg_tensor *f = th_seq(TG_F32, 1, (int64_t[]){3}, 0, 1);
    tg_tensor *d = th_seq(TG_F64, 1, (int64_t[]){3}, 0, 1);
    tg_tensor *f4 = th_seq(TG_F32, 1, (int64_t[]){4}, 0, 1), *i = NULL, *y = NULL;
    OK(tg_tensor_zeros(&i, TG_I32, 1, (int64_t[]){3}));
    th_expect_refused(tg_lerp_scalar(NULL, f, f, 0.5), TG_EINVAL, "lerp_scalar: out", y);
    th_expect_refused(tg_lerp_scalar(&y, NULL, f, 0.5), TG_EINVAL,
                      "lerp_scalar: input 0 is NULL", y);
    th_expect_refused(tg_lerp_scalar(&y, f, NULL, 0.5), TG_EINVAL,
                      "lerp_scalar: input 1 is NULL", y);
    th_expect_refused(tg_lerp_scalar(&y, i, f, 0.5), TG_EDTYPE,
                      "lerp_scalar: input 0 has dtype i32", y);
    th_expect_refused(tg_lerp_scalar(&y, f, i, 0.5), TG_EDTYPE,
                      "lerp_scalar: input 1 has dtype i32", y);
    th_expect_refused(tg_lerp_scalar(&y, f, d, 0.5), TG_EDTYPE, "dtypes f32 and f64", y);
    th_expect_refused(tg_lerp_scalar(&y, f, f4, 0.5), TG_ESHAPE, "cannot be broadcast", y);
    th_release_all(5, (tg_tensor *[]){f, d, f4, i, y});
}

/* NULL operands, integer dtypes, lerp's mixed dtypes and shapes that do not
 * broadcast. */
Test(unary_math, atan2_and_lerp_refusals)
{
    tg_tensor *f = th_seq(TG_F32, 1, (int64_t[]){3}, 0, 1);
    tg_tensor *d = th_seq(TG_F64, 1, (int64_t[]){3}, 0, 1);
    tg_tensor *f4 = th_seq(TG_F32, 1, (int64_t[]){4}, 0, 1), *i = NULL, *y = NULL;
    OK(tg_tensor_zeros(&i, TG_I32, 1, (int64_t[]){3}));
    th_expect_refused(tg_atan2(&y, NULL, f), TG_EINVAL, "atan2: input 0 is NULL", y);
    th_expect_refused(tg_atan2(&y, f, NULL), TG_EINVAL, "atan2: input 1 is NULL", y);
    th_expect_refused(tg_atan2(&y, f, i), TG_EDTYPE, "atan2", y);
    th_expect_refused(tg_atan2(&y, f, f4), TG_ESHAPE, "atan2", y);
    th_expect_refused(tg_lerp(NULL, f, f, f), TG_EINVAL, "lerp: out is NULL", y);
    th_expect_refused(tg_lerp(&y, NULL, f, f), TG_EINVAL, "lerp: start is NULL", y);
    th_expect_refused(tg_lerp(&y, f, NULL, f), TG_EINVAL, "lerp: end is NULL", y);
    th_expect_refused(tg_lerp(&y, f, f, NULL), TG_EINVAL, "lerp: weight is NULL", y);
    th_expect_refused(tg_lerp(&y, f, f, i), TG_EDTYPE, "lerp: weight has dtype i32", y);
    th_expect_refused(tg_lerp(&y, f, d, f), TG_EDTYPE, "lerp: end has dtype f64, start f32", y);
    th_expect_refused(tg_lerp(&y, f, f, f4), TG_ESHAPE, "cannot be broadcast", y);
    /* atan2 promotes two float dtypes, as tg_add */
    OK(tg_atan2(&y, f, d));
    cr_assert(eq(int, tg_tensor_dtype(y), TG_F64));
    th_release_all(5, (tg_tensor *[]){f, d, f4, i, y});
}
