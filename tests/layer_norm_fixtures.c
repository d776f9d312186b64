/* tests/layer_norm_fixtures.c - the cases and their inputs
 * shared by the layer_norm and group_norm tests (layer_norm_fixtures.h). */
#include "layer_norm_fixtures.h"

#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>

#include "helpers.h"

int run_case(tg_tensor **y, const ln_case *c, tg_tensor *x, tg_tensor *w, tg_tensor *b)
{
    return c->group ? tg_group_norm(y, x, c->groups, w, b, c->eps)
                    : tg_layer_norm(y, x, c->n_norm, c->norm_shape, w, b, c->eps);
}

ln_case make_case(bool group, int nd, const int64_t *xs, int n_norm, int64_t groups,
                  bool w, bool b)
{
    ln_case c = {.group = group, .n_norm = n_norm, .groups = groups, .eps = 1e-5};
    for (int d = 0; d < n_norm; d++) c.norm_shape[d] = xs[nd - n_norm + d];
    c.w = w ? (tg_tensor *)&c : NULL;   /* markers: the tensors are the caller's */
    c.b = b ? (tg_tensor *)&c : NULL;
    return c;
}

tg_tensor *affine_tensor(const ln_case *c, int nd, const int64_t *xs, uint64_t seed,
                         double lo, double hi, tg_dtype dt)
{
    tg_tensor *t = c->group ? th_rand_uniform(dt, 1, &xs[1], seed)
                            : th_rand_uniform(dt, c->n_norm, c->norm_shape, seed);
    for (int64_t i = 0; i < tg_tensor_numel(t); i++)
        tg_tensor_set_flat(t, i, lo + (hi - lo) * (th_at(t, i) + 1) / 2);
    (void)nd;
    return t;
}
