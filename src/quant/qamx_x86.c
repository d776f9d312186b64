/* src/quant/qamx_x86.c - AMX-INT8 for the int8 GEMM: the packed GEMM on
 * tiles (the probe and the tile configuration are core's, src/core/amx.c;
 * the column-free ConvTranspose is in qconvt_phase.c). */
#include <string.h>

#include "quant/quant_internal.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

/* The GEMM: tiles 0-3 hold a 32 x 32 block of c (four 16 x 16 i32), 4-5
 * two 16-row slices of a (64 k each), 6-7 the block's two 16-column B
 * tiles: 16 slices of panels8, rows 128 bytes apart.  Each tdpbusd adds
 * 16 x 16 x 64 u8 x s8 products into i32, exactly. */
#define AMX_TARGET __attribute__((target("amx-tile,amx-int8,avx512vnni,avx512bw,avx512f")))

bool tg__q_cpu_has_amx(void) { return tg__q_cpu_has_vnni() && tg__amx_available(TG__AMX_INT8); }

/* Where c's layout puts a 16 x 16 tile's rows at one stride (row-major, or
 * grouped by column with kgrp a multiple of 16), the address of (row, col)
 * and that stride in bytes; else NULL. */
static int32_t *tile_dst(int32_t *c, int64_t ldc, int64_t kgrp, int64_t row, int64_t col,
                         int64_t *stride)
{
    if (kgrp == 0) {
        *stride = ldc * 4;
        return c + row * ldc + col;
    }
    if (kgrp % 16 != 0) return NULL;
    *stride = kgrp * 4;
    return c + (col / kgrp) * ldc + row * kgrp + col % kgrp;
}

AMX_TARGET void tg__q_gemm_amx(int32_t *c, int64_t ldc, int64_t kgrp, const uint8_t *a,
                               int64_t lda, int64_t m, const tg_qweight *w, int64_t gi,
                               int32_t zoff)
{
    tg__amx_tiles_begin();   /* per call: tile state belongs to the thread */
    const int8_t *panels = tg__q_group_panels8(w, gi);
    const int32_t *colsum = w->colsum + gi * w->n;
    const int64_t chunks = w->kqp / 16, R = TG__Q_AMX_ROWS, NB = 4 * TG__Q_NR8;
    _Alignas(64) int32_t tmp[TG__Q_AMX_ROWS * TG__Q_NR8];
    /* 16 equal rows of -zoff * colsum over the block's 32 columns: the tiles
     * of c start from it, so a full tile needs no pass after the products */
    _Alignas(64) int32_t corr[16 * TG__Q_NR8];
    for (int64_t blk = 0; blk < w->nblk8; blk++) {
        const int64_t j0 = blk * TG__Q_NR8;
        const int nr = (int)(w->n - j0 < TG__Q_NR8 ? w->n - j0 : TG__Q_NR8);
        const int8_t *panel = panels + blk * w->kqp * NB;
        for (int j = 0; j < TG__Q_NR8; j++)   /* wrapping, as the tiles add */
            corr[j] = j < nr ? (int32_t)(0u - (uint32_t)zoff * (uint32_t)colsum[j0 + j]) : 0;
        for (int r = 1; r < 16; r++) memcpy(corr + r * TG__Q_NR8, corr, sizeof *corr * TG__Q_NR8);
        for (int64_t i = 0; i < m; i += R) {
            _tile_loadd(0, corr, NB);
            _tile_loadd(1, corr + 16, NB);
            _tile_loadd(2, corr, NB);
            _tile_loadd(3, corr + 16, NB);
            for (int64_t t = 0; t < chunks; t++) {
                _tile_loadd(4, a + i * lda + 64 * t, lda);
                _tile_loadd(5, a + (i + 16) * lda + 64 * t, lda);
                _tile_loadd(6, panel + t * 16 * NB, NB);
                _tile_loadd(7, panel + t * 16 * NB + 64, NB);
                _tile_dpbusd(0, 4, 6);
                _tile_dpbusd(1, 4, 7);
                _tile_dpbusd(2, 5, 6);
                _tile_dpbusd(3, 5, 7);
            }
            const int mr = (int)(m - i < R ? m - i : R);
            int64_t st;
            int32_t *d0 = tile_dst(c, ldc, kgrp, i, j0, &st);
            if (mr == R && nr == TG__Q_NR8 && d0) {
                int32_t *d1 = tile_dst(c, ldc, kgrp, i, j0 + 16, &st);
                _tile_stored(0, d0, st);
                _tile_stored(1, d1, st);
                _tile_stored(2, tile_dst(c, ldc, kgrp, i + 16, j0, &st), st);
                _tile_stored(3, tile_dst(c, ldc, kgrp, i + 16, j0 + 16, &st), st);
                continue;
            }
            _tile_stored(0, tmp, NB);
            _tile_stored(1, tmp + 16, NB);
            _tile_stored(2, tmp + 16 * TG__Q_NR8, NB);
            _tile_stored(3, tmp + 16 * TG__Q_NR8 + 16, NB);
            tg__q_store_tile(c, ldc, kgrp, tmp, i, mr, j0, nr, colsum, 0);   /* corrected already */
        }
    }
    tg__amx_tiles_end();
}

#else /* not x86 */

void tg__q_gemm_amx(int32_t *c, int64_t ldc, int64_t kgrp, const uint8_t *a, int64_t lda,
                    int64_t m, const tg_qweight *w, int64_t gi, int32_t zoff)
{
    TG_ASSERT(!"amx kernel called on a non-x86 build");
}
bool tg__q_cpu_has_amx(void) { return false; }
#endif
