/* tests/test_cli_ddp.c - the dcgan example under mpirun (--ddp, --sync-bn)
 * as a user runs it: every rank takes the same steps, rank 0 writes the
 * outputs, and an error on one rank stops them all.  Skipped without MPI.
 *
 * The binaries are TG_MPIRUN and TG_DCGAN (set by tests/meson.build); each
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

#define DCGAN(...) th_run("TG_DCGAN", (const char *const[]){__VA_ARGS__, NULL})

static void setup(void) { th_tmp_dir_make("tg_cli_"); }
static void teardown(void) { th_tmp_dir_remove(); }

TestSuite(cli_ddp, .init = setup, .fini = teardown);

/* dcgan --ddp under `mpirun -np 2`: the batch is split over the ranks, rank 0
 * writes the outputs and the checkpoint, which resumes in one process; a bad
 * data path stops both ranks with one message.  Skipped without MPI.  A run
 * that hangs (a rank waiting in a collective call the others never make) is
 * ended by mpirun after MPIRUN_TIMEOUT seconds and fails its test. */
#define MPIRUN_TIMEOUT "120"
#define MPIRUN_DCGAN(...)                                                     \
    th_run("TG_MPIRUN", (const char *const[]){"-np", "2", "--allow-run-as-root", \
                                              "--oversubscribe", "--timeout",     \
                                              MPIRUN_TIMEOUT, getenv("TG_DCGAN"), \
                                              __VA_ARGS__, NULL})

Test(cli_ddp, dcgan_ddp_trains_on_two_ranks_and_resumes_in_one_process)
{
    const char *mpirun = getenv("TG_MPIRUN");
    if (!mpirun || !mpirun[0]) cr_skip_test("built without MPI, or a sanitizer build");
    write_train_set(24);
    char out[256];
    th_tmp_path(out, sizeof out, "out");
    cr_assert(eq(int, MPIRUN_DCGAN("--ddp", "--data", th_tmp_dir, "--out", out, "--batch", "8",
                                   "--epochs", "1", "--g-ch", "16", "--d-ch", "8",
                                   "--threads", "1"), 0), "%s", th_err);
    th_expect_in(th_err, "data-parallel over 2 ranks, batch 4 per rank");
    th_expect_in(th_err, "stopped after 3 steps");
    cr_assert(file_exists(out, "checkpoint.safetensors") && file_exists(out, "samples_final.png"));
    cr_assert(eq(int, DCGAN("--resume", "auto", "--data", th_tmp_dir, "--out", out, "--epochs",
                            "2", "--threads", "1"), 0), "%s", th_err);
    th_expect_in(th_err, "resumed");
    th_expect_in(th_err, "stopped after 6 steps (3 this run");
    char bad[512];
    snprintf(bad, sizeof bad, "%s/no-such-dir", th_tmp_dir);
    cr_assert(MPIRUN_DCGAN("--ddp", "--data", bad, "--out", out, "--overwrite", "--threads",
                           "1") != 0);
    const char *first = strstr(th_err, "cannot open");
    cr_assert(first != NULL, "%s", th_err);
    cr_assert(strstr(first + 1, "cannot open") == NULL, "printed twice:\n%s", th_err);
}

/* --resume under --ddp where rank 1's copy of the checkpoint is refused (it
 * names another data set): every rank stops with rank 1's error, printed
 * once, instead of rank 0 waiting in dcgan_trainer_new's collective calls.
 * mpirun's colon syntax gives each rank its own --out. */
Test(cli_ddp, dcgan_ddp_resume_refused_on_one_rank_stops_every_rank)
{
    const char *mpirun = getenv("TG_MPIRUN");
    if (!mpirun || !mpirun[0]) cr_skip_test("built without MPI, or a sanitizer build");
    write_train_set(24);
    char good[256], bad[256], path[512];
    th_tmp_path(good, sizeof good, "good");
    th_tmp_path(bad, sizeof bad, "bad");
    cr_assert(eq(int, DCGAN("--data", th_tmp_dir, "--out", good, "--batch", "8", "--epochs", "1",
                            "--nz", "8", "--g-ch", "8", "--d-ch", "8", "--threads", "1"), 0),
              "%s", th_err);
    snprintf(path, sizeof path, "%s/checkpoint.safetensors", good);
    tg_st_file *f = NULL;
    cr_assert(eq(int, tg_safetensors_load(&f, path), TG_OK), "%s", tg_error_message());
    cr_assert(eq(int, tg_st_meta_set(f, "dcgan.data", "images=5"), TG_OK));
    cr_assert(eq(int, mkdir(bad, 0755), 0));
    snprintf(path, sizeof path, "%s/checkpoint.safetensors", bad);
    cr_assert(eq(int, tg_safetensors_save(f, path), TG_OK), "%s", tg_error_message());
    tg_st_free(f);
    const char *dcgan = getenv("TG_DCGAN");
    cr_assert(eq(int, th_run("TG_MPIRUN",
                             (const char *const[]){
                                 "--allow-run-as-root", "--oversubscribe", "--timeout",
                                 MPIRUN_TIMEOUT, "-np", "1", dcgan, "--ddp", "--resume", "auto",
                                 "--data", th_tmp_dir, "--out", good, "--epochs", "2",
                                 "--threads", "1", ":", "-np", "1", dcgan, "--ddp", "--resume",
                                 "auto", "--data", th_tmp_dir, "--out", bad, "--epochs", "2",
                                 "--threads", "1", NULL}),
                  1),
              "%s", th_err);
    cr_assert(strstr(th_err, "time limit") == NULL, "the job hung:\n%s", th_err);
    th_expect_in(th_err, "rank 1: the checkpoint was trained on 5 images");
    const char *first = strstr(th_err, "trained on 5 images");
    cr_assert(strstr(first + 1, "trained on 5 images") == NULL, "printed twice:\n%s", th_err);
}

/* For a --ddp job that rank 0 cannot write: skips without mpirun, writes
 * the training set and makes the folder out (256 bytes) with a folder named
 * `blocked` inside, where the job wants to write a file. */
static void ddp_out_with_blocker(char *out, const char *blocked)
{
    const char *mpirun = getenv("TG_MPIRUN");
    if (!mpirun || !mpirun[0]) cr_skip_test("built without MPI, or a sanitizer build");
    write_train_set(24);
    char blocker[512];
    th_tmp_path(out, 256, "out");
    cr_assert(eq(int, mkdir(out, 0755), 0));
    snprintf(blocker, sizeof blocker, "%s/%s", out, blocked);
    cr_assert(eq(int, mkdir(blocker, 0755), 0));
}

/* Rank 0 cannot write the epoch's sample grid (a folder has its name): every
 * rank stops with rank 0's error, printed once, instead of the other rank
 * waiting for rank 0 forever. */
Test(cli_ddp, dcgan_ddp_stops_every_rank_when_rank_0_cannot_write)
{
    char out[256];
    ddp_out_with_blocker(out, "samples_epoch_1.png");
    cr_assert(eq(int, MPIRUN_DCGAN("--ddp", "--data", th_tmp_dir, "--out", out, "--batch", "8",
                                   "--epochs", "3", "--nz", "8", "--g-ch", "8", "--d-ch", "8",
                                   "--threads", "1"), 1), "%s", th_err);
    cr_assert(strstr(th_err, "time limit") == NULL, "the job hung:\n%s", th_err);
    const char *first = strstr(th_err, "samples_epoch_1.png");
    cr_assert(first != NULL, "%s", th_err);
    th_expect_in(th_err, "dcgan: train: ");
    cr_assert(strstr(strstr(th_err, "dcgan: train: ") + 1, "dcgan: train: ") == NULL,
              "printed twice:\n%s", th_err);
    cr_assert(not(file_exists(out, "samples_epoch_2.png")), "training went on after the error");
}

/* Rank 0 cannot write a --snapshot-every snapshot (a folder has its name)
 * while rank 1 goes on training: every rank stops with rank 0's error,
 * printed once, and the job ends as a failed run, not by MPI_Abort. */
Test(cli_ddp, dcgan_ddp_stops_every_rank_when_rank_0_cannot_write_a_snapshot)
{
    char out[256];
    ddp_out_with_blocker(out, "generator_0.001s.safetensors");
    cr_assert(eq(int, MPIRUN_DCGAN("--ddp", "--data", th_tmp_dir, "--out", out, "--batch", "8",
                                   "--epochs", "2", "--nz", "8", "--g-ch", "8", "--d-ch", "8",
                                   "--threads", "1", "--snapshot-every", "0.001"), 1),
              "%s", th_err);
    cr_assert(strstr(th_err, "time limit") == NULL, "the job hung:\n%s", th_err);
    cr_assert(strstr(th_err, "MPI_ABORT") == NULL, "the job was aborted:\n%s", th_err);
    th_expect_in(th_err, "dcgan: train: TG_EIO: rank 0: safetensors_save: ");
    th_expect_in(th_err, "generator_0.001s.safetensors': Is a directory");
    cr_assert(strstr(strstr(th_err, "dcgan: train: ") + 1, "dcgan: train: ") == NULL,
              "printed twice:\n%s", th_err);
    cr_assert(not(file_exists(out, "samples_epoch_1.png")), "training went on after the error");
}

/* The largest |a - b| over the BatchNorm running statistics of the
 * checkpoints in folders a and b. */
static double bn_stats_gap(const char *a, const char *b)
{
    static const char *const keys[] = {"gen.net.2.running_mean", "gen.net.2.running_var",
                                       "gen.net.5.running_mean", "gen.net.5.running_var",
                                       "disc.net.3.running_mean", "disc.net.3.running_var"};
    char pa[512], pb[512];
    snprintf(pa, sizeof pa, "%s/checkpoint.safetensors", a);
    snprintf(pb, sizeof pb, "%s/checkpoint.safetensors", b);
    tg_st_file *fa = NULL, *fb = NULL;
    cr_assert(eq(int, tg_safetensors_load(&fa, pa), TG_OK), "%s", tg_error_message());
    cr_assert(eq(int, tg_safetensors_load(&fb, pb), TG_OK), "%s", tg_error_message());
    double gap = 0;
    for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) {
        const tg_tensor *ta = tg_st_get(fa, keys[k]), *tb = tg_st_get(fb, keys[k]);
        cr_assert(ta && tb && tg_tensor_numel(ta) == tg_tensor_numel(tb), "%s", keys[k]);
        for (int64_t i = 0; i < tg_tensor_numel(ta); i++) {
            double x = 0, y = 0;
            cr_assert(eq(int, tg_tensor_get_flat(ta, i, &x), TG_OK));
            cr_assert(eq(int, tg_tensor_get_flat(tb, i, &y), TG_OK));
            gap = fmax(gap, fabs(x - y));
        }
    }
    tg_st_free(fa);
    tg_st_free(fb);
    return gap;
}

/* dcgan --ddp --sync-bn: BatchNorm statistics over both ranks' rows, so two
 * ranks with batch 4 each take the steps one process takes with batch 8, and
 * the checkpoints' running statistics agree (plain --ddp normalises each
 * rank's half by itself: rank 0's statistics are its half's, and differ).
 * The generator with SyncBatchNorms exports to ONNX, and trains with --amp
 * bf16.  --sync-bn without --ddp is a usage error. */
Test(cli_ddp, dcgan_sync_bn_on_two_ranks_takes_the_one_process_steps)
{
    const char *mpirun = getenv("TG_MPIRUN");
    if (!mpirun || !mpirun[0]) cr_skip_test("built without MPI, or a sanitizer build");
    write_train_set(24);
    char one[256], sync[256], plain[256];
    th_tmp_path(one, sizeof one, "one");
    th_tmp_path(sync, sizeof sync, "sync");
    th_tmp_path(plain, sizeof plain, "plain");
#define SMALL "--data", th_tmp_dir, "--batch", "8", "--epochs", "1", "--g-ch", "16", \
              "--d-ch", "8", "--threads", "1"
    cr_assert(eq(int, DCGAN(SMALL, "--out", one), 0), "%s", th_err);
    /* and the trained generator as ONNX, when the build has it (the NULL
     * in its place ends the argument list early) */
    char onnx[512];
    snprintf(onnx, sizeof onnx, "%s/g.onnx", th_tmp_dir);
    const char *export = tg_onnx_available() ? "--export-onnx" : NULL;
    cr_assert(eq(int, MPIRUN_DCGAN("--ddp", "--sync-bn", SMALL, "--out", sync, export, onnx), 0),
              "%s", th_err);
    th_expect_in(th_err, "batch 4 per rank, synchronised BatchNorm");
    th_expect_in(th_err, "stopped after 3 steps");
    if (export) th_expect_in(th_err, "wrote the generator as ONNX");
    cr_assert(eq(int, MPIRUN_DCGAN("--ddp", SMALL, "--out", plain), 0), "%s", th_err);
    const double gap_sync = bn_stats_gap(one, sync), gap_plain = bn_stats_gap(one, plain);
    /* measured: 6e-9 and 1.6e-3 */
    cr_assert(gap_sync <= 1e-6, "--sync-bn: running statistics differ by %g", gap_sync);
    cr_assert(gap_plain > 1e-4, "plain --ddp: running statistics differ by only %g", gap_plain);
    /* SyncBatchNorm takes the bf16 activations of --amp bf16, as BatchNorm does */
    cr_assert(eq(int, MPIRUN_DCGAN("--ddp", "--sync-bn", "--amp", "bf16", SMALL, "--out", sync,
                                   "--overwrite"), 0), "%s", th_err);
    th_expect_in(th_err, "stopped after 3 steps");
    cr_assert(eq(int, DCGAN("--sync-bn", SMALL, "--out", one, "--overwrite"), 2));
    th_expect_in(th_err, "--sync-bn synchronises BatchNorm over the ranks of --ddp");
#undef SMALL
}

/* dcgan --ddp --ddp-compress bf16 / f16: the gradients all-reduced in the
 * half dtype (tg_ddp_opts.compress).  Three steps on two ranks train and
 * end near the plain --ddp run (the BatchNorm running statistics of the
 * third forward, which follow the weights of two compressed steps, differ
 * from it, but little); --ddp-compress without --ddp, or with another
 * dtype, is a usage error. */
Test(cli_ddp, dcgan_ddp_compress_trains_near_the_uncompressed_run)
{
    const char *mpirun = getenv("TG_MPIRUN");
    if (!mpirun || !mpirun[0]) cr_skip_test("built without MPI, or a sanitizer build");
    write_train_set(24);
    char plain[256], comp[256];
    th_tmp_path(plain, sizeof plain, "plain");
    th_tmp_path(comp, sizeof comp, "comp");
#define SMALL "--data", th_tmp_dir, "--batch", "8", "--epochs", "1", "--g-ch", "16", \
              "--d-ch", "8", "--threads", "1"
    cr_assert(eq(int, MPIRUN_DCGAN("--ddp", SMALL, "--out", plain), 0), "%s", th_err);
    const char *halves[2] = {"bf16", "f16"};
    for (int h = 0; h < 2; h++) {
        cr_assert(eq(int, MPIRUN_DCGAN("--ddp", "--ddp-compress", halves[h], SMALL, "--out", comp,
                                       "--overwrite"), 0), "%s", th_err);
        char want[64];
        snprintf(want, sizeof want, "batch 4 per rank, %s gradients", halves[h]);
        th_expect_in(th_err, want);
        th_expect_in(th_err, "stopped after 3 steps");
        const double gap = bn_stats_gap(plain, comp);
        /* measured: 3.1e-5 (bf16) and 9.3e-7 (f16) */
        cr_assert(gap > 0 && gap <= 1e-3, "--ddp-compress %s: running statistics differ from "
                  "plain --ddp by %g", halves[h], gap);
    }
    cr_assert(eq(int, DCGAN("--ddp-compress", "bf16", SMALL, "--out", comp, "--overwrite"), 2));
    th_expect_in(th_err, "--ddp-compress compresses the gradients that --ddp sends");
    cr_assert(eq(int, DCGAN("--ddp-compress", "i8", SMALL, "--out", comp, "--overwrite"), 2));
    th_expect_in(th_err, "bad value 'i8' for --ddp-compress: bf16, f16 or off");
#undef SMALL
}

/* Whether every tensor of checkpoint a (folder) whose name starts with one
 * of the prefixes is in checkpoint b with the same bits, and they have as
 * many; *n: how many were compared. */
static bool same_entries(const char *a, const char *b, const char *const *prefixes, int np,
                         int *n)
{
    char pa[512], pb[512];
    snprintf(pa, sizeof pa, "%s/checkpoint.safetensors", a);
    snprintf(pb, sizeof pb, "%s/checkpoint.safetensors", b);
    tg_st_file *fa = NULL, *fb = NULL;
    cr_assert(eq(int, tg_safetensors_load(&fa, pa), TG_OK), "%s", tg_error_message());
    cr_assert(eq(int, tg_safetensors_load(&fb, pb), TG_OK), "%s", tg_error_message());
    bool same = tg_st_count(fa) == tg_st_count(fb);
    *n = 0;
    for (int e = 0; same && e < tg_st_count(fa); e++) {
        const char *name = NULL;
        tg_tensor *t = NULL;
        tg_st_at(fa, e, &name, &t);
        bool wanted = false;
        for (int k = 0; k < np; k++) wanted |= strncmp(name, prefixes[k], strlen(prefixes[k])) == 0;
        if (!wanted) continue;
        const tg_tensor *u = tg_st_get(fb, name);
        const size_t bytes = (size_t)tg_tensor_numel(t) * tg_dtype_size(tg_tensor_dtype(t));
        same = u && tg_tensor_dtype(u) == tg_tensor_dtype(t) &&
               tg_tensor_numel(u) == tg_tensor_numel(t) &&
               memcmp(tg_tensor_cdata(t), tg_tensor_cdata(u), bytes) == 0;
        if (!same) fprintf(stderr, "'%s' differs\n", name);
        (*n)++;
    }
    tg_st_free(fa);
    tg_st_free(fb);
    return same;
}

/* dcgan --ddp --zero: each Adam's state sharded over the two ranks
 * (tg_zero), the same steps as plain --ddp bit for bit: the checkpoints'
 * generator, discriminator and whole optimizer states (consolidated on
 * rank 0 under the unsharded run's keys) are equal.  That checkpoint
 * resumes with --zero and goes on as plain --ddp resumed does.  --zero
 * without --ddp is a usage error. */
Test(cli_ddp, dcgan_zero_takes_the_plain_ddp_steps_bit_for_bit)
{
    const char *mpirun = getenv("TG_MPIRUN");
    if (!mpirun || !mpirun[0]) cr_skip_test("built without MPI, or a sanitizer build");
    write_train_set(24);
    char plain[256], zero[256];
    th_tmp_path(plain, sizeof plain, "plain");
    th_tmp_path(zero, sizeof zero, "zero");
#define SMALL "--data", th_tmp_dir, "--batch", "8", "--g-ch", "16", "--d-ch", "8", \
              "--threads", "1"
    cr_assert(eq(int, MPIRUN_DCGAN("--ddp", SMALL, "--epochs", "1", "--out", plain), 0), "%s",
              th_err);
    cr_assert(eq(int, MPIRUN_DCGAN("--ddp", "--zero", SMALL, "--epochs", "1", "--out", zero),
                 0), "%s", th_err);
    th_expect_in(th_err, "stopped after 3 steps");
    static const char *const prefixes[] = {"gen.", "disc.", "opt_g.", "opt_d."};
    int n = 0;
    cr_assert(same_entries(plain, zero, prefixes, 4, &n), "--zero: the checkpoints differ");
    cr_assert(n > 40, "only %d entries compared", n);
    /* both resumed: --zero loads the consolidated state */
    cr_assert(eq(int, MPIRUN_DCGAN("--ddp", SMALL, "--resume", "auto", "--epochs", "2", "--out",
                                   plain), 0), "%s", th_err);
    cr_assert(eq(int, MPIRUN_DCGAN("--ddp", "--zero", SMALL, "--resume", "auto", "--epochs", "2",
                                   "--out", zero), 0), "%s", th_err);
    th_expect_in(th_err, "stopped after 6 steps (3 this run");
    cr_assert(same_entries(plain, zero, prefixes, 4, &n), "--zero resumed: the checkpoints "
              "differ");
    cr_assert(eq(int, DCGAN("--zero", SMALL, "--out", zero, "--overwrite"), 2));
    th_expect_in(th_err, "--zero shards the optimizers' state over the ranks of --ddp");
#undef SMALL
}
