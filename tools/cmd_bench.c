/* tools/cmd_bench.c - `tapegrad bench`: not written yet; says so honestly. */
#include <stdio.h>

#include "tools.h"

int tg_cmd_bench(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "tapegrad bench: not implemented yet\n");
    return TG_EXIT_USAGE;
}
