/* src/ops/grid_sample_2d.h - grid_sample's 2-D f32 bilinear and nearest
 * kernels, included by grid_sample.c after the f32 template (whose
 * gs_unnormalize_f32 and gs_pad_f32 the reflection padding uses).
 *
 * The points go in blocks of GS2_B of one sample.  A block's positions,
 * corner offsets and weights are computed once, in loops over the points
 * that a compiler vectorizes (selects, no branches; reflection's fmod is a
 * subtraction within two spans of the low end, and the farther points take
 * gs_pad_f32 one by one), and then every channel reads its plane at those
 * offsets; the output of a channel is a contiguous run of the block's
 * points.  A corner outside the input gets offset -1 and weight 0 and adds
 * a +0 term (torch: a masked gather, read as 0), so the sums are the
 * template's, bit for bit: they start at +0, never become -0, and s + 0 = s
 * otherwise.  The kernels:
 *   portable  plain C, one point at a time in the channel loops
 *   avx2      the position loops compiled for AVX2; the channel loops as
 *             portable
 *   avx512    the position loops for AVX-512, and the channel loops
 *             gathering 16 points per vpgatherdps
 * Every kernel does the same operations in the same order (no fused
 * multiply-adds: gcc's -std=c17 implies -ffp-contract=off, and clang is
 * told so below), so all give the same bits.  TG_MAX_ISA bounds the
 * choice (src/core/cpu.c).
 *
 * The backward is two passes that each own what they write: d input by
 * (sample, group of channels), each plane's adds in the points' order, and
 * d grid by point, each point's sums over the channels in their order; the
 * groups of channels let a batch of one use every thread.  The results are
 * the template's and do not depend on the thread count. */
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF   /* clang contracts by default even under -std=c17 */
#endif
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define GS2_X86 1
#endif

enum { GS2_B = 64 };   /* points per block, a multiple of 16 */

/* A block's corners, nw ne sw se (k = 2 * (y hi) + (x hi)). */
typedef struct gs2_block {
    int32_t off[4][GS2_B];              /* offset in a plane, -1 outside */
    float w[4][GS2_B];                  /* weight (x's factor times y's), 0 outside */
    float fx[2][GS2_B], fy[2][GS2_B];   /* lo and hi factors along x and y */
    float mx[GS2_B], my[GS2_B];         /* d position / d grid coordinate */
} gs2_block;

/* The fast kernels apply: 2-D f32 (bicubic: grid_sample_cubic.h), offsets
 * in int32. */
static bool gs2_applies(const gs_job *j, tg_dtype dt)
{
    return dt == TG_F32 && j->ns == 2 && j->in_plane <= INT32_MAX;
}

/* The widest kernel allowed and run by the CPU: 2 avx512, 1 avx2, 0 portable. */
static int gs2_level(void)
{
#ifdef GS2_X86
    __builtin_cpu_init();
    if (tg__isa_allows(TG__ISA_AVX512) && __builtin_cpu_supports("avx512f")) return 2;
    if (tg__isa_allows(TG__ISA_AVX2) && __builtin_cpu_supports("avx2")) return 1;
#endif
    return 0;
}

/* Reflection (gs_reflect_f32, then gs_clip_f32) of positions r with
 * derivatives m, where the distance a from the low end is under two spans:
 * fmod(a, span) is then a or a - span, both exact (Sterbenz), and the
 * quotient's floor 0 or 1.  slow[i] marks the others (farther, NaN, or a
 * span of 0), which the caller redoes with gs_pad_f32. */
static inline __attribute__((always_inline)) void gs2_reflect(float *r, float *m, int nb,
                                                              int64_t size, bool align,
                                                              unsigned char *slow)
{
    const float lo = align ? 0.0f : -0.5f, hi = (float)(size - 1);
    const float span = align ? (float)(2 * (size - 1)) / 2 : (float)(2 * size) / 2;
    for (int i = 0; i < nb; i++) {
        const float t = r[i] - lo;
        const bool neg = t < 0;
        const float a = neg ? -t : t, sign = neg ? -1.0f : 1.0f;
        const float flips = floorf(a / span), extra = a < span ? a : a - span;
        const bool odd = flips == 1;
        const float f = odd ? span - extra + lo : extra + lo, dr = odd ? -sign : sign;
        const bool l = !(f > 0), h = f >= hi;
        r[i] = l ? 0.0f : h ? hi : f;
        m[i] = m[i] * dr * ((l | h) ? 0.0f : 1.0f);
        slow[i] = !(a < 2 * span);
    }
}

/* Pixel positions of nb points (grid pairs gp): torch's unnormalize and
 * padding, as gs_point_f32. */
static inline __attribute__((always_inline)) void gs2_positions(const gs_job *j, const float *gp,
                                                                int nb, float *rx, float *ry,
                                                                gs2_block *b)
{
    const int64_t H = j->in[0], W = j->in[1];
    const bool align = j->align, border = j->pad == TG_GRID_SAMPLE_BORDER;
    const float wf = (float)W, hf = (float)H, wm = (float)(W - 1), hm = (float)(H - 1);
    const float sx = align ? wm / 2 : wf / 2, sy = align ? hm / 2 : hf / 2;
    for (int i = 0; i < nb; i++) {   /* the coordinates apart, then the arithmetic */
        rx[i] = gp[2 * i];
        ry[i] = gp[2 * i + 1];
    }
    for (int i = 0; i < nb; i++) {
        const float cx = rx[i], cy = ry[i];
        const float ax = ((cx + 1) / 2) * wm, bx = ((cx + 1) * wf - 1) / 2;
        const float ay = ((cy + 1) / 2) * hm, by = ((cy + 1) * hf - 1) / 2;
        const float px = align ? ax : bx, py = align ? ay : by;
        /* gs_clip: NaN and <= 0 to 0, >= size - 1 to size - 1, slope 0 there */
        const bool lx = !(px > 0), hx = px >= wm, ly = !(py > 0), hy = py >= hm;
        const float qx = lx ? 0.0f : hx ? wm : px, qy = ly ? 0.0f : hy ? hm : py;
        rx[i] = border ? qx : px;
        ry[i] = border ? qy : py;
        b->mx[i] = border & (lx | hx) ? 0.0f : sx;
        b->my[i] = border & (ly | hy) ? 0.0f : sy;
    }
    if (j->pad != TG_GRID_SAMPLE_REFLECTION) return;
    unsigned char slow_x[GS2_B], slow_y[GS2_B];
    gs2_reflect(rx, b->mx, nb, W, align, slow_x);
    gs2_reflect(ry, b->my, nb, H, align, slow_y);
    for (int i = 0; i < nb; i++) {
        float m;
        if (slow_x[i]) {
            rx[i] = gs_unnormalize_f32(gp[2 * i], W, align, &m);
            rx[i] = gs_pad_f32(rx[i], W, j->pad, align, &m);
            b->mx[i] = m;
        }
        if (slow_y[i]) {
            ry[i] = gs_unnormalize_f32(gp[2 * i + 1], H, align, &m);
            ry[i] = gs_pad_f32(ry[i], H, j->pad, align, &m);
            b->my[i] = m;
        }
    }
}

/* The block's corners: bilinear's four, or nearest's one (k = 0). */
static inline __attribute__((always_inline)) void gs2_coords(const gs_job *j, const float *gp,
                                                             int nb, gs2_block *b)
{
    float rx[GS2_B], ry[GS2_B];
    gs2_positions(j, gp, nb, rx, ry, b);
    const int32_t W = (int32_t)j->in[1];
    const float wf = (float)j->in[1], hf = (float)j->in[0];
    if (j->mode == TG_GRID_SAMPLE_NEAREST) {
        for (int i = 0; i < nb; i++) {
            const float px = nearbyintf(rx[i]), py = nearbyintf(ry[i]);
            const bool v = (px >= 0) & (px < wf) & (py >= 0) & (py < hf);
            const int32_t o = (int32_t)(v ? py : 0.0f) * W + (int32_t)(v ? px : 0.0f);
            b->off[0][i] = v ? o : -1;
            b->w[0][i] = v ? 1.0f : 0.0f;
        }
    } else {
        for (int i = 0; i < nb; i++) {
            const float x0 = floorf(rx[i]), y0 = floorf(ry[i]), x1 = x0 + 1, y1 = y0 + 1;
            const float fx0 = x0 + 1 - rx[i], fx1 = rx[i] - x0;
            const float fy0 = y0 + 1 - ry[i], fy1 = ry[i] - y0;
            const bool vx0 = (x0 >= 0) & (x0 < wf), vx1 = (x1 >= 0) & (x1 < wf);
            const bool vy0 = (y0 >= 0) & (y0 < hf), vy1 = (y1 >= 0) & (y1 < hf);
            const int32_t ix0 = (int32_t)(vx0 ? x0 : 0.0f), ix1 = (int32_t)(vx1 ? x1 : 0.0f);
            const int32_t iy0 = (int32_t)(vy0 ? y0 : 0.0f) * W;
            const int32_t iy1 = (int32_t)(vy1 ? y1 : 0.0f) * W;
            const float w0 = fx0 * fy0, w1 = fx1 * fy0, w2 = fx0 * fy1, w3 = fx1 * fy1;
            b->off[0][i] = (vx0 & vy0) ? iy0 + ix0 : -1;
            b->off[1][i] = (vx1 & vy0) ? iy0 + ix1 : -1;
            b->off[2][i] = (vx0 & vy1) ? iy1 + ix0 : -1;
            b->off[3][i] = (vx1 & vy1) ? iy1 + ix1 : -1;
            b->w[0][i] = (vx0 & vy0) ? w0 : 0.0f;
            b->w[1][i] = (vx1 & vy0) ? w1 : 0.0f;
            b->w[2][i] = (vx0 & vy1) ? w2 : 0.0f;
            b->w[3][i] = (vx1 & vy1) ? w3 : 0.0f;
            b->fx[0][i] = fx0;
            b->fx[1][i] = fx1;
            b->fy[0][i] = fy0;
            b->fy[1][i] = fy1;
        }
    }
    /* up to the next 16: corners outside, so whole vectors may read them */
    for (int k = 0; k < 4; k++)
        for (int i = nb; i < ((nb + 15) & ~15); i++) {
            b->off[k][i] = -1;
            b->w[k][i] = 0;
            b->fx[k / 2][i] = b->fy[k / 2][i] = 0;
        }
}

static void gs2_coords_portable(const gs_job *j, const float *gp, int nb, gs2_block *b)
{
    gs2_coords(j, gp, nb, b);
}

/* Plane xc's values at nk corners (corner k's offsets at off + k GS2_B,
 * weights at w + k GS2_B, as a block's), weighted: yc[i] for i < nb.  The
 * 3-D kernels share it. */
static void gs2_chan_portable(const float *xc, float *yc, const int32_t *off, const float *w,
                              int nk, int nb)
{
    for (int i = 0; i < nb; i++) {
        float acc = 0;
        for (int k = 0; k < nk; k++) {
            const int32_t o = off[k * GS2_B + i];
            const float v = o >= 0 ? xc[o] : 0.0f;
            acc += v * w[k * GS2_B + i];
        }
        yc[i] = acc;
    }
}

/* The grid gradient's sums of plane xc times g (gc) into sx, sy:
 * d w / d x = +-(y's factor), d w / d y = +-(x's factor), + for the hi
 * corner, as the template's fac. */
static void gs2_sums_portable(const float *xc, const float *gc, const gs2_block *b, int nb,
                              float *sx, float *sy)
{
    for (int i = 0; i < nb; i++) {
        const float go = gc[i];
        for (int k = 0; k < 4; k++) {
            const int32_t o = b->off[k][i];
            const float v = o >= 0 ? xc[o] : 0.0f;
            const float ty = o >= 0 ? v * b->fx[k & 1][i] * go : 0.0f;
            const float tx = o >= 0 ? v * b->fy[k >> 1][i] * go : 0.0f;
            sy[i] = k >> 1 ? sy[i] + ty : sy[i] - ty;
            sx[i] = k & 1 ? sx[i] + tx : sx[i] - tx;
        }
    }
}

#ifdef GS2_X86
__attribute__((target("avx2"))) static void gs2_coords_avx2(const gs_job *j, const float *gp,
                                                            int nb, gs2_block *b)
{
    gs2_coords(j, gp, nb, b);
}

__attribute__((target("avx512f"))) static void gs2_coords_avx512(const gs_job *j,
                                                                 const float *gp, int nb,
                                                                 gs2_block *b)
{
    gs2_coords(j, gp, nb, b);
}

__attribute__((target("avx512f"))) static void gs2_chan_avx512(const float *xc, float *yc,
                                                               const int32_t *off,
                                                               const float *w, int nk, int nb)
{
    const __m512i zi = _mm512_setzero_si512();
    for (int i = 0; i < nb; i += 16) {
        const __mmask16 tail = nb - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (nb - i)) - 1);
        __m512 acc = _mm512_setzero_ps();
        for (int k = 0; k < nk; k++) {
            const __m512i o = _mm512_loadu_si512(off + k * GS2_B + i);
            const __mmask16 in = _mm512_cmpge_epi32_mask(o, zi);
            const __m512 v = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), in, o, xc, 4);
            acc = _mm512_add_ps(acc, _mm512_mul_ps(v, _mm512_loadu_ps(w + k * GS2_B + i)));
        }
        _mm512_mask_storeu_ps(yc + i, tail, acc);
    }
}

__attribute__((target("avx512f"))) static void gs2_sums_avx512(const float *xc, const float *gc,
                                                               const gs2_block *b, int nb,
                                                               float *sx, float *sy)
{
    const __m512i zi = _mm512_setzero_si512();
    for (int i = 0; i < nb; i += 16) {
        const __mmask16 tail = nb - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (nb - i)) - 1);
        const __m512 go = _mm512_maskz_loadu_ps(tail, gc + i);
        __m512 ax = _mm512_loadu_ps(sx + i), ay = _mm512_loadu_ps(sy + i);
        for (int k = 0; k < 4; k++) {
            const __m512i o = _mm512_loadu_si512(b->off[k] + i);
            const __mmask16 in = _mm512_cmpge_epi32_mask(o, zi);
            const __m512 v = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), in, o, xc, 4);
            const __m512 ty = _mm512_maskz_mul_ps(
                in, _mm512_mul_ps(v, _mm512_loadu_ps(b->fx[k & 1] + i)), go);
            const __m512 tx = _mm512_maskz_mul_ps(
                in, _mm512_mul_ps(v, _mm512_loadu_ps(b->fy[k >> 1] + i)), go);
            ay = k >> 1 ? _mm512_add_ps(ay, ty) : _mm512_sub_ps(ay, ty);
            ax = k & 1 ? _mm512_add_ps(ax, tx) : _mm512_sub_ps(ax, tx);
        }
        _mm512_storeu_ps(sx + i, ax);
        _mm512_storeu_ps(sy + i, ay);
    }
}
#endif

/* The block's corners by the job's kernel. */
static void gs2_block_of(const gs_job *j, const float *gp, int nb, gs2_block *b)
{
#ifdef GS2_X86
    if (j->level == 2) {
        gs2_coords_avx512(j, gp, nb, b);
        return;
    }
    if (j->level == 1) {
        gs2_coords_avx2(j, gp, nb, b);
        return;
    }
#endif
    gs2_coords_portable(j, gp, nb, b);
}

/* The block's points starting at q of the flat (N, P) range, at most hi - q
 * and not past the sample's end. */
static int gs2_count(const gs_job *j, int64_t q, int64_t hi)
{
    const int64_t left = j->npts - q % j->npts, n = hi - q < left ? hi - q : left;
    return n < GS2_B ? (int)n : GS2_B;
}

/* out[n, c, p .. p + nb) for every c (q = n P + p) from one block's nk taps,
 * off and w laid out as [nk][GS2_B]. */
static void gs2_block_forward(const gs_job *j, int64_t q, const int32_t *off, const float *w,
                              int nk, int nb)
{
    const int64_t P = j->npts, C = j->C, plane = j->in_plane, n = q / P;
    const float *x = (const float *)j->x + n * C * plane;
    float *y = (float *)j->y + n * C * P + q % P;
    for (int64_t c = 0; c < C; c++, x += plane, y += P) {
#ifdef GS2_X86
        if (j->level == 2) {
            gs2_chan_avx512(x, y, off, w, nk, nb);
            continue;
        }
#endif
        gs2_chan_portable(x, y, off, w, nk, nb);
    }
}

/* d input of channels [c0, c1) of the sample holding point q from one block's
 * nk taps (as gs2_block_forward's): dx[o] += w g over the points in order. */
static void gs2_block_dinput(const gs_job *j, int64_t q, int64_t c0, int64_t c1,
                             const int32_t *off, const float *w, int nk, int nb)
{
    const int64_t P = j->npts, C = j->C, plane = j->in_plane, n = q / P;
    for (int64_t c = c0; c < c1; c++) {
        float *dx = (float *)j->dx + (n * C + c) * plane;
        const float *g = (const float *)j->g + (n * C + c) * P + q % P;
        for (int i = 0; i < nb; i++)
            for (int k = 0; k < nk; k++) {
                const int32_t o = off[k * GS2_B + i];
                if (o >= 0) dx[o] += w[k * GS2_B + i] * g[i];
            }
    }
}

/* Points [lo, hi) of the flat (N, P) range: out[n, c, p] for every c. */
static void gs2_forward(void *job, int64_t lo, int64_t hi)
{
    const gs_job *j = job;
    const int nk = j->mode == TG_GRID_SAMPLE_NEAREST ? 1 : 4;
    gs2_block b;
    for (int64_t q = lo; q < hi;) {
        const int nb = gs2_count(j, q, hi);
        gs2_block_of(j, (const float *)j->grid + 2 * q, nb, &b);
        gs2_block_forward(j, q, (const int32_t *)b.off, (const float *)b.w, nk, nb);
        q += nb;
    }
}

/* Elements [lo, hi) of (N, groups): d input of sample n's group of
 * channels, dx[o] += w g over the points in order (dx zeroed). */
static void gs2_dinput(void *job, int64_t lo, int64_t hi)
{
    const gs_job *j = job;
    const int64_t P = j->npts, C = j->C, G = j->groups;
    const int nk = j->mode == TG_GRID_SAMPLE_NEAREST ? 1 : 4;
    gs2_block b;
    for (int64_t e = lo; e < hi; e++) {
        const int64_t n = e / G, c0 = e % G * C / G, c1 = (e % G + 1) * C / G;
        for (int64_t q = n * P; q < (n + 1) * P;) {
            const int nb = gs2_count(j, q, (n + 1) * P);
            gs2_block_of(j, (const float *)j->grid + 2 * q, nb, &b);
            gs2_block_dinput(j, q, c0, c1, (const int32_t *)b.off, (const float *)b.w, nk, nb);
            q += nb;
        }
    }
}

/* Points [lo, hi) of the flat (N, P) range: bilinear's d grid, each
 * point's sums over the channels in order. */
static void gs2_dgrid(void *job, int64_t lo, int64_t hi)
{
    const gs_job *j = job;
    const int64_t P = j->npts, C = j->C, plane = j->in_plane;
    gs2_block b;
    for (int64_t q = lo; q < hi;) {
        const int nb = gs2_count(j, q, hi);
        const int64_t n = q / P, p = q % P;
        gs2_block_of(j, (const float *)j->grid + 2 * q, nb, &b);
        float sx[GS2_B] = {0}, sy[GS2_B] = {0};
        const float *x = (const float *)j->x + n * C * plane;
        const float *g = (const float *)j->g + n * C * P + p;
        for (int64_t c = 0; c < C; c++, x += plane, g += P) {
#ifdef GS2_X86
            if (j->level == 2) {
                gs2_sums_avx512(x, g, &b, nb, sx, sy);
                continue;
            }
#endif
            gs2_sums_portable(x, g, &b, nb, sx, sy);
        }
        float *dg = (float *)j->dgrid + 2 * q;
        for (int i = 0; i < nb; i++) {
            dg[2 * i] = b.mx[i] * sx[i];
            dg[2 * i + 1] = b.my[i] * sy[i];
        }
        q += nb;
    }
}
