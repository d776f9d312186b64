/* src/ops/norm_blocks.c - batch_norm's loop over blocks of half channels:
 * the channels of an f16/bf16 x (and dy) shared among the threads a block
 * at a time, for norm.c's kernels that read them in place. */

#include "core/core.h"
#include "ops/norm_internal.h"

/* The (N, C, S) geometry of x. */
typedef tg__bn_geom bn_geom;

/* With x in f16/bf16 (and the compute dtype f32), instead of an f32 copy of
 * the whole tensor (and of dy and of the output), each thread takes blocks
 * of its channels and norm_simd.c's kernels read them in place, widening
 * each value into f32 in registers, and write the output rounded: the same
 * arithmetic on the same values as the f32 kernels on a copy, so the same
 * bits, with no pass over the activation for the copy, and no
 * tensor-sized buffers.  A block's passes (the sums, then the output) find
 * it in cache: blocks hold at most BN_HALF_BLK_VALUES values of each
 * tensor, at least one channel.  For contiguous tensors whose channel fits
 * BN_HALF_CHAN_MAX values in rows of at least BN_HALF_ROW_MIN (an empty
 * batch takes the whole-tensor path, whose loops run no element): a channel
 * of BatchNorm1d (S = 1) is N values C apart, and there the whole-tensor
 * copy measured 2.3x faster (x (64, 6272), forward and backward: 0.56x the
 * f32 time against 1.30x). */
#define BN_HALF_CHAN_MAX ((int64_t)1 << 20)
#define BN_HALF_ROW_MIN TG__BN_BLK_ROW
#define BN_HALF_BLK_VALUES ((int64_t)1 << 16)

static _Thread_local bool half_blocks_off;

void tg__bn_set_half_blocks(bool on) { half_blocks_off = !on; }

bool tg__bn_half_channels(const tg_tensor *t, bn_geom g)
{
    return !half_blocks_off && t && tg__dtype_is_half(t->dtype) && tg_tensor_is_contiguous(t) &&
           g.n > 0 && g.n * g.s <= BN_HALF_CHAN_MAX && g.s >= BN_HALF_ROW_MIN;
}

/* The block loop shared by forward and backward: fn(job, c0, nc) for blocks
 * of channels. */
typedef struct {
    int64_t blk;   /* channels per block, at most */
    void (*fn)(void *job, int64_t c0, int64_t nc);
    void *job;
} chans_job;

/* Channels [c0, c1) of a chans_job, in blocks of equal size. */
static void chans_range(void *p, int64_t c0, int64_t c1)
{
    chans_job *q = p;
    const int64_t nblk = (c1 - c0 + q->blk - 1) / q->blk, per = (c1 - c0 + nblk - 1) / nblk;
    for (int64_t c = c0; c < c1; c += per) q->fn(q->job, c, c1 - c < per ? c1 - c : per);
}

void tg__bn_for_channels(bn_geom g, void (*fn)(void *job, int64_t c0, int64_t nc), void *job)
{
    const int64_t chan = g.n * g.s;
    const int64_t blk = chan < BN_HALF_BLK_VALUES ? BN_HALF_BLK_VALUES / chan : 1;
    chans_job q = {.blk = blk < TG__BN_BLK ? blk : TG__BN_BLK, .fn = fn, .job = job};
    tg__parallel_range(g.c, g.n * g.c * g.s > 32768, chans_range, &q);
}
