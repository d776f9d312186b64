/* src/ops/gelu_tanh.c - gelu_tanh, torch's F.gelu(x, approximate='tanh'):
 *
 *   y = 0.5 x (1 + tanh(beta (x + kappa x^3))),  beta = sqrt(2 / pi), kappa = 0.044715,
 *
 * with torch's constants (kBeta = M_SQRT2 * M_2_SQRTPI * 0.5, kKappa) in the
 * element type and the steps of torch's vectorized CPU kernel, each rounded
 * to the element type: x3 = (x x) x; u = x + kappa x3 as one fused
 * multiply-add (the contraction torch's AVX2 build makes); inner = beta u;
 * y = (0.5 x) (1 + tanh(inner)).  tanh is the one difference: torch's
 * vectorized tanh (Sleef, within 1 ulp) against libm's in f64 and
 * tg_tanh's (correctly rounded but for rare halfway cases) in f32.  Where
 * the two tanh agree the result is torch's, bit for bit; where they differ
 * by an ulp of t, y differs by at most |0.5 x| ulp(t) plus an ulp of y (for
 * x far below 0, where 1 + t cancels, that is a large relative but a tiny
 * absolute difference: torch gives -0.0 from x = -7.2 in f64, here a
 * value near -4e-16).  f16 and bf16 are computed as f32 and rounded once.
 * NaN stays; gelu_tanh(+inf) = +inf, gelu_tanh(-inf) = NaN (-inf * 0), as
 * torch's; -0.0 stays -0.0.
 *
 * The gradient is torch's GeluBackward for approximate='tanh':
 *   da = g ((0.5 (1 + t)) + (0.5 x) (1 - t^2) beta (1 + 3 kappa x^2)),
 * t = tanh(inner), in the order of torch's kernel, from mul, add, tanh and
 * scalar ops, so differentiable again (a half x takes it in f32, rounded
 * once at the end).  torch's kernel contracts two of its steps into fused
 * multiply-adds; the recorded ops round each, a few ulp apart. */
#include <assert.h>
#include <math.h>
#include <stdatomic.h>

#include "core/core.h"
#include "autograd/tape.h"
#include "ops/activation_internal.h"
#include "ops/elementwise.h"
#include "ops/families.h"
#include "ops/pointwise_internal.h"
#include "tapegrad/ops.h"

/* torch's kBeta and kKappa (aten/src/ATen/native/cpu/Activation.cpp) */
#define GELU_BETA (M_SQRT2 * M_2_SQRTPI * 0.5)
#define GELU_KAPPA 0.044715

/* Each step its own statement, so that no compiler contracts more than the
 * one fma torch's kernel has. */
static void gelu_tanh_f64(double *o, const double *a, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        const double x = a[i];
        const double x3 = x * x * x;
        const double u = fma(GELU_KAPPA, x3, x);
        const double t = tanh(GELU_BETA * u);
        const double h = 0.5 * x;
        const double r = 1.0 + t;
        o[i] = h * r;
    }
}

/* The f32 kernels (activation_internal.h): in blocks of GELU_BLOCK, the inner
 * arguments beta (x + kappa x3), then their tanh as tg_tanh's f32 kernel
 * (tg__tanh_f32_n, vectorized where the CPU has AVX2), then the products
 * (0.5 x) (1 + t).  The kernels differ only in how the first and last steps
 * run: portable C (fmaf, a library call on a baseline x86-64 build), AVX2
 * with FMA, AVX-512; each step rounds as the portable one (the fused
 * multiply-add is one rounding everywhere), so all give the same bits.
 * o may be a. */
enum { GELU_BLOCK = 256 };

static const char *const kernel_names[] = {
    [TG__GELU_KERNEL_AUTO] = "auto",
    [TG__GELU_KERNEL_PORTABLE] = "portable",
    [TG__GELU_KERNEL_AVX2] = "avx2",
    [TG__GELU_KERNEL_AVX512] = "avx512",
};

bool tg__gelu_kernel_available(tg__gelu_kernel k)
{
    if (k == TG__GELU_KERNEL_PORTABLE) return true;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    if (k == TG__GELU_KERNEL_AVX2)
        return tg__isa_allows(TG__ISA_AVX2) && __builtin_cpu_supports("avx2") &&
               __builtin_cpu_supports("fma");
    if (k == TG__GELU_KERNEL_AVX512)
        return tg__isa_allows(TG__ISA_AVX512) && __builtin_cpu_supports("avx512f");
#endif
    return false;
}

const char *tg__gelu_kernel_name(tg__gelu_kernel k)
{
    return k >= TG__GELU_KERNEL_AUTO && k <= TG__GELU_KERNEL_AVX512 ? kernel_names[k] : "?";
}

static bool available(int k) { return tg__gelu_kernel_available((tg__gelu_kernel)k); }

tg__gelu_kernel tg__gelu_kernel_get(void)
{
    static atomic_flag told = ATOMIC_FLAG_INIT;
    const int best = available(TG__GELU_KERNEL_AVX512) ? TG__GELU_KERNEL_AVX512
                     : available(TG__GELU_KERNEL_AVX2) ? TG__GELU_KERNEL_AVX2
                                                       : TG__GELU_KERNEL_PORTABLE;
    return (tg__gelu_kernel)tg__kernel_from_env("TG_GELU_KERNEL", "a gelu_tanh", kernel_names,
                                                TG__GELU_KERNEL_AVX512 + 1, available, best,
                                                &told);
}

/* t[j] = beta (x + kappa x3), x3 = (x x) x, for the m elements x of a. */
static void inner_portable(float *t, const float *a, int64_t m)
{
    const float beta = (float)GELU_BETA, kappa = (float)GELU_KAPPA;
    for (int64_t j = 0; j < m; j++) {
        const float x = a[j];
        const float x3 = x * x * x;
        const float u = fmaf(kappa, x3, x);
        t[j] = beta * u;
    }
}

/* o[j] = (0.5 x) (1 + t[j]) for the m elements x of a. */
static void outer_portable(float *o, const float *a, const float *t, int64_t m)
{
    for (int64_t j = 0; j < m; j++) {
        const float h = 0.5f * a[j];
        const float r = 1.0f + t[j];
        o[j] = h * r;
    }
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define GELU_AVX2 __attribute__((target("avx2,fma")))
#define GELU_AVX512 __attribute__((target("avx512f")))

/* inner_portable and outer_portable eight lanes at a time; the last m % 8
 * elements by them. */
GELU_AVX2 static void inner_avx2(float *t, const float *a, int64_t m)
{
    const __m256 beta = _mm256_set1_ps((float)GELU_BETA), kappa = _mm256_set1_ps((float)GELU_KAPPA);
    int64_t j = 0;
    for (; j + 8 <= m; j += 8) {
        const __m256 x = _mm256_loadu_ps(a + j);
        const __m256 x3 = _mm256_mul_ps(_mm256_mul_ps(x, x), x);
        _mm256_storeu_ps(t + j, _mm256_mul_ps(beta, _mm256_fmadd_ps(kappa, x3, x)));
    }
    inner_portable(t + j, a + j, m - j);
}

GELU_AVX2 static void outer_avx2(float *o, const float *a, const float *t, int64_t m)
{
    const __m256 half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f);
    int64_t j = 0;
    for (; j + 8 <= m; j += 8) {
        const __m256 h = _mm256_mul_ps(half, _mm256_loadu_ps(a + j));
        _mm256_storeu_ps(o + j, _mm256_mul_ps(h, _mm256_add_ps(one, _mm256_loadu_ps(t + j))));
    }
    outer_portable(o + j, a + j, t + j, m - j);
}

/* Sixteen lanes at a time, the last m % 16 elements in masked lanes. */
GELU_AVX512 static void inner_avx512(float *t, const float *a, int64_t m)
{
    const __m512 beta = _mm512_set1_ps((float)GELU_BETA), kappa = _mm512_set1_ps((float)GELU_KAPPA);
    for (int64_t j = 0; j < m; j += 16) {
        const __mmask16 k = m - j >= 16 ? 0xffff : (__mmask16)((1u << (m - j)) - 1);
        const __m512 x = _mm512_maskz_loadu_ps(k, a + j);
        const __m512 x3 = _mm512_mul_ps(_mm512_mul_ps(x, x), x);
        _mm512_mask_storeu_ps(t + j, k, _mm512_mul_ps(beta, _mm512_fmadd_ps(kappa, x3, x)));
    }
}

GELU_AVX512 static void outer_avx512(float *o, const float *a, const float *t, int64_t m)
{
    const __m512 half = _mm512_set1_ps(0.5f), one = _mm512_set1_ps(1.0f);
    for (int64_t j = 0; j < m; j += 16) {
        const __mmask16 k = m - j >= 16 ? 0xffff : (__mmask16)((1u << (m - j)) - 1);
        const __m512 h = _mm512_mul_ps(half, _mm512_maskz_loadu_ps(k, a + j));
        const __m512 r = _mm512_add_ps(one, _mm512_maskz_loadu_ps(k, t + j));
        _mm512_mask_storeu_ps(o + j, k, _mm512_mul_ps(h, r));
    }
}
#endif

void tg__gelu_tanh_f32_n(tg__gelu_kernel kern, float *o, const float *a, int64_t n)
{
    float t[GELU_BLOCK];
    for (int64_t at = 0; at < n; at += GELU_BLOCK) {
        const int64_t m = n - at < GELU_BLOCK ? n - at : GELU_BLOCK;
        switch (kern) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
        case TG__GELU_KERNEL_AVX512: inner_avx512(t, a + at, m); break;
        case TG__GELU_KERNEL_AVX2: inner_avx2(t, a + at, m); break;
#endif
        default: inner_portable(t, a + at, m);
        }
        tg__tanh_f32_n(t, t, m, true);
        switch (kern) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
        case TG__GELU_KERNEL_AVX512: outer_avx512(o + at, a + at, t, m); break;
        case TG__GELU_KERNEL_AVX2: outer_avx2(o + at, a + at, t, m); break;
#endif
        default: outer_portable(o + at, a + at, t, m);
        }
    }
}

static void k_gelu_tanh(tg_dtype cdt, void *out, const void *a, const void *b, int64_t n,
                        double s)
{
    (void)b, (void)s;
    if (cdt == TG_F64) gelu_tanh_f64(out, a, n);
    else tg__gelu_tanh_f32_n(tg__gelu_kernel_get(), out, a, n);
}

/* An integer x is refused, as torch refuses it; x is saved. */
static int gelu_tanh_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                             const void *params)
{
    (void)n, (void)params;
    TG_TRY(tg__ew_unary("gelu_tanh", out, in[0], k_gelu_tanh, 0.0));
    if (ctx) tg__ctx_save(ctx, in[0]);
    return TG_OK;
}

/* torch's order, x f32 or f64 (the scalars rounded to it, as torch's
 * scalar_t constants; 3 kappa is their product in that type):
 *   x2 = x x, x3 = x2 x, inner = beta (x + kappa x3), t = tanh(inner),
 *   left = 0.5 x, right = 1 + t, dleft = 0.5 right, dtanh = 1 - t t,
 *   dinner = beta (1 + 3kappa x2), dright = (left dtanh) dinner,
 *   gi = g (dleft + dright). */
static int gelu_tanh_grad(tg_tensor *x, tg_tensor *g, const void *params, tg_tensor **gi)
{
    (void)params;
    enum { N = 17 };
    const bool f64 = x->dtype == TG_F64;
    const double beta = f64 ? GELU_BETA : (double)(float)GELU_BETA;
    const double kappa = f64 ? GELU_KAPPA : (double)(float)GELU_KAPPA;
    const double kappa3 = f64 ? 3.0 * kappa : (double)(float)(3.0 * kappa);
    tg_tensor *t[N] = {NULL};
    int rc;
    TG_TRY_GOTO(tg_mul(&t[0], x, x));                    /* x2 */
    TG_TRY_GOTO(tg_mul(&t[1], t[0], x));                 /* x3 */
    TG_TRY_GOTO(tg_mul_scalar(&t[2], t[1], kappa));
    TG_TRY_GOTO(tg_add(&t[3], x, t[2]));
    TG_TRY_GOTO(tg_mul_scalar(&t[4], t[3], beta));       /* inner */
    TG_TRY_GOTO(tg_tanh(&t[5], t[4]));                   /* t */
    TG_TRY_GOTO(tg_mul_scalar(&t[6], x, 0.5));           /* left */
    TG_TRY_GOTO(tg_add_scalar(&t[7], t[5], 1.0));        /* right */
    TG_TRY_GOTO(tg_mul_scalar(&t[8], t[7], 0.5));        /* dleft */
    TG_TRY_GOTO(tg_mul(&t[9], t[5], t[5]));
    TG_TRY_GOTO(tg_rsub_scalar(&t[10], t[9], 1.0));      /* dtanh */
    TG_TRY_GOTO(tg_mul_scalar(&t[11], t[0], kappa3));
    TG_TRY_GOTO(tg_add_scalar(&t[12], t[11], 1.0));
    TG_TRY_GOTO(tg_mul_scalar(&t[13], t[12], beta));     /* dinner */
    TG_TRY_GOTO(tg_mul(&t[14], t[6], t[10]));
    TG_TRY_GOTO(tg_mul(&t[15], t[14], t[13]));           /* dright */
    TG_TRY_GOTO(tg_add(&t[16], t[8], t[15]));
    TG_TRY_GOTO(tg_mul(gi, g, t[16]));
done:
    for (int i = 0; i < N; i++) tg_tensor_release(t[i]);
    return rc;
}

static int gelu_tanh_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    tg_tensor *x;
    TG_TRY(tg__ctx_saved(ctx, 0, &x));
    return tg__grad_in_f32(gelu_tanh_grad, NULL, x, g, &gi[0]);
}

static const tg_op_schema gelu_tanh_op = {
    .name = "gelu_tanh", .arity = 1, .amp = TG_AMP_KEEP,
    .forward = gelu_tanh_forward, .backward = gelu_tanh_backward, .double_backward = true,
    .vjp = "da = g * (0.5 (1 + t) + 0.5 a (1 - t^2) beta (1 + 3 kappa a^2)), "
           "t = tanh(beta (a + kappa a^3))"};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__gelu_tanh_ops[] = {&gelu_tanh_op};
static_assert(sizeof tg__gelu_tanh_ops / sizeof tg__gelu_tanh_ops[0] == TG__gelu_tanh_N,
              "src/ops/families.h must count the gelu_tanh ops");

int tg_gelu_tanh(tg_tensor **out, tg_tensor *x)
{
    TG_CHECK(out != NULL, TG_EINVAL, "gelu_tanh: out must not be NULL");
    return tg_op_call(&gelu_tanh_op, out, 1, (tg_tensor *[]){x}, NULL, 0);
}
