/* tests/attention_fixtures.h - shared by test_attention_fast.c,
 * test_attention_fast_half.c and test_mha_fast_half.c
 * (attention_fixtures.c). */
#ifndef TAPEGRAD_TESTS_ATTENTION_FIXTURES_H
#define TAPEGRAD_TESTS_ATTENTION_FIXTURES_H

#include <stdbool.h>
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

/* A case of scaled dot-product attention: q (lead..., L, E), k (lead...,
 * S, E), v (lead..., S, Ev), nd dims, and a mask of kind `mask`. */
typedef struct sdpa_case {
    int nd;
    int64_t lead[2], L, S, E, Ev;
    int mask;
} sdpa_case;

/* The cases of test_attention_fast.c (and the first of
 * test_attention_fast_half.c's): ranks 2 to 4, L != S, L > S (the first
 * rows fully masked), every mask kind, many query blocks, and one row per
 * block (S = 33000). */
#define SDPA_CASES                                                              \
    {2, {1, 1}, 5, 7, 3, 4, M_NONE}, {2, {1, 1}, 5, 7, 3, 4, M_U8},             \
        {2, {1, 1}, 1, 1, 1, 1, M_NONE}, {3, {6, 1}, 9, 13, 8, 5, M_FLOAT},     \
        {3, {6, 1}, 9, 13, 8, 5, M_PAD_U8}, {3, {4, 1}, 13, 9, 8, 8, M_CAUSAL}, \
        {4, {3, 4}, 70, 130, 16, 16, M_CAUSAL},                                 \
        {4, {3, 4}, 70, 130, 16, 24, M_FULL}, {4, {2, 2}, 150, 40, 32, 8, M_PAD_U8}, \
        {3, {1, 1}, 3, 33000, 2, 3, M_FLOAT}

/* The scores' shape of case c: (lead..., L, S), c->nd entries. */
void case_scores_shape(const sdpa_case *c, int64_t sc[4]);

/* Case c's q, k and v in dtype dt, at random from *seed (new), and its mask
 * in o (o initialised; o->attn_mask new or NULL). */
void case_inputs(const sdpa_case *c, tg_dtype dt, uint64_t *seed, tg_tensor **q, tg_tensor **k,
                 tg_tensor **v, tg_attention_opts *o);

/* tg_scaled_dot_product_attention(q, k, v, o) on the fused path (fast) or,
 * with TG_ATTENTION_FAST=0, the taped one (new); *took: the fused kernel
 * ran. */
tg_tensor *sdpa(bool fast, tg_tensor *q, tg_tensor *k, tg_tensor *v, const tg_attention_opts *o,
                bool *took);

/* Every element: NaN where want is NaN, else |got - want| <= tol (|want| +
 * max |want|); returns the elements whose bits differ. */
int64_t expect_close(const char *what, const tg_tensor *got, const tg_tensor *want, double tol);

#endif
