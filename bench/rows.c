/* bench/rows: the time of one call of an op over the rows of a (N, C)
 * tensor, forward or forward and backward, for bench/rows.py (which runs
 * the same call in PyTorch and gives the ratio): softmax, log_softmax,
 * cross_entropy along the last dim, sum and mean of every element, sum
 * over the last dim, mse_loss, layer_norm over the last dim (weight and
 * bias U[0.5, 2) and U[-1, 1)).
 *
 *   rows --op softmax|log_softmax|cross_entropy|sum|mean|sum_dim1|mse_loss|layer_norm
 *        --shape N,C [--dtype f32|f64|bf16|f16] [--threads T] [--repeat R (20)]
 *        [--backward]
 *
 * x is U[-4, 4) of the shape; cross_entropy's targets are n % C, mse_loss's
 * target a second U[-4, 4) tensor (both with mean reduction).  With
 * --backward x requires grad and a pass is the forward, a backward with a
 * fixed random grad_y of the output's shape, and x's gradient released, as
 * PyTorch's x.grad = None.
 * After three passes of warmup, times R passes and prints one JSON line with
 * the median in ms. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tapegrad/tapegrad.h>

#include "timing.h"

#define CHECK(call) BENCH_CHECK("rows", call)

typedef struct rows_case {
    const char *op;
    bool backward;
    tg_tensor *x, *target, *other, *w, *b, *gy;
} rows_case;

static const char *const ops[] = {"softmax", "log_softmax", "cross_entropy", "sum", "mean",
                                  "sum_dim1", "mse_loss", "layer_norm"};

static void run_op(const rows_case *c, tg_tensor **y)
{
    const char *op = c->op;
    if (!strcmp(op, "softmax")) CHECK(tg_softmax(y, c->x, 1));
    else if (!strcmp(op, "log_softmax")) CHECK(tg_log_softmax(y, c->x, 1));
    else if (!strcmp(op, "cross_entropy"))
        CHECK(tg_cross_entropy(y, c->x, c->target, TG_REDUCTION_MEAN));
    else if (!strcmp(op, "sum")) CHECK(tg_sum(y, c->x));
    else if (!strcmp(op, "mean")) CHECK(tg_mean(y, c->x));
    else if (!strcmp(op, "sum_dim1")) CHECK(tg_sum_dims(y, c->x, 1, (int[]){1}, false));
    else if (!strcmp(op, "mse_loss")) CHECK(tg_mse_loss(y, c->x, c->other, TG_REDUCTION_MEAN));
    else CHECK(tg_layer_norm(y, c->x, 1, &tg_tensor_shape(c->x)[1], c->w, c->b, 1e-5));
}

static void pass(const void *arg)
{
    const rows_case *c = arg;
    tg_tensor *y = NULL;
    run_op(c, &y);
    if (c->backward) {
        CHECK(tg_backward(y, c->gy, NULL));
        tg_tensor_zero_grad(c->x);
    }
    tg_tensor_release(y);
}

int main(int argc, char **argv)
{
    bench_nc_args a;
    if (!bench_parse_nc(argc, argv, ops, (int)(sizeof ops / sizeof ops[0]),
                        "usage: rows --op softmax|log_softmax|cross_entropy|sum|mean|sum_dim1|"
                        "mse_loss|layer_norm --shape N,C [--dtype f32|f64|bf16|f16] "
                        "[--threads T] [--repeat R] [--backward]",
                        &a))
        return 2;
    if (a.threads > 0) CHECK(tg_set_num_threads((int)a.threads));
    rows_case c = {.op = ops[a.op], .backward = a.backward};
    const tg_dtype dt = a.dt;
    const int64_t *shape = a.shape;

    tg_rng rng;
    tg_rng_init(&rng, 1);
    CHECK(tg_tensor_zeros(&c.x, dt, 2, shape));
    CHECK(tg_tensor_rand_uniform(c.x, &rng, -4.0, 4.0));
    CHECK(tg_tensor_zeros(&c.target, TG_I64, 1, shape));
    int64_t *t = tg_tensor_data(c.target);
    for (int64_t n = 0; n < shape[0]; n++) t[n] = n % shape[1];
    CHECK(tg_tensor_zeros(&c.other, dt, 2, shape));
    CHECK(tg_tensor_rand_uniform(c.other, &rng, -4.0, 4.0));
    CHECK(tg_tensor_zeros(&c.w, dt, 1, &shape[1]));
    CHECK(tg_tensor_rand_uniform(c.w, &rng, 0.5, 2.0));
    CHECK(tg_tensor_zeros(&c.b, dt, 1, &shape[1]));
    CHECK(tg_tensor_rand_uniform(c.b, &rng, -1.0, 1.0));
    if (c.backward) {
        tg_tensor *y = NULL;
        run_op(&c, &y);
        CHECK(tg_tensor_zeros(&c.gy, dt, tg_tensor_ndim(y), tg_tensor_shape(y)));
        CHECK(tg_tensor_rand_uniform(c.gy, &rng, -1.0, 1.0));
        tg_tensor_release(y);
        CHECK(tg_tensor_set_requires_grad(c.x, true));
    }
    if (bench_time_calls(pass, &c, a.repeat)) return 1;
    tg_tensor_release(c.gy);
    tg_tensor_release(c.other);
    tg_tensor_release(c.w);
    tg_tensor_release(c.b);
    tg_tensor_release(c.target);
    tg_tensor_release(c.x);
    return 0;
}
