/* src/ops/grid_sample_3d.h - grid_sample's 3-D (5-D input) f32 trilinear
 * and nearest kernels, included by grid_sample.c after grid_sample_2d.h,
 * whose blocks of GS2_B points, gs2_reflect, gs2_count, channel loops
 * (gs2_chan_*) and kernel levels they share.
 *
 * A block's positions along z, y and x (each the template's gs_point in
 * loops over the points: selects, reflection as gs2_reflect, the farther
 * points by gs_pad_f32), then its corners: trilinear's 8 in the template's
 * order (k's bit 2 says z lo or hi, bit 1 y, bit 0 x) with weights
 * (fx fy) fz, or nearest's one.  A corner outside gets offset -1 and weight
 * 0 and adds (or subtracts) a +0 term, which leaves a sum as it is (the
 * template skips it); so every kernel gives the template's bits:
 *   forward   acc = 0, acc += v w[k] over the corners
 *   d grid    s[a] +-= v fac[k][a] g over the channels, then corners, then
 *             axes z, y, x; fac the other two axes' factors (x's first)
 *   d input   dx[o] += w[k] g, per plane in the points' order, then corners
 * portable (plain C), avx2 (the position loops for AVX2) and avx512 (the
 * position loops, and the channel loops gathering 16 points at once).  No
 * fused multiply-adds (see grid_sample_2d.h). */

/* A block's corners. */
typedef struct gs3_block {
    int32_t off[8][GS2_B];      /* offset in a (D, H, W) volume, -1 outside */
    float w[8][GS2_B];          /* weight (fx fy) fz, 0 outside */
    float f[3][2][GS2_B];       /* axis a's (z, y, x) lo and hi factors */
    float m[3][GS2_B];          /* d position / d grid coordinate, axis a */
} gs3_block;

/* The fast 3-D kernels apply: f32 trilinear or nearest, offsets in int32. */
static bool gs3_applies(const gs_job *j, tg_dtype dt)
{
    return dt == TG_F32 && j->ns == 3 && j->mode != TG_GRID_SAMPLE_BICUBIC &&
           j->in_plane <= INT32_MAX;
}

/* Positions r (and derivatives m) along an axis of the given size of nb
 * points whose grid coordinate is c[3 i]: gs_unnormalize_f32 and
 * gs_pad_f32, as gs2_positions. */
static inline __attribute__((always_inline)) void gs3_axis(const gs_job *j, const float *c,
                                                           int nb, int64_t size, float *r,
                                                           float *m)
{
    const bool align = j->align, border = j->pad == TG_GRID_SAMPLE_BORDER;
    const float sf = (float)size, sm = (float)(size - 1), s = align ? sm / 2 : sf / 2;
    for (int i = 0; i < nb; i++) {
        const float v = c[3 * i];
        const float p = align ? ((v + 1) / 2) * sm : ((v + 1) * sf - 1) / 2;
        const bool l = !(p > 0), h = p >= sm;
        r[i] = border ? (l ? 0.0f : h ? sm : p) : p;
        m[i] = border & (l | h) ? 0.0f : s;
    }
    if (j->pad != TG_GRID_SAMPLE_REFLECTION) return;
    unsigned char slow[GS2_B];
    gs2_reflect(r, m, nb, size, align, slow);
    for (int i = 0; i < nb; i++)
        if (slow[i]) {
            float d;
            r[i] = gs_unnormalize_f32(c[3 * i], size, align, &d);
            r[i] = gs_pad_f32(r[i], size, j->pad, align, &d);
            m[i] = d;
        }
}

/* The block's corners for nb points (grid triples gp). */
static inline __attribute__((always_inline)) void gs3_coords(const gs_job *j, const float *gp,
                                                             int nb, gs3_block *b)
{
    float r[3][GS2_B];
    for (int a = 0; a < 3; a++) gs3_axis(j, gp + 2 - a, nb, j->in[a], r[a], b->m[a]);
    const float df = (float)j->in[0], hf = (float)j->in[1], wf = (float)j->in[2];
    const int32_t H = (int32_t)j->in[1], W = (int32_t)j->in[2];
    if (j->mode == TG_GRID_SAMPLE_NEAREST) {
        for (int i = 0; i < nb; i++) {
            const float pz = nearbyintf(r[0][i]), py = nearbyintf(r[1][i]);
            const float px = nearbyintf(r[2][i]);
            const bool v = (pz >= 0) & (pz < df) & (py >= 0) & (py < hf) & (px >= 0) &
                           (px < wf);
            const int32_t o = ((int32_t)(v ? pz : 0.0f) * H + (int32_t)(v ? py : 0.0f)) * W +
                              (int32_t)(v ? px : 0.0f);
            b->off[0][i] = v ? o : -1;
            b->w[0][i] = v ? 1.0f : 0.0f;
        }
    } else {
        for (int i = 0; i < nb; i++) {
            int32_t ix[3][2];
            bool in[3][2];
            const float sz[3] = {df, hf, wf};
            for (int a = 0; a < 3; a++) {
                const float lo = floorf(r[a][i]), hi = lo + 1;
                b->f[a][0][i] = lo + 1 - r[a][i];
                b->f[a][1][i] = r[a][i] - lo;
                in[a][0] = (lo >= 0) & (lo < sz[a]);
                in[a][1] = (hi >= 0) & (hi < sz[a]);
                ix[a][0] = (int32_t)(in[a][0] ? lo : 0.0f);
                ix[a][1] = (int32_t)(in[a][1] ? hi : 0.0f);
            }
            for (int k = 0; k < 8; k++) {
                const int z = k >> 2, y = (k >> 1) & 1, x = k & 1;
                const bool v = in[0][z] & in[1][y] & in[2][x];
                const float w = b->f[2][x][i] * b->f[1][y][i] * b->f[0][z][i];
                b->off[k][i] = v ? (ix[0][z] * H + ix[1][y]) * W + ix[2][x] : -1;
                b->w[k][i] = v ? w : 0.0f;
            }
        }
    }
    /* up to the next 16: corners outside, so whole vectors may read them */
    for (int i = nb; i < ((nb + 15) & ~15); i++) {
        for (int k = 0; k < 8; k++) {
            b->off[k][i] = -1;
            b->w[k][i] = 0;
        }
        for (int a = 0; a < 3; a++) b->f[a][0][i] = b->f[a][1][i] = 0;
    }
}

static void gs3_coords_portable(const gs_job *j, const float *gp, int nb, gs3_block *b)
{
    gs3_coords(j, gp, nb, b);
}

/* The grid gradient's sums of plane xc times g (gc) into s[a] (z, y, x):
 * d w[k] / d r_a = +-(the other two factors, x's first), + for the hi
 * corner along a, as the template's fac. */
static void gs3_sums_portable(const float *xc, const float *gc, const gs3_block *b, int nb,
                              float (*s)[GS2_B])
{
    for (int i = 0; i < nb; i++) {
        const float go = gc[i];
        for (int k = 0; k < 8; k++) {
            const int32_t o = b->off[k][i];
            const float v = o >= 0 ? xc[o] : 0.0f;
            const int h[3] = {k >> 2, (k >> 1) & 1, k & 1};
            const float fz = b->f[0][h[0]][i], fy = b->f[1][h[1]][i], fx = b->f[2][h[2]][i];
            const float fac[3] = {fx * fy, fx * fz, fy * fz};
            for (int a = 0; a < 3; a++) {
                const float t = o >= 0 ? v * fac[a] * go : 0.0f;
                s[a][i] = h[a] ? s[a][i] + t : s[a][i] - t;
            }
        }
    }
}

#ifdef GS2_X86
__attribute__((target("avx2"))) static void gs3_coords_avx2(const gs_job *j, const float *gp,
                                                            int nb, gs3_block *b)
{
    gs3_coords(j, gp, nb, b);
}

__attribute__((target("avx512f"))) static void gs3_coords_avx512(const gs_job *j,
                                                                 const float *gp, int nb,
                                                                 gs3_block *b)
{
    gs3_coords(j, gp, nb, b);
}

__attribute__((target("avx512f"))) static void gs3_sums_avx512(const float *xc, const float *gc,
                                                               const gs3_block *b, int nb,
                                                               float (*s)[GS2_B])
{
    const __m512i zi = _mm512_setzero_si512();
    for (int i = 0; i < nb; i += 16) {
        const __mmask16 tail = nb - i >= 16 ? (__mmask16)0xffff
                                            : (__mmask16)((1u << (nb - i)) - 1);
        const __m512 go = _mm512_maskz_loadu_ps(tail, gc + i);
        __m512 acc[3];
        for (int a = 0; a < 3; a++) acc[a] = _mm512_loadu_ps(s[a] + i);
        for (int k = 0; k < 8; k++) {
            const int h[3] = {k >> 2, (k >> 1) & 1, k & 1};
            const __m512i o = _mm512_loadu_si512(b->off[k] + i);
            const __mmask16 in = _mm512_cmpge_epi32_mask(o, zi);
            const __m512 v = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), in, o, xc, 4);
            const __m512 fz = _mm512_loadu_ps(b->f[0][h[0]] + i);
            const __m512 fy = _mm512_loadu_ps(b->f[1][h[1]] + i);
            const __m512 fx = _mm512_loadu_ps(b->f[2][h[2]] + i);
            const __m512 fac[3] = {_mm512_mul_ps(fx, fy), _mm512_mul_ps(fx, fz),
                                   _mm512_mul_ps(fy, fz)};
            for (int a = 0; a < 3; a++) {
                const __m512 t = _mm512_maskz_mul_ps(in, _mm512_mul_ps(v, fac[a]), go);
                acc[a] = h[a] ? _mm512_add_ps(acc[a], t) : _mm512_sub_ps(acc[a], t);
            }
        }
        for (int a = 0; a < 3; a++) _mm512_storeu_ps(s[a] + i, acc[a]);
    }
}
#endif

/* The block's corners by the job's kernel. */
static void gs3_block_of(const gs_job *j, const float *gp, int nb, gs3_block *b)
{
#ifdef GS2_X86
    if (j->level == 2) {
        gs3_coords_avx512(j, gp, nb, b);
        return;
    }
    if (j->level == 1) {
        gs3_coords_avx2(j, gp, nb, b);
        return;
    }
#endif
    gs3_coords_portable(j, gp, nb, b);
}

/* Points [lo, hi) of the flat (N, P) range: out[n, c, p] for every c. */
static void gs3_forward(void *job, int64_t lo, int64_t hi)
{
    const gs_job *j = job;
    const int nk = j->mode == TG_GRID_SAMPLE_NEAREST ? 1 : 8;
    gs3_block b;
    for (int64_t q = lo; q < hi;) {
        const int nb = gs2_count(j, q, hi);
        gs3_block_of(j, (const float *)j->grid + 3 * q, nb, &b);
        gs2_block_forward(j, q, (const int32_t *)b.off, (const float *)b.w, nk, nb);
        q += nb;
    }
}

/* Elements [lo, hi) of (N, groups): d input of sample n's group of
 * channels, dx[o] += w g over the points in order (dx zeroed). */
static void gs3_dinput(void *job, int64_t lo, int64_t hi)
{
    const gs_job *j = job;
    const int64_t P = j->npts, C = j->C, G = j->groups;
    const int nk = j->mode == TG_GRID_SAMPLE_NEAREST ? 1 : 8;
    gs3_block b;
    for (int64_t e = lo; e < hi; e++) {
        const int64_t n = e / G, c0 = e % G * C / G, c1 = (e % G + 1) * C / G;
        for (int64_t q = n * P; q < (n + 1) * P;) {
            const int nb = gs2_count(j, q, (n + 1) * P);
            gs3_block_of(j, (const float *)j->grid + 3 * q, nb, &b);
            gs2_block_dinput(j, q, c0, c1, (const int32_t *)b.off, (const float *)b.w, nk, nb);
            q += nb;
        }
    }
}

/* Points [lo, hi) of the flat (N, P) range: trilinear's d grid, each
 * point's sums over the channels in order. */
static void gs3_dgrid(void *job, int64_t lo, int64_t hi)
{
    const gs_job *j = job;
    const int64_t P = j->npts, C = j->C, plane = j->in_plane;
    gs3_block b;
    for (int64_t q = lo; q < hi;) {
        const int nb = gs2_count(j, q, hi);
        const int64_t n = q / P, p = q % P;
        gs3_block_of(j, (const float *)j->grid + 3 * q, nb, &b);
        float s[3][GS2_B] = {{0}};
        const float *x = (const float *)j->x + n * C * plane;
        const float *g = (const float *)j->g + n * C * P + p;
        for (int64_t c = 0; c < C; c++, x += plane, g += P) {
#ifdef GS2_X86
            if (j->level == 2) {
                gs3_sums_avx512(x, g, &b, nb, s);
                continue;
            }
#endif
            gs3_sums_portable(x, g, &b, nb, s);
        }
        float *dg = (float *)j->dgrid + 3 * q;
        for (int i = 0; i < nb; i++)
            for (int a = 0; a < 3; a++) dg[3 * i + 2 - a] = b.m[a][i] * s[a][i];
        q += nb;
    }
}
