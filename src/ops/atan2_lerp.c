/* src/ops/atan2_lerp.c - atan2 (broadcasting, one op) and lerp (a composite
 * of differentiable ops).
 *
 * atan2(y, x) = the angle of the point (x, y); with r2 = x^2 + y^2,
 *   d/dy = x / r2,  d/dx = -y / r2,
 * each gradient summed back over the dims its input was stretched along.
 * Two integer inputs give f32, as torch's (tg__ew_binary_float).
 * lerp(s, e, w) takes torch's two forms, s + w (e - s) where |w| < 0.5 and
 * e - (e - s) (1 - w) elsewhere, so that w = 0 gives s and w = 1 gives e
 * exactly; the gradients g (1 - w), g w, g (e - s) come from the ops.  lerp
 * is not a registered op: a ternary op has no elementwise driver here.
 *
 * lerp_scalar(s, e, w), w a number (torch.lerp with a Python float, as in
 * an EMA of weights), is one op with torch 1.13's kernel: s + w (e - s)
 * where w < 0.5 (not |w|: a w of -0.7 takes this form too), else
 * e - (e - s) (1 - w), each product and sum fused (one rounding, as torch's
 * f32 and f64 kernels), w and the arithmetic in f32 for f32, f16 and bf16.
 * Gradients g (1 - w) and g w (torch's, 1 - w in double), summed back over
 * broadcast dims; products with a number, differentiable again.
 */
#include <assert.h>
#include <math.h>

#include "core/core.h"
#include "ops/elementwise.h"
#include "autograd/tape.h"
#include "ops/families.h"
#include "tapegrad/ops.h"

TG_EW_BINARY_KERNEL(k_atan2, atan2((double)a, (double)b))
/* 1 where |w| < 0.5, else 0 (NaN: 0, the second form, as torch); and its
 * complement. */
TG_EW_UNARY_KERNEL(k_lerp_low, fabs((double)a) < 0.5 ? 1.0 : 0.0)
TG_EW_UNARY_KERNEL(k_lerp_high, fabs((double)a) < 0.5 ? 0.0 : 1.0)

/* w < 0.5 ? fma(w, e - s, s) : fma(-(e - s), 1 - w, e), a the start and
 * b the end, w in T. */
#define LERP_S_LOOP(T, FMA)                                                   \
    {                                                                         \
        T *o = out;                                                           \
        const T *s = a, *e = b, wt = (T)w, omw = (T)1 - wt;                   \
        for (int64_t i = 0; i < n; i++) {                                     \
            const T d = e[i] - s[i];                                          \
            o[i] = w < 0.5 ? FMA(wt, d, s[i]) : FMA(-d, omw, e[i]);           \
        }                                                                     \
    }
static void k_lerp_s(tg_dtype cdt, void *out, const void *a, const void *b, int64_t n,
                     double w)
{
    if (cdt == TG_F64) LERP_S_LOOP(double, fma)
    else LERP_S_LOOP(float, fmaf)
}

static int atan2_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                         const void *params)
{
    TG_TRY(tg__ew_binary_float("atan2", out, in[0], in[1], k_atan2, 0.0));
    if (ctx) {
        tg__ctx_save(ctx, in[0]);
        tg__ctx_save(ctx, in[1]);
    }
    return TG_OK;
}

/* dy = (g * x) / (y * y + x * x), dx = (g * -y) / (y * y + x * x), in
 * torch's order of operations. */
static int atan2_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    tg_tensor *y, *x, *t[7] = {NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    int rc;
    TG_TRY_GOTO(tg__ctx_saved(ctx, 0, &y));
    TG_TRY_GOTO(tg__ctx_saved(ctx, 1, &x));
    TG_TRY_GOTO(tg_mul(&t[0], y, y));
    TG_TRY_GOTO(tg_mul(&t[1], x, x));
    TG_TRY_GOTO(tg_add(&t[2], t[0], t[1]));
    if (tg__ctx_needs_grad(ctx, 0)) {
        TG_TRY_GOTO(tg_mul(&t[3], g, x));
        TG_TRY_GOTO(tg_div(&t[4], t[3], t[2]));
        TG_TRY_GOTO(tg__ew_grad_to_input(ctx, 0, &t[4], &gi[0]));
    }
    if (tg__ctx_needs_grad(ctx, 1)) {
        TG_TRY_GOTO(tg_neg(&t[5], y));
        TG_TRY_GOTO(tg_mul(&t[6], g, t[5]));
        TG_TRY_GOTO(tg_div(&t[4], t[6], t[2]));
        TG_TRY_GOTO(tg__ew_grad_to_input(ctx, 1, &t[4], &gi[1]));
    }
done:
    for (int i = 0; i < 7; i++) tg_tensor_release(t[i]);
    return tg__ew_grads_finish(rc, gi);
}

/* PROMOTE: torch's autocast lists atan2 with the ops that promote. */
static const tg_op_schema atan2_op = {
    .name = "atan2", .arity = 2, .amp = TG_AMP_PROMOTE, .forward = atan2_forward,
    .backward = atan2_backward, .double_backward = true,
    .vjp = "dy = g * x / (x^2 + y^2), dx = -g * y / (x^2 + y^2)", .scalar = NULL};

typedef struct lerp_s_params {
    double w;
} lerp_s_params;

static int lerp_scalar_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                               const void *params)
{
    const double w = ((const lerp_s_params *)params)->w;
    return tg__ew_binary("lerp_scalar", out, in[0], in[1], k_lerp_s, w);
}

/* dstart = g (1 - w), dend = g w, each summed to its input's shape. */
static int lerp_scalar_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    const double w = ((const lerp_s_params *)tg__ctx_params(ctx))->w;
    tg_tensor *t = NULL;
    int rc = TG_OK;
    for (int i = 0; i < 2 && rc >= 0; i++) {
        if (!tg__ctx_needs_grad(ctx, i)) continue;
        rc = tg_mul_scalar(&t, g, i == 0 ? 1.0 - w : w);
        if (rc >= 0) rc = tg__ew_grad_to_input(ctx, i, &t, &gi[i]);
    }
    tg_tensor_release(t);
    return tg__ew_grads_finish(rc, gi);
}

/* KEEP: torch's autocast lists no lerp. */
static const tg_op_schema lerp_scalar_op = {
    .name = "lerp_scalar", .arity = 2, .amp = TG_AMP_KEEP, .forward = lerp_scalar_forward,
    .backward = lerp_scalar_backward, .double_backward = true,
    .vjp = "dstart = g * (1 - w), dend = g * w", .scalar = "w"};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__atan2_ops[] = {&atan2_op, &lerp_scalar_op};
static_assert(sizeof tg__atan2_ops / sizeof tg__atan2_ops[0] == TG__atan2_N,
              "src/ops/families.h must count the atan2 ops");

int tg_atan2(tg_tensor **out, tg_tensor *y, tg_tensor *x)
{
    tg_tensor *in[2] = {y, x};
    return tg_op_call(&atan2_op, out, 2, in, NULL, 0);
}

/* TG_EINVAL for a NULL operand, TG_EDTYPE for an integer one or three
 * dtypes that differ (torch.lerp refuses those too), TG_ESHAPE for shapes
 * that do not broadcast together. */
static int lerp_check(tg_tensor **out, tg_tensor *const *in)
{
    static const char *const names[3] = {"start", "end", "weight"};
    if (!out) return tg__error(TG_EINVAL, "lerp: out is NULL");
    for (int i = 0; i < 3; i++) {
        if (!in[i]) return tg__error(TG_EINVAL, "lerp: %s is NULL", names[i]);
        if (!tg_dtype_is_float(in[i]->dtype))
            return tg__error(TG_EDTYPE, "lerp: %s has dtype %s; float dtypes only", names[i],
                             tg_dtype_name(in[i]->dtype));
        if (in[i]->dtype != in[0]->dtype)
            return tg__error(TG_EDTYPE, "lerp: %s has dtype %s, start %s; one dtype for all "
                             "three", names[i], tg_dtype_name(in[i]->dtype),
                             tg_dtype_name(in[0]->dtype));
    }
    int nd = 0, nd2 = 0;
    int64_t sh[TG_MAX_DIMS], sh2[TG_MAX_DIMS];
    TG_TRY(tg__broadcast_shapes("lerp", in[0]->ndim, in[0]->shape, in[1]->ndim, in[1]->shape,
                                &nd, sh));
    return tg__broadcast_shapes("lerp", nd, sh, in[2]->ndim, in[2]->shape, &nd2, sh2);
}

/* where(m, s + w_a d_a, e - d_b (1 - w)_b), d = e - s, m = |w| < 0.5, with
 * each form's operands zeroed where the other form is taken (w_a =
 * where(m, w, 0), d_a = where(m, d, 0), d_b and (1 - w)_b the same under
 * not m): the zero gradient that where sends to the form not taken then
 * meets only finite values, so an infinite w, start or end gives torch's
 * gradient and not 0 * inf = NaN. */
static int lerp(tg_tensor **out, tg_tensor *s, tg_tensor *e, tg_tensor *w)
{
    enum { M, NOT_M, D, WA, DA, WD, A, OMW, OMWB, DB, DW, B, NT };
    tg_tensor *t[NT] = {NULL};
    int rc;
    TG_TRY_GOTO(tg__ew_unary("lerp", &t[M], w, k_lerp_low, 0.0));   /* constant masks */
    TG_TRY_GOTO(tg__ew_unary("lerp", &t[NOT_M], w, k_lerp_high, 0.0));
    TG_TRY_GOTO(tg_sub(&t[D], e, s));
    TG_TRY_GOTO(tg__where_or_zero(&t[WA], t[M], w));
    TG_TRY_GOTO(tg__where_or_zero(&t[DA], t[M], t[D]));
    TG_TRY_GOTO(tg_mul(&t[WD], t[WA], t[DA]));
    TG_TRY_GOTO(tg_add(&t[A], s, t[WD]));                            /* s + w d */
    TG_TRY_GOTO(tg_rsub_scalar(&t[OMW], w, 1.0));
    TG_TRY_GOTO(tg__where_or_zero(&t[OMWB], t[NOT_M], t[OMW]));
    TG_TRY_GOTO(tg__where_or_zero(&t[DB], t[NOT_M], t[D]));
    TG_TRY_GOTO(tg_mul(&t[DW], t[DB], t[OMWB]));
    TG_TRY_GOTO(tg_sub(&t[B], e, t[DW]));                            /* e - d (1 - w) */
    TG_TRY_GOTO(tg_where(out, t[M], t[A], t[B]));
done:
    for (int i = 0; i < NT; i++) tg_tensor_release(t[i]);
    return rc;
}

/* f16 and bf16 operands are computed in f32 and the result rounded once
 * (torch's half lerp computes in float); the casts are differentiable. */
static int lerp_any(tg_tensor **out, tg_tensor *s, tg_tensor *e, tg_tensor *w)
{
    const tg_dtype dt = s->dtype;
    if (dt == TG_F32 || dt == TG_F64) return lerp(out, s, e, w);
    tg_tensor *t[4] = {NULL, NULL, NULL, NULL};
    int rc;
    TG_TRY_GOTO(tg_to_dtype(&t[0], s, TG_F32));
    TG_TRY_GOTO(tg_to_dtype(&t[1], e, TG_F32));
    TG_TRY_GOTO(tg_to_dtype(&t[2], w, TG_F32));
    TG_TRY_GOTO(lerp(&t[3], t[0], t[1], t[2]));
    TG_TRY_GOTO(tg_to_dtype(out, t[3], dt));
done:
    for (int i = 0; i < 4; i++) tg_tensor_release(t[i]);
    return rc;
}

int tg_lerp(tg_tensor **out, tg_tensor *start, tg_tensor *end, tg_tensor *weight)
{
    TG_TRY(lerp_check(out, (tg_tensor *[]){start, end, weight}));
    tg__lib_enter();
    int rc = lerp_any(out, start, end, weight);
    tg__lib_leave();
    return tg__scope_capture(out, rc);
}

int tg_lerp_scalar(tg_tensor **out, tg_tensor *start, tg_tensor *end, double weight)
{
    lerp_s_params prm = {.w = weight};
    return tg_op_call(&lerp_scalar_op, out, 2, (tg_tensor *[]){start, end}, &prm, sizeof prm);
}
