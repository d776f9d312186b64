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
/* tapegrad fid REF SET...: Frechet distances of image sets (tools/cmd_fid.c). */
int tg_cmd_fid(int argc, char **argv);

#endif
