/* tests/test_train.c - the DCGAN trainer of examples/dcgan on synthetic data:
 * the loss goes down, and a run stopped, checkpointed and resumed in fresh
 * objects continues with bit-identical losses.
 *
 * The example's sources are compiled into this test directly (one
 * translation unit), so tests/meson.build needs no per-test source list. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../examples/dcgan/model.c"
#undef TRY
#include "../examples/dcgan/train.c"
#undef TRY
#include "../examples/dcgan/opts.c"

#include "bar_images.h"

/* 128 synthetic images (bar_images.h), made or the test fails. */
static tg_dataset *synthetic(void)
{
    tg_dataset *ds = bar_images(128);
    cr_assert(ds != NULL, "bar_images: %s", tg_error_message());
    return ds;
}

static dcgan_opts tiny(dcgan_loss loss)
{
    dcgan_opts o = DCGAN_OPTS_INIT;
    o.arch = (dcgan_arch){.nz = 8, .g_ch = 8, .d_ch = 4, .d_batchnorm = loss == DCGAN_LOSS_BCE};
    o.loss = loss;
    o.batch = 32;   /* 4 batches per epoch: 6 steps cross an epoch boundary */
    o.seed = 3;
    o.n_critic = 2;
    if (loss == DCGAN_LOSS_WGAN_GP) o.beta1 = 0.0, o.beta2 = 0.9;
    return o;
}

/* n steps (starting a new epoch whenever one ends), losses into d[], g[]. */
static void run_steps(dcgan_trainer *t, int n, double *d, double *g)
{
    for (int i = 0; i < n; i++) {
        int rc = dcgan_trainer_step(t, &d[i], &g[i]);
        if (rc == 0) {
            cr_assert(eq(int, dcgan_trainer_next_epoch(t), 0));
            rc = dcgan_trainer_step(t, &d[i], &g[i]);
        }
        cr_assert(eq(int, rc, 1), "step %d: %s", i, tg_error_message());
    }
}

Test(train, discriminator_loss_goes_down_on_an_easy_problem)
{
    /* Bars against the untrained generator's near-constant output are easy
     * to tell apart: D's loss must fall well below its chance level
     * 2 ln 2 = 1.386 within a few steps. */
    tg_dataset *ds = synthetic();
    dcgan_opts o = tiny(DCGAN_LOSS_BCE);
    o.lr = 1e-3;
    dcgan_trainer *t;
    cr_assert(eq(int, dcgan_trainer_new(&t, &o, ds), 0), "%s", tg_error_message());
    double d[24], g[24];
    run_steps(t, 24, d, g);
    double first = (d[0] + d[1] + d[2]) / 3, last = (d[21] + d[22] + d[23]) / 3;
    cr_assert(first > 1.0, "first D losses near chance: %g", first);
    cr_assert(lt(dbl, last, 0.5 * first), "D loss %g -> %g", first, last);
    for (int i = 0; i < 24; i++) cr_assert(isfinite(g[i]));
    dcgan_trainer_free(t);
    tg_dataset_release(ds);
}

/* 6 steps straight, and 3 + checkpoint + fresh trainer + load + 3: the
 * losses must be identical bit for bit. */
static void check_resume(dcgan_loss loss, tg_dtype amp)
{
    tg_dataset *ds = synthetic();
    dcgan_opts o = tiny(loss);
    o.amp = amp;
    double d_ref[6], g_ref[6], d[6], g[6];
    dcgan_trainer *t;
    cr_assert(eq(int, dcgan_trainer_new(&t, &o, ds), 0), "%s", tg_error_message());
    run_steps(t, 6, d_ref, g_ref);
    dcgan_trainer_free(t);

    char path[] = "/tmp/tg_train_ckXXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    cr_assert(eq(int, dcgan_trainer_new(&t, &o, ds), 0));
    run_steps(t, 3, d, g);
    cr_assert(eq(int, tg_checkpoint_save(t->ck, path, NULL), 0), "%s", tg_error_message());
    dcgan_trainer_free(t);

    /* A fresh trainer with the same options, moved two steps away from the
     * saved state: everything (weights, Adam state, step, RNG) must then
     * come from the file. */
    cr_assert(eq(int, dcgan_trainer_new(&t, &o, ds), 0));
    double scratch_d[2], scratch_g[2];
    run_steps(t, 2, scratch_d, scratch_g);   /* move it away from step 0 */
    cr_assert(eq(int, tg_checkpoint_load(t->ck, path), 0), "%s", tg_error_message());
    cr_assert(eq(i64, t->step, 3));
    run_steps(t, 3, d + 3, g + 3);
    dcgan_trainer_free(t);
    unlink(path);
    cr_assert(eq(int, memcmp(d, d_ref, sizeof d), 0), "D losses differ after resume");
    if (loss == DCGAN_LOSS_BCE)
        cr_assert(eq(int, memcmp(g, g_ref, sizeof g), 0), "G losses differ after resume");
    else   /* g[0] comes before the first generator step: compare from step 2 */
        cr_assert(eq(int, memcmp(g + 1, g_ref + 1, 5 * sizeof *g), 0));
    tg_dataset_release(ds);
}

Test(train, resume_gives_bit_identical_losses_bce)
{
    check_resume(DCGAN_LOSS_BCE, TG_F32);
}

Test(train, resume_gives_bit_identical_losses_wgan_gp)
{
    check_resume(DCGAN_LOSS_WGAN_GP, TG_F32);
}

Test(train, resume_gives_bit_identical_losses_f16_amp)
{
    check_resume(DCGAN_LOSS_BCE, TG_F16);
}

Test(train, options_mismatch_refuses_to_resume)
{
    tg_dataset *ds = synthetic();
    dcgan_opts o = tiny(DCGAN_LOSS_BCE);
    char path[] = "/tmp/tg_train_ckXXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    dcgan_trainer *t;
    cr_assert(eq(int, dcgan_trainer_new(&t, &o, ds), 0));
    cr_assert(eq(int, tg_checkpoint_save(t->ck, path, NULL), 0));
    dcgan_trainer_free(t);
    const double saved_lr = o.lr;
    o.lr = 1e-3;
    cr_assert(eq(int, dcgan_trainer_new(&t, &o, ds), 0));
    cr_assert(eq(int, tg_checkpoint_load(t->ck, path), TG_EINVAL));
    dcgan_trainer_free(t);
    /* and the options read back from the file are the saved ones */
    tg_st_file *f;
    cr_assert(eq(int, tg_safetensors_load(&f, path), 0));
    dcgan_opts back = DCGAN_OPTS_INIT;
    cr_assert(eq(int, dcgan_opts_from_meta(&back, f), 0));
    cr_assert(eq(dbl, back.lr, saved_lr));
    cr_assert(eq(i64, back.arch.nz, 8));
    cr_assert(eq(i64, back.batch, 32));
    tg_st_free(f);
    unlink(path);
    tg_dataset_release(ds);
}

/* --amp keeps f32 master weights and computes in half: the generator's
 * output (after two ConvTranspose layers, PROMOTE ops) is half under the
 * trainer's autocast, its parameters and their gradients stay f32, and
 * without --amp nothing is half. */
Test(train, amp_generator_runs_half_on_f32_master_weights)
{
    tg_dataset *ds = synthetic();
    const tg_dtype amps[3] = {TG_F32, TG_BF16, TG_F16};
    for (int a = 0; a < 3; a++) {
        dcgan_opts o = tiny(DCGAN_LOSS_BCE);
        o.amp = amps[a];
        dcgan_trainer *t;
        cr_assert(eq(int, dcgan_trainer_new(&t, &o, ds), 0), "%s", tg_error_message());
        cr_assert(eq(int, tg_module_is_autocast_weights(t->gen), amps[a] != TG_F32));
        double d, g;
        cr_assert(eq(int, dcgan_trainer_step(t, &d, &g), 1), "%s", tg_error_message());
        tg_tensor *z = NULL, *y = NULL, **params;
        int n;
        cr_assert(eq(int, tg_tensor_zeros(&z, TG_F32, 2, (int64_t[]){4, o.arch.nz}), 0));
        cr_assert(eq(int, forward(t, t->gen, &y, z), 0), "%s", tg_error_message());
        cr_assert(eq(int, tg_tensor_dtype(y), amps[a]), "--amp %s", tg_dtype_name(amps[a]));
        cr_assert(eq(int, tg_module_parameters(t->gen, &params, &n), 0));
        for (int i = 0; i < n; i++) {
            cr_assert(eq(int, tg_tensor_dtype(params[i]), TG_F32));
            tg_tensor *gr = tg_tensor_grad(params[i]);
            cr_assert(gr != NULL && tg_tensor_dtype(gr) == TG_F32, "param %d", i);
        }
        free(params);
        tg_tensor_release(y);
        tg_tensor_release(z);
        dcgan_trainer_free(t);
    }
    tg_dataset_release(ds);
}
