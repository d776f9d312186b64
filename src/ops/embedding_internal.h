/* src/ops/embedding_internal.h - the check of F.embedding's options
 * (embedding.c), shared by tg_embedding_ex and the Embedding module's
 * constructors (src/nn/embedding.c). */
#ifndef TAPEGRAD_OPS_EMBEDDING_INTERNAL_H
#define TAPEGRAD_OPS_EMBEDDING_INTERNAL_H

#include <stdint.h>

#include "tapegrad/ops.h"

/* *o = opts (NULL: TG_EMBEDDING_OPTS_INIT) for a weight of V rows, its
 * padding_idx counted from the start; TG_EINVAL naming fn and the option
 * for a padding_idx outside [-V, V), a max_norm below 0 (or NaN), or with
 * max_norm a norm_type not above 0. */
int tg__embedding_opts(tg_embedding_opts *o, const tg_embedding_opts *opts, int64_t V,
                       const char *fn);

#endif
