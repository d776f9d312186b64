/* tests/op_fixtures.h - an op of the tests' own that the views of the tape
 * show: test_op.c and test_tape_view.c (op_fixtures.c). */
#ifndef TG_TESTS_OP_FIXTURES_H
#define TG_TESTS_OP_FIXTURES_H

#include "tapegrad/tapegrad.h"

/* y = k x, with k the scalar operand that its params begin with. */
typedef struct scale_params {
    double k;
} scale_params;

int scale_forward(tg_op_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                  const void *params);
int scale_backward(tg_op_ctx *ctx, tg_tensor *g, tg_tensor **gi);

/* "test_scale": scale_forward and scale_backward, with .vjp "da = g * k" and
 * .scalar "k". */
extern const tg_op_schema scale_op;

#endif
