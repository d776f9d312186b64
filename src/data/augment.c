/* src/data/augment.c - torchvision's T.RandomCrop(size, padding, fill,
 * padding_mode), T.RandomHorizontalFlip(p) and T.Normalize(mean, std) on a
 * loader's batches.
 *
 * Sample `index` of epoch e draws three uniforms from tg_rng with seed
 * (seed + e) at counters 2^63 + 4 index .. + 2, so its draw is a function
 * of (seed, e, index) alone: the same whatever the order, batch, shard or
 * resumption that hands the sample out, and apart from the epoch's shuffle,
 * which uses counters 0 .. N - 2 of the same seed. */
#include <math.h>
#include <string.h>

#include "core/core.h"
#include "data/augment.h"
#include "data/dataset_pixels.h"

struct tg__augment {
    double hflip_p;
    int64_t crop[2];      /* (h, w); {0, 0}: the image's own size */
    int64_t pad[4];       /* tg_pad's order: left, right, top, bottom */
    bool padded;
    tg_pad_mode mode;
    double fill;
    int norm;             /* channels of mean/std: 0, 1 or C */
    float *mean, *std;    /* norm values each, rounded to f32 as torch's */
};

void tg__augment_free(tg__augment *a)
{
    if (!a) return;
    free(a->mean);
    free(a->std);
    free(a);
}

static int check_crop(const tg_augment_options *o, const int64_t chw[3])
{
    const char *side[4] = {"width", "height", "width", "height"};
    for (int i = 0; i < 2; i++)
        TG_CHECK(o->crop[i] >= 0, TG_EINVAL, "loader_set_augment: crop[%d]=%lld must be >= 0",
                 i, (long long)o->crop[i]);
    TG_CHECK((o->crop[0] > 0) == (o->crop[1] > 0), TG_EINVAL,
             "loader_set_augment: crop={%lld, %lld} must be {0, 0} (none) or two extents >= 1",
             (long long)o->crop[0], (long long)o->crop[1]);
    bool any = false;
    for (int i = 0; i < 4; i++) {
        TG_CHECK(o->padding[i] >= 0 && o->padding[i] <= INT32_MAX, TG_EINVAL,
                 "loader_set_augment: padding[%d]=%lld must be in [0, %d]", i,
                 (long long)o->padding[i], INT32_MAX);
        any = any || o->padding[i] > 0;
        int64_t n = chw[i % 2 ? 1 : 2];
        TG_CHECK(o->padding_mode != TG_PAD_REFLECT || o->padding[i] < n, TG_EINVAL,
                 "loader_set_augment: padding[%d]=%lld must be < the images' %s %lld with "
                 "TG_PAD_REFLECT", i, (long long)o->padding[i], side[i], (long long)n);
    }
    TG_CHECK(!any || o->crop[0] > 0, TG_EINVAL,
             "loader_set_augment: padding is for the crop; crop must be given with it");
    TG_CHECK(o->padding_mode == TG_PAD_CONSTANT || o->padding_mode == TG_PAD_REFLECT ||
                 o->padding_mode == TG_PAD_REPLICATE, TG_EINVAL,
             "loader_set_augment: padding_mode=%d must be TG_PAD_CONSTANT, TG_PAD_REFLECT or "
             "TG_PAD_REPLICATE", (int)o->padding_mode);
    TG_CHECK(isfinite(o->fill), TG_EINVAL, "loader_set_augment: fill=%g must be finite",
             o->fill);
    int64_t ph = chw[1] + o->padding[1] + o->padding[3];
    int64_t pw = chw[2] + o->padding[0] + o->padding[2];
    TG_CHECK(o->crop[0] <= ph && o->crop[1] <= pw, TG_ESHAPE,
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

int tg__augment_new(tg__augment **out, const tg_augment_options *o, const tg_dataset *ds)
{
    int64_t chw[3];
    tg_dataset_image_shape(ds, chw);
    TG_CHECK(o->hflip_p >= 0 && o->hflip_p <= 1, TG_EINVAL,
             "loader_set_augment: hflip_p=%g must be in [0, 1]", o->hflip_p);
    TG_TRY(check_crop(o, chw));
    TG_TRY(check_norm(o, chw[0]));
    *out = NULL;
    if (o->hflip_p == 0 && o->crop[0] == 0 && o->norm_channels == 0) return TG_OK;
    tg__augment *a = tg__calloc(1, sizeof *a);
    int k = o->norm_channels;
    if (a && k > 0) {
        a->mean = tg__malloc((size_t)k * sizeof *a->mean);
        a->std = tg__malloc((size_t)k * sizeof *a->std);
    }
    if (!a || (k > 0 && (!a->mean || !a->std))) {
        tg__augment_free(a);
        return TG_ENOMEM;
    }
    a->hflip_p = o->hflip_p;
    memcpy(a->crop, o->crop, sizeof a->crop);
    const int64_t pad[4] = {o->padding[0], o->padding[2], o->padding[1], o->padding[3]};
    memcpy(a->pad, pad, sizeof a->pad);
    a->padded = pad[0] || pad[1] || pad[2] || pad[3];
    a->mode = o->padding_mode;
    a->fill = o->fill;
    a->norm = k;
    for (int i = 0; i < k; i++) {
        a->mean[i] = (float)o->mean[i];
        a->std[i] = (float)o->std[i];
    }
    *out = a;
    return TG_OK;
}

/* floor(u * n), u in [0, 1), kept below n (u * n may round up to n). */
static int64_t pick(double u, int64_t n)
{
    int64_t k = (int64_t)(u * (double)n);
    return k < n ? k : n - 1;
}

/* Sample index's window (top, left) among (nh, nw) offsets and flip. */
static void draw(uint64_t seed, int64_t epoch, int64_t index, int64_t nh, int64_t nw, double p,
                 int64_t *top, int64_t *left, bool *flip)
{
    tg_rng r = {.seed = seed + (uint64_t)epoch,
                .counter = (UINT64_C(1) << 63) + 4 * (uint64_t)index};
    double u0 = tg_rng_uniform(&r), u1 = tg_rng_uniform(&r), u2 = tg_rng_uniform(&r);
    *top = pick(u0, nh);
    *left = pick(u1, nw);
    *flip = u2 < p;
}

/* dst (C, h, w) = src (C, H, W)'s window at (top, left), mirrored left to
 * right when flip.  dst may be src when the window is the whole image. */
static void window(float *dst, const float *src, int64_t c, int64_t hh, int64_t ww, int64_t h,
                   int64_t w, int64_t top, int64_t left, bool flip)
{
    for (int64_t p = 0; p < c; p++)
        for (int64_t y = 0; y < h; y++) {
            const float *s = src + (p * hh + y + top) * ww + left;
            float *d = dst + (p * h + y) * w;
            if (!flip) {
                memmove(d, s, (size_t)w * sizeof *d);
                continue;
            }
            for (int64_t x = 0; x < w / 2; x++) {   /* in place when d == s */
                float t = s[x];
                d[x] = s[w - 1 - x];
                d[w - 1 - x] = t;
            }
            if (w % 2) d[w / 2] = s[w / 2];
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

int tg__augment_apply(const tg__augment *a, const tg_dataset *ds, tg_tensor **images,
                      const int64_t *ids, uint64_t seed, int64_t epoch)
{
    tg_tensor *x = *images, *src = x, *y;
    if (a->padded) {
        float fill = tg__dataset_map_unit(ds, a->fill);
        tg__lib_enter();   /* the padded batch is ours, not the caller's scope's */
        int rc = tg_pad(&src, x, 4, a->pad, a->mode, fill);
        tg__lib_leave();
        TG_TRY(rc);
        TG_ASSERT(tg_tensor_is_contiguous(src));
    }
    const int64_t *s = tg_tensor_shape(src);
    int64_t n = s[0], c = s[1], hh = s[2], ww = s[3];
    int64_t h = a->crop[0] ? a->crop[0] : hh, w = a->crop[0] ? a->crop[1] : ww;
    /* A window of the whole image is taken in place (x is the caller's alone). */
    y = h == hh && w == ww ? src : tg__tensor_empty(TG_F32, 4, (int64_t[]){n, c, h, w});
    if (!y) {
        if (src != x) tg_tensor_release(src);
        return TG_ENOMEM;
    }
    const float *sd = tg_tensor_cdata(src);
    float *yd = tg_tensor_data(y);
    for (int64_t i = 0; i < n; i++) {
        int64_t top, left;
        bool flip;
        draw(seed, epoch, ids[i], hh - h + 1, ww - w + 1, a->hflip_p, &top, &left, &flip);
        window(yd + i * c * h * w, sd + i * c * hh * ww, c, hh, ww, h, w, top, left, flip);
    }
    if (a->norm) normalize(a, yd, n, c, h * w);
    if (src != x && src != y) tg_tensor_release(src);
    if (y != x) tg_tensor_release(x);
    *images = y;
    return TG_OK;
}
