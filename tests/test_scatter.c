/* tests/test_scatter.c - tg_scatter, tg_scatter_value and
 * tg_scatter_reduce against PyTorch's torch.scatter and
 * torch.scatter_reduce with their gradients (f32, f64, f16, bf16; ranks 1
 * to 4, every dim positive and negative, repeated indices, ties for amax
 * and amin, zeros for prod), gradcheck and gradgradcheck in f64, prod's
 * refused second derivative, strided inputs, empty indices, the bits of
 * a NaN written, the same bits on one and two threads, and the refusals.
 * Goldens: scripts/make_scatter_goldens.py. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

static tg_scatter_reduce_op reduce_of(const char *s)
{
    for (int r = TG_SCATTER_SUM; r <= TG_SCATTER_AMIN; r++)
        if (!strcmp(s, tg_scatter_reduce_name((tg_scatter_reduce_op)r)))
            return (tg_scatter_reduce_op)r;
    cr_assert(0 == 1, "unknown reduce %s", s);
    return TG_SCATTER_SUM;
}

/* Values and gradients, bit for bit, of every case torch wrote. */
Test(scatter, every_case_matches_torch)
{
    tg_st_file *f = th_golden_load("scatter.safetensors");
    const int n = atoi(tg_st_meta_get(f, "cases"));
    int per_op[3] = {0}, per_reduce[5] = {0};
    for (int i = 0; i < n; i++) {
        char c[16], what[128];
        snprintf(c, sizeof c, "case%d", i);
        const char *op = th_golden_meta(f, c, "op"), *dt = th_golden_meta(f, c, "dtype");
        const char *red = th_golden_meta(f, c, "reduce");
        const int dim = atoi(th_golden_meta(f, c, "dim"));
        const bool inc = atoi(th_golden_meta(f, c, "include_self")) != 0;
        const bool value = !strcmp(op, "scatter_value");
        tg_tensor *x = th_leaf_clone(th_golden_get(f, c, "x"));
        tg_tensor *idx = (tg_tensor *)th_golden_get(f, c, "index");
        tg_tensor *src = value ? NULL : th_leaf_clone(th_golden_get(f, c, "src")), *y = NULL;
        snprintf(what, sizeof what, "%s y (%s %s %s%s, dim %d, %d dims)", c, op, red,
                 inc ? "" : "excluding self ", dt, dim, tg_tensor_ndim(x));
        if (value) {
            OK(tg_scatter_value(&y, x, dim, idx, atof(th_golden_meta(f, c, "value"))));
            per_op[1]++;
        } else if (!strcmp(op, "scatter")) {
            OK(tg_scatter(&y, x, dim, idx, src));
            per_op[0]++;
        } else {
            const tg_scatter_reduce_op r = reduce_of(red);
            OK(tg_scatter_reduce(&y, x, dim, idx, src, r, inc));
            per_op[2]++;
            per_reduce[r]++;
        }
        th_expect_close(what, y, th_golden_get(f, c, "y"), 0);
        tg_tensor *g = (tg_tensor *)th_golden_get(f, c, "g"), *d[2] = {NULL, NULL};
        OK(tg_grad(d, 1, &y, &g, value ? 1 : 2, (tg_tensor *[]){x, src}, NULL));
        char w2[160];
        snprintf(w2, sizeof w2, "dx of %s", what);
        th_expect_close(w2, d[0], th_golden_get(f, c, "dx"), 0);
        if (!value) {
            snprintf(w2, sizeof w2, "dsrc of %s", what);
            th_expect_close(w2, d[1], th_golden_get(f, c, "dsrc"), 0);
        }
        th_release_all(5, (tg_tensor *[]){x, src, y, d[0], d[1]});
    }
    for (int k = 0; k < 3; k++) cr_assert(per_op[k] >= 30, "op %d: %d cases", k, per_op[k]);
    for (int k = 0; k < 5; k++) cr_assert(per_reduce[k] >= 60, "reduce %d: %d", k, per_reduce[k]);
    tg_st_free(f);
}

typedef struct gc_case {
    const char *op;   /* "scatter", "scatter_value" or a reduce's name */
    int dim;
    bool include_self;
} gc_case;

/* in[0] x (3, 4), in[1] src (2, 3) but for scatter_value; a fixed index. */
static int gc_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    const gc_case *c = user;
    /* repeats for the reductions; none along either dim for scatter,
     * whose gradient for an overwritten src term is torch's formula, not
     * the derivative */
    static const double rep[6] = {2, 0, 2, 1, 1, 2}, once[6] = {2, 0, 1, 1, 2, 0};
    const bool plain = !strncmp(c->op, "scatter", 7);
    tg_tensor *idx = th_tensor_from(TG_I64, 2, (int64_t[]){2, 3}, plain ? once : rep);
    int rc;
    if (!strcmp(c->op, "scatter")) rc = tg_scatter(out, in[0], c->dim, idx, in[1]);
    else if (!strcmp(c->op, "scatter_value")) rc = tg_scatter_value(out, in[0], c->dim, idx, 1.5);
    else
        rc = tg_scatter_reduce(out, in[0], c->dim, idx, n > 1 ? in[1] : NULL, reduce_of(c->op),
                               c->include_self);
    tg_tensor_release(idx);
    return rc;
}

Test(scatter, gradcheck_and_gradgradcheck)
{
    const gc_case cases[] = {
        {"scatter", 0, true},   {"scatter", -1, true}, {"scatter_value", 1, true},
        {"sum", 0, true},       {"sum", 1, false},     {"prod", 0, true},
        {"prod", -1, false},    {"mean", 1, true},     {"mean", 0, false},
        {"amax", 0, true},      {"amax", 1, false},    {"amin", -2, true},
        {"amin", 1, false}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        uint64_t s = 701 + i;
        const bool has_src = strcmp(cases[i].op, "scatter_value") != 0;
        /* magnitudes in [0.5, 2] with random signs: no zeros (prod), and
         * the amax / amin terms apart by more than the step */
        tg_tensor *in[2] = {th_rand_tensor(&s, TG_F64, 2, (int64_t[]){3, 4}, 0.5, 2), NULL};
        if (has_src) in[1] = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){2, 3}, 0.5, 2);
        for (int k = 0; k < (has_src ? 2 : 1); k++) {
            double *d = tg_tensor_data(in[k]);
            for (int64_t e = 0; e < tg_tensor_numel(in[k]); e++)
                d[e] = ((e * 7 + k) % 3 == 0 ? -1 : 1) * (d[e] + 0.01 * (double)e);
            OK(tg_tensor_set_requires_grad(in[k], true));
        }
        th_expect_gradchecks(gc_fn, (void *)&cases[i], has_src ? 2 : 1, in, "%s dim %d%s",
                             cases[i].op, cases[i].dim, cases[i].include_self ? "" : " excl");
        th_release_all(2, in);
    }
}

/* prod with two zeros of src reaching one element: the first derivative
 * (torch's: 0 for both), and a create_graph backward refused. */
Test(scatter, prod_two_zeros_second_derivative_refused)
{
    tg_tensor *x = th_vec(TG_F64, 2, (double[]){1, 2}, "x", true);
    tg_tensor *src = th_vec(TG_F64, 3, (double[]){0, 0, 3}, "src", true);
    tg_tensor *idx = th_vec(TG_I64, 3, (double[]){0, 0, 1}, "i", false), *y = NULL, *l = NULL;
    OK(tg_scatter_reduce(&y, x, 0, idx, src, TG_SCATTER_PROD, true));
    OK(tg_sum(&l, y));
    tg_tensor *d[2] = {NULL, NULL};
    tg_backward_opts keep = TG_BACKWARD_OPTS_INIT;
    keep.retain_graph = true;
    OK(tg_grad(d, 1, &l, NULL, 2, (tg_tensor *[]){x, src}, &keep));
    cr_assert(eq(dbl, th_at(d[1], 0), 0.0));
    cr_assert(eq(dbl, th_at(d[1], 1), 0.0));
    cr_assert(eq(dbl, th_at(d[1], 2), 2.0));
    cr_assert(eq(dbl, th_at(d[0], 1), 3.0));
    th_release_all(2, d);
    tg_backward_opts o = TG_BACKWARD_OPTS_INIT;
    o.create_graph = true;
    const int rc = tg_grad(d, 1, &l, NULL, 2, (tg_tensor *[]){x, src}, &o);
    cr_assert(eq(int, rc, TG_EUNSUPPORTED), "%d %s", rc, tg_error_message());
    cr_assert(strstr(tg_error_message(), "more than one zero") != NULL, "%s", tg_error_message());
    th_release_all(7, (tg_tensor *[]){x, src, idx, y, l, d[0], d[1]});
}

/* A transposed x, src and index give what their contiguous copies give,
 * values and gradients. */
Test(scatter, strided_inputs)
{
    for (int k = 0; k < 4; k++) {
        tg_tensor *xb = th_seq(TG_F32, 2, (int64_t[]){4, 3}, -2, 2), *xt = NULL, *xc = NULL;
        tg_tensor *sb = th_seq(TG_F32, 2, (int64_t[]){2, 3}, 0.5, 3), *st = NULL, *sc = NULL;
        tg_tensor *ib = th_tensor_from(TG_I64, 2, (int64_t[]){2, 3},
                                       (double[]){0, 2, 1, 1, 0, 0});
        tg_tensor *it = NULL, *ic = NULL, *y = NULL, *want = NULL;
        OK(tg_transpose(&xt, xb, 0, 1));   /* (3, 4) */
        OK(tg_transpose(&st, sb, 0, 1));   /* (3, 2) */
        OK(tg_transpose(&it, ib, 0, 1));
        cr_assert(not(tg_tensor_is_contiguous(xt)));
        cr_assert(not(tg_tensor_is_contiguous(it)));
        OK(tg_tensor_contiguous(&xc, xt));
        OK(tg_tensor_contiguous(&sc, st));
        OK(tg_tensor_contiguous(&ic, it));
        if (k == 0) {
            OK(tg_scatter(&y, xt, 1, it, st));
            OK(tg_scatter(&want, xc, 1, ic, sc));
        } else if (k == 1) {
            OK(tg_scatter_value(&y, xt, 1, it, -7));
            OK(tg_scatter_value(&want, xc, 1, ic, -7));
        } else {
            const tg_scatter_reduce_op r = k == 2 ? TG_SCATTER_MEAN : TG_SCATTER_AMAX;
            OK(tg_scatter_reduce(&y, xt, 1, it, st, r, k == 2));
            OK(tg_scatter_reduce(&want, xc, 1, ic, sc, r, k == 2));
        }
        th_expect_close("strided", y, want, 0);
        th_release_all(11, (tg_tensor *[]){xb, xt, xc, sb, st, sc, ib, it, ic, y, want});
    }
}

/* Repeated positions: the last in the index's order stays; every term
 * gets its element's g (torch 1.13's values). */
Test(scatter, last_write_stays)
{
    tg_tensor *x = th_vec(TG_F32, 3, (double[]){0, 0, 0}, "x", true);
    tg_tensor *src = th_vec(TG_F32, 3, (double[]){1, 2, 3}, "src", true);
    tg_tensor *idx = th_vec(TG_I64, 3, (double[]){1, 1, 0}, "i", false), *y = NULL;
    tg_tensor *g = th_vec(TG_F32, 3, (double[]){10, 20, 30}, "g", false);
    OK(tg_scatter(&y, x, 0, idx, src));
    cr_assert(eq(dbl, th_at(y, 0), 3.0));
    cr_assert(eq(dbl, th_at(y, 1), 2.0));
    cr_assert(eq(dbl, th_at(y, 2), 0.0));
    tg_tensor *d[2] = {NULL, NULL};
    OK(tg_grad(d, 1, &y, &g, 2, (tg_tensor *[]){x, src}, NULL));
    const double dx[3] = {0, 0, 30}, ds[3] = {20, 20, 10};
    for (int i = 0; i < 3; i++) {
        cr_assert(eq(dbl, th_at(d[0], i), dx[i]));
        cr_assert(eq(dbl, th_at(d[1], i), ds[i]));
    }
    th_release_all(7, (tg_tensor *[]){x, src, idx, y, g, d[0], d[1]});
}

/* A written NaN keeps its payload; an empty index writes nothing. */
Test(scatter, bits_and_empty_index)
{
    tg_tensor *x = NULL, *src = NULL, *y = NULL, *e = NULL, *es = NULL;
    OK(tg_tensor_zeros(&x, TG_F32, 1, (int64_t[]){2}));
    OK(tg_tensor_zeros(&src, TG_F32, 1, (int64_t[]){1}));
    const uint32_t payload = 0x7fc01234u;
    memcpy(tg_tensor_data(src), &payload, 4);
    tg_tensor *idx = th_vec(TG_I64, 1, (double[]){1}, "i", false);
    OK(tg_scatter(&y, x, 0, idx, src));
    uint32_t got;
    memcpy(&got, (const char *)tg_tensor_cdata(y) + 4, 4);
    cr_assert(eq(u32, got, payload));
    tg_tensor_release(y);
    OK(tg_tensor_zeros(&e, TG_I64, 1, (int64_t[]){0}));
    OK(tg_tensor_zeros(&es, TG_F32, 1, (int64_t[]){0}));
    tg_tensor *x2 = th_seq(TG_F32, 2, (int64_t[]){2, 3}, 1, 6);
    OK(tg_scatter(&y, x2, 1, e, es));
    th_expect_close("empty index", y, x2, 0);
    tg_tensor_release(y);
    OK(tg_scatter_reduce(&y, x2, 0, e, es, TG_SCATTER_PROD, false));
    th_expect_close("empty index reduce", y, x2, 0);
    th_release_all(7, (tg_tensor *[]){x, src, y, e, es, idx, x2});
}

/* Large enough to run on the pool: one and two threads give the same
 * bits (each line of the index is one thread's). */
Test(scatter, same_bits_on_one_and_two_threads)
{
    uint64_t s = 99;
    const int64_t xs[2] = {64, 600}, is[2] = {64, 1200};
    tg_tensor *x = th_rand_tensor(&s, TG_F32, 2, xs, -1, 1);
    tg_tensor *src = th_rand_tensor(&s, TG_F32, 2, is, -1, 1), *idx = NULL;
    OK(tg_tensor_zeros(&idx, TG_I64, 2, is));
    int64_t *v = tg_tensor_data(idx);
    for (int64_t i = 0; i < 64 * 1200; i++) v[i] = th_rand_int(&s, 0, 599);
    const int before = tg_get_num_threads();
    tg_tensor *y[2][3] = {{NULL}};
    for (int t = 0; t < 2; t++) {
        OK(tg_set_num_threads(t + 1));
        OK(tg_scatter(&y[t][0], x, 1, idx, src));
        OK(tg_scatter_reduce(&y[t][1], x, 1, idx, src, TG_SCATTER_SUM, true));
        OK(tg_scatter_reduce(&y[t][2], x, 1, idx, src, TG_SCATTER_MEAN, false));
    }
    OK(tg_set_num_threads(before));
    for (int k = 0; k < 3; k++) {
        cr_assert(th_same_bits(y[0][k], y[1][k]), "result %d", k);
        th_release_all(2, (tg_tensor *[]){y[0][k], y[1][k]});
    }
    th_release_all(3, (tg_tensor *[]){x, src, idx});
}

Test(scatter, refusals)
{
    tg_tensor *x = th_seq(TG_F32, 2, (int64_t[]){2, 3}, 0, 1);
    tg_tensor *src = th_seq(TG_F32, 2, (int64_t[]){1, 2}, 0, 1);
    tg_tensor *idx = th_tensor_from(TG_I64, 2, (int64_t[]){1, 2}, (double[]){1, 0});
    tg_tensor *bad = th_tensor_from(TG_I64, 2, (int64_t[]){1, 2}, (double[]){1, 5});
    tg_tensor *neg = th_tensor_from(TG_I64, 2, (int64_t[]){1, 2}, (double[]){-1, 0});
    tg_tensor *i32 = th_tensor_from(TG_I32, 2, (int64_t[]){1, 2}, (double[]){1, 0});
    tg_tensor *i1 = th_vec(TG_I64, 2, (double[]){1, 0}, "i1", false);
    tg_tensor *wide = th_tensor_from(TG_I64, 2, (int64_t[]){1, 4}, (double[]){0, 0, 0, 0});
    tg_tensor *sd = th_seq(TG_F64, 2, (int64_t[]){1, 2}, 0, 1);
    tg_tensor *s3 = th_seq(TG_F32, 2, (int64_t[]){1, 3}, 0, 1);
    tg_tensor *xi = th_tensor_from(TG_I32, 2, (int64_t[]){2, 3}, (double[]){0, 1, 2, 3, 4, 5});
    tg_tensor *xh = th_seq(TG_F16, 2, (int64_t[]){2, 3}, 0, 1);
    th_expect_refused_clean(tg_scatter(out_, x, 0, bad, src), TG_EINVAL,
                            "scatter: index[0, 1]=5 is out of range for dim 0 of extent 2");
    th_expect_refused_clean(tg_scatter(out_, x, 0, neg, src), TG_EINVAL, "index[0, 0]=-1");
    th_expect_refused_clean(tg_scatter_reduce(out_, x, 0, bad, src, TG_SCATTER_SUM, true),
                            TG_EINVAL, "scatter_reduce: index[0, 1]=5");
    th_expect_refused_clean(tg_scatter(out_, x, 0, i32, src), TG_EDTYPE, "index has dtype i32");
    th_expect_refused_clean(tg_scatter(out_, x, 0, idx, sd), TG_EDTYPE, "src has dtype f64");
    th_expect_refused_clean(tg_scatter(out_, x, 0, idx, s3), TG_ESHAPE, "src must have index");
    th_expect_refused_clean(tg_scatter(out_, x, 0, i1, i1), TG_EDTYPE,
                            "src has dtype i64 but x has f32");
    th_expect_refused_clean(tg_scatter_value(out_, x, 0, i1, 1), TG_ESHAPE, "index has 1 dims");
    th_expect_refused_clean(tg_scatter_value(out_, x, 0, wide, 1), TG_ESHAPE,
                            "index.size(1)=4 must be <= x.size(1)=3");
    th_expect_refused_clean(tg_scatter_value(out_, x, 2, idx, 1), TG_EINVAL, "dim=2");
    th_expect_refused_clean(tg_scatter_value(out_, x, -3, idx, 1), TG_EINVAL, "dim=-3");
    th_expect_refused_clean(tg_scatter_value(out_, xi, 0, idx, 1e10), TG_EINVAL, "to i32");
    th_expect_refused_clean(tg_scatter_value(out_, xh, 0, idx, 1e6), TG_EINVAL, "value");
    th_expect_refused_clean(tg_scatter(out_, NULL, 0, idx, src), TG_EINVAL, "x must not");
    th_expect_refused_clean(tg_scatter(out_, x, 0, NULL, src), TG_EINVAL, "index must not");
    th_expect_refused_clean(tg_scatter(out_, x, 0, idx, NULL), TG_EINVAL, "src must not");
    th_expect_refused_clean(tg_scatter_reduce(out_, x, 0, idx, src, (tg_scatter_reduce_op)5,
                                              true),
                            TG_EINVAL, "reduce=5");
    cr_assert(eq(int, tg_scatter(NULL, x, 0, idx, src), TG_EINVAL));
    cr_assert(tg_scatter_reduce_name((tg_scatter_reduce_op)-1) == NULL);
    cr_assert(eq(str, (char *)tg_scatter_reduce_name(TG_SCATTER_AMIN), "amin"));
    th_release_all(12, (tg_tensor *[]){x, src, idx, bad, neg, i32, i1, wide, sd, s3, xi, xh});
}
