/* src/data/loader_check.h - tg_loader_set_position's range check alone, for
 * tg_checkpoint_load_file (src/nn/state_check.h). */
#ifndef TAPEGRAD_DATA_LOADER_CHECK_H
#define TAPEGRAD_DATA_LOADER_CHECK_H

#include <stdint.h>

#include "tapegrad/data.h"

int tg__loader_position_check(const tg_loader *ld, int64_t epoch, int64_t index);

#endif
