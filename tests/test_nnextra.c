/* tests/test_nnextra.c - torch.pdist, the torch.linalg *_ex functions,
 * Softmax2d and the upsampling modules, gumbel_softmax and
 * TripletMarginWithDistanceLoss, against PyTorch 1.13 where its numbers
 * are deterministic (goldens: scripts/make_nnextra_goldens.py) and by
 * invariants elsewhere (gradchecks in f64, sums, one-hot rows). */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

/* ---- pdist ---- */

Test(nnextra, pdist_matches_torch_values_and_gradients)
{
    tg_st_file *f = th_golden_load("nnextra_pdist.safetensors");
    const int n = atoi(tg_st_meta_get(f, "cases"));
    for (int i = 0; i < n; i++) {
        char c[16], what[64];
        snprintf(c, sizeof c, "case%d", i);
        const char *ps = th_golden_meta(f, c, "p");
        const double p = strcmp(ps, "inf") == 0 ? INFINITY : atof(ps);
        snprintf(what, sizeof what, "%s (p=%s)", c, ps);
        tg_tensor *x = th_leaf_clone(th_golden_get(f, c, "x"));
        tg_tensor *y = NULL, *dx = NULL;
        cr_assert(eq(int, tg_pdist(&y, x, p), TG_OK), "%s: %s", what, tg_error_message());
        th_expect_close(what, y, th_golden_get(f, c, "y"), 1e-12);
        if (tg_tensor_numel(y) > 0) {
            tg_tensor *g = (tg_tensor *)th_golden_get(f, c, "g");
            cr_assert(eq(int, tg_grad(&dx, 1, &y, &g, 1, &x, NULL), TG_OK), "%s: %s", what,
                      tg_error_message());
            th_expect_close(what, dx, th_golden_get(f, c, "dx"), 1e-10);
        }
        tg_tensor_release(dx);
        tg_tensor_release(y);
        tg_tensor_release(x);
    }
    cr_assert(n >= 40, "%d cases", n);
    tg_st_free(f);
}

static int pdist_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    return tg_pdist(out, in[0], *(const double *)user);
}

/* Distinct rows (no zero distance, no tie): first and second derivatives
 * by finite differences, for every kind of p. */
Test(nnextra, pdist_passes_gradchecks)
{
    const double ps[] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, INFINITY};
    for (size_t k = 0; k < sizeof ps / sizeof ps[0]; k++) {
        uint64_t s = 31 + k;
        tg_tensor *x = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){5, 3}, -1, 1);
        OK(tg_tensor_set_requires_grad(x, true));
        th_expect_gradchecks(pdist_fn, (void *)&ps[k], 1, &x, "pdist p=%g", ps[k]);
        tg_tensor_release(x);
    }
}

/* pdist(x)[k] is cdist(x, x)[i, j] for the k-th pair i < j. */
Test(nnextra, pdist_is_the_upper_triangle_of_cdist)
{
    uint64_t s = 77;
    tg_tensor *x = th_rand_tensor(&s, TG_F32, 2, (int64_t[]){6, 4}, -2, 2);
    tg_tensor *y = NULL, *c = NULL;
    OK(tg_pdist(&y, x, 3.0));
    OK(tg_cdist(&c, x, x, 3.0));
    cr_assert(eq(i64, tg_tensor_numel(y), 15));
    int64_t k = 0;
    for (int64_t i = 0; i < 6; i++)
        for (int64_t j = i + 1; j < 6; j++, k++)
            cr_assert(epsilon_eq(dbl, th_at(y, k), th_at(c, i * 6 + j), 1e-5), "pair %lld",
                      (long long)k);
    tg_tensor_release(y);
    tg_tensor_release(c);
    tg_tensor_release(x);
}

Test(nnextra, pdist_refuses_bad_arguments)
{
    uint64_t s = 5;
    tg_tensor *x3 = th_rand_tensor(&s, TG_F32, 3, (int64_t[]){2, 3, 4}, -1, 1);
    tg_tensor *x = th_rand_tensor(&s, TG_F32, 2, (int64_t[]){3, 4}, -1, 1);
    tg_tensor *xi = NULL, *y = NULL;
    OK(tg_tensor_zeros(&xi, TG_I64, 2, (int64_t[]){3, 4}));
    cr_assert(eq(int, tg_pdist(&y, x3, 2.0), TG_ESHAPE));
    cr_assert(strstr(tg_error_message(), "pdist: x has 3 dims") != NULL, "%s",
              tg_error_message());
    cr_assert(eq(int, tg_pdist(&y, x, -1.0), TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "p=-1 must be >= 0") != NULL, "%s",
              tg_error_message());
    cr_assert(eq(int, tg_pdist(&y, x, NAN), TG_EINVAL));
    cr_assert(eq(int, tg_pdist(&y, xi, 2.0), TG_EDTYPE));
    cr_assert(eq(int, tg_pdist(&y, NULL, 2.0), TG_EINVAL));
    cr_assert(y == NULL);
    tg_tensor_release(x3);
    tg_tensor_release(x);
    tg_tensor_release(xi);
}

/* ---- the torch.linalg _ex forms ---- */

/* Matrix b of a batch t (..., r, c) as a new tensor (r, c). */
static tg_tensor *matrix_of(tg_tensor *t, int64_t b)
{
    tg_tensor *m = NULL, *s = NULL;
    OK(tg_narrow(&m, t, 0, b, 1));
    const int nd = tg_tensor_ndim(t);
    const int64_t sh[2] = {tg_tensor_dim(t, nd - 2), tg_tensor_dim(t, nd - 1)};
    OK(tg_reshape(&s, m, 2, sh));
    tg_tensor_release(m);
    return s;
}

static void expect_matrix(const char *what, tg_tensor *batch, int64_t b, const tg_tensor *want,
                          double rtol)
{
    tg_tensor *m = matrix_of(batch, b);
    th_expect_close(what, m, want, rtol);
    tg_tensor_release(m);
}

/* A batch with a singular matrix (a zero row) and one that is not
 * positive-definite: info as torch's, the good matrices' results as torch's,
 * no error without check_errors. */
Test(nnextra, linalg_ex_match_torch_with_failing_matrices)
{
    tg_st_file *f = th_golden_load("nnextra_linalg_ex.safetensors");
    tg_tensor *A = (tg_tensor *)th_golden_get(f, "inv", "A");
    tg_tensor *B = (tg_tensor *)th_golden_get(f, "solve", "B");
    tg_tensor *S = (tg_tensor *)th_golden_get(f, "chol", "A");
    tg_tensor *y = NULL, *info = NULL, *piv = NULL;
    OK(tg_linalg_inv_ex(&y, &info, A, false));
    th_expect_same_tensor_bytes("inv_ex info", info, th_golden_get(f, "inv", "info"));
    expect_matrix("inv_ex 0", y, 0, th_golden_get(f, "inv", "Y0"), 1e-12);
    expect_matrix("inv_ex 2", y, 2, th_golden_get(f, "inv", "Y2"), 1e-12);
    th_release_all(2, (tg_tensor *[]){y, info});
    OK(tg_linalg_solve_ex(&y, &info, A, B, false));
    th_expect_same_tensor_bytes("solve_ex info", info, th_golden_get(f, "solve", "info"));
    expect_matrix("solve_ex 0", y, 0, th_golden_get(f, "solve", "X0"), 1e-12);
    expect_matrix("solve_ex 2", y, 2, th_golden_get(f, "solve", "X2"), 1e-12);
    th_release_all(2, (tg_tensor *[]){y, info});
    OK(tg_linalg_lu_factor_ex(&y, &piv, &info, A, false));
    th_expect_same_tensor_bytes("lu_factor_ex info", info, th_golden_get(f, "lu", "info"));
    th_expect_same_tensor_bytes("lu_factor_ex pivots", piv, th_golden_get(f, "lu", "pivots"));
    th_expect_close("lu_factor_ex LU", y, th_golden_get(f, "lu", "LU"), 1e-12);
    th_release_all(3, (tg_tensor *[]){y, piv, info});
    OK(tg_linalg_cholesky_ex(&y, &info, S, false, false));
    th_expect_same_tensor_bytes("cholesky_ex info", info, th_golden_get(f, "chol", "info"));
    expect_matrix("cholesky_ex 0", y, 0, th_golden_get(f, "chol", "L0"), 1e-12);
    expect_matrix("cholesky_ex 2", y, 2, th_golden_get(f, "chol", "L2"), 1e-12);
    th_release_all(2, (tg_tensor *[]){y, info});
    OK(tg_linalg_cholesky_ex(&y, NULL, S, true, false));
    expect_matrix("cholesky_ex upper 0", y, 0, th_golden_get(f, "chol", "U0"), 1e-12);
    tg_tensor_release(y);
    tg_st_free(f);
}

Test(nnextra, linalg_ex_check_errors_names_the_batch_element)
{
    tg_st_file *f = th_golden_load("nnextra_linalg_ex.safetensors");
    tg_tensor *A = (tg_tensor *)th_golden_get(f, "inv", "A");
    tg_tensor *B = (tg_tensor *)th_golden_get(f, "solve", "B");
    tg_tensor *S = (tg_tensor *)th_golden_get(f, "chol", "A");
    tg_tensor *y = NULL, *info = NULL, *piv = NULL;
    cr_assert(eq(int, tg_linalg_inv_ex(&y, &info, A, true), TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "linalg.inv_ex: (Batch element 1): The diagonal "
                     "element 2 is zero") != NULL, "%s", tg_error_message());
    cr_assert(eq(int, tg_linalg_solve_ex(&y, &info, A, B, true), TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "(Batch element 1): The solver failed") != NULL, "%s",
              tg_error_message());
    cr_assert(eq(int, tg_linalg_lu_factor_ex(&y, &piv, &info, A, true), TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "(Batch element 1): U[3,3] is zero") != NULL, "%s",
              tg_error_message());
    cr_assert(eq(int, tg_linalg_cholesky_ex(&y, &info, S, false, true), TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "(Batch element 1): The factorization could not be "
                     "completed because the input is not positive-definite (the leading minor "
                     "of order 3") != NULL, "%s", tg_error_message());
    cr_assert(y == NULL && info == NULL && piv == NULL);
    /* a good batch: no error with check_errors, info all 0 */
    tg_tensor *A0 = matrix_of(A, 0);
    OK(tg_linalg_inv_ex(&y, &info, A0, true));
    cr_assert(eq(int, tg_tensor_ndim(info), 0));
    cr_assert(eq(int, tg_tensor_dtype(info), TG_I32));
    cr_assert(th_at(info, 0) == 0);
    th_release_all(3, (tg_tensor *[]){y, info, A0});
    /* the plain function's rules stay: a matrix that is not square */
    tg_tensor *R = NULL;
    OK(tg_tensor_zeros(&R, TG_F64, 2, (int64_t[]){2, 3}));
    cr_assert(eq(int, tg_linalg_inv_ex(&y, &info, R, false), TG_ESHAPE));
    cr_assert(eq(int, tg_linalg_inv_ex(NULL, NULL, R, false), TG_EINVAL));
    cr_assert(eq(int, tg_linalg_inv_ex(&y, &y, A, false), TG_EINVAL));
    tg_tensor_release(R);
    tg_st_free(f);
}

static int inv_ex_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    (void)user;
    return tg_linalg_inv_ex(out, NULL, in[0], false);
}

static int solve_ex_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    (void)user;
    return tg_linalg_solve_ex(out, NULL, in[0], in[1], false);
}

static int lu_factor_ex_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    (void)user;
    return tg_linalg_lu_factor_ex(out, NULL, NULL, in[0], false);
}

/* cholesky_ex of the SPD x x^T + n I, upper or lower as *user. */
static int cholesky_ex_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    tg_tensor *xt = NULL, *s = NULL, *e = NULL, *a = NULL;
    int rc = tg_transpose(&xt, in[0], -1, -2);
    if (rc >= 0) rc = tg_matmul(&s, in[0], xt);
    if (rc >= 0) rc = tg_tensor_eye(&e, TG_F64, 3, 3);
    if (rc >= 0) rc = tg_add(&a, s, e);
    if (rc >= 0) rc = tg_linalg_cholesky_ex(out, NULL, a, *(const bool *)user, false);
    th_release_all(4, (tg_tensor *[]){xt, s, e, a});
    return rc;
}

/* The results differentiate as the plain functions' (to second order). */
Test(nnextra, linalg_ex_pass_gradchecks)
{
    uint64_t s = 91;
    tg_tensor *A = th_rand_tensor(&s, TG_F64, 3, (int64_t[]){2, 3, 3}, -1, 1);
    tg_tensor *B = th_rand_tensor(&s, TG_F64, 3, (int64_t[]){2, 3, 2}, -1, 1);
    tg_tensor *e = NULL, *Ad = NULL;
    OK(tg_tensor_eye(&e, TG_F64, 3, 3));
    OK(tg_add(&Ad, A, e));   /* well conditioned */
    OK(tg_tensor_set_requires_grad(Ad, true));
    OK(tg_tensor_set_requires_grad(B, true));
    th_expect_gradchecks(inv_ex_fn, NULL, 1, &Ad, "inv_ex");
    th_expect_gradchecks(solve_ex_fn, NULL, 2, (tg_tensor *[]){Ad, B}, "solve_ex");
    th_expect_gradchecks(lu_factor_ex_fn, NULL, 1, &Ad, "lu_factor_ex");
    for (int up = 0; up < 2; up++) {
        const bool upper = up == 1;
        th_expect_gradchecks(cholesky_ex_fn, (void *)&upper, 1, &Ad, "cholesky_ex upper=%d", up);
    }
    th_release_all(4, (tg_tensor *[]){A, B, e, Ad});
}

/* ---- Softmax2d, UpsamplingNearest2d, UpsamplingBilinear2d ---- */

static void expect_module(tg_module *m, const tg_st_file *f, const char *c, double rtol)
{
    tg_tensor *y = NULL;
    OK(tg_module_forward(m, &y, (tg_tensor *)th_golden_get(f, c, "x")));
    th_expect_close(c, y, th_golden_get(f, c, "y"), rtol);
    tg_tensor_release(y);
}

Test(nnextra, softmax2d_and_upsampling_modules_match_torch)
{
    tg_st_file *f = th_golden_load("nnextra_modules.safetensors");
    tg_module *sm = NULL, *up = NULL, *bl = NULL;
    OK(tg_nn_softmax2d_new(&sm));
    cr_assert(strcmp(tg_module_type_name(sm), "Softmax2d") == 0);
    expect_module(sm, f, "softmax2d", 1e-14);
    expect_module(sm, f, "softmax2d3", 1e-14);
    OK(tg_nn_upsampling_nearest2d_new(&up, (int64_t[]){2, 3}));
    expect_module(up, f, "nearest", 0);
    OK(tg_nn_upsampling_bilinear2d_new(&bl, (int64_t[]){2, 3}));
    expect_module(bl, f, "bilinear", 1e-14);
    tg_tensor *x = th_leaf_clone(th_golden_get(f, "bilinear", "x")), *y = NULL, *dx = NULL;
    tg_tensor *g = (tg_tensor *)th_golden_get(f, "bilinear", "g");
    OK(tg_module_forward(bl, &y, x));
    OK(tg_grad(&dx, 1, &y, &g, 1, &x, NULL));
    th_expect_close("bilinear dx", dx, th_golden_get(f, "bilinear", "dx"), 1e-13);
    th_release_all(3, (tg_tensor *[]){x, y, dx});
    /* Softmax2d refuses a 2-d or 5-d input, in torch's words */
    uint64_t s = 3;
    tg_tensor *x2 = th_rand_tensor(&s, TG_F32, 2, (int64_t[]){3, 4}, -1, 1);
    cr_assert(eq(int, tg_module_forward(sm, &y, x2), TG_ESHAPE));
    cr_assert(strstr(tg_error_message(), "Softmax2d: expected input to be 3D or 4D, got 2D")
              != NULL, "%s", tg_error_message());
    int dim = 0;
    OK(tg_nn_act_dim(sm, &dim));
    cr_assert(eq(int, dim, -3));
    cr_assert(eq(int, tg_nn_upsampling_bilinear2d_new(NULL, (int64_t[]){2, 2}), TG_EINVAL));
    tg_module *bad = NULL;
    cr_assert(eq(int, tg_nn_upsampling_nearest2d_new(&bad, (int64_t[]){0, 2}), TG_EINVAL));
    cr_assert(bad == NULL);
    tg_tensor_release(x2);
    tg_module_release(sm);
    tg_module_release(up);
    tg_module_release(bl);
    tg_st_free(f);
}

/* Softmax2d exports as ONNX's Softmax; the upsampling modules as
 * Upsample's Resize (nearest; linear with align_corners). */
Test(nnextra, softmax2d_and_upsampling_export_to_onnx)
{
    uint64_t s = 11;
    tg_tensor *x = th_rand_tensor(&s, TG_F32, 4, (int64_t[]){1, 3, 4, 5}, -1, 1);
    tg_module *ms[3] = {NULL};
    OK(tg_nn_softmax2d_new(&ms[0]));
    OK(tg_nn_upsampling_nearest2d_new(&ms[1], (int64_t[]){2, 2}));
    OK(tg_nn_upsampling_bilinear2d_new(&ms[2], (int64_t[]){2, 3}));
    /* op_type "Softmax" as the NodeProto's field 4 (tag 0x22, length 7);
     * Resize's mode and coordinate_transformation_mode strings */
    const char *want[3] = {"\x22\x07Softmax", "nearest", "align_corners"};
    for (int i = 0; i < 3; i++) {
        char path[256];
        th_tmp_path(path, sizeof path, "nnextra_export.onnx");
        OK(tg_onnx_export(ms[i], x, path, NULL));
        size_t n = 0;
        char *bytes = th_read_file(path, &n);
        bool found = false;
        for (size_t k = 0; k + strlen(want[i]) <= n && !found; k++)
            found = memcmp(bytes + k, want[i], strlen(want[i])) == 0;
        cr_assert(found, "module %d: no %s in the model", i, want[i]);
        free(bytes);
        remove(path);
        tg_module_release(ms[i]);
    }
    tg_tensor_release(x);
}

/* ---- gumbel_softmax ---- */

/* Rows of (4, 6) along dim 1 (or (6, 4) along dim 0): soft ones sum to 1
 * and are positive, hard ones are one-hot at the soft one's argmax. */
Test(nnextra, gumbel_softmax_rows_sum_to_one_and_hard_is_one_hot)
{
    uint64_t s = 17;
    tg_tensor *logits = th_rand_tensor(&s, TG_F32, 2, (int64_t[]){4, 6}, -2, 2);
    for (int dim = -1; dim <= 0; dim++) {
        const int64_t rows = dim == 0 ? 6 : 4, cols = dim == 0 ? 4 : 6;
        tg_rng r1, r2;
        tg_rng_init(&r1, 5);
        tg_rng_init(&r2, 5);
        tg_tensor *soft = NULL, *hard = NULL;
        OK(tg_gumbel_softmax(&soft, logits, 0.5, false, dim, &r1));
        OK(tg_gumbel_softmax(&hard, logits, 0.5, true, dim, &r2));
        for (int64_t r = 0; r < rows; r++) {
            double sum = 0, best = -1, ones = 0, hsum = 0;
            int64_t arg = -1, hot = -1;
            for (int64_t c = 0; c < cols; c++) {
                const int64_t k = dim == 0 ? c * 6 + r : r * 6 + c;
                const double v = th_at(soft, k), h = th_at(hard, k);
                cr_assert(v > 0 && v < 1, "soft[%lld]=%g", (long long)k, v);
                sum += v;
                hsum += h;
                if (v > best) best = v, arg = c;
                if (h == 1.0) ones++, hot = c;
            }
            cr_assert(epsilon_eq(dbl, sum, 1.0, 1e-5), "dim %d row %lld sums to %g", dim,
                      (long long)r, sum);
            cr_assert(ones == 1 && hsum == 1.0 && hot == arg, "dim %d row %lld: %g ones at "
                      "%lld, argmax %lld", dim, (long long)r, ones, (long long)hot,
                      (long long)arg);
        }
        th_release_all(2, (tg_tensor *[]){soft, hard});
    }
    tg_tensor_release(logits);
}

/* The same seed gives the same draws; the counter advances, so a second
 * call differs. */
Test(nnextra, gumbel_softmax_is_reproducible_from_the_seed)
{
    uint64_t s = 23;
    tg_tensor *logits = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){3, 5}, -1, 1);
    tg_rng r1, r2;
    tg_rng_init(&r1, 99);
    tg_rng_init(&r2, 99);
    tg_tensor *a = NULL, *b = NULL, *c = NULL;
    OK(tg_gumbel_softmax(&a, logits, 1.0, false, -1, &r1));
    OK(tg_gumbel_softmax(&b, logits, 1.0, false, -1, &r2));
    th_expect_same_tensor_bytes("same seed", a, b);
    OK(tg_gumbel_softmax(&c, logits, 1.0, false, -1, &r1));
    cr_assert(th_first_difference(a, c) >= 0, "a second draw repeats the first");
    th_release_all(4, (tg_tensor *[]){a, b, c, logits});
}

/* hard's gradient is soft's (straight through), for the same draws; and
 * soft's is softmax's of (logits + g) / tau: gradchecks in f64 with the
 * generator reset at each call (the noise is then a constant). */
typedef struct gumbel_args {
    bool hard;
    double tau;
} gumbel_args;

static int gumbel_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    const gumbel_args *a = user;
    tg_rng r;
    tg_rng_init(&r, 7);
    return tg_gumbel_softmax(out, in[0], a->tau, a->hard, 1, &r);
}

Test(nnextra, gumbel_softmax_hard_gradient_is_the_soft_one)
{
    uint64_t s = 29;
    tg_tensor *x = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){3, 4}, -1, 1);
    OK(tg_tensor_set_requires_grad(x, true));
    tg_tensor *g = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){3, 4}, 0, 1);
    tg_tensor *y[2] = {NULL}, *d[2] = {NULL};
    for (int h = 0; h < 2; h++) {
        gumbel_args a = {.hard = h == 1, .tau = 0.7};
        OK(gumbel_fn(&y[h], 1, &x, &a));
        OK(tg_grad(&d[h], 1, &y[h], &g, 1, &x, NULL));
    }
    th_expect_close("hard vs soft gradient", d[1], d[0], 1e-15);
    gumbel_args soft = {.hard = false, .tau = 0.7};
    th_expect_gradchecks(gumbel_fn, &soft, 1, &x, "gumbel_softmax soft");
    th_release_all(2, y);
    th_release_all(2, d);
    th_release_all(2, (tg_tensor *[]){x, g});
}

Test(nnextra, gumbel_softmax_refuses_bad_arguments)
{
    uint64_t s = 31;
    tg_tensor *x = th_rand_tensor(&s, TG_F32, 2, (int64_t[]){2, 3}, -1, 1), *y = NULL;
    tg_rng r;
    tg_rng_init(&r, 1);
    cr_assert(eq(int, tg_gumbel_softmax(&y, x, 0.0, false, -1, &r), TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "gumbel_softmax: tau=0") != NULL, "%s",
              tg_error_message());
    cr_assert(eq(int, tg_gumbel_softmax(&y, x, 1.0, false, 2, &r), TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "dim=2 must be in [-2, 2)") != NULL, "%s",
              tg_error_message());
    cr_assert(eq(int, tg_gumbel_softmax(&y, x, 1.0, false, -1, NULL), TG_EINVAL));
    cr_assert(y == NULL);
    tg_tensor_release(x);
}

/* ---- TripletMarginWithDistanceLoss ---- */

static int l1_distance(tg_tensor **out, tg_tensor *x1, tg_tensor *x2, void *user)
{
    (void)user;
    return tg_pairwise_distance(out, x1, x2, 1.0, 1e-6, false);
}

Test(nnextra, triplet_margin_with_distance_loss_matches_torch)
{
    tg_st_file *f = th_golden_load("nnextra_triplet.safetensors");
    const char *reds[3] = {"mean", "sum", "none"};
    int cases = 0;
    for (int d = 0; d < 2; d++)
        for (int swap = 0; swap < 2; swap++)
            for (int r = 0; r < 3; r++) {
                char c[48], key[64];
                snprintf(c, sizeof c, "%s.%d.%s", d ? "l1" : "default", swap, reds[r]);
                tg_module *m = NULL;
                OK(tg_nn_triplet_margin_with_distance_loss_new(&m, d ? l1_distance : NULL, NULL,
                                                               0.7, swap == 1,
                                                               th_reduction_of(reds[r])));
                tg_tensor *in[3], *y = NULL, *sum = NULL, *gr[3] = {NULL};
                const char *names[3] = {"a", "p", "n"};
                for (int k = 0; k < 3; k++)
                    in[k] = th_leaf_clone(tg_st_get(f, names[k]));
                OK(tg_module_forward_n(m, &y, 3, in));
                snprintf(key, sizeof key, "%s.y", c);
                th_expect_close(c, y, tg_st_get(f, key), 1e-13);
                OK(tg_sum(&sum, y));
                OK(tg_grad(gr, 1, &sum, NULL, 3, in, NULL));
                for (int k = 0; k < 3; k++) {
                    snprintf(key, sizeof key, "%s.d%s", c, names[k]);
                    th_expect_close(key, gr[k], tg_st_get(f, key), 1e-12);
                }
                th_release_all(3, in);
                th_release_all(3, gr);
                th_release_all(2, (tg_tensor *[]){y, sum});
                tg_module_release(m);
                cases++;
            }
    cr_assert(eq(int, cases, 12));
    tg_st_free(f);
}

static int failing_distance(tg_tensor **out, tg_tensor *x1, tg_tensor *x2, void *user)
{
    (void)out;
    (void)x1;
    (void)x2;
    (*(int *)user)++;
    return TG_EUNSUPPORTED;
}

Test(nnextra, triplet_margin_with_distance_loss_rules)
{
    uint64_t s = 41;
    tg_tensor *a = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){3, 4}, -1, 1);
    tg_tensor *b = th_rand_tensor(&s, TG_F64, 1, (int64_t[]){4}, -1, 1), *y = NULL;
    tg_module *m = NULL;
    cr_assert(eq(int, tg_nn_triplet_margin_with_distance_loss_new(&m, NULL, NULL, 0.0, false,
                                                                  TG_REDUCTION_MEAN),
                 TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "margin=0 must be > 0") != NULL, "%s",
              tg_error_message());
    cr_assert(eq(int, tg_triplet_margin_with_distance_loss(&y, a, a, b, NULL, NULL, 1.0, false,
                                                           TG_REDUCTION_MEAN),
                 TG_ESHAPE));
    int calls = 0;
    cr_assert(eq(int, tg_triplet_margin_with_distance_loss(&y, a, a, a, failing_distance, &calls,
                                                           1.0, true, TG_REDUCTION_SUM),
                 TG_EUNSUPPORTED));
    cr_assert(eq(int, calls, 1));
    cr_assert(y == NULL);
    OK(tg_nn_triplet_margin_with_distance_loss_new(&m, NULL, NULL, 2.0, true, TG_REDUCTION_SUM));
    tg_nn_loss_opts o;
    OK(tg_nn_loss_options(m, &o));
    cr_assert(o.margin == 2.0 && o.swap && o.reduction == TG_REDUCTION_SUM);
    cr_assert(strcmp(tg_module_type_name(m), "TripletMarginWithDistanceLoss") == 0);
    tg_module_release(m);
    th_release_all(2, (tg_tensor *[]){a, b});
}
