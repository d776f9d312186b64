/* tests/quant_model_fixtures.h - the random tensors and the small model
 * shared by test_quant_model.c and test_quant_model_fold.c
 * (quant_model_fixtures.c). */
#ifndef TG_TESTS_QUANT_MODEL_FIXTURES_H
#define TG_TESTS_QUANT_MODEL_FIXTURES_H

#include <stdint.h>

#include "tapegrad/nn.h"
#include "tapegrad/tensor.h"

/* The next draw of rng's seed word, used as a xorshift64 state. */
uint64_t xorshift(tg_rng *rng);
/* Uniform in [lo, hi); integer dtypes get floor() of it. */
tg_tensor *rnd_tensor(tg_dtype dt, int nd, const int64_t *shape, tg_rng *rng, double lo,
                      double hi);
/* Net{net: Linear(8, 32) -> Unflatten(8, 2, 2) -> ReLU -> ConvTranspose2d(8, 6, 4, 2, 1,
 * groups 2) -> BatchNorm2d(6) -> ReLU -> Conv2d(6, 3, 3, padding 1)}; output (N, 3, 4, 4). */
tg_module *small_model(tg_rng *rng);

#endif
