/* src/quant/qamx_x86.c - AMX-INT8: the packed GEMM and the stride-phase
 * ConvTranspose's phase on tiles (their bodies: qamx_tmpl.h), built for the
 * CPU's tiles and for emulated ones (core/amx.c has the probe, the tile
 * configuration and the emulation; qconvt_phase.c the phase's method). */
#include <string.h>

#include "quant/qconvt_phase.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

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

#define TG__AMX_EMU 0
#define AMX_FN(name) name##_tiles
#define AMX_ATTR __attribute__((target("amx-tile,amx-int8,avx512vnni,avx512bw,avx512f")))
#include "quant/qamx_tmpl.h"

#define TG__AMX_EMU 1
#define AMX_FN(name) name##_emulated
#define AMX_ATTR
#include "quant/qamx_tmpl.h"

void tg__q_gemm_amx(int32_t *c, int64_t ldc, int64_t kgrp, const uint8_t *a, int64_t lda,
                    int64_t m, const tg_qweight *w, int64_t gi, int32_t zoff)
{
    (tg__amx_emulated() ? gemm_emulated : gemm_tiles)(c, ldc, kgrp, a, lda, m, w, gi, zoff);
}

void tg__q_phase_run_amx(const tg__q_phase_job *j, const uint8_t *x4, int64_t gi,
                         const tg__q_phase_plan *ph, uint8_t *planes)
{
    (tg__amx_emulated() ? phase_emulated : phase_tiles)(j, x4, gi, ph, planes);
}

#else /* not x86 */

void tg__q_gemm_amx(int32_t *c, int64_t ldc, int64_t kgrp, const uint8_t *a, int64_t lda,
                    int64_t m, const tg_qweight *w, int64_t gi, int32_t zoff)
{
    TG_ASSERT(!"amx kernel called on a non-x86 build");
}
bool tg__q_cpu_has_amx(void) { return false; }
#endif
