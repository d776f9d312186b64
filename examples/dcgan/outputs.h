/* examples/dcgan/outputs.h - what the dcgan example writes under out/. */
#ifndef DCGAN_OUTPUTS_H
#define DCGAN_OUTPUTS_H

#include <stdint.h>

#include "train.h"

/* The loss of every step since step 0 (kept in the checkpoint, so a resumed
 * run plots its whole history). */
typedef struct history {
    double *d, *g;
    int64_t *epoch;
    int64_t n, cap;
} history;

int history_push(history *h, int64_t epoch, double d, double g);
void history_free(history *h);
/* Adds "history.d_loss", "history.g_loss" (f64 (n)) and "history.epoch"
 * (i64 (n)) to f. */
int history_save(const history *h, tg_st_file *f);
/* Reads them back, keeping the first `steps` entries (the checkpoint's step). */
int history_load(history *h, const tg_st_file *f, int64_t steps);

/* DIR/NAME into buf; returns buf. */
char *out_path(char *buf, size_t cap, const char *dir, const char *name);
/* loss.csv (step, epoch, d_loss, g_loss) and loss.png, both replaced. */
int write_losses(const char *dir, const history *h);
/* A grid of generator samples for latents z (8 per row), from the
 * generator's EMA when there is one. */
int write_samples(dcgan_trainer *t, tg_tensor *z, const char *path);
/* generator.safetensors (state dict, prefix "gen") and latents.safetensors
 * {"z", "images"} for examples/dcgan_torch.py; with --ema also
 * generator_ema.safetensors, the EMA's state dict with the keys of torch's
 * AveragedModel ("n_averaged", "module.net.0.weight", ...). */
int write_interchange(dcgan_trainer *t, tg_tensor *z, const char *dir);

#endif
