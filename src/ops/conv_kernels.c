/* src/ops/conv_kernels.c - the entry points of the GEMM-based Conv,
 * ConvTranspose (fast path) and weight-gradient kernels on raw contiguous
 * buffers, for float and double, and the helpers the kernel files share:
 * chunk sizes, tap tables, col2im's phases, the rounding of half outputs.
 * The kernels themselves are templates instantiated once per type in
 * conv_im2col.c (im2col/col2im/permutations/epilogue), conv_gemm.c (the GEMM
 * drivers) and conv_phase_kernels.c (ConvTranspose by stride phases).
 * f16/bf16 activations are converted to f32 chunk by chunk as the kernels
 * read them, and f16/bf16 outputs computed in f32 chunk by chunk and rounded
 * once into place (tg__conv_geom's half_in and half_out); the GEMMs of bf16
 * operands run on the bf16 kernel that tg__conv_geom's bf16 names. */
#include <string.h>

#include "ops/conv_internal.h"
#include "ops/scratch.h"

static _Thread_local int64_t chunk_override;   /* tg__conv_set_chunk */

void tg__conv_set_chunk(int64_t samples) { chunk_override = samples > 0 ? samples : 0; }

/* Samples per chunk: as many as keep the column buffer within
 * TG__CONV_CHUNK_BYTES (at least one).  Depends only on the shapes, never on
 * the thread count, so the summation order (and the bits) are fixed.  4 MiB
 * keeps a chunk's columns in the L3 cache between the GEMM that writes them
 * and col2im, and measured the same speed as 32 MiB on the DCGAN layers with
 * 10% less peak memory in the DCGAN step (108 vs 121 MiB). */
#define TG__CONV_CHUNK_BYTES ((int64_t)4 << 20)
int64_t tg__conv_chunk(int64_t batch, int64_t bytes_per_sample)
{
    int64_t nb = chunk_override > 0 ? chunk_override
                                    : TG__CONV_CHUNK_BYTES / (bytes_per_sample > 0 ? bytes_per_sample : 1);
    if (nb > batch) nb = batch;
    return nb < 1 ? 1 : nb;
}

int tg__conv_taps_init(tg__conv_taps *tp, const tg__conv_geom *g)
{
    tp->buf = tg__malloc((size_t)(3 * (g->k[0] + g->k[1] + g->k[2])) * sizeof(int64_t));
    if (!tp->buf) return TG_ENOMEM;
    int64_t *p = tp->buf;
    for (int a = 0; a < 3; a++) {
        tp->lo[a] = p;
        tp->hi[a] = p + g->k[a];
        tp->off[a] = p + 2 * g->k[a];
        p += 3 * g->k[a];
        for (int64_t k = 0; k < g->k[a]; k++) {
            /* o*s + off in [0, I)  <=>  o in [ceil(-off/s), ceil((I-off)/s)) */
            const int64_t off = k * g->dil[a] - g->pad[a];
            tp->off[a][k] = off;
            tp->lo[a][k] = tg__conv_clamp(tg__conv_ceil_div(-off, g->stride[a]), 0, g->col[a]);
            tp->hi[a][k] = tg__conv_clamp(tg__conv_ceil_div(g->img[a] - off, g->stride[a]),
                                          tp->lo[a][k], g->col[a]);
        }
    }
    return TG_OK;
}

void tg__conv_taps_free(tg__conv_taps *tp) { free(tp->buf); }

/* Small planes with short rows (the DCGAN layers: 7x7 and 14x14 column
 * planes) spend most of im2col and col2im on per-row bookkeeping, a few
 * elements at a time.  There one table, made once per call, gives for each
 * kernel tap k and column position o the offset in the image plane that the
 * column entry reads (im2col) or adds into (col2im), or -1 in the padding:
 * tab[k * O + o], k and o row-major.  Used when the column rows are shorter
 * than TG__TAP_TABLE_ROW and the table has at most TG__TAP_TABLE_MAX
 * entries; NULL otherwise, or when out of memory (the callers then take the
 * row-by-row path, which gives the same results). */
#define TG__TAP_TABLE_ROW 32
#define TG__TAP_TABLE_MAX ((int64_t)1 << 16)
static _Thread_local bool tap_tables_off;

void tg__conv_set_tap_tables(bool on) { tap_tables_off = !on; }

int32_t *tg__conv_tap_table_new(const tg__conv_geom *g)
{
    const int64_t *oe = g->col, *ie = g->img, *ke = g->k;
    const int64_t ksz = tg__conv_prod3(ke), osz = tg__conv_prod3(oe);
    if (tap_tables_off || oe[2] >= TG__TAP_TABLE_ROW || ksz * osz > TG__TAP_TABLE_MAX ||
        tg__conv_prod3(ie) > INT32_MAX)
        return NULL;
    tg__conv_taps tp;
    int32_t *tab = malloc((size_t)(ksz * osz) * sizeof *tab);
    if (!tab || tg__conv_taps_init(&tp, g) < 0) {
        free(tab);
        return NULL;
    }
    int32_t *t = tab;
    for (int64_t k0 = 0; k0 < ke[0]; k0++)
        for (int64_t k1 = 0; k1 < ke[1]; k1++)
            for (int64_t k2 = 0; k2 < ke[2]; k2++)
                for (int64_t o0 = 0; o0 < oe[0]; o0++)
                    for (int64_t o1 = 0; o1 < oe[1]; o1++)
                        for (int64_t o2 = 0; o2 < oe[2]; o2++) {
                            const bool in = o0 >= tp.lo[0][k0] && o0 < tp.hi[0][k0] &&
                                            o1 >= tp.lo[1][k1] && o1 < tp.hi[1][k1] &&
                                            o2 >= tp.lo[2][k2] && o2 < tp.hi[2][k2];
                            const int64_t i0 = o0 * g->stride[0] + tp.off[0][k0],
                                          i1 = o1 * g->stride[1] + tp.off[1][k1],
                                          i2 = o2 * g->stride[2] + tp.off[2][k2];
                            *t++ = in ? (int32_t)((i0 * ie[1] + i1) * ie[2] + i2) : -1;
                        }
    tg__conv_taps_free(&tp);
    return tab;
}

/* col2im by output phases.  With i = o*s + off_k on each axis (off_k =
 * k*dilation - pad), tap k adds column position o into image position i,
 * whose phase is r = i mod s and whose place within that phase is
 * q = i div s = o + d_k, where r_k = off_k mod s and d_k = (off_k - r_k)/s
 * do not depend on o.  So in an image stored phase after phase, each tap's
 * rows of columns add into contiguous runs (vectorisable adds, no index
 * table), and one interleaving pass writes the image.  Each element still
 * gets its terms tap by tap from zero: the bits of the other paths. */
#define TG__COL2IM_PHASES_MAX 64

/* From the tap offsets of tp; false (nothing to free) when the tap tables
 * are off, or there are more than TG__COL2IM_PHASES_MAX phases, or out of
 * memory. */
bool tg__conv_col2im_phases_init(tg__conv_col2im_phases *ph, const tg__conv_geom *g,
                                  const tg__conv_taps *tp)
{
    const int64_t *s = g->stride;
    if (tap_tables_off || s[0] > TG__COL2IM_PHASES_MAX ||
        s[0] * s[1] > TG__COL2IM_PHASES_MAX || s[0] * s[1] * s[2] > TG__COL2IM_PHASES_MAX)
        return false;
    const int64_t nph = s[0] * s[1] * s[2];
    const size_t n = (size_t)(2 * (g->k[0] + g->k[1] + g->k[2]) + s[0] + s[1] + s[2] + nph);
    int64_t *p = ph->buf = malloc(n * sizeof(int64_t));   /* (no error set: optional) */
    if (!p) return false;
    for (int a = 0; a < 3; a++) {
        ph->r[a] = p;
        ph->d[a] = p + g->k[a];
        ph->q[a] = p + 2 * g->k[a];
        p += 2 * g->k[a] + s[a];
        for (int64_t k = 0; k < g->k[a]; k++) {
            const int64_t off = tp->off[a][k];
            const int64_t r = ((off % s[a]) + s[a]) % s[a];
            ph->r[a][k] = r;
            ph->d[a][k] = (off - r) / s[a];
        }
        for (int64_t r = 0; r < s[a]; r++)
            ph->q[a][r] = r < g->img[a] ? tg__conv_ceil_div(g->img[a] - r, s[a]) : 0;
    }
    ph->poff = p;
    int64_t at = 0;
    for (int64_t r0 = 0; r0 < s[0]; r0++)
        for (int64_t r1 = 0; r1 < s[1]; r1++)
            for (int64_t r2 = 0; r2 < s[2]; r2++) {
                *p++ = at;
                at += ph->q[0][r0] * ph->q[1][r1] * ph->q[2][r2];
            }
    TG_ASSERT(at == tg__conv_prod3(g->img));
    return true;
}

/* A chunk's f32 output yf (n, c, s) into the half output y from element
 * at: out_bias[ch] added (as tg__conv_epilogue adds it), then rounded once. */
void tg__conv_store_f32(const tg__conv_geom *g, float *yf, int64_t n, int64_t c, int64_t s,
                      void *y, int64_t at)
{
    TG_ASSERT(tg__conv_half_out(g));
    if (g->out_bias) tg__conv_epilogue_f32(yf, n, c, s, g->out_bias, TG_ACT_NONE, 0);
    tg__f32_to_half_n(g->half_out, yf, (uint16_t *)y + at, n * c * s, true);
}

void tg__conv_store_f64(const tg__conv_geom *g, double *yf, int64_t n, int64_t c, int64_t s,
                      void *y, int64_t at)
{
    (void)g, (void)yf, (void)n, (void)c, (void)s, (void)y, (void)at;
    TG_ASSERT(!"half output in an f64 kernel");
}

/* The kernels run on tapegrad's thread pool only (gemm_par): OpenBLAS is set to
 * one thread for their duration and restored after.  (The setting is
 * process-wide; a BLAS call made concurrently from another thread runs
 * single-threaded meanwhile, with the same results.) */
int tg__conv_forward_raw(tg_dtype dt, const tg__conv_geom *g, const void *x, const void *w,
                         void *y)
{
    TG_ASSERT(dt == TG_F32 || dt == TG_F64);
    const int saved = tg__blas_single_begin();
    int rc = dt == TG_F32 ? tg__conv_forward_f32(g, x, w, y)
                          : tg__conv_forward_f64(g, x, w, y);
    tg__blas_restore(saved);
    return rc;
}

int tg__conv_transpose_fast_raw(tg_dtype dt, const tg__conv_geom *g, const void *x,
                                const void *w, void *y)
{
    if (!tg__conv_phase_pays(g)) return tg__conv_transpose_cols_raw(dt, g, x, w, y);
    if (!tg__conv_half_in(g) && !tg__conv_half_out(g))
        return tg__conv_transpose_phase_raw(dt, g, x, w, y);
    /* The phase kernel reads and writes f32 only: half x converted whole,
     * half y computed whole, then stored. */
    const int64_t nx = g->batch * g->c_col * tg__conv_prod3(g->col),
                  ny = g->batch * g->c_img * tg__conv_prod3(g->img);
    float *xf = tg__conv_half_in(g) ? tg__work_alloc((size_t)nx * sizeof(float)) : NULL;
    float *yf = tg__conv_half_out(g) ? tg__work_alloc((size_t)ny * sizeof(float)) : NULL;
    int rc = TG_ENOMEM;
    if ((tg__conv_half_in(g) && !xf) || (tg__conv_half_out(g) && !yf)) goto done;
    if (xf) tg__half_to_f32_n(g->half_in, x, xf, nx, true);
    tg__conv_geom gf = *g;
    gf.half_in = gf.half_out = TG_F32;
    rc = tg__conv_transpose_phase_raw(dt, &gf, xf ? xf : x, w, yf ? yf : y);
    if (rc == TG_OK && yf)
        tg__conv_store_f32(g, yf, g->batch, g->c_img, tg__conv_prod3(g->img), y, 0);
done:
    tg__work_free(xf);
    tg__work_free(yf);
    return rc;
}

int tg__conv_transpose_cols_raw(tg_dtype dt, const tg__conv_geom *g, const void *x,
                                const void *w, void *y)
{
    TG_ASSERT(dt == TG_F32 || dt == TG_F64);
    const int saved = tg__blas_single_begin();
    int rc = dt == TG_F32 ? tg__conv_transpose_cols_f32(g, x, w, y)
                          : tg__conv_transpose_cols_f64(g, x, w, y);
    tg__blas_restore(saved);
    return rc;
}

int tg__conv_transpose_phase_raw(tg_dtype dt, const tg__conv_geom *g, const void *x,
                                 const void *w, void *y)
{
    TG_ASSERT(dt == TG_F32 || dt == TG_F64);
    TG_ASSERT(tg__conv_phase_applies(g) && !tg__conv_half_in(g) && !tg__conv_half_out(g));
    const int saved = tg__blas_single_begin();
    int rc = dt == TG_F32 ? tg__conv_transpose_phase_f32(g, x, w, y)
                          : tg__conv_transpose_phase_f64(g, x, w, y);
    tg__blas_restore(saved);
    return rc;
}

int tg__conv_weight_grad_raw(tg_dtype dt, const tg__conv_geom *g, const void *z,
                             const void *u, void *dw)
{
    TG_ASSERT(dt == TG_F32 || dt == TG_F64);
    const int saved = tg__blas_single_begin();
    int rc = dt == TG_F32 ? tg__conv_weight_grad_f32(g, z, u, dw)
                          : tg__conv_weight_grad_f64(g, z, u, dw);
    tg__blas_restore(saved);
    return rc;
}

int tg__conv_and_weight_grad_raw(tg_dtype dt, const tg__conv_geom *g, const void *z,
                                 const void *w, const void *u, void *y, void *dw)
{
    TG_ASSERT(dt == TG_F32 || dt == TG_F64);
    const int saved = tg__blas_single_begin();
    int rc = dt == TG_F32 ? tg__conv_and_weight_grad_f32(g, z, w, u, y, dw)
                          : tg__conv_and_weight_grad_f64(g, z, w, u, y, dw);
    tg__blas_restore(saved);
    return rc;
}

void tg__conv_epilogue(tg_dtype dt, void *y, int64_t batch, int64_t c, int64_t s,
                       const void *bias, tg_activation act, double slope)
{
    TG_ASSERT(dt == TG_F32 || dt == TG_F64);
    if (dt == TG_F32)
        tg__conv_epilogue_f32(y, batch, c, s, bias, act, slope);
    else
        tg__conv_epilogue_f64(y, batch, c, s, bias, act, slope);
}
