/* tests/test_cli_dcgan.c - the dcgan example in one process as a user runs
 * it: exit codes (0 ok, 1 failed, 2 usage), what it prints, and that a
 * refused run leaves existing output files as they were (under mpirun:
 * test_cli_ddp.c).
 *
 * The binaries are TG_DCGAN and TG_TOOL (set by tests/meson.build); each
 * run's stdout and stderr go to files in a fresh temporary directory. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <glob.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli_fixtures.h"
#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define RUN(...) th_run("TG_TOOL", (const char *const[]){__VA_ARGS__, NULL})
#define DCGAN(...) th_run("TG_DCGAN", (const char *const[]){__VA_ARGS__, NULL})

static void setup(void) { th_tmp_dir_make("tg_cli_"); }
static void teardown(void) { th_tmp_dir_remove(); }

TestSuite(cli_dcgan, .init = setup, .fini = teardown);

/* ---- examples/dcgan ------------------------------------------------------ */

/* A small run trains, writes its outputs and a checkpoint; --sample reads it
 * back; a batch larger than the data set is refused before anything in --out
 * is touched; so is a bad option value. */
Test(cli_dcgan, dcgan_trains_samples_and_refuses_bad_input_without_touching_out)
{
    write_train_set(24);
    char out[256];
    th_tmp_path(out, sizeof out, "out");
    cr_assert(eq(int, DCGAN("--data", th_tmp_dir, "--out", out, "--batch", "8", "--epochs", "1",
                            "--g-ch", "16", "--d-ch", "8", "--threads", "1"), 0),
              "%s", th_err);
    th_expect_in(th_err, "stopped after 3 steps");
    const char *outputs[] = {"checkpoint.safetensors", "generator.safetensors", "loss.csv",
                             "loss.png", "samples_final.png", "samples_epoch_1.png"};
    for (size_t i = 0; i < sizeof outputs / sizeof *outputs; i++)
        cr_assert(file_exists(out, outputs[i]), "%s/%s is missing", out, outputs[i]);
    cr_assert(eq(int, DCGAN("--out", out, "--sample", "4"), 0), "%s", th_err);
    cr_assert(file_exists(out, "samples.png"));

    char ck[512];
    snprintf(ck, sizeof ck, "%s/checkpoint.safetensors", out);
    size_t n = 0;
    char *before = th_read_file(ck, &n);
    cr_assert(before != NULL && n > 1000);
    /* a new run into a folder with a checkpoint is refused without --overwrite */
    cr_assert(eq(int, DCGAN("--data", th_tmp_dir, "--out", out, "--batch", "8"), 2));
    th_expect_in(th_err, "holds an earlier run's checkpoint: continue it with --resume auto, "
                        "start over with --overwrite");
    th_expect_same_bytes(ck, before, n);
    cr_assert(eq(int, DCGAN("--data", th_tmp_dir, "--out", out, "--batch", "32", "--overwrite"),
                 1));
    th_expect_in(th_err, "dcgan: batch 32 is larger than the 24 training images: no full batch");
    th_expect_same_bytes(ck, before, n);
    cr_assert(eq(int, DCGAN("--data", th_tmp_dir, "--out", out, "--batch", "0"), 2));
    th_expect_in(th_err, "dcgan: bad value '0' for --batch");
    th_expect_same_bytes(ck, before, n);
    /* non-finite or negative numbers, missing values, stray words */
    static const char *const bad[][3] = {
        {"--lr", "inf", "bad value 'inf' for --lr"},
        {"--time-budget", "nan", "bad value 'nan' for --time-budget"},
        {"--time-budget", "-1", "bad value '-1' for --time-budget"},
        {"--g-ch", "9000000000000000000", "bad value '9000000000000000000' for --g-ch"},
        {"--d-ch", "65537", "bad value '65537' for --d-ch"},
        {"stray", "word", "unexpected argument 'stray'"},
        {"--bogus", "1", "unknown option '--bogus'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        cr_assert(eq(int, DCGAN("--out", out, bad[i][0], bad[i][1]), 2), "%s %s", bad[i][0],
                  bad[i][1]);
        th_expect_in(th_err, bad[i][2]);
    }
    cr_assert(eq(int, DCGAN("--out", out, "--epochs"), 2));
    th_expect_in(th_err, "option '--epochs' needs a value");
    th_expect_same_bytes(ck, before, n);
    /* an --out that is not a writable folder is refused before training */
    char notdir[512];
    snprintf(notdir, sizeof notdir, "%s/loss.csv", out);
    cr_assert(eq(int, DCGAN("--data", th_tmp_dir, "--out", notdir, "--batch", "8"), 1));
    th_expect_in(th_err, "dcgan: --out ");
    th_expect_in(th_err, "loss.csv: must be a folder to write the outputs into, not a file");
    cr_assert(strstr(th_err, "images, batch") == NULL, "it trained: %s", th_err);

    /* Resuming or sampling with an option that differs from the checkpoint's. */
    cr_assert(eq(int, DCGAN("--data", th_tmp_dir, "--out", out, "--resume", "auto",
                            "--g-ch", "32"), 2));
    th_expect_in(th_err, "dcgan: --g-ch 32 does not match the checkpoint's 16");
    cr_assert(eq(int, DCGAN("--data", th_tmp_dir, "--out", out, "--resume", "auto",
                            "--loss", "wgan-gp"), 2));
    th_expect_in(th_err, "dcgan: --loss wgan-gp does not match the checkpoint's bce");
    cr_assert(eq(int, DCGAN("--out", out, "--sample", "4", "--batch", "16"), 2));
    th_expect_in(th_err, "dcgan: --batch 16 does not match the checkpoint's 8");
    th_expect_same_bytes(ck, before, n);
    /* the same values are fine, and --sample --seed draws other latents */
    char png[512];
    snprintf(png, sizeof png, "%s/samples.png", out);
    size_t n0 = 0, n1 = 0;
    char *png0 = th_read_file(png, &n0);
    cr_assert(eq(int, DCGAN("--out", out, "--sample", "4", "--g-ch", "16", "--seed", "5"), 0),
              "%s", th_err);
    char *png1 = th_read_file(png, &n1);
    cr_assert(png0 && png1 && (n0 != n1 || memcmp(png0, png1, n0) != 0),
              "--seed 5 gave the same samples as the checkpoint's seed");
    free(png0);
    free(png1);
    /* resuming on other data is refused: the data order and position depend on it */
    write_train_set(32);
    cr_assert(eq(int, DCGAN("--data", th_tmp_dir, "--out", out, "--resume", "auto"), 1));
    th_expect_in(th_err, "the checkpoint was trained on 24 images and --data has 32");
    th_expect_same_bytes(ck, before, n);
    free(before);
}

/* A bad value's message names the rule; a value that is the next option is a
 * missing value (nothing is made under that name); options that contradict
 * each other, or that --sample would ignore, are refused. */
Test(cli_dcgan, dcgan_option_errors_name_the_rule_and_conflicts_are_refused)
{
    static const char *const bad[][3] = {
        {"--g-ch", "5", "bad value '5' for --g-ch: an even integer in 2..65536"},
        {"--threads", "300", "bad value '300' for --threads: an integer in 1..256"},
        {"--nz", "70000", "bad value '70000' for --nz: an integer in 1..65536"},
        {"--epochs", "0", "bad value '0' for --epochs: an integer >= 1"},
        {"--loss", "foo", "bad value 'foo' for --loss: bce or wgan-gp"},
        {"--amp", "f8", "bad value 'f8' for --amp: bf16, f16 or off"},
        {"--lr", "1e20", "bad value '1e20' for --lr: a number in (0, 1]"},
        {"--lr", "0", "bad value '0' for --lr: a number in (0, 1]"},
        {"--time-budget", "0x10", "bad value '0x10' for --time-budget: a number of seconds"},
        {"--sample", "5000", "bad value '5000' for --sample: an integer in 1..4096"},
        {"--data", "", "bad value '' for --data: a path, not empty"},
        {"--images", "", "bad value '' for --images: a path, not empty"},
        {"--hflip", "1.5", "bad value '1.5' for --hflip: a probability in [0, 1]"},
        {"--hflip", "-0.1", "bad value '-0.1' for --hflip: a probability in [0, 1]"},
        {"--out", "--help", "option '--out' needs a value, got the option '--help'"},
        {"--resume", "--overwrite", "option '--resume' needs a value, got the option"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        cr_assert(eq(int, DCGAN(bad[i][0], bad[i][1]), 2), "%s %s: %s", bad[i][0], bad[i][1],
                  th_err);
        th_expect_in(th_err, bad[i][2]);
        cr_assert(strstr(th_err, "images, batch") == NULL, "it trained: %s", th_err);
    }
    char out[256];
    th_tmp_path(out, sizeof out, "out");
    cr_assert(eq(int, DCGAN("--out", out, "--resume", "auto", "--overwrite"), 2));
    th_expect_in(th_err, "--resume continues a run and --overwrite starts a new one");
    cr_assert(eq(int, DCGAN("--out", out, "--data", out, "--images", out), 2));
    th_expect_in(th_err, "--data reads IDX files and --images PNGs: give one of them");
    static const char *const ignored[][2] = {
        {"--epochs", "2"}, {"--max-steps", "5"}, {"--data", "/nonexistent"},
        {"--time-budget", "1"}, {"--log-every", "3"}, {"--images", "/nonexistent"},
        {"--hflip", "0.5"},
    };
    for (size_t i = 0; i < sizeof ignored / sizeof *ignored; i++) {
        cr_assert(eq(int, DCGAN("--out", out, "--sample", "4", ignored[i][0], ignored[i][1]), 2),
                  "%s", ignored[i][0]);
        th_expect_in(th_err, "has no effect with --sample");
    }
    cr_assert(eq(int, DCGAN("--out", out, "--sample", "4", "--overwrite"), 2));
    th_expect_in(th_err, "--overwrite has no effect with --sample");
    cr_assert(not(file_exists(out, "samples.png") || file_exists(out, "checkpoint.safetensors")));
}

/* n PNGs of sizes from 20 x 24 to 36 x 46 in two class folders under
 * imgs/, each a ramp from dark on the left to light on the right (so that
 * an image and its mirror differ). */
static void write_png_folder(int n)
{
    char p[512], rel[64];
    mkdir(th_tmp_path(p, sizeof p, "imgs"), 0755);
    mkdir(th_tmp_path(p, sizeof p, "imgs/a"), 0755);
    mkdir(th_tmp_path(p, sizeof p, "imgs/b"), 0755);
    for (int i = 0; i < n; i++) {
        const int h = 20 + (3 * i) % 17, w = 24 + (5 * i) % 23;
        double *v = malloc(sizeof *v * (size_t)(h * w));
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++) v[y * w + x] = 255.0 * x / (w - 1) * (0.5 + 0.5 * (i % 2));
        tg_tensor *t = th_tensor_from(TG_F64, 4, (int64_t[]){1, 1, h, w}, v);
        snprintf(rel, sizeof rel, "imgs/%c/%02d.png", i % 2 ? 'b' : 'a', i);
        cr_assert(eq(int, tg_png_write_grid(th_tmp_path(p, sizeof p, rel), t, 1, 0, 255, 0), 0),
                  "%s", tg_error_message());
        tg_tensor_release(t);
        free(v);
    }
}

/* --images trains on a folder of PNGs of several sizes (brought to 28 x 28);
 * --hflip 1 trains on their mirrors, so its generator differs from the one
 * without flips, which --hflip 0 reproduces byte for byte; resuming on a
 * folder of another size is refused, naming --images. */
Test(cli_dcgan, dcgan_trains_on_a_png_folder_with_flips)
{
    if (!tg_png_available()) {
        th_not_run("this build has no PNG support: --images reads PNGs");
        return;
    }
    write_png_folder(20);
    char imgs[256], out[3][256], gen[3][512];
    th_tmp_path(imgs, sizeof imgs, "imgs");
    static const char *const flips[3] = {NULL, "1", "0"};
    size_t n[3] = {0};
    char *bytes[3];
    for (int k = 0; k < 3; k++) {
        char name[16];
        snprintf(name, sizeof name, "out%d", k);
        th_tmp_path(out[k], sizeof out[k], name);
        const char *flag = flips[k] ? "--hflip" : "--seed";
        const char *val = flips[k] ? flips[k] : "0";
        cr_assert(eq(int, DCGAN("--images", imgs, "--out", out[k], "--batch", "4", "--max-steps",
                                "3", "--g-ch", "16", "--d-ch", "8", "--threads", "1", flag, val),
                     0),
                  "%s", th_err);
        th_expect_in(th_err, "dcgan: 20 images, batch 4");
        snprintf(gen[k], sizeof gen[k], "%s/generator.safetensors", out[k]);
        bytes[k] = th_read_file(gen[k], &n[k]);
        cr_assert(bytes[k] != NULL && n[k] > 1000);
    }
    cr_assert(n[0] != n[1] || memcmp(bytes[0], bytes[1], n[0]) != 0,
              "--hflip 1 trained the same generator as no flips");
    th_expect_same_bytes(gen[2], bytes[0], n[0]);
    for (int k = 0; k < 3; k++) free(bytes[k]);
    write_png_folder(22);
    cr_assert(eq(int, DCGAN("--images", imgs, "--out", out[0], "--resume", "auto"), 1));
    th_expect_in(th_err, "the checkpoint was trained on 20 images and --images has 22");
}

/* --help names every value --amp accepts and its default, and the thread
 * default as the library takes it (tg_set_num_threads: TG_NUM_THREADS, else
 * OMP_NUM_THREADS, else the CPUs). */
Test(cli_dcgan, dcgan_help_lists_the_values_and_defaults_the_parser_uses)
{
    cr_assert(eq(int, DCGAN("--help"), 0), "%s", th_err);
    th_expect_in(th_out, "--amp bf16|f16|off");
    th_expect_in(th_out, "(default off)");
    th_expect_in(th_out, "(default: TG_NUM_THREADS, else\n");
    th_expect_in(th_out, " OMP_NUM_THREADS, else the CPUs)");
    cr_assert(eq(int, DCGAN("--out", "--help"), 2));
    cr_assert(eq(int, DCGAN("--amp", "off", "--help"), 0), "%s", th_err);
}

/* Replaces (or adds) tensor key of the safetensors file at path. */
static void edit_file(const char *path, const char *key, tg_tensor *t)
{
    tg_st_file *f = NULL;
    cr_assert(eq(int, tg_safetensors_load(&f, path), TG_OK), "%s", tg_error_message());
    cr_assert(eq(int, tg_st_set(f, key, t), TG_OK));
    cr_assert(eq(int, tg_safetensors_save(f, path), TG_OK), "%s", tg_error_message());
    tg_st_free(f);
    tg_tensor_release(t);
}

/* A 0-d tensor holding v, as the checkpoint stores its counters. */
static tg_tensor *scalar_tensor(tg_dtype dt, double v)
{
    tg_tensor *t = NULL;
    cr_assert(eq(int, tg_tensor_full(&t, dt, 0, NULL, v), TG_OK));
    return t;
}

/* A checkpoint whose counters or learning rate are out of range, or whose
 * loss history is inconsistent, is refused on --resume with a message that
 * says which entry is wrong; nothing in --out changes.  A loss.csv that
 * cannot be written is reported with its path. */
Test(cli_dcgan, dcgan_refuses_a_checkpoint_with_bad_counters_lr_or_history)
{
    write_train_set(24);
    char out[256], ck[512], copy[512];
    th_tmp_path(out, sizeof out, "out");
    cr_assert(eq(int, DCGAN("--data", th_tmp_dir, "--out", out, "--batch", "8", "--epochs", "1",
                            "--g-ch", "16", "--d-ch", "8", "--threads", "1"), 0), "%s", th_err);
    snprintf(ck, sizeof ck, "%s/checkpoint.safetensors", out);
    size_t n = 0;
    char *good = th_read_file(ck, &n);
    cr_assert(good != NULL);
    th_tmp_path(copy, sizeof copy, "good.safetensors");
    FILE *f = fopen(copy, "wb");
    cr_assert(f && fwrite(good, 1, n, f) == n);
    fclose(f);
    struct {
        const char *key;
        tg_tensor *value;
        const char *msg;
    } cases[] = {
        {"opt_g.lr", scalar_tensor(TG_F64, INFINITY), "'opt_g.lr'=inf must be a finite"},
        {"opt_d.step", scalar_tensor(TG_F64, 1e300), "'opt_d.step'=1e+300 must be a finite"},
        {"step", scalar_tensor(TG_I64, -1), "the checkpoint's step=-1 must be >= 0"},
        {"history.epoch", scalar_tensor(TG_I64, 0),
         "history.d_loss, history.g_loss and history.epoch must have one length"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        edit_file(ck, cases[i].key, cases[i].value);
        size_t m = 0;
        char *edited = th_read_file(ck, &m);
        cr_assert(eq(int, DCGAN("--data", th_tmp_dir, "--out", out, "--resume", "auto"), 1),
                  "%s: %s", cases[i].key, th_err);
        th_expect_in(th_err, cases[i].msg);
        th_expect_same_bytes(ck, edited, m);
        free(edited);
        f = fopen(ck, "wb");
        cr_assert(f && fwrite(good, 1, n, f) == n);
        fclose(f);
    }
    /* an epoch number beyond any real run */
    tg_st_file *sf = NULL;
    cr_assert(eq(int, tg_safetensors_load(&sf, ck), TG_OK));
    const tg_tensor *he = tg_st_get(sf, "history.epoch");
    cr_assert(he != NULL);
    tg_tensor *e2 = NULL;
    cr_assert(eq(int, tg_tensor_clone(&e2, (tg_tensor *)he), TG_OK));
    cr_assert(eq(int, tg_tensor_set_flat(e2, 1, 1e17), TG_OK));
    tg_st_free(sf);
    edit_file(ck, "history.epoch", e2);
    cr_assert(eq(int, DCGAN("--data", th_tmp_dir, "--out", out, "--resume", "auto"), 1));
    th_expect_in(th_err, "history.epoch[1]=1e+17 is not an epoch number");
    f = fopen(ck, "wb");
    cr_assert(f && fwrite(good, 1, n, f) == n);
    fclose(f);
    /* loss.csv cannot be written: a folder of that name stands in the way */
    char dir[512];
    snprintf(dir, sizeof dir, "%s/loss.csv", out);
    remove(dir);
    cr_assert(eq(int, mkdir(dir, 0755), 0));
    cr_assert(eq(int, DCGAN("--data", th_tmp_dir, "--out", out, "--resume", "auto",
                            "--max-steps", "4"), 1));
    th_expect_in(th_err, "loss.csv");
    th_expect_in(th_err, "Is a directory");
    free(good);
}

/* --snapshot-every: generator snapshots during training, in the format of
 * generator.safetensors, that `tapegrad fid` scores (docs/fid.md). */
Test(cli_dcgan, dcgan_snapshots_are_generators_that_fid_scores)
{
    write_train_set(24);
    char out[256], snap[512];
    th_tmp_path(out, sizeof out, "out");
    cr_assert(eq(int, DCGAN("--data", th_tmp_dir, "--out", out, "--batch", "8", "--epochs", "1",
                            "--g-ch", "16", "--d-ch", "8", "--threads", "1",
                            "--snapshot-every", "0.001"), 0), "%s", th_err);
    glob_t g;
    snprintf(snap, sizeof snap, "%s/generator_*s.safetensors", out);
    cr_assert(eq(int, glob(snap, 0, NULL, &g), 0), "no snapshot %s", snap);
    snprintf(snap, sizeof snap, "%s", g.gl_pathv[0]);
    globfree(&g);
    snprintf(out + strlen(out), sizeof out - strlen(out), "/generator.safetensors");
    cr_assert(eq(int, RUN("fid", "--weights", TG_SOURCE_ROOT "/data/fid_classifier.safetensors",
                          "--count", "20", out, snap), 0), "%s", th_err);
    th_expect_in(th_out, "(20 images) vs ");
    cr_assert(eq(int, DCGAN("--data", th_tmp_dir, "--out", out, "--snapshot-every", "0"), 2));
    th_expect_in(th_err, "bad value '0' for --snapshot-every: a number of seconds > 0");
}
