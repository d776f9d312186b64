/* tests/op_fixtures.c - the op of the tests' own that test_op.c and
 * test_tape_view.c share (op_fixtures.h). */
#include "op_fixtures.h"
#include "tapegrad/tapegrad.h"

int scale_forward(tg_op_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                  const void *params)
{
    (void)ctx, (void)n;
    return tg_mul_scalar(out, in[0], ((const scale_params *)params)->k);
}

int scale_backward(tg_op_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    return tg_mul_scalar(&gi[0], g, ((const scale_params *)tg_op_ctx_params(ctx))->k);
}

const tg_op_schema scale_op = {.name = "test_scale", .arity = 1, .amp = TG_AMP_KEEP,
                               .forward = scale_forward, .backward = scale_backward,
                               .double_backward = true, .vjp = "da = g * k", .scalar = "k"};
