/* tests/test_gelu_tanh.c - tg_gelu_tanh (F.gelu(x, approximate='tanh')) and
 * nn.GELU(approximate=...): against PyTorch's values and gradients (f32,
 * f64, bf16; large magnitudes, +-0, +-inf, NaN), torch's bits wherever the
 * two tanh agree (its fused multiply-add too), f16 and bf16 rounded once from f32, gradcheck and
 * gradgradcheck in f64, the module and its refusals, the fused conv
 * epilogue.  Goldens: scripts/make_gelu_tanh_goldens.py. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "ops/activation_internal.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

/* The unit roundoff of each golden dtype. */
static double unit(const char *dt)
{
    return !strcmp(dt, "f64") ? 0x1p-53 : !strcmp(dt, "f32") ? 0x1p-24 : 0x1p-8;
}

/* Inputs whose results do not depend on tanh's last bit: t is exactly
 * +-1 or x itself there, so y and dx must be torch's bits. */
static bool exact_input(double x) { return !isfinite(x) || fabs(x) >= 10 || fabs(x) <= 1e-30; }

/* The bound of the header (ops.h): torch's tanh and this one may differ by
 * an ulp of t, which moves y by |0.5 x| ulp(t), plus an ulp of y each way;
 * dx by about |g| (1 + |x| beta (1 + 3 kappa x^2)) ulp(1), its products
 * rounded in another order than torch's fused ones. */
Test(gelu_tanh, every_case_matches_torch)
{
    tg_st_file *f = th_golden_load("gelu_tanh.safetensors");
    const int n = atoi(tg_st_meta_get(f, "cases"));
    int per_dtype[3] = {0};
    for (int i = 0; i < n; i++) {
        char c[16];
        snprintf(c, sizeof c, "case%d", i);
        const char *dt = th_golden_meta(f, c, "dtype");
        const double u = unit(dt);
        const tg_tensor *g = th_golden_get(f, c, "g");
        tg_tensor *x = th_leaf_clone(th_golden_get(f, c, "x")), *y = NULL, *p = NULL, *l = NULL;
        OK(tg_gelu_tanh(&y, x));
        OK(tg_mul(&p, y, (tg_tensor *)g));
        OK(tg_sum(&l, p));
        OK(tg_backward(l, NULL, NULL));
        const tg_tensor *want_y = th_golden_get(f, c, "y"), *want_dx = th_golden_get(f, c, "dx");
        const tg_tensor *dx = tg_tensor_grad(x);
        int64_t same = 0, finite = 0;
        for (int64_t k = 0; k < tg_tensor_numel(x); k++) {
            const double xk = th_at(x, k), yk = th_at(y, k), wy = th_at(want_y, k);
            const double dk = th_at(dx, k), wd = th_at(want_dx, k), gk = th_at(g, k);
            if (exact_input(xk)) {
                const bool same_y = (yk == wy && signbit(yk) == signbit(wy)) ||
                                    (isnan(yk) && isnan(wy));
                cr_assert(same_y, "%s: x[%lld] = %g gives %g, torch %g", c, (long long)k, xk, yk,
                          wy);
                cr_assert(dk == wd || (isnan(dk) && isnan(wd)),
                          "%s: x[%lld] = %g gives dx %g, torch %g", c, (long long)k, xk, dk, wd);
                continue;
            }
            const double tol_y = u * (fabs(xk) + 2 * fabs(wy));
            cr_assert(fabs(yk - wy) <= tol_y, "%s: x[%lld] = %.17g gives %.17g, torch %.17g",
                      c, (long long)k, xk, yk, wy);
            const double slope = 1 + fabs(xk) * 0.8 * (1 + 0.134 * xk * xk);
            const double tol_d = 2 * u * (fabs(gk) * slope + fabs(wd));
            cr_assert(fabs(dk - wd) <= tol_d, "%s: x[%lld] = %.17g gives dx %.17g, torch %.17g",
                      c, (long long)k, xk, dk, wd);
            finite++;
            same += yk == wy;
        }
        /* torch's bits but where the two tanh differ (33 of 509 values in
         * f64, 2 of 511 in f32 here); bf16 rounds torch's bf16 steps */
        if (strcmp(dt, "bf16") != 0)
            cr_assert(same >= finite * 9 / 10, "%s: %lld of %lld values are torch's bits", c,
                      (long long)same, (long long)finite);
        per_dtype[!strcmp(dt, "f64") ? 0 : !strcmp(dt, "f32") ? 1 : 2]++;
        th_release_all(4, (tg_tensor *[]){x, y, p, l});
    }
    for (int d = 0; d < 3; d++) cr_assert(per_dtype[d] >= 1, "dtype %d: %d cases", d, per_dtype[d]);
    tg_st_free(f);
}

/* Inputs where torch's value hangs on its kernel fusing x + kappa x^3 into
 * one multiply-add (the unfused steps give another value, and tanh's last
 * bit does not matter there): torch's bits, f32 and f64. */
Test(gelu_tanh, fused_multiply_add_as_torch)
{
    tg_st_file *f = th_golden_load("gelu_tanh.safetensors");
    const char *dts[2] = {"f32", "f64"};
    for (int d = 0; d < 2; d++) {
        char name[16];
        snprintf(name, sizeof name, "fma_%s", dts[d]);
        const tg_tensor *x = th_golden_get(f, name, "x"), *want = th_golden_get(f, name, "y");
        tg_tensor *y = NULL;
        cr_assert(tg_tensor_numel(x) >= 32);
        OK(tg_gelu_tanh(&y, (tg_tensor *)x));
        th_expect_same_bits(name, x, y, want);
        tg_tensor_release(y);
    }
    tg_st_free(f);
}

/* -0.0 stays -0.0; +inf gives +inf and -inf NaN, as torch's; a tail far
 * below 0 gives -0.0, the sign of 0.5 x (1 + t) with t = -1. */
Test(gelu_tanh, zeros_and_infinities)
{
    tg_tensor *x = th_vec(TG_F32, 5, (double[]){-0.0, INFINITY, -INFINITY, NAN, -1e20}, "x",
                          false);
    tg_tensor *y = NULL;
    OK(tg_gelu_tanh(&y, x));
    cr_assert(th_at(y, 0) == 0 && signbit(th_at(y, 0)));
    cr_assert(th_at(y, 1) == INFINITY);
    cr_assert(isnan(th_at(y, 2)) && isnan(th_at(y, 3)));
    cr_assert(th_at(y, 4) == 0 && signbit(th_at(y, 4)));
    th_release_all(2, (tg_tensor *[]){x, y});
}

/* f16 and bf16: the f32 result rounded once, in both directions. */
Test(gelu_tanh, half_is_f32_rounded_once)
{
    const tg_dtype halves[2] = {TG_F16, TG_BF16};
    for (int h = 0; h < 2; h++) {
        uint64_t s = 61 + (uint64_t)h;
        tg_tensor *x = th_rand_tensor(&s, halves[h], 1, (int64_t[]){300}, -6, 6);
        tg_tensor *xf = NULL, *yf = NULL, *want = NULL, *y = NULL;
        OK(tg_tensor_to_dtype(&xf, x, TG_F32));
        OK(tg_gelu_tanh(&yf, xf));
        OK(tg_tensor_to_dtype(&want, yf, halves[h]));
        OK(tg_gelu_tanh(&y, x));
        th_expect_same_bits("half", x, y, want);
        th_release_all(5, (tg_tensor *[]){x, xf, yf, want, y});
    }
}

static int gelu_tanh_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    (void)user;
    return tg_gelu_tanh(out, in[0]);
}

Test(gelu_tanh, gradcheck_and_gradgradcheck)
{
    uint64_t s = 67;
    tg_tensor *x = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){3, 5}, -3, 3);
    OK(tg_tensor_set_requires_grad(x, true));
    tg_gradcheck_opts o = TG_GRADCHECK_OPTS_INIT;
    cr_assert(eq(int, tg_gradcheck(gelu_tanh_fn, NULL, 1, &x, &o), TG_OK), "%s",
              tg_error_message());
    cr_assert(eq(int, tg_gradgradcheck(gelu_tanh_fn, NULL, 1, &x, &o), TG_OK), "%s",
              tg_error_message());
    tg_tensor_release(x);
}

/* The second derivative against its closed form: with s = beta (1 + 3 kappa
 * x^2), d2y/dx2 = (1 - t^2) s + 0.5 x (-2 t (1 - t^2) s^2 + (1 - t^2) beta 6 kappa x). */
Test(gelu_tanh, second_derivative_matches_closed_form)
{
    const double beta = sqrt(2 / M_PI), kappa = 0.044715;
    tg_tensor *x = th_vec(TG_F64, 5, (double[]){-2.5, -0.7, 0.0, 0.4, 1.9}, "x", true);
    tg_tensor *y = NULL, *l = NULL, *gx = NULL, *l2 = NULL;
    OK(tg_gelu_tanh(&y, x));
    OK(tg_sum(&l, y));
    const tg_backward_opts o = {.create_graph = true};
    OK(tg_grad(&gx, 1, &l, NULL, 1, &x, &o));
    OK(tg_sum(&l2, gx));
    OK(tg_backward(l2, NULL, NULL));
    for (int k = 0; k < 5; k++) {
        const double v = th_at(x, k), t = tanh(beta * (v + kappa * v * v * v));
        const double s = beta * (1 + 3 * kappa * v * v), d = 1 - t * t;
        const double want = d * s + 0.5 * v * (-2 * t * d * s * s + d * beta * 6 * kappa * v);
        cr_assert(th_close(th_at(tg_tensor_grad(x), k), want, 1e-13, 1e-15), "x=%g: %.17g vs %.17g",
                  v, th_at(tg_tensor_grad(x), k), want);
    }
    th_release_all(5, (tg_tensor *[]){x, y, l, gx, l2});
}

Test(gelu_tanh, refusals)
{
    tg_tensor *z = NULL, *xi = NULL;
    uint64_t s = 71;
    tg_tensor *x = th_rand_tensor(&s, TG_F32, 1, (int64_t[]){4}, -1, 1);
    th_expect_refused(tg_gelu_tanh(NULL, x), TG_EINVAL, "gelu_tanh: out", NULL);
    th_expect_refused(tg_gelu_tanh(&z, NULL), TG_EINVAL, "gelu_tanh", z);
    OK(tg_tensor_to_dtype(&xi, x, TG_I32));
    th_expect_refused(tg_gelu_tanh(&z, xi), TG_EDTYPE, "gelu_tanh: input 0 has dtype i32", z);
    th_release_all(2, (tg_tensor *[]){x, xi});
}

/* nn.GELU(approximate=...): "tanh" is the activation module of
 * TG_ACT_GELU_TANH, "none" and NULL that of TG_ACT_GELU; torch's other
 * spellings are refused naming the argument. */
Test(gelu_tanh, module)
{
    tg_module *m = NULL, *e = NULL, *d = NULL, *bad = NULL;
    OK(tg_nn_gelu_new(&m, "tanh"));
    OK(tg_nn_gelu_new(&e, "none"));
    OK(tg_nn_gelu_new(&d, NULL));
    tg_activation act = TG_ACT_NONE;
    OK(tg_nn_activation_params(m, &act, NULL));
    cr_assert(eq(int, act, TG_ACT_GELU_TANH));
    OK(tg_nn_activation_params(e, &act, NULL));
    cr_assert(eq(int, act, TG_ACT_GELU));
    OK(tg_nn_activation_params(d, &act, NULL));
    cr_assert(eq(int, act, TG_ACT_GELU));
    cr_assert(eq(i64, tg_module_parameter_numel(m), 0));
    uint64_t s = 73;
    tg_tensor *x = th_rand_tensor(&s, TG_F32, 2, (int64_t[]){4, 5}, -3, 3), *y = NULL;
    tg_tensor *want = NULL, *ye = NULL, *we = NULL;
    OK(tg_module_forward(m, &y, x));
    OK(tg_gelu_tanh(&want, x));
    th_expect_same_bits("module", x, y, want);
    OK(tg_module_forward(e, &ye, x));
    OK(tg_gelu(&we, x));
    th_expect_same_bits("module none", x, ye, we);
    const char *no[] = {"Tanh", "exact", "", "tanh "};
    for (int i = 0; i < 4; i++) {
        th_expect_refused(tg_nn_gelu_new(&bad, no[i]), TG_EINVAL, "nn_gelu_new: approximate=",
                          NULL);
        cr_assert_null(bad);
    }
    th_expect_refused(tg_nn_gelu_new(NULL, "tanh"), TG_EINVAL, "nn_gelu_new: out", NULL);
    tg_activation pa = TG_ACT_NONE;
    OK(tg_activation_parse("gelu_tanh", &pa, NULL));
    cr_assert(eq(int, pa, TG_ACT_GELU_TANH));
    cr_assert(strncmp(tg_activation_name(TG_ACT_GELU_TANH), "gelu_tanh", 10) == 0);
    th_release_all(5, (tg_tensor *[]){x, y, want, ye, we});
    tg_module_release(m);
    tg_module_release(e);
    tg_module_release(d);
}

/* The fused conv epilogue (no recording: evaluated in double, rounded
 * once) against the conv followed by the op, and the recorded conv, which
 * applies the op itself, bit for bit. */
Test(gelu_tanh, conv_epilogue)
{
    uint64_t s = 79;
    tg_tensor *x = th_rand_tensor(&s, TG_F64, 4, (int64_t[]){2, 3, 5, 5}, -2, 2);
    tg_tensor *w = th_rand_tensor(&s, TG_F64, 4, (int64_t[]){4, 3, 3, 3}, -1, 1);
    tg_tensor *fused = NULL, *lin = NULL, *want = NULL, *rec = NULL;
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    OK(tg_conv(&lin, x, w, NULL, &p));
    OK(tg_gelu_tanh(&want, lin));
    p.act = TG_ACT_GELU_TANH;
    OK(tg_conv(&fused, x, w, NULL, &p));
    th_expect_near("fused", fused, want, 1e-14, 1e-15);
    OK(tg_tensor_set_requires_grad(x, true));
    OK(tg_conv(&rec, x, w, NULL, &p));
    th_expect_same_bits("recorded", x, rec, want);
    cr_assert(tg_tensor_is_leaf(rec) == false);
    th_release_all(6, (tg_tensor *[]){x, w, fused, lin, want, rec});
}

/* gelu_tanh of n f32 by the scalar steps of the f32 kernel: (x x) x, one
 * fused multiply-add, beta u, tanh as tg_tanh's f32 kernel, (0.5 x) (1 + t). */
static void reference_f32(float *o, const float *a, int64_t n)
{
    const float beta = (float)(M_SQRT2 * M_2_SQRTPI * 0.5), kappa = 0.044715f;
    for (int64_t i = 0; i < n; i++) {
        const float x = a[i];
        const float x3 = x * x * x;
        const float u = fmaf(kappa, x3, x);
        o[i] = beta * u;
    }
    tg__tanh_f32_n(o, o, n, false);
    for (int64_t i = 0; i < n; i++) {
        const float h = 0.5f * a[i];
        const float r = 1.0f + o[i];
        o[i] = h * r;
    }
}

/* Each f32 kernel (portable, AVX2 with FMA, AVX-512), called directly and
 * forced through the op with TG_GELU_KERNEL, gives the scalar steps' bits
 * (any NaN for a NaN) on random bit patterns, values in [-12, 12], small
 * and subnormal values, +-0, +-inf and NaN, at lengths that end inside a
 * vector and inside a block; a kernel this CPU lacks is left out with the
 * reason. */
Test(gelu_tanh, f32_kernels_are_the_scalar_steps)
{
    enum { N = 70001 };
    float *a = malloc(sizeof *a * N), *want = malloc(sizeof *want * N);
    float *got = malloc(sizeof *got * N);
    cr_assert(a && want && got);
    uint64_t s = 73;
    static const float special[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 0x1p-149f, -0x1p-140f,
                                    0x1p-126f, 3.0e38f, -3.0e38f, 1.0f, -1.0f};
    for (int64_t i = 0; i < N; i++) {
        const int64_t kind = th_rand_int(&s, 0, 3);
        if (i < (int64_t)(sizeof special / sizeof *special)) a[i] = special[i];
        else if (kind == 0) {
            const uint32_t u = (uint32_t)th_rand_int(&s, 0, INT64_C(0xffffffff));
            memcpy(&a[i], &u, sizeof u);
        } else if (kind == 1) a[i] = (float)(12 * th_uniform_pm1(&s));
        else if (kind == 2) a[i] = (float)(th_uniform_pm1(&s) * 1e-3);
        else a[i] = (float)(th_uniform_pm1(&s) * 0x1p-130);
    }
    reference_f32(want, a, N);
    const char *old = getenv("TG_GELU_KERNEL");
    char saved[32] = "";
    if (old) snprintf(saved, sizeof saved, "%s", old);
    static const int64_t lengths[] = {N, 1, 15, 17, 255, 257, 1000};
    for (int k = TG__GELU_KERNEL_PORTABLE; k <= TG__GELU_KERNEL_AVX512; k++) {
        const char *name = tg__gelu_kernel_name((tg__gelu_kernel)k);
        if (!tg__gelu_kernel_available((tg__gelu_kernel)k)) {
            th_not_run("the %s gelu_tanh kernel is not run: this CPU lacks it", name);
            continue;
        }
        for (size_t l = 0; l < sizeof lengths / sizeof *lengths; l++) {
            const int64_t n = lengths[l], off = l == 0 ? 0 : 3;   /* unaligned too */
            memset(got, 0x55, sizeof *got * N);
            tg__gelu_tanh_f32_n((tg__gelu_kernel)k, got, a + off, n);
            reference_f32(want, a + off, n);
            for (int64_t i = 0; i < n; i++) {
                const bool same = isnan(want[i]) ? isnan(got[i])
                                                 : memcmp(&got[i], &want[i], sizeof *got) == 0;
                cr_assert(same, "%s: x=%a: %a, want %a", name, (double)a[off + i],
                          (double)got[i], (double)want[i]);
            }
            if (n < N) {   /* the element after the last, untouched */
                uint32_t guard;
                memcpy(&guard, &got[n], sizeof guard);
                cr_assert(guard == 0x55555555u, "%s wrote past %lld", name, (long long)n);
            }
        }
        cr_assert(eq(int, setenv("TG_GELU_KERNEL", name, 1), 0));
        cr_assert(eq(int, tg__gelu_kernel_get(), k), "TG_GELU_KERNEL=%s", name);
        double *v = malloc(sizeof *v * N);
        cr_assert(v != NULL);
        for (int64_t i = 0; i < N; i++) v[i] = a[i];
        tg_tensor *x = th_tensor_from(TG_F32, 1, (int64_t[]){N}, v), *y = NULL;
        free(v);
        OK(tg_gelu_tanh(&y, x));
        reference_f32(want, a, N);
        const float *yd = tg_tensor_data(y);
        for (int64_t i = 0; i < N; i++)
            cr_assert(isnan(want[i]) ? isnan(yd[i])
                                     : memcmp(&yd[i], &want[i], sizeof *yd) == 0,
                      "op, TG_GELU_KERNEL=%s: x=%a: %a, want %a", name, (double)a[i],
                      (double)yd[i], (double)want[i]);
        th_release_all(2, (tg_tensor *[]){x, y});
    }
    if (old) setenv("TG_GELU_KERNEL", saved, 1);
    else unsetenv("TG_GELU_KERNEL");
    free(a);
    free(want);
    free(got);
}
