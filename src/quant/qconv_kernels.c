/* src/quant/qconv_kernels.c - integer ConvNd, ConvTransposeNd and Linear on
 * contiguous buffers: tap tables, im2col, the packed int8 GEMM per group,
 * col2im in i32 and requantization.
 *
 * Letters: G groups, cig = c_in/G and cog = c_out/G channels per group,
 * K = kernel taps, S_col = positions on the col side, S_img on the image side.
 * The GEMM's activations are x - zx as i16 (in [-255, 255]): with weights
 * symmetric (zero point 0) that is the real value up to x_scale, a padded
 * position is exactly 0, and no zero-point correction is needed.
 *
 * Work is split into tasks of whole samples (enough rows for the 6-row tiles
 * to be busy), run in parallel; each task owns its output samples, so the
 * result does not depend on the thread count.  Scratch is the thread's
 * grow-only conv workspace (no allocation per call once warm).
 */
#include <math.h>
#include <string.h>


#include "ops/conv_internal.h"
#include "quant/quant_internal.h"

int tg__q_requant_setup(const char *op, tg__q_requant *r, int64_t c_out, const tg_qscales *q,
                        tg_dtype ydt, const float *bias, bool relu)
{
    for (int64_t c = 0; c < c_out; c++) {
        const double ws = q->weight_scales[q->n_weight_scales == 1 ? 0 : c];
        const double acc_scale = q->x_scale * ws;
        tg__q_requant e = {.zp = q->y_zero_point, .hi = tg__q_max(ydt)};
        e.lo = relu ? q->y_zero_point : tg__q_min(ydt);
        if (tg_quant_multiplier(acc_scale / q->y_scale, &e.m0, &e.shift) < 0)
            return tg__error(TG_EINVAL,
                             "%s: x_scale * weight_scale[%lld] / y_scale = %g must lie in "
                             "(0, 2^30)", op, (long long)c, acc_scale / q->y_scale);
        if (bias) {
            double b = rint((double)bias[c] / acc_scale);   /* half to even */
            e.bias = b != b ? 0 : b < INT32_MIN ? INT32_MIN : b > INT32_MAX ? INT32_MAX : (int32_t)b;
        }
        r[c] = e;
    }
    return TG_OK;
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

/* Rows per task: enough samples for ~128 GEMM rows, at most the batch (and
 * at least 1, as it divides). */
static int64_t task_samples(int64_t batch, int64_t rows_per_sample)
{
    int64_t nb = (128 + rows_per_sample - 1) / (rows_per_sample > 0 ? rows_per_sample : 1);
    if (nb > batch) nb = batch;
    return nb < 1 ? 1 : nb;
}

/* x - zx of a u8 or i8 buffer element. */
static inline int16_t centered(const uint8_t *x, int64_t i, bool is_signed, int32_t zx)
{
    return (int16_t)((is_signed ? (int32_t)(int8_t)x[i] : (int32_t)x[i]) - zx);
}

typedef struct q_job {
    const tg__conv_geom *g;
    tg_dtype dt;
    const uint8_t *x;
    int32_t zx;
    const tg_qweight *w;
    const tg__q_requant *r;
    uint8_t *y;
    const int64_t *taps;
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
    const tg__conv_geom *g = j->g;
    const int64_t S = tg__conv_prod3(g->col), K = tg__conv_prod3(g->k), Si = tg__conv_prod3(g->img);
    const int64_t cig = g->c_img / g->groups, cog = g->c_col / g->groups;
    const int64_t nb = b0 + j->nb > g->batch ? g->batch - b0 : j->nb, rows = nb * S;
    const int64_t lda = 2 * j->w->kd2;
    char *scr = tg__conv_scratch(0, (size_t)(rows * lda) * 2 + (size_t)(rows * cog) * 4 + 64);
    if (!scr) return TG_ENOMEM;
    int32_t *acc = (int32_t *)scr;
    int16_t *a = (int16_t *)(acc + rows * cog);
    const bool sg = j->dt == TG_I8;
    for (int64_t gi = 0; gi < g->groups; gi++) {
        for (int64_t bb = 0; bb < nb; bb++) {
            const uint8_t *xg = j->x + ((b0 + bb) * g->c_img + gi * cig) * Si;
            for (int64_t o = 0; o < S; o++) {
                int16_t *ar = a + (bb * S + o) * lda;
                const int64_t *t = j->taps + o * K;
                for (int64_t ci = 0; ci < cig; ci++)
                    for (int64_t k = 0; k < K; k++)
                        ar[ci * K + k] = t[k] < 0 ? 0 : centered(xg, ci * Si + t[k], sg, j->zx);
                for (int64_t e = cig * K; e < lda; e++) ar[e] = 0;
            }
        }
        tg__q_gemm_packed(acc, cog, 0, a, lda, rows, j->w, gi, j->kern);
        for (int64_t bb = 0; bb < nb; bb++)
            for (int64_t co = 0; co < cog; co++) {
                const int64_t c = gi * cog + co;   /* conv: output channel = weight axis 0 */
                const int64_t base = ((b0 + bb) * g->c_col + c) * S;
                for (int64_t o = 0; o < S; o++)
                    tg__q_store(j->y, j->dt, base + o,
                                tg__q_requant_one(acc[(bb * S + o) * cog + co], &j->r[c]));
            }
    }
    return TG_OK;
}

/* Requantizes n accumulators of output channel r into dst (u8 or i8). */
static void requant_row(void *dst, tg_dtype dt, int64_t base, const int32_t *restrict acc,
                        int64_t n, const tg__q_requant *rp)
{
    const tg__q_requant r = *rp;   /* a copy: the byte stores below cannot alias it */
    if (dt == TG_U8) {
        uint8_t *restrict y = (uint8_t *)dst + base;
        for (int64_t i = 0; i < n; i++) y[i] = (uint8_t)tg__q_requant_one(acc[i], &r);
    } else {
        int8_t *restrict y = (int8_t *)dst + base;
        for (int64_t i = 0; i < n; i++) y[i] = (int8_t)tg__q_requant_one(acc[i], &r);
    }
}

/* col2im of one channel of one sample: img (S_img) = sum over (o,k) of
 * cb[o*K + k] at taps[o*K + k] (scattered into an L1-sized row). */
static void col2im_channel(int32_t *restrict img, int64_t Si, const int32_t *restrict cb,
                           const int64_t *restrict taps, int64_t SK)
{
    memset(img, 0, (size_t)Si * sizeof *img);
    for (int64_t e = 0; e < SK; e++)
        if (taps[e] >= 0) img[taps[e]] += cb[e];
}

/* ConvTranspose task `task`, samples b0 = task*nb .. b0+nb: per group
 *   a (nb*S_col, lda) with a[(b,o)][ci] = x[b, gi*cig + ci, o] - zx;
 *   cols (cog, nb*S_col, K) with cols[co][(b,o)][k] = (a * B_gi^T)[(b,o)][(co,k)]
 *   (grouped by channel so one channel's col2im reads one contiguous block;
 *   row-major (rows, N) would put its reads N*4 bytes, often 4 KiB, apart);
 *   img (S_img) = col2im of one (b, co), then y[b, gi*cog + co] = requant(img). */
static int convt_task(void *job, int64_t task)
{
    const q_job *j = job;
    const int64_t b0 = task * j->nb;
    const tg__conv_geom *g = j->g;
    const int64_t S = tg__conv_prod3(g->col), Si = tg__conv_prod3(g->img);
    const int64_t cig = g->c_col / g->groups, cog = g->c_img / g->groups, N = j->w->n;
    const int64_t K = N / cog;
    const int64_t nb = b0 + j->nb > g->batch ? g->batch - b0 : j->nb, rows = nb * S;
    const int64_t lda = 2 * j->w->kd2;
    char *scr = tg__conv_scratch(0, (size_t)(rows * N + Si) * 4 + (size_t)(rows * lda) * 2 + 64);
    if (!scr) return TG_ENOMEM;
    int32_t *cols = (int32_t *)scr, *img = cols + rows * N;
    int16_t *a = (int16_t *)(img + Si);
    const bool sg = j->dt == TG_I8;
    for (int64_t gi = 0; gi < g->groups; gi++) {
        for (int64_t bb = 0; bb < nb; bb++)
            for (int64_t ci = 0; ci < lda; ci++) {
                int16_t *col = a + bb * S * lda + ci;
                if (ci >= cig) {   /* the zero pad column of an odd kd */
                    for (int64_t o = 0; o < S; o++) col[o * lda] = 0;
                    continue;
                }
                const uint8_t *src = j->x + ((b0 + bb) * g->c_col + gi * cig + ci) * S;
                for (int64_t o = 0; o < S; o++) col[o * lda] = centered(src, o, sg, j->zx);
            }
        tg__q_gemm_packed(cols, rows * K, K, a, lda, rows, j->w, gi, j->kern);
        /* Output channel c = gi*cog + co is weight axis 1 index co of group
         * gi, which is exactly r's index. */
        for (int64_t bb = 0; bb < nb; bb++)
            for (int64_t co = 0; co < cog; co++) {
                const int64_t c = gi * cog + co;
                col2im_channel(img, Si, cols + co * rows * K + bb * S * K, j->taps, S * K);
                requant_row(j->y, j->dt, ((b0 + bb) * g->c_img + c) * Si, img, Si, &j->r[c]);
            }
    }
    return TG_OK;
}

static int run_conv_any(bool transpose, const tg__conv_geom *g, tg_dtype dt, const void *x,
                        int32_t zx, const tg_qweight *w, const tg__q_requant *r, void *y)
{
    if (g->batch == 0) return TG_OK;   /* an empty batch: y is empty too */
    int64_t *taps = build_taps(g);
    if (!taps) return TG_ENOMEM;
    q_job j = {.g = g, .dt = dt, .x = x, .zx = zx, .w = w, .r = r, .y = y, .taps = taps,
               .kern = tg_int8_kernel_get(), .nb = task_samples(g->batch, tg__conv_prod3(g->col))};
    /* task t: samples t*nb .. t*nb + nb, one task per thread at a time */
    int rc = tg__run_tasks((g->batch + j.nb - 1) / j.nb, true, transpose ? convt_task : conv_task,
                           &j);
    free(taps);
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
