/* tests/test_where.c - tg_where against torch.where for every dtype (i8,
 * u8, i32, i64 and the four float ones; a cond, a and b that broadcast
 * every way, 0-d and empty tensors, all-true and all-false conds, an
 * integer dtype's minimum and maximum), the float gradients, integer
 * results that are not recorded, a and b of every pair of two dtypes
 * promoted as torch (0-d operands too) with the gradients of the float
 * ones, and the refusals.  Goldens: scripts/make_where_goldens.py. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

/* da and db of a float case: torch's bits when the input has y's shape,
 * else summed back within a rounding of the dtype. */
static void expect_grads(const char *what, const char *dt, tg_st_file *f, const char *c,
                         tg_tensor *y, tg_tensor *const ab[2])
{
    tg_tensor *g = (tg_tensor *)th_golden_get(f, c, "g"), *d[2] = {NULL, NULL};
    OK(tg_grad(d, 1, &y, &g, 2, ab, NULL));
    const bool f64 = !strcmp(dt, "f64"), f32 = !strcmp(dt, "f32");
    const double rtol = f64 ? 1e-15 : f32 ? 1e-7 : 1.0 / 128;
    const char *names[2] = {"da", "db"};
    for (int i = 0; i < 2; i++) {
        char w[128];
        snprintf(w, sizeof w, "%s %s", what, names[i]);
        th_expect_close(w, d[i], th_golden_get(f, c, names[i]),
                        tg_tensor_same_shape(ab[i], y) ? 0 : rtol);
    }
    th_release_all(2, d);
}

/* y is torch's, bit for bit, in every dtype; an integer y is not recorded
 * (no grad_fn, no requires_grad); a float one gives torch's gradients. */
Test(where, every_case_matches_torch)
{
    tg_st_file *f = th_golden_load("where.safetensors");
    const int n = atoi(tg_st_meta_get(f, "cases"));
    int ints = 0, floats = 0, broadcast = 0;
    for (int i = 0; i < n; i++) {
        char c[16], what[96];
        snprintf(c, sizeof c, "case%d", i);
        const char *dt = th_golden_meta(f, c, "dtype");
        const tg_tensor *a0 = th_golden_get(f, c, "a"), *b0 = th_golden_get(f, c, "b");
        tg_tensor *cond = (tg_tensor *)th_golden_get(f, c, "cond"), *y = NULL;
        const bool fl = tg_dtype_is_float(tg_tensor_dtype(a0));
        tg_tensor *ab[2] = {fl ? th_leaf_clone(a0) : (tg_tensor *)a0,
                            fl ? th_leaf_clone(b0) : (tg_tensor *)b0};
        snprintf(what, sizeof what, "%s (%s, %d-d cond, %d-d a, %d-d b)", c, dt,
                 tg_tensor_ndim(cond), tg_tensor_ndim(a0), tg_tensor_ndim(b0));
        OK(tg_where(&y, cond, ab[0], ab[1]));
        th_expect_same_tensor_bytes(what, y, th_golden_get(f, c, "y"));
        if (fl) {
            expect_grads(what, dt, f, c, y, ab);
            th_release_all(2, ab);
            floats++;
        } else {
            cr_assert(not(tg_tensor_requires_grad(y)), "%s: an integer y requires grad", what);
            ints++;
        }
        broadcast += !tg_tensor_same_shape(a0, y) || !tg_tensor_same_shape(b0, y);
        tg_tensor_release(y);
    }
    cr_assert(ints == 84 && floats == 84 && broadcast == 96, "%d integer, %d float, %d broadcast",
              ints, floats, broadcast);
    tg_st_free(f);
}

/* An integer where is not recorded even when cond (a float tensor) asks for
 * a gradient, and a u8 one keeps every bit of 0 and 255. */
Test(where, integer_results_are_not_recorded)
{
    const tg_dtype ints[] = {TG_I8, TG_U8, TG_I32, TG_I64};
    tg_tensor *cond = th_tensor_from(TG_F32, 1, (int64_t[]){4}, (double[]){1, 0, NAN, -0.0});
    OK(tg_tensor_set_requires_grad(cond, true));
    for (int k = 0; k < 4; k++) {
        tg_tensor *a = th_tensor_from(ints[k], 1, (int64_t[]){4}, (double[]){0, 1, 127, 2});
        tg_tensor *b = NULL, *y = NULL;
        OK(tg_tensor_scalar(&b, ints[k], ints[k] == TG_I8 ? -128 : 255));
        OK(tg_where(&y, cond, a, b));
        cr_assert(eq(int, tg_tensor_dtype(y), ints[k]));
        cr_assert(not(tg_tensor_requires_grad(y)), "%s y requires grad", tg_dtype_name(ints[k]));
        const double bv = ints[k] == TG_I8 ? -128 : 255, want[4] = {0, bv, 127, bv};
        for (int i = 0; i < 4; i++)
            cr_assert(eq(dbl, th_at(y, i), want[i]), "%s element %d", tg_dtype_name(ints[k]), i);
        th_release_all(3, (tg_tensor *[]){a, b, y});
    }
    tg_tensor_release(cond);
}

/* A float cond that requires grad (a leaf, or made by ops from one) gets
 * no gradient: with neither a nor b requiring grad, where is not recorded
 * and y is a leaf without requires_grad, as torch's (its cond is bool);
 * masked_fill's mask the same.  With a requiring grad, y does, a gets g
 * where cond holds and cond none. */
Test(where, a_cond_alone_that_requires_grad_is_not_recorded)
{
    tg_tensor *leaf = th_vec(TG_F32, 3, (double[]){1, 0, 2}, "cond", true), *made = NULL;
    OK(tg_mul_scalar(&made, leaf, 1.0));
    tg_tensor *a = th_vec(TG_F32, 3, (double[]){5, 6, 7}, "a", false);
    tg_tensor *b = th_vec(TG_F32, 3, (double[]){-1, -2, -3}, "b", false);
    tg_tensor *conds[2] = {leaf, made}, *y = NULL;
    for (int k = 0; k < 2; k++) {
        OK(tg_where(&y, conds[k], a, b));
        cr_assert(not(tg_tensor_requires_grad(y)), "cond %d: y requires grad", k);
        cr_assert(tg_tensor_is_leaf(y), "cond %d: y was recorded", k);
        cr_assert(eq(dbl, th_at(y, 1), -2.0));
        tg_tensor_release(y);
        OK(tg_masked_fill(&y, a, conds[k], 9.0));
        cr_assert(not(tg_tensor_requires_grad(y)), "cond %d: masked_fill requires grad", k);
        cr_assert(th_at(y, 0) == 9.0 && th_at(y, 1) == 6.0, "masked_fill's values");
        tg_tensor_release(y);
    }
    tg_tensor *ag = th_vec(TG_F32, 3, (double[]){5, 6, 7}, "ag", true), *l = NULL;
    OK(tg_where(&y, leaf, ag, b));
    cr_assert(tg_tensor_requires_grad(y));
    OK(tg_sum(&l, y));
    OK(tg_backward(l, NULL, NULL));
    const tg_tensor *da = tg_tensor_grad(ag);
    cr_assert(da != NULL);
    cr_assert(th_at(da, 0) == 1.0 && th_at(da, 1) == 0.0 && th_at(da, 2) == 1.0, "da");
    cr_assert(tg_tensor_grad(leaf) == NULL, "cond got a gradient");
    th_release_all(7, (tg_tensor *[]){leaf, made, a, b, ag, y, l});
}

/* A float operand's gradient summed over broadcast dims (up to 24 terms):
 * torch adds them in the result's dtype, tapegrad in double rounded once,
 * then each rounds to the operand's dtype; so within a few roundings of
 * the lower precision of the two (exact when the operand has y's shape). */
static double promoted_rtol(tg_dtype x, tg_dtype y)
{
    const tg_dtype lo = tg_dtype_size(x) < tg_dtype_size(y) ? x : y;
    return lo == TG_F64 ? 1e-14 : lo == TG_F32 ? 1e-6 : 1.0 / 64;
}

/* One where_promote case: y's dtype and bits, and the gradient of each
 * float operand (an integer one is not differentiable). */
static void check_promoted(tg_st_file *f, const char *c, const char *what, int *floats)
{
    const tg_tensor *ab0[2] = {th_golden_get(f, c, "a"), th_golden_get(f, c, "b")};
    tg_tensor *cond = (tg_tensor *)th_golden_get(f, c, "cond"), *y = NULL, *ab[2], *d[2];
    bool fl[2];
    for (int i = 0; i < 2; i++) {
        fl[i] = tg_dtype_is_float(tg_tensor_dtype(ab0[i]));
        ab[i] = fl[i] ? th_leaf_clone(ab0[i]) : (tg_tensor *)ab0[i];
    }
    OK(tg_where(&y, cond, ab[0], ab[1]));
    const tg_tensor *want = th_golden_get(f, c, "y");
    th_expect_same_tensor_bytes(what, y, want);
    const bool rec = tg_dtype_is_float(tg_tensor_dtype(want));
    cr_assert(eq(int, tg_tensor_requires_grad(y), rec), "%s: requires_grad", what);
    if (rec) {
        /* The float operands only: an integer one has no gradient. */
        tg_tensor *xs[2], *g = (tg_tensor *)th_golden_get(f, c, "g");
        const char *names[2];
        int n = 0;
        for (int i = 0; i < 2; i++)
            if (fl[i]) xs[n] = ab[i], names[n++] = i == 0 ? "da" : "db";
        d[0] = d[1] = NULL;
        OK(tg_grad(d, 1, &y, &g, n, xs, NULL));
        for (int k = 0; k < n; k++) {
            char w[224];
            snprintf(w, sizeof w, "%s %s", what, names[k]);
            const double rtol = tg_tensor_same_shape(xs[k], y) ? 0 :
                promoted_rtol(tg_tensor_dtype(xs[k]), tg_tensor_dtype(y));
            th_expect_close(w, d[k], th_golden_get(f, c, names[k]), rtol);
        }
        th_release_all(n, d);
        (*floats)++;
    }
    for (int i = 0; i < 2; i++)
        if (fl[i]) tg_tensor_release(ab[i]);
    tg_tensor_release(y);
}

/* a and b of every pair of two different dtypes, each with dims, 0-d or
 * broadcast: torch's result dtype and bits, the float operands' gradients;
 * i8 with u8 (int16 in torch) refused naming both. */
Test(where, promoted_pairs_match_torch)
{
    tg_st_file *f = th_golden_load("where_promote.safetensors");
    const int n = atoi(tg_st_meta_get(f, "cases"));
    int refused = 0, floats = 0, ran = 0;
    for (int i = 0; i < n; i++) {
        char c[16], what[192];
        snprintf(c, sizeof c, "case%d", i);
        const char *an = th_golden_meta(f, c, "a_dtype"), *bn = th_golden_meta(f, c, "b_dtype");
        const char *yn = th_golden_meta(f, c, "y_dtype");
        const tg_tensor *a = th_golden_get(f, c, "a"), *b = th_golden_get(f, c, "b");
        snprintf(what, sizeof what, "%s (%s %d-d, %s %d-d -> %s)", c, an, tg_tensor_ndim(a), bn,
                 tg_tensor_ndim(b), yn);
        if (strcmp(yn, "int16") == 0) {
            tg_tensor *y = NULL;
            char words[64];
            snprintf(words, sizeof words, "where: a (%s) and b (%s): torch promotes them to int16",
                     an, bn);
            th_expect_refused(tg_where(&y, (tg_tensor *)th_golden_get(f, c, "cond"),
                                       (tg_tensor *)a, (tg_tensor *)b), TG_EDTYPE, words, y);
            th_expect_in(tg_error_message(), "which tapegrad does not have");
            refused++;
            continue;
        }
        check_promoted(f, c, what, &floats);
        ran++;
    }
    /* 56 ordered pairs x 5 shapes; i8 with u8 promotes only when one of the
     * two is 0-d and the other not (then it is the one with dims). */
    cr_assert(n == 280 && refused == 6 && ran == 274 && floats == 220,
              "%d cases: %d refused, %d ran, %d float", n, refused, ran, floats);
    tg_st_free(f);
}

static int mixed_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    tg_tensor *const *cb = user;   /* cond, an i32 tensor */
    tg_tensor *y = NULL;
    TG_TRY(tg_where(&y, cb[0], cb[1], in[0]));   /* f64 = where(cond, i32, f64) */
    const int rc = tg_where(out, cb[0], in[1], y);   /* an f64 0-d a against y */
    tg_tensor_release(y);
    return rc;
}

/* An i32 a with an f64 b (3, 1), then an f64 0-d a with that: the f64
 * operands' gradients of first and second order against finite
 * differences. */
Test(where, mixed_gradcheck_and_gradgradcheck)
{
    uint64_t s = 62;
    tg_tensor *in[2] = {th_rand_tensor(&s, TG_F64, 2, (int64_t[]){3, 1}, -3, 3),
                        th_rand_tensor(&s, TG_F64, 0, NULL, -3, 3)};
    tg_tensor *cb[2] = {th_tensor_from(TG_U8, 3, (int64_t[]){2, 1, 4},
                                       (double[]){1, 0, 0, 1, 0, 1, 1, 0}),
                        th_arange(TG_I32, 3, (int64_t[]){2, 3, 1})};
    for (int i = 0; i < 2; i++) OK(tg_tensor_set_requires_grad(in[i], true));
    tg_gradcheck_opts o = TG_GRADCHECK_OPTS_INIT;
    cr_assert(eq(int, tg_gradcheck(mixed_fn, cb, 2, in, &o), TG_OK), "%s", tg_error_message());
    cr_assert(eq(int, tg_gradgradcheck(mixed_fn, cb, 2, in, &o), TG_OK), "%s",
              tg_error_message());
    th_release_all(2, in);
    th_release_all(2, cb);
}

/* A mixed result is recorded only when a float operand requires grad; an
 * integer operand gets no gradient; cond's dtype does not widen the result
 * (an f64 cond with f32 a and b is f32). */
Test(where, mixed_recording_and_cond_dtype)
{
    tg_tensor *c = th_tensor_from(TG_F64, 1, (int64_t[]){3}, (double[]){1, 0, NAN}), *y = NULL;
    tg_tensor *i = th_arange(TG_I64, 1, (int64_t[]){3}), *x = th_arange(TG_F32, 1, (int64_t[]){3});
    OK(tg_where(&y, c, i, x));
    cr_assert(eq(int, tg_tensor_dtype(y), TG_F32));
    cr_assert(not(tg_tensor_requires_grad(y)), "no float operand requires grad");
    tg_tensor_release(y);
    OK(tg_tensor_set_requires_grad(x, true));
    OK(tg_where(&y, c, i, x));
    cr_assert(eq(int, tg_tensor_dtype(y), TG_F32));
    cr_assert(tg_tensor_requires_grad(y), "b requires grad");
    tg_tensor *g = th_tensor_from(TG_F32, 1, (int64_t[]){3}, (double[]){2, 3, 4});
    OK(tg_backward(y, g, NULL));
    cr_assert(tg_tensor_grad(i) == NULL, "the integer a got a gradient");
    const tg_tensor *dx = tg_tensor_grad(x);
    cr_assert(eq(int, tg_tensor_dtype(dx), TG_F32));
    cr_assert(th_at(dx, 0) == 0 && th_at(dx, 1) == 3 && th_at(dx, 2) == 0, "db = g where !cond");
    tg_tensor_release(y);
    tg_tensor *z = NULL;
    OK(tg_where(&z, c, x, x));
    cr_assert(eq(int, tg_tensor_dtype(z), TG_F32), "an f64 cond widened the result");
    th_release_all(5, (tg_tensor *[]){c, i, x, z, g});
}

Test(where, refusals_name_the_argument)
{
    tg_tensor *c = th_tensor_from(TG_U8, 1, (int64_t[]){3}, (double[]){1, 0, 1}), *y = NULL;
    const int64_t n3[1] = {3}, n2[1] = {2};
    tg_tensor *i32 = th_arange(TG_I32, 1, n3), *i64 = th_arange(TG_I64, 1, n3);
    tg_tensor *u8 = th_arange(TG_U8, 1, n3), *i8 = th_arange(TG_I8, 1, n2);
    tg_tensor *f32 = th_arange(TG_F32, 1, n3);
    th_expect_refused(tg_where(NULL, c, i32, i32), TG_EINVAL, "out must not be NULL", NULL);
    th_expect_refused(tg_where(&y, NULL, i32, i32), TG_EINVAL, "where: cond must not be NULL", y);
    th_expect_refused(tg_where(&y, c, NULL, i32), TG_EINVAL, "where: a must not be NULL", y);
    th_expect_refused(tg_where(&y, c, i32, NULL), TG_EINVAL, "where: b must not be NULL", y);
    th_expect_refused(tg_where(&y, c, i8, i8), TG_ESHAPE, "where: shapes", y);
    tg_tensor *i8b = th_arange(TG_I8, 1, n3), *u8s = NULL, *i8s = NULL;
    th_expect_refused(tg_where(&y, c, i8b, u8), TG_EDTYPE,
                      "where: a (i8) and b (u8): torch promotes them to int16, which tapegrad "
                      "does not have (convert one with tg_to_dtype)", y);
    th_expect_refused(tg_where(&y, c, u8, i8b), TG_EDTYPE, "a (u8) and b (i8)", y);
    OK(tg_tensor_scalar(&u8s, TG_U8, 3));
    OK(tg_tensor_scalar(&i8s, TG_I8, -3));
    th_expect_refused(tg_where(&y, c, i8s, u8s), TG_EDTYPE, "a (i8) and b (u8)", y);
    th_release_all(9, (tg_tensor *[]){c, i32, i64, u8, i8, f32, i8b, u8s, i8s});
}
