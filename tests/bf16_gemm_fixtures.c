/* tests/bf16_gemm_fixtures.c - choosing the bf16 kernel under test, shared
 * by the bf16 GEMM and fused attention tests (bf16_gemm_fixtures.h). */
#include "bf16_gemm_fixtures.h"

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "core/core.h"
#include "helpers.h"
#include "tapegrad/status.h"

/* The instructions kernel k needs beside the portable ones. */
static const char *needs(tg_bf16_kernel k)
{
    return k == TG_BF16_KERNEL_AMX ? "AMX-TILE and AMX-BF16, with the OS's permission"
                                   : "AVX-512 F, BW, VL and BF16";
}

void use_kernel(tg_bf16_kernel k)
{
    if (!tg_bf16_kernel_available(k))
        cr_skip_test("the %s bf16 kernel needs CPU instructions this machine lacks (%s)",
                     tg_bf16_kernel_name(k), needs(k));
    cr_assert(eq(int, tg_bf16_kernel_set(k), TG_OK));
    cr_assert(eq(int, tg_bf16_kernel_get(), k));
}

bool use_kernel_if_there(tg_bf16_kernel k)
{
    if (!tg_bf16_kernel_available(k)) {
        th_not_run("the %s bf16 kernel is not run: this CPU lacks %s", tg_bf16_kernel_name(k),
                   needs(k));
        return false;
    }
    use_kernel(k);
    return true;
}

void emulate_amx(void)
{
    if (!tg_bf16_kernel_available(TG_BF16_KERNEL_AVX512))
        cr_skip_test("the amx kernel packs with AVX-512 BF16, which this machine lacks: "
                     "amx not run, not even on emulated tiles");
    tg__amx_set_emulated(true);
}
