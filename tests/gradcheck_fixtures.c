/* tests/gradcheck_fixtures.c - the inputs, the correct functions and the
 * test-only ops with wrong backwards shared by the tests of tg_gradcheck
 * (gradcheck_fixtures.h). */
#include "gradcheck_fixtures.h"

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "core/core.h"
#include "autograd/tape.h"
#include "tapegrad/ops.h"

const int64_t S23[2] = {2, 3}, S34[2] = {3, 4};

tg_tensor *make(tg_dtype dt, int ndim, const int64_t *shape, uint64_t seed,
                const char *name, bool rg)
{
    tg_tensor *t = NULL;
    tg_rng rng;
    tg_rng_init(&rng, seed);
    OK(tg_tensor_zeros(&t, dt, ndim, shape));
    OK(tg_tensor_rand_uniform(t, &rng, -1.0, 1.0));
    tg_tensor_set_name(t, name);
    OK(tg_tensor_set_requires_grad(t, rg));
    return t;
}

int f_tanh_mul(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    (void)user;
    tg_tensor *h = NULL;
    TG_TRY(tg_mul(&h, in[0], in[1]));
    int rc = tg_tanh(out, h);
    tg_tensor_release(h);
    return rc;
}

int f_matmul(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    (void)user;
    return tg_matmul(out, in[0], in[1]);
}

/* ---- a test-only op with a wrong backward: x * w whose w-gradient is
 * half what it should be ---- */

static int badmul_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                          const void *params)
{
    (void)n;
    (void)params;
    TG_TRY(tg_mul(out, in[0], in[1]));
    if (ctx) {
        tg__ctx_save(ctx, in[0]);
        tg__ctx_save(ctx, in[1]);
    }
    return TG_OK;
}

static int badmul_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    tg_tensor *x = NULL, *w = NULL, *gx = NULL;
    TG_TRY(tg__ctx_saved(ctx, 0, &x));
    TG_TRY(tg__ctx_saved(ctx, 1, &w));
    if (tg__ctx_needs_grad(ctx, 0)) TG_TRY(tg_mul(&gi[0], g, w));
    if (tg__ctx_needs_grad(ctx, 1)) {
        TG_TRY(tg_mul(&gx, g, x));
        int rc = tg_mul_scalar(&gi[1], gx, 0.5);   /* wrong on purpose */
        tg_tensor_release(gx);
        TG_TRY(rc);
    }
    return TG_OK;
}

static const tg_op_schema badmul_op = {.name = "test_badmul", .arity = 2, .amp = TG_AMP_KEEP,
                                 .forward = badmul_forward, .backward = badmul_backward};

int f_badmul(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)user;
    return tg_op_call(&badmul_op, out, n, in, NULL, 0);
}

static int lin_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                       const void *params)
{
    (void)ctx;
    (void)n;
    return tg_mul_scalar(out, in[0], ((const lin_params *)params)->a);
}

static int lin_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    const lin_params *p = tg__ctx_params(ctx);
    tg_tensor *kg = NULL, *s = NULL, *ds = NULL;
    int rc = tg_mul_scalar(&kg, g, p->k);
    if (rc >= 0) rc = tg_sum(&s, g);
    if (rc >= 0) rc = tg_mul_scalar(&ds, s, p->delta);
    if (rc >= 0) rc = tg_add(&gi[0], kg, ds);
    tg_tensor_release(kg);
    tg_tensor_release(s);
    tg_tensor_release(ds);
    return rc;
}

static const tg_op_schema lin_op = {.name = "test_lin", .arity = 1, .amp = TG_AMP_KEEP,
                              .forward = lin_forward, .backward = lin_backward};

/* user is a lin_params. */
int f_lin(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    return tg_op_call(&lin_op, out, n, in, user, sizeof(lin_params));
}
