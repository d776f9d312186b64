/* src/ops/conv_gemm.c - the GEMM drivers of Conv, ConvTranspose (column
 * path) and the weight gradient: conv_gemm_tmpl.h instantiated for float
 * (f32) and double (f64).  The names it exports are listed in
 * conv_internal.h. */
#include <string.h>

#include "ops/conv_internal.h"
#include "ops/scratch.h"

/* The most memory the weight-gradient partials of chunks run in parallel may
 * take (conv_passes); tests lower it with tg__conv_set_part_bytes. */
#define TG__CONV_PART_BYTES ((int64_t)8 << 20)
static _Thread_local int64_t part_bytes_override;

void tg__conv_set_part_bytes(int64_t bytes) { part_bytes_override = bytes > 0 ? bytes : 0; }

static _Thread_local bool bits_off;

void tg__conv_set_bits(bool on) { bits_off = !on; }

bool tg__conv_bits_enabled(void) { return !bits_off; }

static int64_t part_bytes(void)
{
    return part_bytes_override > 0 ? part_bytes_override : TG__CONV_PART_BYTES;
}

/* The batch cut into chunks of at most nb samples, of nearly equal size (the
 * first batch % nc have one sample more): chunk c is samples [*b0, *b0 + *n).
 * Their count ceil(batch / nb) is rounded up to a multiple of 4 (of 2 below
 * 4), or to the batch when that is fewer: equal chunks, evenly many, keep two
 * or four threads equally busy (7 chunks on two threads leave one idle for
 * an eighth of the layer: the bf16 DCGAN step's 64->128 conv).  The count
 * depends only on the shapes, never on the thread count. */
static int64_t chunk_count(int64_t batch, int64_t nb)
{
    if (batch <= 0) return 0;
    int64_t nc = (batch + nb - 1) / nb;
    if (nc > 1) nc = nc <= 2 ? 2 : (nc + 3) / 4 * 4;
    return nc < batch ? nc : batch;
}

static void chunk_range(int64_t batch, int64_t nc, int64_t c, int64_t *b0, int64_t *n)
{
    const int64_t q = batch / nc, r = batch % nc;
    *n = q + (c < r ? 1 : 0);
    *b0 = c * q + (c < r ? c : r);
}

/* Element at of the activation input src: of esize bytes, or half when the
 * geometry says so. */
static const void *in_at(const tg__conv_geom *g, const void *src, size_t esize, int64_t at)
{
    return (const char *)src + (size_t)at * (tg__conv_half_in(g) ? sizeof(uint16_t) : esize);
}

#define T float
#define SUF f32
#define GEMM_DT TG_F32
#include "ops/conv_gemm_tmpl.h"
#undef T
#undef SUF
#undef GEMM_DT

#define T double
#define SUF f64
#define GEMM_DT TG_F64
#include "ops/conv_gemm_tmpl.h"
#undef T
#undef SUF
#undef GEMM_DT
