/* src/data/augment_rotate.c - torchvision 0.14's T.RandomRotation on f32
 * images (expand False, center None): F.rotate's inverse affine matrix
 * (_get_inverse_affine_matrix, in double, rounded to f32), the sampling
 * grid of _gen_affine_grid in f32, and torch's CPU grid_sample
 * (padding_mode 'zeros', align_corners False) of the image with a channel
 * of ones, whose sample blends in the fill as _apply_grid_transform does.
 * torch's AVX2 grid_sample kernel is compiled with its multiply-adds fused
 * (the unnormalizing and the sum of the four corners): fmaf here. */
#include <math.h>

#include "core/core.h"
#include "data/augment_parts.h"

int tg__rotate_check(const tg_augment_options *o, bool *on)
{
    const double *d = o->rotation;
    TG_CHECK(isfinite(d[0]) && isfinite(d[1]) && d[0] <= d[1], TG_EINVAL,
             "loader_set_augment: rotation={%g, %g} must be finite with rotation[0] <= "
             "rotation[1]", d[0], d[1]);
    *on = d[0] != 0 || d[1] != 0;
    if (!*on) return TG_OK;
    tg_resize_mode m = o->rotation_interpolation;
    TG_CHECK(m == TG_RESIZE_NEAREST || m == TG_RESIZE_BILINEAR, TG_EINVAL,
             "loader_set_augment: rotation_interpolation=%d must be TG_RESIZE_NEAREST or "
             "TG_RESIZE_BILINEAR", (int)m);
    TG_CHECK(isfinite(o->rotation_fill), TG_EINVAL,
             "loader_set_augment: rotation_fill=%g must be finite", o->rotation_fill);
    return TG_OK;
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

void tg__rotate(float *dst, const float *src, int64_t c, int64_t h, int64_t w, double angle,
                tg_resize_mode mode, const float *fill)
{
    /* _get_inverse_affine_matrix(center 0, -angle, no translation, scale 1,
     * no shear): [cos, sin, 0, -sin, cos, 0] of math.radians(-angle) */
    const double rot = -angle * (M_PI / 180.0);
    const float t0 = (float)cos(rot), t1 = (float)sin(rot), t3 = (float)-sin(rot);
    const float t4 = t0;
    /* theta^T / [0.5 w, 0.5 h] */
    const float hw = (float)(0.5 * (double)w), hh = (float)(0.5 * (double)h);
    const float r00 = t0 / hw, r10 = t1 / hw, r01 = t3 / hh, r11 = t4 / hh;
    const float sw = (float)w / 2.0f, sh = (float)h / 2.0f;
    for (int64_t oy = 0; oy < h; oy++)
        for (int64_t ox = 0; ox < w; ox++) {
            /* the base grid (linspace from -n/2 + 1/2, step 1) times the
             * rescaled theta, as bmm adds it: ((x a + y b) + 1 * 0) */
            const float bx = (float)(-0.5 * (double)w + 0.5) + (float)ox;
            const float by = (float)(-0.5 * (double)h + 0.5) + (float)oy;
            const float gx = (bx * r00 + by * r10) + 0.0f;
            const float gy = (bx * r01 + by * r11) + 0.0f;
            /* grid_sample's unnormalize (align_corners False) */
            const float x = fmaf(gx + 1.0f, sw, -0.5f), y = fmaf(gy + 1.0f, sh, -0.5f);
            float *o = dst + oy * w + ox;
            if (mode == TG_RESIZE_NEAREST) {
                const int64_t nx = (int64_t)nearbyintf(x), ny = (int64_t)nearbyintf(y);
                const bool in = inside(h, w, ny, nx) >= 0.5f;
                for (int64_t p = 0; p < c; p++)
                    o[p * h * w] = in ? src[(p * h + ny) * w + nx] : fill[p];
                continue;
            }
            const float xw = floorf(x), yn = floorf(y);
            const float we = x - xw, e = 1.0f - we, n = y - yn, s = 1.0f - n;
            const float nw = s * e, ne = s * we, swt = n * e, se = n * we;
            const int64_t ix = (int64_t)xw, iy = (int64_t)yn;
            float m = fmaf(inside(h, w, iy, ix + 1), ne, inside(h, w, iy, ix) * nw);
            m = fmaf(inside(h, w, iy + 1, ix), swt, m);
            m = fmaf(inside(h, w, iy + 1, ix + 1), se, m);
            for (int64_t p = 0; p < c; p++) {
                const float *q = src + p * h * w;
                float v = fmaf(at(q, h, w, iy, ix + 1), ne, at(q, h, w, iy, ix) * nw);
                v = fmaf(at(q, h, w, iy + 1, ix), swt, v);
                v = fmaf(at(q, h, w, iy + 1, ix + 1), se, v);
                /* img * mask + (1.0 - mask) * fill, three torch ops */
                const float a = v * m, b = (1.0f - m) * fill[p];
                o[p * h * w] = a + b;
            }
        }
}
