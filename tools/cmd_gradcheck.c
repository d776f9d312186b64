/* tools/cmd_gradcheck.c - `tapegrad gradcheck [OP ...]`.
 *
 * Runs tg_gradcheck and tg_gradgradcheck in f64 on tiny shapes over a
 * built-in sweep (gradcheck_cases.c), restricted to the named ops
 * (an op name, a group name such as "conv_transpose" or "activation", or
 * "all"), and prints one table row per case.  Exit 1 if any check fails or
 * no case ran (the named ops have none), 2 for an unknown op name.  Conv
 * cases run with both algorithms (fast, reference).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gradcheck_cases.h"
#include "tapegrad/registry.h"
#include "tools.h"

/* ---- running ---- */

static const char gc_usage[] =
    "usage: tapegrad gradcheck [--plugin PATH.so ...] [OP ...]\n"
    "Checks first and second derivatives (tg_gradcheck, tg_gradgradcheck, f64)\n"
    "on a built-in sweep of tiny cases.  OP is an op name as `tapegrad ops`\n"
    "lists it (conv_transpose, add, ...), a conv op with its rank\n"
    "(conv_transpose2d), a group (conv, conv_transpose, elementwise,\n"
    "activation, reduce, shape, linalg, nn, pool) or all (the default).  Conv\n"
    "cases run with both conv algorithms.\n"
    "--plugin loads a shared object whose `int tapegrad_register(void)`\n"
    "registers ops (tapegrad/op.h); its ops are checked on (3, 4) f64 inputs,\n"
    "contiguous and then transposed (strides (1, 3)), three for a variadic op\n"
    "(n/a for an op without inputs or backward, or one whose shape rule, or\n"
    "forward without one, refuses them with TG_EDTYPE or TG_ESHAPE), and are\n"
    "the default OPs when plugins are given.\n"
    "Exit 0 when every case passes, 1 when one fails or when the named ops\n"
    "have no case or are all n/a (nothing was checked), 2 for an unknown name\n"
    "or a plugin that cannot be loaded, lacks the entry point or registers\n"
    "nothing.\n";

/* The conv parameters as "x(1, 2, 5) k3 s2 d1 p1,0 op1 g2 bias tanh fast". */
static void conv_label(char *buf, size_t n, const gc_case *c, tg_conv_algo algo)
{
    const tg_conv_params *p = &c->conv;
    char xs[64];
    tg_shape_str(xs, sizeof xs, c->ndim[0], c->shape[0]);
    int len = snprintf(buf, n, "x%s k%lld s%lld d%lld p%lld,%lld", xs,
                       (long long)c->shape[1][2], (long long)p->stride[0],
                       (long long)p->dilation[0], (long long)p->padding[0][0],
                       (long long)p->padding[0][1]);
    if (gc_case_conv(c) == GC_CONV_TRANSPOSE && len > 0 && (size_t)len < n)
        len += snprintf(buf + len, n - (size_t)len, " op%lld", (long long)p->output_padding[0]);
    if (len > 0 && (size_t)len < n)
        snprintf(buf + len, n - (size_t)len, " g%lld%s%s%s %s", (long long)p->groups,
                 c->n > 2 ? " bias" : "", p->act ? " " : "",
                 p->act ? tg_activation_name(p->act) : "",
                 algo == TG_CONV_ALGO_REFERENCE ? "ref" : "fast");
}

/* Random f64 inputs that require grad, in the case's domain. */
static int make_inputs(tg_tensor **in, const gc_case *c, uint64_t seed)
{
    tg_rng rng;
    tg_rng_init(&rng, seed);
    for (int i = 0; i < c->n; i++) {
        int rc = tg_tensor_zeros(&in[i], TG_F64, c->ndim[i], c->shape[i]);
        if (rc < 0)
            return rc;
        if (c->domain == GC_POSITIVE) {
            rc = tg_tensor_rand_uniform(in[i], &rng, 0.5, 2.0);
        } else {
            rc = tg_tensor_rand_uniform(in[i], &rng, -1.0, 1.0);
            /* Keep |v| >= 0.1 so no central difference straddles a kink at 0. */
            for (int64_t k = 0; rc >= 0 && k < tg_tensor_numel(in[i]); k++) {
                double v;
                rc = tg_tensor_get_flat(in[i], k, &v);
                if (rc >= 0 && v > -0.1 && v < 0.1)
                    rc = tg_tensor_set_flat(in[i], k, v < 0 ? v - 0.1 : v + 0.1);
            }
        }
        if (rc >= 0)
            rc = tg_tensor_set_requires_grad(in[i], true);
        if (rc < 0)
            return rc;
    }
    return TG_OK;
}

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Runs one case (conv cases with the given algorithm); returns true when
 * both checks pass. */
static bool run_case(const gc_case *proto, int index, tg_conv_algo algo)
{
    gc_case copy = *proto, *c = &copy;
    c->conv.algo = algo;
    tg_tensor *in[GC_MAX_IN] = {NULL, NULL, NULL};
    tg_gradcheck_opts opts = TG_GRADCHECK_OPTS_INIT;
    opts.seed = 1000 + (uint64_t)index;
    char label[160], msg[2][512] = {"", ""};
    if (c->label) {
        snprintf(label, sizeof label, "%s", c->label);
    } else {   /* the rank first: "2d x(1, 2, 5, 4) ..." */
        char conv[120];
        conv_label(conv, sizeof conv, c, algo);
        snprintf(label, sizeof label, "%s %s", c->alias ? c->alias + strlen(c->op) : "", conv);
    }
    double t0 = now_seconds();
    int rc[2];
    rc[0] = rc[1] = make_inputs(in, c, opts.seed);
    if (rc[0] < 0) {
        snprintf(msg[0], sizeof msg[0], "%s", tg_error_message());
    } else {
        rc[0] = tg_gradcheck(c->fn, (void *)c, c->n, in, &opts);
        if (rc[0] < 0)
            snprintf(msg[0], sizeof msg[0], "%s", tg_error_message());
        rc[1] = tg_gradgradcheck(c->fn, (void *)c, c->n, in, &opts);
        if (rc[1] < 0)
            snprintf(msg[1], sizeof msg[1], "%s", tg_error_message());
    }
    double dt = now_seconds() - t0;
    printf("%-22s %-58s %-8s %-8s %7.3fs\n", c->op, label, rc[0] < 0 ? "FAIL" : "ok",
           rc[1] < 0 ? "FAIL" : "ok", dt);
    for (int k = 0; k < 2; k++)
        if (msg[k][0])
            printf("    %s: %s (%s)\n", k ? "gradgrad" : "grad", msg[k],
                   tg_status_name(rc[k]));
    for (int i = 0; i < GC_MAX_IN; i++)
        tg_tensor_release(in[i]);
    return rc[0] >= 0 && rc[1] >= 0;
}

static bool case_selected(const gc_case *c, const char *name)
{
    return strcmp(name, "all") == 0 || strcmp(name, c->op) == 0 ||
           strcmp(name, c->group) == 0 || (c->alias && strcmp(name, c->alias) == 0);
}

/* Marks the selected cases; returns -1 to go on, or the exit code (help, or
 * an unknown name). */
static int select_cases(int argc, char **argv, bool *sel, const tg_plugin_ops *plugin,
                        bool *psel)
{
    for (int k = 0; k < gc_ncases; k++)
        sel[k] = argc <= 1 && plugin->n == 0;
    for (int k = 0; k < plugin->n; k++)
        psel[k] = argc <= 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            fputs(gc_usage, stdout);
            return TG_EXIT_OK;
        }
        bool found = false;
        for (int k = 0; k < gc_ncases; k++)
            if (case_selected(&gc_cases[k], argv[i]))
                sel[k] = found = true;
        for (int k = 0; k < plugin->n; k++)
            if (strcmp(argv[i], plugin->names[k]) == 0 || strcmp(argv[i], "all") == 0)
                psel[k] = found = true;
        tg_op_info info;
        if (!found && tg_op_info_find(argv[i], &info) == TG_OK) {
            printf("%s: registered, but the sweep has no cases for it (its gradient is "
                   "checked in the test suite, or it has none to check)\n", argv[i]);
            found = true;
        }
        if (!found) {
            fprintf(stderr, "tapegrad gradcheck: unknown %s '%s'\n%s",
                    argv[i][0] == '-' ? "option" : "op", argv[i], gc_usage);
            return TG_EXIT_USAGE;
        }
    }
    return -1;
}

int tg_cmd_gradcheck(int argc, char **argv)
{
    tg_plugin_ops plugin;
    int code = tg_tool_load_plugins("gradcheck", &argc, argv, &plugin);
    if (code >= 0)
        return code;
    bool *sel = calloc((size_t)gc_ncases, sizeof *sel), psel[TG_PLUGIN_MAX_OPS];
    if (!sel) {
        fprintf(stderr, "tapegrad gradcheck: out of memory\n");
        return TG_EXIT_FAIL;
    }
    code = select_cases(argc, argv, sel, &plugin, psel);
    if (code >= 0) {
        free(sel);
        return code;
    }
    printf("%-22s %-58s %-8s %-8s %8s\n", "op", "case", "grad", "gradgrad", "time");
    int run = 0, failed = 0;
    double t0 = now_seconds();
    for (int k = 0; k < gc_ncases; k++) {
        if (!sel[k])
            continue;
        /* Conv cases run with both algorithms: they share no kernel code. */
        bool conv = gc_case_conv(&gc_cases[k]) != GC_NOT_CONV;
        for (int a = 0; a < (conv ? 2 : 1); a++) {
            run++;
            if (!run_case(&gc_cases[k], k, a ? TG_CONV_ALGO_REFERENCE : TG_CONV_ALGO_FAST))
                failed++;
        }
    }
    int na = 0;   /* plugin ops with nothing to check: not cases checked */
    for (int k = 0; k < plugin.n; k++) {
        if (!psel[k])
            continue;
        tg_plugin_check r = tg_tool_gradcheck_plugin_op(plugin.names[k]);
        run += r != TG_PLUGIN_CHECK_NA;
        failed += r == TG_PLUGIN_CHECK_FAILED;
        na += r == TG_PLUGIN_CHECK_NA;
    }
    printf("%d case%s, %d failed", run, run == 1 ? "" : "s", failed);
    if (na)
        printf(", %d n/a", na);
    printf(", %.2fs\n", now_seconds() - t0);
    free(sel);
    if (run == 0)
        fprintf(stderr, "tapegrad gradcheck: no case checked\n");
    return failed || run == 0 ? TG_EXIT_FAIL : TG_EXIT_OK;
}
