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
