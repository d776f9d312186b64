/* src/quant/qconv_kernels.c - integer ConvNd and ConvTransposeNd on
 * contiguous buffers: tap tables, im2col with the zero point as padding,
 * the int8 GEMM per group, col2im in i32 and requantization.
 *
 * Letters: G groups, cig = c_in/G and cog = c_out/G channels per group,
 * K = kernel taps, S_col = positions on the col side, S_img on the image side.
 * The zero point of x is folded out of the GEMM: with weights symmetric (zero
 * point 0), sum_t w_t * (x_t - zx) = sum_t w_t * x_t - zx * sum_t w_t, so each
 * GEMM column is corrected by zx times its weight row's sum.
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

/* Conv, batch b, group gi: cols (S_col, cig*K) with cols[o][(ci,k)] =
 * x[ci, taps[o,k]] or zx outside; acc (S_col, cog) = cols * w_g^T. */
static int conv_group(const tg__conv_geom *g, const uint8_t *x, int32_t zx, const int8_t *wg,
                      const int64_t *taps, uint8_t *cols, int32_t *acc, bool is_signed)
{
    const int64_t S = tg__conv_prod3(g->col), K = tg__conv_prod3(g->k), Si = tg__conv_prod3(g->img);
    const int64_t cig = g->c_img / g->groups, cog = g->c_col / g->groups;
    const uint8_t pad = (uint8_t)zx;   /* the byte pattern of zx in u8 or i8 */
    for (int64_t o = 0; o < S; o++)
        for (int64_t ci = 0; ci < cig; ci++)
            for (int64_t k = 0; k < K; k++) {
                int64_t i = taps[o * K + k];
                cols[(o * cig + ci) * K + k] = i < 0 ? pad : x[ci * Si + i];
            }
    return tg_int8_gemm(acc, cols, is_signed, wg, S, cog, cig * K);
}

int tg__q_conv_raw(const tg__conv_geom *g, tg_dtype dt, const void *x, int32_t zx,
                   const int8_t *w, const tg__q_requant *r, void *y)
{
    const int64_t S = tg__conv_prod3(g->col), K = tg__conv_prod3(g->k), Si = tg__conv_prod3(g->img);
    const int64_t cig = g->c_img / g->groups, cog = g->c_col / g->groups;
    int64_t *taps = build_taps(g);
    uint8_t *cols = tg__malloc((size_t)(S * cig * K) + 1);
    int32_t *acc = tg__malloc((size_t)(S * cog) * sizeof *acc + 1);
    int32_t *wsum = tg__malloc((size_t)g->c_col * sizeof *wsum);
    int rc = (taps && cols && acc && wsum) ? TG_OK : TG_ENOMEM;
    if (rc == TG_OK) tg__q_row_sums(w, g->c_col, cig * K, wsum);
    for (int64_t b = 0; b < g->batch && rc == TG_OK; b++)
        for (int64_t gi = 0; gi < g->groups && rc == TG_OK; gi++) {
            const uint8_t *xg = (const uint8_t *)x + (b * g->c_img + gi * cig) * Si;
            rc = conv_group(g, xg, zx, w + gi * cog * cig * K, taps, cols, acc, dt == TG_I8);
            for (int64_t co = 0; co < cog && rc == TG_OK; co++) {
                const int64_t c = gi * cog + co;   /* conv: output channel = weight axis 0 */
                const int32_t corr = zx * wsum[c];
                for (int64_t o = 0; o < S; o++)
                    tg__q_store(y, dt, (b * g->c_col + c) * S + o,
                                tg__q_requant_one(acc[o * cog + co] - corr, &r[c]));
            }
        }
    free(taps);
    free(cols);
    free(acc);
    free(wsum);
    return rc;
}

/* ConvTranspose weight (c_col, cog, K) of group gi, transposed to wt
 * (cog*K, cig) so that each GEMM column (co, k) is a row: wt[(co,k)][ci] =
 * w[gi*cig + ci, co, k]. */
static void transpose_weight(const int8_t *w, int64_t gi, int64_t cig, int64_t cog, int64_t K,
                             int8_t *wt)
{
    for (int64_t ci = 0; ci < cig; ci++)
        for (int64_t j = 0; j < cog * K; j++)
            wt[j * cig + ci] = w[(gi * cig + ci) * cog * K + j];
}

/* ConvTranspose, group gi, all batches at once (the GEMM's M is B*S_col):
 *   a (B*S_col, cig) with a[(b,o)][ci] = x[b, gi*cig + ci, o];
 *   cols (B*S_col, cog*K) = a * wt^T - zx * rowsum(wt);
 *   img[b, gi*cog + co, taps[o,k]] += cols[(b,o)][(co,k)]   (col2im, in i32). */
static int convt_group(const tg__conv_geom *g, const uint8_t *x, int64_t gi, int32_t zx,
                       const int8_t *wt, const int32_t *wtsum, const int64_t *taps, uint8_t *a,
                       int32_t *cols, int32_t *img, bool is_signed)
{
    const int64_t S = tg__conv_prod3(g->col), K = tg__conv_prod3(g->k), Si = tg__conv_prod3(g->img);
    const int64_t cig = g->c_col / g->groups, cog = g->c_img / g->groups, B = g->batch;
    for (int64_t b = 0; b < B; b++)
        for (int64_t ci = 0; ci < cig; ci++) {
            const uint8_t *src = x + (b * g->c_col + gi * cig + ci) * S;
            for (int64_t o = 0; o < S; o++) a[(b * S + o) * cig + ci] = src[o];
        }
    TG_TRY(tg_int8_gemm(cols, a, is_signed, wt, B * S, cog * K, cig));
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (B * S * cog * K > 65536)
#endif
    for (int64_t b = 0; b < B; b++) {
        int32_t *ib = img + (b * g->c_img + gi * cog) * Si;
        for (int64_t o = 0; o < S; o++) {
            const int32_t *row = cols + (b * S + o) * cog * K;
            const int64_t *t = taps + o * K;
            for (int64_t co = 0; co < cog; co++)
                for (int64_t k = 0; k < K; k++)
                    if (t[k] >= 0) ib[co * Si + t[k]] += row[co * K + k] - zx * wtsum[co * K + k];
        }
    }
    return TG_OK;
}

int tg__q_conv_transpose_raw(const tg__conv_geom *g, tg_dtype dt, const void *x, int32_t zx,
                             const int8_t *w, const tg__q_requant *r, void *y)
{
    const int64_t S = tg__conv_prod3(g->col), K = tg__conv_prod3(g->k), Si = tg__conv_prod3(g->img);
    const int64_t cig = g->c_col / g->groups, cog = g->c_img / g->groups, G = g->groups;
    const int64_t B = g->batch;
    int64_t *taps = build_taps(g);
    int8_t *wt = tg__malloc((size_t)(G * cog * K * cig) + 1);
    int32_t *wtsum = tg__malloc((size_t)(G * cog * K) * sizeof *wtsum);
    uint8_t *a = tg__malloc((size_t)(B * S * cig) + 1);
    int32_t *cols = tg__malloc((size_t)(B * S * cog * K) * sizeof *cols + 1);
    int32_t *img = tg__calloc((size_t)(B * g->c_img * Si) + 1, sizeof *img);
    int rc = (taps && wt && wtsum && a && cols && img) ? TG_OK : TG_ENOMEM;
    for (int64_t gi = 0; gi < G && rc == TG_OK; gi++) {
        transpose_weight(w, gi, cig, cog, K, wt + gi * cog * K * cig);
        tg__q_row_sums(wt + gi * cog * K * cig, cog * K, cig, wtsum + gi * cog * K);
    }
    for (int64_t gi = 0; gi < G && rc == TG_OK; gi++)
        rc = convt_group(g, x, gi, zx, wt + gi * cog * K * cig, wtsum + gi * cog * K, taps, a,
                         cols, img, dt == TG_I8);
    /* Output channel c = gi*cog + j is weight axis 1 index j of group gi,
     * which is exactly r's index. */
    if (rc == TG_OK) {
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (B * g->c_img * Si > 65536)
#endif
        for (int64_t bc = 0; bc < B * g->c_img; bc++)
            for (int64_t i = 0; i < Si; i++)
                tg__q_store(y, dt, bc * Si + i, tg__q_requant_one(img[bc * Si + i], &r[bc % g->c_img]));
    }
    free(taps);
    free(wt);
    free(wtsum);
    free(a);
    free(cols);
    free(img);
    return rc;
}
