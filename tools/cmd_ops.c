/* tools/cmd_ops.c - `tapegrad ops`: the op registry as a table. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "tapegrad/registry.h"
#include "tapegrad/status.h"
#include "tools.h"

static const char ops_usage[] =
    "usage: tapegrad ops [--vjp] [--plugin PATH.so ...]\n"
    "Lists every registered op, with those the plugins register (see\n"
    "`tapegrad gradcheck --help`): name, arity (var = variadic), AMP policy,\n"
    "whether it has a backward, and whether that backward is itself\n"
    "differentiable (double backward).  --vjp adds a last column: the\n"
    "vector-Jacobian product the backward applies, as the op's schema gives\n"
    "it (g: the output's gradient; a, b, ...: the inputs; da: what goes to\n"
    "a), or - when it gives none.\n";

/* One line of the table; vjp NULL: no vjp column. */
static void put_row(int width, const char *name, const char *arity, const char *amp,
                    const char *backward, const char *double_backward, const char *vjp)
{
    if (vjp)
        printf("%-*s %-5s %-16s %-8s %-15s %s\n", width, name, arity, amp, backward,
               double_backward, vjp);
    else
        printf("%-*s %-5s %-16s %-8s %s\n", width, name, arity, amp, backward, double_backward);
}

int tg_cmd_ops(int argc, char **argv)
{
    tg_plugin_ops plugin;
    int code = tg_tool_load_plugins("ops", &argc, argv, &plugin);
    if (code >= 0)
        return code;
    bool vjp = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--vjp") == 0) {
            vjp = true;
            continue;
        }
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            fputs(ops_usage, stdout);
            return TG_EXIT_OK;
        }
        fprintf(stderr, "tapegrad ops: unexpected argument '%s'\n%s", argv[i], ops_usage);
        return TG_EXIT_USAGE;
    }
    int n = tg_op_count();
    if (n < 0) {
        fprintf(stderr, "tapegrad: ops: %s\n", tg_error_message());
        return TG_EXIT_FAIL;
    }
    /* the name column as wide as the longest name (a plugin's may be long) */
    int width = 20;
    for (int i = 0; i < n; i++) {
        tg_op_info info;
        if (tg_op_info_at(i, &info) < 0) {
            fprintf(stderr, "tapegrad: ops: %s\n", tg_error_message());
            return TG_EXIT_FAIL;
        }
        const int len = (int)strlen(info.name);
        if (len > width) width = len;
    }
    put_row(width, "op", "arity", "amp", "backward", "double-backward", vjp ? "vjp" : NULL);
    for (int i = 0; i < n; i++) {
        tg_op_info info;
        if (tg_op_info_at(i, &info) < 0) {
            fprintf(stderr, "tapegrad: ops: %s\n", tg_error_message());
            return TG_EXIT_FAIL;
        }
        char arity[8];
        snprintf(arity, sizeof arity, info.arity < 0 ? "var" : "%d", info.arity);
        put_row(width, info.name, arity, tg_amp_policy_name(info.amp),
                info.has_backward ? "yes" : "no", info.has_double_backward ? "yes" : "no",
                !vjp ? NULL : info.vjp && info.vjp[0] ? info.vjp : "-");
    }
    printf("%d ops\n", n);
    return TG_EXIT_OK;
}
