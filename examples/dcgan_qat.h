/* examples/dcgan_qat.h - quantization-aware fine-tuning of the DCGAN generator
 * (examples/dcgan/model.h) for tg_quantize_model, by distillation.
 *
 * The int8 generator that tg_quantize_model makes folds each BatchNorm into
 * the layer before it, fuses each ReLU, and rounds weights (per output
 * channel, symmetric i8) and activations (per tensor, u8 affine, ranges from
 * calibration) to 8 bits.  dcgan_qat builds that folded float generator
 *
 *   Linear'(nz, C*49) -> Unflatten -> ReLU -> ConvTranspose'(C, C/2) -> ReLU
 *     -> ConvTranspose(C/2, 1) -> Tanh
 *
 * (Linear' and ConvTranspose' from tg_fold_batchnorm) and trains its weights
 * and biases with Adam so that its output, computed with every rounding of
 * the int8 model simulated by fake quantization (straight-through gradient:
 * tg_fake_quantize, tg_fake_quantize_per_channel), matches the float
 * generator's images (mean squared error on fresh latents each step).  The
 * weight scales follow the weights (a per-channel observer on the current
 * weights each step); the activation ranges are those of the folded float
 * model on the calibration batches, held fixed.  tg_quantize_model of the
 * result (calibrated again) gives the fine-tuned int8 generator. */
#ifndef DCGAN_QAT_H
#define DCGAN_QAT_H

#include <stdint.h>

#include <tapegrad/tapegrad.h>

typedef struct dcgan_qat_opts {
    int64_t steps, batch;
    double lr;
    uint64_t seed;
} dcgan_qat_opts;

#define DCGAN_QAT_OPTS_INIT {.steps = 300, .batch = 64, .lr = 1e-4, .seed = 7}

/* *out (new reference) = the folded generator above, fine-tuned from gen (a
 * generator of model.h in eval mode, borrowed and unchanged) with latents of
 * size nz; calib (n_calib batches of latents) sets the activation ranges.
 * *loss_first and *loss_last receive the distillation loss of the first and
 * the last step.  On error *out is untouched and a message is set. */
int dcgan_qat(tg_module **out, double *loss_first, double *loss_last, tg_module *gen,
              int64_t nz, int n_calib, tg_tensor *const *calib, const dcgan_qat_opts *o);

#endif
