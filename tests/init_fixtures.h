/* tests/init_fixtures.h - the tensors that the refusal tests of
 * test_init.c and test_init_trunc_orthogonal.c hand over. */
#ifndef TAPEGRAD_TESTS_INIT_FIXTURES_H
#define TAPEGRAD_TESTS_INIT_FIXTURES_H

#include "tapegrad/tensor.h"

/* The tensors the refusal tests hand over: a vector (5) and a matrix (3, 4)
 * of f32, and an i64 matrix (3, 4); new references, zeros. */
void refusal_tensors(tg_tensor **v, tg_tensor **w, tg_tensor **i);

#endif
