/* tests/autograd_fixtures.h - the inputs and expression that the autograd
 * engine's tests share: test_autograd.c, test_autograd_hooks.c and
 * test_autograd_lifetime.c (autograd_fixtures.c). */
#ifndef TG_TESTS_AUTOGRAD_FIXTURES_H
#define TG_TESTS_AUTOGRAD_FIXTURES_H

#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

/* x's and w's values. */
extern const double X[3], W[3];

/* y = sum(x * w + x) */
tg_tensor *expr1(tg_tensor *x, tg_tensor *w);

#endif
