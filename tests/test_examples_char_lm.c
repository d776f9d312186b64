/* tests/test_examples_char_lm.c - examples/char_lm as a user runs it: both
 * models train (the loss falls), save their weights under PyTorch's names
 * and write a sample; bad options and texts are refused with exit status 2
 * or 1 and a message, before anything is written.  The binary is TG_CHAR_LM
 * (set by tests/meson.build); each run is a few seconds. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/nn.h"
#include "tapegrad/safetensors.h"

#define LM(...) th_run("TG_CHAR_LM", (const char *const[]){__VA_ARGS__, NULL})

static void setup(void) { th_tmp_dir_make("tg_char_lm_"); }
static void teardown(void) { th_tmp_dir_remove(); }

TestSuite(char_lm, .init = setup, .fini = teardown);

/* The first and last loss of the "char_lm: loss A -> B in N steps" line. */
static void losses(double *first, double *last)
{
    const char *l = strstr(th_out, "char_lm: loss ");
    cr_assert(l != NULL, "no loss line in:\n%s", th_out);
    cr_assert(eq(int, sscanf(l, "char_lm: loss %lf -> %lf", first, last), 2), "%s", l);
}

/* The tensor names of the saved weights, each checked to be in want. */
static void expect_keys(const char *path, const char *const *want, int n)
{
    tg_st_file *f = NULL;
    cr_assert(eq(int, tg_safetensors_load(&f, path), TG_OK), "%s", tg_error_message());
    cr_assert(eq(int, tg_st_count(f), n), "tensors in %s", path);
    for (int i = 0; i < n; i++)
        cr_assert(tg_st_get(f, want[i]) != NULL, "%s lacks %s", path, want[i]);
    tg_st_free(f);
}

Test(char_lm, lstm_learns_saves_torch_names_and_samples)
{
    cr_assert(eq(int, LM("--model", "lstm", "--steps", "150", "--sample", "80", "--out", "o"),
                 0), "%s", th_err);
    double first, last;
    losses(&first, &last);
    cr_assert(last < 0.75 * first, "loss %g -> %g", first, last);
    th_expect_in(th_out, "sample (temperature 0.8):");
    char path[512];
    static const char *const keys[] = {"embed.weight",        "body.weight_ih_l0",
                                       "body.weight_hh_l0",   "body.bias_ih_l0",
                                       "body.bias_hh_l0",     "head.weight",
                                       "head.bias"};
    expect_keys(th_tmp_path(path, sizeof path, "o/char_lm.safetensors"), keys, 7);
    /* the sample: 80 bytes after the first, on the line after the header */
    const char *s = strstr(th_out, "sample (temperature 0.8):\n");
    const char *nl = strchr(s + strlen("sample (temperature 0.8):\n"), '\n');
    cr_assert(nl != NULL);
    cr_assert(eq(i64, (int64_t)(nl - s) - (int64_t)strlen("sample (temperature 0.8):\n"),
                 81));
}

Test(char_lm, transformer_learns_under_a_causal_mask)
{
    cr_assert(eq(int, LM("--model", "transformer", "--steps", "150", "--sample", "40",
                         "--out", "o"), 0), "%s", th_err);
    double first, last;
    losses(&first, &last);
    cr_assert(last < 0.75 * first, "loss %g -> %g", first, last);
    char path[512];
    tg_st_file *f = NULL;
    th_tmp_path(path, sizeof path, "o/char_lm.safetensors");
    cr_assert(eq(int, tg_safetensors_load(&f, path), TG_OK), "%s", tg_error_message());
    cr_assert(tg_st_get(f, "pos.weight") != NULL);
    cr_assert(tg_st_get(f, "body.self_attn.in_proj_weight") != NULL);
    cr_assert(tg_st_get(f, "body.linear1.weight") != NULL);
    tg_st_free(f);
}

Test(char_lm, a_text_file_is_read)
{
    char path[512];
    const char text[] = "abcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabc";
    th_write_bytes(th_tmp_path(path, sizeof path, "t.txt"), text, sizeof text - 1);
    cr_assert(eq(int, LM("--text", path, "--seq", "8", "--steps", "60", "--sample", "12",
                         "--out", "o"), 0), "%s", th_err);
    th_expect_in(th_out, "60 bytes of text, 3 distinct, windows of 8");
}

Test(char_lm, bad_options_and_texts_are_refused_before_anything_is_written)
{
    cr_assert(eq(int, LM("--model", "gru", "--out", "o"), 2));
    th_expect_in(th_err, "char_lm: --model 'gru': must be lstm or transformer");
    cr_assert(eq(int, LM("--seq", "0", "--out", "o"), 2));
    th_expect_in(th_err, "--seq");
    cr_assert(eq(int, LM("--temperature", "-1", "--out", "o"), 2));
    cr_assert(eq(int, LM("--text", "missing.txt", "--out", "o"), 1));
    th_expect_in(th_err, "char_lm: --text missing.txt: cannot open it");
    char path[512];
    th_write_bytes(th_tmp_path(path, sizeof path, "short.txt"), "abc", 3);
    cr_assert(eq(int, LM("--text", path, "--out", "o"), 1));
    th_expect_in(th_err, "the text has 3 bytes: it must be longer than --seq 32");
    const bool made = th_exists(th_tmp_path(path, sizeof path, "o"));
    cr_assert(made == false, "a refused run made o/");
}
