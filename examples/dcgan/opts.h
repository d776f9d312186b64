/* examples/dcgan/opts.h - command-line options of the dcgan example. */
#ifndef DCGAN_OPTS_H
#define DCGAN_OPTS_H

#include <stdbool.h>

#include "train.h"

typedef struct app_opts {
    dcgan_opts train;
    int64_t epochs;
    int64_t max_steps;        /* > 0: stop after that many steps in total */
    const char *out;          /* output folder */
    const char *resume;       /* NULL, a path, or "auto" */
    int threads;              /* 0: leave the libraries' defaults */
    const char *data;         /* IDX folder; NULL: Fashion-MNIST */
    int64_t sample;           /* > 0: write that many samples and exit */
    double time_budget;       /* seconds; <= 0: none */
    int log_every;            /* plain progress lines every N steps */
    bool lr_given;
} app_opts;

/* Parses argv into *o (defaults first).  Returns 0 to run, 1 after --help,
 * -1 after printing an error. */
int app_opts_parse(app_opts *o, int argc, char **argv);

#endif
