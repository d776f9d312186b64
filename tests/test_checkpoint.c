/* tests/test_checkpoint.c - checkpoint.h: round trip of every slot kind
 * (and of an RMSprop's state), atomic save under a failing write,
 * all-or-nothing load. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "helpers.h"
#include "tapegrad/autograd.h"
#include "tapegrad/checkpoint.h"
#include "tapegrad/loss.h"
#include "tapegrad/ops.h"

/* A small training state: Linear(4, 3) + BatchNorm1d(3), Adam, a loader over
 * 10 synthetic 1x2x2 images, an RNG, a step counter and a tensor. */
typedef struct state {
    tg_module *model;
    tg_optimizer *opt;
    tg_dataset *ds;
    tg_loader *ld;
    tg_rng rng;
    int64_t step;
    tg_tensor *extra;
    tg_checkpoint *ck;
} state;

static void state_init(state *s, uint64_t seed, bool with_opt)
{
    memset(s, 0, sizeof *s);
    tg_rng_init(&s->rng, seed);
    tg_module *lin, *bn, *flat;
    cr_assert(eq(int, tg_nn_sequential_new(&s->model), 0));
    cr_assert(eq(int, tg_nn_flatten_new(&flat, 1, -1), 0));
    cr_assert(eq(int, tg_nn_sequential_append(s->model, flat), 0));
    cr_assert(eq(int, tg_nn_linear_new(&lin, 4, 3, true, &s->rng), 0));
    cr_assert(eq(int, tg_nn_sequential_append(s->model, lin), 0));
    cr_assert(eq(int, tg_nn_batchnorm_new(&bn, 1, 3, 1e-5, 0.1, true, true), 0));
    cr_assert(eq(int, tg_nn_sequential_append(s->model, bn), 0));
    tg_tensor **params;
    int n;
    cr_assert(eq(int, tg_module_parameters(s->model, &params, &n), 0));
    /* options that differ with the seed, so that a load must restore them */
    tg_adam_opts o = TG_ADAM_OPTS_INIT;
    if (seed != 1) o.lr = 0.05, o.beta1 = 0.5, o.eps = 1e-3, o.weight_decay = 0.1;
    o.amsgrad = seed == 1;
    cr_assert(eq(int, tg_adam_new(&s->opt, n, params, &o), 0));
    free(params);
    uint8_t px[10 * 4];
    uint8_t lab[10];
    for (int i = 0; i < 40; i++) px[i] = (uint8_t)(i * 37 % 256);
    for (int i = 0; i < 10; i++) lab[i] = (uint8_t)(i % 3);
    tg_tensor *im, *lb;
    cr_assert(eq(int, tg_tensor_from_data(&im, TG_U8, 3, (int64_t[]){10, 2, 2}, px), 0));
    cr_assert(eq(int, tg_tensor_from_data(&lb, TG_U8, 1, (int64_t[]){10}, lab), 0));
    cr_assert(eq(int, tg_dataset_from_tensors(&s->ds, im, lb), 0));
    tg_tensor_release(im);
    tg_tensor_release(lb);
    tg_loader_options lo = {.batch_size = 4, .shuffle = true, .seed = 7, .drop_last = true};
    cr_assert(eq(int, tg_loader_new(&s->ld, s->ds, &lo), 0));
    cr_assert(eq(int, tg_tensor_full(&s->extra, TG_F32, 1, (int64_t[]){5}, (double)seed), 0));
    cr_assert(eq(int, tg_checkpoint_new(&s->ck), 0));
    cr_assert(eq(int, tg_checkpoint_add_module(s->ck, "model", s->model), 0));
    if (with_opt) cr_assert(eq(int, tg_checkpoint_add_optimizer(s->ck, "opt", s->opt), 0));
    cr_assert(eq(int, tg_checkpoint_add_loader(s->ck, "loader", s->ld), 0));
    cr_assert(eq(int, tg_checkpoint_add_rng(s->ck, "rng", &s->rng), 0));
    cr_assert(eq(int, tg_checkpoint_add_i64(s->ck, "step", &s->step), 0));
    cr_assert(eq(int, tg_checkpoint_add_tensor(s->ck, "extra", s->extra), 0));
    cr_assert(eq(int, tg_checkpoint_set_meta(s->ck, "arch", "lin4-3", true), 0));
}

static void state_free(state *s)
{
    tg_checkpoint_free(s->ck);
    tg_optimizer_free(s->opt);
    tg_module_release(s->model);
    tg_loader_free(s->ld);
    tg_dataset_release(s->ds);
    tg_tensor_release(s->extra);
}

/* One training step: next batch (new epoch when one ends), noise from rng
 * added to the target, MSE, Adam. */
static void state_step(state *s)
{
    tg_tensor *x, *y, *out, *target, *loss;
    int rc = tg_loader_next(s->ld, &x, &y);
    if (rc == 0) {
        int64_t e, i;
        tg_loader_position(s->ld, &e, &i);
        cr_assert(eq(int, tg_loader_reset(s->ld, e + 1), 0));
        rc = tg_loader_next(s->ld, &x, &y);
    }
    cr_assert(eq(int, rc, 1));
    cr_assert(eq(int, tg_module_forward(s->model, &out, x), 0));
    cr_assert(eq(int, tg_tensor_zeros(&target, TG_F32, 2, (int64_t[]){4, 3}), 0));
    cr_assert(eq(int, tg_tensor_rand_normal(target, &s->rng, 0, 1), 0));
    cr_assert(eq(int, tg_mse_loss(&loss, out, target, TG_REDUCTION_MEAN), 0));
    tg_optimizer_zero_grad(s->opt);
    cr_assert(eq(int, tg_backward(loss, NULL, NULL), 0));
    cr_assert(eq(int, tg_optimizer_step(s->opt), 0));
    s->step++;
    tg_tensor_fill(s->extra, (double)s->step);
    tg_tensor_release(x);
    tg_tensor_release(y);
    tg_tensor_release(out);
    tg_tensor_release(target);
    tg_tensor_release(loss);
}

/* Every tensor of a (as saved by a checkpoint without extras) equals b's,
 * bit for bit, and they have the same keys. */
static void assert_same_files(const tg_st_file *a, const tg_st_file *b)
{
    cr_assert(eq(int, tg_st_count(a), tg_st_count(b)));
    for (int i = 0; i < tg_st_count(a); i++) {
        const char *name;
        tg_tensor *ta, *tb, *ca, *cb;
        cr_assert(eq(int, tg_st_at(a, i, &name, &ta), 0));
        tb = tg_st_get(b, name);
        cr_assert(tb != NULL, "key %s missing", name);
        cr_assert(eq(int, tg_tensor_dtype(ta), tg_tensor_dtype(tb)), "%s", name);
        cr_assert(tg_tensor_same_shape(ta, tb), "%s", name);
        cr_assert(eq(int, tg_tensor_contiguous(&ca, ta), 0));
        cr_assert(eq(int, tg_tensor_contiguous(&cb, tb), 0));
        size_t bytes = (size_t)tg_tensor_numel(ta) * tg_dtype_size(tg_tensor_dtype(ta));
        cr_assert(eq(int, memcmp(tg_tensor_cdata(ca), tg_tensor_cdata(cb), bytes), 0), "%s",
                  name);
        tg_tensor_release(ca);
        tg_tensor_release(cb);
    }
}

/* The state as a file in memory (deep copies: a later step does not change it). */
static tg_st_file *snapshot(const state *s)
{
    char path[] = "/tmp/tg_ck_snapXXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    cr_assert(eq(int, tg_checkpoint_save(s->ck, path, NULL), 0), "%s", tg_error_message());
    tg_st_file *f;
    cr_assert(eq(int, tg_safetensors_load(&f, path), 0));
    unlink(path);
    return f;
}

static char ck_path[128];

static void setup(void)
{
    th_tmp_dir_make("tg_ck_");
    th_tmp_path(ck_path, sizeof ck_path, "checkpoint.safetensors");
}

TestSuite(checkpoint, .init = setup, .fini = th_tmp_dir_remove);

Test(checkpoint, round_trip_restores_every_slot_bit_for_bit)
{
    state a, b;
    state_init(&a, 1, true);
    for (int i = 0; i < 3; i++) state_step(&a);   /* mid-epoch: 3 of 2 batches/epoch */
    cr_assert(eq(int, tg_checkpoint_save(a.ck, ck_path, NULL), 0), "%s", tg_error_message());
    tg_st_file *want = snapshot(&a);

    state_init(&b, 99, true);   /* different weights and options, no optimizer state yet */
    cr_assert(eq(int, tg_checkpoint_load(b.ck, ck_path), 0), "%s", tg_error_message());
    tg_st_file *got = snapshot(&b);
    assert_same_files(want, got);
    cr_assert(eq(i64, b.step, 3));
    cr_assert(eq(u64, b.rng.seed, a.rng.seed));
    cr_assert(eq(u64, b.rng.counter, a.rng.counter));
    int64_t ea, ia, eb, ib;
    tg_loader_position(a.ld, &ea, &ia);
    tg_loader_position(b.ld, &eb, &ib);
    cr_assert(eq(i64, ea, eb));
    cr_assert(eq(i64, ia, ib));

    /* Both continue identically: the same next 3 steps, bit for bit. */
    for (int i = 0; i < 3; i++) {
        state_step(&a);
        state_step(&b);
    }
    tg_st_file *fa = snapshot(&a), *fb = snapshot(&b);
    assert_same_files(fa, fb);
    tg_st_free(fa);
    tg_st_free(fb);
    tg_st_free(want);
    tg_st_free(got);
    state_free(&a);
    state_free(&b);
}

/* Sets the gradient of p to a fixed draw of step k. */
static void rms_grad(tg_tensor *p, uint64_t k)
{
    tg_tensor *g = th_rand_uniform(TG_F32, 1, (int64_t[]){6}, 40 + k);
    cr_assert(eq(int, tg_tensor_set_grad(p, g), 0));
}

/* An RMSprop slot (momentum, centered, two groups) saved after two steps
 * and loaded into an RMSprop made with other options and no state, over
 * copies of the parameters: both take the next three steps with the same
 * bits. */
Test(checkpoint, rmsprop_state_round_trips)
{
    tg_tensor *p[2], *q[2];
    tg_optimizer *a = NULL, *b = NULL;
    tg_checkpoint *ca = NULL, *cb = NULL;
    for (int j = 0; j < 2; j++) {
        p[j] = th_rand_uniform(TG_F32, 1, (int64_t[]){6}, 1 + (uint64_t)j);
        tg_tensor_set_requires_grad(p[j], true);
    }
    tg_rmsprop_opts o = TG_RMSPROP_OPTS_INIT, other = TG_RMSPROP_OPTS_INIT;
    o.momentum = 0.9, o.alpha = 0.8, o.weight_decay = 0.01;
    cr_assert(eq(int, tg_rmsprop_new(&a, 1, &p[0], &o), 0));
    o.centered = true, o.momentum = 0, o.lr = 0.03;
    cr_assert(eq(int, tg_rmsprop_add_param_group(a, 1, &p[1], &o), 0));
    for (int k = 0; k < 2; k++) {
        rms_grad(p[0], (uint64_t)k), rms_grad(p[1], 10 + (uint64_t)k);
        cr_assert(eq(int, tg_optimizer_step(a), 0));
    }
    cr_assert(eq(int, tg_checkpoint_new(&ca), 0));
    cr_assert(eq(int, tg_checkpoint_add_optimizer(ca, "opt", a), 0));
    cr_assert(eq(int, tg_checkpoint_save(ca, ck_path, NULL), 0), "%s", tg_error_message());
    for (int j = 0; j < 2; j++) {   /* the parameters are not in the checkpoint */
        cr_assert(eq(int, tg_tensor_clone(&q[j], p[j]), 0));
        tg_tensor_set_requires_grad(q[j], true);
    }
    other.lr = 0.7;
    cr_assert(eq(int, tg_rmsprop_new(&b, 1, &q[0], &other), 0));
    cr_assert(eq(int, tg_rmsprop_add_param_group(b, 1, &q[1], NULL), 0));
    cr_assert(eq(int, tg_checkpoint_new(&cb), 0));
    cr_assert(eq(int, tg_checkpoint_add_optimizer(cb, "opt", b), 0));
    cr_assert(eq(int, tg_checkpoint_load(cb, ck_path), 0), "%s", tg_error_message());
    cr_assert(eq(dbl, tg_optimizer_get_group_lr(b, 1), 0.03));
    for (int k = 2; k < 5; k++) {
        rms_grad(p[0], (uint64_t)k), rms_grad(p[1], 10 + (uint64_t)k);
        rms_grad(q[0], (uint64_t)k), rms_grad(q[1], 10 + (uint64_t)k);
        cr_assert(eq(int, tg_optimizer_step(a), 0));
        cr_assert(eq(int, tg_optimizer_step(b), 0));
    }
    for (int j = 0; j < 2; j++) th_expect_same_bits("rmsprop", p[j], q[j], p[j]);
    tg_checkpoint_free(ca);
    tg_checkpoint_free(cb);
    tg_optimizer_free(a);
    tg_optimizer_free(b);
    th_release_all(2, p);
    th_release_all(2, q);
}

Test(checkpoint, failed_save_leaves_the_old_checkpoint_intact)
{
    state a;
    state_init(&a, 1, true);
    cr_assert(eq(int, tg_checkpoint_save(a.ck, ck_path, NULL), 0));
    tg_st_file *before = snapshot(&a);
    state_step(&a);   /* Adam state appears: the next file is larger */
    /* Writes beyond 1 KiB fail with EFBIG in this (forked) test process. */
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit old, lim = {1024, 1024};
    getrlimit(RLIMIT_FSIZE, &old);
    cr_assert(eq(int, setrlimit(RLIMIT_FSIZE, &lim), 0));
    int rc = tg_checkpoint_save(a.ck, ck_path, NULL);
    setrlimit(RLIMIT_FSIZE, &old);
    cr_assert(eq(int, rc, TG_EIO), "%s", tg_error_message());
    tg_st_file *on_disk;
    cr_assert(eq(int, tg_safetensors_load(&on_disk, ck_path), 0), "%s", tg_error_message());
    assert_same_files(before, on_disk);
    tg_st_free(on_disk);
    tg_st_free(before);
    state_free(&a);
}

/* Loads path into a fresh state built with seed 5 and asserts status rc and
 * that nothing changed. */
static void assert_load_changes_nothing(const char *path, bool with_opt, int want_rc)
{
    state b;
    state_init(&b, 5, with_opt);
    state_step(&b);
    tg_st_file *before = snapshot(&b);
    /* nor any version counter: a graph that saved the weights still runs */
    tg_tensor **params = NULL;
    int np = 0;
    cr_assert(eq(int, tg_module_parameters(b.model, &params, &np), 0));
    uint64_t versions[16];
    cr_assert(np <= 16);
    for (int i = 0; i < np; i++) versions[i] = tg_tensor_version(params[i]);
    int rc = tg_checkpoint_load(b.ck, path);
    cr_assert(eq(int, rc, want_rc), "%s", tg_error_message());
    tg_st_file *after = snapshot(&b);
    assert_same_files(before, after);
    for (int i = 0; i < np; i++)
        cr_assert(eq(u64, tg_tensor_version(params[i]), versions[i]), "param %d", i);
    free(params);
    cr_assert(eq(i64, b.step, 1));
    tg_st_free(before);
    tg_st_free(after);
    state_free(&b);
}

Test(checkpoint, truncated_file_changes_nothing)
{
    state a;
    state_init(&a, 1, true);
    state_step(&a);
    cr_assert(eq(int, tg_checkpoint_save(a.ck, ck_path, NULL), 0));
    FILE *fp = fopen(ck_path, "rb");
    fseek(fp, 0, SEEK_END);
    long size = ftell(fp);
    fclose(fp);
    cr_assert(eq(int, truncate(ck_path, size - 7), 0));
    assert_load_changes_nothing(ck_path, true, TG_EFORMAT);
    /* the message names the file and says what it looks like */
    th_expect_in(tg_error_message(), "(a truncated file?)");
    th_expect_in(tg_error_message(), ck_path);
    state_free(&a);
}

Test(checkpoint, missing_slot_is_found_before_any_slot_loads)
{
    /* The file has the model but no optimizer: the optimizer's check fails
     * before the model (an earlier slot) is loaded. */
    state a;
    state_init(&a, 1, false);
    state_step(&a);
    cr_assert(eq(int, tg_checkpoint_save(a.ck, ck_path, NULL), 0));
    assert_load_changes_nothing(ck_path, true, TG_ENOTFOUND);
    state_free(&a);
}

/* Slots are all checked before any is loaded: a file missing one module key
 * leaves a grad scaler's step in progress (inf found, no step) as it was,
 * and the weights' version counters, so a recorded graph still runs. */
Test(checkpoint, failed_load_leaves_a_scaler_mid_step_and_live_graphs_alone)
{
    tg_rng rng;
    tg_rng_init(&rng, 3);
    tg_module *a = NULL, *b = NULL;
    tg_grad_scaler *gs = NULL;
    cr_assert(eq(int, tg_nn_linear_new(&a, 3, 2, true, &rng), 0));
    cr_assert(eq(int, tg_nn_linear_new(&b, 3, 2, true, &rng), 0));
    cr_assert(eq(int, tg_grad_scaler_new(&gs, NULL), 0));
    tg_checkpoint *ck = NULL;
    cr_assert(eq(int, tg_checkpoint_new(&ck), 0));
    cr_assert(eq(int, tg_checkpoint_add_grad_scaler(ck, "amp", gs), 0));
    cr_assert(eq(int, tg_checkpoint_add_module(ck, "a", a), 0));
    cr_assert(eq(int, tg_checkpoint_add_module(ck, "b", b), 0));
    cr_assert(eq(int, tg_checkpoint_save(ck, ck_path, NULL), 0));
    tg_st_file *f = NULL, *g = NULL;
    cr_assert(eq(int, tg_safetensors_load(&f, ck_path), 0));
    cr_assert(eq(int, tg_st_new(&g), 0));   /* f without "b.bias" */
    for (int i = 0; i < tg_st_count(f); i++) {
        const char *name;
        tg_tensor *t;
        tg_st_at(f, i, &name, &t);
        if (strcmp(name, "b.bias") != 0) cr_assert(eq(int, tg_st_set(g, name, t), 0));
    }
    for (int i = 0; i < tg_st_meta_count(f); i++) {
        const char *k, *v;
        tg_st_meta_at(f, i, &k, &v);
        cr_assert(eq(int, tg_st_meta_set(g, k, v), 0));
    }
    /* a step in progress: a's weight got an inf gradient, unscaled */
    tg_tensor *w = tg_module_find(a, "weight"), *inf = NULL;
    cr_assert(eq(int, tg_tensor_full(&inf, TG_F32, 2, (int64_t[]){2, 3}, INFINITY), 0));
    cr_assert(eq(int, tg_tensor_set_grad(w, inf), 0));
    cr_assert(eq(int, tg_grad_scaler_unscale(gs, 1, &w), 0));
    cr_assert(eq(int, tg_grad_scaler_should_step(gs), 0));
    /* and a recorded forward of a */
    tg_tensor *x = NULL, *y = NULL, *l = NULL;
    cr_assert(eq(int, tg_tensor_full(&x, TG_F32, 2, (int64_t[]){4, 3}, 0.5), 0));
    cr_assert(eq(int, tg_module_forward(a, &y, x), 0));
    cr_assert(eq(int, tg_sum(&l, y), 0));

    cr_assert(eq(int, tg_checkpoint_load_file(ck, g), TG_ENOTFOUND));
    cr_assert(strstr(tg_error_message(), "b.bias") != NULL, "%s", tg_error_message());
    cr_assert(eq(int, tg_grad_scaler_should_step(gs), 0), "the failed load cleared found_inf");
    cr_assert(eq(int, tg_grad_scaler_update(gs), 0));
    cr_assert(eq(dbl, tg_grad_scaler_get_scale(gs), 32768.0));   /* backed off */
    cr_assert(eq(int, tg_backward(l, NULL, NULL), 0), "%s", tg_error_message());

    tg_tensor_release(l), tg_tensor_release(y), tg_tensor_release(x);
    tg_st_free(f), tg_st_free(g);
    tg_checkpoint_free(ck);
    tg_grad_scaler_free(gs);
    tg_module_release(a), tg_module_release(b);
}

Test(checkpoint, wrong_shape_or_metadata_changes_nothing)
{
    state a;
    state_init(&a, 1, true);
    cr_assert(eq(int, tg_checkpoint_set_meta(a.ck, "arch", "other", false), 0));
    cr_assert(eq(int, tg_checkpoint_save(a.ck, ck_path, NULL), 0));
    assert_load_changes_nothing(ck_path, true, TG_EINVAL);

    /* A model with a different width: its Linear weight is (5, 4). */
    tg_st_file *f;
    cr_assert(eq(int, tg_safetensors_load(&f, ck_path), 0));
    tg_tensor *w;
    cr_assert(eq(int, tg_tensor_zeros(&w, TG_F32, 2, (int64_t[]){5, 4}), 0));
    cr_assert(eq(int, tg_st_set(f, "model.1.weight", w), 0));
    cr_assert(eq(int, tg_st_meta_set(f, "arch", "lin4-3"), 0));
    cr_assert(eq(int, tg_safetensors_save(f, ck_path), 0));
    assert_load_changes_nothing(ck_path, true, TG_ESHAPE);
    tg_tensor_release(w);
    tg_st_free(f);

    /* An optimizer's beta1 of 2, refused by the check before any slot loads */
    cr_assert(eq(int, tg_checkpoint_save(a.ck, ck_path, NULL), 0));
    cr_assert(eq(int, tg_safetensors_load(&f, ck_path), 0));
    cr_assert(eq(int, tg_tensor_from_data(&w, TG_F64, 1, (int64_t[]){2}, (double[]){2, 0.999}),
                 0));
    cr_assert(eq(int, tg_st_set(f, "opt.betas", w), 0));
    cr_assert(eq(int, tg_st_meta_set(f, "arch", "lin4-3"), 0));
    cr_assert(eq(int, tg_safetensors_save(f, ck_path), 0));
    assert_load_changes_nothing(ck_path, true, TG_EINVAL);
    cr_assert(strstr(tg_error_message(), "'opt.betas'[0]=2") != NULL, "%s", tg_error_message());
    tg_tensor_release(w);
    tg_st_free(f);
    state_free(&a);
}

Test(checkpoint, loader_position_out_of_range_changes_nothing)
{
    /* The loader is the third slot: its position (index 11 > 10 samples)
     * is refused before the model and the optimizer are loaded. */
    state a;
    state_init(&a, 1, true);
    state_step(&a);
    tg_st_file *f = snapshot(&a);
    tg_tensor *pos;
    cr_assert(eq(int, tg_tensor_from_data(&pos, TG_I64, 1, (int64_t[]){2},
                                          (int64_t[]){0, 11}), 0));
    cr_assert(eq(int, tg_st_set(f, "loader", pos), 0));
    cr_assert(eq(int, tg_st_meta_set(f, "arch", "lin4-3"), 0));
    cr_assert(eq(int, tg_safetensors_save(f, ck_path), 0));
    assert_load_changes_nothing(ck_path, true, TG_EINVAL);
    tg_tensor_release(pos);
    tg_st_free(f);
    state_free(&a);
}

Test(checkpoint, not_a_checkpoint_is_a_format_error)
{
    tg_st_file *f;
    tg_tensor *t;
    cr_assert(eq(int, tg_st_new(&f), 0));
    cr_assert(eq(int, tg_tensor_scalar(&t, TG_I64, 3), 0));
    cr_assert(eq(int, tg_st_set(f, "step", t), 0));
    cr_assert(eq(int, tg_safetensors_save(f, ck_path), 0));
    assert_load_changes_nothing(ck_path, true, TG_EFORMAT);
    tg_tensor_release(t);
    tg_st_free(f);
}

Test(checkpoint, slot_names_must_not_clash)
{
    tg_checkpoint *ck;
    int64_t a = 0, b = 0;
    cr_assert(eq(int, tg_checkpoint_new(&ck), 0));
    cr_assert(eq(int, tg_checkpoint_add_i64(ck, "gen", &a), 0));
    cr_assert(eq(int, tg_checkpoint_add_i64(ck, "gen", &b), TG_EINVAL));
    cr_assert(eq(int, tg_checkpoint_add_i64(ck, "gen.x", &b), TG_EINVAL));
    cr_assert(eq(int, tg_checkpoint_add_i64(ck, "", &b), TG_EINVAL));
    cr_assert(eq(int, tg_checkpoint_add_i64(ck, "x.", &b), TG_EINVAL));
    cr_assert(eq(int, tg_checkpoint_add_i64(ck, "generator", &b), 0));
    cr_assert(eq(int, tg_checkpoint_add_i64(ck, "n", NULL), TG_EINVAL));
    cr_assert(eq(int, tg_checkpoint_set_meta(ck, "format", "x", false), TG_EINVAL));
    /* extras may not land on a slot's keys or on the format key */
    tg_st_file *extra;
    tg_tensor *t;
    cr_assert(eq(int, tg_st_new(&extra), 0));
    cr_assert(eq(int, tg_tensor_scalar(&t, TG_F32, 1), 0));
    cr_assert(eq(int, tg_st_set(extra, "gen.w", t), 0));
    cr_assert(eq(int, tg_checkpoint_save(ck, ck_path, extra), TG_EINVAL));
    cr_assert(eq(int, access(ck_path, F_OK), -1), "nothing written");
    tg_tensor_release(t);
    tg_st_free(extra);
    cr_assert(eq(int, tg_st_new(&extra), 0));
    cr_assert(eq(int, tg_st_meta_set(extra, "format", "mine"), 0));
    cr_assert(eq(int, tg_checkpoint_save(ck, ck_path, extra), TG_EINVAL));
    tg_st_free(extra);
    /* and a valid extra tensor round-trips next to the slots */
    cr_assert(eq(int, tg_st_new(&extra), 0));
    cr_assert(eq(int, tg_tensor_scalar(&t, TG_F64, 2.5), 0));
    cr_assert(eq(int, tg_st_set(extra, "history", t), 0));
    a = 17;
    cr_assert(eq(int, tg_checkpoint_save(ck, ck_path, extra), 0));
    a = 0;
    cr_assert(eq(int, tg_checkpoint_load(ck, ck_path), 0));
    cr_assert(eq(i64, a, 17));
    tg_st_file *f;
    cr_assert(eq(int, tg_safetensors_load(&f, ck_path), 0));
    double v;
    cr_assert(eq(int, tg_tensor_get_flat(tg_st_get(f, "history"), 0, &v), 0));
    cr_assert(eq(dbl, v, 2.5));
    tg_st_free(f);
    tg_tensor_release(t);
    tg_st_free(extra);
    tg_checkpoint_free(ck);
}

/* Metadata set by the caller on a key that a slot writes itself (an
 * optimizer's "<slot>.kind"): refused at save, and the file on disk stays
 * the last good one, which still loads. */
Test(checkpoint, metadata_a_slot_writes_is_refused_at_save)
{
    tg_tensor *w = th_tensor_from(TG_F32, 1, (int64_t[]){3}, (double[]){1, 2, 3});
    tg_tensor_set_requires_grad(w, true);
    tg_optimizer *opt = NULL;
    const tg_adam_opts ao = TG_ADAM_OPTS_INIT;
    cr_assert(eq(int, tg_adam_new(&opt, 1, (tg_tensor *[]){w}, &ao), 0));
    tg_checkpoint *ck;
    cr_assert(eq(int, tg_checkpoint_new(&ck), 0));
    cr_assert(eq(int, tg_checkpoint_add_optimizer(ck, "opt", opt), 0));
    cr_assert(eq(int, tg_checkpoint_set_meta(ck, "run", "7", true), 0));
    cr_assert(eq(int, tg_checkpoint_save(ck, ck_path, NULL), 0));
    cr_assert(eq(int, tg_checkpoint_set_meta(ck, "opt.kind", "experiment-7", true), 0));
    cr_assert(eq(int, tg_checkpoint_save(ck, ck_path, NULL), TG_EINVAL));
    th_expect_in(tg_error_message(), "metadata 'opt.kind' (checkpoint_set_meta) is also "
                                     "written by a slot");
    tg_checkpoint *ck2;
    cr_assert(eq(int, tg_checkpoint_new(&ck2), 0));
    cr_assert(eq(int, tg_checkpoint_add_optimizer(ck2, "opt", opt), 0));
    cr_assert(eq(int, tg_checkpoint_set_meta(ck2, "run", "7", true), 0));
    cr_assert(eq(int, tg_checkpoint_load(ck2, ck_path), 0), "%s", tg_error_message());
    tg_checkpoint_free(ck2);
    tg_checkpoint_free(ck);
    tg_optimizer_free(opt);
    tg_tensor_release(w);
}

/* The zero pattern of m's next training forward on 32 ones. */
static void next_mask(tg_module *m, char out[33])
{
    tg_tensor *x, *y;
    cr_assert(eq(int, tg_tensor_full(&x, TG_F32, 1, (int64_t[]){32}, 1.0), 0));
    cr_assert(eq(int, tg_module_forward(m, &y, x), 0), "%s", tg_error_message());
    for (int i = 0; i < 32; i++) {
        double v = 0;
        cr_assert(eq(int, tg_tensor_get_flat(y, i, &v), 0));
        out[i] = v != 0 ? '1' : '0';
    }
    out[32] = '\0';
    tg_tensor_release(x);
    tg_tensor_release(y);
}

/* Sequential(Dropout(0.5, seed 42)) in slot "model", a bare Dropout in slot
 * "drop": a new checkpoint over fresh modules. */
static tg_checkpoint *dropout_checkpoint(tg_module **seq, tg_module **bare)
{
    tg_module *d;
    tg_checkpoint *ck;
    cr_assert(eq(int, tg_nn_sequential_new(seq), 0));
    cr_assert(eq(int, tg_nn_dropout_new(&d, 0.5, 42), 0));
    cr_assert(eq(int, tg_nn_sequential_append(*seq, d), 0));
    cr_assert(eq(int, tg_nn_dropout_new(bare, 0.5, 7), 0));
    cr_assert(eq(int, tg_checkpoint_new(&ck), 0));
    cr_assert(eq(int, tg_checkpoint_add_module(ck, "model", *seq), 0));
    cr_assert(eq(int, tg_checkpoint_add_module(ck, "drop", *bare), 0));
    return ck;
}

/* A Dropout's masks follow from its seed and the number drawn; the
 * checkpoint keeps that number (in its metadata, outside the state dict),
 * so a resumed run draws the masks the uninterrupted one would have.  A
 * file without the entry leaves the count; a bad one is refused with
 * nothing changed. */
Test(checkpoint, a_resumed_dropout_continues_its_mask_sequence)
{
    tg_module *seq, *bare, *seq2, *bare2;
    char want[33], want_bare[33], got[33], first[33];
    tg_checkpoint *ck = dropout_checkpoint(&seq, &bare);
    next_mask(seq, first);
    next_mask(seq, got);
    next_mask(bare, got);
    cr_assert(eq(int, tg_checkpoint_save(ck, ck_path, NULL), 0), "%s", tg_error_message());
    next_mask(seq, want);        /* mask 2 */
    next_mask(bare, want_bare);  /* mask 1 */
    tg_st_file *f = NULL;
    cr_assert(eq(int, tg_safetensors_load(&f, ck_path), 0));
    const char *c0 = tg_st_meta_get(f, "model.0.dropout_calls");
    const char *c1 = tg_st_meta_get(f, "drop.dropout_calls");
    cr_assert(c0 && strcmp(c0, "2") == 0, "model.0.dropout_calls is %s", c0 ? c0 : "missing");
    cr_assert(c1 && strcmp(c1, "1") == 0, "drop.dropout_calls is %s", c1 ? c1 : "missing");
    cr_assert(eq(int, tg_st_count(f), 0), "the counts are not state-dict keys");

    tg_checkpoint *ck2 = dropout_checkpoint(&seq2, &bare2);
    cr_assert(eq(int, tg_st_meta_set(f, "model.0.dropout_calls", "2x"), 0));
    cr_assert(eq(int, tg_checkpoint_load_file(ck2, f), TG_EFORMAT));
    th_expect_in(tg_error_message(), "'model.0.dropout_calls' is '2x'");
    cr_assert(eq(int, tg_st_meta_set(f, "model.0.dropout_calls", "2"), 0));
    cr_assert(eq(int, tg_checkpoint_load_file(ck2, f), 0), "%s", tg_error_message());
    next_mask(seq2, got);
    cr_assert(eq(str, got, want), "the resumed Dropout replayed another mask");
    next_mask(bare2, got);
    cr_assert(eq(str, got, want_bare));
    tg_checkpoint_free(ck2);
    tg_module_release(seq2);
    tg_module_release(bare2);

    /* a checkpoint without the counts (an older file): loads, counts kept */
    tg_st_file *old = NULL;
    cr_assert(eq(int, tg_st_new(&old), 0));
    cr_assert(eq(int, tg_st_meta_set(old, "format", TG_CHECKPOINT_FORMAT), 0));
    ck2 = dropout_checkpoint(&seq2, &bare2);
    cr_assert(eq(int, tg_checkpoint_load_file(ck2, old), 0), "%s", tg_error_message());
    next_mask(seq2, got);
    cr_assert(eq(str, got, first));
    tg_checkpoint_free(ck2);
    tg_module_release(seq2);
    tg_module_release(bare2);
    tg_st_free(old);
    tg_st_free(f);
    tg_checkpoint_free(ck);
    tg_module_release(seq);
    tg_module_release(bare);
}
