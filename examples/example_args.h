/* examples/example_args.h - strict command-line values for the small examples
 * (autoencoder, vae, dcgan_load, dcgan_quantize, ...), the check of an output
 * folder, the data set, clock and weight-saving helpers and the message of a
 * failed library call that they share.
 *
 * Each parser takes the whole string or nothing: no empty value, no leading
 * blank, no trailing characters, no value out of range (so "3x", "", " 5",
 * "-1" for a seed, 4294967297 for a thread count, "inf" and "nan" are all
 * refused).  On failure it prints "<prog>: <opt> '<value>': <the rule>" on
 * stderr, leaves *v unchanged and returns -1; on success it returns 0.
 *
 * Exit codes follow the `tapegrad` command (tools/tools.h): 0 success,
 * 1 the program ran but failed, 2 usage error (unknown option, bad value). */
#ifndef EXAMPLE_ARGS_H
#define EXAMPLE_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <tapegrad/data.h>
#include <tapegrad/nn.h>

#define EX_EXIT_OK 0
#define EX_EXIT_FAIL 1
#define EX_EXIT_USAGE 2

/* True for "--help" and "-h". */
bool ex_arg_is_help(const char *arg);

/* The value of option argv[*i]: argv[*i + 1], advancing *i past it.  NULL
 * after printing "<prog>: option <opt> needs a value" when there is none or
 * it starts with "--" (an option, not a value; a path of that name is
 * written "./--name").  A single dash ("-1") is a value. */
const char *ex_arg_value(const char *prog, int argc, char **argv, int *i);

/* The loop of a program whose options are all "--name value": --help or -h
 * prints usage(stdout) and returns 1; a name not in names[0..n_names) prints
 * "<prog>: unknown option" and returns -1; otherwise apply(o, name, value),
 * which returns -1 after printing what is wrong with the value.  Returns 0
 * when every option was applied. */
int ex_args_parse(const char *prog, int argc, char **argv, const char *const *names,
                  size_t n_names, int (*apply)(void *o, const char *name, const char *value),
                  void *o, void (*usage)(FILE *f));

/* A decimal integer in [lo, hi]. */
int ex_arg_i64(const char *prog, const char *opt, const char *s, int64_t lo, int64_t hi,
               int64_t *v);

/* A decimal integer in [0, 2^64 - 1] (a seed); no sign. */
int ex_arg_u64(const char *prog, const char *opt, const char *s, uint64_t *v);

/* A finite number x with 0 < x <= hi. */
int ex_arg_positive(const char *prog, const char *opt, const char *s, double hi, double *v);

/* dir, the value of option opt, as a folder this program can write in: made
 * (one level) when missing, then probed with a temporary file that is
 * removed again.  Called after every other check of a run, so that a
 * refused run makes nothing else.  -1 after printing "<prog>: <opt> <dir>:
 * <the rule>"; an existing file at dir is left as it was. */
int ex_out_dir(const char *prog, const char *opt, const char *dir);

/* The Fashion-MNIST training (train true) or test set from dir (NULL: the
 * default folder) with pixels in range, checked to hold 1x28x28 images; NULL
 * after printing "<prog>: ..." why (missing, empty, another image size:
 * "--data <dir>: the test images are (1, 14, 14): the model takes (1, 28,
 * 28)"). */
tg_dataset *ex_load_28x28(const char *prog, const char *dir, bool train, tg_pixel_range range);

/* Seconds on the monotonic clock (for progress lines and time limits). */
double ex_now_s(void);

/* Saves m's state dict (PyTorch's names) to "<dir>/<file>"; -1 after
 * printing "<prog>: collecting the weights: ..." or "<prog>: saving the
 * weights to <path>: ...". */
int ex_save_module(const char *prog, const tg_module *m, const char *dir, const char *file);

/* After a tapegrad call failed: prints "<prog>: <what>: <tg_error_message()>"
 * on stderr, what being printf(fmt, ...) - what the program was doing, in
 * the user's words ("reading --weights G.safetensors"), not the C call. */
void ex_fail(const char *prog, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Inside a function with a `done:` label that frees what it owns, in a file
 * whose program name is `prog`: when call fails, ex_fail(prog, ...) (what the
 * program was doing, printf-style) and a jump to done. */
#define EX_TRY(call, ...)                                                         \
    do {                                                                          \
        if ((call) < 0) {                                                         \
            ex_fail(prog, __VA_ARGS__);                                           \
            goto done;                                                            \
        }                                                                         \
    } while (0)

/* In a file whose program name is `prog`: when call fails, ex_fail(prog,
 * ...) (what the program was doing, printf-style) and exit with
 * EX_EXIT_FAIL.  For the small examples' set-up and training loops, which
 * own nothing the exit would lose. */
#define EX_CHECK(call, ...)                                                       \
    do {                                                                          \
        if ((call) < 0) {                                                         \
            ex_fail(prog, __VA_ARGS__);                                           \
            exit(EX_EXIT_FAIL);                                                   \
        }                                                                         \
    } while (0)

#endif
