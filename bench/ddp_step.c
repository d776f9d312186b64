/* bench/ddp_step: data-parallel DCGAN training steps over MPI.
 *
 *   mpirun -np R ddp_step [--batch 32] [--steps N (10)] [--warmup W (2)]
 *                         [--threads T (1)] [--no-overlap] [--bucket-mb X (25)]
 *                         [--no-broadcast-buffers] [--compress bf16|f16|f32 (f32)]
 *
 * The step of bench/dcgan_step (PyTorch's DCGAN example on the models of
 * examples/dcgan/model.h, BCE, Adam lr 2e-4, betas (0.5, 0.999)), with each
 * rank on its own batch of --batch images and both models' gradients
 * averaged by a tg_ddp (one per optimizer) before each Adam step.  The
 * tg_ddp is made as examples/dcgan --ddp makes it, by tg_ddp_new_module
 * with its defaults but for --no-overlap and --bucket-mb: so each
 * tg_ddp_finish also copies rank 0's BatchNorm buffers to every rank.
 * --no-broadcast-buffers turns that copy off (broadcast_buffers false).
 * --compress bf16 or f16 all-reduces the gradients in that dtype
 * (tg_ddp_opts.compress; f32, the default, does not compress).
 * Rank 0 prints one JSON line: ranks, threads, batch per rank, whether
 * buffers are broadcast, the compression, images/s of the whole job over
 * the N timed steps,
 * the milliseconds per step spent inside tg_ddp_finish (both reductions
 * and the buffers' broadcast: with --no-overlap all of the all-reduce, as
 * it starts after backward; with overlap the part not hidden behind
 * backward), the gradient bytes each rank sends per step and the bucket
 * counts.  bench/ddp.py runs it for 1 and 2 ranks, with and without
 * overlap, side by side.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cblas.h>

#include <tapegrad/dist.h>
#include <tapegrad/tapegrad.h>

#include "dcgan/model.h"

static tg_dist *g_dist;

#define CHECK(call)                                                               \
    do {                                                                          \
        int rc_ = (call);                                                         \
        if (rc_ < 0) {                                                            \
            fprintf(stderr, "ddp_step: %s failed: %s\n", #call, tg_error_message()); \
            tg_dist_abort(g_dist, rc_);                                           \
        }                                                                         \
    } while (0)

typedef struct side {
    tg_module *m;
    tg_optimizer *opt;
    tg_ddp *ddp;
} side;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void side_init(side *s, tg_module *m, const tg_ddp_opts *o)
{
    tg_tensor **p;
    int n;
    tg_adam_opts a = TG_ADAM_OPTS_INIT;
    a.lr = 2e-4;
    a.beta1 = 0.5;
    s->m = m;
    CHECK(tg_ddp_new_module(&s->ddp, g_dist, m, o));   /* rank 0's weights everywhere */
    CHECK(tg_module_parameters(m, &p, &n));
    CHECK(tg_adam_new(&s->opt, n, p, &a));
    free(p);
}

static void side_free(side *s)
{
    tg_ddp_free(s->ddp);
    tg_optimizer_free(s->opt);
    tg_module_release(s->m);
}

/* zero_grad, backward with the reduction, Adam. */
static void update(side *s, tg_tensor *loss)
{
    tg_optimizer_zero_grad(s->opt);
    CHECK(tg_ddp_prepare(s->ddp));
    CHECK(tg_backward(loss, NULL, NULL));
    CHECK(tg_ddp_finish(s->ddp));
    CHECK(tg_optimizer_step(s->opt));
}

static tg_tensor *bce_of(side *d, tg_tensor *x, tg_tensor *target)
{
    tg_tensor *logits, *loss;
    CHECK(tg_module_forward(d->m, &logits, x));
    CHECK(tg_bce_with_logits(&loss, logits, target, TG_REDUCTION_MEAN));
    tg_tensor_release(logits);
    return loss;
}

static void step(side *g, side *d, tg_tensor *real, tg_tensor *ones, tg_tensor *zeros,
                 tg_rng *rng, int64_t batch, int64_t nz)
{
    tg_tensor *z, *fake, *fake_d, *lr, *lf, *loss;
    CHECK(tg_tensor_zeros(&z, TG_F32, 2, (int64_t[]){batch, nz}));
    CHECK(tg_tensor_rand_normal(z, rng, 0.0, 1.0));
    CHECK(tg_module_forward(g->m, &fake, z));
    CHECK(tg_tensor_detach(&fake_d, fake));
    lr = bce_of(d, real, ones);
    lf = bce_of(d, fake_d, zeros);
    CHECK(tg_add(&loss, lr, lf));
    update(d, loss);
    tg_tensor_release(loss);
    tg_tensor_release(lf);
    tg_tensor_release(lr);
    tg_tensor_release(fake_d);
    /* G step: D frozen, so its parameters get no gradient */
    tg_tensor **dp;
    int n;
    CHECK(tg_module_parameters(d->m, &dp, &n));
    for (int i = 0; i < n; i++) CHECK(tg_tensor_set_requires_grad(dp[i], false));
    loss = bce_of(d, fake, ones);
    for (int i = 0; i < n; i++) CHECK(tg_tensor_set_requires_grad(dp[i], true));
    free(dp);
    update(g, loss);
    tg_tensor_release(loss);
    tg_tensor_release(fake);
    tg_tensor_release(z);
}

int main(int argc, char **argv)
{
    int64_t batch = 32;
    int steps = 10, warmup = 2, threads = 1;
    tg_ddp_opts o = TG_DDP_OPTS_INIT;
    CHECK(tg_dist_init(&g_dist, &argc, &argv));
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(argv[i], "--batch")) batch = atoll(v), i++;
        else if (!strcmp(argv[i], "--steps")) steps = atoi(v), i++;
        else if (!strcmp(argv[i], "--warmup")) warmup = atoi(v), i++;
        else if (!strcmp(argv[i], "--threads")) threads = atoi(v), i++;
        else if (!strcmp(argv[i], "--bucket-mb")) o.bucket_cap_bytes = (size_t)(atof(v) * (1 << 20)), i++;
        else if (!strcmp(argv[i], "--no-overlap")) o.overlap = false;
        else if (!strcmp(argv[i], "--no-broadcast-buffers")) o.broadcast_buffers = false;
        else if (!strcmp(argv[i], "--compress")) {
            CHECK(tg_dtype_from_name(&o.compress, v));   /* tg_ddp_new checks the rest */
            i++;
        }
        else {
            fprintf(stderr, "ddp_step: unknown argument '%s'\n", argv[i]);
            tg_dist_abort(g_dist, TG_EINVAL);
        }
    }
    if (batch < 1 || steps < 1 || warmup < 0 || threads < 1 || o.bucket_cap_bytes < 1) {
        fprintf(stderr, "ddp_step: --batch, --steps, --threads, --bucket-mb must be > 0\n");
        tg_dist_abort(g_dist, TG_EINVAL);
    }
    openblas_set_num_threads(threads);
    CHECK(tg_set_num_threads(threads));
    dcgan_arch a = DCGAN_ARCH_INIT;
    tg_rng rng;
    tg_rng_init(&rng, 0);
    tg_module *gm, *dm;
    CHECK(dcgan_generator_new(&gm, &a, &rng));
    CHECK(dcgan_discriminator_new(&dm, &a, &rng));
    side g, d;
    side_init(&g, gm, &o);
    side_init(&d, dm, &o);
    /* each rank its own data and noise */
    tg_rng_init(&rng, 1000 + (uint64_t)tg_dist_rank(g_dist));
    tg_tensor *real, *ones, *zeros;
    CHECK(tg_tensor_zeros(&real, TG_F32, 4, (int64_t[]){batch, 1, 28, 28}));
    CHECK(tg_tensor_rand_uniform(real, &rng, -1.0, 1.0));
    CHECK(tg_tensor_full(&ones, TG_F32, 2, (int64_t[]){batch, 1}, 1.0));
    CHECK(tg_tensor_zeros(&zeros, TG_F32, 2, (int64_t[]){batch, 1}));
    for (int s = 0; s < warmup; s++) step(&g, &d, real, ones, zeros, &rng, batch, a.nz);
    tg_ddp_stats g0, d0, g1, d1;
    CHECK(tg_ddp_get_stats(g.ddp, &g0));
    CHECK(tg_ddp_get_stats(d.ddp, &d0));
    CHECK(tg_dist_barrier(g_dist));
    double t0 = now_s();
    for (int s = 0; s < steps; s++) step(&g, &d, real, ones, zeros, &rng, batch, a.nz);
    CHECK(tg_dist_barrier(g_dist));
    double el = now_s() - t0;
    CHECK(tg_ddp_get_stats(g.ddp, &g1));
    CHECK(tg_ddp_get_stats(d.ddp, &d1));
    int world = tg_dist_size(g_dist);
    double finish_ms = 1e3 * (g1.finish_seconds - g0.finish_seconds + d1.finish_seconds -
                              d0.finish_seconds) / steps;
    if (tg_dist_rank(g_dist) == 0)
        printf("{\"ranks\": %d, \"threads\": %d, \"batch_per_rank\": %lld, \"overlap\": %s, "
               "\"broadcast_buffers\": %s, \"compress\": \"%s\", "
               "\"bucket_mb\": %g, \"images_per_s\": %.1f, \"step_ms\": %.1f, "
               "\"finish_ms_per_step\": %.2f, \"grad_bytes_per_step\": %lld, "
               "\"buckets\": [%d, %d]}\n",
               world, threads, (long long)batch, o.overlap ? "true" : "false",
               o.broadcast_buffers ? "true" : "false", tg_dtype_name(o.compress),
               (double)o.bucket_cap_bytes / (1 << 20),
               (double)(world * batch * steps) / el, 1e3 * el / steps, finish_ms,
               (long long)(g1.bytes_per_step + d1.bytes_per_step), g1.n_buckets, d1.n_buckets);
    tg_tensor_release(zeros);
    tg_tensor_release(ones);
    tg_tensor_release(real);
    side_free(&g);
    side_free(&d);
    tg_dist_free(g_dist);
    return 0;
}
