/* src/core/gemm_bf16.h - the bf16 GEMM's kernels (prefix tg__bf16).
 *
 * The packed layout.  A dot product over k is cut into pairs of k: the
 * instructions (vdpbf16ps, tdpbf16ps) take two bf16 of one operand in a
 * 32-bit lane and multiply them with the two bf16 of the other operand in
 * the same lane.  So both operands are packed as 32-bit "pairs"
 * (x[2p], x[2p+1]) along k, k padded with zeros to the kernel's multiple:
 *   B block (kc, nc) -> panels of NR = 32 columns, panel j0 at
 *     bp + (j0/NR) * (kcp/2) * NR pairs, pair p of column j at [p*NR + j];
 *   A block (mc, kc) -> panels of MR rows, pair p of row r at
 *     [p*MR + r]       for avx512 (one broadcast per row and pair),
 *     [r*(kcp/2) + p]  for amx (a tile's rows are rows of A, 64 bytes of k).
 * A B tile of AMX (16 pairs x 16 columns) is then 16 rows of a panel, 128
 * bytes apart.
 */
#ifndef TAPEGRAD_GEMM_BF16_H
#define TAPEGRAD_GEMM_BF16_H

#include "core/core.h"
#include "tapegrad/precision.h"

#define TG__BF16_NR 32

/* A source operand of the packers: element (line, t), t the index along k, is
 * at tcontig ? line*ld + t : t*ld + line, in p (f32 holding bf16 values) or,
 * when h is set, in h (bf16 bits, copied into the pairs as they are). */
typedef struct tg__bf16_src {
    const float *p;
    const uint16_t *h;
    int64_t ld;
    bool tcontig;
} tg__bf16_src;

/* Packs lines [l0, l0+nl) x k [t0, t0+kc) of s as pairs into dst: pair p of
 * line r (r < R; lines past nl and k past kc are zero) at dst[r*rs + p*ps],
 * for p < kcp/2.  Rounds to bf16 (nearest even; exact for bf16 values). */
void tg__bf16_pack(uint32_t *dst, int64_t R, int64_t rs, int64_t ps, const tg__bf16_src *s,
                   int64_t l0, int64_t nl, int64_t t0, int64_t kc, int64_t kcp);

/* A block of B, lines [j0, j0 + nc) x k [t0, t0 + kc) of s, as the panels
 * of NR lines each that tg__bf16_pack makes one at a time (pair p of line
 * l of the block at bp[(l/NR) * (kcp/2) * NR + p*NR + l%NR]; lines past nc
 * in the last panel and k past kc are zero). */
void tg__bf16_pack_b(uint32_t *bp, const tg__bf16_src *s, int64_t j0, int64_t nc, int64_t t0,
                     int64_t kc, int64_t kcp);

/* Whole-operand panels (the cache of gemm_bf16_panels.c).  For each block
 * of k of the driver (of equal length near KC, the last one shorter), the lines in panels of
 * tg__bf16_panel_lines each, laid out as the driver packs one block: block
 * t0 at data + lines_pad * t0/2, line l of it (a multiple of the panel
 * height) at + l * kcp/2, kcp the block's k padded to the kernel's multiple.
 * A block of lines [l, l + mc) is then exactly what the driver would pack. */
struct tg__bf16_panels {
    _Atomic int refcount;
    struct tg__bf16_panels *next;   /* the storage's list */
    /* the key: kernel, side, operand (elements of the storage), version and
     * the writable pointers handed out (tg_storage) */
    tg_bf16_kernel kern;
    bool b_side;
    tg__bf16_operand o;
    uint64_t version, handed;
    int64_t lines_pad;   /* lines rounded up to whole panels */
    uint32_t *data;
};

/* The 32-bit words of operand (lines, k)'s panels for kernel kern. */
int64_t tg__bf16_panels_words(tg_bf16_kernel kern, bool b_side, int64_t lines, int64_t k);
/* Packs all of s (lines x k) into p->data as p's layout (p->kern, b_side). */
void tg__bf16_pack_panels(tg__bf16_panels *p, const tg__bf16_src *s);

/* The store of a kernel's f32 tile acc (mr x nr used of rows ldt apart) into
 * c: first block of k: c = acc (beta 0) or beta*c + acc; later: c += acc. */
void tg__bf16_store(float *c, int64_t ldc, const float *acc, int64_t ldt, int mr, int nr,
                    bool first, float beta);

/* The micro-kernels: c's tile (mr <= MR rows, nr <= NR columns) from a
 * packed A panel and B panel of kp pairs, stored as tg__bf16_store. */
#define TG__BF16_MR_AVX512 12
/* The avx512 tile comes in two forms that give the same bits and differ in
 * how A's pairs are broadcast: by each vdpbf16ps's own load, or once into
 * a register for both instructions of a row (reg; gemm_bf16_avx512.c says
 * which pays on which CPU).  Both compute a tile of mr x nr as the
 * smallest of 4, 8 or 12 rows by 16 or 32 columns that holds it, with the
 * same bits as the 12 x 32 tile.
 * Tests: true makes this thread's avx512 tiles all 12 x 32; false restores. */
void tg__bf16_set_full_tiles(bool on);
/* The tile functions of form reg for the GEMM driver: fn[r][c] computes
 * tiles of at most 4 (r = 0), 8 or 12 rows and 16 (c = 0) or 32 columns
 * (tg__bf16_tile picks), as the calling thread's tg__bf16_set_full_tiles
 * chooses them.  Asked once per GEMM, not per tile: the thread-local
 * choice is a call into the dynamic loader (__tls_get_addr) in the shared
 * library. */
typedef void (*tg__bf16_micro_fn)(const uint32_t *ap, const uint32_t *bp, int64_t kp, float *c,
                                  int64_t ldc, int mr, int nr, bool first, float beta);
typedef struct tg__bf16_tiles {
    tg__bf16_micro_fn fn[3][2];
} tg__bf16_tiles;
const tg__bf16_tiles *tg__bf16_micro_avx512_tiles(bool reg);
static inline tg__bf16_micro_fn tg__bf16_tile(const tg__bf16_tiles *t, int mr, int nr)
{
    return t->fn[(mr - 1) / 4][nr > 16];
}
/* True when the register form is the faster one on this CPU: all but AMD
 * family 19h (Zen 4). */
bool tg__bf16_broadcast_best_register(void);
/* The form the avx512 GEMMs use: the tests' choice (tg__bf16_set_broadcast),
 * else TG_BF16_BROADCAST=load|register from the environment (read at the
 * first call; tg__bf16_broadcast_reread reads it again), else this CPU's
 * best. */
typedef enum {
    TG__BF16_BCAST_AUTO = 0,
    TG__BF16_BCAST_LOAD,
    TG__BF16_BCAST_REGISTER,
} tg__bf16_bcast;
tg__bf16_bcast tg__bf16_broadcast(void);
/* Tests: forces form b in every thread (AUTO restores). */
void tg__bf16_set_broadcast(tg__bf16_bcast b);
/* Tests: the next call reads TG_BF16_BROADCAST again. */
void tg__bf16_broadcast_reread(void);
#define TG__BF16_MR_AMX 32
void tg__bf16_micro_amx(const uint32_t *ap, const uint32_t *bp, int64_t kp, float *c,
                        int64_t ldc, int mr, int nr, bool first, float beta);
/* The same on emulated tiles (tg__amx_emulated: the driver calls it then). */
void tg__bf16_micro_amx_emulated(const uint32_t *ap, const uint32_t *bp, int64_t kp, float *c,
                                 int64_t ldc, int mr, int nr, bool first, float beta);
/* Tests: true makes this thread's bf16 GEMMs take the path of packing
 * buffers that cannot be allocated (the fallbacks); false restores. */
void tg__bf16_set_no_pack_buffers(bool on);
bool tg__bf16_cpu_has_avx512(void);
bool tg__bf16_cpu_has_amx(void);

#endif
