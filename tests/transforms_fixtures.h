/* tests/transforms_fixtures.h - what test_transforms.c (folder loading),
 * test_transforms_augment.c and test_transforms_options.c (the loader's
 * augmentation) share: the
 * golden images' bytes, the golden file's metadata, the augmentation's
 * dataset, options and documented draw, and a loader's batches gathered
 * (transforms_fixtures.c). */
#ifndef TG_TESTS_TRANSFORMS_FIXTURES_H
#define TG_TESTS_TRANSFORMS_FIXTURES_H

#include <stdbool.h>
#include <stdint.h>

#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

/* Byte k of image (c, h, w, seed) in (C, H, W) order, as the script's
 * image_bytes. */
uint8_t pattern(int64_t seed, int64_t k);

/* The integers of "a,b,c" into v (up to n); "-" gives 0 of them.  Returns
 * the count. */
int ints(const char *s, int64_t *v, int n);

/* The metadata of key fmt % i; fails when it is missing. */
const char *meta(const tg_st_file *g, const char *fmt, int i);

/* n copies of the golden augmentation image as a u8 dataset in the unit
 * range, sample i labelled i (the samples differ only by their index, hence
 * their draws).  im receives the image's (c, h, w, seed). */
tg_dataset *aug_dataset(const tg_st_file *g, int64_t n, int64_t im[4]);
/* n copies of image (c, h, w) holding pattern(seed, k) at position k, u8,
 * in the unit range; sample i labelled i (the test reads the index off the
 * label). */
tg_dataset *pattern_dataset(int64_t n, int64_t c, int64_t h, int64_t w, int64_t seed);

/* The documented uniforms u0..u3 of sample `index` in epoch `epoch` of a
 * loader seeded with seed. */
void draw_uniforms(uint64_t seed, int64_t epoch, int64_t index, double u[4]);

/* Whether sample s (C, h, w) is padded (C, H, W)'s window at (top, left),
 * mirrored left to right when hflip and upside down when vflip, bit for
 * bit. */
bool is_window_flipped(const float *s, const float *padded, int64_t c, int64_t hh, int64_t ww,
                       int64_t h, int64_t w, int64_t top, int64_t left, bool hflip, bool vflip);

/* Every batch of a loader, concatenated: the images into x (n floats) and
 * the labels into labels (n_labels). */
typedef struct run {
    float *x;
    int64_t n, *labels, n_labels;
} run;

/* Frees r's arrays and zeroes it. */
void run_free(run *r);
/* Appends ld's batches up to the end of its epoch to r. */
void drain(run *r, tg_loader *ld);

/* The fields of tg_augment_options after pad_if_needed (ColorJitter,
 * RandomResizedCrop, RandomRotation, fills, RandomAffine, the rotation's
 * expand and center, ColorJitter's ranges, the affine map's center), all
 * off, for initializers that list every field. */
#define AUG_NEW_OFF                                                                    \
    0, 0, 0, 0, {0, 0}, {0, 0}, {0, 0}, TG_RESIZE_BILINEAR, {0, 0}, TG_RESIZE_NEAREST, 0, \
        0, NULL, false, {0, 0}, {0, 0}, {0, 0}, 0, {0, 0, 0, 0}, TG_RESIZE_NEAREST, 0, false, \
        false, {0, 0}, {0, 0}, {0, 0}, {0, 0}, {0, 0}, false, {0, 0}

/* ImageNet's mean and std, T.Normalize's usual numbers. */
extern const double MEAN3[3], STD3[3];

/* Crop (5, 6), padding (2, 1, 3, 2) by reflection, hflip_p 0.5 and
 * normalize by MEAN3, STD3 at once. */
tg_augment_options all_of_them(void);

#endif
