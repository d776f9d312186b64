/* tests/test_split.c - tg_split, tg_split_size, tg_chunk and tg_unbind:
 * the pieces and the gradient of a weighted sum of them against torch
 * (uneven cuts, negative dims, empty pieces and extents, chunks that do not
 * fit evenly), derivatives to second order, the count query, the caller's
 * scope owning the pieces, and the refusals.
 * Goldens: scripts/make_split_goldens.py. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())
#define MAXP 16

/* Runs case c's op on x into outs (room for MAXP); returns the count. */
static int run_case(const tg_st_file *f, const char *c, tg_tensor *x, tg_tensor **outs)
{
    const char *op = th_golden_meta(f, c, "op"), *arg = th_golden_meta(f, c, "arg");
    const int dim = atoi(th_golden_meta(f, c, "dim"));
    int n = 0;
    if (strcmp(op, "split") == 0) {
        int64_t sizes[MAXP] = {0};
        th_ints_of(arg, sizes);
        n = 1;
        for (const char *p = arg; *p; p++) n += *p == ',';
        OK(tg_split(outs, n, x, sizes, dim));
    } else if (strcmp(op, "split_size") == 0) {
        OK(tg_split_size(outs, MAXP, &n, x, atoll(arg), dim));
    } else if (strcmp(op, "chunk") == 0) {
        OK(tg_chunk(outs, MAXP, &n, x, atoi(arg), dim));
    } else {
        OK(tg_unbind(outs, MAXP, &n, x, dim));
    }
    return n;
}

Test(split, every_case_matches_torch)
{
    tg_st_file *f = th_golden_load("split.safetensors");
    const int n = atoi(tg_st_meta_get(f, "cases"));
    for (int i = 0; i < n; i++) {
        char c[16], what[64];
        snprintf(c, sizeof c, "case%d", i);
        tg_tensor *x = th_leaf_clone(th_golden_get(f, c, "x")), *outs[MAXP] = {0};
        const int np = run_case(f, c, x, outs);
        cr_assert(eq(int, np, atoi(th_golden_meta(f, c, "n"))), "%s: piece count", c);
        tg_tensor *sx = NULL, *loss = NULL;
        OK(tg_sum(&sx, x));   /* x * 0 keeps x on the tape when no piece holds it */
        OK(tg_mul_scalar(&loss, sx, 0.0));
        tg_tensor_release(sx);
        for (int k = 0; k < np; k++) {
            snprintf(what, sizeof what, "piece%d", k);
            const tg_tensor *want = th_golden_get(f, c, what);
            snprintf(what, sizeof what, "%s.piece%d", c, k);
            th_expect_same_bits(what, x, outs[k], want);
            snprintf(what, sizeof what, "w%d", k);
            tg_tensor *wp = NULL, *s = NULL, *acc = NULL;
            OK(tg_mul(&wp, outs[k], (tg_tensor *)th_golden_get(f, c, what)));
            OK(tg_sum(&s, wp));
            OK(tg_add(&acc, loss, s));
            th_release_all(3, (tg_tensor *[]){wp, s, loss});
            loss = acc;
        }
        OK(tg_backward(loss, NULL, NULL));
        snprintf(what, sizeof what, "%s.dx", c);
        th_expect_close(what, tg_tensor_grad(x), th_golden_get(f, c, "dx"), 0);
        th_release_all(np, outs);
        th_release_all(2, (tg_tensor *[]){loss, x});
    }
    cr_assert(n >= 15, "golden has %d cases", n);
    tg_st_free(f);
}

/* y = p0 * p1 * p2 for the three chunks of x along dim 1: a second
 * derivative that mixes the pieces. */
static int chunk_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    (void)user;
    tg_tensor *p[3] = {0}, *q = NULL;
    int np = 0;
    int rc = tg_chunk(p, 3, &np, in[0], 3, 1);
    if (rc >= 0) rc = tg_mul(&q, p[0], p[1]);
    if (rc >= 0) rc = tg_mul(out, q, p[2]);
    tg_tensor_release(q);
    th_release_all(np, p);
    return rc;
}

static int unbind_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    (void)user;
    tg_tensor *p[2] = {0};
    int np = 0;
    int rc = tg_unbind(p, 2, &np, in[0], -1);
    if (rc >= 0) rc = tg_mul(out, p[0], p[1]);
    th_release_all(np, p);
    return rc;
}

Test(split, gradcheck_and_gradgradcheck)
{
    uint64_t s = 43;
    tg_tensor *x = th_rand_tensor(&s, TG_F64, 3, (int64_t[]){2, 6, 2}, -1, 1);
    OK(tg_tensor_set_requires_grad(x, true));
    tg_gradcheck_opts o = TG_GRADCHECK_OPTS_INIT;
    OK(tg_gradcheck(chunk_fn, NULL, 1, &x, &o));
    OK(tg_gradgradcheck(chunk_fn, NULL, 1, &x, &o));
    OK(tg_gradcheck(unbind_fn, NULL, 1, &x, &o));
    OK(tg_gradgradcheck(unbind_fn, NULL, 1, &x, &o));
    tg_tensor_release(x);
}

/* outs NULL asks for the count; a cap below it is refused, outs untouched. */
Test(split, count_query_and_cap)
{
    tg_tensor *x = th_arange(TG_F32, 2, (int64_t[]){7, 3});
    tg_tensor *outs[4] = {x, x, x, x};
    int n = -1;
    OK(tg_chunk(NULL, 0, &n, x, 3, 0));
    cr_assert(eq(int, n, 3));
    OK(tg_split_size(NULL, 0, &n, x, 2, 0));
    cr_assert(eq(int, n, 4));
    OK(tg_unbind(NULL, 0, &n, x, 1));
    cr_assert(eq(int, n, 3));
    n = -1;
    th_expect_refused(tg_split_size(outs, 3, &n, x, 2, 0), TG_EINVAL, "cap=3", NULL);
    cr_assert(eq(int, n, -1));
    for (int i = 0; i < 4; i++) cr_assert(outs[i] == x, "outs[%d] was changed", i);
    OK(tg_split_size(outs, 4, &n, x, 2, 0));
    th_expect_shape(outs[3], 2, (int64_t[]){1, 3});
    th_release_all(4, outs);
    tg_tensor_release(x);
}

/* In a scope the pieces belong to it: the scope gains one tensor a piece. */
Test(split, pieces_go_to_the_callers_scope)
{
    tg_tensor *x = th_arange(TG_F32, 1, (int64_t[]){6});
    OK(tg_scope_begin());
    const int before = tg_scope_size();
    tg_tensor *outs[3] = {0};
    int n = 0;
    OK(tg_chunk(outs, 3, &n, x, 3, 0));
    cr_assert(eq(int, tg_scope_size(), before + 3));
    cr_assert(eq(dbl, th_get(outs[2], (int64_t[]){1}), 5.0));
    OK(tg_scope_end());
    tg_tensor_release(x);
}

Test(split, refusals_name_the_argument)
{
    tg_tensor *x = th_arange(TG_F32, 2, (int64_t[]){5, 2}), *z0 = th_arange(TG_F32, 0, NULL);
    tg_tensor *outs[8] = {0};
    int n = 0;
    const int64_t bad_sum[2] = {2, 2}, neg[2] = {6, -1};
    th_expect_refused(tg_split(outs, 2, NULL, bad_sum, 0), TG_EINVAL, "x", NULL);
    th_expect_refused(tg_split(outs, 2, x, bad_sum, 0), TG_EINVAL, "sum to 4", NULL);
    th_expect_refused(tg_split(outs, 2, x, neg, 0), TG_EINVAL, "sizes[0..0]", NULL);
    th_expect_refused(tg_split(outs, 2, x, (int64_t[]){5, -1}, 0), TG_EINVAL, "sizes[1]=-1",
                      NULL);
    th_expect_refused(tg_split(outs, 0, x, bad_sum, 0), TG_EINVAL, "n=0", NULL);
    th_expect_refused(tg_split(outs, 1, x, (int64_t[]){2}, 2), TG_EINVAL, "dim=2", NULL);
    th_expect_refused(tg_split_size(outs, 8, &n, x, 0, 0), TG_EINVAL, "split_size=0", NULL);
    th_expect_refused(tg_split_size(outs, 8, &n, z0, 1, 0), TG_ESHAPE, "0-d", NULL);
    th_expect_refused(tg_chunk(outs, 8, &n, x, 0, 0), TG_EINVAL, "chunks=0", NULL);
    th_expect_refused(tg_chunk(outs, 8, NULL, x, 2, 0), TG_EINVAL, "n_out", NULL);
    th_expect_refused(tg_unbind(outs, 8, &n, x, -3), TG_EINVAL, "dim=-3", NULL);
    for (int i = 0; i < 8; i++) cr_assert(outs[i] == NULL, "outs[%d] was set", i);
    th_release_all(2, (tg_tensor *[]){x, z0});
}
