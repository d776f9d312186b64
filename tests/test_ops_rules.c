/* tests/test_ops_rules.c - the rules around the elementwise ops: to_dtype,
 * dtype promotion and the AMP policies in the registry, errors (status,
 * message, nothing changed), autograd details (a tensor used twice, a
 * saved input modified), scalar operands converted as PyTorch converts
 * them, and pow bit for bit against torch 1.13. */
#include <math.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "helpers.h"
#include "core/core.h"
#include "tapegrad/tapegrad.h"
#include "ops/elementwise.h"
#include "tapegrad/autograd.h"
#include "tapegrad/ops.h"

/* ---- to_dtype ---- */

Test(ops_rules, to_dtype_converts_and_same_dtype_is_the_same_tensor)
{
    int64_t sh[1] = {5};
    tg_tensor *a = th_seq(TG_F64, 1, sh, -3, 3), *y = NULL, *same = NULL, *i = NULL;
    cr_assert(eq(int, tg_to_dtype(&y, a, TG_F32), TG_OK));
    cr_assert(eq(int, tg_tensor_dtype(y), TG_F32));
    double *va = th_doubles(a), *vy = th_doubles(y);
    for (int k = 0; k < 5; k++) cr_assert(eq(dbl, vy[k], (double)(float)va[k]));
    cr_assert(eq(int, tg_to_dtype(&same, a, TG_F64), TG_OK));
    cr_assert(eq(ptr, same, a));
    cr_assert(eq(int, tg_tensor_refcount(a), 2));
    cr_assert(eq(int, tg_to_dtype(&i, a, TG_I32), TG_OK));
    double *vi = th_doubles(i);
    for (int k = 0; k < 5; k++) cr_assert(eq(dbl, vi[k], trunc(va[k])));   /* as torch */
    free(va), free(vy), free(vi);
    tg_tensor_release(a), tg_tensor_release(y), tg_tensor_release(same), tg_tensor_release(i);
}

Test(ops_rules, to_dtype_gradient_comes_back_in_input_dtype)
{
    int64_t sh[2] = {2, 2};
    tg_tensor *x = th_seq(TG_F32, 2, sh, -1, 1), *y = NULL, *z = NULL, *ones = NULL;
    tg_tensor_set_requires_grad(x, true);
    cr_assert(eq(int, tg_to_dtype(&y, x, TG_F64), TG_OK));
    cr_assert(eq(int, tg_mul_scalar(&z, y, 3.0), TG_OK));
    cr_assert(eq(int, tg_tensor_full(&ones, TG_F64, 2, sh, 1.0), TG_OK));
    cr_assert(eq(int, tg_backward(z, ones, NULL), TG_OK), "%s", tg_error_message());
    tg_tensor *g = tg_tensor_grad(x);
    cr_assert(not(eq(ptr, g, NULL)));
    cr_assert(eq(int, tg_tensor_dtype(g), TG_F32));
    double *vg = th_doubles(g);
    for (int k = 0; k < 4; k++) cr_assert(eq(dbl, vg[k], 3.0));
    free(vg);
    tg_tensor_release(x), tg_tensor_release(y), tg_tensor_release(z), tg_tensor_release(ones);
}

/* ---- dtype promotion and AMP policies ---- */

Test(ops_rules, mixed_float_dtypes_promote_in_binary_ops)
{
    int64_t sh[1] = {3};
    tg_tensor *a = th_seq(TG_F32, 1, sh, -1, 1), *b = th_seq(TG_F64, 1, sh, -1, 1), *y = NULL;
    cr_assert(eq(int, tg_mul(&y, a, b), TG_OK));
    cr_assert(eq(int, tg_tensor_dtype(y), TG_F64));
    double *va = th_doubles(a), *vb = th_doubles(b), *vy = th_doubles(y);
    for (int i = 0; i < 3; i++) cr_assert(eq(dbl, vy[i], va[i] * vb[i]));
    free(va), free(vb), free(vy);
    tg_tensor_release(a), tg_tensor_release(b), tg_tensor_release(y);
}

Test(ops_rules, amp_policies_are_registered)
{
    static const struct {
        const char *name;
        tg_amp_policy amp;
    } want[] = {
        {"add", TG_AMP_PROMOTE},      {"sub", TG_AMP_PROMOTE},     {"mul", TG_AMP_PROMOTE},
        {"div", TG_AMP_PROMOTE},      {"pow", TG_AMP_PROMOTE},     {"exp", TG_AMP_FP32},
        {"log", TG_AMP_FP32},         {"sqrt", TG_AMP_FP32},       {"pow_scalar", TG_AMP_FP32},
        {"neg", TG_AMP_KEEP},         {"abs", TG_AMP_KEEP},        {"erf", TG_AMP_KEEP},
        {"relu", TG_AMP_KEEP},        {"gelu", TG_AMP_KEEP},       {"mul_scalar", TG_AMP_KEEP},
        {"add_scalar", TG_AMP_KEEP},  {"to_dtype", TG_AMP_KEEP},   {"leaky_relu", TG_AMP_KEEP},
        {"tanh", TG_AMP_KEEP},        {"sigmoid", TG_AMP_KEEP},    {"silu", TG_AMP_KEEP},
        {"rsub_scalar", TG_AMP_KEEP}, {"sub_scalar", TG_AMP_KEEP}, {"div_scalar", TG_AMP_KEEP},
        {"sin", TG_AMP_KEEP},         {"cos", TG_AMP_KEEP},        {"elu", TG_AMP_KEEP},
        {"log1p", TG_AMP_FP32},       {"expm1", TG_AMP_FP32},
        {"prelu", TG_AMP_KEEP},       {"flip", TG_AMP_KEEP},       {"vector_norm", TG_AMP_FP32},
        {"gather", TG_AMP_KEEP},      {"scatter_add", TG_AMP_KEEP},
        {"index_select", TG_AMP_KEEP}, {"index_add", TG_AMP_KEEP},
        {"logsumexp", TG_AMP_FP32},
        {"gelu_tanh", TG_AMP_KEEP},   {"cumsum", TG_AMP_FP32},      {"roll", TG_AMP_KEEP},
        {"hardtanh", TG_AMP_KEEP},    {"hardsigmoid", TG_AMP_KEEP}, {"hardswish", TG_AMP_KEEP},
        {"mish", TG_AMP_KEEP},        {"sign", TG_AMP_KEEP},       {"floor", TG_AMP_KEEP},
        {"ceil", TG_AMP_KEEP},        {"round", TG_AMP_KEEP},      {"trunc", TG_AMP_KEEP},
        {"reciprocal", TG_AMP_FP32},  {"rsqrt", TG_AMP_FP32},      {"tan", TG_AMP_FP32},
        {"atan", TG_AMP_KEEP},        {"asin", TG_AMP_FP32},       {"acos", TG_AMP_FP32},
        {"sinh", TG_AMP_FP32},        {"cosh", TG_AMP_FP32},       {"asinh", TG_AMP_KEEP},
        {"acosh", TG_AMP_KEEP},       {"atanh", TG_AMP_KEEP},      {"log2", TG_AMP_FP32},
        {"log10", TG_AMP_FP32},       {"exp2", TG_AMP_FP32},       {"logsigmoid", TG_AMP_KEEP},
        {"atan2", TG_AMP_PROMOTE},    {"lerp_scalar", TG_AMP_KEEP},  {"lerp", TG_AMP_KEEP},
        {"adaptive_avg_pool", TG_AMP_KEEP}, {"adaptive_avg_pool_backward", TG_AMP_KEEP},
        {"adaptive_max_pool", TG_AMP_KEEP}, {"adaptive_max_pool_backward", TG_AMP_KEEP},
        {"adaptive_max_pool_gather", TG_AMP_KEEP},
        {"selu", TG_AMP_KEEP},        {"celu", TG_AMP_KEEP},       {"hardshrink", TG_AMP_KEEP},
        {"softshrink", TG_AMP_KEEP},  {"threshold", TG_AMP_KEEP},  {"glu", TG_AMP_KEEP},
        {"unfold", TG_AMP_KEEP},      {"fold", TG_AMP_KEEP},
        {"scatter", TG_AMP_KEEP},     {"scatter_value", TG_AMP_KEEP},
        {"scatter_reduce", TG_AMP_KEEP},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        tg_op_info info;
        cr_assert(eq(int, tg_op_info_find(want[i].name, &info), TG_OK), "%s", want[i].name);
        cr_assert(eq(int, info.amp, want[i].amp), "%s", want[i].name);
        cr_assert(info.has_backward && info.has_double_backward, "%s", want[i].name);
    }
}

/* ---- errors: status, message, nothing changed ---- */

Test(ops_rules, mismatched_shapes_are_eshape)
{
    int64_t sa[2] = {2, 3}, sb[1] = {4};
    tg_tensor *a = th_seq(TG_F32, 2, sa, 0, 1), *b = th_seq(TG_F32, 1, sb, 0, 1), *y = NULL;
    uint64_t va = tg_tensor_version(a), vb = tg_tensor_version(b);
    cr_assert(eq(int, tg_add(&y, a, b), TG_ESHAPE));
    cr_assert(eq(ptr, y, NULL));
    cr_assert(not(eq(ptr, strstr(tg_error_message(), "cannot be broadcast: dim 1 has 3 vs 4"), NULL)),
              "%s", tg_error_message());
    cr_assert(eq(int, tg_mul(&y, b, a), TG_ESHAPE));
    cr_assert(eq(ptr, y, NULL));
    cr_assert(eq(u64, tg_tensor_version(a), va));
    cr_assert(eq(u64, tg_tensor_version(b), vb));
    cr_assert(eq(int, tg_tensor_refcount(a), 1));
    cr_assert(eq(int, tg_tensor_refcount(b), 1));
    tg_tensor_release(a), tg_tensor_release(b);
}

Test(ops_rules, integer_inputs_are_edtype)
{
    int64_t sh[1] = {3};
    tg_tensor *f = th_seq(TG_F32, 1, sh, 0, 1), *i = NULL, *u = NULL, *y = NULL;
    cr_assert(eq(int, tg_tensor_zeros(&i, TG_I8, 1, sh), TG_OK));
    cr_assert(eq(int, tg_tensor_zeros(&u, TG_U8, 1, sh), TG_OK));
    /* i8 with u8 is int16 in torch, which tapegrad lacks */
    cr_assert(eq(int, tg_mul(&y, i, u), TG_EDTYPE));
    cr_assert(eq(ptr, y, NULL));
    cr_assert(not(eq(ptr, strstr(tg_error_message(), "a (i8) and b (u8)"), NULL)), "%s",
              tg_error_message());
    cr_assert(eq(int, tg_leaky_relu(&y, i, 0.1), TG_EDTYPE));
    cr_assert(eq(ptr, y, NULL));
    cr_assert(eq(int, tg_add_scalar(&y, i, 1.5), TG_EDTYPE));
    cr_assert(eq(ptr, y, NULL));
    /* an integer with a float is the float's dtype, two integers stay
     * integers, exp of an integer is f32: as torch (tests/test_int_arith.c,
     * tests/test_int_promote.c) */
    cr_assert(eq(int, tg_mul(&y, f, i), TG_OK));
    cr_assert(eq(int, tg_tensor_dtype(y), TG_F32));
    tg_tensor_release(y);
    cr_assert(eq(int, tg_pow(&y, i, i), TG_OK));
    cr_assert(eq(int, tg_tensor_dtype(y), TG_I8));
    tg_tensor_release(y);
    cr_assert(eq(int, tg_exp(&y, i), TG_OK));
    cr_assert(eq(int, tg_tensor_dtype(y), TG_F32));
    tg_tensor_release(y);
    tg_tensor_release(f), tg_tensor_release(i), tg_tensor_release(u);
}

Test(ops_rules, keep_policy_rejects_mixed_dtypes_in_forward)
{
    int64_t sh[1] = {3};
    tg_tensor *a = th_seq(TG_F32, 1, sh, 0, 1), *b = th_seq(TG_F64, 1, sh, 0, 1), *y = NULL;
    /* The raw helper is what every forward runs after dispatch. */
    cr_assert(eq(int, tg__ew_binary("mul", &y, a, b, NULL, 0.0), TG_EDTYPE));
    cr_assert(eq(ptr, y, NULL));
    cr_assert(not(eq(ptr, strstr(tg_error_message(), "f32 and f64"), NULL)), "%s",
              tg_error_message());
    tg_tensor_release(a), tg_tensor_release(b);
}

Test(ops_rules, null_inputs_are_einval)
{
    int64_t sh[1] = {3};
    tg_tensor *a = th_seq(TG_F32, 1, sh, 0, 1), *y = NULL;
    cr_assert(eq(int, tg_add(&y, a, NULL), TG_EINVAL));
    cr_assert(eq(ptr, y, NULL));
    cr_assert(eq(int, tg_sub(&y, NULL, a), TG_EINVAL));
    cr_assert(eq(int, tg_neg(&y, NULL), TG_EINVAL));
    cr_assert(eq(int, tg_gelu(&y, NULL), TG_EINVAL));
    cr_assert(eq(int, tg_mul_scalar(&y, NULL, 2.0), TG_EINVAL));
    cr_assert(eq(int, tg_to_dtype(&y, NULL, TG_F32), TG_EINVAL));
    cr_assert(eq(int, tg_to_dtype(&y, a, (tg_dtype)99), TG_EINVAL));
    cr_assert(eq(ptr, y, NULL));
    cr_assert(eq(int, tg_tensor_refcount(a), 1));
    tg_tensor_release(a);
}

/* Every one-input elementwise op given a NULL input: TG_EINVAL naming the op
 * and the input, *out untouched (relu and leaky_relu read the input's dtype
 * for their half-precision path first, and crashed). */
Test(ops_rules, every_unary_op_refuses_a_null_input)
{
    static const struct {
        const char *name;
        int (*f)(tg_tensor **, tg_tensor *);
    } u[] = {{"neg", tg_neg},   {"exp", tg_exp},         {"log", tg_log},   {"sqrt", tg_sqrt},
             {"abs", tg_abs},   {"erf", tg_erf},         {"relu", tg_relu}, {"tanh", tg_tanh},
             {"sigmoid", tg_sigmoid}, {"silu", tg_silu}, {"gelu", tg_gelu},
             {"sin", tg_sin},   {"cos", tg_cos},         {"log1p", tg_log1p},
             {"expm1", tg_expm1},     {"hardsigmoid", tg_hardsigmoid},
             {"hardswish", tg_hardswish}, {"mish", tg_mish},
             {"hardtanh", tg_relu6},    /* relu6 calls the hardtanh op */
             {"sign", tg_sign}, {"floor", tg_floor},     {"ceil", tg_ceil},
             {"round", tg_round}, {"trunc", tg_trunc},   {"reciprocal", tg_reciprocal},
             {"rsqrt", tg_rsqrt}, {"tan", tg_tan},       {"atan", tg_atan},
             {"asin", tg_asin}, {"acos", tg_acos},       {"sinh", tg_sinh},
             {"cosh", tg_cosh}, {"asinh", tg_asinh},     {"acosh", tg_acosh},
             {"atanh", tg_atanh}, {"log2", tg_log2},     {"log10", tg_log10},
             {"exp2", tg_exp2}, {"logsigmoid", tg_logsigmoid}, {"selu", tg_selu},
             {"gelu_tanh", tg_gelu_tanh}};
    static const struct {
        const char *name;
        int (*f)(tg_tensor **, tg_tensor *, double);
    } s[] = {{"leaky_relu", tg_leaky_relu}, {"pow_scalar", tg_pow_scalar}, {"elu", tg_elu},
             {"celu", tg_celu}, {"hardshrink", tg_hardshrink}, {"softshrink", tg_softshrink},
             {"add_scalar", tg_add_scalar}, {"sub_scalar", tg_sub_scalar},
             {"rsub_scalar", tg_rsub_scalar}, {"mul_scalar", tg_mul_scalar},
             {"div_scalar", tg_div_scalar}};
    tg_tensor *const sentinel = (tg_tensor *)&sentinel;
    for (size_t i = 0; i < sizeof u / sizeof u[0] + sizeof s / sizeof s[0]; i++) {
        tg_tensor *y = sentinel;
        const bool un = i < sizeof u / sizeof u[0];
        const char *name = un ? u[i].name : s[i - sizeof u / sizeof u[0]].name;
        const int rc = un ? u[i].f(&y, NULL) : s[i - sizeof u / sizeof u[0]].f(&y, NULL, 0.5);
        cr_assert(eq(int, rc, TG_EINVAL), "%s", name);
        cr_assert(eq(ptr, y, sentinel), "%s: out untouched", name);
        char want[64];
        snprintf(want, sizeof want, "%s: input 0 is NULL", name);
        th_expect_in(tg_error_message(), want);
    }
}

/* ---- autograd details ---- */

Test(ops_rules, mul_of_a_tensor_with_itself_gets_both_gradients)
{
    int64_t sh[1] = {4};
    tg_tensor *x = th_seq(TG_F64, 1, sh, -2, 2), *y = NULL, *ones = NULL;
    tg_tensor_set_requires_grad(x, true);
    cr_assert(eq(int, tg_mul(&y, x, x), TG_OK));
    cr_assert(eq(int, tg_tensor_full(&ones, TG_F64, 1, sh, 1.0), TG_OK));
    cr_assert(eq(int, tg_backward(y, ones, NULL), TG_OK), "%s", tg_error_message());
    double *vx = th_doubles(x), *vg = th_doubles(tg_tensor_grad(x));
    /* d(x*x)/dx = 2x: both edges of the node lead to x. */
    for (int i = 0; i < 4; i++) cr_assert(eq(dbl, vg[i], 2.0 * vx[i]));
    free(vx), free(vg);
    tg_tensor_release(x), tg_tensor_release(y), tg_tensor_release(ones);
}

Test(ops_rules, modifying_a_saved_input_is_einplace_at_backward)
{
    int64_t sh[1] = {3};
    tg_tensor *x = th_seq(TG_F64, 1, sh, -2, 2), *w = th_seq(TG_F64, 1, sh, 1, 2), *y = NULL, *ones = NULL;
    tg_tensor_set_requires_grad(x, true);
    cr_assert(eq(int, tg_mul(&y, x, w), TG_OK));
    cr_assert(eq(int, tg_tensor_fill(w, 5.0), TG_OK));
    cr_assert(eq(int, tg_tensor_full(&ones, TG_F64, 1, sh, 1.0), TG_OK));
    cr_assert(eq(int, tg_backward(y, ones, NULL), TG_EINPLACE));
    cr_assert(eq(ptr, tg_tensor_grad(x), NULL));
    tg_tensor_release(x), tg_tensor_release(w), tg_tensor_release(y), tg_tensor_release(ones);
}

/* ---- scalar operands as PyTorch converts them ---- */

/* Rounds v to dt's values (f32, or f16/bf16 through f32, as c10 does). */
static double in_dtype(tg_dtype dt, double v)
{
    if (dt == TG_F16) return tg_f16_to_f32(tg_f32_to_f16((float)v));
    if (dt == TG_BF16) return tg_bf16_to_f32(tg_f32_to_bf16((float)v));
    return dt == TG_F32 ? (double)(float)v : v;
}

/* x OP s in PyTorch converts the Python number s to x's dtype first, then
 * computes on two values of that dtype and rounds once (checked in torch
 * 1.13: 0 of 20000 elements differ from this rule for f32/f16/bf16, s in
 * {0.1, 1/3, 1.7, 1e-3, 3.14159}; with s kept in f64, 17% of an f32 x * 0.1
 * differed by an ulp).  The mul/div backward uses the same converted s. */
Test(ops_rules, scalar_operand_is_converted_to_the_tensor_dtype_as_torch)
{
    const tg_dtype dts[4] = {TG_F32, TG_F16, TG_BF16, TG_F64};
    const double scalars[4] = {0.1, 1.0 / 3.0, 1.7, 1e-3};
    int (*const fns[5])(tg_tensor **, tg_tensor *, double) = {
        tg_add_scalar, tg_sub_scalar, tg_rsub_scalar, tg_mul_scalar, tg_div_scalar};
    for (int d = 0; d < 4; d++)
        for (int k = 0; k < 4; k++)
            for (int f = 0; f < 5; f++) {
                tg_tensor *x = th_rand_uniform(dts[d], 1, (int64_t[]){257}, 11 + k), *y = NULL;
                tg_tensor_set_requires_grad(x, true);
                cr_assert(eq(int, fns[f](&y, x, scalars[k]), TG_OK));
                const double s = in_dtype(dts[d], scalars[k]);
                for (int64_t i = 0; i < 257; i++) {
                    /* on two values of the dtype, the f64 result rounded to
                     * the dtype is the dtype's own correctly rounded result
                     * (53 >= 2 * 24 + 2 bits: the double rounding is
                     * innocuous) */
                    const double xi = th_at(x, i);
                    const double want = in_dtype(dts[d], f == 0 ? xi + s : f == 1 ? xi - s
                                                        : f == 2 ? s - xi : f == 3 ? xi * s
                                                        : xi / s);
                    cr_assert(eq(dbl, th_at(y, i), want), "%s op %d s=%g [%lld]",
                              tg_dtype_name(dts[d]), f, scalars[k], (long long)i);
                }
                if (f >= 3) {   /* d(x*s)/dx = s, d(x/s)/dx = 1/s in the dtype: seed 1 */
                    tg_tensor *l = NULL;
                    cr_assert(eq(int, tg_sum(&l, y), TG_OK));
                    cr_assert(eq(int, tg_backward(l, NULL, NULL), TG_OK));
                    const double g = th_at(tg_tensor_grad(x), 0);
                    cr_assert(eq(dbl, g, in_dtype(dts[d], f == 3 ? s : 1.0 / s)), "%s grad",
                              tg_dtype_name(dts[d]));
                    tg_tensor_release(l);
                }
                tg_tensor_release(x), tg_tensor_release(y);
            }
    /* figures from torch 1.13 */
    tg_tensor *h = th_tensor_from(TG_F16, 1, (int64_t[]){3}, (double[]){65504, 7, 0.001}), *y = NULL;
    cr_assert(eq(int, tg_mul_scalar(&y, h, 0.1), TG_OK));
    cr_assert(eq(dbl, th_at(y, 0), 6548.0));           /* f64 0.1 gave 6552 */
    cr_assert(eq(dbl, th_at(y, 1), 0.69970703125));    /* f64 0.1 gave 0.7001953125 */
    tg_tensor_release(y);
    cr_assert(eq(int, tg_mul_scalar(&y, h, 70000.0), TG_OK));
    cr_assert(isinf(th_at(y, 2)));                     /* 70000 is inf in f16 */
    tg_tensor_release(y), tg_tensor_release(h);
    tg_tensor *f = th_tensor_from(TG_F32, 1, (int64_t[]){1}, (double[]){0.1});
    cr_assert(eq(int, tg_mul_scalar(&y, f, 0.1), TG_OK));
    cr_assert(eq(dbl, th_at(y, 0), (double)(0.1f * 0.1f)));   /* 0.010000000707805157 */
    tg_tensor_release(y), tg_tensor_release(f);
}

/* mean's backward divides the incoming gradient by the count, as PyTorch's
 * (grad / numel, the count converted to the dtype like any scalar operand):
 * multiplying by a rounded 1/count differs in half precision (f16, n = 7,
 * g = 0.7: 0.10003662 by division, 0.09997559 by 1/7 rounded first). */
Test(ops_rules, mean_backward_divides_by_the_count)
{
    const tg_dtype dts[3] = {TG_F16, TG_BF16, TG_F32};
    for (int d = 0; d < 3; d++)
        for (int64_t n = 1; n <= 40; n++) {
            tg_tensor *x = th_rand_uniform(dts[d], 2, (int64_t[]){3, n}, 5), *m = NULL;
            tg_tensor *w = th_rand_uniform(dts[d], 1, (int64_t[]){3}, 6), *p = NULL, *l = NULL;
            tg_tensor_set_requires_grad(x, true);
            cr_assert(eq(int, tg_mean_dims(&m, x, 1, (int[]){1}, false), TG_OK));
            cr_assert(eq(int, tg_mul(&p, m, w), TG_OK));
            cr_assert(eq(int, tg_sum(&l, p), TG_OK));
            cr_assert(eq(int, tg_backward(l, NULL, NULL), TG_OK));
            tg_tensor *want = NULL;
            cr_assert(eq(int, tg_div_scalar(&want, w, (double)n), TG_OK));
            for (int64_t r = 0; r < 3; r++)
                for (int64_t c = 0; c < n; c++)
                    cr_assert(eq(dbl, th_at(tg_tensor_grad(x), r * n + c), th_at(want, r)),
                              "%s n=%lld row %lld", tg_dtype_name(dts[d]), (long long)n,
                              (long long)r);
            tg_tensor *all = NULL, *g1 = NULL;   /* mean of everything: the same rule */
            tg_tensor_zero_grad(x);
            cr_assert(eq(int, tg_mean(&all, x), TG_OK));
            cr_assert(eq(int, tg_mul(&g1, all, w), TG_OK));   /* (3,): seed 1 each */
            tg_tensor_release(l), l = NULL;
            cr_assert(eq(int, tg_sum(&l, g1), TG_OK));
            cr_assert(eq(int, tg_backward(l, NULL, NULL), TG_OK));
            tg_tensor *s = NULL, *ws = NULL;
            cr_assert(eq(int, tg_sum(&s, w), TG_OK));
            cr_assert(eq(int, tg_div_scalar(&ws, s, (double)(3 * n)), TG_OK));
            cr_assert(eq(dbl, th_at(tg_tensor_grad(x), 0), th_at(ws, 0)), "%s n=%lld all",
                      tg_dtype_name(dts[d]), (long long)n);
            tg_tensor *rel[] = {x, m, w, p, l, want, all, g1, s, ws};
            for (size_t i = 0; i < sizeof rel / sizeof *rel; i++) tg_tensor_release(rel[i]);
        }
}

/* ---- bit for bit against torch 1.13 (scripts/make_ew_goldens.py) ---- */

/* d(a ** b) at base 0, negative bases, exponent 0 and NaN as torch's
 * autograd: in particular d/db is 0 where a = 0 and b >= 0 (the limit of
 * a^b log a), not 0 * -inf = NaN. */
Test(ops_rules, pow_gradients_match_torch_at_special_points)
{
    tg_st_file *f = th_golden_load("elementwise.safetensors");
    tg_tensor *a0 = tg_st_get(f, "powgrad.a"), *b0 = tg_st_get(f, "powgrad.b");
    tg_tensor *ga = tg_st_get(f, "powgrad.ga"), *gb = tg_st_get(f, "powgrad.gb");
    cr_assert(a0 && b0 && ga && gb, "powgrad.* in the golden file");
    tg_tensor *a = NULL, *b = NULL, *p = NULL, *s = NULL;
    cr_assert(eq(int, tg_tensor_clone(&a, a0), TG_OK));
    cr_assert(eq(int, tg_tensor_clone(&b, b0), TG_OK));
    tg_tensor_set_requires_grad(a, true);
    tg_tensor_set_requires_grad(b, true);
    cr_assert(eq(int, tg_pow(&p, a, b), TG_OK));
    cr_assert(eq(int, tg_sum(&s, p), TG_OK));
    cr_assert(eq(int, tg_backward(s, NULL, NULL), TG_OK), "%s", tg_error_message());
    for (int64_t i = 0; i < tg_tensor_numel(ga); i++) {
        const double wa = th_at(ga, i), wb = th_at(gb, i);
        const double da = th_at(tg_tensor_grad(a), i), db = th_at(tg_tensor_grad(b), i);
        /* to rounding (torch's pow and log are not correctly rounded) */
        cr_assert(th_close(da, wa, 1e-15, 0), "d/da at (%g, %g): got %.17g, torch %.17g",
                  th_at(a, i), th_at(b, i), da, wa);
        cr_assert(th_close(db, wb, 1e-15, 0), "d/db at (%g, %g): got %.17g, torch %.17g",
                  th_at(a, i), th_at(b, i), db, wb);
    }
    tg_tensor_release(s), tg_tensor_release(p), tg_tensor_release(a), tg_tensor_release(b);
    tg_st_free(f);
}

/* Units in the last place between two finite f32 of one sign. */
static int64_t f32_ulps(float a, float b)
{
    int32_t ia, ib;
    memcpy(&ia, &a, sizeof ia);
    memcpy(&ib, &b, sizeof ib);
    return ia > ib ? (int64_t)ia - ib : (int64_t)ib - ia;
}

/* x ** p as torch.pow(x, p) with p a Python number: p is converted to x's
 * dtype first, as for the other scalar operands.  f16/bf16 bit for bit
 * (torch computes them in double from the converted p).  In f32 torch's
 * vectorised pow is not correctly rounded (2 ulps off at some x), so the
 * result is checked within an ulp of pow in double with the converted p
 * (with p itself, 1.7 or -1.3, it is further off than that at the larger
 * |log x|), and torch's within 4 ulps of the same. */
Test(ops_rules, pow_scalar_converts_the_exponent_to_the_dtype_as_torch)
{
    tg_st_file *f = th_golden_load("elementwise.safetensors");
    static const char *const dn[] = {"f32", "f16", "bf16"};
    static const double ps[] = {1.7, -1.3};   /* POW_EXPONENTS of the script */
    for (int d = 0; d < 3; d++) {
        char xn[32], yn[32];
        snprintf(xn, sizeof xn, "pows.x.%s", dn[d]);
        tg_tensor *x = tg_st_get(f, xn);
        cr_assert(x != NULL, "%s in the golden file", xn);
        for (int k = 0; k < 2; k++) {
            snprintf(yn, sizeof yn, "pows.y%d.%s", k, dn[d]);
            tg_tensor *want = tg_st_get(f, yn), *y = NULL;
            cr_assert(want != NULL, "%s in the golden file", yn);
            cr_assert(eq(int, tg_pow_scalar(&y, x, ps[k]), TG_OK), "%s", tg_error_message());
            if (d > 0) {
                th_expect_same_bits(yn, x, y, want);
            } else {
                for (int64_t i = 0; i < tg_tensor_numel(want); i++) {
                    const float g = (float)th_at(y, i), w = (float)th_at(want, i);
                    const float r = (float)pow(th_at(x, i), (double)(float)ps[k]);
                    cr_assert(f32_ulps(g, r) <= 1 && f32_ulps(w, r) <= 4,
                              "%s[%lld]: x = %.9g: got %.9g, torch %.9g, pow in double %.9g", yn,
                              (long long)i, th_at(x, i), g, w, r);
                }
            }
            tg_tensor_release(y);
        }
    }
    tg_st_free(f);
}
