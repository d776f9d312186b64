/* src/data/dataset_pixels.h - datasets over f32 images in [0, 1] (the
 * resized images of src/data/image_folder.c) and the pixel-range mapping
 * that src/data/augment.c applies to its fill value. */
#ifndef TAPEGRAD_DATA_DATASET_PIXELS_H
#define TAPEGRAD_DATA_DATASET_PIXELS_H

#include "tapegrad/data.h"

/* A dataset over images, f32 (N, C, H, W), contiguous, values in [0, 1]
 * (retained, not copied: the caller must not change them), and a copy of
 * labels, i64 (N).  Errors as tg_dataset_from_tensors's for the labels. */
int tg__dataset_from_unit_images(tg_dataset **out, tg_tensor *images, const tg_tensor *labels);

/* What ds's batches make of a value x of the unit range: x in f32
 * (TG_PIXELS_UNIT), or (x - 0.5) / 0.5 in f32 (TG_PIXELS_SYMMETRIC). */
float tg__dataset_map_unit(const tg_dataset *ds, double x);

/* The range ds's batches are in (tg_dataset_set_pixel_range). */
tg_pixel_range tg__dataset_pixel_range(const tg_dataset *ds);

#endif
