/* tests/test_logsumexp.c - tg_logsumexp against PyTorch's torch.logsumexp
 * and its gradient (f32, f64, bf16; every dim, one, two with keepdim;
 * values whose exp overflows f32; rows of -inf, with +inf, with NaN), the
 * second derivative against torch's, gradcheck and gradgradcheck in f64,
 * empty rows, autocast and the refusals.
 * Goldens: scripts/make_logsumexp_goldens.py. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

/* y within rounding of torch's, dx within a few units of the last place
 * (NaN where torch's is NaN); the second derivative likewise in f64.
 * bf16: torch rounds x - y to bf16 before exp, as ours, so dx is held to
 * torch's and to the f64 values loosely. */
Test(logsumexp, every_case_matches_torch)
{
    tg_st_file *f = th_golden_load("logsumexp.safetensors");
    const int n = atoi(tg_st_meta_get(f, "cases"));
    int per_dtype[3] = {0}, second = 0;
    for (int i = 0; i < n; i++) {
        char c[16], what[96];
        snprintf(c, sizeof c, "case%d", i);
        const char *dt = th_golden_meta(f, c, "dtype");
        int dims[TG_MAX_DIMS];
        const int nd = th_dims_of(th_golden_meta(f, c, "dims"), dims);
        const bool keepdim = atoi(th_golden_meta(f, c, "keepdim")) != 0;
        snprintf(what, sizeof what, "%s (%s, %d dims, keepdim %d)", c, dt, nd, keepdim);
        tg_tensor *x = th_leaf_clone(th_golden_get(f, c, "x")), *y = NULL, *dx = NULL;
        OK(tg_logsumexp(&y, x, nd, dims, keepdim));
        const bool f64 = !strcmp(dt, "f64"), f32 = !strcmp(dt, "f32");
        th_expect_close(what, y, th_golden_get(f, c, "y"), f64 ? 1e-14 : f32 ? 1e-6 : 1.0 / 64);
        if (!f64 && !f32) th_expect_near(what, y, th_golden_get(f, c, "y64"), 1.0 / 128, 0);
        const tg_tensor *h = tg_st_get(f, (snprintf(what, sizeof what, "%s.h", c), what));
        tg_backward_opts o = {.create_graph = h != NULL};
        tg_tensor *g = (tg_tensor *)th_golden_get(f, c, "g");
        OK(tg_grad(&dx, 1, &y, &g, 1, &x, &o));
        snprintf(what, sizeof what, "%s dx (%s)", c, dt);
        if (f64 || f32)
            th_expect_near(what, dx, th_golden_get(f, c, "dx"), f64 ? 1e-12 : 1e-5,
                           f64 ? 1e-15 : 1e-7);
        else
            th_expect_near(what, dx, th_golden_get(f, c, "dx"), 1.0 / 4, 1.0 / 64);
        if (h) {
            th_backward_with(dx, h);
            snprintf(what, sizeof what, "%s ddx", c);
            th_expect_near(what, tg_tensor_grad(x), th_golden_get(f, c, "ddx"), 1e-11, 1e-13);
            second++;
        }
        per_dtype[f64 ? 0 : f32 ? 1 : 2]++;
        th_release_all(3, (tg_tensor *[]){x, y, dx});
    }
    for (int d = 0; d < 3; d++)
        cr_assert(per_dtype[d] >= 6, "dtype %d: %d cases", d, per_dtype[d]);
    cr_assert(second >= 2, "%d second-derivative cases", second);
    tg_st_free(f);
}

typedef struct lse_dims {
    int nd, dims[2];
    bool keepdim;
} lse_dims;

static int lse_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    const lse_dims *o = user;
    return tg_logsumexp(out, in[0], o->nd, o->dims, o->keepdim);
}

Test(logsumexp, gradcheck_and_gradgradcheck)
{
    const lse_dims cases[] = {{1, {1}, false}, {1, {0}, true}, {2, {0, 1}, false},
                              {0, {0}, false}, {1, {-1}, true}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        uint64_t s = 301 + i;
        tg_tensor *x = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){3, 4}, -3, 3);
        OK(tg_tensor_set_requires_grad(x, true));
        th_expect_gradchecks(lse_fn, (void *)&cases[i], 1, &x, "case %zu", i);
        tg_tensor_release(x);
    }
}

/* Large f32 values: shifted by the row's largest, the result is finite and
 * exact (torch gives 1e4 + log 2); an empty dim gives -inf, as torch. */
Test(logsumexp, large_f32_and_empty_rows)
{
    tg_tensor *x = th_vec(TG_F32, 2, (double[]){1e4, 1e4}, "x", false), *y = NULL;
    OK(tg_logsumexp(&y, x, 0, NULL, false));
    cr_assert(eq(dbl, th_at(y, 0), (double)(float)(1e4 + log(2.0))), "%g", th_at(y, 0));
    tg_tensor *e = NULL, *ye = NULL, *ya = NULL;
    OK(tg_tensor_zeros(&e, TG_F32, 2, (int64_t[]){0, 3}));
    OK(tg_logsumexp(&ye, e, 1, (int[]){0}, false));
    cr_assert(eq(i64, tg_tensor_numel(ye), 3));
    for (int k = 0; k < 3; k++) cr_assert(eq(dbl, th_at(ye, k), -INFINITY));
    OK(tg_logsumexp(&ya, e, 0, NULL, false));
    cr_assert(eq(dbl, th_at(ya, 0), -INFINITY));
    th_release_all(5, (tg_tensor *[]){x, y, e, ye, ya});
}

/* FP32 under autocast: a bf16 x gives an f32 result equal to the result
 * for x in f32, and x's gradient comes back in bf16; outside, bf16. */
static int logsumexp_dim1(tg_tensor **y, tg_tensor *x)
{
    return tg_logsumexp(y, x, 1, (int[]){1}, false);
}

Test(logsumexp, autocast_computes_in_f32)
{
    th_expect_fp32_autocast(logsumexp_dim1, 411);
}

Test(logsumexp, refusals_name_the_argument)
{
    tg_tensor *x = th_vec(TG_F32, 3, (double[]){1, 2, 3}, "x", false), *z = NULL, *xi = NULL;
    th_expect_refused(tg_logsumexp(&z, NULL, 0, NULL, false), TG_EINVAL, "logsumexp", z);
    th_expect_refused(tg_logsumexp(NULL, x, 0, NULL, false), TG_EINVAL, "out", NULL);
    th_expect_refused(tg_logsumexp(&z, x, 1, (int[]){1}, false), TG_EINVAL, "dims[0]", z);
    th_expect_refused(tg_logsumexp(&z, x, 2, (int[]){0, -1}, false), TG_EINVAL, "dims[1]", z);
    th_expect_refused(tg_logsumexp(&z, x, 1, NULL, false), TG_EINVAL, "dims", z);
    OK(tg_tensor_to_dtype(&xi, x, TG_I64));
    th_expect_refused(tg_logsumexp(&z, xi, 1, (int[]){1}, false), TG_EINVAL, "dims[0]", z);
    /* an integer x gives f32, as torch 1.13's (tests/test_int_arith.c) */
    OK(tg_logsumexp(&z, xi, 0, NULL, false));
    cr_assert(eq(int, tg_tensor_dtype(z), TG_F32));
    tg_tensor_release(z);
    th_release_all(2, (tg_tensor *[]){x, xi});
}
