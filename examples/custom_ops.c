/* examples/custom_ops.c - two ops written outside the library, with only the
 * installed headers (tapegrad/op.h), as a program or a plugin writes them.
 *
 *   softplus(x) = log(1 + e^x)        d/dx = sigmoid(x)
 *   mish(x)     = x tanh(softplus(x))  d/dx = tanh(sp) + x sigmoid(x) (1 - tanh(sp)^2)
 *
 * softplus has a hand-written backward: loops over doubles, as a kernel
 * author writes one.  It is correct to first order but is not itself
 * differentiable, so its schema says double_backward = false and a
 * create_graph backward through it is refused.  mish's backward is written
 * with differentiable ops (tg_tanh, tg_sigmoid, tg_mul ...), so its second
 * derivative comes for free, as in a torch.autograd.Function whose backward
 * uses torch ops.
 *
 * Built into examples/custom_op (which checks and trains with them) and into
 * the plugin custom_ops.so, which `tapegrad gradcheck --plugin` loads through
 * its entry point tapegrad_register(). */
#include <math.h>

#include "custom_ops.h"
#include "tapegrad/tapegrad.h"

/* A new tensor of x's dtype and shape with out[i] = f(x[i]), computed in
 * double.  For f32 and f64 inputs (the forward refuses others). */
static int map_elements(tg_tensor **out, const tg_tensor *x, double (*f)(double))
{
    tg_tensor *y = NULL;
    int rc = tg_tensor_zeros_like(&y, x);
    for (int64_t i = 0; rc == TG_OK && i < tg_tensor_numel(x); i++) {
        double v = 0;
        rc = tg_tensor_get_flat(x, i, &v);
        if (rc == TG_OK) rc = tg_tensor_set_flat(y, i, f(v));
    }
    if (rc == TG_OK) *out = y;
    else tg_tensor_release(y);
    return rc;
}

/* log(1 + e^x) without overflow: max(x, 0) + log1p(e^-|x|). */
static double softplus_value(double x) { return fmax(x, 0) + log1p(exp(-fabs(x))); }
static double sigmoid_value(double x) { return 1 / (1 + exp(-x)); }

static int check_input(const char *op, const tg_tensor *x)
{
    if (!x) return tg_error_set(TG_EINVAL, "%s: input 0 must not be NULL", op);
    tg_dtype dt = tg_tensor_dtype(x);
    if (dt != TG_F32 && dt != TG_F64)
        return tg_error_set(TG_EDTYPE, "%s: input 0 has dtype %s; f32 or f64 only", op,
                            tg_dtype_name(dt));
    return TG_OK;
}

/* ---- softplus: a hand-written backward ---- */

static int softplus_forward(tg_op_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                            const void *params)
{
    (void)n, (void)params;
    int rc = check_input("custom_softplus", in[0]);
    if (rc == TG_OK) rc = map_elements(out, in[0], softplus_value);
    if (rc == TG_OK && ctx && (rc = tg_op_ctx_save(ctx, in[0])) < 0)   /* x, for sigmoid(x) */
        tg_tensor_release(*out);
    return rc < 0 ? rc : TG_OK;
}

/* gi = g * sigmoid(x), element by element (g has x's shape). */
static int softplus_backward(tg_op_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    tg_tensor *x = NULL;
    int rc = tg_op_ctx_saved(ctx, 0, &x);   /* borrowed */
    if (rc < 0 || !tg_op_ctx_needs_grad(ctx, 0)) return rc;
    tg_tensor *d = NULL;
    rc = tg_tensor_zeros_like(&d, x);
    for (int64_t i = 0; rc == TG_OK && i < tg_tensor_numel(x); i++) {
        double xv = 0, gv = 0;
        rc = tg_tensor_get_flat(x, i, &xv);
        if (rc == TG_OK) rc = tg_tensor_get_flat(g, i, &gv);
        if (rc == TG_OK) rc = tg_tensor_set_flat(d, i, gv * sigmoid_value(xv));
    }
    if (rc == TG_OK) gi[0] = d;
    else tg_tensor_release(d);
    return rc;
}

const tg_op_schema custom_softplus_op = {
    .name = "custom_softplus", .arity = 1, .amp = TG_AMP_FP32,
    .forward = softplus_forward, .backward = softplus_backward,
    .double_backward = false,   /* the backward's loops are not on the tape */
    .vjp = "da = g * sigmoid(a)",   /* what the tape's views show for its node */
};

/* ---- mish: a backward of differentiable ops ---- */

static double mish_value(double x) { return x * tanh(softplus_value(x)); }

static int mish_forward(tg_op_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                        const void *params)
{
    (void)n, (void)params;
    int rc = check_input("custom_mish", in[0]);
    if (rc == TG_OK) rc = map_elements(out, in[0], mish_value);
    if (rc == TG_OK && ctx && (rc = tg_op_ctx_save(ctx, in[0])) < 0) tg_tensor_release(*out);
    return rc < 0 ? rc : TG_OK;
}

/* d mish = tanh(sp) + x * sigmoid(x) * (1 - tanh(sp)^2), sp = softplus(x),
 * built from recorded ops so that a create_graph backward differentiates
 * it again.  softplus itself comes from the op above, whose backward is not
 * differentiable: so sp is computed here as log(1 + exp(x)) from built-ins. */
static int mish_backward(tg_op_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    enum { EXP, SP1, SP, T, S, T2, ONE_M, XS, PROD, D, N };
    tg_tensor *x = NULL, *t[N] = {0};
    int rc = tg_op_ctx_saved(ctx, 0, &x);
    if (rc == TG_OK) rc = tg_exp(&t[EXP], x);
    if (rc == TG_OK) rc = tg_add_scalar(&t[SP1], t[EXP], 1.0);
    if (rc == TG_OK) rc = tg_log(&t[SP], t[SP1]);
    if (rc == TG_OK) rc = tg_tanh(&t[T], t[SP]);
    if (rc == TG_OK) rc = tg_sigmoid(&t[S], x);
    if (rc == TG_OK) rc = tg_mul(&t[T2], t[T], t[T]);
    if (rc == TG_OK) rc = tg_rsub_scalar(&t[ONE_M], t[T2], 1.0);   /* 1 - tanh^2 */
    if (rc == TG_OK) rc = tg_mul(&t[XS], x, t[S]);
    if (rc == TG_OK) rc = tg_mul(&t[PROD], t[XS], t[ONE_M]);
    if (rc == TG_OK) rc = tg_add(&t[D], t[T], t[PROD]);
    if (rc == TG_OK) rc = tg_mul(&gi[0], g, t[D]);
    for (int i = 0; i < N; i++) tg_tensor_release(t[i]);
    return rc;
}

const tg_op_schema custom_mish_op = {
    .name = "custom_mish", .arity = 1, .amp = TG_AMP_FP32,
    .forward = mish_forward, .backward = mish_backward,
    .double_backward = true,
    .vjp = "da = g * (tanh(sp) + a * sigmoid(a) * (1 - tanh(sp)^2)), sp = softplus(a)",
};

int custom_softplus(tg_tensor **out, tg_tensor *x)
{
    return tg_op_call(&custom_softplus_op, out, 1, (tg_tensor *[]){x}, NULL, 0);
}

int custom_mish(tg_tensor **out, tg_tensor *x)
{
    return tg_op_call(&custom_mish_op, out, 1, (tg_tensor *[]){x}, NULL, 0);
}

/* The plugin entry point `tapegrad gradcheck --plugin` calls. */
int tapegrad_register(void)
{
    int rc = tg_op_register(&custom_softplus_op);
    return rc < 0 ? rc : tg_op_register(&custom_mish_op);
}
