/* src/ops/norm_simd.c - batch_norm's x86 SIMD pieces and the kernels of its
 * half blocks: the per-channel sums of four f32 channels at once, and the
 * sums, the output and dx of f16/bf16 channels read and written in place
 * (norm.c's work on the blocks of norm_blocks.c's loop).
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
 * Half channels.  A half widens to f32 exactly (a bf16 is the top 16 bits
 * of an f32), so the f32 kernels of norm_kernels_tmpl.h run on an f32 copy
 * of a half tensor and these kernels, which widen each value in registers
 * as they read it, see the same values; they add them in bn_sum's order,
 * compute each output with the same f32 operations in the same order (ISO
 * C: no contraction) and round it with the bulk conversion's rule, so the
 * bits are those of the f32 kernels on the copy, rounded once, without the
 * copy's store and load (tests/test_norm_half.c compares them). */
#include <stdatomic.h>
#include <string.h>

#include "core/half_simd.h"
#include "core/core.h"
#include "ops/norm_internal.h"

/* process-wide, as the workers of a batch_norm must see it too */
static atomic_bool simd_off;

void tg__bn_set_simd(bool on) { atomic_store(&simd_off, !on); }

static bool use_simd(void) { return !atomic_load(&simd_off) && tg__cpu_has_half_simd(); }

/* A half of dtype dt as f32 (exact: the bulk conversion's value). */
static inline float widen(tg_dtype dt, uint16_t h)
{
    if (dt == TG_F16) return tg_f16_to_f32(h);
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* o = half((p - mu) * k + sh), n values */
static void affine_scalar(tg_dtype dt, const uint16_t *p, int64_t n, float mu, float k, float sh,
                          uint16_t *o)
{
    for (int64_t i = 0; i < n; i++) o[i] = tg__f32_to_half(dt, (widen(dt, p[i]) - mu) * k + sh);
}

/* o = half(kt * (q - a - (p - mu) * bc)), n values (o may be q) */
static void dx_scalar(tg_dtype dt, const uint16_t *p, const uint16_t *q, int64_t n,
                      const tg__bn_dx_factors *f, uint16_t *o)
{
    for (int64_t i = 0; i < n; i++)
        o[i] = tg__f32_to_half(dt, f->kt * (widen(dt, q[i]) - f->a -
                                            (widen(dt, p[i]) - f->mu) * f->bc));
}

/* bn_sum's order over one half channel (n rows of s values, rstride apart):
 * term i of a row into acc[i mod 4], rows in turn, then
 * (acc0 + acc1) + (acc2 + acc3); kind 2: gr (x - mean), 1: (x - mean)^2,
 * 0: x - mean. */
static double hsum_scalar(tg_dtype dt, const uint16_t *x, const uint16_t *gr, double mean,
                          int kind, int64_t n, int64_t rstride, int64_t s)
{
    double acc[4] = {0, 0, 0, 0};
    for (int64_t r = 0; r < n; r++)
        for (int64_t i = 0; i < s; i++) {
            const int64_t e = r * rstride + i;
            const double v = (double)widen(dt, x[e]) - mean;
            acc[i & 3] += kind == 2 ? (double)widen(dt, gr[e]) * v : kind == 1 ? v * v : v;
        }
    return (acc[0] + acc[1]) + (acc[2] + acc[3]);
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

/* Four halves (the low 64 bits of h) as doubles (exact). */
TG__AVX2 static inline __m256d half4_pd(tg_dtype dt, __m128i h)
{
    const __m128 f = dt == TG_F16 ? _mm_cvtph_ps(h)
                                  : _mm_castsi128_ps(_mm_slli_epi32(_mm_cvtepu16_epi32(h), 16));
    return _mm256_cvtps_pd(f);
}

TG__AVX2 static inline __m256d half4_load_pd(tg_dtype dt, const uint16_t *p)
{
    return half4_pd(dt, _mm_loadl_epi64((const __m128i *)(const void *)p));
}

/* A row's last r (1..3) halves at p as doubles in lanes 0..r-1, the other
 * lanes 0: loaded from r - 4 values back (inside a row of at least four
 * values, when back) and shifted down, else copied. */
TG__AVX2 static inline __m256d half4_tail_pd(tg_dtype dt, const uint16_t *p, int64_t r, bool back)
{
    uint64_t u = 0;
    if (back) {
        memcpy(&u, p + r - 4, sizeof u);
        u >>= 16 * (4 - r);
    } else {
        memcpy(&u, p, (size_t)r * sizeof *p);
    }
    return half4_pd(dt, _mm_cvtsi64_si128((long long)u));
}

/* One row of K (1..4) half channels of dtype dt read in place, s values
 * each at x + k*s (gr laid out as x), for the term of kind: adds into the
 * four lanes of each channel's accumulator acc[k] (four doubles, kept in
 * memory between rows) sum4_avx2's terms in the same lanes in the same
 * order, so that the sums end with bn_sum's bits; the K channels side by
 * side (K independent chains of adds), eight values a load, from value i0
 * of the row (a multiple of 8) on. */
TG__AVX2 __attribute__((always_inline)) static inline void
hsum_row(tg_dtype dt, int kind, int K, const uint16_t *x, const uint16_t *gr, const double *mean,
         int64_t s, int64_t i0, double (*acc)[4])
{
    const int64_t s4 = s & ~(int64_t)3, r = s - s4;
    __m256d a[4], mu[4];
    for (int k = 0; k < K; k++) {
        a[k] = _mm256_loadu_pd(acc[k]);
        mu[k] = _mm256_set1_pd(mean[k]);
    }
    int64_t i = i0;
    for (; i + 8 <= s4; i += 8)
        for (int k = 0; k < K; k++) {
            const __m256 xv = tg__half_load8(dt, x + k * s + i);
            const __m256d v0 = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(xv)), mu[k]);
            const __m256d v1 = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(xv, 1)), mu[k]);
            __m256d q0 = v0, q1 = v1;
            if (kind == 2) {
                const __m256 gv = tg__half_load8(dt, gr + k * s + i);
                q0 = _mm256_cvtps_pd(_mm256_castps256_ps128(gv));
                q1 = _mm256_cvtps_pd(_mm256_extractf128_ps(gv, 1));
            }
            a[k] = _mm256_add_pd(a[k], sum_term(v0, q0, kind));
            a[k] = _mm256_add_pd(a[k], sum_term(v1, q1, kind));
        }
    if (i < s4)
        for (int k = 0; k < K; k++) {
            const __m256d v = _mm256_sub_pd(half4_load_pd(dt, x + k * s + i), mu[k]);
            const __m256d qv = kind == 2 ? half4_load_pd(dt, gr + k * s + i) : v;
            a[k] = _mm256_add_pd(a[k], sum_term(v, qv, kind));
        }
    if (r) {
        const __m256d m64 = _mm256_castsi256_pd(_mm256_cvtepi32_epi64(
            _mm_cmplt_epi32(_mm_setr_epi32(0, 1, 2, 3), _mm_set1_epi32((int)r))));
        const __m256d negz = _mm256_set1_pd(-0.0);
        for (int k = 0; k < K; k++) {
            const int64_t e = k * s + s4;
            const __m256d v = _mm256_sub_pd(half4_tail_pd(dt, x + e, r, s >= 4), mu[k]);
            const __m256d qv = kind == 2 ? half4_tail_pd(dt, gr + e, r, s >= 4) : v;
            a[k] = _mm256_add_pd(a[k], _mm256_blendv_pd(negz, sum_term(v, qv, kind), m64));
        }
    }
    for (int k = 0; k < K; k++) _mm256_storeu_pd(acc[k], a[k]);
}

/* hsum_row from value 0 with the AVX-512 loop first: sixteen values a
 * load, widened to two vectors of eight doubles whose halves are added in
 * turn (terms i..i+3, then i+4..i+7, ...: the order of the lanes above). */
TG__AVX512 __attribute__((always_inline)) static inline void
hsum_row16(tg_dtype dt, int kind, int K, const uint16_t *x, const uint16_t *gr, const double *mean,
           int64_t s, double (*acc)[4])
{
    __m256d a[4];
    __m512d mu[4];
    for (int k = 0; k < K; k++) {
        a[k] = _mm256_loadu_pd(acc[k]);
        mu[k] = _mm512_set1_pd(mean[k]);
    }
    int64_t i = 0;
    for (; i + 16 <= s; i += 16)
        for (int k = 0; k < K; k++) {
            const __m512 xv = tg__half_load16(dt, x + k * s + i);
            const __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(xv));
            const __m512d hi = _mm512_cvtps_pd(
                _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(xv), 1)));
            __m512d t0 = _mm512_sub_pd(lo, mu[k]), t1 = _mm512_sub_pd(hi, mu[k]);
            if (kind == 2) {
                const __m512 gv = tg__half_load16(dt, gr + k * s + i);
                t0 = _mm512_mul_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(gv)), t0);
                t1 = _mm512_mul_pd(_mm512_cvtps_pd(_mm256_castpd_ps(
                                       _mm512_extractf64x4_pd(_mm512_castps_pd(gv), 1))),
                                   t1);
            } else if (kind == 1) {
                t0 = _mm512_mul_pd(t0, t0);
                t1 = _mm512_mul_pd(t1, t1);
            }
            a[k] = _mm256_add_pd(a[k], _mm512_castpd512_pd256(t0));
            a[k] = _mm256_add_pd(a[k], _mm512_extractf64x4_pd(t0, 1));
            a[k] = _mm256_add_pd(a[k], _mm512_castpd512_pd256(t1));
            a[k] = _mm256_add_pd(a[k], _mm512_extractf64x4_pd(t1, 1));
        }
    for (int k = 0; k < K; k++) _mm256_storeu_pd(acc[k], a[k]);
    hsum_row(dt, kind, K, x, gr, mean, s, i, acc);
}

/* The sums of nc <= TG__BN_BLK half channels (tg__bn_half_sums), row by
 * row through the block (one run of memory a row, the next one prefetched),
 * four channels at a time (four independent chains of adds) and the rest
 * at once, by ROW(dt, kind, K, x, gr, mean, s, acc). */
#define HSUM_CHANS(ROW)                                                                     \
    double acc[TG__BN_BLK][4];                                                              \
    memset(acc, 0, (size_t)nc * sizeof acc[0]);                                             \
    const int64_t rs = g.c * g.s, run = nc * g.s;                                           \
    const int rem = (int)(nc & 3);                                                          \
    for (int64_t n = 0; n < g.n; n++) {                                                     \
        const uint16_t *xr = x + n * rs, *gq = kind == 2 ? gr + n * rs : NULL;              \
        if (n + 1 < g.n)                                                                    \
            for (int64_t e = 0; e < run; e += 32) {                                         \
                _mm_prefetch((const char *)(xr + rs + e), _MM_HINT_T0);                     \
                if (gq) _mm_prefetch((const char *)(gq + rs + e), _MM_HINT_T0);             \
            }                                                                               \
        int64_t k = 0;                                                                      \
        for (; k + 4 <= nc; k += 4)                                                         \
            ROW(dt, kind, 4, xr + k * g.s, gq ? gq + k * g.s : NULL, mean + k, g.s, acc + k); \
        const uint16_t *gk = gq ? gq + k * g.s : NULL;                                      \
        if (rem == 3) ROW(dt, kind, 3, xr + k * g.s, gk, mean + k, g.s, acc + k);           \
        else if (rem == 2) ROW(dt, kind, 2, xr + k * g.s, gk, mean + k, g.s, acc + k);      \
        else if (rem == 1) ROW(dt, kind, 1, xr + k * g.s, gk, mean + k, g.s, acc + k);      \
    }                                                                                       \
    for (int64_t k = 0; k < nc; k++) out[k] = (acc[k][0] + acc[k][1]) + (acc[k][2] + acc[k][3])

#define HSUM_ROW8(dt, kind, K, x, gr, mean, s, acc) hsum_row(dt, kind, K, x, gr, mean, s, 0, acc)

TG__AVX2 __attribute__((always_inline)) static inline void
hsum_chans(tg_dtype dt, int kind, const uint16_t *x, const uint16_t *gr, const double *mean,
           tg__bn_geom g, int64_t nc, double *out)
{
    HSUM_CHANS(HSUM_ROW8);
}

TG__AVX512 __attribute__((always_inline)) static inline void
hsum_chans16(tg_dtype dt, int kind, const uint16_t *x, const uint16_t *gr, const double *mean,
             tg__bn_geom g, int64_t nc, double *out)
{
    HSUM_CHANS(hsum_row16);
}
#undef HSUM_ROW8
#undef HSUM_CHANS

/* hsum_chans (AVX2) and hsum_chans16 (AVX-512) for each dtype and kind */
#define HSUM_KINDS(CHANS, DT)                                                   \
    do {                                                                        \
        if (kind == 2) CHANS(DT, 2, x, gr, mean, g, nc, out);                   \
        else if (kind == 1) CHANS(DT, 1, x, gr, mean, g, nc, out);              \
        else CHANS(DT, 0, x, gr, mean, g, nc, out);                             \
    } while (0)

TG__AVX2 static void hsum_avx2(tg_dtype dt, int kind, const uint16_t *x, const uint16_t *gr,
                               const double *mean, tg__bn_geom g, int64_t nc, double *out)
{
    if (dt == TG_F16) HSUM_KINDS(hsum_chans, TG_F16);
    else HSUM_KINDS(hsum_chans, TG_BF16);
}

TG__AVX512 static void hsum_avx512(tg_dtype dt, int kind, const uint16_t *x, const uint16_t *gr,
                                   const double *mean, tg__bn_geom g, int64_t nc, double *out)
{
    if (dt == TG_F16) HSUM_KINDS(hsum_chans16, TG_F16);
    else HSUM_KINDS(hsum_chans16, TG_BF16);
}
#undef HSUM_KINDS

TG__AVX2 static void affine_avx2(tg_dtype dt, const uint16_t *p, int64_t n, float mu, float k,
                                 float sh, uint16_t *o)
{
    const __m256 vm = _mm256_set1_ps(mu), vk = _mm256_set1_ps(k), vs = _mm256_set1_ps(sh);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_mul_ps(_mm256_sub_ps(tg__half_load8(dt, p + i), vm), vk);
        tg__half_store8(dt, o + i, _mm256_add_ps(v, vs));
    }
    affine_scalar(dt, p + i, n - i, mu, k, sh, o + i);
}

TG__AVX2 static void dx_avx2(tg_dtype dt, const uint16_t *p, const uint16_t *q, int64_t n,
                             const tg__bn_dx_factors *f, uint16_t *o)
{
    const __m256 vkt = _mm256_set1_ps(f->kt), va = _mm256_set1_ps(f->a),
                 vm = _mm256_set1_ps(f->mu), vbc = _mm256_set1_ps(f->bc);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 t = _mm256_mul_ps(_mm256_sub_ps(tg__half_load8(dt, p + i), vm), vbc);
        const __m256 u = _mm256_sub_ps(_mm256_sub_ps(tg__half_load8(dt, q + i), va), t);
        tg__half_store8(dt, o + i, _mm256_mul_ps(vkt, u));
    }
    dx_scalar(dt, p + i, q + i, n - i, f, o + i);
}

/* affine_avx2 and dx_avx2 sixteen values at a time (the same operations,
 * the same rounding: tg__half_store16 has tg__half_store8's bits).  A row
 * of 16 values or more ends with its last sixteen, overlapping the vectors
 * before: computed from the values loaded before any store (o may be the
 * row itself), they give the overlapped values the same bits again.  The
 * rows of a batch norm are a plane each (49 values for 7 x 7), and handing
 * each row's tail to the AVX2 and scalar loops cost more than the row's
 * vectors in the DCGAN's bf16 step (a masked store of the tail is slower
 * still: the next row's first load waits for it).  Shorter rows go to the
 * AVX2 loop. */
TG__AVX512 static void affine_avx512(tg_dtype dt, const uint16_t *p, int64_t n, float mu, float k,
                                     float sh, uint16_t *o)
{
    if (n < 16) {
        affine_avx2(dt, p, n, mu, k, sh, o);
        return;
    }
    const __m512 vm = _mm512_set1_ps(mu), vk = _mm512_set1_ps(k), vs = _mm512_set1_ps(sh);
    const __m512 last =
        _mm512_add_ps(_mm512_mul_ps(_mm512_sub_ps(tg__half_load16(dt, p + n - 16), vm), vk), vs);
    for (int64_t i = 0; i + 16 <= n; i += 16) {
        const __m512 v = _mm512_mul_ps(_mm512_sub_ps(tg__half_load16(dt, p + i), vm), vk);
        tg__half_store16(dt, o + i, _mm512_add_ps(v, vs));
    }
    if (n % 16) tg__half_store16(dt, o + n - 16, last);
}

TG__AVX512 static void dx_avx512(tg_dtype dt, const uint16_t *p, const uint16_t *q, int64_t n,
                                 const tg__bn_dx_factors *f, uint16_t *o)
{
    if (n < 16) {
        dx_avx2(dt, p, q, n, f, o);
        return;
    }
    const __m512 vkt = _mm512_set1_ps(f->kt), va = _mm512_set1_ps(f->a),
                 vm = _mm512_set1_ps(f->mu), vbc = _mm512_set1_ps(f->bc);
    const __m512 tl = _mm512_mul_ps(_mm512_sub_ps(tg__half_load16(dt, p + n - 16), vm), vbc);
    const __m512 ul = _mm512_sub_ps(_mm512_sub_ps(tg__half_load16(dt, q + n - 16), va), tl);
    const __m512 last = _mm512_mul_ps(vkt, ul);
    for (int64_t i = 0; i + 16 <= n; i += 16) {
        const __m512 t = _mm512_mul_ps(_mm512_sub_ps(tg__half_load16(dt, p + i), vm), vbc);
        const __m512 u = _mm512_sub_ps(_mm512_sub_ps(tg__half_load16(dt, q + i), va), t);
        tg__half_store16(dt, o + i, _mm512_mul_ps(vkt, u));
    }
    if (n % 16) tg__half_store16(dt, o + n - 16, last);
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

int tg__bn_half_simd(void)
{
    if (!use_simd()) return 0;
    return tg__cpu_has_avx512bw() ? 2 : 1;
}

void tg__bn_half_sums(tg_dtype dt, const uint16_t *x, const uint16_t *gr, const double *mean,
                      bool centred_sq, tg__bn_geom g, int64_t nc, double *out, int simd)
{
    const int kind = gr ? 2 : centred_sq ? 1 : 0;
    const int64_t rs = g.c * g.s;
    int64_t k = 0;
#ifdef TG__HAVE_X86_SIMD
    if (simd) {
        double mz[TG__BN_BLK];   /* mean, or zeros */
        for (int64_t c = 0; c < nc; c++) mz[c] = mean ? mean[c] : 0.0;
        if (simd == 2) hsum_avx512(dt, kind, x, gr, mz, g, nc, out);
        else hsum_avx2(dt, kind, x, gr, mz, g, nc, out);
        k = nc;
    }
#endif
    (void)simd;
    for (; k < nc; k++)
        out[k] = hsum_scalar(dt, x + k * g.s, gr ? gr + k * g.s : NULL, mean ? mean[k] : 0.0,
                             kind, g.n, rs, g.s);
}

void tg__bn_half_affine(tg_dtype dt, const uint16_t *p, int64_t n, float mu, float k,
                        float sh, uint16_t *o, int simd)
{
#ifdef TG__HAVE_X86_SIMD
    if (simd == 2) {
        affine_avx512(dt, p, n, mu, k, sh, o);
        return;
    }
    if (simd) {
        affine_avx2(dt, p, n, mu, k, sh, o);
        return;
    }
#endif
    affine_scalar(dt, p, n, mu, k, sh, o);
}

void tg__bn_half_dx(tg_dtype dt, const uint16_t *p, const uint16_t *q, int64_t n,
                    const tg__bn_dx_factors *f, uint16_t *o, int simd)
{
#ifdef TG__HAVE_X86_SIMD
    if (simd == 2) {
        dx_avx512(dt, p, q, n, f, o);
        return;
    }
    if (simd) {
        dx_avx2(dt, p, q, n, f, o);
        return;
    }
#endif
    dx_scalar(dt, p, q, n, f, o);
}
