/* src/ops/binary.c - add, sub, mul, div, pow (broadcasting) and their scalar
 * variants.
 *
 * Backwards are written with differentiable ops, so gradients of gradients
 * come for free.  A broadcast input's gradient is the output gradient summed
 * over the stretched dims (tg_sum_to_shape), because every stretched element
 * contributed to several outputs.
 *
 * Integers (src/ops/int_arith.c): add, sub, mul and pow of two integer
 * tensors, and the scalar forms of an integer tensor with an integral
 * number, stay integers, as torch's; an integer with a float tensor is
 * converted to the float's dtype first.
 */
#include <assert.h>
#include <math.h>

#include "core/core.h"
#include "ops/elementwise.h"
#include "autograd/tape.h"
#include "ops/families.h"
#include "tapegrad/ops.h"

typedef struct scalar_params {
    double s;
} scalar_params;

/* ---- kernels ---- */
TG_EW_BINARY_KERNEL(k_add, a + b)
TG_EW_BINARY_KERNEL(k_sub, a - b)
TG_EW_BINARY_KERNEL(k_mul, a * b)
TG_EW_BINARY_KERNEL(k_div, a / b)
TG_EW_BINARY_KERNEL(k_pow, pow((double)a, (double)b))
TG_EW_UNARY_KERNEL(k_add_s, a + s)
TG_EW_UNARY_KERNEL(k_sub_s, a - s)
TG_EW_UNARY_KERNEL(k_rsub_s, s - a)
TG_EW_UNARY_KERNEL(k_mul_s, a * s)
TG_EW_UNARY_KERNEL(k_div_s, a / s)
TG_EW_UNARY_KERNEL(k_is_zero, a == 0 ? 1.0 : 0.0)
/* 1 where a = 0 and b >= 0, else 0: the shift that makes log(a + it) 0 there
 * (see pow_backward). */
TG_EW_BINARY_KERNEL(k_zero_base_shift, a == 0 && b >= 0 ? 1.0 : 0.0)

/* ---- backward helpers ---- */

/* Sums *g to input i's shape into *gi (new reference).  Steals *g and sets it
 * to NULL, on success and on error. */
int tg__ew_grad_to_input(tg_ctx *ctx, int i, tg_tensor **g, tg_tensor **gi)
{
    const tg_meta *m = tg__ctx_input_meta(ctx, i);
    tg_tensor *t = *g;
    bool same = t->ndim == m->ndim;
    for (int d = 0; same && d < m->ndim; d++) same = t->shape[d] == m->shape[d];
    *g = NULL;
    if (same) {
        *gi = t;
        return TG_OK;
    }
    int rc = tg_sum_to_shape(gi, t, m->ndim, m->shape);
    tg_tensor_release(t);
    return rc;
}

/* On error, releases the gradients already written so none leak. */
int tg__ew_grads_finish(int rc, tg_tensor **gi)
{
    if (rc < 0) {
        for (int i = 0; i < 2; i++) {
            tg_tensor_release(gi[i]);
            gi[i] = NULL;
        }
    }
    return rc;
}

/* Which operands a binary op's backward reads (slot 0 = a, slot 1 = b):
 * add and sub none; mul each for the other's gradient; div b always and a
 * for b's gradient; pow both for either. */
typedef enum { SAVE_NONE, SAVE_CROSS, SAVE_DIV, SAVE_BOTH } save_rule;

/* The driver of a binary op: tg__ew_binary, or tg__ew_binary_float for div. */
typedef int (*binary_drive)(const char *op, tg_tensor **out, const tg_tensor *a,
                            const tg_tensor *b, tg_ew_kernel_fn k, double s);

/* No integer form: div, a floating function (two integers give f32). */
#define INT_NONE ((tg_int_op)-1)

/* Two integer operands take the op's integer form ik (tg__int_binary: the
 * result an integer, as torch's, never recorded); an integer with a float
 * is converted to the float's dtype first (tg__ew_mixed_to_float, as torch's
 * promotion), and the converted tensor is what a backward reads. */
static int binary_forward(tg_ctx *ctx, const char *name, tg_tensor **out, tg_tensor *const *in,
                          tg_ew_kernel_fn k, save_rule save, binary_drive drive, tg_int_op ik)
{
    if (ik != INT_NONE && in[0] && in[1] && !tg_dtype_is_float(in[0]->dtype) &&
        !tg_dtype_is_float(in[1]->dtype))
        return tg__int_binary(name, out, in[0], in[1], ik);
    tg_tensor *eff[2], *conv[2];
    TG_TRY(tg__ew_mixed_to_float(name, in, eff, conv));
    int rc = drive(name, out, eff[0], eff[1], k, 0.0);
    if (rc == TG_OK && ctx && save != SAVE_NONE) {
        const bool need_a = tg__ctx_needs_grad(ctx, 0), need_b = tg__ctx_needs_grad(ctx, 1);
        tg__ctx_save_if(ctx, eff[0], save == SAVE_BOTH || need_b);
        tg__ctx_save_if(ctx, eff[1], save != SAVE_CROSS || need_a);
    }
    tg_tensor_release(conv[0]);
    tg_tensor_release(conv[1]);
    return rc;
}

/* add, sub, mul and pow of two integer tensors stay integers, as torch's
 * (wrapping modulo 2^bits); div, true division, is a floating function: two
 * integer operands give f32, as torch's.  An integer with a float gives the
 * float's dtype in all five. */
#define BINARY_FORWARD(op, k, save, drive, ik)                                \
    static int op##_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in, \
                            const void *params)                               \
    {                                                                         \
        return binary_forward(ctx, #op, out, in, k, save, drive, ik);         \
    }
BINARY_FORWARD(add, k_add, SAVE_NONE, tg__ew_binary, TG_INT_ADD)
BINARY_FORWARD(sub, k_sub, SAVE_NONE, tg__ew_binary, TG_INT_SUB)
BINARY_FORWARD(mul, k_mul, SAVE_CROSS, tg__ew_binary, TG_INT_MUL)
BINARY_FORWARD(div, k_div, SAVE_DIV, tg__ew_binary_float, INT_NONE)
BINARY_FORWARD(pow, k_pow, SAVE_BOTH, tg__ew_binary, TG_INT_POW)

/* ---- binary backwards ---- */

/* d(a+b) = g, g;  d(a-b) = g, -g. */
static int addsub_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi, bool negate_b)
{
    int rc = TG_OK;
    tg_tensor *t = NULL;
    if (tg__ctx_needs_grad(ctx, 0)) {
        t = tg_tensor_retain(g);
        rc = tg__ew_grad_to_input(ctx, 0, &t, &gi[0]);
    }
    if (rc == TG_OK && tg__ctx_needs_grad(ctx, 1)) {
        if (negate_b) rc = tg_neg(&t, g);
        else t = tg_tensor_retain(g);
        if (rc == TG_OK) rc = tg__ew_grad_to_input(ctx, 1, &t, &gi[1]);
    }
    return tg__ew_grads_finish(rc, gi);
}

static int add_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    return addsub_backward(ctx, g, gi, false);
}

static int sub_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    return addsub_backward(ctx, g, gi, true);
}

/* d(a*b) = g*b, g*a.  Each operand is saved and read only for the gradient
 * that needs it (see binary_forward), so that, as in PyTorch, an operand
 * whose partner needs no gradient (a of a*b when only a requires grad) is
 * not kept alive, and writing into it in place is no error. */
static int mul_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    tg_tensor *a, *b, *t = NULL;
    int rc = TG_OK;
    if (tg__ctx_needs_grad(ctx, 0)) {
        TG_TRY_GOTO(tg__ctx_saved(ctx, 1, &b));
        TG_TRY_GOTO(tg_mul(&t, g, b));
        TG_TRY_GOTO(tg__ew_grad_to_input(ctx, 0, &t, &gi[0]));
    }
    if (tg__ctx_needs_grad(ctx, 1)) {
        TG_TRY_GOTO(tg__ctx_saved(ctx, 0, &a));
        TG_TRY_GOTO(tg_mul(&t, g, a));
        TG_TRY_GOTO(tg__ew_grad_to_input(ctx, 1, &t, &gi[1]));
    }
done:
    return tg__ew_grads_finish(rc, gi);
}

/* d(a/b) = g/b, -g*a/b^2 (computed as -((g/b)/b)*a); a is read only for
 * b's gradient (see mul_backward). */
static int div_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    tg_tensor *a, *b, *t[4] = {NULL, NULL, NULL, NULL};
    int rc;
    TG_TRY_GOTO(tg__ctx_saved(ctx, 1, &b));
    TG_TRY_GOTO(tg_div(&t[0], g, b));
    if (tg__ctx_needs_grad(ctx, 1)) {
        TG_TRY_GOTO(tg__ctx_saved(ctx, 0, &a));
        TG_TRY_GOTO(tg_div(&t[1], t[0], b));
        TG_TRY_GOTO(tg_mul(&t[2], t[1], a));
        TG_TRY_GOTO(tg_neg(&t[3], t[2]));
        TG_TRY_GOTO(tg__ew_grad_to_input(ctx, 1, &t[3], &gi[1]));
    }
    if (tg__ctx_needs_grad(ctx, 0)) {
        TG_TRY_GOTO(tg__ew_grad_to_input(ctx, 0, &t[0], &gi[0]));
    }
done:
    for (int i = 0; i < 4; i++) tg_tensor_release(t[i]);
    return tg__ew_grads_finish(rc, gi);
}

/* d(a^b) = g * b * a^(b-1), g * a^b * log(a).  Where b = 0 the first is 0,
 * as in PyTorch, also at a = 0 (where 0 * 0^-1 would be NaN): the exponent
 * there is b - 1 + 1, a constant shift, so a^0 = 1 and b * 1 = 0.  Where
 * a = 0 and b >= 0 the second is 0, as PyTorch's (the limit of a^b log a;
 * 0^b * log 0 would be 0 * -inf = NaN, or -inf at b = 0): log's argument
 * there is a + 1, a constant shift, so the factor is 0^b * log 1 = 0. */
static int pow_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    tg_tensor *a, *b, *t[4] = {NULL, NULL, NULL, NULL}, *r = NULL;
    int rc;
    TG_TRY_GOTO(tg__ctx_saved(ctx, 0, &a));
    TG_TRY_GOTO(tg__ctx_saved(ctx, 1, &b));
    if (tg__ctx_needs_grad(ctx, 0)) {
        TG_TRY_GOTO(tg__ew_unary("pow", &t[3], b, k_is_zero, 0.0));   /* a constant */
        TG_TRY_GOTO(tg_sub_scalar(&t[2], b, 1.0));
        TG_TRY_GOTO(tg_add(&t[0], t[2], t[3]));
        tg_tensor_release(t[2]);
        t[2] = NULL;
        TG_TRY_GOTO(tg_pow(&t[1], a, t[0]));
        TG_TRY_GOTO(tg_mul(&t[2], b, t[1]));
        TG_TRY_GOTO(tg_mul(&r, g, t[2]));
        TG_TRY_GOTO(tg__ew_grad_to_input(ctx, 0, &r, &gi[0]));
        for (int i = 0; i < 4; i++) {
            tg_tensor_release(t[i]);
            t[i] = NULL;
        }
    }
    if (tg__ctx_needs_grad(ctx, 1)) {
        TG_TRY_GOTO(tg__ew_binary("pow", &t[3], a, b, k_zero_base_shift, 0.0));   /* a constant */
        TG_TRY_GOTO(tg_add(&t[2], a, t[3]));
        TG_TRY_GOTO(tg_log(&t[1], t[2]));
        tg_tensor_release(t[2]);
        t[2] = NULL;
        TG_TRY_GOTO(tg_pow(&t[0], a, b));
        TG_TRY_GOTO(tg_mul(&t[2], t[0], t[1]));
        TG_TRY_GOTO(tg_mul(&r, g, t[2]));
        TG_TRY_GOTO(tg__ew_grad_to_input(ctx, 1, &r, &gi[1]));
    }
done:
    for (int i = 0; i < 4; i++) tg_tensor_release(t[i]);
    tg_tensor_release(r);
    return tg__ew_grads_finish(rc, gi);
}

/* ---- scalar variants ---- */

/* An integer a with an integral s (a Python int to torch) stays an integer,
 * s taken modulo 2^bits as torch wraps it; a non-integral s is refused
 * (tg__scalar_as_int), as a double cannot say whether torch would have had
 * a Python int or float.  div_scalar, a floating function, gives f32. */
static int scalar_forward(const char *op, tg_tensor **out, tg_tensor *a, tg_ew_kernel_fn k,
                          double s, tg_int_op ik, bool s_first)
{
    if (!a || tg_dtype_is_float(a->dtype)) return tg__ew_unary(op, out, a, k, s);
    if (ik == INT_NONE) return tg__ew_unary_float(op, out, a, k, (float)s);
    int64_t v;
    TG_TRY(tg__scalar_as_int(op, "s", a->dtype, s, &v));
    return tg__int_scalar(op, out, a, v, ik, s_first);
}

#define SCALAR_FORWARD(op, k, ik, s_first)                                    \
    static int op##_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in, \
                            const void *params)                               \
    {                                                                         \
        return scalar_forward(#op, out, in[0], k, ((const scalar_params *)params)->s, ik, \
                              s_first);                                       \
    }
SCALAR_FORWARD(add_scalar, k_add_s, TG_INT_ADD, false)
SCALAR_FORWARD(sub_scalar, k_sub_s, TG_INT_SUB, false)
SCALAR_FORWARD(rsub_scalar, k_rsub_s, TG_INT_SUB, true)
SCALAR_FORWARD(mul_scalar, k_mul_s, TG_INT_MUL, false)
SCALAR_FORWARD(div_scalar, k_div_s, INT_NONE, false)

/* d(a+s) = d(a-s) = g. */
static int identity_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    gi[0] = tg_tensor_retain(g);
    return TG_OK;
}

/* d(s-a) = -g. */
static int rsub_scalar_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    return tg_neg(&gi[0], g);
}

/* d(a*s) = g*s. */
static int mul_scalar_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    return tg_mul_scalar(&gi[0], g, ((const scalar_params *)tg__ctx_params(ctx))->s);
}

/* d(a/s) = g/s. */
static int div_scalar_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    return tg_div_scalar(&gi[0], g, ((const scalar_params *)tg__ctx_params(ctx))->s);
}

/* ---- schemas and public entries ---- */

/* formula: the schema's vjp; sym: its scalar (tapegrad/op.h). */
#define SCHEMA(op, nin, policy, bw, formula, sym)                             \
    static const tg_op_schema op##_op = {.name = #op, .arity = nin, .amp = policy,  \
                                   .forward = op##_forward, .backward = bw,   \
                                   .double_backward = true, .vjp = formula, .scalar = sym}
SCHEMA(add, 2, TG_AMP_PROMOTE, add_backward,
       "da = g, db = g (each summed back to its input's shape)", NULL);
SCHEMA(sub, 2, TG_AMP_PROMOTE, sub_backward,
       "da = g, db = -g (each summed back to its input's shape)", NULL);
SCHEMA(mul, 2, TG_AMP_PROMOTE, mul_backward, "da = g * b, db = g * a", NULL);
SCHEMA(div, 2, TG_AMP_PROMOTE, div_backward, "da = g / b, db = -g * a / b^2", NULL);
SCHEMA(pow, 2, TG_AMP_PROMOTE, pow_backward, "da = g * b * a^(b-1), db = g * a^b * log(a)", NULL);
SCHEMA(add_scalar, 1, TG_AMP_KEEP, identity_backward, "da = g", "s");
SCHEMA(sub_scalar, 1, TG_AMP_KEEP, identity_backward, "da = g", "s");
SCHEMA(rsub_scalar, 1, TG_AMP_KEEP, rsub_scalar_backward, "da = -g", "s");
SCHEMA(mul_scalar, 1, TG_AMP_KEEP, mul_scalar_backward, "da = g * s", "s");
SCHEMA(div_scalar, 1, TG_AMP_KEEP, div_scalar_backward, "da = g / s", "s");

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__binary_ops[] = {&add_op, &sub_op, &mul_op, &div_op, &pow_op, &add_scalar_op, &sub_scalar_op, &rsub_scalar_op, &mul_scalar_op, &div_scalar_op};
static_assert(sizeof tg__binary_ops / sizeof tg__binary_ops[0] == TG__binary_N,
              "src/ops/families.h must count the binary ops");

static int call2(const tg_op_schema *op, tg_tensor **out, tg_tensor *a, tg_tensor *b)
{
    tg_tensor *in[2] = {a, b};
    return tg_op_call(op, out, 2, in, NULL, 0);
}

/* The scalar as PyTorch uses it: a Python number operand is converted to the
 * tensor's dtype before the op (x * 0.1 multiplies an f32 x by 0.1f, an f16
 * x by 0.0999755859375, going through f32 as c10::Half does), so the result
 * is the op on two values of that dtype, rounded once.  f64 keeps s. */
double tg__scalar_in_dtype(tg_dtype dt, double s)
{
    switch (dt) {
    case TG_F32: return (float)s;
    case TG_F16: return tg_f16_to_f32(tg_f32_to_f16((float)s));
    case TG_BF16: return tg_bf16_to_f32(tg_f32_to_bf16((float)s));
    default: return s;   /* f64; an integer dtype's forward reads s itself */
    }
}

static int call_s(const tg_op_schema *op, tg_tensor **out, tg_tensor *a, double s)
{
    scalar_params p = {.s = a ? tg__scalar_in_dtype(a->dtype, s) : s};
    tg_tensor *in[1] = {a};
    return tg_op_call(op, out, 1, in, &p, sizeof p);
}

int tg_add(tg_tensor **out, tg_tensor *a, tg_tensor *b) { return call2(&add_op, out, a, b); }

int tg__add_over(tg_tensor *b, const tg_tensor *a)
{
    TG_TRY(tg__ew_binary_over("add", a, b, k_add, 0.0));
    tg__bump_version(b);
    return TG_OK;
}
int tg_sub(tg_tensor **out, tg_tensor *a, tg_tensor *b) { return call2(&sub_op, out, a, b); }
int tg_mul(tg_tensor **out, tg_tensor *a, tg_tensor *b) { return call2(&mul_op, out, a, b); }
int tg_div(tg_tensor **out, tg_tensor *a, tg_tensor *b) { return call2(&div_op, out, a, b); }
int tg_pow(tg_tensor **out, tg_tensor *a, tg_tensor *b) { return call2(&pow_op, out, a, b); }
int tg_add_scalar(tg_tensor **out, tg_tensor *a, double s) { return call_s(&add_scalar_op, out, a, s); }
int tg_sub_scalar(tg_tensor **out, tg_tensor *a, double s) { return call_s(&sub_scalar_op, out, a, s); }
int tg_rsub_scalar(tg_tensor **out, tg_tensor *a, double s) { return call_s(&rsub_scalar_op, out, a, s); }
int tg_mul_scalar(tg_tensor **out, tg_tensor *a, double s) { return call_s(&mul_scalar_op, out, a, s); }
int tg_div_scalar(tg_tensor **out, tg_tensor *a, double s) { return call_s(&div_scalar_op, out, a, s); }
