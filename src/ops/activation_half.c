/* src/ops/activation_half.c - relu, leaky_relu and their one-pass gradient
 * on contiguous f16/bf16 arrays in one pass, without f32 buffers.
 *
 * The general half path (elementwise.c) converts each 4096-element chunk of
 * every input into an f32 buffer, runs the f32 kernel over the buffers and
 * rounds the result chunk: three trips through L1/L2 per element.  Here eight
 * elements (AVX2) or sixteen (AVX-512 BW) are converted in registers,
 * computed with the f32 kernels' arithmetic and rounded straight into the
 * output: the same bits, since the
 * conversions are exact one way and the bulk conversions' rounding the other
 * (tests/test_activation.c, half_relu_family_one_pass_same_bits_as_general_path,
 * compares the two paths over every half value). */
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "core/half_simd.h"
#include "core/core.h"
#include "ops/activation_internal.h"

/* The f32 kernels of activation.c (k_relu, k_leaky, k_masked_grad,
 * k_relu_grad), which both the vector loops and the scalar tail below
 * compute:
 *   relu:        a < 0 ? 0 : a   (NaN and -0.0 stay)
 *   leaky:       (float)((double)a * (a > 0 ? 1.0 : s))
 *   masked_grad: g * (a > 0 ? 1.0f : (float)s)
 *   relu_grad:   g * (a <= 0 ? 0.0f : 1.0f)                                    */
static float half_ld(tg_dtype dt, uint16_t h)
{
    return dt == TG_F16 ? tg_f16_to_f32(h) : tg_bf16_to_f32(h);
}

static void act_scalar(tg__half_act op, tg_dtype dt, const uint16_t *a, const uint16_t *g,
                       uint16_t *o, int64_t n, double s)
{
    for (int64_t i = 0; i < n; i++) {
        const float x = half_ld(dt, a[i]);
        float r;
        if (op == TG__HALF_RELU) r = x < 0 ? 0 : x;
        else if (op == TG__HALF_LEAKY) r = (float)((double)x * (x > 0 ? 1.0 : s));
        else if (op == TG__HALF_RELU_GRAD) r = half_ld(dt, g[i]) * (x <= 0 ? 0.0f : 1.0f);
        else r = half_ld(dt, g[i]) * (x > 0 ? 1.0f : (float)s);
        o[i] = tg__f32_to_half(dt, r);
    }
}

/* leaky_relu's product in f32.  The f32 kernel computes
 * (float)((double)x * s): the product rounded into double, then into f32,
 * then (here) into the half.  x * (float)s in f32, one rounding fewer and
 * half the vector work, gives the same half for every x of a dtype when no
 * product lies so near a half's rounding boundary that the two differ: for
 * the slopes met in practice (0.2, 0.01, 0.1, ... in bf16) it is so, for
 * others not (f16 at slope 0.3: 39 values of the 65536 differ).  So it is
 * taken only for a (dtype, slope) whose every half was checked, once per
 * thread and slope (the last eight kept): 65536 products each way. */
static bool leaky_f32_check(tg_dtype dt, double s)
{
    const float sf = (float)s;
    for (uint32_t h = 0; h <= 0xFFFF; h++) {
        const float x = half_ld(dt, (uint16_t)h);
        const float f = x > 0 ? 1.0f : sf;
        if (tg__f32_to_half(dt, (float)((double)x * (x > 0 ? 1.0 : s))) !=
            tg__f32_to_half(dt, x * f))
            return false;
    }
    return true;
}

/* The last LEAKY_KEPT (dtype, slope) checked on this thread and their
 * answers, so that a model's few slopes are checked once each. */
enum { LEAKY_KEPT = 8 };
static _Thread_local struct {
    int n, next;
    struct {
        bool ok;
        tg_dtype dt;
        uint64_t s;   /* the slope's bits */
    } e[LEAKY_KEPT];
} leaky_kept;

bool tg__half_leaky_f32_ok(tg_dtype dt, double s)
{
    uint64_t bits;
    memcpy(&bits, &s, sizeof bits);
    for (int i = 0; i < leaky_kept.n; i++)
        if (leaky_kept.e[i].dt == dt && leaky_kept.e[i].s == bits) return leaky_kept.e[i].ok;
    const int i = leaky_kept.next;
    leaky_kept.next = (i + 1) % LEAKY_KEPT;
    if (leaky_kept.n < LEAKY_KEPT) leaky_kept.n++;
    leaky_kept.e[i].ok = leaky_f32_check(dt, s);
    leaky_kept.e[i].dt = dt, leaky_kept.e[i].s = bits;
    return leaky_kept.e[i].ok;
}

#ifdef TG__HAVE_X86_SIMD
TG__AVX2 static void act_avx2(tg__half_act op, tg_dtype dt, const uint16_t *a, const uint16_t *g,
                              uint16_t *o, int64_t n, double s, bool leaky32)
{
    const __m256 z = _mm256_setzero_ps(), one = _mm256_set1_ps(1.0f), sf = _mm256_set1_ps((float)s);
    const __m256d zd = _mm256_setzero_pd(), oned = _mm256_set1_pd(1.0), sd = _mm256_set1_pd(s);
    int64_t i = 0;
    /* one loop per op, so that none tests op per block */
    if (op == TG__HALF_RELU) {
        for (; i + 8 <= n; i += 8) {
            const __m256 x = tg__half_load8(dt, a + i);
            /* not (x < 0): x >= 0 (-0.0 included) or NaN */
            const __m256 keep = _mm256_cmp_ps(x, z, _CMP_NLT_UQ);
            tg__half_store8(dt, o + i, _mm256_and_ps(x, keep));
        }
    } else if (op == TG__HALF_LEAKY && leaky32) {
        for (; i + 8 <= n; i += 8) {
            /* x * (x > 0 ? 1 : (float)s) in f32: the same halves (leaky_f32_ok) */
            const __m256 x = tg__half_load8(dt, a + i);
            const __m256 pos = _mm256_cmp_ps(x, z, _CMP_GT_OQ);
            tg__half_store8(dt, o + i, _mm256_mul_ps(x, _mm256_blendv_ps(sf, one, pos)));
        }
    } else if (op == TG__HALF_LEAKY) {
        for (; i + 8 <= n; i += 8) {
            /* in double, as the f32 kernel: x * (x > 0 ? 1 : s), then to f32 */
            const __m256 x = tg__half_load8(dt, a + i);
            const __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(x));
            const __m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(x, 1));
            const __m256d flo = _mm256_blendv_pd(sd, oned, _mm256_cmp_pd(lo, zd, _CMP_GT_OQ));
            const __m256d fhi = _mm256_blendv_pd(sd, oned, _mm256_cmp_pd(hi, zd, _CMP_GT_OQ));
            tg__half_store8(dt, o + i, _mm256_set_m128(_mm256_cvtpd_ps(_mm256_mul_pd(hi, fhi)),
                                                       _mm256_cvtpd_ps(_mm256_mul_pd(lo, flo))));
        }
    } else if (op == TG__HALF_RELU_GRAD) {
        for (; i + 8 <= n; i += 8) {
            /* g * (a <= 0 ? 0 : 1) (NaN a: g) */
            const __m256 off = _mm256_cmp_ps(tg__half_load8(dt, a + i), z, _CMP_LE_OQ);
            tg__half_store8(dt, o + i,
                            _mm256_mul_ps(tg__half_load8(dt, g + i), _mm256_andnot_ps(off, one)));
        }
    } else {
        for (; i + 8 <= n; i += 8) {
            const __m256 pos = _mm256_cmp_ps(tg__half_load8(dt, a + i), z, _CMP_GT_OQ);
            tg__half_store8(dt, o + i,
                            _mm256_mul_ps(tg__half_load8(dt, g + i), _mm256_blendv_ps(sf, one, pos)));
        }
    }
    act_scalar(op, dt, a + i, g ? g + i : NULL, o + i, n - i, s);
}
#endif

static atomic_bool avx512_off;   /* process-wide: the ranges run on the pool's threads */

void tg__act_set_half_avx512(bool on) { atomic_store(&avx512_off, !on); }

#ifdef TG__HAVE_X86_SIMD
/* act_avx2 sixteen elements at a time, the rest by act_avx2. */
TG__AVX512 static void act_avx512(tg__half_act op, tg_dtype dt, const uint16_t *a,
                                  const uint16_t *g, uint16_t *o, int64_t n, double s,
                                  bool leaky32)
{
    const __m512 z = _mm512_setzero_ps(), one = _mm512_set1_ps(1.0f), sf = _mm512_set1_ps((float)s);
    const __m512d zd = _mm512_setzero_pd(), oned = _mm512_set1_pd(1.0), sd = _mm512_set1_pd(s);
    int64_t i = 0;
    if (op == TG__HALF_RELU) {
        for (; i + 16 <= n; i += 16) {
            const __m512 x = tg__half_load16(dt, a + i);
            const __mmask16 keep = _mm512_cmp_ps_mask(x, z, _CMP_NLT_UQ);
            tg__half_store16(dt, o + i, _mm512_maskz_mov_ps(keep, x));
        }
    } else if (op == TG__HALF_LEAKY && leaky32) {
        for (; i + 16 <= n; i += 16) {
            const __m512 x = tg__half_load16(dt, a + i);
            const __mmask16 pos = _mm512_cmp_ps_mask(x, z, _CMP_GT_OQ);
            tg__half_store16(dt, o + i, _mm512_mul_ps(x, _mm512_mask_blend_ps(pos, sf, one)));
        }
    } else if (op == TG__HALF_LEAKY) {
        for (; i + 16 <= n; i += 16) {
            const __m512 x = tg__half_load16(dt, a + i);
            const __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(x));
            const __m512d hi =
                _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1)));
            const __mmask8 plo = _mm512_cmp_pd_mask(lo, zd, _CMP_GT_OQ),
                           phi = _mm512_cmp_pd_mask(hi, zd, _CMP_GT_OQ);
            const __m512d flo = _mm512_mask_blend_pd(plo, sd, oned),
                          fhi = _mm512_mask_blend_pd(phi, sd, oned);
            const __m256 ylo = _mm512_cvtpd_ps(_mm512_mul_pd(lo, flo));
            const __m256 yhi = _mm512_cvtpd_ps(_mm512_mul_pd(hi, fhi));
            const __m512d y = _mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512(ylo)),
                                                 _mm256_castps_pd(yhi), 1);
            tg__half_store16(dt, o + i, _mm512_castpd_ps(y));
        }
    } else if (op == TG__HALF_RELU_GRAD) {
        for (; i + 16 <= n; i += 16) {
            const __mmask16 off = _mm512_cmp_ps_mask(tg__half_load16(dt, a + i), z, _CMP_LE_OQ);
            tg__half_store16(dt, o + i,
                             _mm512_mul_ps(tg__half_load16(dt, g + i),
                                           _mm512_mask_blend_ps(off, one, z)));
        }
    } else {
        for (; i + 16 <= n; i += 16) {
            const __mmask16 pos = _mm512_cmp_ps_mask(tg__half_load16(dt, a + i), z, _CMP_GT_OQ);
            tg__half_store16(dt, o + i,
                             _mm512_mul_ps(tg__half_load16(dt, g + i),
                                           _mm512_mask_blend_ps(pos, sf, one)));
        }
    }
    act_avx2(op, dt, a + i, g ? g + i : NULL, o + i, n - i, s, leaky32);
}

static bool use_avx512(void) { return tg__cpu_has_avx512bw() && !atomic_load(&avx512_off); }

typedef struct {
    tg__half_act op;
    tg_dtype dt;
    const uint16_t *a, *g;
    uint16_t *o;
    double s;
    bool leaky32;
} act_job;

/* Elements [lo, hi) of an act_job. */
static void act_range(void *p, int64_t lo, int64_t hi)
{
    const act_job *q = p;
    if (use_avx512())
        act_avx512(q->op, q->dt, q->a + lo, q->g ? q->g + lo : NULL, q->o + lo, hi - lo, q->s,
                   q->leaky32);
    else
        act_avx2(q->op, q->dt, q->a + lo, q->g ? q->g + lo : NULL, q->o + lo, hi - lo, q->s,
                 q->leaky32);
}
#endif

bool tg__half_act_n(tg__half_act op, tg_dtype dt, const uint16_t *a, const uint16_t *g,
                    uint16_t *o, int64_t n, double s)
{
    TG_ASSERT(tg__dtype_is_half(dt));
    TG_ASSERT((op != TG__HALF_MASKED_GRAD && op != TG__HALF_RELU_GRAD) || g != NULL);
#ifdef TG__HAVE_X86_SIMD
    if (!tg__cpu_has_half_simd()) return false;
    act_job q = {.op = op, .dt = dt, .a = a, .g = g, .o = o, .s = s,
                 .leaky32 = op == TG__HALF_LEAKY && tg__half_leaky_f32_ok(dt, s)};
    tg__parallel_range(n, n > 32768, act_range, &q);
    return true;
#else
    (void)op, (void)a, (void)g, (void)o, (void)n, (void)s;
    return false;
#endif
}
