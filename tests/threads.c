/* tests/threads.c - two application threads training on shared parameters,
 * each op split over the library's worker pool (2 threads), as
 * docs/autograd.md ("Threads") allows: each thread builds, runs backward on
 * and frees its own graph, and both add into the shared leaves' .grad.
 *
 * A plain program, not a Criterion test, so that it also runs in a
 * ThreadSanitizer build (Criterion's runner does not): `make test-tsan`.
 * It checks that the shared gradients equal those of the same steps run one
 * after the other on one thread, to within f32 summation order, and exits 1
 * with a message when they do not.  Each step is a ConvTranspose2d, a conv
 * back down, tanh, BatchNorm-free mean: the ops of the DCGAN step that run on
 * the pool (im2col/col2im, GEMM slices, reductions). */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "tapegrad/tapegrad.h"

enum { STEPS = 12, THREADS = 2 };

static tg_tensor *W, *B, *V;   /* shared: convT weight and bias, conv weight */

static int fail(const char *what)
{
    fprintf(stderr, "threads: %s: %s\n", what, tg_error_message());
    return -1;
}

/* One step of thread t (its own input, from seed t * STEPS + k). */
static int step(int t, int k)
{
    tg_tensor *x = NULL, *y = NULL, *z = NULL, *a = NULL, *m = NULL;
    tg_rng rng;
    tg_rng_init(&rng, (uint64_t)(t * STEPS + k + 1));
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    p.stride[0] = p.stride[1] = 2;
    tg_conv_params_set_padding(&p, 1);
    int rc = tg_tensor_zeros(&x, TG_F32, 4, (int64_t[]){8, 16, 14, 14});
    if (rc == TG_OK) rc = tg_tensor_rand_normal(x, &rng, 0.0, 1.0);
    if (rc == TG_OK) rc = tg_conv_transpose(&y, x, W, B, &p);   /* (8, 8, 28, 28) */
    if (rc == TG_OK) rc = tg_conv(&z, y, V, NULL, &p);          /* (8, 16, 14, 14) */
    if (rc == TG_OK) rc = tg_tanh(&a, z);
    if (rc == TG_OK) rc = tg_mean(&m, a);
    if (rc == TG_OK) rc = tg_backward(m, NULL, NULL);
    tg_tensor_release(m), tg_tensor_release(a), tg_tensor_release(z);
    tg_tensor_release(y), tg_tensor_release(x);
    return rc < 0 ? fail("step") : 0;
}

static void *worker(void *arg)
{
    const int t = (int)(intptr_t)arg;
    for (int k = 0; k < STEPS; k++)
        if (step(t, k) < 0) return (void *)1;
    return NULL;
}

static double *grads(int *n)
{
    tg_tensor *ps[3] = {W, B, V};
    int64_t total = 0, at = 0;
    for (int i = 0; i < 3; i++) total += tg_tensor_numel(ps[i]);
    double *g = malloc((size_t)total * sizeof *g);
    for (int i = 0; g && i < 3; i++) {
        tg_tensor_to_doubles(tg_tensor_grad(ps[i]), g + at, tg_tensor_numel(ps[i]));
        at += tg_tensor_numel(ps[i]);
        tg_tensor_zero_grad(ps[i]);
    }
    *n = (int)total;
    return g;
}

int main(void)
{
    tg_rng rng;
    tg_rng_init(&rng, 7);
    if (tg_set_num_threads(2) < 0) return fail("set_num_threads"), 1;
    if (tg_tensor_zeros(&W, TG_F32, 4, (int64_t[]){16, 8, 4, 4}) < 0 ||
        tg_tensor_zeros(&B, TG_F32, 1, (int64_t[]){8}) < 0 ||
        tg_tensor_zeros(&V, TG_F32, 4, (int64_t[]){16, 8, 4, 4}) < 0)
        return fail("zeros"), 1;
    tg_tensor_rand_normal(W, &rng, 0.0, 0.1);
    tg_tensor_rand_normal(B, &rng, 0.0, 0.1);
    tg_tensor_rand_normal(V, &rng, 0.0, 0.1);
    tg_tensor_set_requires_grad(W, true);
    tg_tensor_set_requires_grad(B, true);
    tg_tensor_set_requires_grad(V, true);

    /* the same steps one after the other, on this thread */
    for (int t = 0; t < THREADS; t++)
        if (worker((void *)(intptr_t)t) != NULL) return 1;
    int n = 0;
    double *want = grads(&n);

    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++)
        if (pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t) != 0) return 1;
    int bad = 0;
    for (int t = 0; t < THREADS; t++) {
        void *r = NULL;
        pthread_join(th[t], &r);
        bad |= r != NULL;
    }
    if (bad) return 1;
    /* The two orders add the same f32 terms differently: agreement to a few
     * units of f32 rounding of the largest gradient value. */
    double *got = grads(&n), worst = 0, scale = 0;
    int at = 0;
    for (int i = 0; want && got && i < n; i++) {
        scale = fmax(scale, fabs(want[i]));
        if (fabs(got[i] - want[i]) > worst) worst = fabs(got[i] - want[i]), at = i;
    }
    const bool ok = want && got && scale > 0 && worst <= 1e-5 * scale;
    if (!ok) fprintf(stderr, "threads: gradient %d: %.9g on two threads, %.9g on one\n", at,
                     got ? got[at] : NAN, want ? want[at] : NAN);
    else printf("threads: %d gradient values agree (largest difference %.2g of %.2g)\n", n,
                worst, scale);
    free(want), free(got);
    tg_tensor_release(W), tg_tensor_release(B), tg_tensor_release(V);
    return ok ? 0 : 1;
}
