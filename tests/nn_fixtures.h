/* Fixtures shared by the nn test files (test_nn*.c, compiled with
 * tests/nn_fixtures.c): the small generator of scripts/make_nn_goldens.py
 * and "the module's state did not change" checks.  Each asserts on failure. */
#ifndef TG_TESTS_NN_FIXTURES_H
#define TG_TESTS_NN_FIXTURES_H

#include <stdint.h>

#include "tapegrad/nn.h"
#include "tapegrad/tensor.h"


/* Every state value of m in state-dict order (malloc'd; *n values). */
double *nf_snapshot(const tg_module *m, int64_t *n);

/* m's state values equal before (n values, from nf_snapshot) bit for bit. */
void nf_expect_snapshot(const tg_module *m, const double *before, int64_t n);

/* The generator of make_nn_goldens.py: Linear(8, 72) -> Unflatten(8, 3, 3)
 * -> BN2d -> ReLU -> ConvT(8, 4, 4, s2, p1) -> BN2d -> ReLU
 * -> ConvT(4, 1, 4, s2, p1) -> Tanh, as child "net" of a "Gen". */
tg_module *nf_make_generator(tg_rng *rng);

#endif
