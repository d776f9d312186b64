/* tests/test_search.c - tg_searchsorted, tg_bucketize, tg_unique,
 * tg_unique_consecutive, tg_bincount, tg_histc, tg_nonzero, tg_argwhere
 * and tg_masked_select against PyTorch (results bit for bit, masked_select's
 * gradients; float and integer dtypes, 0-d and empty inputs, ties, -0.0 and
 * NaNs, broadcasting), invariants on random inputs (a linear scan, unique's
 * values sorted and distinct, counts summing to the numbers in x,
 * values[inverse] == x but for NaNs), NaNs in unique, searchsorted's
 * sorter, gradcheck and gradgradcheck of masked_select in f64, views,
 * scopes and the refusals.  Goldens: scripts/make_search_goldens.py. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

static tg_tensor *golden_opt(const tg_st_file *f, const char *c, const char *what)
{
    char key[48];
    snprintf(key, sizeof key, "%s.%s", c, what);
    return tg_st_get(f, key);
}

static int flag(const tg_st_file *f, const char *c, const char *what)
{
    return atoi(th_golden_meta(f, c, what));
}

/* Runs golden case c on a (and b): the result into *y, unique's inverse
 * and counts into *inv and *cnt. */
static int run_case(const tg_st_file *f, const char *c, tg_tensor *a, tg_tensor *b,
                    tg_tensor **y, tg_tensor **inv, tg_tensor **cnt)
{
    const char *fn = th_golden_meta(f, c, "fn");
    tg_tensor *sorter = golden_opt(f, c, "sorter");
    if (!strcmp(fn, "searchsorted") && sorter)
        return tg_searchsorted_sorter(y, a, b, sorter, flag(f, c, "right"), flag(f, c, "int32"));
    if (!strcmp(fn, "searchsorted"))
        return tg_searchsorted(y, a, b, flag(f, c, "right"), flag(f, c, "int32"));
    if (!strcmp(fn, "bucketize"))
        return tg_bucketize(y, a, b, flag(f, c, "right"), flag(f, c, "int32"));
    if (!strcmp(fn, "unique")) return tg_unique(y, inv, cnt, a, true);
    if (!strcmp(fn, "unique_consecutive")) return tg_unique_consecutive(y, inv, cnt, a);
    if (!strcmp(fn, "bincount")) return tg_bincount(y, a, b, atoll(th_golden_meta(f, c, "n")));
    if (!strcmp(fn, "histc"))
        return tg_histc(y, a, atoll(th_golden_meta(f, c, "n")),
                        atof(th_golden_meta(f, c, "min")), atof(th_golden_meta(f, c, "max")));
    if (!strcmp(fn, "nonzero")) return tg_nonzero(y, a);
    if (!strcmp(fn, "argwhere")) return tg_argwhere(y, a);
    if (!strcmp(fn, "masked_select")) return tg_masked_select(y, a, b);
    cr_assert(false, "%s: unknown fn %s", c, fn);
    return TG_EINVAL;
}

/* Every result is torch's bit for bit (dtype, shape and bytes), and so is
 * masked_select's gradient. */
Test(search, every_case_matches_torch)
{
    tg_st_file *f = th_golden_load("search.safetensors");
    const int n = atoi(tg_st_meta_get(f, "cases"));
    int fns = 0, grads = 0, ints = 0;
    static const char *const names[] = {"searchsorted", "bucketize", "unique",
                                        "unique_consecutive", "bincount", "histc",
                                        "nonzero", "argwhere", "masked_select"};
    for (int c_i = 0; c_i < n; c_i++) {
        char c[16], what[96];
        snprintf(c, sizeof c, "case%d", c_i);
        const char *fn = th_golden_meta(f, c, "fn");
        const tg_tensor *ga = th_golden_get(f, c, "a");
        tg_tensor *g = golden_opt(f, c, "g");
        tg_tensor *a = g ? th_leaf_clone(ga) : tg_tensor_retain((tg_tensor *)ga);
        tg_tensor *b = golden_opt(f, c, "b"), *want_inv = golden_opt(f, c, "inv");
        tg_tensor *y = NULL, *inv = NULL, *cnt = NULL, *dx = NULL;
        snprintf(what, sizeof what, "%s (%s %s, %d-d)", c, fn,
                 tg_dtype_name(tg_tensor_dtype(a)), tg_tensor_ndim(a));
        OK(run_case(f, c, a, b, &y, want_inv ? &inv : NULL, want_inv ? &cnt : NULL));
        th_expect_close(what, y, th_golden_get(f, c, "y"), 0);
        if (want_inv) {
            th_expect_close(what, inv, want_inv, 0);
            th_expect_close(what, cnt, th_golden_get(f, c, "cnt"), 0);
        }
        if (g) {
            OK(tg_grad(&dx, 1, &y, &g, 1, &a, NULL));
            th_expect_close(what, dx, th_golden_get(f, c, "dx"), 0);
            grads++;
        }
        ints += !tg_dtype_is_float(tg_tensor_dtype(a));
        for (int k = 0; k < 9; k++)
            if (!strcmp(fn, names[k])) fns |= 1 << k;
        th_release_all(5, (tg_tensor *[]){a, y, inv, cnt, dx});
    }
    cr_assert(n >= 1000 && fns == 0x1ff && grads >= 30 && ints >= 300,
              "%d cases, fns %x, %d gradients, %d integer", n, fns, grads, ints);
    tg_st_free(f);
}

/* searchsorted of random values (NaNs among them) in random sorted rows
 * (ties) is the linear scan's count of the elements before each value:
 * those < v (left) or <= v (right), a NaN value after everything. */
Test(search, searchsorted_is_a_linear_scan)
{
    uint64_t s = 3;
    for (int64_t n = 0; n <= 40; n += 1 + n / 8) {
        tg_tensor *raw = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){3, n}, 0, 1);
        double *d = tg_tensor_data(raw);
        for (int64_t e = 0; e < 3 * n; e++) {
            const int64_t v = th_rand_int(&s, 0, 9);
            d[e] = (double)(v - 4);
        }
        tg_tensor *seq = NULL, *v = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){3, 11}, -6, 6);
        OK(tg_sort(&seq, NULL, raw, 1, false));
        double *vd = tg_tensor_data(v);
        for (int e = 0; e < 33; e++) vd[e] = e % 11 == 10 ? NAN : round(vd[e]);
        for (int right = 0; right < 2; right++) {
            tg_tensor *y = NULL;
            OK(tg_searchsorted(&y, seq, v, right, false));
            for (int64_t r = 0; r < 3; r++)
                for (int64_t j = 0; j < 11; j++) {
                    const double x = vd[r * 11 + j];
                    int64_t want = 0;
                    for (int64_t k = 0; k < n; k++) {
                        const double e = th_at(seq, r * n + k);
                        want += isnan(x) || (right ? e <= x : e < x);
                    }
                    cr_assert(eq(i64, (int64_t)th_at(y, r * 11 + j), want),
                              "n %lld right %d row %lld value %g", (long long)n, right,
                              (long long)r, x);
                }
            tg_tensor_release(y);
        }
        th_release_all(3, (tg_tensor *[]){raw, seq, v});
    }
}

/* torch's search with NaNs in the sequence: it moves right past each NaN
 * it probes (-5 goes after [1, NaN]); a 0-d i32 -1 against a u8 sequence
 * is 255 (torch.result_type's u8), a 1-d one is -1 (i32). */
Test(search, searchsorted_nans_and_dtypes)
{
    tg_tensor *s = th_vec(TG_F32, 2, (double[]){1, NAN}, "s", false), *y = NULL;
    tg_tensor *v = th_vec(TG_F32, 3, (double[]){-5, 0.5, NAN}, "v", false);
    OK(tg_searchsorted(&y, s, v, false, false));
    for (int e = 0; e < 3; e++) cr_assert(eq(dbl, th_at(y, e), 2));
    th_release_all(3, (tg_tensor *[]){s, v, y});
    tg_tensor *s8 = th_vec(TG_U8, 3, (double[]){0, 0, 2}, "s", false);
    tg_tensor *m1 = th_vec(TG_I32, 1, (double[]){-1}, "v", false), *m0 = NULL, *y0 = NULL;
    OK(tg_tensor_full(&m0, TG_I32, 0, NULL, -1));
    OK(tg_searchsorted(&y, s8, m1, false, true));
    OK(tg_searchsorted(&y0, s8, m0, false, false));
    cr_assert(eq(int, tg_tensor_dtype(y), TG_I32));
    cr_assert(eq(dbl, th_at(y, 0), 0));
    cr_assert(eq(dbl, th_at(y0, 0), 3));
    th_release_all(5, (tg_tensor *[]){s8, m1, m0, y, y0});
}

/* On random x with ties and NaNs: unique's values ascend strictly when x
 * holds no NaN (with NaNs in torch's order: test_unique_nan.c), one value
 * per NaN, each with count 0 and the NaN elements' inverse 0, as torch's,
 * the numbers' counts are >= 1 and sum to the numbers in x,
 * values[inverse] is x element for element but for NaNs;
 * unique_consecutive's runs (a NaN one of its own, count 1) rebuild x. */
Test(search, unique_invariants)
{
    uint64_t s = 17;
    for (int t = 0; t < 12; t++) {
        const int64_t n = th_rand_int(&s, 0, 60);
        tg_tensor *x = th_rand_tensor(&s, TG_F32, 2, (int64_t[]){2, n}, 0, 1);
        for (int64_t e = 0; e < 2 * n; e++) {
            const int64_t v = th_rand_int(&s, 0, 12);
            tg_tensor_set_flat(x, e, v == 12 ? NAN : v == 11 ? -0.0 : (double)(v - 5));
        }
        for (int consecutive = 0; consecutive < 2; consecutive++) {
            tg_tensor *v = NULL, *inv = NULL, *cnt = NULL;
            if (consecutive) OK(tg_unique_consecutive(&v, &inv, &cnt, x));
            else OK(tg_unique(&v, &inv, &cnt, x, true));
            const int64_t k = tg_tensor_numel(v);
            int64_t total = 0, nans = 0, xnans = 0;
            for (int64_t e = 0; e < 2 * n; e++) xnans += isnan(th_at(x, e));
            for (int64_t r = 0; r < k; r++) {
                const bool nan_value = isnan(th_at(v, r));
                cr_assert(th_at(cnt, r) >= 1 || (!consecutive && nan_value && !th_at(cnt, r)));
                total += (int64_t)th_at(cnt, r);
                nans += nan_value;
                if (consecutive || r == 0 || xnans > 0) continue;
                const double a = th_at(v, r - 1), b = th_at(v, r);
                cr_assert(isnan(b) || (!isnan(a) && a < b), "t %d: values %g, %g", t, a, b);
            }
            cr_assert(eq(i64, total, 2 * n - (consecutive ? 0 : xnans)));
            for (int64_t e = 0; e < 2 * n; e++) {
                const double want = th_at(x, e), got = th_at(v, (int64_t)th_at(inv, e));
                if (!consecutive && isnan(want)) {
                    cr_assert(eq(dbl, th_at(inv, e), 0), "t %d e %lld", t, (long long)e);
                    continue;
                }
                cr_assert(got == want || (isnan(got) && isnan(want)), "t %d e %lld", t,
                          (long long)e);
            }
            if (!consecutive) cr_assert(eq(i64, nans, xnans));   /* each NaN its own value */
            th_release_all(3, (tg_tensor *[]){v, inv, cnt});
        }
        tg_tensor_release(x);
    }
}

/* NaNs (count 0, inverse 0, and torch's order of the values:
 * [-2, 0, nan, nan, 1]), -0.0 and 0.0, and inverse/counts not wanted. */
Test(search, unique_nans_and_zeros)
{
    tg_tensor *x = th_vec(TG_F64, 7, (double[]){1, NAN, 0.0, -0.0, NAN, 1, -2}, "x", false);
    tg_tensor *v = NULL, *inv = NULL, *cnt = NULL;
    OK(tg_unique(&v, &inv, &cnt, x, false));
    th_expect_shape(v, 1, (int64_t[]){5});
    cr_assert(th_at(v, 0) == -2 && isnan(th_at(v, 2)) && isnan(th_at(v, 3)) &&
              th_at(v, 4) == 1);
    cr_assert(signbit(th_at(v, 1)) == 0, "0.0 comes first in x, so it is the value kept");
    const int64_t want_inv[7] = {4, 0, 1, 1, 0, 4, 0}, want_cnt[5] = {1, 2, 0, 0, 2};
    for (int e = 0; e < 7; e++) cr_assert(eq(i64, (int64_t)th_at(inv, e), want_inv[e]));
    for (int e = 0; e < 5; e++) cr_assert(eq(i64, (int64_t)th_at(cnt, e), want_cnt[e]));
    tg_tensor *v2 = NULL;
    OK(tg_unique(&v2, NULL, NULL, x, true));
    th_expect_same_bits("unique without inverse", x, v2, v);
    th_release_all(5, (tg_tensor *[]){x, v, inv, cnt, v2});
}

/* bincount agrees with a count by hand; histc's counts sum to the
 * elements in range; nonzero's rows are the nonzero elements. */
Test(search, counts_by_hand)
{
    uint64_t s = 23;
    tg_tensor *x = th_rand_tensor(&s, TG_I32, 1, (int64_t[]){500}, 0, 30);
    tg_tensor *b = NULL;
    OK(tg_bincount(&b, x, NULL, 0));
    int64_t want[31] = {0}, top = 0;
    for (int64_t e = 0; e < 500; e++) {
        const int64_t v = (int64_t)th_at(x, e);
        want[v]++;
        top = v > top ? v : top;
    }
    th_expect_shape(b, 1, (int64_t[]){top + 1});
    for (int64_t k = 0; k <= top; k++) cr_assert(eq(i64, (int64_t)th_at(b, k), want[k]));

    tg_tensor *h = NULL, *u = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){20, 30}, -2, 2);
    OK(tg_histc(&h, u, 7, -1, 1.5));
    double sum = 0;
    int64_t inside = 0;
    for (int64_t k = 0; k < 7; k++) sum += th_at(h, k);
    for (int64_t e = 0; e < 600; e++) inside += th_at(u, e) >= -1 && th_at(u, e) <= 1.5;
    cr_assert(eq(dbl, sum, (double)inside));

    tg_tensor *nz = NULL;
    OK(tg_nonzero(&nz, b));
    int64_t nonzero = 0;
    for (int64_t k = 0; k <= top; k++) nonzero += want[k] != 0;
    th_expect_shape(nz, 2, (int64_t[]){nonzero, 1});
    for (int64_t r = 0; r < nonzero; r++) cr_assert(want[(int64_t)th_at(nz, r)] != 0);
    th_release_all(5, (tg_tensor *[]){x, b, h, u, nz});
}

static int select_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    return tg_masked_select(out, in[0], user);
}

/* masked_select's first and second derivatives, with and without a
 * broadcast of x. */
Test(search, masked_select_gradcheck_and_gradgradcheck)
{
    const int64_t xs[2][3] = {{2, 3, 4}, {1, 3, 1}};
    for (int c = 0; c < 2; c++) {
        tg_tensor *x = th_seq(TG_F64, 3, xs[c], -2, 2), *m = NULL;
        uint64_t s = 40 + (uint64_t)c;
        tg_tensor *r = th_rand_tensor(&s, TG_F64, 3, (int64_t[]){2, 3, 4}, 0, 1);
        OK(tg_gt_scalar(&m, r, 0.4));
        OK(tg_tensor_set_requires_grad(x, true));
        tg_gradcheck_opts o = TG_GRADCHECK_OPTS_INIT;
        cr_assert(eq(int, tg_gradcheck(select_fn, m, 1, &x, &o), TG_OK), "case %d: %s", c,
                  tg_error_message());
        cr_assert(eq(int, tg_gradgradcheck(select_fn, m, 1, &x, &o), TG_OK), "case %d: %s", c,
                  tg_error_message());
        th_release_all(3, (tg_tensor *[]){x, m, r});
    }
}

/* Transposed, sliced and expanded views give what their contiguous copies
 * give. */
Test(search, views_match_their_contiguous_copies)
{
    tg_tensor *v[3];
    th_views_of_3x4x5(v);
    tg_tensor *bounds = th_vec(TG_F32, 5, (double[]){-0.5, -0.1, 0, 0.3, 0.8}, "b", false);
    for (int k = 0; k < 3; k++) {
        tg_tensor *c = NULL, *m = NULL, *got[5] = {0}, *want[5] = {0};
        char what[32];
        snprintf(what, sizeof what, "view %d", k);
        OK(tg_contiguous(&c, v[k]));
        OK(tg_gt_scalar(&m, v[k], 0.1));
        tg_tensor *in[2] = {v[k], c};
        for (int j = 0; j < 2; j++) {
            tg_tensor **o = j ? want : got;
            OK(tg_bucketize(&o[0], in[j], bounds, j == 0, false));
            OK(tg_unique(&o[1], &o[2], NULL, in[j], true));
            OK(tg_masked_select(&o[3], in[j], m));
            OK(tg_histc(&o[4], in[j], 6, 0, 0));
        }
        for (int j = 0; j < 5; j++) th_expect_same_bits(what, v[k], got[j], want[j]);
        th_release_all(5, got);
        th_release_all(5, want);
        th_release_all(2, (tg_tensor *[]){c, m});
    }
    th_release_all(3, v);
    tg_tensor_release(bounds);
}

/* Inside a scope every result is the scope's (unique's three too). */
Test(search, scopes_own_the_results)
{
    tg_tensor *x = th_seq(TG_F32, 2, (int64_t[]){3, 5}, -1, 1), *y[5] = {0};
    tg_tensor *m = NULL;
    OK(tg_gt_scalar(&m, x, 0));
    OK(tg_scope_begin());
    OK(tg_unique(&y[0], &y[1], &y[2], x, true));
    OK(tg_masked_select(&y[3], x, m));
    OK(tg_nonzero(&y[4], m));
    cr_assert(eq(int, tg_scope_size(), 5));
    OK(tg_scope_end());
    th_release_all(2, (tg_tensor *[]){x, m});
}

/* A sorter sorts an unsorted sequence for the search, as torch's ([3 1 2
 * 5] with argsort [1 2 0 3]: 0, 1, 2.5, 6 go to 0 0 2 4, right 0 1 2 4);
 * NULL is tg_searchsorted; torch's refusals (not i64, another shape), and
 * an index out of the row (which torch 1.13 reads past) leave nothing
 * behind. */
Test(search, searchsorted_sorter)
{
    tg_tensor *seq = th_vec(TG_F32, 4, (double[]){3, 1, 2, 5}, "s", false);
    tg_tensor *srt = th_vec(TG_I64, 4, (double[]){1, 2, 0, 3}, "o", false);
    tg_tensor *v = th_vec(TG_F32, 4, (double[]){0, 1, 2.5, 6}, "v", false);
    tg_tensor *yl = NULL, *yr = NULL, *y0 = NULL, *y1 = NULL, *i32 = NULL;
    OK(tg_searchsorted_sorter(&yl, seq, v, srt, false, false));
    OK(tg_searchsorted_sorter(&yr, seq, v, srt, true, true));
    const double wl[4] = {0, 0, 2, 4}, wr[4] = {0, 1, 2, 4};
    cr_assert(eq(int, tg_tensor_dtype(yr), TG_I32));
    for (int64_t k = 0; k < 4; k++) {
        cr_assert(eq(dbl, th_at(yl, k), wl[k]), "left %lld", (long long)k);
        cr_assert(eq(dbl, th_at(yr, k), wr[k]), "right %lld", (long long)k);
    }
    OK(tg_searchsorted_sorter(&y0, srt, v, NULL, false, false));
    OK(tg_searchsorted(&y1, srt, v, false, false));
    th_expect_same_bits("no sorter", v, y0, y1);
    OK(tg_to_dtype(&i32, srt, TG_I32));
    th_expect_refused_clean(tg_searchsorted_sorter(out_, seq, v, i32, false, false), TG_EDTYPE,
                            "sorter has dtype i32; it must be i64");
    tg_tensor *s3 = th_vec(TG_I64, 3, (double[]){0, 1, 2}, "o3", false);
    th_expect_refused_clean(tg_searchsorted_sorter(out_, seq, v, s3, false, false), TG_ESHAPE,
                            "sorter is (3) but sorted_sequence (4)");
    tg_tensor *big = th_vec(TG_I64, 4, (double[]){0, 1, 2, 7}, "o7", false);
    tg_tensor *neg = th_vec(TG_I64, 4, (double[]){0, 1, 2, -1}, "o-", false);
    th_expect_refused_clean(tg_searchsorted_sorter(out_, seq, v, big, false, false), TG_EINVAL,
                            "element 3 is 7, out of range for rows of 4");
    th_expect_refused_clean(tg_searchsorted_sorter(out_, seq, v, neg, true, false), TG_EINVAL,
                            "element 3 is -1");
    th_release_all(11, (tg_tensor *[]){seq, srt, v, yl, yr, y0, y1, i32, s3, big, neg});
}

Test(search, refusals)
{
    tg_tensor *x = th_seq(TG_F32, 2, (int64_t[]){3, 5}, -1, 1), *y = NULL, *y2 = NULL;
    tg_tensor *seq2 = th_seq(TG_F32, 2, (int64_t[]){2, 4}, -1, 1);
    tg_tensor *i1 = th_vec(TG_I64, 3, (double[]){0, -2, 2}, "i", false);
    tg_tensor *i2 = th_tensor_from(TG_I64, 2, (int64_t[]){1, 2}, (double[]){1, 2});
    tg_tensor *w = th_vec(TG_F32, 2, (double[]){1, 2}, "w", false), *m = NULL, *s0 = NULL;
    OK(tg_gt_scalar(&m, x, 0));
    OK(tg_tensor_full(&s0, TG_F32, 0, NULL, 1));
    th_expect_refused(tg_searchsorted(&y, seq2, x, false, false), TG_ESHAPE,
                      "the same leading 1", y);
    th_expect_refused(tg_searchsorted(&y, s0, x, false, false), TG_ESHAPE, "0-d", y);
    th_expect_refused(tg_searchsorted(&y, NULL, x, false, false), TG_EINVAL,
                      "sorted_sequence must not be NULL", y);
    th_expect_refused(tg_searchsorted(NULL, x, x, false, false), TG_EINVAL,
                      "out must not be NULL", NULL);
    th_expect_refused(tg_bucketize(&y, x, seq2, false, false), TG_ESHAPE, "must be 1-d", y);
    th_expect_refused(tg_bincount(&y, i1, NULL, 0), TG_EINVAL, "x[1]=-2 is negative", y);
    th_expect_refused(tg_bincount(&y, i2, NULL, 0), TG_ESHAPE, "x has 2 dims", y);
    th_expect_refused(tg_bincount(&y, x, NULL, 0), TG_EDTYPE, "integer dtype", y);
    th_expect_refused(tg_bincount(&y, i1, NULL, -1), TG_EINVAL, "minlength=-1", y);
    th_expect_refused(tg_bincount(&y, i2, NULL, -1), TG_EINVAL, "minlength=-1", y);
    tg_tensor *ok3 = th_vec(TG_I64, 3, (double[]){0, 2, 2}, "k", false);
    th_expect_refused(tg_bincount(&y, ok3, w, 0), TG_ESHAPE, "weights must be 1-d", y);
    th_expect_refused(tg_histc(&y, i1, 3, 0, 1), TG_EDTYPE, "float dtype", y);
    th_expect_refused(tg_histc(&y, x, 0, 0, 1), TG_EINVAL, "bins=0", y);
    th_expect_refused(tg_histc(&y, x, 3, 2, 1), TG_EINVAL, "larger than min", y);
    th_expect_refused(tg_histc(&y, x, 3, 0, INFINITY), TG_EINVAL, "finite", y);
    tg_tensor *xn = th_vec(TG_F32, 2, (double[]){1, NAN}, "n", false);
    th_expect_refused(tg_histc(&y, xn, 3, 0, 0), TG_EINVAL, "finite", y);
    th_expect_refused(tg_masked_select(&y, x, x), TG_EDTYPE, "mask has dtype f32", y);
    th_expect_refused(tg_masked_select(&y, x, i1), TG_EDTYPE, "u8", y);
    tg_tensor *m4 = NULL;
    OK(tg_tensor_zeros(&m4, TG_U8, 1, (int64_t[]){4}));
    th_expect_refused(tg_masked_select(&y, x, m4), TG_ESHAPE, "masked_select", y);
    th_expect_refused(tg_masked_select(&y, NULL, m), TG_EINVAL, "x must not be NULL", y);
    th_expect_refused(tg_unique(NULL, &y, NULL, x, true), TG_EINVAL,
                      "values must not be NULL", y);
    th_expect_refused(tg_unique(&y, &y, NULL, x, true), TG_EINVAL, "different places", y);
    th_expect_refused(tg_unique_consecutive(&y, &y2, NULL, NULL), TG_EINVAL,
                      "x must not be NULL", y);
    cr_assert(y2 == NULL);
    th_expect_refused(tg_nonzero(&y, NULL), TG_EINVAL, "x must not be NULL", y);
    th_expect_refused(tg_argwhere(NULL, x), TG_EINVAL, "out must not be NULL", NULL);
    th_release_all(10, (tg_tensor *[]){x, seq2, i1, i2, w, m, s0, ok3, xn, m4});
}
