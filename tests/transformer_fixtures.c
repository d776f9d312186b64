/* tests/transformer_fixtures.c - see transformer_fixtures.h. */
#include "transformer_fixtures.h"

#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdio.h>
#include <string.h>

#include "helpers.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

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

tg_module *th_decoder_layer(const th_tf_cfg *c, int64_t d, int64_t ff, tg_rng *rng)
{
    tg_nn_transformer_decoder_layer_opts o = TG_NN_TRANSFORMER_DECODER_LAYER_OPTS_INIT;
    o.dim_feedforward = ff;
    o.dropout = c->dropout;
    o.activation = c->gelu ? TG_ACT_GELU : TG_ACT_RELU;
    o.batch_first = c->bf;
    o.norm_first = c->nf;
    o.seed = c->seed;
    tg_module *m = NULL;
    OK(tg_nn_transformer_decoder_layer_new(&m, d, 2, &o, rng));
    return m;
}

tg_module *th_encoder_layer(const th_tf_cfg *c, int64_t d, int64_t ff, tg_rng *rng)
{
    tg_nn_transformer_encoder_layer_opts o = TG_NN_TRANSFORMER_ENCODER_LAYER_OPTS_INIT;
    o.dim_feedforward = ff;
    o.dropout = c->dropout;
    o.activation = c->gelu ? TG_ACT_GELU : TG_ACT_RELU;
    o.batch_first = c->bf;
    o.norm_first = c->nf;
    o.seed = c->seed;
    tg_module *m = NULL;
    OK(tg_nn_transformer_encoder_layer_new(&m, d, 2, &o, rng));
    return m;
}

tg_module *th_transformer_make(const char *kind, const th_tf_cfg *c, int64_t d, int64_t ff)
{
    tg_rng rng;
    tg_rng_init(&rng, 1);
    tg_module *m = NULL, *norm = NULL;
    if (!strcmp(kind, "tdl")) return th_decoder_layer(c, d, ff, &rng);
    if (!strcmp(kind, "tf")) {
        tg_nn_transformer_opts o = TG_NN_TRANSFORMER_OPTS_INIT;
        o.num_encoder_layers = c->layers;
        o.num_decoder_layers = c->dec_layers;
        o.dim_feedforward = ff;
        o.dropout = c->dropout;
        o.activation = c->gelu ? TG_ACT_GELU : TG_ACT_RELU;
        o.batch_first = c->bf;
        o.norm_first = c->nf;
        o.seed = c->seed;
        OK(tg_nn_transformer_new(&m, d, 2, &o, &rng));
        return m;
    }
    if (c->norm) OK(tg_nn_layer_norm_new(&norm, 1, &d, 1e-5, true));
    tg_module *layer;
    if (!strcmp(kind, "enc")) {
        layer = th_encoder_layer(c, d, ff, &rng);
        OK(tg_nn_transformer_encoder_new(&m, layer, c->layers, norm));
    } else {
        layer = th_decoder_layer(c, d, ff, &rng);
        OK(tg_nn_transformer_decoder_new(&m, layer, c->layers, norm));
    }
    tg_module_release(layer);
    tg_module_release(norm);
    return m;
}

tg_module *th_golden_transformer(const tg_st_file *f, const char *c, bool *f64)
{
    th_tf_cfg k = {.dropout = 0.1};
    cr_assert(eq(int, sscanf(th_golden_meta(f, c, "cfg"), "%d %d %d %d %d %d %d", &k.bf, &k.nf,
                             &k.gelu, &k.unb, &k.norm, &k.layers, &k.dec_layers), 7));
    *f64 = !strcmp(th_golden_meta(f, c, "dtype"), "f64");
    tg_module *m = th_transformer_make(th_golden_meta(f, c, "kind"), &k, 8, 16);
    tg_module_train(m, false);
    OK(tg_module_to_dtype(m, *f64 ? TG_F64 : TG_F32));
    th_expect_state_keys(m, th_golden_meta(f, c, "params"));
    char prefix[32];
    snprintf(prefix, sizeof prefix, "%s.p", c);
    OK(tg_module_load_state_dict(m, f, prefix, true));
    return m;
}

tg_tensor *th_golden_opt(const tg_st_file *f, const char *c, const char *what)
{
    char key[64];
    snprintf(key, sizeof key, "%s.%s", c, what);
    return tg_st_get(f, key);
}
