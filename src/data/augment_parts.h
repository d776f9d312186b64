/* src/data/augment_parts.h - the loader's T.ColorJitter
 * (src/data/augment_color.c), T.RandomResizedCrop
 * (src/data/augment_resize.c), T.RandomRotation (src/data/augment_rotate.c)
 * and T.RandomAffine (src/data/augment_affine.c): each as a function of fixed parameters, as
 * torchvision's functional ops take them, and the draws of those parameters,
 * which src/data/augment.c applies to each sample. */
#ifndef TAPEGRAD_DATA_AUGMENT_PARTS_H
#define TAPEGRAD_DATA_AUGMENT_PARTS_H

#include <stdbool.h>
#include <stdint.h>

#include "tapegrad/data.h"

/* Sample `index`'s uniforms of epoch `epoch` for these transforms: tg_rng
 * with seed + epoch at counter 2^62 + 64 index + slot, slot in [0, 64):
 * RandomResizedCrop's attempt a (0..9) uses slots 4a .. 4a + 3 (area,
 * log-ratio, top, left), ColorJitter slots 40 .. 42 (the order) and 43 ..
 * 46 (brightness, contrast, saturation, hue factors), RandomRotation slot
 * 47 (the angle), RandomAffine slots 48 .. 53 (angle, x and y
 * translations, scale, x and y shears). */
enum { TG__AUG_SLOTS = 64, TG__AUG_RRC_SLOT = 0, TG__AUG_JITTER_SLOT = 40,
       TG__AUG_ROTATE_SLOT = 47, TG__AUG_AFFINE_SLOT = 48 };

/* The slot-th uniform of sample index in epoch epoch of a loader seeded
 * with seed. */
double tg__augment_uniform(uint64_t seed, int64_t epoch, int64_t index, int slot);

/* ---- ColorJitter ---- */
enum { TG__BRIGHTNESS, TG__CONTRAST, TG__SATURATION, TG__HUE };

/* The rules of tg_loader_set_augment for o's ColorJitter on images of c
 * channels; whether it is on into *on. */
int tg__jitter_check(const tg_augment_options *o, int64_t c, bool *on);

/* Op op's factor range (lo, hi) of o into r (its range, else the one of
 * its number); whether the op is on (not torchvision's None). */
bool tg__jitter_range(const tg_augment_options *o, int op, double r[2]);

/* Sample index's draw: the order of the four ops and each op's factor (by
 * op id; an op that is off gets factor 1, or 0 for hue, and is
 * skipped). */
void tg__jitter_draw(const tg_augment_options *o, uint64_t seed, int64_t epoch, int64_t index,
                     int order[4], double factor[4]);

/* x (c, hw) f32 in place through F.adjust_brightness (op 0),
 * F.adjust_contrast (1), F.adjust_saturation (2) or F.adjust_hue (3) with
 * factor f, torchvision 0.14's tensor ops in f32 (saturation and hue leave
 * one channel as it is).  c is 1 or 3. */
void tg__color_adjust(float *x, int64_t c, int64_t hw, int op, double f);

/* ---- RandomResizedCrop ---- */
/* The rules of tg_loader_set_augment for o's RandomResizedCrop on images
 * (c, h, w); whether it is on into *on. */
int tg__rrc_check(const tg_augment_options *o, const int64_t chw[3], bool *on);

/* scale and ratio as o gives them, {0, 0} read as torchvision's defaults
 * (0.08, 1) and (3/4, 4/3). */
void tg__rrc_ranges(const tg_augment_options *o, double scale[2], double ratio[2]);

/* T.RandomResizedCrop.get_params' box (top, left, height, width) in an
 * hh x ww image: attempt a (0..9) takes uniforms u[4a .. 4a + 3]; the
 * central fallback when none fits. */
void tg__rrc_box(int64_t box[4], int64_t hh, int64_t ww, const double scale[2],
                 const double ratio[2], const double u[40]);

/* dst (c, size[0], size[1]) = F.resized_crop(src (c, hh, ww), box, size,
 * mode) (antialias off, torchvision 0.14's tensor default).  TG_ENOMEM. */
int tg__resized_crop(float *dst, const float *src, int64_t c, int64_t hh, int64_t ww,
                     const int64_t box[4], const int64_t size[2], tg_resize_mode mode);

/* ---- RandomRotation and RandomAffine: grid transforms ---- */
/* The rules of tg_loader_set_augment for o's RandomRotation on images of
 * hw (h, w) as the rotation gets them; whether it is on into *on. */
int tg__rotate_check(const tg_augment_options *o, const int64_t hw[2], bool *on);

/* torchvision 0.14's _get_inverse_affine_matrix(center, angle, translate,
 * scale, shear) (center relative to the image's centre, angles in
 * degrees) in double, as Python evaluates it. */
void tg__affine_inverse(double m[6], const double center[2], double angle,
                        const double translate[2], double scale, const double shear[2]);

/* The center argument of tg__affine_inverse for an (h, w) image: with
 * given, the point xy (x, y) in pixels from the top-left corner (F.rotate's
 * and F.affine's center: (c - s * 0.5) of each); else the image's centre,
 * (0, 0). */
void tg__augment_center(double center[2], bool given, const double xy[2], int64_t h,
                        int64_t w);

/* F.rotate's matrix for angle (degrees, counter-clockwise) on an (h, w)
 * image about o's rotation_center (the image's centre without one). */
void tg__rotate_matrix(double m[6], const tg_augment_options *o, int64_t h, int64_t w,
                       double angle);

/* F.rotate's expanded size (h, w) for matrix m on an (h, w) image
 * (_compute_affine_output_size in f32); an extent that is not a finite
 * number >= 0 comes out as -1. */
void tg__rotate_size(int64_t size[2], const double m[6], int64_t h, int64_t w);

/* dst (c, oh, ow) = src (c, h, w) through the inverse matrix m (rounded to
 * f32): _gen_affine_grid(theta, w, h, ow, oh), torch's CPU grid_sample
 * (zeros, align_corners False) and _apply_grid_transform's fill (fill[0..c)),
 * in f32.  mode TG_RESIZE_NEAREST or _BILINEAR. */
void tg__grid_transform(float *dst, const float *src, int64_t c, int64_t h, int64_t w,
                        int64_t oh, int64_t ow, const double m[6], tg_resize_mode mode,
                        const float *fill);

/* dst (c, h, w) = F.rotate(src (c, h, w), angle (degrees, counter-
 * clockwise), mode, expand=False, center=None, fill=fill[0..c)) on tensors
 * in torchvision 0.14, in f32.  mode TG_RESIZE_NEAREST or _BILINEAR. */
void tg__rotate(float *dst, const float *src, int64_t c, int64_t h, int64_t w, double angle,
                tg_resize_mode mode, const float *fill);

/* The rules of tg_loader_set_augment for o's RandomAffine; whether it is
 * on into *on. */
int tg__affine_check(const tg_augment_options *o, bool *on);

/* F.affine's inverse matrix on an (h, w) image for the draw (angle,
 * translate, scale, shear), about o's affine_center (the image's centre
 * without one). */
void tg__affine_matrix(double m[6], const tg_augment_options *o, int64_t h, int64_t w,
                       double angle, const double translate[2], double scale,
                       const double shear[2]);

/* Sample index's T.RandomAffine.get_params on an (h, w) image: the angle,
 * the translation (whole pixels), the scale and the shear (x, y). */
void tg__affine_draw(const tg_augment_options *o, uint64_t seed, int64_t epoch, int64_t index,
                     int64_t h, int64_t w, double *angle, double translate[2], double *scale,
                     double shear[2]);

#endif
