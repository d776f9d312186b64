/* tests/test_checkpoint.c - checkpoint.h: round trip of every slot kind
 * (and of an RMSprop's state), atomic save under a failing write, slot and
 * metadata names, a resumed dropout.  All-or-nothing load is in
 * test_checkpoint_load.c. */
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
#include "checkpoint_fixtures.h"
#include "tapegrad/autograd.h"
#include "tapegrad/checkpoint.h"
#include "tapegrad/loss.h"
#include "tapegrad/ops.h"

TestSuite(checkpoint, .init = checkpoint_setup, .fini = th_tmp_dir_remove);

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
