/* tests/attention_half_fixtures.h - shared by test_attention_fast_half.c and
 * test_mha_fast_half.c (attention_half_fixtures.c). */
#ifndef TAPEGRAD_TESTS_ATTENTION_HALF_FIXTURES_H
#define TAPEGRAD_TESTS_ATTENTION_HALF_FIXTURES_H

#include <stdint.h>

#include "tapegrad/tapegrad.h"

/* The unit roundoff of a half dtype: 2^-8 for bf16, 2^-11 for f16. */
double unit_of(tg_dtype dt);

/* Mask kinds of a case. */
enum { M_NONE, M_U8, M_FLOAT, M_CAUSAL, M_PAD_U8, M_FULL };

/* The mask of kind `kind` for scores (lead..., L, S) of nd dims (new; NULL
 * for M_NONE): u8 at random, float at random, a causal one of dtype dt, a
 * u8 key padding mask (lead0, 1, ..., S), or a float one of the scores'
 * shape. */
tg_tensor *make_mask(int kind, tg_dtype dt, int nd, const int64_t *sc, uint64_t *seed);

/* Every element: NaN where want is NaN, else |got - want| <= tol (|want| +
 * max |want|); returns the elements whose bits differ. */
int64_t expect_close(const char *what, const tg_tensor *got, const tg_tensor *want, double tol);

#endif
