/* src/quant/qconvt_phase.c - the quantized ConvTranspose with no columns:
 * a stride-phase implicit GEMM (1-D and 2-D, no dilation), on AMX tiles or
 * in AVX-512 VNNI or AVX2 registers.
 *
 * On an axis with stride s, padding p and K taps, input i reaches output
 * y = i*s - p + k through tap k.  The outputs of one phase phi = (y + p) mod s
 * are reached only by the taps k = phi + s*t (t = 0, 1, ...), from input
 * i = q - t where q = (y + p - phi) / s.  So each phase is a plain
 * correlation of x over q with T = ceil((K - phi) / s) taps per axis:
 *
 *     out_phi[co][q] = sum over t, ci of  w[ci][co][phi + s*t] * x[ci][q - t]
 *
 * (2-D: t and q are pairs).  x is laid out once per sample as a grid of
 * positions wide enough for every phase's reads (positions outside the input
 * hold the zero point), four channels interleaved: x4[cq][P][e] =
 * x[4*cq + e][P] + off (u8, as the VNNI kernel's activations).  A flat
 * position f = r*Wg + c of that grid and a tap t read x4 at f - (t1*Wg + t2),
 * so sixteen consecutive f of one channel quad are one 64-byte vector, and
 * sixteen quads of them one AMX B tile (rows 4*np bytes apart), read in
 * place: no im2col.  The weights of one tap are tg_qweight.taps8: 16 output
 * channels x 64 input channels, an AMX A tile, whose four bytes for one
 * output channel and one quad are what the VNNI kernel broadcasts.
 *
 *  AMX:  tdpbsud (signed A, unsigned B) adds a tap's products into a 16 x 16
 *        tile of out_phi[co][f] (two blocks of 16 channels, 32 positions).
 *  VNNI: vpdpbusd of a broadcast weight quad against a vector of 16
 *        positions' quads adds four products per lane; a block of 4 output
 *        channels x 96 positions is 24 zmm accumulators, summed over every
 *        tap and quad before it is stored once.
 * Both start from -zoff times the sum of the phase's weights, so the zero
 * point cancels exactly as in the other kernels.
 *  AVX2: its own grid of x - zx as i16 channel pairs and vpmaddwd (see
 *        "the AVX2 kernel" below); 3 channels x 32 positions a block.  It
 *        runs for groups of fewer than 16 output channels only.  Positions f that fall in
 * the grid's margins are computed and dropped.
 *
 * Each row of a block (one output channel) is requantized in AVX-512
 * registers into a per-phase byte plane; the phases are then interleaved
 * into y.  The integers are the portable kernel's: every sum is the same
 * set of exact i32 products and the requantization is the same formula
 * (tests: quant_ops::every_kernel_gives_the_portable_bytes).
 *
 * Work is split by samples, one task each, run in parallel; scratch is the
 * thread's conv workspace.
 *
 * It pays where the input has many positions: the grid's margins are
 * computed and dropped, and a small input is mostly margin.  So it runs from
 * tg__q_phase_min_positions input positions on (bench/int8.py, figures in
 * docs/quantization.md). */
#include <string.h>

#include "quant/qconvt_phase.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#define AVX2_MAX_CHANNELS 16   /* AVX2 runs it below this many output channels a group */

/* Taps of phase phi on an axis: k = phi + s*t for t < taps(phi). */
static int64_t phase_taps(const tg__q_phase_axis *a, int64_t phi)
{
    return phi < a->K ? (a->K - phi + a->s - 1) / a->s : 0;
}

/* The q of phase phi whose outputs y = q*s + phi - pad lie in [0, out):
 * [*qlo, *qhi], empty when *qlo > *qhi. */
static void phase_range(const tg__q_phase_axis *a, int64_t phi, int64_t *qlo, int64_t *qhi)
{
    const int64_t first = a->pad - phi;   /* y = 0 at q = first / s */
    *qlo = first >= 0 ? (first + a->s - 1) / a->s : -((-first) / a->s);
    const int64_t last = a->out - 1 + a->pad - phi;
    *qhi = last >= 0 ? last / a->s : -((-last + a->s - 1) / a->s);
}

static void axis_make(tg__q_phase_axis *a, const tg__conv_geom *g, int ax)
{
    *a = (tg__q_phase_axis){.s = g->stride[ax], .K = g->k[ax], .pad = g->pad[ax], .in = g->col[ax],
                     .out = g->img[ax]};
    int64_t lo = 0, hi = a->in - 1;
    for (int64_t phi = 0; phi < a->s; phi++) {
        int64_t qlo, qhi;
        phase_range(a, phi, &qlo, &qhi);
        if (qlo > qhi) continue;
        const int64_t t = phase_taps(a, phi);
        if (qlo - (t > 0 ? t - 1 : 0) < lo) lo = qlo - (t > 0 ? t - 1 : 0);
        if (qhi > hi) hi = qhi;
    }
    a->lo = lo;
    a->ext = hi - lo + 1;
}

int64_t tg__q_phase_min_positions = 64;

bool tg__q_convt_phase_fits(const tg__conv_geom *g, const tg_qweight *w, tg_int8_kernel kern)
{
    const int64_t taps = ((g->k[1] + g->stride[1] - 1) / g->stride[1]) *
                         ((g->k[2] + g->stride[2] - 1) / g->stride[2]);
    /* AVX2's 12-accumulator blocks lose to the column GEMM's tiles where a
     * group has many output channels (docs/quantization.md) */
    if (kern == TG_INT8_KERNEL_AVX2 && g->c_img / g->groups >= AVX2_MAX_CHANNELS) return false;
    const bool packed = kern == TG_INT8_KERNEL_AVX2 ? w->taps16 != NULL : w->taps8 != NULL;
    return packed && g->k[0] == 1 && g->col[0] == 1 && g->img[0] == 1 && g->dil[1] == 1 &&
           g->dil[2] == 1 && taps <= MAX_PHASE_TAPS &&
           g->col[1] * g->col[2] >= tg__q_phase_min_positions;
}

/* x4 of sample b, group gi (layout above): the zero point everywhere
 * (zero bytes for the padding channels past cig), then each input row of
 * four channel planes interleaved into its place, 16 positions at a time. */
static void build_x4(uint8_t *x4, const tg__q_phase_job *j, int64_t b, int64_t gi, int64_t ncq)
{
    const tg__conv_geom *g = j->op.g;
    const int64_t cig = g->c_col / g->groups, S = g->col[1] * g->col[2];
    const bool sg = j->op.dt == TG_I8;
    const uint8_t zoff = (uint8_t)(sg ? j->op.zx + 128 : j->op.zx);
    const __m128i flip = _mm_set1_epi8(sg ? (char)0x80 : 0);
    const tg__q_phase_axis *a1 = &j->ax[0], *a2 = &j->ax[1];
    const uint8_t *xb = j->op.x + (b * g->c_col + gi * cig) * S;
    for (int64_t cq = 0; cq < ncq; cq++) {
        uint8_t *plane = x4 + cq * j->np * 4;
        uint8_t fill[4];
        for (int e = 0; e < 4; e++) fill[e] = 4 * cq + e < cig ? zoff : 0;
        uint32_t fill4;
        memcpy(&fill4, fill, 4);
        for (int64_t p = 0; p < j->np - MARGIN; p++) memcpy(plane + 4 * p, &fill4, 4);
        memset(plane + 4 * (j->np - MARGIN), 0, MARGIN * 4);
        const uint8_t *src[4];
        for (int e = 0; e < 4; e++)   /* a padding channel reads channel 0: dropped below */
            src[e] = xb + (4 * cq + e < cig ? 4 * cq + e : 0) * S;
        for (int64_t i1 = 0; i1 < a1->in; i1++) {
            uint8_t *dst = plane + 4 * ((i1 - a1->lo) * a2->ext - a2->lo);
            const int64_t off = i1 * a2->in;
            int64_t i2 = 0;
            for (; i2 + 16 <= a2->in; i2 += 16) {
#define ROW16(e) _mm_xor_si128(_mm_loadu_si128((const __m128i *)(src[e] + off + i2)), flip)
                const __m128i r0 = ROW16(0), r1 = ROW16(1), r2 = ROW16(2), r3 = ROW16(3);
#undef ROW16
                const __m128i lo01 = _mm_unpacklo_epi8(r0, r1), hi01 = _mm_unpackhi_epi8(r0, r1);
                const __m128i lo23 = _mm_unpacklo_epi8(r2, r3), hi23 = _mm_unpackhi_epi8(r2, r3);
                uint8_t *d = dst + 4 * i2;
                _mm_storeu_si128((__m128i *)d, _mm_unpacklo_epi16(lo01, lo23));
                _mm_storeu_si128((__m128i *)(d + 16), _mm_unpackhi_epi16(lo01, lo23));
                _mm_storeu_si128((__m128i *)(d + 32), _mm_unpacklo_epi16(hi01, hi23));
                _mm_storeu_si128((__m128i *)(d + 48), _mm_unpackhi_epi16(hi01, hi23));
            }
            for (; i2 < a2->in; i2++)
                for (int e = 0; e < 4; e++) dst[4 * i2 + e] = src[e][off + i2] ^ (sg ? 0x80 : 0);
            if (4 * cq + 3 >= cig)   /* padding channels back to 0 */
                for (int64_t c = 0; c < a2->in; c++)
                    for (int e = 0; e < 4; e++)
                        if (4 * cq + e >= cig) dst[4 * c + e] = 0;
        }
    }
}

static void phase_make(tg__q_phase_plan *ph, const tg__q_phase_job *j, int64_t p1, int64_t p2)
{
    const tg__q_phase_axis *a1 = &j->ax[0], *a2 = &j->ax[1];
    const int64_t K2 = j->op.g->k[2], wg = a2->ext;
    const int64_t T1 = phase_taps(a1, p1), T2 = phase_taps(a2, p2);
    int64_t q1lo, q1hi, q2lo, q2hi;
    phase_range(a1, p1, &q1lo, &q1hi);
    phase_range(a2, p2, &q2lo, &q2hi);
    ph->nt = (int)(T1 * T2);
    for (int64_t t1 = 0, t = 0; t1 < T1; t1++)
        for (int64_t t2 = 0; t2 < T2; t2++, t++) {
            ph->toff[t] = t1 * wg + t2;
            ph->tk[t] = (p1 + a1->s * t1) * K2 + p2 + a2->s * t2;
        }
    ph->ffirst = j->ffirst[p1 * a2->s + p2];
    ph->flast = (q1hi - a1->lo) * wg + (q2hi - a2->lo);
    ph->zoff = (uint32_t)(j->op.dt == TG_I8 ? j->op.zx + 128 : j->op.zx);
}

/* y[b, gi*cog + co] from the phase planes.  Output row y1 belongs to one
 * phase p1 (row q1); along it, the outputs y2 = s2*m + e of residue e come
 * from phase p2 = (e + pad2) mod s2, at q2 = m + (e + pad2 - p2) / s2: one
 * contiguous run per residue, interleaved (two at a time by SSE2 when s2 is
 * 2). */
static void interleave(const tg__q_phase_job *j, int64_t b, int64_t gi, const uint8_t *planes)
{
    const int64_t *ffirst = j->ffirst;
    const tg__conv_geom *g = j->op.g;
    const tg__q_phase_axis *a1 = &j->ax[0], *a2 = &j->ax[1];
    const int64_t cog = g->c_img / g->groups, plane = cog * j->fmax, wg = a2->ext;
    const int64_t s2 = a2->s, O2 = a2->out, ysize = a1->out * O2;
    uint8_t *yg = j->op.y + (b * g->c_img + gi * cog) * ysize;
    for (int64_t y1 = 0; y1 < a1->out; y1++) {
        const int64_t p1 = (y1 + a1->pad) % a1->s, q1 = (y1 + a1->pad - p1) / a1->s;
        const uint8_t *run[2] = {NULL, NULL};   /* s2 == 2: the two residues' runs, channel 0 */
        for (int64_t e = 0; e < s2 && e < O2; e++) {
            const int64_t p2 = (e + a2->pad) % s2, q2 = (e + a2->pad - p2) / s2;
            const int64_t ph = p1 * s2 + p2;
            const uint8_t *src = planes + ph * plane - ffirst[ph] + (q1 - a1->lo) * wg + q2 -
                                 a2->lo;
            if (s2 == 2) {
                run[e] = src;
                continue;
            }
            for (int64_t co = 0; co < cog; co++) {
                uint8_t *yr = yg + co * ysize + y1 * O2;
                const uint8_t *sc = src + co * j->fmax;
                for (int64_t m = 0; s2 * m + e < O2; m++) yr[s2 * m + e] = sc[m];
            }
        }
        for (int64_t co = 0; s2 == 2 && co < cog; co++) {
            uint8_t *yr = yg + co * ysize + y1 * O2;
            const uint8_t *ev = run[0] + co * j->fmax;
            const uint8_t *od = O2 > 1 ? run[1] + co * j->fmax : NULL;
            int64_t m = 0;
            for (; 2 * m + 32 <= O2; m += 16) {
                const __m128i e16 = _mm_loadu_si128((const __m128i *)(ev + m));
                const __m128i o16 = _mm_loadu_si128((const __m128i *)(od + m));
                _mm_storeu_si128((__m128i *)(yr + 2 * m), _mm_unpacklo_epi8(e16, o16));
                _mm_storeu_si128((__m128i *)(yr + 2 * m + 16), _mm_unpackhi_epi8(e16, o16));
            }
            for (; 2 * m < O2; m++) {
                yr[2 * m] = ev[m];
                if (2 * m + 1 < O2) yr[2 * m + 1] = od[m];
            }
        }
    }
}

static int phase_task(void *job, int64_t b)
{
    const tg__q_phase_job *j = job;
    const tg__conv_geom *g = j->op.g;
    const int64_t cog = g->c_img / g->groups, nph = j->ax[0].s * j->ax[1].s;
    const int64_t ncq = j->op.w->ncc * TILE;   /* VNNI, AMX: channel quads; AVX2: pairs */
    const size_t x4_bytes = (size_t)((j->kern == TG_INT8_KERNEL_AVX2 ? j->op.w->ncp : ncq) *
                                     j->np * 4),
                 plane_bytes = (size_t)(cog * j->fmax);
    char *scr = tg__conv_scratch(0, x4_bytes + (size_t)nph * (plane_bytes + 8) + 64);
    if (!scr) return TG_ENOMEM;
    uint8_t *x4 = (uint8_t *)scr, *planes = x4 + x4_bytes;
    const bool amx = j->kern == TG_INT8_KERNEL_AMX, avx2 = j->kern == TG_INT8_KERNEL_AVX2;
    if (amx) tg__amx_tiles_begin();
    for (int64_t gi = 0; gi < g->groups; gi++) {
        if (avx2) tg__q_phase_build_x2((int32_t *)x4, j, b, gi);
        else build_x4(x4, j, b, gi, ncq);
        for (int64_t p1 = 0; p1 < j->ax[0].s; p1++)
            for (int64_t p2 = 0; p2 < j->ax[1].s; p2++) {
                tg__q_phase_plan ph;
                phase_make(&ph, j, p1, p2);
                (amx ? tg__q_phase_run_amx : avx2 ? tg__q_phase_run_avx2 : tg__q_phase_run_vnni)(
                    j, x4, gi, &ph, planes + (p1 * j->ax[1].s + p2) * plane_bytes);
            }
        interleave(j, b, gi, planes);
    }
    if (amx) tg__amx_tiles_end();
    return TG_OK;
}

int tg__q_convt_phase(const tg__conv_geom *g, tg_dtype dt, const void *x, int32_t zx,
                      const tg_qweight *w, const tg__q_requant *r, void *y,
                      tg_int8_kernel kern)
{
    if (g->batch == 0) return TG_OK;
    tg__q_phase_job j = {.op = {.g = g, .dt = dt, .x = x, .zx = zx, .w = w, .r = r, .y = y},
                   .kern = kern};
    axis_make(&j.ax[0], g, 1);
    axis_make(&j.ax[1], g, 2);
    j.np = j.ax[0].ext * j.ax[1].ext + MARGIN;
    j.ffirst = tg__malloc((size_t)(j.ax[0].s * j.ax[1].s) * sizeof *j.ffirst);
    if (!j.ffirst) return TG_ENOMEM;
    for (int64_t p1 = 0; p1 < j.ax[0].s; p1++)
        for (int64_t p2 = 0; p2 < j.ax[1].s; p2++) {
            int64_t q1lo, q1hi, q2lo, q2hi;
            phase_range(&j.ax[0], p1, &q1lo, &q1hi);
            phase_range(&j.ax[1], p2, &q2lo, &q2hi);
            j.ffirst[p1 * j.ax[1].s + p2] = (q1lo - j.ax[0].lo) * j.ax[1].ext + q2lo - j.ax[1].lo;
            const int64_t len = (q1hi - q1lo) * j.ax[1].ext + (q2hi - q2lo) + 1;
            const int64_t up = (len + 2 * TILE - 1) / (2 * TILE) * (2 * TILE);
            if (up > j.fmax) j.fmax = up;
        }
    const int rc = tg__run_tasks(g->batch, true, phase_task, &j);
    free(j.ffirst);
    return rc;
}

#else

int64_t tg__q_phase_min_positions = 64;
bool tg__q_convt_phase_fits(const tg__conv_geom *g, const tg_qweight *w, tg_int8_kernel kern)
{
    return false;
}
int tg__q_convt_phase(const tg__conv_geom *g, tg_dtype dt, const void *x, int32_t zx,
                      const tg_qweight *w, const tg__q_requant *r, void *y,
                      tg_int8_kernel kern)
{
    TG_ASSERT(!"column-free kernel called on a non-x86 build");
    return TG_EUNSUPPORTED;
}
#endif
