/* tests/transformer_fixtures.c - see transformer_fixtures.h. */
#include "transformer_fixtures.h"

#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdio.h>
#include <string.h>

#include "helpers.h"

tg_module *th_golden_encoder_layer(const tg_st_file *f, const char *c, bool *f64)
{
    int bf = 0, nf = 0, gelu = 0, unb = 0;
    cr_assert(eq(int, sscanf(th_golden_meta(f, c, "cfg"), "%d %d %d %d", &bf, &nf, &gelu, &unb),
                 4));
    *f64 = !strcmp(th_golden_meta(f, c, "dtype"), "f64");
    tg_nn_transformer_encoder_layer_opts o = TG_NN_TRANSFORMER_ENCODER_LAYER_OPTS_INIT;
    o.dim_feedforward = 16;
    o.dropout = 0.0;
    o.activation = gelu ? TG_ACT_GELU : TG_ACT_RELU;
    o.batch_first = bf;
    o.norm_first = nf;
    tg_rng rng;
    tg_rng_init(&rng, 1);
    tg_module *m = NULL;
    cr_assert(eq(int, tg_nn_transformer_encoder_layer_new(&m, 8, 2, &o, &rng), TG_OK), "%s: %s",
              c, tg_error_message());
    cr_assert(eq(int, tg_module_to_dtype(m, *f64 ? TG_F64 : TG_F32), TG_OK), "%s: %s", c,
              tg_error_message());
    char prefix[32];
    snprintf(prefix, sizeof prefix, "%s.p", c);
    cr_assert(eq(int, tg_module_load_state_dict(m, f, prefix, true), TG_OK), "%s: %s", c,
              tg_error_message());
    return m;
}
