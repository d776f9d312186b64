/* tests/test_layer_norm.c - the layer_norm and group_norm ops
 * (src/ops/layer_norm.c): values and gradients against PyTorch 1.13
 * (tests/golden/layer_norm.safetensors, scripts/make_layer_norm_goldens.py)
 * in f64, f32, bf16 and f16, what the tape keeps, thread counts, half
 * inputs under autocast, strided and empty inputs, and the errors that name
 * the argument.  gradcheck, gradgradcheck and the fused backward against the
 * recorded one are in test_layer_norm_grad.c; the LayerNorm and GroupNorm
 * modules are checked in test_nn.c. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "layer_norm_fixtures.h"
#include "tapegrad/tapegrad.h"

/* Tolerance against torch relative to the largest |value| of a tensor.
 * tapegrad sums in double, torch 1.13 in the input's precision (measured:
 * f64 1.2e-15, f32 7.3e-7).  torch's bf16 kernels round in bf16 on the way
 * and land up to 1.2e-2 from the exact result, which tapegrad gives
 * rounded once (1.4e-2 apart measured; half_inputs_round_the_f32_result_once
 * checks tapegrad's bits).  f16 is torch's f32 result rounded (0 apart). */
static double tol_of(tg_dtype dt)
{
    return dt == TG_F64 ? 1e-14 : dt == TG_F32 ? 2e-6 : dt == TG_BF16 ? 1.6e-2 : 1e-3;
}

static const char *meta(const tg_st_file *f, const char *name, const char *key)
{
    char k[128];
    snprintf(k, sizeof k, "%s.%s", name, key);
    const char *v = tg_st_meta_get(f, k);
    cr_assert(v != NULL, "golden metadata %s missing", k);
    return v;
}

static tg_tensor *get(const tg_st_file *f, const char *name, const char *key, bool required)
{
    char k[128];
    snprintf(k, sizeof k, "%s.%s", name, key);
    tg_tensor *t = tg_st_get(f, k);
    cr_assert(t != NULL || !required, "golden key %s missing", k);
    return t;
}

static ln_case load_case(const tg_st_file *f, const char *name)
{
    ln_case c = {.group = !strcmp(meta(f, name, "kind"), "gn")};
    char param[64];
    snprintf(param, sizeof param, "%s", meta(f, name, "param"));
    if (c.group) {
        c.groups = atoll(param);
    } else {
        for (char *s, *v = strtok_r(param, ",", &s); v; v = strtok_r(NULL, ",", &s))
            c.norm_shape[c.n_norm++] = atoll(v);
    }
    c.eps = atof(meta(f, name, "eps"));
    const char *affine = meta(f, name, "affine");
    c.x = get(f, name, "x", true);
    c.gy = get(f, name, "gy", true);
    c.w = get(f, name, "w", strchr(affine, 'w') != NULL);
    c.b = get(f, name, "b", strchr(affine, 'b') != NULL);
    return c;
}

/* ---- against PyTorch ----------------------------------------------------------- */

Test(layer_norm, values_and_gradients_match_pytorch)
{
    tg_st_file *f = th_golden_load("layer_norm.safetensors");
    char cases[2048];
    snprintf(cases, sizeof cases, "%s", tg_st_meta_get(f, "cases"));
    int checked = 0, with_grads = 0;
    for (char *save, *name = strtok_r(cases, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
        ln_case c = load_case(f, name);
        const tg_dtype dt = tg_tensor_dtype(c.x);
        const double tol = tol_of(dt);
        const bool grads = dt == TG_F64 || dt == TG_F32;
        tg_tensor *x = th_leaf_clone(c.x), *w = th_leaf_clone(c.w), *b = th_leaf_clone(c.b);
        tg_tensor *y = NULL;
        OK(run_case(&y, &c, x, w, b));
        char what[128];
        snprintf(what, sizeof what, "%s y", name);
        th_expect_close(what, y, get(f, name, "y", true), tol);
        if (grads) {
            OK(tg_backward(y, c.gy, NULL));
            const char *keys[3] = {"gx", "gw", "gb"};
            tg_tensor *leaves[3] = {x, w, b};
            for (int i = 0; i < 3; i++) {
                if (!leaves[i]) continue;
                snprintf(what, sizeof what, "%s %s", name, keys[i]);
                th_expect_close(what, tg_tensor_grad(leaves[i]), get(f, name, keys[i], true), tol);
            }
            with_grads++;
        }
        th_release_all(4, (tg_tensor *[]){y, x, w, b});
        checked++;
    }
    cr_assert(checked >= 32 && with_grads >= 26, "only %d cases (%d with gradients)", checked,
              with_grads);
    tg_st_free(f);
}

/* ---- what the tape keeps, threads, dtypes ---------------------------------------- */

/* With its input's other owner gone, a recorded layer_norm holds x, y and
 * two values per row, no third activation. */
Test(layer_norm, tape_keeps_x_and_two_values_per_row)
{
    const int64_t xs[3] = {16, 64, 32};   /* 32768 values, 128 KiB in f32; 1024 rows */
    const int64_t full = 16 * 64 * 32 * 4;
    for (int group = 0; group < 2; group++) {
        tg_tensor *x = th_rand_uniform(TG_F32, 3, xs, 41), *a = NULL, *y = NULL;
        OK(tg_tensor_set_requires_grad(x, true));
        OK(tg_mul_scalar(&a, x, 2.0));
        int64_t before, after;
        tg_memory_stats(&before, NULL);   /* x, a */
        OK(group ? tg_group_norm(&y, a, 16, NULL, NULL, 1e-5)
                 : tg_layer_norm(&y, a, 1, &xs[2], NULL, NULL, 1e-5));
        tg_tensor_release(a);   /* still saved by the op */
        tg_memory_stats(&after, NULL);
        cr_assert(le(i64, after - before, full + 2 * 1024 * 4 + 1024), "tape holds %lld bytes more",
                  (long long)(after - before));
        cr_assert(ge(i64, after - before, full));   /* y itself */
        OK(tg_backward(y, y, NULL));
        cr_assert(not(eq(ptr, tg_tensor_grad(x), NULL)));
        th_release_all(2, (tg_tensor *[]){x, y});
    }
}

/* Forward and backward, large enough to be shared out among threads, give
 * the same bits on 1 and 2 threads. */
Test(layer_norm, same_bits_on_one_and_two_threads)
{
    const int64_t xs[4] = {4, 16, 24, 24};   /* 36864 values */
    const int old = tg_get_num_threads();
    for (int kind = 0; kind < 3; kind++) {
        /* layer norm over (24, 24), over the last dim (rows of 24: short
         * runs for the weight), group norm in 4 groups */
        ln_case c = kind == 0   ? make_case(false, 4, xs, 2, 0, true, true)
                    : kind == 1 ? make_case(false, 4, xs, 1, 0, true, true)
                                : make_case(true, 4, xs, 0, 4, true, true);
        tg_tensor *res[2][4];
        for (int t = 0; t < 2; t++) {
            OK(tg_set_num_threads(t + 1));
            tg_tensor *x = th_rand_uniform(TG_F32, 4, xs, 51);
            tg_tensor *w = affine_tensor(&c, 4, xs, 52, 0.5, 2, TG_F32);
            tg_tensor *b = affine_tensor(&c, 4, xs, 53, -1, 1, TG_F32);
            tg_tensor *gy = th_rand_uniform(TG_F32, 4, xs, 54), *y = NULL;
            tg_tensor *leaves[3] = {x, w, b};
            for (int i = 0; i < 3; i++) OK(tg_tensor_set_requires_grad(leaves[i], true));
            OK(run_case(&y, &c, x, w, b));
            OK(tg_backward(y, gy, NULL));
            res[t][0] = y;
            for (int i = 0; i < 3; i++) res[t][i + 1] = tg_tensor_retain(tg_tensor_grad(leaves[i]));
            th_release_all(4, (tg_tensor *[]){x, w, b, gy});
        }
        for (int i = 0; i < 4; i++) {
            th_expect_same_bits(i == 0 ? "y" : i == 1 ? "dx" : i == 2 ? "dw" : "db", res[0][i],
                                res[1][i], res[0][i]);
            th_release_all(2, (tg_tensor *[]){res[0][i], res[1][i]});
        }
    }
    OK(tg_set_num_threads(old));
}

/* f16 and bf16 inputs (with f32 weight and bias) are computed in f32 and
 * rounded once: the same bits as the f32 op on the same values, converted.
 * Inside autocast the result keeps x's dtype, as in torch 1.13 (whose CPU
 * autocast lists neither op), and the gradients come back in each input's
 * dtype; outside, x, weight and bias promote to f32. */
Test(layer_norm, half_inputs_round_the_f32_result_once)
{
    const int64_t xs[3] = {4, 6, 20};
    const tg_dtype halves[2] = {TG_BF16, TG_F16};
    for (int h = 0; h < 2; h++)
        for (int group = 0; group < 2; group++) {
            ln_case c = group ? make_case(true, 3, xs, 0, 3, true, true)
                              : make_case(false, 3, xs, 2, 0, true, true);
            tg_tensor *x32 = th_rand_uniform(TG_F32, 3, xs, 61), *xh = NULL, *xe = NULL;
            tg_tensor *w = affine_tensor(&c, 3, xs, 62, 0.5, 2, TG_F32);
            tg_tensor *b = affine_tensor(&c, 3, xs, 63, -1, 1, TG_F32);
            OK(tg_to_dtype(&xh, x32, halves[h]));
            OK(tg_to_dtype(&xe, xh, TG_F32));   /* the half values in f32 */
            tg_tensor *yf = NULL, *yh = NULL, *yp = NULL, *r = NULL;
            OK(run_case(&yf, &c, xe, w, b));
            OK(tg_to_dtype(&r, yf, halves[h]));
            OK(tg_tensor_set_requires_grad(xh, true));
            OK(tg_tensor_set_requires_grad(w, true));
            OK(tg_autocast_begin(halves[h]));
            int rc = run_case(&yh, &c, xh, w, b);
            tg_autocast_end();
            OK(rc);
            cr_assert(eq(int, tg_tensor_dtype(yh), halves[h]));
            th_expect_same_bits(group ? "group_norm half" : "layer_norm half", xh, yh, r);
            OK(tg_backward(yh, yh, NULL));
            cr_assert(eq(int, tg_tensor_dtype(tg_tensor_grad(xh)), halves[h]));
            cr_assert(eq(int, tg_tensor_dtype(tg_tensor_grad(w)), TG_F32));
            OK(run_case(&yp, &c, xh, w, b));
            cr_assert(eq(int, tg_tensor_dtype(yp), TG_F32));   /* outside autocast: promoted */
            th_release_all(9, (tg_tensor *[]){x32, xh, xe, w, b, yf, yh, yp, r});
        }
}

/* A strided x (a transposed view) gives the values and gradients of its
 * contiguous copy. */
Test(layer_norm, strided_input_matches_contiguous_copy)
{
    const int64_t xs[4] = {3, 5, 4, 6};   /* viewed as (3, 4, 5, 6) */
    const int64_t vs[4] = {3, 4, 5, 6};
    for (int group = 0; group < 2; group++) {
        ln_case c = group ? make_case(true, 4, vs, 0, 2, true, true)
                          : make_case(false, 4, vs, 3, 0, true, true);
        tg_tensor *base = th_rand_uniform(TG_F64, 4, xs, 71), *xv = NULL, *xc = NULL;
        tg_tensor *gy = th_rand_uniform(TG_F64, 4, vs, 72), *y[2], *g[2];
        tg_tensor *w = affine_tensor(&c, 4, vs, 73, 0.5, 2, TG_F64);
        tg_tensor *b = affine_tensor(&c, 4, vs, 74, -1, 1, TG_F64);
        OK(tg_tensor_set_requires_grad(base, true));
        OK(tg_transpose(&xv, base, 1, 2));
        cr_assert(not(tg_tensor_is_contiguous(xv)));
        OK(tg_tensor_clone(&xc, xv));
        OK(tg_tensor_set_requires_grad(xc, true));
        tg_tensor *xin[2] = {xv, xc}, *leaf[2] = {base, xc};
        for (int k = 0; k < 2; k++) {
            OK(run_case(&y[k], &c, xin[k], w, b));
            OK(tg_backward(y[k], gy, NULL));
            tg_tensor *gl = tg_tensor_grad(leaf[k]);
            if (k == 0) OK(tg_transpose(&g[k], gl, 1, 2));
            else g[k] = tg_tensor_retain(gl);
        }
        th_expect_close("strided y", y[0], y[1], 1e-15);
        th_expect_close("strided dx", g[0], g[1], 1e-15);
        th_release_all(10, (tg_tensor *[]){base, xv, xc, gy, w, b, y[0], y[1], g[0], g[1]});
    }
}

/* As torch: an empty x gives an empty result, and the weight and bias get
 * zero gradients of their shapes (no rows, or rows of no values). */
Test(layer_norm, empty_inputs_give_empty_results)
{
    static const struct {
        bool group;
        int nd, n_norm;
        int64_t xs[3], groups;
    } cs[] = {{false, 2, 1, {0, 4}, 0}, {false, 2, 1, {3, 0}, 0}, {true, 3, 0, {0, 4, 3}, 2},
              {true, 3, 0, {2, 4, 0}, 2}, {true, 3, 0, {2, 0, 3}, 1}};
    for (size_t k = 0; k < sizeof cs / sizeof *cs; k++) {
        ln_case c = make_case(cs[k].group, cs[k].nd, cs[k].xs, cs[k].n_norm, cs[k].groups, true,
                              true);
        tg_tensor *x = NULL, *y = NULL, *s = NULL;
        tg_tensor *w = affine_tensor(&c, cs[k].nd, cs[k].xs, 81, 0.5, 2, TG_F32);
        tg_tensor *b = affine_tensor(&c, cs[k].nd, cs[k].xs, 82, -1, 1, TG_F32);
        OK(tg_tensor_zeros(&x, TG_F32, cs[k].nd, cs[k].xs));
        tg_tensor *leaves[3] = {x, w, b};
        for (int i = 0; i < 3; i++) OK(tg_tensor_set_requires_grad(leaves[i], true));
        OK(run_case(&y, &c, x, w, b));
        th_expect_shape(y, cs[k].nd, cs[k].xs);
        OK(tg_sum(&s, y));
        OK(tg_backward(s, NULL, NULL));
        for (int i = 1; i < 3; i++) {
            const tg_tensor *gr = tg_tensor_grad(leaves[i]);
            cr_assert(gr != NULL && tg_tensor_same_shape(gr, leaves[i]), "case %zu", k);
            for (int64_t e = 0; e < tg_tensor_numel(gr); e++) cr_assert(eq(dbl, th_at(gr, e), 0.0));
        }
        th_release_all(5, (tg_tensor *[]){x, w, b, y, s});
    }
}

/* ---- errors ------------------------------------------------------------------------ */

/* Bad arguments: the status and a message naming the argument, with *out
 * untouched. */
Test(layer_norm, errors_name_the_argument_and_change_nothing)
{
    const int64_t s3[3] = {2, 6, 4}, s1[1] = {4}, s2[2] = {6, 4}, s5[1] = {5}, s6[1] = {6};
    tg_tensor *x = th_rand_uniform(TG_F32, 3, s3, 91), *x1 = th_rand_uniform(TG_F32, 1, s1, 92);
    tg_tensor *w4 = th_rand_uniform(TG_F32, 1, s1, 93), *w5 = th_rand_uniform(TG_F32, 1, s5, 94);
    tg_tensor *w6 = th_rand_uniform(TG_F32, 1, s6, 95), *w64 = th_rand_uniform(TG_F32, 2, s2, 96);
    tg_tensor *xi = NULL, *wi = NULL;
    OK(tg_tensor_zeros(&xi, TG_I32, 3, s3));
    OK(tg_tensor_zeros(&wi, TG_I64, 1, s1));
    tg_tensor *y = (tg_tensor *)&y;   /* a sentinel: must stay */
    const int64_t ns4[1] = {4}, ns3[1] = {3}, ns64[2] = {6, 4}, ns_long[4] = {1, 2, 6, 4};
    struct {
        int rc;
        tg_tensor *x, *w, *b;
        int n;
        const int64_t *ns;
        double eps;
        const char *msg;
    } ln[] = {
        {TG_EINVAL, NULL, NULL, NULL, 1, ns4, 1e-5, "layer_norm: x must not be NULL"},
        {TG_EDTYPE, xi, NULL, NULL, 1, ns4, 1e-5, "layer_norm: x has dtype i32; float dtypes only"},
        {TG_EINVAL, x, NULL, NULL, 0, ns4, 1e-5, "n_normalized=0 must be in 1..8"},
        {TG_EINVAL, x, NULL, NULL, 9, ns4, 1e-5, "n_normalized=9 must be in 1..8"},
        {TG_EINVAL, x, NULL, NULL, 1, NULL, 1e-5, "normalized_shape must not be NULL"},
        {TG_ESHAPE, x, NULL, NULL, 1, ns3, 1e-5,
         "normalized_shape (3) must equal the last 1 dims of x, which has shape (2, 6, 4)"},
        {TG_ESHAPE, x1, NULL, NULL, 4, ns_long, 1e-5, "must equal the last 4 dims of x"},
        {TG_ESHAPE, x, w5, NULL, 1, ns4, 1e-5,
         "layer_norm: weight has shape (5); expected (4) (normalized_shape)"},
        {TG_ESHAPE, x, w64, w5, 2, ns64, 1e-5, "layer_norm: bias has shape (5); expected (6, 4)"},
        {TG_ESHAPE, x, w4, NULL, 2, ns64, 1e-5, "weight has shape (4); expected (6, 4)"},
        {TG_EDTYPE, x, wi, NULL, 1, ns4, 1e-5, "layer_norm: weight has dtype i64"},
        {TG_EINVAL, x, NULL, NULL, 1, ns4, -1.0, "layer_norm: eps=-1 must be finite and >= 0"},
        {TG_EINVAL, x, NULL, NULL, 1, ns4, NAN, "eps=nan"},
    };
    for (size_t k = 0; k < sizeof ln / sizeof *ln; k++) {
        cr_assert(eq(int, tg_layer_norm(&y, ln[k].x, ln[k].n, ln[k].ns, ln[k].w, ln[k].b, ln[k].eps),
                     ln[k].rc), "layer_norm case %zu: %s", k, tg_error_message());
        cr_assert(not(eq(ptr, strstr(tg_error_message(), ln[k].msg), NULL)), "case %zu: %s", k,
                  tg_error_message());
        cr_assert(eq(ptr, y, (tg_tensor *)&y));
    }
    struct {
        int rc;
        tg_tensor *x, *w, *b;
        int64_t groups;
        double eps;
        const char *msg;
    } gn[] = {
        {TG_EINVAL, NULL, NULL, NULL, 2, 1e-5, "group_norm: x must not be NULL"},
        {TG_EDTYPE, xi, NULL, NULL, 2, 1e-5, "group_norm: x has dtype i32"},
        {TG_EINVAL, x, NULL, NULL, 0, 1e-5, "group_norm: num_groups=0 must be > 0"},
        {TG_EINVAL, x, NULL, NULL, -2, 1e-5, "num_groups=-2 must be > 0"},
        {TG_ESHAPE, x1, NULL, NULL, 2, 1e-5,
         "group_norm: x has shape (4); expected (N, C, ...) with at least 2 dims"},
        {TG_EINVAL, x, NULL, NULL, 4, 1e-5,
         "group_norm: x's channels C=6 (dim 1 of (2, 6, 4)) must be divisible by num_groups=4"},
        {TG_ESHAPE, x, w4, NULL, 2, 1e-5,
         "group_norm: weight has shape (4); expected (6) (num channels, x's dim 1)"},
        {TG_ESHAPE, x, w6, w64, 2, 1e-5, "group_norm: bias has shape (6, 4); expected (6)"},
        {TG_EINVAL, x, w6, w6, 3, -1e-3, "group_norm: eps=-0.001 must be finite and >= 0"},
    };
    for (size_t k = 0; k < sizeof gn / sizeof *gn; k++) {
        cr_assert(eq(int, tg_group_norm(&y, gn[k].x, gn[k].groups, gn[k].w, gn[k].b, gn[k].eps),
                     gn[k].rc), "group_norm case %zu: %s", k, tg_error_message());
        cr_assert(not(eq(ptr, strstr(tg_error_message(), gn[k].msg), NULL)), "case %zu: %s", k,
                  tg_error_message());
        cr_assert(eq(ptr, y, (tg_tensor *)&y));
    }
    cr_assert(eq(int, tg_layer_norm(NULL, x, 1, ns4, NULL, NULL, 1e-5), TG_EINVAL));
    cr_assert(eq(int, tg_group_norm(NULL, x, 2, NULL, NULL, 1e-5), TG_EINVAL));
    th_release_all(8, (tg_tensor *[]){x, x1, w4, w5, w6, w64, xi, wi});
}
