/* src/ops/grid_sample_cubic.h - grid_sample's 2-D f32 bicubic kernels,
 * included by grid_sample.c after grid_sample_2d.h (whose blocks of GS2_B
 * points, gs2_reflect, gs2_count and kernel levels they share).
 *
 * A block's 4 x 4 taps per point are found once: the tap rows y0 - 1 .. y0 + 2
 * and columns x0 - 1 .. x0 + 2 (x0, y0 the floors of the unpadded
 * position) each go through the padding mode and torch's truncation, as
 * the template's gs_tap, in loops over the points (reflection as
 * gs2_reflect, the farther taps by gs_pad_f32), and a tap outside gets
 * offset -1.  Then every channel reads its plane at the 16 offsets:
 *   forward   row r = v0 cx0 + v1 cx1 + v2 cx2 + v3 cx3 (left to right), and
 *             out = row0 cy0 + row1 cy1 + row2 cy2 + row3 cy3, a tap outside
 *             reading 0, as the template
 *   d grid    sx -= v gx[a] cy[b] g and sy -= v gy[b] cx[a] g over the
 *             channels, then columns a, then rows b; a tap outside
 *             subtracts +0, which leaves any sum as it is (the template
 *             skips it)
 *   d input   dx[o] += g cx[a] cy[b], per plane in the points' order, then
 *             columns, then rows
 * so every kernel gives the template's bits: portable (plain C), avx2
 * (8 points per vpgatherdps), avx512 (16).  No fused multiply-adds (see
 * grid_sample_2d.h). */

/* A block's taps and Keys's weights. */
typedef struct gs2c_block {
    int32_t off[16][GS2_B];   /* tap (row b, column a) at 4 b + a; -1 outside */
    float cx[4][GS2_B], cy[4][GS2_B];   /* weights along x and y */
    float gx[4][GS2_B], gy[4][GS2_B];   /* their derivatives, negated (gs_cubic_grad) */
} gs2c_block;

/* Tap positions t[i] (integral, or inf / NaN) padded in place and
 * truncated: the index along an axis of the given size, or -1 outside. */
static inline __attribute__((always_inline)) void gs2c_index(float *t, int32_t *idx, int nb,
                                                             int64_t size, int pad, bool align)
{
    const float hi = (float)(size - 1), sf = (float)size;
    if (pad == TG_GRID_SAMPLE_BORDER) {
        for (int i = 0; i < nb; i++) t[i] = !(t[i] > 0) ? 0.0f : t[i] >= hi ? hi : t[i];
    } else if (pad == TG_GRID_SAMPLE_REFLECTION) {
        float orig[GS2_B], m[GS2_B];
        unsigned char slow[GS2_B];
        for (int i = 0; i < nb; i++) {
            orig[i] = t[i];
            m[i] = 1;
        }
        gs2_reflect(t, m, nb, size, align, slow);
        for (int i = 0; i < nb; i++) {
            float d = 1;
            if (slow[i]) t[i] = gs_pad_f32(orig[i], size, pad, align, &d);
        }
    }
    for (int i = 0; i < nb; i++) {
        const float p = truncf(t[i]);
        const bool v = (p >= 0) & (p < sf);
        idx[i] = v ? (int32_t)p : -1;
    }
}

/* The block's taps and weights for nb points (grid pairs gp). */
static inline __attribute__((always_inline)) void gs2c_coords(const gs_job *j, const float *gp,
                                                              int nb, gs2c_block *b)
{
    const int64_t H = j->in[0], W = j->in[1];
    float x0[GS2_B], y0[GS2_B];
    for (int i = 0; i < nb; i++) {
        float m;
        const float rx = gs_unnormalize_f32(gp[2 * i], W, j->align, &m);
        const float ry = gs_unnormalize_f32(gp[2 * i + 1], H, j->align, &m);
        float c[4], g[4];
        x0[i] = floorf(rx);
        y0[i] = floorf(ry);
        gs_cubic_f32(c, rx - x0[i]);
        gs_cubic_grad_f32(g, rx - x0[i]);
        for (int a = 0; a < 4; a++) {
            b->cx[a][i] = c[a];
            b->gx[a][i] = g[a];
        }
        gs_cubic_f32(c, ry - y0[i]);
        gs_cubic_grad_f32(g, ry - y0[i]);
        for (int a = 0; a < 4; a++) {
            b->cy[a][i] = c[a];
            b->gy[a][i] = g[a];
        }
    }
    int32_t ix[4][GS2_B], iy[4][GS2_B];
    for (int a = 0; a < 4; a++) {
        float t[GS2_B];
        for (int i = 0; i < nb; i++) t[i] = x0[i] - 1 + (float)a;
        gs2c_index(t, ix[a], nb, W, j->pad, j->align);
        for (int i = 0; i < nb; i++) t[i] = y0[i] - 1 + (float)a;
        gs2c_index(t, iy[a], nb, H, j->pad, j->align);
    }
    const int32_t w = (int32_t)W;
    for (int r = 0; r < 4; r++)
        for (int a = 0; a < 4; a++)
            for (int i = 0; i < nb; i++)
                b->off[4 * r + a][i] = ((iy[r][i] >= 0) & (ix[a][i] >= 0)) ? iy[r][i] * w + ix[a][i]
                                                                             : -1;
    /* up to the next 16: taps outside and weights 0, for whole vectors */
    for (int i = nb; i < ((nb + 15) & ~15); i++) {
        for (int k = 0; k < 16; k++) b->off[k][i] = -1;
        for (int a = 0; a < 4; a++) b->cx[a][i] = b->cy[a][i] = b->gx[a][i] = b->gy[a][i] = 0;
    }
}

static void gs2c_coords_portable(const gs_job *j, const float *gp, int nb, gs2c_block *b)
{
    gs2c_coords(j, gp, nb, b);
}

/* Plane xc's bicubic values at the block's points: yc[i] for i < nb. */
static void gs2c_chan_portable(const float *xc, float *yc, const gs2c_block *b, int nb)
{
    for (int i = 0; i < nb; i++) {
        float row[4];
        for (int r = 0; r < 4; r++) {
            float v[4];
            for (int a = 0; a < 4; a++) {
                const int32_t o = b->off[4 * r + a][i];
                v[a] = o >= 0 ? xc[o] : 0.0f;
            }
            row[r] = v[0] * b->cx[0][i] + v[1] * b->cx[1][i] + v[2] * b->cx[2][i] +
                     v[3] * b->cx[3][i];
        }
        yc[i] = row[0] * b->cy[0][i] + row[1] * b->cy[1][i] + row[2] * b->cy[2][i] +
                row[3] * b->cy[3][i];
    }
}

/* The grid gradient's sums of plane xc times g (gc) into sx, sy. */
static void gs2c_sums_portable(const float *xc, const float *gc, const gs2c_block *b, int nb,
                               float *sx, float *sy)
{
    for (int i = 0; i < nb; i++) {
        const float go = gc[i];
        for (int a = 0; a < 4; a++)
            for (int r = 0; r < 4; r++) {
                const int32_t o = b->off[4 * r + a][i];
                const float v = o >= 0 ? xc[o] : 0.0f;
                sx[i] -= o >= 0 ? v * b->gx[a][i] * b->cy[r][i] * go : 0.0f;
                sy[i] -= o >= 0 ? v * b->gy[r][i] * b->cx[a][i] * go : 0.0f;
            }
    }
}

#ifdef GS2_X86
__attribute__((target("avx2"))) static void gs2c_coords_avx2(const gs_job *j, const float *gp,
                                                             int nb, gs2c_block *b)
{
    gs2c_coords(j, gp, nb, b);
}

__attribute__((target("avx512f"))) static void gs2c_coords_avx512(const gs_job *j,
                                                                  const float *gp, int nb,
                                                                  gs2c_block *b)
{
    gs2c_coords(j, gp, nb, b);
}

/* 8 values of plane xc at offsets o (0 where o < 0). */
__attribute__((target("avx2"))) static inline __m256 gs2c_gather8(const float *xc, __m256i o)
{
    const __m256 in = _mm256_castsi256_ps(_mm256_cmpgt_epi32(o, _mm256_set1_epi32(-1)));
    return _mm256_mask_i32gather_ps(_mm256_setzero_ps(), xc, o, in, 4);
}

__attribute__((target("avx2"))) static void gs2c_chan_avx2(const float *xc, float *yc,
                                                           const gs2c_block *b, int nb)
{
    for (int i = 0; i < nb; i += 8) {
        __m256 acc = _mm256_setzero_ps();
        for (int r = 0; r < 4; r++) {
            __m256 row = _mm256_setzero_ps();
            for (int a = 0; a < 4; a++) {
                const __m256 v = gs2c_gather8(xc, _mm256_loadu_si256((const __m256i *)
                                                                     (b->off[4 * r + a] + i)));
                const __m256 t = _mm256_mul_ps(v, _mm256_loadu_ps(b->cx[a] + i));
                row = a == 0 ? t : _mm256_add_ps(row, t);
            }
            const __m256 t = _mm256_mul_ps(row, _mm256_loadu_ps(b->cy[r] + i));
            acc = r == 0 ? t : _mm256_add_ps(acc, t);
        }
        if (nb - i >= 8) {
            _mm256_storeu_ps(yc + i, acc);
        } else {
            float tmp[8];
            _mm256_storeu_ps(tmp, acc);
            for (int k = 0; k < nb - i; k++) yc[i + k] = tmp[k];
        }
    }
}

__attribute__((target("avx2"))) static void gs2c_sums_avx2(const float *xc, const float *gc,
                                                           const gs2c_block *b, int nb,
                                                           float *sx, float *sy)
{
    for (int i = 0; i < nb; i += 8) {
        float gt[8] = {0};
        for (int k = 0; k < 8 && i + k < nb; k++) gt[k] = gc[i + k];
        const __m256 go = _mm256_loadu_ps(gt);
        __m256 ax = _mm256_loadu_ps(sx + i), ay = _mm256_loadu_ps(sy + i);
        for (int a = 0; a < 4; a++)
            for (int r = 0; r < 4; r++) {
                const __m256i o = _mm256_loadu_si256((const __m256i *)(b->off[4 * r + a] + i));
                const __m256 in = _mm256_castsi256_ps(_mm256_cmpgt_epi32(o, _mm256_set1_epi32(-1)));
                const __m256 v = _mm256_mask_i32gather_ps(_mm256_setzero_ps(), xc, o, in, 4);
                const __m256 tx = _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(
                    v, _mm256_loadu_ps(b->gx[a] + i)), _mm256_loadu_ps(b->cy[r] + i)), go);
                const __m256 ty = _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(
                    v, _mm256_loadu_ps(b->gy[r] + i)), _mm256_loadu_ps(b->cx[a] + i)), go);
                ax = _mm256_sub_ps(ax, _mm256_and_ps(in, tx));
                ay = _mm256_sub_ps(ay, _mm256_and_ps(in, ty));
            }
        _mm256_storeu_ps(sx + i, ax);
        _mm256_storeu_ps(sy + i, ay);
    }
}

__attribute__((target("avx512f"))) static void gs2c_chan_avx512(const float *xc, float *yc,
                                                                const gs2c_block *b, int nb)
{
    const __m512i zi = _mm512_setzero_si512();
    for (int i = 0; i < nb; i += 16) {
        const __mmask16 tail = nb - i >= 16 ? (__mmask16)0xffff
                                            : (__mmask16)((1u << (nb - i)) - 1);
        __m512 acc = _mm512_setzero_ps();
        for (int r = 0; r < 4; r++) {
            __m512 row = _mm512_setzero_ps();
            for (int a = 0; a < 4; a++) {
                const __m512i o = _mm512_loadu_si512(b->off[4 * r + a] + i);
                const __mmask16 in = _mm512_cmpge_epi32_mask(o, zi);
                const __m512 v = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), in, o, xc, 4);
                const __m512 t = _mm512_mul_ps(v, _mm512_loadu_ps(b->cx[a] + i));
                row = a == 0 ? t : _mm512_add_ps(row, t);
            }
            const __m512 t = _mm512_mul_ps(row, _mm512_loadu_ps(b->cy[r] + i));
            acc = r == 0 ? t : _mm512_add_ps(acc, t);
        }
        _mm512_mask_storeu_ps(yc + i, tail, acc);
    }
}

__attribute__((target("avx512f"))) static void gs2c_sums_avx512(const float *xc,
                                                                const float *gc,
                                                                const gs2c_block *b, int nb,
                                                                float *sx, float *sy)
{
    const __m512i zi = _mm512_setzero_si512();
    for (int i = 0; i < nb; i += 16) {
        const __mmask16 tail = nb - i >= 16 ? (__mmask16)0xffff
                                            : (__mmask16)((1u << (nb - i)) - 1);
        const __m512 go = _mm512_maskz_loadu_ps(tail, gc + i);
        __m512 ax = _mm512_loadu_ps(sx + i), ay = _mm512_loadu_ps(sy + i);
        for (int a = 0; a < 4; a++)
            for (int r = 0; r < 4; r++) {
                const __m512i o = _mm512_loadu_si512(b->off[4 * r + a] + i);
                const __mmask16 in = _mm512_cmpge_epi32_mask(o, zi);
                const __m512 v = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), in, o, xc, 4);
                const __m512 tx = _mm512_maskz_mul_ps(in, _mm512_mul_ps(_mm512_mul_ps(
                    v, _mm512_loadu_ps(b->gx[a] + i)), _mm512_loadu_ps(b->cy[r] + i)), go);
                const __m512 ty = _mm512_maskz_mul_ps(in, _mm512_mul_ps(_mm512_mul_ps(
                    v, _mm512_loadu_ps(b->gy[r] + i)), _mm512_loadu_ps(b->cx[a] + i)), go);
                ax = _mm512_sub_ps(ax, tx);
                ay = _mm512_sub_ps(ay, ty);
            }
        _mm512_storeu_ps(sx + i, ax);
        _mm512_storeu_ps(sy + i, ay);
    }
}
#endif

/* The block's taps by the job's kernel. */
static void gs2c_block_of(const gs_job *j, const float *gp, int nb, gs2c_block *b)
{
#ifdef GS2_X86
    if (j->level == 2) {
        gs2c_coords_avx512(j, gp, nb, b);
        return;
    }
    if (j->level == 1) {
        gs2c_coords_avx2(j, gp, nb, b);
        return;
    }
#endif
    gs2c_coords_portable(j, gp, nb, b);
}

/* Points [lo, hi) of the flat (N, P) range: out[n, c, p] for every c. */
static void gs2c_forward(void *job, int64_t lo, int64_t hi)
{
    const gs_job *j = job;
    const int64_t P = j->npts, C = j->C, plane = j->in_plane;
    gs2c_block b;
    for (int64_t q = lo; q < hi;) {
        const int nb = gs2_count(j, q, hi);
        const int64_t n = q / P, p = q % P;
        gs2c_block_of(j, (const float *)j->grid + 2 * q, nb, &b);
        const float *x = (const float *)j->x + n * C * plane;
        float *y = (float *)j->y + n * C * P + p;
        for (int64_t c = 0; c < C; c++, x += plane, y += P) {
#ifdef GS2_X86
            if (j->level == 2) {
                gs2c_chan_avx512(x, y, &b, nb);
                continue;
            }
            if (j->level == 1) {
                gs2c_chan_avx2(x, y, &b, nb);
                continue;
            }
#endif
            gs2c_chan_portable(x, y, &b, nb);
        }
        q += nb;
    }
}

/* Elements [lo, hi) of (N, groups): d input of sample n's group of
 * channels (dx zeroed). */
static void gs2c_dinput(void *job, int64_t lo, int64_t hi)
{
    const gs_job *j = job;
    const int64_t P = j->npts, C = j->C, plane = j->in_plane, G = j->groups;
    gs2c_block b;
    for (int64_t e = lo; e < hi; e++) {
        const int64_t n = e / G, c0 = e % G * C / G, c1 = (e % G + 1) * C / G;
        for (int64_t q = n * P; q < (n + 1) * P;) {
            const int nb = gs2_count(j, q, (n + 1) * P);
            gs2c_block_of(j, (const float *)j->grid + 2 * q, nb, &b);
            for (int64_t c = c0; c < c1; c++) {
                float *dx = (float *)j->dx + (n * C + c) * plane;
                const float *g = (const float *)j->g + (n * C + c) * P + q % P;
                for (int i = 0; i < nb; i++)
                    for (int a = 0; a < 4; a++)
                        for (int r = 0; r < 4; r++) {
                            const int32_t o = b.off[4 * r + a][i];
                            if (o >= 0) dx[o] += g[i] * b.cx[a][i] * b.cy[r][i];
                        }
            }
            q += nb;
        }
    }
}

/* Points [lo, hi) of the flat (N, P) range: d grid, each point's sums over
 * the channels in order, times d position / d grid coordinate. */
static void gs2c_dgrid(void *job, int64_t lo, int64_t hi)
{
    const gs_job *j = job;
    const int64_t P = j->npts, C = j->C, plane = j->in_plane;
    float mx, my;
    gs_unnormalize_f32(0, j->in[1], j->align, &mx);
    gs_unnormalize_f32(0, j->in[0], j->align, &my);
    gs2c_block b;
    for (int64_t q = lo; q < hi;) {
        const int nb = gs2_count(j, q, hi);
        const int64_t n = q / P, p = q % P;
        gs2c_block_of(j, (const float *)j->grid + 2 * q, nb, &b);
        float sx[GS2_B] = {0}, sy[GS2_B] = {0};
        const float *x = (const float *)j->x + n * C * plane;
        const float *g = (const float *)j->g + n * C * P + p;
        for (int64_t c = 0; c < C; c++, x += plane, g += P) {
#ifdef GS2_X86
            if (j->level == 2) {
                gs2c_sums_avx512(x, g, &b, nb, sx, sy);
                continue;
            }
            if (j->level == 1) {
                gs2c_sums_avx2(x, g, &b, nb, sx, sy);
                continue;
            }
#endif
            gs2c_sums_portable(x, g, &b, nb, sx, sy);
        }
        float *dg = (float *)j->dgrid + 2 * q;
        for (int i = 0; i < nb; i++) {
            dg[2 * i] = mx * sx[i];
            dg[2 * i + 1] = my * sy[i];
        }
        q += nb;
    }
}
