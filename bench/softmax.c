/* bench/softmax: the time of one softmax, log_softmax or cross_entropy call
 * over the last dim of a (N, C) tensor, forward or forward and backward, for
 * bench/softmax.py (which runs the same call in PyTorch and gives the
 * ratio).
 *
 *   softmax --op softmax|log_softmax|cross_entropy --shape N,C
 *           [--dtype f32|f64|bf16|f16] [--threads T] [--repeat R (20)] [--backward]
 *
 * x is U[-4, 4) of the shape; cross_entropy's targets are n % C (mean
 * reduction).  With --backward x requires grad and a pass is the forward, a
 * backward with a fixed random grad_y (softmax, log_softmax) or from the loss
 * (cross_entropy), and x's gradient released, as PyTorch's x.grad = None.
 * After three passes of warmup, times R passes and prints one JSON line with
 * the median in ms. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tapegrad/tapegrad.h>

#include "timing.h"

#define CHECK(call)                                                                    \
    do {                                                                               \
        int rc_ = (call);                                                              \
        if (rc_ < 0) {                                                                 \
            fprintf(stderr, "softmax: %s failed: %s: %s\n", #call, tg_status_name(rc_), \
                    tg_error_message());                                               \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)

typedef struct softmax_case {
    char op;   /* 's'oftmax, 'l'og_softmax, 'c'ross_entropy */
    bool backward;
    tg_tensor *x, *target, *gy;
} softmax_case;

static void run_op(const softmax_case *c, tg_tensor **y)
{
    if (c->op == 's') CHECK(tg_softmax(y, c->x, 1));
    else if (c->op == 'l') CHECK(tg_log_softmax(y, c->x, 1));
    else CHECK(tg_cross_entropy(y, c->x, c->target, TG_REDUCTION_MEAN));
}

static void pass(const void *arg)
{
    const softmax_case *c = arg;
    tg_tensor *y = NULL;
    run_op(c, &y);
    if (c->backward) {
        CHECK(tg_backward(y, c->gy, NULL));
        tg_tensor_zero_grad(c->x);
    }
    tg_tensor_release(y);
}

static int usage(void)
{
    fprintf(stderr, "usage: softmax --op softmax|log_softmax|cross_entropy --shape N,C "
                    "[--dtype f32|f64|bf16|f16] [--threads T] [--repeat R] [--backward]\n");
    return 2;
}

int main(int argc, char **argv)
{
    long threads = 0, repeat = 20;
    int64_t shape[2] = {0};
    bool have_shape = false;
    tg_dtype dt = TG_F32;
    softmax_case c = {.op = 0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long *dst = !strcmp(a, "--threads") ? &threads : !strcmp(a, "--repeat") ? &repeat : NULL;
        if (!strcmp(a, "--backward")) {
            c.backward = true;
        } else if (dst && v) {
            char *end;
            *dst = strtol(v, &end, 10);
            if (*end || end == v || *dst < 0) return usage();
            i++;
        } else if (!strcmp(a, "--op") && v &&
                   (!strcmp(v, "softmax") || !strcmp(v, "log_softmax") ||
                    !strcmp(v, "cross_entropy"))) {
            c.op = v[0] == 'l' ? 'l' : v[0] == 'c' ? 'c' : 's';
            i++;
        } else if (!strcmp(a, "--dtype") && v && bench_parse_dtype(v, &dt)) {
            i++;
        } else if (!strcmp(a, "--shape") && v) {
            have_shape = sscanf(v, "%" SCNd64 ",%" SCNd64, &shape[0], &shape[1]) == 2 &&
                         shape[0] > 0 && shape[1] > 0;
            i++;
        } else {
            return usage();
        }
    }
    if (!c.op || !have_shape || repeat < 1) return usage();
    if (threads > 0) CHECK(tg_set_num_threads((int)threads));

    tg_rng rng;
    tg_rng_init(&rng, 1);
    CHECK(tg_tensor_zeros(&c.x, dt, 2, shape));
    CHECK(tg_tensor_rand_uniform(c.x, &rng, -4.0, 4.0));
    CHECK(tg_tensor_zeros(&c.target, TG_I64, 1, shape));
    int64_t *t = tg_tensor_data(c.target);
    for (int64_t n = 0; n < shape[0]; n++) t[n] = n % shape[1];
    if (c.backward && c.op != 'c') {
        CHECK(tg_tensor_zeros(&c.gy, dt, 2, shape));
        CHECK(tg_tensor_rand_uniform(c.gy, &rng, -1.0, 1.0));
    }
    if (c.backward) CHECK(tg_tensor_set_requires_grad(c.x, true));
    if (bench_time_calls(pass, &c, repeat)) return 1;
    tg_tensor_release(c.gy);
    tg_tensor_release(c.target);
    tg_tensor_release(c.x);
    return 0;
}
