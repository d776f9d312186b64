/* tests/plugin_bugs.c - a plugin of ops with the bugs `tapegrad gradcheck
 * --plugin` must report as failures, beside ones it must pass or call n/a:
 *   bug_shape_rule     its shape rule swaps the dims: the forward's (3, 4)
 *                      result disagrees with the rule's (4, 3) (FAIL)
 *   shape_rule_f32     its shape rule refuses f64 inputs (n/a)
 *   cube_ok            y = x^3, written right (ok)
 *   cube_flat_x        y = x^3, whose forward reads x as a flat contiguous
 *                      array: right for a contiguous x only (FAIL)
 *   sumsq_ok           variadic y = sum_i x_i^2 (ok)
 *   sumsq_bad_third    the same with a backward wrong from input 2 on (FAIL)
 * The other forwards take any layout (differentiable ops, or reads by
 * index). */
#include <stdbool.h>

#include "tapegrad/op.h"
#include "tapegrad/ops.h"
#include "tapegrad/status.h"
#include "tapegrad/tensor.h"

/* y = x * x * x (differentiable ops, so its backward is too) */
static int cube_forward(tg_op_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                        const void *params)
{
    (void)n, (void)params;
    tg_tensor *x2 = NULL;
    int rc = tg_mul(&x2, in[0], in[0]);
    if (rc >= 0) rc = tg_mul(out, x2, in[0]);
    tg_tensor_release(x2);
    if (rc >= 0 && ctx) rc = tg_op_ctx_save(ctx, in[0]);
    return rc;
}

/* dy/dx = 3 x^2 */
static int cube_backward(tg_op_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    tg_tensor *x = NULL, *x2 = NULL, *gx2 = NULL;
    int rc = tg_op_ctx_saved(ctx, 0, &x);
    if (rc >= 0) rc = tg_mul(&x2, x, x);
    if (rc >= 0) rc = tg_mul(&gx2, g, x2);
    if (rc >= 0) rc = tg_mul_scalar(&gi[0], gx2, 3.0);
    tg_tensor_release(x2);
    tg_tensor_release(gx2);
    return rc;
}

/* the rule of an elementwise op, but with the two dims swapped */
static int swapped_shape(int n, tg_tensor *const *in, const void *params, tg_dtype *dt, int *nd,
                         int64_t *shape)
{
    (void)n, (void)params;
    *dt = tg_tensor_dtype(in[0]);
    *nd = 2;
    shape[0] = tg_tensor_dim(in[0], 1);
    shape[1] = tg_tensor_dim(in[0], 0);
    return TG_OK;
}

/* an elementwise op's rule that takes f32 only */
static int f32_shape(int n, tg_tensor *const *in, const void *params, tg_dtype *dt, int *nd,
                     int64_t *shape)
{
    (void)n, (void)params;
    if (tg_tensor_dtype(in[0]) != TG_F32)
        return tg_error_set(TG_EDTYPE, "shape_rule_f32: x must be f32, not %s",
                            tg_dtype_name(tg_tensor_dtype(in[0])));
    *dt = TG_F32;
    *nd = tg_tensor_ndim(in[0]);
    for (int d = 0; d < *nd; d++) shape[d] = tg_tensor_dim(in[0], d);
    return TG_OK;
}

/* y = x^3 over x's elements read as if x were contiguous (the bug) */
static int cube_flat_x_forward(tg_op_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                               const void *params)
{
    (void)n, (void)params;
    tg_tensor *x = in[0], *y = NULL;
    if (tg_tensor_dtype(x) != TG_F64)
        return tg_error_set(TG_EDTYPE, "cube_flat_x: x must be f64");
    int rc = tg_tensor_zeros_like(&y, x);
    if (rc < 0) return rc;
    const double *xp = tg_tensor_cdata(x);
    double *yp = tg_tensor_data(y);
    for (int64_t i = 0; i < tg_tensor_numel(x); i++) yp[i] = xp[i] * xp[i] * xp[i];
    if (ctx) rc = tg_op_ctx_save(ctx, x);
    if (rc < 0) {
        tg_tensor_release(y);
        return rc;
    }
    *out = y;
    return TG_OK;
}

/* y = sum_i x_i * x_i (ops: differentiable) */
static int sumsq_forward(tg_op_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                         const void *params)
{
    (void)params;
    tg_tensor *acc = NULL;
    int rc = TG_OK;
    for (int i = 0; i < n && rc >= 0; i++) {
        tg_tensor *sq = NULL, *sum = NULL;
        rc = tg_mul(&sq, in[i], in[i]);
        if (rc >= 0 && acc) rc = tg_add(&sum, acc, sq);
        if (rc >= 0 && ctx) rc = tg_op_ctx_save(ctx, in[i]);
        if (rc >= 0) {
            tg_tensor_release(acc);
            acc = sum ? sum : tg_tensor_retain(sq);
        }
        tg_tensor_release(sq);
        if (sum && rc < 0) tg_tensor_release(sum);
    }
    if (rc < 0) {
        tg_tensor_release(acc);
        return rc;
    }
    *out = acc;
    return TG_OK;
}

/* dy/dx_i = 2 x_i; with wrong_from_2, inputs 2 and up get x_i instead */
static int sumsq_grads(tg_op_ctx *ctx, tg_tensor *g, tg_tensor **gi, bool wrong_from_2)
{
    int rc = TG_OK;
    for (int i = 0; i < TG_OP_MAX_INPUTS && rc >= 0; i++) {
        int nd;
        tg_op_ctx_input(ctx, i, NULL, &nd, NULL);
        if (nd < 0) break;   /* past the last input */
        if (!tg_op_ctx_needs_grad(ctx, i)) continue;
        tg_tensor *x = NULL, *gx = NULL;
        rc = tg_op_ctx_saved(ctx, i, &x);
        if (rc >= 0) rc = tg_mul(&gx, g, x);
        if (rc >= 0) rc = tg_mul_scalar(&gi[i], gx, wrong_from_2 && i >= 2 ? 1.0 : 2.0);
        tg_tensor_release(gx);
    }
    return rc;
}

static int sumsq_backward(tg_op_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    return sumsq_grads(ctx, g, gi, false);
}

static int sumsq_bad_third_backward(tg_op_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    return sumsq_grads(ctx, g, gi, true);
}

static const tg_op_schema bug_shape_rule_op = {
    .name = "bug_shape_rule", .arity = 1, .amp = TG_AMP_KEEP, .forward = cube_forward,
    .backward = cube_backward, .shape = swapped_shape, .double_backward = true};
static const tg_op_schema shape_rule_f32_op = {
    .name = "shape_rule_f32", .arity = 1, .amp = TG_AMP_KEEP, .forward = cube_forward,
    .backward = cube_backward, .shape = f32_shape, .double_backward = true};
static const tg_op_schema cube_ok_op = {
    .name = "cube_ok", .arity = 1, .amp = TG_AMP_KEEP, .forward = cube_forward,
    .backward = cube_backward, .double_backward = true};

static const tg_op_schema cube_flat_x_op = {
    .name = "cube_flat_x", .arity = 1, .amp = TG_AMP_KEEP, .forward = cube_flat_x_forward,
    .backward = cube_backward, .double_backward = true};
static const tg_op_schema sumsq_ok_op = {
    .name = "sumsq_ok", .arity = TG_OP_VARIADIC, .amp = TG_AMP_PROMOTE, .forward = sumsq_forward,
    .backward = sumsq_backward, .double_backward = true};
static const tg_op_schema sumsq_bad_third_op = {
    .name = "sumsq_bad_third", .arity = TG_OP_VARIADIC, .amp = TG_AMP_PROMOTE,
    .forward = sumsq_forward, .backward = sumsq_bad_third_backward, .double_backward = true};

int tapegrad_register(void);
int tapegrad_register(void)
{
    const tg_op_schema *all[] = {&bug_shape_rule_op, &shape_rule_f32_op, &cube_ok_op,
                                 &cube_flat_x_op, &sumsq_ok_op, &sumsq_bad_third_op};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        int rc = tg_op_register(all[i]);
        if (rc < 0) return rc;
    }
    return TG_OK;
}
