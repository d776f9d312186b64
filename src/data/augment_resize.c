/* src/data/augment_resize.c - torchvision 0.14's T.RandomResizedCrop on f32
 * images: its get_params (ten attempts, then the central crop) and
 * F.resized_crop on tensors, F.interpolate without antialias (bilinear and
 * bicubic by tg_upsample_linear / tg_upsample_bicubic, align_corners
 * False; nearest by torch's 'nearest' index rule). */
#include <math.h>
#include <string.h>

#include "core/core.h"
#include "data/augment_parts.h"
#include "tapegrad/pool.h"

static const double SCALE[2] = {0.08, 1.0}, RATIO[2] = {3.0 / 4.0, 4.0 / 3.0};

void tg__rrc_ranges(const tg_augment_options *o, double scale[2], double ratio[2])
{
    bool s0 = o->rrc_scale[0] == 0 && o->rrc_scale[1] == 0;
    bool r0 = o->rrc_ratio[0] == 0 && o->rrc_ratio[1] == 0;
    memcpy(scale, s0 ? SCALE : o->rrc_scale, 2 * sizeof *scale);
    memcpy(ratio, r0 ? RATIO : o->rrc_ratio, 2 * sizeof *ratio);
}

int tg__rrc_check(const tg_augment_options *o, const int64_t chw[3], bool *on)
{
    (void)chw;
    for (int i = 0; i < 2; i++)
        TG_CHECK(o->rrc_size[i] >= 0 && o->rrc_size[i] <= INT32_MAX, TG_EINVAL,
                 "loader_set_augment: rrc_size[%d]=%lld must be in [0, %d]", i,
                 (long long)o->rrc_size[i], INT32_MAX);
    TG_CHECK((o->rrc_size[0] > 0) == (o->rrc_size[1] > 0), TG_EINVAL,
             "loader_set_augment: rrc_size={%lld, %lld} must be {0, 0} (none) or two extents "
             ">= 1", (long long)o->rrc_size[0], (long long)o->rrc_size[1]);
    *on = o->rrc_size[0] > 0;
    if (!*on) return TG_OK;
    TG_CHECK(o->crop[0] == 0, TG_EINVAL,
             "loader_set_augment: rrc_size (RandomResizedCrop) and crop (RandomCrop) must not "
             "be given together");
    double scale[2], ratio[2];
    tg__rrc_ranges(o, scale, ratio);
    TG_CHECK(isfinite(scale[0]) && isfinite(scale[1]) && scale[0] >= 0 && scale[0] <= scale[1],
             TG_EINVAL, "loader_set_augment: rrc_scale={%g, %g} must be finite with 0 <= "
             "rrc_scale[0] <= rrc_scale[1]", scale[0], scale[1]);
    TG_CHECK(isfinite(ratio[0]) && isfinite(ratio[1]) && ratio[0] > 0 && ratio[0] <= ratio[1],
             TG_EINVAL, "loader_set_augment: rrc_ratio={%g, %g} must be finite with 0 < "
             "rrc_ratio[0] <= rrc_ratio[1]", ratio[0], ratio[1]);
    tg_resize_mode m = o->rrc_interpolation;
    TG_CHECK(m == TG_RESIZE_BILINEAR || m == TG_RESIZE_NEAREST || m == TG_RESIZE_BICUBIC,
             TG_EINVAL, "loader_set_augment: rrc_interpolation=%d must be TG_RESIZE_BILINEAR, "
             "TG_RESIZE_NEAREST or TG_RESIZE_BICUBIC", (int)m);
    return TG_OK;
}

/* floor(u * n), u in [0, 1), kept below n. */
static int64_t pick(double u, int64_t n)
{
    int64_t k = (int64_t)(u * (double)n);
    return k < n ? k : n - 1;
}

/* Python's int(round(v)) (halves to even) for v >= 0 of a sane size. */
static int64_t round_even(double v) { return v < 9e18 ? (int64_t)nearbyint(v) : INT64_MAX; }

void tg__rrc_box(int64_t box[4], int64_t hh, int64_t ww, const double scale[2],
                 const double ratio[2], const double u[40])
{
    const double area = (double)hh * (double)ww;
    const double lr0 = log(ratio[0]), lr1 = log(ratio[1]);
    for (int a = 0; a < 10; a++) {
        const double *v = u + 4 * a;
        double target = area * (scale[0] + v[0] * (scale[1] - scale[0]));
        double aspect = exp(lr0 + v[1] * (lr1 - lr0));
        int64_t w = round_even(sqrt(target * aspect)), h = round_even(sqrt(target / aspect));
        if (w > 0 && w <= ww && h > 0 && h <= hh) {
            box[0] = pick(v[2], hh - h + 1);
            box[1] = pick(v[3], ww - w + 1);
            box[2] = h;
            box[3] = w;
            return;
        }
    }
    const double in_ratio = (double)ww / (double)hh;
    int64_t w = ww, h = hh;
    if (in_ratio < ratio[0]) h = round_even((double)w / ratio[0]);
    else if (in_ratio > ratio[1]) w = round_even((double)h * ratio[1]);
    box[0] = (hh - h) / 2;
    box[1] = (ww - w) / 2;
    box[2] = h;
    box[3] = w;
}

/* The input index torch's 'nearest' reads for output index o of an axis
 * resized from n to m: min(floor(o * s), n - 1), s = n / m in f32, the
 * product rounded to f32 before the floor (as src/data/image_transform.c). */
static int64_t nearest_source(int64_t o, int64_t n, int64_t m)
{
    const float s = (float)n / (float)m;
    const int64_t i = (int64_t)floorf((float)((double)o * (double)s));
    return i < n - 1 ? i : n - 1;
}

int tg__resized_crop(float *dst, const float *src, int64_t c, int64_t hh, int64_t ww,
                     const int64_t box[4], const int64_t size[2], tg_resize_mode mode)
{
    const int64_t top = box[0], left = box[1], h = box[2], w = box[3];
    if (mode == TG_RESIZE_NEAREST) {
        for (int64_t p = 0; p < c; p++)
            for (int64_t y = 0; y < size[0]; y++) {
                const float *row = src + (p * hh + top + nearest_source(y, h, size[0])) * ww;
                for (int64_t x = 0; x < size[1]; x++)
                    *dst++ = row[left + nearest_source(x, w, size[1])];
            }
        return TG_OK;
    }
    tg_tensor *x = tg__tensor_empty(TG_F32, 4, (int64_t[]){1, c, h, w}), *y = NULL;
    if (!x) return TG_ENOMEM;
    float *xd = tg_tensor_data(x);
    for (int64_t p = 0; p < c; p++)
        for (int64_t r = 0; r < h; r++)
            memcpy(xd + (p * h + r) * w, src + (p * hh + top + r) * ww + left,
                   (size_t)w * sizeof *xd);
    /* the op's result is ours, not the caller's scope's: library depth */
    tg__lib_enter();
    int rc = mode == TG_RESIZE_BICUBIC ? tg_upsample_bicubic(&y, x, size, false)
                                       : tg_upsample_linear(&y, x, 2, size, false);
    if (rc == 0 && !tg_tensor_is_contiguous(y)) {
        tg_tensor *yc = NULL;
        rc = tg_tensor_contiguous(&yc, y);
        tg_tensor_release(y);
        y = yc;
    }
    tg__lib_leave();
    if (rc == 0) memcpy(dst, tg_tensor_cdata(y), (size_t)(c * size[0] * size[1]) * sizeof *dst);
    tg_tensor_release(x);
    tg_tensor_release(y);
    return rc;
}
