/* bench/timing.h - what the one-call timing tools (bench/pool,
 * bench/indexing, bench/rows) share: a dtype's name, and timing a call. */
#ifndef TAPEGRAD_BENCH_TIMING_H
#define TAPEGRAD_BENCH_TIMING_H

#include <stdbool.h>

#include <tapegrad/tapegrad.h>

/* The dtype named s ("f32", "f64", "bf16" or "f16") into *dt; false for
 * any other name. */
bool bench_parse_dtype(const char *s, tg_dtype *dt);

/* Calls fn(arg) three times as warmup, then times `repeat` calls and prints
 * one JSON line {"tool": "tapegrad", "median_ms": M, "threads": T}.
 * Returns 0, or 1 when out of memory. */
int bench_time_calls(void (*fn)(const void *arg), const void *arg, long repeat);

#endif
