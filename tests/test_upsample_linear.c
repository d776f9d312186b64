/* tests/test_upsample_linear.c - tg_upsample_linear and the linear Upsample
 * module against PyTorch's F.interpolate and nn.Upsample (linear, bilinear,
 * trilinear; align_corners on and off; larger, smaller and equal extents;
 * f64, f32, bf16), values worked by hand, the gradient's gradient as the
 * forward, the module and the refusals.  The invariants shared with the
 * pooling ops (derivatives by finite differences, adjoint, unbatched, half
 * dtypes, threads, empty batches): test_pool_invariants.c.
 * Goldens: scripts/make_upsample_linear_goldens.py. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

/* One call: over how many spatial dims, to what size, with which corners;
 * through the module (scale factors) when scale[0] > 0. */
typedef struct call {
    int ns;
    int64_t size[3];
    bool align;
    int64_t scale[3];
} call;

static int run(const call *c, tg_tensor **y, tg_tensor *x)
{
    if (c->scale[0] == 0) return tg_upsample_linear(y, x, c->ns, c->size, c->align);
    tg_module *m = NULL;
    int rc = tg_nn_upsample_linear_new(&m, c->ns, c->scale, c->align);
    if (rc == TG_OK) rc = tg_module_forward(m, y, x);
    tg_module_release(m);
    return rc;
}

static call call_of(const tg_st_file *f, const char *c)
{
    call r = {.ns = atoi(th_golden_meta(f, c, "ns")),
              .align = atoi(th_golden_meta(f, c, "align_corners")) != 0};
    th_ints_of(th_golden_meta(f, c, "size"), r.size);
    char key[64];
    snprintf(key, sizeof key, "%s.scale", c);   /* made through the module */
    const char *scale = tg_st_meta_get(f, key);
    if (scale) th_ints_of(scale, r.scale);
    return r;
}

/* f64 and f32 within a few roundings of the largest value (the weights are
 * torch's, computed in the same dtype; the gradient's terms are added in
 * another order); bf16 within bf16's rounding (torch rounds its weights
 * and every partial sum to bf16, tapegrad computes in f32, rounding
 * once). */
static double tol_of(tg_dtype dt)
{
    return dt == TG_F64 ? 1e-14 : dt == TG_F32 ? 4e-7 : 1.0 / 64;
}

static tg_tensor *leaf_of(const tg_tensor *t)
{
    tg_tensor *c = NULL;
    OK(tg_tensor_clone(&c, t));
    OK(tg_tensor_set_requires_grad(c, true));
    return c;
}

Test(upsample_linear, every_case_matches_torch)
{
    tg_st_file *f = th_golden_load("upsample_linear.safetensors");
    const int n = atoi(tg_st_meta_get(f, "cases"));
    int seen[4] = {0}, modules = 0, aligned = 0;
    for (int i = 0; i < n; i++) {
        char c[16];
        snprintf(c, sizeof c, "case%d", i);
        const call k = call_of(f, c);
        seen[k.ns]++;
        modules += k.scale[0] > 0;
        aligned += k.align;
        const tg_tensor *want = th_golden_get(f, c, "y");
        const double tol = tol_of(tg_tensor_dtype(want));
        tg_tensor *x = leaf_of(th_golden_get(f, c, "x")), *y = NULL, *p = NULL, *s = NULL;
        OK(run(&k, &y, x));
        th_expect_close_scaled(c, y, want, tol);
        OK(tg_mul(&p, y, (tg_tensor *)th_golden_get(f, c, "grad_y")));
        OK(tg_sum(&s, p));
        OK(tg_backward(s, NULL, NULL));
        th_expect_close_scaled(c, tg_tensor_grad(x), th_golden_get(f, c, "grad_x"), tol);
        th_release_all(4, (tg_tensor *[]){x, y, p, s});
    }
    cr_assert(seen[1] >= 4 && seen[2] >= 8 && seen[3] >= 4 && modules >= 4 && aligned >= 6,
              "golden has %d/%d/%d cases, %d modules, %d aligned", seen[1], seen[2], seen[3],
              modules, aligned);
    tg_st_free(f);
}

/* x = 0, 1, 2, 3 to 8: half-pixel centres r = (o + 1/2)/2 - 1/2, clamped
 * at 0, read 0, .25, .75, ... and the last index twice; with aligned
 * corners to 7, r = o/2. */
Test(upsample_linear, values_by_hand)
{
    tg_tensor *x = th_arange(TG_F64, 3, (int64_t[]){1, 1, 4}), *y = NULL, *ya = NULL;
    OK(tg_upsample_linear(&y, x, 1, (int64_t[]){8}, false));
    th_expect_shape(y, 3, (int64_t[]){1, 1, 8});
    const double want[8] = {0, 0.25, 0.75, 1.25, 1.75, 2.25, 2.75, 3};
    for (int i = 0; i < 8; i++) cr_assert(eq(dbl, th_at(y, i), want[i]), "y[%d]", i);
    OK(tg_upsample_linear(&ya, x, 1, (int64_t[]){7}, true));
    for (int i = 0; i < 7; i++) cr_assert(eq(dbl, th_at(ya, i), i / 2.0), "aligned y[%d]", i);
    /* bilinear: a 2x2 plane to 3x3 with aligned corners, the centre is the
     * mean of the four */
    tg_tensor *q = th_tensor_from(TG_F64, 4, (int64_t[]){1, 1, 2, 2}, (double[]){1, 2, 4, 8});
    tg_tensor *yq = NULL;
    OK(tg_upsample_linear(&yq, q, 2, (int64_t[]){3, 3}, true));
    const double wq[9] = {1, 1.5, 2, 2.5, 3.75, 5, 4, 6, 8};
    for (int i = 0; i < 9; i++) cr_assert(eq(dbl, th_at(yq, i), wq[i]), "yq[%d]", i);
    th_release_all(5, (tg_tensor *[]){x, y, ya, q, yq});
}

/* ---- the gradient's gradient ---- */

/* The gradient of the gradient (in g) is the forward again: with h = x,
 * d<A^T g, h>/dg = A x. */
Test(upsample_linear, double_backward_is_the_forward)
{
    tg_tensor *x = th_rand_uniform(TG_F64, 4, (int64_t[]){2, 3, 4, 5}, 4), *y = NULL;
    OK(tg_tensor_set_requires_grad(x, true));
    OK(tg_upsample_linear(&y, x, 2, (int64_t[]){7, 9}, false));
    tg_tensor *g = th_rand_uniform(TG_F64, 4, tg_tensor_shape(y), 5), *dx = NULL, *dg = NULL;
    OK(tg_tensor_set_requires_grad(g, true));
    tg_backward_opts o = {.create_graph = true};
    OK(tg_grad(&dx, 1, &y, &g, 1, &x, &o));
    tg_tensor *xc = NULL;
    OK(tg_tensor_clone(&xc, x));
    OK(tg_grad(&dg, 1, &dx, &xc, 1, &g, NULL));
    th_expect_same_bits("A x", x, dg, y);
    th_release_all(6, (tg_tensor *[]){x, y, g, dx, dg, xc});
}

/* ---- the module ---- */

Test(upsample_linear, module_reports_its_mode)
{
    tg_module *lin = NULL, *near = NULL, *other = NULL;
    OK(tg_nn_upsample_linear_new(&lin, 2, (int64_t[]){2, 3}, true));
    OK(tg_nn_upsample_new(&near, 1, (int64_t[]){2}));
    OK(tg_nn_flatten_new(&other, 1, -1));
    cr_assert(eq(str, (char *)tg_module_type_name(lin), "Upsample"));
    tg_upsample_mode mode = TG_UPSAMPLE_NEAREST;
    bool align = false;
    int ns = 0;
    int64_t scale[3] = {0};
    OK(tg_nn_upsample_mode(lin, &mode, &align));
    cr_assert(mode == TG_UPSAMPLE_LINEAR && align);
    OK(tg_nn_upsample_params(lin, &ns, scale));
    cr_assert(ns == 2 && scale[0] == 2 && scale[1] == 3);
    OK(tg_nn_upsample_mode(near, &mode, &align));
    cr_assert(mode == TG_UPSAMPLE_NEAREST && !align);
    OK(tg_nn_upsample_mode(lin, NULL, NULL));
    cr_assert(eq(int, tg_nn_upsample_mode(other, &mode, NULL), TG_EINVAL));
    th_expect_in(tg_error_message(), "nn_upsample_mode: m is a Flatten module, not Upsample");
    cr_assert(eq(int, tg_nn_upsample_mode(NULL, &mode, NULL), TG_EINVAL));
    /* its forward: x (1, 2, 3, 4) -> (1, 2, 6, 12), the op's result */
    tg_tensor *x = th_rand_uniform(TG_F32, 4, (int64_t[]){1, 2, 3, 4}, 3), *y = NULL, *z = NULL;
    OK(tg_module_forward(lin, &y, x));
    OK(tg_upsample_linear(&z, x, 2, (int64_t[]){6, 12}, true));
    th_expect_same_bits("module", x, y, z);
    th_release_all(3, (tg_tensor *[]){x, y, z});
    tg_module_release(lin);
    tg_module_release(near);
    tg_module_release(other);
}

Test(upsample_linear, refusals_name_the_rule)
{
    tg_tensor *x = th_rand_uniform(TG_F32, 4, (int64_t[]){2, 3, 5, 4}, 1), *y = NULL;
    const int64_t sz[3] = {6, 6, 6};
    th_expect_refused(tg_upsample_linear(NULL, x, 2, sz, false), TG_EINVAL,
                      "upsample_bilinear2d: out must not be NULL", y);
    th_expect_refused(tg_upsample_linear(&y, NULL, 2, sz, false), TG_EINVAL,
                      "upsample_bilinear2d: x must not be NULL", y);
    th_expect_refused(tg_upsample_linear(&y, x, 4, sz, false), TG_EINVAL,
                      "upsample_linear: n_spatial=4 must be 1, 2 or 3", y);
    th_expect_refused(tg_upsample_linear(&y, x, 2, NULL, false), TG_EINVAL,
                      "upsample_bilinear2d: size must not be NULL", y);
    th_expect_refused(tg_upsample_linear(&y, x, 2, (int64_t[]){6, 0}, false), TG_EINVAL,
                      "upsample_bilinear2d: size[1]=0 must be in [1, 2147483647]", y);
    th_expect_refused(tg_upsample_linear(&y, x, 2, (int64_t[]){(int64_t)1 << 31, 2}, false),
                      TG_EINVAL, "size[0]=2147483648", y);
    th_expect_refused(tg_upsample_linear(&y, x, 1, sz, false), TG_ESHAPE,
                      "upsample_linear1d: x has 4 dims; it must have 2 (C, S...) or 3", y);
    tg_tensor *x2 = th_rand_uniform(TG_F32, 2, (int64_t[]){3, 4}, 2);
    th_expect_refused(tg_upsample_linear(&y, x2, 3, sz, true), TG_ESHAPE,
                      "upsample_trilinear3d: x has 2 dims; it must have 4 (C, S...) or 5", y);
    tg_tensor *xi = NULL;
    OK(tg_tensor_zeros(&xi, TG_I64, 4, (int64_t[]){2, 3, 5, 4}));
    th_expect_refused(tg_upsample_linear(&y, xi, 2, sz, false), TG_EDTYPE,
                      "upsample_bilinear2d: x has dtype i64; a float dtype is needed", y);
    tg_tensor *x0 = NULL;
    OK(tg_tensor_zeros(&x0, TG_F32, 4, (int64_t[]){2, 0, 5, 4}));
    th_expect_refused(tg_upsample_linear(&y, x0, 2, sz, false), TG_ESHAPE,
                      "x's dim 1 has extent 0", y);
    /* the module */
    tg_module *m = NULL;
    cr_assert(eq(int, tg_nn_upsample_linear_new(&m, 2, (int64_t[]){2, 0}, false), TG_EINVAL));
    th_expect_in(tg_error_message(), "nn_upsample_linear_new: scale[1]=0");
    cr_assert(m == NULL);
    cr_assert(eq(int, tg_nn_upsample_linear_new(NULL, 2, (int64_t[]){2, 2}, false), TG_EINVAL));
    cr_assert(eq(int, tg_nn_upsample_linear_new(&m, 0, (int64_t[]){2, 2}, false), TG_EINVAL));
    OK(tg_nn_upsample_linear_new(&m, 1, (int64_t[]){2}, false));
    th_expect_refused(tg_module_forward(m, &y, x), TG_ESHAPE,
                      "upsample_linear1d: x has 4 dims; it must have 2 (C, S...) or 3", y);
    tg_module_release(m);
    OK(tg_nn_upsample_linear_new(&m, 2, (int64_t[]){(int64_t)1 << 30, 1}, false));
    th_expect_refused(tg_module_forward(m, &y, x), TG_EINVAL,
                      "upsample_bilinear2d: spatial dim 0 of extent 5 times scale 1073741824", y);
    tg_module_release(m);
    th_release_all(4, (tg_tensor *[]){x, x2, xi, x0});
}
