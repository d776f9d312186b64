/* bench/gemm_bf16.c - GFLOP/s of each GEMM kernel on one core, at the shapes
 * of the DCGAN step's GEMMs, next to the core's peak for the kernel's
 * instruction: frequency x lanes x 2 x instructions per cycle (--per-cycle,
 * 2 by default: the AVX-512 cores of AMD Zen 5 and Intel's server parts issue
 * two 512-bit FMAs or dot products per cycle; give 1 for Zen 4):
 *   sgemm     OpenBLAS's f32 kernels (the f32 and portable bf16 path): FMAs
 *             of 16 lanes with the SkylakeX kernels, 8 with Haswell's
 *   avx512    vdpbf16ps, 32 bf16 products per instruction
 *   amx       tdpbf16ps (where the CPU has it)
 * One JSON line per shape and kernel.  Times are the thread's CPU time (the
 * best of --repeat runs), so that other processes on a shared machine do not
 * count; the GEMM runs on the calling thread only.
 *
 *   gemm_bf16 [--ghz G (from /proc/cpuinfo)] [--per-cycle 2] [--repeat N (5)]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cblas.h>

#include "core/core.h"
#include "ops/conv_internal.h"
#include "tapegrad/tapegrad.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The "cpu MHz" of /proc/cpuinfo in GHz, or 0. */
static double cpuinfo_ghz(void)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[256];
    double mhz = 0;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "cpu MHz", 7) == 0 && sscanf(strchr(line, ':') + 1, "%lf", &mhz) == 1)
            break;
    if (f) fclose(f);
    return mhz / 1000;
}

typedef struct shape {
    const char *name;
    bool ta, tb;
    int64_t m, n, k;
} shape;

int main(int argc, char **argv)
{
    double ghz = cpuinfo_ghz();
    long repeat = 5, per_cycle = 2;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--ghz")) ghz = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--repeat")) repeat = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--per-cycle")) per_cycle = atol(argv[i + 1]);
    }
    /* batch 64: G's ConvTranspose 128->64 (7x7 -> 14x14) columns, D's conv
     * 64->128 (14x14 -> 7x7) forward and weight gradient */
    static const shape shapes[] = {
        {"convT 128->64 fwd cols", true, false, 1024, 3136, 128},
        {"conv 64->128 fwd", false, false, 128, 3136, 1024},
        {"conv 64->128 dW", false, true, 128, 1024, 3136},
    };
    openblas_set_num_threads(1);
    const bool zmm = strstr(tg_blas_core(), "SkylakeX") || strstr(tg_blas_core(), "Cooperlake") ||
                     strstr(tg_blas_core(), "SapphireRapids");
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        const shape *sh = &shapes[s];
        const int64_t na = sh->m * sh->k, nb = sh->k * sh->n;
        float *a = malloc(sizeof(float) * (size_t)na), *b = malloc(sizeof(float) * (size_t)nb);
        float *c = malloc(sizeof(float) * (size_t)(sh->m * sh->n));
        if (!a || !b || !c) return 1;
        for (int64_t i = 0; i < na; i++)
            a[i] = tg_bf16_to_f32(tg_f32_to_bf16((float)sin((double)i)));
        for (int64_t i = 0; i < nb; i++)
            b[i] = tg_bf16_to_f32(tg_f32_to_bf16((float)cos((double)i)));
        const int64_t lda = sh->ta ? sh->m : sh->k, ldb = sh->tb ? sh->k : sh->n;
        for (int kern = TG_BF16_KERNEL_PORTABLE; kern <= TG_BF16_KERNEL_AMX; kern++) {
            if (!tg_bf16_kernel_available((tg_bf16_kernel)kern)) continue;
            double best = INFINITY;
            for (long r = 0; r < repeat + 1; r++) {   /* the first is a warm-up */
                const double t0 = now();
                tg__gemm_bf16((tg_bf16_kernel)kern, sh->ta, sh->tb, sh->m, sh->n, sh->k, a, lda, b,
                              ldb, 0, c, sh->n);
                const double dt = now() - t0;
                if (r > 0 && dt < best) best = dt;
            }
            const double gflops = 2.0 * (double)(sh->m * sh->n * sh->k) / best / 1e9;
            /* products per instruction; a tile instruction is 16 x 16 x 32 of them */
            const int lanes = kern == TG_BF16_KERNEL_PORTABLE ? (zmm ? 16 : 8)
                              : kern == TG_BF16_KERNEL_AVX512 ? 32 : 8192;
            /* AMX: one tile dot product per 16 cycles (Intel's optimization manual) */
            const double peak = kern == TG_BF16_KERNEL_AMX ? ghz * lanes * 2 / 16
                                                           : ghz * lanes * 2 * (double)per_cycle;
            printf("{\"shape\": \"%s\", \"m\": %lld, \"n\": %lld, \"k\": %lld, \"kernel\": \"%s\", "
                   "\"instruction\": \"%s\", \"ms\": %.3f, \"gflops\": %.1f, "
                   "\"peak_gflops\": %.1f, "
                   "\"ghz\": %.3f, \"lanes\": %d, \"per_cycle\": %ld}\n",
                   sh->name, (long long)sh->m, (long long)sh->n, (long long)sh->k,
                   kern == TG_BF16_KERNEL_PORTABLE ? "sgemm"
                                                   : tg_bf16_kernel_name((tg_bf16_kernel)kern),
                   kern == TG_BF16_KERNEL_PORTABLE   ? (zmm ? "vfmadd231ps zmm" : "vfmadd231ps ymm")
                   : kern == TG_BF16_KERNEL_AVX512 ? "vdpbf16ps zmm"
                                                   : "tdpbf16ps",
                   best * 1e3, gflops, peak, ghz, lanes, per_cycle);
            fflush(stdout);
        }
        free(a);
        free(b);
        free(c);
    }
    return 0;
}
