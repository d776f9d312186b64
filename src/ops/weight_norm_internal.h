/* src/ops/weight_norm_internal.h - the dim rule of torch._weight_norm
 * (weight_norm.c), shared by tg_weight_norm / tg_norm_except_dim and
 * tg_nn_weight_norm (src/nn/weight_norm.c), which checks it before it
 * changes the module. */
#ifndef TAPEGRAD_OPS_WEIGHT_NORM_INTERNAL_H
#define TAPEGRAD_OPS_WEIGHT_NORM_INTERNAL_H

/* *out = dim resolved for a tensor `what` of nd dims: [0, nd), or -1 (the
 * whole tensor, torch's dim=None); dims in [-nd, -2] count from the end.
 * TG_EINVAL naming fn and what otherwise. */
int tg__weight_norm_dim(const char *fn, const char *what, int nd, int dim, int *out);

#endif
