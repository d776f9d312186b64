/* src/quant/qconvt_phase.h - the plan of the stride-phase ConvTranspose
 * (the layout and the method are described in qconvt_phase.c), shared by
 * its driver (qconvt_phase.c: the plan, the VNNI and AMX grid, the
 * interleave into y, the tasks) and its kernels (qamx_x86.c: AMX tiles;
 * qconvt_phase_kernels.c: AVX-512 VNNI and AVX2 registers).  x86 only. */
#ifndef TAPEGRAD_QCONVT_PHASE_H
#define TAPEGRAD_QCONVT_PHASE_H

#include "ops/conv_internal.h"
#include "quant/quant_internal.h"

#define TILE 16
#define MARGIN 32   /* positions after the grid that a last 32-wide block may read */
#define MAX_PHASE_TAPS 64   /* taps of one phase (both axes): the kernels' tables */

/* One axis of the phase decomposition (axes 1 and 2 of the geometry). */
typedef struct tg__q_phase_axis {
    int64_t s, K, pad, in, out;
    int64_t lo, ext;   /* the grid covers input positions lo .. lo + ext - 1 */
} tg__q_phase_axis;

typedef struct tg__q_phase_job {
    tg__q_operands op;
    tg__q_phase_axis ax[2];
    int64_t np;        /* grid positions + MARGIN */
    int64_t fmax;      /* the longest phase plane, in flat positions, rounded up to 32 */
    int64_t *ffirst;   /* per phase p1*s2 + p2: its first flat position */
    tg_int8_kernel kern;   /* AMX tiles, VNNI or AVX2 registers */
} tg__q_phase_job;

/* One phase (p1, p2) of the job: its taps t < nt (tap index tk[t] into the
 * weight, flat offset toff[t] of its reads), its flat positions
 * ffirst..flast, and the activations' offset zoff. */
typedef struct tg__q_phase_plan {
    int nt;
    int64_t tk[MAX_PHASE_TAPS], toff[MAX_PHASE_TAPS];
    int64_t ffirst, flast;
    uint32_t zoff;
} tg__q_phase_plan;

/* -zoff times the phase's weights for output channel co of group gi summed
 * (0 past the channels), where every accumulator of that channel starts. */
int32_t tg__q_phase_corr(const tg__q_phase_job *j, const tg__q_phase_plan *ph, int64_t gi,
                         int64_t co);
/* The phase ph of the sample whose grid is x4 (x2 for AVX2), group gi:
 * planes[co][f - ffirst] for the phase's flat positions f, requantized; on
 * AMX tiles (the caller has loaded the tile configuration; emulated ones
 * under tg__amx_emulated), in VNNI or in AVX2 registers. */
void tg__q_phase_run_amx(const tg__q_phase_job *j, const uint8_t *x4, int64_t gi,
                         const tg__q_phase_plan *ph, uint8_t *planes);
void tg__q_phase_run_vnni(const tg__q_phase_job *j, const uint8_t *x4, int64_t gi,
                          const tg__q_phase_plan *ph, uint8_t *planes);
void tg__q_phase_run_avx2(const tg__q_phase_job *j, const uint8_t *x2, int64_t gi,
                          const tg__q_phase_plan *ph, uint8_t *planes);
/* The AVX2 kernel's grid x2 of sample b, group gi (qconvt_phase_kernels.c). */
void tg__q_phase_build_x2(int32_t *x2, const tg__q_phase_job *j, int64_t b, int64_t gi);

#endif
