/* tests/test_where.c - tg_where against torch.where for every dtype (i8,
 * u8, i32, i64 and the four float ones; a cond, a and b that broadcast
 * every way, 0-d and empty tensors, all-true and all-false conds, an
 * integer dtype's minimum and maximum), the float gradients, integer
 * results that are not recorded, and the refusals.  Goldens:
 * scripts/make_where_goldens.py. */
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
    th_expect_refused(tg_where(&y, c, i32, i64), TG_EDTYPE,
                      "where: a (i32) and b (i64) must have the same dtype", y);
    th_expect_refused(tg_where(&y, c, u8, f32), TG_EDTYPE,
                      "where: a (u8) and b (f32) must have the same dtype", y);
    th_expect_refused(tg_where(&y, c, f32, i64), TG_EDTYPE, "a (f32) and b (i64)", y);
    th_expect_refused(tg_where(&y, c, i8, i8), TG_ESHAPE, "where: shapes", y);
    th_release_all(6, (tg_tensor *[]){c, i32, i64, u8, i8, f32});
}
