/* tests/tensor_fixtures.h - the sentinel and the transposed view shared by
 * test_tensor.c and test_tensor_copy.c (tensor_fixtures.c). */
#ifndef TG_TESTS_TENSOR_FIXTURES_H
#define TG_TESTS_TENSOR_FIXTURES_H

#include "tapegrad/tensor.h"

/* An out-parameter's value before a call that must leave it unchanged. */
#define SENTINEL ((tg_tensor *)0x1)

/* A transposed (last two dims swapped) view of a contiguous 2-d tensor. */
tg_tensor *transposed(tg_tensor *t);

#endif
