/* src/ops/norm_internal.h - batch_norm's switch for tests. */
#ifndef TAPEGRAD_OPS_NORM_INTERNAL_H
#define TAPEGRAD_OPS_NORM_INTERNAL_H

#include <stdbool.h>

/* Tests: false makes batch_norm on this thread take its per-channel loops
 * for rows shorter than 16 values too, instead of blocks of channels (true,
 * the default, restores). */
void tg__bn_set_blocks(bool on);

#endif
