/* src/ops/conv_kernels_tmpl.h - the data movement of the conv kernels for one
 * element type that writes sums: col2im (gather form), the (C, B*S) -> (B, C,
 * S) permutation after a GEMM that covers a whole chunk of the batch, and the
 * epilogue.
 * Included by conv_im2col.c once per type with these macros defined:
 *   T     the element type (float or double)
 *   SUF   the name suffix (f32 or f64)
 * It defines tg__conv_{col2im_batch,unpack_cbs,epilogue}_SUF (FN pastes the
 * suffix; declared in conv_internal.h), the rest static.  im2col and the
 * packing permutation are in conv_gather_tmpl.h.
 * Every buffer is contiguous row-major; shapes are given in comments.  Every
 * parallel loop here writes disjoint outputs, each summed in a fixed order, so
 * the results do not depend on the thread count. */

#define TG__CAT_(a, b) a##_##b
#define TG__CAT(a, b) TG__CAT_(a, b)
#define FN(name) TG__CAT(name, SUF)

/* The phased col2im (add_kept to col2im_phased) is compiled twice: inlined
 * into col2im_phased_base for the compiler's baseline and into
 * col2im_phased_avx512 for AVX-512 at 256-bit vectors (eight floats; at 512
 * bits gcc 12 left the interleave of two phases scalar, which cost more
 * than the wider adds saved).  They only add and move elements, in the same
 * order (no product for a fused multiply-add to take), so both give the
 * same bits; tg__conv_col2im_kernel chooses. */
#ifndef TG__COL2IM_INLINE
#define TG__COL2IM_INLINE static inline __attribute__((always_inline))
#endif

/* dr[f] += sr[f] where kp[f] is all ones, += +0 where it is 0, by masking
 * the bits (a loop that gcc vectorises, where a select was one element at a
 * time). */
TG__COL2IM_INLINE void FN(add_kept)(T *restrict dr, const T *restrict sr, const int32_t *kp,
                                    int64_t n)
{
    for (int64_t f = 0; f < n; f++) {
        T v;
        if (sizeof(T) == sizeof(uint32_t)) {
            uint32_t u;
            memcpy(&u, sr + f, sizeof u);
            u &= (uint32_t)kp[f];
            memcpy(&v, &u, sizeof u);
        } else {
            uint64_t u;
            memcpy(&u, sr + f, sizeof u);
            u &= (uint64_t)(int64_t)kp[f];
            memcpy(&v, &u, sizeof u);
        }
        dr[f] += v;
    }
}

/* The sums of col2im_phased, sample by sample: jb planes stored phase after
 * phase (col2im_phases) in acc.  Tap k's column positions inside the image
 * are tp's runs [lo, hi) (the same as 0 <= o + d < q). */
TG__COL2IM_INLINE void FN(phase_sums)(const T *cols, int64_t ld, const tg__conv_geom *g,
                                      const conv_taps *tp, const col2im_phases *ph, int64_t ch,
                                      int64_t j0, int64_t jb, T *acc)
{
    const int64_t *ie = g->img, *oe = g->col, *ke = g->k, *s = g->stride;
    const int64_t ksz = tg__conv_prod3(ke), osz = tg__conv_prod3(oe), isz = tg__conv_prod3(ie);
    memset(acc, 0, (size_t)(jb * isz) * sizeof(T));
    for (int64_t k = 0; k < ksz; k++) {
        const int64_t kk[3] = {k / (ke[1] * ke[2]), (k / ke[2]) % ke[1], k % ke[2]};
        int64_t r[3], d[3], q[3], lo[3], hi[3];
        bool empty = false;
        for (int a = 0; a < 3; a++) {
            r[a] = ph->r[a][kk[a]];
            d[a] = ph->d[a][kk[a]];
            q[a] = ph->q[a][r[a]];
            lo[a] = tp->lo[a][kk[a]];
            hi[a] = tp->hi[a][kk[a]];
            empty |= lo[a] >= hi[a];
        }
        if (empty) continue;
        const int64_t base = ph->poff[(r[0] * s[1] + r[1]) * s[2] + r[2]];
        /* Whole rows of the last axis on both sides (d = 0, q = O) are
         * contiguous across the middle axis: one run per o0. */
        const bool whole = d[2] == 0 && q[2] == oe[2];
        const int64_t n1 = whole ? 1 : hi[1] - lo[1], run = whole ? (hi[1] - lo[1]) * oe[2] : 0;
        /* Phase planes the shape of the column planes (q = O on the last two
         * axes: stride s, image s*O) are one run per o0 too, shifted by d,
         * with the column positions outside the image on the last axis
         * adding 0 instead of their entry (keep): one loop of 42 elements
         * instead of 7 of 6 on the DCGAN's layers.  +0 leaves every sum as
         * it is, since a sum started at +0 is never -0. */
        const bool flat = !whole && ph->keep && q[2] == oe[2] && q[1] == oe[1];
        const int64_t f0 = lo[1] * oe[2] + lo[2], f1 = (hi[1] - 1) * oe[2] + hi[2];
        const int32_t *kp = flat ? ph->keep + kk[2] * oe[1] * oe[2] : NULL;
        for (int64_t j = j0; j < j0 + jb; j++) {
            const T *src = cols + (ch * ksz + k) * ld + j * osz;
            T *blk = acc + (j - j0) * isz + base;
            if (flat) {
                for (int64_t o0 = lo[0]; o0 < hi[0]; o0++) {
                    const T *sr = src + o0 * oe[1] * oe[2];
                    T *dr = blk + ((o0 + d[0]) * q[1] + d[1]) * q[2] + d[2];
                    FN(add_kept)(dr + f0, sr + f0, kp + f0, f1 - f0);
                }
                continue;
            }
            for (int64_t o0 = lo[0]; o0 < hi[0]; o0++)
                for (int64_t o1 = lo[1]; o1 < lo[1] + n1; o1++) {
                    const T *sr = src + (o0 * oe[1] + o1) * oe[2];
                    T *dr = blk + ((o0 + d[0]) * q[1] + o1 + d[1]) * q[2] + d[2];
                    if (whole) {
                        for (int64_t e = 0; e < run; e++) dr[e] += sr[e];
                    } else {
                        for (int64_t o2 = lo[2]; o2 < hi[2]; o2++) dr[o2] += sr[o2];
                    }
                }
        }
    }
}

/* The sums of col2im_phased across the block's samples (col2im_runs): one
 * run a tap, into acc past rn->margin spare elements. */
TG__COL2IM_INLINE void FN(phase_sums_runs)(const T *cols, int64_t ld,
                                           const tg__conv_geom *g, const col2im_runs *rn,
                                           int64_t ch, int64_t j0, int64_t jb, T *acc)
{
    const int64_t ksz = tg__conv_prod3(g->k), osz = tg__conv_prod3(g->col),
                  isz = tg__conv_prod3(g->img);
    memset(acc, 0, (size_t)(jb * isz + 2 * rn->margin) * sizeof(T));
    for (int64_t k = 0; k < ksz; k++)
        if (rn->phase[k] >= 0)
            FN(add_kept)(acc + rn->margin + rn->phase[k] * rn->n + rn->shift[k],
                         cols + (ch * ksz + k) * ld + j0 * osz, rn->mask + k * rn->n, rn->n);
}

#ifdef TG__HAVE_X86_SIMD
#ifndef TG__COL2IM_AVX512
#if defined(__clang__)   /* no prefer-vector-width in clang's target attribute */
#define TG__COL2IM_AVX512 __attribute__((target("avx512f,avx512bw,avx2")))
#else
#define TG__COL2IM_AVX512 \
    __attribute__((target("avx512f,avx512bw,avx2,prefer-vector-width=256")))
#endif
#endif

/* dst[2x] = e[x], dst[2x + 1] = o[x] for x < q2 (an image row of stride 2
 * from its two phase rows), eight pairs a permute: the phase rows of the
 * DCGAN's layers are 7 and 14 long, which the compiler's loop took one
 * element at a time after its overlap tests.  Moves only: the loop's bits.
 * f32 only (FN(interleave) takes it for T = float). */
TG__COL2IM_AVX512 static void FN(interleave_avx512)(T *restrict dst, const T *restrict e,
                                                    const T *restrict o, int64_t q2)
{
    const float *ef = (const float *)(const void *)e, *of = (const float *)(const void *)o;
    float *df = (float *)(void *)dst;
    /* lane 2x: element x of the first operand (e), lane 2x + 1: of the second */
    const __m512i idx = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    for (int64_t x = 0; x < q2; x += 8) {
        const unsigned n = (unsigned)(q2 - x < 8 ? q2 - x : 8);
        const __mmask16 in = (__mmask16)((1u << n) - 1), out = (__mmask16)((1u << (2 * n)) - 1);
        const __m512 ev = _mm512_maskz_loadu_ps(in, ef + x), ov = _mm512_maskz_loadu_ps(in, of + x);
        _mm512_mask_storeu_ps(df + 2 * x, out, _mm512_permutex2var_ps(ev, idx, ov));
    }
}
#endif

/* dst[2x] = e[x], dst[2x + 1] = o[x] for x < q2: by interleave_avx512 when
 * wide and T is f32, else a loop. */
TG__COL2IM_INLINE void FN(interleave)(T *restrict dst, const T *restrict e, const T *restrict o,
                                      int64_t q2, bool wide)
{
#ifdef TG__HAVE_X86_SIMD
    if (wide && sizeof(T) == sizeof(float)) {
        FN(interleave_avx512)(dst, e, o, q2);
        return;
    }
#endif
    (void)wide;
    for (int64_t x = 0; x < q2; x++) {
        dst[2 * x] = e[x];
        dst[2 * x + 1] = o[x];
    }
}

/* col2im of the block (channel ch, samples [j0, j0 + jb)) through acc:
 * its phase planes summed sample by sample (phase_sums) or, with rn, across
 * the samples (phase_sums_runs; acc then holds 2 * rn->margin more), then
 * interleaved into img (rows of stride 2 by interleave_avx512 when wide). */
TG__COL2IM_INLINE void FN(col2im_phased)(const T *cols, int64_t ld, int64_t c,
                                         const tg__conv_geom *g, const conv_taps *tp,
                                         const col2im_phases *ph, const col2im_runs *rn,
                                         int64_t ch, int64_t j0, int64_t jb, T *acc, T *img,
                                         bool wide)
{
    const int64_t *ie = g->img, *s = g->stride;
    const int64_t osz = tg__conv_prod3(g->col), isz = tg__conv_prod3(ie);
    if (rn) {
        FN(phase_sums_runs)(cols, ld, g, rn, ch, j0, jb, acc);
        acc += rn->margin;
    } else {
        FN(phase_sums)(cols, ld, g, tp, ph, ch, j0, jb, acc);
    }
    /* where sample j's phase planes start, and each phase's offset from there */
    const int64_t *poff = rn ? rn->poff : ph->poff, jstep = rn ? osz : isz;
    const int64_t s2 = s[2] < ie[2] ? s[2] : ie[2];   /* the phases of the last axis in use */
    /* Stride 2 on the last axis with both phases of one length (even
     * rows): one interleave of the two (FN(interleave)). */
    const bool pairs = s[2] == 2 && s2 == 2 && ph->q[2][0] == ph->q[2][1];
    for (int64_t j = j0; j < j0 + jb; j++) {
        const T *a = acc + (j - j0) * jstep;
        T *dst = img + (j * c + ch) * isz;
        /* i0 = q0*s0 + r0 and i1 = q1*s1 + r1, counted without divisions */
        for (int64_t i0 = 0, r0 = 0, q0 = 0; i0 < ie[0]; i0++) {
            for (int64_t i1 = 0, r1 = 0, q1 = 0; i1 < ie[1]; i1++, dst += ie[2]) {
                const int64_t row = q0 * ph->q[1][r1] + q1;
                const int64_t *po = poff + (r0 * s[1] + r1) * s[2];
                if (pairs) {
                    const int64_t q2 = ph->q[2][0];
                    const T *e = a + po[0] + row * q2, *o = a + po[1] + row * q2;
                    FN(interleave)(dst, e, o, q2, wide);
                } else {
                    for (int64_t r2 = 0; r2 < s2; r2++) {
                        const int64_t q2 = ph->q[2][r2];
                        const T *src = a + po[r2] + row * q2;
                        for (int64_t x = 0; x < q2; x++) dst[x * s[2] + r2] = src[x];
                    }
                }
                if (++r1 == s[1]) r1 = 0, q1++;
            }
            if (++r0 == s[0]) r0 = 0, q0++;
        }
    }
}

static void FN(col2im_phased_base)(const T *cols, int64_t ld, int64_t c,
                                   const tg__conv_geom *g, const conv_taps *tp,
                                   const col2im_phases *ph, const col2im_runs *rn, int64_t ch,
                                   int64_t j0, int64_t jb, T *acc, T *img)
{
    FN(col2im_phased)(cols, ld, c, g, tp, ph, rn, ch, j0, jb, acc, img, false);
}

#ifdef TG__HAVE_X86_SIMD
TG__COL2IM_AVX512 static void FN(col2im_phased_avx512)(const T *cols, int64_t ld, int64_t c,
                                                       const tg__conv_geom *g,
                                                       const conv_taps *tp,
                                                       const col2im_phases *ph,
                                                       const col2im_runs *rn, int64_t ch,
                                                       int64_t j0, int64_t jb, T *acc, T *img)
{
    FN(col2im_phased)(cols, ld, c, g, tp, ph, rn, ch, j0, jb, acc, img, true);
}
#endif

/* The work of col2im_batch: one task per block of planes. */
typedef struct {
    const T *cols;
    int64_t ld, nb, c, jb;
    const tg__conv_geom *g;
    const conv_taps *tp;
    const col2im_phases *ph;   /* NULL: not phased */
    const col2im_runs *rn;     /* phased across the block's samples, or NULL */
    const int32_t *tab;
    bool padded;
    bool avx512;   /* the phased sums by col2im_phased_avx512 (tg__conv_col2im_kernel) */
    T *img;
    T *rezero;   /* cols itself, to zero each block's rows once read; or NULL */
} FN(col2im_job);

/* The sum of the block (channel ch, samples [j0, j0 + jb)) of a
 * col2im_job into img. */
static void FN(col2im_block_sum)(const FN(col2im_job) *q, int64_t ch, int64_t j0)
{
    const T *cols = q->cols;
    const int64_t ld = q->ld, c = q->c, jb = q->jb;
    const tg__conv_geom *g = q->g;
    const int64_t *ie = g->img, *oe = g->col, *ke = g->k, *s = g->stride;
    const int64_t ksz = tg__conv_prod3(ke), osz = tg__conv_prod3(oe), isz = tg__conv_prod3(ie);
    const conv_taps *tp = q->tp;
    const int32_t *tab = q->tab;
    const bool phased = q->ph != NULL, padded = q->padded;
    T *img = q->img;
    if (phased) {
        const int64_t spare = q->rn ? 2 * q->rn->margin : 0;
        T *acc = tg__conv_scratch(2, (size_t)(jb * isz + spare) * sizeof(T));
        if (acc) {
#ifdef TG__HAVE_X86_SIMD
            if (q->avx512) {
                FN(col2im_phased_avx512)(cols, ld, c, g, tp, q->ph, q->rn, ch, j0, jb, acc, img);
                return;
            }
#endif
            FN(col2im_phased_base)(cols, ld, c, g, tp, q->ph, q->rn, ch, j0, jb, acc, img);
            return;
        }
    }
    /* With the table, the block is summed in this thread's scratch slot
     * 2, each plane followed by one spare element that the padding
     * entries (remapped to isz) add into: no branch in the loop, and the
     * same order of terms per element (tap by tap), then copied out.
     * Planes far apart in img (a 1x1 column plane of a generator's first
     * layer has 512 channels between samples) are summed close together. */
    T *acc = padded ? tg__conv_scratch(2, (size_t)(jb * (isz + 1)) * sizeof(T)) : NULL;
    if (acc) {
        memset(acc, 0, (size_t)(jb * (isz + 1)) * sizeof(T));
        for (int64_t k = 0; k < ksz; k++) {
            const int32_t *t = tab + k * osz;
            for (int64_t j = j0; j < j0 + jb; j++) {
                const T *src = cols + (ch * ksz + k) * ld + j * osz;
                T *plane = acc + (j - j0) * (isz + 1);
                for (int64_t o = 0; o < osz; o++) plane[t[o]] += src[o];
            }
        }
        for (int64_t j = j0; j < j0 + jb; j++)
            memcpy(img + (j * c + ch) * isz, acc + (j - j0) * (isz + 1),
                   (size_t)isz * sizeof(T));
        return;
    }
    for (int64_t j = j0; j < j0 + jb; j++)
        memset(img + (j * c + ch) * isz, 0, (size_t)isz * sizeof(T));
    if (tab) {
        /* the same order of terms per element: tap by tap */
        for (int64_t k = 0; k < ksz; k++) {
            const int32_t *t = tab + k * osz;
            for (int64_t j = j0; j < j0 + jb; j++) {
                const T *src = cols + (ch * ksz + k) * ld + j * osz;
                T *plane = img + (j * c + ch) * isz;
                for (int64_t o = 0; o < osz; o++)
                    if (t[o] >= 0 && t[o] < isz) plane[t[o]] += src[o];
            }
        }
        return;
    }
    for (int64_t k = 0; k < ksz; k++) {
        const int64_t k2 = k % ke[2], k1 = (k / ke[2]) % ke[1], k0 = k / (ke[1] * ke[2]);
        const int64_t lo2 = tp->lo[2][k2], hi2 = tp->hi[2][k2], off2 = tp->off[2][k2];
        for (int64_t j = j0; j < j0 + jb; j++) {
            const T *src = cols + (ch * ksz + k) * ld + j * osz;
            T *plane = img + (j * c + ch) * isz;
            for (int64_t o0 = tp->lo[0][k0]; o0 < tp->hi[0][k0]; o0++) {
                const int64_t i0 = o0 * s[0] + tp->off[0][k0];
                for (int64_t o1 = tp->lo[1][k1]; o1 < tp->hi[1][k1]; o1++) {
                    const int64_t i1 = o1 * s[1] + tp->off[1][k1];
                    const T *sr = src + (o0 * oe[1] + o1) * oe[2];
                    T *dr = plane + (i0 * ie[1] + i1) * ie[2] + off2;
                    if (s[2] == 1) {
                        for (int64_t o2 = lo2; o2 < hi2; o2++) dr[o2] += sr[o2];
                    } else {
                        for (int64_t o2 = lo2; o2 < hi2; o2++) dr[o2 * s[2]] += sr[o2];
                    }
                }
            }
        }
    }
}

/* Block u of a col2im_job (a tg__run_tasks task; never fails): its sum, then
 * with rezero its column rows zeroed while still in cache. */
static int FN(col2im_block)(void *p, int64_t u)
{
    const FN(col2im_job) *q = p;
    const int64_t ch = u / (q->nb / q->jb), j0 = (u % (q->nb / q->jb)) * q->jb;
    FN(col2im_block_sum)(q, ch, j0);
    if (q->rezero) {
        const int64_t ksz = tg__conv_prod3(q->g->k), osz = tg__conv_prod3(q->g->col);
        for (int64_t k = 0; k < ksz; k++)
            memset(q->rezero + (ch * ksz + k) * q->ld + j0 * osz, 0,
                   (size_t)(q->jb * osz) * sizeof(T));
    }
    return TG_OK;
}

/* The adjoint of im2col_batch (cols has row stride ld >= nb*O): img (nb, c, I)
 * with img[j, ch, i] = sum over taps k and positions o with
 * i = o*s - pad + k*d of cols[(ch, k), j*O + o].
 * Owner computes: the output planes img[j, ch] are split into blocks (one
 * channel with all its samples, or one (sample, channel) plane when there are
 * few channels), each block owned by one thread, which zeroes it and adds its
 * column entries tap by tap in the fixed order (k0, k1, k2).  No atomics, and
 * every element sums its terms in the same order for every thread count.
 * Reading cols row by row streams it sequentially (a gather over taps per
 * output element hops between K rows and measured 3x slower), while the
 * owned block (nb planes of I) stays in cache.  The per-axis runs of valid o
 * for each tap are tabulated once per call (conv_taps).  With rezero (= cols)
 * each block then zeroes the column entries it was given, so that cols is
 * all zero again (tg__conv_zeroed_take). */
int FN(tg__conv_col2im_batch)(const T *cols, int64_t ld, int64_t nb, int64_t c,
                              const tg__conv_geom *g, T *img, T *rezero)
{
    const int64_t *ie = g->img, *oe = g->col, *ke = g->k;
    const int64_t ksz = tg__conv_prod3(ke), osz = tg__conv_prod3(oe), isz = tg__conv_prod3(ie);
    const int64_t jb = c >= 8 ? nb : 1, units = c * (nb / jb);
    /* Small blocks (at most 64 Ki elements, in L2) go phase by phase, when
     * column rows are long enough for the runs to pay: at 7x7 and 8x8 column
     * planes it measured faster than the tap table, at 1x1 (a generator's
     * first layer: each tap adds one element per loop) 2x slower and at 4x4
     * about 5% slower.  Otherwise the tap table of small planes, else row by
     * row. */
    conv_taps tp;
    if (conv_taps_init(&tp, g) < 0) return TG_ENOMEM;
    col2im_phases ph;
    const bool phased = jb * isz <= ((int64_t)1 << 16) && oe[2] >= TG__COL2IM_PHASED_ROW &&
                        col2im_phases_init(&ph, g, &tp);
    col2im_runs rn;
    const bool runs = phased && col2im_runs_init(&rn, g, &tp, &ph, jb);
    int32_t *tab = phased ? NULL : tap_table_new(g);
    /* the table's block summing buffer: at most 64 Ki elements (in L2) */
    const bool padded = tab && jb * (isz + 1) <= ((int64_t)1 << 16);
    if (padded)
        for (int64_t i = 0; i < ksz * osz; i++)
            if (tab[i] < 0) tab[i] = (int32_t)isz;
    FN(col2im_job) q = {.cols = cols, .ld = ld, .nb = nb, .c = c, .jb = jb, .g = g, .tp = &tp,
                        .ph = phased ? &ph : NULL, .rn = runs ? &rn : NULL, .tab = tab,
                        .padded = padded,
                        .avx512 = tg__conv_col2im_of(g) == TG__CONV_COL2IM_AVX512,
                        .img = img, .rezero = rezero};
    tg__run_tasks(units, nb * c * isz > 32768, FN(col2im_block), &q);
    free(tab);
    if (runs) free(rn.buf);
    if (phased) free(ph.buf);
    conv_taps_free(&tp);
    return TG_OK;
}

/* The rows of a batch permutation or of the epilogue, split over threads. */
typedef struct {
    const tg__conv_geom *g;
    const void *x;
    const T *bias;
    int64_t nb, c, s;
    T *y;
    tg_activation act;
    double slope;
    T *rezero;   /* unpack: x itself, zeroed row by row once copied; or NULL */
} FN(rows_job);

static void FN(unpack_rows)(void *p, int64_t r0, int64_t r1)
{
    const FN(rows_job) *q = p;
    const T *yp = q->x;
    for (int64_t r = r0; r < r1; r++) {
        const int64_t ch = r / q->nb, j = r % q->nb;
        memcpy(q->y + (j * q->c + ch) * q->s, yp + r * q->s, (size_t)q->s * sizeof(T));
        if (q->rezero) memset(q->rezero + r * q->s, 0, (size_t)q->s * sizeof(T));
    }
}

/* The inverse: y (nb, c, S) = yp (c, nb*S); with rezero (= yp), yp is left
 * all zero (tg__conv_zeroed_take). */
void FN(tg__conv_unpack_cbs)(const T *yp, int64_t nb, int64_t c, int64_t s, T *y, T *rezero)
{
    FN(rows_job) q = {.x = yp, .nb = nb, .c = c, .s = s, .y = y, .rezero = rezero};
    tg__parallel_range(c * nb, nb * c * s > 32768, FN(unpack_rows), &q);
}

static void FN(epilogue_rows)(void *p, int64_t r0, int64_t r1)
{
    const FN(rows_job) *q = p;
    const int64_t s = q->s;
    for (int64_t r = r0; r < r1; r++) {
        T *v = q->y + r * s;
        const T bv = q->bias ? q->bias[r % q->c] : (T)0;
        if (q->act == TG_ACT_NONE) {
            for (int64_t i = 0; i < s; i++) v[i] += bv;
        } else {
            for (int64_t i = 0; i < s; i++)
                v[i] = (T)conv_activate((double)v[i] + (double)bv, q->act, q->slope);
        }
    }
}

/* y (B, c, s) gets bias[ch] added and the activation applied, in place. */
void FN(tg__conv_epilogue)(T *y, int64_t batch, int64_t c, int64_t s, const T *bias,
                           tg_activation act, double slope)
{
    FN(rows_job) q = {.bias = bias, .c = c, .s = s, .y = y, .act = act, .slope = slope};
    tg__parallel_range(batch * c, batch * c * s > 32768, FN(epilogue_rows), &q);
}

#undef FN
#undef TG__CAT
#undef TG__CAT_
