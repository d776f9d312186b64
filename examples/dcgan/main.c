/* examples/dcgan/main.c - trains a DCGAN on Fashion-MNIST (make demo).
 *
 *   dcgan [--epochs N] [--batch N] [--lr X] [--seed N] [--out DIR]
 *         [--resume PATH|auto] [--overwrite] [--threads N] [--data DIR]
 *         [--loss bce|wgan-gp] [--amp bf16|f16] [--sample N] [--time-budget S]
 *         [--export-onnx PATH]
 *         [--snapshot-every S] [--ema DECAY] [--spectral-norm]
 *
 * Writes under DIR: samples_epoch_<k>.png after each epoch and
 * samples_final.png at the end (from one fixed latent batch), loss.csv,
 * loss.png, checkpoint.safetensors (everything --resume needs to continue
 * bit for bit), and generator.safetensors + latents.safetensors for
 * examples/dcgan_torch.py.  With --ema, the sample grids come from an
 * exponential moving average of the generator, saved as
 * generator_ema.safetensors (torch's AveragedModel keys) and in the
 * checkpoint.  --spectral-norm: SN-GAN's discriminator (model.h).  Stops
 * cleanly at a step boundary after the time budget or on Ctrl-C, always with
 * a checkpoint.
 *
 * --ddp: data-parallel under `mpirun -np N dcgan --ddp ...` (docs/distributed.md);
 * --sync-bn with it: BatchNorm over the whole job's batch; --ddp-compress
 * bf16|f16 with it: the gradients all-reduced in that dtype; --zero with it:
 * each Adam's state sharded over the ranks (tg_zero), consolidated on rank 0
 * into the checkpoint.
 * Rank 0 draws the progress, writes every file and decides when to stop and
 * save (the decision is broadcast, so all ranks take the same steps).  An
 * error on one rank is returned by every rank, and rank 0 prints it: one
 * outside a step (before training, writing an epoch's outputs, saving) is
 * agreed on at once, one in a step by the step's gradient reductions or at
 * its end (dcgan_trainer_step), and a failed --snapshot-every write by the
 * next decision.  With --sync-bn, an error in a step's forwards or
 * backwards ends the whole job (MPI_Abort) after printing it, since the
 * other ranks may be waiting in a SyncBatchNorm all-reduce. */
#include <cblas.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "example_args.h"
#include "opts.h"
#include "outputs.h"
#include "progress.h"
#include "tapegrad/onnx.h"
#include "train.h"

#define N_FIXED 64
#define CHECKPOINT_EVERY_S 60.0

static volatile sig_atomic_t interrupted;
static tg_dist *g_dist;   /* --ddp; NULL: one process */

static bool rank0(void) { return tg_dist_rank(g_dist) == 0; }

/* With --ddp, every rank returns the worst rank's status (and message). */
static int agree(int rc)
{
    return g_dist ? tg_dist_agree(g_dist, rc) : rc;
}

static void on_sigint(int sig)
{
    (void)sig;
    interrupted = 1;
}

static int fail(const char *what, int rc)
{
    if (!rank0()) return 1;
    fprintf(stderr, "dcgan: %s: %s: %s\n", what, tg_status_name(rc), tg_error_message());
    return 1;
}

/* The fixed latent batch: from its own RNG stream, so it is the same for a
 * given seed whatever the training state. */
static int fixed_latents(tg_tensor **z, const dcgan_opts *o, int64_t n)
{
    tg_rng rng;
    tg_rng_init(&rng, o->seed ^ 0x5A17E7F00DULL);
    return dcgan_latents(z, n, o->arch.nz, &rng);
}

static const char *checkpoint_path(char *buf, size_t cap, const app_opts *a)
{
    if (a->resume && strcmp(a->resume, "auto") != 0) return a->resume;
    return out_path(buf, cap, a->out, "checkpoint.safetensors");
}

static int save_checkpoint(dcgan_trainer *t, const history *h, const char *dir)
{
    char path[4096];
    tg_st_file *extra = NULL;
    int rc = tg_st_new(&extra);
    if (rc >= 0) rc = history_save(h, extra);
    out_path(path, sizeof path, dir, "checkpoint.safetensors");
    /* every rank reaches the collective calls, whatever history_save gave */
    if (g_dist) rc = agree(rc);
    if (rc >= 0) rc = dcgan_trainer_save_optimizers(t, extra);
    if (rc >= 0) rc = g_dist ? tg_dist_checkpoint_save(g_dist, t->ck, path, extra)
                             : tg_checkpoint_save(t->ck, path, extra);
    tg_st_free(extra);
    return rc;
}

/* A new run, or one resumed from a checkpoint elsewhere, would replace the
 * checkpoint of an earlier run in --out at its first save: refused unless
 * --overwrite. */
static int check_no_earlier_run(const app_opts *a)
{
    char path[4096];
    struct stat here, from;
    out_path(path, sizeof path, a->out, "checkpoint.safetensors");
    if (a->overwrite || stat(path, &here) != 0) return 0;
    if (a->resume && (strcmp(a->resume, "auto") == 0 ||
                      (stat(a->resume, &from) == 0 && from.st_dev == here.st_dev &&
                       from.st_ino == here.st_ino)))
        return 0;
    fprintf(stderr, "dcgan: %s holds an earlier run's checkpoint: continue it with --resume "
            "auto, start over with --overwrite, or choose another --out\n", path);
    return -1;
}

/* ---- --sample N ------------------------------------------------------------ */

/* --resume and --sample take the model and training options from the
 * checkpoint f: one given on the command line that differs is refused here,
 * before anything is written.  Metadata that cannot be read is left to the
 * run itself to report. */
static int check_options(const app_opts *a, const tg_st_file *f)
{
    dcgan_opts ck = a->train;
    return dcgan_opts_from_meta(&ck, f) < 0 ? 0 : app_opts_check_checkpoint(a, &ck);
}

/* --export-onnx PATH: the generator as ONNX (tapegrad/onnx.h), z the example
 * input; nothing without the option. */
static int export_onnx(const app_opts *a, tg_module *gen, tg_tensor *z)
{
    if (!a->export_onnx) return TG_OK;
    tg_onnx_options o = TG_ONNX_OPTIONS_INIT;
    o.dynamic_batch = true;
    o.graph_name = "dcgan_generator";
    int rc = tg_onnx_export(gen, z, a->export_onnx, &o);
    if (rc >= 0) fprintf(stderr, "dcgan: wrote the generator as ONNX to %s\n", a->export_onnx);
    return rc;
}

/* export_onnx for the trained generator t->gen.  With --sync-bn its
 * BatchNorms are SyncBatchNorms, which ONNX export does not know (they are
 * training-time modules): a plain generator with the same state dict, whose
 * eval-mode BatchNorm computes the same, is exported instead. */
static int export_trained(const app_opts *a, const dcgan_trainer *t, tg_tensor *z)
{
    if (!a->export_onnx || !t->o.sync_bn) return export_onnx(a, t->gen, z);
    tg_module *plain = NULL;
    tg_st_file *f = NULL;
    tg_rng rng;
    tg_rng_init(&rng, 0);   /* the weights are overwritten */
    int rc = dcgan_generator_new(&plain, &t->o.arch, &rng);
    if (rc >= 0) rc = tg_st_new(&f);
    if (rc >= 0) rc = tg_module_state_dict_save(t->gen, f, NULL);
    if (rc >= 0) rc = tg_module_load_state_dict(plain, f, NULL, true);
    if (rc >= 0) rc = export_onnx(a, plain, z);
    tg_st_free(f);
    tg_module_release(plain);
    return rc;
}

/* --sample N from the checkpoint f (from the generator's EMA when it has
 * one). */
static int sample_only(const app_opts *a, const tg_st_file *f)
{
    char png[4096];
    if (ex_out_dir("dcgan", "--out", a->out) < 0) return 1;
    dcgan_opts o = a->train;
    tg_module *gen = NULL, *ema = NULL;
    tg_checkpoint *ck = NULL;
    tg_tensor *z = NULL, *img = NULL;
    tg_rng rng;
    tg_rng_init(&rng, o.seed);
    int rc = dcgan_opts_from_meta(&o, f);
    if (rc >= 0) rc = dcgan_generator_new(&gen, &o.arch, &rng);
    if (rc >= 0) rc = tg_checkpoint_new(&ck);
    if (rc >= 0) rc = tg_checkpoint_add_module(ck, "gen", gen);
    if (rc >= 0 && o.ema > 0) rc = tg_averaged_model_new(&ema, gen, o.ema, true);
    if (rc >= 0 && ema) rc = tg_checkpoint_add_module(ck, "gen_ema", ema);
    if (rc >= 0) rc = tg_checkpoint_load_file(ck, f);
    tg_rng_init(&rng, (a->owned[OWN_SEED] ? a->train.seed : o.seed) + 1000003);
    if (rc >= 0) rc = dcgan_latents(&z, a->sample, o.arch.nz, &rng);
    if (rc >= 0) {
        tg_module_train(ema ? ema : gen, false);
        tg_no_grad_begin();
        rc = tg_module_forward(ema ? ema : gen, &img, z);
        tg_no_grad_end();
    }
    int nrow = (int)ceil(sqrt((double)a->sample));
    if (rc >= 0) rc = tg_png_write_grid(out_path(png, sizeof png, a->out, "samples.png"), img,
                                        nrow, -1.0, 1.0, 2);
    if (rc >= 0) fprintf(stderr, "dcgan: wrote %lld samples to %s\n", (long long)a->sample, png);
    if (rc >= 0) rc = export_onnx(a, gen, z);
    tg_tensor_release(img);
    tg_tensor_release(z);
    tg_checkpoint_free(ck);
    tg_module_release(ema);
    tg_module_release(gen);
    return rc < 0 ? fail("sample", rc) : 0;
}

/* ---- training ----------------------------------------------------------------- */

typedef struct run {
    app_opts *a;
    dcgan_trainer *t;
    history h;
    tg_tensor *z;
    progress p;
} run;

/* --resume: options and state from the checkpoint f. */
static int resume(run *r, tg_dataset *ds, const tg_st_file *f)
{
    char buf[4096];
    /* The data order and position depend on the data set: the same one, or
     * the run would not continue as it would have. */
    const char *data = tg_st_meta_get(f, DCGAN_DATA_META);
    long long n;
    int rc = TG_OK;
    if (data && sscanf(data, "images=%lld", &n) == 1 && n != tg_dataset_size(ds))
        rc = tg_error_set(TG_EINVAL, "the checkpoint was trained on %lld images and %s "
                          "has %lld: a resumed run continues on the same data", n,
                          r->a->images ? "--images" : "--data", (long long)tg_dataset_size(ds));
    if (rc >= 0) rc = dcgan_opts_from_meta(&r->a->train, f);
    /* dcgan_trainer_new is collective under --ddp: a rank whose copy of the
     * checkpoint is refused must not leave the others waiting in it */
    rc = agree(rc);
    if (rc >= 0) rc = dcgan_trainer_new(&r->t, &r->a->train, ds);
    if (rc >= 0) rc = tg_checkpoint_load_file(r->t->ck, f);
    /* collective with --zero: every rank that made a trainer reaches it */
    if (r->t && r->t->o.zero) rc = agree(rc);
    if (rc >= 0) rc = dcgan_trainer_load_optimizers(r->t, f);
    if (rc >= 0 && r->t->step < 0)
        rc = tg_error_set(TG_EFORMAT, "the checkpoint's step=%lld must be >= 0",
                          (long long)r->t->step);
    if (rc >= 0) rc = history_load(&r->h, f, r->t->step);
    if (rc >= 0 && rank0())
        fprintf(stderr, "dcgan: resumed %s at step %lld (epoch %lld)\n",
                checkpoint_path(buf, sizeof buf, r->a), (long long)r->t->step,
                (long long)dcgan_trainer_epoch(r->t) + 1);
    return rc;
}

static int epoch_end(run *r)
{
    char name[64], path[4096];
    int64_t e = dcgan_trainer_epoch(r->t);
    snprintf(name, sizeof name, "samples_epoch_%lld.png", (long long)e + 1);
    progress_break(&r->p);
    int rc = TG_OK;
    if (rank0()) rc = write_samples(r->t, r->z, out_path(path, sizeof path, r->a->out, name));
    if (rc >= 0 && rank0()) rc = write_losses(r->a->out, &r->h);
    /* every rank reaches the agreement, a rank whose writing failed included */
    rc = agree(rc >= 0 ? dcgan_trainer_next_epoch(r->t) : rc);
    if (rc >= 0) rc = save_checkpoint(r->t, &r->h, r->a->out);
    if (rc >= 0 && rank0()) fprintf(stderr, "dcgan: epoch %lld done: %s\n", (long long)e + 1, path);
    return rc;
}

/* Whether to stop, and whether to save a checkpoint now: rank 0's view,
 * given to every rank, which must take the same steps and the same
 * collective saves.  pending, msg: rank 0's failed --snapshot-every write,
 * which the decision carries, so that every rank returns it. */
static int decide(run *r, double last_save, int pending, const char *msg, bool *stop,
                  bool *save)
{
    const app_opts *a = r->a;
    *stop = interrupted || (a->time_budget > 0 && progress_elapsed(&r->p) >= a->time_budget) ||
            (a->max_steps > 0 && r->t->step >= a->max_steps);
    *save = progress_now() - last_save >= CHECKPOINT_EVERY_S;
    if (!g_dist) return TG_OK;
    tg_tensor *flags = NULL;
    const int64_t three = 3;
    int rc = tg_tensor_zeros(&flags, TG_I64, 1, &three);
    if (rc >= 0) {
        int64_t *v = tg_tensor_data(flags);
        v[0] = *stop;
        v[1] = *save;
        v[2] = pending < 0;
        rc = tg_dist_broadcast_tensor(g_dist, flags, 0);
        *stop = v[0] != 0;
        *save = v[1] != 0;
        if (rc >= 0 && v[2]) rc = agree(pending < 0 ? tg_error_set(pending, "%s", msg) : TG_OK);
    }
    tg_tensor_release(flags);
    return rc;
}

/* --snapshot-every: the generator's state dict (as generator.safetensors)
 * after t seconds of training, to DIR/generator_<t>s.safetensors. */
static int save_snapshot(const dcgan_trainer *t, const char *dir, double seconds)
{
    char name[64], path[4096];
    snprintf(name, sizeof name, "generator_%gs.safetensors", seconds);
    tg_st_file *f = NULL;
    int rc = tg_st_new(&f);
    if (rc >= 0) rc = tg_module_state_dict_save(t->gen, f, "gen");
    if (rc >= 0) rc = tg_safetensors_save(f, out_path(path, sizeof path, dir, name));
    tg_st_free(f);
    return rc;
}

static int train_loop(run *r)
{
    const app_opts *a = r->a;
    double last_save = progress_now(), next_snapshot = a->snapshot_every;
    int pending = TG_OK;   /* rank 0's failed snapshot, for the next decision */
    char pending_msg[512] = "";
    while (dcgan_trainer_epoch(r->t) < a->epochs) {
        bool stop, save;
        int rc = decide(r, last_save, pending, pending_msg, &stop, &save);
        if (rc < 0) return rc;
        if (stop) break;
        double d, g;
        rc = dcgan_trainer_step(r->t, &d, &g);   /* an error is every rank's */
        if (rc < 0) return rc;
        if (rc == 0) {
            if ((rc = epoch_end(r)) < 0) return rc;
            continue;
        }
        if ((rc = history_push(&r->h, dcgan_trainer_epoch(r->t), d, g)) < 0) return rc;
        const double el = progress_elapsed(&r->p);
        if (rank0() && next_snapshot > 0 && el >= next_snapshot) {
            /* the others learn of a failure at the next decision, which
             * always follows a step (the epoch ends only in epoch_end) */
            pending = save_snapshot(r->t, a->out, next_snapshot);
            if (pending < 0 && !g_dist) return pending;
            if (pending < 0) snprintf(pending_msg, sizeof pending_msg, "%s", tg_error_message());
            while (next_snapshot <= el) next_snapshot += a->snapshot_every;   /* one per step */
        }
        if (rank0()) progress_update(&r->p, dcgan_trainer_epoch(r->t), r->t->step, d, g);
        if (save) {
            if ((rc = save_checkpoint(r->t, &r->h, a->out)) < 0) return rc;
            last_save = progress_now();
        }
    }
    return TG_OK;
}

static int finish(run *r)
{
    char path[4096];
    const char *dir = r->a->out;
    progress_break(&r->p);
    int rc = save_checkpoint(r->t, &r->h, dir);
    if (!rank0()) return rc;
    if (rc >= 0) rc = write_samples(r->t, r->z, out_path(path, sizeof path, dir,
                                                         "samples_final.png"));
    if (rc >= 0) rc = write_losses(dir, &r->h);
    if (rc >= 0) rc = write_interchange(r->t, r->z, dir);
    if (rc >= 0) rc = export_trained(r->a, r->t, r->z);
    double el = progress_elapsed(&r->p);
    int64_t done = r->t->step - r->p.start_step;
    if (rc >= 0)
        fprintf(stderr,
                "dcgan: %s after %lld steps (%lld this run, %.0f s, %.0f img/s); wrote %s/"
                "{samples_final.png, loss.png, loss.csv, checkpoint.safetensors, "
                "generator.safetensors, latents.safetensors%s}\n",
                interrupted ? "interrupted" : "stopped", (long long)r->t->step,
                (long long)done, el, el > 0 ? (double)(done * r->a->train.batch) / el : 0.0,
                dir, r->t->gen_ema ? ", generator_ema.safetensors" : "");
    return rc;
}

/* The training set: --images' PNGs brought to the model's 1 x 28 x 28 as
 * torchvision's T.Grayscale(), T.Resize(28), T.CenterCrop(28) would; else
 * --data's IDX files (Fashion-MNIST's by default). */
static int load_data(tg_dataset **ds, const app_opts *a)
{
    if (!a->images) return tg_fashion_mnist_load(ds, a->data, true);
    tg_image_folder_options o = TG_IMAGE_FOLDER_OPTIONS_INIT;
    o.channels = 1;
    o.resize[0] = 28;
    o.center_crop[0] = o.center_crop[1] = 28;
    return tg_image_folder_load_ex(ds, a->images, &o);
}

/* Trains from scratch, or from the checkpoint f (--resume; NULL otherwise). */
static int train(app_opts *a, const tg_st_file *f)
{
    run r = {.a = a};
    /* rank 0 owns --out; the others follow its verdict (it printed why) */
    int out_rc = !rank0() ? 0 : check_no_earlier_run(a) < 0 ? 2
                              : ex_out_dir("dcgan", "--out", a->out) < 0 ? 1 : 0;
    if (agree(out_rc ? tg_error_set(TG_EINVAL, "--out refused") : TG_OK) < 0)
        return out_rc ? out_rc : 1;
    tg_dataset *ds = NULL;
    int rc = agree(load_data(&ds, a));
    if (rc < 0) {
        tg_dataset_release(ds);
        return fail(a->images ? a->images : a->data ? a->data : TG_FASHION_MNIST_DIR, rc);
    }
    rc = f ? resume(&r, ds, f) : dcgan_trainer_new(&r.t, &a->train, ds);
    if (rc >= 0 && a->hflip > 0) {
        tg_augment_options aug = TG_AUGMENT_OPTIONS_INIT;
        aug.hflip_p = a->hflip;
        rc = tg_loader_set_augment(r.t->ld, &aug);
    }
    rc = agree(rc);
    tg_dataset_release(ds);
    if (rc >= 0 && tg_loader_num_batches(r.t->ld) == 0) {
        /* Batches are full (drop_last): nothing to train on, and nothing is
         * written, so an earlier run's checkpoint in --out stays as it was. */
        fprintf(stderr, "dcgan: batch %lld is larger than the %lld training images: no full "
                "batch to train on\n", (long long)r.t->o.batch,
                (long long)tg_dataset_size(r.t->ds));
        history_free(&r.h);
        dcgan_trainer_free(r.t);
        return 1;
    }
    if (rc >= 0) rc = fixed_latents(&r.z, &a->train, N_FIXED);
    if (rc >= 0) {
        const dcgan_opts *o = &a->train;
        if (rank0() && g_dist)
            fprintf(stderr, "dcgan: data-parallel over %d ranks, batch %lld per rank%s%s\n",
                    tg_dist_size(g_dist), (long long)o->batch / tg_dist_size(g_dist),
                    o->sync_bn ? ", synchronised BatchNorm" : "",
                    o->ddp_compress == TG_BF16  ? ", bf16 gradients"
                    : o->ddp_compress == TG_F16 ? ", f16 gradients"
                                                : "");
        if (rank0()) fprintf(stderr,
                "dcgan: %lld images, batch %lld, loss %s, nz %lld, G %lld ch, D %lld ch%s, "
                "lr %g, seed %llu, amp %s, budget %g s\n",
                (long long)tg_dataset_size(r.t->ds), (long long)o->batch,
                o->loss == DCGAN_LOSS_BCE ? "bce" : "wgan-gp", (long long)o->arch.nz,
                (long long)o->arch.g_ch, (long long)o->arch.d_ch,
                o->arch.d_spectral_norm ? " spectral-normed" : "", o->lr,
                (unsigned long long)o->seed, tg_dtype_name(o->amp), a->time_budget);
        progress_init(&r.p, a->log_every, o->batch, tg_loader_num_batches(r.t->ld), a->epochs,
                      r.t->step, a->time_budget);
        signal(SIGINT, on_sigint);
        rc = train_loop(&r);
        if (rc >= 0) rc = finish(&r);
    }
    tg_tensor_release(r.z);
    history_free(&r.h);
    dcgan_trainer_free(r.t);
    return rc < 0 ? fail("train", rc) : 0;
}

int main(int argc, char **argv)
{
    app_opts a;
    int prc = app_opts_parse(&a, argc, argv);
    if (prc != 0) return prc > 0 ? 0 : 2;
    /* Every run writes sample grids: refuse before any work in a build
     * without PNG support (meson -Dpng=disabled, or no libpng). */
    if (!tg_png_available()) {
        fprintf(stderr, "dcgan: this tapegrad was built without PNG support, so the sample "
                "images cannot be written; rebuild with libpng installed (meson -Dpng=enabled)\n");
        return 1;
    }
    if (a.ddp) {
        int drc = tg_dist_init(&g_dist, &argc, &argv);
        if (drc < 0) return fail("--ddp", drc);
        a.train.dist = g_dist;
    }
    if (a.threads > 0) {
        openblas_set_num_threads(a.threads);
        tg_set_num_threads(a.threads);
    }
    /* --sample and --resume read the checkpoint once, here */
    tg_st_file *f = NULL;
    if (a.sample > 0 || a.resume) {
        char buf[4096];
        const char *path = checkpoint_path(buf, sizeof buf, &a);
        int lrc = agree(tg_safetensors_load(&f, path));
        if (lrc < 0) {
            tg_st_free(f);
            tg_dist_free(g_dist);
            return fail(path, lrc);
        }
        if (check_options(&a, f) < 0) {
            tg_st_free(f);
            tg_dist_free(g_dist);
            return 2;
        }
    }
    int rc = a.sample > 0 ? sample_only(&a, f) : train(&a, f);
    tg_st_free(f);
    tg_plot_release_caches();
    tg_dist_free(g_dist);
    return rc;
}
