/* src/ops/quant_params.h - argument checks of per-tensor and per-channel
 * quantization parameters, shared by the fake_quantize ops (this layer) and
 * src/quant (above it). */
#ifndef TAPEGRAD_OPS_QUANT_PARAMS_H
#define TAPEGRAD_OPS_QUANT_PARAMS_H

#include "core/core.h"

/* Elements after dim `axis` of t (row-major): a channel block along axis. */
static inline int64_t tg__q_inner_size(const tg_tensor *t, int axis)
{
    int64_t inner = 1;
    for (int d = axis + 1; d < t->ndim; d++) inner *= t->shape[d];
    return inner;
}

/* TG_EINVAL for a NULL x, TG_EDTYPE unless x is a float tensor. */
int tg__q_check_float(const char *op, const tg_tensor *x);
/* Checks per-channel scales (finite, > 0) and resolves axis against ndim. */
int tg__q_check_channels(const char *op, const tg_tensor *t, int *axis, int64_t n,
                         const double *scales);

#endif
