/* bench/ctc: the time of one CTC loss call, forward or forward and
 * backward, for bench/ctc.py (which runs the same call in PyTorch and gives
 * the ratio).
 *
 *   ctc --shape T,N,C,S [--dtype f32|f64] [--threads T] [--repeat R (20)] [--backward]
 *
 * log_probs (T, N, C) is the log_softmax over C of U[-1, 1) values;
 * targets (N, S) padded, label i of sequence n being 1 + (7 n + 3 i) % (C - 1)
 * (never the blank 0); every input length T and target length S; MEAN.
 * The forward pass is the loss with log_probs not requiring grad; with
 * --backward log_probs requires grad and a pass is the loss, its backward
 * and log_probs' gradient released, as PyTorch's x.grad = None.  After
 * three passes of warmup, times R passes and prints one JSON line with the
 * median in ms. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tapegrad/tapegrad.h>

#include "timing.h"

#define CHECK(call) BENCH_CHECK("ctc", call)

typedef struct ctc_case {
    tg_tensor *lp, *targets, *il, *tl;
    bool backward;
} ctc_case;

static void pass(const void *arg)
{
    const ctc_case *c = arg;
    tg_tensor *y = NULL;
    CHECK(tg_ctc_loss(&y, c->lp, c->targets, c->il, c->tl, NULL));
    if (c->backward) {
        CHECK(tg_backward(y, NULL, NULL));
        tg_tensor_zero_grad(c->lp);
    }
    tg_tensor_release(y);
}

static int usage(void)
{
    fprintf(stderr, "usage: ctc --shape T,N,C,S [--dtype f32|f64] [--threads T] [--repeat R] "
                    "[--backward]\n");
    return 2;
}

/* A new (n) or (n, s) i64 tensor whose element k is f(k). */
typedef int64_t (*elem_fn)(int64_t k, int64_t a, int64_t b);

static tg_tensor *i64_of(int nd, const int64_t *shape, elem_fn f, int64_t a, int64_t b)
{
    const int64_t n = shape[0] * (nd > 1 ? shape[1] : 1);
    int64_t *v = malloc((size_t)n * sizeof *v);
    tg_tensor *t = NULL;
    if (!v) exit(1);
    for (int64_t k = 0; k < n; k++) v[k] = f(k, a, b);
    CHECK(tg_tensor_from_data(&t, TG_I64, nd, shape, v));
    free(v);
    return t;
}

/* Label i of sequence n: 1 + (7 n + 3 i) % (C - 1), at k = n S + i. */
static int64_t label(int64_t k, int64_t S, int64_t C)
{
    return 1 + (7 * (k / S) + 3 * (k % S)) % (C - 1);
}

static int64_t constant(int64_t k, int64_t v, int64_t unused) { return v; }

int main(int argc, char **argv)
{
    long threads = 0, repeat = 20;
    int64_t T = 0, N = 0, C = 0, S = 0;
    bool have_shape = false;
    tg_dtype dt = TG_F32;
    ctc_case c = {.backward = false};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        const int common = bench_common_arg(argc, argv, &i, &threads, &repeat, &c.backward, &dt);
        if (common < 0) return usage();
        if (common > 0) {
            continue;
        } else if (!strcmp(a, "--shape") && v) {
            have_shape = sscanf(v, "%" SCNd64 ",%" SCNd64 ",%" SCNd64 ",%" SCNd64, &T, &N, &C,
                                &S) == 4;
            i++;
        } else {
            return usage();
        }
    }
    if (!have_shape || repeat < 1 || T < 1 || N < 1 || C < 2 || S < 0 || S > T) return usage();
    if (threads > 0) CHECK(tg_set_num_threads((int)threads));
    tg_rng rng;
    tg_rng_init(&rng, 1);
    tg_tensor *x = NULL;
    CHECK(tg_tensor_zeros(&x, dt, 3, (int64_t[]){T, N, C}));
    CHECK(tg_tensor_rand_uniform(x, &rng, -1.0, 1.0));
    CHECK(tg_log_softmax(&c.lp, x, 2));
    tg_tensor_release(x);
    c.targets = i64_of(2, (int64_t[]){N, S}, label, S, C);
    c.il = i64_of(1, &N, constant, T, 0);
    c.tl = i64_of(1, &N, constant, S, 0);
    if (c.backward) CHECK(tg_tensor_set_requires_grad(c.lp, true));
    if (bench_time_calls(pass, &c, repeat)) return 1;
    tg_tensor_release(c.lp);
    tg_tensor_release(c.targets);
    tg_tensor_release(c.il);
    tg_tensor_release(c.tl);
    return 0;
}
