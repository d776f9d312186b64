/* src/ops/conv_im2col_avx512.c - im2col of small planes of bf16 bits by
 * 16-bit permutes (AVX-512 BW), for the bf16 GEMM's columns
 * (conv_gather_tmpl.h).
 *
 * A plane of fewer than TG__CONV_PERM_PLANE elements, with a zero after it,
 * fits in at most eight registers of 32 elements.  A vector of 32 column
 * entries of one kernel tap picks its elements out of them with one
 * two-register permute (vpermi2w) per pair of registers: bits 0-5 of the
 * entry's index choose the element within a pair, bits 6 and up the pair.
 * The indices are the tap table's (tap_table_new in conv_im2col.c, the
 * padding pointing at the zero), as 16-bit numbers in vectors of 32 per tap.
 * On the DCGAN's bf16 step this im2col costs about a third of the
 * element-by-element gather through the same table (which other CPUs and
 * larger planes use). */
#include <stdatomic.h>
#include <stdlib.h>

#include "ops/conv_internal.h"

/* process-wide: im2col runs on the pool's threads, not only the caller's */
static atomic_bool perm_off;

void tg__conv_set_perm(bool on) { atomic_store(&perm_off, !on); }

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#define PERM_TARGET __attribute__((target("avx512bw,avx512f")))

bool tg__conv_perm_usable(int64_t isz)
{
    return tg__cpu_has_avx512bw() && !atomic_load(&perm_off) && isz >= 0 &&
           isz < TG__CONV_PERM_PLANE;
}

uint16_t *tg__conv_perm_table(const int32_t *tab, int64_t ksz, int64_t osz)
{
    const int64_t nv = (osz + 31) / 32;
    uint16_t *idx = calloc((size_t)(ksz * nv * 32), sizeof *idx);
    if (!idx) return NULL;
    for (int64_t k = 0; k < ksz; k++)
        for (int64_t o = 0; o < osz; o++) {
            TG_ASSERT(tab[k * osz + o] >= 0 && tab[k * osz + o] < TG__CONV_PERM_PLANE);
            idx[k * nv * 32 + o] = (uint16_t)tab[k * osz + o];
        }
    return idx;
}

/* The taps of a plane held in r (np register pairs), for one np at a time:
 * with np a constant the pairs stay in registers and the loop over them is
 * unrolled (np = 4, the 14x14 planes of the DCGAN: 0.74x the time of the
 * loop with np a variable, which kept the pairs on the stack). */
PERM_TARGET static inline __attribute__((always_inline)) void
perm_taps(const __m512i *r, int np, const uint16_t *idx, int64_t ksz, int64_t osz, uint16_t *dst,
          int64_t tap_ld)
{
    const int64_t nv = (osz + 31) / 32;
    for (int64_t k = 0; k < ksz; k++, dst += tap_ld) {
        for (int64_t v = 0; v < nv; v++) {
            const __m512i ix = _mm512_loadu_si512((const void *)(idx + (k * nv + v) * 32));
            __m512i out = _mm512_permutex2var_epi16(r[0], ix, r[1]);
            if (np > 1) {
                const __m512i pair = _mm512_srli_epi16(ix, 6);
                for (int p = 1; p < np; p++) {
                    const __mmask32 in = _mm512_cmpeq_epi16_mask(pair, _mm512_set1_epi16((short)p));
                    out = _mm512_mask_mov_epi16(
                        out, in, _mm512_permutex2var_epi16(r[2 * p], ix, r[2 * p + 1]));
                }
            }
            const int64_t n = osz - 32 * v;
            const __mmask32 keep = n >= 32 ? (__mmask32)0xFFFFFFFFu : (__mmask32)((1u << n) - 1);
            _mm512_mask_storeu_epi16(dst + 32 * v, keep, out);
        }
    }
}

PERM_TARGET void tg__conv_perm_plane(const uint16_t *plane, int64_t isz, const uint16_t *idx,
                                     int64_t ksz, int64_t osz, uint16_t *dst, int64_t tap_ld)
{
    const int np = (int)((isz + 1 + 63) / 64);   /* register pairs in use */
    /* the plane straight into registers, zeros past its end (masked loads
     * read nothing there) */
    __m512i r[TG__CONV_PERM_PLANE / 32];
    for (int i = 0; i < 2 * np; i++) {
        const int64_t n = isz - 32 * i;
        const __mmask32 in = n >= 32 ? (__mmask32)0xFFFFFFFFu
                                     : n <= 0 ? 0 : (__mmask32)((1u << n) - 1);
        r[i] = _mm512_maskz_loadu_epi16(in, plane + 32 * i);
    }
    _Static_assert(TG__CONV_PERM_PLANE == 256, "perm_taps is called for np = 1..4");
    switch (np) {
    case 1: perm_taps(r, 1, idx, ksz, osz, dst, tap_ld); break;
    case 2: perm_taps(r, 2, idx, ksz, osz, dst, tap_ld); break;
    case 3: perm_taps(r, 3, idx, ksz, osz, dst, tap_ld); break;
    default: perm_taps(r, 4, idx, ksz, osz, dst, tap_ld); break;
    }
}

/* im2col of planes too large for registers whose rows are short, row by
 * row: each column row of tap (k0, k1, k2) is one image row (i0, i1)
 * permuted (vpermw): lane o2 takes element o2*s - pad + k2*d of the row,
 * the lanes outside the row zeroed by a mask.  The DCGAN's 28x28 planes
 * (4x4 taps, stride 2) take 16 x 14 permutes of rows of 28, where the
 * table-driven copy moved their 3136 entries one at a time. */
bool tg__conv_rowperm_usable(const tg__conv_geom *g)
{
    /* the lane arithmetic in 16 bits: o2*s + k2*d - pad within +-32767 */
    return tg__cpu_has_avx512bw() && !atomic_load(&perm_off) && g->img[2] <= 32 &&
           g->col[2] <= 32 && g->stride[2] <= 256 && g->dil[2] * g->k[2] <= 8192 &&
           g->pad[2] <= 8192;
}

PERM_TARGET void tg__conv_rowperm_plane(const uint16_t *plane, const tg__conv_geom *g,
                                        uint16_t *dst, int64_t tap_ld)
{
    const int64_t *ie = g->img, *oe = g->col, *ke = g->k, *s = g->stride, *d = g->dil,
                  *pd = g->pad;
    const __mmask32 row_in = (__mmask32)((1ull << ie[2]) - 1);
    const __mmask32 keep = (__mmask32)((1ull << oe[2]) - 1);
    /* lane o2: o2*s2 - pad2, and whether o2 is a column position */
    const __m512i lane = _mm512_set_epi16(31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18,
                                          17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2,
                                          1, 0);
    const __m512i base = _mm512_sub_epi16(_mm512_mullo_epi16(lane, _mm512_set1_epi16((short)s[2])),
                                          _mm512_set1_epi16((short)pd[2]));
    const __m512i zero = _mm512_setzero_si512();
    for (int64_t k0 = 0; k0 < ke[0]; k0++)
        for (int64_t k1 = 0; k1 < ke[1]; k1++)
            for (int64_t k2 = 0; k2 < ke[2]; k2++, dst += tap_ld) {
                const __m512i idx = _mm512_add_epi16(base, _mm512_set1_epi16((short)(k2 * d[2])));
                const __mmask32 ok =
                    keep & _mm512_cmpge_epi16_mask(idx, zero) &
                    _mm512_cmplt_epi16_mask(idx, _mm512_set1_epi16((short)ie[2]));
                uint16_t *out = dst;
                for (int64_t o0 = 0; o0 < oe[0]; o0++) {
                    const int64_t i0 = o0 * s[0] - pd[0] + k0 * d[0];
                    for (int64_t o1 = 0; o1 < oe[1]; o1++, out += oe[2]) {
                        const int64_t i1 = o1 * s[1] - pd[1] + k1 * d[1];
                        __m512i v = zero;
                        if (i0 >= 0 && i0 < ie[0] && i1 >= 0 && i1 < ie[1]) {
                            const __m512i row =
                                _mm512_maskz_loadu_epi16(row_in, plane + (i0 * ie[1] + i1) * ie[2]);
                            v = _mm512_maskz_permutexvar_epi16(ok, idx, row);
                        }
                        _mm512_mask_storeu_epi16(out, keep, v);
                    }
                }
            }
}

#else

bool tg__conv_perm_usable(int64_t isz)
{
    (void)isz;
    return false;
}

uint16_t *tg__conv_perm_table(const int32_t *tab, int64_t ksz, int64_t osz)
{
    (void)tab, (void)ksz, (void)osz;
    return NULL;
}

void tg__conv_perm_plane(const uint16_t *plane, int64_t isz, const uint16_t *idx, int64_t ksz,
                         int64_t osz, uint16_t *dst, int64_t tap_ld)
{
    (void)plane, (void)isz, (void)idx, (void)ksz, (void)osz, (void)dst, (void)tap_ld;
    TG_ASSERT(!"tg__conv_perm_plane without AVX-512");
}

bool tg__conv_rowperm_usable(const tg__conv_geom *g)
{
    (void)g;
    return false;
}

void tg__conv_rowperm_plane(const uint16_t *plane, const tg__conv_geom *g, uint16_t *dst,
                            int64_t tap_ld)
{
    (void)plane, (void)g, (void)dst, (void)tap_ld;
    TG_ASSERT(!"tg__conv_rowperm_plane without AVX-512");
}

#endif
