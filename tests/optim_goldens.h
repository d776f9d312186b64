/* tests/optim_goldens.h - optimizers configured from the PyTorch goldens
 * of tests/golden/optim/ (scripts/make_optim_goldens.py): a golden file
 * holds NP parameters' initial values, their gradients of each step, the
 * parameters after each step and torch's optimizer state after the last.
 * Shared by test_optim.c and test_optim_state.c (optim_goldens.c). */
#ifndef TG_TESTS_OPTIM_GOLDENS_H
#define TG_TESTS_OPTIM_GOLDENS_H

#include "tapegrad/tapegrad.h"
#include "tapegrad/optim.h"
#include "tapegrad/safetensors.h"

#define NP 2

/* The metadata k of f as a number (asserting it is there). */
double meta(const tg_st_file *f, const char *k);

/* The number of steps f records: its metadata "steps", or 5. */
int golden_steps(const tg_st_file *f);

/* An optimizer configured from the golden file's metadata: over both
 * parameters, or over parameter 0 with parameter 1 in a second param group. */
tg_optimizer *make_opt(const tg_st_file *f, tg_tensor **params);

/* An optimizer of the golden file's kind with every hyperparameter
 * different from the file's (SGD without momentum, amsgrad and maximize
 * flipped, ...), but amsgrad (RMSprop: centered and whether momentum > 0)
 * as the file's unless flip_amsgrad. */
tg_optimizer *make_other_opt(const tg_st_file *f, tg_tensor **params, bool flip_amsgrad);

/* params[0..NP) set to new leaf copies of f's initial values. */
void init_params(const tg_st_file *f, tg_tensor **params);

/* Sets the golden gradients of step k (none where the file has none). */
void set_grads(const tg_st_file *f, tg_tensor **params, int k);

/* The optimizer of f's configuration over params p, made from f's initial
 * values and stepped with f's gradients of steps 0 and 1. */
tg_optimizer *stepped_twice(const tg_st_file *f, tg_tensor **p);

/* The parameters equal f's after step k, within tol. */
void assert_params(const tg_st_file *f, tg_tensor **params, int k, double tol, const char *what);

void free_params(tg_tensor **params);

/* The optimizer's state saved into a new file under the prefix "o". */
tg_st_file *snapshot(const tg_optimizer *o);

#endif
