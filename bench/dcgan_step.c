/* bench/dcgan_step: training throughput and memory of one DCGAN step.
 *
 * The step is PyTorch's DCGAN example, on the models of examples/dcgan/model.h
 * (BCE loss, Adam lr 2e-4, betas (0.5, 0.999)):
 *     fake = G(z)
 *     D step: loss_D = bce(D(real), 1) + bce(D(fake.detach()), 0); backward; Adam
 *     G step: loss_G = bce(D(fake), 1); backward; Adam
 * with gradients cleared (set to None) before each backward as in PyTorch.
 * real is a fixed batch of U[-1, 1) images and z is redrawn every step, so
 * only the model's work is timed (bench/dcgan_step.py runs the same step in
 * PyTorch).
 *
 *   dcgan_step [--batch 64] [--threads T] [--steps N (20)] [--warmup W (3)]
 *              [--amp bf16|f16] [--profile K]
 *
 * --amp runs the forward passes of G and D inside tg_autocast_begin(dtype)
 * with f32 master weights that every layer casts to the autocast dtype
 * (tg_module_autocast_weights), as examples/dcgan --amp does; the BCE losses stay
 * outside the scope, and for f16 each optimizer gets a tg_grad_scaler (scaled
 * backward, unscale, step skipped on inf/NaN, update).
 *
 * After the warmup, runs 2N steps and samples the resident set size after
 * each; prints one JSON line: OpenBLAS's kernel set (tg_blas_core), the autocast dtype ("f32" when off), images/s
 * over the 2N steps, peak RSS (VmHWM of /proc/self/status: ru_maxrss would
 * also count the forking parent's pages copied before exec), the RSS once
 * models and data exist (before any step), the RSS after step N and after
 * step 2N, and the largest RSS sample of steps 1..N and of steps N+1..2N
 * (memory is flat when the second is not above the first), all in MiB;
 * and, from tg_memory_stats, the tensor bytes held between steps (parameters,
 * gradients, Adam state: the larger of the counts before and after the timed
 * steps) and the timed steps' peak of tensor bytes above that (activations
 * saved for backward plus temporaries; scratch not included).
 * --profile K times the 2N steps op by op (tapegrad/profile.h) and prints
 * the K rows of most self time on stderr.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cblas.h>

#include <tapegrad/tapegrad.h>

#include "dcgan/model.h"

#define CHECK(call)                                                               \
    do {                                                                          \
        int rc_ = (call);                                                         \
        if (rc_ < 0) {                                                            \
            fprintf(stderr, "dcgan_step: %s failed: %s: %s\n", #call,             \
                    tg_status_name(rc_), tg_error_message());                     \
            exit(1);                                                              \
        }                                                                         \
    } while (0)

typedef struct bench {
    tg_module *g, *d;
    tg_optimizer *opt_g, *opt_d;
    tg_tensor *real, *ones, *zeros;   /* (B, 1, 28, 28), (B, 1), (B, 1) */
    tg_grad_scaler *gs_g, *gs_d;     /* NULL unless amp == TG_F16 */
    tg_rng rng;
    int64_t batch, nz;
    tg_dtype amp;                    /* TG_F32: autocast off */
} bench;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double rss_mib(void)
{
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return -1;
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = -1;
    fclose(f);
    return (double)resident * (double)sysconf(_SC_PAGESIZE) / (1024.0 * 1024.0);
}

/* VmHWM ("high water mark" of the resident set, in kB) of this process
 * alone; -1 when /proc is unreadable. */
static double peak_rss_mib(void)
{
    char line[256];
    double kib = -1;
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %lf", &kib) == 1) break;
    fclose(f);
    return kib < 0 ? -1 : kib / 1024.0;
}

static tg_optimizer *adam_for(tg_module *m)
{
    tg_tensor **params;
    int n;
    tg_optimizer *opt;
    tg_adam_opts o = TG_ADAM_OPTS_INIT;
    o.lr = 2e-4;
    o.beta1 = 0.5;
    CHECK(tg_module_parameters(m, &params, &n));
    CHECK(tg_adam_new(&opt, n, params, &o));
    free(params);
    return opt;
}

static void bench_init(bench *b, int64_t batch, tg_dtype amp)
{
    dcgan_arch a = DCGAN_ARCH_INIT;
    memset(b, 0, sizeof *b);
    b->batch = batch;
    b->amp = amp;
    if (amp == TG_F16) {
        CHECK(tg_grad_scaler_new(&b->gs_g, NULL));
        CHECK(tg_grad_scaler_new(&b->gs_d, NULL));
    }
    b->nz = a.nz;
    tg_rng_init(&b->rng, 0);
    CHECK(dcgan_generator_new(&b->g, &a, &b->rng));
    CHECK(dcgan_discriminator_new(&b->d, &a, &b->rng));
    if (amp != TG_F32) {   /* as examples/dcgan --amp: half compute, f32 masters */
        tg_module_autocast_weights(b->g, true);
        tg_module_autocast_weights(b->d, true);
    }
    b->opt_g = adam_for(b->g);
    b->opt_d = adam_for(b->d);
    CHECK(tg_tensor_zeros(&b->real, TG_F32, 4, (int64_t[]){batch, 1, 28, 28}));
    CHECK(tg_tensor_rand_uniform(b->real, &b->rng, -1.0, 1.0));
    CHECK(tg_tensor_full(&b->ones, TG_F32, 2, (int64_t[]){batch, 1}, 1.0));
    CHECK(tg_tensor_zeros(&b->zeros, TG_F32, 2, (int64_t[]){batch, 1}));
}

static void bench_free(bench *b)
{
    tg_tensor_release(b->zeros);
    tg_tensor_release(b->ones);
    tg_tensor_release(b->real);
    tg_optimizer_free(b->opt_d);
    tg_optimizer_free(b->opt_g);
    tg_module_release(b->d);
    tg_module_release(b->g);
    tg_grad_scaler_free(b->gs_d);
    tg_grad_scaler_free(b->gs_g);
}

/* m(x) under the run's autocast dtype (plain f32 when off). */
static void forward(const bench *b, tg_module *m, tg_tensor **y, tg_tensor *x)
{
    if (b->amp == TG_F32) {
        CHECK(tg_module_forward(m, y, x));
        return;
    }
    CHECK(tg_autocast_begin(b->amp));
    int rc = tg_module_forward(m, y, x);
    tg_autocast_end();
    CHECK(rc);
}

static int opt_step_cb(void *user)
{
    return tg_optimizer_step(user);
}

/* zero_grad, backward of loss and the optimizer step; with a scaler (f16)
 * the backward runs on loss * scale and the step goes through the scaler,
 * which unscales m's gradients and skips the step on inf/NaN. */
static void update(tg_optimizer *opt, tg_grad_scaler *gs, tg_module *m, tg_tensor *loss)
{
    tg_optimizer_zero_grad(opt);
    if (!gs) {
        CHECK(tg_backward(loss, NULL, NULL));
        CHECK(tg_optimizer_step(opt));
        return;
    }
    tg_tensor *scaled, **params;
    int n;
    CHECK(tg_grad_scaler_scale(gs, &scaled, loss));
    CHECK(tg_backward(scaled, NULL, NULL));
    tg_tensor_release(scaled);
    CHECK(tg_module_parameters(m, &params, &n));
    CHECK(tg_grad_scaler_step(gs, n, params, opt_step_cb, opt, NULL));
    CHECK(tg_grad_scaler_update(gs));
    free(params);
}

/* bce_with_logits(D(x), target), a new reference. */
static tg_tensor *d_loss(bench *b, tg_tensor *x, tg_tensor *target)
{
    tg_tensor *logits, *loss;
    forward(b, b->d, &logits, x);
    CHECK(tg_bce_with_logits(&loss, logits, target, TG_REDUCTION_MEAN));
    tg_tensor_release(logits);
    return loss;
}

static void step(bench *b)
{
    tg_tensor *z, *fake, *fake_det, *lr, *lf, *ld, *lg;
    CHECK(tg_tensor_zeros(&z, TG_F32, 2, (int64_t[]){b->batch, b->nz}));
    CHECK(tg_tensor_rand_normal(z, &b->rng, 0.0, 1.0));
    forward(b, b->g, &fake, z);
    CHECK(tg_tensor_detach(&fake_det, fake));

    lr = d_loss(b, b->real, b->ones);
    lf = d_loss(b, fake_det, b->zeros);
    CHECK(tg_add(&ld, lr, lf));
    update(b->opt_d, b->gs_d, b->d, ld);

    lg = d_loss(b, fake, b->ones);   /* also fills D's grads, cleared next step */
    update(b->opt_g, b->gs_g, b->g, lg);

    tg_tensor *all[] = {lg, ld, lf, lr, fake_det, fake, z};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tg_tensor_release(all[i]);
}

static int parse_int(const char *s, long lo, long *v)
{
    char *end;
    *v = strtol(s, &end, 10);
    return *end == '\0' && end != s && *v >= lo ? 0 : -1;
}

static const char *dtype_label(tg_dtype dt)
{
    return dt == TG_BF16 ? "bf16" : dt == TG_F16 ? "f16" : "f32";
}

int main(int argc, char **argv)
{
    long batch = 64, threads = 0, steps = 20, warmup = 3, profile = 0;
    tg_dtype amp = TG_F32;
    for (int i = 1; i < argc; i += 2) {
        if (!strcmp(argv[i], "--amp") && i + 1 < argc
            && (!strcmp(argv[i + 1], "bf16") || !strcmp(argv[i + 1], "f16"))) {
            amp = !strcmp(argv[i + 1], "bf16") ? TG_BF16 : TG_F16;
            continue;
        }
        long *dst = !strcmp(argv[i], "--batch")     ? &batch
                    : !strcmp(argv[i], "--threads") ? &threads
                    : !strcmp(argv[i], "--steps")   ? &steps
                    : !strcmp(argv[i], "--warmup")  ? &warmup
                    : !strcmp(argv[i], "--profile") ? &profile
                                                    : NULL;
        if (!dst || i + 1 >= argc || parse_int(argv[i + 1], dst == &warmup ? 0 : 1, dst) ||
            (dst == &threads && threads > 256)) {
            fprintf(stderr, "usage: dcgan_step [--batch 64] [--threads T] [--steps 20] "
                            "[--warmup 3] [--amp bf16|f16] [--profile K]\n");
            return 2;
        }
    }
    if (threads > 0) {
        openblas_set_num_threads((int)threads);
        tg_set_num_threads((int)threads);
    }
    bench b;
    bench_init(&b, batch, amp);
    double rss_init = rss_mib();
    for (long i = 0; i < warmup; i++) step(&b);
    /* Tensor memory held between steps (parameters, their gradients, Adam
     * state); the timed steps' peak above it is what a step adds: the
     * activations saved for backward and the temporaries. */
    int64_t tensor_state, tensor_peak;
    tg_memory_stats(&tensor_state, NULL);
    tg_memory_reset_peak();
    /* Reading /proc/self/statm takes microseconds: negligible against a step. */
    if (profile > 0) CHECK(tg_profile_start());
    double t0 = now_s(), rss[2] = {0, 0}, max_half[2] = {0, 0};
    for (long i = 0; i < 2 * steps; i++) {
        step(&b);
        double r = rss_mib();
        int half = i >= steps;
        if (r > max_half[half]) max_half[half] = r;
        if (i == steps - 1 || i == 2 * steps - 1) rss[half] = r;
    }
    double secs = now_s() - t0;
    if (profile > 0) {   /* the table on stderr, the JSON line stays alone on stdout */
        CHECK(tg_profile_stop());
        CHECK(tg_profile_print(stderr, (int)profile));
    }
    /* The state is taken again after the timed steps, and the larger of the two
     * counts: with f16 the grad scaler may skip the warmup steps' updates, and
     * Adam's state is then first allocated inside the timed steps, which is
     * not what a step adds. */
    int64_t state_after;
    tg_memory_stats(&state_after, &tensor_peak);
    if (state_after > tensor_state) tensor_state = state_after;
    const double mib = 1024.0 * 1024.0;
    printf("{\"impl\": \"tapegrad\", \"blas_core\": \"%s\", \"amp\": \"%s\", \"batch\": %ld, "
           "\"threads\": %ld, \"steps\": %ld, \"seconds\": %.3f, \"images_per_s\": %.2f, "
           "\"peak_rss_mib\": %.1f, \"rss_init_mib\": %.1f, "
           "\"rss_after_n_mib\": %.1f, \"rss_after_2n_mib\": %.1f, "
           "\"rss_max_first_n_mib\": %.1f, \"rss_max_second_n_mib\": %.1f, "
           "\"tensor_state_mib\": %.2f, \"tensor_step_peak_mib\": %.2f}\n",
           tg_blas_core(), dtype_label(amp), batch, threads, 2 * steps, secs,
           (double)(2 * steps * batch) / secs, peak_rss_mib(), rss_init, rss[0], rss[1],
           max_half[0], max_half[1], (double)tensor_state / mib,
           (double)(tensor_peak - tensor_state) / mib);
    bench_free(&b);
    return 0;
}
