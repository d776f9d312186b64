/* bench/indexing: the time of one cumsum, gather, index_select,
 * scatter_add, index_add, topk, argmax or amax call (the forward), for
 * bench/indexing.py
 * (which runs the same call in PyTorch and gives the ratio).
 *
 *   indexing --op cumsum|gather|index_select|scatter_add|index_add|topk|argmax|amax
 *            --shape A,B[,C] [--dim D] [--len L] [--dtype f32|f64|bf16|f16]
 *            [--threads T] [--repeat R (20)]
 *
 * x (and src) are U[-1, 1) in the dtype.  gather and scatter_add take an
 * index of x's shape, index_select and index_add one of L values (default:
 * x's extent at dim); index values are uniform over x's extent at dim.
 * topk takes the L largest along dim (values and indices, sorted), argmax
 * the index of each line's largest along dim, amax its value.
 * After three calls of warmup, times R calls and prints one JSON line with
 * the median in ms. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tapegrad/tapegrad.h>

#include "timing.h"

#define CHECK(call) BENCH_CHECK("indexing", call)

typedef struct index_case {
    const char *op;
    int dim;
    int64_t k;                    /* topk */
    tg_tensor *x, *index, *src;   /* src: scatter_add and index_add only */
} index_case;

static void call(const void *arg)
{
    const index_case *c = arg;
    tg_tensor *y = NULL, *i = NULL;
    if (!strcmp(c->op, "cumsum")) CHECK(tg_cumsum(&y, c->x, c->dim));
    else if (!strcmp(c->op, "gather")) CHECK(tg_gather(&y, c->x, c->dim, c->index));
    else if (!strcmp(c->op, "index_select")) CHECK(tg_index_select(&y, c->x, c->dim, c->index));
    else if (!strcmp(c->op, "scatter_add"))
        CHECK(tg_scatter_add(&y, c->x, c->dim, c->index, c->src));
    else if (!strcmp(c->op, "topk")) CHECK(tg_topk(&y, &i, c->x, c->k, c->dim, true, true));
    else if (!strcmp(c->op, "argmax")) CHECK(tg_argmax_dim(&y, c->x, c->dim, false));
    else if (!strcmp(c->op, "amax")) CHECK(tg_amax_dims(&y, c->x, 1, &c->dim, false));
    else CHECK(tg_index_add(&y, c->x, c->dim, c->index, c->src));
    tg_tensor_release(y);
    tg_tensor_release(i);
}

static int usage(void)
{
    fprintf(stderr, "usage: indexing --op cumsum|gather|index_select|scatter_add|index_add|topk|"
                    "argmax|amax "
                    "--shape A,B[,C] [--dim D] [--len L] [--dtype f32|f64|bf16|f16] "
                    "[--threads T] [--repeat R]\n");
    return 2;
}

/* A new i64 tensor of shape (nd, shape) of values uniform in [0, extent). */
static tg_tensor *random_index(int nd, const int64_t *shape, int64_t extent)
{
    tg_tensor *t = NULL;
    CHECK(tg_tensor_zeros(&t, TG_I64, nd, shape));
    int64_t *v = tg_tensor_data(t);
    uint64_t s = 12345;
    for (int64_t i = 0; i < tg_tensor_numel(t); i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        v[i] = (int64_t)((s >> 33) % (uint64_t)extent);
    }
    return t;
}

static tg_tensor *random_values(tg_dtype dt, int nd, const int64_t *shape, tg_rng *rng)
{
    tg_tensor *t = NULL;
    CHECK(tg_tensor_zeros(&t, dt, nd, shape));
    CHECK(tg_tensor_rand_uniform(t, rng, -1.0, 1.0));
    return t;
}

int main(int argc, char **argv)
{
    long threads = 0, repeat = 20, dim = 0, len = -1;
    int64_t shape[3] = {0};
    int nd = 0;
    tg_dtype dt = TG_F32;
    index_case c = {.op = NULL};
    static const char *const ops[] = {"cumsum", "gather", "index_select", "scatter_add",
                                      "index_add", "topk", "argmax",
                                      "amax"};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long *dst = !strcmp(a, "--threads")  ? &threads
                    : !strcmp(a, "--repeat") ? &repeat
                    : !strcmp(a, "--dim")    ? &dim
                    : !strcmp(a, "--len")    ? &len
                                             : NULL;
        if (dst && v) {
            char *end;
            *dst = strtol(v, &end, 10);
            if (*end || end == v) return usage();
            i++;
        } else if (!strcmp(a, "--op") && v) {
            for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++)
                if (!strcmp(v, ops[k])) c.op = ops[k];
            i++;
        } else if (!strcmp(a, "--dtype") && v && bench_parse_dtype(v, &dt)) {
            i++;
        } else if (!strcmp(a, "--shape") && v) {
            nd = sscanf(v, "%" SCNd64 ",%" SCNd64 ",%" SCNd64, &shape[0], &shape[1], &shape[2]);
            i++;
        } else {
            return usage();
        }
    }
    if (!c.op || nd < 1 || repeat < 1 || threads < 0 || dim < -nd || dim >= nd) return usage();
    if (threads > 0) CHECK(tg_set_num_threads((int)threads));
    c.dim = (int)(dim < 0 ? dim + nd : dim);

    tg_rng rng;
    tg_rng_init(&rng, 1);
    c.x = random_values(dt, nd, shape, &rng);
    const bool select = strstr(c.op, "index_") != NULL;
    int64_t ishape[3];
    memcpy(ishape, shape, sizeof ishape);
    if (select) ishape[c.dim] = len >= 0 ? len : shape[c.dim];
    c.k = len >= 0 ? len : 1;
    if (!strcmp(c.op, "topk") && c.k > shape[c.dim]) return usage();
    if (strcmp(c.op, "cumsum") && strcmp(c.op, "topk") && strncmp(c.op, "a", 1)) {
        c.index = select ? random_index(1, &ishape[c.dim], shape[c.dim])
                         : random_index(nd, ishape, shape[c.dim]);
        if (strstr(c.op, "add")) c.src = random_values(dt, nd, ishape, &rng);
    }
    if (bench_time_calls(call, &c, repeat)) return 1;
    tg_tensor_release(c.src);
    tg_tensor_release(c.index);
    tg_tensor_release(c.x);
    return 0;
}
