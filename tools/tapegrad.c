/* tools/tapegrad.c - `tapegrad <command> [options]`: dispatch to the
 * subcommands declared in tools.h. */
#include <stdio.h>
#include <string.h>

#include "tapegrad/precision.h"
#include "tapegrad/quant.h"
#include "tapegrad/tensor.h"
#include "tools.h"

#ifndef TG_VERSION
#define TG_VERSION "unknown"
#endif

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} command;

static const command commands[] = {
    {"run-op", tg_cmd_run_op, "run one op case (inputs from a safetensors file)"},
    {"info", tg_cmd_info, "list the tensors and metadata of safetensors files"},
    {"ops", tg_cmd_ops, "list the registered ops and their AMP/backward traits"},
    {"gradcheck", tg_cmd_gradcheck, "check gradients against finite differences"},
    {"bench", tg_cmd_bench, "time ops"},
    {"export", tg_cmd_export, "write the DCGAN generator of a weights file as ONNX"},
    {"viz", tg_cmd_viz, "write a case's backward as a page to step through, or as DOT"},
    {"fid", tg_cmd_fid, "sample quality: FID of image sets or generators (Fashion-MNIST)"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: tapegrad <command> [options]\n"
               "       tapegrad help [command] | --help | --version\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\nRun 'tapegrad <command> --help' for a command's options.\n");
}

static const command *find_command(const char *name)
{
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(commands[i].name, name) == 0) return &commands[i];
    return NULL;
}

/* `tapegrad help` prints the usage; `tapegrad help CMD` is `tapegrad CMD --help`. */
static int help(int argc, char **argv)
{
    if (argc < 3) {
        usage(stdout);
        return TG_EXIT_OK;
    }
    const command *c = find_command(argv[2]);
    if (!c) {
        fprintf(stderr, "tapegrad: unknown command '%s'\n\n", argv[2]);
        usage(stderr);
        return TG_EXIT_USAGE;
    }
    char name[32], opt[] = "--help";
    snprintf(name, sizeof name, "%s", c->name);
    char *args[] = {name, opt, NULL};
    return c->run(2, args);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return TG_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        usage(stdout);
        return TG_EXIT_OK;
    }
    if (strcmp(cmd, "help") == 0) return help(argc, argv);
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "-V") == 0) {
        const tg_int8_kernel ik = tg_int8_kernel_get();
        const tg_bf16_kernel bk = tg_bf16_kernel_get();
        const char *emu = " on emulated tiles";   /* TG_AMX_EMULATE */
        char bcast[40] = "";   /* how the avx512 kernel broadcasts */
        if (bk == TG_BF16_KERNEL_AVX512)
            snprintf(bcast, sizeof bcast, " (%s broadcast)", tg_bf16_broadcast_name());
        const char *bound = tg_cpu_isa_bound();
        char bound_note[64] = "";
        if (bound) snprintf(bound_note, sizeof bound_note, ", bounded by TG_MAX_ISA=%s", bound);
        printf("tapegrad %s (OpenBLAS kernels: %s; int8 kernel: %s%s; bf16 kernel: %s%s%s; "
               "f16 kernel: %s; vector ISA: %s%s)\n",
               TG_VERSION, tg_blas_core(), tg_int8_kernel_name(ik),
               ik == TG_INT8_KERNEL_AMX && tg_amx_emulated() ? emu : "", tg_bf16_kernel_name(bk),
               bk == TG_BF16_KERNEL_AMX && tg_amx_emulated() ? emu : "", bcast,
               tg_f16_kernel_name(), tg_cpu_isa(), bound_note);
        return TG_EXIT_OK;
    }
    const command *c = find_command(cmd);
    if (!c) {
        fprintf(stderr, "tapegrad: unknown command '%s'\n\n", cmd);
        usage(stderr);
        return TG_EXIT_USAGE;
    }
    /* The command sees its own name as argv[0]. */
    return c->run(argc - 1, argv + 1);
}
