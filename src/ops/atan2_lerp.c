/* src/ops/atan2_lerp.c - atan2 and lerp, with a tensor or a number weight,
 * each one op with broadcasting.
 *
 * atan2(y, x) = the angle of the point (x, y); with r2 = x^2 + y^2,
 *   d/dy = x / r2,  d/dx = -y / r2,
 * each gradient summed back over the dims its input was stretched along.
 * Two integer inputs give f32, as torch's (tg__ew_binary_float).
 *
 * lerp(s, e, w), w a tensor, is torch 1.13's CPU kernel: s + w (e - s)
 * where w < 0.5 (not |w|: a w of -0.7 takes this form too), else
 * e - (e - s) (1 - w), each product and sum fused (one rounding, as
 * torch's f32 and f64 kernels); so w = 0 gives s and w = 1 gives e
 * exactly.  f16 and bf16 operands are computed in f32 and the result
 * rounded once (torch's bf16 kernel computes in float; torch 1.13 has no
 * f16 CPU lerp).  Gradients, torch's: g (1 - w) to start, g w to end,
 * g (e - s) to weight, each summed back to its input's shape, written with
 * differentiable ops.
 *
 * lerp_scalar(s, e, w), w a number (torch.lerp with a Python float, as in
 * an EMA of weights), is the same kernel with w and the arithmetic in f32
 * for f32, f16 and bf16.  Gradients g (1 - w) and g w (torch's, 1 - w in
 * double), summed back over broadcast dims; products with a number,
 * differentiable again.
 */
#include <assert.h>
#include <math.h>

#include "core/core.h"
#include "ops/elementwise.h"
#include "autograd/tape.h"
#include "ops/families.h"
#include "tapegrad/ops.h"

TG_EW_BINARY_KERNEL(k_atan2, atan2((double)a, (double)b))

/* torch's kernel for one element: d = e - s rounded, then the form that
 * w < 0.5 picks (NaN: the second), its product and sum fused. */
static inline float lerp_f32(float s, float e, float w)
{
    const float d = e - s;
    return w < 0.5f ? fmaf(w, d, s) : fmaf(-d, 1.0f - w, e);
}

static inline double lerp_f64(double s, double e, double w)
{
    const double d = e - s;
    return w < 0.5 ? fma(w, d, s) : fma(-d, 1.0 - w, e);
}

/* lerp_scalar's kernel, a the start and b the end: torch's w converted to
 * the compute dtype first, then compared with 0.5 (a w of 0.4999999999 is
 * 0.5f in f32 and takes the second form there). */
static void k_lerp_s(tg_dtype cdt, void *out, const void *a, const void *b, int64_t n,
                     double w)
{
    if (cdt == TG_F64) {
        const double *s = a, *e = b;
        double *o = out;
        for (int64_t i = 0; i < n; i++) o[i] = lerp_f64(s[i], e[i], w);
    } else {
        const float *s = a, *e = b, wt = (float)w;
        float *o = out;
        for (int64_t i = 0; i < n; i++) o[i] = lerp_f32(s[i], e[i], wt);
    }
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

/* TG_EINVAL for a NULL operand, TG_EDTYPE for an integer one or three
 * dtypes that differ (torch.lerp refuses those too), TG_ESHAPE for shapes
 * that do not broadcast together; else the broadcast shape. */
static int lerp_check(tg_tensor *const *in, int *nd, int64_t *shape)
{
    static const char *const names[3] = {"start", "end", "weight"};
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
    int nd1 = 0;
    int64_t sh1[TG_MAX_DIMS];
    TG_TRY(tg__broadcast_shapes("lerp", in[0]->ndim, in[0]->shape, in[1]->ndim, in[1]->shape,
                                &nd1, sh1));
    return tg__broadcast_shapes("lerp", nd1, sh1, in[2]->ndim, in[2]->shape, nd, shape);
}

/* o = lerp(s, e, w) over n contiguous elements of cdt (f32 or f64), the
 * operands already broadcast to o's shape. */
typedef struct lerp_job {
    const void *s, *e, *w;
    void *o;
    tg_dtype cdt;
} lerp_job;

static void lerp_range(void *p, int64_t lo, int64_t hi)
{
    const lerp_job *q = p;
    if (q->cdt == TG_F64) {
        const double *s = q->s, *e = q->e, *w = q->w;
        double *o = q->o;
        for (int64_t i = lo; i < hi; i++) o[i] = lerp_f64(s[i], e[i], w[i]);
    } else {
        const float *s = q->s, *e = q->e, *w = q->w;
        float *o = q->o;
        for (int64_t i = lo; i < hi; i++) o[i] = lerp_f32(s[i], e[i], w[i]);
    }
}

/* res (contiguous, n elements) = lerp of in[0..3) broadcast to its shape:
 * each operand read in place when it already is a contiguous buffer of the
 * compute dtype in that shape, else a broadcast copy (tg__ew_input); an
 * f16/bf16 result through an f32 buffer rounded once at the end. */
static int lerp_fill(tg_tensor *res, tg_tensor *const *in, int nd, const int64_t *shape,
                     int64_t n)
{
    const tg_dtype dt = res->dtype, cdt = tg__compute_dtype(dt);
    const void *p[3] = {NULL, NULL, NULL};
    void *owned[4] = {NULL, NULL, NULL, NULL};
    int rc = TG_OK;
    for (int i = 0; i < 3 && rc == TG_OK; i++)
        rc = tg__ew_input(in[i], cdt, nd, shape, n, &p[i], &owned[i]);
    void *o = tg_tensor_data(res);
    if (rc == TG_OK && dt != cdt) {
        o = owned[3] = tg__work_alloc((size_t)n * sizeof(float));   /* f32 result */
        if (!o) rc = TG_ENOMEM;
    }
    if (rc == TG_OK) {
        lerp_job q = {.s = p[0], .e = p[1], .w = p[2], .o = o, .cdt = cdt};
        tg__parallel_range(n, n > 32768, lerp_range, &q);
        if (dt != cdt) tg__f32_to_half_n(dt, o, tg_tensor_data(res), n, true);
    }
    for (int i = 0; i < 4; i++) tg__work_free(owned[i]);
    return rc;
}

static int lerp_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                        const void *params)
{
    int nd = 0;
    int64_t shape[TG_MAX_DIMS];
    TG_TRY(lerp_check(in, &nd, shape));
    tg_tensor *res = tg__tensor_uninit(in[0]->dtype, nd, shape);   /* lerp_fill writes all */
    if (!res) return TG_ENOMEM;
    const int64_t numel = tg_tensor_numel(res);
    const int rc = numel > 0 ? lerp_fill(res, in, nd, shape, numel) : TG_OK;
    if (rc < 0) {
        tg_tensor_release(res);
        return rc;
    }
    if (ctx)
        for (int i = 0; i < 3; i++) tg__ctx_save(ctx, in[i]);
    *out = res;
    return TG_OK;
}

/* dstart = g (1 - w), dend = g w, dweight = g (e - s), as torch's formulas
 * (1 - w and e - s rounded in the dtype), each summed to its input's shape. */
static int lerp_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    tg_tensor *x[3], *f = NULL, *t = NULL;
    int rc;
    for (int i = 0; i < 3; i++) TG_TRY_GOTO(tg__ctx_saved(ctx, i, &x[i]));
    for (int i = 0; i < 3; i++) {
        if (!tg__ctx_needs_grad(ctx, i)) continue;
        if (i == 0) TG_TRY_GOTO(tg_rsub_scalar(&f, x[2], 1.0));
        else if (i == 1) f = tg_tensor_retain(x[2]);
        else TG_TRY_GOTO(tg_sub(&f, x[1], x[0]));
        TG_TRY_GOTO(tg_mul(&t, g, f));
        tg_tensor_release(f);
        f = NULL;
        TG_TRY_GOTO(tg__ew_grad_to_input(ctx, i, &t, &gi[i]));
    }
done:
    tg_tensor_release(f);
    tg_tensor_release(t);
    if (rc < 0)
        for (int i = 0; i < 3; i++) {
            tg_tensor_release(gi[i]);
            gi[i] = NULL;
        }
    return rc;
}

/* KEEP: torch's autocast lists no lerp. */
static const tg_op_schema lerp_op = {
    .name = "lerp", .arity = 3, .amp = TG_AMP_KEEP, .forward = lerp_forward,
    .backward = lerp_backward, .double_backward = true,
    .vjp = "dstart = g * (1 - weight), dend = g * weight, dweight = g * (end - start)",
    .scalar = NULL};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__atan2_ops[] = {&atan2_op, &lerp_scalar_op, &lerp_op};
static_assert(sizeof tg__atan2_ops / sizeof tg__atan2_ops[0] == TG__atan2_N,
              "src/ops/families.h must count the atan2 ops");

int tg_atan2(tg_tensor **out, tg_tensor *y, tg_tensor *x)
{
    tg_tensor *in[2] = {y, x};
    return tg_op_call(&atan2_op, out, 2, in, NULL, 0);
}

int tg_lerp(tg_tensor **out, tg_tensor *start, tg_tensor *end, tg_tensor *weight)
{
    TG_CHECK(out != NULL, TG_EINVAL, "lerp: out is NULL");
    return tg_op_call(&lerp_op, out, 3, (tg_tensor *[]){start, end, weight}, NULL, 0);
}

int tg_lerp_scalar(tg_tensor **out, tg_tensor *start, tg_tensor *end, double weight)
{
    lerp_s_params prm = {.w = weight};
    return tg_op_call(&lerp_scalar_op, out, 2, (tg_tensor *[]){start, end}, &prm, sizeof prm);
}
