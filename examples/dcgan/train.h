/* examples/dcgan/train.h - one DCGAN training run: models, optimizers, data
 * order, noise and the checkpoint slots that make it resumable bit for bit.
 *
 * Everything that changes while training lives in the trainer and is a
 * checkpoint slot: both modules (parameters and BatchNorm running stats) and
 * the generator's EMA when there is one, both
 * Adam states, the grad scalers (f16 AMP), the loader position, the noise RNG
 * and the step counter.  Two runs with the same options and thread count
 * therefore produce the same losses, also when one of them was stopped,
 * saved and resumed in a new process. */
#ifndef DCGAN_TRAIN_H
#define DCGAN_TRAIN_H

#include <stdbool.h>
#include <stdint.h>

#include "model.h"
#include "tapegrad/tapegrad.h"
#include "tapegrad/checkpoint.h"
#include "tapegrad/dist.h"

typedef enum dcgan_loss {
    DCGAN_LOSS_BCE = 0,   /* non-saturating GAN loss (Goodfellow 2014, DCGAN) */
    DCGAN_LOSS_WGAN_GP,   /* Wasserstein loss + gradient penalty (Gulrajani 2017) */
} dcgan_loss;

typedef struct dcgan_opts {
    dcgan_arch arch;
    dcgan_loss loss;
    int64_t batch;
    double lr, beta1, beta2;
    uint64_t seed;
    int n_critic;        /* WGAN-GP: critic steps per generator step */
    double gp_lambda;    /* WGAN-GP: penalty weight */
    tg_dtype amp;        /* TG_F32: off; TG_BF16 / TG_F16: autocast forwards */
    tg_dist *dist;       /* data-parallel over its ranks (borrowed; not saved); NULL:
                          * one process.  batch is then the whole job's, each rank
                          * training on batch / size of it */
    bool sync_bn;        /* with dist: BatchNorm statistics over the whole job's
                          * batch (tg_dist_convert_sync_batchnorm; not saved) */
    tg_dtype ddp_compress; /* with dist: the dtype the gradients are all-reduced
                            * in (tg_ddp_opts.compress; TG_F32: not compressed;
                            * not saved) */
    bool zero;           /* with dist: each Adam's state sharded over the ranks
                          * (tg_zero; not saved: the checkpoint holds the whole
                          * state, consolidated on rank 0) */
    double ema;          /* in (0, 1): keep an exponential moving average of the
                          * generator with this decay (tg_averaged_model_new, its
                          * buffers averaged too), which draws the samples; 0: none */
} dcgan_opts;

#define DCGAN_OPTS_INIT                                                       \
    {.arch = DCGAN_ARCH_INIT, .loss = DCGAN_LOSS_BCE, .batch = 32, .lr = 4e-4,  \
     .beta1 = 0.5, .beta2 = 0.999, .seed = 0, .n_critic = 5, .gp_lambda = 10.0, \
     .amp = TG_F32, .ema = 0.0, .ddp_compress = TG_F32}

typedef struct dcgan_trainer {
    dcgan_opts o;
    tg_module *gen, *disc;
    tg_module *gen_ema;            /* the EMA of gen (o.ema > 0), updated after each
                                    * step and kept in eval mode; else NULL */
    tg_optimizer *opt_g, *opt_d;   /* NULL with o.zero */
    tg_zero *zero_g, *zero_d;      /* o.zero: the optimizers, sharded over the ranks */
    tg_grad_scaler *gs_g, *gs_d;   /* NULL unless amp == TG_F16 */
    tg_dataset *ds;
    tg_loader *ld;
    tg_rng rng;                    /* latents and WGAN-GP interpolation weights */
    int64_t step;                  /* batches trained on so far */
    double last_g_loss;            /* WGAN-GP: the generator's last loss */
    tg_tensor **d_params;
    int n_d;
    tg_checkpoint *ck;             /* slots over all of the above */
    tg_ddp *ddp_g, *ddp_d;         /* gradient averaging with o.dist, else NULL */
} dcgan_trainer;

/* A new run over ds (retained) at step 0: models initialised from o->seed,
 * the loader shuffled with o->seed.  Returns a negative tg_status on error.
 * With o->dist: collective (an error on one rank is returned by every
 * rank); every rank starts from rank 0's models, its
 * loader hands out its shard of each batch, and latents are drawn for the
 * whole batch on every rank (the same RNG stream), each rank taking its
 * rows, so the noise is the single-process run's.  With o->sync_bn as
 * well, the BatchNorms are converted to SyncBatchNorms after the init, and
 * each step is the single-process step on the whole batch (within f32
 * rounding). */
int dcgan_trainer_new(dcgan_trainer **out, const dcgan_opts *o, tg_dataset *ds);
/* With o.zero, the checkpoint's optimizer state, which no slot of t->ck
 * holds then: the two optimizers' whole states ("opt_g.*", "opt_d.*", the
 * keys of the unsharded run's slots) gathered into extra on rank 0 (other
 * ranks' extra is not touched), and loaded from a checkpoint file f on
 * every rank.  Without o.zero both do nothing.  Collective. */
int dcgan_trainer_save_optimizers(dcgan_trainer *t, tg_st_file *extra);
int dcgan_trainer_load_optimizers(dcgan_trainer *t, const tg_st_file *f);
void dcgan_trainer_free(dcgan_trainer *t);

/* Trains on the next batch: returns 1 with the losses of that step, 0 when
 * the epoch is over (then call dcgan_trainer_next_epoch), or a negative
 * status.  With o.dist: collective, and an error on any rank is returned
 * by every rank (with o.sync_bn, one before a gradient reduction ends the
 * job instead: tg_dist_abort). */
int dcgan_trainer_step(dcgan_trainer *t, double *d_loss, double *g_loss);
int dcgan_trainer_next_epoch(dcgan_trainer *t);
/* The epoch the loader is in (0-based). */
int64_t dcgan_trainer_epoch(const dcgan_trainer *t);

/* Generator images (N, 1, 28, 28) in [-1, 1] for latents z (N, nz), in eval
 * mode (BatchNorm running statistics), without recording; *images is new.
 * ema: from the generator's EMA when there is one (the sample grids), else
 * from the generator itself (the interchange files). */
int dcgan_trainer_generate(dcgan_trainer *t, tg_tensor **images, tg_tensor *z, bool ema);

/* The options as checkpoint metadata (must match on load) and back. */
int dcgan_opts_to_meta(const dcgan_opts *o, tg_checkpoint *ck);
int dcgan_opts_from_meta(dcgan_opts *o, const tg_st_file *f);

/* The checkpoint metadata key that records the training set's size
 * ("images=N"), so that a resume on other data is refused. */
#define DCGAN_DATA_META "dcgan.data"

#endif
