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
#include "transforms_fixtures.h"

/* That image as the dataset's f32 batches hold it (p / 255 in double,
 * rounded once); x has c h w floats. */
void pattern_image(float *x, int64_t c, int64_t h, int64_t w, int64_t seed);

/* The documented uniform `slot` of sample `index` in epoch `epoch` of a
 * loader seeded with seed: tg_rng seed + epoch, counter 2^62 + 64 index +
 * slot. */
double doc_uniform(uint64_t seed, int64_t epoch, int64_t index, int slot);

/* Case k of a family of golden sampling cases ("rot", "rotx", "aff" in
 * augment.safetensors, scripts/make_augment_goldens.py): the image x (c, h,
 * w), its parameters, its fill per channel as f32 (up to 3), the expected
 * output y and whether it samples the nearest pixel; borrowed from g. */
typedef struct golden_case {
    const tg_tensor *x, *y;
    const double *params;
    float fill[3];
    int64_t c, h, w;
    tg_resize_mode mode;
} golden_case;
golden_case golden_case_at(const tg_st_file *g, const char *family, int k);

/* The refusal tests' loader: pattern_dataset(2, 3, 4, 5, 1) in one batch
 * of 2 under the augmentation good, and the batch it hands out then. */
typedef struct refusals {
    tg_dataset *ds;
    tg_loader *ld;
    run before;
} refusals;
void refusals_begin(refusals *r, const tg_augment_options *good);
/* tg_loader_set_augment(ld, o) is TG_EINVAL with a message holding want,
 * and after a reset the loader hands out the batch it did before; what
 * names the case in a failure. */
void expect_refusal(refusals *r, const tg_augment_options *o, const char *want,
                    const char *what);
void refusals_end(refusals *r);

/* Whether a[0..n) and b[0..n) hold the same bits. */
bool same_bits(const float *a, const float *b, int64_t n);

/* The largest |a - b| over n floats. */
double max_diff(const float *a, const float *b, int64_t n);

#endif
