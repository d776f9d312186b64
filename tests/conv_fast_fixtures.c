/* tests/conv_fast_fixtures.c - the random tensors shared by the tests of
 * the conv kernels' speed paths (conv_fast_fixtures.h). */
#include "conv_fast_fixtures.h"

#include <stdlib.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "helpers.h"
#include "core/core.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double rnd(void) { return th_uniform_pm1(&rng); }

tg_tensor *mk_rand(tg_dtype dt, int nd, const int64_t *shape)
{
    tg_tensor *t = NULL;
    cr_assert(eq(int, tg_tensor_zeros(&t, dt, nd, shape), TG_OK));
    double *v = malloc(sizeof(double) * (size_t)tg_tensor_numel(t));
    for (int64_t i = 0; i < tg_tensor_numel(t); i++) v[i] = rnd();
    tg__scatter(t, TG_F64, v);
    free(v);
    return t;
}
