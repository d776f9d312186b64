/* src/data/augment_rotate.c - torchvision 0.14's grid transforms on f32
 * images, which T.RandomRotation and T.RandomAffine share: the inverse
 * affine matrix (_get_inverse_affine_matrix, in double as Python evaluates
 * it, rounded to f32), the sampling grid of _gen_affine_grid in f32, and
 * torch's CPU grid_sample (padding_mode 'zeros', align_corners False) of
 * the image with a channel of ones, whose sample blends in the fill as
 * _apply_grid_transform does; F.rotate's expanded size
 * (_compute_affine_output_size).  torch's AVX2 grid_sample kernel is
 * compiled with its multiply-adds fused (the unnormalizing and the sum of
 * the four corners): fmaf here. */
#include <math.h>

#include "core/core.h"
#include "data/augment_parts.h"

int tg__rotate_check(const tg_augment_options *o, const int64_t hw[2], bool *on)
{
    const double *d = o->rotation;
    TG_CHECK(isfinite(d[0]) && isfinite(d[1]) && d[0] <= d[1], TG_EINVAL,
             "loader_set_augment: rotation={%g, %g} must be finite with rotation[0] <= "
             "rotation[1]", d[0], d[1]);
    *on = d[0] != 0 || d[1] != 0;
    TG_CHECK(*on || (!o->rotation_expand && !o->rotation_has_center), TG_EINVAL,
             "loader_set_augment: rotation_expand and rotation_center are for the rotation; "
             "rotation must be given with them");
    if (!*on) return TG_OK;
    tg_resize_mode m = o->rotation_interpolation;
    TG_CHECK(m == TG_RESIZE_NEAREST || m == TG_RESIZE_BILINEAR, TG_EINVAL,
             "loader_set_augment: rotation_interpolation=%d must be TG_RESIZE_NEAREST or "
             "TG_RESIZE_BILINEAR", (int)m);
    TG_CHECK(isfinite(o->rotation_fill), TG_EINVAL,
             "loader_set_augment: rotation_fill=%g must be finite", o->rotation_fill);
    const double *c = o->rotation_center;
    TG_CHECK(!o->rotation_has_center || (isfinite(c[0]) && isfinite(c[1])), TG_EINVAL,
             "loader_set_augment: rotation_center={%g, %g} must be finite", c[0], c[1]);
    /* expand sizes the output by the angle: a batch holds one size */
    TG_CHECK(!o->rotation_expand || d[0] == d[1], TG_EINVAL,
             "loader_set_augment: rotation_expand needs one angle (rotation[0] == rotation[1]"
             ", not {%g, %g}): the expanded size depends on the angle, and the samples of a "
             "batch share one size", d[0], d[1]);
    if (o->rotation_expand) {
        double mat[6];
        int64_t size[2];
        tg__rotate_matrix(mat, o, hw[0], hw[1], d[0]);
        tg__rotate_size(size, mat, hw[0], hw[1]);
        TG_CHECK(size[0] >= 1 && size[1] >= 1 && size[0] <= INT32_MAX && size[1] <= INT32_MAX,
                 TG_EINVAL, "loader_set_augment: rotation_expand gives the size (%lld, %lld), "
                 "which must be in [1, %d]", (long long)size[0], (long long)size[1], INT32_MAX);
    }
    return TG_OK;
}

void tg__affine_inverse(double m[6], const double center[2], double angle,
                        const double translate[2], double scale, const double shear[2])
{
    const double rot = angle * (M_PI / 180.0), sx = shear[0] * (M_PI / 180.0),
                 sy = shear[1] * (M_PI / 180.0);
    const double cx = center[0], cy = center[1], tx = translate[0], ty = translate[1];
    const double a = cos(rot - sy) / cos(sy);
    const double b = -cos(rot - sy) * tan(sx) / cos(sy) - sin(rot);
    const double c = sin(rot - sy) / cos(sy);
    const double d = -sin(rot - sy) * tan(sx) / cos(sy) + cos(rot);
    const double r[6] = {d, -b, 0.0, -c, a, 0.0};
    for (int i = 0; i < 6; i++) m[i] = r[i] / scale;
    m[2] += m[0] * (-cx - tx) + m[1] * (-cy - ty);
    m[5] += m[3] * (-cx - tx) + m[4] * (-cy - ty);
    m[2] += cx;
    m[5] += cy;
}

void tg__augment_center(double center[2], bool given, const double xy[2], int64_t h,
                        int64_t w)
{
    center[0] = center[1] = 0.0;
    if (given) {
        /* (c - s * 0.5) for the (x, y) centre and the sizes (w, h) */
        center[0] = xy[0] - (double)w * 0.5;
        center[1] = xy[1] - (double)h * 0.5;
    }
}

void tg__rotate_matrix(double m[6], const tg_augment_options *o, int64_t h, int64_t w,
                       double angle)
{
    double center[2];
    tg__augment_center(center, o->rotation_has_center, o->rotation_center, h, w);
    tg__affine_inverse(m, center, -angle, (const double[2]){0.0, 0.0}, 1.0,
                       (const double[2]){0.0, 0.0});
}

void tg__rotate_size(int64_t size[2], const double m[6], int64_t h, int64_t w)
{
    /* the corners (-w/2, -h/2), (-w/2, h/2), (w/2, h/2), (w/2, -h/2) in f32
     * through theta (f32), shifted by (w/2, h/2); the extent of their
     * bounds truncated to 1e-4 (f32, as torch) */
    const float t[6] = {(float)m[0], (float)m[1], (float)m[2], (float)m[3], (float)m[4],
                        (float)m[5]};
    const float x = (float)(-0.5 * (double)w), y = (float)(-0.5 * (double)h);
    const float px[4] = {x, x, -x, -x}, py[4] = {y, -y, -y, y};
    float lo[2] = {INFINITY, INFINITY}, hi[2] = {-INFINITY, -INFINITY};
    for (int k = 0; k < 4; k++)
        for (int j = 0; j < 2; j++) {
            const float v = (px[k] * t[3 * j] + py[k] * t[3 * j + 1]) + t[3 * j + 2];
            lo[j] = fminf(lo[j], v);
            hi[j] = fmaxf(hi[j], v);
        }
    const float shift[2] = {(float)((double)w * 0.5), (float)((double)h * 0.5)};
    const float tol = 1e-4f;
    int64_t ext[2];
    for (int j = 0; j < 2; j++) {
        const float cmax = ceilf(truncf((hi[j] + shift[j]) / tol) * tol);
        const float cmin = floorf(truncf((lo[j] + shift[j]) / tol) * tol);
        const float e = cmax - cmin;
        ext[j] = isfinite(e) && e > -1 && e < 0x1p62f ? (int64_t)e : -1;
    }
    size[0] = ext[1];
    size[1] = ext[0];
}

/* The value of plane p at (y, x), 0 outside it (grid_sample's zeros). */
static float at(const float *p, int64_t h, int64_t w, int64_t y, int64_t x)
{
    return y >= 0 && y < h && x >= 0 && x < w ? p[y * w + x] : 0.0f;
}

static float inside(int64_t h, int64_t w, int64_t y, int64_t x)
{
    return y >= 0 && y < h && x >= 0 && x < w ? 1.0f : 0.0f;
}

/* Whether a sampling point is far enough inside the int64 range to index
 * (a huge or non-finite one is outside every image: the fill). */
static bool indexable(float x, float y)
{
    return fabsf(x) <= 0x1p60f && fabsf(y) <= 0x1p60f;
}

void tg__grid_transform(float *dst, const float *src, int64_t c, int64_t h, int64_t w,
                        int64_t oh, int64_t ow, const double m[6], tg_resize_mode mode,
                        const float *fill)
{
    const float t[6] = {(float)m[0], (float)m[1], (float)m[2], (float)m[3], (float)m[4],
                        (float)m[5]};
    /* theta^T / [0.5 w, 0.5 h] */
    const float hw = (float)(0.5 * (double)w), hh = (float)(0.5 * (double)h);
    const float r00 = t[0] / hw, r10 = t[1] / hw, r20 = t[2] / hw;
    const float r01 = t[3] / hh, r11 = t[4] / hh, r21 = t[5] / hh;
    const float sw = (float)w / 2.0f, sh = (float)h / 2.0f;
    const int64_t plane = oh * ow;
    for (int64_t oy = 0; oy < oh; oy++)
        for (int64_t ox = 0; ox < ow; ox++) {
            /* the base grid (linspace from -n/2 + 1/2, step 1) times the
             * rescaled theta, as bmm adds it: ((x a + y b) + 1 c) */
            const float bx = (float)(-0.5 * (double)ow + 0.5) + (float)ox;
            const float by = (float)(-0.5 * (double)oh + 0.5) + (float)oy;
            const float gx = (bx * r00 + by * r10) + r20;
            const float gy = (bx * r01 + by * r11) + r21;
            /* grid_sample's unnormalize (align_corners False) */
            float x = fmaf(gx + 1.0f, sw, -0.5f), y = fmaf(gy + 1.0f, sh, -0.5f);
            if (!indexable(x, y)) x = y = -2.0f;
            float *o = dst + oy * ow + ox;
            if (mode == TG_RESIZE_NEAREST) {
                const int64_t nx = (int64_t)nearbyintf(x), ny = (int64_t)nearbyintf(y);
                const bool in = inside(h, w, ny, nx) >= 0.5f;
                for (int64_t p = 0; p < c; p++)
                    o[p * plane] = in ? src[(p * h + ny) * w + nx] : fill[p];
                continue;
            }
            const float xw = floorf(x), yn = floorf(y);
            const float we = x - xw, e = 1.0f - we, n = y - yn, s = 1.0f - n;
            const float nw = s * e, ne = s * we, swt = n * e, se = n * we;
            const int64_t ix = (int64_t)xw, iy = (int64_t)yn;
            float mk = fmaf(inside(h, w, iy, ix + 1), ne, inside(h, w, iy, ix) * nw);
            mk = fmaf(inside(h, w, iy + 1, ix), swt, mk);
            mk = fmaf(inside(h, w, iy + 1, ix + 1), se, mk);
            for (int64_t p = 0; p < c; p++) {
                const float *q = src + p * h * w;
                float v = fmaf(at(q, h, w, iy, ix + 1), ne, at(q, h, w, iy, ix) * nw);
                v = fmaf(at(q, h, w, iy + 1, ix), swt, v);
                v = fmaf(at(q, h, w, iy + 1, ix + 1), se, v);
                /* img * mask + (1.0 - mask) * fill, three torch ops */
                const float a = v * mk, b = (1.0f - mk) * fill[p];
                o[p * plane] = a + b;
            }
        }
}

void tg__rotate(float *dst, const float *src, int64_t c, int64_t h, int64_t w, double angle,
                tg_resize_mode mode, const float *fill)
{
    const tg_augment_options none = TG_AUGMENT_OPTIONS_INIT;
    double m[6];
    tg__rotate_matrix(m, &none, h, w, angle);
    tg__grid_transform(dst, src, c, h, w, h, w, m, mode, fill);
}
