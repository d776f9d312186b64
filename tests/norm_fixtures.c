/* tests/norm_fixtures.c - the per-channel vectors and the comparison with a
 * reference shared by the batch_norm tests (norm_fixtures.h). */
#include "norm_fixtures.h"

#include <criterion/criterion.h>
#include <math.h>

#include "helpers.h"

tg_tensor *vec(tg_dtype dt, int64_t c, uint64_t seed, double lo, double hi)
{
    tg_tensor *t = th_rand_uniform(dt, 1, &c, seed);
    for (int64_t i = 0; i < c; i++) tg_tensor_set_flat(t, i, lo + (hi - lo) * (th_at(t, i) + 1) / 2);
    return t;
}

void expect_close(const tg_tensor *t, const double *want, double tol, const char *what)
{
    for (int64_t i = 0; i < tg_tensor_numel(t); i++)
        cr_assert(fabs(th_at(t, i) - want[i]) <= tol * (1 + fabs(want[i])), "%s [%lld]: %.9g vs %.9g",
                  what, (long long)i, th_at(t, i), want[i]);
}
