/* src/ops/grid_sample_internal.h - grid_sample's switch for tests (prefix
 * tg__grid_sample): the vectorized f32 kernels against the general ones. */
#ifndef TAPEGRAD_OPS_GRID_SAMPLE_INTERNAL_H
#define TAPEGRAD_OPS_GRID_SAMPLE_INTERNAL_H

#include <stdbool.h>

/* Tests: false makes grid_sample and grid_sample_backward called on this
 * thread take the general kernels of grid_sample_tmpl.h for f32 too,
 * instead of the vectorized ones of grid_sample_2d.h, grid_sample_cubic.h
 * and grid_sample_3d.h (true, the default, restores). */
void tg__grid_sample_set_fast(bool on);

#endif
