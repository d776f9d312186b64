/* tests/plugin_bugs.c - a plugin of ops with the bugs `tapegrad gradcheck
 * --plugin` must report as failures, beside ones it must pass or call n/a:
 *   bug_shape_rule     its shape rule swaps the dims: the forward's (3, 4)
 *                      result disagrees with the rule's (4, 3) (FAIL)
 *   shape_rule_f32     its shape rule refuses f64 inputs (n/a)
 *   cube_ok            y = x^3, written right (ok)
 * Every forward reads its inputs by index, so it takes any layout. */
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

static const tg_op_schema bug_shape_rule_op = {
    .name = "bug_shape_rule", .arity = 1, .amp = TG_AMP_KEEP, .forward = cube_forward,
    .backward = cube_backward, .shape = swapped_shape, .double_backward = true};
static const tg_op_schema shape_rule_f32_op = {
    .name = "shape_rule_f32", .arity = 1, .amp = TG_AMP_KEEP, .forward = cube_forward,
    .backward = cube_backward, .shape = f32_shape, .double_backward = true};
static const tg_op_schema cube_ok_op = {
    .name = "cube_ok", .arity = 1, .amp = TG_AMP_KEEP, .forward = cube_forward,
    .backward = cube_backward, .double_backward = true};

int tapegrad_register(void);
int tapegrad_register(void)
{
    const tg_op_schema *all[] = {&bug_shape_rule_op, &shape_rule_f32_op, &cube_ok_op};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        int rc = tg_op_register(all[i]);
        if (rc < 0) return rc;
    }
    return TG_OK;
}
