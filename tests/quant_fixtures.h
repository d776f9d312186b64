/* The random inputs shared by test_quant.c and test_quant_ops.c (compiled
 * with tests/quant_fixtures.c).  Each test starts from the same generator
 * state: Criterion runs every test in a fresh process. */
#ifndef TG_TESTS_QUANT_FIXTURES_H
#define TG_TESTS_QUANT_FIXTURES_H

#include <stdint.h>

#include "tapegrad/tensor.h"

/* The next uniform draw in [-1, 1) (th_uniform_pm1). */
double rnd(void);

/* A new tensor of uniform draws in [lo, hi) (th_rand_tensor). */
tg_tensor *mk(tg_dtype dt, int nd, const int64_t *shape, double lo, double hi);

#endif
