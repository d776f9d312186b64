/* src/quant/qconv_kernels.c - integer ConvNd, ConvTransposeNd and Linear on
 * contiguous buffers: tap tables, im2col, the packed int8 GEMM per group,
 * col2im in i32 and requantization.
 *
 * Letters: G groups, cig = c_in/G and cog = c_out/G channels per group,
 * K = kernel taps, S_col = positions on the col side, S_img on the image side.
 * The portable and AVX2 GEMMs take the activations as x - zx in i16 (in
 * [-255, 255]): with weights symmetric (zero point 0) that is the real value
 * up to x_scale, a padded position is exactly 0, and no zero-point
 * correction is needed.  The VNNI and AMX GEMMs take them as bytes x + off
 * (u8; see as_u8), a padded position holding zoff, and subtract zoff times
 * the weights' column sums: the same integers.  (The VNNI and AMX
 * ConvTranspose of a large input has no columns: qconvt_phase.c.)
 *
 * Work is split into tasks of whole samples (enough rows for the 6-row tiles
 * to be busy), run in parallel; each task owns its output samples, so the
 * result does not depend on the thread count.  Scratch is the thread's
 * grow-only conv workspace (no allocation per call once warm).
 */
#include <math.h>
#include <stdatomic.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "ops/conv_internal.h"
#include "quant/quant_internal.h"

/* One thread's channels of tg__q_requant_setup; a channel whose multiplier
 * is out of range is noted in *bad (the lowest such channel wins). */
typedef struct setup_job {
    tg__q_requant *r;
    const tg_qscales *q;
    tg_dtype ydt;
    const float *bias;
    bool relu;
    _Atomic int64_t bad;
} setup_job;

static void setup_range(void *p, int64_t c0, int64_t c1)
{
    setup_job *j = p;
    const tg_qscales *q = j->q;
    for (int64_t c = c0; c < c1; c++) {
        const double ws = q->weight_scales[q->n_weight_scales == 1 ? 0 : c];
        const double acc_scale = q->x_scale * ws;
        tg__q_requant e = {.zp = q->y_zero_point, .hi = tg__q_max(j->ydt)};
        e.lo = j->relu ? q->y_zero_point : tg__q_min(j->ydt);
        if (tg_quant_multiplier(acc_scale / q->y_scale, &e.m0, &e.shift) < 0) {
            int64_t seen = atomic_load(&j->bad);
            while (c < seen && !atomic_compare_exchange_weak(&j->bad, &seen, c)) {
            }
            return;
        }
        if (j->bias) {
            double b = rint((double)j->bias[c] / acc_scale);   /* half to even */
            e.bias = b != b ? 0 : b < INT32_MIN ? INT32_MIN : b > INT32_MAX ? INT32_MAX : (int32_t)b;
        }
        j->r[c] = e;
    }
}

int tg__q_requant_setup(const char *op, tg__q_requant *r, int64_t c_out, const tg_qscales *q,
                        tg_dtype ydt, const float *bias, bool relu)
{
    setup_job j = {.r = r, .q = q, .ydt = ydt, .bias = bias, .relu = relu};
    atomic_init(&j.bad, INT64_MAX);
    /* a Linear's thousands of channels over the threads */
    tg__parallel_range(c_out, c_out >= 1024, setup_range, &j);
    const int64_t c = atomic_load(&j.bad);
    if (c == INT64_MAX) return TG_OK;
    const double m = q->x_scale * q->weight_scales[q->n_weight_scales == 1 ? 0 : c] / q->y_scale;
    return tg__error(TG_EINVAL,
                     "%s: x_scale * weight_scale[%lld] / y_scale = %g must lie in (0, 2^30)", op,
                     (long long)c, m);
}

/* taps[o*K + k] = the image position that col position o reads through tap k,
 * i_a = o_a*stride_a - pad_a + k_a*dil_a on each axis, or -1 when outside. */
static int64_t *build_taps(const tg__conv_geom *g)
{
    const int64_t S = tg__conv_prod3(g->col), K = tg__conv_prod3(g->k);
    int64_t *taps = tg__malloc((size_t)(S * K) * sizeof *taps);
    if (!taps) return NULL;
    for (int64_t o = 0; o < S; o++) {
        const int64_t oa[3] = {o / (g->col[1] * g->col[2]), (o / g->col[2]) % g->col[1], o % g->col[2]};
        for (int64_t k = 0; k < K; k++) {
            const int64_t ka[3] = {k / (g->k[1] * g->k[2]), (k / g->k[2]) % g->k[1], k % g->k[2]};
            int64_t idx = 0;
            for (int a = 0; a < 3 && idx >= 0; a++) {
                int64_t i = oa[a] * g->stride[a] - g->pad[a] + ka[a] * g->dil[a];
                idx = (i < 0 || i >= g->img[a]) ? -1 : idx * g->img[a] + i;
            }
            taps[o * K + k] = idx;
        }
    }
    return taps;
}

/* Samples per task: enough for ~128 GEMM rows, but no more than leave two
 * tasks per thread (a batch of 64 one-position samples was one task, run by
 * one thread); at least 1, as it divides. */
static int64_t task_samples(int64_t batch, int64_t rows_per_sample)
{
    int64_t nb = (128 + rows_per_sample - 1) / (rows_per_sample > 0 ? rows_per_sample : 1);
    const int64_t share = (batch + 2 * tg_get_num_threads() - 1) / (2 * tg_get_num_threads());
    if (nb > share) nb = share;
    return nb < 1 ? 1 : nb;
}

/* x - zx of a u8 or i8 buffer element. */
static inline int16_t centered(const uint8_t *x, int64_t i, bool is_signed, int32_t zx)
{
    return (int16_t)((is_signed ? (int32_t)(int8_t)x[i] : (int32_t)x[i]) - zx);
}

/* The transposed conv's col2im works in a "full" image, uncropped: col
 * position o_a through tap k_a lands at o_a*stride_a + k_a*dil_a, always
 * inside it, so no tap needs a bounds test; the output is the window that
 * starts at pad_a (image positions past the full extent, from
 * output_padding, stay 0).  base[o*Kr + kr] is the full-image offset of col
 * position o with tap kr of the leading axes and tap 0 of the last one;
 * that axis's Kl taps then follow at steps of dil_2. */
typedef struct col2im_plan {
    int64_t full[3], fsize;   /* full extent per axis, elements in all */
    int64_t kl, kr;           /* taps on the last axis, on the others */
    int64_t width;            /* col positions on the last axis */
    bool pairs;               /* last axis stride 2, 4 taps, dilation 1 */
    int32_t *base;            /* S_col * kr entries */
} col2im_plan;

static int col2im_plan_make(col2im_plan *pl, const tg__conv_geom *g)
{
    pl->fsize = 1;
    for (int a = 0; a < 3; a++) {
        const int64_t reach = (g->col[a] - 1) * g->stride[a] + (g->k[a] - 1) * g->dil[a] + 1;
        pl->full[a] = reach > g->pad[a] + g->img[a] ? reach : g->pad[a] + g->img[a];
        pl->fsize *= pl->full[a];
    }
    if (pl->fsize > INT32_MAX) return tg__error(TG_EINVAL, "quantized conv_transpose: an "
                                                "output of %lld elements per channel is too large",
                                                (long long)pl->fsize);
    pl->kl = g->k[2];
    pl->kr = g->k[0] * g->k[1];
    pl->width = g->col[2];
    pl->pairs = g->stride[2] == 2 && g->k[2] == 4 && g->dil[2] == 1;
    const int64_t S = tg__conv_prod3(g->col);
    pl->base = tg__malloc((size_t)(S * pl->kr) * sizeof *pl->base + 1);
    if (!pl->base) return TG_ENOMEM;
    for (int64_t o = 0; o < S; o++) {
        const int64_t o0 = o / (g->col[1] * g->col[2]), o1 = (o / g->col[2]) % g->col[1],
                      o2 = o % g->col[2];
        for (int64_t kr = 0; kr < pl->kr; kr++) {
            const int64_t p0 = o0 * g->stride[0] + (kr / g->k[1]) * g->dil[0];
            const int64_t p1 = o1 * g->stride[1] + (kr % g->k[1]) * g->dil[1];
            pl->base[o * pl->kr + kr] =
                (int32_t)((p0 * pl->full[1] + p1) * pl->full[2] + o2 * g->stride[2]);
        }
    }
    return TG_OK;
}

/* One line of col2im_full's stride-2, 4-tap case: d[2m + t] += c[m*K + t]
 * for m < width, t < 4.  Output pair (2m, 2m+1) takes taps 0 and 1 of
 * position m and taps 2 and 3 of position m-1, so each output element is
 * loaded and stored once.  (Adding the four taps straight into d, position
 * by position, reads each vector half-overwritten by the store before it,
 * which store-to-load forwarding cannot serve: the load waits for that store
 * to reach the cache, and col2im ran at half the speed.) */
static void col2im_pairs_line(int32_t *restrict d, const int32_t *restrict c, int64_t width,
                              int64_t K)
{
    int32_t p2 = 0, p3 = 0;   /* taps 2 and 3 of position m-1 */
    for (int64_t m = 0; m < width; m++, c += K) {
        d[2 * m] += c[0] + p2;
        d[2 * m + 1] += c[1] + p3;
        p2 = c[2], p3 = c[3];
    }
    d[2 * width] += p2;
    d[2 * width + 1] += p3;
}

#if defined(__SSE2__)
/* col2im_pairs_line two positions a step: one 4-lane add into d. */
static void col2im_pairs_line_sse2(int32_t *restrict d, const int32_t *restrict c,
                                   int64_t width, int64_t K)
{
    __m128i prev = _mm_setzero_si128();   /* position m-1's taps */
    int64_t m = 0;
    for (; m + 2 <= width; m += 2) {
        const __m128i v0 = _mm_loadu_si128((const __m128i *)(c + m * K));
        const __m128i v1 = _mm_loadu_si128((const __m128i *)(c + (m + 1) * K));
        const __m128i t0 = _mm_add_epi32(v0, _mm_srli_si128(prev, 8));
        const __m128i t1 = _mm_add_epi32(v1, _mm_srli_si128(v0, 8));
        __m128i *dp = (__m128i *)(d + 2 * m);
        _mm_storeu_si128(dp, _mm_add_epi32(_mm_loadu_si128(dp), _mm_unpacklo_epi64(t0, t1)));
        prev = v1;
    }
    if (m < width) {   /* an odd width's last position */
        const __m128i v0 = _mm_loadu_si128((const __m128i *)(c + m * K));
        __m128i *dp = (__m128i *)(d + 2 * m);
        _mm_storel_epi64(
            dp, _mm_add_epi32(_mm_loadl_epi64(dp), _mm_add_epi32(v0, _mm_srli_si128(prev, 8))));
        prev = v0;
        m++;
    }
    __m128i *dp = (__m128i *)(d + 2 * m);
    _mm_storel_epi64(dp, _mm_add_epi32(_mm_loadl_epi64(dp), _mm_srli_si128(prev, 8)));
}
#endif

/* full (fsize) = col2im of one channel of one sample, cb[o*K + k] the
 * GEMM's column for col position o and tap k. */
static void col2im_full(int32_t *restrict full, const col2im_plan *pl, int64_t S, int64_t dl,
                        const int32_t *restrict cb, bool simd)
{
    memset(full, 0, (size_t)pl->fsize * sizeof *full);
    const int64_t kl = pl->kl, kr = pl->kr;
    const int32_t *restrict base = pl->base;
    if (pl->pairs) {   /* line by line: col positions (o0, o1, *) with leading tap kr */
        const int64_t W = pl->width, K = kr * kl;
        void (*line)(int32_t *restrict, const int32_t *restrict, int64_t, int64_t) =
            col2im_pairs_line;
#if defined(__SSE2__)
        if (simd) line = col2im_pairs_line_sse2;
#endif
        (void)simd;
        for (int64_t o = 0; o < S; o += W)
            for (int64_t r = 0; r < kr; r++)
                line(full + base[o * kr + r], cb + o * K + r * kl, W, K);
        return;
    }
    if (dl == 1 && kl % 4 == 0) {   /* runs of 4 adjacent taps: one vector add each */
        for (int64_t e = 0; e < S * kr; e++, cb += kl)
            for (int64_t t = 0; t < kl; t += 4) {
                int32_t *restrict d = full + base[e] + t;
                d[0] += cb[t], d[1] += cb[t + 1], d[2] += cb[t + 2], d[3] += cb[t + 3];
            }
        return;
    }
    for (int64_t e = 0; e < S * kr; e++, cb += kl)
        for (int64_t t = 0; t < kl; t++) full[base[e] + t * dl] += cb[t];
}

/* The VNNI path's u8 activations: x + off with off = zx (u8 x) or zx + 128
 * (i8 x, top bit flipped), so that (x + off) - zoff = x - zx for
 * zoff = off_zero(...) and a padded position holds zoff. */
static inline uint8_t as_u8(const uint8_t *x, int64_t i, bool is_signed)
{
    return is_signed ? (uint8_t)(x[i] ^ 0x80) : x[i];
}
static inline int32_t off_zero(bool is_signed, int32_t zx) { return is_signed ? zx + 128 : zx; }

/* The u8 activations' rows, rounded up for the AMX tiles (which read 32
 * rows at a time); the extra rows are zeroed and never stored. */
static inline int64_t padded_rows(int64_t rows)
{
    return (rows + TG__Q_AMX_ROWS - 1) / TG__Q_AMX_ROWS * TG__Q_AMX_ROWS;
}

static void gemm_u8(tg_int8_kernel kern, int32_t *c, int64_t ldc, int64_t kgrp, uint8_t *a,
                    int64_t lda, int64_t m, const tg_qweight *w, int64_t gi, int32_t zoff)
{
    if (kern == TG_INT8_KERNEL_AMX && m >= TG__Q_AMX_ROWS) {   /* fewer rows: VNNI is faster */
        memset(a + m * lda, 0, (size_t)((padded_rows(m) - m) * lda));
        tg__q_gemm_amx(c, ldc, kgrp, a, lda, m, w, gi, zoff);
    } else {
        tg__q_gemm_vnni(c, ldc, kgrp, a, lda, m, w, gi, zoff);
    }
}

typedef struct q_job {
    tg__q_operands op;
    const int64_t *taps;        /* conv */
    const col2im_plan *plan;    /* conv_transpose */
    tg_int8_kernel kern;
    int64_t nb;   /* samples per task */
} q_job;

/* Conv task `task`, samples b0 = task*nb .. b0+nb: per group
 *   a (nb*S_col, lda) with a[(b,o)][(ci,k)] = x[b, gi*cig+ci, taps[o,k]] - zx (0 outside);
 *   acc (nb*S_col, cog) = a * B_gi^T;  y[b, gi*cog+co, o] = requant(acc[(b,o)][co]). */
static int conv_task(void *job, int64_t task)
{
    const q_job *j = job;
    const int64_t b0 = task * j->nb;
    const tg__conv_geom *g = j->op.g;
    const int64_t S = tg__conv_prod3(g->col), K = tg__conv_prod3(g->k), Si = tg__conv_prod3(g->img);
    const int64_t cig = g->c_img / g->groups, cog = g->c_col / g->groups;
    const int64_t nb = b0 + j->nb > g->batch ? g->batch - b0 : j->nb, rows = nb * S;
    const bool vnni = j->kern >= TG_INT8_KERNEL_VNNI;   /* u8 activations */
    const int64_t lda = vnni ? 4 * j->op.w->kqp : 2 * j->op.w->kd2;   /* elements */
    const int64_t arows = vnni ? padded_rows(rows) : rows;
    char *scr = tg__conv_scratch(0, (size_t)(arows * lda) * (vnni ? 1 : 2) +
                                        (size_t)(rows * cog) * 4 + 64);
    if (!scr) return TG_ENOMEM;
    int32_t *acc = (int32_t *)scr;
    int16_t *a = (int16_t *)(acc + rows * cog);
    uint8_t *a8 = (uint8_t *)(acc + rows * cog);
    const bool sg = j->op.dt == TG_I8;
    const int32_t zoff = off_zero(sg, j->op.zx);
    for (int64_t gi = 0; gi < g->groups; gi++) {
        for (int64_t bb = 0; bb < nb; bb++) {
            const uint8_t *xg = j->op.x + ((b0 + bb) * g->c_img + gi * cig) * Si;
            for (int64_t o = 0; o < S; o++) {
                const int64_t *t = j->taps + o * K, row = (bb * S + o) * lda;
                for (int64_t ci = 0; ci < cig; ci++)
                    for (int64_t k = 0; k < K; k++) {   /* the branch on vnni is unswitched */
                        const int64_t e = row + ci * K + k, at = ci * Si + t[k];
                        if (vnni) a8[e] = t[k] < 0 ? (uint8_t)zoff : as_u8(xg, at, sg);
                        else a[e] = t[k] < 0 ? 0 : centered(xg, at, sg, j->op.zx);
                    }
                for (int64_t e = row + cig * K; e < row + lda; e++) {
                    if (vnni) a8[e] = 0;
                    else a[e] = 0;
                }
            }
        }
        if (vnni) gemm_u8(j->kern, acc, cog, 0, a8, lda, rows, j->op.w, gi, zoff);
        else tg__q_gemm_packed(acc, cog, 0, a, lda, rows, j->op.w, gi, j->kern);
        /* Linear, 1x1 outputs: a channel per lane */
        const bool lanes = S == 1 && j->kern >= TG_INT8_KERNEL_AVX2;
        if (lanes)   /* each channel's parameters gathered once for the nb rows */
            (vnni ? tg__q_requant_channels_avx512 : tg__q_requant_channels_avx2)(
                j->op.y + b0 * g->c_col + gi * cog, g->c_col, acc, cog, nb, cog,
                j->op.r + gi * cog);
        for (int64_t bb = 0; !lanes && bb < nb; bb++)
            for (int64_t co = 0; co < cog; co++) {
                const int64_t c = gi * cog + co;   /* conv: output channel = weight axis 0 */
                const int64_t base = ((b0 + bb) * g->c_col + c) * S;
                for (int64_t o = 0; o < S; o++)
                    tg__q_store(j->op.y, j->op.dt, base + o,
                                tg__q_requant_one(acc[(bb * S + o) * cog + co], &j->op.r[c]));
            }
    }
    return TG_OK;
}

/* Row i by r[i * rs] (rs 0 or 1). */
static void requant_runs(void *dst, tg_dtype dt, int64_t base, int64_t ds,
                         const int32_t *restrict src, int64_t rows, int64_t cols, int64_t ss,
                         const tg__q_requant *r, int64_t rs, tg_int8_kernel kern)
{
    if (rs == 0 && ss == cols && ds == cols) cols *= rows, rows = 1;   /* one run */
    if (kern >= TG_INT8_KERNEL_VNNI) {
        tg__q_requant_avx512((uint8_t *)dst + base, ds, src, rows, cols, ss, r, rs);
        return;
    }
    if (kern == TG_INT8_KERNEL_AVX2) {
        tg__q_requant_avx2((uint8_t *)dst + base, dt == TG_I8, ds, src, rows, cols, ss, r, rs);
        return;
    }
    for (int64_t i = 0; i < rows; i++, src += ss, base += ds) {
        const tg__q_requant ri = r[i * rs];   /* a copy: the byte stores cannot alias it */
        if (dt == TG_U8) {
            uint8_t *restrict y = (uint8_t *)dst + base;
            for (int64_t e = 0; e < cols; e++) y[e] = (uint8_t)tg__q_requant_one(src[e], &ri);
        } else {
            int8_t *restrict y = (int8_t *)dst + base;
            for (int64_t e = 0; e < cols; e++) y[e] = (int8_t)tg__q_requant_one(src[e], &ri);
        }
    }
}

void tg__q_requant_rows(void *dst, tg_dtype dt, int64_t base, int64_t ds,
                        const int32_t *restrict src, int64_t rows, int64_t cols, int64_t ss,
                        const tg__q_requant *rp, tg_int8_kernel kern)
{
    requant_runs(dst, dt, base, ds, src, rows, cols, ss, rp, 0, kern);
}

void tg__q_requant_channel_rows(void *dst, tg_dtype dt, int64_t base, int64_t ds,
                                const int32_t *restrict src, int64_t rows, int64_t cols,
                                int64_t ss, const tg__q_requant *r, tg_int8_kernel kern)
{
    requant_runs(dst, dt, base, ds, src, rows, cols, ss, r, 1, kern);
}

/* ConvTranspose task `task`, samples b0 = task*nb .. b0+nb: per group
 *   a (nb*S_col, lda) with a[(b,o)][ci] = x[b, gi*cig + ci, o] - zx;
 *   cols (cog, nb*S_col, K) with cols[co][(b,o)][k] = (a * B_gi^T)[(b,o)][(co,k)]
 *   (grouped by channel so one channel's col2im reads one contiguous block;
 *   row-major (rows, N) would put its reads N*4 bytes, often 4 KiB, apart);
 *   full = col2im of one (b, co) (col2im_full), then y[b, gi*cog + co] =
 *   requant of its window, row by row. */
static int convt_task(void *job, int64_t task)
{
    const q_job *j = job;
    const int64_t b0 = task * j->nb;
    const tg__conv_geom *g = j->op.g;
    const int64_t S = tg__conv_prod3(g->col), Si = tg__conv_prod3(g->img);
    const int64_t cig = g->c_col / g->groups, cog = g->c_img / g->groups, N = j->op.w->n;
    const int64_t K = N / cog;
    const int64_t nb = b0 + j->nb > g->batch ? g->batch - b0 : j->nb, rows = nb * S;
    const bool vnni = j->kern >= TG_INT8_KERNEL_VNNI;   /* u8 activations */
    const int64_t lda = vnni ? 4 * j->op.w->kqp : 2 * j->op.w->kd2;   /* elements */
    const int64_t arows = vnni ? padded_rows(rows) : rows;
    const col2im_plan *pl = j->plan;
    char *scr = tg__conv_scratch(0, (size_t)(rows * N + pl->fsize) * 4 +
                                        (size_t)(arows * lda) * (vnni ? 1 : 2) + 64);
    if (!scr) return TG_ENOMEM;
    int32_t *cols = (int32_t *)scr, *full = cols + rows * N;
    int16_t *a = (int16_t *)(full + pl->fsize);
    uint8_t *a8 = (uint8_t *)(full + pl->fsize);
    const bool sg = j->op.dt == TG_I8;
    const int32_t zoff = off_zero(sg, j->op.zx);
    for (int64_t gi = 0; gi < g->groups; gi++) {
        for (int64_t bb = 0; vnni && bb < nb; bb++) {
            /* row o gathers byte o of the cig channel planes: the planes'
             * current cache lines (cig of them) serve 64 rows in a row */
            const uint8_t *src = j->op.x + ((b0 + bb) * g->c_col + gi * cig) * S;
            const uint8_t flip = sg ? 0x80 : 0;
            for (int64_t o = 0; o < S; o++) {
                uint8_t *row = a8 + (bb * S + o) * lda;
                for (int64_t ci = 0; ci < cig; ci++) row[ci] = src[ci * S + o] ^ flip;
                memset(row + cig, 0, (size_t)(lda - cig));
            }
        }
        for (int64_t bb = 0; !vnni && bb < nb; bb++) {   /* rows gathered, as above */
            const uint8_t *src = j->op.x + ((b0 + bb) * g->c_col + gi * cig) * S;
            for (int64_t o = 0; o < S; o++) {
                int16_t *row = a + (bb * S + o) * lda;
                for (int64_t ci = 0; ci < cig; ci++)
                    row[ci] = centered(src, ci * S + o, sg, j->op.zx);
                for (int64_t ci = cig; ci < lda; ci++) row[ci] = 0;   /* an odd kd's pad */
            }
        }
        if (vnni) gemm_u8(j->kern, cols, rows * K, K, a8, lda, rows, j->op.w, gi, zoff);
        else tg__q_gemm_packed(cols, rows * K, K, a, lda, rows, j->op.w, gi, j->kern);
        /* Output channel c = gi*cog + co is weight axis 1 index co of group
         * gi, which is exactly r's index.  With one col position whose taps
         * are the whole output in order (the first layer of a DCGAN
         * generator, 1x1 -> KxK), there is no col2im at all. */
        const bool direct = S == 1 && pl->fsize == K && Si == K;
        for (int64_t co = 0; direct && co < cog; co++)   /* every sample's K taps in one call */
            tg__q_requant_rows(j->op.y, j->op.dt, (b0 * g->c_img + gi * cog + co) * Si,
                               g->c_img * Si, cols + co * rows * K, nb, K, K,
                               &j->op.r[gi * cog + co], j->kern);
        for (int64_t bb = 0; !direct && bb < nb; bb++)
            for (int64_t co = 0; co < cog; co++) {
                const int64_t c = gi * cog + co;
                const int64_t ybase = ((b0 + bb) * g->c_img + c) * Si;
                col2im_full(full, pl, S, g->dil[2], cols + co * rows * K + bb * S * K,
                            j->kern != TG_INT8_KERNEL_PORTABLE);
                for (int64_t i0 = 0; i0 < g->img[0]; i0++) {   /* window rows i1 of plane i0 */
                    const int32_t *src = full + ((i0 + g->pad[0]) * pl->full[1] + g->pad[1]) *
                                                    pl->full[2] + g->pad[2];
                    tg__q_requant_rows(j->op.y, j->op.dt, ybase + i0 * g->img[1] * g->img[2],
                                       g->img[2], src, g->img[1], g->img[2], pl->full[2],
                                       &j->op.r[c], j->kern);
                }
            }
    }
    return TG_OK;
}

static int run_conv_any(bool transpose, const tg__conv_geom *g, tg_dtype dt, const void *x,
                        int32_t zx, const tg_qweight *w, const tg__q_requant *r, void *y)
{
    if (g->batch == 0) return TG_OK;   /* an empty batch: y is empty too */
    const tg_int8_kernel kern = tg_int8_kernel_get();
    if (transpose && kern >= TG_INT8_KERNEL_AVX2 && tg__q_convt_phase_fits(g, w, kern))
        return tg__q_convt_phase(g, dt, x, zx, w, r, y, kern);
    int64_t *taps = NULL;
    col2im_plan plan = {0};
    if (transpose) TG_TRY(col2im_plan_make(&plan, g));
    else if (!(taps = build_taps(g))) return TG_ENOMEM;
    q_job j = {.op = {.g = g, .dt = dt, .x = x, .zx = zx, .w = w, .r = r, .y = y}, .taps = taps,
               .plan = &plan, .kern = kern,
               .nb = task_samples(g->batch, tg__conv_prod3(g->col))};
    /* task t: samples t*nb .. t*nb + nb, one task per thread at a time */
    int rc = tg__run_tasks((g->batch + j.nb - 1) / j.nb, true, transpose ? convt_task : conv_task,
                           &j);
    free(taps);
    free(plan.base);
    return rc;
}

int tg__q_conv_raw(const tg__conv_geom *g, tg_dtype dt, const void *x, int32_t zx,
                   const tg_qweight *w, const tg__q_requant *r, void *y)
{
    return run_conv_any(false, g, dt, x, zx, w, r, y);
}

int tg__q_conv_transpose_raw(const tg__conv_geom *g, tg_dtype dt, const void *x, int32_t zx,
                             const tg_qweight *w, const tg__q_requant *r, void *y)
{
    return run_conv_any(true, g, dt, x, zx, w, r, y);
}

/* Linear as a 1x1 conv over m "samples" of one position: the same tasks. */
int tg__q_linear_raw(tg_dtype dt, const void *x, int32_t zx, int64_t m, const tg_qweight *w,
                     const tg__q_requant *r, void *y)
{
    tg__conv_geom g = {.nsp = 1, .batch = m, .groups = 1, .c_img = w->kd, .c_col = w->n,
                       .img = {1, 1, 1}, .col = {1, 1, 1}, .k = {1, 1, 1},
                       .stride = {1, 1, 1}, .dil = {1, 1, 1}};
    return run_conv_any(false, &g, dt, x, zx, w, r, y);
}
