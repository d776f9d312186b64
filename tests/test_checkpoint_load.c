/* tests/test_checkpoint_load.c - checkpoint.h: all-or-nothing load.  A
 * truncated file, a missing slot, a wrong shape, metadata or option, a
 * loader position out of range or a file that is no checkpoint changes
 * nothing: not the state, not a grad scaler mid-step, not the version
 * counters a recorded graph checks. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "checkpoint_fixtures.h"
#include "tapegrad/autograd.h"
#include "tapegrad/checkpoint.h"
#include "tapegrad/loss.h"
#include "tapegrad/ops.h"

TestSuite(checkpoint_load, .init = checkpoint_setup, .fini = th_tmp_dir_remove);

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

Test(checkpoint_load, truncated_file_changes_nothing)
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

Test(checkpoint_load, missing_slot_is_found_before_any_slot_loads)
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
Test(checkpoint_load, failed_load_leaves_a_scaler_mid_step_and_live_graphs_alone)
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

Test(checkpoint_load, wrong_shape_or_metadata_changes_nothing)
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

Test(checkpoint_load, loader_position_out_of_range_changes_nothing)
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

Test(checkpoint_load, not_a_checkpoint_is_a_format_error)
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
