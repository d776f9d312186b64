/* src/ops/remainder.c - fmod, remainder and floor_divide of two tensors
 * broadcast together, and of a tensor with a number (torch.fmod,
 * torch.remainder or %, torch.floor_divide or //), as torch 1.13's CPU
 * kernels.
 *
 * Floats (f16 and bf16 computed in f32, rounded as torch's: see the
 * kernels):
 *   fmod(a, b)      = C's fmod: a - trunc(a / b) b, exact, the sign of a;
 *   remainder(a, b) = m = fmod(a, b), plus b where m != 0 and the signs of
 *                     m and b differ (Python's %: the sign of b);
 *   floor_div(a, b) = a / b where b = 0 (+-inf or NaN); else q = (a - m) / b
 *                     less 1 where remainder would add b, then floor(q),
 *                     raised by 1 where q - floor(q) > 0.5 (q is a rounded
 *                     quotient), and a zero q signed as a / b.
 * Integers stay integers of torch.result_type's dtype (tg__result_dtype),
 * each operand converted to it modulo 2^bits; a zero divisor is refused
 * (torch's ZeroDivisionError).  The most negative value divided by -1,
 * which torch 1.13 computes with the CPU's division (a crash on x86), is
 * taken modulo 2^bits here: fmod and remainder 0, floor_divide the value
 * itself (as i8 -128 // -1 is -128 in torch).  An integer with a float
 * operand is converted to the float's dtype first.
 *
 * Gradients, as torch's: d fmod = g and -g trunc(a / b); d remainder = g
 * and -g floor_div(a, b); each quotient a constant (its own derivative is
 * 0 almost everywhere, as torch's), so both are differentiable to any
 * order.  floor_divide has no derivative in torch 1.13 ("derivative for
 * aten::floor_divide is not implemented"): its backward refuses likewise. */
#include <assert.h>
#include <math.h>

#include "core/core.h"
#include "autograd/tape.h"
#include "ops/elementwise.h"
#include "ops/families.h"
#include "tapegrad/ops.h"

typedef enum { REM_FMOD, REM_REMAINDER, REM_FLOOR_DIV } rem_kind;

static const char *const REM_NAMES[3] = {"fmod", "remainder", "floor_divide"};

/* ---- float kernels ----
 * The kernels' scalar h says how torch rounds the steps of floor_divide
 * and of fmod's trunc(a / b): 0 in the compute dtype (f32, f64); 1 (f16)
 * and 2 (bf16) each step rounded to the half dtype, as torch's c10::Half
 * and c10::BFloat16 arithmetic (fmod and remainder are exact, or one step
 * there, and need no such care). */

/* v rounded to the half dtype h names (v itself for h = 0). */
static inline float round_h(float v, int h)
{
    if (h == 1) return tg_f16_to_f32(tg_f32_to_f16(v));
    return h == 2 ? tg_bf16_to_f32(tg_f32_to_bf16(v)) : v;
}

#define REM_FNS(T, SUF, FMOD, FLOOR, TRUNC, COPYSIGN, R)                      \
    static inline T rem_##SUF(T a, T b, int h)                                \
    {                                                                         \
        (void)h;                                                              \
        T m = FMOD(a, b);                                                     \
        if (m != 0 && (b < 0) != (m < 0)) m += b;                             \
        return m;                                                             \
    }                                                                         \
    static inline T floordiv_##SUF(T a, T b, int h)                           \
    {                                                                         \
        if (b == 0) return a / b;                                             \
        const T m = FMOD(a, b);                                               \
        T q = R(R(a - m) / b);                                                \
        if (m != 0 && (b < 0) != (m < 0)) q = R(q - 1);                       \
        if (q == 0) return COPYSIGN((T)0, a / b);                             \
        T f = FLOOR(q);                                                       \
        if (R(q - f) > (T)0.5) f = R(f + 1);                                  \
        return f;                                                             \
    }                                                                         \
    static inline T fmod_##SUF(T a, T b, int h)                               \
    {                                                                         \
        (void)h;                                                              \
        return FMOD(a, b);                                                    \
    }                                                                         \
    static inline T truncdiv_##SUF(T a, T b, int h) { return TRUNC(R(a / b)); }
#define ROUND_NONE(v) (v)
#define ROUND_HALF(v) round_h(v, h)
REM_FNS(double, d, fmod, floor, trunc, copysign, ROUND_NONE)
REM_FNS(float, f, fmodf, floorf, truncf, copysignf, ROUND_HALF)

/* k_fmod, k_rem, k_floordiv, k_truncdiv: the kernels of tg__ew_binary. */
#define REM_KERNEL(kname, fn)                                                 \
    static void kname(tg_dtype cdt, void *out, const void *a, const void *b, int64_t n, \
                      double s)                                               \
    {                                                                         \
        const int h = (int)s;                                                 \
        if (cdt == TG_F64) {                                                  \
            double *o = out;                                                  \
            const double *x = a, *y = b;                                      \
            for (int64_t i = 0; i < n; i++) o[i] = fn##_d(x[i], y[i], h);     \
        } else {                                                              \
            float *o = out;                                                   \
            const float *x = a, *y = b;                                       \
            for (int64_t i = 0; i < n; i++) o[i] = fn##_f(x[i], y[i], h);     \
        }                                                                     \
    }
REM_KERNEL(k_fmod, fmod)
REM_KERNEL(k_rem, rem)
REM_KERNEL(k_floordiv, floordiv)
REM_KERNEL(k_truncdiv, truncdiv)

/* The h of a dtype (see the kernels). */
static double half_code(tg_dtype dt) { return dt == TG_F16 ? 1 : dt == TG_BF16 ? 2 : 0; }

static const tg_ew_kernel_fn FLOAT_KERNELS[3] = {k_fmod, k_rem, k_floordiv};

/* ---- integers ---- */

/* v modulo 2^bits of integer dtype dt, as an int64. */
static int64_t wrap(tg_dtype dt, int64_t v)
{
    switch (dt) {
    case TG_I8: return (int8_t)(uint8_t)(uint64_t)v;
    case TG_U8: return (uint8_t)(uint64_t)v;
    case TG_I32: return (int32_t)(uint32_t)(uint64_t)v;
    default: return v;
    }
}

/* k(x, y) for y != 0, in int64; INT64_MIN by -1 modulo 2^64. */
static int64_t int_rem(rem_kind k, int64_t x, int64_t y)
{
    if (y == -1) return k == REM_FLOOR_DIV ? (int64_t)(0 - (uint64_t)x) : 0;
    const int64_t q = x / y, m = x % y;
    if (k == REM_FMOD) return m;
    const bool adjust = m != 0 && (m < 0) != (y < 0);
    if (k == REM_REMAINDER) return adjust ? m + y : m;
    return adjust ? q - 1 : q;
}

static int int_forward(rem_kind k, tg_tensor **out, const tg_tensor *a, const tg_tensor *b)
{
    const char *op = REM_NAMES[k];
    tg_dtype dt;
    int nd;
    int64_t shape[TG_MAX_DIMS];
    TG_TRY(tg__result_dtype(op, a, b, &dt));
    TG_TRY(tg__broadcast_shapes(op, a->ndim, a->shape, b->ndim, b->shape, &nd, shape));
    const int64_t n = tg__numel(nd, shape);
    const void *pa = NULL, *pb = NULL;
    void *own_a = NULL, *own_b = NULL;
    tg_tensor *res = tg__tensor_uninit(dt, nd, shape);
    int rc = res ? TG_OK : TG_ENOMEM;
    if (rc == TG_OK && n > 0) rc = tg__ew_input(a, TG_I64, nd, shape, n, &pa, &own_a);
    if (rc == TG_OK && n > 0) rc = tg__ew_input(b, TG_I64, nd, shape, n, &pb, &own_b);
    for (int64_t i = 0; rc == TG_OK && i < n; i++) {
        const int64_t y = wrap(dt, ((const int64_t *)pb)[i]);
        if (y == 0) {
            rc = tg__error(TG_EINVAL, "%s: b is 0 at element %lld of the broadcast result, and "
                           "the operands are integers (%s): integer division by zero is "
                           "refused, as torch's ZeroDivisionError", op, (long long)i,
                           tg_dtype_name(dt));
            break;
        }
        const int64_t x = wrap(dt, ((const int64_t *)pa)[i]);
        tg__int_store(dt, tg_tensor_data(res), i, int_rem(k, x, y));
    }
    tg__work_free(own_a);
    tg__work_free(own_b);
    if (rc < 0) {
        tg_tensor_release(res);
        return rc;
    }
    *out = res;
    return TG_OK;
}

/* ---- forward and backward ---- */

static int rem_forward(rem_kind k, tg_ctx *ctx, tg_tensor **out, tg_tensor *const *in)
{
    const char *op = REM_NAMES[k];
    TG_CHECK(in[0] != NULL, TG_EINVAL, "%s: a must not be NULL", op);
    TG_CHECK(in[1] != NULL, TG_EINVAL, "%s: b must not be NULL", op);
    if (!tg_dtype_is_float(in[0]->dtype) && !tg_dtype_is_float(in[1]->dtype))
        return int_forward(k, out, in[0], in[1]);
    tg_tensor *eff[2], *conv[2];
    TG_TRY(tg__ew_mixed_to_float(op, in, eff, conv));
    int rc = tg__ew_binary(op, out, eff[0], eff[1], FLOAT_KERNELS[k], half_code(eff[0]->dtype));
    /* b's gradient reads both operands (as converted); a's none */
    if (rc == TG_OK && ctx && k != REM_FLOOR_DIV) {
        const bool keep = tg__ctx_needs_grad(ctx, 1);
        tg__ctx_save_if(ctx, eff[0], keep);
        tg__ctx_save_if(ctx, eff[1], keep);
    }
    tg_tensor_release(conv[0]);
    tg_tensor_release(conv[1]);
    return rc;
}

/* da = g; db = -g q with q = trunc(a / b) (fmod) or floor_div(a, b)
 * (remainder), a constant computed without the tape. */
static int rem_backward(rem_kind k, tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    tg_tensor *a, *b, *q = NULL, *ng = NULL, *t = NULL;
    int rc = TG_OK;
    if (tg__ctx_needs_grad(ctx, 0)) {
        t = tg_tensor_retain(g);
        TG_TRY_GOTO(tg__ew_grad_to_input(ctx, 0, &t, &gi[0]));
    }
    if (tg__ctx_needs_grad(ctx, 1)) {
        TG_TRY_GOTO(tg__ctx_saved(ctx, 0, &a));
        TG_TRY_GOTO(tg__ctx_saved(ctx, 1, &b));
        TG_TRY_GOTO(tg__ew_binary(REM_NAMES[k], &q, a, b,
                                  k == REM_FMOD ? k_truncdiv : k_floordiv, half_code(a->dtype)));
        TG_TRY_GOTO(tg_neg(&ng, g));
        TG_TRY_GOTO(tg_mul(&t, ng, q));
        TG_TRY_GOTO(tg__ew_grad_to_input(ctx, 1, &t, &gi[1]));
    }
done:
    tg_tensor_release(q);
    tg_tensor_release(ng);
    tg_tensor_release(t);
    return tg__ew_grads_finish(rc, gi);
}

static int fmod_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                        const void *params)
{
    return rem_forward(REM_FMOD, ctx, out, in);
}

static int remainder_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                             const void *params)
{
    return rem_forward(REM_REMAINDER, ctx, out, in);
}

static int floor_divide_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                                const void *params)
{
    return rem_forward(REM_FLOOR_DIV, ctx, out, in);
}

static int fmod_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    return rem_backward(REM_FMOD, ctx, g, gi);
}

static int remainder_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    return rem_backward(REM_REMAINDER, ctx, g, gi);
}

static int floor_divide_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    return tg__error(TG_EGRAD, "floor_divide: the derivative is not implemented, as torch "
                     "1.13's (it is 0 almost everywhere): detach its inputs");
}

static const tg_op_schema fmod_op = {
    .name = "fmod", .arity = 2, .amp = TG_AMP_PROMOTE, .forward = fmod_forward,
    .backward = fmod_backward, .double_backward = true,
    .vjp = "da = g, db = -g * trunc(a / b) (each summed back to its input's shape)"};
static const tg_op_schema remainder_op = {
    .name = "remainder", .arity = 2, .amp = TG_AMP_PROMOTE, .forward = remainder_forward,
    .backward = remainder_backward, .double_backward = true,
    .vjp = "da = g, db = -g * floor(a / b) (each summed back to its input's shape)"};
static const tg_op_schema floor_divide_op = {
    .name = "floor_divide", .arity = 2, .amp = TG_AMP_PROMOTE,
    .forward = floor_divide_forward, .backward = floor_divide_backward,
    .vjp = "not implemented (refused, as torch's)"};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__remainder_ops[] = {&fmod_op, &remainder_op, &floor_divide_op};
static_assert(sizeof tg__remainder_ops / sizeof tg__remainder_ops[0] == TG__remainder_N,
              "src/ops/families.h must count the remainder ops");

static int call2(const tg_op_schema *op, tg_tensor **out, tg_tensor *a, tg_tensor *b)
{
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", op->name);
    return tg_op_call(op, out, 2, (tg_tensor *[]){a, b}, NULL, 0);
}

/* s as torch wraps a Python number: a 0-d tensor of a's dtype, holding s
 * rounded to it (a float a) or an integral s modulo 2^bits (an integer
 * a: i8 % 1000 takes -24, as torch's). */
static int call_s(const tg_op_schema *op, tg_tensor **out, tg_tensor *a, double s)
{
    TG_CHECK(out != NULL, TG_EINVAL, "%s_scalar: out must not be NULL", op->name);
    TG_CHECK(a != NULL, TG_EINVAL, "%s_scalar: a must not be NULL", op->name);
    tg_tensor *b = NULL;
    if (tg_dtype_is_float(a->dtype)) {
        TG_TRY(tg_tensor_scalar(&b, a->dtype, tg__scalar_in_dtype(a->dtype, s)));
    } else {
        char name[32];
        int64_t v;
        snprintf(name, sizeof name, "%s_scalar", op->name);
        TG_TRY(tg__scalar_as_int(name, "s", a->dtype, s, &v));
        TG_TRY(tg_tensor_scalar(&b, a->dtype, (double)wrap(a->dtype, v)));
    }
    const int rc = tg_op_call(op, out, 2, (tg_tensor *[]){a, b}, NULL, 0);
    tg_tensor_release(b);
    return rc;
}

int tg_fmod(tg_tensor **out, tg_tensor *a, tg_tensor *b) { return call2(&fmod_op, out, a, b); }
int tg_remainder(tg_tensor **out, tg_tensor *a, tg_tensor *b)
{
    return call2(&remainder_op, out, a, b);
}
int tg_floor_divide(tg_tensor **out, tg_tensor *a, tg_tensor *b)
{
    return call2(&floor_divide_op, out, a, b);
}
int tg_fmod_scalar(tg_tensor **out, tg_tensor *a, double s) { return call_s(&fmod_op, out, a, s); }
int tg_remainder_scalar(tg_tensor **out, tg_tensor *a, double s)
{
    return call_s(&remainder_op, out, a, s);
}
