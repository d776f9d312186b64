/* bench/timing.h - what the one-call timing tools (bench/pool,
 * bench/indexing, bench/rows, bench/seq) share: a dtype's name, the check
 * of a call, and timing a call. */
#ifndef TAPEGRAD_BENCH_TIMING_H
#define TAPEGRAD_BENCH_TIMING_H

#include <stdbool.h>
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

/* The options the benchmark programs share, at argv[*i]: --threads N,
 * --repeat N (integers >= 0), --backward and --dtype NAME into their
 * places, *i moved past a value.  1 when argv[*i] was one of them, 0 when
 * it is another option, -1 for a missing or bad value. */
int bench_common_arg(int argc, char **argv, int *i, long *threads, long *repeat, bool *backward,
                     tg_dtype *dt);

/* Calls fn(arg) three times as warmup, then times `repeat` calls and prints
 * one JSON line {"tool": "tapegrad", "median_ms": M, "threads": T}.
 * Returns 0, or 1 when out of memory. */
int bench_time_calls(void (*fn)(const void *arg), const void *arg, long repeat);

#endif
