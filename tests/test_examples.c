/* tests/test_examples.c - the small examples (autoencoder, tape_tour,
 * dcgan_load, dcgan_quantize, worked_example) as a user runs them: exit codes (0 ok, 1
 * failed, 2 usage; examples/example_args.h), what they print, and that a
 * refused run leaves existing output files as they were.
 *
 * The binaries are TG_AUTOENCODER, TG_TAPE_TOUR, TG_DCGAN_LOAD,
 * TG_DCGAN_QUANTIZE and TG_WORKED_EXAMPLE (set by tests/meson.build); each run's stdout and stderr
 * go to files in a fresh temporary directory.  Data sets are a few dozen
 * random IDX images written there, so every run is a fraction of a second. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

static char out_text[1 << 16], err_text[1 << 14];

/* th_run into out_text and err_text. */
static int run_env(const char *var, const char *const *args)
{
    return th_run(var, args, out_text, sizeof out_text, err_text, sizeof err_text);
}

#define AE(...) run_env("TG_AUTOENCODER", (const char *const[]){__VA_ARGS__, NULL})
#define TOUR(...) run_env("TG_TAPE_TOUR", (const char *const[]){__VA_ARGS__, NULL})
#define LOAD(...) run_env("TG_DCGAN_LOAD", (const char *const[]){__VA_ARGS__, NULL})
#define QUANT(...) run_env("TG_DCGAN_QUANTIZE", (const char *const[]){__VA_ARGS__, NULL})
#define WORKED(...) run_env("TG_WORKED_EXAMPLE", (const char *const[]){__VA_ARGS__, NULL})

static void setup(void) { th_tmp_dir_make("tg_examples_"); }
static void teardown(void) { th_tmp_dir_remove(); }

TestSuite(examples, .init = setup, .fini = teardown);

/* ---- files ----------------------------------------------------------------- */

static bool exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static void write_bytes(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    cr_assert(f != NULL, "cannot write %s", path);
    cr_assert(eq(sz, fwrite(data, 1, n, f), n));
    cr_assert(eq(int, fclose(f), 0));
}

/* The whole of the file at path, in a new buffer (*n bytes); NULL when it
 * cannot be read. */
static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc(len > 0 ? (size_t)len : 1);
    *n = buf ? fread(buf, 1, (size_t)len, f) : 0;
    fclose(f);
    return buf;
}

static void expect_same_bytes(const char *path, const char *want, size_t n)
{
    size_t len = 0;
    char *got = slurp(path, &len);
    cr_assert(got != NULL, "%s is gone", path);
    cr_assert(len == n && memcmp(got, want, n) == 0, "%s was changed", path);
    free(got);
}

/* Fails unless err (a failed run's stderr) says what the program was doing
 * in want, and quotes no C call or status name (as "tg_x(&y, z) failed:
 * TG_EIO: ..." did). */
static void expect_plain_message(const char *err, const char *want)
{
    th_expect_in(err, want);
    cr_assert(strstr(err, " failed: ") == NULL && strstr(err, ": TG_E") == NULL,
              "the message quotes source code:\n%s", err);
}

/* Writes an uncompressed IDX set of n random side x side images into
 * dir/<prefix> (prefix "train" or "t10k": <prefix>-images-idx3-ubyte and
 * <prefix>-labels-idx1-ubyte). */
static void write_idx_set_sized(const char *dir, const char *prefix, uint32_t n, uint8_t side)
{
    char path[512];
    uint64_t seed = 7 + n;
    snprintf(path, sizeof path, "%s/%s-images-idx3-ubyte", dir, prefix);
    FILE *f = fopen(path, "wb");
    cr_assert(f != NULL);
    const uint8_t img_head[16] = {0, 0, 8, 3, n >> 24, n >> 16 & 255, n >> 8 & 255, n & 255,
                                  0, 0, 0, side, 0, 0, 0, side};
    fwrite(img_head, 1, sizeof img_head, f);
    for (uint32_t i = 0; i < n * side * side; i++) fputc((int)(th_xorshift64(&seed) & 255), f);
    cr_assert(eq(int, fclose(f), 0));
    snprintf(path, sizeof path, "%s/%s-labels-idx1-ubyte", dir, prefix);
    f = fopen(path, "wb");
    cr_assert(f != NULL);
    const uint8_t lab_head[8] = {0, 0, 8, 1, n >> 24, n >> 16 & 255, n >> 8 & 255, n & 255};
    fwrite(lab_head, 1, sizeof lab_head, f);
    for (uint32_t i = 0; i < n; i++) fputc((int)(i % 10), f);
    cr_assert(eq(int, fclose(f), 0));
}

/* write_idx_set_sized with the 28x28 images the autoencoder takes. */
static void write_idx_set(const char *dir, const char *prefix, uint32_t n)
{
    write_idx_set_sized(dir, prefix, n, 28);
}

/* ---- autoencoder ------------------------------------------------------------- */

static const char old_weights[] = "weights of an earlier, good run";

/* th_tmp_dir/data with 24 training and n_test test images (no test files
 * when n_test is 0), and th_tmp_dir/out/autoencoder.safetensors holding
 * old_weights.  Fills data and weights with their paths. */
static void autoencoder_setup(uint32_t n_test, char *data, char *weights)
{
    char out[256];
    th_tmp_path(data, 256, "data");
    th_tmp_path(out, sizeof out, "out");
    cr_assert(eq(int, mkdir(data, 0755), 0));
    cr_assert(eq(int, mkdir(out, 0755), 0));
    write_idx_set(data, "train", 24);
    if (n_test > 0) write_idx_set(data, "t10k", n_test);
    snprintf(weights, 512, "%s/autoencoder.safetensors", out);
    write_bytes(weights, old_weights, sizeof old_weights);
}

Test(examples, autoencoder_refuses_a_batch_larger_than_the_data_set_before_training)
{
    char data[256], weights[512];
    autoencoder_setup(40, data, weights);
    cr_assert(eq(int, AE("--data", data, "--out", "out", "--batch", "100000"), 1), "%s",
              err_text);
    th_expect_in(err_text, "autoencoder: batch 100000 is larger than the 24 training images");
    cr_assert(strstr(out_text, "epoch") == NULL, "it trained:\n%s", out_text);
    expect_same_bytes(weights, old_weights, sizeof old_weights);
}

Test(examples, autoencoder_checks_the_test_set_before_training)
{
    char data[256], weights[512];
    autoencoder_setup(0, data, weights);
    cr_assert(eq(int, AE("--data", data, "--out", "out", "--batch", "8", "--steps", "1"), 1));
    th_expect_in(err_text, "autoencoder: cannot load the test set from");
    th_expect_in(err_text, "t10k-images-idx3-ubyte");
    cr_assert(strstr(out_text, "epoch") == NULL, "it trained:\n%s", out_text);
    expect_same_bytes(weights, old_weights, sizeof old_weights);
}

/* The model takes 1x28x28 images: a test or training set of 14x14 ones is
 * refused before training (it used to train, replace the weights, then fail
 * in the evaluation's loss), with a message naming --data and both sizes. */
Test(examples, autoencoder_refuses_images_of_another_size_before_training)
{
    char data[256], weights[512];
    autoencoder_setup(20, data, weights);
    write_idx_set_sized(data, "t10k", 10, 14);
    cr_assert(eq(int, AE("--data", data, "--out", "out", "--batch", "8", "--steps", "1"), 1),
              "%s", err_text);
    th_expect_in(err_text, "autoencoder: --data ");
    th_expect_in(err_text, "the test images are (1, 14, 14): the model takes (1, 28, 28)");
    cr_assert(strstr(out_text, "epoch") == NULL, "it trained:\n%s", out_text);
    expect_same_bytes(weights, old_weights, sizeof old_weights);

    write_idx_set(data, "t10k", 10);
    write_idx_set_sized(data, "train", 24, 14);
    cr_assert(eq(int, AE("--data", data, "--out", "out", "--batch", "8", "--steps", "1"), 1),
              "%s", err_text);
    th_expect_in(err_text, "the training images are (1, 14, 14): the model takes (1, 28, 28)");
    cr_assert(strstr(out_text, "epoch") == NULL, "it trained:\n%s", out_text);
    expect_same_bytes(weights, old_weights, sizeof old_weights);
}

/* --out must be a folder it can write in (made when missing): a regular
 * file, or a path through one, is refused before training and left as it
 * was (it used to train and fail only at the save). */
Test(examples, autoencoder_refuses_an_out_that_is_not_a_folder_before_training)
{
    char data[256], weights[512], file[256];
    autoencoder_setup(20, data, weights);
    static const char keep[] = "not a folder";
    write_bytes(th_tmp_path(file, sizeof file, "c1.st"), keep, sizeof keep);
    cr_assert(eq(int, AE("--data", data, "--out", "c1.st", "--batch", "8", "--steps", "1"), 1),
              "%s", err_text);
    th_expect_in(err_text, "autoencoder: --out c1.st: must be a folder");
    cr_assert(strstr(out_text, "epoch") == NULL, "it trained:\n%s", out_text);
    expect_same_bytes(file, keep, sizeof keep);
    cr_assert(eq(int, AE("--data", data, "--out", "c1.st/sub", "--batch", "8", "--steps", "1"),
                 1), "%s", err_text);
    th_expect_in(err_text, "autoencoder: --out c1.st/sub: cannot create the folder: Not a directory");
    cr_assert(strstr(out_text, "epoch") == NULL, "it trained:\n%s", out_text);
    expect_same_bytes(file, keep, sizeof keep);
    expect_same_bytes(weights, old_weights, sizeof old_weights);
}

/* A failure after training (here: the files it writes are folders) says
 * what the program was doing, not which C call failed. */
Test(examples, autoencoder_says_what_it_was_doing_when_it_fails)
{
    char data[256], weights[512], png[256];
    autoencoder_setup(20, data, weights);
    cr_assert(eq(int, mkdir(th_tmp_path(png, sizeof png, "out/autoencoder_pairs.png"), 0755),
                 0));
    cr_assert(eq(int, AE("--data", data, "--out", "out", "--batch", "8", "--steps", "1",
                         "--threads", "1"), 1), "%s", err_text);
    expect_plain_message(err_text, "autoencoder: writing out/autoencoder_pairs.png: ");
    cr_assert(eq(int, remove(weights), 0));
    cr_assert(eq(int, mkdir(weights, 0755), 0));
    cr_assert(eq(int, AE("--data", data, "--out", "out", "--batch", "8", "--steps", "1",
                         "--threads", "1"), 1), "%s", err_text);
    expect_plain_message(err_text,
                         "autoencoder: saving the weights to out/autoencoder.safetensors: ");
}

/* Fewer than 1000 test images: the MSE is over those there are, and the
 * trained weights are written. */
Test(examples, autoencoder_evaluates_a_short_test_set_and_saves_the_training)
{
    char data[256], weights[512];
    autoencoder_setup(20, data, weights);
    cr_assert(eq(int, AE("--data", data, "--out", "out", "--batch", "8", "--steps", "1",
                         "--threads", "1"), 0),
              "%s", err_text);
    th_expect_in(out_text, "test mse on 20 images");
    size_t n = 0;
    char *w = slurp(weights, &n);
    cr_assert(w != NULL && n > 1000, "no new weights in %s", weights);
    free(w);
    cr_assert(exists(th_tmp_path(data, sizeof data, "out/autoencoder_pairs.png")));
}

Test(examples, autoencoder_rejects_bad_option_values_with_exit_2)
{
    char data[256], weights[512];
    autoencoder_setup(40, data, weights);
    static const struct {
        const char *opt, *val, *msg;
    } cases[] = {
        {"--lr", "inf", "--lr 'inf': expected a finite number > 0"},
        {"--lr", "nan", "--lr 'nan'"},
        {"--lr", "-1e-3", "--lr '-1e-3'"},
        {"--lr", "5", "--lr '5'"},
        {"--seconds", "1e999", "--seconds '1e999'"},
        {"--seed", "-1", "--seed '-1': expected an integer in [0, 18446744073709551615]"},
        {"--seed", "", "--seed ''"},
        {"--seed", "12x", "--seed '12x'"},
        {"--steps", "", "--steps ''"},
        {"--steps", "-2", "--steps '-2'"},
        {"--threads", "4294967297", "--threads '4294967297': expected an integer in [1, 256]"},
        {"--batch", "0", "--batch '0'"},
        {"--epochs", " 3", "--epochs ' 3'"},
        {"--bogus", "1", "unknown option '--bogus'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        cr_assert(eq(int, AE("--data", data, "--out", "out", "--steps", "1", cases[i].opt,
                             cases[i].val), 2),
                  "%s '%s': %s", cases[i].opt, cases[i].val, err_text);
        th_expect_in(err_text, cases[i].msg);
        expect_same_bytes(weights, old_weights, sizeof old_weights);
    }
    cr_assert(eq(int, AE("--data", data, "--steps"), 2));
    th_expect_in(err_text, "option --steps needs a value");
    cr_assert(eq(int, AE("--help"), 0));
    th_expect_in(out_text, "usage: autoencoder");
    expect_same_bytes(weights, old_weights, sizeof old_weights);
}

/* A value that starts with "--" is an option forgotten its value, not a
 * path: "--out --seconds 3" used to write into a folder named "--seconds".
 * A single dash still reaches the number parsers and their range rules. */
Test(examples, option_values_that_look_like_options_are_refused)
{
    char data[256], weights[512], path[256];
    autoencoder_setup(20, data, weights);
    cr_assert(eq(int, AE("--data", data, "--batch", "8", "--steps", "1", "--out", "--seconds"), 2),
              "%s", err_text);
    th_expect_in(err_text, "autoencoder: option --out needs a value (got '--seconds'; "
                           "write ./--seconds for a path of that name)");
    cr_assert(exists(th_tmp_path(path, sizeof path, "--seconds")) == false,
              "it made a folder named --seconds");
    cr_assert(strstr(out_text, "epoch") == NULL, "it trained:\n%s", out_text);
    cr_assert(eq(int, AE("--data", data, "--seconds", "-1"), 2), "%s", err_text);
    th_expect_in(err_text, "autoencoder: --seconds '-1': expected a finite number > 0");

    cr_assert(eq(int, LOAD("--warmup", "1", "--export", "--n"), 2), "%s", err_text);
    th_expect_in(err_text, "dcgan_load: option --export needs a value (got '--n'");
    cr_assert(exists(th_tmp_path(path, sizeof path, "--n")) == false,
              "it made a folder named --n");
    cr_assert(eq(int, LOAD("--export", "ex", "--warmup", "-1"), 2), "%s", err_text);
    th_expect_in(err_text, "dcgan_load: --warmup '-1': expected an integer in [0, 1000]");
    cr_assert(eq(int, QUANT("--calib", "1", "--out", "--calib"), 2), "%s", err_text);
    th_expect_in(err_text, "dcgan_quantize: option --out needs a value (got '--calib'");
    cr_assert(exists(th_tmp_path(path, sizeof path, "--calib")) == false);
}

/* ---- tape_tour --------------------------------------------------------------- */

Test(examples, tape_tour_writes_its_dot_file)
{
    char dot[256];
    cr_assert(eq(int, TOUR("my.dot"), 0), "%s", err_text);
    size_t n = 0;
    char *text = slurp(th_tmp_path(dot, sizeof dot, "my.dot"), &n);
    cr_assert(text != NULL && n > 0);
    cr_assert(strstr(text, "digraph") != NULL, "not DOT:\n%s", text);
    free(text);
    th_expect_in(out_text, "finite differences");
}

/* The narration says what the library does: tanh saves its output (a
 * detached alias, as PyTorch) and its derivative 1 - y^2 comes from that
 * output, so the create_graph tape of df/du holds tanh's node and three new
 * ones (y*y, 1 - that, times the incoming 1), with no tanh recomputed. */
Test(examples, tape_tour_says_what_tanh_saves_and_records)
{
    cr_assert(eq(int, TOUR("my.dot"), 0), "%s", err_text);
    th_expect_in(out_text, "#7 mul  inputs: #6, #6");
    th_expect_in(out_text, "#9 mul  inputs: const, #8");
    cr_assert(strstr(out_text, "#10 ") == NULL, "more nodes than narrated:\n%s", out_text);
    th_expect_in(out_text, "It saves its output a");
    th_expect_in(out_text, "three new nodes");
    cr_assert(strstr(out_text, "recompute") == NULL, "it narrates a recomputation:\n%s",
              out_text);
}

Test(examples, tape_tour_help_and_usage_errors_write_nothing)
{
    char path[256];
    cr_assert(eq(int, TOUR("--help"), 0));
    th_expect_in(out_text, "usage: tape_tour");
    cr_assert(exists(th_tmp_path(path, sizeof path, "--help")) == false, "--help made a file");

    static const char keep[] = "a file that must stay";
    write_bytes(th_tmp_path(path, sizeof path, "keep.txt"), keep, sizeof keep);
    cr_assert(eq(int, TOUR("keep.txt", "a", "b"), 2));
    th_expect_in(err_text, "tape_tour: one DOT file only, got 'keep.txt' and 'a'");
    expect_same_bytes(path, keep, sizeof keep);
    cr_assert(eq(int, TOUR("--bogus"), 2));
    th_expect_in(err_text, "tape_tour: unknown option '--bogus'");
    cr_assert(exists(th_tmp_path(path, sizeof path, "--bogus")) == false);
    cr_assert(exists(th_tmp_path(path, sizeof path, "tape.dot")) == false,
              "a usage error wrote tape.dot");
}

Test(examples, tape_tour_reports_write_errors_with_the_reason)
{
    cr_assert(eq(int, TOUR("/dev/full"), 1), "%s", out_text);
    th_expect_in(err_text, "tape_tour: cannot write /dev/full: No space left on device");
    cr_assert(eq(int, TOUR("no/such/dir/x.dot"), 1));
    th_expect_in(err_text, "tape_tour: cannot write no/such/dir/x.dot: No such file or directory");
}

/* ---- worked_example ------------------------------------------------------------ */

/* It takes no options: --help and -h print the usage; any other argument is
 * a usage error (it used to be ignored, exit 0). */
Test(examples, worked_example_takes_no_arguments)
{
    cr_assert(eq(int, run_env("TG_WORKED_EXAMPLE", (const char *const[]){NULL}), 0), "%s",
              err_text);
    th_expect_in(out_text, "d loss / d w:");
    cr_assert(eq(int, WORKED("--help"), 0), "%s", err_text);
    th_expect_in(out_text, "usage: worked_example");
    cr_assert(strstr(out_text, "tensor f32") == NULL, "--help ran the example:\n%s", out_text);
    cr_assert(eq(int, WORKED("-h"), 0), "%s", err_text);
    th_expect_in(out_text, "usage: worked_example");
    static const char *const bad[] = {"--bogus", "xyz", "-v", ""};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        cr_assert(eq(int, WORKED(bad[i]), 2), "'%s': %s", bad[i], out_text);
        char want[128];
        snprintf(want, sizeof want, "worked_example: unexpected argument '%s' (it takes no "
                 "options)", bad[i]);
        th_expect_in(err_text, want);
        th_expect_in(err_text, "usage: worked_example");
        cr_assert(strstr(out_text, "tensor f32") == NULL, "'%s' ran the example", bad[i]);
    }
    cr_assert(eq(int, WORKED("--help", "xyz"), 2), "%s", out_text);
    th_expect_in(err_text, "unexpected argument 'xyz'");
}

/* ---- dcgan_load -------------------------------------------------------------- */

/* Writes a safetensors file of f32 zero tensors: names and shapes from
 * (name, ndim, d0, d1) rows, up to 4. */
typedef struct st_entry {
    const char *name;
    int ndim;
    int64_t shape[2];
} st_entry;

static void write_st(const char *path, int n, const st_entry *e)
{
    tg_st_file *f;
    cr_assert(eq(int, tg_st_new(&f), TG_OK));
    for (int i = 0; i < n; i++) {
        tg_tensor *t;
        cr_assert(eq(int, tg_tensor_zeros(&t, TG_F32, e[i].ndim, e[i].shape), TG_OK), "%s",
                  tg_error_message());
        cr_assert(eq(int, tg_st_set(f, e[i].name, t), TG_OK), "%s", tg_error_message());
        tg_tensor_release(t);
    }
    cr_assert(eq(int, tg_safetensors_save(f, path), TG_OK), "%s", tg_error_message());
    tg_st_free(f);
}

Test(examples, dcgan_load_help_and_strict_option_values)
{
    char dir[256];
    th_tmp_path(dir, sizeof dir, "ex");
    cr_assert(eq(int, LOAD("--help"), 0));
    th_expect_in(out_text, "usage: dcgan_load");
    static const struct {
        const char *opt, *val, *msg;
    } cases[] = {
        {"--n", "3x", "dcgan_load: --n '3x': expected an integer in [1, 100000]"},
        {"--n", "", "--n ''"},
        {"--n", "0", "--n '0'"},
        {"--warmup", "abc", "dcgan_load: --warmup 'abc'"},
        {"--warmup", "-1", "--warmup '-1'"},
        {"--seed", "xyz", "dcgan_load: --seed 'xyz'"},
        {"--seed", "-1", "--seed '-1'"},
        {"--bogus", "1", "dcgan_load: unknown option '--bogus'"},
        {"--weights", "w.safetensors", "--weights and --export belong to different modes"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        cr_assert(eq(int, LOAD("--export", dir, cases[i].opt, cases[i].val), 2),
                  "%s '%s': %s", cases[i].opt, cases[i].val, err_text);
        th_expect_in(err_text, cases[i].msg);
        cr_assert(exists(dir) == false, "%s '%s' made %s", cases[i].opt, cases[i].val, dir);
    }
    cr_assert(eq(int, LOAD("--seed", "3"), 2));
    th_expect_in(err_text, "dcgan_load: --seed goes with --export DIR");
    cr_assert(eq(int, LOAD("--weights", "w.safetensors", "--latents", "z.safetensors"), 2));
    th_expect_in(err_text, "dcgan_load: missing option --out");
}

/* (C*49, nz) with C even >= 2 and nz >= 1, else a message that names the
 * file and the shape (dcgan_arch_from_generator_weight); the output file is
 * left alone and, in the sanitizer build, nothing leaks. */
Test(examples, dcgan_load_rejects_wrongly_shaped_weights_with_a_message)
{
    char w[256], z[256], out[256];
    th_tmp_path(w, sizeof w, "w.safetensors");
    th_tmp_path(z, sizeof z, "z.safetensors");
    th_tmp_path(out, sizeof out, "o.safetensors");
    write_st(z, 1, (st_entry[]){{"z", 2, {2, 4}}});
    static const char old[] = "an earlier result";
    write_bytes(out, old, sizeof old);
    static const struct {
        st_entry w0;
        const char *shape;
    } cases[] = {
        {{"net.0.weight", 2, {147, 4}}, "(147, 4)"},   /* C = 3, odd */
        {{"net.0.weight", 2, {0, 4}}, "(0, 4)"},
        {{"net.0.weight", 2, {392, 0}}, "(392, 0)"},
        {{"net.0.weight", 2, {49, 4}}, "(49, 4)"},     /* C = 1 */
        {{"net.0.weight", 1, {392}}, "(392)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        write_st(w, 1, &cases[i].w0);
        cr_assert(eq(int, LOAD("--weights", w, "--latents", z, "--out", out), 1), "%s",
                  err_text);
        char want[256];
        snprintf(want, sizeof want, "net.0.weight is %s: expected (C*49, nz) with C even and "
                 ">= 2, nz >= 1", cases[i].shape);
        th_expect_in(err_text, want);
        expect_same_bytes(out, old, sizeof old);
    }
    write_st(w, 1, (st_entry[]){{"other", 2, {98, 4}}});
    cr_assert(eq(int, LOAD("--weights", w, "--latents", z, "--out", out), 1));
    th_expect_in(err_text, "no tensor net.0.weight");
    expect_same_bytes(out, old, sizeof old);
}

/* th_tmp_dir/ex/{generator,latents}.safetensors from dcgan_load --export;
 * w (512 bytes) receives the generator's path and z, unless NULL, the
 * latents'. */
static void export_generator(char *w, char *z)
{
    char dir[256];
    th_tmp_path(dir, sizeof dir, "ex");
    cr_assert(eq(int, LOAD("--export", dir, "--n", "2", "--warmup", "1"), 0), "%s", err_text);
    snprintf(w, 512, "%s/generator.safetensors", dir);
    if (z) snprintf(z, 512, "%s/latents.safetensors", dir);
}

Test(examples, dcgan_load_runs_an_exported_generator_and_checks_the_latents)
{
    char w[512], z[512], out[256], bad_z[256];
    export_generator(w, z);
    th_tmp_path(out, sizeof out, "o.safetensors");
    cr_assert(eq(int, LOAD("--weights", w, "--latents", z, "--out", out), 0), "%s", err_text);
    th_expect_in(out_text, "loaded strictly");

    static const char old[] = "an earlier result";
    write_bytes(out, old, sizeof old);
    cr_assert(eq(int, LOAD("--weights", w, "--latents", z, "--out", out, "--key", "q"), 1));
    th_expect_in(err_text, "has no tensor 'q'");
    th_tmp_path(bad_z, sizeof bad_z, "z5.safetensors");
    write_st(bad_z, 1, (st_entry[]){{"z", 2, {2, 5}}});
    cr_assert(eq(int, LOAD("--weights", w, "--latents", bad_z, "--out", out), 1));
    th_expect_in(err_text, "'z' is (2, 5): expected (N, 64)");
    expect_same_bytes(out, old, sizeof old);

    size_t n = 0;
    char *latents = slurp(z, &n);
    cr_assert(eq(int, LOAD("--weights", w, "--latents", z, "--out", z), 2));
    th_expect_in(err_text, "would overwrite the input");
    expect_same_bytes(z, latents, n);
    free(latents);
}

/* --png naming the file of --out (same name, another spelling of it, or the
 * same file through a link) is refused before anything is read: it used to
 * write the PNG over the safetensors file just written. */
Test(examples, dcgan_load_refuses_a_png_that_is_the_out_file)
{
    char w[512], z[512], out[256], link[256];
    export_generator(w, z);
    th_tmp_path(out, sizeof out, "same");
    static const char *const pngs[] = {"same", "./same", "ex/../same"};
    for (size_t i = 0; i < sizeof pngs / sizeof *pngs; i++) {
        cr_assert(eq(int, LOAD("--weights", w, "--latents", z, "--out", "same", "--png",
                               pngs[i]), 2),
                  "--png %s: %s", pngs[i], err_text);
        th_expect_in(err_text, "dcgan_load: --png");
        th_expect_in(err_text, "is the file of --out same: they must differ");
        cr_assert(exists(out) == false, "--png %s: a refused run wrote %s", pngs[i], out);
    }
    static const char old[] = "an earlier result";
    write_bytes(out, old, sizeof old);
    cr_assert(eq(int, symlink("same", th_tmp_path(link, sizeof link, "link")), 0));
    cr_assert(eq(int, LOAD("--weights", w, "--latents", z, "--out", "same", "--png", "link"),
                 2), "%s", err_text);
    th_expect_in(err_text, "dcgan_load: --png link is the file of --out same");
    expect_same_bytes(out, old, sizeof old);
    cr_assert(eq(int, LOAD("--weights", w, "--latents", z, "--out", "same", "--png", "o.png"),
                 0), "%s", err_text);
    cr_assert(exists(th_tmp_path(link, sizeof link, "o.png")));
}

/* --export into a folder that holds generator.safetensors or
 * latents.safetensors (a trained dcgan's --out) is refused unless
 * --overwrite: it used to replace a trained generator with a random one. */
Test(examples, dcgan_load_export_keeps_existing_files_unless_overwrite)
{
    char dir[256], w[512], z[512];
    th_tmp_path(dir, sizeof dir, "ex");
    cr_assert(eq(int, mkdir(dir, 0755), 0));
    snprintf(w, sizeof w, "%s/generator.safetensors", dir);
    snprintf(z, sizeof z, "%s/latents.safetensors", dir);
    static const char trained[] = "a trained generator";
    write_bytes(w, trained, sizeof trained);
    cr_assert(eq(int, LOAD("--export", "ex", "--n", "2", "--warmup", "1"), 2), "%s", err_text);
    th_expect_in(err_text, "dcgan_load: --export ex: ex/generator.safetensors exists: "
                           "give --overwrite to replace it");
    expect_same_bytes(w, trained, sizeof trained);
    cr_assert(exists(z) == false, "a refused run wrote %s", z);

    cr_assert(eq(int, remove(w), 0));
    write_bytes(z, trained, sizeof trained);
    cr_assert(eq(int, LOAD("--export", "ex", "--n", "2", "--warmup", "1"), 2), "%s", err_text);
    th_expect_in(err_text, "ex/latents.safetensors exists: give --overwrite");
    expect_same_bytes(z, trained, sizeof trained);
    cr_assert(exists(w) == false, "a refused run wrote %s", w);

    cr_assert(eq(int, LOAD("--overwrite"), 2));
    th_expect_in(err_text, "dcgan_load: --overwrite goes with --export DIR");
    cr_assert(eq(int, LOAD("--export", "ex", "--n", "2", "--warmup", "1", "--overwrite"), 0),
              "%s", err_text);
    size_t n = 0;
    char *got = slurp(z, &n);
    cr_assert(got != NULL && n > sizeof trained, "--overwrite did not replace %s", z);
    free(got);
    cr_assert(exists(w));
}

/* Failures say what the program was doing, not which C call failed. */
Test(examples, dcgan_load_says_what_it_was_doing_when_it_fails)
{
    char w[512], z[512];
    export_generator(w, z);
    cr_assert(eq(int, LOAD("--weights", "nope.st", "--latents", z, "--out", "o.st"), 1));
    expect_plain_message(err_text, "dcgan_load: reading --weights nope.st: ");
    cr_assert(eq(int, LOAD("--weights", w, "--latents", "nope.st", "--out", "o.st"), 1));
    expect_plain_message(err_text, "dcgan_load: reading --latents nope.st: ");
    cr_assert(eq(int, LOAD("--weights", w, "--latents", z, "--out", "ex"), 1));
    expect_plain_message(err_text, "dcgan_load: writing --out ex: ");
    write_st(w, 1, (st_entry[]){{"net.0.weight", 2, {98, 64}}});
    cr_assert(eq(int, LOAD("--weights", w, "--latents", z, "--out", "o.st"), 1));
    expect_plain_message(err_text, "dcgan_load: loading the generator from ");
}

/* ---- dcgan_quantize ---------------------------------------------------------- */

#define QUANT_FAST "--calib", "1", "--batch", "4", "--repeat", "1"

Test(examples, dcgan_quantize_help_and_strict_option_values)
{
    cr_assert(eq(int, QUANT("--help"), 0));
    th_expect_in(out_text, "usage: dcgan_quantize");
    static const struct {
        const char *opt, *val, *msg;
    } cases[] = {
        {"--calib", "2x", "dcgan_quantize: --calib '2x': expected an integer in [1, 1000]"},
        {"--repeat", "1x", "dcgan_quantize: --repeat '1x'"},
        {"--seed", "abc", "dcgan_quantize: --seed 'abc'"},
        {"--batch", "", "dcgan_quantize: --batch ''"},
        {"--fold", "2", "dcgan_quantize: --fold '2': expected 1 or 0"},
        {"--bogus", "1", "dcgan_quantize: unknown option '--bogus'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        cr_assert(eq(int, QUANT(cases[i].opt, cases[i].val), 2), "%s '%s': %s", cases[i].opt,
                  cases[i].val, err_text);
        th_expect_in(err_text, cases[i].msg);
    }
}

Test(examples, dcgan_quantize_rejects_wrongly_shaped_weights_with_a_message)
{
    char w[256];
    th_tmp_path(w, sizeof w, "w.safetensors");
    write_st(w, 1, (st_entry[]){{"net.0.weight", 2, {147, 4}}});
    cr_assert(eq(int, QUANT("--weights", w, QUANT_FAST), 1), "%s", err_text);
    th_expect_in(err_text, "net.0.weight is (147, 4): expected (C*49, nz) with C even and >= 2");
}

/* A --latents file named on the command line must be there and hold z of
 * (N, nz) finite values: no fallback to fresh latents, nothing written. */
Test(examples, dcgan_quantize_needs_a_readable_latents_file_when_one_is_named)
{
    char w[512], z[256], out[256];
    export_generator(w, NULL);
    th_tmp_path(out, sizeof out, "q");
    th_tmp_path(z, sizeof z, "missing.safetensors");
    cr_assert(eq(int, QUANT("--weights", w, "--latents", z, "--out", out, QUANT_FAST), 1));
    th_expect_in(err_text, "cannot open");
    th_expect_in(err_text, "missing.safetensors");
    write_bytes(th_tmp_path(z, sizeof z, "corrupt.safetensors"), "junk", 4);
    cr_assert(eq(int, QUANT("--weights", w, "--latents", z, "--out", out, QUANT_FAST), 1));
    th_expect_in(err_text, "safetensors");
    th_tmp_path(z, sizeof z, "z5.safetensors");
    write_st(z, 1, (st_entry[]){{"z", 2, {2, 5}}});
    cr_assert(eq(int, QUANT("--weights", w, "--latents", z, "--out", out, QUANT_FAST), 1));
    th_expect_in(err_text, "'z' is (2, 5): expected (N, 64)");
    write_st(z, 1, (st_entry[]){{"y", 2, {2, 64}}});
    cr_assert(eq(int, QUANT("--weights", w, "--latents", z, "--out", out, QUANT_FAST), 1));
    th_expect_in(err_text, "has no tensor 'z'");

    tg_tensor *t;
    cr_assert(eq(int, tg_tensor_zeros(&t, TG_F32, 2, (int64_t[]){2, 64}), TG_OK));
    cr_assert(eq(int, tg_tensor_set_flat(t, 5, NAN), TG_OK));
    tg_st_file *f;
    cr_assert(eq(int, tg_st_new(&f), TG_OK));
    cr_assert(eq(int, tg_st_set(f, "z", t), TG_OK));
    cr_assert(eq(int, tg_safetensors_save(f, th_tmp_path(z, sizeof z, "znan.safetensors")),
                 TG_OK));
    tg_st_free(f);
    tg_tensor_release(t);
    cr_assert(eq(int, QUANT("--weights", w, "--latents", z, "--out", out, QUANT_FAST), 1));
    th_expect_in(err_text, "'z' has 1 non-finite values of 128");
    cr_assert(strstr(out_text, "PSNR") == NULL, "%s", out_text);
    cr_assert(exists(out) == false, "a refused run made %s", out);

    /* The default latents file (out/latents.safetensors in the working
     * folder) may be missing: then fresh latents are used. */
    cr_assert(eq(int, QUANT("--weights", w, QUANT_FAST), 0), "%s", err_text);
    th_expect_in(out_text, "32 fresh test latents");
    th_expect_in(out_text, "dB over 32 images");
}

/* --out must be a folder it can write in: a regular file is refused before
 * calibration (it used to calibrate and fail at the first PNG) and left as
 * it was. */
Test(examples, dcgan_quantize_refuses_an_out_that_is_not_a_folder_before_calibrating)
{
    char w[512], file[256];
    export_generator(w, NULL);
    static const char keep[] = "not a folder";
    write_bytes(th_tmp_path(file, sizeof file, "c1.st"), keep, sizeof keep);
    cr_assert(eq(int, QUANT("--weights", w, "--latents", "ex/latents.safetensors", "--out",
                            "c1.st", QUANT_FAST), 1),
              "%s", err_text);
    th_expect_in(err_text, "dcgan_quantize: --out c1.st: must be a folder");
    cr_assert(strstr(out_text, "calibrated") == NULL, "it calibrated:\n%s", out_text);
    expect_same_bytes(file, keep, sizeof keep);
}

/* Failures say what the program was doing, not which C call failed. */
Test(examples, dcgan_quantize_says_what_it_was_doing_when_it_fails)
{
    char w[512], png[256];
    export_generator(w, NULL);
    cr_assert(eq(int, QUANT("--weights", "nope.st", QUANT_FAST), 1));
    expect_plain_message(err_text, "dcgan_quantize: reading --weights nope.st: ");
    cr_assert(eq(int, QUANT("--weights", w, "--latents", "nope.st", QUANT_FAST), 1));
    expect_plain_message(err_text, "dcgan_quantize: reading --latents nope.st: ");
    cr_assert(eq(int, mkdir(th_tmp_path(png, sizeof png, "q"), 0755), 0));
    cr_assert(eq(int, mkdir(th_tmp_path(png, sizeof png, "q/samples_int8.png"), 0755), 0));
    cr_assert(eq(int, QUANT("--weights", w, "--latents", "ex/latents.safetensors", "--out", "q",
                            QUANT_FAST), 1));
    expect_plain_message(err_text, "dcgan_quantize: writing q/samples_int8.png: ");
}

/* A NaN in the generator makes the float output NaN: no PSNR is claimed
 * (fmax(NaN, 1e-300) used to give 3006 dB). */
/* A generator with a NaN weight is refused at calibration (the observers
 * take no NaN), so no PSNR is printed. */
Test(examples, dcgan_quantize_refuses_a_generator_with_nan_weights)
{
    char w[512], bad[256], q[256];
    export_generator(w, NULL);
    tg_st_file *f;
    cr_assert(eq(int, tg_safetensors_load(&f, w), TG_OK), "%s", tg_error_message());
    tg_tensor *b = tg_st_get(f, "gen.net.7.bias");
    cr_assert(b != NULL);
    cr_assert(eq(int, tg_tensor_set_flat(b, 0, NAN), TG_OK));
    cr_assert(eq(int, tg_safetensors_save(f, th_tmp_path(bad, sizeof bad, "gnan.safetensors")),
                 TG_OK));
    tg_st_free(f);
    cr_assert(eq(int, mkdir(th_tmp_path(q, sizeof q, "q"), 0755), 0));
    cr_assert(eq(int, QUANT("--weights", bad, "--latents", "ex/latents.safetensors", "--out", "q",
                            QUANT_FAST), 1),
              "%s", out_text);
    th_expect_in(err_text, "calibration data must be free of NaN");
    cr_assert(strstr(out_text, " dB") == NULL, "%s", out_text);
}
