/* tests/conv_fast_fixtures.h - the random tensors shared by
 * test_conv_fast.c and test_conv_fast_half.c (conv_fast_fixtures.c). */
#ifndef TG_TESTS_CONV_FAST_FIXTURES_H
#define TG_TESTS_CONV_FAST_FIXTURES_H

#include <stdint.h>

#include "tapegrad/tensor.h"

/* A new tensor of uniform draws in [-1, 1) from the tests' generator, which
 * each test starts from the same state (Criterion runs every test in a
 * fresh process). */
tg_tensor *mk_rand(tg_dtype dt, int nd, const int64_t *shape);

#endif
