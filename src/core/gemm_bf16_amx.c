/* src/core/gemm_bf16_amx.c - the AMX-BF16 micro-kernel of the bf16 GEMM
 * (its body: gemm_bf16_amx_tmpl.h), on the CPU's tiles and on emulated ones
 * (the probe, the tile configuration and the emulation, shared with the
 * int8 kernels, are in amx.c). */

#include "core/gemm_bf16.h"

#define TG__AMX_EMU 1
#define MICRO_NAME tg__bf16_micro_amx_emulated
#define MICRO_ATTR
#include "core/gemm_bf16_amx_tmpl.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

bool tg__bf16_cpu_has_amx(void)
{
    return tg__bf16_cpu_has_avx512() && tg__amx_available(TG__AMX_BF16);
}

#define TG__AMX_EMU 0
#define MICRO_NAME tg__bf16_micro_amx
#define MICRO_ATTR __attribute__((target("amx-tile,amx-bf16,avx512bf16,avx512bw,avx512f")))
#include "core/gemm_bf16_amx_tmpl.h"

#else /* not x86 with GCC or Clang */

bool tg__bf16_cpu_has_amx(void) { return false; }
void tg__bf16_micro_amx(const uint32_t *ap, const uint32_t *bp, int64_t kp, float *c,
                        int64_t ldc, int mr, int nr, bool first, float beta)
{
    TG_ASSERT(!"amx bf16 kernel called on a build without AMX");
}
#endif
