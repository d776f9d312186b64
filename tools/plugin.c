/* tools/plugin.c - `--plugin PATH.so` of `tapegrad ops` and `tapegrad
 * gradcheck`: loads a shared object that registers ops through its entry
 * point
 *
 *     int tapegrad_register(void);   // tg_op_register(...) for each op
 *
 * and checks a plugin op's derivatives on generic inputs: (3, 4) f64,
 * contiguous and transposed, three of them for a variadic op. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tapegrad/tapegrad.h"
#include "tools.h"

/* The names registered since the registry held `before` ops: every name of
 * the registry not in names[0..n) yet is appended (borrowed strings). */
static void collect_new(tg_plugin_ops *ops, const char **seen, int n_seen)
{
    int n = tg_op_count();
    for (int i = 0; i < n && ops->n < TG_PLUGIN_MAX_OPS; i++) {
        tg_op_info info;
        if (tg_op_info_at(i, &info) < 0) continue;
        bool old = false;
        for (int k = 0; k < n_seen && !old; k++) old = strcmp(seen[k], info.name) == 0;
        for (int k = 0; k < ops->n && !old; k++) old = strcmp(ops->names[k], info.name) == 0;
        if (!old) ops->names[ops->n++] = info.name;
    }
}

static int load_one(const char *cmd, const char *path, tg_plugin_ops *ops)
{
    int before = tg_op_count();
    if (before < 0) {
        fprintf(stderr, "tapegrad %s: %s\n", cmd, tg_error_message());
        return TG_EXIT_FAIL;
    }
    const char **seen = malloc((size_t)(before ? before : 1) * sizeof *seen);
    if (!seen) {
        fprintf(stderr, "tapegrad %s: out of memory\n", cmd);
        return TG_EXIT_FAIL;
    }
    for (int i = 0; i < before; i++) {
        tg_op_info info;
        seen[i] = tg_op_info_at(i, &info) == TG_OK ? info.name : "";
    }
    int code = TG_EXIT_USAGE;
    /* PATH is a file: dlopen would look a name without '/' up on the
     * library search path instead of in the current directory */
    char *local = NULL;
    if (!strchr(path, '/') && (local = malloc(strlen(path) + 3))) sprintf(local, "./%s", path);
    /* the handle is kept open: the plugin's schemas live in it */
    void *h = dlopen(local ? local : path, RTLD_NOW | RTLD_LOCAL);
    free(local);
    int (*entry)(void) = NULL, rc = 0;
    if (!h) {
        fprintf(stderr, "tapegrad %s: --plugin %s: cannot load it: %s\n", cmd, path, dlerror());
    } else if (!(*(void **)&entry = dlsym(h, "tapegrad_register"))) {
        fprintf(stderr, "tapegrad %s: --plugin %s: no entry point 'int "
                        "tapegrad_register(void)' in it\n", cmd, path);
    } else if ((tg_error_clear(), rc = entry()) < 0) {
        /* a register function may fail without setting a message */
        const char *msg = tg_error_message();
        fprintf(stderr, "tapegrad %s: --plugin %s: tapegrad_register failed (%d, %s): %s\n", cmd,
                path, rc, tg_status_name(rc), msg[0] ? msg : "no message set");
    } else if (tg_op_count() <= before) {
        fprintf(stderr, "tapegrad %s: --plugin %s: tapegrad_register registered no op\n", cmd,
                path);
    } else {
        collect_new(ops, seen, before);
        code = -1;
    }
    free(seen);
    return code;
}

int tg_tool_load_plugins(const char *cmd, int *argc, char **argv, tg_plugin_ops *ops)
{
    ops->n = 0;
    int k = 1;
    for (int i = 1; i < *argc; i++) {
        if (strcmp(argv[i], "--plugin") != 0) {
            argv[k++] = argv[i];
            continue;
        }
        if (i + 1 >= *argc) {
            fprintf(stderr, "tapegrad %s: --plugin needs a path to a shared object\n", cmd);
            return TG_EXIT_USAGE;
        }
        int code = load_one(cmd, argv[++i], ops);
        if (code >= 0) return code;
    }
    *argc = k;
    return -1;
}

static int call_op(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return tg_op_call(user, out, n, in, NULL, 0);
}

static void print_na(const char *name, const char *why, const char *msg)
{
    printf("%-17s %-58s %-8s %-8s\n", name, why, "n/a", "n/a");
    if (msg) printf("    %s\n", msg);
}

/* Whether op refuses the inputs in, with TG_EDTYPE or TG_ESHAPE: inputs of
 * another kind (an integer index, a shape of its own).  An op with a shape
 * rule refuses through it (op.h), so only the rule is asked: once it has
 * accepted them, dispatch's TG_ESHAPE from the forward means the forward
 * gave another result than the rule said, a bug the gradcheck reports.
 * Without a rule, the forward is asked (grad mode off). */
static bool refuses(const tg_op_schema *op, int n, tg_tensor *const *in)
{
    int rc;
    tg_error_clear();
    if (op->shape) {
        tg_dtype dt;
        int nd;
        int64_t shape[TG_MAX_DIMS];
        rc = op->shape(n, in, NULL, &dt, &nd, shape);
    } else {
        tg_tensor *y = NULL;
        const bool prev = tg_set_grad_enabled(false);
        rc = call_op(&y, n, in, (void *)op);
        tg_set_grad_enabled(prev);
        tg_tensor_release(y);
    }
    return rc == TG_EDTYPE || rc == TG_ESHAPE;
}

/* n inputs of shape (3, 4) in +-[0.1, 1] (half of them negative), f64,
 * requiring grad.  Transposed: each is the transpose of a contiguous (4, 3)
 * tensor, so its strides are (1, 3). */
static int make_inputs(int n, tg_tensor **in, bool transposed)
{
    int64_t shape[] = {3, 4};
    if (transposed) shape[0] = 4, shape[1] = 3;
    tg_rng rng;
    tg_rng_init(&rng, 1234);
    int rc = TG_OK;
    for (int i = 0; i < n && rc >= 0; i++) {
        rc = tg_tensor_zeros(&in[i], TG_F64, 2, shape);
        if (rc >= 0) rc = tg_tensor_rand_uniform(in[i], &rng, 0.1, 1.0);
        for (int64_t k = 0; rc >= 0 && k < 12; k += 2) {
            double v;
            rc = tg_tensor_get_flat(in[i], k, &v);
            if (rc >= 0) rc = tg_tensor_set_flat(in[i], k, -v);
        }
        if (rc >= 0 && transposed) {   /* a view, not recorded: a leaf */
            tg_tensor *t = NULL;
            rc = tg_transpose(&t, in[i], 0, 1);
            tg_tensor_release(in[i]);
            in[i] = t;
        }
        if (rc >= 0) rc = tg_tensor_set_requires_grad(in[i], true);
    }
    return rc;
}

/* The checks of one layout: r[0] of tg_gradcheck, r[1] of tg_gradgradcheck
 * (when second); a failure's message into msg[k] unless one is there from
 * the other layout already. */
static void check_layout(const tg_op_schema *op, int n, bool transposed, bool second, int r[2],
                         char msg[2][512])
{
    tg_tensor *in[TG_OP_MAX_INPUTS] = {0};
    int rc[2] = {make_inputs(n, in, transposed), TG_OK};
    if (rc[0] >= 0) {
        rc[0] = tg_gradcheck(call_op, (void *)op, n, in, NULL);
        if (rc[0] < 0 && !msg[0][0])
            snprintf(msg[0], 512, "grad (%s inputs): %s", transposed ? "transposed" : "contiguous",
                     tg_error_message());
        if (second) rc[1] = tg_gradgradcheck(call_op, (void *)op, n, in, NULL);
        if (rc[1] < 0 && !msg[1][0])
            snprintf(msg[1], 512, "gradgrad (%s inputs): %s",
                     transposed ? "transposed" : "contiguous", tg_error_message());
    } else if (!msg[0][0]) {
        snprintf(msg[0], 512, "inputs: %s", tg_error_message());
    }
    for (int k = 0; k < 2; k++)
        if (rc[k] < 0 && r[k] >= 0) r[k] = rc[k];
    for (int i = 0; i < n; i++) tg_tensor_release(in[i]);
}

tg_plugin_check tg_tool_gradcheck_plugin_op(const char *name)
{
    const tg_op_schema *op = NULL;
    if (tg_op_find(&op, name) < 0) {
        printf("%-17s %s\n", name, tg_error_message());
        return TG_PLUGIN_CHECK_FAILED;
    }
    /* nothing to differentiate: no inputs, or no backward */
    if (op->arity == 0 || !op->backward) {
        print_na(name, op->arity == 0 ? "plugin: no inputs" : "plugin: the schema has no backward",
                 NULL);
        return TG_PLUGIN_CHECK_NA;
    }
    /* a variadic op gets three inputs, so that a backward that treats the
     * first two apart is caught; params NULL, so the op must take defaults
     * for them */
    int n = op->arity < 0 ? 3 : op->arity;
    tg_tensor *in[TG_OP_MAX_INPUTS] = {0};
    int rc = make_inputs(n, in, false);
    /* inputs it refuses: nothing the tool can check, so n/a, not a failure
     * (tg_gradcheck in a program of one's own checks it on its inputs) */
    const bool refused = rc >= 0 && refuses(op, n, in);
    if (refused) print_na(name, "plugin: refuses (3, 4) f64 inputs", tg_error_message());
    for (int i = 0; i < n; i++) tg_tensor_release(in[i]);
    if (refused) return TG_PLUGIN_CHECK_NA;
    /* inputs may have any layout (docs/custom-ops.md): contiguous ones, then
     * transposed ones, which a forward or backward reading them as flat
     * arrays gets wrong */
    char msg[2][512] = {"", ""}, label[64];
    int r[2] = {TG_OK, TG_OK};
    const bool second = op->double_backward;
    check_layout(op, n, false, second, r, msg);
    check_layout(op, n, true, second, r, msg);
    snprintf(label, sizeof label, "plugin: %s(3, 4) f64 inputs, contiguous and transposed",
             op->arity < 0 ? "3 " : "");
    printf("%-17s %-58s %-8s %-8s\n", name, label, r[0] < 0 ? "FAIL" : "ok",
           !second ? "n/a" : r[1] < 0 ? "FAIL" : "ok");
    for (int k = 0; k < 2; k++)
        if (msg[k][0]) printf("    %s\n", msg[k]);
    return r[0] >= 0 && r[1] >= 0 ? TG_PLUGIN_CHECK_OK : TG_PLUGIN_CHECK_FAILED;
}
