/* examples/dcgan/opts.h - command-line options of the dcgan example. */
#ifndef DCGAN_OPTS_H
#define DCGAN_OPTS_H

#include <stdbool.h>

#include "train.h"

/* The options that a checkpoint records (dcgan_opts_to_meta): a resumed or
 * sampled run takes them from the checkpoint, so giving one that differs is
 * an error (app_opts_check_checkpoint). */
typedef enum owned_opt {
    OWN_BATCH, OWN_SEED, OWN_LR, OWN_NZ, OWN_G_CH, OWN_D_CH, OWN_LOSS, OWN_AMP, OWN_EMA,
    OWN_SPECTRAL_NORM, OWN_COUNT
} owned_opt;

typedef struct app_opts {
    dcgan_opts train;
    int64_t epochs;
    int64_t max_steps;        /* > 0: stop after that many steps in total */
    const char *out;          /* output folder */
    const char *resume;       /* NULL, a path, or "auto" */
    int threads;              /* 0: leave the libraries' defaults */
    const char *data;         /* IDX folder; NULL: Fashion-MNIST */
    const char *images;       /* PNG folder (ImageFolder layout) instead of IDX; or NULL */
    double hflip;             /* probability of a left-right flip per training image */
    int64_t sample;           /* > 0: write that many samples and exit */
    const char *export_onnx;  /* NULL, or where to write the generator as ONNX */
    double time_budget;       /* seconds; 0: none */
    double snapshot_every;    /* seconds; 0: no generator snapshots */
    bool overwrite;           /* start over even if --out holds a checkpoint */
    bool ddp;                 /* data-parallel over the ranks of mpirun */
    int log_every;            /* plain progress lines every N steps */
    bool lr_given;
    const char *owned[OWN_COUNT];   /* the value given on the command line, or NULL */
} app_opts;

/* Parses argv into *o (defaults first).  Returns 0 to run, 1 after --help,
 * -1 after printing an error. */
int app_opts_parse(app_opts *o, int argc, char **argv);

/* For --resume and --sample: 0 when every checkpoint-owned option given on the
 * command line matches ck, the checkpoint's options; otherwise prints which
 * one differs and returns -1. */
int app_opts_check_checkpoint(const app_opts *o, const dcgan_opts *ck);

#endif
