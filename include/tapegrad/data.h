/* tapegrad/data.h - IDX files, image-classification datasets (Fashion-MNIST,
 * folders of PNGs) and batch loaders.
 *
 *   tg_dataset *ds; tg_loader *ld; tg_tensor *x, *y;
 *   tg_fashion_mnist_load(&ds, NULL, true);          // 60000 training images
 *   tg_loader_options o = TG_LOADER_OPTIONS_INIT;    // batch 64, shuffled, seed 0
 *   tg_loader_new(&ld, ds, &o);
 *   for (int64_t epoch = 0; epoch < 5; epoch++) {
 *       tg_loader_reset(ld, epoch);                  // order depends on seed + epoch only
 *       while (tg_loader_next(ld, &x, &y) == 1) {    // x (64, 1, 28, 28) f32, y (64) i64
 *           ...; tg_tensor_release(x); tg_tensor_release(y);
 *       }
 *   }
 *   tg_loader_free(ld); tg_dataset_release(ds);
 *
 * Ownership: datasets are refcounted (a loader holds a reference); every tensor
 * handed out is a new reference.  On error nothing is changed.
 */
#ifndef TAPEGRAD_DATA_H
#define TAPEGRAD_DATA_H

#include <stdbool.h>
#include <stdint.h>

#include "tapegrad/export.h"
#include "tapegrad/ops.h"
#include "tapegrad/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- IDX files ------------------------------------------------------------
 * Reads an IDX file (plain or gzip-compressed): magic 0x0000, a type byte
 * (0x08 u8 -> TG_U8, 0x09 i8 -> TG_I8, 0x0B i16 -> TG_I32, 0x0C i32 -> TG_I32,
 * 0x0D f32 -> TG_F32, 0x0E f64 -> TG_F64), ndim (1..8), ndim big-endian u32
 * extents, then exactly the big-endian elements, row-major.  *out is a new
 * contiguous tensor.  TG_EIO when the file cannot be opened or read,
 * TG_EFORMAT for a bad magic or type, ndim 0 or > 8, extents whose product
 * overflows, too few or too many data bytes, or a corrupt gzip stream. */
TG_API int tg_idx_load(tg_tensor **out, const char *path);

/* ---- datasets ---------------------------------------------------------------
 * A dataset of N u8 images (C, H, W) and N integer labels in [0, n_classes). */
typedef struct tg_dataset tg_dataset;

/* How pixel p in 0..255 maps to the f32 batches. */
typedef enum tg_pixel_range {
    TG_PIXELS_SYMMETRIC = 0,   /* p / 127.5 - 1, in [-1, 1] (DCGAN's tanh range) */
    TG_PIXELS_UNIT,            /* p / 255, in [0, 1] */
} tg_pixel_range;

/* Where the Debian package dataset-fashion-mnist installs the files. */
#define TG_FASHION_MNIST_DIR "/usr/share/datasets/fashion-mnist"

/* Loads {train,t10k}-images-idx3-ubyte.gz and {train,t10k}-labels-idx1-ubyte.gz
 * (or the same names without .gz) from dir (NULL: TG_FASHION_MNIST_DIR).
 * Works for MNIST too (same names).  TG_EIO/TG_EFORMAT from tg_idx_load;
 * TG_EFORMAT when images are not u8 (N, H, W), labels not u8 (N), the counts
 * differ or a label is > 9.  Pixel range: TG_PIXELS_SYMMETRIC. */
TG_API int tg_fashion_mnist_load(tg_dataset **out, const char *dir, bool train);
/* A dataset over images (u8, (N, C, H, W) or (N, H, W), read as C = 1) and
 * labels (any integer dtype, (N), values in [0, 65536)); both are copied.
 * n_classes is max(label) + 1.  TG_EINVAL for NULL or a label out of range,
 * TG_EDTYPE / TG_ESHAPE otherwise. */
TG_API int tg_dataset_from_tensors(tg_dataset **out, const tg_tensor *images,
                                   const tg_tensor *labels);

TG_API tg_dataset *tg_dataset_retain(tg_dataset *ds);
/* tg_dataset_release(NULL) does nothing. */
TG_API void tg_dataset_release(tg_dataset *ds);

TG_API int64_t tg_dataset_size(const tg_dataset *ds);
TG_API int tg_dataset_num_classes(const tg_dataset *ds);
/* The image shape (C, H, W) into shape[0..3); zeros when ds is NULL. */
TG_API void tg_dataset_image_shape(const tg_dataset *ds, int64_t shape[3]);
/* Sets the range of the f32 images made by tg_dataset_batch / loaders. */
TG_API int tg_dataset_set_pixel_range(tg_dataset *ds, tg_pixel_range range);
/* A class's name: "T-shirt/top", ... for datasets loaded by
 * tg_fashion_mnist_load, the folder's name for tg_image_folder_load, else its
 * number as text; NULL when label is out of range.  Borrowed, valid while ds
 * is alive. */
TG_API const char *tg_dataset_class_name(const tg_dataset *ds, int label);
/* The Fashion-MNIST class names, label 0..9; NULL otherwise.  Static. */
TG_API const char *tg_fashion_mnist_class_name(int label);

/* A dataset of the PNG files of a folder laid out as torchvision's
 * ImageFolder: root/<class>/.../<file>.png.  The classes are the folders of
 * root, sorted by the bytes of their names (Python's sorted()); label c is
 * the c-th of them and tg_dataset_class_name gives its folder name.  The
 * samples are class 0's files, then class 1's, ...: those of every folder
 * under the class folder (links followed, at most 32 deep: TG_EINVAL past
 * that), folder by folder in byte order of the folder's path and each
 * folder's files by name, as torchvision's sorted(os.walk(...)).  Only
 * files ending in .png (in any case) count; other files and names starting
 * with '.' are ignored.  PNGs are read by tg_png_read (8 bits
 * per channel; palette images as RGB; a 16-bit file is taken as linear light
 * and encoded to 8-bit sRGB by libpng, where PIL would clip it).
 * channels 1: grey images as they are, RGB as PIL's convert("L") makes them,
 * (R 19595 + G 38470 + B 7471 + 32768) >> 16; channels 3: RGB as it is, grey
 * repeated in R, G and B.  Alpha is dropped.  Every image must have the
 * first one's width and height (tg_image_folder_load_ex resizes and crops
 * them).  Pixel range: TG_PIXELS_SYMMETRIC.
 * TG_EINVAL for NULL, channels not 1 or 3, or more than 65536 classes;
 * TG_EIO when a folder cannot be opened; TG_ENOTFOUND when root has no class
 * folder or a class folder no .png file (naming it); TG_ESHAPE naming a file
 * whose size differs and both sizes; TG_EIO / TG_EFORMAT from tg_png_read;
 * TG_EUNSUPPORTED in a build without PNG support. */
TG_API int tg_image_folder_load(tg_dataset **out, const char *root, int channels);

/* Options of tg_image_folder_load_ex: torchvision's
 *   T.Compose([T.ToTensor(), T.Resize(resize, antialias=True, max_size=...),
 *              T.CenterCrop(center_crop)])
 * applied to each image as PIL's convert("L") / convert("RGB") reads it
 * (T.Resize on the f32 tensor: F.interpolate(x, (h', w'), mode='bilinear',
 * align_corners=False, antialias=True), done by tg_upsample_antialias).
 *
 * interpolation: TG_RESIZE_BILINEAR as above; TG_RESIZE_BICUBIC,
 *   T.Resize(..., InterpolationMode.BICUBIC, antialias=True), mode='bicubic'
 *   with antialias (torch's _upsample_bicubic2d_aa, Keys's cubic with
 *   a = -0.5), also by tg_upsample_antialias; its values may leave [0, 1]
 *   (torchvision clamps only uint8 tensors, and T.ToTensor's are f32);
 *   TG_RESIZE_NEAREST, T.Resize(..., InterpolationMode.NEAREST) (which
 *   takes no antialias): torch's 'nearest' (not 'nearest-exact'), output
 *   index o reads input index min(floor(o * s), S - 1) with the f32 scale
 *   s = S / size, so its values are T.ToTensor's, exactly.
 *
 * resize: {0, 0} none; {s, 0} T.Resize(s): the shorter side becomes s and
 *   the longer one int(s * long / short) (Python's truncation of the double
 *   quotient), so the aspect ratio is kept; {h, w} T.Resize((h, w)).  An
 *   image already of the new size is left as it is, as torchvision's.
 * max_size (with {s, 0} only; 0: none): T.Resize's max_size; when the
 *   longer side l = int(s * long / short) would exceed it, it becomes
 *   max_size and the shorter int(max_size * s / l).
 * center_crop: {0, 0} none; {h, w} T.CenterCrop((h, w)): the window at top
 *   int(round((H - h) / 2.0)) and left int(round((W - w) / 2.0)), Python's
 *   round (halves to even: a surplus of 3 rows starts the window at row 2,
 *   one of 5 at row 2); a side shorter than the crop is first padded with
 *   zeros (black), (h - H) / 2 rows above and the rest below (likewise
 *   left and right), as torchvision pads.
 *
 * With resize, the dataset keeps the f32 images in [0, 1] (4 bytes a
 * value) and its batches map them, computed in f32 as torch would,
 * TG_PIXELS_UNIT: x itself; TG_PIXELS_SYMMETRIC: (x - 0.5) / 0.5, which is
 * T.Normalize((0.5,) * C, (0.5,) * C) after the pipeline above.  Without
 * resize (center_crop alone, or nothing) the images stay u8 and map as
 * tg_image_folder_load's do (p / 255, p / 127.5 - 1, each rounded once
 * from double; the symmetric value can differ from Normalize's by one
 * rounding).  torchvision resizes a PIL image (T.Resize before
 * T.ToTensor, its default) with PIL's own filter on 8-bit pixels and
 * rounds its results to bytes: those differ from this path's in the last
 * bits. */
typedef enum tg_resize_mode {
    TG_RESIZE_BILINEAR = 0,    /* T.Resize's default, antialiased */
    TG_RESIZE_NEAREST,         /* InterpolationMode.NEAREST */
    TG_RESIZE_BICUBIC,         /* InterpolationMode.BICUBIC, antialiased */
} tg_resize_mode;

typedef struct tg_image_folder_options {
    int channels;              /* 1 (grey) or 3 (RGB) */
    int64_t resize[2];         /* {0, 0}, {s, 0} or {h, w} */
    int64_t max_size;          /* 0 or > s, with resize {s, 0} only */
    int64_t center_crop[2];    /* {0, 0} or {h, w} */
    tg_resize_mode interpolation;   /* T.Resize's interpolation */
} tg_image_folder_options;

#define TG_IMAGE_FOLDER_OPTIONS_INIT {3, {0, 0}, 0, {0, 0}, TG_RESIZE_BILINEAR}

/* tg_image_folder_load with resizing and cropping (opt NULL: the defaults,
 * 3 channels and neither).  The images may have any sizes as long as they
 * all end with the same one: with center_crop or resize {h, w} they do;
 * with resize {s, 0} alone, only images of one aspect ratio do.
 * TG_EINVAL naming the option for channels not 1 or 3; interpolation not
 * a tg_resize_mode; a resize or
 * center_crop extent < 0, or above 2^31 - 1 (TG_POOL_MAX_PARAM); resize
 * {0, w} with w != 0 or center_crop with one extent 0; max_size < 0, given
 * without resize {s, 0} or <= s (torchvision's ValueError).  TG_ESHAPE
 * naming a file whose processed size differs from the first one's (both
 * sizes), or one that max_size would shrink to a side of 0.  Otherwise as
 * tg_image_folder_load. */
TG_API int tg_image_folder_load_ex(tg_dataset **out, const char *root,
                                   const tg_image_folder_options *opt);

/* Samples idx[0..n) as new tensors: *images f32 (n, C, H, W) in the dataset's
 * pixel range, *labels i64 (n).  TG_EINVAL for n < 1 or an index out of range. */
TG_API int tg_dataset_batch(tg_tensor **images, tg_tensor **labels, const tg_dataset *ds,
                            const int64_t *idx, int64_t n);

/* ---- loaders --------------------------------------------------------------
 * Iterates over a dataset in batches.  With shuffle, epoch e visits the
 * samples in the order of a Fisher-Yates shuffle driven by tg_rng seeded with
 * seed + e, the same on every machine; without, in index order. */
typedef struct tg_loader tg_loader;

typedef struct tg_loader_options {
    int64_t batch_size;   /* >= 1 */
    bool shuffle;
    uint64_t seed;
    bool drop_last;       /* skip a last batch smaller than batch_size */
} tg_loader_options;

#define TG_LOADER_OPTIONS_INIT {64, true, 0, false}

/* A new loader at (epoch 0, index 0); retains ds.  opt NULL: the defaults. */
TG_API int tg_loader_new(tg_loader **out, tg_dataset *ds, const tg_loader_options *opt);
/* Frees the loader and releases its dataset; NULL does nothing. */
TG_API void tg_loader_free(tg_loader *ld);
/* The next batch of this epoch as new tensors (images f32 (B, C, H, W),
 * labels i64 (B)); returns 1.  At the end of the epoch returns 0 and leaves
 * *images and *labels untouched.  Negative on error. */
TG_API int tg_loader_next(tg_loader *ld, tg_tensor **images, tg_tensor **labels);
/* Starts epoch `epoch` (>= 0) from its first batch. */
TG_API int tg_loader_reset(tg_loader *ld, int64_t epoch);
/* The current position: the epoch and the number of samples of it already
 * handed out.  Saving it and calling tg_loader_set_position later (on a loader
 * with the same dataset and options) resumes with exactly the same batches. */
TG_API void tg_loader_position(const tg_loader *ld, int64_t *epoch, int64_t *index);
/* TG_EINVAL unless epoch >= 0 and 0 <= index <= dataset size. */
TG_API int tg_loader_set_position(tg_loader *ld, int64_t epoch, int64_t index);
/* Batches per epoch (counting a partial last batch unless drop_last).  With
 * a shard, the batches each rank gets (the same count on every rank). */
TG_API int64_t tg_loader_num_batches(const tg_loader *ld);
/* Makes ld hand out rank's share of each batch of world_size * batch_size
 * samples of the epoch's order, for data-parallel training: batch k of rank r
 * is positions [r b, (r + 1) b) of the k-th run of world_size * b positions.
 * So the union over ranks of their k-th batches is the k-th batch a single
 * process with batch world_size * b would get, the ranks' slices never
 * overlap, and the same seed gives the same order on every rank.  A last,
 * partial run of L samples (without drop_last) is padded, as PyTorch's
 * DistributedSampler pads, to ceil(L / world_size) world_size samples with
 * the epoch's first ones (in its order), and split evenly: every rank's last
 * batch has ceil(L / world_size) samples, so that averaging the ranks' mean
 * gradients weighs every sample of the padded batch alike, and every rank
 * does the same number of steps.  The
 * position (tg_loader_position, checkpoints) counts samples of the whole
 * epoch, so a checkpoint written with one number of ranks resumes with
 * another.  (0, 1) restores a plain loader.  TG_EINVAL unless
 * 0 <= rank < world_size.  Takes effect from the next batch. */
TG_API int tg_loader_set_shard(tg_loader *ld, int rank, int world_size);

/* ---- augmentation -----------------------------------------------------------
 * Random changes to each sample of a loader's batches, as torchvision's
 *   T.Compose([T.RandomCrop(crop, padding, pad_if_needed, fill=fill,
 *                           padding_mode=mode),
 *              T.RandomHorizontalFlip(hflip_p), T.RandomVerticalFlip(vflip_p),
 *              T.RandomRotation(rotation, rotation_interpolation,
 *                               expand=rotation_expand,
 *                               center=rotation_center, fill=rotation_fill),
 *              T.RandomAffine(affine_degrees, affine_translate, affine_scale,
 *                             affine_shear, affine_interpolation,
 *                             fill=affine_fill, center=affine_center),
 *              T.ColorJitter(brightness, contrast, saturation, hue),
 *              T.Normalize(mean, std)])
 * (or T.RandomResizedCrop(rrc_size, rrc_scale, rrc_ratio,
 * rrc_interpolation) in RandomCrop's place) applied after the dataset's own
 * pipeline, in that order: pad, pad if needed, crop (or resized crop),
 * flips, rotation, affine map, colour jitter, normalize; each step is skipped when its
 * option is left at the default.  A sample's draw depends only on (the loader's seed,
 * the epoch, the sample's index in the dataset): the uniforms u0, u1, u2,
 * u3 of a tg_rng with seed = seed + epoch and counter = 2^63 + 4 * index
 * (the shuffle of that epoch draws from the same seed at counters below the
 * dataset size) give the window's top floor(u0 * (H' - h + 1)) and left
 * floor(u1 * (W' - w + 1)) in the padded (H', W') image (0 and 0 when
 * that is the crop's size, as torchvision's), flip the window left to
 * right when u2 < hflip_p and upside down when u3 < vflip_p.  So a resumed
 * loader (tg_loader_set_position, checkpoints) hands out the same batches,
 * and a shard's samples get the draws a single process gives them.  The
 * batches are then (B, C, h, w) (rrc_size with RandomResizedCrop).
 * RandomResizedCrop, RandomRotation and ColorJitter draw from counters
 * 2^62 + 64 * index + slot, apart from those four, so setting them leaves the windows and flips
 * as they were: the resized crop's attempt a (0..9) slots 4a .. 4a + 3
 * (area H W * U(scale), aspect exp(U(log ratio)), top, left: torchvision's
 * get_params, its central box when no attempt fits), ColorJitter slots 40
 * .. 42 (its order: from brightness, contrast, saturation, hue, position i
 * = 3, 2, 1 swaps with floor(u * (i + 1))) and 43 .. 46 (the factors,
 * lo + u * (hi - lo)), RandomRotation slot 47 (the angle, lo + u * (hi -
 * lo) degrees), RandomAffine slots 48 .. 53 (angle, x and y translations,
 * scale, x and y shears, each lo + u * (hi - lo); the translations then
 * rounded half to even to whole pixels, as get_params). */
typedef struct tg_augment_options {
    double hflip_p;            /* in [0, 1]; 0: no flip */
    int64_t crop[2];           /* (h, w); {0, 0}: no crop */
    int64_t padding[4];        /* (left, top, right, bottom) before the crop; < 0 crops */
    tg_pad_mode padding_mode;  /* TG_PAD_CONSTANT, _REFLECT, _REPLICATE, _SYMMETRIC */
    double fill;               /* TG_PAD_CONSTANT's value, 0 black to 1 white */
    int norm_channels;         /* T.Normalize: 0 none, 1 or C (the images') */
    const double *mean;        /* norm_channels values, copied */
    const double *std;         /* norm_channels values, copied */
    double vflip_p;            /* in [0, 1]; 0: no vertical flip */
    bool pad_if_needed;        /* RandomCrop's pad_if_needed (with crop) */
    /* T.ColorJitter(brightness, contrast, saturation, hue); 0: that op off */
    double brightness;         /* >= 0: factor in [max(0, 1 - b), 1 + b] */
    double contrast;           /* >= 0: likewise */
    double saturation;         /* >= 0: likewise */
    double hue;                /* in [0, 0.5]: factor in [-hue, hue] */
    /* T.RandomResizedCrop(rrc_size, rrc_scale, rrc_ratio, interpolation) */
    int64_t rrc_size[2];       /* (h, w); {0, 0}: none (not with crop) */
    double rrc_scale[2];       /* 0 <= lo <= hi; {0, 0}: (0.08, 1) */
    double rrc_ratio[2];       /* 0 < lo <= hi; {0, 0}: (3/4, 4/3) */
    tg_resize_mode rrc_interpolation;  /* BILINEAR, NEAREST or BICUBIC */
    /* T.RandomRotation(rotation, rotation_interpolation, fill=rotation_fill) */
    double rotation[2];        /* degrees (lo, hi), lo <= hi; {0, 0}: none */
    tg_resize_mode rotation_interpolation;  /* NEAREST (the default) or BILINEAR */
    double rotation_fill;      /* the corners' value, 0 black to 1 white */
    /* A fill per channel, instead of fill (constant padding) and of
     * rotation_fill: 0 none, 1 (one for every channel) or C values */
    int fill_channels;
    const double *fills;       /* fill_channels values, copied */
    /* T.RandomAffine(affine_degrees, affine_translate, affine_scale,
     * shear, affine_interpolation, fill=affine_fill) */
    bool affine;                /* on; false: none (the rest unused) */
    double affine_degrees[2];   /* degrees (lo, hi), lo <= hi */
    double affine_translate[2]; /* fractions (of w, of h) in [0, 1] */
    double affine_scale[2];     /* 0 < lo <= hi; {0, 0}: none (1) */
    int affine_shear_values;    /* values of affine_shear: 0 none, 1, 2, 4 */
    double affine_shear[4];     /* x in [-s0, s0]; x in [s0, s1]; y [s2, s3] */
    tg_resize_mode affine_interpolation;   /* NEAREST (the default) or BILINEAR */
    double affine_fill;         /* outside the image, 0 black to 1 white */
    /* T.RandomRotation's expand and center */
    bool rotation_expand;       /* the size that holds it all (one angle) */
    bool rotation_has_center;   /* rotation_center given (else the middle) */
    double rotation_center[2];  /* (x, y) in pixels from the top-left corner */
    /* T.ColorJitter's ranges, (lo, hi) each, for the one number above */
    double brightness_range[2]; /* 0 <= lo <= hi; {0, 0}: unset; {1, 1}: off */
    double contrast_range[2];   /* likewise */
    double saturation_range[2]; /* likewise */
    double hue_range[2];        /* -0.5 <= lo <= hi <= 0.5; {0, 0}: off */
    /* T.RandomAffine's center */
    bool affine_has_center;     /* affine_center given (else the middle) */
    double affine_center[2];    /* (x, y) in pixels from the top-left corner */
} tg_augment_options;

#define TG_AUGMENT_OPTIONS_INIT                                                   \
    {0, {0, 0}, {0, 0, 0, 0}, TG_PAD_CONSTANT, 0, 0, NULL, NULL, 0, false,         \
     0, 0, 0, 0, {0, 0}, {0.08, 1.0}, {3.0 / 4.0, 4.0 / 3.0}, TG_RESIZE_BILINEAR,  \
     {0, 0}, TG_RESIZE_NEAREST, 0, 0, NULL, false, {0, 0}, {0, 0}, {0, 0}, 0,          \
     {0, 0, 0, 0}, TG_RESIZE_NEAREST, 0, false, false, {0, 0}, {0, 0}, {0, 0}, {0, 0}, \
     {0, 0}, false, {0, 0}}

/* Sets ld's augmentation (NULL: none, the default).  The padding modes are
 * torchvision's 'constant', 'reflect' (each padding < the side it pads),
 * 'edge' and 'symmetric' (each padding <= the side it pads; the image's edge
 * pixel repeated, then the pixels inward: d c b a | a b c d | d c).  A
 * negative padding crops that side first, as torchvision's F.pad (a
 * reflection reads from the whole side, as torch's reflection pad does).
 * pad_if_needed is torchvision's rule: after the padding, a width w' <
 * crop[1] is padded by crop[1] - w' columns on both sides (not up to
 * crop[1]: the padded width is 2 crop[1] - w'), then a height h' < crop[0]
 * by crop[0] - h' rows above and below, each in padding_mode (so REFLECT
 * needs crop[1] - w' < w', SYMMETRIC crop[1] - w' <= w', likewise for the
 * height).  A padded pixel of TG_PAD_CONSTANT holds what the dataset's pixel
 * range makes of fill: fill (TG_PIXELS_UNIT) or (fill - 0.5) / 0.5 in f32
 * (TG_PIXELS_SYMMETRIC), so 0 is black in both, as torchvision's fill 0 on
 * T.ToTensor's [0, 1] images.  Normalize computes (x - mean[c]) / std[c] in
 * f32 with mean and std rounded to f32, as torch, on the values in the
 * dataset's pixel range: set TG_PIXELS_UNIT to have T.ToTensor's [0, 1], as
 * torchvision's T.Normalize sees them.  RandomResizedCrop resizes its box
 * as torchvision 0.14's F.resized_crop on tensors (antialias off): bilinear
 * and bicubic by tg_upsample_linear / tg_upsample_bicubic (align_corners
 * false; their last bits may differ from torch's), nearest by torch's
 * index rule.  ColorJitter is torchvision 0.14's tensor F.adjust_* in f32
 * (contrast's mean summed in double) on images of 1 or 3 channels
 * (saturation and hue leave one channel alone, as torchvision's), on the
 * unit range: with TG_PIXELS_SYMMETRIC it maps x to x * 0.5 + 0.5 and back
 * by (y - 0.5) / 0.5 in f32.  RandomRotation is torchvision 0.14's tensor
 * F.rotate (expand False, center None, fill [rotation_fill] * C, the fill
 * mapped to the pixel range as fill is): its f32 grid and torch's CPU
 * grid_sample (align_corners False, zeros, the AVX2 kernel's fused
 * multiply-adds), nearest or bilinear; rotation_has_center turns it about
 * rotation_center (x, y), torchvision's center; rotation_expand gives the
 * batch F.rotate's expanded size, which only one angle (rotation[0] ==
 * rotation[1]) keeps the same for every sample.  RandomAffine (affine
 * true) is T.RandomAffine's get_params and the tensor F.affine through
 * the rotation's grid and grid_sample, the size kept, about the middle or
 * with affine_has_center about affine_center (x, y), torchvision's center;
 * affine_shear_values 1 draws an x shear in [-s0, s0], 2 in [s0, s1], 4
 * also a y shear in [s2, s3].  ColorJitter's *_range {lo, hi} replaces
 * its number ({0, 0}: unset; {1, 1}, hue's {0, 0}: off, as torchvision's
 * None).  fill_channels 1 or C: fills replaces fill (for every channel,
 * fills[0] with 1), rotation_fill and affine_fill, each value mapped to
 * the pixel range as fill.  TG_EINVAL naming the option for ld
 * NULL; hflip_p or vflip_p outside [0, 1] (NaN too); a crop extent < 0 or
 * one of them 0, or above 2^31 - 1 with pad_if_needed; padding outside
 * [-(2^31 - 1), 2^31 - 1], negative paddings that leave an axis no pixel, or
 * padding or pad_if_needed given without crop; padding_mode not one of the
 * four, a REFLECT padding >= the side it pads or a SYMMETRIC one > that
 * side as the negative paddings crop it (pad_if_needed's too); fill not
 * finite; norm_channels not 0, 1 or C, mean
 * or std NULL with norm_channels, a value not finite or a std that is 0 in
 * f32 (torchvision's "std evaluated to zero"); brightness, contrast or
 * saturation negative or not finite, hue outside [0, 0.5], any of them on
 * images of other than 1 or 3 channels; an rrc_size extent < 0 or above
 * 2^31 - 1 or one of them 0, rrc_size with crop, rrc_scale not finite or
 * not 0 <= lo <= hi, rrc_ratio not finite or not 0 < lo <= hi,
 * rrc_interpolation not a tg_resize_mode; rotation not finite or lo > hi,
 * rotation_interpolation not NEAREST or BILINEAR, rotation_fill not
 * finite, rotation_center not finite, rotation_expand with a range of
 * angles, either without rotation; affine_degrees not finite or lo > hi,
 * an affine_translate value outside [0, 1], affine_scale not {0, 0} nor
 * finite with 0 < lo <= hi, affine_shear_values not 0, 1, 2 or 4, a
 * negative or non-finite single shear, a shear range not finite or lo >
 * hi, affine_interpolation not NEAREST or BILINEAR, affine_fill not
 * finite, affine_center not finite, affine_has_center without affine; a
 * ColorJitter range beside its number, not finite, or not 0 <=
 * lo <= hi (hue -0.5 <= lo <= hi <= 0.5); fill_channels not 0, 1 or C,
 * fills NULL with it or a value not finite.  TG_ESHAPE when the crop is
 * larger than the padded image without pad_if_needed, as torchvision's
 * "Required crop size ... is larger than input image size".  On error ld's
 * augmentation is unchanged.  Takes effect from the next batch. */
TG_API int tg_loader_set_augment(tg_loader *ld, const tg_augment_options *opt);

#ifdef __cplusplus
}
#endif
#endif
