/* tests/test_pointwise.c - softplus, clamp, where, one_hot and embedding:
 * values and gradients against PyTorch 1.13 (tests/golden/pointwise.safetensors,
 * scripts/make_pointwise_goldens.py), gradcheck and gradgradcheck in f64, the
 * nn.Embedding module, and the errors that name the argument. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

/* y = op(x) and d sum(y * w) / dx against the golden file's y and g. */
typedef int (*unary_fn)(tg_tensor **out, tg_tensor *x, const double *p);

static void expect_unary(tg_st_file *f, const char *xn, const char *wn, const char *yn,
                         const char *gn, unary_fn fn, const double *p)
{
    tg_tensor *x0 = tg_st_get(f, xn), *w = tg_st_get(f, wn), *x, *y;
    OK(tg_tensor_clone(&x, x0));
    OK(tg_tensor_set_requires_grad(x, true));
    OK(fn(&y, x, p));
    th_expect_near(yn, y, tg_st_get(f, yn), 1e-12, 1e-12);
    OK(tg_backward(y, w, NULL));
    th_expect_near(gn, tg_tensor_grad(x), tg_st_get(f, gn), 1e-12, 1e-12);
    tg_tensor_release(y);
    tg_tensor_release(x);
}

static int softplus_p(tg_tensor **out, tg_tensor *x, const double *p)
{
    return tg_softplus(out, x, p[0], p[1]);
}

static int clamp_p(tg_tensor **out, tg_tensor *x, const double *p)
{
    return tg_clamp(out, x, p[0], p[1]);
}

Test(pointwise, softplus_and_clamp_match_pytorch)
{
    tg_st_file *f = th_golden_load("pointwise.safetensors");
    expect_unary(f, "softplus.x", "softplus.w", "softplus.y1", "softplus.g1", softplus_p,
                 (double[]){1, 20});
    expect_unary(f, "softplus.x", "softplus.w", "softplus.y2", "softplus.g2", softplus_p,
                 (double[]){2, 5});
    expect_unary(f, "clamp.x", "clamp.w", "clamp.y", "clamp.g", clamp_p,
                 (double[]){-0.5, 0.75});
    expect_unary(f, "clamp.x", "clamp.w", "clamp.ymin", "clamp.gmin", clamp_p,
                 (double[]){-0.5, NAN});
    tg_st_free(f);
}

Test(pointwise, where_matches_pytorch_with_broadcasting)
{
    tg_st_file *f = th_golden_load("pointwise.safetensors");
    tg_tensor *a, *b, *y;
    OK(tg_tensor_clone(&a, tg_st_get(f, "where.a")));
    OK(tg_tensor_clone(&b, tg_st_get(f, "where.b")));
    OK(tg_tensor_set_requires_grad(a, true));
    OK(tg_tensor_set_requires_grad(b, true));
    OK(tg_where(&y, tg_st_get(f, "where.cond"), a, b));
    th_expect_near("where.y", y, tg_st_get(f, "where.y"), 1e-12, 1e-12);
    OK(tg_backward(y, tg_st_get(f, "where.w"), NULL));
    th_expect_near("where.ga", tg_tensor_grad(a), tg_st_get(f, "where.ga"), 1e-12, 1e-12);
    th_expect_near("where.gb", tg_tensor_grad(b), tg_st_get(f, "where.gb"), 1e-12, 1e-12);
    th_release_all(3, (tg_tensor *[]){y, a, b});
    tg_st_free(f);
}

Test(pointwise, one_hot_and_embedding_match_pytorch)
{
    tg_st_file *f = th_golden_load("pointwise.safetensors");
    tg_tensor *oh, *w, *y;
    OK(tg_one_hot(&oh, tg_st_get(f, "one_hot.labels"), 5, TG_I64));
    cr_assert(eq(int, tg_tensor_dtype(oh), TG_I64));
    th_expect_near("one_hot.y", oh, tg_st_get(f, "one_hot.y"), 1e-12, 1e-12);
    OK(tg_tensor_clone(&w, tg_st_get(f, "emb.weight")));
    OK(tg_tensor_set_requires_grad(w, true));
    OK(tg_embedding(&y, w, tg_st_get(f, "emb.idx")));
    th_expect_near("emb.y", y, tg_st_get(f, "emb.y"), 1e-12, 1e-12);
    OK(tg_backward(y, tg_st_get(f, "emb.w"), NULL));
    th_expect_near("emb.gw", tg_tensor_grad(w), tg_st_get(f, "emb.gw"), 1e-12, 1e-12);
    th_release_all(3, (tg_tensor *[]){oh, y, w});
    tg_st_free(f);
}

/* ---- gradcheck and gradgradcheck in f64 ---- */

static int g_softplus(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return tg_softplus(out, in[0], 1.5, 2.0);
}

static int g_clamp(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    tg_tensor *t;
    TG_TRY(tg_clamp(&t, in[0], -0.4, 0.3));
    int rc = tg_mul(out, t, t);   /* nonlinear, so gradgradcheck sees something */
    tg_tensor_release(t);
    return rc;
}

static int g_where(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    tg_tensor *p;
    TG_TRY(tg_mul(&p, in[0], in[1]));
    int rc = tg_where(out, user, p, in[1]);
    tg_tensor_release(p);
    return rc;
}

static int g_embedding(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    tg_tensor *e;
    TG_TRY(tg_embedding(&e, in[0], user));
    int rc = tg_mul(out, e, e);
    tg_tensor_release(e);
    return rc;
}

static tg_tensor *rand_leaf(int ndim, const int64_t *shape, uint64_t seed)
{
    tg_tensor *t = th_rand_uniform(TG_F64, ndim, shape, seed);
    OK(tg_tensor_set_requires_grad(t, true));
    return t;
}

Test(pointwise, gradients_pass_gradcheck_and_gradgradcheck_in_f64)
{
    /* values away from the kinks (clamp's bounds, softplus's threshold) */
    tg_tensor *x = rand_leaf(2, (int64_t[]){3, 4}, 5);
    OK(tg_gradcheck(g_softplus, NULL, 1, &x, NULL));
    OK(tg_gradgradcheck(g_softplus, NULL, 1, &x, NULL));
    OK(tg_gradcheck(g_clamp, NULL, 1, &x, NULL));
    OK(tg_gradgradcheck(g_clamp, NULL, 1, &x, NULL));
    tg_tensor *ab[2] = {rand_leaf(2, (int64_t[]){3, 1}, 6), rand_leaf(1, (int64_t[]){4}, 7)};
    tg_tensor *cond = th_tensor_from(TG_U8, 2, (int64_t[]){1, 4}, (double[]){1, 0, 0, 1});
    OK(tg_gradcheck(g_where, cond, 2, ab, NULL));
    OK(tg_gradgradcheck(g_where, cond, 2, ab, NULL));
    tg_tensor *w = rand_leaf(2, (int64_t[]){5, 3}, 8);
    tg_tensor *idx = th_tensor_from(TG_I32, 1, (int64_t[]){4}, (double[]){4, 0, 4, 2});
    OK(tg_gradcheck(g_embedding, idx, 1, &w, NULL));
    OK(tg_gradgradcheck(g_embedding, idx, 1, &w, NULL));
    th_release_all(7, (tg_tensor *[]){x, ab[0], ab[1], cond, w, idx, NULL});
}

Test(pointwise, embedding_module_picks_rows_of_its_weight)
{
    tg_module *m;
    tg_rng rng;
    tg_rng_init(&rng, 2);
    OK(tg_nn_embedding_new(&m, 6, 3, &rng));
    cr_assert(strcmp(tg_module_type_name(m), "Embedding") == 0);
    tg_tensor *w = tg_module_find(m, "weight"), *idx, *y;
    cr_assert(w != NULL && tg_tensor_requires_grad(w));
    idx = th_tensor_from(TG_I64, 2, (int64_t[]){2, 2}, (double[]){5, 0, 1, 5});
    OK(tg_module_forward(m, &y, idx));
    th_expect_shape(y, 3, (int64_t[]){2, 2, 3});
    for (int j = 0; j < 3; j++) {
        cr_assert(eq(dbl, th_at(y, j), th_at(w, 5 * 3 + j)));
        cr_assert(eq(dbl, th_at(y, 9 + j), th_at(w, 5 * 3 + j)));
    }
    th_release_all(2, (tg_tensor *[]){y, idx});
    tg_module_release(m);
}

Test(pointwise, bad_arguments_name_the_rule)
{
    tg_tensor *x = th_rand_uniform(TG_F32, 1, (int64_t[]){4}, 1), *y = NULL;
    tg_tensor *lab = th_tensor_from(TG_I64, 1, (int64_t[]){3}, (double[]){0, 3, 1});
    cr_assert(eq(int, tg_softplus(&y, x, 0.0, 20), TG_EINVAL));
    th_expect_in(tg_error_message(), "softplus: beta=0 must be finite and > 0");
    cr_assert(eq(int, tg_one_hot(&y, lab, 3, TG_F32), TG_EINVAL));
    th_expect_in(tg_error_message(), "one_hot: labels[1]=3 must be in [0, 3)");
    cr_assert(eq(int, tg_one_hot(&y, x, 3, TG_F32), TG_EDTYPE));
    th_expect_in(tg_error_message(), "one_hot: labels have dtype f32");
    tg_tensor *w = th_rand_uniform(TG_F32, 2, (int64_t[]){3, 2}, 2);
    cr_assert(eq(int, tg_embedding(&y, w, lab), TG_EINVAL));
    th_expect_in(tg_error_message(), "embedding: indices[1]=3 must be in [0, 3)");
    cr_assert(eq(int, tg_embedding(&y, x, lab), TG_ESHAPE));
    cr_assert(eq(int, tg_embedding(&y, w, x), TG_EDTYPE));
    tg_tensor *i8 = th_arange(TG_I8, 1, (int64_t[]){3}), *u8 = th_arange(TG_U8, 1, (int64_t[]){3});
    cr_assert(eq(int, tg_where(&y, lab, i8, u8), TG_EDTYPE));   /* int16 in torch */
    cr_assert(y == NULL, "an error left a result");
    th_release_all(5, (tg_tensor *[]){x, lab, w, i8, u8});
}

Test(pointwise, clamp_keeps_nan_and_takes_absent_bounds)
{
    tg_tensor *x = th_tensor_from(TG_F32, 1, (int64_t[]){4}, (double[]){-3, NAN, 0.5, 9}), *y;
    OK(tg_clamp(&y, x, NAN, 1.0));
    cr_assert(eq(dbl, th_at(y, 0), -3.0));
    cr_assert(isnan(th_at(y, 1)));
    cr_assert(eq(dbl, th_at(y, 3), 1.0));
    tg_tensor_release(y);
    tg_tensor_release(x);
}

/* where copies a's or b's elements (in blocks, on the pool past 32768
 * elements), reading an input in place when it is contiguous in the
 * result's shape or of one element, else from a contiguous copy (a
 * transposed b here).  Both must give the same bits, and each element must
 * be a's where cond is nonzero (NaN too, -0.0 not), else b's, for every
 * cond dtype and every dtype of a and b (elements of 1, 2, 4 and 8 bytes). */
Test(pointwise, where_direct_and_general_paths_agree)
{
    const tg_dtype conds[] = {TG_U8, TG_I8, TG_I32, TG_I64, TG_F32, TG_F64, TG_F16, TG_BF16};
    const int64_t shape[2] = {193, 257}, tshape[2] = {257, 193}, n = 193 * 257;
    for (size_t ci = 0; ci < sizeof conds / sizeof *conds; ci++)
        for (int fi = 0; fi < TG_DTYPE_COUNT; fi++) {
            const tg_dtype dt = (tg_dtype)fi;
            const bool fl = tg_dtype_is_float(dt);
            const double lo = fl ? -4 : 0, hi = fl ? 4 : 100, zero = fl ? -0.0 : 0.0;
            char what[64];
            snprintf(what, sizeof what, "cond %s, a/b %s", tg_dtype_name(conds[ci]),
                     tg_dtype_name(dt));
            uint64_t s = 17 + ci * 8 + (uint64_t)fi;
            double *cv = malloc((size_t)n * sizeof *cv);
            for (int64_t k = 0; k < n; k++) cv[k] = k % 3 == 0 ? 0.0 : (double)(k % 5);
            if (tg_dtype_is_float(conds[ci])) cv[3] = -0.0, cv[5] = NAN, cv[6] = -0.0;
            tg_tensor *c = th_tensor_from(conds[ci], 2, shape, cv);
            tg_tensor *a = th_rand_tensor(&s, dt, 2, shape, lo, hi);
            tg_tensor *b0 = NULL, *bt = NULL, *bv = NULL, *bc = NULL, *y = NULL, *w = NULL;
            tg_tensor *ys = NULL;
            OK(tg_tensor_scalar(&b0, dt, zero));
            bt = th_rand_tensor(&s, dt, 2, tshape, lo, hi);
            OK(tg_transpose(&bv, bt, 0, 1));   /* non-contiguous: read from a copy */
            OK(tg_contiguous(&bc, bv));
            cr_assert(not(tg_tensor_is_contiguous(bv)), "%s", what);
            OK(tg_where(&y, c, a, bc));
            OK(tg_where(&w, c, a, bv));
            th_expect_same_bits(what, a, y, w);
            for (int64_t k = 0; k < n; k++) {
                const double want = cv[k] != 0 || isnan(cv[k]) ? th_at(a, k) : th_at(bc, k);
                cr_assert(eq(dbl, th_at(y, k), want), "%s: element %ld", what, (long)k);
            }
            OK(tg_where(&ys, c, a, b0));   /* a 0-d b */
            for (int64_t k = 0; k < n; k += 7) {
                const double want = cv[k] != 0 || isnan(cv[k]) ? th_at(a, k) : zero;
                const double got = th_at(ys, k);
                cr_assert(got == want && signbit(got) == signbit(want), "%s: %ld", what,
                          (long)k);
            }
            th_release_all(9, (tg_tensor *[]){c, a, b0, bt, bv, bc, y, w, ys});
            free(cv);
        }
}
