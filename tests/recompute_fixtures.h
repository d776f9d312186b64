/* tests/recompute_fixtures.h - the blocks, inputs and gradient comparison
 * shared by test_recompute.c and test_recompute_refusals.c
 * (recompute_fixtures.c). */
#ifndef TG_TESTS_RECOMPUTE_FIXTURES_H
#define TG_TESTS_RECOMPUTE_FIXTURES_H

#include <stdbool.h>
#include <stdint.h>

#include "tapegrad/tapegrad.h"

#define OK(expr) cr_assert(eq(int, (expr), TG_OK), "%s: %s", #expr, tg_error_message())

/* Appends *m, made by a constructor that returned rc (*m is read after the
 * call that set it). */
void append(tg_module *seq, int rc, tg_module **m);
/* depth x (Linear(width, width), tanh) */
tg_module *mlp(int depth, int64_t width, uint64_t seed);
/* A new f32 tensor of the shape, drawn from N(0, 1) with seed. */
tg_tensor *randn(int ndim, const int64_t *shape, uint64_t seed, bool requires_grad);
/* A contiguous copy of t's .grad, or NULL. */
tg_tensor *grad_copy(const tg_tensor *t);
/* a and b are present, of one shape, and equal bit for bit. */
void expect_same_bits(const tg_tensor *a, const tg_tensor *b, const char *what);

#endif
