/* examples/custom_ops.h - the two ops of examples/custom_ops.c. */
#ifndef CUSTOM_OPS_H
#define CUSTOM_OPS_H

#include "tapegrad/op.h"

extern const tg_op_schema custom_softplus_op;   /* hand-written backward */
extern const tg_op_schema custom_mish_op;       /* backward of differentiable ops */

/* y = op(x), recorded on the tape as a built-in op is. */
int custom_softplus(tg_tensor **out, tg_tensor *x);
int custom_mish(tg_tensor **out, tg_tensor *x);

/* Registers both by name (the plugin entry point). */
int tapegrad_register(void);

#endif
