/* src/data/augment.c - torchvision's T.RandomCrop(size, padding,
 * pad_if_needed, fill, padding_mode), T.RandomHorizontalFlip(p),
 * T.RandomVerticalFlip(p) and T.Normalize(mean, std) on a loader's batches,
 * with T.RandomResizedCrop, T.RandomRotation and T.ColorJitter
 * (src/data/augment_resize.c, augment_rotate.c, augment_color.c) in the
 * order RandomResizedCrop or RandomCrop, flips, RandomRotation, ColorJitter,
 * Normalize.
 *
 * Sample `index` of epoch e draws four uniforms from tg_rng with seed
 * (seed + e) at counters 2^63 + 4 index .. + 3, so its draw is a function
 * of (seed, e, index) alone: the same whatever the order, batch, shard or
 * resumption that hands the sample out, and apart from the epoch's shuffle,
 * which uses counters 0 .. N - 2 of the same seed.  Each draw has its own
 * counter, so the draws of options left at their defaults are never used
 * and never shift the others.  RandomResizedCrop, RandomRotation and
 * ColorJitter draw from
 * counters 2^62 + 64 index + slot (src/data/augment_parts.h), below these.
 *
 * The padding is separable: padded row p reads source row rows[p] (or the
 * fill when that is -1), column q source column cols[q].  torchvision pads
 * twice (the padding, then pad_if_needed's on the padded image); the
 * tables compose the two index maps, so one pass reads every output pixel
 * straight from the batch, windowed and flipped. */
#include <math.h>
#include <string.h>

#include "core/core.h"
#include "data/augment.h"
#include "data/augment_parts.h"
#include "data/dataset_pixels.h"

struct tg__augment {
    double hflip_p, vflip_p;
    int64_t crop[2];      /* (h, w); {0, 0}: the image's own size */
    int64_t pad[4];       /* left, top, right, bottom */
    bool pad_if_needed;
    bool geometry;        /* a crop or a flip: a new batch of windows */
    tg_pad_mode mode;
    double fill;
    int norm;             /* channels of mean/std: 0, 1 or C */
    float *mean, *std;    /* norm values each, rounded to f32 as torch's */
    bool rrc, rotate, jitter;   /* RandomResizedCrop, RandomRotation, ColorJitter */
    bool affine;          /* RandomAffine */
    int nfill;            /* values of fills: 0, 1 or C */
    double *fills;        /* the fill of each channel (one for all when nfill 1) */
    tg_augment_options o; /* their options (mean and std NULL) */
};

void tg__augment_free(tg__augment *a)
{
    if (!a) return;
    free(a->mean);
    free(a->std);
    free(a->fills);
    free(a);
}

static const char *const SIDE[4] = {"width", "height", "width", "height"};

/* The padding a mode allows on a side of extent n: REFLECT < n (torch's
 * reflection pad), SYMMETRIC <= n (torchvision's index lists), any else. */
static bool pad_fits(tg_pad_mode m, int64_t pad, int64_t n)
{
    return m == TG_PAD_REFLECT ? pad < n : m == TG_PAD_SYMMETRIC ? pad <= n : true;
}

static const char *mode_rule(tg_pad_mode m)
{
    return m == TG_PAD_REFLECT ? "<" : "<=";
}

/* pad_if_needed's padding of each side of an extent n (after the padding)
 * for a crop extent k: k - n when n < k, else 0. */
static int64_t deficit(bool on, int64_t n, int64_t k)
{
    return on && n < k ? k - n : 0;
}

static int check_padding(const tg_augment_options *o, const int64_t chw[3])
{
    bool any = false;
    for (int i = 0; i < 4; i++) {
        TG_CHECK(o->padding[i] >= -INT32_MAX && o->padding[i] <= INT32_MAX, TG_EINVAL,
                 "loader_set_augment: padding[%d]=%lld must be in [%d, %d]", i,
                 (long long)o->padding[i], -INT32_MAX, INT32_MAX);
        any = any || o->padding[i] != 0;
    }
    TG_CHECK(!any || o->crop[0] > 0, TG_EINVAL,
             "loader_set_augment: padding is for the crop; crop must be given with it");
    TG_CHECK(!o->pad_if_needed || o->crop[0] > 0, TG_EINVAL,
             "loader_set_augment: pad_if_needed is for the crop; crop must be given with it");
    for (int d = 0; d < 2 && o->pad_if_needed; d++)
        TG_CHECK(o->crop[d] <= INT32_MAX, TG_EINVAL,
                 "loader_set_augment: crop[%d]=%lld must be <= %d with pad_if_needed", d,
                 (long long)o->crop[d], INT32_MAX);
    TG_CHECK(o->padding_mode == TG_PAD_CONSTANT || o->padding_mode == TG_PAD_REFLECT ||
                 o->padding_mode == TG_PAD_REPLICATE || o->padding_mode == TG_PAD_SYMMETRIC,
             TG_EINVAL, "loader_set_augment: padding_mode=%d must be TG_PAD_CONSTANT, "
             "TG_PAD_REFLECT or TG_PAD_REPLICATE, or torchvision's TG_PAD_SYMMETRIC",
             (int)o->padding_mode);
    const char *mn = o->padding_mode == TG_PAD_REFLECT ? "TG_PAD_REFLECT" : "TG_PAD_SYMMETRIC";
    /* negative paddings crop; an axis must keep a pixel */
    for (int i = 0; i < 2; i++) {
        int64_t n = chw[i ? 1 : 2], n1 = n + o->padding[i] + o->padding[i + 2];
        TG_CHECK(n1 >= 1, TG_EINVAL, "loader_set_augment: padding[%d] + padding[%d] = %lld "
                 "leaves the images' %s %lld no pixel", i, i + 2,
                 (long long)(o->padding[i] + o->padding[i + 2]), SIDE[i], (long long)n);
    }
    for (int i = 0; i < 4; i++) {
        /* torch's reflection pad measures the image, torchvision's symmetric
         * one the image cropped by the negative paddings */
        int64_t n = chw[i % 2 ? 1 : 2], other = o->padding[(i + 2) % 4];
        if (o->padding_mode == TG_PAD_SYMMETRIC && other < 0) n += other;
        TG_CHECK(pad_fits(o->padding_mode, o->padding[i], n), TG_EINVAL,
                 "loader_set_augment: padding[%d]=%lld must be %s the images' %s %lld with %s",
                 i, (long long)o->padding[i], mode_rule(o->padding_mode), SIDE[i],
                 (long long)n, mn);
    }
    /* pad_if_needed pads the padded image: width first, then height */
    for (int d = 1; d >= 0; d--) {
        int64_t n = chw[1 + d] + o->padding[d ? 0 : 1] + o->padding[d ? 2 : 3];
        int64_t k = o->crop[d], e = deficit(o->pad_if_needed, n, k);
        TG_CHECK(pad_fits(o->padding_mode, e, n), TG_EINVAL,
                 "loader_set_augment: pad_if_needed pads the %s by crop[%d] - %lld = %lld on "
                 "each side, which must be %s the padded %s %lld with %s", SIDE[d ? 0 : 1], d,
                 (long long)n, (long long)e, mode_rule(o->padding_mode), SIDE[d ? 0 : 1],
                 (long long)n, mn);
    }
    return TG_OK;
}

static int check_crop(const tg_augment_options *o, const int64_t chw[3])
{
    for (int i = 0; i < 2; i++)
        TG_CHECK(o->crop[i] >= 0, TG_EINVAL, "loader_set_augment: crop[%d]=%lld must be >= 0",
                 i, (long long)o->crop[i]);
    TG_CHECK((o->crop[0] > 0) == (o->crop[1] > 0), TG_EINVAL,
             "loader_set_augment: crop={%lld, %lld} must be {0, 0} (none) or two extents >= 1",
             (long long)o->crop[0], (long long)o->crop[1]);
    TG_TRY(check_padding(o, chw));
    TG_CHECK(isfinite(o->fill), TG_EINVAL, "loader_set_augment: fill=%g must be finite",
             o->fill);
    int64_t ph = chw[1] + o->padding[1] + o->padding[3];
    int64_t pw = chw[2] + o->padding[0] + o->padding[2];
    TG_CHECK(o->pad_if_needed || (o->crop[0] <= ph && o->crop[1] <= pw), TG_ESHAPE,
             "loader_set_augment: crop=(%lld, %lld) is larger than the padded images, (%lld, "
             "%lld) (height, width)", (long long)o->crop[0], (long long)o->crop[1],
             (long long)ph, (long long)pw);
    return TG_OK;
}

static int check_norm(const tg_augment_options *o, int64_t c)
{
    TG_CHECK(o->norm_channels == 0 || o->norm_channels == 1 || o->norm_channels == c, TG_EINVAL,
             "loader_set_augment: norm_channels=%d must be 0 (none), 1 or %lld (the images' "
             "channels)", o->norm_channels, (long long)c);
    if (o->norm_channels == 0) return TG_OK;
    TG_CHECK(o->mean != NULL && o->std != NULL, TG_EINVAL,
             "loader_set_augment: mean and std must not be NULL with norm_channels=%d",
             o->norm_channels);
    for (int i = 0; i < o->norm_channels; i++) {
        TG_CHECK(isfinite(o->mean[i]) && isfinite(o->std[i]), TG_EINVAL,
                 "loader_set_augment: mean[%d]=%g and std[%d]=%g must be finite", i, o->mean[i],
                 i, o->std[i]);
        TG_CHECK((float)o->std[i] != 0.0f, TG_EINVAL,
                 "loader_set_augment: std[%d]=%g is 0 in f32 (a division by zero)", i, o->std[i]);
    }
    return TG_OK;
}

static int check_fills(const tg_augment_options *o, int64_t c)
{
    TG_CHECK(o->fill_channels == 0 || o->fill_channels == 1 || o->fill_channels == c,
             TG_EINVAL, "loader_set_augment: fill_channels=%d must be 0 (none), 1 or %lld (the "
             "images' channels)", o->fill_channels, (long long)c);
    TG_CHECK(o->fill_channels == 0 || o->fills != NULL, TG_EINVAL,
             "loader_set_augment: fills must not be NULL with fill_channels=%d",
             o->fill_channels);
    for (int i = 0; i < o->fill_channels; i++)
        TG_CHECK(isfinite(o->fills[i]), TG_EINVAL,
                 "loader_set_augment: fills[%d]=%g must be finite", i, o->fills[i]);
    return TG_OK;
}

int tg__augment_new(tg__augment **out, const tg_augment_options *o, const tg_dataset *ds)
{
    int64_t chw[3];
    tg_dataset_image_shape(ds, chw);
    TG_CHECK(o->hflip_p >= 0 && o->hflip_p <= 1, TG_EINVAL,
             "loader_set_augment: hflip_p=%g must be in [0, 1]", o->hflip_p);
    TG_CHECK(o->vflip_p >= 0 && o->vflip_p <= 1, TG_EINVAL,
             "loader_set_augment: vflip_p=%g must be in [0, 1]", o->vflip_p);
    TG_TRY(check_crop(o, chw));
    TG_TRY(check_norm(o, chw[0]));
    bool rrc, rotate, jitter, affine;
    TG_TRY(tg__rrc_check(o, chw, &rrc));
    /* the size the rotation gets: the resized crop's, the crop's or the image's */
    const int64_t *rhw = rrc ? o->rrc_size : o->crop[0] > 0 ? o->crop : chw + 1;
    TG_TRY(tg__rotate_check(o, rhw, &rotate));
    TG_TRY(tg__affine_check(o, &affine));
    TG_TRY(check_fills(o, chw[0]));
    TG_TRY(tg__jitter_check(o, chw[0], &jitter));
    *out = NULL;
    bool geometry = o->hflip_p > 0 || o->vflip_p > 0 || o->crop[0] > 0;
    if (!geometry && o->norm_channels == 0 && !rrc && !rotate && !jitter && !affine)
        return TG_OK;
    tg__augment *a = tg__calloc(1, sizeof *a);
    int k = o->norm_channels;
    if (a && k > 0) {
        a->mean = tg__malloc((size_t)k * sizeof *a->mean);
        a->std = tg__malloc((size_t)k * sizeof *a->std);
    }
    if (a && o->fill_channels > 0)
        a->fills = tg__malloc((size_t)o->fill_channels * sizeof *a->fills);
    if (!a || (k > 0 && (!a->mean || !a->std)) || (o->fill_channels > 0 && !a->fills)) {
        tg__augment_free(a);
        return TG_ENOMEM;
    }
    a->hflip_p = o->hflip_p;
    a->vflip_p = o->vflip_p;
    a->geometry = geometry;
    memcpy(a->crop, o->crop, sizeof a->crop);
    memcpy(a->pad, o->padding, sizeof a->pad);
    a->pad_if_needed = o->pad_if_needed;
    a->mode = o->padding_mode;
    a->fill = o->fill;
    a->norm = k;
    a->rrc = rrc;
    a->rotate = rotate;
    a->jitter = jitter;
    a->affine = affine;
    a->o = *o;
    a->o.mean = a->o.std = NULL;
    a->o.fills = NULL;
    a->nfill = o->fill_channels;
    if (a->nfill > 0) memcpy(a->fills, o->fills, (size_t)a->nfill * sizeof *a->fills);
    for (int i = 0; i < k; i++) {
        a->mean[i] = (float)o->mean[i];
        a->std[i] = (float)o->std[i];
    }
    *out = a;
    return TG_OK;
}

/* The index of a side of extent n that padded index i (i < 0 before the
 * side, i >= n after it) reads in mode m, or -1 for the fill. */
static int64_t pad_source(tg_pad_mode m, int64_t i, int64_t n)
{
    if (i >= 0 && i < n) return i;
    switch (m) {
    case TG_PAD_REPLICATE: return i < 0 ? 0 : n - 1;
    case TG_PAD_REFLECT: return i < 0 ? -i : 2 * (n - 1) - i;
    case TG_PAD_SYMMETRIC: return i < 0 ? -i - 1 : 2 * n - 1 - i;
    default: return -1;
    }
}

/* The extent of an axis of extent n padded by lo and hi, then by
 * pad_if_needed's shortfall on both sides for the crop extent k. */
static int64_t padded_extent(const tg__augment *a, int64_t n, int64_t lo, int64_t hi, int64_t k)
{
    int64_t n1 = n + lo + hi;
    return n1 + 2 * deficit(a->pad_if_needed, n1, k);
}

/* The table of that axis: padded index p reads index t[p] of the axis (-1:
 * the fill).  NULL when out of memory. */
static int64_t *pad_table(const tg__augment *a, int64_t n, int64_t lo, int64_t hi, int64_t k)
{
    int64_t n1 = n + lo + hi, e = deficit(a->pad_if_needed, n1, k), len = n1 + 2 * e;
    int64_t *t = tg__malloc((size_t)len * sizeof *t);
    for (int64_t p = 0; t && p < len; p++) {
        int64_t q = pad_source(a->mode, p - e, n1);
        t[p] = q < 0 ? -1 : pad_source(a->mode, q - lo, n);
    }
    return t;
}

/* floor(u * n), u in [0, 1), kept below n (u * n may round up to n). */
static int64_t pick(double u, int64_t n)
{
    int64_t k = (int64_t)(u * (double)n);
    return k < n ? k : n - 1;
}

/* One sample's draw: its window's (top, left) and flips. */
typedef struct draw_t {
    int64_t top, left;
    bool hflip, vflip;
} draw_t;

/* Sample index's draw among (nh, nw) window offsets. */
static draw_t draw(const tg__augment *a, uint64_t seed, int64_t epoch, int64_t index,
                   int64_t nh, int64_t nw)
{
    tg_rng r = {.seed = seed + (uint64_t)epoch,
                .counter = (UINT64_C(1) << 63) + 4 * (uint64_t)index};
    double u[4];
    for (int i = 0; i < 4; i++) u[i] = tg_rng_uniform(&r);
    return (draw_t){pick(u[0], nh), pick(u[1], nw), u[2] < a->hflip_p, u[3] < a->vflip_p};
}

/* dst (C, h, w) = the window at (d.top, d.left) of src (C, H, W) padded
 * through the tables rows and cols, mirrored as d says. */
static void window(float *dst, const float *src, int64_t c, int64_t hh, int64_t ww,
                   const int64_t *rows, const int64_t *cols, int64_t h, int64_t w, draw_t d,
                   const float *fill)
{
    for (int64_t p = 0; p < c; p++)
        for (int64_t y = 0; y < h; y++) {
            const int64_t r = rows[d.top + (d.vflip ? h - 1 - y : y)];
            float *o = dst + (p * h + y) * w;
            const float *row = src + (p * hh + (r < 0 ? 0 : r)) * ww;
            for (int64_t x = 0; x < w; x++) {
                const int64_t q = cols[d.left + (d.hflip ? w - 1 - x : x)];
                o[x] = r < 0 || q < 0 ? fill[p] : row[q];
            }
        }
}

/* x (n, C, H, W) = (x - mean[c]) / std[c] in f32, as torch's sub_ and div_. */
static void normalize(const tg__augment *a, float *x, int64_t n, int64_t c, int64_t hw)
{
    for (int64_t i = 0; i < n * c; i++) {
        int k = a->norm == 1 ? 0 : (int)(i % c);
        float m = a->mean[k], s = a->std[k];
        for (int64_t j = 0; j < hw; j++) x[i * hw + j] = (x[i * hw + j] - m) / s;
    }
}

/* The fill of each of c channels in ds's pixel range: a's fills, or
 * `single` for every channel.  NULL when out of memory. */
static float *channel_fills(const tg__augment *a, const tg_dataset *ds, double single, int64_t c)
{
    float *f = tg__malloc((size_t)c * sizeof *f);
    for (int64_t p = 0; f && p < c; p++)
        f[p] = tg__dataset_map_unit(ds, a->nfill ? a->fills[a->nfill == 1 ? 0 : p] : single);
    return f;
}

/* *images (n, C, H, W) replaced by its windows (n, C, h, w). */
static int windows(const tg__augment *a, const tg_dataset *ds, tg_tensor **images,
                   const int64_t *ids, uint64_t seed, int64_t epoch)
{
    tg_tensor *x = *images;
    const int64_t *s = tg_tensor_shape(x);
    int64_t n = s[0], c = s[1], hh = s[2], ww = s[3];
    int64_t ph = padded_extent(a, hh, a->pad[1], a->pad[3], a->crop[0]);
    int64_t pw = padded_extent(a, ww, a->pad[0], a->pad[2], a->crop[1]);
    int64_t h = a->crop[0] ? a->crop[0] : ph, w = a->crop[0] ? a->crop[1] : pw;
    /* the batch first: a size that overflows is refused before the tables */
    tg_tensor *y = tg__tensor_empty(TG_F32, 4, (int64_t[]){n, c, h, w});
    int64_t *rows = y ? pad_table(a, hh, a->pad[1], a->pad[3], a->crop[0]) : NULL;
    int64_t *cols = rows ? pad_table(a, ww, a->pad[0], a->pad[2], a->crop[1]) : NULL;
    float *fill = cols ? channel_fills(a, ds, a->fill, c) : NULL;
    if (!fill) {
        tg_tensor_release(y);
        y = NULL;
    }
    if (y) {
        const float *xd = tg_tensor_cdata(x);
        float *yd = tg_tensor_data(y);
        for (int64_t i = 0; i < n; i++)
            window(yd + i * c * h * w, xd + i * c * hh * ww, c, hh, ww, rows, cols, h, w,
                   draw(a, seed, epoch, ids[i], ph - h + 1, pw - w + 1), fill);
        tg_tensor_release(x);
        *images = y;
    }
    free(rows);
    free(cols);
    free(fill);
    if (!y)
        return tg__error(TG_ENOMEM, "loader_next: out of memory for the augmented batch (%lld, "
                         "%lld, %lld, %lld)", (long long)n, (long long)c, (long long)h,
                         (long long)w);
    return TG_OK;
}

/* *images (n, C, H, W) replaced by its resized crops (n, C, h, w). */
static int resized_crops(const tg__augment *a, tg_tensor **images, const int64_t *ids,
                         uint64_t seed, int64_t epoch)
{
    const int64_t *s = tg_tensor_shape(*images);
    const int64_t n = s[0], c = s[1], hh = s[2], ww = s[3];
    const int64_t h = a->o.rrc_size[0], w = a->o.rrc_size[1];
    tg_tensor *y = tg__tensor_empty(TG_F32, 4, (int64_t[]){n, c, h, w});
    if (!y)
        return tg__error(TG_ENOMEM, "loader_next: out of memory for the augmented batch (%lld, "
                         "%lld, %lld, %lld)", (long long)n, (long long)c, (long long)h,
                         (long long)w);
    double scale[2], ratio[2], u[40];
    tg__rrc_ranges(&a->o, scale, ratio);
    const float *xd = tg_tensor_cdata(*images);
    float *yd = tg_tensor_data(y);
    for (int64_t i = 0; i < n; i++) {
        int64_t box[4];
        for (int k = 0; k < 40; k++)
            u[k] = tg__augment_uniform(seed, epoch, ids[i], TG__AUG_RRC_SLOT + k);
        tg__rrc_box(box, hh, ww, scale, ratio, u);
        int rc = tg__resized_crop(yd + i * c * h * w, xd + i * c * hh * ww, c, hh, ww, box,
                                  a->o.rrc_size, a->o.rrc_interpolation);
        if (rc < 0) {
            tg_tensor_release(y);
            return tg__error(rc, "loader_next: out of memory for a resized crop");
        }
    }
    tg_tensor_release(*images);
    *images = y;
    return TG_OK;
}

/* *images (n, C, H, W) replaced by its samples rotated by their angles
 * (n, C, H', W') (the expanded size with rotation_expand, else (H, W)), or
 * by their RandomAffine draws (n, C, H, W) when affine. */
static int grid_transforms(const tg__augment *a, const tg_dataset *ds, tg_tensor **images,
                           const int64_t *ids, uint64_t seed, int64_t epoch, bool affine)
{
    const int64_t *s = tg_tensor_shape(*images);
    const int64_t n = s[0], c = s[1], h = s[2], w = s[3];
    const double lo = a->o.rotation[0], hi = a->o.rotation[1];
    double m[6];
    int64_t size[2] = {h, w};
    if (!affine && a->o.rotation_expand) {
        tg__rotate_matrix(m, &a->o, h, w, lo);   /* one angle: one size */
        tg__rotate_size(size, m, h, w);
    }
    const int64_t oh = size[0], ow = size[1];
    tg_tensor *y = tg__tensor_empty(TG_F32, 4, (int64_t[]){n, c, oh, ow});
    double f = affine ? a->o.affine_fill : a->o.rotation_fill;
    float *fill = y ? channel_fills(a, ds, f, c) : NULL;
    if (!fill) tg_tensor_release(y);
    if (!fill)
        return tg__error(TG_ENOMEM, "loader_next: out of memory for the augmented batch (%lld, "
                         "%lld, %lld, %lld)", (long long)n, (long long)c, (long long)oh,
                         (long long)ow);
    const float *xd = tg_tensor_cdata(*images);
    float *yd = tg_tensor_data(y);
    for (int64_t i = 0; i < n; i++) {
        tg_resize_mode mode = a->o.rotation_interpolation;
        if (affine) {
            double angle, t[2], scale, shear[2];
            tg__affine_draw(&a->o, seed, epoch, ids[i], h, w, &angle, t, &scale, shear);
            tg__affine_matrix(m, &a->o, h, w, angle, t, scale, shear);
            mode = a->o.affine_interpolation;
        } else {
            double u = tg__augment_uniform(seed, epoch, ids[i], TG__AUG_ROTATE_SLOT);
            tg__rotate_matrix(m, &a->o, h, w, lo + u * (hi - lo));
        }
        tg__grid_transform(yd + i * c * oh * ow, xd + i * c * h * w, c, h, w, oh, ow, m, mode,
                           fill);
    }
    free(fill);
    tg_tensor_release(*images);
    *images = y;
    return TG_OK;
}

/* Each sample of x (n, C, hw) through its ColorJitter draw, on the values
 * of the unit range (x * 0.5 + 0.5 and back for TG_PIXELS_SYMMETRIC). */
static void jitter(const tg__augment *a, const tg_dataset *ds, float *x, const int64_t *ids,
                   int64_t n, int64_t c, int64_t hw, uint64_t seed, int64_t epoch)
{
    const bool sym = tg__dataset_pixel_range(ds) == TG_PIXELS_SYMMETRIC;
    bool on[4];
    for (int op = 0; op < 4; op++) on[op] = tg__jitter_range(&a->o, op, (double[2]){0, 0});
    for (int64_t i = 0; i < n; i++) {
        float *v = x + i * c * hw;
        int order[4];
        double factor[4];
        tg__jitter_draw(&a->o, seed, epoch, ids[i], order, factor);
        for (int64_t j = 0; sym && j < c * hw; j++) v[j] = v[j] * 0.5f + 0.5f;
        for (int k = 0; k < 4; k++)
            if (on[order[k]]) tg__color_adjust(v, c, hw, order[k], factor[order[k]]);
        for (int64_t j = 0; sym && j < c * hw; j++) v[j] = (v[j] - 0.5f) / 0.5f;
    }
}

int tg__augment_apply(const tg__augment *a, const tg_dataset *ds, tg_tensor **images,
                      const int64_t *ids, uint64_t seed, int64_t epoch)
{
    if (a->rrc) TG_TRY(resized_crops(a, images, ids, seed, epoch));
    if (a->geometry) TG_TRY(windows(a, ds, images, ids, seed, epoch));
    if (a->rotate) TG_TRY(grid_transforms(a, ds, images, ids, seed, epoch, false));
    if (a->affine) TG_TRY(grid_transforms(a, ds, images, ids, seed, epoch, true));
    const int64_t *s = tg_tensor_shape(*images);
    if (a->jitter)
        jitter(a, ds, tg_tensor_data(*images), ids, s[0], s[1], s[2] * s[3], seed, epoch);
    if (a->norm) normalize(a, tg_tensor_data(*images), s[0], s[1], s[2] * s[3]);
    return TG_OK;
}
