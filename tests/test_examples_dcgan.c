/* tests/test_examples_dcgan.c - examples/dcgan_load and examples/dcgan_quantize
 * as a user runs them: exit codes (0 ok, 1 failed, 2 usage;
 * examples/example_args.h), what they print, and that a refused run leaves
 * existing output files as they were (examples/dcgan's training options:
 * test_examples_dcgan_train.c).
 *
 * The binaries are TG_DCGAN_LOAD and TG_DCGAN_QUANTIZE (set by
 * tests/meson.build); each run's stdout and stderr go to files in a fresh
 * temporary directory. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define LOAD(...) th_run("TG_DCGAN_LOAD", (const char *const[]){__VA_ARGS__, NULL})
#define QUANT(...) th_run("TG_DCGAN_QUANTIZE", (const char *const[]){__VA_ARGS__, NULL})

static void setup(void) { th_tmp_dir_make("tg_examples_dcgan_"); }
static void teardown(void) { th_tmp_dir_remove(); }

TestSuite(examples_dcgan, .init = setup, .fini = teardown);

/* ---- dcgan_load -------------------------------------------------------------- */

/* As in test_examples.c: a value that looks like an option is refused (and
 * makes no file of that name); a single dash still reaches the number
 * parsers and their range rules. */
Test(examples_dcgan, option_values_that_look_like_options_are_refused)
{
    char path[256];
    cr_assert(eq(int, LOAD("--warmup", "1", "--export", "--n"), 2), "%s", th_err);
    th_expect_in(th_err, "dcgan_load: option --export needs a value (got '--n'");
    cr_assert(th_exists(th_tmp_path(path, sizeof path, "--n")) == false,
              "it made a folder named --n");
    cr_assert(eq(int, LOAD("--export", "ex", "--warmup", "-1"), 2), "%s", th_err);
    th_expect_in(th_err, "dcgan_load: --warmup '-1': expected an integer in [0, 1000]");
    cr_assert(eq(int, QUANT("--calib", "1", "--out", "--calib"), 2), "%s", th_err);
    th_expect_in(th_err, "dcgan_quantize: option --out needs a value (got '--calib'");
    cr_assert(th_exists(th_tmp_path(path, sizeof path, "--calib")) == false);
}

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

Test(examples_dcgan, dcgan_load_help_and_strict_option_values)
{
    char dir[256];
    th_tmp_path(dir, sizeof dir, "ex");
    cr_assert(eq(int, LOAD("--help"), 0));
    th_expect_in(th_out, "usage: dcgan_load");
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
                  "%s '%s': %s", cases[i].opt, cases[i].val, th_err);
        th_expect_in(th_err, cases[i].msg);
        cr_assert(th_exists(dir) == false, "%s '%s' made %s", cases[i].opt, cases[i].val, dir);
    }
    cr_assert(eq(int, LOAD("--seed", "3"), 2));
    th_expect_in(th_err, "dcgan_load: --seed goes with --export DIR");
    cr_assert(eq(int, LOAD("--weights", "w.safetensors", "--latents", "z.safetensors"), 2));
    th_expect_in(th_err, "dcgan_load: missing option --out");
}

/* (C*49, nz) with C even >= 2 and nz >= 1, else a message that names the
 * file and the shape (dcgan_arch_from_generator_weight); the output file is
 * left alone and, in the sanitizer build, nothing leaks. */
Test(examples_dcgan, dcgan_load_rejects_wrongly_shaped_weights_with_a_message)
{
    char w[256], z[256], out[256];
    th_tmp_path(w, sizeof w, "w.safetensors");
    th_tmp_path(z, sizeof z, "z.safetensors");
    th_tmp_path(out, sizeof out, "o.safetensors");
    write_st(z, 1, (st_entry[]){{"z", 2, {2, 4}}});
    static const char old[] = "an earlier result";
    th_write_bytes(out, old, sizeof old);
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
                  th_err);
        char want[256];
        snprintf(want, sizeof want, "net.0.weight is %s: expected (C*49, nz) with C even and "
                 ">= 2, nz >= 1", cases[i].shape);
        th_expect_in(th_err, want);
        th_expect_same_bytes(out, old, sizeof old);
    }
    write_st(w, 1, (st_entry[]){{"other", 2, {98, 4}}});
    cr_assert(eq(int, LOAD("--weights", w, "--latents", z, "--out", out), 1));
    th_expect_in(th_err, "no tensor net.0.weight");
    th_expect_same_bytes(out, old, sizeof old);
}

/* th_tmp_dir/ex/{generator,latents}.safetensors from dcgan_load --export;
 * w (512 bytes) receives the generator's path and z, unless NULL, the
 * latents'. */
static void export_generator(char *w, char *z)
{
    char dir[256];
    th_tmp_path(dir, sizeof dir, "ex");
    cr_assert(eq(int, LOAD("--export", dir, "--n", "2", "--warmup", "1"), 0), "%s", th_err);
    snprintf(w, 512, "%s/generator.safetensors", dir);
    if (z) snprintf(z, 512, "%s/latents.safetensors", dir);
}

Test(examples_dcgan, dcgan_load_runs_an_exported_generator_and_checks_the_latents)
{
    char w[512], z[512], out[256], bad_z[256];
    export_generator(w, z);
    th_tmp_path(out, sizeof out, "o.safetensors");
    cr_assert(eq(int, LOAD("--weights", w, "--latents", z, "--out", out), 0), "%s", th_err);
    th_expect_in(th_out, "loaded strictly");

    static const char old[] = "an earlier result";
    th_write_bytes(out, old, sizeof old);
    cr_assert(eq(int, LOAD("--weights", w, "--latents", z, "--out", out, "--key", "q"), 1));
    th_expect_in(th_err, "has no tensor 'q'");
    th_tmp_path(bad_z, sizeof bad_z, "z5.safetensors");
    write_st(bad_z, 1, (st_entry[]){{"z", 2, {2, 5}}});
    cr_assert(eq(int, LOAD("--weights", w, "--latents", bad_z, "--out", out), 1));
    th_expect_in(th_err, "'z' is (2, 5): expected (N, 64)");
    th_expect_same_bytes(out, old, sizeof old);

    size_t n = 0;
    char *latents = th_read_file(z, &n);
    cr_assert(eq(int, LOAD("--weights", w, "--latents", z, "--out", z), 2));
    th_expect_in(th_err, "would overwrite the input");
    th_expect_same_bytes(z, latents, n);
    free(latents);
}

/* --png naming the file of --out (same name, another spelling of it, or the
 * same file through a link) is refused before anything is read, so the PNG
 * never overwrites the safetensors file just written. */
Test(examples_dcgan, dcgan_load_refuses_a_png_that_is_the_out_file)
{
    char w[512], z[512], out[256], link[256];
    export_generator(w, z);
    th_tmp_path(out, sizeof out, "same");
    static const char *const pngs[] = {"same", "./same", "ex/../same"};
    for (size_t i = 0; i < sizeof pngs / sizeof *pngs; i++) {
        cr_assert(eq(int, LOAD("--weights", w, "--latents", z, "--out", "same", "--png",
                               pngs[i]), 2),
                  "--png %s: %s", pngs[i], th_err);
        th_expect_in(th_err, "dcgan_load: --png");
        th_expect_in(th_err, "is the file of --out same: they must differ");
        cr_assert(th_exists(out) == false, "--png %s: a refused run wrote %s", pngs[i], out);
    }
    static const char old[] = "an earlier result";
    th_write_bytes(out, old, sizeof old);
    cr_assert(eq(int, symlink("same", th_tmp_path(link, sizeof link, "link")), 0));
    cr_assert(eq(int, LOAD("--weights", w, "--latents", z, "--out", "same", "--png", "link"),
                 2), "%s", th_err);
    th_expect_in(th_err, "dcgan_load: --png link is the file of --out same");
    th_expect_same_bytes(out, old, sizeof old);
    cr_assert(eq(int, LOAD("--weights", w, "--latents", z, "--out", "same", "--png", "o.png"),
                 0), "%s", th_err);
    cr_assert(th_exists(th_tmp_path(link, sizeof link, "o.png")));
}

/* --export into a folder that holds generator.safetensors or
 * latents.safetensors (a trained dcgan's --out) is refused unless
 * --overwrite, so a trained generator is never replaced with a random one. */
Test(examples_dcgan, dcgan_load_export_keeps_existing_files_unless_overwrite)
{
    char dir[256], w[512], z[512];
    th_tmp_path(dir, sizeof dir, "ex");
    cr_assert(eq(int, mkdir(dir, 0755), 0));
    snprintf(w, sizeof w, "%s/generator.safetensors", dir);
    snprintf(z, sizeof z, "%s/latents.safetensors", dir);
    static const char trained[] = "a trained generator";
    th_write_bytes(w, trained, sizeof trained);
    cr_assert(eq(int, LOAD("--export", "ex", "--n", "2", "--warmup", "1"), 2), "%s", th_err);
    th_expect_in(th_err, "dcgan_load: --export ex: ex/generator.safetensors exists: "
                           "give --overwrite to replace it");
    th_expect_same_bytes(w, trained, sizeof trained);
    cr_assert(th_exists(z) == false, "a refused run wrote %s", z);

    cr_assert(eq(int, remove(w), 0));
    th_write_bytes(z, trained, sizeof trained);
    cr_assert(eq(int, LOAD("--export", "ex", "--n", "2", "--warmup", "1"), 2), "%s", th_err);
    th_expect_in(th_err, "ex/latents.safetensors exists: give --overwrite");
    th_expect_same_bytes(z, trained, sizeof trained);
    cr_assert(th_exists(w) == false, "a refused run wrote %s", w);

    cr_assert(eq(int, LOAD("--overwrite"), 2));
    th_expect_in(th_err, "dcgan_load: --overwrite goes with --export DIR");
    cr_assert(eq(int, LOAD("--export", "ex", "--n", "2", "--warmup", "1", "--overwrite"), 0),
              "%s", th_err);
    size_t n = 0;
    char *got = th_read_file(z, &n);
    cr_assert(got != NULL && n > sizeof trained, "--overwrite did not replace %s", z);
    free(got);
    cr_assert(th_exists(w));
}

/* Failures say what the program was doing, not which C call failed. */
Test(examples_dcgan, dcgan_load_says_what_it_was_doing_when_it_fails)
{
    char w[512], z[512];
    export_generator(w, z);
    cr_assert(eq(int, LOAD("--weights", "nope.st", "--latents", z, "--out", "o.st"), 1));
    th_expect_plain_message(th_err, "dcgan_load: reading --weights nope.st: ");
    cr_assert(eq(int, LOAD("--weights", w, "--latents", "nope.st", "--out", "o.st"), 1));
    th_expect_plain_message(th_err, "dcgan_load: reading --latents nope.st: ");
    cr_assert(eq(int, LOAD("--weights", w, "--latents", z, "--out", "ex"), 1));
    th_expect_plain_message(th_err, "dcgan_load: writing --out ex: ");
    write_st(w, 1, (st_entry[]){{"net.0.weight", 2, {98, 64}}});
    cr_assert(eq(int, LOAD("--weights", w, "--latents", z, "--out", "o.st"), 1));
    th_expect_plain_message(th_err, "dcgan_load: loading the generator from ");
}

/* ---- dcgan_quantize ---------------------------------------------------------- */

#define QUANT_FAST "--calib", "1", "--batch", "4", "--repeat", "1"

Test(examples_dcgan, dcgan_quantize_help_and_strict_option_values)
{
    cr_assert(eq(int, QUANT("--help"), 0));
    th_expect_in(th_out, "usage: dcgan_quantize");
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
                  cases[i].val, th_err);
        th_expect_in(th_err, cases[i].msg);
    }
}

Test(examples_dcgan, dcgan_quantize_rejects_wrongly_shaped_weights_with_a_message)
{
    char w[256];
    th_tmp_path(w, sizeof w, "w.safetensors");
    write_st(w, 1, (st_entry[]){{"net.0.weight", 2, {147, 4}}});
    cr_assert(eq(int, QUANT("--weights", w, QUANT_FAST), 1), "%s", th_err);
    th_expect_in(th_err, "net.0.weight is (147, 4): expected (C*49, nz) with C even and >= 2");
}

/* A --latents file named on the command line must be there and hold z of
 * (N, nz) finite values: no fallback to fresh latents, nothing written. */
Test(examples_dcgan, dcgan_quantize_needs_a_readable_latents_file_when_one_is_named)
{
    char w[512], z[256], out[256];
    export_generator(w, NULL);
    th_tmp_path(out, sizeof out, "q");
    th_tmp_path(z, sizeof z, "missing.safetensors");
    cr_assert(eq(int, QUANT("--weights", w, "--latents", z, "--out", out, QUANT_FAST), 1));
    th_expect_in(th_err, "cannot open");
    th_expect_in(th_err, "missing.safetensors");
    th_write_bytes(th_tmp_path(z, sizeof z, "corrupt.safetensors"), "junk", 4);
    cr_assert(eq(int, QUANT("--weights", w, "--latents", z, "--out", out, QUANT_FAST), 1));
    th_expect_in(th_err, "safetensors");
    th_tmp_path(z, sizeof z, "z5.safetensors");
    write_st(z, 1, (st_entry[]){{"z", 2, {2, 5}}});
    cr_assert(eq(int, QUANT("--weights", w, "--latents", z, "--out", out, QUANT_FAST), 1));
    th_expect_in(th_err, "'z' is (2, 5): expected (N, 64)");
    write_st(z, 1, (st_entry[]){{"y", 2, {2, 64}}});
    cr_assert(eq(int, QUANT("--weights", w, "--latents", z, "--out", out, QUANT_FAST), 1));
    th_expect_in(th_err, "has no tensor 'z'");

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
    th_expect_in(th_err, "'z' has 1 non-finite values of 128");
    cr_assert(strstr(th_out, "PSNR") == NULL, "%s", th_out);
    cr_assert(th_exists(out) == false, "a refused run made %s", out);

    /* The default latents file (out/latents.safetensors in the working
     * folder) may be missing: then fresh latents are used. */
    cr_assert(eq(int, QUANT("--weights", w, QUANT_FAST), 0), "%s", th_err);
    th_expect_in(th_out, "32 fresh test latents");
    th_expect_in(th_out, "dB over 32 images");
}

/* --out must be a folder it can write in: a regular file is refused before
 * calibration, not found only at the first PNG, and left as it was. */
Test(examples_dcgan, dcgan_quantize_refuses_an_out_that_is_not_a_folder_before_calibrating)
{
    char w[512], file[256];
    export_generator(w, NULL);
    static const char keep[] = "not a folder";
    th_write_bytes(th_tmp_path(file, sizeof file, "c1.st"), keep, sizeof keep);
    cr_assert(eq(int, QUANT("--weights", w, "--latents", "ex/latents.safetensors", "--out",
                            "c1.st", QUANT_FAST), 1),
              "%s", th_err);
    th_expect_in(th_err, "dcgan_quantize: --out c1.st: must be a folder");
    cr_assert(strstr(th_out, "calibrated") == NULL, "it calibrated:\n%s", th_out);
    th_expect_same_bytes(file, keep, sizeof keep);
}

/* Failures say what the program was doing, not which C call failed. */
Test(examples_dcgan, dcgan_quantize_says_what_it_was_doing_when_it_fails)
{
    char w[512], png[256];
    export_generator(w, NULL);
    cr_assert(eq(int, QUANT("--weights", "nope.st", QUANT_FAST), 1));
    th_expect_plain_message(th_err, "dcgan_quantize: reading --weights nope.st: ");
    cr_assert(eq(int, QUANT("--weights", w, "--latents", "nope.st", QUANT_FAST), 1));
    th_expect_plain_message(th_err, "dcgan_quantize: reading --latents nope.st: ");
    cr_assert(eq(int, mkdir(th_tmp_path(png, sizeof png, "q"), 0755), 0));
    cr_assert(eq(int, mkdir(th_tmp_path(png, sizeof png, "q/samples_int8.png"), 0755), 0));
    cr_assert(eq(int, QUANT("--weights", w, "--latents", "ex/latents.safetensors", "--out", "q",
                            QUANT_FAST), 1));
    th_expect_plain_message(th_err, "dcgan_quantize: writing q/samples_int8.png: ");
}

/* A NaN in the generator makes the float output NaN: no PSNR is claimed
 * (fmax(NaN, 1e-300) would give 3006 dB). */
/* A generator with a NaN weight is refused at calibration (the observers
 * take no NaN), so no PSNR is printed. */
Test(examples_dcgan, dcgan_quantize_refuses_a_generator_with_nan_weights)
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
              "%s", th_out);
    th_expect_in(th_err, "calibration data must be free of NaN");
    cr_assert(strstr(th_out, " dB") == NULL, "%s", th_out);
}

/* --fid N: the FID of the float and the int8 generator from the same
 * latents (an untrained generator here: only that the numbers are there and
 * close); --qat STEPS: the fine-tuned int8 generator's as well. */
Test(examples_dcgan, dcgan_quantize_reports_fid_and_qat)
{
    char w[512];
    export_generator(w, NULL);
    cr_assert(eq(int, QUANT("--weights", w, "--fid", "300", "--qat", "3", "--fid-weights",
                            TG_SOURCE_ROOT "/data/fid_classifier.safetensors", QUANT_FAST), 0),
              "%s", th_err);
    th_expect_in(th_out, "FID of 300 images vs the test set: float ");
    th_expect_in(th_out, "QAT: 3 steps of 4 latents");
    th_expect_in(th_out, "PSNR int8 after QAT vs float = ");
    th_expect_in(th_out, "FID after QAT: int8 ");
    double f, q;
    const char *line = strstr(th_out, "vs the test set: float ");
    cr_assert(eq(int, sscanf(line, "vs the test set: float %lf, int8 %lf", &f, &q), 2), "%s", line);
    cr_assert(f > 0 && q > 0 && q < 2 * f && f < 2 * q, "float %g, int8 %g", f, q);

    cr_assert(eq(int, QUANT("--weights", w, "--fid", "1"), 2));
    th_expect_in(th_err, "--fid '1': a covariance needs 2 images or more");
    cr_assert(eq(int, QUANT("--weights", w, "--qat", "5", "--fold", "0"), 2));
    th_expect_in(th_err, "--qat trains the folded generator: it needs --fold 1");
    cr_assert(eq(int, QUANT("--weights", w, "--fid", "10", "--fid-weights", w, QUANT_FAST), 1));
    th_expect_in(th_err, "dcgan_quantize: loading the FID classifier");
}
