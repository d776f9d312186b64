/* tests/norm_fixtures.h - the per-channel vectors and the comparison with a
 * reference shared by test_norm.c and test_norm_grad.c (norm_fixtures.c). */
#ifndef TG_TESTS_NORM_FIXTURES_H
#define TG_TESTS_NORM_FIXTURES_H

#include <stdint.h>

#include "tapegrad/tensor.h"

/* A new 1-d tensor of c values of dtype dt, uniform in [lo, hi), drawn from
 * tg_rng seeded with seed (th_rand_uniform). */
tg_tensor *vec(tg_dtype dt, int64_t c, uint64_t seed, double lo, double hi);

/* Fails unless each element i of t lies within tol * (1 + |want[i]|) of
 * want[i]; what names t in the message. */
void expect_close(const tg_tensor *t, const double *want, double tol, const char *what);

#endif
