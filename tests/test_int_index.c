/* tests/test_int_index.c - the indexing ops on integer data (i8, u8, i32,
 * i64): gather, index_select, scatter_add, index_add, scatter (src and
 * value), scatter_reduce (every reduction, with and without x's own
 * term), take_along_dim, index_fill, index_copy, index_put (with and
 * without accumulate) and masked_scatter against PyTorch's bytes (sums and
 * products wrapping modulo 2^bits, repeated positions, negative values,
 * mean's floor division); the results are not recorded; a src of another
 * dtype is refused, as torch refuses it.
 * Goldens: scripts/make_int_index_goldens.py. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

static const char *const OPS[] = {"gather",         "index_select",  "scatter_add",
                                  "index_add",      "scatter",       "scatter_value",
                                  "scatter_reduce", "take_along_dim", "index_fill",
                                  "index_copy",     "index_put",     "masked_scatter"};
enum { N_OPS = sizeof OPS / sizeof OPS[0] };

static tg_scatter_reduce_op reduce_of(const char *name)
{
    for (int r = TG_SCATTER_SUM; r <= TG_SCATTER_AMIN; r++)
        if (!strcmp(tg_scatter_reduce_name((tg_scatter_reduce_op)r), name))
            return (tg_scatter_reduce_op)r;
    cr_assert(false, "unknown reduce %s", name);
    return TG_SCATTER_SUM;
}

/* Runs case c (op) of f: its x, index and src as stored. */
static int run_case(const tg_st_file *f, const char *c, const char *op, tg_tensor **y)
{
    tg_tensor *x = (tg_tensor *)th_golden_get(f, c, "x");
    const bool masked = !strcmp(op, "masked_scatter");
    tg_tensor *idx = (tg_tensor *)th_golden_get(f, c, masked ? "mask" : "index");
    const bool no_src = !strcmp(op, "gather") || !strcmp(op, "index_select") ||
                        !strcmp(op, "scatter_value") || !strcmp(op, "take_along_dim") ||
                        !strcmp(op, "index_fill");
    tg_tensor *src = no_src ? NULL : (tg_tensor *)th_golden_get(f, c, "src");
    if (masked) return tg_masked_scatter(y, x, idx, src);
    if (!strcmp(op, "index_put"))
        return tg_index_put(y, x, 1, &idx, src, atoi(th_golden_meta(f, c, "accumulate")) != 0);
    const int dim = atoi(th_golden_meta(f, c, "dim"));
    if (!strcmp(op, "gather")) return tg_gather(y, x, dim, idx);
    if (!strcmp(op, "index_select")) return tg_index_select(y, x, dim, idx);
    if (!strcmp(op, "scatter_add")) return tg_scatter_add(y, x, dim, idx, src);
    if (!strcmp(op, "index_add")) return tg_index_add(y, x, dim, idx, src);
    if (!strcmp(op, "scatter")) return tg_scatter(y, x, dim, idx, src);
    if (!strcmp(op, "take_along_dim")) return tg_take_along_dim(y, x, idx, dim);
    if (!strcmp(op, "index_copy")) return tg_index_copy(y, x, dim, idx, src);
    if (!strcmp(op, "scatter_reduce"))
        return tg_scatter_reduce(y, x, dim, idx, src, reduce_of(th_golden_meta(f, c, "reduce")),
                                 atoi(th_golden_meta(f, c, "include_self")) != 0);
    const double value = atof(th_golden_meta(f, c, "value"));
    if (!strcmp(op, "scatter_value")) return tg_scatter_value(y, x, dim, idx, value);
    return tg_index_fill(y, x, dim, idx, value);
}

/* torch's bytes, in x's dtype, and not recorded. */
Test(int_index, every_case_matches_torch)
{
    tg_st_file *f = th_golden_load("int_index.safetensors");
    const int n = atoi(tg_st_meta_get(f, "cases"));
    int per_op[N_OPS] = {0}, per_dtype[TG_DTYPE_COUNT] = {0};
    for (int i = 0; i < n; i++) {
        char c[16], what[160];
        snprintf(c, sizeof c, "case%d", i);
        const char *op = th_golden_meta(f, c, "op"), *dt = th_golden_meta(f, c, "dtype");
        snprintf(what, sizeof what, "%s (%s %s)", c, op, dt);
        tg_tensor *y = NULL;
        const int rc = run_case(f, c, op, &y);
        cr_assert(rc == TG_OK, "%s: %s", what, tg_error_message());
        th_expect_same_tensor_bytes(what, y, th_golden_get(f, c, "y"));
        cr_assert(tg_tensor_requires_grad(y) == false, "%s is recorded", what);
        for (int k = 0; k < N_OPS; k++) per_op[k] += !strcmp(op, OPS[k]);
        per_dtype[tg_tensor_dtype(y)]++;
        tg_tensor_release(y);
    }
    for (int k = 0; k < N_OPS; k++) cr_assert(per_op[k] >= 12, "%s: %d cases", OPS[k], per_op[k]);
    const tg_dtype ints[] = {TG_I8, TG_U8, TG_I32, TG_I64};
    for (int k = 0; k < 4; k++)
        cr_assert(per_dtype[ints[k]] == n / 4, "%s: %d cases", tg_dtype_name(ints[k]),
                  per_dtype[ints[k]]);
    tg_st_free(f);
}

/* The wrapping and the floor division, spelled out (the goldens' rules). */
Test(int_index, sums_wrap_and_mean_floors)
{
    tg_tensor *x = th_vec(TG_I8, 2, (double[]){120, -7}, "x", false), *y = NULL;
    tg_tensor *i = th_vec(TG_I64, 3, (double[]){0, 0, 1}, "i", false);
    tg_tensor *s = th_vec(TG_I8, 3, (double[]){100, 100, -8}, "s", false);
    OK(tg_scatter_add(&y, x, 0, i, s));   /* 320 - 256 = 64; -15 */
    cr_assert(th_at(y, 0) == 64 && th_at(y, 1) == -15, "%g %g", th_at(y, 0), th_at(y, 1));
    tg_tensor_release(y);
    OK(tg_scatter_reduce(&y, x, 0, i, s, TG_SCATTER_MEAN, true));   /* 64 / 3; -15 / 2 */
    cr_assert(th_at(y, 0) == 21 && th_at(y, 1) == -8, "%g %g", th_at(y, 0), th_at(y, 1));
    tg_tensor_release(y);
    OK(tg_scatter_reduce(&y, x, 0, i, s, TG_SCATTER_AMIN, false));
    cr_assert(th_at(y, 0) == 100 && th_at(y, 1) == -8, "%g %g", th_at(y, 0), th_at(y, 1));
    th_release_all(4, (tg_tensor *[]){x, i, s, y});
}

/* An integer x cannot require grad, and a float x's gradient does not
 * flow through an integer src: the result of an integer op is a leaf
 * without a grad_fn, under grad mode too. */
Test(int_index, integer_results_are_not_recorded)
{
    tg_tensor *x = th_vec(TG_I64, 3, (double[]){1, 2, 3}, "x", false), *y = NULL;
    cr_assert(tg_tensor_set_requires_grad(x, true) == TG_EDTYPE);
    tg_tensor *i = th_vec(TG_I64, 2, (double[]){2, 2}, "i", false);
    OK(tg_index_add(&y, x, 0, i, i));
    cr_assert(tg_tensor_requires_grad(y) == false);
    cr_assert(tg_tensor_is_leaf(y));
    cr_assert(th_at(y, 2) == 7);
    th_release_all(3, (tg_tensor *[]){x, i, y});
}

/* src / values / source of another dtype than x: TG_EDTYPE naming both,
 * as torch refuses it (it does not promote). */
Test(int_index, other_src_dtype_is_refused)
{
    tg_tensor *x = th_vec(TG_I32, 3, (double[]){1, 2, 3}, "x", false);
    tg_tensor *i = th_vec(TG_I64, 2, (double[]){0, 2}, "i", false);
    tg_tensor *s64 = th_vec(TG_I64, 2, (double[]){5, 6}, "s", false);
    tg_tensor *sf = th_vec(TG_F32, 2, (double[]){5, 6}, "s", false);
    tg_tensor *m = th_vec(TG_U8, 3, (double[]){1, 0, 1}, "m", false);
    th_expect_refused_clean(tg_scatter_add(out_, x, 0, i, s64), TG_EDTYPE,
                            "scatter_add: src has dtype i64 but x has i32");
    th_expect_refused_clean(tg_index_add(out_, x, 0, i, sf), TG_EDTYPE,
                            "index_add: src has dtype f32 but x has i32");
    th_expect_refused_clean(tg_scatter(out_, x, 0, i, s64), TG_EDTYPE,
                            "scatter: src has dtype i64 but x has i32");
    th_expect_refused_clean(tg_scatter_reduce(out_, x, 0, i, s64, TG_SCATTER_PROD, true),
                            TG_EDTYPE, "scatter_reduce: src has dtype i64 but x has i32");
    th_expect_refused_clean(tg_index_copy(out_, x, 0, i, sf), TG_EDTYPE,
                            "index_copy: src has dtype f32 but x has i32");
    th_expect_refused_clean(tg_index_put(out_, x, 1, &i, s64, true), TG_EDTYPE,
                            "index_put: values has dtype i64 but x has i32");
    th_expect_refused_clean(tg_masked_scatter(out_, x, m, sf), TG_EDTYPE,
                            "masked_scatter: source has dtype f32 but x has i32");
    th_expect_refused_clean(tg_index_fill(out_, x, 0, i, 1e10), TG_EINVAL,
                            "10000000000 cannot be converted to i32");
    th_release_all(5, (tg_tensor *[]){x, i, s64, sf, m});
}

/* A strided integer x (a transpose) gives what its contiguous copy gives,
 * on the adds' block paths too (a u8 x, dim 0 of a transpose). */
Test(int_index, strided_x)
{
    uint64_t seed = 31;
    tg_tensor *b = th_rand_tensor(&seed, TG_U8, 2, (int64_t[]){5, 6}, 0, 255);
    tg_tensor *xt = NULL, *xc = NULL, *y1 = NULL, *y2 = NULL;
    OK(tg_transpose(&xt, b, 0, 1));
    OK(tg_tensor_contiguous(&xc, xt));
    tg_tensor *i = th_tensor_from(TG_I64, 2, (int64_t[]){3, 5},
                                  (double[]){0, 5, 5, 1, 2, 3, 3, 3, 4, 0, 1, 1, 2, 5, 5});
    tg_tensor *s = th_rand_tensor(&seed, TG_U8, 2, (int64_t[]){3, 5}, 0, 255);
    OK(tg_scatter_add(&y1, xt, 0, i, s));
    OK(tg_scatter_add(&y2, xc, 0, i, s));
    th_expect_same_tensor_bytes("scatter_add of a transposed u8 x", y1, y2);
    th_release_all(4, (tg_tensor *[]){y1, y2, NULL, NULL});
    y1 = y2 = NULL;
    OK(tg_gather(&y1, xt, 0, i));
    OK(tg_gather(&y2, xc, 0, i));
    th_expect_same_tensor_bytes("gather of a transposed u8 x", y1, y2);
    th_release_all(7, (tg_tensor *[]){b, xt, xc, i, s, y1, y2});
}
