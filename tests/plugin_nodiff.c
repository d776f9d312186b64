/* tests/plugin_nodiff.c - a plugin whose ops tapegrad gradcheck --plugin
 * cannot check, which it lists as n/a: one without inputs (a constant), one
 * whose schema has no backward, and one that takes an i64 input (which the
 * tool's f64 inputs are not). */
#include "tapegrad/op.h"
#include "tapegrad/status.h"
#include "tapegrad/tensor.h"

static int ones_forward(tg_op_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                        const void *params)
{
    (void)ctx, (void)n, (void)in, (void)params;
    return tg_tensor_full(out, TG_F64, 1, (int64_t[]){2}, 1.0);
}

static int copy_forward(tg_op_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                        const void *params)
{
    (void)ctx, (void)n, (void)params;
    return tg_tensor_clone(out, in[0]);
}

/* y = x * k with k an i64 tensor (no gradient for k) */
static int scale_by_int_forward(tg_op_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                                const void *params)
{
    (void)ctx, (void)n, (void)params;
    if (tg_tensor_dtype(in[1]) != TG_I64)
        return tg_error_set(TG_EDTYPE, "plugin_scale_by_int: k must be i64, not %s",
                            tg_dtype_name(tg_tensor_dtype(in[1])));
    return tg_tensor_clone(out, in[0]);   /* never reached by the tool */
}

static int scale_by_int_backward(tg_op_ctx *ctx, tg_tensor *g, tg_tensor **grad_in)
{
    (void)ctx;
    grad_in[0] = tg_tensor_retain(g);
    return TG_OK;
}

static const tg_op_schema ones_op = {.name = "plugin_ones", .arity = 0, .amp = TG_AMP_KEEP,
                                     .forward = ones_forward};
static const tg_op_schema copy_op = {.name = "plugin_copy_no_backward", .arity = 1,
                                     .amp = TG_AMP_KEEP, .forward = copy_forward};

/* its vjp is empty, which the views take as none */
static const tg_op_schema scale_by_int_op = {
    .name = "plugin_scale_by_int", .arity = 2, .amp = TG_AMP_KEEP,
    .forward = scale_by_int_forward, .backward = scale_by_int_backward, .vjp = ""};

int tapegrad_register(void);
int tapegrad_register(void)
{
    int rc = tg_op_register(&ones_op);
    if (rc >= 0) rc = tg_op_register(&copy_op);
    return rc < 0 ? rc : tg_op_register(&scale_by_int_op);
}
