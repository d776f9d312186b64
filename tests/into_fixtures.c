/* tests/into_fixtures.c - the harness of into_fixtures.h. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <string.h>

#include "helpers.h"
#include "into_fixtures.h"
#include "tapegrad/ops.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

static int count_step(const tg_backward_step *step, void *user)
{
    (void)step;
    ++*(int *)user;
    return TG_OK;
}

tg_tensor *th_into_weighted(const th_into_case *c, tg_tensor *p, uint64_t seed)
{
    tg_tensor *t = NULL, *m = NULL, *s = NULL;
    if (tg_tensor_ndim(p) >= 2) OK(tg_transpose(&t, p, 0, tg_tensor_ndim(p) - 1));
    else t = tg_tensor_retain(p);
    uint64_t sd = seed;
    tg_tensor *w = th_rand_tensor(&sd, tg_tensor_dtype(p), tg_tensor_ndim(t), tg_tensor_shape(t),
                                  c->wlo, c->whi);
    OK(tg_mul(&m, t, w));
    OK(tg_sum(&s, m));
    th_release_all(3, (tg_tensor *[]){t, m, w});
    return s;
}

tg_tensor *th_into_grad(const th_into_case *c, tg_dtype dt, th_into_mode md)
{
    tg_tensor *x0 = th_rand_uniform(TG_F64, c->ndim, c->shape, c->seed), *x = NULL;
    tg_tensor *y = NULL, *sl = NULL, *l = NULL;
    OK(tg_tensor_to_dtype(&x, x0, dt));
    OK(tg_tensor_set_requires_grad(x, true));
    OK(tg_mul_scalar(&y, x, 1.5));
    OK(tg_slice(&sl, y, 1, 1, 4, 2));   /* a first term: the pending sum is not zeros */
    l = th_into_weighted(c, sl, 99);
    for (int k = 0; k < 3; k++) {
        tg_tensor *p = c->pick(c->kind, y, k), *t = th_into_weighted(c, p, 5 + (uint64_t)k);
        tg_tensor *u = NULL;
        OK(tg_add(&u, l, t));
        th_release_all(3, (tg_tensor *[]){l, t, p});
        l = u;
    }
    int steps = 0;
    tg_backward_opts o = TG_BACKWARD_OPTS_INIT;
    o.create_graph = md == TH_INTO_CREATE_GRAPH;
    if (md == TH_INTO_WATCHED) OK(tg_backward_steps(l, NULL, NULL, count_step, &steps));
    else OK(tg_backward(l, NULL, &o));
    cr_assert(md == TH_INTO_WATCHED ? steps > 3 : steps == 0);
    tg_tensor *g = NULL;   /* detached: with create_graph .grad is on a tape */
    OK(tg_tensor_detach(&g, tg_tensor_grad(x)));
    th_release_all(5, (tg_tensor *[]){l, y, x, x0, sl});
    return g;
}

void th_into_same_bits(const th_into_case *c, const char *name)
{
    const tg_dtype dts[4] = {TG_F64, TG_F32, TG_F16, TG_BF16};
    for (int di = 0; di < 4; di++) {
        tg_tensor *into = th_into_grad(c, dts[di], TH_INTO_PLAIN);
        const int64_t n = tg_tensor_numel(into);
        for (int md = TH_INTO_WATCHED; md <= TH_INTO_CREATE_GRAPH; md++) {
            tg_tensor *bw = th_into_grad(c, dts[di], (th_into_mode)md);
            cr_assert(memcmp(tg_tensor_cdata(into), tg_tensor_cdata(bw),
                             (size_t)n * tg_dtype_size(dts[di])) == 0,
                      "%s %s: backward_into and backward (%s) differ", name,
                      tg_dtype_name(dts[di]),
                      md == TH_INTO_WATCHED ? "watched" : "create_graph");
            tg_tensor_release(bw);
        }
        double any = 0;
        for (int64_t i = 0; i < n; i++) any += fabs(th_at(into, i));
        cr_assert(any > 0, "%s %s: the gradient is all zeros", name, tg_dtype_name(dts[di]));
        tg_tensor_release(into);
    }
}
