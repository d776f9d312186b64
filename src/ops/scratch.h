/* src/ops/scratch.h - per-thread work buffers of the conv kernels and
 * batch_norm (src/ops/scratch.c). */
#ifndef TAPEGRAD_OPS_SCRATCH_H
#define TAPEGRAD_OPS_SCRATCH_H

#include "core/core.h"

/* This thread's grow-only scratch buffer `slot` (0 to 4) of at least `bytes`;
 * NULL with TG_ENOMEM set.  Valid until the next call for the same slot. */
void *tg__conv_scratch(int slot, size_t bytes);
/* This thread's zeroed buffer, at least `bytes` of zeros (NULL with
 * TG_ENOMEM set): the ConvTranspose GEMM (columns) and the conv GEMM of a
 * chunk (packed output) add into it with beta = 1, which spares OpenBLAS's
 * zeroing of C, and col2im / the unpack zero what they have read.  The taker
 * must leave all of it zero again before tg__conv_zeroed_give(); without the
 * give (an error on the way), the next take clears it. */
void *tg__conv_zeroed_take(size_t bytes);
void tg__conv_zeroed_give(void);
/* Frees this thread's scratch buffers (tests; threads that are done). */
void tg__conv_scratch_release(void);

#endif
