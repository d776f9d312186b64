/* tests/test_quant.c - int8 quantization, and the quantized ops against
 * PyTorch's quantized modules.
 *
 * Oracles: quantization against rint() loops written here; the quantized ops
 * against PyTorch's quantized modules (golden files).  The quantized ops
 * against the float op and every int8 kernel against the portable one are
 * in test_quant_ops.c; the requantizer, the GEMM kernels and the SIMD
 * requantization in test_quant_kernels.c, fake quantization and the
 * observers in test_fake_quant.c. */
#include <dirent.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "helpers.h"
#include "quant_fixtures.h"
#include "quant/quant_internal.h"
#include "../tools/case.h"
#include "tapegrad/autograd.h"
#include "tapegrad/conv.h"
#include "tapegrad/ops.h"
#include "tapegrad/quant.h"
#include "tapegrad/registry.h"
#include "tapegrad/status.h"

#ifndef TG_SOURCE_ROOT
#define TG_SOURCE_ROOT "."
#endif

/* ---- quantize / dequantize ---- */

Test(quant, quantize_rounds_half_to_even_and_saturates)
{
    const double s = 0.5;
    const float xs[] = {0.25f, 0.75f, 1.25f, -0.25f, -0.75f, 100.0f, -100.0f, 0.0f};
    int64_t n = 8;
    tg_tensor *x = NULL, *qu = NULL, *qi = NULL;
    cr_assert(eq(int, tg_tensor_from_data(&x, TG_F32, 1, &n, xs), TG_OK));
    cr_assert(eq(int, tg_quantize(&qu, x, TG_U8, s, 10), TG_OK));
    cr_assert(eq(int, tg_quantize(&qi, x, TG_I8, s, -3), TG_OK));
    /* x/s = 0.5, 1.5, 2.5, -0.5, -1.5, 200, -200, 0 -> rint 0, 2, 2, -0, -2 */
    const int want_u[] = {10, 12, 12, 10, 8, 210, 0, 10};
    const int want_i[] = {-3, -1, -1, -3, -5, 127, -128, -3};
    cr_assert(eq(int, tg_tensor_dtype(qu), TG_U8));
    cr_assert(eq(int, tg_tensor_dtype(qi), TG_I8));
    for (int i = 0; i < 8; i++) {
        cr_assert(eq(dbl, th_at(qu, i), want_u[i]), "u8 element %d", i);
        cr_assert(eq(dbl, th_at(qi, i), want_i[i]), "i8 element %d", i);
    }
    tg_tensor_release(x);
    tg_tensor_release(qu);
    tg_tensor_release(qi);
}

/* tg_quantize of a contiguous f32 tensor (on the SIMD of each int8 kernel
 * this CPU has: eight lanes at a time with AVX-512, four with AVX2, none on
 * portable; split over the threads past 65536 elements) is
 * clamp(rint(x / s) + zp) in f64, NaN giving zp: ties of every parity, NaN,
 * +-inf, huge and tiny values, -0.0, every tail length. */
static void quantize_formula_case(void);
Test(quant, quantize_of_contiguous_f32_is_the_f64_formula_everywhere)
{
    const tg_int8_kernel kerns[] = {TG_INT8_KERNEL_PORTABLE, TG_INT8_KERNEL_AVX2,
                                    TG_INT8_KERNEL_VNNI};
    for (int k = 0; k < 3; k++) {
        if (tg_int8_kernel_set(kerns[k]) < 0) {
            th_not_run("this CPU has no %s kernel: its quantization was not run",
                        tg_int8_kernel_name(kerns[k]));
            continue;
        }
        quantize_formula_case();
    }
    tg_int8_kernel_set(TG_INT8_KERNEL_AUTO);
}

static void quantize_formula_case(void)
{
    const double scales[] = {0.5, 0.1, 1e-3, 3.7};
    const int32_t zps[2][3] = {{0, 128, 255}, {-128, 0, 127}};
    for (int big = 0; big < 2; big++) {
        const int64_t n = big ? 70001 : 1003;
        float *xs = malloc((size_t)n * sizeof *xs);
        for (int si = 0; si < 4; si++) {
            const double s = scales[si];
            for (int64_t i = 0; i < n; i++) {
                const int kind = (int)(i % 9);
                xs[i] = kind == 0   ? (float)(((double)(i % 601) - 300.5) * s)   /* ties */
                        : kind == 1 ? NAN
                        : kind == 2 ? (i % 2 ? INFINITY : -INFINITY)
                        : kind == 3 ? (i % 2 ? 3e38f : -3e38f)
                        : kind == 4 ? (i % 2 ? 1e-40f : -0.0f)
                                    : (float)(rnd() * 300.0 * s);
            }
            tg_tensor *x = NULL;
            cr_assert(eq(int, tg_tensor_from_data(&x, TG_F32, 1, &n, xs), TG_OK));
            for (int d = 0; d < 2; d++)
                for (int z = 0; z < 3; z++) {
                    const tg_dtype dt = d ? TG_I8 : TG_U8;
                    const int32_t zp = zps[d][z], lo = d ? -128 : 0, hi = d ? 127 : 255;
                    tg_tensor *q = NULL, *back = NULL;
                    cr_assert(eq(int, tg_quantize(&q, x, dt, s, zp), TG_OK));
                    cr_assert(eq(int, tg_dequantize(&back, q, s, zp), TG_OK));
                    const float *bf = tg_tensor_cdata(back);
                    for (int64_t i = 0; i < n; i++) {
                        const double r = rint((double)xs[i] / s) + zp;
                        const double want = isnan(r) ? zp : r < lo ? lo : r > hi ? hi : r;
                        if (th_at(q, i) != want)
                            cr_assert(th_at(q, i) == want,
                                      "%s kernel, n %lld, scale %g, %s zp %d: element %lld (%g) "
                                      "-> %g, want %g", tg_int8_kernel_name(tg_int8_kernel_get()),
                                      (long long)n, s, tg_dtype_name(dt), (int)zp, (long long)i,
                                      (double)xs[i], th_at(q, i), want);
                        /* and back: (float)(s * (q - zp)) */
                        const float wantf = (float)(s * (want - zp));
                        if (memcmp(&bf[i], &wantf, sizeof wantf) != 0)
                            cr_assert(false, "%s kernel: dequantize of element %lld: %g, want %g",
                                      tg_int8_kernel_name(tg_int8_kernel_get()), (long long)i,
                                      (double)bf[i], (double)wantf);
                    }
                    tg_tensor_release(q), tg_tensor_release(back);
                }
            tg_tensor_release(x);
        }
        free(xs);
    }
}

Test(quant, round_trip_within_half_a_step)
{
    int64_t shape[] = {3, 50};
    tg_tensor *x = mk(TG_F32, 2, shape, -1.0, 1.0), *q = NULL, *d = NULL;
    const double s = 2.0 / 255;
    cr_assert(eq(int, tg_quantize(&q, x, TG_U8, s, 128), TG_OK));
    cr_assert(eq(int, tg_dequantize(&d, q, s, 128), TG_OK));
    cr_assert(eq(int, tg_tensor_dtype(d), TG_F32));
    for (int64_t i = 0; i < 150; i++) {
        double e = fabs(th_at(d, i) - th_at(x, i));
        cr_assert(e <= s / 2 * (1 + 1e-6), "element %lld off by %g", (long long)i, e);
        cr_assert(eq(dbl, th_at(q, i), fmin(255, rint(th_at(x, i) / s) + 128)));
    }
    tg_tensor_release(x);
    tg_tensor_release(q);
    tg_tensor_release(d);
}

Test(quant, per_channel_uses_the_axis_index)
{
    int64_t shape[] = {2, 3, 4};
    const double scales[] = {0.01, 0.02, 0.05};
    tg_tensor *x = mk(TG_F32, 3, shape, -3.0, 3.0), *q = NULL, *d = NULL;
    cr_assert(eq(int, tg_quantize_per_channel(&q, x, 1, 3, scales), TG_OK));
    cr_assert(eq(int, tg_dequantize_per_channel(&d, q, -2, 3, scales), TG_OK));
    for (int64_t i = 0; i < 24; i++) {
        const int64_t c = (i / 4) % 3;
        const double want = fmax(-128, fmin(127, rint(th_at(x, i) / scales[c])));
        cr_assert(eq(dbl, th_at(q, i), want), "element %lld", (long long)i);
        cr_assert(epsilon_eq(dbl, th_at(d, i), want * scales[c], 1e-6));
    }
    tg_tensor_release(x);
    tg_tensor_release(q);
    tg_tensor_release(d);
}

/* ConvTranspose weight (C_in=4, cog=3, K=2), groups 2: element (ci, j, k)
 * belongs to output channel (ci / 2) * 3 + j. */
Test(quant, conv_transpose_weight_scale_is_per_output_channel_per_group)
{
    int64_t shape[] = {4, 3, 2};
    double scales[6];
    for (int c = 0; c < 6; c++) scales[c] = 0.003 * (c + 1);
    tg_tensor *w = mk(TG_F32, 3, shape, -0.5, 0.5), *q = NULL, *d = NULL;
    cr_assert(eq(int, tg_quantize_conv_weight(&q, w, true, 2, 6, scales), TG_OK));
    cr_assert(eq(int, tg_dequantize_conv_weight(&d, q, true, 2, 6, scales), TG_OK));
    for (int64_t ci = 0; ci < 4; ci++)
        for (int64_t j = 0; j < 3; j++)
            for (int64_t k = 0; k < 2; k++) {
                int64_t i = (ci * 3 + j) * 2 + k;
                double s = scales[(ci / 2) * 3 + j];
                double want = fmax(-128, fmin(127, rint(th_at(w, i) / s)));
                cr_assert(eq(dbl, th_at(q, i), want), "(%lld,%lld,%lld)", (long long)ci,
                          (long long)j, (long long)k);
                cr_assert(epsilon_eq(dbl, th_at(d, i), want * s, 1e-6));
            }
    tg_tensor_release(w);
    tg_tensor_release(q);
    tg_tensor_release(d);
}

/* Bytes equal to tg_quantize of a fresh copy of x's values (so never the
 * shortcut of a dequantized tensor). */
static void expect_fresh_quantize(tg_tensor *q, tg_tensor *x, tg_dtype dt, double s, int32_t zp,
                                  const char *what)
{
    tg_tensor *fresh = NULL, *qf = NULL;
    cr_assert(eq(int, tg_tensor_clone(&fresh, x), TG_OK));
    cr_assert(eq(int, tg_quantize(&qf, fresh, dt, s, zp), TG_OK));
    cr_assert(memcmp(tg_tensor_cdata(q), tg_tensor_cdata(qf), (size_t)tg_tensor_numel(q)) == 0,
              "%s", what);
    tg_tensor_release(fresh), tg_tensor_release(qf);
}

/* tg_quantize of what tg_dequantize made, with the same parameters, copies
 * the bytes it came from (every byte value, both dtypes, a view of it), and
 * they are the bytes quantizing the values afresh gives; other parameters,
 * or a write to either tensor since, quantize afresh; the copy is not
 * shared with the source. */
Test(quant, quantize_after_dequantize_gives_the_source_bytes)
{
    const double scales[] = {0.02, 0.37, 1.0 / 3, 3e-8, 4000.0};
    for (int d = 0; d < 2; d++)
        for (size_t si = 0; si < sizeof scales / sizeof *scales; si++) {
            const tg_dtype dt = d ? TG_I8 : TG_U8;
            const int32_t zp = d ? -5 : 131;
            const double sc = scales[si];
            const int64_t shape[2] = {16, 32};
            uint8_t bytes[512];
            for (int i = 0; i < 512; i++) bytes[i] = (uint8_t)(i * 7 + si);
            tg_tensor *q = NULL, *x = NULL, *back = NULL, *view = NULL, *other = NULL;
            cr_assert(eq(int, tg_tensor_from_data(&q, dt, 2, shape, bytes), TG_OK));
            cr_assert(eq(int, tg_dequantize(&x, q, sc, zp), TG_OK));
            cr_assert(eq(int, tg_quantize(&back, x, dt, sc, zp), TG_OK));
            cr_assert(memcmp(tg_tensor_cdata(back), bytes, 512) == 0, "%s, scale %g",
                      tg_dtype_name(dt), sc);
            expect_fresh_quantize(back, x, dt, sc, zp, "the source's bytes are the fresh ones");
            /* a view (the reshape an Unflatten makes) */
            const int64_t flat = 512;
            cr_assert(eq(int, tg_reshape(&view, x, 1, &flat), TG_OK));
            tg_tensor_release(back);
            cr_assert(eq(int, tg_quantize(&back, view, dt, sc, zp), TG_OK));
            cr_assert(memcmp(tg_tensor_cdata(back), bytes, 512) == 0);
            /* not shared: writing the copy leaves q as it was */
            cr_assert(eq(int, tg_tensor_set_flat(back, 3, 9), TG_OK));
            cr_assert(eq(int, th_at(q, 3), (double)(d ? (int8_t)bytes[3] : bytes[3])));
            tg_tensor_release(back);
            /* other parameters: quantized afresh */
            cr_assert(eq(int, tg_quantize(&other, x, dt, sc * 2, zp), TG_OK));
            expect_fresh_quantize(other, x, dt, sc * 2, zp, "another scale");
            tg_tensor_release(other);
            cr_assert(eq(int, tg_quantize(&other, x, dt, sc, zp + 1), TG_OK));
            expect_fresh_quantize(other, x, dt, sc, zp + 1, "another zero point");
            tg_tensor_release(other);
            /* a write to the source: x's values are still the old bytes' */
            cr_assert(eq(int, tg_tensor_set_flat(q, 0, d ? 100 : 3), TG_OK));
            cr_assert(eq(int, tg_quantize(&other, x, dt, sc, zp), TG_OK));
            cr_assert(eq(int, th_at(other, 0), (double)(d ? (int8_t)bytes[0] : bytes[0])));
            expect_fresh_quantize(other, x, dt, sc, zp, "after a write to the source");
            tg_tensor_release(other);
            tg_tensor_release(x), tg_tensor_release(view);
            /* a write to the dequantized tensor, in place and through its data */
            cr_assert(eq(int, tg_dequantize(&x, q, sc, zp), TG_OK));
            cr_assert(eq(int, tg_tensor_set_flat(x, 5, 0.0), TG_OK));
            cr_assert(eq(int, tg_quantize(&other, x, dt, sc, zp), TG_OK));
            expect_fresh_quantize(other, x, dt, sc, zp, "after tg_tensor_set_flat");
            cr_assert(eq(int, th_at(other, 5), (double)zp));
            tg_tensor_release(other), tg_tensor_release(x);
            cr_assert(eq(int, tg_dequantize(&x, q, sc, zp), TG_OK));
            ((float *)tg_tensor_data(x))[7] = 0.0f;
            cr_assert(eq(int, tg_quantize(&other, x, dt, sc, zp), TG_OK));
            cr_assert(eq(int, th_at(other, 7), (double)zp));
            tg_tensor_release(other), tg_tensor_release(x), tg_tensor_release(q);
        }
}

Test(quant, quantize_errors_change_nothing)
{
    int64_t n = 4;
    tg_tensor *x = mk(TG_F32, 1, &n, -1, 1), *out = NULL, *xi = NULL;
    double scales[] = {0.1, 0.1, 0.1};
    cr_assert(eq(int, tg_quantize(&out, x, TG_U8, 0.0, 0), TG_EINVAL));
    cr_assert(eq(int, tg_quantize(&out, x, TG_U8, NAN, 0), TG_EINVAL));
    cr_assert(eq(int, tg_quantize(&out, x, TG_U8, 0.1, 256), TG_EINVAL));
    cr_assert(eq(int, tg_quantize(&out, x, TG_I8, 0.1, -129), TG_EINVAL));
    cr_assert(eq(int, tg_quantize(&out, x, TG_I32, 0.1, 0), TG_EDTYPE));
    cr_assert(eq(int, tg_quantize(&out, NULL, TG_U8, 0.1, 0), TG_EINVAL));
    cr_assert(eq(int, tg_quantize_per_channel(&out, x, 0, 3, scales), TG_ESHAPE));
    cr_assert(eq(int, tg_quantize_per_channel(&out, x, 1, 4, scales), TG_EINVAL));
    cr_assert(eq(int, tg_quantize(&xi, x, TG_U8, 0.1, 0), TG_OK));
    cr_assert(eq(int, tg_quantize(&out, xi, TG_U8, 0.1, 0), TG_EDTYPE));
    cr_assert(eq(int, tg_dequantize(&out, x, 0.1, 0), TG_EDTYPE));
    cr_assert(eq(int, tg_dequantize_per_channel(&out, xi, 0, 4, scales), TG_EDTYPE));
    cr_assert(strstr(tg_error_message(), "i8") != NULL);
    cr_assert(out == NULL);
    tg_tensor_release(x);
    tg_tensor_release(xi);
}

/* ---- goldens from PyTorch's quantized modules (scripts/make_quant_goldens.py) ---- */

/* Runs one case through tools/case.c (the code behind `tapegrad run-op`);
 * returns the number of elements that differ from torch (each by <= 1). */
static int64_t run_golden(const char *name, int64_t *numel)
{
    char err[1024] = "";
    tg_st_file *cf = th_golden_load("quant/%s.case.safetensors", name);
    tg_st_file *rf = th_golden_load("quant/%s.result.safetensors", name), *res = NULL;
    tg_case c;
    cr_assert(eq(int, tg_case_parse(&c, cf, err, sizeof err), TG_OK), "%s: %s", name, err);
    cr_assert(c.quantized);
    cr_assert(eq(int, tg_case_run(&res, &c, TG_CONV_ALGO_DEFAULT, err, sizeof err), TG_OK),
              "%s: %s", name, err);
    tg_tensor *got = tg_st_get(res, "y"), *want = tg_st_get(rf, "y"), *ref = tg_st_get(rf, "y_ref");
    cr_assert(got && want && ref);
    cr_assert(eq(int, tg_tensor_dtype(got), tg_tensor_dtype(want)));
    cr_assert(tg_tensor_same_shape(got, want), "%s: shape", name);
    /* Elements where torch itself is off the f64 reference by > 1 unit (an
     * onednn anomaly, listed by the generator) are checked against the
     * reference only; they must be exactly the listed ones. */
    const char *outl = tg_st_meta_get(rf, "torch_outliers");
    int64_t diff = 0, n_out = 0;
    *numel = tg_tensor_numel(want);
    for (int64_t i = 0; i < *numel; i++) {
        cr_assert(fabs(th_at(got, i) - th_at(ref, i)) <= 1,
                  "%s: element %lld: got %g, f64 reference %g", name, (long long)i, th_at(got, i),
                  th_at(ref, i));
        if (fabs(th_at(want, i) - th_at(ref, i)) > 1) {
            char idx[32], list[512];
            snprintf(idx, sizeof idx, ",%lld,", (long long)i);
            snprintf(list, sizeof list, ",%s,", outl ? outl : "");
            cr_assert(strstr(list, idx) != NULL, "%s: torch outlier %lld not listed", name, (long long)i);
            n_out++;
            continue;
        }
        double e = fabs(th_at(got, i) - th_at(want, i));
        cr_assert(e <= 1, "%s: element %lld: got %g, torch %g", name, (long long)i,
                  th_at(got, i), th_at(want, i));
        diff += e != 0;
    }
    cr_assert(n_out <= 1, "%s: %lld torch outliers", name, (long long)n_out);
    tg_st_free(res), tg_st_free(cf), tg_st_free(rf);
    return diff;
}

Test(quant, goldens_from_torch_within_one_unit)
{
    char dir[4096];
    th_golden_path(dir, sizeof dir, "quant");
    DIR *d = opendir(dir);
    cr_assert(d != NULL, "cannot open %s", dir);
    struct dirent *e;
    int cases = 0;
    int64_t diff = 0, total = 0;
    const char suffix[] = ".case.safetensors";
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name), sl = sizeof suffix - 1;
        if (len <= sl || strcmp(e->d_name + len - sl, suffix) != 0) continue;
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(len - sl), e->d_name);
        int64_t n = 0;
        diff += run_golden(name, &n);
        total += n;
        cases++;
    }
    closedir(d);
    cr_assert(cases >= 6, "only %d golden cases", cases);
    cr_assert(diff * 50 <= total, "%lld of %lld elements differ from torch by one",
              (long long)diff, (long long)total);
    cr_log_info("quant goldens: %d cases, %lld of %lld elements off by one", cases,
                (long long)diff, (long long)total);
}

/* Case files: quantization keys only on quantized ops; their values checked. */
Test(quant, case_parser_checks_quant_metadata)
{
    int64_t xs[] = {1, 2, 3}, ws[] = {2, 2, 2};
    tg_tensor *x = NULL, *w = NULL;
    tg_tensor_zeros(&x, TG_U8, 3, xs);
    tg_tensor_zeros(&w, TG_I8, 3, ws);
    struct { const char *op, *key, *value; int rc; } rows[] = {
        {"conv_transpose1d", "x_scale", "0.1", TG_EINVAL},          /* float op */
        {"quantized_conv_transpose1d", "x_scale", "-1", TG_EINVAL},
        {"quantized_conv_transpose1d", "x_scale", "0.1", TG_EINVAL}, /* y_scale missing */
        {"quantized_conv_transposeXd", "x_scale", "0.1", TG_EINVAL},
    };
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        tg_st_file *f = NULL;
        char err[512] = "";
        cr_assert(eq(int, tg_st_new(&f), TG_OK));
        tg_st_set(f, "x", x);
        tg_st_set(f, "weight", w);
        tg_st_meta_set(f, "op", rows[i].op);
        tg_st_meta_set(f, "weight_scale", "0.1");
        tg_st_meta_set(f, rows[i].key, rows[i].value);
        tg_case c;
        c.op = "untouched";
        cr_assert(eq(int, tg_case_parse(&c, f, err, sizeof err), rows[i].rc), "row %zu", i);
        cr_assert(strlen(err) > 0 && strcmp(c.op, "untouched") == 0, "row %zu: %s", i, err);
        tg_st_free(f);
    }
    /* a complete case runs and gives y in x's dtype */
    tg_st_file *f = NULL;
    char err[512] = "";
    tg_st_new(&f);
    tg_st_set(f, "x", x);
    tg_st_set(f, "weight", w);
    tg_st_meta_set(f, "op", "quantized_conv_transpose1d");
    tg_st_meta_set(f, "x_scale", "0.1");
    tg_st_meta_set(f, "y_scale", "0.2");
    tg_st_meta_set(f, "weight_scale", "0.5,0.25");
    tg_case c;
    cr_assert(eq(int, tg_case_parse(&c, f, err, sizeof err), TG_OK), "%s", err);
    cr_assert(eq(i64, c.q.n_weight_scales, 2));
    tg_st_file *res = NULL;
    cr_assert(eq(int, tg_case_run(&res, &c, TG_CONV_ALGO_DEFAULT, err, sizeof err), TG_OK), "%s", err);
    tg_tensor *y = tg_st_get(res, "y");
    cr_assert(eq(int, tg_tensor_dtype(y), TG_U8));
    cr_assert(eq(i64, tg_tensor_dim(y, 2), 4));
    tg_st_free(res), tg_st_free(f);
    tg_tensor_release(x), tg_tensor_release(w);
}

/* A min-max observer accepts an infinity, but its range then has no finite
 * scale: qparams is TG_EINVAL naming the channel (never scale inf, nor for
 * [-inf, 0] a zero point from (int64_t)rintf(NaN)), and writes nothing.  The public quant_min/quant_max are checked as torch's observer
 * arguments are (qmin < qmax inside the dtype's range, 0 included). */
Test(quant, observer_qparams_refuse_infinite_ranges_and_bad_quant_ranges)
{
    const int64_t s4[1] = {4}, s22[2] = {2, 2};
    tg_tensor *pinf = NULL, *ninf = NULL, *ch = NULL;
    tg_tensor_from_data(&pinf, TG_F32, 1, s4, (float[]){-1, 2, 3, INFINITY});
    tg_tensor_from_data(&ninf, TG_F32, 1, s4, (float[]){-INFINITY, -1, -2, -3});
    tg_tensor_from_data(&ch, TG_F32, 2, s22, (float[]){1, -2, 3, -INFINITY});   /* channels on axis 1 */
    tg_tensor *const bad[2] = {pinf, ninf};
    for (int i = 0; i < 2; i++)
        for (int sym = 0; sym < 2; sym++) {
            tg_observer o;
            cr_assert(eq(int, tg_observer_init(&o, TG_OBSERVER_MINMAX, TG_U8, sym, 0), TG_OK));
            cr_assert(eq(int, tg_observer_update(&o, bad[i]), TG_OK));
            double s = 7;
            int32_t z = 7;
            cr_assert(eq(int, tg_observer_qparams(&o, &s, &z), TG_EINVAL), "case %d sym %d", i, sym);
            cr_assert(strstr(tg_error_message(), "is not finite") != NULL, "%s", tg_error_message());
            cr_assert(s == 7 && z == 7);
            tg_observer_free(&o);
        }
    tg_observer o;
    cr_assert(eq(int, tg_observer_init(&o, TG_OBSERVER_PER_CHANNEL, TG_I8, false, 1), TG_OK));
    cr_assert(eq(int, tg_observer_update(&o, ch), TG_OK));
    double s[2] = {7, 7};
    int32_t z[2] = {7, 7};
    cr_assert(eq(int, tg_observer_channel_qparams(&o, 2, s, z), TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "channel 1's observed range") != NULL, "%s",
              tg_error_message());
    cr_assert(s[0] == 7 && z[0] == 7, "channel 0 was written before the error");
    tg_observer_free(&o);

    const int32_t ranges[][2] = {{10, 5}, {1, 255}, {-5, 255}, {0, 256}, {7, 7}};
    for (size_t k = 0; k < sizeof ranges / sizeof ranges[0]; k++) {
        cr_assert(eq(int, tg_observer_init(&o, TG_OBSERVER_MINMAX, TG_U8, false, 0), TG_OK));
        cr_assert(eq(int, tg_observer_update(&o, ch), TG_OK));
        o.quant_min = ranges[k][0];
        o.quant_max = ranges[k][1];
        double ps;
        int32_t pz;
        cr_assert(eq(int, tg_observer_qparams(&o, &ps, &pz), TG_EINVAL), "range %zu", k);
        cr_assert(strstr(tg_error_message(), "quant_m") != NULL ||
                      strstr(tg_error_message(), "include 0") != NULL, "%s", tg_error_message());
        tg_observer_free(&o);
    }
    /* a narrower range that holds 0 is fine (torch's reduce_range: [0, 127]) */
    cr_assert(eq(int, tg_observer_init(&o, TG_OBSERVER_MINMAX, TG_U8, false, 0), TG_OK));
    o.quant_max = 127;
    tg_tensor *t = NULL;
    tg_tensor_from_data(&t, TG_F32, 1, s4, (float[]){-1, 2, 3, 0.5f});
    cr_assert(eq(int, tg_observer_update(&o, t), TG_OK));
    double ps;
    int32_t pz;
    cr_assert(eq(int, tg_observer_qparams(&o, &ps, &pz), TG_OK));
    cr_assert(epsilon_eq(dbl, ps, 4.0f / 127.0f, 1e-9));   /* (3 - -1) / 127 */
    cr_assert(eq(i32, pz, 32));                             /* 0 - rint(-1 / (4/127)) = 31.75 -> 32 */
    tg_observer_free(&o);
    tg_tensor_release(pinf), tg_tensor_release(ninf), tg_tensor_release(ch), tg_tensor_release(t);
}
