/* tests/test_averaged_model.c - tg_averaged_model_* (optim.h) against
 * PyTorch's AveragedModel (tests/golden/averaged_model.safetensors, from
 * scripts/make_averaged_model_goldens.py): the averaged states after each
 * update, the averaged generator's output, a training run, state dicts
 * exchanged with torch, checkpoint resume and refusals. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/autograd.h"
#include "tapegrad/checkpoint.h"
#include "tapegrad/loss.h"
#include "tapegrad/nn.h"
#include "tapegrad/optim.h"

#define STEPS 4
#define HALF_STEPS 3

typedef struct avg_kind {
    const char *name;   /* the golden's */
    double decay;
    bool use_buffers;
} avg_kind;

static const avg_kind kinds[] = {{"equal", -1, false},
                                 {"ema0.9", 0.9, false},
                                 {"ema0.999", 0.999, false},
                                 {"ema0.9buf", 0.9, true},
                                 {"equalbuf", -1, true}};
#define N_KINDS ((int)(sizeof kinds / sizeof kinds[0]))

static tg_st_file *golden(void) { return th_golden_load("averaged_model.safetensors"); }

/* Appends *m, made by a constructor that returned rc (*m is read after the
 * call that set it). */
static void append(tg_module *seq, int rc, tg_module **m)
{
    cr_assert(eq(int, rc, TG_OK), "%s", tg_error_message());
    cr_assert(eq(int, tg_nn_sequential_append(seq, *m), TG_OK));
}

/* The golden's generator (Linear, Unflatten, ConvTranspose2d, BatchNorm2d,
 * ReLU, ConvTranspose2d, Tanh) in dtype dt, its values from "<D>.init". */
static tg_module *generator(const tg_st_file *f, tg_dtype dt)
{
    tg_module *seq = NULL, *m = NULL;
    tg_rng rng;
    tg_rng_init(&rng, 1);
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    p.stride[0] = p.stride[1] = 2;
    p.padding[0][0] = p.padding[0][1] = p.padding[1][0] = p.padding[1][1] = 1;
    const int64_t k[2] = {4, 4}, unflat[3] = {4, 2, 2};
    cr_assert(eq(int, tg_nn_sequential_new(&seq), TG_OK));
    append(seq, tg_nn_linear_new(&m, 6, 16, true, &rng), &m);
    append(seq, tg_nn_unflatten_new(&m, 1, 3, unflat), &m);
    append(seq, tg_nn_conv_transpose_new(&m, 2, 4, 3, k, &p, true, &rng), &m);
    append(seq, tg_nn_batchnorm_new(&m, 2, 3, 1e-5, 0.1, true, true), &m);
    append(seq, tg_nn_activation_new(&m, TG_ACT_RELU, 0), &m);
    append(seq, tg_nn_conv_transpose_new(&m, 2, 3, 2, k, &p, true, &rng), &m);
    append(seq, tg_nn_activation_new(&m, TG_ACT_TANH, 0), &m);
    cr_assert(eq(int, tg_module_to_dtype(seq, dt), TG_OK));
    if (f) {
        const char *d = dt == TG_F64 ? "f64.init" : "f32.init";
        cr_assert(eq(int, tg_module_load_state_dict(seq, f, d, true), TG_OK), "%s",
                  tg_error_message());
    }
    return seq;
}

static void load(tg_module *m, const tg_st_file *f, const char *prefix)
{
    cr_assert(eq(int, tg_module_load_state_dict(m, f, prefix, true), TG_OK), "%s: %s", prefix,
              tg_error_message());
}

static tg_module *averaged(const tg_module *model, const avg_kind *k)
{
    tg_module *avg = NULL;
    cr_assert(eq(int, tg_averaged_model_new(&avg, model, k->decay, k->use_buffers), TG_OK), "%s",
              tg_error_message());
    return avg;
}

static int64_t n_averaged(const tg_module *avg)
{
    return (int64_t)tg_tensor_item(tg_module_find(avg, "n_averaged"));
}

/* The averaged generator's output on z, in eval mode, against the golden. */
static void expect_output(tg_module *avg, const tg_st_file *f, const char *d, const avg_kind *k,
                          double rtol)
{
    char key[96];
    snprintf(key, sizeof key, "%s.z", d);
    tg_tensor *y = NULL;
    tg_module_train(avg, false);
    cr_assert(eq(int, tg_module_forward(avg, &y, tg_st_get(f, key)), TG_OK), "%s",
              tg_error_message());
    snprintf(key, sizeof key, "%s.%s.out", d, k->name);
    th_expect_close_scaled(key, y, tg_st_get(f, key), rtol);
    tg_tensor_release(y);
}

/* Each update from torch's model states gives torch's averaged states, bit
 * for bit: the averaging arithmetic is torch's. */
Test(averaged_model, states_after_each_update_are_torchs)
{
    tg_st_file *f = golden();
    const tg_dtype dts[2] = {TG_F32, TG_F64};
    for (int di = 0; di < 2; di++) {
        const char *d = dts[di] == TG_F64 ? "f64" : "f32";
        for (int ki = 0; ki < N_KINDS; ki++) {
            tg_module *gen = generator(f, dts[di]), *avg = averaged(gen, &kinds[ki]);
            for (int step = 1; step <= STEPS; step++) {
                char prefix[96];
                snprintf(prefix, sizeof prefix, "%s.step%d", d, step);
                load(gen, f, prefix);
                cr_assert(eq(int, tg_averaged_model_update(avg, gen), TG_OK), "%s",
                          tg_error_message());
                snprintf(prefix, sizeof prefix, "%s.%s.step%d", d, kinds[ki].name, step);
                th_expect_state(avg, f, prefix, 0);
            }
            expect_output(avg, f, d, &kinds[ki], dts[di] == TG_F64 ? 1e-12 : 1e-5);
            tg_module_release(avg);
            tg_module_release(gen);
        }
    }
    tg_st_free(f);
}

/* f16 and bf16 parameters: each operation rounded to the dtype, as torch. */
Test(averaged_model, half_parameters_average_as_torch)
{
    tg_st_file *f = golden();
    const tg_dtype dts[2] = {TG_F16, TG_BF16};
    const char *names[2] = {"half.f16", "half.bf16"};
    for (int di = 0; di < 2; di++) {
        for (int ki = 0; ki < 2; ki++) {
            tg_module *lin = NULL;
            tg_rng rng;
            tg_rng_init(&rng, 2);
            cr_assert(eq(int, tg_nn_linear_new(&lin, 5, 3, true, &rng), TG_OK));
            cr_assert(eq(int, tg_module_to_dtype(lin, dts[di]), TG_OK));
            tg_module *avg = averaged(lin, &kinds[ki]);
            for (int step = 0; step <= HALF_STEPS; step++) {
                char prefix[96];
                snprintf(prefix, sizeof prefix, "%s.model%d", names[di], step);
                load(lin, f, prefix);
                cr_assert(eq(int, tg_averaged_model_update(avg, lin), TG_OK));
                snprintf(prefix, sizeof prefix, "%s.%s.step%d", names[di], kinds[ki].name, step);
                th_expect_state(avg, f, prefix, 0);
            }
            tg_module_release(avg);
            tg_module_release(lin);
        }
    }
    tg_st_free(f);
}

/* One SGD step of gen on the golden's data. */
static void sgd_step(tg_module *gen, tg_optimizer *opt, const tg_st_file *f, const char *d)
{
    char kz[32], kt[32];
    snprintf(kz, sizeof kz, "%s.z", d);
    snprintf(kt, sizeof kt, "%s.target", d);
    tg_tensor *y = NULL, *loss = NULL;
    tg_optimizer_zero_grad(opt);
    cr_assert(eq(int, tg_module_forward(gen, &y, tg_st_get(f, kz)), TG_OK));
    cr_assert(eq(int, tg_mse_loss(&loss, y, tg_st_get(f, kt), TG_REDUCTION_MEAN), TG_OK));
    cr_assert(eq(int, tg_backward(loss, NULL, NULL), TG_OK));
    cr_assert(eq(int, tg_optimizer_step(opt), TG_OK));
    tg_tensor_release(loss);
    tg_tensor_release(y);
}

static tg_optimizer *sgd(const tg_module *gen)
{
    tg_optimizer *opt = NULL;
    tg_sgd_opts o = TG_SGD_OPTS_INIT;
    o.lr = 0.1;
    o.momentum = 0.5;
    cr_assert(eq(int, tg_sgd_from_module(&opt, gen, &o), TG_OK));
    return opt;
}

/* The golden's training run done by tapegrad: the averaged models follow
 * torch's within the training's own rounding differences. */
Test(averaged_model, training_run_follows_torch)
{
    tg_st_file *f = golden();
    const tg_dtype dts[2] = {TG_F32, TG_F64};
    for (int di = 0; di < 2; di++) {
        const char *d = dts[di] == TG_F64 ? "f64" : "f32";
        const double rtol = dts[di] == TG_F64 ? 1e-12 : 2e-5;
        tg_module *gen = generator(f, dts[di]), *avg[N_KINDS];
        for (int ki = 0; ki < N_KINDS; ki++) avg[ki] = averaged(gen, &kinds[ki]);
        tg_optimizer *opt = sgd(gen);
        for (int step = 1; step <= STEPS; step++) {
            sgd_step(gen, opt, f, d);
            for (int ki = 0; ki < N_KINDS; ki++)
                cr_assert(eq(int, tg_averaged_model_update(avg[ki], gen), TG_OK));
        }
        char prefix[96];
        snprintf(prefix, sizeof prefix, "%s.step%d", d, STEPS);
        th_expect_state(gen, f, prefix, rtol);
        for (int ki = 0; ki < N_KINDS; ki++) {
            snprintf(prefix, sizeof prefix, "%s.%s.step%d", d, kinds[ki].name, STEPS);
            th_expect_state(avg[ki], f, prefix, rtol);
            cr_assert(eq(i64, n_averaged(avg[ki]), STEPS));
            expect_output(avg[ki], f, d, &kinds[ki], rtol);
            tg_module_release(avg[ki]);
        }
        tg_optimizer_free(opt);
        tg_module_release(gen);
    }
    tg_st_free(f);
}

static void setup(void) { th_tmp_dir_make("tg_avg_"); }
static void teardown(void) { th_tmp_dir_remove(); }
TestSuite(averaged_model, .init = setup, .fini = teardown);

/* torch's AveragedModel state dict loads (keys n_averaged and module.*) and
 * the averaging goes on from it as torch's; tapegrad's saved state has
 * torch's keys and loads back. */
Test(averaged_model, state_dict_round_trips_and_loads_torchs)
{
    tg_st_file *f = golden();
    const avg_kind *k = &kinds[1];   /* ema0.9 */
    tg_module *gen = generator(f, TG_F32), *avg = averaged(gen, k);
    load(avg, f, "f32.ema0.9.step2");
    cr_assert(eq(i64, n_averaged(avg), 2));
    load(gen, f, "f32.step3");
    cr_assert(eq(int, tg_averaged_model_update(avg, gen), TG_OK));
    th_expect_state(avg, f, "f32.ema0.9.step3", 0);
    /* saved, written, read back into another averaged model */
    tg_st_file *out = NULL, *back = NULL;
    char path[256];
    th_tmp_path(path, sizeof path, "ema.safetensors");
    cr_assert(eq(int, tg_st_new(&out), TG_OK));
    cr_assert(eq(int, tg_module_state_dict_save(avg, out, NULL), TG_OK));
    cr_assert(eq(int, tg_safetensors_save(out, path), TG_OK));
    cr_assert(eq(int, tg_safetensors_load(&back, path), TG_OK));
    cr_assert(eq(int, tg_st_count(back), tg_module_state_count(avg)));
    tg_module *gen2 = generator(NULL, TG_F32), *avg2 = averaged(gen2, k);
    load(avg2, back, NULL);
    th_expect_state(avg2, f, "f32.ema0.9.step3", 0);
    load(gen2, f, "f32.step4");
    cr_assert(eq(int, tg_averaged_model_update(avg2, gen2), TG_OK));
    th_expect_state(avg2, f, "f32.ema0.9.step4", 0);
    tg_st_free(back);
    tg_st_free(out);
    tg_module_release(avg2);
    tg_module_release(gen2);
    tg_module_release(avg);
    tg_module_release(gen);
    tg_st_free(f);
}

/* A training state with an EMA of the generator. */
typedef struct run {
    tg_module *gen, *ema;
    tg_optimizer *opt;
    tg_checkpoint *ck;
} run;

static run run_new(const tg_st_file *f)
{
    run r = {.gen = generator(f, TG_F32)};
    r.ema = averaged(r.gen, &kinds[3]);   /* ema0.9buf */
    r.opt = sgd(r.gen);
    cr_assert(eq(int, tg_checkpoint_new(&r.ck), TG_OK));
    cr_assert(eq(int, tg_checkpoint_add_module(r.ck, "gen", r.gen), TG_OK));
    cr_assert(eq(int, tg_checkpoint_add_module(r.ck, "gen_ema", r.ema), TG_OK));
    cr_assert(eq(int, tg_checkpoint_add_optimizer(r.ck, "opt", r.opt), TG_OK));
    return r;
}

static void run_steps(run *r, const tg_st_file *f, int n)
{
    for (int i = 0; i < n; i++) {
        sgd_step(r->gen, r->opt, f, "f32");
        cr_assert(eq(int, tg_averaged_model_update(r->ema, r->gen), TG_OK));
    }
}

static void run_free(run *r)
{
    tg_checkpoint_free(r->ck);
    tg_optimizer_free(r->opt);
    tg_module_release(r->ema);
    tg_module_release(r->gen);
}

/* Two steps, a checkpoint, two more: a fresh run loading the checkpoint
 * ends with the same averaged generator, bit for bit. */
Test(averaged_model, checkpoint_resume_continues_identically)
{
    tg_st_file *f = golden();
    char path[256];
    th_tmp_path(path, sizeof path, "ck.safetensors");
    run a = run_new(f);
    run_steps(&a, f, 2);
    cr_assert(eq(int, tg_checkpoint_save(a.ck, path, NULL), TG_OK));
    run_steps(&a, f, 2);
    run b = run_new(f);
    cr_assert(eq(int, tg_checkpoint_load(b.ck, path), TG_OK), "%s", tg_error_message());
    cr_assert(eq(i64, n_averaged(b.ema), 2));
    run_steps(&b, f, 2);
    tg_st_file *sa = NULL;
    cr_assert(eq(int, tg_st_new(&sa), TG_OK));
    cr_assert(eq(int, tg_module_state_dict_save(a.ema, sa, "a"), TG_OK));
    th_expect_state(b.ema, sa, "a", 0);
    cr_assert(eq(i64, n_averaged(b.ema), 4));
    tg_st_free(sa);
    run_free(&b);
    run_free(&a);
    tg_st_free(f);
}

/* Fails unless avg's state is before's (a copy taken earlier), bit for bit. */
static void expect_unchanged(const tg_module *avg, const tg_module *before)
{
    tg_st_file *s = NULL;
    cr_assert(eq(int, tg_st_new(&s), TG_OK));
    cr_assert(eq(int, tg_module_state_dict_save(before, s, "b"), TG_OK));
    th_expect_state(avg, s, "b", 0);
    tg_st_free(s);
}

static void expect_update_refused(tg_module *avg, const tg_module *model, int status,
                                  const char *words)
{
    tg_module *before = NULL;
    cr_assert(eq(int, tg_module_copy(&before, avg), TG_OK));
    th_expect_refused(tg_averaged_model_update(avg, model), status, words, NULL);
    expect_unchanged(avg, before);
    tg_module_release(before);
}

static const tg_module_vtable tie_vt = {.type_name = "Tie"};

/* A module with parameters "a" and "b" of 3 elements, one tensor when tied. */
static tg_module *pair(bool tied)
{
    tg_module *m = NULL;
    tg_tensor *a = th_rand_uniform(TG_F32, 1, (int64_t[]){3}, 1);
    tg_tensor *b = tied ? tg_tensor_retain(a) : th_rand_uniform(TG_F32, 1, (int64_t[]){3}, 2);
    cr_assert(eq(int, tg_module_new(&m, &tie_vt, NULL), TG_OK));
    cr_assert(eq(int, tg_module_add_parameter(m, "a", a), TG_OK));
    cr_assert(eq(int, tg_module_add_parameter(m, "b", b), TG_OK));
    return m;
}

Test(averaged_model, refusals_change_nothing)
{
    tg_st_file *f = golden();
    tg_module *gen = generator(f, TG_F32), *avg = NULL, *other = NULL, *lin = NULL;
    const double bad[4] = {1.0, 1.5, NAN, -INFINITY};
    for (int i = 0; i < 4; i++) {
        th_expect_refused(tg_averaged_model_new(&avg, gen, bad[i], false), TG_EINVAL, "decay",
                          NULL);
        cr_assert(avg == NULL);
    }
    cr_assert(eq(int, tg_averaged_model_new(NULL, gen, 0.5, false), TG_EINVAL));
    cr_assert(eq(int, tg_averaged_model_new(&avg, NULL, 0.5, false), TG_EINVAL));
    avg = averaged(gen, &kinds[1]);
    load(gen, f, "f32.step1");
    cr_assert(eq(int, tg_averaged_model_update(avg, gen), TG_OK));
    /* another shape, dtype or structure, each named */
    tg_rng rng;
    tg_rng_init(&rng, 3);
    other = generator(NULL, TG_F32);
    cr_assert(eq(int, tg_nn_linear_new(&lin, 6, 15, true, &rng), TG_OK));
    cr_assert(eq(int, tg_module_add_child(other, "0x", lin), TG_OK));
    expect_update_refused(avg, other, TG_EINVAL, "'0x.weight' is in the model only");
    tg_module_release(other);
    other = generator(NULL, TG_F64);
    expect_update_refused(avg, other, TG_EDTYPE, "'0.weight' has dtype f64 in the model");
    tg_module_release(other);
    cr_assert(eq(int, tg_nn_sequential_new(&other), TG_OK));
    cr_assert(eq(int, tg_nn_linear_new(&lin, 6, 15, true, &rng), TG_OK));
    cr_assert(eq(int, tg_nn_sequential_append(other, lin), TG_OK));
    expect_update_refused(avg, other, TG_ESHAPE, "'0.weight' has shape (15, 6) in the model");
    tg_module_release(other);
    /* not an averaged model; n_averaged out of range */
    th_expect_refused(tg_averaged_model_update(gen, gen), TG_EINVAL,
                      "not one made by tg_averaged_model_new", NULL);
    cr_assert(eq(int, tg_averaged_model_update(NULL, gen), TG_EINVAL));
    cr_assert(eq(int, tg_averaged_model_update(avg, NULL), TG_EINVAL));
    cr_assert(eq(int, tg_tensor_set_flat(tg_module_find(avg, "n_averaged"), 0, -1), TG_OK));
    expect_update_refused(avg, gen, TG_EINVAL, "n_averaged = -1");
    tg_module_release(avg);
    /* weights tied in one model only */
    tg_module *tied = pair(true), *untied = pair(false);
    cr_assert(eq(int, tg_averaged_model_new(&avg, tied, 0.5, false), TG_OK));
    expect_update_refused(avg, untied, TG_EINVAL, "tie weights differently");
    cr_assert(eq(int, tg_averaged_model_update(avg, tied), TG_OK));
    tg_module_release(avg);
    tg_module_release(tied);
    tg_module_release(untied);
    tg_module_release(gen);
    tg_st_free(f);
}

Test(averaged_model, copy_parameters_flags_and_forward)
{
    tg_module *gen = generator(NULL, TG_F32), *avg = averaged(gen, &kinds[4]);
    double decay = 0;
    bool use_buffers = false;
    cr_assert(eq(int, tg_averaged_model_params(avg, &decay, &use_buffers), TG_OK));
    cr_assert(decay == -1.0 && use_buffers);
    cr_assert(eq(int, tg_averaged_model_params(avg, NULL, NULL), TG_OK));
    cr_assert(eq(int, tg_averaged_model_params(gen, &decay, NULL), TG_EINVAL));
    cr_assert(eq(str, (char *)tg_module_type_name(avg), "AveragedModel"));
    cr_assert(eq(i64, n_averaged(avg), 0));
    /* the copy's parameters: the model's values, not requiring grad */
    tg_module *inner = tg_module_child(avg, "module");
    tg_tensor *w = tg_module_find(inner, "0.weight"), *w0 = tg_module_find(gen, "0.weight");
    cr_assert(w != NULL && w != w0 && !tg_tensor_shares_storage(w, w0));
    th_expect_same_bits("0.weight", w0, w, w0);
    cr_assert(tg_tensor_requires_grad(w0) && !tg_tensor_requires_grad(w));
    /* forward is the copy's; the model's changes reach it only by update */
    tg_tensor *z = th_rand_uniform(TG_F32, 2, (int64_t[]){3, 6}, 8), *y0 = NULL, *y1 = NULL;
    tg_module_train(gen, false);
    tg_module_train(avg, false);
    cr_assert(eq(int, tg_module_forward(gen, &y0, z), TG_OK));
    cr_assert(eq(int, tg_module_forward(avg, &y1, z), TG_OK));
    th_expect_same_bits("forward", z, y1, y0);
    cr_assert(not(tg_tensor_requires_grad(y1)));
    cr_assert(eq(int, tg_tensor_fill(w0, 0.5), TG_OK));
    cr_assert(th_at(w, 0) != 0.5);
    cr_assert(eq(int, tg_averaged_model_update(avg, gen), TG_OK));
    cr_assert(eq(dbl, th_at(w, 0), 0.5));
    cr_assert(eq(dbl, th_at(w0, 0), 0.5));
    th_release_all(3, (tg_tensor *[]){z, y0, y1});
    tg_module_release(avg);
    tg_module_release(gen);
}
