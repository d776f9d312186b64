/* tests/test_diagonal.c - tg_diagonal, tg_diag_embed, tg_diag and tg_trace
 * against PyTorch (values and gradients; f32, f64, bf16, i64; every pair
 * of dims, offsets inside and past the matrix, empty extents), the adjoint
 * identity of diagonal and diagonal_embed, gradcheck and gradgradcheck in
 * f64, the view sharing x's storage, scopes and the refusals.  Goldens:
 * scripts/make_diagonal_goldens.py. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

static int run_case(const char *fn, tg_tensor **y, tg_tensor *x, int64_t off, int d1, int d2)
{
    if (!strcmp(fn, "diagonal")) return tg_diagonal(y, x, off, d1, d2);
    if (!strcmp(fn, "diag_embed")) return tg_diag_embed(y, x, off, d1, d2);
    if (!strcmp(fn, "diag")) return tg_diag(y, x, off);
    if (!strcmp(fn, "trace")) return tg_trace(y, x);
    cr_assert(false, "unknown fn %s", fn);
    return TG_EINVAL;
}

/* The elements move unchanged (trace sums a few in double, rounded once):
 * bit for bit. */
Test(diagonal, every_case_matches_torch)
{
    tg_st_file *f = th_golden_load("diagonal.safetensors");
    const int n = atoi(tg_st_meta_get(f, "cases"));
    int fns = 0, grads = 0, empty = 0;
    for (int i = 0; i < n; i++) {
        char c[16], key[32], what[128];
        snprintf(c, sizeof c, "case%d", i);
        const char *fn = th_golden_meta(f, c, "fn");
        const tg_tensor *gx = th_golden_get(f, c, "x");
        const bool is_float = tg_dtype_is_float(tg_tensor_dtype(gx));
        tg_tensor *x = is_float ? th_leaf_clone(gx) : tg_tensor_retain((tg_tensor *)gx);
        tg_tensor *y = NULL, *dx = NULL;
        snprintf(what, sizeof what, "%s (%s %s, %d-d, offset %s, dims %s %s)", c, fn,
                 th_golden_meta(f, c, "dtype"), tg_tensor_ndim(x), th_golden_meta(f, c, "offset"),
                 th_golden_meta(f, c, "dim1"), th_golden_meta(f, c, "dim2"));
        OK(run_case(fn, &y, x, atoll(th_golden_meta(f, c, "offset")),
                    atoi(th_golden_meta(f, c, "dim1")), atoi(th_golden_meta(f, c, "dim2"))));
        th_expect_close(what, y, th_golden_get(f, c, "y"), 0);
        snprintf(key, sizeof key, "%s.g", c);
        tg_tensor *g = tg_st_get(f, key);
        if (g) {
            OK(tg_grad(&dx, 1, &y, &g, 1, &x, NULL));
            th_expect_close(what, dx, th_golden_get(f, c, "dx"), 0);
            grads++;
        }
        empty += tg_tensor_numel(y) == 0;
        fns |= 1 << (!strcmp(fn, "diagonal") ? 0 : !strcmp(fn, "diag_embed") ? 1
                     : !strcmp(fn, "diag") ? 2 : 3);
        th_release_all(3, (tg_tensor *[]){x, y, dx});
    }
    cr_assert(n >= 700 && fns == 0xf && grads >= 500 && empty >= 50,
              "%d cases, fns %x, %d gradients, %d empty", n, fns, grads, empty);
    tg_st_free(f);
}

/* <diagonal(x), v> = <x, diagonal_embed(v)>: the backward of diagonal
 * (embed) is its adjoint, for every pair of dims and offsets. */
Test(diagonal, adjoint_identity)
{
    uint64_t s = 3;
    const int64_t shape[] = {3, 4, 5};
    for (int d1 = 0; d1 < 3; d1++)
        for (int d2 = 0; d2 < 3; d2++)
            for (int64_t off = -3; off <= 4 && d1 != d2; off++) {
                tg_tensor *x = th_rand_tensor(&s, TG_F64, 3, shape, -1, 1), *y = NULL;
                OK(tg_tensor_set_requires_grad(x, true));
                OK(tg_diagonal(&y, x, off, d1, d2));
                tg_tensor *v = th_rand_tensor(&s, TG_F64, tg_tensor_ndim(y), tg_tensor_shape(y),
                                              -1, 1);
                tg_tensor *dx = NULL;
                OK(tg_grad(&dx, 1, &y, &v, 1, &x, NULL));
                double lhs = 0, rhs = 0;
                for (int64_t e = 0; e < tg_tensor_numel(y); e++) lhs += th_at(y, e) * th_at(v, e);
                for (int64_t e = 0; e < 60; e++) rhs += th_at(x, e) * th_at(dx, e);
                cr_assert(fabs(lhs - rhs) <= 1e-12, "dims %d %d offset %lld: %g vs %g", d1, d2,
                          (long long)off, lhs, rhs);
                th_release_all(4, (tg_tensor *[]){x, y, v, dx});
            }
}

typedef struct diag_case {
    int fn;   /* 0 diagonal, 1 diag_embed, 2 diag, 3 trace */
    int64_t offset;
    int dim1, dim2;
    int ndim;   /* of x, (3, 4, 2) cut to it */
} diag_case;

static int diag_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    const diag_case *c = user;
    const char *fns[] = {"diagonal", "diag_embed", "diag", "trace"};
    return run_case(fns[c->fn], out, in[0], c->offset, c->dim1, c->dim2);
}

Test(diagonal, gradcheck_and_gradgradcheck)
{
    const diag_case cases[] = {{0, 1, 0, 2, 3}, {0, -2, -1, 1, 3}, {1, 1, -2, -1, 2},
                               {1, -1, 1, 0, 1}, {2, 0, 0, 0, 2}, {2, -1, 0, 0, 1},
                               {3, 0, 0, 0, 2}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        uint64_t s = 40 + c;
        const int64_t shape[] = {3, 4, 2};
        tg_tensor *x = th_rand_tensor(&s, TG_F64, cases[c].ndim, shape, -2, 2);
        OK(tg_tensor_set_requires_grad(x, true));
        th_expect_gradchecks(diag_fn, (void *)&cases[c], 1, &x, "case %zu", c);
        tg_tensor_release(x);
    }
}

/* diagonal is a view: a write to x shows in it, and it reads a transposed
 * x through its strides; diag of a matrix is a copy, also of one element. */
Test(diagonal, views_and_copies)
{
    tg_tensor *x = th_arange(TG_F32, 2, (int64_t[]){3, 4}), *v = NULL, *t = NULL, *tv = NULL;
    OK(tg_diagonal(&v, x, 1, 0, 1));   /* x[0][1], x[1][2], x[2][3] */
    cr_assert(eq(dbl, th_at(v, 2), 11));
    float *xd = tg_tensor_data(x);
    xd[6] = -7;   /* x[1][2] */
    cr_assert(eq(dbl, th_at(v, 1), -7));
    OK(tg_transpose(&t, x, 0, 1));
    OK(tg_diagonal(&tv, t, -1, 0, 1));   /* t[1][0] ... = x[0][1] ... */
    th_expect_same_bits("transposed", t, tv, v);
    tg_tensor *one = NULL, *m = NULL;
    OK(tg_tensor_zeros(&m, TG_F32, 2, (int64_t[]){1, 1}));
    OK(tg_diag(&one, m, 0));
    cr_assert(tg_tensor_cdata(one) != tg_tensor_cdata(m), "diag of a matrix is a copy");
    th_release_all(6, (tg_tensor *[]){x, v, t, tv, one, m});
}

/* A matrix taller than wide: trace's gradient is g at (i, i) only (torch
 * 1.13's puts it at every (columns + 1)-th element, (2, 0) of a (4, 1)). */
Test(diagonal, trace_of_a_tall_matrix)
{
    tg_tensor *x = th_arange(TG_F64, 2, (int64_t[]){4, 1}), *t = NULL, *dx = NULL;
    OK(tg_tensor_set_requires_grad(x, true));
    OK(tg_trace(&t, x));
    cr_assert(eq(dbl, tg_tensor_item(t), 0));
    OK(tg_grad(&dx, 1, &t, NULL, 1, &x, NULL));
    const double want[] = {1, 0, 0, 0};
    for (int i = 0; i < 4; i++) cr_assert(eq(dbl, th_at(dx, i), want[i]), "dx[%d]", i);
    th_release_all(3, (tg_tensor *[]){x, t, dx});
}

Test(diagonal, scopes_own_the_results)
{
    tg_tensor *x = th_arange(TG_F64, 2, (int64_t[]){3, 3}), *a = NULL, *b = NULL, *c = NULL;
    OK(tg_scope_begin());
    OK(tg_trace(&a, x));
    OK(tg_diag(&b, x, 0));
    OK(tg_diag_embed(&c, b, 0, -2, -1));
    cr_assert(eq(int, tg_scope_size(), 3));
    cr_assert(eq(dbl, tg_tensor_item(a), 12));
    OK(tg_scope_end());
    tg_tensor_release(x);
}

Test(diagonal, refusals)
{
    tg_tensor *v = th_arange(TG_F32, 1, (int64_t[]){3}), *m = th_arange(TG_F32, 2,
                                                                       (int64_t[]){2, 2});
    tg_tensor *y = NULL;
    th_expect_refused(tg_diagonal(&y, v, 0, 0, 1), TG_EINVAL, "a diagonal needs 2 or more", y);
    th_expect_refused(tg_diagonal(&y, m, 0, 1, -1), TG_EINVAL, "must differ", y);
    th_expect_refused(tg_diagonal(&y, m, 0, 0, 2), TG_EINVAL, "dim2=2", y);
    th_expect_refused(tg_diagonal(NULL, m, 0, 0, 1), TG_EINVAL, "out must not be NULL", NULL);
    th_expect_refused(tg_diag_embed(&y, NULL, 0, 0, 1), TG_EINVAL, "x must not be NULL", y);
    th_expect_refused(tg_diag_embed(&y, v, INT64_MIN, 0, 1), TG_EINVAL, "offset", y);
    th_expect_refused(tg_diag(&y, NULL, 0), TG_EINVAL, "x must not be NULL", y);
    tg_tensor *s = NULL;
    OK(tg_tensor_zeros(&s, TG_F32, 0, NULL));
    th_expect_refused(tg_diag(&y, s, 0), TG_EINVAL, "must have 1", y);
    th_expect_refused(tg_diag_embed(&y, s, 0, 0, 1), TG_EINVAL, "1 to", y);
    th_expect_refused(tg_trace(&y, v), TG_EINVAL, "must be a matrix", y);
    th_release_all(3, (tg_tensor *[]){v, m, s});
}
