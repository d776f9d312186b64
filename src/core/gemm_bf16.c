/* src/core/gemm_bf16.c - the bf16 GEMM: kernel selection and the blocked
 * driver that packs the operands for the avx512 and amx micro-kernels
 * (gemm_bf16_avx512.c, gemm_bf16_amx.c; layout in gemm_bf16.h).
 *
 * Blocking: k in blocks of about KC (kblock), B in blocks of (KC, NC) packed
 * once per block, A in blocks of (MC, KC); within them each B panel (KC x 32 bf16,
 * 24 KiB) stays in L1 while the A panels stream from L2 past it. */
#include <stdatomic.h>
#include <string.h>

#include <cblas.h>

#include "core/gemm_bf16.h"

static const char *const kernel_names[] = {
    [TG_BF16_KERNEL_AUTO] = "auto",
    [TG_BF16_KERNEL_PORTABLE] = "portable",
    [TG_BF16_KERNEL_AVX512] = "avx512",
    [TG_BF16_KERNEL_AMX] = "amx",
};

const char *tg_bf16_kernel_name(tg_bf16_kernel k)
{
    return (k >= TG_BF16_KERNEL_AUTO && k <= TG_BF16_KERNEL_AMX) ? kernel_names[k] : "?";
}

const char *tg_f16_kernel_name(void) { return tg__cpu_has_half_simd() ? "f32 (F16C)" : "f32"; }

bool tg_amx_emulated(void) { return tg__amx_emulated(); }

bool tg_bf16_kernel_available(tg_bf16_kernel k)
{
    switch (k) {
    case TG_BF16_KERNEL_PORTABLE: return true;
    case TG_BF16_KERNEL_AVX512: return tg__bf16_cpu_has_avx512();
    case TG_BF16_KERNEL_AMX: return tg__bf16_cpu_has_amx();
    default: return false;
    }
}

/* The per-thread choice set by tg_bf16_kernel_set (AUTO: not forced). */
static _Thread_local tg_bf16_kernel forced = TG_BF16_KERNEL_AUTO;

int tg_bf16_kernel_set(tg_bf16_kernel k)
{
    TG_CHECK(k >= TG_BF16_KERNEL_AUTO && k <= TG_BF16_KERNEL_AMX, TG_EINVAL,
             "bf16_kernel_set: k=%d is not a tg_bf16_kernel", (int)k);
    TG_CHECK(k == TG_BF16_KERNEL_AUTO || tg_bf16_kernel_available(k), TG_EUNSUPPORTED,
             "bf16_kernel_set: this CPU cannot run the %s kernel", tg_bf16_kernel_name(k));
    forced = k;
    return TG_OK;
}

static tg_bf16_kernel best(void)
{
    if (tg__bf16_cpu_has_amx()) return TG_BF16_KERNEL_AMX;
    if (tg__bf16_cpu_has_avx512()) return TG_BF16_KERNEL_AVX512;
    return TG_BF16_KERNEL_PORTABLE;
}

static bool available(int k) { return tg_bf16_kernel_available((tg_bf16_kernel)k); }

/* AUTO: TG_BF16_KERNEL when this CPU has that kernel, else the best (an
 * unknown or unavailable name is reported once on stderr). */
tg_bf16_kernel tg_bf16_kernel_get(void)
{
    static atomic_flag told = ATOMIC_FLAG_INIT;
    if (forced != TG_BF16_KERNEL_AUTO) return forced;
    return (tg_bf16_kernel)tg__kernel_from_env("TG_BF16_KERNEL", "a bf16", kernel_names,
                                               TG_BF16_KERNEL_AMX + 1, available, best(), &told);
}

static const char *const bcast_names[] = {
    [TG__BF16_BCAST_AUTO] = "auto",
    [TG__BF16_BCAST_LOAD] = "load",
    [TG__BF16_BCAST_REGISTER] = "register",
};

/* process-wide: the GEMMs run on the pool's threads */
static atomic_int bcast_forced;

void tg__bf16_set_broadcast(tg__bf16_bcast b) { atomic_store(&bcast_forced, (int)b); }

static bool any_form(int b)
{
    (void)b;
    return true;
}

/* TG_BF16_BROADCAST's choice, or AUTO until it is read.  It is read once:
 * both forms give the same bits, so it is a setting of speed only, and
 * every GEMM asks (a block of the fused attention is two GEMMs), where
 * getenv would cost a few percent.  A race reads it twice, alike. */
static atomic_int bcast_env;

void tg__bf16_broadcast_reread(void) { atomic_store(&bcast_env, TG__BF16_BCAST_AUTO); }

tg__bf16_bcast tg__bf16_broadcast(void)
{
    static atomic_flag told = ATOMIC_FLAG_INIT;
    const int f = atomic_load(&bcast_forced);
    if (f != TG__BF16_BCAST_AUTO) return (tg__bf16_bcast)f;
    int e = atomic_load_explicit(&bcast_env, memory_order_relaxed);
    if (e == TG__BF16_BCAST_AUTO) {
        const int best = tg__bf16_broadcast_best_register() ? TG__BF16_BCAST_REGISTER
                                                            : TG__BF16_BCAST_LOAD;
        e = tg__kernel_from_env("TG_BF16_BROADCAST", "a broadcast form of the avx512 bf16",
                                bcast_names, TG__BF16_BCAST_REGISTER + 1, any_form, best, &told);
        atomic_store_explicit(&bcast_env, e, memory_order_relaxed);
    }
    return (tg__bf16_bcast)e;
}

const char *tg_bf16_broadcast_name(void) { return bcast_names[tg__bf16_broadcast()]; }

/* ---- the blocked driver ---- */

/* MC_AVX512: 12 tiles of 12 rows, so that A of up to 144 rows (the DCGAN
 * convs' 64 and 128 output channels) is one block and B is streamed once,
 * where 120 left a block of 8 rows that streamed all of B again. */
enum { KC = 384, MC_AVX512 = 144, MC_AMX = 128, NC = 3072 };

typedef struct driver {
    int mr;      /* rows of a micro-kernel tile */
    int64_t mc;  /* rows of an A block, a multiple of mr */
    int kal;     /* k of a block padded to a multiple of kal */
    bool amx, emulated;   /* emulated: amx on emulated tiles (tg__amx_emulated) */
    /* avx512: the tile functions of the broadcast form (tg__bf16_broadcast;
     * set by tg__gemm_bf16_bits, the one caller that runs the kernel) */
    const tg__bf16_tiles *tiles;
} driver;

static _Thread_local bool no_pack_buffers;

void tg__bf16_set_no_pack_buffers(bool on) { no_pack_buffers = on; }

static int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

/* The k blocks of a dot product of k terms: as few as blocks of at most
 * about KC allow, of equal length (a multiple of kal, the last one shorter
 * by the rest), so that no block is a short remainder that costs a whole
 * pass over C for a few terms (the DCGAN weight gradients' k = 392 was
 * 384 + 8). */
static int64_t kblock(const driver *d, int64_t k)
{
    const int64_t n = (k + KC - 1) / KC;
    return n <= 1 ? round_up(k, d->kal) : round_up((k + n - 1) / n, d->kal);
}

/* A block (mc, kc) at (i0, t0) into panels of mr rows. */
static void pack_a(const driver *d, uint32_t *ap, const tg__bf16_src *a, int64_t i0, int64_t mc,
                   int64_t t0, int64_t kc, int64_t kcp)
{
    const int64_t kp = kcp / 2;
    for (int64_t i = 0; i < mc; i += d->mr) {
        const int64_t nl = mc - i < d->mr ? mc - i : d->mr;
        uint32_t *dst = ap + i * kp;
        if (d->amx) tg__bf16_pack(dst, d->mr, kp, 1, a, i0 + i, nl, t0, kc, kcp);
        else tg__bf16_pack(dst, d->mr, 1, d->mr, a, i0 + i, nl, t0, kc, kcp);
    }
}

/* C += A B over one (mc, nc) block and one k block, packed. */
static void block(const driver *d, const uint32_t *ap, const uint32_t *bp, int64_t mc,
                  int64_t nc, int64_t kp, float *c, int64_t ldc, bool first, float beta)
{
    for (int64_t j = 0; j < nc; j += TG__BF16_NR) {
        const int nr = (int)(nc - j < TG__BF16_NR ? nc - j : TG__BF16_NR);
        for (int64_t i = 0; i < mc; i += d->mr) {
            const int mr = (int)(mc - i < d->mr ? mc - i : d->mr);
            if (d->emulated)
                tg__bf16_micro_amx_emulated(ap + i * kp, bp + j * kp, kp, c + i * ldc + j, ldc,
                                            mr, nr, first, beta);
            else if (d->amx)
                tg__bf16_micro_amx(ap + i * kp, bp + j * kp, kp, c + i * ldc + j, ldc, mr, nr,
                                   first, beta);
            else
                tg__bf16_tile(d->tiles, mr, nr)(ap + i * kp, bp + j * kp, kp, c + i * ldc + j,
                                                ldc, mr, nr, first, beta);
        }
    }
}

/* A packed operand of one call: panels (line0 a whole panel) or per call. */
typedef struct operand {
    const tg__bf16_src *src;
    const tg__bf16_panels *p;
    int64_t line0;
} operand;

/* Block t0's panels from line l on (p set). */
static const uint32_t *panels_at(const operand *o, int64_t l, int64_t t0, int64_t kcp)
{
    return o->p->data + o->p->lines_pad * (t0 / 2) + (o->line0 + l) * (kcp / 2);
}

/* False (nothing written) when the packing buffers cannot be allocated. */
static bool gemm_packed(const driver *d, int64_t m, int64_t n, int64_t k, const operand *a,
                        const operand *b, float beta, float *c, int64_t ldc)
{
    if (no_pack_buffers) return false;
    const int64_t kb = kblock(d, k), kcmax = round_up(k < kb ? k : kb, d->kal);
    const int64_t mcmax = round_up(m < d->mc ? m : d->mc, d->mr);
    const int64_t ncmax = round_up(n < NC ? n : NC, TG__BF16_NR);
    uint32_t *ap = a->p ? NULL : tg__work_alloc((size_t)(mcmax * kcmax / 2) * sizeof *ap);
    uint32_t *bp = b->p ? NULL : tg__work_alloc((size_t)(ncmax * kcmax / 2) * sizeof *bp);
    const bool ok = (ap || a->p) && (bp || b->p);
    if (!ok) goto done;
    if (d->amx) tg__amx_tiles_begin();
    for (int64_t j0 = 0; j0 < n; j0 += NC) {
        const int64_t nc = n - j0 < NC ? n - j0 : NC;
        for (int64_t t0 = 0; t0 < k; t0 += kb) {
            const int64_t kc = k - t0 < kb ? k - t0 : kb, kcp = round_up(kc, d->kal);
            const uint32_t *bb = bp;
            if (b->p) bb = panels_at(b, j0, t0, kcp);
            else tg__bf16_pack_b(bp, b->src, j0, nc, t0, kc, kcp);
            for (int64_t i0 = 0; i0 < m; i0 += d->mc) {
                const int64_t mc = m - i0 < d->mc ? m - i0 : d->mc;
                const uint32_t *ab = ap;
                if (a->p) ab = panels_at(a, i0, t0, kcp);
                else pack_a(d, ap, a->src, i0, mc, t0, kc, kcp);
                block(d, ab, bb, mc, nc, kcp / 2, c + i0 * ldc + j0, ldc, t0 == 0, beta);
            }
        }
    }
    if (d->amx) tg__amx_tiles_end();
done:
    tg__work_free(ap);
    tg__work_free(bp);
    return ok;
}

static driver driver_of(tg_bf16_kernel kern)
{
    return kern == TG_BF16_KERNEL_AMX
               ? (driver){.mr = TG__BF16_MR_AMX, .mc = MC_AMX, .kal = 32, .amx = true,
                          .emulated = tg__amx_emulated()}
               : (driver){.mr = TG__BF16_MR_AVX512, .mc = MC_AVX512, .kal = 2};
}

int64_t tg__bf16_panel_lines(tg_bf16_kernel kern, bool b_side)
{
    return b_side ? TG__BF16_NR : driver_of(kern).mr;
}

int64_t tg__bf16_panels_words(tg_bf16_kernel kern, bool b_side, int64_t lines, int64_t k)
{
    const driver d = driver_of(kern);
    const int64_t kb = kblock(&d, k), full = k / kb * kb, last = round_up(k - full, d.kal);
    return round_up(lines, tg__bf16_panel_lines(kern, b_side)) * (full + last) / 2;
}

/* Every k block as gemm_packed packs one: B as tg__bf16_pack_b, A as pack_a. */
typedef struct pack_job {
    tg__bf16_panels *p;
    const tg__bf16_src *s;
    driver d;
    int64_t h;   /* lines a panel */
} pack_job;

/* Panels [q0, q1) of every k block: lines h*q0 .. */
static void pack_panel_range(void *arg, int64_t q0, int64_t q1)
{
    const pack_job *j = arg;
    const int64_t lines = j->p->o.lines, k = j->p->o.k, kb = kblock(&j->d, k);
    const int64_t l0 = q0 * j->h, l1 = q1 * j->h < lines ? q1 * j->h : lines;
    for (int64_t t0 = 0; t0 < k; t0 += kb) {
        const int64_t kc = k - t0 < kb ? k - t0 : kb, kcp = round_up(kc, j->d.kal);
        uint32_t *dst = j->p->data + j->p->lines_pad * (t0 / 2) + l0 * (kcp / 2);
        if (j->p->b_side) tg__bf16_pack_b(dst, j->s, l0, l1 - l0, t0, kc, kcp);
        else pack_a(&j->d, dst, j->s, l0, l1 - l0, t0, kc, kcp);
    }
}

/* Split over the pool by whole panels: a weight's panels are packed once a
 * step, and packed on one thread they would leave the others waiting. */
void tg__bf16_pack_panels(tg__bf16_panels *p, const tg__bf16_src *s)
{
    pack_job j = {.p = p, .s = s, .d = driver_of(p->kern),
                  .h = tg__bf16_panel_lines(p->kern, p->b_side)};
    const int64_t npanels = (p->o.lines + j.h - 1) / j.h;
    tg__parallel_range(npanels, p->o.lines * p->o.k > 65536, pack_panel_range, &j);
}

/* Element t of line l of p (its bf16 value as f32): pair (t - t0)/2 of the
 * line's panel in block t0, the low half for even t. */
static float panel_elem(const tg__bf16_panels *p, int64_t l, int64_t t)
{
    const driver d = driver_of(p->kern);
    const int64_t kb = kblock(&d, p->o.k);
    const int64_t h = tg__bf16_panel_lines(p->kern, p->b_side), t0 = t / kb * kb;
    const int64_t kp = round_up(p->o.k - t0 < kb ? p->o.k - t0 : kb, d.kal) / 2;
    const int64_t r = l % h, q = (t - t0) / 2;
    const uint32_t *panel = p->data + p->lines_pad * (t0 / 2) + (l - r) * kp;
    const uint32_t pair = d.amx && !p->b_side ? panel[r * kp + q] : panel[q * h + r];
    const uint32_t bits = ((t - t0) & 1 ? pair >> 16 : pair & 0xFFFF) << 16;
    float v;
    memcpy(&v, &bits, sizeof v);
    return v;
}

/* Element t of line l of source s (its bf16 value as f32). */
static float src_elem(const tg__bf16_src *s, int64_t l, int64_t t)
{
    const int64_t i = s->tcontig ? l * s->ld + t : t * s->ld + l;
    return s->h ? tg_bf16_to_f32(s->h[i]) : s->p[i];
}

/* C = op(A) op(B) + beta*C in plain loops, reading either operand from its
 * panels or its source: when the packing buffers cannot be allocated and a
 * or b was not given in f32 (its panels or its bf16 bits hold it), or on the
 * portable kernel with bits. */
static void gemm_scalar(int64_t m, int64_t n, int64_t k, const operand *a, const operand *b,
                        float beta, float *c, int64_t ldc)
{
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            float s = 0;
            for (int64_t t = 0; t < k; t++) {
                const float x = a->p ? panel_elem(a->p, a->line0 + i, t) : src_elem(a->src, i, t);
                const float y = b->p ? panel_elem(b->p, b->line0 + j, t) : src_elem(b->src, j, t);
                s += x * y;
            }
            c[i * ldc + j] = (beta != 0 ? beta * c[i * ldc + j] : 0) + s;
        }
}

void tg__gemm_bf16_bits(tg_bf16_kernel kern, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                        const void *a, bool a_bits, int64_t lda, const void *b, bool b_bits,
                        int64_t ldb, float beta, float *c, int64_t ldc,
                        const tg__bf16_panels *pa, int64_t pa_line0, const tg__bf16_panels *pb,
                        int64_t pb_line0)
{
    TG_ASSERT(kern != TG_BF16_KERNEL_AUTO);
    if (m <= 0 || n <= 0) return;
    const tg__bf16_src sa = {.p = a_bits ? NULL : a, .h = a_bits ? a : NULL, .ld = lda,
                             .tcontig = !ta};
    const tg__bf16_src sb = {.p = b_bits ? NULL : b, .h = b_bits ? b : NULL, .ld = ldb,
                             .tcontig = tb};
    const operand oa = {.src = &sa, .p = pa, .line0 = pa_line0};
    const operand ob = {.src = &sb, .p = pb, .line0 = pb_line0};
    if (kern != TG_BF16_KERNEL_PORTABLE && k > 0) {
        TG_ASSERT(!pa || (pa->kern == kern && !pa->b_side && pa->o.k == k &&
                          pa_line0 % tg__bf16_panel_lines(kern, false) == 0 &&
                          pa_line0 + m <= pa->o.lines));
        TG_ASSERT(!pb || (pb->kern == kern && pb->b_side && pb->o.k == k &&
                          pb_line0 % TG__BF16_NR == 0 && pb_line0 + n <= pb->o.lines));
        driver d = driver_of(kern);
        if (!d.amx)
            d.tiles = tg__bf16_micro_avx512_tiles(tg__bf16_broadcast() ==
                                                  TG__BF16_BCAST_REGISTER);
        if (gemm_packed(&d, m, n, k, &oa, &ob, beta, c, ldc)) return;
    }
    if (!a || !b || a_bits || b_bits) {
        gemm_scalar(m, n, k, &oa, &ob, beta, c, ldc);
        return;
    }
    /* portable, or no memory for the packed operands: the same products */
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                (int)m, (int)n, (int)k, 1, a, (int)lda, b, (int)ldb, beta, c, (int)ldc);
}

void tg__gemm_bf16_panels(tg_bf16_kernel kern, bool ta, bool tb, int64_t m, int64_t n,
                          int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb,
                          float beta, float *c, int64_t ldc, const tg__bf16_panels *pa,
                          int64_t pa_line0, const tg__bf16_panels *pb, int64_t pb_line0)
{
    tg__gemm_bf16_bits(kern, ta, tb, m, n, k, a, false, lda, b, false, ldb, beta, c, ldc, pa,
                       pa_line0, pb, pb_line0);
}

void tg__gemm_bf16(tg_bf16_kernel kern, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                  const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
                  int64_t ldc)
{
    tg__gemm_bf16_panels(kern, ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc, NULL, 0, NULL, 0);
}

void tg__bf16_store(float *c, int64_t ldc, const float *acc, int64_t ldt, int mr, int nr,
                    bool first, float beta)
{
    for (int r = 0; r < mr; r++) {
        float *cr = c + r * ldc;
        const float *ar = acc + r * ldt;
        if (!first)
            for (int j = 0; j < nr; j++) cr[j] += ar[j];
        else if (beta == 0)
            memcpy(cr, ar, (size_t)nr * sizeof *cr);
        else
            for (int j = 0; j < nr; j++) cr[j] = beta * cr[j] + ar[j];
    }
}
