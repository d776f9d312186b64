/* tests/test_examples_dcgan_train.c - examples/dcgan's training options
 * --ema and --spectral-norm as a user runs them: what each run writes, that
 * --resume continues it, and the options a run refuses.
 *
 * The binary is TG_DCGAN (set by tests/meson.build); each run's stdout and
 * stderr go to files in a fresh temporary directory. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define DCGAN(...) th_run("TG_DCGAN", (const char *const[]){__VA_ARGS__, NULL})

static void setup(void) { th_tmp_dir_make("tg_examples_dcgan_train_"); }
static void teardown(void) { th_tmp_dir_remove(); }

TestSuite(examples_dcgan_train, .init = setup, .fini = teardown);

/* ---- dcgan --ema --------------------------------------------------------------- */

/* A small run's files under dir: args after the data and size options. */
#define SMALL_RUN(dir, ...)                                                    \
    DCGAN("--data", th_tmp_dir, "--out", dir, "--batch", "8", "--g-ch", "16", "--d-ch", "8", \
          "--threads", "1", __VA_ARGS__)

static tg_st_file *load_out(const char *dir, const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    tg_st_file *f = NULL;
    cr_assert(eq(int, tg_safetensors_load(&f, path), TG_OK), "%s: %s", path,
              tg_error_message());
    return f;
}

static bool same_file(const char *a, const char *b)
{
    size_t na = 0, nb = 0;
    char *da = th_read_file(a, &na), *db = th_read_file(b, &nb);
    cr_assert(da && db);
    bool same = na == nb && memcmp(da, db, na) == 0;
    free(da);
    free(db);
    return same;
}

/* --ema: the same training as without it, an EMA of the generator saved with
 * torch's AveragedModel keys and in the checkpoint, the sample grids drawn
 * by it, continued by --resume; a decay out of range or another one on
 * --resume is refused. */
Test(examples_dcgan_train, dcgan_ema_keeps_an_average_that_draws_the_samples)
{
    th_write_idx_set(th_tmp_dir, "train", 24, 28, 7);
    char plain[256], ema[256], a[512], b[512];
    th_tmp_path(plain, sizeof plain, "plain");
    th_tmp_path(ema, sizeof ema, "ema");
    cr_assert(eq(int, SMALL_RUN(plain, "--max-steps", "3"), 0), "%s", th_err);
    cr_assert(eq(int, SMALL_RUN(ema, "--max-steps", "3", "--ema", "0.9"), 0), "%s", th_err);
    snprintf(a, sizeof a, "%s/generator.safetensors", plain);
    snprintf(b, sizeof b, "%s/generator.safetensors", ema);
    cr_assert(same_file(a, b), "--ema changed the training");
    snprintf(a, sizeof a, "%s/samples_final.png", plain);
    snprintf(b, sizeof b, "%s/samples_final.png", ema);
    cr_assert(not(same_file(a, b)), "the samples do not come from the EMA");
    snprintf(a, sizeof a, "%s/generator_ema.safetensors", plain);
    cr_assert(not(th_exists(a)));
    /* torch's keys; the checkpoint's copy under "gen_ema" */
    tg_st_file *f = load_out(ema, "generator_ema.safetensors");
    tg_st_file *ck = load_out(ema, "checkpoint.safetensors");
    cr_assert(eq(dbl, tg_tensor_item(tg_st_get(f, "n_averaged")), 3));
    const tg_tensor *w = tg_st_get(f, "module.net.0.weight");
    cr_assert(w != NULL);
    th_expect_same_bits("gen_ema", w, tg_st_get(ck, "gen_ema.module.net.0.weight"), w);
    cr_assert(tg_st_get(ck, "gen_ema.module.net.2.running_mean") != NULL);
    tg_st_free(ck);
    tg_st_free(f);
    /* --resume continues the average; --sample draws from it */
    cr_assert(eq(int, SMALL_RUN(ema, "--resume", "auto", "--max-steps", "5"), 0), "%s", th_err);
    f = load_out(ema, "generator_ema.safetensors");
    cr_assert(eq(dbl, tg_tensor_item(tg_st_get(f, "n_averaged")), 5));
    tg_st_free(f);
    cr_assert(eq(int, DCGAN("--out", ema, "--sample", "4"), 0), "%s", th_err);
    /* refusals */
    cr_assert(eq(int, SMALL_RUN(ema, "--resume", "auto", "--ema", "0.5"), 2));
    th_expect_in(th_err, "--ema 0.5 does not match the checkpoint's 0.9");
    cr_assert(eq(int, SMALL_RUN(plain, "--resume", "auto", "--ema", "0.9"), 2));
    th_expect_in(th_err, "--ema 0.9 does not match the checkpoint's none");
    const char *bad[] = {"1", "0", "-0.5", "nan"};
    for (int i = 0; i < 4; i++) {
        cr_assert(eq(int, SMALL_RUN(plain, "--overwrite", "--ema", bad[i]), 2), "%s", bad[i]);
        th_expect_in(th_err, "for --ema: a number in (0, 1)");
    }
}

/* ---- dcgan --spectral-norm ----------------------------------------------------- */

/* Fails unless the checkpoints a and b hold the same bits under key. */
static void expect_same_tensor(const tg_st_file *a, const tg_st_file *b, const char *key)
{
    const tg_tensor *x = tg_st_get(a, key), *y = tg_st_get(b, key);
    cr_assert(x != NULL && y != NULL, "%s missing", key);
    th_expect_same_bits(key, x, y, x);
}

/* --spectral-norm: the discriminator's two Conv2d layers carry torch's
 * weight_orig / weight_u / weight_v (u a unit vector) and there is no
 * BatchNorm in it; a run stopped at step 3 and resumed to step 5 ends with
 * the bits of one that ran 5 steps at once, u and v included; the flag is
 * taken from the checkpoint on --resume, and refused for a checkpoint
 * without spectral norm. */
Test(examples_dcgan_train, dcgan_spectral_norm_trains_sn_gan_and_resumes_to_the_bit)
{
    th_write_idx_set(th_tmp_dir, "train", 24, 28, 7);
    char once[256], split[256], plain[256], a[512], b[512];
    th_tmp_path(once, sizeof once, "once");
    th_tmp_path(split, sizeof split, "split");
    th_tmp_path(plain, sizeof plain, "plain");
    cr_assert(eq(int, SMALL_RUN(once, "--max-steps", "5", "--spectral-norm"), 0), "%s", th_err);
    th_expect_in(th_err, "D 8 ch spectral-normed");
    tg_st_file *ck = load_out(once, "checkpoint.safetensors");
    static const char *const absent[] = {"disc.net.0.weight", "disc.net.2.weight",
                                         "disc.net.3.running_mean", "disc.net.3.weight"};
    for (int i = 0; i < 4; i++) cr_assert(tg_st_get(ck, absent[i]) == NULL, "%s", absent[i]);
    cr_assert(tg_st_get(ck, "disc.net.2.bias") != NULL, "no conv bias without BatchNorm");
    static const struct {
        const char *key;
        int64_t numel;
    } sn[] = {{"disc.net.0.weight_orig", 8 * 16},  {"disc.net.0.weight_u", 8},
              {"disc.net.0.weight_v", 16},         {"disc.net.2.weight_orig", 16 * 8 * 16},
              {"disc.net.2.weight_u", 16},         {"disc.net.2.weight_v", 8 * 16}};
    for (int i = 0; i < 6; i++) {
        const tg_tensor *t = tg_st_get(ck, sn[i].key);
        cr_assert(t != NULL, "%s missing", sn[i].key);
        cr_assert(eq(i64, tg_tensor_numel(t), sn[i].numel), "%s", sn[i].key);
    }
    for (int l = 0; l < 2; l++) {   /* u = normalize(W v) after the last iteration */
        const tg_tensor *u = tg_st_get(ck, l ? "disc.net.2.weight_u" : "disc.net.0.weight_u");
        const float *p = tg_tensor_cdata(u);
        double s = 0;
        for (int64_t i = 0; i < tg_tensor_numel(u); i++) s += (double)p[i] * p[i];
        cr_assert(th_close(s, 1.0, 1e-5, 0), "|u|^2 = %.9g", s);
    }
    /* 3 steps, then --resume (the flag from the checkpoint, or given again) */
    cr_assert(eq(int, SMALL_RUN(split, "--max-steps", "3", "--spectral-norm"), 0), "%s", th_err);
    cr_assert(eq(int, SMALL_RUN(split, "--resume", "auto", "--max-steps", "4"), 0), "%s", th_err);
    th_expect_in(th_err, "spectral-normed");
    cr_assert(eq(int, SMALL_RUN(split, "--resume", "auto", "--max-steps", "5", "--spectral-norm"),
                 0), "%s", th_err);
    tg_st_file *ck2 = load_out(split, "checkpoint.safetensors");
    for (int i = 0; i < 6; i++) expect_same_tensor(ck, ck2, sn[i].key);
    expect_same_tensor(ck, ck2, "disc.net.6.weight");
    tg_st_free(ck2);
    tg_st_free(ck);
    snprintf(a, sizeof a, "%s/generator.safetensors", once);
    snprintf(b, sizeof b, "%s/generator.safetensors", split);
    cr_assert(same_file(a, b), "the resumed run's generator differs");
    cr_assert(eq(int, DCGAN("--out", once, "--sample", "4", "--spectral-norm"), 0), "%s", th_err);
    /* a checkpoint without spectral norm keeps its discriminator */
    cr_assert(eq(int, SMALL_RUN(plain, "--max-steps", "1"), 0), "%s", th_err);
    cr_assert(eq(int, SMALL_RUN(plain, "--resume", "auto", "--spectral-norm"), 2));
    th_expect_in(th_err, "--spectral-norm does not match the checkpoint, whose discriminator "
                 "has no spectral norm");
    cr_assert(eq(int, DCGAN("--out", plain, "--sample", "4", "--spectral-norm"), 2));
    th_expect_in(th_err, "--spectral-norm does not match the checkpoint");
}
