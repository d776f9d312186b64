/* tests/test_fold.c - tg_unfold, tg_fold and nn.Unfold / nn.Fold: against
 * PyTorch's F.unfold / F.fold (a sweep of kernel sizes, dilations,
 * paddings and strides, batched and unbatched; values and input gradients
 * in f64, f32 and bf16), the adjoint identity <unfold(x), y> = <x, fold(y)>,
 * derivatives to second order by finite differences, f16, empty batches,
 * strided inputs, the modules and the refusals.
 * Goldens: scripts/make_fold_goldens.py. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

/* The parameters of golden case c. */
static tg_fold_params case_params(const tg_st_file *f, const char *c)
{
    tg_fold_params p = TG_FOLD_PARAMS_INIT;
    th_ints_of(th_golden_meta(f, c, "k"), p.kernel_size);
    th_ints_of(th_golden_meta(f, c, "d"), p.dilation);
    th_ints_of(th_golden_meta(f, c, "p"), p.padding);
    th_ints_of(th_golden_meta(f, c, "s"), p.stride);
    return p;
}

static tg_tensor *golden_as(const tg_st_file *f, const char *c, const char *what, tg_dtype dt)
{
    tg_tensor *t = NULL;
    OK(tg_tensor_to_dtype(&t, th_golden_get(f, c, what), dt));
    return t;
}

/* Golden name "<what><suf>" of case c. */
static const tg_tensor *golden_suf(const tg_st_file *f, const char *c, const char *what,
                                   const char *suf)
{
    char k[32];
    snprintf(k, sizeof k, "%s%s", what, suf);
    return th_golden_get(f, c, k);
}

/* The results of one dtype against torch's: y and gz are copies of x and gf
 * (the same bits); f and gx are sums, within rtol of torch's (scaled by the
 * largest |value|: th_expect_close_scaled). */
static void check_case(const tg_st_file *f, const char *c, tg_dtype dt, const char *suf,
                       double rtol)
{
    const tg_fold_params p = case_params(f, c);
    tg_tensor *x = golden_as(f, c, "x", dt), *gy = golden_as(f, c, "gy", dt);
    tg_tensor *z = golden_as(f, c, "z", dt), *gf = golden_as(f, c, "gf", dt);
    OK(tg_tensor_set_requires_grad(x, true));
    OK(tg_tensor_set_requires_grad(z, true));
    const int nd = tg_tensor_ndim(x);
    const int64_t hw[2] = {tg_tensor_dim(x, nd - 2), tg_tensor_dim(x, nd - 1)};
    tg_tensor *y = NULL, *fz = NULL;
    OK(tg_unfold(&y, x, &p));
    OK(tg_fold(&fz, z, hw, &p));
    char what[64];
    snprintf(what, sizeof what, "%s unfold %s", c, tg_dtype_name(dt));
    th_expect_same_bits(what, x, y, golden_suf(f, c, "y", suf));
    snprintf(what, sizeof what, "%s fold %s", c, tg_dtype_name(dt));
    th_expect_close_scaled(what, fz, golden_suf(f, c, "f", suf), rtol);
    th_backward_with(y, gy);
    th_backward_with(fz, gf);
    snprintf(what, sizeof what, "%s unfold's grad %s", c, tg_dtype_name(dt));
    th_expect_close_scaled(what, tg_tensor_grad(x), golden_suf(f, c, "gx", suf), rtol);
    snprintf(what, sizeof what, "%s fold's grad %s", c, tg_dtype_name(dt));
    th_expect_same_bits(what, z, tg_tensor_grad(z), golden_suf(f, c, "gz", suf));
    th_release_all(6, (tg_tensor *[]){x, gy, z, gf, y, fz});
}

/* f64 and f32: torch sums in another order, so a few ulps of the largest
 * value apart. */
Test(fold, every_case_matches_torch_f64_f32)
{
    tg_st_file *f = th_golden_load("fold.safetensors");
    const int n = atoi(tg_st_meta_get(f, "cases"));
    cr_assert(n >= 10, "golden has %d cases", n);
    for (int i = 0; i < n; i++) {
        char c[16];
        snprintf(c, sizeof c, "case%d", i);
        check_case(f, c, TG_F64, "", 1e-14);
        check_case(f, c, TG_F32, "32", 1e-6);
    }
    tg_st_free(f);
}

/* bf16: unfold and fold's gradient are copies (the same bits).  fold sums
 * in f32 and rounds once (held to that below); torch 1.13 adds the
 * overlapping terms (up to 9 here) in bf16, rounding after each add by up
 * to half a bf16 unit (2^-9) of the partial sum.  On these cases the two
 * differ by up to 2^-7 of the largest |value|; 2^-6 allows twice that. */
Test(fold, every_case_matches_torch_bf16)
{
    tg_st_file *f = th_golden_load("fold.safetensors");
    const int n = atoi(tg_st_meta_get(f, "cases"));
    for (int i = 0; i < n; i++) {
        char c[16];
        snprintf(c, sizeof c, "case%d", i);
        check_case(f, c, TG_BF16, "bf", 0x1p-6);
    }
    tg_st_free(f);
}

/* fold of bf16 columns is the f32 fold of their (exact) f32 values rounded
 * once to bf16: the same bits. */
Test(fold, half_fold_rounds_the_f32_sum_once)
{
    tg_st_file *f = th_golden_load("fold.safetensors");
    const int n = atoi(tg_st_meta_get(f, "cases"));
    static const tg_dtype halves[2] = {TG_BF16, TG_F16};
    for (int i = 0; i < n; i++)
        for (int h = 0; h < 2; h++) {
            char c[16];
            snprintf(c, sizeof c, "case%d", i);
            const tg_fold_params p = case_params(f, c);
            const tg_tensor *x = th_golden_get(f, c, "x");
            const int nd = tg_tensor_ndim(x);
            const int64_t hw[2] = {tg_tensor_dim(x, nd - 2), tg_tensor_dim(x, nd - 1)};
            tg_tensor *zh = golden_as(f, c, "z", halves[h]), *z32 = NULL, *f32 = NULL;
            tg_tensor *fh = NULL, *want = NULL, *xh = golden_as(f, c, "x", halves[h]);
            tg_tensor *yh = NULL, *x32 = NULL, *y32 = NULL, *ywant = NULL;
            OK(tg_tensor_to_dtype(&z32, zh, TG_F32));
            OK(tg_fold(&f32, z32, hw, &p));
            OK(tg_tensor_to_dtype(&want, f32, halves[h]));
            OK(tg_fold(&fh, zh, hw, &p));
            th_expect_same_bits(c, zh, fh, want);
            OK(tg_tensor_to_dtype(&x32, xh, TG_F32));
            OK(tg_unfold(&y32, x32, &p));
            OK(tg_tensor_to_dtype(&ywant, y32, halves[h]));
            OK(tg_unfold(&yh, xh, &p));
            th_expect_same_bits(c, xh, yh, ywant);
            th_release_all(10, (tg_tensor *[]){zh, z32, f32, fh, want, xh, yh, x32, y32, ywant});
        }
    tg_st_free(f);
}

/* One block, each tap by hand: y[n, c*kh*kw + i*kw + j, lh*bw + lw] =
 * x[n, c, lh*s0 - p0 + i*d0, lw*s1 - p1 + j*d1], 0 outside. */
Test(fold, index_rule_by_hand)
{
    const int64_t N = 2, C = 3, H = 5, W = 7;
    tg_fold_params p = {.kernel_size = {2, 3}, .dilation = {2, 1}, .padding = {1, 2},
                        .stride = {2, 3}};
    tg_tensor *x = th_arange(TG_F64, 4, (int64_t[]){N, C, H, W}), *y = NULL;
    OK(tg_unfold(&y, x, &p));
    const int64_t bh = (H + 2 - 2 - 1) / 2 + 1, bw = (W + 4 - 2 - 1) / 3 + 1;
    th_expect_shape(y, 3, (int64_t[]){N, C * 6, bh * bw});
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t i = 0; i < 2; i++)
                for (int64_t j = 0; j < 3; j++)
                    for (int64_t lh = 0; lh < bh; lh++)
                        for (int64_t lw = 0; lw < bw; lw++) {
                            const int64_t h = lh * 2 - 1 + i * 2, w = lw * 3 - 2 + j;
                            const double want =
                                h >= 0 && h < H && w >= 0 && w < W
                                    ? th_get(x, (int64_t[]){n, c, h, w})
                                    : 0.0;
                            const double got =
                                th_get(y, (int64_t[]){n, c * 6 + i * 3 + j, lh * bw + lw});
                            cr_assert(eq(dbl, got, want));
                        }
    th_release_all(2, (tg_tensor *[]){x, y});
}

static double dot(const tg_tensor *a, const tg_tensor *b)
{
    double s = 0;
    for (int64_t i = 0; i < tg_tensor_numel(a); i++) s += th_at(a, i) * th_at(b, i);
    return s;
}

/* <unfold(x), y> = <x, fold(y)> for random x and y, batched and unbatched,
 * over parameter sets that overlap, leave gaps and pad. */
Test(fold, fold_is_the_adjoint_of_unfold)
{
    static const tg_fold_params ps[] = {
        {.kernel_size = {3, 3}, .dilation = {1, 1}, .padding = {1, 1}, .stride = {1, 1}},
        {.kernel_size = {2, 3}, .dilation = {2, 1}, .padding = {0, 2}, .stride = {3, 2}},
        {.kernel_size = {1, 4}, .dilation = {1, 2}, .padding = {3, 0}, .stride = {1, 1}},
        {.kernel_size = {5, 2}, .dilation = {1, 3}, .padding = {2, 4}, .stride = {4, 5}},
    };
    for (size_t k = 0; k < sizeof ps / sizeof ps[0]; k++)
        for (int batched = 0; batched < 2; batched++) {
            const int64_t shape[4] = {3, 2, 9, 11};
            const int nd = batched ? 4 : 3;
            tg_tensor *x = th_rand_uniform(TG_F64, nd, shape + 4 - nd, 11 + k), *ux = NULL;
            OK(tg_unfold(&ux, x, &ps[k]));
            tg_tensor *y = th_rand_uniform(TG_F64, tg_tensor_ndim(ux), tg_tensor_shape(ux),
                                           23 + k), *fy = NULL;
            OK(tg_fold(&fy, y, (int64_t[]){9, 11}, &ps[k]));
            th_expect_shape(fy, nd, shape + 4 - nd);
            const double a = dot(ux, y), b = dot(x, fy);
            cr_assert(fabs(a - b) <= 1e-12 * (fabs(a) + 1), "params %zu: %.17g vs %.17g", k,
                      a, b);
            th_release_all(4, (tg_tensor *[]){x, ux, y, fy});
        }
}

typedef struct fold_case {
    bool fold;
    tg_fold_params p;
    int64_t hw[2];
} fold_case;

static int fold_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    const fold_case *c = user;
    return c->fold ? tg_fold(out, in[0], c->hw, &c->p) : tg_unfold(out, in[0], &c->p);
}

Test(fold, first_and_second_derivatives_by_finite_differences)
{
    static const fold_case cases[] = {
        {false, {{2, 2}, {1, 1}, {1, 0}, {1, 2}}, {4, 5}},
        {true, {{2, 2}, {1, 1}, {1, 0}, {1, 2}}, {4, 5}},
        {false, {{3, 2}, {1, 2}, {0, 1}, {2, 1}}, {5, 4}},
        {true, {{3, 2}, {1, 2}, {0, 1}, {2, 1}}, {5, 4}},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const fold_case *c = &cases[k];
        /* fold's input: unfold's output shape for (2, 2, H, W), unbatched
         * for the second pair */
        tg_tensor *img = th_rand_uniform(TG_F64, 4, (int64_t[]){2, 2, c->hw[0], c->hw[1]}, 3);
        tg_tensor *cols = NULL, *x = NULL;
        OK(tg_unfold(&cols, img, &c->p));
        if (!c->fold) {
            x = tg_tensor_retain(img);
        } else if (k < 2) {
            x = th_rand_uniform(TG_F64, 3, tg_tensor_shape(cols), 7);
        } else {
            x = th_rand_uniform(TG_F64, 2, tg_tensor_shape(cols) + 1, 7);
        }
        OK(tg_tensor_set_requires_grad(x, true));
        tg_tensor *in[1] = {x};
        cr_assert(eq(int, tg_gradcheck(fold_fn, (void *)c, 1, in, NULL), TG_OK), "case %zu: %s",
                  k, tg_error_message());
        cr_assert(eq(int, tg_gradgradcheck(fold_fn, (void *)c, 1, in, NULL), TG_OK),
                  "case %zu: %s", k, tg_error_message());
        th_release_all(3, (tg_tensor *[]){img, cols, x});
    }
}

/* The gradient of the gradient: unfold's backward is fold, recorded, so a
 * create_graph backward gives a graph whose backward is unfold again. */
Test(fold, backward_is_recorded_with_create_graph)
{
    tg_fold_params p = TG_FOLD_PARAMS_INIT;
    p.kernel_size[0] = p.kernel_size[1] = 2;
    tg_tensor *x = th_rand_uniform(TG_F64, 4, (int64_t[]){1, 2, 3, 4}, 5), *y = NULL;
    OK(tg_tensor_set_requires_grad(x, true));
    OK(tg_unfold(&y, x, &p));
    th_expect_double_backward_is_forward(x, y, 9);
    th_release_all(2, (tg_tensor *[]){x, y});
}

Test(fold, empty_batch_and_strided_inputs)
{
    tg_fold_params p = {.kernel_size = {2, 3}, .dilation = {1, 1}, .padding = {1, 1},
                        .stride = {1, 2}};
    tg_tensor *e = th_rand_uniform(TG_F32, 4, (int64_t[]){0, 3, 5, 6}, 1), *ey = NULL, *ef = NULL;
    OK(tg_unfold(&ey, e, &p));
    th_expect_shape(ey, 3, (int64_t[]){0, 18, 6 * 3});
    OK(tg_fold(&ef, ey, (int64_t[]){5, 6}, &p));
    th_expect_shape(ef, 4, (int64_t[]){0, 3, 5, 6});
    /* a transposed view gives what its contiguous copy does */
    tg_tensor *base = th_rand_uniform(TG_F64, 4, (int64_t[]){2, 3, 6, 5}, 2), *t = NULL;
    tg_tensor *tc = NULL, *a = NULL, *b = NULL, *fa = NULL, *fb = NULL;
    OK(tg_transpose(&t, base, 2, 3));
    OK(tg_tensor_contiguous(&tc, t));
    OK(tg_unfold(&a, t, &p));
    OK(tg_unfold(&b, tc, &p));
    th_expect_same_bits("strided unfold", t, a, b);
    /* columns (2, C*K, L) as a transposed view of (2, L, C*K) */
    tg_tensor *lc = th_rand_uniform(TG_F64, 3, (int64_t[]){2, 18, 18}, 3), *cv = NULL;
    tg_tensor *cc = NULL;
    OK(tg_transpose(&cv, lc, 1, 2));
    cr_assert(tg_tensor_is_contiguous(cv) == false);
    OK(tg_tensor_contiguous(&cc, cv));
    OK(tg_fold(&fa, cv, (int64_t[]){5, 6}, &p));
    OK(tg_fold(&fb, cc, (int64_t[]){5, 6}, &p));
    th_expect_same_bits("strided fold", cv, fa, fb);
    th_release_all(13, (tg_tensor *[]){e, ey, ef, base, t, tc, a, b, fa, fb, lc, cv, cc});
}

Test(fold, modules_run_the_functions)
{
    tg_fold_params p = {.kernel_size = {2, 2}, .dilation = {1, 2}, .padding = {1, 0},
                        .stride = {2, 1}};
    tg_module *u = NULL, *fm = NULL, *other = NULL;
    OK(tg_nn_unfold_new(&u, &p));
    OK(tg_nn_fold_new(&fm, (int64_t[]){5, 6}, &p));
    cr_assert(eq(str, (char *)tg_module_type_name(u), "Unfold"));
    cr_assert(eq(str, (char *)tg_module_type_name(fm), "Fold"));
    tg_fold_params q;
    int64_t os[2] = {-1, -1};
    bool is_fold = true;
    OK(tg_nn_fold_params(u, &q, os, &is_fold));
    cr_assert(is_fold == false && os[0] == 0 && os[1] == 0 && memcmp(&q, &p, sizeof p) == 0);
    OK(tg_nn_fold_params(fm, &q, os, &is_fold));
    cr_assert(is_fold && os[0] == 5 && os[1] == 6 && memcmp(&q, &p, sizeof p) == 0);
    OK(tg_nn_fold_params(fm, NULL, NULL, NULL));
    tg_tensor *x = th_rand_uniform(TG_F32, 4, (int64_t[]){2, 3, 5, 6}, 4), *y = NULL;
    tg_tensor *want = NULL, *back = NULL, *fwant = NULL;
    OK(tg_module_forward(u, &y, x));
    OK(tg_unfold(&want, x, &p));
    th_expect_same_bits("Unfold", x, y, want);
    OK(tg_module_forward(fm, &back, y));
    OK(tg_fold(&fwant, y, (int64_t[]){5, 6}, &p));
    th_expect_same_bits("Fold", y, back, fwant);
    OK(tg_nn_flatten_new(&other, 1, -1));
    cr_assert(eq(int, tg_nn_fold_params(other, &q, NULL, NULL), TG_EINVAL));
    th_expect_in(tg_error_message(),
                 "nn_fold_params: m is a Flatten module, not an Unfold or a Fold");
    tg_module *bad = NULL;
    tg_fold_params zero = TG_FOLD_PARAMS_INIT;
    cr_assert(eq(int, tg_nn_unfold_new(&bad, &zero), TG_EINVAL));
    th_expect_in(tg_error_message(), "nn_unfold_new: p->kernel_size[0]=0 must be in [1, ");
    cr_assert(eq(int, tg_nn_fold_new(&bad, (int64_t[]){0, 6}, &p), TG_EINVAL));
    th_expect_in(tg_error_message(), "nn_fold_new: output_size[0]=0 must be in [1, ");
    cr_assert(eq(int, tg_nn_fold_new(&bad, NULL, &p), TG_EINVAL));
    cr_assert(eq(int, tg_nn_unfold_new(NULL, &p), TG_EINVAL));
    cr_assert(bad == NULL);
    /* the module refuses what the function does */
    tg_tensor *x2 = th_rand_uniform(TG_F32, 2, (int64_t[]){5, 6}, 1), *y2 = NULL;
    th_expect_refused(tg_module_forward(u, &y2, x2), TG_ESHAPE,
                      "unfold: x has 2 dims; it must have 3 (C, H, W) or 4 (N, C, H, W)", y2);
    th_release_all(6, (tg_tensor *[]){x, y, want, back, fwant, x2});
    tg_module_release(u);
    tg_module_release(fm);
    tg_module_release(other);
}

Test(fold, refusals_name_the_argument_and_rule)
{
    tg_fold_params p = TG_FOLD_PARAMS_INIT;
    p.kernel_size[0] = p.kernel_size[1] = 2;
    tg_tensor *x = th_rand_uniform(TG_F32, 4, (int64_t[]){2, 3, 5, 6}, 1), *y = NULL;
    tg_tensor *cols = th_rand_uniform(TG_F32, 3, (int64_t[]){2, 12, 20}, 2);
    const int64_t hw[2] = {5, 6};
    th_expect_refused(tg_unfold(NULL, x, &p), TG_EINVAL, "unfold: out, x and p must not be NULL",
                      y);
    th_expect_refused(tg_unfold(&y, x, NULL), TG_EINVAL, "unfold: out, x and p", y);
    th_expect_refused(tg_fold(&y, cols, NULL, &p), TG_EINVAL,
                      "fold: out, x, output_size and p must not be NULL", y);
    tg_fold_params b = p;
    b.kernel_size[1] = 0;
    th_expect_refused(tg_unfold(&y, x, &b), TG_EINVAL,
                      "unfold: p->kernel_size[1]=0 must be in [1, ", y);
    b = p;
    b.stride[0] = 0;
    th_expect_refused(tg_fold(&y, cols, hw, &b), TG_EINVAL, "fold: p->stride[0]=0 must be in [1, ",
                      y);
    b = p;
    b.dilation[1] = -1;
    th_expect_refused(tg_unfold(&y, x, &b), TG_EINVAL, "unfold: p->dilation[1]=-1 must be in [1, ",
                      y);
    b = p;
    b.padding[0] = -1;
    th_expect_refused(tg_unfold(&y, x, &b), TG_EINVAL,
                      "unfold: p->padding[0]=-1 must be in [0, ", y);
    b = p;
    b.padding[1] = (int64_t)1 << 40;
    th_expect_refused(tg_fold(&y, cols, hw, &b), TG_EINVAL, "fold: p->padding[1]=1099511627776", y);
    th_expect_refused(tg_fold(&y, cols, (int64_t[]){5, 0}, &p), TG_EINVAL,
                      "fold: output_size[1]=0 must be in [1, ", y);
    /* ranks, as torch 1.13 */
    tg_tensor *x2 = th_rand_uniform(TG_F32, 2, (int64_t[]){5, 6}, 3);
    tg_tensor *x5 = th_rand_uniform(TG_F32, 5, (int64_t[]){1, 2, 3, 5, 6}, 3);
    th_expect_refused(tg_unfold(&y, x2, &p), TG_ESHAPE,
                      "unfold: x has 2 dims; it must have 3 (C, H, W) or 4 (N, C, H, W)", y);
    th_expect_refused(tg_unfold(&y, x5, &p), TG_ESHAPE, "unfold: x has 5 dims", y);
    th_expect_refused(tg_fold(&y, x, hw, &p), TG_ESHAPE,
                      "fold: x has 4 dims; it must have 2 (C*kh*kw, L) or 3 (N, C*kh*kw, L)", y);
    /* empty dims other than the batch */
    tg_tensor *e = th_rand_uniform(TG_F32, 4, (int64_t[]){2, 0, 5, 6}, 3);
    th_expect_refused(tg_unfold(&y, e, &p), TG_ESHAPE,
                      "unfold: x's dim 1 is 0; every dim but the batch dim must be >= 1", y);
    tg_tensor *e2 = th_rand_uniform(TG_F32, 3, (int64_t[]){0, 5, 6}, 3);
    th_expect_refused(tg_unfold(&y, e2, &p), TG_ESHAPE, "unfold: x's dim 0 is 0", y);
    /* no sliding block */
    b = p;
    b.kernel_size[0] = 7;
    th_expect_refused(tg_unfold(&y, x, &b), TG_ESHAPE,
                      "unfold: H=5 with kernel_size[0]=7, dilation[0]=1, padding[0]=0 has no "
                      "sliding block",
                      y);
    b = p;
    b.dilation[1] = 6;
    th_expect_refused(tg_unfold(&y, x, &b), TG_ESHAPE,
                      "unfold: W=6 with kernel_size[1]=2, dilation[1]=6, padding[1]=0 has no", y);
    th_expect_refused(tg_fold(&y, cols, (int64_t[]){1, 1}, &p), TG_ESHAPE,
                      "fold: output_size[0]=1 with kernel_size[0]=2", y);
    /* fold's channels and L */
    tg_tensor *c13 = th_rand_uniform(TG_F32, 3, (int64_t[]){2, 13, 20}, 4);
    th_expect_refused(tg_fold(&y, c13, hw, &p), TG_ESHAPE,
                      "fold: x's dim 1 is 13; it must be a multiple of "
                      "kernel_size[0]*kernel_size[1]=4",
                      y);
    tg_tensor *l19 = th_rand_uniform(TG_F32, 2, (int64_t[]){12, 19}, 4);
    th_expect_refused(tg_fold(&y, l19, hw, &p), TG_ESHAPE,
                      "fold: x's last dim (L) is 19; it must be the number of sliding blocks 4*5 "
                      "for output_size=(5, 6)",
                      y);
    /* dtypes */
    tg_tensor *xi = NULL;
    OK(tg_tensor_to_dtype(&xi, x, TG_I64));
    th_expect_refused(tg_unfold(&y, xi, &p), TG_EDTYPE,
                      "unfold: x has dtype i64; it must be f32, f64, bf16 or f16", y);
    tg_tensor *ci = NULL;
    OK(tg_tensor_to_dtype(&ci, cols, TG_I32));
    th_expect_refused(tg_fold(&y, ci, hw, &p), TG_EDTYPE, "fold: x has dtype i32", y);
    /* a result too large to address */
    tg_fold_params big = TG_FOLD_PARAMS_INIT;
    big.kernel_size[0] = big.kernel_size[1] = 1;
    big.padding[0] = big.padding[1] = TG_CONV_MAX_PARAM;
    th_expect_refused(tg_unfold(&y, x, &big), TG_EINVAL, "unfold: the result", y);
    th_release_all(10, (tg_tensor *[]){x, cols, x2, x5, e, e2, c13, l19, xi, ci});
}
