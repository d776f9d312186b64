/* src/amp/scaler_check.h - tg_grad_scaler_state_load's checks alone, for
 * tg_checkpoint_load_file (src/nn/state_check.h). */
#ifndef TAPEGRAD_AMP_SCALER_CHECK_H
#define TAPEGRAD_AMP_SCALER_CHECK_H

#include "tapegrad/amp.h"
#include "tapegrad/safetensors.h"

int tg__grad_scaler_state_check(const tg_grad_scaler *s, const tg_st_file *f,
                                const char *prefix);

#endif
