/* bench/timing.h - what the one-call timing tools (bench/pool,
 * bench/indexing, bench/rows, bench/pointwise, bench/seq) share: a dtype's
 * name, the check of a call, the (N, C) tools' arguments, and timing a
 * call. */
#ifndef TAPEGRAD_BENCH_TIMING_H
#define TAPEGRAD_BENCH_TIMING_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <tapegrad/tapegrad.h>

/* Exits with "tool: call failed: STATUS: message" when call returns a
 * negative tg_status (the one-call timing tools' CHECK). */
#define BENCH_CHECK(tool, call)                                                      \
    do {                                                                             \
        int rc_ = (call);                                                            \
        if (rc_ < 0) {                                                               \
            fprintf(stderr, "%s: %s failed: %s: %s\n", tool, #call, tg_status_name(rc_), \
                    tg_error_message());                                             \
            exit(1);                                                                 \
        }                                                                            \
    } while (0)

/* The dtype named s ("f32", "f64", "bf16" or "f16") into *dt; false for
 * any other name. */
bool bench_parse_dtype(const char *s, tg_dtype *dt);

/* The arguments of a tool timing one op on an (N, C) tensor (bench/rows,
 * bench/pointwise): --op NAME (op: its index in names[0..n)), --shape N,C,
 * [--dtype f32|f64|bf16|f16 (f32)], [--threads T (0: the default)],
 * [--repeat R (20)], [--backward]. */
typedef struct bench_nc_args {
    int op;
    int64_t shape[2];
    tg_dtype dt;
    long threads, repeat;
    bool backward;
} bench_nc_args;

/* Parses argv into *a; false (after printing `usage` to stderr) for a
 * missing or unknown argument. */
bool bench_parse_nc(int argc, char **argv, const char *const *names, int n, const char *usage,
                    bench_nc_args *a);

/* Calls fn(arg) three times as warmup, then times `repeat` calls and prints
 * one JSON line {"tool": "tapegrad", "median_ms": M, "threads": T}.
 * Returns 0, or 1 when out of memory. */
int bench_time_calls(void (*fn)(const void *arg), const void *arg, long repeat);

#endif
