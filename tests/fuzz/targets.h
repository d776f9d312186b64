/* tests/fuzz/targets.h - the fuzz targets: one function per file format.
 *
 * Each target takes arbitrary bytes, feeds them to the library as a file of
 * its kind and checks what must hold whatever the bytes are.  It returns 0
 * when the bytes were handled well (accepted, or refused with an error code
 * and a message) and -1, after printing why to stderr, when a property was
 * broken.  A crash, a sanitizer report or a leak is a failure too.
 *
 * The same functions run under libFuzzer (fuzz_main.c, built with
 * -Dfuzz=true) and, over the committed corpus in tests/fuzz/corpus/<name>,
 * in the Criterion suite (tests/test_fuzz.c). */
#ifndef TAPEGRAD_TESTS_FUZZ_TARGETS_H
#define TAPEGRAD_TESTS_FUZZ_TARGETS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tapegrad/safetensors.h"

/* tg_safetensors_parse; what it accepts saves and parses back the same. */
int tg_fuzz_safetensors(const uint8_t *data, size_t size);
/* tg_idx_load on the bytes as a file (plain or gzip); what it accepts has as
 * many elements as its header says. */
int tg_fuzz_idx(const uint8_t *data, size_t size);
/* tg_checkpoint_load_file into a small training state (model, Adam, grad
 * scaler, loader, RNG, step); when it fails, that state is unchanged; when it
 * succeeds, a training step runs (unless the BatchNorm count is INT64_MAX,
 * which the step refuses to increment). */
int tg_fuzz_checkpoint(const uint8_t *data, size_t size);
/* Saves that training state to path: the seed of the checkpoint corpus. */
int tg_fuzz_checkpoint_seed(const char *path);
/* A conv case file (tools/case.h) run with the fast and the reference
 * algorithm: both refuse it or both run it, and then they agree on y and on
 * every gradient within rounding.  A quantized case runs with the portable
 * int8 kernel and with every other one the CPU has: the same refusal or the
 * same values. */
int tg_fuzz_case(const uint8_t *data, size_t size);

/* A bytes-as-program target (target_tape.c): tensors made, combined by ops,
 * viewed, changed in place, differentiated with backward and tg_grad (hooks,
 * retain_graph, create_graph, no-grad and autocast scopes) and released in
 * any order.  Every call succeeds or is refused (below), an output is set
 * exactly when the call succeeds, and nothing leaks. */
int tg_fuzz_tape(const uint8_t *data, size_t size);

/* ---- shared by the target files (targets.c) ---- */

/* a and b hold the same tensors: in order, the same names, dtypes, shapes
 * and bytes. */
bool tg_fuzz_same_tensors(const tg_st_file *a, const tg_st_file *b);

/* Prints "fuzz <target>: <why>" to stderr and returns -1: a broken property. */
int tg_fuzz_broken(const char *target, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* 0 when rc >= 0, or when rc is one of tapegrad's negative statuses and
 * tg_error_message() says something; otherwise tg_fuzz_broken. */
int tg_fuzz_refused(const char *target, const char *call, int rc);

typedef struct tg_fuzz_target {
    const char *name;   /* also the corpus folder's name */
    int (*run)(const uint8_t *data, size_t size);
} tg_fuzz_target;

/* Every target, ending with {NULL, NULL}. */
extern const tg_fuzz_target tg_fuzz_targets[];

#endif
