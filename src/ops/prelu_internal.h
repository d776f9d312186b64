/* src/ops/prelu_internal.h - the shape through which prelu reads its weight
 * (prelu.c), also the shape of the slope the ONNX export writes
 * (src/onnx/onnx_nodes.c). */
#ifndef TAPEGRAD_OPS_PRELU_INTERNAL_H
#define TAPEGRAD_OPS_PRELU_INTERNAL_H

#include "core/core.h"

/* The shape w broadcasts through over x: (C, 1, ...) up to x's rank for C
 * weights, (1) for one (() for a 0-d x), into *nd and shape.  TG_ESHAPE
 * naming both shapes when w is not 1-d of 1 or C elements (C = x's dim 1;
 * an x of fewer than two dims has one channel). */
int tg__prelu_weight_shape(const tg_tensor *x, const tg_tensor *w, int *nd, int64_t *shape);

#endif
