/* src/ops/conv_kernels.c - the entry points of the GEMM-based Conv,
 * ConvTranspose (fast path) and weight-gradient kernels on raw contiguous
 * buffers, for float and double, and the helpers the kernel files share
 * (the chunk size, the rounding of half outputs).  The kernels themselves
 * are templates instantiated once per type in conv_im2col.c (im2col/col2im
 * with their tap tables, the permutations, the epilogue), conv_gemm.c (the
 * GEMM drivers) and conv_phase_kernels.c (ConvTranspose by stride phases).
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

/* A batch whose columns fit one chunk is still cut in two when they reach
 * TG__CONV_SPLIT_BYTES: each thread then runs a whole chunk (im2col, GEMM
 * and store on its own data, in one parallel call) instead of every step
 * being split between the threads with a wait after each.  The DCGAN
 * step's first conv and last ConvTranspose (one channel, 28x28) on two
 * threads: 1.04x and 1.06x the bf16 step (medians of six and nine
 * alternating pairs), f32 0.99x (eleven pairs, within noise); one thread
 * no slower.  Like the chunk size, the cut depends on the shapes alone. */
#define TG__CONV_SPLIT_BYTES ((int64_t)512 << 10)
int64_t tg__conv_chunk_split(int64_t batch, int64_t bytes_per_sample)
{
    const int64_t nb = tg__conv_chunk(batch, bytes_per_sample);
    /* nb >= batch: the batch's columns fit the budget, no overflow */
    if (chunk_override > 0 || nb < batch || batch < 2 ||
        batch * bytes_per_sample < TG__CONV_SPLIT_BYTES)
        return nb;
    return (batch + 1) / 2;
}

/* Rows [r0, r1) of a store: row r is (channel, sample) = (r / nb, r % nb)
 * of a (c, nb*s) source, or (sample, channel) = (r / c, r % c) of an
 * (nb, c, s) one; each goes, out_bias[channel] added in f32 (as
 * tg__conv_epilogue adds it), rounded once into y's row (sample, channel). */
typedef struct {
    const tg__conv_geom *g;
    const float *src;
    int64_t nb, c, s;
    bool cbs;
    uint16_t *y;
    float *rezero;
    tg__cast kern;
} store_job;

static void store_rows(void *p, int64_t r0, int64_t r1)
{
    const store_job *q = p;
    const int64_t s = q->s;
    for (int64_t r = r0; r < r1; r++) {
        const int64_t ch = q->cbs ? r / q->nb : r % q->c, j = q->cbs ? r % q->nb : r / q->c;
        const float bias = q->g->out_bias ? q->g->out_bias[ch] : 0.0f;
        tg__half_add_round(q->g->half_out, q->src + r * s, q->g->out_bias != NULL, bias,
                           q->y + (j * q->c + ch) * s, s, q->kern);
        if (q->rezero) memset(q->rezero + r * s, 0, (size_t)s * sizeof(float));
    }
}

void tg__conv_store_f32(const tg__conv_geom *g, const float *yf, int64_t n, int64_t c, int64_t s,
                        bool cbs, void *y, int64_t at, float *rezero)
{
    TG_ASSERT(tg__conv_half_out(g));
    store_job q = {.g = g, .src = yf, .nb = n, .c = c, .s = s, .cbs = cbs,
                   .y = (uint16_t *)y + at, .rezero = rezero, .kern = tg__conv_cast(g)};
    tg__parallel_range(n * c, n * c * s > 32768, store_rows, &q);
}

void tg__conv_store_f64(const tg__conv_geom *g, const double *yf, int64_t n, int64_t c,
                        int64_t s, bool cbs, void *y, int64_t at, double *rezero)
{
    (void)g, (void)yf, (void)n, (void)c, (void)s, (void)cbs, (void)y, (void)at, (void)rezero;
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
        tg__conv_store_f32(g, yf, g->batch, g->c_img, tg__conv_prod3(g->img), false, y, 0, NULL);
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
