/* tests/test_stats.c - the reductions beyond sums: max and min over a dim
 * with their indices, argmax and argmin, amax and amin, max and min of the
 * whole tensor, var and std.  Values, indices and gradients against
 * PyTorch 1.13 (tests/golden/reduce.safetensors,
 * scripts/make_reduce_goldens.py) with ties, NaN, infinities, integer and
 * half inputs; gradcheck and gradgradcheck in f64; exact integer results
 * past 2^53; strided and empty inputs; scopes; and the errors that name
 * the argument (var and std's own cases: test_stats_var.c). */
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

static tg_tensor *golden(const tg_st_file *f, const char *fmt, const char *a)
{
    char key[160];
    snprintf(key, sizeof key, fmt, a);
    tg_tensor *t = tg_st_get(f, key);
    cr_assert(t != NULL, "golden key %s missing", key);
    return t;
}

/* The call of one golden entry: fn on x with dims (n of them), keepdim and
 * (var, std) correction. */
static int run_call(const char *fn, tg_tensor *x, int n, const int *dims, bool keepdim,
                    int64_t correction, tg_tensor **y, tg_tensor **i)
{
    if (!strcmp(fn, "var_dims")) return tg_var_dims(y, x, n, dims, correction, keepdim);
    if (!strcmp(fn, "std_dims")) return tg_std_dims(y, x, n, dims, correction, keepdim);
    if (!strcmp(fn, "var")) return tg_var(y, x, correction);
    if (!strcmp(fn, "std")) return tg_std(y, x, correction);
    if (!strcmp(fn, "max_dim")) return tg_max_dim(y, i, x, dims[0], keepdim);
    if (!strcmp(fn, "min_dim")) return tg_min_dim(y, i, x, dims[0], keepdim);
    if (!strcmp(fn, "argmax_dim")) return tg_argmax_dim(y, x, dims[0], keepdim);
    if (!strcmp(fn, "argmin_dim")) return tg_argmin_dim(y, x, dims[0], keepdim);
    if (!strcmp(fn, "amax")) return tg_amax_dims(y, x, n, dims, keepdim);
    if (!strcmp(fn, "amin")) return tg_amin_dims(y, x, n, dims, keepdim);
    if (!strcmp(fn, "max")) return tg_max(y, x);
    if (!strcmp(fn, "min")) return tg_min(y, x);
    if (!strcmp(fn, "argmax")) return tg_argmax(y, x);
    if (!strcmp(fn, "argmin")) return tg_argmin(y, x);
    cr_assert(0, "unknown fn %s", fn);
    return TG_EINVAL;
}

/* How close to torch fn's results must be in dtype dt, relative to the
 * largest value.  max, min and their indices are elements of x, and their
 * gradients g / count one division rounded once: all equal torch's
 * exactly, half types included.  var and std are computed in double and
 * rounded once, where torch accumulates in double too but in another order;
 * their gradients take a mean rounded to dt.  Measured: f64 2.7e-16
 * (values and gradients), f32 and f16 equal, bf16 values equal and
 * gradients 3e-3 (one ulp of bf16 is 3.9e-3 relative). */
static double tol_of(const char *fn, tg_dtype dt)
{
    if (strncmp(fn, "var", 3) && strncmp(fn, "std", 3)) return 0;
    return dt == TG_F64 ? 1e-15 : dt == TG_F32 ? 1.2e-7 : dt == TG_BF16 ? 7.8e-3 : 9.8e-4;
}

Test(stats, values_indices_and_gradients_match_pytorch)
{
    tg_st_file *f = th_golden_load("reduce.safetensors");
    const char *calls = tg_st_meta_get(f, "calls");
    cr_assert(calls != NULL);
    char *list = strdup(calls);
    int k = 0, graded = 0;
    for (char *save, *c = strtok_r(list, "|", &save); c; c = strtok_r(NULL, "|", &save), k++) {
        char name[64], fn[32], dimstr[64], *fields[5], *at = c;
        for (int j = 0; j < 5; j++) {   /* "case;fn;dims;keepdim;correction" */
            fields[j] = at;
            char *end = strchr(at, ';');
            cr_assert(j == 4 || end != NULL, "call %d: %s", k, c);
            if (j < 4) {
                *end = '\0';
                at = end + 1;
            }
        }
        snprintf(name, sizeof name, "%s", fields[0]);
        snprintf(fn, sizeof fn, "%s", fields[1]);
        snprintf(dimstr, sizeof dimstr, "%s", fields[2]);
        const int keep = atoi(fields[3]);
        const int64_t corr = atoll(fields[4]);
        int dims[8], nd = 0;
        for (char *s3, *d = strtok_r(dimstr, ",", &s3); d; d = strtok_r(NULL, ",", &s3))
            dims[nd++] = atoi(d);
        tg_tensor *x0 = golden(f, "%s.x", name), *x = NULL, *y = NULL, *i = NULL;
        OK(tg_tensor_clone(&x, x0));
        char key[32], what[160];
        snprintf(key, sizeof key, "c%d.w", k);
        tg_tensor *w = tg_st_get(f, key);
        if (w) OK(tg_tensor_set_requires_grad(x, true));
        const bool with_i = !strcmp(fn, "max_dim") || !strcmp(fn, "min_dim");
        OK(run_call(fn, x, nd, dims, keep, corr, &y, with_i ? &i : NULL));
        const double tol = tol_of(fn, tg_tensor_dtype(x));
        snprintf(key, sizeof key, "c%d.y", k);
        snprintf(what, sizeof what, "%s %s dims %s keepdim %d correction %lld: y", name, fn,
                 fields[2], keep, (long long)corr);
        th_expect_close(what, y, golden(f, "%s", key), tol);
        if (with_i) {
            snprintf(key, sizeof key, "c%d.i", k);
            snprintf(what, sizeof what, "%s %s dims %s: indices", name, fn, fields[2]);
            th_expect_close(what, i, golden(f, "%s", key), 0);
        }
        if (w) {
            OK(tg_backward(y, w, NULL));
            snprintf(key, sizeof key, "c%d.gx", k);
            snprintf(what, sizeof what, "%s %s dims %s keepdim %d correction %lld: gx", name,
                     fn, fields[2], keep, (long long)corr);
            th_expect_close(what, tg_tensor_grad(x), golden(f, "%s", key), tol);
            graded++;
        } else if (!tg_dtype_is_float(tg_tensor_dtype(y))) {
            cr_assert(tg_tensor_requires_grad(y) == false, "%s %s: an integer result requires grad",
                      name, fn);
        }
        th_release_all(3, (tg_tensor *[]){x, y, i});
    }
    free(list);
    cr_assert(k >= 450 && graded >= 200, "only %d calls, %d with gradients", k, graded);
    tg_st_free(f);
}

/* A transposed (strided) x gives the results of its contiguous copy. */
Test(stats, strided_input_matches_contiguous)
{
    tg_tensor *x = th_rand_uniform(TG_F32, 3, (int64_t[]){4, 3, 5}, 3), *xt, *xc;
    OK(tg_permute(&xt, x, (int[]){2, 0, 1}));
    OK(tg_contiguous(&xc, xt));
    for (int d = 0; d < 3; d++) {
        tg_tensor *v[2], *ix[2];
        OK(tg_max_dim(&v[0], &ix[0], xt, d, false));
        OK(tg_max_dim(&v[1], &ix[1], xc, d, false));
        th_expect_same_bits("max_dim values", xc, v[0], v[1]);
        th_expect_same_bits("max_dim indices", xc, ix[0], ix[1]);
        th_release_all(4, (tg_tensor *[]){v[0], v[1], ix[0], ix[1]});
        OK(tg_amin_dims(&v[0], xt, 2, (int[]){d, (d + 1) % 3}, true));
        OK(tg_amin_dims(&v[1], xc, 2, (int[]){d, (d + 1) % 3}, true));
        th_expect_same_bits("amin", xc, v[0], v[1]);
        th_release_all(2, (tg_tensor *[]){v[0], v[1]});
    }
    th_release_all(3, (tg_tensor *[]){x, xt, xc});
}

/* One sweep of the test below under the kernel in use: the cases run. */
static int one_pass_sweep(void)
{
    int cases = 0;
    static const double pool[] = {-INFINITY, -1.0, -0.0, 0.0, 1.0, INFINITY, 2.0, -2.0};
    const int64_t shapes[][4] = {{2, 37, 3, 5}, {1, 300, 1, 1}, {3, 4, 5, 260}, {2, 1, 19, 1}};
    const int runs[][2] = {{1, 1}, {1, 2}, {2, 2}, {0, 3}, {3, 3}, {0, 1}};
    uint64_t s = 41;
    const tg_dtype dts[] = {TG_F64, TG_F32, TG_F16, TG_BF16};   /* halves: widened */
    for (int dt = 0; dt < 4; dt++)
        for (size_t a = 0; a < sizeof shapes / sizeof *shapes; a++)
            for (int nan = 0; nan < 2; nan++) {
                const int64_t *sh = shapes[a];
                const int64_t numel = sh[0] * sh[1] * sh[2] * sh[3];
                tg_tensor *z = th_rand_tensor(&s, TG_F64, 5,
                                              (int64_t[]){sh[0], sh[1], sh[2], sh[3], 2}, 0, 1);
                double *zd = tg_tensor_data(z);
                for (int64_t e = 0; e < numel; e++) {
                    const int64_t v = th_rand_int(&s, 0, 39);
                    zd[2 * e] = nan && v == 39 ? NAN : pool[v % 8];
                }
                tg_tensor *zz = NULL, *view = NULL, *ref = NULL, *x = NULL;
                OK(tg_to_dtype(&zz, z, dts[dt]));
                OK(tg_narrow(&view, zz, 4, 0, 1));
                OK(tg_squeeze(&ref, view, 4));   /* strided: rows of f64 */
                OK(tg_contiguous(&x, ref));     /* one pass */
                for (size_t r = 0; r < sizeof runs / sizeof *runs; r++)
                    for (int f = 0; f < 6; f++) {
                        const int d0 = runs[r][0], nd = runs[r][1] - d0 + 1;
                        const int dims[4] = {d0, d0 + 1, d0 + 2, d0 + 3};
                        tg_tensor *y[2] = {NULL, NULL};
                        for (int t = 0; t < 2; t++) {
                            tg_tensor *src = t ? ref : x;
                            if (f == 0) OK(tg_amax_dims(&y[t], src, nd, dims, r % 2));
                            if (f == 1) OK(tg_amin_dims(&y[t], src, nd, dims, false));
                            if (f == 2) OK(tg_max(&y[t], src));
                            if (f == 3) OK(tg_min(&y[t], src));
                            if (f == 4) OK(tg_argmin_dim(&y[t], src, d0, true));
                            if (f == 5)   /* not a run: rows of f64 for both */
                                OK(tg_amax_dims(&y[t], src, 2, (int[]){0, 2}, false));
                        }
                        th_expect_same_bits("one pass", x, y[0], y[1]);
                        th_release_all(2, y);
                        cases++;
                    }
                th_release_all(5, (tg_tensor *[]){z, zz, view, ref, x});
            }
    return cases;
}

/* A float x (f64, f32, f16, bf16) in contiguous memory reduced over one
 * run of dims takes one pass over x (amax, amin, max, min, argmin) in each kernel, forced
 * with TG_FIRST_KERNEL; a strided view of the same values takes rows of
 * f64: the same bits (which of -0.0 and 0.0, NaN), on rows longer than the
 * lanes and blocks of columns wider than one, with ties, infinities and
 * NaNs (in some tensors) or none. */
Test(stats, one_pass_reductions_match_the_rows_path)
{
    int kernels = 0, cases = 0;
    for (int k = TG__FIRST_KERNEL_PORTABLE; k <= TG__FIRST_KERNEL_AVX512; k++) {
        if (!th_force_first_kernel(k)) continue;
        cases += one_pass_sweep();
        kernels++;
    }
    unsetenv("TG_FIRST_KERNEL");
    cr_assert(eq(int, cases, kernels * 4 * 4 * 2 * 6 * 6));
}

/* Rows whose largest (or smallest) element is a zero or a NaN: amax and
 * amin give the first one's bits, -0.0 or 0.0, and the payload of the first
 * NaN, in each kernel, where a pass over values alone, lane by lane, would
 * meet a later one first (index 70 is in an earlier lane than index 10). */
Test(stats, extreme_zeros_and_nans_are_the_first_ones)
{
    enum { N = 100 };
    const uint32_t nan_a = 0x7fc00001u, nan_b = 0x7fc00002u;
    for (int k = TG__FIRST_KERNEL_PORTABLE; k <= TG__FIRST_KERNEL_AVX512; k++) {
        if (!th_force_first_kernel(k)) continue;
        const char *name = tg__first_kernel_name((tg__first_kernel_id)k);
        for (int c = 0; c < 3; c++) {   /* max is -0.0 first, 0.0 first, NaN a first */
            float v[N];
            for (int i = 0; i < N; i++) v[i] = -1.0f - (float)(i % 7);
            if (c < 2) {
                v[10] = c == 0 ? -0.0f : 0.0f;
                v[70] = c == 0 ? 0.0f : -0.0f;
            } else {
                memcpy(&v[10], &nan_a, 4);
                memcpy(&v[70], &nan_b, 4);
            }
            for (int mn = 0; mn < 2; mn++) {
                if (mn) /* min: the same rows negated, zeros and NaNs kept */
                    for (int i = 0; i < N; i++)
                        if (i != 10 && i != 70) v[i] = -v[i];
                tg_tensor *x = NULL, *y = NULL;
                OK(tg_tensor_from_data(&x, TG_F32, 2, (int64_t[]){1, N}, v));
                OK(mn ? tg_amin_dims(&y, x, 1, (int[]){1}, false)
                      : tg_amax_dims(&y, x, 1, (int[]){1}, false));
                cr_assert(memcmp(tg_tensor_cdata(y), &v[10], 4) == 0,
                          "%s case %d min %d: not the first extreme's bits", name, c, mn);
                th_release_all(2, (tg_tensor *[]){x, y});
            }
        }
    }
    unsetenv("TG_FIRST_KERNEL");
}

/* i64 values past 2^53 that double would merge: compared exactly. */
Test(stats, integers_are_compared_exactly)
{
    const int64_t big = (int64_t)1 << 60;
    const int64_t v[4] = {big + 1, big + 3, big + 2, -big};
    tg_tensor *x = NULL, *y = NULL, *i = NULL;
    OK(tg_tensor_from_data(&x, TG_I64, 1, (int64_t[]){4}, v));
    OK(tg_max_dim(&y, &i, x, 0, false));
    cr_assert(eq(int, tg_tensor_dtype(y), TG_I64));
    cr_assert(eq(i64, ((const int64_t *)tg_tensor_cdata(y))[0], big + 3));
    cr_assert(eq(i64, ((const int64_t *)tg_tensor_cdata(i))[0], 1));
    th_release_all(2, (tg_tensor *[]){y, i});
    OK(tg_amin_dims(&y, x, 1, (int[]){0}, false));
    cr_assert(eq(i64, ((const int64_t *)tg_tensor_cdata(y))[0], -big));
    tg_tensor_release(y);
    OK(tg_argmax(&y, x));
    cr_assert(eq(i64, ((const int64_t *)tg_tensor_cdata(y))[0], 1));
    th_release_all(2, (tg_tensor *[]){y, x});
}

typedef struct {
    int which;   /* 0 max_dim, 1 min_dim, 2 amax, 3 amin, 4 max, 5 min */
    int dim;
    bool keepdim;
} mm_user;

/* The reduction of x * x (so that the second derivative is not 0 in x),
 * times x's first element: nonlinear beyond the op. */
static int g_minmax(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    const mm_user *u = user;
    tg_tensor *sq = NULL, *y = NULL;
    TG_TRY(tg_mul(&sq, in[0], in[0]));
    int dims[2] = {u->dim, 0};
    int rc;
    switch (u->which) {
    case 0: rc = tg_max_dim(&y, NULL, sq, u->dim, u->keepdim); break;
    case 1: rc = tg_min_dim(&y, NULL, sq, u->dim, u->keepdim); break;
    case 2: rc = tg_amax_dims(&y, sq, u->dim == 0 ? 1 : 2, dims, u->keepdim); break;
    case 3: rc = tg_amin_dims(&y, sq, 1, dims, u->keepdim); break;
    case 4: rc = tg_max(&y, sq); break;
    default: rc = tg_min(&y, sq); break;
    }
    if (rc >= 0) rc = tg_mul(out, y, y);
    th_release_all(2, (tg_tensor *[]){sq, y});
    return rc;
}

Test(stats, gradcheck_and_gradgradcheck_in_f64)
{
    /* distinct values: no ties, where the numeric derivative would jump */
    tg_tensor *x = th_seq(TG_F64, 3, (int64_t[]){3, 4, 2}, 0.2, 2.0);
    OK(tg_tensor_set_requires_grad(x, true));
    const mm_user us[] = {{0, 1, false}, {0, -1, true}, {1, 0, false}, {2, 0, false},
                          {2, 2, true}, {3, 1, false}, {4, 0, false}, {5, 0, false}};
    for (size_t k = 0; k < sizeof us / sizeof us[0]; k++) {
        mm_user u = us[k];
        cr_assert(eq(int, tg_gradcheck(g_minmax, &u, 1, &x, NULL), TG_OK), "case %zu: %s", k,
                  tg_error_message());
        cr_assert(eq(int, tg_gradgradcheck(g_minmax, &u, 1, &x, NULL), TG_OK), "case %zu: %s",
                  k, tg_error_message());
    }
    tg_tensor_release(x);
}

/* Ties: max_dim's gradient goes to the first (its index), amax's is split
 * evenly; NaN: max(x) splits among the NaNs, amax gives NaN throughout. */
Test(stats, tie_and_nan_gradients)
{
    const double v[6] = {3, 1, 3, 2, 3, 0};
    tg_tensor *x = th_tensor_from(TG_F64, 1, (int64_t[]){6}, v), *y = NULL;
    OK(tg_tensor_set_requires_grad(x, true));
    OK(tg_max_dim(&y, NULL, x, 0, false));
    OK(tg_backward(y, NULL, NULL));
    for (int k = 0; k < 6; k++)
        cr_assert(eq(dbl, th_at(tg_tensor_grad(x), k), k == 0 ? 1.0 : 0.0), "max_dim [%d]", k);
    tg_tensor_release(y);
    tg_tensor_zero_grad(x);
    OK(tg_amax_dims(&y, x, 1, (int[]){0}, false));
    OK(tg_backward(y, NULL, NULL));
    for (int k = 0; k < 6; k++)
        cr_assert(eq(dbl, th_at(tg_tensor_grad(x), k), v[k] == 3 ? 1.0 / 3 : 0.0), "amax [%d]",
                  k);
    th_release_all(2, (tg_tensor *[]){y, x});
    const double vn[4] = {1, NAN, 2, NAN};
    x = th_tensor_from(TG_F64, 1, (int64_t[]){4}, vn);
    OK(tg_tensor_set_requires_grad(x, true));
    OK(tg_max(&y, x));
    cr_assert(isnan(th_at(y, 0)));
    OK(tg_backward(y, NULL, NULL));
    for (int k = 0; k < 4; k++)
        cr_assert(eq(dbl, th_at(tg_tensor_grad(x), k), isnan(vn[k]) ? 0.5 : 0.0), "max [%d]", k);
    tg_tensor_release(y);
    tg_tensor_zero_grad(x);
    OK(tg_amax_dims(&y, x, 1, (int[]){0}, false));
    OK(tg_backward(y, NULL, NULL));
    for (int k = 0; k < 4; k++) cr_assert(isnan(th_at(tg_tensor_grad(x), k)), "amax [%d]", k);
    th_release_all(2, (tg_tensor *[]){y, x});
}

/* Shapes: keepdim, 0-d inputs, empty inputs (a reduced dim of extent 0 is
 * TG_ESHAPE, another empty dim gives an empty result), indices optional. */
Test(stats, shapes_zero_d_and_empty)
{
    tg_tensor *x = th_rand_uniform(TG_F32, 3, (int64_t[]){2, 3, 4}, 5), *y = NULL, *i = NULL;
    OK(tg_max_dim(&y, &i, x, -2, true));
    th_expect_shape(y, 3, (int64_t[]){2, 1, 4});
    th_expect_shape(i, 3, (int64_t[]){2, 1, 4});
    cr_assert(eq(int, tg_tensor_dtype(i), TG_I64));
    th_release_all(2, (tg_tensor *[]){y, i});
    OK(tg_min_dim(&y, NULL, x, 1, false));
    th_expect_shape(y, 2, (int64_t[]){2, 4});
    tg_tensor_release(y);
    OK(tg_amax_dims(&y, x, 0, NULL, false));   /* no dim reduced: x's values */
    th_expect_same_bits("amax over no dims", x, y, x);
    tg_tensor_release(y);
    OK(tg_argmax(&y, x));
    cr_assert(eq(int, tg_tensor_ndim(y), 0));
    tg_tensor_release(y);
    tg_tensor_release(x);

    OK(tg_tensor_scalar(&x, TG_F64, -1.5));
    OK(tg_max_dim(&y, &i, x, -1, false));
    cr_assert(eq(int, tg_tensor_ndim(y), 0));
    cr_assert(eq(dbl, th_at(y, 0), -1.5));
    cr_assert(eq(dbl, th_at(i, 0), 0.0));
    th_release_all(3, (tg_tensor *[]){x, y, i});

    OK(tg_tensor_zeros(&x, TG_F32, 2, (int64_t[]){0, 3}));
    OK(tg_max_dim(&y, &i, x, 1, false));
    th_expect_shape(y, 1, (int64_t[]){0});
    th_expect_shape(i, 1, (int64_t[]){0});
    th_release_all(2, (tg_tensor *[]){y, i});
    y = i = NULL;
    cr_assert(eq(int, tg_max_dim(&y, &i, x, 0, false), TG_ESHAPE));
    th_expect_in(tg_error_message(), "max_dim: dim 0 has extent 0");
    cr_assert(y == NULL && i == NULL, "an error left a result");
    cr_assert(eq(int, tg_amin_dims(&y, x, 2, (int[]){1, 0}, false), TG_ESHAPE));
    th_expect_in(tg_error_message(), "amin: dim 0 has extent 0");
    cr_assert(eq(int, tg_argmin(&y, x), TG_ESHAPE));
    th_expect_in(tg_error_message(), "argmin: x is empty");
    cr_assert(eq(int, tg_max(&y, x), TG_ESHAPE));
    cr_assert(y == NULL);
    tg_tensor_release(x);
}

/* Inside a scope both results of max_dim belong to it, and nothing else
 * the call made. */
Test(stats, scope_owns_both_results)
{
    tg_tensor *x = th_rand_uniform(TG_F32, 2, (int64_t[]){3, 4}, 8), *y, *i;
    OK(tg_tensor_set_requires_grad(x, true));
    OK(tg_scope_begin());
    OK(tg_max_dim(&y, &i, x, 1, false));
    cr_assert(eq(int, tg_scope_size(), 2));
    OK(tg_min_dim(&y, NULL, x, 0, true));
    cr_assert(eq(int, tg_scope_size(), 3));
    OK(tg_scope_end());
    tg_tensor_release(x);
}

Test(stats, bad_arguments_name_the_rule)
{
    tg_tensor *x = th_rand_uniform(TG_F32, 2, (int64_t[]){2, 3}, 1), *y = NULL, *i = NULL;
    cr_assert(eq(int, tg_max_dim(&y, &i, x, 2, false), TG_EINVAL));
    th_expect_in(tg_error_message(), "max_dim: dim=2 must be in [-2, 2) for a 2-d tensor");
    cr_assert(eq(int, tg_min_dim(NULL, &i, x, 0, false), TG_EINVAL));
    th_expect_in(tg_error_message(), "min_dim: values must not be NULL");
    cr_assert(eq(int, tg_max_dim(&y, &y, x, 0, false), TG_EINVAL));
    th_expect_in(tg_error_message(), "max_dim: values and indices must be two different places");
    cr_assert(eq(int, tg_min_dim(&y, &i, NULL, 0, false), TG_EINVAL));
    th_expect_in(tg_error_message(), "min_dim: x must not be NULL");
    cr_assert(eq(int, tg_argmax_dim(&y, x, -3, false), TG_EINVAL));
    th_expect_in(tg_error_message(), "argmax: dim=-3 must be in [-2, 2)");
    cr_assert(eq(int, tg_amax_dims(&y, x, 2, (int[]){1, -1}, false), TG_EINVAL));
    th_expect_in(tg_error_message(), "amax: dims[1]=-1 names dim 1 again");
    cr_assert(eq(int, tg_amin_dims(&y, x, 1, NULL, false), TG_EINVAL));
    th_expect_in(tg_error_message(), "amin: dims must not be NULL");
    cr_assert(eq(int, tg_amax_dims(&y, x, 9, (int[9]){0}, false), TG_EINVAL));
    th_expect_in(tg_error_message(), "amax: ndims=9 must be in [0, 8]");
    cr_assert(eq(int, tg_max(NULL, x), TG_EINVAL));
    cr_assert(y == NULL && i == NULL, "an error left a result");
    tg_tensor_release(x);
}

/* The ops behind max_dim, called by name with indices that do not fit,
 * refuse them. */
Test(stats, pick_ops_check_their_indices)
{
    const tg_op_schema *pick = NULL, *back = NULL;
    OK(tg_op_find(&pick, "pick_along_dim"));
    OK(tg_op_find(&back, "pick_along_dim_backward"));
    tg_tensor *x = th_rand_uniform(TG_F32, 2, (int64_t[]){2, 3}, 1), *y = NULL;
    tg_tensor *good = th_tensor_from(TG_I64, 2, (int64_t[]){2, 1}, (double[]){2, 0});
    tg_tensor *bad = th_tensor_from(TG_I64, 2, (int64_t[]){2, 1}, (double[]){1, 3});
    tg_tensor *wrong = th_tensor_from(TG_I64, 2, (int64_t[]){1, 3}, (double[]){0, 0, 0});
    tg_tensor *f32i = th_tensor_from(TG_F32, 2, (int64_t[]){2, 1}, (double[]){0, 0});
    /* argmax.c's pick_params: dim, keepdim, and x's shape for the backward */
    struct { int dim; bool keepdim; int ndim; int64_t shape[TG_MAX_DIMS]; } p = {1, true, 2, {2, 3}};
    OK(tg_op_call(pick, &y, 2, (tg_tensor *[]){x, good}, &p, sizeof p));
    cr_assert(eq(dbl, th_at(y, 0), th_at(x, 2)));
    cr_assert(eq(dbl, th_at(y, 1), th_at(x, 3)));
    tg_tensor_release(y);
    y = NULL;
    cr_assert(eq(int, tg_op_call(pick, &y, 2, (tg_tensor *[]){x, bad}, &p, sizeof p), TG_EINVAL));
    th_expect_in(tg_error_message(), "pick_along_dim: indices[1]=3 must be in [0, 3)");
    cr_assert(eq(int, tg_op_call(pick, &y, 2, (tg_tensor *[]){x, wrong}, &p, sizeof p),
                 TG_ESHAPE));
    th_expect_in(tg_error_message(), "pick_along_dim: indices is (1, 3), must be (2, 1)");
    cr_assert(eq(int, tg_op_call(pick, &y, 2, (tg_tensor *[]){x, f32i}, &p, sizeof p),
                 TG_EDTYPE));
    cr_assert(eq(int, tg_op_call(pick, &y, 2, (tg_tensor *[]){x, NULL}, &p, sizeof p),
                 TG_EINVAL));
    cr_assert(eq(int, tg_op_call(back, &y, 2, (tg_tensor *[]){x, good}, &p, sizeof p),
                 TG_ESHAPE));
    th_expect_in(tg_error_message(), "pick_along_dim_backward: g is (2, 3), must be (2, 1)");
    cr_assert(y == NULL);
    th_release_all(5, (tg_tensor *[]){x, good, bad, wrong, f32i});
}
