/* tests/test_cli.c - the `tapegrad` command and the dcgan example as a user
 * runs them: exit codes (0 ok, 1 failed, 2 usage; tools/tools.h), what they
 * print, and that a failing run leaves existing output files as they were.
 *
 * The binaries are TG_TOOL and TG_DCGAN (set by tests/meson.build); each
 * run's stdout and stderr go to files in a fresh temporary directory. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <glob.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define RUN(...) th_run("TG_TOOL", (const char *const[]){__VA_ARGS__, NULL})
#define DCGAN(...) th_run("TG_DCGAN", (const char *const[]){__VA_ARGS__, NULL})

static void setup(void) { th_tmp_dir_make("tg_cli_"); }
static void teardown(void) { th_tmp_dir_remove(); }

TestSuite(cli, .init = setup, .fini = teardown);

/* A conv_transpose2d case file: x (1, 2, 3, 3), weight (2, 3, 2, 2), with
 * the given metadata (key, value pairs, NULL-terminated). */
static void write_case(const char *path, const char *const *meta)
{
    tg_st_file *f;
    cr_assert(eq(int, tg_st_new(&f), TG_OK));
    tg_tensor *x = th_rand_uniform(TG_F32, 4, (int64_t[]){1, 2, 3, 3}, 1);
    tg_tensor *w = th_rand_uniform(TG_F32, 4, (int64_t[]){2, 3, 2, 2}, 2);
    cr_assert(eq(int, tg_st_set(f, "x", x), TG_OK));
    cr_assert(eq(int, tg_st_set(f, "weight", w), TG_OK));
    for (int i = 0; meta[i]; i += 2)
        cr_assert(eq(int, tg_st_meta_set(f, meta[i], meta[i + 1]), TG_OK));
    cr_assert(eq(int, tg_safetensors_save(f, path), TG_OK));
    tg_tensor_release(x);
    tg_tensor_release(w);
    tg_st_free(f);
}

Test(cli, usage_help_and_unknown_command)
{
    cr_assert(eq(int, RUN("--help"), 0));
    th_expect_in(th_out, "commands:");
    cr_assert(eq(int, RUN("bogus"), 2));
    th_expect_in(th_err, "unknown command 'bogus'");
    cr_assert(eq(int, RUN("--version"), 0));
    th_expect_in(th_out, "tapegrad " TG_VERSION_STRING " (OpenBLAS kernels: ");
    th_expect_in(th_out, "; int8 kernel: ");
    /* TG_AMX_EMULATE=1: amx on emulated tiles, where the packing's AVX-512 is
     * (the kernels' own variables cleared: a run of the suite may force one) */
    unsetenv("TG_INT8_KERNEL");
    unsetenv("TG_BF16_KERNEL");
    setenv("TG_AMX_EMULATE", "1", 1);
    cr_assert(eq(int, RUN("--version"), 0));
    if (tg_int8_kernel_available(TG_INT8_KERNEL_VNNI))
        th_expect_in(th_out, "; int8 kernel: amx on emulated tiles;");
    if (tg_bf16_kernel_available(TG_BF16_KERNEL_AVX512))
        th_expect_in(th_out, "; bf16 kernel: amx on emulated tiles;");
    setenv("TG_AMX_EMULATE", "0", 1);
    cr_assert(eq(int, RUN("--version"), 0));
    cr_assert(strstr(th_out, "emulated") == NULL, "%s", th_out);
    unsetenv("TG_AMX_EMULATE");
    /* a kernel variable naming no kernel this CPU runs: said once, the best used */
    setenv("TG_INT8_KERNEL", "tiles", 1);
    setenv("TG_BF16_KERNEL", "tiles", 1);
    cr_assert(eq(int, RUN("--version"), 0));
    unsetenv("TG_INT8_KERNEL");
    unsetenv("TG_BF16_KERNEL");
    char want[160];
    snprintf(want, sizeof want, "; int8 kernel: %s", tg_int8_kernel_name(tg_int8_kernel_get()));
    th_expect_in(th_out, want);
    snprintf(want, sizeof want,
             "tapegrad: TG_INT8_KERNEL=tiles is not an int8 kernel this CPU runs (portable, "
             "avx2, vnni, amx); using %s\n", tg_int8_kernel_name(tg_int8_kernel_get()));
    th_expect_in(th_err, want);
    th_expect_in(th_err, "tapegrad: TG_BF16_KERNEL=tiles is not a bf16 kernel this CPU runs");
    cr_assert(strstr(strstr(th_err, "TG_INT8_KERNEL") + 1, "TG_INT8_KERNEL") == NULL,
              "said more than once:\n%s", th_err);
    cr_assert(eq(int, RUN("run-op"), 2));
    th_expect_in(th_err, "missing option --in");
    cr_assert(eq(int, RUN("run-op", "--in", "x.safetensors"), 2));
    th_expect_in(th_err, "missing option --out");
    /* a value that is the next option: the value is missing */
    cr_assert(eq(int, RUN("run-op", "--in", "x.safetensors", "--out", "--algo", "fast"), 2));
    th_expect_in(th_err, "option --out needs a value");
}

/* The case's backward as a page: its weight gradient is the one a backward
 * of sum(y) gives here, to the bit (17 digits in the page's data). */
Test(cli, viz_writes_the_backward_of_a_case_as_a_page)
{
    char in[256], page[256], want[256];
    th_tmp_path(in, sizeof in, "case.safetensors");
    th_tmp_path(page, sizeof page, "page.html");
    write_case(in, (const char *const[]){"op", "conv_transpose2d", "stride", "2", NULL});
    int rc = RUN("viz", "--in", in, "--out", page);
    if (!tg_viz_available()) {
        cr_assert(eq(int, rc, 1));
        th_expect_in(th_err, "this build has no Graphviz");
        cr_assert(th_exists(page) == false);
        cr_skip_test("this build has no Graphviz");
    }
    cr_assert(eq(int, rc, 0), "%s", th_err);
    tg_st_file *f;
    cr_assert(eq(int, tg_safetensors_load(&f, in), TG_OK));
    tg_tensor *x = NULL, *w = NULL, *y = NULL, *l = NULL;
    cr_assert(eq(int, tg_tensor_clone(&x, tg_st_get(f, "x")), TG_OK));
    cr_assert(eq(int, tg_tensor_clone(&w, tg_st_get(f, "weight")), TG_OK));
    cr_assert(eq(int, tg_tensor_set_requires_grad(w, true), TG_OK));
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    p.stride[0] = p.stride[1] = 2;
    cr_assert(eq(int, tg_conv_transpose(&y, x, w, NULL, &p), TG_OK));
    cr_assert(eq(int, tg_sum(&l, y), TG_OK));
    cr_assert(eq(int, tg_backward(l, NULL, NULL), TG_OK));
    snprintf(want, sizeof want, "\"name\":\"weight\",\"grad\":{\"dtype\":\"f32\","
             "\"shape\":[2,3,2,2],\"numel\":24,\"values\":[%.17g,", th_at(tg_tensor_grad(w), 0));
    size_t n = 0;
    char *html = th_read_file(page, &n);
    cr_assert(html != NULL);
    th_expect_in(html, "\"op\":\"conv_transpose\"");
    th_expect_in(html, want);
    free(html);
    th_release_all(4, (tg_tensor *[]){l, y, w, x});
    tg_st_free(f);

    cr_assert(eq(int, RUN("viz"), 2));
    th_expect_in(th_err, "missing option --in");
    cr_assert(eq(int, RUN("viz", "--in", in, "--out", page, "--algo", "slow"), 2));
    th_expect_in(th_err, "--algo must be reference or fast, not 'slow'");
    th_tmp_path(in, sizeof in, "missing.safetensors");
    th_tmp_path(page, sizeof page, "other.html");
    cr_assert(eq(int, RUN("viz", "--in", in, "--out", page), 1));
    th_expect_in(th_err, "tapegrad viz: cannot read ");
    cr_assert(th_exists(page) == false);
}

Test(cli, run_op_writes_y_and_a_failed_run_keeps_the_old_result)
{
    char in[256], out[256], trunc[256];
    th_tmp_path(in, sizeof in, "case.safetensors");
    th_tmp_path(out, sizeof out, "result.safetensors");
    th_tmp_path(trunc, sizeof trunc, "truncated.safetensors");
    write_case(in, (const char *const[]){"op", "conv_transpose2d", "stride", "2", NULL});
    cr_assert(eq(int, RUN("run-op", "--in", in, "--out", out), 0), "%s", th_err);
    tg_st_file *r;
    cr_assert(eq(int, tg_safetensors_load(&r, out), TG_OK), "%s", tg_error_message());
    tg_tensor *y = tg_st_get(r, "y");
    cr_assert(y != NULL);
    /* (3-1)*2 + (2-1) + 1 = 6 */
    const int64_t *ys = tg_tensor_shape(y);
    cr_assert(eq(int, tg_tensor_ndim(y), 4));
    cr_assert(ys[0] == 1 && ys[1] == 3 && ys[2] == 6 && ys[3] == 6);
    tg_st_free(r);

    /* --out naming the --in file is refused: it would replace the case */
    size_t n_in = 0;
    char *case_bytes = th_read_file(in, &n_in);
    cr_assert(eq(int, RUN("run-op", "--in", in, "--out", in), 2));
    th_expect_in(th_err, "is the --in file");
    th_expect_same_bytes(in, case_bytes, n_in);
    free(case_bytes);

    /* From here on each run fails, and the result file keeps its bytes. */
    const char old[] = "previous result";
    FILE *f = fopen(out, "wb");
    fwrite(old, 1, sizeof old, f);
    fclose(f);
    char missing[256];
    th_tmp_path(missing, sizeof missing, "missing.safetensors");
    cr_assert(eq(int, RUN("run-op", "--in", missing, "--out", out), 1));
    th_expect_in(th_err, missing);
    th_expect_same_bytes(out, old, sizeof old);

    f = fopen(trunc, "wb");   /* the first 40 bytes of a valid case */
    FILE *g = fopen(in, "rb");
    char head[40];
    cr_assert(eq(sz, fread(head, 1, sizeof head, g), sizeof head));
    fwrite(head, 1, sizeof head, f);
    fclose(g);
    fclose(f);
    cr_assert(eq(int, RUN("run-op", "--in", trunc, "--out", out), 1));
    th_expect_in(th_err, "safetensors");
    th_expect_same_bytes(out, old, sizeof old);

    write_case(in, (const char *const[]){"op", "conv_transpose2d", "stride", "3000000000", NULL});
    cr_assert(eq(int, RUN("run-op", "--in", in, "--out", out), 1));
    th_expect_in(th_err, "stride=\"3000000000\": item 0 is too large");
    th_expect_same_bytes(out, old, sizeof old);

    write_case(in, (const char *const[]){"op", "conv_transpose2d", "stride", "2147483647",
                                         "padding", "0", NULL});
    cr_assert(eq(int, RUN("run-op", "--in", in, "--out", out), 1));
    /* (3-1)*(2^31-1) + (2-1) + 1 = 2^32 per axis */
    th_expect_in(th_err, "conv_transpose2d: the output shape (1, 3, 4294967296, 4294967296) is "
                        "too large");
    th_expect_same_bytes(out, old, sizeof old);
}

Test(cli, info_lists_tensors_and_rejects_a_non_safetensors_file)
{
    char in[256], bad[256];
    th_tmp_path(in, sizeof in, "case.safetensors");
    th_tmp_path(bad, sizeof bad, "three_bytes");
    write_case(in, (const char *const[]){"op", "conv_transpose2d", NULL});
    cr_assert(eq(int, RUN("info", in), 0), "%s", th_err);
    th_expect_in(th_out, "weight");
    th_expect_in(th_out, "conv_transpose2d");
    FILE *f = fopen(bad, "wb");
    fputs("abc", f);
    fclose(f);
    cr_assert(eq(int, RUN("info", bad), 1));
    th_expect_in(th_err, "too short for the 8-byte header size");
    cr_assert(eq(int, RUN("info"), 2));
}

Test(cli, ops_and_gradcheck)
{
    cr_assert(eq(int, RUN("ops"), 0));
    th_expect_row(th_out, "conv_transpose 3 promote yes yes");
    cr_assert(eq(int, RUN("gradcheck", "conv_transpose1d"), 0), "%s%s", th_out, th_err);
    th_expect_in(th_out, "cases, 0 failed");
    cr_assert(eq(int, RUN("gradcheck", "nope"), 2));
    th_expect_in(th_err, "unknown op 'nope'");
    cr_assert(eq(int, RUN("gradcheck", "--seed"), 2));
    th_expect_in(th_err, "unknown option '--seed'");
}

/* The losses and the norms have sweep cases; an op without any checks
 * nothing, which is not a pass. */
Test(cli, gradcheck_covers_nn_ops_and_fails_when_nothing_ran)
{
    cr_assert(eq(int, RUN("gradcheck", "nn"), 0), "%s%s", th_out, th_err);
    th_expect_in(th_out, "batch_norm ");
    th_expect_in(th_out, "layer_norm ");
    th_expect_in(th_out, "group_norm ");
    th_expect_in(th_out, "bce_logits ");
    th_expect_in(th_out, "bce_loss ");
    th_expect_in(th_out, "smooth_l1_loss ");
    th_expect_in(th_out, "huber_loss ");
    th_expect_in(th_out, "nll_loss          cross_entropy x (3, 4)");
    th_expect_in(th_out, "nll_loss          x (3, 4), classes {2, -100, 3}");
    th_expect_in(th_out, "9 cases, 0 failed");
    cr_assert(eq(int, RUN("gradcheck", "fake_quantize"), 1), "%s%s", th_out, th_err);
    th_expect_in(th_out, "fake_quantize: registered, but the sweep has no cases for it");
    th_expect_in(th_err, "no case checked");
    cr_assert(eq(int, RUN("gradcheck", "fake_quantize", "tanh"), 0), "%s%s", th_out, th_err);
    th_expect_in(th_out, "1 case, 0 failed");
}

/* The reductions, maximum/minimum and stack have sweep cases, gradient and
 * gradient of gradient; rows carry the registered op's name (tg_max_dim's
 * values are a pick_along_dim, tg_stack is a cat). */
Test(cli, gradcheck_covers_reductions_and_stack)
{
    cr_assert(eq(int, RUN("gradcheck", "var", "std", "amax", "max", "pick_along_dim",
                          "maximum", "minimum"), 0), "%s%s", th_out, th_err);
    th_expect_in(th_out, "var               (2, 3, 2) dims 1 correction 1 keepdim");
    th_expect_in(th_out, "pick_along_dim    max_dim (3, 4) dim -1 values");
    th_expect_in(th_out, "7 cases, 0 failed");
    cr_assert(eq(int, RUN("gradcheck", "cat"), 0), "%s%s", th_out, th_err);
    th_expect_in(th_out, "cat               stack (2, 3), (2, 3) dim 1");
}

Test(cli, bench_gemm_checks_its_sizes)
{
    cr_assert(eq(int, RUN("bench", "--gemm", "8,8,8", "--repeat", "2", "--warmup", "0"), 0),
              "%s", th_err);
    th_expect_in(th_out, "\"tool\": \"sgemm\", \"m\": 8, \"n\": 8, \"k\": 8");
    cr_assert(eq(int, RUN("bench", "--gemm", "0,1,1"), 2));
    th_expect_in(th_err, "--gemm '0,1,1': expected M,N,K, three integers >= 1");
    cr_assert(eq(int, RUN("bench", "--gemm", "8,8,8x"), 2));
    cr_assert(eq(int, RUN("bench", "--gemm", "3000000000,1,1"), 2));
    th_expect_in(th_err, "too large: each of M, N, K must be <= 2147483647");
    cr_assert(eq(int, RUN("bench", "--gemm", "70000,70000,1"), 2));
    th_expect_in(th_err, "each matrix <= 1073741824 elements");
}

/* bench's JSON names what ran: the algo TG_CONV_ALGO chose when --algo is
 * absent, and the library's thread count when --threads is. */
Test(cli, bench_reports_the_algo_and_threads_that_ran)
{
    char path[4096];
    th_golden_path(path, sizeof path, "convT2d_bf16_silu.case.safetensors");
    const char *const args[] = {"bench", "--in", path, "--repeat", "1", "--warmup", "0"};
    cr_assert(eq(int, setenv("TG_CONV_ALGO", "reference", 1), 0));
    cr_assert(eq(int, RUN(args[0], args[1], args[2], args[3], args[4], args[5], args[6]), 0),
              "%s", th_err);
    th_expect_in(th_out, "\"algo\": \"reference\"");
    cr_assert(eq(int, RUN(args[0], args[1], args[2], args[3], args[4], "--algo", "fast"), 0));
    th_expect_in(th_out, "\"algo\": \"fast\"");
    cr_assert(eq(int, unsetenv("TG_CONV_ALGO"), 0));
    cr_assert(eq(int, setenv("TG_NUM_THREADS", "3", 1), 0));
    cr_assert(eq(int, RUN(args[0], args[1], args[2], args[3], args[4], args[5], args[6]), 0));
    th_expect_in(th_out, "\"algo\": \"fast\", \"threads\": 3,");
    cr_assert(eq(int, RUN(args[0], args[1], args[2], args[3], args[4], "--threads", "1"), 0));
    th_expect_in(th_out, "\"threads\": 1,");
    cr_assert(eq(int, unsetenv("TG_NUM_THREADS"), 0));
}

/* bench's usage errors say why; --help is usage on stdout, exit 0. */
Test(cli, bench_usage_errors_say_why)
{
    cr_assert(eq(int, RUN("bench", "--help"), 0));
    th_expect_in(th_out, "usage: tapegrad bench --in CASE.safetensors");
    static const char *const bad[][5] = {
        {"--gemm", "8,8,8", "--repeat", "0",
         "--repeat must be an integer in [1, 1000000], not '0'"},
        {"--gemm", "8,8,8", "--repeat", "3x",
         "--repeat must be an integer in [1, 1000000], not '3x'"},
        {"--gemm", "8,8,8", "--algo", "FAST", "--algo must be reference or fast, not 'FAST'"},
        {"--gemm", "8,8,8", "--in", "c.st", "give --in or --gemm, not both"},
        {"--gemm", "8,8,8", "--frob", "1", "unknown argument '--frob'"},
        {"--gemm", "8,8,8", "--algo", "fast", "--backward and --algo apply to --in CASE"},
        {"--gemm", "8,8,8", "--backward", "--backward", "--backward and --algo apply to --in"},
        {"--in", "--gemm", "8,8,8", "--repeat", "option --in needs a value"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        cr_assert(eq(int, RUN("bench", bad[i][0], bad[i][1], bad[i][2], bad[i][3]), 2), "#%zu", i);
        th_expect_in(th_err, bad[i][4]);
    }
    cr_assert(eq(int, RUN("bench", "--gemm"), 2));
    th_expect_in(th_err, "option --gemm needs a value");
    cr_assert(eq(int, RUN("bench", "--repeat", "2"), 2));
    th_expect_in(th_err, "missing --in CASE or --gemm M,N,K");
}

/* ---- examples/dcgan ------------------------------------------------------ */

/* An IDX training set of n 28x28 images in th_tmp_dir. */
static void write_train_set(uint32_t n) { th_write_idx_set(th_tmp_dir, "train", n, 28, 7); }

static bool file_exists(const char *dir, const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (f) fclose(f);
    return f != NULL;
}

/* A small run trains, writes its outputs and a checkpoint; --sample reads it
 * back; a batch larger than the data set is refused before anything in --out
 * is touched; so is a bad option value. */
Test(cli, dcgan_trains_samples_and_refuses_bad_input_without_touching_out)
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
Test(cli, dcgan_option_errors_name_the_rule_and_conflicts_are_refused)
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
    static const char *const ignored[][2] = {
        {"--epochs", "2"}, {"--max-steps", "5"}, {"--data", "/nonexistent"},
        {"--time-budget", "1"}, {"--log-every", "3"},
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

/* --help names every value --amp accepts and its default, and the thread
 * default as the library takes it (tg_set_num_threads: TG_NUM_THREADS, else
 * OMP_NUM_THREADS, else the CPUs). */
Test(cli, dcgan_help_lists_the_values_and_defaults_the_parser_uses)
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
Test(cli, dcgan_refuses_a_checkpoint_with_bad_counters_lr_or_history)
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

Test(cli, dcgan_ddp_trains_on_two_ranks_and_resumes_in_one_process)
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
Test(cli, dcgan_ddp_resume_refused_on_one_rank_stops_every_rank)
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
Test(cli, dcgan_ddp_stops_every_rank_when_rank_0_cannot_write)
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
Test(cli, dcgan_ddp_stops_every_rank_when_rank_0_cannot_write_a_snapshot)
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
 * bf16.  --sync-bn without
 * --ddp is a usage error. */
Test(cli, dcgan_sync_bn_on_two_ranks_takes_the_one_process_steps)
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

/* --snapshot-every: generator snapshots during training, in the format of
 * generator.safetensors, that `tapegrad fid` scores (docs/fid.md). */
Test(cli, dcgan_snapshots_are_generators_that_fid_scores)
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

/* TG_PROFILE=N profiles a whole run of any program and prints the table on
 * stderr at exit; a value that is no count is said and ignored. */
Test(cli, tg_profile_prints_the_table_at_exit)
{
    cr_assert(eq(int, setenv("TG_PROFILE", "3", 1), 0));
    cr_assert(eq(int, RUN("gradcheck", "pool"), 0));
    th_expect_in(th_err, "name");
    th_expect_in(th_err, "self ms");
    th_expect_in(th_err, "3 of ");
    th_expect_in(th_err, " rows shown; self time of all rows");
    th_expect_in(th_out, "6 cases, 0 failed");
    cr_assert(eq(int, setenv("TG_PROFILE", "many", 1), 0));
    cr_assert(eq(int, RUN("gradcheck", "pool"), 0));
    th_expect_in(th_err, "tapegrad: TG_PROFILE=many is not a number of rows >= 1; not profiling");
    cr_assert(strstr(th_err, "self ms") == NULL, "%s", th_err);
    cr_assert(eq(int, unsetenv("TG_PROFILE"), 0));
    cr_assert(eq(int, RUN("gradcheck", "pool"), 0));
    cr_assert(strstr(th_err, "self ms") == NULL, "%s", th_err);
}
