/* bench/rows: the time of one call of an op on a (N, C) tensor, forward or
 * forward and backward, for bench/rows.py and bench/pointwise.py (which
 * run the same call in PyTorch and give the ratio): softmax, log_softmax,
 * cross_entropy along the last dim (also with label smoothing 0.1, and
 * with probability targets), sum and mean of every element, sum
 * over the last dim, mse_loss, layer_norm over the last dim (weight and
 * bias U[0.5, 2) and U[-1, 1)), and the element-wise gelu, sigmoid, tanh,
 * silu, exp and relu.
 *
 *   rows --op softmax|log_softmax|cross_entropy|sum|mean|sum_dim1|mse_loss|layer_norm|
 *             cross_entropy_smooth|cross_entropy_probs|gelu|sigmoid|tanh|silu|exp|relu
 *        --shape N,C[,d1[,d2]] [--dtype f32|f64|bf16|f16] [--threads T]
 *        [--repeat R (20)] [--backward]
 *
 * x is U[-4, 4) of the shape (d1, d2: spatial dims, for softmax,
 * log_softmax and cross_entropy, whose class dim is then 1);
 * cross_entropy's targets (N, d1, ...) are
 * k % C at flat index k (n % C for (N, C)), cross_entropy_probs' the
 * softmax over dim 1 of a second U[-4, 4) tensor, mse_loss's
 * target a second U[-4, 4) tensor (both with mean reduction).  With
 * --backward x requires grad and a pass is the forward, a backward with a
 * fixed random grad_y of the output's shape, and x's gradient released, as
 * PyTorch's x.grad = None.
 * After three passes of warmup, times R passes and prints one JSON line with
 * the median in ms. */
#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tapegrad/tapegrad.h>

#include "timing.h"

#define CHECK(call) BENCH_CHECK("rows", call)

typedef struct rows_case {
    int op;   /* its index in ops */
    bool backward;
    tg_tensor *x, *target, *probs, *other, *w, *b, *gy;
} rows_case;

/* The ops; from FIRST_UNARY on, the element-wise ones of unary[], in order. */
enum { FIRST_UNARY = 10 };
static const char *const ops[] = {"softmax",  "log_softmax", "cross_entropy", "sum",
                                  "mean",     "sum_dim1",    "mse_loss",      "layer_norm",
                                  "cross_entropy_smooth",    "cross_entropy_probs",
                                  "gelu",     "sigmoid",     "tanh",          "silu",
                                  "exp",      "relu"};
static int (*const unary[])(tg_tensor **, tg_tensor *) = {tg_gelu, tg_sigmoid, tg_tanh,
                                                          tg_silu, tg_exp,     tg_relu};
static_assert(FIRST_UNARY + sizeof unary / sizeof unary[0] == sizeof ops / sizeof ops[0],
              "rows.c: every op after FIRST_UNARY has its function in unary");

static void run_op(const rows_case *c, tg_tensor **y)
{
    switch (c->op) {
    case 0: CHECK(tg_softmax(y, c->x, 1)); break;
    case 1: CHECK(tg_log_softmax(y, c->x, 1)); break;
    case 2:   /* (N, C): tg_cross_entropy; spatial: tg_cross_entropy_ex */
        if (tg_tensor_ndim(c->x) == 2)
            CHECK(tg_cross_entropy(y, c->x, c->target, TG_REDUCTION_MEAN));
        else
            CHECK(tg_cross_entropy_ex(y, c->x, c->target, NULL, TG_IGNORE_INDEX_DEFAULT,
                                      TG_REDUCTION_MEAN, 0.0));
        break;
    case 3: CHECK(tg_sum(y, c->x)); break;
    case 4: CHECK(tg_mean(y, c->x)); break;
    case 5: CHECK(tg_sum_dims(y, c->x, 1, (int[]){1}, false)); break;
    case 6: CHECK(tg_mse_loss(y, c->x, c->other, TG_REDUCTION_MEAN)); break;
    case 7: CHECK(tg_layer_norm(y, c->x, 1, &tg_tensor_shape(c->x)[1], c->w, c->b, 1e-5)); break;
    case 8:
        CHECK(tg_cross_entropy_ex(y, c->x, c->target, NULL, TG_IGNORE_INDEX_DEFAULT,
                                  TG_REDUCTION_MEAN, 0.1));
        break;
    case 9:
        CHECK(tg_cross_entropy_ex(y, c->x, c->probs, NULL, TG_IGNORE_INDEX_DEFAULT,
                                  TG_REDUCTION_MEAN, 0.0));
        break;
    default: CHECK(unary[c->op - FIRST_UNARY](y, c->x)); break;
    }
}

/* The arguments: --op NAME (op: its index in ops), --shape N,C[,d1[,d2]],
 * [--dtype f32|f64|bf16|f16 (f32)], [--threads T (0: the default)],
 * [--repeat R (20)], [--backward]. */
typedef struct rows_args {
    int op, ndim;
    int64_t shape[4];
    tg_dtype dt;
    long threads, repeat;
    bool backward;
} rows_args;

/* Parses argv into *a; false (after printing the usage to stderr) for a
 * missing or unknown argument. */
static bool parse_args(int argc, char **argv, rows_args *a)
{
    *a = (rows_args){.op = -1, .dt = TG_F32, .repeat = 20};
    bool have_shape = false, ok = true;
    for (int i = 1; i < argc && ok; i++) {
        const char *s = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long *dst = !strcmp(s, "--threads") ? &a->threads : !strcmp(s, "--repeat") ? &a->repeat
                                                                                 : NULL;
        if (!strcmp(s, "--backward")) {
            a->backward = true;
            continue;
        }
        if (!v) {
            ok = false;
        } else if (dst) {
            char *end;
            *dst = strtol(v, &end, 10);
            ok = !*end && end != v && *dst >= 0;
        } else if (!strcmp(s, "--op")) {
            for (int k = 0; k < (int)(sizeof ops / sizeof ops[0]); k++)
                if (!strcmp(v, ops[k])) a->op = k;
            ok = a->op >= 0;
        } else if (!strcmp(s, "--dtype")) {
            ok = bench_parse_dtype(v, &a->dt);
        } else if (!strcmp(s, "--shape")) {
            a->ndim = sscanf(v, "%" SCNd64 ",%" SCNd64 ",%" SCNd64 ",%" SCNd64, &a->shape[0],
                             &a->shape[1], &a->shape[2], &a->shape[3]);
            have_shape = a->ndim >= 2;
            for (int d = 0; d < a->ndim; d++) have_shape = have_shape && a->shape[d] > 0;
        } else {
            ok = false;
        }
        i++;
    }
    if (ok && a->op >= 0 && have_shape && a->repeat >= 1) return true;
    fprintf(stderr, "usage: rows --op softmax|log_softmax|cross_entropy|sum|mean|sum_dim1|"
                    "mse_loss|layer_norm|cross_entropy_smooth|cross_entropy_probs|gelu|sigmoid|tanh|"
                    "silu|exp|relu --shape N,C[,d1[,d2]] "
                    "[--dtype f32|f64|bf16|f16] [--threads T] [--repeat R] [--backward]\n");
    return false;
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
    rows_args a;
    if (!parse_args(argc, argv, &a)) return 2;
    if (a.threads > 0) CHECK(tg_set_num_threads((int)a.threads));
    rows_case c = {.op = a.op, .backward = a.backward};
    const tg_dtype dt = a.dt;
    const int64_t *shape = a.shape;

    tg_rng rng;
    tg_rng_init(&rng, 1);
    const int64_t tshape[3] = {shape[0], shape[2], shape[3]};   /* shape without dim 1 */
    CHECK(tg_tensor_zeros(&c.x, dt, a.ndim, shape));
    CHECK(tg_tensor_rand_uniform(c.x, &rng, -4.0, 4.0));
    CHECK(tg_tensor_zeros(&c.target, TG_I64, a.ndim - 1, tshape));
    int64_t *t = tg_tensor_data(c.target);
    for (int64_t k = 0; k < tg_tensor_numel(c.target); k++) t[k] = k % shape[1];
    CHECK(tg_tensor_zeros(&c.other, dt, a.ndim, shape));
    CHECK(tg_tensor_rand_uniform(c.other, &rng, -4.0, 4.0));
    CHECK(tg_softmax(&c.probs, c.other, 1));
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
    tg_tensor_release(c.probs);
    tg_tensor_release(c.w);
    tg_tensor_release(c.b);
    tg_tensor_release(c.target);
    tg_tensor_release(c.x);
    return 0;
}
