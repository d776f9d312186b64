/* src/quant/qpack.c - packed i8 weights (tg_qweight) and the packed GEMM
 * driver with its portable tile kernel; the x86 tiles are in qgemm_x86.c.
 * Layout of the panels: see quant_internal.h. */
#include <string.h>

#include "quant/quant_internal.h"

/* B_gi[j][t] of the weight buffer wb (contiguous, float layout). */
static int8_t b_at(const tg_qweight *w, const int8_t *wb, int64_t gi, int64_t j, int64_t t)
{
    if (w->transpose)   /* w (c_in, cog, K): column j = (co, k), t = ci of the group */
        return wb[(gi * w->kd + t) * w->n + j];
    return wb[(gi * w->n + j) * w->kd + t];   /* w (c_out, cig, K): t = (ci, k) */
}

static void pack_group(tg_qweight *w, const int8_t *wb, int64_t gi)
{
    int16_t *p = (int16_t *)tg__q_group_panels(w, gi);
    for (int64_t blk = 0; blk < w->nblk; blk++)
        for (int64_t t2 = 0; t2 < w->kd2; t2++)
            for (int64_t j = 0; j < TG__Q_NR; j++)
                for (int64_t e = 0; e < 2; e++) {
                    const int64_t col = blk * TG__Q_NR + j, t = 2 * t2 + e;
                    *p++ = (col < w->n && t < w->kd) ? b_at(w, wb, gi, col, t) : 0;
                }
}

/* panels8 and colsum of group gi (layout in quant_internal.h). */
static void pack_group8(tg_qweight *w, const int8_t *wb, int64_t gi)
{
    int8_t *p = w->panels8 + gi * w->nblk8 * w->kqp * 4 * TG__Q_NR8;
    for (int64_t blk = 0; blk < w->nblk8; blk++)
        for (int64_t t4 = 0; t4 < w->kqp; t4++)
            for (int64_t j = 0; j < TG__Q_NR8; j++)
                for (int64_t e = 0; e < 4; e++) {
                    const int64_t col = blk * TG__Q_NR8 + j, t = 4 * t4 + e;
                    *p++ = (col < w->n && t < w->kd) ? b_at(w, wb, gi, col, t) : 0;
                }
    for (int64_t j = 0; j < w->n; j++) {
        int32_t sum = 0;
        for (int64_t t = 0; t < w->kd; t++) sum += b_at(w, wb, gi, j, t);
        w->colsum[gi * w->n + j] = sum;
    }
}

/* taps8 and tapsum of a transposed weight (layout in quant_internal.h). */
static int pack_taps(tg_qweight *w, const int8_t *wb)
{
    const int64_t cog = w->shape[1], cig = w->kd, K = w->n / cog;
    w->ncob = (cog + 15) / 16;
    w->ncc = (cig + 63) / 64;
    w->taps8 = tg__calloc((size_t)(w->groups * K * w->ncob * w->ncc) * 16 * 64, 1);
    w->tapsum = tg__calloc((size_t)(w->groups * K * cog), sizeof *w->tapsum);
    if (!w->taps8 || !w->tapsum) return TG_ENOMEM;
    for (int64_t gi = 0; gi < w->groups; gi++)
        for (int64_t ci = 0; ci < cig; ci++)
            for (int64_t co = 0; co < cog; co++)
                for (int64_t k = 0; k < K; k++) {
                    const int8_t v = wb[((gi * cig + ci) * cog + co) * K + k];
                    const int64_t tile = ((gi * K + k) * w->ncob + co / 16) * w->ncc + ci / 64;
                    w->taps8[(tile * 16 + co % 16) * 64 + ci % 64] = v;
                    w->tapsum[(gi * K + k) * cog + co] += v;
                }
    return TG_OK;
}

/* taps16 of a transposed weight (layout in quant_internal.h). */
static int pack_taps16(tg_qweight *w, const int8_t *wb)
{
    const int64_t cog = w->shape[1], cig = w->kd, K = w->n / cog;
    w->ncp = (cig + 1) / 2;
    w->taps16 = tg__calloc((size_t)(w->groups * K * cog * w->ncp), sizeof *w->taps16);
    if (!w->taps16) return TG_ENOMEM;
    for (int64_t gi = 0; gi < w->groups; gi++)
        for (int64_t ci = 0; ci < cig; ci++)
            for (int64_t co = 0; co < cog; co++)
                for (int64_t k = 0; k < K; k++) {
                    const int8_t v = wb[((gi * cig + ci) * cog + co) * K + k];
                    int32_t *pair = &w->taps16[((gi * K + k) * cog + co) * w->ncp + ci / 2];
                    const uint32_t half = (uint32_t)(uint16_t)(int16_t)v << (ci % 2 ? 16 : 0);
                    *pair = (int32_t)((uint32_t)*pair | half);
                }
    return TG_OK;
}

static int check_weight(const tg_tensor *weight, bool transpose, int64_t groups)
{
    const char *op = "qweight_new";
    TG_CHECK(weight, TG_EINVAL, "%s: weight must not be NULL", op);
    TG_CHECK(weight->dtype == TG_I8, TG_EDTYPE, "%s: weight must be i8, got %s", op,
             tg_dtype_name(weight->dtype));
    TG_CHECK(weight->ndim >= 2 && weight->ndim <= 5, TG_ESHAPE,
             "%s: weight must have 2..5 dims (2 for Linear), got %d", op, weight->ndim);
    TG_CHECK(groups >= 1 && weight->shape[0] % groups == 0, TG_EINVAL,
             "%s: groups=%lld must be >= 1 and divide weight.shape[0]=%lld", op,
             (long long)groups, (long long)weight->shape[0]);
    (void)transpose;
    return TG_OK;
}

int tg_qweight_new(tg_qweight **out, tg_tensor *weight, bool transpose, int64_t groups)
{
    TG_CHECK(out, TG_EINVAL, "qweight_new: out must not be NULL");
    TG_TRY(check_weight(weight, transpose, groups));
    const int64_t K = tg__numel(weight->ndim - 2, weight->shape + 2);
    tg_qweight *w = tg__calloc(1, sizeof *w);
    if (!w) return TG_ENOMEM;
    w->transpose = transpose;
    w->ndim = weight->ndim;
    memcpy(w->shape, weight->shape, sizeof w->shape);
    w->groups = groups;
    w->n = transpose ? weight->shape[1] * K : weight->shape[0] / groups;
    w->kd = transpose ? weight->shape[0] / groups : weight->shape[1] * K;
    w->kd2 = (w->kd + 1) / 2;
    w->nblk = (w->n + TG__Q_NR - 1) / TG__Q_NR;
    w->kq = (w->kd + 3) / 4;
    w->kqp = (w->kq + 15) / 16 * 16;
    w->nblk8 = (w->n + TG__Q_NR8 - 1) / TG__Q_NR8;
    const size_t nel = (size_t)(groups * w->nblk * w->kd2 * 2 * TG__Q_NR);
    const size_t nel8 = (size_t)(groups * w->nblk8 * w->kqp * 4 * TG__Q_NR8);
    /* the byte panels only where the VNNI or AMX kernel can run */
    const bool bytes = tg__q_cpu_has_vnni();
    int8_t *wb = tg__malloc((size_t)tg_tensor_numel(weight) + 1);
    w->panels = tg__malloc(nel * sizeof *w->panels + 1);
    if (bytes) {
        w->panels8 = tg__malloc(nel8 + 1);
        w->colsum = tg__malloc((size_t)(groups * w->n) * sizeof *w->colsum + 1);
    }
    if (!wb || !w->panels || (bytes && (!w->panels8 || !w->colsum))) {
        free(wb);
        tg_qweight_free(w);
        return TG_ENOMEM;
    }
    tg__gather(weight, TG_I8, wb);
    for (int64_t gi = 0; gi < groups; gi++) {
        pack_group(w, wb, gi);
        if (bytes) pack_group8(w, wb, gi);
    }
    if (transpose && w->ndim <= 4 && ((bytes && pack_taps(w, wb) < 0) ||
                                       (tg__q_cpu_has_avx2() && pack_taps16(w, wb) < 0))) {
        free(wb);
        tg_qweight_free(w);
        return TG_ENOMEM;
    }
    free(wb);
    *out = w;
    return TG_OK;
}

void tg_qweight_free(tg_qweight *w)
{
    if (!w) return;
    free(w->panels);
    free(w->panels8);
    free(w->colsum);
    free(w->taps8);
    free(w->tapsum);
    free(w->taps16);
    free(w);
}

/* The reference tile: the same sums in the same exact integer arithmetic. */
static void tile_portable(int32_t *c, int64_t ldc, const int16_t *a, int64_t lda, int mr,
                          const int16_t *panel, int64_t kd2)
{
    for (int r = 0; r < TG__Q_MR; r++) {
        const int16_t *ar = a + (r < mr ? r : mr - 1) * lda;
        int32_t acc[TG__Q_NR] = {0};
        for (int64_t t2 = 0; t2 < kd2; t2++) {
            const int16_t *s = panel + t2 * 2 * TG__Q_NR;
            for (int j = 0; j < TG__Q_NR; j++)
                acc[j] += (int32_t)ar[2 * t2] * s[2 * j] + (int32_t)ar[2 * t2 + 1] * s[2 * j + 1];
        }
        memcpy(c + r * ldc, acc, sizeof acc);
    }
}

/* Stores an mr x nr tile (row stride TG__Q_NR) at rows i.., columns j0..:
 * row-major with stride ldc, or, when kgrp > 0, grouped by column:
 * element (row, col) at (col / kgrp) * ldc + row * kgrp + col % kgrp. */
static void store_tile(int32_t *c, int64_t ldc, int64_t kgrp, const int32_t *tile, int64_t i,
                       int64_t j0, int mr, int nr)
{
    if (kgrp == 0) {
        for (int r = 0; r < mr; r++)
            memcpy(c + (i + r) * ldc + j0, tile + r * TG__Q_NR, (size_t)nr * sizeof *tile);
        return;
    }
    int64_t grp = j0 / kgrp, k = j0 % kgrp;   /* advanced without dividing */
    for (int j = 0; j < nr; j++) {
        int32_t *dst = c + grp * ldc + i * kgrp + k;
        for (int r = 0; r < mr; r++) dst[r * kgrp] = tile[r * TG__Q_NR + j];
        if (++k == kgrp) k = 0, grp++;
    }
}

void tg__q_gemm_packed(int32_t *c, int64_t ldc, int64_t kgrp, const int16_t *a, int64_t lda,
                       int64_t m, const tg_qweight *w, int64_t gi, tg_int8_kernel kern)
{
    tg__q_tile_fn *tile = kern == TG_INT8_KERNEL_AVX2 ? tg__q_tile_avx2 : tile_portable;
    const int16_t *panels = tg__q_group_panels(w, gi);
    int32_t tmp[TG__Q_MR * TG__Q_NR];
    /* Column blocks outside: one panel (kd * 32 bytes) stays in cache while
     * every row block of a sweeps past it. */
    for (int64_t blk = 0; blk < w->nblk; blk++) {
        const int16_t *panel = panels + blk * w->kd2 * 2 * TG__Q_NR;
        const int64_t j0 = blk * TG__Q_NR;
        const int nr = (int)(w->n - j0 < TG__Q_NR ? w->n - j0 : TG__Q_NR);
        for (int64_t i = 0; i < m; i += TG__Q_MR) {
            const int mr = (int)(m - i < TG__Q_MR ? m - i : TG__Q_MR);
            if (kgrp == 0 && mr == TG__Q_MR && nr == TG__Q_NR) {
                tile(c + i * ldc + j0, ldc, a + i * lda, lda, mr, panel, w->kd2);
                continue;
            }
            /* kgrp a multiple of 16: the block's columns share one group,
             * so the tile's rows are kgrp apart there. */
            if (kgrp % TG__Q_NR == 0 && mr == TG__Q_MR && nr == TG__Q_NR) {
                tile(c + (j0 / kgrp) * ldc + i * kgrp + j0 % kgrp, kgrp, a + i * lda, lda, mr,
                     panel, w->kd2);
                continue;
            }
            tile(tmp, TG__Q_NR, a + i * lda, lda, mr, panel, w->kd2);
            store_tile(c, ldc, kgrp, tmp, i, j0, mr, nr);
        }
    }
}
