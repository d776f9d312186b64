/* src/data/augment_color.c - torchvision 0.14's T.ColorJitter on f32
 * images: F.adjust_brightness, F.adjust_contrast, F.adjust_saturation and
 * F.adjust_hue of torchvision/transforms/functional_tensor.py, operation by
 * operation in f32 as torch evaluates them (a Python float scalar rounded to
 * f32 before it meets the tensor), and the loader's draws of their order
 * and factors. */
#include <math.h>

#include "core/core.h"
#include "data/augment_parts.h"

static const char *const NAME[4] = {"brightness", "contrast", "saturation", "hue"};

double tg__augment_uniform(uint64_t seed, int64_t epoch, int64_t index, int slot)
{
    tg_rng r = {.seed = seed + (uint64_t)epoch,
                .counter = (UINT64_C(1) << 62) + TG__AUG_SLOTS * (uint64_t)index +
                           (uint64_t)slot};
    return tg_rng_uniform(&r);
}

static double magnitude(const tg_augment_options *o, int op)
{
    const double m[4] = {o->brightness, o->contrast, o->saturation, o->hue};
    return m[op];
}

static const double *range_of(const tg_augment_options *o, int op)
{
    const double *r[4] = {o->brightness_range, o->contrast_range, o->saturation_range,
                          o->hue_range};
    return r[op];
}

bool tg__jitter_range(const tg_augment_options *o, int op, double r[2])
{
    const double *g = range_of(o, op), m = magnitude(o, op), centre = op == TG__HUE ? 0 : 1;
    if (g[0] != 0 || g[1] != 0) {
        r[0] = g[0];
        r[1] = g[1];
    } else {
        r[0] = op == TG__HUE ? -m : (1 - m > 0 ? 1 - m : 0);
        r[1] = op == TG__HUE ? m : 1 + m;
    }
    /* torchvision's None: (1, 1), or (0, 0) for hue */
    return !(r[0] == centre && r[1] == centre);
}

int tg__jitter_check(const tg_augment_options *o, int64_t c, bool *on)
{
    *on = false;
    for (int op = 0; op < 4; op++) {
        double m = magnitude(o, op), hi = op == TG__HUE ? 0.5 : INFINITY;
        TG_CHECK(m >= 0 && m <= hi && !isinf(m), TG_EINVAL,
                 "loader_set_augment: %s=%g must be %s", NAME[op], m,
                 op == TG__HUE ? "in [0, 0.5]" : "finite and >= 0");
        const double *g = range_of(o, op), lo = op == TG__HUE ? -0.5 : 0;
        if (g[0] != 0 || g[1] != 0) {
            TG_CHECK(m == 0, TG_EINVAL, "loader_set_augment: %s=%g and %s_range={%g, %g} are "
                     "both given; give one", NAME[op], m, NAME[op], g[0], g[1]);
            TG_CHECK(lo <= g[0] && g[0] <= g[1] && g[1] <= hi && !isinf(g[1]), TG_EINVAL,
                     "loader_set_augment: %s_range={%g, %g} must be %s", NAME[op], g[0], g[1],
                     op == TG__HUE ? "-0.5 <= lo <= hi <= 0.5" : "finite with 0 <= lo <= hi");
        }
        double r[2];
        *on = *on || tg__jitter_range(o, op, r);
    }
    TG_CHECK(!*on || c == 1 || c == 3, TG_EINVAL,
             "loader_set_augment: brightness, contrast, saturation and hue (ColorJitter) need "
             "images of 1 or 3 channels, not %lld", (long long)c);
    return TG_OK;
}

void tg__jitter_draw(const tg_augment_options *o, uint64_t seed, int64_t epoch, int64_t index,
                     int order[4], double factor[4])
{
    for (int i = 0; i < 4; i++) order[i] = i;
    /* Fisher-Yates: position i (3, 2, 1) swaps with floor(u * (i + 1)) */
    for (int i = 3, s = TG__AUG_JITTER_SLOT; i >= 1; i--, s++) {
        int j = (int)(tg__augment_uniform(seed, epoch, index, s) * (i + 1));
        j = j <= i ? j : i;
        int t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (int op = 0; op < 4; op++) {
        double r[2];
        const bool on = tg__jitter_range(o, op, r);
        double u = tg__augment_uniform(seed, epoch, index, TG__AUG_JITTER_SLOT + 3 + op);
        factor[op] = on ? r[0] + u * (r[1] - r[0]) : (op == TG__HUE ? 0 : 1);
    }
}

/* torch's clamp(0, 1) (NaN stays NaN). */
static float clamp01(float v) { return v < 0.0f ? 0.0f : v > 1.0f ? 1.0f : v; }

/* rgb_to_grayscale: 0.2989 r + 0.587 g + 0.114 b, left to right in f32. */
static float grey(float r, float g, float b)
{
    return (0.2989f * r + 0.587f * g) + 0.114f * b;
}

/* _blend(x, y, f): (f x + (1 - f) y).clamp(0, 1), f and 1 - f rounded from
 * double to f32. */
static float blend(float x, float y, float f, float f1) { return clamp01(f * x + f1 * y); }

/* The mean of the grey image (or of the one channel): torch sums in f32
 * and divides by the count; the sum here is in double, rounded once, which
 * may differ from torch's f32 cascade in its last bit. */
static float grey_mean(const float *x, int64_t c, int64_t hw)
{
    double s = 0;
    for (int64_t i = 0; i < hw; i++)
        s += c == 3 ? grey(x[i], x[hw + i], x[2 * hw + i]) : x[i];
    return (float)s / (float)hw;
}

/* _rgb2hsv of one pixel, h moved by the hue factor ((h + f) % 1.0), then
 * _hsv2rgb, as functional_tensor.py's tensor expressions. */
static void hue_pixel(float *r, float *g, float *b, float f)
{
    const float maxc = fmaxf(fmaxf(*r, *g), *b), minc = fminf(fminf(*r, *g), *b);
    const bool eqc = maxc == minc;
    const float cr = maxc - minc;
    const float s = cr / (eqc ? 1.0f : maxc), crd = eqc ? 1.0f : cr;
    const float rc = (maxc - *r) / crd, gc = (maxc - *g) / crd, bc = (maxc - *b) / crd;
    float h = maxc == *r ? bc - gc
              : maxc == *g ? (2.0f + rc) - bc
                           : (4.0f + gc) - rc;
    h = fmodf(h / 6.0f + 1.0f, 1.0f);
    /* torch.remainder(h + f, 1.0): fmod, plus 1 when negative */
    h = fmodf(h + f, 1.0f);
    if (h < 0.0f) h += 1.0f;
    const float v = maxc, h6 = h * 6.0f, i = floorf(h6), fr = h6 - i;
    const float p = clamp01(v * (1.0f - s)), q = clamp01(v * (1.0f - s * fr));
    const float t = clamp01(v * (1.0f - s * (1.0f - fr)));
    const float a1[6] = {v, q, p, p, t, v}, a2[6] = {t, v, v, q, p, p},
                a3[6] = {p, p, t, v, v, q};
    const int k = ((int)i % 6 + 6) % 6;
    *r = a1[k];
    *g = a2[k];
    *b = a3[k];
}

void tg__color_adjust(float *x, int64_t c, int64_t hw, int op, double f)
{
    const float ff = (float)f, f1 = (float)(1.0 - f);
    if (op == TG__BRIGHTNESS) {
        for (int64_t i = 0; i < c * hw; i++) x[i] = blend(x[i], 0.0f, ff, f1);
    } else if (op == TG__CONTRAST) {
        const float m = grey_mean(x, c, hw);
        for (int64_t i = 0; i < c * hw; i++) x[i] = blend(x[i], m, ff, f1);
    } else if (c == 3 && op == TG__SATURATION) {
        for (int64_t i = 0; i < hw; i++) {
            const float gy = grey(x[i], x[hw + i], x[2 * hw + i]);
            for (int k = 0; k < 3; k++) x[k * hw + i] = blend(x[k * hw + i], gy, ff, f1);
        }
    } else if (c == 3 && op == TG__HUE) {
        for (int64_t i = 0; i < hw; i++) hue_pixel(x + i, x + hw + i, x + 2 * hw + i, ff);
    }
}
