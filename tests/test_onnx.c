/* tests/test_onnx.c - tg_onnx_export, checked by parts that tapegrad did
 * not write: every exported file passes onnx's checker (tests/onnx/check.py,
 * python3-onnx; it also checks the initializers and nodes a case lists) and
 * ONNX Runtime (onnxruntime-node, tests/onnx/run.mjs)
 * computes tapegrad's outputs from it: within 1e-5 of the largest output
 * magnitude in f32, within the output's quantization step for int8.
 *
 * This file: Linear, BatchNorm, activations and reshapes in one model,
 * Embedding models on integer indices, the
 * DCGAN generator with its state_dict names, the refused modules and
 * options, training flags and state left as they were, `tapegrad export
 * --onnx` against torch.onnx.export, the dcgan example's export, and a
 * build without ONNX support.  The conv sweep and padding modes are in
 * test_onnx_conv.c, the int8 (QDQ) models in test_onnx_int8.c, pooling,
 * upsampling and normalisation in test_onnx_resample.c.
 *
 * Each case writes <name>.onnx, the input and tapegrad's output (raw f32)
 * and <name>.json (shapes, tolerances, the expected initializer names,
 * ONNX Runtime's optimization level) into the test's temporary folder; the
 * two scripts then run over the folder (onnx_cases.h). */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dcgan/model.h"
#include "helpers.h"
#include "onnx_cases.h"
#include "tapegrad/tapegrad.h"

TestSuite(onnx, .init = onnx_setup, .fini = th_tmp_dir_remove);

/* ---- the other modules ---- */

/* Sets a BatchNorm's running statistics to values away from (0, 1). */
static void set_running_stats(tg_module *bn, uint64_t seed)
{
    tg_tensor *mean = tg_module_find(bn, "running_mean"), *var = tg_module_find(bn, "running_var");
    uint64_t s = seed;
    for (int64_t i = 0; i < tg_tensor_numel(mean); i++) {
        tg_tensor_set_flat(mean, i, 0.3 * th_uniform_pm1(&s));
        tg_tensor_set_flat(var, i, 0.5 + 0.4 * th_uniform_pm1(&s));
    }
}

/* Flatten -> Linear -> BatchNorm1d -> gelu -> Linear -> Unflatten ->
 * BatchNorm2d (no affine) -> sigmoid -> Dropout -> Flatten(2, 3) ->
 * leaky_relu -> Linear on a 3-d input (MatMul) -> silu -> tanh -> Identity. */
static tg_module *mixed_model(tg_rng *rng)
{
    tg_module *seq = NULL, *m = NULL;
    cr_assert(tg_nn_sequential_new(&seq) == TG_OK);
    cr_assert(tg_nn_flatten_new(&m, 1, -1) == TG_OK);
    append(seq, m);                                                        /* 0 */
    cr_assert(tg_nn_linear_new(&m, 12, 24, true, rng) == TG_OK);
    append(seq, m);                                                        /* 1 */
    cr_assert(tg_nn_batchnorm_new(&m, 0, 24, 1e-3, 0.1, true, true) == TG_OK);
    set_running_stats(m, 5);
    append(seq, m);                                                        /* 2 */
    append(seq, act(TG_ACT_GELU, 0));                                      /* 3 */
    cr_assert(tg_nn_linear_new(&m, 24, 24, false, rng) == TG_OK);
    append(seq, m);                                                        /* 4 */
    cr_assert(tg_nn_unflatten_new(&m, 1, 3, (const int64_t[]){2, 3, 4}) == TG_OK);
    append(seq, m);                                                        /* 5 */
    cr_assert(tg_nn_batchnorm_new(&m, 2, 2, 1e-5, 0.1, false, true) == TG_OK);
    set_running_stats(m, 6);
    append(seq, m);                                                        /* 6 */
    append(seq, act(TG_ACT_SIGMOID, 0));                                   /* 7 */
    cr_assert(tg_nn_dropout_new(&m, 0.5, 1) == TG_OK);
    append(seq, m);                                                        /* 8 */
    cr_assert(tg_nn_flatten_new(&m, 2, 3) == TG_OK);
    append(seq, m);                                                        /* 9: (N, 2, 12) */
    append(seq, act(TG_ACT_LEAKY_RELU, 0.3));                              /* 10 */
    cr_assert(tg_nn_linear_new(&m, 12, 5, true, rng) == TG_OK);
    append(seq, m);                                                        /* 11 */
    append(seq, act(TG_ACT_SILU, 0));                                      /* 12 */
    append(seq, act(TG_ACT_TANH, 0));                                      /* 13 */
    append(seq, act(TG_ACT_NONE, 0));                                      /* 14 */
    return seq;
}

Test(onnx, linear_batchnorm_activations_and_reshapes_match_onnxruntime)
{
    need_onnx();
    tg_rng rng;
    tg_rng_init(&rng, 7);
    tg_module *m = mixed_model(&rng);
    tg_tensor *x = th_rand_uniform(TG_F32, 3, (const int64_t[]){3, 3, 4}, 11);
    tg_onnx_options o = TG_ONNX_OPTIONS_INIT;
    o.dynamic_batch = true;
    write_case("mixed", m, x, 1e-5, 0, NULL, &o);
    /* a leaf alone, and the identity model (one Identity node) */
    tg_module *relu = act(TG_ACT_RELU, 0), *id = act(TG_ACT_NONE, 0);
    write_case("relu_alone", relu, x, 1e-5, 0, (const char *const[]){NULL}, NULL);
    write_case("identity_alone", id, x, 1e-5, 0, (const char *const[]){NULL}, NULL);
    /* ELU (Elu with its alpha); PReLU (PRelu, its slope under the weight's
     * name): one weight per channel of an image, of either sign, and one
     * weight for all */
    tg_module *pc = NULL, *p1 = NULL, *elu = NULL;
    cr_assert(tg_nn_elu_new(&elu, 0.75) == TG_OK);
    case_graph = "\"ops\": [\"Elu\"], \"attributes\": {\"Elu\": {\"alpha\": 0.75}}";
    write_case("elu", elu, x, 1e-6, 1e-7, (const char *const[]){NULL}, NULL);
    cr_assert(tg_nn_prelu_new(&pc, 3, 0.25) == TG_OK);
    cr_assert(tg_nn_prelu_new(&p1, 1, 0.1) == TG_OK);
    for (int i = 0; i < 3; i++) tg_tensor_set_flat(tg_module_find(pc, "weight"), i, 0.4 * i - 0.5);
    uint64_t s = 13;
    tg_tensor *xi = th_rand_tensor(&s, TG_F32, 4, (const int64_t[]){2, 3, 4, 5}, -2, 2);
    case_graph = "\"ops\": [\"PRelu\"]";
    write_case("prelu_channels", pc, xi, 0, 0, (const char *const[]){"weight", NULL}, NULL);
    case_graph = "\"ops\": [\"PRelu\"]";
    write_case("prelu_one", p1, x, 0, 0, (const char *const[]){"weight", NULL}, NULL);
    /* Hardtanh and ReLU6 (Clip, the bounds as initializers), Hardsigmoid
     * (HardSigmoid, alpha 1/6, beta 1/2), Hardswish (HardSwish), Mish
     * (opset 17 has none: x * Tanh(Softplus(x))), on x in [-5, 5] */
    tg_module *ht = NULL, *r6 = NULL, *hs = NULL, *hw = NULL, *mi = NULL;
    cr_assert(tg_nn_hardtanh_new(&ht, -0.5, 2) == TG_OK);
    cr_assert(tg_nn_relu6_new(&r6) == TG_OK);
    cr_assert(tg_nn_hardsigmoid_new(&hs) == TG_OK);
    cr_assert(tg_nn_hardswish_new(&hw) == TG_OK);
    cr_assert(tg_nn_mish_new(&mi) == TG_OK);
    tg_tensor *xw = th_rand_tensor(&s, TG_F32, 3, (const int64_t[]){3, 3, 4}, -5, 5);
    case_graph = "\"ops\": [\"Clip\"], \"initializer_values\": {\"/min\": [-0.5], "
                 "\"/max\": [2.0]}";
    write_case("hardtanh", ht, xw, 0, 0, NULL, NULL);
    case_graph = "\"ops\": [\"Clip\"], \"initializer_values\": {\"/min\": [0.0], "
                 "\"/max\": [6.0]}";
    write_case("relu6", r6, xw, 0, 0, NULL, NULL);
    case_graph = "\"ops\": [\"HardSigmoid\"], \"attributes\": {\"HardSigmoid\": "
                 "{\"beta\": 0.5}}";
    write_case("hardsigmoid", hs, xw, 1e-6, 1e-7, (const char *const[]){NULL}, NULL);
    case_graph = "\"ops\": [\"HardSwish\"]";
    write_case("hardswish", hw, xw, 1e-6, 1e-7, (const char *const[]){NULL}, NULL);
    case_graph = "\"ops\": [\"Softplus\", \"Tanh\", \"Mul\"]";
    write_case("mish", mi, xw, 1e-6, 1e-7, (const char *const[]){NULL}, NULL);
    check_cases();
    tg_module *mods[] = {ht, r6, hs, hw, mi};
    for (int i = 0; i < 5; i++) tg_module_release(mods[i]);
    tg_tensor_release(xw);
    tg_module_release(pc);
    tg_module_release(p1);
    tg_module_release(elu);
    tg_tensor_release(xi);
    tg_module_release(relu);
    tg_module_release(id);
    tg_module_release(m);
    tg_tensor_release(x);
}

/* ---- the DCGAN generator ---- */

static const char *const generator_inits[] = {
    "net.0.weight", "net.2.weight", "net.2.bias", "net.2.running_mean", "net.2.running_var",
    "net.4.weight", "net.5.weight", "net.5.bias", "net.5.running_mean", "net.5.running_var",
    "net.7.weight", "net.7.bias", "/net/1/shape", NULL};

Test(onnx, dcgan_generator_matches_onnxruntime_with_state_dict_names)
{
    need_onnx();
    tg_module *g = dcgan_generator();
    tg_tensor *z = th_rand_uniform(TG_F32, 2, (const int64_t[]){4, 16}, 9);
    tg_onnx_options o = TG_ONNX_OPTIONS_INIT;
    o.dynamic_batch = true;
    write_case("dcgan_generator", g, z, 1e-5, 0, generator_inits, &o);
    check_cases();
    tg_module_release(g);
    tg_tensor_release(z);
}

/* An averaged generator (an EMA, as dcgan --ema keeps) exports as its copy,
 * the initializers under torch's AveragedModel names (module.<name>). */
Test(onnx, averaged_generator_exports_as_its_copy)
{
    need_onnx();
    tg_module *g = dcgan_generator(), *ema = NULL;
    cr_assert(eq(int, tg_averaged_model_new(&ema, g, 0.5, true), TG_OK));
    cr_assert(eq(int, tg_averaged_model_update(ema, g), TG_OK));
    tg_tensor *w = tg_module_find(g, "net.0.weight");
    cr_assert(eq(int, tg_tensor_fill(w, 0.01), TG_OK));
    cr_assert(eq(int, tg_averaged_model_update(ema, g), TG_OK));
    static char names[32][64];
    const char *inits[32];
    int n = 0;
    for (; generator_inits[n]; n++) {
        const char *name = generator_inits[n];
        snprintf(names[n], sizeof names[n], name[0] == '/' ? "/module%s" : "module.%s", name);
        inits[n] = names[n];
    }
    inits[n] = NULL;
    tg_tensor *z = th_rand_uniform(TG_F32, 2, (const int64_t[]){4, 16}, 9);
    write_case("averaged_generator", ema, z, 1e-5, 0, inits, NULL);
    check_cases();
    /* the copy, not the model: its first weight is the average */
    tg_tensor *y_ema = forward(ema, z), *y_g = forward(g, z);
    cr_assert(th_first_difference(y_ema, y_g) >= 0);
    th_release_all(3, (tg_tensor *[]){z, y_ema, y_g});
    tg_module_release(ema);
    tg_module_release(g);
}

/* ---- errors ---- */

static int custom_forward(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    (void)m;
    return tg_mul_scalar(y, x, 2.0);
}
static const tg_module_vtable custom_vt = {.type_name = "Doubler", .forward = custom_forward};
static const tg_module_vtable fake_seq_vt = {.type_name = "Sequential", .forward = custom_forward};

/* Exports m and expects status rc with `want` in the message, no file at
 * path, and an existing file left as it was. */
static void expect_refused(tg_module *m, tg_tensor *x, const tg_onnx_options *o, int rc,
                           const char *want)
{
    char path[256], prev[256];
    th_tmp_path(path, sizeof path, "refused.onnx");
    cr_assert(tg_onnx_export(m, x, path, o) == rc, "expected %s: %s", tg_status_name(rc),
              tg_error_message());
    th_expect_in(tg_error_message(), want);
    cr_assert(th_exists(path) == false, "a refused export left %s", path);
    th_tmp_path(prev, sizeof prev, "kept.onnx");
    th_write_bytes(prev, "previous", 8);
    cr_assert(tg_onnx_export(m, x, prev, o) == rc);
    th_expect_same_bytes(prev, "previous", 8);
    cr_assert(th_tmp_dir_count() == 1, "a temporary file was left behind");
    remove(prev);
}

Test(onnx, unsupported_modules_and_options_are_named_errors_and_write_nothing)
{
    need_onnx();
    tg_rng rng;
    tg_rng_init(&rng, 1);
    tg_module *seq = NULL, *lin = NULL, *custom = NULL, *bn = NULL;
    cr_assert(tg_nn_sequential_new(&seq) == TG_OK);
    cr_assert(tg_nn_linear_new(&lin, 4, 4, true, &rng) == TG_OK);
    append(seq, lin);
    cr_assert(tg_module_new(&custom, &custom_vt, NULL) == TG_OK);
    append(seq, custom);
    tg_tensor *x = th_rand_uniform(TG_F32, 2, (const int64_t[]){2, 4}, 1);
    expect_refused(seq, x, NULL, TG_EUNSUPPORTED, "module '1' (Doubler) is not supported");

    cr_assert(tg_nn_batchnorm_new(&bn, 0, 4, 1e-5, 0.1, true, false) == TG_OK);
    expect_refused(bn, x, NULL, TG_EUNSUPPORTED, "has no running statistics");

    /* a one-child wrapper whose forward is not its child's */
    tg_module *wrap = NULL;
    cr_assert(tg_module_new(&wrap, &custom_vt, NULL) == TG_OK);
    cr_assert(tg_module_add_child(wrap, "net", tg_module_retain(lin)) == TG_OK);
    expect_refused(wrap, x, NULL, TG_EUNSUPPORTED,
                   "module '<top>' (Doubler) is not supported: its forward is not its one child's");
    /* a custom module that only borrows the name Sequential */
    tg_module *fake = NULL;
    cr_assert(tg_module_new(&fake, &fake_seq_vt, NULL) == TG_OK);
    cr_assert(tg_module_add_child(fake, "0", tg_module_retain(lin)) == TG_OK);
    expect_refused(fake, x, NULL, TG_EUNSUPPORTED, "its forward is not its children in order");
    tg_module_release(fake);

    tg_onnx_options o = TG_ONNX_OPTIONS_INIT;
    o.opset = 13;
    expect_refused(lin, x, &o, TG_EINVAL, "only opset 17");
    o = (tg_onnx_options)TG_ONNX_OPTIONS_INIT;
    o.output_name = "input";
    expect_refused(lin, x, &o, TG_EINVAL, "distinct");

    tg_tensor *x64 = NULL;
    cr_assert(tg_tensor_to_dtype(&x64, x, TG_F64) == TG_OK);
    expect_refused(lin, x64, NULL, TG_EDTYPE, "example_input has dtype f64");
    cr_assert(tg_module_to_dtype(lin, TG_F64) == TG_OK);
    /* the forward refuses an f32 x with the f64 weight first, as torch's
     * linear ("expected scalar type Float but found Double") */
    expect_refused(lin, x, NULL, TG_EDTYPE, "linear: w is f64 but x is f32");
    cr_assert(tg_onnx_export(NULL, x, "x.onnx", NULL) == TG_EINVAL);

    /* a grouped ConvTranspose with per-channel scales that differ between
     * groups: DequantizeLinear on axis 1 holds only C_out/groups scales */
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    p.groups = 2;
    tg_module *ct = NULL, *q = NULL;
    cr_assert(tg_nn_conv_transpose_new(&ct, 1, 4, 4, (const int64_t[]){3}, &p, true, &rng) ==
              TG_OK);
    tg_tensor *w = tg_module_find(ct, "weight");
    tg_tensor_set_flat(w, 0, 5.0);   /* group 0's channel 0 has the larger scale */
    tg_tensor *xc = th_rand_uniform(TG_F32, 3, (const int64_t[]){2, 4, 5}, 2);
    cr_assert(tg_quantize_model(&q, ct, 1, &xc, NULL) == TG_OK, "%s", tg_error_message());
    expect_refused(q, xc, NULL, TG_EUNSUPPORTED,
                   "(QuantizedConvTranspose) is not supported: groups=2");
    tg_module_release(q);
    tg_module_release(ct);
    tg_tensor_release(xc);

    /* ONNX's pooling has a batch dim: a pool run on (C, H, W) is refused */
    tg_module *pool = NULL;
    tg_pool_params pp = TG_POOL_PARAMS_INIT;
    tg_pool_params_set(&pp, 2, 0, 0);
    cr_assert(tg_nn_avg_pool_new(&pool, 2, &pp) == TG_OK);
    tg_tensor *xu = th_rand_uniform(TG_F32, 3, (const int64_t[]){3, 4, 4}, 3);
    expect_refused(pool, xu, NULL, TG_EUNSUPPORTED,
                   "module '<top>' (AvgPool2d) runs on an unbatched input (3 dims): ONNX's "
                   "AveragePool takes (N, C, S...)");
    tg_module_release(pool);
    /* ... and so has InstanceNormalization */
    cr_assert(tg_nn_instance_norm_new(&pool, 2, 3, 1e-5, false) == TG_OK);
    expect_refused(pool, xu, NULL, TG_EUNSUPPORTED,
                   "module '<top>' (InstanceNorm2d) runs on an unbatched input (3 dims): ONNX's "
                   "InstanceNormalization takes (N, C, S...)");
    tg_module_release(pool);
    tg_tensor_release(xu);

    tg_module_release(wrap);
    tg_module_release(bn);
    tg_module_release(seq);
    tg_tensor_release(x);
    tg_tensor_release(x64);
}

/* A model that begins with an Embedding takes i64 or i32 indices: Gather
 * along axis 0 of the weight (padding_idx changes only gradients); max_norm
 * and other integer inputs are refused. */
Test(onnx, embedding_models_take_integer_indices)
{
    need_onnx();
    tg_rng rng;
    tg_rng_init(&rng, 5);
    tg_module *seq = NULL, *emb = NULL, *flat = NULL, *lin = NULL, *alone = NULL, *mn = NULL;
    tg_embedding_opts eo = TG_EMBEDDING_OPTS_INIT;
    eo.padding_idx = 0;
    cr_assert(tg_nn_sequential_new(&seq) == TG_OK);
    cr_assert(tg_nn_embedding_new_ex(&emb, 10, 4, &eo, &rng) == TG_OK);
    cr_assert(tg_nn_flatten_new(&flat, 1, -1) == TG_OK);
    cr_assert(tg_nn_linear_new(&lin, 12, 5, true, &rng) == TG_OK);
    append(seq, emb);
    append(seq, flat);
    append(seq, lin);
    append(seq, act(TG_ACT_TANH, 0));
    tg_tensor *idx = th_tensor_from(TG_I64, 2, (const int64_t[]){2, 3},
                                    (const double[]){0, 9, 4, 4, 1, 0});
    cr_assert(tg_nn_embedding_new(&alone, 6, 3, &rng) == TG_OK);
    tg_tensor *i32 = th_tensor_from(TG_I32, 3, (const int64_t[]){2, 2, 2},
                                    (const double[]){5, 0, 1, 1, 3, 2, 0, 5});
    /* the refusals first: they expect an empty folder */
    tg_embedding_opts mo = eo;
    mo.max_norm = 1.0;
    cr_assert(tg_nn_embedding_new_ex(&mn, 6, 3, &mo, &rng) == TG_OK);
    const uint64_t v0 = tg_tensor_version(tg_module_find(mn, "weight"));
    expect_refused(mn, i32, NULL, TG_EUNSUPPORTED,
                   "module '<top>' (Embedding) with max_norm=1 is not supported");
    cr_assert(tg_tensor_version(tg_module_find(mn, "weight")) == v0, "the weight was rescaled");
    tg_tensor *u8 = th_tensor_from(TG_U8, 1, (const int64_t[]){2}, (const double[]){1, 2});
    expect_refused(alone, u8, NULL, TG_EDTYPE,
                   "example_input has dtype u8; the exported graph takes f32, or i64 / i32");
    tg_onnx_options o = TG_ONNX_OPTIONS_INIT;
    o.dynamic_batch = true;
    case_graph = "\"ops\": [\"Gather\", \"Reshape\", \"Gemm\", \"Tanh\"], "
                 "\"attributes\": {\"Gather\": {\"axis\": 0}}";
    write_case("embedding_mlp", seq, idx, 1e-6, 0,
               (const char *const[]){"0.weight", "2.weight", "2.bias", "/1/shape", NULL}, &o);
    case_graph = "\"ops\": [\"Gather\"]";
    write_case("embedding_i32", alone, i32, 0, 0, (const char *const[]){"weight", NULL}, NULL);
    check_cases();

    th_release_all(3, (tg_tensor *[]){idx, i32, u8});
    tg_module_release(seq);
    tg_module_release(alone);
    tg_module_release(mn);
}

Test(onnx, export_restores_training_flags_and_changes_no_state)
{
    need_onnx();
    tg_module *g = dcgan_generator();
    tg_module *net = tg_module_child(g, "net");
    tg_module_train(g, true);
    tg_module_train(tg_module_child(net, "5"), false);   /* a mixed tree */
    const tg_tensor *nbt = tg_module_find(g, "net.2.num_batches_tracked");
    const double before = th_at(nbt, 0), mean0 = th_at(tg_module_find(g, "net.2.running_mean"), 0);
    char path[256];
    tg_tensor *z = th_rand_uniform(TG_F32, 2, (const int64_t[]){2, 16}, 3);
    cr_assert(tg_onnx_export(g, z, th_tmp_path(path, sizeof path, "g.onnx"), NULL) == TG_OK);
    cr_assert(tg_module_is_training(g) && tg_module_is_training(tg_module_child(net, "2")));
    cr_assert(tg_module_is_training(tg_module_child(net, "5")) == false);
    cr_assert(th_at(nbt, 0) == before);
    cr_assert(th_at(tg_module_find(g, "net.2.running_mean"), 0) == mean0);
    tg_module_release(g);
    tg_tensor_release(z);
}

/* ---- the command line, against torch.onnx.export ---- */

/* `tapegrad export --onnx` of a generator file, and PyTorch's export of the
 * same file (examples/dcgan_torch.py --export-onnx): both pass the checker
 * and give the same images under ONNX Runtime, for a batch other than the
 * example's (the batch dim is dynamic in both). */
Test(onnx, cli_export_matches_torch_onnx_export)
{
    need_onnx();
    tg_module *g = dcgan_generator();
    tg_st_file *f = NULL;
    char path[256];
    cr_assert(tg_st_new(&f) == TG_OK);
    cr_assert(tg_module_state_dict_save(g, f, "gen") == TG_OK);
    cr_assert(tg_safetensors_save(f, th_tmp_path(path, sizeof path, "generator.safetensors")) ==
              TG_OK);
    tg_st_free(f);
    int rc = th_run("TG_TOOL", (const char *const[]){"export", "--onnx", "ours.onnx",
                                                     "--dynamic-batch", "--batch", "2",
                                                     "generator.safetensors", NULL});
    cr_assert(rc == 0, "tapegrad export:\n%s%s", th_out, th_err);
    th_expect_in(th_out, "generator nz=16 C=8");
    rc = th_run("TG_PYTHON", (const char *const[]){TG_SOURCE_ROOT "/examples/dcgan_torch.py",
                                                   "--dir", ".", "--export-onnx", "torch.onnx",
                                                   NULL});
    cr_assert(rc == 0, "dcgan_torch.py --export-onnx:\n%s%s", th_out, th_err);
    rc = th_run("TG_PYTHON", (const char *const[]){TG_SOURCE_ROOT "/tests/onnx/check.py", ".",
                                                   NULL});
    cr_assert(rc == 0, "onnx checker:\n%s%s", th_out, th_err);
    tg_tensor *z = th_rand_uniform(TG_F32, 2, (const int64_t[]){5, 16}, 77);
    write_f32("z", ".f32", z);
    rc = th_run("TG_NODE", (const char *const[]){TG_SOURCE_ROOT "/tests/onnx/run.mjs", "--same",
                                                 "ours.onnx", "torch.onnx", "z.f32", "5,16",
                                                 "1e-5", NULL});
    cr_log_info("%s", th_out);
    cr_assert(rc == 0, "onnxruntime:\n%s%s", th_out, th_err);
    /* --int8 writes QDQ nodes; a missing file is a plain error */
    rc = th_run("TG_TOOL", (const char *const[]){"export", "--onnx", "int8.onnx", "--int8",
                                                 "--calib", "2", "generator.safetensors", NULL});
    cr_assert(rc == 0, "tapegrad export --int8:\n%s%s", th_out, th_err);
    th_expect_in(th_out, "int8 QDQ");
    rc = th_run("TG_TOOL", (const char *const[]){"export", "--onnx", "int8u.onnx", "--int8",
                                                 "--u8-weights", "--calib", "2",
                                                 "generator.safetensors", NULL});
    cr_assert(rc == 0, "tapegrad export --int8 --u8-weights:\n%s%s", th_out, th_err);
    th_expect_in(th_out, "int8 QDQ, u8 weights");
    rc = th_run("TG_TOOL", (const char *const[]){"export", "--onnx", "u.onnx", "--u8-weights",
                                                 "generator.safetensors", NULL});
    cr_assert(rc == 2);
    th_expect_in(th_err, "--u8-weights applies to int8 weights: add --int8");
    cr_assert(th_exists(th_tmp_path(path, sizeof path, "u.onnx")) == false);
    rc = th_run("TG_TOOL", (const char *const[]){"export", "--onnx", "x.onnx", "none.safetensors",
                                                 NULL});
    cr_assert(rc == 1);
    th_expect_in(th_err, "none.safetensors");
    cr_assert(th_exists(th_tmp_path(path, sizeof path, "x.onnx")) == false);
    rc = th_run("TG_TOOL", (const char *const[]){"export", "generator.safetensors", NULL});
    cr_assert(rc == 2);
    /* an averaged generator's file (module.net.*, n_averaged) exports the same */
    tg_tensor *n = NULL;
    cr_assert(tg_st_new(&f) == TG_OK);
    cr_assert(tg_module_state_dict_save(g, f, "module") == TG_OK);
    cr_assert(tg_tensor_full(&n, TG_I64, 0, NULL, 3) == TG_OK);
    cr_assert(tg_st_set(f, "n_averaged", n) == TG_OK);
    cr_assert(tg_safetensors_save(f, th_tmp_path(path, sizeof path, "ema.safetensors")) == TG_OK);
    tg_st_free(f);
    tg_tensor_release(n);
    rc = th_run("TG_TOOL", (const char *const[]){"export", "--onnx", "ema.onnx", "--dynamic-batch",
                                                 "ema.safetensors", NULL});
    cr_assert(rc == 0, "tapegrad export of an average:\n%s%s", th_out, th_err);
    th_expect_in(th_out, "(prefix 'module')");
    rc = th_run("TG_NODE", (const char *const[]){TG_SOURCE_ROOT "/tests/onnx/run.mjs", "--same",
                                                 "ours.onnx", "ema.onnx", "z.f32", "5,16", "0",
                                                 NULL});
    cr_assert(rc == 0, "onnxruntime:\n%s%s", th_out, th_err);
    tg_tensor_release(z);
    tg_module_release(g);
}

/* examples/dcgan trains a few steps and writes its generator with
 * --export-onnx (and again with --sample): ONNX Runtime draws from it the
 * images the run stored in latents.safetensors. */
Test(onnx, dcgan_example_exports_its_trained_generator)
{
    need_onnx();
    th_write_idx_set(th_tmp_dir, "train", 24, 28, 7);
    char out[256], path[512];
    th_tmp_path(out, sizeof out, "out");
    int rc = th_run("TG_DCGAN", (const char *const[]){"--data", th_tmp_dir, "--out", out,
                                                      "--batch", "8", "--epochs", "1", "--g-ch",
                                                      "8", "--d-ch", "4", "--nz", "16",
                                                      "--threads", "1", "--export-onnx",
                                                      "dcgan_trained.onnx", NULL});
    cr_assert(rc == 0, "dcgan:\n%s", th_err);
    th_expect_in(th_err, "wrote the generator as ONNX to dcgan_trained.onnx");
    tg_st_file *f = NULL;
    snprintf(path, sizeof path, "%s/latents.safetensors", out);
    cr_assert(tg_safetensors_load(&f, path) == TG_OK, "%s", tg_error_message());
    write_expected("dcgan_trained", tg_st_get(f, "z"), tg_st_get(f, "images"), 1e-5, 0, NULL);
    tg_st_free(f);
    rc = th_run("TG_DCGAN", (const char *const[]){"--out", out, "--sample", "4", "--export-onnx",
                                                  "sampled.onnx", NULL});
    cr_assert(rc == 0, "dcgan --sample:\n%s", th_err);
    cr_assert(th_exists(th_tmp_path(path, sizeof path, "sampled.onnx")));
    /* the same weights: the same bytes */
    size_t n1 = 0, n2 = 0;
    char *a = th_read_file(path, &n1);
    char *b = th_read_file(th_tmp_path(path, sizeof path, "dcgan_trained.onnx"), &n2);
    cr_assert(a && b && n1 == n2 && memcmp(a, b, n1) == 0);
    free(a);
    free(b);
    remove(th_tmp_path(path, sizeof path, "sampled.onnx"));
    check_cases();
}

/* A library built with -Donnx=disabled (or without protobuf-c) says so. */
Test(onnx, a_build_without_onnx_support_says_so)
{
    if (tg_onnx_available()) cr_skip_test("this build has ONNX support");
    tg_module *relu = act(TG_ACT_RELU, 0);
    tg_tensor *x = th_rand_uniform(TG_F32, 2, (const int64_t[]){1, 3}, 1);
    char path[256];
    cr_assert(tg_onnx_export(relu, x, th_tmp_path(path, sizeof path, "m.onnx"), NULL) ==
              TG_EUNSUPPORTED);
    th_expect_in(tg_error_message(), "built without ONNX support");
    cr_assert(th_exists(path) == false);
    tg_module_release(relu);
    tg_tensor_release(x);
}
