/* src/nn/state_check.h - what tg_module_load_state_dict,
 * tg_optimizer_state_load, tg_lr_scheduler_state_load,
 * tg_grad_scaler_state_load and tg_loader_set_position check before they
 * change anything, alone: so that tg_checkpoint_load_file can check every
 * slot before loading any (a failed load then changes nothing, not even a
 * version counter or a scaler's step in progress). */
#ifndef TAPEGRAD_SRC_NN_STATE_CHECK_H
#define TAPEGRAD_SRC_NN_STATE_CHECK_H

#include <stdbool.h>

#include "amp/scaler_check.h"
#include "data/loader_check.h"
#include "tapegrad/lr_scheduler.h"
#include "tapegrad/nn.h"
#include "tapegrad/optim.h"
#include "tapegrad/safetensors.h"

int tg__module_state_dict_check(const tg_module *m, const tg_st_file *f, const char *prefix,
                                bool strict);
int tg__optimizer_state_check(const tg_optimizer *opt, const tg_st_file *f, const char *prefix);
int tg__lr_scheduler_state_check(const tg_lr_scheduler *s, const tg_st_file *f,
                                 const char *prefix);

/* Stores a 0-d tensor of dtype dt holding v under k (f keeps its reference);
 * for the state savers (src/nn/optim_state.c). */
int tg__st_put_scalar(tg_st_file *f, const char *k, tg_dtype dt, double v);
/* Stores v[0..g * width) (width 1 or 2) under k as a tensor of dtype dt:
 * 0-d (width 2: shape (2)) when g is 1, else shape (g) or (g, 2); one value
 * (pair) per param group in the optimizer's and the schedulers' states. */
int tg__st_put_values(tg_st_file *f, const char *k, tg_dtype dt, int g, int width,
                      const double *v);
/* TG_EINVAL when an entry "prefix.<i>.*" of f names an i outside [0, n):
 * "<what>: '<key>' is for <noun> <i>; <owner> <n>". */
int tg__st_check_indices(const tg_st_file *f, const char *prefix, int n, const char *what,
                         const char *noun, const char *owner);

#endif
