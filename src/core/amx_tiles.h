/* src/core/amx_tiles.h - the tile operations an AMX kernel is written with,
 * so that one body runs on the CPU's tiles and on the emulated ones
 * (core.h): define TG__AMX_EMU as 0 (the CPU's; x86 with GCC or Clang,
 * immintrin.h included, in a function built for amx-tile and the type's
 * extension) or 1 (emulated), then include this header.  It has no include
 * guard: a file that builds a kernel both ways includes it once per way. */
#include "core/core.h"

#undef TG__TILE_ZERO
#undef TG__TILE_LOAD
#undef TG__TILE_STORE
#undef TG__TILE_DPBUSD
#undef TG__TILE_DPBSUD
#undef TG__TILE_DPBF16PS

#if TG__AMX_EMU
#define TG__TILE_ZERO(t) tg__amx_emu_zero(t)
#define TG__TILE_LOAD(t, base, stride) tg__amx_emu_load(t, base, stride)
#define TG__TILE_STORE(t, base, stride) tg__amx_emu_store(t, base, stride)
#define TG__TILE_DPBUSD(c, a, b) tg__amx_emu_dpbusd(c, a, b)
#define TG__TILE_DPBSUD(c, a, b) tg__amx_emu_dpbsud(c, a, b)
#define TG__TILE_DPBF16PS(c, a, b) tg__amx_emu_dpbf16ps(c, a, b)
#else
#define TG__TILE_ZERO(t) _tile_zero(t)
#define TG__TILE_LOAD(t, base, stride) _tile_loadd(t, base, stride)
#define TG__TILE_STORE(t, base, stride) _tile_stored(t, base, stride)
#define TG__TILE_DPBUSD(c, a, b) _tile_dpbusd(c, a, b)
#define TG__TILE_DPBSUD(c, a, b) _tile_dpbsud(c, a, b)
#define TG__TILE_DPBF16PS(c, a, b) _tile_dpbf16ps(c, a, b)
#endif
