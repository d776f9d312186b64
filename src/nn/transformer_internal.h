/* src/nn/transformer_internal.h - checks shared by the Transformer decoder
 * layer and the stacks (transformer_decoder.c, transformer_stack.c). */
#ifndef TAPEGRAD_NN_TRANSFORMER_INTERNAL_H
#define TAPEGRAD_NN_TRANSFORMER_INTERNAL_H

#include "tapegrad/attention.h"

/* t (named tname) of rank 3 or 2 with d features, and mem (mname) of t's
 * rank with d features; TG_ESHAPE naming them and fn otherwise. */
int tg__nn_check_tgt_memory(const char *fn, int64_t d, const tg_tensor *t, const char *tname,
                            const tg_tensor *mem, const char *mname);
/* TG_EINVAL (naming fn) when mk gives a src mask, which a decoder has no
 * use for. */
int tg__nn_check_masks_unused(const char *fn, const tg_nn_transformer_masks *mk);

#endif
