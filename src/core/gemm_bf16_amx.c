/* src/core/gemm_bf16_amx.c - the AMX-BF16 micro-kernel of the bf16 GEMM
 * (the probe and tile configuration it shares with the int8 kernels are in
 * amx.c).
 *
 * A 32 x 32 tile of c is four 16 x 16 f32 tiles (tmm0-3); per 32 k, tmm4-5
 * hold two 16-row slices of the A panel (rows of kcp bf16), tmm6-7 the B
 * panel's two 16-column halves (16 rows of pairs, 128 bytes apart), and four
 * tdpbf16ps add 4 x 16 x 16 x 32 products into f32. */

#include "core/gemm_bf16.h"

static float bf16_lo(uint32_t v) { return tg_bf16_to_f32((uint16_t)(v & 0xFFFF)); }
static float bf16_hi(uint32_t v) { return tg_bf16_to_f32((uint16_t)(v >> 16)); }

void tg__bf16_micro_amx_emulated(const uint32_t *ap, const uint32_t *bp, int64_t kp, float *c,
                                 int64_t ldc, int mr, int nr, bool first, float beta)
{
    float acc[32 * 32];
    for (int i = 0; i < 32; i++)
        for (int j = 0; j < 32; j++) {
            float s = 0;
            for (int64_t p = 0; p < kp; p++) {
                const uint32_t a = ap[i * kp + p], b = bp[p * TG__BF16_NR + j];
                s += bf16_lo(a) * bf16_lo(b) + bf16_hi(a) * bf16_hi(b);
            }
            acc[i * 32 + j] = s;
        }
    tg__bf16_store(c, ldc, acc, 32, mr, nr, first, beta);
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#define AMX_TARGET __attribute__((target("amx-tile,amx-bf16,avx512bf16,avx512bw,avx512f")))

bool tg__bf16_cpu_has_amx(void)
{
    return tg__bf16_cpu_has_avx512() && tg__amx_available(TG__AMX_BF16);
}

AMX_TARGET void tg__bf16_micro_amx(const uint32_t *ap, const uint32_t *bp, int64_t kp,
                                   float *c, int64_t ldc, int mr, int nr, bool first,
                                   float beta)
{
    _Static_assert(TG__BF16_MR_AMX == 32 && TG__BF16_NR == 32, "the tile below is 32 x 32");
    TG_ASSERT(kp % 16 == 0);
    const int64_t sa = kp * 4, sb = TG__BF16_NR * 4;   /* row strides in bytes */
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (int64_t p = 0; p < kp; p += 16) {
        _tile_loadd(4, ap + p, sa);
        _tile_loadd(5, ap + 16 * kp + p, sa);
        _tile_loadd(6, bp + p * TG__BF16_NR, sb);
        _tile_loadd(7, bp + p * TG__BF16_NR + 16, sb);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    _Alignas(64) float acc[32 * 32];
    _tile_stored(0, acc, 128);
    _tile_stored(1, acc + 16, 128);
    _tile_stored(2, acc + 16 * 32, 128);
    _tile_stored(3, acc + 16 * 32 + 16, 128);
    tg__bf16_store(c, ldc, acc, 32, mr, nr, first, beta);
}

#else /* not x86 with GCC or Clang */

bool tg__bf16_cpu_has_amx(void) { return false; }
void tg__bf16_micro_amx(const uint32_t *ap, const uint32_t *bp, int64_t kp, float *c,
                        int64_t ldc, int mr, int nr, bool first, float beta)
{
    TG_ASSERT(!"amx bf16 kernel called on a build without AMX");
}
#endif
