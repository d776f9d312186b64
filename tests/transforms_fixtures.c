/* tests/transforms_fixtures.c - the helpers of transforms_fixtures.h. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "transforms_fixtures.h"

uint8_t pattern(int64_t seed, int64_t k)
{
    return (uint8_t)((seed + 7 * k + k * k / 3) % 256);
}

int ints(const char *s, int64_t *v, int n)
{
    int k = 0;
    if (!s || !strcmp(s, "-")) return 0;
    for (const char *p = s; k < n && *p;) {
        v[k++] = strtoll(p, (char **)&p, 10);
        if (*p == ',' || *p == ';') p++;
    }
    return k;
}

const char *meta(const tg_st_file *g, const char *fmt, int i)
{
    char key[64];
    snprintf(key, sizeof key, fmt, i);
    const char *v = tg_st_meta_get(g, key);
    cr_assert(v != NULL, "metadata %s", key);
    return v;
}

tg_dataset *aug_dataset(const tg_st_file *g, int64_t n, int64_t im[4])
{
    cr_assert(eq(int, ints(meta(g, "aug.image", 0), im, 4), 4));
    return pattern_dataset(n, im[0], im[1], im[2], im[3]);
}

tg_dataset *pattern_dataset(int64_t n, int64_t c, int64_t h, int64_t w, int64_t seed)
{
    int64_t per = c * h * w;
    double *v = malloc((size_t)(n * per) * sizeof *v), *l = malloc((size_t)n * sizeof *l);
    for (int64_t i = 0; i < n; i++) {
        l[i] = (double)i;
        for (int64_t k = 0; k < per; k++) v[i * per + k] = pattern(seed, k);
    }
    tg_tensor *x = th_tensor_from(TG_U8, 4, (int64_t[]){n, c, h, w}, v);
    tg_tensor *y = th_tensor_from(TG_I64, 1, &n, l);
    tg_dataset *ds;
    OK(tg_dataset_from_tensors(&ds, x, y));
    OK(tg_dataset_set_pixel_range(ds, TG_PIXELS_UNIT));
    tg_tensor_release(x);
    tg_tensor_release(y);
    free(v);
    free(l);
    return ds;
}

void draw_uniforms(uint64_t seed, int64_t epoch, int64_t index, double u[4])
{
    tg_rng r = {seed + (uint64_t)epoch, ((uint64_t)1 << 63) + 4 * (uint64_t)index};
    for (int i = 0; i < 4; i++) u[i] = tg_rng_uniform(&r);
}

bool is_window_flipped(const float *s, const float *padded, int64_t c, int64_t hh, int64_t ww,
                       int64_t h, int64_t w, int64_t top, int64_t left, bool hflip, bool vflip)
{
    for (int64_t p = 0; p < c; p++)
        for (int64_t y = 0; y < h; y++)
            for (int64_t x = 0; x < w; x++) {
                int64_t sy = top + (vflip ? h - 1 - y : y), sx = left + (hflip ? w - 1 - x : x);
                float want = padded[(p * hh + sy) * ww + sx];
                if (memcmp(&s[(p * h + y) * w + x], &want, 4) != 0) return false;
            }
    return true;
}

void run_free(run *r)
{
    free(r->x);
    free(r->labels);
    memset(r, 0, sizeof *r);
}

void drain(run *r, tg_loader *ld)
{
    tg_tensor *x, *y;
    while (tg_loader_next(ld, &x, &y) == 1) {
        int64_t nx = tg_tensor_numel(x), ny = tg_tensor_numel(y);
        r->x = realloc(r->x, (size_t)(r->n + nx) * sizeof *r->x);
        r->labels = realloc(r->labels, (size_t)(r->n_labels + ny) * sizeof *r->labels);
        memcpy(r->x + r->n, tg_tensor_cdata(x), (size_t)nx * sizeof *r->x);
        memcpy(r->labels + r->n_labels, tg_tensor_cdata(y), (size_t)ny * sizeof *r->labels);
        r->n += nx;
        r->n_labels += ny;
        tg_tensor_release(x);
        tg_tensor_release(y);
    }
}

const double MEAN3[3] = {0.485, 0.456, 0.406}, STD3[3] = {0.229, 0.224, 0.225};

tg_augment_options all_of_them(void)
{
    tg_augment_options o = {0.5, {5, 6}, {2, 1, 3, 2}, TG_PAD_REFLECT, 0, 3, MEAN3, STD3,
                            0, false, AUG_NEW_OFF};
    return o;
}
