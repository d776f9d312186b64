/* tests/test_plugin.c - ops from outside the library: examples/custom_op run
 * as a user runs it, and `tapegrad ops/gradcheck --plugin` with the plugin
 * built from the same ops (examples/custom_ops.c), with a plugin that
 * registers nothing (tests/plugin_empty.c) and with shared objects that are
 * not plugins.  Paths come from tests/meson.build. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"

#define RUN(...) th_run("TG_TOOL", (const char *const[]){__VA_ARGS__, NULL})

static void setup(void) { th_tmp_dir_make("tg_plugin_"); }
static void teardown(void) { th_tmp_dir_remove(); }

TestSuite(plugin, .init = setup, .fini = teardown);

static const char *env(const char *name)
{
    const char *v = getenv(name);
    cr_assert(v != NULL, "%s is not set (run through meson test)", name);
    return v;
}

Test(plugin, custom_op_example_checks_and_trains_its_ops)
{
    cr_assert(eq(int, th_run("TG_CUSTOM_OP", (const char *const[]){"--steps", "300", NULL}), 0),
              "%s%s", th_out, th_err);
    th_expect_in(th_out, "gradcheck     custom_softplus  ok");
    th_expect_in(th_out, "gradgradcheck custom_mish      ok");
    th_expect_in(th_out, "gradgradcheck custom_softplus  refused: custom_softplus: create_graph "
                         "through an op whose backward is not differentiable");
    th_expect_in(th_out, "step  300");
    cr_assert(eq(int, th_run("TG_CUSTOM_OP", (const char *const[]){"--steps", "x", NULL}), 2));
}

Test(plugin, ops_lists_the_plugins_ops)
{
    cr_assert(eq(int, RUN("ops", "--plugin", env("TG_CUSTOM_OPS")), 0), "%s", th_err);
    th_expect_row(th_out, "custom_mish 1 fp32 yes yes");
    th_expect_row(th_out, "custom_softplus 1 fp32 yes no");
    th_expect_in(th_out, "conv_transpose ");
}

/* --vjp adds each op's vector-Jacobian product from its schema: the
 * plugin's own, the built-ins', and "-" where a schema gives none or an
 * empty one (the plugin that registers ops without one). */
Test(plugin, ops_vjp_shows_each_schemas_product)
{
    cr_assert(eq(int, RUN("ops", "--vjp", "--plugin", env("TG_CUSTOM_OPS")), 0), "%s", th_err);
    th_expect_row(th_out, "custom_softplus 1 fp32 yes no da = g * sigmoid(a)");
    th_expect_in(th_out, "da = g * (tanh(sp) + a * sigmoid(a) * (1 - tanh(sp)^2)), "
                         "sp = softplus(a)");
    th_expect_row(th_out, "mul 2 promote yes yes da = g * b, db = g * a");
    th_expect_in(th_out, "double-backward vjp\n");
    /* without --vjp the rows end at double-backward */
    cr_assert(eq(int, RUN("ops", "--plugin", env("TG_CUSTOM_OPS")), 0), "%s", th_err);
    cr_assert(strstr(th_out, "sigmoid(a)") == NULL, "%s", th_out);
    th_expect_row(th_out, "custom_softplus 1 fp32 yes no");
    cr_assert(eq(int, RUN("ops", "--vjp", "--plugin", env("TG_NODIFF_PLUGIN")), 0), "%s", th_err);
    th_expect_row(th_out, "plugin_ones 0 keep no no -");
    th_expect_row(th_out, "plugin_scale_by_int 2 keep yes no -");
}

Test(plugin, gradcheck_checks_the_plugins_ops)
{
    cr_assert(eq(int, RUN("gradcheck", "--plugin", env("TG_CUSTOM_OPS")), 0), "%s%s", th_out,
              th_err);
    th_expect_in(th_out, "custom_mish ");
    th_expect_in(th_out, "custom_softplus ");
    th_expect_in(th_out, "2 cases, 0 failed");
    /* one of them by name, beside a built-in */
    cr_assert(eq(int, RUN("gradcheck", "--plugin", env("TG_CUSTOM_OPS"), "custom_mish", "tanh"),
                 0), "%s%s", th_out, th_err);
    th_expect_in(th_out, "2 cases, 0 failed");
}

/* --plugin takes a file path: a bare name is the file in the current
 * directory, not a library on the search path (dlopen's rule). */
Test(plugin, a_bare_file_name_is_in_the_current_directory)
{
    char link[256];   /* the tool runs in the test's directory (th_run) */
    th_tmp_path(link, sizeof link, "my_ops.so");
    cr_assert(eq(int, symlink(env("TG_CUSTOM_OPS"), link), 0));
    cr_assert(eq(int, RUN("ops", "--plugin", "my_ops.so"), 0), "%s", th_err);
    th_expect_in(th_out, "custom_mish ");
}

/* An op without inputs or without a backward has nothing to check: n/a, not
 * a failure, and not a case checked either.  With nothing else selected,
 * nothing was checked: exit 1, as for built-in names without cases. */
Test(plugin, ops_with_nothing_to_differentiate_are_not_applicable)
{
    cr_assert(eq(int, RUN("gradcheck", "--plugin", env("TG_NODIFF_PLUGIN")), 1), "%s%s", th_out,
              th_err);
    th_expect_in(th_out, "plugin_ones       plugin: no inputs");
    th_expect_in(th_out, "plugin_copy_no_backward plugin: the schema has no backward");
    th_expect_in(th_out, "plugin_scale_by_int plugin: refuses (3, 4) f64 inputs");
    th_expect_in(th_out, "plugin_scale_by_int: k must be i64, not f64");
    th_expect_in(th_out, "0 cases, 0 failed, 3 n/a");
    th_expect_in(th_err, "no case checked");
    /* beside an op that is checked, they do not change the exit code */
    cr_assert(eq(int, RUN("gradcheck", "--plugin", env("TG_NODIFF_PLUGIN"), "plugin_ones", "tanh"),
                 0), "%s%s", th_out, th_err);
    th_expect_in(th_out, "1 case, 0 failed, 1 n/a");
}

/* A shape rule that disagrees with its forward is a bug of the op, not a
 * refusal of the inputs: the check fails with dispatch's message.  A shape
 * rule that refuses the inputs is n/a, as a forward's refusal is. */
Test(plugin, a_shape_rule_that_disagrees_with_the_forward_fails)
{
    cr_assert(eq(int, RUN("gradcheck", "--plugin", env("TG_BUGS_PLUGIN"), "bug_shape_rule"), 1),
              "%s%s", th_out, th_err);
    th_expect_in(th_out, "bug_shape_rule    plugin: (3, 4) f64 inputs");
    th_expect_in(th_out, "FAIL");
    th_expect_in(th_out, "bug_shape_rule: forward gave f64 (3, 4), but the shape rule said f64 "
                         "(4, 3)");
    th_expect_in(th_out, "1 case, 1 failed");
    cr_assert(eq(int, RUN("gradcheck", "--plugin", env("TG_BUGS_PLUGIN"), "shape_rule_f32",
                          "cube_ok"), 0), "%s%s", th_out, th_err);
    th_expect_in(th_out, "shape_rule_f32    plugin: refuses (3, 4) f64 inputs");
    th_expect_in(th_out, "shape_rule_f32: x must be f32, not f64");
    th_expect_in(th_out, "1 case, 0 failed, 1 n/a");
}

Test(plugin, a_plugin_that_cannot_be_used_is_exit_2_with_a_message)
{
    char missing[256];
    th_tmp_path(missing, sizeof missing, "no-such-plugin.so");
    cr_assert(eq(int, RUN("gradcheck", "--plugin", missing), 2));
    th_expect_in(th_err, "cannot load it");
    cr_assert(eq(int, RUN("gradcheck", "--plugin", env("TG_LIBTAPEGRAD")), 2));
    th_expect_in(th_err, "no entry point 'int tapegrad_register(void)'");
    cr_assert(eq(int, RUN("ops", "--plugin", env("TG_EMPTY_PLUGIN")), 2));
    th_expect_in(th_err, "tapegrad_register registered no op");
    /* a register function that fails without a message: its status, named */
    setenv("TG_PLUGIN_EMPTY_FAILS", "1", 1);
    cr_assert(eq(int, RUN("ops", "--plugin", env("TG_EMPTY_PLUGIN")), 2));
    unsetenv("TG_PLUGIN_EMPTY_FAILS");
    th_expect_in(th_err, "tapegrad_register failed (-3, ");
    th_expect_in(th_err, tg_status_name(-3));
    th_expect_in(th_err, "no message set");
    cr_assert(eq(int, RUN("gradcheck", "--plugin"), 2));
    th_expect_in(th_err, "--plugin needs a path");
}

/* Ops take inputs of any layout (docs/custom-ops.md): the tool feeds
 * transposed inputs too, so a forward that reads its input as a flat array
 * fails.  A variadic op gets three inputs, so a backward wrong only from
 * input 2 on fails. */
Test(plugin, gradcheck_feeds_transposed_inputs_and_three_to_a_variadic_op)
{
    cr_assert(eq(int, RUN("gradcheck", "--plugin", env("TG_BUGS_PLUGIN"), "cube_flat_x"), 1),
              "%s%s", th_out, th_err);
    th_expect_in(th_out, "cube_flat_x       plugin: (3, 4) f64 inputs, contiguous and transposed");
    th_expect_in(th_out, "grad (transposed inputs): ");
    th_expect_in(th_out, "1 case, 1 failed");
    cr_assert(eq(int, RUN("gradcheck", "--plugin", env("TG_BUGS_PLUGIN"), "sumsq_bad_third"), 1),
              "%s%s", th_out, th_err);
    th_expect_in(th_out, "sumsq_bad_third   plugin: 3 (3, 4) f64 inputs, contiguous and transposed");
    th_expect_in(th_out, "input 2");
    th_expect_in(th_out, "1 case, 1 failed");
    cr_assert(eq(int, RUN("gradcheck", "--plugin", env("TG_BUGS_PLUGIN"), "sumsq_ok", "cube_ok"),
                 0), "%s%s", th_out, th_err);
    th_expect_in(th_out, "2 cases, 0 failed");
}

/* The first column of gradcheck's rows is an op name `tapegrad ops` lists. */
Test(plugin, gradcheck_and_ops_use_the_same_names)
{
    cr_assert(eq(int, RUN("ops"), 0));
    char *ops = strdup(th_out);
    cr_assert(eq(int, RUN("gradcheck", "conv", "conv_transpose", "nn", "elementwise", "shape",
                     "reduce", "pool"), 0), "%s%s", th_out, th_err);
    int rows = 0;
    for (char *line = strtok(th_out, "\n"); line; line = strtok(NULL, "\n")) {
        char name[64];
        if (line[0] == ' ' || sscanf(line, "%63s", name) != 1) continue;
        if (strcmp(name, "op") == 0 || strchr(line, ',') == NULL) continue;   /* header, total */
        if (strstr(line, " cases, ")) continue;
        char want[80];
        snprintf(want, sizeof want, "\n%s ", name);
        cr_assert(strstr(ops, want) != NULL, "gradcheck row '%s' is not an op of `ops`", name);
        rows++;
    }
    cr_assert(rows > 20, "%d rows", rows);
    free(ops);
}
