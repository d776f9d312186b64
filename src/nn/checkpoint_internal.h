/* src/nn/checkpoint_internal.h - the parts of a checkpoint's module slots
 * outside the state dict (checkpoint_dropout.c). */
#ifndef TAPEGRAD_SRC_NN_CHECKPOINT_INTERNAL_H
#define TAPEGRAD_SRC_NN_CHECKPOINT_INTERNAL_H

#include "core/core.h"
#include "tapegrad/nn.h"
#include "tapegrad/safetensors.h"

/* Writes the mask count of every Dropout at or below m into f's metadata,
 * "<slot>.<path>.dropout_calls". */
int tg__checkpoint_dropouts_save(tg_module *m, const char *slot, tg_st_file *f);
/* TG_EFORMAT naming the first such entry of f that is not a count; a
 * missing entry is fine.  Changes nothing. */
int tg__checkpoint_dropouts_check(tg_module *m, const char *slot, const tg_st_file *f);
/* Sets each Dropout's count from f (entries checked before); a Dropout
 * without an entry keeps its count. */
int tg__checkpoint_dropouts_load(tg_module *m, const char *slot, const tg_st_file *f);

#endif
