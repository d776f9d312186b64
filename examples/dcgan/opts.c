/* examples/dcgan/opts.c - command line and the options as checkpoint metadata. */
#include "opts.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "usage: dcgan [options]\n"
    "  --epochs N          epochs to train (default 20; --time-budget usually stops first)\n"
    "  --batch N           batch size (default 32: more steps per minute than 64)\n"
    "  --lr X              Adam learning rate, in (0, 1] (default 4e-4, twice DCGAN's\n"
    "                      2e-4: clothing shapes within the 3-minute budget; 1e-4 for\n"
    "                      wgan-gp)\n"
    "  --seed N            seed of weights, data order and noise (default 0)\n"
    "  --out DIR           output folder (default out)\n"
    "  --resume PATH|auto  continue from a checkpoint (auto: DIR/checkpoint.safetensors)\n"
    "  --ddp               data-parallel training under mpirun -np N: each rank\n"
    "                      trains on batch/N of every batch, gradients are averaged;\n"
    "                      rank 0 draws the progress and writes the files\n"
    "  --sync-bn           with --ddp: BatchNorm statistics over the whole batch of\n"
    "                      all ranks (SyncBatchNorm), so a step is the one-process\n"
    "                      step; without it each rank normalises by its own share.\n"
    "                      Not saved in the checkpoint: give it again on --resume\n"
    "  --ddp-compress bf16|f16|off\n"
    "                      with --ddp: all-reduce the gradients in bf16 or f16, half\n"
    "                      the bytes of f32 (PyTorch's compress hooks; default off).\n"
    "                      Not saved in the checkpoint: give it again on --resume\n"
    "  --zero              with --ddp: shard each Adam's state over the ranks (ZeRO),\n"
    "                      the same steps.  Not saved: give it again on --resume\n";
/* The rest (one literal would pass the 4095 characters C guarantees). */
static const char usage_more[] =
    "  --overwrite         start a new run even though DIR holds an earlier run's\n"
    "                      checkpoint (replaced at the first save); without it that is\n"
    "                      refused\n"
    "  --threads N         threads, 1..256 (default: TG_NUM_THREADS, else\n"
    "                      OMP_NUM_THREADS, else the CPUs)\n"
    "  --data DIR          IDX folder (default " TG_FASHION_MNIST_DIR ")\n"
    "  --images DIR        train on PNGs instead, laid out as torchvision's\n"
    "                      ImageFolder (DIR/<class>/.../*.png), of any sizes: read\n"
    "                      as grey, the shorter side resized to 28, the centre\n"
    "                      cropped to 28x28 (T.Resize(28), T.CenterCrop(28))\n"
    "  --hflip P           flip each training image left-right with probability P\n"
    "                      in [0, 1] (T.RandomHorizontalFlip; default 0).  Not saved\n"
    "                      in the checkpoint: give it again on --resume\n"
    "  --loss bce|wgan-gp  GAN loss (default bce)\n"
    "  --amp bf16|f16|off  autocast the forward passes: half compute, f32 master\n"
    "                      weights (f16 with loss scaling); off: all f32 (default off)\n"
    "  --sample N          load the checkpoint, write N (1..4096) samples to\n"
    "                      DIR/samples.png, exit\n"
    "                      (their latents from --seed when given, else the checkpoint's)\n"
    "  --export-onnx PATH  at the end (of training, or of --sample) also write the\n"
    "                      generator as an ONNX model (opset 17, batch dim dynamic)\n"
    "  --time-budget S     stop cleanly after S seconds with a checkpoint (default 170;\n"
    "                      0: no limit)\n"
    "  --log-every N       progress line every N steps when stderr is not a tty (50)\n"
    "  --snapshot-every S  also write the generator to DIR/generator_<T>s.safetensors\n"
    "                      after every S seconds of training (T = S, 2S, ...; for\n"
    "                      quality-over-time curves: tapegrad fid, bench/quality.py)\n"
    "  --max-steps N       stop (with a checkpoint) once N steps in total are done\n"
    "  --ema DECAY         keep an exponential moving average of the generator, decay\n"
    "                      in (0, 1) (0.999 is usual): the sample grids come from it,\n"
    "                      and it is saved as DIR/generator_ema.safetensors and in the\n"
    "                      checkpoint (default: none)\n"
    "  --spectral-norm     SN-GAN's discriminator: each Conv2d weight divided by its\n"
    "                      largest singular value (torch's spectral_norm, one power\n"
    "                      iteration per forward), and no BatchNorm in it\n"
    "  --nz N --g-ch N --d-ch N   model size (default 64, 128, 64; see model.h)\n";

static int parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *v)
{
    char *end;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (errno || end == s || *end || x < lo || x > hi) return -1;
    *v = x;
    return 0;
}

/* A finite decimal number, the whole of s (strtod's hex and inf/nan forms
 * are refused). */
static int parse_f64(const char *s, double *v)
{
    char *end;
    if (s[0] == '\0' || strspn(s, "0123456789.eE+-") != strlen(s)) return -1;
    errno = 0;
    double x = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(x)) return -1;
    *v = x;
    return 0;
}

static void defaults(app_opts *o)
{
    *o = (app_opts){.train = (dcgan_opts)DCGAN_OPTS_INIT, .epochs = 20, .out = "out",
                    .time_budget = 170.0, .log_every = 50};
}

#define MAX_SAMPLES 4096
#define STR_(x) #x
#define STR(x) STR_(x)

/* Applies option name = val.  Returns 0, -1 for a bad value (*rule says what
 * a good one is) or -2 for an unknown name. */
static int apply(app_opts *o, const char *name, const char *val, const char **rule)
{
    int64_t n;
    dcgan_opts *t = &o->train;
    const int64_t big = INT64_MAX;
    if (!strcmp(name, "--out") || !strcmp(name, "--resume") || !strcmp(name, "--data") ||
        !strcmp(name, "--images")) {
        *rule = "a path, not empty";
        if (val[0] == '\0') return -1;
        const char **dst = !strcmp(name, "--out")      ? &o->out
                           : !strcmp(name, "--resume") ? &o->resume
                           : !strcmp(name, "--data")   ? &o->data
                                                       : &o->images;
        *dst = val;
        return 0;
    }
    if (!strcmp(name, "--epochs")) {
        *rule = "an integer >= 1";
        return parse_i64(val, 1, big, &o->epochs);
    }
    if (!strcmp(name, "--batch")) {
        *rule = "an integer >= 1";
        return parse_i64(val, 1, big, &t->batch);
    }
    if (!strcmp(name, "--max-steps")) {
        *rule = "an integer >= 1";
        return parse_i64(val, 1, big, &o->max_steps);
    }
    if (!strcmp(name, "--seed")) {
        *rule = "an integer in 0..9223372036854775807";
        if (parse_i64(val, 0, big, &n)) return -1;
        t->seed = (uint64_t)n;
        return 0;
    }
    if (!strcmp(name, "--lr")) {
        *rule = "a number in (0, 1]";
        o->lr_given = true;
        return parse_f64(val, &t->lr) || !(t->lr > 0 && t->lr <= 1) ? -1 : 0;
    }
    if (!strcmp(name, "--threads")) {   /* tg_set_num_threads's range */
        *rule = "an integer in 1..256";
        if (parse_i64(val, 1, 256, &n)) return -1;
        o->threads = (int)n;
        return 0;
    }
    if (!strcmp(name, "--nz")) {
        *rule = "an integer in 1.." STR(DCGAN_MAX_WIDTH);
        return parse_i64(val, 1, DCGAN_MAX_WIDTH, &t->arch.nz);
    }
    if (!strcmp(name, "--g-ch")) {
        *rule = "an even integer in 2.." STR(DCGAN_MAX_WIDTH);
        return parse_i64(val, 2, DCGAN_MAX_WIDTH, &t->arch.g_ch) || t->arch.g_ch % 2 ? -1 : 0;
    }
    if (!strcmp(name, "--d-ch")) {
        *rule = "an integer in 1.." STR(DCGAN_MAX_WIDTH);
        return parse_i64(val, 1, DCGAN_MAX_WIDTH, &t->arch.d_ch);
    }
    if (!strcmp(name, "--sample")) {
        *rule = "an integer in 1.." STR(MAX_SAMPLES);
        return parse_i64(val, 1, MAX_SAMPLES, &o->sample);
    }
    if (!strcmp(name, "--export-onnx")) {
        *rule = "a file path";
        o->export_onnx = val;
        return val[0] ? 0 : -1;
    }
    if (!strcmp(name, "--time-budget")) {
        *rule = "a number of seconds >= 0 (0: no limit)";
        return parse_f64(val, &o->time_budget) || o->time_budget < 0 ? -1 : 0;
    }
    if (!strcmp(name, "--snapshot-every")) {
        *rule = "a number of seconds > 0";
        return parse_f64(val, &o->snapshot_every) || !(o->snapshot_every > 0) ? -1 : 0;
    }
    if (!strcmp(name, "--hflip")) {
        *rule = "a probability in [0, 1]";
        return parse_f64(val, &o->hflip) || !(o->hflip >= 0 && o->hflip <= 1) ? -1 : 0;
    }
    if (!strcmp(name, "--ema")) {
        *rule = "a number in (0, 1)";
        return parse_f64(val, &t->ema) || !(t->ema > 0 && t->ema < 1) ? -1 : 0;
    }
    if (!strcmp(name, "--log-every")) {
        *rule = "an integer in 1..1000000";
        if (parse_i64(val, 1, 1000000, &n)) return -1;
        o->log_every = (int)n;
        return 0;
    }
    if (!strcmp(name, "--loss")) {
        *rule = "bce or wgan-gp";
        if (!strcmp(val, "bce")) t->loss = DCGAN_LOSS_BCE;
        else if (!strcmp(val, "wgan-gp")) t->loss = DCGAN_LOSS_WGAN_GP;
        else return -1;
        return 0;
    }
    if (!strcmp(name, "--ddp-compress")) {
        *rule = "bf16, f16 or off";
        if (!strcmp(val, "bf16")) t->ddp_compress = TG_BF16;
        else if (!strcmp(val, "f16")) t->ddp_compress = TG_F16;
        else if (!strcmp(val, "off") || !strcmp(val, "f32")) t->ddp_compress = TG_F32;
        else return -1;
        return 0;
    }
    if (!strcmp(name, "--amp")) {
        *rule = "bf16, f16 or off";
        if (!strcmp(val, "bf16")) t->amp = TG_BF16;
        else if (!strcmp(val, "f16")) t->amp = TG_F16;
        else if (!strcmp(val, "off") || !strcmp(val, "f32")) t->amp = TG_F32;
        else return -1;
        return 0;
    }
    return -2;
}

static const char *const owned_names[OWN_COUNT] = {
    [OWN_BATCH] = "--batch", [OWN_SEED] = "--seed", [OWN_LR] = "--lr",   [OWN_NZ] = "--nz",
    [OWN_G_CH] = "--g-ch",   [OWN_D_CH] = "--d-ch", [OWN_LOSS] = "--loss", [OWN_AMP] = "--amp",
    [OWN_EMA] = "--ema",     [OWN_SPECTRAL_NORM] = "--spectral-norm",
};

static const char *loss_name(dcgan_loss l);

int app_opts_check_checkpoint(const app_opts *o, const dcgan_opts *ck)
{
    const dcgan_opts *u = &o->train;
    for (int k = 0; k < OWN_COUNT; k++) {
        /* --sample --seed S draws its latents from S: not the checkpoint's */
        if (!o->owned[k] || (k == OWN_SEED && o->sample > 0)) continue;
        char have[64];
        bool same;
        switch ((owned_opt)k) {
        case OWN_BATCH: same = u->batch == ck->batch;
            snprintf(have, sizeof have, "%" PRId64, ck->batch); break;
        case OWN_SEED: same = u->seed == ck->seed;
            snprintf(have, sizeof have, "%" PRIu64, ck->seed); break;
        case OWN_LR: same = u->lr == ck->lr; snprintf(have, sizeof have, "%g", ck->lr); break;
        case OWN_NZ: same = u->arch.nz == ck->arch.nz;
            snprintf(have, sizeof have, "%" PRId64, ck->arch.nz); break;
        case OWN_G_CH: same = u->arch.g_ch == ck->arch.g_ch;
            snprintf(have, sizeof have, "%" PRId64, ck->arch.g_ch); break;
        case OWN_D_CH: same = u->arch.d_ch == ck->arch.d_ch;
            snprintf(have, sizeof have, "%" PRId64, ck->arch.d_ch); break;
        case OWN_LOSS: same = u->loss == ck->loss;
            snprintf(have, sizeof have, "%s", loss_name(ck->loss)); break;
        case OWN_AMP: same = u->amp == ck->amp;
            snprintf(have, sizeof have, "%s", ck->amp == TG_F32 ? "off" : tg_dtype_name(ck->amp));
            break;
        case OWN_EMA: same = u->ema == ck->ema;
            if (ck->ema > 0) snprintf(have, sizeof have, "%g", ck->ema);
            else snprintf(have, sizeof have, "none");
            break;
        case OWN_SPECTRAL_NORM: same = u->arch.d_spectral_norm == ck->arch.d_spectral_norm;
            break;
        default: same = true; break;
        }
        if (same) continue;
        if (k == OWN_SPECTRAL_NORM) {   /* a flag: there is no value to compare */
            fprintf(stderr, "dcgan: --spectral-norm does not match the checkpoint, whose "
                    "discriminator has no spectral norm: a resumed or sampled run keeps the "
                    "checkpoint's options; leave it out, or start a new run in another "
                    "--out\n");
            return -1;
        }
        fprintf(stderr, "dcgan: %s %s does not match the checkpoint's %s: a resumed or sampled "
                "run keeps the checkpoint's options; leave %s out, or start a new run in "
                "another --out\n", owned_names[k], o->owned[k], have, owned_names[k]);
        return -1;
    }
    return 0;
}

/* Options that only training reads: given with --sample they would do
 * nothing, which is refused rather than ignored. */
static bool training_only(const char *name)
{
    static const char *const names[] = {"--epochs", "--max-steps", "--overwrite", "--data",
                                        "--images", "--hflip", "--time-budget", "--log-every",
                                        "--snapshot-every"};
    for (size_t k = 0; k < sizeof names / sizeof *names; k++)
        if (!strcmp(name, names[k])) return true;
    return false;
}

/* Prints what is wrong with argv[i] (and its value) for apply's status rc. */
static void report(int argc, char **argv, int i, int rc, const char *rule)
{
    if (strncmp(argv[i], "--", 2) != 0)
        fprintf(stderr, "dcgan: unexpected argument '%s' (options are --name value)\n", argv[i]);
    else if (rc == -2)
        fprintf(stderr, "dcgan: unknown option '%s'\n", argv[i]);
    else if (i + 1 >= argc)
        fprintf(stderr, "dcgan: option '%s' needs a value\n", argv[i]);
    else if (rc == -3)
        fprintf(stderr, "dcgan: option '%s' needs a value, got the option '%s' (write "
                "./%s for a path of that name)\n", argv[i], argv[i + 1], argv[i + 1]);
    else
        fprintf(stderr, "dcgan: bad value '%s' for %s: %s\n", argv[i + 1], argv[i], rule);
}

int app_opts_parse(app_opts *o, int argc, char **argv)
{
    defaults(o);
    const char *train_only = NULL;   /* the first training-only option given */
    /* Options are (name, value) pairs, but for the flags --help,
     * --overwrite, --ddp, --sync-bn, --zero and --spectral-norm.  A value may not
     * start with "--": that is the next option, and its own value missing. */
    for (int i = 1; i < argc; i += 2) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(usage, stdout);
            fputs(usage_more, stdout);
            return 1;
        }
        if (!train_only && training_only(argv[i])) train_only = argv[i];
        if (!strcmp(argv[i], "--overwrite")) {
            o->overwrite = true;
            i--;
            continue;
        }
        bool *flag = !strcmp(argv[i], "--ddp")             ? &o->ddp
                     : !strcmp(argv[i], "--sync-bn")       ? &o->train.sync_bn
                     : !strcmp(argv[i], "--zero")          ? &o->train.zero
                     : !strcmp(argv[i], "--spectral-norm") ? &o->train.arch.d_spectral_norm
                                                           : NULL;
        if (flag) {
            *flag = true;
            if (flag == &o->train.arch.d_spectral_norm) o->owned[OWN_SPECTRAL_NORM] = "";
            i--;
            continue;
        }
        const char *rule = "";
        int rc = i + 1 >= argc                       ? -3
                 : strncmp(argv[i + 1], "--", 2) == 0 ? -3
                                                      : apply(o, argv[i], argv[i + 1], &rule);
        app_opts scratch = *o;   /* an unknown name is the first thing to say */
        if (rc == -3 && apply(&scratch, argv[i], "", &rule) == -2) rc = -2;
        if (rc < 0) {
            report(argc, argv, i, rc, rule);
            fputs(usage, stderr);
            fputs(usage_more, stderr);
            return -1;
        }
        for (int k = 0; k < OWN_COUNT; k++)
            if (!strcmp(argv[i], owned_names[k])) o->owned[k] = argv[i + 1];
    }
    if (o->resume && o->overwrite) {
        fprintf(stderr, "dcgan: --resume continues a run and --overwrite starts a new one: "
                "give one of them\n");
        return -1;
    }
    if (o->data && o->images) {
        fprintf(stderr, "dcgan: --data reads IDX files and --images PNGs: give one of them\n");
        return -1;
    }
    if (o->train.sync_bn && !o->ddp) {
        fprintf(stderr, "dcgan: --sync-bn synchronises BatchNorm over the ranks of --ddp: "
                "give both (mpirun -np N dcgan --ddp --sync-bn ...)\n");
        return -1;
    }
    if (o->train.zero && !o->ddp) {
        fprintf(stderr, "dcgan: --zero shards the optimizers' state over the ranks of --ddp: "
                "give both (mpirun -np N dcgan --ddp --zero ...)\n");
        return -1;
    }
    if (o->train.ddp_compress != TG_F32 && !o->ddp) {
        fprintf(stderr, "dcgan: --ddp-compress compresses the gradients that --ddp sends "
                "between ranks: give both (mpirun -np N dcgan --ddp --ddp-compress bf16 ...)\n");
        return -1;
    }
    if (o->sample > 0 && (train_only || o->ddp)) {
        if (!train_only) train_only = "--ddp";
        fprintf(stderr, "dcgan: %s has no effect with --sample, which only draws samples "
                "from the checkpoint: leave it out\n", train_only);
        return -1;
    }
    /* WGAN-GP: the critic has no BatchNorm and Adam uses the paper's
     * lr 1e-4, betas (0, 0.9) (Gulrajani et al. 2017, algorithm 1). */
    if (o->train.loss == DCGAN_LOSS_WGAN_GP) {
        o->train.arch.d_batchnorm = false;
        o->train.beta1 = 0.0;
        o->train.beta2 = 0.9;
        if (!o->lr_given) o->train.lr = 1e-4;
    }
    /* SN-GAN's discriminators have no BatchNorm: batch statistics would
     * rescale what spectral norm keeps 1-Lipschitz (model.h). */
    if (o->train.arch.d_spectral_norm) o->train.arch.d_batchnorm = false;
    return 0;
}

/* ---- options as metadata ------------------------------------------------------ */

static const char *loss_name(dcgan_loss l)
{
    return l == DCGAN_LOSS_WGAN_GP ? "wgan-gp" : "bce";
}

int dcgan_opts_to_meta(const dcgan_opts *o, tg_checkpoint *ck)
{
    char arch[160], train[256];
    /* " d_sn=1" only with spectral norm: the key of a run without it is
     * unchanged */
    snprintf(arch, sizeof arch, "nz=%" PRId64 " g_ch=%" PRId64 " d_ch=%" PRId64 " d_bn=%d%s",
             o->arch.nz, o->arch.g_ch, o->arch.d_ch, o->arch.d_batchnorm ? 1 : 0,
             o->arch.d_spectral_norm ? " d_sn=1" : "");
    /* %a: the doubles round-trip exactly */
    snprintf(train, sizeof train,
             "loss=%s batch=%" PRId64 " seed=%" PRIu64 " lr=%a beta1=%a beta2=%a "
             "n_critic=%d gp_lambda=%a amp=%s",
             loss_name(o->loss), o->batch, o->seed, o->lr, o->beta1, o->beta2, o->n_critic,
             o->gp_lambda, tg_dtype_name(o->amp));
    int rc = tg_checkpoint_set_meta(ck, "dcgan.arch", arch, true);
    if (rc >= 0) rc = tg_checkpoint_set_meta(ck, "dcgan.train", train, true);
    /* only with an EMA, and not must-match: a checkpoint without the key has
     * none, and a resumed run takes its options from the checkpoint */
    char ema[48];
    snprintf(ema, sizeof ema, "%a", o->ema);
    if (rc >= 0 && o->ema > 0) rc = tg_checkpoint_set_meta(ck, "dcgan.ema", ema, false);
    return rc;
}

int dcgan_opts_from_meta(dcgan_opts *o, const tg_st_file *f)
{
    const char *arch = tg_st_meta_get(f, "dcgan.arch");
    const char *train = tg_st_meta_get(f, "dcgan.train");
    if (!arch || !train)
        return tg_error_set(TG_ENOTFOUND, "no dcgan.arch / dcgan.train metadata: not a "
                            "checkpoint of this program (generator.safetensors holds weights "
                            "only)");
    dcgan_opts r = *o;
    int bn, nc, end = 0;
    char loss[16], amp[16];
    if (sscanf(arch, "nz=%" SCNd64 " g_ch=%" SCNd64 " d_ch=%" SCNd64 " d_bn=%d%n", &r.arch.nz,
               &r.arch.g_ch, &r.arch.d_ch, &bn, &end) != 4 ||
        (arch[end] != '\0' && strcmp(arch + end, " d_sn=1") != 0))
        return tg_error_set(TG_EFORMAT, "dcgan.arch metadata '%.64s' cannot be read", arch);
    r.arch.d_batchnorm = bn != 0;
    r.arch.d_spectral_norm = arch[end] != '\0';
    if (sscanf(train,
               "loss=%15s batch=%" SCNd64 " seed=%" SCNu64 " lr=%la beta1=%la beta2=%la "
               "n_critic=%d gp_lambda=%la amp=%15s",
               loss, &r.batch, &r.seed, &r.lr, &r.beta1, &r.beta2, &nc, &r.gp_lambda,
               amp) != 9)
        return tg_error_set(TG_EFORMAT, "dcgan.train metadata '%.96s' cannot be read", train);
    r.n_critic = nc;
    const char *ema = tg_st_meta_get(f, "dcgan.ema");
    r.ema = 0.0;
    if (ema && (sscanf(ema, "%la", &r.ema) != 1 || !(r.ema > 0 && r.ema < 1)))
        return tg_error_set(TG_EFORMAT, "dcgan.ema metadata '%.32s' is not a decay in (0, 1)",
                            ema);
    r.loss = !strcmp(loss, "wgan-gp") ? DCGAN_LOSS_WGAN_GP : DCGAN_LOSS_BCE;
    r.amp = !strcmp(amp, "bf16") ? TG_BF16 : !strcmp(amp, "f16") ? TG_F16 : TG_F32;
    *o = r;
    return TG_OK;
}
