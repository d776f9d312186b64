/* src/core/gemm_bf16_amx_tmpl.h - the body of the AMX-BF16 micro-kernel
 * (gemm_bf16_amx.c builds it on the CPU's tiles and on emulated ones).
 * Define MICRO_NAME, MICRO_ATTR (the function's attributes) and TG__AMX_EMU
 * (core/amx_tiles.h) before including.
 *
 * A 32 x 32 tile of c is four 16 x 16 f32 tiles (tmm0-3); per 32 k, tmm4-5
 * hold two 16-row slices of the A panel (rows of kcp bf16), tmm6-7 the B
 * panel's two 16-column halves (16 rows of pairs, 128 bytes apart), and four
 * tdpbf16ps add 4 x 16 x 16 x 32 products into f32. */
#include "core/amx_tiles.h"

MICRO_ATTR void MICRO_NAME(const uint32_t *ap, const uint32_t *bp, int64_t kp, float *c,
                           int64_t ldc, int mr, int nr, bool first, float beta)
{
    _Static_assert(TG__BF16_MR_AMX == 32 && TG__BF16_NR == 32, "the tile below is 32 x 32");
    TG_ASSERT(kp % 16 == 0);
    const int64_t sa = kp * 4, sb = TG__BF16_NR * 4;   /* row strides in bytes */
    TG__TILE_ZERO(0);
    TG__TILE_ZERO(1);
    TG__TILE_ZERO(2);
    TG__TILE_ZERO(3);
    for (int64_t p = 0; p < kp; p += 16) {
        TG__TILE_LOAD(4, ap + p, sa);
        TG__TILE_LOAD(5, ap + 16 * kp + p, sa);
        TG__TILE_LOAD(6, bp + p * TG__BF16_NR, sb);
        TG__TILE_LOAD(7, bp + p * TG__BF16_NR + 16, sb);
        TG__TILE_DPBF16PS(0, 4, 6);
        TG__TILE_DPBF16PS(1, 4, 7);
        TG__TILE_DPBF16PS(2, 5, 6);
        TG__TILE_DPBF16PS(3, 5, 7);
    }
    _Alignas(64) float acc[32 * 32];
    TG__TILE_STORE(0, acc, 128);
    TG__TILE_STORE(1, acc + 16, 128);
    TG__TILE_STORE(2, acc + 16 * 32, 128);
    TG__TILE_STORE(3, acc + 16 * 32 + 16, 128);
    tg__bf16_store(c, ldc, acc, 32, mr, nr, first, beta);
}

#undef MICRO_NAME
#undef MICRO_ATTR
#undef TG__AMX_EMU
