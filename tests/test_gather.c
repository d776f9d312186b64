/* tests/test_gather.c - tg_gather, tg_scatter_add, tg_index_select and
 * tg_index_add against PyTorch's torch.gather, torch.scatter_add,
 * torch.index_select and torch.index_add with their gradients (f32, f64,
 * bf16; ranks 1 to 4, every dim positive and negative, repeated indices),
 * derivatives to second order by finite differences, the backward's
 * backward as the op itself, a transposed x, empty tensors, f16 sums, the
 * autocast rule, the refusals, large tensors against a plain loop bit
 * for bit on one and two threads, the picks' copies of NaN payloads and
 * -0.0 bit for bit, a strided index, a bad index value refused wherever
 * it falls in the adds' blocks, and the NaN bits of the sums.
 * Goldens: scripts/make_gather_goldens.py. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "ops/gather_internal.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

typedef int (*pick_fn)(tg_tensor **, tg_tensor *, int, tg_tensor *);
typedef int (*add_fn)(tg_tensor **, tg_tensor *, int, tg_tensor *, tg_tensor *);

static int run_op(const char *op, tg_tensor **y, tg_tensor *x, int dim, tg_tensor *idx,
                  tg_tensor *src)
{
    if (!strcmp(op, "gather")) return tg_gather(y, x, dim, idx);
    if (!strcmp(op, "scatter_add")) return tg_scatter_add(y, x, dim, idx, src);
    if (!strcmp(op, "index_select")) return tg_index_select(y, x, dim, idx);
    cr_assert(eq(str, (char *)op, "index_add"));
    return tg_index_add(y, x, dim, idx, src);
}

/* Torch's bits in every dtype: picks copy, sums round at each term in
 * the index's order as torch's (bf16: each term added in f32). */
Test(gather, every_case_matches_torch)
{
    tg_st_file *f = th_golden_load("gather.safetensors");
    const int n = atoi(tg_st_meta_get(f, "cases"));
    int per_op[4] = {0};
    for (int i = 0; i < n; i++) {
        char c[16], what[96];
        snprintf(c, sizeof c, "case%d", i);
        const char *op = th_golden_meta(f, c, "op"), *dt = th_golden_meta(f, c, "dtype");
        const int dim = atoi(th_golden_meta(f, c, "dim"));
        const bool adds = strstr(op, "add") != NULL;
        tg_tensor *x = th_leaf_clone(th_golden_get(f, c, "x"));
        tg_tensor *idx = (tg_tensor *)th_golden_get(f, c, "index");
        tg_tensor *src = adds ? th_leaf_clone(th_golden_get(f, c, "src")) : NULL, *y = NULL;
        snprintf(what, sizeof what, "%s y (%s %s, dim %d, %d dims)", c, op, dt, dim,
                 tg_tensor_ndim(x));
        OK(run_op(op, &y, x, dim, idx, src));
        th_expect_close(what, y, th_golden_get(f, c, "y"), 0);
        tg_tensor *g = (tg_tensor *)th_golden_get(f, c, "g"), *d[2] = {NULL, NULL};
        OK(tg_grad(d, 1, &y, &g, adds ? 2 : 1, (tg_tensor *[]){x, src}, NULL));
        snprintf(what, sizeof what, "%s dx (%s %s, dim %d)", c, op, dt, dim);
        th_expect_close(what, d[0], th_golden_get(f, c, "dx"), 0);
        if (adds) {
            snprintf(what, sizeof what, "%s dsrc (%s %s, dim %d)", c, op, dt, dim);
            th_expect_close(what, d[1], th_golden_get(f, c, "dsrc"), 0);
        }
        per_op[!strcmp(op, "gather") ? 0 : !strcmp(op, "scatter_add") ? 1
               : !strcmp(op, "index_select") ? 2 : 3]++;
        th_release_all(5, (tg_tensor *[]){x, src, y, d[0], d[1]});
    }
    for (int k = 0; k < 4; k++) cr_assert(per_op[k] >= 60, "op %d: %d cases", k, per_op[k]);
    tg_st_free(f);
}

typedef struct gc_case {
    const char *op;
    int dim;
} gc_case;

/* in[0] x, in[1] src (the adding ops); the index is a fixed one with
 * repeats, of the shape the op needs for x (3, 4) at dim. */
static int gc_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    const gc_case *c = user;
    static const double two_d[6] = {2, 0, 2, 1, 1, 2}, one_d[3] = {1, 1, 0};
    const bool select = strstr(c->op, "index") != NULL;
    tg_tensor *idx = select ? th_vec(TG_I64, 3, one_d, "index", false)
                            : th_tensor_from(TG_I64, 2, (int64_t[]){2, 3}, two_d);
    int rc = run_op(c->op, out, in[0], c->dim, idx, n > 1 ? in[1] : NULL);
    tg_tensor_release(idx);
    return rc;
}

Test(gather, gradcheck_and_gradgradcheck)
{
    const gc_case cases[] = {{"gather", 0},       {"gather", -1},       {"scatter_add", 1},
                             {"scatter_add", -2}, {"index_select", 0},  {"index_select", -1},
                             {"index_add", 0},    {"index_add", 1}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        uint64_t s = 301 + i;
        const bool adds = strstr(cases[i].op, "add") != NULL;
        const bool select = strstr(cases[i].op, "index") != NULL;
        /* src: the index's (2, 3), or x's (3, 4) with 3 at dim */
        int64_t sshape[2] = {select ? 3 : 2, select && cases[i].dim == 0 ? 4 : 3};
        tg_tensor *in[2] = {th_rand_tensor(&s, TG_F64, 2, (int64_t[]){3, 4}, -2, 2), NULL};
        if (adds) in[1] = th_rand_tensor(&s, TG_F64, 2, sshape, -2, 2);
        for (int k = 0; k < (adds ? 2 : 1); k++) OK(tg_tensor_set_requires_grad(in[k], true));
        tg_gradcheck_opts o = TG_GRADCHECK_OPTS_INIT;
        cr_assert(eq(int, tg_gradcheck(gc_fn, (void *)&cases[i], adds ? 2 : 1, in, &o), TG_OK),
                  "%s dim %d: %s", cases[i].op, cases[i].dim, tg_error_message());
        cr_assert(eq(int, tg_gradgradcheck(gc_fn, (void *)&cases[i], adds ? 2 : 1, in, &o),
                     TG_OK),
                  "%s dim %d: %s", cases[i].op, cases[i].dim, tg_error_message());
        th_release_all(2, in);
    }
}

/* Each op is linear in x (the picking ops) or in src with x = 0 (the adding
 * ops), and its backward's backward is the op again: y bit for bit. */
Test(gather, double_backward_is_the_forward)
{
    tg_tensor *i2 = th_tensor_from(TG_I64, 2, (int64_t[]){2, 3}, (double[]){2, 0, 2, 1, 1, 2});
    tg_tensor *i1 = th_vec(TG_I64, 4, (double[]){1, 3, 1, 0}, "i", false), *z = NULL;
    OK(tg_tensor_zeros(&z, TG_F64, 2, (int64_t[]){3, 4}));
    for (int k = 0; k < 4; k++) {
        uint64_t s = 41 + (uint64_t)k;
        const int64_t shape[2] = {k == 1 ? 2 : 3, k == 1 ? 3 : 4};
        tg_tensor *x = th_rand_tensor(&s, TG_F64, 2, shape, -2, 2), *y = NULL;
        OK(tg_tensor_set_requires_grad(x, true));
        switch (k) {
        case 0: OK(tg_gather(&y, x, -1, i2)); break;
        case 1: OK(tg_scatter_add(&y, z, 0, i2, x)); break;
        case 2: OK(tg_index_select(&y, x, 1, i1)); break;
        default: OK(tg_index_add(&y, z, -1, i1, x)); break;
        }
        th_expect_double_backward_is_forward(x, y, 7 + (uint64_t)k);
        th_release_all(2, (tg_tensor *[]){x, y});
    }
    th_release_all(3, (tg_tensor *[]){i2, i1, z});
}

/* A transposed x (strides (1, 3)) gives what its contiguous copy gives,
 * values and gradients, for every op. */
Test(gather, transposed_x_and_src)
{
    const char *ops[4] = {"gather", "scatter_add", "index_select", "index_add"};
    for (int k = 0; k < 4; k++) {
        const bool select = k >= 2, adds = k % 2 == 1;
        tg_tensor *base = th_arange(TG_F32, 2, (int64_t[]){3, 4}), *xt = NULL, *xc = NULL;
        OK(tg_transpose(&xt, base, 0, 1));   /* (4, 3), not contiguous */
        cr_assert(not(tg_tensor_is_contiguous(xt)));
        OK(tg_tensor_contiguous(&xc, xt));
        tg_tensor *idx = select ? th_vec(TG_I64, 3, (double[]){2, 0, 2}, "i", false)
                                : th_tensor_from(TG_I64, 2, (int64_t[]){4, 2},
                                                 (double[]){0, 2, 1, 1, 2, 0, 0, 0});
        tg_tensor *sb = NULL, *st = NULL, *sc = NULL;
        if (adds) {   /* src (2, 4) or (3, 4) transposed */
            sb = th_seq(TG_F32, 2, (int64_t[]){select ? 3 : 2, 4}, -1, 1);
            OK(tg_transpose(&st, sb, 0, 1));
            OK(tg_tensor_contiguous(&sc, st));
        }
        tg_tensor *y = NULL, *want = NULL;
        OK(run_op(ops[k], &y, xt, 1, idx, st));
        OK(run_op(ops[k], &want, xc, 1, idx, sc));
        th_expect_close(ops[k], y, want, 0);
        th_release_all(9, (tg_tensor *[]){base, xt, xc, idx, sb, st, sc, y, want});
    }
}

/* Empty x, index or src: empty results of the right shape, and a gradient
 * through them. */
Test(gather, empty_tensors)
{
    tg_tensor *x = NULL, *e = NULL, *src = NULL, *y = NULL, *l = NULL;
    OK(tg_tensor_zeros(&x, TG_F32, 2, (int64_t[]){3, 4}));
    OK(tg_tensor_set_requires_grad(x, true));
    OK(tg_tensor_zeros(&e, TG_I64, 2, (int64_t[]){0, 4}));
    OK(tg_gather(&y, x, 0, e));
    th_expect_shape(y, 2, (int64_t[]){0, 4});
    OK(tg_sum(&l, y));
    OK(tg_backward(l, NULL, NULL));
    th_expect_shape(tg_tensor_grad(x), 2, (int64_t[]){3, 4});
    cr_assert(eq(dbl, th_at(tg_tensor_grad(x), 5), 0.0));
    th_release_all(3, (tg_tensor *[]){e, y, l});
    OK(tg_tensor_zeros(&e, TG_I64, 2, (int64_t[]){3, 0}));
    OK(tg_tensor_zeros(&src, TG_F32, 2, (int64_t[]){3, 0}));
    OK(tg_scatter_add(&y, x, 1, e, src));
    th_expect_shape(y, 2, (int64_t[]){3, 4});
    th_release_all(3, (tg_tensor *[]){e, src, y});
    OK(tg_tensor_zeros(&e, TG_I64, 1, (int64_t[]){0}));
    OK(tg_index_select(&y, x, 1, e));
    th_expect_shape(y, 2, (int64_t[]){3, 0});
    OK(tg_tensor_zeros(&src, TG_F32, 2, (int64_t[]){3, 0}));
    tg_tensor *z = NULL;
    OK(tg_index_add(&z, x, 1, e, src));
    th_expect_shape(z, 2, (int64_t[]){3, 4});
    th_release_all(5, (tg_tensor *[]){e, src, y, z, x});
    OK(tg_tensor_zeros(&x, TG_F32, 2, (int64_t[]){0, 4}));
    OK(tg_tensor_zeros(&e, TG_I64, 1, (int64_t[]){0}));
    OK(tg_index_select(&y, x, 0, e));
    th_expect_shape(y, 2, (int64_t[]){0, 4});
    th_release_all(3, (tg_tensor *[]){x, e, y});
}

/* 4097 ones added to an f16 0.5 stall at 2048 (2048 + 1 is a tie, to
 * even), as torch's f16 steps do, where the exact sum 4097.5 rounded once
 * would be 4096; 1000 terms of 1e-3 into a bf16 0 stall at 0.5, as
 * torch's. */
Test(gather, half_sums_round_at_each_term)
{
    const int64_t m = 4097;
    tg_tensor *x = th_vec(TG_F16, 1, (double[]){0.5}, "x", false), *idx = NULL, *src = NULL;
    tg_tensor *y = NULL, *ones = NULL;
    OK(tg_tensor_zeros(&idx, TG_I64, 1, &m));
    OK(tg_tensor_zeros(&ones, TG_F16, 1, &m));
    OK(tg_add_scalar(&src, ones, 1.0));
    OK(tg_index_add(&y, x, 0, idx, src));
    cr_assert(eq(int, tg_tensor_dtype(y), TG_F16));
    cr_assert(eq(dbl, th_at(y, 0), 2048.0), "%g", th_at(y, 0));
    th_release_all(5, (tg_tensor *[]){x, idx, src, y, ones});
    const int64_t k = 1000;
    OK(tg_tensor_zeros(&x, TG_BF16, 1, (int64_t[]){1}));
    OK(tg_tensor_zeros(&idx, TG_I64, 1, &k));
    OK(tg_tensor_zeros(&ones, TG_BF16, 1, &k));
    OK(tg_add_scalar(&src, ones, 1e-3));
    OK(tg_scatter_add(&y, x, 0, idx, src));
    cr_assert(eq(dbl, th_at(y, 0), 0.5), "%g", th_at(y, 0));
    th_release_all(5, (tg_tensor *[]){x, idx, src, y, ones});
}

/* f16 and bf16 sums of about a hundred terms per element (scatter_add,
 * index_add, and gather's gradient), each term added in f32 and rounded,
 * in the index's order: torch's bits. */
Test(gather, half_sums_match_torch_bit_for_bit)
{
    tg_st_file *f = th_golden_load("gather.safetensors");
    const int n = atoi(tg_st_meta_get(f, "sums"));
    cr_assert(eq(int, n, 12));
    for (int i = 0; i < n; i++) {
        char c[16], what[96];
        snprintf(c, sizeof c, "sum%d", i);
        const char *op = th_golden_meta(f, c, "op"), *dt = th_golden_meta(f, c, "dtype");
        const int dim = atoi(th_golden_meta(f, c, "dim"));
        const bool adds = strstr(op, "add") != NULL;
        tg_tensor *x = th_leaf_clone(th_golden_get(f, c, "x"));
        tg_tensor *idx = (tg_tensor *)th_golden_get(f, c, "index");
        tg_tensor *src = adds ? th_leaf_clone(th_golden_get(f, c, "src")) : NULL, *y = NULL;
        OK(run_op(op, &y, x, dim, idx, src));
        snprintf(what, sizeof what, "%s y (%s %s, dim %d)", c, op, dt, dim);
        th_expect_close(what, y, th_golden_get(f, c, "y"), 0);
        tg_tensor *g = (tg_tensor *)th_golden_get(f, c, "g"), *d[2] = {NULL, NULL};
        OK(tg_grad(d, 1, &y, &g, adds ? 2 : 1, (tg_tensor *[]){x, src}, NULL));
        snprintf(what, sizeof what, "%s dx (%s %s, dim %d)", c, op, dt, dim);
        th_expect_close(what, d[0], th_golden_get(f, c, "dx"), 0);
        if (adds) {
            snprintf(what, sizeof what, "%s dsrc (%s %s, dim %d)", c, op, dt, dim);
            th_expect_close(what, d[1], th_golden_get(f, c, "dsrc"), 0);
        }
        th_release_all(5, (tg_tensor *[]){x, src, y, d[0], d[1]});
    }
    tg_st_free(f);
}

/* Policy keep: inside autocast the ops run in x's dtype, and a src of
 * another dtype is refused there too. */
Test(gather, autocast_keeps_the_dtype)
{
    tg_tensor *x = th_vec(TG_F32, 3, (double[]){1, 2, 3}, "x", false), *y = NULL;
    tg_tensor *idx = th_vec(TG_I64, 2, (double[]){2, 2}, "i", false);
    tg_tensor *src = th_vec(TG_BF16, 2, (double[]){1, 1}, "s", false);
    OK(tg_autocast_begin(TG_BF16));
    OK(tg_gather(&y, x, 0, idx));
    cr_assert(eq(int, tg_tensor_dtype(y), TG_F32));
    tg_tensor *z = NULL;
    th_expect_refused(tg_scatter_add(&z, x, 0, idx, src), TG_EDTYPE, "src has dtype bf16", z);
    OK(tg_autocast_end());
    th_release_all(4, (tg_tensor *[]){x, idx, src, y});
}

Test(gather, refusals_name_the_argument)
{
    tg_tensor *x = th_tensor_from(TG_F32, 2, (int64_t[]){2, 3}, (double[]){1, 2, 3, 4, 5, 6});
    tg_tensor *idx = th_tensor_from(TG_I64, 2, (int64_t[]){2, 2}, (double[]){0, 1, 2, 0});
    tg_tensor *i32 = NULL, *xi = NULL, *s64 = NULL, *z = NULL, *bad = NULL, *big = NULL;
    tg_tensor *v = th_vec(TG_I64, 2, (double[]){0, 1}, "v", false), *one = NULL;
    OK(tg_tensor_to_dtype(&i32, idx, TG_I32));
    OK(tg_tensor_to_dtype(&xi, x, TG_I64));
    OK(tg_tensor_to_dtype(&s64, idx, TG_F64));
    th_expect_refused(tg_gather(NULL, x, 1, idx), TG_EINVAL, "gather: out", NULL);
    th_expect_refused(tg_gather(&z, NULL, 1, idx), TG_EINVAL, "gather: x", z);
    th_expect_refused(tg_gather(&z, x, 1, NULL), TG_EINVAL, "gather: index", z);
    th_expect_refused(tg_scatter_add(&z, x, 1, idx, NULL), TG_EINVAL, "scatter_add: src", z);
    th_expect_refused(tg_index_add(&z, x, 1, v, NULL), TG_EINVAL, "index_add: src", z);
    th_expect_refused(tg_gather(&z, x, 2, idx), TG_EINVAL, "dim=2 is out of range", z);
    th_expect_refused(tg_index_select(&z, x, -3, v), TG_EINVAL, "dim=-3 is out of range", z);
    th_expect_refused(tg_gather(&z, x, 1, i32), TG_EDTYPE, "index has dtype i32", z);
    th_expect_refused(tg_index_select(&z, x, 1, s64), TG_EDTYPE, "index has dtype f64", z);
    th_expect_refused(tg_scatter_add(&z, xi, 1, idx, x), TG_EDTYPE,
                      "src has dtype f32 but x has i64", z);
    th_expect_refused(tg_scatter_add(&z, x, 1, idx, s64), TG_EDTYPE, "src has dtype f64", z);
    /* index[1, 0]=2 is within dim 1 (extent 3) but not dim 0 (extent 2) */
    th_expect_refused(tg_gather(&z, x, 0, idx), TG_EINVAL,
                      "gather: index[1, 0]=2 is out of range for dim 0 of extent 2", z);
    bad = th_tensor_from(TG_I64, 2, (int64_t[]){1, 2}, (double[]){0, -1});
    th_expect_refused(tg_gather(&z, x, 1, bad), TG_EINVAL,
                      "index[0, 1]=-1 is out of range for dim 1 of extent 3", z);
    tg_tensor_release(bad);
    bad = th_vec(TG_I64, 2, (double[]){1, 3}, "b", false);
    th_expect_refused(tg_index_select(&z, x, -1, bad), TG_EINVAL,
                      "index_select: index[1]=3 is out of range for dim 1 of extent 3", z);
    OK(tg_tensor_zeros(&big, TG_I64, 2, (int64_t[]){3, 1}));
    th_expect_refused(tg_gather(&z, x, 1, big), TG_ESHAPE, "index.size(0)=3 must be <= x.size(0)=2",
                      z);
    th_expect_refused(tg_gather(&z, x, 1, v), TG_ESHAPE, "index has 1 dims but x has 2", z);
    th_expect_refused(tg_scatter_add(&z, x, 1, idx, x), TG_ESHAPE, "src must have index's", z);
    th_expect_refused(tg_index_select(&z, x, 1, idx), TG_ESHAPE, "index has 2 dims", z);
    th_expect_refused(tg_index_add(&z, x, 1, v, x), TG_ESHAPE, "size 2 at dim 1", z);
    OK(tg_tensor_zeros(&one, TG_F32, 2, (int64_t[]){2, 2}));
    th_expect_refused(tg_index_add(&z, x, 1, bad, one), TG_EINVAL, "index_add: index[1]=3", z);
    tg_tensor *x0 = th_tensor_from(TG_F32, 0, NULL, (double[]){2}), *y0 = NULL;
    th_expect_refused(tg_index_select(&z, x0, 0, v), TG_ESHAPE, "x is 0-d", z);
    th_expect_refused(tg_index_add(&z, x0, -1, v, x0), TG_ESHAPE, "not 2", z);
    th_release_all(10, (tg_tensor *[]){x, idx, i32, xi, s64, bad, big, v, one, NULL});
    /* one value: torch's 0-d result, and index_add of a 0-d src */
    tg_tensor *v0 = th_tensor_from(TG_I64, 0, NULL, (double[]){0}), *y1 = NULL;
    OK(tg_index_select(&y0, x0, 0, v0));
    th_expect_shape(y0, 0, NULL);
    OK(tg_index_add(&y1, x0, 0, v0, y0));
    cr_assert(eq(dbl, th_at(y1, 0), 4.0));
    th_release_all(4, (tg_tensor *[]){x0, v0, y0, y1});
}

/* op on (x, dim, index, src) by a plain loop over its positions p in
 * row-major order (the index's, or x's shape with the index's length at
 * dim): a pick copies x's element, an add adds src's into a double copy
 * of x, rounding to f32 at each term for f32 (a double sum of two f32
 * rounded to f32 is their f32 sum) and for bf16 to f32 and then bf16. */
static tg_tensor *by_loop(const char *op, tg_tensor *x, int dim, tg_tensor *idx, tg_tensor *src)
{
    const bool select = !strncmp(op, "index_", 6), adds = src != NULL;
    const int nd = tg_tensor_ndim(x);
    const int64_t *xs = tg_tensor_shape(x);
    int64_t ps[TG_MAX_DIMS], m = 1;
    memcpy(ps, select ? xs : tg_tensor_shape(idx), sizeof(int64_t) * (size_t)nd);
    if (select) ps[dim] = tg_tensor_numel(idx);
    for (int d = 0; d < nd; d++) m *= ps[d];
    double *xv = th_doubles(x), *iv = th_doubles(idx), *sv = adds ? th_doubles(src) : NULL;
    double *out = adds ? xv : malloc(sizeof(double) * (size_t)m);
    cr_assert(out != NULL);
    for (int64_t p = 0; p < m; p++) {
        int64_t c[TG_MAX_DIMS], rest = p, e = 0;
        for (int d = nd - 1; d >= 0; d--) {
            c[d] = rest % ps[d];
            rest /= ps[d];
        }
        c[dim] = (int64_t)iv[select ? c[dim] : p];
        for (int d = 0; d < nd; d++) e = e * xs[d] + c[d];
        if (adds && tg_tensor_dtype(x) == TG_F32) xv[e] = (float)(xv[e] + sv[p]);
        else if (adds && tg_tensor_dtype(x) == TG_BF16)
            xv[e] = tg_bf16_to_f32(tg_f32_to_bf16((float)xv[e] + (float)sv[p]));
        else if (adds) xv[e] += sv[p];
        else out[p] = xv[e];
    }
    tg_tensor *want = NULL;
    OK(tg_tensor_zeros(&want, tg_tensor_dtype(x), nd, adds ? xs : ps));
    for (int64_t i = 0; i < tg_tensor_numel(want); i++)
        tg_dtype_store(tg_tensor_dtype(x), tg_tensor_data(want), i, out[i]);
    if (!adds) free(out);
    free(xv);
    free(iv);
    free(sv);
    return want;
}

/* An i64 tensor of shape (nd, shape) of values in [0, extent), repeating. */
static tg_tensor *rand_index(int nd, const int64_t *shape, int64_t extent, uint64_t seed)
{
    tg_tensor *t = NULL;
    OK(tg_tensor_zeros(&t, TG_I64, nd, shape));
    int64_t *v = tg_tensor_data(t);
    for (int64_t i = 0; i < tg_tensor_numel(t); i++) {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        v[i] = (int64_t)(seed % (uint64_t)extent);
    }
    return t;
}

/* Large enough to be shared out among threads: every op along the first,
 * a middle and the last dim, an index that covers x's other dims and one
 * that does not, contiguous and transposed x and src (f32), transposed
 * (bf16), give the bits of the plain loop on one thread and on two. */
Test(gather, large_tensors_give_the_plain_loops_bits_on_one_and_two_threads)
{
    const char *ops[4] = {"gather", "scatter_add", "index_select", "index_add"};
    const tg_dtype dts[2] = {TG_F32, TG_BF16};
    /* x's shape, dim, the index's shape (gather, scatter_add), its length (the others) */
    const struct { int nd; int64_t x[3]; int dim; int64_t idx[3]; int64_t len; } cs[] = {
        {2, {512, 512}, 0, {512, 512}, 600},
        {2, {512, 512}, 1, {400, 700}, 300},
        {3, {3, 257, 129}, 1, {3, 300, 100}, 257},
        {3, {3, 257, 129}, 2, {2, 257, 129}, 129},
    };
    const int old = tg_get_num_threads();
    for (size_t i = 0; i < sizeof cs / sizeof *cs; i++)
        for (int variant = 0; variant < 3; variant++) {   /* f32, f32 transposed, bf16 transposed */
            const int t = variant == 2, layout = variant > 0;
            const int nd = cs[i].nd, dim = cs[i].dim;
            tg_tensor *x = th_layout_of(dts[t], nd, cs[i].x, layout, 3 + i);
            tg_tensor *idx = rand_index(nd, cs[i].idx, cs[i].x[dim], 5 + i);
            tg_tensor *sel = rand_index(1, &cs[i].len, cs[i].x[dim], 9 + i);
            int64_t sshape[3];
            memcpy(sshape, cs[i].x, sizeof sshape);
            sshape[dim] = cs[i].len;
            tg_tensor *src = th_layout_of(dts[t], nd, cs[i].idx, layout, 11 + i);
            tg_tensor *ssrc = th_layout_of(dts[t], nd, sshape, layout, 13 + i);
            for (int k = 0; k < 4; k++) {
                const bool select = k >= 2, adds = k % 2 == 1;
                tg_tensor *ix = select ? sel : idx, *s = !adds ? NULL : select ? ssrc : src;
                tg_tensor *want = by_loop(ops[k], x, dim, ix, s), *y[2] = {NULL, NULL};
                /* both held: the second result cannot reuse the first's memory */
                for (int threads = 1; threads <= 2; threads++) {
                    tg_tensor **yt = &y[threads - 1];
                    OK(tg_set_num_threads(threads));
                    OK(run_op(ops[k], yt, x, dim, ix, s));
                    const int64_t at = th_first_difference(*yt, want), a = at < 0 ? 0 : at;
                    cr_assert(eq(i64, at, -1), "%s %s case %zu layout %d, %d threads: "
                              "element %lld is %g, not %g", ops[k], tg_dtype_name(dts[t]),
                              i, layout, threads, (long long)at, th_at(*yt, a), th_at(want, a));
                }
                th_release_all(3, (tg_tensor *[]){want, y[0], y[1]});
            }
            th_release_all(5, (tg_tensor *[]){x, idx, sel, src, ssrc});
        }
    OK(tg_set_num_threads(old));
}

/* scatter_add along the last dim of a contiguous x whose rows the index
 * covers (the rows kernel, rows shared among threads): f32 and f64, 1-d to
 * 3-d, lines shorter and longer than x's rows, src contiguous and every
 * other row of a longer tensor, each index kernel, one thread and two:
 * the plain loop's bits; a bad value in the last row is refused. */
Test(gather, scatter_add_rows_give_the_plain_loops_bits)
{
    const struct { int nd; int64_t x[3], idx[3]; } cs[] = {
        {2, {512, 512}, {512, 512}}, {2, {300, 37}, {300, 700}}, {2, {257, 9}, {257, 1}},
        {3, {3, 70, 129}, {3, 70, 200}}, {1, {1000}, {3000}}, {2, {1, 16}, {1, 5}},
    };
    const tg_dtype dts[2] = {TG_F32, TG_F64};
    const int old = tg_get_num_threads();
    for (size_t i = 0; i < sizeof cs / sizeof *cs; i++)
        for (int t = 0; t < 2; t++)
            for (int layout = 0; layout < (cs[i].nd > 1 ? 2 : 1); layout++) {
                const int nd = cs[i].nd, dim = nd - 1;
                tg_tensor *x = th_layout_of(dts[t], nd, cs[i].x, 0, 3 + i);
                tg_tensor *idx = rand_index(nd, cs[i].idx, cs[i].x[dim], 5 + i);
                tg_tensor *src = th_layout_of(dts[t], nd, cs[i].idx, 2 * layout, 11 + i);
                tg_tensor *want = by_loop("scatter_add", x, dim, idx, src);
                for (int k = TG__INDEX_KERNEL_PORTABLE; k <= TG__INDEX_KERNEL_AVX512; k++) {
                    if (!tg__index_kernel_available((tg__index_kernel)k)) continue;
                    OK(setenv("TG_INDEX_KERNEL", tg__index_kernel_name((tg__index_kernel)k), 1));
                    for (int threads = 1; threads <= 2; threads++) {
                        tg_tensor *y = NULL;
                        OK(tg_set_num_threads(threads));
                        OK(tg_scatter_add(&y, x, dim, idx, src));
                        const int64_t at = th_first_difference(y, want), a = at < 0 ? 0 : at;
                        cr_assert(eq(i64, at, -1), "%s case %zu layout %d, %s, %d threads: "
                                  "element %lld is %g, not %g", tg_dtype_name(dts[t]), i,
                                  layout, tg__index_kernel_name((tg__index_kernel)k), threads,
                                  (long long)at, th_at(y, a), th_at(want, a));
                        tg_tensor_release(y);
                        y = NULL;
                        int64_t *v = tg_tensor_data(idx);
                        const int64_t last = tg_tensor_numel(idx) - 1, keep = v[last];
                        v[last] = cs[i].x[dim];
                        th_expect_refused(tg_scatter_add(&y, x, dim, idx, src), TG_EINVAL,
                                          "scatter_add: index", y);
                        v[last] = keep;
                    }
                }
                th_release_all(4, (tg_tensor *[]){x, idx, src, want});
            }
    OK(tg_set_num_threads(old));
    unsetenv("TG_INDEX_KERNEL");
}

/* Per dtype (f32, f64, f16, bf16): a signalling NaN with a payload, -0.0
 * and a negative quiet NaN with a payload, as bits. */
static const uint64_t special_bits[4][3] = {
    {0x7f800001u, 0x80000000u, 0xffc12345u},
    {0x7ff0000000000001u, 0x8000000000000000u, 0xfff8000000abcdefu},
    {0x7c01u, 0x8000u, 0xfe55u},
    {0x7f81u, 0x8000u, 0xffc5u},
};

/* th_layout_of's 2-d views (layout 0, 1, 2) of dtype dt (f32, f64, f16,
 * bf16) whose storage holds random bits with special_bits at every fifth
 * element. */
static tg_tensor *bits_layout(tg_dtype dt, const int64_t *shape, int layout, uint64_t seed)
{
    const int64_t s[2] = {layout == 1 ? shape[1] : layout == 2 ? 2 * shape[0] : shape[0],
                          layout == 1 ? shape[0] : shape[1]};
    const size_t es = tg_dtype_size(dt);
    const int which = dt == TG_F32 ? 0 : dt == TG_F64 ? 1 : dt == TG_F16 ? 2 : 3;
    tg_tensor *base = NULL, *v = NULL;
    OK(tg_tensor_zeros(&base, dt, 2, s));
    unsigned char *d = tg_tensor_data(base);
    for (int64_t i = 0; i < s[0] * s[1]; i++) {
        const uint64_t b = i % 5 ? th_xorshift64(&seed) : special_bits[which][i / 5 % 3];
        memcpy(d + (size_t)i * es, &b, es);   /* the low bytes: x86 is little-endian */
    }
    if (layout == 0) return base;
    if (layout == 1) OK(tg_transpose(&v, base, 0, 1));
    else OK(tg_slice(&v, base, 0, 1, s[0], 2));
    tg_tensor_release(base);
    return v;
}

/* gather and index_select copy x's bits: NaN payloads, a signalling NaN
 * and -0.0 come out as they went in, for every float dtype, contiguous,
 * transposed and row-strided x, along either dim, on one and two threads. */
Test(gather, picks_copy_bits)
{
    const tg_dtype dts[4] = {TG_F32, TG_F64, TG_F16, TG_BF16};
    const int64_t xs[2] = {300, 200}, len = 250;
    const int64_t ishape[2][2] = {{320, 190}, {290, 230}};   /* gather's index, dim 0 and 1 */
    const int old = tg_get_num_threads();
    for (int t = 0; t < 4; t++)
        for (int layout = 0; layout < 3; layout++)
            for (int dim = 0; dim < 2; dim++)
                for (int select = 0; select < 2; select++) {
                    tg_tensor *x = bits_layout(dts[t], xs, layout, 21 + (uint64_t)layout);
                    tg_tensor *idx = select ? rand_index(1, &len, xs[dim], 31 + (uint64_t)dim)
                                            : rand_index(2, ishape[dim], xs[dim], 37);
                    const int64_t *iv = tg_tensor_data(idx), *st = tg_tensor_strides(x);
                    const unsigned char *xd = tg_tensor_cdata(x);
                    const size_t es = tg_dtype_size(dts[t]);
                    int64_t ys[2] = {xs[0], xs[1]};
                    if (select) ys[dim] = len;
                    else memcpy(ys, ishape[dim], sizeof ys);
                    for (int threads = 1; threads <= 2; threads++) {
                        tg_tensor *y = NULL;
                        OK(tg_set_num_threads(threads));
                        OK(select ? tg_index_select(&y, x, dim, idx) : tg_gather(&y, x, dim, idx));
                        th_expect_shape(y, 2, ys);
                        const unsigned char *yd = tg_tensor_cdata(y);
                        int64_t bad = -1;
                        for (int64_t p = 0; bad < 0 && p < ys[0] * ys[1]; p++) {
                            int64_t c[2] = {p / ys[1], p % ys[1]};
                            c[dim] = iv[select ? c[dim] : p];
                            const int64_t e = c[0] * st[0] + c[1] * st[1];
                            if (memcmp(yd + (size_t)p * es, xd + (size_t)e * es, es)) bad = p;
                        }
                        cr_assert(eq(i64, bad, -1), "%s %s dim %d layout %d, %d threads",
                                  select ? "index_select" : "gather", tg_dtype_name(dts[t]), dim,
                                  layout, threads);
                        tg_tensor_release(y);
                    }
                    th_release_all(2, (tg_tensor *[]){x, idx});
                }
    OK(tg_set_num_threads(old));
}

/* A transposed index (gather, scatter_add) and every other value of one
 * (index_select, index_add) give the results of their contiguous copies. */
Test(gather, strided_index_gives_its_copys_result)
{
    const char *ops[4] = {"gather", "scatter_add", "index_select", "index_add"};
    const int64_t xs[2] = {40, 30}, its[2] = {30, 40}, len = 2 * 40;
    tg_tensor *x = th_layout_of(TG_F32, 2, xs, 0, 41), *base = rand_index(2, its, 30, 43);
    tg_tensor *sel_base = rand_index(1, &len, 40, 47), *idx[2] = {NULL, NULL};
    tg_tensor *sel[2] = {NULL, NULL}, *src = th_layout_of(TG_F32, 2, xs, 0, 53);
    OK(tg_transpose(&idx[0], base, 0, 1));   /* (40, 30) of values in [0, 30): dim 1 */
    OK(tg_slice(&sel[0], sel_base, 0, 0, len, 2));   /* 40 values in [0, 40): dim 0 */
    OK(tg_tensor_contiguous(&idx[1], idx[0]));
    OK(tg_tensor_contiguous(&sel[1], sel[0]));
    cr_assert(eq(int, tg_tensor_is_contiguous(idx[0]) || tg_tensor_is_contiguous(sel[0]), 0));
    for (int k = 0; k < 4; k++) {
        tg_tensor *y[2] = {NULL, NULL};
        const bool select = k >= 2;
        for (int c = 0; c < 2; c++)
            OK(run_op(ops[k], &y[c], x, select ? 0 : 1, select ? sel[c] : idx[c],
                      k % 2 ? src : NULL));
        cr_assert(eq(i64, th_first_difference(y[0], y[1]), -1), "%s", ops[k]);
        th_release_all(2, y);
    }
    th_release_all(8, (tg_tensor *[]){x, base, sel_base, idx[0], idx[1], sel[0], sel[1], src});
}

/* The shapes that take each way through the adds' blocks (a column at a
 * time, a row of a block, a few columns, rows split over two threads,
 * blocks of part of a line, lines that do not cover x, the bf16 sums):
 * x's shape, dim, the index's shape. */
static const struct {
    int nd;
    int64_t x[3];
    int dim;
    int64_t idx[3];
    tg_dtype dt;
} refusal_cases[] = {
    {2, {300, 200}, 1, {300, 200}, TG_F32},   /* along the last dim: a column per block */
    {2, {300, 200}, 0, {300, 200}, TG_F64},   /* a row of the block; rows split on 2 threads */
    {3, {1, 300, 3}, 1, {1, 300, 3}, TG_F32}, /* a few columns, one line: rows split */
    {2, {40, 600}, 0, {40, 600}, TG_F32},     /* 600 columns: blocks of part of a line */
    {2, {300, 200}, 1, {250, 150}, TG_F32},   /* the index covers part of x */
    {2, {300, 200}, 0, {300, 200}, TG_BF16},  /* sums in doubles */
};

/* One value out of range (-1, or the extent) at the first position of the
 * index, within it and at its last position: gather and scatter_add refuse
 * with TG_EINVAL naming that position and value, on one thread and two,
 * give no result and leave x, src and the index as they were. */
Test(gather, bad_index_refused_wherever_it_is_in_a_block)
{
    const int old = tg_get_num_threads();
    for (size_t i = 0; i < sizeof refusal_cases / sizeof *refusal_cases; i++) {
        const int nd = refusal_cases[i].nd, dim = refusal_cases[i].dim;
        const int64_t *is = refusal_cases[i].idx, extent = refusal_cases[i].x[dim];
        const tg_dtype dt = refusal_cases[i].dt;
        tg_tensor *x = th_layout_of(dt, nd, refusal_cases[i].x, 0, 61 + i);
        tg_tensor *src = th_layout_of(dt, nd, is, 0, 67 + i);
        tg_tensor *idx = rand_index(nd, is, extent, 71 + i), *x0 = NULL, *s0 = NULL, *i0 = NULL;
        OK(tg_tensor_clone(&x0, x));
        OK(tg_tensor_clone(&s0, src));
        const int64_t m = tg_tensor_numel(idx);
        const int64_t at[3] = {0, m / 2 + 3, m - 1};
        for (int w = 0; w < 3; w++) {
            int64_t *v = tg_tensor_data(idx);
            const int64_t keep = v[at[w]], bad = w == 1 ? -1 : extent;
            v[at[w]] = bad;
            OK(tg_tensor_clone(&i0, idx));
            char words[160], pos[64];
            int64_t c[3], rest = at[w];
            for (int d = nd - 1; d >= 0; d--) {
                c[d] = rest % is[d];
                rest /= is[d];
            }
            if (nd == 2) snprintf(pos, sizeof pos, "%lld, %lld", (long long)c[0], (long long)c[1]);
            else snprintf(pos, sizeof pos, "%lld, %lld, %lld", (long long)c[0], (long long)c[1],
                          (long long)c[2]);
            for (int k = 0; k < 2; k++)
                for (int threads = 1; threads <= 2; threads++) {
                    tg_tensor *y = NULL;
                    OK(tg_set_num_threads(threads));
                    snprintf(words, sizeof words,
                             "%s: index[%s]=%lld is out of range for dim %d of extent %lld",
                             k ? "scatter_add" : "gather", pos, (long long)bad, dim,
                             (long long)extent);
                    th_expect_refused(k ? tg_scatter_add(&y, x, dim, idx, src)
                                        : tg_gather(&y, x, dim, idx),
                                      TG_EINVAL, words, y);
                    th_expect_same_tensor_bytes(words, x, x0);
                    th_expect_same_tensor_bytes(words, src, s0);
                    th_expect_same_tensor_bytes(words, idx, i0);
                }
            v[at[w]] = keep;
            tg_tensor_release(i0);
            i0 = NULL;
        }
        th_release_all(5, (tg_tensor *[]){x, src, idx, x0, s0});
    }
    OK(tg_set_num_threads(old));
}

/* x with nothing along dim takes no index value: every one is refused. */
Test(gather, index_into_an_empty_dim_is_refused)
{
    tg_tensor *x = NULL, *src = NULL, *y = NULL;
    tg_tensor *idx = th_tensor_from(TG_I64, 2, (int64_t[]){3, 2}, (double[]){0, 0, 0, 0, 0, 0});
    OK(tg_tensor_zeros(&x, TG_F32, 2, (int64_t[]){3, 0}));
    OK(tg_tensor_zeros(&src, TG_F32, 2, (int64_t[]){3, 2}));
    th_expect_refused(tg_scatter_add(&y, x, 1, idx, src), TG_EINVAL,
                      "scatter_add: index[0, 0]=0 is out of range for dim 1 of extent 0", y);
    th_expect_refused(tg_gather(&y, x, 1, idx), TG_EINVAL,
                      "gather: index[0, 0]=0 is out of range for dim 1 of extent 0", y);
    th_release_all(3, (tg_tensor *[]){x, src, idx});
}

/* The sum of s and a term e as torch's CPU adds do on x86: s's NaN
 * (quieted) when s is a NaN, else s + e (e's NaN when only e is one). */
static float nan_sum_f(float s, float e) { return s != s ? s + s : s + e; }
static double nan_sum(double s, double e) { return s != s ? s + s : s + e; }

/* scatter_add of f32 and f64 along either dim, with NaNs carrying
 * payloads in x only, in src only, in both and in neither (a line each),
 * gives the bits of a loop that adds in the index's order with torch's
 * choice of NaN. */
Test(gather, adds_keep_torchs_nan_bits)
{
    const int64_t shape[2] = {4, 64};
    for (int t = 0; t < 2; t++)
        for (int dim = 0; dim < 2; dim++) {
            const tg_dtype dt = t ? TG_F64 : TG_F32;
            const size_t es = tg_dtype_size(dt);
            tg_tensor *x = th_layout_of(dt, 2, shape, 0, 81), *src = th_layout_of(dt, 2, shape, 0,
                                                                                 83);
            tg_tensor *idx = rand_index(2, shape, shape[dim], 87), *y = NULL;
            unsigned char *xd = tg_tensor_data(x), *sd = tg_tensor_data(src);
            const int64_t *iv = tg_tensor_data(idx);
            /* line 0: NaNs in neither; 1: in x; 2: in src; 3: in both (dim 1's lines) */
            for (int64_t p = 0; p < shape[0] * shape[1]; p++) {
                const int64_t line = dim ? p / shape[1] : p % shape[0];
                const uint64_t nan = t ? special_bits[1][p % 3 == 0 ? 0 : 2]
                                       : special_bits[0][p % 3 == 0 ? 0 : 2];
                if (p % 7 == 1 && (line == 1 || line == 3)) memcpy(xd + (size_t)p * es, &nan, es);
                if (p % 5 == 2 && line >= 2) memcpy(sd + (size_t)p * es, &nan, es);
            }
            tg_tensor *want = NULL;
            OK(tg_tensor_clone(&want, x));
            unsigned char *wd = tg_tensor_data(want);
            for (int64_t p = 0; p < shape[0] * shape[1]; p++) {
                int64_t c[2] = {p / shape[1], p % shape[1]};
                c[dim] = iv[p];
                const int64_t e = c[0] * shape[1] + c[1];
                if (t) {
                    double a, b;
                    memcpy(&a, wd + (size_t)e * es, es);
                    memcpy(&b, sd + (size_t)p * es, es);
                    a = nan_sum(a, b);
                    memcpy(wd + (size_t)e * es, &a, es);
                } else {
                    float a, b;
                    memcpy(&a, wd + (size_t)e * es, es);
                    memcpy(&b, sd + (size_t)p * es, es);
                    a = nan_sum_f(a, b);
                    memcpy(wd + (size_t)e * es, &a, es);
                }
            }
            OK(tg_scatter_add(&y, x, dim, idx, src));
            cr_assert(eq(i64, th_first_difference(y, want), -1), "%s dim %d",
                      tg_dtype_name(dt), dim);
            th_release_all(5, (tg_tensor *[]){x, src, idx, y, want});
        }
}
