/* tests/norm_fixtures.c - the per-channel vectors, the comparison with a
 * reference and the arguments of a run, shared by the batch_norm tests
 * (norm_fixtures.h). */
#include "norm_fixtures.h"

#include <criterion/criterion.h>
#include <criterion/new/assert.h>
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

bn_args bn_args_of(tg_tensor *x, bool affine)
{
    const int64_t c = tg_tensor_dim(x, 1);
    uint64_t st = 302;   /* the same draws in every run */
    bn_args a = {.rm = th_rand_tensor(&st, TG_F32, 1, &c, -0.5, 0.5),
                 .rv = th_rand_tensor(&st, TG_F32, 1, &c, 0.5, 1.5)};
    if (affine) {
        a.w = th_rand_tensor(&st, TG_F32, 1, &c, 0.5, 2);
        a.b = th_rand_tensor(&st, TG_F32, 1, &c, -1, 1);
        tg_tensor_set_requires_grad(a.w, true);
        tg_tensor_set_requires_grad(a.b, true);
    }
    cr_assert(eq(int, tg_tensor_detach(&a.leaf, x), TG_OK));
    tg_tensor_set_requires_grad(a.leaf, true);
    return a;
}

void bn_args_release(bn_args *a)
{
    tg_tensor_release(a->leaf), tg_tensor_release(a->w), tg_tensor_release(a->b);
}
