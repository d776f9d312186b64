/* tests/test_cli.c - the `tapegrad` command as a user runs it: exit codes
 * (0 ok, 1 failed, 2 usage; tools/tools.h), what it prints, and that a
 * failing run leaves existing output files as they were.  The dcgan
 * example's runs are in test_cli_dcgan.c and test_cli_ddp.c.
 *
 * The binary is TG_TOOL (set by tests/meson.build); each run's stdout and
 * stderr go to files in a fresh temporary directory. */
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

/* TG_MAX_ISA bounds every kernel choice of the process: portable runs plain
 * C everywhere, avx2 what an AVX2-only CPU runs; a value naming no level is
 * said on stderr and bounds nothing. */
Test(cli, max_isa_bounds_every_kernel)
{
    unsetenv("TG_INT8_KERNEL");
    unsetenv("TG_BF16_KERNEL");
    unsetenv("TG_AMX_EMULATE");
    setenv("TG_MAX_ISA", "portable", 1);
    cr_assert(eq(int, RUN("--version"), 0));
    th_expect_in(th_out, "; int8 kernel: portable; bf16 kernel: portable; f16 kernel: f32; "
                         "vector ISA: portable, bounded by TG_MAX_ISA=portable)");
    if (tg_int8_kernel_available(TG_INT8_KERNEL_AVX2)) {
        setenv("TG_MAX_ISA", "avx2", 1);
        setenv("TG_AMX_EMULATE", "1", 1);   /* tiles are above avx2 too */
        cr_assert(eq(int, RUN("--version"), 0));
        th_expect_in(th_out, "; int8 kernel: avx2; bf16 kernel: portable; f16 kernel: f32 "
                             "(F16C); vector ISA: avx2, bounded by TG_MAX_ISA=avx2)");
        unsetenv("TG_AMX_EMULATE");
    }
    /* a forced kernel above the bound is not taken */
    setenv("TG_MAX_ISA", "portable", 1);
    setenv("TG_INT8_KERNEL", "avx2", 1);
    cr_assert(eq(int, RUN("--version"), 0));
    th_expect_in(th_out, "; int8 kernel: portable;");
    unsetenv("TG_INT8_KERNEL");
    unsetenv("TG_MAX_ISA");
    cr_assert(eq(int, RUN("--version"), 0));
    char *native = strdup(th_out);
    setenv("TG_MAX_ISA", "avx1024", 1);
    cr_assert(eq(int, RUN("--version"), 0));
    th_expect_in(th_err, "tapegrad: TG_MAX_ISA=avx1024 is not one of portable, avx2, avx512, "
                         "amx, native; no bound is put on the kernels");
    cr_assert(eq(str, th_out, native));
    free(native);
    unsetenv("TG_MAX_ISA");
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
    /* the avx512 kernel says how it broadcasts (TG_BF16_BROADCAST chooses) */
    if (tg_bf16_kernel_available(TG_BF16_KERNEL_AVX512)) {
        setenv("TG_BF16_KERNEL", "avx512", 1);
        setenv("TG_BF16_BROADCAST", "load", 1);
        cr_assert(eq(int, RUN("--version"), 0));
        th_expect_in(th_out, "; bf16 kernel: avx512 (load broadcast);");
        setenv("TG_BF16_BROADCAST", "register", 1);
        cr_assert(eq(int, RUN("--version"), 0));
        th_expect_in(th_out, "; bf16 kernel: avx512 (register broadcast);");
        unsetenv("TG_BF16_BROADCAST");
        unsetenv("TG_BF16_KERNEL");
    }
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

/* An --out ending in .dot gets the loss's graph as DOT, each op's VJP
 * formula on its node, with or without Graphviz in the build; a failed run
 * leaves no file. */
Test(cli, viz_writes_the_graph_of_a_case_as_dot)
{
    char in[256], graph[256];
    th_tmp_path(in, sizeof in, "case.safetensors");
    th_tmp_path(graph, sizeof graph, "graph.dot");
    write_case(in, (const char *const[]){"op", "conv_transpose2d", "stride", "2", NULL});
    cr_assert(eq(int, RUN("viz", "--in", in, "--out", graph), 0), "%s", th_err);
    th_expect_in(th_out, "wrote ");
    size_t n = 0;
    char *dot = th_read_file(graph, &n);
    cr_assert(dot != NULL);
    cr_assert(strncmp(dot, "digraph", 7) == 0, "%s", dot);
    th_expect_in(dot, " conv_transpose\\ny: f32 ");
    th_expect_in(dot, "\\ndx = conv(g, w), dw = conv_weight_grad(g, x)");
    th_expect_in(dot, "label=\"weight\\n");
    th_expect_in(dot, " sum\\nloss: f32 ()");
    cr_assert(strstr(dot, "<html") == NULL, "%s", dot);
    free(dot);
    th_tmp_path(in, sizeof in, "missing.safetensors");
    th_tmp_path(graph, sizeof graph, "other.gv");
    cr_assert(eq(int, RUN("viz", "--in", in, "--out", graph), 1));
    cr_assert(th_exists(graph) == false);
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

/* The losses, the distances, weight norm, attention, a Transformer decoder
 * layer, the recurrent modules, unfold and fold have sweep cases; an op
 * without any checks nothing, which is not a pass. */
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
    th_expect_in(th_out, "nll_loss               cross_entropy x (3, 4)");
    th_expect_in(th_out, "nll_loss               x (3, 4), classes {2, -100, 3}");
    th_expect_in(th_out, "mul                    kl_div x (3, 4)");
    th_expect_in(th_out, "mul                    bce_with_logits x, t (3, 4)");
    th_expect_in(th_out, "sum_dims               cosine_similarity x1, x2 (3, 4)");
    th_expect_in(th_out, "vector_norm            triplet_margin a, p, n (3, 4)");
    th_expect_in(th_out, "vector_norm            weight_norm v (3, 2, 4)");
    th_expect_in(th_out, "relu                   multi_margin x (3, 4)");
    th_expect_in(th_out, "log                    gaussian_nll x, target, var (3, 4)");
    th_expect_in(th_out, "softmax                attention q (2, 3, 4), k (2, 5, 4)");
    th_expect_in(th_out, "layer_norm             TransformerDecoderLayer tgt (3, 2, 4)");
    th_expect_in(th_out, "linear                 RNN tanh x (3, 2, 2)");
    th_expect_in(th_out, "linear                 LSTM proj 2 bidirectional");
    th_expect_in(th_out, "linear                 GRUCell x (2, 2)");
    th_expect_in(th_out, "where                  LSTM bidirectional x (3, 3, 2) lengths");
    th_expect_in(th_out, "33 cases, 0 failed");
    cr_assert(eq(int, RUN("gradcheck", "unfold", "fold"), 0), "%s%s", th_out, th_err);
    th_expect_in(th_out, "2 cases, 0 failed");
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
    th_expect_in(th_out, "var                    (2, 3, 2) dims 1 correction 1 keepdim");
    th_expect_in(th_out, "pick_along_dim         max_dim (3, 4) dim -1 values");
    th_expect_in(th_out, "7 cases, 0 failed");
    cr_assert(eq(int, RUN("gradcheck", "cat"), 0), "%s%s", th_out, th_err);
    th_expect_in(th_out, "cat                    stack (2, 3), (2, 3) dim 1");
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
    th_expect_in(th_out, "12 cases, 0 failed");
    cr_assert(eq(int, setenv("TG_PROFILE", "many", 1), 0));
    cr_assert(eq(int, RUN("gradcheck", "pool"), 0));
    th_expect_in(th_err, "tapegrad: TG_PROFILE=many is not a number of rows >= 1; not profiling");
    cr_assert(strstr(th_err, "self ms") == NULL, "%s", th_err);
    cr_assert(eq(int, unsetenv("TG_PROFILE"), 0));
    cr_assert(eq(int, RUN("gradcheck", "pool"), 0));
    cr_assert(strstr(th_err, "self ms") == NULL, "%s", th_err);
}
