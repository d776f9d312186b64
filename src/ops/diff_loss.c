/* src/ops/diff_loss.c - the element-wise steps of the MSE and L1 losses,
 * (x - t)^2 and |x - t|, each as one op (mse_loss, l1_loss) with a gradient
 * op of its own (mse_backward, l1_backward), for x and t of one shape and of
 * one dtype, f32 or f64 (tg_mse_loss and tg_l1_loss, src/ops/loss.c, take
 * them here and compose sub with mul or abs otherwise).
 *
 * The numbers are those of the compositions, bit for bit: d = x - t rounded
 * to the dtype, then d d or |d|.  Their gradients there: mul's g d + g d
 * (the two products the same rounding, so their sum is exact), or abs's g
 * sign(d) (sign 0 at d = 0 and for NaN, so -0 for a negative g), then sub's
 * dx = that, dt = -dx.  So
 *   mse_backward(g, x, t) = 2 (g (x - t)),   l1_backward(g, x, t) = g sign(x - t),
 * each one pass over x and t that reads g once when it is one value
 * broadcast (a mean's or sum's gradient), where the compositions made a
 * tensor for d, for each product or sign and for the sum.
 *
 * Both are linear in g: the gradient for g is the op again with g', and
 * for x and t +-2 g g' (mse) or 0 (l1, whose sign is piecewise constant, as
 * abs's), so derivatives of every order come from these ops and products. */
#include <assert.h>
#include <math.h>
#include <stdbool.h>

#include "core/core.h"
#include "autograd/tape.h"
#include "ops/elementwise.h"
#include "ops/families.h"
#include "ops/loss.h"
#include "tapegrad/ops.h"

/* a = x, b = t: the difference rounded to T, then its square or absolute
 * value. */
#define MSE_SQ(T, a, b) ((T)((T)((a) - (b)) * (T)((a) - (b))))
#define L1_ABS(T, a, b) ((T)fabs((double)(T)((a) - (b))))
TG_EW_BINARY_KERNEL(k_mse, _Generic(a, float: MSE_SQ(float, a, b), default: MSE_SQ(double, a, b)))
TG_EW_BINARY_KERNEL(k_l1, _Generic(a, float: L1_ABS(float, a, b), default: L1_ABS(double, a, b)))

/* Inputs of one float dtype and shape (the loss checks them, and dispatch
 * promotes); the result has both. */
static int diff_shape(int n, tg_tensor *const *in, const void *params, tg_dtype *dtype,
                      int *ndim, int64_t *shape)
{
    (void)params;
    return tg__loss_same_shape("diff_loss", n, in, dtype, ndim, shape);
}

static void save_all(tg_ctx *ctx, int n, tg_tensor *const *in)
{
    if (ctx)
        for (int i = 0; i < n; i++) tg__ctx_save(ctx, in[i]);
}

static int mse_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                       const void *params)
{
    (void)params;
    TG_TRY(tg__ew_binary("mse_loss", out, in[0], in[1], k_mse, 0.0));
    save_all(ctx, n, in);
    return TG_OK;
}

static int l1_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                      const void *params)
{
    (void)params;
    TG_TRY(tg__ew_binary("l1_loss", out, in[0], in[1], k_l1, 0.0));
    save_all(ctx, n, in);
    return TG_OK;
}

static const tg_op_schema mseb_op, l1b_op;

/* dx = grad_op(g, x, t); dt = -dx. */
static int diff_backward(const tg_op_schema *grad_op, tg_ctx *ctx, tg_tensor *g,
                         tg_tensor **gi)
{
    tg_tensor *x, *t, *dx = NULL;
    int rc;
    TG_TRY_GOTO(tg__ctx_saved(ctx, 0, &x));
    TG_TRY_GOTO(tg__ctx_saved(ctx, 1, &t));
    TG_TRY_GOTO(tg_op_call(grad_op, &dx, 3, (tg_tensor *[]){g, x, t}, NULL, 0));
    if (tg__ctx_needs_grad(ctx, 1)) TG_TRY_GOTO(tg_neg(&gi[1], dx));
    if (tg__ctx_needs_grad(ctx, 0)) gi[0] = tg_tensor_retain(dx);
done:
    tg_tensor_release(dx);
    return rc;
}

static int mse_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    return diff_backward(&mseb_op, ctx, g, gi);
}

static int l1_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    return diff_backward(&l1b_op, ctx, g, gi);
}

/* ---- mse_backward(g, x, t) = 2 (g (x - t)), l1_backward = g sign(x - t) ---- */

typedef struct grad_job {
    tg_dtype dt;
    bool l1;
    const void *g, *x, *t;   /* g NULL: gs for every element */
    double gs;
    void *o;
} grad_job;

#define GRAD_LOOP(T, G)                                                                   \
    do {                                                                                  \
        if (q->l1)                                                                        \
            for (int64_t i = lo; i < hi; i++) {                                           \
                const T d = (T)(x[i] - t[i]);                                             \
                o[i] = (G) * (d > 0 ? (T)1 : d < 0 ? (T)-1 : (T)0);                       \
            }                                                                             \
        else                                                                              \
            for (int64_t i = lo; i < hi; i++) {                                           \
                const T pr = (G) * (T)(x[i] - t[i]);                                      \
                o[i] = pr + pr;                                                           \
            }                                                                             \
    } while (0)
#define GRAD_RUN(T)                                                                       \
    do {                                                                                  \
        const T *x = q->x, *t = q->t, *g = q->g, gs = (T)q->gs;                           \
        T *o = q->o;                                                                      \
        if (g)                                                                            \
            GRAD_LOOP(T, g[i]);                                                           \
        else                                                                              \
            GRAD_LOOP(T, gs);                                                             \
    } while (0)

static void grad_range(void *p, int64_t lo, int64_t hi)
{
    const grad_job *q = p;
    if (q->dt == TG_F64)
        GRAD_RUN(double);
    else
        GRAD_RUN(float);
}

/* True when every element of g is one element (a broadcast 0-d or
 * one-element tensor) of f32 or f64; its value into *v. */
static bool one_value(const tg_tensor *g, double *v)
{
    if (g->dtype != TG_F32 && g->dtype != TG_F64) return false;
    for (int d = 0; d < g->ndim; d++)
        if (g->strides[d] != 0 && g->shape[d] != 1) return false;
    const char *p = (const char *)tg_tensor_cdata(g);
    *v = g->dtype == TG_F64 ? *(const double *)(const void *)p
                            : (double)*(const float *)(const void *)p;
    return true;
}

static int grad_forward(bool l1, tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in)
{
    const tg_tensor *x = in[1];
    const tg_dtype dt = x->dtype;
    TG_CHECK(dt == TG_F32 || dt == TG_F64, TG_EDTYPE, "%s: inputs have dtype %s; f32 or f64 "
             "only", l1 ? "l1_backward" : "mse_backward", tg_dtype_name(dt));
    const int64_t numel = tg_tensor_numel(x);
    tg_tensor *res = tg__tensor_uninit(dt, x->ndim, x->shape);
    if (!res) return TG_ENOMEM;
    grad_job q = {.dt = dt, .l1 = l1, .o = tg_tensor_data(res)};
    void *own[3] = {NULL, NULL, NULL};
    const void **p[3] = {&q.g, &q.x, &q.t};
    int rc = TG_OK;
    for (int i = 0; i < 3 && rc == TG_OK && numel > 0; i++)
        if (i > 0 || !one_value(in[0], &q.gs))
            rc = tg__ew_input(in[i], dt, x->ndim, x->shape, numel, p[i], &own[i]);
    if (rc == TG_OK && numel > 0) tg__parallel_range(numel, numel > 32768, grad_range, &q);
    for (int i = 0; i < 3; i++) tg__work_free(own[i]);
    if (rc < 0) {
        tg_tensor_release(res);
        return rc;
    }
    *out = res;
    save_all(ctx, n, in);
    return TG_OK;
}

static int mseb_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                        const void *params)
{
    (void)params;
    return grad_forward(false, ctx, out, n, in);
}

static int l1b_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                       const void *params)
{
    (void)params;
    return grad_forward(true, ctx, out, n, in);
}

/* For g: the op again with g'.  For x: 2 (g g') (mse) or nothing (l1: a
 * piecewise constant sign); for t: its negation. */
static int grad_backward(const tg_op_schema *self, tg_ctx *ctx, tg_tensor *gg, tg_tensor **gi)
{
    tg_tensor *g, *x, *t, *p = NULL;
    int rc;
    TG_TRY_GOTO(tg__ctx_saved(ctx, 0, &g));
    TG_TRY_GOTO(tg__ctx_saved(ctx, 1, &x));
    TG_TRY_GOTO(tg__ctx_saved(ctx, 2, &t));
    if (tg__ctx_needs_grad(ctx, 0))
        TG_TRY_GOTO(tg_op_call(self, &gi[0], 3, (tg_tensor *[]){gg, x, t}, NULL, 0));
    if (self == &mseb_op && (tg__ctx_needs_grad(ctx, 1) || tg__ctx_needs_grad(ctx, 2))) {
        tg_tensor *gp = NULL;
        TG_TRY_GOTO(tg_mul(&gp, gg, g));
        rc = tg_add(&p, gp, gp);
        tg_tensor_release(gp);
        TG_TRY_GOTO(rc);
        if (tg__ctx_needs_grad(ctx, 2)) TG_TRY_GOTO(tg_neg(&gi[2], p));
        if (tg__ctx_needs_grad(ctx, 1)) gi[1] = tg_tensor_retain(p);
    }
done:
    tg_tensor_release(p);
    if (rc < 0)
        for (int i = 0; i < 3; i++) {
            tg_tensor_release(gi[i]);
            gi[i] = NULL;
        }
    return rc;
}

static int mseb_backward(tg_ctx *ctx, tg_tensor *gg, tg_tensor **gi)
{
    return grad_backward(&mseb_op, ctx, gg, gi);
}

static int l1b_backward(tg_ctx *ctx, tg_tensor *gg, tg_tensor **gi)
{
    return grad_backward(&l1b_op, ctx, gg, gi);
}

/* FP32, as the other losses: inside an autocast scope f16/bf16 inputs are
 * cast to f32; outside, mixed float dtypes are promoted. */
static const tg_op_schema mse_op = {.name = "mse_loss", .arity = 2, .amp = TG_AMP_FP32,
                                    .forward = mse_forward, .backward = mse_backward,
                                    .shape = diff_shape, .double_backward = true,
                                    .vjp = "dx = mse_backward(g, x, t) = 2 g (x - t); dt = -dx"};
static const tg_op_schema mseb_op = {.name = "mse_backward", .arity = 3, .amp = TG_AMP_FP32,
                                     .forward = mseb_forward, .backward = mseb_backward,
                                     .shape = diff_shape, .double_backward = true,
                                     .vjp = "dg = mse_backward(g', x, t), dx = 2 g g', "
                                            "dt = -dx"};
static const tg_op_schema l1_op = {.name = "l1_loss", .arity = 2, .amp = TG_AMP_FP32,
                                   .forward = l1_forward, .backward = l1_backward,
                                   .shape = diff_shape, .double_backward = true,
                                   .vjp = "dx = l1_backward(g, x, t) = g sign(x - t); dt = -dx"};
static const tg_op_schema l1b_op = {.name = "l1_backward", .arity = 3, .amp = TG_AMP_FP32,
                                    .forward = l1b_forward, .backward = l1b_backward,
                                    .shape = diff_shape, .double_backward = true,
                                    .vjp = "dg = l1_backward(g', x, t); dx = dt = 0 "
                                           "(sign is piecewise constant)"};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__diff_loss_ops[] = {&mse_op, &mseb_op, &l1_op, &l1b_op};
static_assert(sizeof tg__diff_loss_ops / sizeof tg__diff_loss_ops[0] == TG__diff_loss_N,
              "src/ops/families.h must count the diff_loss ops");

int tg__diff_elementwise(tg_tensor **out, tg_tensor *x, tg_tensor *t, bool square)
{
    return tg_op_call(square ? &mse_op : &l1_op, out, 2, (tg_tensor *[]){x, t}, NULL, 0);
}
