/* tapegrad/precision.h - which kernel multiplies half-precision operands.
 *
 * bf16.  Whenever the compute dtype of a ConvNd, ConvTransposeNd (forward,
 * input gradient, weight gradient), Linear or matmul is bf16 (bf16 tensors,
 * or f32 ones under tg_autocast with TG_BF16), its GEMMs take the products
 * of bf16 values and add them in f32, as oneDNN and PyTorch do.  Each
 * product of two bf16 values is exact in f32, so every kernel computes the
 * same dot products; they differ only in the order (and so the rounding) of
 * the f32 additions, and the vector kernels flush f32 subnormals to zero as
 * the instructions do.  The kernels:
 *   portable  the operands widened to f32 and OpenBLAS's sgemm (any CPU)
 *   avx512    AVX-512 BF16 (vdpbf16ps: 32 products per instruction), with
 *             the operands packed in pairs along k
 *   amx       AMX-BF16 tiles (tdpbf16ps: 16 x 16 x 32 products per
 *             instruction), same packing; asks Linux for the process's AMX
 *             permission (arch_prctl ARCH_REQ_XCOMP_PERM) when probed
 * The default is the best the CPU has.  TG_BF16_KERNEL=portable|avx512|amx
 * in the environment forces one; a kernel this CPU cannot run is refused
 * with a line on stderr, once, naming the kernel used instead.
 *
 * f16.  f16 tensors are stored in 16 bits and computed in f32: the GEMMs
 * widen them (F16C) and call sgemm, so results are those of f32 on f16
 * inputs.  (No CPU this library knows has a kernel that keeps f16 products
 * exact and faster.)
 *
 * Example: run one layer on the portable kernel to compare with the default.
 *     tg_bf16_kernel_set(TG_BF16_KERNEL_PORTABLE);
 *     tg_conv_transpose(&y0, x, w, NULL, &p);
 *     tg_bf16_kernel_set(TG_BF16_KERNEL_AUTO);
 */
#ifndef TAPEGRAD_PRECISION_H
#define TAPEGRAD_PRECISION_H

#include <stdbool.h>

#include "tapegrad/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tg_bf16_kernel {
    TG_BF16_KERNEL_AUTO = 0,   /* TG_BF16_KERNEL env var, else the best the CPU has */
    TG_BF16_KERNEL_PORTABLE,   /* widen to f32, OpenBLAS sgemm */
    TG_BF16_KERNEL_AVX512,     /* AVX-512 BF16 (vdpbf16ps) */
    TG_BF16_KERNEL_AMX,        /* AMX-BF16 tiles (tdpbf16ps) */
} tg_bf16_kernel;

/* True when this CPU (and build) can run kernel k (PORTABLE: always). */
TG_API bool tg_bf16_kernel_available(tg_bf16_kernel k);
/* Forces kernel k for the bf16 GEMMs that this thread starts (AUTO restores
 * the default).  TG_EINVAL for a value that is not a kernel, TG_EUNSUPPORTED
 * when the CPU lacks it; nothing changes then. */
TG_API int tg_bf16_kernel_set(tg_bf16_kernel k);
/* The kernel this thread's bf16 GEMMs use now (never AUTO). */
TG_API tg_bf16_kernel tg_bf16_kernel_get(void);
/* "auto", "portable", "avx512", "amx"; "?" for another value (static). */
TG_API const char *tg_bf16_kernel_name(tg_bf16_kernel k);
/* How the avx512 kernel broadcasts its A operand on this CPU, for display:
 * "register" (once per row and pair, into a register: where two 512-bit
 * vdpbf16ps issue a cycle) or "load" (by each instruction's own load: AMD
 * Zen 4, which issues one); TG_BF16_BROADCAST=load|register in the
 * environment, read once (at the first bf16 GEMM or call of this),
 * chooses.  Both give the same bits (static). */
TG_API const char *tg_bf16_broadcast_name(void);
/* What the f16 GEMMs run on this CPU, for display: "f32 (F16C)" or "f32"
 * (static). */
TG_API const char *tg_f16_kernel_name(void);
/* True when the amx kernels (bf16 and int8) run on tiles emulated in C:
 * set by TG_AMX_EMULATE=1 in the environment, read once.  The kernels'
 * code then runs on a CPU without AMX (one with AVX-512 BF16, VNNI), far
 * slower than any other kernel: for checking that code, never for speed. */
TG_API bool tg_amx_emulated(void);

#ifdef __cplusplus
}
#endif

#endif
