/* examples/dcgan/model.h - the DCGAN generator and discriminator for 1x28x28
 * images (Fashion-MNIST), with PyTorch's names and layouts.
 *
 * The exact PyTorch equivalent (state-dict keys match one for one; the C side
 * saves them with the prefixes "gen." and "disc."):
 *
 *   class Generator(nn.Module):                   # "gen"
 *       def __init__(self, nz=64, C=128):
 *           super().__init__()
 *           self.net = nn.Sequential(
 *               nn.Linear(nz, C * 7 * 7, bias=False),                # net.0  (N, C*49)
 *               nn.Unflatten(1, (C, 7, 7)),                          # net.1  (N, C, 7, 7)
 *               nn.BatchNorm2d(C),                                   # net.2
 *               nn.ReLU(),                                           # net.3
 *               nn.ConvTranspose2d(C, C // 2, 4, 2, 1, bias=False),  # net.4  (N, C/2, 14, 14)
 *               nn.BatchNorm2d(C // 2),                              # net.5
 *               nn.ReLU(),                                           # net.6
 *               nn.ConvTranspose2d(C // 2, 1, 4, 2, 1),              # net.7  (N, 1, 28, 28)
 *               nn.Tanh())                                           # net.8
 *       def forward(self, z):                     # z (N, nz)
 *           return self.net(z)
 *
 *   class Discriminator(nn.Module):               # "disc"
 *       def __init__(self, D=64, batchnorm=True):
 *           super().__init__()
 *           self.net = nn.Sequential(
 *               nn.Conv2d(1, D, 4, 2, 1),                            # net.0  (N, D, 14, 14)
 *               nn.LeakyReLU(0.2),                                   # net.1
 *               nn.Conv2d(D, 2 * D, 4, 2, 1, bias=not batchnorm),    # net.2  (N, 2D, 7, 7)
 *               nn.BatchNorm2d(2 * D) if batchnorm else nn.Identity(),  # net.3
 *               nn.LeakyReLU(0.2),                                   # net.4
 *               nn.Flatten(),                                        # net.5  (N, 2D*49)
 *               nn.Linear(2 * D * 7 * 7, 1))                         # net.6  (N, 1) logits
 *       def forward(self, x):                     # x (N, 1, 28, 28) in [-1, 1]
 *           return self.net(x)
 *
 *   # spectral_norm=True: after DCGAN's init (below), on both Conv2d layers
 *   for i in (0, 2):
 *       nn.utils.spectral_norm(disc.net[i])      # 1 power iteration, eps 1e-12
 *
 * State-dict keys, generator:  net.0.weight (C*49, nz);
 *   net.2.{weight,bias,running_mean,running_var} (C), net.2.num_batches_tracked;
 *   net.4.weight (C, C/2, 4, 4); net.5.* (C/2); net.7.weight (C/2, 1, 4, 4),
 *   net.7.bias (1).
 * Discriminator:  net.0.weight (D, 1, 4, 4), net.0.bias (D);
 *   net.2.weight (2D, D, 4, 4) [+ net.2.bias (2D) without batchnorm];
 *   net.3.* (2D) with batchnorm; net.6.weight (1, 2D*49), net.6.bias (1).
 *   With spectral_norm, net.0 and net.2 hold weight_orig (their weight's
 *   shape), weight_u (D or 2D) and weight_v (16 or 16D) instead of weight.
 *
 * BatchNorm: eps 1e-5, momentum 0.1 (PyTorch's defaults).  Initialisation is
 * DCGAN's weights_init after construction: tg_nn_init_normal(m, 0, 0.02),
 * i.e. every Linear/Conv/ConvTranspose weight ~ N(0, 0.02), BatchNorm weight
 * ~ N(1, 0.02) and bias 0 (other biases keep PyTorch's default init).
 *
 * The WGAN-GP critic is the discriminator with batchnorm=false: the gradient
 * penalty is per sample, which batch statistics would break (Gulrajani et
 * al. 2017, section 4), so BatchNorm becomes Identity and the conv gets a
 * bias; its output is an unbounded score instead of a logit.
 *
 * spectral_norm (SN-GAN, Miyato et al. 2018): each Conv2d's weight is
 * divided by its largest singular value at every forward
 * (tg_nn_spectral_norm, torch.nn.utils.spectral_norm's defaults: one power
 * iteration, eps 1e-12), applied after the init, as a torch model built
 * and then initialised would have to be.  examples/dcgan's --spectral-norm
 * also drops the BatchNorm (batchnorm=false), as SN-GAN's discriminators
 * have none: the batch statistics would rescale the layer that spectral
 * norm keeps 1-Lipschitz.
 */
#ifndef DCGAN_MODEL_H
#define DCGAN_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "tapegrad/nn.h"

typedef struct dcgan_arch {
    int64_t nz;          /* latent size */
    int64_t g_ch;        /* C: generator channels at 7x7 (even) */
    int64_t d_ch;        /* D: discriminator channels at 14x14 */
    bool d_batchnorm;    /* false for the WGAN-GP critic and with spectral norm */
    bool d_spectral_norm;   /* the discriminator's Conv2d weights spectral-normed */
} dcgan_arch;

#define DCGAN_ARCH_INIT \
    {.nz = 64, .g_ch = 128, .d_ch = 64, .d_batchnorm = true, .d_spectral_norm = false}

/* The largest nz, g_ch and d_ch accepted: far beyond what trains on 28x28,
 * and small enough that no layer size overflows. */
#define DCGAN_MAX_WIDTH 65536

/* TG_OK when a is an architecture the builders accept (nz, d_ch in
 * [1, DCGAN_MAX_WIDTH], g_ch even in [2, DCGAN_MAX_WIDTH]); otherwise
 * TG_EINVAL with a message naming the value (tg_error_message). */
int dcgan_arch_check(const dcgan_arch *a);

/* The generator architecture that a weight file describes: its first
 * Linear's weight w0 (named key in the messages) is (C*49, nz), so a->g_ch =
 * C and a->nz = nz (the discriminator's fields are left as they are).
 * TG_ENOTFOUND when w0 is NULL, TG_ESHAPE when its shape is not such, or
 * dcgan_arch_check's TG_EINVAL; each with a message (tg_error_message). */
int dcgan_arch_from_generator_weight(dcgan_arch *a, const tg_tensor *w0, const char *key);

/* *z = (n, nz) f32 samples of N(0, 1) from rng (a new tensor): latents for
 * the generator.  On error *z is untouched. */
int dcgan_latents(tg_tensor **z, int64_t n, int64_t nz, tg_rng *rng);

/* Builds the generator / discriminator above (new reference in *out), with
 * weights drawn from rng: PyTorch's default init, then DCGAN's N(0, 0.02).
 * TG_EINVAL for a bad architecture (dcgan_arch_check); on error *out is
 * untouched. */
int dcgan_generator_new(tg_module **out, const dcgan_arch *a, tg_rng *rng);
int dcgan_discriminator_new(tg_module **out, const dcgan_arch *a, tg_rng *rng);

#endif
