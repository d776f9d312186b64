/* src/quant/qconvt_phase_kernels.c - the register kernels of the
 * stride-phase ConvTranspose (qconvt_phase.c describes the method and the
 * grid; the AMX kernel is in qamx_x86.c): one phase of one sample and
 * group, in AVX-512 VNNI registers (vpdpbusd), or in AVX2 registers
 * (vpmaddwd on i16 channel pairs, with its own grid); each block
 * requantized into the phase's byte plane. */
#include <string.h>

#include "quant/qconvt_phase.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#define VNNI_TARGET __attribute__((target("avx512vnni,avx512bw,avx512f")))

int32_t tg__q_phase_corr(const tg__q_phase_job *j, const tg__q_phase_plan *ph, int64_t gi,
                         int64_t co)
{
    const int64_t cog = j->op.g->c_img / j->op.g->groups, Kt = j->op.g->k[1] * j->op.g->k[2];
    uint32_t sum = 0;
    for (int t = 0; co < cog && t < ph->nt; t++)
        sum += (uint32_t)j->op.w->tapsum[(gi * Kt + ph->tk[t]) * cog + co];
    return (int32_t)(0u - ph->zoff * sum);
}

/* ---- the VNNI kernel ---- */
#define VR 4   /* output channels per register block (a divisor of 16) */
#define VV 6   /* vectors of 16 positions per block: VR * VV = 24 accumulators */

/* acc[r][v] (r < VR, v < nv) = corr[r] + the phase's sums for output
 * channel r of the block and positions 16v.. of the flat block at x4 (the
 * grid already offset to the block's first position): over taps t < nt
 * (flat offset toff[t], weights wt[t]: the taps8 row of the block's first
 * channel in its first 64-channel tile) and the 16 channel quads of each of
 * the ncc tiles (quad planes pstride bytes apart).  Rows past the channels
 * read the tiles' zero rows.  Stored into out (rows of VV * 16). */
VNNI_TARGET static inline __attribute__((always_inline)) void
block_vnni(const int nv, const uint8_t *x4, int64_t pstride, const int64_t *toff,
           const int8_t *const *wt, int nt, int64_t ncc, const int32_t *corr, int32_t *out)
{
    __m512i acc[VR][VV];
    for (int r = 0; r < VR; r++)
        for (int v = 0; v < nv; v++) acc[r][v] = _mm512_set1_epi32(corr[r]);
    for (int t = 0; t < nt; t++) {
        const uint8_t *xt = x4 - 4 * toff[t];
        for (int64_t cc = 0; cc < ncc; cc++) {
            const int8_t *wc = wt[t] + cc * TILE * 64;
            const uint8_t *xc = xt + cc * TILE * pstride;
            for (int e = 0; e < TILE; e++, xc += pstride) {
                __m512i xv[VV];
                for (int v = 0; v < nv; v++) xv[v] = _mm512_loadu_si512(xc + 64 * v);
                for (int r = 0; r < VR; r++) {
                    int32_t quad;
                    memcpy(&quad, wc + r * 64 + 4 * e, sizeof quad);
                    const __m512i b = _mm512_set1_epi32(quad);
                    for (int v = 0; v < nv; v++)
                        acc[r][v] = _mm512_dpbusd_epi32(acc[r][v], xv[v], b);
                }
            }
        }
    }
    for (int r = 0; r < VR; r++)
        for (int v = 0; v < nv; v++) _mm512_storeu_si512(out + r * VV * 16 + 16 * v, acc[r][v]);
}

VNNI_TARGET void tg__q_phase_run_vnni(const tg__q_phase_job *j, const uint8_t *x4, int64_t gi,
                                       const tg__q_phase_plan *ph, uint8_t *planes)
{
    const tg_qweight *w = j->op.w;
    const int64_t cog = j->op.g->c_img / j->op.g->groups;
    _Alignas(64) int32_t out[VR * VV * 16];
    for (int64_t f0 = ph->ffirst; f0 <= ph->flast; f0 += VV * 16) {
        const int64_t left = (ph->flast - f0 + 16) / 16;   /* vectors up to flast */
        const int nv = (int)(left < VV ? left : VV);
        const uint8_t *xb = x4 + 4 * f0;
        for (int64_t co0 = 0; co0 < cog; co0 += VR) {
            const int8_t *wt[MAX_PHASE_TAPS];
            int32_t corr[VR];
            for (int t = 0; t < ph->nt; t++)
                wt[t] = tg__q_tap_panel(w, gi, ph->tk[t], co0 / TILE) + (co0 % TILE) * 64;
            for (int r = 0; r < VR; r++) corr[r] = tg__q_phase_corr(j, ph, gi, co0 + r);
            switch (nv) {   /* constant vector counts: the accumulators stay in registers */
            case 1: block_vnni(1, xb, j->np * 4, ph->toff, wt, ph->nt, w->ncc, corr, out); break;
            case 2: block_vnni(2, xb, j->np * 4, ph->toff, wt, ph->nt, w->ncc, corr, out); break;
            case 3: block_vnni(3, xb, j->np * 4, ph->toff, wt, ph->nt, w->ncc, corr, out); break;
            case 4: block_vnni(4, xb, j->np * 4, ph->toff, wt, ph->nt, w->ncc, corr, out); break;
            case 5: block_vnni(5, xb, j->np * 4, ph->toff, wt, ph->nt, w->ncc, corr, out); break;
            default: block_vnni(VV, xb, j->np * 4, ph->toff, wt, ph->nt, w->ncc, corr, out); break;
            }
            tg__q_requant_channel_rows(planes, j->op.dt, co0 * j->fmax + (f0 - ph->ffirst),
                                       j->fmax, out, cog - co0 < VR ? cog - co0 : VR, 16 * nv,
                                       VV * 16, &j->op.r[gi * cog + co0], TG_INT8_KERNEL_VNNI);
        }
    }
}

/* ---- the AVX2 kernel ----
 * AVX2 has no exact u8 x s8 dot product (vpmaddubsw saturates), so this
 * grid holds the activations as x - zx in i16 pairs of input channels
 * (padding and margins 0, so no zero-point sum is needed), x2[cp][P] =
 * (x[2cp][P] - zx) | (x[2cp+1][P] - zx) << 16, and vpmaddwd of a broadcast
 * pair of weights (taps16) against 8 positions' pairs adds two exact
 * products per lane. */
#define AVX2_TARGET __attribute__((target("avx2")))
#define AR 3   /* output channels per block */
#define AV 4   /* vectors of 8 positions per block: AR * AV = 12 accumulators */

AVX2_TARGET void tg__q_phase_build_x2(int32_t *x2, const tg__q_phase_job *j, int64_t b,
                                      int64_t gi)
{
    const tg__conv_geom *g = j->op.g;
    const int64_t cig = g->c_col / g->groups, S = g->col[1] * g->col[2], ncp = j->op.w->ncp;
    const bool sg = j->op.dt == TG_I8;
    const tg__q_phase_axis *a1 = &j->ax[0], *a2 = &j->ax[1];
    const uint8_t *xb = j->op.x + (b * g->c_col + gi * cig) * S;
    const __m256i zx = _mm256_set1_epi16((int16_t)j->op.zx);
    memset(x2, 0, (size_t)(ncp * j->np) * sizeof *x2);
    for (int64_t cp = 0; cp < ncp; cp++) {
        const bool two = 2 * cp + 1 < cig;   /* else the odd last channel and 0 */
        const uint8_t *s0 = xb + 2 * cp * S, *s1 = two ? s0 + S : s0;
        for (int64_t i1 = 0; i1 < a1->in; i1++) {
            int32_t *dst = x2 + cp * j->np + (i1 - a1->lo) * a2->ext - a2->lo;
            const int64_t off = i1 * a2->in;
            int64_t i2 = 0;
            for (; two && i2 + 16 <= a2->in; i2 += 16) {
                const __m128i r0 = _mm_loadu_si128((const __m128i *)(s0 + off + i2));
                const __m128i r1 = _mm_loadu_si128((const __m128i *)(s1 + off + i2));
                const __m256i c0 = _mm256_sub_epi16(sg ? _mm256_cvtepi8_epi16(r0)
                                                       : _mm256_cvtepu8_epi16(r0), zx);
                const __m256i c1 = _mm256_sub_epi16(sg ? _mm256_cvtepi8_epi16(r1)
                                                       : _mm256_cvtepu8_epi16(r1), zx);
                /* within each 128-bit lane: positions 0-3 | 8-11, then 4-7 | 12-15 */
                const __m256i lo = _mm256_unpacklo_epi16(c0, c1);
                const __m256i hi = _mm256_unpackhi_epi16(c0, c1);
                _mm256_storeu_si256((__m256i *)(dst + i2), _mm256_permute2x128_si256(lo, hi, 0x20));
                _mm256_storeu_si256((__m256i *)(dst + i2 + 8),
                                    _mm256_permute2x128_si256(lo, hi, 0x31));
            }
            for (; i2 < a2->in; i2++) {
                const int32_t v0 = (sg ? (int32_t)(int8_t)s0[off + i2] : s0[off + i2]) - j->op.zx;
                const int32_t v1 =
                    two ? (sg ? (int32_t)(int8_t)s1[off + i2] : s1[off + i2]) - j->op.zx : 0;
                dst[i2] = (int32_t)((uint32_t)(uint16_t)(int16_t)v0 |
                                    (uint32_t)(uint16_t)(int16_t)v1 << 16);
            }
        }
    }
}

/* out[r][8v..] (r < AR, v < nv) = the phase's sums for output channel row r
 * (weights wr[t][r]: its taps16 pairs for tap t) at positions 8v.. of the
 * flat block at x2, over taps t < nt (flat offset toff[t]) and channel
 * pairs cp < ncp (planes np apart). */
AVX2_TARGET static inline __attribute__((always_inline)) void
block_avx2(const int nv, const int32_t *x2, int64_t np, const int64_t *toff,
           const int32_t *const (*wr)[AR], int nt, int64_t ncp, int32_t *out)
{
    __m256i acc[AR][AV];
    for (int r = 0; r < AR; r++)
        for (int v = 0; v < nv; v++) acc[r][v] = _mm256_setzero_si256();
    for (int t = 0; t < nt; t++) {
        const int32_t *xc = x2 - toff[t];
        const int32_t *w0 = wr[t][0], *w1 = wr[t][1], *w2 = wr[t][2];
        for (int64_t cp = 0; cp < ncp; cp++, xc += np) {
            const __m256i b0 = _mm256_set1_epi32(w0[cp]), b1 = _mm256_set1_epi32(w1[cp]);
            const __m256i b2 = _mm256_set1_epi32(w2[cp]);
            for (int v = 0; v < nv; v++) {
                const __m256i xv = _mm256_loadu_si256((const __m256i *)(xc + 8 * v));
                acc[0][v] = _mm256_add_epi32(acc[0][v], _mm256_madd_epi16(xv, b0));
                acc[1][v] = _mm256_add_epi32(acc[1][v], _mm256_madd_epi16(xv, b1));
                acc[2][v] = _mm256_add_epi32(acc[2][v], _mm256_madd_epi16(xv, b2));
            }
        }
    }
    for (int r = 0; r < AR; r++)
        for (int v = 0; v < nv; v++)
            _mm256_storeu_si256((__m256i *)(out + r * AV * 8 + 8 * v), acc[r][v]);
}

/* One output channel (a group of one, as the DCGAN's 64 -> 1 last layer):
 * out[8v..] (v < A1) for the A1 * 8 positions of the flat block at x2, all
 * A1 accumulators on that channel, where block_avx2 would spend two of its
 * three rows on copies of it. */
#define A1 12
AVX2_TARGET static void block1_avx2(const int32_t *x2, int64_t np, const int64_t *toff,
                                    const int32_t *const *wt, int nt, int64_t ncp, int32_t *out)
{
    __m256i acc[A1];
    for (int v = 0; v < A1; v++) acc[v] = _mm256_setzero_si256();
    for (int t = 0; t < nt; t++) {
        const int32_t *xc = x2 - toff[t], *w0 = wt[t];
        for (int64_t cp = 0; cp < ncp; cp++, xc += np) {
            const __m256i b = _mm256_set1_epi32(w0[cp]);
            for (int v = 0; v < A1; v++)
                acc[v] = _mm256_add_epi32(
                    acc[v], _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(xc + 8 * v)), b));
        }
    }
    for (int v = 0; v < A1; v++) _mm256_storeu_si256((__m256i *)(out + 8 * v), acc[v]);
}

AVX2_TARGET void tg__q_phase_run_avx2(const tg__q_phase_job *j, const uint8_t *grid, int64_t gi,
                                       const tg__q_phase_plan *ph, uint8_t *planes)
{
    const tg_qweight *w = j->op.w;
    const int64_t cog = j->op.g->c_img / j->op.g->groups, K = w->n / cog, ncp = w->ncp;
    const int32_t *x2 = (const int32_t *)grid;
    _Alignas(32) int32_t out[AR * AV * 8 > A1 * 8 ? AR * AV * 8 : A1 * 8];
    int64_t f0 = ph->ffirst;
    if (cog == 1) {   /* whole blocks of A1 vectors on the one channel, the rest below */
        const int32_t *wt[MAX_PHASE_TAPS];
        for (int t = 0; t < ph->nt; t++) wt[t] = w->taps16 + (gi * K + ph->tk[t]) * ncp;
        for (; f0 + A1 * 8 - 1 <= ph->flast + 7; f0 += A1 * 8) {
            block1_avx2(x2 + f0, j->np, ph->toff, wt, ph->nt, ncp, out);
            tg__q_requant_rows(planes, j->op.dt, f0 - ph->ffirst, A1 * 8, out, 1, A1 * 8,
                               A1 * 8, &j->op.r[gi], TG_INT8_KERNEL_AVX2);
        }
    }
    for (; f0 <= ph->flast; f0 += AV * 8) {
        const int64_t left = (ph->flast - f0 + 8) / 8;   /* vectors up to flast */
        const int nv = (int)(left < AV ? left : AV);
        const int32_t *xb = x2 + f0;
        for (int64_t co0 = 0; co0 < cog; co0 += AR) {
            const int32_t *wr[MAX_PHASE_TAPS][AR];
            for (int t = 0; t < ph->nt; t++)
                for (int r = 0; r < AR; r++)   /* rows past the channels repeat the last */
                    wr[t][r] = w->taps16 + ((gi * K + ph->tk[t]) * cog +
                                            (co0 + r < cog ? co0 + r : cog - 1)) * ncp;
            const int32_t *const(*wc)[AR] = (const int32_t *const(*)[AR])wr;
            switch (nv) {   /* constant vector counts: the accumulators stay in registers */
            case 1: block_avx2(1, xb, j->np, ph->toff, wc, ph->nt, ncp, out); break;
            case 2: block_avx2(2, xb, j->np, ph->toff, wc, ph->nt, ncp, out); break;
            case 3: block_avx2(3, xb, j->np, ph->toff, wc, ph->nt, ncp, out); break;
            default: block_avx2(AV, xb, j->np, ph->toff, wc, ph->nt, ncp, out); break;
            }
            tg__q_requant_channel_rows(planes, j->op.dt, co0 * j->fmax + (f0 - ph->ffirst),
                                       j->fmax, out, cog - co0 < AR ? cog - co0 : AR, 8 * nv,
                                       AV * 8, &j->op.r[gi * cog + co0], TG_INT8_KERNEL_AVX2);
        }
    }
}

#endif
