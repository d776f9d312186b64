/* tests/test_index_more.c - tg_take_along_dim (with and without dim),
 * tg_index_fill, tg_index_copy, tg_index_put and tg_masked_scatter against
 * PyTorch's with their gradients (f32, f64, f16, bf16; broadcast indices,
 * masks and values, negative indices, accumulated repeats, index_put's
 * bool masks), gradcheck and gradgradcheck in f64, strided inputs and the
 * refusals.
 * Goldens: scripts/make_index_goldens.py. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

static const char *const OPS[] = {"take_along_dim", "take_along_dim_flat", "index_fill",
                                  "index_copy",     "index_put",           "masked_scatter"};

/* Runs case c of f on x (and src, a leaf clone, when the op has one). */
static int run_case(const tg_st_file *f, const char *c, const char *op, tg_tensor **y,
                    tg_tensor *x, tg_tensor *src)
{
    tg_tensor *idx = (tg_tensor *)th_golden_get(f, c, !strcmp(op, "index_put") ? "index0"
                                                        : !strcmp(op, "masked_scatter") ? "mask"
                                                                                        : "index");
    if (!strcmp(op, "take_along_dim_flat")) return tg_take_along_dim_flat(y, x, idx);
    if (!strcmp(op, "masked_scatter")) return tg_masked_scatter(y, x, idx, src);
    if (!strcmp(op, "index_put")) {
        const int n = atoi(th_golden_meta(f, c, "n"));
        tg_tensor *ix[4];
        for (int k = 0; k < n; k++) {
            char name[16];
            snprintf(name, sizeof name, "index%d", k);
            ix[k] = (tg_tensor *)th_golden_get(f, c, name);
        }
        return tg_index_put(y, x, n, ix, src, atoi(th_golden_meta(f, c, "accumulate")) != 0);
    }
    const int dim = atoi(th_golden_meta(f, c, "dim"));
    if (!strcmp(op, "take_along_dim")) return tg_take_along_dim(y, x, idx, dim);
    if (!strcmp(op, "index_fill"))
        return tg_index_fill(y, x, dim, idx, atof(th_golden_meta(f, c, "value")));
    return tg_index_copy(y, x, dim, idx, src);
}

/* Values bit for bit (f16 and bf16 accumulated index_put too: index_add's
 * steps are torch's), and gradients but for sums over broadcast dims,
 * within a rounding of the dtype. */
Test(index_more, every_case_matches_torch)
{
    tg_st_file *f = th_golden_load("index_more.safetensors");
    const int n = atoi(tg_st_meta_get(f, "cases"));
    int per_op[6] = {0};
    for (int i = 0; i < n; i++) {
        char c[16], what[128];
        snprintf(c, sizeof c, "case%d", i);
        const char *op = th_golden_meta(f, c, "op"), *dt = th_golden_meta(f, c, "dtype");
        const bool has_src = !strcmp(op, "index_copy") || !strcmp(op, "index_put") ||
                             !strcmp(op, "masked_scatter");
        tg_tensor *x = th_leaf_clone(th_golden_get(f, c, "x"));
        tg_tensor *src = has_src ? th_leaf_clone(th_golden_get(f, c, "src")) : NULL, *y = NULL;
        snprintf(what, sizeof what, "%s (%s %s)", c, op, dt);
        OK(run_case(f, c, op, &y, x, src));
        th_expect_close(what, y, th_golden_get(f, c, "y"), 0);
        tg_tensor *g = (tg_tensor *)th_golden_get(f, c, "g"), *d[2] = {NULL, NULL};
        OK(tg_grad(d, 1, &y, &g, has_src ? 2 : 1, (tg_tensor *[]){x, src}, NULL));
        /* a gradient summed over broadcast dims: expand's sum, in double
         * rounded once, against torch's sum in the dtype; the terms (g) are
         * about 1, their sum may cancel */
        const double ulp = !strcmp(dt, "f64") ? 1e-15 : !strcmp(dt, "f32") ? 1e-6
                           : !strcmp(dt, "f16") ? 1e-3 : 8e-3;
        const bool summed_x = !strncmp(op, "take_along_dim", 14) && strcmp(dt, "f64") != 0;
        char w2[160];
        snprintf(w2, sizeof w2, "dx of %s", what);
        if (summed_x) th_expect_near(w2, d[0], th_golden_get(f, c, "dx"), ulp, 8 * ulp);
        else th_expect_close(w2, d[0], th_golden_get(f, c, "dx"), 0);
        if (has_src) {
            snprintf(w2, sizeof w2, "dsrc of %s", what);
            if (!strcmp(op, "index_put"))
                th_expect_near(w2, d[1], th_golden_get(f, c, "dsrc"), ulp, 8 * ulp);
            else th_expect_close(w2, d[1], th_golden_get(f, c, "dsrc"), 0);
        }
        for (int k = 0; k < 6; k++) per_op[k] += !strcmp(op, OPS[k]);
        th_release_all(5, (tg_tensor *[]){x, src, y, d[0], d[1]});
    }
    for (int k = 0; k < 6; k++) cr_assert(per_op[k] >= 12, "%s: %d cases", OPS[k], per_op[k]);
    tg_st_free(f);
}

/* in[0] x (3, 4), in[1] the op's values; fixed indices. */
static int gc_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    const int k = *(const int *)user;
    tg_tensor *i1 = th_vec(TG_I64, 2, (double[]){2, -3}, "i", false);
    tg_tensor *i2 = th_tensor_from(TG_I64, 2, (int64_t[]){3, 2}, (double[]){0, 2, 1, 0, 1, 1});
    tg_tensor *r = th_tensor_from(TG_I64, 2, (int64_t[]){2, 1}, (double[]){1, 1});
    tg_tensor *cidx = th_vec(TG_I64, 2, (double[]){2, 0}, "c", false);
    tg_tensor *mask = th_tensor_from(TG_U8, 1, (int64_t[]){4}, (double[]){1, 0, 1, 1});
    int rc;
    switch (k) {
    case 0: rc = tg_take_along_dim(out, in[0], i2, 1); break;
    case 1: rc = tg_take_along_dim_flat(out, in[0], i2); break;
    case 2: rc = tg_index_fill(out, in[0], 1, i1, 0.5); break;
    case 3: rc = tg_index_copy(out, in[0], 0, cidx, in[1]); break;
    case 4: rc = tg_index_put(out, in[0], 2, (tg_tensor *[]){r, i1}, in[1], true); break;
    case 5: rc = tg_index_put(out, in[0], 1, (tg_tensor *[]){cidx}, in[1], false); break;
    default: rc = tg_masked_scatter(out, in[0], mask, in[1]); break;
    }
    th_release_all(5, (tg_tensor *[]){i1, i2, r, cidx, mask});
    return rc;
}

Test(index_more, gradcheck_and_gradgradcheck)
{
    /* the values' shapes: none, none, none, (2, 4), (1, 2) broadcast to
     * (2, 2), (1, 4) broadcast to (2, 4), 12 elements for 9 selected */
    const int64_t vs[7][2] = {{0, 0}, {0, 0}, {0, 0}, {2, 4}, {1, 2}, {1, 4}, {3, 4}};
    for (int k = 0; k < 7; k++) {
        uint64_t s = 900 + (uint64_t)k;
        const int n = k >= 3 ? 2 : 1;
        tg_tensor *in[2] = {th_rand_tensor(&s, TG_F64, 2, (int64_t[]){3, 4}, -2, 2), NULL};
        if (n > 1) in[1] = th_rand_tensor(&s, TG_F64, 2, vs[k], -2, 2);
        for (int j = 0; j < n; j++) OK(tg_tensor_set_requires_grad(in[j], true));
        th_expect_gradchecks(gc_fn, &k, n, in, "%s case %d", k < 2 ? "take" : "index", k);
        th_release_all(2, in);
    }
}

/* A transposed x gives what its contiguous copy gives. */
Test(index_more, strided_x)
{
    tg_tensor *b = th_seq(TG_F32, 2, (int64_t[]){4, 3}, -1, 1), *xt = NULL, *xc = NULL;
    OK(tg_transpose(&xt, b, 0, 1));
    OK(tg_tensor_contiguous(&xc, xt));
    tg_tensor *i = th_vec(TG_I64, 2, (double[]){3, 1}, "i", false);
    tg_tensor *v = th_seq(TG_F32, 1, (int64_t[]){2}, 5, 6);
    tg_tensor *m = th_tensor_from(TG_U8, 2, (int64_t[]){3, 1}, (double[]){0, 1, 1});
    tg_tensor *src = th_seq(TG_F32, 1, (int64_t[]){8}, 10, 17);
    for (int k = 0; k < 3; k++) {
        tg_tensor *y = NULL, *want = NULL;
        if (k == 0) {
            OK(tg_index_fill(&y, xt, 1, i, 9));
            OK(tg_index_fill(&want, xc, 1, i, 9));
        } else if (k == 1) {
            tg_tensor *r = th_vec(TG_I64, 2, (double[]){0, 2}, "r", false);
            OK(tg_index_put(&y, xt, 2, (tg_tensor *[]){r, i}, v, true));
            OK(tg_index_put(&want, xc, 2, (tg_tensor *[]){r, i}, v, true));
            tg_tensor_release(r);
        } else {
            OK(tg_masked_scatter(&y, xt, m, src));
            OK(tg_masked_scatter(&want, xc, m, src));
        }
        th_expect_close("strided", y, want, 0);
        th_release_all(2, (tg_tensor *[]){y, want});
    }
    th_release_all(7, (tg_tensor *[]){b, xt, xc, i, v, m, src});
}

Test(index_more, refusals)
{
    tg_tensor *x = th_seq(TG_F32, 2, (int64_t[]){2, 3}, 0, 1);
    tg_tensor *i2 = th_tensor_from(TG_I64, 2, (int64_t[]){1, 2}, (double[]){1, 0});
    tg_tensor *bad2 = th_tensor_from(TG_I64, 2, (int64_t[]){1, 2}, (double[]){1, 3});
    tg_tensor *i1 = th_vec(TG_I64, 2, (double[]){1, 0}, "i1", false);
    tg_tensor *neg = th_vec(TG_I64, 1, (double[]){-1}, "neg", false);
    tg_tensor *big = th_vec(TG_I64, 1, (double[]){-4}, "big", false);
    tg_tensor *i32 = th_vec(TG_I32, 1, (double[]){0}, "i32", false);
    tg_tensor *s23 = th_seq(TG_F32, 2, (int64_t[]){2, 2}, 0, 1);
    tg_tensor *s64 = th_seq(TG_F64, 2, (int64_t[]){2, 2}, 0, 1);
    tg_tensor *v3 = th_seq(TG_F32, 1, (int64_t[]){3}, 0, 1);
    tg_tensor *m = th_tensor_from(TG_U8, 1, (int64_t[]){3}, (double[]){1, 1, 1});
    tg_tensor *mf = th_seq(TG_F32, 1, (int64_t[]){3}, 0, 1);
    th_expect_refused_clean(tg_take_along_dim(out_, x, bad2, 1), TG_EINVAL,
                            "take_along_dim: index[0, 1]=3 is out of range for dim 1");
    th_expect_refused_clean(tg_take_along_dim(out_, x, i1, 1), TG_ESHAPE, "same number");
    th_expect_refused_clean(tg_take_along_dim(out_, x, i32, 0), TG_EDTYPE, "indices has dtype");
    th_expect_refused_clean(tg_take_along_dim(out_, x, i2, 2), TG_EINVAL, "dim=2");
    th_expect_refused_clean(tg_index_fill(out_, x, 1, big, 0), TG_EINVAL,
                            "index_fill: index[0]=-4 is out of range for dim 1 of extent 3");
    th_expect_refused_clean(tg_index_fill(out_, x, 1, i2, 0), TG_ESHAPE, "must be 1-d");
    th_expect_refused_clean(tg_index_copy(out_, x, 1, neg, s23), TG_EINVAL,
                            "index_copy: index[0]=-1 is out of range");
    th_expect_refused_clean(tg_index_copy(out_, x, 1, i1, v3), TG_ESHAPE,
                            "src has shape (3); it must be x's");
    th_expect_refused_clean(tg_index_copy(out_, x, 1, i1, s64), TG_EDTYPE, "src has dtype f64");
    th_expect_refused_clean(tg_index_put(out_, x, 1, (tg_tensor *[]){big}, v3, false),
                            TG_EINVAL, "indices[0] holds -4, out of range for dim 0");
    th_expect_refused_clean(tg_index_put(out_, x, 3, (tg_tensor *[]){i1, i1, i1}, v3, false),
                            TG_EINVAL, "3 index tensors for x with 2 dims");
    th_expect_refused_clean(tg_index_put(out_, x, 2, (tg_tensor *[]){i1, v3}, v3, false),
                            TG_EDTYPE, "indices[1] has dtype f32");
    th_expect_refused_clean(tg_index_put(out_, x, 2, (tg_tensor *[]){i1, neg}, v3, false),
                            TG_ESHAPE, "values must broadcast");
    th_expect_refused_clean(tg_index_put(out_, x, 1, (tg_tensor *[]){i1}, NULL, true),
                            TG_EINVAL, "values must not be NULL");
    th_expect_refused_clean(tg_index_put(out_, x, 1, (tg_tensor *[]){m}, v3, false), TG_ESHAPE,
                            "indices[0] is a mask whose size 3 at its dim 0 does not match");
    th_expect_refused_clean(tg_masked_scatter(out_, x, mf, v3), TG_EDTYPE, "mask has dtype");
    th_expect_refused_clean(tg_masked_scatter(out_, x, m, v3), TG_ESHAPE,
                            "mask selects 6 elements but source has only 3");
    th_expect_refused_clean(tg_masked_scatter(out_, x, i1, v3), TG_EDTYPE, "i64");
    cr_assert(eq(int, tg_index_put(NULL, x, 1, (tg_tensor *[]){i1}, v3, true), TG_EINVAL));
    th_release_all(12, (tg_tensor *[]){x, i2, bad2, i1, neg, big, i32, s23, s64, v3, m, mf});
}
