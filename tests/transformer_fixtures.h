/* tests/transformer_fixtures.h - the TransformerEncoderLayer of a golden
 * case, shared by test_transformer.c and test_encoder_fast.c
 * (transformer_fixtures.c). */
#ifndef TG_TESTS_TRANSFORMER_FIXTURES_H
#define TG_TESTS_TRANSFORMER_FIXTURES_H

#include <stdbool.h>

#include "tapegrad/tapegrad.h"

/* The layer of case c ("tel<i>") of attention.safetensors
 * (scripts/make_attention_goldens.py): E = 8, 2 heads, dim_feedforward 16,
 * dropout 0, the case's batch_first, norm_first and activation (its "cfg"),
 * in its dtype (*f64 says which), with its parameters ("<c>.p..."); a new
 * module, in training mode as made.  Asserts on any failure. */
tg_module *th_golden_encoder_layer(const tg_st_file *f, const char *c, bool *f64);

#endif
