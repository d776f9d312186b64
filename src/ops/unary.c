/* src/ops/unary.c - neg, exp, log, sqrt, abs, pow_scalar, erf, sin, cos,
 * log1p, expm1, and the rounding ops sign, floor, ceil, round, trunc.
 *
 * Backwards save the op's input and recompute what they need from it with
 * differentiable ops; exp saves its output instead, as PyTorch's (a
 * detached alias: the output itself would be a refcount cycle through the
 * node), and its gradient is g times it.  log of a non-positive number is -inf/NaN as in C and
 * PyTorch, not an error.  The rounding ops are piecewise constant: their
 * gradient is zero everywhere (as torch's, also at the jumps), and they keep
 * +-0, +-inf and NaN (sign(NaN) is 0, as torch's).
 *
 * neg, abs and the rounding ops also take an integer a (i8, u8, i32, i64),
 * as torch's: floor, ceil, round and trunc give a copy of a, sign -1, 0 or
 * 1, neg and abs wrap modulo 2^bits (-(-128) and |-128| are -128 in i8,
 * -(1) is 255 in u8), each a new tensor of a's dtype computed on the
 * integers (through double an i64 beyond 2^53 would change).  An integer
 * result is not recorded (tg_op_call), as torch's.  The floating functions
 * exp, log, sqrt, erf, sin, cos, log1p and expm1 of an integer a give f32,
 * as torch's: a's values converted to f32, then as for an f32 a
 * (tg__ew_unary_float).  pow_scalar of an integer a with an integral
 * exponent stays an integer (src/ops/int_arith.c); torch's result dtype
 * there depends on whether the exponent is a Python int or float, which a
 * double cannot say, so a non-integral one is refused.
 */
#include <assert.h>
#include <math.h>

#include "core/core.h"
#include "ops/elementwise.h"
#include "autograd/tape.h"
#include "ops/families.h"
#include "ops/unary_simd_internal.h"
#include "tapegrad/ops.h"

typedef struct pow_params {
    double p;
} pow_params;

TG_EW_UNARY_KERNEL(k_neg, -a)
/* exp of f64 by libm; of f32 (and the half dtypes) in vector registers
 * (src/ops/unary_simd.c: within one rounding of (float)exp((double)a),
 * tests). */
static void k_exp(tg_dtype cdt, void *out, const void *a, const void *b, int64_t n, double s)
{
    (void)b, (void)s;
    if (cdt == TG_F64) {
        double *o = out;
        const double *x = a;
        for (int64_t i = 0; i < n; i++) o[i] = exp(x[i]);
    } else {
        tg__unary_simd_f32(TG__USIMD_EXP, out, a, NULL, n, tg__exp_width_get());
    }
}
TG_EW_UNARY_KERNEL(k_log, log((double)a))
TG_EW_UNARY_KERNEL(k_sqrt, sqrt((double)a))
TG_EW_UNARY_KERNEL(k_abs, fabs((double)a))
TG_EW_UNARY_KERNEL(k_pow_s, pow((double)a, s))
TG_EW_UNARY_KERNEL(k_erf, erf((double)a))
TG_EW_UNARY_KERNEL(k_sin, sin((double)a))
TG_EW_UNARY_KERNEL(k_cos, cos((double)a))
TG_EW_UNARY_KERNEL(k_log1p, log1p((double)a))
TG_EW_UNARY_KERNEL(k_expm1, expm1((double)a))
/* sign(a) in {-1, 0, 1}, the derivative of |a| as PyTorch defines it: 0 at
 * 0, -0 and NaN. */
TG_EW_UNARY_KERNEL(k_sign, a > 0 ? 1.0 : a < 0 ? -1.0 : 0.0)
TG_EW_UNARY_KERNEL(k_floor, floor((double)a))
TG_EW_UNARY_KERNEL(k_ceil, ceil((double)a))
/* nearbyint in the default rounding mode: halves to even, torch.round's rule
 * (round() would take them away from zero). */
TG_EW_UNARY_KERNEL(k_round, nearbyint((double)a))
TG_EW_UNARY_KERNEL(k_trunc, trunc((double)a))

/* What an op does to an integer a: refuse it (pow_scalar), compute on its
 * f32 values (the floating functions), copy it, or take its sign, negation
 * or absolute value; the kinds after INT_FLOAT compute on the integers
 * (int_unary). */
typedef enum int_kind { INT_NONE, INT_FLOAT, INT_COPY, INT_SIGN, INT_NEG, INT_ABS } int_kind;

typedef struct int_job {
    int_kind kind;
    tg_dtype dt;
    void *y;   /* the result's contiguous elements, a copy of a's */
} int_job;

/* -v modulo 2^bits, in unsigned arithmetic (no signed overflow); the
 * conversion back to T wraps (two's complement, as gcc and clang define
 * it). */
#define INT_APPLY(T, U)                                                       \
    do {                                                                      \
        T *y = j->y;                                                          \
        for (int64_t i = lo; i < hi; i++) {                                   \
            const T v = y[i], m = (T)(U)(0u - (U)v);                          \
            y[i] = j->kind == INT_SIGN ? (T)((v > 0) - (v < 0))               \
                 : (j->kind == INT_NEG || v < 0) ? m : v;                     \
        }                                                                     \
    } while (0)

static void int_range(void *p, int64_t lo, int64_t hi)
{
    const int_job *j = p;
    switch (j->dt) {
    case TG_I8: INT_APPLY(int8_t, uint8_t); break;
    case TG_I32: INT_APPLY(int32_t, uint32_t); break;
    case TG_I64: INT_APPLY(int64_t, uint64_t); break;
    default: {   /* u8: never negative, so abs is a copy */
        uint8_t *y = j->y;
        for (int64_t i = lo; i < hi; i++)
            y[i] = j->kind == INT_SIGN ? y[i] != 0 : (uint8_t)(0u - y[i]);
    }
    }
}

/* *out = the integer form (kind) of integer a: a new contiguous tensor of
 * a's dtype. */
static int int_unary(tg_tensor **out, tg_tensor *a, int_kind kind)
{
    tg_tensor *y = NULL;
    TG_TRY(tg_tensor_clone(&y, a));
    if (a->dtype == TG_U8 && kind == INT_ABS) kind = INT_COPY;
    if (kind != INT_COPY) {
        const int64_t n = tg_tensor_numel(y);
        int_job j = {.kind = kind, .dt = y->dtype, .y = tg_tensor_data(y)};
        tg__parallel_range(n, n > 32768, int_range, &j);
    }
    *out = y;
    return TG_OK;
}

/* Forward of a one-input op: runs k and saves the input when recorded; an
 * integer a takes the op's integer form ik (INT_NONE: refused). */
static int unary_forward(tg_ctx *ctx, const char *name, tg_tensor **out, tg_tensor *a,
                         tg_ew_kernel_fn k, double s, bool save, int_kind ik)
{
    if (a && ik > INT_FLOAT && !tg_dtype_is_float(a->dtype)) return int_unary(out, a, ik);
    TG_TRY(ik == INT_FLOAT ? tg__ew_unary_float(name, out, a, k, s)
                           : tg__ew_unary(name, out, a, k, s));
    if (ctx && save) tg__ctx_save(ctx, a);
    return TG_OK;
}

#define UNARY_FORWARD(op, k, save, ik)                                        \
    static int op##_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in, \
                            const void *params)                               \
    {                                                                         \
        return unary_forward(ctx, #op, out, in[0], k, 0.0, save, ik);         \
    }
UNARY_FORWARD(neg, k_neg, false, INT_NEG)

/* exp saves its output y (a detached alias of it: saving y itself would
 * make the cycle y -> node -> ctx -> y), as PyTorch's: the gradient is
 * g * y, the bits of g * exp(a). */
static int exp_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                       const void *params)
{
    TG_TRY(tg__ew_unary_float("exp", out, in[0], k_exp, 0.0));
    return tg__ew_save_output(ctx, out);
}
UNARY_FORWARD(log, k_log, true, INT_FLOAT)
UNARY_FORWARD(sqrt, k_sqrt, true, INT_FLOAT)
UNARY_FORWARD(abs, k_abs, true, INT_ABS)
UNARY_FORWARD(erf, k_erf, true, INT_FLOAT)
UNARY_FORWARD(sin, k_sin, true, INT_FLOAT)
UNARY_FORWARD(cos, k_cos, true, INT_FLOAT)
UNARY_FORWARD(log1p, k_log1p, true, INT_FLOAT)
UNARY_FORWARD(expm1, k_expm1, true, INT_FLOAT)
UNARY_FORWARD(sign, k_sign, false, INT_SIGN)
UNARY_FORWARD(floor, k_floor, false, INT_COPY)
UNARY_FORWARD(ceil, k_ceil, false, INT_COPY)
UNARY_FORWARD(round, k_round, false, INT_COPY)
UNARY_FORWARD(trunc, k_trunc, false, INT_COPY)

/* An integer a with an integral p >= 0 (a Python int to torch) stays an
 * integer, a^p modulo 2^bits; as torch's, p must convert to a's dtype
 * without overflow (i8: p <= 127) and may not be negative ("Integers to
 * negative integer powers are not allowed"); a non-integral p is refused
 * (tg__scalar_as_int), where torch would give f32 for a Python float. */
static int pow_scalar_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                              const void *params)
{
    const double p = ((const pow_params *)params)->p;
    tg_tensor *a = in[0];
    if (a && !tg_dtype_is_float(a->dtype)) {
        int64_t v;
        TG_TRY(tg__scalar_as_int("pow_scalar", "p", a->dtype, p, &v));
        TG_CHECK(v >= 0, TG_EINVAL, "pow_scalar: p=%lld with a of dtype %s: integers to "
                 "negative integer powers are not allowed, as in torch", (long long)v,
                 tg_dtype_name(a->dtype));
        TG_TRY(tg__int_in_dtype("pow_scalar", "p", a->dtype, v));
        return tg__int_scalar("pow_scalar", out, a, v, TG_INT_POW, false);
    }
    return unary_forward(ctx, "pow_scalar", out, a, k_pow_s, p, true, INT_NONE);
}

/* d(-a) = -g. */
static int neg_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    return tg_neg(&gi[0], g);
}

/* d exp(a) = g * y, y the saved output; with create_graph y comes back
 * with this op as its grad_fn (tg__ctx_saved_output), so the product is
 * differentiable again. */
static int exp_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    tg_tensor *y;
    TG_TRY(tg__ctx_saved_output(ctx, 0, &y));
    const int rc = tg_mul(&gi[0], g, y);
    tg_tensor_release(y);
    return rc;
}

/* d log(a) = g / a. */
static int log_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    tg_tensor *a;
    TG_TRY(tg__ctx_saved(ctx, 0, &a));
    return tg_div(&gi[0], g, a);
}

/* d sqrt(a) = g * 0.5 / sqrt(a). */
static int sqrt_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    tg_tensor *a, *r = NULL, *q = NULL;
    int rc;
    TG_TRY_GOTO(tg__ctx_saved(ctx, 0, &a));
    TG_TRY_GOTO(tg_sqrt(&r, a));
    TG_TRY_GOTO(tg_div(&q, g, r));
    TG_TRY_GOTO(tg_mul_scalar(&gi[0], q, 0.5));
done:
    tg_tensor_release(r);
    tg_tensor_release(q);
    return rc;
}

/* d|a| = g * sign(a); sign is piecewise constant, so it enters as a constant
 * tensor (computed by the raw kernel, not recorded). */
static int abs_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    tg_tensor *a, *sgn = NULL;
    int rc;
    TG_TRY_GOTO(tg__ctx_saved(ctx, 0, &a));
    TG_TRY_GOTO(tg__ew_unary("abs", &sgn, a, k_sign, 0.0));
    TG_TRY_GOTO(tg_mul(&gi[0], g, sgn));
done:
    tg_tensor_release(sgn);
    return rc;
}

/* d a^p = g * p * a^(p-1); p = 0 is a constant with zero gradient. */
static int pow_scalar_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    double p = ((const pow_params *)tg__ctx_params(ctx))->p;
    tg_tensor *a, *t = NULL, *u = NULL;
    int rc;
    TG_TRY_GOTO(tg__ctx_saved(ctx, 0, &a));
    if (p == 0.0) {
        TG_TRY_GOTO(tg_tensor_zeros_like(&gi[0], a));
        goto done;
    }
    TG_TRY_GOTO(tg_pow_scalar(&t, a, p - 1.0));
    TG_TRY_GOTO(tg_mul_scalar(&u, t, p));
    TG_TRY_GOTO(tg_mul(&gi[0], g, u));
done:
    tg_tensor_release(t);
    tg_tensor_release(u);
    return rc;
}

/* d erf(a) = g * 2/sqrt(pi) * exp(-a^2). */
static int erf_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    tg_tensor *a, *t[4] = {NULL, NULL, NULL, NULL};
    int rc;
    TG_TRY_GOTO(tg__ctx_saved(ctx, 0, &a));
    TG_TRY_GOTO(tg_mul(&t[0], a, a));
    TG_TRY_GOTO(tg_neg(&t[1], t[0]));
    TG_TRY_GOTO(tg_exp(&t[2], t[1]));
    TG_TRY_GOTO(tg_mul_scalar(&t[3], t[2], 2.0 / sqrt(M_PI)));
    TG_TRY_GOTO(tg_mul(&gi[0], g, t[3]));
done:
    for (int i = 0; i < 4; i++) tg_tensor_release(t[i]);
    return rc;
}

/* g * h(a) * c, the gradient of an op whose derivative is the op h (ops/elementwise.h). */
int tg__unary_g_times(tg_ctx *ctx, tg_tensor *g, int (*h)(tg_tensor **, tg_tensor *), double c,
                      tg_tensor **gi)
{
    tg_tensor *a, *d = NULL, *gd = NULL;
    int rc;
    TG_TRY_GOTO(tg__ctx_saved(ctx, 0, &a));
    TG_TRY_GOTO(h(&d, a));
    TG_TRY_GOTO(tg_mul(c == 1.0 ? &gi[0] : &gd, g, d));
    if (c != 1.0) TG_TRY_GOTO(tg_mul_scalar(&gi[0], gd, c));
done:
    tg_tensor_release(d);
    tg_tensor_release(gd);
    return rc;
}

/* d sin(a) = g * cos(a). */
static int sin_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    return tg__unary_g_times(ctx, g, tg_cos, 1.0, gi);
}

/* d cos(a) = -g * sin(a). */
static int cos_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    tg_tensor *a, *s = NULL, *m = NULL;
    int rc;
    TG_TRY_GOTO(tg__ctx_saved(ctx, 0, &a));
    TG_TRY_GOTO(tg_sin(&s, a));
    TG_TRY_GOTO(tg_mul(&m, g, s));
    TG_TRY_GOTO(tg_neg(&gi[0], m));
done:
    tg_tensor_release(s);
    tg_tensor_release(m);
    return rc;
}

/* d log1p(a) = g / (1 + a). */
static int log1p_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    tg_tensor *a, *d = NULL;
    int rc;
    TG_TRY_GOTO(tg__ctx_saved(ctx, 0, &a));
    TG_TRY_GOTO(tg_add_scalar(&d, a, 1.0));
    TG_TRY_GOTO(tg_div(&gi[0], g, d));
done:
    tg_tensor_release(d);
    return rc;
}

/* d expm1(a) = g * exp(a). */
static int expm1_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    return tg__unary_g_times(ctx, g, tg_exp, 1.0, gi);
}

/* The rounding ops: a zero gradient of g's shape and dtype (a constant, so
 * every higher derivative is zero too). */
static int zero_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    (void)ctx;
    return tg_tensor_zeros_like(&gi[0], g);
}
#define sign_backward zero_backward
#define floor_backward zero_backward
#define ceil_backward zero_backward
#define round_backward zero_backward
#define trunc_backward zero_backward

/* formula: the schema's vjp; sym: its scalar (tapegrad/op.h). */
#define SCHEMA(op, policy, formula, sym)                                      \
    static const tg_op_schema op##_op = {.name = #op, .arity = 1, .amp = policy,    \
                                   .forward = op##_forward, .backward = op##_backward, \
                                   .double_backward = true, .vjp = formula, .scalar = sym}
SCHEMA(neg, TG_AMP_KEEP, "da = -g", NULL);
SCHEMA(exp, TG_AMP_FP32, "da = g * exp(a) = g * y", NULL);
SCHEMA(log, TG_AMP_FP32, "da = g / a", NULL);
SCHEMA(sqrt, TG_AMP_FP32, "da = g / (2 sqrt(a)) = g / (2 y)", NULL);
SCHEMA(abs, TG_AMP_KEEP, "da = g * sign(a)", NULL);
SCHEMA(pow_scalar, TG_AMP_FP32, "da = g * p * a^(p-1)", "p");
SCHEMA(erf, TG_AMP_KEEP, "da = g * 2/sqrt(pi) * exp(-a^2)", NULL);
SCHEMA(sin, TG_AMP_KEEP, "da = g * cos(a)", NULL);
SCHEMA(cos, TG_AMP_KEEP, "da = -g * sin(a)", NULL);
SCHEMA(log1p, TG_AMP_FP32, "da = g / (1 + a)", NULL);
SCHEMA(expm1, TG_AMP_FP32, "da = g * exp(a)", NULL);
SCHEMA(sign, TG_AMP_KEEP, "da = 0", NULL);
SCHEMA(floor, TG_AMP_KEEP, "da = 0", NULL);
SCHEMA(ceil, TG_AMP_KEEP, "da = 0", NULL);
SCHEMA(round, TG_AMP_KEEP, "da = 0", NULL);
SCHEMA(trunc, TG_AMP_KEEP, "da = 0", NULL);

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__unary_ops[] = {&neg_op,        &exp_op, &log_op, &sqrt_op,
                                             &abs_op,        &erf_op, &sin_op, &cos_op,
                                             &pow_scalar_op, &log1p_op, &expm1_op,
                                             &sign_op,       &floor_op, &ceil_op,
                                             &round_op,      &trunc_op};
static_assert(sizeof tg__unary_ops / sizeof tg__unary_ops[0] == TG__unary_N,
              "src/ops/families.h must count the unary ops");

static int call1(const tg_op_schema *op, tg_tensor **out, tg_tensor *a)
{
    tg_tensor *in[1] = {a};
    return tg_op_call(op, out, 1, in, NULL, 0);
}

int tg_neg(tg_tensor **out, tg_tensor *a) { return call1(&neg_op, out, a); }
int tg_exp(tg_tensor **out, tg_tensor *a) { return call1(&exp_op, out, a); }
int tg_log(tg_tensor **out, tg_tensor *a) { return call1(&log_op, out, a); }
int tg_sqrt(tg_tensor **out, tg_tensor *a) { return call1(&sqrt_op, out, a); }
int tg_abs(tg_tensor **out, tg_tensor *a) { return call1(&abs_op, out, a); }
int tg_erf(tg_tensor **out, tg_tensor *a) { return call1(&erf_op, out, a); }
int tg_sin(tg_tensor **out, tg_tensor *a) { return call1(&sin_op, out, a); }
int tg_cos(tg_tensor **out, tg_tensor *a) { return call1(&cos_op, out, a); }
int tg_log1p(tg_tensor **out, tg_tensor *a) { return call1(&log1p_op, out, a); }
int tg_expm1(tg_tensor **out, tg_tensor *a) { return call1(&expm1_op, out, a); }
int tg_sign(tg_tensor **out, tg_tensor *a) { return call1(&sign_op, out, a); }
int tg_floor(tg_tensor **out, tg_tensor *a) { return call1(&floor_op, out, a); }
int tg_ceil(tg_tensor **out, tg_tensor *a) { return call1(&ceil_op, out, a); }
int tg_round(tg_tensor **out, tg_tensor *a) { return call1(&round_op, out, a); }
int tg_trunc(tg_tensor **out, tg_tensor *a) { return call1(&trunc_op, out, a); }

/* The exponent in a's dtype, as torch's (and as the scalar ops of
 * binary.c): an f32 x ** 1.7 is x ** 1.7f, a bf16 one x ** 1.703125, each
 * computed in double and rounded once. */
int tg_pow_scalar(tg_tensor **out, tg_tensor *a, double p)
{
    pow_params prm = {.p = a ? tg__scalar_in_dtype(a->dtype, p) : p};
    tg_tensor *in[1] = {a};
    return tg_op_call(&pow_scalar_op, out, 1, in, &prm, sizeof prm);
}
