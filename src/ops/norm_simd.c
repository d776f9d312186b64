/* src/ops/norm_simd.c - batch_norm's x86 SIMD pieces: the per-channel sums
 * of four f32 channels at once, and the last pass over a block of half
 * channels computed and rounded in registers (norm.c's work on the blocks
 * of norm_blocks.c's loop).
 *
 * Sums.  bn_sum (norm_kernels_tmpl.h) adds a channel's terms into four
 * double accumulators, term i into acc[i mod 4], row after row: one chain of
 * dependent adds, which bounds it at the add's latency.  Here the four
 * accumulators are the lanes of one AVX2 register and four channels are
 * summed side by side, four independent chains; each lane takes the same
 * terms in the same order, a row's last s mod 4 terms in lanes 0, 1, 2
 * (the other lanes add -0.0, which leaves every value as it is), and the
 * lanes are added as bn_sum adds them, so the sums are bn_sum's bits.
 *
 * Half rows.  The f32 kernels of norm_kernels_tmpl.h write a row into an f32 buffer
 * that the bulk conversion then rounds into the half tensor: a store and a
 * load more per value.  Here eight values at a time are computed with the
 * same f32 operations in the same order (ISO C: no contraction) and rounded
 * with the bulk conversion's rule, so the bits are those of the two passes
 * (tests/test_norm_simd.c compares them). */
#include <stdatomic.h>

#include "core/half_simd.h"
#include "core/core.h"
#include "ops/norm_internal.h"

/* process-wide, as the workers of a batch_norm must see it too */
static atomic_bool simd_off;

void tg__bn_set_simd(bool on) { atomic_store(&simd_off, !on); }

static bool use_simd(void) { return !atomic_load(&simd_off) && tg__cpu_has_half_simd(); }

/* o = half((p - mu) * k + sh), n values */
static void affine_scalar(tg_dtype dt, const float *p, int64_t n, float mu, float k, float sh,
                          uint16_t *o)
{
    for (int64_t i = 0; i < n; i++) o[i] = tg__f32_to_half(dt, (p[i] - mu) * k + sh);
}

/* o = half(kt * (q - a - (p - mu) * bc)), n values */
static void dx_scalar(tg_dtype dt, const float *p, const float *q, int64_t n,
                      const tg__bn_dx_factors *f, uint16_t *o)
{
    for (int64_t i = 0; i < n; i++)
        o[i] = tg__f32_to_half(dt, f->kt * (q[i] - f->a - (p[i] - f->mu) * f->bc));
}

#ifdef TG__HAVE_X86_SIMD
/* The term of four values v (x - mean) with their weights q: q v, v v or v. */
TG__AVX2 static inline __m256d sum_term(__m256d v, __m256d q, int kind)
{
    return kind == 2 ? _mm256_mul_pd(q, v) : kind == 1 ? _mm256_mul_pd(v, v) : v;
}

TG__AVX2 static void sum4_avx2(const float *x, const float *gr, const double *mean, int kind,
                               int64_t n, int64_t rstride, int64_t s, double *out)
{
    const int64_t s4 = s & ~(int64_t)3, r = s - s4;
    const __m128i lanes = _mm_setr_epi32(0, 1, 2, 3);
    const __m128i m32 = _mm_cmplt_epi32(lanes, _mm_set1_epi32((int)r));
    const __m256d m64 = _mm256_castsi256_pd(_mm256_cvtepi32_epi64(m32));
    const __m256d negz = _mm256_set1_pd(-0.0);
    __m256d acc[4], mu[4];
    for (int k = 0; k < 4; k++) {
        acc[k] = _mm256_setzero_pd();
        mu[k] = _mm256_set1_pd(mean[k]);
    }
    for (int64_t row = 0; row < n; row++) {
        const int64_t base = row * rstride;
        for (int64_t i = 0; i < s4; i += 4)
            for (int k = 0; k < 4; k++) {
                const int64_t e = base + k * s + i;
                const __m256d v = _mm256_sub_pd(_mm256_cvtps_pd(_mm_loadu_ps(x + e)), mu[k]);
                const __m256d q = kind == 2 ? _mm256_cvtps_pd(_mm_loadu_ps(gr + e)) : v;
                acc[k] = _mm256_add_pd(acc[k], sum_term(v, q, kind));
            }
        if (r)
            for (int k = 0; k < 4; k++) {
                const int64_t e = base + k * s + s4;
                const __m256d v =
                    _mm256_sub_pd(_mm256_cvtps_pd(_mm_maskload_ps(x + e, m32)), mu[k]);
                const __m256d q =
                    kind == 2 ? _mm256_cvtps_pd(_mm_maskload_ps(gr + e, m32)) : v;
                acc[k] = _mm256_add_pd(acc[k], _mm256_blendv_pd(negz, sum_term(v, q, kind), m64));
            }
    }
    for (int k = 0; k < 4; k++) {
        double a[4];
        _mm256_storeu_pd(a, acc[k]);
        out[k] = (a[0] + a[1]) + (a[2] + a[3]);
    }
}

TG__AVX2 static void affine_avx2(tg_dtype dt, const float *p, int64_t n, float mu, float k,
                                 float sh, uint16_t *o)
{
    const __m256 vm = _mm256_set1_ps(mu), vk = _mm256_set1_ps(k), vs = _mm256_set1_ps(sh);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(p + i), vm), vk);
        tg__half_store8(dt, o + i, _mm256_add_ps(v, vs));
    }
    affine_scalar(dt, p + i, n - i, mu, k, sh, o + i);
}

TG__AVX2 static void dx_avx2(tg_dtype dt, const float *p, const float *q, int64_t n,
                             const tg__bn_dx_factors *f, uint16_t *o)
{
    const __m256 vkt = _mm256_set1_ps(f->kt), va = _mm256_set1_ps(f->a),
                 vm = _mm256_set1_ps(f->mu), vbc = _mm256_set1_ps(f->bc);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 t = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(p + i), vm), vbc);
        const __m256 u = _mm256_sub_ps(_mm256_sub_ps(_mm256_loadu_ps(q + i), va), t);
        tg__half_store8(dt, o + i, _mm256_mul_ps(vkt, u));
    }
    dx_scalar(dt, p + i, q + i, n - i, f, o + i);
}
#endif

bool tg__bn_sum4_f32(const float *x, const float *gr, const double *mean, bool centred_sq,
                     int64_t n, int64_t rstride, int64_t s, double *out)
{
#ifdef TG__HAVE_X86_SIMD
    if (use_simd()) {
        sum4_avx2(x, gr, mean, gr ? 2 : centred_sq ? 1 : 0, n, rstride, s, out);
        return true;
    }
#endif
    (void)x, (void)gr, (void)mean, (void)centred_sq, (void)n, (void)rstride, (void)s, (void)out;
    return false;
}

bool tg__bn_half_simd(void) { return use_simd(); }

void tg__bn_half_affine(tg_dtype dt, const float *p, int64_t n, float mu, float k, float sh,
                        uint16_t *o, bool simd)
{
#ifdef TG__HAVE_X86_SIMD
    if (simd) {
        affine_avx2(dt, p, n, mu, k, sh, o);
        return;
    }
#endif
    affine_scalar(dt, p, n, mu, k, sh, o);
}

void tg__bn_half_dx(tg_dtype dt, const float *p, const float *q, int64_t n,
                    const tg__bn_dx_factors *f, uint16_t *o, bool simd)
{
#ifdef TG__HAVE_X86_SIMD
    if (simd) {
        dx_avx2(dt, p, q, n, f, o);
        return;
    }
#endif
    dx_scalar(dt, p, q, n, f, o);
}
