/* bench/peak.h - the peak rate of a multiply instruction on this machine,
 * measured: each thread runs 12 independent chains of the instruction on
 * registers (no memory operands), all threads at once, and the rates are
 * summed.  So the figure is the clock the cores really run at (boost
 * included) times what the core issues of that instruction per cycle (one
 * 512-bit FMA a cycle on Zen 4, two on Zen 5 and Intel's server cores),
 * which a formula from the nominal clock in /proc/cpuinfo gets wrong both
 * ways.  A rate counts 2 operations per product (multiply and add).
 *
 * The AMX tile instructions are not run: their peak is one 16x16 tile dot
 * product per 16 cycles (Intel's optimization manual) at the clock measured
 * by a chain of dependent integer adds, one a cycle. */
#ifndef TG_BENCH_PEAK_H
#define TG_BENCH_PEAK_H

#include <stdbool.h>

typedef struct bench_peak {
    const char *instruction;   /* "vdpbf16ps zmm", ... */
    int products;              /* multiply-adds per instruction */
    double gops;               /* measured or derived, all threads; 0: not on this CPU */
    bool derived;              /* from the measured clock (AMX), not run */
} bench_peak;

/* The instructions this file knows, in a fixed order. */
int bench_peak_count(void);
/* Entry i measured on `threads` threads for about `seconds` each. */
bench_peak bench_peak_measure(int i, int threads, double seconds);
/* The rate of the instruction named (as in bench_peak.instruction), or 0
 * when the CPU lacks it or the name is unknown. */
double bench_peak_of(const char *instruction, int threads, double seconds);
/* The clock in GHz, measured on one thread. */
double bench_peak_ghz(double seconds);

#endif
