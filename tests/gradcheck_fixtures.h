/* tests/gradcheck_fixtures.h - the inputs, the correct functions and the
 * test-only ops with wrong backwards shared by test_gradcheck.c and
 * test_gradcheck_fast.c (gradcheck_fixtures.c). */
#ifndef TG_TESTS_GRADCHECK_FIXTURES_H
#define TG_TESTS_GRADCHECK_FIXTURES_H

#include <stdbool.h>
#include <stdint.h>

#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

/* The shapes (2, 3) and (3, 4). */
extern const int64_t S23[2], S34[2];

/* A new tensor of uniform draws in [-1, 1) from seed, named name, that
 * requires grad when rg. */
tg_tensor *make(tg_dtype dt, int ndim, const int64_t *shape, uint64_t seed,
                const char *name, bool rg);

/* tanh(in[0] * in[1]) and in[0] @ in[1]: correct ops (tg_gradcheck's fn). */
int f_tanh_mul(tg_tensor **out, int n, tg_tensor *const *in, void *user);
int f_matmul(tg_tensor **out, int n, tg_tensor *const *in, void *user);

/* x * w through a test-only op whose w-gradient is half what it should
 * be. */
int f_badmul(tg_tensor **out, int n, tg_tensor *const *in, void *user);

/* A test-only op y = a x whose backward is k g + delta sum(g): its analytic
 * Jacobian is k I + delta (all ones) where the numeric one is a I. */
typedef struct lin_params {
    double a, k, delta;
} lin_params;

/* y = a x through a test-only op with that backward; user is a lin_params. */
int f_lin(tg_tensor **out, int n, tg_tensor *const *in, void *user);

#endif
