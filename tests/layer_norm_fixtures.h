/* tests/layer_norm_fixtures.h - the cases and their inputs
 * shared by test_layer_norm.c and test_layer_norm_grad.c
 * (layer_norm_fixtures.c). */
#ifndef TG_TESTS_LAYER_NORM_FIXTURES_H
#define TG_TESTS_LAYER_NORM_FIXTURES_H

#include <stdbool.h>
#include <stdint.h>

#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

/* A golden case: its tensors (borrowed from the file) and parameters. */
typedef struct ln_case {
    bool group;
    int n_norm;
    int64_t norm_shape[TG_MAX_DIMS], groups;
    double eps;
    tg_tensor *x, *w, *b, *gy;
} ln_case;

/* Case c's op (group_norm or layer_norm) of x, w and b into *y; its status. */
int run_case(tg_tensor **y, const ln_case *c, tg_tensor *x, tg_tensor *w, tg_tensor *b);

/* A case on a fresh f64 x (shape xs) with weight and bias of the affine
 * shape when w / b (any non-NULL marker). */
ln_case make_case(bool group, int nd, const int64_t *xs, int n_norm, int64_t groups,
                  bool w, bool b);

/* A new tensor of dtype dt and c's affine shape (C for group norm, the
 * normalized shape for layer norm), uniform in [lo, hi), from seed. */
tg_tensor *affine_tensor(const ln_case *c, int nd, const int64_t *xs, uint64_t seed,
                         double lo, double hi, tg_dtype dt);

#endif
