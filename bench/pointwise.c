/* bench/pointwise: the time of one element-wise op call on a (N, C) tensor,
 * forward or forward and backward, for bench/pointwise.py (which runs the
 * same call in PyTorch and gives the ratio).
 *
 *   pointwise --op gelu|sigmoid|tanh|silu|exp|relu --shape N,C
 *             [--dtype f32|f64|bf16|f16] [--threads T] [--repeat R (20)] [--backward]
 *
 * x is U[-4, 4) of the shape.  With --backward x requires grad and a pass
 * is the forward, a backward with a fixed random grad_y (U[-1, 1)) and x's
 * gradient released, as PyTorch's x.grad = None.  After three passes of
 * warmup, times R passes and prints one JSON line with the median in ms. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tapegrad/tapegrad.h>

#include "timing.h"

#define CHECK(call) BENCH_CHECK("pointwise", call)

typedef int (*op_fn)(tg_tensor **, tg_tensor *);

static const struct {
    const char *name;
    op_fn fn;
} OPS[] = {{"gelu", tg_gelu}, {"sigmoid", tg_sigmoid}, {"tanh", tg_tanh},
           {"silu", tg_silu}, {"exp", tg_exp},         {"relu", tg_relu}};

typedef struct pointwise_case {
    op_fn fn;
    bool backward;
    tg_tensor *x, *gy;
} pointwise_case;

static void pass(const void *arg)
{
    const pointwise_case *c = arg;
    tg_tensor *y = NULL;
    CHECK(c->fn(&y, c->x));
    if (c->backward) {
        CHECK(tg_backward(y, c->gy, NULL));
        tg_tensor_zero_grad(c->x);
    }
    tg_tensor_release(y);
}

int main(int argc, char **argv)
{
    const char *names[sizeof OPS / sizeof OPS[0]];
    for (size_t k = 0; k < sizeof OPS / sizeof OPS[0]; k++) names[k] = OPS[k].name;
    bench_nc_args a;
    if (!bench_parse_nc(argc, argv, names, (int)(sizeof OPS / sizeof OPS[0]),
                        "usage: pointwise --op gelu|sigmoid|tanh|silu|exp|relu --shape N,C "
                        "[--dtype f32|f64|bf16|f16] [--threads T] [--repeat R] [--backward]",
                        &a))
        return 2;
    if (a.threads > 0) CHECK(tg_set_num_threads((int)a.threads));
    pointwise_case c = {.fn = OPS[a.op].fn, .backward = a.backward};
    const tg_dtype dt = a.dt;
    const int64_t *shape = a.shape;

    tg_rng rng;
    tg_rng_init(&rng, 1);
    CHECK(tg_tensor_zeros(&c.x, dt, 2, shape));
    CHECK(tg_tensor_rand_uniform(c.x, &rng, -4.0, 4.0));
    if (c.backward) {
        CHECK(tg_tensor_zeros(&c.gy, dt, 2, shape));
        CHECK(tg_tensor_rand_uniform(c.gy, &rng, -1.0, 1.0));
        CHECK(tg_tensor_set_requires_grad(c.x, true));
    }
    if (bench_time_calls(pass, &c, a.repeat)) return 1;
    tg_tensor_release(c.gy);
    tg_tensor_release(c.x);
    return 0;
}
