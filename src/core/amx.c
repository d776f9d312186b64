/* src/core/amx.c - what every AMX kernel (the bf16 GEMM's, the int8 ones)
 * shares: whether this process may use the tiles for a data type, the one
 * tile configuration they all load, and that configuration's tiles
 * emulated in C. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

/* The configuration: eight tiles of ROWS rows of COLSB bytes. */
enum { NTILES = 8, ROWS = 16, COLSB = 64 };

/* ---- emulated tiles ---- */

/* 0 not read yet, 1 on, 2 off; the environment is read once */
static atomic_int emulated;

bool tg__amx_emulated(void)
{
    int s = atomic_load_explicit(&emulated, memory_order_acquire);
    if (s == 0) {
        const char *e = getenv("TG_AMX_EMULATE");
        s = e && e[0] && strcmp(e, "0") != 0 ? 1 : 2;
        int expect = 0;   /* a hook's setting, made meanwhile, wins */
        if (!atomic_compare_exchange_strong(&emulated, &expect, s)) s = expect;
    }
    return s == 1;
}

void tg__amx_set_emulated(bool on) { atomic_store(&emulated, on ? 1 : 2); }

typedef union tile {
    uint8_t u8[ROWS * COLSB];
    int8_t i8[ROWS * COLSB];
    uint16_t bf16[ROWS * COLSB / 2];
    int32_t i32[ROWS * COLSB / 4];
    float f32[ROWS * COLSB / 4];
} tile;

static _Thread_local _Alignas(64) tile tiles[NTILES];
/* As the CPU's TILES_CONFIGURED: a tile instruction outside a thread's
 * tiles_begin .. tiles_end is the CPU's #UD (SIGILL), here an abort, so a
 * kernel that forgets the configuration on a thread, or uses the tiles after
 * a nested call released them, fails on this CPU as it would on one with
 * AMX.  Configuring fills the tiles with junk, not the CPU's zeros: a kernel
 * must zero or load a tile before it reads it. */
static _Thread_local bool configured;

void tg__amx_emu_config(void)
{
    memset(tiles, 0xA5, sizeof tiles);
    configured = true;
}

void tg__amx_emu_release(void)
{
    memset(tiles, 0x5A, sizeof tiles);
    configured = false;
}

/* The tile t of a configured thread. */
static tile *tile_at(int t)
{
    TG_ASSERT(configured && "a tile instruction without the tile configuration");
    TG_ASSERT(t >= 0 && t < NTILES);
    return &tiles[t];
}

void tg__amx_emu_zero(int t) { memset(tile_at(t), 0, sizeof(tile)); }

void tg__amx_emu_load(int t, const void *base, int64_t stride)
{
    tile *tl = tile_at(t);
    for (int r = 0; r < ROWS; r++)
        memcpy(tl->u8 + r * COLSB, (const char *)base + r * stride, COLSB);
}

void tg__amx_emu_store(int t, void *base, int64_t stride)
{
    const tile *tl = tile_at(t);
    for (int r = 0; r < ROWS; r++)
        memcpy((char *)base + r * stride, tl->u8 + r * COLSB, COLSB);
}

/* c[m][n] += sum over k of the four products of a's bytes 4k.. of row m
 * and b's bytes 4n.. of row k, a's bytes signed if sa, b's if sb, the sums
 * wrapping as the instruction's do. */
static void dp_bytes(int c, int a, int b, bool sa, bool sb)
{
    const tile *ta = tile_at(a), *tb = tile_at(b);
    tile *tc = tile_at(c);
    for (int m = 0; m < ROWS; m++)
        for (int n = 0; n < COLSB / 4; n++) {
            uint32_t s = (uint32_t)tc->i32[m * (COLSB / 4) + n];
            for (int k = 0; k < COLSB / 4; k++)
                for (int i = 0; i < 4; i++) {
                    const int ai = m * COLSB + 4 * k + i, bi = k * COLSB + 4 * n + i;
                    const int32_t x = sa ? ta->i8[ai] : ta->u8[ai];
                    const int32_t y = sb ? tb->i8[bi] : tb->u8[bi];
                    s += (uint32_t)(x * y);
                }
            tc->i32[m * (COLSB / 4) + n] = (int32_t)s;
        }
}

void tg__amx_emu_dpbusd(int c, int a, int b) { dp_bytes(c, a, b, false, true); }
void tg__amx_emu_dpbsud(int c, int a, int b) { dp_bytes(c, a, b, true, false); }

/* DAZ and FTZ: a subnormal f32, in or out, is a zero of its sign. */
static float flush(float x) { return fpclassify(x) == FP_SUBNORMAL ? copysignf(0.0f, x) : x; }

/* As the SDM defines it: per row, the even and the odd products of the
 * pairs summed apart (an f32 FMA each, rounding to nearest, subnormals in
 * and out taken as zero), then their sum added to c. */
void tg__amx_emu_dpbf16ps(int c, int a, int b)
{
    const tile *ta = tile_at(a), *tb = tile_at(b);
    tile *tc = tile_at(c);
    for (int m = 0; m < ROWS; m++)
        for (int n = 0; n < COLSB / 4; n++) {
            float half[2] = {0.0f, 0.0f};
            for (int k = 0; k < COLSB / 4; k++)
                for (int i = 0; i < 2; i++) {
                    const float x = flush(tg_bf16_to_f32(ta->bf16[m * (COLSB / 2) + 2 * k + i]));
                    const float y = flush(tg_bf16_to_f32(tb->bf16[k * (COLSB / 2) + 2 * n + i]));
                    half[i] = flush(fmaf(x, y, half[i]));
                }
            float *d = &tc->f32[m * (COLSB / 4) + n];
            *d = flush(flush(*d) + flush(half[0] + half[1]));
        }
}

/* ---- the CPU's tiles ---- */

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
    if (tg__amx_emulated()) {
        tg__amx_emu_config();
        return;
    }
    amx_config cfg = {.palette = 1};
    for (int t = 0; t < NTILES; t++) cfg.rows[t] = ROWS, cfg.colsb[t] = COLSB;
    /* GCC 12's _tile_loadconfig tells the compiler it reads 8 bytes, so
     * without this barrier the stores above may be dropped (seen: rows and
     * colsb never written, a #GP at the first tile load). */
    __asm__ volatile("" : : "r"(&cfg) : "memory");
    _tile_loadconfig(&cfg);
}

__attribute__((target("amx-tile"))) void tg__amx_tiles_end(void)
{
    if (tg__amx_emulated()) tg__amx_emu_release();
    else _tile_release();
}

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
    if (!tg__isa_allows(TG__ISA_AMX)) return false;
    if (tg__amx_emulated()) return true;
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
    return tg__isa_allows(TG__ISA_AMX) && tg__amx_emulated();
}
void tg__amx_tiles_begin(void)
{
    TG_ASSERT(tg__amx_emulated());
    tg__amx_emu_config();
}
void tg__amx_tiles_end(void)
{
    TG_ASSERT(tg__amx_emulated());
    tg__amx_emu_release();
}
#endif
