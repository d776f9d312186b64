/* tests/checkpoint_fixtures.h - the small training state and the
 * temporary folder shared by test_checkpoint.c and test_checkpoint_load.c. */
#ifndef TAPEGRAD_TESTS_CHECKPOINT_FIXTURES_H
#define TAPEGRAD_TESTS_CHECKPOINT_FIXTURES_H

#include <stdbool.h>
#include <stdint.h>

#include "tapegrad/tapegrad.h"

/* A small training state: Linear(4, 3) + BatchNorm1d(3), Adam, a loader over
 * 10 synthetic 1x2x2 images, an RNG, a step counter and a tensor. */
typedef struct state {
    tg_module *model;
    tg_optimizer *opt;
    tg_dataset *ds;
    tg_loader *ld;
    tg_rng rng;
    int64_t step;
    tg_tensor *extra;
    tg_checkpoint *ck;
} state;

/* A new state drawn from seed (with Adam's options changed unless seed is
 * 1, so that a load must restore them) and its checkpoint over every slot,
 * the optimizer only when with_opt. */
void state_init(state *s, uint64_t seed, bool with_opt);
/* Frees everything s holds. */
void state_free(state *s);
/* One training step: next batch (new epoch when one ends), noise from rng
 * added to the target, MSE, Adam. */
void state_step(state *s);
/* Every tensor of a (as saved by a checkpoint without extras) equals b's,
 * bit for bit, and they have the same keys. */
void assert_same_files(const tg_st_file *a, const tg_st_file *b);
/* The state as a file in memory (deep copies: a later step does not change it). */
tg_st_file *snapshot(const state *s);

/* The checkpoint file of a test, in the temporary folder that
 * checkpoint_setup makes (the suites' .init; th_tmp_dir_remove is .fini). */
extern char ck_path[128];
void checkpoint_setup(void);

#endif
