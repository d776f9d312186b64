/* tests/test_bf16_gemm.c - the bf16 GEMM kernels (tapegrad/precision.h):
 * each kernel this CPU runs against an f64 reference, on the GEMM itself and
 * on ConvNd / ConvTransposeNd (forward, input and weight gradient) and
 * Linear in bf16, and the kernels against each other.
 *
 * The bound.  Every product of two bf16 values is exact in f32 (8 + 8
 * significant bits), so a kernel's only errors are the f32 additions of a
 * dot product of K terms, at most K u S with u = 2^-24 and S the same dot
 * product of |a| and |b| (to first order, for any order of the additions),
 * and, for a bf16 result, its final rounding, at most 2^-8 |c| (bf16 keeps 8
 * significant bits).  A kernel that drops, repeats or misplaces one product
 * is off by about |a_i b_i|, far above K u S. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "helpers.h"
#include "internal.h"
#include "tapegrad/amp.h"
#include "tapegrad/autograd.h"
#include "tapegrad/conv.h"
#include "tapegrad/nn.h"
#include "tapegrad/ops.h"
#include "tapegrad/precision.h"
#include "tapegrad/registry.h"
#include "tapegrad/status.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;   /* each test starts from it (fork) */
static double rnd(void) { return th_uniform_pm1(&rng_state); }
static int64_t rnd_int(int64_t lo, int64_t hi) { return th_rand_int(&rng_state, lo, hi); }

static const double U32 = 0x1p-24, U_BF16 = 0x1p-8;

/* Runs the test on kernel k, or skips it with the reason. */
static void use_kernel(tg_bf16_kernel k)
{
    if (!tg_bf16_kernel_available(k))
        cr_skip_test("the %s bf16 kernel needs CPU instructions this machine lacks (%s)",
                     tg_bf16_kernel_name(k),
                     k == TG_BF16_KERNEL_AMX ? "AMX-TILE and AMX-BF16, with the OS's permission"
                                             : "AVX-512 F, BW, VL and BF16");
    cr_assert(eq(int, tg_bf16_kernel_set(k), TG_OK));
    cr_assert(eq(int, tg_bf16_kernel_get(), k));
}

/* ---- the GEMM ---- */

/* A random bf16 value widened to f32, of magnitude about 1 (sometimes 0). */
static float rnd_bf16(void)
{
    return tg_bf16_to_f32(tg_f32_to_bf16((float)(rnd() * exp2(rnd_int(-3, 3)))));
}

/* c = op(a) op(b) + beta c on kernel k against f64, element by element, over
 * shapes that cross the blocking (m past 120 and 32, n past 32, k odd and
 * past 384) and leading dimensions past the extents. */
static void gemm_sweep(tg_bf16_kernel k)
{
    use_kernel(k);
    static const int64_t dims[][3] = {{1, 1, 1},    {3, 5, 7},     {12, 32, 2},   {13, 33, 3},
                                      {31, 17, 64}, {33, 65, 385}, {130, 70, 51}, {5, 200, 800},
                                      {64, 48, 1000}};
    for (size_t s = 0; s < sizeof dims / sizeof *dims; s++)
        for (int form = 0; form < 8; form++) {
            const bool ta = form & 1, tb = form & 2;
            const float beta = (form & 4) ? 1.0f : 0.0f;
            const int64_t m = dims[s][0], n = dims[s][1], kk = dims[s][2];
            const int64_t lda = (ta ? m : kk) + 3, ldb = (tb ? kk : n) + 1, ldc = n + 2;
            float *a = malloc(sizeof(float) * (size_t)((ta ? kk : m) * lda));
            float *b = malloc(sizeof(float) * (size_t)((tb ? n : kk) * ldb));
            float *c = malloc(sizeof(float) * (size_t)(m * ldc)), *c0 = malloc(sizeof(float) * (size_t)(m * ldc));
            cr_assert(a && b && c && c0);
            for (int64_t i = 0; i < (ta ? kk : m) * lda; i++) a[i] = rnd_bf16();
            for (int64_t i = 0; i < (tb ? n : kk) * ldb; i++) b[i] = rnd_bf16();
            for (int64_t i = 0; i < m * ldc; i++) c[i] = c0[i] = beta != 0 ? (float)rnd() : NAN;
            tg__gemm_bf16(k, ta, tb, m, n, kk, a, lda, b, ldb, beta, c, ldc);
            for (int64_t i = 0; i < m; i++)
                for (int64_t j = 0; j < n; j++) {
                    double ref = beta != 0 ? c0[i * ldc + j] : 0, sabs = fabs(ref);
                    for (int64_t t = 0; t < kk; t++) {
                        const double p = (double)(ta ? a[t * lda + i] : a[i * lda + t]) *
                                         (tb ? b[j * ldb + t] : b[t * ldb + j]);
                        ref += p;
                        sabs += fabs(p);
                    }
                    const double bound = 1.01 * (double)(kk + 1) * U32 * sabs + 0x1p-120;
                    cr_assert(fabs(c[i * ldc + j] - ref) <= bound,
                              "%s m=%lld n=%lld k=%lld ta=%d tb=%d beta=%g: c[%lld][%lld]=%.9g, "
                              "f64 %.9g, bound %.3g",
                              tg_bf16_kernel_name(k), (long long)m, (long long)n, (long long)kk,
                              ta, tb, beta, (long long)i, (long long)j, c[i * ldc + j], ref,
                              bound);
                }
            for (int64_t i = 0; i < m; i++)   /* the padding between rows is untouched */
                for (int64_t j = n; j < ldc; j++)
                    cr_assert(c[i * ldc + j] == c0[i * ldc + j] ||
                              (isnan(c[i * ldc + j]) && isnan(c0[i * ldc + j])));
            free(a);
            free(b);
            free(c);
            free(c0);
        }
}

Test(bf16_gemm, portable_kernel_against_f64) { gemm_sweep(TG_BF16_KERNEL_PORTABLE); }
Test(bf16_gemm, avx512_kernel_against_f64) { gemm_sweep(TG_BF16_KERNEL_AVX512); }
Test(bf16_gemm, amx_kernel_against_f64) { gemm_sweep(TG_BF16_KERNEL_AMX); }
