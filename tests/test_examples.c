/* tests/test_examples.c - the small examples (autoencoder, vae, tape_tour,
 * worked_example) as a user runs them: exit codes (0 ok, 1 failed, 2 usage;
 * examples/example_args.h), what they print, and that a refused run leaves
 * existing output files as they were.  dcgan_load and dcgan_quantize are
 * tested in test_examples_dcgan.c.
 *
 * The binaries are TG_AUTOENCODER, TG_TAPE_TOUR and TG_WORKED_EXAMPLE (set
 * by tests/meson.build); each run's stdout and stderr go to files in a fresh
 * temporary directory.  Data sets are a few dozen random IDX images written
 * there, so every run is a fraction of a second. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helpers.h"
#include "tapegrad/image.h"
#include "tapegrad/op.h"
#include "tapegrad/viz.h"

#define AE(...) th_run("TG_AUTOENCODER", (const char *const[]){__VA_ARGS__, NULL})
#define VAE(...) th_run("TG_VAE", (const char *const[]){__VA_ARGS__, NULL})
#define TOUR(...) th_run("TG_TAPE_TOUR", (const char *const[]){__VA_ARGS__, NULL})
#define WORKED(...) th_run("TG_WORKED_EXAMPLE", (const char *const[]){__VA_ARGS__, NULL})

static void setup(void) { th_tmp_dir_make("tg_examples_"); }
static void teardown(void) { th_tmp_dir_remove(); }

TestSuite(examples, .init = setup, .fini = teardown);

/* ---- files ----------------------------------------------------------------- */

/* An IDX set of n 28x28 images, the size the autoencoder takes. */
static void write_idx_set(const char *dir, const char *prefix, uint32_t n)
{
    th_write_idx_set(dir, prefix, n, 28, 7 + n);
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
    th_write_bytes(weights, old_weights, sizeof old_weights);
}

Test(examples, autoencoder_refuses_a_batch_larger_than_the_data_set_before_training)
{
    char data[256], weights[512];
    autoencoder_setup(40, data, weights);
    cr_assert(eq(int, AE("--data", data, "--out", "out", "--batch", "100000"), 1), "%s",
              th_err);
    th_expect_in(th_err, "autoencoder: batch 100000 is larger than the 24 training images");
    cr_assert(strstr(th_out, "epoch") == NULL, "it trained:\n%s", th_out);
    th_expect_same_bytes(weights, old_weights, sizeof old_weights);
}

Test(examples, autoencoder_checks_the_test_set_before_training)
{
    char data[256], weights[512];
    autoencoder_setup(0, data, weights);
    cr_assert(eq(int, AE("--data", data, "--out", "out", "--batch", "8", "--steps", "1"), 1));
    th_expect_in(th_err, "autoencoder: cannot load the test set from");
    th_expect_in(th_err, "t10k-images-idx3-ubyte");
    cr_assert(strstr(th_out, "epoch") == NULL, "it trained:\n%s", th_out);
    th_expect_same_bytes(weights, old_weights, sizeof old_weights);
}

/* The model takes 1x28x28 images: a test or training set of 14x14 ones is
 * refused before training, not found only in the evaluation's loss after
 * the weights were replaced, with a message naming --data and both sizes. */
Test(examples, autoencoder_refuses_images_of_another_size_before_training)
{
    char data[256], weights[512];
    autoencoder_setup(20, data, weights);
    th_write_idx_set(data, "t10k", 10, 14, 17);
    cr_assert(eq(int, AE("--data", data, "--out", "out", "--batch", "8", "--steps", "1"), 1),
              "%s", th_err);
    th_expect_in(th_err, "autoencoder: --data ");
    th_expect_in(th_err, "the test images are (1, 14, 14): the model takes (1, 28, 28)");
    cr_assert(strstr(th_out, "epoch") == NULL, "it trained:\n%s", th_out);
    th_expect_same_bytes(weights, old_weights, sizeof old_weights);

    write_idx_set(data, "t10k", 10);
    th_write_idx_set(data, "train", 24, 14, 31);
    cr_assert(eq(int, AE("--data", data, "--out", "out", "--batch", "8", "--steps", "1"), 1),
              "%s", th_err);
    th_expect_in(th_err, "the training images are (1, 14, 14): the model takes (1, 28, 28)");
    cr_assert(strstr(th_out, "epoch") == NULL, "it trained:\n%s", th_out);
    th_expect_same_bytes(weights, old_weights, sizeof old_weights);
}

/* --out must be a folder it can write in (made when missing): a regular
 * file, or a path through one, is refused before training and left as it
 * was, not found only at the save after training. */
Test(examples, autoencoder_refuses_an_out_that_is_not_a_folder_before_training)
{
    char data[256], weights[512], file[256];
    autoencoder_setup(20, data, weights);
    static const char keep[] = "not a folder";
    th_write_bytes(th_tmp_path(file, sizeof file, "c1.st"), keep, sizeof keep);
    cr_assert(eq(int, AE("--data", data, "--out", "c1.st", "--batch", "8", "--steps", "1"), 1),
              "%s", th_err);
    th_expect_in(th_err, "autoencoder: --out c1.st: must be a folder");
    cr_assert(strstr(th_out, "epoch") == NULL, "it trained:\n%s", th_out);
    th_expect_same_bytes(file, keep, sizeof keep);
    cr_assert(eq(int, AE("--data", data, "--out", "c1.st/sub", "--batch", "8", "--steps", "1"),
                 1), "%s", th_err);
    th_expect_in(th_err, "autoencoder: --out c1.st/sub: cannot create the folder: Not a directory");
    cr_assert(strstr(th_out, "epoch") == NULL, "it trained:\n%s", th_out);
    th_expect_same_bytes(file, keep, sizeof keep);
    th_expect_same_bytes(weights, old_weights, sizeof old_weights);
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
                         "--threads", "1"), 1), "%s", th_err);
    th_expect_plain_message(th_err, "autoencoder: writing out/autoencoder_pairs.png: ");
    cr_assert(eq(int, remove(weights), 0));
    cr_assert(eq(int, mkdir(weights, 0755), 0));
    cr_assert(eq(int, AE("--data", data, "--out", "out", "--batch", "8", "--steps", "1",
                         "--threads", "1"), 1), "%s", th_err);
    th_expect_plain_message(th_err,
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
              "%s", th_err);
    th_expect_in(th_out, "test mse on 20 images");
    size_t n = 0;
    char *w = th_read_file(weights, &n);
    cr_assert(w != NULL && n > 1000, "no new weights in %s", weights);
    free(w);
    cr_assert(th_exists(th_tmp_path(data, sizeof data, "out/autoencoder_pairs.png")));
}

/* ---- vae ---------------------------------------------------------------------- */

/* The test loss vae prints ("test loss on N images (z = mu): L (...)"). */
static double vae_test_loss(void)
{
    const char *line = strstr(th_out, "(z = mu): ");
    cr_assert(line != NULL, "no test loss in:\n%s", th_out);
    double loss = 0, rec = 0, kl = 0;
    cr_assert(eq(int, sscanf(line, "(z = mu): %lf (reconstruction %lf + kl %lf)", &loss, &rec,
                             &kl), 3), "%s", line);
    cr_assert(kl >= 0 && rec > 0, "%s", line);
    cr_assert(fabs(loss - (rec + kl)) < 0.02, "%s", line);
    return loss;
}

/* A short run writes the weights under torch's names, the reconstructions
 * and the 8x8 grid of samples; more steps give a lower test loss (the same
 * seed: the same start). */
Test(examples, vae_trains_and_writes_weights_and_pictures)
{
    char data[256], weights[512], path[256];
    autoencoder_setup(20, data, weights);
    cr_assert(eq(int, VAE("--data", data, "--out", "out", "--batch", "8", "--steps", "1",
                          "--latent", "5", "--threads", "1"), 0), "%s", th_err);
    th_expect_in(th_out, "vae: ");
    th_expect_in(th_out, "latent 5, 24 training images");
    const double first = vae_test_loss();
    tg_st_file *f = NULL;
    cr_assert(eq(int, tg_safetensors_load(&f, th_tmp_path(path, sizeof path,
                                                          "out/vae.safetensors")), TG_OK));
    const char *keys[] = {"encoder.0.weight", "encoder.2.bias", "fc_mu.weight", "fc_logvar.bias",
                          "decoder.0.weight", "decoder.3.weight", "decoder.5.bias"};
    for (int i = 0; i < 7; i++) cr_assert(tg_st_get(f, keys[i]) != NULL, "no %s", keys[i]);
    cr_assert(eq(i64, tg_tensor_dim(tg_st_get(f, "fc_mu.weight"), 0), 5));
    cr_assert(eq(i64, tg_tensor_dim(tg_st_get(f, "fc_mu.weight"), 1), 64 * 7 * 7));
    cr_assert(eq(int, tg_st_count(f), 14));
    tg_st_free(f);
    tg_image img = {0};
    cr_assert(eq(int, tg_png_read(&img, th_tmp_path(path, sizeof path, "out/vae_samples.png")),
                 TG_OK), "%s", tg_error_message());
    cr_assert(eq(int, img.width, 8 * 30 + 2));
    cr_assert(eq(int, img.height, 8 * 30 + 2));
    tg_image_free(&img);
    cr_assert(th_exists(th_tmp_path(path, sizeof path, "out/vae_pairs.png")));
    cr_assert(eq(int, VAE("--data", data, "--out", "out", "--batch", "8", "--steps", "40",
                          "--latent", "5", "--threads", "1"), 0), "%s", th_err);
    const double later = vae_test_loss();
    cr_assert(later < first, "test loss %g after 40 steps, %g after 1", later, first);
}

Test(examples, vae_refuses_bad_options_and_data_before_training)
{
    char data[256], weights[512];
    autoencoder_setup(20, data, weights);
    cr_assert(eq(int, VAE("--data", data, "--out", "out", "--latent", "0"), 2));
    th_expect_in(th_err, "vae: --latent '0'");
    cr_assert(eq(int, VAE("--data", data, "--out", "out", "--batch", "100"), 1));
    th_expect_in(th_err, "vae: batch 100 is larger than the 24 training images");
    th_write_idx_set(data, "t10k", 10, 14, 17);
    cr_assert(eq(int, VAE("--data", data, "--out", "out", "--batch", "8"), 1));
    th_expect_in(th_err, "the test images are (1, 14, 14): the model takes (1, 28, 28)");
    cr_assert(strstr(th_out, "epoch") == NULL, "it trained:\n%s", th_out);
    cr_assert(eq(int, th_exists(th_tmp_path(data, sizeof data, "out/vae.safetensors")), 0));
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
                  "%s '%s': %s", cases[i].opt, cases[i].val, th_err);
        th_expect_in(th_err, cases[i].msg);
        th_expect_same_bytes(weights, old_weights, sizeof old_weights);
    }
    cr_assert(eq(int, AE("--data", data, "--steps"), 2));
    th_expect_in(th_err, "option --steps needs a value");
    cr_assert(eq(int, AE("--help"), 0));
    th_expect_in(th_out, "usage: autoencoder");
    th_expect_same_bytes(weights, old_weights, sizeof old_weights);
}

/* A value that starts with "--" is an option forgotten its value, not a
 * path: "--out --seconds 3" must not write into a folder named "--seconds".
 * A single dash still reaches the number parsers and their range rules. */
Test(examples, option_values_that_look_like_options_are_refused)
{
    char data[256], weights[512], path[256];
    autoencoder_setup(20, data, weights);
    cr_assert(eq(int, AE("--data", data, "--batch", "8", "--steps", "1", "--out", "--seconds"), 2),
              "%s", th_err);
    th_expect_in(th_err, "autoencoder: option --out needs a value (got '--seconds'; "
                           "write ./--seconds for a path of that name)");
    cr_assert(th_exists(th_tmp_path(path, sizeof path, "--seconds")) == false,
              "it made a folder named --seconds");
    cr_assert(strstr(th_out, "epoch") == NULL, "it trained:\n%s", th_out);
    cr_assert(eq(int, AE("--data", data, "--seconds", "-1"), 2), "%s", th_err);
    th_expect_in(th_err, "autoencoder: --seconds '-1': expected a finite number > 0");
}

/* ---- tape_tour --------------------------------------------------------------- */

Test(examples, tape_tour_writes_its_dot_file)
{
    char dot[256];
    cr_assert(eq(int, TOUR("my.dot"), 0), "%s", th_err);
    size_t n = 0;
    char *text = th_read_file(th_tmp_path(dot, sizeof dot, "my.dot"), &n);
    cr_assert(text != NULL && n > 0);
    cr_assert(strstr(text, "digraph") != NULL, "not DOT:\n%s", text);
    /* tanh's node ends its label with tanh's VJP formula */
    const tg_op_schema *tanh_op = NULL;
    cr_assert(eq(int, tg_op_find(&tanh_op, "tanh"), TG_OK), "%s", tg_error_message());
    cr_assert(tanh_op->vjp != NULL && strpbrk(tanh_op->vjp, "\"\\") == NULL);
    char line[256];
    snprintf(line, sizeof line, "\\n%s\"", tanh_op->vjp);
    th_expect_in(text, line);
    free(text);
    th_expect_in(th_out, "finite differences");
}

/* The narration says what the library does: tanh saves its output (a
 * detached alias, as PyTorch) and its derivative 1 - y^2 comes from that
 * output, so the create_graph tape of df/du holds tanh's node and three new
 * ones (y*y, 1 - that, times the incoming 1), with no tanh recomputed. */
Test(examples, tape_tour_says_what_tanh_saves_and_records)
{
    cr_assert(eq(int, TOUR("my.dot"), 0), "%s", th_err);
    th_expect_in(th_out, "#7 mul  inputs: #6, #6");
    th_expect_in(th_out, "#9 mul  inputs: const, #8");
    cr_assert(strstr(th_out, "#10 ") == NULL, "more nodes than narrated:\n%s", th_out);
    th_expect_in(th_out, "It saves its output a");
    th_expect_in(th_out, "three new nodes");
    cr_assert(strstr(th_out, "recompute") == NULL, "it narrates a recomputation:\n%s",
              th_out);
}

Test(examples, tape_tour_help_and_usage_errors_write_nothing)
{
    char path[256];
    cr_assert(eq(int, TOUR("--help"), 0));
    th_expect_in(th_out, "usage: tape_tour");
    cr_assert(th_exists(th_tmp_path(path, sizeof path, "--help")) == false, "--help made a file");

    static const char keep[] = "a file that must stay";
    th_write_bytes(th_tmp_path(path, sizeof path, "keep.txt"), keep, sizeof keep);
    cr_assert(eq(int, TOUR("keep.txt", "a", "b"), 2));
    th_expect_in(th_err, "tape_tour: one DOT file only, got 'keep.txt' and 'a'");
    th_expect_same_bytes(path, keep, sizeof keep);
    cr_assert(eq(int, TOUR("--bogus"), 2));
    th_expect_in(th_err, "tape_tour: unknown option '--bogus'");
    cr_assert(th_exists(th_tmp_path(path, sizeof path, "--bogus")) == false);
    cr_assert(th_exists(th_tmp_path(path, sizeof path, "tape.dot")) == false,
              "a usage error wrote tape.dot");
}

Test(examples, tape_tour_reports_write_errors_with_the_reason)
{
    cr_assert(eq(int, TOUR("/dev/full"), 1), "%s", th_out);
    th_expect_in(th_err, "tape_tour: cannot write /dev/full: No space left on device");
    cr_assert(eq(int, TOUR("no/such/dir/x.dot"), 1));
    th_expect_in(th_err, "tape_tour: cannot write no/such/dir/x.dot: No such file or directory");
}

/* Beside the DOT file, the backward as a page (when this build has Graphviz). */
Test(examples, tape_tour_writes_the_backward_page_beside_its_dot)
{
    char path[256];
    cr_assert(eq(int, TOUR("my.dot"), 0), "%s", th_err);
    if (!tg_viz_available()) {
        th_expect_in(th_out, "no HTML page");
        cr_skip_test("this build has no Graphviz");
    }
    size_t n = 0;
    char *html = th_read_file(th_tmp_path(path, sizeof path, "my.html"), &n);
    cr_assert(html != NULL && n > 0);
    th_expect_in(html, "<svg");
    th_expect_in(html, "\"op\":\"conv_transpose\"");
    free(html);
    th_expect_in(th_out, "my.html: open it in a");
}

/* ---- convt_viz ------------------------------------------------------------------ */

#define CONVT(...) th_run("TG_CONVT_VIZ", (const char *const[]){__VA_ARGS__, NULL})

/* The reference path (zeros interleaved, padded, flipped kernel) and the
 * fast path print the same y; dL/dx = [-1, 0, 1] by hand:
 * sum_k c[2i+k] w[k] = (2i+1) + 0.5 (2i+2) - (2i+3) = i - 1. */
Test(examples, convt_viz_shows_both_paths_and_writes_its_page)
{
    char path[256];
    int rc = CONVT(th_tmp_path(path, sizeof path, "c.html"));
    if (!tg_viz_available()) {
        cr_assert(eq(int, rc, 1));
        cr_skip_test("this build has no Graphviz");
    }
    cr_assert(eq(int, rc, 0), "%s", th_err);
    th_expect_in(th_out, "  x interleaved and padded        [0, 0, 1, 0, 2, 0, 3, 0, 0]\n"
                         "  conv with w flipped             [1, 0.5, 1, 1, 1, 1.5, -3]\n"
                         "fast path (GEMM, then col2im)     [1, 0.5, 1, 1, 1, 1.5, -3]\n");
    th_expect_in(th_out, "The two paths agree.");
    th_expect_in(th_out, "dL/dx = [-1, 0, 1]");
    size_t n = 0;
    char *html = th_read_file(path, &n);
    cr_assert(html != NULL);
    th_expect_in(html, "x interleaved and padded        [0, 0, 1, 0, 2, 0, 3, 0, 0]");
    free(html);
    cr_assert(eq(int, CONVT("a", "b"), 2));
}

/* ---- worked_example ------------------------------------------------------------ */

/* It takes no options: --help and -h print the usage; any other argument is
 * a usage error, never ignored with exit 0. */
Test(examples, worked_example_takes_no_arguments)
{
    cr_assert(eq(int, th_run("TG_WORKED_EXAMPLE", (const char *const[]){NULL}), 0), "%s",
              th_err);
    th_expect_in(th_out, "d loss / d w:");
    cr_assert(eq(int, WORKED("--help"), 0), "%s", th_err);
    th_expect_in(th_out, "usage: worked_example");
    cr_assert(strstr(th_out, "tensor f32") == NULL, "--help ran the example:\n%s", th_out);
    cr_assert(eq(int, WORKED("-h"), 0), "%s", th_err);
    th_expect_in(th_out, "usage: worked_example");
    static const char *const bad[] = {"--bogus", "xyz", "-v", ""};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        cr_assert(eq(int, WORKED(bad[i]), 2), "'%s': %s", bad[i], th_out);
        char want[128];
        snprintf(want, sizeof want, "worked_example: unexpected argument '%s' (it takes no "
                 "options)", bad[i]);
        th_expect_in(th_err, want);
        th_expect_in(th_err, "usage: worked_example");
        cr_assert(strstr(th_out, "tensor f32") == NULL, "'%s' ran the example", bad[i]);
    }
    cr_assert(eq(int, WORKED("--help", "xyz"), 2), "%s", th_out);
    th_expect_in(th_err, "unexpected argument 'xyz'");
}
