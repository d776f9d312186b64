/* tools/cmd_run_op.c - `tapegrad run-op --in CASE --out RESULT [--algo A]`.
 *
 * Runs the conv op described by a case file (see case.h) and writes y and,
 * when the case has grad_y, the gradients into a result file.  Quantized
 * cases (op quantized_*) run the integer ops of tapegrad/quant.h.  Errors print
 * "tapegrad run-op: <message>" and exit 1; usage errors exit 2.
 */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "case.h"
#include "tapegrad/status.h"
#include "tools.h"

static const char run_op_usage[] =
    "usage: tapegrad run-op --in CASE.safetensors --out RESULT.safetensors\n"
    "                       [--algo reference|fast]\n"
    "CASE holds x, weight, [bias], [grad_y] and metadata op, stride, padding,\n"
    "output_padding, dilation, groups, activation.  RESULT receives y and, with\n"
    "grad_y, grad_x, grad_weight and grad_bias.\n"
    "Quantized ops (op quantized_conv2d, quantized_conv_transpose2d, ...): x U8/I8,\n"
    "weight I8, [bias F32], metadata x_scale, x_zero_point, weight_scale (one, or\n"
    "one per output channel), y_scale, y_zero_point; RESULT holds y in x's dtype.\n";

typedef struct run_op_args {
    const char *in, *out;
    tg_conv_algo algo;
} run_op_args;

static int usage_error(const char *fmt, const char *arg)
{
    fputs("tapegrad run-op: ", stderr);
    fprintf(stderr, fmt, arg);
    fputc('\n', stderr);
    fputs(run_op_usage, stderr);
    return TG_EXIT_USAGE;
}

/* Accepts "--opt VALUE" and "--opt=VALUE".  Returns the value or NULL when
 * argv[*i] is not this option; *missing is set when the value is absent. */
static const char *option_value(int argc, char **argv, int *i, const char *opt,
                                int *missing)
{
    size_t len = strlen(opt);
    if (strncmp(argv[*i], opt, len) != 0)
        return NULL;
    if (argv[*i][len] == '=')
        return argv[*i] + len + 1;
    if (argv[*i][len] != '\0')
        return NULL;
    /* "--out --algo": the value was forgotten; "--out=--x" names such a path */
    if (*i + 1 >= argc || strncmp(argv[*i + 1], "--", 2) == 0) {
        *missing = 1;
        return NULL;
    }
    return argv[++*i];
}

static int parse_algo(const char *s, tg_conv_algo *algo)
{
    if (strcmp(s, "reference") == 0)
        *algo = TG_CONV_ALGO_REFERENCE;
    else if (strcmp(s, "fast") == 0)
        *algo = TG_CONV_ALGO_FAST;
    else
        return -1;
    return 0;
}

/* Returns -1 when the arguments are fine, else the exit code. */
static int parse_args(int argc, char **argv, run_op_args *a)
{
    for (int i = 1; i < argc; i++) {
        int missing = 0;
        const char *v;
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            fputs(run_op_usage, stdout);
            return TG_EXIT_OK;
        } else if ((v = option_value(argc, argv, &i, "--in", &missing))) {
            a->in = v;
        } else if ((v = option_value(argc, argv, &i, "--out", &missing))) {
            a->out = v;
        } else if ((v = option_value(argc, argv, &i, "--algo", &missing))) {
            if (parse_algo(v, &a->algo) < 0)
                return usage_error("--algo must be reference or fast, not '%s'", v);
        } else if (missing) {
            return usage_error("option %s needs a value", argv[i]);
        } else {
            return usage_error("unknown argument '%s'", argv[i]);
        }
    }
    return -1;
}

static int run(const run_op_args *a)
{
    char err[1024] = "";
    tg_st_file *in = NULL, *res = NULL;
    tg_case c;
    int rc = tg_safetensors_load(&in, a->in);
    if (rc < 0)
        snprintf(err, sizeof err, "cannot read %s: %s", a->in, tg_error_message());
    if (rc >= 0)
        rc = tg_case_parse(&c, in, err, sizeof err);
    if (rc >= 0)
        rc = tg_case_run(&res, &c, a->algo, err, sizeof err);
    if (rc >= 0) {
        rc = tg_safetensors_save(res, a->out);
        if (rc < 0)
            snprintf(err, sizeof err, "cannot write %s: %s", a->out, tg_error_message());
    }
    tg_st_free(res);
    tg_st_free(in);
    if (rc < 0) {
        fprintf(stderr, "tapegrad run-op: %s\n", err);
        return TG_EXIT_FAIL;
    }
    return TG_EXIT_OK;
}

int tg_cmd_run_op(int argc, char **argv)
{
    run_op_args a = {.in = NULL, .out = NULL, .algo = TG_CONV_ALGO_DEFAULT};
    int code = parse_args(argc, argv, &a);
    if (code >= 0)
        return code;
    if (!a.in || !a.out) {
        fprintf(stderr, "tapegrad run-op: missing option %s (see --help)\n",
                a.in ? "--out" : "--in");
        return TG_EXIT_USAGE;
    }
    /* The result would replace the case it came from. */
    struct stat si, so;
    if (stat(a.in, &si) == 0 && stat(a.out, &so) == 0 && si.st_dev == so.st_dev &&
        si.st_ino == so.st_ino) {
        fprintf(stderr, "tapegrad run-op: --out %s is the --in file: the result would replace "
                "the case\n", a.out);
        return TG_EXIT_USAGE;
    }
    return run(&a);
}
