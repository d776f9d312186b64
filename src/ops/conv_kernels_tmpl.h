/* src/ops/conv_kernels_tmpl.h - the conv kernels for one element type.
 * Included by conv_kernels.c once per type with these macros defined:
 *   T     the element type (float or double)
 *   SUF   the name suffix (f32 or f64)
 *   GEMM  cblas_sgemm or cblas_dgemm
 * Every buffer is contiguous row-major; shapes are given in comments. */

#define TG__CAT_(a, b) a##_##b
#define TG__CAT(a, b) TG__CAT_(a, b)
#define FN(name) TG__CAT(name, SUF)

/* cols is (c * K0*K1*K2, O0*O1*O2), img is (c, I0, I1, I2); ie, oe and ke are
 * the image, column and kernel extents (I is taken by <complex.h>). */
void FN(tg__im2col)(const T *img, int64_t c, const tg__conv_geom *g, T *cols)
{
    const int64_t *ie = g->img, *oe = g->col, *ke = g->k, *s = g->stride, *d = g->dil,
                  *p = g->pad;
    const int64_t osz = tg__conv_prod3(oe);
    T *row = cols;
    for (int64_t ch = 0; ch < c; ch++) {
        const T *plane = img + ch * tg__conv_prod3(ie);
        for (int64_t k0 = 0; k0 < ke[0]; k0++)
        for (int64_t k1 = 0; k1 < ke[1]; k1++)
        for (int64_t k2 = 0; k2 < ke[2]; k2++, row += osz) {
            T *dst = row;
            for (int64_t o0 = 0; o0 < oe[0]; o0++) {
                int64_t i0 = o0 * s[0] - p[0] + k0 * d[0];
                for (int64_t o1 = 0; o1 < oe[1]; o1++, dst += oe[2]) {
                    int64_t i1 = o1 * s[1] - p[1] + k1 * d[1];
                    if (i0 < 0 || i0 >= ie[0] || i1 < 0 || i1 >= ie[1]) {
                        for (int64_t o2 = 0; o2 < oe[2]; o2++) dst[o2] = 0;
                        continue;
                    }
                    const T *src = plane + (i0 * ie[1] + i1) * ie[2];
                    for (int64_t o2 = 0; o2 < oe[2]; o2++) {
                        int64_t i2 = o2 * s[2] - p[2] + k2 * d[2];
                        dst[o2] = (i2 >= 0 && i2 < ie[2]) ? src[i2] : (T)0;
                    }
                }
            }
        }
    }
}

/* The adjoint of im2col: every column entry is added back to the image
 * position it was read from; entries that fell outside the image are dropped. */
void FN(tg__col2im)(const T *cols, int64_t c, const tg__conv_geom *g, T *img)
{
    const int64_t *ie = g->img, *oe = g->col, *ke = g->k, *s = g->stride, *d = g->dil,
                  *p = g->pad;
    const int64_t osz = tg__conv_prod3(oe);
    const T *row = cols;
    for (int64_t ch = 0; ch < c; ch++) {
        T *plane = img + ch * tg__conv_prod3(ie);
        for (int64_t k0 = 0; k0 < ke[0]; k0++)
        for (int64_t k1 = 0; k1 < ke[1]; k1++)
        for (int64_t k2 = 0; k2 < ke[2]; k2++, row += osz) {
            const T *src = row;
            for (int64_t o0 = 0; o0 < oe[0]; o0++) {
                int64_t i0 = o0 * s[0] - p[0] + k0 * d[0];
                for (int64_t o1 = 0; o1 < oe[1]; o1++, src += oe[2]) {
                    int64_t i1 = o1 * s[1] - p[1] + k1 * d[1];
                    if (i0 < 0 || i0 >= ie[0] || i1 < 0 || i1 >= ie[1]) continue;
                    T *dst = plane + (i0 * ie[1] + i1) * ie[2];
                    for (int64_t o2 = 0; o2 < oe[2]; o2++) {
                        int64_t i2 = o2 * s[2] - p[2] + k2 * d[2];
                        if (i2 >= 0 && i2 < ie[2]) dst[i2] += src[o2];
                    }
                }
            }
        }
    }
}

/* Conv: per sample, cols (c_img*K, O) = im2col(x_b); then per group
 * y_bg (c_col/G, O) = W_g (c_col/G, c_img/G*K) @ cols_g (c_img/G*K, O). */
static int FN(conv_forward)(const tg__conv_geom *g, const T *x, const T *w, T *y)
{
    const int64_t ksz = tg__conv_prod3(g->k), osz = tg__conv_prod3(g->col),
                  isz = tg__conv_prod3(g->img);
    const int64_t ci = g->c_img / g->groups, co = g->c_col / g->groups, kk = ci * ksz;
    T *cols = tg__malloc((size_t)(g->c_img * ksz * osz) * sizeof(T));
    if (!cols) return TG_ENOMEM;
    for (int64_t b = 0; b < g->batch; b++) {
        FN(tg__im2col)(x + b * g->c_img * isz, g->c_img, g, cols);
        for (int64_t gi = 0; gi < g->groups; gi++)
            GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)co, (int)osz, (int)kk, 1,
                 w + gi * co * kk, (int)kk, cols + gi * kk * osz, (int)osz, 0,
                 y + (b * g->c_col + gi * co) * osz, (int)osz);
    }
    free(cols);
    return TG_OK;
}

/* ConvTranspose, fast path: per sample and group
 * cols_g (c_img/G*K, O) = W_g^T (c_img/G*K, c_col/G) @ x_bg (c_col/G, O), computed
 * on the un-dilated input (no inserted zero is ever multiplied); col2im then
 * scatters each column entry to y[o*stride - pad + k*dilation]. */
static int FN(conv_transpose_fast)(const tg__conv_geom *g, const T *x, const T *w, T *y)
{
    const int64_t ksz = tg__conv_prod3(g->k), osz = tg__conv_prod3(g->col),
                  isz = tg__conv_prod3(g->img);
    const int64_t ci = g->c_img / g->groups, co = g->c_col / g->groups, kk = ci * ksz;
    T *cols = tg__malloc((size_t)(g->c_img * ksz * osz) * sizeof(T));
    if (!cols) return TG_ENOMEM;
    memset(y, 0, (size_t)(g->batch * g->c_img * isz) * sizeof(T));
    for (int64_t b = 0; b < g->batch; b++) {
        for (int64_t gi = 0; gi < g->groups; gi++)
            GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, (int)kk, (int)osz, (int)co, 1,
                 w + gi * co * kk, (int)kk, x + (b * g->c_col + gi * co) * osz, (int)osz, 0,
                 cols + gi * kk * osz, (int)osz);
        FN(tg__col2im)(cols, g->c_img, g, y + b * g->c_img * isz);
    }
    free(cols);
    return TG_OK;
}

/* Weight gradient: dW_g (c_col/G, c_img/G*K) = sum_b u_bg (c_col/G, O) @ cols_g^T,
 * with cols = im2col(z_b); the batch sum is GEMM's beta = 1. */
static int FN(conv_weight_grad)(const tg__conv_geom *g, const T *z, const T *u, T *dw)
{
    const int64_t ksz = tg__conv_prod3(g->k), osz = tg__conv_prod3(g->col),
                  isz = tg__conv_prod3(g->img);
    const int64_t ci = g->c_img / g->groups, co = g->c_col / g->groups, kk = ci * ksz;
    T *cols = tg__malloc((size_t)(g->c_img * ksz * osz) * sizeof(T));
    if (!cols) return TG_ENOMEM;
    memset(dw, 0, (size_t)(g->c_col * kk) * sizeof(T));
    for (int64_t b = 0; b < g->batch; b++) {
        FN(tg__im2col)(z + b * g->c_img * isz, g->c_img, g, cols);
        for (int64_t gi = 0; gi < g->groups; gi++)
            GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, (int)co, (int)kk, (int)osz, 1,
                 u + (b * g->c_col + gi * co) * osz, (int)osz, cols + gi * kk * osz,
                 (int)osz, 1, dw + gi * co * kk, (int)kk);
    }
    free(cols);
    return TG_OK;
}

/* y (B, c, s) gets bias[ch] added and the activation applied, in place. */
static void FN(epilogue)(T *y, int64_t batch, int64_t c, int64_t s, const T *bias,
                         tg_activation act, double slope)
{
    for (int64_t b = 0; b < batch; b++)
        for (int64_t ch = 0; ch < c; ch++) {
            T *v = y + (b * c + ch) * s;
            T bv = bias ? bias[ch] : (T)0;
            if (act == TG_ACT_NONE) {
                for (int64_t i = 0; i < s; i++) v[i] += bv;
            } else {
                for (int64_t i = 0; i < s; i++)
                    v[i] = (T)conv_activate((double)v[i] + (double)bv, act, slope);
            }
        }
}

#undef FN
#undef TG__CAT
#undef TG__CAT_
