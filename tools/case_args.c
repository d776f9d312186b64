/* tools/case_args.c - the arguments of the commands that run one conv case
 * (run-op, viz): --in CASE.safetensors, --out PATH, [--algo reference|fast],
 * each as "--opt VALUE" or "--opt=VALUE". */
#include <stdio.h>
#include <string.h>

#include "tools.h"

static int usage_error(const char *cmd, const char *usage, const char *fmt, const char *arg)
{
    fprintf(stderr, "tapegrad %s: ", cmd);
    fprintf(stderr, fmt, arg);
    fputc('\n', stderr);
    fputs(usage, stderr);
    return TG_EXIT_USAGE;
}

/* The value of option opt at argv[*i], or NULL when argv[*i] is not it;
 * *missing is set when the option is there without a value. */
static const char *option_value(int argc, char **argv, int *i, const char *opt, int *missing)
{
    size_t len = strlen(opt);
    if (strncmp(argv[*i], opt, len) != 0) return NULL;
    if (argv[*i][len] == '=') return argv[*i] + len + 1;
    if (argv[*i][len] != '\0') return NULL;
    /* "--out --algo": the value was forgotten; "--out=--x" names such a path */
    if (*i + 1 >= argc || strncmp(argv[*i + 1], "--", 2) == 0) {
        *missing = 1;
        return NULL;
    }
    return argv[++*i];
}

int tg_tool_case_args(const char *cmd, const char *usage, int argc, char **argv,
                      tg_case_args *a)
{
    *a = (tg_case_args){.in = NULL, .out = NULL, .algo = TG_CONV_ALGO_DEFAULT};
    for (int i = 1; i < argc; i++) {
        int missing = 0;
        const char *v;
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            fputs(usage, stdout);
            return TG_EXIT_OK;
        } else if ((v = option_value(argc, argv, &i, "--in", &missing))) {
            a->in = v;
        } else if ((v = option_value(argc, argv, &i, "--out", &missing))) {
            a->out = v;
        } else if ((v = option_value(argc, argv, &i, "--algo", &missing))) {
            if (strcmp(v, "reference") == 0) a->algo = TG_CONV_ALGO_REFERENCE;
            else if (strcmp(v, "fast") == 0) a->algo = TG_CONV_ALGO_FAST;
            else return usage_error(cmd, usage, "--algo must be reference or fast, not '%s'", v);
        } else if (missing) {
            return usage_error(cmd, usage, "option %s needs a value", argv[i]);
        } else {
            return usage_error(cmd, usage, "unknown argument '%s'", argv[i]);
        }
    }
    if (!a->in) return usage_error(cmd, usage, "missing option %s", "--in");
    if (!a->out) return usage_error(cmd, usage, "missing option %s", "--out");
    return -1;
}
