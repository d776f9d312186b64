/* bench/gemm_bf16.c - GFLOP/s of each GEMM kernel on one core, at the shapes
 * of the DCGAN step's GEMMs, next to the core's peak for the kernel's
 * instruction, measured on this core (bench/peak.h):
 *   sgemm     OpenBLAS's f32 kernels (the f32 and portable bf16 path): FMAs
 *             of 16 lanes with the SkylakeX kernels, 8 with Haswell's
 *   avx512    vdpbf16ps, 32 bf16 products per instruction
 *   amx       tdpbf16ps (where the CPU has it; its peak from the measured
 *             clock, one tile product per 16 cycles)
 * One JSON line per shape and kernel.  Times are the thread's CPU time (the
 * best of --repeat runs), so that other processes on a shared machine do not
 * count; the GEMM runs on the calling thread only.
 *
 *   gemm_bf16 [--repeat N (5)]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cblas.h>

#include "core/core.h"
#include "peak.h"
#include "ops/conv_internal.h"
#include "tapegrad/tapegrad.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct shape {
    const char *name;
    bool ta, tb;
    int64_t m, n, k;
} shape;

int main(int argc, char **argv)
{
    long repeat = 5;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--repeat")) repeat = atol(argv[i + 1]);
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
    /* each kernel's instruction and its peak on this core, measured once */
    const char *instruction[TG_BF16_KERNEL_AMX + 1] = {
        [TG_BF16_KERNEL_PORTABLE] = zmm ? "vfmadd231ps zmm" : "vfmadd231ps ymm",
        [TG_BF16_KERNEL_AVX512] = "vdpbf16ps zmm",
        [TG_BF16_KERNEL_AMX] = "tdpbf16ps"};
    double peak[TG_BF16_KERNEL_AMX + 1] = {0};
    for (int kern = TG_BF16_KERNEL_PORTABLE; kern <= TG_BF16_KERNEL_AMX; kern++)
        if (tg_bf16_kernel_available((tg_bf16_kernel)kern))
            peak[kern] = bench_peak_of(instruction[kern], 1, 0.3);
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
            printf("{\"shape\": \"%s\", \"m\": %lld, \"n\": %lld, \"k\": %lld, \"kernel\": \"%s\", "
                   "\"instruction\": \"%s\", \"ms\": %.3f, \"gflops\": %.1f, "
                   "\"peak_gflops\": %.1f, \"peak_derived\": %s}\n",
                   sh->name, (long long)sh->m, (long long)sh->n, (long long)sh->k,
                   kern == TG_BF16_KERNEL_PORTABLE ? "sgemm"
                                                   : tg_bf16_kernel_name((tg_bf16_kernel)kern),
                   instruction[kern], best * 1e3, gflops, peak[kern],
                   kern == TG_BF16_KERNEL_AMX ? "true" : "false");
            fflush(stdout);
        }
        free(a);
        free(b);
        free(c);
    }
    return 0;
}
