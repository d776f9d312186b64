/* src/data/image_transform.h - the per-image pipeline of
 * tg_image_folder_load_ex: torchvision's T.ToTensor, T.Resize (bilinear and
 * bicubic with antialias, nearest) on tensors and T.CenterCrop (src/data/image_transform.c). */
#ifndef TAPEGRAD_DATA_IMAGE_TRANSFORM_H
#define TAPEGRAD_DATA_IMAGE_TRANSFORM_H

#include <stdint.h>

#include "tapegrad/data.h"

/* TG_EINVAL naming the option when o breaks a rule of
 * tg_image_folder_options (channels, resize, max_size, center_crop,
 * interpolation). */
int tg__image_options_check(const tg_image_folder_options *o);

/* planes, u8 (C, h, w) with C = o->channels, through o's pipeline: *out is a
 * new tensor (C, H', W'), u8 without resize (cropped only), f32 with it
 * (in [0, 1], but for bicubic's overshoot).  file names the image in
 * messages (TG_ESHAPE when resizing would make a side 0 or larger than
 * TG_POOL_MAX_PARAM). */
int tg__image_transform(tg_tensor **out, const uint8_t *planes, int64_t h, int64_t w,
                        const tg_image_folder_options *o, const char *file);

#endif
