/* tests/test_int_arith.c - the ops whose torch result keeps an integer
 * dtype, against PyTorch's: add, sub, mul, pow, maximum, minimum of two
 * integer tensors (every pair of dtypes, broadcast, 0-d operands), their
 * scalar forms, clamp, hardtanh, relu6 and relu, wrapping modulo 2^bits at
 * every dtype's ends; an integer with a float tensor (the float's dtype),
 * div_scalar and logsumexp of integers (f32); and the refusals.
 * Goldens: scripts/make_int_arith_goldens.py.  Integer results (and the
 * mixed ones, whose single rounding is torch's) must have torch's bits. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

typedef int (*binary_fn)(tg_tensor **, tg_tensor *, tg_tensor *);
typedef int (*scalar_fn)(tg_tensor **, tg_tensor *, double);

static const struct {
    const char *name;
    binary_fn f;
} binary_ops[] = {
    {"add", tg_add},         {"sub", tg_sub},         {"mul", tg_mul}, {"pow", tg_pow},
    {"maximum", tg_maximum}, {"minimum", tg_minimum}, {"div", tg_div},
};
static const struct {
    const char *name;
    scalar_fn f;
} scalar_ops[] = {
    {"add_scalar", tg_add_scalar}, {"sub_scalar", tg_sub_scalar},
    {"rsub_scalar", tg_rsub_scalar}, {"mul_scalar", tg_mul_scalar},
    {"div_scalar", tg_div_scalar}, {"pow_scalar", tg_pow_scalar},
};

static double meta_num(const tg_st_file *f, const char *c, const char *what)
{
    return strtod(th_golden_meta(f, c, what), NULL);
}

/* Runs golden case c (op name op) on its inputs into *y; returns false for
 * an op this file does not know. */
static bool run_case(const tg_st_file *f, const char *c, const char *op, tg_tensor **y)
{
    tg_tensor *a = (tg_tensor *)th_golden_get(f, c, "a");
    for (size_t i = 0; i < sizeof binary_ops / sizeof binary_ops[0]; i++)
        if (!strcmp(op, binary_ops[i].name)) {
            OK(binary_ops[i].f(y, a, (tg_tensor *)th_golden_get(f, c, "b")));
            return true;
        }
    for (size_t i = 0; i < sizeof scalar_ops / sizeof scalar_ops[0]; i++)
        if (!strcmp(op, scalar_ops[i].name)) {
            OK(scalar_ops[i].f(y, a, meta_num(f, c, "s")));
            return true;
        }
    if (!strcmp(op, "clamp")) OK(tg_clamp(y, a, meta_num(f, c, "lo"), meta_num(f, c, "hi")));
    else if (!strcmp(op, "hardtanh"))
        OK(tg_hardtanh(y, a, meta_num(f, c, "lo"), meta_num(f, c, "hi")));
    else if (!strcmp(op, "relu")) OK(tg_relu(y, a));
    else if (!strcmp(op, "relu6")) OK(tg_relu6(y, a));
    else if (!strcmp(op, "logsumexp"))
        OK(tg_logsumexp(y, a, 1, (int[]){(int)meta_num(f, c, "s")}, false));
    else return false;
    return true;
}

Test(int_arith, matches_torch)
{
    tg_st_file *f = th_golden_load("int_arith.safetensors");
    const int n = atoi(tg_st_meta_get(f, "cases"));
    int seen_int = 0, seen_float = 0;
    bool pairs[7][TG_DTYPE_COUNT][TG_DTYPE_COUNT] = {{{false}}};
    for (int k = 0; k < n; k++) {
        char c[16], what[96];
        snprintf(c, sizeof c, "c%d", k);
        const char *op = th_golden_meta(f, c, "op");
        const tg_tensor *want = th_golden_get(f, c, "y");
        tg_tensor *y = NULL;
        cr_assert(run_case(f, c, op, &y), "%s: unknown op %s", c, op);
        snprintf(what, sizeof what, "%s %s", c, op);
        cr_assert(tg_tensor_requires_grad(y) == false && tg_tensor_is_leaf(y), "%s: recorded",
                  what);
        if (!strcmp(op, "logsumexp")) th_expect_close(what, y, want, 1e-6);
        else th_expect_same_tensor_bytes(what, y, want);
        if (tg_dtype_is_float(tg_tensor_dtype(want))) {
            seen_float++;
        } else {
            seen_int++;
            const tg_tensor *a = th_golden_get(f, c, "a");
            for (int i = 0; i < 7; i++) {
                if (strcmp(op, binary_ops[i].name)) continue;
                const tg_tensor *b = th_golden_get(f, c, "b");
                if (tg_tensor_ndim(a) > 0 && tg_tensor_ndim(b) > 0)   /* 0-d: another rule */
                    pairs[i][tg_tensor_dtype(a)][tg_tensor_dtype(b)] = true;
            }
        }
        tg_tensor_release(y);
    }
    /* every integer op, each pair of integer dtypes but i8 with u8 */
    const tg_dtype ints[4] = {TG_I8, TG_U8, TG_I32, TG_I64};
    for (int i = 0; i < 6; i++)
        for (int p = 0; p < 4; p++)
            for (int q = 0; q < 4; q++) {
                const bool mixed = ints[p] + ints[q] == TG_I8 + TG_U8 && p != q;
                cr_assert(pairs[i][ints[p]][ints[q]] != mixed, "%s of %s and %s: %s",
                          binary_ops[i].name, tg_dtype_name(ints[p]), tg_dtype_name(ints[q]),
                          mixed ? "should be refused" : "not in the golden file");
            }
    cr_assert(seen_int > 150 && seen_float > 20, "%d integer and %d float cases", seen_int,
              seen_float);
    tg_st_free(f);
}

/* The wrap-around at the ends, spelled out (the goldens hold them too):
 * INT64_MIN - 1, INT64_MAX + 1, INT64_MIN * -1, |(-128) * (-1)| in i8. */
Test(int_arith, wraps_at_the_ends)
{
    int64_t lo[2] = {INT64_MIN, INT64_MAX}, one[2] = {1, -1};
    tg_tensor *a = NULL, *b = NULL, *y = NULL;
    OK(tg_tensor_from_data(&a, TG_I64, 1, (int64_t[]){2}, lo));
    OK(tg_tensor_from_data(&b, TG_I64, 1, (int64_t[]){2}, one));
    OK(tg_sub(&y, a, b));
    const int64_t *v = tg_tensor_cdata(y);
    cr_assert(v[0] == INT64_MAX && v[1] == INT64_MIN, "%lld %lld", (long long)v[0],
              (long long)v[1]);
    tg_tensor_release(y);
    OK(tg_mul_scalar(&y, a, -1.0));
    v = tg_tensor_cdata(y);
    cr_assert(v[0] == INT64_MIN && v[1] == -INT64_MAX);
    tg_tensor_release(y);
    OK(tg_add_scalar(&y, a, -0x1p63));   /* -2^63 wraps INT64_MAX to -1 */
    v = tg_tensor_cdata(y);
    cr_assert(v[0] == 0 && v[1] == -1, "%lld %lld", (long long)v[0], (long long)v[1]);
    tg_tensor_release(y);
    th_release_all(2, (tg_tensor *[]){a, b});
    int8_t m[1] = {-128};
    OK(tg_tensor_from_data(&a, TG_I8, 1, (int64_t[]){1}, m));
    OK(tg_mul_scalar(&y, a, -1.0));
    cr_assert(eq(int, ((const int8_t *)tg_tensor_cdata(y))[0], -128));
    tg_tensor_release(y);
    OK(tg_pow_scalar(&y, a, 3.0));   /* -2^21 modulo 2^8 */
    cr_assert(eq(int, ((const int8_t *)tg_tensor_cdata(y))[0], 0));
    th_release_all(2, (tg_tensor *[]){a, y});
}

/* Strided and broadcast integer operands are read as they are. */
Test(int_arith, strided_operands)
{
    int32_t v[12];
    for (int i = 0; i < 12; i++) v[i] = INT32_MAX - i;
    tg_tensor *x = NULL, *xt = NULL, *y = NULL;
    OK(tg_tensor_from_data(&x, TG_I32, 2, (int64_t[]){3, 4}, v));
    OK(tg_transpose(&xt, x, 0, 1));   /* (4, 3), strided */
    OK(tg_add(&y, xt, xt));
    const int32_t *r = tg_tensor_cdata(y);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++)
            cr_assert(eq(i32, r[i * 3 + j], (int32_t)(uint32_t)(2u * (uint32_t)v[j * 4 + i])));
    th_release_all(3, (tg_tensor *[]){x, xt, y});
}

/* An integer with a float leaf: the result is the float's and recorded;
 * the leaf's gradient is torch's (d(a * x)/dx = a, d(x - a)/dx = 1), and
 * the integer gets none. */
Test(int_arith, mixed_gradients)
{
    tg_tensor *a = th_tensor_from(TG_I64, 1, (int64_t[]){3}, (double[]){2, -3, 5});
    tg_tensor *x = th_vec(TG_F32, 3, (double[]){0.5, 1.5, -2}, "x", true);
    tg_tensor *p = NULL, *q = NULL, *m = NULL, *s = NULL, *g = NULL;
    OK(tg_mul(&p, a, x));
    OK(tg_sub(&q, x, a));
    OK(tg_maximum(&m, a, x));
    cr_assert(eq(int, tg_tensor_dtype(p), TG_F32));
    cr_assert(tg_tensor_requires_grad(p) && tg_tensor_requires_grad(m));
    OK(tg_add(&s, p, q));
    tg_tensor *s2 = NULL;
    OK(tg_add(&s2, s, m));
    OK(tg_sum(&g, s2));
    OK(tg_backward(g, NULL, NULL));
    const float *gx = tg_tensor_cdata(tg_tensor_grad(x));
    /* a + 1 + (x > a) */
    cr_assert(gx[0] == 3.0f && gx[1] == -1.0f && gx[2] == 6.0f, "%g %g %g", gx[0], gx[1], gx[2]);
    cr_assert(tg_tensor_grad(a) == NULL);
    th_release_all(8, (tg_tensor *[]){a, x, p, q, m, s, s2, g});
}

/* With grad mode on, an integer result is a constant. */
Test(int_arith, integer_results_are_not_recorded)
{
    tg_tensor *a = th_tensor_from(TG_I32, 1, (int64_t[]){2}, (double[]){1, -4}), *y = NULL;
    int (*ops[])(tg_tensor **, tg_tensor *) = {tg_relu, tg_relu6, tg_neg};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        OK(ops[i](&y, a));
        cr_assert(tg_tensor_requires_grad(y) == false && tg_tensor_is_leaf(y));
        tg_tensor_release(y);
    }
    OK(tg_mul(&y, a, a));
    cr_assert(tg_tensor_requires_grad(y) == false && tg_tensor_is_leaf(y));
    cr_assert(eq(int, tg_tensor_dtype(y), TG_I32));
    th_release_all(2, (tg_tensor *[]){a, y});
}

/* torch's refusals (the golden file lists them, each checked there to
 * raise), and tapegrad's own: i8 with u8 (int16 in torch), a non-integral
 * or out-of-range scalar for an integer tensor. */
Test(int_arith, refusals)
{
    tg_st_file *f = th_golden_load("int_arith.safetensors");
    cr_assert(0 == strcmp(tg_st_meta_get(f, "refused"),
                          "pow_scalar(i8, -1);pow_scalar(i8, 128);pow_scalar(u8, 256);"
                          "pow_scalar(i32, 2^31);clamp(i8, -2, 1000);clamp(u8, -256, none);"
                          "clamp(i32, none, 2^31);hardtanh(u8, -1, 5);hardtanh(i8, -2, 1000);"
                          "hardtanh(i8, -2, inf);leaky_relu(i8)"),
              "the golden file's list changed: %s", tg_st_meta_get(f, "refused"));
    tg_st_free(f);
    tg_tensor *i8 = th_tensor_from(TG_I8, 1, (int64_t[]){2}, (double[]){1, -2});
    tg_tensor *u8 = th_tensor_from(TG_U8, 1, (int64_t[]){2}, (double[]){1, 200});
    tg_tensor *i32 = th_tensor_from(TG_I32, 1, (int64_t[]){2}, (double[]){1, 2});
    tg_tensor *y = NULL;
    th_expect_refused(tg_pow_scalar(&y, i8, -1), TG_EINVAL,
                      "pow_scalar: p=-1 with a of dtype i8: integers to negative integer "
                      "powers are not allowed", y);
    th_expect_refused(tg_pow_scalar(&y, i8, 128), TG_EINVAL,
                      "pow_scalar: p=128 cannot be converted to i8 without overflow", y);
    th_expect_refused(tg_pow_scalar(&y, u8, 256), TG_EINVAL, "p=256 cannot be converted to u8", y);
    th_expect_refused(tg_pow_scalar(&y, i32, 0x1p31), TG_EINVAL,
                      "p=2147483648 cannot be converted to i32", y);
    th_expect_refused(tg_clamp(&y, i8, -2, 1000), TG_EINVAL,
                      "clamp: hi=1000 cannot be converted to i8 without overflow", y);
    th_expect_refused(tg_clamp(&y, u8, -256, NAN), TG_EINVAL,
                      "clamp: lo=-256 cannot be converted to u8", y);
    th_expect_refused(tg_clamp(&y, i32, NAN, 0x1p31), TG_EINVAL,
                      "clamp: hi=2147483648 cannot be converted to i32", y);
    th_expect_refused(tg_hardtanh(&y, u8, -1, 5), TG_EINVAL,
                      "hardtanh: min_val=-1 with x of dtype u8: cannot do hardtanh on an "
                      "unsigned type with negative limits", y);
    th_expect_refused(tg_relu6(&y, NULL), TG_EINVAL, "hardtanh", y);
    th_expect_refused(tg_hardtanh(&y, i8, -2, 1000), TG_EINVAL,
                      "hardtanh: max_val=1000 cannot be converted to i8 without overflow", y);
    th_expect_refused(tg_hardtanh(&y, i8, -2, INFINITY), TG_EINVAL,
                      "hardtanh: max_val=inf cannot be converted to i64 without overflow", y);
    th_expect_refused(tg_leaky_relu(&y, i8, 0.01), TG_EDTYPE, "leaky_relu: input 0 has dtype i8",
                      y);
    /* int16 in torch */
    binary_fn bins[6] = {tg_add, tg_sub, tg_mul, tg_pow, tg_maximum, tg_minimum};
    const char *names[6] = {"add", "sub", "mul", "pow", "maximum", "minimum"};
    for (int i = 0; i < 6; i++) {
        char want[160];
        snprintf(want, sizeof want, "%s: a (i8) and b (u8): torch promotes them to int16, which "
                 "tapegrad does not have (convert one with tg_to_dtype)", names[i]);
        th_expect_refused(bins[i](&y, i8, u8), TG_EDTYPE, want, y);
    }
    /* a scalar that is not an integer: torch's result would be f32 */
    scalar_fn sc[5] = {tg_add_scalar, tg_sub_scalar, tg_rsub_scalar, tg_mul_scalar,
                       tg_pow_scalar};
    const char *sn[5] = {"add_scalar: s=2.5", "sub_scalar: s=2.5", "rsub_scalar: s=2.5",
                         "mul_scalar: s=2.5", "pow_scalar: p=2.5"};
    for (int i = 0; i < 5; i++) {
        char want[200];
        snprintf(want, sizeof want, "%s is not an integer, and a has dtype i32: an integer "
                 "tensor takes an integral scalar", sn[i]);
        th_expect_refused(sc[i](&y, i32, 2.5), TG_EDTYPE, want, y);
        cr_assert(strstr(tg_error_message(), "convert a with tg_to_dtype first") != NULL, "%s",
                  tg_error_message());
        th_expect_refused(sc[i](&y, i32, NAN), TG_EDTYPE, "is not an integer", y);
        th_expect_refused(sc[i](&y, i32, 1e30), TG_EINVAL, "lies outside i64's range", y);
    }
    th_expect_refused(tg_clamp(&y, i32, 0.5, NAN), TG_EDTYPE,
                      "clamp: lo=0.5 is not an integer, and a has dtype i32", y);
    th_expect_refused(tg_clamp(&y, i32, -1, INFINITY), TG_EINVAL,
                      "clamp: hi=inf lies outside i64's range", y);
    th_expect_refused(tg_add(&y, i8, NULL), TG_EINVAL, "add", y);
    th_expect_refused(tg_add_scalar(&y, NULL, 1), TG_EINVAL, "add_scalar", y);
    th_expect_refused(tg_add(NULL, i8, i8), TG_EINVAL, "add", NULL);
    tg_tensor *i3 = th_tensor_from(TG_I64, 1, (int64_t[]){3}, (double[]){1, 2, 3});
    th_expect_refused(tg_maximum(&y, i32, i3), TG_ESHAPE,
                      "maximum: shapes (2) and (3) cannot be broadcast", y);
    th_release_all(4, (tg_tensor *[]){i8, u8, i32, i3});
}
