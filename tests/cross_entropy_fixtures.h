/* tests/cross_entropy_fixtures.h - shared by test_cross_entropy_rows.c and
 * test_cross_entropy_spatial.c (cross_entropy_fixtures.c). */
#ifndef TAPEGRAD_TESTS_CROSS_ENTROPY_FIXTURES_H
#define TAPEGRAD_TESTS_CROSS_ENTROPY_FIXTURES_H

#include <stdbool.h>
#include <stdint.h>

#include "tapegrad/tapegrad.h"

/* mean, sum, none: the reductions in the order the tests index them. */
extern const char *const RED_NAMES[3];
extern const tg_reduction REDS[3];

/* Whether y's tape names op (tg_tape_print). */
bool tape_has(const tg_tensor *y, const char *op);

/* Logits of shape (ndim, shape) of dtype dt (f32 or f64), U[-4, 4)
 * (seed), contiguous or (last) a channels-last view: the class dim 1 moved
 * from the last dim of a contiguous tensor (for (N, C), the transpose of a
 * (C, N) one); requiring grad.  With special, three elements of distinct
 * rows (at flat positions 1, numel / 2, numel - 1 of the contiguous base)
 * are -inf, +inf and NaN. */
tg_tensor *logits(tg_dtype dt, int ndim, const int64_t *shape, bool last, bool special,
                  uint64_t seed);

/* Targets of x's shape without dim 1: k * 7 % C for flat index k, every
 * third one ignore when ignore >= 0 (a class, so that it also counts as
 * one where not ignored). */
tg_tensor *targets(int ndim, const int64_t *shape, int64_t ignore);

/* The value and x's gradient (for an upstream gy of the loss's shape and
 * x's dtype) of cross_entropy (one op) and of log_softmax followed by
 * nll_loss, reduction REDS[r]: the same bits. */
void expect_as_composition(const char *what, tg_tensor *x, tg_tensor *t, tg_tensor *w,
                           int64_t ignore, int r);

/* expect_as_composition for every case of one dtype and shape (ndim
 * dims): both layouts, with and without special values, without and with
 * an ignore_index, each reduction, without and with weights, 1 and 2
 * threads.  Returns the count checked (96). */
int expect_cases_as_composition(tg_dtype dt, int ndim, const int64_t *shape, uint64_t seed);
/* The same for shapes[s] of ndims[s] dims (unused extents 0), seed + s,
 * s < n; the thread count restored after.  Returns the count checked. */
int expect_shapes_as_composition(tg_dtype dt, int n, const int *ndims,
                                 const int64_t (*shapes)[4], uint64_t seed);

/* Of a loss y of x: *g1 the gradient of 0.75 y (create_graph) and *g2 the
 * gradient of sum(g1 * v), both new tensors. */
void grads_to_second_order(tg_tensor *y, tg_tensor *x, tg_tensor *v, tg_tensor **g1,
                           tg_tensor **g2);
/* With ignore_index 2 and each reduction, the gradient of the one op's
 * loss (for an upstream 0.75) built with create_graph, and the gradient of
 * sum(that gradient * v), against the composition's: the same bits. */
void expect_second_derivative_as_composition(tg_tensor *x, tg_tensor *t, tg_tensor *w,
                                             tg_tensor *v);

#endif
