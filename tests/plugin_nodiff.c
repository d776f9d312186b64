/* tests/plugin_nodiff.c - a plugin whose ops have nothing to differentiate:
 * one without inputs (a constant) and one whose schema has no backward, for
 * tapegrad gradcheck --plugin, which lists them as n/a. */
#include "tapegrad/op.h"
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

static const tg_op_schema ones_op = {.name = "plugin_ones", .arity = 0, .amp = TG_AMP_KEEP,
                                     .forward = ones_forward};
static const tg_op_schema copy_op = {.name = "plugin_copy_no_backward", .arity = 1,
                                     .amp = TG_AMP_KEEP, .forward = copy_forward};

int tapegrad_register(void);
int tapegrad_register(void)
{
    int rc = tg_op_register(&ones_op);
    return rc < 0 ? rc : tg_op_register(&copy_op);
}
