/* src/data/augment_affine.c - torchvision 0.14's T.RandomAffine on f32
 * images (center None): the rules of its options, get_params' draws (the
 * translations rounded to whole pixels, half to even, as Python's round)
 * and F.affine, the inverse matrix through src/data/augment_rotate.c's grid
 * transform. */
#include <math.h>

#include "core/core.h"
#include "data/augment_parts.h"

/* Whether (lo, hi) is a finite range with lo <= hi. */
static bool range_ok(const double *r)
{
    return isfinite(r[0]) && isfinite(r[1]) && r[0] <= r[1];
}

static int check_shear(const tg_augment_options *o)
{
    const int n = o->affine_shear_values;
    const double *s = o->affine_shear;
    TG_CHECK(n == 0 || n == 1 || n == 2 || n == 4, TG_EINVAL,
             "loader_set_augment: affine_shear_values=%d must be 0 (none), 1 (x in [-s, s]), 2 "
             "(an x range) or 4 (x and y ranges)", n);
    TG_CHECK(n != 1 || (isfinite(s[0]) && s[0] >= 0), TG_EINVAL,
             "loader_set_augment: affine_shear[0]=%g must be finite and >= 0 with "
             "affine_shear_values=1", s[0]);
    for (int i = 0; i + 1 < n; i += 2)
        TG_CHECK(range_ok(s + i), TG_EINVAL, "loader_set_augment: affine_shear[%d..%d]={%g, %g} "
                 "must be finite with affine_shear[%d] <= affine_shear[%d]", i, i + 1, s[i],
                 s[i + 1], i, i + 1);
    return TG_OK;
}

int tg__affine_check(const tg_augment_options *o, bool *on)
{
    *on = o->affine;
    TG_CHECK(*on || !o->affine_has_center, TG_EINVAL,
             "loader_set_augment: affine_center is for RandomAffine; affine must be true with "
             "it");
    if (!*on) return TG_OK;
    const double *d = o->affine_degrees, *t = o->affine_translate, *s = o->affine_scale;
    TG_CHECK(range_ok(d), TG_EINVAL, "loader_set_augment: affine_degrees={%g, %g} must be "
             "finite with affine_degrees[0] <= affine_degrees[1]", d[0], d[1]);
    for (int i = 0; i < 2; i++)
        TG_CHECK(t[i] >= 0 && t[i] <= 1, TG_EINVAL,
                 "loader_set_augment: affine_translate[%d]=%g must be in [0, 1]", i, t[i]);
    TG_CHECK((s[0] == 0 && s[1] == 0) || (range_ok(s) && s[0] > 0), TG_EINVAL,
             "loader_set_augment: affine_scale={%g, %g} must be {0, 0} (none) or finite with 0 "
             "< affine_scale[0] <= affine_scale[1]", s[0], s[1]);
    TG_TRY(check_shear(o));
    tg_resize_mode m = o->affine_interpolation;
    TG_CHECK(m == TG_RESIZE_NEAREST || m == TG_RESIZE_BILINEAR, TG_EINVAL,
             "loader_set_augment: affine_interpolation=%d must be TG_RESIZE_NEAREST or "
             "TG_RESIZE_BILINEAR", (int)m);
    TG_CHECK(isfinite(o->affine_fill), TG_EINVAL,
             "loader_set_augment: affine_fill=%g must be finite", o->affine_fill);
    const double *c = o->affine_center;
    TG_CHECK(!o->affine_has_center || (isfinite(c[0]) && isfinite(c[1])), TG_EINVAL,
             "loader_set_augment: affine_center={%g, %g} must be finite", c[0], c[1]);
    return TG_OK;
}

void tg__affine_matrix(double m[6], const tg_augment_options *o, int64_t h, int64_t w,
                       double angle, const double translate[2], double scale,
                       const double shear[2])
{
    double center[2];
    tg__augment_center(center, o->affine_has_center, o->affine_center, h, w);
    tg__affine_inverse(m, center, angle, translate, scale, shear);
}

/* lo + u (hi - lo) with the uniform of slot TG__AUG_AFFINE_SLOT + k. */
static double between(uint64_t seed, int64_t epoch, int64_t index, int k, double lo, double hi)
{
    return lo + tg__augment_uniform(seed, epoch, index, TG__AUG_AFFINE_SLOT + k) * (hi - lo);
}

void tg__affine_draw(const tg_augment_options *o, uint64_t seed, int64_t epoch, int64_t index,
                     int64_t h, int64_t w, double *angle, double translate[2], double *scale,
                     double shear[2])
{
    const double *d = o->affine_degrees, *s = o->affine_scale, *sh = o->affine_shear;
    *angle = between(seed, epoch, index, 0, d[0], d[1]);
    /* max_dx = translate[0] * width, max_dy = translate[1] * height */
    const double ext[2] = {(double)w, (double)h};
    for (int i = 0; i < 2; i++) {
        const double m = o->affine_translate[i] * ext[i];
        translate[i] = nearbyint(between(seed, epoch, index, 1 + i, -m, m)) + 0.0;
    }
    *scale = s[0] == 0 && s[1] == 0 ? 1.0 : between(seed, epoch, index, 3, s[0], s[1]);
    const int n = o->affine_shear_values;
    shear[0] = n == 0 ? 0.0 : n == 1 ? between(seed, epoch, index, 4, -sh[0], sh[0])
                                     : between(seed, epoch, index, 4, sh[0], sh[1]);
    shear[1] = n == 4 ? between(seed, epoch, index, 5, sh[2], sh[3]) : 0.0;
}
