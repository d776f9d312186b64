/* src/quant/qamx_tmpl.h - the bodies of the int8 AMX kernels (qamx_x86.c
 * builds them on the CPU's tiles and on emulated ones): the packed GEMM and
 * the stride-phase ConvTranspose's phase.  Define AMX_FN(name) (the
 * functions' names), AMX_ATTR (their attributes) and TG__AMX_EMU
 * (core/amx_tiles.h) before including. */
#include "core/amx_tiles.h"

/* The GEMM: tiles 0-3 hold a 32 x 32 block of c (four 16 x 16 i32), 4-5
 * two 16-row slices of a (64 k each), 6-7 the block's two 16-column B
 * tiles: 16 slices of panels8, rows 128 bytes apart.  Each tdpbusd adds
 * 16 x 16 x 64 u8 x s8 products into i32, exactly. */
static AMX_ATTR void AMX_FN(gemm)(int32_t *c, int64_t ldc, int64_t kgrp, const uint8_t *a,
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
            TG__TILE_LOAD(0, corr, NB);
            TG__TILE_LOAD(1, corr + 16, NB);
            TG__TILE_LOAD(2, corr, NB);
            TG__TILE_LOAD(3, corr + 16, NB);
            for (int64_t t = 0; t < chunks; t++) {
                TG__TILE_LOAD(4, a + i * lda + 64 * t, lda);
                TG__TILE_LOAD(5, a + (i + 16) * lda + 64 * t, lda);
                TG__TILE_LOAD(6, panel + t * 16 * NB, NB);
                TG__TILE_LOAD(7, panel + t * 16 * NB + 64, NB);
                TG__TILE_DPBUSD(0, 4, 6);
                TG__TILE_DPBUSD(1, 4, 7);
                TG__TILE_DPBUSD(2, 5, 6);
                TG__TILE_DPBUSD(3, 5, 7);
            }
            const int mr = (int)(m - i < R ? m - i : R);
            int64_t st;
            int32_t *d0 = tile_dst(c, ldc, kgrp, i, j0, &st);
            if (mr == R && nr == TG__Q_NR8 && d0) {
                int32_t *d1 = tile_dst(c, ldc, kgrp, i, j0 + 16, &st);
                TG__TILE_STORE(0, d0, st);
                TG__TILE_STORE(1, d1, st);
                TG__TILE_STORE(2, tile_dst(c, ldc, kgrp, i + 16, j0, &st), st);
                TG__TILE_STORE(3, tile_dst(c, ldc, kgrp, i + 16, j0 + 16, &st), st);
                continue;
            }
            TG__TILE_STORE(0, tmp, NB);
            TG__TILE_STORE(1, tmp + 16, NB);
            TG__TILE_STORE(2, tmp + 16 * TG__Q_NR8, NB);
            TG__TILE_STORE(3, tmp + 16 * TG__Q_NR8 + 16, NB);
            tg__q_store_tile(c, ldc, kgrp, tmp, i, mr, j0, nr, colsum, 0);   /* corrected already */
        }
    }
    tg__amx_tiles_end();
}

/* tg__q_phase_run_amx: the phase (p1, p2) of sample b, group gi:
 * planes[co][f - ffirst] for the phase's flat positions f, requantized;
 * tdpbsud (signed weights in A, unsigned activations in B). */
static AMX_ATTR void AMX_FN(phase)(const tg__q_phase_job *j, const uint8_t *x4, int64_t gi,
                                   const tg__q_phase_plan *ph, uint8_t *planes)
{
    const tg_qweight *w = j->op.w;
    const int64_t cog = j->op.g->c_img / j->op.g->groups;
    _Alignas(64) int32_t corr[2][TILE * TILE];
    _Alignas(64) int32_t tmp[2 * TILE * 2 * TILE];
    for (int64_t cob = 0; cob < w->ncob; cob += 2) {
        /* two blocks of 16 output channels at a time; a last single block
         * (16 or fewer channels in all) uses tiles 0, 1, 4, 6 and 7 only */
        const bool two = cob + 1 < w->ncob;
        for (int h = 0; h < (two ? 2 : 1); h++)   /* -zoff * (the phase's weights summed) */
            for (int rr = 0; rr < TILE; rr++) {
                const int32_t v = tg__q_phase_corr(j, ph, gi, (cob + h) * TILE + rr);
                for (int c = 0; c < TILE; c++) corr[h][rr * TILE + c] = v;
            }
        for (int64_t f0 = ph->ffirst; f0 <= ph->flast; f0 += 2 * TILE) {
            TG__TILE_LOAD(0, corr[0], 4 * TILE);
            TG__TILE_LOAD(1, corr[0], 4 * TILE);
            if (two) {
                TG__TILE_LOAD(2, corr[1], 4 * TILE);
                TG__TILE_LOAD(3, corr[1], 4 * TILE);
            }
            for (int t = 0; t < ph->nt; t++) {
                const uint8_t *xb = x4 + (f0 - ph->toff[t]) * 4;
                const int8_t *wa = tg__q_tap_panel(w, gi, ph->tk[t], cob);
                for (int64_t cc = 0; cc < w->ncc; cc++) {
                    const uint8_t *xc = xb + cc * TILE * j->np * 4;
                    TG__TILE_LOAD(4, wa + cc * TILE * 64, 64);
                    TG__TILE_LOAD(6, xc, j->np * 4);
                    TG__TILE_LOAD(7, xc + 64, j->np * 4);
                    TG__TILE_DPBSUD(0, 4, 6);
                    TG__TILE_DPBSUD(1, 4, 7);
                    if (two) {
                        TG__TILE_LOAD(5, wa + (w->ncc + cc) * TILE * 64, 64);
                        TG__TILE_DPBSUD(2, 5, 6);
                        TG__TILE_DPBSUD(3, 5, 7);
                    }
                }
            }
            TG__TILE_STORE(0, tmp, 8 * TILE);
            TG__TILE_STORE(1, tmp + TILE, 8 * TILE);
            if (two) {
                TG__TILE_STORE(2, tmp + 2 * TILE * TILE, 8 * TILE);
                TG__TILE_STORE(3, tmp + 2 * TILE * TILE + TILE, 8 * TILE);
            }
            const int64_t co0 = cob * TILE, nco = (two ? 2 : 1) * TILE;
            tg__q_requant_channel_rows(planes, j->op.dt, co0 * j->fmax + (f0 - ph->ffirst),
                                       j->fmax, tmp, cog - co0 < nco ? cog - co0 : nco,
                                       2 * TILE, 2 * TILE, &j->op.r[gi * cog + co0],
                                       TG_INT8_KERNEL_AMX);
        }
    }
}

#undef AMX_FN
#undef AMX_ATTR
#undef TG__AMX_EMU
