/* bench/pool: the time of one pooling or upsampling call, forward or
 * forward and backward, for bench/pool.py (which runs the same call in
 * PyTorch and gives the ratio).
 *
 *   pool --op max|avg|up|adaptive_max|adaptive_avg --shape N,C,H,W [--kernel K]
 *        [--stride S (0: K)] [--padding P] [--scale F] [--size O]
 *        [--dtype f32|f64|bf16|f16] [--threads T] [--repeat R (20)] [--backward]
 *
 * x is U[-1, 1) of the shape (its last two dims spatial); adaptive_max pools
 * both to O (tg_adaptive_max_pool without its indices), adaptive_avg too
 * (tg_adaptive_avg_pool).  The forward pass is y = op(x) with x not
 * requiring grad; with --backward x requires grad and
 * a pass is y = op(x), backward with a fixed random grad_y of y's shape, and
 * x's gradient released, as PyTorch's x.grad = None.  After three passes of
 * warmup, times R passes and prints one JSON line with the median in ms. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tapegrad/tapegrad.h>

#include "timing.h"

#define CHECK(call) BENCH_CHECK("pool", call)

typedef struct pool_case {
    char op;   /* 'm'ax, 'a'vg, 'u'p, 'A'daptive max, adaptive a'V'g */
    tg_pool_params p;
    int64_t size[2];
    int64_t scale[2];
    tg_tensor *x, *gy;   /* gy: NULL for the forward alone */
} pool_case;

static void run_op(const pool_case *c, tg_tensor **y)
{
    if (c->op == 'm') CHECK(tg_max_pool(y, c->x, 2, &c->p));
    else if (c->op == 'a') CHECK(tg_avg_pool(y, c->x, 2, &c->p));
    else if (c->op == 'A') CHECK(tg_adaptive_max_pool(y, NULL, c->x, 2, c->size));
    else if (c->op == 'V') CHECK(tg_adaptive_avg_pool(y, c->x, 2, c->size));
    else CHECK(tg_upsample_nearest(y, c->x, 2, c->scale));
}

static void pass(const void *arg)
{
    const pool_case *c = arg;
    tg_tensor *y = NULL;
    run_op(c, &y);
    if (c->gy) {
        CHECK(tg_backward(y, c->gy, NULL));
        tg_tensor_zero_grad(c->x);
    }
    tg_tensor_release(y);
}

static int usage(void)
{
    fprintf(stderr, "usage: pool --op max|avg|up|adaptive_max|adaptive_avg --shape N,C,H,W "
                    "[--kernel K] [--stride S] [--padding P] [--scale F] [--size O] "
                    "[--dtype f32|f64|bf16|f16] [--threads T] [--repeat R] [--backward]\n");
    return 2;
}

int main(int argc, char **argv)
{
    long kernel = 2, stride = 0, padding = 0, scale = 2, size = 1, threads = 0, repeat = 20;
    int64_t shape[4] = {0};
    bool backward = false, have_shape = false;
    tg_dtype dt = TG_F32;
    pool_case c = {.op = 0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long *dst = !strcmp(a, "--kernel")    ? &kernel
                    : !strcmp(a, "--stride")  ? &stride
                    : !strcmp(a, "--padding") ? &padding
                    : !strcmp(a, "--scale")   ? &scale
                    : !strcmp(a, "--size")    ? &size
                    : !strcmp(a, "--threads") ? &threads
                    : !strcmp(a, "--repeat")  ? &repeat
                                              : NULL;
        if (!strcmp(a, "--backward")) {
            backward = true;
        } else if (dst && v) {
            char *end;
            *dst = strtol(v, &end, 10);
            if (*end || end == v || *dst < 0) return usage();
            i++;
        } else if (!strcmp(a, "--op") && v &&
                   (!strcmp(v, "max") || !strcmp(v, "avg") || !strcmp(v, "up"))) {
            c.op = v[0];
            i++;
        } else if (!strcmp(a, "--op") && v && !strcmp(v, "adaptive_max")) {
            c.op = 'A';
            i++;
        } else if (!strcmp(a, "--op") && v && !strcmp(v, "adaptive_avg")) {
            c.op = 'V';
            i++;
        } else if (!strcmp(a, "--dtype") && v && bench_parse_dtype(v, &dt)) {
            i++;
        } else if (!strcmp(a, "--shape") && v) {
            have_shape = sscanf(v, "%" SCNd64 ",%" SCNd64 ",%" SCNd64 ",%" SCNd64, &shape[0],
                                &shape[1], &shape[2], &shape[3]) == 4;
            i++;
        } else {
            return usage();
        }
    }
    if (!c.op || !have_shape || repeat < 1) return usage();
    if (threads > 0) CHECK(tg_set_num_threads((int)threads));
    c.p = (tg_pool_params)TG_POOL_PARAMS_INIT;
    tg_pool_params_set(&c.p, kernel, stride, padding);
    c.scale[0] = c.scale[1] = scale;
    c.size[0] = c.size[1] = size;

    tg_rng rng;
    tg_rng_init(&rng, 1);
    CHECK(tg_tensor_zeros(&c.x, dt, 4, shape));
    CHECK(tg_tensor_rand_uniform(c.x, &rng, -1.0, 1.0));
    if (backward) {
        tg_tensor *y = NULL;
        run_op(&c, &y);
        CHECK(tg_tensor_zeros(&c.gy, dt, tg_tensor_ndim(y), tg_tensor_shape(y)));
        CHECK(tg_tensor_rand_uniform(c.gy, &rng, -1.0, 1.0));
        tg_tensor_release(y);
        CHECK(tg_tensor_set_requires_grad(c.x, true));
    }
    if (bench_time_calls(pass, &c, repeat)) return 1;
    tg_tensor_release(c.gy);
    tg_tensor_release(c.x);
    return 0;
}
