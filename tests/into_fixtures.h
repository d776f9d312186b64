/* tests/into_fixtures.h - the harness of test_backward_into.c and
 * test_backward_into_ops.c: x's gradient through an op with a
 * backward_into, from a plain backward (the into path), a watched one and
 * one with create_graph (the op's backward and the engine's sum), which
 * must give the same bits. */
#ifndef TAPEGRAD_TESTS_INTO_FIXTURES_H
#define TAPEGRAD_TESTS_INTO_FIXTURES_H

#include <stdint.h>

#include "tapegrad/tapegrad.h"

/* How th_into_grad runs the backward. */
typedef enum th_into_mode { TH_INTO_PLAIN, TH_INTO_WATCHED, TH_INTO_CREATE_GRAPH } th_into_mode;

/* One op under test: x (ndim, shape) of U[-1, 1) values from seed, and
 * pick(kind, y, k), the op applied to y for pick k (0..2), a new reference.
 * The picks' results are weighted by U[wlo, whi) before they are summed. */
typedef struct th_into_case {
    int kind;
    int ndim;
    const int64_t *shape;
    uint64_t seed;
    double wlo, whi;
    tg_tensor *(*pick)(int kind, tg_tensor *y, int k);
} th_into_case;

/* sum(p' * w), p' p transposed (first and last dims, for 2-d p or more, so
 * that p's gradient is not contiguous) and w drawn from seed in c's range:
 * a new 0-d reference. */
tg_tensor *th_into_weighted(const th_into_case *c, tg_tensor *p, uint64_t seed);

/* x's gradient (a new, detached reference) in dtype dt from three picks of
 * y = x * 1.5 and a slice of y (so the pending sum is not zeros), by a
 * backward of mode md. */
tg_tensor *th_into_grad(const th_into_case *c, tg_dtype dt, th_into_mode md);

/* For f64, f32, f16 and bf16: the plain backward's gradient has the bits of
 * the watched and create_graph ones, and is not all zeros. */
void th_into_same_bits(const th_into_case *c, const char *name);

#endif
