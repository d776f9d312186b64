/* src/core/cpu.c - how wide tapegrad's own kernels may go: the CPU's
 * instruction sets, lowered by the environment variable TG_MAX_ISA, as
 * oneDNN's ONEDNN_MAX_CPU_ISA lowers its own.  Every dispatcher of a vector
 * kernel (the conversions, the double-lane kernels, the bf16 and int8 GEMMs,
 * the index, pooling and first-position kernels, gelu's tanh form) asks
 * tg__isa_allows before it asks the CPU, so one variable makes a machine
 * with AVX-512 or AMX run what an AVX2-only or a plain x86-64 one runs.
 * OpenBLAS picks its own kernels (OPENBLAS_CORETYPE). */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

static const char *const ISA_NAMES[] = {"portable", "avx2", "avx512", "amx"};
enum { N_ISA = sizeof ISA_NAMES / sizeof ISA_NAMES[0] };

/* The level TG_MAX_ISA names, or -1 (unset, empty, "native" or unknown). */
static int named_level(void)
{
    const char *e = getenv("TG_MAX_ISA");
    for (int k = 0; e && k < N_ISA; k++)
        if (strcmp(e, ISA_NAMES[k]) == 0) return k;
    return -1;
}

/* TG_MAX_ISA's level: unset or empty, "native" or "amx" put no bound; an
 * unknown value puts none either and says so on stderr, once. */
static int cap_from_env(void)
{
    const char *e = getenv("TG_MAX_ISA");
    if (!e || !*e || strcmp(e, "native") == 0) return N_ISA - 1;
    const int k = named_level();
    if (k >= 0) return k;
    fprintf(stderr, "tapegrad: TG_MAX_ISA=%s is not one of portable, avx2, avx512, amx, "
            "native; no bound is put on the kernels\n", e);
    return N_ISA - 1;
}

/* The bound's level, -1 until TG_MAX_ISA is read; a race stores the same
 * answer twice. */
static _Atomic int cap = -1;

bool tg__isa_allows(tg__isa level)
{
    int c = atomic_load_explicit(&cap, memory_order_relaxed);
    if (c < 0) {
        c = cap_from_env();
        atomic_store_explicit(&cap, c, memory_order_relaxed);
    }
    return (int)level <= c;
}

int tg__isa_set_bound(int level)
{
    int old = atomic_load_explicit(&cap, memory_order_relaxed);
    atomic_store_explicit(&cap, level, memory_order_relaxed);
    return old;
}

const char *tg_cpu_isa(void)
{
    if (tg__amx_available(TG__AMX_BF16) || tg__amx_available(TG__AMX_INT8))
        return ISA_NAMES[TG__ISA_AMX];
    if (tg__cpu_has_avx512bw()) return ISA_NAMES[TG__ISA_AVX512];
    if (tg__cpu_has_half_simd()) return ISA_NAMES[TG__ISA_AVX2];
    return ISA_NAMES[TG__ISA_PORTABLE];
}

const char *tg_cpu_isa_bound(void)
{
    const int k = named_level();
    return k >= 0 ? ISA_NAMES[k] : NULL;
}
