/* examples/dcgan/train.c - the DCGAN training step (BCE and WGAN-GP). */
#include "train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TRY(expr)                                                             \
    do {                                                                      \
        int rc_ = (expr);                                                     \
        if (rc_ < 0) return rc_;                                              \
    } while (0)

/* ---- construction ----------------------------------------------------------- */

static tg_adam_opts adam_opts(const dcgan_opts *o)
{
    tg_adam_opts a = TG_ADAM_OPTS_INIT;
    a.lr = o->lr;
    a.beta1 = o->beta1;
    a.beta2 = o->beta2;
    return a;
}

static int make_adam(tg_optimizer **out, tg_module *m, const dcgan_opts *o)
{
    const tg_adam_opts a = adam_opts(o);
    return tg_adam_from_module(out, m, &a);
}

/* --zero's make: Adam over one rank's share of the parameters. */
static int zero_make_adam(tg_optimizer **out, int n, tg_tensor *const *p, const void *opts)
{
    return tg_adam_new(out, n, p, opts);
}

/* A ZeRO Adam over m's parameters.  Collective. */
static int zero_adam(tg_zero **out, tg_module *m, const dcgan_opts *o)
{
    const tg_adam_opts a = adam_opts(o);
    tg_tensor **p = NULL;
    int n = 0;
    int rc = tg_module_parameters(m, &p, &n);
    rc = tg_dist_agree(o->dist, rc);
    if (rc >= 0) rc = tg_zero_new(out, o->dist, n, p, zero_make_adam, &a);
    free(p);
    return rc;
}

static int register_slots(dcgan_trainer *t)
{
    tg_checkpoint *ck = t->ck;
    TRY(tg_checkpoint_add_module(ck, "gen", t->gen));
    TRY(tg_checkpoint_add_module(ck, "disc", t->disc));
    if (t->gen_ema) TRY(tg_checkpoint_add_module(ck, "gen_ema", t->gen_ema));
    if (t->opt_g) TRY(tg_checkpoint_add_optimizer(ck, "opt_g", t->opt_g));
    if (t->opt_d) TRY(tg_checkpoint_add_optimizer(ck, "opt_d", t->opt_d));
    if (t->gs_g) TRY(tg_checkpoint_add_grad_scaler(ck, "scaler_g", t->gs_g));
    if (t->gs_d) TRY(tg_checkpoint_add_grad_scaler(ck, "scaler_d", t->gs_d));
    TRY(tg_checkpoint_add_loader(ck, "loader", t->ld));
    TRY(tg_checkpoint_add_rng(ck, "rng", &t->rng));
    TRY(tg_checkpoint_add_i64(ck, "step", &t->step));
    /* not must-match: older checkpoints lack it; main.c compares it */
    char data[64];
    snprintf(data, sizeof data, "images=%lld", (long long)tg_dataset_size(t->ds));
    TRY(tg_checkpoint_set_meta(ck, DCGAN_DATA_META, data, false));
    return dcgan_opts_to_meta(&t->o, ck);
}

/* Rank 0's models everywhere and gradient averaging for both models'
 * parameters; each step ends with rank 0's BatchNorm running statistics on
 * every rank (PyTorch DDP's broadcast_buffers); the gradients sent in
 * --ddp-compress's dtype.  Collective. */
static int distribute(dcgan_trainer *t)
{
    tg_ddp_opts o = TG_DDP_OPTS_INIT;
    o.compress = t->o.ddp_compress;
    TRY(tg_ddp_new_module(&t->ddp_g, t->o.dist, t->gen, &o));
    TRY(tg_ddp_new_module(&t->ddp_d, t->o.dist, t->disc, &o));
    if (!t->o.zero) return TG_OK;
    /* after DDP's broadcast: the partition needs only the shapes, but the
     * owners update rank 0's weights from here on */
    TRY(zero_adam(&t->zero_g, t->gen, &t->o));
    return zero_adam(&t->zero_d, t->disc, &t->o);
}

int dcgan_trainer_save_optimizers(dcgan_trainer *t, tg_st_file *extra)
{
    if (!t->zero_g) return TG_OK;
    const bool root = tg_dist_rank(t->o.dist) == 0;
    TRY(tg_zero_consolidate_state_dict(t->zero_g, 0, root ? extra : NULL, "opt_g"));
    return tg_zero_consolidate_state_dict(t->zero_d, 0, root ? extra : NULL, "opt_d");
}

int dcgan_trainer_load_optimizers(dcgan_trainer *t, const tg_st_file *f)
{
    if (!t->zero_g) return TG_OK;
    TRY(tg_zero_state_load(t->zero_g, f, "opt_g"));
    return tg_zero_state_load(t->zero_d, f, "opt_d");
}

/* This rank's models, optimizers and loader (its shard of the data with
 * --ddp); no messages. */
static int build(dcgan_trainer *t)
{
    const dcgan_opts *o = &t->o;
    tg_rng_init(&t->rng, o->seed);
    TRY(dcgan_generator_new(&t->gen, &o->arch, &t->rng));
    TRY(dcgan_discriminator_new(&t->disc, &o->arch, &t->rng));
    if (o->ema > 0) {
        /* a copy of the plain generator: with --sync-bn its BatchNorms stay
         * local (they have SyncBatchNorm's state dict, so the updates match),
         * and the samples it draws on rank 0 alone wait for no other rank */
        TRY(tg_averaged_model_new(&t->gen_ema, t->gen, o->ema, true));
        tg_module_train(t->gen_ema, false);
    }
    if (o->dist && o->sync_bn) {   /* after the init, as convert_sync_batchnorm */
        TRY(tg_dist_convert_sync_batchnorm(o->dist, t->gen, NULL));
        TRY(tg_dist_convert_sync_batchnorm(o->dist, t->disc, NULL));
    }
    if (o->amp != TG_F32) {
        /* f32 master weights, half compute: each layer casts its weights to
         * the autocast dtype (ConvTranspose is PROMOTE, so without this the
         * generator's f32 weights would keep everything after its first
         * ConvTranspose in f32). */
        tg_module_autocast_weights(t->gen, true);
        tg_module_autocast_weights(t->disc, true);
    }
    if (!(o->dist && o->zero)) {   /* --zero: distribute makes them */
        TRY(make_adam(&t->opt_g, t->gen, o));
        TRY(make_adam(&t->opt_d, t->disc, o));
    }
    TRY(tg_module_parameters(t->disc, &t->d_params, &t->n_d));
    if (o->amp == TG_F16) {
        TRY(tg_grad_scaler_new(&t->gs_g, NULL));
        TRY(tg_grad_scaler_new(&t->gs_d, NULL));
    }
    const int world = tg_dist_size(o->dist);
    tg_loader_options lo = {.batch_size = o->batch / world, .shuffle = true, .seed = o->seed,
                            .drop_last = true};
    TRY(tg_loader_new(&t->ld, t->ds, &lo));
    if (o->dist) TRY(tg_loader_set_shard(t->ld, tg_dist_rank(o->dist), world));
    return TG_OK;
}

/* The options and the data set, as this rank sees them. */
static int check_opts(const dcgan_opts *o, tg_dataset *ds)
{
    if (o->batch < 1 || o->n_critic < 1)
        return tg_error_set(TG_EINVAL, "dcgan: batch=%lld and n_critic=%d must be >= 1",
                            (long long)o->batch, o->n_critic);
    if (o->zero && !o->dist)
        return tg_error_set(TG_EINVAL, "dcgan: zero shards the optimizers over dist's ranks: "
                            "give both");
    if (o->dist && o->batch % tg_dist_size(o->dist) != 0)
        return tg_error_set(TG_EINVAL, "dcgan: batch=%lld must be a multiple of the %d ranks",
                            (long long)o->batch, tg_dist_size(o->dist));
    if (o->amp != TG_F32 && o->amp != TG_BF16 && o->amp != TG_F16)
        return tg_error_set(TG_EINVAL, "dcgan: amp must be f32, bf16 or f16, not %s",
                            tg_dtype_name(o->amp));
    if (!(o->lr > 0) || !isfinite(o->lr))
        return tg_error_set(TG_EINVAL, "dcgan: lr=%g must be finite and > 0", o->lr);
    if (!(o->ema >= 0 && o->ema < 1))
        return tg_error_set(TG_EINVAL, "dcgan: ema=%g must be in [0, 1) (0: none)", o->ema);
    int64_t shape[3];
    tg_dataset_image_shape(ds, shape);
    if (shape[0] != 1 || shape[1] != 28 || shape[2] != 28)
        return tg_error_set(TG_EINVAL, "dcgan: the data set's images are %lldx%lldx%lld; the "
                            "model takes 1x28x28 (Fashion-MNIST, MNIST)", (long long)shape[0],
                            (long long)shape[1], (long long)shape[2]);
    return TG_OK;
}

int dcgan_trainer_new(dcgan_trainer **out, const dcgan_opts *o, tg_dataset *ds)
{
    if (!out || !o || !ds) return tg_error_set(TG_EINVAL, "dcgan: out, o and ds must be set");
    int rc = check_opts(o, ds);
    dcgan_trainer *t = rc >= 0 ? calloc(1, sizeof *t) : NULL;
    if (rc >= 0 && !t) rc = tg_error_set(TG_ENOMEM, "dcgan: out of memory");
    if (t) {
        t->o = *o;
        t->ds = tg_dataset_retain(ds);
        rc = build(t);
    }
    /* distribute is collective: every rank reaches it, or none does (and
     * all return the same error) */
    if (o->dist) rc = tg_dist_agree(o->dist, rc);
    if (rc >= 0 && o->dist) rc = distribute(t);
    if (rc >= 0) rc = tg_checkpoint_new(&t->ck);
    if (rc >= 0) rc = register_slots(t);
    if (rc < 0) {
        dcgan_trainer_free(t);
        return rc;
    }
    *out = t;
    return TG_OK;
}

void dcgan_trainer_free(dcgan_trainer *t)
{
    if (!t) return;
    tg_ddp_free(t->ddp_g);
    tg_ddp_free(t->ddp_d);
    tg_checkpoint_free(t->ck);
    tg_loader_free(t->ld);
    tg_dataset_release(t->ds);
    tg_grad_scaler_free(t->gs_g);
    tg_grad_scaler_free(t->gs_d);
    tg_optimizer_free(t->opt_g);
    tg_optimizer_free(t->opt_d);
    tg_zero_free(t->zero_g);
    tg_zero_free(t->zero_d);
    free(t->d_params);
    tg_module_release(t->gen);
    tg_module_release(t->gen_ema);
    tg_module_release(t->disc);
    free(t);
}

int64_t dcgan_trainer_epoch(const dcgan_trainer *t)
{
    int64_t e, i;
    tg_loader_position(t->ld, &e, &i);
    return e;
}

int dcgan_trainer_next_epoch(dcgan_trainer *t)
{
    return tg_loader_reset(t->ld, dcgan_trainer_epoch(t) + 1);
}

/* ---- pieces of a step ------------------------------------------------------- */

/* Each step runs in a scope (tapegrad/scope.h), which owns what the ops hand
 * out; a tensor made by tensor.h joins it here.  Returns rc. */
static int own(tg_tensor **slot, int rc)
{
    if (rc >= 0 && !tg_scope_add(*slot)) return TG_ENOMEM;
    return rc;
}

/* Forward of m under the run's autocast policy. */
static int forward(const dcgan_trainer *t, tg_module *m, tg_tensor **y, tg_tensor *x)
{
    if (t->o.amp == TG_F32) return tg_module_forward(m, y, x);
    TRY(tg_autocast_begin(t->o.amp));
    int rc = tg_module_forward(m, y, x);
    tg_autocast_end();
    return rc;
}

typedef struct step_ctx {
    tg_optimizer *opt;
    tg_zero *zero;        /* --zero: the optimizer instead of opt */
    tg_grad_scaler *gs;   /* NULL: plain backward + step */
    tg_module *m;
    tg_ddp *ddp;          /* NULL: one process */
    tg_dist *dist;        /* the ddp's */
    bool sync_bn;         /* the forwards and backwards talk to the other ranks */
} step_ctx;

static step_ctx ctx_of(const dcgan_trainer *t, bool gen)
{
    return (step_ctx){.opt = gen ? t->opt_g : t->opt_d, .zero = gen ? t->zero_g : t->zero_d,
                      .gs = gen ? t->gs_g : t->gs_d,
                      .m = gen ? t->gen : t->disc, .ddp = gen ? t->ddp_g : t->ddp_d,
                      .dist = t->o.dist, .sync_bn = t->o.dist && t->o.sync_bn};
}

/* With --ddp, each update's gradient reduction (tg_ddp_finish) is where the
 * ranks meet.  A rank whose part of the step failed before it (rc < 0: the
 * loader, a forward, the loss, an optimizer step) comes to the reduction
 * anyway and ends it with tg_ddp_cancel, so every rank's finish returns
 * that error and every rank leaves the step there.  Not with --sync-bn:
 * the others may then be waiting in a SyncBatchNorm all-reduce of a forward
 * or backward this rank skipped, which no call here can answer, so the job
 * ends (tg_dist_abort prints the error). */
static int cancel(const step_ctx *s, int rc)
{
    if (!s->ddp) return rc;
    if (s->sync_bn) tg_dist_abort(s->dist, rc);
    return tg_ddp_cancel(s->ddp, rc);
}

/* zero_grad and backward of loss (scaled for f16), with a ddp the gradients
 * averaged over the ranks (reduced while the backward runs); rc: this
 * rank's status before it.  With a ddp an error is every rank's. */
static int reduce(const step_ctx *s, tg_tensor *loss, int rc)
{
    if (rc < 0) return cancel(s, rc);
    if (s->zero) tg_zero_zero_grad(s->zero);
    else tg_optimizer_zero_grad(s->opt);
    tg_tensor *scaled = loss;
    if (s->gs) rc = tg_grad_scaler_scale(s->gs, &scaled, loss);
    if (rc >= 0 && s->ddp) rc = tg_ddp_prepare(s->ddp);
    if (rc >= 0) rc = tg_backward(scaled, NULL, NULL);
    if (s->ddp) rc = rc < 0 ? cancel(s, rc) : tg_ddp_finish(s->ddp);
    return rc;
}

static int opt_step_cb(void *user)
{
    return tg_optimizer_step(user);
}

/* --zero's step: collective, but every rank takes it or none, as the
 * reduced gradients (all finite or not) are the same on every rank. */
static int zero_step_cb(void *user)
{
    return tg_zero_step(user);
}

/* The optimizer step on the reduced gradients (through the scaler for
 * f16).  Its errors are this rank's alone; with --zero every rank's. */
static int optimize(const step_ctx *s)
{
    if (!s->gs) return s->zero ? tg_zero_step(s->zero) : tg_optimizer_step(s->opt);
    tg_tensor **p = NULL;
    int n = 0;
    int rc = tg_module_parameters(s->m, &p, &n);
    if (rc >= 0 && s->zero) rc = tg_grad_scaler_step(s->gs, n, p, zero_step_cb, s->zero, NULL);
    else if (rc >= 0) rc = tg_grad_scaler_step(s->gs, n, p, opt_step_cb, s->opt, NULL);
    if (rc >= 0) rc = tg_grad_scaler_update(s->gs);
    free(p);
    return rc;
}

/* Freezes (or thaws) the discriminator's parameters, so that the generator's
 * backward through D computes no weight gradients for D. */
static int set_disc_trainable(dcgan_trainer *t, bool on)
{
    for (int i = 0; i < t->n_d; i++) TRY(tg_tensor_set_requires_grad(t->d_params[i], on));
    return TG_OK;
}

/* Noise of shape (n, rest...) for this rank: the whole job's n * size rows
 * are drawn (so the RNG advances alike on every rank, and as one process
 * with the whole batch draws), and this rank keeps its own n rows. */
static int draw(dcgan_trainer *t, tg_tensor **out, int ndim, const int64_t *shape,
                bool normal)
{
    const int world = tg_dist_size(t->o.dist), rank = tg_dist_rank(t->o.dist);
    int64_t all_shape[4];
    memcpy(all_shape, shape, sizeof(int64_t) * (size_t)ndim);
    all_shape[0] *= world;
    tg_tensor *all = NULL, *mine = NULL;
    TRY(own(&all, tg_tensor_zeros(&all, TG_F32, ndim, all_shape)));
    TRY(normal ? tg_tensor_rand_normal(all, &t->rng, 0.0, 1.0)
               : tg_tensor_rand_uniform(all, &t->rng, 0.0, 1.0));
    if (world == 1) {
        *out = all;
        return TG_OK;
    }
    TRY(tg_slice(&mine, all, 0, rank * shape[0], (rank + 1) * shape[0], 1));
    return tg_contiguous(out, mine);
}

static int latents(dcgan_trainer *t, tg_tensor **z, int64_t n)
{
    const int64_t shape[2] = {n, t->o.arch.nz};
    return draw(t, z, 2, shape, true);
}

/* The generator's loss against D: bce(D(fake), 1) (non-saturating) or
 * -mean(D(fake)) (WGAN).  D's parameters are frozen meanwhile. */
static int generator_loss(dcgan_trainer *t, tg_tensor *fake, tg_tensor **loss)
{
    tg_tensor *out = NULL, *ones = NULL, *m = NULL;
    TRY(set_disc_trainable(t, false));
    int rc = forward(t, t->disc, &out, fake);
    if (rc >= 0 && t->o.loss == DCGAN_LOSS_BCE) {
        rc = own(&ones, tg_tensor_full(&ones, TG_F32, 2, tg_tensor_shape(out), 1.0));
        if (rc >= 0) rc = tg_bce_with_logits(loss, out, ones, TG_REDUCTION_MEAN);
    } else if (rc >= 0) {
        rc = tg_mean(&m, out);
        if (rc >= 0) rc = tg_neg(loss, m);
    }
    int rc2 = set_disc_trainable(t, true);
    return rc < 0 ? rc : rc2;
}

/* The generator's update; rc: this rank's status before it (an error goes
 * to the reduction, see cancel).  The returned error is every rank's when
 * it came from the reduction, else this rank's. */
static int generator_update(dcgan_trainer *t, tg_tensor *fake, int rc, double *g_loss)
{
    tg_tensor *loss = NULL;
    if (rc >= 0) rc = generator_loss(t, fake, &loss);
    const step_ctx s = ctx_of(t, true);
    TRY(reduce(&s, loss, rc));
    *g_loss = tg_tensor_item(loss);
    return optimize(&s);
}

/* ---- BCE ------------------------------------------------------------------- */

/* The discriminator's loss bce(D(x), 1) + bce(D(G(z)), 0); *fake = G(z),
 * recorded, for the generator's update. */
static int bce_disc_loss(dcgan_trainer *t, tg_tensor *x, tg_tensor **fake, tg_tensor **loss)
{
    const int64_t B = tg_tensor_dim(x, 0);
    tg_tensor *z, *fake_d = NULL, *d_real = NULL, *d_fake = NULL;
    tg_tensor *ones = NULL, *zeros = NULL, *l_real = NULL, *l_fake = NULL;
    TRY(latents(t, &z, B));
    TRY(forward(t, t->gen, fake, z));     /* recorded: reused by the G update */
    TRY(own(&fake_d, tg_tensor_detach(&fake_d, *fake)));
    TRY(forward(t, t->disc, &d_real, x));
    TRY(forward(t, t->disc, &d_fake, fake_d));
    const int64_t shape[2] = {B, 1};
    TRY(own(&ones, tg_tensor_full(&ones, TG_F32, 2, shape, 1.0)));
    TRY(own(&zeros, tg_tensor_zeros(&zeros, TG_F32, 2, shape)));
    TRY(tg_bce_with_logits(&l_real, d_real, ones, TG_REDUCTION_MEAN));
    TRY(tg_bce_with_logits(&l_fake, d_fake, zeros, TG_REDUCTION_MEAN));
    return tg_add(loss, l_real, l_fake);
}

/* rc: this rank's status before the step (the loader's); x is NULL when it
 * failed. */
static int bce_step(dcgan_trainer *t, tg_tensor *x, int rc, double *d_loss, double *g_loss)
{
    tg_tensor *fake = NULL, *loss = NULL;
    if (rc >= 0) rc = bce_disc_loss(t, x, &fake, &loss);
    const step_ctx s = ctx_of(t, false);
    TRY(reduce(&s, loss, rc));
    *d_loss = tg_tensor_item(loss);
    return generator_update(t, fake, optimize(&s), g_loss);
}

/* ---- WGAN-GP ---------------------------------------------------------------- */

/* lambda * mean_n (||d critic(xhat_n) / d xhat_n||_2 - 1)^2 with
 * xhat = eps * real + (1 - eps) * fake, eps ~ U[0, 1) per sample.  The
 * gradient is taken with create_graph so the penalty is differentiable in
 * the critic's weights (a second derivative through the critic). */
static int gradient_penalty(dcgan_trainer *t, tg_tensor *x, tg_tensor *fake, tg_tensor **gp)
{
    const int64_t B = tg_tensor_dim(x, 0), eshape[4] = {B, 1, 1, 1};
    tg_tensor *eps = NULL, *dx = NULL, *edx = NULL, *mix = NULL, *xhat = NULL, *c = NULL;
    tg_tensor *g = NULL, *norm = NULL, *dev = NULL, *dev2 = NULL, *mean = NULL;
    TRY(draw(t, &eps, 4, eshape, false));
    /* xhat = fake + eps * (x - fake), a fresh leaf that requires grad */
    TRY(tg_sub(&dx, x, fake));
    TRY(tg_mul(&edx, eps, dx));
    TRY(tg_add(&mix, fake, edx));
    TRY(own(&xhat, tg_tensor_detach(&xhat, mix)));
    TRY(tg_tensor_set_requires_grad(xhat, true));
    TRY(forward(t, t->disc, &c, xhat));
    tg_backward_opts bo = {.retain_graph = true, .create_graph = true};
    tg_tensor *ones = NULL;
    TRY(own(&ones, tg_tensor_full(&ones, tg_tensor_dtype(c), 2, tg_tensor_shape(c), 1.0)));
    TRY(tg_grad(&g, 1, &c, &ones, 1, &xhat, &bo));
    const int dims[3] = {1, 2, 3};
    TRY(tg_vector_norm(&norm, g, 2.0, 3, dims, false));   /* its gradient at 0 is 0 */
    TRY(tg_sub_scalar(&dev, norm, 1.0));
    TRY(tg_mul(&dev2, dev, dev));
    TRY(tg_mean(&mean, dev2));
    return tg_mul_scalar(gp, mean, t->o.gp_lambda);
}

/* The critic's loss mean(C(G(z))) - mean(C(x)) + the gradient penalty. */
static int wgan_critic_loss(dcgan_trainer *t, tg_tensor *x, tg_tensor **loss)
{
    const int64_t B = tg_tensor_dim(x, 0);
    tg_tensor *z, *fake = NULL, *c_real = NULL, *c_fake = NULL, *m_real = NULL;
    tg_tensor *m_fake = NULL, *w = NULL, *gp = NULL;
    TRY(latents(t, &z, B));
    bool prev = tg_set_grad_enabled(false);
    int rc = forward(t, t->gen, &fake, z);
    tg_set_grad_enabled(prev);
    TRY(rc);
    TRY(forward(t, t->disc, &c_real, x));
    TRY(forward(t, t->disc, &c_fake, fake));
    TRY(tg_mean(&m_real, c_real));
    TRY(tg_mean(&m_fake, c_fake));
    TRY(tg_sub(&w, m_fake, m_real));   /* -(Wasserstein estimate) */
    TRY(gradient_penalty(t, x, fake, &gp));
    return tg_add(loss, w, gp);
}

/* rc, x: as bce_step's. */
static int wgan_step(dcgan_trainer *t, tg_tensor *x, int rc, double *d_loss, double *g_loss)
{
    tg_tensor *loss = NULL;
    if (rc >= 0) rc = wgan_critic_loss(t, x, &loss);
    const step_ctx s = ctx_of(t, false);
    TRY(reduce(&s, loss, rc));
    *d_loss = tg_tensor_item(loss);
    rc = optimize(&s);
    if ((t->step + 1) % t->o.n_critic == 0) {   /* alike on every rank */
        tg_tensor *z2 = NULL, *fake2 = NULL;
        if (rc >= 0) rc = latents(t, &z2, tg_tensor_dim(x, 0));
        if (rc >= 0) rc = forward(t, t->gen, &fake2, z2);
        rc = generator_update(t, fake2, rc, &t->last_g_loss);
    }
    *g_loss = t->last_g_loss;
    return rc;
}

int dcgan_trainer_step(dcgan_trainer *t, double *d_loss, double *g_loss)
{
    tg_tensor *x = NULL, *labels = NULL;
    int rc = tg_loader_next(t->ld, &x, &labels);
    if (rc == 0) return 0;   /* the epoch is over, on every rank alike */
    tg_tensor_release(labels);   /* a GAN learns from the images alone */
    const bool scoped = rc > 0 && (rc = tg_scope_begin()) >= 0;
    rc = t->o.loss == DCGAN_LOSS_BCE ? bce_step(t, x, rc, d_loss, g_loss)
                                     : wgan_step(t, x, rc, d_loss, g_loss);
    if (scoped) tg_scope_end();
    tg_tensor_release(x);
    /* an error after the step's last reduction is this rank's alone: agreed
     * on here, so that every rank returns it (one that every rank returns
     * already is kept as it is) */
    if (t->o.dist) rc = tg_dist_agree(t->o.dist, rc);
    if (rc < 0) return rc;
    /* every rank's generator is the same after the step: so are the EMAs */
    if (t->gen_ema) TRY(tg_averaged_model_update(t->gen_ema, t->gen));
    t->step++;
    return 1;
}

int dcgan_trainer_generate(dcgan_trainer *t, tg_tensor **images, tg_tensor *z, bool ema)
{
    bool prev = tg_set_grad_enabled(false);
    int rc;
    if (ema && t->gen_ema) {
        rc = tg_module_forward(t->gen_ema, images, z);
    } else {
        tg_module_train(t->gen, false);
        rc = tg_module_forward(t->gen, images, z);
        tg_module_train(t->gen, true);
    }
    tg_set_grad_enabled(prev);
    return rc;
}
