/* tests/conv_fixtures.c - the random inputs and the cases shared by the
 * convolution tests (conv_fixtures.h). */
#include "conv_fixtures.h"

#include <string.h>

#include "helpers.h"

uint64_t rng_state = 88172645463325252ull;
tg_tensor *mk_rand(tg_dtype dt, int nd, const int64_t *shape)
{
    return th_rand_tensor(&rng_state, dt, nd, shape, -1.0, 1.0);
}

built build(const ccase *c, bool transpose, tg_dtype dt)
{
    built r = {0};
    int64_t xs[5] = {c->B, c->cin}, ws[5], bs[1] = {c->cout};
    ws[0] = transpose ? c->cin : c->cout;
    ws[1] = transpose ? c->cout / c->groups : c->cin / c->groups;
    memcpy(xs + 2, c->S, sizeof(int64_t) * (size_t)c->nsp);
    memcpy(ws + 2, c->K, sizeof(int64_t) * (size_t)c->nsp);
    int rc = transpose ? tg_conv_transpose_output_size(r.out_sp, c->nsp, c->S, c->K, &c->p)
                       : tg_conv_output_size(r.out_sp, c->nsp, c->S, c->K, &c->p);
    if (rc < 0) return r;
    r.ok = true;
    r.x = mk_rand(dt, c->nsp + 2, xs);
    r.w = mk_rand(dt, c->nsp + 2, ws);
    r.b = c->bias ? mk_rand(dt, 1, bs) : NULL;
    return r;
}

void unbuild(built *r)
{
    tg_tensor_release(r->x);
    tg_tensor_release(r->w);
    tg_tensor_release(r->b);
}
