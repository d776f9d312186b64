/* tests/test_spectral_norm.c - tg_nn_spectral_norm: PyTorch's outputs,
 * updated u and v and gradients in training (1 and 3 power iterations) and
 * eval (tests/golden/spectral_norm.safetensors, written by
 * scripts/make_spectral_norm_goldens.py); f64 gradcheck with u, v fixed;
 * torch's state dict keys and order; checkpoint resume; refusals. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

static void setup(void) { th_tmp_dir_make("tg_sn_"); }

TestSuite(spectral_norm, .init = setup, .fini = th_tmp_dir_remove);

/* The module of golden case c (the script's), with spectral norm applied. */
static tg_module *case_module(const char *c, int iters)
{
    tg_rng rng;
    tg_rng_init(&rng, 3);
    tg_module *m = NULL;
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    for (int i = 0; i < 2; i++) {
        p.stride[i] = 2;
        p.padding[i][0] = p.padding[i][1] = 1;
        p.output_padding[i] = 1;
    }
    if (!strcmp(c, "lin")) {
        cr_assert(eq(int, tg_nn_linear_new(&m, 5, 4, true, &rng), TG_OK));
    } else if (!strcmp(c, "conv")) {
        p.output_padding[0] = p.output_padding[1] = 0;
        cr_assert(eq(int, tg_nn_conv_new(&m, 2, 3, 4, (int64_t[]){3, 3}, &p, true, &rng), TG_OK));
    } else {
        cr_assert(eq(int, tg_nn_conv_transpose_new(&m, 2, 4, 3, (int64_t[]){3, 3}, &p, true,
                                                   &rng), TG_OK));
    }
    cr_assert(eq(int, tg_nn_spectral_norm(m, "weight", iters, 1e-12, -1, &rng), TG_OK), "%s",
              tg_error_message());
    return m;
}

/* y = m(x) and the gradients of sum(y * g); *y a new reference. */
static tg_tensor *run(tg_module *m, tg_tensor *x, tg_tensor *g)
{
    tg_tensor *y = NULL, *yg = NULL, *loss = NULL;
    cr_assert(eq(int, tg_module_forward(m, &y, x), TG_OK), "%s", tg_error_message());
    cr_assert(eq(int, tg_mul(&yg, y, g), TG_OK));
    cr_assert(eq(int, tg_sum(&loss, yg), TG_OK));
    cr_assert(eq(int, tg_backward(loss, NULL, NULL), TG_OK), "%s", tg_error_message());
    tg_tensor_release(loss);
    tg_tensor_release(yg);
    return y;
}

Test(spectral_norm, matches_torch_in_training_and_eval)
{
    tg_st_file *f = th_golden_load("spectral_norm.safetensors");
    const char *cases[] = {"lin", "conv", "convt"};
    const char *modes[] = {"train1", "train3", "eval"};
    for (int c = 0; c < 3; c++) {
        for (int k = 0; k < 3; k++) {
            tg_module *m = case_module(cases[c], k == 1 ? 3 : 1);
            char prefix[32];
            snprintf(prefix, sizeof prefix, "%s.sd", cases[c]);
            /* strict: the keys must be torch's */
            cr_assert(eq(int, tg_module_load_state_dict(m, f, prefix, true), TG_OK), "%s",
                      tg_error_message());
            tg_module_train(m, k != 2);
            tg_tensor *y = run(m, th_golden_at(f, "%s.%s", cases[c], "x"),
                               th_golden_at(f, "%s.%s", cases[c], "g"));
            char what[64];
            snprintf(what, sizeof what, "%s.%s", cases[c], modes[k]);
            th_expect_close_scaled(what, y, th_golden_at(f, "%s.%s.y", cases[c], modes[k]), 1e-5);
            th_expect_close_scaled(what, tg_module_find(m, "weight_u"),
                                   th_golden_at(f, "%s.%s.u", cases[c], modes[k]), 1e-5);
            th_expect_close_scaled(what, tg_module_find(m, "weight_v"),
                                   th_golden_at(f, "%s.%s.v", cases[c], modes[k]), 1e-5);
            th_expect_close_scaled(what, tg_tensor_grad(tg_module_find(m, "weight_orig")),
                                   th_golden_at(f, "%s.%s.gw", cases[c], modes[k]), 1e-5);
            th_expect_close_scaled(what, tg_tensor_grad(tg_module_find(m, "bias")),
                                   th_golden_at(f, "%s.%s.gb", cases[c], modes[k]), 1e-5);
            tg_tensor_release(y);
            tg_module_release(m);
        }
    }
    tg_st_free(f);
}

static int module_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    return tg_module_forward(user, out, in[0]);
}

/* The forward with u, v fixed (eval, after two training forwards have moved
 * them), in f64: first and second derivatives in x, weight_orig, bias. */
Test(spectral_norm, gradcheck_f64_with_u_v_fixed)
{
    tg_rng rng;
    tg_rng_init(&rng, 11);
    for (int c = 0; c < 3; c++) {
        tg_module *m = case_module(c == 0 ? "lin" : c == 1 ? "conv" : "convt", 2);
        cr_assert(eq(int, tg_module_to_dtype(m, TG_F64), TG_OK));
        int64_t xs[4] = {2, c == 2 ? 4 : 3, 3, 3};
        if (c == 0) xs[1] = 5;
        tg_tensor *x = NULL, *y = NULL;
        cr_assert(eq(int, tg_tensor_zeros(&x, TG_F64, c == 0 ? 2 : 4, xs), TG_OK));
        tg_tensor_rand_normal(x, &rng, 0.0, 1.0);
        for (int i = 0; i < 2; i++) {
            cr_assert(eq(int, tg_module_forward(m, &y, x), TG_OK), "%s", tg_error_message());
            tg_tensor_release(y);
        }
        tg_tensor_set_requires_grad(x, true);
        tg_module_train(m, false);
        tg_tensor *in[3] = {x, tg_module_find(m, "weight_orig"), tg_module_find(m, "bias")};
        th_expect_gradchecks(module_fn, m, 3, in, "case %d", c);
        tg_tensor_release(x);
        tg_module_release(m);
    }
}

static void expect_state(const tg_module *m, int n, const char *const *keys)
{
    cr_assert(eq(int, tg_module_state_count(m), n));
    for (int i = 0; i < n; i++) {
        char name[TG_MODULE_NAME_MAX];
        cr_assert(eq(int, tg_module_state_at(m, i, name, sizeof name, NULL, NULL), TG_OK));
        cr_assert(eq(str, name, (char *)keys[i]));
    }
}

Test(spectral_norm, state_dict_has_torch_keys_and_round_trips)
{
    tg_rng rng;
    tg_rng_init(&rng, 5);
    tg_module *m = NULL, *m2 = NULL;
    cr_assert(eq(int, tg_nn_linear_new(&m, 6, 3, true, &rng), TG_OK));
    tg_tensor *w = tg_module_find(m, "weight");
    cr_assert(eq(int, tg_nn_spectral_norm(m, "weight", 1, 1e-12, -1, &rng), TG_OK));
    /* torch's order: the parameter is registered again, after bias */
    expect_state(m, 4, (const char *const[]){"bias", "weight_orig", "weight_u", "weight_v"});
    cr_assert(eq(ptr, tg_module_find(m, "weight_orig"), w), "the same tensor");
    cr_assert(tg_module_find(m, "weight") != NULL && tg_module_find(m, "weight") != w);
    cr_assert(eq(int, tg_module_parameter_count(m), 2));
    cr_assert(eq(i64, tg_tensor_dim(tg_module_find(m, "weight_u"), 0), 3));
    cr_assert(eq(i64, tg_tensor_dim(tg_module_find(m, "weight_v"), 0), 6));

    tg_tensor *x = NULL, *y = NULL, *y2 = NULL;
    tg_tensor_zeros(&x, TG_F32, 2, (int64_t[]){4, 6});
    tg_tensor_rand_normal(x, &rng, 0.0, 1.0);
    cr_assert(eq(int, tg_module_forward(m, &y, x), TG_OK));   /* moves u, v */
    tg_tensor_release(y);
    tg_st_file *f = NULL;
    char path[256];
    cr_assert(eq(int, tg_st_new(&f), TG_OK));
    cr_assert(eq(int, tg_module_state_dict_save(m, f, "d"), TG_OK));
    cr_assert(eq(int, tg_safetensors_save(f, th_tmp_path(path, sizeof path, "sd.safetensors")),
                 TG_OK));
    tg_st_free(f);

    tg_rng_init(&rng, 99);   /* other weights, other u and v */
    cr_assert(eq(int, tg_nn_linear_new(&m2, 6, 3, true, &rng), TG_OK));
    cr_assert(eq(int, tg_nn_spectral_norm(m2, "weight", 1, 1e-12, -1, &rng), TG_OK));
    cr_assert(eq(int, tg_safetensors_load(&f, path), TG_OK));
    cr_assert(eq(int, tg_module_load_state_dict(m2, f, "d", true), TG_OK), "%s",
              tg_error_message());
    tg_st_free(f);
    const char *keys[] = {"bias", "weight_orig", "weight_u", "weight_v"};
    for (int i = 0; i < 4; i++)
        th_expect_same_bits(keys[i], x, tg_module_find(m2, keys[i]), tg_module_find(m, keys[i]));
    tg_module_train(m, false);
    tg_module_train(m2, false);
    cr_assert(eq(int, tg_module_forward(m, &y, x), TG_OK));
    cr_assert(eq(int, tg_module_forward(m2, &y2, x), TG_OK));
    th_expect_same_bits("eval output", x, y2, y);
    tg_tensor_release(y);
    tg_tensor_release(y2);
    tg_tensor_release(x);
    tg_module_release(m);
    tg_module_release(m2);
}

/* A Conv2d discriminator-like stack trained with Adam: k steps, returning
 * the last loss. */
static double train_steps(tg_module *m, tg_optimizer *opt, tg_tensor *x, int k)
{
    double l = 0;
    for (int i = 0; i < k; i++) {
        tg_tensor *y = NULL, *sq = NULL, *loss = NULL;
        cr_assert(eq(int, tg_module_forward(m, &y, x), TG_OK), "%s", tg_error_message());
        cr_assert(eq(int, tg_mul(&sq, y, y), TG_OK));
        cr_assert(eq(int, tg_sum(&loss, sq), TG_OK));
        tg_optimizer_zero_grad(opt);
        cr_assert(eq(int, tg_backward(loss, NULL, NULL), TG_OK));
        cr_assert(eq(int, tg_optimizer_step(opt), TG_OK));
        tg_tensor_get_flat(loss, 0, &l);
        tg_tensor_release(loss);
        tg_tensor_release(sq);
        tg_tensor_release(y);
    }
    return l;
}

static tg_module *disc(uint64_t seed)
{
    tg_rng rng;
    tg_rng_init(&rng, seed);
    tg_module *seq = NULL, *conv = NULL, *act = NULL, *flat = NULL, *lin = NULL;
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    p.stride[0] = p.stride[1] = 2;
    cr_assert(eq(int, tg_nn_sequential_new(&seq), TG_OK));
    cr_assert(eq(int, tg_nn_conv_new(&conv, 2, 2, 4, (int64_t[]){2, 2}, &p, true, &rng), TG_OK));
    cr_assert(eq(int, tg_nn_spectral_norm(conv, "weight", 1, 1e-12, -1, &rng), TG_OK));
    cr_assert(eq(int, tg_nn_activation_new(&act, TG_ACT_LEAKY_RELU, 0.2), TG_OK));
    cr_assert(eq(int, tg_nn_flatten_new(&flat, 1, -1), TG_OK));
    cr_assert(eq(int, tg_nn_linear_new(&lin, 16, 1, true, &rng), TG_OK));
    cr_assert(eq(int, tg_nn_spectral_norm(lin, "weight", 2, 1e-12, -1, &rng), TG_OK));
    tg_module *parts[] = {conv, act, flat, lin};
    for (int i = 0; i < 4; i++) cr_assert(eq(int, tg_nn_sequential_append(seq, parts[i]), TG_OK));
    return seq;
}

Test(spectral_norm, checkpoint_resume_continues_identically)
{
    tg_rng rng;
    tg_rng_init(&rng, 8);
    tg_tensor *x = NULL;
    tg_tensor_zeros(&x, TG_F32, 4, (int64_t[]){3, 2, 4, 4});
    tg_tensor_rand_normal(x, &rng, 0.0, 1.0);
    tg_adam_opts ao = TG_ADAM_OPTS_INIT;
    ao.lr = 0.05;
    tg_module *a = disc(1), *b = disc(2);
    tg_optimizer *oa = NULL, *ob = NULL;
    cr_assert(eq(int, tg_adam_from_module(&oa, a, &ao), TG_OK));
    cr_assert(eq(int, tg_adam_from_module(&ob, b, &ao), TG_OK));
    train_steps(a, oa, x, 3);
    tg_checkpoint *ck = NULL;
    char path[256];
    th_tmp_path(path, sizeof path, "ck.safetensors");
    cr_assert(eq(int, tg_checkpoint_new(&ck), TG_OK));
    cr_assert(eq(int, tg_checkpoint_add_module(ck, "d", a), TG_OK));
    cr_assert(eq(int, tg_checkpoint_add_optimizer(ck, "opt", oa), TG_OK));
    cr_assert(eq(int, tg_checkpoint_save(ck, path, NULL), TG_OK), "%s", tg_error_message());
    tg_checkpoint_free(ck);
    double la = train_steps(a, oa, x, 3);

    cr_assert(eq(int, tg_checkpoint_new(&ck), TG_OK));
    cr_assert(eq(int, tg_checkpoint_add_module(ck, "d", b), TG_OK));
    cr_assert(eq(int, tg_checkpoint_add_optimizer(ck, "opt", ob), TG_OK));
    cr_assert(eq(int, tg_checkpoint_load(ck, path), TG_OK), "%s", tg_error_message());
    tg_checkpoint_free(ck);
    double lb = train_steps(b, ob, x, 3);
    cr_assert(eq(dbl, la, lb));
    int n = tg_module_state_count(a);
    cr_assert(eq(int, n, 8));   /* bias, weight_orig, weight_u, weight_v twice */
    for (int i = 0; i < n; i++) {
        char name[TG_MODULE_NAME_MAX];
        tg_tensor *ta = NULL, *tb = NULL;
        tg_module_state_at(a, i, name, sizeof name, &ta, NULL);
        tg_module_state_at(b, i, NULL, 0, &tb, NULL);
        th_expect_same_bits(name, x, tb, ta);
    }
    tg_optimizer_free(oa);
    tg_optimizer_free(ob);
    tg_module_release(a);
    tg_module_release(b);
    tg_tensor_release(x);
}

/* Embedding reads its weight by name, as a custom module would: its rows
 * are those of weight_orig / sigma. */
Test(spectral_norm, embedding_reads_the_normalized_weight)
{
    tg_rng rng;
    tg_rng_init(&rng, 4);
    tg_module *m = NULL;
    cr_assert(eq(int, tg_nn_embedding_new(&m, 5, 3, &rng), TG_OK));
    cr_assert(eq(int, tg_nn_spectral_norm(m, "weight", 1, 1e-12, -1, &rng), TG_OK));
    tg_tensor *idx = NULL, *y = NULL;
    cr_assert(eq(int, tg_tensor_from_data(&idx, TG_I64, 1, (int64_t[]){2},
                                          (int64_t[]){4, 1}), TG_OK));
    cr_assert(eq(int, tg_module_forward(m, &y, idx), TG_OK), "%s", tg_error_message());
    const tg_tensor *w = tg_module_find(m, "weight"), *wo = tg_module_find(m, "weight_orig");
    /* the same sigma divides every element; sigma > 0 and is not 1 */
    double ratio = 0, a = 0, b = 0;
    for (int i = 0; i < 3; i++) {
        tg_tensor_get_flat(y, i, &a);
        tg_tensor_get_flat(w, 4 * 3 + i, &b);
        cr_assert(eq(dbl, a, b));
        tg_tensor_get_flat(y, 3 + i, &a);
        tg_tensor_get_flat(w, 1 * 3 + i, &b);
        cr_assert(eq(dbl, a, b));
        tg_tensor_get_flat(wo, 3 + i, &b);
        if (i == 0) ratio = b / a;
        cr_assert(th_close(b / a, ratio, 1e-5, 0));
    }
    cr_assert(ratio > 1.01);
    tg_tensor_release(y);
    tg_tensor_release(idx);
    tg_module_release(m);
}

/* tg_module_copy of a spectral-normed module (an AveragedModel of it, say)
 * keeps the reparametrization: the copy's forward gives the original's
 * output, and a training forward of the copy moves the copy's u alone. */
Test(spectral_norm, a_copy_keeps_it_and_is_independent)
{
    tg_rng rng;
    tg_rng_init(&rng, 6);
    tg_module *m = NULL, *c = NULL;
    cr_assert(eq(int, tg_nn_linear_new(&m, 4, 3, true, &rng), TG_OK));
    cr_assert(eq(int, tg_nn_spectral_norm(m, "weight", 1, 1e-12, -1, &rng), TG_OK));
    cr_assert(eq(int, tg_module_copy(&c, m), TG_OK), "%s", tg_error_message());
    tg_tensor *x = th_rand_uniform(TG_F32, 2, (int64_t[]){2, 4}, 9), *y = NULL, *yc = NULL;
    tg_module_train(m, false);
    tg_module_train(c, false);
    cr_assert(eq(int, tg_module_forward(m, &y, x), TG_OK), "%s", tg_error_message());
    cr_assert(eq(int, tg_module_forward(c, &yc, x), TG_OK), "%s", tg_error_message());
    th_expect_same_bits("copy", x, yc, y);
    double u0 = 0, u1 = 0;
    tg_tensor_get_flat(tg_module_find(m, "weight_u"), 0, &u0);
    tg_module_train(c, true);
    tg_tensor *yt = NULL;
    cr_assert(eq(int, tg_module_forward(c, &yt, x), TG_OK), "%s", tg_error_message());
    tg_tensor_get_flat(tg_module_find(m, "weight_u"), 0, &u1);
    cr_assert(eq(dbl, u0, u1), "the original's u moved");
    cr_assert(tg_module_find(c, "weight_u") != tg_module_find(m, "weight_u"));
    th_release_all(4, (tg_tensor *[]){x, y, yc, yt});
    tg_module_release(m);
    tg_module_release(c);
}

/* Each refusal leaves the module as it was: its state keys and count. */
static void expect_refused(tg_module *m, int rc, int status, const char *words)
{
    th_expect_refused(rc, status, words, NULL);
    cr_assert(tg_module_find(m, "weight") != NULL);
    cr_assert(eq(int, tg_module_parameter_count(m), 2));
}

Test(spectral_norm, refusals_name_the_argument_and_change_nothing)
{
    tg_rng rng;
    tg_rng_init(&rng, 6);
    tg_module *m = NULL, *act = NULL;
    cr_assert(eq(int, tg_nn_linear_new(&m, 4, 3, true, &rng), TG_OK));
    expect_refused(m, tg_nn_spectral_norm(m, "nope", 1, 1e-12, -1, &rng), TG_EINVAL,
                   "no parameter 'nope'");
    expect_refused(m, tg_nn_spectral_norm(m, "weight", 0, 1e-12, -1, &rng), TG_EINVAL,
                   "n_power_iterations=0 must be >= 1");
    expect_refused(m, tg_nn_spectral_norm(m, "weight", 1, 0.0, -1, &rng), TG_EINVAL,
                   "eps=0 must be > 0");
    expect_refused(m, tg_nn_spectral_norm(m, "weight", 1, 1e-12, 2, &rng), TG_EINVAL,
                   "dim=2 must be in [0, 2)");
    expect_refused(m, tg_nn_spectral_norm(m, "weight", 1, 1e-12, -2, &rng), TG_EINVAL,
                   "dim=-2");
    expect_refused(m, tg_nn_spectral_norm(m, NULL, 1, 1e-12, -1, &rng), TG_EINVAL,
                   "must not be NULL");
    expect_refused(m, tg_nn_spectral_norm(m, "weight", 1, 1e-12, -1, NULL), TG_EINVAL,
                   "must not be NULL");
    cr_assert(eq(int, tg_nn_spectral_norm(NULL, "weight", 1, 1e-12, -1, &rng), TG_EINVAL));
    expect_state(m, 2, (const char *const[]){"weight", "bias"});

    /* a name it would add is taken: nothing is added */
    tg_tensor *t = NULL;
    tg_tensor_zeros(&t, TG_F32, 1, (int64_t[]){3});
    cr_assert(eq(int, tg_module_add_buffer(m, "weight_v", t), TG_OK));
    expect_refused(m, tg_nn_spectral_norm(m, "weight", 1, 1e-12, -1, &rng), TG_EINVAL,
                   "'weight_v' is already used");
    expect_state(m, 3, (const char *const[]){"weight", "bias", "weight_v"});
    tg_module_release(m);

    /* twice */
    cr_assert(eq(int, tg_nn_linear_new(&m, 4, 3, true, &rng), TG_OK));
    cr_assert(eq(int, tg_nn_spectral_norm(m, "weight", 1, 1e-12, -1, &rng), TG_OK));
    expect_refused(m, tg_nn_spectral_norm(m, "weight", 1, 1e-12, -1, &rng), TG_EINVAL,
                   "already has spectral norm");
    expect_state(m, 4, (const char *const[]){"bias", "weight_orig", "weight_u", "weight_v"});
    /* the computed name cannot be taken by a parameter */
    tg_tensor_zeros(&t, TG_F32, 1, (int64_t[]){3});
    cr_assert(eq(int, tg_module_add_parameter(m, "weight", t), TG_EINVAL));
    tg_module_release(m);

    /* a module without parameters */
    cr_assert(eq(int, tg_nn_activation_new(&act, TG_ACT_RELU, 0), TG_OK));
    th_expect_refused(tg_nn_spectral_norm(act, "weight", 1, 1e-12, -1, &rng), TG_EINVAL,
                      "no parameter 'weight'", NULL);
    tg_module_release(act);
}
