/* tests/test_max_isa.c - the bound TG_MAX_ISA puts on the vector kernels
 * (src/core/cpu.c): under each bound every dispatcher offers only kernels at
 * or below it, and tg_cpu_isa names the widest in use.  The variable itself,
 * read once per process, is tested through the command (test_cli.c). */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "helpers.h"
#include "ops/activation_internal.h"
#include "ops/gather_internal.h"
#include "ops/pool_internal.h"
#include "ops/softmax_rows_internal.h"
#include "ops/sort_internal.h"
#include "quant/quant_internal.h"
#include "tapegrad/precision.h"
#include "tapegrad/quant.h"
#include "tapegrad/tensor.h"

static int saved;
static void setup(void) { saved = tg__isa_set_bound(-1); }
static void teardown(void) { tg__isa_set_bound(saved); }
TestSuite(max_isa, .init = setup, .fini = teardown);

/* What each dispatcher offers: [0] AVX2-class, [1] AVX-512-class kernels. */
static void offers(bool k[2][9])
{
    k[0][0] = tg__index_kernel_available(TG__INDEX_KERNEL_AVX2);
    k[1][0] = tg__index_kernel_available(TG__INDEX_KERNEL_AVX512);
    k[0][1] = tg__pool_kernel_available(TG__POOL_KERNEL_AVX2);
    k[1][1] = tg__pool_kernel_available(TG__POOL_KERNEL_AVX512);
    k[0][2] = tg__first_kernel_available(TG__FIRST_KERNEL_AVX2);
    k[1][2] = tg__first_kernel_available(TG__FIRST_KERNEL_AVX512);
    k[0][3] = tg__gelu_kernel_available(TG__GELU_KERNEL_AVX2);
    k[1][3] = tg__gelu_kernel_available(TG__GELU_KERNEL_AVX512);
    k[0][4] = tg__cpu_has_half_simd();
    k[1][4] = tg__cpu_has_avx512bw();
    k[0][5] = tg__q_cpu_has_avx2();
    k[1][5] = tg__q_cpu_has_vnni();
    k[0][6] = tg__exp_width_get() >= TG__EXP_AVX2;
    k[1][6] = tg__exp_width_get() == TG__EXP_AVX512;
    k[0][7] = tg__cast_kernel() >= TG__CAST_AVX2;
    k[1][7] = tg_bf16_kernel_available(TG_BF16_KERNEL_AVX512) ||
              tg_bf16_kernel_available(TG_BF16_KERNEL_AMX);
    k[0][8] = tg_int8_kernel_available(TG_INT8_KERNEL_AVX2);
    k[1][8] = tg_int8_kernel_available(TG_INT8_KERNEL_VNNI) ||
              tg_int8_kernel_available(TG_INT8_KERNEL_AMX);
}

Test(max_isa, each_bound_leaves_only_the_kernels_at_or_below_it)
{
    bool native[2][9], got[2][9];
    tg__isa_set_bound(TG__ISA_AMX);
    offers(native);
    const char *isa = tg_cpu_isa();
    for (int bound = TG__ISA_PORTABLE; bound <= TG__ISA_AMX; bound++) {
        tg__isa_set_bound(bound);
        offers(got);
        for (int w = 0; w < 2; w++)
            for (int d = 0; d < 9; d++)
                cr_assert(eq(int, got[w][d], native[w][d] && bound >= w + 1),
                          "bound %d, dispatcher %d, width %d", bound, d, w);
        if (bound == TG__ISA_PORTABLE) cr_assert(eq(str, (char *)tg_cpu_isa(), "portable"));
        if (bound == TG__ISA_AVX2 && native[0][4])
            cr_assert(eq(str, (char *)tg_cpu_isa(), "avx2"));
    }
    cr_assert(eq(str, (char *)tg_cpu_isa(), (char *)isa));
}

Test(max_isa, native_names_the_widest_set_the_cpu_runs)
{
    tg__isa_set_bound(TG__ISA_AMX);
    const char *isa = tg_cpu_isa();
    if (tg__cpu_has_avx512bw())
        cr_assert(strcmp(isa, "avx512") == 0 || strcmp(isa, "amx") == 0, "%s", isa);
    else if (tg__cpu_has_half_simd())
        cr_assert(eq(str, (char *)isa, "avx2"));
    else
        cr_assert(eq(str, (char *)isa, "portable"));
}

/* The tests' "[NOT RUN]" and "[SKIP]" lines end with th_isa_bound_note(),
 * which names the bound when TG_MAX_ISA sets one, so that a kernel left out
 * by it does not read as one the CPU lacks; without a bound it is empty. */
Test(max_isa, skip_reasons_name_the_bound)
{
    const char *was = getenv("TG_MAX_ISA");
    char *saved_env = was ? strdup(was) : NULL;
    cr_assert(eq(int, setenv("TG_MAX_ISA", "avx2", 1), 0));
    const char *note = th_isa_bound_note();
    cr_assert(strstr(note, "TG_MAX_ISA=avx2") != NULL, "note '%s'", note);
    cr_assert(eq(int, unsetenv("TG_MAX_ISA"), 0));
    cr_assert(eq(str, (char *)th_isa_bound_note(), ""));
    cr_assert(eq(int, setenv("TG_MAX_ISA", "native", 1), 0));
    cr_assert(eq(str, (char *)th_isa_bound_note(), ""));
    if (saved_env) cr_assert(eq(int, setenv("TG_MAX_ISA", saved_env, 1), 0));
    else cr_assert(eq(int, unsetenv("TG_MAX_ISA"), 0));
    free(saved_env);
}
