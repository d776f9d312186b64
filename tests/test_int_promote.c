/* tests/test_int_promote.c - the floating functions of integer tensors
 * against PyTorch's: exp, log, ..., tanh, sigmoid of an i8, u8, i32 or i64
 * tensor, and div and atan2 of two integer tensors, give f32 (torch's
 * default dtype) computed from the integers converted to f32, unrecorded;
 * the functions torch refuses for integers are refused.
 * Goldens: scripts/make_int_promote_goldens.py.
 *
 * Each result has the bits of the same function of the input cast to f32
 * (tg_to_dtype, itself checked against torch's cast), and lies within
 * 1 ulp of torch's: tapegrad computes in double and rounds once, torch's
 * vectorised f32 kernels are within an ulp of that (most elements agree bit
 * for bit; the test counts them). */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

typedef int (*unary_fn)(tg_tensor **, tg_tensor *);
typedef int (*binary_fn)(tg_tensor **, tg_tensor *, tg_tensor *);

static const struct {
    const char *name;
    unary_fn f;
} unary_ops[] = {
    {"exp", tg_exp},       {"log", tg_log},     {"sqrt", tg_sqrt},   {"erf", tg_erf},
    {"sin", tg_sin},       {"cos", tg_cos},     {"log1p", tg_log1p}, {"expm1", tg_expm1},
    {"reciprocal", tg_reciprocal},              {"rsqrt", tg_rsqrt}, {"tan", tg_tan},
    {"atan", tg_atan},     {"asin", tg_asin},   {"acos", tg_acos},   {"sinh", tg_sinh},
    {"cosh", tg_cosh},     {"asinh", tg_asinh}, {"acosh", tg_acosh}, {"atanh", tg_atanh},
    {"log2", tg_log2},     {"log10", tg_log10}, {"exp2", tg_exp2},   {"tanh", tg_tanh},
    {"sigmoid", tg_sigmoid},
};
enum { NUNARY = sizeof unary_ops / sizeof unary_ops[0] };

static unary_fn unary_named(const char *name)
{
    for (int i = 0; i < NUNARY; i++)
        if (!strcmp(unary_ops[i].name, name)) return unary_ops[i].f;
    cr_assert(0 == 1, "no unary op %s in the test's table", name);
    return NULL;
}

static binary_fn binary_named(const char *name)
{
    if (!strcmp(name, "div")) return tg_div;
    if (!strcmp(name, "atan2")) return tg_atan2;
    cr_assert(0 == 1, "no binary op %s in the test's table", name);
    return NULL;
}

/* The distance in units of the last place between two f32 values (0 for
 * equal bits; NaN against NaN 0, NaN against a number a large number). */
static int64_t ulp_distance(float a, float b)
{
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b) ? 0 : INT64_MAX;
    int32_t ia, ib;
    memcpy(&ia, &a, 4);
    memcpy(&ib, &b, 4);
    /* map the sign-magnitude bits onto a line ordered as the floats */
    const int64_t la = ia < 0 ? (int64_t)INT32_MIN - ia : ia;
    const int64_t lb = ib < 0 ? (int64_t)INT32_MIN - ib : ib;
    return la > lb ? la - lb : lb - la;
}

/* y is f32, unrecorded (no grad_fn, no requires_grad), of want's shape,
 * each element within 1 ulp of want's (torch's); returns how many
 * elements have want's bits.  With tail, a subnormal where torch has 0 is
 * accepted: torch's f32 sigmoid flushes its far negative tail (sigmoid(-100)
 * = 0, here 3.8e-44; docs/autograd.md lists it), as for an f32 input. */
static int64_t expect_torch_f32(const char *what, const tg_tensor *y, const tg_tensor *want,
                                bool tail)
{
    cr_assert(eq(int, tg_tensor_dtype(y), TG_F32), "%s: dtype %s, torch's is f32", what,
              tg_dtype_name(tg_tensor_dtype(y)));
    cr_assert(tg_tensor_requires_grad(y) == false && tg_tensor_is_leaf(y), "%s: recorded", what);
    cr_assert(eq(i64, tg_tensor_numel(y), tg_tensor_numel(want)), "%s: numel", what);
    const float *g = tg_tensor_cdata(y), *w = tg_tensor_cdata(want);
    int64_t same = 0;
    for (int64_t i = 0; i < tg_tensor_numel(y); i++) {
        if (tail && w[i] == 0 && fabsf(g[i]) < FLT_MIN) continue;
        const int64_t d = ulp_distance(g[i], w[i]);
        cr_assert(d <= 1, "%s[%lld]: %.9g, torch %.9g (%lld ulp)", what, (long long)i, g[i],
                  w[i], (long long)d);
        same += d == 0;
    }
    return same;
}

/* op of x has the bits of op of x cast to f32. */
static void expect_as_f32(const char *what, unary_fn f, tg_tensor *x, const tg_tensor *y)
{
    tg_tensor *x32 = NULL, *y32 = NULL;
    OK(tg_to_dtype(&x32, x, TG_F32));
    OK(f(&y32, x32));
    th_expect_same_tensor_bytes(what, y, y32);
    th_release_all(2, (tg_tensor *[]){x32, y32});
}

Test(int_promote, unary_matches_torch)
{
    tg_st_file *f = th_golden_load("int_promote.safetensors");
    char names[512], dtypes[64];
    snprintf(names, sizeof names, "%s", tg_st_meta_get(f, "unary"));
    snprintf(dtypes, sizeof dtypes, "%s", tg_st_meta_get(f, "dtypes"));
    int64_t same = 0, total = 0, cases = 0;
    char *sn = NULL;
    for (char *fn = strtok_r(names, ",", &sn); fn; fn = strtok_r(NULL, ",", &sn)) {
        char dl[64], *sd = NULL;
        snprintf(dl, sizeof dl, "%s", dtypes);
        for (char *dt = strtok_r(dl, ",", &sd); dt; dt = strtok_r(NULL, ",", &sd)) {
            char what[64];
            snprintf(what, sizeof what, "x.%s", dt);
            tg_tensor *x = tg_st_get(f, what), *y = NULL;
            cr_assert(x != NULL, "%s missing", what);
            snprintf(what, sizeof what, "%s(%s)", fn, dt);
            OK(unary_named(fn)(&y, x));
            same += expect_torch_f32(what, y, th_golden_at(f, "%s.%s.y", fn, dt),
                                     !strcmp(fn, "sigmoid"));
            total += tg_tensor_numel(y);
            expect_as_f32(what, unary_named(fn), x, y);
            tg_tensor_release(y);
            cases++;
        }
    }
    cr_assert(eq(i64, cases, (int64_t)NUNARY * 4), "every op, every integer dtype");
    cr_log_info("int_promote: %lld of %lld elements have torch's bits, the rest within 1 ulp "
                "(sigmoid: or its flushed tail)", (long long)same, (long long)total);
    cr_assert(same * 10 >= total * 9, "only %lld of %lld elements have torch's bits",
              (long long)same, (long long)total);
    tg_st_free(f);
}

Test(int_promote, div_and_atan2_match_torch)
{
    tg_st_file *f = th_golden_load("int_promote.safetensors");
    const int n = atoi(tg_st_meta_get(f, "binary"));
    cr_assert(n >= 6);
    for (int k = 0; k < n; k++) {
        char c[16], what[64];
        snprintf(c, sizeof c, "bin%d", k);
        const char *op = th_golden_meta(f, c, "op");
        tg_tensor *a = (tg_tensor *)th_golden_get(f, c, "a");
        tg_tensor *b = (tg_tensor *)th_golden_get(f, c, "b");
        tg_tensor *y = NULL, *a32 = NULL, *b32 = NULL, *y32 = NULL;
        snprintf(what, sizeof what, "%s %s(%s, %s)", c, op, tg_dtype_name(tg_tensor_dtype(a)),
                 tg_dtype_name(tg_tensor_dtype(b)));
        OK(binary_named(op)(&y, a, b));
        expect_torch_f32(what, y, th_golden_get(f, c, "y"), false);
        OK(tg_to_dtype(&a32, a, TG_F32));
        OK(tg_to_dtype(&b32, b, TG_F32));
        OK(binary_named(op)(&y32, a32, b32));
        th_expect_same_tensor_bytes(what, y, y32);
        th_release_all(4, (tg_tensor *[]){y, a32, b32, y32});
    }
    tg_st_free(f);
}

/* An i64 goes to f32 in one rounding, as torch's cast: 2^60 + 2^36 + 1 is
 * 2^60 + 2^37, not 2^60 (through double: the tie 2^60 + 2^36, then even);
 * sin of it is torch's 0.597..., not sin(2^60) = -0.689... */
Test(int_promote, i64_rounds_once_to_f32)
{
    const int64_t v[3] = {((int64_t)1 << 60) + ((int64_t)1 << 36) + 1,
                          -(((int64_t)1 << 60) + ((int64_t)1 << 36) + 1), INT64_MAX};
    tg_tensor *x = NULL, *x32 = NULL, *y = NULL;
    OK(tg_tensor_from_data(&x, TG_I64, 1, (int64_t[]){3}, v));
    OK(tg_to_dtype(&x32, x, TG_F32));
    const float *p = tg_tensor_cdata(x32);
    cr_assert(p[0] == 0x1p60f + 0x1p37f && p[1] == -(0x1p60f + 0x1p37f) && p[2] == 0x1p63f,
              "cast: %.9g %.9g %.9g", p[0], p[1], p[2]);
    OK(tg_sin(&y, x));
    const float *s = tg_tensor_cdata(y);
    cr_assert(fabsf(s[0] - 0.597028852f) < 1e-6f && fabsf(s[1] + 0.597028852f) < 1e-6f,
              "sin: %.9g %.9g", s[0], s[1]);
    th_release_all(3, (tg_tensor *[]){x, x32, y});
}

/* An integer cast to bf16 or f16 has torch's bits: through f32, as c10's
 * half types are made from a float (2^24 + 2^16 + 1 is 2^24 in bf16, where
 * one rounding gives 2^24 + 2^17); strided (every other element) too. */
Test(int_promote, half_casts_match_torch)
{
    tg_st_file *f = th_golden_load("int_promote.safetensors");
    static const char *const dts[] = {"i8", "u8", "i32", "i64"};
    static const struct { const char *name; tg_dtype dt; } tos[] = {{"bf16", TG_BF16},
                                                                  {"f16", TG_F16}};
    for (size_t i = 0; i < sizeof dts / sizeof *dts; i++)
        for (size_t t = 0; t < sizeof tos / sizeof *tos; t++) {
            char what[64];
            tg_tensor *x = th_golden_at(f, "x.%s", dts[i], ""), *y = NULL, *xs = NULL, *ys = NULL;
            tg_tensor *want = th_golden_at(f, "cast.%s.%s", dts[i], tos[t].name), *ws = NULL;
            tg_tensor *wc = NULL;
            snprintf(what, sizeof what, "%s -> %s", dts[i], tos[t].name);
            OK(tg_to_dtype(&y, x, tos[t].dt));
            th_expect_same_tensor_bytes(what, y, want);
            const int64_t n = tg_tensor_numel(x);
            OK(tg_slice(&xs, x, 0, 0, n, 2));
            OK(tg_slice(&ws, want, 0, 0, n, 2));
            OK(tg_contiguous(&wc, ws));
            OK(tg_to_dtype(&ys, xs, tos[t].dt));
            snprintf(what, sizeof what, "%s -> %s, every other element", dts[i], tos[t].name);
            th_expect_same_tensor_bytes(what, ys, wc);
            th_release_all(5, (tg_tensor *[]){y, xs, ys, ws, wc});
        }
    tg_st_free(f);
}

/* Strided and broadcast integer inputs are gathered as they are: exp of a
 * transposed i32 view, and a division of an (n) i64 by a (3, 1) u8, have
 * the bits of the same on f32 casts; a long input (parallel driver) too. */
Test(int_promote, strided_broadcast_and_long_inputs)
{
    int32_t v[12];
    for (int i = 0; i < 12; i++) v[i] = (i - 5) * 1000003;
    tg_tensor *x = NULL, *xt = NULL, *y = NULL;
    OK(tg_tensor_from_data(&x, TG_I32, 2, (int64_t[]){3, 4}, v));
    OK(tg_transpose(&xt, x, 0, 1));
    OK(tg_cos(&y, xt));
    expect_as_f32("cos of a transposed i32", tg_cos, xt, y);
    th_release_all(3, (tg_tensor *[]){x, xt, y});

    const int64_t w[4] = {7, -9, 1, (int64_t)1 << 55};
    const uint8_t u[3] = {2, 0, 255};
    tg_tensor *a = NULL, *b = NULL, *q = NULL, *a32 = NULL, *b32 = NULL, *q32 = NULL;
    OK(tg_tensor_from_data(&a, TG_I64, 1, (int64_t[]){4}, w));
    OK(tg_tensor_from_data(&b, TG_U8, 2, (int64_t[]){3, 1}, u));
    OK(tg_div(&q, a, b));
    cr_assert(tg_tensor_ndim(q) == 2 && tg_tensor_numel(q) == 12);
    OK(tg_to_dtype(&a32, a, TG_F32));
    OK(tg_to_dtype(&b32, b, TG_F32));
    OK(tg_div(&q32, a32, b32));
    th_expect_same_tensor_bytes("i64 / u8 broadcast", q, q32);
    th_release_all(6, (tg_tensor *[]){a, b, q, a32, b32, q32});

    enum { N = 70001 };
    int64_t *big = malloc(sizeof(int64_t) * N);
    for (int64_t i = 0; i < N; i++) big[i] = (i - N / 2) * 977;
    OK(tg_tensor_from_data(&x, TG_I64, 1, (int64_t[]){N}, big));
    OK(tg_atan(&y, x));
    expect_as_f32("atan of a long i64", tg_atan, x, y);
    th_release_all(2, (tg_tensor *[]){x, y});
    free(big);
}

/* With grad mode on, the result of an integer input is a constant: not
 * recorded, not requiring grad; it mixes with a recorded f32 operand,
 * whose gradient comes through. */
Test(int_promote, never_recorded)
{
    const int32_t v[3] = {1, 2, 3};
    tg_tensor *x = NULL, *e = NULL, *w = NULL, *p = NULL, *s = NULL;
    OK(tg_tensor_from_data(&x, TG_I32, 1, (int64_t[]){3}, v));
    cr_assert(tg_grad_enabled());
    for (int i = 0; i < NUNARY; i++) {
        OK(unary_ops[i].f(&e, x));
        cr_assert(tg_tensor_requires_grad(e) == false && tg_tensor_is_leaf(e), "%s recorded",
                  unary_ops[i].name);
        tg_tensor_release(e);
    }
    OK(tg_div(&e, x, x));
    cr_assert(tg_tensor_requires_grad(e) == false && tg_tensor_is_leaf(e), "div recorded");
    tg_tensor_release(e);
    OK(tg_atan2(&e, x, x));
    cr_assert(tg_tensor_requires_grad(e) == false && tg_tensor_is_leaf(e), "atan2 recorded");
    tg_tensor_release(e);

    OK(tg_exp(&e, x));
    OK(tg_tensor_full(&w, TG_F32, 1, (int64_t[]){3}, 2.0));
    OK(tg_tensor_set_requires_grad(w, true));
    OK(tg_mul(&p, w, e));
    OK(tg_sum(&s, p));
    OK(tg_backward(s, NULL, NULL));
    const tg_tensor *gw = tg_tensor_grad(w);
    cr_assert(gw != NULL);
    for (int64_t i = 0; i < 3; i++)
        cr_assert(th_at(gw, i) == (double)(float)exp((double)v[i]), "dw[%lld] = %g",
                  (long long)i, th_at(gw, i));
    th_release_all(5, (tg_tensor *[]){x, e, w, p, s});
}

/* Inside an autocast scope the result is what an f32 input gives: f32
 * (the FP32 ops, and those that keep their dtype; div and atan2 PROMOTE
 * nothing: no float input), with the bits of outside the scope. */
Test(int_promote, autocast_as_for_f32)
{
    const int64_t v[4] = {-3, 0, 5, (int64_t)1 << 40};
    tg_tensor *x = NULL;
    OK(tg_tensor_from_data(&x, TG_I64, 1, (int64_t[]){4}, v));
    const tg_dtype scopes[2] = {TG_BF16, TG_F16};
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < NUNARY; i++) {
            tg_tensor *out = NULL, *in = NULL;
            OK(unary_ops[i].f(&out, x));
            OK(tg_autocast_begin(scopes[k]));
            const int rc = unary_ops[i].f(&in, x);
            OK(tg_autocast_end());
            cr_assert(eq(int, rc, TG_OK), "%s: %s", unary_ops[i].name, tg_error_message());
            th_expect_same_tensor_bytes(unary_ops[i].name, in, out);
            th_release_all(2, (tg_tensor *[]){out, in});
        }
        tg_tensor *out = NULL, *in = NULL;
        OK(tg_autocast_begin(scopes[k]));
        const int rc = tg_div(&in, x, x);
        OK(tg_autocast_end());
        cr_assert(eq(int, rc, TG_OK));
        OK(tg_div(&out, x, x));
        th_expect_same_tensor_bytes("div", in, out);
        cr_assert(eq(int, tg_tensor_dtype(in), TG_F32));
        th_release_all(2, (tg_tensor *[]){out, in});
    }
    tg_tensor_release(x);
}

/* The functions torch refuses for integers (the golden file's list, each
 * checked there to raise in torch), refused here: TG_EDTYPE naming the op,
 * the argument, its dtype and the rule; so are an integer with a float
 * partner in atan2 (torch would take the float's dtype).  The ops whose
 * torch result stays an integer (add, pow, ...), div_scalar and div with a
 * float partner are tests/test_int_arith.c's. */
Test(int_promote, refusals)
{
    tg_st_file *f = th_golden_load("int_promote.safetensors");
    cr_assert(0 == strcmp(tg_st_meta_get(f, "refused"),
                      "leaky_relu,silu,gelu,elu,hardsigmoid,hardswish,mish,softplus,"
                      "logsigmoid,softmax,log_softmax"),
              "the golden file's list changed: %s", tg_st_meta_get(f, "refused"));
    tg_st_free(f);
    const tg_dtype dts[4] = {TG_I8, TG_U8, TG_I32, TG_I64};
    for (int k = 0; k < 4; k++) {
        tg_tensor *x = NULL, *y = NULL, *fl = NULL;
        OK(tg_tensor_zeros(&x, dts[k], 1, (int64_t[]){3}));
        OK(tg_tensor_zeros(&fl, TG_F32, 1, (int64_t[]){3}));
        const char *dn = tg_dtype_name(dts[k]);
        char want[192];
#define REFUSED(call, fmt)                                                    \
    do {                                                                      \
        snprintf(want, sizeof want, fmt, dn);                                 \
        th_expect_refused(call, TG_EDTYPE, want, y);                          \
        cr_assert(strstr(tg_error_message(), "float") != NULL, "%s: %s", #call, \
                  tg_error_message());                                        \
    } while (0)
        REFUSED(tg_leaky_relu(&y, x, 0.01), "leaky_relu: input 0 has dtype %s");
        REFUSED(tg_silu(&y, x), "silu: input 0 has dtype %s");
        REFUSED(tg_gelu(&y, x), "gelu: input 0 has dtype %s");
        REFUSED(tg_elu(&y, x, 1.0), "elu: input 0 has dtype %s");
        REFUSED(tg_hardsigmoid(&y, x), "hardsigmoid: input 0 has dtype %s");
        REFUSED(tg_hardswish(&y, x), "hardswish: input 0 has dtype %s");
        REFUSED(tg_mish(&y, x), "mish: input 0 has dtype %s");
        REFUSED(tg_softplus(&y, x, 1.0, 20.0), "softplus: input 0 has dtype %s");
        REFUSED(tg_logsigmoid(&y, x), "logsigmoid: input 0 has dtype %s");
        REFUSED(tg_softmax(&y, x, 0), "softmax: x has dtype %s");
        REFUSED(tg_log_softmax(&y, x, 0), "log_softmax: x has dtype %s");
#undef REFUSED
        snprintf(want, sizeof want, "atan2: input 1 has dtype %s but input 0 has f32", dn);
        th_expect_refused(tg_atan2(&y, fl, x), TG_EDTYPE, want, y);
        th_release_all(2, (tg_tensor *[]){x, fl});
    }
}
