/* src/data/image_transform.c - one image of tg_image_folder_load_ex through
 * torchvision 0.14's
 *   T.ToTensor()                        u8 p -> f32 p / 255
 *   T.Resize(size, interpolation)       F.interpolate: bilinear or bicubic
 *                                       with antialias, or nearest
 *   T.CenterCrop((h, w))                zero padding, then the centred window
 * The sizes follow torchvision's _compute_resized_output_size and
 * F.center_crop, Python's integer and rounding rules included; the
 * filtered resampling is tg_upsample_antialias, the op PyTorch's
 * interpolate is, and nearest a copy of the pixels torch's picks. */
#include <math.h>
#include <string.h>

#include "core/core.h"
#include "data/image_transform.h"
#include "tapegrad/pool.h"

static int check_extent(const char *name, int i, int64_t v)
{
    TG_CHECK(v >= 0 && v <= TG_POOL_MAX_PARAM, TG_EINVAL,
             "image_folder_load_ex: %s[%d]=%lld must be in [0, %lld]", name, i, (long long)v,
             (long long)TG_POOL_MAX_PARAM);
    return TG_OK;
}

int tg__image_options_check(const tg_image_folder_options *o)
{
    TG_CHECK(o->channels == 1 || o->channels == 3, TG_EINVAL,
             "image_folder_load: channels=%d must be 1 (grey) or 3 (RGB)", o->channels);
    TG_CHECK(o->interpolation >= TG_RESIZE_BILINEAR && o->interpolation <= TG_RESIZE_BICUBIC,
             TG_EINVAL, "image_folder_load_ex: interpolation=%d must be TG_RESIZE_BILINEAR, "
             "TG_RESIZE_NEAREST or TG_RESIZE_BICUBIC", (int)o->interpolation);
    for (int i = 0; i < 2; i++) {
        TG_TRY(check_extent("resize", i, o->resize[i]));
        TG_TRY(check_extent("center_crop", i, o->center_crop[i]));
    }
    TG_CHECK(o->resize[0] > 0 || o->resize[1] == 0, TG_EINVAL,
             "image_folder_load_ex: resize={0, %lld}: resize[0] must be > 0 when resize[1] is "
             "given ({s, 0} resizes the shorter side, {h, w} to h x w)",
             (long long)o->resize[1]);
    TG_CHECK((o->center_crop[0] > 0) == (o->center_crop[1] > 0), TG_EINVAL,
             "image_folder_load_ex: center_crop={%lld, %lld} must be {0, 0} (none) or two "
             "extents >= 1", (long long)o->center_crop[0], (long long)o->center_crop[1]);
    TG_CHECK(o->max_size >= 0, TG_EINVAL, "image_folder_load_ex: max_size=%lld must be >= 0",
             (long long)o->max_size);
    if (o->max_size > 0) {
        TG_CHECK(o->resize[0] > 0 && o->resize[1] == 0, TG_EINVAL,
                 "image_folder_load_ex: max_size=%lld needs resize {s, 0} (the shorter side); "
                 "resize is {%lld, %lld}", (long long)o->max_size, (long long)o->resize[0],
                 (long long)o->resize[1]);
        TG_CHECK(o->max_size > o->resize[0], TG_EINVAL,
                 "image_folder_load_ex: max_size=%lld must be greater than the shorter side's "
                 "size resize[0]=%lld", (long long)o->max_size, (long long)o->resize[0]);
    }
    return TG_OK;
}

/* The (h', w') T.Resize makes of an h x w image (_compute_resized_output_size):
 * {s, 0} scales the shorter side to s and the longer to int(s * long /
 * short), Python's truncation of the double quotient. */
static int resized_size(const tg_image_folder_options *o, int64_t h, int64_t w, int64_t hw[2],
                        const char *file)
{
    if (o->resize[1] > 0) {
        hw[0] = o->resize[0];
        hw[1] = o->resize[1];
        return TG_OK;
    }
    int64_t s = o->resize[0], shrt = w <= h ? w : h, lng = w <= h ? h : w;
    int64_t new_short = s, new_long = (int64_t)((double)(s * lng) / (double)shrt);
    if (o->max_size > 0 && new_long > o->max_size) {
        new_short = (int64_t)((double)(o->max_size * new_short) / (double)new_long);
        new_long = o->max_size;
    }
    TG_CHECK(new_short >= 1 && new_long <= TG_POOL_MAX_PARAM, TG_ESHAPE,
             "image_folder_load_ex: '%s' (%lldx%lld, width x height) resized to %lld on its "
             "shorter side (max_size %lld) would be %lldx%lld", file, (long long)w,
             (long long)h, (long long)s, (long long)o->max_size,
             (long long)(w <= h ? new_short : new_long),
             (long long)(w <= h ? new_long : new_short));
    hw[0] = w <= h ? new_long : new_short;
    hw[1] = w <= h ? new_short : new_long;
    return TG_OK;
}

/* Where T.CenterCrop's window of extent k starts in a side of extent n: a
 * surplus d = n - k >= 0 gives int(round(d / 2.0)), Python's round taking
 * halves to the even neighbour; a shortfall pads (k - n) // 2 zeros before
 * the side, so the window starts that far before it. */
static int64_t crop_start(int64_t n, int64_t k)
{
    if (k > n) return -((k - n) / 2);
    int64_t d = n - k, q = d / 2;
    return d % 2 == 0 || q % 2 == 0 ? q : q + 1;
}

/* dst (C, kh, kw) = the window of src (C, h, w) at (top, left), elements of
 * elt bytes, zero outside src. */
static void crop_planes(void *dst, const void *src, size_t elt, int64_t c, int64_t h, int64_t w,
                        int64_t kh, int64_t kw, int64_t top, int64_t left)
{
    /* the columns of the window inside src: [x0, x1) */
    int64_t x0 = left < 0 ? -left : 0, x1 = w - left < kw ? w - left : kw;
    if (x1 < x0) x1 = x0;
    uint8_t *d = dst;
    const uint8_t *s = src;
    for (int64_t p = 0; p < c; p++)
        for (int64_t y = 0; y < kh; y++) {
            uint8_t *row = d + (size_t)((p * kh + y) * kw) * elt;
            int64_t sy = y + top;
            memset(row, 0, (size_t)kw * elt);
            if (sy < 0 || sy >= h || x1 == x0) continue;
            memcpy(row + (size_t)x0 * elt, s + (size_t)((p * h + sy) * w + x0 + left) * elt,
                   (size_t)(x1 - x0) * elt);
        }
}

/* The input index torch's 'nearest' reads for output index o of an axis
 * resized from n to m: min(floor(o * s), n - 1) with the f32 scale
 * s = n / m (area_pixel_compute_scale<float>); the exact product o * s is
 * rounded to f32 before the floor, as its floorf of the double product. */
static int64_t nearest_source(int64_t o, int64_t n, int64_t m)
{
    const float s = (float)n / (float)m;
    const int64_t i = (int64_t)floorf((float)((double)o * (double)s));
    return i < n - 1 ? i : n - 1;
}

/* *out (1, C, h', w') f32 = x (1, C, h, w) resized by torch's 'nearest'. */
static int resize_nearest(tg_tensor **out, const tg_tensor *x, const int64_t hw[2])
{
    const int64_t *s = tg_tensor_shape(x), c = s[1], h = s[2], w = s[3];
    tg_tensor *y = tg__tensor_empty(TG_F32, 4, (int64_t[]){1, c, hw[0], hw[1]});
    if (!y) return TG_ENOMEM;
    const float *src = tg_tensor_cdata(x);
    float *dst = tg_tensor_data(y);
    for (int64_t p = 0; p < c; p++)
        for (int64_t oy = 0; oy < hw[0]; oy++) {
            const float *row = src + (p * h + nearest_source(oy, h, hw[0])) * w;
            for (int64_t ox = 0; ox < hw[1]; ox++)
                *dst++ = row[nearest_source(ox, w, hw[1])];
        }
    *out = y;
    return TG_OK;
}

/* *out (C, h', w') f32 = T.Resize of T.ToTensor's planes / 255. */
static int resize(tg_tensor **out, const uint8_t *planes, int64_t c, int64_t h, int64_t w,
                  const int64_t hw[2], tg_resize_mode mode)
{
    tg_tensor *x = tg__tensor_empty(TG_F32, 4, (int64_t[]){1, c, h, w});
    if (!x) return TG_ENOMEM;
    float *d = tg_tensor_data(x);
    for (int64_t i = 0; i < c * h * w; i++) d[i] = (float)planes[i] / 255.0f;
    tg_tensor *y = NULL;
    int rc = 0;
    /* torchvision returns an image of the new size as it is (and the op
     * would leave it so too).  The op's result is ours, not the caller's
     * scope's: library depth. */
    tg__lib_enter();
    const tg_upsample_mode um = mode == TG_RESIZE_BICUBIC ? TG_UPSAMPLE_BICUBIC
                                                          : TG_UPSAMPLE_LINEAR;
    if (hw[0] != h || hw[1] != w)
        rc = mode == TG_RESIZE_NEAREST ? resize_nearest(&y, x, hw)
                                       : tg_upsample_antialias(&y, x, um, hw, false);
    if (rc == 0 && y && !tg_tensor_is_contiguous(y)) {
        tg_tensor *yc = NULL;
        rc = tg_tensor_contiguous(&yc, y);
        tg_tensor_release(y);
        y = yc;
    }
    tg__lib_leave();
    if (rc == 0) *out = y ? y : tg_tensor_retain(x);
    tg_tensor_release(x);
    return rc;
}

int tg__image_transform(tg_tensor **out, const uint8_t *planes, int64_t h, int64_t w,
                        const tg_image_folder_options *o, const char *file)
{
    const int64_t c = o->channels;
    const void *src = planes;
    tg_tensor *resized = NULL;
    int64_t hw[2] = {h, w};
    tg_dtype dt = TG_U8;
    if (o->resize[0] > 0) {
        TG_TRY(resized_size(o, h, w, hw, file));
        TG_TRY(resize(&resized, planes, c, h, w, hw, o->interpolation));
        src = tg_tensor_cdata(resized);
        dt = TG_F32;
    }
    int64_t kh = o->center_crop[0] > 0 ? o->center_crop[0] : hw[0];
    int64_t kw = o->center_crop[0] > 0 ? o->center_crop[1] : hw[1];
    tg_tensor *y = NULL;
    if (kh <= INT64_MAX / 4 / c / kw)   /* else out of memory for sure */
        y = tg__tensor_empty(dt, 3, (int64_t[]){c, kh, kw});
    if (y)
        crop_planes(tg_tensor_data(y), src, tg_dtype_size(dt), c, hw[0], hw[1], kh, kw,
                    crop_start(hw[0], kh), crop_start(hw[1], kw));
    tg_tensor_release(resized);
    if (!y)
        return tg__error(TG_ENOMEM, "image_folder_load_ex: out of memory for a %lldx%lld image",
                         (long long)kw, (long long)kh);
    *out = y;
    return TG_OK;
}
