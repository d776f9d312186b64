/* tests/augment_fixtures.c - the helpers of augment_fixtures.h. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "augment_fixtures.h"
#include "helpers.h"
#include "transforms_fixtures.h"

void pattern_image(float *x, int64_t c, int64_t h, int64_t w, int64_t seed)
{
    for (int64_t k = 0; k < c * h * w; k++) x[k] = (float)(pattern(seed, k) / 255.0);
}

double doc_uniform(uint64_t seed, int64_t epoch, int64_t index, int slot)
{
    tg_rng r = {seed + (uint64_t)epoch,
                ((uint64_t)1 << 62) + 64 * (uint64_t)index + (uint64_t)slot};
    return tg_rng_uniform(&r);
}

bool same_bits(const float *a, const float *b, int64_t n)
{
    return memcmp(a, b, (size_t)n * sizeof *a) == 0;
}

double max_diff(const float *a, const float *b, int64_t n)
{
    double m = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        m = d > m || isnan(d) ? d : m;
    }
    return m;
}

golden_case golden_case_at(const tg_st_file *g, const char *family, int k)
{
    char key[48];
    golden_case gc;
    snprintf(key, sizeof key, "%s%d.x", family, k);
    gc.x = tg_st_get(g, key);
    snprintf(key, sizeof key, "%s%d.y", family, k);
    gc.y = tg_st_get(g, key);
    snprintf(key, sizeof key, "%s%d.params", family, k);
    gc.params = tg_tensor_cdata(tg_st_get(g, key));
    snprintf(key, sizeof key, "%s%d.fills", family, k);
    const tg_tensor *f = tg_st_get(g, key);
    cr_assert(gc.x != NULL && gc.y != NULL && f != NULL, "golden case %s%d missing", family, k);
    gc.c = tg_tensor_dim(gc.x, 0);
    gc.h = tg_tensor_dim(gc.x, 1);
    gc.w = tg_tensor_dim(gc.x, 2);
    cr_assert(gc.c <= 3 && tg_tensor_numel(f) >= gc.c, "golden case %s%d: fills", family, k);
    for (int64_t i = 0; i < gc.c; i++) gc.fill[i] = (float)((const double *)tg_tensor_cdata(f))[i];
    snprintf(key, sizeof key, "%s%%d.interpolation", family);
    gc.mode = strcmp(meta(g, key, k), "nearest") == 0 ? TG_RESIZE_NEAREST : TG_RESIZE_BILINEAR;
    return gc;
}

void refusals_begin(refusals *r, const tg_augment_options *good)
{
    r->ds = pattern_dataset(2, 3, 4, 5, 1);
    tg_loader_options lo = {2, false, 0, false};
    OK(tg_loader_new(&r->ld, r->ds, &lo));
    OK(tg_loader_set_augment(r->ld, good));
    r->before = (run){0};
    drain(&r->before, r->ld);
}

void expect_refusal(refusals *r, const tg_augment_options *o, const char *want,
                    const char *what)
{
    cr_assert(eq(int, tg_loader_set_augment(r->ld, o), TG_EINVAL), "%s", what);
    cr_assert(strstr(tg_error_message(), want) != NULL, "%s: '%s' does not say %s", what,
              tg_error_message(), want);
    run after = {0};
    OK(tg_loader_reset(r->ld, 0));
    drain(&after, r->ld);
    cr_assert(eq(i64, after.n, r->before.n), "%s", what);
    cr_assert(same_bits(after.x, r->before.x, r->before.n), "%s changed the augmentation", what);
    run_free(&after);
}

void refusals_end(refusals *r)
{
    run_free(&r->before);
    tg_loader_free(r->ld);
    tg_dataset_release(r->ds);
}
