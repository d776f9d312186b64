/* tests/test_backward_into_ops.c - diagonal, nll_loss and max_pool (1d,
 * 2d, 3d) add their input gradient straight into the engine's pending sum
 * (their backward_into, tapegrad/op.h): diagonal adds g into the sum's
 * diagonal, nll_loss adds -w g at each target's pick, max_pool each g
 * element at its window's maximum (overlapping windows: several terms).
 *
 * Each op's input is made by a node (y = x * 1.5) and a slice of y adds a
 * first term, so a plain backward runs the op's backward_into into a sum
 * that is not zeros; a watched one (tg_backward_steps) and one with
 * create_graph run its backward and the engine's sum.  The two must give
 * the same bits in every float dtype.  TG_TRACE=1 shows "(into)" for both
 * ops, and gradcheck in f64 (which stages its inputs through a node)
 * checks the values against finite differences. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "into_fixtures.h"
#include "tapegrad/tapegrad.h"
#include "tapegrad/ops.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

typedef enum kind { K_DIAGONAL, K_NLL, K_NLL_SPATIAL, K_POOL1, K_POOL2, K_POOL3 } kind;

static const int64_t kind_shape[][5] = {{4, 5, 4},       {6, 5, 1},       {3, 5, 4},
                                        {2, 3, 11},      {2, 2, 7, 6},    {1, 2, 5, 4, 6}};
static const int kind_ndim[] = {3, 2, 3, 3, 4, 5};

/* max_pool of y over its last kd - K_POOL1 + 1 dims for pick k (0..2):
 * kernel 3 stride 1 (windows overlap: up to three terms per element),
 * kernel 2 stride 2 padding 1 with ceil_mode, kernel 2 stride 1 dilation
 * 2. */
static tg_tensor *pool_pick(int kd, tg_tensor *y, int k)
{
    static const int64_t kernel[3] = {3, 2, 2}, stride[3] = {1, 2, 1}, pad[3] = {1, 1, 0};
    tg_pool_params p = TG_POOL_PARAMS_INIT;
    tg_pool_params_set(&p, kernel[k], stride[k], pad[k]);
    p.ceil_mode = k == 1;
    for (int d = 0; d < 3; d++) p.dilation[d] = k == 2 ? 2 : 1;
    tg_tensor *r = NULL;
    OK(tg_max_pool(&r, y, kd - K_POOL1 + 1, &p));
    return r;
}

/* nll_loss of y (6, 5) or (3, 5, 4) for pick k (0..2): targets with
 * repeats and an ignored one (class 2 ignored for k = 1), a weight for
 * k >= 1, reductions mean, sum and none in turn. */
static tg_tensor *nll_pick(int kd, tg_tensor *y, int k)
{
    static const int64_t t6[3][6] = {{0, 4, 4, 2, 1, 3}, {2, 2, 0, 3, 4, 1}, {1, 1, 1, 0, 4, 2}};
    static const int64_t t12[12] = {4, 0, 2, 2, 1, 3, 3, 0, 4, 1, 2, 0};
    static const double wv[5] = {0.5, 2.0, 1.25, 0.75, 3.0};
    const tg_reduction reds[3] = {TG_REDUCTION_MEAN, TG_REDUCTION_SUM, TG_REDUCTION_NONE};
    tg_tensor *t = NULL, *w = NULL, *r = NULL;
    if (kd == K_NLL) OK(tg_tensor_from_data(&t, TG_I64, 1, (int64_t[]){6}, t6[k]));
    else OK(tg_tensor_from_data(&t, TG_I64, 2, (int64_t[]){3, 4}, t12));
    if (k >= 1) {
        tg_tensor *w64 = NULL;
        OK(tg_tensor_from_data(&w64, TG_F64, 1, (int64_t[]){5}, wv));
        OK(tg_tensor_to_dtype(&w, w64, tg_tensor_dtype(y)));
        tg_tensor_release(w64);
    }
    OK(tg_nll_loss(&r, y, t, w, reds[k], k == 1 ? 2 : -100));
    th_release_all(2, (tg_tensor *[]){t, w});
    return r;
}

/* op(y) for the pick number k (0..2) of kind. */
static tg_tensor *pick(int kd, tg_tensor *y, int k)
{
    static const int64_t offsets[3] = {0, 1, -2};
    static const int dims[3][2] = {{0, 2}, {2, 1}, {1, 0}};
    tg_tensor *r = NULL;
    if (kd >= K_POOL1) return pool_pick(kd, y, k);
    if (kd != K_DIAGONAL) return nll_pick(kd, y, k);
    OK(tg_diagonal(&r, y, offsets[k], dims[k][0], dims[k][1]));
    return r;
}

/* kind's case of the harness (into_fixtures.h): weights in [0.5, 2). */
static th_into_case case_of(kind kd)
{
    return (th_into_case){.kind = kd, .ndim = kind_ndim[kd], .shape = kind_shape[kd],
                          .seed = 23, .wlo = 0.5, .whi = 2, .pick = pick};
}

static void same_bits_both_ways(kind kd, const char *name)
{
    const th_into_case c = case_of(kd);
    th_into_same_bits(&c, name);
}

Test(backward_into_ops, diagonal_adds_as_its_backward_in_every_dtype)
{
    same_bits_both_ways(K_DIAGONAL, "diagonal");
}

Test(backward_into_ops, nll_loss_adds_as_its_backward_in_every_dtype)
{
    same_bits_both_ways(K_NLL, "nll_loss");
    same_bits_both_ways(K_NLL_SPATIAL, "nll_loss (N, C, d)");
}

Test(backward_into_ops, max_pool_adds_as_its_backward_in_every_dtype)
{
    same_bits_both_ways(K_POOL1, "max_pool1d");
    same_bits_both_ways(K_POOL2, "max_pool2d");
    same_bits_both_ways(K_POOL3, "max_pool3d");
}

/* TG_TRACE=1 (read once per process; each Criterion test is a process of
 * its own) names each backward step, "(into)" when backward_into ran. */
Test(backward_into_ops, the_ops_run_their_backward_into)
{
    cr_assert(eq(int, setenv("TG_TRACE", "1", 1), 0));
    char path[] = "/tmp/tg_into_ops_XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    fflush(stderr);
    int saved = dup(2);
    cr_assert(eq(int, dup2(fd, 2), 2));
    const th_into_case c1 = case_of(K_DIAGONAL), c2 = case_of(K_NLL), c3 = case_of(K_POOL2);
    tg_tensor *g1 = th_into_grad(&c1, TG_F64, TH_INTO_PLAIN);
    tg_tensor *g2 = th_into_grad(&c2, TG_F32, TH_INTO_PLAIN);
    tg_tensor *g3 = th_into_grad(&c3, TG_BF16, TH_INTO_PLAIN);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    static char buf[1 << 16];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    close(fd);
    unlink(path);
    cr_assert(n > 0);
    cr_assert(strstr(buf, "diagonal (into)") != NULL, "trace: %s", buf);
    cr_assert(strstr(buf, "nll_loss (into)") != NULL, "trace: %s", buf);
    cr_assert(strstr(buf, "max_pool (into)") != NULL, "trace: %s", buf);
    th_release_all(3, (tg_tensor *[]){g1, g2, g3});
}

/* The three picks' weighted sums, stacked: an output of three elements,
 * so that gradcheck's staged rows (the odd ones) run backward_into. */
static int staged_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    const kind *kd = user;
    const th_into_case c = case_of(*kd);
    tg_tensor *t[3];
    for (int k = 0; k < 3; k++) {
        tg_tensor *p = pick(*kd, in[0], k);
        t[k] = th_into_weighted(&c, p, 5 + (uint64_t)k);
        tg_tensor_release(p);
    }
    const int rc = tg_stack(out, 3, t, 0);
    th_release_all(3, t);
    return rc;
}

Test(backward_into_ops, gradcheck_f64_checks_the_into_values)
{
    for (kind kd = K_DIAGONAL; kd <= K_POOL3; kd++) {
        tg_tensor *x = th_rand_uniform(TG_F64, kind_ndim[kd], kind_shape[kd], 31);
        OK(tg_tensor_set_requires_grad(x, true));
        th_expect_gradchecks(staged_fn, &kd, 1, &x, "kind %d", (int)kd);
        tg_tensor_release(x);
    }
}
