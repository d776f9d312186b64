/* tests/test_examples_char_lm.c - examples/char_lm as a user runs it: both
 * models train (the loss falls), save their weights under PyTorch's names
 * and write a sample; --onnx writes the LSTM model, the file tg_onnx_export
 * writes of Embedding, LSTM and Linear holding the saved weights; bad
 * options and texts are refused with exit status 2
 * or 1 and a message, before anything is written.  The binary is TG_CHAR_LM
 * (set by tests/meson.build); each run is a few seconds. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/nn.h"
#include "tapegrad/onnx.h"
#include "tapegrad/safetensors.h"
#include "tapegrad/tensor.h"

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

/* The sample line of th_out after the given header, copied into buf. */
static void sample_line(const char *header, char *buf, size_t n)
{
    const char *s = strstr(th_out, header);
    cr_assert(s != NULL, "no '%s' in %s", header, th_out);
    s += strlen(header);
    const size_t len = strcspn(s, "\n");
    cr_assert(len < n);
    memcpy(buf, s, len);
    buf[len] = 0;
}

/* --top-k 1 draws the likeliest byte every time: the same text at any
 * temperature (the model is the same: the seed is), where drawing from
 * all bytes gives another text at another temperature. */
Test(char_lm, top_k_one_is_greedy)
{
    char a[128], b[128], c[128], d[128];
    cr_assert(eq(int, LM("--steps", "40", "--sample", "60", "--out", "o", "--top-k", "1"), 0),
              "%s", th_err);
    sample_line("sample (temperature 0.8, top-k 1):\n", a, sizeof a);
    cr_assert(eq(int, LM("--steps", "40", "--sample", "60", "--out", "o", "--top-k", "1",
                         "--temperature", "5"), 0), "%s", th_err);
    sample_line("sample (temperature 5, top-k 1):\n", b, sizeof b);
    cr_assert(eq(str, a, b));
    cr_assert(eq(int, LM("--steps", "40", "--sample", "60", "--out", "o"), 0), "%s", th_err);
    sample_line("sample (temperature 0.8):\n", c, sizeof c);
    cr_assert(eq(int, LM("--steps", "40", "--sample", "60", "--out", "o", "--temperature",
                         "5"), 0), "%s", th_err);
    sample_line("sample (temperature 5):\n", d, sizeof d);
    cr_assert(strcmp(c, d) != 0, "%s", c);
    cr_assert(eq(int, LM("--top-k", "0"), 2));
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

/* --onnx: the file is tg_onnx_export's of Sequential(embed, body, head)
 * holding the weights the run saved, byte for byte (the graph depends on
 * the example input's shape only); the transformer is refused before the
 * run. */
Test(char_lm, onnx_writes_the_lstm_model)
{
    if (!tg_onnx_available()) cr_skip_test("the library was built without ONNX support");
    cr_assert(eq(int, LM("--steps", "10", "--seq", "16", "--sample", "4", "--out", "o",
                         "--onnx", "lm.onnx"), 0), "%s", th_err);
    th_expect_in(th_out, "char_lm: wrote the model as ONNX to lm.onnx");
    char path[512], mine[512];
    tg_st_file *f = NULL;
    cr_assert(eq(int, tg_safetensors_load(&f, th_tmp_path(path, sizeof path,
                                                          "o/char_lm.safetensors")), TG_OK),
              "%s", tg_error_message());
    const int64_t v = tg_tensor_dim(tg_st_get(f, "embed.weight"), 0);
    tg_rng rng;
    tg_rng_init(&rng, 1);
    tg_module *seq = NULL, *emb = NULL, *lstm = NULL, *lin = NULL;
    tg_rnn_opts ro = TG_RNN_OPTS_INIT;
    ro.batch_first = true;
    cr_assert(tg_nn_sequential_new(&seq) == TG_OK);
    cr_assert(tg_nn_embedding_new(&emb, v, 32, &rng) == TG_OK);
    cr_assert(tg_nn_lstm_new(&lstm, 32, 128, &ro, &rng) == TG_OK);
    cr_assert(tg_nn_linear_new(&lin, 128, v, true, &rng) == TG_OK);
    cr_assert(tg_module_add_child(seq, "embed", emb) == TG_OK);
    cr_assert(tg_module_add_child(seq, "body", lstm) == TG_OK);
    cr_assert(tg_module_add_child(seq, "head", lin) == TG_OK);
    cr_assert(eq(int, tg_module_load_state_dict(seq, f, NULL, true), TG_OK), "%s",
              tg_error_message());
    tg_st_free(f);
    tg_tensor *idx = NULL;
    cr_assert(tg_tensor_zeros(&idx, TG_I64, 2, (const int64_t[]){1, 16}) == TG_OK);
    tg_onnx_options o = TG_ONNX_OPTIONS_INIT;
    o.dynamic_batch = true;
    o.input_name = "bytes";
    o.output_name = "logits";
    o.graph_name = "char_lm";
    cr_assert(eq(int, tg_onnx_export(seq, idx, th_tmp_path(mine, sizeof mine, "mine.onnx"),
                                     &o), TG_OK), "%s", tg_error_message());
    size_t n1 = 0, n2 = 0;
    char *a = th_read_file(th_tmp_path(path, sizeof path, "lm.onnx"), &n1);
    char *b = th_read_file(mine, &n2);
    cr_assert(n1 == n2 && memcmp(a, b, n1) == 0, "lm.onnx (%zu bytes) is not mine.onnx (%zu)",
              n1, n2);
    free(a);
    free(b);
    tg_tensor_release(idx);
    tg_module_release(seq);
    cr_assert(eq(int, LM("--model", "transformer", "--onnx", "t.onnx", "--out", "o2"), 2));
    th_expect_in(th_err, "char_lm: --onnx: only --model lstm exports");
    const bool made = th_exists(th_tmp_path(path, sizeof path, "o2"));
    cr_assert(made == false, "a refused run made o2/");
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
