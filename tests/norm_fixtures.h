/* tests/norm_fixtures.h - the per-channel vectors and the comparison with a
 * reference shared by test_norm.c and test_norm_grad.c, and the arguments
 * of the bits-against-bits batch_norm runs of test_norm_half.c and
 * test_norm_simd.c (norm_fixtures.c). */
#ifndef TG_TESTS_NORM_FIXTURES_H
#define TG_TESTS_NORM_FIXTURES_H

#include <stdbool.h>
#include <stdint.h>

#include "tapegrad/tensor.h"

/* A new 1-d tensor of c values of dtype dt, uniform in [lo, hi), drawn from
 * tg_rng seeded with seed (th_rand_uniform). */
tg_tensor *vec(tg_dtype dt, int64_t c, uint64_t seed, double lo, double hi);

/* Fails unless each element i of t lies within tol * (1 + |want[i]|) of
 * want[i]; what names t in the message. */
void expect_close(const tg_tensor *t, const double *want, double tol, const char *what);

/* The arguments of a batch_norm of x (C = dim 1), drawn the same in every
 * run: the f32 running buffers rm and rv, the f32 weight and bias when
 * affine (else NULL; requiring grad), and leaf, x detached and requiring
 * grad.  The caller releases them (bn_args_release: all but rm and rv,
 * which batch_norm's outputs hold). */
typedef struct bn_args {
    tg_tensor *leaf, *rm, *rv, *w, *b;
} bn_args;
bn_args bn_args_of(tg_tensor *x, bool affine);
void bn_args_release(bn_args *a);

#endif
