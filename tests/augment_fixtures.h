/* tests/augment_fixtures.h - what test_augment_color.c and
 * test_augment_resize.c (the loader's ColorJitter and RandomResizedCrop)
 * share: the documented uniforms of those transforms, the patterned image
 * as a batch holds it, and bitwise comparison (augment_fixtures.c); the
 * patterned datasets are transforms_fixtures.h's. */
#ifndef TG_TESTS_AUGMENT_FIXTURES_H
#define TG_TESTS_AUGMENT_FIXTURES_H

#include <stdbool.h>
#include <stdint.h>

#include "tapegrad/tapegrad.h"

/* That image as the dataset's f32 batches hold it (p / 255 in double,
 * rounded once); x has c h w floats. */
void pattern_image(float *x, int64_t c, int64_t h, int64_t w, int64_t seed);

/* The documented uniform `slot` of sample `index` in epoch `epoch` of a
 * loader seeded with seed: tg_rng seed + epoch, counter 2^62 + 64 index +
 * slot. */
double doc_uniform(uint64_t seed, int64_t epoch, int64_t index, int slot);

/* Whether a[0..n) and b[0..n) hold the same bits. */
bool same_bits(const float *a, const float *b, int64_t n);

/* The largest |a - b| over n floats. */
double max_diff(const float *a, const float *b, int64_t n);

#endif
