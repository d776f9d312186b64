/* bench/peak_tool.c - the peak of each multiply instruction of this CPU,
 * measured (bench/peak.h), one JSON line each; bench/int8.py reads them.
 *
 *   peak [--threads N (1)] [--seconds S (0.3)]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "peak.h"

int main(int argc, char **argv)
{
    int threads = 1;
    double seconds = 0.3;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--seconds") && i + 1 < argc) seconds = atof(argv[++i]);
        else {
            fprintf(stderr, "usage: peak [--threads N] [--seconds S]\n");
            return 2;
        }
    }
    if (threads < 1 || threads > 256 || !(seconds > 0)) {
        fprintf(stderr, "peak: --threads must be in [1, 256] and --seconds > 0\n");
        return 2;
    }
    printf("{\"ghz\": %.3f}\n", bench_peak_ghz(seconds));
    for (int i = 0; i < bench_peak_count(); i++) {
        const bench_peak p = bench_peak_measure(i, threads, seconds);
        printf("{\"instruction\": \"%s\", \"products\": %d, \"threads\": %d, \"gops\": %.1f, "
               "\"derived\": %s}\n",
               p.instruction, p.products, threads, p.gops, p.derived ? "true" : "false");
        fflush(stdout);
    }
    return 0;
}
