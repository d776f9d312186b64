/* tools/tools.h - the subcommands of the `tapegrad` command.
 *
 * Each tg_cmd_* receives the arguments after the command name (argv[0] is the
 * command name itself, e.g. "info"), prints its output on stdout and its
 * diagnostics on stderr, and returns a process exit code:
 *   0  success,
 *   1  the command ran but failed (bad file, failing check, library error),
 *   2  usage error (unknown option, missing argument).
 */
#ifndef TAPEGRAD_TOOLS_H
#define TAPEGRAD_TOOLS_H

#define TG_EXIT_OK 0
#define TG_EXIT_FAIL 1
#define TG_EXIT_USAGE 2

#include <stdbool.h>

#include "tapegrad/conv.h"

/* The arguments of run-op and viz (tools/case_args.c): --in CASE, --out
 * PATH (both required), [--algo reference|fast].  -1 when they are fine,
 * else the exit code after printing help or what is wrong with the usage. */
typedef struct tg_case_args {
    const char *in, *out;
    tg_conv_algo algo;
} tg_case_args;
int tg_tool_case_args(const char *cmd, const char *usage, int argc, char **argv,
                      tg_case_args *a);

/* The ops that --plugin shared objects registered (tools/plugin.c). */
#define TG_PLUGIN_MAX_OPS 64
typedef struct tg_plugin_ops {
    int n;
    const char *names[TG_PLUGIN_MAX_OPS];   /* borrowed from the registry */
} tg_plugin_ops;
/* Loads every `--plugin PATH` of argv[1..*argc) and removes those arguments
 * from argv.  -1 when all loaded (ops gets the names they registered), or an
 * exit code after printing why: TG_EXIT_USAGE for a plugin that cannot be
 * loaded, has no tapegrad_register, fails in it or registers nothing. */
int tg_tool_load_plugins(const char *cmd, int *argc, char **argv, tg_plugin_ops *ops);
/* tg_gradcheck (and tg_gradgradcheck when the op's backward is
 * differentiable) of a registered op on generic f64 inputs of shape (3, 4),
 * contiguous and transposed, three for a variadic op; prints one row.
 * NA when there is nothing to check: an op without inputs or backward, or
 * one that refuses such inputs. */
typedef enum tg_plugin_check {
    TG_PLUGIN_CHECK_OK,
    TG_PLUGIN_CHECK_FAILED,
    TG_PLUGIN_CHECK_NA,
} tg_plugin_check;
tg_plugin_check tg_tool_gradcheck_plugin_op(const char *name);

/* tapegrad run-op: runs one op case (tools/cmd_run_op.c). */
int tg_cmd_run_op(int argc, char **argv);
/* tapegrad info FILE.safetensors: lists tensors and metadata (tools/cmd_info.c). */
int tg_cmd_info(int argc, char **argv);
/* tapegrad ops: the op registry as a table (tools/cmd_ops.c). */
int tg_cmd_ops(int argc, char **argv);
/* tapegrad gradcheck: numerical gradient checks (tools/cmd_gradcheck.c). */
int tg_cmd_gradcheck(int argc, char **argv);
/* tapegrad bench: timings (tools/cmd_bench.c). */
int tg_cmd_bench(int argc, char **argv);
/* tapegrad export --onnx: a DCGAN generator as ONNX (tools/cmd_export.c). */
int tg_cmd_export(int argc, char **argv);
/* tapegrad viz: a case's backward as an HTML page (tools/cmd_viz.c). */
int tg_cmd_viz(int argc, char **argv);
/* tapegrad fid REF SET...: Frechet distances of image sets (tools/cmd_fid.c). */
int tg_cmd_fid(int argc, char **argv);

#endif
