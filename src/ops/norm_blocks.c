/* src/ops/norm_blocks.c - batch_norm's loop over blocks of half channels:
 * each block of an f16/bf16 x (and dy) converted into a thread's f32
 * scratch for norm.c's kernels, and the output rounded back. */
#include <stdatomic.h>
#include <string.h>

#include "core/core.h"
#include "ops/norm_internal.h"
#include "ops/scratch.h"

/* The (N, C, S) geometry of x. */
typedef tg__bn_geom bn_geom;

/* With x in f16/bf16 (and the compute dtype f32), instead of an f32 copy of
 * the whole tensor (and of dy and of the output), each thread converts a
 * block of its channels into its scratch buffer, runs norm.c's f32 kernels
 * on that copy channel by channel and rounds the block's output into the
 * result: the same arithmetic on the same values, so the same bits, with one
 * pass over the activation fewer each way and no tensor-sized buffers.  A
 * block of nc channels is N runs of nc*S contiguous values, so the copy
 * streams through memory where one channel's N rows of S values, C*S apart,
 * would each start a new run (at 7x7 planes that copy took as long as the
 * sums).  Blocks hold at most BN_HALF_BLK_VALUES values (two buffers of it
 * fit in L2 beside the tensors' runs), at least one channel.  For contiguous
 * tensors whose channel fits BN_HALF_CHAN_MAX values in rows of at least
 * BN_HALF_ROW_MIN (an empty batch takes the whole-tensor path, whose loops
 * run no element): a channel of BatchNorm1d (S = 1) is N values C apart, and
 * there the whole-tensor copy measured 2.3x faster (x (64, 6272), forward
 * and backward: 0.56x the f32 time against 1.30x). */
#define BN_HALF_CHAN_MAX ((int64_t)1 << 20)
#define BN_HALF_ROW_MIN TG__BN_BLK_ROW
#define BN_HALF_BLK_VALUES ((int64_t)1 << 16)

bool tg__bn_half_channels(const tg_tensor *t, bn_geom g)
{
    return t && tg__dtype_is_half(t->dtype) && tg_tensor_is_contiguous(t) && g.n > 0 &&
           g.n * g.s <= BN_HALF_CHAN_MAX && g.s >= BN_HALF_ROW_MIN;
}

/* Channels [c0, c0 + nc) of t (N, C, S, contiguous) to or from the f32
 * buffer buf (N, nc, S): from a half t (x, dy), or into a half or f32 one
 * (the output). */
void tg__bn_block_rows(tg_tensor *t, bn_geom g, int64_t c0, int64_t nc, float *buf,
                       bool to_buf)
{
    const int64_t off = c0 * g.s, stride = g.c * g.s, len = nc * g.s;
    if (to_buf) {
        tg__half_to_f32_rows(t->dtype, (const uint16_t *)tg_tensor_cdata(t) + off, stride, buf,
                             len, g.n, len);
    } else if (t->dtype == TG_F32) {
        float *dst = (float *)tg_tensor_data(t) + off;
        for (int64_t n = 0; n < g.n; n++)
            memcpy(dst + n * stride, buf + n * len, (size_t)len * sizeof(float));
    } else {
        tg__f32_to_half_rows(t->dtype, buf, len, (uint16_t *)tg_tensor_data(t) + off, stride, g.n,
                             len);
    }
}

/* The block loop shared by forward and backward: fn(job, c0, nc, bufs) for
 * blocks of channels, with one (two when two_bufs) f32 buffers of N*nc*S
 * values per thread. */
typedef struct {
    bn_geom g;
    int64_t blk;   /* channels per block, at most */
    bool two_bufs;
    void (*fn)(void *job, int64_t c0, int64_t nc, float **bufs);
    void *job;
    atomic_bool failed;
} chans_job;

/* Channels [c0, c1) of a chans_job, in blocks of equal size, through this
 * thread's scratch. */
static void chans_range(void *p, int64_t c0, int64_t c1)
{
    chans_job *q = p;
    const int64_t nblk = (c1 - c0 + q->blk - 1) / q->blk, per = (c1 - c0 + nblk - 1) / nblk;
    const size_t bytes = (size_t)(q->g.n * per * q->g.s) * sizeof(float);
    float *bufs[2] = {tg__conv_scratch(0, bytes), q->two_bufs ? tg__conv_scratch(1, bytes) : NULL};
    if (!bufs[0] || (q->two_bufs && !bufs[1])) {
        atomic_store(&q->failed, true);
        return;
    }
    for (int64_t c = c0; c < c1; c += per) q->fn(q->job, c, c1 - c < per ? c1 - c : per, bufs);
}

int tg__bn_for_channels(bn_geom g, bool two_bufs,
                        void (*fn)(void *job, int64_t c0, int64_t nc, float **bufs), void *job)
{
    const int64_t chan = g.n * g.s;
    const int64_t blk = chan < BN_HALF_BLK_VALUES ? BN_HALF_BLK_VALUES / chan : 1;
    chans_job q = {.g = g, .blk = blk < TG__BN_BLK ? blk : TG__BN_BLK,
                   .two_bufs = two_bufs, .fn = fn, .job = job};
    atomic_init(&q.failed, false);
    tg__parallel_range(g.c, g.n * g.c * g.s > 32768, chans_range, &q);
    TG_CHECK(!atomic_load(&q.failed), TG_ENOMEM,
             "batch_norm: out of memory for a block's f32 copy (%lld values a channel)",
             (long long)chan);
    return TG_OK;
}
