/* src/core/blas.c - OpenBLAS's kernels on a CPU that OpenBLAS does not know.
 *
 * Debian's OpenBLAS is built for many CPUs at once (DYNAMIC_ARCH) and picks
 * its kernels from the CPU's family and model when it is loaded.  A model
 * newer than the library falls back to "Prescott", its SSE3 kernels: on an
 * Intel Xeon of family 6, model 207 (Emerald Rapids), Debian 12's OpenBLAS
 * 0.3.21 does so, and sgemm runs at 27 GFLOP/s on one core where its
 * AVX-512 kernels ("SkylakeX") run at 145 (docs/performance.md).
 *
 * So when the library is loaded, before main: if OpenBLAS chose Prescott,
 * OPENBLAS_CORETYPE is not set, and the CPU (with the OS, which
 * __builtin_cpu_supports checks through XGETBV) runs AVX-512 (F, CD, BW, DQ,
 * VL) or AVX2 with FMA, tapegrad asks OpenBLAS for SkylakeX or Haswell
 * through OpenBLAS's own selection: gotoblas_dynamic_quit(), then
 * gotoblas_dynamic_init() with OPENBLAS_CORETYPE set for that call (and
 * removed after, so the environment is left as it was).  Those two functions
 * exist only in DYNAMIC_ARCH builds; they are weak references here, so with
 * any other BLAS nothing happens.  Setting OPENBLAS_CORETYPE yourself (even
 * to Prescott) turns this off.
 *
 * A constructor, not a lazy call, because a process's environment and
 * OpenBLAS's kernel table must not change while other threads may use them
 * (a program that dlopen()s tapegrad while its threads call OpenBLAS should
 * set OPENBLAS_CORETYPE itself).
 * tg__blas_core() is what the GEMM wrappers call, so a program linked with
 * the static library keeps this object (and so its constructor). */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cblas.h>

#include "core/core.h"

extern void gotoblas_dynamic_init(void) __attribute__((weak));
extern void gotoblas_dynamic_quit(void) __attribute__((weak));

/* The OpenBLAS core name worth asking for on this CPU, or NULL. */
static const char *better_core(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vl"))
        return "SkylakeX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
#endif
    return NULL;
}

static const char *openblas_core(void)
{
    const char *name = openblas_get_corename();
    return name ? name : "unknown";
}

__attribute__((constructor)) static void blas_pick_core(void)
{
    if (!gotoblas_dynamic_init || !gotoblas_dynamic_quit) return;   /* not DYNAMIC_ARCH */
    if (getenv("OPENBLAS_CORETYPE") || strcasecmp(openblas_core(), "Prescott") != 0) return;
    const char *want = better_core();
    if (!want || setenv("OPENBLAS_CORETYPE", want, 0) != 0) return;
    gotoblas_dynamic_quit();
    gotoblas_dynamic_init();
    unsetenv("OPENBLAS_CORETYPE");
}

const char *tg__blas_core(void) { return openblas_core(); }

const char *tg_blas_core(void) { return tg__blas_core(); }
