/* src/ops/fold_internal.h - the ranges of unfold's and fold's parameters
 * (fold.c), shared by tg_unfold / tg_fold and the Unfold and Fold modules'
 * constructors (src/nn/fold_modules.c). */
#ifndef TAPEGRAD_OPS_FOLD_INTERNAL_H
#define TAPEGRAD_OPS_FOLD_INTERNAL_H

#include "tapegrad/conv.h"

/* TG_EINVAL, naming fn and the field ("p->stride[1]"), unless each
 * kernel_size, dilation and stride is in [1, TG_CONV_MAX_PARAM], each
 * padding in [0, TG_CONV_MAX_PARAM] and, for a fold (output_size not NULL),
 * each output_size in [1, TG_CONV_MAX_PARAM]. */
int tg__fold_check_params(const char *fn, const tg_fold_params *p, const int64_t *output_size);

#endif
