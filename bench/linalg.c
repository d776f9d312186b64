/* bench/linalg: the time of one call of a tapegrad/linalg.h function on a
 * batch of square matrices, forward or forward and backward, for
 * bench/linalg.py (which runs the same call in PyTorch and gives the ratio);
 * matmul is the batched product A @ A (tg_matmul).
 *
 *   linalg --op inv|solve|det|cholesky|eigh|svd|qr|matmul --shape B,n,n
 *          [--dtype f32|f64] [--threads T] [--repeat R (20)] [--backward]
 *
 * A (B, n, n) is made from X U[-1, 1): X + 2 sqrt(n) I for inv, solve and
 * det, X X^T / n + I (symmetric positive-definite) for cholesky, (X +
 * X^T) / 2 for eigh, X for svd, qr (reduced) and matmul.  solve's right-hand side
 * is (B, n, 1) U[-1, 1).  With --backward A requires grad and a pass is the
 * forward, the sum of each output times a fixed U[-1, 1) tensor of its
 * shape, its backward, and A's gradient released, as PyTorch's
 * A.grad = None.  After three passes of warmup, times R passes and prints
 * one JSON line with the median in ms. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tapegrad/tapegrad.h>

#include "timing.h"

#define CHECK(call) BENCH_CHECK("linalg", call)

static const char *const ops[] = {"inv", "solve", "det", "cholesky", "eigh", "svd", "qr",
                                   "matmul"};
enum { N_OPS = sizeof ops / sizeof ops[0], MAX_OUT = 3 };

typedef struct la_case {
    int op;
    bool backward;
    tg_tensor *a, *b, *gy[MAX_OUT];
} la_case;

/* The op's outputs into y (the rest NULL); returns how many. */
static int run_op(const la_case *c, tg_tensor **y)
{
    for (int i = 0; i < MAX_OUT; i++) y[i] = NULL;
    switch (c->op) {
    case 0: CHECK(tg_linalg_inv(&y[0], c->a)); return 1;
    case 1: CHECK(tg_linalg_solve(&y[0], c->a, c->b)); return 1;
    case 2: CHECK(tg_linalg_det(&y[0], c->a)); return 1;
    case 3: CHECK(tg_linalg_cholesky(&y[0], c->a, false)); return 1;
    case 4: CHECK(tg_linalg_eigh(&y[0], &y[1], c->a, false)); return 2;
    case 5: CHECK(tg_linalg_svd(&y[0], &y[1], &y[2], c->a, false)); return 3;
    case 6: CHECK(tg_linalg_qr(&y[0], &y[1], c->a, "reduced")); return 2;
    default: CHECK(tg_matmul(&y[0], c->a, c->a)); return 1;
    }
}

static void pass(const void *arg)
{
    const la_case *c = arg;
    tg_tensor *y[MAX_OUT];
    const int n = run_op(c, y);
    if (c->backward) {
        tg_tensor *loss = NULL;
        for (int i = 0; i < n; i++) {
            tg_tensor *p = NULL, *s = NULL, *t = NULL;
            CHECK(tg_mul(&p, y[i], c->gy[i]));
            CHECK(tg_sum(&s, p));
            if (loss) CHECK(tg_add(&t, loss, s));
            tg_tensor_release(p);
            if (loss) {
                tg_tensor_release(loss);
                tg_tensor_release(s);
                loss = t;
            } else {
                loss = s;
            }
        }
        CHECK(tg_backward(loss, NULL, NULL));
        tg_tensor_zero_grad(c->a);
        tg_tensor_release(loss);
    }
    for (int i = 0; i < n; i++) tg_tensor_release(y[i]);
}

/* A's values in f64 (count matrices of n x n) from X, as the top says. */
static void make_a(int op, int64_t count, int64_t n, const double *x, double *a)
{
    for (int64_t b = 0; b < count; b++) {
        const double *xb = x + b * n * n;
        double *ab = a + b * n * n;
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < n; j++) {
                double v = xb[i * n + j];
                if (op <= 2) {
                    v += i == j ? 2 * sqrt((double)n) : 0;
                } else if (op == 3) {
                    v = i == j ? 1 : 0;
                    for (int64_t k = 0; k < n; k++) v += xb[i * n + k] * xb[j * n + k] / n;
                } else if (op == 4) {
                    v = (v + xb[j * n + i]) / 2;
                }
                ab[i * n + j] = v;
            }
    }
}

int main(int argc, char **argv)
{
    la_case c = {.op = -1};
    tg_dtype dt = TG_F32;
    long threads = 0, repeat = 20;
    int64_t shape[3] = {0, 0, 0};
    bool ok = true;
    for (int i = 1; i < argc && ok; i++) {
        const char *s = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(s, "--backward")) {
            c.backward = true;
            continue;
        }
        if (!v) ok = false;
        else if (!strcmp(s, "--op"))
            for (int k = 0; k < N_OPS; k++) c.op = !strcmp(v, ops[k]) ? k : c.op;
        else if (!strcmp(s, "--dtype")) ok = bench_parse_dtype(v, &dt) && (dt == TG_F32 ||
                                                                       dt == TG_F64);
        else if (!strcmp(s, "--shape"))
            ok = sscanf(v, "%" SCNd64 ",%" SCNd64 ",%" SCNd64, &shape[0], &shape[1],
                        &shape[2]) == 3 && shape[0] > 0 && shape[1] > 0 && shape[1] == shape[2];
        else if (!strcmp(s, "--threads")) ok = (threads = strtol(v, NULL, 10)) >= 0;
        else if (!strcmp(s, "--repeat")) ok = (repeat = strtol(v, NULL, 10)) >= 1;
        else ok = false;
        i++;
    }
    if (!ok || c.op < 0 || shape[0] == 0) {
        fprintf(stderr, "usage: linalg --op inv|solve|det|cholesky|eigh|svd|qr|matmul "
                        "--shape B,n,n [--dtype f32|f64] [--threads T] [--repeat R] "
                        "[--backward]\n");
        return 2;
    }
    if (threads > 0) CHECK(tg_set_num_threads((int)threads));
    tg_rng rng;
    tg_rng_init(&rng, 1);
    tg_tensor *x = NULL, *a64 = NULL;
    CHECK(tg_tensor_zeros(&x, TG_F64, 3, shape));
    CHECK(tg_tensor_rand_uniform(x, &rng, -1.0, 1.0));
    CHECK(tg_tensor_zeros(&a64, TG_F64, 3, shape));
    make_a(c.op, shape[0], shape[1], tg_tensor_data(x), tg_tensor_data(a64));
    CHECK(tg_tensor_to_dtype(&c.a, a64, dt));
    const int64_t bshape[3] = {shape[0], shape[1], 1};
    CHECK(tg_tensor_zeros(&c.b, dt, 3, bshape));
    CHECK(tg_tensor_rand_uniform(c.b, &rng, -1.0, 1.0));
    if (c.backward) {
        tg_tensor *y[MAX_OUT];
        const int n = run_op(&c, y);
        for (int i = 0; i < n; i++) {
            CHECK(tg_tensor_zeros(&c.gy[i], dt, tg_tensor_ndim(y[i]), tg_tensor_shape(y[i])));
            CHECK(tg_tensor_rand_uniform(c.gy[i], &rng, -1.0, 1.0));
            tg_tensor_release(y[i]);
        }
        CHECK(tg_tensor_set_requires_grad(c.a, true));
    }
    if (bench_time_calls(pass, &c, repeat)) return 1;
    for (int i = 0; i < MAX_OUT; i++) tg_tensor_release(c.gy[i]);
    tg_tensor_release(c.b);
    tg_tensor_release(c.a);
    tg_tensor_release(a64);
    tg_tensor_release(x);
    return 0;
}
