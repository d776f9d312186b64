/* tests/test_dims.c - tg_narrow, tg_movedim, tg_flatten, tg_unflatten,
 * tg_tensordot, tg_kron, tg_cross and tg_cdist against PyTorch (values and
 * gradients; f64, f32, bf16, f16, i64 where torch has the op), the views
 * sharing storage, invariants (tensordot against a loop, cross's
 * antisymmetry and orthogonality, cdist's product path against its
 * difference path), gradcheck and gradgradcheck in f64, and the refusals.
 * Goldens: scripts/make_dims_goldens.py. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

/* One golden case's call: a and b are its metadata ("-" for none). */
static int run_case(const char *fn, tg_tensor **y, tg_tensor *x, tg_tensor *x2, const char *a,
                    const char *b)
{
    int64_t v[TG_MAX_DIMS + 1] = {0}, w[TG_MAX_DIMS + 1] = {0};
    int da[TG_MAX_DIMS], db[TG_MAX_DIMS];
    if (!strcmp(fn, "narrow")) {
        th_ints_of(a, v);
        return tg_narrow(y, x, (int)v[0], v[1], v[2]);
    }
    if (!strcmp(fn, "movedim")) {
        const int n = th_dims_of(a, da);
        th_dims_of(b, db);
        return tg_movedim(y, x, n, da, db);
    }
    if (!strcmp(fn, "flatten")) {
        th_ints_of(a, v);
        return tg_flatten(y, x, (int)v[0], (int)v[1]);
    }
    if (!strcmp(fn, "unflatten")) {
        th_ints_of(a, v);
        const int n = th_dims_of(b, db);
        for (int i = 0; i < n; i++) w[i] = db[i];
        return tg_unflatten(y, x, (int)v[0], n, w);
    }
    if (!strcmp(fn, "tensordot")) {
        if (strchr(a, ',') || strcmp(b, "-")) {   /* two lists */
            const int n = th_dims_of(a, da);
            th_dims_of(b, db);
            return tg_tensordot(y, x, x2, n, da, db);
        }
        return tg_tensordot(y, x, x2, atoi(a), NULL, NULL);
    }
    if (!strcmp(fn, "kron")) return tg_kron(y, x, x2);
    if (!strcmp(fn, "cross")) return tg_cross(y, x, x2, atoi(a));
    if (!strcmp(fn, "cdist")) return tg_cdist(y, x, x2, strtod(b, NULL));
    cr_assert(false, "unknown fn %s", fn);
    return TG_EINVAL;
}

/* The tolerance of fn's values and gradients in dtype dt (relative to the
 * largest |want|, see th_expect_close): the shape ops and kron move or
 * multiply once (bit for bit); cross rounds two products, as torch's, which
 * may fuse one of them; tensordot is a GEMM, cdist a norm of differences or
 * a GEMM; integers are exact. */
static double tolerance(const char *fn, tg_dtype dt)
{
    if (!tg_dtype_is_float(dt)) return 0;   /* integer arithmetic is exact */
    const double eps = dt == TG_F64 ? 1e-15 : dt == TG_F32 ? 1e-7 : 1e-2;
    if (!strcmp(fn, "tensordot")) return 20 * eps;
    if (!strcmp(fn, "cdist")) return 50 * eps;
    if (!strcmp(fn, "cross")) return dt == TG_F64 || dt == TG_F32 ? 4 * eps : 0;
    return 0;
}

/* The gradients' tolerance: kron's sums g times b over a's blocks (and
 * cross's two products per element), in another order than torch's. */
static double grad_tolerance(const char *fn, tg_dtype dt)
{
    const double eps = dt == TG_F64 ? 1e-15 : dt == TG_F32 ? 1e-7 : 1e-2;
    if (!strcmp(fn, "kron") && tg_dtype_is_float(dt)) return 8 * eps;
    if (!strcmp(fn, "cross")) return 4 * eps;
    return tolerance(fn, dt);
}

Test(dims, every_case_matches_torch)
{
    tg_st_file *f = th_golden_load("dims.safetensors");
    const int n = atoi(tg_st_meta_get(f, "cases"));
    int fns = 0, grads = 0, empty = 0;
    const char *names[] = {"narrow", "movedim", "flatten", "unflatten", "tensordot", "kron",
                           "cross", "cdist"};
    for (int i = 0; i < n; i++) {
        char c[16], key[32], what[160];
        snprintf(c, sizeof c, "case%d", i);
        const char *fn = th_golden_meta(f, c, "fn");
        const char *a = th_golden_meta(f, c, "a"), *b = th_golden_meta(f, c, "b");
        const tg_tensor *gx = th_golden_get(f, c, "x");
        snprintf(key, sizeof key, "%s.x2", c);
        const tg_tensor *gx2 = tg_st_get(f, key);
        const tg_dtype dt = tg_tensor_dtype(gx);
        const bool is_float = tg_dtype_is_float(dt);
        tg_tensor *x = is_float ? th_leaf_clone(gx) : tg_tensor_retain((tg_tensor *)gx);
        tg_tensor *x2 = !gx2 ? NULL
                        : is_float ? th_leaf_clone(gx2) : tg_tensor_retain((tg_tensor *)gx2);
        tg_tensor *y = NULL, *d[2] = {NULL, NULL};
        snprintf(what, sizeof what, "%s (%s %s, %d-d, a %s, b %s)", c, fn,
                 th_golden_meta(f, c, "dtype"), tg_tensor_ndim(x), a, b);
        OK(run_case(fn, &y, x, x2, a, b));
        const double tol = tolerance(fn, dt);
        th_expect_close(what, y, th_golden_get(f, c, "y"), tol);
        snprintf(key, sizeof key, "%s.g", c);
        tg_tensor *g = tg_st_get(f, key);
        if (g) {
            tg_tensor *wrt[2] = {x, x2};
            OK(tg_grad(d, 1, &y, &g, x2 ? 2 : 1, wrt, NULL));
            const double gt = grad_tolerance(fn, dt);
            th_expect_close(what, d[0], th_golden_get(f, c, "dx"), gt);
            if (x2) th_expect_close(what, d[1], th_golden_get(f, c, "dx2"), gt);
            grads++;
        }
        empty += tg_tensor_numel(y) == 0;
        for (int k = 0; k < 8; k++) fns |= !strcmp(fn, names[k]) << k;
        th_release_all(5, (tg_tensor *[]){x, x2, y, d[0], d[1]});
    }
    cr_assert(n >= 1500 && fns == 0xff && grads >= 1000 && empty >= 50,
              "%d cases, fns %x, %d gradients, %d empty", n, fns, grads, empty);
    tg_st_free(f);
}

/* narrow, movedim, flatten (of a contiguous x) and unflatten are views: a
 * write to x shows through each. */
Test(dims, views_share_storage)
{
    tg_tensor *x = th_arange(TG_F32, 3, (int64_t[]){2, 3, 4}), *v[4] = {NULL};
    OK(tg_narrow(&v[0], x, 2, -3, 2));                           /* x[:, :, 1:3] */
    OK(tg_movedim(&v[1], x, 1, (int[]){0}, (int[]){-1}));        /* (3, 4, 2) */
    OK(tg_flatten(&v[2], x, 1, -1));                             /* (2, 12) */
    OK(tg_unflatten(&v[3], x, -1, 2, (int64_t[]){-1, 2}));       /* (2, 3, 2, 2) */
    th_expect_shape(v[0], 3, (int64_t[]){2, 3, 2});
    th_expect_shape(v[1], 3, (int64_t[]){3, 4, 2});
    th_expect_shape(v[3], 4, (int64_t[]){2, 3, 2, 2});
    float *xd = tg_tensor_data(x);
    xd[13] = -5;   /* x[1][0][1] */
    cr_assert(eq(dbl, th_get(v[0], (int64_t[]){1, 0, 0}), -5));
    cr_assert(eq(dbl, th_get(v[1], (int64_t[]){0, 1, 1}), -5));
    cr_assert(eq(dbl, th_get(v[2], (int64_t[]){1, 1}), -5));
    cr_assert(eq(dbl, th_get(v[3], (int64_t[]){1, 0, 0, 1}), -5));
    for (int i = 0; i < 4; i++) cr_assert(tg_tensor_shares_storage(x, v[i]), "view %d", i);
    tg_tensor *s = NULL, *m = NULL;   /* a 0-d x: flatten to (1), movedim as it is */
    OK(tg_tensor_scalar(&s, TG_F64, 2.5));
    OK(tg_flatten(&m, s, 0, -1));
    th_expect_shape(m, 1, (int64_t[]){1});
    tg_tensor_release(m);
    OK(tg_movedim(&m, s, 1, (int[]){-1}, (int[]){0}));
    cr_assert(eq(int, tg_tensor_ndim(m), 0));
    cr_assert(eq(dbl, th_at(m, 0), 2.5));
    th_release_all(7, (tg_tensor *[]){x, v[0], v[1], v[2], v[3], s, m});
}

/* nn.Flatten and nn.Unflatten are tg_flatten and tg_unflatten: Unflatten's
 * sizes may hold one -1 (two are refused when the module is made). */
Test(dims, flatten_and_unflatten_modules)
{
    tg_module *fl = NULL, *un = NULL, *bad = NULL;
    tg_tensor *x = th_arange(TG_F32, 3, (int64_t[]){2, 3, 4}), *f = NULL, *u = NULL;
    OK(tg_nn_flatten_new(&fl, 1, -1));
    OK(tg_nn_unflatten_new(&un, 1, 2, (int64_t[]){-1, 4}));
    OK(tg_module_forward(fl, &f, x));
    th_expect_shape(f, 2, (int64_t[]){2, 12});
    OK(tg_module_forward(un, &u, f));
    th_expect_shape(u, 3, (int64_t[]){2, 3, 4});
    th_expect_same_bits("round trip", x, u, x);
    cr_assert(eq(int, tg_nn_unflatten_new(&bad, 1, 2, (int64_t[]){-1, -1}), TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "both -1") != NULL, "%s", tg_error_message());
    cr_assert(bad == NULL);
    th_release_all(3, (tg_tensor *[]){x, f, u});
    tg_module_release(fl);
    tg_module_release(un);
}

/* tensordot over two listed pairs of dims against the sum written out. */
Test(dims, tensordot_is_the_sum_written_out)
{
    uint64_t s = 11;
    tg_tensor *a = th_rand_tensor(&s, TG_F64, 3, (int64_t[]){3, 4, 5}, -1, 1);
    tg_tensor *b = th_rand_tensor(&s, TG_F64, 3, (int64_t[]){5, 2, 3}, -1, 1), *y = NULL;
    OK(tg_tensordot(&y, a, b, 2, (int[]){2, 0}, (int[]){0, 2}));   /* (4, 2) */
    th_expect_shape(y, 2, (int64_t[]){4, 2});
    for (int j = 0; j < 4; j++)
        for (int l = 0; l < 2; l++) {
            double want = 0;
            for (int i = 0; i < 3; i++)
                for (int k = 0; k < 5; k++)
                    want += th_get(a, (int64_t[]){i, j, k}) * th_get(b, (int64_t[]){k, l, i});
            const double got = th_get(y, (int64_t[]){j, l});
            cr_assert(fabs(got - want) <= 1e-14, "(%d, %d): %g vs %g", j, l, got, want);
        }
    th_release_all(3, (tg_tensor *[]){a, b, y});
}

/* cross(a, b) = -cross(b, a) bit for bit; it is orthogonal to a and b; and
 * kron's entry (i, j) is a[i / 3][j / 2] b[i % 3][j % 2]. */
Test(dims, cross_and_kron_identities)
{
    uint64_t s = 5;
    tg_tensor *a = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){4, 3}, -2, 2);
    tg_tensor *b = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){4, 3}, -2, 2);
    tg_tensor *ab = NULL, *ba = NULL, *nba = NULL, *k = NULL;
    OK(tg_cross(&ab, a, b, 1));
    OK(tg_cross(&ba, b, a, -1));
    OK(tg_neg(&nba, ba));
    th_expect_same_bits("antisymmetry", a, ab, nba);
    for (int r = 0; r < 4; r++) {
        double da = 0, db = 0;
        for (int c = 0; c < 3; c++) {
            const double v = th_get(ab, (int64_t[]){r, c});
            da += v * th_get(a, (int64_t[]){r, c});
            db += v * th_get(b, (int64_t[]){r, c});
        }
        cr_assert(fabs(da) <= 1e-14 && fabs(db) <= 1e-14, "row %d: %g %g", r, da, db);
    }
    tg_tensor *p = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){2, 3}, -2, 2);
    tg_tensor *q = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){3, 2}, -2, 2);
    OK(tg_kron(&k, p, q));
    th_expect_shape(k, 2, (int64_t[]){6, 6});
    for (int i = 0; i < 6; i++)
        for (int j = 0; j < 6; j++)
            cr_assert(eq(dbl, th_get(k, (int64_t[]){i, j}),
                         th_get(p, (int64_t[]){i / 3, j / 2}) *
                             th_get(q, (int64_t[]){i % 3, j % 2})));
    th_release_all(8, (tg_tensor *[]){a, b, ab, ba, nba, k, p, q});
}

/* cdist with p = 2 and 30 rows goes through one product; its values and
 * gradients agree with the difference path's (rows 0..24 and 25..29 asked
 * for separately, each 25 rows or fewer). */
Test(dims, cdist_product_path_matches_differences)
{
    uint64_t s = 17;
    tg_tensor *x1 = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){30, 4}, -2, 2);
    tg_tensor *x2 = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){6, 4}, -2, 2);
    OK(tg_tensor_set_requires_grad(x1, true));
    tg_tensor *y = NULL, *top = NULL, *bot = NULL, *yt = NULL, *yb = NULL, *ys = NULL;
    OK(tg_cdist(&y, x1, x2, 2.0));
    OK(tg_narrow(&top, x1, 0, 0, 25));
    OK(tg_narrow(&bot, x1, 0, 25, 5));
    OK(tg_cdist(&yt, top, x2, 2.0));
    OK(tg_cdist(&yb, bot, x2, 2.0));
    OK(tg_cat(&ys, 2, (tg_tensor *[]){yt, yb}, 0));
    th_expect_close("values", y, ys, 1e-12);
    tg_tensor *g = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){30, 6}, -1, 1), *d1 = NULL,
              *d2 = NULL;
    OK(tg_grad(&d1, 1, &y, &g, 1, &x1, NULL));
    OK(tg_grad(&d2, 1, &ys, &g, 1, &x1, NULL));
    th_expect_close("gradients", d1, d2, 1e-10);
    th_release_all(11, (tg_tensor *[]){x1, x2, y, top, bot, yt, yb, ys, g, d1, d2});
    /* rows far from the origin: the product form's cancellation shows (its
     * rounding error, as torch's), so the 30 rows did take that path */
    tg_tensor *f1 = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){30, 4}, 999.9, 1000.1);
    tg_tensor *f2 = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){6, 4}, 999.9, 1000.1);
    tg_tensor *fy = NULL, *ft = NULL, *fb = NULL, *fyt = NULL, *fyb = NULL;
    OK(tg_cdist(&fy, f1, f2, 2.0));
    OK(tg_narrow(&ft, f1, 0, 0, 25));
    OK(tg_narrow(&fb, f1, 0, 25, 5));
    OK(tg_cdist(&fyt, ft, f2, 2.0));
    OK(tg_cdist(&fyb, fb, f2, 2.0));
    double most = 0;
    for (int64_t e = 0; e < 180; e++) {
        const double want = e < 150 ? th_at(fyt, e) : th_at(fyb, e - 150);
        const double err = fabs(th_at(fy, e) - want) / want;
        most = err > most ? err : most;
    }
    cr_assert(most > 1e-13 && most < 1e-5, "relative difference %g", most);
    th_release_all(7, (tg_tensor *[]){f1, f2, fy, ft, fb, fyt, fyb});
    /* small integers: the product form is exact, so a row against itself is
     * 0 with the gradient 0 there (not sqrt's infinite slope) */
    tg_tensor *a = th_arange(TG_F64, 2, (int64_t[]){26, 2}), *b = NULL, *z = NULL, *da = NULL;
    tg_tensor *zs = NULL;
    OK(tg_narrow(&b, a, 0, 3, 1));   /* a's row 3, before a requires grad */
    OK(tg_tensor_set_requires_grad(a, true));
    OK(tg_cdist(&z, a, b, 2.0));
    cr_assert(eq(dbl, th_at(z, 3), 0));
    cr_assert(eq(dbl, th_at(z, 4), sqrt(8)));
    OK(tg_sum(&zs, z));
    OK(tg_grad(&da, 1, &zs, NULL, 1, &a, NULL));
    for (int64_t e = 0; e < 52; e++)
        cr_assert(isfinite(th_at(da, e)), "element %lld", (long long)e);
    cr_assert(eq(dbl, th_at(da, 6), 0));
    cr_assert(eq(dbl, th_at(da, 7), 0));
    th_release_all(5, (tg_tensor *[]){a, b, z, zs, da});
}

/* cdist is on autocast's FP32 list: inside a bf16 scope an f32 pair gives
 * the bits it gives outside (its product path's matmul is not lowered),
 * and a bf16 pair an f32 result. */
Test(dims, cdist_under_autocast_runs_in_f32)
{
    uint64_t s = 23;
    tg_tensor *x1 = th_rand_tensor(&s, TG_F32, 2, (int64_t[]){30, 4}, -2, 2);
    tg_tensor *x2 = th_rand_tensor(&s, TG_F32, 2, (int64_t[]){6, 4}, -2, 2);
    tg_tensor *h1 = NULL, *h2 = NULL, *y0 = NULL, *y1 = NULL, *yh = NULL;
    OK(tg_to_dtype(&h1, x1, TG_BF16));
    OK(tg_to_dtype(&h2, x2, TG_BF16));
    OK(tg_cdist(&y0, x1, x2, 2.0));
    OK(tg_autocast_begin(TG_BF16));
    OK(tg_cdist(&y1, x1, x2, 2.0));
    OK(tg_cdist(&yh, h1, h2, 2.0));
    OK(tg_autocast_end());
    th_expect_same_bits("f32 under autocast", x1, y1, y0);
    cr_assert(eq(int, tg_tensor_dtype(yh), TG_F32));
    th_release_all(7, (tg_tensor *[]){x1, x2, h1, h2, y0, y1, yh});
}

/* Integer tensordot gives torch's dtype and wraps modulo 2^bits (i8: 3
 * products of 100 * 100 = 30000 = 48 mod 256), in and out of autocast;
 * under a bf16 scope float operands of f32 and f16 run in bf16 as torch's
 * mm, and f64 beside another float dtype, or an integer beside a float, is
 * refused as torch's. */
Test(dims, tensordot_dtypes_as_torch)
{
    tg_tensor *a = NULL, *b = NULL, *y = NULL, *ya = NULL, *f = NULL, *h = NULL, *yf = NULL;
    tg_tensor *d = th_seq(TG_F64, 2, (int64_t[]){3, 2}, -1, 1);
    OK(tg_tensor_full(&a, TG_I8, 2, (int64_t[]){2, 3}, 100));
    OK(tg_tensor_full(&b, TG_I8, 2, (int64_t[]){3, 2}, 100));
    OK(tg_tensordot(&y, a, b, 1, NULL, NULL));
    cr_assert(eq(int, tg_tensor_dtype(y), TG_I8));
    cr_assert(eq(dbl, th_get(y, (int64_t[]){1, 1}), 48));
    f = th_seq(TG_F32, 2, (int64_t[]){2, 3}, -1, 1);
    OK(tg_to_dtype(&h, d, TG_F16));
    OK(tg_autocast_begin(TG_BF16));
    OK(tg_tensordot(&ya, a, b, 1, NULL, NULL));
    OK(tg_tensordot(&yf, f, h, 1, NULL, NULL));
    th_expect_refused_clean(tg_tensordot(out_, f, d, 1, NULL, NULL), TG_EDTYPE,
                            "autocast does not cast f64");
    th_expect_refused_clean(tg_tensordot(out_, a, h, 1, NULL, NULL), TG_EDTYPE,
                            "b is f16 but a is i8");
    OK(tg_autocast_end());
    th_expect_same_bits("i8 under autocast", a, ya, y);
    cr_assert(eq(int, tg_tensor_dtype(yf), TG_BF16));
    th_release_all(8, (tg_tensor *[]){a, b, y, ya, f, h, yf, d});
}

/* kron of 8-d operands (grown one dim at a time): entry i is
 * a[i / b.shape] b[i % b.shape], the ranks padded with leading 1s. */
Test(dims, kron_of_eight_dims)
{
    uint64_t s = 31;
    const int64_t sa[8] = {2, 1, 1, 2, 1, 1, 2, 1}, sb[7] = {2, 1, 3, 1, 1, 2, 1};
    tg_tensor *a = th_rand_tensor(&s, TG_F64, 8, sa, -2, 2);
    tg_tensor *b = th_rand_tensor(&s, TG_F64, 7, sb, -2, 2), *k = NULL;
    OK(tg_kron(&k, a, b));
    th_expect_shape(k, 8, (int64_t[]){2, 2, 1, 6, 1, 1, 4, 1});
    const int64_t pb[8] = {1, 2, 1, 3, 1, 1, 2, 1};
    for (int64_t f = 0; f < tg_tensor_numel(k); f++) {
        int64_t i[8], ia[8], ib[8];
        for (int d = 7, r = (int)f; d >= 0; d--) {
            const int64_t e = sa[d] * pb[d];
            i[d] = r % e, r /= (int)e;
            ia[d] = i[d] / pb[d], ib[d] = i[d] % pb[d];
        }
        cr_assert(eq(dbl, th_get(k, i), th_get(a, ia) * th_get(b, ib + 1)), "element %lld",
                  (long long)f);
    }
    th_release_all(3, (tg_tensor *[]){a, b, k});
}

/* cdist with p = inf gives each tied largest |difference| the whole
 * gradient, signed, as torch's ([0 0 0 0] against [2 -2 1 2]: -1 1 0 -1);
 * an infinite difference gives an infinite distance (not NaN) and a NaN
 * gradient there, the other differences 0, as torch 1.13's CPU cdist. */
Test(dims, cdist_inf_ties_get_the_whole_gradient)
{
    tg_tensor *a = th_tensor_from(TG_F64, 2, (int64_t[]){1, 4}, (double[]){0, 0, 0, 0});
    tg_tensor *b = th_tensor_from(TG_F64, 2, (int64_t[]){1, 4}, (double[]){2, -2, 1, 2});
    tg_tensor *c = th_tensor_from(TG_F64, 2, (int64_t[]){1, 2}, (double[]){INFINITY, 1});
    tg_tensor *e = th_tensor_from(TG_F64, 2, (int64_t[]){1, 2}, (double[]){1, 3});
    tg_tensor *in[4] = {a, b, c, e}, *y = NULL, *yi = NULL, *d[2] = {NULL}, *di[2] = {NULL};
    for (int i = 0; i < 4; i++) OK(tg_tensor_set_requires_grad(in[i], true));
    OK(tg_cdist(&y, a, b, INFINITY));
    OK(tg_grad(d, 1, &y, NULL, 2, (tg_tensor *[]){a, b}, NULL));
    cr_assert(eq(dbl, th_get(y, (int64_t[]){0, 0}), 2));
    const double want[4] = {-1, 1, 0, -1};
    for (int k = 0; k < 4; k++) {
        cr_assert(eq(dbl, th_get(d[0], (int64_t[]){0, k}), want[k]), "k %d", k);
        cr_assert(eq(dbl, th_get(d[1], (int64_t[]){0, k}), -want[k]), "k %d", k);
    }
    OK(tg_cdist(&yi, c, e, INFINITY));
    OK(tg_grad(di, 1, &yi, NULL, 2, (tg_tensor *[]){c, e}, NULL));
    cr_assert(eq(dbl, th_get(yi, (int64_t[]){0, 0}), INFINITY));
    cr_assert(isnan(th_get(di[0], (int64_t[]){0, 0})) != 0);
    cr_assert(eq(dbl, th_get(di[0], (int64_t[]){0, 1}), 0));
    th_release_all(10, (tg_tensor *[]){a, b, c, e, y, yi, d[0], d[1], di[0], di[1]});
}

typedef struct dims_case {
    const char *fn, *a, *b;
    int nd1, nd2;   /* the inputs' ranks (nd2 0: one input) */
    int64_t s1[TG_MAX_DIMS], s2[TG_MAX_DIMS];
} dims_case;

static int dims_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    const dims_case *c = user;
    return run_case(c->fn, out, in[0], n > 1 ? in[1] : NULL, c->a, c->b);
}

static void check_twice(const dims_case *k, uint64_t seed)
{
    uint64_t s = seed;
    const int n = k->nd2 ? 2 : 1;
    tg_tensor *in[2] = {th_rand_tensor(&s, TG_F64, k->nd1, k->s1, -2, 2),
                        n > 1 ? th_rand_tensor(&s, TG_F64, k->nd2, k->s2, -2, 2) : NULL};
    for (int i = 0; i < n; i++) OK(tg_tensor_set_requires_grad(in[i], true));
    th_expect_gradchecks(dims_fn, (void *)k, n, in, "%s %s %s", k->fn, k->a, k->b);
    th_release_all(2, in);
}

Test(dims, gradcheck_and_gradgradcheck)
{
    const dims_case cases[] = {
        {"narrow", "1,-3,2", "-", 3, 0, {3, 4, 5}, {0}},
        {"movedim", "0,2", "2,0", 3, 0, {3, 4, 5}, {0}},
        {"flatten", "0,1", "-", 3, 0, {3, 4, 5}, {0}},
        {"unflatten", "2", "-1,5", 3, 0, {3, 4, 5}, {0}},
        {"tensordot", "1", "-", 2, 1, {3, 4}, {4}},
        {"tensordot", "1,2", "0,1", 3, 2, {3, 4, 5}, {4, 5}},
        {"kron", "-", "-", 2, 2, {3, 2}, {2, 3}},
        {"kron", "-", "-", 5, 3, {2, 1, 2, 1, 2}, {2, 1, 3}},   /* grown dim by dim */
        {"cross", "-1", "-", 2, 2, {2, 3}, {1, 3}},
        {"cdist", "-", "2", 2, 2, {3, 4}, {5, 4}},
        {"cdist", "-", "1.5", 3, 2, {2, 3, 4}, {5, 4}},
        {"cdist", "-", "3", 2, 2, {3, 4}, {5, 4}},
        {"cdist", "-", "inf", 2, 2, {3, 4}, {5, 4}},
        {"cdist", "-", "2", 2, 2, {26, 3}, {2, 3}},   /* through one product */
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) check_twice(&cases[c], 60 + c);
}

Test(dims, refusals)
{
    tg_tensor *x = th_seq(TG_F32, 2, (int64_t[]){3, 4}, -1, 1);
    tg_tensor *d = th_seq(TG_F64, 2, (int64_t[]){4, 3}, -1, 1);
    tg_tensor *i = th_arange(TG_I64, 2, (int64_t[]){3, 3}), *s = NULL;
    OK(tg_tensor_scalar(&s, TG_F32, 1));
    th_expect_refused_clean(tg_narrow(out_, NULL, 0, 0, 1), TG_EINVAL, "x must not be NULL");
    th_expect_refused_clean(tg_narrow(out_, s, 0, 0, 1), TG_EINVAL, "0-d");
    th_expect_refused_clean(tg_narrow(out_, x, 2, 0, 1), TG_EINVAL, "dim=2 is out of range");
    th_expect_refused_clean(tg_narrow(out_, x, 1, -5, 1), TG_EINVAL, "start=-5");
    th_expect_refused_clean(tg_narrow(out_, x, 1, 2, 3), TG_EINVAL, "length=3 must be in [0, 2]");
    th_expect_refused_clean(tg_movedim(out_, x, 3, (int[]){0, 1, 0}, (int[]){0, 1, 0}),
                            TG_EINVAL, "n=3");
    th_expect_refused_clean(tg_movedim(out_, x, 2, (int[]){0, 0}, (int[]){0, 1}), TG_EINVAL,
                            "source names dim 0 twice");
    th_expect_refused_clean(tg_movedim(out_, x, 2, (int[]){0, 1}, (int[]){1, -1}), TG_EINVAL,
                            "destination names dim 1 twice");
    th_expect_refused_clean(tg_movedim(out_, x, 1, NULL, (int[]){0}), TG_EINVAL, "NULL");
    th_expect_refused_clean(tg_flatten(out_, x, 1, 0), TG_EINVAL, "comes after");
    th_expect_refused_clean(tg_flatten(out_, x, 0, 2), TG_EINVAL, "do not fit");
    th_expect_refused_clean(tg_unflatten(out_, x, 1, 2, (int64_t[]){3, 2}), TG_ESHAPE,
                            "not the product");
    th_expect_refused_clean(tg_unflatten(out_, x, 1, 2, (int64_t[]){-1, -1}), TG_EINVAL,
                            "both -1");
    th_expect_refused_clean(tg_unflatten(out_, x, 1, 2, (int64_t[]){3, -1}), TG_ESHAPE,
                            "not a multiple of 3");
    th_expect_refused_clean(tg_unflatten(out_, x, 1, 2, (int64_t[]){INT64_MAX, 3}), TG_ESHAPE,
                            "not the product");
    th_expect_refused_clean(tg_unflatten(out_, x, 1, 0, (int64_t[]){4}), TG_EINVAL, "n=0");
    th_expect_refused_clean(tg_tensordot(out_, x, d, 1, NULL, NULL), TG_EDTYPE,
                            "b is f64 but a is f32: outside autocast");
    th_expect_refused_clean(tg_tensordot(out_, i, d, 1, NULL, NULL), TG_EDTYPE,
                            "b is f64 but a is i64: integer operands must have one dtype");
    tg_tensor *i32 = NULL;
    OK(tg_to_dtype(&i32, i, TG_I32));
    th_expect_refused_clean(tg_tensordot(out_, i, i32, 1, NULL, NULL), TG_EDTYPE,
                            "b is i32 but a is i64");
    tg_tensor_release(i32);
    th_expect_refused_clean(tg_tensordot(out_, x, x, 1, NULL, NULL), TG_ESHAPE,
                            "contracted dims must match");
    th_expect_refused_clean(tg_tensordot(out_, x, x, 3, NULL, NULL), TG_EINVAL, "n=3");
    th_expect_refused_clean(tg_tensordot(out_, x, x, 1, (int[]){0}, NULL), TG_EINVAL,
                            "both be given");
    th_expect_refused_clean(tg_tensordot(out_, x, x, 2, (int[]){0, 0}, (int[]){0, 1}),
                            TG_EINVAL, "dims_a names dim 0 twice");
    th_expect_refused_clean(tg_kron(out_, x, NULL), TG_EINVAL, "must not be NULL");
    th_expect_refused_clean(tg_cross(out_, x, x, 1), TG_ESHAPE, "it must be 3");
    th_expect_refused_clean(tg_cross(out_, d, x, 1), TG_EDTYPE, "f64 and f32");
    th_expect_refused_clean(tg_cross(out_, i, d, 5), TG_EDTYPE, "dtypes");
    th_expect_refused_clean(tg_cdist(out_, x, d, 2), TG_EDTYPE, "must be the same");
    th_expect_refused_clean(tg_cdist(out_, i, i, 2), TG_EDTYPE, "float dtypes only");
    th_expect_refused_clean(tg_cdist(out_, x, x, -1), TG_EINVAL, "p=-1 must be >= 0");
    th_expect_refused_clean(tg_cdist(out_, x, x, NAN), TG_EINVAL, "not NaN");
    th_expect_refused_clean(tg_cdist(out_, s, s, 2), TG_EINVAL, "at least 2");
    tg_tensor *x3 = th_seq(TG_F32, 2, (int64_t[]){3, 3}, -1, 1);
    th_expect_refused_clean(tg_cdist(out_, x, x3, 2), TG_ESHAPE, "4 columns and x2 3");
    th_release_all(5, (tg_tensor *[]){x, d, i, s, x3});
}
