/* tests/test_sort.c - tg_sort, tg_argsort, tg_topk, tg_kthvalue and the
 * medians against PyTorch (values, indices and gradients; f32, f64, bf16,
 * f16, i64, i32, u8; ranks 0 to 3, every dim, an empty extent, ties and
 * NaNs), invariants on random rows (sorted order, a permutation, stability,
 * topk and kthvalue agreeing with sort), gradcheck and gradgradcheck in
 * f64, views, scopes and the refusals.  Goldens:
 * scripts/make_sort_goldens.py. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "first_kernels.h"
#include "helpers.h"
#include "ops/sort_internal.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

/* Runs golden case c's function on x: values into *y (NULL for argsort),
 * indices into *i (NULL for the whole-tensor medians). */
static int run_case(const tg_st_file *f, const char *c, tg_tensor *x, tg_tensor **y,
                    tg_tensor **i)
{
    const char *fn = th_golden_meta(f, c, "fn");
    const int dim = atoi(th_golden_meta(f, c, "dim"));
    const bool flag = atoi(th_golden_meta(f, c, "flag")) != 0;
    const int64_t k = atoll(th_golden_meta(f, c, "k"));
    if (!strcmp(fn, "sort")) return tg_sort(y, i, x, dim, flag);
    if (!strcmp(fn, "argsort")) return tg_argsort(i, x, dim, flag);
    if (!strcmp(fn, "topk")) return tg_topk(y, i, x, k, dim, flag, true);
    if (!strcmp(fn, "kthvalue")) return tg_kthvalue(y, i, x, k, dim, flag);
    if (!strcmp(fn, "median_dim")) return tg_median_dim(y, i, x, dim, flag);
    if (!strcmp(fn, "nanmedian_dim")) return tg_nanmedian_dim(y, i, x, dim, flag);
    if (!strcmp(fn, "median")) return tg_median(y, x);
    if (!strcmp(fn, "nanmedian")) return tg_nanmedian(y, x);
    cr_assert(false, "%s: unknown fn %s", c, fn);
    return TG_EINVAL;
}

/* Values and indices are torch's exactly (the elements are copied, and the
 * cases with an index torch picks by quickselect hold distinct values);
 * gradients too (each g element goes to one place). */
Test(sort, every_case_matches_torch)
{
    tg_st_file *f = th_golden_load("sort.safetensors");
    const int n = atoi(tg_st_meta_get(f, "cases"));
    int fns = 0, grads = 0, ints = 0, nans = 0;
    for (int c_i = 0; c_i < n; c_i++) {
        char c[16], key[32], what[128];
        snprintf(c, sizeof c, "case%d", c_i);
        const char *fn = th_golden_meta(f, c, "fn"), *dt = th_golden_meta(f, c, "dtype");
        const tg_tensor *gx = th_golden_get(f, c, "x");
        const bool is_float = tg_dtype_is_float(tg_tensor_dtype(gx));
        tg_tensor *x = is_float ? th_leaf_clone(gx) : tg_tensor_retain((tg_tensor *)gx);
        tg_tensor *y = NULL, *i = NULL, *dx = NULL;
        snprintf(what, sizeof what, "%s (%s %s, %d-d, dim %s, flag %s, k %s)", c, fn, dt,
                 tg_tensor_ndim(x), th_golden_meta(f, c, "dim"), th_golden_meta(f, c, "flag"),
                 th_golden_meta(f, c, "k"));
        const bool whole = !strcmp(fn, "median") || !strcmp(fn, "nanmedian");
        OK(run_case(f, c, x, !strcmp(fn, "argsort") ? NULL : &y, whole ? NULL : &i));
        if (y) th_expect_close(what, y, th_golden_get(f, c, "y"), 0);
        if (i) th_expect_close(what, i, th_golden_get(f, c, "i"), 0);
        snprintf(key, sizeof key, "%s.g", c);
        tg_tensor *g = tg_st_get(f, key);
        if (g) {
            OK(tg_grad(&dx, 1, &y, &g, 1, &x, NULL));
            th_expect_close(what, dx, th_golden_get(f, c, "dx"), 0);
            grads++;
        }
        if (y && is_float)
            for (int64_t e = 0; e < tg_tensor_numel(y); e++) nans += isnan(th_at(y, e));
        ints += !is_float;
        fns |= 1 << (strcmp(fn, "sort") == 0 ? 0 : strcmp(fn, "argsort") == 0 ? 1
                     : strcmp(fn, "topk") == 0 ? 2 : strcmp(fn, "kthvalue") == 0 ? 3
                     : strcmp(fn, "median_dim") == 0 ? 4 : strcmp(fn, "nanmedian_dim") == 0 ? 5
                     : strcmp(fn, "median") == 0 ? 6 : 7);
        th_release_all(4, (tg_tensor *[]){x, y, i, dx});
    }
    cr_assert(n >= 1500 && fns == 0xff && grads >= 700 && ints >= 700 && nans >= 100,
              "%d cases, fns %x, %d gradients, %d integer, %d NaN values", n, fns, grads, ints,
              nans);
    tg_st_free(f);
}

/* A row of random values with ties (few distinct values) and NaNs. */
static tg_tensor *tied_rows(uint64_t *s, int64_t rows, int64_t n)
{
    tg_tensor *x = th_rand_tensor(s, TG_F64, 2, (int64_t[]){rows, n}, 0, 1);
    double *d = tg_tensor_data(x);
    for (int64_t e = 0; e < rows * n; e++) {
        const int64_t v = th_rand_int(s, 0, 9);
        d[e] = v == 9 ? NAN : (double)(v - 4);
    }
    return x;
}

/* Whether a goes strictly before b in the order (NaN last ascending,
 * first descending). */
static bool before(double a, double b, bool desc)
{
    if (desc) return isnan(a) ? !isnan(b) : !isnan(b) && a > b;
    return !isnan(a) && (isnan(b) || a < b);
}

/* On rows of every length up to 100 (the merge sort's runs of 16 and its
 * merges): the values are in order, the indices a permutation, equal
 * values in index order (stable), values[j] = x[indices[j]]. */
Test(sort, order_permutation_and_stability)
{
    uint64_t s = 5;
    for (int64_t n = 1; n <= 100; n += n < 40 ? 1 : 13)
        for (int desc = 0; desc < 2; desc++) {
            tg_tensor *x = tied_rows(&s, 3, n), *v = NULL, *i = NULL;
            OK(tg_sort(&v, &i, x, 1, desc));
            const double *xd = tg_tensor_cdata(x), *vd = tg_tensor_cdata(v);
            const int64_t *id = tg_tensor_cdata(i);
            for (int64_t r = 0; r < 3; r++) {
                char *seen = calloc((size_t)n, 1);
                for (int64_t j = 0; j < n; j++) {
                    const int64_t at = id[r * n + j];
                    cr_assert(at >= 0 && at < n && !seen[at], "n %lld row %lld j %lld",
                              (long long)n, (long long)r, (long long)j);
                    seen[at] = 1;
                    const double want = xd[r * n + at], got = vd[r * n + j];
                    cr_assert(got == want || (isnan(got) && isnan(want)));
                    if (j == 0) continue;
                    const double prev = vd[r * n + j - 1];
                    const bool in_order = !before(got, prev, desc);
                    cr_assert(in_order, "n %lld desc %d: out of order at %lld",
                              (long long)n, desc, (long long)j);
                    if (!before(prev, got, desc))   /* equal: stable */
                        cr_assert(id[r * n + j - 1] < at, "n %lld: ties not in index order",
                                  (long long)n);
                }
                free(seen);
            }
            th_release_all(3, (tg_tensor *[]){x, v, i});
        }
}

/* topk's values are sort's first k, kthvalue's the k-th of sort's, the
 * medians those at (n - 1) / 2 (of the numbers, for nanmedian), for every
 * k of rows without NaNs and with them. */
Test(sort, selections_agree_with_sort)
{
    uint64_t s = 11;
    const int64_t n = 23;
    tg_tensor *x = tied_rows(&s, 4, n), *asc = NULL, *desc = NULL;
    OK(tg_sort(&asc, NULL, x, -1, false));
    OK(tg_sort(&desc, NULL, x, -1, true));
    for (int64_t k = 0; k <= n; k++) {
        tg_tensor *tl = NULL, *ts = NULL, *kv = NULL;
        OK(tg_topk(&tl, NULL, x, k, 1, true, true));
        OK(tg_topk(&ts, NULL, x, k, 1, false, false));
        if (k > 0) OK(tg_kthvalue(&kv, NULL, x, k, 1, false));
        for (int64_t r = 0; r < 4; r++)
            for (int64_t j = 0; j < k; j++) {
                const double a = th_at(tl, r * k + j), b = th_at(desc, r * n + j);
                const double c = th_at(ts, r * k + j), d = th_at(asc, r * n + j);
                const bool same = (a == b || (isnan(a) && isnan(b))) &&
                                  (c == d || (isnan(c) && isnan(d)));
                cr_assert(same, "k %lld row %lld j %lld", (long long)k, (long long)r, (long long)j);
            }
        for (int64_t r = 0; k > 0 && r < 4; r++) {
            const double a = th_at(kv, r), b = th_at(asc, r * n + k - 1);
            cr_assert(a == b || (isnan(a) && isnan(b)), "kthvalue k %lld row %lld", (long long)k,
                      (long long)r);
        }
        th_release_all(3, (tg_tensor *[]){tl, ts, kv});
    }
    tg_tensor *med = NULL, *nmed = NULL, *mi = NULL;
    OK(tg_median_dim(&med, &mi, x, 1, false));
    OK(tg_nanmedian_dim(&nmed, NULL, x, 1, false));
    for (int64_t r = 0; r < 4; r++) {
        int64_t nan = 0, first_nan = -1;
        for (int64_t j = 0; j < n; j++)
            if (isnan(th_at(x, r * n + j))) {
                nan++;
                if (first_nan < 0) first_nan = j;
            }
        cr_assert(nan > 0, "row %lld holds a NaN", (long long)r);
        cr_assert(isnan(th_at(med, r)));
        cr_assert(eq(i64, (int64_t)th_at(mi, r), first_nan));
        cr_assert(eq(dbl, th_at(nmed, r), th_at(asc, r * n + (n - nan - 1) / 2)));
    }
    th_release_all(6, (tg_tensor *[]){x, asc, desc, med, nmed, mi});
}

/* On rows long enough for topk and kthvalue to select before sorting (the
 * kept range within a quarter of the row; a heap up to 128 positions,
 * quickselect past that) and just past those bounds: the indices are
 * argsort's first k, ties and NaNs
 * included, in both directions, for f64, f32 (with -0.0) and i64, along the
 * last dim and along dim 0, strided and contiguous (k = 1 on contiguous f32
 * and f64 rows is the one pass without the sort). */
Test(sort, selecting_rows_gives_the_sorted_indices)
{
    uint64_t s = 23;
    const int64_t ns[] = {8, 64, 200, 511, 520, 1000, 2000};
    const int64_t ks[] = {1, 2, 7, 25, 63, 64, 65, 128, 129, 130, 300, 501};
    const tg_dtype dts[] = {TG_F64, TG_F32, TG_I64};
    int selected = 0, quick = 0;
    for (size_t a = 0; a < sizeof ns / sizeof *ns; a++)
        for (size_t b = 0; b < sizeof dts / sizeof *dts; b++) {
            const int64_t n = ns[a];
            tg_tensor *x64 = tied_rows(&s, 3, n), *x = NULL, *xt = NULL, *xc = NULL;
            double *d = tg_tensor_data(x64);
            for (int64_t e = 0; e < 3 * n; e++)
                if (dts[b] == TG_I64 && isnan(d[e])) d[e] = 7;
                else if (d[e] == 0 && e % 2) d[e] = -0.0;
            OK(tg_to_dtype(&x, x64, dts[b]));
            OK(tg_transpose(&xt, x, 0, 1));   /* rows along dim 0, strided */
            OK(tg_contiguous(&xc, xt));       /* rows along dim 0, inner 3 */
            for (int desc = 0; desc < 2; desc++)
                for (int t = 0; t < 3; t++) {
                    tg_tensor *src = t == 0 ? x : t == 1 ? xt : xc, *order = NULL;
                    const int dim = t ? 0 : 1;
                    OK(tg_argsort(&order, src, dim, desc));
                    for (size_t c = 0; c < sizeof ks / sizeof *ks && ks[c] <= n; c++) {
                        const int64_t k = ks[c];
                        selected += 4 * k <= n;
                        quick += k > 128 && 4 * k <= n;
                        tg_tensor *v = NULL, *i = NULL, *kv = NULL, *ki = NULL;
                        OK(tg_topk(&v, &i, src, k, dim, desc, true));
                        if (!desc) OK(tg_kthvalue(&kv, &ki, src, k, dim, false));
                        for (int64_t r = 0; r < 3; r++) {
                            for (int64_t j = 0; j < k; j++) {
                                const int64_t got = (int64_t)(t ? th_at(i, j * 3 + r)
                                                                : th_at(i, r * k + j));
                                const int64_t want = (int64_t)(t ? th_at(order, j * 3 + r)
                                                                 : th_at(order, r * n + j));
                                cr_assert(eq(i64, got, want), "n %lld k %lld %s desc %d dim %d",
                                          (long long)n, (long long)k, tg_dtype_name(dts[b]),
                                          desc, dim);
                            }
                            if (desc) continue;
                            const int64_t kth = (int64_t)th_at(
                                order, t ? (k - 1) * 3 + r : r * n + k - 1);
                            cr_assert(eq(i64, (int64_t)th_at(ki, r), kth), "kthvalue n %lld k %lld",
                                      (long long)n, (long long)k);
                        }
                        th_release_all(4, (tg_tensor *[]){v, i, kv, ki});
                    }
                    tg_tensor_release(order);
                }
            th_release_all(4, (tg_tensor *[]){x64, x, xt, xc});
        }
    cr_assert(selected > 100 && quick > 20, "%d cases on the selecting paths, %d by quickselect",
              selected, quick);
}

/* Line e of x (n, inner) seen as (o, n, inner) for the one-pass test:
 * mode e % 4 gives lines without NaN, with a few, all NaN, and of
 * infinities and NaN; every line has ties and both zeros. */
static double line_value(uint64_t *s, int64_t e)
{
    static const double pool[] = {-INFINITY, -1.0, -0.0, 0.0, 1.0, INFINITY};
    const int64_t mode = e % 4, v = th_rand_int(s, 0, 19);
    if (mode == 2 || (mode == 1 && v == 0) || (mode == 3 && v < 10)) return NAN;
    return mode == 3 ? pool[v % 2 ? 0 : 5] : pool[v % 6];
}

/* One sweep of the test below under the kernel in use: the cases run. */
static int first_position_sweep(void)
{
    const int64_t ns[] = {1, 2, 7, 8, 15, 16, 17, 33, 64, 100, 257};
    const int64_t inners[] = {1, 3, 300};
    int cases = 0;
    uint64_t s = 31;
    const tg_dtype dts[] = {TG_F64, TG_F32, TG_F16, TG_BF16};   /* halves: widened */
    for (int dt = 0; dt < 4; dt++)
        for (size_t a = 0; a < sizeof ns / sizeof *ns; a++)
            for (size_t b = 0; b < sizeof inners / sizeof *inners; b++) {
                const int64_t o = 1 + (int64_t)(a % 3), n = ns[a], in = inners[b];
                tg_tensor *z = th_rand_tensor(&s, TG_F64, 4, (int64_t[]){o, n, in, 2}, 0, 1);
                double *zd = tg_tensor_data(z);
                for (int64_t e = 0; e < o * n * in; e++)   /* line (e / (n in), e % in) */
                    zd[2 * e] = line_value(&s, (e / (n * in)) * in + e % in);
                tg_tensor *zz = NULL, *view = NULL, *ref = NULL, *x = NULL;
                OK(tg_to_dtype(&zz, z, dts[dt]));
                OK(tg_narrow(&view, zz, 3, 0, 1));
                OK(tg_squeeze(&ref, view, 3));   /* strided: the rows path */
                OK(tg_contiguous(&x, ref));     /* the one pass */
                cr_assert(tg_tensor_is_contiguous(x));
                cr_assert(n * in == 1 || tg_tensor_is_contiguous(ref) == false);
                for (int f = 0; f < 6; f++) {
                    tg_tensor *got = NULL, *want = NULL, *v = NULL;
                    for (int t = 0; t < 2; t++) {
                        tg_tensor *src = t ? ref : x, **r = t ? &want : &got;
                        if (f == 0) OK(tg_argmax_dim(r, src, 1, false));
                        if (f == 1) OK(tg_argmin_dim(r, src, 1, false));
                        if (f == 2) OK(tg_topk(&v, r, src, 1, 1, true, true));
                        if (f == 3) OK(tg_topk(&v, r, src, 1, 1, false, true));
                        if (f == 4) OK(tg_kthvalue(&v, r, src, 1, 1, false));
                        if (f == 5) OK(tg_argmax(r, src));
                        tg_tensor_release(v);
                        v = NULL;
                    }
                    const int64_t m = tg_tensor_numel(got);
                    cr_assert(eq(i64, m, tg_tensor_numel(want)));
                    for (int64_t e = 0; e < m; e++)
                        cr_assert(eq(dbl, th_at(got, e), th_at(want, e)),
                                  "fn %d %s o %lld n %lld inner %lld at %lld", f,
                                  tg_dtype_name(dts[dt]), (long long)o, (long long)n,
                                  (long long)in, (long long)e);
                    th_release_all(2, (tg_tensor *[]){got, want});
                    cases++;
                }
                th_release_all(5, (tg_tensor *[]){z, zz, view, ref, x});
            }
    return cases;
}

/* topk and kthvalue with k = 1, argmax and argmin of a float x (f64, f32,
 * and f16 and bf16 widened to f32) in contiguous memory take one pass over
 * x (lanes along the last dim, blocks of columns along another) in each
 * kernel, forced with TG_FIRST_KERNEL; the same values in a strided view
 * take the rows of f64 that the sort reads: the indices are the same, for
 * lines shorter and longer than the lanes, inner extents past one block. */
Test(sort, first_position_in_one_pass_equals_the_rows_path)
{
    int kernels = 0, cases = 0;
    for (int k = TG__FIRST_KERNEL_PORTABLE; k <= TG__FIRST_KERNEL_AVX512; k++) {
        if (!th_force_first_kernel(k)) continue;
        cases += first_position_sweep();
        kernels++;
    }
    unsetenv("TG_FIRST_KERNEL");
    cr_assert(eq(int, cases, kernels * 4 * 11 * 3 * 6));
}

typedef struct sel_case {
    int fn;   /* 0 sort, 1 topk, 2 kthvalue, 3 median_dim, 4 nanmedian_dim, 5 median */
    int dim;
    int64_t k;
} sel_case;

static int sel_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    const sel_case *c = user;
    switch (c->fn) {
    case 0: return tg_sort(out, NULL, in[0], c->dim, true);
    case 1: return tg_topk(out, NULL, in[0], c->k, c->dim, false, true);
    case 2: return tg_kthvalue(out, NULL, in[0], c->k, c->dim, true);
    case 3: return tg_median_dim(out, NULL, in[0], c->dim, false);
    case 4: return tg_nanmedian_dim(out, NULL, in[0], c->dim, true);
    default: return tg_median(out, in[0]);
    }
}

/* Distinct values (so that the order does not move under gradcheck's
 * steps): the first and second derivatives are those of the gather. */
Test(sort, gradcheck_and_gradgradcheck)
{
    const sel_case cases[] = {{0, 1, 0}, {0, -3, 0}, {1, 2, 2}, {2, 0, 2}, {3, 1, 0},
                              {4, -1, 0}, {5, 0, 0}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        tg_tensor *x = th_seq(TG_F64, 3, (int64_t[]){2, 3, 4}, -3, 3);
        /* a fixed shuffle of the sequence, so that no row comes sorted */
        double *d = tg_tensor_data(x);
        uint64_t s = 70 + c;
        for (int64_t e = 23; e > 0; e--) {
            const int64_t j = th_rand_int(&s, 0, e);
            const double t = d[e];
            d[e] = d[j];
            d[j] = t;
        }
        OK(tg_tensor_set_requires_grad(x, true));
        th_expect_gradchecks(sel_fn, (void *)&cases[c], 1, &x, "case %zu", c);
        tg_tensor_release(x);
    }
}

/* Transposed, sliced and expanded views give what their contiguous copies
 * give, along each dim. */
Test(sort, views_match_their_contiguous_copies)
{
    tg_tensor *v[3];
    th_views_of_3x4x5(v);
    for (int k = 0; k < 3; k++)
        for (int dim = 0; dim < 3; dim++) {
            tg_tensor *c = NULL, *gv = NULL, *gi = NULL, *wv = NULL, *wi = NULL;
            char what[48];
            snprintf(what, sizeof what, "view %d dim %d", k, dim);
            OK(tg_contiguous(&c, v[k]));
            OK(tg_topk(&gv, &gi, v[k], 2, dim, true, true));
            OK(tg_topk(&wv, &wi, c, 2, dim, true, true));
            th_expect_same_bits(what, v[k], gv, wv);
            th_expect_same_bits(what, v[k], gi, wi);
            th_release_all(5, (tg_tensor *[]){c, gv, gi, wv, wi});
        }
    th_release_all(3, v);
}

/* An integer median and an empty float one; 0-d inputs; a median of an
 * empty float tensor is NaN and still on the tape. */
Test(sort, edges)
{
    tg_tensor *x = th_vec(TG_I64, 4, (double[]){0, 0, 5, -2}, "x", false);
    tg_tensor *m = NULL, *v = NULL, *i = NULL;
    int64_t *xd = tg_tensor_data(x);
    xd[0] = INT64_C(9007199254740992);   /* 2^53, and 2^53 + 1 after it: */
    xd[1] = INT64_C(9007199254740993);   /* equal as doubles, not as integers */
    OK(tg_median(&m, x));
    cr_assert(eq(int, tg_tensor_dtype(m), TG_I64));
    cr_assert(eq(int, tg_tensor_ndim(m), 0));
    cr_assert(eq(i64, *(const int64_t *)tg_tensor_cdata(m), 5));
    OK(tg_sort(&v, &i, x, 0, true));
    cr_assert(eq(i64, ((const int64_t *)tg_tensor_cdata(i))[0], 1));
    cr_assert(eq(i64, ((const int64_t *)tg_tensor_cdata(v))[0], INT64_C(9007199254740993)));
    th_release_all(4, (tg_tensor *[]){x, m, v, i});

    tg_tensor *e = NULL, *em = NULL, *g = NULL;
    OK(tg_tensor_zeros(&e, TG_F32, 2, (int64_t[]){0, 3}));
    OK(tg_tensor_set_requires_grad(e, true));
    OK(tg_median(&em, e));
    cr_assert(isnan(tg_tensor_item(em)) && tg_tensor_requires_grad(em));
    OK(tg_grad(&g, 1, &em, NULL, 1, &e, NULL));
    cr_assert(eq(i64, tg_tensor_numel(g), 0));
    th_release_all(3, (tg_tensor *[]){e, em, g});

    tg_tensor *z = NULL, *zv = NULL, *zi = NULL;
    OK(tg_tensor_full(&z, TG_F32, 0, NULL, 2.5));
    OK(tg_topk(&zv, &zi, z, 0, -1, true, true));
    cr_assert(eq(int, tg_tensor_ndim(zv), 0));
    cr_assert(eq(dbl, tg_tensor_item(zv), 2.5));
    cr_assert(eq(int, tg_tensor_ndim(zi), 0));
    cr_assert(eq(dbl, th_at(zi, 0), 0));
    th_release_all(3, (tg_tensor *[]){z, zv, zi});
}

/* Inside a scope both results are the scope's; indices alone (argsort,
 * NULL values) too. */
Test(sort, scopes_own_both_results)
{
    tg_tensor *x = th_seq(TG_F32, 2, (int64_t[]){3, 5}, -1, 1), *v = NULL, *i = NULL, *a = NULL;
    OK(tg_scope_begin());
    OK(tg_sort(&v, &i, x, 1, false));
    OK(tg_argsort(&a, x, 0, true));
    cr_assert(eq(int, tg_scope_size(), 3));
    OK(tg_scope_end());
    tg_tensor_release(x);
}

Test(sort, refusals)
{
    tg_tensor *x = th_seq(TG_F32, 2, (int64_t[]){3, 5}, -1, 1), *v = NULL, *i = NULL;
    tg_tensor *e = NULL;
    OK(tg_tensor_zeros(&e, TG_I64, 2, (int64_t[]){2, 0}));
    th_expect_refused(tg_sort(&v, &i, NULL, 0, false), TG_EINVAL, "x must not be NULL", v);
    th_expect_refused(tg_sort(NULL, NULL, x, 0, false), TG_EINVAL, "both be NULL", NULL);
    th_expect_refused(tg_sort(&v, &v, x, 0, false), TG_EINVAL, "two different places", v);
    th_expect_refused(tg_sort(&v, &i, x, 2, false), TG_EINVAL, "dim=2 must be in [-2, 2)", v);
    th_expect_refused(tg_argsort(NULL, x, 0, false), TG_EINVAL, "out must not be NULL", NULL);
    th_expect_refused(tg_topk(&v, &i, x, 6, 1, true, true), TG_EINVAL,
                      "k=6 must be in [0, 5]", v);
    th_expect_refused(tg_topk(&v, &i, x, -1, 1, true, true), TG_EINVAL, "k=-1", v);
    th_expect_refused(tg_kthvalue(&v, &i, x, 0, 0, false), TG_EINVAL,
                      "k=0 must be in [1, 3]", v);
    th_expect_refused(tg_kthvalue(&v, &i, e, 1, 1, false), TG_ESHAPE, "extent 0", v);
    th_expect_refused(tg_median_dim(&v, &i, e, -1, false), TG_ESHAPE, "extent 0", v);
    th_expect_refused(tg_median(&v, e), TG_ESHAPE, "empty i64", v);
    th_expect_refused(tg_nanmedian(NULL, x), TG_EINVAL, "out must not be NULL", NULL);
    cr_assert(i == NULL);
    th_release_all(2, (tg_tensor *[]){x, e});
}
