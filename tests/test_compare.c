/* tests/test_compare.c - maximum and minimum, the comparisons eq, ne, lt,
 * le, gt, ge (with a tensor and with a number), and stack: values and
 * gradients against PyTorch 1.13 (tests/golden/compare.safetensors,
 * scripts/make_compare_goldens.py) with broadcasting, ties, NaN, signed
 * zeros and mixed dtypes; gradcheck and gradgradcheck in f64; the
 * comparisons' exact integer rules; and the errors that name the
 * argument. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

typedef int (*cmp_fn)(tg_tensor **, tg_tensor *, tg_tensor *);
typedef int (*cmp_scalar_fn)(tg_tensor **, tg_tensor *, double);

static const char *const OPS[6] = {"eq", "ne", "lt", "le", "gt", "ge"};
static const cmp_fn FNS[6] = {tg_eq, tg_ne, tg_lt, tg_le, tg_gt, tg_ge};
static const cmp_scalar_fn SFNS[6] = {tg_eq_scalar, tg_ne_scalar, tg_lt_scalar,
                                      tg_le_scalar, tg_gt_scalar, tg_ge_scalar};

/* got within atol of want: shape, dtype and values (NaN matching NaN; the
 * sign of a number counts when signs is true, zeros included). */
static void expect_near(const char *what, const tg_tensor *got, const tg_tensor *want,
                        double atol, bool signs)
{
    cr_assert(got != NULL && want != NULL, "%s: missing", what);
    cr_assert(tg_tensor_same_shape(got, want), "%s: shape", what);
    cr_assert(eq(int, tg_tensor_dtype(got), tg_tensor_dtype(want)), "%s: dtype %s, torch %s",
              what, tg_dtype_name(tg_tensor_dtype(got)), tg_dtype_name(tg_tensor_dtype(want)));
    for (int64_t i = 0; i < tg_tensor_numel(want); i++)
        cr_assert(th_close(th_at(got, i), th_at(want, i), 0, atol) &&
                      (!signs || isnan(th_at(want, i)) ||
                       signbit(th_at(got, i)) == signbit(th_at(want, i))),
                  "%s[%lld]: %.17g, torch %.17g", what, (long long)i, th_at(got, i),
                  th_at(want, i));
}

/* got equals want exactly (NaN matching NaN). */
static void expect_equal(const char *what, const tg_tensor *got, const tg_tensor *want)
{
    expect_near(what, got, want, 0, true);
}

/* What an input's gradient may differ from torch's by when it is a sum of
 * the n = numel(w) products g w(a, b) (an input broadcast to y's shape):
 * torch adds them in y's dtype, tapegrad in double rounded once, so the
 * two differ by up to n / 2 ulps of the largest |g|; an input of y's own
 * shape takes one product and agrees exactly. */
static double sum_tol(const tg_tensor *input, const tg_tensor *w)
{
    const int64_t n = tg_tensor_numel(w);
    if (tg_tensor_numel(input) == n) return 0;
    double big = 0;
    for (int64_t i = 0; i < n; i++) big = fmax(big, fabs(th_at(w, i)));
    const tg_dtype dt = tg_tensor_dtype(w);
    const double ulp = dt == TG_F64 ? 0x1p-52 : dt == TG_F32 ? 0x1p-23 : dt == TG_F16 ? 0x1p-10
                                                                                      : 0x1p-7;
    return (double)n / 2 * big * ulp;
}

/* ---- maximum and minimum ------------------------------------------------------------ */

/* y equals torch's y, zero signs included but where a and b are zeros of
 * both signs: tapegrad gives a's there, torch a's or b's depending on
 * whether the element falls in a vectorised block. */
static void expect_maximum_values(const char *what, tg_tensor *a, tg_tensor *b,
                                  const tg_tensor *y, const tg_tensor *want)
{
    tg_tensor *ea = NULL, *eb = NULL;
    expect_near(what, y, want, 0, false);   /* values; signs below */
    OK(tg_expand(&ea, a, tg_tensor_ndim(y), tg_tensor_shape(y)));
    OK(tg_expand(&eb, b, tg_tensor_ndim(y), tg_tensor_shape(y)));
    for (int64_t i = 0; i < tg_tensor_numel(y); i++) {
        if (th_at(ea, i) == 0 && th_at(eb, i) == 0 &&
            signbit(th_at(ea, i)) != signbit(th_at(eb, i))) {
            cr_assert(signbit(th_at(y, i)) == signbit(th_at(ea, i)), "%s[%lld]: not a's zero",
                      what, (long long)i);
            continue;
        }
        cr_assert(isnan(th_at(want, i)) || signbit(th_at(y, i)) == signbit(th_at(want, i)),
                  "%s[%lld]: %g, torch %g",
                  what, (long long)i, th_at(y, i), th_at(want, i));
    }
    th_release_all(2, (tg_tensor *[]){ea, eb});
}

/* The values are a or b, equal to torch's; the gradients g, g / 2 or 0,
 * summed over the broadcast dims (sum_tol). */
Test(compare, maximum_minimum_match_pytorch)
{
    tg_st_file *f = th_golden_load("compare.safetensors");
    char cases[256];
    snprintf(cases, sizeof cases, "%s", tg_st_meta_get(f, "mx_cases"));
    int checked = 0;
    for (char *save, *c = strtok_r(cases, ",", &save); c; c = strtok_r(NULL, ",", &save)) {
        for (int m = 0; m < 2; m++) {
            const char *fn = m ? "minimum" : "maximum";
            tg_tensor *a = th_leaf_clone(th_golden_at(f, "mx.%s.a", c, "")), *y = NULL;
            tg_tensor *b = th_leaf_clone(th_golden_at(f, "mx.%s.b", c, ""));
            OK((m ? tg_minimum : tg_maximum)(&y, a, b));
            char what[96], key[64];
            snprintf(what, sizeof what, "%s %s y", c, fn);
            snprintf(key, sizeof key, "mx.%%s.%s.y", fn);
            expect_maximum_values(what, a, b, y, th_golden_at(f, key, c, ""));
            snprintf(key, sizeof key, "mx.%%s.%s.w", fn);
            tg_tensor *w = th_golden_at(f, key, c, "");
            OK(tg_backward(y, w, NULL));
            snprintf(what, sizeof what, "%s %s ga", c, fn);
            snprintf(key, sizeof key, "mx.%%s.%s.ga", fn);
            expect_near(what, tg_tensor_grad(a), th_golden_at(f, key, c, ""), sum_tol(a, w), true);
            snprintf(what, sizeof what, "%s %s gb", c, fn);
            snprintf(key, sizeof key, "mx.%%s.%s.gb", fn);
            expect_near(what, tg_tensor_grad(b), th_golden_at(f, key, c, ""), sum_tol(b, w), true);
            th_release_all(3, (tg_tensor *[]){a, b, y});
            checked++;
        }
    }
    cr_assert(checked >= 14, "only %d cases", checked);
    tg_st_free(f);
}

/* maximum(a, b) * a: nonlinear beyond the op, so that gradgradcheck sees
 * its second derivative against a varying factor. */
static int g_maxmin(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    tg_tensor *y = NULL;
    TG_TRY((*(const bool *)user ? tg_minimum : tg_maximum)(&y, in[0], in[1]));
    int rc = tg_mul(out, y, in[0]);
    tg_tensor_release(y);
    return rc;
}

Test(compare, maximum_minimum_gradcheck_and_gradgradcheck_in_f64)
{
    /* no ties, where the numeric derivative would jump */
    tg_tensor *a = th_seq(TG_F64, 2, (int64_t[]){3, 4}, -1.0, 1.0);
    tg_tensor *b = th_seq(TG_F64, 1, (int64_t[]){4}, -0.93, 0.91);
    OK(tg_tensor_set_requires_grad(a, true));
    OK(tg_tensor_set_requires_grad(b, true));
    for (int m = 0; m < 2; m++) {
        bool min = m;
        OK(tg_gradcheck(g_maxmin, &min, 2, (tg_tensor *[]){a, b}, NULL));
        OK(tg_gradgradcheck(g_maxmin, &min, 2, (tg_tensor *[]){a, b}, NULL));
    }
    th_release_all(2, (tg_tensor *[]){a, b});
}

/* An infinite g where an input lost: its gradient there is 0, not NaN
 * (torch masks rather than multiplies). */
Test(compare, maximum_gradient_is_zero_where_an_input_lost)
{
    tg_tensor *a = th_vec(TG_F32, 2, (double[]){1, 5}, "a", true);
    tg_tensor *b = th_vec(TG_F32, 2, (double[]){3, 3}, "b", true);
    tg_tensor *g = th_tensor_from(TG_F32, 1, (int64_t[]){2}, (double[]){INFINITY, INFINITY}), *y;
    OK(tg_maximum(&y, a, b));
    OK(tg_backward(y, g, NULL));
    cr_assert(eq(dbl, th_at(tg_tensor_grad(a), 0), 0.0));
    cr_assert(isinf(th_at(tg_tensor_grad(a), 1)));
    cr_assert(eq(dbl, th_at(tg_tensor_grad(b), 1), 0.0));
    th_release_all(4, (tg_tensor *[]){a, b, g, y});
}

/* ---- comparisons ------------------------------------------------------------------- */

Test(compare, comparisons_match_pytorch)
{
    tg_st_file *f = th_golden_load("compare.safetensors");
    char cases[512];
    int checked = 0;
    snprintf(cases, sizeof cases, "%s", tg_st_meta_get(f, "cmp_cases"));
    for (char *save, *c = strtok_r(cases, ",", &save); c; c = strtok_r(NULL, ",", &save)) {
        tg_tensor *a = th_golden_at(f, "cmp.%s.a", c, ""), *b = th_golden_at(f, "cmp.%s.b", c, "");
        for (int k = 0; k < 6; k++) {
            tg_tensor *y = NULL;
            char what[96];
            OK(FNS[k](&y, a, b));
            snprintf(what, sizeof what, "%s %s", c, OPS[k]);
            expect_equal(what, y, th_golden_at(f, "cmp.%s.%s", c, OPS[k]));
            tg_tensor_release(y);
            checked++;
        }
    }
    snprintf(cases, sizeof cases, "%s", tg_st_meta_get(f, "cmps_cases"));
    for (char *save, *c = strtok_r(cases, ",", &save); c; c = strtok_r(NULL, ",", &save)) {
        char key[64];
        snprintf(key, sizeof key, "%s.s", c);
        const double s = strtod(tg_st_meta_get(f, key), NULL);
        tg_tensor *a = th_golden_at(f, "cmps.%s.a", c, "");
        for (int k = 0; k < 6; k++) {
            tg_tensor *y = NULL;
            char what[96];
            OK(SFNS[k](&y, a, s));
            snprintf(what, sizeof what, "%s %s_scalar %g", c, OPS[k], s);
            expect_equal(what, y, th_golden_at(f, "cmps.%s.%s", c, OPS[k]));
            tg_tensor_release(y);
            checked++;
        }
    }
    cr_assert(checked >= 100, "only %d comparisons", checked);
    tg_st_free(f);
}

/* An input that requires grad gives a result off the tape, as torch's
 * bool results. */
Test(compare, comparisons_are_not_recorded)
{
    tg_tensor *a = th_vec(TG_F32, 3, (double[]){1, 2, 3}, "a", true);
    tg_tensor *b = th_vec(TG_F32, 3, (double[]){3, 2, 1}, "b", true), *y = NULL;
    OK(tg_lt(&y, a, b));
    cr_assert(eq(int, tg_tensor_dtype(y), TG_U8));
    cr_assert(tg_tensor_requires_grad(y) == false);
    cr_assert(tg_tensor_is_leaf(y));
    tg_tensor_release(y);
    OK(tg_ge_scalar(&y, a, 2));
    cr_assert(tg_tensor_requires_grad(y) == false);
    cr_assert(eq(dbl, th_at(y, 0) + 2 * th_at(y, 1) + 4 * th_at(y, 2), 6.0));
    th_release_all(3, (tg_tensor *[]){a, b, y});
}

/* An integer tensor and a number: compared exactly, where torch compares
 * in f32 (2^24 + 1 == 16777216.0 there) or wraps the number into the
 * dtype (int8 -1 < 200 is false there). */
Test(compare, integers_and_numbers_compare_exactly)
{
    const int64_t v[3] = {16777217, (int64_t)1 << 62, -1};
    tg_tensor *x = NULL, *y = NULL;
    OK(tg_tensor_from_data(&x, TG_I64, 1, (int64_t[]){3}, v));
    OK(tg_eq_scalar(&y, x, 16777216.0));
    cr_assert(eq(dbl, th_at(y, 0), 0.0));
    tg_tensor_release(y);
    OK(tg_gt_scalar(&y, x, 16777216.5));
    cr_assert(eq(dbl, th_at(y, 0), 1.0));
    tg_tensor_release(y);
    OK(tg_lt_scalar(&y, x, 0x1p62));   /* 2^62 is not < 2^62 */
    cr_assert(eq(dbl, th_at(y, 1), 0.0));
    cr_assert(eq(dbl, th_at(y, 2), 1.0));
    tg_tensor_release(y);
    OK(tg_lt_scalar(&y, x, 0x1p64));   /* past every int64 */
    cr_assert(eq(dbl, th_at(y, 1), 1.0));
    tg_tensor_release(y);
    OK(tg_ne_scalar(&y, x, NAN));
    for (int k = 0; k < 3; k++) cr_assert(eq(dbl, th_at(y, k), 1.0));
    th_release_all(2, (tg_tensor *[]){x, y});
    const int8_t w[1] = {-1};
    OK(tg_tensor_from_data(&x, TG_I8, 1, (int64_t[]){1}, w));
    OK(tg_lt_scalar(&y, x, 200));
    cr_assert(eq(dbl, th_at(y, 0), 1.0));
    th_release_all(2, (tg_tensor *[]){x, y});
}

Test(compare, bad_arguments_name_the_rule)
{
    tg_tensor *a = th_rand_uniform(TG_F32, 2, (int64_t[]){2, 3}, 1), *y = NULL;
    tg_tensor *b = th_rand_uniform(TG_F32, 1, (int64_t[]){4}, 2);
    cr_assert(eq(int, tg_le(&y, a, b), TG_ESHAPE));
    th_expect_in(tg_error_message(), "le: shapes (2, 3) and (4) cannot be broadcast");
    cr_assert(eq(int, tg_eq(&y, a, NULL), TG_EINVAL));
    th_expect_in(tg_error_message(), "eq: b must not be NULL");
    cr_assert(eq(int, tg_gt_scalar(&y, NULL, 1), TG_EINVAL));
    th_expect_in(tg_error_message(), "gt_scalar: a must not be NULL");
    cr_assert(eq(int, tg_ne(NULL, a, a), TG_EINVAL));
    th_expect_in(tg_error_message(), "ne: out must not be NULL");
    cr_assert(eq(int, tg_maximum(&y, a, b), TG_ESHAPE));
    th_expect_in(tg_error_message(), "maximum: shapes (2, 3) and (4) cannot be broadcast");
    tg_tensor *i = th_tensor_from(TG_I8, 1, (int64_t[]){3}, (double[]){1, 2, 3}), *u = NULL;
    OK(tg_to_dtype(&u, i, TG_U8));
    cr_assert(eq(int, tg_minimum(&y, i, u), TG_EDTYPE));
    th_expect_in(tg_error_message(), "minimum: a (i8) and b (u8): torch promotes them to int16");
    tg_tensor_release(u);
    cr_assert(y == NULL, "an error left a result");
    th_release_all(3, (tg_tensor *[]){a, b, i});
}

/* ---- stack -------------------------------------------------------------------------- */

Test(compare, stack_matches_pytorch)
{
    tg_st_file *f = th_golden_load("compare.safetensors");
    char cases[128];
    int checked = 0;
    snprintf(cases, sizeof cases, "%s", tg_st_meta_get(f, "stack_cases"));
    for (char *save, *c = strtok_r(cases, ",", &save); c; c = strtok_r(NULL, ",", &save)) {
        char key[96], dims[64];
        snprintf(key, sizeof key, "%s.n", c);
        const int n = atoi(tg_st_meta_get(f, key));
        snprintf(key, sizeof key, "%s.dims", c);
        snprintf(dims, sizeof dims, "%s", tg_st_meta_get(f, key));
        for (char *s2, *d = strtok_r(dims, ",", &s2); d; d = strtok_r(NULL, ",", &s2)) {
            tg_tensor *ts[4], *y = NULL;
            for (int i = 0; i < n; i++) {
                char idx[12];
                snprintf(idx, sizeof idx, "%d", i);
                ts[i] = th_leaf_clone(th_golden_at(f, "st.%s.%s", c, idx));
            }
            OK(tg_stack(&y, n, ts, atoi(d)));
            char what[96];
            snprintf(what, sizeof what, "stack %s dim %s", c, d);
            expect_equal(what, y, th_golden_at(f, "st.%s.%s.y", c, d));
            snprintf(key, sizeof key, "st.%s.%s.w", c, d);
            OK(tg_backward(y, th_golden_at(f, "%s%s", key, ""), NULL));
            for (int i = 0; i < n; i++) {
                snprintf(key, sizeof key, "st.%s.%s.g%d", c, d, i);
                snprintf(what, sizeof what, "stack %s dim %s g%d", c, d, i);
                expect_equal(what, tg_tensor_grad(ts[i]), th_golden_at(f, "%s%s", key, ""));
            }
            th_release_all(n, ts);
            tg_tensor_release(y);
            checked++;
        }
    }
    cr_assert(checked >= 9, "only %d cases", checked);
    tg_st_free(f);
}

static int g_stack(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    tg_tensor *y = NULL, *t[2] = {NULL, NULL};
    TG_TRY(tg_stack(&y, n, in, *(const int *)user));
    int rc = tg_mul(&t[0], y, y);   /* nonlinear, for gradgradcheck */
    if (rc >= 0) rc = tg_sum_dims(out, t[0], 1, (int[]){0}, false);
    th_release_all(2, (tg_tensor *[]){y, t[0]});
    return rc;
}

Test(compare, stack_gradcheck_scope_and_errors)
{
    tg_tensor *a = th_rand_uniform(TG_F64, 2, (int64_t[]){2, 3}, 4);
    tg_tensor *b = th_rand_uniform(TG_F64, 2, (int64_t[]){2, 3}, 5), *y = NULL;
    OK(tg_tensor_set_requires_grad(a, true));
    OK(tg_tensor_set_requires_grad(b, true));
    for (int d = -3; d <= 2; d++) {
        OK(tg_gradcheck(g_stack, &d, 2, (tg_tensor *[]){a, b}, NULL));
        OK(tg_gradgradcheck(g_stack, &d, 2, (tg_tensor *[]){a, b}, NULL));
    }
    OK(tg_scope_begin());   /* the unsqueezed inputs are not the caller's */
    OK(tg_stack(&y, 2, (tg_tensor *[]){a, b}, 1));
    cr_assert(eq(int, tg_scope_size(), 1));
    th_expect_shape(y, 3, (int64_t[]){2, 2, 3});
    OK(tg_scope_end());
    y = NULL;
    tg_tensor *c = th_rand_uniform(TG_F64, 1, (int64_t[]){6}, 6);
    cr_assert(eq(int, tg_stack(&y, 2, (tg_tensor *[]){a, c}, 0), TG_ESHAPE));
    th_expect_in(tg_error_message(), "stack: ts[1] is (6) and ts[0] is (2, 3): every tensor "
                 "must have the same shape");
    cr_assert(eq(int, tg_stack(&y, 2, (tg_tensor *[]){a, b}, 3), TG_EINVAL));
    th_expect_in(tg_error_message(), "stack: dim=3 must be in [-3, 2] for 2-d tensors");
    cr_assert(eq(int, tg_stack(&y, 0, (tg_tensor *[]){a}, 0), TG_EINVAL));
    th_expect_in(tg_error_message(), "stack: n=0 must be >= 1");
    cr_assert(eq(int, tg_stack(&y, 2, (tg_tensor *[]){a, NULL}, 0), TG_EINVAL));
    th_expect_in(tg_error_message(), "stack: ts[1] must not be NULL");
    cr_assert(y == NULL, "an error left a result");
    th_release_all(3, (tg_tensor *[]){a, b, c});
}
