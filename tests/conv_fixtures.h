/* tests/conv_fixtures.h - the random inputs and the cases shared by
 * test_conv.c and test_conv_grad.c (conv_fixtures.c). */
#ifndef TG_TESTS_CONV_FIXTURES_H
#define TG_TESTS_CONV_FIXTURES_H

#include <stdbool.h>
#include <stdint.h>

#include "tapegrad/conv.h"
#include "tapegrad/tensor.h"

/* The state of the tests' random draws (th_uniform_pm1, th_rand_tensor);
 * each test starts from the same value: Criterion runs every test in a
 * fresh process. */
extern uint64_t rng_state;

/* A new tensor of uniform draws in [-1, 1). */
tg_tensor *mk_rand(tg_dtype dt, int nd, const int64_t *shape);

/* A convolution of nsp spatial axes: batch B, channels cin -> cout in
 * groups, input extents S, kernel extents K, and whether it has a bias. */
typedef struct ccase {
    int nsp;
    int64_t B, cin, cout, groups;
    int64_t S[3], K[3];
    tg_conv_params p;
    bool bias;
} ccase;

/* A case's tensors (x, w, and b when the case has a bias) and the output's
 * spatial extents; ok is false when the case has no valid output size. */
typedef struct built { tg_tensor *x, *w, *b; int64_t out_sp[3]; bool ok; } built;

/* Random tensors of dtype dt for case c, as conv (transpose false) or
 * conv_transpose (true) take them. */
built build(const ccase *c, bool transpose, tg_dtype dt);
/* Releases r's tensors. */
void unbuild(built *r);

#endif
