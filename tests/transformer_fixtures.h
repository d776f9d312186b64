/* tests/transformer_fixtures.h - the Transformer modules of the golden
 * cases and of the tests, shared by test_transformer.c,
 * test_transformer_stack.c, test_encoder_fast.c and test_decoder_fast.c
 * (transformer_fixtures.c). */
#ifndef TG_TESTS_TRANSFORMER_FIXTURES_H
#define TG_TESTS_TRANSFORMER_FIXTURES_H

#include <stdbool.h>
#include <stdint.h>

#include "tapegrad/tapegrad.h"

/* The layer of case c ("tel<i>") of attention.safetensors
 * (scripts/make_attention_goldens.py): E = 8, 2 heads, dim_feedforward 16,
 * dropout 0, the case's batch_first, norm_first and activation (its "cfg"),
 * in its dtype (*f64 says which), with its parameters ("<c>.p..."); a new
 * module, in training mode as made.  Asserts on any failure. */
tg_module *th_golden_encoder_layer(const tg_st_file *f, const char *c, bool *f64);

/* A Transformer module's configuration, as the "cfg" metadata of
 * transformer.safetensors (scripts/make_transformer_goldens.py) gives it,
 * plus its dropout and seed. */
typedef struct th_tf_cfg {
    int bf, nf, gelu, unb, norm, layers, dec_layers;
    double dropout;
    uint64_t seed;
} th_tf_cfg;

/* A TransformerDecoderLayer or TransformerEncoderLayer of c (d_model d,
 * nhead 2, dim_feedforward ff) drawn from rng; a new module.  Asserts on
 * failure. */
tg_module *th_decoder_layer(const th_tf_cfg *c, int64_t d, int64_t ff, tg_rng *rng);
tg_module *th_encoder_layer(const th_tf_cfg *c, int64_t d, int64_t ff, tg_rng *rng);
/* A module of kind "tdl" (TransformerDecoderLayer), "enc"
 * (TransformerEncoder), "dec" (TransformerDecoder) or "tf" (Transformer)
 * of c with d_model d, nhead 2; a new module in training mode.  Asserts on
 * failure. */
tg_module *th_transformer_make(const char *kind, const th_tf_cfg *c, int64_t d, int64_t ff);
/* The module of case c ("case<i>") of transformer.safetensors: its kind
 * and cfg, d_model 8, dim_feedforward 16, dropout 0.1, in eval, in the
 * case's dtype (*f64 says which), its state-dict keys checked and its
 * parameters loaded; a new module.  Asserts on failure. */
tg_module *th_golden_transformer(const tg_st_file *f, const char *c, bool *f64);
/* Tensor "<c>.<what>" of f (borrowed), or NULL when f has none. */
tg_tensor *th_golden_opt(const tg_st_file *f, const char *c, const char *what);

#endif
