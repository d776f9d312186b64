/* tests/softmax_fixtures.h - the golden lookup and tolerances
 * shared by test_softmax.c and test_nll_loss.c (softmax_fixtures.c). */
#ifndef TG_TESTS_SOFTMAX_FIXTURES_H
#define TG_TESTS_SOFTMAX_FIXTURES_H

#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

/* The tolerance of a dtype against torch, relative to the largest value. */
double tol_of(tg_dtype dt);
/* A copy of t that requires grad. */
tg_tensor *leaf_clone(const tg_tensor *t);
/* The tensor of f at the key fmt makes of a, b and c (borrowed; asserts
 * that it is there). */
tg_tensor *golden(const tg_st_file *f, const char *fmt, const char *a, const char *b,
                  const char *c);

#endif
