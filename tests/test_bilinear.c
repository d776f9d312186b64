/* tests/test_bilinear.c - tg_bilinear (F.bilinear) and nn.Bilinear: values
 * and gradients against PyTorch (a batch, two batch dims, unbatched, an
 * empty batch, one feature), the module with torch's state dict loaded,
 * its init bounds and spread, gradcheck and gradgradcheck in f64, the
 * autocast policy (none: the operands' dtype), bf16, and the refusals.
 * Goldens: scripts/make_nnsmall_goldens.py (tests/golden/nnsmall.safetensors). */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

static tg_tensor *get(const tg_st_file *f, const char *c, const char *what)
{
    return (tg_tensor *)th_golden_get(f, c, what);
}

Test(bilinear, values_and_gradients_match_torch)
{
    tg_st_file *f = th_golden_load("nnsmall.safetensors");
    const int n = atoi(tg_st_meta_get(f, "bilinear.cases"));
    cr_assert(n >= 7, "only %d cases", n);
    for (int i = 0; i < n; i++) {
        char c[32];
        snprintf(c, sizeof c, "bilinear%d", i);
        const bool has_b = strcmp(th_golden_meta(f, c, "bias"), "1") == 0;
        tg_tensor *x1 = th_leaf_clone(get(f, c, "x1")), *x2 = th_leaf_clone(get(f, c, "x2"));
        tg_tensor *w = th_leaf_clone(get(f, c, "weight"));
        tg_tensor *b = has_b ? th_leaf_clone(get(f, c, "bias")) : NULL, *y = NULL;
        OK(tg_bilinear(&y, x1, x2, w, b));
        th_expect_close(c, y, get(f, c, "y"), 1e-12);
        th_backward_with(y, get(f, c, "gy"));
        th_expect_close("gx1", tg_tensor_grad(x1), get(f, c, "gx1"), 1e-12);
        th_expect_close("gx2", tg_tensor_grad(x2), get(f, c, "gx2"), 1e-12);
        th_expect_close("gweight", tg_tensor_grad(w), get(f, c, "gweight"), 1e-12);
        if (has_b) th_expect_close("gbias", tg_tensor_grad(b), get(f, c, "gbias"), 1e-12);
        th_release_all(5, (tg_tensor *[]){x1, x2, w, b, y});
    }
    tg_st_free(f);
}

/* y[r, o] = sum_ij x1[r, i] A[o, i, j] x2[r, j] + b[o], summed by hand. */
Test(bilinear, f32_rows_by_hand)
{
    const int64_t B = 3, NI = 4, NJ = 2, NO = 5;
    tg_tensor *x1 = th_rand_uniform(TG_F32, 2, (int64_t[]){B, NI}, 1);
    tg_tensor *x2 = th_rand_uniform(TG_F32, 2, (int64_t[]){B, NJ}, 2);
    tg_tensor *w = th_rand_uniform(TG_F32, 3, (int64_t[]){NO, NI, NJ}, 3);
    tg_tensor *b = th_rand_uniform(TG_F32, 1, (int64_t[]){NO}, 4), *y = NULL;
    OK(tg_bilinear(&y, x1, x2, w, b));
    cr_assert(eq(int, tg_tensor_dtype(y), TG_F32));
    th_expect_shape(y, 2, (int64_t[]){B, NO});
    for (int64_t r = 0; r < B; r++)
        for (int64_t o = 0; o < NO; o++) {
            double s = th_at(b, o);
            for (int64_t i = 0; i < NI; i++)
                for (int64_t j = 0; j < NJ; j++)
                    s += th_at(x1, r * NI + i) * th_at(w, (o * NI + i) * NJ + j) *
                         th_at(x2, r * NJ + j);
            const double got = th_get(y, (int64_t[]){r, o});
            cr_assert(th_close(got, s, 1e-5, 1e-5), "y[%lld, %lld] = %g, want %g",
                      (long long)r, (long long)o, got, s);
        }
    th_release_all(5, (tg_tensor *[]){x1, x2, w, b, y});
}

static int bilinear_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)user;
    return tg_bilinear(out, in[0], in[1], in[2], n > 3 ? in[3] : NULL);
}

Test(bilinear, first_and_second_derivatives_by_finite_differences)
{
    const int64_t s1[3] = {2, 2, 3}, s2[3] = {2, 2, 2}, ws[3] = {2, 3, 2}, bs[1] = {2};
    tg_tensor *in[4] = {th_rand_uniform(TG_F64, 3, s1, 1), th_rand_uniform(TG_F64, 3, s2, 2),
                        th_rand_uniform(TG_F64, 3, ws, 3), th_rand_uniform(TG_F64, 1, bs, 4)};
    for (int i = 0; i < 4; i++) OK(tg_tensor_set_requires_grad(in[i], true));
    th_expect_gradchecks(bilinear_fn, NULL, 4, in, "bilinear with bias");
    th_expect_gradchecks(bilinear_fn, NULL, 3, in, "bilinear without bias");
    th_release_all(4, in);
    /* out < in2: x2 contracted first */
    const int64_t t1[2] = {3, 2}, t2[2] = {3, 4}, tw[3] = {1, 2, 4}, tb[1] = {1};
    tg_tensor *in2[4] = {th_rand_uniform(TG_F64, 2, t1, 5), th_rand_uniform(TG_F64, 2, t2, 6),
                         th_rand_uniform(TG_F64, 3, tw, 7), th_rand_uniform(TG_F64, 1, tb, 8)};
    for (int i = 0; i < 4; i++) OK(tg_tensor_set_requires_grad(in2[i], true));
    th_expect_gradchecks(bilinear_fn, NULL, 4, in2, "x2 first, with bias");
    th_expect_gradchecks(bilinear_fn, NULL, 3, in2, "x2 first, without bias");
    th_release_all(4, in2);
}

/* A bilinear score (out = 1 < in2) contracts x2 first: the tape keeps
 * rows * in1 values, not the rows * in1 * in2 outer products (64 MB here). */
Test(bilinear, small_out_keeps_a_small_tape)
{
    const int64_t rows = 64, n = 512;
    tg_tensor *x1 = th_rand_uniform(TG_F32, 2, (int64_t[]){rows, n}, 1);
    tg_tensor *x2 = th_rand_uniform(TG_F32, 2, (int64_t[]){rows, n}, 2);
    tg_tensor *w = th_rand_uniform(TG_F32, 3, (int64_t[]){1, n, n}, 3), *y = NULL;
    tg_tensor *ins[3] = {x1, x2, w};
    for (int i = 0; i < 3; i++) OK(tg_tensor_set_requires_grad(ins[i], true));
    int64_t before = 0, after = 0;
    tg_memory_stats(&before, NULL);
    OK(tg_bilinear(&y, x1, x2, w, NULL));
    tg_memory_stats(&after, NULL);
    cr_assert(after - before < 4 * rows * n * 4, "the forward holds %lld bytes",
              (long long)(after - before));
    th_release_all(4, (tg_tensor *[]){x1, x2, w, y});
}

/* Not on torch's autocast lists: inside a bf16 scope f32 operands give an
 * f32 result, the same bits as outside. */
Test(bilinear, runs_in_its_operands_dtype_under_autocast)
{
    tg_tensor *x1 = th_rand_uniform(TG_F32, 2, (int64_t[]){3, 4}, 1);
    tg_tensor *x2 = th_rand_uniform(TG_F32, 2, (int64_t[]){3, 5}, 2);
    tg_tensor *w = th_rand_uniform(TG_F32, 3, (int64_t[]){2, 4, 5}, 3), *y = NULL, *ya = NULL;
    OK(tg_bilinear(&y, x1, x2, w, NULL));
    OK(tg_autocast_begin(TG_BF16));
    const int rc = tg_bilinear(&ya, x1, x2, w, NULL);
    OK(tg_autocast_end());
    OK(rc);
    th_expect_same_bits("under autocast", x1, ya, y);
    th_release_all(5, (tg_tensor *[]){x1, x2, w, y, ya});
}

/* bf16 operands: a bf16 result within bf16 rounding of the f32 one. */
Test(bilinear, bf16_is_close_to_f32)
{
    tg_tensor *src[3] = {th_rand_uniform(TG_F32, 2, (int64_t[]){4, 3}, 5),
                         th_rand_uniform(TG_F32, 2, (int64_t[]){4, 6}, 6),
                         th_rand_uniform(TG_F32, 3, (int64_t[]){3, 3, 6}, 7)};
    tg_tensor *h[3] = {NULL, NULL, NULL}, *hf[3] = {NULL, NULL, NULL};
    for (int i = 0; i < 3; i++) {
        OK(tg_to_dtype(&h[i], src[i], TG_BF16));
        OK(tg_to_dtype(&hf[i], h[i], TG_F32));
    }
    tg_tensor *y = NULL, *yf = NULL, *y32 = NULL;
    OK(tg_bilinear(&y, h[0], h[1], h[2], NULL));
    cr_assert(eq(int, tg_tensor_dtype(y), TG_BF16));
    OK(tg_bilinear(&yf, hf[0], hf[1], hf[2], NULL));
    OK(tg_to_dtype(&y32, y, TG_F32));
    th_expect_close_scaled("bf16 bilinear", y32, yf, 1.6e-2);
    th_release_all(3, src);
    th_release_all(3, h);
    th_release_all(3, hf);
    th_release_all(3, (tg_tensor *[]){y, yf, y32});
}

Test(bilinear, module_with_torch_state_matches_torch)
{
    tg_st_file *f = th_golden_load("nnsmall.safetensors");
    const char *c = "module.bilinear";
    tg_rng rng;
    tg_rng_init(&rng, 3);
    tg_module *m = NULL;
    OK(tg_nn_bilinear_new(&m, atoll(th_golden_meta(f, c, "in1")),
                          atoll(th_golden_meta(f, c, "in2")), atoll(th_golden_meta(f, c, "out")),
                          true, &rng));
    cr_assert(eq(str, (char *)tg_module_type_name(m), "Bilinear"));
    th_expect_state_keys(m, "weight,bias");
    OK(tg_module_to_dtype(m, TG_F64));
    OK(tg_module_load_state_dict(m, f, "module.bilinear.m", true));
    tg_tensor *x1 = th_leaf_clone(get(f, c, "x1")), *x2 = th_leaf_clone(get(f, c, "x2"));
    tg_tensor *y = NULL;
    OK(tg_module_forward_n(m, &y, 2, (tg_tensor *[]){x1, x2}));
    th_expect_close("module y", y, get(f, c, "y"), 1e-12);
    th_backward_with(y, get(f, c, "gy"));
    th_expect_close("gx1", tg_tensor_grad(x1), get(f, c, "gx1"), 1e-12);
    th_expect_close("gx2", tg_tensor_grad(x2), get(f, c, "gx2"), 1e-12);
    th_expect_close("grad weight", tg_tensor_grad(tg_module_find(m, "weight")),
                    get(f, c, "grad.m.weight"), 1e-12);
    th_expect_close("grad bias", tg_tensor_grad(tg_module_find(m, "bias")),
                    get(f, c, "grad.m.bias"), 1e-12);
    /* one input, or three, is refused as torch's missing argument */
    tg_tensor *bad = NULL;
    cr_assert(eq(int, tg_module_forward(m, &bad, x1), TG_EINVAL));
    cr_assert(bad == NULL);
    th_release_all(3, (tg_tensor *[]){x1, x2, y});
    tg_module_release(m);
    tg_st_free(f);
}

/* torch's reset_parameters: weight and bias from U(-1/sqrt(in1),
 * 1/sqrt(in1)) (in2 and out do not enter); the draws fill the interval. */
Test(bilinear, init_bounds_follow_in1)
{
    tg_rng rng;
    tg_rng_init(&rng, 11);
    const int64_t in1 = 7, in2 = 40, out = 30;
    tg_module *m = NULL, *nb = NULL;
    OK(tg_nn_bilinear_new(&m, in1, in2, out, true, &rng));
    const double bound = 1.0 / sqrt((double)in1);
    const tg_tensor *w = tg_module_find(m, "weight"), *b = tg_module_find(m, "bias");
    cr_assert(eq(int, tg_tensor_dtype(w), TG_F32));
    th_expect_shape(w, 3, (int64_t[]){out, in1, in2});
    th_expect_shape(b, 1, (int64_t[]){out});
    double mx = 0, s = 0, s2 = 0;
    const int64_t n = tg_tensor_numel(w);
    for (int64_t i = 0; i < n; i++) {
        const double v = th_at(w, i);
        cr_assert(fabs(v) <= bound, "|%g| > %g", v, bound);
        mx = fmax(mx, fabs(v));
        s += v;
        s2 += v * v;
    }
    /* U(-c, c): mean 0 (sd c / sqrt(3 n)), variance c^2 / 3 */
    cr_assert(mx > 0.99 * bound, "largest %g vs bound %g", mx, bound);
    cr_assert(fabs(s / (double)n) < 5 * bound / sqrt(3.0 * (double)n), "mean %g", s / (double)n);
    cr_assert(fabs(s2 / (double)n / (bound * bound / 3) - 1) < 0.05, "variance %g",
              s2 / (double)n);
    for (int64_t o = 0; o < out; o++) cr_assert(fabs(th_at(b, o)) <= bound);
    int64_t a = 0, c = 0, d = 0;
    bool has_b = false;
    OK(tg_nn_bilinear_params(m, &a, &c, &d, &has_b));
    cr_assert(a == in1 && c == in2 && d == out && has_b);
    OK(tg_nn_bilinear_new(&nb, 2, 3, 4, false, &rng));
    th_expect_state_keys(nb, "weight");
    OK(tg_nn_bilinear_params(nb, NULL, NULL, NULL, &has_b));
    cr_assert(has_b == false);
    tg_module_release(m);
    tg_module_release(nb);
}

Test(bilinear, refusals_name_the_rule)
{
    tg_tensor *x1 = th_rand_uniform(TG_F32, 2, (int64_t[]){2, 3}, 1);
    tg_tensor *x2 = th_rand_uniform(TG_F32, 2, (int64_t[]){2, 5}, 2);
    tg_tensor *w = th_rand_uniform(TG_F32, 3, (int64_t[]){4, 3, 5}, 3);
    tg_tensor *b = th_rand_uniform(TG_F32, 1, (int64_t[]){4}, 4);
    tg_tensor *b3 = th_rand_uniform(TG_F32, 1, (int64_t[]){3}, 4);
    tg_tensor *w2 = th_rand_uniform(TG_F32, 2, (int64_t[]){4, 15}, 5);
    tg_tensor *x13 = th_rand_uniform(TG_F32, 3, (int64_t[]){2, 6, 3}, 6);
    tg_tensor *x23 = th_rand_uniform(TG_F32, 3, (int64_t[]){1, 6, 5}, 7);
    tg_tensor *x1d = th_rand_uniform(TG_F64, 2, (int64_t[]){2, 3}, 8);
    tg_tensor *x24 = th_rand_uniform(TG_F32, 2, (int64_t[]){2, 4}, 9);
    tg_tensor *s0 = th_rand_uniform(TG_F32, 0, NULL, 9), *xi = NULL;
    OK(tg_tensor_to_dtype(&xi, x1, TG_I64));
    th_expect_refused_clean(tg_bilinear(NULL, x1, x2, w, b), TG_EINVAL,
                            "bilinear: out must not be NULL");
    th_expect_refused_clean(tg_bilinear(out_, x1, NULL, w, b), TG_EINVAL,
                            "bilinear: x1, x2 and weight must not be NULL (bias may be)");
    th_expect_refused_clean(tg_bilinear(out_, xi, x2, w, b), TG_EDTYPE,
                            "bilinear: x1 has dtype i64; float dtypes only");
    th_expect_refused_clean(tg_bilinear(out_, x1d, x2, w, b), TG_EDTYPE,
                            "bilinear: x2 has dtype f32 but x1 f64; they must be the same");
    th_expect_refused_clean(tg_bilinear(out_, s0, s0, w, b), TG_ESHAPE,
                            "bilinear: x1 is 0-d; x1 and x2 must have at least 1 dim");
    th_expect_refused_clean(tg_bilinear(out_, x13, x2, w, b), TG_ESHAPE,
                            "bilinear: x1 has 3 dims and x2 2; they must be the same");
    th_expect_refused_clean(tg_bilinear(out_, x13, x23, w, b), TG_ESHAPE,
                            "bilinear: x1 and x2 differ at batch dim 0 (2 and 1)");
    th_expect_refused_clean(tg_bilinear(out_, x1, x2, w2, b), TG_ESHAPE,
                            "bilinear: weight has 2 dims; it must be (out, in1, in2)");
    th_expect_refused_clean(tg_bilinear(out_, x2, x2, w, b), TG_ESHAPE,
                            "bilinear: x1 has 5 features (last dim) but weight (out, in1, in2) "
                            "has in1=3");
    th_expect_refused_clean(tg_bilinear(out_, x1, x24, w, b), TG_ESHAPE,
                            "bilinear: x2 has 4 features (last dim) but weight (out, in1, in2) "
                            "has in2=5");
    th_expect_refused_clean(tg_bilinear(out_, x1, x2, w, b3), TG_ESHAPE,
                            "bilinear: bias must be 1-d with out=4 elements");
    tg_module *m = NULL;
    tg_rng rng;
    tg_rng_init(&rng, 1);
    cr_assert(eq(int, tg_nn_bilinear_new(&m, 0, 3, 4, true, &rng), TG_EINVAL));
    th_expect_in(tg_error_message(), "nn_bilinear_new: in1_f=0, in2_f=3 and out_f=4 must be > 0");
    cr_assert(eq(int, tg_nn_bilinear_new(&m, 2, 3, 4, true, NULL), TG_EINVAL));
    cr_assert(eq(int, tg_nn_bilinear_new(&m, INT64_MAX / 2, 3, 4, true, &rng), TG_EINVAL));
    th_expect_in(tg_error_message(), "is too large");
    cr_assert(m == NULL);
    OK(tg_nn_flatten_new(&m, 1, -1));
    cr_assert(eq(int, tg_nn_bilinear_params(m, NULL, NULL, NULL, NULL), TG_EINVAL));
    th_expect_in(tg_error_message(), "nn_bilinear_params: m is a Flatten module, not Bilinear");
    cr_assert(eq(int, tg_nn_bilinear_params(NULL, NULL, NULL, NULL, NULL), TG_EINVAL));
    tg_module_release(m);
    th_release_all(12, (tg_tensor *[]){x1, x2, w, b, b3, w2, x13, x23, x1d, x24, s0, xi});
}

/* The exporter takes a Bilinear on its two graph inputs (x1, x2) only
 * (tests/test_onnx_modules.c): on one it is refused, naming the module,
 * and no file is written. */
Test(bilinear, onnx_export_refuses_it_cleanly)
{
    th_tmp_dir_make("bilinear_onnx");
    tg_rng rng;
    tg_rng_init(&rng, 1);
    tg_module *m = NULL;
    OK(tg_nn_bilinear_new(&m, 3, 3, 2, true, &rng));
    tg_tensor *x = th_rand_uniform(TG_F32, 2, (int64_t[]){2, 3}, 1);
    char path[512];
    th_tmp_path(path, sizeof path, "b.onnx");
    const int rc = tg_onnx_export(m, x, path, NULL);
    cr_assert(rc < 0, "exported: %d", rc);
    if (tg_onnx_available())
        th_expect_in(tg_error_message(), "module '<top>' (Bilinear) takes the graph inputs (x1, "
                                         "x2), not 1");
    cr_assert(th_exists(path) == false);
    tg_tensor_release(x);
    tg_module_release(m);
    th_tmp_dir_remove();
}
