/* src/ops/mse_loss.c - the element-wise step of the MSE loss, (x - t)^2, as
 * one op, mse_loss, with its gradient op mse_backward, for x and t of one
 * shape and of one dtype, f32 or f64 (tg_mse_loss, src/ops/loss.c, takes
 * them here and composes sub and mul otherwise).
 *
 * The numbers are those of the composition mul(sub(x, t), sub(x, t)), bit
 * for bit: d = x - t rounded to the dtype, then d d rounded.  Its gradient
 * there is mul's g d + g d (both products the same rounding, so their sum
 * is exact) for d, then sub's: dx = 2 (g d), dt = -dx.  mse_backward(g, x,
 * t) = 2 (g (x - t)) computes that in one pass over x and t, reading g
 * once when it is one value broadcast (a mean's or sum's gradient), where
 * the composition made a tensor for d, for each product and for their sum.
 *
 * mse_backward is linear in g: its gradient for g is mse_backward(g', x, t)
 * again, and for x and t +-2 g g' (products), so derivatives of every
 * order come from these ops. */
#include <assert.h>
#include <string.h>

#include "core/core.h"
#include "autograd/tape.h"
#include "ops/elementwise.h"
#include "ops/families.h"
#include "ops/loss.h"
#include "tapegrad/ops.h"

/* a = x, b = t: the difference rounded to T, then its square rounded. */
#define MSE_SQ(T, a, b) ((T)((T)((a) - (b)) * (T)((a) - (b))))
TG_EW_BINARY_KERNEL(k_mse, _Generic(a, float: MSE_SQ(float, a, b), default: MSE_SQ(double, a, b)))

/* x and t of one float dtype and shape (the loss checks both, and dispatch
 * promotes); the result has both. */
static int mse_shape(int n, tg_tensor *const *in, const void *params, tg_dtype *dtype,
                     int *ndim, int64_t *shape)
{
    (void)params;
    for (int i = 0; i < n; i++) TG_TRY(tg__ew_check_float("mse_loss", i, in[i]));
    for (int i = 1; i < n; i++)
        if (!tg_tensor_same_shape(in[0], in[i])) {
            char a[96], b[96];
            tg_shape_str(a, sizeof a, in[0]->ndim, in[0]->shape);
            tg_shape_str(b, sizeof b, in[i]->ndim, in[i]->shape);
            return tg__error(TG_ESHAPE, "mse_loss: input %d shape %s must equal input 0 shape "
                             "%s (no broadcasting)", i, b, a);
        }
    *dtype = in[0]->dtype;
    *ndim = in[0]->ndim;
    memcpy(shape, in[0]->shape, (size_t)in[0]->ndim * sizeof *shape);
    return TG_OK;
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

static const tg_op_schema mseb_op;

/* dx = mse_backward(g, x, t); dt = -dx. */
static int mse_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    tg_tensor *x, *t, *dx = NULL;
    int rc;
    TG_TRY_GOTO(tg__ctx_saved(ctx, 0, &x));
    TG_TRY_GOTO(tg__ctx_saved(ctx, 1, &t));
    TG_TRY_GOTO(tg_op_call(&mseb_op, &dx, 3, (tg_tensor *[]){g, x, t}, NULL, 0));
    if (tg__ctx_needs_grad(ctx, 1)) TG_TRY_GOTO(tg_neg(&gi[1], dx));
    if (tg__ctx_needs_grad(ctx, 0)) gi[0] = tg_tensor_retain(dx);
done:
    tg_tensor_release(dx);
    return rc;
}

/* ---- mse_backward(g, x, t) = 2 (g (x - t)) ---- */

typedef struct mseb_job {
    tg_dtype dt;
    const void *g, *x, *t;   /* g NULL: gs for every element */
    double gs;
    void *o;
} mseb_job;

#define MSEB_RUN(T)                                                                       \
    do {                                                                                  \
        const T *x = q->x, *t = q->t, *g = q->g, gs = (T)q->gs;                           \
        T *o = q->o;                                                                      \
        if (g)                                                                            \
            for (int64_t i = lo; i < hi; i++) {                                           \
                const T pr = g[i] * (T)(x[i] - t[i]);                                      \
                o[i] = pr + pr;                                                        \
            }                                                                             \
        else                                                                              \
            for (int64_t i = lo; i < hi; i++) {                                           \
                const T pr = gs * (T)(x[i] - t[i]);                                        \
                o[i] = pr + pr;                                                        \
            }                                                                             \
    } while (0)

static void mseb_range(void *p, int64_t lo, int64_t hi)
{
    const mseb_job *q = p;
    if (q->dt == TG_F64)
        MSEB_RUN(double);
    else
        MSEB_RUN(float);
}

/* True when every element of g is one element (a broadcast 0-d or
 * one-element tensor); its value into *v. */
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

static int mseb_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                        const void *params)
{
    (void)params;
    const tg_tensor *x = in[1];
    const tg_dtype dt = x->dtype;
    TG_CHECK(dt == TG_F32 || dt == TG_F64, TG_EDTYPE,
             "mse_backward: inputs have dtype %s; f32 or f64 only", tg_dtype_name(dt));
    const int64_t numel = tg_tensor_numel(x);
    tg_tensor *res = tg__tensor_uninit(dt, x->ndim, x->shape);
    if (!res) return TG_ENOMEM;
    mseb_job q = {.dt = dt, .o = tg_tensor_data(res)};
    void *own[3] = {NULL, NULL, NULL};
    const void **p[3] = {&q.g, &q.x, &q.t};
    int rc = TG_OK;
    for (int i = 0; i < 3 && rc == TG_OK && numel > 0; i++)
        if (i > 0 || !one_value(in[0], &q.gs))
            rc = tg__ew_input(in[i], dt, x->ndim, x->shape, numel, p[i], &own[i]);
    if (rc == TG_OK && numel > 0) tg__parallel_range(numel, numel > 32768, mseb_range, &q);
    for (int i = 0; i < 3; i++) tg__work_free(own[i]);
    if (rc < 0) {
        tg_tensor_release(res);
        return rc;
    }
    *out = res;
    save_all(ctx, n, in);
    return TG_OK;
}

/* For g: mse_backward(g', x, t).  For x: 2 (g g'); for t: its negation. */
static int mseb_backward(tg_ctx *ctx, tg_tensor *gg, tg_tensor **gi)
{
    tg_tensor *g, *x, *t, *p = NULL;
    int rc;
    TG_TRY_GOTO(tg__ctx_saved(ctx, 0, &g));
    TG_TRY_GOTO(tg__ctx_saved(ctx, 1, &x));
    TG_TRY_GOTO(tg__ctx_saved(ctx, 2, &t));
    if (tg__ctx_needs_grad(ctx, 0))
        TG_TRY_GOTO(tg_op_call(&mseb_op, &gi[0], 3, (tg_tensor *[]){gg, x, t}, NULL, 0));
    if (tg__ctx_needs_grad(ctx, 1) || tg__ctx_needs_grad(ctx, 2)) {
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

/* FP32, as the other losses: inside an autocast scope f16/bf16 inputs are
 * cast to f32; outside, mixed float dtypes are promoted. */
static const tg_op_schema mse_op = {.name = "mse_loss", .arity = 2, .amp = TG_AMP_FP32,
                                    .forward = mse_forward, .backward = mse_backward,
                                    .shape = mse_shape, .double_backward = true,
                                    .vjp = "dx = mse_backward(g, x, t) = 2 g (x - t); dt = -dx"};
static const tg_op_schema mseb_op = {.name = "mse_backward", .arity = 3, .amp = TG_AMP_FP32,
                                     .forward = mseb_forward, .backward = mseb_backward,
                                     .shape = mse_shape, .double_backward = true,
                                     .vjp = "dg = mse_backward(g', x, t), dx = 2 g g', "
                                            "dt = -dx"};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__mse_loss_ops[] = {&mse_op, &mseb_op};
static_assert(sizeof tg__mse_loss_ops / sizeof tg__mse_loss_ops[0] == TG__mse_loss_N,
              "src/ops/families.h must count the mse_loss ops");

int tg__mse_elementwise(tg_tensor **out, tg_tensor *x, tg_tensor *t)
{
    return tg_op_call(&mse_op, out, 2, (tg_tensor *[]){x, t}, NULL, 0);
}
