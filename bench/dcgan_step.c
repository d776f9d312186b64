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
 *
 * After the warmup, runs 2N steps and samples the resident set size after
 * each; prints one JSON line: images/s over the 2N steps, peak RSS
 * (getrusage), the RSS after step N and after step 2N, and the largest RSS
 * sample of steps 1..N and of steps N+1..2N (memory is flat when the second
 * is not above the first), all in MiB.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <cblas.h>
#ifdef _OPENMP
#include <omp.h>
#endif

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
    tg_rng rng;
    int64_t batch, nz;
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

static double peak_rss_mib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0;   /* ru_maxrss is in KiB on Linux */
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

static void bench_init(bench *b, int64_t batch)
{
    dcgan_arch a = DCGAN_ARCH_INIT;
    memset(b, 0, sizeof *b);
    b->batch = batch;
    b->nz = a.nz;
    tg_rng_init(&b->rng, 0);
    CHECK(dcgan_generator_new(&b->g, &a, &b->rng));
    CHECK(dcgan_discriminator_new(&b->d, &a, &b->rng));
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
}

/* bce_with_logits(D(x), target), a new reference. */
static tg_tensor *d_loss(bench *b, tg_tensor *x, tg_tensor *target)
{
    tg_tensor *logits, *loss;
    CHECK(tg_module_forward(b->d, &logits, x));
    CHECK(tg_bce_with_logits(&loss, logits, target, TG_REDUCTION_MEAN));
    tg_tensor_release(logits);
    return loss;
}

static void step(bench *b)
{
    tg_tensor *z, *fake, *fake_det, *lr, *lf, *ld, *lg;
    CHECK(tg_tensor_zeros(&z, TG_F32, 2, (int64_t[]){b->batch, b->nz}));
    CHECK(tg_tensor_rand_normal(z, &b->rng, 0.0, 1.0));
    CHECK(tg_module_forward(b->g, &fake, z));
    CHECK(tg_tensor_detach(&fake_det, fake));

    tg_optimizer_zero_grad(b->opt_d);
    lr = d_loss(b, b->real, b->ones);
    lf = d_loss(b, fake_det, b->zeros);
    CHECK(tg_add(&ld, lr, lf));
    CHECK(tg_backward(ld, NULL, NULL));
    CHECK(tg_optimizer_step(b->opt_d));

    tg_optimizer_zero_grad(b->opt_g);
    lg = d_loss(b, fake, b->ones);   /* also fills D's grads, cleared next step */
    CHECK(tg_backward(lg, NULL, NULL));
    CHECK(tg_optimizer_step(b->opt_g));

    tg_tensor *all[] = {lg, ld, lf, lr, fake_det, fake, z};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tg_tensor_release(all[i]);
}

static int parse_int(const char *s, long lo, long *v)
{
    char *end;
    *v = strtol(s, &end, 10);
    return *end == '\0' && end != s && *v >= lo ? 0 : -1;
}

int main(int argc, char **argv)
{
    long batch = 64, threads = 0, steps = 20, warmup = 3;
    for (int i = 1; i < argc; i += 2) {
        long *dst = !strcmp(argv[i], "--batch")     ? &batch
                    : !strcmp(argv[i], "--threads") ? &threads
                    : !strcmp(argv[i], "--steps")   ? &steps
                    : !strcmp(argv[i], "--warmup")  ? &warmup
                                                    : NULL;
        if (!dst || i + 1 >= argc || parse_int(argv[i + 1], dst == &warmup ? 0 : 1, dst)) {
            fprintf(stderr, "usage: dcgan_step [--batch 64] [--threads T] [--steps 20] "
                            "[--warmup 3]\n");
            return 2;
        }
    }
    if (threads > 0) {
        openblas_set_num_threads((int)threads);
#ifdef _OPENMP
        omp_set_num_threads((int)threads);
#endif
    }
    bench b;
    bench_init(&b, batch);
    for (long i = 0; i < warmup; i++) step(&b);
    /* Reading /proc/self/statm takes microseconds: negligible against a step. */
    double t0 = now_s(), rss[2] = {0, 0}, max_half[2] = {0, 0};
    for (long i = 0; i < 2 * steps; i++) {
        step(&b);
        double r = rss_mib();
        int half = i >= steps;
        if (r > max_half[half]) max_half[half] = r;
        if (i == steps - 1 || i == 2 * steps - 1) rss[half] = r;
    }
    double secs = now_s() - t0;
    printf("{\"impl\": \"tapegrad\", \"batch\": %ld, \"threads\": %ld, \"steps\": %ld, "
           "\"seconds\": %.3f, \"images_per_s\": %.2f, \"peak_rss_mib\": %.1f, "
           "\"rss_after_n_mib\": %.1f, \"rss_after_2n_mib\": %.1f, "
           "\"rss_max_first_n_mib\": %.1f, \"rss_max_second_n_mib\": %.1f}\n",
           batch, threads, 2 * steps, secs, (double)(2 * steps * batch) / secs, peak_rss_mib(),
           rss[0], rss[1], max_half[0], max_half[1]);
    bench_free(&b);
    return 0;
}
