/* src/core/amx.c - what every AMX kernel (the bf16 GEMM's, the int8 ones)
 * shares: whether this process may use the tiles for a data type, and the
 * one tile configuration they all load. */
#include <stdatomic.h>

#include "core/core.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef struct amx_config {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} amx_config;

__attribute__((target("amx-tile"))) void tg__amx_tiles_begin(void)
{
    amx_config cfg = {.palette = 1};
    for (int t = 0; t < 8; t++) cfg.rows[t] = 16, cfg.colsb[t] = 64;
    /* GCC 12's _tile_loadconfig tells the compiler it reads 8 bytes, so
     * without this barrier the stores above may be dropped (seen: rows and
     * colsb never written, a #GP at the first tile load). */
    __asm__ volatile("" : : "r"(&cfg) : "memory");
    _tile_loadconfig(&cfg);
}

__attribute__((target("amx-tile"))) void tg__amx_tiles_end(void) { _tile_release(); }

/* CPUID.(7,0):EDX bit 24 (AMX-TILE) and the type's bit, the OS saving the
 * tile state (OSXSAVE; XCR0 bits 17, 18: XTILECFG, XTILEDATA), and Linux's
 * permission for this process (arch_prctl ARCH_REQ_XCOMP_PERM). */
static bool amx_probe(unsigned type_bit)
{
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 24)) || !(d & (1u << type_bit)))
        return false;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return false;
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & (3u << 17)) != (3u << 17)) return false;
#if defined(__linux__) && defined(SYS_arch_prctl)
    return syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XTILEDATA */) == 0;
#else
    return false;
#endif
}

bool tg__amx_available(tg__amx_type type)
{
    /* per type: 0 not probed yet, 1 yes, 2 no (probing twice is harmless) */
    static atomic_int state[2];
    static const unsigned bit[2] = {[TG__AMX_BF16] = 22, [TG__AMX_INT8] = 25};
    int s = atomic_load_explicit(&state[type], memory_order_acquire);
    if (s == 0) {
        s = amx_probe(bit[type]) ? 1 : 2;
        atomic_store_explicit(&state[type], s, memory_order_release);
    }
    return s == 1;
}

#else /* not x86 with GCC or Clang */

bool tg__amx_available(tg__amx_type type)
{
    (void)type;
    return false;
}
void tg__amx_tiles_begin(void) { TG_ASSERT(!"amx called on a build without AMX"); }
void tg__amx_tiles_end(void) { TG_ASSERT(!"amx called on a build without AMX"); }
#endif
